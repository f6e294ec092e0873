"""The state record of the causal linear attention op: the op's public entry point takes it and the layers carry it
(``rnnx.models.state`` re-exports it beside the other layers' records)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class LinearAttentionState:
    """Causal linear attention state of one layer: S (B, H, E, M) and z (B, H, E), fp32."""

    S: Tensor
    z: Tensor
