"""State donation and the CUDA-graph decode path (issue 12, point 6), on CPU.

TensorRT and a GPU are not available here, so three kinds of TEST DOUBLES stand in, each labelled:

* ``SpyBackend``: a numpy :class:`Backend` that records every ``run``'s ``donate`` flag and the identity
  of the state passed (proves what :class:`Session` asks of a backend).
* ``StandInEngine`` / ``StandInContext`` / ``StandInStream``: stand-ins for TensorRT's ``ICudaEngine``
  (I/O names, ``device_memory_size_v2``, ``create_execution_context(strategy)``) and ``IExecutionContext``
  (the TensorRT 10 methods the backend calls: ``set_device_memory``, ``set_optimization_profile_async``,
  ``set_input_shape``, ``get_tensor_shape``, ``set_tensor_address``, ``execute_async_v3``) that run a tiny
  recurrent model directly on the bound CPU addresses and record every rebinding, and a stream with
  ``cuda_stream`` / ``synchronize``.
* ``StandInGraph`` / ``stand_in_capture``: ``torch.cuda.CUDAGraph`` / ``torch.cuda.graph`` stand-ins.
  As in CUDA, capturing *records* the enqueue (the addresses bound at that moment) without running
  it, and ``replay()`` re-runs exactly what was recorded, whatever is bound later; it also refuses to
  replay on a context rebound since the capture (the contract of review issue 28).
* a SPY on ``torch.cuda.stream`` / ``Tensor.zero_`` / ``Tensor.copy_`` (which stream is current at a write).

With them the real :class:`TensorRTBackend` ``run`` / ring / context logic runs unchanged (only the part of
``__init__`` that needs TensorRT and CUDA is bypassed: ``_describe_model`` and ``_attach`` run as is).
"""

from __future__ import annotations

import ctypes
import weakref
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from rnnx.runtime import Session
from rnnx.runtime.backends.base import Backend, BackendState, InputError, RnnxRuntimeError
from rnnx.runtime.tensorrt.bindings import plan_bindings
from rnnx.runtime.tensorrt.graphs import CAPTURE, EAGER, PING, PONG, REPLAY, PingPong, StaleState
from rnnx.runtime.tensorrt.profiles import ProfileLimits

VOCAB, HIDDEN = 7, 3


def _metadata(grows: bool = False) -> dict[str, Any]:
    state = {"name": "layers.0.c", "input": "past_key_values.layers.0.c", "output": "present.layers.0.c",
             "shape": ["batch", HIDDEN], "dtype": "float32", "grows": False}  # fmt: skip
    if grows:
        state = {**state, "shape": ["batch", "past_length", HIDDEN], "grows": True}
    ids = {"name": "input_ids", "shape": ["batch", "length"], "dtype": "int64"}
    mask = {"name": "attention_mask", "shape": ["batch", "length"], "dtype": "int64"}
    return {
        "model_type": "toy", "config": {"hidden": HIDDEN}, "vocab_size": VOCAB, "interface": "causal_lm",
        "precision": "fp32", "source": {"weights_sha256": "0" * 64},
        "inputs": [ids, mask, {"name": state["input"], "shape": state["shape"], "dtype": "float32"}],
        "outputs": [{"name": "logits", "shape": ["batch", "length", VOCAB], "dtype": "float32"},
                    {"name": state["output"], "shape": state["shape"], "dtype": "float32"}],
        "state": [state],
    }  # fmt: skip


