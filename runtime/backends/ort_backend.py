"""The ONNX Runtime backend: an export directory (``rnnx.json`` + ``model.onnx``) on the CPU EP, or on
the CUDA EP with IO binding.

CPU: state tensors are numpy arrays fed to ``InferenceSession.run`` (host memory is the device).
CUDA: state tensors are ``OrtValue`` s on the GPU; every call binds the past OrtValues as inputs and
lets ORT allocate the present outputs on the GPU (``bind_output(name, "cuda")``), so the state never
crosses to the host between steps; only input_ids / attention_mask go up and the logits come down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ...export.metadata import read_metadata
from .base import Backend, BackendState, BackendUnavailable, InputError, StateSpec


def _numpy_dtype(name: str) -> np.dtype:
    return np.dtype(np.bool_ if name == "bool" else name)


def _device_id(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0


class OrtBackend(Backend):
    """``model_dir`` on ONNX Runtime. ``device``: ``"cpu"`` or ``"cuda[:N]"``; ``precision`` must be
    None or the export's precision (an ONNX file has one); ``threads``: intra-op threads (0 = ORT's default)."""

    name = "onnxruntime"

    def __init__(
        self, model_dir: Union[str, Path], device: str = "cpu", precision: Optional[str] = None, threads: int = 0
    ) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable("backend 'onnxruntime' needs the onnxruntime package (pip install onnxruntime)") from None
        self._ort = ort
        self.model_dir = Path(model_dir)
        self.metadata = read_metadata(self.model_dir)
        if precision is not None and precision != self.metadata["precision"]:
            raise InputError(
                f"{self.model_dir}: export precision is {self.metadata['precision']!r}, requested {precision!r}; re-export"
            )
        self.device = str(device)
        self._cuda = self.device.startswith("cuda")
        if self._cuda:
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise BackendUnavailable(
                    f"device {device!r}: this onnxruntime has no CUDAExecutionProvider "
                    f"(available: {', '.join(ort.get_available_providers())}); install onnxruntime-gpu"
                )
            providers: list[Any] = [("CUDAExecutionProvider", {"device_id": _device_id(self.device)}), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(self.model_dir / self.metadata["model_file"]), options, providers=providers)
        self.vocab_size = int(self.metadata["vocab_size"])
        self.state_specs = [StateSpec.from_metadata(e) for e in self.metadata["state"]]
        self._outputs = ["logits"] + [s.output for s in self.state_specs]

    def _state(self, tensors: dict[str, Any], batch: int, past_length: int) -> BackendState:
        return BackendState(tensors, batch, past_length, self.name, self.signature)

    def _upload(self, array: np.ndarray) -> Any:
        if not self._cuda:
            return array
        return self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", _device_id(self.device))

    def init_state(self, batch: int) -> BackendState:
        tensors = {s.name: self._upload(np.zeros(s.concrete_shape(batch, 0), _numpy_dtype(s.dtype))) for s in self.state_specs}
        return self._state(tensors, batch, 0)

    def run(
        self, input_ids: np.ndarray, attention_mask: np.ndarray, state: BackendState, donate: bool = False
    ) -> tuple[np.ndarray, BackendState]:
        length = input_ids.shape[1]
        if self._cuda:
            logits, present = self._run_bound(input_ids, attention_mask, state)
        else:
            feed = {"input_ids": input_ids, "attention_mask": attention_mask}
            feed.update((s.input, state.tensors[s.name]) for s in self.state_specs)
            outs = self.session.run(self._outputs, feed)
            logits, present = outs[0], outs[1:]
        tensors = {s.name: t for s, t in zip(self.state_specs, present)}
        return np.asarray(logits, dtype=np.float32), self._state(tensors, state.batch, state.past_length + length)

    def _run_bound(self, input_ids: np.ndarray, attention_mask: np.ndarray, state: BackendState) -> tuple[np.ndarray, list[Any]]:
        binding = self.session.io_binding()
        binding.bind_cpu_input("input_ids", input_ids)
        binding.bind_cpu_input("attention_mask", attention_mask)
        for s in self.state_specs:
            binding.bind_ortvalue_input(s.input, state.tensors[s.name])
        binding.bind_output("logits", "cpu")
        for s in self.state_specs:
            binding.bind_output(s.output, "cuda", _device_id(self.device))
        self.session.run_with_iobinding(binding)
        outs = binding.get_outputs()
        return outs[0].numpy(), list(outs[1:])

    def _host(self, t: Any) -> np.ndarray:
        return t.numpy() if self._cuda else np.array(t, copy=True)

    def copy_state(self, state: BackendState) -> BackendState:
        tensors = {k: self._upload(self._host(v)) for k, v in state.tensors.items()}
        return self._state(tensors, state.batch, state.past_length)

    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        return {s.name: self._host(state.tensors[s.name]) for s in self.state_specs}

    def state_from_host(self, arrays: dict[str, np.ndarray]) -> BackendState:
        batch, past = self.host_batch_and_past(arrays)
        tensors = {
            s.name: self._upload(np.array(arrays[s.name], dtype=_numpy_dtype(s.dtype), copy=True)) for s in self.state_specs
        }
        return self._state(tensors, batch, past)
