"""A thin runtime on the ONNX Runtime backend (issue 30, items 2 and 3): ``Session.step`` and
``StatefulSession.run`` give exactly what the bare ``InferenceSession.run`` of the same feeds gives, feed the
state back as the graph returned it (no copies), keep every check of a bad input on their cheap common path
(numpy arrays, small and large token arrays, masks of any batch), and hand out specs the caller may change
freely; the backend's intra-op thread default (one thread for a small export on the CPU) and its override."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.runtime.backends import ort_backend
from rnnx.runtime.backends.ort_backend import OrtBackend


@pytest.fixture(scope="module")
def exports(demo_exports):
    return {name: demo_exports[(name, "onnxruntime")] for name in DEMO_CHECKPOINTS}


@pytest.fixture(scope="module", params=DEMO_CHECKPOINTS)
def session(request, exports):
    return rt.load(exports[request.param], backend="onnxruntime")


def _bare(backend: OrtBackend, state: rt.State, token: int) -> list[np.ndarray]:
    names = [o.name for o in backend.session.get_outputs()]
    feeds = {"input_ids": np.array([[token]]), "attention_mask": np.ones((1, 1), np.int64)}
    feeds.update({s.input: state.inner.tensors[s.name] for s in backend.state_specs})
    return backend.session.run(names, feeds)


def test_step_and_run_give_what_the_bare_graph_call_gives(session):
    state = session.prefill([[1, 2, 3]])
    backend = session.backend
    for token in (4, 7, 0, 11):
        want = _bare(backend, state, token)
        got = session.step(np.array([token]) if token % 2 else [token], state)
        np.testing.assert_array_equal(got, want[0][:, 0])
        np.testing.assert_array_equal(state.last_logits, want[0][:, 0])
        assert state.last_logits is not got  # the state keeps its own copy
        for spec, array in zip(backend.state_specs, want[1:]):
            np.testing.assert_array_equal(state.inner.tensors[spec.name], array)
    past, want = state.past_length, _bare(backend, state, 5)
    out = session.run({"input_ids": np.array([[5]]), "attention_mask": [[1]]}, state=state)
    np.testing.assert_array_equal(out["logits"], want[0])
    assert state.past_length == past + 1 and session.state is state


def test_state_is_fed_back_as_the_graph_returned_it(exports):
    session = rt.load(exports["srupp_linear_copy"], backend="onnxruntime")
    state = session.prefill([[1, 2, 3]])
    real, fed, returned = session.backend.session, [], []

    class Recording:
        def run(self, names, feed, run_options=None):
            fed.append(feed)
            returned.append(real.run(names, feed, run_options))
            return returned[-1]

    session.backend.session = Recording()
    for token in (4, 5, 6):
        session.step([token], state)
    n = len(session.backend.outputs)
    for before, after in zip(returned, fed[1:]):
        for spec, array in zip(session.backend.state_specs, before[n:]):
            assert after[spec.input] is array, spec.name


def test_plain_token_lists_and_every_other_kind_of_token_input_agree(session):
    """The list-of-ints fast lane of ``step`` gives what arrays, (B, 1) lists and numpy ints give."""
    base = session.prefill([[1, 2], [3], [4, 5, 6]])
    kinds = [[1, 5, 11], np.array([1, 5, 11]), np.array([[1], [5], [11]], np.int32), [[1], [5], [11]],
             [np.int64(1), 5, 11], (1, 5, 11)]  # fmt: skip
    results = []
    for tokens in kinds:
        state = base.fork()
        results.append((session.step(tokens, state), state.last_logits, state.past_length))
    for logits, last, past in results[1:]:
        np.testing.assert_array_equal(logits, results[0][0])
        np.testing.assert_array_equal(last, results[0][1])
        assert past == results[0][2] == base.past_length + 1


def test_step_masks_of_every_batch_size(session):
    for prompts in ([[1, 2]], [[1, 2], [3], [4, 5, 6]], [[7], [8]], [[9]]):
        state = session.prefill(prompts)
        fork = state.fork()
        tokens = np.arange(len(prompts)) + 1
        np.testing.assert_array_equal(
            session.step(tokens, state), session.step(tokens, fork, active=[True] * len(prompts))
        )
        assert state.past_length == fork.past_length
    assert all((mask == 1).all() for mask in session._masks.values())


LONG = [t % 12 for t in range(100)]

BAD = [
    (lambda s: s.step([12]), "token 12 out of vocabulary"),
    (lambda s: s.step(np.array([-1])), "token -1 out of vocabulary"),
    (lambda s: s.step(np.array([12], np.int32)), "token 12 out of vocabulary"),
    (lambda s: s.step(np.array([[3]], np.uint8) + 9), "token 12 out of vocabulary"),
    (lambda s: s.step([1.0]), "expected an integer dtype"),
    (lambda s: s.step([True]), "expected an integer dtype"),
    (lambda s: s.step([np.int64(12)]), "token 12 out of vocabulary"),
    (lambda s: s.step([3.0]), "expected an integer dtype"),
    (lambda s: s.step(["3"]), "expected an integer dtype"),
    (lambda s: s.step([1, 2]), "batch mismatch: state has 1 rows, got 2"),
    (lambda s: s.step([[1, 2]]), r"expected shape \(B,\) or \(B, 1\)"),
    (lambda s: s.step([1], active=[True, False]), r"active: expected shape \(1,\)"),
    (lambda s: s.step([12], active=[True]), "token 12 out of vocabulary"),
    (lambda s: s.prefill([[1, 2, -3]]), "token -3 out of vocabulary"),
    (lambda s: s.prefill([LONG + [12]]), "token 12 out of vocabulary"),
    (lambda s: s.prefill(np.array([LONG + [-5]])), "token -5 out of vocabulary"),
    (lambda s: s.run({"input_ids": np.array([[1, 2]]), "attention_mask": np.array([[1]])}), "has size 1, but"),
    (lambda s: s.run({"input_ids": np.array([1]), "attention_mask": np.array([1])}), "expected 2 dims"),
    (lambda s: s.run({"input_ids": np.array([[1.0]]), "attention_mask": [[1]]}), "expected int64 values"),
    (lambda s: s.run({"input_ids": np.array([[1]])}), r"missing \['attention_mask'\]"),
    (lambda s: s.run({"input_ids": [[1]], "attention_mask": [[1]], "x": [[1]]}), r"unknown \['x'\]"),
    (lambda s: s.run({"input_ids": np.zeros((1, 0), np.int64), "attention_mask": np.zeros((1, 0), np.int64)}), "empty"),
    (lambda s: s.run({"input_ids": np.ones((2, 1), np.int64), "attention_mask": np.ones((2, 1), np.int64)}),
     "batch mismatch"),
]  # fmt: skip


@pytest.mark.parametrize("call, match", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_inputs_still_raise_and_change_nothing(session, call, match):
    session.prefill([[4, 5, 6, 10]])
    before = session.state.fork()
    with pytest.raises(rt.InputError, match=match):
        call(session)
    np.testing.assert_array_equal(session.step([4]), session.step([4], state=before))


def test_an_out_of_vocabulary_token_in_a_pad_row_is_not_checked(session):
    """Only real tokens are checked: a row that ``active`` turns off may hold any token id that the graph
    can embed (here one inside the vocabulary), and a wrong one in a real row is still named."""
    state = session.prefill([[1, 2], [3, 4]])
    session.step([5, 0], state, active=[True, False])
    with pytest.raises(rt.InputError, match="token 12 out of vocabulary"):
        session.step([5, 12], state, active=[True, True])


def test_specs_are_read_once_and_handed_out_as_copies(exports):
    backend = OrtBackend(exports["linear_transformer_copy"])
    backend.inputs.clear()
    backend.outputs.append(None)
    assert [t.name for t in backend.inputs] == ["input_ids", "attention_mask"]
    assert [t.name for t in backend.outputs] == ["logits"]
    specs = backend.call_specs()
    assert backend.call_specs() is specs and specs.length_axes == (("input_ids", 1), ("attention_mask", 1))
    backend.metadata = dict(backend.metadata)  # another metadata object is read anew
    assert backend.call_specs() is not specs and backend.call_specs().inputs == specs.inputs
    assert backend.batch_of({"attention_mask": np.ones((3, 5))}) == 3
    assert backend.call_length({"input_ids": [[1, 2]]}) == 2


def test_the_cpu_backend_calls_the_compiled_run_and_keeps_the_missing_input_error(exports):
    backend = OrtBackend(exports["linear_transformer_copy"])
    compiled, calls = backend.session._sess, []

    class Counting:  # the compiled session, its run calls counted
        def __getattr__(self, name):
            return getattr(compiled, name)

        def run(self, *args):
            calls.append(args)
            return compiled.run(*args)

    backend.session._sess = Counting()
    outputs, state = backend.run({"input_ids": np.array([[1, 2]]), "attention_mask": np.ones((1, 2), np.int64)},
                                 backend.init_state(1))  # fmt: skip
    assert len(calls) == 1 and state.past_length == 2 and outputs["logits"].shape == (1, 2, 12)
    with pytest.raises(ValueError, match=r"Required inputs \(\['attention_mask'\]\) are missing"):
        backend.run({"input_ids": np.array([[1]])}, state)
    assert len(calls) == 1


def test_thread_default_and_override(exports, monkeypatch):
    path = exports["linear_transformer_copy"]
    small = OrtBackend(path)
    assert small.weight_bytes() < ort_backend.ONE_THREAD_BELOW_BYTES
    assert small.threads == 1 and small.session.get_session_options().intra_op_num_threads == 1
    for threads in (0, 2):
        backend = OrtBackend(path, threads=threads)
        assert backend.threads == threads
        assert backend.session.get_session_options().intra_op_num_threads == threads
    assert rt.load(path, backend="onnxruntime", threads=2).backend.threads == 2
    monkeypatch.setattr(ort_backend, "ONE_THREAD_BELOW_BYTES", small.weight_bytes())  # as if the export were large
    assert OrtBackend(path).threads == 0
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(rt.InputError, match="threads: expected None or an integer >= 0"):
            OrtBackend(path, threads=bad)
    with pytest.raises(rt.InputError, match="threads: only the onnxruntime backend takes it, but backend 'torch'"):
        rt.load(demo_checkpoint_path("linear_transformer_copy"), backend="torch", threads=1)
