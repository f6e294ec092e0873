"""Decode-step latency: ONNX Runtime (CPU EP) vs PyTorch eager for the shipped demo models, one run.

    python benchmarks/bench_onnx_step_cpu.py [--contexts 64 4096]

For each demo checkpoint, exports both targets (``tensorrt``: the rnnx nodes run through their
standard-op function bodies; ``onnxruntime``: attention lowered to com.microsoft.LinearAttention),
prefills a random prompt of each context length with PyTorch, then times one decode step (B = 1,
L = 1) from that state in every backend. A recurrent model's step should not depend on the context.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from timing import machine_line, markdown_table, measure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--contexts", type=int, nargs="+", default=[64, 4096])
    ap.add_argument("--prefill", type=int, nargs="+", default=[512, 4096])
    args = ap.parse_args()

    from rnnx.export import export_model, read_metadata
    from rnnx.models import DEMO_CHECKPOINTS, demo_checkpoint_path, load_checkpoint
    from rnnx.models.state import flatten_state

    torch.manual_seed(0)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    rows: list[list[object]] = []
    prefill_rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in DEMO_CHECKPOINTS:
            model, _ = load_checkpoint(demo_checkpoint_path(name))
            model.eval()
            sessions = {}
            for target in ("tensorrt", "onnxruntime"):
                out = Path(tmp) / f"{name}-{target}"
                export_model(model, out, target=target, check=False)
                meta = read_metadata(out)
                sess = ort.InferenceSession(str(out / meta["model_file"]), opts, providers=["CPUExecutionProvider"])
                sessions[target] = (sess, [i["name"] for i in meta["inputs"]])
            for context in args.contexts:
                prompt = torch.randint(0, model.vocab_size, (1, context))
                token = torch.randint(0, model.vocab_size, (1, 1))
                with torch.inference_mode():
                    _, state = model(prompt)
                    t_torch = measure(lambda: model(token, state))
                past = [t.numpy() for _, t in flatten_state(state)]
                row: list[object] = [name, context, f"{t_torch * 1e3:.3f}"]
                for target in ("tensorrt", "onnxruntime"):
                    sess, names = sessions[target]
                    feed = dict(zip(names, [token.numpy(), np.ones((1, 1), np.int64), *past]))
                    t_ort = measure(lambda: sess.run(None, feed))
                    row += [f"{t_ort * 1e3:.3f}", f"{t_torch / t_ort:.2f}x"]
                rows.append(row)
            for length in args.prefill:
                prompt = torch.randint(0, model.vocab_size, (1, length))
                with torch.inference_mode():
                    fresh = model.init_state(1)
                    t_torch = measure(lambda: model(prompt), repeat=3, min_time=0.05)
                past = [t.numpy() for _, t in flatten_state(fresh)]
                row = [name, length, f"{t_torch * 1e3:.1f}"]
                for target in ("tensorrt", "onnxruntime"):
                    sess, names = sessions[target]
                    feed = dict(zip(names, [prompt.numpy(), np.ones((1, length), np.int64), *past]))
                    t_ort = measure(lambda: sess.run(None, feed), repeat=3, min_time=0.05)
                    row += [f"{t_ort * 1e3:.1f}", f"{t_torch / t_ort:.2f}x"]
                prefill_rows.append(row)

    print(f"Decode step, B=1, fp32; {machine_line()}; onnxruntime {ort.__version__}\n")
    print(
        markdown_table(
            [
                "model",
                "context",
                "torch eager ms",
                "ORT function body ms",
                "speed-up",
                "ORT native LinearAttention ms",
                "speed-up",
            ],
            rows,
        )
    )
    print()
    print(
        markdown_table(
            [
                "model",
                "prefill length",
                "torch eager ms",
                "ORT function body ms",
                "speed-up",
                "ORT native LinearAttention ms",
                "speed-up",
            ],
            prefill_rows,
        )
    )


if __name__ == "__main__":
    main()
