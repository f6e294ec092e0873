"""GPU benchmark of the rnnx CUDA kernels (plugins/kernels through the PyTorch binding).

Run on a machine with a CUDA device: ``python benchmarks/bench_cuda_kernels.py``. Prints markdown
tables for docs/benchmarks.md:

* SRU scan: achieved bandwidth (bytes of U, x, h read/written once) against the measured
  device-to-device copy bandwidth of the same device;
* causal linear attention prefill (B=8, H=16, L=4096, E=M=64, the op's layout: heads packed, q (B, L, H*E)): the
  CUDA kernel against the chunked PyTorch path and, when ``fla`` is importable, flash-linear-attention's
  ``chunk_linear_attn``;
* the decode step (L = 1) latency of the kernel against the PyTorch step.

Times are CUDA-event medians after warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable

import torch

from rnnx.models.ops import cuda as cuda_ops
from rnnx.models.ops.causal_linear_attention.checks import AttentionInputs
from rnnx.models.ops.causal_linear_attention.chunked import DEFAULT_CHUNK_SIZE, chunked_forward


def cuda_time(fn: Callable[[], object], warmup: int = 3, repeat: int = 20) -> float:
    """Median seconds of one call of ``fn`` measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return statistics.median(samples)


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write counted)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / cuda_time(lambda: dst.copy_(src))


def bench_sru(ext, dtype: torch.dtype, copy_bw: float) -> list[str]:
    rows = []
    stream = torch.cuda.current_stream().cuda_stream
    for L, B, d, D, k in [(256, 32, 1024, 1, 3), (256, 64, 2048, 2, 3), (1024, 32, 1024, 1, 4), (4096, 16, 1024, 2, 3)]:
        width = D * d
        U = torch.randn(L, B, width * k, device="cuda", dtype=dtype)
        x = torch.randn(L, B, width, device="cuda", dtype=dtype) if k == 3 else None
        w = torch.randn(2 * width, device="cuda", dtype=dtype) * 0.5
        b = torch.randn(2 * width, device="cuda", dtype=dtype) * 0.5
        c0 = torch.zeros(B, width, device="cuda")
        h = U.new_empty((L, B, width))
        c = torch.empty_like(c0)
        t = cuda_time(lambda: ext.sru_scan(U, x, w, b, c0, None, h, c, d, D, k, True, False, 1.0, stream))
        nbytes = U.numel() * U.element_size() + h.numel() * h.element_size()
        nbytes += 0 if x is None else x.numel() * x.element_size()
        bw = nbytes / t
        rows.append(
            f"| {str(dtype).split('.')[-1]} | {L} | {B} | {D}x{d} | {k} | {t * 1e3:.3f} | "
            f"{bw / 1e9:.0f} | {bw / copy_bw:.2f} |"
        )
    return rows


