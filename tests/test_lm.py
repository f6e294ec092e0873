"""The RecurrentLM contract for every family: prefill + steps == one pass, pads, state dtypes, config."""

from __future__ import annotations

import json

import pytest
import torch

from rnnx.models.lm import RecurrentLM
from rnnx.models.registry import MODEL_TYPES, build_model
from rnnx.models.state import KVCache, flatten_state

V = 13
CASES = {
    "sru": ("sru", dict(embed_dim=16, hidden_size=24, num_layers=2)),
    "sru_tied_3layers": ("sru", dict(embed_dim=16, hidden_size=16, num_layers=3, tie_weights=True)),
    "srupp_softmax": (
        "srupp",
        dict(embed_dim=16, hidden_size=24, proj_size=8, num_layers=2, num_heads=2, attention="softmax"),
    ),
    "srupp_linear": (
        "srupp",
        dict(embed_dim=16, hidden_size=24, proj_size=8, num_layers=2, num_heads=2, attention="linear"),
    ),
    "srupp_linear_every2": (
        "srupp",
        dict(
            embed_dim=16,
            hidden_size=16,
            proj_size=8,
            num_layers=3,
            attention="linear",
            srupp_options={"attention_every_n_layers": 2},
        ),
    ),
    "linear_transformer": ("linear_transformer", dict(d_model=16, num_layers=2, num_heads=2)),
    "linear_transformer_nopos_tied": (
        "linear_transformer",
        dict(d_model=16, num_layers=3, num_heads=4, positions="none", tie_weights=True),
    ),
}


def make(name: str) -> RecurrentLM:
    model_type, cfg = CASES[name]
    torch.manual_seed(0)
    model = build_model(model_type, {"vocab_size": V, **cfg}).eval()
    with torch.no_grad():  # move parameters off their init values (e.g. zero biases, unit gains)
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def assert_states_close(a: object, b: object, atol: float = 1e-5) -> None:
    fa, fb = flatten_state(a), flatten_state(b)
    assert [n for n, _ in fa] == [n for n, _ in fb]
    for (name, ta), (_, tb) in zip(fa, fb):
        assert ta.shape == tb.shape, name
        assert ta.dtype == tb.dtype, name
        if ta.is_floating_point():
            torch.testing.assert_close(ta, tb, atol=atol, rtol=0, msg=lambda m, name=name: f"state {name}: {m}")
        else:
            assert torch.equal(ta, tb), name


def batch_row(name: str, t: torch.Tensor, row: int) -> torch.Tensor:
    """Row ``row`` of a state tensor: the stacked SRU cell state ``c`` is (layers, B, d), the rest batch-first."""
    return t[:, row] if name == "c" else t[row]


@pytest.fixture(params=sorted(CASES))
def model(request: pytest.FixtureRequest) -> RecurrentLM:
    return make(request.param)


def test_registry() -> None:
    assert set(MODEL_TYPES) == {"decoder", "linear_transformer", "sru", "srupp"}
    with pytest.raises(KeyError, match="known: decoder, linear_transformer, sru, srupp"):
        build_model("gpt", {})


@torch.no_grad()
@pytest.mark.parametrize("n,m", [(1, 4), (7, 5)])
def test_prefill_then_steps_equals_one_pass(model: RecurrentLM, n: int, m: int) -> None:
    tokens = torch.randint(0, V, (3, n + m), generator=torch.Generator().manual_seed(n))
    full_logits, full_state = model(tokens)
    assert full_logits.shape == (3, n + m, V)
    logits, state = model(tokens[:, :n])
    pieces = [logits]
    for t in range(n, n + m):
        logits, state = model(tokens[:, t : t + 1], state)
        pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, 1), full_logits, atol=1e-5, rtol=0)
    assert_states_close(state, full_state)


@torch.no_grad()
def test_state_none_is_init_state(model: RecurrentLM) -> None:
    tokens = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(1))
    a, sa = model(tokens)
    b, sb = model(tokens, model.init_state(2))
    assert torch.equal(a, b)
    assert_states_close(sa, sb, atol=0)


