"""A small helper that writes ONNX nodes with unique output names (for function bodies and graphs)."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import helper


class NodeWriter:
    """Collects nodes; every call returns the new node's output name(s), all prefixed by ``prefix``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self._count = 0

    def fresh(self, hint: str) -> str:
        """A new unique value name."""
        self._count += 1
        return f"{self.prefix}{hint}_{self._count}"

    def op(
        self, op_type: str, inputs: Sequence[str], hint: str = "", num_outputs: int = 1, **attrs: object
    ) -> str | list[str]:
        """Appends ``op_type(inputs, **attrs)``; returns its output name, or a list if num_outputs > 1."""
        outputs = [self.fresh(hint or op_type) for _ in range(num_outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=self.fresh("n_" + op_type), **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    def split(self, value: str, parts: int, axis: int, hint: str = "") -> list[str]:
        """``value`` cut into ``parts`` equal pieces along ``axis`` (Split, opset >= 18: ``num_outputs``)."""
        outputs = [self.fresh(hint or "Split") for _ in range(parts)]
        self.nodes.append(
            helper.make_node("Split", [value], outputs, name=self.fresh("n_Split"), axis=axis, num_outputs=parts)
        )
        return outputs

    def ints(self, values: Sequence[int], hint: str = "ints") -> str:
        """A 1-D int64 constant."""
        return self.op("Constant", [], hint, value_ints=list(values))

    def scalar_int(self, value: int, hint: str = "idx") -> str:
        """A 0-D int64 constant (a Gather index that drops the axis)."""
        return self.op("Constant", [], hint, value=helper.make_tensor("v", onnx.TensorProto.INT64, [], [value]))

    def scalar_float(self, value: float, hint: str = "f") -> str:
        """A 0-D float32 constant."""
        return self.op("Constant", [], hint, value_float=float(value))

    def attribute_float(self, attribute: str, hint: str = "") -> str:
        """A 0-D float32 constant holding the enclosing function's float attribute ``attribute``."""
        return self._attribute_constant(attribute, "value_float", onnx.AttributeProto.FLOAT, hint)

    def attribute_int(self, attribute: str, hint: str = "") -> str:
        """A 0-D int64 constant holding the enclosing function's int attribute ``attribute``."""
        return self._attribute_constant(attribute, "value_int", onnx.AttributeProto.INT, hint)

    def attribute_string(self, attribute: str, hint: str = "") -> str:
        """A 0-D string constant holding the enclosing function's string attribute ``attribute``."""
        return self._attribute_constant(attribute, "value_string", onnx.AttributeProto.STRING, hint)

    def _attribute_constant(self, attribute: str, field: str, kind: int, hint: str) -> str:
        ref = onnx.AttributeProto(name=field, ref_attr_name=attribute, type=kind)
        out = self.fresh(hint or attribute)
        node = helper.make_node("Constant", [], [out], name=self.fresh("n_Constant"))
        node.attribute.append(ref)
        self.nodes.append(node)
        return out
