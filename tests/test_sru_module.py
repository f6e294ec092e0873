"""rnnx.models.sru.SRU: a drop-in for the published sru 2.6.0 ``sru.SRU``.

Two groups of tests:
- always on: against a naive composition written here from the state dict and ``sru_scan_naive``,
  state-dict names/shapes, the state API (prefill + steps), init statistics, errors;
- ``reference``: against the published package run in a subprocess (tests/sru_reference.py) on the
  very same weights (its state_dict loaded unchanged), fp32, max abs error <= 1e-5; plus identical
  initial weights for the same seed, and identical train-mode outputs (dropout) for the same seed.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Optional

import pytest
import sru_reference
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rnnx.models.ops.sru_scan import sru_scan_naive
from rnnx.models.sru import SRU, SRUCell
from rnnx.models.state import SRUState

TOL = 1e-5


def max_err(a: Tensor, b: Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a.double() - b.double()).abs().max().item()


def make_sru(seed: int = 0, **kwargs: Any) -> SRU:
    """``SRU(**kwargs)`` in sru 2.6's layout (the release this file compares with) built after
    ``torch.manual_seed(seed)``; checks the deprecation warnings."""
    torch.manual_seed(seed)
    deprecated = kwargs.get("use_tanh") or kwargs.get("rnn_dropout", 0) > 0
    with pytest.warns(DeprecationWarning) if deprecated else contextlib.nullcontext():
        return SRU(**{"sru_version": "2.6", **kwargs})


def right_pad_mask(lengths: list[int], L: int) -> Tensor:
    """(L, B) bool, True on the pad steps after each row's length."""
    return torch.arange(L).unsqueeze(1) >= torch.tensor(lengths).unsqueeze(0)


# ----------------------------------------------------------------------------------------------
# naive composition: the whole stacked SRU from its state dict, layer by layer, with sru_scan_naive


