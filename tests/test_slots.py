"""``StatePool``: streams as rows of one batch state, fed any subset and any number of tokens per call.

The reference is each stream run alone in its own ``Session`` (prefill, then its tokens one call at a time):
the pool's logits after every call must match it on torch and ONNX Runtime, while the other rows, fed
as pads, keep their state; releasing and re-admitting reuses rows and changes no other stream.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.runtime.serving.slots import StatePool

#: the pool's batched calls vs one stream alone: the same fp32 graph at another batch size and padding
TOLERANCE = 1e-4


@pytest.fixture(scope="module", params=["torch", "onnxruntime"])
def session(request, demo_exports):
    name = DEMO_CHECKPOINTS[-1]
    if request.param == "torch":
        return rt.load(demo_checkpoint_path(name))
    return rt.load(demo_exports[(name, "onnxruntime")], backend="onnxruntime")


def alone(session: rt.Session, prompt: list[int], feeds: list[list[int]]) -> list[np.ndarray]:
    """Logits after the prompt and after each feed, the stream run by itself."""
    state = session.prefill([prompt])
    out = [state.last_logits[0]]
    for tokens in feeds:
        state = session.prefill([tokens], state=state)
        out.append(state.last_logits[0])
    return out


def close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.max(np.abs(a - b)) <= TOLERANCE * max(1.0, float(np.max(np.abs(b)))))


def test_subsets_and_multi_token_feeds_match_each_stream_alone(session):
    prompts = {"a": [1, 2, 3, 4, 10], "b": [5, 6, 10], "c": [7, 8, 9, 1, 2, 3, 10]}
    feeds = {"a": [[3], [1, 2, 3], [4]], "b": [[5, 5], [6]], "c": [[7], [8], [9], [1]]}
    want = {k: alone(session, prompts[k], feeds[k]) for k in prompts}
    pool = StatePool(session.backend)
    first = pool.admit(["a", "b"], [prompts["a"], prompts["b"]])
    assert close(first[0], want["a"][0]) and close(first[1], want["b"][0])
    assert close(pool.admit(["c"], [prompts["c"]])[0], want["c"][0])
    assert pool.keys == ["a", "b", "c"] and pool.held_rows == 3
    done = {k: 1 for k in prompts}
    schedule = [["c", "a"], ["a"], ["b", "c"], ["c", "b", "a"], ["c"]]
    for keys in schedule:
        logits = pool.feed(keys, [feeds[k][done[k] - 1] for k in keys])
        for k, row in zip(keys, logits):
            assert close(row, want[k][done[k]]), (k, done[k])
            done[k] += 1
    pool.release(["b"])
    assert pool.keys == ["a", "c"] and pool.held_rows == 2
    # a new stream reuses the freed row; "a" and "c" go on from where they were
    assert close(pool.admit(["d"], [prompts["b"]])[0], want["b"][0])
    assert close(pool.feed(["d"], [feeds["b"][0]])[0], want["b"][1])
    pool.release(["a", "c", "d", "unknown"])
    assert pool.held_rows == 0 and len(pool) == 0


def test_bad_calls_change_nothing(session):
    pool = StatePool(session.backend)
    pool.admit(["a"], [[1, 2, 10]])
    before = pool.backend.state_to_host(pool._state)
    with pytest.raises(rt.InputError, match="already hold a row"):
        pool.admit(["a"], [[1]])
    with pytest.raises(rt.InputError, match="hold no row"):
        pool.feed(["zz"], [[1]])
    with pytest.raises(rt.InputError, match="out of vocabulary"):
        pool.feed(["a"], [[session.vocab_size]])
    with pytest.raises(rt.InputError, match="at least one token"):
        pool.feed(["a"], [[]])
    after = pool.backend.state_to_host(pool._state)
    assert all(np.array_equal(before[k], after[k]) for k in before)
