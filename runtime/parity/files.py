"""Parity files: a reference saved beside an export (``parity_reference.npz``; :func:`save_reference`,
:func:`load_reference`) so a machine without torch can replay it, and the stock Polygraphy files and command
that re-check an export (:func:`save_polygraphy_files`, :func:`polygraphy_command`)."""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..contract.artifact import (
    ATTENTION_MASK,
    INPUT_IDS,
    LOGITS,
    POLYGRAPHY_INPUTS,
    POLYGRAPHY_OUTPUTS,
    StateSpec,
    atomic_write_bytes,
)
from .report import _TINY, Call

#: Calls after the prefill saved for Polygraphy (its JSON files grow with the state size).
POLYGRAPHY_STEPS = 8
REFERENCE_FORMAT = "rnnx-parity-reference"
REFERENCE_FORMAT_VERSION = 2


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
