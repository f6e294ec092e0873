"""The wheel: a non-editable install carries everything the kernels and the plugin library build from.

The wheel is built once per session (``wheel_build.build_wheel``) and installed with ``pip --target`` into
a temporary folder; the checks on the installed copy run in subprocesses with ``PYTHONPATH`` set to that
folder, so ``rnnx`` resolves there (torch and the other dependencies come from this environment), never
to the checkout. Without a GPU the installed kernel sources are still proven self-contained: they are
byte-identical to the checkout's (which the plugin build compiles with nvcc for every architecture), and
nvcc resolves every ``#include`` of each installed ``.cu`` inside the installed folder or the toolkit and
system headers, never the checkout (``nvcc -M``, well under a second a file); the plugins' CMake tree
configures from the installed folder (a few seconds). The ``gpu`` test builds the
torch extension itself from the installed copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from wheel_build import REPO, build_wheel

from rnnx import plugins

pytestmark = pytest.mark.slow

NVCC = plugins.find_nvcc()

KERNELS = "rnnx/plugins/kernels"
#: The op folders' parent: each op's native sources are in rnnx/plugins/<op>/ (its torch name).
OPS = "rnnx/plugins"
#: The kernel sources, in their op folders (wheel paths below OPS).
KERNEL_FILES = (
    "sru_scan/cuda/sru_scan.cu",
    "causal_linear_attention/cuda/causal_linear_attention.cu",
    "linear_recurrence/cuda/linear_recurrence.cu",
    "linear_recurrence/cuda/linear_recurrence_mma.cu",
)
#: Sources among them without a kernel of their own, and the launcher header whose kernels they run instead of the
#: kernels' shared header (type_utils.cuh).
ADAPTERS = {"causal_linear_attention/cuda/causal_linear_attention.cu": "linear_recurrence.h"}
#: The op folders' language subfolders (the CPU kernels, CUDA kernels, ONNX Runtime ops and plugins the builds
#: take from there).
NATIVE_FOLDERS = plugins.OP_LANGUAGE_FOLDERS
#: Files the torch binding and the CMake build need, as wheel paths (every plugins/ file and every native file of
#: the op folders is checked too).
REQUIRED = (
    *(f"{OPS}/{name}" for name in KERNEL_FILES),
    f"{OPS}/linear_recurrence/cuda/linear_recurrence_internal.h",
    f"{KERNELS}/src/type_utils.cuh",
    f"{KERNELS}/include/rnnx/kernel_types.h",
    *(f"{OPS}/{op}/cuda/{op}.h" for op in sorted({name.split("/")[0] for name in KERNEL_FILES})),  # launchers
    f"{KERNELS}/CMakeLists.txt",
    f"{KERNELS}/emulation/CMakeLists.txt",
    "rnnx/plugins/__init__.py",
    "rnnx/plugins/__main__.py",
    "rnnx/plugins/CMakeLists.txt",
    "rnnx/plugins/tests/CMakeLists.txt",
    "rnnx/plugins/common/exports.map",
    "rnnx/plugins/common/pluginBase.h",
    f"{OPS}/sru_scan/tensorrt/sruScanPlugin.cpp",
    f"{OPS}/causal_linear_attention/tensorrt/causalLinearAttentionPlugin.cpp",
    "rnnx/plugins/torch/binding.cpp",
    "rnnx/plugins/torch/binding_support.h",
    "rnnx/plugins/torch/libtorch_op_support.h",
    f"{KERNELS}/emulation/include/rnnx_emulation_c_api.h",
    # each op's torch layer (libtorch op, CUDA-extension wrappers), found by the builds' globs
    *(
        f"{OPS}/{op}/torch/{op}_{part}.cpp"
        for op in ("sru_scan", "causal_linear_attention")
        for part in ("torch_op", "binding")
    ),
    "rnnx/plugins/sru_scan/cpu/sru_scan_cpu.cpp",
    "rnnx/plugins/sru_scan/cpu/sru_scan_kernel.h",
    "rnnx/plugins/cpu/vector_math.h",
    "rnnx/plugins/torch/rnnx_torch_ops.cpp",
    "rnnx/plugins/torch/aten_parallel_for.h",
    "rnnx/plugins/linear_recurrence/cpu/linear_recurrence_kernel.h",
    "rnnx/plugins/linear_recurrence/linear_recurrence_constants.h",
    "rnnx/plugins/ort/rnnx_ort_ops.cpp",
    "rnnx/plugins/ort/isa_kernels.h",
    "rnnx/plugins/ort/isa_build.h",
    "rnnx/plugins/ort/op_registry.h",
    "rnnx/plugins/ort/ort_op_support.h",
    f"{OPS}/sru_scan/ort/sru_scan_op.h",
    f"{OPS}/sru_scan/ort/sru_scan_op.cpp",
    f"{OPS}/sru_scan/ort/sru_scan_isa.h",
    f"{OPS}/sru_scan/ort/sru_scan_isa.cpp",
    f"{OPS}/causal_linear_attention/ort/causal_linear_attention_op.h",
)
TENSORRT_CACHE = REPO / ".cache" / "tensorrt"


needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit): cannot compile the kernels")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rnnx wheel, built once per session."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the wheel is installed into (``pip install --no-deps --target``)."""
    target = tmp_path_factory.mktemp("installed") / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "-q", "--target", str(target)]
    result = subprocess.run([*cmd, str(wheel)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return target


def _run_installed(site: Path, code: str, **env: str) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter that imports rnnx from ``site`` (cwd outside the checkout)."""
    environ = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=site.parent, env=environ, capture_output=True, text=True, timeout=600
    )


def _native_op_files() -> list[Path]:
    """Every file of the op folders' native subfolders in the checkout (plugins/<op>/<language>/)."""
    ops = REPO / "plugins"
    return [
        path
        for op in ops.iterdir()
        for name in NATIVE_FOLDERS
        for path in (op / name).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    ]


def test_wheel_ships_the_kernel_and_plugin_sources(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(REQUIRED) - names == set()
    plugin_files = {
        "rnnx/plugins/" + path.relative_to(REPO / "plugins").as_posix()
        for path in (REPO / "plugins").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert plugin_files - names == set()
    op_files = {"rnnx/" + path.relative_to(REPO).as_posix() for path in _native_op_files()}
    assert len(op_files) >= 10
    assert op_files - names == set()


def test_wheel_ships_the_generated_contract(wheel: Path) -> None:
    """The artifact contract's generated files (python3 -m rnnx.runtime.contract.schema --write), as in the checkout:
    the JSON Schemas as package data of rnnx.runtime.contract, the C API's table among the native runtime's sources
    (the JavaScript table lives with runtime/js, which the npm folder ships, not the wheel)."""
    from rnnx.runtime.contract import schema

    archive = zipfile.ZipFile(wheel)
    for path in (schema.METADATA_SCHEMA, schema.STATE_SCHEMA, schema.CPP_TABLES):
        assert archive.read(f"rnnx/runtime/{path}").decode() == (schema.RUNTIME_DIR / path).read_text(), path


def test_wheel_has_no_build_outputs_or_caches(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    banned_parts = {"build", ".cache", "__pycache__", ".pytest_cache"}
    bad = [n for n in names if banned_parts & set(n.split("/")) or n.endswith((".so", ".o", ".pyc"))]
    assert bad == []
    assert "rnnx/runtime/plugins.py" not in names, "rnnx.runtime.plugins moved to rnnx.plugins (no alias)"


def test_installed_copy_resolves_and_has_its_sources(site: Path, tmp_path: Path) -> None:
    code = (
        "import json, rnnx, rnnx.plugins as p, rnnx.models.ops.cuda as c\n"
        "print(json.dumps({'rnnx': list(rnnx.__path__), 'cuda': c.__file__, 'present': c.sources_present(),\n"
        "    'sources': [str(c.BINDING_SOURCE), *map(str, c.KERNEL_SOURCES)], 'include': str(p.KERNELS_INCLUDE_DIR),\n"
        "    'plugins': str(p.SOURCE_DIR), 'repo_root': p.REPO_ROOT and str(p.REPO_ROOT),\n"
        "    'build_dir': str(p.default_build_dir())}))\n"
    )
    result = _run_installed(site, code, XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout.strip().splitlines()[-1])
    root = site.resolve()
    assert Path(info["rnnx"][0]).resolve() == root / "rnnx"
    assert all(root in Path(entry).resolve().parents for entry in [info["rnnx"][0], info["cuda"], info["plugins"]])
    assert info["present"] is True
    assert all(root in Path(path).parents for path in [*info["sources"], info["include"]])
    assert info["repo_root"] is None
    assert Path(info["build_dir"]).parent.parent == tmp_path / "cache" / "rnnx" / "plugins"  # .../<version>/tensorrt-N


def test_installed_kernel_sources_are_the_checkouts(site: Path) -> None:
    kernels = site / KERNELS
    for path in (REPO / "plugins" / "kernels").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            installed = kernels / path.relative_to(REPO / "plugins" / "kernels")
            assert installed.read_bytes() == path.read_bytes(), installed
    for path in _native_op_files():
        installed = site / "rnnx" / path.relative_to(REPO)
        assert installed.read_bytes() == path.read_bytes(), installed


@needs_nvcc
@pytest.mark.parametrize("name", KERNEL_FILES)
def test_installed_kernel_sources_include_only_installed_headers(site: Path, tmp_path: Path, name: str) -> None:
    """``nvcc -M`` on each installed ``.cu`` with only the installed include directories (the launch API and
    the kernels' shared headers): every header it reads resolves, and the rnnx ones are the installed copies
    (none from the checkout)."""
    kernels = site / KERNELS
    includes = [f"-I{kernels / 'include'}", f"-I{site / OPS}", f"-I{kernels / 'src'}"]
    cmd = [NVCC, "-M", "-std=c++17", "-arch=sm_90", *includes, str(site / OPS / name)]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    deps = [Path(d) for d in result.stdout.split(":", 1)[1].replace("\\\n", " ").split()]
    assert deps and deps[0].name == Path(name).name
    ours = [d for d in deps if site.resolve() in d.resolve().parents]
    launcher = f"{Path(name).parent.parent.name}.h"  # <op>/cuda/<op>.h
    reads = {"kernel_types.h", ADAPTERS.get(name, "type_utils.cuh")}
    assert {d.name for d in ours} >= {Path(name).name, launcher, *reads}, ours
    assert not [d for d in deps if REPO.resolve() in d.resolve().parents], "a header resolved to the checkout"


@needs_nvcc
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot configure the plugins")
@pytest.mark.skipif(
    not (TENSORRT_CACHE / "include" / "NvInferRuntime.h").is_file(),
    reason="no TensorRT headers in .cache/tensorrt/include (run `bash scripts/setup.sh`)",
)
def test_installed_plugin_cmake_tree_configures(site: Path, tmp_path: Path) -> None:
    """The plugins' CMake tree configures from the installed copy, library target included (no build)."""
    build = tmp_path / "build"
    cmd = ["cmake", "-S", str(site / "rnnx" / "plugins"), "-B", str(build), f"-DTENSORRT_ROOT={TENSORRT_CACHE}"]
    arch = [
        "-DCMAKE_CUDA_ARCHITECTURES=90-real",
        "-DRNNX_CUDA_ARCHITECTURES=90-real",
        f"-DCMAKE_CUDA_COMPILER={NVCC}",
    ]
    result = subprocess.run([*cmd, *arch], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is missing" not in result.stdout + result.stderr
    assert (build / "CMakeFiles" / "rnnx_trt_plugins.dir").is_dir()
    assert (build / "tests" / "CMakeFiles" / "rnnx_plugin_tests.dir").is_dir()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_installed_copy_builds_the_torch_extension(site: Path, tmp_path: Path) -> None:
    """``rnnx.models.ops.cuda.load()`` JIT-builds the binding from the installed sources (fresh extension dir)."""
    code = (
        "import rnnx.models.ops.cuda as c\n"
        "m = c.load()\n"
        "assert m is not None, c.EXTENSION.error\n"
        "assert hasattr(m, 'sru_scan') and hasattr(m, 'causal_linear_attention'), dir(m)\n"
        "print(m.__file__)\n"
    )
    result = _run_installed(site, code, TORCH_EXTENSIONS_DIR=str(tmp_path / "torch_extensions"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "torch_extensions") in Path(result.stdout.strip().splitlines()[-1]).parents
