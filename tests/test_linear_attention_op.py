"""Tests of the ``rnnx::causal_linear_attention`` op: chunked path vs the two naive references.

The op takes heads packed, (B, L, H*E) (or time-major (L, B, H*E)), and a pad mask; most cases are written
with the heads apart, (B, H, L, E), and moved to the op's layout by :func:`op_apart`, which the public
function's 4-D form does too.

Tolerances: fp64 results agree with the fp64 references to 1e-10 (relative to the largest magnitude
of the reference); fp32 results agree with the fp64 reference of the same inputs to 1e-5; fp16 / bf16
outputs agree to a few units of their final rounding (2e-3 / 1.6e-2), their fp32 states to 1e-5.
"""

from __future__ import annotations

from typing import Optional

import pytest
import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from rnnx.models.ops.causal_linear_attention import causal_linear_attention, causal_linear_attention_op
from rnnx.models.ops.causal_linear_attention.chunked import chunked_backward_heads, chunked_forward_heads
from rnnx.models.ops.causal_linear_attention.naive import (
    causal_linear_attention_packed,
    causal_linear_attention_quadratic,
    causal_linear_attention_recurrent,
    heads_apart,
    heads_packed,
)
from rnnx.models.state import LinearAttentionState
from rnnx.runtime.contract.ops import CAUSAL_LINEAR_ATTENTION

EPS = float(CAUSAL_LINEAR_ATTENTION.attributes["eps"])
F64_TOL = 1e-10
F32_TOL = 1e-5


