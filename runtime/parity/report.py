"""What a parity run records and how it judges: :class:`Call` (one reference call), per-tensor errors
(:func:`errors`), :class:`StepParity` per call, :class:`Divergence`, a quantized export's :class:`Quality`, and
the :class:`ParityReport` with its verdict, table and JSON form. numpy only."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from ..contract.artifact import ATTENTION_MASK, LOGITS, PRESENT_PREFIX, QUANTIZATION_BUDGETS

__all__ = [
    "DRIFT_STEPS", "DRIFT_WINDOW", "Call", "Divergence", "ParityReport", "Quality", "StepParity", "TensorError",
    "errors", "greedy_tokens",
]  # fmt: skip

#: Chained steps of a quantized export's drift run, and the steps averaged at each end of it.
DRIFT_STEPS = 256
DRIFT_WINDOW = 16
_TINY = 1e-12


@dataclass
class Call:
    """One graph call of the reference: its data inputs and outputs (graph names, graph order, host
    arrays; floating outputs fp32) and the ``present`` state after the call (flat name -> array), or
    None where not kept."""

    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    state: Optional[dict[str, np.ndarray]] = None

    def next_tokens(self) -> Optional[np.ndarray]:
        """(B,) the reference's greedy token after each row's last real position (a language model's
        call), else None."""
        if LOGITS not in self.outputs or ATTENTION_MASK not in self.inputs:
            return None
        return greedy_tokens(self.outputs[LOGITS], self.inputs[ATTENTION_MASK])


def greedy_tokens(logits: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """(B, L, V) logits -> (B,) argmax at each row's last real position (mask 1)."""
    last = attention_mask.sum(1).astype(np.int64) - 1
    return np.argmax(logits[np.arange(len(logits)), last], axis=-1).astype(np.int64)


