"""rnnx.models: PyTorch reference models and the recurrent ops they are built on.

Ops (registered with ``torch.library`` in namespace ``rnnx``; contract in ``rnnx.runtime.contract.ops``):
``sru_scan`` and ``causal_linear_attention``. Layers: ``SRU`` / ``SRUCell`` (drop-ins for ``sru.SRU`` /
``sru.SRUCell`` of both 2.6 and 3.0.0.dev6, docs/models.md), ``SRUpp`` / ``SRUppCell`` (drop-ins for
``sru.SRUpp`` / ``sru.SRUppCell`` 3.0.0.dev6, plus linear attention). Language models sharing
one interface (``RecurrentLM``: tokens (B, L) + state -> logits (B, L, V) + state): ``SRULM``,
``SRUppLM``, ``LinearTransformerLM``, ``DecoderLM`` (the recurrent and hybrid decoders of transformers' checkpoints:
``from_pretrained(folder)``, docs/checkpoints.md); checkpoints (``load_checkpoint``; ``load_model`` takes a
transformers checkpoint folder too) and the shipped demos.
``LinearTransformerEncoder``: the twin of a ``fast-transformers`` 0.4 causal-linear encoder (sequence
forward that takes and returns the attention state). ``convert(model)``: a copy of a user model with its
published-package layers (``sru``, ``fast-transformers``) replaced by these.

``rnnx.models.convert`` is the function (it shadows the submodule of the same name); it carries
``convert.ConversionError`` and ``convert.supported`` so that both spellings work.
"""

from .checkpoint import DEMO_CHECKPOINTS, CheckpointError, demo_checkpoint_path, load_checkpoint, save_checkpoint
from .convert import ConversionError, convert, supported
from .decoder import DecoderLM
from .fast_transformers import LinearTransformerEncoder
from .from_pretrained import UnsupportedCheckpoint, from_pretrained, load_model
from .linear_transformer import LinearTransformerLM
from .lm import SRULM, RecurrentLM, SRUppLM
from .ops.causal_linear_attention import causal_linear_attention
from .ops.sru_scan import sru_scan
from .registry import MODEL_TYPES, build_model
from .sru import SRU, SRUCell
from .srupp import SRUpp, SRUppCell
from .state import (
    KVCache,
    LinearAttentionState,
    LinearTransformerState,
    SRUppState,
    SRUState,
    clone_state,
    flatten_state,
    map_tensors,
    state_to,
)

__all__ = [
    "DEMO_CHECKPOINTS",
    "CheckpointError",
    "demo_checkpoint_path",
    "load_checkpoint",
    "load_model",
    "save_checkpoint",
    "DecoderLM",
    "UnsupportedCheckpoint",
    "from_pretrained",
    "ConversionError",
    "convert",
    "LinearTransformerEncoder",
    "LinearTransformerLM",
    "RecurrentLM",
    "SRULM",
    "SRUppLM",
    "MODEL_TYPES",
    "build_model",
    "causal_linear_attention",
    "sru_scan",
    "SRU",
    "SRUCell",
    "SRUpp",
    "SRUppCell",
    "KVCache",
    "LinearAttentionState",
    "LinearTransformerState",
    "SRUppState",
    "SRUState",
    "clone_state",
    "flatten_state",
    "map_tensors",
    "state_to",
]

convert.ConversionError = ConversionError  # type: ignore[attr-defined]
convert.supported = supported  # type: ignore[attr-defined]
del supported
