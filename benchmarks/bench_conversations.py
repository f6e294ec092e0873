"""Serving conversations on CPU: a shared prefix, parked conversations' memory, a resume from disk.

    python benchmarks/bench_conversations.py [--streams 64] [--prefix 2048] [--history 2048] [--repeat 5]

The models: the shipped demo checkpoints (``linear_transformer_copy``: causal linear attention;
``srupp_linear_copy``: SRU++ with linear attention), and beside them, for memory only, an SRU++ of the demo's
shape with softmax attention (random weights: only its KV cache's size matters here). The shared-prefix and
resume sections run ``linear_transformer_copy`` on each of ``--backends`` (torch: the checkpoint;
onnxruntime: exported here, target ``onnxruntime``, CPU provider, rnnx's op library when built); the memory
section on torch. All on CPU, in one run:

* **shared prefix**: ``--streams`` streams whose prompts are one ``--prefix``-token prefix plus their own
  8 tokens, each to its first token (``max_new_tokens=1``), through one ``Scheduler`` (``max_streams`` =
  the stream count): *without* the prefix every stream prefills prefix + suffix; *with* it the prefix is
  registered once (``register_prefix``, timed apart) and every stream prefills only its suffix from a copy
  of the prefix's state. Time to first token (submit of all -> each stream's first token; mean and last)
  and the prefill tokens computed (``SchedulerStats.prefill_tokens``). Every stream's first token is
  checked equal between the two.
* **memory per parked conversation** at 1k / 8k / 32k tokens of context: for the linear models, a real
  prefill of that many tokens parked in a ``ConversationStore`` (the host bytes it holds, and the state
  file's size on disk); for the softmax model, its state bytes computed from its state specs' shapes at
  that context length (its KV cache grows), checked against a real prefill at 1k.
* **resume from disk** of a ``--history``-token conversation, to the first token of a next turn (8 tokens):
  a scheduler whose store keeps nothing in memory (``max_memory_bytes=0``: every resume reads the state file,
  from the OS page cache) resuming the conversation, against a scheduler re-prefilling history + next turn.
  Median of ``--repeat`` alternating runs after one warm-up round; the first tokens are checked equal.

Prints markdown tables (docs/benchmarks.md holds a run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, markdown_table

import rnnx.runtime as rt
from rnnx.export import export_model
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.models.lm import SRUppLM
from rnnx.runtime.backends.torch_backend import TorchBackend
from rnnx.runtime.contract.artifact import numpy_dtype
from rnnx.runtime.serving.conversations import ConversationStore
from rnnx.runtime.serving.scheduler import Scheduler
from rnnx.runtime.state import HostState

SUFFIX = 8
CONTEXTS = (1024, 8192, 32768)


def first_tokens(scheduler: Scheduler, prompts: list[list[int]], **submit) -> tuple[list[float], list[int]]:
    """Submits every prompt at once; returns each stream's time to first token (s) and its first token."""
    arrived: dict[int, float] = {}
    lock = threading.Lock()

    def record(stream: rt.Stream, token) -> None:
        if token is not None:
            with lock:
                arrived.setdefault(stream.id, time.perf_counter())

    start = time.perf_counter()
    streams = [scheduler.submit(p, 1, temperature=0.0, callback=record, **submit) for p in prompts]
    tokens = [s.result(600)[0] for s in streams]
    return [arrived[s.id] - start for s in streams], tokens


def shared_prefix(session: rt.Session, n: int, prefix_len: int, rng: np.random.Generator) -> list[list[object]]:
    vocab = session.vocab_size
    prefix = rng.integers(0, vocab, prefix_len).tolist()
    suffixes = [rng.integers(0, vocab, SUFFIX).tolist() for _ in range(n)]
    with Scheduler(session, max_streams=n) as scheduler:
        ttft_plain, tokens_plain = first_tokens(scheduler, [prefix + s for s in suffixes])
        plain_work = scheduler.stats().prefill_tokens
    with Scheduler(session, max_streams=n) as scheduler:
        start = time.perf_counter()
        handle = scheduler.register_prefix(prefix)
        register_s = time.perf_counter() - start
        ttft_prefix, tokens_prefix = first_tokens(scheduler, suffixes, prefix=handle)
        prefix_work = scheduler.stats().prefill_tokens
    assert tokens_plain == tokens_prefix, "a prefix stream's first token differs from its own prefill's"

    def row(what: str, ttft: list[float], work: int, extra: float = 0.0) -> list[object]:
        return [what, f"{1e3 * (statistics.mean(ttft) + extra):.0f}", f"{1e3 * (max(ttft) + extra):.0f}", f"{work:,}"]

    return [
        row("each stream prefills the prefix", ttft_plain, plain_work),
        row("registered prefix (streams only)", ttft_prefix, prefix_work - prefix_len),
        row("registered prefix (+ its registration)", ttft_prefix, prefix_work, register_s),
        [
            "**ratio** without / with (registration included)",
            f"**{statistics.mean(ttft_plain) / (statistics.mean(ttft_prefix) + register_s):.1f}x**",
            f"**{max(ttft_plain) / (max(ttft_prefix) + register_s):.1f}x**",
            f"**{plain_work / prefix_work:.1f}x**",
        ],
    ]


