"""The rnnx CUDA kernels and TensorRT plugins as shipped sources: where they are, and how to build them.

This folder is the package ``rnnx.plugins``: the shared parts (the CMake build, the kernels' launch API and
shared headers, the plugin base and registration, the CUDA host emulation, the C++ tests, the ONNX Runtime op
library's shared sources). Each op's own native sources sit in its op folder, ``rnnx.models.ops.<op>``:
``cuda/`` (its kernels), ``ort/`` (its ONNX Runtime op), ``tensorrt/`` (its plugin). The wheel carries all of
them, so both users of the kernels build from the installed package as well as from a source checkout:

* the PyTorch binding (``rnnx.models.ops.cuda``) JIT-compiles :data:`KERNEL_SOURCES` with
  :data:`KERNELS_INCLUDE_DIR` and :data:`KERNELS_SRC_DIR` on its include path;
* the TensorRT plugin libraries are built by CMake from :data:`SOURCE_DIR`, from the same sources, one per
  registration mechanism (each TensorRT loader uses exactly one):

  ==============================================  ==============================================================
  ``plugin_library_path(kind="load_library")``    ``librnnx_trt_plugins.so``: exports ``getCreators`` /
                                                  ``setLoggerFinder`` and registers nothing by itself; for
                                                  ``IPluginRegistry.load_library`` and ``trtexec --dynamicPlugins``
                                                  (rnnx's own engine builder and TensorRT backend use it)
  ``plugin_library_path(kind="dlopen")``          ``librnnx_trt_plugins_static.so``: registers its creators from a
                                                  static initialiser, exports nothing; for loaders that only
                                                  dlopen: ``polygraphy --plugins``, ``trtexec --staticPlugins``
  ==============================================  ==============================================================

``build_plugins()`` runs the CMake build. ``python -m rnnx.plugins`` builds and prints the path of the
``dlopen`` library (``--kind load_library`` prints the other)::

    polygraphy run model.onnx --trt --plugins "$(python -m rnnx.plugins)"

The libraries are built into :func:`default_build_dir`: ``<repo>/build/plugins`` in a source checkout, else
``$XDG_CACHE_HOME/rnnx/plugins/<rnnx version>`` (``~/.cache`` when unset). See docs/tensorrt.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

#: The library for ``IPluginRegistry.load_library`` / ``trtexec --dynamicPlugins`` (exports getCreators).
LIBRARY_NAME = "librnnx_trt_plugins.so"
#: The library for plain-dlopen loaders, ``polygraphy --plugins`` / ``trtexec --staticPlugins`` (self-registering).
STATIC_LIBRARY_NAME = "librnnx_trt_plugins_static.so"
#: ``kind`` -> library file name (see the module doc).
LIBRARY_KINDS = {"load_library": LIBRARY_NAME, "dlopen": STATIC_LIBRARY_NAME}
#: The CMake source tree of the plugin library (this package's folder).
SOURCE_DIR = Path(__file__).resolve().parent
#: The repository root in a source checkout (editable install included), else None (installed wheel).
REPO_ROOT: Optional[Path] = SOURCE_DIR.parent if (SOURCE_DIR.parent / "pyproject.toml").is_file() else None
#: The op folders (``rnnx.models.ops``): each op's kernels, ONNX Runtime op and plugin are in ``<op>/cuda``,
#: ``<op>/ort`` and ``<op>/tensorrt`` there (``../models/ops`` from this folder, in a checkout and in a wheel).
OPS_DIR = SOURCE_DIR.parent / "models" / "ops"
#: The CUDA kernel library shared by the TensorRT plugins and the PyTorch binding (its CMake build).
KERNELS_DIR = SOURCE_DIR / "kernels"
#: Public headers of the kernels (``rnnx/kernels.h``: the C++ launch API).
KERNELS_INCLUDE_DIR = KERNELS_DIR / "include"
#: The private headers the kernel sources share (``type_utils.cuh``): on the include path of their builds.
KERNELS_SRC_DIR = KERNELS_DIR / "src"
#: Include directories a build of :data:`KERNEL_SOURCES` needs.
KERNEL_INCLUDE_DIRS = (KERNELS_INCLUDE_DIR, KERNELS_SRC_DIR)
#: The kernel translation units, every ``<op>/cuda/*.cu`` of the op folders (sorted), compiled by both the CMake
#: build (the same glob) and the PyTorch binding.
KERNEL_SOURCES = tuple(sorted(OPS_DIR.glob("*/cuda/*.cu")))
#: Environment variables naming a library to use instead of the default build location, per kind.
LIBRARY_ENV = "RNNX_TRT_PLUGINS"
STATIC_LIBRARY_ENV = "RNNX_TRT_PLUGINS_STATIC"
LIBRARY_ENVS = {"load_library": LIBRARY_ENV, "dlopen": STATIC_LIBRARY_ENV}


def find_nvcc() -> Optional[str]:
    """The CUDA compiler: ``$CUDACXX``, else ``nvcc`` on ``PATH``, else ``/usr/local/cuda/bin/nvcc``; None
    when none of them is a file."""
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


class PluginLibraryNotFound(FileNotFoundError):
    """The plugin library has not been built (the message says how to build it)."""


def default_build_dir() -> Path:
    """Where the plugin library is built by default: ``<repo>/build/plugins`` in a source checkout, else
    ``($XDG_CACHE_HOME or ~/.cache)/rnnx/plugins/<rnnx version>`` (the installed package is read-only)."""
    if REPO_ROOT is not None:
        return REPO_ROOT / "build" / "plugins"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "rnnx" / "plugins" / _rnnx_version()


def _rnnx_version() -> str:
    """The installed rnnx distribution's version (``unknown`` when there is no distribution metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rnnx")
    except PackageNotFoundError:
        return "unknown"


