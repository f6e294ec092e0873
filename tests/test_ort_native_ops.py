"""rnnx's ONNX Runtime custom-op library (``rnnx.runtime.ortops``): native SRUScan and CausalLinearAttention.

* Every SRUScan variant the exporter writes (k 3 / 4, skip term, tanh, bidirectional, pad mask in every mask
  dtype, and the tensorrt target's fixed layout with a 1-element dummy x and an all-false mask) and the
  attention of rnnx domain version 2 (heads packed, ``num_heads``) with and without states, with a pad mask
  (bool, int64, float; pads at the start, middle and end of a row and a fully padded row) and time-major, in
  one-node graphs that have no function body, so only the library can run them, against the naive time loops
  (``sru_scan_naive``, ``causal_linear_attention_packed``), for every activation dtype (fp32, fp16, bf16, fp64);
  tolerances relative to the magnitude, per dtype. The same cases again with an AddressSanitizer build of the
  library.
* Both demo exports (both targets, and fp16) give identical greedy tokens with and without the library, and
  the ORT profiler shows both ops run as native kernels (no ``Scan``, no ``LinearAttention``) only with it.
* An attention node of rnnx domain version 1 gets no native kernel: with its function body ONNX Runtime runs
  the body, without one it refuses the model naming the op.
* Version gate and errors: one line each.

Needs the library that ``scripts/setup.sh`` builds (``python3 -m rnnx.runtime.ortops``); skips and says so
without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

pytest.importorskip("onnxruntime")

import onnxruntime as ort

import rnnx.runtime as rt
from rnnx.export import export_model
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.models.ops.causal_linear_attention.naive import causal_linear_attention_packed
from rnnx.models.ops.sru_scan.naive import sru_scan_naive
from rnnx.runtime import ortops
from rnnx.runtime.backends.base import BackendUnavailable
from rnnx.runtime.backends.ort_backend import OrtBackend
from rnnx.runtime.contract.artifact import TARGETS
from rnnx.runtime.contract.ops import ALL_OPS, CAUSAL_LINEAR_ATTENTION, ONNX_DOMAIN, ONNX_DOMAIN_VERSION, SRU_SCAN

needs_library = pytest.mark.skipif(
    ortops.find_library() is None,
    reason=f"{ortops.library_path()} not built (or onnxruntime < 1.{ortops.ORT_API_VERSION}): run scripts/setup.sh",
)
TOLERANCE = 1e-5
#: (k, skip, tanh, directions, mask, tensorrt layout)
VARIANTS = [
    (k, skip, tanh, D, mask, False) for k in (3, 4) for skip in (0, 1) for tanh in (0, 1) for D in (1, 2)
    for mask in (False, True)
] + [(3, 1, 0, 1, False, True), (4, 0, 1, 2, False, True)]  # fmt: skip


def one_node_model(
    k: int, skip: int, tanh: int, D: int, d: int, with_x: bool, with_mask: bool,
    elem: int = TensorProto.FLOAT, mask_elem: int = TensorProto.BOOL,
) -> bytes:  # fmt: skip
    """A one-node SRUScan graph with no function body: activations in ``elem``, c0 / c_last fp32."""
    inputs = ["U", "x" if with_x else "", "weight_c", "bias", "c0", "mask_pad" if with_mask else ""]
    node = helper.make_node(
        SRU_SCAN.onnx_name, inputs, ["h", "c_last"], domain="rnnx", hidden_size=d, num_directions=D,
        num_matrices=k, has_skip_term=skip, use_tanh=tanh, scale_x=0.5,
    )  # fmt: skip
    f32 = TensorProto.FLOAT
    values = [helper.make_tensor_value_info("U", elem, ["L", "B", D * d * k])]
    if with_x:
        values.append(helper.make_tensor_value_info("x", elem, None))
    values += [
        helper.make_tensor_value_info("weight_c", elem, [2 * D * d]),
        helper.make_tensor_value_info("bias", elem, [2 * D * d]),
        helper.make_tensor_value_info("c0", f32, ["B", D * d]),
    ]
    if with_mask:
        values.append(helper.make_tensor_value_info("mask_pad", mask_elem, ["L", "B"]))
    outputs = [helper.make_tensor_value_info("h", elem, None), helper.make_tensor_value_info("c_last", f32, None)]
    graph = helper.make_graph([node], "sru", values, outputs)
    return _one_node_model_bytes(graph)


def one_node_attention_model(
    with_states: bool, elem: int = TensorProto.FLOAT, eps: float = 1e-6, num_heads: int = 2,
    mask_elem: int | None = None, time_major: bool = False,
) -> bytes:  # fmt: skip
    """A one-node CausalLinearAttention graph (rnnx domain version 2) with no function body: q, k, v, out
    (heads packed, (B, L, H*.), or (L, B, H*.) with ``time_major``) in ``elem``, states fp32; without
    ``with_states`` S0 and z0 are left out (the onnxruntime target's layout); a ``mask_pad`` in ``mask_elem``
    when given."""
    inputs = ["q", "k", "v", *(["S0", "z0"] if with_states else ["", ""]), "mask_pad" if mask_elem else ""]
    while not inputs[-1]:
        inputs.pop()
    node = helper.make_node(
        CAUSAL_LINEAR_ATTENTION.onnx_name, inputs, ["out", "S_last", "z_last"], domain="rnnx", eps=eps,
        num_heads=num_heads, time_major=int(time_major),
    )  # fmt: skip
    f32 = TensorProto.FLOAT
    steps = ["L", "B"] if time_major else ["B", "L"]
    values = [helper.make_tensor_value_info(n, elem, [*steps, None]) for n in ("q", "k", "v")]
    if with_states:
        values += [helper.make_tensor_value_info("S0", f32, None), helper.make_tensor_value_info("z0", f32, None)]
    if mask_elem:
        values.append(helper.make_tensor_value_info("mask_pad", mask_elem, steps))
    outputs = [helper.make_tensor_value_info("out", elem, None)]
    outputs += [helper.make_tensor_value_info(n, f32, None) for n in ("S_last", "z_last")]
    return _one_node_model_bytes(helper.make_graph([node], "attention", values, outputs))


def _one_node_model_bytes(graph: onnx.GraphProto, rnnx_version: int = ONNX_DOMAIN_VERSION) -> bytes:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(ONNX_DOMAIN, rnnx_version)]
    )
    return model.SerializeToString()


def with_fp32_boundary(model: bytes) -> bytes:
    """The graph with its bf16 inputs and outputs taken and given as fp32 (``<name>_fp32``) through Cast
    nodes (numpy has no bf16), the node in between unchanged."""
    m = onnx.load_from_string(model)
    g = m.graph
    casts_in, casts_out = [], []
    for value in [*g.input, *g.output]:
        elem = value.type.tensor_type.elem_type
        if elem != TensorProto.BFLOAT16:
            continue
        outer = value.name + "_fp32"
        if value in g.input:
            casts_in.append(helper.make_node("Cast", [outer], [value.name], to=elem))
        else:
            casts_out.append(helper.make_node("Cast", [value.name], [outer], to=TensorProto.FLOAT))
        value.name = outer
        value.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = [*casts_in, *g.node, *casts_out]
    del g.node[:]
    g.node.extend(nodes)
    return m.SerializeToString()


def native_session(model: bytes, profile_dir: Path | None = None) -> ort.InferenceSession:
    """A CPU session with the library registered; profiling into ``profile_dir`` when given."""
    options = ort.SessionOptions()
    ortops.register(options)
    if profile_dir is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_dir / "profile")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


@needs_library
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "k{}-skip{}-tanh{}-D{}-mask{}-trt{}".format(*v))
def test_native_sru_scan_matches_the_naive_loop(variant):
    k, skip, tanh, D, mask, trt_layout = variant
    L, B, d = 9, 3, 40  # d > 32: more than one block of hidden units per row
    g = torch.Generator().manual_seed(sum(map(int, variant)) + 7 * D)
    U = torch.randn(L, B, D * d * k, generator=g)
    x = torch.randn(L, B, D * d, generator=g)
    w, b = torch.randn(2 * D * d, generator=g) * 0.5, torch.randn(2 * D * d, generator=g) * 0.5
    c0 = torch.randn(B, D * d, generator=g)
    pad = torch.zeros(L, B, dtype=torch.bool)
    if mask:
        pad[6:, 0] = True
        pad[8:, 2] = True
    reads_x = bool(skip) and k == 3
    h_ref, c_ref = sru_scan_naive(
        U, x if reads_x else None, w, b, c0, pad if mask else None, hidden_size=d, num_directions=D,
        num_matrices=k, has_skip_term=bool(skip), use_tanh=bool(tanh), scale_x=0.5,
    )  # fmt: skip
    feeds = {"U": U.numpy(), "weight_c": w.numpy(), "bias": b.numpy(), "c0": c0.numpy()}
    with_x, with_mask = reads_x or trt_layout, mask or trt_layout
    if with_x:
        feeds["x"] = x.numpy() if reads_x else np.zeros(1, np.float32)  # the tensorrt layout's dummy x
    if with_mask:
        feeds["mask_pad"] = pad.numpy()
    h, c_last = native_session(one_node_model(k, skip, tanh, D, d, with_x, with_mask)).run(None, feeds)
    for got, want in ((h, h_ref.numpy()), (c_last, c_ref.numpy())):
        assert np.max(np.abs(got - want)) <= TOLERANCE * max(1.0, float(np.max(np.abs(want))))


FP16_TOLERANCE = 2e-3  # fp16 outputs: about two halves of an fp16 ulp (2^-11) relative to the magnitude


def close(got: np.ndarray, want: np.ndarray, tolerance: float) -> bool:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False
    if want.size == 0:
        return True
    return float(np.max(np.abs(got - want))) <= tolerance * max(1.0, float(np.max(np.abs(want))))


MASK_TYPES = [np.uint8, np.int64, np.float32, np.float16, np.float64]
FP16_VARIANTS = [(3, 1, 0, 2, True, False), (4, 1, 1, 1, True, True)]


@needs_library
@pytest.mark.parametrize("mask_type", MASK_TYPES)
@pytest.mark.parametrize("variant", FP16_VARIANTS, ids=["k3-D2", "k4-trt"])
def test_native_sru_scan_fp16_io_and_mask_types(variant, mask_type):
    """fp16 U / x / weight_c / bias / h with fp32 state against the naive loop on the same (fp16-rounded)
    values in fp32; the pad mask as uint8, int64 or float (non-zero = pad) instead of bool."""
    k, skip, tanh, D, mask, trt_layout = variant
    L, B, d = 7, 2, 40
    g = torch.Generator().manual_seed(11 * k + D)
    U = torch.randn(L, B, D * d * k, generator=g).half()
    x = torch.randn(L, B, D * d, generator=g).half()
    w, b = (torch.randn(2 * D * d, generator=g) * 0.5).half(), (torch.randn(2 * D * d, generator=g) * 0.5).half()
    c0 = torch.randn(B, D * d, generator=g)
    pad = torch.zeros(L, B, dtype=torch.bool)
    pad[5:, 1] = True
    reads_x = bool(skip) and k == 3
    h_ref, c_ref = sru_scan_naive(
        U.float(), x.float() if reads_x else None, w.float(), b.float(), c0, pad, hidden_size=d,
        num_directions=D, num_matrices=k, has_skip_term=bool(skip), use_tanh=bool(tanh), scale_x=0.5,
    )  # fmt: skip
    mask_elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(mask_type))
    model = one_node_model(k, skip, tanh, D, d, True, True, TensorProto.FLOAT16, mask_elem)
    feeds = {"U": U.numpy(), "x": x.numpy() if reads_x else np.zeros(1, np.float16), "weight_c": w.numpy(),
             "bias": b.numpy(), "c0": c0.numpy(), "mask_pad": pad.numpy().astype(mask_type)}  # fmt: skip
    h, c_last = native_session(model).run(None, feeds)
    assert h.dtype == np.float16 and c_last.dtype == np.float32
    assert close(h, h_ref.numpy(), FP16_TOLERANCE) and close(c_last, c_ref.numpy(), TOLERANCE)
    assert np.all(h[5:, 1] == 0)  # pad steps give h = 0


ATTENTION_CASES = [(2, 3, 9, 16, 24, True), (1, 4, 33, 32, 32, False), (2, 1, 1, 8, 5, True), (1, 2, 0, 4, 4, True)]
ELEMS = [TensorProto.FLOAT, TensorProto.FLOAT16]


@needs_library
@pytest.mark.parametrize("elem", ELEMS, ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=lambda c: "B{}-H{}-L{}-E{}-M{}-states{}".format(*c))
def test_native_causal_linear_attention_matches_the_naive_loop(case, elem):
    """Every shape class (E != M, a decode step L = 1, an empty sequence L = 0), with and without initial
    states, fp32 and fp16 I/O, heads packed, against the naive time loop on the same values (fp32 state)."""
    B, H, L, E, M, with_states = case
    g = torch.Generator().manual_seed(B * 100 + L)
    dtype = torch.float16 if elem == TensorProto.FLOAT16 else torch.float32
    q, k = (torch.randn(B, L, H * E, generator=g).to(dtype) for _ in range(2))
    v = torch.randn(B, L, H * M, generator=g).to(dtype)
    S0, z0 = torch.rand(B, H, E, M, generator=g), torch.rand(B, H, E, generator=g) + 0.5
    out_ref, S_ref, z_ref = causal_linear_attention_packed(
        q.float(), k.float(), v.float(), H, S0 if with_states else None, z0 if with_states else None, eps=1e-6
    )
    feeds = {"q": q.numpy(), "k": k.numpy(), "v": v.numpy()}
    if with_states:
        feeds.update(S0=S0.numpy(), z0=z0.numpy())
    out, S_last, z_last = native_session(one_node_attention_model(with_states, elem, num_heads=H)).run(None, feeds)
    assert out.shape == (B, L, H * M) and S_last.shape == (B, H, E, M) and z_last.shape == (B, H, E)
    assert out.dtype == (np.float16 if dtype == torch.float16 else np.float32)
    assert close(out, out_ref.numpy(), FP16_TOLERANCE if dtype == torch.float16 else TOLERANCE)
    assert close(S_last, S_ref.numpy(), TOLERANCE) and close(z_last, z_ref.numpy(), TOLERANCE)


#: Pad-mask element types of the attention cases (None: no mask input).
ATTENTION_MASK_TYPES = [None, np.bool_, np.int64, np.float32]
#: (mask type, time_major, states)
ATTENTION_MASK_VARIANTS = [
    (mask_type, time_major, states) for mask_type in ATTENTION_MASK_TYPES for time_major in (False, True)
    for states in (False, True)
]  # fmt: skip


def attention_pads(B: int, L: int) -> torch.Tensor:
    """A (B, L) pad mask, B >= 4: pads at the start of row 0, in the middle of row 1, at the end of row 2, and
    a fully padded row 3; the other rows have none."""
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[0, :2] = True
    pad[1, L // 2 - 1 : L // 2 + 1] = True
    pad[2, -2:] = True
    pad[3] = True
    return pad


@needs_library
@pytest.mark.parametrize(
    "variant", ATTENTION_MASK_VARIANTS,
    ids=lambda v: "{}-tm{}-states{}".format(v[0].__name__ if v[0] else "nomask", int(v[1]), v[2]),
)  # fmt: skip
def test_native_causal_linear_attention_pad_mask_and_time_major(variant):
    """The pad mask as bool, int64 or float (non-zero = pad) and absent, batch-first and time-major
    ((L, B, H*.) and an (L, B) mask), with and without initial states, against the naive loop: a pad step
    carries S and z (a fully padded row ends with its initial state) and its output is still read from q and
    the carried state."""
    mask_type, time_major, with_states = variant
    B, H, L, E, M = 5, 3, 8, 8, 6
    g = torch.Generator().manual_seed(ATTENTION_MASK_VARIANTS.index(variant))
    steps = (L, B) if time_major else (B, L)
    q, k = (torch.randn(*steps, H * E, generator=g) for _ in range(2))
    v = torch.randn(*steps, H * M, generator=g)
    S0, z0 = torch.rand(B, H, E, M, generator=g), torch.rand(B, H, E, generator=g) + 0.5
    pad = attention_pads(B, L)
    pad = pad.t().contiguous() if time_major else pad
    out_ref, S_ref, z_ref = causal_linear_attention_packed(
        q, k, v, H, S0 if with_states else None, z0 if with_states else None,
        pad if mask_type else None, eps=1e-6, time_major=time_major,
    )  # fmt: skip
    feeds = {"q": q.numpy(), "k": k.numpy(), "v": v.numpy()}
    if with_states:
        feeds.update(S0=S0.numpy(), z0=z0.numpy())
    mask_elem = None
    if mask_type:
        feeds["mask_pad"] = pad.numpy().astype(mask_type)
        mask_elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(mask_type))
    model = one_node_attention_model(with_states, num_heads=H, mask_elem=mask_elem, time_major=time_major)
    out, S_last, z_last = native_session(model).run(None, feeds)
    assert out.shape == (*steps, H * M)
    assert close(out, out_ref.numpy(), TOLERANCE)
    assert close(S_last, S_ref.numpy(), TOLERANCE) and close(z_last, z_ref.numpy(), TOLERANCE)
    if mask_type:  # the fully padded row 3 ends with its initial state, exactly
        S_init, z_init = (S0, z0) if with_states else (torch.zeros_like(S0), torch.zeros_like(z0))
        assert np.array_equal(S_last[3], S_init[3].numpy()) and np.array_equal(z_last[3], z_init[3].numpy())


TORCH_DTYPES = {
    TensorProto.FLOAT16: torch.float16,
    TensorProto.BFLOAT16: torch.bfloat16,
    TensorProto.DOUBLE: torch.float64,
}
#: Output tolerance per activation dtype, relative to the magnitude: about two halves of an ulp of the dtype.
DTYPE_TOLERANCE = {TensorProto.FLOAT16: FP16_TOLERANCE, TensorProto.BFLOAT16: 8e-3, TensorProto.DOUBLE: 1e-12}


@needs_library
@pytest.mark.parametrize("elem", list(TORCH_DTYPES), ids=["fp16", "bf16", "fp64"])
def test_every_activation_dtype_has_a_native_kernel(elem, tmp_path):
    """SRUScan (D 2, k 3, skip, mask) and CausalLinearAttention (with states and a mask) with fp16 / bf16 / fp64
    activations (fp64 state for fp64, else fp32) run on the library's kernels, against the naive loops on
    the same rounded values; so registering the library never leaves a node of the exporter's dtypes
    without a kernel."""
    dtype = TORCH_DTYPES[elem]
    state = torch.float64 if dtype == torch.float64 else torch.float32
    state_elem = TensorProto.DOUBLE if dtype == torch.float64 else TensorProto.FLOAT
    g = torch.Generator().manual_seed(elem)
    L, B, D, d = 6, 2, 2, 40
    U, x = torch.randn(L, B, D * d * 3, generator=g).to(dtype), torch.randn(L, B, D * d, generator=g).to(dtype)
    w, b = (torch.randn(2 * D * d, generator=g) * 0.5).to(dtype), (torch.randn(2 * D * d, generator=g) * 0.5).to(dtype)
    c0, pad = torch.randn(B, D * d, generator=g).to(state), torch.zeros(L, B, dtype=torch.bool)
    pad[4:, 0] = True
    h_ref, c_ref = sru_scan_naive(U.to(state), x.to(state), w.to(state), b.to(state), c0, pad, hidden_size=d,
                                  num_directions=D, num_matrices=3, scale_x=0.5)  # fmt: skip
    model = one_node_model(3, 1, 0, D, d, True, True, elem)
    m = onnx.load_from_string(model)
    m.graph.input[4].type.tensor_type.elem_type = m.graph.output[1].type.tensor_type.elem_type = state_elem
    session = native_session(with_fp32_boundary(m.SerializeToString()), profile_dir=tmp_path)
    h, c_last = session.run(None, feeds_for(session, U=U, x=x, weight_c=w, bias=b, c0=c0, mask_pad=pad))
    state_tolerance = DTYPE_TOLERANCE[elem] if elem == TensorProto.DOUBLE else TOLERANCE
    assert close(h, h_ref.numpy(), DTYPE_TOLERANCE[elem]) and close(c_last, c_ref.numpy(), state_tolerance)
    assert "SRUScan" in profiled_ops(session)

    q, k = (torch.randn(2, 7, 3 * 8, generator=g).to(dtype) for _ in range(2))
    v, S0, z0 = (
        torch.randn(2, 7, 3 * 5, generator=g).to(dtype),
        torch.rand(2, 3, 8, 5).to(state),
        torch.rand(2, 3, 8).to(state),
    )
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[1, 2:4] = True
    out_ref, S_ref, z_ref = causal_linear_attention_packed(
        q.to(state), k.to(state), v.to(state), 3, S0, z0, pad, eps=1e-6
    )
    m = onnx.load_from_string(one_node_attention_model(True, elem, num_heads=3, mask_elem=TensorProto.BOOL))
    for value in (*m.graph.input, *m.graph.output):
        if value.name in ("S0", "z0", "S_last", "z_last"):
            value.type.tensor_type.elem_type = state_elem
    session = native_session(with_fp32_boundary(m.SerializeToString()), profile_dir=tmp_path)
    out, S_last, z_last = session.run(None, feeds_for(session, q=q, k=k, v=v, S0=S0, z0=z0, mask_pad=pad))
    assert close(out, out_ref.numpy(), DTYPE_TOLERANCE[elem])
    assert close(S_last, S_ref.numpy(), state_tolerance) and close(z_last, z_ref.numpy(), state_tolerance)
    assert "CausalLinearAttention" in profiled_ops(session)


def feeds_for(session: ort.InferenceSession, **tensors: torch.Tensor) -> dict[str, np.ndarray]:
    """Feeds by input name: a tensor as it is, or as fp32 where :func:`with_fp32_boundary` renamed it."""
    names = {i.name for i in session.get_inputs()}
    return {
        name if name in names else f"{name}_fp32": t.numpy() if name in names else t.float().numpy()
        for name, t in tensors.items()
    }


def profiled_ops(session: ort.InferenceSession) -> set[str]:
    """The op types ONNX Runtime's profiler saw run (the session was made with profiling on)."""
    events = json.load(open(session.end_profiling()))
    return {e["args"].get("op_name") for e in events if e.get("cat") == "Node"}


def without_input_shapes(model: bytes) -> bytes:
    """The graph with its inputs' shapes (and so their ranks) left unknown: ONNX Runtime then checks none."""
    m = onnx.load_from_string(model)
    for value in m.graph.input:
        value.type.tensor_type.ClearField("shape")
    return m.SerializeToString()


@needs_library
def test_native_ops_refuse_bad_shapes_with_the_input_named():
    session = native_session(without_input_shapes(one_node_attention_model(True, mask_elem=TensorProto.BOOL)))
    q, S0, z0 = np.zeros((1, 3, 2 * 4), np.float32), np.zeros((1, 2, 4, 4), np.float32), np.zeros((1, 2, 4), np.float32)
    good = {"q": q, "k": q, "v": q, "S0": S0, "z0": z0, "mask_pad": np.zeros((1, 3), bool)}
    refusals = [
        ({"q": q.reshape(1, 2, 3, 4), "k": q.reshape(1, 2, 3, 4)}, "q, k, v must be 3-D (B, L, H*E)"),  # heads apart
        ({"q": q[..., :7], "k": q[..., :7]}, "the last axis of q, k and v must be a multiple of num_heads"),
        ({"k": q[:, :2]}, "k must have q's shape"),
        ({"v": q[:, :2]}, "v must have q's leading two axes"),
        ({"S0": np.zeros((1, 2, 4, 5), np.float32)}, "S0 must be (B, H, E, M)"),
        ({"z0": np.zeros((1, 2, 5), np.float32)}, "z0 must be (B, H, E)"),
        ({"mask_pad": np.zeros((1, 2), bool)}, "mask_pad must be (B, L)"),
    ]
    for bad, message in refusals:
        with pytest.raises(Exception, match=re.escape(f"rnnx CausalLinearAttention: {message}")):
            session.run(None, {**good, **bad})
    time_major = native_session(one_node_attention_model(False, mask_elem=TensorProto.BOOL, time_major=True))
    with pytest.raises(Exception, match=re.escape("rnnx CausalLinearAttention: mask_pad must be (L, B)")):
        time_major.run(None, {"q": q, "k": q, "v": q, "mask_pad": np.zeros((2, 1), bool)})
    int16_mask = native_session(one_node_attention_model(False, mask_elem=TensorProto.INT16))
    with pytest.raises(Exception, match="rnnx CausalLinearAttention: mask_pad must be bool, uint8, int8, int32"):
        int16_mask.run(None, {"q": q, "k": q, "v": q, "mask_pad": np.zeros((1, 3), np.int16)})
    no_heads = native_session(one_node_attention_model(False, num_heads=0))
    with pytest.raises(Exception, match="rnnx CausalLinearAttention: attribute num_heads must be positive"):
        no_heads.run(None, {"q": q, "k": q, "v": q})
    sru = native_session(one_node_model(3, 1, 0, 1, 8, True, True))
    with pytest.raises(Exception, match="rnnx SRUScan: x must be"):
        sru.run(None, {"U": np.zeros((2, 1, 24), np.float32), "x": np.zeros((2, 1, 5), np.float32),
                       "weight_c": np.zeros(16, np.float32), "bias": np.zeros(16, np.float32),
                       "c0": np.zeros((1, 8), np.float32), "mask_pad": np.zeros((2, 1), bool)})  # fmt: skip


PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 10], [9, 8, 7, 10], [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 10]]


