"""Parked conversations: a conversation id -> its latest state, in host memory (LRU) and in a directory.

A recurrent model's whole context is its state, whatever the context length, so a conversation that is idle
costs exactly its state's bytes (plus one row of last logits): no device slot, no KV cache. A hybrid's parked
state is its fixed part plus the KV caches of exactly its own tokens (the scheduler compacts a row before it parks
it), so it grows with the conversation. :meth:`ConversationStore.parked_bytes` tells the two parts apart. A
:class:`ConversationStore` holds those states for one model:

* in host memory, most recently used first, up to ``max_memory_bytes``; past it the least recently used
  leave memory (they stay on disk when the store has a directory; a memory-only store forgets them, and
  resuming a forgotten one raises instead of silently starting afresh);
* in ``directory`` (optional), one rnnx state file per conversation (the safetensors format of
  :meth:`rnnx.runtime.State.save`, readable by the C API's ``rnnx_state_load``), written on every
  :meth:`~ConversationStore.put` (write-through, atomically: a temporary file, then a rename), so the store
  survives a restart of the process and several processes (Triton instances) can share the directory.
  A memory copy is used only while its file is unchanged (same inode, size and modification time, taken from
  the file this store wrote, never from a later one); a file rewritten by another process is read again.

A file that cannot be read (corrupted, truncated, another model's state) is refused with a one-line
:class:`~rnnx.runtime.backends.base.InputError` naming it; nothing is deleted or overwritten, so the
conversation's previous good state (in memory, or the file once repaired) is kept. Thread-safe: one lock for
the memory, and per conversation (striped locks) a write or a read of its file with the memory update that
goes with it, so two threads never pair one's state with the other's file; across processes the last writer
of a conversation wins.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Optional, Union

from ..backends.base import Backend, InputError
from ..contract.artifact import STATE_CONVERSATION
from ..state import HostState, State, read_state_file, write_state_file_stat
from ..text import ChatTranscript

#: Default memory budget of a store: parked states held in host memory, in bytes.
DEFAULT_MAX_MEMORY_BYTES = 256 << 20
#: The file suffix of a parked conversation.
SUFFIX = ".safetensors"
#: Header field (safetensors metadata) holding the conversation id of a parked state (the contract's STATE_HEADER).
CONVERSATION_FIELD = STATE_CONVERSATION
#: A memory-only store remembers this many ids it dropped past its budget (most recent), to refuse resuming them.
FORGOTTEN_LIMIT = 1 << 16
_Stamp = tuple[int, int, int]
#: Ids used as file names as they are: lowercase (ids differing only in case must not share a file on a
#: case-insensitive filesystem), not starting with a dot
_PLAIN_ID = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,127}")
#: Names Windows reserves for devices, with any extension (``con``, ``nul.txt``): never file names
_RESERVED_ID = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])(\..*)?")
_ID_LOCKS = 64  # striped per-conversation locks of a store


def conversation_filename(conversation: str) -> str:
    """The file name of ``conversation``'s state: the id itself when it is a plain name (lowercase letters,
    digits, ``._-``, not starting with a dot, up to 128 characters, not a name Windows reserves such as
    ``con``), else ``~`` + a SHA-256 of its UTF-8 bytes (so ``Chat`` and ``chat`` never share a file)."""
    if _PLAIN_ID.fullmatch(conversation) and not _RESERVED_ID.fullmatch(conversation):
        return conversation + SUFFIX
    return "~" + hashlib.sha256(conversation.encode()).hexdigest()[:40] + SUFFIX


def check_conversation_id(conversation: object) -> str:
    """``conversation`` as a non-empty string that UTF-8 can encode (no lone surrogates); InputError otherwise."""
    if isinstance(conversation, bool) or not isinstance(conversation, (str, int)) or str(conversation) == "":
        raise InputError(f"conversation: expected a non-empty string id, got {conversation!r}")
    conversation = str(conversation)
    try:
        conversation.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(f"conversation: expected UTF-8 text ({error.reason}), got {conversation!r}") from None
    return conversation


class ConversationStore:
    """Conversation id -> latest state of one model (``backend``'s); see the module doc.

    ``directory``: where parked states live as files (created if missing; None: memory only);
    ``max_memory_bytes``: host memory for states, least recently used leave past it."""

    def __init__(
        self,
        backend: Backend,
        directory: Optional[Union[str, os.PathLike]] = None,
        max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES,
    ) -> None:
        if isinstance(max_memory_bytes, bool) or not isinstance(max_memory_bytes, int) or max_memory_bytes < 0:
            raise InputError(f"max_memory_bytes: expected an integer >= 0, got {max_memory_bytes!r}")
        self.backend = backend
        self.directory = None if directory is None else Path(directory)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.max_memory_bytes = max_memory_bytes
        self._lock = threading.Lock()  # the memory (and _forgotten)
        self._id_locks = [threading.Lock() for _ in range(_ID_LOCKS)]  # a conversation's file + its memory entry
        self._memory: OrderedDict[str, tuple[HostState, Optional[_Stamp]]] = OrderedDict()  # id -> (state, file stamp)
        self._memory_bytes = 0
        self._forgotten: OrderedDict[str, None] = OrderedDict()  # memory-only: ids dropped past the budget (LRU)

    def __repr__(self) -> str:
        return (
            f"ConversationStore({len(self._memory)} in memory, {self._memory_bytes} bytes, "
            f"directory={str(self.directory) if self.directory else None!r})"
        )

    @property
    def memory_bytes(self) -> int:
        """Bytes of the states held in host memory now."""
        return self._memory_bytes

    def path(self, conversation: str) -> Optional[Path]:
        """The file of ``conversation`` (whether or not it exists); None for a memory-only store."""
        conversation = check_conversation_id(conversation)
        return None if self.directory is None else self.directory / conversation_filename(conversation)

    def __contains__(self, conversation: object) -> bool:
        conversation = check_conversation_id(conversation)
        with self._lock:
            if conversation in self._memory:
                return True
        path = self.path(conversation)
        return path is not None and path.is_file()

    def in_memory(self) -> list[str]:
        """The ids held in memory, least recently used first."""
        with self._lock:
            return list(self._memory)

    def get_host(self, conversation: str) -> Optional[HostState]:
        """The latest state of ``conversation`` on the host (shared with the store: do not modify it), or None
        for a conversation never stored. Raises :class:`InputError` (one line) for an unreadable file and for a
        conversation a memory-only store forgot."""
        conversation = check_conversation_id(conversation)
        path = self.path(conversation)
        with self._id_lock(conversation):
            stamp = _stamp(path) if path is not None else None
            with self._lock:
                held = self._memory.get(conversation)
                if held is not None and (path is None or held[1] == stamp):
                    self._memory.move_to_end(conversation)
                    return held[0]
                if path is None:
                    if conversation in self._forgotten:
                        raise InputError(
                            f"conversation {conversation!r}: dropped from the memory-only store past its "
                            f"{self.max_memory_bytes}-byte budget (give the store a directory to park states on "
                            f"disk)"
                        )
                    return None
            if stamp is None:
                return None
            host = read_state_file(self.backend, path)  # one-line InputError for a bad file; the memory copy stays
            if host.batch != 1:
                raise InputError(f"{path}: a conversation's state has one row, this file has {host.batch}")
            with self._lock:
                self._hold(conversation, host, stamp)
        return host

    def parked_bytes(self, conversation: str) -> dict[str, int]:
        """What ``conversation``'s parked state costs, in bytes: ``"kv"`` its KV caches (the growing tensors, which
        grow with the conversation), ``"fixed"`` every other state tensor and its last logits (the same for every
        conversation). InputError for a conversation never stored; errors as :meth:`get_host`."""
        host = self.get_host(conversation)
        if host is None:
            raise InputError(f"conversation {conversation!r}: not stored")
        kv = sum(host.arrays[s.name].nbytes for s in self.backend.state_specs if s.grows)
        return {"kv": kv, "fixed": host.nbytes - kv}

    def transcript(self, conversation: str) -> Optional[ChatTranscript]:
        """The chat transcript stored with ``conversation``'s latest state (its messages so far), or None for a
        conversation never stored or stored from token ids; errors as :meth:`get_host`."""
        host = self.get_host(conversation)
        return None if host is None or host.chat is None else ChatTranscript.from_json(host.chat, conversation)

    def get(self, conversation: str) -> Optional[State]:
        """The latest state of ``conversation`` as a new :class:`State` on the store's backend (a copy), or
        None for a conversation never stored; errors as :meth:`get_host`."""
        host = self.get_host(conversation)
        return None if host is None else host.to_state(self.backend)

    def put(self, conversation: str, state: Union[State, HostState], chat: Optional[ChatTranscript] = None) -> None:
        """Stores ``state`` (one row of this model; copied to the host) as ``conversation``'s latest state:
        written to its file first (atomically), then held in memory. ``chat``: the conversation's chat transcript
        after this state (its messages and the text the state holds), kept in the same file's header."""
        conversation = check_conversation_id(conversation)
        if isinstance(state, State):
            if state.inner.signature != self.backend.signature:
                raise InputError(f"conversation {conversation!r}: the state belongs to a different model")
            host = HostState.of(state)
        elif isinstance(state, HostState):
            host = state
        else:
            raise InputError(f"conversation {conversation!r}: expected a State, got {type(state).__name__}")
        if chat is not None:
            host = dataclasses.replace(host, chat=chat.to_json())
        if host.batch != 1:
            raise InputError(f"conversation {conversation!r}: a conversation's state has one row, got {host.batch}")
        path = self.path(conversation)
        with self._id_lock(conversation):  # the file and the memory entry change together
            stamp = None
            if path is not None:  # the stamp of the file written here, even if another process replaces it now
                stamp = _stat_stamp(write_state_file_stat(path, self.backend, host, {CONVERSATION_FIELD: conversation}))
            with self._lock:
                self._forgotten.pop(conversation, None)
                self._hold(conversation, host, stamp)

    def put_file(self, conversation: str, path: Union[str, os.PathLike]) -> None:
        """Makes the state file ``path`` (:meth:`State.save`, the C API's ``rnnx_state_save``) the latest state
        of ``conversation``, after checking it: a file that cannot be read is refused (one-line
        :class:`InputError`) and the conversation keeps its previous state."""
        self.put(conversation, read_state_file(self.backend, path))

    def delete(self, conversation: str) -> None:
        """Forgets ``conversation`` (memory and file); a no-op for an unknown id."""
        conversation = check_conversation_id(conversation)
        path = self.path(conversation)
        with self._id_lock(conversation):
            with self._lock:
                held = self._memory.pop(conversation, None)
                if held is not None:
                    self._memory_bytes -= held[0].nbytes
                self._forgotten.pop(conversation, None)
            if path is not None:
                path.unlink(missing_ok=True)

    def _id_lock(self, conversation: str) -> threading.Lock:
        """The lock of ``conversation``'s file and memory entry (one of a fixed set, by a hash of the id)."""
        return self._id_locks[hash(conversation) % _ID_LOCKS]

    def _hold(self, conversation: str, host: HostState, stamp: Optional[_Stamp]) -> None:
        """Puts ``host`` in memory as most recently used and evicts past the budget (the lock held)."""
        old = self._memory.pop(conversation, None)
        if old is not None:
            self._memory_bytes -= old[0].nbytes
        self._memory[conversation] = (host, stamp)
        self._memory_bytes += host.nbytes
        while self._memory_bytes > self.max_memory_bytes and self._memory:
            gone, (dropped, _) = self._memory.popitem(last=False)
            self._memory_bytes -= dropped.nbytes
            if self.directory is None:
                self._forgotten[gone] = None
                self._forgotten.move_to_end(gone)
                if len(self._forgotten) > FORGOTTEN_LIMIT:
                    self._forgotten.popitem(last=False)


def _stat_stamp(st: os.stat_result) -> _Stamp:
    """(inode, size, modification time in ns): every atomic write makes a new inode."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def _stamp(path: Path) -> Optional[_Stamp]:
    """The stamp of ``path`` (see :func:`_stat_stamp`), None when there is no such file."""
    try:
        return _stat_stamp(path.stat())
    except FileNotFoundError:
        return None
