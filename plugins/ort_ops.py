"""rnnx's custom-op library for ONNX Runtime, its build: ``librnnx_ort_ops.so`` from the ops' ``plugins/<op>/ort`` and
``plugins/<op>/cpu`` sources and the shared ``plugins/ort``, compiled against ONNX Runtime's C/C++ headers alone (an npm
package, fetched once and integrity checked, or ``$RNNX_ORT_HEADERS``), for AVX-512, AVX2/FMA and a baseline. Where
the library goes: ``$RNNX_ORT_OPS``, ``<checkout>/build/ortops`` or the user cache (:mod:`.build_dirs`). The runtime
finds and registers it (:mod:`rnnx.runtime.ortops`). Torch-free."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple, Optional

from .build_dirs import CHECKOUT, native_library_path, user_cache

#: The ONNX Runtime C API version of the headers the library is built with; ORT 1.N serves API version N.
ORT_API_VERSION = 29
#: npm package shipping ORT's headers (Microsoft's iOS framework inside a Unity plugin) and its integrity.
HEADERS_PACKAGE = "com.github.asus4.onnxruntime@0.4.9"
HEADERS_INTEGRITY = "sha512-BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=="
HEADERS_IN_PACKAGE = "package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers"
LIBRARY_NAME = "librnnx_ort_ops.so"

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the checkout, or site-packages/rnnx
#: The library's shared sources, which name no op: the registration (``rnnx_ort_ops.cpp``, ``op_registry.h``), the
#: per-instruction-set entry-point macros (``isa_kernels.h``, ``isa_build.h``), the op support.
_SOURCES = _PACKAGE_ROOT / "plugins" / "ort"
#: The op folders, ``plugins/<op>/`` (only they have language folders such as ``ort/`` and ``cpu/``).
_OPS = _PACKAGE_ROOT / "plugins"
#: The instruction-set builds of each op's ``<op>/ort/*_isa.cpp``, in link order: base first, so that where the
#: builds share a definition (std::vector's members) the linker keeps the one any CPU runs (the kernels themselves
#: have internal linkage, ``plugins/ort/isa_build.h``).
ISAS = (("base", ()), ("avx2", ("-mavx2", "-mfma")), ("avx512", ("-mavx512f", "-mavx2", "-mfma")))


class OrtOpsError(RuntimeError):
    """The library cannot be built or used here; the message says what is missing, in one line."""


def headers_dir() -> Path:
    """Where ONNX Runtime's headers are expected."""
    env = os.environ.get("RNNX_ORT_HEADERS")
    if env:
        return Path(env)
    if CHECKOUT is not None:
        return CHECKOUT / ".cache" / "onnxruntime" / "include"
    return user_cache() / "rnnx" / "ort-include"


def library_path() -> Path:
    """Where the library is (or would be) built."""
    return native_library_path("RNNX_ORT_OPS", "ortops", LIBRARY_NAME)


def build(
    out: Optional[Path] = None, headers: Optional[Path] = None, force: bool = False, sanitize: Optional[str] = None
) -> Path:
    """Compiles the library (g++, or ``$CXX``) into ``out`` (default :func:`library_path`) unless it is
    there and newer than its sources; returns its path. The file is written whole (temp + rename).
    ``sanitize="address"`` builds an AddressSanitizer variant (for tests: the loading process needs
    libasan first, e.g. through ``LD_PRELOAD``)."""
    out = Path(out or library_path())
    headers = Path(headers or headers_dir())
    if not (headers / "onnxruntime_lite_custom_op.h").is_file():
        raise OrtOpsError(
            f"ONNX Runtime headers not found in {headers}: run scripts/setup.sh (npm pack {HEADERS_PACKAGE}) "
            "or set RNNX_ORT_HEADERS"
        )
    sources = _sources()
    inputs = [*sources.files, *sources.folders]
    if not force and out.is_file() and out.stat().st_mtime >= max(p.stat().st_mtime for p in inputs):
        return out
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise OrtOpsError("no C++ compiler found (g++ / $CXX) to build the rnnx ONNX Runtime ops")
    out.parent.mkdir(parents=True, exist_ok=True)
    common = ["-std=c++17", "-O3", "-fPIC", "-fvisibility=hidden", "-fno-trapping-math"]
    if sanitize is not None:
        common += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g"]
    x86 = os.uname().machine in ("x86_64", "amd64", "i686")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        # One object per source and build, named by its path under plugins/ (unique) and the instruction set.
        def obj(source: Path, isa: str = "") -> str:
            name = source.relative_to(_OPS).with_suffix("").as_posix().replace("/", "+")
            return str(Path(tmp) / f"{name}{'.' + isa if isa else ''}.o")

        ops_cmd = [cxx, *common, f"-I{_SOURCES}", f"-I{headers}", "-c"]
        jobs = [[*ops_cmd, str(cpp), "-o", obj(cpp)] for cpp in (*sources.shared, *sources.ops)]
        for isa, flags in ISAS:
            isa_cmd = [cxx, *common, *(flags if x86 else ()), f"-DRNNX_ISA={isa}", f"-I{_SOURCES}", "-c"]
            jobs += [[*isa_cmd, str(cpp), "-o", obj(cpp, isa)] for cpp in sources.isa]
        with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), len(os.sched_getaffinity(0))))) as pool:
            list(pool.map(_run, jobs))
        lib = Path(tmp) / LIBRARY_NAME
        link = [cxx, "-shared", *([f"-fsanitize={sanitize}"] if sanitize else []), "-o", str(lib)]
        _run([*link, *(job[-1] for job in jobs)])
        os.replace(lib, out)
    return out


