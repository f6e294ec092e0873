"""The native runtime's build: ``librnnx_runtime`` (C++17, a C API in ``runtime/native/include/rnnx/rnnx.h``), the
example program ``rnnx-generate``, the test drivers ``rnnx_check`` and ``rnnx_sampling_cases`` (the sampling
conformance cases) and, with the TensorRT backend, the test program ``rnnx_trt_plugins_test`` (its plugin loader
against a stand-in registry), built with CMake from the sources in ``runtime/native`` (:data:`SOURCES`).

``python3 -m rnnx.runtime.native [--sanitize address,undefined]`` (or ``python3 -m rnnx.plugins.build --only
native-runtime``) configures and builds them into
``build/native`` (``build/native-asan`` with sanitizers) and prints the library's path; ``scripts/setup.sh``
runs it. What the build needs:

* ONNX Runtime's C/C++ headers: the npm package :mod:`.ort_ops` fetches (one fetch for both);
* ``libonnxruntime.so.1``: the one inside the ``onnxruntime`` wheel (``onnxruntime/capi/``), linked through a
  ``libonnxruntime.so.1`` link in the build folder (the wheel ships only the versioned file);
* ``librnnx_ort_ops.so`` (:mod:`.ort_ops`), linked beside the library when built, where
  ``rnnx_model_open`` finds it by default;
* optionally TensorRT and CUDA headers (``$TENSORRT_ROOT/include``, the system's, or the ones setup.sh puts in
  ``.cache/tensorrt/include``; ``$CUDA_HOME/include`` or ``/usr/local/cuda/include``): the TensorRT backend is
  then compiled (it loads libnvinfer and libcudart with dlopen at run time; docs/embedding.md says where it
  looks).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from . import ort_ops
from .build_dirs import CHECKOUT, build_lock, user_cache

#: The native runtime's sources (CMakeLists.txt, include/, src/, tools/), in the runtime's room.
SOURCES = Path(__file__).resolve().parents[1] / "runtime" / "native"
LIBRARY_NAME = "librnnx_runtime.so"
#: The last: where TensorRT headers exist.
PROGRAMS = ("rnnx-generate", "rnnx_check", "rnnx_sampling_cases", "rnnx_trt_plugins_test")


class NativeBuildError(RuntimeError):
    """The native runtime could not be configured or built; the message says what is missing."""


def build_dir(sanitize: Optional[str] = None) -> Path:
    """``<checkout>/build/native[-asan]`` (``$RNNX_NATIVE_BUILD`` wins; an installed package: the user cache)."""
    name = "native" if not sanitize else "native-asan"
    env = os.environ.get("RNNX_NATIVE_BUILD")
    if env:
        return Path(env) / name
    return (CHECKOUT / "build" if CHECKOUT is not None else user_cache() / "rnnx") / name


def onnxruntime_library() -> Path:
    """The ``libonnxruntime.so.*`` inside the installed ``onnxruntime`` wheel."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        raise NativeBuildError("onnxruntime is not installed: pip install onnxruntime (its wheel has libonnxruntime)")
    found = sorted((Path(spec.origin).parent / "capi").glob("libonnxruntime.so.*"))
    if not found:
        raise NativeBuildError(f"no libonnxruntime.so.* in {Path(spec.origin).parent / 'capi'}")
    return found[-1]


def _tensorrt_include() -> Optional[Path]:
    """The TensorRT headers the TensorRT backend is compiled with (the major it then serves): with
    ``$TENSORRT_ROOT`` its ``include/`` or the folder itself (as the plugin build takes it), and an error when
    neither has them, never a silent fall-back to other headers; else the system's, then the 10.14 headers
    ``scripts/setup.sh`` extracts; None when there are none (the library is built without the TensorRT backend)."""
    root = os.environ.get("TENSORRT_ROOT")
    if root:
        candidates = [Path(root) / "include", Path(root)]
        found = next((c for c in candidates if (c / "NvInferRuntime.h").is_file()), None)
        if found is None:
            raise NativeBuildError(
                f"TENSORRT_ROOT={root}: no NvInferRuntime.h in {candidates[0]} or {candidates[1]} (unset TENSORRT_ROOT "
                "to build with the system's or setup.sh's TensorRT headers)"
            )
        return found
    candidates = [Path("/usr/include/x86_64-linux-gnu"), Path("/usr/include")]
    if CHECKOUT is not None:
        candidates.append(CHECKOUT / ".cache" / "tensorrt" / "include")
    return next((c for c in candidates if (c / "NvInferRuntime.h").is_file()), None)


def _cuda_include() -> Optional[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    return next(
        (Path(r) / "include" for r in roots if r and (Path(r) / "include" / "cuda_runtime_api.h").is_file()), None
    )


def _run(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise NativeBuildError(
            f"{what} failed: {' '.join(cmd[:3])} ...\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )


def build(sanitize: Optional[str] = None) -> Path:
    """Configures and builds the library and programs; returns the build folder. ``sanitize``: e.g.
    ``"address,undefined"`` for a sanitizer build in its own folder."""
    if shutil.which("cmake") is None:
        raise NativeBuildError("cmake not found: it builds the native runtime")
    headers = ort_ops.headers_dir()
    if not (headers / "onnxruntime_cxx_api.h").is_file():
        raise NativeBuildError(f"ONNX Runtime headers not found in {headers}: run scripts/setup.sh")
    out = build_dir(sanitize)
    link = out / "ort" / "libonnxruntime.so.1"
    link.parent.mkdir(parents=True, exist_ok=True)
    target = onnxruntime_library()
    if not link.is_symlink() or Path(os.readlink(link)) != target:
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    # configured every time (quick): headers that appeared since the last build (TensorRT's) are picked up
    try:
        version = importlib.metadata.version("rnnx")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    options = [f"-DRNNX_ORT_INCLUDE={headers}", f"-DRNNX_ORT_LIBRARY={link}", f"-DRNNX_VERSION={version}",
               "-DCMAKE_BUILD_TYPE=" + ("Debug" if sanitize else "Release")]  # fmt: skip
    trt, cuda = _tensorrt_include(), _cuda_include()
    if trt is not None and cuda is not None:
        options += [f"-DRNNX_TRT_INCLUDE={trt}", f"-DRNNX_CUDA_INCLUDE={cuda}"]
    if sanitize:
        options.append(f"-DRNNX_SANITIZE={sanitize}")
    with build_lock(out):
        _run(["cmake", "-S", str(SOURCES), "-B", str(out), *options], "configuring the native runtime")
        _run(["cmake", "--build", str(out), "-j", str(os.cpu_count() or 2)], "building the native runtime")
    ops = ort_ops.library_path()
    beside = out / ort_ops.LIBRARY_NAME  # found by rnnx_model_open when no library is named
    if ops.is_file() and not (beside.is_symlink() and beside.resolve() == ops.resolve()):
        beside.unlink(missing_ok=True)
        beside.symlink_to(ops)
    return out


def library_path(sanitize: Optional[str] = None) -> Path:
    return build_dir(sanitize) / LIBRARY_NAME


def program_path(name: str, sanitize: Optional[str] = None) -> Path:
    """One of :data:`PROGRAMS` in the build folder."""
    if name not in PROGRAMS:
        raise ValueError(f"unknown program {name!r}; one of {', '.join(PROGRAMS)}")
    return build_dir(sanitize) / name


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Builds librnnx_runtime and rnnx-generate.")
    parser.add_argument("--sanitize", default=None, help="e.g. address,undefined (its own build folder)")
    args = parser.parse_args()
    try:
        out = build(args.sanitize)
    except NativeBuildError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    print(out / LIBRARY_NAME)
