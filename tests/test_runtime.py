"""Runtime sessions on the torch backend: prefill / step / generate semantics, forks, save / load,
validation errors that leave the session usable, and sessions used from two threads."""

import threading

import numpy as np
import pytest

import rnnx.runtime as rt
from rnnx.models.checkpoint import demo_checkpoint_path
from rnnx.runtime import InputError
from rnnx.runtime.parity import errors


def assert_close(got, want, rel=1e-5, what=""):
    """max |got - want| <= rel * max |want| (state magnitudes reach the hundreds)."""
    max_abs, max_rel = errors(np.asarray(got), np.asarray(want))
    assert max_rel <= rel, f"{what}: max abs {max_abs:.3e}, max rel {max_rel:.3e} > {rel:g}"


PROMPTS = [[1, 2, 3, 4, 5, 10], [7, 10], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 10]]


@pytest.fixture(scope="module", params=["linear_transformer_copy", "srupp_linear_copy"])
def session(request):
    return rt.load(demo_checkpoint_path(request.param))


def test_load_picks_torch_for_a_checkpoint(session):
    assert session.backend.name == "torch" and session.vocab_size == 12
    assert session.backend.state_names and all(s.batch_axis in (0, 1) for s in session.backend.state_specs)


def test_model_copies_the_prompt(session):
    out = session.generate_all([[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 10]], 10, temperature=0)
    assert out == [[3, 1, 4, 1, 5, 9, 2, 6, 5, 3]]


def test_prefill_equals_token_by_token(session):
    state = session.prefill([PROMPTS[2]])
    one = session.prefill([PROMPTS[2][:1]])
    for t in PROMPTS[2][1:]:
        session.step([t], state=one)
    assert_close(one.last_logits, state.last_logits, what="logits")
    for name, a in state.to_host().items():
        assert_close(one.to_host()[name], a, what=name)


def test_pads_do_not_change_state(session):
    batched = session.prefill(PROMPTS)
    for row, prompt in enumerate(PROMPTS):
        alone = session.prefill([prompt])
        assert_close(batched.last_logits[row], alone.last_logits[0], what="logits")
        host_b, host_a = batched.to_host(), alone.to_host()
        for spec in session.backend.state_specs:
            got = np.take(host_b[spec.name], [row], axis=spec.batch_axis)
            assert_close(got, host_a[spec.name], what=spec.name)


def test_batched_generation_equals_each_row_alone(session):
    batched = session.generate_all(PROMPTS, 24, temperature=0, stop_tokens=(10,))
    for row, prompt in enumerate(PROMPTS):
        assert session.generate_all([prompt], 24, temperature=0, stop_tokens=(10,)) == [batched[row]]
    sampled = session.generate_all(PROMPTS, 16, temperature=1.0, top_k=5, seed=3)
    assert session.generate_all(PROMPTS, 16, temperature=1.0, top_k=5, seed=3) == sampled
    assert session.generate_all(PROMPTS[:1], 16, temperature=1.0, top_k=5, seed=3) == sampled[:1]


def test_generate_streams_per_step_and_stops_per_row(session):
    prompts = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 10], [5, 6, 7, 8, 9, 9, 8, 7, 6, 5, 10]]
    steps = list(session.generate(prompts, 8, temperature=0, stop_tokens=(3,)))
    assert len(steps) == 8 and all(len(s) == 2 for s in steps)
    assert [s[0] for s in steps[:3]] == [1, 2, 3] and all(s[0] is None for s in steps[3:])
    assert [s[1] for s in steps[:4]] == [5, 6, 7, 8]
    assert next(iter(session.generate([[1]], 0)), "empty") == "empty"


def test_fork_continues_identically_to_parent(session):
    parent = session.prefill([PROMPTS[0], PROMPTS[2]])
    child = parent.fork()
    a = [session.step([3, 4], state=parent) for _ in range(5)]
    b = [session.step([3, 4], state=child) for _ in range(5)]
    np.testing.assert_array_equal(np.stack(a), np.stack(b))
    session.step([0, 0], state=child)  # the child moving on leaves the parent alone
    moved, kept = child.to_host(), parent.to_host()
    assert any(not np.array_equal(kept[n], moved[n]) for n in kept)
    twin = parent.fork()
    np.testing.assert_array_equal(session.step([3, 4], state=parent), session.step([3, 4], state=twin))


def test_save_and_load_state_roundtrip(session, tmp_path):
    state = session.prefill(PROMPTS)
    path = state.save(tmp_path / "s.npz")
    want = session.step([1, 2, 3], state=state.fork())
    loaded = session.load_state(path)
    assert loaded.batch == 3 and loaded.past_length == state.past_length
    np.testing.assert_array_equal(session.step([1, 2, 3]), want)


def test_state_of_another_model_is_refused(session, tmp_path):
    other_name = (
        "srupp_linear_copy" if session.metadata["model_type"] == "linear_transformer" else "linear_transformer_copy"
    )
    other = rt.load(demo_checkpoint_path(other_name))
    path = other.prefill([[1, 2]]).save(tmp_path / "other.npz")
    with pytest.raises(InputError, match="different model"):
        session.load_state(path)
    with pytest.raises(InputError, match="different model"):
        session.step([1], state=other.state)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda s: s.step([1, 2]), "batch mismatch: state has 1 rows, got 2"),
        (lambda s: s.step([[1, 2]]), r"expected shape \(B,\) or \(B, 1\)"),
        (lambda s: s.step([12]), "token 12 out of vocabulary"),
        (lambda s: s.step([-1]), "token -1 out of vocabulary"),
        (lambda s: s.step(np.array([1.5])), "expected an integer dtype"),
        (lambda s: s.prefill([[1, 2], []]), "at least one token"),
        (lambda s: s.prefill(np.zeros((2, 3), np.int64), lengths=[1, 4]), "<= L = 3"),
        (lambda s: s.import_state({"nope": np.zeros(1)}), "missing"),
    ],
)
def test_bad_inputs_raise_clearly_and_leave_session_usable(session, call, match):
    session.prefill([[4, 5, 6, 10]])
    before = session.state.fork()
    with pytest.raises(InputError, match=match):
        call(session)
    np.testing.assert_array_equal(session.step([4]), session.step([4], state=before))


def test_wrong_state_tensor_shape_names_the_tensor(session):
    host = session.prefill([[1, 2]]).to_host()
    name = session.backend.state_names[-1]
    host[name] = host[name][..., :-1] if host[name].ndim > 1 else host[name][:0]
    with pytest.raises(InputError, match=f"state tensor '{name}': expected shape"):
        session.import_state(host)


def test_two_sessions_in_two_threads_do_not_share_state(session):
    backend = session.backend
    prompts = {0: [[1, 2, 3, 10]], 1: [[9, 9, 8, 7, 10]]}
    want = {k: rt.Session(backend).generate_all(p, 40, temperature=0) for k, p in prompts.items()}
    got, errors = {}, []
    barrier = threading.Barrier(2)

    def worker(k):
        try:
            own = rt.Session(backend)
            barrier.wait()
            for _ in range(3):
                got[k] = own.generate_all(prompts[k], 40, temperature=0)
                assert got[k] == want[k]
        except BaseException as e:  # reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and got == want


def test_one_session_from_two_threads_at_once_is_refused(session):
    session.prefill([[1, 2, 3]])
    session._guard.acquire()  # as if another thread were inside a call
    try:
        with pytest.raises(rt.RnnxRuntimeError, match="one session per thread"):
            session.step([1])
    finally:
        session._guard.release()
    assert session.step([1]).shape == (1, 12)
