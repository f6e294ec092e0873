"""Device-agnostic torch implementation of the SRU scan, forward and backward (explicit formulas).

This is what ``rnnx::sru_scan`` runs on devices without a dedicated kernel (CUDA, until its kernel
lands) and on CPU when the C++ kernel cannot be built or is switched off. One python loop over
time; each step is a handful of elementwise torch ops over all (batch, direction, hidden) columns
at once. Both directions advance together: direction 1 is stored reversed in time ("scan order"),
so step ``s`` holds ``t = s`` for direction 0 and ``t = L-1-s`` for direction 1.

Layouts are those of :data:`rnnx.runtime.contract.ops.SRU_SCAN`; the maths is in ``naive.py``.
Arithmetic and state are in ``state_dtype(U.dtype)`` (rnnx.models.ops.dtypes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype

from .arguments import ScanAttributes, ScanTensors


def _scan_order(a: Tensor, D: int) -> Tensor:
    """(L, B, D, ...) -> the same with direction 1 reversed in time. Its own inverse."""
    if D == 1:
        return a
    return torch.cat([a[:, :, :1], a[:, :, 1:].flip(0)], dim=2)


@dataclass
class _Prepared:
    """Inputs in scan order and state dtype: u (L, B, D, d, k); skip (L, B, D, d) or None;
    v_f, v_r, b_f, b_r (D, d); keep (L, B, D, 1) bool pad mask or None."""

    u: Tensor
    skip: Optional[Tensor]
    v_f: Tensor
    v_r: Tensor
    b_f: Tensor
    b_r: Tensor
    keep: Optional[Tensor]


def _prepare(U, x, weight_c, bias, mask_pad, d, D, k, has_skip_term, scale_x) -> _Prepared:
    acc = state_dtype(U.dtype)
    L, B = U.shape[0], U.shape[1]
    u = _scan_order(U.to(acc).reshape(L, B, D, d, k), D)
    v_f, v_r = weight_c.to(acc).reshape(2, D, d)
    b_f, b_r = bias.to(acc).reshape(2, D, d)
    skip = None
    if has_skip_term:
        skip = u[..., 3] if k == 4 else _scan_order(x.to(acc).reshape(L, B, D, d), D) * scale_x
    keep = None
    if mask_pad is not None:
        pad = (mask_pad.reshape(L, B, 1) != 0).expand(L, B, D)
        keep = _scan_order(pad, D).unsqueeze(-1)
    return _Prepared(u, skip, v_f, v_r, b_f, b_r, keep)


def _gates(p: _Prepared, s: int, c: Tensor, use_tanh: bool):
    """f, r, c_t, g(c_t) of step s from c = c_{t-1} (B, D, d)."""
    us = p.u[s]
    f = torch.sigmoid(torch.addcmul(us[..., 1] + p.b_f, p.v_f, c))
    r = torch.sigmoid(torch.addcmul(us[..., 2] + p.b_r, p.v_r, c))
    cn = f * c + (1 - f) * us[..., 0]
    g = torch.tanh(cn) if use_tanh else cn
    return f, r, cn, g


def forward(tensors: ScanTensors, attrs: ScanAttributes) -> tuple[Tensor, Tensor]:
    """h (L, B, D*d) in U's dtype and c_last (B, D*d) in c0's dtype."""
    U, x, weight_c, bias, c0, mask_pad = tensors
    d, D, k, has_skip_term, use_tanh, scale_x = attrs
    L, B = U.shape[0], U.shape[1]
    p = _prepare(U, x, weight_c, bias, mask_pad, d, D, k, has_skip_term, scale_x)
    c = c0.to(p.u.dtype, copy=True).reshape(B, D, d)
    h = torch.empty(L, B, D, d, dtype=p.u.dtype, device=U.device)
    for s in range(L):
        _, r, cn, g = _gates(p, s, c, use_tanh)
        hs = r * g + (1 - r) * p.skip[s] if has_skip_term else r * g
        if p.keep is not None:
            cn = torch.where(p.keep[s], c, cn)
            hs = hs.masked_fill(p.keep[s], 0)
        c = cn
        h[s] = hs
    h = _scan_order(h, D).reshape(L, B, D * d).to(U.dtype)
    return h, c.reshape(B, D * d).to(c0.dtype)


def backward(
    grad_h: Tensor, grad_c: Tensor, tensors: ScanTensors, attrs: ScanAttributes
) -> tuple[Tensor, Optional[Tensor], Tensor, Tensor, Tensor]:
    """Gradients (dU (L, B, D*d*k), dx (L, B, D*d) or None, dweight_c (2*D*d,), dbias (2*D*d,),
    dc0 (B, D*d)) in the state dtype; dx is None unless k == 3 with the skip term.

    ``grad_h`` (L, B, D*d) and ``grad_c`` (B, D*d) are the gradients of h and c_last. The states
    c_{t-1} are recomputed by a forward pass, then time is walked in reverse.
    """
    U, x, weight_c, bias, c0, mask_pad = tensors
    d, D, k, has_skip_term, use_tanh, scale_x = attrs
    L, B = U.shape[0], U.shape[1]
    p = _prepare(U, x, weight_c, bias, mask_pad, d, D, k, has_skip_term, scale_x)
    acc = p.u.dtype
    c_prev = torch.empty(L, B, D, d, dtype=acc, device=U.device)
    c = c0.to(acc).reshape(B, D, d)
    for s in range(L):
        c_prev[s] = c
        _, _, cn, _ = _gates(p, s, c, use_tanh)
        c = cn if p.keep is None else torch.where(p.keep[s], c, cn)

    gh = _scan_order(grad_h.to(acc).reshape(L, B, D, d), D)
    dc = grad_c.to(acc, copy=True).reshape(B, D, d)
    dU = torch.zeros(L, B, D, d, k, dtype=acc, device=U.device)
    dskip = torch.zeros(L, B, D, d, dtype=acc, device=U.device) if has_skip_term else None
    g_vf = torch.zeros(B, D, d, dtype=acc, device=U.device)
    g_vr, g_bf, g_br = torch.zeros_like(g_vf), torch.zeros_like(g_vf), torch.zeros_like(g_vf)
    for s in range(L - 1, -1, -1):
        cp = c_prev[s]
        f, r, cn, g = _gates(p, s, cp, use_tanh)
        dh = gh[s]
        if p.keep is not None:
            dh = dh.masked_fill(p.keep[s], 0)
        dg = dh * r
        dcn = dc + (dg * (1 - g * g) if use_tanh else dg)
        dzf = dcn * (cp - p.u[s, ..., 0]) * f * (1 - f)
        d_r = dh * (g - p.skip[s]) if has_skip_term else dh * g
        dzr = d_r * r * (1 - r)
        du0 = dcn * (1 - f)
        dc_new = dcn * f + dzf * p.v_f + dzr * p.v_r
        if p.keep is not None:
            dzf = dzf.masked_fill(p.keep[s], 0)
            du0 = du0.masked_fill(p.keep[s], 0)
            dc_new = torch.where(p.keep[s], dc, dc_new)
        dU[s, ..., 0], dU[s, ..., 1], dU[s, ..., 2] = du0, dzf, dzr
        if has_skip_term:
            dskip[s] = dh * (1 - r)
        g_vf += dzf * cp
        g_vr += dzr * cp
        g_bf += dzf
        g_br += dzr
        dc = dc_new

    dx = None
    if has_skip_term and k == 4:
        dU[..., 3] = dskip
    elif has_skip_term:
        dx = _scan_order(dskip * scale_x, D).reshape(L, B, D * d)
    dU = _scan_order(dU, D).reshape(L, B, D * d * k).to(U.dtype)
    dweight_c = torch.stack([g_vf.sum(0), g_vr.sum(0)]).reshape(2 * D * d)
    dbias = torch.stack([g_bf.sum(0), g_br.sum(0)]).reshape(2 * D * d)
    return dU, dx, dweight_c, dbias, dc.reshape(B, D * d)
