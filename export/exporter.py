"""The exporter's public entry points: a stateful module -> one ONNX graph + ``rnnx.json`` (the artifact
contract, :mod:`rnnx.runtime.contract.artifact`).

One path for every model. :func:`export` takes any module whose forward is ``(*inputs, state) -> (*outputs,
new_state)`` (or a stateless one) plus example inputs; :func:`export_model` is that path for an rnnx language
model or checkpoint (inputs ``input_ids`` / ``attention_mask``, output ``logits``, greedy-decode parity). Both
check their options into an :class:`~rnnx.export.stages.ExportOptions` (:func:`export_options`: the target and
precision as their records), make an :class:`~rnnx.export.plan.ExportPlan` of the module
(:mod:`rnnx.export.plan`) and carry it through the stages of :mod:`rnnx.export.stages`: trace, save (external
data past :data:`~rnnx.export.stages.EXTERNAL_DATA_THRESHOLD`), quantize, check, describe, parity, publish,
atomically (a failure leaves ``out_dir`` as it was).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

from torch import Tensor, nn

from ..models.lm import RecurrentLM
from ..runtime import parity
from ..runtime.contract import targets
from ..runtime.contract.artifact import DEFAULT_OPSET, SUPPORTED_OPSETS
from .errors import ExportError
from .genai import GenaiOptions, genai_step, resolve_genai
from .plan import DEFAULT_CHAINED_CALLS, AxesSpec, ExportPlan, lm_plan, module_plan
from .quantize import QuantizeError, QuantizeOptions, resolve_options
from .stages import ExportOptions, ExportResult, Log, run_export


def export_options(
    target: str, precision: str, opset: int, *, check: bool = True, steps: int = 0, polygraphy_steps: int = 0,
    external_data: Optional[bool] = None, quantize: Union[None, str, QuantizeOptions] = None,
) -> ExportOptions:  # fmt: skip
    """The :class:`~rnnx.export.stages.ExportOptions` of these arguments, the target and precision resolved to their
    records; ExportError naming the supported values for a bad one."""
    try:
        target_record, precision_record = targets.target(target), targets.precision(precision)
    except ValueError as e:
        raise ExportError(str(e)) from None
    if isinstance(opset, bool) or not isinstance(opset, int) or opset not in SUPPORTED_OPSETS:
        raise ExportError(f"unsupported opset {opset!r}; supported: {SUPPORTED_OPSETS[0]}-{SUPPORTED_OPSETS[-1]}")
    if steps < 0 or polygraphy_steps < 0:
        raise ExportError("decode_steps / chained_calls and polygraphy_steps must be >= 0")
    if external_data is not None and not isinstance(external_data, bool):
        raise ExportError(f"external_data must be True, False or None (auto), got {external_data!r}")
    try:
        resolved = None if quantize is None else resolve_options(quantize, target_record)
    except QuantizeError as e:
        raise ExportError(str(e)) from None
    return ExportOptions(
        target_record, precision_record, opset, check, steps, polygraphy_steps, external_data, resolved
    )


def validate_options(target: str, precision: str, opset: int) -> None:
    """Raises :class:`ExportError` naming the supported values for an unknown target, precision or opset."""
    export_options(target, precision, opset)


def _checked_destination(out_dir: Union[str, os.PathLike], genai: Any) -> tuple[Path, Optional[GenaiOptions]]:
    """Both entry points' last checks before any work: ``genai`` (:func:`~rnnx.export.genai.resolve_genai`),
    then ``out_dir`` (absent, or a directory)."""
    genai_options = resolve_genai(genai)
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir}: exists and is not a directory")
    return out_dir, genai_options


def _run(
    plan: ExportPlan, out_dir: Path, options: ExportOptions, genai_options: Optional[GenaiOptions], log: Log
) -> ExportResult:
    """:func:`~rnnx.export.stages.run_export` of ``plan``, with the onnxruntime-genai files when asked for."""
    extra = None if genai_options is None else genai_step(plan, options, genai_options)
    return run_export(plan, out_dir, options, log, extra)


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
    genai: Union[None, bool, GenaiOptions] = None,
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
    the export to the scheme's budget (:data:`~rnnx.runtime.contract.artifact.QUANTIZATION_BUDGETS`). Raises
    ``genai``: True or a :class:`~rnnx.export.genai.GenaiOptions` also writes the onnxruntime-genai variant,
    ``genai.onnx`` + ``genai_config.json``, beside ``model.onnx`` (:mod:`rnnx.export.genai`, docs/genai.md). Raises
    :class:`ExportError` (or ``CheckpointError``) and leaves ``out_dir`` untouched on any failure. The given
    module is not modified.
    """
    options = export_options(
        target, precision, opset, check=check, steps=decode_steps, polygraphy_steps=polygraphy_steps,
        external_data=external_data, quantize=quantize,
    )  # fmt: skip
    out_dir, genai_options = _checked_destination(out_dir, genai)
    log = log or (lambda message: None)
    plan = lm_plan(model_or_checkpoint, options.precision, decode_steps, log)
    try:
        return _run(plan, out_dir, options, genai_options, log)
    finally:
        plan.restore()


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
    genai: Union[None, bool, GenaiOptions] = None,
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
    need it) and ``genai`` (a language model: data inputs token ids (batch, length) int64 and optionally a
    (batch, length) mask, 1 = token; first output the logits) as for :func:`export_model`. Raises
    :class:`ExportError` with one line and leaves ``out_dir`` untouched on any failure; the given module is not
    modified.
    """
    options = export_options(
        target, precision, opset, check=check, steps=chained_calls, polygraphy_steps=polygraphy_steps,
        external_data=external_data, quantize=quantize,
    )  # fmt: skip
    out_dir, genai_options = _checked_destination(out_dir, genai)
    recorded = {"checkpoint": None, "weights_sha256": None, "factory": None, "factory_root": None, "weights": None,
                **(source or {})}  # fmt: skip
    if recorded["weights"]:
        recorded["weights"] = str(Path(recorded["weights"]).resolve())
    for what, value in (("config", config), ("source", recorded)):
        try:
            json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ExportError(f"{what} must be JSON-serialisable (it is stored in rnnx.json): {e}") from None
    plan = module_plan(
        module, example_inputs, init_state=init_state, input_names=input_names, output_names=output_names,
        dynamic_axes=dynamic_axes, precision=options.precision, steps=chained_calls, config=config, source=recorded,
    )  # fmt: skip
    return _run(plan, out_dir, options, genai_options, log or (lambda message: None))
