"""The stages of an export, in order, and :func:`run_export`, which carries an :class:`~.plan.ExportPlan` through
them in a temporary folder beside the output folder:

1. :func:`trace`: torch.export through ``torch.onnx.export`` (dynamo) with the rnnx translation table, the
   graph written straight to the temporary folder with its weights as external data;
2. :func:`quantize_saved` (with ``quantize``): weight-only quantization of the saved graph;
3. :func:`check_graph`: ``onnx.checker`` (full check) and strict shape inference, by path;
4. the metadata (:func:`rnnx.export.metadata.build_metadata`);
5. :func:`check_parity` (with ``check``): the export on ONNX Runtime against PyTorch, and the parity and
   Polygraphy files;
6. a model that is to be one file is written as one (:func:`rnnx.export.onnx_files.internalize`);
7. :func:`publish`: the files moved into the output folder one by one, the metadata last.

A failure at any stage leaves the output folder as it was.
"""

from __future__ import annotations

import contextlib
import functools
import gc
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
from typing import Any, Optional

import numpy as np
import onnx
import torch

from ..runtime import parity
from ..runtime.contract.artifact import (
    CAUSAL_LM,
    EXPORT_FILES,
    EXTERNAL_DATA_FILE,
    GENAI_FILES,
    METADATA_FILE,
    MODEL_FILE,
    ONNX_ELEMENT_TYPES,
    PARITY_FILE,
    PARITY_REFERENCE_FILE,
    TensorSpec,
    genai_copied_library,
    model_signature,
    numpy_dtype,
    write_metadata,
)  # fmt: skip
from ..runtime.contract.targets import FP32, Precision, Target
from . import onnx_files
from .errors import ExportError, one_line, with_cause
from .metadata import build_metadata
from .plan import ExportPlan
from .progress import counter
from .quantize import QuantizeError, QuantizeOptions, quantize_model

#: Tensor bytes in the graph (initializers and constants) above which ``external_data=None`` writes the
#: weights as external data: a serialized ONNX protobuf cannot exceed 2 GB, and 1.5 GiB leaves margin
#: for the graph itself.
EXTERNAL_DATA_THRESHOLD = 3 << 29


#: With external data, tensors of at least this many bytes go to the data file; smaller ones (shape
#: constants that shape inference reads) stay in ``model.onnx``.
EXTERNAL_DATA_MIN_TENSOR_BYTES = 1024


Log = Callable[[str], None]


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


def _dynamic_shapes(plan: ExportPlan) -> tuple[Any, ...]:
    """torch.export's dynamic shapes: one Dim per axis name, shared by every tensor that has the axis;
    a single entry, the tuple for ``StatefulModule.forward(*flat)``."""
    specs = [*plan.inputs, *plan.states]
    dims = {name: torch.export.Dim(name) for name in sorted({d for s in specs for d in s.shape if isinstance(d, str)})}
    return (tuple({i: dims[d] for i, d in enumerate(s.shape) if isinstance(d, str)} for s in specs),)


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


def _uses_rnnx_ops(program: Any) -> bool:
    """Whether the traced program calls an ``rnnx::`` op (on the onnxruntime target the attention is
    lowered to an ORT contrib op, so the ONNX graph alone does not tell)."""
    exported = getattr(program, "exported_program", None)
    if exported is None:
        return True  # nothing to inspect: let the graph speak for itself
    return any(
        node.op == "call_function" and getattr(node.target, "namespace", None) == "rnnx"
        for node in exported.graph.nodes
    )


def trace(
    plan: ExportPlan, target: Target, opset: int, path: Path, data_file: str = EXTERNAL_DATA_FILE
) -> onnx.ModelProto:
    """torch.onnx.export (dynamo) with the rnnx translation table, then ``onnx_ops.finalize``; writes the
    graph to ``path`` with its tensors of at least :data:`EXTERNAL_DATA_MIN_TENSOR_BYTES` in
    ``data_file`` beside it (straight from the traced program: the weights never become one
    in-memory proto) and returns the graph without those tensors' data. ExportError when the module calls
    no rnnx op."""
    from . import onnx_ops

    names_in = [t.name for t in plan.inputs] + [s.input for s in plan.states]
    names_out = plan.output_names + [s.output for s in plan.states]
    with onnx_ops.custom_op_schemas(), _quiet():
        program = torch.onnx.export(
            plan.graph, plan.trace_inputs, dynamo=True, dynamic_shapes=_dynamic_shapes(plan),
            input_names=names_in, output_names=names_out, opset_version=opset,
            custom_translation_table=onnx_ops.translation_table(target), verbose=False,
        )  # fmt: skip
        if not _uses_rnnx_ops(program):
            raise ExportError(
                f"{plan.what} has no rnnx op (SRU, SRU++, causal linear attention) and no layer that "
                "rnnx.models.convert knows: nothing for rnnx to export (torch.onnx.export handles such a model)"
            )
        skeleton = onnx_files.save_traced(program.model, path, data_file, EXTERNAL_DATA_MIN_TENSOR_BYTES)
        del program
        model = onnx_ops.finalize(skeleton, target, inplace=True)
        if target.contrib_ops:
            onnx_ops.fuse_skip_layer_norm(model)
    _name_dims(model, [*(t.shape for t in plan.inputs), *(s.shape for s in plan.states)])
    onnx_files.save_skeleton(model, path)
    return model


