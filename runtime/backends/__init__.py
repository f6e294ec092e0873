"""Runtime backends and how :func:`rnnx.runtime.load` picks one.

* ``torch`` (:mod:`.torch_backend`): a checkpoint directory (``config.json``) or an export directory
  whose ``rnnx.json`` records its source checkpoint.
* ``onnxruntime`` (:mod:`.ort_backend`): an export directory (``rnnx.json`` + ``model.onnx``); CPU EP,
  or CUDA EP when ``device="cuda"``; ``io_binding`` picks IO binding with OrtValue state on the device
  (default: on CUDA only; ``True`` on CPU runs the same bound code).
* ``tensorrt``: an export directory; imported lazily from ``rnnx.runtime.tensorrt`` which must provide
  ``TensorRTBackend(model_dir, device="cuda", precision=None)`` implementing :class:`.base.Backend`.

Directory kinds: :func:`dir_kind` -> ``"checkpoint"`` | ``"export"``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Optional, Union

from ..artifact import METADATA_FILE
from .base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError, StateSpec

BACKENDS = ("torch", "onnxruntime", "tensorrt")

__all__ = [
    "BACKENDS", "Backend", "BackendState", "BackendUnavailable", "InputError", "RnnxRuntimeError",
    "StateSpec", "create_backend", "dir_kind",
]  # fmt: skip


def dir_kind(path: Union[str, Path]) -> str:
    """``"export"`` when ``path`` holds ``rnnx.json``, ``"checkpoint"`` when it holds ``config.json``."""
    path = Path(path)
    if (path / METADATA_FILE).is_file():
        return "export"
    if (path / "config.json").is_file() or (path.name == "config.json" and path.is_file()):
        return "checkpoint"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such model directory")
    raise InputError(f"{path}: neither an rnnx export (rnnx.json) nor an rnnx checkpoint (config.json)")


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _auto(kind: str, device: str) -> str:
    if kind == "checkpoint":
        return "torch"
    if device.startswith("cuda") and _has("tensorrt") and _has("rnnx.runtime.tensorrt"):
        return "tensorrt"
    if _has("onnxruntime"):
        return "onnxruntime"
    return "torch"


def _refuse_quantized(path: Union[str, Path], backend: str) -> None:
    """The torch backend runs an export's fp32 source, never its quantized weights: it refuses a quantized
    export rather than run something else silently."""
    from ..artifact import read_metadata

    record = read_metadata(path, verify_hash=False).get("quantization")
    if record:
        chosen = (
            "backend 'auto' chose torch (no ONNX Runtime or TensorRT here)" if backend == "auto" else "backend torch"
        )
        raise InputError(
            f"{path}: this export's weights are {record['scheme']} ({record['format']}), and {chosen} would run the "
            "fp32 source weights instead; load it with backend='onnxruntime' or 'tensorrt', or load the source "
            "checkpoint itself for the fp32 model"
        )


def create_backend(
    path: Union[str, Path],
    backend: str = "auto",
    device: str = "cpu",
    precision: Optional[str] = None,
    io_binding: Optional[bool] = None,
    native_ops: Optional[bool] = None,
) -> Backend:
    """The backend for ``path``: ``backend`` one of :data:`BACKENDS` or ``"auto"`` (checkpoint ->
    torch; export -> tensorrt on CUDA when installed, else onnxruntime, else torch from the source
    checkpoint). ``io_binding`` and ``native_ops`` go to the onnxruntime backend
    (:class:`.ort_backend.OrtBackend`); setting one (not None) for any other backend, ``auto``'s choice
    included, raises
    :class:`InputError`. Raises :class:`BackendUnavailable` with what is missing."""
    kind = dir_kind(path)
    name = _auto(kind, device) if backend == "auto" else backend
    if name not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; expected one of auto, {', '.join(BACKENDS)}")
    for option, value in (("io_binding", io_binding), ("native_ops", native_ops)):
        if value is not None and name != "onnxruntime":
            chosen = (
                f"backend 'auto' chose {name!r} for {path}" if backend == "auto" else f"backend {name!r} was requested"
            )
            raise InputError(
                f"{option}: only the onnxruntime backend takes it, but {chosen}; pass backend='onnxruntime'"
            )
    if name == "torch":
        from .torch_backend import TorchBackend

        if kind == "export":
            _refuse_quantized(path, backend)
        return TorchBackend.from_path(path, device=device, precision=precision)
    if kind != "export":
        raise InputError(
            f"{path}: backend {name!r} needs an export directory (rnnx.json + model.onnx), got a checkpoint"
        )
    if name == "onnxruntime":
        from .ort_backend import OrtBackend

        return OrtBackend(path, device=device, precision=precision, io_binding=io_binding, native_ops=native_ops)
    if not _has("tensorrt"):
        raise BackendUnavailable(
            "backend 'tensorrt' needs the TensorRT Python package (import tensorrt failed: not installed)"
        )
    try:
        from ..tensorrt import TensorRTBackend
    except ImportError as e:
        raise BackendUnavailable(f"backend 'tensorrt' is unavailable: {e}") from None
    return TensorRTBackend(path, device=device, precision=precision)
