"""The exporter: a stateful module -> one ONNX graph + ``rnnx.json`` (the artifact contract).

One path for every model. :func:`export` takes any module whose forward is
``(*inputs, state) -> (*outputs, new_state)`` (or a stateless one) plus example inputs;
:func:`export_model` is that path for an rnnx language model or checkpoint (inputs ``input_ids`` /
``attention_mask``, output ``logits``, greedy-decode parity). Both build an :class:`_Job` and run
:func:`_run`:

* the module is traced with ``torch.export`` through ``torch.onnx.export(dynamo=True)`` in its graph
  view (:class:`rnnx.models.stateful.StatefulModule`: flat inputs and state in, flat outputs and state
  out); the rnnx ops become custom nodes via the translation table of :mod:`rnnx.export.onnx_ops`,
  which then adds their local functions and plugin attributes;
* the graph is saved as one file, or with its weights in ONNX external data
  (:data:`~rnnx.runtime.artifact.EXTERNAL_DATA_FILE` beside ``model.onnx``) when asked or when its
  tensors pass :data:`EXTERNAL_DATA_THRESHOLD` (a protobuf cannot be serialized past 2 GB); every later
  step (checker, shape inference, parity, Polygraphy) reads the saved files by path, never one
  in-memory proto with the weights;
* everything is built in a temporary directory beside ``out_dir``, checked (``onnx.checker`` with
  ``full_check``, strict shape inference, optional parity against PyTorch on ONNX Runtime), and only
  then moved into ``out_dir`` file by file with ``os.replace`` (the data file first, then the model,
  the metadata last); the export files it did not write (a stale data file) are then removed. A
  failure leaves ``out_dir`` as it was;
* with ``quantize``, the saved graph's weights are quantized (:mod:`rnnx.export.quantize`) before the
  checks, the hashes and the parity run, which then holds the export to the scheme's budget.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import inspect
import io
import json
import logging
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import onnx
import torch
from torch import Tensor, nn

from ..models.checkpoint import load_checkpoint
from ..models.factory import FactoryError, prepare
from ..models.lm import RecurrentLM
from ..models.registry import model_type_of
from ..models.stateful import (
    StateError,
    StatefulLM,
    StatefulModule,
    dtype_name,
    example_state,
    find_state_specs,
    lm_example_data,
    torch_dtype,
)
from ..models.training.copy_task import task_prompts, task_scored_calls
from ..runtime import parity
from ..runtime.artifact import (
    BATCH,
    CAUSAL_LM,
    DEFAULT_OPSET,
    EXPORT_FILES,
    EXTERNAL_DATA_FILE,
    LENGTH,
    LOGITS,
    METADATA_FILE,
    MODEL_FILE,
    ONNX_ELEMENT_TYPES,
    PARITY_FILE,
    PARITY_REFERENCE_FILE,
    PAST_LENGTH,
    PAST_PREFIX,
    PRECISIONS,
    PRESENT_PREFIX,
    STATEFUL,
    SUPPORTED_OPSETS,
    TARGETS,
    TOLERANCES,
    StateSpec,
    TensorSpec,
    lm_io,
    model_signature,
    numpy_dtype,
    write_metadata,
)  # fmt: skip
from . import onnx_files
from .metadata import build_metadata
from .quantize import QuantizeError, QuantizeOptions, quantize_model, resolve_options

_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}

#: Tensor bytes in the graph (initializers and constants) above which ``external_data=None`` writes the
#: weights as external data: a serialized ONNX protobuf cannot exceed 2 GB, and 1.5 GiB leaves margin
#: for the graph itself.
EXTERNAL_DATA_THRESHOLD = 3 << 29
#: With external data, tensors of at least this many bytes go to the data file; smaller ones (shape
#: constants that shape inference reads) stay in ``model.onnx``.
EXTERNAL_DATA_MIN_TENSOR_BYTES = 1024

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


def _quantize_options(quantize: Union[None, str, QuantizeOptions], target: str) -> Optional[QuantizeOptions]:
    if quantize is None:
        return None
    try:
        return resolve_options(quantize, target)
    except QuantizeError as e:
        raise ExportError(str(e)) from None


def validate_options(target: str, precision: str, opset: int) -> None:
    """Raises :class:`ExportError` naming the supported values for an unknown target, precision or opset."""
    if target not in TARGETS:
        raise ExportError(f"unknown target {target!r}; supported: {', '.join(TARGETS)}")
    if precision not in PRECISIONS:
        raise ExportError(f"unsupported precision {precision!r}; supported: {', '.join(PRECISIONS)}")
    if isinstance(opset, bool) or not isinstance(opset, int) or opset not in SUPPORTED_OPSETS:
        raise ExportError(f"unsupported opset {opset!r}; supported: {SUPPORTED_OPSETS[0]}-{SUPPORTED_OPSETS[-1]}")


#: Chained calls after the first one in a stateful export's parity check.
DEFAULT_CHAINED_CALLS = 32

Feeds = dict[str, np.ndarray]
#: ``(reference backend, candidate backend, record, keep_state) -> report``: one export's parity run.
ParityRun = Callable[[Any, Any, list[parity.Call], Callable[[int], bool]], parity.ParityReport]


@dataclass
class _Job:
    """Everything about one export that depends on what is exported; :func:`_run` does the rest.

    ``graph`` is the module's graph view in the export precision; ``reference`` the fp32 one (a torch
    backend is built on it for the parity check). ``inputs`` are the data inputs' specs (symbolic
    shapes), ``output_names`` the data outputs', ``states`` the state specs; ``trace_inputs`` the
    flat example tensors torch.export traces with (no dynamic size 0, 1 or equal to another).
    """

    interface: str
    model_type: str
    config: dict[str, Any]
    graph: StatefulModule
    reference: StatefulModule
    inputs: list[TensorSpec]
    output_names: list[str]
    states: list[StateSpec]
    trace_inputs: tuple[Tensor, ...]
    parity_run: ParityRun
    source: dict[str, Any]
    vocab_size: Optional[int] = None
    prompts: Optional[list[list[int]]] = None
    what: str = ""
    #: Whether the model was trained (a checkpoint that records its task): a quantized export of it is also
    #: held to the teacher-forced top-1 agreement of its budget.
    trained: bool = False
    #: Per parity prompt, the calls a trained task scores (the quantized budget's logits figures cover those).
    scored_calls: Optional[list[int]] = None
    #: Puts back what the job changed on the caller's module (its train / eval modes).
    restore: Callable[[], None] = lambda: None


#: Terminal colour codes, which torch's exporter puts in its messages.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _one_line(e: BaseException) -> str:
    text = _ANSI.sub("", str(e)).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _with_cause(e: BaseException) -> str:
    """``Type: first line`` of ``e``, then of the exception at the end of its cause chain (what the exporter
    wraps: a torch.export error, say) with the model code it points at: one line."""
    line = f"{type(e).__name__}: {_one_line(e).removesuffix(' Next steps:')}"
    root, seen = e, {id(e)}
    while True:
        nxt = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if nxt is None or id(nxt) in seen:
            break
        root = nxt
        seen.add(id(root))
    if root is not e:
        line += f"; caused by {type(root).__name__}: {_one_line(root)}"
    text = _ANSI.sub("", str(root))
    call = re.search(r"The following call raised this error:\s*File \"(.+?)\", line (\d+), in (\S+)", text)
    caused = re.search(r"Caused by: \((.+?)\)", text)
    if call is None and caused is None:
        return line
    where = f"{call[1]}:{call[2]} in {call[3]}" if call else caused[1]
    return f"{line} (at {where})"


# -- language models ------------------------------------------------------------------------------


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


def _is_fp32_cpu(module: nn.Module) -> bool:
    """Whether every floating parameter and buffer of ``module`` is fp32 on the CPU (no copy needed)."""
    tensors = [*module.parameters(), *module.buffers()]
    return all(t.device.type == "cpu" and (t.dtype == torch.float32 or not t.is_floating_point()) for t in tensors)


def _eval_modes(module: nn.Module) -> Callable[[], None]:
    """Puts ``module`` in eval mode; returns the function that restores every submodule's mode."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()

    def restore() -> None:
        for m, training in modes:
            m.training = training

    return restore


