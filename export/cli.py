"""``export-model``: export an rnnx checkpoint (by default the shipped demo), or a user's own model, to ONNX.

::

    export-model [CHECKPOINT] [--out DIR] [--target tensorrt|onnxruntime] [--precision fp32|fp16]
    export-model --module package.module:function | path/to/file.py:function [--weights FILE] [--out DIR] ...
                 [--opset N] [--check/--no-check] [--steps N]
                 [--quantize int8|int4 [--block-size N] [--head fp|int8|int4] [--quantize-embedding]]
                 [--engine [--max-batch N] [--max-length N] [--max-context N] [--cache-dir DIR]]
                 [--triton-repo DIR [--triton-variant python|onnxruntime|tensorrt ...] [--triton-max-streams N]]
                 [--genai [--native-ops] [--pad-token-id N] [--eos-token-id N]]

``--module`` exports a user's model without Python glue: the factory function returns ``(module,
example_inputs)`` or a dict of :func:`rnnx.export.export`'s keyword arguments (:mod:`rnnx.models.factory`);
``--weights`` is a ``state_dict`` file loaded into that module. The export records both, so
``rnnx.runtime.load(DIR, backend="torch")`` and ``rnnx-parity --reference torch`` rebuild the module.

Prints each step, the files written, the parity table and the ``polygraphy run`` command that
re-checks the saved inputs/outputs. Any bad input (missing or corrupt checkpoint, unknown model
type, unsupported target / precision / opset, a failed check) is one ``Error: ...`` line, a
non-zero exit status, and an output directory left as it was.

``--quantize`` quantizes the weights (weight-only int8 / int4, :mod:`rnnx.export.quantize`) inside the
export, before its checks and hashes; the parity check then holds it to the scheme's budget
(docs/export.md), and ``rnnx.json`` records what was quantized.

``--engine`` also builds (or reuses from the engine cache) a TensorRT engine for the export
(:func:`rnnx.runtime.tensorrt.build_engine`: decode + prefill profiles for the given limits). Whether
TensorRT is installed, the target is ``tensorrt`` and the limits are valid is checked *before*
exporting, so nothing is done in vain; a failed engine build after a successful export is an
``Error:`` line and a non-zero exit, with the ONNX export left in place.

``--genai`` also writes the onnxruntime-genai variant, ``genai.onnx`` + ``genai_config.json``, beside
``model.onnx`` (:mod:`rnnx.export.genai`, docs/genai.md): ``onnxruntime_genai.Model(DIR)`` then loads the export.

``--triton-repo DIR`` also writes Triton model repository entries for the export
(:func:`rnnx.runtime.serving.triton.write_repository`; docs/serving.md): by default the ``python`` variant (rnnx's
state pool in Triton's Python backend) and the ``onnxruntime`` variant (implicit state), and the
``tensorrt`` variant (the engine and the plugin library) with ``--engine``.
"""

from __future__ import annotations

import importlib.util
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import click

from ..runtime.contract.artifact import DEFAULT_OPSET, QUANTIZATION_HEADS, QUANTIZATION_SCHEMES
from ..runtime.contract.targets import PRECISIONS, TARGETS
from ..runtime.parity import DEFAULT_DECODE_STEPS
from ..runtime.serving.triton.config import VARIANTS as TRITON_VARIANTS
from ..runtime.serving.triton.step import TritonStep, TritonStepError
from ..runtime.tensorrt.engine_step import EngineStep, EngineStepError
from .errors import one_line
from .progress import Progress

#: Packages the exporter needs beyond the runtime (the ``export`` extra).
EXPORT_REQUIREMENTS = ("torch", "onnx", "onnxscript")

#: Where the demo goes without --out: ./rnnx-export/<checkpoint name>.
DEFAULT_OUT_ROOT = Path("rnnx-export")


