"""The PyTorch backend: the model itself behind the graph contract (reference for parity).

The model is wrapped in :class:`rnnx.models.stateful.StatefulModule` (:class:`~rnnx.models.stateful.StatefulLM`
for an rnnx language model), so it takes and returns exactly the graph's flat tensors (fp32 state at the
boundary, KV ``valid`` masks bool). State tensors stay torch tensors on ``device`` between calls; only the
data outputs come back to the host. The only backend that imports torch and rnnx.models.

Where the model comes from: a language model's checkpoint (a checkpoint directory, or an export's
recorded ``source.checkpoint``), or a stateful export's recorded ``source.factory`` (+ ``source.weights``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from ...models.from_pretrained import load_model
from ...models.lm import RecurrentLM
from ...models.registry import model_type_of
from ...models.stateful import StatefulLM, StatefulModule, lm_state_specs, torch_dtype
from ..contract.artifact import CAUSAL_LM, METADATA_FILE, interface_of, lm_io, numpy_dtype, read_metadata, state_specs
from ..contract.targets import FP32
from ..contract.targets import precision as precision_record
from .base import Backend, BackendState, BackendUnavailable, InputError


def checkpoint_of(path: Union[str, Path]) -> Path:
    """The checkpoint directory for ``path``: itself, or an export's recorded ``source.checkpoint``."""
    path = Path(path)
    if (path / METADATA_FILE).is_file():
        source = read_metadata(path, verify_hash=False).get("source") or {}
        if not source.get("checkpoint"):
            raise InputError(f"{path}/{METADATA_FILE}: source.checkpoint is null; pass the checkpoint directory itself")
        return Path(source["checkpoint"])
    return path


def lm_metadata(model: RecurrentLM, precision: str, source: Optional[dict[str, Any]]) -> dict[str, Any]:
    """The ``rnnx.json``-shaped description of a language model the torch backend runs."""
    specs = lm_state_specs(model)
    logits_dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    inputs, outputs = lm_io(int(model.vocab_size), specs, logits_dtype)
    return {
        "interface": CAUSAL_LM, "model_type": model_type_of(model), "config": dict(model.config),
        "vocab_size": int(model.vocab_size), "precision": precision,
        "inputs": [t.to_dict() for t in inputs], "outputs": [t.to_dict() for t in outputs],
        "state": [spec.to_dict() for spec in specs],
        "source": source or {"checkpoint": None, "weights_sha256": None},
    }  # fmt: skip


