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

Conversations (see docs/serving.md, "Conversations"). A stream may start from a state instead of the zero
state, and hand its final state back:

* ``submit(prompt, state=...)`` continues a :class:`~rnnx.runtime.State` (any backend of the same model) or a
  state file; ``keep_state=True`` and :meth:`Stream.state` give the state after the stream, covering its
  prompt and *every* token it emitted (the last one and a stop token included: one extra batched call over
  the ending rows feeds it), so the next turn's prompt is just the new input;
* ``submit(prompt, prefix=handle)`` starts from a copy of a prefix's state (:meth:`Scheduler.register_prefix`
  prefilled it once): the stream's prompt is what follows the prefix;
* ``submit(prompt, conversation=id)`` resumes the conversation's latest state from the scheduler's
  :class:`~rnnx.runtime.serving.conversations.ConversationStore` (a new id starts from the zero state, or from
  ``state`` / ``prefix`` when given) and, when the stream ends (stop, ``max_new_tokens`` or cancelled; not on an
  error or close), stores its final state there. One turn of a conversation runs at a time.

A stream that keeps its state (``keep_state`` or a ``conversation``) with ``max_new_tokens=0`` is still queued
and prefilled: it emits nothing and ends with ``"max_new_tokens"``, its state covering its prompt (a turn that
only feeds input). Without either, it ends at once and computes nothing.

