"""rnnx's custom-op library for ONNX Runtime: the rnnx ops (``SRUScan``, ``CausalLinearAttention``,
``LinearRecurrence``, ``CausalConvWithState``) as native CPU kernels instead of their function bodies.

    python3 -m rnnx.runtime.ortops        # fetches the headers and builds the library if needed; prints its path

The library (``librnnx_ort_ops.so``; shared sources in ``plugins/ort/``, which name no op, and each op's
``plugins/<op>/ort/``: ``<op>_op.cpp`` registers the op, ``<op>_isa.cpp`` is built per instruction set) is built
from ONNX Runtime's C/C++ headers alone: it links no libonnxruntime and takes the API table from the process that
loads it, through ``SessionOptions.register_custom_ops_library(path)`` (Python),
``Ort::SessionOptions::RegisterCustomOpsLibrary`` (C++) or ``SessionOptions.RegisterCustomOpLibrary`` (C#). Its
kernels are host-independent headers under ``plugins/*/cpu`` (the SRU one is rnnx's torch CPU kernel), built
for AVX-512, AVX2/FMA and a baseline and picked by the CPU's features; each op has a kernel per activation dtype (fp32,
fp16, bf16, fp64). The headers (ONNX Runtime API version :data:`ORT_API_VERSION`, MIT) come from the npm package
:data:`HEADERS_PACKAGE`; ``scripts/setup.sh`` fetches them into ``.cache/onnxruntime/include``. A model without
the library still runs on stock ONNX Runtime through the ops' function bodies.

Where things are: the headers in ``$RNNX_ORT_HEADERS`` or ``<checkout>/.cache/onnxruntime/include``; the
library in ``$RNNX_ORT_OPS`` or ``<checkout>/build/ortops/librnnx_ort_ops.so`` (else under
``~/.cache/rnnx/ortops``). Torch-free.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, Optional

from .build_dirs import CHECKOUT, build_main, native_library_path, user_cache
from .contract.ops import ALL_OPS, CAUSAL_LINEAR_ATTENTION, ONNX_DOMAIN, ONNX_DOMAIN_VERSION

#: The ONNX Runtime C API version of the headers the library is built with; ORT 1.N serves API version N.
ORT_API_VERSION = 29
MIN_ONNXRUNTIME = (1, ORT_API_VERSION)
#: npm package shipping ORT's headers (Microsoft's iOS framework inside a Unity plugin) and its integrity.
HEADERS_PACKAGE = "com.github.asus4.onnxruntime@0.4.9"
HEADERS_INTEGRITY = "sha512-BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=="
HEADERS_IN_PACKAGE = "package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers"
LIBRARY_NAME = "librnnx_ort_ops.so"
#: The ops the library implements, as (domain, op type): every rnnx op of the op records.
NATIVE_OPS = tuple((ONNX_DOMAIN, op.onnx_name) for op in ALL_OPS)

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


_logger = logging.getLogger("rnnx.runtime")
_missing_noted = False


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


def onnxruntime_supported(version: Optional[str] = None) -> bool:
    """Whether an onnxruntime version (default: the installed one) serves the headers' API version."""
    if version is None:
        import onnxruntime

        version = onnxruntime.__version__
    parts = tuple(int(p) for p in version.split("+")[0].split(".")[:2] if p.isdigit())
    return parts >= MIN_ONNXRUNTIME


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


def fetch_and_build() -> Path:
    """:func:`fetch_headers` (if needed), then :func:`build`: the library's path."""
    fetch_headers()
    return build()


if __name__ == "__main__":
    build_main(fetch_and_build, OrtOpsError)
