"""The ONNX Runtime backend: an export directory (``rnnx.json`` + ``model.onnx``) on the CPU EP or the
CUDA EP, run either with plain ``InferenceSession.run`` or with IO binding (``io_binding``).

Unbound (``io_binding=False``, the default on CPU): state tensors are numpy arrays fed to
``InferenceSession.run``, which returns the present state as fresh numpy arrays (allowed on CUDA too,
where the state then crosses host <-> device on every call).

Bound (``io_binding=True``, the default on CUDA): state tensors are ``OrtValue`` s on the backend's
device, ``("cuda", N)`` or ``("cpu", 0)``. Every call binds the past OrtValues as inputs and lets ORT
allocate the present outputs on that same device (``bind_output(name, device_type, device_id)``), so
the state never leaves the device between steps; only input_ids / attention_mask go in from the host
and the logits come back to it. There is one bound code path for both devices: on the CPU it runs the
exact binding and state plumbing that the CUDA EP runs, which is how CI without a GPU covers it.

A state records where its tensors live; :meth:`OrtBackend.run` rejects a state of another onnxruntime
backend of the same model that keeps them elsewhere (move it with ``to_host`` / ``import_state``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TypedDict, Union

import numpy as np

from ..contract.artifact import numpy_dtype, ort_session_config, read_metadata, state_specs
from .base import Backend, BackendState, BackendUnavailable, InputError, axis_size, check_keywords

if sys.version_info >= (3, 11):  # at run time too, so typing.get_type_hints resolves the options
    from typing import Unpack
elif TYPE_CHECKING:
    from typing_extensions import Unpack


def _device_id(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0


_FLOAT32 = np.dtype(np.float32)

#: ``threads=None`` runs an export whose weights (graph plus external data) are smaller than this on one
#: intra-op thread on the CPU, and a larger one on ONNX Runtime's default pool: see "Threads" in
#: docs/onnxruntime.md for the measurements behind the number.
ONE_THREAD_BELOW_BYTES = 32 << 20

#: ``threads=None`` on the CPU for a small export (one intra-op thread): a call of at least this many tokens
#: (batch rows x sequence length) runs on a second session on ONNX Runtime's default pool. Measured on the two
#: demos (2-core Xeon, onnxruntime 1.32, benchmarks/bench_ort_prefill_threads.py, docs/benchmarks.md 2026-11-27):
#: on idle cores the pool runs a call 1.4-1.6x faster than one thread from 64 tokens and 1.8-1.9x from 1,024
#: (srupp_linear_copy 4,096 tokens: 72.8 against 38.7 ms; 4 x 256 and 8 x 128 like 1 x 1,024, hence tokens, not
#: length), while with one busy process beside it the pool runs 0.55-1.07x as fast at every length. Below 1,024
#: tokens the pool saves at most 3-4 ms a call, against its one-time open (10-50 ms) and the same risk under load;
#: from 1,024 a call saves 5-7 ms and more, and a 4,096-token prompt 34 ms, more than the open. Batched decode
#: steps (one token per row) of up to 1,023 rows stay on one thread.
POOL_FROM_TOKENS = 1024


class OrtOptions(TypedDict, total=False):
    """The keyword options of :class:`OrtBackend` (documented there), the ones only the onnxruntime backend takes:
    :func:`rnnx.runtime.load` and :func:`~rnnx.runtime.backends.create_backend` pass them on (and refuse them for
    another backend). Each may be None, the default: the backend chooses."""

    io_binding: Optional[bool]
    native_ops: Optional[bool]
    threads: Optional[int]


def _host_output(value: Any) -> np.ndarray:
    """A data output as the backend returns it: a floating one as fp32 (no copy when it already is), any other
    as a numpy array."""
    if type(value) is np.ndarray and (value.dtype is _FLOAT32 or value.dtype == _FLOAT32):
        return value
    value = np.asarray(value)
    return value.astype(np.float32) if np.issubdtype(value.dtype, np.floating) else value


class OrtBackend(Backend):
    """``model_dir`` on ONNX Runtime. ``device``: ``"cpu"`` or ``"cuda[:N]"``; ``precision`` must be
    None or the export's precision (an ONNX file has one).

    ``threads``: ONNX Runtime's intra-op threads. None (default): on the CPU, one thread for an export whose
    weights (:meth:`weight_bytes`) are under :data:`ONE_THREAD_BELOW_BYTES`, ONNX Runtime's default pool (one
    thread per physical core) for a larger one and on CUDA. A pool's operators wait for their slowest thread,
    so when other processes share the cores a small model's step runs 2-3x slower on the pool than on one
    thread, while on idle cores the pool gains it at most about 1.6x (a demo's decode step nothing);
    docs/onnxruntime.md "Threads" has the measurements. 0 asks for ONNX Runtime's pool, N for N threads; the
    resolved count is :attr:`threads` (0: the pool), the count of :attr:`session`.

    Long calls of a small export (``threads=None`` on the CPU): ONNX Runtime cannot change a session's threads
    per call, so a call of :data:`POOL_FROM_TOKENS` tokens or more (batch rows x sequence length: a long
    prefill) runs on a second session, :attr:`pool_session`, on ONNX Runtime's default pool, opened on the
    first such call and kept; the decode step and every shorter call stay on the one-thread :attr:`session`.
    :attr:`pool_from_tokens` is that threshold (None: every call runs on :attr:`session`, as with any explicit
    ``threads``, a large export and CUDA). Both sessions are opened by :meth:`_open_session` (the same config
    entries, op library and providers) and take and return the same state (numpy arrays or CPU OrtValues), so
    a state moves between them freely; they give the same numbers. The second session holds its own copy of
    the weights, under :data:`ONE_THREAD_BELOW_BYTES` by construction, and its own memory arena: measured on
    srupp_linear_copy (1.7 MB of weights) it adds 3.1 MiB of resident memory after its first 4,096-token prefill
    and 6.0 MiB after more calls (to 82 MiB that the process holds above its imports), so the weights are not
    shared: ONNX Runtime shares an initializer only when the caller hands it over as an OrtValue
    (``SessionOptions.add_initializer``), which means reading the weights out of the ONNX file, and this
    runtime never imports onnx.

    ``io_binding``: True runs every call through IO binding with the state as OrtValues on
    ``device``, False through ``InferenceSession.run`` with numpy state, None (default) picks True on
    CUDA and False on CPU (see the module doc). The resolved choice is :attr:`io_binding`. ``native_ops``:
    rnnx's ONNX Runtime op library (native CPU kernels of both ops, :mod:`rnnx.runtime.ortops`): True requires it, False
    runs the ops' function bodies, None (default) uses it on the CPU when it is built and this
    onnxruntime can load it (and, when not, says once in the log how to build it); :attr:`native_ops` says
    whether it is in use."""

    name = "onnxruntime"

    def __init__(
        self,
        model_dir: Union[str, Path],
        device: str = "cpu",
        precision: Optional[str] = None,
        **options: Unpack[OrtOptions],
    ) -> None:
        check_keywords(type(self).__name__, options, OrtOptions.__annotations__)
        io_binding, native_ops, threads = options.get("io_binding"), options.get("native_ops"), options.get("threads")
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable(
                "backend 'onnxruntime' needs the onnxruntime package (pip install onnxruntime)"
            ) from None
        if io_binding is not None and not isinstance(io_binding, bool):
            raise InputError(f"io_binding: expected True, False or None, got {io_binding!r}")
        self._ort = ort
        self.model_dir = Path(model_dir)
        self.metadata = read_metadata(self.model_dir)
        if precision is not None and precision != self.metadata["precision"]:
            raise InputError(
                f"{self.model_dir}: export precision is {self.metadata['precision']!r}, "
                f"requested {precision!r}; re-export"
            )
        self.device = str(device)
        self._device_type = "cuda" if self.device.startswith("cuda") else "cpu"
        self._device_id = _device_id(self.device)
        self.io_binding: bool = self._device_type == "cuda" if io_binding is None else io_binding
        self._placement = f"OrtValues on {self._device_type}:{self._device_id}" if self.io_binding else "numpy arrays"
        if self._device_type == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise BackendUnavailable(
                    f"device {device!r}: this onnxruntime has no CUDAExecutionProvider "
                    f"(available: {', '.join(ort.get_available_providers())}); install onnxruntime-gpu"
                )
            providers: list[Any] = [("CUDAExecutionProvider", {"device_id": self._device_id}), "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        self._providers = providers
        self._session_config = ort_session_config(self.metadata)  # what the export asks of ONNX Runtime
        self.native_ops = self._use_native_ops(native_ops)
        self.threads = self._resolve_threads(threads)
        #: Calls of at least this many tokens run on :attr:`pool_session` (ONNX Runtime's pool); None: every
        #: call runs on :attr:`session` (see the class doc).
        self.pool_from_tokens: Optional[int] = (
            POOL_FROM_TOKENS if threads is None and self.threads == 1 and self._device_type == "cpu" else None
        )
        self._pool_session: Any = None
        self._pool_lock = threading.Lock()
        self.session = self._open_session(self.threads)
        if self.native_ops:
            from .. import ortops

            older = ortops.ops_written_before(self.metadata)
            if older:
                ortops.note_older_ops(str(self.model_dir), older)
        self.vocab_size = self.metadata.get("vocab_size")
        self.state_specs = state_specs(self.metadata)
        self._data_outputs = [t.name for t in self.outputs]
        self._outputs = self._data_outputs + [s.output for s in self.state_specs]
        self._state_names = tuple(s.name for s in self.state_specs)
        self._state_inputs = tuple(s.input for s in self.state_specs)
        self._length_axes = self.call_specs().length_axes
        self._feed_size = len(self.inputs) + len(self._state_inputs)

    def describe(self) -> str:
        """:meth:`Backend.describe` plus ``, IO binding`` when calls run bound, ``, native rnnx ops`` when the
        rnnx custom-op library is registered, then where calls run: ``, 1 intra-op thread`` (``N intra-op
        threads``, ``ONNX Runtime's intra-op pool``), and for a backend with a pool session ``, calls of >= 1024
        tokens on ONNX Runtime's pool (open)`` (``(opens on first use)`` before the first such call)."""
        if self.threads:
            threads = f", {self.threads} intra-op thread" + ("s" if self.threads > 1 else "")
        else:
            threads = ", ONNX Runtime's intra-op pool"
        if self.pool_from_tokens is not None:
            opened = "open" if self._pool_session is not None else "opens on first use"
            threads += f", calls of >= {self.pool_from_tokens} tokens on ONNX Runtime's pool ({opened})"
        return (
            super().describe()
            + (", IO binding" if self.io_binding else "")
            + (", native rnnx ops" if self.native_ops else "")
            + threads
        )

    def weight_bytes(self) -> int:
        """The size of the export's graph file plus its external data file (when it has one): its weights."""
        files = [self.model_dir / self.metadata["model_file"]]
        external = self.metadata.get("external_data")
        if external:
            files.append(self.model_dir / external["file"])
        return sum(f.stat().st_size for f in files if f.is_file())

    def _resolve_threads(self, threads: Optional[int]) -> int:
        """The intra-op thread count to open the session with (0: ONNX Runtime's default pool). None picks 1 on
        the CPU for an export of less than :data:`ONE_THREAD_BELOW_BYTES` of weights, else 0 (see the class doc)."""
        if threads is None:
            small = self._device_type == "cpu" and self.weight_bytes() < ONE_THREAD_BELOW_BYTES
            return 1 if small else 0
        if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
            raise InputError(f"threads: expected None or an integer >= 0, got {threads!r}")
        return int(threads)

    def _use_native_ops(self, native_ops: Optional[bool]) -> bool:
        """Whether to register rnnx's ONNX Runtime op library (:mod:`rnnx.runtime.ortops`: native SRU scan and
        causal linear attention, CPU kernels for every precision) with every session: when asked (True:
        required, :meth:`_open_session` raises when it cannot load), or by default (None) on the CPU when it is
        built and this onnxruntime can load it; False keeps the ops' function bodies."""
        from .. import ortops

        if native_ops is not None and not isinstance(native_ops, bool):
            raise InputError(f"native_ops: expected True, False or None, got {native_ops!r}")
        if native_ops is False:
            return False
        if native_ops is None and self._device_type != "cpu":
            return False
        if native_ops is None and ortops.find_library() is None:
            if self.metadata.get("ops"):
                ortops.note_missing()
            return False
        return True

    def _open_session(self, threads: int) -> Any:
        """An ``InferenceSession`` of the export on :attr:`device` with ``threads`` intra-op threads (0: ONNX
        Runtime's default pool). Every session of this backend is opened here, so they share everything else:
        the export's session config entries, rnnx's op library when :attr:`native_ops`, the providers."""
        from .. import ortops

        options = self._ort.SessionOptions()
        options.log_severity_level = 3
        for key, value in self._session_config.items():
            options.add_session_config_entry(key, value)
        if self.native_ops:
            try:
                ortops.register(options)
            except ortops.OrtOpsError as error:
                raise BackendUnavailable(str(error)) from None
        if threads:
            options.intra_op_num_threads = threads
        # Opened by path, never from bytes: ONNX Runtime resolves an export's external data
        # (model.onnx.data) relative to the model file's directory.
        return self._ort.InferenceSession(
            str(self.model_dir / self.metadata["model_file"]), options, providers=self._providers
        )

    @property
    def pool_session(self) -> Any:
        """The session on ONNX Runtime's default pool that runs calls of :attr:`pool_from_tokens` tokens and
        more, or None: not opened yet (it opens on the first such call) or never used (``pool_from_tokens`` is
        None)."""
        return self._pool_session

    def _pool(self) -> Any:
        """:attr:`pool_session`, opened on the first call that needs it (a call of :attr:`pool_from_tokens` tokens
        or more: batch rows x sequence length)."""
        if self._pool_session is None:
            with self._pool_lock:  # two threads' first long calls open it once
                if self._pool_session is None:
                    self._pool_session = self._open_session(0)
        return self._pool_session

    def _state(self, tensors: dict[str, Any], batch: int, past_length: int) -> BackendState:
        return BackendState(tensors, batch, past_length, self.name, self.signature, {"placement": self._placement})

    def _upload(self, array: np.ndarray) -> Any:
        """A native state tensor from a host array that the caller hands over (it must not be used
        again): the array itself when unbound; bound, an OrtValue on the device (on the CPU backed by
        the array's own buffer, on CUDA a device copy)."""
        if not self.io_binding:
            return array
        return self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self._device_type, self._device_id)

    def _host(self, tensor: Any) -> np.ndarray:
        """A host copy of a native state tensor that shares no storage with it. ``OrtValue.numpy()``
        is a view of the OrtValue's buffer for a CPU OrtValue (copied here) and a fresh array for a
        device one (kept as is)."""
        if not self.io_binding:
            return np.array(tensor, copy=True)
        host = tensor.numpy()
        return host if host.flags.owndata else host.copy()

    def init_state(self, batch: int) -> BackendState:
        tensors = {
            s.name: self._upload(np.zeros(s.concrete_shape(batch, 0), numpy_dtype(s.dtype))) for s in self.state_specs
        }
        return self._state(tensors, batch, 0)

    def run(
        self, inputs: dict[str, np.ndarray], state: BackendState, donate: bool = False
    ) -> tuple[dict[str, np.ndarray], BackendState]:
        """:meth:`Backend.run`; raises :class:`InputError` for a state of another onnxruntime backend
        that keeps its tensors elsewhere (numpy vs OrtValues, or another device)."""
        placement = state.extra.get("placement")
        if placement != self._placement:
            raise InputError(
                f"state: holds {placement}, this onnxruntime backend keeps {self._placement} (io_binding="
                f"{self.io_binding}, device {self.device!r}); use session.import_state(state.to_host())"
            )
        length = 0
        for name, axis in self._length_axes:  # Backend.call_length, its specs read once
            if name in inputs:
                length = axis_size(inputs[name], axis)
                break
        pool_from = self.pool_from_tokens  # the decode step's test, inline: None, or a step far below it
        session = self.session if pool_from is None or length * state.batch < pool_from else self._pool()
        n = len(self._data_outputs)
        if self.io_binding:
            data, present = self._run_bound(inputs, state, session)
        else:
            data = self._run_unbound(inputs, state, session)
            present = data[n:]
        first = data[0] if n == 1 else None
        if type(first) is np.ndarray and first.dtype is _FLOAT32:  # a language model's logits
            outputs = {self._data_outputs[0]: first}
        else:
            outputs = {name: _host_output(v) for name, v in zip(self._data_outputs, data)}
        tensors = dict(zip(self._state_names, present))
        return outputs, BackendState(
            tensors, state.batch, state.past_length + length, self.name, self.signature, {"placement": self._placement}
        )

    def _run_unbound(self, inputs: dict[str, np.ndarray], state: BackendState, session: Any) -> list[Any]:
        """``session.run`` (``InferenceSession.run``) on numpy state -> every output, graph order: the data
        outputs, then the present state as numpy arrays (spec order). The state's arrays are fed as they are:
        the previous call's outputs, no copy.

        On the CPU the call goes straight to the compiled run that ``InferenceSession.run`` ends in (its
        ``_sess``; a session without one, another onnxruntime's or a stand-in, gets the public call). The
        Python wrapper around it checks that no input is missing (here a feed of another size than the
        graph's inputs takes the public call and its error, and one of the right size with a wrong name gets
        ONNX Runtime's "Invalid input name"), that no OrtValue belongs to another session (the feeds are numpy
        arrays) and that WebGPU graph capture is off, and it can retry on another execution provider after a
        CUDA failure (there is none on the CPU): work that costs about as much per decode step as the rest of
        the runtime's Python layer together."""
        feed = dict(inputs)
        feed.update(zip(self._state_inputs, map(state.tensors.__getitem__, self._state_names)))
        compiled = getattr(session, "_sess", None) if self._device_type == "cpu" else None
        if compiled is not None and len(feed) == self._feed_size:
            return compiled.run(self._outputs, feed, None)
        return session.run(self._outputs, feed)

    def _run_bound(
        self, inputs: dict[str, np.ndarray], state: BackendState, session: Any
    ) -> tuple[list[Any], list[Any]]:
        """One IO-bound call of ``session`` -> (data outputs on the host, present OrtValues on the backend's
        device, spec order). The same code for every device: only ``(device_type, device_id)`` differ."""
        binding = session.io_binding()
        for name, value in inputs.items():
            binding.bind_cpu_input(name, value)
        for s in self.state_specs:
            binding.bind_ortvalue_input(s.input, state.tensors[s.name])
        for name in self._data_outputs:
            binding.bind_output(name, "cpu")
        for s in self.state_specs:
            binding.bind_output(s.output, self._device_type, self._device_id)
        session.run_with_iobinding(binding)
        outs = binding.get_outputs()
        n = len(self._data_outputs)
        return [self._host(v) for v in outs[:n]], list(outs[n:])

    def copy_state(self, state: BackendState) -> BackendState:
        tensors = {k: self._upload(self._host(v)) for k, v in state.tensors.items()}
        return self._state(tensors, state.batch, state.past_length)

    def state_to_host(self, state: BackendState) -> dict[str, np.ndarray]:
        return {s.name: self._host(state.tensors[s.name]) for s in self.state_specs}

    def select_rows(self, state: BackendState, rows: Sequence[int]) -> BackendState:
        """:meth:`Backend.select_rows`; unbound, one ``np.take`` per (host-resident) tensor."""
        if self.io_binding:
            return super().select_rows(state, rows)
        index = np.asarray(rows, dtype=np.int64)
        tensors = {s.name: np.take(state.tensors[s.name], index, axis=s.batch_axis) for s in self.state_specs}
        return self._state(tensors, len(index), state.past_length)

    def concat_rows(self, states: Sequence[BackendState]) -> BackendState:
        """:meth:`Backend.concat_rows`; unbound, one ``np.concatenate`` per (host-resident) tensor."""
        if self.io_binding or self.grows:  # a KV cache's rows are padded to one length on the host
            return super().concat_rows(states)
        self._check_concat(states)
        tensors = {
            s.name: np.concatenate([st.tensors[s.name] for st in states], axis=s.batch_axis) for s in self.state_specs
        }
        return self._state(tensors, sum(st.batch for st in states), max(st.past_length for st in states))

    def state_from_host(self, arrays: dict[str, np.ndarray]) -> BackendState:
        batch, past = self.host_batch_and_past(arrays)
        tensors = {
            s.name: self._upload(np.array(arrays[s.name], dtype=numpy_dtype(s.dtype), copy=True))
            for s in self.state_specs
        }
        return self._state(tensors, batch, past)
