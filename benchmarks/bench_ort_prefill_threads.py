"""Long prefills on ONNX Runtime's defaults (issue 38, item 7): a small export on the CPU decodes on one intra-op
thread and, since issue 38, runs a call of ``POOL_FROM_TOKENS`` tokens or more on a second session on ONNX
Runtime's default pool. Side by side, in one process:

* ``sweep``: the graph call (``OrtBackend.run``, batch B, L tokens from a fresh state) on one thread against the
  pool, both demos: where the pool starts to pay, which sets ``POOL_FROM_TOKENS``;
* ``prefill``: a ``--prompt``-token prefill of ``srupp_linear_copy`` through ``rnnx.runtime`` (``Session.prefill``)
  at the defaults, against the torch backend at torch's default threads and against the one-session default
  before issue 38 (``threads=1``, what ``threads=None`` opened then);
* ``decode``: the decode step (``Session.step``) before (``threads=1``) and after (the default, its pool session
  already opened by a long prefill), and the pool alone (``threads=0``);
* ``memory``: resident memory (VmRSS) of a fresh process after importing, after opening, after the first long
  prefill and after three more and 64 decode steps; the open time, and the pool session's (lazy) open time.

Every timing condition runs twice: on the machine as it is ("busy 0"), then with one CPU-bound process of our own
beside it ("busy 1": the decode step under load). The 1-minute load average is printed before and after every
table; ``--max-load`` / ``--wait`` wait for a quieter machine first (``timing.wait_for_load``).

    python benchmarks/bench_ort_prefill_threads.py [--prompt 4096] [--busy 0,1] [--rounds 7]
                                                   [--max-load 0.7 --wait 0] [--export-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (batch, length) shapes of the sweep
SWEEP = [(1, 1), (1, 64), (1, 128), (1, 256), (1, 512), (1, 1024), (1, 2048), (1, 4096), (4, 64), (4, 256), (8, 128)]


def rss_mib() -> float:
    """This process's resident memory (VmRSS) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("/proc/self/status: no VmRSS line")


def side_by_side(fns: dict[str, Callable[[], object]], rounds: int, min_time: float) -> dict[str, float]:
    """Median over ``rounds`` of each function's mean seconds per call (each sample loops until ``min_time``);
    the functions take turns within every round, in an order that rotates, so a change of load hits them all."""
    names = list(fns)
    for fn in fns.values():  # warm-up
        fn()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            n, start = 0, time.perf_counter()
            while True:
                fns[name]()
                n += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_time:
                    break
            samples[name].append(elapsed / n)
    return {n: statistics.median(s) for n, s in samples.items()}


def _spin() -> None:
    while True:
        pass


def load1() -> float:
    return os.getloadavg()[0]


