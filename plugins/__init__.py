"""The rnnx CUDA kernels and TensorRT plugins as shipped sources: where they are, and how to build them.

This folder is the package ``rnnx.plugins``: the shared parts (the CMake build, the kernels' launch API and
shared headers, the plugin base and registration, the CUDA host emulation, the C++ tests, the ONNX Runtime op
library's shared sources, the PyTorch-facing native layer in ``torch/``) and each op's own native sources in its
op folder here, ``<op>/`` named by the op's torch name: ``cpu/`` (its CPU kernel), ``cuda/`` (its kernels, their
launcher header and their CUDA-emulation entry points), ``ort/`` (its ONNX Runtime op), ``tensorrt/`` (its plugin),
``torch/`` (its CUDA binding and libtorch registration) and ``tests/`` (its plugin's C++ tests). No shared file
names an op: the builds take op sources by glob, and each op registers itself with one line per registry. The
wheel carries all of them, so both users of the kernels build from the installed package as well as from a source
checkout:

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
                                                  static initialiser, no getCreators; for loaders that only
                                                  dlopen: ``polygraphy --plugins``, ``trtexec --staticPlugins``
  ==============================================  ==============================================================

``build_plugins()`` runs the CMake build. ``python -m rnnx.plugins`` builds and prints the path of the
``dlopen`` library (``--kind load_library`` prints the other)::

    polygraphy run model.onnx --trt --plugins "$(python -m rnnx.plugins)"

One build per TensorRT major. TensorRT 11 removed ``IPluginRegistry``'s V2-creator methods and made ``ILogger`` an
``IVersionedInterface`` (other vtables), so a library compiled against TensorRT 10 headers cannot serve TensorRT 11
and the reverse. Both libraries record the headers they were compiled against: the exported
``rnnx_trt_plugins_tensorrt_major()`` and the string ``rnnx-trt-plugins:tensorrt-headers=<major>.<minor>.<patch>``
in the file, which :func:`library_tensorrt_version` reads without loading the library and
:func:`check_library_major` compares with the TensorRT of the process (:class:`PluginLibraryMismatch`).

The libraries are built into :func:`default_build_dir`: ``<repo>/build/plugins/tensorrt-<major>`` in a source
checkout, else ``$XDG_CACHE_HOME/rnnx/plugins/<rnnx version>/tensorrt-<major>`` (``~/.cache`` when unset), the
major being :func:`target_tensorrt_major`'s: the installed TensorRT's, else that of the headers the build finds.
See docs/tensorrt.md.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

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
#: The folder of the op folders, this one: each op's CPU kernel, CUDA kernels, ONNX Runtime op, plugin, torch glue
#: and plugin tests are in ``<op>/cpu``, ``<op>/cuda``, ``<op>/ort``, ``<op>/tensorrt``, ``<op>/torch`` and
#: ``<op>/tests`` (``<op>`` the op's torch name). An op folder is one with such a language folder; the shared
#: folders (``common``, ``cpu``, ``kernels``, ``ort``, ``tests``, ``torch``) have none, so the globs ``*/cuda/*.cu``
#: and the like take op sources only.
OPS_DIR = SOURCE_DIR
#: The language folders of an op folder.
OP_LANGUAGE_FOLDERS = ("cpu", "cuda", "ort", "tensorrt", "torch", "tests")
#: Headers the CPU kernels of every op share (``vector_math.h``), for their hosts: torch, libtorch, ONNX Runtime.
CPU_DIR = SOURCE_DIR / "cpu"
#: The PyTorch-facing native layer's shared parts: the libtorch library (``rnnx_torch_ops.cpp``,
#: ``libtorch_op_support.h``), ATen's parallel-for for the CPU kernels (``aten_parallel_for.h``) and the CUDA
#: extension's module (``binding.cpp``, ``binding_support.h``); each op's parts are in ``<op>/torch/``.
TORCH_DIR = SOURCE_DIR / "torch"
#: The CUDA kernel library shared by the TensorRT plugins and the PyTorch binding (its CMake build).
KERNELS_DIR = SOURCE_DIR / "kernels"
#: Public headers the kernels share (``rnnx/kernel_types.h``: the types of the C++ launch API). Each op's launcher
#: is in its folder, ``<op>/cuda/<op>.h``, included from :data:`OPS_DIR`.
KERNELS_INCLUDE_DIR = KERNELS_DIR / "include"
#: The private headers the kernel sources share (``type_utils.cuh``): on the include path of their builds.
KERNELS_SRC_DIR = KERNELS_DIR / "src"
#: Include directories a build of :data:`KERNEL_SOURCES` needs.
KERNEL_INCLUDE_DIRS = (KERNELS_INCLUDE_DIR, OPS_DIR, KERNELS_SRC_DIR)
#: The kernel translation units, every ``<op>/cuda/*.cu`` of the op folders (sorted), compiled by both the CMake
#: build (the same glob) and the PyTorch binding.
KERNEL_SOURCES = tuple(sorted(OPS_DIR.glob("*/cuda/*.cu")))
#: Environment variables naming a library to use instead of the default build location, per kind.
LIBRARY_ENV = "RNNX_TRT_PLUGINS"
STATIC_LIBRARY_ENV = "RNNX_TRT_PLUGINS_STATIC"
LIBRARY_ENVS = {"load_library": LIBRARY_ENV, "dlopen": STATIC_LIBRARY_ENV}
#: Exported by both libraries: ``int32_t rnnx_trt_plugins_tensorrt_major()``, NV_TENSORRT_MAJOR of their headers.
TENSORRT_MAJOR_SYMBOL = "rnnx_trt_plugins_tensorrt_major"
#: Exported by both libraries: ``char const* rnnx_trt_plugins_tensorrt_version()``, "<major>.<minor>.<patch>".
TENSORRT_VERSION_SYMBOL = "rnnx_trt_plugins_tensorrt_version"
#: Precedes "<major>.<minor>.<patch>\0" of the headers compiled against in both libraries' bytes.
TENSORRT_HEADERS_MARKER = b"rnnx-trt-plugins:tensorrt-headers="
_MARKER_PATTERN = re.compile(re.escape(TENSORRT_HEADERS_MARKER) + rb"(\d+)\.(\d+)\.(\d+)\x00")
#: The major built for when no TensorRT is installed and no headers are found: that of the headers
#: ``bash scripts/setup.sh`` fetches (10.14), which CI builds against.
FALLBACK_TENSORRT_MAJOR = 10
#: Where CMake looks for the TensorRT headers when TENSORRT_ROOT is unset (plugins/CMakeLists.txt: find_path with
#: PATH_SUFFIXES tensorrt over the system prefixes), in its order; then the headers setup.sh fetches.
SYSTEM_INCLUDE_DIRS = (
    Path("/usr/local/include/x86_64-linux-gnu"),
    Path("/usr/local/include"),
    Path("/usr/include/x86_64-linux-gnu"),
    Path("/usr/include"),
)


def find_nvcc() -> Optional[str]:
    """The CUDA compiler: ``$CUDACXX``, else ``nvcc`` on ``PATH``, else ``/usr/local/cuda/bin/nvcc``; None
    when none of them is a file."""
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


class PluginLibraryNotFound(FileNotFoundError):
    """The plugin library has not been built (the message says how to build it)."""


class PluginLibraryMismatch(RuntimeError):
    """The plugin library was built against the headers of another TensorRT major than the TensorRT it is being
    loaded into, or before rnnx recorded the major (the message is one line: both majors, the build command)."""


def _tensorrt_root(cmake_args: Sequence[str] = ()) -> Optional[str]:
    """The TENSORRT_ROOT a build uses: ``-DTENSORRT_ROOT=`` of ``cmake_args``, else ``$TENSORRT_ROOT`` (None: unset)."""
    for arg in reversed(list(cmake_args)):
        if arg.startswith(("-DTENSORRT_ROOT=", "-DTENSORRT_ROOT:PATH=")):
            return arg.split("=", 1)[1] or None
    return os.environ.get("TENSORRT_ROOT") or None


def tensorrt_header_dirs(tensorrt_root: Optional[str] = None) -> list[Path]:
    """The folders searched for the TensorRT headers, in plugins/CMakeLists.txt's order: with ``tensorrt_root``
    (default ``$TENSORRT_ROOT``) its ``include/`` and itself only; else each of :data:`SYSTEM_INCLUDE_DIRS` with
    ``tensorrt/`` below it first, then ``<repo>/.cache/tensorrt/include`` (setup.sh's 10.14 headers). CMake's own
    search of the system also covers ``CMAKE_PREFIX_PATH`` and the like; an existing build keeps what it found."""
    root = tensorrt_root if tensorrt_root is not None else os.environ.get("TENSORRT_ROOT")
    if root:
        return [Path(root) / "include", Path(root)]
    dirs = [d for system in SYSTEM_INCLUDE_DIRS for d in (system / "tensorrt", system)]
    if REPO_ROOT is not None:
        dirs.append(REPO_ROOT / ".cache" / "tensorrt" / "include")
    return dirs


def find_tensorrt_headers(tensorrt_root: Optional[str] = None) -> Optional[Path]:
    """The first folder of :func:`tensorrt_header_dirs` with ``NvInferRuntime.h`` (what CMake's find_path looks
    for), or None."""
    for folder in tensorrt_header_dirs(tensorrt_root):
        if (folder / "NvInferRuntime.h").is_file():
            return folder
    return None


def read_tensorrt_header_version(header: Path) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) from a ``NvInferVersion.h``: ``#define NV_TENSORRT_MAJOR 8`` (a number), or, as in
    10.x and 11.x, ``#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE`` with ``#define TRT_MAJOR_ENTERPRISE 11``.
    None when the file is missing or lacks one of the three."""
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return None
    defines = dict(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\w+)", text, flags=re.MULTILINE))
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        value = defines.get(f"NV_TENSORRT_{part}")
        for _ in range(4):  # follow a macro name to its number (TRT_MAJOR_ENTERPRISE)
            if value is None or value.isdigit():
                break
            value = defines.get(value)
        if value is None or not value.isdigit():
            return None
        parts.append(int(value))
    return parts[0], parts[1], parts[2]


def headers_tensorrt_version(tensorrt_root: Optional[str] = None) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) of the TensorRT headers a fresh build finds (:func:`find_tensorrt_headers`), or None
    when none are found."""
    folder = find_tensorrt_headers(tensorrt_root)
    return read_tensorrt_header_version(folder / "NvInferVersion.h") if folder is not None else None


#: Distribution names of TensorRT's Python wheels besides ``tensorrt``: ``tensorrt-cu12``, ``tensorrt_cu13``,
#: ``tensorrt-cu12-bindings``, ``tensorrt-cu13-libs``, ... (all carry the TensorRT version).
_TENSORRT_DISTRIBUTION = re.compile(r"tensorrt[-_.]cu\d+(?:[-_.](?:bindings|libs))?", re.IGNORECASE)


@functools.lru_cache(maxsize=1)
def installed_tensorrt_version() -> Optional[str]:
    """The version of the installed TensorRT Python package ("10.14.1.48"), read from distribution metadata (no
    import): the ``tensorrt`` distribution, else one named like ``tensorrt-cuNN`` / ``tensorrt_cuNN`` (``-bindings``
    preferred to the bare name, then ``-libs``). None when none is installed. Cached for the process
    (``installed_tensorrt_version.cache_clear()`` after installing one)."""
    from importlib.metadata import PackageNotFoundError, distributions, version

    try:
        return version("tensorrt")
    except PackageNotFoundError:
        pass
    found: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"] or ""
        if _TENSORRT_DISTRIBUTION.fullmatch(name):
            found.setdefault(name.lower().replace("_", "-").replace(".", "-"), dist.version)
    for suffix in ("-bindings", "", "-libs"):
        for name in sorted(found):
            if re.fullmatch(r"tensorrt-cu\d+" + suffix, name):
                return found[name]
    return None


def parse_tensorrt_version(version: str) -> tuple[int, ...]:
    """``"10.14.1.48"`` -> ``(10, 14, 1, 48)``: the leading dot-separated integers (``()`` when none). The one
    parser of TensorRT version strings (``rnnx.runtime.tensorrt`` uses it too)."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", str(version))
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def tensorrt_major_of(version: str) -> int:
    """The major of a TensorRT version string: 11 for "11.4.0.106". ValueError when it does not start with one."""
    parsed = parse_tensorrt_version(version)
    if not parsed:
        raise ValueError(f"not a TensorRT version: {version!r} (expected e.g. '10.14.1.48')")
    return parsed[0]


