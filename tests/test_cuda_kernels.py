"""The CUDA kernels of plugins/kernels (through the PyTorch binding in models/ops/cuda) on a GPU, against
the naive references. Cases, inputs, references and tolerances are kernel_cases.py's, shared with
test_cuda_kernels_emulated.py, which runs the same kernel sources on the CUDA host emulation in CI.

GPU tests (marked ``gpu``) skip without a CUDA device.
"""

from __future__ import annotations

import pytest
import torch
from kernel_cases import (
    DIMS,
    DTYPES,
    LA_PREFILL_SHAPES,
    SRU_ATOL,
    SRU_CONFIGS,
    SRU_SHAPES,
    assert_la_close,
    la_inputs,
    la_mask,
    la_reference,
    sru_config_id,
    sru_inputs,
    sru_reference,
)

from rnnx.models.ops import cuda as cuda_ops
from rnnx.models.ops.causal_linear_attention import causal_linear_attention_op
from rnnx.models.ops.sru_scan import sru_scan

#: every test here runs the kernels on a GPU
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _ext():
    ext = cuda_ops.load()
    assert ext is not None, f"CUDA binding did not build: {cuda_ops.EXTENSION.error}"
    return ext


def _stream() -> int:
    return torch.cuda.current_stream().cuda_stream


