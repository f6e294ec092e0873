"""Parity: a backend against a reference, call by call, over a prefill and a chain of decode steps.

The one parity module of rnnx: ``export-model``'s check (ONNX Runtime vs the PyTorch model it was
exported from) and ``rnnx-parity`` (any backend vs PyTorch, or vs the reference saved with an export)
both run :func:`compare`. numpy only: a machine without torch replays a saved reference.

How a run goes. The reference backend makes a chain of calls (:class:`Call`: data inputs, data outputs,
state after the call), each from its own state:

* a language model (:func:`reference_calls`) prefills right-padded prompts, then takes ``steps``
  single-token steps; the token fed at every step is the reference's greedy choice at each row's last
  real position;
* any other stateful export (:func:`stream_calls`) takes one call on the example sequence, then
  ``steps`` short calls (1 to 3 positions) cut from it, continuing the state.

The candidate runs the same inputs from a fresh state, chaining its *own* state, so errors accumulate as
they would in deployment, while both sides always see the same inputs. Per call and tensor (every data
output and every ``present.<state>``): ``max_abs = max |candidate - reference|`` and
``max_rel = max_abs / max |reference|`` (relative to the tensor's magnitude, so values near zero do not
blow it up). For a language model, the first call where the candidate's own greedy token differs is the
first diverging token. A run passes when every ``max_rel`` is within the tolerance
(:data:`rnnx.runtime.artifact.TOLERANCES` by precision) and nothing diverged.

A quantized export (``rnnx.json`` has a ``quantization`` record) is held to its scheme's budget instead
(:data:`rnnx.runtime.artifact.QUANTIZATION_BUDGETS`, :class:`Quality`): the logits' ``max_rel``, the mean
KL divergence of the next-token distributions, the drift over :data:`DRIFT_STEPS` chained steps and, where
the record's ``gates`` name it (a trained checkpoint), the teacher-forced top-1 agreement; a diverging greedy
token and the state's errors are recorded, not gated (quantized weights move both by design).

A reference can be saved (:func:`save_reference`, ``parity_reference.npz`` in an export directory) and
replayed later (:func:`load_reference`); it also feeds stock Polygraphy
(:func:`save_polygraphy_files`, :func:`polygraphy_command`).
"""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np

from .artifact import (
    ATTENTION_MASK,
    INPUT_IDS,
    LENGTH,
    LOGITS,
    POLYGRAPHY_INPUTS,
    POLYGRAPHY_OUTPUTS,
    PRESENT_PREFIX,
    QUANTIZATION_BUDGETS,
    TOLERANCES,
    StateSpec,
    TensorSpec,
    atomic_write_bytes,
)
from .backends.base import Backend, BackendState
from .session import Session

#: Decode steps after the prefill in an export's check.
DEFAULT_DECODE_STEPS = 64
#: Calls after the prefill saved for Polygraphy (its JSON files grow with the state size).
POLYGRAPHY_STEPS = 8
#: Chained steps of a quantized export's drift run, and the steps averaged at each end of it.
DRIFT_STEPS = 256
DRIFT_WINDOW = 16
REFERENCE_FORMAT = "rnnx-parity-reference"
REFERENCE_FORMAT_VERSION = 2
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


