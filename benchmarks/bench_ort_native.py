"""ONNX Runtime with rnnx's native SRUScan (``rnnx.runtime.ortops``) against the function body and torch, CPU.

    python benchmarks/bench_ort_native.py [--lengths 1,64,1024,4096] [--hidden 512]

All in one run, batch 1, fp32, median of several samples (``timing.measure``):

1. **The SRU recurrence** (U precomputed, d = ``--hidden``, k = 3 with the skip term): a one-node SRUScan
   graph on ONNX Runtime with the library, rnnx's torch op ``sru_scan`` (the same C++ kernel, ATen's
   threads) and the published ``sru`` 2.6.0 CPU kernel (``.reference/sru-2.6.0``).
2. **The SRU layer** (``sru.SRU(d, d)`` of sru 2.6.0, one layer: the input projection and the recurrence):
   exported with ``rnnx.export.export`` (target onnxruntime) and run on ONNX Runtime with the library and
   through the function body, against the published layer's own forward (its CPU kernel) and rnnx's
   drop-in ``rnnx.models.SRU`` with the same weights, all in inference mode.
3. **SRU++ prefill**: the ``srupp_linear_copy`` demo exported for ONNX Runtime, ``Session.prefill`` of L
   tokens on torch (the checkpoint), on ONNX Runtime through the function bodies, and with the library.
4. **The decode step** of the same model on the three.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sru_cpu import import_published_sru
from timing import machine_line, markdown_table, measure

import rnnx.runtime as rt
from rnnx.export import export, export_model
from rnnx.models.checkpoint import demo_checkpoint_path
from rnnx.models.ops.sru_scan import sru_scan
from rnnx.runtime import ortops
from rnnx.runtime.backends.ort_backend import OrtBackend

REPO = Path(__file__).resolve().parents[1]


def published_scan():
    """sru 2.6.0's CPU recurrence (``sru.ops.elementwise_recurrence_inference``), or None when not installed."""
    if import_published_sru() is None:
        return None
    from sru.ops import elementwise_recurrence_inference

    return elementwise_recurrence_inference


