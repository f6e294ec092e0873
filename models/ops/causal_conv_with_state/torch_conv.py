"""The causal convolution with state in plain torch (``conv1d`` over the state and the input), for every device.

Differentiable by torch's autograd, so the registered op's backward re-runs it. A pad mask (non-zero = pad,
anywhere in a row) is handled by moving each row's real steps to the front (a stable sort), convolving that
packed sequence, and putting the outputs back: a skipped step neither moves the window nor gets an output
(0 there). Computed in the state dtype (fp32; fp64 for fp64 inputs).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ..dtypes import state_dtype
from .checks import check_inputs


def causal_conv_with_state_forward(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    past_state: Optional[Tensor],
    mask_pad: Optional[Tensor],
    activation: str,
) -> tuple[Tensor, Tensor]:
    """The op (layouts of :data:`rnnx.runtime.contract.ops.CAUSAL_CONV_WITH_STATE`): ``(output, present_state)``.

    ``output`` (B, C, T) has input's dtype, ``present_state`` (B, C, K-1) the state dtype.
    """
    B, C, T, K = check_inputs(input, weight, bias, past_state, mask_pad, activation)
    dt = state_dtype(input.dtype)
    x = input.to(dt)
    past = past_state.to(dt) if past_state is not None else input.new_zeros((B, C, K - 1), dtype=dt)
    order = None
    if mask_pad is not None:
        pad = mask_pad != 0
        order = torch.sort(pad.to(torch.uint8), dim=1, stable=True).indices  # real steps first, in order
        x = torch.gather(x, 2, order[:, None, :].expand(B, C, T))
    full = torch.cat([past, x], dim=2)  # (B, C, K-1+T)
    y = F.conv1d(full, weight.to(dt), None if bias is None else bias.to(dt), groups=C)  # (B, C, T)
    if activation != "none":
        y = F.silu(y)
    if order is None:
        return y.to(input.dtype), full[:, :, T:]
    y = torch.zeros_like(y).scatter(2, order[:, None, :].expand(B, C, T), y)
    y = torch.where(pad[:, None, :], torch.zeros_like(y), y)
    real = (~pad).sum(dim=1)  # (B,): the window ends after the last real step
    index = real[:, None] + torch.arange(K - 1, device=input.device)  # (B, K-1) into full
    present = torch.gather(full, 2, index[:, None, :].expand(B, C, K - 1))
    return y.to(input.dtype), present