def random_prompts(vocab_size: int, batch: int = 3, length: int = 12, seed: int = 0) -> list[list[int]]:
    """``batch`` random prompts with lengths from ``length`` down to about ``length / 2``."""
    rng = np.random.default_rng(seed)
    lengths = np.linspace(length, length // 2 + 1, batch).round().astype(int)
    return [rng.integers(0, vocab_size, int(n)).tolist() for n in lengths]


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


def compare(
    calls: Iterable[Call],
    candidate: Backend,
    *,
    reference_name: str = "torch",
    precision: Optional[str] = None,
    tolerance: Optional[float] = None,
    on_step: Optional[Callable[[StepParity], None]] = None,
) -> ParityReport:
    """Runs ``candidate`` on the inputs of ``calls`` (chaining its own state) and compares every call's
    data outputs and, where the call kept it, state. ``precision`` defaults to the candidate's, the
    tolerance to that precision's. ``on_step`` is called after each call (for streaming output)."""
    precision = precision or candidate.metadata.get("precision", "fp32")
    tol = TOLERANCES.get(precision, TOLERANCES["fp32"]) if tolerance is None else float(tolerance)
    report: Optional[ParityReport] = None
    state: Optional[BackendState] = None
    for step, call in enumerate(calls):
        if report is None:
            batch = candidate.batch_of(call.inputs)
            length = next((call.inputs[t.name].shape[t.shape.index(LENGTH)] for t in candidate.inputs
                           if LENGTH in t.shape), 0)  # fmt: skip
            language_model = candidate.vocab_size is not None and call.next_tokens() is not None
            chain = "decode steps" if language_model else "chained calls"
            report = ParityReport(reference_name, candidate.name, precision, tol, batch, int(length), chain=chain,
                                  quality=Quality.of(candidate.metadata))  # fmt: skip
            state = candidate.init_state(batch)
        outputs, state = candidate.run(call.inputs, state)
        if report.quality is not None:
            lm_mask = call.inputs.get(ATTENTION_MASK) if report.chain == "decode steps" else None
            report.quality.add(outputs, call.outputs, lm_mask)
        errs = [TensorError(name, *errors(outputs[name], want)) for name, want in call.outputs.items()]
        if call.state is not None:
            host = candidate.state_to_host(state)
            errs += [TensorError(s.output, *errors(host[s.name], call.state[s.name])) for s in candidate.state_specs]
        ref_tokens = call.next_tokens() if report.chain == "decode steps" else None
        entry = StepParity(step, errs)
        if ref_tokens is not None:
            cand_tokens = greedy_tokens(outputs[LOGITS], call.inputs[ATTENTION_MASK])
            entry.reference_tokens, entry.candidate_tokens = ref_tokens.tolist(), cand_tokens.tolist()
            if report.divergence is None and (ref_tokens != cand_tokens).any():
                row = int(np.flatnonzero(ref_tokens != cand_tokens)[0])
                report.divergence = Divergence(step, row, int(ref_tokens[row]), int(cand_tokens[row]))
        report.steps.append(entry)
        if on_step is not None:
            on_step(entry)
    if report is None:
        raise ValueError("parity: no reference calls to compare")
    return report


def compare_backends(
    reference: Backend,
    candidate: Backend,
    prompts: Sequence[Sequence[int]],
    steps: int,
    *,
    tolerance: Optional[float] = None,
    on_step: Optional[Callable[[StepParity], None]] = None,
    record: Optional[list[Call]] = None,
    keep_state: Callable[[int], bool] = lambda i: True,
) -> ParityReport:
    """:func:`compare` on :func:`reference_calls` of ``reference``; the calls are appended to ``record``
    when given (to save them or to write Polygraphy files)."""
    calls: Iterable[Call] = reference_calls(reference, prompts, steps, keep_state)
    report = _compare_recorded(calls, reference, candidate, tolerance, on_step, record)
    if report.quality is not None:
        report.quality.drift = drift(reference_calls(reference, prompts, DRIFT_STEPS, lambda i: False), candidate)
    return report


def compare_stream(
    reference: Backend,
    candidate: Backend,
    first: dict[str, np.ndarray],
    steps: int,
    *,
    tolerance: Optional[float] = None,
    on_step: Optional[Callable[[StepParity], None]] = None,
    record: Optional[list[Call]] = None,
    keep_state: Callable[[int], bool] = lambda i: True,
) -> ParityReport:
    """:func:`compare` on :func:`stream_calls` of ``reference`` (any stateful export); ``record`` as in
    :func:`compare_backends`."""
    calls: Iterable[Call] = stream_calls(reference, first, steps, keep_state)
    report = _compare_recorded(calls, reference, candidate, tolerance, on_step, record)
    if report.quality is not None:
        report.quality.drift = drift(stream_calls(reference, first, DRIFT_STEPS, lambda i: False), candidate)
    return report


def drift(calls: Iterable[Call], candidate: Backend) -> float:
    """Mean relative error of the data outputs over the last :data:`DRIFT_WINDOW` chained calls divided by
    the mean over the first ones (the calls after the first); 1.0 means no error accumulates."""
    per_call = [s.worst.max_rel for s in compare(calls, candidate, tolerance=float("inf")).steps[1:]]
    if len(per_call) < 2 * DRIFT_WINDOW:
        raise ValueError(f"drift needs at least {2 * DRIFT_WINDOW} chained calls, got {len(per_call)}")
    first, last = np.mean(per_call[:DRIFT_WINDOW]), np.mean(per_call[-DRIFT_WINDOW:])
    return float(last / max(first, _TINY))


def _compare_recorded(
    calls: Iterable[Call],
    reference: Backend,
    candidate: Backend,
    tolerance: Optional[float],
    on_step: Optional[Callable[[StepParity], None]],
    record: Optional[list[Call]],
) -> ParityReport:
    if record is not None:
        calls = _recording(calls, record)
    return compare(calls, candidate, reference_name=reference.name, tolerance=tolerance, on_step=on_step)


def _recording(calls: Iterable[Call], record: list[Call]) -> Iterator[Call]:
    for call in calls:
        record.append(call)
        yield call


# -- a saved reference --------------------------------------------------------------------------------


def save_reference(
    path: Path, calls: Sequence[Call], source: str, prompts: Optional[Sequence[Sequence[int]]] = None
) -> Path:
    """Writes ``calls`` (and, for a language model, the prompts they came from) to an ``.npz`` that
    :func:`load_reference` reads: ``<call>/in/<name>``, ``<call>/out/<name>``, ``<call>/state/<name>``."""
    arrays: dict[str, np.ndarray] = {}
    for i, call in enumerate(calls):
        for part, values in (("in", call.inputs), ("out", call.outputs), ("state", call.state or {})):
            arrays.update((f"{i}/{part}/{name}", value) for name, value in values.items())
    header = {
        "format": REFERENCE_FORMAT,
        "format_version": REFERENCE_FORMAT_VERSION,
        "calls": len(calls),
        "inputs": list(calls[0].inputs) if calls else [],
        "outputs": list(calls[0].outputs) if calls else [],
        "prompts": None if prompts is None else [list(map(int, p)) for p in prompts],
        "source": source,
    }
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return atomic_write_bytes(path, buffer.getvalue())


def _part(data: Any, prefix: str, order: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Arrays under ``prefix`` (name -> array), in ``order`` first."""
    found = {k[len(prefix) :]: data[k] for k in data.files if k.startswith(prefix)}
    return {**{n: found[n] for n in order if n in found}, **found}


def load_reference(path: Path) -> tuple[list[Call], dict[str, Any]]:
    """The calls and header (source, prompts of a language model) saved by :func:`save_reference`
    (version 1, a language model's, reads too); ValueError naming the file when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no saved parity reference (export with --check writes one)")
    with np.load(path, allow_pickle=False) as data:
        if "header" not in data.files:
            raise ValueError(f"{path}: not an rnnx parity reference (no header)")
        header = json.loads(bytes(data["header"]).decode())
        version = header.get("format_version")
        if header.get("format") != REFERENCE_FORMAT or version not in (1, REFERENCE_FORMAT_VERSION):
            raise ValueError(f"{path}: unsupported parity reference {header.get('format')!r} v{version}")
        calls = []
        for i in range(int(header["calls"])):
            state = _part(data, f"{i}/state/") or None
            if version == 1:
                inputs = {INPUT_IDS: data[f"{i}/input_ids"], ATTENTION_MASK: data[f"{i}/attention_mask"]}
                calls.append(Call(inputs, {LOGITS: data[f"{i}/logits"]}, state))
            else:
                inputs = _part(data, f"{i}/in/", header.get("inputs", ()))
                calls.append(Call(inputs, _part(data, f"{i}/out/", header.get("outputs", ())), state))
    return calls, header


# -- Polygraphy ---------------------------------------------------------------------------------------


def save_polygraphy_files(
    calls: Sequence[Call],
    directory: Path,
    specs: Sequence[StateSpec],
    initial_state: dict[str, np.ndarray],
    output_dtypes: dict[str, np.dtype],
    tolerance: float,
) -> dict[str, Any]:
    """Writes ``calls`` as Polygraphy's ``--load-inputs`` (feed dicts with the graph's input names) and
    ``--load-outputs`` (``RunResults``) files; returns what :func:`polygraphy_command` needs. Every
    call but the last must have kept its state (it is the next call's ``past_key_values``).
    ``initial_state`` is the first call's past; outputs are saved in the graph's dtypes (``output_dtypes``,
    e.g. fp16 logits for an fp16 export). Needs the ``polygraphy`` package (the export extra)."""
    from polygraphy.comparator import IterationResult, RunResults
    from polygraphy.json import save_json
    from polygraphy.logger import G_LOGGER

    feeds, iterations, past = [], [], initial_state
    for call in calls:
        feed = OrderedDict(call.inputs)
        feed.update((s.input, past[s.name]) for s in specs)
        feeds.append(feed)
        if call.state is None and specs:
            raise ValueError("save_polygraphy_files: every call needs its state")
        outputs = OrderedDict(call.outputs)
        outputs.update((s.output, call.state[s.name]) for s in specs)
        named = OrderedDict((k, v.astype(output_dtypes.get(k, v.dtype))) for k, v in outputs.items())
        iterations.append(IterationResult(named, runner_name="reference"))
        past = call.state or {}
    results = RunResults()
    results.append(("reference", iterations))
    with G_LOGGER.verbosity(G_LOGGER.ERROR):
        save_json(feeds, str(directory / POLYGRAPHY_INPUTS))
        results.save(str(directory / POLYGRAPHY_OUTPUTS))
    atol = {}
    for name in iterations[0].keys():
        scale = max(float(np.max(np.abs(it[name].astype(np.float64)), initial=0.0)) for it in iterations)
        atol[name] = float(f"{max(tolerance * scale, _TINY):.3g}")
    return {
        "inputs": POLYGRAPHY_INPUTS,
        "outputs": POLYGRAPHY_OUTPUTS,
        "iterations": len(calls),
        "atol": atol,
        "rtol": tolerance,
    }


def polygraphy_command(directory: Path, model_file: str, polygraphy: dict[str, Any]) -> list[str]:
    """``polygraphy run DIR/model.onnx --onnxrt --load-inputs ... --load-outputs ... --atol ... --rtol ...``:
    per-output ``--atol`` = tolerance x max |reference|, ``--rtol`` = tolerance (an element passes within either)."""
    directory = Path(directory)
    atol = [f"{name}:{value:g}" for name, value in polygraphy["atol"].items()]
    return [
        "polygraphy", "run", str(directory / model_file), "--onnxrt",
        "--load-inputs", str(directory / polygraphy["inputs"]),
        "--load-outputs", str(directory / polygraphy["outputs"]),
        "--atol", *atol, "--rtol", f"{polygraphy['rtol']:g}",
    ]  # fmt: skip
