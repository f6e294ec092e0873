"""Weight-only quantization on ONNX Runtime CPU: fp32 vs ``--quantize int8`` vs ``--quantize int4``.

    python benchmarks/bench_quantize.py [--models linear-134M,srupp-108M] [--work DIR]

For each model (``bench_decode_at_size.MODELS``: the 134 M-parameter linear transformer and an SRU++ LM of
similar size, both untrained), one run exports the three variants with ``rnnx.export.export_model``
(target onnxruntime, ``check=True``, so each quantized export passes its parity budget first; the figures
are printed) and then measures each variant in a fresh child process, one after the other:

* file: ``model.onnx`` (+ external data) bytes;
* decode step: median wall time of one ``OrtBackend.run`` of one token at batch 1 after a 16-token prefill;
* prefill 256: median of one 256-token call at batch 1;
* peak RSS: the child's peak resident memory (``VmHWM``) after loading the session and running both.

Variants: fp32; int8 and int4 with the head kept fp (the default); and ``+head``, the head quantized too
(``--head int8`` / ``--head int4``), which is what a tool that quantizes every MatMul writes.

Ratios are to fp32 of the same model in the same run. Threads: ONNX Runtime's default intra-op pool.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_decode_at_size import MODELS
from timing import machine_line, markdown_table

#: variant -> export-model's quantize option (None: fp32). "+head": the head quantized too (``--head``).
VARIANTS = {
    "fp32": None,
    "int8": "int8",
    "int8+head": ("int8", "int8"),
    "int4": "int4",
    "int4+head": ("int4", "int4"),
}

CHILD = """
import json, statistics, sys, time
import numpy as np
from rnnx.runtime.backends.ort_backend import OrtBackend

backend = OrtBackend(sys.argv[1])
vocab = backend.vocab_size
rng = np.random.default_rng(0)


def call(length, state):
    ids = rng.integers(0, vocab, (1, length)).astype(np.int64)
    return backend.run({"input_ids": ids, "attention_mask": np.ones_like(ids)}, state)


def median_time(fn, repeat):
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


_, state = call(16, backend.init_state(1))
for _ in range(3):
    _, state = call(1, state)
steps = []
for _ in range(40):
    start = time.perf_counter()
    _, state = call(1, state)
    steps.append(time.perf_counter() - start)
prefill = median_time(lambda: call(256, backend.init_state(1)), 5)
with open("/proc/self/status") as status:  # VmHWM: this process's peak (ru_maxrss keeps the parent's)
    rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(json.dumps({"decode": statistics.median(steps), "prefill": prefill, "rss": rss}))
"""


def export_variants(name: str, work: Path, reuse: bool = False) -> dict[str, Path]:
    import torch

    from rnnx.export import export_model
    from rnnx.export.quantize import QuantizeOptions

    torch.manual_seed(0)
    model = MODELS[name]().eval()
    params = sum(p.numel() for p in model.parameters())
    print(f"## {name}: {params / 1e6:.0f} M parameters", flush=True)
    out = {}
    for variant, option in VARIANTS.items():
        quantize = QuantizeOptions(option[0], head=option[1]) if isinstance(option, tuple) else option
        if reuse and (work / f"{name}-{variant}" / "rnnx.json").is_file():
            print(f"- {variant}: reusing {work / f'{name}-{variant}'}", flush=True)
            out[variant] = work / f"{name}-{variant}"
            continue
        start = time.perf_counter()
        result = export_model(
            model, work / f"{name}-{variant}", target="onnxruntime", quantize=quantize, decode_steps=16
        )
        print(f"- {variant}: exported in {time.perf_counter() - start:.0f} s; {result.parity.verdict()}", flush=True)
        out[variant] = result.out_dir
    return out


def file_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.startswith("model.onnx"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="linear-134M,srupp-108M")
    parser.add_argument("--work", type=Path, default=None, help="Where the exports go (default: a temp dir).")
    parser.add_argument("--reuse", action="store_true", help="Time the exports already in --work (export the rest).")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="rnnx-bench-quantize-"))
    print(machine_line())
    for name in args.models.split(","):
        dirs = export_variants(name, work, args.reuse)
        rows, base = [], None
        for variant in VARIANTS:
            child = subprocess.run([sys.executable, "-c", CHILD, str(dirs[variant])], capture_output=True, text=True)
            if child.returncode:
                raise SystemExit(child.stderr[-3000:])
            figures = json.loads(child.stdout.strip().splitlines()[-1])
            figures["file"] = file_bytes(dirs[variant])
            base = base or figures
            rows.append([
                variant, f"{figures['file'] / 2**20:,.0f} MiB ({figures['file'] / base['file']:.2f}x)",
                f"{figures['decode'] * 1e3:.2f} ms ({figures['decode'] / base['decode']:.2f}x)",
                f"{figures['prefill'] * 1e3:.0f} ms ({figures['prefill'] / base['prefill']:.2f}x)",
                f"{figures['rss'] / 2**20:,.0f} MiB ({figures['rss'] / base['rss']:.2f}x)",
            ])  # fmt: skip
        print(markdown_table(["variant", "file", "decode step", "prefill 256", "peak RSS"], rows), flush=True)


if __name__ == "__main__":
    main()
