"""The native runtime (issue 19): ``librnnx_runtime`` and its C API, against ``rnnx.runtime`` (Python).

Real parts only: the library built with CMake against the onnxruntime wheel's ``libonnxruntime``, real exports,
and the programs ``rnnx-generate`` (the C++ example) and ``rnnx_check`` (a C test driver), also built with
AddressSanitizer + UndefinedBehaviorSanitizer (every program run below that says ``asan`` runs that build;
a sanitizer report fails the run). Both runtimes register rnnx's ONNX Runtime op library.

* Greedy tokens from the C API equal ``Session.generate_all`` for both demo exports and a user-built language
  model (a softmax SRU++ LM, whose KV cache grows), batched prompts of different lengths.
* Seeded sampled tokens (temperature, top-k, top-p) equal ``Session.generate_all``'s for the same seed (numpy's
  PCG64 in both), on both demo exports at batch 1 and 3, and change with the seed.
* A state saved by Python loads in C++ and one saved by C++ loads in Python, and both continue as the saver
  would; an ``.npz`` state of rnnx before safetensors still loads in Python. A conversation parked by the
  Python scheduler resumes in the C example of docs/embedding.md, and back in Python, equal to one piece.
* Errors are a status and a message, never a crash: a missing directory, a changed ``model.onnx``, a token out
  of range, a batch mismatch, a truncated or foreign state file, the TensorRT backend where TensorRT is absent.
* Four threads generating on one model at once give each what it gets alone; a fork continues independently.
* The TensorRT backend without TensorRT (NOT RUN here: no TensorRT, no GPU): its plugin loader (a stand-in
  registry) loads a library once per process, skips creators registered by someone else and refuses a plugin
  library built for another TensorRT major (plugin library doubles); its engine check refuses optimization
  profiles that are not decode then prefill (over given ranges); it looks for libnvinfer in
  ``$RNNX_TENSORRT_LIBS`` first, then the pip wheels beside the library, serves 10.7 to 10.x with TensorRT 10
  headers (N.x with N's) and refuses any other version with one line; it selects the device named by
  ``options.device`` (test doubles of libnvinfer and libcudart, compiled here, stand for the real ones).
"""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from prompt_cases import PARSED, REFUSED, expected_error

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS
from rnnx.plugins import library_tensorrt_version
from rnnx.plugins import native_runtime as native
from rnnx.runtime import ortops

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None, reason="cmake not found: cannot build the native runtime"
)
PROMPTS = [[1, 2, 3, 4, 10], [5, 6, 10], [7, 8, 9, 1, 2, 3, 10]]
ASAN_ENV = {"ASAN_OPTIONS": "abort_on_error=0:halt_on_error=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


@pytest.fixture(scope="module")
def builds() -> dict[str, Path]:
    if not (ortops.headers_dir() / "onnxruntime_cxx_api.h").is_file():
        pytest.fail(f"ONNX Runtime headers missing in {ortops.headers_dir()}: run scripts/setup.sh")
    return {"release": native.build(), "asan": native.build("address,undefined")}


@pytest.fixture(scope="module")
def ops() -> str:
    return str(ortops.build())


@pytest.fixture(scope="module")
def exports(demo_exports, softmax_srupp_export) -> dict[str, Path]:
    """The session's onnxruntime demo exports and softmax SRU++ (a growing KV cache), read only here."""
    out = {name: demo_exports[(name, "onnxruntime")] for name in DEMO_CHECKPOINTS}
    out["own_softmax_srupp"] = softmax_srupp_export
    return out


def run(
    program: Path, *args: str, asan: bool = False, env: Optional[dict[str, str]] = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, **(ASAN_ENV if asan else {}), **(env or {})}
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=300, env=env)


def generate_cpp(
    builds, directory: Path, ops: str, *options: str, asan: bool = False, prompts: list[list[int]] = PROMPTS
) -> list[list[int]]:
    prompts = [a for p in prompts for a in ("--prompt", " ".join(map(str, p)))] if "--load-state" not in options else []
    result = run(builds["asan" if asan else "release"] / "rnnx-generate", str(directory), *prompts, "--ort-ops", ops,
                 *options, asan=asan)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line.split(":", 1)[1].split() for line in result.stdout.splitlines() if line.startswith("row ")]
    return [[int(t) for t in row] for row in rows]


def session(directory: Path) -> rt.Session:
    return rt.load(directory, backend="onnxruntime", native_ops=True)


