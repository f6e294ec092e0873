"""The ``rnnx::causal_linear_attention`` torch.library op and its public Python entry point.

Contract: :data:`rnnx.runtime.contract.ops.CAUSAL_LINEAR_ATTENTION`. Schema::

    (Tensor q, Tensor k, Tensor v, Tensor? S0, Tensor? z0, Tensor? mask_pad, float eps, int num_heads,
     int time_major) -> (Tensor out, Tensor S_last, Tensor z_last)

Heads are packed: q, k (B, L, H*E) and v (B, L, H*M) — (L, B, ...) when ``time_major`` — share one floating
dtype (fp16 / bf16 / fp32 / fp64) and device; mask_pad (B, L) (or (L, B)) marks pads with non-zero; S0 (B, H, E, M)
and z0 (B, H, E) are in the state dtype (``state_dtype(q.dtype)``: fp32, fp64 for fp64 inputs) and each
defaults to zeros. ``out`` (q's layout with M) has q's dtype, the states the state dtype.

The implementation is the device-agnostic chunked torch code of :mod:`.chunked`, registered for every
device; autograd uses the chunked backward, which saves only q, k, v, S0 and z0.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype
from rnnx.models.ops.registration import torch_schema
from rnnx.runtime.contract.ops import CAUSAL_LINEAR_ATTENTION

from . import cuda_kernel
from .checks import AttentionInputs, check_inputs
from .chunked import DEFAULT_CHUNK_SIZE, chunked_backward, chunked_forward
from .naive import DEFAULT_EPS, heads_apart, heads_packed
from .state import LinearAttentionState

_SPEC = CAUSAL_LINEAR_ATTENTION


@torch.library.custom_op(_SPEC.qualname, mutates_args=(), schema=torch_schema(_SPEC))
def causal_linear_attention_op(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    S0: Optional[Tensor],
    z0: Optional[Tensor],
    mask_pad: Optional[Tensor],
    eps: float,
    num_heads: int,
    time_major: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """The registered op (any device): ``(out (B, L, H*M), S_last (B, H, E, M), z_last (B, H, E))``."""
    x = AttentionInputs(q, k, v, S0, z0, mask_pad, eps, num_heads, time_major)
    check_inputs(x)
    return chunked_forward(x, DEFAULT_CHUNK_SIZE)


@causal_linear_attention_op.register_fake
def _fake(*inputs: Any) -> tuple[Tensor, Tensor, Tensor]:
    x = AttentionInputs(*inputs)
    check_inputs(x)
    B, H, L, E, M = x.size()
    kept = state_dtype(x.q.dtype)
    return (
        x.q.new_empty((*x.q.shape[:2], H * M)),
        x.q.new_empty((B, H, E, M), dtype=kept),
        x.q.new_empty((B, H, E), dtype=kept),
    )


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    x = AttentionInputs(*inputs)
    ctx.save_for_backward(x.q, x.k, x.v, x.S0, x.z0, x.mask_pad)
    ctx.eps, ctx.num_heads, ctx.time_major = x.eps, x.num_heads, x.time_major


def _backward(ctx: Any, *grads: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
    """``grads``: the gradients of (out, S_last, z_last)."""
    x = AttentionInputs(*ctx.saved_tensors, ctx.eps, ctx.num_heads, ctx.time_major)
    dq, dk, dv, dS0, dz0 = chunked_backward(x, grads, DEFAULT_CHUNK_SIZE)
    return dq, dk, dv, (dS0 if x.S0 is not None else None), (dz0 if x.z0 is not None else None), None, None, None, None


causal_linear_attention_op.register_autograd(_backward, setup_context=_setup_context)

# CUDA kernels of plugins/kernels where torch has CUDA and a device is present (else nothing).
cuda_kernel.register(causal_linear_attention_op)


StateLike = Union[LinearAttentionState, tuple[Tensor, Tensor], list, None]


def _unpack_state(state: StateLike) -> tuple[Optional[Tensor], Optional[Tensor]]:
    if state is None:
        return None, None
    if isinstance(state, LinearAttentionState):
        return state.S, state.z
    if isinstance(state, (tuple, list)) and len(state) == 2:
        return state[0], state[1]
    raise TypeError(
        "causal_linear_attention: state must be None, a LinearAttentionState or a (S, z) pair, "
        f"got {type(state).__name__}" + (f" of length {len(state)}" if isinstance(state, (tuple, list)) else "")
    )


def causal_linear_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    state: StateLike = None,
    eps: float = DEFAULT_EPS,
    *,
    num_heads: Optional[int] = None,
    pad_mask: Optional[Tensor] = None,
    time_major: bool = False,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Causal linear attention with phi = elu + 1, from an optional initial state.

    The op's layout, heads packed: q, k (B, L, H*E), v (B, L, H*M) with ``num_heads`` = H — (L, B, ...) with
    ``time_major`` — and ``pad_mask`` (B, L) (or (L, B)) True / non-zero at pad steps, which the state skips.
    Heads apart, q, k (B, H, L, E), v (B, H, L, M) (4-D inputs; ``num_heads`` is then q's dim 1 and
    ``time_major`` must be False) is accepted too; ``out`` then comes back as (B, H, L, M) and an export
    holds the moves between the layouts.

    ``state`` is ``None`` (zeros), a ``LinearAttentionState`` or a ``(S, z)`` pair with S (B, H, E, M), z (B, H, E)
    in the state dtype (fp32, fp64 for fp64 inputs). Returns ``(out in q's layout and dtype, (S_last, z_last))``.
    L = 1 is a decode step, so a prefill followed by steps gives the numbers of one pass over the whole sequence.
    """
    S0, z0 = _unpack_state(state)
    if state is not None and (S0 is None or z0 is None):
        raise TypeError("causal_linear_attention: a given state needs both S and z, got None for one of them")
    if isinstance(q, Tensor) and q.dim() == 4:
        if time_major:
            raise ValueError("causal_linear_attention: time_major needs packed (L, B, H*E) inputs, got 4-D q")
        if num_heads is not None and num_heads != q.shape[1]:
            raise ValueError(f"causal_linear_attention: num_heads={num_heads}, but 4-D q has {q.shape[1]} heads")
        heads = q.shape[1]
        packed = [heads_packed(x) if isinstance(x, Tensor) and x.dim() == 4 else x for x in (q, k, v)]
        out, S, z = causal_linear_attention_op(*packed, S0, z0, pad_mask, float(eps), heads, 0)
        return heads_apart(out, heads), (S, z)
    if num_heads is None:
        raise TypeError("causal_linear_attention: packed (B, L, H*E) inputs need num_heads")
    out, S, z = causal_linear_attention_op(q, k, v, S0, z0, pad_mask, float(eps), int(num_heads), int(time_major))
    return out, (S, z)
