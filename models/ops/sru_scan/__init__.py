"""The SRU scan op: :func:`sru_scan` calls the registered ``torch.ops.rnnx.sru_scan``.

``sru_scan_naive`` is the plain-loop reference the tests compare against; ``op.py`` holds the
registration (CPU C++ kernel, device-agnostic torch loop, fake impl, autograd).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from rnnx.runtime.contract.ops import SRU_SCAN, TORCH_NAMESPACE

from .naive import sru_scan_naive
from .op import cpu_kernel_in_use, sru_scan_reference_path


def sru_scan(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Tensor,
    mask_pad: Optional[Tensor] = None,
    *,
    hidden_size: int,
    num_directions: int = 1,
    num_matrices: int = 3,
    has_skip_term: bool = True,
    use_tanh: bool = False,
    scale_x: float = 1.0,
) -> tuple[Tensor, Tensor]:
    """SRU recurrence over a sequence; layouts of :data:`rnnx.runtime.contract.ops.SRU_SCAN`.

    U (L, B, D*d*k); x (L, B, D*d), required when k == 3 with the skip term; weight_c and bias
    (2*D*d,); c0 (B, D*d) in ``state_dtype(U.dtype)`` (rnnx.models.ops.dtypes); mask_pad (L, B), non-zero = pad.
    Returns h (L, B, D*d) in U's dtype and c_last (B, D*d) in c0's dtype. Differentiable in
    U, x, weight_c, bias and c0. The op raises ValueError / TypeError naming the offending input.
    """
    op = getattr(getattr(torch.ops, TORCH_NAMESPACE), SRU_SCAN.torch_name)
    return op(
        U,
        x,
        weight_c,
        bias,
        c0,
        mask_pad,
        hidden_size,
        num_directions,
        num_matrices,
        bool(has_skip_term),
        bool(use_tanh),
        float(scale_x),
    )


__all__ = ["sru_scan", "sru_scan_naive", "sru_scan_reference_path", "cpu_kernel_in_use"]
