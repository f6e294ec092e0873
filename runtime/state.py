"""User-facing state handles: a backend-native state plus each row's last logits; fork, save, load.

A :class:`State` is what :meth:`Session.prefill` returns and :meth:`Session.step` advances in place.
Saved states are safetensors files, the format the native runtime (``librnnx_runtime``, C API
``rnnx_state_save`` / ``rnnx_state_load``) reads and writes too: every state tensor as ``state/<flat name>``,
the last logits as ``last_logits`` (when known), and in the header's metadata (strings) ``format``
(``rnnx-state``), ``format_version`` (2), ``names`` (a JSON list, graph order), ``batch``, ``past_length``,
``signature`` (:func:`.artifact.model_signature`) and ``backend``: the contract's ``STATE_HEADER``
(``rnnx.runtime.contract.artifact``; its JSON Schema is ``runtime/contract/rnnx-state.schema.json``), which the C
API checks with the same refusals. Loading checks the signature, so a state only loads into the same model (any
backend, either language). ``.npz`` state files of format version 1 (rnnx before the native runtime) still load.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .backends.base import Backend, BackendState, InputError

# STATE_FORMAT, STATE_FORMAT_VERSION are the contract's (rnnx.runtime.state.STATE_FORMAT still names them)
from .contract.artifact import (
    STATE_CHAT,
    STATE_FORMAT,
    STATE_FORMAT_VERSION,
    STATE_LAST_LOGITS,
    STATE_TENSOR_PREFIX,
    MetadataError,
    check_state_header,
    numpy_dtype,
    refusal,
)

#: The .npz state files of rnnx before the native runtime (still read).
NPZ_FORMAT_VERSION = 1
_HEADER = "__rnnx_state__"
_PREFIX = STATE_TENSOR_PREFIX
_ZIP_MAGIC = b"PK\x03\x04"


class State:
    """A generation state of ``batch`` rows. ``last_logits`` (B, V) float32: the logits after each
    row's last real token (None for a fresh state). Mutable: :meth:`Session.step` replaces the inner
    backend state; :meth:`fork` gives an independent copy."""

    def __init__(self, backend: Backend, inner: BackendState, last_logits: Optional[np.ndarray] = None) -> None:
        self.backend = backend
        self.inner = inner
        self.last_logits = last_logits

    @property
    def batch(self) -> int:
        return self.inner.batch

    @property
    def past_length(self) -> int:
        """Positions fed so far (pads included)."""
        return self.inner.past_length

    def fork(self) -> State:
        """A deep copy on the same device sharing no storage: both continue independently."""
        logits = None if self.last_logits is None else self.last_logits.copy()
        return State(self.backend, self.backend.copy_state(self.inner), logits)

    copy = fork

    def to_host(self) -> dict[str, np.ndarray]:
        """Flat state name -> host numpy array, graph order."""
        return self.backend.state_to_host(self.inner)

    def save(self, path: Union[str, Path]) -> Path:
        """Writes the state to ``path`` (safetensors, written whole: a temporary file, then a rename) and
        returns the path written."""
        return write_state_file(path, self.backend, HostState.of(self))

    def __repr__(self) -> str:
        return f"State(batch={self.batch}, past_length={self.past_length}, backend={self.backend.name!r})"


@dataclass
class HostState:
    """A state's tensors on the host, detached from any device: what a parked conversation costs.

    ``arrays``: flat state name -> numpy array (graph order, the dtypes and shapes of the model's state specs,
    ``batch`` rows); ``last_logits`` (batch, V) float32 or None; ``past_length``: positions fed so far; ``chat``:
    a parked conversation's chat transcript (:class:`rnnx.runtime.text.ChatTranscript` as JSON) or None. Any backend
    of the same model turns it back into a :class:`State` (:meth:`to_state`)."""

    arrays: dict[str, np.ndarray]
    last_logits: Optional[np.ndarray]
    batch: int
    past_length: int
    chat: Optional[str] = None

    @classmethod
    def of(cls, state: State) -> HostState:
        """A host copy of ``state`` (shares nothing with it)."""
        logits = None if state.last_logits is None else np.array(state.last_logits, dtype=np.float32)
        return cls(state.to_host(), logits, state.batch, state.past_length)

    @property
    def nbytes(self) -> int:
        """Bytes of the state tensors plus the last logits."""
        logits = 0 if self.last_logits is None else self.last_logits.nbytes
        return sum(a.nbytes for a in self.arrays.values()) + logits

    def to_state(self, backend: Backend) -> State:
        """A :class:`State` on ``backend``'s device built from copies of the arrays (this host state stays
        unchanged, whatever the state's later steps do)."""
        inner = backend.state_from_host({k: np.array(v) for k, v in self.arrays.items()})
        inner.past_length = self.past_length
        logits = None if self.last_logits is None else self.last_logits.copy()
        return State(backend, inner, logits)


def write_state_file(
    path: Union[str, Path], backend: Backend, host: HostState, metadata: Optional[dict[str, str]] = None
) -> Path:
    """Writes ``host`` (a state of ``backend``'s model) to ``path`` as an rnnx state file: safetensors, written
    whole (a temporary file in the same directory, then a rename), so a failed write never replaces a good
    file. ``metadata``: extra header strings (the standard fields win). Returns the path written."""
    write_state_file_stat(path, backend, host, metadata)
    return Path(path)


