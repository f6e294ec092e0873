"""CUDA implementations of the rnnx ops: the kernels of ``rnnx.plugins`` behind ``torch.library``.

"One launcher, two callers": the TensorRT plugins and this PyTorch binding (``binding.cpp``) call the
same C++ launchers (``plugins/kernels/include/rnnx/kernels.h``). The binding is compiled lazily with
:func:`torch.utils.cpp_extension.load` from ``binding.cpp`` plus the kernel ``.cu`` files, on the
first CUDA call, and only where torch has CUDA and a device is present. The kernel sources are package
data of ``rnnx.plugins``, so the binding builds from an installed wheel as well as from a checkout.

:func:`register_sru_scan` and :func:`register_causal_linear_attention` register the CUDA kernels of
``rnnx::sru_scan`` and ``rnnx::causal_linear_attention``; the op modules call them at import. Without
CUDA they register nothing. With CUDA, a call runs the kernel for fp32 / fp16 / bf16 inputs and the
op's torch code for fp64 or when the binding cannot be built (warned once), so a failed build costs
speed, never correctness. Autograd is unchanged: backward passes run the ops' torch / CPU code.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Optional

import torch
from torch import Tensor

from rnnx import plugins

from ..jit import extension_name

#: Name of the built extension, before the hash of its build's inputs (:func:`rnnx.models.ops.jit.extension_name`).
EXTENSION_NAME = "rnnx_cuda_kernels_v1"
BINDING_SOURCE = Path(__file__).resolve().parent / "binding.cpp"
#: The kernel library shared with the TensorRT plugins, as ``rnnx.plugins`` ships it.
KERNELS_DIR = plugins.KERNELS_DIR
KERNEL_SOURCES = plugins.KERNEL_SOURCES
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_lock = threading.Lock()
_module: Optional[ModuleType] = None
_error: Optional[str] = None


def cuda_present() -> bool:
    """Whether torch is a CUDA build and a CUDA device is visible."""
    return torch.version.cuda is not None and torch.cuda.is_available()


def sources_present() -> bool:
    """Whether the binding and kernel sources are on disk (a checkout or an installed wheel)."""
    return BINDING_SOURCE.is_file() and all(p.is_file() for p in KERNEL_SOURCES)


def load() -> Optional[ModuleType]:
    """The compiled binding (``sru_scan``, ``causal_linear_attention``), or ``None`` if unavailable."""
    global _module, _error
    if _module is not None or _error is not None:
        return _module
    with _lock:
        if _module is None and _error is None:
            if not cuda_present():
                _error = "no CUDA device or torch without CUDA"
            elif not sources_present():
                _error = f"kernel sources not found under {KERNELS_DIR}"
            else:
                try:
                    from torch.utils.cpp_extension import load as build

                    sources = [BINDING_SOURCE, *KERNEL_SOURCES]
                    includes = [plugins.KERNELS_INCLUDE_DIR, plugins.KERNELS_SRC_DIR]
                    _module = build(
                        name=extension_name(EXTENSION_NAME, sources, includes, ["-O3", "cuda:-O3"]),
                        sources=[str(s) for s in sources],
                        extra_include_paths=[str(d) for d in includes],
                        extra_cflags=["-O3"],
                        extra_cuda_cflags=["-O3"],
                        verbose=False,
                    )
                except Exception as exc:  # any build failure falls back to the torch code
                    _error = f"{type(exc).__name__}: {exc}"
            if _module is None and cuda_present():
                warnings.warn(
                    f"rnnx: CUDA kernels unavailable ({EXTENSION_NAME}); the ops run their torch "
                    f"code on CUDA instead. Reason:\n{_error}",
                    RuntimeWarning,
                    stacklevel=2,
                )
    return _module


def build_error() -> Optional[str]:
    """Why :func:`load` returned ``None`` (``None`` when it has not failed)."""
    return _error


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def sru_scan_forward(
    U, x, weight_c, bias, c0, mask_pad, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x
) -> Optional[tuple[Tensor, Tensor]]:
    """The SRU scan on the CUDA kernel, or ``None`` where it does not apply (dtype, no binding).

    Inputs as the op takes them (validated by the caller); weight_c, bias and x are converted to U's
    dtype, the mask to uint8. Returns new tensors h (L, B, D*d) and c_last (B, D*d).
    """
    if U.dtype not in KERNEL_DTYPES or c0.dtype != torch.float32:
        return None
    ext = load()
    if ext is None:
        return None
    L, B = U.shape[0], U.shape[1]
    width = num_directions * hidden_size
    uses_x = has_skip_term and num_matrices == 3
    h = U.new_empty((L, B, width))
    c_last = torch.empty_like(c0, memory_format=torch.contiguous_format)
    ext.sru_scan(
        U.contiguous(),
        x.to(U.dtype).contiguous() if uses_x else None,
        weight_c.to(U.dtype).contiguous(),
        bias.to(U.dtype).contiguous(),
        c0.contiguous(),
        None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous(),
        h,
        c_last,
        hidden_size,
        num_directions,
        num_matrices,
        bool(has_skip_term),
        bool(use_tanh),
        float(scale_x),
        _stream(U.device),
    )
    return h, c_last


def causal_linear_attention_forward(q, k, v, S0, z0, eps) -> Optional[tuple[Tensor, Tensor, Tensor]]:
    """Causal linear attention on the CUDA kernels, or ``None`` where they do not apply.

    Returns new tensors out (B, H, L, M), S_last (B, H, E, M) and z_last (B, H, E).
    """
    if q.dtype not in KERNEL_DTYPES:
        return None
    ext = load()
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
        _stream(q.device),
    )
    return out, S_last, z_last


def _register(op, kernel: Callable) -> bool:
    if not cuda_present():
        return False
    op.register_kernel("cuda")(kernel)
    return True


def register_sru_scan(op) -> bool:
    """Registers the CUDA kernel of ``rnnx::sru_scan`` (``op``: the custom op object) where CUDA is
    present; returns whether it did. Falls back to the op's torch loop per call where needed."""

    def sru_scan_cuda(
        U, x, weight_c, bias, c0, mask_pad, hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x
    ):
        from ..sru import torch_loop
        from ..sru.checks import check_sru_scan_inputs

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
        attrs = (hidden_size, num_directions, num_matrices, has_skip_term, use_tanh, scale_x)
        result = sru_scan_forward(U, x, weight_c, bias, c0, mask_pad, *attrs)
        return result if result is not None else torch_loop.forward(U, x, weight_c, bias, c0, mask_pad, *attrs)

    return _register(op, sru_scan_cuda)


def register_causal_linear_attention(op) -> bool:
    """Registers the CUDA kernel of ``rnnx::causal_linear_attention`` where CUDA is present; returns
    whether it did. Falls back to the chunked torch forward per call where needed."""

    def causal_linear_attention_cuda(q, k, v, S0, z0, eps):
        from ..linear_attention.chunked import DEFAULT_CHUNK_SIZE, chunked_forward
        from ..linear_attention.op import check_inputs

        check_inputs(q, k, v, S0, z0)
        result = causal_linear_attention_forward(q, k, v, S0, z0, eps)
        return result if result is not None else chunked_forward(q, k, v, S0, z0, eps, DEFAULT_CHUNK_SIZE)

    return _register(op, causal_linear_attention_cuda)
