"""``rnnx-parity``: a backend against PyTorch or against the reference saved with the export."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Optional

import click

from ..backends import BACKENDS
from ..cli import _parse_prompt

REFERENCES = ("auto", "torch", "saved")


@click.command()
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--backend", type=click.Choice(BACKENDS), default="onnxruntime", show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option(
    "--reference",
    type=click.Choice(REFERENCES),
    default="auto",
    show_default=True,
    help="torch: the PyTorch model (needs torch); saved: the export's parity_reference.npz (no torch needed); "
    "auto: torch when it is installed and the checkpoint is known, else saved",
)
@click.option(
    "--steps", type=click.IntRange(min=0), default=64, show_default=True, help="decode steps (torch reference)"
)
@click.option(
    "--prompt", "prompts", multiple=True, help="token ids; repeat for a batch (default: the export's prompts)"
)
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="PyTorch reference (default: rnnx.json source.checkpoint)",
)
@click.option("--tolerance", type=float, default=None, help="max relative error (default by precision)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="also write the report here")
def main(
    model_dir: str, backend: str, device: str, reference: str, steps: int, prompts: tuple[str, ...],
    checkpoint: Optional[str], tolerance: Optional[float], json_path: Optional[str],
) -> None:  # fmt: skip
    """Runs the same inputs through a reference and BACKEND on MODEL_DIR, a prefill then greedy decode
    steps (any other stateful export: its saved first call then chained short calls), and prints per-step
    max abs / rel error of the outputs and state and, for a language model, the first diverging token.
    Exit 1 on FAIL. The reference is the PyTorch model, or the reference saved with the export (which
    needs no torch: this is how a deployment machine checks itself)."""
    from ..backends.base import InputError, RnnxRuntimeError
    from ..contract.artifact import PARITY_REFERENCE_FILE
    from ..session import load
    from . import compare, compare_backends, compare_stream, load_reference, random_prompts

    try:
        candidate = load(model_dir, backend=backend, device=device)
        use_torch = _use_torch_reference(reference, model_dir, checkpoint)
        torch_side = None
        if use_torch and candidate.backend.vocab_size is None:
            if prompts:
                raise click.UsageError("--prompt is for language models; this export takes other inputs")
            saved = Path(model_dir) / PARITY_REFERENCE_FILE
            if not saved.is_file():
                raise click.ClickException(
                    f"{saved}: missing (exported with --no-check): the saved first call is what a stateful "
                    "export's parity starts from; re-export with --check"
                )
            torch_side = _factory_reference(model_dir, device, fall_back=reference == "auto")
            use_torch = torch_side is not None
        if torch_side is not None:
            first = load_reference(saved)[0][0].inputs
            factory = torch_side.metadata["source"].get("factory")
            click.echo(f"# reference: torch {factory}; candidate: {candidate.backend.describe()}; "
                       f"the saved first call + {steps} chained calls")  # fmt: skip
            report = compare_stream(torch_side, candidate.backend, first, steps, tolerance=tolerance)
        elif use_torch:
            from ..backends.torch_backend import TorchBackend, checkpoint_of

            source = Path(checkpoint) if checkpoint else checkpoint_of(model_dir)
            torch_side = TorchBackend.from_path(source, device=device)
            saved = Path(model_dir) / PARITY_REFERENCE_FILE
            batch = [_parse_prompt(p) for p in prompts] or (
                load_reference(saved)[1]["prompts"] if saved.is_file() else random_prompts(candidate.vocab_size)
            )
            click.echo(f"# reference: torch {source}; candidate: {candidate.backend.describe()}; {len(batch)} prompts")
            report = compare_backends(torch_side, candidate.backend, batch, steps, tolerance=tolerance)
        else:
            if prompts:
                raise click.UsageError("--prompt needs --reference torch (a saved reference has its own prompts)")
            calls, header = load_reference(Path(model_dir) / PARITY_REFERENCE_FILE)
            click.echo(
                f"# reference: saved {PARITY_REFERENCE_FILE} ({header.get('source')}, {len(calls) - 1} calls "
                f"after the first); candidate: {candidate.backend.describe()}"
            )
            report = compare(calls, candidate.backend, reference_name="saved", tolerance=tolerance)
    except (InputError, RnnxRuntimeError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    for line in report.lines():
        click.echo(line)
    if json_path:
        Path(json_path).write_text(json.dumps(report.to_dict(), indent=1) + "\n")
    sys.exit(0 if report.passed else 1)


def _factory_reference(model_dir: str, device: str, fall_back: bool) -> Any:
    """The torch backend of a stateful export's recorded factory; with ``fall_back`` (``--reference auto``),
    None and a note when the factory cannot be imported here (the saved reference is replayed instead)."""
    from ..backends.base import BackendUnavailable
    from ..backends.torch_backend import TorchBackend

    try:
        return TorchBackend.from_path(model_dir, device=device)
    except BackendUnavailable as e:
        if not fall_back:
            raise
        click.echo(f"# the PyTorch reference is not available here ({e}); replaying the saved reference instead")
        return None


def _use_torch_reference(reference: str, model_dir: str, checkpoint: Optional[str]) -> bool:
    """Whether ``--reference`` (``auto`` resolved) means the PyTorch model."""
    if reference != "auto":
        return reference == "torch"
    if importlib.util.find_spec("torch") is None:
        return False
    from ..contract.artifact import METADATA_FILE, read_metadata

    if checkpoint or not (Path(model_dir) / METADATA_FILE).is_file():
        return True
    source = read_metadata(model_dir, verify_hash=False).get("source") or {}
    return bool(source.get("checkpoint") or source.get("factory"))
