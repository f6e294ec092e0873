"""The linear recurrence in plain torch: a chunked prefill and a one-token step, for every device.

Differentiable by torch's autograd (every step is an ordinary torch op), so the registered op's backward
re-runs this forward under autograd. The maths, per kv head with state S (d_k x d_v), the cumulative
log decay b_t = sum_{s <= t} g_s inside a chunk (g = 0 for the ungated rules; per head or per key dim) and
the *written values* w_t (v_t for linear / gated; for the delta rules
w_t = beta_t (v_t - (exp(g_t) S_{t-1})^T k_t)), so that every rule reads ``S_t = exp(g_t) S_{t-1} + k_t w_t^T``::

    S_t = diag(e^{b_t}) S_0 + sum_{s <= t} diag(e^{b_t - b_s}) k_s w_s^T
    o_t = scale * (S_0^T (e^{b_t} q_t) + sum_{s <= t} <q_t, e^{b_t - b_s} k_s> w_s)
    delta rules: (I + diag(beta) KK) W = diag(beta) (V - K~ S_0),  KK[t, s] = <k_t, e^{b_t - b_s} k_s> (s < t),
                 K~_t = e^{b_t} k_t: one unit-lower-triangular solve per chunk

Inside a chunk the terms are matrices (all chunks at once); across chunks only the state is carried, in a
loop over T / chunk steps. Every exponent is b_t - b_s with s <= t or b_t alone, never positive, so nothing
overflows whatever the decay. Computed in the state dtype (fp32; fp64 for fp64 inputs).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ..dtypes import state_dtype
from .checks import DELTA_RULES, RecurrenceInputs, check_inputs
from .heads import prepare_query_key

#: Tokens per chunk with a decay per head (or none): the intra-chunk terms are (chunk x chunk) matrices.
DEFAULT_CHUNK_SIZE = 64
#: Tokens per chunk with a decay per key dim, whose intra-chunk terms are (chunk x chunk x d_k).
PER_KEY_CHUNK_SIZE = 16


def _heads(x: Tensor, heads: int, dtype: torch.dtype) -> Tensor:
    """(B, T, H*D) -> (B, H, T, D) in ``dtype``."""
    B, T, HD = x.shape
    return x.to(dtype).reshape(B, T, heads, HD // heads).transpose(1, 2)


def linear_recurrence_forward(x: RecurrenceInputs, chunk_size: Optional[int] = None) -> tuple[Tensor, Tensor]:
    """The op (layouts of :data:`rnnx.runtime.contract.ops.LINEAR_RECURRENCE`): ``(output, present_state)``.

    ``output`` (B, T, max(H_q, H_kv)*d_v) has query's dtype, ``present_state`` (B, H_kv, d_k, d_v) the state dtype.
    T == 1 takes the one-token step; longer inputs the chunked form (``chunk_size`` tokens per chunk; by
    default :data:`DEFAULT_CHUNK_SIZE`, or :data:`PER_KEY_CHUNK_SIZE` with a decay per key dim).
    """
    B, T, d_k, d_v, H_o = check_inputs(x)
    query, key, value, past_state, decay, beta, mask_pad, q_num_heads, kv_num_heads, update_rule, scale, qk_l2_norm = x
    H, G = kv_num_heads, H_o // kv_num_heads
    dt = state_dtype(query.dtype)
    s = float(scale) if scale != 0.0 else 1.0 / math.sqrt(d_k)
    act = query.dtype
    query, key, _ = prepare_query_key(query.to(dt), key.to(dt), q_num_heads, kv_num_heads, qk_l2_norm)
    q = _heads(query, H_o, dt).reshape(B, H, G, T, d_k)  # query head h*G + j reads kv head h
    k, v = _heads(key, H, dt), _heads(value, H, dt)  # (B, H, T, d_k), (B, H, T, d_v)
    g = None if decay is None else _heads(decay, H, dt)  # (B, H, T, 1 or d_k)
    bt = None
    if beta is not None:
        bt = beta.to(dt).expand(B, T, H).transpose(1, 2)  # (B, H, T)
    if mask_pad is not None:  # a pad step writes nothing and does not decay: the state is carried
        keep = (mask_pad == 0).to(dt)[:, None, :, None]  # (B, 1, T, 1)
        k = k * keep
        g = None if g is None else g * keep
    S0 = past_state.to(dt) if past_state is not None else query.new_zeros((B, H, d_k, d_v), dtype=dt)
    delta = update_rule in DELTA_RULES
    if T == 1:
        out, S = _step(q, k, v, g, bt, S0, delta, s)
    else:
        per_key = g is not None and g.shape[-1] > 1
        C = chunk_size or (PER_KEY_CHUNK_SIZE if per_key else DEFAULT_CHUNK_SIZE)
        out, S = _chunked(q, k, v, g, bt, S0, delta, s, C)
    # (B, H, G, T, d_v) -> (B, T, H*G*d_v): query heads in order h*G + j
    out = out.permute(0, 3, 1, 2, 4).reshape(B, T, H_o * d_v)
    return out.to(act), S


def _step(
    q: Tensor, k: Tensor, v: Tensor, g: Optional[Tensor], bt: Optional[Tensor], S: Tensor, delta: bool, s: float
) -> tuple[Tensor, Tensor]:
    """One token (T = 1): the recurrence itself. q (B, H, G, 1, d_k), k (B, H, 1, d_k), v (B, H, 1, d_v)."""
    if g is not None:
        S = g[:, :, 0, :, None].exp() * S  # (B, H, 1 or d_k, 1) * (B, H, d_k, d_v)
    k0, v0 = k[:, :, 0], v[:, :, 0]  # (B, H, d_k), (B, H, d_v)
    w = v0
    if delta:
        assert bt is not None
        w = bt[:, :, :1] * (v0 - torch.einsum("bhkv,bhk->bhv", S, k0))
    S = S + k0[..., :, None] * w[..., None, :]
    out = s * torch.einsum("bhgtk,bhkv->bhgtv", q, S)
    return out, S


def _chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Optional[Tensor],
    bt: Optional[Tensor],
    S: Tensor,
    delta: bool,
    s: float,
    C: int,
) -> tuple[Tensor, Tensor]:
    """The chunked form (module docstring). Shapes as :func:`_step` with T tokens; returns out (B, H, G, T, d_v)."""
    B, H, G, T, d_k = q.shape
    n = -(-T // C)
    pad = n * C - T  # zero tokens at the end: no key, no decay, so they change nothing

    def chunks(x: Tensor, time_dim: int) -> Tensor:
        x = F.pad(x, [0, 0] * (x.dim() - 1 - time_dim) + [0, pad]) if pad else x
        return x.reshape(*x.shape[:time_dim], n, C, *x.shape[time_dim + 1 :])

    qc = chunks(q, 3)  # (B, H, G, n, C, d_k)
    kc, vc = chunks(k, 2), chunks(v, 2)  # (B, H, n, C, d_k / d_v)
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    strict = causal.tril(-1)
    if g is None:
        b = None
        qk = torch.einsum("bhgnck,bhnsk->bhgncs", qc, kc)
        kk = torch.einsum("bhnck,bhnsk->bhncs", kc, kc)
        q_dec, k_tilde, k_to_end, e_end = qc, kc, kc, None
    else:
        b = chunks(g, 2).cumsum(dim=3)  # (B, H, n, C, Dg) cumulative log decay inside the chunk
        diff = b[:, :, :, :, None, :] - b[:, :, :, None, :, :]  # (B, H, n, C_t, C_s, Dg): b_t - b_s
        rel = torch.where(causal[:, :, None], diff, torch.full_like(diff, -math.inf)).exp()
        if b.shape[-1] == 1:
            rel = rel[..., 0]  # (B, H, n, C, C)
            qk = torch.einsum("bhgnck,bhnsk->bhgncs", qc, kc) * rel[:, :, None]
            kk = torch.einsum("bhnck,bhnsk->bhncs", kc, kc) * rel
        else:
            qk = torch.einsum("bhgnck,bhncsk,bhnsk->bhgncs", qc, rel, kc)
            kk = torch.einsum("bhnck,bhncsk,bhnsk->bhncs", kc, rel, kc)
        q_dec = qc * b.exp()[:, :, None]  # e^{b_t} q_t
        k_tilde = kc * b.exp()  # e^{b_t} k_t
        k_to_end = kc * (b[:, :, :, -1:, :] - b).exp()  # e^{b_end - b_s} k_s
        e_end = b[:, :, :, -1, :].exp()[..., None]  # (B, H, n, Dg, 1)
    qk = qk * causal
    if delta:
        assert bt is not None
        beta_c = chunks(bt, 2)[..., None]  # (B, H, n, C, 1)
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        A = eye + beta_c * (kk * strict)  # unit lower triangular
        u = torch.linalg.solve_triangular(A, beta_c * vc, upper=False, unitriangular=True)
        wk = torch.linalg.solve_triangular(A, beta_c * k_tilde, upper=False, unitriangular=True)
    outs = []
    for c in range(n):
        w = vc[:, :, c] if not delta else u[:, :, c] - wk[:, :, c] @ S  # (B, H, C, d_v)
        inter = torch.einsum("bhgck,bhkv->bhgcv", q_dec[:, :, :, c], S)
        intra = torch.einsum("bhgcs,bhsv->bhgcv", qk[:, :, :, c], w)
        outs.append(s * (inter + intra))
        decayed = S if e_end is None else e_end[:, :, c] * S
        S = decayed + k_to_end[:, :, c].transpose(-1, -2) @ w
    out = torch.cat(outs, dim=3)[:, :, :, :T]  # (B, H, G, T, d_v)
    return out, S
