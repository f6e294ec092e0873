"""The text an export carries from its checkpoint: the tokenizer and chat template of a transformers checkpoint
folder, copied beside ``model.onnx`` and recorded in ``rnnx.json`` ``"text"`` (:class:`rnnx.runtime.text.Text` reads
them back).

Where they are in a checkpoint folder: ``tokenizer.json`` (required for text); the chat template in
``chat_template.jinja`` or ``tokenizer_config.json``'s ``chat_template`` (a string, or a list of named templates:
the ``default`` one); the special tokens' text in ``tokenizer_config.json`` (``bos_token``, ``eos_token``: a
string or ``{"content": ...}``); the ids that end a generation in ``generation_config.json``'s ``eos_token_id``,
else ``config.json``'s (an id or a list).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..runtime.contract.artifact import CHAT_TEMPLATE_FILE, TOKENIZER_FILE, sha256_file
from .errors import ExportError

__all__ = ["CheckpointText", "checkpoint_text"]


@dataclass(frozen=True)
class CheckpointText:
    """What the export gets: files copied (name in the export -> the checkpoint's file), files written from text
    (a chat template that was a field of ``tokenizer_config.json``) and the ``rnnx.json`` ``"text"`` record."""

    files: dict[str, Path]
    contents: dict[str, str]
    record: dict[str, Any]

    def write(self, folder: Path) -> list[str]:
        """Writes the files into ``folder``; their names."""
        for name, source in self.files.items():
            shutil.copyfile(source, folder / name)
        for name, content in self.contents.items():
            (folder / name).write_text(content)
        return [*self.files, *self.contents]


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text()) if path.is_file() else {}
    except (ValueError, UnicodeDecodeError) as error:
        raise ExportError(f"{path}: invalid JSON ({error})") from None
    return value if isinstance(value, dict) else {}


def _token_text(value: Any) -> Optional[str]:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _ids(value: Any) -> list[int]:
    values = value if isinstance(value, list) else [] if value is None else [value]
    return [int(v) for v in values if isinstance(v, int) and not isinstance(v, bool)]


def checkpoint_text(folder: Path, vocab_size: int) -> Optional[CheckpointText]:
    """What ``folder`` (a transformers checkpoint) has of text, or None without a ``tokenizer.json``; ExportError
    (one line) for a tokenizer whose ids pass the model's vocabulary or one that cannot be read."""
    tokenizer = folder / TOKENIZER_FILE
    if not tokenizer.is_file():
        return None
    try:
        from tokenizers import Tokenizer

        read = Tokenizer.from_file(str(tokenizer))
    except ImportError:
        needs = "carrying a checkpoint's tokenizer needs the tokenizers package: pip install tokenizers"
        raise ExportError(needs) from None
    except Exception as error:  # the tokenizers package raises plain Exceptions for a bad file
        raise ExportError(f"{tokenizer}: not a tokenizer the tokenizers package reads ({error})") from None
    size = read.get_vocab_size(with_added_tokens=True)
    if size > vocab_size:
        raise ExportError(
            f"{tokenizer}: {size} tokens, but the model's vocabulary has {vocab_size}: the tokenizer is not this "
            "model's"
        )
    config = _json(folder / "tokenizer_config.json")
    files = {TOKENIZER_FILE: tokenizer}
    template_file = folder / CHAT_TEMPLATE_FILE
    template = template_file.read_text() if template_file.is_file() else config.get("chat_template")
    if isinstance(template, list):  # named templates
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    eos_token = _token_text(config.get("eos_token"))
    eos_ids = _ids(_json(folder / "generation_config.json").get("eos_token_id"))
    eos_ids = eos_ids or _ids(_json(folder / "config.json").get("eos_token_id"))
    if not eos_ids and eos_token is not None and read.token_to_id(eos_token) is not None:
        eos_ids = [read.token_to_id(eos_token)]  # no id in the configs: the eos token's own
    record: dict[str, Any] = {
        "tokenizer": TOKENIZER_FILE,
        "tokenizer_sha256": sha256_file(tokenizer),
        "chat_template": CHAT_TEMPLATE_FILE if isinstance(template, str) else None,
        "bos_token": _token_text(config.get("bos_token")),
        "eos_token": eos_token,
        "eos_token_ids": eos_ids,
    }
    if not isinstance(template, str):
        return CheckpointText(files, {}, record)
    if template_file.is_file():
        return CheckpointText({**files, CHAT_TEMPLATE_FILE: template_file}, {}, record)
    return CheckpointText(files, {CHAT_TEMPLATE_FILE: template}, record)  # tokenizer_config.json's, as the file
