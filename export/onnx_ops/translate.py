"""Translation functions for ``torch.onnx.export(..., custom_translation_table=...)``.

The torch exporter calls each function with ONNX IR values in place of tensors (``None`` for an
absent optional input) and the op's scalar arguments as Python values, under an onnxscript tracer;
the ops called here become nodes of the exported graph.

* target ``tensorrt``: both ops become rnnx custom nodes (plugins in TensorRT);
* target ``onnxruntime``: ``SRUScan`` stays a custom node (ONNX Runtime inlines its local
  function), ``CausalLinearAttention`` is lowered to ``com.microsoft.LinearAttention``
  (:mod:`.ort_attention`).

Each custom node gets its function overload name here (:mod:`.overloads`), where the input dtypes
are known; :func:`rnnx.export.onnx_ops.finalize` adds the matching function bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import onnxscript
import torch
from onnxscript import ir

from rnnx.models.ops import spec
from rnnx.runtime.artifact import TARGETS

from .ort_attention import lowered_attention
from .overloads import attention_overload, sru_overload
from .schemas import node_attribute_defaults, onnx_attribute_value, op_schema

RNNX_OPSET = onnxscript.values.Opset(spec.ONNX_DOMAIN, spec.ONNX_DOMAIN_VERSION)
_PYTHON_TYPES = {"int": int, "float": float, "str": str}


def custom_op(op: spec.OpSpec) -> onnxscript.values.Op:
    """The onnxscript op that emits an rnnx ``op`` node (its schema built from the spec)."""
    return onnxscript.values.Op(RNNX_OPSET, op.onnx_name, op_schema(op))


def _node_attributes(op: spec.OpSpec, values: dict[str, Any]) -> dict[str, int | float | str]:
    """The node's attributes: spec attributes from ``values`` (bools as ints) plus the plugin pair."""
    attrs = node_attribute_defaults(op)
    for a in op.attribute_records:
        attrs[a.name] = onnx_attribute_value(_PYTHON_TYPES[a.kind](values[a.name]))
    return attrs


def _bind_state_dtypes(op: spec.OpSpec, outputs: tuple[Any, ...], double: bool) -> None:
    """Gives the node's state outputs (records of role state) the state dtype where inference left it open.

    The schemas' type parameter S is unbound when no state input is given (an attention node without
    S0 / z0); the state dtype is fp64 for fp64 activations, else fp32 (``spec.state_dtype_for``).
    """
    for record, value in zip(op.output_records, outputs):
        if record.dtype_rule == spec.STATE and value.dtype is None:
            value.dtype = ir.DataType.DOUBLE if double else ir.DataType.FLOAT


def sru_scan_node(
    U: Any,
    x: Optional[Any],
    weight_c: Any,
    bias: Any,
    c0: Any,
    mask_pad: Optional[Any],
    hidden_size: int,
    num_directions: int,
    num_matrices: int,
    has_skip_term: bool,
    use_tanh: bool,
    scale_x: float,
) -> tuple[Any, Any]:
    """``rnnx::SRUScan`` node: (U, x?, weight_c, bias, c0, mask_pad?) -> (h, c_last).

    x is dropped where the op ignores it (k = 4, or no skip term), so the node's inputs say which
    function overload it needs.
    """
    if num_matrices != 3 or not has_skip_term:
        x = None
    attrs = _node_attributes(
        spec.SRU_SCAN,
        dict(
            hidden_size=hidden_size,
            num_directions=num_directions,
            num_matrices=num_matrices,
            has_skip_term=has_skip_term,
            use_tanh=use_tanh,
            scale_x=scale_x,
        ),
    )
    h, c_last = custom_op(spec.SRU_SCAN)(U, x, weight_c, bias, c0, mask_pad, **attrs)
    double = U.dtype == ir.DataType.DOUBLE
    h.producer().overload = sru_overload(
        num_directions, num_matrices, bool(has_skip_term), bool(use_tanh), mask_pad is not None, double
    )
    _bind_state_dtypes(spec.SRU_SCAN, (h, c_last), double)
    return h, c_last


def attention_node(q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], eps: float) -> tuple[Any, Any, Any]:
    """``rnnx::CausalLinearAttention`` node: (q, k, v, S0?, z0?) -> (out, S_last, z_last)."""
    attrs = _node_attributes(spec.CAUSAL_LINEAR_ATTENTION, {"eps": float(eps)})
    out, S_last, z_last = custom_op(spec.CAUSAL_LINEAR_ATTENTION)(q, k, v, S0, z0, **attrs)
    double = q.dtype == ir.DataType.DOUBLE
    out.producer().overload = attention_overload(S0 is not None, z0 is not None, double)
    _bind_state_dtypes(spec.CAUSAL_LINEAR_ATTENTION, (out, S_last, z_last), double)
    return out, S_last, z_last


def _torch_op(op: spec.OpSpec) -> torch._ops.OpOverload:
    return getattr(getattr(torch.ops, spec.TORCH_NAMESPACE), op.torch_name).default


def translation_table(target: str) -> dict[torch._ops.OpOverload, Callable[..., Any]]:
    """``{torch.ops.rnnx.<op>.default: translation function}`` for ``target`` (one of ``TARGETS``)."""
    if target not in TARGETS:
        raise ValueError(f"unknown export target {target!r}; expected one of {TARGETS}")
    import rnnx.models.ops.linear_attention
    import rnnx.models.ops.sru  # noqa: F401

    attention = attention_node if target == "tensorrt" else lowered_attention(attention_node)
    return {
        _torch_op(spec.SRU_SCAN): sru_scan_node,
        _torch_op(spec.CAUSAL_LINEAR_ATTENTION): attention,
    }
