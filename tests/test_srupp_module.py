"""rnnx.models.SRUpp: parity with the published ``sru`` 3.0.0.dev6 package, streaming, state, errors.

Tolerances: fp32 comparisons are max-abs <= 1e-5 on activations of magnitude O(1); bf16 vs fp32 is
max-abs <= 0.15 (bf16 has 8 mantissa bits, three stacked layers).
"""

from __future__ import annotations

import pytest
import sru_reference
import torch
import torch.nn.functional as F

from rnnx.models.ops.causal_linear_attention import PAD_KEY
from rnnx.models.ops.sru_scan import sru_scan_naive
from rnnx.models.srupp import SRUpp
from rnnx.models.state import KVCache, LinearAttentionState, SRUppState, flatten_state

TOL = 1e-5


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Max abs difference, relative to the larger magnitude when that exceeds 1 (fp32 sums such as
    the linear-attention state S grow with the sequence; their rounding grows with them)."""
    assert a.shape == b.shape, (a.shape, b.shape)
    if not a.numel():
        return 0.0
    scale = max(1.0, b.double().abs().max().item())
    return (a.double() - b.double()).abs().max().item() / scale


def causal_mask(length: int, past: int = 0) -> torch.Tensor:
    """Additive (L, past+L) mask: 0 where key j <= past + query i, -inf elsewhere."""
    keys = torch.arange(past + length)[None, :]
    queries = torch.arange(length)[:, None] + past
    return torch.zeros(length, past + length).masked_fill(keys > queries, float("-inf"))


def mask_pad_for(length: int, batch: int) -> torch.Tensor:
    """(L, B) bool: row 0 no pads, row 1 two trailing pads, row 2 (if any) a leading and a middle pad."""
    mask = torch.zeros(length, batch, dtype=torch.bool)
    if batch > 1:
        mask[-2:, 1] = True
    if batch > 2:
        mask[0, 2] = True
        mask[length // 2, 2] = True
    return mask


def randomize_(model: torch.nn.Module, seed: int) -> None:
    """Perturbs every parameter so no sub-layer is inert (alpha is 0 at init)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
            if name.endswith("alpha"):
                p.add_(0.7)


# --------------------------------------------------------------------------------------------------
# (a) the published package, run once in a subprocess
# --------------------------------------------------------------------------------------------------

#: name -> (constructor kwargs, length, batch, with c0, with mask_pad, memory length or 0)
REFERENCE_CASES: dict[str, tuple[dict, int, int, bool, bool, int]] = {
    "defaults": (dict(input_size=8, hidden_size=8, proj_size=4), 6, 2, False, False, 0),
    "k4_heads2_preln_every2": (
        dict(input_size=6, hidden_size=8, proj_size=8, num_layers=3, num_heads=2, layer_norm=True,
             normalize_after=False, attention_every_n_layers=2),
        7, 3, True, True, 0,
    ),
    "postln_last2_rescale": (
        dict(input_size=6, hidden_size=8, proj_size=4, num_layers=3, num_heads=2, layer_norm=True,
             normalize_after=True, attention_last_n_layers=2, rescale=True, highway_bias=-1.0,
             attn_layer_norm=False),
        7, 3, True, True, 0,
    ),
    "proj_first_heads1": (
        dict(input_size=5, hidden_size=8, proj_size=6, num_layers=2, proj_input_to_hidden_first=True,
             weight_c_init=0.5),
        6, 3, True, True, 0,
    ),
    "bidirectional_rnn_return": (
        dict(input_size=6, hidden_size=4, proj_size=4, num_layers=2, num_heads=2, bidirectional=True,
             nn_rnn_compatible_return=True),
        5, 3, True, True, 0,
    ),
    "memory": (
        dict(input_size=8, hidden_size=8, proj_size=8, num_layers=2, num_heads=2, layer_norm=True),
        5, 3, True, True, 3,
    ),
}  # fmt: skip

INIT_SEED = 77
INIT_KWARGS = dict(input_size=6, hidden_size=8, proj_size=4, num_layers=3, dropout=0.1, num_heads=2,
                   layer_norm=True, attention_every_n_layers=2, rescale=True, highway_bias=-1.5,
                   weight_c_init=0.5)  # fmt: skip


