"""Lazy access to the ``tensorrt`` Python package.

Nothing in :mod:`rnnx.runtime.tensorrt` imports TensorRT at module import time: the pure-Python
parts (profiles, cache, binding plan) work without it, and everything that needs it calls
:func:`require_tensorrt`, which raises :class:`TensorRTNotInstalled` with an install hint.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

#: The one-line message used wherever TensorRT is needed and absent.
NOT_INSTALLED = (
    "TensorRT is not installed: pip install tensorrt (NVIDIA; needs a CUDA GPU and driver), "
    "or install the TensorRT SDK and its Python wheel"
)


class TensorRTNotInstalled(ImportError):
    """``import tensorrt`` failed; the message says how to install it."""


def tensorrt_available() -> bool:
    """True when the ``tensorrt`` package can be found (it is not imported)."""
    return importlib.util.find_spec("tensorrt") is not None


def require_tensorrt() -> ModuleType:
    """The imported ``tensorrt`` module, or :class:`TensorRTNotInstalled` (one line)."""
    try:
        return importlib.import_module("tensorrt")
    except ImportError as e:
        raise TensorRTNotInstalled(f"{NOT_INSTALLED} ({e})") from None


def tensorrt_version() -> str:
    """``tensorrt.__version__`` (raises :class:`TensorRTNotInstalled` when absent)."""
    return str(require_tensorrt().__version__)
