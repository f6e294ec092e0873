"""Translation functions for ``torch.onnx.export(..., custom_translation_table=...)``.

The torch exporter calls each function with ONNX IR values in place of tensors (``None`` for an
absent optional input) and the op's scalar arguments as Python values, under an onnxscript tracer;
the ops called here become nodes of the exported graph.

* target ``tensorrt``: both ops become rnnx custom nodes (plugins in TensorRT) with every input
  present, at fixed positions, so TensorRT's parser (which hands a plugin its node's inputs by
  position) never sees an empty slot: SRUScan ``U, x, weight_c, bias, c0, mask_pad`` (x a 1-element
  zero dummy where the attributes say it is unused, mask_pad all zeros when there is no padding),
  CausalLinearAttention ``q, k, v, S0, z0, mask_pad`` (zeros when the model gave no initial state, an all-zero
  mask over q's leading axes when it gave none); mask_pad is always int32 (non-zero = pad), whatever dtype the
  model's mask has, since TensorRT plugins take no bool / uint8 tensors;
* target ``onnxruntime``: both ops are custom nodes with absent inputs left out; ONNX Runtime runs
  rnnx's native kernels when its op library is registered (:mod:`rnnx.runtime.ortops`), else inlines
  their local functions: the SRUScan ``Scan`` body, and for CausalLinearAttention a body built on
  ``com.microsoft.LinearAttention`` (:mod:`.ort_attention`; the head count is in its overload name).

Each custom node gets its function overload name here (:mod:`.overloads`), where the input dtypes
are known; :func:`rnnx.export.onnx_ops.finalize` adds the matching function bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import onnx
import onnxscript
from onnxscript import ir
from onnxscript import opset18 as op

from rnnx.models.ops.sru_scan.arguments import ScanAttributes
from rnnx.runtime.contract import ops as spec

from .overloads import attention_overload, sru_overload
from .schemas import node_attribute_defaults, onnx_attribute_value, op_schema

RNNX_OPSET = onnxscript.values.Opset(spec.ONNX_DOMAIN, spec.ONNX_DOMAIN_VERSION)
_PYTHON_TYPES = {"int": int, "float": float, "str": str}


def custom_op(op: spec.OpSpec) -> onnxscript.values.Op:
    """The onnxscript op that emits an rnnx ``op`` node (its schema built from the spec)."""
    return onnxscript.values.Op(RNNX_OPSET, op.onnx_name, op_schema(op))


def node_attributes(op: spec.OpSpec, values: dict[str, Any]) -> dict[str, int | float | str]:
    """The node's attributes: spec attributes from ``values`` (bools as ints) plus the plugin pair."""
    attrs = node_attribute_defaults(op)
    for a in op.attribute_records:
        attrs[a.name] = onnx_attribute_value(_PYTHON_TYPES[a.kind](values[a.name]))
    return attrs


def bind_state_dtypes(op: spec.OpSpec, outputs: tuple[Any, ...], double: bool) -> None:
    """Gives the node's state outputs (records of role state) the state dtype where inference left it open.

    The schemas' type parameter S is unbound when no state input is given (an attention node without
    S0 / z0); the state dtype is fp64 for fp64 activations, else fp32 (``rnnx.models.ops.dtypes.state_dtype``).
    """
    for record, value in zip(op.output_records, outputs):
        if record.dtype_rule == spec.STATE and value.dtype is None:
            value.dtype = ir.DataType.DOUBLE if double else ir.DataType.FLOAT


#: Mask dtypes whose values all fit int32, so a plain Cast keeps "non-zero = pad" exactly.
_EXACT_INT32_MASKS = frozenset(
    {ir.DataType.BOOL, ir.DataType.UINT8, ir.DataType.INT8, ir.DataType.UINT16, ir.DataType.INT16}
)


