"""Input validation of the SRU scan, with messages that name the tensor and expected vs got."""

from __future__ import annotations

from typing import Optional

from torch import Tensor

from rnnx.models.ops.dtypes import state_dtype
from rnnx.runtime.contract.ops import MASK, SRU_SCAN

from .arguments import ScanAttributes, ScanTensors


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def check_sru_scan_inputs(tensors: ScanTensors, attrs: ScanAttributes) -> None:
    """Raise ``ValueError`` (shapes, attributes, devices) or ``TypeError`` (dtypes) on bad inputs.

    Expected: U (L, B, D*d*k) floating; x (L, B, D*d) when k == 3 with the skip term (ignored
    otherwise); weight_c and bias (2*D*d,); c0 (B, D*d) of dtype ``state_dtype(U.dtype)``;
    mask_pad (L, B) or None; all on U's device.
    """
    U, x, weight_c, bias, c0, mask_pad = tensors
    hidden_size, num_directions, num_matrices, has_skip_term = attrs[:4]
    if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size <= 0:
        raise ValueError(f"sru_scan: hidden_size must be a positive int, got {hidden_size!r}")
    if num_directions not in (1, 2):
        raise ValueError(f"sru_scan: num_directions must be 1 or 2, got {num_directions!r}")
    if num_matrices not in (3, 4):
        raise ValueError(f"sru_scan: num_matrices must be 3 or 4, got {num_matrices!r}")
    D, d, k = num_directions, hidden_size, num_matrices
    if not U.is_floating_point():
        raise TypeError(f"sru_scan: U must be a floating tensor, got {U.dtype}")
    if U.dim() != 3 or U.shape[2] != D * d * k:
        raise ValueError(f"sru_scan: U has shape {_shape(U)} but expected (L, B, D*d*k={D}*{d}*{k}={D * d * k})")
    L, B = int(U.shape[0]), int(U.shape[1])
    expected: list[tuple[str, Optional[Tensor], tuple[int, ...], str]] = [
        ("weight_c", weight_c, (2 * D * d,), f"(2*D*d={2 * D * d},)"),
        ("bias", bias, (2 * D * d,), f"(2*D*d={2 * D * d},)"),
        ("c0", c0, (B, D * d), f"(B={B}, D*d={D * d})"),
    ]
    if has_skip_term and k == 3:
        if x is None:
            raise ValueError(
                "sru_scan: x is required when has_skip_term=True and num_matrices=3 "
                "(the skip term is scale_x * x); pass x or use num_matrices=4"
            )
        expected.append(("x", x, (L, B, D * d), f"(L={L}, B={B}, D*d={D * d})"))
    if mask_pad is not None:
        expected.append(("mask_pad", mask_pad, (L, B), f"(L={L}, B={B})"))
    for name, t, shape, spelled in expected:
        if _shape(t) != shape:
            raise ValueError(f"sru_scan: {name} has shape {_shape(t)} but expected {spelled}")
        if t.device != U.device:
            raise ValueError(f"sru_scan: {name} is on {t.device} but U is on {U.device}")
        if SRU_SCAN.input(name).role != MASK and not t.is_floating_point():
            raise TypeError(f"sru_scan: {name} must be a floating tensor, got {t.dtype}")
    state = state_dtype(U.dtype)
    if c0.dtype != state:
        raise TypeError(
            f"sru_scan: c0 has dtype {c0.dtype} but the state dtype for U of dtype {U.dtype} "
            f"is {state} (rnnx.models.ops.dtypes.state_dtype)"
        )
    if mask_pad is not None and mask_pad.is_complex():
        raise TypeError(f"sru_scan: mask_pad must be bool, integer or floating, not {mask_pad.dtype}")


__all__ = ["check_sru_scan_inputs"]
