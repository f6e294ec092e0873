"""The TensorRT cases of ``scripts/gpu_check.sh`` (full mode): small models exported with rnnx and run on
TensorRT against ONNX Runtime, the srupp_linear_copy demo with CUDA graphs and as an fp16 engine,
``rnnx-parity --backend tensorrt``, an engine deserialized in a fresh process, the native runtime's
TensorRT backend, and the self-registering plugin library under ``trtexec --staticPlugins`` and
``polygraphy run --trt --plugins``.

    python3 scripts/gpu_check_cases.py list                  # name, time limit (s), what it checks; one a line
    python3 scripts/gpu_check_cases.py run CASE --work DIR   # one case; exit 0 PASS, 1 FAIL, 77 SKIP
    python3 scripts/gpu_check_cases.py prepare-demo --work DIR   # the demo's engine and reference tokens

``run`` prints what it does and ends with one line ``PASS: ...``, ``FAIL: ...`` or ``SKIP: ...`` (the
shell script puts that line in its summary). ``--work`` holds the exports, the engine cache and the demo's
reference (``demo/manifest.json``); it is reused between cases, so the demo is exported and its engine
built once. The plugin libraries come from ``--plugins`` / ``--static-plugins``, else the environment
(``RNNX_TRT_PLUGINS`` / ``RNNX_TRT_PLUGINS_STATIC``, which gpu_check.sh sets to its build).

Tolerances (``max |TensorRT - ONNX Runtime| / max |ONNX Runtime|`` per output and state tensor, every call;
the decode steps are teacher-forced on ONNX Runtime's greedy tokens):

* an fp32 engine against ONNX Runtime fp32: :data:`TOLERANCES` ``fp32`` = 1e-4, the export's fp32 parity
  tolerance (the engine builder clears ``BuilderFlag.TF32`` for fp32 engines, so their matmuls run in fp32);
* an fp16 engine (from an fp16 export) against ONNX Runtime fp32 on the fp32 export: ``fp16`` = 3e-2 for the
  random-weight models, :data:`DEMO_FP16_TOLERANCE` = 2e-2 for the trained demo;
* the random-weight models' greedy tokens are reported, not required to agree (their top logits can be
  near-ties that fp16 rounding flips); the trained demo's greedy tokens must be identical everywhere;
* the same engine in a fresh process: tokens identical, logits within :data:`REPLAY_TOLERANCE` = 1e-5;
* ``rnnx-parity --backend tensorrt`` against the PyTorch checkpoint: ``--tolerance`` 1e-4 (fp32, as above).

NOT RUN YET: written against the documented TensorRT 10 / 11 Python API, trtexec and polygraphy command lines
and rnnx's own runtime API; no machine this was written on has TensorRT (the GPU machines lent to the
project do not have it either). ``list`` and the pure helpers (:func:`trtexec_shape_args`,
:func:`polygraphy_trt_command`, the model builders) are tested on the CPU by tests/test_gpu_check.py.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

#: The exit code of a skipped case (ctest's convention, as plugin_enqueue_gpu uses).
SKIP_CODE = 77
#: max |TensorRT - ONNX Runtime| / max |ONNX Runtime| allowed per engine precision (see the module doc).
TOLERANCES = {"fp32": 1e-4, "fp16": 3e-2}
#: The trained demo's fp16 engine against ONNX Runtime fp32.
DEMO_FP16_TOLERANCE = 2e-2
#: The same engine deserialized in another process.
REPLAY_TOLERANCE = 1e-5
#: Engine precisions every model case builds.
PRECISIONS = ("fp32", "fp16")
DEMO = "srupp_linear_copy"
#: Rows and new tokens of the demo's greedy runs; the engine's limits.
DEMO_BATCH = 8
DEMO_NEW_TOKENS = 24
DEMO_LIMITS = {"max_batch": DEMO_BATCH, "max_length": 64}


class Skip(Exception):
    """The case cannot run here for a reason that is not a failure (a missing optional tool)."""


class CheckFailed(Exception):
    """The case ran and a check failed (one line)."""


@dataclass(frozen=True)
class Case:
    """One TensorRT case: its name (gpu_check.sh's step is ``trt-<name>``), time limit and what it checks."""

    name: str
    limit_s: int
    what: str


CASES = (
    Case("mask-types", 120, "one SRUScan and one CausalLinearAttention node, plugins only, with an int32 and a bool "
         "pad mask: the int32 engines build and match the naive twins, the bool ones are refused at build"),
    Case("sru-bidirectional", 240, "a stateless bidirectional SRU tagger (rnnx.export.export; layer 0 k = 4), "
         "fp32 and fp16 engines vs ONNX Runtime fp32"),
    Case("sru-k4", 240, "SRULM with embed_dim 48 != hidden_size 64 (layer 0 k = 4, highway projection), "
         "fp32 and fp16 engines vs ONNX Runtime fp32, prefill + 8 steps"),
    Case("attention-e64", 240, "LinearTransformerLM, head dim 64, prompts past two prefill chunks, "
         "fp32 and fp16 engines vs ONNX Runtime fp32"),
    Case("attention-e128", 240, "LinearTransformerLM, head dim 128, prompts past two prefill chunks, "
         "fp32 and fp16 engines vs ONNX Runtime fp32"),
    Case("demo-graphs", 300, "srupp_linear_copy (SRUScan + CausalLinearAttention) fp32 through rnnx.runtime "
         "with CUDA graphs: tokens == eager TensorRT == ONNX Runtime, graphs replayed, batch change"),
    Case("demo-fp16", 300, "rnnx.runtime.load of the demo's fp16 export (backend tensorrt) vs ONNX Runtime fp32 "
         "on its fp32 export: identical greedy tokens, logits within 2e-2"),
    Case("parity-cli", 240, "rnnx-parity DEMO --backend tensorrt --device cuda against the PyTorch checkpoint "
         "(prefill + 16 greedy steps, tolerance 1e-4)"),
    Case("fresh-process", 180, "the demo engine, built by another process, deserialized here: a cache hit "
         "with no build, identical tokens, logits within 1e-5"),
    Case("native", 300, "python -m rnnx.runtime.native with the TensorRT backend; rnnx-generate --backend "
         "tensorrt on the demo engine gives the Python runtime's tokens"),
    Case("trtexec", 240, "trtexec --staticPlugins=librnnx_trt_plugins_static.so builds and runs the demo "
         "without its ONNX local functions (optional: skipped without trtexec)"),
    Case("polygraphy", 300, "polygraphy run --trt --plugins librnnx_trt_plugins_static.so on the demo without "
         "its local functions against the export's saved reference outputs"),
)  # fmt: skip


def case_named(name: str) -> Case:
    """The case called ``name``; KeyError naming the known ones otherwise."""
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(f"unknown case {name!r}; known: {', '.join(c.name for c in CASES)}")


# -- pure helpers (tested on the CPU) -------------------------------------------------------------------


def trtexec_dims(shape: Sequence[int]) -> str:
    """``(2, 8)`` -> ``2x8`` (trtexec's shape syntax)."""
    return "x".join(str(int(d)) for d in shape)


def polygraphy_dims(shape: Sequence[int]) -> str:
    """``(2, 8)`` -> ``[2,8]`` (polygraphy's shape syntax)."""
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def trtexec_shape_args(profile: Any) -> list[str]:
    """``--minShapes`` / ``--optShapes`` / ``--maxShapes`` of one optimization profile (an
    ``rnnx.runtime.tensorrt.Profile``: input name -> ShapeRange), and ``--shapes`` (the run's shapes) = opt."""
    parts = {"min": [], "opt": [], "max": []}
    for name, r in profile.shapes.items():
        for key, shape in (("min", r.min), ("opt", r.opt), ("max", r.max)):
            parts[key].append(f"{name}:{trtexec_dims(shape)}")
    return [
        "--minShapes=" + ",".join(parts["min"]),
        "--optShapes=" + ",".join(parts["opt"]),
        "--maxShapes=" + ",".join(parts["max"]),
        "--shapes=" + ",".join(parts["opt"]),
    ]


def trtexec_flags(tensorrt_version: str) -> list[str]:
    """trtexec's flags for a strongly typed build with CUDA graphs on, valid for the installed major: 10.x needs
    ``--stronglyTyped`` and ``--useCudaGraph``; trtexec 11 builds strongly typed and captures CUDA graphs by
    default (both flags are deprecated no-ops there; ``--noCudaGraph`` would turn graphs off), so it gets none."""
    from rnnx.runtime.tensorrt._trt import parse_version

    major = (parse_version(tensorrt_version) or (0,))[0]
    if major < 11:
        return ["--stronglyTyped", "--useCudaGraph"]
    return []


def polygraphy_trt_command(base: Sequence[str], model: Path, plugins: Path, profile: Any) -> list[str]:
    """The export's ``polygraphy run DIR/model.onnx --onnxrt ...`` (:func:`rnnx.runtime.parity.polygraphy_command`)
    turned into a TensorRT run of ``model`` with the self-registering ``plugins`` library: ``--onnxrt`` ->
    ``--trt --strongly-typed --plugins LIB`` plus the profile's ``--trt-{min,opt,max}-shapes``; the loaded
    inputs, reference outputs and tolerances stay as they are."""
    base = list(base)
    if base[:2] != ["polygraphy", "run"] or "--onnxrt" not in base:
        raise ValueError(f"not an export's polygraphy command: {' '.join(base[:4])} ...")
    shapes: list[str] = []
    for flag, pick in (("--trt-min-shapes", "min"), ("--trt-opt-shapes", "opt"), ("--trt-max-shapes", "max")):
        shapes += [flag, *(f"{name}:{polygraphy_dims(getattr(r, pick))}" for name, r in profile.shapes.items())]
    at = base.index("--onnxrt")
    trt = ["--trt", "--strongly-typed", "--plugins", str(plugins), *shapes]
    return ["polygraphy", "run", str(model), *base[3:at], *trt, *base[at + 1 :]]


def parse_native_rows(output: str) -> dict[int, list[int]]:
    """rnnx-generate's ``row <b>: <token> <token> ...`` lines -> {b: tokens}; other lines are ignored."""
    rows: dict[int, list[int]] = {}
    for line in output.splitlines():
        head, sep, tail = line.partition(":")
        words = head.split()
        if sep and len(words) == 2 and words[0] == "row" and words[1].isdigit():
            rows[int(words[1])] = [int(t) for t in tail.split()]
    return rows


# -- models --------------------------------------------------------------------------------------------


def bidirectional_tagger() -> Any:
    """tokens (B, L) int64 -> tag logits (B, L, 5): Embedding(16, 24) -> SRU(24, 32, 2 layers, bidirectional)
    -> Linear(64, 5); stateless. Layer 0 has input 24 != 2 x 32, so k = 4 (highway projection); layer 1 k = 3."""
    import torch
    from torch import nn

    from rnnx.models import SRU

    class BiSRUTagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(16, 24)
            self.rnn = SRU(24, 32, num_layers=2, bidirectional=True)
            self.head = nn.Linear(64, 5)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h, _ = self.rnn(self.embed(tokens).transpose(0, 1))
            return self.head(h.transpose(0, 1))

    torch.manual_seed(0)
    return BiSRUTagger().eval()


def language_model(case: str) -> Any:
    """The random-weight language model of a case: ``sru-k4``, ``attention-e64`` or ``attention-e128``."""
    import torch

    from rnnx.models import SRULM, LinearTransformerLM

    torch.manual_seed(0)
    if case == "sru-k4":
        return SRULM(vocab_size=32, embed_dim=48, hidden_size=64, num_layers=2).eval()
    if case == "attention-e64":
        return LinearTransformerLM(vocab_size=32, d_model=128, num_layers=2, num_heads=2).eval()
    if case == "attention-e128":
        return LinearTransformerLM(vocab_size=32, d_model=256, num_layers=2, num_heads=2).eval()
    raise KeyError(f"no language model for case {case!r}")


#: Prompt length (tokens) of each language-model case: past two 64-token prefill chunks for attention.
PROMPT_LENGTHS = {"sru-k4": 40, "attention-e64": 150, "attention-e128": 150}


def sru_layer_shapes(model: Any) -> list[tuple[int, int]]:
    """(num_directions, num_matrices) of every SRU layer (cell) in ``model``."""
    from rnnx.models import SRUCell

    return [(m.num_directions, m.num_matrices) for m in model.modules() if isinstance(m, SRUCell)]


def attention_head_dims(model: Any) -> list[int]:
    """The head dim of every linear self-attention block in ``model``."""
    from rnnx.models.linear_transformer import LinearSelfAttention

    return [m.head_dim for m in model.modules() if isinstance(m, LinearSelfAttention)]


# -- running -------------------------------------------------------------------------------------------


@dataclass
class Context:
    """What every case gets: the work folder and the plugin libraries."""

    work: Path
    plugins: Optional[Path]
    static_plugins: Optional[Path]

    @property
    def engines(self) -> Path:
        return self.work / "engines"

    def exports(self, name: str) -> Path:
        return self.work / "exports" / name


def say(message: str) -> None:
    print(message, flush=True)


def rel_error(got: Any, want: Any) -> float:
    """max |got - want| / max |want| (inf for a shape mismatch or a non-finite value)."""
    import numpy as np

    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape != w.shape or not np.isfinite(g).all():
        return float("inf")
    if not w.size:
        return 0.0
    return float(np.max(np.abs(g - w)) / max(float(np.max(np.abs(w))), 1e-30))


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (a program's error), at most 300 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def export_once(out: Path, make: Callable[[Path], Any]) -> Path:
    """``make(out)`` unless ``out`` already holds an export (rnnx.json), so cases share exports."""
    if not (out / "rnnx.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        make(out)
        say(f"  exported {out.name} in {time.monotonic() - t0:.1f}s")
    return out


def trt_backend(ctx: Context, export_dir: Path, limits: Any, **kwargs: Any) -> Any:
    from rnnx.runtime.tensorrt import TensorRTBackend

    t0 = time.monotonic()
    backend = TensorRTBackend(export_dir, limits=limits, plugin_library=ctx.plugins, cache_dir=ctx.engines, **kwargs)
    say(f"  TensorRT backend on {export_dir.name} ready in {time.monotonic() - t0:.1f}s (engine built or cached)")
    return backend


def run_bidirectional(ctx: Context) -> str:
    import numpy as np
    import torch

    from rnnx.export import export
    from rnnx.runtime.backends.ort_backend import OrtBackend
    from rnnx.runtime.tensorrt import ProfileLimits

    model = bidirectional_tagger()
    layers = sru_layer_shapes(model)
    if layers != [(2, 4), (2, 3)]:
        raise CheckFailed(f"the tagger's SRU layers are (directions, k) = {layers}, expected [(2, 4), (2, 3)]")
    example = np.random.default_rng(0).integers(0, 16, (2, 12))
    dirs = {
        p: export_once(ctx.exports(f"bisru-{p}"), lambda out, p=p: export(
            model, (torch.from_numpy(example),), out, target="tensorrt", precision=p, check=False))
        for p in PRECISIONS
    }  # fmt: skip
    tokens = np.random.default_rng(1).integers(0, 16, (3, 40)).astype(np.int64)
    reference = OrtBackend(dirs["fp32"])
    want, _ = reference.run({"tokens": tokens}, reference.init_state(3))
    limits = ProfileLimits(max_batch=4, max_length=64)
    results = []
    for p in PRECISIONS:
        backend = trt_backend(ctx, dirs[p], limits)
        got, _ = backend.run({"tokens": tokens}, backend.init_state(3))
        err = rel_error(got["output"], want["output"])
        say(f"  {p} engine: output max rel error {err:.3e} (tolerance {TOLERANCES[p]:g})")
        if err > TOLERANCES[p]:
            raise CheckFailed(f"bidirectional SRU {p} engine: max rel error {err:.3e} > {TOLERANCES[p]:g}")
        results.append(f"{p} {err:.1e}")
        backend.close()
    return "bidirectional SRU (k = 4 and 3), " + ", ".join(results)


def run_language_model(ctx: Context, case: str) -> str:
    from rnnx.export import export_model
    from rnnx.runtime.backends.ort_backend import OrtBackend
    from rnnx.runtime.parity import compare_backends, random_prompts
    from rnnx.runtime.tensorrt import ProfileLimits

    model = language_model(case)
    if case == "sru-k4":
        layers = sru_layer_shapes(model)
        if layers[0] != (1, 4) or any(k != 3 for _, k in layers[1:]):
            raise CheckFailed(f"SRULM layers are (directions, k) = {layers}, expected k = 4 then 3")
        what = f"SRU layers (directions, k) {layers}"
    else:
        dims = attention_head_dims(model)
        want_dim = int(case.rsplit("e", 1)[1])
        if set(dims) != {want_dim}:
            raise CheckFailed(f"head dims {dims}, expected {want_dim}")
        what = f"head dim {want_dim}"
    dirs = {
        p: export_once(ctx.exports(f"{case}-{p}"), lambda out, p=p: export_model(
            model, out, target="tensorrt", precision=p, check=False))
        for p in PRECISIONS
    }  # fmt: skip
    prompts = random_prompts(32, batch=3, length=PROMPT_LENGTHS[case], seed=0)
    limits = ProfileLimits(max_batch=4, max_length=max(len(p) for p in prompts) + 8)
    reference = OrtBackend(dirs["fp32"])
    results = []
    for p in PRECISIONS:
        backend = trt_backend(ctx, dirs[p], limits)
        report = compare_backends(reference, backend, prompts, 8, tolerance=TOLERANCES[p])
        say("  " + report.table().replace("\n", "\n  "))
        d = report.divergence
        tokens = "tokens agree" if d is None else f"tokens differ first at step {d.step} row {d.row} (reported only)"
        say(f"  {p} engine: worst rel error {report.worst_rel:.3e} (tolerance {TOLERANCES[p]:g}); {tokens}")
        if report.worst_rel > TOLERANCES[p]:
            raise CheckFailed(f"{case} {p} engine: worst rel error {report.worst_rel:.3e} > {TOLERANCES[p]:g}")
        results.append(f"{p} {report.worst_rel:.1e}")
        backend.close()
    return f"{case}: {what}, " + ", ".join(results)


# -- the demo ------------------------------------------------------------------------------------------


def demo_task() -> tuple[Path, list[list[int]]]:
    """The demo checkpoint and :data:`DEMO_BATCH` copy-task prompts."""
    from rnnx.models.checkpoint import demo_checkpoint_path
    from rnnx.models.training.copy_task import task_prompts

    path = demo_checkpoint_path(DEMO)
    config = json.loads((path / "config.json").read_text())
    return path, task_prompts(config.get("task"), config["config"]["vocab_size"], batch=DEMO_BATCH, seed=0)


def demo_export(ctx: Context, target: str, precision: str) -> Path:
    """The demo exported once per (target, precision); the fp32 TensorRT one with the parity check, so it has
    the Polygraphy input / output files."""
    from rnnx.export import export_model

    checkpoint, _ = demo_task()
    check = target == "tensorrt" and precision == "fp32"
    return export_once(ctx.exports(f"demo-{target}-{precision}"), lambda out: export_model(
        str(checkpoint), out, target=target, precision=precision, check=check))  # fmt: skip


def demo_limits() -> Any:
    from rnnx.runtime.tensorrt import ProfileLimits

    return ProfileLimits(**DEMO_LIMITS)


def prepare_demo(ctx: Context) -> dict[str, Any]:
    """Exports the demo (fp32, target tensorrt), builds its engine (cached) and records, with that engine in an
    eager backend, the prefill's last logits and the greedy tokens: ``demo/manifest.json`` + ``demo/logits.npy``."""
    import numpy as np

    from rnnx.runtime import Session
    from rnnx.runtime.tensorrt import build_engine

    export_dir = demo_export(ctx, "tensorrt", "fp32")
    _, prompts = demo_task()
    t0 = time.monotonic()
    engine = build_engine(export_dir, limits=demo_limits(), plugin_library=ctx.plugins, cache_dir=ctx.engines)
    say(f"  demo engine {engine} ({time.monotonic() - t0:.1f}s)")
    session = Session(trt_backend(ctx, export_dir, demo_limits(), engine_path=engine, cuda_graphs=False))
    logits = session.prefill(prompts).last_logits
    tokens = session.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
    session.backend.close()
    folder = ctx.work / "demo"
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "logits.npy", logits)
    manifest = {"export": str(export_dir), "engine": str(engine), "engine_mtime_ns": engine.stat().st_mtime_ns,
                "limits": DEMO_LIMITS, "prompts": prompts, "tokens": tokens, "pid": os.getpid()}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def demo_manifest(ctx: Context, in_subprocess: bool) -> dict[str, Any]:
    """The demo's manifest: read when an earlier case wrote it, else made by :func:`prepare_demo`, in another
    process when ``in_subprocess`` (so that this process never builds or loads that engine first)."""
    path = ctx.work / "demo" / "manifest.json"
    if not path.is_file():
        if in_subprocess:
            cmd = [sys.executable, str(Path(__file__).resolve()), "prepare-demo", "--work", str(ctx.work)]
            if ctx.plugins is not None:
                cmd += ["--plugins", str(ctx.plugins)]
            say(f"  no demo engine yet: building it in another process ({' '.join(cmd[1:3])} ...)")
            result = subprocess.run(cmd, text=True, capture_output=True)
            say(result.stdout.rstrip())
            if result.returncode != 0:
                say(result.stderr.rstrip())
                raise CheckFailed(f"prepare-demo failed (exit {result.returncode}): {last_line(result.stderr)}")
        else:
            prepare_demo(ctx)
    return json.loads(path.read_text())


@contextlib.contextmanager
def counting_graph_replays() -> Iterator[list[int]]:
    """Counts ``torch.cuda.CUDAGraph.replay`` calls (whatever object replays them) while inside."""
    import torch

    count = [0]
    original = torch.cuda.CUDAGraph.replay

    def replay(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(self, *args, **kwargs)

    torch.cuda.CUDAGraph.replay = replay
    try:
        yield count
    finally:
        torch.cuda.CUDAGraph.replay = original


def copy_accuracy(prompts: Sequence[Sequence[int]], tokens: Sequence[Sequence[int]]) -> str:
    """How many rows copied their symbols (the prompt before its separator) as their first new tokens."""
    right = sum(list(t[: len(p) - 1]) == list(p[:-1]) for p, t in zip(prompts, tokens))
    return f"{right}/{len(prompts)} rows copied exactly"


def run_demo_graphs(ctx: Context) -> str:
    import rnnx.runtime as rt
    from rnnx.runtime import Session
    from rnnx.runtime.contract.artifact import read_metadata

    trt_dir = demo_export(ctx, "tensorrt", "fp32")
    ops = sorted(op["name"] for op in read_metadata(trt_dir)["ops"])
    if ops != ["CausalLinearAttention", "SRUScan"]:
        raise CheckFailed(f"the demo export uses ops {ops}, expected both plugins")
    manifest = demo_manifest(ctx, in_subprocess=False)
    prompts = manifest["prompts"]
    ort = rt.load(demo_export(ctx, "onnxruntime", "fp32"), backend="onnxruntime")
    want = ort.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
    say(f"  ONNX Runtime fp32: {copy_accuracy(prompts, want)}")
    graphs = Session(trt_backend(ctx, trt_dir, demo_limits(), cuda_graphs=True))
    eager = Session(trt_backend(ctx, trt_dir, demo_limits(), cuda_graphs=False))
    with counting_graph_replays() as replays:
        got = graphs.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
        first = replays[0]
        # A batch change in between (its own ring), then the first batch again.
        fewer = graphs.generate_all(prompts[:3], DEMO_NEW_TOKENS, temperature=0)
        again = graphs.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
    plain = eager.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
    say(f"  CUDA graph replays: {first} in the first generation, {replays[0]} in all three")
    if got != plain:
        raise CheckFailed("CUDA-graph tokens differ from the eager TensorRT backend's")
    if got != want:
        raise CheckFailed("TensorRT tokens differ from ONNX Runtime's")
    if manifest["tokens"] != want:
        raise CheckFailed("the recorded demo tokens (prepare-demo) differ from ONNX Runtime's")
    if fewer != want[:3] or again != want:
        raise CheckFailed("tokens after a batch change differ from ONNX Runtime's")
    if first < DEMO_NEW_TOKENS // 2:
        raise CheckFailed(f"only {first} CUDA graph replays in a {DEMO_NEW_TOKENS}-token generation: graphs unused")
    return (
        f"demo fp32, CUDA graphs ({replays[0]} replays): tokens == eager == ONNX Runtime; {copy_accuracy(prompts, got)}"
    )


def run_demo_fp16(ctx: Context) -> str:
    import numpy as np

    import rnnx.runtime as rt

    _, prompts = demo_task()
    fp16 = rt.load(demo_export(ctx, "tensorrt", "fp16"), backend="tensorrt", device="cuda")
    fp32 = rt.load(demo_export(ctx, "onnxruntime", "fp32"), backend="onnxruntime")
    if fp16.metadata["precision"] != "fp16":
        raise CheckFailed(f"the fp16 export says precision {fp16.metadata['precision']!r}")
    want = fp32.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
    got = fp16.generate_all(prompts, DEMO_NEW_TOKENS, temperature=0)
    # Logits, teacher-forced on ONNX Runtime's tokens: the prefill's last logits, then every step's.
    errs = [rel_error(fp16.prefill(prompts).last_logits, fp32.prefill(prompts).last_logits)]
    for i in range(DEMO_NEW_TOKENS - 1):
        step = np.array([row[i] for row in want], dtype=np.int64)
        errs.append(rel_error(fp16.step(step), fp32.step(step)))
    worst = max(errs)
    say(f"  fp16 engine vs ONNX Runtime fp32: worst logits rel error {worst:.3e} over {len(errs)} calls "
        f"(tolerance {DEMO_FP16_TOLERANCE:g}); {copy_accuracy(prompts, got)}")  # fmt: skip
    if got != want:
        rows = [b for b in range(len(want)) if got[b] != want[b]]
        raise CheckFailed(f"fp16 engine greedy tokens differ from ONNX Runtime fp32 in rows {rows}")
    if worst > DEMO_FP16_TOLERANCE:
        raise CheckFailed(f"fp16 engine logits: worst rel error {worst:.3e} > {DEMO_FP16_TOLERANCE:g}")
    return f"demo fp16 engine: tokens identical to ONNX Runtime fp32, logits {worst:.1e} <= {DEMO_FP16_TOLERANCE:g}"


def run_parity_cli(ctx: Context) -> str:
    export_dir = demo_export(ctx, "tensorrt", "fp32")
    code = "import sys; from rnnx.runtime.parity.cli import main; sys.argv[0] = 'rnnx-parity'; main()"
    cmd = [sys.executable, "-c", code, str(export_dir), "--backend", "tensorrt", "--device", "cuda", "--steps", "16",
           "--tolerance", str(TOLERANCES["fp32"])]  # fmt: skip
    result = subprocess.run(cmd, text=True, capture_output=True, timeout=230)
    say((result.stdout + result.stderr).rstrip())
    if result.returncode != 0:
        raise CheckFailed(f"rnnx-parity --backend tensorrt: exit {result.returncode}: {last_line(result.stdout)}")
    return f"rnnx-parity --backend tensorrt: {last_line(result.stdout)}"


def run_fresh_process(ctx: Context) -> str:
    import numpy as np

    from rnnx.runtime import Session
    from rnnx.runtime.tensorrt import build_engine

    manifest = demo_manifest(ctx, in_subprocess=True)
    if manifest["pid"] == os.getpid():
        raise CheckFailed("the demo engine was built by this process")
    engine = Path(manifest["engine"])
    # The same build_engine call as the building process's must be a cache hit: same key, file not rewritten.
    found = build_engine(manifest["export"], limits=demo_limits(), plugin_library=ctx.plugins, cache_dir=ctx.engines)
    if Path(found) != engine or engine.stat().st_mtime_ns != manifest["engine_mtime_ns"]:
        raise CheckFailed(f"build_engine returned {found} (rebuilt?), expected the cached {engine} unchanged")
    session = Session(trt_backend(ctx, Path(manifest["export"]), demo_limits(), engine_path=engine, cuda_graphs=False))
    err = rel_error(session.prefill(manifest["prompts"]).last_logits, np.load(ctx.work / "demo" / "logits.npy"))
    tokens = session.generate_all(manifest["prompts"], DEMO_NEW_TOKENS, temperature=0)
    say(f"  deserialized {engine.name} (built by process {manifest['pid']}): logits rel error {err:.3e}")
    if err > REPLAY_TOLERANCE:
        raise CheckFailed(f"prefill logits differ from the building process's: {err:.3e} > {REPLAY_TOLERANCE:g}")
    if tokens != manifest["tokens"]:
        raise CheckFailed("greedy tokens differ from the building process's")
    return f"engine deserialized in a fresh process: cache hit, tokens identical, logits {err:.1e}"


def library_dirs() -> list[str]:
    """Folders holding libnvinfer (the tensorrt / tensorrt_libs wheels) and the CUDA runtime, for the native
    runtime's dlopen."""
    dirs: list[str] = []
    for module in ("tensorrt_libs", "tensorrt"):
        spec = importlib.util.find_spec(module)
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            if glob.glob(os.path.join(location, "libnvinfer.so*")):
                dirs.append(location)
    for entry in sys.path:  # other wheel layouts: site-packages/tensorrt*/libnvinfer.so.*
        dirs += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(entry, "tensorrt*", "libnvinfer.so*"))})
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.isdir(os.path.join(root, "lib64")):
            dirs.append(os.path.join(root, "lib64"))
    return dirs


