"""The CUDA kernels of plugins/kernels on the CUDA host emulation (plugins/kernels/emulation), in CI without
a GPU: the unchanged kernel sources compiled as C++ and run on the CPU with one cooperative fiber per CUDA
thread (barriers, warp shuffles and WMMA emulated and checked). The same cases, references and tolerances
as the GPU tests (kernel_cases.py), plus what only the emulation can show: results independent of the
thread/block schedule (no data race that the barriers miss), and which code path ran (launch and
tensor-core counters).

What this cannot show: real-hardware numerics (expf, tensor-core rounding), timing, the hardware memory
model. Those need the gpu-marked tests in test_cuda_kernels.py. The C++ side (the plugins' enqueue on the
emulation under AddressSanitizer, and the emulation's own self-tests) runs through ctest in test_plugins.py.
"""

from __future__ import annotations

import shutil
import subprocess

import kernel_cases as cases
import pytest
import torch
from cuda_emulation import LIBRARY, REQUIRES_EMULATION, EmulatedKernels, EmulatedLaunchError, load_emulated_kernels

pytestmark = REQUIRES_EMULATION


EPS = 1e-6
#: Threads per block of the linear recurrence's chunked MMA kernel (plugins/linear_recurrence/cuda/
#: linear_recurrence_mma.cu) and of its recurrent and chunked kernels (linear_recurrence.cu), which causal linear
#: attention runs on: the launch counters' threads / blocks say which of them ran.
MMA_BLOCK_THREADS, RECURRENCE_BLOCK_THREADS = 256, 128


@pytest.fixture(scope="module")
def emu() -> EmulatedKernels:
    return load_emulated_kernels()


def _sru_attrs(d, D, k, skip, use_tanh, scale_x=0.7):
    return dict(hidden_size=d, num_directions=D, num_matrices=k, has_skip_term=skip, use_tanh=use_tanh, scale_x=scale_x)


def _run_sru(emu, U, x, w, b, c0, m, attrs, c_last=None):
    L, B = U.shape[0], U.shape[1]
    width = attrs["num_directions"] * attrs["hidden_size"]
    h = torch.full((L, B, width), float("nan"), dtype=U.dtype)  # every element must be written
    c_last = torch.full((B, width), float("nan")) if c_last is None else c_last
    emu.sru_scan(U, x, w, b, c0, m, h, c_last, **attrs)
    return h, c_last


def _run_la(emu, q, k, v, S0, z0, mask_pad, H, time_major=False, out=None, S=None, z=None):
    """The kernel on the op's layout (heads packed, q (B, L, H*E) or (L, B, H*E)); every output starts NaN, so each
    element must be written. Returns (out like v, S_last (B, H, E, M), z_last (B, H, E))."""
    B = q.shape[1] if time_major else q.shape[0]
    E, M = q.shape[-1] // H, v.shape[-1] // H
    out = torch.full(v.shape, float("nan"), dtype=q.dtype) if out is None else out
    S = torch.full((B, H, E, M), float("nan")) if S is None else S
    z = torch.full((B, H, E), float("nan")) if z is None else z
    emu.causal_linear_attention(q, k, v, S0, z0, mask_pad, out, S, z, EPS, H, time_major)
    return out, S, z


def _block_threads(stats) -> int:
    """Threads per block of the launches counted in ``stats`` (all of one kernel)."""
    return stats.threads // stats.blocks


def _time_slice(x, t0, t1, time_major):
    """Steps [t0, t1) of a (B, L, ...) tensor, or of an (L, B, ...) one when ``time_major``; contiguous."""
    return (x[t0:t1] if time_major else x[:, t0:t1]).contiguous()


