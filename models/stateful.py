"""The graph-shaped view of a stateful module: flat tensors in, flat tensors out.

A module with state has ``forward(*inputs, state) -> (*outputs, new_state)``, where ``state`` is any
nesting of tensors (:mod:`rnnx.models.state`: tuples, lists, dicts, dataclasses); a stateless module has
``forward(*inputs) -> output or tuple of outputs``. An ONNX graph (and every runtime backend) takes flat
tensors instead. :class:`StatefulModule` bridges the two::

    forward(*inputs, *past) -> (*outputs, *present)

``past`` / ``present`` are the leaves of the state, named and ordered by
:func:`rnnx.models.state.flatten_state` (``layers.0.S``); the graph calls them
``past_key_values.<name>`` / ``present.<name>`` (:mod:`rnnx.runtime.contract.artifact`). Floating state is fp32
at the boundary whatever the model keeps. :func:`find_state_specs` describes every state tensor as the
contract's :class:`~rnnx.runtime.contract.artifact.StateSpec` by probing the module: its batch axis is the one that
changes between ``init_state(2)`` and ``init_state(3)``, and an axis that grows by the call's length over
one call (a KV cache) is ``past_length``.

:class:`StatefulLM` is the same view of an rnnx language model (:class:`~rnnx.models.lm.RecurrentLM`):
inputs ``input_ids`` (batch, length) int64 and ``attention_mask`` (batch, length) int64 (1 = token),
output ``logits`` (batch, length, vocab).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import torch
from torch import Tensor, nn

from ..runtime.contract.artifact import BATCH, PAST_LENGTH, StateSpec
from .lm import RecurrentLM
from .state import flatten_state, map_tensors


class StateError(TypeError):
    """A state (or a forward's return value) that is not the nesting of tensors the contract needs; one line."""


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``: the contract's (numpy's) spelling; ``bool`` for torch.bool."""
    return str(dtype).removeprefix("torch.")


def torch_dtype(name: str) -> torch.dtype:
    """The inverse of :func:`dtype_name`."""
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype {name!r} is not a torch dtype")
    return dtype


def graph_dtype(dtype: torch.dtype) -> torch.dtype:
    """dtype of a state tensor at the graph boundary: floating state is fp32 in every precision."""
    return torch.float32 if dtype.is_floating_point else dtype


def state_tensors(state: Any, what: str = "state") -> list[tuple[str, Tensor]]:
    """:func:`flatten_state` with a one-line :class:`StateError` naming ``what`` for anything that is not
    tensors (an int, a string, ...)."""
    try:
        return flatten_state(state)
    except TypeError as e:
        raise StateError(f"{what} must be tensors nested in tuples / lists / dicts / dataclasses: {e}") from None


def rebuild_state(template: Any, tensors: Iterator[Tensor]) -> Any:
    """A state with ``template``'s structure whose tensors are taken from ``tensors`` in flat order."""
    try:
        return map_tensors(template, lambda _: next(tensors))
    except TypeError as e:
        raise StateError(str(e)) from None


def _as_outputs(result: Any, what: str) -> tuple[Tensor, ...]:
    outputs = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    for i, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            raise StateError(f"{what}: output {i} is a {type(t).__name__}, expected a tensor")
    if not outputs:
        raise StateError(f"{what}: the module returned no outputs")
    return outputs


