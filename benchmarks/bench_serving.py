"""Serving many streams on CPU: continuous batching in-process and through Triton, against one-by-one.

    python benchmarks/bench_serving.py [--streams 1,8,64] [--new-tokens 32] [--prompt 8] [--memory-streams 256]

The model: ``LinearTransformerLM`` (d_model 512, 6 layers, 8 heads, vocab 8,000; random weights, 27 M
parameters), exported with ``export_model`` (target ``onnxruntime``, fp32), served by ONNX Runtime.
For N concurrent streams (distinct random prompts of ``--prompt`` tokens, ``--new-tokens`` greedy tokens
each), all in one run:

* **one after another**: ``Session.generate`` per stream at batch 1 (what serving without batching does);
* **scheduler**: all N submitted at once to ``rnnx.runtime.Scheduler`` (``max_streams`` 64) in this
  process; per-token times from the token callbacks;
* **Triton**: the ``python`` repository variant on a local ``tritonserver`` (nvidia-pytriton 0.7.0, CPU,
  gRPC on 127.0.0.1), N client threads each sending one request per token; per-token times measured by
  the client around each request.

tokens/s = N x new tokens / wall time; per-token latency = the time from one token of a stream to its
next (p50 / p99 over all streams' tokens; the first token, which includes the prefill, is excluded).
The ceiling: one decode step at batch 1 and at the largest N, timed alone; N x step(1) / step(N) is the
most that batching can give here. The state memory: ``--memory-streams`` streams admitted into a
``StatePool``, resident memory before and after, against the state bytes the export declares per stream.
Every stream's tokens are checked equal to its one-by-one run. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import resource
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
from rnnx.models.linear_transformer import LinearTransformerLM
from rnnx.runtime.contract.artifact import ITEMSIZE
from rnnx.runtime.serving.slots import StatePool
from rnnx.runtime.serving.triton import write_repository
from rnnx.runtime.serving.triton.local_server import TritonServer, run_client, venv_python

CONFIG = dict(vocab_size=8000, d_model=512, num_layers=6, num_heads=8)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def one_by_one(session: rt.Session, prompts: list[list[int]], new: int) -> tuple[float, list[float], list[list[int]]]:
    """Wall seconds, inter-token gaps, tokens: each stream generated alone at batch 1."""
    gaps, tokens = [], []
    start = time.perf_counter()
    for prompt in prompts:
        out, last = [], None
        for step in session.generate([prompt], new, temperature=0.0):
            now = time.perf_counter()
            if last is not None:
                gaps.append(now - last)
            last = now
            out.append(step[0])
        tokens.append(out)
    return time.perf_counter() - start, gaps, tokens


def scheduled(session: rt.Session, prompts: list[list[int]], new: int) -> tuple[float, list[float], list[list[int]]]:
    """Wall seconds, inter-token gaps, tokens: all streams submitted at once to a Scheduler."""
    stamps: dict[int, list[float]] = {}
    lock = threading.Lock()

    def record(stream: rt.Stream, token) -> None:
        if token is not None:
            with lock:
                stamps.setdefault(stream.id, []).append(time.perf_counter())

    with rt.Scheduler(session, max_streams=64, max_waiting=4096) as scheduler:
        start = time.perf_counter()
        streams = [scheduler.submit(p, new, temperature=0.0, callback=record) for p in prompts]
        tokens = [s.result(3600) for s in streams]
        wall = time.perf_counter() - start
    gaps = [b - a for ts in stamps.values() for a, b in zip(ts, ts[1:])]
    return wall, gaps, tokens


def through_triton(url: str, model: str, prompts: list[list[int]], new: int) -> tuple[float, list[float], list]:
    """Wall seconds, per-request latencies after the first, tokens: N client threads through Triton."""
    specs = [{"id": 1 + i, "prompt": p, "steps": new} for i, p in enumerate(prompts)]
    out = run_client("streams", {"url": url, "model": model, "streams": specs, "max_pause_s": 0.0}, timeout=3600)
    streams = [out["streams"][str(s["id"])] for s in specs]
    gaps = [lat for s in streams for lat in s["latencies"][1:]]
    return out["seconds"], gaps, [s["tokens"] for s in streams]


def step_seconds(session: rt.Session, batch: int, rng: np.random.Generator, repeat: int = 20) -> float:
    """Median seconds of one decode step at ``batch`` rows (the session alone, no scheduler)."""
    state = session.prefill(rng.integers(0, CONFIG["vocab_size"], (batch, 4)))
    tokens = rng.integers(0, CONFIG["vocab_size"], batch)
    session.step(tokens, state=state)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.step(tokens, state=state)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,8,64")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--memory-streams", type=int, default=256)
    args = parser.parse_args()
    counts = [int(n) for n in args.streams.split(",")]
    print(f"# serving, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC\n\n{machine_line()}\n")
    torch.manual_seed(0)
    model = LinearTransformerLM(**CONFIG).eval()
    params = sum(p.numel() for p in model.parameters())
    rng = np.random.default_rng(0)
    rows, checks = [], []
    with tempfile.TemporaryDirectory() as tmp:
        export = export_model(model, Path(tmp) / "lm", target="onnxruntime", check=False).out_dir
        session = rt.load(export, backend="onnxruntime")
        per_stream = sum(int(np.prod(s.concrete_shape(1, 0))) * ITEMSIZE[s.dtype] for s in session.backend.state_specs)
        print(f"model: {params / 1e6:.1f} M parameters; state per stream {per_stream / 1024:.1f} KiB", flush=True)
        widest = max(counts)
        one, wide = step_seconds(session, 1, rng), step_seconds(session, widest, rng)
        ceiling = widest * one / wide
        print(
            f"one decode step: batch 1 {one * 1e3:.2f} ms, batch {widest} {wide * 1e3:.2f} ms: batching {widest} "
            f"streams can give at most {ceiling:.1f}x the tokens/s of one stream on this machine\n",
            flush=True,
        )
        server = None
        if venv_python() is not None:
            write_repository(export, Path(tmp) / "repo", "python", name="lm", max_streams=64)
            server = TritonServer(Path(tmp) / "repo", Path(tmp) / "server.log").__enter__()
            print(f"tritonserver ready in {server.started_in_s:.1f} s", flush=True)
        try:
            for n in counts:
                prompts = [rng.integers(0, CONFIG["vocab_size"], args.prompt).tolist() for _ in range(n)]
                runs = {
                    "one after another": one_by_one(session, prompts, args.new_tokens),
                    "scheduler (in-process)": scheduled(session, prompts, args.new_tokens),
                }
                if server is not None:
                    runs["Triton (python variant, gRPC)"] = through_triton(
                        server.grpc_url, "lm", prompts, args.new_tokens
                    )
                alone = runs["one after another"][2]
                for how, (wall, gaps, tokens) in runs.items():
                    checks.append(f"N={n} {how}: {'same tokens' if tokens == alone else 'TOKENS DIFFER'}")
                    rows.append([
                        n, how, f"{n * args.new_tokens / wall:,.0f}", f"{percentile(gaps, 50) * 1e3:.2f}",
                        f"{percentile(gaps, 99) * 1e3:.2f}", f"{wall:.2f}",
                    ])  # fmt: skip
                    print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
        finally:
            if server is not None:
                server.__exit__(None, None, None)

        pool = StatePool(session.backend)
        before = rss_bytes()
        prompts = [rng.integers(0, CONFIG["vocab_size"], 4).tolist() for _ in range(args.memory_streams)]
        for i in range(0, len(prompts), 64):
            pool.admit(list(range(i, i + len(prompts[i : i + 64]))), prompts[i : i + 64])
        held = rss_bytes() - before
    print()
    print(markdown_table(["streams", "how", "tokens / s", "p50 ms / token", "p99 ms / token", "wall s"], rows))
    print()
    for line in checks:
        print(line)
    by = {(r[0], r[1]): float(r[2].replace(",", "")) for r in rows}
    if 64 in counts:
        ratio = by[(64, "scheduler (in-process)")] / by[(64, "one after another")]
        print(f"\n64 streams, scheduler / one after another: {ratio:.1f}x tokens/s")
    print(
        f"\nstate memory: {args.memory_streams} streams held {held / 2**20:.1f} MiB resident "
        f"({held / args.memory_streams / 1024:.1f} KiB per stream; declared state {per_stream / 1024:.1f} KiB)"
    )


if __name__ == "__main__":
    main()