def run_native(ctx: Context) -> str:
    manifest = demo_manifest(ctx, in_subprocess=False)
    env = dict(os.environ, RNNX_NATIVE_BUILD=str(ctx.work))
    t0 = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "rnnx.runtime.native"], env=env, text=True, capture_output=True)
    say(f"  python -m rnnx.runtime.native: exit {built.returncode} in {time.monotonic() - t0:.1f}s")
    if built.returncode != 0:
        say((built.stdout + built.stderr).rstrip())
        raise CheckFailed(f"the native build failed: {last_line(built.stderr or built.stdout)}")
    build = ctx.work / "native"
    cache = (build / "CMakeCache.txt").read_text() if (build / "CMakeCache.txt").is_file() else ""
    trt_include = next(
        (line.split("=", 1)[1] for line in cache.splitlines() if line.startswith("RNNX_TRT_INCLUDE")), ""
    )
    if not trt_include:
        raise CheckFailed("the native runtime was built without the TensorRT backend (no TensorRT / CUDA headers)")
    say(f"  TensorRT backend compiled against {trt_include}")
    if ctx.plugins is None:
        raise CheckFailed("no librnnx_trt_plugins.so (RNNX_TRT_PLUGINS / --plugins)")
    cmd = [str(build / "rnnx-generate"), manifest["export"], "--backend", "tensorrt", "--device", "cuda",
           "--engine", manifest["engine"], "--plugins", str(ctx.plugins), "--max-new-tokens", str(DEMO_NEW_TOKENS),
           "--temperature", "0"]  # fmt: skip
    for prompt in manifest["prompts"]:
        cmd += ["--prompt", " ".join(str(t) for t in prompt)]
    paths = [*library_dirs(), os.environ.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = ":".join(p for p in paths if p)
    result = subprocess.run(cmd, env=env, text=True, capture_output=True, timeout=240)
    say(result.stdout.rstrip())
    if result.returncode != 0:
        say(result.stderr.rstrip())
        raise CheckFailed(f"rnnx-generate --backend tensorrt: exit {result.returncode}: {last_line(result.stderr)}")
    rows = parse_native_rows(result.stdout)
    got = [rows.get(b) for b in range(len(manifest["prompts"]))]
    if got != manifest["tokens"]:
        raise CheckFailed("rnnx-generate's tokens differ from the Python TensorRT runtime's on the same engine")
    return f"native rnnx-generate --backend tensorrt: {len(got)} rows, tokens == Python runtime's"


def strip_local_functions(export_dir: Path, out: Path) -> Path:
    """A copy of the export's model.onnx without its ONNX local functions: TensorRT can then import the rnnx
    nodes only as plugins, so a run that succeeds proves the plugin library was loaded and used."""
    import onnx

    model = onnx.load(str(export_dir / "model.onnx"))
    if not model.functions:
        raise CheckFailed(f"{export_dir / 'model.onnx'} has no local functions to strip")
    del model.functions[:]
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return out


def prefill_profile(export_dir: Path, limits: Any) -> Any:
    from rnnx.runtime.contract.artifact import read_metadata
    from rnnx.runtime.tensorrt import PREFILL, build_profiles

    return next(p for p in build_profiles(read_metadata(export_dir), limits) if p.name == PREFILL)


def find_trtexec() -> Optional[str]:
    candidates = [shutil.which("trtexec"), "/usr/src/tensorrt/bin/trtexec"]
    if os.environ.get("TENSORRT_ROOT"):
        candidates.insert(1, os.path.join(os.environ["TENSORRT_ROOT"], "bin", "trtexec"))
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def run_trtexec(ctx: Context) -> str:
    import numpy as np

    from rnnx.runtime.contract.artifact import numpy_dtype, read_metadata
    from rnnx.runtime.tensorrt import ProfileLimits

    exe = find_trtexec()
    if exe is None:
        raise Skip("trtexec not found (PATH, $TENSORRT_ROOT/bin, /usr/src/tensorrt/bin): the pip wheels have none")
    if ctx.static_plugins is None:
        raise CheckFailed("no librnnx_trt_plugins_static.so (RNNX_TRT_PLUGINS_STATIC / --static-plugins)")
    export_dir = demo_export(ctx, "tensorrt", "fp32")
    folder = ctx.work / "trtexec"
    model = strip_local_functions(export_dir, folder / "model_plugins_only.onnx")
    profile = prefill_profile(export_dir, ProfileLimits(max_batch=4, max_length=16, opt_batch=2, opt_length=8))
    meta = read_metadata(export_dir)
    vocab = int(meta["vocab_size"])
    dtypes = {t["name"]: t["dtype"] for t in meta["inputs"]}
    loads = []
    for name, r in profile.shapes.items():
        kind = numpy_dtype(dtypes[name])
        array = np.ones(r.opt, dtype=kind) if name == "attention_mask" else np.zeros(r.opt, dtype=kind)
        if name == "input_ids":
            array = np.random.default_rng(0).integers(0, vocab, r.opt).astype(kind)
        path = folder / f"{name}.bin"
        array.tofile(path)
        loads.append(f"{name}:{path}")
    from rnnx.runtime.tensorrt._trt import tensorrt_version

    cmd = [exe, f"--onnx={model}", f"--staticPlugins={ctx.static_plugins}", *trtexec_flags(tensorrt_version()),
           *trtexec_shape_args(profile), "--loadInputs=" + ",".join(loads), "--iterations=10", "--warmUp=0",
           "--duration=0"]  # fmt: skip
    say("  " + " ".join(cmd))
    result = subprocess.run(cmd, text=True, capture_output=True, timeout=220)
    say((result.stdout[-6000:] + result.stderr[-2000:]).rstrip())
    if result.returncode != 0 or "PASSED TensorRT.trtexec" not in result.stdout:
        raise CheckFailed(
            f"trtexec --staticPlugins: exit {result.returncode}: {last_line(result.stderr or result.stdout)}"
        )
    return (
        "trtexec --staticPlugins built and ran the demo (strongly typed, CUDA graphs), its rnnx nodes as plugins only"
    )


def run_polygraphy(ctx: Context) -> str:
    from rnnx.runtime.contract.artifact import MODEL_FILE, read_metadata
    from rnnx.runtime.parity import polygraphy_command
    from rnnx.runtime.tensorrt import ProfileLimits

    if shutil.which("polygraphy") is None:
        raise CheckFailed("polygraphy is not on PATH (pip install polygraphy; rnnx's export extra has it)")
    if ctx.static_plugins is None:
        raise CheckFailed("no librnnx_trt_plugins_static.so (RNNX_TRT_PLUGINS_STATIC / --static-plugins)")
    export_dir = demo_export(ctx, "tensorrt", "fp32")
    polygraphy = read_metadata(export_dir).get("parity", {}).get("polygraphy")
    if not polygraphy:
        raise CheckFailed(f"{export_dir} has no Polygraphy files (exported without the parity check?)")
    model = strip_local_functions(export_dir, ctx.work / "polygraphy" / "model_plugins_only.onnx")
    # Covers every saved call: the prefill (batch 3, the prompts' length) and the one-token steps.
    profile = prefill_profile(export_dir, ProfileLimits(max_batch=8, max_length=64, opt_batch=3, opt_length=16))
    cmd = polygraphy_trt_command(polygraphy_command(export_dir, MODEL_FILE, polygraphy), model,
                                 ctx.static_plugins, profile)  # fmt: skip
    say("  " + " ".join(cmd))
    result = subprocess.run(cmd, text=True, capture_output=True, timeout=280)
    say((result.stdout + result.stderr)[-4000:].rstrip())
    if result.returncode != 0:
        raise CheckFailed(f"polygraphy run --trt --plugins: exit {result.returncode} (see the output above)")
    return f"polygraphy run --trt --plugins: {polygraphy['iterations']} saved calls match, plugins only"


#: Mask element types the mask-types case feeds each plugin: int32 is what rnnx's TensorRT layout feeds (it must build
#: and match the naive twin); bool is what TensorRT documents as unsupported for plugin tensors, so the plugins
#: advertise int32 only and a bool mask must be refused at build (a bool engine that builds is a failure).
MASK_TYPES = ("int32", "bool")


def plugin_node_model(op_name: str, mask_type: str) -> tuple[Any, dict[str, Any]]:
    """A one-node ONNX model of the rnnx op ``op_name`` (any of ``ALL_OPS``) with no local
    function, so TensorRT's parser can only import it as the plugin; every input is a graph input of fixed shape,
    the pad mask of ``mask_type`` (``int32`` / ``bool``). Returns the model and random fp32 inputs (numpy) with
    the last two steps of row 1 padded."""
    import numpy as np
    from onnx import TensorProto, helper

    from rnnx.runtime.contract import ops

    rng = np.random.default_rng(7)
    if op_name == ops.SRU_SCAN.onnx_name:
        spec, (L, B, d) = ops.SRU_SCAN, (6, 2, 8)
        attrs: dict[str, Any] = {"hidden_size": d, "num_directions": 1, "num_matrices": 3, "has_skip_term": 1,
                                 "use_tanh": 0, "scale_x": 1.0}  # fmt: skip
        shapes = {"U": (L, B, 3 * d), "x": (L, B, d), "weight_c": (2 * d,), "bias": (2 * d,), "c0": (B, d),
                  "mask_pad": (L, B), "h": (L, B, d), "c_last": (B, d)}  # fmt: skip
        pad = (slice(L - 2, L), 1)
    elif op_name == ops.CAUSAL_LINEAR_ATTENTION.onnx_name:
        spec, (B, L, H, E, M) = ops.CAUSAL_LINEAR_ATTENTION, (2, 6, 2, 8, 8)
        attrs = {"eps": 1e-6, "num_heads": H, "time_major": 0}
        shapes = {"q": (B, L, H * E), "k": (B, L, H * E), "v": (B, L, H * M), "S0": (B, H, E, M), "z0": (B, H, E),
                  "mask_pad": (B, L), "out": (B, L, H * M), "S_last": (B, H, E, M), "z_last": (B, H, E)}  # fmt: skip
        pad = (1, slice(L - 2, L))
    elif op_name == ops.LINEAR_RECURRENCE.onnx_name:
        spec, (B, T, Hq, Hkv, dk, dv) = ops.LINEAR_RECURRENCE, (2, 6, 4, 2, 8, 8)
        attrs = {"q_num_heads": Hq, "kv_num_heads": Hkv, "update_rule": "gated_delta", "scale": 0.0, "qk_l2_norm": 1}
        shapes = {"query": (B, T, Hq * dk), "key": (B, T, Hkv * dk), "value": (B, T, Hkv * dv),
                  "past_state": (B, Hkv, dk, dv), "decay": (B, T, Hkv), "beta": (B, T, Hkv), "mask_pad": (B, T),
                  "output": (B, T, Hq * dv), "present_state": (B, Hkv, dk, dv)}  # fmt: skip
        pad = (1, slice(T - 2, T))
    elif op_name == ops.CAUSAL_CONV_WITH_STATE.onnx_name:
        spec, (B, C, T, K) = ops.CAUSAL_CONV_WITH_STATE, (2, 4, 6, 4)
        attrs = {"activation": "silu"}
        shapes = {"input": (B, C, T), "weight": (C, 1, K), "bias": (C,), "past_state": (B, C, K - 1),
                  "mask_pad": (B, T), "output": (B, C, T), "present_state": (B, C, K - 1)}  # fmt: skip
        pad = (1, slice(T - 2, T))
    else:
        raise ValueError(f"unknown op {op_name!r}")
    mask_elem = {"int32": TensorProto.INT32, "bool": TensorProto.BOOL}[mask_type]
    arrays: dict[str, Any] = {}
    for name in spec.inputs:
        if name == spec.mask_input:
            mask = np.zeros(shapes[name], dtype=np.int32 if mask_type == "int32" else np.bool_)
            mask[pad] = 1
            arrays[name] = mask
        else:
            scale = 0.5 if spec.input(name).role == ops.STATE else 1.0
            arrays[name] = (scale * rng.standard_normal(shapes[name])).astype(np.float32)
            if name == "decay":  # log space, <= 0
                arrays[name] = -np.abs(arrays[name])
            elif name == "beta":  # in (0, 1)
                arrays[name] = rng.random(shapes[name]).astype(np.float32)
            elif name == "key" and spec is ops.LINEAR_RECURRENCE:  # unit keys: the delta rule's stable regime
                k = arrays[name].reshape(*shapes[name][:2], -1, 8)
                arrays[name] = (k / np.linalg.norm(k, axis=-1, keepdims=True)).reshape(shapes[name])
    inputs = [
        helper.make_tensor_value_info(n, mask_elem if n == spec.mask_input else TensorProto.FLOAT, shapes[n])
        for n in spec.inputs
    ]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in spec.outputs]
    node = helper.make_node(
        spec.onnx_name, list(spec.inputs), list(spec.outputs), domain=ops.ONNX_DOMAIN,
        **attrs, **{ops.PLUGIN_VERSION_ATTR: ops.PLUGIN_VERSION, ops.PLUGIN_NAMESPACE_ATTR: ops.PLUGIN_NAMESPACE},
    )  # fmt: skip
    graph = helper.make_graph([node], f"{spec.onnx_name}_{mask_type}_mask", inputs, outputs)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ops.ONNX_DOMAIN, ops.ONNX_DOMAIN_VERSION)],
    )
    return model, arrays