def errors(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(max_abs, max_rel) of ``got`` against ``want``; a shape mismatch is (inf, inf)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf"), float("inf")
    if not got.size:
        return 0.0, 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    max_abs = float(np.max(np.abs(g - w)))
    return max_abs, (max_abs / max(float(np.max(np.abs(w))), _TINY) if max_abs else 0.0)


@dataclass
class TensorError:
    """Error of one output at one call."""

    name: str
    max_abs: float
    max_rel: float


@dataclass
class StepParity:
    """Errors of every compared output at one call (step 0 = the first call) and, for a language model,
    both greedy choices (B,)."""

    step: int
    errors: list[TensorError]
    reference_tokens: Optional[list[int]] = None
    candidate_tokens: Optional[list[int]] = None

    @property
    def worst(self) -> TensorError:
        """The output with the largest relative error at this call."""
        return max(self.errors, key=lambda e: (e.max_rel, e.max_abs))


@dataclass
class Divergence:
    """The first call after which the candidate's greedy token differs from the reference's."""

    step: int
    row: int
    reference_token: int
    candidate_token: int


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@dataclass
class Quality:
    """A quantized candidate's figures against its scheme's budget (:data:`QUANTIZATION_BUDGETS`).

    ``max_rel``: worst relative error of the data outputs over every call; ``mean_kl`` and ``top1`` (a
    language model): KL(reference || candidate) of the next-token distributions and greedy agreement, over
    every real position of every call (teacher-forced: both sides see the reference's tokens); ``drift``:
    mean logits error of the last :data:`DRIFT_WINDOW` of :data:`DRIFT_STEPS` chained steps over the first
    ones'. ``gates``: the figures that decide the verdict. ``scored_calls`` (from the record, for a checkpoint
    trained on a task): per row of the parity prompts, the calls whose last position the task scores (the
    copy task's answer); the logits figures then cover those positions only, as the task's own evaluation
    does, instead of every position (a batch of another size is scored everywhere)."""

    scheme: str
    budget: dict[str, float]
    gates: list[str]
    scored_calls: Optional[list[int]] = None
    max_rel: float = 0.0
    mean_kl: Optional[float] = None
    top1: Optional[float] = None
    drift: Optional[float] = None
    positions: int = 0
    _kl_sum: float = 0.0
    _agree: int = 0
    _calls: int = 0

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> Optional[Quality]:
        """The empty figures of a quantized export's metadata; None for one that is not quantized."""
        record = metadata.get("quantization")
        if not record:
            return None
        scheme = record["scheme"]
        gates = list(record.get("gates", ("max_rel",)))
        return cls(scheme, dict(QUANTIZATION_BUDGETS[scheme]), gates, record.get("scored_calls"))

    def add(self, outputs: dict[str, np.ndarray], want: dict[str, np.ndarray], mask: Optional[np.ndarray]) -> None:
        """One call's data outputs (candidate, reference); ``mask`` (B, L) marks real positions of a language
        model's call (then ``logits`` also feeds the KL and top-1 figures, at the scored positions)."""
        call, self._calls = self._calls, self._calls + 1
        if mask is None or LOGITS not in want:
            for name, reference in want.items():
                self._worse(errors(outputs[name], reference)[1])
            return
        real = mask.astype(bool)
        if self.scored_calls is not None and len(self.scored_calls) == len(real):
            scored = np.zeros_like(real)
            for row, count in enumerate(self.scored_calls):
                if call < count and real[row].any():
                    scored[row, np.flatnonzero(real[row])[-1]] = True
            real = scored
        if not real.any():
            return
        self._worse(errors(outputs[LOGITS][real], want[LOGITS][real])[1])
        ref, cand = _log_softmax(want[LOGITS][real]), _log_softmax(outputs[LOGITS][real])
        self._kl_sum += float((np.exp(ref) * (ref - cand)).sum())
        self._agree += int((ref.argmax(-1) == cand.argmax(-1)).sum())
        self.positions += int(real.sum())
        self.mean_kl, self.top1 = self._kl_sum / self.positions, self._agree / self.positions

    def _worse(self, rel: float) -> None:
        """Keeps the worst relative error; a NaN stays NaN (max() would drop it)."""
        nan = bool(np.isnan(rel) or np.isnan(self.max_rel))
        self.max_rel = float("nan") if nan else max(self.max_rel, float(rel))

    def failures(self) -> list[str]:
        """The gated figures outside the budget, one phrase each. A figure that is not finite (a NaN output)
        fails; so does a gated one that was not measured, except ``drift``, which needs a reference that runs
        :data:`DRIFT_STEPS` steps (an export's check, ``rnnx-parity --reference torch``), not a saved one."""
        out = []
        for gate in self.gates:
            value, limit = getattr(self, gate), self.budget[gate]
            if value is None:
                if gate != "drift":
                    out.append(f"{gate} not measured")
            elif not np.isfinite(value):
                out.append(f"{gate} {value}")
            elif (value < limit) if gate == "top1" else (value > limit):
                out.append(f"{gate} {value:.4g} {'<' if gate == 'top1' else '>'} {limit:g}")
        return out

    @property
    def passed(self) -> bool:
        return not self.failures()

    def summary(self) -> str:
        figures = [f"{g} {getattr(self, g):.4g}" for g in ("max_rel", "mean_kl", "top1", "drift")
                   if getattr(self, g) is not None]  # fmt: skip
        return f"{self.scheme} budget ({', '.join(f'{k} {v:g}' for k, v in self.budget.items())}): " + ", ".join(
            figures
        )

    def to_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "budget": self.budget, "gates": self.gates, "scored_calls": self.scored_calls,
                "max_rel": self.max_rel,
                "mean_kl": self.mean_kl, "top1": self.top1, "drift": self.drift, "positions": self.positions,
                "failures": self.failures()}  # fmt: skip


