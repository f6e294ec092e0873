"""``rnnx-generate``: stream tokens from an export (``rnnx-parity``, backend vs PyTorch, is :mod:`.parity.cli`)."""

from __future__ import annotations

import re
import sys
from typing import Any, Optional

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
    "--prompt", "prompts", multiple=True, required=True,
    help='text when the export carries a tokenizer, else token ids ("3 5 7" or 3,5,7); repeat for a batch',
)  # fmt: skip
@click.option("--ids", is_flag=True, help="the prompts are token ids even though the export carries a tokenizer")
@click.option("--chat", is_flag=True, help="each prompt is a user turn, given through the checkpoint's chat template")
@click.option("--max-new-tokens", type=click.IntRange(min=0), default=32, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0.0), default=0.0, show_default=True, help="0 = greedy")
@click.option("--top-k", type=int, default=None, help="<= 0: off (docs/sampling.md)")
@click.option("--top-p", type=click.FloatRange(min=0.0, max=1.0), default=None, help="0 or 1: off")
@click.option("--stop", "stops", multiple=True, type=int, help="stop token id (repeatable; text: the eos ids too)")
@click.option("--seed", type=int, default=None)
@click.option("--backend", type=click.Choice(("auto",) + BACKENDS), default="auto", show_default=True)
@click.option("--device", default="cpu", show_default=True)
def generate_main(
    model_dir: str, prompts: tuple[str, ...], ids: bool, chat: bool, max_new_tokens: int, temperature: float,
    top_k: Optional[int], top_p: Optional[float], stops: tuple[int, ...], seed: Optional[int], backend: str,
    device: str,
) -> None:  # fmt: skip
    """Streams what MODEL_DIR (export or checkpoint) generates to stdout.

    Token ids: one prompt prints its new tokens, space-separated, as they are made; several print one line per
    step with each row's token ('.' once a row has stopped). Text (an export that carries its checkpoint's
    tokenizer): one prompt prints its reply as it is made, several print one line per row at the end."""
    from .backends.base import InputError, RnnxRuntimeError
    from .session import load

    try:
        session = load(model_dir, backend=backend, device=device)
        if not hasattr(session, "generate"):
            raise InputError(
                f"{model_dir}: not a language model export (interface {session.metadata.get('interface')!r}); "
                "run it with rnnx.runtime.load(...).run(...)"
            )
        text = None if ids else session.text
        if chat and text is None:
            raise InputError(f"{model_dir}: --chat needs an export that carries its checkpoint's tokenizer")
        if text is None:
            parsed = [_parse_prompt(p) for p in prompts]
        else:
            parsed = [text.encode_chat([{"role": "user", "content": p}]) if chat else text.encode(p) for p in prompts]
            stops = (*stops, *text.eos_token_ids)
        click.echo(f"# {session.backend.describe()}", err=True)
        stream = session.generate(parsed, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                  stop_tokens=stops, seed=seed)  # fmt: skip
        if text is not None:
            _print_text(stream, len(parsed), text)
            return
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


def _print_text(stream: Any, rows: int, text: Any) -> None:
    """Decoded replies: one row's as it grows (each new piece of its decoded text), several at the end."""
    new: list[list[int]] = [[] for _ in range(rows)]
    shown = ""
    for tokens in stream:
        for row, token in enumerate(tokens):
            if token is not None and token not in text.eos_token_ids:
                new[row].append(token)
        if rows == 1:
            reply = text.decode(new[0])
            if reply.startswith(shown):  # a piece can change once its next token arrives (a split character)
                click.echo(reply[len(shown) :], nl=False)
                shown = reply
            sys.stdout.flush()
    if rows == 1:
        click.echo(text.decode(new[0])[len(shown) :])
        return
    for row, ids in enumerate(new):
        click.echo(f"row {row}: {text.decode(ids)}")
