"""Registration of ``rnnx::sru_scan`` and its backward ``rnnx::sru_scan_backward`` (torch.library).

Schema (names from :data:`rnnx.models.ops.spec.SRU_SCAN`)::

    rnnx::sru_scan(Tensor U, Tensor? x, Tensor weight_c, Tensor bias, Tensor c0, Tensor? mask_pad,
                   int hidden_size, int num_directions, int num_matrices, bool has_skip_term,
                   bool use_tanh, float scale_x) -> (Tensor h, Tensor c_last)

Implementations:

* CPU: the C++ kernel in ``csrc/sru_scan_cpu.cpp`` (built on first use, see ``cpu_kernel.py``);
  the torch loop if it cannot be built or while :func:`sru_scan_reference_path` is active.
* any other device (CUDA until its kernel lands): the device-agnostic torch loop
  (``torch_loop.py``), vectorised over all columns, one python step per time step.
* fake (meta / tracing): shapes and dtypes only.
* autograd: gradients for U, x, weight_c, bias and c0 (none for mask_pad), computed by
  ``rnnx::sru_scan_backward``, which recomputes the per-step states instead of saving them, so
  the forward never stores per-step state. Double backward is not supported.

Gradients come back in the dtypes of their inputs. The kernels take weight_c, bias and x in the
state dtype (``spec.state_dtype_for(U.dtype)``); other dtypes are converted on the way in.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Optional

import torch
from torch import Tensor

from .. import cuda as _cuda_kernels
from ..spec import SRU_SCAN, TORCH_NAMESPACE, state_dtype_for
from . import cpu_kernel, torch_loop
from .checks import check_sru_scan_inputs

#: Qualified name of the backward op (an implementation detail, not part of the ONNX contract).
BACKWARD_QUALNAME = f"{TORCH_NAMESPACE}::{SRU_SCAN.torch_name}_backward"
#: Set to 1 to make the CPU implementation use the torch loop instead of the C++ kernel.
REFERENCE_ENV = "RNNX_SRU_SCAN_TORCH_LOOP"

_force_torch_loop = os.environ.get(REFERENCE_ENV, "0") not in ("", "0")


@contextlib.contextmanager
def sru_scan_reference_path(enabled: bool = True) -> Iterator[None]:
    """Within the block, CPU calls run the torch loop, not the C++ kernel (tests, benchmarks)."""
    global _force_torch_loop
    before = _force_torch_loop
    _force_torch_loop = enabled
    try:
        yield
    finally:
        _force_torch_loop = before


def cpu_kernel_in_use() -> bool:
    """Whether CPU calls run the C++ kernel now (builds it on first call)."""
    return not _force_torch_loop and cpu_kernel.load() is not None


def _uses_x(num_matrices: int, has_skip_term: bool) -> bool:
    return has_skip_term and num_matrices == 3


def _kernel_args(U, x, weight_c, bias, c0, mask_pad, num_matrices, has_skip_term):
    """U, x, weight_c, bias, c0, mask as the C++ kernel takes them: contiguous, state dtype, uint8."""
    acc = state_dtype_for(U.dtype)
    xk = x.to(acc).contiguous() if _uses_x(num_matrices, has_skip_term) else None
    mask = None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous()
    return (
        U.contiguous(),
        xk,
        weight_c.to(acc).contiguous(),
        bias.to(acc).contiguous(),
        c0.contiguous(),
        mask,
    )


@torch.library.custom_op(SRU_SCAN.qualname, mutates_args=())
def sru_scan_op(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Tensor,
    mask_pad: Optional[Tensor],
    hidden_size: int,
    num_directions: int,
    num_matrices: int,
    has_skip_term: bool,
    use_tanh: bool,
    scale_x: float,
) -> tuple[Tensor, Tensor]:
    """SRU scan on any device: the torch loop. Returns h (L, B, D*d) and c_last (B, D*d)."""
    check_sru_scan_inputs(
        U,
        x,
        weight_c,
        bias,
        c0,
        mask_pad,
        hidden_size=hidden_size,
        num_directions=num_directions,
        num_matrices=num_matrices,
        has_skip_term=has_skip_term,
    )
    return torch_loop.forward(
        U,
        x,
        weight_c,
        bias,
        c0,
        mask_pad,
        hidden_size,
        num_directions,
        num_matrices,
        has_skip_term,
        use_tanh,
        scale_x,
    )


@sru_scan_op.register_kernel("cpu")
def _sru_scan_cpu(
    U, x, weight_c, bias, c0, mask_pad, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x
):
    check_sru_scan_inputs(
        U,
        x,
        weight_c,
        bias,
        c0,
        mask_pad,
        hidden_size=hidden_size,
        num_directions=num_directions,
        num_matrices=num_matrices,
        has_skip_term=has_skip_term,
    )
    if not cpu_kernel_in_use():
        return torch_loop.forward(
            U,
            x,
            weight_c,
            bias,
            c0,
            mask_pad,
            hidden_size,
            num_directions,
            num_matrices,
            has_skip_term,
            use_tanh,
            scale_x,
        )
    args = _kernel_args(U, x, weight_c, bias, c0, mask_pad, num_matrices, has_skip_term)
    h, c_last = cpu_kernel.load().forward(
        *args, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x
    )
    return h, c_last


@sru_scan_op.register_fake
def _sru_scan_fake(
    U, x, weight_c, bias, c0, mask_pad, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x
):
    width = num_directions * hidden_size
    return U.new_empty((U.shape[0], U.shape[1], width)), c0.new_empty((c0.shape[0], width))


@torch.library.custom_op(BACKWARD_QUALNAME, mutates_args=())
def sru_scan_backward_op(
    grad_h: Tensor,
    grad_c: Tensor,
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Tensor,
    mask_pad: Optional[Tensor],
    hidden_size: int,
    num_directions: int,
    num_matrices: int,
    has_skip_term: bool,
    use_tanh: bool,
    scale_x: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients (dU, dx, dweight_c, dbias, dc0) of sru_scan, each in its input's dtype.

    dx is an empty tensor (shape (0,), c0's dtype) unless k == 3 with the skip term.
    Any device: the torch loop.
    """
    grads = torch_loop.backward(
        grad_h,
        grad_c,
        U,
        x,
        weight_c,
        bias,
        c0,
        mask_pad,
        hidden_size,
        num_directions,
        num_matrices,
        has_skip_term,
        use_tanh,
        scale_x,
    )
    return _grads_in_input_dtypes(grads, U, x, weight_c, bias, c0)


