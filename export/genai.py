"""The onnxruntime-genai variant of a language-model export (``export-model ... --genai``).

onnxruntime-genai's ``decoder`` model runs a graph whose inputs are ``input_ids`` (batch, length),
``attention_mask`` (batch, total_length: every position so far, past and current) and per-slot fixed-size
state: rank-4 ``past_recurrent`` slots (batch, a, b, c) and rank-3 ``past_conv`` slots (batch, a, b), named
by ``%d`` templates. rnnx's graph (``model.onnx``) keeps its own layout (any nesting of state tensors, the
batch on any axis, the current chunk's mask only); this module writes a second graph beside it,
:data:`~rnnx.runtime.contract.artifact.GENAI_MODEL_FILE`, with genai's inputs, and the
:data:`~rnnx.runtime.contract.artifact.GENAI_CONFIG_FILE` that names it.

The state repacking (:func:`genai_layout`) is exact, a bijection between rnnx's state tensors and genai's
slots that involves no arithmetic:

* a tensor whose batch axis is not the first (SRU's ``c``, (layers, batch, d)) is cut along the axes in
  front of the batch into one slot per slice;
* a batch-first slice of rank 4 is a ``recurrent`` slot as it is (rank 5 and up: its trailing axes merged);
* a rank-3 slice (batch, a, b) that follows a rank-4 one (batch, a, b, m) in flat order (the causal linear
  attention's normaliser ``z`` after its ``S``) is folded into it as one more column: (batch, a, b, m + 1);
* any other rank-3 slice is a ``conv`` slot; a rank-2 slice (batch, d) a (batch, d, 1) ``conv`` slot, a
  rank-1 slice (batch,) (the linear transformer's ``position``) a (batch, 1, 1) one.

:class:`GenaiAdapter` wraps the export's graph module: it takes the current chunk's pad mask from the last
``length`` columns of ``attention_mask``, unpacks the slots into rnnx's state, runs the module and packs the
new state. The variant is traced through the same export stages as ``model.onnx`` (rnnx ops, function
bodies, quantization), so the two graphs compute the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor, nn

from ..models.stateful import StatefulModule
from ..runtime.contract.artifact import BATCH, StateSpec
from .errors import ExportError

#: The two kinds of genai state slot and the rank (batch included) of each.
RECURRENT, CONV = "recurrent", "conv"
SLOT_RANKS = {RECURRENT: 4, CONV: 3}


def slot_name(kind: str, number: int) -> str:
    """The flat state name of a genai slot, ``0.recurrent`` / ``3.conv``: the graph calls it
    ``past_key_values.0.recurrent`` / ``present.0.recurrent`` (the contract's prefixes)."""
    return f"{number}.{kind}"


def slot_template(kind: str) -> str:
    """The ``%d`` template genai takes for a kind of slot (``%d.recurrent``, the prefixes added by the caller)."""
    return slot_name(kind, 0).replace("0", "%d", 1)


@dataclass(frozen=True)
class Part:
    """One piece of an rnnx state tensor in a slot: the tensor (its index in flat order), and the slice along
    the axes in front of its batch axis (flattened; None when the batch is its first axis)."""

    state: int
    index: Optional[int]


@dataclass(frozen=True)
class Slot:
    """One genai state slot: its kind and number (per kind, from 0), its shape without the batch, and the rnnx
    state it holds: ``main`` (its values, reshaped to ``shape``; None for a spare slot, which holds nothing and
    is passed through), plus ``folded`` (a rank-3 tensor appended as the last column of a recurrent slot) or
    None."""

    kind: str
    number: int
    shape: tuple[int, ...]
    main: Optional[Part]
    folded: Optional[Part] = None

    @property
    def spec(self) -> StateSpec:
        return StateSpec(slot_name(self.kind, self.number), (BATCH, *self.shape), "float32")


def _rest(spec: StateSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the axes in front of the batch, the axes after it) of a state spec, as ints."""
    b = spec.batch_axis
    return tuple(int(d) for d in spec.shape[:b]), tuple(int(d) for d in spec.shape[b + 1 :])


def genai_layout(states: list[StateSpec]) -> list[Slot]:
    """genai's slots for rnnx's state tensors (the module doc's rules), recurrent slots first, then conv ones,
    each numbered from 0. ExportError (one line, naming the tensor) for a state genai has no slot for: a
    growing KV cache, a non-float32 tensor."""
    for spec in states:
        if spec.grows:
            raise ExportError(
                f"--genai: state tensor {spec.name!r} is a growing KV cache (softmax attention); onnxruntime-genai's "
                "recurrent slots hold fixed-size state only: use attention='linear' for a genai export"
            )
        if spec.dtype != "float32":
            raise ExportError(
                f"--genai: state tensor {spec.name!r} is {spec.dtype}; onnxruntime-genai's state slots are float32"
            )
    pieces: list[tuple[Part, tuple[int, ...]]] = []
    for i, spec in enumerate(states):
        lead, rest = _rest(spec)
        count = math.prod(lead)
        pieces += [(Part(i, None if not lead else k), rest) for k in range(count)]
    recurrent: list[tuple[tuple[int, ...], Part, Optional[Part]]] = []
    conv: list[tuple[tuple[int, ...], Part]] = []
    for part, rest in pieces:
        if len(rest) == 2 and recurrent and recurrent[-1][2] is None and _follows(recurrent[-1], part, rest, states):
            shape, main, _ = recurrent[-1]
            recurrent[-1] = ((*shape[:2], shape[2] + 1), main, part)
        elif len(rest) >= 3:
            recurrent.append(((rest[0], rest[1], math.prod(rest[2:])), part, None))
        else:
            conv.append(((*rest, 1, 1)[:2], part))
    slots = [Slot(RECURRENT, n, shape, main, folded) for n, (shape, main, folded) in enumerate(recurrent)]
    slots += [Slot(CONV, n, shape, part) for n, (shape, part) in enumerate(conv)]
    if recurrent and conv:  # genai binds both kinds on every layer it finds: the shorter kind gets spare slots
        for kind, have in ((RECURRENT, len(recurrent)), (CONV, len(conv))):
            rank = SLOT_RANKS[kind] - 1
            slots += [Slot(kind, n, (1,) * rank, None) for n in range(have, max(len(recurrent), len(conv)))]
    return slots


def _follows(last: tuple, part: Part, rest: tuple[int, ...], states: list[StateSpec]) -> bool:
    """Whether the rank-3 piece ``part`` is the normaliser of the recurrent piece ``last``: the state tensor
    right after it in flat order, a rank-4 (batch, a, b, m) tensor whose (a, b) are this one's."""
    shape, main, _ = last
    main_rest = _rest(states[main.state])[1]
    return part.state == main.state + 1 and len(main_rest) == 3 and main_rest[:2] == rest and shape[:2] == rest


def pack(slots: list[Slot], states: list[StateSpec], tensors: list[Tensor], past: list[Tensor]) -> list[Tensor]:
    """rnnx's state tensors (flat order) -> genai's slot tensors (``slots`` order); a spare slot is its ``past``
    value (the slots that came in) unchanged."""

    def piece(part: Part) -> Tensor:
        t = tensors[part.state]
        if part.index is None:
            return t
        spec = states[part.state]
        return t.reshape(-1, *t.shape[spec.batch_axis :])[part.index]

    out = []
    for slot, before in zip(slots, past):
        if slot.main is None:
            out.append(before.clone())
            continue
        t = piece(slot.main)
        if slot.folded is not None:
            t = torch.cat((t, piece(slot.folded).unsqueeze(-1)), -1)
        else:
            t = t.reshape(t.shape[0], *slot.shape)
        out.append(t)
    return out


def unpack(slots: list[Slot], states: list[StateSpec], tensors: list[Tensor]) -> list[Tensor]:
    """genai's slot tensors (``slots`` order) -> rnnx's state tensors (flat order); the inverse of :func:`pack`."""
    pieces: dict[tuple[int, Optional[int]], Tensor] = {}
    for slot, t in zip(slots, tensors):
        if slot.main is None:
            continue
        if slot.folded is not None:
            pieces[(slot.folded.state, slot.folded.index)] = t[..., -1]
            t = t[..., :-1]
        pieces[(slot.main.state, slot.main.index)] = t
    out = []
    for i, spec in enumerate(states):
        lead, rest = _rest(spec)
        if not lead:
            t = pieces[(i, None)]
            out.append(t.reshape(t.shape[0], *rest))
            continue
        parts = [pieces[(i, k)] for k in range(math.prod(lead))]
        stacked = torch.stack([p.reshape(p.shape[0], *rest) for p in parts])
        out.append(stacked.reshape(*lead, stacked.shape[1], *rest))
    return out


class GenaiAdapter(nn.Module):
    """genai's graph around an export's graph module: ``(input_ids (B, L) int64, attention_mask (B, T) int64,
    *slots) -> (logits (B, L, V), *new slots)``, T >= L the positions so far (genai's convention; the chunk's
    pad mask is its last L columns). ``graph`` takes ``(input_ids, mask, *state)`` when ``mask_dtype`` is given
    (the mask cast to it, 1 = token), else ``(input_ids, *state)``; its first output is the logits."""

    def __init__(
        self, graph: StatefulModule, states: list[StateSpec], slots: list[Slot], mask_dtype: Optional[torch.dtype]
    ) -> None:
        super().__init__()
        self.wrapped = graph
        self.states = states
        self.slots = slots
        self.mask_dtype = mask_dtype

    def forward(self, *flat: Tensor) -> tuple[Tensor, ...]:
        input_ids, attention_mask, slots = flat[0], flat[1], flat[2:]
        length = input_ids.shape[1]
        torch._check(attention_mask.shape[1] >= length)  # genai's mask holds the past and this chunk
        mask = attention_mask.narrow(1, attention_mask.shape[1] - length, length)
        inputs = (input_ids,) if self.mask_dtype is None else (input_ids, (mask != 0).to(self.mask_dtype))
        outputs = self.wrapped(*inputs, *unpack(self.slots, self.states, list(slots)))
        present = list(outputs[len(outputs) - len(self.states) :])
        return (outputs[0], *pack(self.slots, self.states, present, list(slots)))
