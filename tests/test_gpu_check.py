"""scripts/gpu_check.sh and scripts/gpu_check_cases.py on a machine without a GPU or TensorRT (CI).

What runs here: the prerequisite checks (one line naming what is missing, exit 2, in seconds and before
anything is built), the argument handling (``--only`` steps and groups, the build added when a step needs
it, ``--list``), the step runner and its summary table on a fake toolchain (fake nvidia-smi, cmake, ctest,
compute-sanitizer and test binary: PASS / FAIL / SKIP rows, the time budget, exit codes), the TensorRT
cases' table and pure helpers, the case models' shapes (bidirectional, k = 4, head dims 64 / 128), and
plugin_enqueue_gpu's ``--dtype`` option on the CUDA host emulation. The GPU and TensorRT steps themselves
only run on a GPU machine (``bash scripts/gpu_check.sh``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "gpu_check.sh"
CASES = REPO / "scripts" / "gpu_check_cases.py"
sys.path.insert(0, str(REPO / "scripts"))
import gpu_check_cases  # noqa: E402  (a script beside gpu_check.sh, not a package)

from rnnx.runtime.contract.ops import ALL_OPS  # noqa: E402

KERNEL_STEPS = ["build", "ctest", "enqueue", "pytest-gpu"]
DTYPES = ("fp32", "fp16", "bf16")
SANITIZER_STEPS = [f"{tool}-{dtype}" for tool in ("memcheck", "racecheck", "synccheck") for dtype in DTYPES]


def _tensorrt_importable() -> bool:
    return subprocess.run([sys.executable, "-c", "import tensorrt"], capture_output=True).returncode == 0


def _gpu_listed() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return result.returncode == 0 and "GPU " in result.stdout


def _run(args: list[str], tmp_path: Path, env: dict[str, str] | None = None, timeout: float = 120):
    """Runs gpu_check.sh with its outputs, work folder and build folder under ``tmp_path``."""
    full_env = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path / "out"), GPU_CHECK_WORK=str(tmp_path / "work"),
                    BUILD_DIR=str(tmp_path / "build"))  # fmt: skip
    full_env.update(env or {})
    t0 = time.monotonic()
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full_env,
                            timeout=timeout, cwd=tmp_path)  # fmt: skip
    return result, time.monotonic() - t0


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# -- prerequisites -------------------------------------------------------------------------------------------


@pytest.mark.skipif(_tensorrt_importable(), reason="checks the message where TensorRT is not installed")
def test_full_mode_without_tensorrt_names_it_and_kernels_only(tmp_path: Path) -> None:
    result, took = _run([], tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = _lines(result.stdout + result.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith("gpu_check: cannot run the full check, missing: TensorRT ("), lines[0]
    assert "bash scripts/gpu_check.sh --kernels-only" in lines[0], lines[0]
    assert took < 60, f"the prerequisite check took {took:.0f}s"
    # Nothing was built or written: the check comes first.
    assert not (tmp_path / "build").exists() and not (tmp_path / "out").exists()


@pytest.mark.skipif(_gpu_listed(), reason="checks the message where no CUDA device is present")
def test_kernels_only_without_a_device_names_the_device(tmp_path: Path) -> None:
    result, took = _run(["--kernels-only"], tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = _lines(result.stdout + result.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith("gpu_check --kernels-only: cannot run, missing: a CUDA device"), lines[0]
    assert "TensorRT (" not in lines[0], "--kernels-only must not ask for TensorRT"
    assert took < 60, f"the prerequisite check took {took:.0f}s"
    assert not (tmp_path / "build").exists() and not (tmp_path / "out").exists()


def _fake_tensorrt(tmp_path: Path, version: str, headers: str) -> dict[str, str]:
    """TEST DOUBLES (no TensorRT here): a ``tensorrt`` module reporting ``version`` on PYTHONPATH, and a header
    folder whose NvInferVersion.h says ``headers`` (in TensorRT 10.14's / 11.1's format), given as TENSORRT_ROOT."""
    module = tmp_path / "fake_trt"
    module.mkdir()
    (module / "tensorrt.py").write_text(f"__version__ = {version!r}\n")
    include = tmp_path / "trt_headers" / "include"
    include.mkdir(parents=True)
    (include / "NvInferRuntime.h").write_text("// stand-in\n")
    major, minor, patch = headers.split(".")
    (include / "NvInferVersion.h").write_text(
        f"#define TRT_MAJOR_ENTERPRISE {major}\n#define TRT_MINOR_ENTERPRISE {minor}\n"
        f"#define TRT_PATCH_ENTERPRISE {patch}\n#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE\n"
        "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE\n#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE\n"
    )
    pythonpath = os.pathsep.join(filter(None, [str(module), os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": pythonpath, "TENSORRT_ROOT": str(include.parent)}


@pytest.mark.parametrize("installed, headers, refused", [
    ("11.4.0.106", "10.14.1", True), ("10.14.1.48", "11.1.0", True), ("11.4.0.106", "11.1.0", False),
    ("10.14.1.48", "10.14.1", False),
])  # fmt: skip
def test_full_mode_wants_headers_of_the_installed_major(
    installed: str, headers: str, refused: bool, tmp_path: Path
) -> None:
    """One plugin build serves one TensorRT major: full mode refuses headers of the other major before building,
    in the one prerequisite line (which also names what else this machine lacks: a GPU, torch with CUDA)."""
    result, _ = _run([], tmp_path, env=_fake_tensorrt(tmp_path, installed, headers))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = _lines(result.stdout + result.stderr)
    assert len(lines) == 1, lines
    major = installed.split(".")[0]
    wanted = f"TensorRT {major} headers for the plugin build (TensorRT {installed} is installed;"
    if refused:
        assert wanted in lines[0] and f"has {headers} headers" in lines[0], lines[0]
    else:
        assert "headers for the plugin build" not in lines[0], lines[0]
    assert "TensorRT (" not in lines[0], "rnnx's version gate accepts 10.7-10.x and 11.x"


def test_trtexec_flags_per_major() -> None:
    """trtexec 10 needs --stronglyTyped (and --useCudaGraph for graphs); trtexec 11 builds strongly typed and
    captures CUDA graphs by default, both flags being deprecated no-ops there (its sampleOptions.cpp)."""
    assert gpu_check_cases.trtexec_flags("10.14.1.48") == ["--stronglyTyped", "--useCudaGraph"]
    assert gpu_check_cases.trtexec_flags("10.7.0") == ["--stronglyTyped", "--useCudaGraph"]
    assert gpu_check_cases.trtexec_flags("11.4.0.106") == []


@pytest.mark.parametrize("op", [s.onnx_name for s in ALL_OPS])
def test_mask_types_case_models(op: str) -> None:
    """The mask-types case's one-node models: the op's inputs and attributes from the op record, the mask of the
    asked type, no local function (TensorRT can only import the plugin); and its naive-twin reference honours the
    mask the same way for int32 and bool (and differently from no pad at all)."""
    import numpy as np
    from onnx import TensorProto

    from rnnx.runtime.contract import ops

    spec = next(s for s in ops.ALL_OPS if s.onnx_name == op)
    refs = {}
    for mask_type, elem in (("int32", TensorProto.INT32), ("bool", TensorProto.BOOL)):
        model, arrays = gpu_check_cases.plugin_node_model(op, mask_type)
        (node,) = model.graph.node
        assert (node.op_type, node.domain, list(node.input)) == (op, ops.ONNX_DOMAIN, list(spec.inputs))
        attrs = {a.name for a in node.attribute}
        assert set(spec.attributes) | {ops.PLUGIN_VERSION_ATTR, ops.PLUGIN_NAMESPACE_ATTR} == attrs
        assert not model.functions
        types = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
        assert types[spec.mask_input] == elem
        assert all(types[n] == TensorProto.FLOAT for n in spec.inputs if n != spec.mask_input)
        assert int(np.count_nonzero(arrays[spec.mask_input])) == 2
        refs[mask_type] = gpu_check_cases.plugin_node_reference(op, arrays)
        unpadded = dict(arrays, **{spec.mask_input: np.zeros_like(arrays[spec.mask_input])})
        refs["none"] = gpu_check_cases.plugin_node_reference(op, unpadded)
    for name in spec.outputs:
        np.testing.assert_array_equal(refs["int32"][name], refs["bool"][name])
    assert any(not np.allclose(refs["int32"][n], refs["none"][n]) for n in spec.outputs)


# -- arguments and --list -------------------------------------------------------------------------------------


def _listed(args: list[str], tmp_path: Path) -> list[str]:
    result, _ = _run([*args, "--list"], tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return [line.split()[0] for line in _lines(result.stdout)]


def test_list_kernels_only_runs_every_cuda_step_in_order(tmp_path: Path) -> None:
    assert _listed(["--kernels-only"], tmp_path) == [*KERNEL_STEPS, *SANITIZER_STEPS, "bench"]


def test_list_full_adds_every_tensorrt_case(tmp_path: Path) -> None:
    # mask-types first (it answers in seconds whether the plugins build at all), then trt-pytest, then the rest.
    trt = ["trt-mask-types", "trt-pytest", *(f"trt-{c.name}" for c in gpu_check_cases.CASES[1:])]
    assert gpu_check_cases.CASES[0].name == "mask-types"
    assert _listed([], tmp_path) == [*KERNEL_STEPS, *SANITIZER_STEPS, *trt, "bench"]


@pytest.mark.parametrize(
    "only, expected",
    [
        ("memcheck", ["build", "memcheck-fp32", "memcheck-fp16", "memcheck-bf16"]),
        ("racecheck-fp16,enqueue", ["build", "enqueue", "racecheck-fp16"]),  # canonical order, build added
        ("pytest-gpu", ["pytest-gpu"]),  # needs no cmake build
        ("kernels,synccheck-bf16", [*KERNEL_STEPS, "synccheck-bf16"]),
        ("sanitizers", ["build", *SANITIZER_STEPS]),
        ("bench", ["bench"]),
        ("enqueue,,enqueue", ["build", "enqueue"]),
    ],
)
def test_only_selects_steps_and_groups(only: str, expected: list[str], tmp_path: Path) -> None:
    assert _listed(["--kernels-only", "--only", only], tmp_path) == expected
    assert _listed(["--kernels-only", f"--only={only}"], tmp_path) == expected


def test_only_tensorrt_groups_in_full_mode(tmp_path: Path) -> None:
    models = ["trt-mask-types", "trt-sru-bidirectional", "trt-sru-k4", "trt-attention-e64", "trt-attention-e128"]
    assert _listed(["--only", "trt-models"], tmp_path) == ["build", *models]
    demo = _listed(["--only", "trt-demo"], tmp_path)
    assert demo[0] == "build" and "trt-demo-graphs" in demo and "trt-polygraphy" in demo
    assert not set(demo) & {"trt-pytest", *models}
    everything = _listed(["--only", "tensorrt"], tmp_path)
    assert everything == ["build", "trt-mask-types", "trt-pytest", *models[1:], *demo[1:]]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--only", "bogus"], "unknown step or group 'bogus'"),
        (["--kernels-only", "--only", "trt-native"], "'trt-native' needs TensorRT: it is not part of --kernels-only"),
        (["--kernels-only", "--only", "tensorrt"], "'tensorrt' needs TensorRT"),
        (["--only"], "--only needs STEP[,STEP...]"),
        (["--frob"], "unknown argument '--frob'"),
    ],
)
def test_bad_arguments_exit_2_with_one_message(args: list[str], message: str, tmp_path: Path) -> None:
    result, took = _run(args, tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stdout == "" and took < 30


def test_bad_budget_is_refused(tmp_path: Path) -> None:
    result, _ = _run(["--list"], tmp_path, env={"GPU_CHECK_BUDGET_S": "9 minutes"})
    assert result.returncode == 2 and "GPU_CHECK_BUDGET_S must be a number of seconds" in result.stderr


def test_help_is_the_header(tmp_path: Path) -> None:
    result, _ = _run(["--help"], tmp_path)
    assert result.returncode == 0
    assert "--kernels-only" in result.stdout and "racecheck" in result.stdout and "set -u" not in result.stdout


def test_script_passes_bash_n_and_shellcheck() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (bash -n passed)")
    result = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


# -- the runner on a fake toolchain ---------------------------------------------------------------------------

FAKES = {
    "nvidia-smi": """
        case "$*" in
          -L) echo "GPU 0: Fake GPU (UUID: GPU-0)" ;;
          *name*) echo "Fake GPU, 1.0, 9.0" ;;
          *compute_cap*) echo "9.0" ;;
          *) echo "fake nvidia-smi" ;;
        esac
    """,
    "nvcc": 'echo "Cuda compilation tools, release 13.0 (fake)"; echo fake',
    "ctest": 'echo "100% tests passed (fake ctest $*)"',
    # Configure makes the folder; --build writes a fake plugin_enqueue_gpu (FAKE_FAIL_DTYPE fails that dtype,
    # FAKE_SLEEP sleeps first) and the two libraries.
    "cmake": """
        if [ "$1" = --version ]; then echo "cmake version 3.99 (fake)"; exit 0; fi
        if [ "$1" = --build ]; then
          mkdir -p "$2/tests"
          printf '%s\\n' '#!/usr/bin/env bash' 'echo "device 0: fake"; echo "args: $*"; sleep "${FAKE_SLEEP:-0}"' \\
            'if [ -n "${FAKE_FAIL_DTYPE:-}" ] && [[ " $* " == *" $FAKE_FAIL_DTYPE "* ]]; then' \\
            '  echo "11 passed, 1 failed"; exit 1' 'fi' 'echo "12 passed, 0 failed"' >"$2/tests/plugin_enqueue_gpu"
          chmod +x "$2/tests/plugin_enqueue_gpu"
          touch "$2/librnnx_trt_plugins.so" "$2/librnnx_trt_plugins_static.so"
          exit 0
        fi
        while [ $# -gt 0 ]; do [ "$1" = -B ] && mkdir -p "$2"; shift; done
    """,
    # Runs the program after the options; FAKE_HAZARD=tool-dtype reports an error for that run (exit 3).
    "compute-sanitizer": """
        tool=""
        while [[ "$1" == --* ]]; do case "$1" in --tool) tool="$2"; shift 2 ;; --*) shift 2 ;; esac; done
        "$@"; rc=$?
        dtype=""; prev=""; for a in "$@"; do [ "$prev" = --dtype ] && dtype="$a"; prev="$a"; done
        if [ "${FAKE_HAZARD:-}" = "$tool-$dtype" ]; then
          echo "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"; exit 3
        fi
        echo "========= ERROR SUMMARY: 0 errors"; exit $rc
    """,
}


@pytest.fixture()
def fake_env(tmp_path: Path) -> dict[str, str]:
    """PATH with the fake tools first, fake TensorRT headers, the fake nvcc."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for name, body in FAKES.items():
        tool = bin_dir / name
        tool.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body).lstrip())
        tool.chmod(0o755)
    headers = tmp_path / "trt" / "include"
    headers.mkdir(parents=True)
    (headers / "NvInferRuntime.h").write_text("// fake\n")
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CUDACXX": str(bin_dir / "nvcc"),
            "TENSORRT_ROOT": str(tmp_path / "trt")}  # fmt: skip