class TorchBackend(Backend):
    """``model`` on ``device`` in ``precision`` (fp32 default; fp16 / bf16).

    ``model``: an rnnx language model (:class:`RecurrentLM`), or a :class:`StatefulModule` together with
    the ``metadata`` of its graph (what ``rnnx.export.export`` writes: ``inputs``, ``outputs``,
    ``state``, ...).
    """

    name = "torch"

    def __init__(
        self, model: Union[RecurrentLM, StatefulModule], device: str = "cpu", precision: Optional[str] = None,
        source: Optional[dict[str, Any]] = None, metadata: Optional[dict[str, Any]] = None,
    ) -> None:  # fmt: skip
        try:  # the torch backend casts a checkpoint to any precision torch runs (bf16 too, which no export has)
            record = FP32 if precision is None else precision_record(precision, exported=False)
        except ValueError as e:
            raise InputError(str(e)) from None
        if not record.torch:
            raise InputError(f"precision {record.name!r} does not run on the torch backend")
        precision = record.name
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            raise BackendUnavailable(f"device {device!r} requested but torch sees no CUDA device")
        self.device = str(device)
        self._torch_device = torch.device(device)
        self._float_dtype = torch_dtype(record.dtype)
        if isinstance(model, StatefulModule):
            model = model.in_dtype(self._float_dtype)
        model = model.to(device=self._torch_device, dtype=self._float_dtype).eval()
        if isinstance(model, RecurrentLM):
            self.graph: StatefulModule = StatefulLM(model).eval()
            self.metadata = lm_metadata(model, precision, source)
        elif isinstance(model, StatefulModule) and metadata is not None:
            self.graph = model
            self.metadata = {**metadata, "precision": precision}
            if source is not None:
                self.metadata["source"] = source
        else:
            raise InputError(
                f"TorchBackend: expected an rnnx RecurrentLM, or a StatefulModule with its metadata; "
                f"got {type(model).__name__}{'' if metadata is None else ' with metadata'}"
            )
        self.model = self.graph.module
        self.state_specs = state_specs(self.metadata)
        self.vocab_size = self.metadata.get("vocab_size")

    @classmethod
    def from_path(cls, path: Union[str, Path], device: str = "cpu", precision: Optional[str] = None) -> TorchBackend:
        """From a checkpoint directory, or an export directory's recorded source: its checkpoint (a
        language model) or its factory and weights (a stateful export; BackendUnavailable when the factory
        cannot be imported or built here)."""
        path = Path(path)
        if (path / METADATA_FILE).is_file() and interface_of(read_metadata(path, verify_hash=False)) != CAUSAL_LM:
            from ...models.factory import FactoryError, load_factory_module

            metadata = read_metadata(path, verify_hash=False)
            try:
                graph = load_factory_module(metadata, where=str(path / METADATA_FILE))
            except FactoryError as e:  # the recorded factory cannot be imported or called here
                raise BackendUnavailable(str(e)) from None
            return cls(graph, device=device, precision=precision, metadata=metadata)
        checkpoint = checkpoint_of(path)
        model, info = load_model(checkpoint, map_location="cpu")
        source = {"checkpoint": str(Path(checkpoint).resolve()), "weights_sha256": info.get("weights_sha256") or None}
        return cls(model, device=device, precision=precision, source=source)

    def _state(self, tensors: dict[str, torch.Tensor], batch: int, past_length: int) -> BackendState:
        return BackendState(tensors, batch, past_length, self.name, self.signature)

    def init_state(self, batch: int) -> BackendState:
        tensors = {
            s.name: torch.zeros(s.concrete_shape(batch, 0), dtype=torch_dtype(s.dtype), device=self._torch_device)
            for s in self.state_specs
        }
        return self._state(tensors, batch, 0)

    @torch.inference_mode()
    def run(
        self, inputs: dict[str, np.ndarray], state: BackendState, donate: bool = False
    ) -> tuple[dict[str, np.ndarray], BackendState]:
        flat = [torch.as_tensor(np.asarray(inputs[t.name]), device=self._torch_device) for t in self.inputs]
        flat = [t.to(self._float_dtype) if t.is_floating_point() else t for t in flat]  # the model's precision
        outs = self.graph(*flat, *(state.tensors[n] for n in self.state_names))
        names = [t.name for t in self.outputs]
        if len(outs) != len(names) + len(self.state_names):
            raise InputError(
                f"the module returned {len(outs)} tensors; the graph has {len(names)} outputs and "
                f"{len(self.state_names)} state tensors"
            )
        outputs = {n: (t.float() if t.is_floating_point() else t).cpu().numpy() for n, t in zip(names, outs)}
        tensors = dict(zip(self.state_names, outs[len(names) :]))
        return outputs, self._state(tensors, state.batch, state.past_length + self.call_length(inputs))

    def copy_state(self, state: BackendState) -> BackendState:
        return self._state({k: v.clone() for k, v in state.tensors.items()}, state.batch, state.past_length)

    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        return {n: state.tensors[n].detach().cpu().numpy().copy() for n in self.state_names}

    def select_rows(self, state: BackendState, rows: Sequence[int]) -> BackendState:
        """:meth:`Backend.select_rows` as one ``index_select`` per tensor on the device."""
        index = torch.as_tensor(np.asarray(rows, dtype=np.int64), device=self._torch_device)
        tensors = {s.name: state.tensors[s.name].index_select(s.batch_axis, index) for s in self.state_specs}
        return self._state(tensors, len(index), state.past_length)

    def concat_rows(self, states: Sequence[BackendState]) -> BackendState:
        """:meth:`Backend.concat_rows` as one ``torch.cat`` per tensor on the device (a KV cache's rows are padded to
        one length on the host)."""
        if self.grows:
            return super().concat_rows(states)
        self._check_concat(states)
        tensors = {s.name: torch.cat([st.tensors[s.name] for st in states], s.batch_axis) for s in self.state_specs}
        return self._state(tensors, sum(st.batch for st in states), max(st.past_length for st in states))

    def state_from_host(self, arrays: dict[str, np.ndarray]) -> BackendState:
        batch, past = self.host_batch_and_past(arrays)
        tensors = {
            s.name: torch.from_numpy(np.ascontiguousarray(arrays[s.name], dtype=numpy_dtype(s.dtype))).to(
                self._torch_device
            )
            for s in self.state_specs
        }
        return self._state(tensors, batch, past)
