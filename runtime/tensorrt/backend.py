"""The TensorRT backend: an rnnx export run through a TensorRT engine, state kept on the GPU.

* The engine comes from :func:`rnnx.runtime.tensorrt.build_engine` (cached), with a decode and a
  prefill optimization profile (:mod:`rnnx.runtime.tensorrt.profiles`); a one-token call uses the
  decode profile. An engine given by path (``engine_path=``, built elsewhere) is checked when it is
  opened (:func:`check_engine_profiles`): profile 0 must cover the decode ranges and 1 the prefill ones,
  else one line names the engine and what its profiles hold.
* The plugin library goes through :func:`rnnx.runtime.tensorrt.load_plugin_library` (the builder's loader,
  which refuses a library of another TensorRT major first), and the backend uses the process's one
  ``trt.Logger`` (:func:`rnnx.runtime.tensorrt._trt.tensorrt_logger`).
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
  ``thread_local`` capture mode (CUDA API calls of other threads do not invalidate it). Rings exist for at
  most :data:`MAX_GRAPH_BATCHES` batch sizes, the least recently used idle one making room, and pooled
  state buffers for :data:`MAX_POOL_BATCHES`, so a scheduler's changing batch sizes keep memory bounded. A
  ring context that cannot be set up or captured turns graphs off for its batch size (logged once) and
  that call, and the later ones, run eagerly.
* **One call at a time.** A lock serializes the backend's calls (sessions on several threads may share
  it): the contexts' bindings, the shared activation memory and the output buffers belong to one call.
  States carry their backend's token: a state of another TensorRT backend (another engine, GPU or
  instance) is refused, never read without ordering or recycled into this pool.

NOT RUN IN CI: this machine has no GPU and no TensorRT. Written against the documented TensorRT 10 Python API,
in the part TensorRT 11 keeps (``deserialize_cuda_engine``, ``create_execution_context(strategy)``,
``device_memory_size_v2``, ``set_device_memory``, ``num_io_tensors`` / ``get_tensor_name`` /
``get_tensor_mode``, ``set_optimization_profile_async``, ``set_input_shape``, ``set_tensor_address``,
``get_tensor_shape``, ``execute_async_v3``, ``num_optimization_profiles`` / ``get_tensor_profile_shape``) and
``torch.cuda.graph``; the context, state and graph logic runs on CPU against labelled stand-ins in
tests/test_runtime_donation.py; tests marked ``tensorrt`` exercise it where TensorRT is installed.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from pathlib import Path
from typing import Any, Optional, TypeVar, Union

import numpy as np

from ..backends.base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError
from ..contract.artifact import MetadataError, StateSpec, read_metadata, state_specs
from ._trt import TensorRTNotInstalled, require_tensorrt, tensorrt_logger
from .bindings import plan_bindings
from .builder import build_engine, default_plugin_library, load_plugin_library, required_creators
from .graphs import CAPTURE, GRAPH_READING, REPLAY, PingPong, StaleState, StepPlan
from .profiles import DECODE, Profile, ProfileError, ProfileLimits, build_profiles, select_profile

_TORCH_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
                 "int64": "int64", "int32": "int32", "bool": "bool", "uint8": "uint8", "int8": "int8"}  # fmt: skip
#: Decode rings (two state sets, two contexts, two graphs each) for at most this many batch sizes, least
#: recently used first out (a ring whose state is live stays).
MAX_GRAPH_BATCHES = 4
#: Pooled state buffers are kept for at most this many batch sizes (least recently used first out).
MAX_POOL_BATCHES = 4

_logger = logging.getLogger("rnnx.runtime")
_F = TypeVar("_F", bound=Callable[..., Any])


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, _TORCH_DTYPES[name])


def _to_host(tensor: Any) -> np.ndarray:
    """A host copy (floats as float32) of a device output buffer."""
    import torch

    dtype = torch.float32 if tensor.is_floating_point() else tensor.dtype
    return tensor.to("cpu", dtype=dtype, copy=True).numpy()


def check_engine_profiles(engine: Any, profiles: list[Profile], engine_name: str) -> None:
    """RnnxRuntimeError (one line) unless optimization profile ``i`` of ``engine`` covers ``profiles[i]`` for every
    input (``engine.get_tensor_profile_shape(name, i)`` -> min / opt / max; covered: the engine's min <= ours and
    its max >= ours, per dimension): profile 0 = decode, 1 = prefill, as :func:`build_engine` builds them. An
    engine built elsewhere with its profiles in another order, or for smaller limits, would otherwise fail on
    its first call (or run every call on the wrong profile)."""
    count = int(engine.num_optimization_profiles)
    order = ", ".join(f"{i} = {p.name}" for i, p in enumerate(profiles))
    if count < len(profiles):
        raise RnnxRuntimeError(
            f"{engine_name}: the engine has {count} optimization profile(s); rnnx needs {len(profiles)} ({order}): "
            "build it with rnnx.runtime.tensorrt.build_engine"
        )

    def shown(name: str, low: Any, high: Any) -> str:
        return f"{name} {list(low)}..{list(high)}"

    for index, profile in enumerate(profiles):
        for name, want in profile.shapes.items():
            got = [tuple(int(d) for d in dims) for dims in engine.get_tensor_profile_shape(name, index)]
            low, high = got[0], got[-1]
            covered = len(low) == len(want.min) == len(high) and all(
                lo <= w_lo and hi >= w_hi for lo, hi, w_lo, w_hi in zip(low, high, want.min, want.max)
            )
            if not covered:
                raise RnnxRuntimeError(
                    f"{engine_name}: optimization profile {index} should be {profile.name} "
                    f"({shown(name, want.min, want.max)}) but holds {shown(name, low, high)}; rnnx needs profiles "
                    f"{order} for these limits: build the engine with rnnx.runtime.tensorrt.build_engine"
                )


def _locked(method: _F) -> _F:
    """Runs ``method`` under the backend's lock, after checking it is not closed: one call at a time binds
    the contexts, uses the shared activation memory and the output buffers, and enqueues on the stream."""

    @wraps(method)
    def call(self: TensorRTBackend, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self.engine is None:
                raise RnnxRuntimeError("this TensorRT backend is closed")
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]


@dataclass
class RingContext:
    """An execution context of a decode ring, bound once at creation and never again: its own data buffers
    (``data``: every input and output tensor, device tensors of the shapes it was bound with) and the state
    set it reads (``reads``: state name -> address) and writes. Its CUDA graph, once captured, replays
    exactly these bindings."""

    context: Any
    data: dict[str, Any]
    reads: dict[str, int]
    graph: Any = None
    captures: int = field(default=0)


@dataclass
class DecodeRing:
    """The decode ring of one batch size: the plan (:class:`PingPong`), its two state sets (parity -> state
    name -> storage), the input shapes its contexts are bound for, and its ``ping`` / ``pong`` contexts.
    ``disabled``: a ring context could not be set up or captured here; the batch size then runs eagerly."""

    plan: PingPong = field(default_factory=PingPong)
    sets: dict[int, dict[str, Any]] = field(default_factory=dict)
    shapes: Optional[tuple[Any, ...]] = None
    contexts: dict[str, RingContext] = field(default_factory=dict)
    disabled: bool = False


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
        self._logger = tensorrt_logger(trt)  # the process's one logger, the builder's too
        if plugin is not None and self.metadata["ops"]:
            # The same loader as build_engine's: a no-op when it already loaded this library in this process.
            load_plugin_library(trt, plugin, required_creators(self.metadata))
        self._runtime = trt.Runtime(self._logger)
        with torch.cuda.device(self._torch_device):  # engine, memory and contexts on this backend's GPU
            engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
            if engine is None:
                raise RnnxRuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
            self._attach(trt, engine, torch.cuda.Stream(device=self._torch_device), cuda_graphs)
            check_engine_profiles(engine, self.profiles, str(engine_path))

    def _describe_model(self, metadata: dict[str, Any], device: str, limits: Optional[ProfileLimits]) -> None:
        """What the backend knows before TensorRT: the export, its state, the engine's limits and profiles."""
        import torch

        self.metadata = metadata
        self.device = device
        self._torch_device = torch.device(device)
        self.state_specs = state_specs(metadata)
        self.vocab_size = metadata.get("vocab_size")
        self.limits = (limits or ProfileLimits()).resolved()
        self.max_call_length = int(self.limits.max_length)
        self.profiles = build_profiles(metadata, self.limits)

    def _attach(self, trt: Any, engine: Any, stream: Any, cuda_graphs: bool) -> None:
        """Takes ``engine`` (deserialized) and ``stream``: checks the engine's I/O against the export, then the
        I/O plan, the shared activation memory (allocated on the stream) and empty context, buffer and ring
        tables. Contexts are created on first use."""
        import torch

        self._trt, self.engine, self.stream = trt, engine, stream
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.plan = plan_bindings(self.metadata, inputs, [n for n in names if n not in inputs])
        self._check_engine_dtypes(trt, engine)
        self._decode_profile = next(i for i, p in enumerate(self.profiles) if p.name == DECODE)
        with self._on_stream():
            size = max(1, int(engine.device_memory_size_v2))
            self._memory = torch.empty(size, dtype=torch.uint8, device=self._torch_device)
        self._lock = threading.RLock()
        self._owner = object()  # the token a state of this backend carries (extra["owner"])
        self._contexts: dict[int, Any] = {}  # profile -> the eager context fixed on it
        self._pool: OrderedDict[int, dict[str, list[Any]]] = OrderedDict()  # batch -> state name -> free storages
        self._cuda_graphs = cuda_graphs and not any(s.grows for s in self.state_specs)
        self._rings: OrderedDict[int, DecodeRing] = OrderedDict()  # batch -> its decode ring, LRU order
        # One device buffer per data tensor of the eager contexts, grown on demand.
        self._buffers: dict[str, Any] = {}

    def _check_engine_dtypes(self, trt: Any, engine: Any) -> None:
        """RnnxRuntimeError unless every engine I/O tensor has the dtype the export's metadata gives it (the
        buffers are sized and read by the metadata's dtypes)."""
        expected = {t.name: t.dtype for t in [*self.inputs, *self.outputs]}
        expected.update({s.input: s.dtype for s in self.state_specs})
        expected.update({s.output: s.dtype for s in self.state_specs})
        for name, dtype in expected.items():
            got = engine.get_tensor_dtype(name)
            try:
                got_name = np.dtype(trt.nptype(got)).name
            except (TypeError, KeyError, ValueError):  # a TensorRT type numpy lacks (bf16): by its enum name
                got_name = "bfloat16" if str(got).upper().endswith("BF16") else str(got)
            if got_name != dtype:
                raise RnnxRuntimeError(f"engine tensor {name!r} is {got_name} but the export says {dtype}; rebuild it")

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
        try:  # the Python API raises where the C++ API returns false
            ok = ctx.set_optimization_profile_async(profile, self.stream.cuda_stream)
        except RuntimeError:
            ok = False
        if not ok:
            raise RnnxRuntimeError(f"TensorRT refused optimization profile {profile} ({self.profiles[profile].name})")
        return ctx

    def _eager_context(self, profile: int) -> Any:
        ctx = self._contexts.get(profile)
        if ctx is None:
            ctx = self._contexts[profile] = self._new_context(profile)
        return ctx

    @staticmethod
    def _bind(ctx: Any, name: str, address: int, shape: Optional[tuple[int, ...]] = None) -> None:
        """Sets an I/O tensor's shape (inputs) and address; InputError / RnnxRuntimeError when TensorRT refuses."""
        if shape is not None and not ctx.set_input_shape(name, shape):
            raise InputError(f"input {name!r}: TensorRT refused shape {list(shape)} (outside the engine's profile)")
        if not ctx.set_tensor_address(name, address):
            raise RnnxRuntimeError(f"tensor {name!r}: TensorRT refused its address")

    def _ring_context(self, ring: DecodeRing, batch: int, step: StepPlan, state: BackendState) -> RingContext:
        """The ring context of ``step.graph``: created and bound (its own data buffers for the ring's input
        shapes, the set it reads, the set it writes) on first use, and never rebound."""
        import torch

        found = ring.contexts.get(step.graph)
        if found is not None:
            return found
        ctx = self._new_context(self._decode_profile)
        data: dict[str, Any] = {}
        for spec, shape in zip(self.inputs, ring.shapes):
            data[spec.name] = torch.empty(shape, dtype=_torch_dtype(spec.dtype), device=self._torch_device)
            self._bind(ctx, spec.name, data[spec.name].data_ptr(), shape)
        reads, writes = self._ring_set(ring, batch, step.read), self._ring_set(ring, batch, step.write)
        for spec in self.state_specs:
            self._bind(ctx, spec.input, reads[spec.name].data_ptr(), tuple(state.tensors[spec.name].shape))
            self._bind(ctx, spec.output, writes[spec.name].data_ptr())
        for spec in self.outputs:
            shape = tuple(int(d) for d in ctx.get_tensor_shape(spec.name))
            data[spec.name] = torch.empty(shape, dtype=_torch_dtype(spec.dtype), device=self._torch_device)
            self._bind(ctx, spec.name, data[spec.name].data_ptr())
        ring.contexts[step.graph] = RingContext(ctx, data, {n: t.data_ptr() for n, t in reads.items()})
        return ring.contexts[step.graph]

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

        free = self._pool.get(batch, {}).get(spec.name)
        if free:
            return free.pop()
        return torch.empty(self._capacity(spec, batch), dtype=_torch_dtype(spec.dtype), device=self._torch_device)

    def _recycle(self, state: BackendState) -> None:
        """A donated state's own buffers back to the pool (at most two per tensor, each once; never a ring
        set's); the pool keeps the :data:`MAX_POOL_BATCHES` batch sizes used last."""
        ring = self._rings.get(state.batch)
        ring_ids = {id(t) for s in ring.sets.values() for t in s.values()} if ring is not None else set()
        pool = self._pool.setdefault(state.batch, {})
        self._pool.move_to_end(state.batch)
        for name, storage in state.extra.get("storage", {}).items():
            free = pool.setdefault(name, [])
            if len(free) < 2 and id(storage) not in ring_ids and all(storage is not f for f in free):
                free.append(storage)
        while len(self._pool) > MAX_POOL_BATCHES:
            self._pool.popitem(last=False)

    def _ring_set(self, ring: DecodeRing, batch: int, parity: int) -> dict[str, Any]:
        """State name -> storage of ``ring``'s set ``parity`` (0 = A, 1 = B), allocated once (call under the
        stream)."""
        if parity not in ring.sets:
            ring.sets[parity] = {spec.name: self._storage(spec, batch) for spec in self.state_specs}
        return ring.sets[parity]

    def _ring_for(self, batch: int, shapes: tuple[Any, ...]) -> Optional[DecodeRing]:
        """The decode ring of ``batch`` for a one-step call with these input shapes, made (evicting the least
        recently used ring whose state is not live) when there is room; None when the call cannot use one."""
        ring = self._rings.get(batch)
        if ring is None:
            if len(self._rings) >= MAX_GRAPH_BATCHES:
                idle = next((b for b, r in self._rings.items() if not r.plan.busy), None)
                if idle is None:
                    return None
                self._rings.pop(idle)  # its contexts, graphs and state sets go with it
            ring = self._rings[batch] = DecodeRing(shapes=shapes)
        self._rings.move_to_end(batch)
        if ring.disabled or ring.shapes != shapes:
            return None
        return ring

    def _check_live(self, state: BackendState) -> None:
        if state.extra.get("owner") is not self._owner:
            raise InputError(
                "state: it belongs to another TensorRT backend (another engine, GPU or instance); "
                "move it with state_to_host / state_from_host"
            )
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
        extra = {"storage": storages, "owner": self._owner}
        return BackendState(tensors, batch, past_length, self.name, self.signature, extra)

    def _check_batch(self, batch: int) -> None:
        if not 1 <= batch <= self.limits.max_batch:
            raise InputError(f"batch {batch} is outside the engine's range 1..{self.limits.max_batch}")

    # -- Backend API ------------------------------------------------------------------------------

    @_locked
    def init_state(self, batch: int) -> BackendState:
        self._check_batch(batch)
        with self._on_stream():
            storages = {s.name: self._storage(s, batch).zero_() for s in self.state_specs}
        return self._state(storages, batch, 0)

    @_locked
    def run(
        self, inputs: dict[str, np.ndarray], state: BackendState, donate: bool = False
    ) -> tuple[dict[str, np.ndarray], BackendState]:
        batch, length = self.batch_of(inputs), self.call_length(inputs)
        self._check_batch(batch)
        self._check_live(state)
        if state.batch != batch:
            raise InputError(f"inputs have batch {batch} but the state has {state.batch} rows")
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
        shapes = tuple(arrays[t.name].shape for t in self.inputs)
        ticket = state.extra.get("ring")
        holder = ticket.ring if ticket is not None else None
        ring = self._ring_for(batch, shapes) if self._cuda_graphs and donate and length <= 1 else None
        plan = ring.plan if ring is not None else next((r.plan for r in self._rings.values() if r.plan is holder),
                                                         PingPong())  # fmt: skip
        captured = [g for g in GRAPH_READING if ring is not None and getattr(ring.contexts.get(g), "graph", None)]
        step = plan.plan(
            donate=donate, decode=length <= 1, graphs=ring is not None, ticket=ticket, captured=captured,
        )  # fmt: skip
        with self._on_stream():
            outputs, storages = None, None
            if step.graph is not None:
                outputs, storages = self._run_ring(ring, step, arrays, state, batch)
            if outputs is None:
                outputs, storages = self._run_eager(profile, step, arrays, state, batch, ring)
        self.stream.synchronize()
        host = {n: _to_host(t) for n, t in outputs.items()}  # copies: the next call reuses these buffers
        return host, self._finish(plan, step, state, storages, batch, new_past, donate)

    def _run_eager(
        self, profile: int, step: StepPlan, arrays: dict[str, np.ndarray], state: BackendState, batch: int,
        ring: Optional[DecodeRing],
    ) -> tuple[dict[str, Any], dict[str, Any]]:  # fmt: skip
        """One call on the eager context of ``profile``, bound for it now; its outputs' state goes to pool
        buffers, or to the ring set the plan writes."""
        import torch

        ctx = self._eager_context(profile)
        for spec in self.inputs:
            value = arrays[spec.name]
            buf = self._buffer(spec.name, value.shape, spec.dtype)
            buf.copy_(torch.from_numpy(value))
            self._bind(ctx, spec.name, buf.data_ptr(), value.shape)
        for spec in self.state_specs:
            if not ctx.set_input_shape(spec.input, tuple(state.tensors[spec.name].shape)):
                raise InputError(f"state {spec.name!r}: TensorRT refused shape {list(state.tensors[spec.name].shape)}")
        outputs = {}
        for spec in self.outputs:  # every input shape is set: TensorRT knows the output shapes
            shape = tuple(int(d) for d in ctx.get_tensor_shape(spec.name))
            outputs[spec.name] = self._buffer(spec.name, shape, spec.dtype)
            self._bind(ctx, spec.name, outputs[spec.name].data_ptr())
        if step.write is None:
            storages = {s.name: self._storage(s, batch) for s in self.state_specs}
        else:
            storages = self._ring_set(ring, batch, step.write)
        for spec in self.state_specs:
            past, present = state.tensors[spec.name].data_ptr(), storages[spec.name].data_ptr()
            if past == present:
                raise RnnxRuntimeError(f"state {spec.name!r}: input and output bound to one buffer ({step})")
            self._bind(ctx, spec.input, past)
            self._bind(ctx, spec.output, present)
        if not ctx.execute_async_v3(self.stream.cuda_stream):
            raise RnnxRuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
        return outputs, storages

    def _run_ring(
        self, ring: DecodeRing, step: StepPlan, arrays: dict[str, np.ndarray], state: BackendState, batch: int
    ) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]]]:
        """One decode step on its ring context: the inputs copied into the context's own buffers, then its
        graph replayed; or, for :data:`CAPTURE`, the context run eagerly (TensorRT needs one enqueue with
        these bindings before a capture; it gives this call's outputs) and its graph captured. When the ring
        context cannot be set up or run, the ring is disabled (with a warning) and (None, None) says to run
        the call eagerly instead."""
        import torch

        try:
            context = self._ring_context(ring, batch, step, state)
            for spec in self.state_specs:
                if state.tensors[spec.name].data_ptr() != context.reads[spec.name]:
                    raise RnnxRuntimeError(f"state {spec.name!r} is not in the ring set its graph reads ({step})")
            for spec in self.inputs:
                context.data[spec.name].copy_(torch.from_numpy(arrays[spec.name]))
            if step.mode == REPLAY and context.graph is not None:
                context.graph.replay()
            else:
                if not context.context.execute_async_v3(self.stream.cuda_stream):
                    raise RnnxRuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log)")
                if step.mode == CAPTURE:
                    self._capture(context)
        except (RnnxRuntimeError, RuntimeError) as error:
            self._disable(ring, batch, error)
            return None, None
        return {spec.name: context.data[spec.name] for spec in self.outputs}, self._ring_set(ring, batch, step.write)

    def _capture(self, context: RingContext) -> None:
        """Captures the ring context's enqueue into its CUDA graph, in ``thread_local`` capture mode (CUDA API
        calls that other threads make meanwhile neither join nor invalidate it; work enqueued on this stream
        by anyone is what the backend's lock excludes). ``capture_begin`` / ``capture_end`` directly: no
        device-wide synchronize, gc or cache flush per capture. RuntimeError when the capture fails."""
        import torch

        graph = torch.cuda.CUDAGraph()
        self.stream.synchronize()  # the eager enqueue that preceded it has finished, as trtexec does
        context.captures += 1
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            ok = context.context.execute_async_v3(self.stream.cuda_stream)
        finally:
            graph.capture_end()
        if not ok:
            raise RnnxRuntimeError("TensorRT execute_async_v3 failed while capturing a CUDA graph")
        context.graph = graph

    def _disable(self, ring: DecodeRing, batch: int, error: BaseException) -> None:
        """Turns CUDA graphs off for ``batch`` after ``error`` (logged once), dropping its ring contexts and
        graphs once the stream has finished what they enqueued (a context must outlive its work in flight)."""
        ring.disabled = True
        self.stream.synchronize()
        for context in ring.contexts.values():
            context.graph = None
        ring.contexts.clear()
        _logger.warning("rnnx: TensorRT CUDA graphs off for batch %d, the calls stay eager: %s", batch, error)

    def _finish(
        self, plan: PingPong, step: StepPlan, state: BackendState, storages: dict[str, Any], batch: int, past: int,
        donate: bool,
    ) -> BackendState:  # fmt: skip
        """After the call: recycles / marks the donated input state and records the ring's new holder."""
        if step.recycle:
            self._recycle(state)
        if donate:
            state.extra["donated"] = True
        new = self._state(storages, batch, past)
        ticket = plan.commit(step, new)
        if ticket is not None:
            new.extra["ring"] = ticket
        return new

    @_locked
    def copy_state(self, state: BackendState) -> BackendState:
        """A copy in pool buffers (never a ring set), so donating either one leaves the other intact; the copy
        (of the live prefix) runs on the backend's stream, after whatever wrote ``state``."""
        self._check_live(state)
        storages = {}
        with self._on_stream():
            for spec in self.state_specs:
                storage = self._storage(spec, state.batch)
                n = state.tensors[spec.name].numel()
                storage[:n].copy_(state.extra["storage"][spec.name][:n])
                storages[spec.name] = storage
        return self._state(storages, state.batch, state.past_length)

    @_locked
    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        self._check_live(state)
        self.stream.synchronize()
        return {s.name: state.tensors[s.name].cpu().numpy() for s in self.state_specs}

    @_locked
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
        """Waits for the stream, then drops the graphs, the contexts, the activation memory they use and the
        buffers; later calls raise. Idempotent."""
        with self._lock:
            if self.engine is None:
                return
            self.stream.synchronize()
            for ring in self._rings.values():
                for context in ring.contexts.values():
                    context.graph = None
                ring.contexts.clear()
            self._rings.clear()
            self._contexts.clear()
            self._pool.clear()
            self._buffers.clear()
            self._memory = None
            self.engine = None