def target_tensorrt_major(tensorrt_root: Optional[str] = None) -> int:
    """The TensorRT major the plugins are built for by default: the installed TensorRT's
    (:func:`installed_tensorrt_version`), else that of the headers a build finds (:func:`headers_tensorrt_version`
    of ``tensorrt_root``, default ``$TENSORRT_ROOT``), else :data:`FALLBACK_TENSORRT_MAJOR`."""
    installed = installed_tensorrt_version()
    if installed:
        return tensorrt_major_of(installed)
    headers = headers_tensorrt_version(tensorrt_root)
    return headers[0] if headers is not None else FALLBACK_TENSORRT_MAJOR


def default_build_dir(major: Optional[int] = None) -> Path:
    """Where the plugin libraries for TensorRT ``major`` (default :func:`target_tensorrt_major`) are built:
    ``<repo>/build/plugins/tensorrt-<major>`` in a source checkout, else
    ``($XDG_CACHE_HOME or ~/.cache)/rnnx/plugins/<rnnx version>/tensorrt-<major>`` (the installed package is
    read-only). One folder per major: a build serves one TensorRT major."""
    folder = f"tensorrt-{target_tensorrt_major() if major is None else int(major)}"
    if REPO_ROOT is not None:
        return REPO_ROOT / "build" / "plugins" / folder
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "rnnx" / "plugins" / _rnnx_version() / folder


