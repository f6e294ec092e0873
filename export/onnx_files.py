"""Writing an export's ONNX files without ever holding a second copy of the weights.

The exporter's peak memory is the model being exported plus whatever the export holds besides it.
A serialized ``ModelProto`` with its weights inline is a full copy of them, and ``SerializeToString``
makes another one while it runs, so the files are written this way instead:

* :func:`save_traced` writes the traced program (an ``onnx_ir`` model whose initializers are views of
  the torch parameters) with every tensor of at least ``min_tensor_bytes`` in an external data file,
  tensor by tensor, and returns the graph as a *skeleton* proto (those tensors as references);
* every check and the parity run read the external form by path, so none of them loads the weights into
  a proto (ONNX Runtime maps the data file);
* :func:`internalize` then turns the external form into one self-contained ``model.onnx`` when the
  export is to be one file, streaming one tensor at a time: the file is the protobuf encoding of the
  skeleton with each tensor's bytes spliced in (a length-delimited ``graph`` field whose length is
  known up front), so the largest transient buffer is one tensor.

:func:`tensor_bytes` sizes a skeleton's tensors (its external ones from their recorded lengths).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO, Optional

import onnx

#: Field numbers of the protobuf messages spliced by :func:`internalize` (onnx.proto3).
_MODEL_GRAPH_FIELD = 7
_GRAPH_INITIALIZER_FIELD = 5
_TENSOR_RAW_DATA_FIELD = 9
#: How many bytes of the data file one read takes at most.
_CHUNK = 64 << 20


def save_traced(
    ir_model: Any, path: Path, data_file: str, min_tensor_bytes: int
) -> onnx.ModelProto:  # fmt: skip
    """Writes ``ir_model`` (an ``onnx_ir.Model``) to ``path`` with its initializers of at least
    ``min_tensor_bytes`` in ``data_file`` beside it, one tensor at a time, and returns the saved graph
    loaded without its external data (a skeleton: edit it and write it back with :func:`save_skeleton`)."""
    import onnx_ir as ir

    ir.save(ir_model, str(path), external_data=data_file, size_threshold_bytes=min_tensor_bytes, max_workers=1)
    return onnx.load(str(path), load_external_data=False)


def save_skeleton(model: onnx.ModelProto, path: Path) -> None:
    """Writes a skeleton (external tensors kept as references to their data file) to ``path``."""
    onnx.save_model(model, str(path))


def _external_location(tensor: onnx.TensorProto) -> Optional[dict[str, str]]:
    """The ``external_data`` entries of an external tensor, None for an inline one."""
    if tensor.data_location != onnx.TensorProto.EXTERNAL:
        return None
    return {entry.key: entry.value for entry in tensor.external_data}


def tensor_bytes(model: onnx.ModelProto) -> int:
    """Bytes of the tensors of ``model``: initializers (external ones by their recorded length) and tensor
    attributes (Constant nodes) of every node, in subgraphs and local functions too."""

    def one(tensor: onnx.TensorProto) -> int:
        where = _external_location(tensor)
        return tensor.ByteSize() if where is None else int(where.get("length", 0))

    def nodes_bytes(nodes: Any) -> int:
        total = 0
        for node in nodes:
            for attr in node.attribute:
                total += (one(attr.t) if attr.HasField("t") else 0) + sum(map(one, attr.tensors))
                total += (graph_bytes(attr.g) if attr.HasField("g") else 0) + sum(map(graph_bytes, attr.graphs))
        return total

    def graph_bytes(graph: onnx.GraphProto) -> int:
        return sum(map(one, graph.initializer)) + nodes_bytes(graph.node)

    return graph_bytes(model.graph) + sum(nodes_bytes(f.node) for f in model.functions)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int) -> bytes:
    """The key of a length-delimited field (wire type 2)."""
    return _varint(field << 3 | 2)


def _field_size(payload: int, field: int) -> int:
    """Encoded size of a length-delimited field with a payload of ``payload`` bytes."""
    return len(_key(field)) + len(_varint(payload)) + payload


def _inline_header(tensor: onnx.TensorProto) -> onnx.TensorProto:
    """The tensor's fields without its data location and raw data (its data is spliced in after)."""
    header = onnx.TensorProto()
    header.CopyFrom(tensor)
    header.ClearField("external_data")
    header.ClearField("data_location")
    header.ClearField("raw_data")
    return header