The rule for "a resumed conversation equals one piece": turn k of a conversation yields exactly what
``Session.generate`` yields for the whole history so far (every earlier prompt and emitted token, then this
turn's prompt) given as one prompt, with this turn's own options and ``seed``. Each turn draws from its own
generator, seeded by its ``seed`` as row 0 of ``Session.generate`` is; no random state is carried between turns.

What a stream sees is what ``Session.generate`` gives for its prompt alone: the same greedy tokens, and
for ``temperature > 0`` the same draws for the same ``seed`` (up to the float rounding of a different
batch size). Memory is bounded: at most ``max_streams`` rows
of state on the device, at most ``max_waiting`` streams queued (their prompts on the host) beyond
that, and :class:`SchedulerFull` from :meth:`Scheduler.submit` past both.

The scheduler batches O(1) recurrent states (SRU, SRU++ with linear attention, linear transformers, Mamba-2) and
KV caches (hybrid checkpoints, softmax SRU++) alike: a cache's rows share one length, the pads of a shorter row
hidden by its validity mask, and the pool drops positions no row needs (:class:`~rnnx.runtime.serving.slots.
StatePool`). An export whose state grows without a validity mask is refused with :class:`InputError`.
While a scheduler runs it is the only user of its backend.
"""

from __future__ import annotations

import functools
import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import TracebackType
from typing import Optional, Union

import numpy as np

from ..backends.base import Backend, InputError, RnnxRuntimeError
from ..sampling import SamplingOptions, check_max_new_tokens
from ..session import Session, StatefulSession
from ..state import HostState, State, read_state_file
from ..text import ChatTranscript, Message, Text
from .conversations import ConversationStore, check_conversation_id
from .slots import StatePool

#: Why a stream ended: a stop token, ``max_new_tokens`` reached, cancelled, the scheduler closed, an error.
FINISH_REASONS = ("stop", "max_new_tokens", "cancelled", "closed", "error")
#: The finish reasons after which a stream's final state is kept (``keep_state``) and a conversation stored.
KEEP_STATE_REASONS = ("stop", "max_new_tokens", "cancelled")

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
StartState = Union[State, str, os.PathLike]


@dataclass(frozen=True, eq=False)
class PrefixHandle:
    """A prefix prefilled once by :meth:`Scheduler.register_prefix`: ``tokens`` and the state after them (one
    row on the scheduler's device, ``nbytes`` bytes: whatever the prefix's length for a recurrent model, plus the KV
    caches of its tokens for a hybrid). Streams submitted with it
    start from a copy of that state. It lives as long as the handle."""

    tokens: tuple[int, ...]
    state: State = field(repr=False)
    nbytes: int

    def __len__(self) -> int:
        return len(self.tokens)


class _Channel:
    """What a stream hands to its reader: the tokens so far, an event per token and one at the end, how it ended
    (``finish_reason``, ``error``) and the state it kept. The worker writes it (:meth:`put`, :meth:`close`); the
    :class:`Stream` handle reads it from any thread."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.finish_reason: Optional[str] = None
        self.error: Optional[BaseException] = None
        self.error_traceback: Optional[TracebackType] = None
        self.state: Optional[State] = None
        self.events: queue.Queue = queue.Queue()
        self.done = threading.Event()

    def put(self, token: int) -> None:
        self.tokens.append(token)
        self.events.put(token)

    def close(self, reason: str, error: Optional[BaseException]) -> None:
        self.finish_reason, self.error = reason, error
        self.error_traceback = None if error is None else error.__traceback__
        self.events.put(_END)
        self.done.set()


class Stream:
    """One submitted generation: iterate it for its new tokens as they are produced. The user's handle; the
    scheduler's worker keeps its own record of the stream (a row of the batch) and writes what the handle reads.

    ``tokens``: the tokens so far; ``finish_reason``: None while running, then one of
    :data:`FINISH_REASONS`; ``error``: the exception that ended it (``finish_reason == "error"``),
    re-raised by iteration and :meth:`result`.
    """

    def __init__(
        self, stream_id: int, prompt: list[int], options: StreamOptions, scheduler: Scheduler, channel: _Channel,
        keep_state: bool = False, conversation: Optional[str] = None,
    ) -> None:  # fmt: skip
        self.id = stream_id
        self.prompt = prompt
        self.options = options
        self.conversation = conversation
        self.keep_state = keep_state
        self._scheduler = scheduler
        self._channel = channel

    def __repr__(self) -> str:
        return f"Stream(id={self.id}, tokens={len(self.tokens)}, finish_reason={self.finish_reason!r})"

    @property
    def tokens(self) -> list[int]:
        return self._channel.tokens

    @property
    def finish_reason(self) -> Optional[str]:
        return self._channel.finish_reason

    @property
    def error(self) -> Optional[BaseException]:
        return self._channel.error

    @property
    def done(self) -> bool:
        return self._channel.done.is_set()

    def cancel(self) -> None:
        """Ends the stream (``finish_reason "cancelled"``) after the step in flight; its slot is freed.
        A no-op for a stream that has ended."""
        self._scheduler.cancel(self)

    def __iter__(self) -> Iterator[int]:
        """The new tokens in order, each as soon as it is produced; ends with the stream (re-raises its
        error). One consumer per stream."""
        while True:
            event = self._channel.events.get()
            if event is _END:
                self._raise_error()
                return
            yield event

    def result(self, timeout: Optional[float] = None) -> list[int]:
        """Waits for the end of the stream and returns all its new tokens (stop token included);
        re-raises its error; TimeoutError after ``timeout`` seconds."""
        if not self._channel.done.wait(timeout):
            raise TimeoutError(f"stream {self.id}: not finished after {timeout} s")
        self._raise_error()
        return list(self.tokens)

    def reply(self, timeout: Optional[float] = None) -> str:
        """Waits for the end of the stream and returns its new tokens as text (the export's tokenizer; stop tokens
        left out); errors as :meth:`result`, TextUnavailable for an export without a tokenizer."""
        tokens = self.result(timeout)
        text = self._scheduler._text()
        return text.decode([t for t in tokens if t not in text.eos_token_ids and t not in self.options.stop_tokens])

    def state(self, timeout: Optional[float] = None) -> State:
        """Waits for the end of the stream and returns its final :class:`State` (one row on the scheduler's
        backend): its start state advanced by the prompt and every emitted token. Needs ``keep_state=True``
        (a ``conversation`` alone stores its state in the scheduler's store, read it with
        ``scheduler.conversations.get``; the stream does not hold it); raises the stream's error,
        :class:`RnnxRuntimeError` when it ended without a state (closed, or cancelled before it was admitted),
        TimeoutError after ``timeout`` seconds."""
        if not self.keep_state:
            raise InputError(f"stream {self.id}: submitted without keep_state=True, so its state was not kept")
        self.result(timeout)
        if self._channel.state is None:
            raise RnnxRuntimeError(f"stream {self.id}: ended ({self.finish_reason}) before it had a state to keep")
        return self._channel.state

    def _raise_error(self) -> None:
        """Re-raises the stream's error, if any, with the traceback it had when it ended: every call raises
        it afresh, so the traceback never grows and keeps no earlier caller's frames alive."""
        if self.error is not None:
            raise self.error.with_traceback(self._channel.error_traceback)


@dataclass(eq=False)
class _Row:
    """The worker's record of one stream, from its submission to its end: what it starts from, its generator, how
    far its row of the batch has been fed, its last logits (kept streams), and why it is ending. Writes the
    stream's :class:`_Channel`; ``cancel_requested`` is set by any thread, everything else by the worker (or under
    the scheduler's lock before the worker sees the row)."""

    stream: Stream
    channel: _Channel
    callback: Optional[Callback]
    start: Optional[Union[State, HostState]]  # None: the zero state; a prefix's State; a resumed HostState
    rng: np.random.Generator
    fed: int = 0  # emitted tokens already fed into the stream's row
    last_logits: Optional[np.ndarray] = None  # (1, V) after the last fed token (kept streams only)
    ending: Optional[tuple[str, Optional[BaseException]]] = None  # (reason, error), set by the worker
    cancel_requested: bool = False
    chat: Optional[ChatTranscript] = None  # a chat turn's transcript after its prompt (stored with its state)

    @property
    def id(self) -> int:
        return self.stream.id

    @property
    def tokens(self) -> list[int]:
        return self.channel.tokens

    @property
    def keeps_state(self) -> bool:
        """Whether the stream's final state is kept (``keep_state``) or stored (a conversation)."""
        return self.stream.keep_state or self.stream.conversation is not None

    def emit(self, token: int) -> None:
        self.channel.put(token)
        if self.callback is not None:
            self.callback(self.stream, token)


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot: ``running`` streams (each holding one row of device state), ``waiting`` streams
    (host only), ``held_rows`` (rows of the device state: equal to ``running`` between ticks),
    ``ticks`` (batched decode steps), ``prefills`` (batched prefill calls), ``finished`` (streams
    ended, any reason), ``prefill_tokens`` (prompt tokens computed by prefills, registered prefixes
    included: the prefill work)."""

    running: int
    waiting: int
    held_rows: int
    ticks: int
    prefills: int
    finished: int
    prefill_tokens: int


class Scheduler:
    """Continuous batching over one language-model backend; see the module doc.

    ``model``: a :class:`Session` (from :func:`rnnx.runtime.load`) or a :class:`Backend`.
    ``max_streams``: slots, i.e. rows of device state, at most; ``max_waiting``: streams queued beyond
    them (0: :class:`SchedulerFull` as soon as every slot is taken); ``max_prefill``: prompts prefilled
    in one call at most (default ``max_streams``). ``conversations``: where ``submit(conversation=...)``
    parks states: a :class:`ConversationStore` of this model, a directory (a store over it), or None (a
    memory-only store).
    """

    def __init__(
        self,
        model: Union[StatefulSession, Backend],
        max_streams: int = 64,
        max_waiting: int = 1024,
        max_prefill: Optional[int] = None,
        conversations: Optional[Union[ConversationStore, str, os.PathLike]] = None,
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
        self._waiting: deque[_Row] = deque()
        self._rows: dict[int, _Row] = {}  # id -> the record of every stream not yet ended (waiting or running)
        self._running: list[_Row] = []  # the streams holding a row of self._pool
        self._admitting = 0  # streams taken from the queue whose prefill is under way
        self._pool = StatePool(backend)  # refuses a non-LM export and a KV cache without a validity mask
        if isinstance(conversations, ConversationStore):
            if conversations.backend.signature != backend.signature:
                raise InputError("conversations: the store holds states of a different model")
            self.conversations = conversations
        else:
            self.conversations = ConversationStore(backend, conversations)
        self._session = Session(backend)  # the worker's, for prefixes
        self._busy: set[str] = set()  # conversations with a turn in flight
        self._jobs: deque[tuple[Callable[[], object], Future]] = deque()  # run on the worker
        self._closed = False
        self._counts = {"ticks": 0, "prefills": 0, "finished": 0, "prefill_tokens": 0}
        self._worker = threading.Thread(target=self._loop, name="rnnx-scheduler", daemon=True)
        self._worker.start()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(
        self,
        prompt: Union[Sequence[int], str, Sequence[Message]],
        max_new_tokens: int,
        sampling: Optional[SamplingOptions] = None,
        *,
        temperature: Optional[float] = None,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        seed: Optional[int] = None,
        stop_tokens: Sequence[int] = (),
        callback: Optional[Callback] = None,
        state: Optional[StartState] = None,
        prefix: Optional[PrefixHandle] = None,
        conversation: Optional[str] = None,
        keep_state: bool = False,
    ) -> Stream:
        """Queues a stream and returns its handle at once. ``sampling``: how it chooses its tokens, a
        :class:`~rnnx.runtime.sampling.SamplingOptions` (as ``Session.generate`` builds one), or its fields as
        keywords (``temperature`` 1.0, no filters and a fresh seed unless given); not both. ``stop_tokens`` end it.
        ``callback(stream, token)`` runs on the worker thread for every new token and once with ``None`` when the
        stream ends (an exception from it ends that stream with the error).

        Where it starts (see the module doc): ``state`` (a :class:`State` of one row of this model, any
        backend, or a state file; read now, so a bad file raises here), else ``prefix`` (a
        :class:`PrefixHandle` of this scheduler; ``prompt`` is what follows it), else ``conversation``'s latest
        state (a new id: the zero state). ``conversation``: the stream's final state is stored under that id.
        ``keep_state``: :meth:`Stream.state` returns the final state.

        ``prompt``: token ids, or (an export that carries its checkpoint's tokenizer, :attr:`text`) text, or chat
        messages (``[{"role": "user", "content": ...}]``): with a ``conversation``, this turn's new messages, rendered
        after the conversation's stored transcript and fed from where its state stopped (the transcript is stored
        with the state, :meth:`ConversationStore.transcript`); without, a whole conversation. A text or messages
        stream stops at the checkpoint's eos ids unless ``stop_tokens`` are given; :meth:`Stream.reply` decodes it.

        Raises :class:`InputError` for a bad prompt, option or start state (one line; a conversation keeps
        its previous state), :class:`SchedulerFull` when every slot and waiting place is taken,
        :class:`SchedulerClosed` after :meth:`close`."""
        chat_turn = _is_messages(prompt) and conversation is not None
        if chat_turn and (state is not None or prefix is not None):
            raise InputError("submit: a conversation's messages continue its own transcript; give no state or prefix")
        if isinstance(prompt, str) or _is_messages(prompt):
            text = self._text()
            stop_tokens = tuple(stop_tokens) or text.eos_token_ids
            tokens = None if chat_turn else self._check_prompt(text.encode(prompt) if isinstance(prompt, str)
                                                                else text.encode_chat(prompt))  # fmt: skip
        else:
            tokens = self._check_prompt(prompt)
        options = _stream_options(max_new_tokens, sampling, temperature, top_k, top_p, seed, stop_tokens)
        if state is not None and prefix is not None:
            raise InputError("submit: give either a start state or a prefix, not both")
        if prefix is not None and (not isinstance(prefix, PrefixHandle) or prefix.state.backend is not self.backend):
            raise InputError(f"prefix: expected a PrefixHandle registered with this scheduler, got {prefix!r}")
        conversation = None if conversation is None else check_conversation_id(conversation)
        with self._lock:
            if self._closed:
                raise SchedulerClosed("the scheduler is closed")
            if conversation is not None:
                if conversation in self._busy:
                    raise InputError(f"conversation {conversation!r}: a turn is already in flight; one at a time")
                self._busy.add(conversation)
        # a stream that keeps its state runs even for 0 new tokens: its prompt must reach the state it keeps
        at_once = options.max_new_tokens == 0 and not keep_state and conversation is None
        try:
            start = prefix.state if prefix is not None else self._start_state(state, conversation)
            chat = None
            if chat_turn:  # the conversation's transcript (from the same stored state) and this turn's ids
                stored = None if start is None else start.chat
                before = ChatTranscript() if stored is None else ChatTranscript.from_json(stored, conversation)
                ids, chat = before.turn(self._text(), prompt)
                tokens = self._check_prompt(ids)
            with self._lock:
                if self._closed:
                    raise SchedulerClosed("the scheduler is closed")
                channel = _Channel()
                stream = Stream(next(self._ids), tokens, options, self, channel, bool(keep_state), conversation)
                row = _Row(stream, channel, callback, start, options.sampling.generators(1)[0], chat=chat)
                if at_once:
                    self._counts["finished"] += 1
                else:
                    self._queue(row)
        except BaseException:
            with self._lock:
                self._busy.discard(conversation)
            raise
        if at_once:
            self._finish(row, "max_new_tokens")  # outside the lock: the callback may call the scheduler
        return stream

    def _start_state(self, state: Optional[StartState], conversation: Optional[str]) -> Optional[HostState]:
        """The host copy of a stream's start state: ``state`` (a State or a file), else the conversation's."""
        if state is None:
            return None if conversation is None else self.conversations.get_host(conversation)
        if isinstance(state, State):
            if state.inner.signature != self.backend.signature:
                raise InputError("state: belongs to a different model than the scheduler's")
            host = HostState.of(state)
        elif isinstance(state, (str, os.PathLike)):
            host = read_state_file(self.backend, state)
        else:
            raise InputError(f"state: expected a State or a state file path, got {type(state).__name__}")
        if host.batch != 1:
            raise InputError(f"state: a stream starts from one row, the state has {host.batch}")
        return host

    def register_prefix(self, tokens: Sequence[int], timeout: Optional[float] = 60.0) -> PrefixHandle:
        """Prefills ``tokens`` once (on the worker, between ticks) and returns its handle; streams submitted
        with ``prefix=handle`` start from a copy of its state and equal streams that prefilled ``tokens``
        themselves. Blocks until the prefill is done (TimeoutError after ``timeout`` seconds); from a
        callback, it runs at once."""
        ids = self._check_prompt(tokens)

        def prefill() -> PrefixHandle:
            state = self._session.prefill([ids])
            self._session.state = None
            with self._lock:
                self._counts["prefill_tokens"] += len(ids)
            return PrefixHandle(tuple(ids), state, HostState.of(state).nbytes)

        if threading.current_thread() is self._worker:
            return prefill()
        done: Future = Future()
        with self._lock:
            if self._closed:
                raise SchedulerClosed("the scheduler is closed")
            self._jobs.append((prefill, done))
            self._wake.notify()
        return done.result(timeout)

    def _finish(self, row: _Row, reason: str, error: Optional[BaseException] = None) -> None:
        """Ends a stream: its handle sees how (and its kept state), its conversation may take its next turn, its
        callback gets ``None``. Called without the lock (the callback may call the scheduler); once per stream."""
        if row.channel.done.is_set():
            return
        row.start = None  # a resumed state or a prefix is not kept alive by a finished stream
        with self._lock:  # before the end is visible: a caller that saw it may submit the conversation's next turn
            self._rows.pop(row.id, None)
            if row.stream.conversation is not None:
                self._busy.discard(row.stream.conversation)
        row.channel.close(reason, error)
        if row.callback is None:
            return
        try:
            row.callback(row.stream, None)
        except Exception:  # the stream has ended: nothing left for a failing callback to stop
            pass

    def _queue(self, row: _Row) -> None:
        """Appends ``row`` to the waiting queue (the lock held); SchedulerFull past the bounds."""
        free = self.max_streams - len(self._running) - self._admitting
        if len(self._waiting) >= free + self.max_waiting:
            raise SchedulerFull(
                f"scheduler full: {_count(len(self._running), 'stream')} running and {len(self._waiting)} waiting "
                f"(max_streams={self.max_streams}, max_waiting={self.max_waiting})"
            )
        self._rows[row.id] = row
        self._waiting.append(row)
        self._wake.notify()

    def cancel(self, stream: Union[Stream, int]) -> None:
        """Cancels a stream (handle or id) from any thread; see :meth:`Stream.cancel`. A waiting stream
        ends at once; a running one (or one being prefilled) ends at the worker's next look at it."""
        with self._lock:
            row = self._rows.get(stream.id if isinstance(stream, Stream) else int(stream))
            if row is None or row.channel.done.is_set():
                return
            row.cancel_requested = True
            waiting = row in self._waiting
            if waiting:
                self._waiting.remove(row)
                self._counts["finished"] += 1
            else:
                self._wake.notify()
        if waiting:
            self._finish(row, "cancelled")  # outside the lock: the callback may call the scheduler

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

    @functools.cached_property
    def text(self) -> Optional[Text]:
        """The export's tokenizer and chat template (:class:`~rnnx.runtime.text.Text`), or None without them."""
        return Text.of_backend(self.backend)

    def _text(self) -> Text:
        return Text.required(self.text, self.backend.metadata)

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
                while not self._closed and not self._waiting and not self._running and not self._jobs:
                    self._wake.wait()
                if self._closed:
                    break
                jobs = list(self._jobs)
                self._jobs.clear()
                room = self.max_streams - len(self._running)
                admit = [self._waiting.popleft() for _ in range(min(room, self.max_prefill, len(self._waiting)))]
                self._admitting = len(admit)
            for job, done in jobs:
                try:
                    done.set_result(job())
                except BaseException as error:  # the caller gets it; the worker goes on
                    done.set_exception(error)
            try:
                self._tick(admit)
            except BaseException as error:  # the worker never dies silently: its streams end with the error
                self._fail([*admit, *self._running], error)
            del admit  # the idle wait must not keep the streams admitted last (and what their callbacks hold) alive
        with self._lock:
            left = [*self._running, *self._waiting]
            for _, done in self._jobs:
                done.set_exception(SchedulerClosed("the scheduler is closed"))
            self._jobs.clear()
            self._running = []
            self._pool.clear()
            self._waiting.clear()
            self._counts["finished"] += len(left)
        for row in left:
            self._finish(row, "closed")

    def _fail(self, rows: list[_Row], error: BaseException) -> None:
        """Ends ``rows`` with ``error`` and drops every row (after an unexpected failure of a tick)."""
        ended = [r for r in dict.fromkeys(rows) if not r.channel.done.is_set()]
        with self._lock:
            self._pool.clear()
            self._counts["finished"] += len(ended)
            self._running, self._admitting = [], 0
        for row in ended:
            self._finish(row, "error", error)

    def _tick(self, admit: list[_Row]) -> None:
        """Frees the slots of cancelled streams, prefills ``admit`` into free slots, decodes one step for
        every running stream (the admitted ones included: their first token came from the prefill)."""
        for row in self._running:
            if row.cancel_requested and row.ending is None:
                row.ending = ("cancelled", None)
        self._release_finished()
        if admit:
            self._prefill(admit)
            self._release_finished()
        if self._running:
            self._decode()

    def _release_finished(self) -> None:
        """Drops the rows of streams that are ending (one row selection), frees their slots, and only then
        ends them: when a stream's end is visible, its slot is already free (and its state kept or stored)."""
        ended = [r for r in self._running if r.ending is not None]
        if not ended:
            return
        kept = [r for r in ended if r.keeps_state and r.ending[0] in KEEP_STATE_REASONS]
        if kept:
            self._keep_states(kept)
        with self._lock:
            self._pool.release([r.id for r in ended])
            self._counts["finished"] += len(ended)
            self._running = [r for r in self._running if r.ending is None]
        for row in ended:
            self._finish(row, *row.ending)

    def _keep_states(self, kept: list[_Row]) -> None:
        """Takes the rows of ``kept`` out of the pool, fed the tokens they emitted last (one call over these
        rows), as their final states; stores conversations' (a failure ends that stream with the error)."""
        try:  # no lock needed: the pool is the worker's (stats reads its row count only)
            states = self._pool.take([r.id for r in kept], [r.tokens[r.fed :] for r in kept])
        except Exception as error:
            for row in kept:
                row.ending = ("error", error)
            return
        for row, state in zip(kept, states):
            if state.last_logits is None:
                state.last_logits = row.last_logits
            row.fed = len(row.tokens)
            if row.stream.keep_state:  # only then does the stream hold its device state (Stream.state)
                row.channel.state = state
            if row.stream.conversation is not None:
                try:
                    chat = None if row.chat is None else row.chat.replied(self._text(), row.tokens)
                    self.conversations.put(row.stream.conversation, state, chat)
                except Exception as error:
                    row.ending = ("error", error)

    def _prefill(self, admit: list[_Row]) -> None:
        """One batched prefill of the admitted prompts into new rows; each samples its first token."""
        try:
            starts = [r.start.to_state(self.backend) if isinstance(r.start, HostState) else r.start for r in admit]
            logits = self._pool.admit([r.id for r in admit], [r.stream.prompt for r in admit], starts)
        except Exception as error:  # the failure ends these streams, never the worker
            with self._lock:
                self._counts["finished"] += len(admit)
                self._admitting = 0
            for row in admit:
                self._finish(row, "error", error)
            return
        for row in admit:
            row.start = None  # its row holds a copy: the start state is not kept alive by the stream
        with self._lock:
            self._counts["prefills"] += 1
            self._counts["prefill_tokens"] += sum(len(r.stream.prompt) for r in admit)
            self._running, self._admitting = [*self._running, *admit], 0
        self._advance(admit, logits)

    def _decode(self) -> None:
        """One batched step for every running stream, fed its last token; samples the next ones."""
        try:
            logits = self._pool.feed([r.id for r in self._running], [[r.tokens[-1]] for r in self._running])
        except Exception as error:  # the failure ends these streams, never the worker
            self._fail(self._running, error)
            return
        with self._lock:
            self._counts["ticks"] += 1
        for row in self._running:
            row.fed = len(row.tokens)
        self._advance(self._running, logits)
        self._release_finished()

    def _advance(self, rows: list[_Row], logits: np.ndarray) -> None:
        """Samples each stream's next token from its row of ``logits`` (B, V), emits it, applies its stop
        conditions; a stream cancelled meanwhile ends instead."""
        for row, row_logits in zip(rows, logits):
            if row.channel.done.is_set() or row.ending is not None:
                continue
            if row.keeps_state:
                row.last_logits = row_logits[None].copy()
            if row.cancel_requested:
                row.ending = ("cancelled", None)
                continue
            o = row.stream.options
            if o.max_new_tokens == 0:  # a turn that only feeds its prompt (kept state): nothing to sample
                row.ending = ("max_new_tokens", None)
                continue
            token = int(o.sampling.sample(row_logits[None], [row.rng])[0])
            try:
                row.emit(token)
            except Exception as error:  # a failing callback ends its own stream only
                row.ending = ("error", error)
                continue
            if token in o.stop_tokens:
                row.ending = ("stop", None)
            elif len(row.tokens) >= o.max_new_tokens:
                row.ending = ("max_new_tokens", None)


def _is_messages(prompt: object) -> bool:
    """Whether ``prompt`` is chat messages (a non-empty list of dicts)."""
    return isinstance(prompt, (list, tuple)) and len(prompt) > 0 and all(isinstance(m, dict) for m in prompt)


def _stream_options(
    max_new_tokens: int,
    sampling: Optional[SamplingOptions],
    temperature: Optional[float],
    top_k: Optional[int],
    top_p: Optional[float],
    seed: Optional[int],
    stop_tokens: Sequence[int],
) -> StreamOptions:
    """:meth:`Scheduler.submit`'s options: ``sampling`` whole, or built from its keyword fields (not both);
    InputError naming the bad option."""
    sugar = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    given = [name for name, value in sugar.items() if value is not None]
    if sampling is not None and given:
        raise InputError(f"submit: give sampling=SamplingOptions(...) or {', '.join(given)}, not both")
    if sampling is not None and not isinstance(sampling, SamplingOptions):
        raise InputError(f"sampling: expected a SamplingOptions, got {type(sampling).__name__}")
    try:
        if sampling is None:
            sampling = SamplingOptions(**{n: v for n, v in sugar.items() if v is not None})
        stops = frozenset(int(t) for t in stop_tokens)
        return StreamOptions(check_max_new_tokens(max_new_tokens), stops, sampling)
    except ValueError as error:
        raise InputError(str(error)) from None
