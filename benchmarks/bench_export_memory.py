"""Export time and peak resident memory against model size (issue 13, part 2).

    python benchmarks/bench_export_memory.py [--sizes 10M,58M,134M] [--precision fp32] [--target onnxruntime]
                                             [--decode-steps 4]

Each size is a ``LinearTransformerLM`` (vocab 32,000; the shapes below) with random weights, exported by
``export_model`` with its parity check in a fresh subprocess, so the peak RSS (``ru_maxrss``) is that one
export's. The table reports the weight bytes, the process RSS just before the export (torch, the model),
the peak during it as a multiple of the weight bytes (the whole process: the goal is <= 3x for fp32 from
134M up), the export's increment ``peak - before`` as such a multiple, and the wall time. Prints a markdown
table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line

#: name -> (d_model, layers, heads); vocab 32,000. 134M is GPT-2-small-like (the issue's example).
SIZES = {
    "10M": (256, 4, 4),
    "58M": (512, 8, 8),
    "134M": (768, 12, 12),
    "400M": (1280, 18, 16),
    "1B": (2048, 20, 16),
}

CHILD = r"""
import json, resource, sys, tempfile, time, torch
from rnnx.models.registry import build_model
from rnnx.export import export_model
d_model, layers, heads, precision, target, steps = json.loads(sys.argv[1])
torch.manual_seed(0)
model = build_model("linear_transformer", dict(vocab_size=32000, d_model=d_model, num_layers=layers, num_heads=heads))
params = sum(p.numel() for p in model.parameters())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
start = time.perf_counter()
with tempfile.TemporaryDirectory() as tmp:
    result = export_model(model, tmp + "/out", target=target, precision=precision, decode_steps=steps)
    passed = result.parity.passed
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(dict(params=params, before=before, peak=peak, seconds=seconds, passed=passed)))
"""


def run_one(size: str, precision: str, target: str, steps: int) -> dict:
    d_model, layers, heads = SIZES[size]
    args = json.dumps([d_model, layers, heads, precision, target, steps])
    out = subprocess.run([sys.executable, "-c", CHILD, args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10M,58M,134M")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "fp16"))
    parser.add_argument("--target", default="onnxruntime", choices=("onnxruntime", "tensorrt"))
    parser.add_argument("--decode-steps", type=int, default=4)
    args = parser.parse_args()
    print(machine_line())
    print(f"export_model ({args.target}, {args.precision}, parity with {args.decode_steps} decode steps)\n")
    columns = ["model", "parameters", "fp32 weights", "RSS before", "peak RSS", "peak / weights",
               "(peak - before) / weights"]  # fmt: skip
    print("| " + " | ".join([*columns, "export time", "parity"]) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for size in args.sizes.split(","):
        r = run_one(size, args.precision, args.target, args.decode_steps)
        weights = 4 * r["params"]
        mib = 2**20
        print(
            f"| {size} | {r['params'] / 1e6:,.1f} M | {weights / mib:,.0f} MiB | {r['before'] / mib:,.0f} MiB | "
            f"{r['peak'] / mib:,.0f} MiB | {r['peak'] / weights:.2f}x | {(r['peak'] - r['before']) / weights:.2f}x | "
            f"{r['seconds']:.1f} s | "
            f"{'PASS' if r['passed'] else 'FAIL'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
