"""Transformers checkpoints at the sizes users run, on ONNX Runtime CPU (issue 41, "Benchmarks").

    python benchmarks/bench_checkpoints.py [--sizes 30M,0.5B] [--work DIR] [--threads 2] [--parked 1024,8192]

Each size is a random-weight Qwen3.5 text checkpoint (``Qwen3_5ForCausalLM`` with transformers' default init,
seed 0, ``save_pretrained``), hybrid 3:1 (Gated DeltaNet layers, every fourth a gated softmax attention layer with
a KV cache), tied embeddings:

* ``0.5B``: Qwen3.5-0.8B's layer shape (hidden 1024, GDN 16 key / 16 value heads of 128, attention 8 heads / 2 KV
  heads of 256, MLP 3584, vocabulary 248,320) with 16 layers instead of 24: 586 M parameters;
* ``30M``: hidden 512, 8 layers, GDN 4 / 8 heads of 64, attention 8 / 2 heads of 64, MLP 1536, vocabulary 16,384:
  35 M parameters.

Side by side in one run, on ``--threads`` threads everywhere:

1. ``export-model CKPT --target onnxruntime`` (fp32, and ``--quantize int4 --no-check``), each in a fresh process
   under ``/usr/bin/time``: wall time and peak RSS against the fp32 weight bytes (goal: at most 3x). The int4
   export skips its check: on random weights int4's logits error passes the budget's max_rel (30M: 0.64 > 0.5,
   mean KL 0.023 inside 0.1), which says nothing of a trained checkpoint; its speed is what is measured here.
2. The decode step (batch 1, after a 16-token prompt) of the rnnx exports (fp32, int4) on ``rnnx.runtime`` (ONNX
   Runtime CPU), of transformers eager (``AutoModelForCausalLM`` with its own cache; its pure-PyTorch GDN fallbacks,
   since neither ``flash-linear-attention`` nor ``causal-conv1d`` runs on a CPU) and of genai's builder graph (4),
   all four loaded at once and timed side by side (:func:`alternate`: 5 rounds of 16 steps each, in turn; medians).
   Against the weight-read time: the bytes one step reads (every initializer but an embedding table that only a
   Gather reads, of which one row is read; the state read and written) over the read bandwidth
   (``timing.read_bandwidth``, best pass, the larger of a measurement just before and just after the steps).
   Goal: within 1.3x.
3. A 2,048-token prefill (batch 1, one timed run after a warm-up on 64 tokens) on each. Goal: rnnx at least 2x
   transformers eager (which returns every position's logits, as rnnx's graph does).
4. onnxruntime-genai 0.18's own model builder on the same weights (a ``Qwen3_5ForConditionalGeneration`` folder
   with a 1-layer vision tower holding the text weights; fp32, CPU): whether its export runs in genai, and its
   graph's decode step and prefill in plain ONNX Runtime. Its graph declares ``position_ids`` as
   ``(3, batch, length)`` (multimodal RoPE) while its ``RotaryEmbedding`` nodes take at most 2 dimensions, so it
   cannot run as built; the timing declares the input ``(batch, length)`` (the one change; text positions are the
   same in all three rows) and says so.
5. Parked-conversation bytes (:meth:`rnnx.runtime.ConversationStore.parked_bytes`, the KV part and the fixed part)
   after ``--parked`` prompt lengths, and the prefill time of each.

Prints markdown; the numbers of a run go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, markdown_table, read_bandwidth

#: name -> Qwen3_5TextConfig fields (the module docstring).
SIZES: dict[str, dict[str, Any]] = {
    "30M": dict(vocab_size=16384, hidden_size=512, num_hidden_layers=8, intermediate_size=1536,
                linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=64, linear_value_head_dim=64,
                num_attention_heads=8, num_key_value_heads=2, head_dim=64),
    "0.5B": dict(vocab_size=248320, hidden_size=1024, num_hidden_layers=16, intermediate_size=3584,
                 linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
                 linear_value_head_dim=128, num_attention_heads=8, num_key_value_heads=2, head_dim=256),
}  # fmt: skip

ONNX_BYTES = {1: 4, 2: 1, 3: 1, 6: 4, 7: 8, 10: 2, 11: 8, 16: 2, 21: 1, 22: 1}  # ONNX elem type -> bytes (int4: 1/2)


def make_checkpoint(size: str, folder: Path) -> int:
    """Writes the random checkpoint of ``size`` into ``folder`` (kept between runs); returns its parameter count."""
    import transformers

    fields = SIZES[size]
    layers = fields["num_hidden_layers"]
    config = transformers.Qwen3_5TextConfig(
        **fields, tie_word_embeddings=True, max_position_embeddings=32768,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
    )  # fmt: skip
    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return sum(p.numel() for p in model.parameters())


def timed_export(folder: Path, out: Path, extra: list[str]) -> dict[str, Any]:
    """``export-model`` in a fresh process: wall seconds, peak RSS bytes, whether its check passed."""
    start = time.perf_counter()
    result = subprocess.run(
        ["/usr/bin/time", "-f", "peak-rss-kib %M", "export-model", str(folder), "--out", str(out),
         "--target", "onnxruntime", *extra], capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"export-model {folder} {extra} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    peak = int(re.search(r"peak-rss-kib (\d+)", result.stderr).group(1)) * 1024
    return {"seconds": seconds, "peak": peak, "passed": "PASS" in result.stdout}


def step_bytes(model_path: Path) -> int:
    """Bytes of the initializers one decode step reads: all of them, but an initializer only Gather nodes read as
    their data (an embedding table: one row read, counted as such)."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    readers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            readers.setdefault(name, []).append((node.op_type, i))
    total = 0
    for t in model.graph.initializer:
        elements = int(np.prod(t.dims)) if len(t.dims) else 1
        size = elements * ONNX_BYTES.get(t.data_type, 4)
        users = readers.get(t.name, [])
        if users and all(op == "Gather" and i == 0 for op, i in users) and len(t.dims) == 2:
            size = size // t.dims[0]  # one row
        total += size
    return total