def _lm_job(model_or_checkpoint: Union[RecurrentLM, str, os.PathLike], precision: str, steps: int) -> _Job:
    source, info, checkpoint = _resolve(model_or_checkpoint)
    try:
        model_type = model_type_of(source)
    except KeyError as e:
        raise ExportError(str(e.args[0])) from None
    # No whole-model copy the export does not need: an fp32 CPU model is traced and checked as it is (in
    # eval mode for the export; _Job.restore puts its modes back); fp16 traces one half-size copy.
    base = source if _is_fp32_cpu(source) else copy.deepcopy(source).cpu().float()
    restore = _eval_modes(base)
    reference = StatefulLM(base)
    model = base if precision == "fp32" else copy.deepcopy(base).to(_DTYPES[precision])
    graph = StatefulLM(model)
    batch, length, past = 2, 3, 4  # distinct and > 1: torch.export specialises none of them
    data = lm_example_data(model, batch, length)
    states = find_state_specs(graph, data, batch, length)
    gen = torch.Generator().manual_seed(1)
    inputs, _ = lm_io(model.vocab_size, states, "float32")
    prompts = task_prompts(info.get("task"), model.vocab_size)

    def run_parity(ref, candidate, record, keep_state):
        return parity.compare_backends(ref, candidate, prompts, steps, record=record, keep_state=keep_state)

    return _Job(
        interface=CAUSAL_LM, model_type=model_type, config=dict(source.config), graph=graph, reference=reference,
        inputs=[t for t in inputs if not t.name.startswith(PAST_PREFIX)], output_names=[LOGITS], states=states,
        trace_inputs=(*data, *example_state(states, batch, past, gen)), parity_run=run_parity,
        source={"checkpoint": checkpoint, "weights_sha256": info.get("weights_sha256") or None},
        vocab_size=model.vocab_size, prompts=prompts, what=f"{model_type} language model", restore=restore,
        trained=bool(info.get("task")), scored_calls=task_scored_calls(info.get("task"), prompts),
    )  # fmt: skip