def _reference_inputs(name: str, seed: int) -> dict:
    """Randomised weights (a state dict) and inputs of one REFERENCE_CASES entry."""
    kwargs, length, batch, with_c0, with_mask, mem_len = REFERENCE_CASES[name]
    torch.manual_seed(seed)
    model = SRUpp(**kwargs)
    randomize_(model, seed)
    x = torch.randn(length, batch, kwargs["input_size"])
    c0 = torch.randn(model.num_layers, batch, model.output_size) if with_c0 else None
    memory = memory_mask_pad = None
    if mem_len:
        widths = [model.rnn_lst[i].input_size for i in range(model.num_layers)]
        memory = [torch.randn(mem_len, batch, w) for w in widths]
        memory_mask_pad = torch.zeros(mem_len, batch, dtype=torch.bool)
        memory_mask_pad[0, 1] = True
    return dict(
        state_dict=model.state_dict(), x=x, c0=c0, mask_pad=mask_pad_for(length, batch) if with_mask else None,
        memory=memory, memory_mask_pad=memory_mask_pad, causal_mask=causal_mask(length, past=mem_len),
    )  # fmt: skip


@pytest.fixture(scope="session")
def reference_results() -> dict:
    """Every REFERENCE_CASES config through ``sru.SRUpp`` 3.0.0.dev6, in one subprocess.

    Per config: the package loads our randomised state dict (strict), runs its forward with no
    attn_mask ("default") and with a causal one ("causal"); its own state dict comes back. One more
    case builds the package model from INIT_SEED with no state dict, to compare initialisations.
    """
    ref_dir = sru_reference.require_reference("3.0.0.dev6")
    inputs = {name: _reference_inputs(name, 1000 + i) for i, name in enumerate(REFERENCE_CASES)}
    cases = []
    for name, inp in inputs.items():
        call = dict(args=[inp["x"], inp["c0"]], kwargs=dict(
            mask_pad=inp["mask_pad"], memory=inp["memory"], memory_mask_pad=inp["memory_mask_pad"]))  # fmt: skip
        causal_call = dict(args=call["args"], kwargs=dict(call["kwargs"], attn_mask=inp["causal_mask"]))
        cases.append(dict(name=name, factory="sru.SRUpp", kwargs=REFERENCE_CASES[name][0],
                          state_dict=inp["state_dict"], calls=[call, causal_call]))  # fmt: skip
    cases.append(dict(name="init", factory="sru.SRUpp", kwargs=INIT_KWARGS, seed=INIT_SEED))
    try:
        results = sru_reference.run_reference(ref_dir, cases)
    except sru_reference.ReferenceUnavailable as exc:
        pytest.skip(str(exc))
    for name, res in results.items():
        assert res["error"] is None, f"{name}: {res['error']}"
        assert res["version"] == "3.0.0.dev6"
    return {"inputs": inputs, "results": results}


def _reference_case(name: str, reference_results: dict) -> tuple[SRUpp, dict, dict]:
    """Our model loaded with the package model's state dict, the inputs, the package's outputs."""
    res = reference_results["results"][name]
    model = SRUpp(**REFERENCE_CASES[name][0]).eval()
    model.load_state_dict(res["state_dict"], strict=True)
    default, causal = res["outputs"]
    return model, reference_results["inputs"][name], {"default": default, "causal": causal}


@pytest.mark.reference
@pytest.mark.parametrize("variant", ["default", "causal"])
@pytest.mark.parametrize("name", list(REFERENCE_CASES))
def test_forward_matches_package(reference_results: dict, name: str, variant: str) -> None:
    model, inp, outputs = _reference_case(name, reference_results)
    h_ref, c_ref, saved_ref = outputs[variant]
    assert torch.isfinite(h_ref).all() and torch.isfinite(c_ref).all()
    with torch.no_grad():
        h, c, saved = model(
            inp["x"], inp["c0"], mask_pad=inp["mask_pad"],
            attn_mask=inp["causal_mask"] if variant == "causal" else None,
            memory=inp["memory"], memory_mask_pad=inp["memory_mask_pad"],
        )  # fmt: skip
    assert max_err(h, h_ref) <= TOL
    assert max_err(c, c_ref) <= TOL
    assert len(saved["saved_inputs"]) == len(saved_ref["saved_inputs"]) == model.num_layers
    for ours, theirs in zip(saved["saved_inputs"], saved_ref["saved_inputs"]):
        assert max_err(ours, theirs) <= TOL


