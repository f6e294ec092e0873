"""``finalize``: give every rnnx node of an exported model its model-local function.

After the torch exporter has written the rnnx custom nodes (:mod:`.translate`), this adds one
``FunctionProto`` (domain ``rnnx``) per distinct overload in use (the ``onnxruntime`` target), or one
function per op without overloads (the ``tensorrt`` target: TensorRT's parser keys local functions by
name only, so two overloads of one op would collide there; its nodes have every input present and the
body reads the structure from the attributes, :func:`~.sru_function.sru_scan_any_function`), with a
standard-op body
(:mod:`.sru_function`, :mod:`.attention_function`), checks each node's ``plugin_version`` /
``plugin_namespace`` and adds the opset imports. The result passes ``onnx.checker`` (full check)
and strict shape inference without the rnnx schemas registered, and stock ONNX Runtime runs it by
inlining the functions. TensorRT ignores function bodies and overloads for a node whose plugin it
finds (by op type, ``plugin_version``, ``plugin_namespace``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Union

import onnx

from rnnx.runtime.contract import ops as spec
from rnnx.runtime.contract import targets
from rnnx.runtime.contract.targets import Target

from .attention_function import attention_function
from .ort_attention import MS_DOMAIN, MS_DOMAIN_VERSION, lowered_attention_function
from .overloads import AttentionVariant, SRUVariant, parse_attention_overload, parse_sru_overload
from .schemas import node_attribute_defaults
from .sru_function import sru_scan_any_function, sru_scan_function

#: Lowest default-domain opset the function bodies are written for (Shape start/end, CastLike).
MIN_OPSET = 15
#: IR version that introduced function overloads.
MIN_IR_VERSION = 10
_SPECS = {op.onnx_name: op for op in spec.ALL_OPS}


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Nodes of ``graph`` and of all its subgraphs (If / Loop / Scan bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_nodes(g)


def _model_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from _all_nodes(model.graph)
    for function in model.functions:
        if function.domain != spec.ONNX_DOMAIN:
            yield from function.node


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Known element types by value name (graph inputs, outputs, value_info, initializers)."""
    types = {i.name: i.data_type for i in model.graph.initializer}
    for vi in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _present(node: onnx.NodeProto, op: spec.OpSpec, name: str) -> bool:
    i = op.inputs.index(name)
    return i < len(node.input) and node.input[i] != ""


def _attr(node: onnx.NodeProto, name: str, default: object) -> object:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _is_double(node: onnx.NodeProto, op: spec.OpSpec, parse, types: dict[str, int]) -> bool:
    """fp64 state: from the overload the translation wrote, else from the known dtype of the input that
    carries the activation dtype (``op.dtype_input``)."""
    if node.overload:
        try:
            return parse(node.overload).double
        except ValueError:
            pass
    i = op.inputs.index(op.dtype_input)
    return i < len(node.input) and types.get(node.input[i]) == onnx.TensorProto.DOUBLE


def _check_required_attributes(node: onnx.NodeProto, op: spec.OpSpec) -> None:
    """``ValueError`` when a required attribute of ``op`` (``op.required_attributes``) is missing."""
    missing = sorted(name for name in op.required_attributes if _attr(node, name, None) is None)
    if missing:
        raise ValueError(f"{op.onnx_name} node {node.name!r}: required attribute(s) {', '.join(missing)} missing")


def _variant(node: onnx.NodeProto, types: dict[str, int]) -> SRUVariant | AttentionVariant:
    op = _SPECS[node.op_type]
    _check_required_attributes(node, op)
    if op is spec.SRU_SCAN:
        a = {n: _attr(node, n, d) for n, d in op.attributes.items()}
        variant: SRUVariant | AttentionVariant = SRUVariant(
            int(a["num_directions"]),
            int(a["num_matrices"]),
            bool(a["has_skip_term"]),
            bool(a["use_tanh"]),
            _present(node, op, op.mask_input),
            _is_double(node, op, parse_sru_overload, types),
        )
        if variant.uses_x and not _present(node, op, "x"):
            raise ValueError(f"SRUScan node {node.name!r}: k = 3 with the skip term needs input x")
        if int(a["hidden_size"]) <= 0:
            raise ValueError(f"SRUScan node {node.name!r}: hidden_size must be a positive int")
        return variant
    double = _is_double(node, op, parse_attention_overload, types)
    return AttentionVariant(
        _present(node, op, "S0"),
        _present(node, op, "z0"),
        _present(node, op, op.mask_input),
        bool(_attr(node, "time_major", 0)),
        double,
        lowered=not double and _lowered(node),
    )


