"""The reference side of a parity run: the calls a reference backend makes, each from its own state, for a
language model (:func:`reference_calls`: a prefill, then greedy decode steps) or any stateful export
(:func:`stream_calls`: one call on a sequence, then short windows of it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from ..backends.base import Backend
from ..contract.artifact import ATTENTION_MASK, INPUT_IDS, LENGTH, TensorSpec
from ..contract.prompts import random_prompts  # noqa: F401  (the parity check's default prompts, named here too)
from ..session import Session
from .report import Call

#: Decode steps after the prefill in an export's check.
DEFAULT_DECODE_STEPS = 64


def reference_calls(
    reference: Backend, prompts: Sequence[Sequence[int]], steps: int, keep_state: Callable[[int], bool] = lambda i: True
) -> Iterator[Call]:
    """A language model's calls: a prefill of ``prompts`` (right-padded) and ``steps`` greedy decode
    steps. ``keep_state(i)`` says whether call i's state is copied to the host (every call by default)."""
    ids, mask = Session(reference).pad([list(p) for p in prompts])
    state = reference.init_state(ids.shape[0])
    for step in range(steps + 1):
        inputs = {INPUT_IDS: ids, ATTENTION_MASK: mask}
        outputs, state = reference.run(inputs, state)
        call = Call(inputs, outputs, reference.state_to_host(state) if keep_state(step) else None)
        yield call
        ids, mask = call.next_tokens()[:, None], np.ones((len(ids), 1), np.int64)


def _window(array: np.ndarray, axis: int, start: int, size: int) -> np.ndarray:
    return np.ascontiguousarray(np.take(array, np.arange(start, start + size), axis=axis))


def chained_inputs(
    first: dict[str, np.ndarray], specs: Sequence[TensorSpec], steps: int, seed: int = 0
) -> Iterator[dict[str, np.ndarray]]:
    """``first``, then ``steps`` short inputs cut from it: every input with a ``length`` axis gets the
    same window of 1, 2 or 3 positions (cycling; at most the sequence's length) at a random offset;
    inputs without one are repeated. So the values stay the kind the model was given (token ids,
    masks, features)."""
    yield first
    axes = {spec.name: spec.shape.index(LENGTH) for spec in specs if LENGTH in spec.shape}
    lengths = {first[name].shape[axis] for name, axis in axes.items()}
    if len(lengths) > 1:
        raise ValueError(f"inputs disagree on the {LENGTH!r} axis: sizes {sorted(lengths)}")
    total = lengths.pop() if lengths else 0
    rng = np.random.default_rng(seed)
    for step in range(steps):
        size = min(1 + step % 3, total)
        start = int(rng.integers(0, total - size + 1)) if total else 0
        yield {
            name: _window(value, axes[name], start, size) if name in axes else value for name, value in first.items()
        }


def stream_calls(
    reference: Backend,
    first: dict[str, np.ndarray],
    steps: int,
    keep_state: Callable[[int], bool] = lambda i: True,
    seed: int = 0,
) -> Iterator[Call]:
    """Any stateful export's calls: ``first`` (data inputs, one call on a sequence), then ``steps``
    short calls from :func:`chained_inputs`, each continuing the reference's state."""
    state = reference.init_state(reference.batch_of(first))
    for step, inputs in enumerate(chained_inputs(first, reference.inputs, steps, seed)):
        outputs, state = reference.run(inputs, state)
        yield Call(inputs, outputs, reference.state_to_host(state) if keep_state(step) else None)
