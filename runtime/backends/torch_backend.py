"""The PyTorch backend: the rnnx model itself behind the graph contract (reference for parity).

The model is wrapped in :class:`rnnx.models.stateful.StatefulLM`, so it takes and returns exactly the
graph's flat tensors (fp32 state at the boundary, KV ``valid`` masks bool). State tensors stay torch
tensors on ``device`` between calls; only the logits come back to the host. The only backend that
imports torch and rnnx.models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import torch

from ...models.checkpoint import load_checkpoint
from ...models.lm import RecurrentLM
from ...models.registry import model_type_of
from ...models.stateful import StatefulLM, state_specs, torch_dtype
from ..artifact import METADATA_FILE, numpy_dtype, read_metadata
from .base import Backend, BackendState, BackendUnavailable, InputError

_PRECISIONS = {None: torch.float32, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def checkpoint_of(path: Union[str, Path]) -> Path:
    """The checkpoint directory for ``path``: itself, or an export's recorded ``source.checkpoint``."""
    path = Path(path)
    if (path / METADATA_FILE).is_file():
        source = read_metadata(path, verify_hash=False).get("source") or {}
        if not source.get("checkpoint"):
            raise InputError(f"{path}/{METADATA_FILE}: source.checkpoint is null; pass the checkpoint directory itself")
        return Path(source["checkpoint"])
    return path


class TorchBackend(Backend):
    """``model`` (a :class:`RecurrentLM`) on ``device`` in ``precision`` (fp32 default; fp16 / bf16)."""

    name = "torch"

    def __init__(
        self, model: RecurrentLM, device: str = "cpu", precision: Optional[str] = None,
        source: Optional[dict[str, Any]] = None,
    ) -> None:  # fmt: skip
        if precision not in _PRECISIONS:
            raise InputError(f"unknown precision {precision!r}; expected fp32, fp16 or bf16")
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            raise BackendUnavailable(f"device {device!r} requested but torch sees no CUDA device")
        self.device = str(device)
        self._torch_device = torch.device(device)
        model = model.to(device=self._torch_device, dtype=_PRECISIONS[precision]).eval()
        self.model = model
        self.wrapper = StatefulLM(model).eval()
        self.state_specs = state_specs(model)
        self.vocab_size = int(model.vocab_size)
        self.metadata = {
            "model_type": model_type_of(model),
            "config": dict(model.config),
            "vocab_size": self.vocab_size,
            "precision": precision or "fp32",
            "state": [spec.to_dict() for spec in self.state_specs],
            "source": source or {"checkpoint": None, "weights_sha256": None},
        }

    @classmethod
    def from_path(cls, path: Union[str, Path], device: str = "cpu", precision: Optional[str] = None) -> TorchBackend:
        """From a checkpoint directory, or an export directory's recorded source checkpoint."""
        checkpoint = checkpoint_of(path)
        model, info = load_checkpoint(checkpoint, map_location="cpu")
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
        self, input_ids: np.ndarray, attention_mask: np.ndarray, state: BackendState, donate: bool = False
    ) -> tuple[np.ndarray, BackendState]:
        ids = torch.as_tensor(input_ids, device=self._torch_device)
        mask = torch.as_tensor(attention_mask, device=self._torch_device)
        outs = self.wrapper(ids, mask, *(state.tensors[n] for n in self.state_names))
        logits = outs[0].float().cpu().numpy()
        tensors = dict(zip(self.state_names, outs[1:]))
        return logits, self._state(tensors, state.batch, state.past_length + ids.shape[1])

    def copy_state(self, state: BackendState) -> BackendState:
        return self._state({k: v.clone() for k, v in state.tensors.items()}, state.batch, state.past_length)

    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        return {n: state.tensors[n].detach().cpu().numpy().copy() for n in self.state_names}

    def state_from_host(self, arrays: dict[str, np.ndarray]) -> BackendState:
        batch, past = self.host_batch_and_past(arrays)
        tensors = {
            s.name: torch.from_numpy(np.ascontiguousarray(arrays[s.name], dtype=numpy_dtype(s.dtype))).to(
                self._torch_device
            )
            for s in self.state_specs
        }
        return self._state(tensors, batch, past)
