"""ONNX Runtime (CPU EP) backend against the torch backend on the exported demo models: 256 greedy
steps with identical tokens and per-step logits / state errors within tolerance, batched generation
with mixed prompt lengths, forks, cross-backend state save / load, and the CLIs."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt  # noqa: E402
from rnnx.export import export_model  # noqa: E402
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path  # noqa: E402
from rnnx.runtime.cli import generate_main, parity_main  # noqa: E402
from rnnx.runtime.parity import compare_sessions, default_prompts  # noqa: E402

#: fp32 export vs PyTorch, relative to each tensor's magnitude, at every one of 256 steps.
TOLERANCE = 1e-4
CASES = [(name, target) for name in DEMO_CHECKPOINTS for target in ("tensorrt", "onnxruntime")]
MIXED = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 10], [4, 4, 2, 10], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 10]]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("runtime_exports")
    return {
        (name, target): export_model(str(demo_checkpoint_path(name)), root / f"{name}-{target}", target=target, check=False).out_dir
        for name, target in CASES
    }


@pytest.fixture(scope="module")
def torch_sessions():
    return {name: rt.load(demo_checkpoint_path(name)) for name in DEMO_CHECKPOINTS}


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_ort_matches_torch_over_256_greedy_steps(case, exports, torch_sessions):
    ort = rt.load(exports[case])
    assert ort.backend.name == "onnxruntime" and ort.backend.device == "cpu"
    reference = torch_sessions[case[0]]
    task = json.loads((demo_checkpoint_path(case[0]) / "config.json").read_text())["task"]
    prompts = default_prompts(ort.metadata, task)
    assert len({len(p) for p in prompts}) > 1  # mixed prompt lengths
    report = compare_sessions(reference, ort, prompts, steps=256, tolerance=TOLERANCE)
    assert len(report.steps) == 257
    worst = max(report.steps, key=lambda s: max(s.logits_rel, s.state_rel))
    assert report.worst_rel <= TOLERANCE, f"step {worst.step}: {worst}"
    assert report.divergence is None
    assert ort.generate_all(prompts, 256, temperature=0) == reference.generate_all(prompts, 256, temperature=0)


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_ort_batched_generation_equals_each_row_alone(name, exports, torch_sessions):
    ort = rt.load(exports[(name, "tensorrt")])
    batched = ort.generate_all(MIXED, 20, temperature=0)
    assert batched == torch_sessions[name].generate_all(MIXED, 20, temperature=0)
    for row, prompt in enumerate(MIXED):
        assert ort.generate_all([prompt], 20, temperature=0) == [batched[row]]
    assert batched[0][:10] == MIXED[0][:10]  # the demo really copies
    assert ort.generate_all(MIXED, 12, top_p=0.9, seed=5) == ort.generate_all(MIXED, 12, top_p=0.9, seed=5)


def test_ort_fork_and_cross_backend_state(exports, torch_sessions, tmp_path):
    name = "srupp_linear_copy"
    ort = rt.load(exports[(name, "onnxruntime")])
    torch_session = torch_sessions[name]
    parent = ort.prefill(MIXED)
    child = parent.fork()
    a = [ort.step([1, 2, 3], state=parent) for _ in range(4)]
    b = [ort.step([1, 2, 3], state=child) for _ in range(4)]
    np.testing.assert_array_equal(np.stack(a), np.stack(b))
    path = parent.save(tmp_path / "state.npz")
    moved = torch_session.load_state(path)  # same model, other backend
    got, want = torch_session.step([5, 6, 7], state=moved), ort.step([5, 6, 7], state=parent)
    assert np.max(np.abs(got - want)) <= TOLERANCE * np.max(np.abs(want))
    with pytest.raises(rt.InputError, match="made by backend 'torch'"):
        ort.step([1, 2, 3], state=moved)
    with pytest.raises(rt.InputError, match="out of vocabulary"):
        ort.step([1, 99, 3], state=parent)
    assert ort.step([1, 2, 3], state=parent).shape == (3, 12)


def test_auto_backend_and_errors(exports):
    path = exports[("linear_transformer_copy", "tensorrt")]
    assert rt.load(path).backend.name == "onnxruntime"
    assert rt.load(path, backend="torch").backend.name == "torch"  # from rnnx.json source.checkpoint
    with pytest.raises(rt.InputError, match="needs an export directory"):
        rt.load(demo_checkpoint_path("linear_transformer_copy"), backend="onnxruntime")
    with pytest.raises(rt.InputError, match="precision is 'fp32', requested 'fp16'"):
        rt.load(path, backend="onnxruntime", precision="fp16")
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        with pytest.raises(rt.BackendUnavailable, match="TensorRT"):
            rt.load(path, backend="tensorrt", device="cuda")


def test_cli_parity_and_generate(exports):
    path = str(exports[("linear_transformer_copy", "onnxruntime")])
    result = CliRunner().invoke(parity_main, [path, "--backend", "onnxruntime", "--steps", "8", "--prompt", "3 5 7 1 2 3 4 5 6 7 10"])
    assert result.exit_code == 0, result.output
    assert "first diverging token: none" in result.output and "PASS" in result.output
    assert len([ln for ln in result.output.splitlines() if ln.strip()[:1].isdigit()]) == 9
    result = CliRunner().invoke(generate_main, [path, "--prompt", "3 5 7 1 2 3 4 5 6 7 10", "--max-new-tokens", "10", "--temperature", "0"])
    assert result.exit_code == 0, result.output
    assert result.output.split()[-10:] == "3 5 7 1 2 3 4 5 6 7".split()
    result = CliRunner().invoke(generate_main, [path, "--prompt", "3 12", "--max-new-tokens", "2"])
    assert result.exit_code != 0 and "token 12 out of vocabulary" in result.output


def _ort_cuda_available() -> bool:
    import onnxruntime

    try:
        import torch
    except ImportError:
        return False
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers() and torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _ort_cuda_available(), reason="needs onnxruntime-gpu (CUDAExecutionProvider) and a CUDA device")
@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_ort_cuda_keeps_state_on_device_and_matches_cpu(name, exports):
    """The CUDA EP with IO binding: state stays in device OrtValues between steps, and 64 greedy steps
    give the CPU EP's tokens with logits within the fp32 tolerance."""
    cpu = rt.load(exports[(name, "onnxruntime")], device="cpu")
    gpu = rt.load(exports[(name, "onnxruntime")], device="cuda")
    assert gpu.backend.device.startswith("cuda")
    state = gpu.prefill(MIXED)
    for tensor in state.inner.tensors.values():
        assert tensor.device_name().lower() == "cuda"
    assert gpu.generate_all(MIXED, 64, temperature=0) == cpu.generate_all(MIXED, 64, temperature=0)
    report = compare_sessions(cpu, gpu, MIXED, steps=64, tolerance=TOLERANCE)
    assert report.worst_rel <= TOLERANCE and report.divergence is None
