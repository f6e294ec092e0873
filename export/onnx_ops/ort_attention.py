"""The ``onnxruntime`` target's body of ``rnnx::CausalLinearAttention``: ONNX Runtime's
``com.microsoft.LinearAttention``.

The target keeps the rnnx node, whose model-local function is this lowering: stock ONNX Runtime inlines it
and runs its contrib kernel, and with rnnx's op library registered (:mod:`rnnx.runtime.ortops`) ONNX
Runtime runs the native ``CausalLinearAttention`` kernel for the node instead.

LinearAttention (update_rule "linear", scale 1) computes ``S_t = S_{t-1} + k_t v_t^T`` and
``o_t = q_t^T S_t`` on packed (B, L, H*D) tensors with a (B, H, d_k, d_v) state. The rnnx op also
needs the normaliser ``z_t = z_{t-1} + phi(k_t)``: appending a column of ones to v makes the last
column of the state z and the last output column ``phi(q_t)^T z_t``. So::

    v'   = concat(v, 1)                    (B, H, L, M+1)
    past = concat(S0, z0[..., None])       (B, H, E, M+1)
    y, present = LinearAttention(phi(q), phi(k), v', past)
    out = y[..., :M] / (y[..., M:] + eps); S_last, z_last = present[..., :M], present[..., M]

The attention runs in fp32 (fp16 / bf16 inputs are cast up, ``out`` cast back), which is also the
state dtype of the rnnx op. LinearAttention needs the head count as an attribute, so the body is
specialised on it (overload suffix ``_h<H>``); fp64 inputs and graphs without a static head count get
the standard-op body (:mod:`.attention_function`): LinearAttention has no fp64.
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
    """FunctionProto ``rnnx::CausalLinearAttention`` overload ``variant.name`` (``variant.heads`` > 0).

    Inputs q, k (B, H, L, E), v (B, H, L, M), S0 (B, H, E, M), z0 (B, H, E) (the states read only when
    the variant has them); outputs out (B, H, L, M) in q's dtype, S_last, z_last in fp32.
    """
    if variant.heads <= 0 or variant.double:
        raise ValueError(f"the com.microsoft.LinearAttention body needs fp32 state and heads > 0; got {variant}")
    w = NodeWriter("")
    one = w.scalar_float(1.0, "one")

    def phi(name: str) -> str:
        return w.op("Add", [w.op("Elu", [w.op("Cast", [name], to=_FP32)]), one], f"phi_{name}")

    def pack(x: str) -> str:
        """(B, H, L, D) -> (B, L, H*D)."""
        return w.op("Reshape", [w.op("Transpose", [x], perm=[0, 2, 1, 3]), w.ints([0, 0, -1])], "packed")

    def columns(x: str, start: int, end: int) -> str:
        """x[..., start:end]."""
        return w.op("Slice", [x, w.ints([start]), w.ints([end]), w.ints([-1])], "columns")

    def shape(x: str, start: int, end: int | None = None) -> str:
        return w.op("Shape", [x], "shape", start=start, **({"end": end} if end is not None else {}))

    vf = w.op("Cast", ["v"], "vf", to=_FP32)
    ones = w.op("Expand", [one, w.op("Concat", [shape(vf, 0, 3), w.ints([1])], axis=0)], "ones")
    inputs = [pack(phi("q")), pack(phi("k")), pack(w.op("Concat", [vf, ones], "v_ext", axis=-1))]
    if variant.has_S0 or variant.has_z0:
        zero = w.scalar_float(0.0, "zero")
        S = "S0" if variant.has_S0 else w.op("Expand", [zero, w.op("Concat", [shape("q", 0, 2), shape("q", 3),
                                                                          shape("v", 3)], axis=0)])  # fmt: skip
        z = (
            "z0"
            if variant.has_z0
            else w.op("Expand", [zero, w.op("Concat", [shape("q", 0, 2), shape("q", 3)], axis=0)])
        )
        z_col = w.op("Unsqueeze", [w.op("Cast", [z], to=_FP32), w.ints([-1])])
        inputs.append(w.op("Concat", [w.op("Cast", [S], to=_FP32), z_col], "past", axis=-1))
    y, present = w.op("LinearAttention", inputs, "la", num_outputs=2, domain=MS_DOMAIN, q_num_heads=variant.heads,
                      kv_num_heads=variant.heads, update_rule="linear", scale=1.0)  # fmt: skip
    unpacked = w.op("Concat", [shape("q", 0, 1), shape("q", 2, 3), shape("q", 1, 2), w.ints([-1])], axis=0)
    y = w.op("Transpose", [w.op("Reshape", [y, unpacked])], "y", perm=[0, 2, 1, 3])  # (B, H, L, M+1)
    den = w.op("Add", [columns(y, -1, _INT64_MAX), w.attribute_float("eps")], "den")
    w.nodes.append(
        onnx.helper.make_node("CastLike", [w.op("Div", [columns(y, 0, -1), den]), "q"], ["out"], name="n_out")
    )
    w.nodes.append(onnx.helper.make_node("Identity", [columns(present, 0, -1)], ["S_last"], name="n_S_last"))
    z_last = w.op("Squeeze", [columns(present, -1, _INT64_MAX), w.ints([-1])])
    w.nodes.append(onnx.helper.make_node("Identity", [z_last], ["z_last"], name="n_z_last"))
    doc = f"CausalLinearAttention, overload {variant.name}: com.microsoft.LinearAttention body ({variant.heads} heads)."
    return op_function(spec.CAUSAL_LINEAR_ATTENTION, w.nodes, opset_version, doc, variant.name,
                       extra_opsets=((MS_DOMAIN, MS_DOMAIN_VERSION),))  # fmt: skip