@needs_library
@pytest.mark.parametrize("case", [(n, t) for n in DEMO_CHECKPOINTS for t in TARGETS], ids="-".join)
def test_demo_export_same_tokens_with_and_without_the_library(case, demo_exports):
    export = demo_exports[case]
    native = rt.Session(OrtBackend(export, native_ops=True))
    bodies = rt.Session(OrtBackend(export, native_ops=False))
    assert "native rnnx ops" in native.backend.describe() and "native" not in bodies.backend.describe()
    assert rt.load(export, backend="onnxruntime").backend.native_ops  # on by default on the CPU
    assert native.generate_all(PROMPTS, 24, temperature=0) == bodies.generate_all(PROMPTS, 24, temperature=0)


@needs_library
@pytest.mark.parametrize("case", [("srupp_linear_copy", "onnxruntime"), ("linear_transformer_copy", "tensorrt")])
def test_fp16_demo_export_same_tokens_with_and_without_the_library(case, tmp_path):
    """fp16 exports (fp16 activations, fp32 state) register the library by default too."""
    name, target = case
    export = export_model(str(demo_checkpoint_path(name)), tmp_path / "fp16", target=target, precision="fp16",
                          check=False).out_dir  # fmt: skip
    native = rt.load(export, backend="onnxruntime")
    bodies = rt.Session(OrtBackend(export, native_ops=False))
    assert native.backend.native_ops and "fp16" in native.backend.describe()
    assert native.generate_all(PROMPTS, 24, temperature=0) == bodies.generate_all(PROMPTS, 24, temperature=0)


