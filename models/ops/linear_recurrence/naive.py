"""ONNX opset 27's ``LinearAttention`` and ``CausalConvWithState`` as plain float64 token loops.

Slow, obviously correct references for the tests (the twins every later kernel is checked against).
Inputs may be of any float dtype; the loops compute in float64.

``LinearAttention`` takes heads packed, as the standard does::

    query (B, T, H_q*d_k)    key (B, T, H_kv*d_k)    value (B, T, H_kv*d_v)
    past_state (B, H_kv, d_k, d_v)    decay (B, T, H_kv) or (B, T, H_kv*d_k)    beta (B, T, H_kv) or (B, T, 1)

Per kv head, with state S (d_k x d_v), a_t = exp(decay_t) (log space: a scalar per head, or a diagonal
per key dim) and beta_t::

    linear:      S_t = S_{t-1} + k_t v_t^T
    gated:       S_t = a_t S_{t-1} + k_t v_t^T
    delta:       S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
    gated_delta: S_t = a_t S_{t-1} + beta_t k_t (v_t - (a_t S_{t-1})^T k_t)^T
    o_t = scale * S_t^T q_t                                   (scale 0 means 1/sqrt(d_k))

Group-query attention: H_q is a multiple G of H_kv and query head h reads kv head h // G (the standard's
function body repeats each kv state G times along the head axis). rnnx adds ``pad_mask`` (B, T), non-zero
= pad: at a pad step the state is carried unchanged and that step's output is read from the carried
state, so a right-padded batch equals each row run alone. rnnx also takes the grouping the other way
round (grouped value: H_kv a multiple R of H_q, query and key (B, T, H_q*d_k), query / key head h serving
the states and value heads h*R .. h*R+R-1, output (B, T, H_kv*d_v)) and ``qk_l2_norm`` (each query and key
head divided by sqrt(sum(x^2) + 1e-6) first), as Gated DeltaNet layers need.

``CausalConvWithState`` is depthwise and channels-first::

    input (B, C, T)    weight (C, 1, K)    bias (C,)    past_state (B, C, K-1)
    y[b, c, t] = bias[c] + sum_{j=0}^{K-1} weight[c, 0, j] * x[b, c, t - (K-1) + j]

where x is ``past_state`` (zeros when absent) followed by ``input``; the present state is the last K-1
columns of that concatenation, and ``activation`` is ``"none"`` or ``"silu"`` / ``"swish"`` (y * sigmoid(y)).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from ..causal_linear_attention.naive import DEFAULT_EPS, feature_map
from .checks import QK_L2_NORM_EPS, RecurrenceInputs, check_inputs

_F64 = torch.float64


def linear_recurrence_naive(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    past_state: Optional[Tensor] = None,
    decay: Optional[Tensor] = None,
    beta: Optional[Tensor] = None,
    *,
    q_num_heads: int,
    kv_num_heads: int,
    update_rule: str = "gated_delta",
    scale: float = 0.0,
    pad_mask: Optional[Tensor] = None,
    qk_l2_norm: int = 0,
) -> tuple[Tensor, Tensor]:
    """ONNX-27 ``LinearAttention`` (plus rnnx's ``pad_mask``, grouped value and ``qk_l2_norm``) as a float64
    token loop.

    Shapes as in the module docstring; ``decay`` only for ``gated`` / ``gated_delta``, ``beta`` only for
    ``delta`` / ``gated_delta`` (anything else is refused, as ONNX shape inference refuses it).
    Absent ``past_state`` is zeros.

    Returns ``(output (B, T, max(H_q, H_kv)*d_v) in query's dtype, present_state (B, H_kv, d_k, d_v) in float64)``.
    The state stays float64 (unlike the standard, which casts it to past_state's or query's dtype) so
    that a caller chaining calls, or comparing a kernel's fp32 state, loses nothing to the reference.
    """
    inputs = RecurrenceInputs(
        query, key, value, past_state, decay, beta, pad_mask, q_num_heads, kv_num_heads, update_rule, scale, qk_l2_norm
    )
    B, T, d_k, d_v, H_o = check_inputs(inputs)
    H_kv = kv_num_heads
    q = query.to(_F64).reshape(B, T, q_num_heads, d_k)
    k = key.to(_F64).reshape(B, T, min(q_num_heads, H_kv), d_k)
    if qk_l2_norm:
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + QK_L2_NORM_EPS)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + QK_L2_NORM_EPS)
    if H_kv > q_num_heads:  # grouped value: state head h reads query / key head h // (H_kv / H_q)
        q = q.repeat_interleave(H_kv // q_num_heads, dim=2)
        k = k.repeat_interleave(H_kv // q_num_heads, dim=2)
    G = H_o // H_kv
    v = value.to(_F64).reshape(B, T, H_kv, d_v)
    # log-space decay -> multiplier (B, T, H_kv, 1 or d_k, 1): a scalar per head, or one per key row of S
    a = None if decay is None else decay.to(_F64).reshape(B, T, H_kv, -1).exp().unsqueeze(-1)
    b = None if beta is None else beta.to(_F64).reshape(B, T, -1, 1)  # (B, T, H_kv or 1, 1)
    pad = None if pad_mask is None else pad_mask != 0
    s = float(scale) if scale != 0.0 else 1.0 / math.sqrt(d_k)

    S = past_state.to(_F64).clone() if past_state is not None else query.new_zeros((B, H_kv, d_k, d_v), dtype=_F64)
    outs = []
    for t in range(T):
        S_prev = S if a is None else a[:, t] * S
        k_t = k[:, t]  # (B, H_kv, d_k)
        if b is None:
            write = v[:, t]  # (B, H_kv, d_v)
        else:
            retrieved = torch.einsum("bhkv,bhk->bhv", S_prev, k_t)
            write = b[:, t] * (v[:, t] - retrieved)
        S_new = S_prev + k_t.unsqueeze(-1) * write.unsqueeze(-2)
        S = S_new if pad is None else torch.where(pad[:, t, None, None, None], S, S_new)
        S_read = S.repeat_interleave(G, dim=1)  # (B, H_q, d_k, d_v): query head h reads kv head h // G
        outs.append(s * torch.einsum("bhk,bhkv->bhv", q[:, t], S_read))
    out = torch.stack(outs, dim=1) if outs else q.new_zeros((B, 0, H_o, d_v))
    return out.reshape(B, T, H_o * d_v).to(query.dtype), S


def katharopoulos_as_linear(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    num_heads: int,
    S0: Optional[Tensor] = None,
    z0: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
    eps: float = DEFAULT_EPS,
) -> tuple[Tensor, Tensor, Tensor]:
    """rnnx's normalised causal linear attention as the ``linear`` rule plus one division.

    q, k (B, L, H*E), v (B, L, H*M), S0 (B, H, E, M), z0 (B, H, E), mask_pad (B, L) non-zero = pad.
    With phi(x) = elu(x) + 1 it runs :func:`linear_recurrence_naive` (``update_rule="linear"``, scale 1)
    on phi(q), phi(k) * (1 - pad) and [v | 1] per head, from the state [S0 | z0] (B, H, E, M+1); the
    pad step's zero key makes it a no-op, as the standard op (which has no pad mask) would see it. Then
    out = num[..., :M] / (num[..., M] + eps).

    Returns ``(out (B, L, H*M) in q's dtype, S (B, H, E, M), z (B, H, E))``, the state in float64.
    """
    B, L, HE = q.shape
    H = num_heads
    E, M = HE // H, v.shape[-1] // H
    phi_q = feature_map(q.to(_F64))
    phi_k = feature_map(k.to(_F64))
    if mask_pad is not None:
        phi_k = phi_k * (mask_pad == 0).to(_F64).unsqueeze(-1)
    v_ext = torch.cat([v.to(_F64).reshape(B, L, H, M), v.new_ones((B, L, H, 1), dtype=_F64)], dim=-1)
    S_init = S0.to(_F64) if S0 is not None else q.new_zeros((B, H, E, M), dtype=_F64)
    z_init = z0.to(_F64) if z0 is not None else q.new_zeros((B, H, E), dtype=_F64)
    state0 = torch.cat([S_init, z_init.unsqueeze(-1)], dim=-1)
    num, state = linear_recurrence_naive(
        phi_q, phi_k, v_ext.reshape(B, L, H * (M + 1)), state0,
        q_num_heads=H, kv_num_heads=H, update_rule="linear", scale=1.0,
    )  # fmt: skip
    num = num.reshape(B, L, H, M + 1)
    out = num[..., :M] / (num[..., M:] + eps)
    return out.reshape(B, L, H * M).to(q.dtype), state[..., :M], state[..., M]
