"""The SRU scan's twelve arguments as two values: its tensors and its attributes, each written once.

The op's schema keeps them as twelve arguments (``torch.library`` and ONNX take tensors and scalars);
everything behind the registration passes one :class:`ScanTensors` and one :class:`ScanAttributes`
(:func:`split_arguments`) and unpacks them (``*tensors``, ``*attrs``) where a kernel takes the flat list. Names,
order and defaults are :data:`rnnx.runtime.contract.ops.SRU_SCAN`'s records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

from torch import Tensor

from rnnx.runtime.contract.ops import SRU_SCAN

_DEFAULTS = SRU_SCAN.attributes


class ScanTensors(NamedTuple):
    """U (L, B, D*d*k); x (L, B, D*d) or None; weight_c, bias (2*D*d,); c0 (B, D*d); mask_pad (L, B) or None."""

    U: Tensor
    x: Optional[Tensor]
    weight_c: Tensor
    bias: Tensor
    c0: Tensor
    mask_pad: Optional[Tensor]


class ScanAttributes(NamedTuple):
    """``hidden_size`` d (per direction), ``num_directions`` D (1 or 2), ``num_matrices`` k (3 or 4),
    ``has_skip_term``, ``use_tanh`` (g = tanh, else identity) and ``scale_x`` (the skip term's scale when k = 3),
    in the op's argument order."""

    hidden_size: int
    num_directions: int = int(_DEFAULTS["num_directions"])
    num_matrices: int = int(_DEFAULTS["num_matrices"])
    has_skip_term: bool = bool(_DEFAULTS["has_skip_term"])
    use_tanh: bool = bool(_DEFAULTS["use_tanh"])
    scale_x: float = float(_DEFAULTS["scale_x"])

    @classmethod
    def of(
        cls, hidden_size: int, num_directions: int, num_matrices: int, has_skip_term: bool, use_tanh: bool,
        scale_x: float,
    ) -> ScanAttributes:  # fmt: skip
        """The attributes as the op's arguments pass them, the flags as bools and the scale as a float (the
        integers are checked, not converted, by :func:`~.checks.check_sru_scan_inputs`)."""
        return cls(hidden_size, num_directions, num_matrices, bool(has_skip_term), bool(use_tanh), float(scale_x))

    @property
    def width(self) -> int:
        """D * d: the width of h, c0 and c_last."""
        return self.num_directions * self.hidden_size

    @property
    def uses_x(self) -> bool:
        """Whether the scan reads x: the skip term with k = 3 (k = 4 carries its own projection in U)."""
        return self.has_skip_term and self.num_matrices == 3


def split_arguments(arguments: Sequence[Any]) -> tuple[ScanTensors, ScanAttributes]:
    """The op's twelve arguments, in schema order, as (tensors, attributes)."""
    count = len(ScanTensors._fields)
    return ScanTensors(*arguments[:count]), ScanAttributes.of(*arguments[count:])
