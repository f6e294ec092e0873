"""``export-model``: export an rnnx checkpoint (by default the shipped demo), or a user's own model, to ONNX.

::

    export-model [CHECKPOINT] [--out DIR] [--target tensorrt|onnxruntime] [--precision fp32|fp16]
    export-model --module package.module:function | path/to/file.py:function [--weights FILE] [--out DIR] ...
                 [--opset N] [--check/--no-check] [--steps N]
                 [--quantize int8|int4 [--block-size N] [--head fp|int8|int4] [--quantize-embedding]]
                 [--engine [--max-batch N] [--max-length N] [--max-context N] [--cache-dir DIR]]
                 [--triton-repo DIR [--triton-variant python|onnxruntime|tensorrt ...] [--triton-max-streams N]]

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

``--triton-repo DIR`` also writes Triton model repository entries for the export
(:func:`rnnx.runtime.triton.write_repository`; docs/serving.md): by default the ``python`` variant (rnnx's
state pool in Triton's Python backend) and the ``onnxruntime`` variant (implicit state), and the
``tensorrt`` variant (the engine and the plugin library) with ``--engine``.
"""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path
from typing import Any, Optional

import click

from ..runtime.artifact import DEFAULT_OPSET, PRECISIONS, QUANTIZATION_HEADS, QUANTIZATION_SCHEMES, TARGETS
from ..runtime.parity import DEFAULT_DECODE_STEPS
from ..runtime.triton.config import VARIANTS as TRITON_VARIANTS

#: Packages the exporter needs beyond the runtime (the ``export`` extra).
EXPORT_REQUIREMENTS = ("torch", "onnx", "onnxscript")

