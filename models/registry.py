"""The language-model families by name: what a checkpoint's ``model_type`` and export refer to."""

from __future__ import annotations

from typing import Any

from .decoder import DecoderLM
from .linear_transformer import LinearTransformerLM
from .lm import SRULM, RecurrentLM, SRUppLM

#: model_type -> class; ``class(**config)`` rebuilds a model from its ``config``.
MODEL_TYPES: dict[str, type[RecurrentLM]] = {
    "decoder": DecoderLM,
    "linear_transformer": LinearTransformerLM,
    "sru": SRULM,
    "srupp": SRUppLM,
}


def model_type_of(model: RecurrentLM) -> str:
    """The registered name of ``model``'s class; KeyError for an unregistered class."""
    for name, cls in MODEL_TYPES.items():
        if type(model) is cls:
            return name
    raise KeyError(f"{type(model).__name__} is not a registered model type; known: {', '.join(sorted(MODEL_TYPES))}")


def build_model(model_type: str, config: dict[str, Any]) -> RecurrentLM:
    """Builds ``MODEL_TYPES[model_type](**config)``; KeyError for an unknown type (known ones listed)."""
    if model_type not in MODEL_TYPES:
        raise KeyError(f"unknown model_type {model_type!r}; known: {', '.join(sorted(MODEL_TYPES))}")
    return MODEL_TYPES[model_type](**config)
