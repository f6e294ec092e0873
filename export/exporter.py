"""``export_model``: an rnnx language model (or checkpoint) -> one ONNX graph + ``rnnx.json``.

The graph (names and layouts: :mod:`rnnx.runtime.artifact`, :mod:`rnnx.models.stateful`) serves prefill and decode:
batch, length and a KV cache's past_length are dynamic. It is traced with ``torch.export`` through
``torch.onnx.export(dynamo=True)``; the rnnx ops become custom nodes via the translation table of
:mod:`rnnx.export.onnx_ops`, which then adds their local functions and plugin attributes.

Everything is built in a temporary directory beside ``out_dir``, checked (``onnx.checker`` with
``full_check``, strict shape inference, optional parity against PyTorch), and only then moved into
``out_dir`` file by file with ``os.replace`` (the metadata last). A failure leaves ``out_dir`` as it was.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import onnx
import torch

from ..models.checkpoint import load_checkpoint
from ..models.lm import RecurrentLM
from ..models.registry import model_type_of
from ..models.stateful import StatefulLM, example_inputs, state_specs
from ..models.training.copy_task import task_prompts
from ..runtime import parity
from ..runtime.artifact import (
    ATTENTION_MASK,
    BATCH,
    DEFAULT_OPSET,
    EXPORT_FILES,
    INPUT_IDS,
    LENGTH,
    LOGITS,
    METADATA_FILE,
    MODEL_FILE,
    ONNX_ELEMENT_TYPES,
    PARITY_FILE,
    PARITY_REFERENCE_FILE,
    PAST_LENGTH,
    PRECISIONS,
    SUPPORTED_OPSETS,
    TARGETS,
    TOLERANCES,
    StateSpec,
    numpy_dtype,
    write_metadata,
)  # fmt: skip
from .metadata import build_metadata

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}

Log = Callable[[str], None]


class ExportError(ValueError):
    """An export that cannot be done or did not validate; the message is one line."""


@dataclass
class ExportResult:
    """What :func:`export_model` wrote: the files (in ``out_dir``), the metadata and the parity run."""

    out_dir: Path
    model_path: Path
    metadata_path: Path
    metadata: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    parity: Optional[parity.ParityReport] = None
    polygraphy_command: Optional[list[str]] = None


def validate_options(target: str, precision: str, opset: int) -> None:
    """Raises :class:`ExportError` naming the supported values for an unknown target, precision or opset."""
    if target not in TARGETS:
        raise ExportError(f"unknown target {target!r}; supported: {', '.join(TARGETS)}")
    if precision not in PRECISIONS:
        raise ExportError(f"unsupported precision {precision!r}; supported: {', '.join(PRECISIONS)}")
    if isinstance(opset, bool) or not isinstance(opset, int) or opset not in SUPPORTED_OPSETS:
        raise ExportError(f"unsupported opset {opset!r}; supported: {SUPPORTED_OPSETS[0]}-{SUPPORTED_OPSETS[-1]}")


def _resolve(source: Union[RecurrentLM, str, os.PathLike]) -> tuple[RecurrentLM, dict[str, Any], Optional[str]]:
    """-> (model, checkpoint info ({} for a module), absolute checkpoint path or None).

    CheckpointError (a ValueError) propagates for a bad checkpoint.
    """
    if isinstance(source, RecurrentLM):
        return source, {}, None
    if isinstance(source, (str, os.PathLike)):
        model, info = load_checkpoint(source)
        return model, info, str(Path(source).resolve())
    raise ExportError(f"expected an rnnx RecurrentLM or a checkpoint path, got {type(source).__name__}")


def _dynamic_shapes(layout: list[StateSpec]) -> tuple[Any, ...]:
    dims = {name: torch.export.Dim(name) for name in (BATCH, LENGTH, PAST_LENGTH)}
    tokens = {0: dims[BATCH], 1: dims[LENGTH]}
    states = tuple({i: dims[d] for i, d in enumerate(s.shape) if isinstance(d, str)} for s in layout)
    return tokens, dict(tokens), states


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silences the torch exporter's progress prints, warnings and registry log lines."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _trace(wrapper: StatefulLM, layout: list[StateSpec], target: str, opset: int) -> onnx.ModelProto:
    """torch.onnx.export (dynamo) with the rnnx translation table, then ``onnx_ops.finalize``."""
    from . import onnx_ops

    names_in = [INPUT_IDS, ATTENTION_MASK] + [s.input for s in layout]
    names_out = [LOGITS] + [s.output for s in layout]
    with onnx_ops.custom_op_schemas(), _quiet():
        program = torch.onnx.export(
            wrapper, example_inputs(wrapper.model), dynamo=True, dynamic_shapes=_dynamic_shapes(layout),
            input_names=names_in, output_names=names_out, opset_version=opset,
            custom_translation_table=onnx_ops.translation_table(target), verbose=False,
        )  # fmt: skip
        model = onnx_ops.finalize(program.model_proto, target)
    _name_dims(model, layout)
    return model


def _name_dims(model: onnx.ModelProto, layout: list[StateSpec]) -> None:
    """Gives the graph inputs the symbolic dim names of the layout (batch, length, past_length)."""
    specs = [(BATCH, LENGTH), (BATCH, LENGTH)] + [s.shape for s in layout]
    for value, shape in zip(model.graph.input, specs):
        for dim, want in zip(value.type.tensor_type.shape.dim, shape):
            if isinstance(want, str):
                dim.dim_param = want


def _check_graph(path: Path) -> onnx.ModelProto:
    """onnx.checker (full_check) and strict shape inference on the saved file; ExportError on failure."""
    try:
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path))
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ExportError(f"exported graph failed ONNX validation: {first}") from None
    return model


def _graph_output_dtypes(model: onnx.ModelProto) -> dict[str, np.dtype]:
    """Graph output name -> numpy dtype (outputs whose element type numpy has)."""
    out = {}
    for value in model.graph.output:
        name = ONNX_ELEMENT_TYPES.get(value.type.tensor_type.elem_type)
        if name is not None and name != "bfloat16":
            out[value.name] = numpy_dtype(name)
    return out


def _move_into(tmp: Path, out_dir: Path, names: list[str]) -> list[Path]:
    """os.replace each file into out_dir, in order (the metadata last); then removes the export files
    that this export did not write (a stale parity report must not describe a new model)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    moved = []
    for name in names:
        os.replace(tmp / name, out_dir / name)
        moved.append(out_dir / name)
    for stale in set(EXPORT_FILES) - set(names):
        (out_dir / stale).unlink(missing_ok=True)
    return moved