#: Where the demo goes without --out: ./rnnx-export/<checkpoint name>.
DEFAULT_OUT_ROOT = Path("rnnx-export")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("checkpoint", required=False, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Output directory (default: ./rnnx-export/<checkpoint name>).",
)
@click.option(
    "--module",
    "factory",
    default=None,
    metavar="PACKAGE.MODULE:FUNCTION",
    help="Export a model of your own: a function (or path/to/file.py:function) returning (module, example_inputs).",
)
@click.option(
    "--weights",
    type=click.Path(path_type=Path),
    default=None,
    help="With --module: a state_dict file (torch.save) loaded into the module.",
)
@click.option("--target", default="tensorrt", show_default=True, help=f"Graph flavour: {' | '.join(TARGETS)}.")
@click.option(
    "--precision",
    default="fp32",
    show_default=True,
    help=f"Weights and activations: {' | '.join(PRECISIONS)} (state is always fp32).",
)
@click.option("--opset", default=DEFAULT_OPSET, show_default=True, type=int, help="ONNX opset (18-21).")
@click.option(
    "--check/--no-check",
    default=True,
    show_default=True,
    help="Parity against PyTorch in ONNX Runtime, and Polygraphy files.",
)
@click.option(
    "--external-data/--no-external-data",
    default=None,
    help="Weights in model.onnx.data beside model.onnx (ONNX external data). Default: when the weights pass "
    "1.5 GiB (a single ONNX file cannot exceed 2 GB).",
)
@click.option(
    "--steps",
    default=DEFAULT_DECODE_STEPS,
    show_default=True,
    type=click.IntRange(0),
    help="Chained decode steps (chained calls with --module) of the parity check.",
)
@click.option(
    "--quantize",
    type=click.Choice(list(QUANTIZATION_SCHEMES)),
    default=None,
    help="Weight-only quantization of the MatMul weights (MatMulNBits on onnxruntime, DequantizeLinear on tensorrt).",
)
@click.option(
    "--block-size",
    type=int,
    default=None,
    help="With --quantize: weights per scale block (default: int4 32, int8 128 on onnxruntime; 64 on tensorrt).",
)
@click.option(
    "--head",
    type=click.Choice(list(QUANTIZATION_HEADS)),
    default=None,
    help="With --quantize: the output head's weights (default: fp).",
)
@click.option(
    "--quantize-embedding", is_flag=True, default=False, help="With --quantize int4 (onnxruntime): the embedding too."
)
@click.option(
    "--engine",
    is_flag=True,
    default=False,
    help="Also build (or reuse from the cache) a TensorRT engine; needs TensorRT and a GPU.",
)
@click.option("--max-batch", default=8, show_default=True, type=int, help="With --engine: largest batch.")
@click.option(
    "--max-length",
    default=512,
    show_default=True,
    type=int,
    help="With --engine: most tokens per call (prefill profile).",
)
@click.option(
    "--max-context", default=None, type=int, help="With --engine: most KV-cache positions (default: --max-length)."
)
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="With --engine: engine cache (default: $RNNX_ENGINE_CACHE or ~/.cache/rnnx/engines).",
)
@click.option(
    "--triton-repo",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write Triton model repository entries for the export into DIR (see docs/serving.md).",
)
@click.option(
    "--triton-variant",
    "triton_variants",
    multiple=True,
    type=click.Choice(TRITON_VARIANTS),
    help="With --triton-repo (repeatable); default: python (language models), onnxruntime, tensorrt (with --engine).",
)
@click.option(
    "--triton-max-streams", default=64, show_default=True, type=int, help="With --triton-repo: streams per instance."
)
def main(
    checkpoint: Optional[Path],
    out_dir: Optional[Path],
    factory: Optional[str],
    weights: Optional[Path],
    target: str,
    precision: str,
    opset: int,
    check: bool,
    steps: int,
    external_data: Optional[bool] = None,
    quantize: Optional[str] = None,
    block_size: Optional[int] = None,
    head: Optional[str] = None,
    quantize_embedding: bool = False,
    engine: bool = False,
    max_batch: int = 8,
    max_length: int = 512,
    max_context: Optional[int] = None,
    cache_dir: Optional[Path] = None,
    triton_repo: Optional[Path] = None,
    triton_variants: tuple[str, ...] = (),
    triton_max_streams: int = 64,
) -> None:
    """Export CHECKPOINT (default: the shipped demo model), or --module, to DIR/model.onnx + DIR/rnnx.json."""
    _require_export_extra()
    from ..models.checkpoint import DEMO_CHECKPOINTS, CheckpointError, demo_checkpoint_path
    from .exporter import ExportError, export_model, validate_options
    from .quantize import QuantizeError, QuantizeOptions, resolve_options

    options = None
    if quantize is None and (block_size is not None or head is not None or quantize_embedding):
        raise click.UsageError("--block-size, --head and --quantize-embedding need --quantize int8|int4")
    try:
        validate_options(target, precision, opset)
        if quantize is not None:
            options = resolve_options(QuantizeOptions(quantize, block_size, head or "fp", quantize_embedding), target)
    except (ExportError, QuantizeError) as e:
        raise click.ClickException(_one_line(str(e))) from None
    if factory is None and weights is not None:
        raise click.UsageError("--weights needs --module (a checkpoint directory holds its own weights)")
    if factory is not None and checkpoint is not None:
        raise click.UsageError("give either CHECKPOINT or --module, not both")
    limits = _engine_preflight(target, max_batch, max_length, max_context) if engine else None
    variants = _triton_preflight(triton_repo, triton_variants, engine)

    def after_export(result: Any) -> None:
        _report(result)
        plan = _build_engine(result.out_dir, limits, cache_dir) if limits is not None else None
        if triton_repo is not None:
            max_batch_size = limits.max_batch if limits is not None else None  # type: ignore[attr-defined]
            _write_triton(result.out_dir, triton_repo, variants, triton_max_streams, plan, max_batch_size)

    if factory is not None:
        after_export(
            _export_factory(factory, weights, out_dir, target, precision, opset, check, steps, external_data, options)
        )
        return
    if checkpoint is None:
        checkpoint = demo_checkpoint_path(DEMO_CHECKPOINTS[0])
        click.echo(f"no checkpoint given: exporting the shipped demo {DEMO_CHECKPOINTS[0]!r}")
    if out_dir is None:
        out_dir = DEFAULT_OUT_ROOT / Path(checkpoint).resolve().name
    click.echo(f"checkpoint: {checkpoint}")
    click.echo(f"output:     {out_dir}")
    try:
        result = export_model(
            checkpoint, out_dir, target=target, precision=precision, opset=opset, check=check,
            decode_steps=steps, external_data=external_data, quantize=options,
            log=lambda message: click.echo(f"- {message}"),
        )  # fmt: skip
    except (CheckpointError, ExportError) as e:
        raise click.ClickException(_one_line(str(e))) from None
    after_export(result)


