"""Registration of ``rnnx::sru_scan`` and its backward ``rnnx::sru_scan_backward`` (torch.library).

Schema (names from :data:`rnnx.runtime.contract.ops.SRU_SCAN`)::

    rnnx::sru_scan(Tensor U, Tensor? x, Tensor weight_c, Tensor bias, Tensor c0, Tensor? mask_pad,
                   int hidden_size, int num_directions, int num_matrices, bool has_skip_term,
                   bool use_tanh, float scale_x) -> (Tensor h, Tensor c_last)

Implementations:

* CPU: the C++ kernel in ``plugins/sru_scan/cpu/sru_scan_cpu.cpp`` (built on first use, see ``cpu_kernel.py``);
  the torch loop if it cannot be built or while :func:`sru_scan_reference_path` is active.
* any other device (CUDA until its kernel lands): the device-agnostic torch loop
  (``torch_loop.py``), vectorised over all columns, one python step per time step.
* fake (meta / tracing): shapes and dtypes only.
* autograd: gradients for U, x, weight_c, bias and c0 (none for mask_pad), computed by
  ``rnnx::sru_scan_backward``, which recomputes the per-step states instead of saving them, so
  the forward never stores per-step state. Double backward is not supported.

Gradients come back in the dtypes of their inputs. The kernels take weight_c, bias and x in the
state dtype (``state_dtype(U.dtype)`` (rnnx.models.ops.dtypes)); other dtypes are converted on the way in.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, Optional

import torch
from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype
from rnnx.runtime.contract.ops import SRU_SCAN, TORCH_NAMESPACE

from . import cpu_kernel, cuda_kernel, torch_loop
from .arguments import ScanAttributes, ScanTensors, split_arguments
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


def _kernel_args(tensors: ScanTensors, attrs: ScanAttributes) -> ScanTensors:
    """The tensors as the C++ kernel takes them: contiguous; x, weight_c and bias in the state dtype; the mask
    as uint8."""
    U, x, weight_c, bias, c0, mask_pad = tensors
    acc = state_dtype(U.dtype)
    return ScanTensors(
        U.contiguous(),
        x.to(acc).contiguous() if attrs.uses_x else None,
        weight_c.to(acc).contiguous(),
        bias.to(acc).contiguous(),
        c0.contiguous(),
        None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous(),
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
    """SRU scan on any device: the torch loop. Returns h (L, B, D*d) and c_last (B, D*d). The annotated
    signature is the op's schema; the implementations below take the arguments as :func:`split_arguments` does."""
    tensors = ScanTensors(U, x, weight_c, bias, c0, mask_pad)
    attrs = ScanAttributes.of(hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x)
    check_sru_scan_inputs(tensors, attrs)
    return torch_loop.forward(tensors, attrs)


@sru_scan_op.register_kernel("cpu")
def _sru_scan_cpu(*arguments):
    tensors, attrs = split_arguments(arguments)
    check_sru_scan_inputs(tensors, attrs)
    if not cpu_kernel_in_use():
        return torch_loop.forward(tensors, attrs)
    h, c_last = cpu_kernel.load().forward(*_kernel_args(tensors, attrs), *attrs)
    return h, c_last


@sru_scan_op.register_fake
def _sru_scan_fake(*arguments):
    (U, *_, c0, _), attrs = split_arguments(arguments)
    return U.new_empty((U.shape[0], U.shape[1], attrs.width)), c0.new_empty((c0.shape[0], attrs.width))


#: ``rnnx::sru_scan_backward``: the gradients of h and c_last, then the forward's arguments.
_FORWARD_ARGUMENTS = str(sru_scan_op._opoverload._schema).partition("(")[2].rpartition(") ->")[0]
_BACKWARD_SCHEMA = f"(Tensor grad_h, Tensor grad_c, {_FORWARD_ARGUMENTS}) -> (Tensor, Tensor, Tensor, Tensor, Tensor)"


@torch.library.custom_op(BACKWARD_QUALNAME, mutates_args=(), schema=_BACKWARD_SCHEMA)
def sru_scan_backward_op(grad_h: Tensor, grad_c: Tensor, *arguments: Any) -> tuple[Tensor, ...]:
    """Gradients (dU, dx, dweight_c, dbias, dc0) of sru_scan, each in its input's dtype.

    dx is an empty tensor (shape (0,), c0's dtype) unless k == 3 with the skip term.
    Any device: the torch loop.
    """
    tensors, attrs = split_arguments(arguments)
    return _grads_in_input_dtypes(torch_loop.backward(grad_h, grad_c, tensors, attrs), tensors)


def _grads_in_input_dtypes(grads, tensors: ScanTensors):
    U, x, weight_c, bias, c0, _ = tensors
    dU, dx, dw, db, dc0 = grads
    dx = c0.new_empty((0,)) if dx is None else dx.to(x.dtype)
    return dU.to(U.dtype), dx, dw.to(weight_c.dtype), db.to(bias.dtype), dc0.to(c0.dtype)


@sru_scan_backward_op.register_kernel("cpu")
def _sru_scan_backward_cpu(grad_h, grad_c, *arguments):
    tensors, attrs = split_arguments(arguments)
    if not cpu_kernel_in_use():
        return _grads_in_input_dtypes(torch_loop.backward(grad_h, grad_c, tensors, attrs), tensors)
    U, c0 = tensors.U, tensors.c0
    dU, dx, dw_rows, db_rows, dc0 = cpu_kernel.load().backward(
        grad_h.to(U.dtype).contiguous(), grad_c.to(c0.dtype).contiguous(), *_kernel_args(tensors, attrs), *attrs
    )
    grads = (dU, dx if attrs.uses_x else None, dw_rows.sum(0), db_rows.sum(0), dc0)
    return _grads_in_input_dtypes(grads, tensors)


@sru_scan_backward_op.register_fake
def _sru_scan_backward_fake(grad_h, grad_c, *arguments):
    (U, x, weight_c, bias, c0, _), attrs = split_arguments(arguments)
    dx = torch.empty_like(x) if attrs.uses_x else c0.new_empty((0,))
    return (torch.empty_like(U), dx, torch.empty_like(weight_c), torch.empty_like(bias), torch.empty_like(c0))


def _setup_context(ctx, inputs, output) -> None:
    tensors, ctx.attrs = split_arguments(inputs)
    ctx.save_for_backward(*tensors)


def _backward(ctx, grad_h, grad_c):
    tensors = ScanTensors(*ctx.saved_tensors)
    attrs: ScanAttributes = ctx.attrs
    L, B = tensors.U.shape[0], tensors.U.shape[1]
    if grad_h is None:
        grad_h = tensors.U.new_zeros((L, B, attrs.width))
    if grad_c is None:
        grad_c = tensors.c0.new_zeros((B, attrs.width))
    dU, dx, dw, db, dc0 = sru_scan_backward_op(grad_h, grad_c, *tensors, *attrs)
    dx = dx if attrs.uses_x else None
    return (dU, dx, dw, db, dc0, None) + (None,) * len(attrs)  # mask_pad and the attributes: no gradient


sru_scan_op.register_autograd(_backward, setup_context=_setup_context)

# CUDA kernels of plugins/kernels where torch has CUDA and a device is present (else nothing).
cuda_kernel.register(sru_scan_op)
