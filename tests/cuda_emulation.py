"""ctypes binding of librnnx_kernels_emulated.so: the CUDA kernels (plugins/*/cuda, built by plugins/kernels)
compiled for the CUDA host emulation (plugins/kernels/emulation), called on CPU tensors. Test helper, not part of
the package.

The functions mirror the PyTorch CUDA binding's (plugins/<op>/torch/<op>_binding.cpp): the caller allocates every
output, and the state outputs may be the very tensors passed as the input state (in place). The recurrence family's
entry points (linear recurrence, causal convolution) take their inputs as one mapping keyed by the naive twin's
argument names, the dicts their tests build. :func:`load_emulated_kernels` builds and loads the library once per test
module, behind :data:`REQUIRES_EMULATION`'s skips.
"""

from __future__ import annotations

import ctypes
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest
import torch
from test_plugins import BUILD_DIR

from rnnx import plugins
from rnnx.models.ops.sru_scan.arguments import ScanAttributes

DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
SCHEDULES = {"in_order": 0, "reversed": 1, "random": 2}
#: rnnx::kernels::LinearRecurrenceRule and LinearRecurrenceKernel codes
RULES = {"linear": 0, "gated": 1, "delta": 2, "gated_delta": 3}
KERNELS = {"auto": 0, "recurrent": 1, "chunked": 2, "chunked_mma": 3}
#: The library, built by plugins.build_plugins into the plugin tree's build folder.
LIBRARY = BUILD_DIR / "librnnx_kernels_emulated.so"
#: pytest marks of a module that runs the emulated kernels: it needs cmake and the CUDA toolkit to build them.
REQUIRES_EMULATION = [
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot build the kernel emulation"),
    pytest.mark.skipif(
        plugins.find_nvcc() is None, reason="no CUDA toolkit (nvcc, headers): cannot build the kernel emulation"
    ),
]


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