def _grads_in_input_dtypes(grads, U, x, weight_c, bias, c0):
    dU, dx, dw, db, dc0 = grads
    dx = c0.new_empty((0,)) if dx is None else dx.to(x.dtype)
    return dU.to(U.dtype), dx, dw.to(weight_c.dtype), db.to(bias.dtype), dc0.to(c0.dtype)


@sru_scan_backward_op.register_kernel("cpu")
def _sru_scan_backward_cpu(
    grad_h,
    grad_c,
    U,
    x,
    weight_c,
    bias,
    c0,
    mask_pad,
    hidden_size,
    num_directions,
    num_matrices,
    has_skip_term,
    use_tanh,
    scale_x,
):
    attrs = (hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x)
    if not cpu_kernel_in_use():
        grads = torch_loop.backward(grad_h, grad_c, U, x, weight_c, bias, c0, mask_pad, *attrs)
        return _grads_in_input_dtypes(grads, U, x, weight_c, bias, c0)
    args = _kernel_args(U, x, weight_c, bias, c0, mask_pad, num_matrices, has_skip_term)
    dU, dx, dw_rows, db_rows, dc0 = cpu_kernel.load().backward(
        grad_h.to(U.dtype).contiguous(), grad_c.to(c0.dtype).contiguous(), *args, *attrs
    )
    grads = (dU, dx if _uses_x(num_matrices, has_skip_term) else None, dw_rows.sum(0), db_rows.sum(0), dc0)
    return _grads_in_input_dtypes(grads, U, x, weight_c, bias, c0)


@sru_scan_backward_op.register_fake
def _sru_scan_backward_fake(
    grad_h,
    grad_c,
    U,
    x,
    weight_c,
    bias,
    c0,
    mask_pad,
    hidden_size,
    num_directions,
    num_matrices,
    has_skip_term,
    use_tanh,
    scale_x,
):
    dx = torch.empty_like(x) if _uses_x(num_matrices, has_skip_term) else c0.new_empty((0,))
    return (torch.empty_like(U), dx, torch.empty_like(weight_c), torch.empty_like(bias), torch.empty_like(c0))


def _setup_context(ctx, inputs, output) -> None:
    U, x, weight_c, bias, c0, mask_pad, *attrs = inputs
    ctx.save_for_backward(U, x, weight_c, bias, c0, mask_pad)
    ctx.attrs = tuple(attrs)


def _backward(ctx, grad_h, grad_c):
    U, x, weight_c, bias, c0, mask_pad = ctx.saved_tensors
    hidden_size, num_directions, num_matrices, has_skip_term = ctx.attrs[:4]
    L, B, width = U.shape[0], U.shape[1], num_directions * hidden_size
    if grad_h is None:
        grad_h = U.new_zeros((L, B, width))
    if grad_c is None:
        grad_c = c0.new_zeros((B, width))
    dU, dx, dw, db, dc0 = sru_scan_backward_op(grad_h, grad_c, U, x, weight_c, bias, c0, mask_pad, *ctx.attrs)
    dx = dx if _uses_x(num_matrices, has_skip_term) else None
    return (dU, dx, dw, db, dc0) + (None,) * 7


sru_scan_op.register_autograd(_backward, setup_context=_setup_context)

# CUDA kernels of plugins/kernels where torch has CUDA and a device is present (else nothing).
_cuda_kernels.register_sru_scan(sru_scan_op)