def _lowered(node: onnx.NodeProto) -> bool:
    """Whether the translation named the com.microsoft.LinearAttention body in an attention node's overload."""
    try:
        return parse_attention_overload(node.overload).lowered if node.overload else False
    except ValueError:
        return False


def _add_any_function(
    node: onnx.NodeProto, types: dict[str, int], functions: dict[str, onnx.FunctionProto], opset: int
) -> None:
    """The TensorRT target: checks that ``node`` has every input of its op (no empty slot), clears its
    overload and adds the op's one function (keyed ``op:`` in ``functions``); ValueError when two nodes
    of one op need bodies of different state dtypes (one graph holds one function per op)."""
    op = _SPECS[node.op_type]
    _check_required_attributes(node, op)
    missing = [name for i, name in enumerate(op.inputs) if i >= len(node.input) or not node.input[i]]
    if missing:
        raise ValueError(
            f"{op.onnx_name} node {node.name!r}: the TensorRT layout needs every input; missing {missing} "
            f"(inputs {list(node.input)})"
        )
    parse = parse_sru_overload if op is spec.SRU_SCAN else parse_attention_overload
    double = _is_double(node, op, parse, types)
    node.overload = ""
    key = f"{node.op_type}:"
    time_major = bool(_attr(node, "time_major", 0)) if op is spec.CAUSAL_LINEAR_ATTENTION else False
    tag = f" [{_dtype_name(double)}{', time-major' if time_major else ''}]"
    if key in functions:
        if functions[key].doc_string.endswith(tag):
            return
        raise ValueError(
            f"{op.onnx_name} nodes of one TensorRT-target graph mix fp32 and fp64 state or layouts "
            "(one function per op)"
        )
    if op is spec.SRU_SCAN:
        function = sru_scan_any_function(double, opset)
    else:
        function = attention_function(AttentionVariant(True, True, True, time_major, double), opset)
        function.overload = ""
    function.doc_string += tag
    functions[key] = function


def _dtype_name(double: bool) -> str:
    return "fp64 state" if double else "fp32 state"


def _check_plugin_attributes(node: onnx.NodeProto) -> None:
    """Adds missing plugin_version / plugin_namespace; ``ValueError`` if one has another value."""
    for name in (spec.PLUGIN_VERSION_ATTR, spec.PLUGIN_NAMESPACE_ATTR):
        expected = node_attribute_defaults(_SPECS[node.op_type])[name]
        value = _attr(node, name, None)
        if value is None:
            node.attribute.append(onnx.helper.make_attribute(name, expected))
        elif value != expected.encode():
            raise ValueError(f"{node.op_type} node {node.name!r}: {name} is {value!r}, expected {expected!r}")


def _default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise ValueError("model has no default-domain (ai.onnx) opset import")


def _set_opset(model: onnx.ModelProto, domain: str, version: int) -> None:
    for imp in model.opset_import:
        if imp.domain == domain:
            if imp.version != version:
                raise ValueError(f"model imports {domain!r} version {imp.version}, expected {version}")
            return
    model.opset_import.append(onnx.helper.make_opsetid(domain, version))


def _restore_output_types(model: onnx.ModelProto) -> None:
    """Types graph outputs that have none, by shape inference through the local functions.

    The exporter's optimizer runs ONNX inference on the rnnx schemas, which cannot bind the state
    type of an attention node without S0 / z0 and drops the type of such outputs.
    """
    if all(o.type.HasField("tensor_type") for o in model.graph.output):
        return
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {
        vi.name: vi.type
        for vi in (*inferred.graph.value_info, *inferred.graph.output)
        if vi.type.HasField("tensor_type")
    }
    producers = {out: node for node in model.graph.node for out in node.output}
    values = {vi.name: vi.type for vi in (*model.graph.input, *model.graph.value_info, *inferred.graph.value_info)}
    for output in model.graph.output:
        if output.type.HasField("tensor_type"):
            continue
        if output.name in known:
            output.type.CopyFrom(known[output.name])
        elif output.name in producers and producers[output.name].domain == spec.ONNX_DOMAIN:
            typed = _rnnx_output_type(producers[output.name], output.name, values)
            if typed is not None:
                output.type.CopyFrom(typed)


