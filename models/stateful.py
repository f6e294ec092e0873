"""The graph-shaped view of a :class:`~rnnx.models.lm.RecurrentLM`: flat tensors in, flat tensors out.

An rnnx model takes ``(tokens, model state, pad_mask)``; an ONNX graph (and every runtime backend)
takes flat tensors named by the artifact contract (:mod:`rnnx.runtime.artifact`). :class:`StatefulLM`
bridges the two:

* inputs  ``input_ids`` (batch, length) int64, ``attention_mask`` (batch, length) int64 (1 = token,
  0 = pad), then ``past_key_values.<name>`` for every state tensor;
* outputs ``logits`` (batch, length, vocab), then ``present.<name>`` in the same order.

State tensors are the leaves of the model state, named and ordered by
:func:`rnnx.models.state.flatten_state`; :func:`state_specs` describes each one as the contract's
:class:`~rnnx.runtime.artifact.StateSpec` (symbolic shape, dtype name), the one description that the
exporter writes into ``rnnx.json`` and the runtime reads back. Used by the exporter and by the
runtime's torch backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor, nn

from ..runtime.artifact import BATCH, PAST_LENGTH, StateSpec
from .lm import RecurrentLM
from .state import KVCache, flatten_state


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


def _kv_fields(state: Any, prefix: str = "") -> set[str]:
    """Flat names of every tensor that lives inside a :class:`KVCache` (the growing ones)."""
    if isinstance(state, KVCache):
        return {name for name, _ in flatten_state(state, prefix)}
    out: set[str] = set()
    if isinstance(state, (list, tuple)):
        for i, s in enumerate(state):
            out |= _kv_fields(s, f"{prefix}.{i}" if prefix else str(i))
    elif dataclasses.is_dataclass(state):
        for f in dataclasses.fields(state):
            out |= _kv_fields(getattr(state, f.name), f"{prefix}.{f.name}" if prefix else f.name)
    return out


def state_specs(model: RecurrentLM) -> list[StateSpec]:
    """The state tensors of ``model``'s graph, in :func:`flatten_state` order.

    The ``batch`` axis is found by building states for two batch sizes and comparing shapes (axis 0
    for every state tensor of an rnnx model except the stacked SRU cell states ``c`` (num_layers,
    batch, width), whose axis 1 is); a KV-cache tensor's axis 2 (key/value) or 1 (valid) is
    ``past_length``.
    """
    a, b = model.init_state(2), model.init_state(3)
    growing = _kv_fields(a)
    specs = []
    for (name, ta), (_, tb) in zip(flatten_state(a), flatten_state(b)):
        shape: list[Any] = [BATCH if da != db else da for da, db in zip(ta.shape, tb.shape)]
        if name in growing:
            shape[-1 if ta.dim() == 2 else 2] = PAST_LENGTH
        specs.append(StateSpec(name, tuple(shape), dtype_name(graph_dtype(ta.dtype)), name in growing))
    return specs


def _rebuild(template: Any, tensors: Iterator[Tensor]) -> Any:
    """A state with ``template``'s structure whose tensors are taken from ``tensors`` in flat order."""
    if template is None:
        return None
    if isinstance(template, Tensor):
        return next(tensors)
    if isinstance(template, (list, tuple)):
        return type(template)(_rebuild(t, tensors) for t in template)
    if dataclasses.is_dataclass(template):
        return dataclasses.replace(
            template, **{f.name: _rebuild(getattr(template, f.name), tensors) for f in dataclasses.fields(template)}
        )
    raise TypeError(f"not a state: {type(template).__name__}")


class StatefulLM(nn.Module):
    """``(input_ids (B, L) int64, attention_mask (B, L) int64, *past) -> (logits (B, L, V), *present)``.

    ``past`` / ``present`` follow :func:`state_specs`: floating state is fp32 at the boundary and
    converted to the state dtype the model keeps (a KV cache is kept in the activation dtype, so an
    fp16 model's cache is cast to fp16 on the way in and back to fp32 on the way out).
    """

    def __init__(self, model: RecurrentLM) -> None:
        super().__init__()
        self.model = model
        self.template = model.init_state(1)
        self.model_dtypes = [t.dtype for _, t in flatten_state(self.template)]

    def forward(self, input_ids: Tensor, attention_mask: Tensor, *past: Tensor) -> tuple[Tensor, ...]:
        if len(past) != len(self.model_dtypes):
            raise ValueError(f"expected {len(self.model_dtypes)} state tensors, got {len(past)}")
        state = _rebuild(self.template, iter(t.to(dt) for t, dt in zip(past, self.model_dtypes)))
        logits, new_state = self.model(input_ids, state, pad_mask=attention_mask == 0)
        present = [t.to(graph_dtype(t.dtype)) for _, t in flatten_state(new_state)]
        return (logits, *present)


def example_inputs(
    model: RecurrentLM, batch: int = 2, length: int = 3, past_length: int = 4, seed: int = 0
) -> tuple[Tensor, ...]:
    """Inputs for tracing: no size is 0 or 1 and batch, length, past_length differ, so none is
    specialised. State values are small random numbers (the KV ``valid`` mask all True)."""
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    ids = torch.randint(0, model.vocab_size, (batch, length), generator=gen).to(device)
    mask = torch.ones(batch, length, dtype=torch.int64, device=device)
    states = []
    for spec in state_specs(model):
        shape = spec.concrete_shape(batch, past_length)
        dtype = torch_dtype(spec.dtype)
        if dtype == torch.bool:
            states.append(torch.ones(shape, dtype=torch.bool, device=device))
        else:
            states.append(torch.rand(shape, generator=gen, dtype=torch.float32).to(device, dtype))
    return (ids, mask, *states)
