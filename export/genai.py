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

import json
import math
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import torch
from torch import Tensor, nn

from ..models.stateful import StatefulModule, example_state, torch_dtype
from ..runtime import ortops
from ..runtime.contract.artifact import (
    ATTENTION_MASK,
    BATCH,
    CAUSAL_LM,
    GENAI_CONFIG_FILE,
    GENAI_DATA_FILE,
    GENAI_LOG_ID,
    GENAI_MODEL_FILE,
    INPUT_IDS,
    LENGTH,
    LOGITS,
    ORT_SESSION_CONFIG,
    PAST_LENGTH,
    PAST_PREFIX,
    PRESENT_PREFIX,
    QUANTIZATION_BUDGETS,
    StateSpec,
    TensorSpec,
)  # fmt: skip
from . import onnx_files, stages
from .errors import ExportError, with_cause
from .plan import ExportPlan

#: The two kinds of genai state slot and the rank (batch included) of each.
RECURRENT, CONV = "recurrent", "conv"
SLOT_RANKS = {RECURRENT: 4, CONV: 3}
#: A KV cache's slots (``past_key_values.%d.key`` / ``.value``: (batch, kv heads, past, head dim)).
KEY, VALUE = "key", "value"
#: genai's ``layer_types`` of a layered (hybrid) layout: softmax attention with a KV cache, a recurrent layer (its
#: conv and recurrent slots), a conv-only layer.
FULL_ATTENTION, LINEAR_ATTENTION, CONV_LAYER = "full_attention", "linear_attention", "conv"
#: The last name component of a KV cache's tensors in rnnx's flat state (key, value, and the validity mask).
KV_PARTS = (KEY, VALUE, "valid")


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
        grows = PAST_LENGTH in self.shape
        return StateSpec(slot_name(self.kind, self.number), (BATCH, *self.shape), "float32", grows)


@dataclass(frozen=True)
class Layout:
    """genai's slots for an export's state; ``layer_types`` (one per genai layer) for a layered layout (a model with
    KV caches: genai binds each layer's slots by its type), None for the per-kind layout of recurrent models."""

    slots: list[Slot]
    layer_types: Optional[list[str]] = None

    @property
    def kv(self) -> list[Slot]:
        return [slot for slot in self.slots if slot.kind == KEY]


