"""The linear-recurrence family in standard ONNX (export/onnx_ops/recurrence_family.py) against the float64 naive
twins: ``rnnx::LinearRecurrence`` / ``rnnx::CausalConvWithState`` nodes whose model-local functions are the opset-27
standard ops plus rnnx's pad and state handling, the same lowering inline (no custom domain, the portable
form), and the nodes' ONNX Runtime form ending in ``com.microsoft.LinearAttention`` / ``CausalConvWithState``
(the measurement behind the onnxruntime target's lowering: the contrib ops equal the standard for every rule,
GQA, per-head and per-key decay, fp32 and fp16). Each runs on stock ONNX Runtime, and the standard forms on
``onnx.reference.ReferenceEvaluator`` too.

Tolerances: fp32 1e-5 of the largest reference value (ONNX Runtime's and the reference evaluator's fp32 Scan
bodies against the fp64 loop); fp16 activations 3e-3 for the output (rounded to fp16 at every step of the
standard's body) and 3e-3 for the fp32 state, which the body updates from fp16 values.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from rnnx.export.onnx_ops.builder import NodeWriter
from rnnx.export.onnx_ops.recurrence_family import (
    LOWERINGS,
    MS_DOMAIN,
    MS_DOMAIN_VERSION,
    PLAIN_HEADS,
    SCAN,
    STANDARD_DOMAIN,
    STANDARD_OPSET,
    HeadLayout,
    standard_function,
)
from rnnx.models.ops.causal_conv_with_state import causal_conv_with_state_naive
from rnnx.models.ops.linear_recurrence import DELTA_RULES, GATED_RULES, UPDATE_RULES, linear_recurrence_naive
from rnnx.runtime.contract import ops as spec

B, T, D_K, D_V = 2, 9, 4, 3
_ONNX_TYPES = {
    np.dtype("float32"): TensorProto.FLOAT,
    np.dtype("float16"): TensorProto.FLOAT16,
    np.dtype("int32"): TensorProto.INT32,
    np.dtype("bool"): TensorProto.BOOL,
}
TOL = {np.float32: (1e-5, 1e-5), np.float16: (3e-3, 3e-3)}  # (output, state), relative to the largest value


#: How a test model holds the op: the rnnx node with its opset-27 function, the lowering inline (the portable form,
#: default domain only), the rnnx node with its ONNX Runtime contrib-op function, or the standard-ops lowering for
#: opsets before 27 as the node's function and inline (those three in an opset-20 model, rnnx's default).
FORMS = ("function", "inline", "contrib", "scan", "scan_inline")
#: Forms the reference evaluator cannot run: contrib ops; and the scan function, which compares the string
#: attributes in the graph (Equal), where the evaluator refuses two strings of different lengths (numpy "<U5" vs
#: "<U11"); its inline twin, with the rule known, runs there.
ORT_ONLY = ("contrib", "scan")


def _model(op: spec.OpSpec, arrays: dict[str, np.ndarray], attrs: dict, form: str) -> onnx.ModelProto:
    """A one-op model in ``form`` (:data:`FORMS`)."""
    inputs = [helper.make_tensor_value_info(n, _ONNX_TYPES[a.dtype], a.shape) for n, a in arrays.items()]
    act = _ONNX_TYPES[next(iter(arrays.values())).dtype]
    outputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT if r.role == spec.STATE else act, None)
        for n, r in zip(op.outputs, op.output_records)
    ]
    opset = STANDARD_OPSET if form in ("function", "inline") else 20
    domain = {"function": STANDARD_DOMAIN, "inline": STANDARD_DOMAIN, "contrib": MS_DOMAIN}.get(form, SCAN)
    opsets = [helper.make_opsetid("", opset)]
    if form in ("inline", "scan_inline"):
        w = NodeWriter("lowered_")
        LOWERINGS[op.onnx_name](w, {n: n for n in arrays}, {n: n for n in op.outputs}, attrs, domain)
        nodes, functions = w.nodes, []
    else:
        layout = HeadLayout.of(attrs) if op is spec.LINEAR_RECURRENCE else PLAIN_HEADS
        function = standard_function(op, frozenset(arrays), domain, opset, layout)
        node = helper.make_node(
            op.onnx_name, [n if n in arrays else "" for n in op.inputs], list(op.outputs), domain=spec.ONNX_DOMAIN,
            **attrs,
        )  # fmt: skip
        node.overload = function.overload
        nodes, functions = [node], [function]
        opsets.append(helper.make_opsetid(spec.ONNX_DOMAIN, spec.ONNX_DOMAIN_VERSION))
        if domain == MS_DOMAIN:
            opsets.append(helper.make_opsetid(MS_DOMAIN, MS_DOMAIN_VERSION))
    graph = helper.make_graph(nodes, op.onnx_name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=opsets, functions=functions, ir_version=10)
    onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
    return model


def _run_both(model: onnx.ModelProto, arrays: dict[str, np.ndarray], form: str) -> list[list[np.ndarray]]:
    """ONNX Runtime's outputs, and the reference evaluator's unless ``form`` is in :data:`ORT_ONLY`."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [session.run(None, arrays)] + ([] if form in ORT_ONLY else [ReferenceEvaluator(model).run(None, arrays)])