# -- any stateful module ------------------------------------------------------------------------------

AxesSpec = Union[dict[int, str], Sequence[Optional[str]]]


def _data_names(module: nn.Module, count: int, stateful: bool) -> list[str]:
    """Default input names: the forward's parameter names (without the state), else ``input_<i>``."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values() if p.kind in (p.POSITIONAL_ONLY,
                  p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[: len(params) - 1 if stateful else len(params)]]
    return names[:count] if len(names) >= count else [f"input_{i}" for i in range(count)]


def _axes_of(name: str, tensor: Tensor, declared: Optional[AxesSpec]) -> dict[int, str]:
    """Axis index -> axis name of one input: declared, or by default ``batch`` on axis 0 and ``length``
    on axis 1 of an integer / bool input of rank >= 2 (token ids, masks) or a floating one of rank >= 3
    (features (B, L, F)); a floating (B, F) input is one step, its axis 1 fixed."""
    rank = tensor.dim()
    if declared is None:
        sequence = rank >= 3 or (rank == 2 and not tensor.is_floating_point())
        return {i: n for i, n in enumerate((BATCH, LENGTH)[: 2 if sequence else min(rank, 1)])}
    items = declared.items() if isinstance(declared, dict) else enumerate(declared)
    axes = {}
    for axis, axis_name in items:
        if axis_name is None:
            continue
        if isinstance(axis, bool) or not isinstance(axis, int) or not -rank <= axis < rank:
            raise ExportError(f"dynamic_axes[{name!r}]: axis {axis!r} is out of range for a rank-{rank} input")
        if not isinstance(axis_name, str) or not axis_name.isidentifier() or axis_name == PAST_LENGTH:
            raise ExportError(
                f"dynamic_axes[{name!r}]: axis name {axis_name!r} must be an identifier other than {PAST_LENGTH!r}"
            )
        axes[axis % rank] = axis_name
    return axes


def _input_specs(
    names: list[str], examples: tuple[Tensor, ...], dynamic_axes: Optional[dict[str, AxesSpec]], precision: str
) -> tuple[list[TensorSpec], dict[str, int]]:
    """The data inputs' specs and the example size of every axis name; ExportError on disagreement."""
    unknown = sorted(set(dynamic_axes or {}) - set(names))
    if unknown:
        raise ExportError(f"dynamic_axes names unknown inputs {unknown}; the inputs are {names}")
    specs, sizes, first = [], {}, {}
    for name, tensor in zip(names, examples):
        axes = _axes_of(name, tensor, (dynamic_axes or {}).get(name))
        for axis, axis_name in axes.items():
            size = int(tensor.shape[axis])
            if sizes.setdefault(axis_name, size) != size:
                where, other = first[axis_name]
                raise ExportError(
                    f"example input {name!r} axis {axis} ({axis_name!r}) has size {size}, but {where!r} axis "
                    f"{other} has {sizes[axis_name]}: inputs sharing an axis name must agree"
                )
            first.setdefault(axis_name, (name, axis))
        dtype = tensor.dtype
        if dtype.is_floating_point:
            dtype = _DTYPES[precision]
        shape = tuple(axes.get(i, int(d)) for i, d in enumerate(tensor.shape))
        specs.append(TensorSpec(name, shape, dtype_name(dtype)))
    return specs, sizes


def _trace_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """A size per axis name for tracing: >= 2 and all distinct (and distinct from past_length's), so
    torch.export specialises none of them nor ties two together; multiples of the example's sizes."""
    out: dict[str, int] = {}
    for name, size in sizes.items():
        k = 1
        while size * k < 2 or size * k in out.values():
            k += 1
        out[name] = size * k
    return out