def _rnnx_output_type(node: onnx.NodeProto, name: str, values: dict[str, onnx.TypeProto]) -> onnx.TypeProto | None:
    """The type of output ``name`` of an rnnx node from its op's records, where inference cannot give it
    (a body with a non-standard op, e.g. com.microsoft.LinearAttention): the state dtype (fp64 for fp64
    activations, else fp32) or the activation dtype of ``dtype_input``; each dim copied from an input
    that has the same symbol in the spec (e.g. S_last's E from q), else left symbolic."""
    op = _SPECS[node.op_type]
    record = op.output_records[list(node.output).index(name)]
    inputs = {r.name: values.get(v) for r, v in zip(op.input_records, node.input) if v}
    dtype_input = inputs.get(op.dtype_input)
    if dtype_input is None or not dtype_input.HasField("tensor_type"):
        return None
    activation = dtype_input.tensor_type.elem_type
    if record.dtype_rule == spec.STATE:
        elem = onnx.TensorProto.DOUBLE if activation == onnx.TensorProto.DOUBLE else onnx.TensorProto.FLOAT
    else:
        elem = activation
    typed = onnx.helper.make_tensor_type_proto(elem, [f"{node.name or node.op_type}_{name}_{d}" for d in record.dims])
    for axis, symbol in enumerate(record.dims):
        for r in op.input_records:
            source = inputs.get(r.name)
            if symbol in r.dims and source is not None and source.tensor_type.HasField("shape"):
                source_dims = source.tensor_type.shape.dim
                if len(source_dims) == r.rank:
                    typed.tensor_type.shape.dim[axis].CopyFrom(source_dims[r.dims.index(symbol)])
                    break
    return typed


def finalize(model: onnx.ModelProto, target: Union[str, Target], inplace: bool = False) -> onnx.ModelProto:
    """A copy of ``model`` (``model`` itself with ``inplace``: no second copy of its weights) with a local
    function for every rnnx node and the opset imports set.

    ``target``: a :class:`Target` or its name. Without ``function_overloads`` (TensorRT keys functions by name)
    each op gets one function reading its structure from the attributes; without ``contrib_ops`` the model must
    not contain com.microsoft nodes.
    Nodes get their overload name from the node (attributes, present inputs); the state dtype comes
    from the overload the translation wrote or from the declared type of the op's first input
    (``OpSpec.dtype_input``; fp32 if unknown). Existing rnnx functions of the same overload are
    replaced. Raises ``ValueError`` for an unknown rnnx op, a missing required attribute
    (``OpSpec.required_attributes``), a bad plugin attribute, or a default opset below ``MIN_OPSET``.
    """
    target = targets.target(target)
    if inplace:
        out = model
    else:
        out = onnx.ModelProto()
        out.CopyFrom(model)
    opset = _default_opset(out)
    if opset < MIN_OPSET:
        raise ValueError(f"default opset {opset} < {MIN_OPSET}: the rnnx function bodies need opset >= {MIN_OPSET}")
    types = _elem_types(out)
    functions: dict[str, onnx.FunctionProto] = {}
    uses_ms = False
    for node in _model_nodes(out):
        uses_ms |= node.domain == MS_DOMAIN
        if node.domain != spec.ONNX_DOMAIN:
            continue
        if node.op_type not in _SPECS:
            raise ValueError(f"unknown rnnx op {node.op_type!r} (node {node.name!r}); known: {sorted(_SPECS)}")
        _check_plugin_attributes(node)
        if not target.function_overloads:
            _add_any_function(node, types, functions, opset)
            continue
        variant = _variant(node, types)
        node.overload = variant.name
        key = f"{node.op_type}:{variant.name}"
        if key not in functions:
            if isinstance(variant, SRUVariant):
                functions[key] = sru_scan_function(variant, opset)
            elif variant.lowered:
                functions[key] = lowered_attention_function(variant, opset)
                uses_ms = True
            else:
                functions[key] = attention_function(variant, opset)
    if uses_ms and not target.contrib_ops:
        raise ValueError(f"a {target.name}-target model contains com.microsoft nodes (exported for onnxruntime?)")
    kept = [
        f for f in out.functions
        if f.domain != spec.ONNX_DOMAIN or (target.function_overloads and f"{f.name}:{f.overload}" not in functions)
    ]  # fmt: skip
    del out.functions[:]
    out.functions.extend([*kept, *functions.values()])
    if functions:
        _set_opset(out, spec.ONNX_DOMAIN, spec.ONNX_DOMAIN_VERSION)
    if uses_ms:
        _set_opset(out, MS_DOMAIN, MS_DOMAIN_VERSION)
    out.ir_version = max(out.ir_version, MIN_IR_VERSION)
    _restore_output_types(out)
    return out


__all__ = ["finalize", "MIN_OPSET"]