class StatefulModule(nn.Module):
    """``(*inputs, *past) -> (*outputs, *present)`` for ``module`` (see the module doc).

    ``init_state(batch) -> state`` builds a fresh state (None: a stateless module); ``num_inputs`` is the
    number of data inputs (the rest of the flat arguments is the past state).
    """

    def __init__(self, module: nn.Module, init_state: Optional[Callable[[int], Any]], num_inputs: int) -> None:
        super().__init__()
        self.module = module
        self.init_state = init_state
        self.num_inputs = num_inputs
        self.template = None if init_state is None else init_state(1)
        flat = state_tensors(self.template, "init_state(1)")
        self.state_names = [name for name, _ in flat]
        self.model_dtypes = [t.dtype for _, t in flat]

    @property
    def stateful(self) -> bool:
        return self.init_state is not None

    def in_dtype(self, dtype: torch.dtype) -> StatefulModule:
        """A copy whose module has floating ``dtype`` (the state template rebuilt from it, so a module that
        keeps part of its state in its own dtype gets it in that dtype); itself when the module already
        computes in ``dtype``."""
        floating = [t for t in (*self.module.parameters(), *self.module.buffers()) if t.is_floating_point()]
        if all(t.dtype == dtype for t in floating):
            return self
        module = copy.deepcopy(self.module).to(dtype)
        init = self.init_state
        if init is not None and getattr(init, "__self__", None) is self.module:
            init = getattr(module, init.__name__)
        return StatefulModule(module, init, self.num_inputs)

    def step(self, inputs: Sequence[Tensor], state: Any) -> tuple[tuple[Tensor, ...], Any]:
        """One call of the wrapped module in its own terms: ``(outputs, new state)``."""
        if not self.stateful:
            return _as_outputs(self.module(*inputs), "forward"), None
        result = self.module(*inputs, state)
        if not isinstance(result, (tuple, list)) or len(result) < 2:
            raise StateError(
                f"forward(*inputs, state) must return (*outputs, new_state), got {type(result).__name__}"
                + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
            )
        return _as_outputs(result[:-1], "forward"), result[-1]

    def forward(self, *flat: Tensor) -> tuple[Tensor, ...]:
        inputs, past = flat[: self.num_inputs], flat[self.num_inputs :]
        if len(past) != len(self.model_dtypes):
            raise ValueError(f"expected {len(self.model_dtypes)} state tensors, got {len(past)}")
        state = rebuild_state(self.template, iter(t.to(dt) for t, dt in zip(past, self.model_dtypes)))
        outputs, new_state = self.step(inputs, state)
        present = [t.to(graph_dtype(t.dtype)) for _, t in state_tensors(new_state, "the returned state")]
        return (*outputs, *present)


class StatefulLM(StatefulModule):
    """``(input_ids (B, L) int64, attention_mask (B, L) int64, *past) -> (logits (B, L, V), *present)``
    for an rnnx language model (a KV cache is kept in the activation dtype, so an fp16 model's cache is
    cast to fp16 on the way in and back to fp32 on the way out)."""

    def __init__(self, model: RecurrentLM) -> None:
        super().__init__(model, model.init_state, 2)

    @property
    def model(self) -> RecurrentLM:
        return self.module

    def in_dtype(self, dtype: torch.dtype) -> StatefulLM:
        floating = [t for t in (*self.module.parameters(), *self.module.buffers()) if t.is_floating_point()]
        if all(t.dtype == dtype for t in floating):
            return self
        return StatefulLM(copy.deepcopy(self.module).to(dtype))

    def step(self, inputs: Sequence[Tensor], state: Any) -> tuple[tuple[Tensor, ...], Any]:
        input_ids, attention_mask = inputs
        logits, new_state = self.module(input_ids, state, pad_mask=attention_mask == 0)
        return (logits,), new_state


def _shapes(state: Any, what: str) -> dict[str, tuple[int, ...]]:
    return {name: tuple(t.shape) for name, t in state_tensors(state, what)}


