"""Continuous batching: many independent generation streams sharing every decode step of one model.

A :class:`Scheduler` owns one language-model backend (torch, onnxruntime or tensorrt) and one worker
thread. Streams are submitted from any thread and may join and leave at any step::

    scheduler = Scheduler(rnnx.runtime.load("exports/lm"), max_streams=64)
    stream = scheduler.submit([1, 2, 3], max_new_tokens=32, temperature=0.0)
    for token in stream:          # blocks until each token is produced; or submit(..., callback=fn)
        ...
    stream.cancel()               # from any thread; the stream ends after the step in flight

How the worker batches. The states of all running streams are the rows of one device-resident batch state
(the *slot pool*, a :class:`~rnnx.runtime.serving.slots.StatePool`): the stream in slot i owns row i. Every
tick the worker

1. drops the rows of streams that ended (cancelled, stopped, out of tokens) with one row selection
   (on the device for torch and plain ONNX Runtime; through the host for ONNX Runtime with IO binding
   and for TensorRT), which frees their slots for reuse,
2. admits waiting streams into free slots: their prompts are prefilled together in one batched call
   (right-padded) from a fresh state, each samples its first token, and the prefilled rows are
   appended to the pool (one concatenation, likewise; the other rows' state is copied unchanged),
3. runs one batched decode step for every running stream (``(n, 1)`` tokens, no padded rows) and
   samples each stream's next token with its own options and random generator.

The pool is kept dense, so a step costs exactly the running streams and never a padded row; slots are
freed and reused as streams end and join. A stream's end becomes visible (its iteration stops, ``result``
returns, its callback gets ``None``) only after its row has been released.

What a stream sees is what ``Session.generate`` gives for its prompt alone: the same greedy tokens, and
for ``temperature > 0`` the same draws for the same ``seed`` (up to the float rounding of a different
batch size). Memory is bounded: at most ``max_streams`` rows
of state on the device, at most ``max_waiting`` streams queued (their prompts on the host) beyond
that, and :class:`SchedulerFull` from :meth:`Scheduler.submit` past both.

The scheduler batches O(1) recurrent states (SRU, SRU++ with linear attention, linear transformers); an
export whose state grows with the context (a softmax KV cache) is refused with :class:`InputError`.
While a scheduler runs it is the only user of its backend.
"""

from __future__ import annotations

import itertools
import queue
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Optional, Union

import numpy as np

from ..backends.base import Backend, InputError, RnnxRuntimeError
from ..sampling import SamplingOptions, check_max_new_tokens
from ..session import StatefulSession
from .slots import StatePool

#: Why a stream ended: a stop token, ``max_new_tokens`` reached, cancelled, the scheduler closed, an error.
FINISH_REASONS = ("stop", "max_new_tokens", "cancelled", "closed", "error")

_END = object()


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


class SchedulerFull(RnnxRuntimeError):
    """:meth:`Scheduler.submit` past ``max_streams`` running and ``max_waiting`` queued streams."""


class SchedulerClosed(RnnxRuntimeError):
    """:meth:`Scheduler.submit` after :meth:`Scheduler.close`."""


@dataclass(frozen=True)
class StreamOptions:
    """One stream's generation options (see :meth:`rnnx.runtime.Session.generate`): when it stops, and how it
    samples."""

    max_new_tokens: int
    stop_tokens: frozenset[int] = frozenset()
    sampling: SamplingOptions = SamplingOptions()


Callback = Callable[["Stream", Optional[int]], None]