def _tile(tensor: Tensor, spec: TensorSpec, sizes: dict[str, int]) -> Tensor:
    """``tensor`` repeated along its dynamic axes up to ``sizes`` (each a multiple of the current size)."""
    reps = [sizes[d] // tensor.shape[i] if isinstance(d, str) else 1 for i, d in enumerate(spec.shape)]
    return tensor.repeat(*reps) if any(r != 1 for r in reps) else tensor


def _check_examples(examples: Any) -> tuple[Tensor, ...]:
    examples = (examples,) if isinstance(examples, Tensor) else examples
    if not isinstance(examples, (tuple, list)) or not examples:
        raise ExportError("example_inputs must be a tensor or a non-empty tuple of tensors (the state excluded)")
    for i, t in enumerate(examples):
        if not isinstance(t, Tensor):
            raise ExportError(f"example_inputs[{i}] is a {type(t).__name__}, expected a tensor")
    return tuple(t.detach().cpu() for t in examples)


def _module_job(
    module: nn.Module,
    example_inputs: Any,
    *,
    init_state: Optional[Callable[[int], Any]],
    input_names: Optional[Sequence[str]],
    output_names: Optional[Sequence[str]],
    dynamic_axes: Optional[dict[str, AxesSpec]],
    precision: str,
    steps: int,
    config: Optional[dict[str, Any]],
    source: dict[str, Any],
) -> _Job:
    if not isinstance(module, nn.Module):
        raise ExportError(f"expected a torch.nn.Module, got {type(module).__name__}")
    examples = _check_examples(example_inputs)
    try:
        reference, converted = prepare(module, len(examples), init_state)  # convert() makes the one copy
    except (FactoryError, StateError) as e:
        raise ExportError(_one_line(e)) from None
    except (ValueError, NotImplementedError) as e:  # ConversionError is a ValueError
        raise ExportError(f"cannot convert the module: {_one_line(e)}") from None
    except Exception as e:  # the user's init_state(1)
        raise ExportError(f"init_state(1) failed: {type(e).__name__}: {_one_line(e)}") from None
    names = list(input_names) if input_names is not None else _data_names(converted, len(examples), reference.stateful)
    if len(names) != len(examples) or len(set(names)) != len(names):
        raise ExportError(f"input_names {names}: expected {len(examples)} unique names, one per example input")
    bad = [n for n in names if n.startswith((PAST_PREFIX, PRESENT_PREFIX))]
    if bad:
        raise ExportError(f"input names {bad} use the reserved state prefixes {PAST_PREFIX!r} / {PRESENT_PREFIX!r}")
    specs, sizes = _input_specs(names, examples, dynamic_axes, precision)
    if reference.stateful and BATCH not in sizes:
        raise ExportError(f"the module has state, but no input has a {BATCH!r} axis; declare it with dynamic_axes")
    batch, length = sizes.get(BATCH, 1), sizes.get(LENGTH, 0)
    try:
        with torch.no_grad():
            outputs, _ = reference.step(examples, None if not reference.stateful else reference.init_state(batch))
        states = find_state_specs(reference, examples, batch, length)
    except StateError as e:
        raise ExportError(_one_line(e)) from None
    except Exception as e:  # the user's forward on the user's examples
        raise ExportError(f"the module failed on the example inputs: {type(e).__name__}: {_one_line(e)}") from None
    out_names = list(output_names) if output_names is not None else (
        ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))])  # fmt: skip
    if len(out_names) != len(outputs) or len(set(out_names) | set(names)) != len(out_names) + len(names):
        raise ExportError(
            f"output_names {out_names}: expected {len(outputs)} unique names, one per output, distinct from the inputs"
        )
    bad = [n for n in out_names if n.startswith((PAST_PREFIX, PRESENT_PREFIX))]
    if bad:
        raise ExportError(f"output names {bad} use the reserved state prefixes {PAST_PREFIX!r} / {PRESENT_PREFIX!r}")
    graph = reference.in_dtype(_DTYPES[precision]).eval()
    trace = _trace_sizes(sizes | ({PAST_LENGTH: length + 1} if any(s.grows for s in states) else {}))
    cast = [t.to(torch_dtype(spec.dtype)) for t, spec in zip(examples, specs)]
    gen = torch.Generator().manual_seed(1)
    trace_inputs = (*(_tile(t, s, trace) for t, s in zip(cast, specs)),
                    *example_state(states, trace.get(BATCH, 1), trace.get(PAST_LENGTH, 0), gen))  # fmt: skip
    first = {spec.name: t.numpy() for spec, t in zip(specs, cast)}

    def run_parity(ref, candidate, record, keep_state):
        return parity.compare_stream(ref, candidate, first, steps, record=record, keep_state=keep_state)

    model_type = f"{type(module).__module__}.{type(module).__qualname__}"
    return _Job(
        interface=STATEFUL, model_type=model_type, config=dict(config or {}), graph=graph, reference=reference,
        inputs=specs, output_names=out_names, states=states, trace_inputs=trace_inputs, parity_run=run_parity,
        source=source, what=f"{type(module).__name__} module",
    )  # fmt: skip


# -- tracing and checks -----------------------------------------------------------------------------


