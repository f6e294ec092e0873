"""What rnnx.runtime's Python layer adds to a decode step: ``Session.step`` and ``StatefulSession.run`` against
the bare ``onnxruntime.InferenceSession.run`` of the same graph with the same feeds, side by side in one run;
and, for choosing the ONNX Runtime backend's thread default, each thread setting with CPU-bound processes beside.

    python benchmarks/bench_runtime_overhead.py [--model DIR ...] [--export-dir DIR] [--threads auto,0,1]
                                                [--load 0,1] [--repeat 9] [--calls 2000] [--prefill 64]
                                                [--stat loop|call] [--clock wall|cpu]

Every model (default: the two demo exports, written to ``--export-dir`` when missing) is opened with
``rnnx.runtime.load(dir, backend="onnxruntime")`` (``--threads``: also through ``OrtBackend(threads=N)``;
``auto`` = the backend's own default, 0 = ONNX Runtime's pool), prefilled with ``[[1, 2, 3]]`` and then timed:

* ``bare``: ``backend.session.run(all outputs, feeds)`` with ``input_ids [[4]]``, ``attention_mask [[1]]`` and
  the state's arrays: the public ``InferenceSession.run``, the floor an application calling ONNX Runtime pays;
* ``core``: the same call into the compiled run that ``InferenceSession.run`` wraps (its ``_sess.run``; the
  backend calls it on the CPU), so ``step - core`` is everything the runtime adds in Python;
* ``step``: ``session.step([4], state)``;
* ``run``: ``session.run({"input_ids": [[4]], "attention_mask": [[1]]}, state=state)``;
* ``prefill``: with ``--prefill L``, ``session.prefill`` of one L-token prompt (a fresh state each call).

Each repeat times ``--calls`` calls of every kind in turn (interleaved, so drifting load hits all alike):
``--stat loop`` (default) a loop of calls of one kind after the other, its mean per call; ``--stat call``
the kinds one call each in turn, the median single call (robust to a busy machine's preemptions, which a
mean counts). The table gives medians over ``--repeat`` repeats in microseconds, the overheads as the
median of the per-repeat differences.

``--load N`` starts N busy-looping processes beside the timing (each level in the list in turn) and stops
them afterwards; the load average is printed with every row. The machine may be shared: rerun when the load
average before a row is far from the processes this script started. ``--clock cpu`` times the calling
thread's CPU time instead of elapsed time: with ``--threads 1`` the graph runs in that thread too, so bare,
step and their difference stay meaningful on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import numpy as np

import rnnx.runtime as rt
from rnnx.runtime.backends.ort_backend import OrtBackend

DEMOS = ("linear_transformer_copy", "srupp_linear_copy")


def demo_exports(root: Path) -> list[Path]:
    """The demo exports (target onnxruntime, fp32) under ``root``, exported when missing (needs torch)."""
    dirs = [root / name for name in DEMOS]
    for name, out in zip(DEMOS, dirs):
        if not (out / "rnnx.json").is_file():
            from rnnx.export import export_model
            from rnnx.models import demo_checkpoint_path

            export_model(demo_checkpoint_path(name), out, target="onnxruntime", check=False)
    return dirs


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` CPU-bound Python processes running beside the block (stopped after it by their own ids)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        if procs:
            time.sleep(1.0)  # let the scheduler see them
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()


CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def per_call(fn: Callable[[], Any], calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per call of ``fn`` over ``calls`` calls, by ``clock``."""
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls * 1e6


def per_call_medians(
    kinds: dict[str, Callable[[], Any]], calls: int, clock: Callable[[], float], every: dict[str, int]
) -> dict[str, float]:
    """Microseconds of the median call of every kind, the kinds' calls interleaved one by one (kind k runs on
    every ``every[k]``-th round only). A call that the scheduler interrupts is an outlier here rather than part
    of a mean, so on a busy machine these medians stay near the quiet machine's times."""
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    order = list(kinds.items())
    for i in range(calls):
        turn = i % len(order)  # each kind leads in turn: none always runs right after another's graph call
        for kind, fn in order[turn:] + order[:turn]:
            if i % every.get(kind, 1) == 0:
                start = clock()
                fn()
                times[kind].append(clock() - start)
    return {kind: statistics.median(t) * 1e6 for kind, t in times.items()}


def open_session(model: Path, threads: str) -> rt.Session:
    """``rt.load`` for ``auto``, else an :class:`OrtBackend` with ``threads=int(threads)``."""
    if threads == "auto":
        return rt.load(model, backend="onnxruntime")
    return rt.Session(OrtBackend(model, threads=int(threads)))


