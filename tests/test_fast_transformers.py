"""rnnx.models.fast_transformers against the published pytorch-fast-transformers 0.4.0 itself.

Originals are built with fast-transformers' own builders (``TransformerEncoderBuilder`` for the
parallel form, ``RecurrentEncoderBuilder`` for the recurrent one, sharing weights through
``load_state_dict`` as its documentation does) and converted with :func:`rnnx.models.convert.convert`.
Parity is checked on the parallel form (causal mask, with and without a ``LengthMask``), on the
recurrent form step by step (outputs and final states), and on greedy decoding of a small LM.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

pytest.importorskip(
    "fast_transformers", reason="pytorch-fast-transformers 0.4.0 is not installed: run bash scripts/setup.sh"
)

from fast_transformers.attention import LinearAttention
from fast_transformers.builders import (
    RecurrentEncoderBuilder,
    TransformerDecoderBuilder,
    TransformerEncoderBuilder,
)
from fast_transformers.events import EventDispatcher, QKVEvent
from fast_transformers.feature_maps import ActivationFunctionFeatureMap, Favor
from fast_transformers.masking import FullMask, LengthMask, TriangularCausalMask

from rnnx.models.convert import ConversionError, convert, qualified_name, supported
from rnnx.models.fast_transformers import (
    CONVERTERS,
    LinearTransformerEncoder,
    LinearTransformerEncoderLayer,
    RecurrentLinearTransformerEncoder,
)
from rnnx.models.state import LinearAttentionState

TOL = 1e-5

#: builder keywords of the cases: (n_heads, query_dimensions, value_dimensions) give d_model = H * M
CONFIGS = {
    "relu-norm": dict(n_heads=2, query_dimensions=8, value_dimensions=8, activation="relu", final_normalization=True),
    "gelu-no-norm-dk-ne-dv": dict(
        n_heads=3, query_dimensions=5, value_dimensions=8, activation="gelu", final_normalization=False
    ),
}


def builder_kwargs(name: str, **overrides: object) -> dict:
    """Keywords for both builders: 2 causal-linear layers of the named config."""
    kwargs = dict(n_layers=2, feed_forward_dimensions=40, dropout=0.1, attention_type="causal-linear")
    kwargs.update(CONFIGS[name])
    kwargs.update(overrides)
    return kwargs


def parallel_encoder(seed: int = 0, **kwargs: object) -> nn.Module:
    """A fast-transformers TransformerEncoder in eval mode, its LayerNorms randomised too."""
    torch.manual_seed(seed)
    encoder = TransformerEncoderBuilder.from_kwargs(**kwargs).get()
    with torch.no_grad():
        for module in encoder.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.1)
    return encoder.eval()


def recurrent_twin(encoder: nn.Module, **kwargs: object) -> nn.Module:
    """The RecurrentTransformerEncoder with ``encoder``'s weights, in eval mode."""
    recurrent = RecurrentEncoderBuilder.from_kwargs(**kwargs).get()
    recurrent.load_state_dict(encoder.state_dict())
    return recurrent.eval()


def d_model_of(kwargs: dict) -> int:
    return kwargs["n_heads"] * kwargs["value_dimensions"]


