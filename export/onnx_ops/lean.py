"""Graph rewrites that leave an ``onnxruntime``-target export with the nodes its arithmetic needs.

ONNX Runtime fuses ``Add`` + ``LayerNormalization`` into ``com.microsoft.SkipLayerNormalization`` itself only
where the sum has no other reader. A pre-norm residual stream always has another reader (the next residual
``Add``), so every block would keep an ``Add`` and a ``LayerNormalization`` — and a bias ``Add`` before it.
:func:`fuse_skip_layer_norm` writes the fused node with its optional fourth output, the sum
(``input + skip + bias``), which takes the place of the ``Add``'s output for its other readers.

Only fp32 sums over the last axis are fused (the CPU kernel's common case); everything else is left alone.
"""

from __future__ import annotations

from collections import defaultdict

import onnx
from onnx import helper

from .ort_attention import MS_DOMAIN, MS_DOMAIN_VERSION

_FLOAT = onnx.TensorProto.FLOAT


def _attr(node: onnx.NodeProto, name: str, default: object) -> object:
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _elem_types(graph: onnx.GraphProto) -> dict[str, int]:
    types = {i.name: i.data_type for i in graph.initializer}
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _ranks(graph: onnx.GraphProto) -> dict[str, int]:
    ranks = {}
    for vi in (*graph.input, *graph.output, *graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
    return ranks


def fuse_skip_layer_norm(model: onnx.ModelProto) -> int:
    """Rewrites, in place, every ``LayerNormalization(Add(a, b))`` over the last axis of fp32 activations a, b of
    one rank into ``SkipLayerNormalization(a, b, gamma, beta[, bias])`` whose fourth output replaces the ``Add``'s
    output where others read it; a bias ``Add(b', c)`` (c a 1-D initializer, read only by this sum) folds in.
    Returns the number of fused nodes; adds the ``com.microsoft`` opset import when it fused any."""
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    types, ranks = _elem_types(graph), _ranks(graph)
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = defaultdict(int)
    for node in graph.node:
        for name in node.input:
            readers[name] += 1
    outputs = {o.name for o in graph.output}
    removed: set[int] = set()
    replacements: dict[int, onnx.NodeProto] = {}

    def activation(name: str) -> bool:
        return name not in initializers and types.get(name) == _FLOAT and ranks.get(name, 0) >= 2

    def bias_of(name: str) -> tuple[str, str] | None:
        """``(skip, bias)`` when ``name`` is ``Add(skip, c)`` with c a 1-D fp32 initializer read by this sum only."""
        node = producer.get(name)
        if node is None or node.op_type != "Add" or node.domain not in ("", "ai.onnx") or id(node) in removed:
            return None
        if readers[name] != 1 or name in outputs:
            return None
        for skip, c in (node.input, reversed(node.input)):
            init = initializers.get(c)
            if init is not None and len(init.dims) == 1 and init.data_type == _FLOAT and activation(skip):
                return skip, c
        return None

    for index, norm in enumerate(graph.node):
        if norm.op_type != "LayerNormalization" or norm.domain not in ("", "ai.onnx") or len(norm.input) < 2:
            continue
        if _attr(norm, "axis", -1) != -1 or len(norm.output) > 1 and any(norm.output[1:]):
            continue
        add = producer.get(norm.input[0])
        if add is None or add.op_type != "Add" or add.domain not in ("", "ai.onnx") or id(add) in removed:
            continue
        a, b = add.input
        if not (activation(a) and activation(b)) or ranks.get(a) != ranks.get(b) != ranks.get(norm.input[0]):
            continue
        skip, bias = b, ""
        folded = bias_of(b)
        if folded is None:
            folded = bias_of(a)
            if folded is not None:
                a, b = b, a
        if folded is not None:
            skip, bias = folded
            removed.add(id(producer[b]))
        total = add.output[0]
        shared = readers[total] > 1 or total in outputs
        beta = norm.input[2] if len(norm.input) > 2 else ""
        fused = helper.make_node(
            "SkipLayerNormalization",
            [a, skip, norm.input[1], beta, *([bias] if bias else [])],
            [norm.output[0], "", "", total if shared else ""],
            name=f"{norm.name or 'ln'}_skip",
            domain=MS_DOMAIN,
            epsilon=float(_attr(norm, "epsilon", 1e-5)),
        )
        removed.add(id(add))
        replacements[index] = fused
    if not replacements:
        return 0
    kept = []
    for index, node in enumerate(graph.node):
        if index in replacements:
            kept.append(replacements[index])
        elif id(node) not in removed:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    if not any(imp.domain == MS_DOMAIN for imp in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, MS_DOMAIN_VERSION))
    return len(replacements)