# ---------------------------------------------------------------------------------------------
# SRU scan


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
@pytest.mark.parametrize("config", cases.SRU_CONFIGS, ids=cases.sru_config_id)
def test_sru_scan_matches_naive(emu, dtype, config):
    D, k, skip, use_tanh, mask = config
    for seed, (L, B, d) in enumerate(cases.SRU_SHAPES):
        U, x, w, b, c0, m = cases.sru_inputs(L, B, d, D, k, dtype, mask, seed, "cpu")
        attrs = _sru_attrs(d, D, k, skip, use_tanh)
        h, c = _run_sru(emu, U, x, w, b, c0, m, attrs)
        h_ref, c_ref = cases.sru_reference(U, x, w, b, c0, m, **attrs)
        torch.testing.assert_close(h.double(), h_ref, atol=cases.SRU_ATOL[dtype], rtol=cases.SRU_ATOL[dtype])
        torch.testing.assert_close(c.double(), c_ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
def test_sru_scan_prefill_then_step_in_place_and_zero_state(emu, dtype):
    L, B, d, D, k = 20, 3, 40, 1, 3
    U, x, w, b, c0, _ = cases.sru_inputs(L, B, d, D, k, dtype, False, 7, "cpu")
    attrs = _sru_attrs(d, D, k, True, False, 1.0)
    h_all, c_all = _run_sru(emu, U, x, w, b, c0, None, attrs)
    c = c0.clone()
    parts = [_run_sru(emu, U[:12].contiguous(), x[:12].contiguous(), w, b, c, None, attrs, c_last=c)[0]]
    for t in range(12, L):
        parts.append(
            _run_sru(emu, U[t : t + 1].contiguous(), x[t : t + 1].contiguous(), w, b, c, None, attrs, c_last=c)[0]
        )
    assert torch.equal(torch.cat(parts), h_all) and torch.equal(c, c_all)
    # c0 absent = zeros
    h0, c0_last = _run_sru(emu, U, x, w, b, None, None, attrs)
    h_ref, c_ref = cases.sru_reference(U, x, w, b, torch.zeros_like(c0), None, **attrs)
    torch.testing.assert_close(h0.double(), h_ref, atol=cases.SRU_ATOL[dtype], rtol=cases.SRU_ATOL[dtype])
    torch.testing.assert_close(c0_last.double(), c_ref, atol=1e-4, rtol=1e-4)


def test_sru_scan_rejects_bad_attributes(emu):
    U, x, w, b, c0, _ = cases.sru_inputs(4, 2, 8, 1, 3, torch.float32, False, 1, "cpu")
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # cudaErrorInvalidValue
        _run_sru(emu, U, x, w, b, c0, None, _sru_attrs(8, 3, 3, True, False))
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # k = 3 with skip needs x
        _run_sru(emu, U, None, w, b, c0, None, _sru_attrs(8, 1, 3, True, False))


# ---------------------------------------------------------------------------------------------
# Causal linear attention


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
@pytest.mark.parametrize("E", cases.DIMS)
@pytest.mark.parametrize("M", cases.DIMS)
def test_linear_attention_prefill_matches_reference(emu, dtype, E, M):
    for seed, (B, H, L, state, time_major, mask) in enumerate(cases.LA_PREFILL_SHAPES):
        q, k, v, S0, z0, m = cases.la_inputs(B, H, L, E, M, dtype, seed, "cpu", state, time_major=time_major, mask=mask)
        emu.reset_stats()
        got = _run_la(emu, q, k, v, S0, z0, m, H, time_major)
        stats = emu.stats()
        cases.assert_la_close(got, cases.la_reference(q, k, v, S0, z0, m, H, time_major), dtype)
        # One launch of the chunked MMA kernel; tensor cores exactly where the dtype allows them.
        assert stats.launches == 1 and _block_threads(stats) == MMA_BLOCK_THREADS, stats
        assert (stats.mma > 0) == (dtype != torch.float32), stats


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_first", "time_major"])
@pytest.mark.parametrize("E,M,H", [(64, 32, 3), (32, 128, 2), (48, 80, 2), (8, 24, 4)])
def test_linear_attention_mask_and_layouts(emu, dtype, time_major, E, M, H):
    """Pads at both ends, in the middle, rows of nothing but pads and rows without any, both layouts, several heads
    with E != M: the chunked MMA kernel (chunk-crossing L = 150), the chunked kernel (48 / 80, 8 / 24) and an L = 1
    step (the recurrent kernel). A pad step carries the state and still writes its output."""
    B = 4
    for seed, L in enumerate((150, 9, 1)):
        for state in (True, False):
            q, k, v, S0, z0, m = cases.la_inputs(
                B, H, L, E, M, dtype, seed, "cpu", state, time_major=time_major, mask=True
            )
            assert m.any() and not m.all()
            got = _run_la(emu, q, k, v, S0, z0, m, H, time_major)
            cases.assert_la_close(got, cases.la_reference(q, k, v, S0, z0, m, H, time_major), dtype)
            # A row of nothing but pads (b = 3) keeps its state exactly.
            _, S, z = got
            assert torch.equal(S[3], S0[3] if state else torch.zeros_like(S[3]))
            assert torch.equal(z[3], z0[3] if state else torch.zeros_like(z[3]))


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
def test_linear_attention_pads_equal_the_sequence_without_them(emu, dtype):
    """The kernels' answer at the real steps of a padded row equals their answer for the same row with its pads
    removed, and both rows end in the same state: pads in the middle and at the ends change nothing else."""
    H, E, M, L = 2, 64, 32, 140
    q, k, v, S0, z0, _ = cases.la_inputs(1, H, L, E, M, dtype, 17, "cpu")
    m = cases.la_mask(1, L, 17)  # row 0: pads at both ends and in the middle
    out, S, z = _run_la(emu, q, k, v, S0, z0, m, H)
    keep = ~m[0]
    compact = [x[:, keep].contiguous() for x in (q, k, v)]
    out_c, S_c, z_c = _run_la(emu, *compact, S0, z0, None, H)
    cases.assert_la_close((out[:, keep], S, z), (out_c.double(), S_c.double(), z_c.double()), dtype)


def test_prefill_sets_its_shared_memory_limit_once_and_again_after_a_new_context(emu):
    """The chunked MMA kernel's dynamic shared memory attribute is set on its first launch only (it is per device
    and function), and set again when a launch finds it forgotten (a new CUDA context); the outputs stay
    right either way."""
    H = 2
    q, k, v, S0, z0, m = cases.la_inputs(1, H, 40, 64, 64, torch.float16, 3, "cpu", True)
    want = cases.la_reference(q, k, v, S0, z0, m, H)
    _run_la(emu, q, k, v, S0, z0, m, H)  # whatever earlier tests did: this kernel's attribute is set now
    emu.reset_stats()
    for _ in range(3):
        cases.assert_la_close(_run_la(emu, q, k, v, S0, z0, m, H), want, torch.float16)
    assert emu.stats().attribute_calls == 0 and emu.stats().launches == 3
    emu.forget_function_attributes()
    emu.reset_stats()
    cases.assert_la_close(_run_la(emu, q, k, v, S0, z0, m, H), want, torch.float16)
    assert emu.stats().attribute_calls == 1


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
@pytest.mark.parametrize("E,M", [(64, 64), (32, 128), (48, 80)])
def test_linear_attention_decode_and_generic_dims(emu, dtype, E, M):
    H = 2
    for L in (1, 9):  # L = 1: the recurrent kernel; L = 9: the chunked MMA kernel, or for 48 / 80 the chunked one
        q, k, v, S0, z0, m = cases.la_inputs(3, H, L, E, M, dtype, L, "cpu")
        emu.reset_stats()
        got = _run_la(emu, q, k, v, S0, z0, m, H)
        stats = emu.stats()
        cases.assert_la_close(got, cases.la_reference(q, k, v, S0, z0, m, H), dtype)
        mma_kernel = L > 1 and E in cases.DIMS and M in cases.DIMS
        assert stats.launches == 1, stats
        assert _block_threads(stats) == (MMA_BLOCK_THREADS if mma_kernel else RECURRENCE_BLOCK_THREADS), stats
        assert (stats.mma > 0) == (mma_kernel and dtype != torch.float32), stats


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
@pytest.mark.parametrize("E,M", [(32, 32), (64, 64), (128, 128)])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_first", "time_major"])
def test_linear_attention_prefill_then_step_in_place(emu, dtype, E, M, time_major):
    """Prefill n tokens then single steps with S_last / z_last aliasing S0 / z0, equal to one pass over all
    tokens, with pads in both; (128, 128) splits M into several column tiles, so z0 goes through the workspace."""
    B, H, L, n = 2, 3, 100, 70
    q, k, v, S0, z0, m = cases.la_inputs(B, H, L, E, M, dtype, 11, "cpu", time_major=time_major, mask=True)
    out_all, S_all, z_all = _run_la(emu, q, k, v, S0, z0, m, H, time_major)
    S, z = S0.clone(), z0.clone()

    def part(t0, t1):
        return [_time_slice(x, t0, t1, time_major) for x in (q, k, v)] + [S, z, _time_slice(m, t0, t1, time_major)]

    outs = [_run_la(emu, *part(0, n), H, time_major, S=S, z=z)[0]]
    for t in range(n, L):
        outs.append(_run_la(emu, *part(t, t + 1), H, time_major, S=S, z=z)[0])
    got = (torch.cat(outs, dim=0 if time_major else 1), S, z)
    cases.assert_la_close(got, (out_all.double(), S_all.double(), z_all.double()), dtype)
    cases.assert_la_close(got, cases.la_reference(q, k, v, S0, z0, m, H, time_major), dtype)


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
def test_linear_attention_in_place_prefill_equals_out_of_place(emu, dtype):
    H = 2
    q, k, v, S0, z0, m = cases.la_inputs(2, H, 130, 128, 128, dtype, 5, "cpu", mask=True)
    ref = _run_la(emu, q, k, v, S0, z0, m, H)
    S, z = S0.clone(), z0.clone()
    got = _run_la(emu, q, k, v, S, z, m, H, S=S, z=z)
    for a, b in zip(got, ref):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_linear_attention_scores_beyond_half_range(emu, dtype):
    """phi(q) . phi(k) near 8.7e4 (over fp16's 65504) inside a chunk: the scores stay fp32 and the
    tensor cores get A / den in [0, 1]."""
    H = 2
    q, k, v, S0, z0, m = cases.la_inputs(1, H, 100, 128, 64, dtype, 21, "cpu", state=False, qk_shift=25.0)
    cases.assert_la_close(_run_la(emu, q, k, v, S0, z0, m, H), cases.la_reference(q, k, v, S0, z0, m, H), dtype)


def test_linear_attention_empty_and_invalid(emu):
    # L = 0 copies the state through (or zeros it); zero batch launches nothing.
    H = 2
    q, k, v, S0, z0, m = cases.la_inputs(2, H, 0, 32, 32, torch.float32, 3, "cpu", mask=True)
    _, S, z = _run_la(emu, q, k, v, S0, z0, m, H)
    assert torch.equal(S, S0) and torch.equal(z, z0)
    _, S, z = _run_la(emu, q, k, v, None, None, m, H)
    assert not S.any() and not z.any()
    emu.reset_stats()
    q, k, v, S0, z0, m = cases.la_inputs(0, H, 5, 32, 32, torch.float32, 3, "cpu", mask=True)
    _run_la(emu, q, k, v, S0, z0, m, H)
    assert emu.stats().launches == 0
    q, k, v, S0, z0, _ = cases.la_inputs(1, 1, 4, 32, 32, torch.float32, 3, "cpu")
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # M = 0
        empty = q.new_empty(1, 4, 0)
        emu.causal_linear_attention(q, k, v[..., :0], S0, z0, None, empty, S0.clone(), z0.clone(), EPS, 1)


# ---------------------------------------------------------------------------------------------
# Schedules: a result that depends on the order threads or blocks run between barriers is a race.

SCHEDULES = [("reversed", 0), ("random", 1), ("random", 2)]


@pytest.mark.parametrize("dtype", cases.DTYPES, ids=str)
def test_results_do_not_depend_on_the_schedule(emu, dtype):
    # (B, H, L, E, M, time_major, mask)
    la_cases = [
        (2, 2, 97, 64, 64, False, True),
        (1, 2, 70, 128, 128, True, False),
        (1, 1, 40, 32, 128, False, False),
        (2, 3, 1, 64, 64, True, True),
        (1, 2, 5, 48, 80, False, True),
    ]
    la_runs = [
        (cases.la_inputs(B, H, L, E, M, dtype, i, "cpu", time_major=tm, mask=mask), H, tm)
        for i, (B, H, L, E, M, tm, mask) in enumerate(la_cases)
    ]
    U, x, w, b, c0, m = cases.sru_inputs(13, 3, 37, 2, 4, dtype, True, 4, "cpu")
    sru_attrs = _sru_attrs(37, 2, 4, True, True)

    def run_all():
        la = [_run_la(emu, *inputs, H, tm) for inputs, H, tm in la_runs]
        return la + [_run_sru(emu, U, x, w, b, c0, m, sru_attrs)]

    try:
        emu.set_schedule("in_order")
        baseline = run_all()
        for schedule, seed in SCHEDULES:
            emu.set_schedule(schedule, seed)
            for case, (got, ref) in enumerate(zip(run_all(), baseline)):
                for a, b_ in zip(got, ref):
                    assert torch.equal(a, b_), f"case {case} differs under schedule {schedule}/{seed}"
    finally:
        emu.set_schedule("in_order")


def test_emulation_library_exports_only_its_c_api(emu):
    """The emulated CUDA runtime (cudaMalloc, cudaGetLastError, ...) stays inside the library, so loading
    it never interposes on a real libcudart in the same process (e.g. torch with CUDA)."""
    if shutil.which("nm") is None:
        pytest.skip("binutils (nm) not found")
    defined = subprocess.run(["nm", "-D", "--defined-only", str(LIBRARY)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in defined.stdout.splitlines() if line.split()[-2:-1] in (["T"], ["W"])}
    assert exported and all(name.startswith("rnnx_emu_") for name in exported), sorted(exported)