def _dynamic_shapes(job: _Job) -> tuple[Any, ...]:
    """torch.export's dynamic shapes: one Dim per axis name, shared by every tensor that has the axis;
    a single entry, the tuple for ``StatefulModule.forward(*flat)``."""
    specs = [*job.inputs, *job.states]
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


def _trace(job: _Job, target: str, opset: int, path: Path) -> onnx.ModelProto:
    """torch.onnx.export (dynamo) with the rnnx translation table, then ``onnx_ops.finalize``; writes the
    graph to ``path`` with its tensors of at least :data:`EXTERNAL_DATA_MIN_TENSOR_BYTES` in
    :data:`EXTERNAL_DATA_FILE` beside it (straight from the traced program: the weights never become one
    in-memory proto) and returns the graph without those tensors' data. ExportError when the module calls
    no rnnx op."""
    from . import onnx_ops

    names_in = [t.name for t in job.inputs] + [s.input for s in job.states]
    names_out = job.output_names + [s.output for s in job.states]
    with onnx_ops.custom_op_schemas(), _quiet():
        program = torch.onnx.export(
            job.graph, job.trace_inputs, dynamo=True, dynamic_shapes=_dynamic_shapes(job),
            input_names=names_in, output_names=names_out, opset_version=opset,
            custom_translation_table=onnx_ops.translation_table(target), verbose=False,
        )  # fmt: skip
        if not _uses_rnnx_ops(program):
            raise ExportError(
                f"{job.what} has no rnnx op (SRU, SRU++, causal linear attention) and no layer that "
                "rnnx.models.convert knows: nothing for rnnx to export (torch.onnx.export handles such a model)"
            )
        skeleton = onnx_files.save_traced(program.model, path, EXTERNAL_DATA_FILE, EXTERNAL_DATA_MIN_TENSOR_BYTES)
        del program
        model = onnx_ops.finalize(skeleton, target, inplace=True)
    _name_dims(model, [*(t.shape for t in job.inputs), *(s.shape for s in job.states)])
    onnx_files.save_skeleton(model, path)
    return model


def _name_dims(model: onnx.ModelProto, shapes: list[tuple[Any, ...]]) -> None:
    """Gives the graph inputs the symbolic dim names of their specs (batch, length, past_length, ...)."""
    for value, shape in zip(model.graph.input, shapes):
        for dim, want in zip(value.type.tensor_type.shape.dim, shape):
            if isinstance(want, str):
                dim.dim_param = want


def _output_specs(model: onnx.ModelProto, job: _Job) -> list[TensorSpec]:
    """The data outputs as the graph has them: dims (ints or the exporter's symbolic names), dtype."""
    specs = []
    for value in model.graph.output[: len(job.output_names)]:
        tensor_type = value.type.tensor_type
        shape = tuple(d.dim_param if d.dim_param else int(d.dim_value) for d in tensor_type.shape.dim)
        specs.append(TensorSpec(value.name, shape, ONNX_ELEMENT_TYPES.get(tensor_type.elem_type, "float32")))
    return specs


def _save_external(model: onnx.ModelProto, path: Path) -> Optional[Path]:
    """Saves ``model`` at ``path`` with every tensor of at least :data:`EXTERNAL_DATA_MIN_TENSOR_BYTES` in
    :data:`EXTERNAL_DATA_FILE` beside it (written and dropped from ``model`` one tensor at a time); returns
    the data file, None when no tensor was large enough to move."""
    data = path.parent / EXTERNAL_DATA_FILE
    data.unlink(missing_ok=True)
    onnx.save_model(
        model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=EXTERNAL_DATA_FILE,
        size_threshold=EXTERNAL_DATA_MIN_TENSOR_BYTES,
    )  # fmt: skip
    return data if data.is_file() else None


def _quantize_saved(
    model_path: Path, target: str, options: QuantizeOptions, job: _Job
) -> tuple[dict[str, Any], Optional[Path]]:
    """Quantizes the saved model in place (its external data rewritten); returns the ``quantization``
    record, with the parity gates for this job, and the data file (None when no tensor is external)."""
    model = onnx.load(str(model_path))
    try:
        model, record = quantize_model(model, target, options)
    except QuantizeError as e:
        raise ExportError(str(e)) from None
    data_path = _save_external(model, model_path)
    record["gates"] = ["max_rel", *(["mean_kl"] if job.interface == CAUSAL_LM else []), "drift",
                       *(["top1"] if job.trained else [])]  # fmt: skip
    record["scored_calls"] = job.scored_calls
    return record, data_path


