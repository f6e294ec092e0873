"""Long prefills on ONNX Runtime's defaults (issue 38, item 7): with ``threads=None`` a small export on the CPU
keeps its one-thread session for the decode step and short calls, and runs a call of
:data:`~rnnx.runtime.backends.ort_backend.POOL_FROM_TOKENS` tokens or more (batch rows x sequence length) on a
second session on ONNX Runtime's default pool, opened once, on the first such call.

* A long call goes through the pool session and gives what the one-thread session gives, outputs and state, and
  the state it returns feeds the one-thread session's next steps (and the other way round): plain ``run`` and IO
  binding, on both demos. Compared with a tolerance of 1e-6 relative to the magnitude (fp32): here both sessions
  give identical numbers (every kernel splits its work by rows, never its sums), a tolerance keeps the test
  independent of how a kernel partitions on another CPU.
* A short call (one token below the threshold, the decode step) stays on the one-thread session and opens
  nothing; ``threads=N`` (explicit, any N) and a large export never open a second session.
* The pool session is opened once and reused, also when two threads make their first long call together.
* Both sessions get the same options: the export's session config entries, rnnx's op library (the profiler
  shows the native kernels running in both), and differ only in their intra-op threads (1 against 0).

No timing is asserted here: benchmarks/bench_ort_prefill_threads.py measures.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnxruntime as ort

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS
from rnnx.runtime import ortops
from rnnx.runtime.backends import ort_backend
from rnnx.runtime.backends.ort_backend import POOL_FROM_TOKENS, OrtBackend
from rnnx.runtime.contract.artifact import ort_session_config, read_metadata

needs_library = pytest.mark.skipif(
    ortops.find_library() is None, reason=f"{ortops.library_path()} not built: run scripts/setup.sh"
)


@pytest.fixture(scope="module")
def exports(demo_exports):
    return {name: demo_exports[(name, "onnxruntime")] for name in DEMO_CHECKPOINTS}


def _feeds(batch: int, length: int, seed: int = 0) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(seed).integers(0, 12, (batch, length))
    return {"input_ids": ids, "attention_mask": np.ones((batch, length), np.int64)}


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    scale = max(float(np.abs(want).max()), 1.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * scale, err_msg=what)


class _Calls:
    """Counts the runs of a real ONNX Runtime session, plain (its compiled ``_sess.run``, what the backend calls on
    the CPU) and bound (``run_with_iobinding``), and passes them on."""

    def __init__(self, session: ort.InferenceSession) -> None:
        self.count, compiled, bound = 0, session._sess, session.run_with_iobinding
        calls = self

        class Compiled:
            def __getattr__(self, name):
                return getattr(compiled, name)

            def run(self, *args):
                calls.count += 1
                return compiled.run(*args)

        def run_with_iobinding(*args, **kwargs):
            calls.count += 1
            return bound(*args, **kwargs)

        session._sess = Compiled()
        session.run_with_iobinding = run_with_iobinding


@pytest.mark.parametrize("io_binding", [False, True], ids=["run", "io-binding"])
@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_a_long_call_runs_on_the_pool_session_and_gives_the_one_thread_result(exports, name, io_binding):
    default = rt.load(exports[name], backend="onnxruntime", io_binding=io_binding)
    one = rt.load(exports[name], backend="onnxruntime", io_binding=io_binding, threads=1)
    backend = default.backend
    assert backend.threads == 1 and backend.pool_from_tokens == POOL_FROM_TOKENS and backend.pool_session is None
    assert one.backend.pool_from_tokens is None
    prompt = _feeds(1, POOL_FROM_TOKENS)["input_ids"]
    state, want = default.prefill(prompt), one.prefill(prompt)
    pool = backend.pool_session
    assert pool is not None and pool is not backend.session
    assert pool.get_session_options().intra_op_num_threads == 0  # ONNX Runtime's default pool
    _close(state.last_logits, want.last_logits, "last_logits")
    got_state, want_state = state.to_host(), want.to_host()
    for spec in backend.state_specs:
        _close(got_state[spec.name], want_state[spec.name], spec.name)
    # the pool session's state goes on through the one-thread session (decode), and back to the pool
    small, large = _Calls(backend.session), _Calls(pool)
    for token in (3, 7, 1):
        _close(default.step([token], state), one.step([token], want), f"step {token}")
    assert (small.count, large.count) == (3, 0)
    more = _feeds(1, POOL_FROM_TOKENS, seed=1)["input_ids"]
    default.prefill(more, state=state)
    one.prefill(more, state=want)
    assert (small.count, large.count) == (3, 1) and backend.pool_session is pool
    _close(state.last_logits, want.last_logits, "last_logits after a second long call")
    assert state.past_length == want.past_length == 2 * POOL_FROM_TOKENS + 3


def test_calls_are_counted_in_tokens_over_the_batch(exports):
    backend = OrtBackend(exports["srupp_linear_copy"])
    backend.run(_feeds(2, POOL_FROM_TOKENS // 2 - 1), backend.init_state(2))  # 2 rows, 2 tokens short
    assert backend.pool_session is None
    outputs, state = backend.run(_feeds(2, POOL_FROM_TOKENS // 2), backend.init_state(2))
    assert backend.pool_session is not None
    one = OrtBackend(exports["srupp_linear_copy"], threads=1)
    want_outputs, want_state = one.run(_feeds(2, POOL_FROM_TOKENS // 2), one.init_state(2))
    _close(outputs["logits"], want_outputs["logits"], "logits")
    assert state.past_length == want_state.past_length == POOL_FROM_TOKENS // 2


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_a_short_call_stays_on_the_one_thread_session(exports, name):
    session = rt.load(exports[name], backend="onnxruntime")
    calls = _Calls(session.backend.session)
    state = session.prefill(_feeds(1, POOL_FROM_TOKENS - 1)["input_ids"])
    for token in (1, 2):
        session.step([token], state)
    assert calls.count == 3 and session.backend.pool_session is None
    assert session.backend.session.get_session_options().intra_op_num_threads == 1
    assert "1 intra-op thread" in session.backend.describe()
    assert f"calls of >= {POOL_FROM_TOKENS} tokens on ONNX Runtime's pool (opens on first use)" in (
        session.backend.describe()
    )


def test_explicit_threads_and_a_large_export_never_open_a_second_session(exports, monkeypatch):
    path = exports["linear_transformer_copy"]
    opened = []
    real_open = OrtBackend._open_session
    monkeypatch.setattr(OrtBackend, "_open_session", lambda self, n: opened.append(n) or real_open(self, n))
    for threads in (1, 0, 2):
        backend = OrtBackend(path, threads=threads)
        assert backend.pool_from_tokens is None
        outputs, state = backend.run(_feeds(1, 2 * POOL_FROM_TOKENS), backend.init_state(1))
        assert backend.pool_session is None and state.past_length == 2 * POOL_FROM_TOKENS
        assert opened == [threads] and "on ONNX Runtime's pool (" not in backend.describe()
        opened.clear()
    assert "2 intra-op threads" in OrtBackend(path, threads=2).describe()
    assert "ONNX Runtime's intra-op pool" in OrtBackend(path, threads=0).describe()
    opened.clear()
    monkeypatch.setattr(ort_backend, "ONE_THREAD_BELOW_BYTES", 1)  # as if the export were large
    large = OrtBackend(path)
    large.run(_feeds(1, POOL_FROM_TOKENS), large.init_state(1))
    assert large.threads == 0 and large.pool_from_tokens is None and large.pool_session is None and opened == [0]


def test_the_pool_session_is_opened_once_and_reused(exports, monkeypatch):
    opened = []
    real_open = OrtBackend._open_session
    monkeypatch.setattr(OrtBackend, "_open_session", lambda self, n: opened.append(n) or real_open(self, n))
    backend = OrtBackend(exports["srupp_linear_copy"])
    assert opened == [1]
    feeds = _feeds(1, POOL_FROM_TOKENS)
    # two threads' first long calls at once: one opens the session, the other waits for it
    barrier, errors = threading.Barrier(2), []

    def call() -> None:
        try:
            barrier.wait()
            backend.run(feeds, backend.init_state(1))
        except Exception as error:  # reported by the assertion below
            errors.append(error)

    workers = [threading.Thread(target=call) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert not errors and opened == [1, 0]
    first = backend.pool_session
    for length in (POOL_FROM_TOKENS, 1, 2 * POOL_FROM_TOKENS):
        backend.run(_feeds(1, length), backend.init_state(1))
    assert backend.pool_session is first and opened == [1, 0]
    assert "(open)" in backend.describe()


@needs_library
def test_both_sessions_get_the_same_config_entries_and_native_ops(exports, monkeypatch, tmp_path):
    path = exports["srupp_linear_copy"]
    real_options = ort.SessionOptions
    prefixes = iter(("one-thread", "pool"))

    def profiled_options() -> ort.SessionOptions:  # the backend's own options, with the profiler switched on
        options = real_options()
        options.enable_profiling = True
        options.profile_file_prefix = str(tmp_path / next(prefixes))
        return options

    monkeypatch.setattr(ort, "SessionOptions", profiled_options)
    backend = OrtBackend(path)
    assert backend.native_ops and backend.pool_session is None
    backend.run(_feeds(1, 1), backend.init_state(1))
    backend.run(_feeds(1, POOL_FROM_TOKENS), backend.init_state(1))
    sessions = {"one-thread": backend.session, "pool": backend.pool_session}
    metadata = read_metadata(path)
    config, native = ort_session_config(metadata), {op["name"] for op in metadata["ops"]}  # the rnnx ops it uses
    assert len(native) == 2
    assert config  # the export asks ONNX Runtime for something, so the comparison below compares something
    threads = {}
    for label, session in sessions.items():
        options = session.get_session_options()
        threads[label] = options.intra_op_num_threads
        for key, value in config.items():
            assert options.get_session_config_entry(key) == value, f"{label} session: {key}"
        events = json.load(open(session.end_profiling()))
        ops = {e["args"].get("op_name") for e in events if e.get("cat") == "Node"}
        assert native <= ops, f"{label} session ran {sorted(ops)}"
        assert not {"Scan", "LinearAttention"} & ops, f"{label} session ran function bodies: {sorted(ops)}"
    assert threads == {"one-thread": 1, "pool": 0}
