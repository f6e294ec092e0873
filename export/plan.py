"""What an export is about: an :class:`ExportPlan`, everything that depends on what is exported.

:func:`lm_plan` makes one for an rnnx language model or checkpoint (inputs ``input_ids`` / ``attention_mask``,
output ``logits``, greedy-decode parity), :func:`module_plan` for any module with rnnx layers (its inputs,
outputs and state found by probing it). :mod:`rnnx.export.stages` carries a plan out.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch
from torch import Tensor, nn

from ..models.factory import FactoryError, prepare
from ..models.from_pretrained import load_model
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
from ..runtime.contract.artifact import (
    BATCH,
    CAUSAL_LM,
    LENGTH,
    LOGITS,
    PAST_LENGTH,
    PAST_PREFIX,
    PRESENT_PREFIX,
    STATEFUL,
    StateSpec,
    TensorSpec,
    lm_io,
)  # fmt: skip
from ..runtime.contract.targets import Precision
from .errors import ExportError, one_line
from .progress import tracker
from .text import CheckpointText, checkpoint_text

#: Chained calls after the first one in a stateful export's parity check.
DEFAULT_CHAINED_CALLS = 32


Feeds = dict[str, np.ndarray]


#: ``(reference backend, candidate backend, record, keep_state) -> report``: one export's parity run.
#: ``(reference, candidate, record, keep_state, on_step) -> report``: the plan's parity run (``on_step`` is called
#: after each compared call, for the progress bar).
ParityRun = Callable[[Any, Any, list[parity.Call], Callable[[int], bool], Any], parity.ParityReport]


@dataclass
class ExportPlan:
    """Everything about one export that depends on what is exported; :func:`run_export` does the rest.

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
    #: The task a checkpoint was trained on (its record: ``pad_token``, ...), None for others.
    task: Optional[dict[str, Any]] = None
    #: Puts back what the plan changed on the caller's module (its train / eval modes).
    restore: Callable[[], None] = lambda: None
    #: The tokenizer and chat template a transformers checkpoint carries into the export, or None.
    text: Optional[CheckpointText] = None


def _resolve(
    source: Union[RecurrentLM, str, os.PathLike], log: Callable[[str], None]
) -> tuple[RecurrentLM, dict[str, Any], Optional[str]]:
    """-> (model, checkpoint info ({} for a module), absolute checkpoint path or None); a checkpoint's load is a stage
    of ``log``, with a bar over a transformers checkpoint's tensors.

    CheckpointError (a ValueError) propagates for a bad checkpoint.
    """
    if isinstance(source, RecurrentLM):
        return source, {}, None
    if isinstance(source, (str, os.PathLike)):
        log(f"loading {source}")
        model, info = load_model(source, loaded=tracker(log, "tensors"))
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


def lm_plan(
    model_or_checkpoint: Union[RecurrentLM, str, os.PathLike],
    precision: Precision,
    steps: int,
    log: Callable[[str], None] = lambda message: None,
) -> ExportPlan:
    source, info, checkpoint = _resolve(model_or_checkpoint, log)
    try:
        model_type = model_type_of(source)
    except KeyError as e:
        raise ExportError(str(e.args[0])) from None
    # No whole-model copy the export does not need: an fp32 CPU model is traced and checked as it is (in
    # eval mode for the export; ExportPlan.restore puts its modes back); fp16 traces one half-size copy.
    base = source if _is_fp32_cpu(source) else copy.deepcopy(source).cpu().float()
    restore = _eval_modes(base)
    reference = StatefulLM(base)
    model = base if precision.reference else copy.deepcopy(base).to(torch_dtype(precision.dtype))
    graph = StatefulLM(model)
    batch, length, past = 2, 3, 4  # distinct and > 1: torch.export specialises none of them
    data = lm_example_data(model, batch, length)
    states = find_state_specs(graph, data, batch, length)
    gen = torch.Generator().manual_seed(1)
    inputs, _ = lm_io(model.vocab_size, states, "float32")
    prompts = task_prompts(info.get("task"), model.vocab_size)

    def run_parity(ref, candidate, record, keep_state, on_step=None):
        return parity.compare_backends(ref, candidate, prompts, steps, record=record, keep_state=keep_state,
                                       on_step=on_step)  # fmt: skip

    text = checkpoint_text(Path(checkpoint), model.vocab_size) if info.get("format") == "transformers" else None
    return ExportPlan(
        interface=CAUSAL_LM, model_type=model_type, config=dict(source.config), graph=graph, reference=reference,
        inputs=[t for t in inputs if not t.name.startswith(PAST_PREFIX)], output_names=[LOGITS], states=states,
        trace_inputs=(*data, *example_state(states, batch, past, gen)), parity_run=run_parity,
        source={"checkpoint": checkpoint, "weights_sha256": info.get("weights_sha256") or None},
        text=text,
        vocab_size=model.vocab_size, prompts=prompts, what=f"{model_type} language model", restore=restore,
        trained=bool(info.get("task")), scored_calls=task_scored_calls(info.get("task"), prompts),
        task=info.get("task") or None,
    )  # fmt: skip


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
    names: list[str], examples: tuple[Tensor, ...], dynamic_axes: Optional[dict[str, AxesSpec]], precision: Precision
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
            dtype = torch_dtype(precision.dtype)
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


