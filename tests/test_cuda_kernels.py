"""The CUDA kernels of plugins/kernels (through the PyTorch binding in models/ops/cuda) against the
naive references. (The kernel library's compile check runs in CI through tests/test_plugins.py,
whose CMake build compiles plugins/kernels.)

GPU tests (marked ``gpu``) skip without a CUDA device. Tolerances, against fp64 references computed
from the same (already rounded) inputs: fp32 1e-4; fp16 / bf16 compute in fp32 but round phi(q),
phi(k) and the in-chunk scores A to the activation type for the tensor-core matmuls, so outputs get
a few roundings of that type (fp16 1e-2, bf16 6e-2 absolute on O(1) values, relative on the state).
"""

from __future__ import annotations

import pytest
import torch

from rnnx.models.ops import cuda as cuda_ops
from rnnx.models.ops.linear_attention import causal_linear_attention_op
from rnnx.models.ops.linear_attention.naive import causal_linear_attention_quadratic
from rnnx.models.ops.sru import sru_scan, sru_scan_naive

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DIMS = [32, 64, 128]
ATOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
RTOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
SRU_ATOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}

gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _ext():
    ext = cuda_ops.load()
    assert ext is not None, f"CUDA binding did not build: {cuda_ops.build_error()}"
    return ext


def _stream() -> int:
    return torch.cuda.current_stream().cuda_stream


# ---------------------------------------------------------------------------------------------
# SRU scan


def _sru_inputs(L, B, d, D, k, dtype, mask, seed):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype).cuda()

    U = rnd(L, B, D * d * k)
    x = rnd(L, B, D * d)
    weight_c = rnd(2 * D * d, scale=0.5)
    bias = rnd(2 * D * d, scale=0.5)
    c0 = (torch.randn(B, D * d, generator=g, dtype=torch.float64)).float().cuda()
    mask_pad = None
    if mask:
        mask_pad = torch.zeros(L, B, dtype=torch.bool)
        for b in range(1, B):
            mask_pad[L - min(L, b):, b] = True  # row b right-padded by b steps
        mask_pad = mask_pad.cuda()
    return U, x, weight_c, bias, c0, mask_pad


def _sru_reference(U, x, weight_c, bias, c0, mask_pad, **attrs):
    h, c = sru_scan_naive(
        U.double().cpu(), x.double().cpu(), weight_c.double().cpu(), bias.double().cpu(),
        c0.double().cpu(), None if mask_pad is None else mask_pad.cpu(), **attrs,
    )
    return h, c


SRU_CONFIGS = [
    # (D, k, has_skip_term, use_tanh, mask)
    (1, 3, True, False, False),
    (1, 3, True, True, True),
    (1, 4, True, False, True),
    (2, 3, True, False, True),
    (2, 4, False, True, True),
    (2, 3, False, False, False),
]


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("config", SRU_CONFIGS, ids=lambda c: "D%d-k%d-skip%d-tanh%d-mask%d" % c)
def test_sru_scan_matches_naive(dtype, config):
    _ext()
    D, k, skip, use_tanh, mask = config
    for seed, (L, B, d) in enumerate([(1, 1, 5), (13, 3, 37), (70, 4, 130)]):
        U, x, w, b, c0, m = _sru_inputs(L, B, d, D, k, dtype, mask, seed)
        attrs = dict(hidden_size=d, num_directions=D, num_matrices=k, has_skip_term=skip,
                     use_tanh=use_tanh, scale_x=0.7)
        h, c = sru_scan(U, x, w, b, c0, m, **attrs)
        h_ref, c_ref = _sru_reference(U, x, w, b, c0, m, **attrs)
        assert h.dtype == dtype and c.dtype == torch.float32
        torch.testing.assert_close(h.double().cpu(), h_ref, atol=SRU_ATOL[dtype], rtol=SRU_ATOL[dtype])
        torch.testing.assert_close(c.double().cpu(), c_ref, atol=1e-4, rtol=1e-4)


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sru_scan_prefill_then_step_and_in_place(dtype):
    ext = _ext()
    L, B, d, D, k = 20, 3, 40, 1, 3
    U, x, w, b, c0, _ = _sru_inputs(L, B, d, D, k, dtype, False, 7)
    attrs = (d, D, k, True, False, 1.0)
    h_all = U.new_empty((L, B, D * d))
    c_all = torch.empty_like(c0)
    ext.sru_scan(U, x, w, b, c0, None, h_all, c_all, *attrs, _stream())
    # Prefill 12 steps, then one step at a time, the state updated in place (c_last aliases c0).
    c = c0.clone()
    h_parts = [U.new_empty((12, B, D * d))]
    ext.sru_scan(U[:12].contiguous(), x[:12].contiguous(), w, b, c, None, h_parts[0], c, *attrs, _stream())
    for t in range(12, L):
        h_t = U.new_empty((1, B, D * d))
        ext.sru_scan(U[t:t + 1].contiguous(), x[t:t + 1].contiguous(), w, b, c, None, h_t, c, *attrs, _stream())
        h_parts.append(h_t)
    torch.cuda.synchronize()
    torch.testing.assert_close(torch.cat(h_parts), h_all, atol=0, rtol=0)
    torch.testing.assert_close(c, c_all, atol=0, rtol=0)


# ---------------------------------------------------------------------------------------------
# Causal linear attention


def _la_inputs(B, H, L, E, M, dtype, seed, state=True):
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=0.5, dt=dtype):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt).cuda()

    q, k, v = rnd(B, H, L, E), rnd(B, H, L, E), rnd(B, H, L, M, scale=1.0)
    S0 = rnd(B, H, E, M, dt=torch.float32) if state else None
    z0 = (torch.rand(B, H, E, generator=g, dtype=torch.float64) * 4).float().cuda() if state else None
    return q, k, v, S0, z0


