"""Chunked causal linear attention: the fast, device-agnostic pure-torch forward and backward.

:func:`chunked_forward` / :func:`chunked_backward` take the op's layout
(:data:`rnnx.runtime.contract.ops.CAUSAL_LINEAR_ATTENTION`: heads packed, q (B, L, H*E), (L, B, H*E) time-major,
and a pad mask) and compute with the heads apart (:func:`chunked_forward_heads`, :func:`chunked_backward_heads`)::

    q, k (B, H, L, E)    v (B, H, L, M)    S0 (B, H, E, M)    z0 (B, H, E)    keep (B, 1, L, 1)

A pad step has keep = 0: its phi(k) and v are zeroed, so it adds nothing to any state or other step.

Notation per (batch, head): Q = phi(q), K = phi(k) with phi(x) = elu(x) + 1, all in the state dtype
(fp32, fp64 for fp64 inputs). The sequence is cut into chunks of ``chunk_size`` rows (the last one
may be shorter). Inside a chunk c with state (S, z) at its start and the causal mask A = tril(Q_c K_c^T)::

    num_c = Q_c S + A V_c              (C, M)
    den_c = Q_c z + A 1 + eps          (C,)
    out_c = num_c / den_c
    S <- S + K_c^T V_c,   z <- z + K_c^T 1

so only the (E, M) state crosses chunk boundaries. A single step (L = 1) skips the chunk machinery.

The backward recomputes everything from q, k, v, S0, z0. With g_num = dout / den and
g_den = -(dout . num) / den^2 (the gradients reaching num_t and den_t), it runs two sweeps:

* forward in time, recomputing the state S_t, z_t at each chunk start, for
  dQ_t = S_t g_num_t + g_den_t z_t;
* backward in time, carrying the reverse-time state gradients G = dL/dS_t (E, M) and g = dL/dz_t (E,),
  started from the gradients of S_last and z_last, for
  dK_s = G_s v_s + g_s,  dV_s = G_s^T K_s,  and finally dS0 = G_0, dz0 = g_0.

Neither sweep materialises a per-step state: the largest per-call intermediates are (B, H, L, E|M)
and (B, H, C, C). The chain rule through phi uses phi'(x) = 1 for x > 0 and exp(x) otherwise, which
is min(phi(x), 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype

from .checks import AttentionInputs
from .naive import DEFAULT_EPS, feature_map, heads_apart, heads_packed

#: Rows per chunk in the chunked path (a tuning knob, not part of the op contract).
DEFAULT_CHUNK_SIZE: int = 64


def feature_map_grad_from_value(phi_x: Tensor) -> Tensor:
    """d phi(x) / dx given phi(x) = elu(x) + 1: 1 where x > 0, exp(x) = phi(x) <= 1 elsewhere,
    i.e. min(phi(x), 1)."""
    return phi_x.clamp(max=1.0)


def _state_or_zeros(
    S0: Optional[Tensor], z0: Optional[Tensor], shape_S: tuple[int, ...], like: Tensor
) -> tuple[Tensor, Tensor]:
    """``(S0, z0)`` as state-dtype tensors like ``like``; zeros (shape_S) / (shape_S[:-1]) where absent."""
    S = S0.to(like.dtype) if S0 is not None else like.new_zeros(shape_S)
    z = z0.to(like.dtype) if z0 is not None else like.new_zeros(shape_S[:-1])
    return S, z


def _features(q: Tensor, k: Tensor, v: Tensor, keep: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    """phi(q), phi(k) and v in the state dtype; phi(k) and v zeroed where ``keep`` is 0."""
    dtype = state_dtype(q.dtype)
    Qf, Kf, Vf = feature_map(q.to(dtype)), feature_map(k.to(dtype)), v.to(dtype)
    if keep is not None:
        Kf, Vf = Kf * keep, Vf * keep
    return Qf, Kf, Vf


def keep_factor(mask_pad: Optional[Tensor], dtype: torch.dtype, time_major: bool) -> Optional[Tensor]:
    """(B, 1, L, 1) in ``dtype``: 1 at real steps, 0 at pads of ``mask_pad`` ((B, L), or (L, B) time-major,
    non-zero = pad); None for no mask."""
    if mask_pad is None:
        return None
    mask = mask_pad.t() if time_major else mask_pad
    return (mask == 0).to(dtype)[:, None, :, None]


def _heads_apart_inputs(x: AttentionInputs) -> tuple[list[Tensor], Optional[Tensor]]:
    """q, k, v of the op's layout with the heads apart, ``[(B, H, L, E), (B, H, L, E), (B, H, L, M)]`` (views), and
    the pad mask's keep factor (:func:`keep_factor`, in the state dtype)."""
    time_major = bool(x.time_major)
    keep = keep_factor(x.mask_pad, state_dtype(x.q.dtype), time_major)
    return [heads_apart(t, x.num_heads, time_major) for t in (x.q, x.k, x.v)], keep


