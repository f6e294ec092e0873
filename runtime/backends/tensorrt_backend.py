"""The TensorRT backend: an rnnx export run through a TensorRT engine, state kept on the GPU.

* The engine comes from :func:`rnnx.runtime.tensorrt.build_engine` (cached), with a decode and a
  prefill optimization profile (:mod:`rnnx.runtime.tensorrt.profiles`); a one-token call uses the
  decode profile.
* **Execution contexts, each fixed on one profile.** Every context is created with
  ``ExecutionContextAllocationStrategy.USER_MANAGED`` on one shared block of activation memory (sized
  ``engine.device_memory_size_v2``: the calls are serialized on the backend's stream, so they can share
  it) and given its optimization profile once, at creation; no context ever switches profile. An *eager*
  context per profile runs every call that is not a CUDA-graph call, and is rebound freely. A *ring*
  context (two per batch size of the decode ring, ``ping`` and ``pong``) is bound once, at creation, to
  its own data buffers and to the two state buffer sets it reads and writes, and is never rebound: its
  CUDA graph is captured on it and replayed on it, so a replay runs exactly the bindings it captured.
  A prefill runs on its own context and leaves the decode graphs in place.
* Every state tensor lives in a flat CUDA torch buffer sized for ``max_context`` positions (the
  live tensor is its dense prefix, :mod:`rnnx.runtime.tensorrt.bindings`). A call binds the past
  buffers as inputs and other buffers as ``present.*`` outputs via
  ``IExecutionContext.set_tensor_address``, then ``execute_async_v3`` on a CUDA stream. A call never
  binds one buffer as both a state input and a state output (the engine is built without the
  ``ALIASED_PLUGIN_IO_10_03`` preview feature, so TensorRT gives plugin outputs their own buffers).
* **One stream.** Everything that touches state or I/O memory runs on the backend's stream: buffers are
  allocated under it, and zeroing a new state, copying a state and uploading one from the host are
  enqueued on it, so TensorRT never reads a state before its write is done, whatever other torch work
  is queued on other streams.
* ``donate=True`` (:meth:`Session.step` / :meth:`Session.generate` pass it): the caller gives up the
  old state. Its buffers return to a pool that the next call's outputs draw from, and reusing that
  state afterwards raises :class:`~rnnx.runtime.tensorrt.graphs.StaleState`. Without donation the
  caller's buffers are never reused.
* ``cuda_graphs=True`` (the default) double-buffers a donated decode loop (one step per call, no
  growing KV cache) through two state buffer sets per batch size, A and B, and two CUDA graphs
  (``torch.cuda.CUDAGraph``): ``ping`` reads A and writes B, ``pong`` reads B and writes A, replayed
  alternately (:mod:`rnnx.runtime.tensorrt.graphs` decides per call). Each is captured on its ring
  context right after an eager ``execute_async_v3`` of that same context (TensorRT needs one), in
  ``thread_local`` capture mode (CUDA calls of other threads, the scheduler's say, do not invalidate it).
  Rings with graphs exist for at most :data:`MAX_GRAPH_BATCHES` batch sizes; other batch sizes run
  eagerly. A capture that fails turns graphs off for this backend and the calls stay eager.

NOT RUN IN CI: this machine has no GPU and no TensorRT. Written against the documented TensorRT 10
Python API (``deserialize_cuda_engine``, ``create_execution_context(strategy)``, ``device_memory_size_v2``,
``set_device_memory``, ``num_io_tensors`` / ``get_tensor_name`` / ``get_tensor_mode``,
``set_optimization_profile_async``, ``set_input_shape``, ``set_tensor_address``, ``get_tensor_shape``,
``execute_async_v3``) and ``torch.cuda.graph``; the context, state and graph logic runs on CPU against
labelled stand-ins in tests/test_runtime_donation.py; tests marked ``tensorrt`` exercise it where
TensorRT is installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ..artifact import MetadataError, StateSpec, read_metadata, state_specs
from ..tensorrt._trt import TensorRTNotInstalled, require_tensorrt
from ..tensorrt.bindings import plan_bindings
from ..tensorrt.builder import build_engine, default_plugin_library, load_plugin_library, required_creators
from ..tensorrt.graphs import CAPTURE, GRAPH_READING, REPLAY, PingPong, StaleState, StepPlan
from ..tensorrt.profiles import DECODE, ProfileError, ProfileLimits, build_profiles, select_profile
from .base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError

_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
                 "int64": "int64", "int32": "int32", "bool": "bool", "uint8": "uint8", "int8": "int8"}  # fmt: skip
#: Decode rings with CUDA graphs (two contexts and two graphs each) for at most this many batch sizes.
MAX_GRAPH_BATCHES = 4


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, _TORCH_DTYPES[name])


def _to_host(tensor: Any) -> np.ndarray:
    """A host copy (floats as float32) of a device output buffer."""
    import torch

    dtype = torch.float32 if tensor.is_floating_point() else tensor.dtype
    return tensor.to("cpu", dtype=dtype, copy=True).numpy()


@dataclass
class RingContext:
    """An execution context of the decode ring, bound once at creation and never again: its own data
    buffers (``data``: every input and output tensor, device tensors of the shapes it was bound with) and the
    state set it reads (``reads``: state name -> address) and writes. Its CUDA graph, once captured, replays
    exactly these bindings."""

    context: Any
    data: dict[str, Any]
    reads: dict[str, int]
    graph: Any = None
    captures: int = field(default=0)


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
            metadata = read_metadata(model_dir)
        except MetadataError as e:
            raise InputError(str(e)) from None
        self._describe_model(metadata, str(device), limits)
        plugin = Path(plugin_library) if plugin_library is not None else default_plugin_library()
        if engine_path is None:
            engine_path = build_engine(
                model_dir, precision, self.profiles, plugin, cache_dir=cache_dir, device=self.device
            )
        self._logger = trt.Logger(trt.Logger.WARNING)
        if plugin is not None and self.metadata["ops"]:
            # The same loader as build_engine's: a no-op when it already loaded this library in this process.
            load_plugin_library(trt, plugin, required_creators(self.metadata))
        self._runtime = trt.Runtime(self._logger)
        with torch.cuda.device(self._torch_device):  # engine, memory and contexts on this backend's GPU
            engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
            if engine is None:
                raise RnnxRuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
            self._attach(trt, engine, torch.cuda.Stream(device=self._torch_device), cuda_graphs)

    def _describe_model(self, metadata: dict[str, Any], device: str, limits: Optional[ProfileLimits]) -> None:
        """What the backend knows before TensorRT: the export, its state, the engine's limits and profiles."""
        import torch

        self.metadata = metadata
        self.device = device
        self._torch_device = torch.device(device)
        self.state_specs = state_specs(metadata)
        self.vocab_size = metadata.get("vocab_size")
        self.limits = (limits or ProfileLimits()).resolved()
        self.profiles = build_profiles(metadata, self.limits)

    def _attach(self, trt: Any, engine: Any, stream: Any, cuda_graphs: bool) -> None:
        """Takes ``engine`` (deserialized) and ``stream``: the I/O plan, the shared activation memory (allocated
        on the stream) and empty context, buffer and ring tables. Contexts are created on first use."""
        import torch

        self._trt, self.engine, self.stream = trt, engine, stream
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.plan = plan_bindings(self.metadata, inputs, [n for n in names if n not in inputs])
        self._decode_profile = next(i for i, p in enumerate(self.profiles) if p.name == DECODE)
        with self._on_stream():
            size = max(1, int(engine.device_memory_size_v2))
            self._memory = torch.empty(size, dtype=torch.uint8, device=self._torch_device)
        self._contexts: dict[int, Any] = {}  # profile -> the eager context fixed on it
        self._pool: dict[tuple[str, int], list[Any]] = {}
        self._cuda_graphs = cuda_graphs and not any(s.grows for s in self.state_specs)
        self._rings: dict[int, PingPong] = {}  # batch -> the decode ring's plan
        self._ring_buffers: dict[int, dict[str, Any]] = {}  # batch -> buffer name (<state>#0 / #1) -> storage
        self._ring_contexts: dict[tuple[Any, ...], RingContext] = {}  # (batch, input shapes, ping | pong)
        # One device buffer per data tensor of the eager contexts, grown on demand.
        self._buffers: dict[str, Any] = {}

    def _on_stream(self) -> Any:
        """``torch.cuda.stream(self.stream)``: what runs inside is ordered on the backend's stream."""
        import torch

        return torch.cuda.stream(self.stream)

    # -- contexts ------------------------------------------------------------------------------------

    def _new_context(self, profile: int) -> Any:
        """An execution context on the shared activation memory, fixed on ``profile`` (set once, here)."""
        ctx = self.engine.create_execution_context(self._trt.ExecutionContextAllocationStrategy.USER_MANAGED)
        if ctx is None:
            raise RnnxRuntimeError("TensorRT could not create an execution context (see the TensorRT log)")
        ctx.set_device_memory(self._memory.data_ptr(), self._memory.numel())
        if not ctx.set_optimization_profile_async(profile, self.stream.cuda_stream):
            raise RnnxRuntimeError(f"TensorRT refused optimization profile {profile} ({self.profiles[profile].name})")
        return ctx

    def _eager_context(self, profile: int) -> Any:
        ctx = self._contexts.get(profile)
        if ctx is None:
            ctx = self._contexts[profile] = self._new_context(profile)
        return ctx

    def _ring_context(self, batch: int, shapes: tuple[Any, ...], step: StepPlan, state: BackendState) -> RingContext:
        """The ring context of ``step.graph`` for this batch and these input shapes: created and bound (its data
        buffers, the set it reads, the set it writes) on first use, and never rebound."""
        import torch

        key = (batch, shapes, step.graph)
        ring = self._ring_contexts.get(key)
        if ring is not None:
            return ring
        ctx = self._new_context(self._decode_profile)
        data: dict[str, Any] = {}
        for spec, shape in zip(self.inputs, shapes):
            data[spec.name] = torch.empty(shape, dtype=_torch_dtype(spec.dtype), device=self._torch_device)
            ctx.set_input_shape(spec.name, shape)
            ctx.set_tensor_address(spec.name, data[spec.name].data_ptr())
        reads, writes = self._ring_storages(batch, step.read), self._ring_storages(batch, step.write)
        for spec in self.state_specs:
            ctx.set_input_shape(spec.input, tuple(state.tensors[spec.name].shape))
            ctx.set_tensor_address(spec.input, reads[spec.name].data_ptr())
            ctx.set_tensor_address(spec.output, writes[spec.name].data_ptr())
        for spec in self.outputs:
            shape = tuple(int(d) for d in ctx.get_tensor_shape(spec.name))
            data[spec.name] = torch.empty(shape, dtype=_torch_dtype(spec.dtype), device=self._torch_device)
            ctx.set_tensor_address(spec.name, data[spec.name].data_ptr())
        ring = self._ring_contexts[key] = RingContext(ctx, data, {n: t.data_ptr() for n, t in reads.items()})
        return ring

    # -- data buffers ----------------------------------------------------------------------------

    def _buffer(self, name: str, shape: tuple[int, ...], dtype: str) -> Any:
        """A device tensor of ``shape`` viewing the eager data buffer of ``name`` (grown when too small)."""
        import torch

        numel = int(np.prod(shape, dtype=np.int64))
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < numel:
            buf = torch.empty(max(1, numel), dtype=_torch_dtype(dtype), device=self._torch_device)
            self._buffers[name] = buf
        return buf[:numel].view(shape)

    # -- state buffers ---------------------------------------------------------------------------

    def _capacity(self, spec: StateSpec, batch: int) -> int:
        shape = spec.concrete_shape(batch, int(self.limits.max_context or 0) if spec.grows else 0)
        return max(1, int(np.prod(shape, dtype=np.int64)))

    def _storage(self, spec: StateSpec, batch: int) -> Any:
        """A state buffer from the pool, or a new one (allocated on the backend's stream: call under it)."""
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
        with self._on_stream():
            storages = {s.name: self._storage(s, batch).zero_() for s in self.state_specs}
        return self._state(storages, batch, 0)

    def run(
        self, inputs: dict[str, np.ndarray], state: BackendState, donate: bool = False
    ) -> tuple[dict[str, np.ndarray], BackendState]:
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
        arrays = {t.name: np.ascontiguousarray(inputs[t.name]) for t in self.inputs}
        try:
            profile = select_profile(self.profiles, {name: a.shape for name, a in arrays.items()})
        except ProfileError as e:
            raise InputError(str(e)) from None
        self._check_live(state)
        shapes = tuple(arrays[t.name].shape for t in self.inputs)
        step = self._plan(batch, shapes, length, donate, state)
        with self._on_stream():
            if step.graph is not None:
                outputs, storages = self._run_ring(step, arrays, state, batch, shapes)
            else:
                outputs, storages = self._run_eager(profile, step, arrays, state, batch)
        self.stream.synchronize()
        host = {n: _to_host(t) for n, t in outputs.items()}  # copies: the next call reuses these buffers
        return host, self._finish(step, state, storages, batch, new_past, donate)

    def _plan(self, batch: int, shapes: tuple[Any, ...], length: int, donate: bool, state: BackendState) -> StepPlan:
        """The ring's plan for this call (:meth:`PingPong.plan`): which set it reads and writes, and whether it
        replays, captures or runs eagerly."""
        ring = self._rings.setdefault(batch, PingPong())
        captured = [g for g in GRAPH_READING if getattr(self._ring_contexts.get((batch, shapes, g)), "graph", None)]
        batches = {key[:2] for key in self._ring_contexts}
        can_capture = (batch, shapes) in batches or len(batches) < MAX_GRAPH_BATCHES
        return ring.plan(
            donate=donate, decode=length <= 1, graphs=self._cuda_graphs, ticket=state.extra.get("ring"),
            captured=captured, can_capture=can_capture,
        )  # fmt: skip

    def _run_eager(
        self, profile: int, step: StepPlan, arrays: dict[str, np.ndarray], state: BackendState, batch: int
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One call on the eager context of ``profile``, bound for it now; its outputs' state goes to pool
        buffers, or to the ring set the plan writes."""
        import torch

        ctx = self._eager_context(profile)
        for spec in self.inputs:
            value = arrays[spec.name]
            buf = self._buffer(spec.name, value.shape, spec.dtype)
            buf.copy_(torch.from_numpy(value))
            ctx.set_input_shape(spec.name, value.shape)
            ctx.set_tensor_address(spec.name, buf.data_ptr())
        for spec in self.state_specs:
            ctx.set_input_shape(spec.input, tuple(state.tensors[spec.name].shape))
        outputs = {}
        for spec in self.outputs:  # every input shape is set: TensorRT knows the output shapes
            shape = tuple(int(d) for d in ctx.get_tensor_shape(spec.name))
            outputs[spec.name] = self._buffer(spec.name, shape, spec.dtype)
            ctx.set_tensor_address(spec.name, outputs[spec.name].data_ptr())
        if step.write is None:
            storages = {s.name: self._storage(s, batch) for s in self.state_specs}
        else:
            storages = self._ring_storages(batch, step.write)
        for spec in self.state_specs:
            past, present = state.tensors[spec.name].data_ptr(), storages[spec.name].data_ptr()
            if past == present:
                raise RnnxRuntimeError(f"state {spec.name!r}: input and output bound to one buffer ({step})")
            ctx.set_tensor_address(spec.input, past)
            ctx.set_tensor_address(spec.output, present)
        if not ctx.execute_async_v3(self.stream.cuda_stream):
            raise RnnxRuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        return outputs, storages

    def _run_ring(
        self, step: StepPlan, arrays: dict[str, np.ndarray], state: BackendState, batch: int, shapes: tuple[Any, ...]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One decode step on its ring context: the inputs copied into the context's own buffers, then its
        graph replayed; or, for :data:`CAPTURE`, the context run eagerly (TensorRT needs one enqueue with
        these bindings before a capture; it gives this call's outputs) and its graph captured."""
        import torch

        ring = self._ring_context(batch, shapes, step, state)
        for spec in self.state_specs:
            if state.tensors[spec.name].data_ptr() != ring.reads[spec.name]:
                raise RnnxRuntimeError(f"state {spec.name!r} is not in the ring set its graph reads ({step})")
        for spec in self.inputs:
            ring.data[spec.name].copy_(torch.from_numpy(arrays[spec.name]))
        if step.mode == REPLAY and ring.graph is not None:
            ring.graph.replay()
        else:
            if not ring.context.execute_async_v3(self.stream.cuda_stream):
                raise RnnxRuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
            if step.mode == CAPTURE:
                self._capture(ring)
        return {spec.name: ring.data[spec.name] for spec in self.outputs}, self._ring_storages(batch, step.write)

    def _capture(self, ring: RingContext) -> None:
        """Captures the ring context's enqueue into its CUDA graph (``thread_local`` mode: CUDA calls of other
        threads meanwhile do not invalidate it); a failed capture turns graphs off for this backend."""
        import torch

        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                ok = ring.context.execute_async_v3(self.stream.cuda_stream)
        except RuntimeError:
            ok = False
        ring.captures += 1
        if ok:
            ring.graph = graph
        else:
            self._cuda_graphs = False  # capture unsupported here: stay eager

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

    def copy_state(self, state: BackendState) -> BackendState:
        """A copy in pool buffers (never a ring set), so donating either one leaves the other intact; the copy
        runs on the backend's stream, after whatever wrote ``state``."""
        self._check_live(state)
        storages = {}
        with self._on_stream():
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
        with self._on_stream():
            for spec in self.state_specs:
                storage = self._storage(spec, batch)
                flat = torch.from_numpy(np.ascontiguousarray(arrays[spec.name])).reshape(-1)
                storage[: flat.numel()].copy_(flat)
                storages[spec.name] = storage
        return self._state(storages, batch, past)

    def close(self) -> None:
        """Drops the graphs and contexts before the activation memory they use, then the buffers."""
        self._ring_contexts.clear()
        self._contexts.clear()
        self._pool.clear()
        self._rings.clear()
        self._ring_buffers.clear()
        self._buffers.clear()
        self._memory = None
        self.engine = None