def naive_sru(
    sd: dict[str, Tensor],
    cfg: dict[str, Any],
    x: Tensor,
    c0: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """Eval-mode sru 2.6 SRU from its state dict ``sd`` and constructor kwargs ``cfg``."""
    D = 2 if cfg.get("bidirectional") else 1
    d = cfg["hidden_size"]
    out = D * d
    num_layers = cfg.get("num_layers", 2)
    skip = cfg.get("has_skip_term", True)
    L, B = x.shape[:2]
    if "input_to_hidden.weight" in sd:
        x = x @ sd["input_to_hidden.weight"].t()
    cs = []
    for i in range(num_layers):
        p = f"rnn_lst.{i}."
        residual = x
        ln = cfg.get("layer_norm") and not cfg.get("normalize_after")
        if ln:
            x = F.layer_norm(x, (x.shape[-1],), sd[p + "layer_norm.weight"], sd[p + "layer_norm.bias"])
        flat = x.reshape(L * B, -1)
        if p + "weight_proj" in sd:
            flat = flat @ sd[p + "weight_proj"]
        U = (flat @ sd[p + "weight"]).reshape(L, B, -1)
        k = U.shape[-1] // out
        scale = sd[p + "scale_x"].item() if cfg.get("rescale") else 1.0
        c_init = torch.zeros(B, out) if c0 is None else c0[i]
        h, c = sru_scan_naive(
            U,
            residual if (skip and k == 3) else None,
            sd[p + "weight_c"],
            sd[p + "bias"],
            c_init,
            mask_pad,
            hidden_size=d,
            num_directions=D,
            num_matrices=k,
            has_skip_term=skip,
            use_tanh=bool(cfg.get("use_tanh")),
            scale_x=scale,
        )
        if cfg.get("layer_norm") and cfg.get("normalize_after"):
            h = F.layer_norm(h, (out,), sd[p + "layer_norm.weight"], sd[p + "layer_norm.bias"])
        x = h
        cs.append(c)
    return x, torch.stack(cs)


NAIVE_CONFIGS = {
    "uni": dict(input_size=6, hidden_size=6, num_layers=2),
    "bi_k4": dict(input_size=5, hidden_size=3, num_layers=2, bidirectional=True),
    "ln_pre_rescale": dict(input_size=6, hidden_size=6, layer_norm=True, rescale=True, highway_bias=-1.0),
    "ln_post_k4": dict(input_size=4, hidden_size=6, layer_norm=True, normalize_after=True),
    "proj_tanh_noskip": dict(input_size=8, hidden_size=8, projection_size=3, use_tanh=True, has_skip_term=False),
    "proj_first_3layers": dict(input_size=5, hidden_size=4, num_layers=3, proj_input_to_hidden_first=True),
}


@pytest.mark.parametrize("name", list(NAIVE_CONFIGS))
def test_matches_naive_composition(name: str) -> None:
    cfg = NAIVE_CONFIGS[name]
    model = make_sru(**cfg).eval()
    with torch.no_grad():  # non-trivial layer norm affine parameters
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    g = torch.Generator().manual_seed(1)
    L, B = 7, 3
    x = torch.randn(L, B, cfg["input_size"], generator=g)
    c0 = 0.5 * torch.randn(model.num_layers, B, model.output_size, generator=g)
    mask = right_pad_mask([7, 4, 1], L)
    sd = model.state_dict()
    with torch.no_grad():
        for args in [(x,), (x, c0, mask)]:
            h, c = model(*args)
            h_ref, c_ref = naive_sru(sd, cfg, *args)
            assert max_err(h, h_ref) <= TOL
            assert max_err(c, c_ref) <= TOL
            if len(args) == 3 and not cfg.get("normalize_after"):
                assert torch.all(h[mask] == 0)


def test_state_dict_names_and_shapes() -> None:
    model = make_sru(
        input_size=6,
        hidden_size=4,
        num_layers=2,
        bidirectional=True,
        projection_size=3,
        layer_norm=True,
        proj_input_to_hidden_first=True,
    )
    per_layer = {
        "weight_proj": (8, 3),
        "weight": (3, 8 * 3),
        "weight_c": (16,),
        "bias": (16,),
        "scale_x": (1,),
        "layer_norm.weight": (8,),
        "layer_norm.bias": (8,),
    }  # the same in both layers: each reads 8 = 2 x 4 features (input_to_hidden's, then layer 0's)
    expected = {
        "input_to_hidden.weight": (8, 6),
        **{f"rnn_lst.{i}.{name}": shape for i in range(2) for name, shape in per_layer.items()},
    }
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == expected
    # k = 4 without projection, post layer norm over the output; projection_size >= in is dropped
    model = make_sru(
        input_size=3, hidden_size=5, num_layers=1, projection_size=4, layer_norm=True, normalize_after=True
    )
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == {
        "rnn_lst.0.weight": (3, 20),
        "rnn_lst.0.weight_c": (10,),
        "rnn_lst.0.bias": (10,),
        "rnn_lst.0.scale_x": (1,),
        "rnn_lst.0.layer_norm.weight": (5,),
        "rnn_lst.0.layer_norm.bias": (5,),
    }
    assert model.rnn_lst[0].num_matrices == 4 and model.rnn_lst[0].projection_size == 0


def test_load_state_dict_updates_scale_x() -> None:
    cfg = dict(input_size=4, hidden_size=4, num_layers=1, rescale=True)
    model = make_sru(**cfg).eval()
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    sd["rnn_lst.0.scale_x"].fill_(3.0)
    model.load_state_dict(sd)
    assert model.rnn_lst[0].highway_scale == 3.0
    x = torch.randn(5, 2, 4)
    with torch.no_grad():
        assert max_err(model(x)[0], naive_sru(sd, cfg, x)[0]) <= TOL


def test_init_statistics() -> None:
    hb = -2.0
    model = make_sru(input_size=256, hidden_size=256, num_layers=1, rescale=True, highway_bias=hb)
    cell = model.rnn_lst[0]
    w = cell.weight.detach().view(256, 1, 256, 3)
    # E = 0, Var = 1/in for x~; the gates' columns are scaled by sqrt(1/2)
    for col, var in [(0, 1 / 256), (1, 0.5 / 256), (2, 0.5 / 256)]:
        assert abs(w[..., col].var().item() / var - 1) < 0.05
        assert abs(w[..., col].mean().item()) < 0.02 * math.sqrt(var)
    assert w.abs().max().item() <= math.sqrt(3 / 256) + 1e-6
    wc = cell.weight_c.detach()
    assert abs(wc.var().item() / 0.5 - 1) < 0.15 and wc.abs().max() <= math.sqrt(1.5) + 1e-6
    assert torch.all(cell.bias[:256] == 0) and torch.all(cell.bias[256:] == hb)
    assert cell.scale_x.item() == pytest.approx(math.sqrt(1 + 2 * math.exp(hb)))
    # layer norm shrinks the weights by 10; k = 4 multiplies the x' columns by scale_x
    ln = make_sru(input_size=256, hidden_size=128, num_layers=1, rescale=True, layer_norm=True).rnn_lst[0]
    w4 = ln.weight.detach().view(256, 1, 128, 4)
    s = math.sqrt(3.0)
    assert abs(w4[..., 0].var().item() / (0.01 / 256) - 1) < 0.1
    assert abs(w4[..., 3].var().item() / (0.01 * s * s / 256) - 1) < 0.1
    # v1: weight_c is zero and frozen
    v1 = make_sru(input_size=4, hidden_size=4, v1=True).rnn_lst[0]
    assert torch.all(v1.weight_c == 0) and not v1.weight_c.requires_grad


def unidirectional_model(dtype: torch.dtype = torch.float32) -> SRU:
    model = make_sru(input_size=5, hidden_size=6, num_layers=3, layer_norm=True, rescale=True, highway_bias=-1.0)
    return model.to(dtype).eval()


def test_prefill_then_steps_equals_one_pass() -> None:
    model = unidirectional_model()
    g = torch.Generator().manual_seed(2)
    n, m, B = 6, 4, 3
    x = torch.randn(n + m, B, 5, generator=g)
    with torch.no_grad():
        h_all, st_all = model.forward_state(x)
        h_fwd, c_fwd = model(x)
        h_pre, st = model.forward_state(x[:n], model.init_state(B))
        hs = [h_pre]
        for t in range(n, n + m):
            h_t, st = model.forward_state(x[t : t + 1], st)
            assert h_t.shape == (1, B, 6)
            hs.append(h_t)
    assert isinstance(st, SRUState) and st.c.shape == (3, B, 6) and st.c.dtype == torch.float32
    assert max_err(torch.cat(hs), h_all) <= TOL
    assert max_err(st.c, st_all.c) <= TOL
    assert max_err(h_all, h_fwd) <= TOL and max_err(st_all.c, c_fwd) <= TOL


def test_state_is_fp32_for_bf16_activations() -> None:
    model = unidirectional_model(torch.bfloat16)
    x = torch.randn(4, 2, 5, dtype=torch.bfloat16)
    st0 = model.init_state(2)
    assert st0.c.dtype == torch.float32 and st0.c.shape == (3, 2, 6) and torch.all(st0.c == 0)
    with torch.no_grad():
        h, st = model.forward_state(x, st0)
        h2, st2 = model.forward_state(x[:1], st)
    assert h.dtype == torch.bfloat16 and st.c.dtype == torch.float32 and st2.c.dtype == torch.float32
    ref = unidirectional_model(torch.float32)
    with torch.no_grad():
        h_ref, _ = ref.forward_state(x.float())
    assert max_err(h.float(), h_ref) < 0.1  # bf16 weights and activations


def test_pad_steps_keep_the_state() -> None:
    model = unidirectional_model()
    x = torch.randn(6, 2, 5)
    mask = right_pad_mask([6, 3], 6)
    with torch.no_grad():
        _, st = model.forward_state(x, mask_pad=mask)
        _, st_row1 = model.forward_state(x[:3, 1:2])
        _, st_row0 = model.forward_state(x[:, 0:1])
    assert max_err(st.c[:, 1:2], st_row1.c) <= TOL
    assert max_err(st.c[:, 0:1], st_row0.c) <= TOL


def test_nn_rnn_compatible_return_layout() -> None:
    kw = dict(input_size=4, hidden_size=3, num_layers=2, bidirectional=True)
    plain, compat = make_sru(**kw).eval(), make_sru(nn_rnn_compatible_return=True, **kw).eval()
    x = torch.randn(5, 2, 4)
    with torch.no_grad():
        _, c = plain(x)
        _, c_compat = compat(x)
    assert c_compat.shape == (4, 2, 3)
    for layer in range(2):
        for direction in range(2):
            assert torch.equal(c_compat[2 * layer + direction], c[layer, :, 3 * direction : 3 * direction + 3])


def test_packed_sequence_equals_mask_pad() -> None:
    model = make_sru(input_size=4, hidden_size=4, bidirectional=True).eval()
    lengths = [3, 5, 2]
    x = torch.randn(5, 3, 4)
    mask = right_pad_mask(lengths, 5)
    with torch.no_grad():
        h_mask, c_mask = model(x, mask_pad=mask)
        packed, c_packed = model(pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=False))
    h_packed, out_lengths = pad_packed_sequence(packed)
    assert out_lengths.tolist() == lengths
    assert max_err(h_packed, h_mask) <= TOL and max_err(c_packed, c_mask) <= TOL


