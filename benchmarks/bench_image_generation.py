"""Autoregressive pixel-by-pixel image generation on CPU, with the shapes of Katharopoulos et al. 2020 §4.2.

    python benchmarks/bench_image_generation.py [--dataset mnist|cifar10|both] [--steps N] [--batch B]
                                                [--variants recompute,kv-cache,ft-recurrent,rnnx-torch,...]
                                                [--max-seconds S] [--windows K] [--window-steps N]
                                                [--max-load X] [--load-wait S]

The model (random weights: timing only): input = Embedding(256 pixel values, 128) concatenated with a
128-wide sinusoidal position encoding -> post-norm encoder layers built with fast-transformers'
``TransformerEncoderBuilder`` (d_model 256 = 8 heads x 32 query/value dims, feed-forward 1024) ->
Linear(256 -> 30), the parameters of a mixture of 10 discretized logistics from which each next
pixel is sampled (component by its logit, then a logistic, rounded and clamped to 0..255). MNIST: 8
layers, 784 steps per image; CIFAR-10: 16 layers, 3,072 steps. Step t feeds the pixel sampled at
t - 1 (a start value 0 at t = 0) at position t.

Variants, all side by side in one run with the same seeded sampler:

* ``recompute``: full softmax (``attention_type="full"``, ``TriangularCausalMask``), the whole prefix
  run again at every step;
* ``kv-cache``: the same softmax weights in fast-transformers' ``RecurrentEncoderBuilder``
  (``attention_type="full"``), a recurrent softmax whose key / value cache grows by one per step
  ("stateful softmax");
* ``ft-recurrent``: fast-transformers' own recurrent linear model (``RecurrentEncoderBuilder``,
  ``attention_type="causal-linear"``), the weights loaded from the parallel linear model;
* ``rnnx-torch``: ``rnnx.models.convert`` of the parallel linear model in a small stateful module
  (``forward(pixels, positions, state) -> (params, state)``), decoded step by step in PyTorch;
* ``rnnx-ort`` / ``rnnx-ort-trt``: that module exported with ``rnnx.export.export`` (target
  ``onnxruntime`` / ``tensorrt``, fp32, parity check on) and decoded with
  ``rnnx.runtime.load(..., backend="onnxruntime")`` (a ``StatefulSession``, state carried).

Before timing, ft-recurrent / rnnx-torch / rnnx-ort / rnnx-ort-trt must sample the same pixels for the
same seed over a short prefix (``--check-steps``), and so must recompute / kv-cache: the end-to-end
test of ``convert`` and the generic export on a model nobody wrote for rnnx.

How a figure is obtained. First the per-step time is measured in ``--windows`` windows of
``--window-steps`` steps spread over the image (median of 3 runs; a recompute step is timed alone,
once when it takes over 1 s). A window at position t starts from a prefix / cache of length t filled
with random values, which costs what real ones cost. The seconds per image are the sum over all steps
of the per-step time interpolated between windows (the linear models, whose step cost does not depend
on t, get one window). When that estimate is at most ``--max-seconds``, the whole image (batch) is
then generated for real, end to end with sampling, and the measured time is reported ("measured");
otherwise the estimate is reported, marked "extrapolated". ``--steps N`` times only the first N steps
of each image (smoke tests; the figures then are for N-step "images"). Seconds per image = wall time /
batch; images/s = batch / wall time. Threads: torch's and ONNX Runtime's defaults (all cores for torch; for
ONNX Runtime rnnx's choice, one thread under 32 MiB of weights, else the pool).

Load. The load average (``os.getloadavg``) and the CPU count are printed at the start and around each
dataset's timing, and the tables carry the 1-minute load before and after it. ``--max-load X`` waits, up to
``--load-wait`` seconds (printing what it waits for), for the 1-minute load to drop below X before each
dataset is timed; when it does not, the run goes on and says it timed above X (times inflated by others).

Weight read (the ONNX Runtime decoders, batch 1). The bytes a decode step reads: the export's initializers
(read with onnx, external data included; each named initializer once, so weights tied or shared in PyTorch,
one initializer, count once) less the tables only gathered from (the pixel embedding and the position table:
a step reads one row). The read bandwidth, measured right then: each of the session's threads sums its
slice of a 512 MiB float64 array (16x the 32 MiB last-level cache), 7 passes; the best pass is used (the
least disturbed by other processes: the machine's bandwidth, so bytes / best is the strictest weight-read
time) and the median shown beside. Weight-read time = bytes / best bandwidth. Then the bare graph step
(``InferenceSession.run`` of one pixel, feeds made once, no runtime or sampling; median and best of 7
blocks of 50 calls) and the image's per-step time are divided by it (issue 30's goal: <= 1.2x). The
recurrent state (33 KiB a layer, read and written) is left out of the bytes.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import onnx
import torch
from fast_transformers.builders import RecurrentEncoderBuilder, TransformerEncoderBuilder
from fast_transformers.masking import TriangularCausalMask
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import load_line, machine_line, markdown_table, measure, read_bandwidth, wait_for_load

import rnnx.runtime
from rnnx.export import export
from rnnx.models import convert

PIXELS = 256
EMBED = 128
POSITION = 128
D_MODEL = EMBED + POSITION
MIXTURES = 10
OUT = 3 * MIXTURES
ENCODER = dict(
    n_heads=8,
    query_dimensions=32,
    value_dimensions=32,
    feed_forward_dimensions=1024,
    dropout=0.0,
    attention_dropout=0.0,
)
DATASETS = {"mnist": (8, 784), "cifar10": (16, 3072)}  # layers, steps per image
#: Katharopoulos et al. 2020, CPU seconds per image at batch 1
PAPER = {
    "mnist": {"recompute": 72.6, "kv-cache": 7.4, "linear": 5.5},
    "cifar10": {"recompute": 8651.4, "kv-cache": 71.9, "linear": 45.1},
}
VARIANTS = ["recompute", "kv-cache", "ft-recurrent", "rnnx-torch", "rnnx-ort", "rnnx-ort-trt"]
LINEAR = ["ft-recurrent", "rnnx-torch", "rnnx-ort", "rnnx-ort-trt"]
SOFTMAX = ["recompute", "kv-cache"]
START_PIXEL = 0


def sinusoid_table(length: int, width: int) -> Tensor:
    """(length, width) sinusoidal position encoding: sin on even, cos on odd features."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
    table = torch.zeros(length, width)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)
    return table