@pytest.mark.reference
@pytest.mark.parametrize(
    "name", [n for n, case in REFERENCE_CASES.items() if not case[0].get("bidirectional") and not case[5]]
)
def test_forward_state_matches_package_causal(reference_results: dict, name: str) -> None:
    """Streaming from an empty state (c = c0) equals the package's forward with a causal attn_mask."""
    model, inp, outputs = _reference_case(name, reference_results)
    h_ref, c_ref, _ = outputs["causal"]
    state = model.init_state(inp["x"].shape[1])
    if inp["c0"] is not None:
        state.c = inp["c0"].clone()
    with torch.no_grad():
        h, new_state = model.forward_state(inp["x"], state, mask_pad=inp["mask_pad"])
    assert max_err(h, h_ref) <= TOL
    assert max_err(new_state.c, c_ref) <= TOL


@pytest.mark.reference
def test_initialisation_matches_package(reference_results: dict) -> None:
    """Same seed, same constructor arguments: the same initial weights as the package (exactly)."""
    expected = reference_results["results"]["init"]["state_dict"]
    torch.manual_seed(INIT_SEED)
    ours = SRUpp(**INIT_KWARGS).state_dict()
    assert ours.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(ours[key], value), key


# --------------------------------------------------------------------------------------------------
# (b) always-on: streaming, state, dtypes, errors
# --------------------------------------------------------------------------------------------------

STREAM_CONFIGS = {
    "all_attention_preln": dict(input_size=6, hidden_size=8, proj_size=8, num_layers=3, num_heads=2,
                                layer_norm=True, normalize_after=False),
    "every2_postln_proj_first": dict(input_size=5, hidden_size=8, proj_size=4, num_layers=3,
                                     layer_norm=True, normalize_after=True, attention_every_n_layers=2,
                                     proj_input_to_hidden_first=True, rescale=True),
}  # fmt: skip


def make_model(config: str, attention: str, seed: int = 0) -> SRUpp:
    torch.manual_seed(seed)
    model = SRUpp(**STREAM_CONFIGS[config], attention=attention).eval()
    randomize_(model, seed)
    return model


def assert_states_close(a: SRUppState, b: SRUppState, tol: float = TOL) -> None:
    names_a, names_b = flatten_state(a), flatten_state(b)
    assert [n for n, _ in names_a] == [n for n, _ in names_b]
    for (name, ta), (_, tb) in zip(names_a, names_b):
        assert ta.dtype == tb.dtype, name
        if ta.dtype == torch.bool:
            assert torch.equal(ta, tb), name
        else:
            assert max_err(ta, tb) <= tol, name


@pytest.mark.parametrize("config", list(STREAM_CONFIGS))
@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_prefill_then_steps_equals_one_pass(config: str, attention: str) -> None:
    model = make_model(config, attention)
    n, m, batch = 5, 4, 3
    x = torch.randn(n + m, batch, model.input_size)
    mask_pad = mask_pad_for(n + m, batch)
    mask_pad[n + 1, 0] = True  # a pad inside the stepped part as well
    with torch.no_grad():
        h_all, state_all = model.forward_state(x, mask_pad=mask_pad)
        h_pre, state = model.forward_state(x[:n], model.init_state(batch), mask_pad=mask_pad[:n])
        steps = [h_pre]
        for t in range(n, n + m):
            h_t, state = model.forward_state(x[t : t + 1], state, mask_pad=mask_pad[t : t + 1])
            steps.append(h_t)
    assert max_err(torch.cat(steps), h_all) <= TOL
    assert_states_close(state, state_all)
    assert torch.isfinite(h_all).all()


@pytest.mark.parametrize("config", list(STREAM_CONFIGS))
@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_forward_state_equals_causal_forward(config: str, attention: str) -> None:
    """One forward_state pass from c0 equals forward(x, c0, attn_mask=causal) (softmax) / forward (linear)."""
    model = make_model(config, attention, seed=1)
    length, batch = 7, 3
    x = torch.randn(length, batch, model.input_size)
    c0 = torch.randn(model.num_layers, batch, model.output_size)
    mask_pad = mask_pad_for(length, batch)
    attn_mask = causal_mask(length) if attention == "softmax" else None
    state = model.init_state(batch)
    state.c = c0.clone()
    with torch.no_grad():
        h_ref, c_ref, _ = model(x, c0, mask_pad=mask_pad, attn_mask=attn_mask)
        h, new_state = model.forward_state(x, state, mask_pad=mask_pad)
    assert max_err(h, h_ref) <= TOL
    assert max_err(new_state.c, c_ref) <= TOL


