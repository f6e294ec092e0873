"""Where the rnnx TensorRT plugin library is, and how to build it.

``plugin_library_path()`` is the built ``librnnx_trt_plugins.so`` (for ``IPluginRegistry.load_library``,
``polygraphy run --plugins``, ``trtexec --staticPlugins``); ``build_plugins()`` runs the CMake build of
``plugins/``. ``python -m rnnx.runtime.plugins`` builds and prints the path::

    polygraphy run model.onnx --trt --plugins "$(python -m rnnx.runtime.plugins)"

The library registers its creators itself when loaded into a process that has TensorRT, and exports
``getCreators`` / ``setLoggerFinder`` for TensorRT's loaders; see plugins/README.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

LIBRARY_NAME = "librnnx_trt_plugins.so"
#: Repository root (this file is runtime/plugins.py in the source tree).
REPO_ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO_ROOT / "plugins"
DEFAULT_BUILD_DIR = REPO_ROOT / "build" / "plugins"
#: Environment variable naming a library to use instead of the default build location.
LIBRARY_ENV = "RNNX_TRT_PLUGINS"


class PluginLibraryNotFound(FileNotFoundError):
    """The plugin library has not been built (the message says how to build it)."""


def plugin_library_path(build_dir: Optional[Path] = None) -> Path:
    """The built plugin library: ``$RNNX_TRT_PLUGINS`` if set, else ``<build_dir>/librnnx_trt_plugins.so``.

    Raises :class:`PluginLibraryNotFound` with the build command when it does not exist.
    """
    override = os.environ.get(LIBRARY_ENV)
    path = Path(override) if override else Path(build_dir or DEFAULT_BUILD_DIR) / LIBRARY_NAME
    if not path.is_file():
        raise PluginLibraryNotFound(
            f"rnnx TensorRT plugin library not found at {path}. Build it with `python -m rnnx.runtime.plugins` "
            f"(or: cmake -S {SOURCE_DIR} -B {DEFAULT_BUILD_DIR} && cmake --build {DEFAULT_BUILD_DIR} -j); "
            "it needs nvcc and the TensorRT headers (`bash scripts/setup.sh`)."
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
    """Configures and builds ``plugins/`` with CMake into ``build_dir`` (incremental); returns the library path.

    ``cmake_args`` are passed to the configure step (e.g. ``-DTENSORRT_ROOT=...``,
    ``-DCMAKE_CUDA_ARCHITECTURES=90``); ``targets`` limits the build (default: everything, tests included).
    Raises ``RuntimeError`` with CMake's output when a step fails.
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake not found on PATH; install CMake >= 3.24 to build the rnnx plugins")
    build = Path(build_dir or DEFAULT_BUILD_DIR)
    build.mkdir(parents=True, exist_ok=True)
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
    for cmd in steps:
        result = subprocess.run(cmd, capture_output=quiet, text=True)
        if result.returncode != 0:
            output = (result.stdout or "") + (result.stderr or "") if quiet else "(see the output above)"
            raise RuntimeError(f"{' '.join(cmd)} failed with exit code {result.returncode}:\n{output}")
    return build / LIBRARY_NAME


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m rnnx.runtime.plugins [cmake configure args...]``: builds, prints the library path."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        path = _build_reporting_to_stderr(args)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _build_reporting_to_stderr(cmake_args: Sequence[str]) -> Path:
    """Builds with CMake's progress on stderr so stdout carries only the path (for ``$(...)``)."""
    stdout = os.dup(1)
    try:
        os.dup2(2, 1)
        built = build_plugins(cmake_args=cmake_args)
    finally:
        os.dup2(stdout, 1)
        os.close(stdout)
    return plugin_library_path(built.parent)


if __name__ == "__main__":
    sys.exit(main())
