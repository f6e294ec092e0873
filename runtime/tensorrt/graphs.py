"""Ping-pong state buffers and CUDA-graph decode for the TensorRT backend: the per-call decision, pure Python.

A :class:`PingPong` belongs to one batch size. It owns two state buffer sets, A (parity 0) and B
(parity 1; buffer names ``<state>#0`` / ``<state>#1`` from :meth:`.bindings.BindingPlan.addresses`), and
names two CUDA graphs by the set they read:

* ``ping`` reads A and writes B; ``pong`` reads B and writes A. No graph reads and writes one set, so
  no captured graph ever updates state in place on the buffer it reads.

For every engine call :meth:`PingPong.plan` answers which set is read and written and whether the call
runs eagerly, runs eagerly and then captures its graph (TensorRT needs one eager ``enqueueV3`` with the
same shapes and addresses before a capture; the eager run produces this call's outputs), or replays a
captured graph. The backend then calls :meth:`PingPong.commit` with the state it returns.

Rules (each tested in tests/test_runtime_donation.py):

* Only a donated decode call (one step, ``graphs`` enabled: CUDA graphs on and no growing KV cache)
  touches the ring. Anything else is eager with pool buffers; a donated non-ring state goes back to the
  pool (``recycle``), a non-donated state never does.
* A donated state outside the ring enters it (eager, writes A) when the ring is free: no live state
  holds a set. While another live state holds the ring, the call stays eager with pool buffers.
* The ring state (the one live holder) donated to a decode call replays ``ping`` / ``pong``, capturing
  it first when that graph is not captured yet for the current data addresses (or eager when no
  capture is allowed). Donated to any other call, it leaves the ring (``release``): the ring is free.
* The holder is tracked by a weak reference, so a ring whose last state was dropped is free again.
  A state that the ring no longer holds (it was donated already) is refused with :class:`StaleState`.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Optional

from ..backends.base import InputError

EAGER, CAPTURE, REPLAY = "eager", "capture", "replay"
PING, PONG = "ping", "pong"
#: The graph that reads set ``p`` (0 = A, 1 = B) and writes set ``1 - p``.
GRAPH_READING = (PING, PONG)


class StaleState(InputError):
    """A state whose buffers were donated to a later call (reused after ``donate=True``)."""


@dataclass(frozen=True)
class StepPlan:
    """What one engine call does with the state buffers.

    ``mode``: :data:`EAGER` | :data:`CAPTURE` (eager, then capture ``graph``) | :data:`REPLAY`.
    ``read`` / ``write``: the ring set read / written (0 = A, 1 = B), None for the state's own buffers /
    fresh pool buffers. ``graph``: :data:`PING` | :data:`PONG` for capture and replay. ``recycle``: the
    donated input state's own buffers go back to the backend's pool. ``release``: the donated ring state
    left the ring, which is now free.
    """

    mode: str
    read: Optional[int]
    write: Optional[int]
    graph: Optional[str] = None
    recycle: bool = False
    release: bool = False


@dataclass(frozen=True)
class RingTicket:
    """Carried by a state that lives in a ring set: which ring, which set, at which ring epoch."""

    ring: PingPong
    parity: int
    epoch: int


class PingPong:
    """The two state buffer sets and two graphs of one batch size; see the module doc."""

    def __init__(self) -> None:
        self.live: Optional[int] = None  # the set holding the live ring state, None when free
        self.epoch = 0  # bumped by every commit that moves or frees the live set
        self._holder: Optional[weakref.ref] = None

    @property
    def busy(self) -> bool:
        """Whether a live state holds one of the sets (a dropped holder frees the ring)."""
        return self.live is not None and self._holder is not None and self._holder() is not None

    def locate(self, ticket: Optional[RingTicket]) -> Optional[int]:
        """The set a state reads from: its ticket's parity when it is this ring's live holder, None
        when it lives outside this ring; :class:`StaleState` for an earlier holder of this ring."""
        if ticket is None or ticket.ring is not self:
            return None
        if ticket.epoch != self.epoch or ticket.parity != self.live:
            raise StaleState(
                "state: its buffers were donated to a later call (step(..., donate=True) or generate); "
                "fork() a state before donating it to keep a copy"
            )
        return ticket.parity

    def plan(
        self,
        *,
        donate: bool,
        decode: bool,
        graphs: bool,
        ticket: Optional[RingTicket] = None,
        captured: Collection[str] = (),
        can_capture: bool = True,
    ) -> StepPlan:
        """The :class:`StepPlan` of one call. ``decode``: a one-step call; ``graphs``: CUDA graphs enabled
        for this engine (no growing KV cache); ``ticket``: the input state's; ``captured``: the graphs
        already captured for the call's data addresses and shapes; ``can_capture``: room for another."""
        read = self.locate(ticket)
        if not (donate and decode and graphs):
            return StepPlan(EAGER, read, None, recycle=donate and read is None, release=donate and read is not None)
        if read is None:
            return StepPlan(EAGER, None, None if self.busy else 0, recycle=True)
        graph = GRAPH_READING[read]
        mode = REPLAY if graph in captured else CAPTURE if can_capture else EAGER
        return StepPlan(mode, read, 1 - read, graph if mode != EAGER else None)

    def commit(self, step: StepPlan, holder: Any) -> Optional[RingTicket]:
        """Records a finished call; ``holder`` is the state it returned. Returns the ticket the new state
        carries when it lives in a ring set, else None."""
        if step.write is not None:
            if step.read is not None and step.read == step.write:
                raise AssertionError(f"plan reads and writes ring set {step.write}")  # cannot happen: see plan()
            self.live, self.epoch, self._holder = step.write, self.epoch + 1, weakref.ref(holder)
            return RingTicket(self, step.write, self.epoch)
        if step.release:
            self.live, self.epoch, self._holder = None, self.epoch + 1, None
        return None
