"""Causal linear attention vs causal softmax attention of the same size on the CPU, one run.

    python benchmarks/bench_linear_attention_cpu.py [--batch 1 --heads 8 --dim 64]

Prefill: rnnx ``causal_linear_attention`` (chunked) vs ``scaled_dot_product_attention(is_causal=True)``
for L = 256 ... 8192. Decode: one new token at context L — linear attention's O(1) state update vs
softmax attention over a KV cache of length L. Prints markdown tables with ratios.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from timing import machine_line, markdown_table, measure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192])
    args = ap.parse_args()
    B, H, E = args.batch, args.heads, args.dim

    from rnnx.models.ops.causal_linear_attention import causal_linear_attention

    torch.manual_seed(0)
    prefill, decode = [], []
    with torch.inference_mode():
        for L in args.lengths:
            q, k, v = (torch.randn(B, H, L, E) for _ in range(3))
            t_lin = measure(lambda: causal_linear_attention(q, k, v), repeat=3, min_time=0.1)
            t_soft = measure(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), repeat=3, min_time=0.1)
            prefill.append([L, f"{t_lin * 1e3:.2f}", f"{t_soft * 1e3:.2f}", f"{t_soft / t_lin:.2f}x"])

            _, state = causal_linear_attention(q, k, v)
            q1, k1, v1 = (torch.randn(B, H, 1, E) for _ in range(3))
            t_lin1 = measure(lambda: causal_linear_attention(q1, k1, v1, state), min_time=0.1)
            kc, vc = torch.cat([k, k1], 2), torch.cat([v, v1], 2)  # a preallocated cache: appending is O(1)
            t_soft1 = measure(lambda: F.scaled_dot_product_attention(q1, kc, vc), min_time=0.1)
            decode.append([L, f"{t_lin1 * 1e6:.1f}", f"{t_soft1 * 1e6:.1f}", f"{t_soft1 / t_lin1:.2f}x"])

    print(f"Causal attention CPU benchmark: B={B}, H={H}, E=M={E}, fp32; {machine_line()}\n")
    print(markdown_table(["L", "linear (rnnx) ms", "softmax (SDPA) ms", "softmax / linear"], prefill))
    print()
    print(markdown_table(["context L", "linear step us", "softmax step (KV cache) us", "softmax / linear"], decode))


if __name__ == "__main__":
    main()