def _name_dims(model: onnx.ModelProto, shapes: list[tuple[Any, ...]]) -> None:
    """Gives the graph inputs the symbolic dim names of their specs (batch, length, past_length, ...)."""
    for value, shape in zip(model.graph.input, shapes):
        for dim, want in zip(value.type.tensor_type.shape.dim, shape):
            if isinstance(want, str):
                dim.dim_param = want


def _output_specs(model: onnx.ModelProto, plan: ExportPlan) -> list[TensorSpec]:
    """The data outputs as the graph has them: dims (ints or the exporter's symbolic names), dtype."""
    specs = []
    for value in model.graph.output[: len(plan.output_names)]:
        tensor_type = value.type.tensor_type
        shape = tuple(d.dim_param if d.dim_param else int(d.dim_value) for d in tensor_type.shape.dim)
        specs.append(TensorSpec(value.name, shape, ONNX_ELEMENT_TYPES.get(tensor_type.elem_type, "float32")))
    return specs


def save_external(model: onnx.ModelProto, path: Path, data_file: str = EXTERNAL_DATA_FILE) -> Optional[Path]:
    """Saves ``model`` at ``path`` with every tensor of at least :data:`EXTERNAL_DATA_MIN_TENSOR_BYTES` in
    ``data_file`` beside it (written and dropped from ``model`` one tensor at a time); returns
    the data file, None when no tensor was large enough to move."""
    data = path.parent / data_file
    data.unlink(missing_ok=True)
    onnx.save_model(
        model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data_file,
        size_threshold=EXTERNAL_DATA_MIN_TENSOR_BYTES,
    )  # fmt: skip
    return data if data.is_file() else None


def quantize_saved(
    model_path: Path, options: ExportOptions, plan: ExportPlan, log: Log, data_file: str = EXTERNAL_DATA_FILE
) -> tuple[dict[str, Any], Optional[Path]]:
    """Stage 2: quantizes the saved model in place (its external data rewritten); returns the ``quantization``
    record, with the parity gates for this plan, and the data file (None when no tensor is external)."""
    q = options.quantize
    log(f"quantizing weights: {q.scheme}, block {q.block_size}, head {q.head}" + (", embedding" if q.embedding else ""))
    model = onnx.load(str(model_path))
    try:
        model, record = quantize_model(model, options.target, q)
    except QuantizeError as e:
        raise ExportError(str(e)) from None
    data_path = save_external(model, model_path, data_file)
    record["gates"] = ["max_rel", *(["mean_kl"] if plan.interface == CAUSAL_LM else []), "drift",
                       *(["top1"] if plan.trained else [])]  # fmt: skip
    record["scored_calls"] = plan.scored_calls
    kept = ", ".join(e["node"] for e in record["excluded"]) or "none"
    log(f"quantized {len(record['quantized'])} weights ({record['format']}); kept: {kept}")
    return record, data_path


def _graph_opset(model: onnx.ModelProto, default: int) -> int:
    """The default domain's opset the saved graph imports (a quantization pass may have raised it)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default)


def check_graph(path: Path) -> onnx.ModelProto:
    """onnx.checker (full_check) and strict shape inference on the saved file, both by path (so a model
    with external data is never one in-memory proto); ExportError on failure. Returns the model loaded
    without its external data: its graph, for the metadata."""
    inferred = path.with_name(f".{path.name}.inferred")
    try:
        onnx.checker.check_model(str(path), full_check=True)
        onnx.shape_inference.infer_shapes_path(str(path), str(inferred), check_type=True, strict_mode=True,
                                               data_prop=True)  # fmt: skip
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise ExportError(f"exported graph failed ONNX validation: {one_line(e)}") from None
    finally:
        inferred.unlink(missing_ok=True)
    return onnx.load(str(path), load_external_data=False)


def _graph_output_dtypes(model: onnx.ModelProto) -> dict[str, np.dtype]:
    """Graph output name -> numpy dtype (outputs whose element type numpy has)."""
    out = {}
    for value in model.graph.output:
        name = ONNX_ELEMENT_TYPES.get(value.type.tensor_type.elem_type)
        if name is not None and name != "bfloat16":
            out[value.name] = numpy_dtype(name)
    return out


def publish(tmp: Path, out_dir: Path, names: list[str]) -> list[Path]:
    """os.replace each file into out_dir, in order (the external data before the model, the metadata
    last); then removes the export files that this export did not write (a stale parity report must not
    describe a new model, nor a stale data file sit beside a single-file one, nor a genai graph of an older
    model beside a new one, nor the op library an older ``--genai --native-ops`` export copied in)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    library = genai_copied_library(out_dir)  # read before the new genai_config.json replaces the old
    moved = []
    for name in names:
        os.replace(tmp / name, out_dir / name)
        moved.append(out_dir / name)
    for stale in {*EXPORT_FILES, *GENAI_FILES, *([library] if library else [])} - set(names):
        (out_dir / stale).unlink(missing_ok=True)
    return moved