def int32_mask(mask_pad: Optional[Any], lead: Any) -> Any:
    """The TensorRT layout's mask_pad: int32, non-zero = pad (docs/ops.md), the shape of the given mask.

    TensorRT has no bool / uint8 plugin tensors (``PluginTensorDesc::type``, NvInferRuntimePlugin.h), so the plugins
    take int32 only. An absent mask becomes all zeros of shape ``lead`` (a 1-D shape tensor); int32 passes as is;
    bool and the small integer types are Cast (exact); any other dtype (float, int64, ...) becomes
    ``Cast(Not(Equal(mask, 0)), int32)``, since a plain Cast would turn 0.5 or 2**32 into 0, an unpadded step.
    """
    if mask_pad is None:
        zero = onnx.helper.make_tensor("zero", onnx.TensorProto.INT32, [1], [0])
        return op.ConstantOfShape(lead, value=zero)
    if mask_pad.dtype == ir.DataType.INT32:
        return mask_pad
    if mask_pad.dtype in _EXACT_INT32_MASKS:
        return op.Cast(mask_pad, to=onnx.TensorProto.INT32)
    is_pad = op.Not(op.Equal(mask_pad, op.CastLike(op.Constant(value_int=0), mask_pad)))
    return op.Cast(is_pad, to=onnx.TensorProto.INT32)


def _full_sru_inputs(U: Any, x: Optional[Any], mask_pad: Optional[Any]) -> tuple[Any, Any]:
    """The TensorRT layout's x and mask_pad: a 1-element zero in U's dtype for an unused x; mask_pad (L, B) as int32
    (:func:`int32_mask`), all zeros for an absent one."""
    if x is None:
        x = op.CastLike(op.Constant(value_floats=[0.0]), U)
    return x, int32_mask(mask_pad, op.Shape(U, end=2))


def _full_attention_inputs(
    q: Any, v: Any, S0: Optional[Any], z0: Optional[Any], mask_pad: Optional[Any], num_heads: int, time_major: bool
) -> tuple[Any, Any, Any]:
    """The TensorRT layout's S0 (B, H, E, M) and z0 (B, H, E) (zeros in the state dtype where absent) and mask_pad
    as int32 (:func:`int32_mask`; all zeros over q's leading two axes where absent)."""
    state = onnx.TensorProto.DOUBLE if q.dtype == ir.DataType.DOUBLE else onnx.TensorProto.FLOAT
    zero = op.Cast(op.Constant(value_float=0.0), to=state)
    if S0 is None or z0 is None:
        batch = op.Shape(q, start=1, end=2) if time_major else op.Shape(q, end=1)
        heads = op.Constant(value_ints=[num_heads])
        E = op.Div(op.Shape(q, start=2), heads)
        if S0 is None:
            S0 = op.Expand(zero, op.Concat(batch, heads, E, op.Div(op.Shape(v, start=2), heads), axis=0))
        if z0 is None:
            z0 = op.Expand(zero, op.Concat(batch, heads, E, axis=0))
    return S0, z0, int32_mask(mask_pad, op.Shape(q, end=2))


def _sru_scan(
    U: Any, x: Optional[Any], weight_c: Any, bias: Any, c0: Any, mask_pad: Optional[Any], attrs: ScanAttributes,
    full_layout: bool,
) -> tuple[Any, Any]:  # fmt: skip
    """``rnnx::SRUScan`` node: (U, x?, weight_c, bias, c0, mask_pad?) -> (h, c_last).

    x is dropped where the op ignores it (k = 4, or no skip term), so the node's inputs say which
    function overload it needs; with ``full_layout`` (the TensorRT target) every input is present
    instead (:func:`_full_sru_inputs`).
    """
    if not attrs.uses_x:
        x = None
    if full_layout:
        x, mask_pad = _full_sru_inputs(U, x, mask_pad)
    node_attrs = node_attributes(spec.SRU_SCAN, attrs._asdict())
    h, c_last = custom_op(spec.SRU_SCAN)(U, x, weight_c, bias, c0, mask_pad, **node_attrs)
    double = U.dtype == ir.DataType.DOUBLE
    h.producer().overload = sru_overload(
        attrs.num_directions, attrs.num_matrices, attrs.has_skip_term, attrs.use_tanh, mask_pad is not None, double
    )
    bind_state_dtypes(spec.SRU_SCAN, (h, c_last), double)
    return h, c_last


