"""Input checks of the causal convolution with state: one-line errors naming the tensor, expected vs got.

The rules of :data:`rnnx.runtime.contract.ops.CAUSAL_CONV_WITH_STATE`; shared by the naive twin, the torch op
and its fake implementation.
"""

from __future__ import annotations

from typing import Optional

from torch import Tensor

#: ``activation`` values, in the standard's spelling (silu and swish are one function, y * sigmoid(y)).
ACTIVATIONS: tuple[str, ...] = ("none", "silu", "swish")


def check_inputs(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    past_state: Optional[Tensor],
    pad_mask: Optional[Tensor],
    activation: str,
) -> tuple[int, int, int, int]:
    """ValueError / TypeError (one line, naming the tensor) for what the op refuses; else ``(B, C, T, K)``."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {ACTIVATIONS}, got {activation!r}")
    if input.dim() != 3:
        raise ValueError(f"input: expected rank 3 (B, C, T), got shape {tuple(input.shape)}")
    if not input.is_floating_point():
        raise TypeError(f"input: expected a floating dtype, got {input.dtype}")
    B, C, T = input.shape
    if weight.dim() != 3 or weight.shape[0] != C or weight.shape[1] != 1 or weight.shape[2] < 1:
        raise ValueError(f"weight: expected shape ({C}, 1, K) with K >= 1, got {tuple(weight.shape)}")
    K = weight.shape[2]
    for name, t, shape in (("weight", weight, None), ("bias", bias, (C,)), ("past_state", past_state, (B, C, K - 1))):
        if t is None:
            continue
        if shape is not None and tuple(t.shape) != shape:
            raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")
        if name != "past_state" and t.dtype != input.dtype:
            raise TypeError(f"{name}: expected input's dtype {input.dtype}, got {t.dtype}")
    if pad_mask is not None and tuple(pad_mask.shape) != (B, T):
        raise ValueError(f"pad_mask: expected shape {(B, T)}, got {tuple(pad_mask.shape)}")
    return B, C, T, K
