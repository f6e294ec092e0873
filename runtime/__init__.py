"""rnnx.runtime: stateful exports (streaming calls, token-by-token generation) over torch / ONNX Runtime / TensorRT.

``load(model_dir_or_checkpoint, backend="auto", device="cpu", precision=None, io_binding=None)`` -> a
:class:`Session` for a language model, a :class:`StatefulSession` for any other export; see
:mod:`.session` (run; prefill / step / generate), :mod:`.scheduler` (many streams, continuous
batching), :mod:`.state` (fork, save, load), :mod:`.backends`
(the backend interface in :mod:`.backends.base`), :mod:`.sampling`, :mod:`.parity`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from .artifact import CAUSAL_LM, interface_of
from .backends import BACKENDS, create_backend, dir_kind
from .backends.base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError, StateSpec
from .scheduler import Scheduler, SchedulerClosed, SchedulerFull, Stream
from .session import Session, StatefulSession
from .state import State


def load(
    model_dir_or_checkpoint: Union[str, Path],
    backend: str = "auto",
    device: str = "cpu",
    precision: Optional[str] = None,
    io_binding: Optional[bool] = None,
    native_ops: Optional[bool] = None,
) -> StatefulSession:
    """A session for a checkpoint directory (torch backend) or an export directory (``auto``: tensorrt
    on CUDA when installed, else onnxruntime): a :class:`Session` (prefill / step / generate) for a
    language model, a :class:`StatefulSession` (``run(inputs) -> outputs``, state carried) for any
    other export. ``device``: ``"cpu"`` or ``"cuda[:N]"``; ``precision``: torch fp32 / fp16 / bf16, an
    export's own precision otherwise.

    ``io_binding`` (onnxruntime only): True runs every call through ORT IO binding with the state kept
    as OrtValues on ``device`` (the CUDA code path, also on the CPU EP), False through
    ``InferenceSession.run`` with numpy state, None (default) picks True on CUDA and False on CPU.
    ``native_ops`` (onnxruntime only): rnnx's ONNX Runtime op library (native SRU scan; see
    :mod:`.ortops`): None (default) uses it on the CPU when built, True requires it, False runs the ops'
    function bodies. Setting either for another backend (including the one ``auto`` picks) raises
    :class:`InputError`."""
    chosen = create_backend(
        model_dir_or_checkpoint, backend=backend, device=device, precision=precision, io_binding=io_binding,
        native_ops=native_ops,
    )  # fmt: skip
    return Session(chosen) if interface_of(chosen.metadata) == CAUSAL_LM else StatefulSession(chosen)


__all__ = [
    "BACKENDS", "Backend", "BackendState", "BackendUnavailable", "InputError", "RnnxRuntimeError", "Scheduler",
    "SchedulerClosed", "SchedulerFull", "Session", "StatefulSession", "State", "StateSpec", "Stream",
    "create_backend", "dir_kind", "load",
]  # fmt: skip
