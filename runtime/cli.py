"""Command-line tools: ``rnnx-generate`` (stream tokens) and ``rnnx-parity`` (backend vs PyTorch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from .backends import BACKENDS


def _parse_prompt(text: str) -> list[int]:
    try:
        tokens = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected space-separated integer token ids") from None
    if not tokens:
        raise click.BadParameter("empty prompt")
    return tokens


@click.command()
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--prompt", "prompts", multiple=True, required=True, help='token ids, e.g. "3 5 7 10"; repeat for a batch'
)
@click.option("--max-new-tokens", type=click.IntRange(min=0), default=32, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="0 = greedy")
@click.option("--top-k", type=click.IntRange(min=1), default=None)
@click.option("--top-p", type=click.FloatRange(min=0.0, max=1.0, min_open=True), default=None)
@click.option("--stop", "stops", multiple=True, type=int, help="stop token id (repeatable)")
@click.option("--seed", type=int, default=None)
@click.option("--backend", type=click.Choice(("auto",) + BACKENDS), default="auto", show_default=True)
@click.option("--device", default="cpu", show_default=True)
def generate_main(
    model_dir: str, prompts: tuple[str, ...], max_new_tokens: int, temperature: float, top_k: Optional[int],
    top_p: Optional[float], stops: tuple[int, ...], seed: Optional[int], backend: str, device: str,
) -> None:  # fmt: skip
    """Streams generated tokens of MODEL_DIR (export or checkpoint) to stdout.

    One prompt: the new tokens, space-separated, as they are made. Several: one line per step with
    each row's token ('.' once a row has stopped)."""
    from . import load
    from .backends.base import InputError, RnnxRuntimeError

    parsed = [_parse_prompt(p) for p in prompts]
    try:
        session = load(model_dir, backend=backend, device=device)
        click.echo(f"# {session.backend.describe()}", err=True)
        stream = session.generate(parsed, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                  stop_tokens=stops, seed=seed)  # fmt: skip
        for tokens in stream:
            if len(parsed) == 1:
                click.echo(f"{tokens[0]} ", nl=False)
            else:
                click.echo(" ".join("." if t is None else str(t) for t in tokens))
            sys.stdout.flush()
        if len(parsed) == 1:
            click.echo()
    except (InputError, RnnxRuntimeError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None


@click.command()
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--backend", type=click.Choice(BACKENDS), default="onnxruntime", show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("--steps", type=click.IntRange(min=0), default=64, show_default=True)
@click.option("--prompt", "prompts", multiple=True, help="token ids; repeat for a batch (default: task prompts)")
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="PyTorch reference (default: rnnx.json source.checkpoint)",
)
@click.option("--tolerance", type=float, default=None, help="max relative error (default by precision)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None, help="also write the report here")
def parity_main(
    model_dir: str, backend: str, device: str, steps: int, prompts: tuple[str, ...], checkpoint: Optional[str],
    tolerance: Optional[float], json_path: Optional[str],
) -> None:  # fmt: skip
    """Runs the same prompts through PyTorch and BACKEND on MODEL_DIR for STEPS greedy steps and prints
    per-step max abs / rel error of logits and state and the first diverging token. Exit 1 on FAIL."""
    from . import load
    from .backends.base import InputError, RnnxRuntimeError
    from .backends.torch_backend import TorchBackend, checkpoint_of
    from .parity import compare_sessions, default_prompts
    from .session import Session

    try:
        candidate = load(model_dir, backend=backend, device=device)
        source = Path(checkpoint) if checkpoint else checkpoint_of(model_dir)
        reference = Session(TorchBackend.from_path(source, device=device))
        task = json.loads((source / "config.json").read_text()).get("task")
        batch = [_parse_prompt(p) for p in prompts] or default_prompts(candidate.metadata, task)
        click.echo(f"# reference: torch {source}; candidate: {candidate.backend.describe()}; {len(batch)} prompts")
        report = compare_sessions(reference, candidate, batch, steps, tolerance=tolerance)
    except (InputError, RnnxRuntimeError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    for line in report.lines():
        click.echo(line)
    if json_path:
        Path(json_path).write_text(json.dumps(report.to_dict(), indent=1) + "\n")
    sys.exit(0 if report.passed else 1)
