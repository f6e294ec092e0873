"""rnnx's custom-op library for ONNX Runtime, as the runtime uses it: the rnnx ops (``SRUScan``,
``CausalLinearAttention``, ``LinearRecurrence``, ``CausalConvWithState``) as native CPU kernels instead of their
function bodies.

    python3 -m rnnx.runtime.ortops        # fetches the headers and builds the library if needed; prints its path

The library (``librnnx_ort_ops.so``) links no libonnxruntime and takes the API table from the process that loads it,
through ``SessionOptions.register_custom_ops_library(path)`` (Python, :func:`register`),
``Ort::SessionOptions::RegisterCustomOpsLibrary`` (C++) or ``SessionOptions.RegisterCustomOpLibrary`` (C#). It is
built by :mod:`rnnx.plugins.ort_ops` (the room that owns every native build), whose build names this module
re-exports; here: which onnxruntime serves it, where it is found, what a missing or older one costs, and
registration. A model without the library still runs on stock ONNX Runtime through the ops' function bodies.
Torch-free.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from ..plugins.build_dirs import build_main
from ..plugins.ort_ops import (  # noqa: F401  (the library's build, named here for the runtime's callers)
    LIBRARY_NAME,
    ORT_API_VERSION,
    OrtOpsError,
    build,
    fetch_and_build,
    fetch_headers,
    headers_dir,
    library_path,
)
from .contract.ops import ALL_OPS, CAUSAL_LINEAR_ATTENTION, ONNX_DOMAIN, ONNX_DOMAIN_VERSION

#: The oldest onnxruntime that serves the headers' C API version.
MIN_ONNXRUNTIME = (1, ORT_API_VERSION)
#: The ops the library implements, as (domain, op type): every rnnx op of the op records.
NATIVE_OPS = tuple((ONNX_DOMAIN, op.onnx_name) for op in ALL_OPS)

_logger = logging.getLogger("rnnx.runtime")
_missing_noted = False


def onnxruntime_supported(version: Optional[str] = None) -> bool:
    """Whether an onnxruntime version (default: the installed one) serves the headers' API version."""
    if version is None:
        import onnxruntime

        version = onnxruntime.__version__
    parts = tuple(int(p) for p in version.split("+")[0].split(".")[:2] if p.isdigit())
    return parts >= MIN_ONNXRUNTIME


def find_library() -> Optional[Path]:
    """The built library when it exists and the installed onnxruntime can load it, else None."""
    path = library_path()
    return path if path.is_file() and onnxruntime_supported() else None


def note_missing() -> None:
    """Logs once per process (logger ``rnnx.runtime``, warning) that the library is not there to use, what
    that costs, and how to get it: the runtime then runs the ops' function bodies."""
    global _missing_noted
    if _missing_noted:
        return
    _missing_noted = True
    if onnxruntime_supported():
        _logger.warning(
            "rnnx: %s is not built, so ONNX Runtime runs the rnnx ops' function bodies (an SRU layer several times "
            "slower); build it once with: python3 -m rnnx.runtime.ortops (a C++ compiler; ONNX Runtime's headers "
            "come from npm, or from $RNNX_ORT_HEADERS)",
            library_path(),
        )
    else:
        _logger.warning(
            "rnnx: the native rnnx ops need onnxruntime >= %d.%d; this one runs the ops' function bodies",
            *MIN_ONNXRUNTIME,
        )


def ops_written_before(metadata: dict[str, Any]) -> list[str]:
    """The export's rnnx ops (``rnnx.json`` "ops") written for an older rnnx domain version than the library's
    kernels read, whose layout changed since (the attention of version 1: heads apart); empty when none."""
    return [
        str(op.get("name"))
        for op in metadata.get("ops", [])
        if int(op.get("version", 1)) < ONNX_DOMAIN_VERSION and op.get("name") in _LAYOUT_CHANGED_SINCE_1
    ]


#: Ops whose native kernel reads a layout of rnnx domain version 2 that version 1 did not have.
_LAYOUT_CHANGED_SINCE_1 = frozenset({CAUSAL_LINEAR_ATTENTION.onnx_name})


def note_older_ops(where: str, names: list[str]) -> None:
    """Logs (logger ``rnnx.runtime``, warning) that an export's ``names`` run on their function bodies: the
    library's kernels read a newer layout (ONNX Runtime picks the body for the older node by itself)."""
    _logger.warning(
        "rnnx: %s was exported with rnnx ops version 1; its %s runs on the function body, not the native kernel "
        "(version %d); re-export it with this rnnx for the native kernel",
        where,
        ", ".join(names),
        ONNX_DOMAIN_VERSION,
    )


def register(session_options: Any, path: Optional[Path] = None) -> Path:
    """Registers the library with an ``onnxruntime.SessionOptions``; OrtOpsError (one line) when it is not
    built or this onnxruntime is too old."""
    import onnxruntime

    path = Path(path or library_path())
    if not path.is_file():
        raise OrtOpsError(f"{path}: the rnnx ONNX Runtime ops are not built; run: python3 -m rnnx.runtime.ortops")
    if not onnxruntime_supported():
        raise OrtOpsError(
            f"the rnnx ONNX Runtime ops need onnxruntime >= {MIN_ONNXRUNTIME[0]}.{MIN_ONNXRUNTIME[1]} (C API "
            f"version {ORT_API_VERSION}); installed: {onnxruntime.__version__}"
        )
    session_options.register_custom_ops_library(str(path))
    return path


if __name__ == "__main__":
    build_main(fetch_and_build, OrtOpsError)