class Frontend(nn.Module):
    """Pixel embedding + position encoding in, mixture parameters out; shared by every variant."""

    def __init__(self, max_length: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(PIXELS, EMBED)
        self.register_buffer("positions", sinusoid_table(max_length, POSITION), persistent=False)
        self.head = nn.Linear(D_MODEL, OUT)

    def inputs(self, pixels: Tensor, positions: Tensor) -> Tensor:
        """pixels, positions (...) int64 -> (..., 256)."""
        return torch.cat([self.embed(pixels), self.positions[positions]], dim=-1)


class RnnxPixelModel(nn.Module):
    """The exported module: ``forward(pixels (B, L), positions (B, L), state) -> (params (B, L, 30), state)``."""

    def __init__(self, frontend: Frontend, encoder: nn.Module) -> None:
        super().__init__()
        self.frontend, self.encoder = frontend, encoder

    def init_state(self, batch: int) -> Any:
        """One (S, z) linear-attention state per layer, zeros."""
        return self.encoder.init_state(batch)

    def forward(self, pixels: Tensor, positions: Tensor, state: Any) -> tuple[Tensor, Any]:
        """Any number of steps from ``state``."""
        y, state = self.encoder.forward_state(self.frontend.inputs(pixels, positions), state)
        return self.frontend.head(y), state


class Sampler:
    """Seeded sampling from a mixture of discretized logistics; numpy, identical for every variant."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, params: np.ndarray) -> np.ndarray:
        """params (B, 30) = logits, means, log-scales of 10 components -> pixels (B,) int64 in 0..255."""
        params = params.astype(np.float64)
        logits, means, log_scales = params[:, :MIXTURES], params[:, MIXTURES : 2 * MIXTURES], params[:, 2 * MIXTURES :]
        u = self.rng.random((params.shape[0], 2))
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(probs, axis=1) / probs.sum(axis=1, keepdims=True)
        k = np.minimum((cdf < u[:, :1]).sum(axis=1), MIXTURES - 1)
        rows = np.arange(params.shape[0])
        v = np.clip(u[:, 1], 1e-5, 1 - 1e-5)
        x = means[rows, k] + np.exp(np.maximum(log_scales[rows, k], -7.0)) * (np.log(v) - np.log1p(-v))
        return np.clip(np.rint((x + 1.0) * 127.5), 0, PIXELS - 1).astype(np.int64)


@dataclass
class Variant:
    """A decoder: ``new(batch, past)`` is a state after ``past`` steps (random contents when past > 0),
    ``step(pixels (B,) int64, position, state) -> (params (B, 30) numpy, state)``."""

    name: str
    new: Callable[[int, int], Any]
    step: Callable[[np.ndarray, int, Any], tuple[np.ndarray, Any]]
    constant_step: bool  # the step cost does not depend on the position
    session: Optional[rnnx.runtime.StatefulSession] = None  # the ONNX Runtime decoders' session
    model_path: Optional[Path] = None  # and the ONNX file it runs


def softmax_variants(frontend: Frontend, layers: int, max_length: int) -> dict[str, Variant]:
    """``recompute`` and ``kv-cache`` on one set of random softmax weights."""
    parallel = TransformerEncoderBuilder.from_kwargs(n_layers=layers, attention_type="full", **ENCODER).get().eval()
    cached = RecurrentEncoderBuilder.from_kwargs(n_layers=layers, attention_type="full", **ENCODER).get().eval()
    cached.load_state_dict(parallel.state_dict())
    heads, dims = ENCODER["n_heads"], ENCODER["query_dimensions"]

    def recompute_new(batch: int, past: int) -> Tensor:
        return torch.randint(0, PIXELS, (batch, past))

    def recompute_step(pixels: np.ndarray, position: int, prefix: Tensor) -> tuple[np.ndarray, Tensor]:
        prefix = torch.cat([prefix, torch.from_numpy(pixels)[:, None]], dim=1)
        length = prefix.shape[1]
        x = frontend.inputs(prefix, torch.arange(length).expand_as(prefix))
        y = parallel(x, attn_mask=TriangularCausalMask(length))[:, -1]
        return frontend.head(y).numpy(), prefix

    def cache_new(batch: int, past: int) -> Optional[list]:
        if past == 0:
            return None
        return [[torch.randn(batch, heads, past, dims), torch.randn(batch, heads, past, dims)] for _ in range(layers)]

    def cache_step(pixels: np.ndarray, position: int, state: Optional[list]) -> tuple[np.ndarray, list]:
        x = frontend.inputs(torch.from_numpy(pixels), torch.full((len(pixels),), position))
        y, state = cached(x, state=state)
        return frontend.head(y).numpy(), state

    return {
        "recompute": Variant("recompute", recompute_new, recompute_step, False),
        "kv-cache": Variant("kv-cache", cache_new, cache_step, False),
    }


def linear_variants(
    frontend: Frontend, layers: int, names: list[str], export_dir: Path, log: Callable[[str], None]
) -> dict[str, Variant]:
    """``ft-recurrent``, ``rnnx-torch`` and the ONNX Runtime decoders on one set of random linear weights."""
    parallel = TransformerEncoderBuilder.from_kwargs(n_layers=layers, attention_type="causal-linear", **ENCODER)
    parallel = parallel.get().eval()
    variants: dict[str, Variant] = {}

    def constant(
        name: str, new: Callable[[int], Any], step: Callable[..., tuple[np.ndarray, Any]], **extra: Any
    ) -> None:
        variants[name] = Variant(name, lambda batch, past: new(batch), step, True, **extra)

    if "ft-recurrent" in names:
        recurrent = RecurrentEncoderBuilder.from_kwargs(n_layers=layers, attention_type="causal-linear", **ENCODER)
        recurrent = recurrent.get().eval()
        recurrent.load_state_dict(parallel.state_dict())

        def ft_step(pixels: np.ndarray, position: int, state: Optional[list]) -> tuple[np.ndarray, list]:
            x = frontend.inputs(torch.from_numpy(pixels), torch.full((len(pixels),), position))
            y, state = recurrent(x, state=state)
            return frontend.head(y).numpy(), state

        constant("ft-recurrent", lambda batch: None, ft_step)

    module = RnnxPixelModel(frontend, convert(parallel)).eval()
    if "rnnx-torch" in names:

        def torch_step(pixels: np.ndarray, position: int, state: Any) -> tuple[np.ndarray, Any]:
            positions = torch.full((len(pixels), 1), position)
            params, state = module(torch.from_numpy(pixels)[:, None], positions, state)
            return params[:, 0].numpy(), state

        constant("rnnx-torch", module.init_state, torch_step)

    for name, target in (("rnnx-ort", "onnxruntime"), ("rnnx-ort-trt", "tensorrt")):
        if name not in names:
            continue
        out_dir = export_dir / f"{layers}-layers-{target}"
        example = (torch.randint(0, PIXELS, (2, 4)), torch.arange(4).repeat(2, 1))
        start = time.perf_counter()
        result = export(module, example, out_dir, output_names=["params"], target=target, check=True)
        assert result.parity is not None and result.parity.passed, result.parity
        log(f"  exported {name} ({target}) in {time.perf_counter() - start:.1f} s: {result.parity.verdict()}")
        session = rnnx.runtime.load(out_dir, backend="onnxruntime")

        def ort_new(batch: int, session: rnnx.runtime.StatefulSession = session) -> rnnx.runtime.State:
            return session.new_state(batch)

        def ort_step(
            pixels: np.ndarray, position: int, state: Any, session: rnnx.runtime.StatefulSession = session
        ) -> tuple[np.ndarray, Any]:
            positions = np.full((len(pixels), 1), position, dtype=np.int64)
            params = session.run(pixels=pixels[:, None], positions=positions, state=state)["params"]
            return params[:, 0], session.state

        model_path = out_dir / session.metadata["model_file"]
        constant(name, ort_new, ort_step, session=session, model_path=model_path)
    return variants


@torch.no_grad()
def generate(variant: Variant, batch: int, steps: int, seed: int) -> tuple[np.ndarray, float]:
    """The first ``steps`` pixels of ``batch`` images, sampled; returns them and the wall time."""
    sampler = Sampler(seed)
    state = variant.new(batch, 0)
    pixels = np.full(batch, START_PIXEL, dtype=np.int64)
    out = []
    start = time.perf_counter()
    for t in range(steps):
        params, state = variant.step(pixels, t, state)
        pixels = sampler(params)
        out.append(pixels)
    return np.stack(out, axis=1), time.perf_counter() - start


@torch.no_grad()
def window(variant: Variant, batch: int, position: int, n: int) -> float:
    """Median seconds per step over ``n`` steps from ``position`` (3 runs, each from a fresh state)."""
    samples = []
    for _ in range(3):
        sampler, state = Sampler(0), variant.new(batch, position)
        pixels = np.full(batch, START_PIXEL, dtype=np.int64)
        start = time.perf_counter()
        for t in range(position, position + n):
            params, state = variant.step(pixels, t, state)
            pixels = sampler(params)
        samples.append((time.perf_counter() - start) / n)
    return statistics.median(samples)


def estimate(variant: Variant, batch: int, steps: int, windows: int, window_steps: int) -> tuple[float, str]:
    """Seconds for ``steps`` steps from per-step times measured in windows, interpolated over positions."""
    n = min(window_steps, steps)
    if variant.constant_step:
        return window(variant, batch, 0, n) * steps, f"1 window of {n} steps"
    if variant.name == "recompute":  # one step = one forward over the prefix: time single steps
        n = 1
    starts = sorted({round(x) for x in np.linspace(0, steps - n, max(windows, 2))})
    per_step = []
    for s in starts:
        if n == 1:  # a recompute step leaves its prefix as it was: time the same step again
            prefix, pixels = variant.new(batch, s), np.full(batch, START_PIXEL, dtype=np.int64)
            with torch.no_grad():
                first = time.perf_counter()
                variant.step(pixels, s, prefix)
                first = time.perf_counter() - first
                if first > 1.0:  # a long prefix: one call is a measurement already
                    per_step.append(first)
                else:
                    per_step.append(measure(lambda: variant.step(pixels, s, prefix), warmup=0, repeat=3, min_time=0.0))
        else:
            per_step.append(window(variant, batch, s, n))
    centres = [s + (n - 1) / 2 for s in starts]
    total = float(np.interp(np.arange(steps), centres, per_step).sum())
    return total, f"{len(starts)} windows of {n} step{'s' * (n > 1)}"


def check_same(variants: dict[str, Variant], names: list[str], steps: int, seed: int) -> str:
    """Asserts that ``names`` sample the same pixels for ``seed`` over ``steps`` steps (batch 2)."""
    present = [n for n in names if n in variants]
    if len(present) < 2:
        return ""
    pixels = {n: generate(variants[n], 2, steps, seed)[0] for n in present}
    first = pixels[present[0]]
    for n in present[1:]:
        same = pixels[n] == first
        assert same.all(), f"{n} differs from {present[0]} at {np.argwhere(~same)[:5].tolist()} (step, image)"
    return f"{', '.join(present)}: same {first.size} pixels for seed {seed} ({steps} steps x 2 images)"


@dataclass
class WeightBytes:
    """The weights of an ONNX export, from its initializers (external data included)."""

    total: int  # sum of every initializer's nbytes, each named initializer once
    gathered: int  # of which tables only ever read through Gather / GatherND input 0 (a step reads a few rows)
    count: int  # initializers
    duplicate: int  # bytes in initializers whose contents equal an earlier one's (counted again: a separate buffer)

    @property
    def read(self) -> int:
        """The weight bytes a decode step reads: every initializer but the gathered-only tables."""
        return self.total - self.gathered


GATHERS = ("Gather", "GatherND")


def initializer_bytes(model_path: Path) -> WeightBytes:
    """The weight bytes of the ONNX model at ``model_path``, read with onnx (external data loaded from the model's
    folder). An initializer is one named tensor however many nodes read it, so weights shared or tied in PyTorch
    (one parameter, one initializer) count once; equal contents under two names are two buffers and count twice
    (reported in ``duplicate``)."""
    model = onnx.load(str(model_path), load_external_data=True)
    graph = model.graph
    uses: dict[str, list[tuple[str, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            uses.setdefault(name, []).append((node.op_type, index))
    total = gathered = duplicate = 0
    seen: set[bytes] = set()
    for initializer in graph.initializer:
        array = onnx.numpy_helper.to_array(initializer)
        total += array.nbytes
        node_uses = uses.get(initializer.name, [])
        if node_uses and all(op in GATHERS and index == 0 for op, index in node_uses):
            gathered += array.nbytes
        digest = hashlib.sha1(np.ascontiguousarray(array).tobytes()).digest() + str(array.dtype).encode()
        if digest in seen:
            duplicate += array.nbytes
        seen.add(digest)
    return WeightBytes(total, gathered, len(graph.initializer), duplicate)


def graph_step_seconds(session: rnnx.runtime.StatefulSession, blocks: int = 7, calls: int = 50) -> tuple[float, float]:
    """(median, best) seconds of one bare ``InferenceSession.run`` of a batch-1 decode step (pixels / positions
    (1, 1), a zero state (1, ...), the feeds made once; no rnnx runtime, no sampling): ``blocks`` blocks of
    ``calls`` calls after 10 warm-up calls, seconds per call of each block."""
    ort_session = session.backend.session
    feeds = {}
    for spec in ort_session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        feeds[spec.name] = np.full(shape, 5, np.int64) if spec.type == "tensor(int64)" else np.zeros(shape, np.float32)
    names = [o.name for o in ort_session.get_outputs()]
    for _ in range(10):
        ort_session.run(names, feeds)
    samples = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            ort_session.run(names, feeds)
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples), min(samples)


def weight_read(variant: Variant, log: Callable[[str], None]) -> dict:
    """The weight-read figures of an ONNX Runtime decoder at batch 1: weight bytes a step reads, the read bandwidth
    with the session's thread count (measured now), bytes / best bandwidth, and the bare graph step against it."""
    assert variant.session is not None and variant.model_path is not None, variant.name
    weights = initializer_bytes(variant.model_path)
    threads = variant.session.backend.threads or os.cpu_count() or 1  # 0: ONNX Runtime's pool, one per core
    best, median = read_bandwidth(threads)
    graph_median, graph_best = graph_step_seconds(variant.session)
    row = dict(
        weights=weights, threads=threads, bandwidth=best, bandwidth_median=median, weight_read=weights.read / best,
        graph=graph_median, graph_best=graph_best,
    )  # fmt: skip
    log(
        f"  {variant.name} weights: {weights.count} initializers, {weights.total / 1e6:.2f} MB, of which "
        f"{weights.gathered / 1e6:.2f} MB gathered-only tables -> {weights.read / 1e6:.2f} MB read per step "
        f"({weights.duplicate} bytes with duplicate contents); read bandwidth on {threads} thread(s) best "
        f"{best / 1e9:.2f} GB/s, median {median / 1e9:.2f} GB/s -> weight-read {row['weight_read'] * 1e3:.2f} ms; "
        f"bare graph step {graph_median * 1e3:.2f} ms (best {graph_best * 1e3:.2f} ms) = "
        f"{graph_median / row['weight_read']:.2f}x the weight-read time"
    )
    return row


def paper_figure(dataset: str, name: str) -> Optional[float]:
    """The paper's CPU seconds per image for a variant (its linear figure for every linear decoder)."""
    return PAPER[dataset]["linear" if name in LINEAR else name]


def run_dataset(dataset: str, args: argparse.Namespace, export_dir: Path, log: Callable[[str], None]) -> list[dict]:
    """Builds the models of one dataset, checks the decoders agree, times them; one dict per variant x batch."""
    layers, full_steps = DATASETS[dataset]
    steps = min(args.steps or full_steps, full_steps)
    torch.manual_seed(args.seed)
    frontend = Frontend(full_steps).eval()
    variants: dict[str, Variant] = {}
    if any(n in args.variants for n in SOFTMAX):
        variants.update(softmax_variants(frontend, layers, full_steps))
    if any(n in args.variants for n in LINEAR):
        variants.update(linear_variants(frontend, layers, args.variants, export_dir, log))
    variants = {n: v for n, v in variants.items() if n in args.variants}
    for group in (LINEAR, SOFTMAX):
        line = check_same(variants, group, min(args.check_steps, steps), args.seed)
        if line:
            log(f"  {line}")
    quiet = None
    if args.max_load is not None:
        quiet, _ = wait_for_load(args.max_load, args.load_wait, log)
    load = dict(before=os.getloadavg()[0], quiet=quiet)
    log(f"  {dataset} timing starts: {load_line()}")
    rows = []
    for batch in sorted({1, args.batch}):
        for name, variant in variants.items():
            guess, how = estimate(variant, batch, steps, args.windows, args.window_steps)
            if guess <= args.max_seconds:
                _, seconds = generate(variant, batch, steps, args.seed)
                kind = "measured"
            else:
                seconds, kind = guess, f"extrapolated ({how})"
            rows.append(
                dict(
                    dataset=dataset, variant=name, batch=batch, steps=steps, seconds=seconds, kind=kind, estimate=guess,
                    load=load,
                )
            )  # fmt: skip
            log(f"  {dataset} {name} batch {batch}: {seconds:.2f} s for {steps} steps, {kind} (estimate {guess:.2f} s)")
    for row in rows:
        variant = variants[row["variant"]]
        if row["batch"] == 1 and variant.session is not None:
            row["weight_read"] = weight_read(variant, log)
    load["after"] = os.getloadavg()[0]
    log(f"  {dataset} timing done: {load_line()}")
    return rows


def tables(rows: list[dict], args: argparse.Namespace) -> str:
    """The markdown tables: seconds per image at batch 1 beside the paper's, images/s at ``--batch``, ratios."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        mine = {(r["variant"], r["batch"]): r for r in rows if r["dataset"] == dataset}
        steps = next(iter(mine.values()))["steps"]
        full = steps == DATASETS[dataset][1]
        body = []
        for name in VARIANTS:
            one = mine.get((name, 1))
            if one is None:
                continue
            per_image = one["seconds"]
            row = [name, f"{per_image:,.2f}", f"{per_image / steps * 1e3:.2f}", one["kind"]]
            row.append(f"{paper_figure(dataset, name):,.1f}")
            row.append(f"{per_image / paper_figure(dataset, name):.2f}" if full else "n/a")
            if args.batch > 1:
                big = mine.get((name, args.batch))
                row += [f"{big['seconds'] / args.batch:,.2f}", f"{args.batch / big['seconds']:.3f}", big["kind"]]
            body.append(row)
        header = ["variant", "s / image (batch 1)", "ms / step (batch 1)", "how", "paper s / image", "ours / paper"]
        if args.batch > 1:
            header += [f"s / image (batch {args.batch})", f"images / s (batch {args.batch})", "how"]
        layers, full_steps = DATASETS[dataset]
        what = f"{steps} of {full_steps} steps per image" if not full else f"{full_steps} steps per image"
        load = next(iter(mine.values()))["load"]
        load_text = f"1-minute load average {load['before']:.2f} before timing, {load['after']:.2f} after"
        if load["quiet"] is False:
            load_text += f" (timed above --max-load {args.max_load:.2f}: times inflated by other processes)"
        out.append(f"### {dataset}: {layers} layers, {what}\n\n{load_text}\n\n" + markdown_table(header, body))
        reads = [(name, one) for (name, batch), one in mine.items() if batch == 1 and "weight_read" in one]
        if reads:
            out.append(weight_read_table(reads))
        ratios = []
        for a, b, paper in (
            ("kv-cache", "ft-recurrent", PAPER[dataset]["kv-cache"] / PAPER[dataset]["linear"]),
            ("kv-cache", "rnnx-ort", PAPER[dataset]["kv-cache"] / PAPER[dataset]["linear"]),
            ("recompute", "rnnx-ort", PAPER[dataset]["recompute"] / PAPER[dataset]["linear"]),
            ("ft-recurrent", "rnnx-ort", None),
            ("ft-recurrent", "rnnx-ort-trt", None),
            ("ft-recurrent", "rnnx-torch", None),
        ):
            for batch in sorted({1, args.batch}):
                if (a, batch) in mine and (b, batch) in mine:
                    ratio = mine[(a, batch)]["seconds"] / mine[(b, batch)]["seconds"]
                    paper_text = f"{paper:.1f}x" if paper is not None and batch == 1 else "-"
                    ratios.append([f"{a} / {b}", batch, f"{ratio:.2f}x", paper_text])
        if ratios:
            out.append(markdown_table(["time ratio (> 1: the second is faster)", "batch", "ours", "paper"], ratios))
    return "\n\n".join(out)


def weight_read_table(reads: list[tuple[str, dict]]) -> str:
    """The weight-read rows: weight bytes per step, read bandwidth, bytes / bandwidth, the bare graph step and the
    image's step against it (batch 1)."""
    body = []
    for name, one in reads:
        w = one["weight_read"]
        image_step = one["seconds"] / one["steps"]
        body.append(
            [
                f"{name} (batch 1)",
                f"{w['weights'].read / 1e6:.2f} of {w['weights'].total / 1e6:.2f}",
                w["threads"],
                f"{w['bandwidth'] / 1e9:.2f} ({w['bandwidth_median'] / 1e9:.2f})",
                f"{w['weight_read'] * 1e3:.2f}",
                f"{w['graph'] * 1e3:.2f} ({w['graph_best'] * 1e3:.2f})",
                f"**{w['graph'] / w['weight_read']:.2f}x** ({w['graph_best'] / w['weight_read']:.2f}x)",
                f"{image_step * 1e3:.2f}",
                f"{image_step / w['weight_read']:.2f}x",
            ]
        )
    header = [
        "weight read",
        "MB read / step (of initializers)",
        "threads",
        "read GB/s best (median)",
        "weight-read ms",
        "graph ms / step median (best)",
        "graph / weight-read (goal <= 1.2x)",
        "image ms / step",
        "image step / weight-read",
    ]
    return markdown_table(header, body)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=["mnist", "cifar10", "both"], default="both")
    parser.add_argument("--steps", type=int, default=0, help="time only the first N steps of each image (0: all)")
    parser.add_argument("--batch", type=int, default=8, help="the larger batch for images/s (1: batch 1 only)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {VARIANTS}")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="generate for real when the windowed estimate is at most this (seconds per batch), else extrapolate",
    )
    parser.add_argument("--windows", type=int, default=5, help="windows for a position-dependent step cost")
    parser.add_argument("--window-steps", type=int, default=16, help="steps per timing window")
    parser.add_argument("--check-steps", type=int, default=32, help="steps of the same-pixels check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--export-dir", default=None, help="where the exports go (default: a temp dir)")
    parser.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="before timing each dataset, wait for the 1-minute load average to drop below this (default: no wait)",
    )
    parser.add_argument("--load-wait", type=float, default=60.0, help="seconds to wait at most for --max-load")
    args = parser.parse_args(argv)
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {VARIANTS}")
    if args.batch < 1 or args.steps < 0:
        parser.error("--batch must be >= 1 and --steps >= 0")
    if args.load_wait < 0 or (args.max_load is not None and args.max_load <= 0):
        parser.error("--load-wait must be >= 0 and --max-load > 0")
    return args


def main(argv: Optional[list[str]] = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    print(f"# image generation, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine_line()}")
    print(f"{load_line()} (os.getloadavg; a CPU-bound process adds about 1)")
    print(f"command: python benchmarks/bench_image_generation.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    datasets = ["mnist", "cifar10"] if args.dataset == "both" else [args.dataset]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        export_dir = Path(args.export_dir or tmp)
        for dataset in datasets:
            print(f"{dataset}:", flush=True)
            rows += run_dataset(dataset, args, export_dir, lambda line: print(line, flush=True))
    print()
    print(tables(rows, args))
    print(f"\n(total wall time {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
