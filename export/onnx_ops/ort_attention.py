"""The ``onnxruntime`` target's body of ``rnnx::CausalLinearAttention``: ONNX Runtime's
``com.microsoft.LinearAttention``.

The target keeps the rnnx node, whose model-local function is this lowering: stock ONNX Runtime inlines it
and runs its contrib kernel, and with rnnx's op library registered (:mod:`rnnx.runtime.ortops`) ONNX
Runtime runs the native ``CausalLinearAttention`` kernel for the node instead.

LinearAttention (update_rule "linear", scale 1) computes ``S_t = S_{t-1} + k_t v_t^T`` and
``o_t = q_t^T S_t`` on packed (B, L, H*D) tensors — the rnnx op's own layout — with a (B, H, d_k, d_v)
state. The rnnx op also needs the normaliser ``z_t = z_{t-1} + phi(k_t)``: appending a column of ones to
each head of v makes the last column of the state z and the last output column ``phi(q_t)^T z_t``. So::

    v'   = pad each head of v with a 1      (B, L, H*(M+1))
    past = concat(S0, z0[..., None])        (B, H, E, M+1)
    y, present = LinearAttention(phi(q) , phi(k) * keep, v' * keep, past)
    out = y[..., :M] / (y[..., M:] + eps) per head; S_last, z_last = present[..., :M], present[..., M]

with keep = not mask_pad (B, L, 1) when the node has a mask, so a pad step adds nothing to the state. A
time-major node is transposed to batch-first around it. The attention runs in fp32 (fp16 / bf16 inputs are
cast up, ``out`` cast back), which is also the state dtype of the rnnx op. The head count is the node's
``num_heads`` (an attribute reference); fp64 inputs get the standard-op body (:mod:`.attention_function`):
LinearAttention has no fp64.
"""

from __future__ import annotations

import onnx

from rnnx.runtime.contract import ops as spec

from .builder import NodeWriter
from .overloads import AttentionVariant
from .schemas import op_function

MS_DOMAIN = "com.microsoft"
MS_DOMAIN_VERSION = 1
_FP32 = onnx.TensorProto.FLOAT
_INT64_MAX = 2**63 - 1


def lowered_attention_function(variant: AttentionVariant, opset_version: int) -> onnx.FunctionProto:
    """FunctionProto ``rnnx::CausalLinearAttention`` overload ``variant.name`` (``variant.lowered``).

    Inputs q, k (B, L, H*E), v (B, L, H*M) (time-major: (L, B, ...)), S0 (B, H, E, M), z0 (B, H, E), mask_pad (the
    states and mask read only when the variant has them); outputs out (q's layout with M) in q's dtype, S_last,
    z_last in fp32.
    """
    if not variant.lowered or variant.double:
        raise ValueError(f"the com.microsoft.LinearAttention body needs fp32 state; got {variant}")
    w = NodeWriter("")
    one = w.scalar_float(1.0, "one")
    heads = w.op("Unsqueeze", [w.attribute_int("num_heads"), w.ints([0])], "heads")
    per_head = w.op("Concat", [w.ints([0, 0]), heads, w.ints([-1])], "per_head", axis=0)  # (B, L, H, -1)

    def batch_first(x: str) -> str:
        return w.op("Transpose", [x], f"{x}_bf", perm=[1, 0, 2]) if variant.time_major else x

    def phi(x: str) -> str:
        return w.op("Add", [w.op("Elu", [w.op("Cast", [x], to=_FP32)]), one], "phi")

    def columns(x: str, start: int, end: int) -> str:
        """x[..., start:end]."""
        return w.op("Slice", [x, w.ints([start]), w.ints([end]), w.ints([-1])], "columns")

    q, k, v = batch_first("q"), batch_first("k"), batch_first("v")
    qf, kf, vf = phi(q), phi(k), w.op("Cast", [v], "vf", to=_FP32)
    if variant.has_mask:
        mask = w.op("Transpose", ["mask_pad"], perm=[1, 0]) if variant.time_major else "mask_pad"
        pad = w.op("Cast", [mask], to=onnx.TensorProto.BOOL)
        keep = w.op("Where", [pad, w.scalar_float(0.0, "zero"), one], "keep")  # the model's own keep mask (a Where)
        keep = w.op("Unsqueeze", [keep, w.ints([-1])], "keep3")  # (B, L, 1)
        kf, vf = w.op("Mul", [kf, keep], "kf"), w.op("Mul", [vf, keep], "vf_kept")
    v_ext = w.op("Pad", [w.op("Reshape", [vf, per_head]), w.ints([0, 0, 0, 0, 0, 0, 0, 1]), one], "v_ones")
    inputs = [qf, kf, w.op("Reshape", [v_ext, w.ints([0, 0, -1])], "v_ext")]
    if variant.has_S0 or variant.has_z0:
        if not (variant.has_S0 and variant.has_z0):  # the shapes of the zeros a missing state starts from
            zero = w.scalar_float(0.0, "zero")
            batch = w.op("Shape", [q], end=1)
            E = w.op("Div", [w.op("Shape", [q], start=2), heads], "E")
        if variant.has_S0:
            S = w.op("Cast", ["S0"], to=_FP32)
        else:
            M = w.op("Div", [w.op("Shape", [v], start=2), heads], "M")
            S = w.op("Expand", [zero, w.op("Concat", [batch, heads, E, M], axis=0)])
        z = (
            w.op("Cast", ["z0"], to=_FP32)
            if variant.has_z0
            else w.op("Expand", [zero, w.op("Concat", [batch, heads, E], axis=0)])
        )
        inputs.append(w.op("Concat", [S, w.op("Unsqueeze", [z, w.ints([-1])])], "past", axis=-1))
    la = onnx.helper.make_node(
        "LinearAttention", inputs, [w.fresh("y"), w.fresh("present")], name=w.fresh("n_la"), domain=MS_DOMAIN,
        update_rule="linear", scale=1.0,
    )  # fmt: skip
    for name in ("q_num_heads", "kv_num_heads"):
        la.attribute.append(onnx.AttributeProto(name=name, ref_attr_name="num_heads", type=onnx.AttributeProto.INT))
    w.nodes.append(la)
    y, present = la.output
    y = w.op("Reshape", [y, per_head], "y")  # (B, L, H, M+1)
    den = w.op("Add", [columns(y, -1, _INT64_MAX), w.attribute_float("eps")], "den")
    out = w.op("Reshape", [w.op("Div", [columns(y, 0, -1), den]), w.ints([0, 0, -1])], "out_bf")
    if variant.time_major:
        out = w.op("Transpose", [out], "out_tm", perm=[1, 0, 2])
    w.nodes.append(onnx.helper.make_node("CastLike", [out, "q"], ["out"], name="n_out"))
    w.nodes.append(onnx.helper.make_node("Identity", [columns(present, 0, -1)], ["S_last"], name="n_S_last"))
    z_last = w.op("Gather", [present, w.scalar_int(-1)], "z_last", axis=-1)  # the ones column: z (B, H, E)
    w.nodes.append(onnx.helper.make_node("Identity", [z_last], ["z_last"], name="n_z_last"))
    doc = f"CausalLinearAttention, overload {variant.name}: com.microsoft.LinearAttention body."
    return op_function(spec.CAUSAL_LINEAR_ATTENTION, w.nodes, opset_version, doc, variant.name,
                       extra_opsets=((MS_DOMAIN, MS_DOMAIN_VERSION),))  # fmt: skip