def _mask_bytes(mask_pad: Optional[torch.Tensor], int32: bool = False) -> Optional[torch.Tensor]:
    """The pad mask as the launchers read it: non-zero = pad, uint8 (int32 with ``int32``), contiguous. Keep the
    tensor in a variable until the launch returns: a pointer into a temporary would dangle."""
    if mask_pad is None:
        return None
    return (mask_pad != 0).to(torch.int32 if int32 else torch.uint8).contiguous()


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
        # batch, length, q_heads, kv_heads, dim_k, dim_v, rule, decay_per_key, beta_per_head, scale, qk_l2_norm,
        # kernel, mask_int32, feature_map, time_major, dtype, query, key, value, past_state, decay, beta, mask_pad,
        # output, present_state, normalised, z_in, z_out, eps, workspace
        lib.rnnx_emu_linear_recurrence_forward.argtypes = [i] * 9 + [f] + [i] * 6 + [vp] * 9 + [i, vp, vp, f, vp]
        lib.rnnx_emu_linear_recurrence_forward.restype = i
        # batch, kv_heads, dim_k, normalised, dtype
        lib.rnnx_emu_linear_recurrence_workspace_size.argtypes = [i] * 5
        lib.rnnx_emu_linear_recurrence_workspace_size.restype = ctypes.c_size_t
        # batch, channels, length, kernel_size, silu, mask_int32, dtype, input, weight, bias, past_state, mask_pad,
        # output, present_state
        lib.rnnx_emu_causal_conv_with_state_forward.argtypes = [i] * 7 + [vp] * 7
        lib.rnnx_emu_causal_conv_with_state_forward.restype = i
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
        **attributes: Any,
    ) -> None:
        """sruScanForward: U (L, B, D*d*k), x (L, B, D*d) | None, weight_c / bias (2*D*d), c0 (B, D*d) fp32 |
        None, mask_pad (L, B) bool | None; writes h (L, B, D*d) and c_last (B, D*d) fp32 (may be c0).
        ``attributes``: :class:`~rnnx.models.ops.sru_scan.arguments.ScanAttributes` by name, passed unchecked."""
        d, D, k, has_skip_term, use_tanh, scale_x = ScanAttributes(**attributes)
        L, B = U.shape[0], U.shape[1]
        mask = _mask_bytes(mask_pad)
        status = self._lib.rnnx_emu_sru_scan_forward(
            L, B, d, D, k, int(has_skip_term), int(use_tanh), scale_x, DTYPE_CODES[U.dtype],
            _ptr(U), _ptr(x), _ptr(weight_c), _ptr(bias), _ptr(c0), _ptr(mask), _ptr(h), _ptr(c_last),
        )  # fmt: skip
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
        mask = _mask_bytes(mask_pad)
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

    def linear_recurrence(
        self,
        inputs: Mapping[str, Optional[torch.Tensor]],
        *,
        q_heads: int,
        kv_heads: int,
        rule: str,
        scale: float = 0.0,
        qk_l2_norm: bool = False,
        kernel: str = "auto",
        mask_int32: bool = False,
        feature_map: bool = False,
        time_major: bool = False,
        z: Optional[tuple[Optional[torch.Tensor], torch.Tensor]] = None,
        eps: float = 1e-6,
        workspace: bool = True,
        present_state: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """linearRecurrenceForward on ``inputs`` (``query``, ``key``, ``value`` and ``past_state``, ``decay``, ``beta``,
        ``pad_mask`` each absent or None), layouts of the record LINEAR_RECURRENCE ((T, B, .) and a (T, B) mask with
        ``time_major``). ``feature_map``: elu + 1 on query and key. ``z``: the normaliser's (z_in (B, H_kv, d_k) fp32
        | None, z_out) with ``eps``, and its workspace unless ``workspace`` is False.

        Returns ``(output, present_state)``: the output a new tensor that starts NaN (every element must be written),
        the state written into ``present_state`` (e.g. the past state itself, in place) or a new NaN one."""
        q, k, v = inputs["query"], inputs["key"], inputs["value"]
        past_state, decay, beta = (inputs.get(name) for name in ("past_state", "decay", "beta"))
        B, T = (q.shape[1], q.shape[0]) if time_major else (q.shape[0], q.shape[1])
        dk, dv = q.shape[2] // q_heads, v.shape[2] // kv_heads
        out = torch.full((*q.shape[:2], max(q_heads, kv_heads) * dv), float("nan"), dtype=q.dtype)
        if present_state is None:
            present_state = torch.full((B, kv_heads, dk, dv), float("nan"))
        code = DTYPE_CODES[q.dtype]
        mask = _mask_bytes(inputs.get("pad_mask"), mask_int32)
        z_in, z_out = z if z is not None else (None, None)
        ws = None
        if z is not None and workspace:
            ws_bytes = self._lib.rnnx_emu_linear_recurrence_workspace_size(B, kv_heads, dk, 1, code)
            ws = torch.empty(max(1, ws_bytes), dtype=torch.uint8)
        status = self._lib.rnnx_emu_linear_recurrence_forward(
            B, T, q_heads, kv_heads, dk, dv, RULES[rule],
            int(decay is not None and decay.shape[2] == kv_heads * dk and dk > 1),
            int(beta is not None and beta.shape[2] == kv_heads), scale, int(qk_l2_norm), KERNELS[kernel],
            int(mask_int32), int(feature_map), int(time_major),
            code, _ptr(q), _ptr(k), _ptr(v), _ptr(past_state), _ptr(decay), _ptr(beta), _ptr(mask),
            _ptr(out), _ptr(present_state), int(z is not None), _ptr(z_in), _ptr(z_out), eps, _ptr(ws),
        )  # fmt: skip
        self._check(status, "linearRecurrenceForward")
        return out, present_state

    def causal_conv(
        self,
        inputs: Mapping[str, Optional[torch.Tensor]],
        *,
        silu: bool,
        mask_int32: bool = False,
        present_state: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """causalConvWithStateForward on ``inputs`` (``input``, ``weight`` and ``bias``, ``past_state``, ``pad_mask``
        each absent or None), layouts of the record CAUSAL_CONV_WITH_STATE. Returns ``(output, present_state)`` as
        :meth:`linear_recurrence` does: a new NaN-initialised output, the state in ``present_state`` or a new one."""
        x, weight = inputs["input"], inputs["weight"]
        B, C, T = x.shape
        K = weight.shape[2]
        out = torch.full((B, C, T), float("nan"), dtype=x.dtype)
        if present_state is None:
            present_state = torch.full((B, C, K - 1), float("nan"))
        mask = _mask_bytes(inputs.get("pad_mask"), mask_int32)
        status = self._lib.rnnx_emu_causal_conv_with_state_forward(
            B, C, T, K, int(silu), int(mask_int32), DTYPE_CODES[x.dtype], _ptr(x), _ptr(weight),
            _ptr(inputs.get("bias")), _ptr(inputs.get("past_state")), _ptr(mask), _ptr(out), _ptr(present_state),
        )  # fmt: skip
        self._check(status, "causalConvWithStateForward")
        return out, present_state


def load_emulated_kernels() -> EmulatedKernels:
    """Builds the plugin tree (a no-op when up to date) and loads its emulated kernels, schedule in order."""
    plugins.build_plugins(BUILD_DIR, quiet=True)
    assert LIBRARY.is_file(), f"{LIBRARY} was not built"
    kernels = EmulatedKernels(LIBRARY)
    kernels.set_schedule("in_order")
    return kernels
