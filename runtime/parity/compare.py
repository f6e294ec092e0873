"""The candidate side of a parity run: :func:`compare` runs a backend on the reference's inputs, chaining its
own state, and fills a :class:`~.report.ParityReport`; :func:`compare_backends` and :func:`compare_stream` make
the reference calls and compare in one go; :func:`drift` is a quantized export's long-chain check."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Optional

import numpy as np

from ..backends.base import Backend, BackendState
from ..contract.artifact import ATTENTION_MASK, LENGTH, LOGITS
from ..contract.targets import FP32, PRECISION_RECORDS
from .calls import reference_calls, stream_calls
from .report import (
    _TINY,
    DRIFT_STEPS,
    DRIFT_WINDOW,
    Call,
    Divergence,
    ParityReport,
    Quality,
    StepParity,
    TensorError,
    errors,
    greedy_tokens,
)


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
    precision = precision or candidate.metadata.get("precision", FP32.name)
    tol = PRECISION_RECORDS.get(precision, FP32).tolerance if tolerance is None else float(tolerance)
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
    return _compare_recorded(
        lambda n, keep: reference_calls(reference, prompts, n, keep), steps, keep_state, reference, candidate,
        tolerance, on_step, record,
    )  # fmt: skip


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
    return _compare_recorded(
        lambda n, keep: stream_calls(reference, first, n, keep), steps, keep_state, reference, candidate, tolerance,
        on_step, record,
    )  # fmt: skip


def drift(calls: Iterable[Call], candidate: Backend) -> float:
    """Mean relative error of the data outputs over the last :data:`DRIFT_WINDOW` chained calls divided by
    the mean over the first ones (the calls after the first); 1.0 means no error accumulates."""
    per_call = [s.worst.max_rel for s in compare(calls, candidate, tolerance=float("inf")).steps[1:]]
    if len(per_call) < 2 * DRIFT_WINDOW:
        raise ValueError(f"drift needs at least {2 * DRIFT_WINDOW} chained calls, got {len(per_call)}")
    first, last = np.mean(per_call[:DRIFT_WINDOW]), np.mean(per_call[-DRIFT_WINDOW:])
    return float(last / max(first, _TINY))


#: ``(steps, keep_state) -> the reference's calls``: a prefill (or first call) and ``steps`` chained calls.
ReferenceCalls = Callable[[int, Callable[[int], bool]], Iterable[Call]]


def _compare_recorded(
    make_calls: ReferenceCalls,
    steps: int,
    keep_state: Callable[[int], bool],
    reference: Backend,
    candidate: Backend,
    tolerance: Optional[float],
    on_step: Optional[Callable[[StepParity], None]],
    record: Optional[list[Call]],
) -> ParityReport:
    """:func:`compare` on ``make_calls(steps, keep_state)`` (appended to ``record`` when given), then, for a
    quantized export, :func:`drift` over a fresh chain of :data:`DRIFT_STEPS` calls."""
    calls = make_calls(steps, keep_state)
    if record is not None:
        calls = _recording(calls, record)
    report = compare(calls, candidate, reference_name=reference.name, tolerance=tolerance, on_step=on_step)
    if report.quality is not None:
        report.quality.drift = drift(make_calls(DRIFT_STEPS, lambda i: False), candidate)
    return report


def _recording(calls: Iterable[Call], record: list[Call]) -> Iterator[Call]:
    for call in calls:
        record.append(call)
        yield call