def test_dropout_in_training_only() -> None:
    model = make_sru(input_size=6, hidden_size=6, num_layers=2, dropout=0.5)
    assert model.rnn_lst[0].dropout == 0.5 and model.rnn_lst[1].dropout == 0.0  # not after the last
    x = torch.randn(5, 4, 6, requires_grad=True)
    mask = right_pad_mask([5, 5, 2, 1], 5)
    model.train()
    h_train, _ = model(x, mask_pad=mask)
    h_train.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert torch.all(h_train[mask] == 0)
    model.eval()
    with torch.no_grad():
        h_eval, _ = model(x, mask_pad=mask)
        h_eval2, _ = model(x, mask_pad=mask)
    assert torch.equal(h_eval, h_eval2) and max_err(h_train, h_eval) > 1e-3


def test_cell_single_step_matches_sequence() -> None:
    torch.manual_seed(0)
    cell = SRUCell(4, 4, rescale=True).eval()
    x = torch.randn(3, 2, 4)
    with torch.no_grad():
        h_seq, c_seq = cell(x)
        c = None
        for t in range(3):
            h_t, c = cell(x[t], c)
            assert h_t.shape == (2, 4)
            assert max_err(h_t, h_seq[t]) <= TOL
    assert max_err(c, c_seq) <= TOL


