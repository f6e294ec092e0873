"""A pool of per-stream recurrent states as the rows of one device-resident batch, keyed by stream.

:class:`StatePool` is the batching core that :class:`~rnnx.runtime.serving.scheduler.Scheduler` (in-process
continuous batching) and the Triton Python-backend model (streams keyed by correlation id) share:

* :meth:`StatePool.admit` prefills new streams' prompts in one batched call, each from a fresh state or a
  given one (a resumed conversation, a fork of a prefix's state), and appends their rows (one device
  concatenation; the other rows are copied unchanged);
* :meth:`StatePool.feed` advances any subset of the streams by any number of tokens each in one
  batched call over the pool: rows not fed, and positions past a row's own tokens, are pads
  (``attention_mask = 0``), which never change a row's state;
* :meth:`StatePool.release` drops streams' rows (one device row selection); the pool stays dense, so a
  call costs the streams held and freed rows are reused by the next admission;
* :meth:`StatePool.take` drops streams' rows and hands each back as a :class:`~rnnx.runtime.state.State`
  of one row (after feeding it a last few tokens, in one call over those rows only): what a stream that
  keeps its state, or a conversation parked in a
  :class:`~rnnx.runtime.serving.conversations.ConversationStore`, gets.

Each call returns, per stream, the logits after its last real token (``(k, V)`` float32, the order
of the keys given). The pool counts each stream's own positions (its start state's, its prompt, the tokens
fed to it), so a taken state's ``past_length`` is its stream's, never the pads of the calls it shared.

KV caches (hybrid models, softmax SRU++) share the batch too: every row's cache has the pool's length, a row's
positions past its own being pads its validity mask hides (:meth:`~rnnx.runtime.Backend.concat_rows` pads a
joining row's cache at its end). The pool drops the positions no row needs (:meth:`~rnnx.runtime.Backend.
compact_rows`) when they pass a quarter of the longest stream's (plus :data:`SLACK_POSITIONS`), so a cache holds at
most about 1.25x the longest stream's context, and a taken row is compacted to exactly its own positions: a parked
conversation costs its KV cache plus the fixed state. A growing state without a validity mask is refused with
:class:`InputError`. Not thread-safe: one owner.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Optional

import numpy as np

from ..backends.base import Backend, BackendState, InputError
from ..contract.artifact import ATTENTION_MASK, INPUT_IDS, LOGITS
from ..session import Session
from ..state import State

#: Cached positions a pool of KV caches may carry beyond the longest stream's before it compacts (with 1/4 of it).
SLACK_POSITIONS = 16


class StatePool:
    """Streams' states as rows of one batch on ``backend``'s device; see the module doc."""

    def __init__(self, backend: Backend) -> None:
        if backend.vocab_size is None:
            raise InputError(f"{backend.describe()}: a state pool serves language models (generation)")
        grow = [s.name for s in backend.state_specs if s.grows]
        if grow and not backend.valid_specs:
            raise InputError(
                f"{backend.describe()}: state tensors {grow} grow with the context (a KV cache) without a validity "
                "mask (a bool (batch, past_length) state), so streams of different lengths cannot share a batch"
            )
        self.backend = backend
        self._prefill = Session(backend)
        self._keys: list[Hashable] = []  # row i holds self._keys[i]
        self._rows: dict[Hashable, int] = {}
        self._past: dict[Hashable, int] = {}  # key -> positions fed to that stream (pads excluded)
        self._state: Optional[BackendState] = None

    @property
    def keys(self) -> list[Hashable]:
        """The streams held, in row order."""
        return list(self._keys)

    @property
    def held_rows(self) -> int:
        """Rows of state on the device (= streams held)."""
        return 0 if self._state is None else self._state.batch

    def __contains__(self, key: Hashable) -> bool:
        return key in self._rows

    def __len__(self) -> int:
        return len(self._keys)

    def admit(
        self,
        keys: Sequence[Hashable],
        prompts: Sequence[Sequence[int]],
        starts: Optional[Sequence[Optional[State]]] = None,
    ) -> np.ndarray:
        """Prefills ``prompts`` (one per new key, any lengths) in one call and appends their rows; returns
        the logits after each prompt's last token, (k, V). ``starts``: per key, None (a fresh state) or a
        :class:`State` of one row of this model on this backend to continue (read, never changed: the pool
        holds a copy). Nothing changes when it raises."""
        if len(keys) != len(prompts) or not keys:
            raise InputError(f"admit: expected one prompt per key, got {len(keys)} keys and {len(prompts)} prompts")
        taken = [k for k in keys if k in self._rows]
        if taken or len(set(keys)) != len(keys):
            raise InputError(f"admit: streams {taken or list(keys)} already hold a row (or are repeated)")
        start = None if starts is None or all(s is None for s in starts) else self._start_rows(keys, starts)
        state = self._prefill.prefill([list(p) for p in prompts], state=start, donate=True)
        self._prefill.state = None  # the rows live in the pool from here; the session keeps no reference
        joined = state.inner if self._state is None else self.backend.concat_rows([self._state, state.inner])
        self._state = joined
        for i, key in enumerate(keys):
            self._rows[key] = len(self._keys)
            self._keys.append(key)
            self._past[key] = self._own_past(None if starts is None else starts[i]) + len(prompts[i])
        self._compact_if_sparse()
        return state.last_logits

    def _own_past(self, start: Optional[State]) -> int:
        """A start state's own positions: its past_length, or for a KV cache its valid positions (a row selected
        from a padded batch carries pads)."""
        if start is None:
            return 0
        if not self.backend.grows or not self.backend.valid_specs:
            return start.past_length
        valid = self.backend.state_to_host(start.inner)[self.backend.valid_specs[0].name]
        return int(valid.sum())

    def _compact_if_sparse(self) -> None:
        """Drops the cached positions no row needs once they pass a quarter of the longest stream's (KV caches)."""
        if self._state is None or not self.backend.grows or not self._past:
            return
        longest = max(self._past.values())
        if self._state.past_length > longest + longest // 4 + SLACK_POSITIONS:
            self._state = self.backend.compact_rows(self._state)

    def _start_rows(self, keys: Sequence[Hashable], starts: Sequence[Optional[State]]) -> State:
        """One new state whose row i copies ``starts[i]`` (a fresh row where None)."""
        if len(starts) != len(keys):
            raise InputError(f"admit: expected one start per key, got {len(keys)} keys and {len(starts)} starts")
        rows = []
        for key, start in zip(keys, starts):
            if start is None:
                rows.append(self.backend.init_state(1))
                continue
            inner = start.inner
            if inner.signature != self.backend.signature or inner.backend != self.backend.name or inner.batch != 1:
                raise InputError(
                    f"admit: stream {key!r}: the start state must be one row of this model on backend "
                    f"{self.backend.name!r}, got {start!r}"
                )
            rows.append(self.backend.compact_rows(inner))  # a start's pads (from a padded batch) are not its own
        inner = self.backend.copy_state(rows[0]) if len(rows) == 1 else self.backend.concat_rows(rows)
        return State(self.backend, inner)

    def feed(self, keys: Sequence[Hashable], tokens: Sequence[Sequence[int]]) -> np.ndarray:
        """Advances the streams ``keys`` by their ``tokens`` (one list each, non-empty) in one call over the
        pool; returns the logits after each stream's last token, (k, V). Nothing changes when it raises."""
        if len(keys) != len(tokens) or not keys:
            raise InputError(f"feed: expected one token list per key, got {len(keys)} keys and {len(tokens)} lists")
        missing = [k for k in keys if k not in self._rows]
        if missing:
            raise InputError(f"feed: streams {missing} hold no row (not admitted, or released)")
        rows = [self._rows[k] for k in keys]
        if len(set(rows)) != len(rows):
            raise InputError("feed: a stream is given twice")
        lengths = [len(t) for t in tokens]
        if min(lengths) < 1:
            raise InputError("feed: every stream needs at least one token")
        width = max(lengths)
        ids = np.zeros((len(self._keys), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, toks in zip(rows, tokens):
            ids[row, : len(toks)] = np.asarray(toks, dtype=np.int64)
            mask[row, : len(toks)] = 1
        vocab = int(self.backend.vocab_size)
        bad = ids[(mask == 1) & ((ids < 0) | (ids >= vocab))]
        if bad.size:
            raise InputError(f"tokens: token {int(bad[0])} out of vocabulary; expected 0 <= token < {vocab}")
        outputs, state = self.backend.run({INPUT_IDS: ids, ATTENTION_MASK: mask}, self._state, donate=True)
        self._state = state
        for key, length in zip(keys, lengths):
            self._past[key] += length
        self._compact_if_sparse()
        return outputs[LOGITS][rows, np.asarray(lengths) - 1]

    def release(self, keys: Sequence[Hashable]) -> None:
        """Drops the rows of ``keys`` (unknown keys are ignored); the others keep their state."""
        drop = {k for k in keys if k in self._rows}
        if not drop:
            return
        keep = [i for i, k in enumerate(self._keys) if k not in drop]
        self._state = None if not keep else self.backend.select_rows(self._state, keep)
        self._keys = [self._keys[i] for i in keep]
        self._rows = {k: i for i, k in enumerate(self._keys)}
        self._past = {k: self._past[k] for k in self._keys}
        self._compact_if_sparse()

    def take(self, keys: Sequence[Hashable], tokens: Optional[Sequence[Sequence[int]]] = None) -> list[State]:
        """Drops the rows of ``keys`` (each must hold one) and returns each as a :class:`State` of one row, in
        the order given. ``tokens``: per key, tokens to feed first (possibly none), in one call over these
        rows only; a state's ``last_logits`` are the logits after its last token fed here, None when it
        was fed none (the caller knows them); its ``past_length`` is its stream's own positions (pads
        excluded). Nothing changes when it raises."""
        missing = [k for k in keys if k not in self._rows]
        if missing or len(set(keys)) != len(keys) or not keys:
            raise InputError(f"take: streams {missing or list(keys)} hold no row (or are repeated, or none given)")
        tokens = [[] for _ in keys] if tokens is None else [list(t) for t in tokens]
        if len(tokens) != len(keys):
            raise InputError(f"take: expected one token list per key, got {len(keys)} keys and {len(tokens)} lists")
        rows = self.backend.select_rows(self._state, [self._rows[k] for k in keys])
        logits: list[Optional[np.ndarray]] = [None] * len(keys)
        fed = [i for i, t in enumerate(tokens) if t]
        if fed:
            width = max(len(t) for t in tokens)
            ids = np.zeros((len(keys), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for i in fed:
                ids[i, : len(tokens[i])], mask[i, : len(tokens[i])] = tokens[i], 1
            outputs, rows = self.backend.run({INPUT_IDS: ids, ATTENTION_MASK: mask}, rows, donate=True)
            for i in fed:
                logits[i] = outputs[LOGITS][i, len(tokens[i]) - 1][None].copy()
        states = []
        for i, key in enumerate(keys):
            inner = rows if len(keys) == 1 else self.backend.select_rows(rows, [i])
            if self.backend.grows:  # the row's own cache: its valid positions only, past_length their count
                inner = self.backend.compact_rows(inner)
            else:
                inner.past_length = self._past[key] + len(tokens[i])
            states.append(State(self.backend, inner, logits[i]))
        self.release(keys)
        return states

    def clear(self) -> None:
        """Drops every row."""
        self._keys, self._rows, self._past, self._state = [], {}, {}, None
