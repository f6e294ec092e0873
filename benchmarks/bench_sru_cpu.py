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

    from rnnx.models.ops.sru import sru_scan, sru_scan_naive
    from rnnx.models.sru import SRU

    torch.manual_seed(0)
    x = torch.randn(L, B, d)
    published = import_published_sru()
    ours = SRU(d, d, num_layers=n).eval()
    lstm = torch.nn.LSTM(d, d, num_layers=n).eval()
    rows: list[list[object]] = []

    def add(name: str, seconds: float, base: float) -> None:
        rows.append([name, f"{seconds * 1e3:.2f}", f"{seconds / base:.2f}x"])

    with torch.inference_mode():
        t_ours = measure(lambda: ours(x))
        add("rnnx.models.SRU forward (inference)", t_ours, t_ours)
        if published is not None:
            ref = published.SRU(d, d, num_layers=n).eval()
            ref.load_state_dict(ours.state_dict())
            add("sru 2.6.0 SRU forward (its C++ CPU kernel)", measure(lambda: ref(x)), t_ours)
        add("torch.nn.LSTM forward", measure(lambda: lstm(x)), t_ours)

        U = torch.randn(L, B, 3 * d)
        wc, bias, c0 = torch.randn(2 * d), torch.randn(2 * d), torch.zeros(B, d)
        kw = dict(hidden_size=d)
        t_scan = measure(lambda: sru_scan(U, x, wc, bias, c0, **kw))
        add("recurrence only: rnnx sru_scan (C++ CPU)", t_scan, t_ours)
        if published is not None:
            scale = torch.ones(1)
            from sru.ops import elementwise_recurrence_inference as published_scan

            add(
                "recurrence only: sru 2.6.0 C++ CPU kernel",
                measure(lambda: published_scan(U, x, wc, bias, c0, 0, d, False, True, scale)),
                t_ours,
            )
        add("recurrence only: naive time loop", measure(lambda: sru_scan_naive(U, x, wc, bias, c0, **kw), repeat=3), t_ours)

    xg = x.clone().requires_grad_()
    t_train = measure(lambda: ours(xg)[0].sum().backward(), repeat=5)
    train_rows = [["rnnx.models.SRU forward+backward", f"{t_train * 1e3:.2f}", "1.00x"]]
    t_lstm = measure(lambda: lstm(xg)[0].sum().backward(), repeat=5)
    train_rows.append(["torch.nn.LSTM forward+backward", f"{t_lstm * 1e3:.2f}", f"{t_lstm / t_train:.2f}x"])

    print(f"SRU CPU benchmark: L={L}, B={B}, d={d}, layers={n}, fp32; {machine_line()}\n")
    print(markdown_table(["what", "ms", "time / rnnx SRU forward"], rows))
    print()
    print(markdown_table(["training step", "ms", "time / rnnx"], train_rows))


if __name__ == "__main__":
    main()
