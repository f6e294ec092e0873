"""The ONNX side of the rnnx ops: custom nodes, local functions, the onnxruntime lowering.

Each test exports a tiny module that calls one op with ``torch.onnx.export(dynamo=True)`` and the
translation table of a target, finalizes it, checks the file with ``onnx.checker`` (full check) and
strict shape inference outside the schema context, runs it on plain ONNX Runtime (CPU) at sequence
lengths and batch sizes other than the exported ones, and compares with the naive torch references
(``sru_scan_naive``, ``causal_linear_attention_recurrent``), which share no code with the bodies.
The contract tests check the torch op, its translation function, the ``OpSchema`` and the exported
nodes (attributes, output ranks and dtypes by role) against the op records of ``spec.ALL_OPS``.

Tolerances: fp32 outputs ``atol = rtol = 1e-5``; fp16 outputs (computed in fp32, rounded once)
``atol = rtol = 2e-3`` (a few fp16 ulps); fp32 states of fp16 runs ``1e-5``; fp64 (state fp64)
``1e-10``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Optional

import numpy as np
import onnx
import pytest
import torch

ort = pytest.importorskip("onnxruntime")

from rnnx.export.onnx_ops import TARGETS, custom_op_schemas, finalize, translation_table  # noqa: E402
from rnnx.export.onnx_ops.registry import EXPORTS  # noqa: E402
from rnnx.export.onnx_ops.schemas import (  # noqa: E402
    TYPE_PARAMETERS,
    attribute_type,
    node_attribute_defaults,
    op_schema,
)
from rnnx.models.ops.causal_conv_with_state import causal_conv_with_state  # noqa: E402
from rnnx.models.ops.causal_linear_attention import causal_linear_attention  # noqa: E402
from rnnx.models.ops.causal_linear_attention.naive import (  # noqa: E402
    causal_linear_attention_packed,
    causal_linear_attention_recurrent,
)
from rnnx.models.ops.dtypes import state_dtype  # noqa: E402
from rnnx.models.ops.linear_recurrence import linear_recurrence  # noqa: E402
from rnnx.models.ops.sru_scan import sru_scan, sru_scan_naive  # noqa: E402
from rnnx.runtime.contract import ops as spec  # noqa: E402
from rnnx.runtime.contract.targets import PORTABLE_OPSET  # noqa: E402
from rnnx.runtime.contract.targets import target as target_record  # noqa: E402

FP32_TOL = dict(atol=1e-5, rtol=1e-5)
FP16_TOL = dict(atol=2e-3, rtol=2e-3)
FP64_TOL = dict(atol=1e-10, rtol=1e-10)
TOLERANCES = {torch.float32: FP32_TOL, torch.float16: FP16_TOL, torch.float64: FP64_TOL}


class SRUScanModule(torch.nn.Module):
    """Calls the SRU scan op with fixed attributes; inputs U, x?, weight_c, bias, c0, mask_pad?."""

    def __init__(self, **attrs: object) -> None:
        super().__init__()
        self.attrs = attrs

    def forward(self, U, x, weight_c, bias, c0, mask_pad):
        return sru_scan(U, x, weight_c, bias, c0, mask_pad, **self.attrs)


class AttentionModule(torch.nn.Module):
    """Calls causal linear attention with or without an initial state."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, q, k, v, S0: Optional[torch.Tensor] = None, z0: Optional[torch.Tensor] = None):
        out, (S, z) = causal_linear_attention(q, k, v, None if S0 is None else (S0, z0), eps=self.eps)
        return out, S, z


class RecurrenceModule(torch.nn.Module):
    """Calls the linear recurrence (gated_delta, 2 query heads on 1 kv head) with a state, a decay and a beta."""

    def forward(self, query, key, value, past_state, decay, beta):
        return linear_recurrence(
            query, key, value, past_state, decay, beta, q_num_heads=2, kv_num_heads=1, update_rule="gated_delta"
        )


class ConvModule(torch.nn.Module):
    """Calls the causal convolution with state (SiLU)."""

    def forward(self, input, weight, bias, past_state):
        return causal_conv_with_state(input, weight, bias, past_state, activation="silu")