#: Seconds of rest before each timed block of :func:`alternate`: the thread pools of the block before (ONNX Runtime's
#: spin after a run) go idle, so no block pays for its neighbour's (without it, a 30M step timed after another ONNX
#: Runtime session's block took 1.3x its time alone).
REST_SECONDS = 0.2


def alternate(steps: dict[str, Callable[[], Any]], rounds: int = 5, calls: int = 16) -> dict[str, float]:
    """Seconds per call of each of ``steps``, side by side: each warmed up once, then ``rounds`` rounds in which
    every one runs ``calls`` calls in turn, after :data:`REST_SECONDS`; the median of its rounds' means (a
    neighbour's load hits all alike)."""
    for step in steps.values():
        step()
    samples: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            time.sleep(REST_SECONDS)
            step()  # one untimed call: the block's weights and threads warm again
            start = time.perf_counter()
            for _ in range(calls):
                step()
            samples[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(times) for name, times in samples.items()}


def once(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def rnnx_runner(export: Path, threads: int) -> dict[str, Any]:
    """The rnnx export on rnnx.runtime (ONNX Runtime): a decode step after a 16-token prompt, a prefill of n tokens,
    the state's bytes."""
    import rnnx.runtime as rt

    session = rt.load(export, backend="onnxruntime", threads=threads)
    rng = np.random.default_rng(0)
    vocab = session.vocab_size
    state = session.prefill(rng.integers(0, vocab, size=(1, 16)))
    tokens = [int(rng.integers(0, vocab))]
    return {
        "step": lambda: session.step(tokens, state=state),
        "prefill": lambda n: session.prefill(rng.integers(0, vocab, size=(1, n))),
        "state_bytes": sum(a.nbytes for a in state.to_host().values()),
    }


def transformers_runner(folder: Path, threads: int) -> dict[str, Any]:
    """transformers eager: a decode step with its cache after a 16-token prompt, and a forward of n tokens (its cache
    filled, every position's logits)."""
    import transformers

    torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    with torch.no_grad():
        cache = [model(input_ids=torch.randint(0, vocab, (1, 16), generator=gen), use_cache=True).past_key_values]
    token = torch.randint(0, vocab, (1, 1), generator=gen)

    @torch.no_grad()
    def step() -> None:
        cache[0] = model(input_ids=token, past_key_values=cache[0], use_cache=True).past_key_values

    @torch.no_grad()
    def prefill(n: int) -> None:
        model(input_ids=torch.randint(0, vocab, (1, n), generator=gen), use_cache=True)

    return {"step": step, "prefill": prefill}


def builder_runner(folder: Path, work: Path, threads: int) -> dict[str, Any]:
    """onnxruntime-genai's builder on ``folder``'s weights: whether genai runs its export (``genai_error``), and
    (``position_ids`` declared 2-D) its graph's decode step and prefill in plain ONNX Runtime."""
    import onnx
    import onnxruntime as ort
    import onnxruntime_genai as og
    import transformers

    vl, built = work / "builder-source", work / "builder-export"
    if not (built / "model.onnx").is_file():
        text = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        vision = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, patch_size=16,
                      out_hidden_size=text.config.hidden_size, spatial_merge_size=2, temporal_patch_size=2)  # fmt: skip
        config = transformers.Qwen3_5Config(text_config=text.config.to_dict(), vision_config=vision,
                                            tie_word_embeddings=True)  # fmt: skip
        full = transformers.Qwen3_5ForConditionalGeneration(config)
        full.model.language_model.load_state_dict(text.model.state_dict(), strict=True)
        full.save_pretrained(vl)
        del full, text
        gc.collect()
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(vl), "-o", str(built),
                        "-p", "fp32", "-e", "cpu"], check=True, capture_output=True)  # fmt: skip
        print(f"builder export: {time.perf_counter() - start:.1f} s")
    genai_error = None
    try:
        model = og.Model(str(built))
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=24, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens([[1, 2, 3, 4, 5]])
        generator.generate_next_token()
    except Exception as e:  # what genai says of its own builder's export
        genai_error = "fails: " + str(e).splitlines()[0].rpartition("Status Message: ")[2][:120]
    finally:
        model = params = generator = None
    graph = onnx.load(str(built / "model.onnx"), load_external_data=False)
    position = next(i for i in graph.graph.input if i.name == "position_ids")
    dims = position.type.tensor_type.shape.dim
    declared = [d.dim_param or d.dim_value for d in dims]
    if len(dims) == 3:
        del dims[0]  # (3, batch, length) -> (batch, length)
        onnx.save(graph, str(built / "model-2d-positions.onnx"))  # the weights stay in model.onnx.data
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(built / "model-2d-positions.onnx"), options, providers=["CPUExecutionProvider"])
    spec = {i.name: i for i in session.get_inputs()}
    kv_dim = json.loads((built / "genai_config.json").read_text())["model"]["decoder"]["head_size"]

    def zeros(name: str) -> np.ndarray:
        shape = [1 if d == "batch_size" else 0 if d == "past_sequence_length" else kv_dim if d == "kv_cache_dim"
                 else d for d in spec[name].shape]  # fmt: skip
        return np.zeros(shape, np.float32)

    past_names = [n for n in spec if n.startswith("past")]
    outputs = [o.name for o in session.get_outputs()]

    def run(tokens: np.ndarray, past: dict[str, np.ndarray], done: int) -> dict[str, np.ndarray]:
        length = tokens.shape[1]
        feed = {"input_ids": tokens, "attention_mask": np.ones((1, done + length), np.int64),
                "position_ids": np.arange(done, done + length, dtype=np.int64)[None], **past}  # fmt: skip
        got = dict(zip(outputs, session.run(outputs, feed)))
        return {p: got[p.replace("past_key_values", "present").replace("past.", "present.")] for p in past_names}

    rng = np.random.default_rng(0)
    vocab = int(json.loads((folder / "config.json").read_text())["vocab_size"])
    past = run(rng.integers(0, vocab, (1, 16)), {n: zeros(n) for n in past_names}, 0)
    done = [16]
    token = rng.integers(0, vocab, (1, 1))

    def step() -> None:
        past.update(run(token, past, done[0]))
        done[0] += 1

    def prefill(n: int) -> None:
        run(rng.integers(0, vocab, (1, n)), {name: zeros(name) for name in past_names}, 0)

    return {"genai_error": genai_error, "declared": declared, "step": step, "prefill": prefill}