def demo_feeds(session: ort.InferenceSession) -> dict[str, np.ndarray]:
    """Feeds for a demo export: batch 2, 5 steps, every token and mask entry 1, zero states."""
    feeds = {}
    for i in session.get_inputs():
        shape = [2 if "batch" in str(s) else 5 if isinstance(s, str) else s for s in i.shape]
        feeds[i.name] = np.ones(shape, np.int64) if "int64" in i.type else np.zeros(shape, np.float32)
    return feeds


@needs_library
def test_the_profiler_shows_the_native_kernel(demo_exports, tmp_path):
    model = str(demo_exports[("srupp_linear_copy", "onnxruntime")] / "model.onnx")
    ops = {}
    for native in (True, False):
        options = ort.SessionOptions()
        if native:
            ortops.register(options)
        options.enable_profiling = True
        options.profile_file_prefix = str(tmp_path / f"native-{native}")
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        session.run(None, demo_feeds(session))
        events = json.load(open(session.end_profiling()))
        ops[native] = {e["args"].get("op_name") for e in events if e.get("cat") == "Node"}
    assert {"SRUScan", "CausalLinearAttention"} <= ops[True] and not {"Scan", "LinearAttention"} & ops[True]
    assert {"Scan", "LinearAttention"} <= ops[False] and not {"SRUScan", "CausalLinearAttention"} & ops[False]


