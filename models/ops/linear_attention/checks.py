"""Input validation of causal linear attention, with messages that name the tensor and expected vs got."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


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
