"""rnnx twins of transformers' recurrent token mixers, and the GLA / retention layers.

transformers' layers run on their pure-PyTorch paths (``torch_chunk_gated_delta_rule``,
``torch_recurrent_gated_delta_rule``, ``causal_conv1d_fn`` / ``causal_conv1d_update``, ``mamba2_chunk_scan``,
``mamba2_selective_state_update``; checked below) on tiny random fp32 configs, and are compared with the converted
rnnx layers: the output and both cached states after a prefill and after a decode step. Tolerance: max abs error
over max abs value (of the reference) below 1e-4 (``REL``). The GLA and retention layers are compared with the
float64 naive twin of the op, ``linear_recurrence_naive``.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed: the twins are compared with its layers"
)

from rnnx.models.convert import ConversionError, convert  # noqa: E402
from rnnx.models.gated_deltanet import ConvRecurrentState, GatedDeltaNet  # noqa: E402
from rnnx.models.gla import GatedLinearAttention, RetentionLayer, retention_log_decay  # noqa: E402
from rnnx.models.mamba2 import Mamba2Mixer  # noqa: E402
from rnnx.models.ops.linear_recurrence import linear_recurrence_naive  # noqa: E402

#: max |twin - reference| / max |reference|, fp32
REL = 1e-4
#: tiny configs, FIELD.md's recipes (Mamba-2 with 2 groups, so that the group -> head expansion is exercised)
QWEN = dict(
    vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
    intermediate_size=128, initializer_range=0.2,
)  # fmt: skip
QWEN_NEXT_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32)
MAMBA2 = dict(
    vocab_size=256, hidden_size=64, num_hidden_layers=2, num_heads=8, head_dim=16, state_size=16, n_groups=2,
    expand=2, chunk_size=16, initializer_range=0.2,
)  # fmt: skip
REPO = Path(__file__).resolve().parents[1]
BATCH, PREFILL = 2, 21  # PREFILL > chunk_size: transformers' chunked paths cross a chunk boundary


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().double(), want.detach().double()
    return float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))


def _randomise_mixers(model: torch.nn.Module) -> None:
    """Moves A_log, dt_bias, D and the gated norms' weights off their constant inits, so every term counts."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "A_log"):
                module.A_log.copy_(torch.rand(module.A_log.shape, generator=gen) * 2.5 - 1)
                module.dt_bias.copy_(torch.randn(module.dt_bias.shape, generator=gen))
                module.norm.weight.copy_(1 + 0.3 * torch.randn(module.norm.weight.shape, generator=gen))
                if hasattr(module, "D"):
                    module.D.copy_(torch.randn(module.D.shape, generator=gen))


def _run_captured(model, layer, cache_of, layer_idx: int, **step_kw) -> dict:
    """Runs a prefill then one decode step of ``model`` with a cache, capturing ``layer``'s inputs and outputs and
    the cache's conv / recurrent state of ``layer_idx`` after each."""
    calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    handle = layer.register_forward_hook(
        lambda mod, args, kwargs, out: calls.append((args[0] if args else kwargs["hidden_states"], out)),
        with_kwargs=True,
    )
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 256, (BATCH, PREFILL), generator=gen)
    nxt = torch.randint(0, 256, (BATCH, 1), generator=gen)
    states = []
    try:
        with torch.no_grad():
            cache = cache_of(model(ids, use_cache=True))
            states.append((cache.get_conv_state(layer_idx).clone(), cache.get_recurrent_state(layer_idx).clone()))
            model(nxt, use_cache=True, **{step_kw["cache_kw"]: cache})
            states.append((cache.get_conv_state(layer_idx).clone(), cache.get_recurrent_state(layer_idx).clone()))
    finally:
        handle.remove()
    assert len(calls) == 2
    return {"calls": calls, "states": states}


#: the two transformers models whose mixers are captured: the model (built from a config), the captured mixer
#: layer, its index in the cache, and the output's field holding the cache
CAPTURED = {
    "qwen3_5": (
        lambda: transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**QWEN)),
        lambda model: model.model.layers[0].linear_attn,
        0,
        lambda out: out.past_key_values,
    ),
    "mamba2": (
        lambda: transformers.Mamba2ForCausalLM(transformers.Mamba2Config(**MAMBA2)),
        lambda model: model.backbone.layers[1].mixer,
        1,
        lambda out: out.cache,
    ),
}


def _captured(family: str) -> dict:
    """``CAPTURED[family]``'s model (seed 0, eval, mixers randomised), its captured layer, and that layer's calls
    and states over a prefill and a decode step (:func:`_run_captured`)."""
    build, layer_of, layer_idx, cache_of = CAPTURED[family]
    torch.manual_seed(0)
    model = build().eval()
    _randomise_mixers(model)
    layer = layer_of(model)
    return {"model": model, "layer": layer, **_run_captured(model, layer, cache_of, layer_idx, cache_kw="cache")}


@pytest.fixture(scope="module")
def qwen3_5():
    return _captured("qwen3_5")


