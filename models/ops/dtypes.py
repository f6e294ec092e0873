"""The state dtype rule as a TorchScript-compilable function (the rule itself: docs/ops.md).

:func:`rnnx.models.ops.spec.state_dtype_for`, the torch-free spec's entry point, delegates here, so the
rule is written once and scripted modules (``torch.jit.script``) call the same function.
"""

import torch


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype recurrent state is kept in for activations of ``dtype``: fp32, or fp64 for fp64."""
    return torch.float64 if dtype == torch.float64 else torch.float32
