"""rnnx.runtime: stateful exports (streaming calls, token-by-token generation) over torch / ONNX Runtime / TensorRT.

This module is the runtime's front door: a table of its public names, each imported from its room on first use
(PEP 562); nothing inside rnnx imports it. ``load(model_dir_or_checkpoint, backend="auto", device="cpu",
precision=None, io_binding=None, threads=None)`` (:func:`.session.load`) -> a :class:`Session` for a language model,
a :class:`StatefulSession` for any other export; see :mod:`.session` (run; prefill / step / generate),
:mod:`.serving` (many streams: the slot pool, continuous batching, Triton), :mod:`.state` (fork, save, load),
:mod:`.backends` (the backend interface in :mod:`.backends.base`), :mod:`.sampling`, :mod:`.parity`; the contracts
every part shares (the export format, the op records, targets and precisions) are :mod:`.contract`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    "Session": ".session", "StatefulSession": ".session", "load": ".session",
    "State": ".state", "HostState": ".state",
}  # fmt: skip

if TYPE_CHECKING:
    from .backends import BACKENDS, create_backend, dir_kind
    from .backends.base import Backend, BackendState, BackendUnavailable, InputError, RnnxRuntimeError, StateSpec
    from .sampling import SamplingOptions
    from .serving.conversations import ConversationStore
    from .serving.scheduler import PrefixHandle, Scheduler, SchedulerClosed, SchedulerFull, Stream
    from .session import Session, StatefulSession, load
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


__all__ = [
    "BACKENDS", "Backend", "BackendState", "BackendUnavailable", "ConversationStore", "HostState", "InputError",
    "PrefixHandle", "RnnxRuntimeError", "SamplingOptions", "Scheduler", "SchedulerClosed", "SchedulerFull", "Session",
    "StatefulSession", "State", "StateSpec", "Stream", "create_backend", "dir_kind", "load",
]  # fmt: skip