def assert_rel_close(actual: Tensor, expected: Tensor, tol: float) -> None:
    """max |actual - expected| <= tol * max(1, max |expected|), compared in fp64."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    a, e = actual.double(), expected.double()
    scale = max(1.0, e.abs().max().item()) if e.numel() else 1.0
    err = (a - e).abs().max().item() if e.numel() else 0.0
    assert err <= tol * scale, f"max abs error {err:.3g} > {tol:.1g} * {scale:.3g}"


def make_inputs(
    B: int, H: int, L: int, E: int, M: int, dtype: torch.dtype, with_state: bool, seed: int = 0
) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor], Optional[Tensor]]:
    """Random q, k, v and, when asked, a realistic state: the one left by a random 5-token prefix."""
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, H, L, E, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(B, H, L, M, generator=g, dtype=torch.float64)
    S0 = z0 = None
    if with_state:
        pk = torch.randn(B, H, 5, E, generator=g, dtype=torch.float64)
        pv = torch.randn(B, H, 5, M, generator=g, dtype=torch.float64)
        _, S0, z0 = causal_linear_attention_quadratic(pk, pk, pv)
        state_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        S0, z0 = S0.to(state_dtype), z0.to(state_dtype)
    return q.to(dtype), k.to(dtype), v.to(dtype), S0, z0


def reference(q, k, v, S0, z0, eps=EPS):
    """The quadratic reference computed in fp64 on the (already rounded) inputs."""
    up = lambda t: None if t is None else t.double()  # noqa: E731
    return causal_linear_attention_quadratic(up(q), up(k), up(v), up(S0), up(z0), eps)


def op_apart(q, k, v, S0=None, z0=None, mask_pad=None, eps=EPS):
    """The op on (B, H, L, E) inputs: packed, called, and out moved back to (B, H, L, M)."""
    H = q.shape[1]
    out, S, z = causal_linear_attention_op(
        heads_packed(q), heads_packed(k), heads_packed(v), S0, z0, mask_pad, eps, H, 0
    )
    return heads_apart(out, H), S, z


CASES = [(1, 4), (3, 4), (4, 4), (11, 4), (16, 4), (37, 8), (64, 64), (130, 64)]


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("L", sorted({L for L, _ in CASES}))
def test_references_agree(L: int, with_state: bool) -> None:
    q, k, v, S0, z0 = make_inputs(2, 3, L, 5, 6, torch.float64, with_state)
    quadratic = causal_linear_attention_quadratic(q, k, v, S0, z0)
    recurrent = causal_linear_attention_recurrent(q, k, v, S0, z0)
    for a, b in zip(quadratic, recurrent):
        assert_rel_close(a, b, F64_TOL)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64_TOL), (torch.float32, F32_TOL)])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("L,chunk", CASES)
def test_chunked_forward_matches_references(L: int, chunk: int, with_state: bool, dtype, tol: float) -> None:
    q, k, v, S0, z0 = make_inputs(2, 3, L, 5, 6, dtype, with_state)
    out, S, z = chunked_forward_heads(q, k, v, S0, z0, None, EPS, chunk_size=chunk)
    assert out.dtype == dtype and S.dtype == dtype and z.dtype == dtype
    recurrent = causal_linear_attention_recurrent(q, k, v, S0, z0)
    for got, quad, rec in zip((out, S, z), reference(q, k, v, S0, z0), recurrent):
        assert_rel_close(got, quad, tol)
        assert_rel_close(got, rec, tol)


def test_empty_sequence_returns_a_copy_of_the_state() -> None:
    q, k, v, S0, z0 = make_inputs(2, 3, 0, 5, 6, torch.float32, True)
    out, (S, z) = causal_linear_attention(q, k, v, (S0, z0))
    assert out.shape == (2, 3, 0, 6)
    assert torch.equal(S, S0) and torch.equal(z, z0)
    assert S.data_ptr() != S0.data_ptr() and z.data_ptr() != z0.data_ptr()
    out, (S, z) = causal_linear_attention(q, k, v)
    assert not S.any() and not z.any()


def test_eps_is_used() -> None:
    q, k, v, S0, z0 = make_inputs(1, 2, 9, 4, 3, torch.float64, True)
    out, _ = causal_linear_attention(q, k, v, (S0, z0), eps=0.5)
    assert_rel_close(out, reference(q, k, v, S0, z0, eps=0.5)[0], F64_TOL)
    assert (out - causal_linear_attention(q, k, v, (S0, z0))[0]).abs().max() > 1e-3


def test_state_forms_are_equivalent() -> None:
    q, k, v, S0, z0 = make_inputs(2, 2, 13, 4, 5, torch.float32, True)
    out_t, (S_t, z_t) = causal_linear_attention(q, k, v, (S0, z0))
    out_d, (S_d, z_d) = causal_linear_attention(q, k, v, LinearAttentionState(S=S0, z=z0))
    assert torch.equal(out_t, out_d) and torch.equal(S_t, S_d) and torch.equal(z_t, z_d)
    out_n, (S_n, z_n) = causal_linear_attention(q, k, v)
    out_0, (S_0, z_0) = causal_linear_attention(q, k, v, (torch.zeros_like(S0), torch.zeros_like(z0)))
    assert torch.equal(out_n, out_0) and torch.equal(S_n, S_0) and torch.equal(z_n, z_0)
    assert not torch.equal(out_t, out_n)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, F32_TOL)])
def test_prefill_then_steps_equals_one_pass(dtype, tol: float) -> None:
    n, m = 70, 9
    q, k, v, S0, z0 = make_inputs(2, 3, n + m, 8, 4, dtype, True)
    full, (S_full, z_full) = causal_linear_attention(q, k, v, (S0, z0))
    out, state = causal_linear_attention(q[:, :, :n], k[:, :, :n], v[:, :, :n], (S0, z0))
    outs = [out]
    for t in range(n, n + m):
        o, state = causal_linear_attention(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state)
        outs.append(o)
    assert_rel_close(torch.cat(outs, dim=2), full, tol)
    assert_rel_close(state[0], S_full, tol)
    assert_rel_close(state[1], z_full, tol)
    # step-only from zeros equals the one pass without a state
    full0, _ = causal_linear_attention(q[:, :, :6], k[:, :, :6], v[:, :, :6])
    state, steps = None, []
    for t in range(6):
        o, state = causal_linear_attention(q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], state)
        steps.append(o)
    assert_rel_close(torch.cat(steps, dim=2), full0, tol)


def _leaf(*ts: Optional[Tensor]) -> list[Optional[Tensor]]:
    return [None if t is None else t.detach().clone().requires_grad_() for t in ts]


@pytest.mark.parametrize("L", [1, 70])
def test_gradcheck_with_state(L: int) -> None:
    # L = 70 crosses the default chunk boundary (64) with a partial second chunk.
    args = _leaf(*make_inputs(1, 2, L, 3, 2, torch.float64, True))
    assert torch.autograd.gradcheck(lambda *a: op_apart(*a), args, fast_mode=True)


def test_gradcheck_without_state() -> None:
    q, k, v, _, _ = _leaf(*make_inputs(1, 2, 6, 3, 2, torch.float64, False))
    assert torch.autograd.gradcheck(lambda *a: op_apart(*a), (q, k, v), fast_mode=True)


@pytest.mark.parametrize("grads_of_state", [True, False])
@pytest.mark.parametrize("L,chunk", [(1, 4), (11, 1), (11, 4), (23, 7), (24, 8)])
def test_chunked_backward_matches_autograd_of_quadratic(L: int, chunk: int, grads_of_state: bool) -> None:
    q, k, v, S0, z0 = make_inputs(2, 2, L, 4, 3, torch.float64, True, seed=1)
    g = torch.Generator().manual_seed(2)
    dout = torch.randn(2, 2, L, 3, generator=g, dtype=torch.float64)
    dS = torch.randn(2, 2, 4, 3, generator=g, dtype=torch.float64) if grads_of_state else None
    dz = torch.randn(2, 2, 4, generator=g, dtype=torch.float64) if grads_of_state else None
    leaves = _leaf(q, k, v, S0, z0)
    out, S, z = causal_linear_attention_quadratic(*leaves)
    loss = (out * dout).sum() + ((S * dS).sum() + (z * dz).sum() if grads_of_state else 0.0)
    expected = torch.autograd.grad(loss, leaves)
    got = chunked_backward_heads(q, k, v, S0, z0, None, EPS, dout, dS, dz, chunk_size=chunk)
    for name, a, e in zip(("q", "k", "v", "S0", "z0"), got, expected):
        assert a.dtype == e.dtype, name
        assert_rel_close(a, e, F64_TOL)


@pytest.mark.parametrize(
    "L,with_state,dtype", [(70, True, torch.float32), (1, True, torch.float32), (5, False, torch.bfloat16)]
)
def test_opcheck(L: int, with_state: bool, dtype) -> None:
    q, k, v, S0, z0 = make_inputs(1, 2, L, 3, 4, dtype, with_state)
    mask = torch.arange(L) % 3 == 1
    packed = _leaf(heads_packed(q), heads_packed(k), heads_packed(v))
    torch.library.opcheck(causal_linear_attention_op, (*packed, *_leaf(S0, z0), mask[None], EPS, 2, 0))


@pytest.mark.parametrize("dtype,out_tol,grad_tol", [(torch.float16, 2e-3, 4e-3), (torch.bfloat16, 1.6e-2, 3e-2)])
def test_half_inputs_compute_in_fp32(dtype, out_tol: float, grad_tol: float) -> None:
    q, k, v, S0, z0 = make_inputs(2, 2, 75, 8, 8, dtype, True)
    ql, kl, vl = _leaf(q, k, v)
    out, (S, z) = causal_linear_attention(ql, kl, vl, (S0, z0))
    assert out.dtype == dtype and S.dtype == torch.float32 and z.dtype == torch.float32
    ref_out, ref_S, ref_z = reference(q, k, v, S0, z0)
    assert_rel_close(out, ref_out, out_tol)
    assert_rel_close(S, ref_S, F32_TOL)
    assert_rel_close(z, ref_z, F32_TOL)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    got = torch.autograd.grad(out, (ql, kl, vl), dout)
    leaves = _leaf(q.double(), k.double(), v.double())
    ref_out = causal_linear_attention_quadratic(*leaves, S0.double(), z0.double())[0]
    expected = torch.autograd.grad(ref_out, leaves, dout.double())
    for a, e in zip(got, expected):
        assert a.dtype == dtype
        assert_rel_close(a, e, grad_tol)


class _LargestTensor(TorchDispatchMode):
    """Records the largest numel among the outputs of every aten op run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops += 1
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_backward_saves_and_builds_no_per_step_state() -> None:
    B, H, L, E, M = 1, 2, 512, 8, 8
    limit = B * H * L * E * M // 2
    q, k, v, S0, z0 = _leaf(*make_inputs(B, H, L, E, M, torch.float32, True))
    saved: list[int] = []

    def pack(t: Tensor) -> Tensor:
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out, (S, z) = causal_linear_attention(q, k, v, (S0, z0))
    assert sorted(saved) == sorted(t.numel() for t in (q, k, v, S0, z0))
    dout = torch.randn_like(out)
    with _LargestTensor() as mode:
        grads = torch.autograd.grad((out, S, z), (q, k, v, S0, z0), (dout, torch.ones_like(S), torch.ones_like(z)))
    assert mode.ops > 0 and mode.largest >= B * H * L * max(E, M)  # the mode saw the (L, E) gradients
    assert mode.largest < limit, f"backward built a tensor of {mode.largest} elements (limit {limit})"
    # the gradients themselves are right: compare with autograd through the quadratic form
    leaves = _leaf(q, k, v, S0, z0)
    ref = causal_linear_attention_quadratic(*leaves)
    expected = torch.autograd.grad(ref, leaves, (dout, torch.ones_like(S), torch.ones_like(z)))
    for a, e in zip(grads, expected):
        assert_rel_close(a, e, 1e-4)