def _graph_opset(model: onnx.ModelProto, default: int) -> int:
    """The default domain's opset the saved graph imports (a quantization pass may have raised it)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default)


def _check_graph(path: Path) -> onnx.ModelProto:
    """onnx.checker (full_check) and strict shape inference on the saved file, both by path (so a model
    with external data is never one in-memory proto); ExportError on failure. Returns the model loaded
    without its external data: its graph, for the metadata."""
    inferred = path.with_name(f".{path.name}.inferred")
    try:
        onnx.checker.check_model(str(path), full_check=True)
        onnx.shape_inference.infer_shapes_path(str(path), str(inferred), check_type=True, strict_mode=True,
                                               data_prop=True)  # fmt: skip
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise ExportError(f"exported graph failed ONNX validation: {_one_line(e)}") from None
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


def _move_into(tmp: Path, out_dir: Path, names: list[str]) -> list[Path]:
    """os.replace each file into out_dir, in order (the external data before the model, the metadata
    last); then removes the export files that this export did not write (a stale parity report must not
    describe a new model, nor a stale data file sit beside a single-file one)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    moved = []
    for name in names:
        os.replace(tmp / name, out_dir / name)
        moved.append(out_dir / name)
    for stale in set(EXPORT_FILES) - set(names):
        (out_dir / stale).unlink(missing_ok=True)
    return moved


def _check_out_dir(out_dir: Union[str, os.PathLike]) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir}: exists and is not a directory")
    return out_dir


# -- the one export path ------------------------------------------------------------------------------


def _run(
    job: _Job, out_dir: Path, *, target: str, precision: str, opset: int, check: bool, steps: int,
    polygraphy_steps: int, external_data: Optional[bool], log: Log, quantize: Optional[QuantizeOptions] = None,
) -> ExportResult:  # fmt: skip
    """Traces, validates, checks parity and writes ``job``'s export into ``out_dir`` (atomically).
    ``external_data``: True / False, or None for external data exactly when the graph's tensors pass
    :data:`EXTERNAL_DATA_THRESHOLD`."""
    from ..runtime.backends.ort_backend import OrtBackend
    from ..runtime.backends.torch_backend import TorchBackend

    parameters = sum(p.numel() for p in job.graph.parameters())
    log(f"model: {job.what} ({parameters:,} parameters), {len(job.inputs)} inputs, {len(job.states)} state "
        f"tensors; target {target}, {precision}, opset {opset}")  # fmt: skip
    parent = out_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.resolve().name}.tmp-", dir=parent))
    try:
        axes = sorted({d for spec in [*job.inputs, *job.states] for d in spec.shape if isinstance(d, str)})
        log(f"tracing with torch.export and converting to ONNX (dynamic {', '.join(axes) or 'nothing'})")
        model_path = tmp / MODEL_FILE
        try:
            onnx_model = _trace(job, target, opset, model_path)
        except ExportError:
            raise
        except Exception as e:  # the exporter raises many types; report one line
            raise ExportError(f"ONNX conversion failed: {_with_cause(e)}") from None
        tensor_bytes = onnx_files.tensor_bytes(onnx_model)
        external = external_data if external_data is not None else tensor_bytes > EXTERNAL_DATA_THRESHOLD
        del onnx_model  # from here on the graph is read from the files (one copy at a time)
        gc.collect()
        data_path = tmp / EXTERNAL_DATA_FILE if (tmp / EXTERNAL_DATA_FILE).is_file() else None
        log(f"saved {MODEL_FILE}" + (f" with external data {EXTERNAL_DATA_FILE}" if external else " (one file)")
            + f"; {tensor_bytes / 2**20:,.1f} MiB of tensors")  # fmt: skip
        quantization = None
        if quantize is not None:
            log(f"quantizing weights: {quantize.scheme}, block {quantize.block_size}, head {quantize.head}"
                + (", embedding" if quantize.embedding else ""))  # fmt: skip
            quantization, data_path = _quantize_saved(model_path, target, quantize, job)
            kept = ", ".join(e["node"] for e in quantization["excluded"]) or "none"
            log(f"quantized {len(quantization['quantized'])} weights ({quantization['format']}); kept: {kept}")
        log("checking: onnx.checker full_check, strict shape inference")
        onnx_model = _check_graph(model_path)
        describe = functools.partial(
            build_metadata, interface=job.interface, model_type=job.model_type, config=job.config,
            vocab_size=job.vocab_size, inputs=job.inputs, outputs=_output_specs(onnx_model, job), states=job.states,
            onnx_model=onnx_model, model_path=model_path, target=target, precision=precision,
            opset=_graph_opset(onnx_model, opset), source=job.source,
        )  # fmt: skip

        def finish_metadata(data: Optional[Path]) -> dict[str, Any]:
            metadata = describe(external_data=data)
            metadata["quantization"] = quantization
            metadata["signature"] = model_signature(metadata)
            return metadata

        metadata = finish_metadata(data_path)
        output_dtypes = _graph_output_dtypes(onnx_model)
        del onnx_model
        write_metadata(tmp, metadata)
        written: list[str] = []
        report, polygraphy = None, None
        if check:
            chain = "decode steps" if job.interface == CAUSAL_LM else "chained calls"
            log(f"parity: ONNX Runtime (CPU) vs PyTorch, a first call + {steps} {chain}")
            torch_side = TorchBackend(job.reference, metadata={**metadata, "precision": "fp32"}) if (
                job.interface != CAUSAL_LM) else TorchBackend(job.reference.model, source=job.source)  # fmt: skip
            calls: list[parity.Call] = []
            try:
                report = job.parity_run(
                    torch_side, OrtBackend(tmp), calls, lambda i: i < polygraphy_steps + 1 or i == steps
                )
            except ExportError:
                raise
            except Exception as e:
                raise ExportError(f"parity check could not run: {type(e).__name__}: {_one_line(e)}") from None
            initial = torch_side.state_to_host(torch_side.init_state(torch_side.batch_of(calls[0].inputs)))
            tolerance = TOLERANCES[precision] if report.quality is None else _replay_tolerance(report)
            polygraphy = parity.save_polygraphy_files(
                calls[: polygraphy_steps + 1], tmp, job.states, initial, output_dtypes, tolerance
            )  # fmt: skip
            parity.save_reference(tmp / PARITY_REFERENCE_FILE, calls, f"torch {job.model_type} fp32", job.prompts)
            (tmp / PARITY_FILE).write_text(json.dumps(report.to_dict(), indent=1) + "\n")
            written += [PARITY_FILE, PARITY_REFERENCE_FILE, polygraphy["inputs"], polygraphy["outputs"]]
            if not report.passed:
                raise ExportError(f"parity check failed: {report.verdict()}")
            metadata["parity"] = {k: v for k, v in report.to_dict().items() if k != "steps"}
            metadata["parity"]["polygraphy"] = polygraphy
        if data_path is not None and not external:
            log(f"writing {MODEL_FILE} as one file")
            onnx_files.internalize(model_path, data_path)
            data_path = None
            metadata = {**finish_metadata(None), "parity": metadata["parity"]}
        write_metadata(tmp, metadata)
        written = [*([EXTERNAL_DATA_FILE] if data_path is not None else []), MODEL_FILE, *written]
        log(f"writing {out_dir}")
        files = _move_into(tmp, out_dir, [*written, METADATA_FILE])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    command = None if polygraphy is None else parity.polygraphy_command(out_dir, MODEL_FILE, polygraphy)
    return ExportResult(out_dir, out_dir / MODEL_FILE, files[-1], metadata, files, report, command)