def family_inputs(dtype: torch.dtype) -> dict[spec.OpSpec, tuple[torch.Tensor, ...]]:
    """Small inputs of RecurrenceModule and ConvModule in ``dtype`` (states fp32)."""
    g = torch.Generator().manual_seed(0)
    recurrence = (
        torch.randn(1, 3, 8, generator=g).to(dtype), torch.randn(1, 3, 4, generator=g).to(dtype),
        torch.randn(1, 3, 5, generator=g).to(dtype), torch.randn(1, 1, 4, 5, generator=g),
        -torch.rand(1, 3, 1, generator=g).to(dtype), torch.rand(1, 3, 1, generator=g).to(dtype),
    )  # fmt: skip
    conv = (
        torch.randn(1, 3, 6, generator=g).to(dtype), torch.randn(3, 1, 4, generator=g).to(dtype),
        torch.randn(3, generator=g).to(dtype), torch.randn(1, 3, 3, generator=g),
    )  # fmt: skip
    return {spec.LINEAR_RECURRENCE: recurrence, spec.CAUSAL_CONV_WITH_STATE: conv}


FAMILY_MODULES = {spec.LINEAR_RECURRENCE: RecurrenceModule, spec.CAUSAL_CONV_WITH_STATE: ConvModule}


def export(module: torch.nn.Module, args: tuple, dynamic_shapes: tuple, target: str, path: Path) -> onnx.ModelProto:
    """Export, finalize and save to ``path``; then full checker + strict shape inference."""
    with custom_op_schemas():
        program = torch.onnx.export(
            module.eval(),
            args,
            dynamo=True,
            custom_translation_table=translation_table(target),
            dynamic_shapes=dynamic_shapes,
            verbose=False,
        )
    assert not onnx.defs.has(spec.SRU_SCAN.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN)
    model = finalize(program.model_proto, target)
    onnx.save(model, path)
    onnx.checker.check_model(str(path), full_check=True)
    onnx.shape_inference.infer_shapes_path(str(path), str(path.with_suffix(".inferred.onnx")), strict_mode=True)
    return model


def run(path: Path, args: tuple) -> list[np.ndarray]:
    """Runs the file on the CPU provider; None args are not graph inputs and are skipped."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    tensors = [a for a in args if a is not None]
    names = [i.name for i in session.get_inputs()]
    assert len(names) == len(tensors)
    return session.run(None, {n: t.numpy() for n, t in zip(names, tensors)})


def assert_close(got: np.ndarray, want: torch.Tensor, tol: dict) -> None:
    assert got.dtype == torch.empty(0, dtype=want.dtype).numpy().dtype
    np.testing.assert_allclose(got.astype(np.float64), want.double().numpy(), **tol)


def rnnx_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain == spec.ONNX_DOMAIN]


def value_elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """ONNX element type of every value of the main graph (inputs, initializers, inferred intermediates)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.value_info, *graph.output]}
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


def assert_full_layout(model: onnx.ModelProto, node: onnx.NodeProto, op: spec.OpSpec) -> None:
    """The TensorRT target's contract: TensorRT's parser hands a plugin its node's inputs by position, so
    every input of the op is present (no empty-name slot, none left off); it keys local functions by
    name only, so the graph has one function per op and no overloads; and the mask is int32, whatever the model
    gave (TensorRT has no bool / uint8 plugin tensors: ``PluginTensorDesc::type``, NvInferRuntimePlugin.h)."""
    assert len(node.input) == len(op.inputs) and all(node.input), list(node.input)
    assert node.overload == ""
    rnnx_functions = [f for f in model.functions if f.domain == spec.ONNX_DOMAIN]
    assert [(f.name, f.overload) for f in rnnx_functions] == [(op.onnx_name, "")]
    mask = node.input[op.inputs.index(op.mask_input)]
    elem_type = value_elem_types(model).get(mask)
    assert elem_type == onnx.TensorProto.INT32, (
        f"{op.onnx_name} input {mask!r} (mask_pad) is {onnx.TensorProto.DataType.Name(elem_type or 0)}, expected INT32"
    )


# ---------------------------------------------------------------------------------------------- SRU

SRU_CASES = [
    # D, k, has_skip_term, use_tanh, mask dtype (None: no mask), scale_x, activation dtype
    (1, 3, True, False, None, 1.0, torch.float32),
    (2, 3, True, True, torch.bool, 0.5, torch.float32),
    (1, 4, True, True, torch.float32, 1.0, torch.float32),
    (2, 4, False, False, None, 1.0, torch.float32),
    (1, 3, False, True, torch.uint8, 1.0, torch.float32),
    (2, 3, True, False, torch.bool, 2.0, torch.float16),
    (2, 3, True, True, torch.bool, 1.0, torch.float64),
    (1, 3, True, False, torch.int64, 1.0, torch.float32),
]

#: A pad's value in a mask of each dtype: non-zero, and for float / int64 one that a plain Cast to int32 would turn
#: into 0 (0.5, 2**32), so a TensorRT-target export that cast the mask naively would lose the pads.
PAD_VALUES = {torch.float32: 0.5, torch.int64: 2**32}


