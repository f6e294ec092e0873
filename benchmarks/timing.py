"""Side-by-side timing helpers for the benchmarks: timers, the machine and its load, memory read bandwidth."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

#: bytes of the array :func:`read_bandwidth` sums: 16x a 32 MiB last-level cache, so no repeat is served from it
BANDWIDTH_ARRAY_BYTES = 512 << 20


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


def load_line() -> str:
    """The load averages (1 / 5 / 15 min) and the CPU count, one line."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min), {os.cpu_count()} CPUs"


def wait_for_load(
    max_load: float,
    wait_seconds: float,
    log: Callable[[str], None],
    poll_seconds: float = 10.0,
    read_load: Callable[[], float] = lambda: os.getloadavg()[0],
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, float]:
    """Waits up to ``wait_seconds`` for the 1-minute load average to drop below ``max_load``, logging what it
    waits for; returns (whether it did, the last load read). Never raises on a busy machine: the caller says
    in its output that it timed under a higher load."""
    load = read_load()
    waited = 0.0
    while load >= max_load and waited < wait_seconds:
        pause = min(poll_seconds, wait_seconds - waited)
        log(
            f"  waiting for the 1-minute load {load:.2f} to drop below {max_load:.2f} "
            f"({waited:.0f} / {wait_seconds:.0f} s waited)"
        )
        sleep(pause)
        waited += pause
        load = read_load()
    if load < max_load:
        log(f"  1-minute load {load:.2f} < {max_load:.2f} after {waited:.0f} s: timing")
        return True, load
    log(
        f"  WARNING: timing under a 1-minute load of {load:.2f} >= --max-load {max_load:.2f} "
        f"(waited {waited:.0f} s): the times below are inflated by other processes"
    )
    return False, load


def read_bandwidth(threads: int, nbytes: int = BANDWIDTH_ARRAY_BYTES, repeat: int = 7) -> tuple[float, float]:
    """Memory read bandwidth in bytes/s as (best, median) over ``repeat`` timed passes (after one warm-up pass):
    ``threads`` threads each sum their contiguous slice of one float64 array of ``nbytes`` (numpy releases the
    GIL inside the reduction), so every pass streams ``nbytes`` from memory once. numpy's pairwise ``sum`` costs
    some cycles per element: on the 2-core CI machine a single-thread ``max`` (SIMD) read about 1.2x faster (21
    vs 17 GB/s), so this may understate the bandwidth by up to that much. The best pass is the least
    disturbed by other processes: the bandwidth the machine has, which makes ``bytes / best`` the strictest
    weight-read time; the median says how much a shared machine takes away."""
    if threads < 1 or nbytes < 8 * threads:
        raise ValueError(f"read_bandwidth: expected threads >= 1 and nbytes >= 8 * threads, got {threads}, {nbytes}")
    data = np.ones(nbytes // 8)
    slices = np.array_split(data, threads)
    rates = []
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeat + 1):
            start = time.perf_counter()
            total = sum(pool.map(np.sum, slices))
            rates.append(data.nbytes / (time.perf_counter() - start))
            if total != data.size:
                raise RuntimeError(f"read_bandwidth: summed {total}, expected {data.size}")
    return max(rates[1:]), statistics.median(rates[1:])
