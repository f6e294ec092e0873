"""ONNX ``OpSchema``s of the rnnx custom nodes, built from :mod:`rnnx.runtime.contract.ops`.

The schemas are only needed while a model is being *built* (onnxscript looks an op up by its
schema when a translation function calls it). An exported file never needs them: each rnnx node
ships with a model-local function (see :mod:`.finalize`), which is what ``onnx.checker``, shape
inference and ONNX Runtime use once the schemas are deregistered again.
"""

from __future__ import annotations

import onnx
from onnx import helper
from onnx.defs import OpSchema

from rnnx.runtime.contract import ops as spec

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
#: Type parameter of each dtype rule of the records (``OpTensor.dtype_rule``), with its dtypes.
TYPE_PARAMETERS = {spec.ACTIVATION: "T", spec.STATE: "S", spec.MASK: "Mask"}
_TYPES = {"T": ACTIVATION_TYPES, "S": STATE_TYPES, "Mask": MASK_TYPES}


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


def op_function(
    op: spec.OpSpec,
    nodes: list[onnx.NodeProto],
    opset_version: int,
    doc: str,
    overload: str = "",
    extra_opsets: tuple[tuple[str, int], ...] = (),
) -> onnx.FunctionProto:
    """The model-local function of an rnnx op: its inputs, outputs and attribute defaults (those of
    :func:`node_attribute_defaults`) around the body ``nodes`` (default-domain ops, plus the ops of
    ``extra_opsets``, (domain, version) pairs)."""
    defaults = node_attribute_defaults(op)
    return helper.make_function(
        spec.ONNX_DOMAIN,
        op.onnx_name,
        list(op.inputs),
        list(op.outputs),
        nodes,
        [helper.make_opsetid("", opset_version), *(helper.make_opsetid(d, v) for d, v in extra_opsets)],
        attribute_protos=[helper.make_attribute(n, val) for n, val in defaults.items()],
        doc_string=doc,
        overload=overload,
    )


def attribute_type(value: object) -> onnx.AttributeProto.AttributeType:
    """ONNX attribute type of a spec default (bool and int -> INT, float -> FLOAT, str -> STRING)."""
    return helper.make_attribute("a", onnx_attribute_value(value)).type


def type_parameter(tensor: spec.OpTensor) -> str:
    """The schema type parameter of an input / output record: ``T``, ``S`` or ``Mask`` by its dtype rule."""
    return TYPE_PARAMETERS[tensor.dtype_rule]


def op_schema(op: spec.OpSpec) -> OpSchema:
    """The ``OpSchema`` of ``op`` in domain ``spec.ONNX_DOMAIN``, version ``spec.ONNX_DOMAIN_VERSION``.

    Inputs and outputs in record order, typed by :func:`type_parameter`, optional where the record
    says so; the op's attributes (required ones without a default) plus the plugin pair.
    """
    single, optional = OpSchema.FormalParameterOption.Single, OpSchema.FormalParameterOption.Optional
    inputs = [
        OpSchema.FormalParameter(t.name, type_parameter(t), param_option=optional if t.optional else single)
        for t in op.input_records
    ]
    outputs = [OpSchema.FormalParameter(t.name, type_parameter(t)) for t in op.output_records]
    used = {type_parameter(t) for t in (*op.input_records, *op.output_records)}
    constraints = [(param, list(types), f"{param} dtypes") for param, types in _TYPES.items() if param in used]
    required = op.required_attributes
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