def spec_bytes(backend, context: int) -> int:
    """State bytes of one row after ``context`` positions, from the state specs' shapes (a KV cache grows)."""
    return sum(int(np.prod(s.concrete_shape(1, context))) * numpy_dtype(s.dtype).itemsize for s in backend.state_specs)


def parked_memory(linear: dict[str, rt.Session], softmax: TorchBackend, rng: np.random.Generator) -> list[list[str]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, session in linear.items():
            store = ConversationStore(session.backend, Path(tmp) / name)
            cells = []
            for context in CONTEXTS:
                state = session.prefill([rng.integers(0, session.vocab_size, context).tolist()])
                store.put(f"c{context}", state)
                on_disk = store.path(f"c{context}").stat().st_size
                cells.append(f"{HostState.of(state).nbytes / 1024:.1f} KiB ({on_disk / 1024:.1f} KiB file)")
            rows.append([f"{name} (linear, measured)", *cells])
    session = rt.Session(softmax)
    measured = HostState.of(session.prefill([rng.integers(0, session.vocab_size, CONTEXTS[0]).tolist()]))
    logits = measured.last_logits.nbytes
    assert measured.nbytes == spec_bytes(softmax, CONTEXTS[0]) + logits, "the KV-cache formula misses the measurement"
    rows.append(
        ["SRU++ softmax, demo shape (KV cache, from shapes)"]
        + [f"{(spec_bytes(softmax, c) + logits) / 2**20:.1f} MiB" for c in CONTEXTS]
    )
    return rows


def resume_from_disk(session: rt.Session, history_len: int, repeat: int, rng: np.random.Generator) -> list[list[str]]:
    vocab = session.vocab_size
    history = rng.integers(0, vocab, history_len).tolist()
    turn = rng.integers(0, vocab, SUFFIX).tolist()
    with tempfile.TemporaryDirectory() as tmp:
        with Scheduler(session, conversations=tmp) as scheduler:
            said = scheduler.submit(history, 1, temperature=0.0, conversation="c").result(600)
            path = scheduler.conversations.path("c")
        parked = path.read_bytes()
        # max_memory_bytes=0: the store keeps nothing in memory, so every resume reads the state file
        store = ConversationStore(session.backend, tmp, max_memory_bytes=0)
        resume, reprefill, tokens = [], [], set()
        with Scheduler(session, conversations=store) as resuming, Scheduler(session) as plain:
            for i in range(repeat + 1):  # the first round warms both up and is not counted
                path.write_bytes(parked)  # each turn stores its own state: start every round from turn 1's
                ttft, token = first_tokens(resuming, [turn], conversation="c")
                assert store.in_memory() == []
                again_ttft, again = first_tokens(plain, [history + said + turn])
                if i:
                    resume.append(ttft[0])
                    reprefill.append(again_ttft[0])
                tokens |= {token[0], again[0]}
    assert len(tokens) == 1, "the resumed turn's first token differs from the re-prefilled one's"
    r, p = statistics.median(resume), statistics.median(reprefill)
    return [
        [f"resume from the state file ({history_len + 1}-token conversation)", f"{1e3 * r:.1f}"],
        [f"re-prefill the conversation ({history_len + 1 + SUFFIX} tokens)", f"{1e3 * p:.1f}"],
        ["**ratio**", f"**{p / r:.1f}x**"],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--prefix", type=int, default=2048)
    parser.add_argument("--history", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", default="torch,onnxruntime", help="comma-separated: torch, onnxruntime")
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    linear = {name: rt.load(demo_checkpoint_path(name)) for name in DEMO_CHECKPOINTS}
    config = dict(linear[DEMO_CHECKPOINTS[-1]].metadata["config"], attention="softmax")
    softmax = TorchBackend(SRUppLM(**config).eval())
    name = DEMO_CHECKPOINTS[0]
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        sessions = {}
        for backend in args.backends.split(","):
            if backend == "torch":
                sessions[backend] = linear[name]
            else:
                out = export_model(str(demo_checkpoint_path(name)), Path(tmp) / name, target=backend, check=False)
                sessions[backend] = rt.load(out.out_dir, backend=backend)
        for backend, session in sessions.items():
            what = f"{args.prefix}-token prefix (+{SUFFIX} tokens each), {name}, {backend}"
            print(f"\n{args.streams} streams sharing a {what}")
            header = ["", "time to first token, mean (ms)", "last stream (ms)", "prefill tokens computed"]
            print(markdown_table(header, shared_prefix(session, args.streams, args.prefix, rng)))
        print("\nmemory per parked conversation (state + last logits), torch")
        print(
            markdown_table(["model", *(f"{c // 1024}k tokens" for c in CONTEXTS)], parked_memory(linear, softmax, rng))
        )
        for backend, session in sessions.items():
            print(f"\nresume from disk vs re-prefill, {name}, {backend}, median of {args.repeat}")
            resumed = resume_from_disk(session, args.history, args.repeat, rng)
            print(markdown_table(["next turn's first token", "ms"], resumed))


if __name__ == "__main__":
    main()
