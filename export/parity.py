"""Parity of an exported model: ONNX Runtime (CPU EP) against PyTorch, prefill then chained decode steps.

Both sides start from a fresh state, prefill the same right-padded prompts, then take ``decode_steps``
single-token steps, each feeding its own ``present.*`` back as ``past_key_values.*``; the next token
of every row is PyTorch's greedy choice, fed to both, so the two never decode different text.

Errors are per tensor and step: ``max_abs = max |onnx - torch|`` and ``max_rel = max_abs / max |torch|``
(relative to the tensor's magnitude, so values near zero do not blow it up). A run passes when every
``max_rel`` is within the precision's tolerance (:data:`TOLERANCES`). The reference is always the fp32
PyTorch model, so an fp16 export is measured against the numbers it approximates.

For stock Polygraphy, :func:`save_polygraphy_files` writes the PyTorch side of the prefill and the
first steps (inputs as a list of feed dicts, outputs as ``RunResults``); :func:`polygraphy_command`
gives the ``polygraphy run`` line, with per-output ``--atol`` = tolerance x max |torch| and
``--rtol`` = tolerance, that re-checks them elementwise (an element passes when within either).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from .wrapper import ATTENTION_MASK, INPUT_IDS, LOGITS, StatefulLM, StateTensor

#: Largest accepted max_rel per precision (the fp16 figure covers fp16 weights and activations
#: against the fp32 PyTorch model over a long chain of steps).
TOLERANCES = {"fp32": 1e-4, "fp16": 1e-2}
DEFAULT_DECODE_STEPS = 64
#: Decode steps saved for Polygraphy after the prefill (JSON files grow with the state size).
POLYGRAPHY_STEPS = 8
POLYGRAPHY_INPUTS = "polygraphy_inputs.json"
POLYGRAPHY_OUTPUTS = "polygraphy_outputs.json"
_TINY = 1e-12

Feed = "OrderedDict[str, np.ndarray]"


@dataclass
class TensorError:
    """Error of one output at one step."""

    name: str
    max_abs: float
    max_rel: float


@dataclass
class StepReport:
    """Errors of every output at one call: step 0 is the prefill, 1.. the decode steps."""

    step: int
    errors: list[TensorError]

    @property
    def worst_rel(self) -> float:
        return max(e.max_rel for e in self.errors)


@dataclass
class ParityReport:
    """Per-step errors of a parity run and its verdict against ``tolerance`` (on max_rel)."""

    precision: str
    tolerance: float
    batch: int
    prompt_length: int
    steps: list[StepReport] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(s.worst_rel <= self.tolerance for s in self.steps)

    def worst(self) -> list[tuple[str, float, float, int]]:
        """Per output name, in graph order: (name, worst max_abs, worst max_rel, step of worst rel)."""
        out: dict[str, list] = {}
        for s in self.steps:
            for e in s.errors:
                row = out.setdefault(e.name, [e.name, 0.0, 0.0, s.step])
                row[1] = max(row[1], e.max_abs)
                if e.max_rel > row[2]:
                    row[2], row[3] = e.max_rel, s.step
        return [tuple(r) for r in out.values()]

    def table(self) -> str:
        """A text table: the worst error of each output over all steps, then the verdict."""
        rows = self.worst()
        width = max(len("output"), *(len(r[0]) for r in rows))
        lines = [f"{'output':<{width}}  {'max abs':>10}  {'max rel':>10}  {'at step':>7}"]
        lines += [f"{n:<{width}}  {a:10.3e}  {r:10.3e}  {s:7d}" for n, a, r, s in rows]
        verdict = "PASS" if self.passed else "FAIL"
        lines.append(
            f"{verdict}: {len(self.steps) - 1} decode steps after a prefill of {self.batch} x "
            f"{self.prompt_length}; tolerance {self.tolerance:g} relative ({self.precision})"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the worst row per output and the verdict; steps kept in full)."""
        return {
            "precision": self.precision,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "batch": self.batch,
            "prompt_length": self.prompt_length,
            "decode_steps": len(self.steps) - 1,
            "worst": [dict(zip(("name", "max_abs", "max_rel", "step"), r)) for r in self.worst()],
            "steps": [asdict(s) for s in self.steps],
        }


