"""``rnnx-generate``: stream tokens from an export (``rnnx-parity``, backend vs PyTorch, is :mod:`.parity.cli`)."""

from __future__ import annotations

import re
import sys
from typing import Optional

import click

from .backends import BACKENDS

#: The prompt syntax of every rnnx-generate and the browser page (docs/embedding.md, "Prompts").
PROMPT_SYNTAX = "token ids are non-negative integers separated by spaces and/or commas"


def parse_prompt(text: str) -> list[int]:
    """``"1 2 3"``, ``"1,2,3"`` or ``"1, 2, 3"`` -> ``[1, 2, 3]``; ValueError naming the bad piece, or an empty
    prompt. Ids past the vocabulary are the runtime's to refuse."""
    pieces = [p for p in re.split(r"[ \t\r\n,]+", text) if p]
    bad = next((p for p in pieces if not re.fullmatch(r"[0-9]+", p)), None)
    if bad is not None:
        raise ValueError(f'prompt "{text}": "{bad}" is not a token id ({PROMPT_SYNTAX})')
    if not pieces:
        raise ValueError(f'prompt "{text}": no token ids ({PROMPT_SYNTAX})')
    return [int(p) for p in pieces]


def _parse_prompt(text: str) -> list[int]:
    try:
        return parse_prompt(text)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.command()
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--prompt", "prompts", multiple=True, required=True, help='token ids, e.g. "3 5 7" or 3,5,7; repeat for a batch'
)
@click.option("--max-new-tokens", type=click.IntRange(min=0), default=32, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="0 = greedy")
@click.option("--top-k", type=int, default=None, help="<= 0: off (docs/sampling.md)")
@click.option("--top-p", type=click.FloatRange(min=0.0, max=1.0), default=None, help="0 or 1: off")
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
    from .backends.base import InputError, RnnxRuntimeError
    from .session import load

    parsed = [_parse_prompt(p) for p in prompts]
    try:
        session = load(model_dir, backend=backend, device=device)
        if not hasattr(session, "generate"):
            raise InputError(
                f"{model_dir}: not a language model export (interface {session.metadata.get('interface')!r}); "
                "run it with rnnx.runtime.load(...).run(...)"
            )
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