def _export_factory(
    factory: str, weights: Optional[Path], out_dir: Optional[Path], target: str, precision: str, opset: int,
    check: bool, steps: int, external_data: Optional[bool] = None, quantize: Any = None,
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
            from ..runtime.artifact import sha256_file

            source["weights_sha256"] = sha256_file(weights)
        return export(
            spec.module, spec.example_inputs, out_dir, **spec.options, target=target, precision=precision,
            opset=opset, check=check, chained_calls=steps, source=source, external_data=external_data,
            quantize=quantize, log=lambda message: click.echo(f"- {message}"),
        )  # fmt: skip
    except (FactoryError, ExportError) as e:
        raise click.ClickException(_one_line(str(e))) from None
    except Exception as e:  # the user's factory: one line, whatever it raised
        raise click.ClickException(f"factory {factory!r} failed: {type(e).__name__}: {_one_line(str(e))}") from None


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


def _engine_preflight(target: str, max_batch: int, max_length: int, max_context: Optional[int]) -> object:
    """Checks, before exporting, that an engine can be built: TensorRT installed, target tensorrt,
    valid limits. Returns the resolved ProfileLimits; ClickException (one line) otherwise."""
    from ..runtime.tensorrt import ProfileError, ProfileLimits, tensorrt_available

    if not tensorrt_available():
        raise click.ClickException(
            "--engine needs TensorRT, which is not installed: pip install tensorrt (NVIDIA; needs a CUDA GPU); "
            "nothing was exported"
        )
    if target != "tensorrt":
        raise click.ClickException(f"--engine needs --target tensorrt (got {target!r})")
    try:
        return ProfileLimits(max_batch=max_batch, max_length=max_length, max_context=max_context).resolved()
    except ProfileError as e:
        raise click.ClickException(_one_line(str(e))) from None


def _triton_preflight(repo: Optional[Path], variants: tuple[str, ...], engine: bool) -> tuple[str, ...]:
    """The Triton variants asked for (checked before exporting; empty: the defaults, chosen after the
    export from its metadata); the tensorrt variant needs --engine (its model file is the engine)."""
    if repo is None:
        if variants:
            raise click.UsageError("--triton-variant needs --triton-repo")
        return ()
    chosen = tuple(dict.fromkeys(variants))
    if "tensorrt" in chosen and not engine:
        raise click.UsageError("--triton-variant tensorrt needs --engine (the repository holds the built engine)")
    return chosen


def _write_triton(
    out_dir: Path, repo: Path, variants: tuple[str, ...], max_streams: int, plan: Optional[Path],
    max_batch_size: Optional[int],
) -> None:  # fmt: skip
    """Writes one repository entry per variant (default: python for a language model, onnxruntime, and
    tensorrt with an engine); one-line error on failure (the export stays)."""
    from ..runtime.artifact import read_metadata
    from ..runtime.triton import TritonConfigError, write_repository
    from ..runtime.triton.config import DEFAULT_MAX_BATCH_SIZE

    if not variants:
        language_model = read_metadata(out_dir).get("vocab_size") is not None
        variants = (*(("python",) if language_model else ()), "onnxruntime", *(("tensorrt",) if plan else ()))
    click.echo(f"Triton model repository {repo}:")
    for variant in variants:
        try:
            model_dir = write_repository(
                out_dir, repo, variant, max_streams=max_streams, plan=plan,
                max_batch_size=max_batch_size or DEFAULT_MAX_BATCH_SIZE,
            )  # fmt: skip
        except (TritonConfigError, OSError) as e:
            raise click.ClickException(
                f"Triton {variant} entry failed (the ONNX export in {out_dir} is kept): {_one_line(str(e))}"
            ) from None
        click.echo(f"  {variant}: {model_dir}")


def _build_engine(out_dir: Path, limits: object, cache_dir: Optional[Path]) -> Path:
    """Builds or reuses the engine for the export in ``out_dir``; one-line error on failure (the
    export stays)."""
    from ..runtime.tensorrt import EngineBuildError, ProfileError, TensorRTNotInstalled, build_engine

    click.echo("TensorRT engine:")
    try:
        path = build_engine(out_dir, limits=limits, cache_dir=cache_dir,  # type: ignore[arg-type]
                            log=lambda message: click.echo(f"- {message}"))  # fmt: skip
    except (EngineBuildError, ProfileError, TensorRTNotInstalled, ValueError) as e:
        raise click.ClickException(
            f"engine build failed (the ONNX export in {out_dir} is kept): {_one_line(str(e))}"
        ) from None
    click.echo(f"  {path} ({path.stat().st_size:,} bytes)")
    return Path(path)


def _require_export_extra() -> None:
    """One-line error when the exporter's packages are missing (a runtime-only install)."""
    missing = [name for name in EXPORT_REQUIREMENTS if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"export-model needs {', '.join(missing)} (not installed): pip install 'rnnx[export]'; "
            "this install has the runtime only"
        )


def _one_line(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else "export failed"


if __name__ == "__main__":
    main()