def make_mask(pads: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``pads`` (bool, True = pad) as a mask of ``dtype``: 0 at real steps, PAD_VALUES (else 1 / True) at pads."""
    return pads.to(dtype) * PAD_VALUES[dtype] if dtype in PAD_VALUES else pads.to(dtype)


def sru_inputs(L: int, B: int, D: int, d: int, k: int, skip: bool, mask_dtype, dtype, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(L, B, D * d * k, generator=g).to(dtype)
    x = torch.randn(L, B, D * d, generator=g).to(dtype) if (k == 3 and skip) else None
    weight_c = (0.5 * torch.randn(2 * D * d, generator=g)).to(dtype)
    bias = (0.5 * torch.randn(2 * D * d, generator=g)).to(dtype)
    c0 = torch.randn(B, D * d, generator=g).to(state_dtype(dtype))
    mask = None
    if mask_dtype is not None:
        mask = torch.rand(L, B, generator=g) < 0.3
        mask[0, 0] = True
        mask = make_mask(mask, mask_dtype)
    return U, x, weight_c, bias, c0, mask


@pytest.mark.parametrize("D,k,skip,tanh,mask_dtype,scale_x,dtype", SRU_CASES)
def test_sru_scan_runs_on_onnxruntime(tmp_path, D, k, skip, tanh, mask_dtype, scale_x, dtype):
    d = 4
    attrs = dict(hidden_size=d, num_directions=D, num_matrices=k, has_skip_term=skip, use_tanh=tanh, scale_x=scale_x)
    module = SRUScanModule(**attrs)
    example = sru_inputs(5, 3, D, d, k, skip, mask_dtype, dtype, seed=0)
    L, B = torch.export.Dim("L"), torch.export.Dim("B")
    seq = {0: L, 1: B}
    dyn = (seq, seq if example[1] is not None else None, None, None, {0: B}, seq if example[5] is not None else None)
    path = tmp_path / "sru.onnx"
    model = export(module, example, dyn, "tensorrt", path)
    (node,) = rnnx_nodes(model)
    assert node.op_type == spec.SRU_SCAN.onnx_name
    assert_full_layout(model, node, spec.SRU_SCAN)

    tol = TOLERANCES[dtype]
    state_tol = FP64_TOL if dtype == torch.float64 else FP32_TOL
    for seed, (steps, batch) in enumerate([(7, 2), (1, 3)], start=1):
        args = sru_inputs(steps, batch, D, d, k, skip, mask_dtype, dtype, seed)
        h, c_last = run(path, args)
        want_h, want_c = sru_scan_naive(*args, **attrs)
        assert_close(h, want_h, tol)
        assert_close(c_last, want_c, state_tol)
        assert h.shape == (steps, batch, D * d)


class TwoSRUScans(torch.nn.Module):
    """A k = 4 bidirectional layer without a mask, then a k = 3 unidirectional one with a mask: two
    structures that would need two function overloads."""

    def forward(self, U1, w1, b1, c1, U2_proj, w2, b2, c2, mask):
        h1, c1_last = sru_scan(U1, None, w1, b1, c1, None, hidden_size=3, num_directions=2, num_matrices=4,
                               has_skip_term=True, use_tanh=True, scale_x=1.0)  # fmt: skip
        U2 = h1 @ U2_proj  # (L, B, 6) -> (L, B, 3 * 3)
        h2, c2_last = sru_scan(U2, h1[..., :3], w2, b2, c2, mask, hidden_size=3, num_directions=1, num_matrices=3,
                               has_skip_term=True, use_tanh=False, scale_x=0.5)  # fmt: skip
        return h2, c1_last, c2_last


def test_tensorrt_target_has_one_function_per_op_for_every_structure(tmp_path):
    """Two SRUScan nodes of different structures in one TensorRT-target graph share one function (no
    overloads to collide in TensorRT's parser), both nodes have every input, and ONNX Runtime running
    that one body matches the naive reference for both structures."""
    g = torch.Generator().manual_seed(11)
    L, B = 6, 2
    args = (
        torch.randn(L, B, 2 * 3 * 4, generator=g),
        0.5 * torch.randn(12, generator=g),
        0.5 * torch.randn(12, generator=g),
        torch.randn(B, 6, generator=g),
        torch.randn(6, 9, generator=g),
        0.5 * torch.randn(6, generator=g),
        0.5 * torch.randn(6, generator=g),
        torch.randn(B, 3, generator=g),
        torch.rand(L, B, generator=g) < 0.3,
    )
    model = export(TwoSRUScans(), args, None, "tensorrt", tmp_path / "two.onnx")
    nodes = rnnx_nodes(model)
    assert len(nodes) == 2
    for node in nodes:
        assert_full_layout(model, node, spec.SRU_SCAN)
    h2, c1, c2 = run(tmp_path / "two.onnx", args)
    U1, w1, b1, c1_0, proj, w2, b2, c2_0, mask = args
    want_h1, want_c1 = sru_scan_naive(U1, None, w1, b1, c1_0, None, hidden_size=3, num_directions=2, num_matrices=4,
                                      has_skip_term=True, use_tanh=True, scale_x=1.0)  # fmt: skip
    want_h2, want_c2 = sru_scan_naive(want_h1 @ proj, want_h1[..., :3], w2, b2, c2_0, mask, hidden_size=3,
                                      num_directions=1, num_matrices=3, has_skip_term=True, use_tanh=False,
                                      scale_x=0.5)  # fmt: skip
    assert_close(c1, want_c1, FP32_TOL)
    assert_close(c2, want_c2, FP32_TOL)
    assert_close(h2, want_h2, FP32_TOL)


def test_sru_scan_function_is_used_for_onnxruntime_target(tmp_path):
    """Target onnxruntime keeps SRUScan as a custom node with its function."""
    attrs = dict(hidden_size=3, num_directions=1, num_matrices=3, has_skip_term=True, use_tanh=False, scale_x=1.0)
    example = sru_inputs(4, 2, 1, 3, 3, True, None, torch.float32, seed=3)
    model = export(SRUScanModule(**attrs), example, None, "onnxruntime", tmp_path / "sru_ort.onnx")
    assert [n.op_type for n in rnnx_nodes(model)] == [spec.SRU_SCAN.onnx_name]
    h, c = run(tmp_path / "sru_ort.onnx", example)
    want_h, want_c = sru_scan_naive(*example, **attrs)
    assert_close(h, want_h, FP32_TOL)
    assert_close(c, want_c, FP32_TOL)


# ---------------------------------------------------------------------------------------- attention


def attention_inputs(B: int, H: int, L: int, E: int, M: int, dtype, with_state: bool, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, L, n, generator=g).to(dtype) for n in (E, E, M))
    if not with_state:
        return q, k, v
    state = state_dtype(dtype)
    S0 = (torch.rand(B, H, E, M, generator=g) * 3).to(state)
    z0 = (torch.rand(B, H, E, generator=g) * 3 + 0.5).to(state)
    return q, k, v, S0, z0


#: The targets whose graphs keep rnnx's nodes (the portable ``onnx`` target inlines them: test_portable_target_*).
NODE_TARGETS = tuple(t for t in TARGETS if target_record(t).custom_domain)
ATTENTION_CASES = [(t, s, torch.float32) for t in NODE_TARGETS for s in (True, False)] + [
    (t, True, dtype) for t in NODE_TARGETS for dtype in (torch.float16, torch.float64)
]


@pytest.mark.parametrize("target,with_state,dtype", ATTENTION_CASES)
def test_causal_linear_attention_runs_on_onnxruntime(tmp_path, target, with_state, dtype):
    H, E, M, eps = 2, 4, 3, 1e-3
    example = attention_inputs(2, H, 5, E, M, dtype, with_state, seed=0)
    B, L = torch.export.Dim("B"), torch.export.Dim("L")
    seq = {0: B, 2: L}
    dyn = (seq, seq, seq) + (({0: B}, {0: B}) if with_state else ())
    path = tmp_path / "attention.onnx"
    model = export(AttentionModule(eps), example, dyn, target, path)

    (node,) = rnnx_nodes(model)
    assert node.op_type == spec.CAUSAL_LINEAR_ATTENTION.onnx_name
    (body,) = [f for f in model.functions if (f.name, f.overload) == (node.op_type, node.overload)]
    body_ops = {(n.domain, n.op_type) for n in body.node}
    if target == "onnxruntime" and dtype != torch.float64:  # ONNX Runtime's contrib kernel in the body
        assert node.overload.endswith("_ms") and ("com.microsoft", "LinearAttention") in body_ops
    else:  # the exact standard-op body
        assert all(domain == "" for domain, _ in body_ops)
    if target == "tensorrt":
        assert_full_layout(model, node, spec.CAUSAL_LINEAR_ATTENTION)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs[spec.PLUGIN_VERSION_ATTR] == spec.PLUGIN_VERSION.encode()
    assert attrs[spec.PLUGIN_NAMESPACE_ATTR] == spec.PLUGIN_NAMESPACE.encode()
    assert attrs["eps"] == pytest.approx(eps)

    tol = TOLERANCES[dtype]
    state_tol = FP64_TOL if dtype == torch.float64 else FP32_TOL
    for seed, (batch, steps) in enumerate([(3, 1), (1, 37)], start=1):
        args = attention_inputs(batch, H, steps, E, M, dtype, with_state, seed)
        out, S, z = run(path, args)
        want_out, want_S, want_z = causal_linear_attention_recurrent(*args, eps=eps)
        assert_close(out, want_out, tol)
        assert_close(S, want_S, state_tol)
        assert_close(z, want_z, state_tol)


class PackedAttentionModule(torch.nn.Module):
    """The op's own layout: packed q, k, v, a state and a pad mask; no reshape or transpose around the op."""

    def __init__(self, heads: int, time_major: bool, eps: float = 1e-3) -> None:
        super().__init__()
        self.heads, self.time_major, self.eps = heads, time_major, eps

    def forward(self, q, k, v, S0, z0, pad):
        out, (S, z) = causal_linear_attention(
            q, k, v, (S0, z0), self.eps, num_heads=self.heads, pad_mask=pad, time_major=self.time_major
        )
        return out, S, z


@pytest.mark.parametrize(
    "target,time_major,dtype,mask_dtype",
    [(t, tm, torch.float32, torch.bool) for t in NODE_TARGETS for tm in (False, True)]
    + [("onnxruntime", True, torch.float64, torch.bool)]
    + [("tensorrt", False, torch.float32, torch.float32), ("tensorrt", True, torch.float32, torch.int64)],
)
def test_packed_attention_with_pads_runs_on_onnxruntime(tmp_path, target, time_major, dtype, mask_dtype):
    """Packed heads and the pad mask go into the node as they are: the graph holds the rnnx node and nothing
    around it but, for the TensorRT target, the one Cast that makes the model's mask (bool, float or int64) the
    plugins' int32; stock ONNX Runtime (function bodies: com.microsoft.LinearAttention for fp32 on the onnxruntime
    target, the standard-op body otherwise) matches the naive recurrence, pads carrying the state."""
    H, E, M = 2, 4, 3

    def inputs(B: int, L: int, seed: int) -> tuple:
        g = torch.Generator().manual_seed(seed)
        lead = (L, B) if time_major else (B, L)
        q, k = (torch.randn(*lead, H * E, generator=g).to(dtype) for _ in range(2))
        v = torch.randn(*lead, H * M, generator=g).to(dtype)
        S0 = (torch.rand(B, H, E, M, generator=g) * 3).to(state_dtype(dtype))
        z0 = (torch.rand(B, H, E, generator=g) * 3 + 0.5).to(state_dtype(dtype))
        pad = make_mask(torch.rand(*lead, generator=g) < 0.4, mask_dtype)
        return q, k, v, S0, z0, pad

    B, L = torch.export.Dim("B"), torch.export.Dim("L")
    seq = {0: L, 1: B} if time_major else {0: B, 1: L}
    dyn = (seq, seq, seq, {0: B}, {0: B}, seq)
    path = tmp_path / "attention.onnx"
    model = export(PackedAttentionModule(H, time_major), inputs(2, 5, 0), dyn, target, path)
    (node,) = rnnx_nodes(model)
    around = [n for n in model.graph.node if n.domain != spec.ONNX_DOMAIN and n.op_type != "Constant"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert (attrs["num_heads"], attrs["time_major"]) == (H, int(time_major))
    if target == "tensorrt":
        assert_full_layout(model, node, spec.CAUSAL_LINEAR_ATTENTION)
        # The mask reaches the node through a Cast to int32, of the mask itself (bool) or of Not(Equal(mask, 0)).
        (cast,) = [n for n in around if n.output[0] == node.input[5]]
        assert cast.op_type == "Cast" and onnx.helper.get_attribute_value(cast.attribute[0]) == onnx.TensorProto.INT32
        ops = sorted(n.op_type for n in around if n.op_type != "CastLike")  # CastLike(0, mask) may be folded
        assert ops == (["Cast"] if mask_dtype == torch.bool else ["Cast", "Equal", "Not"]), ops
    else:
        assert around == []
    tol = TOLERANCES[dtype]
    for seed, (batch, steps) in enumerate([(3, 1), (2, 37)], start=1):
        args = inputs(batch, steps, seed)
        out, S, z = run(path, args)
        want_out, want_S, want_z = causal_linear_attention_packed(
            *args[:3], H, *args[3:5], args[5], eps=1e-3, time_major=time_major
        )
        assert_close(out, want_out, tol)
        assert_close(S, want_S, FP64_TOL if dtype == torch.float64 else FP32_TOL)
        assert_close(z, want_z, FP64_TOL if dtype == torch.float64 else FP32_TOL)


class StatelessPackedAttention(torch.nn.Module):
    """Packed q, k, v and nothing else: no initial state, no mask."""

    def __init__(self, heads: int, time_major: bool) -> None:
        super().__init__()
        self.heads, self.time_major = heads, time_major

    def forward(self, q, k, v):
        out, (S, z) = causal_linear_attention(q, k, v, num_heads=self.heads, time_major=self.time_major)
        return out, S, z


@pytest.mark.parametrize("time_major", [False, True])
def test_tensorrt_layout_fills_packed_states_and_mask(tmp_path, time_major):
    """The TensorRT target's node always has S0 (B, H, E, M), z0 (B, H, E) and mask_pad: zeros and all false made
    from q's and v's packed shapes (B from q's dim 0, or dim 1 time-major); ONNX Runtime on that graph matches the
    naive recurrence from zeros."""
    H, E, M = 3, 2, 5
    B, L = torch.export.Dim("B"), torch.export.Dim("L")
    seq = {0: L, 1: B} if time_major else {0: B, 1: L}

    def inputs(batch: int, steps: int, seed: int) -> tuple:
        g = torch.Generator().manual_seed(seed)
        lead = (steps, batch) if time_major else (batch, steps)
        return tuple(torch.randn(*lead, H * n, generator=g) for n in (E, E, M))

    path = tmp_path / "attention.onnx"
    model = export(StatelessPackedAttention(H, time_major), inputs(2, 4, 0), (seq, seq, seq), "tensorrt", path)
    (node,) = rnnx_nodes(model)
    assert_full_layout(model, node, spec.CAUSAL_LINEAR_ATTENTION)
    args = inputs(3, 7, 1)
    out, S, z = run(path, args)
    want_out, want_S, want_z = causal_linear_attention_packed(*args, H, time_major=time_major)
    assert_close(out, want_out, FP32_TOL)
    assert_close(S, want_S, FP32_TOL)
    assert_close(z, want_z, FP32_TOL)


def test_attention_prefill_then_step_matches_one_pass(tmp_path):
    """The state a file returns, fed back with L = 1, continues the sequence exactly."""
    module = AttentionModule()
    example = attention_inputs(1, 2, 4, 3, 5, torch.float32, True, seed=7)
    L = torch.export.Dim("L")
    seq = {2: L}
    for target in TARGETS:
        path = tmp_path / f"{target}.onnx"
        export(module, example, (seq, seq, seq, None, None), target, path)
        q, k, v, S0, z0 = attention_inputs(1, 2, 9, 3, 5, torch.float32, True, seed=8)
        out_a, S, z = run(path, (q[:, :, :8], k[:, :, :8], v[:, :, :8], S0, z0))
        out_b, S, z = run(path, (q[:, :, 8:], k[:, :, 8:], v[:, :, 8:], torch.from_numpy(S), torch.from_numpy(z)))
        want_out, want_S, want_z = causal_linear_attention_recurrent(q, k, v, S0, z0)
        assert_close(np.concatenate([out_a, out_b], axis=2), want_out, FP32_TOL)
        assert_close(S, want_S, FP32_TOL)
        assert_close(z, want_z, FP32_TOL)


def test_portable_target_has_standard_ops_only(tmp_path):
    """The ``onnx`` target: rnnx's nodes inlined (no custom domain, no contrib op), default-domain opset 27, and the
    same numbers as the naive references (attention; SRU, whose Scan body is inlined too)."""
    L = torch.export.Dim("L")
    seq = {2: L}
    path = tmp_path / "attention.onnx"
    model = export(AttentionModule(), attention_inputs(1, 2, 4, 3, 5, torch.float32, True, seed=7),
                   (seq, seq, seq, None, None), "onnx", path)  # fmt: skip
    assert {o.domain: o.version for o in model.opset_import} == {"": PORTABLE_OPSET}
    assert not model.functions and {n.domain for n in model.graph.node} == {""}
    args = attention_inputs(1, 2, 9, 3, 5, torch.float32, True, seed=8)
    out, S, z = run(path, args)
    want_out, want_S, want_z = causal_linear_attention_recurrent(*args)
    assert_close(out, want_out, FP32_TOL)
    assert_close(S, want_S, FP32_TOL)


# -------------------------------------------------------------------------------- contract with spec


def export_every_op(
    tmp_path, dtype: torch.dtype, sru_attrs: dict, sru_args: tuple, attention_args: tuple
) -> dict[spec.OpSpec, onnx.ModelProto]:
    """One tensorrt-target graph per rnnx op at ``dtype`` activations, in ``tmp_path``: the SRU scan (``sru_attrs``
    on ``sru_args``) and causal linear attention (on ``attention_args``), and each op of the recurrence family on
    ``family_inputs(dtype)``; op -> graph."""
    modules = {
        spec.SRU_SCAN: (SRUScanModule(**sru_attrs), sru_args),
        spec.CAUSAL_LINEAR_ATTENTION: (AttentionModule(), attention_args),
        **{op: (FAMILY_MODULES[op](), args) for op, args in family_inputs(dtype).items()},
    }
    return {
        op: export(module, args, None, "tensorrt", tmp_path / f"{op.torch_name}.onnx")
        for op, (module, args) in modules.items()
    }


def test_every_rnnx_node_carries_the_spec_attributes(tmp_path):
    """For each op of spec.ALL_OPS: the node's attribute names and types are exactly the spec's."""
    sru_attrs = dict(hidden_size=2, num_directions=2, num_matrices=4, has_skip_term=True, use_tanh=True, scale_x=1.0)
    exported = export_every_op(
        tmp_path,
        torch.float32,
        sru_attrs,
        sru_inputs(3, 2, 2, 2, 4, True, None, torch.float32, 0),
        attention_inputs(1, 1, 3, 2, 2, torch.float32, False, 0),
    )
    for op in spec.ALL_OPS:
        model = exported[op]
        (node,) = [n for n in rnnx_nodes(model) if n.op_type == op.onnx_name]
        expected = node_attribute_defaults(op)
        assert {a.name for a in node.attribute} == set(expected)
        for a in node.attribute:
            assert a.type == attribute_type(expected[a.name]), a.name
        assert {(i.domain, i.version) for i in model.opset_import} >= {(spec.ONNX_DOMAIN, spec.ONNX_DOMAIN_VERSION)}
        (function,) = [f for f in model.functions if f.name == op.onnx_name]
        assert (function.domain, function.overload) == (spec.ONNX_DOMAIN, node.overload)
        assert list(function.input) == list(op.inputs) and list(function.output) == list(op.outputs)
        assert {a.name for a in function.attribute_proto} == set(expected)


#: ONNX element type of each dtype rule for fp16 activations (state: state_dtype(fp16) = fp32).
FP16_ELEM_TYPES = {spec.ACTIVATION: onnx.TensorProto.FLOAT16, spec.STATE: onnx.TensorProto.FLOAT}


def test_node_outputs_follow_the_records(tmp_path):
    """fp16 activations: every output of each rnnx node has its record's rank, and the activation dtype
    (fp16) or the state dtype (fp32) as its record's role says."""
    assert state_dtype(torch.float16) == torch.float32
    sru_attrs = dict(hidden_size=2, num_directions=2, num_matrices=3, has_skip_term=True, use_tanh=False, scale_x=1.0)
    models = export_every_op(
        tmp_path,
        torch.float16,
        sru_attrs,
        sru_inputs(3, 2, 2, 2, 3, True, torch.bool, torch.float16, 0),
        attention_inputs(1, 2, 3, 4, 5, torch.float16, False, 0),
    )
    assert set(models) == set(spec.ALL_OPS)
    for op, model in models.items():
        (node,) = rnnx_nodes(model)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        types = {vi.name: vi.type.tensor_type for vi in (*inferred.graph.value_info, *inferred.graph.output)}
        assert len(node.output) == len(op.output_records)
        for record, value in zip(op.output_records, node.output):
            assert types[value].elem_type == FP16_ELEM_TYPES[record.dtype_rule], record.name
            assert len(types[value].shape.dim) == record.rank, record.name


@pytest.mark.parametrize("op", spec.ALL_OPS, ids=lambda op: op.onnx_name)
def test_schema_follows_the_record(op):
    """Input / output names, optionality and type parameters by role; required attributes by the record."""
    schema = op_schema(op)
    assert [(i.name, i.type_str) for i in schema.inputs] == [
        (t.name, TYPE_PARAMETERS[t.dtype_rule]) for t in op.input_records
    ]
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    assert {i.name for i in schema.inputs if i.option == optional} == op.optional_inputs
    assert [(o.name, o.type_str) for o in schema.outputs] == [
        (t.name, TYPE_PARAMETERS[t.dtype_rule]) for t in op.output_records
    ]
    assert {n for n, a in schema.attributes.items() if a.required} == op.required_attributes


#: Torch schema types an attribute kind of the records may have (bool attributes are ints in ONNX).
TORCH_ATTRIBUTE_TYPES = {"int": ("int", "bool"), "float": ("float",), "str": ("str",)}
#: Each op's translations for a target leaving absent inputs out and for the TensorRT layout, from its registry record.
TRANSLATIONS = {e.spec: e.translation(target_record("onnxruntime")) for e in EXPORTS}
FULL_TRANSLATIONS = {e.spec: e.translation(target_record("tensorrt")) for e in EXPORTS}


@pytest.mark.parametrize("op", spec.ALL_OPS, ids=lambda op: op.onnx_name)
def test_torch_op_and_translation_take_the_record_arguments(op):
    """torch.ops.rnnx.<op> and its translation function take the record's inputs (``Tensor?`` where
    optional) then its attributes, in order, and return one value per output."""
    assert set(TRANSLATIONS) == set(spec.ALL_OPS)
    translation_table("tensorrt")  # registers the torch ops
    schema = getattr(getattr(torch.ops, spec.TORCH_NAMESPACE), op.torch_name).default._schema
    arguments = [(a.name, str(a.type)) for a in schema.arguments]
    expected = [(t.name, "Optional[Tensor]" if t.optional else "Tensor") for t in op.input_records]
    assert arguments[: len(expected)] == expected
    attributes = arguments[len(expected) :]
    assert [name for name, _ in attributes] == list(op.attributes)
    for name, torch_type in attributes:
        assert torch_type in TORCH_ATTRIBUTE_TYPES[op.attribute(name).kind], name
    assert len(schema.returns) == len(op.outputs)
    assert list(inspect.signature(TRANSLATIONS[op]).parameters) == [*op.inputs, *op.attributes]
    assert list(inspect.signature(FULL_TRANSLATIONS[op]).parameters) == [*op.inputs, *op.attributes]


def test_finalize_rejects_a_node_without_a_required_attribute():
    op = spec.SRU_SCAN
    (required,) = op.required_attributes
    present = {name: value for name, value in node_attribute_defaults(op).items() if name != required}
    node = onnx.helper.make_node(
        op.onnx_name, ["U", "", "weight_c", "bias", "c0"], ["h", "c_last"], domain=spec.ONNX_DOMAIN, **present
    )
    inputs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in node.input if n]
    outputs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in node.output]
    graph = onnx.helper.make_graph([node], "g", inputs, outputs)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    with pytest.raises(ValueError, match=f"required attribute.*{required}"):
        finalize(model, "tensorrt")


def test_schemas_are_registered_only_inside_the_context():
    def registered() -> list[bool]:
        return [onnx.defs.has(op.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN) for op in spec.ALL_OPS]

    assert registered() == [False] * len(spec.ALL_OPS)
    with custom_op_schemas():
        assert registered() == [True] * len(spec.ALL_OPS)
        schema = onnx.defs.get_schema(spec.SRU_SCAN.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN)
        assert [i.name for i in schema.inputs] == list(spec.SRU_SCAN.inputs)
        assert set(schema.attributes) == set(node_attribute_defaults(spec.SRU_SCAN))
    assert registered() == [False] * len(spec.ALL_OPS)


def test_unknown_target_is_rejected():
    with pytest.raises(ValueError, match="target"):
        translation_table("openvino")
    with pytest.raises(ValueError, match="target"):
        finalize(onnx.ModelProto(), "openvino")


@pytest.mark.parametrize("opset", [18, 21])
def test_function_bodies_follow_the_model_opset(tmp_path, opset):
    """Bodies declare the model's default-domain opset and stay valid at 18 and 21."""
    attrs = dict(hidden_size=2, num_directions=2, num_matrices=3, has_skip_term=True, use_tanh=False, scale_x=1.0)
    args = sru_inputs(3, 2, 2, 2, 3, True, torch.bool, torch.float32, 0)
    with custom_op_schemas():
        program = torch.onnx.export(
            SRUScanModule(**attrs).eval(),
            args,
            dynamo=True,
            opset_version=opset,
            custom_translation_table=translation_table("tensorrt"),
            verbose=False,
        )
    model = finalize(program.model_proto, "tensorrt")
    onnx.checker.check_model(model, full_check=True)
    (function,) = model.functions
    assert [(i.domain, i.version) for i in function.opset_import] == [("", opset)]
    onnx.save(model, tmp_path / "m.onnx")
    h, c = run(tmp_path / "m.onnx", args)
    want_h, want_c = sru_scan_naive(*args, **attrs)
    assert_close(h, want_h, FP32_TOL)
    assert_close(c, want_c, FP32_TOL)