def _rest(spec: StateSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the axes in front of the batch, the axes after it) of a state spec, as ints."""
    b = spec.batch_axis
    return tuple(int(d) for d in spec.shape[:b]), tuple(int(d) for d in spec.shape[b + 1 :])


def genai_layout(states: list[StateSpec]) -> list[Slot]:
    """genai's slots for rnnx's state tensors (the module doc's rules), recurrent slots first, then conv ones,
    each numbered from 0. ExportError (one line, naming the tensor) for a state genai has no slot for: a
    growing KV cache (:func:`layered_layout` takes those), a non-float32 tensor."""
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


def layout_of(states: list[StateSpec]) -> Layout:
    """:func:`layered_layout` for a model with KV caches, else :func:`genai_layout`'s per-kind slots."""
    if any(spec.grows for spec in states):
        return layered_layout(states)
    return Layout(genai_layout(states))


def layered_layout(states: list[StateSpec]) -> Layout:
    """genai's per-layer slots for a hybrid's state: the state tensors grouped by block (their names but the last
    component), each block with state one genai layer, numbered in flat order: ``key`` + ``value`` + ``valid`` a
    ``full_attention`` layer (KV slots; the validity mask is genai's ``attention_mask`` over the past), ``conv`` +
    ``recurrent`` a ``linear_attention`` layer, ``conv`` alone a ``conv`` layer. ExportError (one line) for a block
    genai has no layer type for, or a conv / recurrent state of another shape than the first (genai sizes every
    layer's slot of a kind alike)."""
    blocks: dict[str, dict[str, int]] = {}
    for i, spec in enumerate(states):
        block, _, part = spec.name.rpartition(".")
        blocks.setdefault(block, {})[part] = i
    slots: list[Slot] = []
    layer_types: list[str] = []
    shapes: dict[str, tuple[int, ...]] = {}
    for number, (block, parts) in enumerate(blocks.items()):
        kinds = sorted(parts)
        if kinds == sorted(KV_PARTS):
            key, value, valid = (states[parts[p]] for p in KV_PARTS)
            kv_shaped = len(key.shape) == 4 and key.shape[::2] == (BATCH, PAST_LENGTH) and value.shape == key.shape
            if not kv_shaped or valid.shape != (BATCH, PAST_LENGTH) or (valid.dtype, key.dtype) != ("bool", "float32"):
                raise ExportError(
                    f"--genai: the KV cache of {block!r} is {key.shape} / {value.shape} / {valid.shape}; genai's is "
                    f"key, value ({BATCH}, heads, {PAST_LENGTH}, head dim) float32 and a ({BATCH}, {PAST_LENGTH}) mask"
                )
            slots += [Slot(KEY, number, tuple(key.shape[1:]), Part(parts[KEY], None)),
                      Slot(VALUE, number, tuple(value.shape[1:]), Part(parts[VALUE], None))]  # fmt: skip
            layer_types.append(FULL_ATTENTION)
            continue
        if kinds not in ([CONV], [CONV, RECURRENT]):
            raise ExportError(
                f"--genai: a model with a growing KV cache gets genai's layered layout, and block {block!r} holds "
                f"state {kinds}; genai's layers hold a KV cache (key, value, valid), conv + recurrent or conv alone"
            )
        for kind in kinds:
            spec = states[parts[kind]]
            shape = tuple(int(d) for d in spec.shape[1:])
            if spec.batch_axis != 0 or len(shape) + 1 != SLOT_RANKS[kind] or spec.dtype != "float32":
                raise ExportError(
                    f"--genai: state tensor {spec.name!r} {spec.shape} {spec.dtype} is not a {kind} slot "
                    f"(rank {SLOT_RANKS[kind]}, batch first, float32)"
                )
            if shapes.setdefault(kind, shape) != shape:
                raise ExportError(
                    f"--genai: state tensor {spec.name!r} is {shape} per row, another layer's {kind} is "
                    f"{shapes[kind]}; genai sizes every {kind} slot alike"
                )
            slots.append(Slot(kind, number, shape, Part(parts[kind], None)))
        layer_types.append(LINEAR_ATTENTION if RECURRENT in kinds else CONV_LAYER)
    return Layout(slots, layer_types)


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
        elif not slot.spec.grows:  # a KV cache's slot is its tensor as it is
            t = t.reshape(t.shape[0], *slot.shape)
        out.append(t)
    return out


def unpack(
    slots: list[Slot], states: list[StateSpec], tensors: list[Tensor], valid: Optional[Tensor] = None
) -> list[Tensor]:
    """genai's slot tensors (``slots`` order) -> rnnx's state tensors (flat order); the inverse of :func:`pack`.
    ``valid``: the past's validity (batch, past) bool, every KV cache's mask (a layered layout's; no slot holds it)."""
    pieces: dict[tuple[int, Optional[int]], Tensor] = {}
    held = {slot.main.state for slot in slots if slot.main is not None}
    for i, spec in enumerate(states):
        if i not in held and spec.grows and spec.dtype == "bool":
            pieces[(i, None)] = valid
    for slot, t in zip(slots, tensors):
        if slot.main is None:
            continue
        if slot.folded is not None:
            pieces[(slot.folded.state, slot.folded.index)] = t[..., -1]
            t = t[..., :-1]
        pieces[(slot.main.state, slot.main.index)] = t
    out = []
    for i, spec in enumerate(states):
        if spec.grows:  # a KV cache's key / value as its slot holds them, its mask ``valid``
            out.append(pieces[(i, None)])
            continue
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
        past = attention_mask.shape[1] - length
        mask = attention_mask.narrow(1, past, length)
        inputs = (input_ids,) if self.mask_dtype is None else (input_ids, (mask != 0).to(self.mask_dtype))
        valid = attention_mask.narrow(1, 0, past) != 0  # the KV caches' validity: genai's mask over the past
        outputs = self.wrapped(*inputs, *unpack(self.slots, self.states, list(slots), valid))
        present = list(outputs[len(outputs) - len(self.states) :])
        return (outputs[0], *pack(self.slots, self.states, present, list(slots)))


#: The ``session_options`` keys of ``genai_config.json`` that genai reads itself; onnxruntime-genai 0.18 hands every
#: other (string-valued) key to ONNX Runtime as a session config entry, which is how the config carries
#: :data:`~rnnx.runtime.contract.artifact.ORT_SESSION_CONFIG` (tests/test_genai.py holds genai to that).
GENAI_SESSION_KEYS = ("log_id", "provider_options", "custom_ops_library")

#: genai's ``attention_mask`` axis: every position so far (past and current).
TOTAL_LENGTH = "total_length"
#: ``model.context_length`` / ``search.max_length`` written to the config: genai's cap on a sequence (prompt plus
#: new tokens). rnnx's state does not grow, so this only sizes genai's token buffers; a program may set less.
DEFAULT_CONTEXT_LENGTH = 4096


@dataclass(frozen=True)
class GenaiOptions:
    """``export-model --genai`` options: ``native_ops`` copies rnnx's ONNX Runtime op library
    (:mod:`rnnx.runtime.ortops`) into the export and names it in the config; ``pad_token_id`` (genai masks
    this token in a padded batch) defaults to the checkpoint's task's pad token, else 0, and ``eos_token_id`` (a row
    stops on it) to the eos ids a transformers checkpoint's text carries, else the pad token; ``context_length``:
    genai's cap on prompt plus new tokens."""

    native_ops: bool = False
    pad_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None
    context_length: int = DEFAULT_CONTEXT_LENGTH


def resolve_genai(genai: Any) -> Optional[GenaiOptions]:
    """``None`` / ``False`` -> None, ``True`` -> the defaults, a :class:`GenaiOptions` as it is; ExportError else."""
    if genai is None or genai is False:
        return None
    if genai is True:
        return GenaiOptions()
    if not isinstance(genai, GenaiOptions):
        raise ExportError(f"genai must be True, False, None or a GenaiOptions, got {type(genai).__name__}")
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(genai, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ExportError(f"genai {name} must be a token id (an int >= 0), got {value!r}")
    if isinstance(genai.context_length, bool) or not isinstance(genai.context_length, int) or genai.context_length < 1:
        raise ExportError(f"genai context_length must be an int >= 1, got {genai.context_length!r}")
    return genai


def _lm_roles(plan: ExportPlan) -> Optional[torch.dtype]:
    """The mask dtype the plan's graph takes (None: it takes no mask); ExportError naming what does not fit genai's
    decoder: data inputs (token ids (batch, length) int64[, a (batch, length) mask, 1 = token]), first output the
    logits (batch, length, vocab)."""
    if plan.interface == CAUSAL_LM:
        return torch.int64
    ids = plan.inputs[0]
    if not plan.states or ids.dtype != "int64" or tuple(ids.shape) != (BATCH, LENGTH) or len(plan.inputs) > 2:
        raise ExportError(
            f"--genai: {plan.what} is not a language model genai can run: its data inputs must be token ids "
            f"({BATCH}, {LENGTH}) int64 and optionally a ({BATCH}, {LENGTH}) mask (1 = token), and it must carry "
            f"state; it has {[(t.name, t.shape, t.dtype) for t in plan.inputs]}"
        )
    if len(plan.inputs) == 1:
        return None
    mask = plan.inputs[1]
    if tuple(mask.shape) != (BATCH, LENGTH) or mask.dtype not in ("int64", "int32", "bool"):
        raise ExportError(
            f"--genai: input {mask.name!r} {mask.shape} {mask.dtype} is not a ({BATCH}, {LENGTH}) int64 / int32 / "
            "bool mask (1 = token), the only second input genai can feed"
        )
    return torch_dtype(mask.dtype)


def genai_plan(plan: ExportPlan) -> tuple[ExportPlan, Layout]:
    """The plan of ``plan``'s genai graph (:class:`GenaiAdapter` around its graph module, genai's names) and its
    layout; ExportError for a module genai cannot run."""
    mask_dtype = _lm_roles(plan)
    layout = layout_of(plan.states)
    specs = [slot.spec for slot in layout.slots]
    ids = plan.trace_inputs[0]
    batch, length = ids.shape
    gen = torch.Generator().manual_seed(2)
    past = 3  # total_length > length: a past of 3 (a KV cache of 3 positions)
    mask = torch.ones(batch, length + past, dtype=torch.int64)
    adapter = GenaiAdapter(plan.graph, plan.states, layout.slots, mask_dtype)
    inputs = [TensorSpec(INPUT_IDS, (BATCH, LENGTH), "int64"), TensorSpec(ATTENTION_MASK, (BATCH, TOTAL_LENGTH),
              "int64")]  # fmt: skip
    derived = replace(plan, graph=adapter, inputs=inputs, output_names=[LOGITS], states=specs,
                      trace_inputs=(ids, mask, *example_state(specs, batch, past, gen)),
                      what=f"{plan.what} (genai graph)")  # fmt: skip
    return derived, layout


def genai_config(layout: Layout, plan: ExportPlan, options: GenaiOptions, library: Optional[str]) -> dict[str, Any]:
    """The ``genai_config.json`` of a genai graph with ``layout`` (``library``: the op library's file name, in the
    export folder, or None)."""
    slots = layout.slots
    task_pad = (plan.task or {}).get("pad_token")
    pad = options.pad_token_id if options.pad_token_id is not None else (task_pad if task_pad is not None else 0)
    text_eos = (plan.text.record["eos_token_ids"] if plan.text is not None else None) or None
    eos = options.eos_token_id if options.eos_token_id is not None else (text_eos or pad)
    kinds = sorted({slot.kind for slot in slots})
    inputs = {"input_ids": INPUT_IDS, "attention_mask": ATTENTION_MASK}
    outputs = {"logits": LOGITS}
    for kind in kinds:
        inputs[f"past_{kind}_names"] = PAST_PREFIX + slot_template(kind)
        outputs[f"present_{kind}_names"] = PRESENT_PREFIX + slot_template(kind)
    session: dict[str, Any] = {"log_id": GENAI_LOG_ID, "provider_options": [], **ORT_SESSION_CONFIG}
    if library is not None:
        session["custom_ops_library"] = library
    if layout.layer_types is None:
        layers = max(sum(slot.kind == kind for slot in slots) for kind in kinds)
    else:
        layers = len(layout.layer_types)
    decoder: dict[str, Any] = {
        "filename": GENAI_MODEL_FILE,
        "session_options": session,
        "num_hidden_layers": layers,
        "inputs": inputs,
        "outputs": outputs,
    }
    if layout.layer_types is not None:  # genai binds each layer's slots by its type, and sizes an empty KV cache
        decoder["layer_types"] = layout.layer_types
        if layout.kv:
            heads, _, head_size = layout.kv[0].shape
            decoder.update(num_key_value_heads=heads, num_attention_heads=heads, head_size=head_size)
    return {
        "model": {
            "type": "decoder",
            "vocab_size": plan.vocab_size,
            "context_length": options.context_length,
            "pad_token_id": pad,
            "eos_token_id": eos,
            "bos_token_id": pad,
            "decoder": decoder,
        },
        "search": {
            "max_length": options.context_length,
            "do_sample": False,
            "num_beams": 1,
            "past_present_share_buffer": False,
        },  # fmt: skip
    }


def session_config_entries(config: dict[str, Any]) -> dict[str, str]:
    """The ONNX Runtime session config entries a ``genai_config.json`` (parsed) makes genai open its graph with: the
    decoder's ``session_options`` keys other than genai's own (:data:`GENAI_SESSION_KEYS`)."""
    session = config["model"]["decoder"]["session_options"]
    return {key: value for key, value in session.items() if key not in GENAI_SESSION_KEYS}


def _library() -> Path:
    """rnnx's ONNX Runtime op library, built; ExportError saying how to build it when it is not."""
    library = ortops.find_library()
    if library is None:
        raise ExportError(
            "--genai --native-ops: rnnx's ONNX Runtime op library is not built; build it with "
            "`python3 -m rnnx.runtime.ortops` (or export without --native-ops: genai then runs the function bodies)"
        )
    return library


def _right_padded(prompts: list[list[int]], pad: int) -> tuple[Tensor, Tensor]:
    """(input_ids, attention_mask) (B, longest) int64 of ``prompts``, right-padded with ``pad``."""
    width = max(map(len, prompts))
    ids = torch.tensor([p + [pad] * (width - len(p)) for p in prompts], dtype=torch.int64)
    mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in prompts], dtype=torch.int64)
    return ids, mask


