"""Lazy access to the ``tensorrt`` Python package, and the one TensorRT logger of the process.

Nothing in :mod:`rnnx.runtime.tensorrt` imports TensorRT at module import time: the pure-Python
parts (profiles, cache, binding plan) work without it, and everything that needs it calls
:func:`require_tensorrt`, which raises :class:`TensorRTNotInstalled` with an install hint,
:class:`TensorRTTooOld` for a release below :data:`MIN_TENSORRT_VERSION`, or :class:`TensorRTTooNew` for a
major release from :data:`MAX_TENSORRT_MAJOR` on. Accepted: TensorRT 10.7 to 10.x, and 11.x.

Why 10.7: the plugins are IPluginV3 (TensorRT >= 10.0, with the ONNX parser's IPluginV3 import), and
every rnnx node also carries its ONNX local function (the reference body). Until 10.6 the ONNX parser
imports a node's local function even when a plugin of that name is registered (the function importer
runs before the plugin importer); from 10.7 on it prefers a registered plugin over the local function
(onnx-tensorrt 10.7 GA release notes). Below 10.7 every engine would silently run the slow function body.

Why 11 too: what rnnx uses is in both majors (IPluginV3 with IPluginCreatorV3One, ``getCreators`` /
``setLoggerFinder`` for ``load_library``, ``createNetworkV2``, the ONNX parser, optimization profiles,
timing caches, ``BuilderFlag.TF32``, ``enqueueV3`` / ``execute_async_v3`` on named I/O tensors,
``USER_MANAGED`` context memory with ``device_memory_size_v2``). TensorRT 11 builds strongly typed
networks only: it removed ``BuilderFlag.FP16`` / ``BF16`` / ``INT8`` / ``OBEY_PRECISION_CONSTRAINTS``
(rnnx sets none of them: its networks are strongly typed in 10 as well) and keeps
``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` only as an ignored, deprecated flag (the builder passes
it where the enum still has it). A plugin library is compiled against one major's headers and is refused
by the other major (``rnnx.plugins.check_library_major``); an engine is built for one TensorRT version
(its cache key holds the version and the major). 12 and later are refused until rnnx is checked against
them.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from types import ModuleType
from typing import Any, Optional

from ...plugins import parse_tensorrt_version as parse_version
from ...plugins import tensorrt_major_of as tensorrt_major

__all__ = [
    "MAX_TENSORRT_MAJOR", "MIN_TENSORRT_VERSION", "NOT_INSTALLED", "TensorRTNotInstalled", "TensorRTTooNew",
    "TensorRTTooOld", "check_tensorrt_version", "parse_version", "require_tensorrt", "supported_range",
    "tensorrt_available", "tensorrt_logger", "tensorrt_major", "tensorrt_version",
]  # fmt: skip

#: The oldest TensorRT release rnnx builds engines with (see the module doc for why).
MIN_TENSORRT_VERSION = (10, 7)
#: The first major release rnnx does not support. The plugins, the engine builder and the runtimes use the part
#: of the API that TensorRT 10 and 11 share (IPluginV3, enqueueV3, named I/O tensors, strongly typed networks);
#: a later major may change it.
MAX_TENSORRT_MAJOR = 12

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


def supported_range() -> str:
    """``"10.7 up to 11.x"``: the TensorRT releases rnnx accepts, for messages."""
    minimum = ".".join(str(v) for v in MIN_TENSORRT_VERSION)
    return f"{minimum} up to {MAX_TENSORRT_MAJOR - 1}.x"


def check_tensorrt_version(trt: Any) -> Any:
    """``trt`` when its ``__version__`` is at least :data:`MIN_TENSORRT_VERSION` and below major
    :data:`MAX_TENSORRT_MAJOR` (10.7 to 10.x, or 11.x), else :class:`TensorRTTooOld` / :class:`TensorRTTooNew`
    (one line each)."""
    version = str(getattr(trt, "__version__", "unknown"))
    parsed = parse_version(version)
    minimum = ".".join(str(v) for v in MIN_TENSORRT_VERSION)
    if not parsed or parsed[: len(MIN_TENSORRT_VERSION)] < MIN_TENSORRT_VERSION:
        raise TensorRTTooOld(
            f"TensorRT {version} is too old: rnnx needs TensorRT >= {minimum} (IPluginV3 plugins that the ONNX "
            f"parser prefers over the nodes' local functions); pip install 'tensorrt>={minimum},<{MAX_TENSORRT_MAJOR}'"
        )
    if parsed[0] >= MAX_TENSORRT_MAJOR:
        raise TensorRTTooNew(
            f"TensorRT {version} is a major release rnnx has not been written for (it supports {supported_range()}); "
            f"pip install 'tensorrt>={minimum},<{MAX_TENSORRT_MAJOR}'"
        )
    return trt


def tensorrt_available() -> bool:
    """True when the ``tensorrt`` package can be found (it is not imported)."""
    return importlib.util.find_spec("tensorrt") is not None


def require_tensorrt() -> ModuleType:
    """The imported ``tensorrt`` module, or :class:`TensorRTNotInstalled` / :class:`TensorRTTooOld` /
    :class:`TensorRTTooNew` (one line)."""
    try:
        trt = importlib.import_module("tensorrt")
    except ImportError as e:
        raise TensorRTNotInstalled(f"{NOT_INSTALLED} ({e})") from None
    return check_tensorrt_version(trt)


def tensorrt_version() -> str:
    """``tensorrt.__version__`` (raises :class:`TensorRTNotInstalled` when absent)."""
    return str(require_tensorrt().__version__)


#: The process-wide logger: (the tensorrt module it belongs to, its ``trt.Logger``). Guarded by _LOGGER_LOCK.
_LOGGER: Optional[tuple[Any, Any]] = None
_LOGGER_LOCK = threading.Lock()


def tensorrt_logger(trt: Optional[Any] = None) -> Any:
    """The one ``trt.Logger(WARNING)`` of this process, made on first use and shared by the engine builder and
    every TensorRT backend (TensorRT expects one logger per process: a builder and runtimes given different
    loggers warn, and only the first one receives the messages). ``trt``: the tensorrt module (default
    :func:`require_tensorrt`); a different module object (a test's stand-in) gets its own logger."""
    global _LOGGER
    trt = require_tensorrt() if trt is None else trt
    with _LOGGER_LOCK:
        if _LOGGER is None or _LOGGER[0] is not trt:
            _LOGGER = (trt, trt.Logger(trt.Logger.WARNING))
        return _LOGGER[1]