@pytest.mark.parametrize("name", [*DEMO_CHECKPOINTS, "own_softmax_srupp"])
def test_greedy_tokens_equal_the_python_runtime(builds, ops, exports, name) -> None:
    want = session(exports[name]).generate_all(PROMPTS, 12, temperature=0)
    assert generate_cpp(builds, exports[name], ops, "--max-new-tokens", "12") == want
    assert generate_cpp(builds, exports[name], ops, "--max-new-tokens", "12", asan=True) == want
    stop = want[0][2]
    stopped = generate_cpp(builds, exports[name], ops, "--max-new-tokens", "12", "--stop", str(stop))
    assert stopped == session(exports[name]).generate_all(PROMPTS, 12, temperature=0, stop_tokens=[stop])


def test_prompts_follow_the_shared_syntax(builds, ops, exports) -> None:
    """rnnx-generate reads tests/prompt_cases.py's prompts as Python and JavaScript do (docs/embedding.md,
    "Prompts"): its parsed prompts, one row each, generate what Python generates from their ids; each refused
    prompt exits 2 with a line naming the bad piece."""
    directory = exports[DEMO_CHECKPOINTS[0]]
    texts = [a for text, _ in PARSED for a in ("--prompt", text)]
    result = run(builds["release"] / "rnnx-generate", str(directory), *texts, "--ort-ops", ops, "--max-new-tokens", "4")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout.splitlines()
    rows = [[int(t) for t in line.split(":", 1)[1].split()] for line in out if line.startswith("row ")]
    assert rows == session(directory).generate_all([ids for _, ids in PARSED], 4, temperature=0)
    for text, piece in REFUSED:
        result = run(builds["release"] / "rnnx-generate", str(directory), "--prompt", text, "--ort-ops", ops)
        assert result.returncode == 2 and expected_error(text, piece) in result.stderr, (text, result.stderr)


#: Seeded sampling with every filter on; float32-exact values, as the C API's rnnx_sampling holds floats.
SAMPLED = {"temperature": 1.5, "top_k": 6, "top_p": 0.875}


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
@pytest.mark.parametrize("batch", [1, 3])
def test_seeded_tokens_equal_the_python_runtime(builds, ops, exports, name, batch) -> None:
    """The same seed gives the C API the tokens Python draws (numpy's PCG64 in both, docs/sampling.md); another
    seed gives others."""
    options = [a for key, value in SAMPLED.items() for a in (f"--{key.replace('_', '-')}", str(value))]
    prompts = PROMPTS[:batch]
    want = session(exports[name]).generate_all(prompts, 16, **SAMPLED, seed=7)
    assert want != session(exports[name]).generate_all(prompts, 16, temperature=0)
    got = generate_cpp(builds, exports[name], ops, "--max-new-tokens", "16", *options, "--seed", "7", prompts=prompts)
    assert got == want
    if batch == 3:
        asan = generate_cpp(builds, exports[name], ops, "--max-new-tokens", "16", *options, "--seed", "8",
                            prompts=prompts, asan=True)  # fmt: skip
        assert asan == session(exports[name]).generate_all(prompts, 16, **SAMPLED, seed=8) != want


def test_state_files_cross_languages(builds, ops, exports, tmp_path: Path) -> None:
    directory = exports["own_softmax_srupp"]  # a growing KV cache: the past_length axis crosses too
    py = session(directory)
    state = py.prefill(PROMPTS)
    state.save(tmp_path / "python.safetensors")
    expected = py.generate_all(PROMPTS, 5, temperature=0)
    assert generate_cpp(builds, directory, ops, "--load-state", str(tmp_path / "python.safetensors"),
                        "--max-new-tokens", "5", asan=True) == expected  # fmt: skip

    cpp_tokens = generate_cpp(builds, directory, ops, "--max-new-tokens", "4", "--save-state",
                              str(tmp_path / "cpp.safetensors"))  # fmt: skip
    loaded = py.load_state(tmp_path / "cpp.safetensors")
    assert loaded.batch == 3 and loaded.past_length == 7 + 3
    np.testing.assert_array_equal(np.argmax(loaded.last_logits, -1), [row[3] for row in cpp_tokens])
    continued = []
    tokens = np.argmax(loaded.last_logits, -1)
    for _ in range(3):
        tokens = np.argmax(py.step(tokens, loaded), -1)
        continued.append(tokens.tolist())
    cpp_continued = generate_cpp(builds, directory, ops, "--load-state", str(tmp_path / "cpp.safetensors"),
                                 "--max-new-tokens", "4")  # fmt: skip
    assert [row[1:] for row in cpp_continued] == [list(r) for r in zip(*continued)]


