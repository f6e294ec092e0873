"""Causal linear attention on the CUDA kernels (``models/ops/linear_attention/cuda/``) through the shared
PyTorch binding (:mod:`rnnx.models.ops.cuda`): :func:`forward`, and :func:`register`, which :mod:`.op` calls at
import."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from .. import cuda as binding
from .checks import check_inputs
from .chunked import DEFAULT_CHUNK_SIZE, chunked_forward


def forward(q, k, v, S0, z0, eps) -> Optional[tuple[Tensor, Tensor, Tensor]]:
    """Causal linear attention on the CUDA kernels, or ``None`` where they do not apply.

    Returns new tensors out (B, H, L, M), S_last (B, H, E, M) and z_last (B, H, E).
    """
    if q.dtype not in binding.KERNEL_DTYPES:
        return None
    ext = binding.load()
    if ext is None:
        return None
    B, H, L, E = q.shape
    M = v.shape[-1]
    out = q.new_empty((B, H, L, M))
    S_last = q.new_empty((B, H, E, M), dtype=torch.float32)
    z_last = q.new_empty((B, H, E), dtype=torch.float32)
    ext.causal_linear_attention(
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        None if S0 is None else S0.contiguous(),
        None if z0 is None else z0.contiguous(),
        out,
        S_last,
        z_last,
        float(eps),
        binding.stream_of(q.device),
    )
    return out, S_last, z_last


def register(op: Any) -> bool:
    """Registers the CUDA kernel of ``rnnx::causal_linear_attention`` where CUDA is present; returns
    whether it did. Falls back to the chunked torch forward per call where needed."""

    def causal_linear_attention_cuda(q, k, v, S0, z0, eps):
        check_inputs(q, k, v, S0, z0)
        result = forward(q, k, v, S0, z0, eps)
        return result if result is not None else chunked_forward(q, k, v, S0, z0, eps, DEFAULT_CHUNK_SIZE)

    return binding.register_kernel(op, causal_linear_attention_cuda)