@pytest.fixture(scope="module")
def mamba2():
    return _captured("mamba2")


def test_transformers_runs_its_torch_paths() -> None:
    """The references are transformers' pure-PyTorch functions, not FLA / causal-conv1d / mamba-ssm kernels."""
    from transformers.models.mamba2 import modeling_mamba2
    from transformers.models.qwen3_5 import modeling_qwen3_5
    from transformers.models.qwen3_next import modeling_qwen3_next

    functions = [
        getattr(module, name)
        for module in (modeling_qwen3_5, modeling_qwen3_next)
        for name in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
                     "causal_conv1d_update")
    ] + [getattr(modeling_mamba2, name) for name in ("mamba2_chunk_scan", "mamba2_selective_state_update",
                                                      "causal_conv1d_fn", "causal_conv1d_update")]  # fmt: skip
    for fn in functions:
        nonlocals = inspect.getclosurevars(fn).nonlocals
        if "is_new_implementation" not in nonlocals:
            pytest.skip(f"cannot tell which implementation transformers picked for {fn.__name__}")
        assert nonlocals["is_new_implementation"] is False, f"{fn.__module__}.{fn.__name__} uses a kernel package"


def _check_twin(twin, data: dict, recurrent_of=lambda s: s) -> dict[str, float]:
    """Prefill then one step of ``twin`` on the captured inputs against transformers' outputs and cache."""
    (x0, y0), (x1, y1) = data["calls"]
    errors = {}
    with torch.no_grad():
        out0, state = twin(x0)
        out1, state1 = twin(x1, state)
    for tag, out, want, st, (conv, rec) in (
        ("prefill", out0, y0, state, data["states"][0]),
        ("step", out1, y1, state1, data["states"][1]),
    ):
        errors[f"{tag} output"] = rel_err(out, want)
        errors[f"{tag} conv"] = rel_err(st.conv, conv[..., 1:])  # transformers keeps K inputs, rnnx K-1
        errors[f"{tag} recurrent"] = rel_err(st.recurrent, recurrent_of(rec))
    assert max(errors.values()) < REL, errors
    return errors


def test_qwen3_5_gated_deltanet_matches_transformers(qwen3_5) -> None:
    twin = convert(qwen3_5["layer"])
    assert isinstance(twin, GatedDeltaNet)
    assert (twin.num_key_heads, twin.num_value_heads) == (2, 4)
    _check_twin(twin, qwen3_5)


def test_qwen3_next_gated_deltanet_matches_transformers() -> None:
    """Qwen3-Next's fused in_proj_qkvz / in_proj_ba, split by the converter; the layer called with a cache."""
    from transformers.cache_utils import DynamicCache
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet

    cfg = transformers.Qwen3NextConfig(**QWEN, **QWEN_NEXT_MOE)
    torch.manual_seed(0)
    layer = Qwen3NextGatedDeltaNet(cfg, 0).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.2)
    _randomise_mixers(layer)
    x = torch.randn(BATCH, PREFILL, cfg.hidden_size)
    x1 = torch.randn(BATCH, 1, cfg.hidden_size)
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        y0 = layer(x, cache=cache)
        states = [(cache.get_conv_state(0).clone(), cache.get_recurrent_state(0).clone())]
        y1 = layer(x1, cache=cache)
        states.append((cache.get_conv_state(0).clone(), cache.get_recurrent_state(0).clone()))
    twin = convert(layer)
    assert isinstance(twin, GatedDeltaNet)
    _check_twin(twin, {"calls": [(x, y0), (x1, y1)], "states": states})


def test_mamba2_mixer_matches_transformers(mamba2) -> None:
    twin = convert(mamba2["layer"])
    assert isinstance(twin, Mamba2Mixer)
    assert (twin.num_heads, twin.n_groups, twin.state_size, twin.head_dim) == (8, 2, 16, 16)
    # transformers' SSM state is (B, H, head_dim, d_state); rnnx's (B, H, d_state, head_dim)
    _check_twin(twin, mamba2, recurrent_of=lambda s: s.transpose(-1, -2))


def test_converting_a_whole_model_swaps_only_the_mixers(qwen3_5, mamba2) -> None:
    model = qwen3_5["model"]
    converted = convert(model)
    kinds = [
        type(layer.linear_attn if hasattr(layer, "linear_attn") else layer.self_attn) for layer in model.model.layers
    ]
    new_kinds = [
        type(layer.linear_attn if hasattr(layer, "linear_attn") else layer.self_attn)
        for layer in converted.model.layers
    ]
    assert [k.__name__ for k in kinds] == ["Qwen3_5GatedDeltaNet"] * 3 + ["Qwen3_5Attention"]
    assert new_kinds == [GatedDeltaNet] * 3 + [kinds[3]]
    assert type(model.model.layers[0].linear_attn).__name__ == "Qwen3_5GatedDeltaNet"  # the original is untouched
    for old, new in zip(model.model.layers, converted.model.layers):
        assert type(new.mlp) is type(old.mlp) and type(new.input_layernorm) is type(old.input_layernorm)
    assert type(converted.lm_head) is type(model.lm_head)

    mixers = [block.mixer for block in convert(mamba2["model"]).backbone.layers]
    assert [type(m) for m in mixers] == [Mamba2Mixer, Mamba2Mixer]


