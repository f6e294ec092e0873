"""Recurrent state objects shared by every rnnx model.

A state is any nesting of tensors, ``None``, tuples, lists, dicts with string keys and dataclasses (the
rnnx layers use the dataclasses below). States are plain data: ``map_tensors`` copies, detaches or moves
one; ``flatten_state`` lists its tensors under stable dotted names (list / tuple index, dict key,
named-tuple or dataclass field), which export and the runtime use as graph input/output names; a state
that is one bare tensor is named ``state``.
Recurrent state is kept in fp32 (fp64 when the model runs in fp64) whatever the activation dtype.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, TypeVar, Union

import torch
from torch import Tensor

from .ops.causal_linear_attention.state import LinearAttentionState

S = TypeVar("S")


@dataclass
class KVCache:
    """Softmax attention cache of one layer; grows by the number of tokens fed.

    key, value: (B, H, T, head_dim) in the activation dtype; valid: (B, T) bool, False where the
    position was a pad (never attended to).
    """

    key: Tensor
    value: Tensor
    valid: Tensor


AttentionState = Union[LinearAttentionState, KVCache, None]


@dataclass
class SRUState:
    """State of a stacked SRU: the cell states c (num_layers, B, D*d), fp32."""

    c: Tensor


@dataclass
class SRUppState:
    """State of a stacked SRU++: cell states c (num_layers, B, D*d) fp32, and per layer the state of
    its attention (``LinearAttentionState``, a growing ``KVCache``, or ``None`` for a layer without)."""

    c: Tensor
    attention: list[AttentionState]


@dataclass
class LinearTransformerState:
    """State of a causal linear-attention transformer: one ``LinearAttentionState`` per layer, and
    the index of each row's next token, position (B,) fp32 (None for a model without positions)."""

    layers: list[LinearAttentionState]
    position: Optional[Tensor] = None


def _is_namedtuple(state: object) -> bool:
    return isinstance(state, tuple) and hasattr(type(state), "_fields")


def map_tensors(state: S, fn: Callable[[Tensor], Tensor]) -> S:
    """A new state of the same structure with ``fn`` applied to every tensor."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return fn(state)
    if _is_namedtuple(state):
        return type(state)(*(map_tensors(s, fn) for s in state))
    if isinstance(state, (list, tuple)):
        return type(state)(map_tensors(s, fn) for s in state)
    if isinstance(state, dict):
        return type(state)((k, map_tensors(v, fn)) for k, v in state.items())
    if dataclasses.is_dataclass(state):
        return dataclasses.replace(
            state, **{f.name: map_tensors(getattr(state, f.name), fn) for f in dataclasses.fields(state)}
        )
    raise TypeError(f"not a state: {type(state).__name__}")


def flatten_state(state: object, prefix: str = "") -> list[tuple[str, Tensor]]:
    """``(dotted name, tensor)`` pairs in a fixed order, e.g. ``layers.0.S``; ``None`` fields skipped."""
    out: list[tuple[str, Tensor]] = []
    if state is None:
        return out
    if isinstance(state, Tensor):
        return [(prefix or "state", state)]
    if _is_namedtuple(state):
        for field, s in zip(state._fields, state):
            out += flatten_state(s, f"{prefix}.{field}" if prefix else field)
        return out
    if isinstance(state, (list, tuple)):
        for i, s in enumerate(state):
            out += flatten_state(s, f"{prefix}.{i}" if prefix else str(i))
        return out
    if isinstance(state, dict):
        for key, s in state.items():
            if not isinstance(key, str) or not key or "." in key:
                raise TypeError(f"state dict keys must be non-empty strings without '.', got {key!r}")
            out += flatten_state(s, f"{prefix}.{key}" if prefix else key)
        return out
    if dataclasses.is_dataclass(state):
        for f in dataclasses.fields(state):
            name = f"{prefix}.{f.name}" if prefix else f.name
            out += flatten_state(getattr(state, f.name), name)
        return out
    raise TypeError(f"not a state: {type(state).__name__} at {prefix or 'the root'!r}")


def clone_state(state: S) -> S:
    """A deep copy that shares no storage with ``state`` (for forking a generation)."""
    return map_tensors(state, lambda t: t.detach().clone())


def state_to(state: S, device: Optional[Union[str, torch.device]] = None, dtype: Optional[torch.dtype] = None) -> S:
    """Moves every tensor to ``device``; ``dtype`` applies to floating tensors only."""

    def move(t: Tensor) -> Tensor:
        if dtype is not None and t.is_floating_point():
            return t.to(device=device, dtype=dtype)
        return t.to(device=device)

    return map_tensors(state, move)
