"""The CUDA kernels of the recurrence family (plugins/linear_recurrence/cuda, plugins/causal_conv_with_state/cuda)
on the CUDA host emulation (plugins/kernels/emulation), against the float64 naive twins, in CI without a GPU.

``linearRecurrenceForward`` runs both of its kernels (recurrent and chunked, picked with the launcher's ``kernel``
field) for each update rule x activation dtype x {H_q = H_kv, GQA} x {decay per head, per key dim} (gated rules),
with a pad mask, a past state, and head dims that are not multiples of the tiles (24, 40) plus one of 256; then
absent state, no mask, an int32 mask, prefill-then-step against one pass, in-place state, a random thread schedule
and refused arguments; grouped value (H_kv a multiple of H_q, query and key with H_q heads, H_kv output heads) and
``qk_l2_norm`` (queries and keys of norm far from 1) for both kernels, every dtype, head dims 128 and 23 too.
Then what causal linear attention runs on (the feature map elu + 1, the time-major layout and the normaliser z), for
each of the three kernels (recurrent, chunked, chunked MMA) and dtype against that op's float64 twin, or the
recurrence's twin on [v | 1] (any scale), prefill-then-step with S and z in place (z through the workspace); the
chunked MMA kernel on the plain linear rule (scale != 1, no normaliser); the feature map before ``qk_l2_norm`` and the
time-major decay / beta of gated_delta; refused normaliser and MMA arguments.
``causalConvWithStateForward`` likewise against its naive twin.

Tolerances: the kernels compute in fp32 from the same rounded inputs as the fp64 references, so the fp32 state
matches to 1e-4 (relative) in every dtype; outputs add one rounding to the activation dtype (fp16 1e-2,
bf16 3e-2). The chunked MMA kernel's fp16 / bf16 path rounds more (its tensor-core operands), so it is held to
kernel_cases' tensor-core tolerances. The emulator is slow (one fiber per CUDA thread), so sizes are small.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from cuda_emulation import REQUIRES_EMULATION, EmulatedKernels, EmulatedLaunchError, load_emulated_kernels
from kernel_cases import ATOL, assert_la_close

from rnnx import plugins
from rnnx.models.ops.causal_conv_with_state.naive import causal_conv_with_state_naive
from rnnx.models.ops.causal_linear_attention.naive import causal_linear_attention_packed
from rnnx.models.ops.linear_recurrence.naive import linear_recurrence_naive

pytestmark = REQUIRES_EMULATION

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
#: output tolerance (absolute and relative) per activation dtype; the fp32 state is held to STATE_TOL
OUT_TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
STATE_TOL = 1e-4
#: (rule, decay per key dim) pairs: the gated rules take a decay per head or per key dim
RULE_DECAYS = [
    ("linear", False),
    ("gated", False),
    ("gated", True),
    ("delta", False),
    ("gated_delta", False),
    ("gated_delta", True),
]


@pytest.fixture(scope="module")
def emu() -> EmulatedKernels:
    return load_emulated_kernels()


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


def run_lr(emu: EmulatedKernels, inputs: dict, Hq: int, Hkv: int, rule: str, kernel: str, **kw):
    """The kernel on ``inputs``: (out, present_state), which start NaN unless ``present_state`` is given, so every
    element must be written."""
    return emu.linear_recurrence(inputs, q_heads=Hq, kv_heads=Hkv, rule=rule, kernel=kernel, **kw)


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


def test_the_python_head_dim_limit_is_the_kernels():
    """rnnx.models.ops.cuda.MAX_DIM_K (where the torch ops fall back to their torch code) is the launcher's
    kLINEAR_RECURRENCE_MAX_DIM_K, which the kernels refuse past (test_linear_recurrence_refuses_bad_arguments)."""
    import re

    from rnnx.models.ops import cuda

    header = (plugins.OPS_DIR / "linear_recurrence" / "cuda" / "linear_recurrence.h").read_text()
    found = re.search(r"constexpr int kLINEAR_RECURRENCE_MAX_DIM_K = (\d+);", header)
    assert found is not None and int(found.group(1)) == cuda.MAX_DIM_K


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
# Feature map, time-major layout, normaliser and the chunked MMA kernel (causal linear attention runs on them)

#: (B, T, d_k, d_v) per kernel: off the 32-column tile for the recurrent and chunked kernels (several tiles), in
#: {32, 64, 128} for the chunked MMA kernel with T past one 64-token chunk
OPTION_SHAPES = {"recurrent": (2, 37, 24, 40), "chunked": (3, 35, 40, 24), "chunked_mma": (2, 70, 32, 64)}


def la_state(B: int, H: int, dk: int, dv: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(S0 (B, H, d_k, d_v), z0 (B, H, d_k)) fp32, z0 positive (a sum of phi(k)) as causal linear attention has it."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, H, dk, dv, generator=g) * 0.5, torch.rand(B, H, dk, generator=g) * 4


def time_major(inputs: dict) -> dict:
    """``inputs`` with every token tensor (T, B, .) and the mask (T, B), contiguous."""
    moved = {n: x.transpose(0, 1).contiguous() for n, x in inputs.items() if n != "past_state" and x is not None}
    return inputs | moved


def run_normalised(emu, inputs: dict, H: int, kernel: str, z0, *, tm: bool, S=None, z=None, **kw):
    """The kernel with the normaliser (z0 | None) on ``inputs`` (in the (T, B, .) layout when ``tm``), H_q = H_kv = H;
    outputs start NaN (S, z: these tensors instead, for in-place calls). Returns (out, S, z)."""
    q = inputs["query"]
    B = q.shape[1] if tm else q.shape[0]
    z = torch.full((B, H, q.shape[2] // H), float("nan")) if z is None else z
    out, S = emu.linear_recurrence(
        inputs | {"decay": None, "beta": None}, q_heads=H, kv_heads=H, rule="linear", kernel=kernel, time_major=tm,
        z=(z0, z), present_state=S, **kw,
    )  # fmt: skip
    return out, S, z


def reference_normalised(inputs: dict, H: int, z0, *, scale: float, feature_map: bool, eps: float = 1e-6):
    """LinearAttention(linear, scale) of the float64 twin on (phi(q), phi(k) with ``feature_map``) and [v | 1] from
    [S0 | z0], then o[:d_v] / (o[d_v] + eps); batch-first inputs. Returns (out, S, z)."""
    q, k, v = (inputs[n].double() for n in ("query", "key", "value"))
    if feature_map:
        q, k = F.elu(q) + 1, F.elu(k) + 1
    B, T = q.shape[:2]
    dv = v.shape[2] // H
    v1 = torch.cat([v.reshape(B, T, H, dv), v.new_ones(B, T, H, 1)], dim=-1).reshape(B, T, H * (dv + 1))
    state0 = torch.cat([inputs["past_state"].double(), z0.double().unsqueeze(-1)], dim=-1)
    num, state = linear_recurrence_naive(q, k, v1, state0, q_num_heads=H, kv_num_heads=H, update_rule="linear",
                                         scale=scale, pad_mask=inputs["pad_mask"])  # fmt: skip
    num = num.reshape(B, T, H, dv + 1)
    out = num[..., :dv] / (num[..., dv:] + eps)
    return out.reshape(B, T, H * dv), state[..., :dv], state[..., dv]


def assert_normalised_close(got, ref, dtype: torch.dtype, kernel: str) -> None:
    """The file's tolerances; the chunked MMA kernel's fp16 / bf16 path rounds phi(q), phi(k) and scale A / den to the
    activation type for the tensor cores, so it is held to the tensor-core tolerances of kernel_cases (relative to
    the state's magnitude), as causal linear attention's tests hold it."""
    if kernel == "chunked_mma" and dtype != torch.float32:
        assert_la_close(got, ref, dtype)
        return
    tol = OUT_TOL[dtype]
    torch.testing.assert_close(got[0].double(), ref[0].double(), atol=tol, rtol=tol)
    for a, b in zip(got[1:], ref[1:]):
        torch.testing.assert_close(a.double(), b.double(), atol=STATE_TOL, rtol=STATE_TOL)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kernel", list(OPTION_SHAPES))
def test_linear_recurrence_feature_map_and_normaliser_match_causal_linear_attention(emu, kernel, dtype):
    """elu + 1 on query and key, the normaliser and scale 1 are causal linear attention: each kernel against that op's
    float64 twin, with pads and a past (S0, z0), batch-first or time-major (cycled over the cases)."""
    case = list(OPTION_SHAPES).index(kernel) + DTYPES.index(dtype)
    B, T, dk, dv = OPTION_SHAPES[kernel]
    H, tm = 2, case % 2 == 1
    inputs = lr_inputs(B, T, H, H, dk, dv, "linear", False, dtype, seed=60 + case, qk_scale=0.5)
    inputs["past_state"], z0 = la_state(B, H, dk, dv, seed=case)
    if tm:
        inputs = time_major(inputs)
    got = run_normalised(emu, inputs, H, kernel, z0, tm=tm, scale=1.0, feature_map=True)
    q, k, v, mask = (inputs[n] for n in ("query", "key", "value", "pad_mask"))
    ref = causal_linear_attention_packed(q.double(), k.double(), v.double(), H, inputs["past_state"].double(),
                                         z0.double(), mask, 1e-6, tm)  # fmt: skip
    assert_normalised_close(got, ref, dtype, kernel)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_recurrence_chunked_mma_plain_linear_rule(emu, dtype):
    """The chunked MMA kernel without feature map nor normaliser is the linear rule: scale (A V + Q S), the
    activation-type A holding scale * A; scale 0.3, or 0 (1 / sqrt(d_k)) for bf16, with pads and a past state."""
    scale = 0.0 if dtype == torch.bfloat16 else 0.3
    inputs = lr_inputs(2, 70, 2, 2, 64, 32, "linear", False, dtype, seed=70 + DTYPES.index(dtype))
    emu.reset_stats()
    got = run_lr(emu, inputs, 2, 2, "linear", "chunked_mma", scale=scale)
    stats = emu.stats()
    assert stats.launches == 1 and (stats.mma > 0) == (dtype != torch.float32), stats
    out_ref, state_ref = reference_lr(inputs, 2, 2, "linear", scale=scale)
    tol = OUT_TOL[dtype] if dtype == torch.float32 else ATOL[dtype]  # scale A rounded to the activation type
    torch.testing.assert_close(got[0].double(), out_ref.double(), atol=tol, rtol=tol)
    # K and V are the inputs themselves, exact in the activation type: the tensor cores' K^T V is the fp32 one.
    torch.testing.assert_close(got[1].double(), state_ref, atol=STATE_TOL, rtol=STATE_TOL)


@pytest.mark.parametrize("kernel", ["recurrent", "chunked"])
def test_linear_recurrence_feature_map_time_major_with_decay_and_l2_norm(emu, kernel):
    """The feature map comes before qk_l2_norm, and time-major reads decay and beta by token row too: gated_delta with
    a per-key decay, grouped query, pads, no normaliser."""
    B, T, Hq, Hkv, dk, dv = 2, 21, 4, 2, 24, 40
    inputs = lr_inputs(B, T, Hq, Hkv, dk, dv, "gated_delta", True, torch.float32, seed=80, qk_scale=2.0)
    tm = time_major(inputs)
    out, state = emu.linear_recurrence(
        tm, q_heads=Hq, kv_heads=Hkv, rule="gated_delta", kernel=kernel, qk_l2_norm=True, feature_map=True,
        time_major=True,
    )  # fmt: skip
    mapped = inputs | {n: inputs[n].double() for n in ("value", "decay", "beta")}
    mapped |= {n: F.elu(inputs[n].double()) + 1 for n in ("query", "key")}
    out_ref, state_ref = reference_lr(mapped, Hq, Hkv, "gated_delta", qk_l2_norm=True)
    assert_lr_close((out.transpose(0, 1), state), (out_ref, state_ref), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kernel", ["chunked", "chunked_mma"])
def test_linear_recurrence_normalised_prefill_then_step_in_place(emu, kernel, dtype):
    """A prefill of 33 tokens then one step at a time (kAUTO: the recurrent kernel), S and z updated in place (z_out
    aliasing z_in, d_v = 128 split into several column tiles: z_in goes through the workspace), against the twin; in
    fp32 also equal to one pass over all 40 tokens. Time-major for the chunked kernel."""
    B, T, H, D, split = 2, 40, 2, 128, 33
    tm = kernel == "chunked"
    inputs = lr_inputs(B, T, H, H, D, D, "linear", False, dtype, seed=90, qk_scale=0.5)
    del inputs["decay"], inputs["beta"]
    inputs["past_state"], z0 = la_state(B, H, D, D, seed=9)
    ref = reference_normalised(inputs, H, z0, scale=0.0, feature_map=True)
    if tm:
        inputs = time_major(inputs)
        ref = (ref[0].transpose(0, 1), *ref[1:])
    opts = dict(tm=tm, feature_map=True)  # scale 0: 1 / sqrt(d_k)

    def part(t0: int, t1: int) -> dict:
        sliced = {n: (x[t0:t1] if tm else x[:, t0:t1]).contiguous() for n, x in inputs.items() if n != "past_state"}
        return inputs | sliced

    S, z = inputs["past_state"].clone(), z0.clone()
    outs = [run_normalised(emu, part(0, split) | {"past_state": S}, H, kernel, z, S=S, z=z, **opts)[0]]
    for t in range(split, T):
        outs.append(run_normalised(emu, part(t, t + 1) | {"past_state": S}, H, "auto", z, S=S, z=z, **opts)[0])
    got = (torch.cat(outs, dim=0 if tm else 1), S, z)
    assert_normalised_close(got, ref, dtype, kernel)
    if dtype == torch.float32:
        one_pass = run_normalised(emu, inputs, H, kernel, z0, **opts)
        for a, b in zip(got, one_pass):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_linear_recurrence_refuses_bad_normaliser_and_mma_arguments(emu):
    """A normaliser on another rule, the chunked MMA kernel where it is not eligible (d_k 24, qk_l2_norm, grouped query)
    and an in-place z over several column tiles without workspace are refused; with one tile no workspace is needed."""
    H = 2
    inputs = lr_inputs(1, 5, H, H, 32, 64, "gated", False, torch.float32, seed=1)
    S0, z0 = la_state(1, H, 32, 64, seed=1)
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # the normaliser needs the linear rule
        unmasked = inputs | {"past_state": S0, "pad_mask": None}
        emu.linear_recurrence(unmasked, q_heads=H, kv_heads=H, rule="gated", z=(z0, torch.empty_like(z0)))
    for Hq, dk, l2 in ((H, 24, False), (H, 32, True), (2 * H, 32, False)):
        odd = lr_inputs(1, 5, Hq, H, dk, 32, "linear", False, torch.float32, seed=2)
        with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # not eligible for the MMA kernel
            run_lr(emu, odd, Hq, H, "linear", "chunked_mma", qk_l2_norm=l2)
    linear = lr_inputs(1, 5, H, H, 32, 64, "linear", False, torch.float32, seed=3) | {"past_state": S0}
    with pytest.raises(EmulatedLaunchError, match="cudaError_t 1"):  # 2 tiles of the recurrent kernel read z0
        z = z0.clone()
        run_normalised(emu, linear, H, "recurrent", z, tm=False, z=z, workspace=False)
    one_tile = lr_inputs(1, 5, H, H, 32, 32, "linear", False, torch.float32, seed=3)
    one_tile["past_state"] = S0[..., :32].contiguous()
    z = z0.clone()
    run_normalised(emu, one_tile, H, "recurrent", z, tm=False, z=z, workspace=False)
    ref = reference_normalised(one_tile, H, z0, scale=0.0, feature_map=False)
    torch.testing.assert_close(z.double(), ref[2], atol=STATE_TOL, rtol=STATE_TOL)


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
        out, present = emu.causal_conv(dict(input=x, weight=w, bias=b, past_state=s0, pad_mask=m), silu=silu)
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
    everything = dict(input=x, weight=w, past_state=state0, pad_mask=mask)
    out_all, state_all = emu.causal_conv(everything, silu=True, mask_int32=True)
    state = state0.clone()
    outs = []
    for t in range(T):
        step = dict(input=x[:, :, t : t + 1].contiguous(), weight=w, past_state=state, pad_mask=mask[:, t : t + 1])
        outs.append(emu.causal_conv(step, silu=True, present_state=state)[0])
    torch.testing.assert_close(torch.cat(outs, dim=2), out_all, atol=0, rtol=0)
    torch.testing.assert_close(state, state_all, atol=0, rtol=0)
