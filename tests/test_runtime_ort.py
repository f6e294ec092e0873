"""ONNX Runtime (CPU EP) backend against the torch backend on the exported demo models: 256 greedy
steps with identical tokens and per-step logits / state errors within tolerance, batched generation
with mixed prompt lengths, forks, cross-backend state save / load, and the CLIs. The IO-binding path
(the CUDA EP's) runs on the CPU EP too, checked against the unbound session by the same helper as the
CUDA test, with forks and save / load across bound and unbound sessions."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from prompt_cases import PARSED, REFUSED, expected_error

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.models.training.copy_task import task_prompts
from rnnx.runtime.cli import generate_main, parse_prompt
from rnnx.runtime.parity import ParityReport, compare_backends
from rnnx.runtime.parity.cli import main as parity_main

#: fp32 export vs PyTorch, relative to each tensor's magnitude, at every one of 256 steps.
TOLERANCE = 1e-4
#: io_binding=True vs False on the CPU EP: the same graph on the same EP, absolute and relative.
BOUND_TOLERANCE = 1e-6
CASES = [(name, target) for name in DEMO_CHECKPOINTS for target in ("tensorrt", "onnxruntime")]
MIXED = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 10], [4, 4, 2, 10], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 10]]


@pytest.fixture(scope="module")
def exports(demo_exports):
    return demo_exports


@pytest.fixture(scope="module")
def torch_sessions():
    return {name: rt.load(demo_checkpoint_path(name)) for name in DEMO_CHECKPOINTS}


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_ort_matches_torch_over_256_greedy_steps(case, exports, torch_sessions):
    ort = rt.load(exports[case])
    assert ort.backend.name == "onnxruntime" and ort.backend.device == "cpu"
    reference = torch_sessions[case[0]]
    task = json.loads((demo_checkpoint_path(case[0]) / "config.json").read_text())["task"]
    prompts = task_prompts(task, ort.vocab_size)
    assert len({len(p) for p in prompts}) > 1  # mixed prompt lengths
    report = compare_backends(reference.backend, ort.backend, prompts, steps=256, tolerance=TOLERANCE)
    assert len(report.steps) == 257
    assert report.worst_rel <= TOLERANCE, report.verdict()
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
    result = CliRunner().invoke(
        parity_main, [path, "--backend", "onnxruntime", "--steps", "8", "--prompt", "3 5 7 1 2 3 4 5 6 7 10"]
    )
    assert result.exit_code == 0, result.output
    assert "no diverging token" in result.output and "PASS" in result.output
    assert len([ln for ln in result.output.splitlines() if ln.strip()[:1].isdigit()]) == 9
    result = CliRunner().invoke(
        generate_main, [path, "--prompt", "3 5 7 1 2 3 4 5 6 7 10", "--max-new-tokens", "10", "--temperature", "0"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.split()[-10:] == "3 5 7 1 2 3 4 5 6 7".split()
    result = CliRunner().invoke(generate_main, [path, "--prompt", "3 12", "--max-new-tokens", "2"])
    assert result.exit_code != 0 and "token 12 out of vocabulary" in result.output


def test_cli_prompts_follow_the_shared_syntax(exports):
    """rnnx-generate reads tests/prompt_cases.py's prompts as C and JavaScript do (docs/embedding.md, "Prompts"):
    the ids each parses, the tokens a comma-and-space prompt generates, one error naming each refused piece."""
    assert [parse_prompt(text) for text, _ in PARSED] == [ids for _, ids in PARSED]
    path = str(exports[("linear_transformer_copy", "onnxruntime")])
    want = rt.load(path, backend="onnxruntime").generate_all([[3, 5, 7, 10]], 4, temperature=0)[0]
    result = CliRunner().invoke(generate_main, [path, "--prompt", "3, 5,7 10", "--max-new-tokens", "4"])
    assert result.exit_code == 0 and result.output.split()[-4:] == [str(t) for t in want], result.output
    for text, piece in REFUSED:
        result = CliRunner().invoke(generate_main, [path, "--prompt", text, "--max-new-tokens", "1"])
        assert result.exit_code == 2 and expected_error(text, piece) in result.output, (text, result.output)


def _assert_bound_state(state: rt.State, device_type: str) -> None:
    """Every state tensor is an OrtValue on ``device_type``: the session really runs the bound path."""
    import onnxruntime

    assert state.inner.tensors and state.inner.extra["placement"].startswith(f"OrtValues on {device_type}:")
    for name, tensor in state.inner.tensors.items():
        assert isinstance(tensor, onnxruntime.OrtValue), f"{name}: {type(tensor).__name__}"
        assert tensor.device_name().lower() == device_type, f"{name}: on {tensor.device_name()}"


def _check_bound_session(bound: rt.Session, reference: rt.Session, device_type: str, tolerance: float) -> ParityReport:
    """``bound`` (io_binding on ``device_type``) keeps OrtValue state there across prefill and 64 steps,
    gives ``reference``'s greedy tokens over 64 steps of generate with the MIXED prompts, and per-step
    logits / state within ``tolerance`` (relative). Returns the parity report."""
    assert bound.backend.io_binding and "IO binding" in bound.backend.describe()
    _assert_bound_state(bound.prefill(MIXED), device_type)
    assert bound.generate_all(MIXED, 64, temperature=0) == reference.generate_all(MIXED, 64, temperature=0)
    _assert_bound_state(bound.state, device_type)
    assert bound.state.past_length == reference.state.past_length
    report = compare_backends(reference.backend, bound.backend, MIXED, steps=64, tolerance=tolerance)
    assert len(report.steps) == 65 and report.divergence is None
    assert report.worst_rel <= tolerance, report.verdict()
    return report


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_ort_io_binding_on_cpu_matches_unbound(case, exports):
    """The CUDA EP's IO-binding code on the CPU EP: OrtValue state, and the unbound session's greedy
    tokens, logits and state within 1e-6 (absolute and relative) at every one of 64 steps."""
    unbound = rt.load(exports[case])
    bound = rt.load(exports[case], backend="onnxruntime", device="cpu", io_binding=True)
    assert unbound.backend.io_binding is False and bound.backend.device == "cpu"
    assert isinstance(unbound.prefill(MIXED).inner.tensors[unbound.backend.state_names[0]], np.ndarray)
    report = _check_bound_session(bound, unbound, "cpu", BOUND_TOLERANCE)
    assert max(e.max_abs for s in report.steps for e in s.errors) <= BOUND_TOLERANCE


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_ort_io_binding_fork_is_independent(name, exports):
    """A fork of a bound state owns new OrtValues: advancing the parent leaves it unchanged, and it
    continues exactly like a fresh run of the parent; host copies never alias the state either."""
    bound = rt.load(exports[(name, "onnxruntime")], io_binding=True)
    tokens = [[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 10, 1]]
    parent = bound.prefill(MIXED)
    child = parent.fork()
    _assert_bound_state(child, "cpu")
    for key, tensor in child.inner.tensors.items():
        assert tensor.data_ptr() != parent.inner.tensors[key].data_ptr(), key
    before, past = child.to_host(), child.past_length
    scribbled = child.to_host()
    for array in scribbled.values():
        array.fill(123.0)  # a host copy: writing to it must not reach the state
    parent_logits = [bound.step(t, state=parent) for t in tokens]
    assert child.past_length == past and parent.past_length == past + len(tokens)
    for key, array in child.to_host().items():
        np.testing.assert_array_equal(array, before[key], err_msg=key)
    fresh = bound.prefill(MIXED)
    want = [bound.step(t, state=fresh) for t in tokens]
    got = [bound.step(t, state=child) for t in tokens]
    np.testing.assert_array_equal(np.stack(got), np.stack(want))
    np.testing.assert_array_equal(np.stack(parent_logits), np.stack(want))
    for key, array in child.to_host().items():
        np.testing.assert_array_equal(array, fresh.to_host()[key], err_msg=key)
    _assert_bound_state(child, "cpu")


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_ort_io_binding_state_save_load_across_bound_and_unbound(name, exports, tmp_path):
    """bound -> file -> unbound -> file -> bound: identical host tensors, last logits and next steps;
    a bound state handed straight to an unbound session is refused with a pointer to import_state."""
    path = exports[(name, "onnxruntime")]
    bound, unbound = rt.load(path, io_binding=True), rt.load(path, io_binding=False)
    state = bound.prefill(MIXED)
    for t in ([1, 2, 3], [4, 5, 6]):
        bound.step(t, state=state, active=[True, False, True])
    moved = unbound.load_state(state.save(tmp_path / "bound.npz"))
    assert isinstance(moved.inner.tensors[unbound.backend.state_names[0]], np.ndarray)
    assert (moved.batch, moved.past_length) == (state.batch, state.past_length)
    np.testing.assert_array_equal(moved.last_logits, state.last_logits)
    for key, array in state.to_host().items():
        np.testing.assert_array_equal(moved.to_host()[key], array, err_msg=key)
    back = bound.load_state(moved.save(tmp_path / "unbound.npz"))
    _assert_bound_state(back, "cpu")
    assert back.past_length == state.past_length
    steps = [session.step([7, 8, 9], state=s) for session, s in ((bound, state), (unbound, moved), (bound, back))]
    np.testing.assert_allclose(steps[1], steps[0], rtol=0, atol=BOUND_TOLERANCE)
    np.testing.assert_array_equal(steps[2], steps[0])
    for key, array in state.to_host().items():
        np.testing.assert_array_equal(back.to_host()[key], array, err_msg=key)
    with pytest.raises(rt.InputError, match=r"holds OrtValues on cpu:0.*numpy arrays.*import_state"):
        unbound.step([1, 2, 3], state=state)
    with pytest.raises(rt.InputError, match=r"holds numpy arrays.*OrtValues on cpu:0"):
        bound.step([1, 2, 3], state=moved)
    _assert_bound_state(bound.import_state(moved.to_host()), "cpu")


def test_io_binding_option_errors(exports):
    path = exports[("linear_transformer_copy", "onnxruntime")]
    with pytest.raises(rt.InputError, match="io_binding: only the onnxruntime backend takes it, but backend 'torch'"):
        rt.load(path, backend="torch", io_binding=True)
    with pytest.raises(rt.InputError, match="backend 'auto' chose 'torch'"):
        rt.load(demo_checkpoint_path("linear_transformer_copy"), io_binding=False)
    with pytest.raises(rt.InputError, match="io_binding: expected True, False or None, got 'yes'"):
        rt.load(path, backend="onnxruntime", io_binding="yes")
    assert rt.load(path, backend="torch", io_binding=None).backend.name == "torch"


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
    """The CUDA EP with IO binding (the default there): the same check as the CPU EP's bound session
    (:func:`_check_bound_session`), state in CUDA OrtValues, against the CPU EP within the fp32 tolerance."""
    cpu = rt.load(exports[(name, "onnxruntime")], device="cpu")
    gpu = rt.load(exports[(name, "onnxruntime")], device="cuda")
    assert gpu.backend.device.startswith("cuda")
    _check_bound_session(gpu, cpu, "cuda", TOLERANCE)
