"""What the exporter knows of one rnnx op, as a record (:class:`OpExport`), and the helpers that read a node.

Every op's ONNX side is one :class:`OpExport`, defined beside its bodies (``sru_function.py``,
``attention_function.py``, ``recurrence_family.py``) and listed once in :mod:`.registry`; translation tables,
schemas and :func:`~.finalize.finalize` ask the registry instead of naming ops. An op's record says:

* ``translation(target)``: the function ``torch.onnx.export`` calls for the torch op (it writes the rnnx node);
* ``variant(node, context)``: the structure of a node's body on a target with function overloads (a hashable
  value with a ``name``, the overload name), and ``function(variant, context)`` that body;
* ``any_variant(node, context)`` / ``any_function(variant, context)``: the same on a target without overloads
  (TensorRT keys local functions by name: one function serves every node of the op in a graph, so two nodes
  whose ``any_variant`` differ cannot share a graph).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

import onnx

from rnnx.runtime.contract import ops as spec
from rnnx.runtime.contract.targets import Target


@dataclass(frozen=True)
class NodeContext:
    """What a body builder may read besides the node: the graph's known element types by value name, its
    default-domain opset and the target."""

    types: dict[str, int]
    opset: int
    target: Target


class Variant(Protocol):
    """A node's body structure: hashable, named (the function overload name; a tag for ``any`` bodies)."""

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class OpExport:
    """One rnnx op's ONNX side (module docstring). ``torch_module`` is imported to register the torch op."""

    spec: spec.OpSpec
    torch_module: str
    translation: Callable[[Target], Callable[..., Any]]
    variant: Callable[[onnx.NodeProto, NodeContext], Hashable]
    function: Callable[[Any, NodeContext], onnx.FunctionProto]
    any_variant: Callable[[onnx.NodeProto, NodeContext], Hashable]
    any_function: Callable[[Any, NodeContext], onnx.FunctionProto]


def present(node: onnx.NodeProto, op: spec.OpSpec, name: str) -> bool:
    """Whether input ``name`` of ``op`` is given on ``node`` (a non-empty name at its position)."""
    i = op.inputs.index(name)
    return i < len(node.input) and node.input[i] != ""


def present_inputs(node: onnx.NodeProto, op: spec.OpSpec) -> frozenset[str]:
    """The names of ``op``'s inputs given on ``node``."""
    return frozenset(n for n in op.inputs if present(node, op, n))


def attribute(node: onnx.NodeProto, name: str, default: object) -> object:
    """The value of ``node``'s attribute ``name`` (bytes for strings), or ``default``."""
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def input_elem_type(node: onnx.NodeProto, op: spec.OpSpec, context: NodeContext) -> int | None:
    """The known element type of the input that sets ``op``'s activation dtype, or None."""
    i = op.inputs.index(op.dtype_input)
    return context.types.get(node.input[i]) if i < len(node.input) else None


def check_every_input(node: onnx.NodeProto, op: spec.OpSpec) -> None:
    """ValueError naming the missing inputs when ``node`` lacks one (the TensorRT layout has no empty slot)."""
    missing = [name for i, name in enumerate(op.inputs) if i >= len(node.input) or not node.input[i]]
    if missing:
        raise ValueError(
            f"{op.onnx_name} node {node.name!r}: the TensorRT layout needs every input; missing {missing} "
            f"(inputs {list(node.input)})"
        )
