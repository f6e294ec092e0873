"""rnnx.runtime: stateful token-by-token generation over torch / ONNX Runtime / TensorRT backends.

``load(model_dir_or_checkpoint, backend="auto", device="cpu", precision=None, io_binding=None) -> Session``; see
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
    io_binding: Optional[bool] = None,
) -> Session:
    """A :class:`Session` for a checkpoint directory (torch backend) or an export directory
    (``auto``: tensorrt on CUDA when installed, else onnxruntime). ``device``: ``"cpu"`` or
    ``"cuda[:N]"``; ``precision``: torch fp32 / fp16 / bf16, an export's own precision otherwise.

    ``io_binding`` (onnxruntime only): True runs every call through ORT IO binding with the state kept
    as OrtValues on ``device`` (the CUDA code path, also on the CPU EP), False through
    ``InferenceSession.run`` with numpy state, None (default) picks True on CUDA and False on CPU.
    Setting it for another backend (including the one ``auto`` picks) raises :class:`InputError`."""
    return Session(
        create_backend(
            model_dir_or_checkpoint, backend=backend, device=device, precision=precision, io_binding=io_binding
        )
    )


__all__ = [
    "BACKENDS", "Backend", "BackendState", "BackendUnavailable", "InputError", "RnnxRuntimeError", "Session",
    "State", "StateSpec", "create_backend", "dir_kind", "load",
]  # fmt: skip
