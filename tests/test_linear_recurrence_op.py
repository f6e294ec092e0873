"""The ``rnnx::linear_recurrence`` and ``rnnx::causal_conv_with_state`` torch ops against their float64 naive twins.

Every rule x dtype (fp32, fp16, bf16, fp64) x heads (H_q = H_kv, GQA) x decay (per head, per key dim, where the
rule takes one), and grouped value (H_kv > H_q) with ``qk_l2_norm``; prefill followed by one-token steps equals
one pass; a right-padded batch equals each row alone; gradients equal those of the naive token loop (itself plain
autograd) and finite differences; the fake implementation and schema pass ``torch.library.opcheck``.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from rnnx.models.ops.causal_conv_with_state import causal_conv_with_state, causal_conv_with_state_naive
from rnnx.models.ops.linear_recurrence import (
    DELTA_RULES,
    GATED_RULES,
    UPDATE_RULES,
    linear_recurrence,
    linear_recurrence_naive,
)

#: max |op - naive| / max |naive| per dtype: fp32 / fp64 compute in their own precision; fp16 / bf16 inputs are
#: computed in fp32 and the output rounded once to the activation dtype (the state stays fp32).
REL_TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
STATE_REL_TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 2e-5, torch.bfloat16: 2e-5}
B, D_K, D_V = 2, 8, 6


def _rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double() - want.double()).abs().max() / want.double().abs().max().clamp_min(1e-30)).item()


def _inputs(
    rule: str,
    h_q: int,
    h_kv: int,
    per_key: bool,
    T: int,
    dtype=torch.float32,
    seed: int = 0,
    shared_beta=False,
    key_scale: float = 0.0,
) -> dict:
    """Well-scaled inputs: unit keys (the delta rules' stable regime), decays -softplus (<= 0), beta in (0, 1).

    Keys have min(h_q, h_kv) heads (grouped value when h_kv > h_q); ``key_scale`` > 0 gives raw keys of that scale
    instead of unit ones (for ``qk_l2_norm``, which normalises them inside the op)."""
    g = torch.Generator().manual_seed(seed)
    h_k = min(h_q, h_kv)
    keys = torch.randn(B, T, h_k, D_K, generator=g)
    keys = keys * key_scale if key_scale > 0 else F.normalize(keys, dim=-1)
    x = {
        "query": torch.randn(B, T, h_q * D_K, generator=g),
        "key": keys.reshape(B, T, h_k * D_K),
        "value": torch.randn(B, T, h_kv * D_V, generator=g),
        "past_state": torch.randn(B, h_kv, D_K, D_V, generator=g),
    }
    if rule in GATED_RULES:
        x["decay"] = -F.softplus(torch.randn(B, T, h_kv * (D_K if per_key else 1), generator=g))
    if rule in DELTA_RULES:
        x["beta"] = torch.rand(B, T, 1 if shared_beta else h_kv, generator=g)
    return {n: (t.to(dtype) if n != "past_state" else t) for n, t in x.items()}


CASES = [
    (rule, heads, per_key)
    for rule, heads, per_key in itertools.product(UPDATE_RULES, [(2, 2), (4, 2)], [False, True])
    if rule in GATED_RULES or not per_key
]


def _case_id(case) -> str:
    rule, (h_q, h_kv), per_key = case
    return f"{rule}-h{h_q}x{h_kv}" + ("-perkey" if rule in GATED_RULES and per_key else "")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_each_rule_equals_the_naive_twin(case, dtype):
    rule, (h_q, h_kv), per_key = case
    x = _inputs(rule, h_q, h_kv, per_key, T=70, dtype=dtype)  # two chunks and a bit (chunk 64 / 16)
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule)
    out, state = linear_recurrence(**x, **attrs)
    ref_out, ref_state = linear_recurrence_naive(**x, **attrs)
    assert out.dtype == dtype and out.shape == ref_out.shape
    assert state.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    assert _rel_err(out, ref_out) < REL_TOL[dtype]
    assert _rel_err(state, ref_state) < STATE_REL_TOL[dtype]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_prefill_then_steps_equals_one_pass(case):
    rule, (h_q, h_kv), per_key = case
    x = _inputs(rule, h_q, h_kv, per_key, T=23, seed=1)
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule)
    whole, whole_state = linear_recurrence(**x, **attrs)
    per_step = {n: t for n, t in x.items() if n != "past_state"}
    outs, state = [], x["past_state"]
    for lo, hi in [(0, 17), *[(t, t + 1) for t in range(17, 23)]]:  # a prefill, then decode steps
        o, state = linear_recurrence(**{n: t[:, lo:hi] for n, t in per_step.items()}, past_state=state, **attrs)
        outs.append(o)
    torch.testing.assert_close(torch.cat(outs, dim=1), whole, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(state, whole_state, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_a_right_padded_batch_equals_each_row_alone(case):
    rule, (h_q, h_kv), per_key = case
    x = _inputs(rule, h_q, h_kv, per_key, T=21, seed=2, shared_beta=rule in DELTA_RULES and h_q == h_kv)
    lengths = [21, 13]
    pad = torch.arange(21)[None, :] >= torch.tensor(lengths)[:, None]
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule)
    out, state = linear_recurrence(**x, **attrs, pad_mask=pad.to(torch.int32))
    for row, n in enumerate(lengths):
        alone = {name: t[row : row + 1, :n] if name != "past_state" else t[row : row + 1] for name, t in x.items()}
        o, s = linear_recurrence(**alone, **attrs)
        torch.testing.assert_close(out[row : row + 1, :n], o, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(state[row : row + 1], s, rtol=1e-5, atol=1e-5)


def _assert_gradients_equal_the_naive_loop(x: dict, attrs: dict, T: int) -> None:
    """Gradients of a weighted sum of both outputs through the op and through the naive loop, every input, fp64."""
    heads_out = max(attrs["q_num_heads"], attrs["kv_num_heads"])
    weights = [
        torch.randn(B, T, heads_out * D_V, dtype=torch.float64),
        torch.randn(B, attrs["kv_num_heads"], D_K, D_V, dtype=torch.float64),
    ]

    def grads(fn):
        leaves = {n: t.clone().requires_grad_() for n, t in x.items()}
        out, state = fn(**leaves, **attrs)
        ((out * weights[0]).sum() + (state * weights[1]).sum()).backward()
        return {n: t.grad for n, t in leaves.items()}

    got, want = grads(linear_recurrence), grads(linear_recurrence_naive)
    for name in x:
        torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-9, msg=name)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == (4, 2)], ids=_case_id)
def test_gradients_equal_the_naive_loops(case):
    """The op's backward (a re-run of the chunked forward under autograd) against autograd through the token
    loop, fp64, every differentiable input; chunk 16 / 64 with T = 19 crosses a chunk for per-key decay."""
    rule, (h_q, h_kv), per_key = case
    x = _inputs(rule, h_q, h_kv, per_key, T=19, dtype=torch.float64, seed=3)
    x["past_state"] = x["past_state"].double()
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule)
    _assert_gradients_equal_the_naive_loop(x, attrs, T=19)


def test_gradcheck_against_finite_differences():
    x = _inputs("gated_delta", 2, 1, True, T=5, dtype=torch.float64, seed=4)
    x["past_state"] = x["past_state"].double()
    names = list(x)

    def fn(*tensors):
        return linear_recurrence(**dict(zip(names, tensors)), q_num_heads=2, kv_num_heads=1, update_rule="gated_delta")

    assert torch.autograd.gradcheck(fn, [t.clone().requires_grad_() for t in x.values()])


#: Gated DeltaNet's layout: 2 query / key heads serving 4 value heads and states, raw keys normalised in the op.
GROUPED_VALUE_CASES = [("gated_delta", (2, 4), False), ("delta", (2, 4), False), ("gated", (1, 2), True)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", GROUPED_VALUE_CASES, ids=_case_id)
def test_grouped_value_with_qk_l2_norm_equals_the_naive_twin(case, dtype):
    rule, (h_q, h_kv), per_key = case
    x = _inputs(rule, h_q, h_kv, per_key, T=70, dtype=dtype, key_scale=3.0)
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule, qk_l2_norm=True)
    out, state = linear_recurrence(**x, **attrs)
    ref_out, ref_state = linear_recurrence_naive(**x, **attrs)
    assert out.shape == ref_out.shape == (B, 70, h_kv * D_V)
    assert _rel_err(out, ref_out) < REL_TOL[dtype]
    assert _rel_err(state, ref_state) < STATE_REL_TOL[dtype]


def test_grouped_value_is_the_standard_op_on_repeated_normalised_heads():
    """The naive twin's grouped value and qk_l2_norm against their definition: each query / key head divided by
    its norm (eps 1e-6) and repeated H_kv / H_q times, then the standard grouping (H_q = H_kv)."""
    x = _inputs("gated_delta", 2, 4, False, T=9, dtype=torch.float64, key_scale=2.0)
    x["past_state"] = x["past_state"].double()
    got, got_state = linear_recurrence_naive(**x, q_num_heads=2, kv_num_heads=4, qk_l2_norm=True)
    q, k = (x[n].reshape(B, 9, 2, D_K) for n in ("query", "key"))
    q, k = (t / (t.square().sum(-1, keepdim=True) + 1e-6).sqrt() for t in (q, k))
    q, k = (t[:, :, [0, 0, 1, 1]].reshape(B, 9, 4 * D_K) for t in (q, k))
    want, want_state = linear_recurrence_naive(**{**x, "query": q, "key": k}, q_num_heads=4, kv_num_heads=4)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_state, want_state, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", GROUPED_VALUE_CASES[:1], ids=_case_id)
def test_grouped_value_prefill_steps_padding_and_gradients(case):
    rule, (h_q, h_kv), per_key = case
    x = _inputs(rule, h_q, h_kv, per_key, T=19, dtype=torch.float64, seed=5, key_scale=2.0)
    x["past_state"] = x["past_state"].double()
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule, qk_l2_norm=True)
    whole, whole_state = linear_recurrence(**x, **attrs)
    per_step = {n: t for n, t in x.items() if n != "past_state"}
    outs, state = [], x["past_state"]
    for lo, hi in [(0, 16), (16, 17), (17, 18), (18, 19)]:
        o, state = linear_recurrence(**{n: t[:, lo:hi] for n, t in per_step.items()}, past_state=state, **attrs)
        outs.append(o)
    torch.testing.assert_close(torch.cat(outs, dim=1), whole, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(state, whole_state, rtol=1e-10, atol=1e-10)
    pad = torch.zeros(B, 19, dtype=torch.int32)
    pad[1, 11:] = 1
    padded, padded_state = linear_recurrence(**x, **attrs, pad_mask=pad)
    alone, alone_state = linear_recurrence(
        **{n: t[1:, :11] if n != "past_state" else t[1:] for n, t in x.items()}, **attrs
    )
    torch.testing.assert_close(padded[1:, :11], alone, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(padded_state[1:], alone_state, rtol=1e-10, atol=1e-10)
    _assert_gradients_equal_the_naive_loop(x, attrs, T=19)


@pytest.mark.parametrize("rule", UPDATE_RULES)
def test_opcheck(rule):
    """Schema, fake (meta) implementation, autograd registration and dispatch, as torch.library checks them."""
    x = _inputs(rule, 4, 2, rule == "gated", T=5)
    mask = torch.zeros(B, 5, dtype=torch.int32)
    mask[1, 3:] = 1
    args = (x["query"], x["key"], x["value"], x["past_state"], x.get("decay"), x.get("beta"), mask)
    torch.library.opcheck(torch.ops.rnnx.linear_recurrence.default, (*args, 4, 2, rule, 0.0, 0))
    if rule == "gated_delta":  # grouped value, q and k normalised in the op
        y = _inputs(rule, 2, 4, False, T=5, key_scale=2.0)
        grouped = (y["query"], y["key"], y["value"], y["past_state"], y["decay"], y["beta"], mask)
        torch.library.opcheck(torch.ops.rnnx.linear_recurrence.default, (*grouped, 2, 4, rule, 0.0, 1))


def test_errors_name_the_tensor():
    x = _inputs("gated", 2, 2, False, T=4)
    with pytest.raises(ValueError, match="^decay: update_rule 'linear' takes no decay"):
        linear_recurrence(**x, q_num_heads=2, update_rule="linear")
    with pytest.raises(ValueError, match=r"^past_state: expected shape \(2, 2, 8, 6\), got \(2, 2, 8, 5\)"):
        linear_recurrence(**{**x, "past_state": x["past_state"][..., :5]}, q_num_heads=2, update_rule="gated")
    with pytest.raises(TypeError, match="^key: expected query's dtype"):
        linear_recurrence(**{**x, "key": x["key"].double()}, q_num_heads=2, update_rule="gated")
    with pytest.raises(ValueError, match="^q_num_heads / kv_num_heads"):
        linear_recurrence(**x, q_num_heads=2, kv_num_heads=3, update_rule="gated")
    grouped = {"query": x["query"], "key": x["key"].repeat(1, 1, 2), "value": x["value"].repeat(1, 1, 2)}
    with pytest.raises(ValueError, match=r"^key: expected shape \(2, 4, 16\), got \(2, 4, 32\)"):
        linear_recurrence(**grouped, q_num_heads=2, kv_num_heads=4, update_rule="linear")


# ----- causal convolution with state -----


def _conv(K: int, T: int, dtype=torch.float32, seed: int = 0, C: int = 6) -> dict:
    g = torch.Generator().manual_seed(seed)
    x = {
        "input": torch.randn(B, C, T, generator=g).to(dtype),
        "weight": torch.randn(C, 1, K, generator=g).to(dtype),
        "bias": torch.randn(C, generator=g).to(dtype),
        "past_state": torch.randn(B, C, K - 1, generator=g),
    }
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("activation", ["none", "silu"])
@pytest.mark.parametrize("K", [1, 4])
def test_conv_equals_the_naive_twin(K, activation, dtype):
    x = _conv(K, T=9, dtype=dtype)
    pad = torch.zeros(B, 9, dtype=torch.bool)
    pad[0, 6:] = True
    pad[1, 3] = True
    for mask in (None, pad):
        out, state = causal_conv_with_state(**x, activation=activation, pad_mask=mask)
        ref, ref_state = causal_conv_with_state_naive(**x, activation=activation, pad_mask=mask)
        assert out.dtype == dtype and _rel_err(out, ref) < REL_TOL[dtype]
        assert state.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
        assert _rel_err(state, ref_state) < STATE_REL_TOL[dtype] if K > 1 else state.shape == (B, 6, 0)


def test_conv_steps_and_gradients():
    x = _conv(4, T=8, dtype=torch.float64, seed=5)
    x["past_state"] = x["past_state"].double()
    whole, whole_state = causal_conv_with_state(**x, activation="silu")
    state, outs = x["past_state"], []
    for lo, hi in [(0, 5), (5, 6), (6, 7), (7, 8)]:
        o, state = causal_conv_with_state(x["input"][:, :, lo:hi], x["weight"], x["bias"], state, activation="silu")
        outs.append(o)
    torch.testing.assert_close(torch.cat(outs, dim=2), whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(state, whole_state, rtol=0, atol=0)
    pad = torch.zeros(B, 8, dtype=torch.bool)
    pad[1, 5:] = True
    names = list(x)

    def fn(*tensors):
        return causal_conv_with_state(**dict(zip(names, tensors)), activation="silu", pad_mask=pad)

    assert torch.autograd.gradcheck(fn, [t.clone().requires_grad_() for t in x.values()])
    torch.library.opcheck(
        torch.ops.rnnx.causal_conv_with_state.default,
        (x["input"], x["weight"], x["bias"], x["past_state"], pad, "silu"),
    )


def test_conv_errors_name_the_tensor():
    x = _conv(4, T=3)
    with pytest.raises(ValueError, match=r"^past_state: expected shape \(2, 6, 3\), got \(2, 6, 2\)"):
        causal_conv_with_state(**{**x, "past_state": x["past_state"][..., :2]})
    with pytest.raises(ValueError, match="^activation: expected one of"):
        causal_conv_with_state(**x, activation="relu")
