"""The TensorRT plugin libraries: CMake build, the C++ unit tests (ctest), the plugins against the op
records of runtime/contract/ops.py (fields, outputs, tensor roles, output types, no output aliasing), and
loading both libraries without TensorRT (ctypes, exported symbols: librnnx_trt_plugins.so for
load_library / trtexec --dynamicPlugins, librnnx_trt_plugins_static.so for plain-dlopen loaders).

Needs cmake and nvcc (CI has both; no GPU and no TensorRT library needed). The build goes to
build/plugins/tensorrt-<major of the headers found> (build/plugins/tensorrt-10 in CI, with the 10.14 headers) and is
incremental, so the CUDA kernels compile once per source change; every test module that needs the plugin build
uses this one (BUILD_DIR).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from rnnx import plugins
from rnnx.runtime.contract import ops as spec

NVCC = plugins.find_nvcc()

REPO = Path(__file__).resolve().parent.parent
#: The TensorRT headers a build finds (TENSORRT_ROOT, the system, .cache/tensorrt/include): 10.14 in CI.
HEADERS_VERSION = plugins.headers_tensorrt_version()
HEADERS_MAJOR = HEADERS_VERSION[0] if HEADERS_VERSION is not None else plugins.FALLBACK_TENSORRT_MAJOR
#: The one plugin build the tests share: the default build folder for the headers' major.
BUILD_DIR = REPO / "build" / "plugins" / f"tensorrt-{HEADERS_MAJOR}"


pytestmark = [
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot build the TensorRT plugins"),
    pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit): cannot build the TensorRT plugins"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def build() -> Path:
    library = plugins.build_plugins(BUILD_DIR, quiet=True, tensorrt_major=HEADERS_MAJOR)
    assert library.is_file(), f"{library} was not built"
    return library


#: ctest entries that a test below runs directly (with finer checks on the summary), so ctest skips them.
RUN_DIRECTLY = ("plugin_unit_tests", "plugin_enqueue_emulated", "kernel_emulation_selftest")


def test_ctest_registers_everything_and_the_rest_passes(build: Path) -> None:
    listed = subprocess.run(["ctest", "--test-dir", str(BUILD_DIR), "-N"], capture_output=True, text=True)
    for name in (*RUN_DIRECTLY, "plugin_library_dlopen", "plugin_enqueue_gpu"):
        assert f": {name}\n" in listed.stdout, f"ctest does not register {name}:\n{listed.stdout}"
    exclude = "^(" + "|".join(RUN_DIRECTLY) + ")$"
    cmd = ["ctest", "--test-dir", str(BUILD_DIR), "--output-on-failure", "-E", exclude]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "100% tests passed" in result.stdout and "plugin_library_dlopen" in result.stdout, result.stdout


def _run_summary(executable: Path) -> tuple[subprocess.CompletedProcess, int, int]:
    """Runs a C++ test executable -> (result, passed, failed) from its last line "N passed, N failed"."""
    result = subprocess.run([str(executable)], capture_output=True, text=True, timeout=900)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else "0 passed, 0 failed"
    return result, int(summary.split()[0]), int(summary.split()[2])


def test_unit_test_summary(build: Path) -> None:
    result, passed, failed = _run_summary(BUILD_DIR / "tests" / "rnnx_plugin_tests")
    assert result.returncode == 0 and failed == 0 and passed >= 20, result.stdout


#: The dtype of each dtype rule of the records for fp16 activations, as `--fields` names TensorRT types.
FP16_TYPE_NAMES = {spec.ACTIVATION: "half", spec.STATE: "float"}


@pytest.fixture(scope="module")
def plugin_facts(build: Path) -> dict:
    """``rnnx_plugin_tests --fields``: per creator, its field table and what a plugin instance answers."""
    result = subprocess.run(
        [str(BUILD_DIR / "tests" / "rnnx_plugin_tests"), "--fields"], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


@pytest.mark.parametrize("op", spec.ALL_OPS, ids=lambda op: op.onnx_name)
def test_field_tables_match_spec(plugin_facts: dict, op: spec.OpSpec) -> None:
    """The creators' field names, kinds, defaults and required flags are the op's attribute records."""
    creator = plugin_facts[op.onnx_name]
    assert creator["name"] == op.onnx_name
    assert creator["version"] == spec.PLUGIN_VERSION
    assert creator["namespace"] == spec.PLUGIN_NAMESPACE
    fields = {f["name"]: f for f in creator["fields"]}
    assert list(fields) == list(op.attributes)
    for attribute in op.attribute_records:
        assert fields[attribute.name]["kind"] == attribute.kind, attribute.name
        assert fields[attribute.name]["required"] == attribute.required, attribute.name
        if attribute.required:
            continue
        if attribute.kind == "str":  # a string field (kCHAR): its default string
            assert fields[attribute.name]["default"] == attribute.default, attribute.name
        else:
            assert fields[attribute.name]["default"] == pytest.approx(float(attribute.default), rel=1e-6)
    assert {n for n, f in fields.items() if f["required"]} == op.required_attributes


@pytest.mark.parametrize("op", spec.ALL_OPS, ids=lambda op: op.onnx_name)
def test_plugin_tensors_match_spec(plugin_facts: dict, op: spec.OpSpec) -> None:
    """With all inputs given: the plugin's input count, outputs, the role (dtype rule) of every input and
    output and the output types for fp16 activations are those of the op's record. The plugins declare no
    aliasing: their build capability is IPluginV3OneBuild (version 1, no getAliasedInput), so TensorRT gives
    every output its own buffer; a record's state pairs (``updates``) say which output continues which input,
    and the runtime double-buffers that state (ping-pong) instead of updating it in place."""
    facts = plugin_facts[op.onnx_name]
    assert max(facts["inputCounts"]) == len(op.inputs), facts["inputCounts"]
    assert min(facts["inputCounts"]) >= len(op.inputs) - len(op.optional_inputs), facts["inputCounts"]
    assert facts["nbOutputs"] == len(op.outputs)
    assert facts["inputRoles"] == [t.dtype_rule for t in op.input_records]
    assert facts["outputRoles"] == [t.dtype_rule for t in op.output_records]
    assert facts["outputTypes"] == [FP16_TYPE_NAMES[t.dtype_rule] for t in op.output_records]
    assert "aliases" not in facts
    assert facts["buildInterface"] == "PLUGIN_V3ONE_BUILD 1.0", facts["buildInterface"]
    for state, out in op.state_pairs:  # each state output continues a state input (without aliasing it)
        assert facts["inputRoles"][op.inputs.index(state)] == facts["outputRoles"][op.outputs.index(out)] == "state"


STATIC_LIBRARY = BUILD_DIR / plugins.STATIC_LIBRARY_NAME


def test_both_libraries_are_built(build: Path) -> None:
    """One library per registration mechanism, next to each other."""
    assert build == BUILD_DIR / plugins.LIBRARY_NAME
    assert STATIC_LIBRARY.is_file(), f"{STATIC_LIBRARY} was not built"


def test_library_loads_without_tensorrt(build: Path) -> None:
    """The load_library library through ctypes in a fresh process: getCreators returns one creator per plugin
    (ALL_OPS), setLoggerFinder takes a null finder; the self-registering one loads too (no registry: nothing
    registered) and has no getCreators."""
    code = (
        "import ctypes, sys\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        "lib.getCreators.restype = ctypes.c_void_p\n"
        "lib.getCreators.argtypes = [ctypes.POINTER(ctypes.c_int32)]\n"
        "n = ctypes.c_int32(-1)\n"
        "creators = lib.getCreators(ctypes.byref(n))\n"
        "lib.setLoggerFinder.argtypes = [ctypes.c_void_p]\n"
        "lib.setLoggerFinder(None)\n"
        "static = ctypes.CDLL(sys.argv[2])\n"
        "print(n.value, bool(creators), hasattr(static, 'getCreators'), hasattr(static, 'setLoggerFinder'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(build), str(STATIC_LIBRARY)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(spec.ALL_OPS)), "True", "False", "False"]


def _dynamic_symbols(library: Path) -> tuple[dict[str, str], str, str]:
    """(defined dynamic symbol -> nm type, undefined dynamic symbols, readelf -d) of a shared library."""
    defined = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    symbols = {line.split()[-1]: line.split()[-2] for line in defined.splitlines() if len(line.split()) >= 2}
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return symbols, undefined, needed


def test_exported_symbols(build: Path) -> None:
    """librnnx_trt_plugins.so exports exactly the loadLibrary entry points; librnnx_trt_plugins_static.so
    exports no entry point (it registers itself, so no loader can register it a second time through
    getCreators). Neither needs the TensorRT library."""
    if shutil.which("nm") is None or shutil.which("readelf") is None:
        pytest.skip("binutils (nm, readelf) not found")
    symbols, undefined, needed = _dynamic_symbols(build)
    assert symbols.get("getCreators") == "T"
    assert symbols.get("setLoggerFinder") == "T"
    static_symbols, static_undefined, static_needed = _dynamic_symbols(STATIC_LIBRARY)
    assert "getCreators" not in static_symbols and "setLoggerFinder" not in static_symbols
    for table in (symbols, static_symbols):  # both record the TensorRT major they were compiled against
        assert table.get(plugins.TENSORRT_MAJOR_SYMBOL) == "T" and table.get(plugins.TENSORRT_VERSION_SYMBOL) == "T"
    version_symbols = {plugins.TENSORRT_MAJOR_SYMBOL, plugins.TENSORRT_VERSION_SYMBOL}
    for name, table in (("load_library", symbols), ("self-registering", static_symbols)):
        leaked = [s for s in table if ("rnnx" in s or "nvinfer1" in s) and s not in version_symbols]
        assert not leaked, f"C++ symbols leak from the {name} library: {leaked[:10]}"
    for text in (undefined, static_undefined):
        assert "getPluginRegistry" not in text and "nvinfer" not in text.lower()
    assert "libnvinfer" not in needed and "libnvinfer" not in static_needed


def test_plugin_library_path_error_names_the_build_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(plugins.LIBRARY_ENV, raising=False)
    monkeypatch.delenv(plugins.STATIC_LIBRARY_ENV, raising=False)
    for kind in plugins.LIBRARY_KINDS:
        with pytest.raises(plugins.PluginLibraryNotFound, match="python -m rnnx.plugins"):
            plugins.plugin_library_path(tmp_path, kind=kind)
    with pytest.raises(ValueError, match="unknown plugin library kind 'static'"):
        plugins.plugin_library_path(tmp_path, kind="static")


def test_plugin_library_path_finds_the_build(build: Path, monkeypatch) -> None:
    monkeypatch.delenv(plugins.LIBRARY_ENV, raising=False)
    monkeypatch.delenv(plugins.STATIC_LIBRARY_ENV, raising=False)
    assert plugins.plugin_library_path(BUILD_DIR) == build
    assert plugins.plugin_library_path(BUILD_DIR, kind="load_library") == build
    assert plugins.plugin_library_path(BUILD_DIR, kind="dlopen") == STATIC_LIBRARY
    monkeypatch.setenv(plugins.LIBRARY_ENV, str(build))
    monkeypatch.setenv(plugins.STATIC_LIBRARY_ENV, str(STATIC_LIBRARY))
    assert plugins.plugin_library_path() == build
    assert plugins.plugin_library_path(kind="dlopen") == STATIC_LIBRARY


def test_main_prints_the_library_polygraphy_needs(build: Path, monkeypatch, capsys) -> None:
    """``python -m rnnx.plugins`` prints the self-registering library (polygraphy --plugins, trtexec
    --staticPlugins); ``--kind load_library`` the other."""
    monkeypatch.delenv(plugins.LIBRARY_ENV, raising=False)
    monkeypatch.delenv(plugins.STATIC_LIBRARY_ENV, raising=False)
    monkeypatch.setattr(plugins, "build_plugins", lambda cmake_args=(), tensorrt_major=None: build)
    monkeypatch.setattr(plugins, "missing_build_message", lambda major, cmake_args=(): None)
    assert plugins.main([]) == 0
    assert capsys.readouterr().out.strip() == str(STATIC_LIBRARY)
    for args in (["--kind", "load_library"], ["--kind=load_library"]):
        assert plugins.main(args) == 0
        assert capsys.readouterr().out.strip() == str(build)
    assert plugins.main(["--kind", "static"]) == 2
    assert "--kind must be one of" in capsys.readouterr().err


def test_builder_loads_the_load_library_library(build: Path, monkeypatch) -> None:
    """The engine builder hands IPluginRegistry.load_library the library that exports getCreators."""
    from rnnx.runtime.tensorrt.builder import default_plugin_library

    monkeypatch.delenv(plugins.LIBRARY_ENV, raising=False)
    monkeypatch.setattr(plugins, "default_build_dir", lambda major=None: BUILD_DIR)
    assert default_plugin_library() == build


# ---------------------------------------------------------------------------------------------
# plugin_enqueue_gpu: enqueue on a real device with the real kernels (plugins/tests/enqueueGpuTests.cpp)

GPU_ENQUEUE_TEST = BUILD_DIR / "tests" / "plugin_enqueue_gpu"
GPU_SKIP_CODE = 77  # SKIP_RETURN_CODE of the ctest entry


def _cuda_device_listed() -> bool:
    """Whether nvidia-smi lists a GPU (independent of the test binary's own probe)."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and "GPU " in result.stdout


def test_gpu_enqueue_test_is_built_and_skips_without_a_device(build: Path) -> None:
    """The GPU enqueue test compiles with the normal build; with no CUDA device it exits 77 with a SKIP line."""
    assert GPU_ENQUEUE_TEST.is_file(), f"{GPU_ENQUEUE_TEST} was not built"
    if _cuda_device_listed():
        pytest.skip("a CUDA device is present: test_gpu_enqueue_matches_reference runs the GPU path")
    result = subprocess.run([str(GPU_ENQUEUE_TEST)], capture_output=True, text=True, timeout=120)
    assert result.returncode == GPU_SKIP_CODE, result.stdout + result.stderr
    assert result.stdout.startswith("SKIP plugin_enqueue_gpu: no CUDA device"), result.stdout


def test_ctest_reports_the_gpu_enqueue_test_skipped_without_a_device(build: Path) -> None:
    if _cuda_device_listed():
        pytest.skip("a CUDA device is present: the ctest entry runs instead of skipping")
    result = subprocess.run(
        ["ctest", "--test-dir", str(BUILD_DIR), "-R", "^plugin_enqueue_gpu$", "--output-on-failure"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "plugin_enqueue_gpu" in result.stdout and "Skipped" in result.stdout, result.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_device_listed(), reason="needs a CUDA device (nvidia-smi lists none)")
def test_gpu_enqueue_matches_reference(build: Path) -> None:
    """Both plugins' enqueue on device buffers against the C++ reference: random shapes, fp32/fp16/bf16,
    mask_pad (both ops), both directions, k = 3/4, attention heads packed batch-first and time-major, head dims
    32/64/128, prefill-then-step with ping-pong state."""
    result, passed, failed = _run_summary(GPU_ENQUEUE_TEST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert failed == 0 and passed >= 12, result.stdout


# ---------------------------------------------------------------------------------------------
# The same enqueue test and the emulation's self-tests on the CUDA host emulation (plugins/kernels/emulation)

EMULATED_ENQUEUE_TEST = BUILD_DIR / "tests" / "plugin_enqueue_emulated"
EMULATION_SELFTEST = BUILD_DIR / "tests" / "kernel_emulation_selftest"


def test_enqueue_on_the_emulation_matches_reference(build: Path) -> None:
    """enqueueGpuTests.cpp linked with the emulated kernels and runtime (AddressSanitizer + UBSan where the
    compiler has them): the plugins' real enqueue code runs the real kernel sources against the C++
    reference of docs/ops.md, all 12 cases, no GPU."""
    result, passed, failed = _run_summary(EMULATED_ENQUEUE_TEST)
    assert result.returncode == 0 and failed == 0 and passed >= 12, result.stdout + result.stderr
    assert "device 0: rnnx CUDA host emulation" in result.stdout, result.stdout
    assert "AddressSanitizer" not in result.stderr, result.stderr


def test_emulation_self_tests(build: Path) -> None:
    """The emulation reports the defects it claims to catch (races, divergent warps, misaligned wmma, ...)."""
    result, passed, failed = _run_summary(EMULATION_SELFTEST)
    assert result.returncode == 0 and failed == 0 and passed >= 8, result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------
# One build per TensorRT major: the libraries record the headers' major; rnnx.plugins reads and checks it

#: A TensorRT version of another major than the headers' (what a process with the other TensorRT reports).
OTHER_MAJOR = HEADERS_MAJOR + 1 if HEADERS_MAJOR != 11 else 10
OTHER_VERSION = f"{OTHER_MAJOR}.4.0.106"


def test_both_libraries_export_the_headers_major(build: Path) -> None:
    """rnnx_trt_plugins_tensorrt_major() / _version() of the load_library library, called through ctypes in a fresh
    process (loading it registers nothing), are the headers' NV_TENSORRT_MAJOR and major.minor.patch; the
    self-registering one (not loaded: it would register itself) exports both too (its dynamic symbol table)."""
    assert HEADERS_VERSION is not None, "no TensorRT headers found, yet the plugins built"
    code = (
        "import ctypes, sys\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        f"major = lib.{plugins.TENSORRT_MAJOR_SYMBOL}\n"
        "major.restype = ctypes.c_int32\n"
        f"version = lib.{plugins.TENSORRT_VERSION_SYMBOL}\n"
        "version.restype = ctypes.c_char_p\n"
        "print(major(), version().decode())\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(build)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(HEADERS_MAJOR), ".".join(map(str, HEADERS_VERSION))]
    if shutil.which("nm") is None:
        pytest.skip("binutils (nm) not found")
    static_symbols = _dynamic_symbols(STATIC_LIBRARY)[0]
    assert static_symbols.get(plugins.TENSORRT_MAJOR_SYMBOL) == "T", sorted(static_symbols)
    assert static_symbols.get(plugins.TENSORRT_VERSION_SYMBOL) == "T", sorted(static_symbols)


def test_library_tensorrt_version_reads_the_marker_without_loading(build: Path) -> None:
    """Both files carry "rnnx-trt-plugins:tensorrt-headers=<headers' version>" (read from their bytes)."""
    for library in (build, STATIC_LIBRARY):
        assert plugins.library_tensorrt_version(library) == HEADERS_VERSION, library
        text = f"rnnx-trt-plugins:tensorrt-headers={'.'.join(map(str, HEADERS_VERSION))}\0".encode()
        assert text in library.read_bytes(), library


def test_check_library_major_refuses_another_major(build: Path) -> None:
    """A library of the headers' major passes for TensorRT of that major; for TensorRT of another major it is
    refused in one line naming both majors and the command that builds the right one."""
    for library in (build, STATIC_LIBRARY):
        plugins.check_library_major(library, f"{HEADERS_MAJOR}.14.1.48")
        with pytest.raises(plugins.PluginLibraryMismatch) as refused:
            plugins.check_library_major(library, OTHER_VERSION)
        message = str(refused.value)
        assert "\n" not in message, message
        assert message.startswith(f"{library} was built against TensorRT {HEADERS_MAJOR} headers "), message
        assert f"but is being loaded into TensorRT {OTHER_VERSION}" in message, message
        assert (
            f"`TENSORRT_ROOT=<TensorRT {OTHER_MAJOR} dir> python -m rnnx.plugins --major {OTHER_MAJOR}`" in message
        ), message
        assert isinstance(refused.value, RuntimeError)


def test_library_without_a_marker_gets_the_rebuild_line(build: Path, tmp_path: Path) -> None:
    """A library built before the marker existed: the built library with its marker overwritten (same size)."""
    data = build.read_bytes()
    assert data.count(plugins.TENSORRT_HEADERS_MARKER) == 1
    old = tmp_path / plugins.LIBRARY_NAME
    old.write_bytes(data.replace(plugins.TENSORRT_HEADERS_MARKER, b"x" * len(plugins.TENSORRT_HEADERS_MARKER)))
    assert plugins.library_tensorrt_version(old) is None
    for version in (f"{HEADERS_MAJOR}.14.1.48", OTHER_VERSION):
        with pytest.raises(plugins.PluginLibraryMismatch, match="built before rnnx recorded its TensorRT major") as e:
            plugins.check_library_major(old, version)
        assert "\n" not in str(e.value) and f"TENSORRT_ROOT=<TensorRT {version.split('.')[0]} dir>" in str(e.value)
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    assert plugins.library_tensorrt_version(empty) is None


#: Where a source file may live: code and build files (docs and the changelog may name a soname as an example).
SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".py", ".sh", ".cmake", ".map", ".js", ".mjs"}
SKIPPED_DIRS = {"build", "node_modules", "__pycache__"}


def _source_files() -> list[Path]:
    files = []
    for root, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        files += [Path(root) / n for n in names if Path(n).suffix in SOURCE_SUFFIXES or n == "CMakeLists.txt"]
    return files


def test_the_tensorrt_soname_follows_the_headers_major(build: Path) -> None:
    """The libraries look for an already loaded libnvinfer.so.<headers' major> (RTLD_NOLOAD): that string is in
    both, and no source file names TensorRT 10's soname any more (it comes from NV_TENSORRT_MAJOR)."""
    for library in (build, STATIC_LIBRARY):
        assert f"libnvinfer.so.{HEADERS_MAJOR}\0".encode() in library.read_bytes(), library
    pinned = "libnvinfer.so." + "10"  # split so that this file does not name it either
    sources = _source_files()
    assert len(sources) > 50 and REPO / "plugins" / "common" / "pluginCommon.cpp" in sources
    naming = [str(p.relative_to(REPO)) for p in sources if pinned in p.read_text(errors="replace")]
    assert naming == [], f"source files naming {pinned}: {naming}"


def _stand_in_headers(folder: Path, version_h: str) -> Path:
    """A TensorRT include folder with a stand-in NvInferVersion.h (no TensorRT 11 / 8 headers here; these are
    not TensorRT's files, only the #defines the version is read from) and an empty NvInferRuntime.h."""
    include = folder / "include"
    include.mkdir(parents=True)
    (include / "NvInferVersion.h").write_text(version_h)
    (include / "NvInferRuntime.h").write_text("// stand-in: only its presence is looked for\n")
    return folder


#: The 10.x / 11.x layout of NvInferVersion.h (NV_TENSORRT_MAJOR names TRT_MAJOR_ENTERPRISE), as a stand-in.
STAND_IN_11 = (
    "#define TRT_MAJOR_ENTERPRISE 11\n#define TRT_MINOR_ENTERPRISE 1\n#define TRT_PATCH_ENTERPRISE 0\n"
    "#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE //!< TensorRT major version.\n"
    "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE //!< TensorRT minor version.\n"
    "#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE //!< TensorRT patch version.\n"
)
#: The older layout (plain numbers), as a stand-in.
STAND_IN_8 = "#define NV_TENSORRT_MAJOR 8 //!< major\n#define NV_TENSORRT_MINOR 6\n#define NV_TENSORRT_PATCH 1\n"


def test_default_build_dir_follows_the_target_major(tmp_path: Path, monkeypatch) -> None:
    """build/plugins/tensorrt-<major>: the installed TensorRT's major wins, else the headers' (TENSORRT_ROOT first)."""
    assert plugins.default_build_dir(11) == REPO / "build" / "plugins" / "tensorrt-11"
    assert plugins.default_build_dir(10) == REPO / "build" / "plugins" / "tensorrt-10"
    monkeypatch.setattr(plugins, "target_tensorrt_major", lambda: 12)
    assert plugins.default_build_dir() == REPO / "build" / "plugins" / "tensorrt-12"
    monkeypatch.undo()

    monkeypatch.setattr(plugins, "installed_tensorrt_version", lambda: None)
    monkeypatch.setenv("TENSORRT_ROOT", str(_stand_in_headers(tmp_path / "trt11", STAND_IN_11)))
    assert plugins.headers_tensorrt_version() == (11, 1, 0)
    assert plugins.find_tensorrt_headers() == tmp_path / "trt11" / "include"
    assert plugins.target_tensorrt_major() == 11
    assert plugins.default_build_dir() == REPO / "build" / "plugins" / "tensorrt-11"
    monkeypatch.setenv("TENSORRT_ROOT", str(_stand_in_headers(tmp_path / "trt8", STAND_IN_8)))
    assert plugins.headers_tensorrt_version() == (8, 6, 1)
    assert plugins.default_build_dir() == REPO / "build" / "plugins" / "tensorrt-8"
    monkeypatch.setenv("TENSORRT_ROOT", str(tmp_path / "nothing"))
    assert plugins.headers_tensorrt_version() is None
    assert plugins.target_tensorrt_major() == plugins.FALLBACK_TENSORRT_MAJOR

    monkeypatch.setattr(plugins, "installed_tensorrt_version", lambda: "11.4.0.106")
    assert plugins.target_tensorrt_major() == 11  # the installed TensorRT over the headers
    assert plugins.default_build_dir() == REPO / "build" / "plugins" / "tensorrt-11"


def test_the_real_header_layouts_parse() -> None:
    """Whatever headers this machine has (10.14 from setup.sh in CI) give the version CMake prints."""
    folder = plugins.find_tensorrt_headers()
    if folder is None:
        pytest.skip("no TensorRT headers found (bash scripts/setup.sh fetches the 10.14 ones)")
    text = (folder / "NvInferVersion.h").read_text()
    major = re.search(r"#define TRT_MAJOR_ENTERPRISE (\d+)", text) or re.search(
        r"#define NV_TENSORRT_MAJOR (\d+)", text
    )
    assert major is not None
    assert plugins.headers_tensorrt_version() == HEADERS_VERSION and HEADERS_VERSION[0] == int(major.group(1))


def test_installed_tensorrt_version_reads_distribution_metadata(monkeypatch) -> None:
    """The ``tensorrt`` distribution's version, else a ``tensorrt-cuNN`` style one's (bindings first). Stand-in
    metadata: no TensorRT wheel is installed here."""
    import importlib.metadata as metadata

    class Dist:
        def __init__(self, name: str, version: str) -> None:
            self.metadata = {"Name": name}
            self.version = version

    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    def check(dists: list, expected) -> None:
        monkeypatch.setattr(metadata, "distributions", lambda: iter(dists))
        plugins.installed_tensorrt_version.cache_clear()
        assert plugins.installed_tensorrt_version() == expected

    try:
        monkeypatch.setattr(metadata, "version", missing)
        check([Dist("numpy", "2.0"), Dist("tensorrt-cu12-libs", "10.14.1.48")], "10.14.1.48")
        check([Dist("tensorrt_cu13_libs", "11.1.0.106"), Dist("tensorrt_cu13_bindings", "11.4.0.106")], "11.4.0.106")
        check([Dist("tensorrt-lean-cu12", "10.0"), Dist("onnx-tensorrt", "1.0")], None)
        monkeypatch.setattr(metadata, "version", lambda name: "11.4.0.106" if name == "tensorrt" else missing(name))
        check([Dist("tensorrt-cu12", "10.14.1.48")], "11.4.0.106")
        assert plugins.tensorrt_major_of("11.4.0.106") == 11
        with pytest.raises(ValueError, match="not a TensorRT version"):
            plugins.tensorrt_major_of("unknown")
    finally:
        monkeypatch.undo()
        plugins.installed_tensorrt_version.cache_clear()


def _configure(build: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    cmd = ["cmake", "-S", str(plugins.SOURCE_DIR), "-B", str(build), f"-DCMAKE_CUDA_COMPILER={NVCC}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def test_cmake_refuses_headers_of_another_major(tmp_path: Path) -> None:
    """Configure only (fast): with -DRNNX_TENSORRT_MAJOR of another major than the headers found, CMake fails
    with one message naming both and what to set; it prints the headers' version it found (the real headers, and
    stand-in ones of the plain-number layout through TENSORRT_ROOT)."""
    assert HEADERS_VERSION is not None
    env = {k: v for k, v in os.environ.items() if k != "TENSORRT_ROOT"}
    version = ".".join(map(str, HEADERS_VERSION))
    refused = _configure(tmp_path / "mismatch", f"-DRNNX_TENSORRT_MAJOR={OTHER_MAJOR}", env=env)
    output = " ".join((refused.stdout + refused.stderr).split())  # CMake wraps long messages
    assert refused.returncode != 0, output
    assert f"rnnx plugins: TensorRT {version} headers in" in output, output
    assert (
        f"are {version} but this build is for TensorRT {OTHER_MAJOR}: set TENSORRT_ROOT to TensorRT "
        f"{OTHER_MAJOR}'s folder" in output
    ), output
    root = _stand_in_headers(tmp_path / "trt8", STAND_IN_8)
    accepted = _configure(tmp_path / "match", "-DRNNX_TENSORRT_MAJOR=8", env={**env, "TENSORRT_ROOT": str(root)})
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert f"rnnx plugins: TensorRT 8.6.1 headers in {root / 'include'}" in accepted.stdout, accepted.stdout


def test_main_names_the_missing_build_of_the_installed_major(tmp_path: Path, monkeypatch, capsys) -> None:
    """TensorRT of another major installed and only the headers' major found: ``python -m rnnx.plugins`` builds
    nothing and says which build is missing and the command that makes it."""
    assert HEADERS_VERSION is not None
    monkeypatch.delenv("TENSORRT_ROOT", raising=False)
    monkeypatch.setattr(plugins, "installed_tensorrt_version", lambda: OTHER_VERSION)
    monkeypatch.setattr(plugins, "default_build_dir", lambda major=None: tmp_path / f"tensorrt-{major}")

    def no_build(**kwargs):
        raise AssertionError("must not build")

    monkeypatch.setattr(plugins, "build_plugins", no_build)
    assert plugins.main([]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert f"the rnnx plugins for TensorRT {OTHER_MAJOR} ({tmp_path / f'tensorrt-{OTHER_MAJOR}'}) are not built" in err
    assert (
        f"TensorRT {HEADERS_MAJOR})" in err
        and f"`TENSORRT_ROOT=<TensorRT {OTHER_MAJOR} dir> python -m rnnx.plugins --major {OTHER_MAJOR}`" in err
    )


def test_main_builds_for_the_major_it_is_told(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--major N`` builds for TensorRT N whatever is installed; without it and without TensorRT installed, the
    major is that of the headers ``-DTENSORRT_ROOT=`` names (the CMake argument counts, not only the environment);
    a --major that is not a number is refused (exit 2). build_plugins is replaced by a recorder (no build)."""
    built: list[Optional[int]] = []

    def record(cmake_args=(), tensorrt_major=None):
        built.append(tensorrt_major)
        return tmp_path / "lib.so"

    monkeypatch.setattr(plugins, "build_plugins", record)
    monkeypatch.setattr(plugins, "plugin_library_path", lambda build_dir=None, kind="": tmp_path / kind)
    monkeypatch.setattr(plugins, "missing_build_message", lambda major, cmake_args=(): None)
    monkeypatch.setattr(plugins, "installed_tensorrt_version", lambda: OTHER_VERSION)
    assert plugins.main(["--major", "11"]) == 0 and built[-1] == 11
    assert plugins.main(["--kind=load_library", "--major=10"]) == 0 and built[-1] == 10
    assert capsys.readouterr().out.splitlines()[-1] == str(tmp_path / "load_library")
    monkeypatch.setattr(plugins, "installed_tensorrt_version", lambda: None)
    monkeypatch.delenv("TENSORRT_ROOT", raising=False)
    root = _stand_in_headers(tmp_path / "trt8", STAND_IN_8)
    assert plugins.main([f"-DTENSORRT_ROOT={root}"]) == 0 and built[-1] == 8
    assert plugins.main(["--major", "eleven"]) == 2
    assert "--major must be a TensorRT major" in capsys.readouterr().err


def test_native_runtime_takes_tensorrt_root_as_cmake_does(tmp_path: Path, monkeypatch) -> None:
    """The C API's build takes ``$TENSORRT_ROOT`` or its include/ as the plugin build does, and refuses a
    TENSORRT_ROOT without headers instead of building against other headers (stand-in header folders)."""
    from rnnx.plugins import native_runtime as native

    root = _stand_in_headers(tmp_path / "trt8", STAND_IN_8)
    monkeypatch.setenv("TENSORRT_ROOT", str(root))
    assert native._tensorrt_include() == root / "include"
    monkeypatch.setenv("TENSORRT_ROOT", str(root / "include"))
    assert native._tensorrt_include() == root / "include"
    monkeypatch.setenv("TENSORRT_ROOT", str(tmp_path / "empty"))
    with pytest.raises(native.NativeBuildError, match="TENSORRT_ROOT=.*no NvInferRuntime.h"):
        native._tensorrt_include()


def test_cmake_takes_tensorrt_root_from_the_command_line_over_the_environment(tmp_path: Path) -> None:
    """Configure only: -DTENSORRT_ROOT wins over the environment variable (on a first configure and on a later one
    that names it again); a later configure without it keeps the cached value until the environment variable
    changes, which then wins (stand-in header folders of two versions)."""
    eight = _stand_in_headers(tmp_path / "trt8", STAND_IN_8)
    eleven = _stand_in_headers(tmp_path / "trt11", STAND_IN_11)
    build = tmp_path / "build"

    def headers_found(*args: str, root: Path) -> str:
        env = {**os.environ, "TENSORRT_ROOT": str(root)}
        result = _configure(build, *args, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        return re.search(r"rnnx plugins: TensorRT (\S+) headers in", result.stdout).group(1)

    assert headers_found(f"-DTENSORRT_ROOT={eight}", root=eleven) == "8.6.1"  # first configure: -D wins
    assert headers_found(root=eleven) == "8.6.1"  # the cached -D value stays while the environment is unchanged
    assert headers_found(root=tmp_path / "trt11" / "include" / "..") == "11.1.0"  # a changed environment wins
    assert headers_found(f"-DTENSORRT_ROOT={eight}", root=tmp_path / "trt11" / "include" / "..") == "8.6.1"
