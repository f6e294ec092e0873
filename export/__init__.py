"""rnnx.export: PyTorch -> ONNX with the rnnx custom ops, and the ``export-model`` CLI.

``export(module, example_inputs, out_dir, ...)`` writes one ONNX graph plus ``rnnx.json`` for any module
with state (``forward(*inputs, state) -> (*outputs, new_state)``) built on SRU / SRU++ / causal linear
attention, the published ``sru`` / ``fast-transformers`` layers included (converted first);
``export_model(model_or_checkpoint, out_dir, target=, precision=, opset=, check=)`` is the same path for
an rnnx language model (prefill and decode, dynamic batch / length / past_length). What an export
directory holds, its names and its metadata are the artifact contract, :mod:`rnnx.runtime.contract.artifact`
(``read_metadata`` is re-exported here); the parity check is :mod:`rnnx.runtime.parity`; the torch side
of the graph is :mod:`rnnx.models.stateful`; the custom ONNX ops are :mod:`rnnx.export.onnx_ops`.

Needs the ``export`` extra (torch, onnx, onnxscript, polygraphy). The exporter is imported on first use
of its names, so ``export-model`` can tell a runtime-only install what is missing in one line.
"""

from __future__ import annotations

from typing import Any

from ..runtime.contract.artifact import (
    DEFAULT_OPSET,
    METADATA_FILE,
    MODEL_FILE,
    PRECISIONS,
    SUPPORTED_OPSETS,
    TARGETS,
    MetadataError,
    read_metadata,
)

_EXPORTER_NAMES = ("ExportError", "ExportResult", "export", "export_model", "validate_options")

__all__ = [
    "DEFAULT_OPSET",
    "METADATA_FILE",
    "MODEL_FILE",
    "PRECISIONS",
    "SUPPORTED_OPSETS",
    "TARGETS",
    "ExportError",
    "ExportResult",
    "MetadataError",
    "export",
    "export_model",
    "read_metadata",
    "validate_options",
]


def __getattr__(name: str) -> Any:
    """The exporter's names, imported on first use (they need torch)."""
    if name in _EXPORTER_NAMES:
        from . import exporter

        return getattr(exporter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
