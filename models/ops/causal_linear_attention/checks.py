"""Input validation of causal linear attention, with messages that name the tensor and expected vs got."""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def problem_size(q: Tensor, v: Tensor, num_heads: int, time_major: bool) -> tuple[int, int, int, int, int]:
    """``(B, H, L, E, M)`` of packed q (B, L, H*E) / v (B, L, H*M), (L, B, ...) when ``time_major``."""
    B, L = (q.shape[1], q.shape[0]) if time_major else (q.shape[0], q.shape[1])
    return B, num_heads, L, q.shape[2] // num_heads, v.shape[2] // num_heads


class AttentionInputs(NamedTuple):
    """The op's inputs in its schema's order (:data:`rnnx.runtime.contract.ops.CAUSAL_LINEAR_ATTENTION`): q, k
    (B, L, H*E), v (B, L, H*M), S0 (B, H, E, M) or None, z0 (B, H, E) or None, mask_pad (B, L) or None ((L, B, ...)
    when ``time_major``), ``eps``, ``num_heads`` = H, ``time_major``. Every layer under the registered op takes it
    whole: the op's parameter list is written once."""

    q: Tensor
    k: Tensor
    v: Tensor
    S0: Optional[Tensor]
    z0: Optional[Tensor]
    mask_pad: Optional[Tensor]
    eps: float
    num_heads: int
    time_major: int

    def size(self) -> tuple[int, int, int, int, int]:
        """``(B, H, L, E, M)`` (:func:`problem_size`)."""
        return problem_size(self.q, self.v, self.num_heads, bool(self.time_major))


def check_inputs(x: AttentionInputs) -> None:
    """Raises ``ValueError`` / ``TypeError`` naming the offending tensor, with expected vs got.

    Layout: q, k (B, L, H*E), v (B, L, H*M), mask_pad (B, L) — (L, B, ...) when ``time_major`` — with
    H = ``num_heads``; S0 (B, H, E, M), z0 (B, H, E).
    """
    q, k, v, S0, z0, mask_pad, _, num_heads, time_major = x
    time_major = bool(time_major)
    axes = "(L, B, H*{})" if time_major else "(B, L, H*{})"
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"causal_linear_attention: num_heads must be a positive int, got {num_heads!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"causal_linear_attention: {name} must be a Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise ValueError(
                f"causal_linear_attention: {name} must be 3-D {axes.format('M' if name == 'v' else 'E')}, "
                f"got shape {tuple(t.shape)}"
            )
        if t.shape[2] % num_heads:
            raise ValueError(
                f"causal_linear_attention: {name}'s last axis {t.shape[2]} is not a multiple of num_heads={num_heads}"
            )
    if q.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"causal_linear_attention: q must be one of {_FLOAT_DTYPES}, got {q.dtype}")
    B, H, L, E, M = problem_size(q, v, num_heads, time_major)
    lead = (L, B) if time_major else (B, L)
    expected = {"k": (k, (*lead, H * E)), "v": (v, (*lead, H * M))}
    for name, (t, shape) in expected.items():
        if tuple(t.shape) != shape:
            raise ValueError(
                f"causal_linear_attention: {name} must have shape {shape} ({'L, B' if time_major else 'B, L'} from q), "
                f"got {tuple(t.shape)}"
            )
        if t.dtype != q.dtype:
            raise TypeError(f"causal_linear_attention: {name} must have q's dtype {q.dtype}, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"causal_linear_attention: {name} must be on q's device {q.device}, got {t.device}")
    kept = state_dtype(q.dtype)
    for name, t, shape in (("S0", S0, (B, H, E, M)), ("z0", z0, (B, H, E))):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"causal_linear_attention: {name} must be a Tensor or None, got {type(t).__name__}")
        if tuple(t.shape) != shape:
            raise ValueError(f"causal_linear_attention: {name} must have shape {shape}, got {tuple(t.shape)}")
        if t.dtype != kept:
            raise TypeError(
                f"causal_linear_attention: {name} must have the state dtype {kept} "
                f"(for q of dtype {q.dtype}), got {t.dtype}"
            )
        if t.device != q.device:
            raise ValueError(f"causal_linear_attention: {name} must be on q's device {q.device}, got {t.device}")
    if mask_pad is not None:
        if not isinstance(mask_pad, Tensor):
            raise TypeError(
                f"causal_linear_attention: mask_pad must be a Tensor or None, got {type(mask_pad).__name__}"
            )
        if tuple(mask_pad.shape) != lead:
            raise ValueError(
                f"causal_linear_attention: mask_pad must have shape {lead} ({'L, B' if time_major else 'B, L'}), "
                f"got {tuple(mask_pad.shape)}"
            )
        if mask_pad.is_complex():
            raise TypeError(
                f"causal_linear_attention: mask_pad must be bool, integer or floating, got {mask_pad.dtype}"
            )
        if mask_pad.device != q.device:
            raise ValueError(
                f"causal_linear_attention: mask_pad must be on q's device {q.device}, got {mask_pad.device}"
            )