def plugin_library_path(build_dir: Optional[Path] = None, kind: str = "load_library") -> Path:
    """The built plugin library of ``kind``:

    * ``"load_library"`` (default): ``$RNNX_TRT_PLUGINS`` if set, else ``<build_dir>/librnnx_trt_plugins.so``,
      for ``IPluginRegistry.load_library`` and ``trtexec --dynamicPlugins``;
    * ``"dlopen"``: ``$RNNX_TRT_PLUGINS_STATIC`` if set, else ``<build_dir>/librnnx_trt_plugins_static.so``,
      for ``polygraphy --plugins`` and ``trtexec --staticPlugins``.

    ``build_dir`` defaults to :func:`default_build_dir`. Raises :class:`PluginLibraryNotFound` with the build
    command when it does not exist, ValueError for an unknown ``kind``.
    """
    if kind not in LIBRARY_KINDS:
        raise ValueError(f"unknown plugin library kind {kind!r}; one of: {', '.join(LIBRARY_KINDS)}")
    override = os.environ.get(LIBRARY_ENVS[kind])
    build = Path(build_dir or default_build_dir())
    path = Path(override) if override else build / LIBRARY_KINDS[kind]
    if not path.is_file():
        raise PluginLibraryNotFound(
            f"rnnx TensorRT plugin library not found at {path}. Build it with `python -m rnnx.plugins` "
            f"(or: cmake -S {SOURCE_DIR} -B {build} && cmake --build {build} -j); "
            "it needs cmake, nvcc and the TensorRT headers (-DTENSORRT_ROOT=<dir> or `bash scripts/setup.sh`)."
        )
    return path


def build_plugins(
    build_dir: Optional[Path] = None,
    build_type: str = "Release",
    cmake_args: Sequence[str] = (),
    jobs: Optional[int] = None,
    targets: Sequence[str] = (),
    quiet: bool = False,
) -> Path:
    """Configures and builds :data:`SOURCE_DIR` with CMake into ``build_dir`` (default
    :func:`default_build_dir`; incremental); returns the path of the ``load_library`` library (the
    ``dlopen`` one is built next to it, see :func:`plugin_library_path`).

    ``cmake_args`` are passed to the configure step (e.g. ``-DTENSORRT_ROOT=...``,
    ``-DCMAKE_CUDA_ARCHITECTURES=90``; ``-DCMAKE_CUDA_COMPILER`` defaults to :func:`find_nvcc`);
    ``targets`` limits the build (default: everything, tests included). Raises ``RuntimeError`` with CMake's
    output when a step fails.
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake not found on PATH; install CMake >= 3.25 to build the rnnx plugins")
    build = Path(build_dir or default_build_dir())
    build.mkdir(parents=True, exist_ok=True)
    nvcc = find_nvcc()
    if nvcc and not any(a.startswith("-DCMAKE_CUDA_COMPILER=") for a in cmake_args):
        cmake_args = [*cmake_args, f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    steps = [
        [cmake, "-S", str(SOURCE_DIR), "-B", str(build), f"-DCMAKE_BUILD_TYPE={build_type}", *cmake_args],
        [
            cmake,
            "--build",
            str(build),
            "-j",
            str(jobs or os.cpu_count() or 2),
            *(a for t in targets for a in ("--target", t)),
        ],
    ]
    from ..runtime.build_dirs import build_lock

    with build_lock(build):
        for cmd in steps:
            result = subprocess.run(cmd, capture_output=quiet, text=True)
            if result.returncode != 0:
                output = (result.stdout or "") + (result.stderr or "") if quiet else "(see the output above)"
                raise RuntimeError(f"{' '.join(cmd)} failed with exit code {result.returncode}:\n{output}")
    return build / LIBRARY_NAME


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m rnnx.plugins [--kind dlopen|load_library] [cmake configure args...]``: builds, prints the
    path of the library of that kind (default ``dlopen``: the one ``polygraphy --plugins`` and
    ``trtexec --staticPlugins`` take)."""
    args = list(sys.argv[1:] if argv is None else argv)
    kind = "dlopen"
    if args and args[0].startswith("--kind"):
        option = args.pop(0)
        if "=" in option:
            kind = option.split("=", 1)[1]
        elif args:
            kind = args.pop(0)
        else:
            kind = ""
    if kind not in LIBRARY_KINDS:
        print(f"error: --kind must be one of: {', '.join(LIBRARY_KINDS)} (got {kind!r})", file=sys.stderr)
        return 2
    try:
        path = _build_reporting_to_stderr(args, kind)
    except (RuntimeError, PluginLibraryNotFound) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _build_reporting_to_stderr(cmake_args: Sequence[str], kind: str) -> Path:
    """Builds with CMake's progress on stderr so stdout carries only the path (for ``$(...)``)."""
    stdout = os.dup(1)
    try:
        os.dup2(2, 1)
        built = build_plugins(cmake_args=cmake_args)
    finally:
        os.dup2(stdout, 1)
        os.close(stdout)
    return plugin_library_path(built.parent, kind=kind)
