"""The SRU scan on the CUDA kernel (``plugins/sru_scan/cuda/sru_scan.cu``) through the shared PyTorch binding
(:mod:`rnnx.models.ops.cuda`): :func:`forward`, and :func:`register`, which :mod:`.op` calls at import."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from .. import cuda as binding
from . import torch_loop
from .arguments import ScanAttributes, ScanTensors, split_arguments
from .checks import check_sru_scan_inputs


def forward(tensors: ScanTensors, attrs: ScanAttributes) -> Optional[tuple[Tensor, Tensor]]:
    """The SRU scan on the CUDA kernel, or ``None`` where it does not apply (dtype, no binding).

    Inputs as the op takes them (validated by the caller); weight_c, bias and x are converted to U's
    dtype, the mask to uint8. Returns new tensors h (L, B, D*d) and c_last (B, D*d).
    """
    U, x, weight_c, bias, c0, mask_pad = tensors
    if U.dtype not in binding.KERNEL_DTYPES or c0.dtype != torch.float32:
        return None
    ext = binding.load()
    if ext is None:
        return None
    h = U.new_empty((U.shape[0], U.shape[1], attrs.width))
    c_last = torch.empty_like(c0, memory_format=torch.contiguous_format)
    ext.sru_scan(
        U.contiguous(),
        x.to(U.dtype).contiguous() if attrs.uses_x else None,
        weight_c.to(U.dtype).contiguous(),
        bias.to(U.dtype).contiguous(),
        c0.contiguous(),
        None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous(),
        h,
        c_last,
        *attrs,
        binding.stream_of(U.device),
    )
    return h, c_last


def register(op: Any) -> bool:
    """Registers the CUDA kernel of ``rnnx::sru_scan`` (``op``: the custom op object) where CUDA is
    present; returns whether it did. Falls back to the op's torch loop per call where needed."""

    def sru_scan_cuda(*arguments):
        tensors, attrs = split_arguments(arguments)
        check_sru_scan_inputs(tensors, attrs)
        result = forward(tensors, attrs)
        return result if result is not None else torch_loop.forward(tensors, attrs)

    return binding.register_kernel(op, sru_scan_cuda)
