"""``rnnx.json``: what an exported ONNX model is, written beside it.

Layout (format version 1)::

    {"format": "rnnx-onnx", "format_version": 1,
     "model_file": "model.onnx", "model_sha256": "<hex of the ONNX file>",
     "model_type": "srupp", "config": {...}, "vocab_size": 12,
     "target": "tensorrt" | "onnxruntime", "precision": "fp32" | "fp16", "opset": 20,
     "inputs":  [{"name": "input_ids", "shape": ["batch", "length"], "dtype": "int64"}, ...],
     "outputs": [{"name": "logits", "shape": ["batch", "length", 12], "dtype": "float32"}, ...],
     "state": [{"name": "c", "input": "past_key_values.c", "output": "present.c",
                "shape": [4, "batch", 128], "dtype": "float32", "grows": false}, ...],
     "ops": [{"name": "SRUScan", "domain": "rnnx", "version": 1,
              "plugin_version": "1", "plugin_namespace": "rnnx"}, ...],
     "opset_imports": {"": 20, "rnnx": 1, ...},
     "source": {"checkpoint": "/abs/path" | null, "weights_sha256": "<hex>" | null},
     "versions": {"rnnx": ..., "torch": ..., "onnx": ..., "onnxscript": ...},
     "parity": {...} | null}

Shapes use the symbolic dims ``batch``, ``length`` and ``past_length`` (a growing KV cache's
``present`` has ``past_length + length`` along that axis). :func:`read_metadata` validates a
directory's metadata and the hash of its model file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Union

import onnx
import torch

from ..models.checkpoint import sha256_file
from ..models.ops.spec import ALL_OPS, ONNX_DOMAIN, ONNX_DOMAIN_VERSION, PLUGIN_NAMESPACE, PLUGIN_VERSION
from .wrapper import ATTENTION_MASK, BATCH, INPUT_IDS, LENGTH, LOGITS, PAST_LENGTH, StateTensor

FORMAT = "rnnx-onnx"
FORMAT_VERSION = 1
METADATA_FILE = "rnnx.json"
MODEL_FILE = "model.onnx"

_REQUIRED = {
    "format": str, "format_version": int, "model_file": str, "model_sha256": str, "model_type": str,
    "config": dict, "vocab_size": int, "target": str, "precision": str, "opset": int, "inputs": list,
    "outputs": list, "state": list, "ops": list, "opset_imports": dict, "source": dict, "versions": dict,
}  # fmt: skip


class MetadataError(ValueError):
    """Metadata that is missing, malformed or does not match its model file; one line."""


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (numpy's spelling; ``bool`` for torch.bool)."""
    return str(dtype).removeprefix("torch.")


def _io(name: str, shape: tuple[Any, ...], dtype: torch.dtype) -> dict[str, Any]:
    return {"name": name, "shape": list(shape), "dtype": dtype_name(dtype)}


def io_description(
    vocab_size: int, layout: list[StateTensor], activation_dtype: torch.dtype
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The graph's inputs and outputs (name, symbolic shape, dtype) in graph order."""
    inputs = [_io(INPUT_IDS, (BATCH, LENGTH), torch.int64), _io(ATTENTION_MASK, (BATCH, LENGTH), torch.int64)]
    outputs = [_io(LOGITS, (BATCH, LENGTH, vocab_size), activation_dtype)]
    for s in layout:
        inputs.append(_io(s.input_name, s.shape, s.dtype))
        grown = tuple(f"{PAST_LENGTH} + {LENGTH}" if d == PAST_LENGTH else d for d in s.shape)
        outputs.append(_io(s.output_name, grown, s.dtype))
    return inputs, outputs


def ops_used(model: onnx.ModelProto) -> list[dict[str, Any]]:
    """The rnnx ops whose nodes appear in the main graph, with their domain and plugin versions."""
    types = {n.op_type for n in model.graph.node if n.domain == ONNX_DOMAIN}
    return [
        {"name": s.onnx_name, "domain": ONNX_DOMAIN, "version": ONNX_DOMAIN_VERSION,
         "plugin_version": PLUGIN_VERSION, "plugin_namespace": PLUGIN_NAMESPACE}
        for s in ALL_OPS if s.onnx_name in types
    ]  # fmt: skip


def versions() -> dict[str, str]:
    """Versions of the packages that produced the export."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"torch": torch.__version__, "onnx": onnx.__version__}
    for package in ("rnnx", "onnxscript"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "unknown"
    return out


def build_metadata(
    *,
    model_type: str,
    config: dict[str, Any],
    vocab_size: int,
    layout: list[StateTensor],
    activation_dtype: torch.dtype,
    onnx_model: onnx.ModelProto,
    model_path: Path,
    target: str,
    precision: str,
    opset: int,
    checkpoint: Optional[str],
    weights_sha256: Optional[str],
    parity: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """The metadata dict for the ONNX file at ``model_path`` (hashed here)."""
    inputs, outputs = io_description(vocab_size, layout, activation_dtype)
    state = [
        {"name": s.name, "input": s.input_name, "output": s.output_name, "shape": list(s.shape),
         "dtype": dtype_name(s.dtype), "grows": s.grows}
        for s in layout
    ]  # fmt: skip
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_file": model_path.name,
        "model_sha256": sha256_file(model_path),
        "model_type": model_type,
        "config": config,
        "vocab_size": vocab_size,
        "target": target,
        "precision": precision,
        "opset": opset,
        "inputs": inputs,
        "outputs": outputs,
        "state": state,
        "ops": ops_used(onnx_model),
        "opset_imports": {imp.domain: imp.version for imp in onnx_model.opset_import},
        "source": {"checkpoint": checkpoint, "weights_sha256": weights_sha256},
        "versions": versions(),
        "parity": parity,
    }


def write_metadata(directory: Path, metadata: dict[str, Any]) -> Path:
    """Writes ``directory/rnnx.json`` and returns its path."""
    path = Path(directory) / METADATA_FILE
    path.write_text(json.dumps(metadata, indent=2) + "\n")
    return path


def read_metadata(directory: Union[str, Path], verify_hash: bool = True) -> dict[str, Any]:
    """Reads and validates ``directory/rnnx.json``; with ``verify_hash`` also checks that the model
    file exists and its sha256 is the recorded one. Raises :class:`MetadataError` (one line)."""
    path = Path(directory) / METADATA_FILE
    if not path.is_file():
        raise MetadataError(f"{path}: missing export metadata file")
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise MetadataError(f"{path}: invalid JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise MetadataError(f"{path}: not rnnx export metadata (format {found!r}, expected {FORMAT!r})")
    if meta.get("format_version") != FORMAT_VERSION:
        raise MetadataError(
            f"{path}: unsupported format_version {meta.get('format_version')!r} (supported: {FORMAT_VERSION})"
        )
    for key, kind in _REQUIRED.items():
        if not isinstance(meta.get(key), kind):
            raise MetadataError(f"{path}: field {key!r} missing or not a {kind.__name__}")
    names = [t.get("name") for t in meta["inputs"]] + [t.get("name") for t in meta["outputs"]]
    if len(names) != len(set(names)) or not all(isinstance(n, str) for n in names):
        raise MetadataError(f"{path}: input/output names must be unique strings")
    if verify_hash:
        model_path = Path(directory) / meta["model_file"]
        if not model_path.is_file():
            raise MetadataError(f"{model_path}: model file named by {METADATA_FILE} is missing")
        if sha256_file(model_path) != meta["model_sha256"]:
            raise MetadataError(
                f"{model_path}: sha256 does not match {METADATA_FILE}; the model was replaced or is corrupt"
            )
    return meta