def library_tensorrt_version(path: Union[str, Path]) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) of the TensorRT headers a plugin library was compiled against, read from the file's
    bytes (the ``rnnx-trt-plugins:tensorrt-headers=`` marker) without loading it: loading the self-registering
    library would register its creators. None for a file without the marker (a library built before rnnx
    recorded it). OSError when the file cannot be read."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            match = _MARKER_PATTERN.search(data)
            if match is None:
                return None
            return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _build_command(major: int) -> str:
    return f"TENSORRT_ROOT=<TensorRT {major} dir> python -m rnnx.plugins --major {major}"


def check_library_major(path: Union[str, Path], tensorrt_version: str) -> None:
    """Raises :class:`PluginLibraryMismatch` (one line naming both majors and the build command) unless the
    plugin library at ``path`` was compiled against headers of the major of ``tensorrt_version`` (the TensorRT it
    is about to be loaded into, e.g. ``tensorrt.__version__`` "11.4.0.106"); a library without the marker
    (:func:`library_tensorrt_version`) is refused too. Reads the file only: nothing is loaded."""
    wanted = tensorrt_major_of(tensorrt_version)
    built = library_tensorrt_version(path)
    if built is None:
        raise PluginLibraryMismatch(
            f"{path} was built before rnnx recorded its TensorRT major: rebuild it for TensorRT {tensorrt_version} "
            f"with `{_build_command(wanted)}`"
        )
    if built[0] != wanted:
        raise PluginLibraryMismatch(
            f"{path} was built against TensorRT {built[0]} headers ({'.'.join(map(str, built))}) but is being "
            f"loaded into TensorRT {tensorrt_version}: build the plugins for TensorRT {wanted} with "
            f"`{_build_command(wanted)}`"
        )


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


