"""rnnx's ONNX Runtime custom-op library (``rnnx.runtime.ortops``): native LinearRecurrence and CausalConvWithState.

One-node graphs in domain ``rnnx`` (version ``ONNX_DOMAIN_VERSION``) with no function body, so only the library can
run them, on a real ONNX Runtime session, against the float64 naive twins (``linear_recurrence_naive``,
``causal_conv_with_state_naive``):

* LinearRecurrence: every update rule x {fp32, fp16} x {H_q = H_kv, GQA} x {per-head, per-key decay where the rule
  takes one} (beta per head, or one shared by all heads with GQA), with a past state and scale 0 (1/sqrt(dk)); a
  right-padded batch equals each row alone; an absent past state (empty name) is zeros; prefill then a one-token
  step equals one pass; fp64 and bf16 have kernels too; bad shapes are refused in one line naming the input.
  Grouped value (H_kv a multiple of H_q, query and key with H_q heads) with and without ``qk_l2_norm`` (keys and
  queries not of unit norm), every rule x {fp32, fp16, bf16}, plus GQA with ``qk_l2_norm``; a padded batch and
  prefill then steps for one such case. ``qk_l2_norm`` absent from the node is 0 (the other tests leave it out).
  The kernels' epsilon of ``qk_l2_norm`` (plugins/linear_recurrence/linear_recurrence_constants.h) is the record's.
* CausalConvWithState: {none, silu, swish} x {fp32, fp16} x {bias and state, neither}; a right-padded batch with
  a pad inside a row; prefill then steps equals one pass; bf16 / fp64.

Tolerances, relative to the magnitude: fp32 1e-5 (output and state); fp16 I/O 2e-3 on the output (about two halves
of an fp16 ulp: the inputs are rounded to fp16 first and the reference runs on the rounded values) and 1e-5 on
the fp32 state; bf16 8e-3 on the output; fp64 1e-12.

Needs the library (``python3 -m rnnx.runtime.ortops``; the module fixture rebuilds it when its sources are newer)
and skips, saying why, without headers or compiler.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper

pytest.importorskip("onnxruntime")

import onnxruntime as ort

from rnnx.models.ops.causal_conv_with_state.naive import causal_conv_with_state_naive
from rnnx.models.ops.linear_recurrence.naive import linear_recurrence_naive
from rnnx.runtime import ortops
from rnnx.runtime.contract.ops import (
    CAUSAL_CONV_WITH_STATE,
    LINEAR_RECURRENCE,
    ONNX_DOMAIN,
    ONNX_DOMAIN_VERSION,
    QK_L2_NORM_EPS,
)

FP32, FP16, BF16, FP64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE
TORCH = {FP32: torch.float32, FP16: torch.float16, BF16: torch.bfloat16, FP64: torch.float64}
#: Output tolerance per activation dtype, relative to the magnitude.
OUT_TOLERANCE = {FP32: 1e-5, FP16: 2e-3, BF16: 8e-3, FP64: 1e-12}
#: State tolerance: the state is fp32 (fp64 for fp64) whatever the activation dtype.
STATE_TOLERANCE = {FP32: 1e-5, FP16: 1e-5, BF16: 1e-5, FP64: 1e-12}
RULES = ("linear", "gated", "delta", "gated_delta")
#: The header holding the native kernels' constants of the op (kQK_L2_NORM_EPS).
CONSTANTS_HEADER = Path(__file__).resolve().parents[1] / "plugins/linear_recurrence/linear_recurrence_constants.h"


@pytest.fixture(scope="module")
def library() -> str:
    """The library's path, (re)built when its sources are newer; skip without headers, compiler or onnxruntime."""
    if not ortops.onnxruntime_supported():
        pytest.skip(f"onnxruntime < 1.{ortops.ORT_API_VERSION}: the rnnx library cannot load")
    try:
        return str(ortops.build())
    except ortops.OrtOpsError as e:
        pytest.skip(str(e).splitlines()[0])