def plugin_node_reference(op_name: str, arrays: dict[str, Any]) -> dict[str, Any]:
    """The naive twin's outputs (numpy, by output name) for :func:`plugin_node_model`'s inputs."""
    import torch

    from rnnx.models.ops.causal_linear_attention.naive import causal_linear_attention_packed
    from rnnx.models.ops.sru_scan.naive import sru_scan_naive
    from rnnx.runtime.contract import ops

    t = {name: torch.from_numpy(a) for name, a in arrays.items()}
    if op_name == ops.SRU_SCAN.onnx_name:
        h, c = sru_scan_naive(t["U"], t["x"], t["weight_c"], t["bias"], t["c0"], t["mask_pad"] != 0,
                              hidden_size=t["c0"].shape[1])  # fmt: skip
        return {"h": h.numpy(), "c_last": c.numpy()}
    if op_name == ops.LINEAR_RECURRENCE.onnx_name:
        from rnnx.models.ops.linear_recurrence.naive import linear_recurrence_naive

        out, S = linear_recurrence_naive(t["query"], t["key"], t["value"], t["past_state"], t["decay"], t["beta"],
                                         q_num_heads=4, kv_num_heads=2, update_rule="gated_delta",
                                         pad_mask=t["mask_pad"] != 0, qk_l2_norm=1)  # fmt: skip
        return {"output": out.numpy(), "present_state": S.float().numpy()}
    if op_name == ops.CAUSAL_CONV_WITH_STATE.onnx_name:
        from rnnx.models.ops.causal_conv_with_state.naive import causal_conv_with_state_naive

        y, state = causal_conv_with_state_naive(t["input"], t["weight"], t["bias"], t["past_state"],
                                                activation="silu", pad_mask=t["mask_pad"] != 0)  # fmt: skip
        return {"output": y.numpy(), "present_state": state.float().numpy()}
    out, S, z = causal_linear_attention_packed(t["q"], t["k"], t["v"], 2, t["S0"], t["z0"], t["mask_pad"] != 0)
    return {"out": out.numpy(), "S_last": S.numpy(), "z_last": z.numpy()}


