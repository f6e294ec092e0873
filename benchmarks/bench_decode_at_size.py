"""Decode at real model sizes on CPU against the machine's weight-read bound (issue 13, part 4).

    python benchmarks/bench_decode_at_size.py [--models linear-134M,srupp-108M] [--batches 1,8]
                                              [--context 16] [--steps 16] [--export-dir DIR]

Models (random weights, seed 0, fp32):

* ``linear-134M``: ``LinearTransformerLM`` with GPT-2-small's shape (d_model 768, 12 layers, 12 heads,
  d_ff 3072, vocab 32,000, untied head): 134 M parameters;
* ``srupp-108M``: ``SRUppLM`` with the SRU++ paper's enwik8 base shape (10 layers, hidden 3072,
  attention projection 768, byte vocabulary 256) and rnnx's recurrent (linear) attention, 8 heads:
  108 M parameters.

Each is exported with ``export_model`` (target ``onnxruntime``, fp32, parity check on) and decoded with
``rnnx.runtime`` sessions: the torch backend (the model in eager PyTorch) and the ONNX Runtime backend
(plain ``run``). One decode step is timed after a prefill of ``--context`` tokens (median of 3 runs of
``--steps`` steps, the state carried).

The ceiling: a decode step has to read every weight it multiplies by once (and read and write the
recurrent state), so on a memory-bound machine it cannot be faster than

    bytes per step / memory bandwidth

where bytes per step = the parameter bytes, less embedding tables that a step only gathers one row of,
plus twice the state bytes. The bandwidth is measured in the same run: ``dst.copy_(src)`` of two
1 GiB fp32 tensors (read + write traffic / time) and ``src.sum()`` (read traffic / time), all torch
threads; the larger of the two is used, which gives the smaller (stricter) bound. "step / bound" is
how far a step is from that ceiling (1.0 = at the bound; the issue's goal for ONNX Runtime at 134 M is
<= 1.5). Batch B reads the weights once for B tokens, so tokens/s can grow with B while the bound per
step stays (almost) the same.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, markdown_table

import rnnx.runtime as rt
from rnnx.export import export_model
from rnnx.models.linear_transformer import LinearTransformerLM
from rnnx.models.lm import SRUppLM
from rnnx.models.state import flatten_state
from rnnx.runtime.backends.ort_backend import OrtBackend
from rnnx.runtime.backends.torch_backend import TorchBackend

MODELS: dict[str, Callable[[], nn.Module]] = {
    "linear-134M": lambda: LinearTransformerLM(vocab_size=32000, d_model=768, num_layers=12, num_heads=12),
    "srupp-108M": lambda: SRUppLM(
        vocab_size=256, embed_dim=3072, hidden_size=3072, proj_size=768, num_layers=10, num_heads=8, attention="linear"
    ),
}
GIB = 2**30


def bandwidth(repeat: int = 5) -> tuple[float, float]:
    """(copy, read) bytes/s: ``dst.copy_(src)`` counting read + write, ``src.sum()`` counting reads; medians."""
    src = torch.ones(GIB // 4)
    dst = torch.empty_like(src)
    copy, read = [], []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        dst.copy_(src)
        copy.append(2 * GIB / (time.perf_counter() - start))
        start = time.perf_counter()
        src.sum()
        read.append(GIB / (time.perf_counter() - start))
    return statistics.median(copy[1:]), statistics.median(read[1:])


def bytes_per_step(model: nn.Module, batch: int) -> tuple[int, int]:
    """(weight bytes a step reads, state bytes): parameters less gathered-only embedding tables; the state
    of ``batch`` rows."""
    linear_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    gathered = {
        id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding) and id(m.weight) not in linear_weights
    }
    weights = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in gathered)
    state = sum(t.numel() * t.element_size() for _, t in flatten_state(model.init_state(batch)))
    return weights, state


def step_seconds(session: rt.Session, batch: int, context: int, steps: int, rng: np.random.Generator) -> float:
    """Median seconds per decode step over 3 runs of ``steps`` steps after a ``context``-token prefill."""
    state = session.prefill(rng.integers(0, session.vocab_size, size=(batch, context)))
    tokens = rng.integers(0, session.vocab_size, size=batch)
    session.step(tokens, state=state)  # warm-up
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(steps):
            session.step(tokens, state=state)
        runs.append((time.perf_counter() - start) / steps)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--context", type=int, default=16)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--export-dir", default=None, help="where the exports go (default: a temp dir)")
    args = parser.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}; choose from {sorted(MODELS)}")
    batches = [int(b) for b in args.batches.split(",")]

    print(f"# decode at size, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC\n")
    print(machine_line())
    copy_bw, read_bw = bandwidth()
    bw = max(copy_bw, read_bw)
    print(
        f"memory bandwidth: copy {copy_bw / 1e9:.2f} GB/s (read + write), read {read_bw / 1e9:.2f} GB/s; "
        f"the bound uses {bw / 1e9:.2f} GB/s\n"
    )

    rows, summary = [], []
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.export_dir or tmp)
        for name in names:
            torch.manual_seed(0)
            model = MODELS[name]().eval()
            params = sum(p.numel() for p in model.parameters())
            start = time.perf_counter()
            result = export_model(model, root / name, target="onnxruntime", precision="fp32")
            assert result.parity is not None and result.parity.passed, result.parity
            summary.append(
                f"{name}: {params / 1e6:.1f} M parameters, export + parity {time.perf_counter() - start:.1f} s "
                f"({result.parity.verdict()})"
            )
            print(summary[-1], flush=True)
            sessions = {
                "torch": rt.Session(TorchBackend(model)),
                "onnxruntime": rt.Session(OrtBackend(root / name)),
            }
            for batch in batches:
                weights, state = bytes_per_step(model, batch)
                bound = (weights + 2 * state) / bw
                for backend, session in sessions.items():
                    seconds = step_seconds(session, batch, args.context, args.steps, rng)
                    rows.append(
                        [
                            name, backend, batch, f"{(weights + 2 * state) / 1e6:,.0f}", f"{bound * 1e3:.1f}",
                            f"{seconds * 1e3:.1f}", f"{batch / seconds:,.1f}", f"{seconds / bound:.2f}",
                        ]
                    )  # fmt: skip
                    print("  " + " | ".join(str(c) for c in rows[-1]), flush=True)
            del sessions, model

    print()
    header = ["model", "backend", "batch", "MB read / step", "bound ms", "step ms", "tokens / s", "step / bound"]
    print(markdown_table(header, rows))


if __name__ == "__main__":
    main()