def _replay_tolerance(report: parity.ParityReport) -> float:
    """A quantized export's Polygraphy tolerance: its budget's max_rel, or the worst error the parity run saw
    (its state moves more than its logits) with a margin, whichever is larger."""
    return float(f"{max(report.quality.budget['max_rel'], 1.25 * report.worst_rel):.3g}")


def _check_steps(steps: int, polygraphy_steps: int, external_data: Optional[bool]) -> None:
    if steps < 0 or polygraphy_steps < 0:
        raise ExportError("decode_steps / chained_calls and polygraphy_steps must be >= 0")
    if external_data is not None and not isinstance(external_data, bool):
        raise ExportError(f"external_data must be True, False or None (auto), got {external_data!r}")


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
    external_data: Optional[bool] = None,
    quantize: Union[None, str, QuantizeOptions] = None,
    log: Optional[Log] = None,
) -> ExportResult:
    """Exports an rnnx LM (a module, or a checkpoint directory) to ``out_dir/model.onnx`` + ``rnnx.json``.

    ``target``: ``"tensorrt"`` | ``"onnxruntime"``; ``precision``: ``"fp32"`` | ``"fp16"`` (weights
    and activations; state stays fp32 at the graph boundary); ``opset`` in :data:`SUPPORTED_OPSETS`.
    With ``check``, runs the export through the runtime's ONNX Runtime backend against the fp32 PyTorch
    model (:func:`rnnx.runtime.parity.compare_backends`, a prefill and ``decode_steps`` chained steps),
    fails on a tolerance miss or a diverging greedy token, and writes ``parity.json``, the replayable
    reference ``parity_reference.npz`` and Polygraphy's input / output files (the prefill and
    ``polygraphy_steps`` steps). ``external_data``: write the weights to ``model.onnx.data`` beside
    ``model.onnx`` (ONNX external data; recorded in ``rnnx.json``) when True, never when False (an
    export past 2 GB then fails), by default (None) when the graph's tensors pass
    :data:`EXTERNAL_DATA_THRESHOLD` (1.5 GiB). ``quantize``: ``"int8"`` / ``"int4"`` or a
    :class:`~rnnx.export.quantize.QuantizeOptions` (block size, head, embedding): weight-only quantization
    inside the export (:mod:`rnnx.export.quantize`), recorded in ``rnnx.json``; the parity check then holds
    the export to the scheme's budget (:data:`~rnnx.runtime.artifact.QUANTIZATION_BUDGETS`). Raises
    :class:`ExportError` (or ``CheckpointError``) and leaves ``out_dir`` untouched on any failure. The given
    module is not modified.
    """
    validate_options(target, precision, opset)
    _check_steps(decode_steps, polygraphy_steps, external_data)
    options = _quantize_options(quantize, target)
    out_dir = _check_out_dir(out_dir)
    job = _lm_job(model_or_checkpoint, precision, decode_steps)
    try:
        return _run(job, out_dir, target=target, precision=precision, opset=opset, check=check, steps=decode_steps,
                    polygraphy_steps=polygraphy_steps, external_data=external_data,
                    log=log or (lambda message: None), quantize=options)  # fmt: skip
    finally:
        job.restore()