class _Sources(NamedTuple):
    """The library's sources, found by glob (a new op's folder needs no edit here)."""

    #: ``plugins/ort/*.cpp``: the registration, compiled once.
    shared: tuple[Path, ...]
    #: ``plugins/<op>/ort/*_op.cpp``: each op registering itself, compiled once.
    ops: tuple[Path, ...]
    #: ``plugins/<op>/ort/*_isa.cpp``: each op's kernel entry points, compiled once per instruction set (:data:`ISAS`).
    isa: tuple[Path, ...]
    #: Every file the library is built from (the above, the headers of ``plugins/ort``, of each ``plugins/<op>/ort``
    #: and of the kernels it shares with rnnx's torch ops: ``plugins/cpu`` and each ``plugins/<op>/cpu``).
    files: tuple[Path, ...]
    #: The folders holding them: a file added or removed changes its folder's time.
    folders: tuple[Path, ...]


def _sources() -> _Sources:
    op_dirs = sorted(_OPS.glob("*/ort"))
    kernel_dirs = [_OPS / "cpu", *sorted(_OPS.glob("*/cpu"))]
    folders = (_SOURCES, *op_dirs, *kernel_dirs)
    files = tuple(p for d in (_SOURCES, *op_dirs) for p in sorted(d.iterdir()) if p.suffix in (".cpp", ".h"))
    files += tuple(p for d in kernel_dirs for p in sorted(d.glob("*.h")))
    ops = tuple(p for d in op_dirs for p in sorted(d.glob("*_op.cpp")))
    isa = tuple(p for d in op_dirs for p in sorted(d.glob("*_isa.cpp")))
    return _Sources(tuple(sorted(_SOURCES.glob("*.cpp"))), ops, isa, files, folders)


def _run(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        what = cmd[cmd.index("-c") + 1] if "-c" in cmd else "linking"
        raise OrtOpsError(f"building the rnnx ONNX Runtime ops failed: {cmd[0]} ({what}) ...\n{result.stderr}")


def fetch_headers(dest: Optional[Path] = None) -> Path:
    """Fetches ONNX Runtime's headers once: ``npm pack`` of :data:`HEADERS_PACKAGE`, its sha512 checked
    against :data:`HEADERS_INTEGRITY`, only the ``Headers/`` files and the ``LICENSE`` extracted into
    ``dest`` (default :func:`headers_dir`). Needs npm."""
    import base64
    import hashlib
    import tarfile

    dest = Path(dest or headers_dir())
    if (dest / "onnxruntime_lite_custom_op.h").is_file():
        return dest
    npm = shutil.which("npm")
    if npm is None:
        raise OrtOpsError(f"npm not found: cannot fetch ONNX Runtime's headers ({HEADERS_PACKAGE})")
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run([npm, "pack", "--silent", HEADERS_PACKAGE], cwd=tmp, capture_output=True, text=True)
        tarballs = list(Path(tmp).glob("*.tgz"))
        if result.returncode != 0 or len(tarballs) != 1:
            raise OrtOpsError(f"npm pack {HEADERS_PACKAGE} failed: {result.stderr.strip()[-500:]}")
        digest = hashlib.sha512()
        with open(tarballs[0], "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        integrity = "sha512-" + base64.b64encode(digest.digest()).decode()
        if integrity != HEADERS_INTEGRITY:
            raise OrtOpsError(
                f"{tarballs[0].name}: integrity {integrity[:24]}..., expected {HEADERS_INTEGRITY[:24]}..."
            )
        staging = Path(tmp) / "include"
        staging.mkdir()
        with tarfile.open(tarballs[0]) as tar:
            for member in tar.getmembers():
                name = member.name
                keep = name == "package/LICENSE" or (name.startswith(HEADERS_IN_PACKAGE + "/") and name.endswith(".h"))
                if keep and member.isfile():
                    (staging / Path(name).name).write_bytes(tar.extractfile(member).read())
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.move(str(staging), str(dest))
    return dest


def fetch_and_build() -> Path:
    """:func:`fetch_headers` (if needed), then :func:`build`: the library's path."""
    fetch_headers()
    return build()