@dataclass(frozen=True)
class ExportOptions:
    """How to export (the plan says what): the target and precision records, the ONNX opset, whether to check
    parity (``steps`` chained calls after the first, ``polygraphy_steps`` of them saved for Polygraphy),
    external data (True / False, None: exactly when the graph's tensors pass :data:`EXTERNAL_DATA_THRESHOLD`)
    and weight-only quantization."""

    target: Target
    precision: Precision
    opset: int
    check: bool
    steps: int
    polygraphy_steps: int
    external_data: Optional[bool] = None
    quantize: Optional[QuantizeOptions] = None


#: ``(temporary folder, whether the export is one file, log) -> names of the files it wrote there``: a step that
#: adds files to an export (:mod:`rnnx.export.genai`), run after the checks, published with the export's files.
ExtraFiles = Callable[[Path, bool, Log], list[str]]


def run_export(
    plan: ExportPlan, out_dir: Path, options: ExportOptions, log: Log, extra: Optional[ExtraFiles] = None
) -> ExportResult:
    """Carries ``plan`` through the stages (the module doc) in a temporary folder beside ``out_dir``, then moves
    the files into ``out_dir`` (with those that ``extra`` writes); ExportError (one line) and ``out_dir`` as it
    was on any failure."""
    parameters = sum(p.numel() for p in plan.graph.parameters())
    log(f"model: {plan.what} ({parameters:,} parameters), {len(plan.inputs)} inputs, {len(plan.states)} state "
        f"tensors; target {options.target.name}, {options.precision.name}, opset {options.opset}")  # fmt: skip
    parent = out_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.resolve().name}.tmp-", dir=parent))
    report, polygraphy = None, None
    try:
        model_path = tmp / MODEL_FILE
        one_file, data_path = write_graph(plan, options, model_path, log)
        quantization = None
        if options.quantize is not None:
            quantization, data_path = quantize_saved(model_path, options, plan, log)
        log("checking: onnx.checker full_check, strict shape inference")
        describe, output_dtypes = describe_export(plan, options, model_path, quantization)
        metadata = describe(data_path)
        write_metadata(tmp, metadata)
        written: list[str] = []
        if options.check:
            report, polygraphy, written = check_parity(plan, options, tmp, metadata, output_dtypes, log)
            metadata["parity"] = {k: v for k, v in report.to_dict().items() if k != "steps"}
            metadata["parity"]["polygraphy"] = polygraphy
        if data_path is not None and one_file:
            log(f"writing {MODEL_FILE} as one file")
            onnx_files.internalize(model_path, data_path)
            data_path = None
            metadata = {**describe(None), "parity": metadata["parity"]}
        write_metadata(tmp, metadata)
        written = [*([EXTERNAL_DATA_FILE] if data_path is not None else []), MODEL_FILE, *written]
        if plan.text is not None:
            written += plan.text.write(tmp)
        if extra is not None:
            written += extra(tmp, one_file, log)
        log(f"writing {out_dir}")
        files = publish(tmp, out_dir, [*written, METADATA_FILE])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    command = None if polygraphy is None else parity.polygraphy_command(out_dir, MODEL_FILE, polygraphy)
    return ExportResult(out_dir, out_dir / MODEL_FILE, files[-1], metadata, files, report, command)


