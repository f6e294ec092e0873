"""Input checks of the linear recurrence: one-line errors naming the tensor, expected vs got.

The rules of :data:`rnnx.runtime.contract.ops.LINEAR_RECURRENCE` (ONNX opset 27's ``LinearAttention`` shape
inference, plus rnnx's pad mask); shared by the naive twin, the torch op and its fake implementation.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from torch import Tensor

from rnnx.runtime.contract.ops import QK_L2_NORM_EPS

__all__ = [
    "DELTA_RULES",
    "GATED_RULES",
    "QK_L2_NORM_EPS",
    "UPDATE_RULES",
    "RecurrenceInputs",
    "check_inputs",
    "head_counts",
]

#: The update rules, in the standard's spelling.
UPDATE_RULES: tuple[str, ...] = ("linear", "gated", "delta", "gated_delta")
#: Rules that take ``decay`` (log space, per head or per key dim).
GATED_RULES: frozenset[str] = frozenset({"gated", "gated_delta"})
#: Rules that take ``beta``.
DELTA_RULES: frozenset[str] = frozenset({"delta", "gated_delta"})


def head_counts(q_num_heads: int, kv_num_heads: int) -> tuple[int, int]:
    """``(H_k, H_o)``: the heads of query and key, and of the output, for the op's two groupings.

    Grouped query (H_q a multiple of H_kv, the standard's GQA): key has H_kv heads and the output H_q, query
    head h reading state h // (H_q / H_kv). Grouped value (H_kv a multiple of H_q, Gated DeltaNet's
    ``num_v_heads > num_k_heads``): query and key have H_q heads, each serving H_kv / H_q consecutive value
    heads and their states, and the output has H_kv heads. ValueError when neither divides the other.
    """
    if q_num_heads <= 0 or kv_num_heads <= 0 or (q_num_heads % kv_num_heads and kv_num_heads % q_num_heads):
        raise ValueError(
            "q_num_heads / kv_num_heads: expected positive, one a multiple of the other, "
            f"got {q_num_heads} / {kv_num_heads}"
        )
    return min(q_num_heads, kv_num_heads), max(q_num_heads, kv_num_heads)


def _check_shape(name: str, tensor: Tensor, expected: tuple[int, ...]) -> None:
    if tuple(tensor.shape) != expected:
        raise ValueError(f"{name}: expected shape {expected}, got {tuple(tensor.shape)}")


def _check_rank(name: str, tensor: Tensor, rank: int) -> None:
    if tensor.dim() != rank:
        raise ValueError(f"{name}: expected rank {rank}, got shape {tuple(tensor.shape)}")


class RecurrenceInputs(NamedTuple):
    """The op's arguments in its schema's order (:data:`rnnx.runtime.contract.ops.LINEAR_RECURRENCE`): query
    (B, T, H_q*d_k), key (B, T, H_k*d_k), value (B, T, H_kv*d_v), past_state (B, H_kv, d_k, d_v), decay (B, T, H_kv
    or H_kv*d_k), beta (B, T, H_kv or 1) and mask_pad (B, T), each optional one None when absent, then the
    attributes. The checks and the torch forward take it whole: the op's parameter list is written once."""

    query: Tensor
    key: Tensor
    value: Tensor
    past_state: Optional[Tensor]
    decay: Optional[Tensor]
    beta: Optional[Tensor]
    mask_pad: Optional[Tensor]
    q_num_heads: int
    kv_num_heads: int
    update_rule: str
    scale: float = 0.0
    qk_l2_norm: int = 0


def check_inputs(x: RecurrenceInputs) -> tuple[int, int, int, int, int]:
    """ValueError (one line, naming the tensor) for what the op refuses; else ``(B, T, d_k, d_v, H_o)``.
    ``scale`` takes any value; the mask is named ``pad_mask`` in the messages, as the Python entry points call it.

    H_o = max(q_num_heads, kv_num_heads) is the number of output heads (:func:`head_counts`).
    """
    query, key, value, past_state, decay, beta, pad_mask, q_num_heads, kv_num_heads, update_rule, _, qk_l2_norm = x
    if update_rule not in UPDATE_RULES:
        raise ValueError(f"update_rule: expected one of {UPDATE_RULES}, got {update_rule!r}")
    if qk_l2_norm not in (0, 1):
        raise ValueError(f"qk_l2_norm: expected 0 or 1, got {qk_l2_norm!r}")
    key_heads, out_heads = head_counts(q_num_heads, kv_num_heads)
    gated, delta = update_rule in GATED_RULES, update_rule in DELTA_RULES
    if gated and decay is None:
        raise ValueError(f"decay: update_rule {update_rule!r} requires decay, got None")
    if not gated and decay is not None:
        raise ValueError(f"decay: update_rule {update_rule!r} takes no decay, got shape {tuple(decay.shape)}")
    if delta and beta is None:
        raise ValueError(f"beta: update_rule {update_rule!r} requires beta, got None")
    if not delta and beta is not None:
        raise ValueError(f"beta: update_rule {update_rule!r} takes no beta, got shape {tuple(beta.shape)}")
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_rank(name, t, 3)
        if not t.is_floating_point():
            raise TypeError(f"{name}: expected a floating dtype, got {t.dtype}")
    for name, t in (("key", key), ("value", value), ("decay", decay), ("beta", beta)):
        if t is not None and t.dtype != query.dtype:
            raise TypeError(f"{name}: expected query's dtype {query.dtype}, got {t.dtype}")
    B, T, qdim = query.shape
    if qdim % q_num_heads != 0:
        raise ValueError(f"query: expected last dim a multiple of q_num_heads={q_num_heads}, got {qdim}")
    d_k = qdim // q_num_heads
    _check_shape("key", key, (B, T, key_heads * d_k))
    if value.shape[:2] != (B, T) or value.shape[2] % kv_num_heads != 0:
        raise ValueError(
            f"value: expected shape ({B}, {T}, kv_num_heads*d_v) with kv_num_heads={kv_num_heads}, "
            f"got {tuple(value.shape)}"
        )
    d_v = value.shape[2] // kv_num_heads
    if past_state is not None:
        _check_shape("past_state", past_state, (B, kv_num_heads, d_k, d_v))
    if decay is not None:
        _check_rank("decay", decay, 3)
        if decay.shape[2] not in (kv_num_heads, kv_num_heads * d_k) or decay.shape[:2] != (B, T):
            raise ValueError(
                f"decay: expected shape ({B}, {T}, {kv_num_heads}) or ({B}, {T}, {kv_num_heads * d_k}), "
                f"got {tuple(decay.shape)}"
            )
    if beta is not None:
        _check_rank("beta", beta, 3)
        if beta.shape[2] not in (kv_num_heads, 1) or beta.shape[:2] != (B, T):
            raise ValueError(
                f"beta: expected shape ({B}, {T}, {kv_num_heads}) or ({B}, {T}, 1), got {tuple(beta.shape)}"
            )
    if pad_mask is not None:
        _check_shape("pad_mask", pad_mask, (B, T))
    return B, T, d_k, d_v, out_heads
