"""rnnx.models: PyTorch reference models and the recurrent ops they are built on.

Ops (registered with ``torch.library`` in namespace ``rnnx``; contract in ``rnnx.models.ops.spec``):
``sru_scan`` and ``causal_linear_attention``. Layers: ``SRU`` (drop-in for ``sru.SRU`` 2.6) and
``SRUpp`` (drop-in for ``sru.SRUpp`` 3.0.0.dev6, plus linear attention).
"""

from .ops.linear_attention import causal_linear_attention
from .ops.sru import sru_scan
from .sru import SRU, SRUCell
from .srupp import SRUpp
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
    "causal_linear_attention",
    "sru_scan",
    "SRU",
    "SRUCell",
    "SRUpp",
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
