"""What every ``torch.library`` op of rnnx registers the same way, from its record.

:func:`torch_schema` writes the op's schema from its :class:`~rnnx.runtime.contract.ops.OpSpec` (names, order,
optional inputs, attribute types), so the torch op and the ONNX node cannot disagree.
:func:`register_autograd_by_recompute` gives an op whose forward is plain differentiable torch code a backward
that re-runs that forward under autograd: nothing but the inputs is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import torch
from torch import Tensor

from rnnx.runtime.contract.ops import OpSpec

_SCHEMA_TYPES = {bool: "int", int: "int", float: "float", str: "str"}


def torch_schema(spec: OpSpec) -> str:
    """``(Tensor a, Tensor? b, ..., int attr, ...) -> (Tensor out, ...)`` from the record (the op name is not part)."""
    args = [f"Tensor{'?' if name in spec.optional_inputs else ''} {name}" for name in spec.inputs]
    args += [f"{_SCHEMA_TYPES[type(default)]} {name}" for name, default in spec.attributes.items()]
    outs = [f"Tensor {name}" for name in spec.outputs]
    return f"({', '.join(args)}) -> ({', '.join(outs)})"


def register_autograd_by_recompute(op: Any, spec: OpSpec, forward: Callable[..., tuple[Tensor, ...]]) -> None:
    """Register ``op``'s autograd: the backward re-runs ``forward`` (the op's own torch code) under autograd.

    ``forward`` takes the op's arguments in schema order (inputs, then attributes) and returns its outputs.
    Gradients flow to every floating input that needs one; masks and attributes get none.
    """
    n_inputs = len(spec.inputs)

    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        ctx.save_for_backward(*inputs[:n_inputs])
        ctx.attributes = inputs[n_inputs:]

    def backward(ctx: Any, *grads: Optional[Tensor]) -> tuple[Optional[Tensor], ...]:
        saved = ctx.saved_tensors
        wants = [t is not None and t.is_floating_point() and ctx.needs_input_grad[i] for i, t in enumerate(saved)]
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_(w) if t is not None else None for t, w in zip(saved, wants)]
            outputs = forward(*leaves, *ctx.attributes)
        pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
        targets = [leaf for leaf, w in zip(leaves, wants) if w]
        found: list[Optional[Tensor]] = [None] * len(targets)
        if pairs and targets:
            found = list(torch.autograd.grad([o for o, _ in pairs], targets, [g for _, g in pairs], allow_unused=True))
        it = iter(found)
        result = [next(it) if w else None for w in wants]
        return (*result, *([None] * len(ctx.attributes)))

    op.register_autograd(backward, setup_context=setup_context)