def write_graph(plan: ExportPlan, options: ExportOptions, model_path: Path, log: Log) -> tuple[bool, Optional[Path]]:
    """Stage 1: traces ``plan`` into ``model_path`` (external data beside it); returns (whether the export is
    to be one file, the data file or None)."""
    axes = sorted({d for spec in [*plan.inputs, *plan.states] for d in spec.shape if isinstance(d, str)})
    log(f"tracing with torch.export and converting to ONNX (dynamic {', '.join(axes) or 'nothing'})")
    try:
        onnx_model = trace(plan, options.target, options.opset, model_path)
    except ExportError:
        raise
    except Exception as e:  # the exporter raises many types; report one line
        raise ExportError(f"ONNX conversion failed: {with_cause(e)}") from None
    tensor_bytes = onnx_files.tensor_bytes(onnx_model)
    external = options.external_data if options.external_data is not None else tensor_bytes > EXTERNAL_DATA_THRESHOLD
    del onnx_model  # from here on the graph is read from the files (one copy at a time)
    gc.collect()
    data_path = model_path.parent / EXTERNAL_DATA_FILE
    log(f"saved {MODEL_FILE}" + (f" with external data {EXTERNAL_DATA_FILE}" if external else " (one file)")
        + f"; {tensor_bytes / 2**20:,.1f} MiB of tensors")  # fmt: skip
    return not external, data_path if data_path.is_file() else None


def describe_export(
    plan: ExportPlan, options: ExportOptions, model_path: Path, quantization: Optional[dict[str, Any]]
) -> tuple[Callable[[Optional[Path]], dict[str, Any]], dict[str, np.dtype]]:
    """Stages 3 and 4: checks the saved graph (:func:`check_graph`); returns how to build its metadata for a given
    data file (None: one file; the hashes are of the files as they are then) and its outputs' dtypes."""
    onnx_model = check_graph(model_path)
    describe = functools.partial(
        build_metadata, interface=plan.interface, model_type=plan.model_type, config=plan.config,
        vocab_size=plan.vocab_size, inputs=plan.inputs, outputs=_output_specs(onnx_model, plan), states=plan.states,
        onnx_model=onnx_model, model_path=model_path, target=options.target.name, precision=options.precision.name,
        opset=_graph_opset(onnx_model, options.opset), source=plan.source,
    )  # fmt: skip

    def metadata(data: Optional[Path]) -> dict[str, Any]:
        built = describe(external_data=data)
        built["quantization"] = quantization
        built["text"] = None if plan.text is None else plan.text.record
        built["signature"] = model_signature(built)
        return built

    return metadata, _graph_output_dtypes(onnx_model)


def check_parity(
    plan: ExportPlan, options: ExportOptions, tmp: Path, metadata: dict[str, Any], output_dtypes: dict[str, np.dtype],
    log: Log,
) -> tuple[parity.ParityReport, dict[str, Any], list[str]]:  # fmt: skip
    """Stage 5: the export in ``tmp`` on ONNX Runtime (CPU) against the fp32 PyTorch model; writes the parity
    report, the replayable reference and Polygraphy's files there; returns (the report, the Polygraphy record, the
    files written). ExportError when it fails or cannot run."""
    from ..runtime.backends.ort_backend import OrtBackend
    from ..runtime.backends.torch_backend import TorchBackend

    chain = "decode steps" if plan.interface == CAUSAL_LM else "chained calls"
    log(f"parity: ONNX Runtime (CPU) vs PyTorch, a first call + {options.steps} {chain}")
    torch_side = TorchBackend(plan.reference, metadata={**metadata, "precision": FP32.name}) if (
        plan.interface != CAUSAL_LM) else TorchBackend(plan.reference.model, source=plan.source)  # fmt: skip
    calls: list[parity.Call] = []
    saved = options.polygraphy_steps
    try:
        keep = lambda i: i < saved + 1 or i == options.steps  # noqa: E731
        report = plan.parity_run(torch_side, OrtBackend(tmp), calls, keep, counter(log, options.steps + 1, chain))
    except ExportError:
        raise
    except Exception as e:
        raise ExportError(f"parity check could not run: {type(e).__name__}: {one_line(e)}") from None
    initial = torch_side.state_to_host(torch_side.init_state(torch_side.batch_of(calls[0].inputs)))
    tolerance = options.precision.tolerance if report.quality is None else _replay_tolerance(report)
    polygraphy = parity.save_polygraphy_files(calls[: saved + 1], tmp, plan.states, initial, output_dtypes, tolerance)
    parity.save_reference(tmp / PARITY_REFERENCE_FILE, calls, f"torch {plan.model_type} fp32", plan.prompts)
    (tmp / PARITY_FILE).write_text(json.dumps(report.to_dict(), indent=1) + "\n")
    if not report.passed:
        raise ExportError(f"parity check failed: {report.verdict()}")
    return report, polygraphy, [PARITY_FILE, PARITY_REFERENCE_FILE, polygraphy["inputs"], polygraphy["outputs"]]


def _replay_tolerance(report: parity.ParityReport) -> float:
    """A quantized export's Polygraphy tolerance: its budget's max_rel, or the worst error the parity run saw
    (its state moves more than its logits) with a margin, whichever is larger."""
    return float(f"{max(report.quality.budget['max_rel'], 1.25 * report.worst_rel):.3g}")
