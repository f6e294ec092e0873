"""ctypes binding of librnnx_kernels_emulated.so: the CUDA kernels (plugins/*/cuda, built by plugins/kernels)
compiled for the CUDA host emulation (plugins/kernels/emulation), called on CPU tensors. Test helper, not part of
the package.

The functions mirror the PyTorch CUDA binding's (plugins/<op>/torch/<op>_binding.cpp): the caller allocates every
output, and the state outputs may be the very tensors passed as the input state (in place).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
SCHEDULES = {"in_order": 0, "reversed": 1, "random": 2}


@dataclass(frozen=True)
class Stats:
    """What the launches since the last reset executed (rnnx::emu::Stats)."""

    launches: int
    blocks: int
    threads: int
    block_barriers: int
    warp_collectives: int
    mma: int
    max_shared_bytes: int
    attribute_calls: int


class EmulatedLaunchError(RuntimeError):
    """A launcher returned an error; the message holds the cudaError_t code and what the emulation found."""


def _ptr(t: Optional[torch.Tensor]) -> Optional[int]:
    if t is None:
        return None
    assert t.device.type == "cpu" and t.is_contiguous(), "emulated kernels take contiguous CPU tensors"
    return t.data_ptr()


class EmulatedKernels:
    """The emulated kernels in ``library`` (``<build>/librnnx_kernels_emulated.so``)."""

    def __init__(self, library: Path) -> None:
        lib = ctypes.CDLL(str(library))
        vp, fp, i, f = ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        lib.rnnx_emu_sru_scan_forward.argtypes = [i, i, i, i, i, i, i, f, i, vp, vp, vp, vp, fp, vp, vp, fp]
        lib.rnnx_emu_sru_scan_forward.restype = i
        lib.rnnx_emu_causal_linear_attention_workspace_size.argtypes = [i, i, i, i, i, i]
        lib.rnnx_emu_causal_linear_attention_workspace_size.restype = ctypes.c_size_t
        # batch, heads, length, dim_k, dim_v, eps, time_major, dtype, q, k, v, S0, z0, mask_pad, out, S_last,
        # z_last, workspace
        lib.rnnx_emu_causal_linear_attention_forward.argtypes = [i, i, i, i, i, f, i, i, *[vp] * 10]
        lib.rnnx_emu_causal_linear_attention_forward.restype = i
        lib.rnnx_emu_set_schedule.argtypes = [i, ctypes.c_uint64]
        lib.rnnx_emu_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        lib.rnnx_emu_take_error_message.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self._lib = lib

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            buffer = ctypes.create_string_buffer(1024)
            self._lib.rnnx_emu_take_error_message(buffer, len(buffer))
            raise EmulatedLaunchError(f"{what}: cudaError_t {status}: {buffer.value.decode()}")

    def set_schedule(self, schedule: str, seed: int = 0) -> None:
        """Order of threads and blocks between barriers: "in_order", "reversed" or "random"."""
        self._lib.rnnx_emu_set_schedule(SCHEDULES[schedule], seed)

    def reset_stats(self) -> None:
        self._lib.rnnx_emu_reset_stats()

    def forget_function_attributes(self) -> None:
        """Forgets every cudaFuncSetAttribute limit, as a new CUDA context does."""
        self._lib.rnnx_emu_forget_function_attributes()

    def stats(self) -> Stats:
        values = (ctypes.c_uint64 * 8)()
        self._lib.rnnx_emu_stats(values)
        return Stats(*[int(v) for v in values])

    def sru_scan(
        self,
        U: torch.Tensor,
        x: Optional[torch.Tensor],
        weight_c: torch.Tensor,
        bias: torch.Tensor,
        c0: Optional[torch.Tensor],
        mask_pad: Optional[torch.Tensor],
        h: torch.Tensor,
        c_last: torch.Tensor,
        hidden_size: int,
        num_directions: int,
        num_matrices: int,
        has_skip_term: bool,
        use_tanh: bool,
        scale_x: float,
    ) -> None:
        """sruScanForward: U (L, B, D*d*k), x (L, B, D*d) | None, weight_c / bias (2*D*d), c0 (B, D*d) fp32 |
        None, mask_pad (L, B) bool | None; writes h (L, B, D*d) and c_last (B, D*d) fp32 (may be c0)."""
        L, B = U.shape[0], U.shape[1]
        mask = None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous()
        status = self._lib.rnnx_emu_sru_scan_forward(
            L,
            B,
            hidden_size,
            num_directions,
            num_matrices,
            int(has_skip_term),
            int(use_tanh),
            scale_x,
            DTYPE_CODES[U.dtype],
            _ptr(U),
            _ptr(x),
            _ptr(weight_c),
            _ptr(bias),
            _ptr(c0),
            _ptr(mask),
            _ptr(h),
            _ptr(c_last),
        )
        self._check(status, "sruScanForward")

    def causal_linear_attention(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        S0: Optional[torch.Tensor],
        z0: Optional[torch.Tensor],
        mask_pad: Optional[torch.Tensor],
        out: torch.Tensor,
        S_last: torch.Tensor,
        z_last: torch.Tensor,
        eps: float,
        num_heads: int,
        time_major: bool = False,
    ) -> None:
        """causalLinearAttentionForward, heads packed: q, k (B, L, H*E), v (B, L, H*M), mask_pad (B, L) bool |
        None, all (L, B, ...) when ``time_major``; S0 (B, H, E, M) / z0 (B, H, E) fp32 | None; writes out (q's
        leading axes, H*M) and S_last / z_last (may be S0 / z0)."""
        B, L = (q.shape[1], q.shape[0]) if time_major else (q.shape[0], q.shape[1])
        H = num_heads
        E, M = q.shape[-1] // H, v.shape[-1] // H
        code = DTYPE_CODES[q.dtype]
        mask = None if mask_pad is None else (mask_pad != 0).to(torch.uint8).contiguous()
        workspace_bytes = self._lib.rnnx_emu_causal_linear_attention_workspace_size(B, H, L, E, M, code)
        workspace = torch.empty(max(1, workspace_bytes), dtype=torch.uint8)
        status = self._lib.rnnx_emu_causal_linear_attention_forward(
            B,
            H,
            L,
            E,
            M,
            eps,
            int(time_major),
            code,
            _ptr(q),
            _ptr(k),
            _ptr(v),
            _ptr(S0),
            _ptr(z0),
            _ptr(mask),
            _ptr(out),
            _ptr(S_last),
            _ptr(z_last),
            _ptr(workspace),
        )
        self._check(status, "causalLinearAttentionForward")
