"""rnnx.runtime.tensorrt: a thin TensorRT layer over the ONNX export.

Pure Python (tested without TensorRT):

* :mod:`.profiles` — decode / prefill optimization profiles from ``rnnx.json``
  (:func:`build_profiles`, :class:`ProfileLimits`, :func:`select_profile`);
* :mod:`.cache` — engine cache keys (:class:`KeyParts`), :class:`EngineCache` with atomic writes and
  corrupt / foreign entry detection, :func:`default_cache_dir`;
* :mod:`.bindings` — which buffer each engine I/O tensor binds to (:func:`plan_bindings`) and the
  device buffer sizes for a (batch, max_length, max_context).

Needs TensorRT (imported lazily; :class:`TensorRTNotInstalled` otherwise):

* :func:`build_engine` (:mod:`.builder`) — build or reuse a cached engine (TensorRT 10.7 to 10.x or 11.x:
  :data:`MIN_TENSORRT_VERSION` up to below :data:`MAX_TENSORRT_MAJOR`; strongly typed, every rnnx node checked
  to be a plugin layer); :func:`load_plugin_library` — the one place the plugin library is loaded (once per
  process and path; a library of another TensorRT major is refused); :func:`tensorrt_logger` — the process's
  one ``trt.Logger``;
* :class:`TensorRTBackend` (:mod:`.backend`) — the runtime backend (``rnnx.runtime.load``'s record names it).
"""

from __future__ import annotations

from typing import Any

from ._trt import (
    MAX_TENSORRT_MAJOR,
    MIN_TENSORRT_VERSION,
    NOT_INSTALLED,
    TensorRTNotInstalled,
    TensorRTTooNew,
    TensorRTTooOld,
    require_tensorrt,
    tensorrt_available,
    tensorrt_logger,
)
from .bindings import BindingError, BindingPlan, BufferSpec, plan_bindings
from .builder import (
    ENGINE_PRECISIONS,
    EngineBuildError,
    build_engine,
    check_plugin_layers,
    load_plugin_library,
    required_creators,
)
from .cache import CACHE_ENV, EngineCache, KeyParts, Lookup, default_cache_dir
from .profiles import DECODE, PREFILL, Profile, ProfileError, ProfileLimits, ShapeRange, build_profiles, select_profile

__all__ = [
    "MAX_TENSORRT_MAJOR", "MIN_TENSORRT_VERSION", "NOT_INSTALLED", "TensorRTNotInstalled", "TensorRTTooNew",
    "TensorRTTooOld", "require_tensorrt", "tensorrt_available", "tensorrt_logger",
    "BindingError", "BindingPlan", "BufferSpec", "plan_bindings",
    "ENGINE_PRECISIONS", "EngineBuildError", "build_engine", "check_plugin_layers", "load_plugin_library",
    "required_creators",
    "CACHE_ENV", "EngineCache", "KeyParts", "Lookup", "default_cache_dir",
    "DECODE", "PREFILL", "Profile", "ProfileError", "ProfileLimits", "ShapeRange", "build_profiles",
    "select_profile", "TensorRTBackend",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """``TensorRTBackend`` is imported on first use (its module needs torch CUDA + TensorRT at run time only)."""
    if name == "TensorRTBackend":
        from .backend import TensorRTBackend

        return TensorRTBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
