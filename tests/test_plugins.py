"""The TensorRT plugin libraries: CMake build, the C++ unit tests (ctest), the plugins against the op
records of models/ops/spec.py (fields, outputs, tensor roles, output types, no output aliasing), and
loading both libraries without TensorRT (ctypes, exported symbols: librnnx_trt_plugins.so for
load_library / trtexec --dynamicPlugins, librnnx_trt_plugins_static.so for plain-dlopen loaders).

Needs cmake and nvcc (CI has both; no GPU and no TensorRT library needed). The build goes to
build/plugins and is incremental, so the CUDA kernels compile once per source change.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rnnx import plugins
from rnnx.models.ops import spec

NVCC = plugins.find_nvcc()

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / "build" / "plugins"


pytestmark = [
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot build the TensorRT plugins"),
    pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit): cannot build the TensorRT plugins"),
    pytest.mark.slow,
]


@pytest.fixture(scope="module")
def build() -> Path:
    library = plugins.build_plugins(BUILD_DIR, quiet=True)
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
        if not attribute.required:
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
    """The load_library library through ctypes in a fresh process: getCreators returns 2, setLoggerFinder
    takes a null finder; the self-registering one loads too (no registry: nothing registered) and has no
    getCreators."""
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
    assert result.stdout.split() == ["2", "True", "False", "False"]


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
    for name, table in (("load_library", symbols), ("self-registering", static_symbols)):
        leaked = [s for s in table if "rnnx" in s or "nvinfer1" in s]
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
    monkeypatch.setattr(plugins, "build_plugins", lambda cmake_args=(): build)
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
    monkeypatch.setattr(plugins, "default_build_dir", lambda: BUILD_DIR)
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
