"""rnnx.export: PyTorch -> ONNX with the rnnx custom ops, and the ``export-model`` CLI.

``export_model(model_or_checkpoint, out_dir, target=, precision=, opset=, check=)`` writes one ONNX
graph (prefill and decode, dynamic batch / length / past_length) plus ``rnnx.json``;
``read_metadata(dir)`` reads that metadata back, validated. Graph names: :mod:`rnnx.export.wrapper`;
parity and Polygraphy files: :mod:`rnnx.export.parity`; the custom ONNX ops: :mod:`rnnx.export.onnx_ops`.
"""

from .exporter import (
    DEFAULT_OPSET,
    PRECISIONS,
    SUPPORTED_OPSETS,
    TARGETS,
    ExportError,
    ExportResult,
    export_model,
    validate_options,
)
from .metadata import METADATA_FILE, MODEL_FILE, MetadataError, read_metadata
from .parity import TOLERANCES, ParityReport
from .wrapper import StatefulLM, StateTensor, state_layout

__all__ = [
    "DEFAULT_OPSET",
    "PRECISIONS",
    "SUPPORTED_OPSETS",
    "TARGETS",
    "ExportError",
    "ExportResult",
    "export_model",
    "validate_options",
    "METADATA_FILE",
    "MODEL_FILE",
    "MetadataError",
    "read_metadata",
    "TOLERANCES",
    "ParityReport",
    "StatefulLM",
    "StateTensor",
    "state_layout",
]
