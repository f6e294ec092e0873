"""User-facing state handles: a backend-native state plus each row's last logits; fork, save, load.

A :class:`State` is what :meth:`Session.prefill` returns and :meth:`Session.step` advances in place.
Saved states are ``.npz`` files: every state tensor under ``state/<flat name>``, the last logits under
``last_logits`` (when known) and a JSON header under ``__rnnx_state__`` with the format, the flat
names in graph order, batch, past_length and the model signature (:func:`.artifact.model_signature`);
loading checks the signature, so a state only loads into the same model (any backend).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional, Union

import numpy as np

from .artifact import numpy_dtype
from .backends.base import Backend, BackendState, InputError

STATE_FORMAT = "rnnx-state"
STATE_FORMAT_VERSION = 1
_HEADER = "__rnnx_state__"
_PREFIX = "state/"


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
        """Writes the state to ``path`` (``.npz``) and returns the path written."""
        path = Path(path)
        header = {
            "format": STATE_FORMAT, "format_version": STATE_FORMAT_VERSION, "names": self.backend.state_names,
            "batch": self.batch, "past_length": self.past_length, "signature": self.backend.signature,
            "backend": self.backend.name,
        }  # fmt: skip
        arrays = {_PREFIX + k: v for k, v in self.to_host().items()}
        if self.last_logits is not None:
            arrays["last_logits"] = self.last_logits
        arrays[_HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        return path

    def __repr__(self) -> str:
        return f"State(batch={self.batch}, past_length={self.past_length}, backend={self.backend.name!r})"


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


def load_state_file(backend: Backend, path: Union[str, Path]) -> State:
    """Reads a state written by :meth:`State.save` into ``backend``; checks format, signature, tensors."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such state file")
    with np.load(path, allow_pickle=False) as data:
        if _HEADER not in data.files:
            raise InputError(f"{path}: not an rnnx state file (no {_HEADER} header)")
        header = json.loads(bytes(data[_HEADER]).decode())
        arrays = {k[len(_PREFIX) :]: data[k] for k in data.files if k.startswith(_PREFIX)}
        last_logits = data["last_logits"] if "last_logits" in data.files else None
    if header.get("format") != STATE_FORMAT or header.get("format_version") != STATE_FORMAT_VERSION:
        raise InputError(f"{path}: unsupported state format {header.get('format')!r} v{header.get('format_version')!r}")
    if header.get("signature") != backend.signature:
        raise InputError(
            f"{path}: state was saved from a different model: signature {header.get('signature', '')[:12]}..., "
            f"this model {backend.signature[:12]}..."
        )
    batch, past = check_host_state(backend, arrays, str(path))
    inner = backend.state_from_host(arrays)
    inner.past_length = int(header.get("past_length", past))
    return State(backend, inner, last_logits)