@torch.no_grad()
def check_genai(
    plan: ExportPlan, slots: list[Slot], path: Path, mask_dtype: Optional[torch.dtype], config: dict[str, Any],
    tolerance: float, steps: int = 8,
) -> float:  # fmt: skip
    """Runs the genai graph at ``path`` on ONNX Runtime as genai does (the session options genai builds from
    ``config``, the ``genai_config.json``: ONNX Runtime's defaults plus its :func:`session_config_entries`; the mask
    growing by a column per call, each row decoding from its last token) against :class:`GenaiAdapter` around the
    fp32 PyTorch module: a right-padded prefill of two rows and ``steps`` greedy steps. Returns the worst logits
    error (max abs over max abs reference, per call); ExportError past ``tolerance``."""
    import onnxruntime as ort

    pad = config["model"]["pad_token_id"]
    options = ort.SessionOptions()
    for key, value in session_config_entries(config).items():
        options.add_session_config_entry(key, value)
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    reference = GenaiAdapter(plan.reference, plan.states, slots, mask_dtype)
    if plan.prompts:
        prompts = [list(p) for p in plan.prompts[:2]]
    else:
        prompts = [[int(t) for t in row] for row in plan.trace_inputs[0][:2]]
    prompts[-1] = prompts[-1][: max(1, len(prompts[-1]) - 2)]  # a shorter row: the batch is padded
    ids, mask = _right_padded(prompts, pad)
    state = [torch.zeros(slot.spec.concrete_shape(ids.shape[0], 0)) for slot in slots]
    ort_state = [t.numpy() for t in state]
    last = mask.sum(1) - 1
    worst = 0.0
    names = [i.name for i in session.get_inputs()]
    for _ in range(steps + 1):
        want, *state = reference(ids, mask, *state)
        got, *ort_state = session.run(None, dict(zip(names, [ids.numpy(), mask.numpy(), *ort_state])))
        rows = torch.arange(ids.shape[0])
        want_last, got_last = want[rows, last].float(), torch.from_numpy(got)[rows, last].float()
        error = float((got_last - want_last).abs().max() / want_last.abs().max().clamp_min(1e-12))
        worst = max(worst, error)
        if error > tolerance:
            raise ExportError(
                f"--genai: {GENAI_MODEL_FILE} on ONNX Runtime differs from PyTorch by {error:.3g} (relative, "
                f"tolerance {tolerance:g}) at the last real token of a call"
            )
        ids = want_last.argmax(-1)[:, None]
        mask = torch.cat((mask, torch.ones_like(ids)), 1)
        last = torch.zeros_like(last)
    return worst


