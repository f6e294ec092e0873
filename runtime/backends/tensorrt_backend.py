"""The TensorRT backend: an rnnx export run through a TensorRT engine, state kept on the GPU.

* The engine comes from :func:`rnnx.runtime.tensorrt.build_engine` (cached), with a decode and a
  prefill optimization profile (:mod:`rnnx.runtime.tensorrt.profiles`); a one-token call uses the
  decode profile.
* Every state tensor lives in a flat CUDA torch buffer sized for ``max_context`` positions (the
  live tensor is its dense prefix, :mod:`rnnx.runtime.tensorrt.bindings`). A call binds the past
  buffers as inputs and fresh / recycled buffers as ``present.*`` outputs via
  ``IExecutionContext.set_tensor_address``, then ``execute_async_v3`` on a CUDA stream. With
  ``donate=True`` the old state's buffers are recycled for the next call's outputs, i.e. two
  buffers per state tensor ping-pong by swapping addresses; nothing is copied.
* ``cuda_graphs=True`` captures the decode step (batch fixed, donated state, no growing KV cache:
  shapes and addresses must not change between replays) in a ``torch.cuda.CUDAGraph``.

NOT RUN IN CI: this machine has no GPU and no TensorRT. Written against the documented TensorRT 10
Python API (``deserialize_cuda_engine``, ``num_io_tensors`` / ``get_tensor_name`` /
``get_tensor_mode``, ``set_optimization_profile_async``, ``set_input_shape``, ``set_tensor_address``,
``execute_async_v3``); tests marked ``tensorrt`` exercise it where TensorRT is installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ..artifact import MetadataError, StateSpec, read_metadata, state_specs
from ..tensorrt._trt import TensorRTNotInstalled, require_tensorrt
from ..tensorrt.bindings import plan_bindings
from ..tensorrt.builder import build_engine, default_plugin_library, load_plugin_library
from ..tensorrt.profiles import ProfileError, ProfileLimits, build_profiles, select_profile
from .base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError

_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
                 "int64": "int64", "int32": "int32", "bool": "bool", "uint8": "uint8", "int8": "int8"}  # fmt: skip
_MAX_GRAPHS = 8


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, _TORCH_DTYPES[name])


class TensorRTBackend(Backend):
    """``TensorRTBackend(model_dir, device="cuda", precision=None, limits=..., ...)``; see the module doc."""

    name = "tensorrt"

    def __init__(
        self,
        model_dir: Union[str, Path],
        device: str = "cuda",
        precision: Optional[str] = None,
        *,
        limits: Optional[ProfileLimits] = None,
        engine_path: Optional[Union[str, Path]] = None,
        plugin_library: Optional[Union[str, Path]] = None,
        cache_dir: Optional[Union[str, Path]] = None,
        cuda_graphs: bool = False,
    ) -> None:
        try:
            trt = require_tensorrt()
        except TensorRTNotInstalled as e:
            raise BackendUnavailable(str(e)) from None
        import torch

        if not str(device).startswith("cuda") or not torch.cuda.is_available():
            raise BackendUnavailable(f"backend 'tensorrt' needs a CUDA device, got device={device!r} "
                                     f"(torch.cuda.is_available() = {torch.cuda.is_available()})")  # fmt: skip
        try:
            self.metadata = read_metadata(model_dir)
        except MetadataError as e:
            raise InputError(str(e)) from None
        self.device = str(device)
        self._torch_device = torch.device(self.device)
        self.state_specs = state_specs(self.metadata)
        self.vocab_size = self.metadata.get("vocab_size")
        self.limits = (limits or ProfileLimits()).resolved()
        self.profiles = build_profiles(self.metadata, self.limits)
        plugin = Path(plugin_library) if plugin_library is not None else default_plugin_library()
        if engine_path is None:
            engine_path = build_engine(model_dir, precision, self.profiles, plugin, cache_dir=cache_dir)
        self._trt = trt
        self._logger = trt.Logger(trt.Logger.WARNING)
        if plugin is not None:
            load_plugin_library(trt, plugin)
        self._runtime = trt.Runtime(self._logger)
        self.engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
        if self.engine is None:
            raise RnnxRuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        inputs = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if n not in inputs]
        self.plan = plan_bindings(self.metadata, inputs, outputs)
        self.context = self.engine.create_execution_context()
        self.stream = torch.cuda.Stream(device=self._torch_device)
        self._profile: Optional[int] = None
        self._pool: dict[tuple[str, int], list[Any]] = {}
        self._cuda_graphs = cuda_graphs and not any(s.grows for s in self.state_specs)
        self._graphs: dict[tuple[int, ...], Any] = {}
        # One device buffer per data tensor, grown on demand (a stable address between calls of the same or
        # smaller size, which CUDA-graph replays need; growing one drops the captured graphs).
        self._buffers: dict[str, Any] = {}

    # -- data buffers ----------------------------------------------------------------------------

    def _buffer(self, name: str, shape: tuple[int, ...], dtype: str) -> Any:
        """A device tensor of ``shape`` viewing the data buffer of ``name`` (grown when too small)."""
        import torch

        numel = int(np.prod(shape, dtype=np.int64))
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(max(1, numel), dtype=_torch_dtype(dtype), device=self._torch_device)
            self._buffers[name] = buf
            self._graphs.clear()
        return buf[:numel].view(shape)

    # -- state buffers ---------------------------------------------------------------------------

    def _capacity(self, spec: StateSpec, batch: int) -> int:
        shape = spec.concrete_shape(batch, int(self.limits.max_context or 0) if spec.grows else 0)
        return max(1, int(np.prod(shape, dtype=np.int64)))

    def _storage(self, spec: StateSpec, batch: int) -> Any:
        import torch

        free = self._pool.get((spec.name, batch))
        if free:
            return free.pop()
        return torch.empty(self._capacity(spec, batch), dtype=_torch_dtype(spec.dtype), device=self._torch_device)

    def _recycle(self, state: BackendState) -> None:
        for name, storage in state.extra.get("storage", {}).items():
            free = self._pool.setdefault((name, state.batch), [])
            if len(free) < 2:
                free.append(storage)

    def _state(self, storages: dict[str, Any], batch: int, past_length: int) -> BackendState:
        tensors = {}
        for spec in self.state_specs:
            shape = spec.concrete_shape(batch, past_length)
            tensors[spec.name] = storages[spec.name][: int(np.prod(shape, dtype=np.int64))].view(shape)
        return BackendState(tensors, batch, past_length, self.name, self.signature, {"storage": storages})

    def _check_batch(self, batch: int) -> None:
        if not 1 <= batch <= self.limits.max_batch:
            raise InputError(f"batch {batch} is outside the engine's range 1..{self.limits.max_batch}")

    # -- Backend API ------------------------------------------------------------------------------

    def init_state(self, batch: int) -> BackendState:
        self._check_batch(batch)
        storages = {s.name: self._storage(s, batch).zero_() for s in self.state_specs}
        return self._state(storages, batch, 0)

    def run(
        self, inputs: dict[str, np.ndarray], state: BackendState, donate: bool = False
    ) -> tuple[dict[str, np.ndarray], BackendState]:
        import torch

        batch, length = self.batch_of(inputs), self.call_length(inputs)
        self._check_batch(batch)
        if length > self.limits.max_length:
            raise InputError(f"inputs: length {length} exceeds the engine's max_length {self.limits.max_length}")
        grows = any(s.grows for s in self.state_specs)
        new_past = state.past_length + length
        if grows and new_past > int(self.limits.max_context or 0):
            raise InputError(
                f"KV cache would hold {new_past} positions; the engine's max_context is {self.limits.max_context}"
            )
        try:
            profile = select_profile(self.profiles, {t.name: np.shape(inputs[t.name]) for t in self.inputs})
        except ProfileError as e:
            raise InputError(str(e)) from None
        storages = {s.name: self._storage(s, batch) for s in self.state_specs}
        ctx = self.context
        outputs = {}
        with torch.cuda.stream(self.stream):
            if profile != self._profile:
                ctx.set_optimization_profile_async(profile, self.stream.cuda_stream)
                self._profile = profile
                self._graphs.clear()
            for spec in self.inputs:
                value = np.ascontiguousarray(inputs[spec.name])
                buf = self._buffer(spec.name, value.shape, spec.dtype)
                buf.copy_(torch.from_numpy(value), non_blocking=False)
                ctx.set_input_shape(spec.name, value.shape)
                ctx.set_tensor_address(spec.name, buf.data_ptr())
            for spec in self.state_specs:
                ctx.set_input_shape(spec.input, tuple(state.tensors[spec.name].shape))
            for spec in self.outputs:  # every input shape is set: TensorRT knows the output shapes
                shape = tuple(int(d) for d in ctx.get_tensor_shape(spec.name))
                outputs[spec.name] = self._buffer(spec.name, shape, spec.dtype)
                ctx.set_tensor_address(spec.name, outputs[spec.name].data_ptr())
            for spec in self.state_specs:
                past = state.tensors[spec.name]
                ctx.set_tensor_address(spec.input, past.data_ptr())
                ctx.set_tensor_address(spec.output, storages[spec.name].data_ptr())
            self._execute(batch, length, donate, state, storages)
        self.stream.synchronize()
        host = {n: (t.float() if t.is_floating_point() else t).cpu().numpy() for n, t in outputs.items()}
        if donate:
            self._recycle(state)
        return host, self._state(storages, batch, new_past)

    def _execute(self, batch: int, length: int, donate: bool, state: BackendState, storages: dict[str, Any]) -> None:
        import torch

        key = None
        if self._cuda_graphs and donate and length == 1:
            key = (batch, *(state.tensors[s.name].data_ptr() for s in self.state_specs),
                   *(storages[s.name].data_ptr() for s in self.state_specs))  # fmt: skip
            graph = self._graphs.get(key)
            if graph is not None:
                graph.replay()
                return
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise RnnxRuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        if key is not None and len(self._graphs) < _MAX_GRAPHS:
            # Captured after one eager run with the same shapes/addresses (TensorRT's requirement).
            # The eager run above already produced this call's outputs; the graph serves later replays.
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, stream=self.stream):
                    self.context.execute_async_v3(self.stream.cuda_stream)
                self._graphs[key] = graph
            except RuntimeError:
                self._cuda_graphs = False  # capture unsupported here: stay eager

    def copy_state(self, state: BackendState) -> BackendState:
        storages = {}
        for spec in self.state_specs:
            storage = self._storage(spec, state.batch)
            storage.copy_(state.extra["storage"][spec.name])
            storages[spec.name] = storage
        return self._state(storages, state.batch, state.past_length)

    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        self.stream.synchronize()
        return {s.name: state.tensors[s.name].cpu().numpy() for s in self.state_specs}

    def state_from_host(self, arrays: dict[str, np.ndarray]) -> BackendState:
        import torch

        batch, past = self.host_batch_and_past(arrays)
        self._check_batch(batch)
        if past > int(self.limits.max_context or 0) and any(s.grows for s in self.state_specs):
            raise InputError(f"state holds {past} positions; the engine's max_context is {self.limits.max_context}")
        storages = {}
        for spec in self.state_specs:
            storage = self._storage(spec, batch)
            flat = torch.from_numpy(np.ascontiguousarray(arrays[spec.name])).reshape(-1)
            storage[: flat.numel()].copy_(flat)
            storages[spec.name] = storage
        return self._state(storages, batch, past)

    def close(self) -> None:
        self._graphs.clear()
        self._pool.clear()
        self.context = None
        self.engine = None