def _summary(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """summary.txt's rows: step -> (result, note)."""
    rows = {}
    for line in (tmp_path / "out" / "steps.tsv").read_text().splitlines():
        name, result, _, note = line.split("\t")
        rows[name] = (result, note)
    return rows


def test_runner_table_pass_and_fail(tmp_path: Path, fake_env: dict[str, str]) -> None:
    env = dict(fake_env, FAKE_FAIL_DTYPE="bf16", FAKE_HAZARD="racecheck-fp16")
    result, took = _run(["--kernels-only", "--only", "ctest,enqueue,sanitizers"], tmp_path, env)
    assert result.returncode == 1, result.stdout + result.stderr
    rows = _summary(tmp_path)
    assert list(rows) == ["build", "ctest", "enqueue", *SANITIZER_STEPS]
    assert rows["build"][0] == rows["ctest"][0] == rows["enqueue"][0] == "PASS"
    assert rows["memcheck-fp32"] == ("PASS", "12 passed, 0 failed")
    assert rows["racecheck-fp16"][0] == "FAIL" and "RACECHECK SUMMARY: 1 hazard" in rows["racecheck-fp16"][1]
    for step in ("memcheck-bf16", "racecheck-bf16", "synccheck-bf16"):
        assert rows[step] == ("FAIL", "exit 1; 11 passed, 1 failed; ERROR SUMMARY: 0 errors"), rows[step]
    assert sum(r == "PASS" for r, _ in rows.values()) == 8
    # The summary is the end of stdout (one table, every step) and summary.txt.
    out = result.stdout.splitlines()
    table = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert out[-len(table) :] == table and table[-1].startswith("RESULT: FAILED")
    assert table[2] == "TensorRT: not used (--kernels-only); TensorRT headers: of unknown version in " + str(
        Path(fake_env["TENSORRT_ROOT"]) / "include"
    )  # the summary names the TensorRT (and headers) it ran with
    assert [line.split()[0] for line in table[4:-1]] == list(rows)
    # synccheck runs only the attention cases; the dtype reaches the test binary.
    sanitizers = (tmp_path / "out" / "sanitizers.log").read_text()
    assert "args: --dtype fp16 Causal" in sanitizers and "--leak-check full" in sanitizers
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(files) <= 8 and "summary.txt" in files, files
    assert took < 60


def test_runner_all_passed_exits_0(tmp_path: Path, fake_env: dict[str, str]) -> None:
    result, _ = _run(["--kernels-only", "--only", "enqueue,synccheck"], tmp_path, fake_env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "RESULT: all selected GPU checks passed"
    assert {r for r, _ in _summary(tmp_path).values()} == {"PASS"}


def test_runner_budget_skips_and_says_what_to_run_next(tmp_path: Path, fake_env: dict[str, str]) -> None:
    """With the budget spent, the remaining steps are SKIPPED (not failed) and the summary names the command
    that runs them; exit 3 (incomplete)."""
    env = dict(fake_env, FAKE_SLEEP="8", GPU_CHECK_BUDGET_S="40")
    result, took = _run(["--kernels-only", "--only", "enqueue,memcheck"], tmp_path, env)
    assert result.returncode == 3, result.stdout + result.stderr
    rows = _summary(tmp_path)
    assert rows["enqueue"][0] == "PASS"
    skipped = [name for name, (r, _) in rows.items() if r == "SKIP"]
    assert skipped and skipped == list(rows)[-len(skipped) :], rows
    assert all("left of the 40s budget: run --only" in rows[s][1] for s in skipped)
    assert (
        result.stdout.splitlines()[-1]
        == f"run next: bash scripts/gpu_check.sh --kernels-only --only {','.join(skipped)}"
    )
    assert "RESULT: INCOMPLETE" in result.stdout and took < 45


def test_runner_build_failure_blocks_the_steps_that_need_it(tmp_path: Path, fake_env: dict[str, str]) -> None:
    bad = tmp_path / "fakebin" / "cmake"
    bad.write_text('#!/usr/bin/env bash\necho "CMake Error: fake"; exit 1\n')
    result, _ = _run(["--kernels-only", "--only", "enqueue"], tmp_path, fake_env)
    assert result.returncode == 1
    rows = _summary(tmp_path)
    assert rows["build"] == ("FAIL", "exit 1") and rows["enqueue"] == ("SKIP", "the build did not pass")
    assert "CMake Error: fake" in (tmp_path / "out" / "build.log").read_text()


# -- scripts/gpu_check_cases.py ----------------------------------------------------------------------------


def test_case_list_is_the_table() -> None:
    result = subprocess.run([sys.executable, str(CASES), "list"], capture_output=True, text=True, check=True)
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [r[0] for r in rows] == [c.name for c in gpu_check_cases.CASES]
    assert all(len(r) == 3 and 60 <= int(r[1]) <= 540 and r[2] for r in rows)
    assert set(gpu_check_cases.RUNNERS) == {c.name for c in gpu_check_cases.CASES}
    # What the review asked for is covered, each case by name.
    names = {c.name for c in gpu_check_cases.CASES}
    assert {"sru-bidirectional", "sru-k4", "attention-e64", "attention-e128", "demo-graphs", "demo-fp16",
            "parity-cli", "fresh-process", "native", "trtexec", "polygraphy"} <= names  # fmt: skip
    assert gpu_check_cases.PRECISIONS == ("fp32", "fp16")
    with pytest.raises(KeyError, match="unknown case 'nope'; known: mask-types, sru-bidirectional"):
        gpu_check_cases.case_named("nope")


def test_case_models_have_the_shapes_they_claim() -> None:
    tagger = gpu_check_cases.bidirectional_tagger()
    assert gpu_check_cases.sru_layer_shapes(tagger) == [(2, 4), (2, 3)]  # both directions; k = 4 then 3
    assert gpu_check_cases.sru_layer_shapes(gpu_check_cases.language_model("sru-k4")) == [(1, 4), (1, 3)]
    for case, dim in (("attention-e64", 64), ("attention-e128", 128)):
        model = gpu_check_cases.language_model(case)
        assert gpu_check_cases.attention_head_dims(model) == [dim, dim]
        assert gpu_check_cases.PROMPT_LENGTHS[case] > 2 * 64  # past two chunks of the prefill kernel
    import torch

    tokens = torch.randint(0, 16, (3, 7))
    assert tuple(tagger(tokens).shape) == (3, 7, 5)


def _profile():
    from rnnx.runtime.tensorrt import Profile, ShapeRange

    return Profile("prefill", {
        "input_ids": ShapeRange((1, 1), (2, 8), (4, 16)),
        "past_key_values.layers.0.S": ShapeRange((1, 4, 32, 32), (2, 4, 32, 32), (4, 4, 32, 32)),
    })  # fmt: skip


def test_trtexec_shape_args() -> None:
    assert gpu_check_cases.trtexec_shape_args(_profile()) == [
        "--minShapes=input_ids:1x1,past_key_values.layers.0.S:1x4x32x32",
        "--optShapes=input_ids:2x8,past_key_values.layers.0.S:2x4x32x32",
        "--maxShapes=input_ids:4x16,past_key_values.layers.0.S:4x4x32x32",
        "--shapes=input_ids:2x8,past_key_values.layers.0.S:2x4x32x32",
    ]


def test_polygraphy_trt_command() -> None:
    from rnnx.runtime.parity import polygraphy_command

    base = polygraphy_command(Path("/x"), "model.onnx", {"inputs": "in.json", "outputs": "out.json",
                                                        "atol": {"logits": 0.01}, "rtol": 1e-4})  # fmt: skip
    cmd = gpu_check_cases.polygraphy_trt_command(base, Path("/w/plugins_only.onnx"), Path("/b/libs.so"), _profile())
    assert cmd[:3] == ["polygraphy", "run", "/w/plugins_only.onnx"] and "--onnxrt" not in cmd
    at = cmd.index("--trt")
    assert cmd[at : at + 4] == ["--trt", "--strongly-typed", "--plugins", "/b/libs.so"]
    assert cmd[cmd.index("--trt-min-shapes") + 1 : cmd.index("--trt-opt-shapes")] == [
        "input_ids:[1,1]", "past_key_values.layers.0.S:[1,4,32,32]"]  # fmt: skip
    assert cmd[cmd.index("--trt-max-shapes") + 1] == "input_ids:[4,16]"
    tail = base[base.index("--onnxrt") + 1 :]
    assert cmd[-len(tail) :] == tail and "--load-inputs" in tail and "--load-outputs" in tail
    with pytest.raises(ValueError, match="not an export's polygraphy command"):
        gpu_check_cases.polygraphy_trt_command(["trtexec"], Path("m"), Path("p"), _profile())


def test_parse_native_rows() -> None:
    out = "rnnx-generate: note\nrow 0: 1 2 3\nrow 1:\nrow 2: 7\nmedian step 10 us\n"
    assert gpu_check_cases.parse_native_rows(out) == {0: [1, 2, 3], 1: [], 2: [7]}


def test_case_runner_reports_one_line_and_exit_code(tmp_path: Path, monkeypatch, capsys) -> None:
    """run_case's protocol with gpu_check.sh: PASS -> 0, CheckFailed -> 1 (FAIL line), Skip -> 77, crash -> 1."""

    def fail(ctx):
        raise gpu_check_cases.CheckFailed("logits off")

    def skip(ctx):
        raise gpu_check_cases.Skip("no trtexec")

    def crash(ctx):
        raise RuntimeError("boom\nsecond line")

    ctx = gpu_check_cases.Context(tmp_path, None, None)
    for runner, code, last in ((lambda ctx: "fine", 0, "PASS: fine"), (fail, 1, "FAIL: logits off"),
                               (skip, 77, "SKIP: no trtexec"), (crash, 1, "FAIL: RuntimeError: boom")):  # fmt: skip
        monkeypatch.setitem(gpu_check_cases.RUNNERS, "native", runner)
        assert gpu_check_cases.run_case("native", ctx) == code
        assert capsys.readouterr().out.splitlines()[-1] == last


# -- plugin_enqueue_gpu --dtype (the sanitizer steps run one activation type at a time) ---------------------


def check_dtype_option(executable: Path) -> None:
    """``--dtype`` on an enqueue test binary (the emulated one here: same main and cases as plugin_enqueue_gpu)."""
    every = subprocess.run([str(executable)], capture_output=True, text=True, timeout=600)
    assert every.returncode == 0, every.stdout[-3000:] + every.stderr[-3000:]
    total = every.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"[1-9][0-9]* passed, 0 failed", total), total
    for dtype in ("fp16", "bf16,fp32"):
        result = subprocess.run([str(executable), "--dtype", dtype], capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        wanted = " ".join(d for d in ("fp32", "fp16", "bf16") if d in dtype.split(","))
        assert f"activation types: {wanted} (a case written for another type runs nothing)" in result.stdout
        assert result.stdout.strip().splitlines()[-1] == total  # every case runs, each for the types it covers
    for bad in (["--dtype", "fp64"], ["--dtype"], ["--dtype", ""], ["--frob"]):
        result = subprocess.run([str(executable), *bad], capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and result.stdout.strip(), (bad, result.stdout)


def _configured_from(build: Path) -> Path | None:
    """The source folder a CMake build folder was configured from (None when it has no cache yet)."""
    cache = build / "CMakeCache.txt"
    if not cache.is_file():
        return None
    for line in cache.read_text().splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY"):
            return Path(line.split("=", 1)[1])
    return None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot build the plugin tests")
def test_enqueue_test_dtype_option_on_the_emulation() -> None:
    from rnnx import plugins

    if plugins.find_nvcc() is None:
        pytest.skip("nvcc not found (CUDA toolkit): cannot configure the plugin build")
    from test_plugins import BUILD_DIR as build  # the build tests/test_plugins.py uses (incremental)

    source = _configured_from(build)
    if source is not None and source.resolve() != plugins.SOURCE_DIR:
        pytest.skip(f"{build} was configured from another checkout ({source}): CMake cannot reuse it")
    plugins.build_plugins(build, targets=("plugin_enqueue_emulated",), quiet=True)
    check_dtype_option(build / "tests" / "plugin_enqueue_emulated")
