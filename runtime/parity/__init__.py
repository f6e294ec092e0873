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
(the `Precision` record's `tolerance`, :mod:`rnnx.runtime.contract.targets`) and nothing diverged.

A quantized export (``rnnx.json`` has a ``quantization`` record) is held to its scheme's budget instead
(:data:`rnnx.runtime.contract.artifact.QUANTIZATION_BUDGETS`, :class:`Quality`): the logits' ``max_rel``, the mean
KL divergence of the next-token distributions, the drift over :data:`DRIFT_STEPS` chained steps and, where
the record's ``gates`` name it (a trained checkpoint), the teacher-forced top-1 agreement; a diverging greedy
token and the state's errors are recorded, not gated (quantized weights move both by design).

A reference can be saved (:func:`save_reference`, ``parity_reference.npz`` in an export directory) and
replayed later (:func:`load_reference`); it also feeds stock Polygraphy
(:func:`save_polygraphy_files`, :func:`polygraphy_command`).

The package: :mod:`.report` (what a run records and its verdict), :mod:`.calls` (the reference's calls),
:mod:`.compare` (the candidate against them), :mod:`.files` (saved references, Polygraphy).
"""

from __future__ import annotations

from . import report
from .calls import DEFAULT_DECODE_STEPS, chained_inputs, random_prompts, reference_calls, stream_calls
from .compare import compare, compare_backends, compare_stream, drift
from .files import (
    POLYGRAPHY_STEPS,
    REFERENCE_FORMAT,
    REFERENCE_FORMAT_VERSION,
    load_reference,
    polygraphy_command,
    save_polygraphy_files,
    save_reference,
)
from .report import *  # noqa: F403 (a run's records and their helpers, as listed in report.__all__)

__all__ = [
    "DEFAULT_DECODE_STEPS", "POLYGRAPHY_STEPS", "REFERENCE_FORMAT", "REFERENCE_FORMAT_VERSION", "chained_inputs",
    "compare", "compare_backends", "compare_stream", "drift", "load_reference", "polygraphy_command",
    "random_prompts", "reference_calls", "save_polygraphy_files", "save_reference", "stream_calls",
    *report.__all__,
]  # fmt: skip