def _major_of_build_dir(build: Path) -> Optional[int]:
    """N for a build folder named ``tensorrt-N`` (:func:`default_build_dir`'s naming), else None."""
    match = re.fullmatch(r"tensorrt-(\d+)", build.name)
    return int(match.group(1)) if match else None


def build_plugins(
    build_dir: Optional[Path] = None,
    build_type: str = "Release",
    cmake_args: Sequence[str] = (),
    jobs: Optional[int] = None,
    targets: Sequence[str] = (),
    quiet: bool = False,
    tensorrt_major: Optional[int] = None,
) -> Path:
    """Configures and builds :data:`SOURCE_DIR` with CMake into ``build_dir`` (default
    :func:`default_build_dir` of ``tensorrt_major``; incremental); returns the path of the ``load_library``
    library (the ``dlopen`` one is built next to it, see :func:`plugin_library_path`).

    ``tensorrt_major``: the TensorRT major the build is for, passed as ``-DRNNX_TENSORRT_MAJOR`` (CMake refuses
    headers of another major). Default: N for a ``build_dir`` named ``tensorrt-N``, :func:`target_tensorrt_major`
    without ``build_dir``, else unchecked (the headers found decide). ``cmake_args`` are passed to the configure
    step (e.g. ``-DTENSORRT_ROOT=...``, ``-DCMAKE_CUDA_ARCHITECTURES=90``; ``-DCMAKE_CUDA_COMPILER`` defaults to
    :func:`find_nvcc`); ``targets`` limits the build (default: everything, tests included). Raises
    ``RuntimeError`` with CMake's output when a step fails.
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake not found on PATH; install CMake >= 3.25 to build the rnnx plugins")
    if tensorrt_major is None:
        tensorrt_major = target_tensorrt_major() if build_dir is None else _major_of_build_dir(Path(build_dir))
    build = Path(build_dir or default_build_dir(tensorrt_major))
    build.mkdir(parents=True, exist_ok=True)
    nvcc = find_nvcc()
    if nvcc and not any(a.startswith("-DCMAKE_CUDA_COMPILER=") for a in cmake_args):
        cmake_args = [*cmake_args, f"-DCMAKE_CUDA_COMPILER={nvcc}"]
    if tensorrt_major is not None and not any(a.startswith("-DRNNX_TENSORRT_MAJOR") for a in cmake_args):
        cmake_args = [*cmake_args, f"-DRNNX_TENSORRT_MAJOR={int(tensorrt_major)}"]
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
    from .build_dirs import build_lock

    with build_lock(build):
        for cmd in steps:
            result = subprocess.run(cmd, capture_output=quiet, text=True)
            if result.returncode != 0:
                output = (result.stdout or "") + (result.stderr or "") if quiet else "(see the output above)"
                raise RuntimeError(f"{' '.join(cmd)} failed with exit code {result.returncode}:\n{output}")
    return build / LIBRARY_NAME


def _configured_include_dir(build: Path) -> Optional[Path]:
    """TENSORRT_INCLUDE_DIR of an existing CMake build folder (what its next configure reuses), or None."""
    try:
        text = (build / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return None
    match = re.search(r"^TENSORRT_INCLUDE_DIR:PATH=(.+)$", text, flags=re.MULTILINE)
    return Path(match.group(1).strip()) if match and not match.group(1).endswith("-NOTFOUND") else None


def missing_build_message(major: int, cmake_args: Sequence[str] = ()) -> Optional[str]:
    """One line when the build for TensorRT ``major`` cannot be made because the headers it would use are of
    another major (which build is missing, and the command that makes it), else None (the build can go ahead, or
    fails with CMake's own message: no headers at all)."""
    build = default_build_dir(major)
    root = _tensorrt_root(cmake_args)
    configured = _configured_include_dir(build) if root is None else None
    folder = configured or find_tensorrt_headers(root)
    headers = read_tensorrt_header_version(folder / "NvInferVersion.h") if folder is not None else None
    if headers is None or headers[0] == major:
        return None
    return (
        f"the rnnx plugins for TensorRT {major} ({build}) are not built and cannot be built from the TensorRT "
        f"headers found ({folder}: {'.'.join(map(str, headers))}, TensorRT {headers[0]}): make that build with "
        f"`{_build_command(major)}`"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m rnnx.plugins [--kind dlopen|load_library] [--major N] [cmake configure args...]``: builds for
    TensorRT ``N`` (default :func:`target_tensorrt_major`: the installed TensorRT's, else the headers'), prints the
    path of the library of that kind (default ``dlopen``: the one ``polygraphy --plugins`` and
    ``trtexec --staticPlugins`` take). When only headers of another major are found, says which build is missing
    and how to make it (exit status 1)."""
    args = list(sys.argv[1:] if argv is None else argv)
    options = {"--kind": "dlopen", "--major": ""}
    while args and args[0].split("=", 1)[0] in options:
        option = args.pop(0)
        name, equals, value = option.partition("=")
        if not equals:
            value = args.pop(0) if args else ""
        options[name] = value
    kind = options["--kind"]
    if kind not in LIBRARY_KINDS:
        print(f"error: --kind must be one of: {', '.join(LIBRARY_KINDS)} (got {kind!r})", file=sys.stderr)
        return 2
    if options["--major"] and not options["--major"].isdigit():
        print(f"error: --major must be a TensorRT major such as 10 or 11 (got {options['--major']!r})", file=sys.stderr)
        return 2
    major = int(options["--major"]) if options["--major"] else target_tensorrt_major(_tensorrt_root(args))
    missing = missing_build_message(major, args)
    if missing is not None:
        print(f"error: {missing}", file=sys.stderr)
        return 1
    try:
        path = _build_reporting_to_stderr(args, kind, major)
    except (RuntimeError, PluginLibraryNotFound) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _build_reporting_to_stderr(cmake_args: Sequence[str], kind: str, major: int) -> Path:
    """Builds for TensorRT ``major`` with CMake's progress on stderr so stdout carries only the path (for
    ``$(...)``)."""
    stdout = os.dup(1)
    try:
        os.dup2(2, 1)
        built = build_plugins(cmake_args=cmake_args, tensorrt_major=major)
    finally:
        os.dup2(stdout, 1)
        os.close(stdout)
    return plugin_library_path(built.parent, kind=kind)