def test_linear_attention_matches_recurrent_loop() -> None:
    """One layer written out by hand: q = linear1(x) unscaled, k/v from linear2, per head
    S += phi(k) v^T, z += phi(k) except at pads, then alpha / residual / LN / linear3 and the scan."""
    torch.manual_seed(2)
    model = SRUpp(6, 8, 8, num_layers=1, num_heads=2, attention="linear").eval()
    randomize_(model, 2)
    length, batch, heads, e = 6, 3, 2, 4
    x = torch.randn(length, batch, 6)
    mask_pad = mask_pad_for(length, batch)
    cell = model.rnn_lst[0]
    att = cell.transform_module
    with torch.no_grad():
        z = att.linear1(x)
        k, v = att.linear2(z).chunk(2, dim=-1)
        q, k, v = (t.reshape(length, batch, heads, e) for t in (z, k, v))
        phi = lambda t: F.elu(t) + 1  # noqa: E731
        S = torch.zeros(batch, heads, e, e)
        norm = torch.zeros(batch, heads, e)
        outs = []
        for t in range(length):
            keep = (~mask_pad[t]).float()[:, None, None]
            S = S + keep[..., None] * phi(k[t])[..., :, None] * v[t][..., None, :]
            norm = norm + keep * phi(k[t])
            num = torch.einsum("bhe,bhem->bhm", phi(q[t]), S)
            den = torch.einsum("bhe,bhe->bh", phi(q[t]), norm)[..., None] + 1e-6
            outs.append((num / den).reshape(batch, heads * e))
        attn = torch.stack(outs) * att.alpha + z
        U = att.linear3(att.layer_norm(attn))
        h_ref, c_ref = sru_scan_naive(
            U, None, cell.weight_c, cell.bias, torch.zeros(batch, 8), mask_pad,
            hidden_size=8, num_matrices=4,
        )  # fmt: skip
        h, c, _ = model(x, mask_pad=mask_pad)
        _, state = model.forward_state(x, mask_pad=mask_pad)
    assert max_err(h, h_ref) <= TOL
    assert max_err(c[0], c_ref) <= TOL
    assert max_err(state.attention[0].S, S) <= TOL
    assert max_err(state.attention[0].z, norm) <= TOL
    assert F.elu(torch.tensor(PAD_KEY)) + 1 == 0


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_pads_change_nothing(attention: str) -> None:
    """Feeding [a, PAD, b] gives b the output of feeding [a, b]; a pad step leaves c (and S, z) as they were."""
    model = make_model("all_attention_preln", attention, seed=3)
    batch = 2
    a, pad_tok, b = (torch.randn(3, batch, model.input_size) for _ in range(3))
    all_pad = torch.ones(3, batch, dtype=torch.bool)
    with torch.no_grad():
        _, state_a = model.forward_state(a)
        _, state_pad = model.forward_state(pad_tok, state_a, mask_pad=all_pad)
        h_b_with_pad, _ = model.forward_state(b, state_pad)
        h_b, _ = model.forward_state(b, state_a)
    assert torch.equal(state_pad.c, state_a.c)
    assert max_err(h_b_with_pad, h_b) <= TOL
    for before, after in zip(state_a.attention, state_pad.attention):
        if isinstance(before, LinearAttentionState):
            assert torch.equal(after.S, before.S) and torch.equal(after.z, before.z)
        elif isinstance(before, KVCache):
            assert after.key.shape[2] == before.key.shape[2] + 3
            assert not after.valid[:, -3:].any() and after.valid[:, :3].all()


