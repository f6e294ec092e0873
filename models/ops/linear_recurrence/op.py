"""The ``rnnx::linear_recurrence`` torch.library op and its public Python entry point.

Contract: :data:`rnnx.runtime.contract.ops.LINEAR_RECURRENCE` (ONNX opset 27's ``LinearAttention`` plus a pad
mask). Schema::

    (Tensor query, Tensor key, Tensor value, Tensor? past_state, Tensor? decay, Tensor? beta, Tensor? mask_pad,
     int q_num_heads, int kv_num_heads, str update_rule, float scale, int qk_l2_norm)
     -> (Tensor output, Tensor present_state)

The implementation is the device-agnostic torch code of :mod:`.chunked` (a chunked prefill, a one-token step),
registered for every device; the backward re-runs it under autograd, so the op can be fine-tuned through.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from rnnx.runtime.contract.ops import LINEAR_RECURRENCE

from ..dtypes import state_dtype
from ..registration import register_autograd_by_recompute, torch_schema
from .checks import RecurrenceInputs, check_inputs
from .chunked import linear_recurrence_forward

_SPEC = LINEAR_RECURRENCE


def _forward(*arguments: Any) -> tuple[Tensor, Tensor]:
    """The op's arguments, in schema order, through the chunked torch forward
    (:func:`.chunked.linear_recurrence_forward`): ``(output (B, T, H_o*d_v), present_state (B, H_kv, d_k, d_v))``."""
    return linear_recurrence_forward(RecurrenceInputs(*arguments))


#: The registered op (any device): the chunked torch forward.
linear_recurrence_op = torch.library.custom_op(_SPEC.qualname, mutates_args=(), schema=torch_schema(_SPEC))(_forward)


@linear_recurrence_op.register_fake
def _fake(*arguments: Any) -> tuple[Tensor, Tensor]:
    """The outputs' shapes and dtypes, from the op's arguments in schema order (:class:`.checks.RecurrenceInputs`):
    out (B, T, out_heads * d_v) in the activations' dtype, present_state (B, H_kv, d_k, d_v) in the state dtype."""
    x = RecurrenceInputs(*arguments)
    B, T, d_k, d_v, out_heads = check_inputs(x)
    return (
        x.query.new_empty((B, T, out_heads * d_v)),
        x.query.new_empty((B, x.kv_num_heads, d_k, d_v), dtype=state_dtype(x.query.dtype)),
    )


register_autograd_by_recompute(linear_recurrence_op, _SPEC, _forward)


def linear_recurrence(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    past_state: Optional[Tensor] = None,
    decay: Optional[Tensor] = None,
    beta: Optional[Tensor] = None,
    *,
    q_num_heads: int,
    kv_num_heads: Optional[int] = None,
    update_rule: str = str(_SPEC.attributes["update_rule"]),
    scale: float = float(_SPEC.attributes["scale"]),
    pad_mask: Optional[Tensor] = None,
    qk_l2_norm: bool = bool(_SPEC.attributes["qk_l2_norm"]),
) -> tuple[Tensor, Tensor]:
    """One of the four linear recurrences (ONNX opset 27 ``LinearAttention``), from an optional state.

    Heads packed: query (B, T, H_q*d_k), key (B, T, H_k*d_k), value (B, T, H_kv*d_v), with H_q =
    ``q_num_heads`` and H_kv = ``kv_num_heads`` (default H_q), one a multiple of the other:

    - grouped query (H_q a multiple of H_kv, the standard's GQA): H_k = H_kv, query head h reads state
      h // (H_q/H_kv), output (B, T, H_q*d_v);
    - grouped value (H_kv a multiple of H_q, Gated DeltaNet's more value heads than key heads): H_k = H_q,
      query and key head h serve states h*R .. h*R+R-1 (R = H_kv/H_q), output (B, T, H_kv*d_v).

    ``qk_l2_norm`` divides each query and key head by sqrt(sum(x^2) + 1e-6) first (transformers' ``l2norm``).
    Per kv head, with ``past_state`` S (B, H_kv, d_k, d_v; zeros when None) in the state dtype (fp32; fp64 for
    fp64 inputs), a_t = exp(decay_t) and ``beta``::

        linear:      S_t = S_{t-1} + k_t v_t^T
        gated:       S_t = a_t S_{t-1} + k_t v_t^T
        delta:       S_t = S_{t-1} + beta_t k_t (v_t - S_{t-1}^T k_t)^T
        gated_delta: S_t = a_t S_{t-1} + beta_t k_t (v_t - (a_t S_{t-1})^T k_t)^T
        o_t = scale * S_t^T q_t          (scale 0: 1/sqrt(d_k))

    ``decay`` (B, T, H_kv) per head or (B, T, H_kv*d_k) per key dim, log space, for the gated rules only;
    ``beta`` (B, T, H_kv) or (B, T, 1) for the delta rules only; all in query's dtype. ``pad_mask`` (B, T),
    non-zero = pad: the state is carried over the step, so a right-padded batch equals each row alone.
    Returns ``(output (B, T, max(H_q, H_kv)*d_v) in query's dtype, present_state)``; T = 1 is a decode step, and a
    prefill followed by steps gives the numbers of one pass.
    """
    heads_kv = q_num_heads if kv_num_heads is None else kv_num_heads
    return linear_recurrence_op(
        query, key, value, past_state, decay, beta, pad_mask, int(q_num_heads), int(heads_kv), str(update_rule),
        float(scale), int(bool(qk_l2_norm)),
    )  # fmt: skip