@torch.no_grad()
def test_trailing_pads_leave_state_unchanged(model: RecurrentLM) -> None:
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, V, (3, 9), generator=g)
    lengths = [9, 4, 6]
    pad_mask = torch.arange(9)[None, :] >= torch.tensor(lengths)[:, None]
    _, state = model(tokens, pad_mask=pad_mask)
    nxt = torch.randint(0, V, (3, 1), generator=g)
    after, _ = model(nxt, state)
    for row, n in enumerate(lengths):
        _, alone = model(tokens[row : row + 1, :n])
        alone_after, _ = model(nxt[row : row + 1], alone)
        torch.testing.assert_close(after[row : row + 1], alone_after, atol=1e-5, rtol=0)
        for (name, t_pad), (_, t_alone) in zip(flatten_state(state), flatten_state(alone)):
            if name.endswith((".key", ".value", ".valid")):
                continue  # a KV cache keeps a (never attended) slot per pad; checked via the next logits
            torch.testing.assert_close(batch_row(name, t_pad, row), batch_row(name, t_alone, 0), atol=1e-5, rtol=1e-6)


@torch.no_grad()
def test_state_dtypes_are_fp32(model: RecurrentLM) -> None:
    _, state = model(torch.randint(0, V, (2, 5)))
    for s in (model.init_state(2), state):
        for name, t in flatten_state(s):
            if name.endswith(".valid"):
                assert t.dtype == torch.bool
            else:
                assert t.dtype == torch.float32, name
    kv = [a for a in getattr(state, "attention", []) if isinstance(a, KVCache)]
    assert all(a.key.shape[2] == 5 for a in kv)


def test_config_rebuilds_the_model(model: RecurrentLM) -> None:
    config = json.loads(json.dumps(model.config))
    clone = type(model)(**config)
    assert clone.config == model.config
    assert {k: v.shape for k, v in clone.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    clone.load_state_dict(model.state_dict())


def test_backward_reaches_every_parameter(model: RecurrentLM) -> None:
    model.train()
    logits, _ = model(torch.randint(0, V, (2, 6)))
    logits.logsumexp(-1).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@torch.no_grad()
def test_linear_transformer_positions_do_not_advance_on_pads() -> None:
    model = make("linear_transformer")
    tokens = torch.randint(0, V, (2, 6))
    pad_mask = torch.tensor([[False, True, False, True, True, False], [False] * 6])
    _, state = model(tokens, pad_mask=pad_mask)
    assert state.position.tolist() == [3.0, 6.0]
    _, alone = model(tokens[:1, [0, 2, 5]])  # pads in the middle: same as the row without them
    assert_states_close(
        type(state)(layers=[type(s)(s.S[:1], s.z[:1]) for s in state.layers], position=state.position[:1]), alone
    )


def test_linear_transformer_has_no_length_limit() -> None:
    model = make("linear_transformer_nopos_tied")
    assert model.init_state(1).position is None
    assert model.head.weight is model.embedding.weight
    logits, _ = make("linear_transformer")(torch.zeros(1, 3000, dtype=torch.long))
    assert torch.isfinite(logits).all()


def test_bad_inputs_and_configs() -> None:
    model = make("linear_transformer")
    with pytest.raises(ValueError, match="L >= 1"):
        model(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="pad_mask shape"):
        model(torch.zeros(2, 3, dtype=torch.long), pad_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"state holds the tensors \['layers.0.S', .*'layers.2.z'\], the model takes"):
        model(torch.zeros(1, 2, dtype=torch.long), make("linear_transformer_nopos_tied").init_state(1))
    with pytest.raises(TypeError, match="multiple of num_heads"):
        build_model("linear_transformer", dict(vocab_size=V, d_model=10, num_heads=3))
    with pytest.raises(TypeError, match="attention must be"):
        build_model("srupp", dict(vocab_size=V, attention="sparse"))
