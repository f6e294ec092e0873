"""Runtime backends and how :func:`rnnx.runtime.load` picks one.

* ``torch`` (:mod:`.torch_backend`): a checkpoint directory (``config.json``) or an export directory
  whose ``rnnx.json`` records its source checkpoint.
* ``onnxruntime`` (:mod:`.ort_backend`): an export directory (``rnnx.json`` + ``model.onnx``); CPU EP,
  or CUDA EP when ``device="cuda"``; ``io_binding`` picks IO binding with OrtValue state on the device
  (default: on CUDA only; ``True`` on CPU runs the same bound code).
* ``tensorrt`` (:mod:`rnnx.runtime.tensorrt.backend`, the TensorRT room's own): an export directory;
  ``TensorRTBackend(model_dir, device="cuda", precision=None)`` implementing :class:`.base.Backend`.

Directory kinds: :func:`dir_kind` -> ``"checkpoint"`` | ``"export"``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from ..contract.artifact import METADATA_FILE
from .base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError, StateSpec, check_keywords
from .ort_backend import OrtOptions

if sys.version_info >= (3, 11):  # at run time too, so typing.get_type_hints resolves the options
    from typing import Unpack
elif TYPE_CHECKING:
    from typing_extensions import Unpack


@dataclass(frozen=True)
class BackendKind:
    """One runtime backend, as :func:`create_backend` knows it.

    ``name``: ``load(backend=)``'s value. ``module`` / ``cls``: where its :class:`~.base.Backend` class lives
    (relative to this package; imported on first use). ``requires``: the importable modules it needs, the
    first one the Python package named ``label`` in errors.
    ``runs_checkpoints``: it runs a checkpoint directory (the others run export directories only).
    ``options``: the keyword options of :func:`create_backend` only it takes. ``cuda_only``: ``auto`` picks it on
    a CUDA device only.
    """

    name: str
    module: str
    cls: str
    requires: tuple[str, ...]
    label: str
    runs_checkpoints: bool = False
    options: tuple[str, ...] = ()
    cuda_only: bool = False

    def missing(self) -> list[str]:
        """The modules in ``requires`` that cannot be imported here."""
        return [module for module in self.requires if not _has(module)]

    def load_class(self) -> type:
        """The backend class (BackendUnavailable naming the import failure)."""
        try:
            return getattr(importlib.import_module(self.module, __name__), self.cls)
        except ImportError as e:
            raise BackendUnavailable(f"backend {self.name!r} is unavailable: {e}") from None


TORCH = BackendKind("torch", ".torch_backend", "TorchBackend", ("torch",), "PyTorch", runs_checkpoints=True)
ONNXRUNTIME = BackendKind("onnxruntime", ".ort_backend", "OrtBackend", ("onnxruntime",), "ONNX Runtime",
                          options=tuple(OrtOptions.__annotations__))  # fmt: skip
TENSORRT = BackendKind("tensorrt", "..tensorrt.backend", "TensorRTBackend", ("tensorrt", "rnnx.runtime.tensorrt"),
                       "TensorRT", cuda_only=True)  # fmt: skip
#: The backends by name.
BACKEND_KINDS = {kind.name: kind for kind in (TORCH, ONNXRUNTIME, TENSORRT)}
#: The backend names.
BACKENDS = tuple(BACKEND_KINDS)
#: What ``auto`` picks for an export, in order: the first whose modules are here (and, if CUDA-only, on CUDA).
AUTO_ORDER = (TENSORRT, ONNXRUNTIME, TORCH)
#: Every backend's own keyword options of :func:`create_backend`, in the table's order.
_OPTIONS = tuple(dict.fromkeys(option for kind in BACKEND_KINDS.values() for option in kind.options))

__all__ = [
    "AUTO_ORDER", "BACKENDS", "BACKEND_KINDS", "Backend", "BackendKind", "BackendState", "BackendUnavailable",
    "InputError", "OrtOptions", "RnnxRuntimeError", "StateSpec", "create_backend", "dir_kind",
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


def _auto(kind: str, device: str) -> BackendKind:
    if kind == "checkpoint":
        return TORCH
    for candidate in AUTO_ORDER:
        if (device.startswith("cuda") or not candidate.cuda_only) and not candidate.missing():
            return candidate
    return TORCH


def _refuse_quantized(path: Union[str, Path], backend: str) -> None:
    """The torch backend runs an export's fp32 source, never its quantized weights: it refuses a quantized
    export rather than run something else silently."""
    from ..contract.artifact import read_metadata

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
    **options: Unpack[OrtOptions],
) -> Backend:
    """The backend for ``path``: ``backend`` one of :data:`BACKENDS` or ``"auto"`` (checkpoint ->
    torch; export -> tensorrt on CUDA when installed, else onnxruntime, else torch from the source
    checkpoint). ``options`` (:class:`OrtOptions`: ``io_binding``, ``native_ops`` and ``threads``) go to the
    onnxruntime backend (:class:`.ort_backend.OrtBackend`); setting one (not None) for any other backend, ``auto``'s
    choice included, raises :class:`InputError`; another keyword, TypeError. Raises :class:`BackendUnavailable` with
    what is missing."""
    check_keywords("create_backend", options, _OPTIONS)
    kind = dir_kind(path)
    chosen = _auto(kind, device) if backend == "auto" else BACKEND_KINDS.get(backend)
    if chosen is None:
        raise InputError(f"unknown backend {backend!r}; expected one of auto, {', '.join(BACKENDS)}")
    name = chosen.name
    given = [(option, options[option]) for option in _OPTIONS if option in options]
    for option, value in given:
        if value is not None and option not in chosen.options:
            takers = " / ".join(k.name for k in BACKEND_KINDS.values() if option in k.options)
            how = f"backend {name!r} was requested"
            if backend == "auto":
                how = f"backend 'auto' chose {name!r} for {path}"
            raise InputError(f"{option}: only the {takers} backend takes it, but {how}; pass backend='{takers}'")
    if chosen.runs_checkpoints:
        if kind == "export":
            _refuse_quantized(path, backend)
        return chosen.load_class().from_path(path, device=device, precision=precision)
    if kind != "export":
        raise InputError(
            f"{path}: backend {name!r} needs an export directory (rnnx.json + model.onnx), got a checkpoint"
        )
    missing = chosen.missing()
    if missing:
        raise BackendUnavailable(
            f"backend {name!r} needs the {chosen.label} Python package (import {missing[0]} failed: not installed)"
        )
    taken = {option: value for option, value in given if option in chosen.options}
    return chosen.load_class()(path, device=device, precision=precision, **taken)
