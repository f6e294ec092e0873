"""rnnx's native LinearRecurrence (``rnnx.runtime.ortops``) against ONNX Runtime's ``com.microsoft.LinearAttention``,
the standard ``ai.onnx::LinearAttention-27`` (its function body) and transformers' eager gated delta rule, CPU.

    python benchmarks/bench_linear_recurrence_ort.py [--heads 8] [--head-size 64] [--prefill 512,4096] [--per-key-decay]

One-node graphs per update rule with the same inputs (batch 1, fp32, H_q = H_kv = ``--heads``, dk = dv =
``--head-size``, a past state, scale 0 = 1/sqrt(dk), decay per head unless ``--per-key-decay``, beta per head): the
``rnnx`` LinearRecurrence node on a session with the library registered (what an ``onnxruntime``-target export runs),
the contrib op and the opset-27 standard op on stock sessions; for ``gated_delta`` also transformers' pure-PyTorch
``torch_recurrent_gated_delta_rule`` (decode) / ``torch_chunk_gated_delta_rule`` (prefill) of ``qwen3_5``, with torch
on the same thread count. For a decode step (T = 1) and prefills of ``--prefill`` tokens, on 1 intra-op thread and on
ONNX Runtime's default, the median time of one run (nine 0.05 s samples of each, taken in alternation so that all see
the same machine load) and the ratios other / rnnx (above 1: rnnx is faster). The outputs are checked to agree first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import machine_line, markdown_table, measure

from rnnx.runtime import ortops
from rnnx.runtime.contract.ops import LINEAR_RECURRENCE, ONNX_DOMAIN, ONNX_DOMAIN_VERSION

RULES = ("linear", "gated", "delta", "gated_delta")


def one_node(domain: str, op_type: str, rule: str, heads: int, shapes: dict[str, tuple[int, ...]]) -> bytes:
    """A one-node graph of ``op_type`` in ``domain`` with the inputs ``rule`` reads, by position (the two ops share
    the first six inputs' order)."""
    names = [
        n if n in ("query", "key", "value", "past_state") or (n == "decay" and "gated" in rule)
        or (n == "beta" and "delta" in rule) else ""
        for n in LINEAR_RECURRENCE.inputs[:6]
    ]  # fmt: skip
    while not names[-1]:
        names.pop()
    node = helper.make_node(op_type, names, list(LINEAR_RECURRENCE.outputs), domain=domain, q_num_heads=heads,
                            kv_num_heads=heads, update_rule=rule, scale=0.0)  # fmt: skip
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [node], op_type, [helper.make_tensor_value_info(n, f32, shapes[n]) for n in names if n],
        [helper.make_tensor_value_info(n, f32, None) for n in LINEAR_RECURRENCE.outputs],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 27 if domain == "" else 21)]
    if domain:
        opsets.append(helper.make_opsetid(domain, ONNX_DOMAIN_VERSION if domain == ONNX_DOMAIN else 1))
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def inputs(T: int, H: int, d: int, per_key: bool, rng: np.random.Generator) -> dict[str, np.ndarray]:
    k = rng.standard_normal((1, T, H, d)).astype(np.float32)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return {
        "query": rng.standard_normal((1, T, H * d)).astype(np.float32),
        "key": k.reshape(1, T, H * d),
        "value": rng.standard_normal((1, T, H * d)).astype(np.float32),
        "past_state": rng.standard_normal((1, H, d, d)).astype(np.float32),
        "decay": (-0.5 * rng.random((1, T, H * (d if per_key else 1)))).astype(np.float32),
        "beta": rng.random((1, T, H)).astype(np.float32),
    }


def interleaved(*calls, rounds: int = 9) -> list[float]:
    """Median time of one call of each of ``calls``, measured in alternation (``timing.measure``, one 0.05 s sample
    per round) so that all see the same machine load."""
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(rounds):
        for samples, call in zip(times, calls):
            samples.append(measure(call, warmup=1, repeat=1, min_time=0.05))
    return [statistics.median(t) for t in times]


