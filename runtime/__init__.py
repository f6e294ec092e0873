"""rnnx.runtime: stateful token-by-token generation over torch / ONNX Runtime / TensorRT backends.

``load(model_dir_or_checkpoint, backend="auto", device="cpu", precision=None) -> Session``; see
:mod:`.session` (prefill / step / generate), :mod:`.state` (fork, save, load), :mod:`.backends`
(the backend interface in :mod:`.backends.base`), :mod:`.sampling`, :mod:`.parity`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from .backends import BACKENDS, create_backend, dir_kind
from .backends.base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError, StateSpec
from .session import Session
from .state import State


def load(
    model_dir_or_checkpoint: Union[str, Path],
    backend: str = "auto",
    device: str = "cpu",
    precision: Optional[str] = None,
) -> Session:
    """A :class:`Session` for a checkpoint directory (torch backend) or an export directory
    (``auto``: tensorrt on CUDA when installed, else onnxruntime). ``device``: ``"cpu"`` or
    ``"cuda[:N]"``; ``precision``: torch fp32 / fp16 / bf16, an export's own precision otherwise."""
    return Session(create_backend(model_dir_or_checkpoint, backend=backend, device=device, precision=precision))


__all__ = [
    "BACKENDS", "Backend", "BackendState", "BackendUnavailable", "InputError", "RnnxRuntimeError", "Session",
    "State", "StateSpec", "create_backend", "dir_kind", "load",
]  # fmt: skip
