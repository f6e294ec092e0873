"""Causal linear attention on the CUDA kernels (``plugins/causal_linear_attention/cuda/``) through the shared
PyTorch binding (:mod:`rnnx.models.ops.cuda`): :func:`forward`, and :func:`register`, which :mod:`.op` calls at
import."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from .. import cuda as binding
from .checks import AttentionInputs, check_inputs
from .chunked import DEFAULT_CHUNK_SIZE, chunked_forward


def forward(x: AttentionInputs) -> Optional[tuple[Tensor, Tensor, Tensor]]:
    """Causal linear attention on the CUDA kernels, or ``None`` where they do not apply (dtype, a head dim E above
    the kernels' :data:`~rnnx.models.ops.cuda.MAX_DIM_K`, no binding).

    The op's layout (:class:`.checks.AttentionInputs`), validated by the caller: heads packed, q, k (B, L, H*E), v
    (B, L, H*M), mask_pad (B, L) (non-zero = pad; passed to the kernel as uint8) or None -- (L, B, ...) when
    ``time_major`` -- with H = ``num_heads``; S0 (B, H, E, M) and z0 (B, H, E) fp32 or None. Returns new tensors out
    (v's shape: (B, L, H*M) or (L, B, H*M)), S_last (B, H, E, M) and z_last (B, H, E).
    """
    q, k, v, S0, z0, mask_pad, eps, num_heads, time_major = x
    if q.dtype not in binding.KERNEL_DTYPES or q.shape[2] // int(num_heads) > binding.MAX_DIM_K:
        return None
    ext = binding.load()
    if ext is None:
        return None
    B = q.shape[1] if time_major else q.shape[0]
    H = int(num_heads)
    E, M = q.shape[2] // H, v.shape[2] // H
    out = q.new_empty(v.shape)
    S_last = q.new_empty((B, H, E, M), dtype=torch.float32)
    z_last = q.new_empty((B, H, E), dtype=torch.float32)
    ext.causal_linear_attention(
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        None if S0 is None else S0.contiguous(),
        None if z0 is None else z0.contiguous(),
        None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous(),
        out,
        S_last,
        z_last,
        float(eps),
        H,
        bool(time_major),
        binding.stream_of(q.device),
    )
    return out, S_last, z_last


def register(op: Any) -> bool:
    """Registers the CUDA kernel of ``rnnx::causal_linear_attention`` where CUDA is present; returns whether it
    did. Falls back to the chunked torch forward per call where needed."""

    def causal_linear_attention_cuda(*inputs: Any) -> tuple[Tensor, Tensor, Tensor]:
        x = AttentionInputs(*inputs)
        check_inputs(x)
        result = forward(x)
        return result if result is not None else chunked_forward(x, DEFAULT_CHUNK_SIZE)

    return binding.register_kernel(op, causal_linear_attention_cuda)