def test_bad_inputs_raise_clear_errors() -> None:
    model = make_sru(input_size=4, hidden_size=3, num_layers=2)
    with pytest.raises(ValueError, match="length, batch, input_size"):
        model(torch.randn(2, 4))
    with pytest.raises(ValueError, match="input_size 4"):
        model(torch.randn(3, 2, 5))
    with pytest.raises(ValueError, match="c0 must be"):
        model(torch.randn(3, 2, 4), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="mask_pad must be"):
        model(torch.randn(3, 2, 4), mask_pad=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="state.c must be"):
        model.forward_state(torch.randn(3, 2, 4), SRUState(c=torch.zeros(2, 5, 3)))
    with pytest.raises(RuntimeError, match="bidirectional"):
        make_sru(input_size=4, hidden_size=3, bidirectional=True).forward_state(torch.randn(3, 2, 4))
    with pytest.raises(ValueError, match="transform module must map"):
        SRU(4, 3, custom_m=torch.nn.Linear(4, 9))(torch.randn(2, 1, 4))


# ----------------------------------------------------------------------------------------------
# against the published sru 2.6.0


#: name -> (constructor kwargs, extra options: "packed", "grad", "train")
REF_CONFIGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "uni": (dict(input_size=8, hidden_size=8, num_layers=2), {"grad": True, "packed": True}),
    "bidirectional": (dict(input_size=8, hidden_size=4, num_layers=2, bidirectional=True), {"grad": True}),
    "bidirectional_k4": (dict(input_size=6, hidden_size=5, num_layers=2, bidirectional=True), {"packed": True}),
    "layer_norm_pre": (dict(input_size=8, hidden_size=8, num_layers=2, layer_norm=True), {}),
    "layer_norm_post": (
        dict(input_size=6, hidden_size=8, num_layers=2, layer_norm=True, normalize_after=True),
        {"grad": True},
    ),
    "rescale": (dict(input_size=8, hidden_size=8, num_layers=2, rescale=True, highway_bias=-1.5), {}),
    "rescale_k4": (dict(input_size=5, hidden_size=7, num_layers=3, rescale=True, highway_bias=-1.0), {}),
    "k4": (dict(input_size=5, hidden_size=7, num_layers=3), {}),
    "projection": (dict(input_size=8, hidden_size=8, num_layers=2, projection_size=3), {}),
    "projection_bi_k4": (dict(input_size=10, hidden_size=3, num_layers=2, bidirectional=True, projection_size=4), {}),
    "proj_input_to_hidden_first": (dict(input_size=5, hidden_size=8, proj_input_to_hidden_first=True), {}),
    "use_tanh": (dict(input_size=8, hidden_size=8, use_tanh=True), {}),
    "no_skip": (dict(input_size=8, hidden_size=6, has_skip_term=False), {}),
    "v1": (dict(input_size=8, hidden_size=8, v1=True), {}),
    "weight_c_init": (dict(input_size=8, hidden_size=8, weight_c_init=0.5), {}),
    "nn_rnn_compatible": (dict(input_size=6, hidden_size=3, bidirectional=True, nn_rnn_compatible_return=True), {}),
    "many_layers_everything": (
        dict(
            input_size=6,
            hidden_size=4,
            num_layers=4,
            bidirectional=True,
            layer_norm=True,
            rescale=True,
            projection_size=3,
            highway_bias=-0.5,
        ),
        {"grad": True},
    ),
    "train_dropout": (
        dict(input_size=8, hidden_size=8, num_layers=3, dropout=0.3, rnn_dropout=0.2, rescale=True),
        {"train": True},
    ),
    "train_dropout_k4_bi": (
        dict(input_size=5, hidden_size=4, num_layers=3, bidirectional=True, dropout=0.4, layer_norm=True),
        {"train": True},
    ),
}