def parity_prompts(
    vocab_size: int, task: Optional[dict[str, Any]] = None, batch: int = 3, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded prompts ``input_ids`` (B, L) int64 and ``attention_mask`` (B, L) int64 (0 = pad).

    A checkpoint trained on the copy task gets that task's prompts (``s_1 .. s_n SEP``, n random);
    anything else gets random tokens with row lengths from L down to about L / 2.
    """
    gen = torch.Generator().manual_seed(seed)
    if task and task.get("name") == "copy":
        from ..models.training.copy_task import CopyTask

        copy = CopyTask.from_description(task)
        symbols, lengths = copy.sample(batch, gen)
        n_max = int(lengths.max())
        ids = torch.full((batch, n_max + 1), copy.pad, dtype=torch.int64)
        ids[:, :n_max] = symbols[:, :n_max]
        ids[torch.arange(batch), lengths] = copy.sep
        mask = (torch.arange(n_max + 1)[None, :] <= lengths[:, None]).to(torch.int64)
        return ids.numpy(), mask.numpy()
    length = 12
    ids = torch.randint(0, vocab_size, (batch, length), generator=gen)
    lengths = torch.linspace(length, length // 2 + 1, batch).round().to(torch.int64)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).to(torch.int64)
    return ids.numpy(), mask.numpy()


def initial_past(model_wrapper: StatefulLM, layout: list[StateTensor], batch: int) -> list[np.ndarray]:
    """A fresh state (zeros; empty KV caches) at the graph boundary, in graph order."""
    from ..models.state import flatten_state

    state = model_wrapper.model.init_state(batch, device="cpu")
    return [t.detach().to(s.dtype).numpy() for (_, t), s in zip(flatten_state(state), layout)]


def _feed(ids: np.ndarray, mask: np.ndarray, layout: list[StateTensor], past: list[np.ndarray]) -> Feed:
    feed = OrderedDict([(INPUT_IDS, ids.astype(np.int64)), (ATTENTION_MASK, mask.astype(np.int64))])
    feed.update((s.input_name, p) for s, p in zip(layout, past))
    return feed


@torch.no_grad()
def _torch_run(wrapper: StatefulLM, feed: Feed) -> list[np.ndarray]:
    outs = wrapper(*(torch.from_numpy(np.ascontiguousarray(v)) for v in feed.values()))
    return [o.detach().cpu().numpy() for o in outs]


def _errors(names: list[str], got: list[np.ndarray], want: list[np.ndarray]) -> list[TensorError]:
    errors = []
    for name, g, w in zip(names, got, want):
        if g.shape != w.shape:
            errors.append(TensorError(name, float("inf"), float("inf")))
            continue
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        max_abs = float(np.max(np.abs(g64 - w64))) if g64.size else 0.0
        scale = float(np.max(np.abs(w64))) if w64.size else 0.0
        errors.append(TensorError(name, max_abs, max_abs / max(scale, _TINY) if max_abs else 0.0))
    return errors


@dataclass
class ParityRun:
    """A parity report plus the PyTorch side of every call (feeds and outputs), for Polygraphy."""

    report: ParityReport
    feeds: list[Feed]
    torch_outputs: list[list[np.ndarray]]
    output_names: list[str]


def run_parity(
    reference: StatefulLM,
    onnx_path: Path,
    layout: list[StateTensor],
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    *,
    precision: str = "fp32",
    decode_steps: int = DEFAULT_DECODE_STEPS,
) -> ParityRun:
    """Runs ``onnx_path`` in ONNX Runtime (CPU EP) against ``reference`` (an fp32 :class:`StatefulLM`).

    input_ids, attention_mask (B, L) int64, right-padded (mask 0 = pad). Returns the per-step errors
    of ``logits`` and every ``present.*`` output over the prefill and ``decode_steps`` steps.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    output_names = [LOGITS] + [s.output_name for s in layout]
    batch = input_ids.shape[0]
    report = ParityReport(precision, TOLERANCES[precision], batch, input_ids.shape[1])
    run = ParityRun(report, [], [], output_names)
    torch_past = onnx_past = initial_past(reference, layout, batch)
    ids, mask = input_ids, attention_mask
    last = attention_mask.sum(1) - 1  # each row's last real prompt position
    for step in range(decode_steps + 1):
        torch_feed = _feed(ids, mask, layout, torch_past)
        want = _torch_run(reference, torch_feed)
        got = session.run(output_names, dict(_feed(ids, mask, layout, onnx_past)))
        report.steps.append(StepReport(step, _errors(output_names, got, want)))
        run.feeds.append(torch_feed)
        run.torch_outputs.append(want)
        token = want[0][np.arange(batch), last].argmax(-1)
        ids, mask, last = token[:, None].astype(np.int64), np.ones((batch, 1), np.int64), np.zeros(batch, np.int64)
        torch_past, onnx_past = want[1:], list(got[1:])
    return run


def save_polygraphy_files(
    run: ParityRun, directory: Path, output_dtypes: dict[str, np.dtype], steps: int = POLYGRAPHY_STEPS
) -> dict[str, Any]:
    """Writes the prefill and the first ``steps`` decode steps for ``polygraphy run --load-inputs /
    --load-outputs``; returns the files and tolerances :func:`polygraphy_command` needs.

    Outputs are saved in the graph's dtypes (``output_dtypes``), e.g. fp16 logits for an fp16 export.
    """
    from polygraphy.comparator import IterationResult, RunResults
    from polygraphy.json import save_json
    from polygraphy.logger import G_LOGGER

    n = min(steps + 1, len(run.feeds))
    iterations = []
    for outputs in run.torch_outputs[:n]:
        named = OrderedDict((k, v.astype(output_dtypes.get(k, v.dtype))) for k, v in zip(run.output_names, outputs))
        iterations.append(IterationResult(named, runner_name="pytorch"))
    results = RunResults()
    results.append(("pytorch", iterations))
    with G_LOGGER.verbosity(G_LOGGER.ERROR):
        save_json(run.feeds[:n], str(directory / POLYGRAPHY_INPUTS))
        results.save(str(directory / POLYGRAPHY_OUTPUTS))
    tol = run.report.tolerance
    atol = {}
    for i, name in enumerate(run.output_names):
        scale = max(float(np.max(np.abs(o[i].astype(np.float64)), initial=0.0)) for o in run.torch_outputs[:n])
        atol[name] = float(f"{max(tol * scale, _TINY):.3g}")
    return {"inputs": POLYGRAPHY_INPUTS, "outputs": POLYGRAPHY_OUTPUTS, "iterations": n, "atol": atol, "rtol": tol}


def polygraphy_command(directory: Path, model_file: str, polygraphy: dict[str, Any]) -> list[str]:
    """``polygraphy run DIR/model.onnx --onnxrt --load-inputs ... --load-outputs ... --atol ... --rtol ...``."""
    directory = Path(directory)
    atol = [f"{name}:{value:g}" for name, value in polygraphy["atol"].items()]
    return [
        "polygraphy", "run", str(directory / model_file), "--onnxrt",
        "--load-inputs", str(directory / polygraphy["inputs"]),
        "--load-outputs", str(directory / polygraphy["outputs"]),
        "--atol", *atol, "--rtol", f"{polygraphy['rtol']:g}",
    ]  # fmt: skip