def _options(*decorators: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[..., Any]:
    """One group of options, applied in the order given (their order in ``--help``)."""

    def apply(function: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


SOURCE_OPTIONS = _options(
    click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
                 help="Output directory (default: ./rnnx-export/<checkpoint name>)."),
    click.option("--module", "factory", default=None, metavar="PACKAGE.MODULE:FUNCTION",
                 help="Export a model of your own: a function (or path/to/file.py:function) returning "
                 "(module, example_inputs)."),
    click.option("--weights", type=click.Path(path_type=Path), default=None,
                 help="With --module: a state_dict file (torch.save) loaded into the module."),
)  # fmt: skip
GRAPH_OPTIONS = _options(
    click.option("--target", default=TARGETS[0], show_default=True, help=f"Graph flavour: {' | '.join(TARGETS)}."),
    click.option("--precision", default=PRECISIONS[0], show_default=True,
                 help=f"Weights and activations: {' | '.join(PRECISIONS)} (state is always fp32)."),
    click.option("--opset", default=DEFAULT_OPSET, show_default=True, type=int, help="ONNX opset (18-21)."),
    click.option("--check/--no-check", default=True, show_default=True,
                 help="Parity against PyTorch in ONNX Runtime, and Polygraphy files."),
    click.option("--external-data/--no-external-data", default=None,
                 help="Weights in model.onnx.data beside model.onnx (ONNX external data). Default: when the weights "
                 "pass 1.5 GiB (a single ONNX file cannot exceed 2 GB)."),
    click.option("--steps", default=DEFAULT_DECODE_STEPS, show_default=True, type=click.IntRange(0),
                 help="Chained decode steps (chained calls with --module) of the parity check."),
)  # fmt: skip
QUANTIZE_OPTIONS = _options(
    click.option("--quantize", type=click.Choice(list(QUANTIZATION_SCHEMES)), default=None,
                 help="Weight-only quantization of the MatMul weights (MatMulNBits on onnxruntime, DequantizeLinear "
                 "on tensorrt)."),
    click.option("--block-size", type=int, default=None,
                 help="With --quantize: weights per scale block (default: int4 32, int8 128 on onnxruntime; 64 on "
                 "tensorrt)."),
    click.option("--head", type=click.Choice(list(QUANTIZATION_HEADS)), default=None,
                 help="With --quantize: the output head's weights (default: fp)."),
    click.option("--quantize-embedding", is_flag=True, default=False,
                 help="With --quantize int4 (onnxruntime): the embedding too."),
)  # fmt: skip
ENGINE_OPTIONS = _options(
    click.option("--engine", is_flag=True, default=False,
                 help="Also build (or reuse from the cache) a TensorRT engine; needs TensorRT and a GPU."),
    click.option("--max-batch", default=8, show_default=True, type=int, help="With --engine: largest batch."),
    click.option("--max-length", default=512, show_default=True, type=int,
                 help="With --engine: most tokens per call (prefill profile)."),
    click.option("--max-context", default=None, type=int,
                 help="With --engine: most KV-cache positions (default: --max-length)."),
    click.option("--cache-dir", type=click.Path(path_type=Path), default=None,
                 help="With --engine: engine cache (default: $RNNX_ENGINE_CACHE or ~/.cache/rnnx/engines)."),
)  # fmt: skip
TRITON_OPTIONS = _options(
    click.option("--triton-repo", type=click.Path(path_type=Path), default=None,
                 help="Also write Triton model repository entries for the export into DIR (see docs/serving.md)."),
    click.option("--triton-variant", "triton_variants", multiple=True, type=click.Choice(TRITON_VARIANTS),
                 help="With --triton-repo (repeatable); default: python (language models), onnxruntime, tensorrt "
                 "(with --engine)."),
    click.option("--triton-max-streams", default=64, show_default=True, type=int,
                 help="With --triton-repo: streams per instance."),
)  # fmt: skip
GENAI_OPTIONS = _options(
    click.option("--genai", is_flag=True, default=False,
                 help="Also write genai.onnx + genai_config.json for onnxruntime-genai (docs/genai.md)."),
    click.option("--native-ops", is_flag=True, default=False,
                 help="With --genai: copy rnnx's ONNX Runtime op library into DIR and name it in genai_config.json."),
    click.option("--pad-token-id", type=click.IntRange(0), default=None,
                 help="With --genai: the pad token (default: the checkpoint task's pad token, else 0)."),
    click.option("--eos-token-id", type=click.IntRange(0), default=None,
                 help="With --genai: the token that ends a row (default: the pad token)."),
)  # fmt: skip


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("checkpoint", required=False, type=click.Path(path_type=Path))
@SOURCE_OPTIONS
@GRAPH_OPTIONS
@QUANTIZE_OPTIONS
@ENGINE_OPTIONS
@TRITON_OPTIONS
@GENAI_OPTIONS
def main(checkpoint: Optional[Path], **options: Any) -> None:
    """Export CHECKPOINT (default: the shipped demo model), or --module, to DIR/model.onnx + DIR/rnnx.json."""
    _require_export_extra()
    request = ExportRequest.from_options(checkpoint, options)
    engine_step, triton_step = _engine_step(request, options), _triton_step(options)
    result = request.run()
    _report(result)
    engine = _run_engine_step(engine_step, result.out_dir) if engine_step is not None else None
    if triton_step is not None:
        _run_triton_step(triton_step, result.out_dir, engine, engine_step)


@dataclass(frozen=True)
class ExportRequest:
    """What ``export-model`` exports: a checkpoint (the demo when none is given) or a ``--module`` factory with
    its ``--weights``, into ``out_dir`` (None: under :data:`DEFAULT_OUT_ROOT`), and how (the graph options
    and the resolved quantization)."""

    checkpoint: Optional[Path]
    factory: Optional[str]
    weights: Optional[Path]
    out_dir: Optional[Path]
    target: str
    precision: str
    opset: int
    check: bool
    steps: int
    external_data: Optional[bool]
    quantize: Any
    genai: Any = None

    @classmethod
    def from_options(cls, checkpoint: Optional[Path], options: dict[str, Any]) -> ExportRequest:
        """The request of the command line's options (the source, graph and quantization groups), checked before
        anything is exported: click's usage error or one ``Error:`` line for a bad combination or value."""
        from .exporter import ExportError, validate_options
        from .quantize import QuantizeError, QuantizeOptions, resolve_options

        scheme, block_size, head, embedding = (options[k] for k in ("quantize", "block_size", "head",
                                                                    "quantize_embedding"))  # fmt: skip
        if scheme is None and (block_size is not None or head is not None or embedding):
            raise click.UsageError("--block-size, --head and --quantize-embedding need --quantize int8|int4")
        target, precision, opset = options["target"], options["precision"], options["opset"]
        quantize = None
        try:
            validate_options(target, precision, opset)
            if scheme is not None:
                quantize = resolve_options(QuantizeOptions(scheme, block_size, head or "fp", embedding), target)
        except (ExportError, QuantizeError) as e:
            raise click.ClickException(one_line(e)) from None
        from .genai import GenaiOptions

        native, pad, eos = options["native_ops"], options["pad_token_id"], options["eos_token_id"]
        if not options["genai"] and (native or pad is not None or eos is not None):
            raise click.UsageError("--native-ops, --pad-token-id and --eos-token-id need --genai")
        genai = GenaiOptions(native, pad, eos) if options["genai"] else None
        factory, weights = options["factory"], options["weights"]
        if factory is None and weights is not None:
            raise click.UsageError("--weights needs --module (a checkpoint directory holds its own weights)")
        if factory is not None and checkpoint is not None:
            raise click.UsageError("give either CHECKPOINT or --module, not both")
        return cls(checkpoint, factory, weights, options["out_dir"], target, precision, opset, options["check"],
                   options["steps"], options["external_data"], quantize, genai)  # fmt: skip

    def run(self) -> Any:
        """The export (:func:`rnnx.export.export_model`, or :func:`rnnx.export.export` of the factory's module),
        with its steps printed; one ``Error:`` line for a failure."""
        if self.factory is not None:
            return _export_factory(self.factory, self.weights, self.out_dir, self.target, self.precision,
                                   self.opset, self.check, self.steps, self.external_data, self.quantize,
                                   self.genai)  # fmt: skip
        from ..models.checkpoint import DEMO_CHECKPOINTS, CheckpointError, demo_checkpoint_path
        from .exporter import ExportError, export_model

        checkpoint = self.checkpoint
        if checkpoint is None:
            checkpoint = demo_checkpoint_path(DEMO_CHECKPOINTS[0])
            click.echo(f"no checkpoint given: exporting the shipped demo {DEMO_CHECKPOINTS[0]!r}")
        out_dir = self.out_dir if self.out_dir is not None else DEFAULT_OUT_ROOT / Path(checkpoint).resolve().name
        click.echo(f"checkpoint: {checkpoint}")
        click.echo(f"output:     {out_dir}")
        try:
            with Progress() as log:
                return export_model(
                    checkpoint, out_dir, target=self.target, precision=self.precision, opset=self.opset,
                    check=self.check, decode_steps=self.steps, external_data=self.external_data,
                    quantize=self.quantize, genai=self.genai, log=log,
                )  # fmt: skip
        except (CheckpointError, ExportError) as e:
            raise click.ClickException(one_line(e)) from None


def _export_factory(
    factory: str, weights: Optional[Path], out_dir: Optional[Path], target: str, precision: str, opset: int,
    check: bool, steps: int, external_data: Optional[bool] = None, quantize: Any = None, genai: Any = None,
) -> Any:  # fmt: skip
    """``export(...)`` of the module the factory builds; the factory and weights are recorded as the
    export's source (absolute paths; a ``package.module`` factory with the folder it was imported from, so
    that ``rnnx-parity`` finds it from any directory). ``external_data``: the CLI flag (None: not given, auto)."""
    from ..models.factory import FactoryError, factory_root, load_factory
    from .exporter import ExportError, export

    target_part, _, function = factory.rpartition(":")
    recorded = f"{Path(target_part).resolve()}:{function}" if target_part.endswith(".py") else factory
    out_dir = out_dir or DEFAULT_OUT_ROOT / function
    click.echo(f"module:  {factory}" + (f" (weights {weights})" if weights else ""))
    click.echo(f"output:  {out_dir}")
    try:
        spec = load_factory(factory, weights)
        source = {"factory": recorded, "factory_root": factory_root(factory),
                  "weights": None if weights is None else str(Path(weights).resolve())}  # fmt: skip
        if weights is not None:
            from ..runtime.contract.artifact import sha256_file

            source["weights_sha256"] = sha256_file(weights)
        with Progress() as log:
            return export(
                spec.module, spec.example_inputs, out_dir, **spec.options, target=target, precision=precision,
                opset=opset, check=check, chained_calls=steps, source=source, external_data=external_data,
                quantize=quantize, genai=genai, log=log,
            )  # fmt: skip
    except (FactoryError, ExportError) as e:
        raise click.ClickException(one_line(e)) from None
    except Exception as e:  # the user's factory: one line, whatever it raised
        raise click.ClickException(f"factory {factory!r} failed: {type(e).__name__}: {one_line(e)}") from None


def _report(result: Any) -> None:
    """The files written, the parity table and the Polygraphy command."""
    click.echo("files:")
    for path in result.files:
        click.echo(f"  {path} ({path.stat().st_size:,} bytes)")
    if result.parity is not None:
        click.echo("parity (ONNX Runtime CPU vs PyTorch):")
        click.echo(result.parity.table())
    if result.polygraphy_command is not None:
        click.echo("re-check with stock Polygraphy:")
        click.echo(f"  {shlex.join(result.polygraphy_command)}")


def _engine_step(request: ExportRequest, options: dict[str, Any]) -> Optional[EngineStep]:
    """The ``--engine`` step (:class:`rnnx.runtime.tensorrt.engine_step.EngineStep`), checked before exporting."""
    if not options["engine"]:
        return None
    try:
        return EngineStep.plan(request.target, options["max_batch"], options["max_length"], options["max_context"],
                               options["cache_dir"])  # fmt: skip
    except EngineStepError as e:
        raise click.ClickException(one_line(e)) from None


def _run_engine_step(step: EngineStep, out_dir: Path) -> Path:
    click.echo("TensorRT engine:")
    try:
        with Progress() as log:
            path = step.run(out_dir, log=log)
    except EngineStepError as e:
        raise click.ClickException(one_line(e)) from None
    click.echo(f"  {path} ({path.stat().st_size:,} bytes)")
    return path


def _triton_step(options: dict[str, Any]) -> Optional[TritonStep]:
    """The ``--triton-repo`` step (:class:`rnnx.runtime.serving.triton.step.TritonStep`), checked before exporting."""
    try:
        return TritonStep.plan(options["triton_repo"], options["triton_variants"], options["engine"],
                               options["triton_max_streams"])  # fmt: skip
    except TritonStepError as e:
        raise (click.UsageError if e.usage else click.ClickException)(one_line(e)) from None


def _run_triton_step(
    step: TritonStep, out_dir: Path, engine: Optional[Path], engine_step: Optional[EngineStep]
) -> None:
    click.echo(f"Triton model repository {step.repo}:")
    max_batch = engine_step.limits.max_batch if engine_step is not None else None
    try:
        for variant, model_dir in step.run(out_dir, engine, max_batch):
            click.echo(f"  {variant.name}: {model_dir}")
    except TritonStepError as e:
        raise click.ClickException(one_line(e)) from None


def _require_export_extra() -> None:
    """One-line error when the exporter's packages are missing (a runtime-only install)."""
    missing = [name for name in EXPORT_REQUIREMENTS if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"export-model needs {', '.join(missing)} (not installed): pip install 'rnnx[export]'; "
            "this install has the runtime only"
        )


if __name__ == "__main__":
    main()
