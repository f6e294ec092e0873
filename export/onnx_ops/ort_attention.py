"""Causal linear attention lowered to ONNX Runtime's ``com.microsoft.LinearAttention`` (target
``onnxruntime``).

LinearAttention (update_rule "linear", scale 1) computes ``S_t = S_{t-1} + k_t v_t^T`` and
``o_t = q_t^T S_t`` on packed (B, L, H*D) tensors with a (B, H, d_k, d_v) state. The rnnx op also
needs the normaliser ``z_t = z_{t-1} + phi(k_t)``: appending a column of ones to v makes the last
column of the state z and the last output column ``phi(q_t)^T z_t``. So::

    v'   = concat(v, 1)                    (B, H, L, M+1)
    past = concat(S0, z0[..., None])       (B, H, E, M+1)
    y, present = LinearAttention(phi(q), phi(k), v', past)
    out = y[..., :M] / (y[..., M:] + eps); S_last, z_last = present[..., :M], present[..., M]

The attention runs in fp32 (fp16 / bf16 inputs are cast up, ``out`` cast back), which is also the
state dtype of the rnnx op. fp64 inputs keep the rnnx custom node: LinearAttention has no fp64.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import onnx
import onnxscript
from onnxscript import ir
from onnxscript import opset18 as op

MS_DOMAIN = "com.microsoft"
MS_DOMAIN_VERSION = 1
_MS_OPSET = onnxscript.values.Opset(MS_DOMAIN, MS_DOMAIN_VERSION)
_FP32 = onnx.TensorProto.FLOAT
_INT64_MAX = 2**63 - 1


def linear_attention_schema() -> onnx.defs.OpSchema:
    """The part of ``com.microsoft.LinearAttention``'s schema used here (decay and beta left out)."""
    P = onnx.defs.OpSchema.FormalParameter
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    types = ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"]
    A = onnx.defs.OpSchema.Attribute
    return onnx.defs.OpSchema(
        "LinearAttention",
        MS_DOMAIN,
        MS_DOMAIN_VERSION,
        inputs=[P("query", "T"), P("key", "T"), P("value", "T"), P("past_state", "S", param_option=optional)],
        outputs=[P("output", "T"), P("present_state", "S")],
        type_constraints=[("T", types, ""), ("S", types, "")],
        attributes=[
            A("q_num_heads", onnx.AttributeProto.INT, "", required=True),
            A("kv_num_heads", onnx.AttributeProto.INT, "", required=True),
            A("update_rule", onnx.AttributeProto.STRING, "", required=False),
            A("scale", onnx.AttributeProto.FLOAT, "", required=False),
        ],
    )


def _ints(values: list[int]) -> Any:
    return op.Constant(value_ints=values)


def _feature_map(x: Any) -> Any:
    """phi(x) = elu(x) + 1 in fp32."""
    return op.Add(op.Elu(op.Cast(x, to=_FP32)), op.Constant(value_float=1.0))


def _pack(x: Any) -> Any:
    """(B, H, L, D) -> (B, L, H*D)."""
    return op.Reshape(op.Transpose(x, perm=[0, 2, 1, 3]), _ints([0, 0, -1]))


def _last_columns(x: Any, start: int, end: int) -> Any:
    """x[..., start:end] (end may be _INT64_MAX)."""
    return op.Slice(x, _ints([start]), _ints([end]), _ints([-1]))


def lowered_linear_attention(
    q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], eps: float, num_heads: int
) -> tuple[Any, Any, Any]:
    """Standard ops + LinearAttention for q, k (B, H, L, E), v (B, H, L, M), S0 (B, H, E, M), z0 (B, H, E).

    Returns out (B, H, L, M) in q's dtype, S_last (B, H, E, M) and z_last (B, H, E) in fp32.
    """
    vf = op.Cast(v, to=_FP32)
    ones = op.Expand(op.Constant(value_float=1.0), op.Concat(op.Shape(vf, end=3), _ints([1]), axis=0))
    v_ext = op.Concat(vf, ones, axis=-1)  # (B, H, L, M+1)
    inputs = [_pack(_feature_map(q)), _pack(_feature_map(k)), _pack(v_ext)]
    if S0 is not None or z0 is not None:
        S = (
            S0
            if S0 is not None
            else op.Expand(
                op.Constant(value_float=0.0),
                op.Concat(op.Shape(q, end=2), op.Shape(q, start=3), op.Shape(v, start=3), axis=0),
            )
        )
        z = (
            z0
            if z0 is not None
            else op.Expand(op.Constant(value_float=0.0), op.Concat(op.Shape(q, end=2), op.Shape(q, start=3), axis=0))
        )
        inputs.append(op.Concat(op.Cast(S, to=_FP32), op.Unsqueeze(op.Cast(z, to=_FP32), _ints([-1])), axis=-1))
    la = onnxscript.values.Op(_MS_OPSET, "LinearAttention", linear_attention_schema())
    y, present = la(*inputs, q_num_heads=num_heads, kv_num_heads=num_heads, update_rule="linear", scale=1.0)
    y = op.Transpose(
        op.Reshape(
            y,
            op.Concat(
                op.Shape(q, end=1), op.Shape(q, start=2, end=3), op.Shape(q, start=1, end=2), _ints([-1]), axis=0
            ),
        ),
        perm=[0, 2, 1, 3],
    )  # (B, H, L, M+1)
    den = op.Add(_last_columns(y, -1, _INT64_MAX), op.Constant(value_float=float(eps)))
    out = op.CastLike(op.Div(_last_columns(y, 0, -1), den), q)
    S_last = _last_columns(present, 0, -1)
    z_last = op.Squeeze(_last_columns(present, -1, _INT64_MAX), _ints([-1]))
    return out, S_last, z_last


def lowered_attention(fallback: Callable[..., tuple[Any, Any, Any]]) -> Callable[..., tuple[Any, Any, Any]]:
    """Translation function of ``causal_linear_attention`` for target ``onnxruntime``.

    Needs a static head count (q's dim 1); uses ``fallback`` (the custom node) for fp64 inputs.
    """

    def translate(q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], eps: float) -> tuple[Any, Any, Any]:
        heads = q.shape[1] if q.shape is not None else None
        if q.dtype == ir.DataType.DOUBLE or not isinstance(heads, int):
            return fallback(q, k, v, S0, z0, eps)
        return lowered_linear_attention(q, k, v, S0, z0, eps, heads)

    return translate
