"""Causal linear attention written the obvious ways: slow references for the tests and benchmarks.

The maths is written with the heads apart::

    q, k (B, H, L, E)    v (B, H, L, M)    S0 (B, H, E, M)    z0 (B, H, E)    mask_pad (B, L)

and :func:`causal_linear_attention_packed` takes the op's own layout
(:data:`rnnx.runtime.contract.ops.CAUSAL_LINEAR_ATTENTION`: heads packed, q (B, L, H*E), or (L, B, H*E) time-major),
moves the heads apart with view / permute and calls the recurrent form. Per (batch, head), with
phi(x) = elu(x) + 1::

    S_t = S_{t-1} + phi(k_t) v_t^T
    z_t = z_{t-1} + phi(k_t)
    o_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps)

At a pad step (``mask_pad`` non-zero) S and z are carried unchanged and o_t is read from them.

Both functions compute in the state dtype (fp32, or fp64 for fp64 inputs), return ``out`` in q's
dtype and the final ``(S, z)`` in the state dtype. Absent initial states are zeros. They are plain
differentiable torch code, so autograd through them is the reference for the gradients.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype
from rnnx.runtime.contract.ops import CAUSAL_LINEAR_ATTENTION

DEFAULT_EPS: float = float(CAUSAL_LINEAR_ATTENTION.attributes["eps"])


def feature_map(x: Tensor) -> Tensor:
    """phi(x) = elu(x) + 1, elementwise; positive everywhere."""
    return F.elu(x) + 1.0


def _initial_state(q: Tensor, v: Tensor, S0: Optional[Tensor], z0: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    """``(S0, z0)`` in the state dtype; zeros (B, H, E, M) / (B, H, E) where absent."""
    B, H, _, E = q.shape
    M = v.shape[-1]
    dtype = state_dtype(q.dtype)
    S = S0.to(dtype) if S0 is not None else q.new_zeros((B, H, E, M), dtype=dtype)
    z = z0.to(dtype) if z0 is not None else q.new_zeros((B, H, E), dtype=dtype)
    return S, z


def causal_linear_attention_quadratic(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    S0: Optional[Tensor] = None,
    z0: Optional[Tensor] = None,
    eps: float = DEFAULT_EPS,
    mask_pad: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """O(L^2) masked form: all (t, s) pairs with s <= t that are not pads, plus the initial state as a prefix.

    o_t = (phi(q_t)^T S0 + sum_{s<=t} (phi(q_t).phi(k_s)) v_s)
          / (phi(q_t)^T z0 + sum_{s<=t} phi(q_t).phi(k_s) + eps)

    Returns ``(out (B, H, L, M), S_last (B, H, E, M), z_last (B, H, E))``.
    """
    dtype = state_dtype(q.dtype)
    S, z = _initial_state(q, v, S0, z0)
    qf, kf, vf = feature_map(q.to(dtype)), feature_map(k.to(dtype)), v.to(dtype)
    L = q.shape[-2]
    mask = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    if mask_pad is not None:
        kf = kf * (mask_pad == 0).to(dtype)[:, None, :, None]  # a pad key is no pair of any step
        vf = vf * (mask_pad == 0).to(dtype)[:, None, :, None]
    scores = torch.einsum("bhte,bhse->bhts", qf, kf).masked_fill(~mask, 0.0)  # (B, H, L, L)
    num = torch.einsum("bhte,bhem->bhtm", qf, S) + torch.einsum("bhts,bhsm->bhtm", scores, vf)
    den = torch.einsum("bhte,bhe->bht", qf, z) + scores.sum(-1) + eps
    out = num / den.unsqueeze(-1)
    S_last = S + torch.einsum("bhse,bhsm->bhem", kf, vf)
    z_last = z + kf.sum(-2)
    return out.to(q.dtype), S_last, z_last


def causal_linear_attention_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    S0: Optional[Tensor] = None,
    z0: Optional[Tensor] = None,
    eps: float = DEFAULT_EPS,
    mask_pad: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The recurrence itself: one step per time index t = 0 .. L-1; a pad step (``mask_pad`` (B, L)
    non-zero) keeps S and z.

    Returns ``(out (B, H, L, M), S_last (B, H, E, M), z_last (B, H, E))``.
    """
    dtype = state_dtype(q.dtype)
    S, z = _initial_state(q, v, S0, z0)
    qf, kf, vf = feature_map(q.to(dtype)), feature_map(k.to(dtype)), v.to(dtype)
    outs = []
    for t in range(q.shape[-2]):
        pad = torch.zeros(q.shape[0], dtype=torch.bool, device=q.device) if mask_pad is None else mask_pad[:, t] != 0
        S = torch.where(pad[:, None, None, None], S, S + kf[:, :, t, :, None] * vf[:, :, t, None, :])
        z = torch.where(pad[:, None, None], z, z + kf[:, :, t])
        num = (qf[:, :, t, :, None] * S).sum(-2)  # (B, H, M)
        den = (qf[:, :, t] * z).sum(-1) + eps  # (B, H)
        outs.append(num / den.unsqueeze(-1))
    out = torch.stack(outs, dim=2) if outs else q.new_zeros(v.shape, dtype=dtype)
    return out.to(q.dtype), S, z


def heads_apart(x: Tensor, num_heads: int, time_major: bool = False) -> Tensor:
    """(B, L, H*D) — or (L, B, H*D) when ``time_major`` — -> (B, H, L, D), a view."""
    if time_major:
        L, B, HD = x.shape
        return x.view(L, B, num_heads, HD // num_heads).permute(1, 2, 0, 3)
    B, L, HD = x.shape
    return x.view(B, L, num_heads, HD // num_heads).permute(0, 2, 1, 3)


def heads_packed(x: Tensor, time_major: bool = False) -> Tensor:
    """(B, H, L, D) -> (B, L, H*D), or (L, B, H*D) when ``time_major``; contiguous."""
    B, H, L, D = x.shape
    order = (2, 0, 1, 3) if time_major else (0, 2, 1, 3)
    return x.permute(*order).reshape(*((L, B) if time_major else (B, L)), H * D)


def causal_linear_attention_packed(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    num_heads: int,
    S0: Optional[Tensor] = None,
    z0: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
    eps: float = DEFAULT_EPS,
    time_major: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    """The op's layout: q, k (B, L, H*E), v (B, L, H*M), mask_pad (B, L) — all time-major, (L, B, ...), with
    ``time_major`` — through :func:`causal_linear_attention_recurrent`. Returns ``(out (B, L, H*M) (or
    (L, B, H*M)), S_last (B, H, E, M), z_last (B, H, E))``."""
    mask = None if mask_pad is None else (mask_pad.t() if time_major else mask_pad)
    out, S, z = causal_linear_attention_recurrent(
        heads_apart(q, num_heads, time_major), heads_apart(k, num_heads, time_major),
        heads_apart(v, num_heads, time_major), S0, z0, eps, mask,
    )  # fmt: skip
    return heads_packed(out, time_major), S, z