def max_err(a: Tensor, b: Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def run_original_recurrent(recurrent: nn.Module, x: Tensor) -> tuple[Tensor, list]:
    """Steps fast-transformers' recurrent encoder over x (B, L, D); returns (y (B, L, D), final state)."""
    state, outs = None, []
    for t in range(x.shape[1]):
        y, state = recurrent(x[:, t], state)
        outs.append(y)
    return torch.stack(outs, dim=1), state


# ----- registration and imports


def test_importing_the_module_does_not_import_fast_transformers() -> None:
    code = "import sys, rnnx.models.fast_transformers; assert 'fast_transformers' not in sys.modules, 'imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_converters_are_keyed_by_the_published_class_names() -> None:
    kwargs = builder_kwargs("relu-norm")
    encoder = TransformerEncoderBuilder.from_kwargs(**kwargs).get()
    recurrent = RecurrentEncoderBuilder.from_kwargs(**kwargs).get()
    for module in (encoder, encoder.layers[0], recurrent, recurrent.layers[0]):
        name = qualified_name(type(module))
        assert name in CONVERTERS and name in supported(), name


# ----- parallel form


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_parallel_form_matches_transformer_encoder(config: str) -> None:
    kwargs = builder_kwargs(config)
    encoder = parallel_encoder(**kwargs)
    converted = convert(encoder)
    assert isinstance(converted, LinearTransformerEncoder) and not converted.training
    torch.manual_seed(1)
    B, L = 3, 17
    x = torch.randn(B, L, d_model_of(kwargs))
    with torch.no_grad():
        expected = encoder(x, attn_mask=TriangularCausalMask(L))
        got, state = converted.forward_state(x)
    assert max_err(got, expected) <= TOL
    assert len(state) == kwargs["n_layers"] and all(isinstance(s, LinearAttentionState) for s in state)
    H, E, M = kwargs["n_heads"], kwargs["query_dimensions"], kwargs["value_dimensions"]
    assert state[0].S.shape == (B, H, E, M) and state[0].z.shape == (B, H, E)
    assert state[0].S.dtype == torch.float32


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_parallel_form_with_length_mask(config: str) -> None:
    kwargs = builder_kwargs(config)
    encoder = parallel_encoder(**kwargs)
    converted = convert(encoder)
    torch.manual_seed(2)
    L = 12
    lengths = torch.tensor([12, 7, 1])
    x = torch.randn(3, L, d_model_of(kwargs))
    length_mask = LengthMask(lengths, max_len=L)
    with torch.no_grad():
        expected = encoder(x, attn_mask=TriangularCausalMask(L), length_mask=length_mask)
        got, state = converted.forward_state(x, pad_mask=~length_mask.bool_matrix)
        # the state after a padded batch is that of each row's real tokens alone
        for row, n in enumerate(lengths.tolist()):
            _, alone = converted.forward_state(x[row : row + 1, :n])
            for s, a in zip(state, alone):
                assert max_err(s.S[row], a.S[0]) <= TOL and max_err(s.z[row], a.z[0]) <= TOL
    # fast-transformers still computes the outputs of pad positions (from the real keys): all of them match
    assert max_err(got, expected) <= TOL


# ----- recurrent form


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("source", ["parallel", "recurrent"])
def test_recurrent_form_matches_recurrent_transformer_encoder(config: str, source: str) -> None:
    kwargs = builder_kwargs(config)
    encoder = parallel_encoder(**kwargs)
    recurrent = recurrent_twin(encoder, **kwargs)
    converted = convert(encoder if source == "parallel" else recurrent)
    torch.manual_seed(3)
    B, n, m = 2, 6, 5
    x = torch.randn(B, n + m, d_model_of(kwargs))
    with torch.no_grad():
        expected, original_state = run_original_recurrent(recurrent, x)
        prefill, state = converted.forward_state(x[:, :n])
        steps = [prefill]
        for t in range(n, n + m):
            y, state = converted.forward_state(x[:, t : t + 1], state)
            steps.append(y)
    assert max_err(torch.cat(steps, dim=1), expected) <= TOL
    # fast-transformers' recurrent state of a layer is [Si (B, H, E, M), Zi (B, H, E)]: (S, z) as is
    assert len(original_state) == len(state)
    for (Si, Zi), s in zip(original_state, state):
        assert s.S.shape == Si.shape and s.z.shape == Zi.shape
        assert max_err(s.S, Si) <= TOL * max(1.0, Si.abs().max().item())
        assert max_err(s.z, Zi) <= TOL * max(1.0, Zi.abs().max().item())


def test_converted_models_keep_their_fast_transformers_calls() -> None:
    """Drop-in: a user's forward written against fast-transformers runs unchanged after convert()."""

    class Tagger(nn.Module):
        def __init__(self, encoder: nn.Module) -> None:
            super().__init__()
            self.encoder, self.head = encoder, nn.Linear(encoder.layers[0].linear2.out_features, 3)

        def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
            mask = TriangularCausalMask(x.shape[1], device=x.device)
            return self.head(self.encoder(x, attn_mask=mask, length_mask=LengthMask(lengths, max_len=x.shape[1])))

    kwargs = builder_kwargs(sorted(CONFIGS)[0])
    model = Tagger(parallel_encoder(**kwargs)).eval()
    converted = convert(model)
    assert isinstance(converted.encoder, LinearTransformerEncoder)
    x, lengths = torch.randn(3, 9, d_model_of(kwargs)), torch.tensor([9, 5, 2])
    with torch.no_grad():
        want, got = model(x, lengths), converted(x, lengths)
        real = torch.arange(9)[None, :] < lengths[:, None]
        assert max_err(got[real], want[real]) <= TOL
        recurrent = recurrent_twin(model.encoder, **kwargs)
        twin = convert(recurrent)
        assert isinstance(twin, RecurrentLinearTransformerEncoder)
        state_a = state_b = None
        for t in range(4):  # the recurrent call: one (B, D) step at a time, state passed back as returned
            ya, state_a = recurrent(x[:, t], state_a)
            yb, state_b = twin(x[:, t], state_b)
            assert yb.shape == ya.shape and max_err(yb, ya) <= TOL
    with pytest.raises(ValueError, match="lower-triangular"):
        converted.encoder(x, attn_mask=FullMask(9, device=x.device))


def test_recurrent_twin_takes_and_returns_the_originals_list_state() -> None:
    """fast-transformers' recurrent state is a list of ``[Si, Zi]`` per layer: the converted encoder takes it
    (the call of the issue), returns it in that form (``state=None`` too, as the original), and its numbers
    are the original's step after step. Unlike the original, it never updates the state passed in."""
    kwargs = dict(n_layers=2, n_heads=2, query_dimensions=4, value_dimensions=4, attention_type="causal-linear")
    torch.manual_seed(5)
    recurrent = RecurrentEncoderBuilder.from_kwargs(**kwargs).get().eval()
    converted = convert(recurrent)

    def zeros() -> list[list[Tensor]]:
        return [[torch.zeros(2, 2, 4, 4), torch.zeros(2, 2, 4)] for _ in range(2)]

    xs = torch.randn(5, 2, 8)
    with torch.no_grad():
        given = zeros()
        y, state = converted(xs[0], state=given)
        assert all(a.abs().sum() == 0 and b.abs().sum() == 0 for a, b in given)  # not updated in place
        want, want_state = recurrent(xs[0], state=zeros())  # fast-transformers adds into the given state
        for t in range(1, 5):
            assert isinstance(state, list) and all(isinstance(layer, list) and len(layer) == 2 for layer in state)
            assert max_err(y, want) <= TOL
            for (S, z), (S0, z0) in zip(state, want_state):
                assert max_err(S, S0) <= TOL * S0.abs().max().item() and max_err(z, z0) <= TOL * z0.abs().max().item()
            y, state = converted(xs[t], state=state)
            want, want_state = recurrent(xs[t], state=want_state)
        _, fresh = converted(xs[0])  # state=None: the original's form as well
        assert isinstance(fresh[0], list) and fresh[0][0].shape == (2, 2, 4, 4) and fresh[0][1].shape == (2, 2, 4)
        _, rnnx_form = converted(xs[0], state=converted.init_state(2))  # rnnx's own form stays rnnx's
        assert isinstance(rnnx_form[0], LinearAttentionState)
    with pytest.raises(ValueError, match=r"state\[1\]: expected fast-transformers' \[Si \(B, H, E, M\), Zi"):
        converted(xs[0], state=[zeros()[0], torch.zeros(2, 2, 4)])


def test_a_length_mask_exports_with_parity(tmp_path) -> None:
    """A user's forward that builds a ``LengthMask`` from its lengths input exports (no branch on the
    mask's data), and the export gives fast-transformers' outputs at every real position."""
    import numpy as np

    import rnnx.runtime as rt
    from rnnx.export import export

    class Tagger(nn.Module):
        def __init__(self, encoder: nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
            L = x.shape[1]
            return self.encoder(x, attn_mask=TriangularCausalMask(L), length_mask=LengthMask(lengths, max_len=L))

    kwargs = builder_kwargs(sorted(CONFIGS)[0])
    original = Tagger(parallel_encoder(seed=6, **kwargs)).eval()
    torch.manual_seed(7)
    x, lengths = torch.randn(3, 7, d_model_of(kwargs)), torch.tensor([7, 4, 1])
    export(convert(original), (x, lengths), tmp_path / "tagger", target="onnxruntime")
    got = rt.load(tmp_path / "tagger").run(x=x.numpy(), lengths=lengths.numpy())["output"]
    with torch.no_grad():
        want = original(x, lengths).numpy()
    real = np.arange(7)[None, :] < lengths.numpy()[:, None]
    assert np.abs(got[real] - want[real]).max() <= 1e-4


# ----- greedy decoding of a small LM


class TinyLM(nn.Module):
    """Embedding -> fast-transformers encoder -> linear head (the user's model to convert)."""

    def __init__(self, vocab: int, encoder: nn.Module, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.encoder = encoder
        self.head = nn.Linear(d_model, vocab)


def greedy_original(lm: TinyLM, recurrent: nn.Module, prompt: list[int], n_new: int) -> list[int]:
    """Greedy decoding with fast-transformers' RecurrentTransformerEncoder, one token per call."""
    tokens, state = list(prompt), None
    for t in range(len(prompt) + n_new - 1):
        h, state = recurrent(lm.embedding(torch.tensor([tokens[t]])), state)
        if t >= len(prompt) - 1:
            tokens.append(int(lm.head(h).argmax(-1)))
    return tokens[len(prompt) :]


def greedy_converted(lm: nn.Module, prompt: list[int], n_new: int) -> list[int]:
    """Greedy decoding with the converted LM: one prefill call over the prompt, then one call per token."""
    h, state = lm.encoder.forward_state(lm.embedding(torch.tensor([prompt])))
    new = []
    for _ in range(n_new):
        new.append(int(lm.head(h[:, -1]).argmax(-1)))
        h, state = lm.encoder.forward_state(lm.embedding(torch.tensor([[new[-1]]])), state)
    return new


def test_greedy_decoding_gives_the_same_tokens() -> None:
    kwargs = builder_kwargs("gelu-no-norm-dk-ne-dv", final_normalization=True)
    vocab, d_model = 37, d_model_of(kwargs)
    lm = TinyLM(vocab, parallel_encoder(seed=4, **kwargs), d_model).eval()
    with torch.no_grad():
        lm.embedding.weight.mul_(3.0)
    recurrent = recurrent_twin(lm.encoder, **kwargs)
    converted = convert(lm)
    assert isinstance(converted.encoder, LinearTransformerEncoder) and isinstance(lm.encoder, nn.Module)
    prompts = [[3], [5, 1, 30, 7], [12, 12, 0, 36, 8, 2, 19]]
    with torch.no_grad():
        for prompt in prompts:
            expected = greedy_original(lm, recurrent, prompt, 20)
            assert greedy_converted(converted, prompt, 20) == expected, prompt
        assert len({tuple(greedy_original(lm, recurrent, p, 20)) for p in prompts}) > 1


# ----- what is rejected


class Wrapper(nn.Module):
    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Identity(), encoder)


def assert_rejected(encoder: nn.Module, *fragments: str) -> None:
    """convert() of a model holding ``encoder`` at body.1 raises one line naming that path; the model's
    state_dict is unchanged."""
    model = Wrapper(encoder)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ConversionError) as info:
        convert(model)
    message = str(info.value)
    assert message.startswith("body.1: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


def test_full_attention_is_rejected() -> None:
    kwargs = builder_kwargs("relu-norm", attention_type="full")
    assert_rejected(
        TransformerEncoderBuilder.from_kwargs(**kwargs).get(), "body.1.layers.0.attention.inner_attention is", "softmax"
    )
    assert_rejected(RecurrentEncoderBuilder.from_kwargs(**kwargs).get(), "RecurrentFullAttention")


def test_non_causal_linear_attention_is_rejected() -> None:
    kwargs = builder_kwargs("relu-norm", attention_type="linear")
    encoder = TransformerEncoderBuilder.from_kwargs(**kwargs).get()
    assert_rejected(encoder, "body.1.layers.0.attention.inner_attention is", "non-causal")
    # one non-causal layer in an otherwise causal stack is named by its index
    mixed = TransformerEncoderBuilder.from_kwargs(**builder_kwargs("relu-norm")).get()
    mixed.layers[1].attention.inner_attention = LinearAttention(kwargs["query_dimensions"])
    assert_rejected(mixed, "body.1.layers.1.attention.inner_attention is", "LinearAttention")


@pytest.mark.parametrize(
    "feature_map",
    [ActivationFunctionFeatureMap.factory(lambda x: F.elu(x) + 1), Favor.factory(n_dims=16)],
    ids=["own-elu-lambda", "favor"],
)
@pytest.mark.parametrize("builder", [TransformerEncoderBuilder, RecurrentEncoderBuilder], ids=["parallel", "recurrent"])
def test_custom_feature_map_is_rejected(feature_map: object, builder: type) -> None:
    kwargs = builder_kwargs("relu-norm", feature_map=feature_map)
    assert_rejected(builder.from_kwargs(**kwargs).get(), "body.1.layers.0.attention.inner_attention.feature_map is")


def test_event_dispatcher_with_listeners_is_rejected() -> None:
    dispatcher = EventDispatcher()
    dispatcher.listen(QKVEvent, lambda event: None)
    kwargs = builder_kwargs("relu-norm", event_dispatcher=dispatcher)
    assert_rejected(TransformerEncoderBuilder.from_kwargs(**kwargs).get(), "body.1.event_dispatcher has listeners")


def test_decoder_is_rejected() -> None:
    decoder = TransformerDecoderBuilder.from_kwargs(
        n_layers=1,
        n_heads=2,
        query_dimensions=4,
        value_dimensions=4,
        self_attention_type="causal-linear",
        cross_attention_type="linear",
    ).get()
    assert_rejected(decoder, "decoder")


def test_bare_encoder_layer_converts() -> None:
    kwargs = builder_kwargs("gelu-no-norm-dk-ne-dv")
    encoder = parallel_encoder(**kwargs)
    layer = convert(Wrapper(encoder.layers[1])).body[1]
    assert isinstance(layer, LinearTransformerEncoderLayer)
    torch.manual_seed(5)
    x = torch.randn(2, 9, d_model_of(kwargs))
    with torch.no_grad():
        expected = encoder.layers[1](x, attn_mask=TriangularCausalMask(9))
        got, _ = layer(x)
    assert max_err(got, expected) <= TOL


def test_conversion_keeps_dtype_device_mode_and_requires_grad() -> None:
    kwargs = builder_kwargs("relu-norm")
    encoder = parallel_encoder(**kwargs).double().train()
    encoder.layers[0].linear1.weight.requires_grad_(False)
    converted = convert(encoder)
    assert converted.training and converted.layers[1].dropout.training
    assert converted.layers[0].dropout.p == 0.1
    assert all(p.dtype == torch.float64 for p in converted.parameters())
    assert not converted.layers[0].linear1.weight.requires_grad and converted.layers[0].linear2.weight.requires_grad
    assert converted.init_state(2)[0].S.dtype == torch.float64
    original = {k: v.clone() for k, v in encoder.state_dict().items()}
    converted_sd = converted.state_dict()
    assert original.keys() == converted_sd.keys()
    assert all(torch.equal(original[k], converted_sd[k]) for k in original)


# ----- the rnnx module alone


def test_from_config_has_the_builder_state_dict() -> None:
    kwargs = builder_kwargs("gelu-no-norm-dk-ne-dv")
    original = TransformerEncoderBuilder.from_kwargs(**kwargs).get().state_dict()
    config = {k: v for k, v in kwargs.items() if k != "attention_type"}
    ours = LinearTransformerEncoder.from_config(**config)
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in original.items()}
    ours.load_state_dict(original)


def seeded_encoder(seed: int, n_layers: int, query_dimensions: int, value_dimensions: int) -> LinearTransformerEncoder:
    """A 2-head LinearTransformerEncoder without dropout, in eval mode, built after ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    return LinearTransformerEncoder.from_config(
        n_layers=n_layers,
        n_heads=2,
        query_dimensions=query_dimensions,
        value_dimensions=value_dimensions,
        feed_forward_dimensions=16,
        dropout=0.0,
    ).eval()


def test_prefill_then_steps_equal_one_call() -> None:
    model = seeded_encoder(6, n_layers=3, query_dimensions=6, value_dimensions=5)
    x = torch.randn(2, 13, 10)
    with torch.no_grad():
        full, full_state = model.forward_state(x)
        y, state = model.forward_state(x[:, :8], model.init_state(2))
        outs = [y]
        for t in range(8, 13):
            y, state = model.forward_state(x[:, t : t + 1], state)
            outs.append(y)
    assert max_err(torch.cat(outs, dim=1), full) <= TOL
    for a, b in zip(state, full_state):
        assert max_err(a.S, b.S) <= TOL and max_err(a.z, b.z) <= TOL


def test_pad_positions_do_not_change_the_state() -> None:
    model = seeded_encoder(7, n_layers=2, query_dimensions=4, value_dimensions=4)
    x = torch.randn(1, 10, 8)
    pad = torch.zeros(1, 10, dtype=torch.bool)
    pad[0, [2, 5, 6, 9]] = True
    with torch.no_grad():
        _, start = model.forward_state(torch.randn(1, 3, 8))
        y, state = model.forward_state(x, start, pad_mask=pad)
        y_real, state_real = model.forward_state(x[:, ~pad[0]], start)
        _, unchanged = model.forward_state(x[:, :1], start, pad_mask=torch.ones(1, 1, dtype=torch.bool))
    assert max_err(y[:, ~pad[0]], y_real) <= TOL
    for a, b, s0, s1 in zip(state, state_real, start, unchanged):
        assert max_err(a.S, b.S) <= TOL and max_err(a.z, b.z) <= TOL
        assert torch.equal(s0.S, s1.S) and torch.equal(s0.z, s1.z)


def test_bad_inputs_are_rejected() -> None:
    model = LinearTransformerEncoder.from_config(n_layers=1, n_heads=2, query_dimensions=4, value_dimensions=4)
    with pytest.raises(ValueError, match="x must have shape"):
        model.forward_state(torch.randn(2, 7))
    with pytest.raises(ValueError, match="pad_mask must have shape"):
        model.forward_state(torch.randn(2, 3, 8), pad_mask=torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="state has 2 layers"):
        model.forward_state(torch.randn(2, 3, 8), model.init_state(2) * 2)