def export_model(
    model_or_checkpoint: Union[RecurrentLM, str, os.PathLike],
    out_dir: Union[str, os.PathLike],
    *,
    target: str = "tensorrt",
    precision: str = "fp32",
    opset: int = DEFAULT_OPSET,
    check: bool = True,
    decode_steps: int = parity.DEFAULT_DECODE_STEPS,
    polygraphy_steps: int = parity.POLYGRAPHY_STEPS,
    log: Optional[Log] = None,
) -> ExportResult:
    """Exports an rnnx LM (a module, or a checkpoint directory) to ``out_dir/model.onnx`` + ``rnnx.json``.

    ``target``: ``"tensorrt"`` | ``"onnxruntime"``; ``precision``: ``"fp32"`` | ``"fp16"`` (weights
    and activations; state stays fp32 at the graph boundary); ``opset`` in :data:`SUPPORTED_OPSETS`.
    With ``check``, runs the export through the runtime's ONNX Runtime backend against the fp32 PyTorch
    model (:func:`rnnx.runtime.parity.compare_backends`, a prefill and ``decode_steps`` chained steps),
    fails on a tolerance miss or a diverging greedy token, and writes ``parity.json``, the replayable
    reference ``parity_reference.npz`` and Polygraphy's input / output files (the prefill and
    ``polygraphy_steps`` steps). Raises :class:`ExportError` (or ``CheckpointError``) and leaves
    ``out_dir`` untouched on any failure. The given module is not modified.
    """
    from ..runtime.backends.ort_backend import OrtBackend
    from ..runtime.backends.torch_backend import TorchBackend

    log = log or (lambda message: None)
    validate_options(target, precision, opset)
    if decode_steps < 0 or polygraphy_steps < 0:
        raise ExportError("decode_steps and polygraphy_steps must be >= 0")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir}: exists and is not a directory")
    source, info, checkpoint = _resolve(model_or_checkpoint)
    try:
        model_type = model_type_of(source)
    except KeyError as e:
        raise ExportError(str(e.args[0])) from None
    reference = copy.deepcopy(source).cpu().float().eval()
    model = copy.deepcopy(reference).to(_DTYPES[precision])
    wrapper = StatefulLM(model).eval()
    states = state_specs(model)
    log(f"model: {model_type} ({sum(p.numel() for p in model.parameters()):,} parameters), "
        f"{len(states)} state tensors; target {target}, {precision}, opset {opset}")  # fmt: skip

    parent = out_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.resolve().name}.tmp-", dir=parent))
    try:
        log("tracing with torch.export and converting to ONNX (dynamic batch, length, past_length)")
        try:
            onnx_model = _trace(wrapper, states, target, opset)
        except ExportError:
            raise
        except Exception as e:  # the exporter raises many types; report one line
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ExportError(f"ONNX conversion failed: {type(e).__name__}: {first}") from None
        model_path = tmp / MODEL_FILE
        onnx.save_model(onnx_model, str(model_path))
        log("checking: onnx.checker full_check, strict shape inference")
        onnx_model = _check_graph(model_path)
        weights_sha256 = info.get("weights_sha256") or None
        metadata = build_metadata(
            model_type=model_type, config=dict(source.config), vocab_size=model.vocab_size, states=states,
            activation_dtype=_DTYPES[precision], onnx_model=onnx_model, model_path=model_path,
            target=target, precision=precision, opset=opset, checkpoint=checkpoint, weights_sha256=weights_sha256,
        )  # fmt: skip
        write_metadata(tmp, metadata)
        written = [MODEL_FILE]
        report, polygraphy = None, None
        if check:
            log(f"parity: ONNX Runtime (CPU) vs PyTorch, prefill + {decode_steps} chained decode steps")
            torch_side = TorchBackend(reference, source={"checkpoint": checkpoint, "weights_sha256": weights_sha256})
            prompts = task_prompts(info.get("task"), model.vocab_size)
            calls: list[parity.Call] = []
            report = parity.compare_backends(
                torch_side, OrtBackend(tmp), prompts, decode_steps, record=calls,
                keep_state=lambda i: i < polygraphy_steps + 1 or i == decode_steps,
            )  # fmt: skip
            initial = torch_side.state_to_host(torch_side.init_state(len(prompts)))
            graph_dtypes = _graph_output_dtypes(onnx_model)
            polygraphy = parity.save_polygraphy_files(
                calls[: polygraphy_steps + 1], tmp, states, initial, graph_dtypes, TOLERANCES[precision]
            )
            parity.save_reference(tmp / PARITY_REFERENCE_FILE, calls, prompts, source=f"torch {model_type} fp32")
            (tmp / PARITY_FILE).write_text(json.dumps(report.to_dict(), indent=1) + "\n")
            written += [PARITY_FILE, PARITY_REFERENCE_FILE, polygraphy["inputs"], polygraphy["outputs"]]
            if not report.passed:
                raise ExportError(f"parity check failed: {report.verdict()}")
            metadata["parity"] = {k: v for k, v in report.to_dict().items() if k != "steps"}
            metadata["parity"]["polygraphy"] = polygraphy
            write_metadata(tmp, metadata)
        log(f"writing {out_dir}")
        files = _move_into(tmp, out_dir, [*written, METADATA_FILE])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    command = None if polygraphy is None else parity.polygraphy_command(out_dir, MODEL_FILE, polygraphy)
    return ExportResult(out_dir, out_dir / MODEL_FILE, files[-1], metadata, files, report, command)
