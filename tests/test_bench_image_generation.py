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
                "--check-steps", "6"])  # fmt: skip
    out = capsys.readouterr().out
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
