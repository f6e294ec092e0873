"""Weight-only int8 / int4 quantization of an exported graph: a pass inside the export (``--quantize``).

It runs on the saved ``model.onnx`` in the export's temporary directory, after the graph is written and
before the checks, the parity run and the hashes, so ``rnnx.json`` describes (and hashes) the quantized
file. Which weights:

* **body**: every ``MatMul`` whose second input is a 2-D floating initializer (``nn.Linear`` after
  export: the weight transposed to (K, N));
* **head** (``head="fp" | "int8" | "int4"``): a weight ``MatMul`` whose output reaches a data graph output
  through shape and elementwise ops only (the LM head, a tagger's classifier). A tied head reaches its
  ``MatMul`` through ``Transpose(embedding.weight)``; when the head is quantized, that transpose is folded
  into an initializer of its own (the embedding keeps the table), so tied and untied heads both quantize;
  with ``head="fp"`` a tied head stays as it is (no second fp copy of the table);
* **embedding** (``embedding=True``): a ``Gather`` of a 2-D floating initializer.

Two formats, one per target:

* ``onnxruntime``: ONNX Runtime's ``MatMulNBitsQuantizer`` (QOperator: ``com.microsoft.MatMulNBits``, and
  ``GatherBlockQuantized`` for an embedding), symmetric, ``accuracy_level`` 4;
* ``tensorrt``: ``DequantizeLinear -> MatMul`` written here, in the form TensorRT's ONNX importer takes
  (its documented Dequantize rules): INT4 data with per-block scales (block 64 or 128 along K, the last
  dimension N even) or INT8 data with per-channel scales (1-D, along N); scales strictly positive
  build-time constants in the weight's dtype; no zero point; opset 21 in the model and every local function.
  Each block's (channel's) scale comes from a clip search: the absmax scaled by the ratio in
  :data:`CLIP_RATIOS` with the least squared error. ONNX Runtime runs the same file (its CPU EP fuses the
  pattern), so the export's parity check covers it.

:func:`tensorrt_rule_violations` is the static check of those TensorRT rules, used by the tests.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..runtime.contract import targets
from ..runtime.contract.artifact import (
    PRESENT_PREFIX,
    QUANTIZATION_BLOCK_SIZES,
    QUANTIZATION_HEADS,
    QUANTIZATION_SCHEMES,
    TENSORRT_INT4_BLOCK_SIZES,
)
from ..runtime.contract.targets import DEQUANTIZE_LINEAR, MATMUL_NBITS, Target

#: Clip ratios tried per block (channel): scale = ratio * absmax / qmax, the one with the least error wins.
CLIP_RATIOS = tuple(np.round(np.linspace(1.0, 0.6, 9), 3).tolist())
#: The opset a DequantizeLinear with INT4 data and ``block_size`` needs.
QDQ_OPSET = 21
#: Ops a head's output passes through to a data output (shape and elementwise ops).
_PASS_THROUGH = {"Add", "Reshape", "Transpose", "Cast", "Identity", "Squeeze", "Unsqueeze", "Flatten", "Mul", "Div"}
_QMAX = {8: 127, 4: 7}


class QuantizeError(ValueError):
    """Options that cannot be honoured for this target, or a graph with nothing to quantize; one line."""


@dataclass(frozen=True)
class QuantizeOptions:
    """``scheme`` ``"int8"`` | ``"int4"``; ``block_size`` (None: the target's default); ``head`` ``"fp"`` |
    ``"int8"`` | ``"int4"``; ``embedding``: quantize the embedding table too."""

    scheme: str
    block_size: Optional[int] = None
    head: str = "fp"
    embedding: bool = False

    @property
    def bits(self) -> int:
        return QUANTIZATION_SCHEMES[self.scheme]


def resolve_options(options: Any, target: Union[str, Target]) -> QuantizeOptions:
    """``options`` (a scheme name or :class:`QuantizeOptions`) checked for ``target`` (its quantization format),
    defaults filled in."""
    target = targets.target(target)
    if isinstance(options, str):
        options = QuantizeOptions(options)
    if not isinstance(options, QuantizeOptions):
        raise QuantizeError(f"quantize must be 'int8', 'int4' or QuantizeOptions, got {type(options).__name__}")
    if options.scheme not in QUANTIZATION_SCHEMES:
        raise QuantizeError(f"unknown quantization {options.scheme!r}; supported: {', '.join(QUANTIZATION_SCHEMES)}")
    if options.head not in QUANTIZATION_HEADS:
        raise QuantizeError(f"unknown head quantization {options.head!r}; supported: {', '.join(QUANTIZATION_HEADS)}")
    block = options.block_size
    if block is not None and block not in QUANTIZATION_BLOCK_SIZES:
        sizes = ", ".join(map(str, QUANTIZATION_BLOCK_SIZES))
        raise QuantizeError(f"unsupported block size {block!r}; supported: {sizes}")
    if target.quantization_format == MATMUL_NBITS:
        if options.embedding and (options.scheme != "int4"):
            raise QuantizeError(
                "--quantize-embedding on the onnxruntime target needs --quantize int4: ONNX Runtime's quantizer "
                "writes a Gather as GatherBlockQuantized with 4-bit data only"
            )
        default = 32 if options.scheme == "int4" else 128
        return QuantizeOptions(options.scheme, block or default, options.head, options.embedding)
    if options.embedding:
        raise QuantizeError(
            "--quantize-embedding is not available on the tensorrt target: TensorRT takes pre-quantized weights "
            "only through a Dequantize in front of a linear operator (MatMul / Conv), and an embedding lookup is a "
            "Gather; use --target onnxruntime, or keep the embedding fp"
        )
    int4 = options.scheme == "int4" or options.head == "int4"
    if int4 and (block or 64) not in TENSORRT_INT4_BLOCK_SIZES:
        raise QuantizeError(
            f"block size {block} is not one TensorRT takes for INT4 weights (its documented block sizes: "
            f"{', '.join(map(str, TENSORRT_INT4_BLOCK_SIZES))}); use --block-size 64 or 128"
        )
    return QuantizeOptions(options.scheme, block or 64, options.head, options.embedding)


# -- the graph --------------------------------------------------------------------------------------


@dataclass
class _Weight:
    """A weight MatMul: the node, its (K, N) initializer and whether it is a head."""

    node: onnx.NodeProto
    initializer: str
    head: bool


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    out: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            out.setdefault(name, []).append(node)
    return out


def _is_float_matrix(tensor: onnx.TensorProto) -> bool:
    return len(tensor.dims) == 2 and tensor.data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)


def _constant_matrix(name: str, inits: dict, producers: dict) -> Optional[np.ndarray]:
    """The value of ``name`` when it is a 2-D floating initializer, or a ``Transpose`` (perm [1, 0]) / ``Concat`` of
    such values (an export's merged projections: ``Concat`` of q, k, v weights); else None."""
    if name in inits:
        return numpy_helper.to_array(inits[name]) if _is_float_matrix(inits[name]) else None
    node = producers.get(name)
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Transpose":
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), [1, 0])
        value = _constant_matrix(node.input[0], inits, producers)
        return None if value is None or perm != [1, 0] else np.ascontiguousarray(value.T)
    if node.op_type == "Concat":
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        parts = [_constant_matrix(i, inits, producers) for i in node.input]
        if any(part is None for part in parts) or len({part.dtype for part in parts}) != 1:
            return None
        return np.concatenate(parts, axis=axis)
    return None


