"""The SRU elementwise recurrence as a plain time loop: slow, obviously correct, used by the tests.

Layouts are those of :data:`rnnx.runtime.contract.ops.SRU_SCAN`. Per direction ``dr`` and step ``t``
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

from rnnx.models.ops.dtypes import state_dtype


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
    acc = state_dtype(U.dtype)
    u = U.to(acc).reshape(L, B, D, d, k)
    v_f, v_r = weight_c.to(acc).reshape(2, D, d)
    b_f, b_r = bias.to(acc).reshape(2, D, d)
    c_init = c0.to(acc).reshape(B, D, d)
    if has_skip_term:
        skip = u[..., 3] if k == 4 else x.to(acc).reshape(L, B, D, d) * scale_x
    pad = None if mask_pad is None else (mask_pad.reshape(L, B) != 0)
    # Inputs are taken apart per step (unbind) and h_t is stacked at the end, rather than indexing
    # and writing the whole (L, ...) tensors at every step, so autograd through the loop stays
    # linear in L.
    u_steps = u.unbind(0)
    skip_steps = skip.unbind(0) if has_skip_term else None

    h_dirs, c_last = [], []
    for dr in range(D):
        c = c_init[:, dr]
        h_of_t: dict[int, Tensor] = {}
        steps = range(L) if dr == 0 else range(L - 1, -1, -1)
        for t in steps:
            f = torch.sigmoid(u_steps[t][:, dr, :, 1] + v_f[dr] * c + b_f[dr])
            r = torch.sigmoid(u_steps[t][:, dr, :, 2] + v_r[dr] * c + b_r[dr])
            c_new = f * c + (1 - f) * u_steps[t][:, dr, :, 0]
            g = torch.tanh(c_new) if use_tanh else c_new
            h_t = r * g + (1 - r) * skip_steps[t][:, dr] if has_skip_term else r * g
            if pad is not None:
                keep = pad[t].unsqueeze(-1)
                c_new = torch.where(keep, c, c_new)
                h_t = torch.where(keep, torch.zeros_like(h_t), h_t)
            c = c_new
            h_of_t[t] = h_t
        h_dirs.append(torch.stack([h_of_t[t] for t in range(L)]) if L > 0 else u.new_zeros(0, B, d))
        c_last.append(c)
    h = torch.stack(h_dirs, dim=2)
    c_last = torch.stack(c_last, dim=1)
    return h.reshape(L, B, D * d).to(U.dtype), c_last.reshape(B, D * d).to(c0.dtype)