def _attention(
    q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], mask_pad: Optional[Any], eps: float,
    num_heads: int, time_major: int, full_layout: bool, contrib: bool = True,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """``rnnx::CausalLinearAttention`` node: (q, k, v, S0?, z0?, mask_pad?) -> (out, S_last, z_last); with
    ``full_layout`` (the TensorRT target) every input is present (:func:`_full_attention_inputs`). The overload
    names the body: the states and mask present, time-major, and for the ``onnxruntime`` target's fp32 state the
    com.microsoft.LinearAttention body."""
    if full_layout:
        S0, z0, mask_pad = _full_attention_inputs(q, v, S0, z0, mask_pad, num_heads, bool(time_major))
    values = {"eps": float(eps), "num_heads": int(num_heads), "time_major": int(bool(time_major))}
    attrs = node_attributes(spec.CAUSAL_LINEAR_ATTENTION, values)
    out, S_last, z_last = custom_op(spec.CAUSAL_LINEAR_ATTENTION)(q, k, v, S0, z0, mask_pad, **attrs)
    double = q.dtype == ir.DataType.DOUBLE
    out.producer().overload = attention_overload(
        S0 is not None,
        z0 is not None,
        mask_pad is not None,
        bool(time_major),
        double,
        lowered=contrib and not (full_layout or double),
    )
    bind_state_dtypes(spec.CAUSAL_LINEAR_ATTENTION, (out, S_last, z_last), double)
    return out, S_last, z_last


def _sru_scan_translation(name: str, full_layout: bool) -> Callable[..., tuple[Any, Any]]:
    """The translation of ``torch.ops.rnnx.sru_scan`` (the torch op's signature, which the exporter matches) into
    an ``rnnx::SRUScan`` node (:func:`_sru_scan`), every input present with ``full_layout``."""

    def translate(
        U: Any, x: Optional[Any], weight_c: Any, bias: Any, c0: Any, mask_pad: Optional[Any], hidden_size: int,
        num_directions: int, num_matrices: int, has_skip_term: bool, use_tanh: bool, scale_x: float,
    ) -> tuple[Any, Any]:  # fmt: skip
        attrs = ScanAttributes.of(hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x)
        return _sru_scan(U, x, weight_c, bias, c0, mask_pad, attrs, full_layout)

    translate.__name__ = translate.__qualname__ = name
    return translate


#: The ONNX Runtime target's ``rnnx::SRUScan`` node (absent inputs left out).
sru_scan_node = _sru_scan_translation("sru_scan_node", full_layout=False)
#: The TensorRT target's ``rnnx::SRUScan`` node, every input present.
sru_scan_node_full = _sru_scan_translation("sru_scan_node_full", full_layout=True)


def attention_node(
    q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], mask_pad: Optional[Any], eps: float,
    num_heads: int, time_major: int,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """The ONNX Runtime target's ``rnnx::CausalLinearAttention`` node (absent states and mask left out): its body is
    com.microsoft.LinearAttention for a non-fp64 q, else the standard-op body (:func:`_attention`)."""
    return _attention(q, k, v, S0, z0, mask_pad, eps, num_heads, time_major, full_layout=False)


def attention_node_full(
    q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], mask_pad: Optional[Any], eps: float,
    num_heads: int, time_major: int,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """The TensorRT target's ``rnnx::CausalLinearAttention`` node, every input present."""
    return _attention(q, k, v, S0, z0, mask_pad, eps, num_heads, time_major, full_layout=True)


def attention_node_standard(
    q: Any, k: Any, v: Any, S0: Optional[Any], z0: Optional[Any], mask_pad: Optional[Any], eps: float,
    num_heads: int, time_major: int,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """The node of a target without contrib ops and with absent inputs left out (the portable ``onnx`` target): its
    body is the standard-op one."""
    return _attention(q, k, v, S0, z0, mask_pad, eps, num_heads, time_major, full_layout=False, contrib=False)
