"""The SRU elementwise recurrence as a plain time loop: slow, obviously correct, used by the tests.

Layouts are those of :data:`rnnx.models.ops.spec.SRU_SCAN`. Per direction ``dr`` and step ``t``
(the backward direction walks t from L-1 down to 0)::

    f_t = sigmoid(U_f,t + v_f * c_{t-1} + b_f)
    r_t = sigmoid(U_r,t + v_r * c_{t-1} + b_r)
    c_t = f_t * c_{t-1} + (1 - f_t) * U_x~,t
    h_t = r_t * g(c_t) + (1 - r_t) * x'_t

and on a pad step (``mask_pad[t, b] != 0``) ``c_t = c_{t-1}`` and ``h_t = 0``.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..spec import state_dtype_for


def sru_scan_naive(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Tensor,
    mask_pad: Optional[Tensor] = None,
    *,
    hidden_size: int,
    num_directions: int = 1,
    num_matrices: int = 3,
    has_skip_term: bool = True,
    use_tanh: bool = False,
    scale_x: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """Reference SRU scan. Returns ``h`` (L, B, D*d) in U's dtype and ``c_last`` (B, D*d) in c0's.

    Computes in the state dtype (fp32, or fp64 for fp64 inputs), one step at a time.
    """
    L, B = U.shape[0], U.shape[1]
    D, d, k = num_directions, hidden_size, num_matrices
    acc = state_dtype_for(U.dtype)
    u = U.to(acc).reshape(L, B, D, d, k)
    v_f, v_r = weight_c.to(acc).reshape(2, D, d)
    b_f, b_r = bias.to(acc).reshape(2, D, d)
    c_init = c0.to(acc).reshape(B, D, d)
    if has_skip_term:
        skip = u[..., 3] if k == 4 else x.to(acc).reshape(L, B, D, d) * scale_x
    pad = None if mask_pad is None else (mask_pad.reshape(L, B) != 0)

    h = torch.zeros(L, B, D, d, dtype=acc, device=U.device)
    c_last = torch.empty(B, D, d, dtype=acc, device=U.device)
    for dr in range(D):
        c = c_init[:, dr]
        steps = range(L) if dr == 0 else range(L - 1, -1, -1)
        for t in steps:
            f = torch.sigmoid(u[t, :, dr, :, 1] + v_f[dr] * c + b_f[dr])
            r = torch.sigmoid(u[t, :, dr, :, 2] + v_r[dr] * c + b_r[dr])
            c_new = f * c + (1 - f) * u[t, :, dr, :, 0]
            g = torch.tanh(c_new) if use_tanh else c_new
            h_t = r * g + (1 - r) * skip[t, :, dr] if has_skip_term else r * g
            if pad is not None:
                keep = pad[t].unsqueeze(-1)
                c_new = torch.where(keep, c, c_new)
                h_t = torch.where(keep, torch.zeros_like(h_t), h_t)
            c = c_new
            h[t, :, dr] = h_t
        c_last[:, dr] = c
    return h.reshape(L, B, D * d).to(U.dtype), c_last.reshape(B, D * d).to(c0.dtype)