def session(library: str, model: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.register_custom_ops_library(library)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def one_node(op_type: str, inputs: dict[str, int], outputs: dict[str, int], **attributes: object) -> bytes:
    """A one-node ``rnnx`` graph: ``inputs`` (name -> element type; absent names left out, empty in the middle) in the
    record's order, so the node reads each by position; bf16 inputs and outputs are taken and given as fp32 through
    Cast nodes (numpy has no bf16)."""
    record = LINEAR_RECURRENCE if op_type == LINEAR_RECURRENCE.onnx_name else CAUSAL_CONV_WITH_STATE
    names = [n if n in inputs else "" for n in record.inputs]
    while not names[-1]:
        names.pop()
    nodes, values, results = [], [], []
    for name in (n for n in names if n):
        if inputs[name] == BF16:
            nodes.append(helper.make_node("Cast", [name + "_fp32"], [name], to=BF16))
            values.append(helper.make_tensor_value_info(name + "_fp32", FP32, None))
        else:
            values.append(helper.make_tensor_value_info(name, inputs[name], None))
    nodes.append(helper.make_node(op_type, names, list(record.outputs), domain=ONNX_DOMAIN, **attributes))
    for name in record.outputs:
        if outputs[name] == BF16:
            nodes.append(helper.make_node("Cast", [name], [name + "_fp32"], to=FP32))
            results.append(helper.make_tensor_value_info(name + "_fp32", FP32, None))
        else:
            results.append(helper.make_tensor_value_info(name, outputs[name], None))
    graph = helper.make_graph(nodes, op_type, values, results)
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid(ONNX_DOMAIN, ONNX_DOMAIN_VERSION)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def feeds(tensors: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """numpy feeds by input name (bf16 as fp32 under ``<name>_fp32``, see :func:`one_node`)."""
    return {
        (f"{n}_fp32" if t.dtype == torch.bfloat16 else n): (t.float() if t.dtype == torch.bfloat16 else t).numpy()
        for n, t in tensors.items()
    }


def close(got: np.ndarray, want: torch.Tensor, tolerance: float) -> bool:
    got, want = np.asarray(got, np.float64), want.double().numpy()
    if got.shape != want.shape:
        return False
    return want.size == 0 or float(np.max(np.abs(got - want))) <= tolerance * max(1.0, float(np.max(np.abs(want))))


#: the inputs with no time axis, which each piece of a call in pieces takes whole
UNTIMED = ("past_state", "weight", "bias")


def run_in_pieces(
    run: Callable[[dict[str, torch.Tensor]], tuple[np.ndarray, np.ndarray]],
    x: dict[str, torch.Tensor],
    bounds: list[tuple[int, int]],
    axis: int,
) -> tuple[np.ndarray, np.ndarray]:
    """A prefill then steps: ``run`` (inputs -> (output, present_state)) on the time steps [t0, t1) of ``x`` for each
    (t0, t1) of ``bounds`` in turn (the inputs with a time axis cut along ``axis``), each call from the previous one's
    present_state, the first from ``x["past_state"]``; returns the outputs joined along ``axis`` and the last state."""
    state, outs = x["past_state"], []
    for t0, t1 in bounds:
        piece = {n: (v if n in UNTIMED else v.narrow(axis, t0, t1 - t0)) for n, v in x.items()}
        out, present = run({**piece, "past_state": state})
        outs.append(out)
        state = torch.from_numpy(present)
    return np.concatenate(outs, axis=axis), state.numpy()


def elem_of(dtype: torch.dtype) -> int:
    return next(e for e, d in TORCH.items() if d == dtype)


def mask_elem(mask: torch.Tensor) -> int:
    """The ONNX element type of a pad mask (bool or int64 here)."""
    return TensorProto.BOOL if mask.dtype == torch.bool else TensorProto.INT64


def recurrence_inputs(
    rule: str, dtype: torch.dtype, B: int, T: int, Hq: int, Hkv: int, dk: int, dv: int, per_key: bool,
    beta_heads: int, seed: int = 0, qk_scale: float = 1.0,
) -> dict[str, torch.Tensor]:  # fmt: skip
    """Inputs of one LinearRecurrence call: keys of norm ``qk_scale`` (min(Hq, Hkv) heads; unit norm keeps the delta
    rules stable), queries times ``qk_scale``, decay in (-0.5, 0), beta in (0, 1), a past state; activations in
    ``dtype``, the state fp32 (fp64 for fp64)."""
    g = torch.Generator().manual_seed(seed)
    state = torch.float64 if dtype == torch.float64 else torch.float32
    Hk = min(Hq, Hkv)
    k = torch.nn.functional.normalize(torch.randn(B, T, Hk, dk, generator=g, dtype=torch.float64), dim=-1)
    x = {
        "query": (qk_scale * torch.randn(B, T, Hq * dk, generator=g, dtype=torch.float64)).to(dtype),
        "key": (qk_scale * k.reshape(B, T, Hk * dk)).to(dtype),
        "value": torch.randn(B, T, Hkv * dv, generator=g, dtype=torch.float64).to(dtype),
        "past_state": torch.randn(B, Hkv, dk, dv, generator=g, dtype=torch.float64).to(state),
    }
    if rule in ("gated", "gated_delta"):
        x["decay"] = (-0.5 * torch.rand(B, T, Hkv * (dk if per_key else 1), generator=g, dtype=torch.float64)).to(dtype)
    if rule in ("delta", "gated_delta"):
        x["beta"] = torch.rand(B, T, beta_heads, generator=g, dtype=torch.float64).to(dtype)
    return x


def run_recurrence(
    library: str, x: dict[str, torch.Tensor], rule: str, Hq: int, Hkv: int, scale: float = 0.0, qk_l2_norm: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """One session of the node on ``x``; ``qk_l2_norm`` 0 leaves the attribute out (its default)."""
    elem = elem_of(x["query"].dtype)
    state = FP64 if elem == FP64 else FP32
    inputs = {n: state if n == "past_state" else mask_elem(t) if n == "mask_pad" else elem for n, t in x.items()}
    extra = {"qk_l2_norm": qk_l2_norm} if qk_l2_norm else {}
    model = one_node(LINEAR_RECURRENCE.onnx_name, inputs, {"output": elem, "present_state": state},
                     q_num_heads=Hq, kv_num_heads=Hkv, update_rule=rule, scale=scale, **extra)  # fmt: skip
    out, present = session(library, model).run(None, feeds(x))
    return out, present


def reference(x: dict[str, torch.Tensor], rule: str, Hq: int, Hkv: int, scale: float = 0.0, qk_l2_norm: int = 0):
    return linear_recurrence_naive(
        x["query"], x["key"], x["value"], x.get("past_state"), x.get("decay"), x.get("beta"),
        q_num_heads=Hq, kv_num_heads=Hkv, update_rule=rule, scale=scale, pad_mask=x.get("mask_pad"),
        qk_l2_norm=qk_l2_norm,
    )  # fmt: skip


RECURRENCE_CASES = [
    (rule, elem, gqa, per_key)
    for rule in RULES
    for elem in (FP32, FP16)
    for gqa in (False, True)
    for per_key in ((False, True) if rule in ("gated", "gated_delta") else (False,))
]


@pytest.mark.parametrize(
    "case", RECURRENCE_CASES, ids=lambda c: f"{c[0]}-{'fp32' if c[1] == FP32 else 'fp16'}-"
    f"{'gqa' if c[2] else 'mha'}-{'perkey' if c[3] else 'perhead'}",
)  # fmt: skip
def test_linear_recurrence_matches_the_naive_loop(library, case):
    rule, elem, gqa, per_key = case
    Hq, Hkv = (4, 2) if gqa else (3, 3)
    # dv 72: one full tile of value columns and a partial one (the kernel's fp32 tiles are 64 wide)
    x = recurrence_inputs(rule, TORCH[elem], B=2, T=9, Hq=Hq, Hkv=Hkv, dk=16, dv=72, per_key=per_key,
                          beta_heads=1 if gqa else Hkv)  # fmt: skip
    out, present = run_recurrence(library, x, rule, Hq, Hkv)
    out_ref, present_ref = reference(x, rule, Hq, Hkv)
    assert close(out, out_ref, OUT_TOLERANCE[elem])
    assert close(present, present_ref, STATE_TOLERANCE[elem])


@pytest.mark.parametrize("rule", RULES)
def test_linear_recurrence_right_padded_batch_equals_each_row_alone(library, rule):
    """Rows of 7, 4 and 1 steps padded to 7 (bool mask, scale 0.5): each row's outputs and last state are those of
    the row run alone, and the outputs at its pads are read from the carried state, as the naive loop's."""
    Hq = Hkv = 2
    x = recurrence_inputs(rule, torch.float32, B=3, T=7, Hq=Hq, Hkv=Hkv, dk=8, dv=12, per_key=True, beta_heads=Hkv)
    lengths = [7, 4, 1]
    x["mask_pad"] = torch.arange(7)[None, :] >= torch.tensor(lengths)[:, None]
    out, present = run_recurrence(library, x, rule, Hq, Hkv, scale=0.5)
    out_ref, present_ref = reference(x, rule, Hq, Hkv, scale=0.5)
    assert close(out, out_ref, 1e-5) and close(present, present_ref, 1e-5)
    for b, n in enumerate(lengths):
        row = {name: (t[b : b + 1, :n] if name not in ("past_state", "mask_pad") else t[b : b + 1])
               for name, t in x.items() if name != "mask_pad"}  # fmt: skip
        out_b, present_b = run_recurrence(library, row, rule, Hq, Hkv, scale=0.5)
        assert close(out_b, torch.from_numpy(out[b : b + 1, :n]), 1e-6)
        assert close(present_b, torch.from_numpy(present[b : b + 1]), 1e-6)


@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
@pytest.mark.parametrize("per_key", [False, True], ids=["perhead", "perkey"])
def test_linear_recurrence_long_and_strong_decay(library, rule, per_key):
    """The gated rules over 300 steps (the kernel folds its accumulated decay into the state every ~80 steps), and
    with decays of -45 and -inf (a decay factor under 2^-60 folds at once; exp(-inf) = 0 empties the state)."""
    x = recurrence_inputs(rule, torch.float32, B=1, T=300, Hq=2, Hkv=1, dk=8, dv=8, per_key=per_key, beta_heads=1)
    out, present = run_recurrence(library, x, rule, 2, 1)
    out_ref, present_ref = reference(x, rule, 2, 1)
    assert close(out, out_ref, 1e-5) and close(present, present_ref, 1e-5)
    x = recurrence_inputs(rule, torch.float32, B=1, T=9, Hq=2, Hkv=1, dk=8, dv=8, per_key=per_key, beta_heads=1)
    # every step folds (a ~ e^-45 < 2^-60); values of 1e-20 keep the decayed state as large as a step's write
    x["decay"] = x["decay"] - 45
    x["decay"][0, 4] = -float("inf")
    x["value"] = x["value"] * 1e-20
    out, present = run_recurrence(library, x, rule, 2, 1)
    out_ref, present_ref = reference(x, rule, 2, 1)
    for got, want in ((out, out_ref), (present, present_ref)):
        want = want.double().numpy()
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))


@pytest.mark.parametrize("rule", RULES)
def test_linear_recurrence_absent_past_state_is_zeros(library, rule):
    """past_state left out (an empty name before decay / beta): the state starts at zeros."""
    x = recurrence_inputs(rule, torch.float32, B=1, T=5, Hq=4, Hkv=1, dk=8, dv=8, per_key=False, beta_heads=1)
    del x["past_state"]
    out, present = run_recurrence(library, x, rule, 4, 1)
    out_ref, present_ref = reference(x, rule, 4, 1)
    assert close(out, out_ref, 1e-5) and close(present, present_ref, 1e-5)


@pytest.mark.parametrize("rule", RULES)
def test_linear_recurrence_prefill_then_step_is_one_pass(library, rule):
    """Prefill 11 steps, then 3 one-step calls, each from the previous present_state: the outputs and the last state
    of one pass over the 14 steps."""
    Hq, Hkv = 4, 2
    x = recurrence_inputs(rule, torch.float32, B=2, T=14, Hq=Hq, Hkv=Hkv, dk=16, dv=64, per_key=True, beta_heads=Hkv)
    out_all, present_all = run_recurrence(library, x, rule, Hq, Hkv)
    steps = [(0, 11), (11, 12), (12, 13), (13, 14)]
    out, state = run_in_pieces(lambda part: run_recurrence(library, part, rule, Hq, Hkv), x, steps, axis=1)
    assert close(out, torch.from_numpy(out_all), 1e-6)
    assert close(state, torch.from_numpy(present_all), 1e-6)


@pytest.mark.parametrize("elem", [BF16, FP64], ids=["bf16", "fp64"])
def test_linear_recurrence_every_activation_dtype_has_a_kernel(library, elem):
    """bf16 (fp32 state) and fp64 (fp64 state), gated_delta with GQA and a pad, against the loop on the same values
    (dv 40: a full fp64 tile of 32 columns and a partial one)."""
    x = recurrence_inputs("gated_delta", TORCH[elem], B=2, T=6, Hq=4, Hkv=2, dk=8, dv=40, per_key=True, beta_heads=2)
    x["mask_pad"] = torch.tensor([[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    out, present = run_recurrence(library, x, "gated_delta", 4, 2)
    out_ref, present_ref = reference(x, "gated_delta", 4, 2)
    assert close(out, out_ref, OUT_TOLERANCE[elem]) and close(present, present_ref, STATE_TOLERANCE[elem])


def test_linear_recurrence_refuses_bad_shapes_with_the_input_named(library):
    x = recurrence_inputs("gated_delta", torch.float32, B=1, T=3, Hq=2, Hkv=2, dk=4, dv=4, per_key=False, beta_heads=2)
    x["mask_pad"] = torch.zeros(1, 3, dtype=torch.bool)
    refusals = [
        ({"key": x["key"][..., :6]}, "key must be (B, T, min(q_num_heads, kv_num_heads) * dk) = (1, 3, 8)"),
        ({"value": x["value"][..., :7]}, "value must be (B, T, kv_num_heads * dv)"),
        ({"past_state": x["past_state"][..., :3]}, "past_state must be (B, kv_num_heads, dk, dv) = (1, 2, 4, 4)"),
        ({"decay": x["decay"][..., :1]}, "update_rule gated_delta needs decay"),
        ({"beta": torch.rand(1, 3, 3)}, "update_rule gated_delta needs beta"),
        ({"mask_pad": x["mask_pad"][:, :2]}, "mask_pad must be (B, T) = (1, 3)"),
    ]
    for bad, message in refusals:
        with pytest.raises(Exception, match=re.escape(f"rnnx LinearRecurrence: {message}")):
            run_recurrence(library, {**x, **bad}, "gated_delta", 2, 2)
    with pytest.raises(Exception, match=re.escape("rnnx LinearRecurrence: update_rule must be linear, gated, delta")):
        run_recurrence(library, x, "mamba", 2, 2)
    with pytest.raises(Exception, match=re.escape("rnnx LinearRecurrence: q_num_heads and kv_num_heads must be")):
        run_recurrence(library, x, "gated_delta", 2, 3)


#: (Hq, Hkv, qk_l2_norm): grouped value with and without the norm, GQA with it
GROUPED_CASES = [(2, 4, 1), (1, 3, 0), (4, 2, 1)]


@pytest.mark.parametrize("heads", GROUPED_CASES, ids=lambda c: f"hq{c[0]}-hkv{c[1]}{'-l2' if c[2] else ''}")
@pytest.mark.parametrize("elem", [FP32, FP16, BF16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("rule", RULES)
def test_linear_recurrence_grouped_value_and_qk_l2_norm(library, rule, elem, heads):
    """Grouped value (state h reads query / key head h // (Hkv / Hq), output Hkv heads) and qk_l2_norm on queries and
    keys of norm about 3 * sqrt(dk) and 3 (per-key decay, beta per head; dv 72: a full and a partial tile)."""
    Hq, Hkv, l2 = heads
    x = recurrence_inputs(rule, TORCH[elem], B=2, T=7, Hq=Hq, Hkv=Hkv, dk=16, dv=72, per_key=True, beta_heads=Hkv,
                          qk_scale=3.0 if l2 else 1.0)  # fmt: skip
    out, present = run_recurrence(library, x, rule, Hq, Hkv, qk_l2_norm=l2)
    out_ref, present_ref = reference(x, rule, Hq, Hkv, qk_l2_norm=l2)
    assert out.shape == (2, 7, max(Hq, Hkv) * 72)
    assert close(out, out_ref, OUT_TOLERANCE[elem]) and close(present, present_ref, STATE_TOLERANCE[elem])


def test_linear_recurrence_grouped_value_padded_and_in_steps(library):
    """gated_delta, grouped value (Hq 2, Hkv 4) with qk_l2_norm: a right-padded batch (a pad inside a row too) against
    the loop, and prefill then one-token steps, each from the previous present_state, equal to one pass."""
    rule, Hq, Hkv = "gated_delta", 2, 4
    x = recurrence_inputs(rule, torch.float32, B=2, T=8, Hq=Hq, Hkv=Hkv, dk=8, dv=12, per_key=True, beta_heads=Hkv,
                          qk_scale=3.0)  # fmt: skip
    padded = {**x, "mask_pad": torch.tensor([[0, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]], dtype=torch.bool)}
    out, present = run_recurrence(library, padded, rule, Hq, Hkv, qk_l2_norm=1)
    out_ref, present_ref = reference(padded, rule, Hq, Hkv, qk_l2_norm=1)
    assert close(out, out_ref, 1e-5) and close(present, present_ref, 1e-5)
    out_all, present_all = run_recurrence(library, x, rule, Hq, Hkv, qk_l2_norm=1)
    steps = [(0, 5), (5, 6), (6, 7), (7, 8)]
    out, state = run_in_pieces(lambda part: run_recurrence(library, part, rule, Hq, Hkv, qk_l2_norm=1), x, steps, 1)
    assert close(out, torch.from_numpy(out_all), 1e-6)
    assert close(state, torch.from_numpy(present_all), 1e-6)


def test_qk_l2_norm_eps_of_the_kernels_is_the_records():
    """kQK_L2_NORM_EPS of the native kernels' constants header equals rnnx.runtime.contract.ops.QK_L2_NORM_EPS."""
    text = CONSTANTS_HEADER.read_text()
    found = re.search(r"constexpr\s+float\s+kQK_L2_NORM_EPS\s*=\s*([0-9.eE+-]+)f?\s*;", text)
    assert found is not None, f"{CONSTANTS_HEADER}: no 'constexpr float kQK_L2_NORM_EPS = ...;'"
    assert float(found[1]) == QK_L2_NORM_EPS, f"{CONSTANTS_HEADER}: {found[1]} != QK_L2_NORM_EPS {QK_L2_NORM_EPS}"


@pytest.mark.parametrize("rule", ["linear", "gated", "delta"])
def test_linear_recurrence_ignores_the_tensorrt_layouts_placeholders(library, rule):
    """The TensorRT layout passes every input (a decay to the ungated rules, a beta to the non-delta ones, zeros there);
    a file of that target also runs here, so the op ignores what its rule does not take."""
    x = recurrence_inputs("gated_delta", torch.float32, B=2, T=5, Hq=4, Hkv=2, dk=8, dv=6, per_key=False, beta_heads=2)
    taken = {n: t for n, t in x.items() if not (n == "decay" and rule in ("linear", "delta"))}
    taken = {n: t for n, t in taken.items() if not (n == "beta" and rule in ("linear", "gated"))}
    out, present = run_recurrence(library, x, rule, 4, 2)
    out_ref, present_ref = reference(taken, rule, 4, 2)
    assert close(out, out_ref, OUT_TOLERANCE[FP32]) and close(present, present_ref, STATE_TOLERANCE[FP32])


def conv_inputs(dtype: torch.dtype, B: int, C: int, T: int, K: int, with_bias: bool, with_state: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    state = torch.float64 if dtype == torch.float64 else torch.float32
    x = {
        "input": torch.randn(B, C, T, generator=g, dtype=torch.float64).to(dtype),
        "weight": (torch.randn(C, 1, K, generator=g, dtype=torch.float64) / K**0.5).to(dtype),
    }
    if with_bias:
        x["bias"] = torch.randn(C, generator=g, dtype=torch.float64).to(dtype)
    if with_state:
        x["past_state"] = torch.randn(B, C, K - 1, generator=g, dtype=torch.float64).to(state)
    return x


def run_conv(library: str, x: dict[str, torch.Tensor], activation: str) -> tuple[np.ndarray, np.ndarray]:
    elem = elem_of(x["input"].dtype)
    state = FP64 if elem == FP64 else FP32
    inputs = {n: state if n == "past_state" else mask_elem(t) if n == "mask_pad" else elem for n, t in x.items()}
    model = one_node(CAUSAL_CONV_WITH_STATE.onnx_name, inputs, {"output": elem, "present_state": state},
                     activation=activation)  # fmt: skip
    out, present = session(library, model).run(None, feeds(x))
    return out, present


def conv_reference(x: dict[str, torch.Tensor], activation: str):
    return causal_conv_with_state_naive(x["input"], x["weight"], x.get("bias"), x.get("past_state"),
                                        activation=activation, pad_mask=x.get("mask_pad"))  # fmt: skip


@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("elem", [FP32, FP16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("full", [True, False], ids=["bias-state", "bare"])
def test_causal_conv_matches_the_naive_loop(library, activation, elem, full):
    x = conv_inputs(TORCH[elem], B=2, C=6, T=9, K=4, with_bias=full, with_state=full)
    out, present = run_conv(library, x, activation)
    out_ref, present_ref = conv_reference(x, activation)
    assert close(out, out_ref, OUT_TOLERANCE[elem]) and close(present, present_ref, STATE_TOLERANCE[elem])


@pytest.mark.parametrize("K", [1, 4])
def test_causal_conv_pads_and_prefill_then_steps(library, K):
    """A pad inside a row and right padding (int64 mask) against the loop; each right-padded row equals the row run
    alone; prefill then one-step calls equal one pass. K = 1 has an empty state."""
    x = conv_inputs(torch.float32, B=2, C=5, T=8, K=K, with_bias=True, with_state=True)
    x["mask_pad"] = torch.tensor([[0, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]])
    out, present = run_conv(library, x, "silu")
    out_ref, present_ref = conv_reference(x, "silu")
    assert close(out, out_ref, 1e-5) and close(present, present_ref, 1e-5)
    row = {n: (t[1:2] if n != "weight" and n != "bias" else t) for n, t in x.items() if n != "mask_pad"}
    row["input"] = row["input"][..., :5]
    out_b, present_b = run_conv(library, row, "silu")
    assert close(out_b, torch.from_numpy(out[1:2, :, :5]), 1e-6)
    assert close(present_b, torch.from_numpy(present[1:2]), 1e-6)
    del x["mask_pad"]
    out_all, present_all = run_conv(library, x, "silu")
    out, state = run_in_pieces(lambda part: run_conv(library, part, "silu"), x, [(0, 5), (5, 6), (6, 7), (7, 8)], 2)
    assert close(out, torch.from_numpy(out_all), 1e-6)
    assert close(state, torch.from_numpy(present_all), 1e-6)


@pytest.mark.parametrize("elem", [BF16, FP64], ids=["bf16", "fp64"])
def test_causal_conv_every_activation_dtype_has_a_kernel(library, elem):
    x = conv_inputs(TORCH[elem], B=2, C=4, T=6, K=3, with_bias=True, with_state=True)
    x["mask_pad"] = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 1, 0, 0, 0, 0]], dtype=torch.bool)
    out, present = run_conv(library, x, "silu")
    out_ref, present_ref = conv_reference(x, "silu")
    assert close(out, out_ref, OUT_TOLERANCE[elem]) and close(present, present_ref, STATE_TOLERANCE[elem])


def test_causal_conv_refuses_bad_shapes_with_the_input_named(library):
    x = conv_inputs(torch.float32, B=1, C=3, T=4, K=3, with_bias=True, with_state=True)
    refusals = [
        ({"weight": x["weight"][:2]}, "weight must be (C, 1, K) with C = 3 and K >= 1"),
        ({"bias": x["bias"][:2]}, "bias must be (C,) with C = 3"),
        ({"past_state": x["past_state"][..., :1]}, "past_state must be (B, C, K-1) = (1, 3, 2)"),
        ({"mask_pad": torch.zeros(1, 3, dtype=torch.bool)}, "mask_pad must be (B, T) = (1, 4)"),
    ]
    for bad, message in refusals:
        with pytest.raises(Exception, match=re.escape(f"rnnx CausalConvWithState: {message}")):
            run_conv(library, {**x, **bad}, "none")
    with pytest.raises(Exception, match=re.escape("rnnx CausalConvWithState: activation must be none, silu or swish")):
        run_conv(library, x, "gelu")