@needs_library
def test_a_version_1_attention_node_gets_no_native_kernel(demo_exports, tmp_path):
    """A model importing rnnx domain version 1 (here the current export relabelled; an rnnx < 0.4 export has
    heads apart, (B, H, L, E), and its own body): the library's attention kernel registers from version 2, so
    with the library ONNX Runtime runs the attention node's function body (com.microsoft LinearAttention) while
    SRUScan, unchanged since version 1, still runs natively; the outputs are the version 2 model's. A version 1
    node with no function body has nothing to run on: ONNX Runtime refuses the model at load, naming the op."""
    model = onnx.load(str(demo_exports[("srupp_linear_copy", "onnxruntime")] / "model.onnx"))
    current = native_session(model.SerializeToString())
    (rnnx_opset,) = (opset for opset in model.opset_import if opset.domain == ONNX_DOMAIN)
    assert rnnx_opset.version == ONNX_DOMAIN_VERSION
    rnnx_opset.version = 1
    relabelled = native_session(model.SerializeToString(), profile_dir=tmp_path)
    feeds = demo_feeds(relabelled)
    got, want = relabelled.run(None, feeds), current.run(None, feeds)
    ops = profiled_ops(relabelled)
    assert {"SRUScan", "LinearAttention"} <= ops and "CausalLinearAttention" not in ops
    assert all(close(g, w, TOLERANCE) for g, w in zip(got, want))

    node = helper.make_node(CAUSAL_LINEAR_ATTENTION.onnx_name, ["q", "k", "v", "S0", "z0"], ["out", "S_last", "z_last"],
                            domain=ONNX_DOMAIN, eps=1e-6)  # fmt: skip
    heads_apart = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["B", "H", "L", None]) for n in "qkv"]
    states = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("S0", "z0")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("out", "S_last", "z_last")]
    version_1 = _one_node_model_bytes(helper.make_graph([node], "attention_v1", heads_apart + states, outputs), 1)
    with pytest.raises(Exception, match=r"rnnx:CausalLinearAttention\(-?\d+\) is not a registered function/op"):
        native_session(version_1)


