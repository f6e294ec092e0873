"""Conversations in the scheduler: resume from a state, shared prefixes, parked conversations
(``rnnx.runtime.serving.scheduler`` + ``rnnx.runtime.serving.conversations``), on the demo models.

The reference is always ``Session.generate`` on the whole history as one prompt: turn k of a conversation
must yield what ``generate`` yields for (every earlier prompt and emitted token, then turn k's prompt), with
turn k's own options and seed (the rule of docs/serving.md, "Conversations"). Greedy and seeded sampling,
on torch (one demo model) and ONNX Runtime (the other), with several conversations batched together.
Prefix streams must equal streams that prefill the prefix themselves while computing only their own
tokens. The store: LRU memory bound, a directory that survives a restart and another process's writes,
corrupted and foreign state files refused with one-line errors while the previous state is kept.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS
from rnnx.models.training.copy_task import task_prompts
from rnnx.runtime.backends.base import InputError
from rnnx.runtime.serving.conversations import ConversationStore
from rnnx.runtime.serving.scheduler import Scheduler
from rnnx.runtime.state import HostState

TIMEOUT = 120.0
#: (demo model, backend): each backend on a different demo, so both model kinds and both backends are covered
CASES = [(DEMO_CHECKPOINTS[0], "torch"), (DEMO_CHECKPOINTS[-1], "onnxruntime")]
SAMPLING = {"greedy": {"temperature": 0.0}, "seeded": {"temperature": 1.0, "top_k": 6}}


@pytest.fixture(scope="module")
def sessions(demo_sessions):
    """(demo, backend) -> Session (tests/conftest.py's ``demo_sessions``)."""
    return demo_sessions


def prompts_for(session: rt.Session, n: int, seed: int) -> list[list[int]]:
    return task_prompts(session.metadata.get("config", {}).get("task"), session.vocab_size, batch=n, seed=seed)


def one_piece(session: rt.Session, history: list[int], n: int, **options) -> list[int]:
    return session.generate_all([history], n, **options)[0]


def turn_options(mode: str, conversation: int, turn: int) -> dict:
    options = dict(SAMPLING[mode])
    if mode == "seeded":
        options["seed"] = 100 * conversation + turn  # each turn its own seed: the documented rule
    return options


@pytest.mark.parametrize("mode", list(SAMPLING))
@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_a_resumed_conversation_equals_one_piece(case, mode, sessions, tmp_path):
    """3 conversations of 3 turns each, their turns batched together through 2 slots (so resumed rows share
    prefill and decode calls with other conversations); every turn equals ``generate`` on the whole history.
    The store is a directory: after the turns it holds one state file per conversation."""
    session = sessions[case]
    turns = [prompts_for(session, 3, seed=10 + c) for c in range(3)]  # turns[c][k]: conversation c, turn k
    lengths = [5, 3, 7]
    histories: list[list[int]] = [[] for _ in range(3)]
    with Scheduler(session, max_streams=2, conversations=tmp_path / "store") as scheduler:
        for k in range(3):
            n = [lengths[(c + k) % 3] for c in range(3)]
            streams = [
                scheduler.submit(turns[c][k], n[c], conversation=f"chat-{c}", **turn_options(mode, c, k))
                for c in range(3)
            ]
            for c, stream in enumerate(streams):
                got = stream.result(TIMEOUT)
                histories[c] += turns[c][k]
                want = one_piece(session, histories[c], n[c], **turn_options(mode, c, k))
                assert got == want, f"conversation {c}, turn {k}"
                histories[c] += got
        stats = scheduler.stats()
        # past_length: the positions of the conversation itself, never the pads of the rows it shared calls with
        parked = [scheduler.conversations.get_host(f"chat-{c}") for c in range(3)]
        assert [host.past_length for host in parked] == [len(h) for h in histories]
    # every turn prefilled only its own prompt: resuming costs no re-prefill of the history
    assert stats.prefill_tokens == sum(len(t) for conv in turns for t in conv)
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [f"chat-{c}.safetensors" for c in range(3)]


def test_keep_state_hands_back_a_state_that_resumes_anywhere(sessions, tmp_path):
    """``keep_state`` + ``Stream.state()``: turn 1 on torch; turn 2 resumes that State on ONNX Runtime (same
    model, another backend); turn 3 resumes a state file. Each equals one piece (greedy and seeded); the state
    covers the prompt and every emitted token, the stop token included."""
    name = DEMO_CHECKPOINTS[-1]
    torch_session, ort_session = sessions[(name, "torch")], sessions[(name, "onnxruntime")]
    prompts = prompts_for(ort_session, 3, seed=21)
    with Scheduler(torch_session) as torch_scheduler:
        first = torch_scheduler.submit(prompts[0], 6, temperature=0.0, keep_state=True)
        t1 = first.result(TIMEOUT)
        state = first.state()
    assert state.batch == 1 and state.backend is torch_session.backend
    stop = t1[2]  # a stop token: the stream ends on it, and the state must include it
    history = prompts[0] + t1 + prompts[1]
    with Scheduler(ort_session) as scheduler:
        second = scheduler.submit(prompts[1], 8, temperature=0.9, seed=4, state=state, keep_state=True)
        t2 = second.result(TIMEOUT)
        assert t2 == one_piece(ort_session, history, 8, temperature=0.9, seed=4)
        path = second.state().save(tmp_path / "turn2.safetensors")
        history += t2 + prompts[2]
        third = scheduler.submit(prompts[2], 9, temperature=0.0, stop_tokens=[stop], state=path, keep_state=True)
        t3 = third.result(TIMEOUT)
        assert third.finish_reason == "stop" and t3[-1] == stop
        assert t3 == one_piece(ort_session, history, 9, temperature=0.0, stop_tokens=[stop])
        history += t3
        fourth = scheduler.submit([prompts[0][0]], 4, temperature=0.0, state=third.state())
        assert fourth.result(TIMEOUT) == one_piece(ort_session, history + [prompts[0][0]], 4, temperature=0.0)
        plain = scheduler.submit(prompts[0], 2, temperature=0.0)
        plain.result(TIMEOUT)
        with pytest.raises(InputError, match="keep_state"):
            plain.state()
    assert state.past_length == len(prompts[0]) + len(t1)  # the original State was copied, never advanced


def test_prefix_streams_equal_streams_that_prefilled_it(sessions):
    """A registered prefix is prefilled once; 6 streams started from it (greedy and seeded, joining in two
    waves through 3 slots) equal streams that prefill prefix + suffix themselves, and compute only their
    suffixes. A prefix costs one state, whatever its length."""
    session = sessions[(DEMO_CHECKPOINTS[-1], "onnxruntime")]
    prefix = [t for p in prompts_for(session, 4, seed=30) for t in p]  # a long prefix made of several prompts
    suffixes = prompts_for(session, 6, seed=31)
    options = [dict(temperature=0.0), dict(temperature=1.1, seed=3), dict(temperature=0.8, top_p=0.9, seed=5)] * 2
    with Scheduler(session, max_streams=3) as scheduler:
        handle = scheduler.register_prefix(prefix)
        short = scheduler.register_prefix(prefix[:3])
        streams = [scheduler.submit(s, 7, prefix=handle, **o) for s, o in zip(suffixes, options)]
        got = [s.result(TIMEOUT) for s in streams]
        stats = scheduler.stats()
        with pytest.raises(InputError, match="either a start state or a prefix"):
            scheduler.submit(suffixes[0], 2, prefix=handle, state=handle.state)
    for suffix, o, g in zip(suffixes, options, got):
        assert g == one_piece(session, prefix + suffix, 7, **o), o
    assert stats.prefill_tokens == len(prefix) + 3 + sum(len(s) for s in suffixes)
    assert handle.nbytes == short.nbytes and len(handle) == len(prefix)


def test_a_parked_conversation_survives_a_restart(sessions, tmp_path):
    """Turn 1 in one scheduler (its store a directory); the process's objects are closed and dropped; a new
    store over the same directory resumes turn 2, equal to one piece. A second store sharing the directory (as
    another server instance would) sees the newer state written by the first."""
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    p1, p2, p3 = prompts_for(session, 3, seed=40)
    with Scheduler(session, conversations=tmp_path / "store") as scheduler:
        t1 = scheduler.submit(p1, 5, temperature=0.0, conversation="user/42: café").result(TIMEOUT)  # not a file name
    assert len(list((tmp_path / "store").iterdir())) == 1
    other = ConversationStore(session.backend, tmp_path / "store")
    before = other.get_host("user/42: café")
    with Scheduler(session, conversations=ConversationStore(session.backend, tmp_path / "store")) as scheduler:
        t2 = scheduler.submit(p2, 6, temperature=0.0, conversation="user/42: café").result(TIMEOUT)
    assert t2 == one_piece(session, p1 + t1 + p2, 6, temperature=0.0)
    after = other.get_host("user/42: café")  # rewritten by the other store: read again, not the stale copy
    assert after is not before and after.past_length == len(p1 + t1 + p2 + t2)
    state = other.get("user/42: café")
    resumed = session.prefill([p3], state=state).last_logits
    direct = session.prefill([p1 + t1 + p2 + t2 + p3]).last_logits
    np.testing.assert_allclose(resumed, direct, rtol=1e-4, atol=1e-4)


def test_the_memory_bound_evicts_least_recently_used(sessions, tmp_path):
    """Past ``max_memory_bytes`` the least recently used states leave memory: a directory store reads them back
    from disk; a memory-only store refuses to resume one it forgot (never a silent fresh start)."""
    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    states = [session.prefill([[1 + i, 2, 3]]) for i in range(3)]
    size = HostState.of(states[0]).nbytes
    for directory in (tmp_path / "store", None):
        store = ConversationStore(session.backend, directory, max_memory_bytes=2 * size)
        for i, state in enumerate(states):
            store.put(f"c{i}", state)
        store.get_host("c1")  # c1 becomes the most recently used: c0, then c2 would leave next
        assert store.in_memory() == ["c2", "c1"] and store.memory_bytes == 2 * size
        if directory is None:
            with pytest.raises(InputError, match="dropped from the memory-only store"):
                store.get_host("c0")
            assert store.get_host("never-stored") is None
        else:
            back = store.get_host("c0")
            np.testing.assert_array_equal(back.last_logits, states[0].last_logits)
            for name, array in states[0].to_host().items():
                np.testing.assert_array_equal(back.arrays[name], array)
            assert store.in_memory() == ["c1", "c0"]


def test_bad_state_files_are_refused_and_the_previous_state_kept(sessions, tmp_path):
    """A corrupted (truncated) file, and a state of another model, given to a conversation: one-line
    InputError at submit / put_file, the conversation untouched, and its next turn still equals one piece. The
    store's own file corrupted on disk: a one-line error naming it, the file neither deleted nor rewritten.
    A second turn of a conversation while one is in flight is refused."""
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    foreign_session = sessions[(DEMO_CHECKPOINTS[-1], "onnxruntime")]
    p1, p2 = prompts_for(session, 2, seed=50)
    store_dir = tmp_path / "store"
    with Scheduler(session, conversations=store_dir) as scheduler:
        t1 = scheduler.submit(p1, 5, temperature=0.0, conversation="c").result(TIMEOUT)
        good = (store_dir / "c.safetensors").read_bytes()
        corrupt = tmp_path / "corrupt.safetensors"
        corrupt.write_bytes(good[: len(good) // 2])
        foreign = foreign_session.prefill([[1, 2]]).save(tmp_path / "foreign.safetensors")
        for bad, why in ((corrupt, "not an rnnx state file, or truncated"), (foreign, "different model")):
            for attempt in ("submit", "put_file"):
                with pytest.raises(InputError, match=why) as error:
                    if attempt == "submit":
                        scheduler.submit(p2, 3, conversation="c", state=bad)
                    else:
                        scheduler.conversations.put_file("c", bad)
                assert "\n" not in str(error.value) and str(bad) in str(error.value)
        assert (store_dir / "c.safetensors").read_bytes() == good
        slow = scheduler.submit(p2, 40, temperature=0.0, conversation="c")
        with pytest.raises(InputError, match="already in flight"):
            scheduler.submit(p2, 3, conversation="c")
        t2 = slow.result(TIMEOUT)
    assert t2 == one_piece(session, p1 + t1 + p2, 40, temperature=0.0)
    written = (store_dir / "c.safetensors").read_bytes()
    (store_dir / "c.safetensors").write_bytes(written[:100])
    with pytest.raises(InputError, match="c.safetensors: not an rnnx state file") as error:
        ConversationStore(session.backend, store_dir).get_host("c")
    assert "\n" not in str(error.value)
    assert (store_dir / "c.safetensors").read_bytes() == written[:100]
    store = ConversationStore(session.backend, store_dir)  # docs/serving.md: it stays refused until replaced or deleted
    with pytest.raises(InputError, match="c.safetensors: not an rnnx state file"):
        store.get_host("c")
    store.delete("c")
    assert store.get_host("c") is None and not (store_dir / "c.safetensors").exists()


def test_a_turn_of_no_new_tokens_feeds_its_prompt(sessions):
    """``max_new_tokens=0`` with a conversation or ``keep_state``: the prompt is still prefilled and kept, so a
    0-token turn followed by a turn equals the whole history in one piece, and ``state()`` covers the prompt.
    Without either, a 0-token stream ends at once and computes nothing. A conversation stream without
    ``keep_state`` does not hold its state (the store does)."""
    session = sessions[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    p1, p2, p3 = prompts_for(session, 3, seed=60)
    ended: list = []
    with Scheduler(session) as scheduler:
        feed = scheduler.submit(p1, 0, conversation="c", callback=lambda s, t: ended.append(t))
        assert feed.result(TIMEOUT) == [] and feed.finish_reason == "max_new_tokens" and ended == [None]
        reply = scheduler.submit(p2, 5, temperature=0.0, conversation="c")
        assert reply.result(TIMEOUT) == one_piece(session, p1 + p2, 5, temperature=0.0)
        with pytest.raises(InputError, match="keep_state"):
            reply.state()
        assert scheduler.conversations.get_host("c").past_length == len(p1 + p2) + 5
        kept = scheduler.submit(p3, 0, keep_state=True)
        state = kept.state(TIMEOUT)
        assert kept.result() == [] and state.past_length == len(p3)
        np.testing.assert_allclose(state.last_logits, session.prefill([p3]).last_logits, rtol=1e-4, atol=1e-4)
        resumed = scheduler.submit(p1, 4, temperature=0.9, seed=2, state=state)
        assert resumed.result(TIMEOUT) == one_piece(session, p3 + p1, 4, temperature=0.9, seed=2)
        before = scheduler.stats().prefill_tokens
        plain = scheduler.submit(p1, 0)
        assert plain.result(TIMEOUT) == [] and plain.finish_reason == "max_new_tokens"
        assert scheduler.stats().prefill_tokens == before


def test_store_file_names_ids_and_forgotten_ids(sessions, tmp_path, monkeypatch):
    """Ids differing only in case never share a file (case-insensitive filesystems), nor do Windows device
    names become file names; an id UTF-8 cannot encode (a lone surrogate) is a one-line InputError; a
    memory-only store remembers at most FORGOTTEN_LIMIT forgotten ids (the most recent)."""
    from rnnx.runtime.serving import conversations

    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    states = [session.prefill([[1 + i, 2, 3]]) for i in range(4)]
    store = ConversationStore(session.backend, tmp_path / "store")
    for i, name in enumerate(["chat", "Chat", "con", "NUL.txt"]):
        store.put(name, states[i])
    names = sorted(p.name for p in (tmp_path / "store").iterdir())
    assert len(names) == 4 and "chat.safetensors" in names and sum(n.startswith("~") for n in names) == 3
    fresh = ConversationStore(session.backend, tmp_path / "store")
    for i, name in enumerate(["chat", "Chat", "con", "NUL.txt"]):
        np.testing.assert_array_equal(fresh.get_host(name).last_logits, states[i].last_logits)
    for call in (lambda: store.put("a\ud800b", states[0]), lambda: store.get_host("\udc80")):
        with pytest.raises(InputError, match="UTF-8") as error:
            call()
        assert "\n" not in str(error.value)
    with Scheduler(session) as scheduler, pytest.raises(InputError, match="UTF-8"):
        scheduler.submit([1, 2], 2, conversation="\ud800")
    monkeypatch.setattr(conversations, "FORGOTTEN_LIMIT", 2)
    size = HostState.of(states[0]).nbytes
    memory = ConversationStore(session.backend, None, max_memory_bytes=size)
    for i, state in enumerate(states):
        memory.put(f"c{i}", state)  # each put drops the one before: c0, c1, c2 forgotten, c0 past the limit
    assert memory.get_host("c0") is None
    for gone in ("c1", "c2"):
        with pytest.raises(InputError, match="dropped from the memory-only store"):
            memory.get_host(gone)


def test_a_put_keeps_the_stamp_of_its_own_file(sessions, tmp_path, monkeypatch):
    """Another process replaces a conversation's file right after this store's rename (simulated by a second
    store writing inside the rename): this store must not pair its memory copy with the other's file, so the
    next read returns the other writer's (newer) state from disk."""
    import rnnx.runtime.state as state_module

    session = sessions[(DEMO_CHECKPOINTS[0], "torch")]
    mine, theirs = session.prefill([[1, 2, 3]]), session.prefill([[4, 5, 6, 7]])
    store = ConversationStore(session.backend, tmp_path / "store")
    other = ConversationStore(session.backend, tmp_path / "store")
    real_replace = state_module.os.replace
    raced: list[bool] = []

    def replace_then_race(src, dst):
        real_replace(src, dst)
        if not raced:  # once, right after this store's rename: the other writer's whole put
            raced.append(True)
            other.put("c", theirs)

    monkeypatch.setattr(state_module.os, "replace", replace_then_race)
    store.put("c", mine)
    monkeypatch.setattr(state_module.os, "replace", real_replace)
    assert raced
    back = store.get_host("c")
    np.testing.assert_array_equal(back.last_logits, theirs.last_logits)
    assert back.past_length == 4
