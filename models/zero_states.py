"""Fresh (all-zero) recurrent states for the layers' ``init_state``: one place for the rule that a state is
kept in the state dtype of the layer's parameters (:func:`~rnnx.models.ops.dtypes.state_dtype`: fp32 for
fp32 / fp16 / bf16 weights, fp64 for fp64) on their device unless another device is asked for.
"""

from typing import Optional

import torch
from torch import Tensor

from .ops.dtypes import state_dtype

__all__ = ["zero_state"]


def zero_state(shape: list[int], like: Tensor, device: Optional[torch.device] = None) -> Tensor:
    """Zeros of ``shape`` in the state dtype of ``like`` (a parameter of the layer) on ``device`` (``like``'s
    when None); TorchScript code."""
    return torch.zeros(shape, dtype=state_dtype(like.dtype), device=like.device if device is None else device)
