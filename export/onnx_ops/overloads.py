"""Names of the function overloads that specialise an rnnx node's local function.

A model-local function is keyed by (domain, name, overload) (ONNX IR 10). The SRUScan body is
specialised on its structural attributes and on which optional inputs are present; the
CausalLinearAttention body on which initial states and the pad mask are present, on the layout (suffix ``_tm`` for
time-major) and, for the ``onnxruntime`` target, on its ``com.microsoft.LinearAttention`` body (:mod:`.ort_attention`;
suffix ``_ms``).
Both are specialised on the state dtype (f32, or f64 for fp64 activations), which the body computes
in. Numeric attributes (scale_x, eps, num_heads) are read in the body through attribute references, so one
overload serves every value.

Overloads are for the ``onnxruntime`` target only. TensorRT's parser keys local functions by name alone,
so two overloads of one op in a graph would collide there: the ``tensorrt`` target has one function
per op and no overloads (:func:`rnnx.export.onnx_ops.finalize.finalize`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SRU = re.compile(r"D([12])_k([34])_skip([01])_tanh([01])_mask([01])_(f32|f64)")
_ATTENTION = re.compile(r"(S0_z0|S0|z0|nostate)(_mask)?(_tm)?_(f32|f64)(_ms)?")


@dataclass(frozen=True)
class SRUVariant:
    """Structure of one SRUScan body: directions D, matrices k, skip term, tanh, mask_pad present."""

    num_directions: int
    num_matrices: int
    has_skip_term: bool
    use_tanh: bool
    has_mask: bool
    double: bool = False

    @property
    def uses_x(self) -> bool:
        """Whether the body reads input x (k = 3 with the skip term)."""
        return self.has_skip_term and self.num_matrices == 3

    @property
    def name(self) -> str:
        return sru_overload(
            self.num_directions, self.num_matrices, self.has_skip_term, self.use_tanh, self.has_mask, self.double
        )


@dataclass(frozen=True)
class AttentionVariant:
    """Structure of one CausalLinearAttention body: which states are given, whether the pad mask is, the layout
    (``time_major``), fp64 state or fp32, and ``lowered``: the ``com.microsoft.LinearAttention`` body (fp32 state
    only) instead of the standard-op O(L^2) one."""

    has_S0: bool
    has_z0: bool
    has_mask: bool = False
    time_major: bool = False
    double: bool = False
    lowered: bool = False

    @property
    def name(self) -> str:
        return attention_overload(self.has_S0, self.has_z0, self.has_mask, self.time_major, self.double, self.lowered)


def _dtype_tag(double: bool) -> str:
    return "f64" if double else "f32"


def sru_overload(
    num_directions: int, num_matrices: int, has_skip_term: bool, use_tanh: bool, has_mask: bool, double: bool
) -> str:
    """E.g. ``D1_k3_skip1_tanh0_mask1_f32``."""
    if num_directions not in (1, 2) or num_matrices not in (3, 4):
        raise ValueError(f"SRUScan: num_directions {num_directions} / num_matrices {num_matrices} out of range")
    return (
        f"D{num_directions}_k{num_matrices}_skip{int(has_skip_term)}_tanh{int(use_tanh)}"
        f"_mask{int(has_mask)}_{_dtype_tag(double)}"
    )


def attention_overload(
    has_S0: bool, has_z0: bool, has_mask: bool, time_major: bool, double: bool, lowered: bool = False
) -> str:
    """``S0_z0_f32``, ``S0_f32``, ``z0_f32`` or ``nostate_f32`` (``_f64`` for an fp64 state), with ``_mask`` after the
    states when mask_pad is given, ``_tm`` for the time-major layout, and a final ``_ms`` for the
    ``com.microsoft.LinearAttention`` body (fp32 state only); e.g. ``S0_z0_mask_tm_f32_ms``."""
    if lowered and double:
        raise ValueError("CausalLinearAttention: the com.microsoft.LinearAttention body has no fp64 state")
    given = [name for name, present in (("S0", has_S0), ("z0", has_z0)) if present]
    return (
        f"{'_'.join(given) or 'nostate'}{'_mask' if has_mask else ''}{'_tm' if time_major else ''}"
        f"_{_dtype_tag(double)}{'_ms' if lowered else ''}"
    )


def parse_sru_overload(name: str) -> SRUVariant:
    """Inverse of :func:`sru_overload`; ``ValueError`` for another string."""
    m = _SRU.fullmatch(name)
    if m is None:
        raise ValueError(f"not an SRUScan overload name: {name!r}")
    D, k, skip, tanh, mask = (int(g) for g in m.groups()[:5])
    return SRUVariant(D, k, bool(skip), bool(tanh), bool(mask), m.group(6) == "f64")


def parse_attention_overload(name: str) -> AttentionVariant:
    """Inverse of :func:`attention_overload`; ``ValueError`` for another string."""
    m = _ATTENTION.fullmatch(name)
    if m is None:
        raise ValueError(f"not a CausalLinearAttention overload name: {name!r}")
    states, mask, tm, dtype, lowered = m.groups()
    if lowered and dtype == "f64":
        raise ValueError(f"not a CausalLinearAttention overload name: {name!r} (fp64 with the com.microsoft body)")
    return AttentionVariant("S0" in states, "z0" in states, bool(mask), bool(tm), dtype == "f64", bool(lowered))
