"""ONNX ``OpSchema``s of the rnnx custom nodes, built from :mod:`rnnx.models.ops.spec`.

The schemas are only needed while a model is being *built* (onnxscript looks an op up by its
schema when a translation function calls it). An exported file never needs them: each rnnx node
ships with a model-local function (see :mod:`.finalize`), which is what ``onnx.checker``, shape
inference and ONNX Runtime use once the schemas are deregistered again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import onnx
from onnx import helper
from onnx.defs import OpSchema

from rnnx.models.ops import spec

#: Activation dtypes (type parameter ``T``).
ACTIVATION_TYPES = ("tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)")
#: Recurrent state dtypes (type parameter ``S``): fp32, or fp64 for fp64 activations.
STATE_TYPES = ("tensor(float)", "tensor(double)")
#: Pad-mask dtypes (type parameter ``Mask``): anything whose non-zero entries mean "pad".
MASK_TYPES = (
    "tensor(bool)",
    "tensor(uint8)",
    "tensor(int32)",
    "tensor(int64)",
    "tensor(float)",
    "tensor(float16)",
    "tensor(bfloat16)",
    "tensor(double)",
)
#: Attributes that are required (their spec default is only a placeholder).
REQUIRED_ATTRIBUTES = {spec.SRU_SCAN.onnx_name: frozenset({"hidden_size"})}
#: Inputs / outputs in the state dtype, per op; the mask input per op.
STATE_NAMES = frozenset({"c0", "c_last", "S0", "z0", "S_last", "z_last"})
MASK_NAMES = frozenset({"mask_pad"})


def onnx_attribute_value(value: object) -> int | float | str:
    """A spec default as an ONNX attribute value: bool -> int, int, float, str unchanged."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str)):
        return value
    raise TypeError(f"unsupported attribute default {value!r}")


def node_attribute_defaults(op: spec.OpSpec) -> dict[str, int | float | str]:
    """Every attribute an rnnx node carries, with its default: the op's own plus the plugin pair."""
    attrs = {name: onnx_attribute_value(v) for name, v in op.attributes.items()}
    attrs[spec.PLUGIN_VERSION_ATTR] = spec.PLUGIN_VERSION
    attrs[spec.PLUGIN_NAMESPACE_ATTR] = spec.PLUGIN_NAMESPACE
    return attrs


def attribute_type(value: object) -> onnx.AttributeProto.AttributeType:
    """ONNX attribute type of a spec default (bool and int -> INT, float -> FLOAT, str -> STRING)."""
    return helper.make_attribute("a", onnx_attribute_value(value)).type


def _type_param(name: str) -> str:
    if name in STATE_NAMES:
        return "S"
    if name in MASK_NAMES:
        return "Mask"
    return "T"


def op_schema(op: spec.OpSpec) -> OpSchema:
    """The ``OpSchema`` of ``op`` in domain ``spec.ONNX_DOMAIN``, version ``spec.ONNX_DOMAIN_VERSION``."""
    single, optional = OpSchema.FormalParameterOption.Single, OpSchema.FormalParameterOption.Optional
    inputs = [
        OpSchema.FormalParameter(
            name, _type_param(name), param_option=optional if name in op.optional_inputs else single
        )
        for name in op.inputs
    ]
    outputs = [OpSchema.FormalParameter(name, _type_param(name)) for name in op.outputs]
    used = {_type_param(n) for n in (*op.inputs, *op.outputs)}
    constraints = [
        (param, list(types), f"{param} dtypes")
        for param, types in (("T", ACTIVATION_TYPES), ("S", STATE_TYPES), ("Mask", MASK_TYPES))
        if param in used
    ]
    required = REQUIRED_ATTRIBUTES.get(op.onnx_name, frozenset())
    attributes = []
    for name, default in node_attribute_defaults(op).items():
        if name in required:
            attributes.append(OpSchema.Attribute(name, attribute_type(default), name, required=True))
        else:
            attributes.append(OpSchema.Attribute(name, helper.make_attribute(name, default), name))
    return OpSchema(
        op.onnx_name,
        spec.ONNX_DOMAIN,
        spec.ONNX_DOMAIN_VERSION,
        doc=f"rnnx custom op {op.onnx_name}; see docs/ops.md",
        inputs=inputs,
        outputs=outputs,
        type_constraints=constraints,
        attributes=attributes,
    )


def _registered(op: spec.OpSpec) -> bool:
    return onnx.defs.has(op.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN)


@contextlib.contextmanager
def custom_op_schemas() -> Iterator[None]:
    """Registers the rnnx ``OpSchema``s for the block and deregisters them on exit.

    Re-entrant: schemas that were already registered when the block starts are left alone.
    """
    added = []
    try:
        for op in spec.ALL_OPS:
            if not _registered(op):
                onnx.defs.register_schema(op_schema(op))
                added.append(op)
        yield
    finally:
        for op in reversed(added):
            onnx.defs.deregister_schema(op.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN)
