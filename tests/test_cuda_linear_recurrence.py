"""The CUDA kernels of the recurrence family (plugins/linear_recurrence/cuda, plugins/causal_conv_with_state/cuda)
on the CUDA host emulation (plugins/kernels/emulation), against the float64 naive twins, in CI without a GPU.

``linearRecurrenceForward`` runs both of its kernels (recurrent and chunked, picked with the launcher's ``kernel``
field) for each update rule x activation dtype x {H_q = H_kv, GQA} x {decay per head, per key dim} (gated rules),
with a pad mask, a past state, and head dims that are not multiples of the tiles (24, 40) plus one of 256; then
absent state, no mask, an int32 mask, prefill-then-step against one pass, in-place state, a random thread schedule
and refused arguments; grouped value (H_kv a multiple of H_q, query and key with H_q heads, H_kv output heads) and
``qk_l2_norm`` (queries and keys of norm far from 1) for both kernels, every dtype, head dims 128 and 23 too.
``causalConvWithStateForward`` likewise against its naive twin.

Tolerances: the kernels compute in fp32 from the same rounded inputs as the fp64 references, so the fp32 state
matches to 1e-4 (relative) in every dtype; outputs add one rounding to the activation dtype (fp16 1e-2,
bf16 3e-2). The emulator is slow (one fiber per CUDA thread), so sizes are small.
"""

from __future__ import annotations

import ctypes
import shutil
from typing import Optional

import pytest
import torch
import torch.nn.functional as F
from cuda_emulation import DTYPE_CODES, EmulatedKernels, EmulatedLaunchError, _ptr
from test_plugins import BUILD_DIR

from rnnx import plugins
from rnnx.models.ops.causal_conv_with_state.naive import causal_conv_with_state_naive
from rnnx.models.ops.linear_recurrence.naive import linear_recurrence_naive