def run_plugin_node(trt: Any, model: Any, arrays: dict[str, Any]) -> dict[str, Any]:
    """Parses ``model`` (every node must become a plugin layer), builds it strongly typed, runs it once on the GPU
    with ``arrays``; its outputs as numpy. CheckFailed (one line) when the parse or the build fails."""
    import numpy as np
    import torch

    from rnnx.runtime.tensorrt._trt import tensorrt_logger

    logger = tensorrt_logger()
    builder = trt.Builder(logger)
    flags = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    network = builder.create_network(0 if flags is None else 1 << int(flags))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model.SerializeToString()):
        errors = "; ".join(str(parser.get_error(i)).splitlines()[0] for i in range(parser.num_errors))
        raise CheckFailed(f"parse failed: {errors}")
    kinds = {str(network.get_layer(i).type) for i in range(network.num_layers)}
    if not all("PLUGIN" in kind for kind in kinds):
        raise CheckFailed(f"the node was not imported as a plugin (layers: {sorted(kinds)})")
    serialized = builder.build_serialized_network(network, builder.create_builder_config())
    if serialized is None:
        raise CheckFailed("build_serialized_network returned None (see TensorRT's messages above)")
    engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
    context = engine.create_execution_context()
    tensors = {name: torch.from_numpy(np.ascontiguousarray(a)).cuda() for name, a in arrays.items()}
    outputs = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            outputs[name] = torch.empty(tuple(engine.get_tensor_shape(name)), dtype=torch.float32, device="cuda")
    for name, tensor in {**tensors, **outputs}.items():
        context.set_tensor_address(name, tensor.data_ptr())
    stream = torch.cuda.Stream()
    if not context.execute_async_v3(stream.cuda_stream):
        raise CheckFailed("execute_async_v3 returned False")
    stream.synchronize()
    return {name: tensor.cpu().numpy() for name, tensor in outputs.items()}


