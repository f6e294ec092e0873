"""Next-token choice from logits: greedy, temperature, top-k and top-p (nucleus) filtering.

All functions take host logits ``(B, V)`` float arrays. Order of operations in :func:`sample`:
divide by the temperature, keep the top-k, keep the top-p nucleus, renormalise, draw. Filtered
entries become ``-inf``. Ties at the k-th value are all kept (the filter is a threshold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np


def check_options(temperature: float, top_k: Optional[int], top_p: Optional[float]) -> None:
    """Raises ValueError naming the bad option: temperature >= 0, top_k >= 1, 0 < top_p <= 1."""
    if not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1 or None, got {top_k!r}")
    if top_p is not None and not (0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p!r}")


def top_k_filter(logits: np.ndarray, k: int) -> np.ndarray:
    """(B, V) -> (B, V): entries below each row's k-th largest value set to -inf (k >= V: unchanged)."""
    logits = np.asarray(logits, dtype=np.float64)
    if k >= logits.shape[-1]:
        return logits.copy()
    kth = np.partition(logits, -k, axis=-1)[..., -k, None]
    return np.where(logits < kth, -np.inf, logits)


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64; -inf entries get probability 0."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def top_p_filter(logits: np.ndarray, p: float) -> np.ndarray:
    """(B, V) -> (B, V): keeps, per row, the smallest set of most likely tokens whose probability
    sums to >= p (the most likely token is always kept); the rest set to -inf."""
    logits = np.asarray(logits, dtype=np.float64)
    if p >= 1.0:
        return logits.copy()
    order = np.argsort(-logits, axis=-1, kind="stable")
    probs = np.take_along_axis(softmax(logits), order, axis=-1)
    before = np.cumsum(probs, axis=-1) - probs  # mass of the strictly more likely tokens
    keep_sorted = before < p
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, axis=-1)
    return np.where(keep, logits, -np.inf)


def sample(
    logits: np.ndarray,
    rngs: Sequence[np.random.Generator],
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    top_p: Optional[float] = None,
) -> np.ndarray:
    """(B, V) logits -> (B,) int64 tokens; row b draws from ``rngs[b]`` (one generator per row, so a
    row's draws do not depend on the other rows). ``temperature == 0``: greedy (argmax, first of ties)."""
    check_options(temperature, top_k, top_p)
    logits = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        return np.argmax(logits, axis=-1).astype(np.int64)
    scaled = logits / temperature
    if top_k is not None:
        scaled = top_k_filter(scaled, int(top_k))
    if top_p is not None:
        scaled = top_p_filter(scaled, float(top_p))
    probs = softmax(scaled)
    out = np.empty(len(probs), dtype=np.int64)
    for b, (row, rng) in enumerate(zip(probs, rngs)):
        cdf = np.cumsum(row)
        out[b] = min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), len(row) - 1)
        while row[out[b]] == 0.0:  # searchsorted can land on a zero-probability tail entry by rounding
            out[b] -= 1
    return out


def row_generators(seed: Optional[int], batch: int) -> list[np.random.Generator]:
    """One generator per row: row b is seeded by ``(seed, b)`` (fresh entropy when seed is None)."""
    if seed is None:
        root = np.random.SeedSequence()
        return [np.random.default_rng(s) for s in root.spawn(batch)]
    return [np.random.default_rng([int(seed), b]) for b in range(batch)]


@dataclass(frozen=True)
class SamplingOptions:
    """How one generation chooses its next tokens: ``temperature`` (0: greedy), ``top_k`` / ``top_p`` filters
    (None: off) and ``seed`` (None: fresh entropy); checked on construction (ValueError naming the option).
    The value :meth:`rnnx.runtime.Session.generate`, :meth:`rnnx.runtime.Scheduler.submit` and the Triton
    Python model each build from their arguments."""

    temperature: float = 1.0
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        check_options(self.temperature, self.top_k, self.top_p)

    @classmethod
    def from_request(
        cls, temperature: Any = None, top_k: Any = None, top_p: Any = None, seed: Any = None
    ) -> SamplingOptions:
        """The options of a wire request (Triton's optional scalars): a missing temperature is greedy, and
        ``top_k <= 0`` / ``top_p >= 1`` mean the filter is off, as in most serving APIs."""
        return cls(
            0.0 if temperature is None else float(temperature),
            None if top_k is None or top_k <= 0 else int(top_k),
            None if top_p is None or top_p >= 1.0 else float(top_p),
            None if seed is None else int(seed),
        )

    def generators(self, batch: int) -> list[np.random.Generator]:
        """One generator per row (:func:`row_generators` of ``seed``)."""
        return row_generators(self.seed, batch)

    def sample(self, logits: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """(B, V) logits -> (B,) int64 tokens (:func:`sample` with these options)."""
        return sample(logits, rngs, self.temperature, self.top_k, self.top_p)


def check_max_new_tokens(value: Any) -> int:
    """``value`` as an int; ValueError unless it is an integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"max_new_tokens: expected an integer >= 0, got {value!r}")
    return int(value)