@dataclass
class ParityReport:
    """Per-call errors of a parity run and its verdict (see the module doc)."""

    reference: str
    candidate: str
    precision: str
    tolerance: float
    batch: int
    prompt_length: int
    steps: list[StepParity] = field(default_factory=list)
    divergence: Optional[Divergence] = None
    #: What the calls after the first are: ``"decode steps"`` (a language model) or ``"chained calls"``.
    chain: str = "decode steps"
    #: A quantized candidate's figures; its budget then decides the verdict.
    quality: Optional[Quality] = None

    @property
    def worst_rel(self) -> float:
        return max((s.worst.max_rel for s in self.steps if s.errors), default=0.0)

    @property
    def passed(self) -> bool:
        if self.quality is not None:
            return self.quality.passed
        return self.divergence is None and self.worst_rel <= self.tolerance

    def worst(self) -> list[tuple[str, float, float, int]]:
        """Per output, in graph order: (name, worst max_abs, worst max_rel, call of the worst max_rel)."""
        out: dict[str, list[Any]] = {}
        for s in self.steps:
            for e in s.errors:
                row = out.setdefault(e.name, [e.name, 0.0, 0.0, s.step])
                row[1] = max(row[1], e.max_abs)
                if e.max_rel > row[2]:
                    row[2], row[3] = e.max_rel, s.step
        return [tuple(r) for r in out.values()]

    def verdict(self) -> str:
        """One line: PASS / FAIL, what was compared, the worst error and the first diverging token."""
        d = self.divergence
        diverged = (
            ("no diverging token" if self.chain == "decode steps" else "outputs and state compared")
            if d is None
            else f"first diverging token at step {d.step} row {d.row}: {self.reference} {d.reference_token}, "
            f"{self.candidate} {d.candidate_token}"
        )
        what = (
            f"{'PASS' if self.passed else 'FAIL'}: {self.candidate} vs {self.reference}, "
            f"{'prefill' if self.chain == 'decode steps' else 'a first call'} of {self.batch} x {self.prompt_length}"
            f" + {len(self.steps) - 1} {self.chain}"
        )
        if self.quality is not None:
            failures = self.quality.failures()
            return f"{what}; {self.quality.summary()}" + (f"; over budget: {', '.join(failures)}" if failures else "")
        return (
            f"{what}; worst relative error {self.worst_rel:.3e} (tolerance {self.tolerance:g}, {self.precision}); "
            f"{diverged}"
        )

    def table(self) -> str:
        """The worst error of each output over all calls, then :meth:`verdict`."""
        rows = self.worst()
        width = max([len("output"), *(len(r[0]) for r in rows)])
        lines = [f"{'output':<{width}}  {'max abs':>10}  {'max rel':>10}  {'at step':>7}"]
        lines += [f"{n:<{width}}  {a:10.3e}  {r:10.3e}  {s:7d}" for n, a, r, s in rows]
        return "\n".join([*lines, self.verdict()])

    def lines(self) -> list[str]:
        """One line per call (logits error, worst state error and its tensor), then :meth:`verdict`."""
        first = self.steps[0].errors[0].name if self.steps and self.steps[0].errors else LOGITS
        head = first[:10]
        out = [
            f"{'step':>5}  {head + ' abs':>14}  {head + ' rel':>14}  {'state abs':>10}  {'state rel':>10}  worst state"
        ]
        for s in self.steps:
            logits = next((e for e in s.errors if e.name == first), TensorError(first, 0.0, 0.0))
            states = [e for e in s.errors if e.name.startswith(PRESENT_PREFIX)]
            st = max(states, key=lambda e: (e.max_rel, e.max_abs)) if states else TensorError("-", 0.0, 0.0)
            out.append(
                f"{s.step:5d}  {logits.max_abs:14.3e}  {logits.max_rel:14.3e}  {st.max_abs:10.3e}  "
                f"{st.max_rel:10.3e}  {st.name}"
            )
        return [*out, self.verdict()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the verdict, the worst row per output, the divergence and every call."""
        return {
            "reference": self.reference,
            "candidate": self.candidate,
            "precision": self.precision,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "worst_rel": self.worst_rel,
            "batch": self.batch,
            "prompt_length": self.prompt_length,
            "decode_steps": len(self.steps) - 1,
            "chain": self.chain,
            "worst": [dict(zip(("name", "max_abs", "max_rel", "step"), r)) for r in self.worst()],
            "divergence": None if self.divergence is None else asdict(self.divergence),
            "quality": None if self.quality is None else self.quality.to_dict(),
            "steps": [asdict(s) for s in self.steps],
        }
