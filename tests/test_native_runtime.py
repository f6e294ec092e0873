"""The native runtime (issue 19): ``librnnx_runtime`` and its C API, against ``rnnx.runtime`` (Python).

Real parts only: the library built with CMake against the onnxruntime wheel's ``libonnxruntime``, real exports,
and the programs ``rnnx-generate`` (the C++ example) and ``rnnx_check`` (a C test driver), also built with
AddressSanitizer + UndefinedBehaviorSanitizer (every program run below that says ``asan`` runs that build;
a sanitizer report fails the run). Both runtimes register rnnx's ONNX Runtime op library.

* Greedy tokens from the C API equal ``Session.generate_all`` for both demo exports and a user-built language
  model (a softmax SRU++ LM, whose KV cache grows), batched prompts of different lengths.
* Sampled tokens (temperature, top-k, top-p) are reproducible for a seed and change with it.
* A state saved by Python loads in C++ and one saved by C++ loads in Python, and both continue as the saver
  would; an ``.npz`` state of rnnx before safetensors still loads in Python.
* Errors are a status and a message, never a crash: a missing directory, a changed ``model.onnx``, a token out
  of range, a batch mismatch, a truncated or foreign state file, the TensorRT backend where TensorRT is absent.
* Four threads generating on one model at once give each what it gets alone; a fork continues independently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import rnnx.runtime as rt
from rnnx.export import export_model
from rnnx.models import build_model
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.runtime import native, ortops

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
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("native")
    out = {name: export_model(demo_checkpoint_path(name), root / name, target="onnxruntime", decode_steps=4).out_dir
           for name in DEMO_CHECKPOINTS}  # fmt: skip
    torch.manual_seed(0)
    own = build_model("srupp", {"vocab_size": 12, "embed_dim": 32, "hidden_size": 32, "proj_size": 16,
                                "num_layers": 2, "attention": "softmax"})  # fmt: skip
    out["own_softmax_srupp"] = export_model(own, root / "own", target="onnxruntime", decode_steps=4).out_dir
    return out


def run(program: Path, *args: str, asan: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, **(ASAN_ENV if asan else {})}
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=300, env=env)


def generate_cpp(builds, directory: Path, ops: str, *options: str, asan: bool = False) -> list[list[int]]:
    prompts = [a for p in PROMPTS for a in ("--prompt", " ".join(map(str, p)))] if "--load-state" not in options else []
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


def test_sampled_tokens_are_reproducible_for_a_seed(builds, ops, exports) -> None:
    directory = exports["srupp_linear_copy"]
    options = ["--max-new-tokens", "16", "--temperature", "1.5", "--top-k", "6", "--top-p", "0.95"]
    first = generate_cpp(builds, directory, ops, *options, "--seed", "7")
    assert generate_cpp(builds, directory, ops, *options, "--seed", "7", asan=True) == first
    others = [generate_cpp(builds, directory, ops, *options, "--seed", str(s)) for s in (8, 9)]
    assert any(o != first for o in others)
    assert all(0 <= t < 12 for row in first for t in row)


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


def check(builds, *args: str) -> str:
    result = run(builds["asan"] / "rnnx_check", *args, asan=True)
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
        f"status 4: {tmp_path / 'huge.safetensors'}: tensor 'state/c' has a negative or overflowing shape"
    )
    lying = tmp_path / "lying"  # rnnx.json is not hashed: one that disagrees with its graph is an error, not a read
    shutil.copytree(directory, lying)
    meta = json.loads((lying / "rnnx.json").read_text())
    (lying / "rnnx.json").write_text(json.dumps({**meta, "vocab_size": 40_000_000}))
    out = check(builds, "fork", str(lying), ops)
    assert "the graph's logits are (1, 3, 12)" in out and "rnnx.json says float32 (1, 3, 40000000)" in out, out


def test_the_tensorrt_backend_says_what_is_missing(builds, tmp_path: Path) -> None:
    directory = export_model(demo_checkpoint_path("linear_transformer_copy"), tmp_path / "trt", target="tensorrt",
                             decode_steps=2).out_dir  # fmt: skip
    out = check(builds, "tensorrt", str(directory), str(tmp_path / "engine.plan"))
    assert out.startswith("status 6: ") and ("TensorRT is not installed here" in out or "CUDA runtime" in out), out


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
    include = Path(native.__file__).parent / "include"
    library = builds["release"]
    compiled = subprocess.run(["gcc", "-Wall", "-Werror", str(tmp_path / "example.c"), f"-I{include}", f"-L{library}",
                               "-lrnnx_runtime", f"-Wl,-rpath,{library}", "-o", str(tmp_path / "example")],
                              capture_output=True, text=True)  # fmt: skip
    assert compiled.returncode == 0, compiled.stderr
    result = run(tmp_path / "example", str(exports["linear_transformer_copy"]), ops)
    assert result.returncode == 0, result.stderr
    want = session(exports["linear_transformer_copy"]).generate_all([[1, 2, 3, 4, 10]], 8, temperature=0)[0]
    assert result.stdout.split() == [w for t in want for w in ("row", "0:", str(t))]