def export(
    module: nn.Module,
    example_inputs: Union[Tensor, Sequence[Tensor]],
    out_dir: Union[str, os.PathLike],
    *,
    init_state: Optional[Callable[[int], Any]] = None,
    input_names: Optional[Sequence[str]] = None,
    output_names: Optional[Sequence[str]] = None,
    dynamic_axes: Optional[dict[str, AxesSpec]] = None,
    target: str = "tensorrt",
    precision: str = "fp32",
    opset: int = DEFAULT_OPSET,
    check: bool = True,
    chained_calls: int = DEFAULT_CHAINED_CALLS,
    polygraphy_steps: int = parity.POLYGRAPHY_STEPS,
    config: Optional[dict[str, Any]] = None,
    source: Optional[dict[str, Any]] = None,
    external_data: Optional[bool] = None,
    quantize: Union[None, str, QuantizeOptions] = None,
    log: Optional[Log] = None,
) -> ExportResult:
    """Exports any module with SRU / SRU++ / causal linear attention inside to ``out_dir``.

    ``module.forward(*inputs, state) -> (*outputs, new_state)``, ``state`` any nesting of tuples / lists
    / dicts / dataclasses of tensors; or ``forward(*inputs) -> output(s)`` for a stateless module (a
    bidirectional tagger). Layers of the published ``sru`` and ``fast-transformers`` packages are first
    replaced by their rnnx twins (:func:`rnnx.models.convert`). ``example_inputs``: the data inputs
    (the state excluded), at least 2 rows where there is a batch.

    ``init_state(batch) -> state`` builds a fresh state (default: the module's own ``init_state``
    method; neither: stateless). Every state tensor needs one axis that follows the batch size, and
    may have one that grows by the call's length (a KV cache, ``past_length``).

    ``input_names`` default to the forward's parameter names, ``output_names`` to ``output`` /
    ``output_<i>``. ``dynamic_axes`` ``{input name: {axis: axis name}}`` (or a list of names per axis,
    None for a fixed axis) declares the dynamic axes; by default axis 0 of every input is ``batch`` and
    axis 1 ``length``. Inputs sharing an axis name must agree in size. Floating inputs take the export
    precision.

    Everything else is :func:`export_model`'s: the graph has the state as ``past_key_values.<name>`` /
    ``present.<name>``; ``check`` compares ONNX Runtime with the fp32 PyTorch module over one call on
    the example inputs and ``chained_calls`` short calls continuing the state
    (:func:`rnnx.runtime.parity.compare_stream`) and writes the parity and Polygraphy files;
    ``config`` is stored in ``rnnx.json``; ``source`` (``factory``, ``weights``) records how to rebuild
    the module for ``rnnx.runtime.load(..., backend="torch")``; ``external_data`` (None: when the weights
    need it) as for :func:`export_model`. Raises :class:`ExportError` with one
    line and leaves ``out_dir`` untouched on any failure; the given module is not modified.
    """
    validate_options(target, precision, opset)
    _check_steps(chained_calls, polygraphy_steps, external_data)
    options = _quantize_options(quantize, target)
    out_dir = _check_out_dir(out_dir)
    recorded = {"checkpoint": None, "weights_sha256": None, "factory": None, "factory_root": None, "weights": None,
                **(source or {})}  # fmt: skip
    if recorded["weights"]:
        recorded["weights"] = str(Path(recorded["weights"]).resolve())
    for what, value in (("config", config), ("source", recorded)):
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ExportError(f"{what} must be JSON-serialisable (it is stored in rnnx.json): {e}") from None
    job = _module_job(
        module, example_inputs, init_state=init_state, input_names=input_names, output_names=output_names,
        dynamic_axes=dynamic_axes, precision=precision, steps=chained_calls, config=config, source=recorded,
    )  # fmt: skip
    return _run(job, out_dir, target=target, precision=precision, opset=opset, check=check, steps=chained_calls,
                polygraphy_steps=polygraphy_steps, external_data=external_data,
                log=log or (lambda message: None), quantize=options)  # fmt: skip
