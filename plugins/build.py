"""``python -m rnnx.plugins.build``: the one entry that builds every native library of rnnx.

Each library keeps its own builder (incremental: a library newer than its sources is kept); this runs them in
order, skips one whose tools are missing with the reason, and prints one line per library::

    cpu-kernel        the SRU scan's CPU kernel (torch extension)          rnnx.models.ops.sru_scan.cpu_kernel
    libtorch-ops      librnnx_torch_ops, the ops for libtorch programs      rnnx.models.ops.libtorch
    cuda-kernels      the ops' CUDA kernels as a torch extension            rnnx.models.ops.cuda (needs a GPU)
    tensorrt-plugins  librnnx_trt_plugins (+ the C++ unit tests)            rnnx.plugins (needs nvcc, cmake), into
                      build/plugins/tensorrt-<major> (the installed TensorRT's major, else the headers')
    ort-ops           librnnx_ort_ops, the ONNX Runtime custom ops          rnnx.plugins.ort_ops (headers via npm)
    native-runtime    librnnx_runtime (C API), rnnx-generate, + ASan build  rnnx.plugins.native_runtime (needs cmake)

``--only NAME[,NAME]`` builds those; ``--skip NAME[,NAME]`` leaves those out. Exit status 1 when a library
failed to build (its error is printed), 0 otherwise (skipped ones included: they are optional here).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Optional


class Skip(Exception):
    """A library that cannot be built here; the message says why and how to get it."""


@dataclass(frozen=True)
class Library:
    """One native library: its name, what it is, and its builder (returns the path built; raises :class:`Skip`)."""

    name: str
    what: str
    build: Callable[[], Path]


def _extension(module: ModuleType, what: str) -> Path:
    """Builds one of the ops' torch extensions (``module.EXTENSION``, a LazyExtension) now; its file."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = module.EXTENSION.load()
    if built is None:
        raise RuntimeError(f"{what} did not build:\n{module.EXTENSION.error}")
    return Path(built.__file__)


def _cpu_kernel() -> Path:
    from rnnx.models.ops.sru_scan import cpu_kernel

    return _extension(cpu_kernel, "the SRU scan CPU kernel")


def _libtorch_ops() -> Path:
    from rnnx.models.ops import libtorch

    return libtorch.build()


def _cuda_kernels() -> Path:
    from rnnx.models.ops import cuda

    if not cuda.cuda_present():
        raise Skip("no CUDA device or torch without CUDA (built on first use on a GPU machine)")
    return _extension(cuda, "the CUDA kernels")


def _tensorrt_plugins() -> Path:
    from rnnx import plugins

    if plugins.find_nvcc() is None:
        raise Skip("nvcc not found: install the CUDA toolkit, then: python3 -m rnnx.plugins")
    if shutil.which("cmake") is None:
        raise Skip("cmake not found: install CMake >= 3.25, then: python3 -m rnnx.plugins")
    missing = plugins.missing_build_message(plugins.target_tensorrt_major())
    headers = plugins.headers_tensorrt_version()
    if missing is not None and headers is not None:
        # The installed TensorRT's major has no headers here: build for the headers' major (the build the tests
        # use, build/plugins/tensorrt-<major>) and say what is missing.
        print(f"build: tensorrt-plugins: note: {missing}", flush=True)
        return plugins.build_plugins(tensorrt_major=headers[0])
    return plugins.build_plugins()


def _ort_ops() -> Path:
    from . import ort_ops

    if shutil.which("npm") is None and not (ort_ops.headers_dir() / "onnxruntime_lite_custom_op.h").is_file():
        raise Skip("npm not found (it fetches ONNX Runtime's headers): ONNX Runtime runs the ops' function bodies")
    ort_ops.fetch_headers()
    return ort_ops.build()


def _native_runtime() -> Path:
    from . import native_runtime as native
    from . import ort_ops

    if shutil.which("cmake") is None:
        raise Skip("cmake not found: the native runtime is not built (docs/embedding.md)")
    if not (ort_ops.headers_dir() / "onnxruntime_cxx_api.h").is_file():
        raise Skip("ONNX Runtime headers not fetched (see ort-ops)")
    native.build("address,undefined")  # the sanitizer build the tests run
    return native.build() / native.LIBRARY_NAME


LIBRARIES = (
    Library("cpu-kernel", "the SRU scan's CPU kernel", _cpu_kernel),
    Library("libtorch-ops", "the rnnx ops for libtorch programs", _libtorch_ops),
    Library("cuda-kernels", "the ops' CUDA kernels (torch extension)", _cuda_kernels),
    Library("tensorrt-plugins", "the TensorRT plugin library and its C++ tests", _tensorrt_plugins),
    Library("ort-ops", "the ONNX Runtime custom-op library", _ort_ops),
    Library("native-runtime", "librnnx_runtime (C API), rnnx-generate, and their sanitizer build", _native_runtime),
)
NAMES = tuple(library.name for library in LIBRARIES)


def build_all(only: Sequence[str] = (), skip: Sequence[str] = (), log: Callable[[str], None] = print) -> int:
    """Builds the libraries (``only``: just these; ``skip``: not these), logging one line each; returns the
    number that failed."""
    unknown = sorted((set(only) | set(skip)) - set(NAMES))
    if unknown:
        raise ValueError(f"unknown library {', '.join(unknown)}; known: {', '.join(NAMES)}")
    failed = 0
    for library in LIBRARIES:
        if (only and library.name not in only) or library.name in skip:
            continue
        log(f"build: {library.name}: {library.what} ...")
        start = time.perf_counter()
        try:
            path = library.build()
        except Skip as why:
            log(f"build: {library.name}: skipped: {why}")
            continue
        except Exception as error:  # any builder's failure: reported, the others still run
            failed += 1
            log(f"build: {library.name}: FAILED: {type(error).__name__}: {error}")
            continue
        log(f"build: {library.name}: {path} ({time.perf_counter() - start:.1f} s)")
    return failed


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnx.plugins.build", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(NAMES)}")
    parser.add_argument("--skip", default="", help="comma-separated libraries to leave out")
    args = parser.parse_args(argv)
    split = lambda text: tuple(n.strip() for n in text.split(",") if n.strip())  # noqa: E731
    try:
        failed = build_all(split(args.only), split(args.skip), log=lambda line: print(line, flush=True))
    except ValueError as error:
        parser.error(str(error))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