def test_version_gate_and_errors(tmp_path, monkeypatch, demo_exports):
    assert set(ortops.NATIVE_OPS) == {(ONNX_DOMAIN, op.onnx_name) for op in ALL_OPS}
    assert ortops.onnxruntime_supported(f"1.{ortops.ORT_API_VERSION}.0")
    assert not ortops.onnxruntime_supported(f"1.{ortops.ORT_API_VERSION - 1}.2")
    monkeypatch.setenv("RNNX_ORT_OPS", str(tmp_path / "missing.so"))
    assert ortops.find_library() is None
    export = demo_exports[("srupp_linear_copy", "onnxruntime")]
    assert not OrtBackend(export).native_ops  # default: silently the function bodies
    with pytest.raises(BackendUnavailable, match="not built; run: python3 -m rnnx.runtime.ortops"):
        OrtBackend(export, native_ops=True)
    with pytest.raises(rt.InputError, match="native_ops: only the onnxruntime backend"):
        rt.load(demo_checkpoint_path("srupp_linear_copy"), native_ops=True)
    monkeypatch.setenv("RNNX_ORT_HEADERS", str(tmp_path / "none"))
    with pytest.raises(ortops.OrtOpsError, match="headers not found"):
        ortops.build(out=tmp_path / "lib.so", force=True)
    assert onnx.__version__  # the one-node graphs above are built with onnx's helper


