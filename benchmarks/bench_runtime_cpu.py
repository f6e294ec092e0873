"""Runtime decode speed on CPU: per-step latency and tokens/s vs context length, torch and ONNX
Runtime backends (plain ``run`` and IO binding with OrtValue state) on the demo models, against a
same-size softmax transformer with a KV cache.

    python benchmarks/bench_runtime_cpu.py [--contexts 64,256,1024,4096] [--batch 1] [--steps 32]
                                           [--threads 0] [--export-dir DIR]

For every context length C: prefill C random tokens, then time ``--steps`` single-token steps
(median of 3 runs). The baseline is a minimal causal softmax LM with a KV cache, random weights, the
d_model / layers / heads / d_ff of ``linear_transformer_copy`` (a timing baseline, not a model).
Prints markdown tables; "vs softmax" = softmax-baseline latency / this latency (> 1: faster).
Demo exports (target onnxruntime, fp32) are written to ``--export-dir`` (default: a temp dir).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line

import rnnx.runtime as rt
from rnnx.export import export_model
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path, load_checkpoint


class SoftmaxKVLM(nn.Module):
    """Pre-norm causal softmax transformer LM with a per-layer KV cache (B, H, T, dh); timing only."""

    def __init__(self, vocab: int, d_model: int, layers: int, heads: int, d_ff: int) -> None:
        super().__init__()
        self.heads, self.dh = heads, d_model // heads
        self.embed = nn.Embedding(vocab, d_model)
        self.qkv = nn.ModuleList(nn.Linear(d_model, 3 * d_model) for _ in range(layers))
        self.out = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(layers))
        self.ff = nn.ModuleList(
            nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model)) for _ in range(layers)
        )
        self.n1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.n2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(layers))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor, cache: list) -> tuple[torch.Tensor, list]:
        """tokens (B, L); cache: per layer (key, value) (B, H, T, dh) or None -> (logits (B, L, V), cache)."""
        b, n = tokens.shape
        x = self.embed(tokens)
        new_cache = []
        for i, (qkv, out, ff, n1, n2) in enumerate(zip(self.qkv, self.out, self.ff, self.n1, self.n2)):
            q, k, v = qkv(n1(x)).view(b, n, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
            if cache[i] is not None:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            new_cache.append((k, v))
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache[i] is None and n > 1)
            x = x + out(a.transpose(1, 2).reshape(b, n, -1))
            x = x + ff(n2(x))
        return self.head(x), new_cache


def time_steps(step, steps: int, repeats: int = 3) -> float:
    """Median seconds per call of ``step()`` over ``repeats`` runs of ``steps`` calls."""
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        runs.append((time.perf_counter() - start) / steps)
    return statistics.median(runs)


def bench_session(session: rt.Session, context: int, batch: int, steps: int, rng: np.random.Generator) -> float:
    """Seconds per decode step after a prefill of ``context`` tokens (state forked per run)."""
    prompt = rng.integers(0, session.vocab_size, size=(batch, context))
    base = session.prefill(prompt)
    tokens = rng.integers(0, session.vocab_size, size=batch)
    state = base.fork()
    session.step(tokens, state=state)  # warm-up
    return time_steps(lambda: session.step(tokens, state=state), steps)


@torch.inference_mode()
def bench_softmax(model: SoftmaxKVLM, context: int, batch: int, steps: int) -> float:
    """Seconds per decode step of the baseline after a prefill of ``context`` tokens; every step
    restarts from the same context cache, so the cost at this context length is what is timed."""
    _, cache = model(torch.randint(0, 12, (batch, context)), [None] * len(model.qkv))
    token = torch.randint(0, 12, (batch, 1))

    def step() -> None:
        logits, _ = model(token, cache)
        logits[:, -1].numpy()

    step()
    return time_steps(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", default="64,256,1024,4096")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="torch / ORT intra-op threads (0 = default)")
    parser.add_argument("--export-dir", default=None)
    args = parser.parse_args()
    contexts = [int(c) for c in args.contexts.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    export_root = Path(args.export_dir or tempfile.mkdtemp(prefix="rnnx-bench-"))
    rng = np.random.default_rng(0)
    torch.manual_seed(0)

    cfg = load_checkpoint(demo_checkpoint_path("linear_transformer_copy"))[1]["config"]
    baseline = SoftmaxKVLM(cfg["vocab_size"], cfg["d_model"], cfg["num_layers"], cfg["num_heads"], cfg["d_ff"]).eval()
    rows: dict[str, dict[int, float]] = {
        "softmax KV cache (torch)": {c: bench_softmax(baseline, c, args.batch, args.steps) for c in contexts}
    }
    for name in DEMO_CHECKPOINTS:
        out = export_root / name
        if not (out / "rnnx.json").is_file():
            export_model(str(demo_checkpoint_path(name)), out, target="onnxruntime", check=False)
        from rnnx.runtime.backends.ort_backend import OrtBackend

        sessions = {
            "torch": rt.load(demo_checkpoint_path(name)),
            "onnxruntime": rt.Session(OrtBackend(out, threads=args.threads)),
            "onnxruntime, IO binding": rt.Session(OrtBackend(out, threads=args.threads, io_binding=True)),
        }
        for backend, session in sessions.items():
            rows[f"{name} ({backend})"] = {c: bench_session(session, c, args.batch, args.steps, rng) for c in contexts}

    print(f"# rnnx runtime decode on CPU, batch {args.batch}, {args.steps} steps per run\n")
    print(machine_line() + "\n")
    head = "| model (backend) | " + " | ".join(f"ctx {c}" for c in contexts) + " |"
    rule = "|---|" + "---|" * len(contexts)
    base = rows["softmax KV cache (torch)"]
    print("## per-step latency (ms)\n\n" + head + "\n" + rule)
    for label, r in rows.items():
        print(f"| {label} | " + " | ".join(f"{r[c] * 1e3:.3f}" for c in contexts) + " |")
    print("\n## tokens/s (batch x steps / s)\n\n" + head + "\n" + rule)
    for label, r in rows.items():
        print(f"| {label} | " + " | ".join(f"{args.batch / r[c]:.0f}" for c in contexts) + " |")
    print("\n## vs softmax baseline (baseline latency / latency; > 1 = faster)\n\n" + head + "\n" + rule)
    for label, r in rows.items():
        print(f"| {label} | " + " | ".join(f"{base[c] / r[c]:.2f}" for c in contexts) + " |")
    growth = {label: r[contexts[-1]] / r[contexts[0]] for label, r in rows.items()}
    print(
        f"\nlatency growth ctx {contexts[0]} -> {contexts[-1]}: "
        + ", ".join(f"{k} x{v:.2f}" for k, v in growth.items())
        + f" (log2 ratio of contexts {math.log2(contexts[-1] / contexts[0]):.0f})"
    )


if __name__ == "__main__":
    main()