def genai_step(plan: ExportPlan, options: Any, genai: GenaiOptions) -> stages.ExtraFiles:
    """The step that writes the genai variant into an export's temporary folder (``run_export``'s ``extra``):
    :data:`GENAI_MODEL_FILE` traced through the export stages (quantized as the export is), checked (onnx.checker,
    strict shape inference; with ``check``, against PyTorch on ONNX Runtime), one file when the export is one
    file; :data:`GENAI_CONFIG_FILE`; with ``native_ops`` the op library. What genai cannot run is refused here,
    before anything is exported (ExportError, one line)."""
    derived, layout = genai_plan(plan)
    slots = layout.slots
    mask_dtype = _lm_roles(plan)
    library = _library() if genai.native_ops else None

    def write(tmp: Path, one_file: bool, log: stages.Log) -> list[str]:
        kinds = ", ".join(f"{sum(s.kind == k for s in slots)} {k}" for k in (RECURRENT, CONV, KEY, VALUE))
        log(f"genai variant: {GENAI_MODEL_FILE} ({kinds} state slots)")
        path = tmp / GENAI_MODEL_FILE
        try:
            model = stages.trace(derived, options.target, options.opset, path, data_file=GENAI_DATA_FILE)
        except ExportError:
            raise
        except Exception as e:
            raise ExportError(f"--genai: ONNX conversion failed: {with_cause(e)}") from None
        logits = model.graph.output[0].type.tensor_type.shape.dim
        vocab = logits[-1].dim_value if len(logits) == 3 else 0
        if not vocab:
            raise ExportError(f"--genai: the first output must be logits (batch, length, vocab), is rank {len(logits)}")
        del model
        if options.quantize is not None:
            stages.quantize_saved(path, options, derived, log, data_file=GENAI_DATA_FILE)
        stages.check_graph(path)
        config = genai_config(layout, replace(derived, vocab_size=vocab), genai, None if library is None else
                              library.name)  # fmt: skip
        if options.check:
            tolerance = options.precision.tolerance
            if options.quantize is not None:
                tolerance = max(tolerance, QUANTIZATION_BUDGETS[options.quantize.scheme]["max_rel"])
            worst = check_genai(plan, slots, path, mask_dtype, config, tolerance)
            log(f"genai graph vs PyTorch: worst relative logits error {worst:.3g} (tolerance {tolerance:g})")
        data = tmp / GENAI_DATA_FILE
        if data.is_file() and one_file:
            onnx_files.internalize(path, data)
        (tmp / GENAI_CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n")
        written = [*([GENAI_DATA_FILE] if data.is_file() else []), GENAI_MODEL_FILE, GENAI_CONFIG_FILE]
        if library is not None:
            shutil.copyfile(library, tmp / library.name)
            written.append(library.name)
        return written

    return write
