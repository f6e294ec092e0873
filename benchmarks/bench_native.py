"""The native runtime (C API) against the Python runtime and the bare ONNX Runtime step loop, CPU decode.

    python benchmarks/bench_native.py [--models linear_transformer_copy,srupp_linear_copy,linear-134M]
                                      [--batches 1,8] [--work DIR]

For each model (the two demo exports and the untrained 134 M-parameter linear transformer of
``bench_decode_at_size``), all exported for ONNX Runtime, and each batch, one run measures the median
wall time of one decode step (one token per row, after a 5-token prefill), three ways, each with rnnx's ONNX
Runtime op library registered and ONNX Runtime's default threads:

* **C++**: ``rnnx-generate --time`` (``rnnx_step`` in a loop on the C API: the graph call, the state kept in
  ONNX Runtime values, each row's logits copied out);
* **Python**: ``rnnx.runtime`` ``Session.step``, with IO binding and without;
* **bare**: ``onnxruntime.InferenceSession.run`` fed numpy arrays, the present state fed back as the next
  past: the floor any runtime on this ONNX Runtime pays.

Reported: the step time, tokens/s (batch / step time), and the C++ and Python overhead above the bare loop.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, markdown_table

import rnnx.runtime as rt
from rnnx.plugins import native_runtime as native
from rnnx.runtime import ortops


def export(name: str, work: Path) -> Path:
    out = work / name
    if (out / "rnnx.json").is_file():
        return out
    import torch

    from rnnx.export import export_model
    from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path

    if name in DEMO_CHECKPOINTS:
        return export_model(demo_checkpoint_path(name), out, target="onnxruntime", check=False).out_dir
    from bench_decode_at_size import MODELS

    torch.manual_seed(0)
    return export_model(MODELS[name]().eval(), out, target="onnxruntime", check=False).out_dir


def prompts(batch: int, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, min(vocab, 10), 5).tolist() for _ in range(batch)]


def cpp_step(directory: Path, batch: int, vocab: int, steps: int) -> float:
    args = [a for p in prompts(batch, vocab) for a in ("--prompt", " ".join(map(str, p)))]
    result = subprocess.run([str(native.program_path("rnnx-generate")), str(directory), *args, "--max-new-tokens",
                             str(steps + 1), "--ort-ops", str(ortops.library_path()), "--time"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    line = next(x for x in result.stdout.splitlines() if x.startswith("decode step median"))
    return float(line.split()[3]) * 1e-6


def python_step(directory: Path, batch: int, vocab: int, steps: int, io_binding: bool) -> float:
    session = rt.load(directory, backend="onnxruntime", io_binding=io_binding, native_ops=True)
    state = session.prefill(prompts(batch, vocab))
    tokens = np.argmax(state.last_logits, -1)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logits = session.step(tokens, state)
        times.append(time.perf_counter() - start)
        tokens = np.argmax(logits, -1)
    return statistics.median(times)


def bare_step(directory: Path, batch: int, vocab: int, steps: int) -> float:
    import onnxruntime as ort

    from rnnx.runtime.contract.artifact import read_metadata, state_specs

    meta = read_metadata(directory)
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(ortops.library_path()))
    sess = ort.InferenceSession(str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"])
    specs = state_specs(meta)
    past = {s.input: np.zeros(s.concrete_shape(batch, 0), dtype=s.dtype) for s in specs}
    outputs = [o["name"] for o in meta["outputs"]]
    ids = np.array(prompts(batch, vocab), dtype=np.int64)
    result = sess.run(outputs, {"input_ids": ids, "attention_mask": np.ones_like(ids), **past})
    times = []
    for _ in range(steps):
        ids = np.argmax(result[0][:, -1], -1).astype(np.int64)[:, None]
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        feed.update((s.input, result[1 + i]) for i, s in enumerate(specs))
        start = time.perf_counter()
        result = sess.run(outputs, feed)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="linear_transformer_copy,srupp_linear_copy,linear-134M")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rnnx-bench-native-"))
    native.build()
    print(machine_line())
    rows = []
    for name in args.models.split(","):
        directory = export(name, work)
        vocab = rt.load(directory, backend="onnxruntime").vocab_size
        steps = 40 if name == "linear-134M" else 300
        for batch in map(int, args.batches.split(",")):
            bare = bare_step(directory, batch, vocab, steps)
            cpp = cpp_step(directory, batch, vocab, steps)
            py_bound = python_step(directory, batch, vocab, steps, True)
            py_plain = python_step(directory, batch, vocab, steps, False)
            rows.append([
                name, batch, f"{bare * 1e6:,.0f} us", f"{cpp * 1e6:,.0f} us ({(cpp - bare) * 1e6:+,.0f})",
                f"{py_bound * 1e6:,.0f} us ({(py_bound - bare) * 1e6:+,.0f})",
                f"{py_plain * 1e6:,.0f} us ({(py_plain - bare) * 1e6:+,.0f})",
                f"{batch / cpp:,.0f} / {batch / min(py_bound, py_plain):,.0f} ({min(py_bound, py_plain) / cpp:.2f}x)",
            ])  # fmt: skip
            print(rows[-1], flush=True)
    header = ["model", "batch", "bare ORT step", "C++ step (over bare)", "Python, IO binding", "Python, no binding",
              "tokens/s C++ / Python (C++ speedup)"]  # fmt: skip
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
