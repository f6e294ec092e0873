"""rnnx::sru_scan: the C++ CPU kernel and the torch loop against the naive reference loop.

Tolerances (max abs difference against ``sru_scan_naive`` on the same inputs):
fp64 1e-12, fp32 1e-5 (both compute in the input precision); fp16 / bf16 inputs are computed in
fp32 by both sides, so h may differ by one rounding of its dtype (rtol = dtype eps) and the
fp32 state c_last by 1e-5.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import pytest
import torch

from rnnx.models.ops.dtypes import state_dtype
from rnnx.models.ops.sru_scan import (
    cpu_kernel,
    cpu_kernel_in_use,
    op,
    sru_scan,
    sru_scan_naive,
    sru_scan_reference_path,
)
from rnnx.runtime.contract import ops as spec

ATOL = {torch.float64: 1e-12, torch.float32: 1e-5}
PATHS = ["kernel", "torch_loop"]
# d = 37 spans a full and a partial block of the kernel's 32-column blocks.
GRID = list(itertools.product([1, 2], [3, 4], [False, True], [False, True]))


def make_inputs(L=9, B=3, d=37, D=1, k=3, dtype=torch.float64, mask=True, seed=0):
    """Random inputs in the spec layouts; row 1 is right-padded by 3 steps, row 2 by 1."""
    g = torch.Generator().manual_seed(seed)
    state = state_dtype(dtype)

    def rnd(*shape, scale=1.0, dt=dtype):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dt)

    U = rnd(L, B, D * d * k)
    x = rnd(L, B, D * d)
    weight_c = rnd(2 * D * d, scale=0.5, dt=state)
    bias = rnd(2 * D * d, scale=0.5, dt=state)
    c0 = rnd(B, D * d, dt=state)
    mask_pad = None
    if mask:
        mask_pad = torch.zeros(L, B, dtype=torch.bool)
        if B > 1:
            mask_pad[max(L - 3, 0) :, 1] = True
        if B > 2:
            mask_pad[L - 1 :, 2] = True
    return U, x, weight_c, bias, c0, mask_pad


def attrs(d=37, D=1, k=3, use_tanh=False, skip=True, scale_x=0.7):
    return dict(hidden_size=d, num_directions=D, num_matrices=k, has_skip_term=skip, use_tanh=use_tanh, scale_x=scale_x)


def run(path, *args, **kwargs):
    with sru_scan_reference_path(path == "torch_loop"):
        return sru_scan(*args, **kwargs)


def max_err(a, b):
    return (a.double() - b.double()).abs().max().item() if a.numel() else 0.0


def test_cpu_kernel_builds():
    assert cpu_kernel_in_use(), f"C++ kernel did not build: {cpu_kernel.EXTENSION.error}"


def test_jit_builds_are_named_by_their_inputs(tmp_path):
    """Two checkouts or environments never share (and rebuild) one torch extension build: the name hashes
    the sources, the headers beside them, their paths and the flags; the same inputs, the same name."""
    from rnnx.models.ops import jit
    from rnnx.models.ops.sru_scan import cpu_kernel

    def copy_of(name: str):
        root = tmp_path / name
        (root / "csrc").mkdir(parents=True)
        (root / "include").mkdir()
        source = root / "csrc" / "kernel.cpp"
        source.write_text('#include "kernel.h"\n')
        (root / "csrc" / "kernel.h").write_text("int f();\n")
        (root / "include" / "shared.h").write_text("int g();\n")
        return source, root / "include"

    a, a_inc = copy_of("a")
    b, b_inc = copy_of("b")
    name = jit.extension_name("k", [a], [a_inc], ["-O3"])
    assert name == jit.extension_name("k", [a], [a_inc], ["-O3"]) and name.startswith("k_")
    assert jit.extension_name("k", [b], [b_inc], ["-O3"]) != name  # another checkout: another build
    assert jit.extension_name("k", [a], [a_inc], ["-O2"]) != name
    (a.parent / "kernel.h").write_text("int f(int);\n")  # a header torch's own check would miss
    changed = jit.extension_name("k", [a], [a_inc], ["-O3"])
    assert changed != name
    (a_inc / "shared.h").write_text("int g(int);\n")
    assert jit.extension_name("k", [a], [a_inc], ["-O3"]) != changed
    built = cpu_kernel.load()
    assert built is not None and Path(built.__file__).parent.name.startswith(cpu_kernel.EXTENSION_BASE)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("D,k,use_tanh,skip", GRID)
def test_forward_matches_naive(path, dtype, D, k, use_tanh, skip):
    inputs = make_inputs(D=D, k=k, dtype=dtype)
    kw = attrs(D=D, k=k, use_tanh=use_tanh, skip=skip)
    h, c = run(path, *inputs, **kw)
    h_ref, c_ref = sru_scan_naive(*inputs, **kw)
    assert h.dtype == dtype and c.dtype == dtype
    assert h.shape == h_ref.shape and c.shape == c_ref.shape
    assert max_err(h, h_ref) <= ATOL[dtype]
    assert max_err(c, c_ref) <= ATOL[dtype]
    # pad steps give h = 0 (row 1 is padded over its last 3 steps).
    assert torch.all(h[-3:, 1] == 0)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("D,k,use_tanh,skip", GRID)
def test_gradients_match_naive(path, D, k, use_tanh, skip):
    inputs = make_inputs(L=6, d=37, D=D, k=k)
    kw = attrs(D=D, k=k, use_tanh=use_tanh, skip=skip)
    gh = torch.randn(6, 3, D * 37, dtype=torch.float64)
    gc = torch.randn(3, D * 37, dtype=torch.float64)

    def grads(fn):
        leaves = [t.clone().requires_grad_() for t in inputs[:5]]
        h, c = fn(*leaves, inputs[5], **kw)
        return torch.autograd.grad((h * gh).sum() + (c * gc).sum(), leaves, allow_unused=True)

    got = grads(lambda *a, **k_: run(path, *a, **k_))
    ref = grads(sru_scan_naive)
    for name, g, r in zip(["U", "x", "weight_c", "bias", "c0"], got, ref):
        if r is None:  # x unused by this variant
            assert g is None, name
            continue
        assert g is not None and max_err(g, r) <= 1e-12, name


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D,k", [(1, 3), (2, 4)])
def test_half_inputs_keep_fp32_state(path, dtype, D, k):
    inputs = make_inputs(D=D, k=k, dtype=dtype)
    kw = attrs(D=D, k=k, use_tanh=True)
    h, c = run(path, *inputs, **kw)
    h_ref, c_ref = sru_scan_naive(*inputs, **kw)
    assert h.dtype == dtype and c.dtype == torch.float32
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(h.float(), h_ref.float(), rtol=eps, atol=1e-5)
    assert max_err(c, c_ref) <= 1e-5

    leaves = [t.clone().requires_grad_() for t in inputs[:5]]
    h, c = run(path, *leaves, inputs[5], **kw)
    (h.float().sum() + c.sum()).backward()
    leaves_ref = [t.clone().requires_grad_() for t in inputs[:5]]
    h, c = sru_scan_naive(*leaves_ref, inputs[5], **kw)
    (h.float().sum() + c.sum()).backward()
    for got, ref in zip(leaves, leaves_ref):
        if ref.grad is None:
            assert got.grad is None
            continue
        assert got.grad.dtype == got.dtype
        torch.testing.assert_close(got.grad.float(), ref.grad.float(), rtol=4 * eps, atol=4 * eps)


GRADCHECK_CASES = [
    dict(D=1, k=3, use_tanh=True, skip=True, mask=True),
    dict(D=2, k=3, use_tanh=False, skip=True, mask=True),
    dict(D=2, k=4, use_tanh=True, skip=True, mask=False),
    dict(D=1, k=4, use_tanh=False, skip=False, mask=True),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", GRADCHECK_CASES, ids=str)
def test_gradcheck(path, case):
    case = dict(case)
    mask = case.pop("mask")
    d = 3
    U, x, w, b, c0, m = make_inputs(L=4, B=3, d=d, D=case["D"], k=case["k"], mask=mask)
    kw = attrs(d=d, **case)
    x = x if case["k"] == 3 and case["skip"] else None
    leaves = [t.requires_grad_() for t in (U, x, w, b, c0) if t is not None]

    def fn(*ts):
        it = iter(ts)
        args = [next(it) if t is not None else None for t in (U, x, w, b, c0)]
        return run(path, *args, m, **kw)

    assert torch.autograd.gradcheck(fn, leaves, eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("D,k,mask,use_x", [(1, 3, True, True), (2, 4, False, False)])
def test_opcheck(D, k, mask, use_x):
    U, x, w, b, c0, m = make_inputs(L=5, B=2, d=4, D=D, k=k, mask=mask)
    args = (
        U.requires_grad_(),
        x.requires_grad_() if use_x else None,
        w.requires_grad_(),
        b.requires_grad_(),
        c0.requires_grad_(),
        m,
        4,
        D,
        k,
        True,
        True,
        0.5,
    )
    op_packet = getattr(getattr(torch.ops, spec.TORCH_NAMESPACE), spec.SRU_SCAN.torch_name)
    torch.library.opcheck(op_packet.default, args)

    grads = (torch.randn(5, 2, D * 4, dtype=torch.float64), torch.randn(2, D * 4, dtype=torch.float64))
    plain = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    namespace, name = op.BACKWARD_QUALNAME.split("::")
    backward_packet = getattr(getattr(torch.ops, namespace), name)
    torch.library.opcheck(backward_packet.default, grads + plain)


@pytest.mark.parametrize("path", PATHS)
def test_chunked_equals_one_pass(path):
    U, x, w, b, c0, _ = make_inputs(L=10, B=3, d=37, dtype=torch.float64, mask=False)
    kw = attrs(use_tanh=True)
    h_all, c_all = run(path, U, x, w, b, c0, **kw)
    h1, c1 = run(path, U[:4], x[:4], w, b, c0, **kw)
    h2, c2 = run(path, U[4:], x[4:], w, b, c1, **kw)
    assert max_err(torch.cat([h1, h2]), h_all) <= 1e-12
    assert max_err(c2, c_all) <= 1e-12
    # token by token (decode) as well
    c = c0
    for t in range(10):
        h_t, c = run(path, U[t : t + 1], x[t : t + 1], w, b, c, **kw)
        assert max_err(h_t[0], h_all[t]) <= 1e-12
    assert max_err(c, c_all) <= 1e-12


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("L", [1, 0])
def test_short_sequences(path, L):
    inputs = make_inputs(L=L, B=2, d=5, D=2, k=3, mask=False)
    kw = attrs(d=5, D=2)
    h, c = run(path, *inputs, **kw)
    h_ref, c_ref = sru_scan_naive(*inputs, **kw)
    assert h.shape == (L, 2, 10) and c.shape == (2, 10)
    assert max_err(h, h_ref) <= 1e-12 and max_err(c, c_ref) <= 1e-12
    if L == 0:
        assert torch.equal(c, inputs[4]) and c.data_ptr() != inputs[4].data_ptr()


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.uint8, torch.float32])
def test_mask_dtypes_and_noncontiguous_inputs(mask_dtype):
    U, x, w, b, c0, m = make_inputs(L=7, B=3, d=37, D=2, k=3, dtype=torch.float32)
    kw = attrs(D=2)
    h_ref, c_ref = sru_scan_naive(U, x, w, b, c0, m, **kw)
    # batch-major storage, viewed time-major: non-contiguous U and x
    U_nc = U.transpose(0, 1).contiguous().transpose(0, 1)
    x_nc = x.transpose(0, 1).contiguous().transpose(0, 1)
    assert not U_nc.is_contiguous()
    h, c = sru_scan(U_nc, x_nc, w, b, c0, m.to(mask_dtype), **kw)
    assert max_err(h, h_ref) <= 1e-5 and max_err(c, c_ref) <= 1e-5


def test_forward_without_grad_stores_no_state():
    """Inference mode works and gives the same numbers (the forward keeps no per-step state)."""
    inputs = make_inputs(dtype=torch.float32)
    with torch.inference_mode():
        h, c = sru_scan(*inputs, **attrs())
    h_ref, c_ref = sru_scan_naive(*inputs, **attrs())
    assert max_err(h, h_ref) <= 1e-5 and max_err(c, c_ref) <= 1e-5


def test_build_failure_warns_once_and_falls_back(monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    def broken_build(*args, **kwargs):
        raise RuntimeError("no C++ compiler found (test)")

    monkeypatch.setattr(cpu_kernel.EXTENSION, "module", None)
    monkeypatch.setattr(cpu_kernel.EXTENSION, "error", None)
    monkeypatch.setattr(cpp_extension, "load", broken_build)
    inputs = make_inputs(dtype=torch.float64)
    with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler found"):
        h, c = sru_scan(*inputs, **attrs())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h2, _ = sru_scan(*inputs, **attrs())
    assert not cpu_kernel_in_use()
    h_ref, c_ref = sru_scan_naive(*inputs, **attrs())
    assert max_err(h, h_ref) <= 1e-12 and max_err(c, c_ref) <= 1e-12 and torch.equal(h, h2)


def test_env_var_names_reference_path():
    assert op.REFERENCE_ENV == "RNNX_SRU_SCAN_TORCH_LOOP"
    with sru_scan_reference_path():
        assert not cpu_kernel_in_use()
    assert cpu_kernel_in_use()


def _bad(**changes):
    U, x, w, b, c0, m = make_inputs(L=5, B=3, d=5, D=2, k=4)
    args = dict(U=U, x=x, weight_c=w, bias=b, c0=c0, mask_pad=m)
    kw = attrs(d=5, D=2, k=4)
    for key, value in changes.items():
        (kw if key in kw else args)[key] = value
    return args, kw


@pytest.mark.parametrize(
    "changes,exc,match",
    [
        (
            dict(U=torch.zeros(5, 3, 41, dtype=torch.float64)),
            ValueError,
            r"U has shape \(5, 3, 41\) but expected \(L, B, D\*d\*k=2\*5\*4=40\)",
        ),
        (
            dict(num_matrices=3, U=torch.zeros(5, 3, 30, dtype=torch.float64), x=None),
            ValueError,
            r"x is required when has_skip_term=True and num_matrices=3",
        ),
        (
            dict(
                num_matrices=3,
                U=torch.zeros(5, 3, 30, dtype=torch.float64),
                x=torch.zeros(5, 2, 10, dtype=torch.float64),
            ),
            ValueError,
            r"x has shape \(5, 2, 10\) but expected \(L=5, B=3, D\*d=10\)",
        ),
        (
            dict(c0=torch.zeros(3, 10, dtype=torch.float32)),
            TypeError,
            r"c0 has dtype torch.float32 but the state dtype for U of dtype torch.float64 is "
            r"torch.float64",
        ),
        (
            dict(c0=torch.zeros(3, 5, dtype=torch.float64)),
            ValueError,
            r"c0 has shape \(3, 5\) but expected \(B=3, D\*d=10\)",
        ),
        (
            dict(mask_pad=torch.zeros(3, 5, dtype=torch.bool)),
            ValueError,
            r"mask_pad has shape \(3, 5\) but expected \(L=5, B=3\)",
        ),
        (
            dict(weight_c=torch.zeros(10, dtype=torch.float64)),
            ValueError,
            r"weight_c has shape \(10,\) but expected \(2\*D\*d=20,\)",
        ),
        (
            dict(bias=torch.zeros(2, 10, dtype=torch.float64)),
            ValueError,
            r"bias has shape \(2, 10\) but expected \(2\*D\*d=20,\)",
        ),
        (dict(num_directions=3), ValueError, r"num_directions must be 1 or 2, got 3"),
        (dict(num_matrices=5), ValueError, r"num_matrices must be 3 or 4, got 5"),
        (dict(hidden_size=0), ValueError, r"hidden_size must be a positive int, got 0"),
    ],
)
def test_bad_inputs_raise_clear_errors(changes, exc, match):
    args, kw = _bad(**changes)
    with pytest.raises(exc, match=match):
        sru_scan(*args.values(), **kw)


def test_half_U_needs_fp32_state():
    U, x, w, b, c0, m = make_inputs(d=5, dtype=torch.float16)
    with pytest.raises(
        TypeError,
        match=r"c0 has dtype torch.float16 but the state dtype .* "
        r"is torch.float32",
    ):
        sru_scan(U, x, w, b, c0.half(), m, **attrs(d=5))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_saturated_gates_and_nan_propagation(path, dtype):
    """Pre-activations far outside exp's range saturate like torch's; a NaN stays a NaN."""
    U, x, w, b, c0, m = make_inputs(L=6, B=3, d=37, k=4, dtype=dtype)
    U = U * 1000.0
    U[2, 0, 7] = float("nan")
    kw = attrs(k=4, use_tanh=True)
    h, c = run(path, U, x, w, b, c0, m, **kw)
    h_ref, c_ref = sru_scan_naive(U, x, w, b, c0, m, **kw)
    assert torch.equal(h.isnan(), h_ref.isnan()) and torch.equal(c.isnan(), c_ref.isnan())
    assert h.isnan().any()
    ok = ~h_ref.isnan()
    assert (h[ok] - h_ref[ok]).abs().max().item() <= 1000.0 * ATOL[dtype]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_runs_the_torch_loop():
    inputs = make_inputs(D=2, k=3, dtype=torch.float64)
    kw = attrs(D=2, use_tanh=True)
    cuda = [None if t is None else t.cuda().requires_grad_(t.is_floating_point()) for t in inputs]
    h, c = sru_scan(*cuda, **kw)
    (h.sum() + c.sum()).backward()
    cpu = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    h_ref, c_ref = sru_scan_naive(*cpu, **kw)
    (h_ref.sum() + c_ref.sum()).backward()
    assert h.is_cuda and max_err(h.cpu(), h_ref) <= 1e-12 and max_err(c.cpu(), c_ref) <= 1e-12
    for got, ref in zip(cuda[:5], cpu[:5]):
        assert max_err(got.grad.cpu(), ref.grad) <= 1e-12