def _build_cases() -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The reference cases and, per case, the inputs and calls the rnnx side replays."""
    cases, replay = [], {}
    g = torch.Generator().manual_seed(1234)
    L, B, lengths = 9, 4, [9, 6, 1, 4]
    mask = right_pad_mask(lengths, L)
    for seed, (name, (kw, opts)) in enumerate(REF_CONFIGS.items(), start=100):
        out = kw["hidden_size"] * (2 if kw.get("bidirectional") else 1)
        layers = kw.get("num_layers", 2)
        x = torch.randn(L, B, kw["input_size"], generator=g)
        c0 = 0.5 * torch.randn(layers, B, out, generator=g)
        if opts.get("train"):
            calls = [dict(args=[x, c0, mask], grad=True, seed=seed + 1000)]
        else:
            calls = [dict(args=[x]), dict(args=[x, c0, mask.to(torch.uint8)])]
            if opts.get("grad"):  # sru's pure-Python path (it runs its C++ kernel under no_grad)
                calls.append(dict(args=[x, c0, mask], grad=True))
            if opts.get("packed"):
                calls.append(dict(args=[pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=False)]))
        cases.append(dict(name=name, kwargs=kw, seed=seed, train=bool(opts.get("train")), calls=calls))
        replay[name] = dict(kwargs=kw, seed=seed, train=bool(opts.get("train")), calls=calls)
    return cases, replay


@pytest.fixture(scope="session")
def sru26() -> dict[str, Any]:
    """Runs every REF_CONFIGS case through the published sru 2.6.0 in one subprocess."""
    ref_dir = sru_reference.require_reference("2.6.0")
    cases, replay = _build_cases()
    try:
        results = sru_reference.run_reference(ref_dir, cases)
    except sru_reference.ReferenceUnavailable as exc:
        pytest.skip(str(exc))
    return {"results": results, "replay": replay}


def _reference_result(name: str, sru26: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    res = sru26["results"][name]
    assert res["error"] is None, res["error"]
    assert res["version"] == "2.6.0"
    return res, sru26["replay"][name]


@pytest.mark.reference
@pytest.mark.parametrize("name", list(REF_CONFIGS))
def test_same_seed_same_initial_weights(name: str, sru26: dict[str, Any]) -> None:
    res, rp = _reference_result(name, sru26)
    model = make_sru(rp["seed"], **rp["kwargs"])
    ours, theirs = model.state_dict(), res["state_dict"]
    assert list(ours) == list(theirs)
    for key in ours:
        assert ours[key].shape == theirs[key].shape, key
        assert torch.equal(ours[key], theirs[key]), f"{key}: max diff {max_err(ours[key], theirs[key])}"


@pytest.mark.reference
@pytest.mark.parametrize("name", list(REF_CONFIGS))
def test_matches_published_sru_2_6(name: str, sru26: dict[str, Any]) -> None:
    res, rp = _reference_result(name, sru26)
    model = make_sru(12345, **rp["kwargs"])  # another seed: the weights come only from the load
    model.load_state_dict(res["state_dict"])
    model.train(rp["train"])
    assert len(res["outputs"]) == len(rp["calls"])
    for call, expected in zip(rp["calls"], res["outputs"]):
        if call.get("seed") is not None:
            torch.manual_seed(call["seed"])
        with torch.set_grad_enabled(call.get("grad", False)):
            h, c = model(*call["args"])
        if isinstance(expected[0], dict):
            h_exp, h_lengths = expected[0]["packed_data"], expected[0]["lengths"]
            h, lengths = pad_packed_sequence(h)
            assert torch.equal(lengths, h_lengths)
        else:
            h_exp = expected[0]
        assert h.dtype == torch.float32
        assert max_err(h, h_exp) <= TOL, f"h: {max_err(h, h_exp)}"
        assert max_err(c, expected[1]) <= TOL, f"c: {max_err(c, expected[1])}"