def _fold_transposed_weights(graph: onnx.GraphProto, merged_only: bool = False) -> None:
    """``MatMul(x, W')`` with W' a ``Transpose`` / ``Concat`` of 2-D initializers (a tied head, merged projections)
    -> ``MatMul(x, W)``, W an initializer of its own; the nodes that computed W' go when nothing else reads them.
    ``merged_only``: only chains with a ``Concat`` (merged projections; a tied head stays shared)."""
    inits = {t.name: t for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    folded: list[onnx.NodeProto] = []
    for node in list(graph.node):
        if node.op_type != "MatMul" or node.input[1] in inits:
            continue
        if merged_only and not _has_concat(node.input[1], producers):
            continue
        value = _constant_matrix(node.input[1], inits, producers)  # a new array: asked only for what is folded
        if value is None:
            continue
        folded.append(producers[node.input[1]])
        name = f"{node.input[1]}.folded_for.{node.name}"
        graph.initializer.append(numpy_helper.from_array(value, name))
        node.input[1] = name
    _drop_unread(graph, folded)


def _has_concat(name: str, producers: dict) -> bool:
    node = producers.get(name)
    return node is not None and (node.op_type == "Concat" or any(_has_concat(i, producers) for i in node.input))


def _drop_unread(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> None:
    """Removes ``nodes`` (the Transpose / Concat chains a fold replaced) and their producers along the chain
    when nothing else reads their outputs."""
    producers = {out: node for node in graph.node for out in node.output}
    while nodes:
        read = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
        node = nodes.pop()
        if node in graph.node and not any(o in read for o in node.output):
            graph.node.remove(node)
            nodes.extend(producers[i] for i in node.input if i in producers)


def _reaches_output(node: onnx.NodeProto, consumers: dict[str, list[onnx.NodeProto]], outputs: set[str]) -> bool:
    """Whether ``node``'s output reaches a name in ``outputs`` through pass-through ops only."""
    frontier, seen = list(node.output), set()
    while frontier:
        name = frontier.pop()
        if name in outputs:
            return True
        if name in seen:
            continue
        seen.add(name)
        for user in consumers.get(name, []):
            if user.op_type in _PASS_THROUGH:
                frontier.extend(user.output)
    return False


def find_weights(graph: onnx.GraphProto) -> list[_Weight]:
    """Every weight MatMul of the main graph, heads marked (see the module docstring)."""
    inits = {t.name: t for t in graph.initializer}
    consumers = _consumers(graph)
    outputs = {o.name for o in graph.output if not o.name.startswith(PRESENT_PREFIX)}
    return [
        _Weight(node, node.input[1], _reaches_output(node, consumers, outputs))
        for node in graph.node
        if node.op_type == "MatMul" and node.input[1] in inits and _is_float_matrix(inits[node.input[1]])
    ]


def find_embeddings(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """``Gather`` nodes that look up rows of a 2-D floating initializer."""
    inits = {t.name: t for t in graph.initializer}
    return [
        n for n in graph.node
        if n.op_type == "Gather" and n.input[0] in inits and _is_float_matrix(inits[n.input[0]])
        and n.input[1] not in inits
    ]  # fmt: skip


def sync_function_opsets(model: onnx.ModelProto) -> None:
    """Every local function imports the model's version of each domain it shares with the model (a pass
    that raises the model's opset must raise its functions' too, or ``onnx.checker`` rejects the model)."""
    versions = {o.domain: o.version for o in model.opset_import}
    for function in model.functions:
        for entry in function.opset_import:
            if entry.domain in versions and entry.version != versions[entry.domain]:
                entry.version = versions[entry.domain]


def _set_opset(model: onnx.ModelProto, domain: str, version: int) -> None:
    for entry in model.opset_import:
        if entry.domain == domain:
            entry.version = max(entry.version, version)
            return
    model.opset_import.append(helper.make_opsetid(domain, version))


# -- the tensorrt form --------------------------------------------------------------------------------


def _clip_search(groups: np.ndarray, qmax: int) -> tuple[np.ndarray, np.ndarray]:
    """groups (G, n) fp32 -> (q (G, n) int8 in [-qmax-1, qmax], scale (G,) > 0) minimising each group's
    squared error over :data:`CLIP_RATIOS`."""
    absmax = np.abs(groups).max(axis=1)
    absmax = np.where(absmax > 0, absmax, 1.0).astype(np.float32)
    best_err = np.full(len(groups), np.inf, np.float32)
    best_scale = absmax / qmax
    for ratio in CLIP_RATIOS:
        scale = (absmax * np.float32(ratio) / qmax).astype(np.float32)
        q = np.clip(np.rint(groups / scale[:, None]), -qmax - 1, qmax)
        err = ((q * scale[:, None] - groups) ** 2).sum(axis=1)
        better = err < best_err
        best_err, best_scale = np.where(better, err, best_err), np.where(better, scale, best_scale)
    q = np.clip(np.rint(groups / best_scale[:, None]), -qmax - 1, qmax).astype(np.int8)
    return q, best_scale.astype(np.float32)


def quantize_matrix(weight: np.ndarray, bits: int, block_size: Optional[int]) -> tuple[np.ndarray, np.ndarray]:
    """(K, N) weight -> (q (K, N) int8 holding int4 or int8 values, scale): with ``block_size``, scale is
    (K / block, N), one per block of ``block_size`` rows of a column; without, per column, (N,)."""
    w = weight.astype(np.float32)
    K, N = w.shape
    if block_size is None:
        q, scale = _clip_search(np.ascontiguousarray(w.T), _QMAX[bits])
        return np.ascontiguousarray(q.T), scale
    blocks = w.reshape(K // block_size, block_size, N).transpose(0, 2, 1).reshape(-1, block_size)
    q, scale = _clip_search(blocks, _QMAX[bits])
    q = q.reshape(K // block_size, N, block_size).transpose(0, 2, 1).reshape(K, N)
    return np.ascontiguousarray(q), scale.reshape(K // block_size, N)


def _int4_tensor(name: str, q: np.ndarray) -> onnx.TensorProto:
    """INT4 TensorProto: two values per byte, the first in the low nibble (ONNX's and TensorRT's packing)."""
    flat = q.astype(np.int8).reshape(-1)
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.int8)])
    packed = ((flat[0::2] & 0x0F) | ((flat[1::2] & 0x0F) << 4)).astype(np.uint8)
    return helper.make_tensor(name, TensorProto.INT4, list(q.shape), packed.tobytes(), raw=True)


def _skip_reason(shape: tuple[int, ...], bits: int, block: Optional[int]) -> Optional[str]:
    K, N = shape
    if bits == 4 and N % 2:
        return f"INT4 needs an even last dimension, the weight is {K}x{N}"
    if block is not None and K % block:
        return f"K={K} is not a multiple of the block size {block}"
    return None


def _quantize_tensorrt(model: onnx.ModelProto, chosen: list[tuple[_Weight, int]], block: int) -> tuple[list, list]:
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    quantized, excluded = [], []
    new_nodes: list[onnx.NodeProto] = []
    for weight, bits in chosen:
        tensor = inits[weight.initializer]
        array = numpy_helper.to_array(tensor)
        per_block = block if bits == 4 else None
        reason = _skip_reason(array.shape, bits, per_block)
        if reason is not None:
            excluded.append({"node": weight.node.name, "reason": reason})
            continue
        q, scale = quantize_matrix(array, bits, per_block)
        base = f"{weight.initializer}.{weight.node.name}"
        data = _int4_tensor(f"{base}.int4", q) if bits == 4 else numpy_helper.from_array(q, f"{base}.int8")
        scales = numpy_helper.from_array(scale.astype(array.dtype), f"{base}.scale")
        graph.initializer.extend([data, scales])
        attrs = {"axis": 0, "block_size": block} if bits == 4 else {"axis": 1}
        out = f"{base}.dequantized"
        new_nodes.append(helper.make_node("DequantizeLinear", [data.name, scales.name], [out],
                                          name=f"{weight.node.name}.dequantize", **attrs))  # fmt: skip
        weight.node.input[1] = out
        quantized.append({"node": weight.node.name, "shape": list(array.shape), "bits": bits, "head": weight.head})
    if new_nodes:
        nodes = [*new_nodes, *graph.node]
        del graph.node[:]
        graph.node.extend(nodes)
        _drop_unused_initializers(graph)
        _set_opset(model, "", QDQ_OPSET)
        sync_function_opsets(model)
    return quantized, excluded


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    """Removes the initializers no node of the main graph (or of a subgraph in it) reads any more: the
    replaced fp weights."""

    def names(nodes: Any) -> set[str]:
        out = set()
        for node in nodes:
            out.update(node.input)
            for attr in node.attribute:
                for sub in [attr.g] * attr.HasField("g") + list(attr.graphs):
                    out |= names(sub.node) | {o.name for o in sub.output}
        return out

    used = names(graph.node) | {o.name for o in graph.output}
    for i in reversed(range(len(graph.initializer))):  # in place: extending a field with kept ones copies them
        if graph.initializer[i].name not in used:
            del graph.initializer[i]


# -- the onnxruntime form -------------------------------------------------------------------------------


def _quantize_onnxruntime(
    model: onnx.ModelProto, chosen: list[tuple[_Weight, int]], embeddings: list[onnx.NodeProto], block: int
) -> tuple[onnx.ModelProto, list, list]:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from onnxruntime.quantization.quant_utils import QuantFormat

    inits = {t.name: t for t in model.graph.initializer}
    by_bits: dict[int, list[str]] = {}
    wanted: dict[str, dict[str, Any]] = {}
    for weight, bits in chosen:
        by_bits.setdefault(bits, []).append(weight.node.name)
        shape = list(inits[weight.initializer].dims)
        wanted[weight.node.name] = {"node": weight.node.name, "shape": shape, "bits": bits, "head": weight.head}
    for node in embeddings:
        by_bits.setdefault(4, []).append(node.name)
        wanted[node.name] = {"node": node.name, "shape": list(inits[node.input[0]].dims), "bits": 4, "embedding": True}
    for bits, names in sorted(by_bits.items()):
        ops = ("MatMul", "Gather") if any(n.name in names for n in embeddings) else ("MatMul",)
        # The quantizer takes every node of op_types_to_quantize (nodes_to_include only adds to them), so the
        # nodes not chosen for this pass are named in nodes_to_exclude.
        others = [n.name for n in model.graph.node if n.op_type in ops and n.name not in names]
        quantizer = MatMulNBitsQuantizer(
            model, bits=bits, block_size=block, is_symmetric=True, accuracy_level=4, nodes_to_exclude=others,
            quant_format=QuantFormat.QOperator, op_types_to_quantize=ops,
        )  # fmt: skip
        quantizer.process()
        model = quantizer.model.model
    sync_function_opsets(model)
    left = {n.name for n in model.graph.node if n.op_type in ("MatMul", "Gather")}
    quantized = [entry for name, entry in wanted.items() if name not in left]
    excluded = [{"node": name, "reason": "ONNX Runtime's quantizer left it as is"} for name in wanted if name in left]
    return model, quantized, excluded


# -- the pass ----------------------------------------------------------------------------------------


def quantize_model(
    model: onnx.ModelProto, target: Union[str, Target], options: QuantizeOptions
) -> tuple[onnx.ModelProto, dict]:
    """Quantizes ``model`` (with its weights loaded) in place where it can, in ``target``'s quantization format;
    returns the model and the ``quantization`` record of ``rnnx.json``. QuantizeError when no weight can be
    quantized."""
    fmt = targets.target(target).quantization_format
    graph = model.graph
    # merged projections always become one weight; a tied head gets its own (quantized) copy only when it is quantized
    _fold_transposed_weights(graph, merged_only=options.head == "fp")
    _drop_unused_initializers(graph)
    weights = find_weights(graph)
    chosen, excluded = [], []
    for w in weights:
        if not w.head:
            chosen.append((w, options.bits))
        elif options.head != "fp":
            chosen.append((w, QUANTIZATION_SCHEMES[options.head]))
        else:
            excluded.append({"node": w.node.name, "reason": "head kept fp (--head fp)"})
    embeddings = find_embeddings(graph) if options.embedding else []
    if fmt == DEQUANTIZE_LINEAR:
        quantized, skipped = _quantize_tensorrt(model, chosen, options.block_size)
        tool, accuracy, version = "rnnx.export.quantize", None, _version("rnnx")
    else:
        model, quantized, skipped = _quantize_onnxruntime(model, chosen, embeddings, options.block_size)
        tool, accuracy = "onnxruntime.quantization.MatMulNBitsQuantizer", 4
        version = _version("onnxruntime")
    if not quantized:
        raise QuantizeError(
            f"nothing to quantize: the graph has {len(weights)} weight MatMul(s) and none can be quantized as asked "
            f"({'; '.join(e['reason'] for e in [*excluded, *skipped]) or 'no MatMul with a 2-D weight initializer'})"
        )
    record = {
        "scheme": options.scheme,
        "bits": options.bits,
        "block_size": options.block_size,
        "int8_granularity": "per_channel" if fmt == DEQUANTIZE_LINEAR else "block",
        "symmetric": True,
        "format": fmt,
        "accuracy_level": accuracy,
        "clip_search": fmt == DEQUANTIZE_LINEAR,
        "head": options.head,
        "embedding": options.embedding,
        "quantized": quantized,
        "excluded": [*excluded, *skipped],
        "tool": tool,
        "tool_version": version,
    }
    return model, record


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# -- the TensorRT rules ---------------------------------------------------------------------------------


def tensorrt_rule_violations(path: Path) -> list[str]:
    """Every way a ``DequantizeLinear`` of the ONNX file at ``path`` breaks TensorRT's documented rules for
    pre-quantized weights: data an INT4 / INT8 initializer; scale a strictly positive fp32 / fp16 / bf16
    initializer, a scalar, 1-D (per channel) or, for INT4 only, 2-D blocks of 64 or 128 along one of the
    last two axes; no zero point or an all-zero one; an even last dimension for INT4; opset >= 21 for INT4.
    Empty when all is well."""
    model = onnx.load(str(path))
    inits = {t.name: t for t in model.graph.initializer}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    problems = []
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        where = f"{node.name or node.output[0]}"
        data, scale = inits.get(node.input[0]), inits.get(node.input[1]) if len(node.input) > 1 else None
        if data is None or data.data_type not in (TensorProto.INT4, TensorProto.INT8):
            problems.append(f"{where}: data must be an INT4 or INT8 initializer")
            continue
        if scale is None or scale.data_type not in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16):
            problems.append(f"{where}: scale must be a floating initializer (a build-time constant)")
            continue
        values = numpy_helper.to_array(scale).astype(np.float32)
        if not (values > 0).all():
            problems.append(f"{where}: {int((values <= 0).sum())} scale(s) are not strictly positive")
        if len(node.input) > 2 and node.input[2]:
            zero = inits.get(node.input[2])
            if zero is None or numpy_helper.to_array(zero).any():
                problems.append(f"{where}: zero point must be absent or all zeros")
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        int4 = data.data_type == TensorProto.INT4
        if int4 and (len(data.dims) < 1 or data.dims[-1] % 2):
            problems.append(f"{where}: INT4 data needs an even last dimension, got {list(data.dims)}")
        if int4 and opset < QDQ_OPSET:
            problems.append(f"{where}: INT4 needs opset >= {QDQ_OPSET}, the model has {opset}")
        block = attrs.get("block_size", 0)
        if len(scale.dims) > 1 or block:
            axis = attrs.get("axis", 1) % max(len(data.dims), 1)
            if not int4:
                problems.append(f"{where}: block quantization is INT4 only in TensorRT")
            elif len(data.dims) != 2 or len(scale.dims) != 2:
                problems.append(f"{where}: block quantization needs 2-D weights and scales")
            elif block not in TENSORRT_INT4_BLOCK_SIZES or axis not in (0, 1):
                problems.append(f"{where}: block size {block} on axis {axis} (TensorRT: 64 or 128, a last-two axis)")
            elif data.dims[axis] != scale.dims[axis] * block or data.dims[1 - axis] != scale.dims[1 - axis]:
                problems.append(f"{where}: scale {list(scale.dims)} does not tile data {list(data.dims)} by {block}")
        elif int4:
            problems.append(f"{where}: INT4 needs per-block scales")
    return problems