def parked(export: Path, threads: int, lengths: list[int]) -> list[dict[str, Any]]:
    """Parked bytes (KV, fixed) of one conversation after each prompt length, with that prefill's time."""
    import rnnx.runtime as rt
    from rnnx.runtime.serving.conversations import ConversationStore

    session = rt.load(export, backend="onnxruntime", threads=threads)
    store = ConversationStore(session.backend, max_memory_bytes=1 << 34)
    rng = np.random.default_rng(0)
    rows = []
    for length in lengths:
        start = time.perf_counter()
        state = session.prefill(rng.integers(0, session.vocab_size, size=(1, length)))
        seconds = time.perf_counter() - start
        store.put(f"c{length}", state)
        rows.append({"length": length, "prefill": seconds, **store.parked_bytes(f"c{length}")})
    return rows


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="30M,0.5B")
    parser.add_argument("--work", type=Path, default=Path("/tmp/rnnx-bench-checkpoints"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prefill", type=int, default=2048)
    parser.add_argument("--parked", default="1024,8192")
    args = parser.parse_args()
    sizes = [s for s in args.sizes.split(",") if s]
    print(f"# transformers checkpoints on ONNX Runtime CPU, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC\n")
    print(machine_line())
    import onnxruntime
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, onnxruntime {onnxruntime.__version__},"
          f" {args.threads} threads everywhere\n")  # fmt: skip
    export_rows, decode_rows, prefill_rows, parked_rows, builder_rows = [], [], [], [], []
    for size in sizes:
        work = args.work / size
        work.mkdir(parents=True, exist_ok=True)
        folder = work / "checkpoint"
        params = make_checkpoint(size, folder)
        weights = 4 * params
        print(f"## {size}: {params / 1e6:.1f} M parameters, fp32 weights {mb(weights)} MB")
        exports = {}
        for precision, extra in (("fp32", []), ("int4", ["--quantize", "int4", "--no-check"])):
            out = work / f"export-{precision}"
            numbers = timed_export(folder, out, extra)
            exports[precision] = out
            check = "PASS" if numbers["passed"] else "not run" if "--no-check" in extra else "FAIL"
            export_rows.append([size, precision, f"{numbers['seconds']:.0f}", mb(numbers["peak"]),
                                f"{numbers['peak'] / weights:.2f}", check])  # fmt: skip
            print(f"export {precision}: {numbers}", flush=True)
        ours = {precision: rnnx_runner(out, args.threads) for precision, out in exports.items()}
        theirs, builder = transformers_runner(folder, args.threads), builder_runner(folder, work, args.threads)
        runners = {"rnnx fp32": ours["fp32"], "rnnx int4": ours["int4"], "transformers": theirs, "builder": builder}
        before = read_bandwidth(args.threads, nbytes=1 << 30)[0]
        step = alternate({name: r["step"] for name, r in runners.items()})
        bandwidth = max(before, read_bandwidth(args.threads, nbytes=1 << 30)[0])
        print(f"read bandwidth around the steps: best {bandwidth / 1e9:.1f} GB/s; steps {step}", flush=True)
        for r in runners.values():  # a warm-up call of the long-call path, then the timed prefill
            r["prefill"](64)
            r["prefill_s"] = once(lambda: r["prefill"](args.prefill))
        print({name: r["prefill_s"] for name, r in runners.items()}, flush=True)
        for precision, out in exports.items():
            read = step_bytes(out / "model.onnx") + 2 * ours[precision]["state_bytes"]
            bound, mine = read / bandwidth, step[f"rnnx {precision}"]
            decode_rows.append([size, precision, f"{bandwidth / 1e9:.1f}", mb(read), f"{bound * 1e3:.1f}",
                                f"{mine * 1e3:.1f}", f"{mine / bound:.2f}", f"{step['transformers'] * 1e3:.1f}",
                                f"{step['transformers'] / mine:.2f}"])  # fmt: skip
        fp32_step, fp32_prefill = step["rnnx fp32"], ours["fp32"]["prefill_s"]
        prefill_rows.append([size, f"{fp32_prefill:.2f}", f"{theirs['prefill_s']:.2f}",
                             f"{theirs['prefill_s'] / fp32_prefill:.2f}"])  # fmt: skip
        builder_rows.append([size, builder["genai_error"] or "runs", f"{step['builder'] * 1e3:.1f}",
                             f"{fp32_step * 1e3:.1f}", f"{step['builder'] / fp32_step:.2f}",
                             f"{builder['prefill_s']:.2f}", f"{fp32_prefill:.2f}",
                             f"{builder['prefill_s'] / fp32_prefill:.2f}"])  # fmt: skip
        del runners, ours, theirs, builder
        gc.collect()
        for row in parked(exports["fp32"], args.threads, [int(n) for n in args.parked.split(",") if n]):
            parked_rows.append([size, row["length"], mb(row["kv"]), mb(row["fixed"]), mb(row["kv"] + row["fixed"]),
                                f"{row['prefill']:.1f}"])  # fmt: skip
            print(f"parked: {row}", flush=True)
    print("\n### Export (`export-model CKPT --target onnxruntime`, parity check included)\n")
    print(markdown_table(["size", "precision", "seconds", "peak RSS MB", "peak / fp32 weights", "check"], export_rows))
    print("\n### Decode step, batch 1 (ONNX Runtime CPU) against the weight-read time and transformers eager\n")
    print(markdown_table(["size", "precision", "read GB/s", "MB read / step", "weight-read ms", "rnnx ms",
                          "rnnx / weight-read", "transformers eager ms (fp32)", "transformers / rnnx"],
                         decode_rows))  # fmt: skip
    print(f"\n### {args.prefill}-token prefill, batch 1, fp32\n")
    print(markdown_table(["size", "rnnx s", "transformers eager s", "transformers / rnnx"], prefill_rows))
    print("\n### onnxruntime-genai's own builder export of the same weights (fp32)\n")
    print(markdown_table(["size", "in onnxruntime-genai 0.18", "builder graph step ms (2-D position_ids)",
                          "rnnx step ms", "builder / rnnx", f"builder {args.prefill} prefill s", "rnnx prefill s",
                          "builder / rnnx"], builder_rows))  # fmt: skip
    print("\n### Parked conversation (fp32 state)\n")
    print(markdown_table(["size", "tokens", "KV MB", "fixed MB", "total MB", "prefill s"], parked_rows))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