def _toy_step(c: np.ndarray, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The toy model: c (B, H) accumulates (token + 1) per real token; logits favour token (sum mod V)."""
    c = c.copy()
    logits = np.zeros((*ids.shape, VOCAB), np.float32)
    for pos in range(ids.shape[1]):
        c += (mask[:, pos] * (ids[:, pos] + 1))[:, None].astype(np.float32)
        logits[np.arange(ids.shape[0]), pos, c[:, 0].astype(np.int64) % VOCAB] = 1.0
    return logits, c


# -- (a) what the session asks of a backend: SpyBackend (test double) --------------------------------------


class SpyBackend(Backend):
    """TEST DOUBLE: the toy model in numpy; records ``(donate, state passed)`` and the state returned."""

    name = "spy"

    def __init__(self) -> None:
        self.device, self.metadata = "cpu", _metadata()
        from rnnx.runtime.contract.artifact import state_specs

        self.state_specs, self.vocab_size = state_specs(self.metadata), VOCAB
        self.calls: list[tuple[bool, BackendState]] = []
        self.returned: list[BackendState] = []

    def _wrap(self, c: np.ndarray, past: int) -> BackendState:
        return BackendState({"layers.0.c": c}, c.shape[0], past, self.name, self.signature)

    def init_state(self, batch: int) -> BackendState:
        return self._wrap(np.zeros((batch, HIDDEN), np.float32), 0)

    def run(self, inputs, state, donate=False):
        self.calls.append((donate, state))
        logits, c = _toy_step(state.tensors["layers.0.c"], inputs["input_ids"], inputs["attention_mask"])
        self.returned.append(self._wrap(c, state.past_length + inputs["input_ids"].shape[1]))
        return {"logits": logits}, self.returned[-1]

    def copy_state(self, state):
        return self._wrap(state.tensors["layers.0.c"].copy(), state.past_length)

    def state_to_host(self, state):
        return {"layers.0.c": state.tensors["layers.0.c"].copy()}

    def state_from_host(self, arrays):
        return self._wrap(np.array(arrays["layers.0.c"], np.float32), 0)


def test_generate_donates_every_call_and_a_mid_way_fork_is_unaffected():
    spy = SpyBackend()
    session = Session(spy)
    stream = session.generate([[1, 2, 3], [4, 5]], max_new_tokens=6, temperature=0)
    first = next(stream)
    assert len(spy.calls) == 1 and spy.calls[0][0]  # the prefill: a fresh state nobody else holds
    next(stream)
    next(stream)
    fork = session.state.fork()  # taken mid-way, between yields
    fork_host = fork.to_host()["layers.0.c"].copy()
    rest = list(stream)
    assert len(rest) == 3 and first is not None
    donations = [donate for donate, _ in spy.calls]
    assert len(donations) == 1 + 5 and all(donations)  # prefill + every step donates
    # every step donates exactly the state the call before returned (the generation's own), never the fork's
    for returned, (_, passed) in zip(spy.returned, spy.calls[1:]):
        assert passed is returned and passed is not fork.inner
    assert np.array_equal(fork.to_host()["layers.0.c"], fork_host)  # donation never touched the fork
    assert session.state.past_length == fork.past_length + 3


def test_step_passes_donate_through_and_keeps_the_handle_valid():
    spy = SpyBackend()
    session = Session(spy)
    state = session.prefill([[1, 2]])
    inner = state.inner
    session.step([3], state=state)
    assert spy.calls[-1] == (False, inner)
    before = state.inner
    session.step([4], state=state, donate=True)
    assert spy.calls[-1][0] is True and spy.calls[-1][1] is before
    assert state.inner is not before and state.past_length == 4  # the handle moved to the new state
    session.prefill([[1]], state=state, donate=True)
    assert spy.calls[-1][0] is True
    session.run({"input_ids": [[1]], "attention_mask": [[1]]}, state=state)
    assert spy.calls[-1][0] is False


# -- (b) the pure ping-pong plan ------------------------------------------------------------------------


class Holder:
    """A weak-referenceable stand-in for a returned BackendState."""


def _drive(ring: PingPong, steps: int) -> list:
    """Donated decode steps on one lineage, graphs captured as the plan asks; returns the plans."""
    captured: set[str] = set()
    ticket, holder, plans = None, Holder(), []
    for _ in range(steps):
        plan = ring.plan(donate=True, decode=True, graphs=True, ticket=ticket, captured=captured)
        if plan.mode == CAPTURE:
            captured.add(plan.graph)
        holder = Holder()
        ticket = ring.commit(plan, holder)
        plans.append(plan)
    return plans


def test_ping_pong_never_reads_and_writes_one_set_and_alternates():
    plans = _drive(PingPong(), 50)
    assert plans[0].mode == EAGER and plans[0].read is None and plans[0].write == 0  # enters the ring
    assert [p.mode for p in plans[1:3]] == [CAPTURE, CAPTURE] and all(p.mode == REPLAY for p in plans[3:])
    for plan in plans[1:]:
        assert plan.read is not None and plan.write is not None and plan.read != plan.write
        assert plan.graph == (PING if plan.read == 0 else PONG)
        assert not plan.recycle  # ring buffers never go to the pool
    graphs = [p.graph for p in plans[1:]]
    assert all(a != b for a, b in zip(graphs, graphs[1:]))  # ping, pong, ping, ...
    assert graphs[0] == PING  # ping reads A (0), writes B (1)
    for prev, plan in zip(plans, plans[1:]):
        assert plan.read == prev.write  # each step reads what the one before wrote


@pytest.mark.parametrize(
    "kwargs",
    [
        {"donate": True, "decode": False, "graphs": True},  # prefill: not a fixed one-step shape
        {"donate": True, "decode": True, "graphs": False},  # growing KV cache / graphs off
        {"donate": False, "decode": True, "graphs": True},  # not donated
    ],
)
def test_fallbacks_are_eager_and_never_recycle_an_undonated_state(kwargs):
    ring = PingPong()
    plan = ring.plan(**kwargs)
    assert plan.mode == EAGER and plan.write is None and plan.graph is None
    assert plan.recycle is kwargs["donate"]  # only a donated state's buffers go back to the pool
    # a ring state read without donation stays live; donated to a non-ring call, it frees the ring
    holder = Holder()
    ticket = ring.commit(ring.plan(donate=True, decode=True, graphs=True), holder)
    plan = ring.plan(ticket=ticket, **kwargs)
    assert plan.mode == EAGER and plan.write is None and not plan.recycle
    assert plan.release is kwargs["donate"] and ring.busy
    ring.commit(plan, Holder())
    assert ring.busy is not kwargs["donate"]


def test_second_lineage_stays_out_of_a_busy_ring_and_stale_states_are_refused():
    ring = PingPong()
    holder = Holder()
    ticket = ring.commit(ring.plan(donate=True, decode=True, graphs=True), holder)
    other = ring.plan(donate=True, decode=True, graphs=True)  # another state while the ring is held
    assert other.mode == EAGER and other.write is None and other.recycle
    newer = ring.commit(ring.plan(donate=True, decode=True, graphs=True, ticket=ticket), Holder())
    assert newer.parity == 1
    with pytest.raises(StaleState):  # the donated state comes back
        ring.plan(donate=False, decode=True, graphs=True, ticket=ticket)
    assert isinstance(StaleState("x"), InputError)


def test_a_dropped_holder_frees_the_ring():
    ring = PingPong()
    holder = Holder()
    ring.commit(ring.plan(donate=True, decode=True, graphs=True), holder)
    ref = weakref.ref(holder)
    del holder
    assert ref() is None and not ring.busy
    assert ring.plan(donate=True, decode=True, graphs=True).write == 0


def test_the_plan_uses_binding_plan_addresses_for_the_two_sets():
    plan = plan_bindings(_metadata())
    ping, pong = plan.addresses(0), plan.addresses(1)
    assert ping["past_key_values.layers.0.c"] == pong["present.layers.0.c"] == "layers.0.c#0"
    assert ping["present.layers.0.c"] == pong["past_key_values.layers.0.c"] == "layers.0.c#1"


# -- the real TensorRTBackend.run / _execute on stand-ins ------------------------------------------------


def _view(ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    count = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer((ctypes.c_byte * (count * dtype.itemsize)).from_address(ptr), dtype=dtype).reshape(shape)


class StandInEngine:
    """TEST DOUBLE for ``tensorrt.ICudaEngine``: the toy model's I/O names, a device-memory size, and
    ``create_execution_context(strategy)`` handing out :class:`StandInContext` s that share one log."""

    device_memory_size_v2 = 4096

    def __init__(self) -> None:
        meta = _metadata()
        self.names = [t["name"] for t in meta["inputs"]] + [t["name"] for t in meta["outputs"]]
        self.n_inputs = len(meta["inputs"])
        self.contexts: list[StandInContext] = []
        self.log: list[tuple[str, int, int, int]] = []  # (eager | replay, context id, read, write)

    @property
    def num_io_tensors(self) -> int:
        return len(self.names)

    def get_tensor_name(self, index: int) -> str:
        return self.names[index]

    def get_tensor_mode(self, name: str) -> str:
        return "input" if self.names.index(name) < self.n_inputs else "output"

    def get_tensor_dtype(self, name: str) -> str:
        return "int64" if name in ("input_ids", "attention_mask") else "float32"

    def create_execution_context(self, strategy: str) -> StandInContext:
        context = StandInContext(self, len(self.contexts), strategy)
        self.contexts.append(context)
        return context


class StandInContext:
    """TEST DOUBLE for ``tensorrt.IExecutionContext`` (the TensorRT 10 methods the backend calls): runs the
    toy model directly on the bound CPU addresses, and records every change of its bindings (``version``
    counts them; ``profiles`` lists every profile set on it) so a test can tell whether a context was
    rebound after a graph was captured on it."""

    def __init__(self, engine: StandInEngine, ident: int, strategy: str) -> None:
        self.engine, self.id, self.strategy = engine, ident, strategy
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}
        self.memory: tuple[int, int] = (0, 0)
        self.profiles: list[int] = []
        self.version = 0

    def set_device_memory(self, ptr: int, size: int) -> None:
        self.memory = (int(ptr), int(size))

    def set_optimization_profile_async(self, index: int, stream: int) -> bool:
        self.profiles.append(index)
        self.version += 1
        return True

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        self.shapes[name] = tuple(int(d) for d in shape)
        self.version += 1
        return True

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        batch, length = self.shapes["input_ids"]
        outputs = {"logits": (batch, length, VOCAB), "present.layers.0.c": (batch, HIDDEN)}
        return outputs[name] if name in outputs else self.shapes[name]

    def set_tensor_address(self, name: str, ptr: int) -> bool:
        self.addresses[name] = int(ptr)
        self.version += 1
        return True

    def execute_async_v3(self, stream: int) -> bool:
        assert self.profiles and self.memory[1] >= self.engine.device_memory_size_v2, "context not set up"
        frozen = (dict(self.shapes), dict(self.addresses))
        if StandInGraph.capturing is not None:  # CUDA capture records the launch; nothing runs
            StandInGraph.capturing.record(self, lambda: self._run(*frozen, "replay"))
        else:
            self._run(*frozen, "eager")
        return True

    def _run(self, shapes: dict, addresses: dict, how: str) -> None:
        ids = _view(addresses["input_ids"], shapes["input_ids"], np.dtype(np.int64))
        mask = _view(addresses["attention_mask"], shapes["attention_mask"], np.dtype(np.int64))
        read, write = addresses["past_key_values.layers.0.c"], addresses["present.layers.0.c"]
        c_in = _view(read, shapes["past_key_values.layers.0.c"], np.dtype(np.float32))
        logits, c_out = _toy_step(c_in, ids, mask)
        _view(addresses["logits"], logits.shape, np.dtype(np.float32))[...] = logits
        _view(write, c_out.shape, np.dtype(np.float32))[...] = c_out
        self.engine.log.append((how, self.id, read, write))


class StandInStream:
    """TEST DOUBLE for ``torch.cuda.Stream``."""

    cuda_stream = 0

    def synchronize(self) -> None:
        pass


class StandInGraph:
    """TEST DOUBLE for ``torch.cuda.CUDAGraph``: between ``capture_begin`` and ``capture_end`` the engine's
    contexts record their launches instead of running them; ``replay()`` runs what was recorded, and refuses
    (the contract under test) to replay on a context whose bindings changed after the capture. Every capture's
    error mode is logged in ``modes``."""

    capturing: Any = None  # the graph being captured (capture_begin .. capture_end)
    modes: list[str] = []

    def __init__(self) -> None:
        self.recorded = None
        self.context: Any = None
        self.version = -1

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        StandInGraph.modes.append(capture_error_mode)
        StandInGraph.capturing = self

    def capture_end(self) -> None:
        StandInGraph.capturing = None

    def record(self, context: StandInContext, launch: Any) -> None:
        self.context, self.version, self.recorded = context, context.version, launch

    def replay(self) -> None:
        assert self.context.version == self.version, f"context {self.context.id} was rebound after its capture"
        self.recorded()


STAND_IN_TRT = SimpleNamespace(  # TEST DOUBLE for the parts of the tensorrt module the backend reads
    TensorIOMode=SimpleNamespace(INPUT="input", OUTPUT="output"),
    ExecutionContextAllocationStrategy=SimpleNamespace(USER_MANAGED="user-managed"),
    nptype=lambda dtype: np.dtype(dtype).type,
)


def _stand_in_backend(monkeypatch, cuda_graphs: bool = True, grows: bool = False):
    import torch

    from rnnx.runtime.tensorrt.backend import TensorRTBackend

    backend = object.__new__(TensorRTBackend)  # __init__ needs TensorRT + CUDA: the rest runs as is
    backend._describe_model(_metadata(grows), "cpu", ProfileLimits(max_batch=4, max_length=8, max_context=64))
    engine = StandInEngine()
    monkeypatch.setattr(torch.cuda, "CUDAGraph", StandInGraph)
    monkeypatch.setattr(StandInGraph, "modes", [])
    backend._attach(STAND_IN_TRT, engine, StandInStream(), cuda_graphs)
    backend.captures = StandInGraph.modes
    return backend


def test_tensorrt_backend_generate_alternates_two_graphs_over_two_buffer_sets(monkeypatch):
    backend = _stand_in_backend(monkeypatch)
    session = Session(backend)
    prompts = [[1, 2, 3], [4, 5, 6]]
    got = session.generate_all(prompts, max_new_tokens=12, temperature=0)
    assert got == Session(SpyBackend()).generate_all(prompts, max_new_tokens=12, temperature=0)
    log = backend.engine.log
    decode = log[1:]  # log[0]: the prefill
    assert [how for how, *_ in decode[:3]] == ["eager"] * 3  # enter the ring, then eager+capture ping, pong
    assert all(how == "replay" for how, *_ in decode[3:]) and len(decode) == 11
    sets = {ptr for _, _, read, write in decode[1:] for ptr in (read, write)}
    assert len(sets) == 2  # A and B
    for _, _, read, write in log:
        assert read != write  # no call, eager or replayed, updates the state it reads
    for (*_, wrote), (_, _, read, _) in zip(decode, decode[1:]):
        assert read == wrote
    assert sorted(backend._rings[2].contexts) == [PING, PONG]
    assert backend.captures == ["thread_local", "thread_local"]  # another thread's CUDA call cannot break it


def test_contexts_are_fixed_on_one_profile_share_one_memory_and_no_graph_replays_on_a_rebound_context(monkeypatch):
    """The contract of review issue 28 (HIGH 1), on the stand-ins: ping and pong each have a context of their
    own, bound once (a replay on a context rebound after its capture fails StandInGraph's check); every context
    is created user-managed on one activation block and given its profile exactly once; prefills (their own
    context) between decode steps never drop or recapture the decode graphs."""
    backend = _stand_in_backend(monkeypatch)
    session = Session(backend)
    for round_ in range(3):  # generate, then a new prompt (a prefill on a fresh state), and again
        state = session.prefill([[1 + round_, 2], [3, 4 + round_]])
        for i in range(6):
            session.step([i % 5, (i + 2) % 5], state=state, donate=True)
        other = session.prefill([[2, 2, 2]])  # a prefill of another batch between decode steps
        session.step([1], state=other)  # a non-donated decode: eager, never on a ring context
    engine = backend.engine
    assert all(c.strategy == "user-managed" for c in engine.contexts)
    assert {c.memory for c in engine.contexts} == {(backend._memory.data_ptr(), engine.device_memory_size_v2)}
    assert all(len(c.profiles) == 1 for c in engine.contexts)  # set once, at creation: no context switches
    decode_profile, prefill_profile = 0, 1
    ring_contexts = [c for ring in backend._rings.values() for c in ring.contexts.values()]
    ring_ids = {c.context.id for c in ring_contexts}
    assert len(ring_ids) == 2 and all(engine.contexts[i].profiles == [decode_profile] for i in ring_ids)
    eager = {profile: ctx.id for profile, ctx in backend._contexts.items()}
    assert set(eager) == {decode_profile, prefill_profile} and not ring_ids & set(eager.values())
    replays = [entry for entry in engine.log if entry[0] == "replay"]
    assert len(replays) >= 3 * 6 - 2 * 3 and {ident for _, ident, _, _ in replays} == ring_ids
    assert all(ring.captures == 1 for ring in ring_contexts)  # captured once, never again
    for ring in ring_contexts:  # bound once: what each graph reads and writes never moved
        ctx = ring.context
        assert ctx.addresses["past_key_values.layers.0.c"] == ring.reads["layers.0.c"]
        assert ctx.addresses["input_ids"] == ring.data["input_ids"].data_ptr()


def test_a_replay_on_a_rebound_context_is_what_the_stand_in_refuses(monkeypatch):
    """The stand-in's check itself can fail: rebinding a ring context after its capture makes the next replay
    raise (so the test above would catch a backend that rebinds)."""
    backend = _stand_in_backend(monkeypatch)
    session = Session(backend)
    state = session.prefill([[1, 2]])
    for i in range(4):
        session.step([i], state=state, donate=True)
    ring = next(iter(backend._rings[1].contexts.values()))
    ring.context.set_tensor_address("input_ids", ring.data["input_ids"].data_ptr())  # a rebinding
    with pytest.raises(AssertionError, match="rebound after its capture"):
        for i in range(2):
            session.step([i], state=state, donate=True)


def test_state_writes_are_ordered_on_the_backend_stream(monkeypatch):
    """HIGH 2, with a SPY: every tensor write the backend makes (zeroing a new state, copying one, uploading
    one, feeding the inputs) happens while its own stream is the current one, so TensorRT, which runs on that
    stream, can never read a state before its write is done."""
    import torch

    backend = _stand_in_backend(monkeypatch)
    current: list[Any] = [None]

    @contextmanager
    def spy_stream(stream):  # SPY for torch.cuda.stream: which stream is current
        previous, current[0] = current[0], stream
        try:
            yield
        finally:
            current[0] = previous

    writes: list[tuple[str, Any]] = []
    real_zero, real_copy = torch.Tensor.zero_, torch.Tensor.copy_

    def zero(t, *a, **k):
        writes.append(("zero_", current[0]))
        return real_zero(t, *a, **k)

    def copy(t, *a, **k):
        writes.append(("copy_", current[0]))
        return real_copy(t, *a, **k)

    monkeypatch.setattr(torch.cuda, "stream", spy_stream)
    monkeypatch.setattr(torch.Tensor, "zero_", zero)
    monkeypatch.setattr(torch.Tensor, "copy_", copy)
    session = Session(backend)
    state = session.prefill([[1, 2], [3, 4]])
    fork = state.fork()
    for i in range(4):
        session.step([i, i + 1], state=state, donate=True)
    session.step([1, 1], state=fork)  # not donated: eager
    backend.state_from_host(fork.to_host())
    monkeypatch.setattr(torch.Tensor, "zero_", real_zero)
    monkeypatch.setattr(torch.Tensor, "copy_", real_copy)
    kinds = {kind for kind, _ in writes}
    assert kinds == {"zero_", "copy_"} and len(writes) >= 8
    assert all(stream is backend.stream for _, stream in writes), writes


def _greedy(backend, prompts, steps: int) -> list[list[int]]:
    return Session(backend).generate_all(prompts, max_new_tokens=steps, temperature=0)


def test_one_call_at_a_time_when_threads_share_the_backend(monkeypatch):
    """Sessions on several threads share one backend: its lock lets one call at a time bind the contexts and
    use the shared activation memory and output buffers (the stand-in's enqueue yields the GIL mid-call, so
    without the lock two calls would overlap), and every thread gets what it gets alone."""
    import threading
    import time

    backend = _stand_in_backend(monkeypatch)
    in_flight, most = [0], [0]
    real_run = StandInContext._run

    def slow_run(self, *args):  # the enqueue takes a while and lets other threads run meanwhile
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        time.sleep(0.001)
        try:
            return real_run(self, *args)
        finally:
            in_flight[0] -= 1

    monkeypatch.setattr(StandInContext, "_run", slow_run)
    prompts = [[[1, 2, 3]], [[4, 5]], [[6]], [[2, 2, 2, 2]]]
    alone = [_greedy(_stand_in_backend(monkeypatch), p, 10) for p in prompts]
    got: dict[int, Any] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, _greedy(backend, prompts[i], 10)))
               for i in range(len(prompts))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(prompts))] == alone
    assert most[0] == 1


def test_batch_churn_keeps_a_bounded_number_of_rings_and_pools(monkeypatch):
    """A scheduler changes the batch size all the time: rings (sets, contexts, graphs) exist for at most
    MAX_GRAPH_BATCHES batch sizes, the least recently used idle one making room, and pooled buffers for at most
    MAX_POOL_BATCHES; the tokens are the eager backend's."""
    from rnnx.runtime.tensorrt import backend as tensorrt_backend

    limits = ProfileLimits(max_batch=8, max_length=8, max_context=64)
    graphs, eager = _stand_in_backend(monkeypatch), _stand_in_backend(monkeypatch, cuda_graphs=False)
    for backend in (graphs, eager):
        backend._describe_model(_metadata(), "cpu", limits)
    results = []
    for backend in (graphs, eager):
        out = []
        for round_ in range(2):
            for batch in (1, 2, 3, 4, 5, 6, 7, 8):
                out.append(_greedy(backend, [[1 + (i + round_) % 5, 2] for i in range(batch)], 5))
                assert len(backend._rings) <= tensorrt_backend.MAX_GRAPH_BATCHES
                assert len(backend._pool) <= tensorrt_backend.MAX_POOL_BATCHES
        results.append(out)
    assert results[0] == results[1]
    assert any(how == "replay" for how, *_ in graphs.engine.log)


def test_a_failed_capture_turns_graphs_off_for_that_batch_only(monkeypatch, caplog):
    backend = _stand_in_backend(monkeypatch)
    want = _greedy(_stand_in_backend(monkeypatch, cuda_graphs=False), [[1, 2], [3, 4]], 8)
    assert _greedy(backend, [[1]], 6) == _greedy(_stand_in_backend(monkeypatch, cuda_graphs=False), [[1]], 6)
    replays = sum(how == "replay" for how, *_ in backend.engine.log)
    real_end = StandInGraph.capture_end

    def failing_end(self):
        real_end(self)
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(StandInGraph, "capture_end", failing_end)
    with caplog.at_level("WARNING", logger="rnnx.runtime"):
        assert _greedy(backend, [[1, 2], [3, 4]], 8) == want  # batch 2: its capture fails, the calls stay eager
    assert backend._rings[2].disabled and not backend._rings[2].contexts
    assert "CUDA graphs off for batch 2" in caplog.text
    monkeypatch.setattr(StandInGraph, "capture_end", real_end)
    _greedy(backend, [[4]], 6)  # batch 1 still replays its graphs
    assert sum(how == "replay" for how, *_ in backend.engine.log) > replays


def test_foreign_states_closed_backends_and_mismatched_engines_are_refused(monkeypatch):
    backend, other = _stand_in_backend(monkeypatch), _stand_in_backend(monkeypatch)
    state = other.init_state(1)
    ids = {"input_ids": np.array([[1]]), "attention_mask": np.array([[1]])}
    with pytest.raises(InputError, match="belongs to another TensorRT backend"):
        backend.run(ids, state)
    with pytest.raises(InputError, match="inputs have batch 1 but the state has 2 rows"):
        backend.run(ids, backend.init_state(2))
    backend.close()
    backend.close()  # idempotent
    with pytest.raises(RnnxRuntimeError, match="closed"):
        backend.init_state(1)
    engine = StandInEngine()
    monkeypatch.setattr(engine, "get_tensor_dtype", lambda name: "float16")
    fresh = object.__new__(type(backend))
    fresh._describe_model(_metadata(), "cpu", ProfileLimits(max_batch=4, max_length=8, max_context=64))
    with pytest.raises(RnnxRuntimeError, match="engine tensor 'input_ids' is float16 but the export says int64"):
        fresh._attach(STAND_IN_TRT, engine, StandInStream(), True)


def test_tensorrt_backend_graphs_match_eager_and_forks_survive(monkeypatch):
    eager = _stand_in_backend(monkeypatch, cuda_graphs=False)
    graphs = _stand_in_backend(monkeypatch, cuda_graphs=True)
    results = []
    for backend in (eager, graphs):
        session = Session(backend)
        state = session.prefill([[1, 2], [3, 4]])
        logits, fork = [], None
        for i in range(8):
            logits.append(session.step([i % 5, (i + 1) % 5], state=state, donate=True))
            if i == 3:
                fork = state.fork()
                fork_before = fork.to_host()["layers.0.c"].copy()
        assert np.array_equal(fork.to_host()["layers.0.c"], fork_before)
        results.append((np.stack(logits), state.to_host()["layers.0.c"]))
        assert not any(how == "replay" for how, *_ in eager.engine.log)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert any(how == "replay" for how, *_ in graphs.engine.log)


def test_tensorrt_backend_without_donation_keeps_the_callers_buffers(monkeypatch):
    backend = _stand_in_backend(monkeypatch)
    session = Session(backend)
    state = session.prefill([[1, 2]])
    kept = state.inner
    kept_ptr = kept.tensors["layers.0.c"].data_ptr()
    snapshot = kept.tensors["layers.0.c"].clone()
    for token in range(6):
        session.step([token], state=state)  # no donation: eager, fresh buffers every call
        assert state.inner.tensors["layers.0.c"].data_ptr() != kept_ptr
    assert all(how == "eager" for how, *_ in backend.engine.log) and not backend._rings
    assert not any(s.data_ptr() == kept_ptr for pool in backend._pool.values() for free in pool.values() for s in free)
    assert backend.state_to_host(kept)["layers.0.c"].tolist() == snapshot.numpy().tolist()


def test_tensorrt_backend_refuses_a_donated_state(monkeypatch):
    backend = _stand_in_backend(monkeypatch)
    session = Session(backend)
    state = session.prefill([[1, 2]])
    old = state.inner
    session.step([3], state=state, donate=True)
    ids = {"input_ids": np.array([[1]]), "attention_mask": np.array([[1]])}
    with pytest.raises(StaleState):
        backend.run(ids, old)
    with pytest.raises(StaleState):
        backend.copy_state(old)
    session.step([3], state=state, donate=True)  # the handle itself stays usable


def test_builder_never_enables_plugin_aliasing():
    """The runtime relies on out-of-place state outputs: the aliasing preview feature stays off."""
    from pathlib import Path

    import rnnx.runtime.tensorrt.builder as builder

    assert "ALIASED_PLUGIN_IO" not in Path(builder.__file__).read_text()