class Stream:
    """One submitted generation: iterate it for its new tokens as they are produced.

    ``tokens``: the tokens so far; ``finish_reason``: None while running, then one of
    :data:`FINISH_REASONS`; ``error``: the exception that ended it (``finish_reason == "error"``),
    re-raised by iteration and :meth:`result`.
    """

    def __init__(
        self, stream_id: int, prompt: list[int], options: StreamOptions, callback: Optional[Callback],
        scheduler: Scheduler,
    ) -> None:  # fmt: skip
        self.id = stream_id
        self.prompt = prompt
        self.options = options
        self.tokens: list[int] = []
        self.finish_reason: Optional[str] = None
        self.error: Optional[BaseException] = None
        self._error_traceback: Optional[TracebackType] = None
        self._callback = callback
        self._scheduler = scheduler
        self._events: queue.Queue = queue.Queue()
        self._done = threading.Event()
        self._cancel_requested = False  # set by any thread, read by the worker
        self._ending: Optional[tuple[str, Optional[BaseException]]] = None  # (reason, error), set by the worker
        self._rng = options.sampling.generators(1)[0]

    def __repr__(self) -> str:
        return f"Stream(id={self.id}, tokens={len(self.tokens)}, finish_reason={self.finish_reason!r})"

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        """Ends the stream (``finish_reason "cancelled"``) after the step in flight; its slot is freed.
        A no-op for a stream that has ended."""
        self._scheduler.cancel(self)

    def __iter__(self) -> Iterator[int]:
        """The new tokens in order, each as soon as it is produced; ends with the stream (re-raises its
        error). One consumer per stream."""
        while True:
            event = self._events.get()
            if event is _END:
                self._raise_error()
                return
            yield event

    def result(self, timeout: Optional[float] = None) -> list[int]:
        """Waits for the end of the stream and returns all its new tokens (stop token included);
        re-raises its error; TimeoutError after ``timeout`` seconds."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"stream {self.id}: not finished after {timeout} s")
        self._raise_error()
        return list(self.tokens)

    def _raise_error(self) -> None:
        """Re-raises the stream's error, if any, with the traceback it had when it ended: every call raises
        it afresh, so the traceback never grows and keeps no earlier caller's frames alive."""
        if self.error is not None:
            raise self.error.with_traceback(self._error_traceback)

    def _emit(self, token: int) -> None:
        self.tokens.append(token)
        self._events.put(token)
        if self._callback is not None:
            self._callback(self, token)

    def _finish(self, reason: str, error: Optional[BaseException] = None) -> None:
        if self._done.is_set():
            return
        self.finish_reason, self.error = reason, error
        self._error_traceback = None if error is None else error.__traceback__
        self._events.put(_END)
        self._done.set()
        if self._callback is not None:
            try:
                self._callback(self, None)
            except Exception:  # the stream has ended: nothing left for a failing callback to stop
                pass


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot: ``running`` streams (each holding one row of device state), ``waiting`` streams
    (host only), ``held_rows`` (rows of the device state: equal to ``running`` between ticks),
    ``ticks`` (batched decode steps), ``prefills`` (batched prefill calls), ``finished`` (streams
    ended, any reason)."""

    running: int
    waiting: int
    held_rows: int
    ticks: int
    prefills: int
    finished: int


class Scheduler:
    """Continuous batching over one language-model backend; see the module doc.

    ``model``: a :class:`Session` (from :func:`rnnx.runtime.load`) or a :class:`Backend`.
    ``max_streams``: slots, i.e. rows of device state, at most; ``max_waiting``: streams queued beyond
    them (0: :class:`SchedulerFull` as soon as every slot is taken); ``max_prefill``: prompts prefilled
    in one call at most (default ``max_streams``).
    """

    def __init__(
        self,
        model: Union[StatefulSession, Backend],
        max_streams: int = 64,
        max_waiting: int = 1024,
        max_prefill: Optional[int] = None,
    ) -> None:
        backend = model.backend if isinstance(model, StatefulSession) else model
        if not isinstance(backend, Backend):
            raise InputError(f"model: expected an rnnx Session or Backend, got {type(model).__name__}")
        for name, value, least in (("max_streams", max_streams, 1), ("max_waiting", max_waiting, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(f"{name}: expected an integer >= {least}, got {value!r}")
        self.backend = backend
        self.max_streams, self.max_waiting = max_streams, max_waiting
        self.max_prefill = max_streams if max_prefill is None else max(1, int(max_prefill))
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._waiting: deque[Stream] = deque()
        self._streams: weakref.WeakValueDictionary[int, Stream] = weakref.WeakValueDictionary()  # id -> handle
        self._running: list[Stream] = []  # the streams holding a row of self._pool
        self._admitting = 0  # streams taken from the queue whose prefill is under way
        self._pool = StatePool(backend)  # refuses a non-LM export and a growing (KV-cache) state
        self._closed = False
        self._counts = {"ticks": 0, "prefills": 0, "finished": 0}
        self._worker = threading.Thread(target=self._loop, name="rnnx-scheduler", daemon=True)
        self._worker.start()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(
        self,
        prompt: Sequence[int],
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        stop_tokens: Sequence[int] = (),
        seed: Optional[int] = None,
        callback: Optional[Callback] = None,
    ) -> Stream:
        """Queues a stream and returns its handle at once. Options as in ``Session.generate``, per
        stream. ``callback(stream, token)`` runs on the worker thread for every new token and once
        with ``None`` when the stream ends (an exception from it ends that stream with the error).
        Raises :class:`InputError` for a bad prompt or option, :class:`SchedulerFull` when every slot
        and waiting place is taken, :class:`SchedulerClosed` after :meth:`close`."""
        tokens = self._check_prompt(prompt)
        try:
            sampling = SamplingOptions(float(temperature), top_k, top_p, seed)
            stops = frozenset(int(t) for t in stop_tokens)
            options = StreamOptions(check_max_new_tokens(max_new_tokens), stops, sampling)
        except ValueError as error:
            raise InputError(str(error)) from None
        with self._lock:
            if self._closed:
                raise SchedulerClosed("the scheduler is closed")
            stream = Stream(next(self._ids), tokens, options, callback, self)
            self._streams[stream.id] = stream
            if options.max_new_tokens == 0:
                self._counts["finished"] += 1
            else:
                self._queue(stream)
        if options.max_new_tokens == 0:
            stream._finish("max_new_tokens")  # outside the lock: the callback may call the scheduler
        return stream

    def _queue(self, stream: Stream) -> None:
        """Appends ``stream`` to the waiting queue (the lock held); SchedulerFull past the bounds."""
        free = self.max_streams - len(self._running) - self._admitting
        if len(self._waiting) >= free + self.max_waiting:
            raise SchedulerFull(
                f"scheduler full: {_count(len(self._running), 'stream')} running and {len(self._waiting)} waiting "
                f"(max_streams={self.max_streams}, max_waiting={self.max_waiting})"
            )
        self._waiting.append(stream)
        self._wake.notify()

    def cancel(self, stream: Union[Stream, int]) -> None:
        """Cancels a stream (handle or id) from any thread; see :meth:`Stream.cancel`. A waiting stream
        ends at once; a running one (or one being prefilled) ends at the worker's next look at it."""
        with self._lock:
            target = stream if isinstance(stream, Stream) else self._streams.get(int(stream))
            if target is None or target.done:
                return
            target._cancel_requested = True
            waiting = target in self._waiting
            if waiting:
                self._waiting.remove(target)
                self._counts["finished"] += 1
            else:
                self._wake.notify()
        if waiting:
            target._finish("cancelled")  # outside the lock: the callback may call the scheduler

    def stats(self) -> SchedulerStats:
        """A consistent snapshot of the slots and counters."""
        with self._lock:
            return SchedulerStats(
                running=len(self._running), waiting=len(self._waiting),
                held_rows=self._pool.held_rows, **self._counts,
            )  # fmt: skip

    def close(self, timeout: Optional[float] = 30.0) -> None:
        """Stops the worker after its current tick (waiting up to ``timeout`` seconds for it; from a
        callback, on the worker itself, without waiting); then every unfinished stream ends with
        ``"closed"`` and its state is released. Idempotent."""
        with self._lock:
            self._closed = True
            self._wake.notify()
        if threading.current_thread() is not self._worker:
            self._worker.join(timeout)

    def _check_prompt(self, prompt: Sequence[int]) -> list[int]:
        arr = np.asarray(prompt.detach().cpu().numpy() if hasattr(prompt, "detach") else prompt)
        if arr.ndim != 1 or arr.size == 0:
            raise InputError(f"prompt: expected a non-empty 1-D token list, got shape {tuple(arr.shape)}")
        if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
            raise InputError(f"prompt: expected integer tokens, got dtype {arr.dtype}")
        vocab = int(self.backend.vocab_size)
        bad = arr[(arr < 0) | (arr >= vocab)]
        if bad.size:
            raise InputError(f"prompt: token {int(bad[0])} out of vocabulary; expected 0 <= token < {vocab}")
        return [int(t) for t in arr]

    # The worker: everything below runs on its thread only.

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._waiting and not self._running:
                    self._wake.wait()
                if self._closed:
                    break
                room = self.max_streams - len(self._running)
                admit = [self._waiting.popleft() for _ in range(min(room, self.max_prefill, len(self._waiting)))]
                self._admitting = len(admit)
            try:
                self._tick(admit)
            except BaseException as error:  # the worker never dies silently: its streams end with the error
                self._fail([*admit, *self._running], error)
            del admit  # the idle wait must not keep the streams admitted last (and what their callbacks hold) alive
        with self._lock:
            left = [*self._running, *self._waiting]
            self._running = []
            self._pool.clear()
            self._waiting.clear()
            self._counts["finished"] += len(left)
        for stream in left:
            stream._finish("closed")

    def _fail(self, streams: list[Stream], error: BaseException) -> None:
        """Ends ``streams`` with ``error`` and drops every row (after an unexpected failure of a tick)."""
        ended = [s for s in dict.fromkeys(streams) if not s.done]
        with self._lock:
            self._pool.clear()
            self._counts["finished"] += len(ended)
            self._running, self._admitting = [], 0
        for stream in ended:
            stream._finish("error", error)

    def _tick(self, admit: list[Stream]) -> None:
        """Frees the slots of cancelled streams, prefills ``admit`` into free slots, decodes one step for
        every running stream (the admitted ones included: their first token came from the prefill)."""
        for stream in self._running:
            if stream._cancel_requested and stream._ending is None:
                stream._ending = ("cancelled", None)
        self._release_finished()
        if admit:
            self._prefill(admit)
            self._release_finished()
        if self._running:
            self._decode()

    def _release_finished(self) -> None:
        """Drops the rows of streams that are ending (one row selection), frees their slots, and only then
        ends them: when a stream's end is visible, its slot is already free."""
        ended = [s for s in self._running if s._ending is not None]
        if not ended:
            return
        with self._lock:
            self._pool.release([s.id for s in ended])
            self._counts["finished"] += len(ended)
            self._running = [s for s in self._running if s._ending is None]
        for stream in ended:
            stream._finish(*stream._ending)

    def _prefill(self, admit: list[Stream]) -> None:
        """One batched prefill of the admitted prompts into new rows; each samples its first token."""
        try:
            logits = self._pool.admit([s.id for s in admit], [s.prompt for s in admit])
        except Exception as error:  # the failure ends these streams, never the worker
            with self._lock:
                self._counts["finished"] += len(admit)
                self._admitting = 0
            for stream in admit:
                stream._finish("error", error)
            return
        with self._lock:
            self._counts["prefills"] += 1
            self._running, self._admitting = [*self._running, *admit], 0
        self._advance(admit, logits)

    def _decode(self) -> None:
        """One batched step for every running stream, fed its last token; samples the next ones."""
        try:
            logits = self._pool.feed([s.id for s in self._running], [[s.tokens[-1]] for s in self._running])
        except Exception as error:  # the failure ends these streams, never the worker
            self._fail(self._running, error)
            return
        with self._lock:
            self._counts["ticks"] += 1
        self._advance(self._running, logits)
        self._release_finished()

    def _advance(self, streams: list[Stream], logits: np.ndarray) -> None:
        """Samples each stream's next token from its row of ``logits`` (B, V), emits it, applies its stop
        conditions; a stream cancelled meanwhile ends instead."""
        for stream, row in zip(streams, logits):
            if stream.done or stream._ending is not None:
                continue
            if stream._cancel_requested:
                stream._ending = ("cancelled", None)
                continue
            o = stream.options
            token = int(o.sampling.sample(row[None], [stream._rng])[0])
            try:
                stream._emit(token)
            except Exception as error:  # a failing callback ends its own stream only
                stream._ending = ("error", error)
                continue
            if token in o.stop_tokens:
                stream._ending = ("stop", None)
            elif len(stream.tokens) >= o.max_new_tokens:
                stream._ending = ("max_new_tokens", None)
