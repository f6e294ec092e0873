"""Which device buffer every engine I/O tensor is bound to, and how big the buffers are.

For each state tensor the ``past_key_values.<name>`` input and the ``present.<name>`` output are
paired (from ``rnnx.json`` "state", checked against the engine's I/O names) and double-buffered
(``ping-pong``, the only mode): two buffers ``<name>#0`` / ``<name>#1``; a call with parity p reads
``#p`` and writes ``#(1-p)``, the next call swaps the two addresses, so a call never reads and writes
the same state buffer. The TensorRT backend names its decode ring's sets A / B with
:meth:`BindingPlan.addresses` (:mod:`.graphs`: the ``ping`` graph is the parity-0 call, ``pong`` the
parity-1 call). There is no in-place mode: the rnnx plugins declare no I/O aliasing (no
``getAliasedInput``), so TensorRT gives every state output its own buffer, and a captured CUDA graph
must never update state in place on the buffer it reads.

A growing KV cache's buffers hold ``max_context`` positions: the live tensor (B, ..., past, ...)
is the dense *prefix* of its buffer, so the same memory reinterpreted with a larger past_length
(after a swap) stays valid. Data I/O (``input_ids``, ``attention_mask``, ``logits``) gets one buffer
each, sized for ``max_length`` tokens. Pure Python: no TensorRT needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Optional

from ..contract import artifact
from ..contract.artifact import BATCH, ITEMSIZE, LENGTH, PAST_LENGTH, MetadataError

#: The state buffering mode: two buffers per state tensor, read and written alternately. The only mode.
PING_PONG = "ping-pong"


class BindingError(ValueError):
    """Metadata / engine I/O that cannot be bound as the rnnx contract says; one line."""


def resolve_shape(shape: Iterable[Any], dims: dict[str, int]) -> tuple[int, ...]:
    """:func:`rnnx.runtime.contract.artifact.resolve_shape`, raising :class:`BindingError`."""
    try:
        return artifact.resolve_shape(tuple(shape), dims)
    except MetadataError as e:
        raise BindingError(str(e)) from None


def itemsize(dtype: str) -> int:
    """Bytes per element of a metadata dtype name."""
    if dtype not in ITEMSIZE:
        raise BindingError(f"unsupported dtype {dtype!r}; known: {', '.join(ITEMSIZE)}")
    return ITEMSIZE[dtype]


@dataclass(frozen=True)
class BufferSpec:
    """One device buffer: capacity shape, dtype (numpy name), bytes."""

    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class StateBinding:
    """One state tensor's input/output pair and how it is buffered."""

    name: str
    input: str
    output: str
    shape: tuple[Any, ...]
    dtype: str
    grows: bool

    @property
    def mode(self) -> str:
        """Always :data:`PING_PONG`: state is double-buffered, never updated in place."""
        return PING_PONG

    @property
    def buffers(self) -> tuple[str, ...]:
        """Buffer names: ``<name>#0`` and ``<name>#1``."""
        return (f"{self.name}#0", f"{self.name}#1")


@dataclass(frozen=True)
class DataBinding:
    """A non-state input or output (one buffer named like the tensor)."""

    name: str
    shape: tuple[Any, ...]
    dtype: str
    is_input: bool


@dataclass(frozen=True)
class BindingPlan:
    """Data I/O and state pairs of one engine, in graph order."""

    data: tuple[DataBinding, ...]
    states: tuple[StateBinding, ...]

    def addresses(self, parity: int) -> dict[str, str]:
        """Tensor name -> buffer name for a call with ``parity`` (0 or 1): every state reads
        ``#parity`` and writes ``#(1 - parity)``; its input and output never share a buffer."""
        if parity not in (0, 1):
            raise BindingError(f"parity must be 0 or 1, got {parity!r}")
        out = {d.name: d.name for d in self.data}
        for s in self.states:
            out[s.input], out[s.output] = s.buffers[parity], s.buffers[1 - parity]
        return out

    def buffer_specs(self, batch: int, max_length: int, max_context: int) -> dict[str, BufferSpec]:
        """Every buffer for ``batch`` rows, up to ``max_length`` tokens per call and ``max_context``
        cached positions. State buffers are sized for past_length = max_context (their capacity)."""
        for label, value, low in ((BATCH, batch, 1), ("max_length", max_length, 1), ("max_context", max_context, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise BindingError(f"{label} must be an integer >= {low}, got {value!r}")
        if any(s.grows for s in self.states) and max_context < max_length:
            raise BindingError(
                f"max_context ({max_context}) must be >= max_length ({max_length}) for a growing KV cache"
            )
        data_dims = {BATCH: batch, LENGTH: max_length, PAST_LENGTH: max_context}
        state_dims = {BATCH: batch, LENGTH: 0, PAST_LENGTH: max_context}
        out: dict[str, BufferSpec] = {}
        for d in self.data:
            shape = resolve_shape(d.shape, data_dims)
            out[d.name] = BufferSpec(shape, d.dtype, _volume(shape) * itemsize(d.dtype))
        for s in self.states:
            shape = resolve_shape(s.shape, state_dims)
            for buffer in s.buffers:
                out[buffer] = BufferSpec(shape, s.dtype, _volume(shape) * itemsize(s.dtype))
        return out

    def total_bytes(self, batch: int, max_length: int, max_context: int, alignment: int = 256) -> int:
        """Sum of :meth:`buffer_specs` sizes, each rounded up to ``alignment`` bytes."""
        specs = self.buffer_specs(batch, max_length, max_context)
        return sum(-(-spec.nbytes // alignment) * alignment for spec in specs.values())


def _volume(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def plan_bindings(
    metadata: dict[str, Any],
    engine_inputs: Optional[Iterable[str]] = None,
    engine_outputs: Optional[Iterable[str]] = None,
) -> BindingPlan:
    """The :class:`BindingPlan` for an export's metadata.

    ``engine_inputs`` / ``engine_outputs``: the built engine's I/O tensor names (default: the
    metadata's); every one must be accounted for and every state's input/output must exist.
    Every state is double-buffered (ping-pong; see the module doc).
    """
    meta_in = [t["name"] for t in metadata["inputs"]]
    meta_out = [t["name"] for t in metadata["outputs"]]
    eng_in = list(meta_in if engine_inputs is None else engine_inputs)
    eng_out = list(meta_out if engine_outputs is None else engine_outputs)
    if sorted(eng_in) != sorted(meta_in) or sorted(eng_out) != sorted(meta_out):
        missing = sorted(set(meta_in + meta_out) - set(eng_in + eng_out))
        extra = sorted(set(eng_in + eng_out) - set(meta_in + meta_out))
        raise BindingError(
            f"engine I/O does not match rnnx.json (missing: {missing or '-'}; unexpected: {extra or '-'})"
        )
    states, paired = [], set()
    for s in metadata["state"]:
        if s["input"] not in eng_in or s["output"] not in eng_out:
            raise BindingError(f"state {s['name']!r}: {s['input']!r} / {s['output']!r} not both engine I/O")
        grows = bool(s.get("grows", False))
        states.append(StateBinding(s["name"], s["input"], s["output"], tuple(s["shape"]), s["dtype"], grows))
        paired |= {s["input"], s["output"]}
    by_name = {t["name"]: t for t in metadata["inputs"] + metadata["outputs"]}
    data = [
        DataBinding(n, tuple(by_name[n]["shape"]), by_name[n]["dtype"], n in meta_in)
        for n in meta_in + meta_out if n not in paired
    ]  # fmt: skip
    return BindingPlan(tuple(data), tuple(states))