# ---------------------------------------------------------------------------------------------
# SRU scan


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("config", SRU_CONFIGS, ids=sru_config_id)
def test_sru_scan_matches_naive(dtype, config):
    _ext()
    D, k, skip, use_tanh, mask = config
    for seed, (L, B, d) in enumerate(SRU_SHAPES):
        U, x, w, b, c0, m = sru_inputs(L, B, d, D, k, dtype, mask, seed, "cuda")
        attrs = dict(
            hidden_size=d, num_directions=D, num_matrices=k, has_skip_term=skip, use_tanh=use_tanh, scale_x=0.7
        )
        h, c = sru_scan(U, x, w, b, c0, m, **attrs)
        h_ref, c_ref = sru_reference(U, x, w, b, c0, m, **attrs)
        assert h.dtype == dtype and c.dtype == torch.float32
        torch.testing.assert_close(h.double().cpu(), h_ref, atol=SRU_ATOL[dtype], rtol=SRU_ATOL[dtype])
        torch.testing.assert_close(c.double().cpu(), c_ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sru_scan_prefill_then_step_and_in_place(dtype):
    ext = _ext()
    L, B, d, D, k = 20, 3, 40, 1, 3
    U, x, w, b, c0, _ = sru_inputs(L, B, d, D, k, dtype, False, 7, "cuda")
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
        ext.sru_scan(U[t : t + 1].contiguous(), x[t : t + 1].contiguous(), w, b, c, None, h_t, c, *attrs, _stream())
        h_parts.append(h_t)
    torch.cuda.synchronize()
    torch.testing.assert_close(torch.cat(h_parts), h_all, atol=0, rtol=0)
    torch.testing.assert_close(c, c_all, atol=0, rtol=0)


# ---------------------------------------------------------------------------------------------
# Causal linear attention: the op's layout, heads packed, q (B, L, H*E) or time-major (L, B, H*E)


def _op(q, k, v, S0, z0, mask_pad, H, time_major=False):
    """rnnx::causal_linear_attention on CUDA tensors: the registered CUDA kernel."""
    return causal_linear_attention_op(q, k, v, S0, z0, mask_pad, 1e-6, H, int(time_major))


def _time_slice(x, t0, t1, time_major):
    """Steps [t0, t1) of a (B, L, ...) tensor, or of an (L, B, ...) one when ``time_major``; contiguous."""
    return (x[t0:t1] if time_major else x[:, t0:t1]).contiguous()


def _mask_u8(mask_pad):
    return None if mask_pad is None else mask_pad.to(torch.uint8).contiguous()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("E", DIMS)
@pytest.mark.parametrize("M", DIMS)
def test_linear_attention_prefill_matches_reference(dtype, E, M):
    _ext()
    for seed, (B, H, L, state, time_major, mask) in enumerate(LA_PREFILL_SHAPES):
        q, k, v, S0, z0, m = la_inputs(B, H, L, E, M, dtype, seed, "cuda", state, time_major=time_major, mask=mask)
        got = _op(q, k, v, S0, z0, m, H, time_major)
        assert got[0].dtype == dtype and got[1].dtype == torch.float32 and got[0].shape == v.shape
        assert_la_close(got, la_reference(q, k, v, S0, z0, m, H, time_major), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_first", "time_major"])
@pytest.mark.parametrize("E,M,H", [(64, 32, 3), (32, 128, 2), (128, 64, 2), (48, 80, 2), (8, 24, 4)])
def test_linear_attention_mask_and_layouts(dtype, time_major, E, M, H):
    """Pads at both ends, in the middle, rows of nothing but pads and rows without any, both layouts, several heads
    with E != M: the chunked MMA kernel (L = 150, three chunks), the chunked kernel (48 / 80, 8 / 24) and an L = 1
    step (the recurrent kernel). A pad step carries the state and still has its output."""
    _ext()
    B = 4
    for seed, L in enumerate((150, 9, 1)):
        for state in (True, False):
            q, k, v, S0, z0, m = la_inputs(B, H, L, E, M, dtype, seed, "cuda", state, time_major=time_major, mask=True)
            got = _op(q, k, v, S0, z0, m, H, time_major)
            assert_la_close(got, la_reference(q, k, v, S0, z0, m, H, time_major), dtype)
            _, S, z = got  # row b = 3 is nothing but pads: its state is carried exactly
            assert torch.equal(S[3], S0[3] if state else torch.zeros_like(S[3]))
            assert torch.equal(z[3], z0[3] if state else torch.zeros_like(z[3]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_attention_pads_equal_the_sequence_without_them(dtype):
    """The answer at the real steps of a padded row equals the answer for the row with its pads removed."""
    _ext()
    H, E, M, L = 2, 64, 32, 140
    q, k, v, S0, z0, _ = la_inputs(1, H, L, E, M, dtype, 17, "cuda")
    m = la_mask(1, L, 17, device="cuda")
    out, S, z = _op(q, k, v, S0, z0, m, H)
    keep = ~m[0]
    out_c, S_c, z_c = _op(q[:, keep], k[:, keep], v[:, keep], S0, z0, None, H)
    assert_la_close((out[:, keep], S, z), (out_c.double(), S_c.double(), z_c.double()), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("E,M", [(64, 64), (32, 128), (48, 80)])
def test_linear_attention_decode_and_generic_dims(dtype, E, M):
    _ext()
    H = 2
    for L in (1, 9):  # L = 1: the recurrent kernel; L = 9: the chunked MMA kernel, or for 48 / 80 the chunked one
        for mask in (False, True):
            q, k, v, S0, z0, m = la_inputs(3, H, L, E, M, dtype, L, "cuda", mask=mask)
            assert_la_close(_op(q, k, v, S0, z0, m, H), la_reference(q, k, v, S0, z0, m, H), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("E,M", [(32, 32), (64, 64), (128, 128)])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_first", "time_major"])
def test_linear_attention_prefill_then_step_in_place(dtype, E, M, time_major):
    """Prefill n tokens then single steps, the state updated in place (S_last / z_last alias S0 / z0), with pads,
    equals one pass over all tokens; (128, 128) splits M into several tiles (z0 via the workspace)."""
    ext = _ext()
    B, H, L, n = 2, 3, 100, 70
    q, k, v, S0, z0, m = la_inputs(B, H, L, E, M, dtype, 11, "cuda", time_major=time_major, mask=True)
    out_all, S_all, z_all = _op(q, k, v, S0, z0, m, H, time_major)
    S, z = S0.clone(), z0.clone()
    m8 = _mask_u8(m)
    outs = []
    for t0, t1 in [(0, n)] + [(t, t + 1) for t in range(n, L)]:
        qs, ks, vs, ms = (_time_slice(x, t0, t1, time_major) for x in (q, k, v, m8))
        o = torch.empty_like(vs)
        ext.causal_linear_attention(qs, ks, vs, S, z, ms, o, S, z, 1e-6, H, time_major, _stream())
        outs.append(o)
    torch.cuda.synchronize()
    got = (torch.cat(outs, dim=0 if time_major else 1), S, z)
    assert_la_close(got, (out_all.double(), S_all.double(), z_all.double()), dtype)
    assert_la_close(got, la_reference(q, k, v, S0, z0, m, H, time_major), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_attention_in_place_prefill_equals_out_of_place(dtype):
    ext = _ext()
    B, H, L, E, M = 2, 4, 130, 128, 128
    q, k, v, S0, z0, m = la_inputs(B, H, L, E, M, dtype, 5, "cuda", mask=True)
    m8 = _mask_u8(m)
    out_ref = torch.empty_like(v)
    S_ref, z_ref = torch.empty_like(S0), torch.empty_like(z0)
    ext.causal_linear_attention(q, k, v, S0, z0, m8, out_ref, S_ref, z_ref, 1e-6, H, False, _stream())
    S, z = S0.clone(), z0.clone()
    out = torch.empty_like(v)
    ext.causal_linear_attention(q, k, v, S, z, m8, out, S, z, 1e-6, H, False, _stream())
    torch.cuda.synchronize()
    torch.testing.assert_close(out, out_ref, atol=0, rtol=0)
    torch.testing.assert_close(S, S_ref, atol=0, rtol=0)
    torch.testing.assert_close(z, z_ref, atol=0, rtol=0)


def test_cuda_ops_keep_autograd_and_fp64():
    """Backward on CUDA runs the ops' torch code; fp64 inputs run the torch forward."""
    _ext()
    H = 2
    q, k, v, S0, z0, m = la_inputs(1, H, 33, 32, 32, torch.float32, 3, "cuda", mask=True)
    q.requires_grad_(True)
    out, S, z = _op(q, k, v, S0, z0, m, H)
    (out.sum() + S.sum()).backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()
    q64, k64, v64 = q.detach().double(), k.double(), v.double()
    got = _op(q64, k64, v64, S0.double(), z0.double(), m, H)
    ref = la_reference(q64, k64, v64, S0, z0, m, H)
    torch.testing.assert_close(got[0], ref[0], atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_linear_attention_scores_beyond_half_range(dtype):
    """phi(q) . phi(k) near 8.7e4 (over fp16's 65504) inside a chunk: the scores stay fp32 and the
    tensor cores get A / den in [0, 1]."""
    _ext()
    H = 2
    q, k, v, S0, z0, m = la_inputs(1, H, 100, 128, 64, dtype, 21, "cuda", state=False, qk_shift=25.0)
    assert_la_close(_op(q, k, v, S0, z0, m, H), la_reference(q, k, v, S0, z0, m, H), dtype)
