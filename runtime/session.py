"""Sessions: one export on one backend, with validated inputs and state handles.

:class:`StatefulSession` runs any export, ``run(inputs) -> outputs`` with the state carried between calls
(a streaming encoder fed chunk by chunk); :class:`Session` adds a language model's prefill / step /
generate on the same mechanism. Language-model shapes: B rows, L positions, V vocabulary. Tokens are
int64 in ``[0, V)``.

* :meth:`Session.prefill` ``(tokens (B, L) or list of B lists, lengths (B,)) -> State``: prompts are
  right-padded; pads get ``attention_mask = 0`` and never change a row's state; ``state.last_logits``
  holds each row's logits after its last real token.
* :meth:`Session.step` ``(tokens (B,) or (B, 1)) -> logits (B, V)``: one token per row, advancing the
  session's current state (or the ``state`` passed) in place.
* :meth:`Session.generate` streams new tokens step by step (see there).

Donation: ``step(..., donate=True)`` (and ``prefill`` / ``run`` likewise) promises that nothing will read
the state's *previous* backend buffers again, so the backend may reuse them: the TensorRT backend
recycles them and, for a decode loop, double-buffers the state across two CUDA graphs. The
:class:`State` handle itself stays valid (it is advanced in place to the new buffers); what the
promise covers is an old ``state.inner`` kept elsewhere. :meth:`State.fork` copies, so a fork taken
before a donated step is unaffected. :meth:`Session.generate` owns its state and always donates it.
Backends that cannot reuse buffers (torch, onnxruntime) ignore ``donate``.

A bad input (dtype, shape, vocabulary, batch, state of another model) raises
:class:`~rnnx.runtime.backends.base.InputError` before anything changes, so the session stays usable.
One session is meant for one thread at a time: concurrent use raises instead of corrupting state.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .backends.base import Backend, InputError, RnnxRuntimeError
from .contract.artifact import ATTENTION_MASK, CAUSAL_LM, INPUT_IDS, LOGITS, TensorSpec, interface_of, numpy_dtype
from .sampling import SamplingOptions, check_max_new_tokens
from .state import State, check_host_state, load_state_file
from .text import Message, Text

TokenInput = Union[np.ndarray, Sequence[Sequence[int]], Any]

#: :meth:`Session.prefill` feeds a longer prompt in pieces of this many positions, the state carried between them
#: (exact: a pad changes no state, and a KV cache gives a later piece's attention every earlier position), so a
#: call's logits are (B, piece, V) and an attention layer's scores (piece x context), not (L x L): an 8,192-token
#: prompt on a 248k vocabulary would otherwise return 8 GB of logits.
PREFILL_PIECE_TOKENS = 1024


def prefill_pieces(length: int, max_call_length: Optional[int] = None) -> int:
    """The piece size :meth:`Session.prefill` feeds a prompt of ``length`` positions in: the prompt cut into
    equal pieces (the last at most one position per piece shorter), none over ``max_call_length`` (the backend's
    per-call limit; None: none) and, below that limit, each at least :data:`PREFILL_PIECE_TOKENS` long and under
    twice that (a piece stays long enough for ONNX Runtime's thread pool, which starts at that size).
    ``length`` itself when one call takes it."""
    pieces = max(1, length // PREFILL_PIECE_TOKENS)
    if max_call_length is not None:
        pieces = max(pieces, -(-length // max_call_length))
    return max(1, -(-length // pieces))


_IN_USE = "session is in use by another thread; use one session per thread"
_INT64 = np.dtype(np.int64)


def _as_int_array(tokens: Any, name: str) -> np.ndarray:
    """Numpy / torch / nested lists -> int64 array; floats and bools are rejected by name."""
    if type(tokens) is np.ndarray and tokens.dtype == _INT64:
        return tokens
    if type(tokens) is not list and hasattr(tokens, "detach"):
        tokens = tokens.detach().cpu().numpy()
    arr = np.asarray(tokens)
    if arr.dtype == _INT64:
        return arr
    kind = arr.dtype.kind
    if kind == "i" or kind == "u":
        return arr.astype(np.int64)
    if arr.dtype == object:
        raise InputError(f"{name}: ragged or non-numeric input; expected integers")
    if arr.size and not np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        raise InputError(f"{name}: expected an integer dtype (int64), got {arr.dtype}")
    return arr.astype(np.int64, copy=False)


class StatefulSession:
    """Any export on one backend plus the current :class:`State`: ``inputs + state -> outputs + state``.

    Build with :func:`rnnx.runtime.load` (which gives a :class:`Session` for a language model) or
    ``StatefulSession(backend)``; several sessions may share one backend (each owns its own states).
    :meth:`run` takes the data inputs the export names (:attr:`inputs`) and advances the current state,
    so feeding a long input chunk by chunk gives what one call on all of it gives.
    """

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.state: Optional[State] = None
        self._guard = threading.Lock()
        self._checked_shapes: set[tuple[tuple[int, ...], ...]] = set()

    @property
    def metadata(self) -> dict[str, Any]:
        return self.backend.metadata

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.backend.describe()})"

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        self._acquire()
        try:
            yield
        finally:
            self._guard.release()

    def _acquire(self) -> None:
        """Takes the session's guard (released by the caller), or raises when another thread holds it."""
        if not self._guard.acquire(blocking=False):
            raise RnnxRuntimeError(_IN_USE)

    @property
    def inputs(self) -> list[TensorSpec]:
        """The data inputs of the graph (name, shape with axis names, dtype), graph order."""
        return self.backend.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        """The data outputs of the graph, graph order."""
        return self.backend.outputs

    def _check_state(self, state: State, batch: Optional[int] = None) -> None:
        inner = state.inner
        if inner.signature != self.backend.signature:
            raise InputError(
                f"state: belongs to a different model (signature {inner.signature[:12]}..., "
                f"expected {self.backend.signature[:12]}...)"
            )
        if inner.backend != self.backend.name:
            raise InputError(
                f"state: made by backend {inner.backend!r}, this session runs {self.backend.name!r}; "
                "use session.import_state(state.to_host())"
            )
        if batch is not None and inner.batch != batch:
            raise InputError(f"state: batch mismatch: the inputs have {batch} rows, the state has {inner.batch}")

    def new_state(self, batch: int) -> State:
        """A fresh state of ``batch`` rows (not made current)."""
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
            raise InputError(f"batch: expected an integer >= 1, got {batch!r}")
        return State(self.backend, self.backend.init_state(int(batch)))

    def load_state(self, path: Union[str, Path]) -> State:
        """Reads a state saved with :meth:`State.save` (same model, any backend) and makes it current."""
        state = load_state_file(self.backend, path)
        self.state = state
        return state

    def import_state(self, arrays: dict[str, np.ndarray], last_logits: Optional[np.ndarray] = None) -> State:
        """A state from host arrays (flat name -> array, e.g. another backend's ``State.to_host()``),
        validated against this model's state layout; made current."""
        batch, past = check_host_state(self.backend, arrays, "import_state")
        inner = self.backend.state_from_host(arrays)
        inner.past_length = past
        state = State(self.backend, inner, None if last_logits is None else np.asarray(last_logits, np.float32))
        self.state = state
        return state

    def reset(self) -> None:
        """Forgets the current state: the next :meth:`run` starts from a fresh one."""
        self.state = None

    def _feeds(
        self, inputs: Union[dict[str, Any], Sequence[Any], None], named: dict[str, Any]
    ) -> dict[str, np.ndarray]:
        """The data inputs as host arrays of the specs' dtypes, validated (names, kinds, ranks, sizes). The
        shapes of a call are checked once: a later call with the same shapes only converts (the specs are the
        backend's, fixed)."""
        specs = self.inputs
        if isinstance(inputs, dict):
            given = {**inputs, **named}
        elif inputs is None:
            given = dict(named)
        else:
            values = [inputs] if hasattr(inputs, "shape") else list(inputs)
            if len(values) > len(specs):
                raise InputError(
                    f"inputs: {len(values)} given, the model takes {len(specs)} ({[t.name for t in specs]})"
                )
            given = {**dict(zip((t.name for t in specs), values)), **named}
        missing = [t.name for t in specs if t.name not in given]
        if missing or len(given) != len(specs):
            unknown = sorted(set(given) - {t.name for t in specs})
            raise InputError(f"inputs: missing {missing}, unknown {unknown}; the model takes {[t.name for t in specs]}")
        try:
            feeds = {spec.name: _as_array(given[spec.name], spec) for spec in specs}
        except InputError:  # the checks below name it, in graph order with the shapes
            feeds = None
        if feeds is not None:
            shapes = tuple(arr.shape for arr in feeds.values())
            if shapes in self._checked_shapes:
                return feeds
        feeds = self._checked_feeds(specs, given)
        if len(self._checked_shapes) >= 64:
            self._checked_shapes.clear()
        self._checked_shapes.add(tuple(arr.shape for arr in feeds.values()))
        return feeds

    def _checked_feeds(self, specs: list[TensorSpec], given: dict[str, Any]) -> dict[str, np.ndarray]:
        """:meth:`_feeds`' conversion and shape checks, input by input in graph order (the first bad one
        raises)."""
        feeds, sizes = {}, {}
        for spec in specs:
            feeds[spec.name] = arr = _as_array(given[spec.name], spec)
            if arr.ndim != len(spec.shape):
                raise InputError(
                    f"{spec.name}: expected {len(spec.shape)} dims {list(spec.shape)}, got shape {arr.shape}"
                )
            for axis, (want, got) in enumerate(zip(spec.shape, arr.shape)):
                if isinstance(want, int) and want != got:
                    raise InputError(f"{spec.name}: axis {axis} must be {want}, got shape {arr.shape}")
                if isinstance(want, str) and sizes.setdefault(want, (got, spec.name))[0] != got:
                    raise InputError(
                        f"{spec.name}: axis {axis} ({want!r}) has size {got}, "
                        f"but {sizes[want][1]!r} has {sizes[want][0]}"
                    )
                if isinstance(want, str) and got < 1:
                    raise InputError(f"{spec.name}: axis {axis} ({want!r}) is empty")
        return feeds

    def run(
        self,
        inputs: Union[dict[str, Any], Sequence[Any], None] = None,
        *,
        state: Optional[State] = None,
        donate: bool = False,
        **named: Any,
    ) -> dict[str, np.ndarray]:
        """One call: the data inputs (a dict by name, a sequence in graph order, or keywords; numpy, torch
        or lists; floating values are cast to the graph's dtype) from ``state`` (default: the current
        state, a fresh one when there is none) -> the data outputs by name (floating ones fp32). The
        state advances in place and becomes current. Bad inputs raise :class:`InputError` naming the
        input, with nothing changed. ``donate=True``: the state's previous buffers may be reused (see
        the module doc); a fresh state made here is always donated, since nothing else holds it."""
        feeds = self._feeds(inputs, named)
        batch = self.backend.batch_of(feeds)
        state = state if state is not None else self.state
        self._acquire()
        try:
            if state is None:
                state, donate = State(self.backend, self.backend.init_state(batch)), True
            else:
                self._check_state(state, batch if self.backend.state_specs else None)
            outputs, state.inner = self.backend.run(feeds, state.inner, donate=bool(donate))
            self.state = state
        finally:
            self._guard.release()
        return outputs


_KINDS = {"f": "floating", "i": "integer", "u": "integer", "b": "bool"}


@functools.cache
def _numpy_dtype(name: str) -> np.dtype:
    """:func:`numpy_dtype`, once per dtype name."""
    return numpy_dtype(name)


def _as_array(value: Any, spec: TensorSpec) -> np.ndarray:
    """One data input as a C-contiguous host array of ``spec``'s dtype; InputError for another kind. An array
    that already is one is returned as it is."""
    want = _numpy_dtype(spec.dtype)
    if type(value) is np.ndarray and value.dtype == want and value.ndim and value.flags.c_contiguous:
        return value
    if type(value) is not list and hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == object or _KINDS.get(arr.dtype.kind) != _KINDS.get(want.kind):
        raise InputError(f"{spec.name}: expected {spec.dtype} values, got {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=want)


class Session(StatefulSession):
    """A language model on one backend plus the current :class:`State`: prefill, step, generate. Build
    with :func:`rnnx.runtime.load` or ``Session(backend)``; several sessions may share one backend."""

    def __init__(self, backend: Backend) -> None:
        if backend.vocab_size is None:
            raise InputError(
                f"{backend.metadata.get('model_type')}: not a language model export (interface "
                f"{backend.metadata.get('interface')!r}); use StatefulSession / rnnx.runtime.load"
            )
        super().__init__(backend)
        self._masks: dict[int, np.ndarray] = {}

    @property
    def vocab_size(self) -> int:
        return int(self.backend.vocab_size)

    def _step_mask(self, batch: int) -> np.ndarray:
        """A (batch, 1) int64 attention mask of ones, made once per batch size (the last 16 kept) and passed to
        every step of that size: backends only read their inputs."""
        mask = self._masks.get(batch)
        if mask is None:
            if len(self._masks) >= 16:
                self._masks.clear()
            mask = self._masks[batch] = np.ones((batch, 1), np.int64)
        return mask

    def _check_vocab(self, tokens: np.ndarray, mask: np.ndarray, name: str) -> None:
        """InputError for a real token (``mask`` != 0) outside ``[0, V)``. When every token is in range (the
        common case: one min / max, of Python ints for a small array) the mask is never looked at."""
        vocab = self.backend.vocab_size
        if tokens.size <= 64:
            flat = tokens.ravel().tolist()
            if not flat or (0 <= min(flat) and max(flat) < vocab):
                return
        elif 0 <= tokens.min() and tokens.max() < vocab:
            return
        real = tokens[mask.astype(bool)]
        bad = real[(real < 0) | (real >= self.vocab_size)]
        if bad.size:
            raise InputError(f"{name}: token {int(bad[0])} out of vocabulary; expected 0 <= token < {self.vocab_size}")

    def pad(self, tokens: TokenInput, lengths: Optional[Sequence[int]] = None) -> tuple[np.ndarray, np.ndarray]:
        """Prompts -> right-padded ``(input_ids (B, L), attention_mask (B, L))`` int64 (pads hold 0).

        ``tokens``: a list of B token lists (lengths from the lists), or a (B, L) array with optional
        ``lengths`` (B,) (default: all L)."""
        if (
            isinstance(tokens, (list, tuple))
            and tokens
            and all(isinstance(t, (list, tuple, np.ndarray)) for t in tokens)
        ):
            rows = [_as_int_array(list(t), f"tokens[{i}]").reshape(-1) for i, t in enumerate(tokens)]
            if lengths is not None:
                raise InputError("lengths: give either ragged token lists or a (B, L) array with lengths, not both")
            lens = np.array([len(r) for r in rows], dtype=np.int64)
            width = int(lens.max()) if len(lens) else 0
            ids = np.zeros((len(rows), max(width, 1)), dtype=np.int64)
            for i, r in enumerate(rows):
                ids[i, : len(r)] = r
        else:
            ids = _as_int_array(tokens, "tokens")
            if ids.ndim != 2:
                raise InputError(f"tokens: expected shape (B, L), got {tuple(ids.shape)}")
            ids = ids.copy()
            lens = (
                np.full(ids.shape[0], ids.shape[1], np.int64) if lengths is None else _as_int_array(lengths, "lengths")
            )
            if lens.shape != (ids.shape[0],):
                raise InputError(f"lengths: expected shape ({ids.shape[0]},), got {tuple(lens.shape)}")
            if (lens > ids.shape[1]).any():
                raise InputError(f"lengths: every length must be <= L = {ids.shape[1]}, got {lens.tolist()}")
        if ids.shape[0] < 1:
            raise InputError("tokens: expected at least one row")
        if (lens < 1).any():
            raise InputError(f"lengths: every prompt needs at least one token, got lengths {lens.tolist()}")
        mask = (np.arange(ids.shape[1])[None, :] < lens[:, None]).astype(np.int64)
        ids[mask == 0] = 0
        return np.ascontiguousarray(ids), mask

    def prefill(
        self,
        tokens: TokenInput,
        lengths: Optional[Sequence[int]] = None,
        state: Optional[State] = None,
        donate: bool = False,
    ) -> State:
        """Feeds prompts (right-padded, see :meth:`pad`) from a fresh state, or continuing ``state`` (which is then
        advanced in place). Returns the state, made current; its ``last_logits`` (B, V) are each row's
        logits after its last real token. A prompt longer than :data:`PREFILL_PIECE_TOKENS` (or than the
        backend's ``max_call_length``) runs in equal pieces (:func:`prefill_pieces`: the same state and logits,
        bounded memory). ``donate=True``: ``state``'s previous
        buffers may be reused (see the module doc); a fresh state is always donated, since nothing else
        holds it."""
        ids, mask = self.pad(tokens, lengths)
        self._check_vocab(ids, mask, "tokens")
        with self._exclusive():
            if state is None:
                state, donate = State(self.backend, self.backend.init_state(ids.shape[0])), True
            else:
                self._check_state(state, ids.shape[0])
            rows, last = np.arange(ids.shape[0]), mask.sum(1) - 1
            inner, last_logits = state.inner, None
            size = prefill_pieces(ids.shape[1], self.backend.max_call_length)
            for start in range(0, ids.shape[1], size):
                piece = slice(start, start + size)
                feed = {INPUT_IDS: ids[:, piece], ATTENTION_MASK: mask[:, piece]}
                if size < ids.shape[1]:
                    feed = {name: np.ascontiguousarray(value) for name, value in feed.items()}
                # the pieces after the first advance this call's own buffers: those may always be reused
                outputs, inner = self.backend.run(feed, inner, donate=bool(donate) or start > 0)
                logits = outputs[LOGITS]
                if logits.shape[:2] != feed[INPUT_IDS].shape:
                    raise RnnxRuntimeError(f"{LOGITS}: the backend returned shape {logits.shape} for input_ids of "
                                           f"shape {feed[INPUT_IDS].shape}; expected (B, L, V)")  # fmt: skip
                ends = (last >= start) & (last < start + logits.shape[1])  # the rows whose last token is here
                if last_logits is None:
                    last_logits = np.empty((ids.shape[0], logits.shape[-1]), logits.dtype)
                last_logits[ends] = logits[rows[ends], last[ends] - start]
                del outputs, logits  # one piece's logits alive at a time
            # the state moves once every piece ran (a donated state's old buffers are the caller's promise, as ever)
            state.inner, state.last_logits = inner, last_logits
            self.state = state
        return state

    def _plain_step_ids(self, tokens: Any, batch: int) -> Optional[np.ndarray]:
        """The (B, 1) int64 ids of the common step, ``tokens`` a list of ``batch`` Python ints inside the
        vocabulary (checked here, in Python, before one numpy call); None for any other input, which the general
        path then converts and checks, naming what is wrong."""
        if type(tokens) is not list or len(tokens) != batch:
            return None
        vocab = self.backend.vocab_size
        for token in tokens:
            if type(token) is not int or token < 0 or token >= vocab:
                return None
        return np.array(tokens, np.int64).reshape(batch, 1)

    def _step_tokens(self, tokens: Any, batch: int) -> np.ndarray:
        ids = _as_int_array(tokens, "tokens")
        if ids.ndim == 1:
            ids = ids[:, None]
        if ids.ndim != 2 or ids.shape[1] != 1:
            raise InputError(f"tokens: expected shape (B,) or (B, 1), got {tuple(np.shape(tokens))}")
        if ids.shape[0] != batch:
            raise InputError(f"tokens: batch mismatch: state has {batch} rows, got {ids.shape[0]} tokens")
        return np.ascontiguousarray(ids)

    def step(
        self,
        tokens: Any,
        state: Optional[State] = None,
        active: Optional[Sequence[bool]] = None,
        donate: bool = False,
    ) -> np.ndarray:
        """One token per row -> logits (B, V) float32; advances ``state`` (default: the current
        state) in place. ``active`` (B,) bool: rows set False are fed as pads (state unchanged,
        their returned logits are meaningless and their ``last_logits`` kept).

        ``donate=True`` promises that nothing reads ``state``'s previous backend buffers (an old
        ``state.inner``) again, so the backend may reuse them: on TensorRT a decode loop then replays
        two CUDA graphs over two state buffer sets. The ``state`` handle stays valid either way, and a
        :meth:`State.fork` taken earlier is a copy that donation never touches; reusing a donated inner
        state raises :class:`InputError` on TensorRT. Torch and onnxruntime ignore it."""
        state = state if state is not None else self.state
        if state is None:
            raise InputError("state: no current state; call prefill() first or pass a state")
        backend, inner = self.backend, state.inner
        if inner.signature != backend.signature or inner.backend != backend.name:
            self._check_state(state)  # raises, naming the mismatch
        batch = inner.batch
        ids = self._plain_step_ids(tokens, batch) if active is None else None
        if ids is not None:
            mask = self._masks.get(batch)
            if mask is None:
                mask = self._step_mask(batch)
        else:
            ids = self._step_tokens(tokens, batch)
            if active is None:
                mask = self._step_mask(batch)
            else:
                mask = np.asarray(active, dtype=bool).reshape(-1, 1).astype(np.int64)
                if mask.shape != ids.shape:
                    raise InputError(f"active: expected shape ({batch},), got {tuple(np.shape(active))}")
            self._check_vocab(ids, mask, "tokens")
        if not self._guard.acquire(blocking=False):
            raise RnnxRuntimeError(_IN_USE)
        try:
            outputs, state.inner = backend.run({INPUT_IDS: ids, ATTENTION_MASK: mask}, inner, donate=bool(donate))
            out = outputs[LOGITS][:, 0]
            if active is None or state.last_logits is None:
                state.last_logits = out.copy()
            else:
                state.last_logits = np.where(mask.astype(bool), out, state.last_logits)
        finally:
            self._guard.release()
        return out

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: Optional[int] = None,
        top_p: Optional[float] = None,
        stop_tokens: Sequence[int] = (),
        seed: Optional[int] = None,
    ) -> Iterator[list[Optional[int]]]:
        """Streams generation: yields one list of B entries per step, ``tokens[b]`` the new token of
        row b or None when row b has already stopped. A row stops after emitting a token in
        ``stop_tokens`` (the stop token is yielded) or after ``max_new_tokens``; iteration ends when
        every row has stopped. ``temperature == 0`` is greedy; row b samples from its own generator
        seeded by ``(seed, b)``. Validation happens on the first ``next()``. The generation's state
        becomes the session's current state (``session.state``).

        The generation owns its state and donates it to every call (``step(..., donate=True)``), which
        on TensorRT is the CUDA-graph decode path. Between yields a caller may read, :meth:`State.fork`
        or save ``session.state``; a fork is an independent copy. Stepping that state yourself
        mid-generation advances the generation too, since it is the same handle."""
        options = SamplingOptions(temperature, top_k, top_p, seed)
        try:
            max_new_tokens = check_max_new_tokens(max_new_tokens)
        except ValueError as error:
            raise InputError(str(error)) from None
        if not isinstance(prompts, (list, tuple)) or not prompts:
            raise InputError("prompts: expected a non-empty list of token lists")
        stops = {int(t) for t in stop_tokens}
        return self._generate(prompts, max_new_tokens, options, stops)

    def _generate(
        self, prompts: Sequence[Sequence[int]], max_new_tokens: int, options: SamplingOptions, stops: set[int]
    ) -> Iterator[list[Optional[int]]]:
        if max_new_tokens == 0:
            return
        state = self.prefill([list(p) for p in prompts])
        rngs = options.generators(state.batch)
        active = np.ones(state.batch, dtype=bool)
        for i in range(max_new_tokens):
            tokens = options.sample(state.last_logits, rngs)
            yield [int(t) if a else None for t, a in zip(tokens, active)]
            active &= ~np.isin(tokens, list(stops))
            if not active.any() or i == max_new_tokens - 1:
                return
            self.step(np.where(active, tokens, 0), state=state, active=active, donate=True)

    def generate_all(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, **kwargs: Any) -> list[list[int]]:
        """:meth:`generate` collected: the new tokens of every row (stop token included)."""
        out: list[list[int]] = [[] for _ in prompts]
        for tokens in self.generate(prompts, max_new_tokens, **kwargs):
            for row, t in enumerate(tokens):
                if t is not None:
                    out[row].append(t)
        return out

    @functools.cached_property
    def text(self) -> Optional[Text]:
        """The export's tokenizer and chat template (:class:`~rnnx.runtime.text.Text`), or None when it carries none
        (an rnnx checkpoint's export, a module of a user's)."""
        return Text.of_backend(self.backend)

    def _text(self) -> Text:
        return Text.required(self.text, self.metadata)

    def encode(self, prompt: Union[str, Sequence[Message], Sequence[int]]) -> list[int]:
        """The token ids of a prompt: ``str`` text (the tokenizer's), a list of chat messages (``{"role": ...,
        "content": ...}``: the chat template's, with the generation prompt) or token ids as they are."""
        if isinstance(prompt, str):
            return self._text().encode(prompt)
        if len(prompt) and all(isinstance(m, dict) for m in prompt):
            return self._text().encode_chat(prompt)
        return [int(t) for t in prompt]

    def generate_text(
        self, prompts: Union[str, Sequence[Message], Sequence[Union[str, Sequence[Message]]]], max_new_tokens: int,
        stop_tokens: Optional[Sequence[int]] = None, **kwargs: Any,
    ) -> Union[str, list[str]]:  # fmt: skip
        """:meth:`generate` on text: each prompt text or chat messages (:meth:`encode`), each reply decoded. One
        prompt (a string or one conversation's messages) gives a string, a list of them a list. A reply ends at the
        checkpoint's end-of-sequence ids unless ``stop_tokens`` says otherwise."""
        one = isinstance(prompts, str) or (len(prompts) and all(isinstance(m, dict) for m in prompts))
        batch = [prompts] if one else list(prompts)
        text = self._text()
        stops = text.eos_token_ids if stop_tokens is None else tuple(stop_tokens)
        out = self.generate_all([self.encode(p) for p in batch], max_new_tokens, stop_tokens=stops, **kwargs)
        replies = [text.decode([t for t in ids if t not in text.eos_token_ids]) for ids in out]
        return replies[0] if one else replies


def load(
    model_dir_or_checkpoint: Union[str, Path],
    backend: str = "auto",
    device: str = "cpu",
    precision: Optional[str] = None,
    io_binding: Optional[bool] = None,
    native_ops: Optional[bool] = None,
    threads: Optional[int] = None,
) -> StatefulSession:
    """A session for a checkpoint directory (torch backend) or an export directory (``auto``: tensorrt
    on CUDA when installed, else onnxruntime): a :class:`Session` (prefill / step / generate) for a
    language model, a :class:`StatefulSession` (``run(inputs) -> outputs``, state carried) for any
    other export. ``device``: ``"cpu"`` or ``"cuda[:N]"``; ``precision``: torch fp32 / fp16 / bf16, an
    export's own precision otherwise.

    ``io_binding`` (onnxruntime only): True runs every call through ORT IO binding with the state kept
    as OrtValues on ``device`` (the CUDA code path, also on the CPU EP), False through
    ``InferenceSession.run`` with numpy state, None (default) picks True on CUDA and False on CPU.
    ``native_ops`` (onnxruntime only): rnnx's ONNX Runtime op library (native SRU scan; see
    :mod:`.ortops`): None (default) uses it on the CPU when built, True requires it, False runs the ops'
    function bodies. ``threads`` (onnxruntime only): intra-op threads; None (default) runs a small export on
    one thread on the CPU (its calls of 1,024 tokens or more on a second session on ONNX Runtime's default pool)
    and a large one on that pool, 0 asks for that pool, N for N threads (see
    :class:`.backends.ort_backend.OrtBackend`). Setting any of the three for another backend (including
    the one ``auto`` picks) raises :class:`InputError`."""
    from .backends import create_backend

    chosen = create_backend(
        model_dir_or_checkpoint, backend=backend, device=device, precision=precision, io_binding=io_binding,
        native_ops=native_ops, threads=threads,
    )  # fmt: skip
    return Session(chosen) if interface_of(chosen.metadata) == CAUSAL_LM else StatefulSession(chosen)
