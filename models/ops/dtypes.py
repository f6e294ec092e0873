"""The state dtype rule as a TorchScript-compilable function (the rule itself: docs/ops.md).

The one place the rule is written in code: the torch ops, the layers and scripted modules
(``torch.jit.script``) call this function; the torch-free op records (:mod:`rnnx.runtime.contract.ops`)
state it in words.
"""

import torch


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype recurrent state is kept in for activations of ``dtype``: fp32, or fp64 for fp64."""
    return torch.float64 if dtype == torch.float64 else torch.float32
