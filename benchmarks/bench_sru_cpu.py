"""rnnx SRU on the CPU vs the published `sru` package's CPU kernel vs torch.nn.LSTM, one run.

    python benchmarks/bench_sru_cpu.py [--length 256 --batch 16 --hidden 512]

The published package (2.6.0) is imported from .reference/sru-2.6.0 (scripts/setup.sh installs it);
without it its rows are left out. Prints a markdown table of times and ratios.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch
from timing import machine_line, markdown_table, measure

REPO = Path(__file__).resolve().parents[1]


def import_published_sru():
    """The published sru 2.6.0 package, or None when it is not installed beside the repo."""
    path = REPO / ".reference" / "sru-2.6.0"
    if not (path / "sru" / "__init__.py").exists():
        return None
    sys.path.insert(0, str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sru
    return sru


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--length", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=1)
    args = ap.parse_args()
    L, B, d, n = args.length, args.batch, args.hidden, args.layers

    from rnnx.models.ops.sru_scan import sru_scan, sru_scan_naive
    from rnnx.models.sru import SRU

    torch.manual_seed(0)
    x = torch.randn(L, B, d)
    published = import_published_sru()
    ours = SRU(d, d, num_layers=n).eval()
    lstm = torch.nn.LSTM(d, d, num_layers=n).eval()
    layer_rows: list[list[object]] = []
    scan_rows: list[list[object]] = []
    train_rows: list[list[object]] = []

    def add(rows: list[list[object]], name: str, seconds: float) -> None:
        base = float(rows[0][1]) / 1e3 if rows else seconds
        rows.append([name, f"{seconds * 1e3:.2f}", f"{seconds / base:.2f}x"])

    ref = None
    if published is not None:
        ref = published.SRU(d, d, num_layers=n).eval()
        ref.load_state_dict(ours.state_dict())
    with torch.inference_mode():
        add(layer_rows, "rnnx.models.SRU", measure(lambda: ours(x)))
        if ref is not None:
            add(layer_rows, "sru 2.6.0 SRU (its C++ CPU kernel)", measure(lambda: ref(x)))
        add(layer_rows, "torch.nn.LSTM", measure(lambda: lstm(x)))

        U = torch.randn(L, B, 3 * d)
        wc, bias, c0 = torch.randn(2 * d), torch.randn(2 * d), torch.zeros(B, d)
        add(scan_rows, "rnnx sru_scan (C++ CPU kernel)", measure(lambda: sru_scan(U, x, wc, bias, c0, hidden_size=d)))
        if published is not None:
            from sru.ops import elementwise_recurrence_inference as published_scan

            scale = torch.ones(1)
            add(
                scan_rows,
                "sru 2.6.0 C++ CPU kernel",
                measure(lambda: published_scan(U, x, wc, bias, c0, 0, d, False, True, scale)),
            )
        add(
            scan_rows,
            "naive time loop (reference)",
            measure(lambda: sru_scan_naive(U, x, wc, bias, c0, hidden_size=d), repeat=3),
        )

    xg = x.clone().requires_grad_()
    add(train_rows, "rnnx.models.SRU", measure(lambda: ours(xg)[0].sum().backward(), repeat=5))
    if ref is not None:
        ref.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            add(
                train_rows,
                "sru 2.6.0 SRU (Python loop: it has no CPU backward kernel)",
                measure(lambda: ref(xg)[0].sum().backward(), repeat=3),
            )
    add(train_rows, "torch.nn.LSTM", measure(lambda: lstm(xg)[0].sum().backward(), repeat=5))

    print(f"SRU CPU benchmark: L={L}, B={B}, d={d}, layers={n}, fp32; {machine_line()}\n")
    print(markdown_table(["layer forward (inference)", "ms", "time / rnnx"], layer_rows))
    print()
    print(markdown_table(["recurrence only, forward", "ms", "time / rnnx"], scan_rows))
    print()
    print(markdown_table(["layer forward + backward", "ms", "time / rnnx"], train_rows))


if __name__ == "__main__":
    main()