def measure(
    session: rt.Session,
    calls: int,
    repeat: int,
    prefill: int,
    clock: Callable[[], float] = time.perf_counter,
    stat: str = "loop",
) -> dict[str, list[float]]:
    """Per-repeat microseconds of every kind of call (see the module doc), interleaved: ``stat="loop"`` the
    mean of a loop of calls of one kind, ``"call"`` the median of single calls of every kind taken in turn."""
    state = session.prefill([[1, 2, 3]])
    backend = session.backend
    ort_session = backend.session
    names = [o.name for o in ort_session.get_outputs()]
    ids, mask = np.array([[4]], np.int64), np.ones((1, 1), np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask}
    feeds.update({s.input: np.array(state.inner.tensors[s.name]) for s in backend.state_specs})
    prompt = [[int(t) for t in np.arange(prefill) % session.vocab_size]]
    kinds: dict[str, Callable[[], Any]] = {
        "bare": lambda: ort_session.run(names, feeds),
        "core": lambda: ort_session._sess.run(names, feeds, None),
        "step": lambda: session.step([4], state),
        "run": lambda: session.run({"input_ids": [[4]], "attention_mask": [[1]]}, state=state),
    }
    if prefill:
        kinds["prefill"] = lambda: session.prefill(prompt)
    for fn in kinds.values():  # warm-up
        per_call(fn, max(calls // 10, 10))
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(repeat):
        if stat == "call":
            for kind, value in per_call_medians(kinds, calls, clock, {"prefill": 20}).items():
                samples[kind].append(value)
            continue
        for kind, fn in kinds.items():
            samples[kind].append(per_call(fn, calls if kind != "prefill" else max(calls // 20, 10), clock))
    return samples


def load_line() -> str:
    """The 1-minute load average."""
    return f"{os.getloadavg()[0]:.2f}"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=None, help="an export directory (repeatable)")
    parser.add_argument("--export-dir", default=str(Path(tempfile.gettempdir()) / "rnnx-bench-overhead"))
    parser.add_argument("--threads", default="auto", help="comma list: auto, or intra-op threads (0 = ORT's pool)")
    parser.add_argument("--load", default="0", help="comma list of busy processes to run beside")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--prefill", type=int, default=0, help="also time a prefill of this many tokens")
    parser.add_argument(
        "--clock", choices=tuple(CLOCKS), default="wall",
        help="wall: elapsed time; cpu: the calling thread's CPU time (with --threads 1 all the work runs there, so "
        "the overheads hold up when other processes share the cores)",
    )  # fmt: skip
    parser.add_argument(
        "--stat", choices=("loop", "call"), default="loop",
        help="loop: the mean of a loop of calls of one kind; call: the median single call, kinds in turn",
    )  # fmt: skip
    args = parser.parse_args(argv)
    models = [Path(m) for m in args.model] if args.model else demo_exports(Path(args.export_dir))
    threads = [t.strip() for t in args.threads.split(",")]
    loads = [int(n) for n in args.load.split(",")]

    import onnxruntime

    print(
        f"# rnnx.runtime overhead over InferenceSession.run, {args.repeat} repeats x {args.calls} calls, "
        f"{args.clock} clock, {args.stat} statistic\n"
    )
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"onnxruntime {onnxruntime.__version__}, numpy {np.__version__}\n"
    )
    head = ["model", "threads", "busy", "load before", "load after", "bare us", "core us", "step us", "step - bare",
            "step - core", "run us", "run - bare", "step / bare"]  # fmt: skip
    if args.prefill:
        head.append(f"prefill {args.prefill} us")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for busy in loads:
        with busy_processes(busy):
            for model in models:
                for thread in threads:
                    session = open_session(model, thread)
                    before = load_line()
                    s = measure(session, args.calls, args.repeat, args.prefill, CLOCKS[args.clock], args.stat)
                    med = {kind: statistics.median(v) for kind, v in s.items()}
                    step_over = statistics.median(a - b for a, b in zip(s["step"], s["bare"]))
                    core_over = statistics.median(a - b for a, b in zip(s["step"], s["core"]))
                    run_over = statistics.median(a - b for a, b in zip(s["run"], s["bare"]))
                    row = [model.name, thread, busy, before, load_line(), f"{med['bare']:.1f}", f"{med['core']:.1f}",
                           f"{med['step']:.1f}", f"{step_over:+.1f}", f"{core_over:+.1f}", f"{med['run']:.1f}",
                           f"{run_over:+.1f}", f"{med['step'] / med['bare']:.2f}"]  # fmt: skip
                    if args.prefill:
                        row.append(f"{med['prefill']:.0f}")
                    print("| " + " | ".join(str(c) for c in row) + " |", flush=True)
                    session.backend.close()


if __name__ == "__main__":
    main()
