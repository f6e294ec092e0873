"""Next-token choice from logits: greedy, temperature, top-k and top-p (nucleus) filtering.

All functions take host logits ``(B, V)`` float arrays. Order of operations in :func:`sample`:
divide by the temperature, keep the top-k, keep the top-p nucleus, renormalise, draw. Filtered
entries become ``-inf``. Ties at the k-th value are all kept (the filter is a threshold). The draw uses
numpy's PCG64 seeded through SeedSequence by ``(seed, row)``. This module is the reference that the C
(runtime/native/src/sampling.cpp) and JavaScript (runtime/js/rnnx.mjs) runtimes follow bit for bit;
docs/sampling.md is the spec and tests/data/sampling_cases.json the cases all three run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np


def top_k_value(top_k: Any) -> Optional[int]:
    """The top-k filter's one meaning: None (off) for ``None`` or any integer <= 0, else k >= 1 (k >= V keeps
    every token). ValueError unless ``top_k`` is None or an integer (bools refused)."""
    if top_k is None:
        return None
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)):
        raise ValueError(f"top_k must be an integer (<= 0: off) or None, got {top_k!r}")
    return int(top_k) if top_k >= 1 else None


def top_p_value(top_p: Any) -> Optional[float]:
    """The top-p filter's one meaning: None (off) for ``None``, 0 or 1, else p in (0, 1). ValueError for any other
    value (negative, above 1, NaN, not a number)."""
    if top_p is None:
        return None
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float, np.integer, np.floating)):
        raise ValueError(f"top_p must be a number in [0, 1] (0 or 1: off) or None, got {top_p!r}")
    if not (0.0 <= top_p <= 1.0):
        raise ValueError(f"top_p must be in [0, 1] (0 or 1: off) or None, got {top_p!r}")
    return None if top_p in (0.0, 1.0) else float(top_p)


def check_options(temperature: float, top_k: Any, top_p: Any) -> None:
    """Raises ValueError naming the bad option: temperature finite and >= 0, top_k an integer or None, top_p in
    [0, 1] or None (:func:`top_k_value`, :func:`top_p_value`: which values mean "off")."""
    if not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    top_k_value(top_k)
    top_p_value(top_p)


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
    row's draws do not depend on the other rows). ``temperature == 0``: greedy (argmax, first of ties).
    The filters' "off" values: :func:`top_k_value`, :func:`top_p_value` (docs/sampling.md is the spec)."""
    check_options(temperature, top_k, top_p)
    k, p = top_k_value(top_k), top_p_value(top_p)
    logits = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        return np.argmax(logits, axis=-1).astype(np.int64)
    scaled = logits / temperature
    if k is not None:
        scaled = top_k_filter(scaled, k)
    if p is not None:
        scaled = top_p_filter(scaled, p)
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
    and ``seed`` (None: fresh entropy); checked on construction (ValueError naming the option). A filter given
    in any of its "off" forms (top_k None / <= 0, top_p None / 0 / 1) is stored as None.
    The value :meth:`rnnx.runtime.Session.generate`, :meth:`rnnx.runtime.Scheduler.submit` and the Triton
    Python model each build from their arguments."""

    temperature: float = 1.0
    top_k: Optional[int] = None
    top_p: Optional[float] = None
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        check_options(self.temperature, self.top_k, self.top_p)
        object.__setattr__(self, "top_k", top_k_value(self.top_k))
        object.__setattr__(self, "top_p", top_p_value(self.top_p))

    @classmethod
    def from_request(
        cls, temperature: Any = None, top_k: Any = None, top_p: Any = None, seed: Any = None
    ) -> SamplingOptions:
        """The options of a wire request (Triton's optional scalars): a missing temperature is greedy; the
        filters' "off" forms are the same as everywhere else (a missing one, top_k <= 0, top_p 0 or 1)."""
        return cls(
            0.0 if temperature is None else float(temperature),
            None if top_k is None else int(top_k),
            None if top_p is None else float(top_p),
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
