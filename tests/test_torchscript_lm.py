"""rnnx's language models under TorchScript (issue 16): ``torch.jit.script(model)`` of a ``RecurrentLM``.

The dataclass states are Python only, so the scripted model takes the state's tensors as a list, in
:func:`rnnx.models.state.flatten_state` order (documented in :mod:`rnnx.models.lm`)::

    forward(tokens, state: List[Tensor], pad_mask: Optional[Tensor]) -> Tuple[Tensor, List[Tensor]]
    init_state(batch_size: int) -> List[Tensor];  state_names() -> List[str]

For both demo checkpoints and for an SRU LM, a softmax SRU++ LM (a growing KV cache beside layers without
attention) and a linear transformer without positions: the scripted model gives eager PyTorch's logits and
state to 1e-6 (same kernels) over a padded prefill and two decode steps, the same after ``torch.jit.save`` /
``torch.jit.load``, and the same initial state and state names. A wrong state or token shape is a one-line
error under TorchScript too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rnnx.models import build_model, load_checkpoint
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.models.lm import RecurrentLM
from rnnx.models.state import flatten_state

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.(script|save|load)` is deprecated:DeprecationWarning")
V = 23
BUILT = {
    "sru_lm": ("sru", {"vocab_size": V, "embed_dim": 16, "hidden_size": 16, "sru_options": {"rescale": True}}),
    "srupp_softmax_lm": (
        "srupp",
        {
            "vocab_size": V,
            "embed_dim": 16,
            "hidden_size": 16,
            "proj_size": 8,
            "num_layers": 3,
            "num_heads": 2,
            "attention": "softmax",
            "srupp_options": {"attention_every_n_layers": 2},
        },
    ),  # fmt: skip
    "linear_transformer_nopos": (
        "linear_transformer",
        {"vocab_size": V, "d_model": 16, "num_heads": 2, "positions": "none", "tie_weights": True},
    ),
}


def make(name: str) -> RecurrentLM:
    if name in DEMO_CHECKPOINTS:
        return load_checkpoint(demo_checkpoint_path(name))[0].eval()
    torch.manual_seed(0)
    return build_model(*BUILT[name]).eval()


def tensors(state) -> list[torch.Tensor]:
    return [t for _, t in flatten_state(state)]


def assert_same(got: list[torch.Tensor], want: list[torch.Tensor], tol: float, what: str) -> None:
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
        assert torch.allclose(g, w, atol=tol, rtol=tol), f"{what}: max |diff| {(g - w).abs().max().item():.3g}"


@pytest.mark.parametrize("name", [*DEMO_CHECKPOINTS, *BUILT])
def test_a_scripted_lm_matches_eager(name: str, tmp_path: Path) -> None:
    model = make(name)
    scripted = torch.jit.script(model)
    op = "rnnx::sru_scan" if "sru" in name else "rnnx::causal_linear_attention"
    assert op in str(scripted.inlined_graph)
    scripted.save(str(tmp_path / "lm.pt"))
    loaded = torch.jit.load(str(tmp_path / "lm.pt"))
    assert scripted.state_names() == loaded.state_names() == model.state_names()
    assert model.state_names() == [n for n, _ in flatten_state(model.init_state(2))]
    assert_same(scripted.init_state(2), tensors(model.init_state(2)), 0.0, "init_state")

    vocab = model.vocab_size
    tokens = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]) % vocab
    pad = torch.zeros(2, 5, dtype=torch.bool)
    pad[0, 1] = pad[1, 4] = True
    with torch.no_grad():
        logits, state = model(tokens, None, pad)
        got_logits, got_state = scripted(tokens, scripted.init_state(2), pad)
        for step in range(3):
            what = f"{name} {'prefill' if step == 0 else f'decode step {step}'}"
            assert_same([got_logits, *got_state], [logits, *tensors(state)], 1e-6, f"{what}: scripted vs eager")
            if step == 0:
                again = loaded(tokens, loaded.init_state(2), pad)
                assert_same([again[0], *again[1]], [got_logits, *got_state], 0.0, f"{what}: after save / load")
            nxt = logits[:, -1:].argmax(-1)
            logits, state = model(nxt, state)
            got_logits, got_state = scripted(nxt, got_state, None)


def test_scripted_lm_errors_are_clear() -> None:
    lt = torch.jit.script(make("linear_transformer_copy"))
    state = lt.init_state(1)
    with pytest.raises(torch.jit.Error, match=r"state has 4 tensors, the model takes 5: S and z for each of its 2 "
                       r"layers, then position"):  # fmt: skip
        lt(torch.zeros(1, 2, dtype=torch.long), state[:4], None)
    with pytest.raises(torch.jit.Error, match=r"tokens must be \(B, L\) with L >= 1, got shape \(3\)"):
        lt(torch.zeros(3, dtype=torch.long), state, None)
    with pytest.raises(torch.jit.Error, match=r"pad_mask shape \(1, 3\) != tokens shape \(1, 2\)"):
        lt(torch.zeros(1, 2, dtype=torch.long), state, torch.zeros(1, 3, dtype=torch.bool))
    srupp = torch.jit.script(make("srupp_softmax_lm"))
    with pytest.raises(torch.jit.Error, match=r"the state has 1 tensors but this SRUpp takes 4: c, then each"):
        srupp(torch.zeros(1, 2, dtype=torch.long), srupp.init_state(1)[:1], None)
    with pytest.raises(torch.jit.Error, match=r"state.c has shape \(3, 2, 16\) but expected \(3, 1, 16\)"):
        srupp(torch.zeros(1, 2, dtype=torch.long), [srupp.init_state(2)[0], *srupp.init_state(1)[1:]], None)
    sru = torch.jit.script(make("sru_lm"))
    with pytest.raises(torch.jit.Error, match=r"an SRU state is one tensor, c; got 2"):
        sru(torch.zeros(1, 2, dtype=torch.long), sru.init_state(1) * 2, None)


def test_an_lm_without_the_flat_form_says_it_cannot_be_scripted() -> None:
    class OwnForward(RecurrentLM):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(4, 2)

    with pytest.raises(TypeError, match="OwnForward has no flat-state form, so it cannot be scripted"):
        torch.jit.script(OwnForward())