def _la_reference(q, k, v, S0, z0, eps=1e-6):
    return causal_linear_attention_quadratic(
        q.double(), k.double(), v.double(), None if S0 is None else S0.double(),
        None if z0 is None else z0.double(), eps,
    )


def _assert_la_close(got, ref, dtype):
    out, S, z = got
    out_ref, S_ref, z_ref = ref
    atol, rtol = ATOL[dtype], RTOL[dtype]
    torch.testing.assert_close(out.double(), out_ref, atol=atol, rtol=rtol)
    S_scale = S_ref.abs().amax().item() + 1.0
    z_scale = z_ref.abs().amax().item() + 1.0
    torch.testing.assert_close(S.double(), S_ref, atol=rtol * S_scale, rtol=rtol)
    torch.testing.assert_close(z.double(), z_ref, atol=rtol * z_scale, rtol=rtol)


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("E", DIMS)
@pytest.mark.parametrize("M", DIMS)
def test_linear_attention_prefill_matches_reference(dtype, E, M):
    _ext()
    for seed, (B, H, L, state) in enumerate([(1, 1, 2, False), (2, 3, 64, True), (2, 2, 157, True)]):
        q, k, v, S0, z0 = _la_inputs(B, H, L, E, M, dtype, seed, state)
        got = causal_linear_attention_op(q, k, v, S0, z0, 1e-6)
        assert got[0].dtype == dtype and got[1].dtype == torch.float32
        _assert_la_close(got, _la_reference(q, k, v, S0, z0), dtype)


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("E,M", [(64, 64), (32, 128), (48, 80)])
def test_linear_attention_decode_and_generic_dims(dtype, E, M):
    _ext()
    for L in (1, 9):  # L = 1: decode kernel; 48 / 80: one step per token for every L
        q, k, v, S0, z0 = _la_inputs(3, 2, L, E, M, dtype, L)
        _assert_la_close(causal_linear_attention_op(q, k, v, S0, z0, 1e-6), _la_reference(q, k, v, S0, z0), dtype)


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("E,M", [(32, 32), (64, 64), (128, 128)])
def test_linear_attention_prefill_then_step_in_place(dtype, E, M):
    """Prefill n tokens then single steps, the state updated in place (S_last / z_last alias S0 / z0),
    equals one pass over all tokens; (128, 128) splits M into several tiles (z0 via the workspace)."""
    ext = _ext()
    B, H, L, n = 2, 3, 100, 70
    q, k, v, S0, z0 = _la_inputs(B, H, L, E, M, dtype, 11)
    out_all, S_all, z_all = causal_linear_attention_op(q, k, v, S0, z0, 1e-6)
    S, z = S0.clone(), z0.clone()
    outs = [q.new_empty((B, H, n, M))]
    ext.causal_linear_attention(q[:, :, :n].contiguous(), k[:, :, :n].contiguous(), v[:, :, :n].contiguous(),
                                S, z, outs[0], S, z, 1e-6, _stream())
    for t in range(n, L):
        o = q.new_empty((B, H, 1, M))
        sl = slice(t, t + 1)
        ext.causal_linear_attention(q[:, :, sl].contiguous(), k[:, :, sl].contiguous(), v[:, :, sl].contiguous(),
                                    S, z, o, S, z, 1e-6, _stream())
        outs.append(o)
    torch.cuda.synchronize()
    _assert_la_close((torch.cat(outs, dim=2), S, z), (out_all.double(), S_all.double(), z_all.double()), dtype)
    _assert_la_close((torch.cat(outs, dim=2), S, z), _la_reference(q, k, v, S0, z0), dtype)


@gpu
@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_attention_in_place_prefill_equals_out_of_place(dtype):
    ext = _ext()
    B, H, L, E, M = 2, 4, 130, 128, 128
    q, k, v, S0, z0 = _la_inputs(B, H, L, E, M, dtype, 5)
    out_ref = q.new_empty((B, H, L, M))
    S_ref, z_ref = torch.empty_like(S0), torch.empty_like(z0)
    ext.causal_linear_attention(q, k, v, S0, z0, out_ref, S_ref, z_ref, 1e-6, _stream())
    S, z = S0.clone(), z0.clone()
    out = q.new_empty((B, H, L, M))
    ext.causal_linear_attention(q, k, v, S, z, out, S, z, 1e-6, _stream())
    torch.cuda.synchronize()
    torch.testing.assert_close(out, out_ref, atol=0, rtol=0)
    torch.testing.assert_close(S, S_ref, atol=0, rtol=0)
    torch.testing.assert_close(z, z_ref, atol=0, rtol=0)


@gpu
@needs_cuda
def test_cuda_ops_keep_autograd_and_fp64():
    """Backward on CUDA runs the ops' torch code; fp64 inputs run the torch forward."""
    _ext()
    q, k, v, S0, z0 = _la_inputs(1, 2, 33, 32, 32, torch.float32, 3)
    q.requires_grad_(True)
    out, S, z = causal_linear_attention_op(q, k, v, S0, z0, 1e-6)
    (out.sum() + S.sum()).backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    q64, k64, v64 = q.detach().double(), k.double(), v.double()
    got = causal_linear_attention_op(q64, k64, v64, S0.double(), z0.double(), 1e-6)
    ref = _la_reference(q64, k64, v64, S0, z0)
    torch.testing.assert_close(got[0], ref[0], atol=1e-10, rtol=1e-10)