def module_plan(
    module: nn.Module,
    example_inputs: Any,
    *,
    init_state: Optional[Callable[[int], Any]],
    input_names: Optional[Sequence[str]],
    output_names: Optional[Sequence[str]],
    dynamic_axes: Optional[dict[str, AxesSpec]],
    precision: Precision,
    steps: int,
    config: Optional[dict[str, Any]],
    source: dict[str, Any],
) -> ExportPlan:
    if not isinstance(module, nn.Module):
        raise ExportError(f"expected a torch.nn.Module, got {type(module).__name__}")
    examples = _check_examples(example_inputs)
    try:
        reference, converted = prepare(module, len(examples), init_state)  # convert() makes the one copy
    except (FactoryError, StateError) as e:
        raise ExportError(one_line(e)) from None
    except (ValueError, NotImplementedError) as e:  # ConversionError is a ValueError
        raise ExportError(f"cannot convert the module: {one_line(e)}") from None
    except Exception as e:  # the user's init_state(1)
        raise ExportError(f"init_state(1) failed: {type(e).__name__}: {one_line(e)}") from None
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
        raise ExportError(one_line(e)) from None
    except Exception as e:  # the user's forward on the user's examples
        raise ExportError(f"the module failed on the example inputs: {type(e).__name__}: {one_line(e)}") from None
    out_names = list(output_names) if output_names is not None else (
        ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))])  # fmt: skip
    if len(out_names) != len(outputs) or len(set(out_names) | set(names)) != len(out_names) + len(names):
        raise ExportError(
            f"output_names {out_names}: expected {len(outputs)} unique names, one per output, distinct from the inputs"
        )
    bad = [n for n in out_names if n.startswith((PAST_PREFIX, PRESENT_PREFIX))]
    if bad:
        raise ExportError(f"output names {bad} use the reserved state prefixes {PAST_PREFIX!r} / {PRESENT_PREFIX!r}")
    graph = reference.in_dtype(torch_dtype(precision.dtype)).eval()
    trace = _trace_sizes(sizes | ({PAST_LENGTH: length + 1} if any(s.grows for s in states) else {}))
    cast = [t.to(torch_dtype(spec.dtype)) for t, spec in zip(examples, specs)]
    gen = torch.Generator().manual_seed(1)
    trace_inputs = (*(_tile(t, s, trace) for t, s in zip(cast, specs)),
                    *example_state(states, trace.get(BATCH, 1), trace.get(PAST_LENGTH, 0), gen))  # fmt: skip
    first = {spec.name: t.numpy() for spec, t in zip(specs, cast)}

    def run_parity(ref, candidate, record, keep_state, on_step=None):
        return parity.compare_stream(ref, candidate, first, steps, record=record, keep_state=keep_state,
                                     on_step=on_step)  # fmt: skip

    model_type = f"{type(module).__module__}.{type(module).__qualname__}"
    return ExportPlan(
        interface=STATEFUL, model_type=model_type, config=dict(config or {}), graph=graph, reference=reference,
        inputs=specs, output_names=out_names, states=states, trace_inputs=trace_inputs, parity_run=run_parity,
        source=source, what=f"{type(module).__name__} module",
    )  # fmt: skip
