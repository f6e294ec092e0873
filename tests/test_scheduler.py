"""Continuous batching (``rnnx.runtime.serving.scheduler``) on the demo models, torch and ONNX Runtime backends.

The reference for every stream is ``Session.generate`` on that stream's prompt alone: streams that join and
leave mid-generation, share steps with others and reuse freed slots must produce exactly those tokens
(greedy, and sampled with a seed). Also: per-stream stop conditions, cancel, bounded queueing
(``SchedulerFull``), bad prompts rejected at submit, a failing callback ending only its own stream, no
state rows held after the streams end, and the backends' row selection / concatenation against host
numpy on the same state.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS
from rnnx.models.lm import SRUppLM
from rnnx.models.training.copy_task import task_prompts
from rnnx.runtime.backends.ort_backend import OrtBackend
from rnnx.runtime.backends.torch_backend import TorchBackend
from rnnx.runtime.sampling import SamplingOptions
from rnnx.runtime.serving.scheduler import Scheduler, SchedulerClosed, SchedulerFull

TIMEOUT = 120.0
BACKENDS = ["torch", "onnxruntime"]
CASES = [(name, backend) for name in DEMO_CHECKPOINTS for backend in BACKENDS]


@pytest.fixture(scope="module")
def sessions(demo_sessions):
    """(demo, backend) -> Session (tests/conftest.py's ``demo_sessions``)."""
    return demo_sessions


def prompts_for(session: rt.Session, n: int, seed: int = 0) -> list[list[int]]:
    task = session.metadata.get("task") or session.metadata.get("config", {}).get("task")
    return task_prompts(task, session.vocab_size, batch=n, seed=seed)


def alone(session: rt.Session, prompt: list[int], max_new_tokens: int, **options) -> list[int]:
    return session.generate_all([prompt], max_new_tokens, **options)[0]


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_streams_joining_and_leaving_get_their_tokens_alone(case, sessions):
    """12 greedy streams of different lengths through 4 slots: 4 start, 6 wait for freed slots, 2 are
    submitted from stream 3's callback while it is mid-generation. Each equals its prompt run alone;
    afterwards no row of state is held."""
    session = sessions[case]
    prompts = prompts_for(session, 12, seed=1)
    lengths = [3 + 5 * (i % 4) for i in range(12)]  # 3, 8, 13, 18: streams leave at different ticks
    ticks_at: dict[int, list[int]] = {}
    late: list = []
    with Scheduler(session, max_streams=4) as scheduler:

        def record(stream, token):
            if token is None:
                return
            ticks_at.setdefault(stream.id, []).append(scheduler.stats().ticks)
            if stream.id == 3 and len(stream.tokens) == 4:  # join mid-generation, from the worker thread
                late.extend(scheduler.submit(prompts[i], lengths[i], temperature=0.0) for i in (10, 11))

        streams = [scheduler.submit(prompts[i], lengths[i], temperature=0.0, callback=record) for i in range(10)]
        results = [s.result(TIMEOUT) for s in streams]
        late_results = [s.result(TIMEOUT) for s in late]
        stats = scheduler.stats()
    for i, got in enumerate([*results, *late_results]):
        assert got == alone(session, prompts[i], lengths[i], temperature=0.0), f"stream {i}"
    assert len(late) == 2 and [s.finish_reason for s in streams + late] == ["max_new_tokens"] * 12
    assert stats.running == 0 and stats.held_rows == 0 and stats.waiting == 0 and stats.finished == 12
    # stream 3 (18 tokens) was still generating when streams that had waited for a slot joined
    first_of = {sid: ticks[0] for sid, ticks in ticks_at.items()}
    last_of = {sid: ticks[-1] for sid, ticks in ticks_at.items()}
    assert any(first_of[s.id] > first_of[3] and first_of[s.id] < last_of[3] for s in streams[4:]), (
        "no stream joined while stream 3 was generating"
    )
    # 12 streams x their tokens in far fewer batched steps than one after another
    assert stats.ticks < sum(lengths) - 12


def test_late_join_from_a_callback_matches(sessions):
    """The two streams submitted by stream 0's callback (the worker thread) joined while stream 0 ran."""
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    prompts = prompts_for(session, 3, seed=2)
    late: list = []
    with Scheduler(session, max_streams=8) as scheduler:

        def join(stream, token):
            if token is not None and len(stream.tokens) == 2:
                late.extend(scheduler.submit(p, 6, temperature=0.0) for p in prompts[1:])

        first = scheduler.submit(prompts[0], 12, temperature=0.0, callback=join)
        assert first.result(TIMEOUT) == alone(session, prompts[0], 12, temperature=0.0)
        for p, s in zip(prompts[1:], late):
            assert s.result(TIMEOUT) == alone(session, p, 6, temperature=0.0)
        assert scheduler.stats().prefills >= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_sampled_streams_match_their_seed_alone(backend, sessions):
    session = sessions[(DEMO_CHECKPOINTS[-1], backend)]
    prompts = prompts_for(session, 5, seed=3)
    options = [
        dict(temperature=0.9, seed=11),
        dict(temperature=1.3, top_k=4, seed=12),
        dict(temperature=0.7, top_p=0.8, seed=13),
        dict(temperature=0.0),
        dict(temperature=1.0, top_k=3, top_p=0.9, seed=14),
    ]
    with Scheduler(session, max_streams=3) as scheduler:
        # the odd streams take their options whole (one SamplingOptions), the even ones as keywords
        streams = [
            scheduler.submit(p, 10, SamplingOptions(**o)) if i % 2 else scheduler.submit(p, 10, **o)
            for i, (p, o) in enumerate(zip(prompts, options))
        ]
        got = [s.result(TIMEOUT) for s in streams]
    for p, o, g in zip(prompts, options, got):
        assert g == alone(session, p, 10, **o), o


def test_stop_tokens_and_iteration(sessions):
    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    prompt = prompts_for(session, 1, seed=4)[0]
    free = alone(session, prompt, 8, temperature=0.0)
    stop = free[3]
    expected = free[: free.index(stop) + 1]
    with Scheduler(session) as scheduler:
        stream = scheduler.submit(prompt, 8, temperature=0.0, stop_tokens=[stop])
        assert list(stream) == expected
        assert stream.finish_reason == "stop" and stream.tokens == expected
        empty = scheduler.submit(prompt, 0)
        assert empty.done and empty.result() == [] and empty.finish_reason == "max_new_tokens"


def test_cancel_frees_the_slot_and_others_continue(sessions):
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    prompts = prompts_for(session, 2, seed=5)
    with Scheduler(session, max_streams=2) as scheduler:

        def cancel_at_5(stream, token):
            if token is not None and len(stream.tokens) == 5:
                stream.cancel()

        doomed = scheduler.submit(prompts[0], 10_000, temperature=0.0, callback=cancel_at_5)
        other = scheduler.submit(prompts[1], 20, temperature=0.0)
        assert doomed.result(TIMEOUT) == alone(session, prompts[0], len(doomed.tokens), temperature=0.0)
        assert doomed.finish_reason == "cancelled" and 5 <= len(doomed.tokens) <= 6
        assert other.result(TIMEOUT) == alone(session, prompts[1], 20, temperature=0.0)
        waiting = scheduler.submit(prompts[0], 5)
        scheduler.cancel(waiting.id)  # by id; waiting or running, it ends
        assert waiting.result(TIMEOUT) == waiting.tokens and waiting.finish_reason in ("cancelled", "max_new_tokens")
        stats = scheduler.stats()
        assert stats.held_rows == 0 and stats.running == 0


def test_bounded_memory_full_then_queueing(sessions):
    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    prompts = prompts_for(session, 4, seed=6)
    gate = threading.Event()
    with Scheduler(session, max_streams=1, max_waiting=1) as scheduler:
        hold = scheduler.submit(prompts[0], 50, temperature=0.0, callback=lambda s, t: gate.wait(TIMEOUT))
        queued = scheduler.submit(prompts[1], 3, temperature=0.0)
        with pytest.raises(SchedulerFull, match=r"max_streams=1, max_waiting=1"):
            scheduler.submit(prompts[2], 3)
        assert scheduler.stats().held_rows <= 1
        gate.set()
        assert hold.result(TIMEOUT) == alone(session, prompts[0], 50, temperature=0.0)
        assert queued.result(TIMEOUT) == alone(session, prompts[1], 3, temperature=0.0)
        again = scheduler.submit(prompts[2], 3, temperature=0.0)  # room again
        assert again.result(TIMEOUT) == alone(session, prompts[2], 3, temperature=0.0)
    with pytest.raises(SchedulerClosed):
        scheduler.submit(prompts[0], 3)


def test_bad_requests_fail_alone(sessions):
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    prompts = prompts_for(session, 2, seed=7)
    with Scheduler(session, max_streams=4) as scheduler:
        good = scheduler.submit(prompts[0], 12, temperature=0.0)
        with pytest.raises(rt.InputError, match=rf"token {session.vocab_size} out of vocabulary"):
            scheduler.submit([1, session.vocab_size], 4)
        with pytest.raises(rt.InputError, match="non-empty 1-D"):
            scheduler.submit([], 4)
        with pytest.raises(rt.InputError, match="integer tokens"):
            scheduler.submit([1.5, 2.0], 4)
        with pytest.raises(ValueError, match="top_p"):
            scheduler.submit(prompts[1], 4, top_p=1.5)
        with pytest.raises(rt.InputError, match=r"sampling=SamplingOptions\(\.\.\.\) or temperature, seed, not both"):
            scheduler.submit(prompts[1], 4, SamplingOptions(0.5), temperature=0.0, seed=3)
        with pytest.raises(rt.InputError, match="sampling: expected a SamplingOptions, got dict"):
            scheduler.submit(prompts[1], 4, {"temperature": 0.0})

        def explode(stream, token):
            if token is not None:
                raise RuntimeError("callback failed")

        failing = scheduler.submit(prompts[1], 12, temperature=0.0, callback=explode)
        with pytest.raises(RuntimeError, match="callback failed"):
            failing.result(TIMEOUT)
        assert failing.finish_reason == "error"
        assert good.result(TIMEOUT) == alone(session, prompts[0], 12, temperature=0.0)


def test_close_ends_unfinished_streams(sessions):
    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    prompt = prompts_for(session, 1, seed=8)[0]
    scheduler = Scheduler(session, max_streams=1, max_waiting=4)
    streams = [scheduler.submit(prompt, 100_000, temperature=0.0) for _ in range(3)]
    scheduler.close()
    assert all(s.done and s.finish_reason == "closed" for s in streams)
    assert scheduler.stats().held_rows == 0


def test_kv_cache_streams_of_different_lengths_share_the_batch():
    """A softmax SRU++ (a KV cache with its validity mask): 6 greedy streams through 2 slots, joining with caches of
    other lengths (padded at the end, hidden by the mask), each equal to its prompt alone; the pool's cache stays
    within 1.25x the longest stream's context (plus the slack) and a kept state holds exactly its own positions.
    Without a validity mask (the spec removed from the backend's list, a stand-in: every rnnx KV cache has one) the
    scheduler refuses in one line."""
    torch = pytest.importorskip("torch")
    from rnnx.runtime.serving.slots import SLACK_POSITIONS, StatePool

    torch.manual_seed(0)
    model = SRUppLM(vocab_size=16, embed_dim=8, hidden_size=8, proj_size=4, num_layers=1, attention="softmax").eval()
    session = rt.Session(TorchBackend(model))
    rng = np.random.default_rng(3)
    prompts = [rng.integers(0, 16, 2 + 5 * i).tolist() for i in range(6)]
    lengths = [4 + 7 * (i % 3) for i in range(6)]
    with Scheduler(session, max_streams=2) as scheduler:
        streams = [scheduler.submit(p, n, temperature=0.0) for p, n in zip(prompts, lengths)]
        kept = scheduler.submit(prompts[5], 5, temperature=0.0, keep_state=True)
        got = [s.result(TIMEOUT) for s in streams]
        state = kept.state(TIMEOUT)
    assert got == [alone(session, p, n, temperature=0.0) for p, n in zip(prompts, lengths)]
    assert state.past_length == len(prompts[5]) + 5

    pool = StatePool(session.backend)
    pool.admit(["long", "short"], [prompts[5], prompts[0]])
    for _ in range(40):
        pool.feed(["short"], [[1]])  # the long stream is not fed: its pads pile up until the pool compacts
    longest = len(prompts[0]) + 40
    assert pool._state.past_length <= longest + longest // 4 + SLACK_POSITIONS + 1

    backend = TorchBackend(model)
    backend.state_specs = [s for s in backend.state_specs if s.dtype != "bool"]  # before valid_specs is read
    with pytest.raises(rt.InputError, match="without a validity mask"):
        Scheduler(backend)


@pytest.mark.parametrize("backend", ["torch", "onnxruntime", "onnxruntime-bound"])
def test_select_and_concat_rows_match_host_numpy(backend, sessions, demo_exports):
    name = DEMO_CHECKPOINTS[-1]
    if backend == "onnxruntime-bound":
        session = rt.Session(OrtBackend(demo_exports[(name, "onnxruntime")], io_binding=True))
    else:
        session = sessions[(name, backend)]
    b = session.backend
    state = session.prefill(prompts_for(session, 3, seed=9)).inner
    host = b.state_to_host(state)
    picked = b.select_rows(state, [2, 0])
    joined = b.concat_rows([picked, b.select_rows(state, [1])])
    assert (picked.batch, joined.batch) == (2, 3)
    for spec in b.state_specs:
        np.testing.assert_array_equal(
            b.state_to_host(picked)[spec.name], np.take(host[spec.name], [2, 0], axis=spec.batch_axis)
        )
        np.testing.assert_array_equal(
            b.state_to_host(joined)[spec.name], np.take(host[spec.name], [2, 0, 1], axis=spec.batch_axis)
        )
    # no storage shared: advancing the selection leaves the source as it was
    ids = np.ones((2, 1), np.int64)
    b.run({"input_ids": ids, "attention_mask": ids}, picked)
    for spec in b.state_specs:
        np.testing.assert_array_equal(b.state_to_host(state)[spec.name], host[spec.name])


def test_callbacks_may_call_the_scheduler_when_streams_end(sessions):
    """End-of-stream callbacks run outside the scheduler's lock: submitting or cancelling from one (for a
    zero-token stream, or a cancelled waiting one, both on the caller's thread) does not deadlock."""
    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    prompt = prompts_for(session, 1, seed=10)[0]
    follow_ups: list = []
    with Scheduler(session, max_streams=1, max_waiting=8) as scheduler:

        def chain(stream, token):
            if token is None and len(follow_ups) < 2:
                follow_ups.append(scheduler.submit(prompt, 3, temperature=0.0))

        empty = scheduler.submit(prompt, 0, callback=chain)  # ends inside submit
        blocker = scheduler.submit(prompt, 40, temperature=0.0)
        waiting = scheduler.submit(prompt, 5, callback=chain)
        scheduler.cancel(waiting)  # a waiting stream ends inside cancel
        assert empty.finish_reason == "max_new_tokens" and waiting.finish_reason == "cancelled"
        assert len(follow_ups) == 2
        want = alone(session, prompt, 3, temperature=0.0)
        assert [s.result(TIMEOUT) for s in follow_ups] == [want, want]
        assert blocker.result(TIMEOUT) == alone(session, prompt, 40, temperature=0.0)
        assert scheduler.stats().finished == 5


def test_an_unexpected_failure_ends_the_streams_and_the_scheduler_goes_on(sessions, monkeypatch):
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    prompts = prompts_for(session, 2, seed=11)
    with Scheduler(session, max_streams=4) as scheduler:
        pool = scheduler._pool
        broken = {"left": 1}
        real_release = pool.release

        def release_once_broken(keys):
            if broken["left"]:
                broken["left"] -= 1
                raise MemoryError("device out of memory")
            return real_release(keys)

        monkeypatch.setattr(pool, "release", release_once_broken)
        running = scheduler.submit(prompts[0], 10_000, temperature=0.0)
        short = scheduler.submit(prompts[1], 1, temperature=0.0)  # its release, when it ends, fails
        for stream in (short, running):  # a stream ends after its row is released: both get the error
            with pytest.raises(MemoryError, match="out of memory"):
                stream.result(TIMEOUT)
            assert stream.finish_reason == "error"
        assert short.tokens == alone(session, prompts[1], 1, temperature=0.0)
        assert scheduler.stats().held_rows == 0
        later = scheduler.submit(prompts[1], 6, temperature=0.0)
        assert later.result(TIMEOUT) == alone(session, prompts[1], 6, temperature=0.0)


def test_the_idle_worker_keeps_no_finished_stream_alive(sessions):
    """Streams that end in the step of their prefill (max_new_tokens=1) are released by the worker even while
    it then waits idle: nothing it holds keeps the stream, or what its callback holds, alive."""
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    prompt = prompts_for(session, 1, seed=12)[0]

    class Sink:  # what an app's callback holds (a socket, a buffer, ...)
        def __call__(self, stream, token):
            pass

    with Scheduler(session, max_streams=4) as scheduler:
        sink = Sink()
        stream = scheduler.submit(prompt, 1, temperature=0.0, callback=sink)
        assert stream.result(TIMEOUT) == alone(session, prompt, 1, temperature=0.0)
        gone = [weakref.ref(stream), weakref.ref(sink)]
        del stream, sink
        for _ in range(100):  # the worker goes idle right after the stream's end is published
            gc.collect()
            if all(ref() is None for ref in gone):
                break
            time.sleep(0.05)
        assert [ref() for ref in gone] == [None, None]
        assert scheduler._worker.is_alive() and scheduler.stats().running == 0


def test_a_stored_error_is_raised_with_the_same_traceback_every_time(sessions):
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    prompt = prompts_for(session, 1, seed=13)[0]

    def explode(stream, token):
        if token is not None:
            raise RuntimeError("callback failed")

    def depth(tb) -> int:
        return 0 if tb is None else 1 + depth(tb.tb_next)

    with Scheduler(session, max_streams=2) as scheduler:
        stream = scheduler.submit(prompt, 4, temperature=0.0, callback=explode)
        depths = []
        for call in [stream.result, stream.result, lambda: list(stream), stream.result]:
            with pytest.raises(RuntimeError, match="callback failed") as info:
                call()
            depths.append(depth(info.value.__traceback__))
            del info
        assert depths[0] == depths[1] == depths[3] and depths[2] <= depths[0] + 1, depths