def test_unsupported_activation_is_refused(qwen3_5) -> None:
    import copy

    layer = copy.deepcopy(qwen3_5["layer"])
    layer.activation = "gelu"
    with pytest.raises(ConversionError, match="^<root>: .*Qwen3_5GatedDeltaNet.*gelu"):
        convert(layer)


def test_rnnx_modules_do_not_import_transformers() -> None:
    """The converter and the layers recognise transformers' classes by name; no import of it anywhere in them."""
    for module in ("convert_transformers", "gated_deltanet", "mamba2", "gla"):
        tree = ast.parse((REPO / "models" / f"{module}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "transformers" for n in names), f"models/{module}.py imports {names}"


# ---- rnnx-only properties of every layer: prefill + steps == one pass; a padded batch == each row alone --------


def _layers() -> dict[str, torch.nn.Module]:
    torch.manual_seed(3)
    layers = {
        "gated_deltanet": GatedDeltaNet(32, num_key_heads=2, num_value_heads=4, key_head_dim=8, value_head_dim=8),
        "mamba2": Mamba2Mixer(32, num_heads=4, head_dim=8, state_size=8, n_groups=2),
        "gla": GatedLinearAttention(32, num_heads=2, gate_low_rank_dim=8),
        "retention": RetentionLayer(32, num_heads=4),
    }
    with torch.no_grad():
        for layer in layers.values():
            for p in layer.parameters():
                p.normal_(0, 0.3)
    return layers


LAYERS = _layers()


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_prefill_then_steps_equals_one_pass(name: str) -> None:
    layer = LAYERS[name]
    x = torch.randn(2, 11, 32)
    with torch.no_grad():
        full, full_state = layer(x)
        out, state = layer(x[:, :6])
        outs = [out]
        for t in range(6, 11):
            out, state = layer(x[:, t : t + 1], state)
            outs.append(out)
    assert rel_err(torch.cat(outs, 1), full) < REL
    assert rel_err(state.recurrent, full_state.recurrent) < REL
    if state.conv is not None:
        assert rel_err(state.conv, full_state.conv) < REL


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_right_padded_batch_equals_rows_alone(name: str) -> None:
    layer = LAYERS[name]
    lengths = [9, 5]
    x = torch.randn(2, 9, 32)
    pad = torch.arange(9)[None, :] >= torch.tensor(lengths)[:, None]  # True = pad
    with torch.no_grad():
        out, state = layer(x, pad_mask=pad)
        for row, n in enumerate(lengths):
            alone, alone_state = layer(x[row : row + 1, :n])
            assert rel_err(out[row : row + 1, :n], alone) < REL
            assert rel_err(state.recurrent[row : row + 1], alone_state.recurrent) < REL
            if state.conv is not None:
                assert rel_err(state.conv[row : row + 1], alone_state.conv) < REL


# ---- GLA and retention against the op's float64 naive twin ------------------------------------------------------


@pytest.mark.parametrize("name", ["gla", "retention"])
def test_gla_and_retention_match_the_naive_recurrence(name: str) -> None:
    layer = LAYERS[name]
    x = torch.randn(2, 13, 32)
    S0 = torch.randn(2, layer.num_heads, layer.head_k_dim, layer.head_v_dim)
    with torch.no_grad():
        out, state = layer(x, ConvRecurrentState(conv=None, recurrent=S0))
        q, k, v, decay = layer.recurrence_inputs(x)
        o, S = linear_recurrence_naive(
            q, k, v, S0, decay, None, q_num_heads=layer.num_heads, kv_num_heads=layer.num_heads,
            update_rule="gated", scale=layer.head_k_dim**-0.5,
        )  # fmt: skip
        want = layer.output(o.float(), x)
    assert rel_err(out, want) < REL
    assert rel_err(state.recurrent, S) < REL


def test_gla_and_retention_decays() -> None:
    gla, retention = LAYERS["gla"], LAYERS["retention"]
    x = torch.randn(2, 3, 32)
    with torch.no_grad():
        decay = gla.log_decay(x)
        assert decay.shape == (2, 3, gla.key_dim) and bool((decay < 0).all())  # per key dim, in (-inf, 0)
        want = torch.nn.functional.logsigmoid(gla.gk_proj(x)) / gla.gate_logit_normalizer
        assert rel_err(decay, want) < 1e-6
    gamma = retention.log_decay(x).exp()
    assert gamma.shape == (2, 3, 4)
    assert torch.allclose(
        gamma[0, 0].double(), torch.tensor([1 - 2.0 ** (-5 - h) for h in range(4)], dtype=torch.float64), atol=1e-7
    )
    assert torch.allclose(retention_log_decay(4).exp(), 1 - 2.0 ** (-5 - torch.arange(4.0, dtype=torch.float64)))
