"""The Triton Python-backend model of the ``python`` repository variant (see :mod:`.config`).

The repository's ``<version>/model.py`` is one line, ``from rnnx.runtime.serving.triton.python_model import
TritonPythonModel``; Triton's Python stub imports it with ``triton_python_backend_utils`` on its path.

Each model instance holds one :class:`~rnnx.runtime.serving.slots.StatePool` over the export in
``<version>/<rnnx_export_dir>`` (rnnx backend ``rnnx_backend``: onnxruntime by default, so the server's
Python needs no torch). Triton's sequence batcher hands :meth:`TritonPythonModel.execute` requests of up
to ``max_batch_size`` different streams at once; per call the model

1. answers padding requests (READY = 0, the ``direct`` strategy's) with an empty response,
2. validates every request on its own (a malformed one gets a Triton error; the others go on),
3. admits the START requests together (one batched prefill; a restarted CORRID first loses its row,
   valid request or not), as many as there are free slots (the rest get an error); a START request with a
   ``conversation_id`` starts from that conversation's parked state (a new id: the zero state),
4. feeds the other requests' tokens together (one batched call over the pool); a batched call that
   fails is retried request by request, so only the request that cannot run gets the error,
5. samples each stream's ``next_token`` with the options of its START request and its own generator,
6. frees the rows of END requests (a malformed END request's too) and of streams silent for longer
   than the sequence batcher's idle timeout (Triton forgets such a sequence without telling the model); an
   END request of a conversation first parks the row, fed its last ``next_token`` (one batched call over those
   rows), as the conversation's latest state.

Conversations live in a :class:`~rnnx.runtime.serving.conversations.ConversationStore`: in the directory of the
config's ``rnnx_conversation_dir`` parameter, shared by every instance and by every server given that
directory, so a conversation continues across sequences, instances and servers; without it, in the
instance's memory. A sequence is one turn: the state parked at END covers the whole sequence and its last
``next_token``, so the next sequence's ``input_ids`` are only the new input. A conversation's state is
written only by a sequence that ends well (END answered); an expired or failed sequence leaves the previous
state in place. Two sequences of one conversation at once: the last to end wins.

``held_streams`` in every response is the number of streams holding a row of state on this instance
after the request, so a client can see that ended streams hold nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from ...backends.base import InputError
from ...contract.artifact import INPUT_IDS
from ...sampling import SamplingOptions
from ...state import State
from ..conversations import ConversationStore, check_conversation_id
from ..slots import StatePool
from .config import (
    CONVERSATION_ID,
    CORRID,
    END,
    PARAM_BACKEND,
    PARAM_CONVERSATION_DIR,
    PARAM_EXPORT_DIR,
    PARAM_MAX_STREAMS,
    PYTHON_OUTPUTS,
    READY,
    START,
)

NEXT_TOKEN, HELD_STREAMS = PYTHON_OUTPUTS


class _Stream:
    """One sequence's sampling options, generator, last activity (monotonic seconds), and its conversation
    (id, None for a sequence of its own; and its start state until the sequence is admitted)."""

    def __init__(self, options: SamplingOptions, conversation: Optional[str] = None, start: Optional[State] = None):
        self.options = options
        self.rng = options.generators(1)[0]
        self.seen = time.monotonic()
        self.conversation = conversation
        self.start = start

    def sample(self, logits: np.ndarray) -> int:
        return int(self.options.sample(logits[None], [self.rng])[0])


class TritonPythonModel:
    """Triton's Python-backend entry points: ``initialize``, ``execute``, ``finalize``."""

    def initialize(self, args: dict[str, str]) -> None:
        import triton_python_backend_utils as pb_utils

        from ...session import load

        self._pb = pb_utils
        config = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        version_dir = Path(args["model_repository"]) / str(args["model_version"])
        export_dir = version_dir / params.get(PARAM_EXPORT_DIR, "export")
        device = "cpu"
        if args.get("model_instance_kind") == "GPU":
            device = f"cuda:{args.get('model_instance_device_id', 0)}"
        session = load(export_dir, backend=params.get(PARAM_BACKEND, "onnxruntime"), device=device)
        self.pool = StatePool(session.backend)
        self.conversations = ConversationStore(session.backend, params.get(PARAM_CONVERSATION_DIR) or None)
        self.vocab_size = int(session.vocab_size)
        self.max_streams = int(params.get(PARAM_MAX_STREAMS, config.get("max_batch_size") or 64))
        idle_us = config.get("sequence_batching", {}).get("max_sequence_idle_microseconds")
        self.idle_timeout_s = float(idle_us) / 1e6 if idle_us else None
        self.streams: dict[Union[int, str], _Stream] = {}

    def finalize(self) -> None:
        self.pool.clear()
        self.streams.clear()

    # -- one request --------------------------------------------------------------------------------

    def _scalar(self, request: Any, name: str, default: Any = None) -> Any:
        tensor = self._pb.get_input_tensor_by_name(request, name)
        if tensor is None:
            return default
        value = np.asarray(tensor.as_numpy()).reshape(-1)
        if value.size != 1:
            raise InputError(f"{name}: expected one value, got shape {tuple(np.shape(tensor.as_numpy()))}")
        return value[0].item() if isinstance(value[0], np.generic) else value[0]  # a string input: bytes

    def _tokens(self, request: Any) -> list[int]:
        tensor = self._pb.get_input_tensor_by_name(request, INPUT_IDS)
        if tensor is None:
            raise InputError(f"{INPUT_IDS}: missing")
        ids = np.asarray(tensor.as_numpy())
        if not np.issubdtype(ids.dtype, np.integer):
            raise InputError(f"{INPUT_IDS}: expected int64 tokens, got {ids.dtype}")
        ids = ids.reshape(-1)
        if ids.size == 0:
            raise InputError(f"{INPUT_IDS}: expected at least one token")
        bad = ids[(ids < 0) | (ids >= self.vocab_size)]
        if bad.size:
            raise InputError(
                f"{INPUT_IDS}: token {int(bad[0])} out of vocabulary; expected 0 <= token < {self.vocab_size}"
            )
        return [int(t) for t in ids]

    def _flags(self, request: Any) -> tuple[Union[int, str], bool, bool]:
        """(correlation id, START, END): read first, so that even a malformed request's END frees its row."""
        # correlation_id() also carries string sequence ids (the uint64 CORRID tensor cannot)
        corrid = request.correlation_id() if hasattr(request, "correlation_id") else self._scalar(request, CORRID, 0)
        return corrid, bool(self._scalar(request, START, 0)), bool(self._scalar(request, END, 0))

    def _parse(self, request: Any, corrid: Union[int, str], start: bool) -> tuple[list[int], Optional[_Stream]]:
        """(tokens, options at START) of one request; InputError if malformed."""
        if corrid in (0, ""):
            raise InputError("a sequence request needs a non-zero correlation id (sequence_id)")
        tokens = self._tokens(request)
        if not start:
            if corrid not in self.pool:
                raise InputError(
                    f"sequence {corrid}: holds no state on this instance (not started with sequence_start, "
                    f"ended, or idle for longer than {self.idle_timeout_s} s)"
                )
            return tokens, None
        scalars = {n: self._scalar(request, n) for n in ("temperature", "top_k", "top_p", "seed")}
        try:
            options = SamplingOptions.from_request(**scalars)
        except ValueError as error:
            raise InputError(str(error)) from None
        conversation = self._scalar(request, CONVERSATION_ID)
        if conversation is None:
            return tokens, _Stream(options)
        if isinstance(conversation, bytes):
            try:
                conversation = conversation.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{CONVERSATION_ID}: expected UTF-8 text") from None
        conversation = check_conversation_id(conversation)
        try:
            start = self.conversations.get(conversation)
        except OSError as error:  # an unreadable file fails this request only, never the batch
            raise InputError(f"conversation {conversation!r}: cannot read its state: {error}") from None
        return tokens, _Stream(options, conversation, start)

    # -- a batch of requests ------------------------------------------------------------------------

    def _error(self, message: str) -> Any:
        return self._pb.InferenceResponse(output_tensors=[], error=self._pb.TritonError(message))

    def _release(self, corrids: list[Union[int, str]]) -> None:
        self.pool.release(corrids)
        for c in corrids:
            self.streams.pop(c, None)

    def _park(self, ending: list[int], parsed: dict, tokens: dict[int, int], responses: list) -> None:
        """Parks the conversations of the END requests ``ending`` (indices that sampled a token): their rows,
        fed that token in one call, become their conversations' latest states. A failure is the error of those
        requests (their conversations keep the previous state)."""
        ending = [i for i in ending if self.streams[parsed[i][0]].conversation is not None]
        if not ending:
            return
        corrids = [parsed[i][0] for i in ending]
        try:
            states = self.pool.take(corrids, [[tokens[i]] for i in ending])
            for corrid, state in zip(corrids, states):
                self.conversations.put(self.streams[corrid].conversation, state)
        except Exception as error:  # the requests get it; the model goes on
            for i in ending:
                del tokens[i]
                responses[i] = self._error(f"conversation not stored: {type(error).__name__}: {error}")

    def _expire_idle(self, margin_s: float = 0.0) -> None:
        """Frees the streams silent for longer than the idle timeout (less ``margin_s``): Triton forgot
        them without a call to the model."""
        if self.idle_timeout_s is None:
            return
        now = time.monotonic()
        self._release([c for c, s in self.streams.items() if now - s.seen > self.idle_timeout_s - margin_s])

    def _run(self, group: list[int], call: Any, parsed: dict, responses: list) -> dict[int, np.ndarray]:
        """One batched ``admit`` / ``feed`` for the requests ``group``; if it fails, each request is tried
        alone, so one bad request fails only itself. Returns request index -> logits."""
        if not group:
            return {}
        try:
            out = call([parsed[i][0] for i in group], [parsed[i][2] for i in group])
            return dict(zip(group, out))
        except Exception as error:  # never fails the model: the requests get errors
            if len(group) == 1:
                responses[group[0]] = self._error(f"{type(error).__name__}: {error}")
                return {}
        logits: dict[int, np.ndarray] = {}
        for i in group:
            logits.update(self._run([i], call, parsed, responses))
        return logits

    def execute(self, requests: list[Any]) -> list[Any]:
        self._expire_idle()
        responses: list[Any] = [None] * len(requests)
        parsed: dict[int, tuple[Union[int, str], Optional[_Stream], list[int], bool]] = {}
        ended: list[Union[int, str]] = []
        now = time.monotonic()
        for i, request in enumerate(requests):
            try:
                if not bool(self._scalar(request, READY, 1)):
                    responses[i] = self._pb.InferenceResponse(output_tensors=[])  # the direct strategy's padding
                    continue
                corrid, start, end = self._flags(request)
            except InputError as error:
                responses[i] = self._error(str(error))
                continue
            if end:
                ended.append(corrid)
            if start:  # a (re)start drops what the sequence held, whether or not this request is valid
                self._release([corrid])
            elif corrid in self.streams:
                self.streams[corrid].seen = now
            try:
                if any(p[0] == corrid for p in parsed.values()):
                    raise InputError(f"sequence {corrid}: two requests in one batch")
                tokens, options = self._parse(request, corrid, start)
                parsed[i] = (corrid, options, tokens, start)
            except InputError as error:
                responses[i] = self._error(str(error))
        starts = [i for i, p in parsed.items() if p[3]]
        room = self.max_streams - len(self.pool)
        if len(starts) > room:
            self._expire_idle(margin_s=min(1.0, (self.idle_timeout_s or 0.0) / 2))
            room = self.max_streams - len(self.pool)
        for i in starts[max(room, 0) :]:
            responses[i] = self._error(f"all {self.max_streams} stream slots of this instance are taken")
        starts = starts[: max(room, 0)]

        start_of = {parsed[i][0]: parsed[i][1].start for i in starts}

        def admit(keys: list, prompts: list) -> np.ndarray:
            return self.pool.admit(keys, prompts, [start_of[k] for k in keys])

        logits = self._run(starts, admit, parsed, responses)
        start_of.clear()
        for i in starts:  # the pool holds a copy: the device start state is not kept for the whole sequence
            parsed[i][1].start = None
        for i in logits:
            self.streams[parsed[i][0]] = parsed[i][1]
        logits.update(self._run([i for i, p in parsed.items() if not p[3]], self.pool.feed, parsed, responses))
        tokens = {i: self.streams[parsed[i][0]].sample(row) for i, row in logits.items()}
        for i in logits:
            self.streams[parsed[i][0]].seen = now
        self._park([i for i in tokens if parsed[i][0] in ended], parsed, tokens, responses)
        self._release(ended)
        held = np.array([[len(self.pool)]], dtype=np.int64)
        for i, token in tokens.items():
            outputs = [
                self._pb.Tensor(NEXT_TOKEN, np.array([[token]], dtype=np.int64)),
                self._pb.Tensor(HELD_STREAMS, held),
            ]
            responses[i] = self._pb.InferenceResponse(output_tensors=outputs)
        return responses
