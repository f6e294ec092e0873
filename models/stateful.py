"""The graph-shaped view of a :class:`~rnnx.models.lm.RecurrentLM` that export traces.

An rnnx model takes ``(tokens, state object, pad_mask)``; an ONNX graph takes flat tensors. The
:class:`StatefulLM` wrapper bridges the two with Optimum's naming:

* inputs  ``input_ids`` (batch, length) int64, ``attention_mask`` (batch, length) int64 (1 = token,
  0 = pad), then ``past_key_values.<flat name>`` for every state tensor;
* outputs ``logits`` (batch, length, vocab), then ``present.<flat name>`` in the same order.

Flat names and their order are those of :func:`rnnx.models.state.flatten_state`. :func:`state_layout`
describes every state tensor (shape with symbolic dims, dtype) so the exporter, the metadata and the
runtime agree on one list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ..models.lm import RecurrentLM
from ..models.state import KVCache, flatten_state

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
LOGITS = "logits"
PAST_PREFIX = "past_key_values."
PRESENT_PREFIX = "present."

#: Symbolic dimension names used in the graph and in the metadata.
BATCH, LENGTH, PAST_LENGTH = "batch", "length", "past_length"


@dataclass(frozen=True)
class StateTensor:
    """One state tensor of the graph: flat name, shape (ints and symbolic dim names), graph dtype.

    ``grows`` marks a KV-cache tensor whose ``past_length`` axis grows by ``length`` per call
    (present = past + length along that axis).
    """

    name: str
    shape: tuple[Any, ...]
    dtype: torch.dtype
    grows: bool = False

    @property
    def input_name(self) -> str:
        return PAST_PREFIX + self.name

    @property
    def output_name(self) -> str:
        return PRESENT_PREFIX + self.name


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


def graph_dtype(dtype: torch.dtype) -> torch.dtype:
    """dtype of a state tensor at the graph boundary: floating state is fp32 in every precision."""
    return torch.float32 if dtype.is_floating_point else dtype


def state_layout(model: RecurrentLM) -> list[StateTensor]:
    """The state tensors of ``model``'s graph, in :func:`flatten_state` order.

    Axis 0 is ``batch`` for every state tensor of an rnnx model except the stacked SRU cell states
    ``c`` (num_layers, batch, width), whose axis 1 is; a KV-cache tensor's axis 2 (key/value) or 1
    (valid) is ``past_length``. Found by building states for two batch sizes and comparing shapes.
    """
    a, b = model.init_state(2), model.init_state(3)
    growing = _kv_fields(a)
    layout = []
    for (name, ta), (_, tb) in zip(flatten_state(a), flatten_state(b)):
        shape: list[Any] = [BATCH if da != db else da for da, db in zip(ta.shape, tb.shape)]
        if name in growing:
            shape[-1 if ta.dim() == 2 else 2] = PAST_LENGTH
        layout.append(StateTensor(name, tuple(shape), graph_dtype(ta.dtype), name in growing))
    return layout


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

    ``past`` / ``present`` follow :func:`state_layout`: floating state is fp32 at the boundary and
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
    for spec in state_layout(model):
        shape = [batch if d == BATCH else past_length if d == PAST_LENGTH else d for d in spec.shape]
        if spec.dtype == torch.bool:
            states.append(torch.ones(shape, dtype=torch.bool, device=device))
        else:
            states.append(torch.rand(shape, generator=gen, dtype=torch.float32).to(device, spec.dtype))
    return (ids, mask, *states)
