"""The paper-shape image-generation benchmark, end to end at a few steps (issue 13, part 3).

``benchmarks/bench_image_generation.py`` is the end-to-end test of ``rnnx.models.convert`` and the generic
``rnnx.export.export`` on a model nobody wrote for rnnx: fast-transformers' encoder with the shapes of
Katharopoulos et al. 2020 (MNIST: 8 layers, d_model 256). Before timing, it asserts that fast-transformers'
own recurrent model, the converted module in PyTorch and both ONNX exports in ONNX Runtime sample the same
pixels for one seed, and that softmax recompute and its KV cache do. This runs it for 6 steps per image, so
the benchmark cannot rot, and checks what it printed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("fast_transformers", reason="pytorch-fast-transformers is installed by scripts/setup.sh")

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_image_generation.py"


def load_bench():
    sys.path.insert(0, str(BENCH.parent))
    try:
        spec = importlib.util.spec_from_file_location("bench_image_generation", BENCH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH.parent))


@pytest.mark.slow
def test_all_decoders_sample_the_same_pixels_and_exports_pass_parity(capsys: pytest.CaptureFixture[str]) -> None:
    bench = load_bench()
    bench.main(["--dataset", "mnist", "--steps", "6", "--batch", "2", "--windows", "2", "--window-steps", "2",
                "--check-steps", "6", "--max-load", "1000", "--load-wait", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert "1-minute load" in out and "timing starts: load average" in out, out
    assert "< 1000.00 after 0 s: timing" in out and "WARNING" not in out, out  # below a max-load of 1000
    for name in ("rnnx-ort", "rnnx-ort-trt"):  # the weight-read rows: 8 layers of 3.1 MB, tables left out
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} (batch 1) |"))
        read, total = (float(x) for x in row.split("|")[2].split(" of "))
        assert 24.0 < read < total < 27.0, row
    assert "exported rnnx-ort (onnxruntime)" in out and "exported rnnx-ort-trt (tensorrt)" in out
    assert out.count(": PASS") == 2, out
    assert "ft-recurrent, rnnx-torch, rnnx-ort, rnnx-ort-trt: same 12 pixels for seed 0" in out, out
    assert "recompute, kv-cache: same 12 pixels for seed 0" in out, out
    for variant in bench.VARIANTS:
        assert f"| {variant} |" in out, f"no table row for {variant}"


def test_sampler_draws_from_the_mixture() -> None:
    """A mixture whose only heavy component sits at a pixel value samples around that value."""
    np = pytest.importorskip("numpy")
    bench = load_bench()
    params = np.zeros((4000, bench.OUT))
    params[:, :10] = -30.0
    params[:, 3] = 30.0  # component 3 carries all the weight
    params[:, 10 + 3] = (200 / 255) * 2 - 1  # its mean: pixel 200 on the [-1, 1] scale
    params[:, 20:] = -4.0  # small scale
    pixels = bench.Sampler(0)(params)
    assert pixels.dtype == np.int64 and pixels.min() >= 0 and pixels.max() <= 255
    assert abs(float(np.median(pixels)) - 200) <= 1
    assert (abs(pixels - 200) <= 10).mean() > 0.9


def test_initializer_bytes_counts_named_initializers_once_with_external_data(tmp_path: Path) -> None:
    """Weight bytes of a tiny ONNX model saved with external data: a weight read by two MatMuls counts once,
    a table only gathered from is set apart, an equal copy under another name counts again."""
    np = pytest.importorskip("numpy")
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    bench = load_bench()
    rng = np.random.default_rng(0)
    table = rng.standard_normal((16, 4)).astype(np.float32)
    weight = rng.standard_normal((4, 4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float64)
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["x"]),
        helper.make_node("MatMul", ["x", "weight"], ["y"]),
        helper.make_node("MatMul", ["y", "weight"], ["z"]),  # the same initializer read twice
        helper.make_node("MatMul", ["z", "copy"], ["u"]),
        helper.make_node("Cast", ["u"], ["v"], to=TensorProto.DOUBLE),
        helper.make_node("Add", ["v", "bias"], ["out"]),
    ]
    initializers = [numpy_helper.from_array(a, n) for a, n in
                    ((table, "table"), (weight, "weight"), (weight.copy(), "copy"), (bias, "bias"))]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("out", TensorProto.DOUBLE, [1, 4])],
        initializers,
    )
    path = tmp_path / "model" / "model.onnx"
    path.parent.mkdir()
    onnx.save_model(helper.make_model(graph), str(path), save_as_external_data=True, location="model.onnx.data",
                    size_threshold=0)  # fmt: skip
    assert (path.parent / "model.onnx.data").stat().st_size >= table.nbytes + 2 * weight.nbytes + bias.nbytes
    got = bench.initializer_bytes(path)
    assert got.count == 4
    assert got.total == table.nbytes + 2 * weight.nbytes + bias.nbytes == 64 * 4 + 2 * 16 * 4 + 4 * 8
    assert got.gathered == table.nbytes and got.read == 2 * weight.nbytes + bias.nbytes
    assert got.duplicate == weight.nbytes


def test_read_bandwidth_and_load_wait() -> None:
    """The bandwidth probe gives (best >= median > 0) and rejects nonsense; the load wait polls until the load
    drops, or gives up after its time and says so. The load and the sleep are stand-ins there: a real load
    average cannot be set from a test."""
    bench = load_bench()
    best, median = bench.read_bandwidth(2, nbytes=8 << 20, repeat=3)
    assert best >= median > 1e8  # any machine reads more than 100 MB/s
    with pytest.raises(ValueError, match="threads >= 1"):
        bench.read_bandwidth(0)

    loads, slept, lines = iter([5.0, 3.0, 1.5]), [], []
    quiet, load = bench.wait_for_load(2.0, 60, lines.append, poll_seconds=10, read_load=lambda: next(loads),
                                      sleep=slept.append)  # fmt: skip
    assert (quiet, load, slept) == (True, 1.5, [10, 10])
    assert "waiting for the 1-minute load 5.00 to drop below 2.00" in lines[0] and "1.50 < 2.00" in lines[-1]

    slept, lines = [], []
    quiet, load = bench.wait_for_load(2.0, 25, lines.append, poll_seconds=10, read_load=lambda: 4.0,
                                      sleep=slept.append)  # fmt: skip
    assert (quiet, load, slept) == (False, 4.0, [10, 10, 5])
    assert lines[-1].startswith("  WARNING: timing under a 1-minute load of 4.00 >= --max-load 2.00 (waited 25 s)")
