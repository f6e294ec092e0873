"""ONNX opset 27's ``CausalConvWithState`` (plus rnnx's pad mask) as a float64 loop over time.

Depthwise and channels first::

    input (B, C, T)    weight (C, 1, K)    bias (C,)    past_state (B, C, K-1)    pad_mask (B, T)
    y[b, c, t] = bias[c] + sum_{j=0}^{K-1} weight[c, 0, j] * x[b, c, t - (K-1) + j]

where x is ``past_state`` (zeros when absent) followed by ``input``; the present state is the last K-1
entries of x, and ``activation`` is ``"none"`` or ``"silu"`` / ``"swish"`` (y * sigmoid(y)). rnnx's pad
mask (non-zero = pad) skips a step: the window does not move, the output there is 0, so a right-padded
batch equals each row run alone.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .checks import check_inputs

_F64 = torch.float64


def causal_conv_with_state_naive(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    past_state: Optional[Tensor] = None,
    *,
    activation: str = "none",
    pad_mask: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """The op as a token loop in float64.

    Returns ``(output (B, C, T) in input's dtype, present_state (B, C, K-1) in float64)``.
    """
    B, C, T, K = check_inputs(input, weight, bias, past_state, pad_mask, activation)
    window = past_state.to(_F64).clone() if past_state is not None else input.new_zeros((B, C, K - 1), dtype=_F64)
    w = weight.to(_F64)[:, 0, :]  # (C, K)
    x = input.to(_F64)
    ys = []
    for t in range(T):
        taps = torch.cat([window, x[:, :, t : t + 1]], dim=2)  # (B, C, K): inputs t-(K-1) .. t
        y = (taps * w).sum(-1)
        if bias is not None:
            y = y + bias.to(_F64)
        if activation != "none":
            y = y * torch.sigmoid(y)
        if pad_mask is not None:
            pad = (pad_mask[:, t] != 0)[:, None]  # (B, 1)
            y = torch.where(pad, torch.zeros_like(y), y)
            window = torch.where(pad[:, :, None], window, taps[:, :, 1:])
        else:
            window = taps[:, :, 1:]
        ys.append(y)
    out = torch.stack(ys, dim=2) if ys else x.new_zeros((B, C, 0))
    return out.to(input.dtype), window
