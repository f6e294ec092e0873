"""The TensorRT backend: an rnnx export run through a TensorRT engine, state kept on the GPU.

* The engine comes from :func:`rnnx.runtime.tensorrt.build_engine` (cached), with a decode and a
  prefill optimization profile (:mod:`rnnx.runtime.tensorrt.profiles`); a one-token call uses the
  decode profile.
* Every state tensor lives in a flat CUDA torch buffer sized for ``max_context`` positions (the
  live tensor is its dense prefix, :mod:`rnnx.runtime.tensorrt.bindings`). A call binds the past
  buffers as inputs and other buffers as ``present.*`` outputs via
  ``IExecutionContext.set_tensor_address``, then ``execute_async_v3`` on a CUDA stream. A call never
  binds one buffer as both a state input and a state output (the engine is built without the
  ``ALIASED_PLUGIN_IO_10_03`` preview feature, so TensorRT gives plugin outputs their own buffers).
* ``donate=True`` (:meth:`Session.step` / :meth:`Session.generate` pass it): the caller gives up the
  old state. Its buffers return to a pool that the next call's outputs draw from, and reusing that
  state afterwards raises :class:`~rnnx.runtime.tensorrt.graphs.StaleState`. Without donation the
  caller's buffers are never reused.
* ``cuda_graphs=True`` (the default) double-buffers a donated decode loop (one step per call, no
  growing KV cache) through two state buffer sets per batch size, A and B, and two CUDA graphs
  (``torch.cuda.CUDAGraph``): ``ping`` reads A and writes B, ``pong`` reads B and writes A, replayed
  alternately (:mod:`rnnx.runtime.tensorrt.graphs` decides per call). Each graph is captured right after
  an eager ``execute_async_v3`` with the same shapes and addresses, and is keyed by the optimization
  profile, the batch and every data tensor's address and shape, so a replay only runs on the buffers it
  captured; a profile switch (a prefill) drops the graphs. A capture that fails turns graphs off for
  this backend and the calls stay eager.

NOT RUN IN CI: this machine has no GPU and no TensorRT. Written against the documented TensorRT 10
Python API (``deserialize_cuda_engine``, ``num_io_tensors`` / ``get_tensor_name`` /
``get_tensor_mode``, ``set_optimization_profile_async``, ``set_input_shape``, ``set_tensor_address``,
``get_tensor_address``, ``get_tensor_shape``, ``execute_async_v3``) and ``torch.cuda.graph``; the state
and graph logic runs on CPU against stand-in contexts in tests/test_runtime_donation.py; tests marked
``tensorrt`` exercise it where TensorRT is installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ..artifact import MetadataError, StateSpec, read_metadata, state_specs
from ..tensorrt._trt import TensorRTNotInstalled, require_tensorrt
from ..tensorrt.bindings import plan_bindings
from ..tensorrt.builder import build_engine, default_plugin_library, load_plugin_library, required_creators
from ..tensorrt.graphs import CAPTURE, GRAPH_READING, REPLAY, PingPong, StaleState, StepPlan
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
        cuda_graphs: bool = True,
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
            engine_path = build_engine(
                model_dir, precision, self.profiles, plugin, cache_dir=cache_dir, device=self.device
            )
        self._trt = trt
        self._logger = trt.Logger(trt.Logger.WARNING)
        if plugin is not None and self.metadata["ops"]:
            # The same loader as build_engine's: a no-op when it already loaded this library in this process.
            load_plugin_library(trt, plugin, required_creators(self.metadata))
        self._runtime = trt.Runtime(self._logger)
        with torch.cuda.device(self._torch_device):  # engine and context on this backend's GPU
            self.engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
            self.context = None if self.engine is None else self.engine.create_execution_context()
        if self.engine is None:
            raise RnnxRuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        inputs = [n for n in names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        outputs = [n for n in names if n not in inputs]
        self.plan = plan_bindings(self.metadata, inputs, outputs)
        self.stream = torch.cuda.Stream(device=self._torch_device)
        self._profile: Optional[int] = None
        self._pool: dict[tuple[str, int], list[Any]] = {}
        self._cuda_graphs = cuda_graphs and not any(s.grows for s in self.state_specs)
        self._graphs: dict[tuple[Any, ...], Any] = {}  # (profile, batch, data key, ping | pong) -> CUDAGraph
        self._rings: dict[int, PingPong] = {}  # batch -> the decode ring's plan
        self._ring_buffers: dict[int, dict[str, Any]] = {}  # batch -> buffer name (<state>#0 / #1) -> storage
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
        """A donated state's own buffers back to the pool (at most two per tensor, each once)."""
        for name, storage in state.extra.get("storage", {}).items():
            free = self._pool.setdefault((name, state.batch), [])
            if len(free) < 2 and all(storage is not f for f in free):
                free.append(storage)

    def _ring_storages(self, batch: int, parity: int) -> dict[str, Any]:
        """State name -> storage of ring set ``parity`` (0 = A, 1 = B) for ``batch``, allocated once.
        The buffer names are :meth:`BindingPlan.addresses`' (``<state>#0`` / ``<state>#1``)."""
        buffers = self._ring_buffers.setdefault(batch, {})
        names = self.plan.addresses(1 - parity)  # a call of parity 1 - p writes set p
        storages = {}
        for spec in self.state_specs:
            buffer = names[spec.output]
            if buffer not in buffers:
                buffers[buffer] = self._storage(spec, batch)
            storages[spec.name] = buffers[buffer]
        return storages

    def _check_live(self, state: BackendState) -> None:
        if state.extra.get("donated"):
            raise StaleState(
                "state: it was donated to an earlier call (donate=True) and its buffers are reused; "
                "fork() a state before donating it to keep a copy"
            )

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
        self._check_live(state)
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
            step, storages, key = self._bind_state(state, batch, length, donate)
            self._execute(step, key)
        self.stream.synchronize()
        host = {n: (t.float() if t.is_floating_point() else t).cpu().numpy() for n, t in outputs.items()}
        return host, self._finish(step, state, storages, batch, new_past, donate)

    def _graph_key(self, batch: int) -> tuple[Any, ...]:
        """What a captured graph baked in besides the state sets: the profile, the batch, and every data
        tensor's bound address and shape (``get_tensor_address`` / ``get_tensor_shape``)."""
        ctx = self.context
        data = tuple(
            (d.name, int(ctx.get_tensor_address(d.name)), tuple(int(x) for x in ctx.get_tensor_shape(d.name)))
            for d in self.plan.data
        )
        return (self._profile, batch, data)

    def _bind_state(
        self, state: BackendState, batch: int, length: int, donate: bool
    ) -> tuple[StepPlan, dict[str, Any], tuple[Any, ...]]:
        """Plans the call (:meth:`PingPong.plan`), picks the output state buffers and binds the state
        addresses; a state input and a state output never share a buffer."""
        ring = self._rings.setdefault(batch, PingPong())
        key = self._graph_key(batch) if self._cuda_graphs else ()
        captured = [g for g in GRAPH_READING if (*key, g) in self._graphs]
        step = ring.plan(
            donate=donate, decode=length <= 1, graphs=self._cuda_graphs, ticket=state.extra.get("ring"),
            captured=captured, can_capture=len(self._graphs) < _MAX_GRAPHS,
        )  # fmt: skip
        if step.write is None:
            storages = {s.name: self._storage(s, batch) for s in self.state_specs}
        else:
            storages = self._ring_storages(batch, step.write)
        for spec in self.state_specs:
            past, present = state.tensors[spec.name].data_ptr(), storages[spec.name].data_ptr()
            if past == present:
                raise RnnxRuntimeError(f"state {spec.name!r}: input and output bound to one buffer ({step})")
            self.context.set_tensor_address(spec.input, past)
            self.context.set_tensor_address(spec.output, present)
        return step, storages, key

    def _finish(
        self, step: StepPlan, state: BackendState, storages: dict[str, Any], batch: int, past: int, donate: bool
    ) -> BackendState:
        """After the call: recycles / marks the donated input state and records the ring's new holder."""
        if step.recycle:
            self._recycle(state)
        if donate:
            state.extra["donated"] = True
        new = self._state(storages, batch, past)
        ticket = self._rings[batch].commit(step, new)
        if ticket is not None:
            new.extra["ring"] = ticket
        return new

    def _execute(self, step: StepPlan, key: tuple[Any, ...]) -> None:
        """Runs the bound call: replays its graph, or ``execute_async_v3`` and, for :data:`CAPTURE`, then
        captures that same call (TensorRT needs one eager enqueue with these shapes and addresses before
        a capture; capturing records without running, so the eager run gives this call's outputs)."""
        import torch

        graph_key = (*key, step.graph)
        if step.mode == REPLAY and graph_key in self._graphs:
            self._graphs[graph_key].replay()
            return
        # An eager call on this execution context may change what graphs captured under other shapes or
        # addresses relied on: keep only this call's own (ping and pong) and capture again when needed.
        self._graphs = {k: g for k, g in self._graphs.items() if k[:-1] == tuple(key)}
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise RnnxRuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        if step.mode not in (CAPTURE, REPLAY):  # a REPLAY whose graph was dropped is captured again
            return
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream):
                ok = self.context.execute_async_v3(self.stream.cuda_stream)
        except RuntimeError:
            ok = False
        if ok:
            self._graphs[(*key, step.graph)] = graph
        else:
            self._cuda_graphs = False  # capture unsupported here: stay eager

    def copy_state(self, state: BackendState) -> BackendState:
        """A copy in pool buffers (never a ring set), so donating either one leaves the other intact."""
        self._check_live(state)
        storages = {}
        for spec in self.state_specs:
            storage = self._storage(spec, state.batch)
            storage.copy_(state.extra["storage"][spec.name])
            storages[spec.name] = storage
        return self._state(storages, state.batch, state.past_length)

    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        self._check_live(state)
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
        self._rings.clear()
        self._ring_buffers.clear()
        self.context = None
        self.engine = None