def layer_table(lengths: list[int], d: int, ort) -> str:
    """Section 2: one published SRU layer against its ONNX Runtime export (native ops and function body) and
    rnnx's drop-in layer; empty when sru 2.6.0 is not installed."""
    sru = import_published_sru()
    if sru is None:
        return ""
    from rnnx.models import SRU

    torch.manual_seed(0)
    published = sru.SRU(d, d, num_layers=1).eval()
    ours = SRU(d, d, num_layers=1).eval()
    ours.load_state_dict(published.state_dict())
    with tempfile.TemporaryDirectory() as tmp:
        result = export(published, (torch.randn(8, 2, d),), Path(tmp) / "sru", target="onnxruntime",
                        init_state=lambda batch: torch.zeros(1, batch, d), input_names=["x"],
                        dynamic_axes={"x": {0: "length", 1: "batch"}}, check=False)  # fmt: skip
        model = str(result.out_dir / "model.onnx")
        sessions = {}
        for native in (True, False):
            options = ort.SessionOptions()
            if native:
                ortops.register(options)
            sessions[native] = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        rows = []
        for L in lengths:
            x = torch.randn(L, 1, d)
            inputs = sessions[True].get_inputs()
            feeds = {inputs[0].name: x.numpy(), inputs[1].name: np.zeros((1, 1, d), np.float32)}
            with torch.inference_mode():
                h_pub = published(x)[0]
                t_pub = measure(lambda: published(x))
                t_ours = measure(lambda: ours(x))
            h_native = sessions[True].run(None, feeds)[0]
            assert np.max(np.abs(h_native - h_pub.numpy())) < 1e-4, "the export does not match the published layer"
            t_native = measure(lambda: sessions[True].run(None, feeds))
            t_body = measure(lambda: sessions[False].run(None, feeds), repeat=3 if L >= 1024 else 7)
            rows.append([L, f"{t_native * 1e3:.3f}", f"{t_body * 1e3:.3f}", f"{t_pub * 1e3:.3f}", f"{t_ours * 1e3:.3f}",
                         f"{t_pub / t_native:.2f}x", f"{t_ours / t_native:.2f}x"])  # fmt: skip
            print("  layer", rows[-1], flush=True)
    header = ["L", "ORT native ms", "ORT function body ms", "sru 2.6 layer ms", "rnnx.models.SRU ms",
              "sru 2.6 / ORT native", "rnnx torch / ORT native"]  # fmt: skip
    return markdown_table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="1,64,1024,4096")
    parser.add_argument("--hidden", type=int, default=512)
    args = parser.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    d = args.hidden
    if ortops.find_library() is None:
        sys.exit(f"{ortops.library_path()} is not built: python3 -m rnnx.runtime.ortops")
    import onnxruntime as ort
    from onnx import TensorProto, helper

    print(f"# rnnx native ONNX Runtime ops, CPU\n\n{machine_line()}, onnxruntime {ort.__version__}\n")

    node = helper.make_node("SRUScan", ["U", "x", "weight_c", "bias", "c0"], ["h", "c_last"], domain="rnnx",
                            hidden_size=d, num_matrices=3, has_skip_term=1)  # fmt: skip
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [node], "sru",
        [helper.make_tensor_value_info(n, f32, None) for n in ("U", "x", "weight_c", "bias", "c0")],
        [helper.make_tensor_value_info(n, f32, None) for n in ("h", "c_last")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("rnnx", 1)])
    options = ort.SessionOptions()
    ortops.register(options)
    native = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    published = published_scan()
    rows = []
    for L in lengths:
        g = torch.Generator().manual_seed(L)
        U, x = torch.randn(L, 1, 3 * d, generator=g), torch.randn(L, 1, d, generator=g)
        wc, bias, c0 = torch.randn(2 * d, generator=g), torch.randn(2 * d, generator=g), torch.zeros(1, d)
        feeds = {"U": U.numpy(), "x": x.numpy(), "weight_c": wc.numpy(), "bias": bias.numpy(), "c0": c0.numpy()}
        t_native = measure(lambda: native.run(None, feeds))
        with torch.inference_mode():
            t_torch = measure(lambda: sru_scan(U, x, wc, bias, c0, hidden_size=d))
            t_pub = None
            if published is not None:
                scale = torch.ones(1)
                t_pub = measure(lambda: published(U, x, wc, bias, c0, 0, d, False, True, scale))
        row = [L, f"{t_native * 1e3:.3f}", f"{t_torch * 1e3:.3f}", f"{t_torch / t_native:.2f}x"]
        row += [f"{t_pub * 1e3:.3f}", f"{t_pub / t_native:.2f}x"] if t_pub is not None else ["-", "-"]
        rows.append(row)
        print("  recurrence", row, flush=True)
    header = ["L", "ORT native ms", "rnnx torch op ms", "torch / native", "sru 2.6 kernel ms", "sru 2.6 / native"]
    recurrence = markdown_table(header, rows)
    layer = layer_table(lengths, d, ort)

    with tempfile.TemporaryDirectory() as tmp:
        export = export_model(str(demo_checkpoint_path("srupp_linear_copy")), Path(tmp) / "srupp",
                              target="onnxruntime", check=False).out_dir  # fmt: skip
        sessions = {
            "torch": rt.load(demo_checkpoint_path("srupp_linear_copy")),
            "ORT function body": rt.Session(OrtBackend(export, native_ops=False)),
            "ORT native": rt.Session(OrtBackend(export, native_ops=True)),
        }
        rng = np.random.default_rng(0)
        prefill_rows, times = [], {}
        for L in lengths:
            prompt = rng.integers(0, 10, (1, L))
            for name, session in sessions.items():
                times[(name, L)] = measure(lambda s=session: s.prefill(prompt), repeat=5, min_time=0.1)
            base = times[("torch", L)]
            prefill_rows.append([L] + [f"{times[(n, L)] * 1e3:.2f}" for n in sessions]
                                + [f"{base / times[(n, L)]:.2f}x" for n in list(sessions)[1:]])  # fmt: skip
            print("  prefill", prefill_rows[-1], flush=True)
        step_rows = []
        for name, session in sessions.items():
            state = session.prefill(rng.integers(0, 10, (1, 16)))
            token = np.array([3])
            t = measure(lambda s=session, st=state: s.step(token, state=st))
            step_rows.append([name, f"{t * 1e3:.3f}"])
    print(f"\n## SRU recurrence (d = {d}, batch 1)\n\n{recurrence}")
    if layer:
        print(f"\n## SRU layer (sru 2.6.0 SRU(d, d), d = {d}, batch 1)\n\n{layer}")
    names = list(sessions)
    print("\n## SRU++ demo prefill (ms; speed-up over torch)\n")
    print(markdown_table(["L", *names, *(f"{n} vs torch" for n in names[1:])], prefill_rows))
    print("\n## SRU++ demo decode step\n")
    print(markdown_table(["backend", "ms / step"], step_rows))


if __name__ == "__main__":
    main()
