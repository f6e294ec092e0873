"""rnnx.runtime: stateful exports (streaming calls, token-by-token generation) over torch / ONNX Runtime / TensorRT.

``load(model_dir_or_checkpoint, backend="auto", device="cpu", precision=None, io_binding=None, threads=None)`` -> a
:class:`Session` for a language model, a :class:`StatefulSession` for any other export; see
:mod:`.session` (run; prefill / step / generate), :mod:`.serving` (many streams: the slot pool, continuous
batching, Triton), :mod:`.state` (fork, save, load), :mod:`.backends` (the backend interface in
:mod:`.backends.base`), :mod:`.sampling`, :mod:`.parity`; the contracts every part shares (the export format,
the op records, targets and precisions) are :mod:`.contract`. The names below are imported on first use.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

#: Public name -> the submodule that defines it; imported on first use (PEP 562), so that ``rnnx.runtime.contract``
#: (which models and export import) costs no more than itself.
_EXPORTS = {
    "BACKENDS": ".backends", "create_backend": ".backends", "dir_kind": ".backends",
    "Backend": ".backends.base", "BackendState": ".backends.base", "BackendUnavailable": ".backends.base",
    "InputError": ".backends.base", "RnnxRuntimeError": ".backends.base", "StateSpec": ".backends.base",
    "Scheduler": ".serving.scheduler", "SchedulerClosed": ".serving.scheduler", "SchedulerFull": ".serving.scheduler",
    "Stream": ".serving.scheduler", "PrefixHandle": ".serving.scheduler",
    "ConversationStore": ".serving.conversations",
    "SamplingOptions": ".sampling",
    "Session": ".session", "StatefulSession": ".session",
    "State": ".state", "HostState": ".state",
}  # fmt: skip

if TYPE_CHECKING:
    from .backends import BACKENDS, create_backend, dir_kind
    from .backends.base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError, StateSpec
    from .sampling import SamplingOptions
    from .serving.conversations import ConversationStore
    from .serving.scheduler import PrefixHandle, Scheduler, SchedulerClosed, SchedulerFull, Stream
    from .session import Session, StatefulSession
    from .state import HostState, State


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def load(
    model_dir_or_checkpoint: Union[str, Path],
    backend: str = "auto",
    device: str = "cpu",
    precision: Optional[str] = None,
    io_binding: Optional[bool] = None,
    native_ops: Optional[bool] = None,
    threads: Optional[int] = None,
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
    function bodies. ``threads`` (onnxruntime only): intra-op threads; None (default) runs a small export on
    one thread on the CPU (its calls of 1,024 tokens or more on a second session on ONNX Runtime's default pool)
    and a large one on that pool, 0 asks for that pool, N for N threads (see
    :class:`.backends.ort_backend.OrtBackend`). Setting any of the three for another backend (including
    the one ``auto`` picks) raises :class:`InputError`."""
    from .backends import create_backend
    from .contract.artifact import CAUSAL_LM, interface_of
    from .session import Session, StatefulSession

    chosen = create_backend(
        model_dir_or_checkpoint, backend=backend, device=device, precision=precision, io_binding=io_binding,
        native_ops=native_ops, threads=threads,
    )  # fmt: skip
    return Session(chosen) if interface_of(chosen.metadata) == CAUSAL_LM else StatefulSession(chosen)


__all__ = [
    "BACKENDS", "Backend", "BackendState", "BackendUnavailable", "ConversationStore", "HostState", "InputError",
    "PrefixHandle", "RnnxRuntimeError", "SamplingOptions", "Scheduler", "SchedulerClosed", "SchedulerFull", "Session",
    "StatefulSession", "State", "StateSpec", "Stream", "create_backend", "dir_kind", "load",
]  # fmt: skip
