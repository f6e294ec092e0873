"""Text in and out of an export: its tokenizer and chat template (``rnnx.json`` ``"text"``, written when the checkpoint
had them; docs/checkpoints.md, "Text").

:class:`Text` reads the export's ``tokenizer.json`` with the ``tokenizers`` package (Hugging Face's; no tokenizer of
rnnx's own) and renders its chat template with ``jinja2`` in a sandbox, as transformers' ``apply_chat_template`` does:
the template gets ``messages``, ``add_generation_prompt``, the special tokens' text (``bos_token``, ``eos_token``),
``raise_exception``, ``strftime_now``, the ``tojson`` filter and loop controls, and its output is encoded without
adding special tokens. Both packages are optional for the runtime (``pip install "rnnx[text]"``); without them, or
for an export without a tokenizer, text is refused in one line and token ids still work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional, Union

from .backends.base import InputError
from .contract.artifact import METADATA_FILE, sha256_file

__all__ = ["ChatTranscript", "Message", "Text", "TextUnavailable"]

#: A chat message: ``{"role": "user" | "assistant" | "system" | ..., "content": "..."}``.
Message = dict[str, Any]


class TextUnavailable(InputError):
    """Text was asked of an export without a tokenizer, or the packages that read one are not installed."""


class Text:
    """An export's tokenizer and chat template. Build it with :meth:`of` (``None`` for an export without them)."""

    def __init__(self, directory: Union[str, os.PathLike], record: dict[str, Any]) -> None:
        directory = Path(directory)
        path = directory / record["tokenizer"]
        where = directory / METADATA_FILE
        if not path.is_file():
            raise TextUnavailable(f"{path}: the tokenizer {where} names is missing")
        if sha256_file(path) != record["tokenizer_sha256"]:
            raise TextUnavailable(f"{path}: sha256 does not match {where}; the tokenizer was replaced")
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise TextUnavailable(
                'reading an export\'s tokenizer needs the tokenizers package: pip install "rnnx[text]"'
            ) from None
        self.tokenizer = Tokenizer.from_file(str(path))
        #: Token ids that end a generation (the checkpoint's eos ids).
        self.eos_token_ids: tuple[int, ...] = tuple(int(t) for t in record.get("eos_token_ids") or ())
        self.bos_token: Optional[str] = record.get("bos_token")
        self.eos_token: Optional[str] = record.get("eos_token")
        template = record.get("chat_template")
        self.chat_template: Optional[str] = None if template is None else (directory / template).read_text()

    @classmethod
    def of(cls, directory: Union[str, os.PathLike], metadata: dict[str, Any]) -> Optional[Text]:
        """The text of the export in ``directory`` (``metadata`` its rnnx.json), or None when it has no tokenizer."""
        record = metadata.get("text")
        return None if not record else cls(directory, record)

    @classmethod
    def of_backend(cls, backend: Any) -> Optional[Text]:
        """The text of the export a backend runs (its ``model_dir``), or None (no tokenizer, or a module in memory)."""
        directory = getattr(backend, "model_dir", None)
        return None if directory is None else cls.of(directory, backend.metadata)

    @staticmethod
    def required(text: Optional[Text], metadata: dict[str, Any]) -> Text:
        """``text``, or TextUnavailable (one line) when the export of ``metadata`` carries no tokenizer."""
        if text is None:
            raise TextUnavailable(
                f"{metadata.get('model_type')}: this export carries no tokenizer (it is made from a transformers "
                "checkpoint folder with a tokenizer.json); give token ids"
            )
        return text

    def encode(self, text: str) -> list[int]:
        """``text`` -> token ids, with the tokenizer's own special tokens (a BOS where it adds one)."""
        return list(self.tokenizer.encode(text).ids)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Token ids -> text."""
        return self.tokenizer.decode([int(t) for t in ids], skip_special_tokens=skip_special_tokens)

    def render_chat(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        """The chat template applied to ``messages`` (TextUnavailable when the export has none)."""
        if self.chat_template is None:
            raise TextUnavailable("this export's checkpoint had no chat template; give the prompt as text")
        from jinja2.exceptions import TemplateError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        def tojson(value: Any, indent: Optional[int] = None, separators: Any = None, sort_keys: bool = False) -> str:
            return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        environment.filters["tojson"] = tojson
        environment.globals["raise_exception"] = raise_exception
        environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            return environment.from_string(self.chat_template).render(
                messages=list(messages), add_generation_prompt=add_generation_prompt, bos_token=self.bos_token or "",
                eos_token=self.eos_token or "",
            )  # fmt: skip
        except TemplateError as error:
            raise InputError(f"chat template: {error}") from None

    def encode_chat(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        """The token ids of :meth:`render_chat` (encoded without adding special tokens: the template wrote them)."""
        rendered = self.render_chat(messages, add_generation_prompt)
        return list(self.tokenizer.encode(rendered, add_special_tokens=False).ids)


@dataclass(frozen=True)
class ChatTranscript:
    """One conversation on the text side, turn by turn: its ``messages`` so far and the chat template text its state
    has consumed (``consumed``). A turn's new messages are rendered with the whole history and only the text past
    ``consumed`` is fed, so the state never sees a token twice; the reply's tokens (its stop token included) are
    what the state consumed next. A template that renders earlier turns differently once later ones exist (one that
    drops a reply's reasoning, say) cannot be continued this way and is refused in one line."""

    messages: tuple[Message, ...] = ()
    consumed: str = ""

    def turn(self, text: Text, messages: Sequence[Message]) -> tuple[list[int], ChatTranscript]:
        """The token ids that continue the state with ``messages`` (and the assistant's generation prompt), and the
        transcript once they are fed."""
        history = (*self.messages, *messages)
        rendered = text.render_chat(history, add_generation_prompt=True)
        if not rendered.startswith(self.consumed):
            raise InputError(
                "chat template: the earlier turns render differently once this one is added, so the conversation "
                "cannot continue from its state; start it afresh with the whole history"
            )
        ids = text.tokenizer.encode(rendered[len(self.consumed) :], add_special_tokens=False).ids
        return list(ids), ChatTranscript(history, rendered)

    def replied(self, text: Text, tokens: Sequence[int]) -> ChatTranscript:
        """The transcript after the assistant's ``tokens`` (as generated, a stop token included)."""
        reply = text.decode([t for t in tokens if t not in text.eos_token_ids])
        consumed = self.consumed + text.decode(tokens, skip_special_tokens=False)
        return ChatTranscript((*self.messages, {"role": "assistant", "content": reply}), consumed)

    def to_json(self) -> str:
        return json.dumps({"messages": list(self.messages), "consumed": self.consumed}, ensure_ascii=False)

    @classmethod
    def from_json(cls, value: str, where: str = "chat") -> ChatTranscript:
        """From :meth:`to_json`'s text; InputError (one line naming ``where``) for anything else."""
        try:
            record = json.loads(value)
            messages, consumed = record["messages"], record["consumed"]
            if not isinstance(consumed, str) or not all(isinstance(m, dict) for m in messages):
                raise TypeError("messages must be objects and consumed a string")
        except (ValueError, KeyError, TypeError) as error:
            raise InputError(f"{where}: not a chat transcript ({error})") from None
        return cls(tuple(messages), consumed)