def _copy_range(data: BinaryIO, out: BinaryIO, offset: int, length: int, name: str) -> None:
    data.seek(offset)
    left = length
    while left:
        chunk = data.read(min(left, _CHUNK))
        if not chunk:
            raise ValueError(f"{getattr(data, 'name', 'external data')}: ends inside tensor {name!r}")
        out.write(chunk)
        left -= len(chunk)


def internalize(model_path: Path, data_path: Path) -> None:
    """Rewrites ``model_path`` (its large initializers in ``data_path``) as one self-contained ONNX file and
    removes ``data_path``. The result parses to the same ``ModelProto`` as ``onnx.load`` of the external
    form; at most one read chunk of tensor data is in memory at a time. The new file is written beside the
    old one and moved over it, so a failure leaves the external form as it was."""
    model = onnx.load(str(model_path), load_external_data=False)
    external = {i for i, t in enumerate(model.graph.initializer) if _external_location(t) is not None}
    if _external_elsewhere(model):
        raise ValueError(f"{model_path}: external tensors outside the main graph's initializers")
    entries = []  # per initializer: (header bytes without raw data, raw data (offset, length) or None)
    names = [t.name for t in model.graph.initializer]
    for i, tensor in enumerate(model.graph.initializer):
        if i in external:
            where = _external_location(tensor)
            if where.get("location") != data_path.name:
                raise ValueError(f"{model_path}: tensor {tensor.name!r} is stored in {where.get('location')!r}")
            offset = int(where.get("offset", 0))
            length = int(where.get("length", data_path.stat().st_size - offset))  # absent: to the end of the file
            entries.append((_inline_header(tensor).SerializeToString(), (offset, length)))
        else:
            entries.append((tensor.SerializeToString(), None))
    rest = onnx.GraphProto()
    rest.CopyFrom(model.graph)
    del rest.initializer[:]
    rest_bytes = rest.SerializeToString()
    outer = onnx.ModelProto()
    outer.CopyFrom(model)
    outer.ClearField("graph")
    del model

    def entry_size(header: bytes, raw: Optional[tuple[int, int]]) -> int:
        return len(header) + (0 if raw is None else _field_size(raw[1], _TENSOR_RAW_DATA_FIELD))

    graph_size = len(rest_bytes) + sum(_field_size(entry_size(*e), _GRAPH_INITIALIZER_FIELD) for e in entries)
    tmp = model_path.with_name(f".{model_path.name}.internalize")
    try:
        with open(tmp, "wb") as out, open(data_path, "rb") as data:
            out.write(outer.SerializeToString())
            out.write(_key(_MODEL_GRAPH_FIELD) + _varint(graph_size))
            for (header, raw), name in zip(entries, names):
                out.write(_key(_GRAPH_INITIALIZER_FIELD) + _varint(entry_size(header, raw)))
                out.write(header)
                if raw is not None:
                    out.write(_key(_TENSOR_RAW_DATA_FIELD) + _varint(raw[1]))
                    _copy_range(data, out, raw[0], raw[1], name)
            out.write(rest_bytes)
        os.replace(tmp, model_path)
    finally:
        tmp.unlink(missing_ok=True)
    data_path.unlink()


def _external_elsewhere(model: onnx.ModelProto) -> bool:
    """Whether a tensor other than a main-graph initializer (a Constant, a subgraph's or a function's
    tensor) is stored externally: :func:`internalize` splices main-graph initializers only."""

    def in_nodes(nodes: Any) -> bool:
        for node in nodes:
            for attr in node.attribute:
                tensors = ([attr.t] if attr.HasField("t") else []) + list(attr.tensors)
                if any(_external_location(t) is not None for t in tensors):
                    return True
                graphs = ([attr.g] if attr.HasField("g") else []) + list(attr.graphs)
                if any(in_graph(g) for g in graphs):
                    return True
        return False

    def in_graph(graph: onnx.GraphProto) -> bool:
        return any(_external_location(t) is not None for t in graph.initializer) or in_nodes(graph.node)

    return in_nodes(model.graph.node) or any(in_nodes(f.node) for f in model.functions)
