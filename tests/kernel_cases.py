"""Cases, inputs, references and tolerances shared by the kernel tests on a GPU (test_cuda_kernels.py) and
on the CUDA host emulation (test_cuda_kernels_emulated.py): one definition, two devices.

References are the naive twins of the ops (models/ops/*/naive.py) in fp64, computed from the same
(already rounded) inputs. Tolerances: fp32 1e-4; fp16 / bf16 compute in fp32 but round phi(q), phi(k)
and the in-chunk scores A to the activation type for the tensor-core matmuls, so outputs get a few
roundings of that type (fp16 1e-2, bf16 6e-2 absolute on O(1) values, relative on the state).
"""

from __future__ import annotations

from typing import Optional

import torch

from rnnx.models.ops.causal_linear_attention.naive import causal_linear_attention_packed
from rnnx.models.ops.sru_scan import sru_scan_naive

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DIMS = [32, 64, 128]
ATOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 6e-2}
RTOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
SRU_ATOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}

SRU_CONFIGS = [
    # (D, k, has_skip_term, use_tanh, mask)
    (1, 3, True, False, False),
    (1, 3, True, True, True),
    (1, 4, True, False, True),
    (2, 3, True, False, True),
    (2, 4, False, True, True),
    (2, 3, False, False, False),
]
SRU_SHAPES = [(1, 1, 5), (13, 3, 37), (70, 4, 130)]  # (L, B, d)
#: (B, H, L, with state, time_major, with mask): one chunk, exactly one, and three chunks with a partial one
LA_PREFILL_SHAPES = [(1, 1, 2, False, False, False), (2, 3, 64, True, True, True), (3, 2, 157, True, False, True)]


def sru_config_id(config: tuple) -> str:
    D, k, skip, tanh, mask = config
    return f"D{D}-k{k}-skip{skip}-tanh{tanh}-mask{mask}"


def sru_inputs(L: int, B: int, d: int, D: int, k: int, dtype: torch.dtype, mask: bool, seed: int, device: str):
    """(U, x, weight_c, bias, c0, mask_pad) on ``device``; row b of the mask is right-padded by b steps."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)

    U = rnd(L, B, D * d * k)
    x = rnd(L, B, D * d)
    weight_c = rnd(2 * D * d, scale=0.5)
    bias = rnd(2 * D * d, scale=0.5)
    c0 = torch.randn(B, D * d, generator=g, dtype=torch.float64).float().to(device)
    mask_pad = None
    if mask:
        mask_pad = torch.zeros(L, B, dtype=torch.bool)
        for b in range(1, B):
            mask_pad[L - min(L, b) :, b] = True
        mask_pad = mask_pad.to(device)
    return U, x, weight_c, bias, c0, mask_pad


def sru_reference(U, x, weight_c, bias, c0, mask_pad, **attrs):
    """(h, c_last) in fp64 on the CPU."""
    return sru_scan_naive(
        U.double().cpu(),
        x.double().cpu(),
        weight_c.double().cpu(),
        bias.double().cpu(),
        c0.double().cpu(),
        None if mask_pad is None else mask_pad.cpu(),
        **attrs,
    )


def la_mask(B: int, L: int, seed: int, time_major: bool = False, device: str = "cpu") -> torch.Tensor:
    """mask_pad (B, L) bool, non-zero = pad ((L, B) when ``time_major``). Rows take turns: b % 4 == 0 pads
    at both ends and in the middle (a pad at every L = 1 step), 1 random pads (about one in three), 2 none,
    3 nothing but pads."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(B, L, dtype=torch.bool)
    for b in range(B):
        kind = b % 4
        if kind == 0:
            mask[b, : min(L, 3)] = True
            mask[b, max(0, L - 2) :] = True
            mask[b, L // 2 : L // 2 + 4] = True
        elif kind == 1:
            mask[b] = torch.rand(L, generator=g) < 0.33
        elif kind == 3:
            mask[b] = True
    return (mask.t().contiguous() if time_major else mask).to(device)


def la_inputs(
    B: int,
    H: int,
    L: int,
    E: int,
    M: int,
    dtype: torch.dtype,
    seed: int,
    device: str,
    state: bool = True,
    qk_scale: float = 0.5,
    qk_shift: float = 0.0,
    time_major: bool = False,
    mask: bool = False,
):
    """(q, k, v, S0, z0, mask_pad) on ``device`` in the op's layout: heads packed, q, k (B, L, H*E), v (B, L, H*M),
    mask_pad (B, L) bool or None -- (L, B, ...) when ``time_major``; q, k ~ shift + scale * N(0, 1),
    v ~ N(0, 1); S0 (B, H, E, M), z0 (B, H, E) fp32 or None. mask_pad: :func:`la_mask`."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=0.5, shift=0.0, dt=dtype):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift).to(dt).to(device)

    lead = (L, B) if time_major else (B, L)
    q = rnd(*lead, H * E, scale=qk_scale, shift=qk_shift)
    k = rnd(*lead, H * E, scale=qk_scale, shift=qk_shift)
    v = rnd(*lead, H * M, scale=1.0)
    S0 = rnd(B, H, E, M, dt=torch.float32) if state else None
    z0 = (torch.rand(B, H, E, generator=g, dtype=torch.float64) * 4).float().to(device) if state else None
    mask_pad = la_mask(B, L, seed, time_major, device) if mask else None
    return q, k, v, S0, z0, mask_pad


def la_reference(
    q,
    k,
    v,
    S0: Optional[torch.Tensor],
    z0: Optional[torch.Tensor],
    mask_pad: Optional[torch.Tensor],
    num_heads: int,
    time_major: bool = False,
    eps: float = 1e-6,
):
    """(out, S, z) in fp64 on the inputs' device, from the naive twin on the op's layout (out like v)."""
    return causal_linear_attention_packed(
        q.double(),
        k.double(),
        v.double(),
        num_heads,
        None if S0 is None else S0.double(),
        None if z0 is None else z0.double(),
        mask_pad,
        eps,
        time_major,
    )


def assert_la_close(got, ref, dtype: torch.dtype) -> None:
    """out within ATOL / RTOL; S and z within RTOL relative to their magnitude (they grow with L)."""
    out, S, z = got
    out_ref, S_ref, z_ref = ref
    atol, rtol = ATOL[dtype], RTOL[dtype]
    torch.testing.assert_close(out.double().cpu(), out_ref.cpu(), atol=atol, rtol=rtol)
    S_scale = S_ref.abs().amax().item() + 1.0
    z_scale = z_ref.abs().amax().item() + 1.0
    torch.testing.assert_close(S.double().cpu(), S_ref.cpu(), atol=rtol * S_scale, rtol=rtol)
    torch.testing.assert_close(z.double().cpu(), z_ref.cpu(), atol=rtol * z_scale, rtol=rtol)