def run_mask_types(ctx: Context) -> str:
    from rnnx.runtime.contract import ops
    from rnnx.runtime.tensorrt import load_plugin_library, require_tensorrt

    trt = require_tensorrt()
    if ctx.plugins is None:
        raise CheckFailed("no librnnx_trt_plugins.so (RNNX_TRT_PLUGINS / --plugins)")
    load_plugin_library(
        trt, ctx.plugins, [(s.onnx_name, ops.PLUGIN_VERSION, ops.PLUGIN_NAMESPACE) for s in ops.ALL_OPS], say
    )
    say(f"  TensorRT {trt.__version__}")
    results, failed = [], []
    for spec in ops.ALL_OPS:
        for mask_type in MASK_TYPES:
            model, arrays = plugin_node_model(spec.onnx_name, mask_type)
            try:
                got = run_plugin_node(trt, model, arrays)
                want = plugin_node_reference(spec.onnx_name, arrays)
                worst = max(rel_error(got[name], want[name]) for name in spec.outputs)
                verdict = f"built, max rel error {worst:.1e}" + ("" if worst <= TOLERANCES["fp32"] else " (too large)")
                if mask_type != "int32" or worst > TOLERANCES["fp32"]:
                    failed.append(f"{spec.onnx_name} {mask_type}: {verdict}")
            except CheckFailed as e:
                verdict = f"refused: {e}"
                if mask_type == "int32":
                    failed.append(f"{spec.onnx_name} int32: {verdict}")
            say(f"  {spec.onnx_name} with a {mask_type} mask: {verdict}")
            results.append(f"{spec.onnx_name}/{mask_type}: {verdict.split(':')[0]}")
    if failed:
        raise CheckFailed("; ".join(failed))
    return f"TensorRT {trt.__version__}: " + ", ".join(results)


