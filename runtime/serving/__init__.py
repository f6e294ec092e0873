"""rnnx.runtime.serving: many streams over one export.

* :mod:`.slots` — :class:`~.slots.StatePool`, streams' states as rows of one device batch;
* :mod:`.scheduler` — :class:`~.scheduler.Scheduler`, continuous batching in-process (one worker thread), with
  streams resumed from a state, shared prefixes (:class:`~.scheduler.PrefixHandle`) and conversations;
* :mod:`.conversations` — :class:`~.conversations.ConversationStore`, parked conversations' states (host memory
  with an LRU bound, and a directory of state files);
* :mod:`.triton` — Triton Inference Server model repositories (:func:`~.triton.write_repository`) and the
  Python-backend model that serves a :class:`~.slots.StatePool` inside Triton.

Torch-free, like the rest of ``rnnx.runtime``. Sampling options (:class:`rnnx.runtime.sampling.SamplingOptions`)
are shared with single-stream sessions and live beside them.
"""
