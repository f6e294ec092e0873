"""Builds the ``rnnx.json`` of an export: the contract's layout (:mod:`rnnx.runtime.contract.artifact`) filled
in from the traced model and the ONNX file. Reading, writing and validating live in the contract module
(:func:`~rnnx.runtime.contract.artifact.read_metadata`, :func:`~rnnx.runtime.contract.artifact.write_metadata`),
which the runtime imports without torch or onnx.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import onnx
import torch

from ..runtime.contract.artifact import (
    CAUSAL_LM,
    FORMAT,
    FORMAT_VERSION,
    ORT_SESSION_CONFIG,
    StateSpec,
    TensorSpec,
    sha256_file,
)
from ..runtime.contract.ops import ALL_OPS, ONNX_DOMAIN, ONNX_DOMAIN_VERSION, PLUGIN_NAMESPACE, PLUGIN_VERSION


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
    interface: str,
    model_type: str,
    config: dict[str, Any],
    vocab_size: Optional[int],
    inputs: list[TensorSpec],
    outputs: list[TensorSpec],
    states: list[StateSpec],
    onnx_model: onnx.ModelProto,
    model_path: Path,
    target: str,
    precision: str,
    opset: int,
    source: dict[str, Any],
    parity: Optional[dict[str, Any]] = None,
    external_data: Optional[Path] = None,
) -> dict[str, Any]:
    """The metadata dict for the ONNX file at ``model_path`` (hashed here). ``inputs`` / ``outputs`` are
    the data tensors; the state tensors' entries are added from ``states``. ``external_data``: the
    model's external data file (beside it; hashed here), None for a single-file model. ``onnx_model``
    is read for its graph only (it may be loaded without its external data)."""
    inputs = [*inputs, *(TensorSpec(s.input, s.shape, s.dtype) for s in states)]
    outputs = [*outputs, *(TensorSpec(s.output, s.output_shape, s.dtype) for s in states)]
    external = None if external_data is None else {"file": external_data.name, "sha256": sha256_file(external_data)}
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "interface": interface,
        "model_file": model_path.name,
        "model_sha256": sha256_file(model_path),
        "external_data": external,
        "model_type": model_type,
        "config": config,
    }
    if interface == CAUSAL_LM:
        meta["vocab_size"] = int(vocab_size or 0)
    return {
        **meta,
        "target": target,
        "precision": precision,
        "opset": opset,
        "inputs": [t.to_dict() for t in inputs],
        "outputs": [t.to_dict() for t in outputs],
        "state": [s.to_dict() for s in states],
        "ops": ops_used(onnx_model),
        "opset_imports": {imp.domain: imp.version for imp in onnx_model.opset_import},
        "source": source,
        "versions": versions(),
        "onnxruntime": {"session_config": dict(ORT_SESSION_CONFIG)},
        "parity": parity,
    }