def test_state_size_constant_for_linear_growing_for_softmax() -> None:
    sizes = {}
    for attention in ("softmax", "linear"):
        model = make_model("every2_postln_proj_first", attention)
        with torch.no_grad():
            _, short = model.forward_state(torch.randn(2, 2, model.input_size))
            _, long = model.forward_state(torch.randn(30, 2, model.input_size), short)
        sizes[attention] = [sum(t.numel() for _, t in flatten_state(s)) for s in (short, long)]
    assert sizes["linear"][0] == sizes["linear"][1]
    assert sizes["softmax"][1] > sizes["softmax"][0]
    linear_state = make_model("all_attention_preln", "linear").init_state(2)
    assert all(isinstance(s, LinearAttentionState) for s in linear_state.attention)
    assert linear_state.attention[0].S.shape == (2, 2, 4, 4) and linear_state.attention[0].z.shape == (2, 2, 4)


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_init_state_layout(attention: str) -> None:
    model = make_model("every2_postln_proj_first", attention)
    state = model.init_state(4)
    assert state.c.shape == (3, 4, 8) and state.c.dtype == torch.float32 and not state.c.any()
    assert state.attention[0] is None and state.attention[2] is None
    att = state.attention[1]
    if attention == "softmax":
        assert isinstance(att, KVCache)
        assert att.key.shape == (4, 1, 0, 4) and att.value.shape == (4, 1, 0, 4)
        assert att.valid.shape == (4, 0) and att.valid.dtype == torch.bool
    else:
        assert isinstance(att, LinearAttentionState)
        assert att.S.dtype == att.z.dtype == torch.float32 and not att.S.any() and not att.z.any()


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_bf16_model_keeps_fp32_state(attention: str) -> None:
    model = make_model("all_attention_preln", attention, seed=4)
    x = torch.randn(6, 2, model.input_size)
    with torch.no_grad():
        h32, _ = model.forward_state(x)
        model = model.to(torch.bfloat16)
        h, state = model.forward_state(x[:4].bfloat16())
        h_step, state = model.forward_state(x[4:].bfloat16(), state)
    assert h.dtype == h_step.dtype == torch.bfloat16
    assert state.c.dtype == torch.float32
    for att in state.attention:
        if isinstance(att, LinearAttentionState):
            assert att.S.dtype == att.z.dtype == torch.float32
        else:
            assert att.key.dtype == att.value.dtype == torch.bfloat16
    assert max_err(torch.cat([h, h_step]).float(), h32) <= 0.15


def test_linear_and_softmax_share_parameter_names() -> None:
    softmax = make_model("every2_postln_proj_first", "softmax")
    linear = SRUpp(**STREAM_CONFIGS["every2_postln_proj_first"], attention="linear")
    linear.load_state_dict(softmax.state_dict(), strict=True)
    assert softmax.state_dict().keys() == linear.state_dict().keys()


def test_training_dropout_masks_h_and_keeps_pads_zero() -> None:
    torch.manual_seed(5)
    model = SRUpp(8, 8, 4, num_layers=2, dropout=0.5)
    x = torch.randn(5, 3, 8)
    mask_pad = mask_pad_for(5, 3)
    h_eval_layer0, _ = model.rnn_lst[0].eval()(x, mask_pad=mask_pad)
    h_train_layer0, _ = model.rnn_lst[0].train()(x, mask_pad=mask_pad)
    assert max_err(h_eval_layer0, h_train_layer0) > 1e-3
    assert not h_train_layer0[mask_pad].any()


def test_errors() -> None:
    model = make_model("all_attention_preln", "softmax")
    with pytest.raises(ValueError, match="input must be"):
        model.forward_state(torch.randn(3, 6))
    with pytest.raises(ValueError, match="input must be"):
        model.forward_state(torch.randn(3, 2, 7))
    with pytest.raises(ValueError, match="input must be"):
        model(torch.randn(3, 2, 7))
    with pytest.raises(ValueError, match="mask_pad"):
        model.forward_state(torch.randn(3, 2, 6), mask_pad=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="state.c"):
        model.forward_state(torch.randn(3, 2, 6), model.init_state(3))
    with pytest.raises(ValueError, match=r"state.attention\[0\]"):
        model.forward_state(torch.randn(3, 2, 6), make_model("all_attention_preln", "linear").init_state(2))
    with pytest.raises(ValueError, match="attn_mask"):
        model(torch.randn(3, 2, 6), attn_mask=torch.zeros(3, 4))
    with pytest.raises(ValueError, match="c0"):
        model(torch.randn(3, 2, 6), torch.zeros(2, 2, 8))
    bidirectional = SRUpp(6, 4, 4, bidirectional=True)
    with pytest.raises(ValueError, match="bidirectional"):
        bidirectional.init_state(2)
    with pytest.raises(ValueError, match="bidirectional"):
        bidirectional.forward_state(torch.randn(3, 2, 6))
    with pytest.raises(ValueError, match="attention must be one of"):
        SRUpp(6, 8, 4, attention="performer")
    with pytest.raises(ValueError, match="both"):
        SRUpp(6, 8, 4, attention_every_n_layers=2, attention_last_n_layers=1)
    with pytest.raises(ValueError, match="divisible"):
        SRUpp(6, 8, 6, num_heads=4)
    linear = make_model("all_attention_preln", "linear")
    with pytest.raises(ValueError, match="causal by construction"):
        linear(torch.randn(3, 2, 6), attn_mask=causal_mask(3))