RUNNERS: dict[str, Callable[[Context], str]] = {
    "mask-types": run_mask_types,
    "sru-bidirectional": run_bidirectional,
    "sru-k4": lambda ctx: run_language_model(ctx, "sru-k4"),
    "attention-e64": lambda ctx: run_language_model(ctx, "attention-e64"),
    "attention-e128": lambda ctx: run_language_model(ctx, "attention-e128"),
    "demo-graphs": run_demo_graphs,
    "demo-fp16": run_demo_fp16,
    "parity-cli": run_parity_cli,
    "fresh-process": run_fresh_process,
    "native": run_native,
    "trtexec": run_trtexec,
    "polygraphy": run_polygraphy,
}


def run_case(name: str, ctx: Context) -> int:
    """Runs one case; prints its last line (PASS / FAIL / SKIP: ...) and returns the exit code."""
    case = case_named(name)
    say(f"case {case.name}: {case.what}")
    try:
        summary = RUNNERS[case.name](ctx)
    except Skip as e:
        say(f"SKIP: {e}")
        return SKIP_CODE
    except CheckFailed as e:
        say(f"FAIL: {e}")
        return 1
    except Exception as e:  # a crash is a failure of the case, with its traceback in the log
        traceback.print_exc(file=sys.stdout)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        say(f"FAIL: {type(e).__name__}: {first}")
        return 1
    say(f"PASS: {summary}")
    return 0


def _library(option: Optional[str], env: str) -> Optional[Path]:
    value = option or os.environ.get(env)
    return Path(value) if value else None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the cases: name, time limit (s), what it checks (tab-separated)")
    for command in ("run", "prepare-demo"):
        p = sub.add_parser(command)
        if command == "run":
            p.add_argument("case", choices=[c.name for c in CASES])
        p.add_argument("--work", required=True, type=Path, help="exports, engines and the demo's reference")
        p.add_argument("--plugins", help="librnnx_trt_plugins.so (default $RNNX_TRT_PLUGINS)")
        p.add_argument("--static-plugins", help="librnnx_trt_plugins_static.so (default $RNNX_TRT_PLUGINS_STATIC)")
    args = parser.parse_args(argv)
    if args.command == "list":
        for case in CASES:
            print(f"{case.name}\t{case.limit_s}\t{case.what}")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    ctx = Context(
        args.work.resolve(),
        _library(args.plugins, "RNNX_TRT_PLUGINS"),
        _library(args.static_plugins, "RNNX_TRT_PLUGINS_STATIC"),
    )
    if args.command == "prepare-demo":
        prepare_demo(ctx)
        return 0
    return run_case(args.case, ctx)


if __name__ == "__main__":
    sys.exit(main())
