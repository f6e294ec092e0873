"""The backend interface every rnnx runtime backend implements (torch, onnxruntime, tensorrt).

A backend runs ONE graph call of the exported contract (docs/export.md)::

    run(inputs {data input name: host array}, state) -> ({data output name: host array}, new state)

For a language model the data inputs are ``input_ids`` / ``attention_mask`` (B, L) int64 and the one
data output ``logits`` (B, L, V); for any other stateful export they are the module's own (:attr:`Backend.inputs`,
:attr:`Backend.outputs`). Floating outputs come back as fp32 host arrays.

and owns the state in its *native, device-resident* form: torch tensors on the device for the torch
backend, OrtValues on the device (IO binding: the default on the CUDA EP, optional on the CPU EP) or
numpy arrays (plain ``InferenceSession.run``) for ONNX Runtime, device buffers for TensorRT. The
:class:`~rnnx.runtime.session.Session` never looks inside a state: it only calls the methods below,
so a backend is free to keep whatever it likes in :attr:`BackendState.tensors`.

State tensors are described by the contract's :class:`~rnnx.runtime.contract.artifact.StateSpec` (from
``rnnx.json`` "state", graph order): flat name (``layers.0.S``), graph input ``past_key_values.<name>``
and output ``present.<name>``, symbolic shape, dtype name, ``grows`` (a KV cache).

Rules a backend must follow:

* :meth:`Backend.run` never mutates the ``state`` it is given in a way visible to another holder of
  it; it returns a new :class:`BackendState` (it may reuse the *given* state's buffers only when the
  caller passes ``donate=True``, i.e. promises never to use the old state again).
* Donation is a permission, never a requirement: a backend that cannot reuse buffers ignores
  ``donate`` (torch, onnxruntime); one that does (tensorrt) may refuse a donated state that comes back
  (:class:`InputError`). Within one call the new state never shares a buffer with the state read
  (no in-place update), donated or not.
* :meth:`Backend.copy_state` returns a state that shares no storage with its argument.
* Host conversions use plain numpy arrays keyed by the flat state names (``layers.0.S``), with the
  concrete shapes of :meth:`StateSpec.concrete_shape` and dtypes of :attr:`StateSpec.dtype`.
* Input validation (names, dtypes, shapes, vocabulary) is the session's job; a backend may assume
  every data input is present as a C-contiguous host array of its spec's dtype and rank, and a state it
  created itself (or from :meth:`state_from_host`) with the same batch B.
* :meth:`Backend.run` only reads its ``inputs``: a session passes the same arrays to many calls (a decode
  step's attention mask of ones is made once per batch size).
* For a language model, rows with ``attention_mask == 0`` are pads: they never change that row's state
  (the graph does it).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..contract.artifact import (
    BATCH,
    LENGTH,
    PAST_LENGTH,
    StateSpec,
    TensorSpec,
    data_inputs,
    data_outputs,
    model_signature,
)  # fmt: skip


class RnnxRuntimeError(RuntimeError):
    """Base class of rnnx runtime failures that are not bad inputs."""


class InputError(ValueError):
    """A bad input or state (dtype, shape, vocabulary, batch, model); the message names the tensor
    and the expected vs got value. The session that raised it stays usable."""


class BackendUnavailable(RnnxRuntimeError):
    """A backend that cannot run here (package or device missing); the message says what is missing."""


def check_keywords(caller: str, given: Iterable[str], known: Collection[str]) -> None:
    """TypeError, as Python words it for a plain signature, for the first name in ``given`` not in ``known``: the
    check of a function that takes its options as ``**options`` (a TypedDict's keys)."""
    for name in given:
        if name not in known:
            raise TypeError(f"{caller}() got an unexpected keyword argument {name!r}")


@dataclass
class BackendState:
    """A backend-native state of ``batch`` rows after ``past_length`` fed positions (pads included).

    ``tensors``: flat state name -> native tensor (torch.Tensor / OrtValue / numpy array / device
    buffer), owned by ``backend`` (the backend's :attr:`Backend.name`). ``signature`` is the
    :attr:`Backend.signature` of the model it belongs to (checked before every use).
    """

    tensors: dict[str, Any]
    batch: int
    past_length: int
    backend: str
    signature: str
    extra: dict[str, Any] = field(default_factory=dict)


def pad_positions(arrays: dict[str, np.ndarray], specs: Sequence[StateSpec], past: int) -> dict[str, np.ndarray]:
    """Host state ``arrays`` with every growing tensor's ``past_length`` axis padded at its end to ``past`` with
    zeros (False in a validity mask: positions never attended)."""
    out = dict(arrays)
    for spec in specs:
        axis = spec.grow_axis
        if axis is not None and arrays[spec.name].shape[axis] < past:
            widths = [(0, 0)] * arrays[spec.name].ndim
            widths[axis] = (0, past - arrays[spec.name].shape[axis])
            out[spec.name] = np.pad(arrays[spec.name], widths)
    return out


def compact_positions(
    arrays: dict[str, np.ndarray], specs: Sequence[StateSpec], valid_specs: Sequence[StateSpec]
) -> Optional[dict[str, np.ndarray]]:
    """Host state ``arrays`` with each row's valid cached positions moved to the front (in order) and every growing
    tensor cut to the longest row's valid count; None when the validity masks differ between caches (then no
    single order serves them all) or nothing would be dropped."""
    valid = arrays[valid_specs[0].name].astype(bool)
    if any(not np.array_equal(arrays[s.name], valid) for s in valid_specs[1:]):
        return None
    keep = int(valid.sum(axis=1).max(initial=0))
    if keep == valid.shape[1]:
        return None
    order = np.argsort(~valid, axis=1, kind="stable")[:, :keep]  # (B, keep): each row's valid positions first
    out = dict(arrays)
    for spec in specs:
        if spec.grow_axis is None:
            continue
        array = arrays[spec.name]
        index_shape = [1] * array.ndim
        index_shape[spec.batch_axis], index_shape[spec.grow_axis] = order.shape[0], keep
        index = order if spec.batch_axis < spec.grow_axis else order.T
        out[spec.name] = np.take_along_axis(array, index.reshape(index_shape), axis=spec.grow_axis)
    return out


def axis_size(value: Any, axis: int) -> int:
    """The size of ``value``'s axis ``axis`` (an array's own shape, else numpy's reading of it)."""
    shape = value.shape if type(value) is np.ndarray else np.shape(value)
    return int(shape[axis])


@dataclass(frozen=True, eq=False)
class CallSpecs:
    """What every call of a backend needs from its metadata, read once (:meth:`Backend.call_specs`).

    ``inputs`` / ``outputs``: the data tensors (not state), graph order; ``batch_axes`` / ``length_axes``:
    ``(input name, axis)`` of each data input with a ``batch`` / ``length`` axis, graph order; ``metadata``:
    the dict they were read from.
    """

    metadata: dict[str, Any]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batch_axes: tuple[tuple[str, int], ...]
    length_axes: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> CallSpecs:
        inputs, outputs = tuple(data_inputs(metadata)), tuple(data_outputs(metadata))
        batch = tuple((t.name, t.shape.index(BATCH)) for t in inputs if BATCH in t.shape)
        length = tuple((t.name, t.shape.index(LENGTH)) for t in inputs if LENGTH in t.shape)
        return cls(metadata, inputs, outputs, batch, length)


class Backend(ABC):
    """One loaded model on one device. Subclasses set the attributes in ``__init__``.

    Attributes:
        name: ``"torch"`` | ``"onnxruntime"`` | ``"tensorrt"``.
        device: ``"cpu"`` or ``"cuda"`` (``"cuda:N"`` allowed).
        metadata: an ``rnnx.json``-shaped dict (at least model_type, config, inputs, outputs, state,
            source, precision; vocab_size for a language model).
        state_specs: :class:`StateSpec` per state tensor, graph order.
        vocab_size: V of a language model, else None.
        max_call_length: the most positions one call takes (a TensorRT engine's ``max_length``), None: no limit.
    """

    name: str
    device: str
    metadata: dict[str, Any]
    state_specs: list[StateSpec]
    vocab_size: Optional[int]
    max_call_length: Optional[int] = None

    def call_specs(self) -> CallSpecs:
        """The data input / output specs of :attr:`metadata`, read once per metadata object (cached: every call
        asks for them, and re-reading the metadata's dicts each time would cost more than the check it serves)."""
        specs = self.__dict__.get("_call_specs")
        if specs is None or specs.metadata is not self.metadata:
            specs = self.__dict__["_call_specs"] = CallSpecs.of(self.metadata)
        return specs

    @property
    def inputs(self) -> list[TensorSpec]:
        """The data inputs (not state), graph order."""
        return list(self.call_specs().inputs)

    @property
    def outputs(self) -> list[TensorSpec]:
        """The data outputs (not state), graph order."""
        return list(self.call_specs().outputs)

    def batch_of(self, inputs: dict[str, np.ndarray]) -> int:
        """The size of the ``batch`` axis of the first data input that has one (1 when none has)."""
        for name, axis in self.call_specs().batch_axes:
            if name in inputs:
                return axis_size(inputs[name], axis)
        return 1

    def call_length(self, inputs: dict[str, np.ndarray]) -> int:
        """The size of the ``length`` axis of the first data input that has one (0 when none has): how
        far a call advances :attr:`BackendState.past_length`."""
        for name, axis in self.call_specs().length_axes:
            if name in inputs:
                return axis_size(inputs[name], axis)
        return 0

    @property
    def signature(self) -> str:
        """The export's recorded signature, else :func:`model_signature` of :attr:`metadata` (cached)."""
        sig = getattr(self, "_signature", None)
        if sig is None:
            sig = self._signature = self.metadata.get("signature") or model_signature(self.metadata)
        return sig

    @property
    def state_names(self) -> list[str]:
        """Flat state names, graph order."""
        return [s.name for s in self.state_specs]

    @abstractmethod
    def init_state(self, batch: int) -> BackendState:
        """A fresh state for ``batch`` rows on the device: zeros, empty KV caches (past_length 0)."""

    @abstractmethod
    def run(
        self, inputs: dict[str, np.ndarray], state: BackendState, donate: bool = False
    ) -> tuple[dict[str, np.ndarray], BackendState]:
        """One graph call. ``inputs``: every data input (graph name -> host array); ``state``: B rows.

        Returns ``({data output name: host array (floating ones fp32)}, new state with past_length +
        the call's length)``. With ``donate=True`` the caller gives up ``state``: the backend may reuse
        its buffers for later calls' outputs (never this call's). Without it, ``state`` stays valid and
        its buffers are never reused.
        """

    @abstractmethod
    def copy_state(self, state: BackendState) -> BackendState:
        """A deep copy on the same device sharing no storage with ``state``."""

    @abstractmethod
    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        """Flat name -> host numpy array (dtype of the spec, concrete shape), graph order."""

    @abstractmethod
    def state_from_host(self, arrays: dict[str, np.ndarray]) -> BackendState:
        """The inverse of :meth:`state_to_host`: uploads ``arrays`` (already validated by the caller:
        every name present, shapes consistent with one batch / past_length, dtypes of the specs)."""

    def select_rows(self, state: BackendState, rows: Sequence[int]) -> BackendState:
        """A new state of ``len(rows)`` rows, row i a copy of ``state``'s row ``rows[i]`` (same
        past_length, no storage shared). This default goes through the host; a backend overrides it
        with a device gather."""
        host = self.state_to_host(state)
        index = np.asarray(rows, dtype=np.int64)
        out = self.state_from_host({s.name: np.take(host[s.name], index, axis=s.batch_axis) for s in self.state_specs})
        out.batch, out.past_length = len(index), state.past_length
        return out

    def concat_rows(self, states: Sequence[BackendState]) -> BackendState:
        """One state holding the rows of ``states`` in order (no storage shared). past_length: the largest of
        ``states``'. A model whose state grows (KV caches) can join rows of different past lengths only when its
        caches have a validity mask (:attr:`valid_specs`): a shorter row's cache is padded at its end with invalid
        (never attended) positions; without a mask, :class:`InputError`. This default goes through the host; a
        backend overrides it with a device concatenation for fixed-size states."""
        self._check_concat(states)
        past = max(s.past_length for s in states)
        hosts = [pad_positions(self.state_to_host(s), self.state_specs, past) for s in states]
        arrays = {s.name: np.concatenate([h[s.name] for h in hosts], axis=s.batch_axis) for s in self.state_specs}
        out = self.state_from_host(arrays)
        out.batch, out.past_length = sum(s.batch for s in states), past
        return out

    @functools.cached_property
    def grows(self) -> bool:
        """Whether the state grows with the context (a KV cache)."""
        return any(s.grows for s in self.state_specs)

    @functools.cached_property
    def valid_specs(self) -> list[StateSpec]:
        """The KV caches' validity masks: growing ``bool`` states of shape ``(batch, past_length)``, False where a
        cached position is a pad (never attended). Every rnnx KV cache has one (docs/export.md, "State")."""
        return [s for s in self.state_specs if s.grows and s.dtype == "bool" and s.shape == (BATCH, PAST_LENGTH)]

    def compact_rows(self, state: BackendState) -> BackendState:
        """The same rows with each row's invalid cached positions dropped: its valid positions first, in order, the
        cache cut to the longest row's valid count (shorter rows padded at the end). Attention sees the same keys,
        so the outputs do not change (up to float summation order); what shrinks is memory and each step's work.
        A state that does not grow, or has no validity mask, is returned as it is. Goes through the host."""
        if not self.grows or not self.valid_specs:
            return state
        arrays = compact_positions(self.state_to_host(state), self.state_specs, self.valid_specs)
        if arrays is None:
            return state
        out = self.state_from_host(arrays)
        out.batch = state.batch
        return out

    def _check_concat(self, states: Sequence[BackendState]) -> None:
        if self.grows and not self.valid_specs:
            grow = [s.name for s in self.state_specs if s.grows]
            raise InputError(
                f"state tensors {grow} grow with the context (a KV cache) and have no validity mask: rows of "
                "different lengths cannot be batched"
            )
        if not states:
            raise InputError("concat_rows: expected at least one state")

    def host_batch_and_past(self, arrays: dict[str, np.ndarray]) -> tuple[int, int]:
        """``(batch, past_length)`` of a host state: the batch axis of the first state tensor, the grow
        axis of a KV cache (0 for a model without one)."""
        first = self.state_specs[0] if self.state_specs else None
        batch = int(arrays[first.name].shape[first.batch_axis]) if first is not None else 1
        grow = next((s for s in self.state_specs if s.grow_axis is not None), None)
        past = int(arrays[grow.name].shape[grow.grow_axis]) if grow is not None else 0
        return batch, past

    def close(self) -> None:  # noqa: B027 (an optional hook: most backends hold nothing to release)
        """Releases device resources (optional)."""

    def describe(self) -> str:
        """One line: backend, device, precision, model type."""
        what = f"vocab {self.vocab_size}" if self.vocab_size is not None else f"{len(self.state_specs)} state tensors"
        precision, model_type = self.metadata.get("precision", "fp32"), self.metadata.get("model_type")
        return f"{self.name} on {self.device} ({precision}, {model_type}, {what})"