ASAN_CHILD = r"""
import pathlib
import sys
import tempfile
sys.path.insert(0, sys.argv[1])
import test_ort_native_ops as t

cases = 0
for variant in t.VARIANTS:
    t.test_native_sru_scan_matches_the_naive_loop(variant)
    cases += 1
for variant in t.FP16_VARIANTS:
    for mask_type in t.MASK_TYPES:
        t.test_native_sru_scan_fp16_io_and_mask_types(variant, mask_type)
        cases += 1
for case in t.ATTENTION_CASES:
    for elem in t.ELEMS:
        t.test_native_causal_linear_attention_matches_the_naive_loop(case, elem)
        cases += 1
for variant in t.ATTENTION_MASK_VARIANTS:
    t.test_native_causal_linear_attention_pad_mask_and_time_major(variant)
    cases += 1
for elem in t.TORCH_DTYPES:
    with tempfile.TemporaryDirectory() as profile_dir:
        t.test_every_activation_dtype_has_a_native_kernel(elem, pathlib.Path(profile_dir))
    cases += 1
t.test_native_ops_refuse_bad_shapes_with_the_input_named()
print("cases", cases)
"""


@needs_library
@pytest.mark.slow
def test_every_variant_under_address_sanitizer(tmp_path):
    """The same parity and error cases (the attention's pad masks and time-major layout included), with the
    library built with -fsanitize=address, in a process that loads libasan first (and libstdc++, so that ASan
    intercepts C++ throws): an out-of-bounds access in a kernel or an op fails the run."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not found: cannot build the AddressSanitizer library")
    libasan, libstdcxx = (
        subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
        for name in ("libasan.so", "libstdc++.so")
    )
    if not Path(libasan).is_file():
        pytest.skip(f"libasan not found ({libasan!r})")
    library = ortops.build(out=tmp_path / "librnnx_ort_ops_asan.so", sanitize="address", force=True)
    env = {
        **os.environ,
        "LD_PRELOAD": f"{libasan}:{libstdcxx}",
        "ASAN_OPTIONS": "detect_leaks=0",
        "RNNX_ORT_OPS": str(library),
    }
    tests_dir = str(Path(__file__).resolve().parent)
    result = subprocess.run([sys.executable, "-c", ASAN_CHILD, tests_dir], capture_output=True, text=True, env=env,
                            timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    cases = len(VARIANTS) + len(FP16_VARIANTS) * len(MASK_TYPES) + len(ATTENTION_CASES) * len(ELEMS)
    cases += len(ATTENTION_MASK_VARIANTS) + len(TORCH_DTYPES)
    assert f"cases {cases}" in result.stdout


@needs_library
def test_an_export_of_ops_version_1_is_told_its_attention_runs_on_the_body(demo_exports, tmp_path, caplog):
    """rnnx.json says which ops version wrote the graph: an attention of version 1 (heads apart) gets no native
    kernel (ONNX Runtime runs its function body), and the backend says so once, naming the fix; a current export
    logs nothing of the kind."""
    export = tmp_path / "v1"
    shutil.copytree(demo_exports[("linear_transformer_copy", "onnxruntime")], export)
    caplog.set_level("WARNING", logger="rnnx.runtime")
    OrtBackend(export)
    assert not [r for r in caplog.records if "ops version 1" in r.getMessage()]
    meta = json.loads((export / "rnnx.json").read_text())
    for op in meta["ops"]:
        op["version"], op["plugin_version"] = 1, "1"
    (export / "rnnx.json").write_text(json.dumps(meta))
    assert ortops.ops_written_before(meta) == [CAUSAL_LINEAR_ATTENTION.onnx_name]
    OrtBackend(export)
    (message,) = [r.getMessage() for r in caplog.records if "ops version 1" in r.getMessage()]
    assert "CausalLinearAttention runs on the function body" in message and "re-export" in message
