"""The ``rnnx::causal_linear_attention`` torch.library op and its public Python entry point.

Contract: :data:`rnnx.models.ops.spec.CAUSAL_LINEAR_ATTENTION`. Schema::

    (Tensor q, Tensor k, Tensor v, Tensor? S0, Tensor? z0, float eps)
        -> (Tensor out, Tensor S_last, Tensor z_last)

q, k (B, H, L, E) and v (B, H, L, M) share one floating dtype (fp16 / bf16 / fp32 / fp64) and device;
S0 (B, H, E, M) and z0 (B, H, E) are in the state dtype (``spec.state_dtype_for(q.dtype)``: fp32,
fp64 for fp64 inputs) and each defaults to zeros. ``out`` has q's dtype, the states the state dtype.

The implementation is the device-agnostic chunked torch code of :mod:`.chunked`, registered for every
device; autograd uses the chunked backward, which saves only q, k, v, S0 and z0.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
from torch import Tensor

from ...state import LinearAttentionState
from .. import cuda as _cuda_kernels
from ..spec import CAUSAL_LINEAR_ATTENTION, state_dtype_for
from .chunked import DEFAULT_CHUNK_SIZE, chunked_backward, chunked_forward
from .naive import DEFAULT_EPS

_SPEC = CAUSAL_LINEAR_ATTENTION
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_SCHEMA_TYPES = {float: "float", int: "int", str: "str"}


def _schema() -> str:
    """The op schema built from the spec's input/output names (the op name is not part of it)."""
    args = [f"Tensor{'?' if name in _SPEC.optional_inputs else ''} {name}" for name in _SPEC.inputs]
    args += [f"{_SCHEMA_TYPES[type(default)]} {name}" for name, default in _SPEC.attributes.items()]
    outs = [f"Tensor {name}" for name in _SPEC.outputs]
    return f"({', '.join(args)}) -> ({', '.join(outs)})"


def check_inputs(q: Tensor, k: Tensor, v: Tensor, S0: Optional[Tensor], z0: Optional[Tensor]) -> None:
    """Raises ``ValueError`` / ``TypeError`` naming the offending tensor, with expected vs got."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"causal_linear_attention: {name} must be a Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(
                f"causal_linear_attention: {name} must be 4-D (B, H, L, {'M' if name == 'v' else 'E'}), "
                f"got shape {tuple(t.shape)}"
            )
    if q.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"causal_linear_attention: q must be one of {_FLOAT_DTYPES}, got {q.dtype}")
    B, H, L, E = q.shape
    M = v.shape[-1]
    expected = {"k": (k, (B, H, L, E)), "v": (v, (B, H, L, M))}
    for name, (t, shape) in expected.items():
        if tuple(t.shape) != shape:
            raise ValueError(
                f"causal_linear_attention: {name} must have shape {shape} (B, H, L from q), got {tuple(t.shape)}"
            )
        if t.dtype != q.dtype:
            raise TypeError(f"causal_linear_attention: {name} must have q's dtype {q.dtype}, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"causal_linear_attention: {name} must be on q's device {q.device}, got {t.device}")
    state_dtype = state_dtype_for(q.dtype)
    for name, t, shape in (("S0", S0, (B, H, E, M)), ("z0", z0, (B, H, E))):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"causal_linear_attention: {name} must be a Tensor or None, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(f"causal_linear_attention: {name} must have shape {shape}, got {tuple(t.shape)}")
        if t.dtype != state_dtype:
            raise TypeError(
                f"causal_linear_attention: {name} must have the state dtype {state_dtype} "
                f"(for q of dtype {q.dtype}), got {t.dtype}"
            )
        if t.device != q.device:
            raise ValueError(f"causal_linear_attention: {name} must be on q's device {q.device}, got {t.device}")


@torch.library.custom_op(_SPEC.qualname, mutates_args=(), schema=_schema())
def causal_linear_attention_op(
    q: Tensor, k: Tensor, v: Tensor, S0: Optional[Tensor], z0: Optional[Tensor], eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The registered op (any device): ``(out (B, H, L, M), S_last (B, H, E, M), z_last (B, H, E))``."""
    check_inputs(q, k, v, S0, z0)
    return chunked_forward(q, k, v, S0, z0, eps, DEFAULT_CHUNK_SIZE)


@causal_linear_attention_op.register_fake
def _fake(
    q: Tensor, k: Tensor, v: Tensor, S0: Optional[Tensor], z0: Optional[Tensor], eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    check_inputs(q, k, v, S0, z0)
    B, H, L, E = q.shape
    M = v.shape[-1]
    state_dtype = state_dtype_for(q.dtype)
    return (
        q.new_empty((B, H, L, M)),
        q.new_empty((B, H, E, M), dtype=state_dtype),
        q.new_empty((B, H, E), dtype=state_dtype),
    )


def _setup_context(ctx: Any, inputs: tuple, output: tuple) -> None:
    q, k, v, S0, z0, eps = inputs
    ctx.save_for_backward(q, k, v, S0, z0)
    ctx.eps = eps


def _backward(
    ctx: Any, grad_out: Optional[Tensor], grad_S: Optional[Tensor], grad_z: Optional[Tensor]
) -> tuple[Optional[Tensor], ...]:
    q, k, v, S0, z0 = ctx.saved_tensors
    dq, dk, dv, dS0, dz0 = chunked_backward(q, k, v, S0, z0, ctx.eps, grad_out, grad_S, grad_z, DEFAULT_CHUNK_SIZE)
    return dq, dk, dv, (dS0 if S0 is not None else None), (dz0 if z0 is not None else None), None


causal_linear_attention_op.register_autograd(_backward, setup_context=_setup_context)

# CUDA kernels of plugins/kernels where torch has CUDA and a device is present (else nothing).
_cuda_kernels.register_causal_linear_attention(causal_linear_attention_op)


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
    q: Tensor, k: Tensor, v: Tensor, state: StateLike = None, eps: float = DEFAULT_EPS
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Causal linear attention with phi = elu + 1, from an optional initial state.

    q, k (B, H, L, E), v (B, H, L, M); ``state`` is ``None`` (zeros), a ``LinearAttentionState`` or a
    ``(S, z)`` pair with S (B, H, E, M), z (B, H, E) in the state dtype (fp32, fp64 for fp64 inputs).
    Returns ``(out (B, H, L, M) in q's dtype, (S_last, z_last))``. L = 1 is a decode step, so a
    prefill followed by steps gives the numbers of one pass over the whole sequence.
    """
    S0, z0 = _unpack_state(state)
    if state is not None and (S0 is None or z0 is None):
        raise TypeError("causal_linear_attention: a given state needs both S and z, got None for one of them")
    out, S, z = causal_linear_attention_op(q, k, v, S0, z0, float(eps))
    return out, (S, z)