def _ok(dtype=torch.float32):
    return make_inputs(2, 3, 5, 4, 6, dtype, True)


def _bad(name: str) -> dict:
    """Keyword arguments for ``causal_linear_attention`` (packed: q (2, 5, 12), v (2, 5, 18), 3 heads) with one
    thing wrong, named by ``name``."""
    q, k, v, S, z = _ok()
    q, k, v = heads_packed(q), heads_packed(k), heads_packed(v)
    args = {"q": q, "k": k, "v": v, "state": (S, z), "num_heads": 3}
    changes = {
        "q_2d": {"q": q[0]},
        "k_width": {"k": k[..., :9]},
        "v_length": {"v": v[:, :4]},
        "k_dtype": {"k": k.double()},
        "int_inputs": {"q": q.long(), "k": k.long(), "v": v.long()},
        "S0_dtype": {"state": (S.half(), z)},
        "S0_shape": {"state": (S[..., :5], z)},
        "z0_shape": {"state": (S, z[0])},
        "z0_missing": {"state": (S, None)},
        "state_triple": {"state": (S, z, z)},
        "state_dict": {"state": {"S": S}},
        "heads_missing": {"num_heads": None},
        "heads_not_dividing": {"num_heads": 5},
        "mask_shape": {"pad_mask": torch.zeros(5, 2, dtype=torch.bool)},
        "mask_time_major": {"pad_mask": torch.zeros(2, 5, dtype=torch.bool), "time_major": True},
    }
    return {**args, **changes[name]}