@torch.no_grad()
def find_state_specs(graph: StatefulModule, inputs: Sequence[Tensor], batch: int, length: int) -> list[StateSpec]:
    """The :class:`StateSpec` of every state tensor of ``graph``, flat order, found by probing.

    ``inputs`` are example data inputs of ``batch`` rows and ``length`` positions. The batch axis is
    the one axis that differs between ``init_state(2)`` and ``init_state(3)``; an axis that grows by
    exactly ``length`` over one call from ``init_state(batch)`` is ``past_length`` (``grows``) and must
    start empty. The initial state must be zeros: that is what every runtime starts a stream from.
    Raises :class:`StateError` naming the tensor when a state does not follow these rules.
    """
    if not graph.stateful:
        return []
    two, three = _shapes(graph.init_state(2), "init_state(2)"), _shapes(graph.init_state(3), "init_state(3)")
    start = graph.init_state(batch)
    before = _shapes(start, f"init_state({batch})")
    for name, tensor in state_tensors(start, f"init_state({batch})"):
        if tensor.numel() and bool(tensor.detach().ne(0).any()):
            raise StateError(
                f"state tensor {name!r}: init_state gives non-zero values, but every runtime starts a stream "
                "from zeros (an empty cache); apply a learned initial state inside forward instead"
            )
    _, new_state = graph.step(inputs, start)
    after = {name: t for name, t in state_tensors(new_state, "the state forward returned")}
    if list(after) != list(two) or list(three) != list(two):
        raise StateError(
            f"forward returned state tensors {list(after)}, but init_state gives {list(two)}: "
            "the state must keep its structure from call to call"
        )
    specs = []
    for name, tensor in after.items():
        axes = [i for i, (a, b) in enumerate(zip(two[name], three[name])) if a != b]
        if len(two[name]) != len(three[name]) or len(axes) != 1 or (two[name][axes[0]], three[name][axes[0]]) != (2, 3):
            raise StateError(
                f"state tensor {name!r}: no single batch axis (init_state(2) gives {two[name]}, "
                f"init_state(3) gives {three[name]}); exactly one axis must equal the batch size"
            )
        shape: list[Any] = list(after[name].shape)
        shape[axes[0]] = BATCH
        grown = [i for i, (a, b) in enumerate(zip(before[name], tensor.shape)) if a != b]
        if (
            len(before[name]) != tensor.dim()
            or len(grown) > 1
            or (grown and tensor.shape[grown[0]] != before[name][grown[0]] + length)
        ):
            raise StateError(
                f"state tensor {name!r}: shape {before[name]} before a call of length {length}, "
                f"{tuple(tensor.shape)} after; a state tensor keeps its shape or grows one axis by the length"
            )
        if grown and before[name][grown[0]] != 0:
            raise StateError(
                f"state tensor {name!r} grows along axis {grown[0]}, but init_state({batch}) gives it "
                f"{before[name][grown[0]]} positions there; a growing cache must start empty"
            )
        if grown:
            shape[grown[0]] = PAST_LENGTH
        specs.append(StateSpec(name, tuple(shape), dtype_name(graph_dtype(tensor.dtype)), bool(grown)))
    return specs


def example_state(
    specs: Sequence[StateSpec], batch: int, past_length: int, gen: torch.Generator, device: Any = None
) -> list[Tensor]:
    """State tensors for tracing: small random numbers (fp32 floats), all-True bools, zero integers."""
    out = []
    for spec in specs:
        shape = spec.concrete_shape(batch, past_length)
        dtype = torch_dtype(spec.dtype)
        if dtype == torch.bool:
            out.append(torch.ones(shape, dtype=torch.bool, device=device))
        elif dtype.is_floating_point:
            out.append(torch.rand(shape, generator=gen, dtype=torch.float32).to(device, dtype))
        else:
            out.append(torch.zeros(shape, dtype=dtype, device=device))
    return out


def lm_example_data(model: RecurrentLM, batch: int = 2, length: int = 3, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``(input_ids, attention_mask)`` of ``batch`` x ``length`` random tokens, no pads."""
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    ids = torch.randint(0, model.vocab_size, (batch, length), generator=gen).to(device)
    return ids, torch.ones(batch, length, dtype=torch.int64, device=device)


def lm_state_specs(model: RecurrentLM) -> list[StateSpec]:
    """The state tensors of an rnnx language model's graph, in :func:`flatten_state` order."""
    return find_state_specs(StatefulLM(model).eval(), lm_example_data(model), 2, 3)


def example_inputs(
    model: RecurrentLM, batch: int = 2, length: int = 3, past_length: int = 4, seed: int = 0
) -> tuple[Tensor, ...]:
    """Flat inputs of a language model's graph for tracing: no size is 0 or 1 and batch, length,
    past_length differ, so none is specialised. State values are small random numbers (the KV ``valid``
    mask all True)."""
    ids, mask = lm_example_data(model, batch, length, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    return (ids, mask, *example_state(lm_state_specs(model), batch, past_length, gen, ids.device))