def _causal_mask(chunk_size: int, device: torch.device) -> Tensor:
    """(C, C) bool, True where column s <= row t."""
    return torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=device).tril()


def _check_chunk_size(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")


def chunked_forward(x: AttentionInputs, chunk_size: int = DEFAULT_CHUNK_SIZE) -> tuple[Tensor, Tensor, Tensor]:
    """The op's forward on its layout (:class:`.checks.AttentionInputs`). Returns ``(out (B, L, H*M) (or (L, B, H*M))
    in q's dtype, S_last, z_last)``. Inputs are assumed validated (:func:`.checks.check_inputs`)."""
    apart, keep = _heads_apart_inputs(x)
    out, S, z = chunked_forward_heads(*apart, x.S0, x.z0, keep, x.eps, chunk_size)
    return heads_packed(out, bool(x.time_major)), S, z


def chunked_forward_heads(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    S0: Optional[Tensor] = None,
    z0: Optional[Tensor] = None,
    keep: Optional[Tensor] = None,
    eps: float = DEFAULT_EPS,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[Tensor, Tensor, Tensor]:
    """Chunked forward with the heads apart, q (B, H, L, E), keep (B, 1, L, 1) or None. Returns ``(out (B, H, L, M)
    in q's dtype, S_last (B, H, E, M), z_last (B, H, E))``, the states in the state dtype."""
    _check_chunk_size(chunk_size)
    B, H, L, E = q.shape
    M = v.shape[-1]
    Qf, Kf, Vf = _features(q, k, v, keep)
    S, z = _state_or_zeros(S0, z0, (B, H, E, M), Qf)
    if L == 0:
        return q.new_empty((B, H, 0, M)), S.clone(), z.clone()
    if L == 1:
        S = S + Kf.mT @ Vf  # (B, H, E, 1) @ (B, H, 1, M)
        z = z + Kf[:, :, 0]
        num = Qf @ S  # (B, H, 1, M)
        den = Qf @ z.unsqueeze(-1) + eps  # (B, H, 1, 1)
        return (num / den).to(q.dtype), S, z
    out = q.new_empty((B, H, L, M))
    mask = _causal_mask(min(chunk_size, L), q.device)
    for t0 in range(0, L, chunk_size):
        t1 = min(t0 + chunk_size, L)
        Qc, Kc, Vc = Qf[:, :, t0:t1], Kf[:, :, t0:t1], Vf[:, :, t0:t1]
        A = (Qc @ Kc.mT).masked_fill_(~mask[: t1 - t0, : t1 - t0], 0.0)  # (B, H, c, c)
        num = Qc @ S + A @ Vc
        den = Qc @ z.unsqueeze(-1) + A.sum(-1, keepdim=True) + eps
        out[:, :, t0:t1] = num / den
        S = S + Kc.mT @ Vc
        z = z + Kc.sum(-2)
    return out, S, z


def chunked_backward(
    x: AttentionInputs, grads: Sequence[Optional[Tensor]], chunk_size: int = DEFAULT_CHUNK_SIZE
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of :func:`chunked_forward` on the op's layout, from ``grads``, the incoming gradients of its outputs
    (out, S_last, z_last; None means zero): dq, dk, dv packed like q, k, v; dS0, dz0."""
    grad_out, grad_S, grad_z = grads
    apart, keep = _heads_apart_inputs(x)
    time_major = bool(x.time_major)
    dO = None if grad_out is None else heads_apart(grad_out, x.num_heads, time_major)
    dq, dk, dv, dS0, dz0 = chunked_backward_heads(*apart, x.S0, x.z0, keep, x.eps, dO, grad_S, grad_z, chunk_size)
    return heads_packed(dq, time_major), heads_packed(dk, time_major), heads_packed(dv, time_major), dS0, dz0


def chunked_backward_heads(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    S0: Optional[Tensor],
    z0: Optional[Tensor],
    keep: Optional[Tensor],
    eps: float,
    grad_out: Optional[Tensor],
    grad_S: Optional[Tensor],
    grad_z: Optional[Tensor],
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of the chunked forward with the heads apart, recomputed from its inputs.

    ``grad_out`` (B, H, L, M), ``grad_S`` (B, H, E, M), ``grad_z`` (B, H, E) are the incoming gradients
    (``None`` means zero). Returns ``(dq, dk, dv, dS0, dz0)``: dq, dk, dv in the dtypes of q, k, v;
    dS0, dz0 in the state dtype (returned even when S0 / z0 were absent, as the gradient of zeros).
    """
    _check_chunk_size(chunk_size)
    B, H, L, E = q.shape
    M = v.shape[-1]
    Qf, Kf, Vf = _features(q, k, v, keep)
    dtype = Qf.dtype
    S, z = _state_or_zeros(S0, z0, (B, H, E, M), Qf)
    G = grad_S.to(dtype) if grad_S is not None else Qf.new_zeros((B, H, E, M))
    g = grad_z.to(dtype) if grad_z is not None else Qf.new_zeros((B, H, E))
    if L == 0 or grad_out is None:
        dO = Qf.new_zeros((B, H, L, M))
    else:
        dO = grad_out.to(dtype)
    mask = _causal_mask(max(min(chunk_size, L), 1), q.device)
    bounds = [(t0, min(t0 + chunk_size, L)) for t0 in range(0, L, chunk_size)]

    dQ = torch.empty_like(Qf)
    g_num = torch.empty_like(Vf)  # dL/dnum_t, (B, H, L, M)
    g_den = Qf.new_empty((B, H, L, 1))  # dL/dden_t
    for t0, t1 in bounds:
        Qc, Kc, Vc, dOc = Qf[:, :, t0:t1], Kf[:, :, t0:t1], Vf[:, :, t0:t1], dO[:, :, t0:t1]
        m = mask[: t1 - t0, : t1 - t0]
        A = (Qc @ Kc.mT).masked_fill_(~m, 0.0)
        num = Qc @ S + A @ Vc
        den = Qc @ z.unsqueeze(-1) + A.sum(-1, keepdim=True) + eps
        gn = dOc / den
        gd = -(gn * num).sum(-1, keepdim=True) / den
        g_num[:, :, t0:t1], g_den[:, :, t0:t1] = gn, gd
        # dQ_t = S_t gn_t + gd_t z_t with S_t = S + sum_{s<=t} K_s V_s^T, z_t = z + sum_{s<=t} K_s
        P = (gn @ Vc.mT).masked_fill_(~m, 0.0) + gd * m  # P_ts = gn_t.v_s + gd_t, s <= t
        dQ[:, :, t0:t1] = gn @ S.mT + gd * z.unsqueeze(-2) + P @ Kc
        S = S + Kc.mT @ Vc
        z = z + Kc.sum(-2)

    dK = torch.empty_like(Kf)
    dV = torch.empty_like(Vf)
    for t0, t1 in reversed(bounds):
        Qc, Kc, Vc = Qf[:, :, t0:t1], Kf[:, :, t0:t1], Vf[:, :, t0:t1]
        gn, gd = g_num[:, :, t0:t1], g_den[:, :, t0:t1]
        m = mask[: t1 - t0, : t1 - t0]
        # G_s = G + sum_{t>=s} Q_t gn_t^T and g_s = g + sum_{t>=s} gd_t Q_t inside the chunk
        A = (Qc @ Kc.mT).masked_fill_(~m, 0.0)
        P = (gn @ Vc.mT).masked_fill_(~m, 0.0) + gd * m
        dK[:, :, t0:t1] = Vc @ G.mT + g.unsqueeze(-2) + P.mT @ Qc
        dV[:, :, t0:t1] = Kc @ G + A.mT @ gn
        G = G + Qc.mT @ gn
        g = g + (Qc * gd).sum(-2)

    dq = (dQ * feature_map_grad_from_value(Qf)).to(q.dtype)
    dk = dK * feature_map_grad_from_value(Kf)  # 0 at pads, where Kf = 0
    if keep is not None:
        dV = dV * keep
    return dq, dk.to(k.dtype), dV.to(v.dtype), G, g