def memory_child(path: str, threads: str, prompt: int) -> None:
    """Run in a fresh process: prints one JSON line of RSS (MiB) and open times (ms) for ``threads``."""
    before_import = rss_mib()
    from rnnx.runtime.backends.ort_backend import OrtBackend

    import_rss = rss_mib()
    start = time.perf_counter()
    backend = OrtBackend(path, threads=None if threads == "default" else int(threads))
    open_ms = (time.perf_counter() - start) * 1e3
    opened = rss_mib()
    ids = np.random.default_rng(0).integers(0, backend.vocab_size, (1, prompt))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    start = time.perf_counter()
    _, state = backend.run(feeds, backend.init_state(1))
    first_ms = (time.perf_counter() - start) * 1e3
    first = rss_mib()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        backend.run(feeds, backend.init_state(1))
        times.append((time.perf_counter() - start) * 1e3)
    step = {"input_ids": ids[:, :1], "attention_mask": np.ones((1, 1), np.int64)}
    for _ in range(64):
        _, state = backend.run(step, state)
    pool_open_ms = None
    if backend.pool_from_tokens is not None:
        start = time.perf_counter()
        backend._open_session(0)  # what the first long call opened: its open time alone
        pool_open_ms = (time.perf_counter() - start) * 1e3
    print(json.dumps({
        "threads": threads, "python": before_import, "import": import_rss, "opened": opened, "first": first,
        "later": rss_mib(), "open_ms": open_ms, "first_ms": first_ms, "later_ms": statistics.median(times),
        "pool_open_ms": pool_open_ms, "describe": backend.describe(),
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=4096, help="tokens of the long prefill")
    parser.add_argument("--busy", default="0,1", help="CPU-bound processes of our own beside each timing pass")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2, help="seconds per sample")
    parser.add_argument("--sections", default="sweep,prefill,decode,memory")
    parser.add_argument("--max-load", type=float, default=0.7)
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to wait for --max-load")
    parser.add_argument("--export-dir", default=None)
    parser.add_argument("--memory-child", nargs=3, metavar=("PATH", "THREADS", "PROMPT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child[0], args.memory_child[1], int(args.memory_child[2]))
        return

    import onnxruntime
    import torch
    from timing import load_line, machine_line, markdown_table, wait_for_load

    import rnnx.runtime as rt
    from rnnx.export import export_model
    from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
    from rnnx.runtime.backends import ort_backend
    from rnnx.runtime.backends.ort_backend import OrtBackend

    sections = set(args.sections.split(","))
    busy_levels = [int(b) for b in args.busy.split(",")]
    root = Path(args.export_dir or tempfile.mkdtemp(prefix="rnnx-prefill-threads-"))
    exports = {}
    for name in DEMO_CHECKPOINTS:
        out = root / name
        if not (out / "rnnx.json").is_file():
            export_model(str(demo_checkpoint_path(name)), out, target="onnxruntime", check=False)
        exports[name] = out
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# Long prefills on ONNX Runtime's defaults (issue 38, item 7), {now}\n")
    pool_from = ort_backend.POOL_FROM_TOKENS
    print(machine_line() + f", onnxruntime {onnxruntime.__version__}, POOL_FROM_TOKENS {pool_from}\n")
    wait_for_load(args.max_load, args.wait, print)
    print(load_line() + "\n")
    rng = np.random.default_rng(0)

    for busy in busy_levels:
        spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy)]
        for p in spinners:
            p.start()
        time.sleep(1.0 if busy else 0.0)
        print(f"## busy {busy} (CPU-bound processes of ours beside the timing)\n")
        try:
            if "sweep" in sections:
                rows = []
                for name, path in exports.items():
                    one, pool = OrtBackend(path, threads=1), OrtBackend(path, threads=0)
                    for b, n in SWEEP:
                        ids = rng.integers(0, one.vocab_size, (b, n))
                        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
                        before = load1()
                        t = side_by_side(
                            {"one": lambda: one.run(feeds, one.init_state(b)),
                             "pool": lambda: pool.run(feeds, pool.init_state(b))},
                            max(3, args.rounds - 2), args.min_time / 2,
                        )  # fmt: skip
                        rows.append([name, b, n, b * n, f"{before:.2f} / {load1():.2f}", f"{t['one'] * 1e3:,.2f}",
                                     f"{t['pool'] * 1e3:,.2f}", f"{t['one'] / t['pool']:.2f}"])  # fmt: skip
                        print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
                print("\n### graph call, one thread against the pool (ms; > 1: the pool is faster)\n")
                print(markdown_table(["model", "B", "L", "tokens", "load before / after", "1 thread", "pool",
                                      "1 thread / pool"], rows) + "\n")  # fmt: skip

            srupp = exports["srupp_linear_copy"]
            if "prefill" in sections:
                prompt = rng.integers(0, 12, (1, args.prompt))
                sessions = {
                    f"torch ({torch.get_num_threads()} threads)": rt.load(demo_checkpoint_path("srupp_linear_copy")),
                    "onnxruntime, before (one session, 1 thread)": rt.load(srupp, backend="onnxruntime", threads=1),
                    "onnxruntime, now (default)": rt.load(srupp, backend="onnxruntime"),
                    "onnxruntime, threads=0 (pool only)": rt.load(srupp, backend="onnxruntime", threads=0),
                }
                before = load1()
                t = side_by_side({k: (lambda s=s: s.prefill(prompt)) for k, s in sessions.items()}, args.rounds,
                                 args.min_time)  # fmt: skip
                after = load1()
                base = t[next(iter(t))]
                rows = [[k, f"{v * 1e3:.1f}", f"{base / v:.2f}"] for k, v in t.items()]
                print(f"### {args.prompt}-token prefill of srupp_linear_copy (Session.prefill, batch 1); "
                      f"load {before:.2f} / {after:.2f} before / after\n")  # fmt: skip
                print(markdown_table(["runtime", "ms", "torch / this (> 1: faster than torch)"], rows) + "\n")
                print(f"  now: {sessions['onnxruntime, now (default)'].backend.describe()}\n")

            if "decode" in sections:
                rows = []
                for name, path in exports.items():
                    sessions = {
                        "before (threads=1)": rt.load(path, backend="onnxruntime", threads=1),
                        "now (default)": rt.load(path, backend="onnxruntime"),
                        "threads=0 (pool)": rt.load(path, backend="onnxruntime", threads=0),
                    }
                    prompt = rng.integers(0, 12, (1, args.prompt))
                    states = {k: s.prefill(prompt) for k, s in sessions.items()}  # opens the default's pool session
                    assert sessions["now (default)"].backend.pool_session is not None
                    before = load1()
                    t = side_by_side({k: (lambda s=s, st=states[k]: s.step([3], st)) for k, s in sessions.items()},
                                     args.rounds, args.min_time)  # fmt: skip
                    b0 = t["before (threads=1)"]
                    rows.append([name, f"{before:.2f} / {load1():.2f}"]
                                + [f"{v * 1e6:,.0f}" for v in t.values()]
                                + [f"{t['now (default)'] / b0:.2f}", f"{t['threads=0 (pool)'] / b0:.2f}"])  # fmt: skip
                print(f"### decode step after a {args.prompt}-token prefill (Session.step, batch 1, us)\n")
                print(markdown_table(["model", "load before / after", *t, "now / before", "pool / before"], rows)
                      + "\n")  # fmt: skip
        finally:
            for p in spinners:
                p.kill()
                p.join()

    if "memory" in sections:
        rows = []
        for threads in ("1", "default", "0"):
            out = subprocess.run(
                [sys.executable, __file__, "--memory-child", str(srupp), threads, str(args.prompt)],
                check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            m = json.loads(out.strip().splitlines()[-1])
            rows.append([threads, f"{m['import']:.1f}", f"+{m['opened'] - m['import']:.1f}",
                         f"+{m['first'] - m['import']:.1f}", f"+{m['later'] - m['import']:.1f}", f"{m['open_ms']:.0f}",
                         "-" if m["pool_open_ms"] is None else f"{m['pool_open_ms']:.0f}",
                         f"{m['first_ms']:.0f}", f"{m['later_ms']:.0f}"])  # fmt: skip
        print(f"### srupp_linear_copy: resident memory (MiB, VmRSS of a fresh process) and open time (ms); load "
              f"{load1():.2f}\n")  # fmt: skip
        print(markdown_table(["threads", "RSS after import", "after opening", f"after the first {args.prompt}-token "
                              "prefill", "after 3 more + 64 steps", "open ms", "pool session open ms",
                              "first prefill ms", "later prefill ms"], rows) + "\n")  # fmt: skip
    print(load_line())


if __name__ == "__main__":
    main()
