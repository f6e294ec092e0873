"""Step-by-step parity of a runtime backend against PyTorch over a long greedy generation.

Both sessions prefill the same prompts, then take ``steps`` single-token steps. The token fed to
both at every step is the *reference's* greedy choice, so errors always compare the same text; the
first step where the candidate's own greedy choice differs is the first diverging token (what free
greedy decoding would first disagree on). Per step and tensor: ``max_abs = max |cand - ref|`` and
``max_rel = max_abs / max |ref|`` (as :mod:`rnnx.export.parity`); logits are each row's last real
position (prefill) or the step's logits; state is every state tensor, the worst one reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from ..export.parity import TOLERANCES
from .session import Session

_TINY = 1e-12


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max_abs, max_rel) of ``got`` against ``want``; shape mismatch -> (inf, inf)."""
    if got.shape != want.shape:
        return float("inf"), float("inf")
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not g.size:
        return 0.0, 0.0
    max_abs = float(np.max(np.abs(g - w)))
    return max_abs, (max_abs / max(float(np.max(np.abs(w))), _TINY) if max_abs else 0.0)


@dataclass
class StepParity:
    """Errors at one call (step 0 = prefill) and both sides' greedy tokens (B,) after it."""

    step: int
    logits_abs: float
    logits_rel: float
    state_abs: float
    state_rel: float
    state_worst: str
    reference_tokens: list[int]
    candidate_tokens: list[int]


@dataclass
class Divergence:
    """The first step where the candidate's greedy token differs from the reference's."""

    step: int
    row: int
    reference_token: int
    candidate_token: int


@dataclass
class RuntimeParityReport:
    """Per-step errors and the verdict: every ``max_rel`` <= ``tolerance`` and no divergence."""

    backend: str
    precision: str
    tolerance: float
    steps: list[StepParity] = field(default_factory=list)
    divergence: Optional[Divergence] = None

    @property
    def worst_rel(self) -> float:
        return max((max(s.logits_rel, s.state_rel) for s in self.steps), default=0.0)

    @property
    def passed(self) -> bool:
        return self.divergence is None and self.worst_rel <= self.tolerance

    def lines(self) -> list[str]:
        """One header line, one line per step, then the divergence and the verdict."""
        out = [
            f"{'step':>5}  {'logits abs':>10}  {'logits rel':>10}  {'state abs':>10}  {'state rel':>10}  worst state"
        ]
        for s in self.steps:
            out.append(f"{s.step:5d}  {s.logits_abs:10.3e}  {s.logits_rel:10.3e}  {s.state_abs:10.3e}  "
                       f"{s.state_rel:10.3e}  {s.state_worst}")  # fmt: skip
        d = self.divergence
        out.append("first diverging token: none" if d is None else
                   f"first diverging token: step {d.step} row {d.row}: torch {d.reference_token}, "
                   f"{self.backend} {d.candidate_token}")  # fmt: skip
        verdict = "PASS" if self.passed else "FAIL"
        out.append(f"{verdict}: {self.backend} vs torch, {len(self.steps) - 1} steps, worst relative error "
                   f"{self.worst_rel:.3e} (tolerance {self.tolerance:g}, {self.precision})")  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "precision": self.precision, "tolerance": self.tolerance,
                "passed": self.passed, "worst_rel": self.worst_rel,
                "divergence": None if self.divergence is None else asdict(self.divergence),
                "steps": [asdict(s) for s in self.steps]}  # fmt: skip


def _state_errors(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> tuple[float, float, str]:
    worst = (0.0, 0.0, "-")
    for name, w in want.items():
        a, r = errors(got[name], w)
        if r > worst[1] or (r == worst[1] and a > worst[0]):
            worst = (a, r, name)
    return worst


def compare_sessions(
    reference: Session,
    candidate: Session,
    prompts: Sequence[Sequence[int]],
    steps: int,
    tolerance: Optional[float] = None,
    on_step: Optional[Any] = None,
) -> RuntimeParityReport:
    """Runs ``prompts`` through both sessions for a prefill and ``steps`` steps (see module doc).
    ``on_step(StepParity)`` is called after each call (for streaming output)."""
    precision = candidate.metadata.get("precision", "fp32")
    tol = TOLERANCES.get(precision, TOLERANCES["fp32"]) if tolerance is None else tolerance
    report = RuntimeParityReport(candidate.backend.name, precision, tol)
    ref_state = reference.prefill([list(p) for p in prompts])
    cand_state = candidate.prefill([list(p) for p in prompts])
    ref_tokens = np.argmax(ref_state.last_logits, -1)
    for step in range(steps + 1):
        if step:
            reference.step(ref_tokens, state=ref_state)
            candidate.step(ref_tokens, state=cand_state)
        la, lr = errors(cand_state.last_logits, ref_state.last_logits)
        sa, sr, worst = _state_errors(cand_state.to_host(), ref_state.to_host())
        ref_tokens = np.argmax(ref_state.last_logits, -1)
        cand_tokens = np.argmax(cand_state.last_logits, -1)
        entry = StepParity(step, la, lr, sa, sr, worst, ref_tokens.tolist(), cand_tokens.tolist())
        report.steps.append(entry)
        if report.divergence is None and (ref_tokens != cand_tokens).any():
            row = int(np.flatnonzero(ref_tokens != cand_tokens)[0])
            report.divergence = Divergence(step, row, int(ref_tokens[row]), int(cand_tokens[row]))
        if on_step is not None:
            on_step(entry)
    return report


def default_prompts(metadata: dict[str, Any], task: Optional[dict[str, Any]] = None, batch: int = 3) -> list[list[int]]:
    """Prompts for a parity run: the checkpoint's task prompts (copy task: ``s_1..s_n SEP``) or random."""
    from ..export.parity import parity_prompts

    ids, mask = parity_prompts(int(metadata["vocab_size"]), task, batch=batch)
    return [row[: int(m.sum())].tolist() for row, m in zip(ids, mask)]