def transformers_call(x: dict[str, np.ndarray], H: int, d: int):
    """transformers' eager gated delta rule on the same inputs ((B, T, H, D) layout, scale 1/sqrt(d) inside), or
    None when transformers is not installed."""
    try:
        from transformers.models.qwen3_5 import modeling_qwen3_5 as qwen
    except ImportError:
        return None
    import torch

    T = x["query"].shape[1]
    q, k, v = (torch.from_numpy(x[n]).reshape(1, T, H, d) for n in ("query", "key", "value"))
    g = torch.from_numpy(x["decay"]).reshape(1, T, H)
    beta = torch.from_numpy(x["beta"]).reshape(1, T, H)
    state = torch.from_numpy(x["past_state"])
    rule = qwen.torch_recurrent_gated_delta_rule if T == 1 else qwen.torch_chunk_gated_delta_rule

    def call():
        with torch.no_grad():
            return rule(q, k, v, g, beta, initial_state=state, output_final_state=True)

    return call


def session(model: bytes, threads: int, library: Path | None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    if library is not None:
        options.register_custom_ops_library(str(library))
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-size", type=int, default=64)
    parser.add_argument("--prefill", default="512,4096", help="comma-separated prefill lengths")
    parser.add_argument("--per-key-decay", action="store_true")
    args = parser.parse_args()
    library = ortops.build()
    H, d = args.heads, args.head_size
    rng = np.random.default_rng(0)
    rows = []
    import torch

    default_threads = torch.get_num_threads()
    phases = [(1, "decode")] + [(int(n), f"prefill {int(n)}") for n in args.prefill.split(",")]
    for threads, thread_label in ((1, "1"), (0, "default")):
        torch.set_num_threads(1 if threads == 1 else default_threads)
        for T, phase in phases:
            x = inputs(T, H, d, args.per_key_decay, rng)
            for rule in RULES:
                shapes = {n: a.shape for n, a in x.items()}
                ours = session(one_node(ONNX_DOMAIN, LINEAR_RECURRENCE.onnx_name, rule, H, shapes), threads, library)
                contrib = session(one_node("com.microsoft", "LinearAttention", rule, H, shapes), threads, None)
                standard = session(one_node("", "LinearAttention", rule, H, shapes), threads, None)
                feeds = {i.name: x[i.name] for i in ours.get_inputs()}
                want = ours.run(None, feeds)
                for other in (contrib, standard):
                    for got, ref in zip(other.run(None, feeds), want):
                        if float(np.abs(got - ref).max()) > 1e-3 * max(1.0, float(np.abs(ref).max())):
                            raise SystemExit(f"{rule} T={T}: the rnnx node and a LinearAttention node disagree")
                calls = [lambda s=s: s.run(None, feeds) for s in (ours, contrib, standard)]
                eager = transformers_call(x, H, d) if rule == "gated_delta" and not args.per_key_decay else None
                times = interleaved(*calls, *([eager] if eager else []))
                t_ours = times[0]
                row = [thread_label, phase, rule] + [f"{t * 1e6:.1f}" for t in times[:3]]
                row.append(f"{times[3] * 1e6:.1f}" if eager else "n/a")
                row += [f"{times[1] / t_ours:.2f}", f"{times[2] / t_ours:.2f}"]
                row.append(f"{times[3] / t_ours:.2f}" if eager else "n/a")
                rows.append(row)
                print(" | ".join(row), flush=True)
    print()
    print(machine_line() + f", onnxruntime {ort.__version__}, torch {torch.__version__}")
    print(f"B=1, H_q=H_kv={H}, dk=dv={d}, fp32, decay {'per key' if args.per_key_decay else 'per head'}")
    head = ["threads", "phase", "rule", "rnnx (us)", "com.microsoft (us)", "ai.onnx body (us)", "transformers (us)",
            "com.microsoft / rnnx", "ai.onnx / rnnx", "transformers / rnnx"]  # fmt: skip
    print(markdown_table(head, rows))


if __name__ == "__main__":
    main()