def write_state_file_stat(
    path: Union[str, Path], backend: Backend, host: HostState, metadata: Optional[dict[str, str]] = None
) -> os.stat_result:
    """:func:`write_state_file`, returning the ``os.stat`` of the file written, taken from the temporary file
    just before the rename (a rename keeps inode, size and modification time): the written file's own, even
    when another process replaces ``path`` right after."""
    from safetensors.numpy import save_file

    path = Path(path)
    header = {
        **(metadata or {}),
        "format": STATE_FORMAT, "format_version": str(STATE_FORMAT_VERSION),
        "names": json.dumps(backend.state_names), "batch": str(host.batch),
        "past_length": str(host.past_length), "signature": backend.signature, "backend": backend.name,
        **({} if host.chat is None else {STATE_CHAT: host.chat}),
    }  # fmt: skip
    arrays = {_PREFIX + k: np.ascontiguousarray(v) for k, v in host.arrays.items()}
    if host.last_logits is not None:
        arrays[STATE_LAST_LOGITS] = np.ascontiguousarray(host.last_logits, dtype=np.float32)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file(arrays, tmp, metadata=header)
        written = os.stat(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return written


def check_host_state(backend: Backend, arrays: dict[str, np.ndarray], where: str) -> tuple[int, int]:
    """Validates host arrays against ``backend``'s state specs -> (batch, past_length).
    Raises :class:`InputError` naming the tensor and the expected vs got shape / dtype."""
    names = backend.state_names
    missing = [n for n in names if n not in arrays]
    extra = [n for n in arrays if n not in names]
    if missing or extra:
        raise InputError(f"{where}: state tensors do not match the model: missing {missing}, unexpected {extra}")
    if not backend.state_specs:
        return 1, 0
    first = backend.state_specs[0]
    batch = (
        int(np.shape(arrays[first.name])[first.batch_axis]) if np.ndim(arrays[first.name]) == len(first.shape) else -1
    )
    grow = next((s for s in backend.state_specs if s.grows), None)
    past = 0
    if grow is not None and np.ndim(arrays[grow.name]) == len(grow.shape):
        past = int(np.shape(arrays[grow.name])[grow.grow_axis])
    for spec in backend.state_specs:
        a = arrays[spec.name]
        want = spec.concrete_shape(batch, past)
        if tuple(np.shape(a)) != want:
            raise InputError(f"{where}: state tensor {spec.name!r}: expected shape {want}, got {tuple(np.shape(a))}")
        want_dtype = numpy_dtype(spec.dtype)
        if np.asarray(a).dtype != want_dtype:
            raise InputError(
                f"{where}: state tensor {spec.name!r}: expected dtype {want_dtype}, got {np.asarray(a).dtype}"
            )
    return batch, past


def _read_safetensors(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        with open(path, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size).decode()) if size < (100 << 20) else None
        arrays = load_file(str(path))
    except (SafetensorError, ValueError, UnicodeDecodeError, OSError) as e:
        raise _refused(str(path), "state_unreadable", detail=f"{type(e).__name__}: {e}") from None
    if not isinstance(header, dict):
        raise _refused(str(path), "state_unreadable", detail="no safetensors header")
    return header.get("__metadata__") or {}, arrays


def _read_npz(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    with np.load(path, allow_pickle=False) as data:
        if _HEADER not in data.files:
            raise InputError(f"{path}: not an rnnx state file (no {_HEADER} header)")
        header = json.loads(bytes(data[_HEADER]).decode())
        arrays = {k: data[k] for k in data.files if k != _HEADER}
    if header.get("format_version") == NPZ_FORMAT_VERSION:
        header["format_version"] = STATE_FORMAT_VERSION  # the same fields, the older container
    # the header's values as a safetensors header holds them: strings (names: a JSON list)
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in header.items()}, arrays


def _refused(where: str, reason: str, **values: str) -> InputError:
    """An :class:`InputError` with the contract's refusal text and its ``reason`` (as the C API refuses it)."""
    return _with_reason(InputError(str(refusal(where, reason, **values))), reason)


def _with_reason(error: InputError, reason: Optional[str]) -> InputError:
    error.reason = reason
    return error


def read_state_file(backend: Backend, path: Union[str, Path]) -> HostState:
    """Reads and checks a state file written by :meth:`State.save` / :func:`write_state_file` (or by the native
    runtime, or an ``.npz`` of rnnx before it) for ``backend``'s model, onto the host: format, signature,
    tensors. Raises :class:`InputError` with a one-line message naming the file (FileNotFoundError when
    there is none)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such state file")
    try:
        return _read_checked(backend, path)
    except InputError as error:
        raise _with_reason(InputError(" ".join(str(error).split())), getattr(error, "reason", None)) from None


def _read_checked(backend: Backend, path: Path) -> HostState:
    with open(path, "rb") as f:
        magic = f.read(4)
    header, data = _read_npz(path) if magic == _ZIP_MAGIC else _read_safetensors(path)
    arrays = {k[len(_PREFIX) :]: v for k, v in data.items() if k.startswith(_PREFIX)}
    last_logits = data.get(STATE_LAST_LOGITS)
    try:
        check_state_header(header, str(path), backend.signature)
    except MetadataError as error:
        raise _with_reason(InputError(str(error)), error.reason) from None
    batch, past = check_host_state(backend, arrays, str(path))
    if last_logits is not None and tuple(last_logits.shape) != (batch, backend.vocab_size or last_logits.shape[-1]):
        raise InputError(f"{path}: last_logits: expected shape {(batch, backend.vocab_size)}, got {last_logits.shape}")
    return HostState(arrays, last_logits, batch, int(header.get("past_length", past)), header.get(STATE_CHAT))


def load_state_file(backend: Backend, path: Union[str, Path]) -> State:
    """Reads a state written by :meth:`State.save` (or by the native runtime, or an ``.npz`` of rnnx before
    it) into ``backend``; checks format, signature, tensors (:func:`read_state_file`)."""
    return read_state_file(backend, path).to_state(backend)
