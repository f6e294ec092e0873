"""Query and key heads as the recurrence reads them: L2-normalised (``qk_l2_norm``) and grouped.

The op takes two groupings of heads (:func:`.checks.head_counts`): grouped query (the standard's GQA, H_q a
multiple of H_kv) runs as is; grouped value (H_kv a multiple of H_q, Gated DeltaNet with more value heads than
key heads) repeats each query and key head H_kv / H_q times, so that every state head has its own query and
key head and the grouped-query path applies with H_q = H_kv. The normalisation is per head, over d_k, before
the grouping: x / sqrt(sum(x^2) + :data:`.checks.QK_L2_NORM_EPS`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .checks import QK_L2_NORM_EPS


def l2_normalize_heads(x: Tensor, heads: int) -> Tensor:
    """x (B, T, heads*d) with each head's vector divided by sqrt(sum(x^2) + eps), in x's dtype."""
    B, T, width = x.shape
    xh = x.reshape(B, T, heads, width // heads)
    return (xh / torch.sqrt((xh * xh).sum(-1, keepdim=True) + QK_L2_NORM_EPS)).reshape(B, T, width)


def repeat_heads(x: Tensor, heads: int, repeats: int) -> Tensor:
    """x (B, T, heads*d) -> (B, T, heads*repeats*d): each head repeated ``repeats`` times in place."""
    if repeats == 1:
        return x
    B, T, width = x.shape
    d = width // heads
    return x.reshape(B, T, heads, 1, d).expand(B, T, heads, repeats, d).reshape(B, T, heads * repeats * d)


def prepare_query_key(
    query: Tensor, key: Tensor, q_num_heads: int, kv_num_heads: int, qk_l2_norm: int
) -> tuple[Tensor, Tensor, int]:
    """``(query, key, H_q)`` for the grouped-query recurrence: normalised when ``qk_l2_norm``, and for grouped
    value (H_kv > H_q) each head repeated H_kv / H_q times, H_q becoming H_kv. Computes in the inputs' dtype."""
    key_heads = min(q_num_heads, kv_num_heads)
    if qk_l2_norm:
        query, key = l2_normalize_heads(query, q_num_heads), l2_normalize_heads(key, key_heads)
    if kv_num_heads > q_num_heads:
        repeats = kv_num_heads // q_num_heads
        return repeat_heads(query, q_num_heads, repeats), repeat_heads(key, q_num_heads, repeats), kv_num_heads
    return query, key, q_num_heads
