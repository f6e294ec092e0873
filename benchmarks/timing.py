"""Side-by-side timing helpers for the benchmarks (never used by tests)."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable

import torch


def measure(fn: Callable[[], object], *, warmup: int = 2, repeat: int = 7, min_time: float = 0.2) -> float:
    """Median wall time of one call of ``fn`` in seconds (each sample loops until ``min_time``)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        samples.append(elapsed / n)
    return statistics.median(samples)


def machine_line() -> str:
    """One line naming the machine and software, for the results table."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), Python {platform.python_version()}"
    )


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    """A GitHub-markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