@pytest.mark.parametrize(
    "name,exc,pattern",
    [
        ("q_2d", ValueError, r"q must be 3-D \(B, L, H\*E\), got shape \(5, 12\)"),
        ("k_width", ValueError, r"k's last axis 9 is not a multiple|k must have shape \(2, 5, 12\)"),
        ("v_length", ValueError, r"v must have shape \(2, 5, 18\).*got \(2, 4, 18\)"),
        ("k_dtype", TypeError, r"k must have q's dtype torch.float32, got torch.float64"),
        ("int_inputs", TypeError, r"q must be one of"),
        ("S0_dtype", TypeError, r"S0 must have the state dtype torch.float32.*got torch.float16"),
        ("S0_shape", ValueError, r"S0 must have shape \(2, 3, 4, 6\), got \(2, 3, 4, 5\)"),
        ("z0_shape", ValueError, r"z0 must have shape \(2, 3, 4\), got \(3, 4\)"),
        ("z0_missing", TypeError, r"needs both S and z"),
        ("state_triple", TypeError, r"length 3"),
        ("state_dict", TypeError, r"got dict"),
        ("heads_missing", TypeError, r"packed \(B, L, H\*E\) inputs need num_heads"),
        ("heads_not_dividing", ValueError, r"q's last axis 12 is not a multiple of num_heads=5"),
        ("mask_shape", ValueError, r"mask_pad must have shape \(2, 5\) \(B, L\), got \(5, 2\)"),
        ("mask_time_major", ValueError, r"S0 must have shape \(5, 3, 4, 6\), got \(2, 3, 4, 6\)"),
    ],
)
def test_bad_inputs_raise_clear_errors(name: str, exc, pattern: str) -> None:
    with pytest.raises(exc, match=pattern):
        causal_linear_attention(**_bad(name))


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("L", [1, 9, 70])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, F64_TOL), (torch.float32, F32_TOL)])
def test_packed_layout_and_pad_mask_match_the_naive_recurrence(L: int, time_major: bool, dtype, tol: float) -> None:
    """The op's own layout, with pads anywhere (first, middle, last, a whole row): out and state equal the naive
    recurrence, which carries S and z over a pad step; pads leave the state of a fully padded row unchanged."""
    B, H, E, M = 3, 2, 4, 5
    q, k, v, S0, z0 = make_inputs(B, H, L, E, M, dtype, True, seed=3)
    pad = torch.rand(B, L, generator=torch.Generator().manual_seed(4)) < 0.4
    pad[0, 0] = pad[1, -1] = True
    pad[2] = True
    lay = (lambda x: heads_packed(x, time_major)), (lambda m: m.t().contiguous() if time_major else m)
    qp, kp, vp = lay[0](q), lay[0](k), lay[0](v)
    out, (S, z) = causal_linear_attention(
        qp, kp, vp, (S0, z0), num_heads=H, pad_mask=lay[1](pad), time_major=time_major
    )
    up = lambda t: t.double()  # noqa: E731
    ref_out, ref_S, ref_z = causal_linear_attention_packed(
        up(qp), up(kp), up(vp), H, up(S0), up(z0), lay[1](pad), EPS, time_major
    )
    assert out.shape == qp.shape[:2] + (H * M,)
    assert_rel_close(out, ref_out, tol)
    assert_rel_close(S, ref_S, tol)
    assert_rel_close(z, ref_z, tol)
    assert_rel_close(S[2], S0[2], 0.0)  # the padded row kept its state exactly
    quad_out, quad_S, _ = causal_linear_attention_quadratic(up(q), up(k), up(v), up(S0), up(z0), EPS, pad)
    assert_rel_close(heads_apart(out, H, time_major), quad_out, tol)
    assert_rel_close(S, quad_S, tol)


