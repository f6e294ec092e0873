"""``export-model``: export an rnnx checkpoint (by default the shipped demo) to ONNX.

::

    export-model [CHECKPOINT] [--out DIR] [--target tensorrt|onnxruntime] [--precision fp32|fp16]
                 [--opset N] [--check/--no-check] [--steps N]

Prints each step, the files written, the parity table and the ``polygraphy run`` command that
re-checks the saved inputs/outputs. Any bad input (missing or corrupt checkpoint, unknown model
type, unsupported target / precision / opset, a failed check) is one ``Error: ...`` line, a
non-zero exit status, and an output directory left as it was.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import click

from ..models.checkpoint import DEMO_CHECKPOINTS, CheckpointError, demo_checkpoint_path
from .exporter import DEFAULT_OPSET, PRECISIONS, TARGETS, ExportError, export_model, validate_options
from .parity import DEFAULT_DECODE_STEPS

#: Where the demo goes without --out: ./rnnx-export/<checkpoint name>.
DEFAULT_OUT_ROOT = Path("rnnx-export")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("checkpoint", required=False, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Output directory (default: ./rnnx-export/<checkpoint name>).")
@click.option("--target", default="tensorrt", show_default=True,
              help=f"Graph flavour: {' | '.join(TARGETS)}.")
@click.option("--precision", default="fp32", show_default=True,
              help=f"Weights and activations: {' | '.join(PRECISIONS)} (state is always fp32).")
@click.option("--opset", default=DEFAULT_OPSET, show_default=True, type=int, help="ONNX opset (18-21).")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Parity against PyTorch in ONNX Runtime, and Polygraphy files.")
@click.option("--steps", default=DEFAULT_DECODE_STEPS, show_default=True, type=click.IntRange(0),
              help="Chained decode steps of the parity check.")
def main(
    checkpoint: Optional[Path], out_dir: Optional[Path], target: str, precision: str, opset: int,
    check: bool, steps: int,
) -> None:
    """Export CHECKPOINT (default: the shipped demo model) to DIR/model.onnx + DIR/rnnx.json."""
    try:
        validate_options(target, precision, opset)
    except ExportError as e:
        raise click.ClickException(_one_line(str(e))) from None
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
            decode_steps=steps, log=lambda message: click.echo(f"- {message}"),
        )  # fmt: skip
    except (CheckpointError, ExportError) as e:
        raise click.ClickException(_one_line(str(e))) from None
    click.echo("files:")
    for path in result.files:
        click.echo(f"  {path} ({path.stat().st_size:,} bytes)")
    if result.parity is not None:
        click.echo("parity (ONNX Runtime CPU vs PyTorch):")
        click.echo(result.parity.table())
    if result.polygraphy_command is not None:
        click.echo("re-check with stock Polygraphy:")
        click.echo(f"  {shlex.join(result.polygraphy_command)}")


def _one_line(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else "export failed"


if __name__ == "__main__":
    main()
