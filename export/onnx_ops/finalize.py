"""``finalize``: give every rnnx node of an exported model its model-local function.

After the torch exporter has written the rnnx custom nodes (:mod:`.translate` and each op's translation), this
adds one ``FunctionProto`` (domain ``rnnx``) per distinct overload in use (targets with function overloads), or
one function per op without overloads (the ``tensorrt`` target: TensorRT's parser keys local functions by name
only, so two overloads of one op would collide there; its nodes have every input present and the body reads the
structure from the attributes). Each op's record in :mod:`.registry` gives the variants and bodies. It checks
each node's ``plugin_version`` / ``plugin_namespace`` and adds the opset imports; for a target without the custom
domain (the portable ``onnx`` target) it raises the default opset to 27 and inlines every rnnx function. The
result passes ``onnx.checker`` (full check) and strict shape inference without the rnnx schemas registered, and
stock ONNX Runtime runs it by inlining the functions. TensorRT ignores function bodies and overloads for a node
whose plugin it finds (by op type, ``plugin_version``, ``plugin_namespace``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Union

import onnx
import onnx.inliner

from rnnx.runtime.contract import ops as spec
from rnnx.runtime.contract import targets
from rnnx.runtime.contract.targets import PORTABLE_OPSET, Target

from .op_export import NodeContext, OpExport, attribute
from .ort_attention import MS_DOMAIN, MS_DOMAIN_VERSION
from .registry import BY_ONNX_NAME
from .schemas import node_attribute_defaults

#: Lowest default-domain opset the function bodies are written for (Shape start/end, CastLike).
MIN_OPSET = 15
#: IR version that introduced function overloads.
MIN_IR_VERSION = 10


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


def _check_required_attributes(node: onnx.NodeProto, op: spec.OpSpec) -> None:
    """``ValueError`` when a required attribute of ``op`` (``op.required_attributes``) is missing."""
    missing = sorted(name for name in op.required_attributes if attribute(node, name, None) is None)
    if missing:
        raise ValueError(f"{op.onnx_name} node {node.name!r}: required attribute(s) {', '.join(missing)} missing")


def _add_function(
    entry: OpExport, node: onnx.NodeProto, context: NodeContext, functions: dict[str, onnx.FunctionProto],
    variants: dict[str, object],
) -> None:  # fmt: skip
    """Gives ``node`` its body: with function overloads one function per variant (the node's overload names it);
    without (TensorRT keys functions by name) one function per op, which every node of the op must share."""
    _check_required_attributes(node, entry.spec)
    if context.target.function_overloads:
        variant = entry.variant(node, context)
        node.overload = variant.name
        key = f"{node.op_type}:{variant.name}"
        if key not in functions:
            functions[key] = entry.function(variant, context)
        return
    variant = entry.any_variant(node, context)
    node.overload = ""
    key = f"{node.op_type}:"
    if key in functions:
        if variants[key] != variant:
            bodies = f"{variants[key].name} and {variant.name}"
            raise ValueError(
                f"{entry.spec.onnx_name} nodes of one TensorRT-target graph need different bodies ({bodies}): one "
                "function per op"
            )
        return
    function = entry.any_function(variant, context)
    function.doc_string += f" [{variant.name}]"
    functions[key], variants[key] = function, variant


def _check_plugin_attributes(node: onnx.NodeProto) -> None:
    """Adds missing plugin_version / plugin_namespace; ``ValueError`` if one has another value."""
    for name in (spec.PLUGIN_VERSION_ATTR, spec.PLUGIN_NAMESPACE_ATTR):
        expected = node_attribute_defaults(BY_ONNX_NAME[node.op_type].spec)[name]
        value = attribute(node, name, None)
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
    op = BY_ONNX_NAME[node.op_type].spec
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
    if not target.custom_domain and opset < PORTABLE_OPSET:
        _raise_default_opset(out, PORTABLE_OPSET)
        opset = PORTABLE_OPSET
    context = NodeContext(_elem_types(out), opset, target)
    functions: dict[str, onnx.FunctionProto] = {}
    variants: dict[str, object] = {}
    uses_ms = False
    for node in _model_nodes(out):
        uses_ms |= node.domain == MS_DOMAIN
        if node.domain != spec.ONNX_DOMAIN:
            continue
        if node.op_type not in BY_ONNX_NAME:
            raise ValueError(f"unknown rnnx op {node.op_type!r} (node {node.name!r}); known: {sorted(BY_ONNX_NAME)}")
        _check_plugin_attributes(node)
        _add_function(BY_ONNX_NAME[node.op_type], node, context, functions, variants)
    uses_ms |= any(o.domain == MS_DOMAIN for f in functions.values() for o in f.opset_import)
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
    if not target.custom_domain:
        out = _inline_rnnx_functions(out)
    return out


def _raise_default_opset(model: onnx.ModelProto, version: int) -> None:
    """Relabel the default-domain import of ``model`` and of its functions as ``version``.

    The ops rnnx's graphs use changed between opsets 18 and 27 only by gaining types (bf16, int4, float8, ...),
    so their nodes keep their meaning; every export is checked against PyTorch after this anyway.
    """
    for imports in (model.opset_import, *(f.opset_import for f in model.functions)):
        for imp in imports:
            if imp.domain in ("", "ai.onnx") and imp.version < version:
                imp.version = version


def _inline_rnnx_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every rnnx node replaced by its function's body and no rnnx domain left (the portable form)."""
    rnnx_functions = [(f.domain, f.name) for f in model.functions if f.domain == spec.ONNX_DOMAIN]
    inlined = onnx.inliner.inline_selected_functions(model, rnnx_functions, inline_schema_functions=False)
    kept = [imp for imp in inlined.opset_import if imp.domain != spec.ONNX_DOMAIN]
    del inlined.opset_import[:]
    inlined.opset_import.extend(kept)
    leftover = [n.op_type for n in _model_nodes(inlined) if n.domain == spec.ONNX_DOMAIN]
    if leftover:
        raise ValueError(f"the {PORTABLE_OPSET}-opset portable form still has rnnx nodes: {sorted(set(leftover))}")
    return inlined


__all__ = ["finalize", "MIN_OPSET"]