def test_pad_mask_gradients_match_the_naive_recurrence() -> None:
    """Autograd of the op (chunked backward) with pads and time-major layout equals autograd of the naive form."""
    B, H, L, E, M = 2, 2, 70, 3, 4
    q, k, v, S0, z0 = make_inputs(B, H, L, E, M, torch.float64, True, seed=5)
    pad = (torch.rand(L, B, generator=torch.Generator().manual_seed(6)) < 0.3).to(torch.uint8)
    leaves = _leaf(heads_packed(q, True), heads_packed(k, True), heads_packed(v, True), S0, z0)
    g = torch.Generator().manual_seed(7)
    dout = torch.randn(L, B, H * M, generator=g, dtype=torch.float64)

    def loss(out, S, z):
        return (out * dout).sum() + S.square().sum() + z.sum()

    got = torch.autograd.grad(loss(*causal_linear_attention_op(*leaves, pad, EPS, H, 1)), leaves)
    expected = torch.autograd.grad(
        loss(*causal_linear_attention_packed(*leaves[:3], H, *leaves[3:], pad, EPS, True)), leaves
    )
    for a, e in zip(got, expected):
        assert_rel_close(a, e, F64_TOL)


def test_fp16_state_for_fp16_inputs_is_rejected() -> None:
    q, k, v, S0, z0 = _ok(torch.float16)
    expected = r"S0 must have the state dtype torch.float32 \(for q of dtype torch.float16\)"
    with pytest.raises(TypeError, match=expected):
        causal_linear_attention(q, k, v, (S0.half(), z0))