NVCC = plugins.find_nvcc()
pytestmark = [
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot build the kernel emulation"),
    pytest.mark.skipif(NVCC is None, reason="no CUDA toolkit (nvcc, headers): cannot build the kernel emulation"),
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
#: output tolerance (absolute and relative) per activation dtype; the fp32 state is held to STATE_TOL
OUT_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
STATE_TOL = 1e-4
#: rnnx::kernels::LinearRecurrenceRule and LinearRecurrenceKernel codes
RULES = {"linear": 0, "gated": 1, "delta": 2, "gated_delta": 3}
KERNELS = {"auto": 0, "recurrent": 1, "chunked": 2}
#: (rule, decay per key dim) pairs: the gated rules take a decay per head or per key dim
RULE_DECAYS = [
    ("linear", False),
    ("gated", False),
    ("gated", True),
    ("delta", False),
    ("gated_delta", False),
    ("gated_delta", True),
]


class RecurrenceKernels(EmulatedKernels):
    """The emulated library's entry points of the two ops (plugins/<op>/cuda/<op>_emulation.cpp)."""

    def __init__(self, library) -> None:
        super().__init__(library)
        lib = self._lib
        vp, i, f = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        # batch, length, q_heads, kv_heads, dim_k, dim_v, rule, decay_per_key, beta_per_head, scale, qk_l2_norm,
        # kernel, mask_int32, dtype, query, key, value, past_state, decay, beta, mask_pad, output, present_state
        lib.rnnx_emu_linear_recurrence_forward.argtypes = [i] * 9 + [f, i, i, i, i] + [vp] * 9
        lib.rnnx_emu_linear_recurrence_forward.restype = i
        # batch, channels, length, kernel_size, silu, mask_int32, dtype, input, weight, bias, past_state, mask_pad,
        # output, present_state
        lib.rnnx_emu_causal_conv_with_state_forward.argtypes = [i] * 7 + [vp] * 7
        lib.rnnx_emu_causal_conv_with_state_forward.restype = i

    def linear_recurrence(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        past_state: Optional[torch.Tensor],
        decay: Optional[torch.Tensor],
        beta: Optional[torch.Tensor],
        mask_pad: Optional[torch.Tensor],
        out: torch.Tensor,
        present_state: torch.Tensor,
        *,
        q_heads: int,
        kv_heads: int,
        rule: str,
        scale: float = 0.0,
        qk_l2_norm: bool = False,
        kernel: str = "auto",
        mask_int32: bool = False,
    ) -> None:
        """linearRecurrenceForward, layouts of the record LINEAR_RECURRENCE; writes out and present_state."""
        B, T = q.shape[0], q.shape[1]
        dk, dv = q.shape[2] // q_heads, v.shape[2] // kv_heads
        mask = None
        if mask_pad is not None:
            mask = (mask_pad != 0).to(torch.int32 if mask_int32 else torch.uint8).contiguous()
        status = self._lib.rnnx_emu_linear_recurrence_forward(
            B, T, q_heads, kv_heads, dk, dv, RULES[rule],
            int(decay is not None and decay.shape[2] == kv_heads * dk and dk > 1),
            int(beta is not None and beta.shape[2] == kv_heads), scale, int(qk_l2_norm), KERNELS[kernel],
            int(mask_int32),
            DTYPE_CODES[q.dtype], _ptr(q), _ptr(k), _ptr(v), _ptr(past_state), _ptr(decay), _ptr(beta), _ptr(mask),
            _ptr(out), _ptr(present_state),
        )  # fmt: skip
        self._check(status, "linearRecurrenceForward")

    def causal_conv(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        past_state: Optional[torch.Tensor],
        mask_pad: Optional[torch.Tensor],
        out: torch.Tensor,
        present_state: torch.Tensor,
        *,
        silu: bool,
        mask_int32: bool = False,
    ) -> None:
        """causalConvWithStateForward, layouts of the record CAUSAL_CONV_WITH_STATE."""
        B, C, T = x.shape
        mask = None
        if mask_pad is not None:
            mask = (mask_pad != 0).to(torch.int32 if mask_int32 else torch.uint8).contiguous()
        status = self._lib.rnnx_emu_causal_conv_with_state_forward(
            B, C, T, weight.shape[2], int(silu), int(mask_int32), DTYPE_CODES[x.dtype], _ptr(x), _ptr(weight),
            _ptr(bias), _ptr(past_state), _ptr(mask), _ptr(out), _ptr(present_state),
        )  # fmt: skip
        self._check(status, "causalConvWithStateForward")


@pytest.fixture(scope="module")
def emu() -> RecurrenceKernels:
    plugins.build_plugins(BUILD_DIR, quiet=True)
    library = BUILD_DIR / "librnnx_kernels_emulated.so"
    assert library.is_file(), f"{library} was not built"
    kernels = RecurrenceKernels(library)
    kernels.set_schedule("in_order")
    return kernels


# ---------------------------------------------------------------------------------------------
# Linear recurrence


def lr_inputs(
    B: int,
    T: int,
    Hq: int,
    Hkv: int,
    dk: int,
    dv: int,
    rule: str,
    per_key: bool,
    dtype: torch.dtype,
    seed: int,
    state: bool = True,
    mask: bool = True,
    beta_per_head: bool = True,
    qk_scale: float = 1.0,
) -> dict:
    """Inputs of one call: min(Hq, Hkv) key heads, unit-norm keys for the delta rules (a stable recurrence), query
    and key times ``qk_scale``, log decays in (-1, 0), beta in (0, 1); the mask pads the last b steps of row b and
    step 2 of row 1 (a pad inside the sequence)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    Hk = min(Hq, Hkv)
    q = rnd(B, T, Hq, dk)
    k = rnd(B, T, Hk, dk)
    if rule in ("delta", "gated_delta"):
        k = F.normalize(k, dim=-1)
    inputs = dict(
        query=(qk_scale * q).reshape(B, T, Hq * dk).to(dtype),
        key=(qk_scale * k).reshape(B, T, Hk * dk).to(dtype),
        value=rnd(B, T, Hkv * dv).to(dtype),
        past_state=(rnd(B, Hkv, dk, dv) * 0.5).float() if state else None,
        decay=None,
        beta=None,
        pad_mask=None,
    )
    if rule in ("gated", "gated_delta"):
        inputs["decay"] = (F.logsigmoid(rnd(B, T, Hkv * (dk if per_key else 1)) + 2.0)).to(dtype)
    if rule in ("delta", "gated_delta"):
        inputs["beta"] = torch.sigmoid(rnd(B, T, Hkv if beta_per_head else 1)).to(dtype)
    if mask:
        m = torch.zeros(B, T, dtype=torch.bool)
        for b in range(1, B):
            m[b, T - min(T, b) :] = True
        if B > 1 and T > 3:
            m[1, 2] = True
        inputs["pad_mask"] = m
    return inputs


def run_lr(emu: RecurrenceKernels, inputs: dict, Hq: int, Hkv: int, rule: str, kernel: str, **kw):
    """The kernel on ``inputs``; outputs start NaN, so every element must be written."""
    q, v = inputs["query"], inputs["value"]
    B, T = q.shape[:2]
    dk, dv = q.shape[2] // Hq, v.shape[2] // Hkv
    out = torch.full((B, T, max(Hq, Hkv) * dv), float("nan"), dtype=q.dtype)
    state = kw.pop("present_state", None)
    state = torch.full((B, Hkv, dk, dv), float("nan")) if state is None else state
    emu.linear_recurrence(
        q, inputs["key"], v, inputs["past_state"], inputs["decay"], inputs["beta"], inputs["pad_mask"], out, state,
        q_heads=Hq, kv_heads=Hkv, rule=rule, kernel=kernel, **kw,
    )  # fmt: skip
    return out, state


def reference_lr(inputs: dict, Hq: int, Hkv: int, rule: str, scale: float = 0.0, qk_l2_norm: bool = False):
    return linear_recurrence_naive(
        **inputs, q_num_heads=Hq, kv_num_heads=Hkv, update_rule=rule, scale=scale, qk_l2_norm=int(qk_l2_norm)
    )


def assert_lr_close(got, ref, dtype: torch.dtype) -> None:
    out, state = got
    out_ref, state_ref = ref
    tol = OUT_TOL[dtype]
    torch.testing.assert_close(out.double(), out_ref.double(), atol=tol, rtol=tol)
    torch.testing.assert_close(state.double(), state_ref, atol=STATE_TOL, rtol=STATE_TOL)


def _rule_id(rd) -> str:
    rule, per_key = rd
    return f"{rule}-{'perkey' if per_key else 'perhead'}" if rule.startswith("gated") else rule


#: (B, T, dk, dv) cycled over the cases: head dims off the 32-column tile and the chunk (T spans 2 chunks)
LR_SHAPES = [(2, 37, 24, 40), (3, 34, 32, 16), (2, 35, 40, 24)]


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
@pytest.mark.parametrize("heads", [(2, 2), (4, 2)], ids=["mha", "gqa"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rule_decay", RULE_DECAYS, ids=_rule_id)
def test_linear_recurrence_matches_naive(emu, rule_decay, dtype, heads, kernel):
    rule, per_key = rule_decay
    Hq, Hkv = heads
    case = RULE_DECAYS.index(rule_decay) + DTYPES.index(dtype)
    B, T, dk, dv = LR_SHAPES[case % len(LR_SHAPES)]
    inputs = lr_inputs(B, T, Hq, Hkv, dk, dv, rule, per_key, dtype, seed=case, beta_per_head=case % 2 == 0)
    got = run_lr(emu, inputs, Hq, Hkv, rule, kernel)
    assert_lr_close(got, reference_lr(inputs, Hq, Hkv, rule), dtype)


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
@pytest.mark.parametrize("rule_decay", [("linear", False), ("gated_delta", True)], ids=_rule_id)
def test_linear_recurrence_head_dim_256(emu, rule_decay, kernel):
    rule, per_key = rule_decay
    inputs = lr_inputs(1, 10, 2, 1, 256, 256, rule, per_key, torch.bfloat16, seed=5)
    got = run_lr(emu, inputs, 2, 1, rule, kernel)
    assert_lr_close(got, reference_lr(inputs, 2, 1, rule), torch.bfloat16)


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
@pytest.mark.parametrize("rule", ["gated", "delta"])
def test_linear_recurrence_without_state_or_mask_and_scale(emu, rule, kernel):
    inputs = lr_inputs(2, 20, 3, 1, 16, 8, rule, False, torch.float32, seed=11, state=False, mask=False)
    got = run_lr(emu, inputs, 3, 1, rule, kernel, scale=0.7)
    assert_lr_close(got, reference_lr(inputs, 3, 1, rule, scale=0.7), torch.float32)


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
def test_linear_recurrence_int32_mask(emu, kernel):
    inputs = lr_inputs(3, 12, 2, 2, 8, 8, "gated_delta", False, torch.float16, seed=3)
    got = run_lr(emu, inputs, 2, 2, "gated_delta", kernel, mask_int32=True)
    assert_lr_close(got, reference_lr(inputs, 2, 2, "gated_delta"), torch.float16)


@pytest.mark.parametrize("rule_decay", RULE_DECAYS, ids=_rule_id)
def test_linear_recurrence_prefill_then_step_in_place(emu, rule_decay):
    """A chunked prefill of 30 steps, then one recurrent step at a time with the state updated in place (present
    aliases past), equals one pass over all 36 steps (the default kernel choice: chunked for T > 1)."""
    rule, per_key = rule_decay
    Hq, Hkv, T, split = 4, 2, 36, 30
    inputs = lr_inputs(2, T, Hq, Hkv, 24, 20, rule, per_key, torch.float32, seed=21)
    out_all, state_all = run_lr(emu, inputs, Hq, Hkv, rule, "auto")

    def part(t0: int, t1: int) -> dict:
        return {n: (x[:, t0:t1].contiguous() if n != "past_state" and x is not None else x) for n, x in inputs.items()}

    state = inputs["past_state"].clone()
    first = part(0, split) | {"past_state": state}
    outs = [run_lr(emu, first, Hq, Hkv, rule, "auto", present_state=state)[0]]
    for t in range(split, T):
        step = part(t, t + 1) | {"past_state": state}
        outs.append(run_lr(emu, step, Hq, Hkv, rule, "auto", present_state=state)[0])
    torch.testing.assert_close(torch.cat(outs, dim=1), out_all, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state, state_all, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
def test_linear_recurrence_schedule_independent(emu, kernel):
    """A random thread / block order gives the in-order result bit for bit (no race the barriers miss), GQA and
    grouped value with qk_l2_norm (its per-row warp reductions)."""
    for Hq, Hkv, l2 in ((4, 2, False), (2, 4, True)):
        inputs = lr_inputs(2, 19, Hq, Hkv, 24, 40, "gated_delta", True, torch.float32, seed=8, qk_scale=1 + l2)
        expected = run_lr(emu, inputs, Hq, Hkv, "gated_delta", kernel, qk_l2_norm=l2)
        try:
            emu.set_schedule("random", seed=1234)
            got = run_lr(emu, inputs, Hq, Hkv, "gated_delta", kernel, qk_l2_norm=l2)
        finally:
            emu.set_schedule("in_order")
        torch.testing.assert_close(got, expected, atol=0, rtol=0)


#: (Hq, Hkv, qk_l2_norm): grouped value with and without the norm, GQA with it
GROUPED_HEADS = [(2, 4, True), (1, 3, False), (4, 2, True)]


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("heads", GROUPED_HEADS, ids=lambda h: f"hq{h[0]}-hkv{h[1]}{'-l2' if h[2] else ''}")
def test_linear_recurrence_grouped_value_and_qk_l2_norm(emu, heads, dtype, kernel):
    """Grouped value (state s reads query / key head s // (Hkv / Hq), output head s) and qk_l2_norm (queries and keys
    times 3), the rule and shape cycled over the cases (a pad mask, a past state)."""
    Hq, Hkv, l2 = heads
    case = GROUPED_HEADS.index(heads) * len(DTYPES) + DTYPES.index(dtype)
    rule, per_key = RULE_DECAYS[case % len(RULE_DECAYS)]
    B, T, dk, dv = LR_SHAPES[case % len(LR_SHAPES)]
    inputs = lr_inputs(B, T, Hq, Hkv, dk, dv, rule, per_key, dtype, seed=40 + case, beta_per_head=case % 2 == 0,
                       qk_scale=3.0 if l2 else 1.0)  # fmt: skip
    got = run_lr(emu, inputs, Hq, Hkv, rule, kernel, qk_l2_norm=l2)
    assert got[0].shape == (B, T, max(Hq, Hkv) * dv)
    assert_lr_close(got, reference_lr(inputs, Hq, Hkv, rule, qk_l2_norm=l2), dtype)


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
@pytest.mark.parametrize("dk", [128, 23])
def test_linear_recurrence_grouped_value_qk_l2_norm_head_dims(emu, dk, kernel):
    """gated_delta (per-key decay), grouped value with qk_l2_norm at d_k 128 (the models' head dim: several lanes per
    warp in the norm) and an odd 23."""
    inputs = lr_inputs(2, 9, 1, 2, dk, 8, "gated_delta", True, torch.float32, seed=dk, qk_scale=3.0)
    got = run_lr(emu, inputs, 1, 2, "gated_delta", kernel, qk_l2_norm=True)
    assert_lr_close(got, reference_lr(inputs, 1, 2, "gated_delta", qk_l2_norm=True), torch.float32)


def test_linear_recurrence_refuses_bad_arguments(emu):
    inputs = lr_inputs(1, 3, 2, 2, 8, 8, "gated", False, torch.float32, seed=0)
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # cudaErrorInvalidValue: no decay
        run_lr(emu, inputs | {"decay": None}, 2, 2, "gated", "auto")
    big = lr_inputs(1, 1, 1, 1, 257, 4, "linear", False, torch.float32, seed=0)
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # d_k > 256
        run_lr(emu, big, 1, 1, "linear", "auto")
    odd = lr_inputs(1, 3, 2, 3, 8, 8, "linear", False, torch.float32, seed=0)
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # neither of H_q, H_kv a multiple of the other
        run_lr(emu, odd, 2, 3, "linear", "auto")


# ---------------------------------------------------------------------------------------------
# Causal convolution with state


@pytest.mark.parametrize("silu", [False, True], ids=["none", "silu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("K", [1, 3, 4])
def test_causal_conv_matches_naive(emu, K, dtype, silu):
    g = torch.Generator().manual_seed(K)
    B, C, T = 3, 5, 9
    x = torch.randn(B, C, T, generator=g).to(dtype)
    w = torch.randn(C, 1, K, generator=g).to(dtype)
    bias = torch.randn(C, generator=g).to(dtype)
    state = torch.randn(B, C, K - 1, generator=g)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[1, 3] = mask[1, 4] = True  # pads inside the sequence
    mask[2, T - 2 :] = True  # right padding
    mask[2, 0] = True  # a pad first
    act = "silu" if silu else "none"
    tol = OUT_TOL[dtype]
    for s0, m, b in ((state, mask, bias), (None, None, None), (state, None, bias)):
        out = torch.full((B, C, T), float("nan"), dtype=dtype)
        present = torch.full((B, C, K - 1), float("nan"))
        emu.causal_conv(x, w, b, s0, m, out, present, silu=silu)
        out_ref, state_ref = causal_conv_with_state_naive(x, w, b, s0, activation=act, pad_mask=m)
        torch.testing.assert_close(out.double(), out_ref.double(), atol=tol, rtol=tol)
        torch.testing.assert_close(present.double(), state_ref, atol=0, rtol=0)  # copies of inputs


def test_causal_conv_step_in_place_and_int32_mask(emu):
    """One pass over T steps equals T one-step calls with the state updated in place; an int32 mask reads the same."""
    g = torch.Generator().manual_seed(0)
    B, C, T, K = 2, 4, 7, 4
    x = torch.randn(B, C, T, generator=g)
    w = torch.randn(C, 1, K, generator=g)
    state0 = torch.randn(B, C, K - 1, generator=g)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[0, 2] = mask[1, 5:] = True
    out_all = torch.empty(B, C, T)
    state_all = torch.empty(B, C, K - 1)
    emu.causal_conv(x, w, None, state0, mask, out_all, state_all, silu=True, mask_int32=True)
    state = state0.clone()
    outs = []
    for t in range(T):
        out_t = torch.empty(B, C, 1)
        emu.causal_conv(x[:, :, t : t + 1].contiguous(), w, None, state, mask[:, t : t + 1].contiguous(), out_t, state,
                        silu=True)  # fmt: skip
        outs.append(out_t)
    torch.testing.assert_close(torch.cat(outs, dim=2), out_all, atol=0, rtol=0)
    torch.testing.assert_close(state, state_all, atol=0, rtol=0)