def _lowered_and_naive(
    op: spec.OpSpec,
    naive: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    x: dict[str, torch.Tensor],
    attrs: dict,
    mask: torch.Tensor,
    variants: list[tuple[bool, bool]],
    past_state: Callable[[], torch.Tensor],
) -> Iterator[tuple[np.ndarray, np.ndarray, torch.Tensor, torch.Tensor]]:
    """For each (with_state, with_mask) of ``variants``: the op's inputs ``x``, plus a ``past_state()`` and / or
    ``mask`` as mask_pad, run as every form of :data:`FORMS` by each runner (:func:`_run_both`), each run's
    (output, state) with the naive twin's (``naive(**inputs, **attrs, pad_mask=)``) on the same inputs."""
    for with_state, with_mask in variants:
        inputs = dict(x)
        if with_state:
            inputs["past_state"] = past_state()
        ref_out, ref_state = naive(**inputs, **attrs, pad_mask=mask if with_mask else None)
        if with_mask:
            inputs["mask_pad"] = mask
        arrays = {n: inputs[n].numpy() for n in op.inputs if n in inputs}
        for form in FORMS:
            for out, state in _run_both(_model(op, arrays, attrs, form), arrays, form):
                yield out, state, ref_out, ref_state


def _rel(got: np.ndarray, want: torch.Tensor) -> float:
    want64 = want.double().numpy()
    return float(np.abs(got.astype(np.float64) - want64).max() / max(np.abs(want64).max(), 1e-30))


CASES = [
    (rule, heads, per_key, dtype, False)
    for rule, heads, per_key, dtype in itertools.product(
        UPDATE_RULES, [(2, 2), (4, 2)], [False, True], [np.float32, np.float16]
    )
    if rule in GATED_RULES or not per_key
] + [  # grouped value (H_kv > H_q) with qk_l2_norm, Gated DeltaNet's layout; and grouped value alone
    ("gated_delta", (2, 4), False, np.float32, True),
    ("gated_delta", (2, 4), False, np.float16, True),
    ("gated", (1, 2), True, np.float32, False),
]


@pytest.mark.parametrize(
    "rule,heads,per_key,dtype,qk_norm",
    CASES,
    ids=[f"{r}-h{h[0]}x{h[1]}{'-perkey' if p else ''}-{d.__name__}{'-qknorm' if n else ''}" for r, h, p, d, n in CASES],
)
def test_linear_recurrence_lowering_equals_the_naive_twin(rule, heads, per_key, dtype, qk_norm):
    h_q, h_kv = heads
    h_k = min(h_q, h_kv)
    g = torch.Generator().manual_seed(len(rule) + h_q)
    keys = torch.randn(B, T, h_k, D_K, generator=g)
    x = {
        "query": torch.randn(B, T, h_q * D_K, generator=g),
        "key": (keys * 2.0 if qk_norm else F.normalize(keys, dim=-1)).reshape(B, T, h_k * D_K),
        "value": torch.randn(B, T, h_kv * D_V, generator=g),
    }
    if rule in GATED_RULES:
        x["decay"] = -F.softplus(torch.randn(B, T, h_kv * (D_K if per_key else 1), generator=g))
    if rule in DELTA_RULES:
        x["beta"] = torch.rand(B, T, h_kv, generator=g)
    x = {n: t.to(torch.float16 if dtype is np.float16 else torch.float32) for n, t in x.items()}
    mask = torch.zeros(B, T, dtype=torch.int32)
    mask[1, 6:] = 1  # a right-padded row
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule, scale=0.0, qk_l2_norm=int(qk_norm))
    runs = _lowered_and_naive(
        spec.LINEAR_RECURRENCE, linear_recurrence_naive, x, attrs, mask, [(False, False), (True, True)],
        past_state=lambda: torch.randn(B, h_kv, D_K, D_V, generator=g),
    )  # fmt: skip
    for out, state, ref_out, ref_state in runs:
        assert out.dtype == dtype and state.dtype == np.float32
        assert _rel(out, ref_out) < TOL[dtype][0] and _rel(state, ref_state) < TOL[dtype][1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: d.__name__)
@pytest.mark.parametrize("K", [1, 4])
def test_causal_conv_lowering_equals_the_naive_twin(K, dtype):
    """K = 1 has an empty (B, C, 0) state; the mask has right padding and a hole."""
    g = torch.Generator().manual_seed(K)
    tdt = torch.float16 if dtype is np.float16 else torch.float32
    x = {
        "input": torch.randn(B, 5, T, generator=g).to(tdt),
        "weight": torch.randn(5, 1, K, generator=g).to(tdt),
        "bias": torch.randn(5, generator=g).to(tdt),
    }
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[0, 7:] = True
    mask[1, 3] = True
    runs = _lowered_and_naive(
        spec.CAUSAL_CONV_WITH_STATE, causal_conv_with_state_naive, x, {"activation": "silu"}, mask,
        [(False, False), (True, False), (True, True), (False, True)],
        past_state=lambda: torch.randn(B, 5, K - 1, generator=g).to(tdt).float(),
    )  # fmt: skip
    for out, state, ref_out, ref_state in runs:
        assert out.dtype == dtype and state.dtype == np.float32 and state.shape == (B, 5, K - 1)
        assert _rel(out, ref_out) < TOL[dtype][0]
        np.testing.assert_array_equal(state, ref_state.float().numpy())  # a copy of past inputs


def test_the_inline_lowering_uses_no_custom_domain():
    arrays = {n: np.zeros((1, 2, 8), np.float32) for n in ("query", "key", "value")}
    model = _model(spec.LINEAR_RECURRENCE, arrays, dict(q_num_heads=2, kv_num_heads=2, update_rule="linear",
                                                        scale=1.0), "inline")  # fmt: skip
    assert {n.domain for n in model.graph.node} == {""} and not model.functions
    assert [n.op_type for n in model.graph.node].count("LinearAttention") == 1