def bench_linear_attention(ext, dtype: torch.dtype, B=8, H=16, L=4096, E=64, M=64) -> list[str]:
    stream = torch.cuda.current_stream().cuda_stream
    q = torch.randn(B, L, H * E, device="cuda", dtype=dtype) * 0.5
    k = torch.randn(B, L, H * E, device="cuda", dtype=dtype) * 0.5
    v = torch.randn(B, L, H * M, device="cuda", dtype=dtype)
    out = torch.empty_like(v)
    S = torch.zeros(B, H, E, M, device="cuda")
    z = torch.zeros(B, H, E, device="cuda")
    t_kernel = cuda_time(
        lambda: ext.causal_linear_attention(q, k, v, None, None, None, out, S, z, 1e-6, H, False, stream)
    )
    t_torch = cuda_time(
        lambda: chunked_forward(AttentionInputs(q, k, v, None, None, None, 1e-6, H, False), DEFAULT_CHUNK_SIZE),
        repeat=5,
    )
    name = str(dtype).split(".")[-1]
    rows = [
        f"| {name} | rnnx CUDA kernel | {t_kernel * 1e3:.3f} | 1.00 |",
        f"| {name} | rnnx chunked torch | {t_torch * 1e3:.3f} | {t_torch / t_kernel:.2f} |",
    ]
    try:
        from fla.ops.linear_attn import chunk_linear_attn
    except Exception as exc:  # not installed, or no Triton for this device
        rows.append(f"| {name} | fla chunk_linear_attn | skipped ({type(exc).__name__}) | |")
    else:
        # fla gets (B, T, H, K) (head_first=False where the argument exists), the packed layout's view, and
        # phi(q), phi(k).
        qf = (torch.nn.functional.elu(q) + 1).view(B, L, H, E)
        kf = (torch.nn.functional.elu(k) + 1).view(B, L, H, E)
        vf = v.view(B, L, H, M)
        import inspect

        layout = {"head_first": False} if "head_first" in inspect.signature(chunk_linear_attn).parameters else {}
        try:
            t_fla = cuda_time(lambda: chunk_linear_attn(qf, kf, vf, normalize=True, scale=1.0, **layout))
            rows.append(
                f"| {name} | fla chunk_linear_attn (feature map applied outside) | {t_fla * 1e3:.3f} | "
                f"{t_fla / t_kernel:.2f} |"
            )
        except Exception as exc:
            rows.append(f"| {name} | fla chunk_linear_attn | failed: {type(exc).__name__}: {exc} | |")
    return rows


def bench_decode(ext, dtype: torch.dtype, B=8, H=16, E=64, M=64) -> list[str]:
    stream = torch.cuda.current_stream().cuda_stream
    q, k = (torch.randn(B, 1, H * E, device="cuda", dtype=dtype) for _ in range(2))
    v = torch.randn(B, 1, H * M, device="cuda", dtype=dtype)
    S = torch.randn(B, H, E, M, device="cuda")
    z = torch.rand(B, H, E, device="cuda")
    out = torch.empty_like(v)
    t_kernel = cuda_time(
        lambda: ext.causal_linear_attention(q, k, v, S, z, None, out, S, z, 1e-6, H, False, stream), repeat=200
    )
    t_torch = cuda_time(
        lambda: chunked_forward(AttentionInputs(q, k, v, S, z, None, 1e-6, H, False), DEFAULT_CHUNK_SIZE), repeat=200
    )
    name = str(dtype).split(".")[-1]
    return [f"| {name} | {t_kernel * 1e6:.1f} | {t_torch * 1e6:.1f} | {t_torch / t_kernel:.2f} |"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32,float16,bfloat16")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_cuda_kernels: needs a CUDA device", file=sys.stderr)
        return 1
    ext = cuda_ops.load()
    if ext is None:
        print(f"bench_cuda_kernels: CUDA binding unavailable: {cuda_ops.EXTENSION.error}", file=sys.stderr)
        return 1
    dtypes = [getattr(torch, name) for name in args.dtypes.split(",")]
    print(f"Device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}\n")
    copy_bw = copy_bandwidth()
    print(f"### SRU scan (device-to-device copy: {copy_bw / 1e9:.0f} GB/s)\n")
    print("| dtype | L | B | D x d | k | ms | GB/s | of copy bw |\n|---|---|---|---|---|---|---|---|")
    for dtype in dtypes:
        print("\n".join(bench_sru(ext, dtype, copy_bw)))
    print("\n### Causal linear attention prefill (B=8, H=16, L=4096, E=M=64)\n")
    print("| dtype | implementation | ms | time / kernel |\n|---|---|---|---|")
    for dtype in dtypes:
        print("\n".join(bench_linear_attention(ext, dtype)))
    print("\n### Causal linear attention decode step (B=8, H=16, E=M=64)\n")
    print("| dtype | kernel µs | torch µs | torch / kernel |\n|---|---|---|---|")
    for dtype in dtypes:
        print("\n".join(bench_decode(ext, dtype)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