def test_an_old_npz_state_still_loads(exports, tmp_path: Path) -> None:
    py = session(exports["linear_transformer_copy"])
    state = py.prefill([[1, 2, 10]])
    header = {"format": "rnnx-state", "format_version": 1, "names": py.backend.state_names, "batch": 1,
              "past_length": state.past_length, "signature": py.backend.signature,
              "backend": "onnxruntime"}  # fmt: skip
    arrays = {f"state/{k}": v for k, v in state.to_host().items()}
    arrays["__rnnx_state__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(tmp_path / "old.npz", last_logits=state.last_logits, **arrays)
    loaded = py.load_state(tmp_path / "old.npz")
    np.testing.assert_array_equal(py.step([3], loaded), py.step([3], state))


def check(builds, *args: str, env: Optional[dict[str, str]] = None) -> str:
    result = run(builds["asan"] / "rnnx_check", *args, asan=True, env=env)
    assert result.returncode in (0, 1) and "Sanitizer" not in result.stderr, result.stderr[-3000:]
    return result.stdout.strip()


def test_bad_input_is_a_status_and_a_message(builds, ops, exports, tmp_path: Path) -> None:
    directory = exports["srupp_linear_copy"]
    assert (
        check(builds, "open", str(tmp_path / "missing"))
        == f"status 2: {tmp_path / 'missing'}: no such export directory"
    )
    changed = tmp_path / "changed"
    shutil.copytree(directory, changed)
    with open(changed / "model.onnx", "ab") as f:
        f.write(b"\0")
    assert check(builds, "open", str(changed)) == (
        f"status 3: {changed}/model.onnx: sha256 does not match rnnx.json; the model was replaced or is corrupt"
    )
    assert (
        check(builds, "token", str(directory), ops) == "status 1: token 17 at row 0 position 1 is out of range [0, 12)"
    )
    assert check(builds, "batch", str(directory), ops).splitlines() == [
        "status 1: batch mismatch: the state has 2 rows, got 1",
        "status 1: batch mismatch: the sampler has 3 rows, the state 2",
    ]
    session(directory).prefill(PROMPTS).save(tmp_path / "state.safetensors")
    data = (tmp_path / "state.safetensors").read_bytes()
    (tmp_path / "truncated.safetensors").write_bytes(data[: len(data) // 2])
    out = check(builds, "load", str(directory), ops, str(tmp_path / "truncated.safetensors"))
    assert out.startswith("status 4: ") and "truncated" in out
    out = check(builds, "load", str(exports["linear_transformer_copy"]), ops, str(tmp_path / "state.safetensors"))
    assert out.startswith("status 4: ") and "state was saved from a different model" in out
    with pytest.raises(Exception, match="not an rnnx state file, or truncated"):
        session(directory).load_state(tmp_path / "truncated.safetensors")
    header = json.dumps(
        {
            "__metadata__": {"format": "rnnx-state"},
            "state/c": {"dtype": "F32", "shape": [2**32, 2**32, 4], "data_offsets": [0, 0]},
        }
    ).encode()
    (tmp_path / "huge.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)  # fmt: skip
    assert check(builds, "load", str(directory), ops, str(tmp_path / "huge.safetensors")) == (
        f"status 4: {tmp_path / 'huge.safetensors'}: not an rnnx state file, or truncated (tensor 'state/c' has a "
        "negative or overflowing shape)"
    )
    lying = tmp_path / "lying"  # rnnx.json is not hashed: one that disagrees with its graph is an error, not a read
    shutil.copytree(directory, lying)
    meta = json.loads((lying / "rnnx.json").read_text())
    (lying / "rnnx.json").write_text(json.dumps({**meta, "vocab_size": 40_000_000}))
    out = check(builds, "fork", str(lying), ops)
    assert "the graph's logits are (1, 3, 12)" in out and "rnnx.json says float32 (1, 3, 40000000)" in out, out


@pytest.fixture(scope="module")
def trt_export(demo_exports) -> Path:
    return demo_exports[("linear_transformer_copy", "tensorrt")]


def test_the_tensorrt_backend_says_what_is_missing(builds, trt_export, tmp_path: Path) -> None:
    out = check(builds, "tensorrt", str(trt_export), str(tmp_path / "engine.plan"))
    assert out.startswith("status 6: ") and ("TensorRT is not installed here" in out or "CUDA runtime" in out), out


# -- the TensorRT backend without TensorRT ------------------------------------------------------------------------

# TEST DOUBLE: a libnvinfer that is TensorRT 9.3.0: it exports only getInferLibVersion, in the format of TensorRT
# before 10 (major * 1000 + minor * 100 + patch).
NVINFER_9 = "int getInferLibVersion(void) { return 9300; }\n"

# TEST DOUBLE: a libnvinfer of version MAJOR.MINOR.0 (the headers' version, or one the version check is tested
# with) whose createInferRuntime_INTERNAL makes no runtime, so an open that passes the library search, the version
# check and the device selection stops there.
NVINFER_SAME = """
#include <stddef.h>
int getInferLibMajorVersion(void) { return MAJOR; }
int getInferLibMinorVersion(void) { return MINOR; }
int getInferLibPatchVersion(void) { return 0; }
void* createInferRuntime_INTERNAL(void* logger, int version) { return NULL; }
"""

# TEST DOUBLE: a CUDA runtime with the functions the TensorRT backend loads and one device, 0: cudaSetDevice of any
# other fails with cudaErrorInvalidDevice (101), and cudaGetErrorString says that it is this double.
CUDART = """
#include <stddef.h>
static int current = 0;
int cudaSetDevice(int device) { if (device != 0) return 101; current = device; return 0; }
int cudaGetDevice(int* device) { *device = current; return 0; }
const char* cudaGetErrorString(int error) { return error == 101 ? "invalid device ordinal (test double)" : "?"; }
int cudaMalloc(void** p, size_t n) { return 2; }
int cudaFree(void* p) { return 0; }
int cudaMemcpy(void* d, const void* s, size_t n, int k) { return 0; }
int cudaMemcpyAsync(void* d, const void* s, size_t n, int k, void* t) { return 0; }
int cudaMemset(void* p, int v, size_t n) { return 0; }
int cudaStreamCreate(void** s) { *s = NULL; return 0; }
int cudaStreamSynchronize(void* s) { return 0; }
int cudaStreamDestroy(void* s) { return 0; }
"""


def tensorrt_major_minor() -> tuple[int, int]:
    """NV_TENSORRT_MAJOR / MINOR of the headers the native runtime was built with."""
    include = native._tensorrt_include()
    assert include is not None
    text = (include / "NvInferVersion.h").read_text()
    found = [re.search(rf"#define (?:TRT_{w}_ENTERPRISE|NV_TENSORRT_{w}) ([0-9]+)", text) for w in ("MAJOR", "MINOR")]
    assert all(found), include
    major, minor = (int(f.group(1)) for f in found)
    return major, minor


# TEST DOUBLE: a plugin library built for TensorRT MAJOR, reduced to what says so: the marker the real
# librnnx_trt_plugins.so keeps in its bytes (the C API reads it from the file) and the function it exports (no
# TensorRT exists here to load a real one, nor do two builds of it for two majors); without -DMAJOR it stands for a
# library built before rnnx recorded its major. With -DSELF_REGISTERS it stands for the self-registering library,
# whose static initialiser registers its creators when anything loads it: here it ends the process with status 3,
# so a loader that opens it fails the test.
PLUGINS_MAJOR = """
#include <unistd.h>
#define TEXT(x) #x
#define STRING(x) TEXT(x)
#ifdef MAJOR
__attribute__((used)) static const char marker[] =
    "rnnx-trt-plugins:tensorrt-headers=" STRING(MAJOR) "." STRING(MINOR) ".0";
int rnnx_trt_plugins_tensorrt_major(void) { return MAJOR; }
#else
int getCreators(void) { return 0; }
#endif
#ifdef SELF_REGISTERS
__attribute__((constructor)) static void register_creators(void) { _exit(3); }
#endif
"""


def fake_library(source: str, path: Path, **defines: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    subprocess.run(["gcc", "-shared", "-fPIC", *flags, "-o", str(path), "-x", "c", "-"], input=source, text=True,
                   check=True)  # fmt: skip
    return path


@pytest.fixture(scope="module")
def with_tensorrt(builds) -> None:
    """These tests need the TensorRT backend compiled in (TensorRT and CUDA headers at build time) and no TensorRT
    on the loader path (the search would find it)."""
    if not (builds["asan"] / "rnnx_trt_plugins_test").is_file():
        pytest.skip("the native runtime was built without TensorRT / CUDA headers: no TensorRT backend to test")
    if ctypes.util.find_library("nvinfer") is not None:
        pytest.skip("TensorRT is installed here: the library search would find it")


def test_the_plugin_library_is_loaded_once_per_process(builds, with_tensorrt, tmp_path: Path) -> None:
    """rnnx_trt_plugins_test: src/trt_plugins.cpp against a stand-in registry (a test double). A second open
    of the same library (also through a symlink) loads nothing and gives the same handle; creators registered
    by someone else (Python, a self-registering library) load nothing; a partial set, a failed loadLibrary and a
    library that registers nothing are errors naming the library and the creators. A plugin library built for
    another TensorRT major than the loaded one, or not saying which, is refused before loadLibrary (plugin
    library doubles, PLUGINS_MAJOR); the same major loads. The major is read from the marker in the file's bytes,
    the one Python's rnnx.plugins.library_tensorrt_version reads, so no library is opened for the check; a
    library named *_static.so (the self-registering one) is refused before loadLibrary is called. And
    src/trt_profiles.cpp: an engine's optimization
    profiles must be decode (length 1) then prefill, given as ranges of input_ids' sequence axis."""
    doubles = [
        fake_library(PLUGINS_MAJOR, tmp_path / "doubles" / f"major{m}.so", MAJOR=m, MINOR=n)
        for m, n in ((10, 14), (11, 1))
    ]
    doubles.append(fake_library(PLUGINS_MAJOR, tmp_path / "doubles" / "unmarked.so"))
    doubles.append(
        fake_library(PLUGINS_MAJOR, tmp_path / "doubles" / "static.so", MAJOR=10, MINOR=14, SELF_REGISTERS=1)
    )
    # The doubles carry the marker as the real libraries do: Python reads the same fact from them.
    assert [library_tensorrt_version(d) for d in doubles] == [(10, 14, 0), (11, 1, 0), None, (10, 14, 0)]
    result = run(builds["asan"] / "rnnx_trt_plugins_test", str(tmp_path), *map(str, doubles), asan=True)
    assert result.returncode == 0 and "Sanitizer" not in result.stderr, result.stdout + result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    both = "rnnx::SRUScan v1, rnnx::CausalLinearAttention v1"

    def mismatch(built: int, loaded: int) -> str:
        return (
            f"loadLibrary calls 0, status 5: {tmp_path}/built_for_{built}.so: built for TensorRT {built}, but the "
            f"TensorRT loaded is {loaded}: build the plugins for TensorRT {loaded}: TENSORRT_ROOT=<TensorRT {loaded} "
            f"dir> python -m rnnx.plugins --kind load_library --major {loaded}"
        )

    need = (
        "; the tensorrt backend needs profile 0 = decode (length 1) and profile 1 = prefill (lengths 1..max), the "
        "order rnnx.runtime.tensorrt.build_engine builds"
    )
    assert lines == {
        "first open": "loadLibrary calls 1, handle",
        "second open": "loadLibrary calls 1, handle",
        "through a symlink": "loadLibrary calls 1, handle",
        "registered elsewhere": "loadLibrary calls 0, nullptr",
        "registered elsewhere, again": "loadLibrary calls 0, nullptr",
        "partial": f"loadLibrary calls 0, status 5: {tmp_path}/partial.so: rnnx::SRUScan v1 already registered but "
        "rnnx::CausalLinearAttention v1 not: another rnnx plugin library is loaded in this process, and TensorRT's "
        "loadLibrary would fail",
        "null handle": f"loadLibrary calls 1, status 5: {tmp_path}/broken.so: TensorRT could not load the plugin "
        "library: the last TensorRT error",
        "static library": f"loadLibrary calls 0, status 5: {tmp_path}/librnnx_trt_plugins_static.so: not loaded: the "
        "self-registering library is for plain dlopen; loadLibrary takes librnnx_trt_plugins.so",
        "registers nothing": f"loadLibrary calls 1, status 5: {tmp_path}/silent.so: loaded, but {both} not "
        "registered by it",
        "older library": "loadLibrary calls 2, handle",
        "older library, an export needing more": f"loadLibrary calls 2, status 5: {tmp_path}/older.so: loaded "
        "before in this process, but rnnx::CausalLinearAttention v1 not registered: the export needs a newer "
        "plugin library",
        "built for 10, TensorRT 11 loaded": mismatch(10, 11),
        "built for 11, TensorRT 10 loaded": mismatch(11, 10),
        "built for 11, TensorRT 11 loaded": "loadLibrary calls 1, handle",
        "built for 10, TensorRT 10 loaded": "loadLibrary calls 1, handle",
        "a renamed self-registering library, TensorRT 11 loaded": f"loadLibrary calls 0, status 5: {tmp_path}/"
        "renamed.so: built for TensorRT 10, but the TensorRT loaded is 11: build the plugins for TensorRT 11: "
        "TENSORRT_ROOT=<TensorRT 11 dir> python -m rnnx.plugins --kind load_library --major 11",
        "built before the major was recorded": f"loadLibrary calls 0, status 5: {tmp_path}/unmarked.so: built "
        "before rnnx recorded its TensorRT major (it has no rnnx-trt-plugins:tensorrt-headers marker): rebuild it "
        "for TensorRT 11: TENSORRT_ROOT=<TensorRT 11 dir> python -m rnnx.plugins --kind load_library --major 11",
        "not a library": f"loadLibrary calls 0, status 5: {tmp_path}/not_a_library.so: built before rnnx recorded "
        "its TensorRT major (it has no rnnx-trt-plugins:tensorrt-headers marker): rebuild it for TensorRT 10: "
        "TENSORRT_ROOT=<TensorRT 10 dir> python -m rnnx.plugins --kind load_library --major 10",
        "no such file": f"loadLibrary calls 0, status 5: {tmp_path}/absent.so: cannot be read to find the TensorRT "
        "major it was built for (No such file or directory)",
        "profiles decode, prefill": "ok",
        "profiles of max_length 1": "ok",
        "profiles decode, prefill from 2": "ok",
        "profiles decode, prefill, a third": "ok",
        "profiles prefill, decode": "profile 0 holds input_ids lengths 1..512 (opt 512), profile 1 holds input_ids "
        "length 1" + need,
        "profiles decode, prefill from 8": "profile 0 holds input_ids length 1, profile 1 holds input_ids lengths "
        "8..128 (opt 64)" + need,
        "profiles prefill only": "it has 1 optimization profile (profile 0 holds input_ids lengths 1..512 (opt 256))"
        + need,
        "profiles none": "it has 0 optimization profiles" + need,
        "required_creators": "rnnx::SRUScan v1, rnnx::CausalLinearAttention v2",
        "required_creators without ops": "(none)",
        "required_creators of a bad entry": "status 3: rnnx.json: an 'ops' entry has no 'name'",
        "failures": "0",
    }


def test_rnnx_tensorrt_libs_is_searched_first_and_another_major_is_refused(
    builds, with_tensorrt, trt_export, tmp_path: Path
) -> None:
    major, minor = tensorrt_major_minor()
    soname = f"libnvinfer.so.{major}"
    engine = str(tmp_path / "engine.plan")
    empty, other = tmp_path / "empty", tmp_path / "missing"
    empty.mkdir()
    out = check(builds, "tensorrt", str(trt_export), engine, env={"RNNX_TENSORRT_LIBS": f"{empty}::{other}"})
    tried = re.fullmatch(r"status 6: TensorRT is not installed here: none of (.*) could be loaded \(.*\)", out)
    assert tried is not None, out
    assert tried.group(1).split(", ") == [f"{empty}/{soname}", f"{other}/{soname}", soname, "libnvinfer.so"]
    assert "RNNX_TENSORRT_LIBS" in out

    old = fake_library(NVINFER_9, tmp_path / "old" / soname)
    out = check(builds, "tensorrt", str(trt_export), engine, env={"RNNX_TENSORRT_LIBS": f"{empty}:{old.parent}"})
    oldest = "10.7" if major == 10 else f"{major}.0"
    assert out == (
        f"status 6: {old} is TensorRT 9.3.0; this librnnx_runtime was built with the TensorRT {major}.{minor} "
        f"headers and serves TensorRT {oldest} to {major}.x ({soname}): name the folder of one first in "
        "$RNNX_TENSORRT_LIBS"
    )


def test_a_build_serves_its_tensorrt_headers_major_from_10_7_on(
    builds, with_tensorrt, trt_export, tmp_path: Path
) -> None:
    """With TensorRT 10 headers, libnvinfer 10.7 (the oldest rnnx builds engines with, as Python's
    MIN_TENSORRT_VERSION) up to the headers' 10.x is accepted by the version check, 10.6 and any other major (11,
    12) are refused with one line; with N's headers (N > 10), N.0 up is accepted and 10.x / 12.0 refused. The
    libnvinfer and libcudart are test doubles (NVINFER_SAME reporting the version under test, CUDART): no TensorRT
    exists here. An accepted version gets past the check to the double's createInferRuntime_INTERNAL, which
    makes no runtime."""
    major, minor = tensorrt_major_minor()
    soname = f"libnvinfer.so.{major}"
    oldest = (10, 7) if major == 10 else (major, 0)
    served = f"{oldest[0]}.{oldest[1]} to {major}.x ({soname}"
    engine = str(tmp_path / "engine.plan")

    def open_with(version: tuple[int, int]) -> tuple[Path, str]:
        libs = tmp_path / f"trt{version[0]}.{version[1]}"
        library = fake_library(NVINFER_SAME, libs / soname, MAJOR=version[0], MINOR=version[1])
        fake_library(CUDART, libs / "libcudart.so.13")
        return library, check(builds, "tensorrt", str(trt_export), engine, env={"RNNX_TENSORRT_LIBS": str(libs)})

    for version in {oldest, (major, minor)}:
        assert open_with(version)[1] == "status 5: TensorRT could not create a runtime", version
    refused = [(12, 0), (11, 0), (10, 14)] if major == 10 else [(12, 0), (10, 14), (10, 7)]
    refused = [v for v in refused if v[0] != major] + ([(10, 6)] if major == 10 else [])
    for version in refused:
        library, out = open_with(version)
        why = "; 10.7 is the oldest TensorRT rnnx builds engines with" if version == (10, 6) else ""
        assert out == (
            f"status 6: {library} is TensorRT {version[0]}.{version[1]}.0; this librnnx_runtime was built with the "
            f"TensorRT {major}.{minor} headers and serves TensorRT {served}{why}): name the folder of one first in "
            "$RNNX_TENSORRT_LIBS"
        ), version


def test_the_wheels_beside_an_installed_library_are_searched(builds, with_tensorrt, trt_export, tmp_path: Path) -> None:
    """A librnnx_runtime inside site-packages (as a wheel installs it) finds the tensorrt-cu*-libs wheel's
    tensorrt_libs/ there, after $RNNX_TENSORRT_LIBS."""
    major, _ = tensorrt_major_minor()
    soname = f"libnvinfer.so.{major}"
    site = tmp_path / "venv" / Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    installed = site / "rnnx" / "runtime" / "native"
    installed.mkdir(parents=True)
    shutil.copy(builds["asan"] / native.LIBRARY_NAME, installed)
    env = {"LD_LIBRARY_PATH": str(installed), "RNNX_TENSORRT_LIBS": ""}  # rnnx_check then loads the copy
    engine = str(tmp_path / "engine.plan")
    out = check(builds, "tensorrt", str(trt_export), engine, env=env)
    assert f"none of {site}/tensorrt_libs/{soname}, {soname}, libnvinfer.so could be loaded" in out, out
    wheel = fake_library(NVINFER_9, site / "tensorrt_libs" / soname)
    out = check(builds, "tensorrt", str(trt_export), engine, env=env)
    assert out.startswith(f"status 6: {wheel} is TensorRT 9.3.0; "), out
    first = fake_library(NVINFER_9, tmp_path / "first" / soname)
    out = check(builds, "tensorrt", str(trt_export), engine, env={**env, "RNNX_TENSORRT_LIBS": str(first.parent)})
    assert out.startswith(f"status 6: {first} is TensorRT 9.3.0; "), out


def test_the_tensorrt_backend_selects_the_device(builds, with_tensorrt, trt_export, tmp_path: Path) -> None:
    """options.device: "cuda" / "cuda:N" is cudaSetDevice(N) (the CUDA runtime test double, found through
    $RNNX_TENSORRT_LIBS before the system's); anything else is an invalid argument."""
    major, minor = tensorrt_major_minor()
    libs = tmp_path / "libs"
    fake_library(NVINFER_SAME, libs / f"libnvinfer.so.{major}", MAJOR=major, MINOR=minor)
    fake_library(CUDART, libs / "libcudart.so.13")
    env = {"RNNX_TENSORRT_LIBS": str(libs)}
    engine = str(tmp_path / "engine.plan")

    def open_on(*device: str) -> str:
        return check(builds, "tensorrt", str(trt_export), engine, *device, env=env)

    assert open_on("cpu") == (
        "status 1: the tensorrt backend runs on a CUDA device: device must be 'cuda' or 'cuda:N', got 'cpu'"
    )
    assert open_on("cuda:x").startswith("status 1: ")
    assert open_on("cuda:1") == (
        "status 6: device cuda:1: cudaSetDevice failed (CUDA error 101: invalid device ordinal (test double))"
    )
    assert open_on("cuda:0") == open_on() == open_on("cuda") == "status 5: TensorRT could not create a runtime"


def test_threads_share_a_model_and_a_fork_is_independent(builds, ops, exports) -> None:
    for name in ("srupp_linear_copy", "own_softmax_srupp"):
        assert check(builds, "threads", str(exports[name]), ops, "10") == "threads: same"
        assert check(builds, "fork", str(exports[name]), ops).splitlines() == ["status 0: ok", "fork: ok"]


def test_a_callback_that_returns_non_zero_is_never_called_again(builds, ops, exports) -> None:
    """rnnx.h: returning non-zero stops the whole generation at once. With 3 rows, a callback that says stop on
    its first call is called once (not for rows 1 and 2 of that step), and on its 5th call (step 1, row 1) five
    times; the state has then been fed the prompt and step 0's tokens only (past_length 3 + 1)."""
    directory = str(exports["linear_transformer_copy"])
    assert check(builds, "stop", directory, ops, "1") == "calls: 1, status 0, past_length 3"
    assert check(builds, "stop", directory, ops, "5") == "calls: 5, status 0, past_length 4"


def test_the_c_example_in_the_docs_compiles_and_runs(builds, ops, exports, tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "embedding.md").read_text()
    source = doc.split("```c\n", 1)[1].split("```", 1)[0]
    (tmp_path / "example.c").write_text(source)
    include = native.SOURCES / "include"
    library = builds["release"]
    compiled = subprocess.run(["gcc", "-Wall", "-Werror", str(tmp_path / "example.c"), f"-I{include}", f"-L{library}",
                               "-lrnnx_runtime", f"-Wl,-rpath,{library}", "-o", str(tmp_path / "example")],
                              capture_output=True, text=True)  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    result = run(tmp_path / "example", str(exports["linear_transformer_copy"]), ops)
    assert result.returncode == 0, result.stderr
    want = session(exports["linear_transformer_copy"]).generate_all([[1, 2, 3, 4, 10]], 8, temperature=0)[0]
    assert result.stdout.split() == [w for t in want for w in ("row", "0:", str(t))]


def test_a_conversation_parked_by_python_resumes_in_the_c_example(builds, ops, exports, tmp_path: Path) -> None:
    """docs/embedding.md's second C program: a conversation parked by the Python scheduler (its
    ConversationStore's state file) resumes in C with the next turn; its greedy tokens equal the conversation run
    in one piece, and the file it writes back resumes in Python, again equal to one piece."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "embedding.md").read_text()
    (tmp_path / "resume.c").write_text(doc.split("```c\n")[2].split("```", 1)[0])
    include, library = native.SOURCES / "include", builds["release"]
    compiled = subprocess.run(["gcc", "-Wall", "-Werror", str(tmp_path / "resume.c"), f"-I{include}", f"-L{library}",
                               "-lrnnx_runtime", f"-Wl,-rpath,{library}", "-o", str(tmp_path / "resume")],
                              capture_output=True, text=True)  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    directory = exports["linear_transformer_copy"]
    py = session(directory)
    p1, p2, p3 = [1, 2, 3, 4, 10], [5, 6, 7, 10], [2, 3, 10]
    with rt.Scheduler(py, conversations=tmp_path / "chats") as scheduler:
        t1 = scheduler.submit(p1, 5, temperature=0, conversation="chat").result(60)
        path = scheduler.conversations.path("chat")
    result = run(tmp_path / "resume", str(directory), str(path), ops, *map(str, p2))
    assert result.returncode == 0, result.stderr
    t2 = [int(t) for t in result.stdout.split()]
    assert t2 == py.generate_all([p1 + t1 + p2], 8, temperature=0)[0]
    with rt.Scheduler(py, conversations=tmp_path / "chats") as scheduler:
        t3 = scheduler.submit(p3, 5, temperature=0, conversation="chat").result(60)
    assert t3 == py.generate_all([p1 + t1 + p2 + t2 + p3], 5, temperature=0)[0]
    assert sorted(p.name for p in (tmp_path / "chats").iterdir()) == ["chat.safetensors"]
