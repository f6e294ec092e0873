"""Writes sampling_cases.json beside it: the sampling conformance cases, with the tokens the reference
(rnnx.runtime.sampling, docs/sampling.md) draws. Python, C (rnnx_sampling_cases) and JavaScript (rnnx.mjs) run
them in tests/test_sampling_conformance.py, which also checks that running this script gives the file unchanged.

``python tests/data/make_sampling_cases.py`` rewrites the file. A case: ``logits`` (B rows of V float32 values),
``temperature``, ``top_k`` / ``top_p`` (in the form given: null, 0, negative, 1, ...), ``seed``, ``draws`` (per
row, each from the row's own generator, seeded by (seed, row)), and the expected ``tokens`` (B lists of draws) or
``error`` (the option every runtime must name when it refuses the case).

Every sampled case is checked to be robust: its tokens are the same with the temperature moved by one part in
10^9 either way, so no draw or nucleus edge lies within rounding of a boundary (the runtimes' ``exp`` may differ
from numpy's in the last bit). The designed boundary cases (ties, top-p exactly at a cumulative probability)
use logits whose probabilities are exact (equal values, or values far enough below to give 0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import numpy as np

from rnnx.runtime.sampling import row_generators, sample

FILE = Path(__file__).resolve().parent / "sampling_cases.json"
#: Far enough below the other logits that exp gives exactly 0 in every runtime.
FAR = -1000.0


def _logits(rows: Any) -> list[list[float]]:
    """Rows of float32-exact values (the C API takes float logits)."""
    return [[float(x) for x in np.asarray(row, dtype=np.float32)] for row in rows]


def _normal(seed: int, batch: int, vocab: int, scale: float = 1.0) -> list[list[float]]:
    return _logits(np.random.default_rng(seed).standard_normal((batch, vocab)) * scale)


def _case(
    name: str,
    logits: list[list[float]],
    *,
    temperature: float = 1.0,
    top_k: Any = None,
    top_p: Any = None,
    seed: int = 0,
    draws: int = 12,
) -> dict[str, Any]:
    return {"name": name, "logits": logits, "temperature": temperature, "top_k": top_k, "top_p": top_p,
            "seed": seed, "draws": draws}  # fmt: skip


def _specs() -> list[dict[str, Any]]:
    quarter = [[2.0, 2.0, 2.0, 2.0, FAR, FAR]]  # probabilities exactly 1/4, 1/4, 1/4, 1/4, 0, 0
    off = _normal(40, 2, 9)  # every "off" form on the same logits and seed: the same tokens
    return [
        # plain draws: small, pairwise-summed (> 8) and recursively halved (> 128) vocabularies, batches, seeds
        _case("plain_v7", _normal(1, 1, 7), seed=0, draws=24),
        _case("plain_v12_batch_3", _normal(2, 3, 12), temperature=1.25, seed=5),
        _case("plain_v300", _normal(3, 1, 300, 2.0), seed=17),
        _case("plain_v1000_batch_2", _normal(4, 2, 1000, 3.0), temperature=0.75, seed=3),
        _case("seed_two_words", _normal(5, 2, 10), seed=2**32 + 7),
        _case("seed_2_to_53_minus_1", _normal(6, 1, 10), seed=2**53 - 1),
        _case("vocab_1", [[0.5]], draws=4),
        _case("uniform_v5", [[0.0] * 5], seed=9, draws=32),
        _case("zero_probability_tail", [[10.0, FAR, FAR, FAR]], seed=11),
        # temperature: 0 is greedy (first of ties, filters ignored), near 0 leaves the maxima, high flattens
        _case("greedy_first_of_ties", [[1.0, 3.0, 3.0, 0.0], [5.0, 5.0, 5.0, 5.0]], temperature=0.0, draws=3),
        _case("greedy_ignores_filters", _normal(7, 2, 20), temperature=0.0, top_k=3, top_p=0.5, draws=3),
        _case("temperature_near_0", _normal(8, 2, 16, 3.0), temperature=1e-6),
        _case("temperature_near_0_ties", [[0.0, 2.0, 2.0, 1.0, 2.0]], temperature=1e-6, seed=12, draws=32),
        _case("temperature_high", _normal(9, 1, 20), temperature=5.0),
        # top-k: a threshold (ties at the k-th kept), k >= V keeps everything
        _case("top_k_1", _normal(10, 2, 30), top_k=1, draws=4),
        _case("top_k_3", _normal(11, 1, 10), top_k=3, seed=13, draws=24),
        _case("top_k_ties_at_kth", [[1.0, 4.0, 2.0, 4.0, 4.0, 0.0]], top_k=2, seed=14, draws=32),
        _case("top_k_v_minus_1", _normal(12, 1, 6), top_k=5, seed=15),
        _case("top_k_equals_v", _normal(12, 1, 6), top_k=6, seed=15),
        _case("top_k_above_v", _normal(12, 1, 6), top_k=50, seed=15),
        # top-p: the smallest set whose mass reaches p, the most likely always kept, ties in index order
        _case("top_p_at_a_quarter", quarter, top_p=0.25, seed=16, draws=16),
        _case("top_p_just_past_a_quarter", quarter, top_p=0.25 + 2**-40, seed=16, draws=16),
        _case("top_p_at_a_half", quarter, top_p=0.5, seed=16, draws=16),
        _case("top_p_just_past_a_half", quarter, top_p=0.5 + 2**-40, seed=16, draws=16),
        _case("top_p_just_below_a_half", quarter, top_p=0.5 - 2**-40, seed=16, draws=16),
        _case("top_p_at_three_quarters", quarter, top_p=0.75, seed=16, draws=16),
        _case("top_p_thirds", [[1.0, 1.0, 1.0]], top_p=1 / 3, seed=17, draws=16),
        _case("top_p_tiny", _normal(13, 2, 40), top_p=1e-9, draws=4),
        _case("top_p_0_9_v50", _normal(14, 1, 50, 2.0), top_p=0.9, seed=18, draws=24),
        _case("top_p_batch_3", _normal(15, 3, 64, 1.5), temperature=0.9, top_p=0.6, seed=19),
        # both filters
        _case("top_k_and_top_p", _normal(16, 1, 100, 2.0), temperature=0.7, top_k=5, top_p=0.8, seed=20, draws=24),
        _case("top_k_and_top_p_batch_3", _normal(17, 3, 200, 2.0), temperature=1.3, top_k=6, top_p=0.95, seed=7),
        # every "off" form: the same tokens as no filter at all
        _case("off_none", off, seed=21),
        _case("off_top_k_0", off, top_k=0, seed=21),
        _case("off_top_k_negative", off, top_k=-1, seed=21),
        _case("off_top_k_above_v", off, top_k=9, seed=21),
        _case("off_top_p_0", off, top_p=0.0, seed=21),
        _case("off_top_p_1", off, top_p=1.0, seed=21),
        _case("off_top_p_integer_1", off, top_p=1, seed=21),
        _case("off_all_zero", off, top_k=0, top_p=0.0, seed=21),
        # refused everywhere, naming the option
        _case("error_top_p_above_1", off, top_p=1.5),
        _case("error_top_p_negative", off, top_p=-0.1),
        _case("error_temperature_negative", off, temperature=-1.0),
    ]


def _draw(case: dict[str, Any], temperature: float) -> list[list[int]]:
    logits = np.asarray(case["logits"], dtype=np.float64)
    rngs = row_generators(case["seed"], len(logits))
    draws = [sample(logits, rngs, temperature, case["top_k"], case["top_p"]) for _ in range(case["draws"])]
    return np.asarray(draws, dtype=np.int64).T.tolist()


def _refusal(case: dict[str, Any]) -> Optional[str]:
    """The option the reference refuses (its message names it), or None."""
    try:
        _draw({**case, "draws": 1}, case["temperature"])
    except ValueError as error:
        return next(n for n in ("temperature", "top_k", "top_p") if n in str(error))
    return None


def cases() -> dict[str, Any]:
    """The file's content: every case with its expected tokens or error."""
    out = []
    for case in _specs():
        refused = _refusal(case)
        if refused is not None:
            out.append({**case, "error": refused})
            continue
        tokens = _draw(case, case["temperature"])
        if case["temperature"] > 0:
            for t in (case["temperature"] * (1 + 1e-9), case["temperature"] * (1 - 1e-9)):
                if _draw(case, t) != tokens:
                    raise AssertionError(f"{case['name']}: a draw lies within rounding of a boundary: change its seed")
        out.append({**case, "tokens": tokens})
    return {
        "about": "Sampling conformance cases (docs/sampling.md), made by make_sampling_cases.py from "
        "rnnx.runtime.sampling; Python, C and JavaScript must draw these tokens.",
        "cases": out,
    }


def render() -> str:
    """The file's text: one case a line."""
    content = cases()
    lines = [json.dumps(c, separators=(",", ":")) for c in content["cases"]]
    return '{"about": ' + json.dumps(content["about"]) + ',\n"cases": [\n' + ",\n".join(lines) + "\n]}\n"


if __name__ == "__main__":
    FILE.write_text(render())
    print(f"wrote {FILE} ({len(cases()['cases'])} cases)")
