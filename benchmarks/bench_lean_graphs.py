"""Lean graphs, before and after: node counts and decode / prefill times of the demo exports, side by side.

    python benchmarks/bench_lean_graphs.py [--baseline CHECKOUT] [--repeats 3] [--steps 2000] [--load]

For this checkout and, with ``--baseline``, another checkout of rnnx (e.g. ``git worktree add /tmp/base
<commit>``, with its native op library built there), a worker process per checkout exports both demos
(``onnxruntime`` target, fp32) with that checkout's code and measures, on ONNX Runtime's CPU provider with
that checkout's op library registered:

* nodes: the op types of the graph ONNX Runtime runs after its optimizer, with the op library and on stock
  ONNX Runtime (function bodies);
* bare step: ``InferenceSession.run`` of one token at batch 1 with the feeds prepared once (what the graph
  costs);
* ``Session.step``: the same step through rnnx's Python runtime (graph plus runtime);
* prefill: ``Session.prefill`` of 32 tokens at batch 1.

Each figure is the median over ``--repeats`` worker runs, the checkouts alternating (base, this, base,
this, ...), each run the median of 5 blocks of ``--steps`` calls. ``--load`` repeats everything with a
CPU-bound process running beside. The load average is printed before every run. Timings are wall-clock
on this machine: compare ratios within one run, never across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEMOS = ("linear_transformer_copy", "srupp_linear_copy")
HERE = Path(__file__).resolve().parents[1]


def _namespace(checkout: Path, root: Path) -> Path:
    """A folder whose ``rnnx`` package is ``checkout`` (its export / models / runtime / plugins)."""
    tree = root / checkout.name / "rnnx"
    tree.mkdir(parents=True, exist_ok=True)
    for part in ("export", "models", "runtime", "plugins"):
        link = tree / part
        if not link.exists():
            link.symlink_to(checkout / part)
    return tree.parent


def export_demos(export_root: Path) -> None:
    """Exports the demos with the importable rnnx into ``export_root`` (a process of its own: the timing
    processes never import torch)."""
    from rnnx.export import export_model
    from rnnx.models import demo_checkpoint_path

    for name in DEMOS:
        export_model(str(demo_checkpoint_path(name)), export_root / name, target="onnxruntime", check=False)


def worker(export_root: Path, steps: int) -> dict:
    """Measures the demos exported in ``export_root`` with the importable rnnx runtime (torch-free); returns the
    figures."""
    import numpy as np

    import rnnx.runtime as rt

    out = {}
    for name in DEMOS:
        path = export_root / name
        native = _node_counts(path, native_ops=True)
        stock = _node_counts(path, native_ops=False)
        session = rt.load(path, backend="onnxruntime")
        state = session.prefill([[1, 2, 3]])
        ort_session = session.backend.session
        feeds = {}
        for i in ort_session.get_inputs():
            if i.name in ("input_ids", "attention_mask"):
                feeds[i.name] = np.array([[4 if i.name == "input_ids" else 1]], np.int64)
            else:
                shape = [1 if not isinstance(d, int) else d for d in i.shape]
                feeds[i.name] = np.zeros(shape, np.float32)
        names = [o.name for o in ort_session.get_outputs()]

        def bare() -> None:
            ort_session.run(names, feeds)

        def step() -> None:
            session.step([4], state)

        prompt = [list(range(1, 10)) * 3 + [1, 2]]  # 32 tokens

        def prefill() -> None:
            session.prefill(prompt)

        timings = {}
        for label, fn, n in (("bare_us", bare, steps), ("step_us", step, steps), ("prefill_us", prefill, steps // 20)):
            for _ in range(max(n // 10, 5)):
                fn()
            blocks = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(n):
                    fn()
                blocks.append((time.perf_counter() - start) / n * 1e6)
            timings[label] = statistics.median(blocks)
        out[name] = {
            "nodes_native": sum(native.values()),
            "nodes_stock": sum(stock.values()),
            "native_ops": dict(native.most_common()),
            "threads": ort_session.get_session_options().intra_op_num_threads,
            **timings,
        }
    return out


def _node_counts(model_dir: Path, native_ops: bool = True):
    """What ``rnnx.export.graph_nodes.optimized_node_counts`` counts, without importing rnnx.export (torch), and
    for checkouts that predate it."""
    from collections import Counter

    import onnx
    import onnxruntime as ort

    from rnnx.runtime import ortops

    meta = json.loads((Path(model_dir) / "rnnx.json").read_text())
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        from rnnx.runtime.contract.artifact import ort_session_config
    except ImportError:
        from rnnx.runtime.contract.artifact import ort_session_config
    for key, value in ort_session_config(meta).items():
        options.add_session_config_entry(key, value)
    if native_ops:
        ortops.register(options)
    with tempfile.TemporaryDirectory() as tmp:
        options.optimized_model_filepath = str(Path(tmp) / "o.onnx")
        ort.InferenceSession(str(Path(model_dir) / meta["model_file"]), options, providers=["CPUExecutionProvider"])
        graph = onnx.load(str(Path(tmp) / "o.onnx"), load_external_data=False).graph
    return Counter(n.op_type for n in graph.node)


def _run_worker(python_path: Path, export_root: Path, steps: int, export: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(python_path)}
    mode = "--export" if export else "--worker"
    cmd = [sys.executable, str(Path(__file__).resolve()), mode, str(export_root), "--steps", str(steps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker for {python_path} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median_runs(runs: list[dict]) -> dict:
    out = {}
    for name in runs[0]:
        first = runs[0][name]
        out[name] = {k: (statistics.median(r[name][k] for r in runs) if k.endswith("_us") else first[k]) for k in first}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another rnnx checkout (its native op library built)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--load", action="store_true", help="also measure with a CPU-bound process beside")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--export", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.steps)))
        return
    if args.export is not None:
        export_demos(args.export)
        print("{}")
        return
    checkouts = {"this": HERE} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory(prefix="rnnx-lean-") as tmp:
        root = Path(tmp)
        paths = {label: _namespace(path, root / "ns" / label) for label, path in checkouts.items()}
        for label in checkouts:
            _run_worker(paths[label], root / "exports" / label, args.steps, export=True)
        results: dict[str, dict[str, dict]] = {}
        for condition in ("quiet", "load") if args.load else ("quiet",):
            hog = None
            if condition == "load":
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                runs: dict[str, list[dict]] = {label: [] for label in checkouts}
                for _ in range(args.repeats):
                    for label in sorted(checkouts):  # baseline first, then this
                        print(f"[{condition}] {label}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
                        runs[label].append(_run_worker(paths[label], root / "exports" / label, args.steps))
                results[condition] = {label: _median_runs(r) for label, r in runs.items()}
            finally:
                if hog is not None:
                    hog.kill()
    print(json.dumps(results, indent=1))
    print()
    print(
        "| condition | demo | checkout | nodes (native ops) | nodes (stock ORT) | bare step µs | Session.step µs "
        "| overhead µs | prefill 32 µs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for condition, by_label in results.items():
        for name in DEMOS:
            for label in sorted(by_label):
                r = by_label[label][name]
                print(
                    f"| {condition} | {name} | {label} | {r['nodes_native']} | {r['nodes_stock']} | {r['bare_us']:.1f} "
                    f"| {r['step_us']:.1f} | {r['step_us'] - r['bare_us']:.1f} | {r['prefill_us']:.0f} |"
                )
            if "baseline" in by_label:
                b, t = by_label["baseline"][name], by_label["this"][name]
                print(
                    f"| {condition} | {name} | ratio baseline / this | {b['nodes_native'] / t['nodes_native']:.2f}x "
                    f"| {b['nodes_stock'] / t['nodes_stock']:.2f}x | {b['bare_us'] / t['bare_us']:.2f}x "
                    f"| {b['step_us'] / t['step_us']:.2f}x | | {b['prefill_us'] / t['prefill_us']:.2f}x |"
                )


if __name__ == "__main__":
    main()
