"""Lazy access to the ``tensorrt`` Python package.

Nothing in :mod:`rnnx.runtime.tensorrt` imports TensorRT at module import time: the pure-Python
parts (profiles, cache, binding plan) work without it, and everything that needs it calls
:func:`require_tensorrt`, which raises :class:`TensorRTNotInstalled` with an install hint,
:class:`TensorRTTooOld` for a release below :data:`MIN_TENSORRT_VERSION`, or :class:`TensorRTTooNew` for a
major release from :data:`MAX_TENSORRT_MAJOR` on (TensorRT 11 exists; rnnx is written against 10's API).

Why 10.7: the plugins are IPluginV3 (TensorRT >= 10.0, with the ONNX parser's IPluginV3 import), and
every rnnx node also carries its ONNX local function (the reference body). Until 10.6 the ONNX parser
imports a node's local function even when a plugin of that name is registered (the function importer
runs before the plugin importer); from 10.7 on it prefers a registered plugin over the local function
(onnx-tensorrt 10.7 GA release notes). Below 10.7 every engine would silently run the slow function body.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from types import ModuleType
from typing import Any

#: The oldest TensorRT release rnnx builds engines with (see the module doc for why).
MIN_TENSORRT_VERSION = (10, 7)
#: The first major release rnnx does not support: the plugins, the engine builder and the runtimes are written
#: against TensorRT 10's API (IPluginV3, enqueueV3, named I/O tensors); a new major may change them.
MAX_TENSORRT_MAJOR = 11

#: The one-line message used wherever TensorRT is needed and absent.
NOT_INSTALLED = (
    "TensorRT is not installed: pip install tensorrt (NVIDIA; needs a CUDA GPU and driver), "
    "or install the TensorRT SDK and its Python wheel"
)


class TensorRTNotInstalled(ImportError):
    """``import tensorrt`` failed; the message says how to install it."""


class TensorRTTooOld(TensorRTNotInstalled):
    """The installed TensorRT is older than :data:`MIN_TENSORRT_VERSION` (one line, says which is needed)."""


class TensorRTTooNew(TensorRTNotInstalled):
    """The installed TensorRT is a major release from :data:`MAX_TENSORRT_MAJOR` on (one line)."""


def parse_version(version: str) -> tuple[int, ...]:
    """``"10.14.1.48"`` -> ``(10, 14, 1, 48)``: the leading dot-separated integers (``()`` when none)."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", str(version))
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def check_tensorrt_version(trt: Any) -> Any:
    """``trt`` when its ``__version__`` is at least :data:`MIN_TENSORRT_VERSION` and below major
    :data:`MAX_TENSORRT_MAJOR`, else :class:`TensorRTTooOld` / :class:`TensorRTTooNew`."""
    version = str(getattr(trt, "__version__", "unknown"))
    parsed = parse_version(version)
    minimum = ".".join(str(v) for v in MIN_TENSORRT_VERSION)
    if not parsed or parsed[: len(MIN_TENSORRT_VERSION)] < MIN_TENSORRT_VERSION:
        raise TensorRTTooOld(
            f"TensorRT {version} is too old: rnnx needs TensorRT >= {minimum} (IPluginV3 plugins that the ONNX "
            f"parser prefers over the nodes' local functions); pip install 'tensorrt>={minimum}'"
        )
    if parsed[0] >= MAX_TENSORRT_MAJOR:
        raise TensorRTTooNew(
            f"TensorRT {version} is a major release rnnx has not been written for (it supports {minimum} up to "
            f"{MAX_TENSORRT_MAJOR - 1}.x); pip install 'tensorrt>={minimum},<{MAX_TENSORRT_MAJOR}'"
        )
    return trt


def tensorrt_available() -> bool:
    """True when the ``tensorrt`` package can be found (it is not imported)."""
    return importlib.util.find_spec("tensorrt") is not None


def require_tensorrt() -> ModuleType:
    """The imported ``tensorrt`` module, or :class:`TensorRTNotInstalled` / :class:`TensorRTTooOld` (one line)."""
    try:
        trt = importlib.import_module("tensorrt")
    except ImportError as e:
        raise TensorRTNotInstalled(f"{NOT_INSTALLED} ({e})") from None
    return check_tensorrt_version(trt)


def tensorrt_version() -> str:
    """``tensorrt.__version__`` (raises :class:`TensorRTNotInstalled` when absent)."""
    return str(require_tensorrt().__version__)
