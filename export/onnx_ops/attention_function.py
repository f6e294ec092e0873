"""The standard-op body of ``rnnx::CausalLinearAttention``: the exact O(L^2) masked form.

The packed inputs (B, L, H*E) — (L, B, H*E) time-major — are reshaped and transposed to (B, H, L, E), H read from
the node's ``num_heads``; a pad step's phi(k) and v are zeroed (keep = not mask_pad). With phi(x) = elu(x) + 1,
per (batch, head)::

    A      = tril(phi(q) phi(k)^T)                       (L, L), mask from Trilu on ones (L, L)
    out    = (A v + phi(q) S0) / (A 1 + phi(q) z0 + eps)
    S_last = S0 + phi(k)^T v          z_last = z0 + sum_t phi(k_t)

Exact, and cheap for the L = 1 decode step; quadratic in L for a prefill. The body computes in the
state dtype (fp32, or fp64 for fp64 q) and casts ``out`` back to q's dtype; absent initial states
are zeros (the terms are left out). ``eps`` is read from the node's attribute. phi is ``Elu`` + 1, or
for fp64 the equivalent ``Where(x > 0, x + 1, Exp(x))`` (ONNX Runtime has no fp64 Elu on CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import helper

from rnnx.runtime.contract import ops as spec

from .builder import NodeWriter
from .op_export import NodeContext, OpExport, attribute, check_every_input, input_elem_type, present
from .ort_attention import lowered_attention_function
from .overloads import AttentionVariant, parse_attention_overload
from .schemas import op_function
from .sru_function import state_elem_type
from .translate import attention_node, attention_node_full, attention_node_standard

ATTENTION = spec.CAUSAL_LINEAR_ATTENTION


def attention_function(variant: AttentionVariant, opset_version: int) -> onnx.FunctionProto:
    """FunctionProto ``rnnx::CausalLinearAttention`` overload ``variant.name``.

    Inputs q, k (B, L, H*E), v (B, L, H*M) (time-major: (L, B, ...)), S0 (B, H, E, M), z0 (B, H, E), mask_pad (B, L)
    (or (L, B)) (each read only when the variant has it); outputs out (q's layout with M) in q's dtype, S_last,
    z_last in the state dtype.
    """
    acc = state_elem_type(variant.double)
    w = NodeWriter("")
    one = w.op("Cast", [w.scalar_float(1.0)], "one", to=acc)
    heads = w.op("Unsqueeze", [w.attribute_int("num_heads"), w.ints([0])], "heads")
    split = w.op("Concat", [w.op("Shape", ["q"], end=2), heads, w.ints([-1])], "split_heads", axis=0)
    to_heads = [1, 2, 0, 3] if variant.time_major else [0, 2, 1, 3]  # (L|B, B|L, H, D) -> (B, H, L, D)

    def apart(name: str) -> str:
        return w.op("Transpose", [w.op("Reshape", [name, split])], f"{name}_h", perm=to_heads)

    def phi(x: str) -> str:
        x = w.op("Cast", [x], to=acc)
        if not variant.double:
            return w.op("Add", [w.op("Elu", [x]), one], "phi")
        # ONNX Runtime's CPU Elu has no fp64 kernel: elu(x) + 1 = x + 1 for x > 0, else exp(x)
        positive = w.op("Greater", [x, w.op("Cast", [w.scalar_float(0.0)], to=acc)])
        return w.op("Where", [positive, w.op("Add", [x, one]), w.op("Exp", [x])], "phi")

    qf, kf, vf = phi(apart("q")), phi(apart("k")), w.op("Cast", [apart("v")], "vf", to=acc)
    if variant.has_mask:
        zero = w.op("Cast", [w.scalar_float(0.0)], "zero", to=acc)
        keep = w.op("Where", [w.op("Cast", ["mask_pad"], to=onnx.TensorProto.BOOL), zero, one], "keep")
        if variant.time_major:
            keep = w.op("Transpose", [keep], perm=[1, 0])
        keep = w.op("Unsqueeze", [keep, w.ints([1, 3])], "keep4")  # (B, 1, L, 1)
        kf, vf = w.op("Mul", [kf, keep], "kf"), w.op("Mul", [vf, keep], "vf_kept")
    kT = w.op("Transpose", [kf], "kT", perm=[0, 1, 3, 2])  # (B, H, E, L)
    L = w.op("Shape", [qf], "L", start=2, end=3)
    ones_ll = w.op(
        "ConstantOfShape", [w.op("Concat", [L, L], axis=0)], "ones_LL", value=helper.make_tensor("one", acc, [1], [1.0])
    )
    A = w.op("Mul", [w.op("MatMul", [qf, kT], "scores"), w.op("Trilu", [ones_ll], "causal", upper=0)], "A")
    num = w.op("MatMul", [A, vf], "num")  # (B, H, L, M)
    den = w.op("ReduceSum", [A, w.ints([-1])], "den", keepdims=1)  # (B, H, L, 1)
    S_last = w.op("MatMul", [kT, vf], "kv")  # (B, H, E, M)
    z_last = w.op("ReduceSum", [kf, w.ints([2])], "ksum", keepdims=0)  # (B, H, E)
    if variant.has_S0:
        S0 = w.op("Cast", ["S0"], "S0f", to=acc)
        num = w.op("Add", [num, w.op("MatMul", [qf, S0])], "num_s")
        S_last = w.op("Add", [S0, S_last], "S_sum")
    if variant.has_z0:
        z0 = w.op("Cast", ["z0"], "z0f", to=acc)
        den = w.op("Add", [den, w.op("MatMul", [qf, w.op("Unsqueeze", [z0, w.ints([-1])])])], "den_z")
        z_last = w.op("Add", [z0, z_last], "z_sum")
    eps = w.op("Cast", [w.attribute_float("eps")], "eps", to=acc)
    out = w.op("Div", [num, w.op("Add", [den, eps], "den_eps")], "out_acc")  # (B, H, L, M)
    out = w.op("Transpose", [out], "out_t", perm=[2, 0, 1, 3] if variant.time_major else [0, 2, 1, 3])
    out = w.op("Reshape", [out, w.op("Concat", [w.op("Shape", ["q"], end=2), w.ints([-1])], axis=0)], "out_packed")
    w.nodes.append(helper.make_node("CastLike", [out, "q"], ["out"], name="n_out"))
    w.nodes.append(helper.make_node("Identity", [S_last], ["S_last"], name="n_S_last"))
    w.nodes.append(helper.make_node("Identity", [z_last], ["z_last"], name="n_z_last"))

    doc = f"CausalLinearAttention, overload {variant.name}: masked O(L^2) standard-op body."
    return op_function(ATTENTION, w.nodes, opset_version, doc, variant.name)


# ----- the op's record for the exporter (op_export.OpExport) -----


def _parsed(node: onnx.NodeProto) -> AttentionVariant | None:
    """The variant the translation named in the node's overload, or None."""
    try:
        return parse_attention_overload(node.overload) if node.overload else None
    except ValueError:
        return None


def _double(node: onnx.NodeProto, context: NodeContext) -> bool:
    """fp64 state: from the overload the translation wrote, else from the known dtype of q."""
    parsed = _parsed(node)
    if parsed is not None:
        return parsed.double
    return input_elem_type(node, ATTENTION, context) == onnx.TensorProto.DOUBLE


def _variant(node: onnx.NodeProto, context: NodeContext) -> AttentionVariant:
    double = _double(node, context)
    parsed = _parsed(node)
    return AttentionVariant(
        present(node, ATTENTION, "S0"), present(node, ATTENTION, "z0"), present(node, ATTENTION, ATTENTION.mask_input),
        bool(attribute(node, "time_major", 0)), double,
        lowered=context.target.contrib_ops and not double and parsed is not None and parsed.lowered,
    )  # fmt: skip


def _function(variant: AttentionVariant, context: NodeContext) -> onnx.FunctionProto:
    if variant.lowered:
        return lowered_attention_function(variant, context.opset)
    return attention_function(variant, context.opset)


@dataclass(frozen=True)
class _AnyVariant:
    """The one body of every CausalLinearAttention node of a TensorRT-target graph: state dtype and layout."""

    double: bool
    time_major: bool

    @property
    def name(self) -> str:
        return ("fp64 state" if self.double else "fp32 state") + (", time-major" if self.time_major else "")


def _any_variant(node: onnx.NodeProto, context: NodeContext) -> _AnyVariant:
    check_every_input(node, ATTENTION)
    return _AnyVariant(_double(node, context), bool(attribute(node, "time_major", 0)))


def _any_function(variant: _AnyVariant, context: NodeContext) -> onnx.FunctionProto:
    function = attention_function(AttentionVariant(True, True, True, variant.time_major, variant.double), context.opset)
    function.overload = ""
    return function


ATTENTION_EXPORT = OpExport(
    spec=ATTENTION,
    torch_module="rnnx.models.ops.causal_linear_attention",
    translation=lambda target: (
        attention_node_full
        if target.every_input_present
        else attention_node
        if target.contrib_ops
        else attention_node_standard
    ),
    variant=_variant,
    function=_function,
    any_variant=_any_variant,
    any_function=_any_function,
)
