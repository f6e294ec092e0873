"""The sru 3.0 constructor API of ``rnnx.models.SRU`` / ``SRUCell`` / ``SRUppCell`` / ``SRUpp`` (issue 20).

Each configuration is one constructor call, written once as a Python expression over ``lib`` and built both
with the published package (``lib`` = ``sru``, in a subprocess, ``tests/sru_reference.py``) and with rnnx
(``lib`` = the rnnx classes): per-layer projection tuples, a user's transform module copied for each layer,
a list of them (an MLP, a causal attention block, SRU++'s attention), and every other constructor argument
of sru 3.0.0.dev6's SRU, SRUCell and SRUppCell. Against sru 3.0.0.dev6:

* the same seed gives the same initial weights, the state dict has the same names and shapes and
  ``rnn_lst[i].transform_module`` the same type;
* the package's state dict loads unchanged (strict) and outputs and last states agree to 1e-5, eager and
  under ``torch.jit.script``; a unidirectional SRU streamed with ``forward_state`` in chunks ends in the
  package's h and c.

Against sru 2.6.0: ``custom_m`` models (one module, a list, an SRUCell) initialise and run as 2.6's do, and
2.6 state dicts load into layers of sru 3.0's layout. Then: training and exporting (``rnnx.export.export``,
``rnnx.runtime``) a model with a user's transform, and the errors for conflicting arguments.
"""

from __future__ import annotations

import inspect
import re
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sru_reference import missing_reason, reference_dir, run_reference
from torch import Tensor, nn

from rnnx.models import SRU, SRUCell, SRUpp
from rnnx.models.srupp import SRUppAttention, SRUppCell, SRUppProjectedLinear

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.(script|save|load)` is deprecated:DeprecationWarning",
    "ignore:.*deprecated in sru:DeprecationWarning",
)
TOL = 1e-5
L, B = 7, 3


class MLP(nn.Module):
    """A token-wise transform: (L, B, in) -> (L, B, out), LayerNorm, a tanh hidden layer."""

    def __init__(self, in_features: int, out_features: int, hidden: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(in_features)
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, out_features)

    def reset_parameters(self) -> None:
        for fc in (self.fc1, self.fc2):
            nn.init.xavier_uniform_(fc.weight)
            nn.init.uniform_(fc.bias, -0.1, 0.1)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(torch.tanh(self.fc1(self.norm(x))))


class CausalAttention(nn.Module):
    """A user's attention block as a transform: causal one-head self-attention over the call's steps,
    (L, B, in) -> (L, B, out)."""

    def __init__(self, in_features: int, out_features: int, width: int = 8) -> None:
        super().__init__()
        self.qkv = nn.Linear(in_features, 3 * width)
        self.out = nn.Linear(width, out_features, bias=False)
        self.scale = width**-0.5

    def reset_parameters(self) -> None:
        self.qkv.reset_parameters()
        self.out.reset_parameters()

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.einsum("lbw,mbw->blm", q, k) * self.scale
        causal = torch.ones(x.size(0), x.size(0), dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.out(torch.einsum("blm,mbw->lbw", weights, v))


def transform_types(model: nn.Module) -> list[str]:
    """Per layer: the type of its transform module and of that module's children."""
    layers = list(model.rnn_lst) if hasattr(model, "rnn_lst") else [model]
    names = []
    for layer in layers:
        t = getattr(layer, "transform_module", None)
        children = [] if t is None else [type(c).__name__ for c in t.children()]
        names.append(type(t).__name__ + "(" + ", ".join(children) + ")")
    return names


#: the helpers above, defined again in the reference subprocess (which cannot import this file)
SETUP = "\n\n".join(inspect.getsource(obj) for obj in (MLP, CausalAttention, transform_types))

REFERENCE_CODE = """
from typing import Optional
scope = {"torch": torch, "nn": torch.nn, "Tensor": torch.Tensor, "Optional": Optional, "lib": sru.modules, "V": {}}
exec(case["setup"], scope)
torch.manual_seed(case["build_seed"])
built = eval(case["build"], scope)
extra["state_dict"] = dict(built.state_dict())
extra["transform_types"] = scope["transform_types"](built)
built.train(case["train_mode"])
extra["outputs"] = []
for call in case["ref_calls"]:
    if call.get("seed") is not None:
        torch.manual_seed(call["seed"])
    with torch.set_grad_enabled(bool(call.get("grad"))):
        extra["outputs"].append(built(*call["args"], **call.get("kwargs", {})))
"""

RNNX = types.SimpleNamespace(
    SRU=SRU,
    SRUCell=SRUCell,
    SRUpp=SRUpp,
    SRUppCell=SRUppCell,
    SRUppAttention=SRUppAttention,
    SRUppProjectedLinear=SRUppProjectedLinear,
)

#: name -> (sru version, constructor expression over ``lib`` (``V``: {} for sru, {"sru_version": "3.0"} for
#: rnnx), options: kind ("stack", "cell", "srupp", "srupp_cell"), train, stream (a causal, token-wise
#: unidirectional stack), rnnx (another expression for rnnx), same_layout (False: rnnx reads the spelling as
#: sru 2.6's, the weights are laid out differently))
CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # sru 3.0.0.dev6 SRU
    "issue_projection_tuple": ("3.0", "lib.SRU(2, 3, num_layers=3, projection_size=(0, 2, 3))", {"stream": True}),
    "projection_tuple_bi_ln_rescale": (
        "3.0",
        "lib.SRU(5, 4, num_layers=2, bidirectional=True, projection_size=(2, 3), layer_norm=True, rescale=True, "
        "highway_bias=-1.0)",
        {},
    ),
    "projection_int_post_ln": (
        "3.0",
        "lib.SRU(6, 4, num_layers=2, projection_size=3, layer_norm=True, normalize_after=True, **V)",
        {"stream": True},
    ),
    "defaults": ("3.0", "lib.SRU(6, 6, **V)", {"stream": True}),
    "projection_int": ("3.0", "lib.SRU(6, 4, projection_size=3)", {}),
    # sru 3.0.0.dev6's own test_projection: an int projection_size keeps the projection whatever its size
    "projection_int_0_test_projection": ("3.0", "lib.SRU(2, 3, num_layers=3, projection_size=0)", {}),
    "projection_int_2_test_projection": ("3.0", "lib.SRU(2, 3, num_layers=3, projection_size=2)", {}),
    "projection_int_3_test_projection": ("3.0", "lib.SRU(2, 3, num_layers=3, projection_size=3)", {}),
    "options": (
        "3.0",
        "lib.SRU(6, 6, num_layers=3, has_skip_term=False, use_tanh=True, v1=True, weight_c_init=0.5, "
        "nn_rnn_compatible_return=True, amp_recurrence_fp16=False, projection_size=(0, 4, 0))",
        {},
    ),
    "input_to_hidden": (
        "3.0",
        "lib.SRU(5, 4, proj_input_to_hidden_first=True, projection_size=(2, 0), rescale=True)",
        {"stream": True},
    ),
    "transform_one_module_copied": (
        "3.0",
        "lib.SRU(6, 6, num_layers=2, transform_module=MLP(6, 18))",
        {"stream": True},
    ),
    "transform_list": (
        "3.0",
        "lib.SRU(5, 4, num_layers=2, transform_module=[MLP(5, 16), MLP(4, 12)], layer_norm=True)",
        {"stream": True},
    ),
    "transform_attention_per_layer": (
        "3.0",
        "lib.SRU(8, 8, num_layers=2, transform_module=[CausalAttention(8, 24), CausalAttention(8, 24, width=4)])",
        {},
    ),
    "transform_srupp_attention": (
        "3.0",
        "lib.SRU(8, 8, num_layers=2, transform_module=lib.SRUppAttention(8, 24, 4, num_heads=2), rescale=True)",
        {},
    ),
    "transform_bidirectional_k4": (
        "3.0",
        "lib.SRU(5, 3, num_layers=2, bidirectional=True, transform_module=[nn.Linear(5, 24), MLP(6, 18)])",
        {},
    ),
    "train_dropout": (
        "3.0",
        "lib.SRU(6, 6, num_layers=3, dropout=0.3, rnn_dropout=0.2, projection_size=(0, 3, 0))",
        {"train": True},
    ),
    # sru 3.0.0.dev6 SRUCell, SRUppCell, SRUpp
    "cell_projection": ("3.0", "lib.SRUCell(6, 4, projection_size=3, layer_norm=True)", {"kind": "cell"}),
    "cell_defaults": ("3.0", "lib.SRUCell(6, 6, layer_norm=True, **V)", {"kind": "cell"}),
    "cell_transform_bi": (
        "3.0",
        "lib.SRUCell(6, 6, bidirectional=True, transform_module=MLP(6, 48), rescale=True, highway_bias=-0.5)",
        {"kind": "cell"},
    ),
    "cell_options": (
        "3.0",
        "lib.SRUCell(6, 6, rnn_dropout=0.0, transform_module=nn.Linear(6, 18, bias=False), has_skip_term=False, "
        "use_tanh=True, v1=True, weight_c_init=0.3, amp_recurrence_fp16=False)",
        {"kind": "cell"},
    ),
    "srupp_cell_attention": (
        "3.0",
        "lib.SRUppCell(8, 8, transform_module=lib.SRUppAttention(8, 24, 4, num_heads=2), use_tanh=True, "
        "layer_norm=True, normalize_after=False, rescale=True, highway_bias=-1.0, amp_recurrence_fp16=False)",
        {"kind": "srupp_cell"},
    ),
    "srupp_cell_positional_no_skip_v1": (
        "3.0",
        "lib.SRUppCell(8, 8, 0.0, 0.0, False, 0, -0.5, True, True, lib.SRUppProjectedLinear(8, 24, 4), "
        "has_skip_term=False, v1=True, weight_c_init=0.5)",
        {"kind": "srupp_cell"},
    ),
    "srupp_cell_k4_bidirectional": (
        "3.0",
        "lib.SRUppCell(6, 4, bidirectional=True, transform_module=lib.SRUppAttention(6, 32, 4))",
        {"kind": "srupp_cell"},
    ),
    "srupp_cell_train_dropouts": (
        "3.0",
        "lib.SRUppCell(8, 8, dropout=0.2, rnn_dropout=0.3, transform_module=lib.SRUppProjectedLinear(8, 24, 4, "
        "dropout=0.1))",
        {"kind": "srupp_cell", "train": True},
    ),
    "srupp": ("3.0", "lib.SRUpp(6, 8, 4, num_layers=2, num_heads=2, attention_every_n_layers=2)", {"kind": "srupp"}),
    "srupp_train_dropout": (
        "3.0",
        "lib.SRUpp(6, 8, 4, num_layers=3, dropout=0.2, attn_dropout=0.1, num_heads=2)",
        {"kind": "srupp", "train": True},
    ),
    # sru 2.6.0: custom_m, and its state dicts in sru 3.0's layout
    "sru26_custom_m_copied": ("2.6", "lib.SRU(6, 6, num_layers=2, custom_m=MLP(6, 18))", {"stream": True}),
    "sru26_custom_m_list": (
        "2.6",
        "lib.SRU(5, 4, num_layers=2, custom_m=[MLP(5, 16), CausalAttention(4, 12)], rescale=True)",
        {},
    ),
    "sru26_cell_custom_m": ("2.6", "lib.SRUCell(6, 6, custom_m=MLP(6, 18), layer_norm=True)", {"kind": "cell"}),
    "sru26_projection_into_3_0_layout": (
        "2.6",
        "lib.SRU(6, 4, num_layers=2, projection_size=3, layer_norm=True)",
        {"rnnx": "lib.SRU(6, 4, num_layers=2, projection_size=3, layer_norm=True, sru_version='3.0')"},
    ),
    "sru26_custom_m_into_transform_module": (
        "2.6",
        "lib.SRU(6, 6, num_layers=2, custom_m=MLP(6, 18), rescale=True)",
        {"rnnx": "lib.SRU(6, 6, num_layers=2, transform_module=MLP(6, 18), rescale=True)"},
    ),
}
VERSIONS = {"2.6": "2.6.0", "3.0": "3.0.0.dev6"}
NAMES_30 = [n for n, (v, _, _) in CONFIGS.items() if v == "3.0"]
NAMES_26 = [n for n, (v, _, _) in CONFIGS.items() if v == "2.6"]


def option(name: str, key: str, default: Any = None) -> Any:
    return CONFIGS[name][2].get(key, default)


def right_pad_mask(lengths: list[int], length: int) -> Tensor:
    """(length, batch) bool, True at the pad steps after each sequence's length."""
    return torch.arange(length)[:, None] >= torch.tensor(lengths)[None, :]


def calls_for(name: str, index: int) -> list[dict[str, Any]]:
    """The calls both sides make: with no state, then with a state and a pad mask (one call in training)."""
    kind = option(name, "kind", "stack")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        model = build_rnnx(name, seed=0)
    g = torch.Generator().manual_seed(100 + index)
    layers = getattr(model, "num_layers", None) if kind in ("stack", "srupp") else None
    x = torch.randn(L, B, model.input_size, generator=g)
    c0_shape = (B, model.output_size) if layers is None else (layers, B, model.output_size)
    c0 = 0.5 * torch.randn(*c0_shape, generator=g)
    mask = right_pad_mask([L, 4, 2], L)
    if option(name, "train"):
        return [dict(args=[x, c0], kwargs={"mask_pad": mask}, seed=7, grad=True)]  # sru's dropout needs autograd
    return [dict(args=[x]), dict(args=[x, c0], kwargs={"mask_pad": mask})]


def build_rnnx(name: str, seed: int) -> nn.Module:
    """The configuration built with rnnx from ``seed``."""
    _, expr, opts = CONFIGS[name]
    scope = {"lib": RNNX, "V": {"sru_version": "3.0"}, "nn": nn, "MLP": MLP, "CausalAttention": CausalAttention}
    torch.manual_seed(seed)
    return eval(opts.get("rnnx", expr), scope)


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[str, Any]]:
    """Every configuration built and run by its sru release (one subprocess per release)."""
    results: dict[str, dict[str, Any]] = {}
    for short, version in VERSIONS.items():
        reason = missing_reason(version)
        if reason is not None:
            pytest.skip(reason)
        cases = []
        for index, (name, (v, expr, opts)) in enumerate(CONFIGS.items()):
            if v != short:
                continue
            cases.append(
                dict(
                    name=name,
                    factory="torch.nn.Identity",
                    code=REFERENCE_CODE,
                    setup=SETUP,
                    build=expr,
                    build_seed=index,
                    train_mode=bool(opts.get("train")),
                    ref_calls=calls_for(name, index),
                )
            )
        for name, result in run_reference(reference_dir(version), cases).items():
            assert result["error"] is None, f"{name}: {result['error']}"
            assert result["version"] == version
            results[name] = {**result["extra"], "calls": next(c["ref_calls"] for c in cases if c["name"] == name)}
    return results


def loaded(name: str, reference: dict) -> nn.Module:
    """rnnx's model of ``name`` built from another seed, with the reference's state dict (strict)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_rnnx(name, seed=12345)
    model.load_state_dict(reference[name]["state_dict"])
    return model.train(bool(option(name, "train")))


def flat_outputs(out: Any) -> list[Tensor]:
    """h and c of any of the four forwards (SRUpp's third output is compared separately)."""
    return [out[0], out[1]]


def assert_close(got: Tensor, want: Tensor, what: str, tol: float = TOL) -> None:
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    err = (got.double() - want.double()).abs().max().item()
    assert err <= tol, f"{what}: max |diff| {err:.3g}"


def run_calls(model: Any, calls: list[dict[str, Any]]) -> list[Any]:
    outs = []
    for call in calls:
        if call.get("seed") is not None:
            torch.manual_seed(call["seed"])
        with torch.set_grad_enabled(bool(call.get("grad"))):
            outs.append(model(*call["args"], **call.get("kwargs", {})))
    return outs


@pytest.mark.reference
@pytest.mark.parametrize("name", [n for n in CONFIGS if option(n, "same_layout", True) and not option(n, "rnnx")])
def test_same_seed_same_initial_weights_and_layout(name: str, reference: dict) -> None:
    ref = reference[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_rnnx(name, seed=list(CONFIGS).index(name))
    # sru 2.6 names a custom module custom_m; rnnx keeps sru 3.0's name (and loads either)
    theirs = {re.sub(r"(^|\.)custom_m\.", r"\1transform_module.", k): v for k, v in ref["state_dict"].items()}
    ours = model.state_dict()
    assert sorted(ours) == sorted(theirs)
    for key, value in ours.items():
        assert value.shape == theirs[key].shape, key
        assert torch.equal(value, theirs[key]), f"{key}: max diff {(value - theirs[key]).abs().max().item():.3g}"
    if CONFIGS[name][0] == "3.0":
        assert transform_types(model) == ref["transform_types"]
        layers = list(model.rnn_lst) if hasattr(model, "rnn_lst") else [model]
        assert all(layer.sru_version == "3.0" and layer.custom_m is layer.transform_module for layer in layers)


@pytest.mark.reference
def test_transform_module_types_as_in_sru_3_0(reference: dict) -> None:
    """What 3.0 code reads: rnn_lst[i].transform_module is an nn.Linear, or an nn.Sequential of two when
    projected, a deep copy of a given module, or the list's module itself."""
    model = build_rnnx("issue_projection_tuple", seed=0)
    assert reference["issue_projection_tuple"]["transform_types"] == [
        "Linear()", "Sequential(Linear, Linear)", "Sequential(Linear, Linear)"
    ]  # fmt: skip
    assert [type(layer.transform_module) for layer in model.rnn_lst] == [nn.Linear, nn.Sequential, nn.Sequential]
    assert model.projection_size == (0, 2, 3) and model[1] is model.rnn_lst[1]
    mlp = MLP(6, 18)
    copied = SRU(6, 6, num_layers=2, transform_module=mlp)
    assert all(type(layer.transform_module) is MLP and layer.transform_module is not mlp for layer in copied.rnn_lst)
    listed = [MLP(6, 18), MLP(6, 18)]
    model = SRU(6, 6, num_layers=2, custom_m=listed)
    assert [layer.transform_module for layer in model.rnn_lst] == listed
    assert model.rnn_lst[0].custom_m is listed[0] and model.sru_version == "2.6"
    assert SRU(6, 6).rnn_lst[0].transform_module is None and SRU(6, 6).rnn_lst[0].custom_m is None


@pytest.mark.parametrize(
    "projection_size, expected",
    [
        (0, (nn.Linear, nn.Linear, nn.Linear)),
        (2, (nn.Sequential, nn.Sequential, nn.Sequential)),
        (3, (nn.Sequential, nn.Sequential, nn.Sequential)),
        ((0, 2, 3), (nn.Linear, nn.Sequential, nn.Sequential)),
    ],
)
def test_sru_3_0_test_projection_cases(projection_size: Any, expected: tuple[type, ...]) -> None:
    """The cases of sru 3.0.0.dev6's own ``test_projection`` (its suite runs unmodified against rnnx; these are
    the cases it failed on): ``SRU(2, 3, num_layers=3, projection_size=p)`` has 3.0's transform modules, also
    for an int p that is not below the layer's sizes (sru 2.6 would drop such a projection). With a 2.6-only
    name, or ``sru_version="2.6"``, the same int means sru 2.6's layout."""
    model = SRU(2, 3, num_layers=3, projection_size=projection_size)
    assert len(model.rnn_lst) == 3 and model.sru_version == "3.0"
    assert tuple(type(layer.transform_module) for layer in model.rnn_lst) == expected
    if not isinstance(projection_size, tuple):
        old = SRU(2, 3, num_layers=3, projection_size=projection_size, sru_version="2.6")
        assert all(layer.transform_module is None and layer.weight is not None for layer in old.rnn_lst)
        assert SRU(2, 3, num_layers=3, projection_size=projection_size, custom_m=nn.Linear(2, 9)).sru_version == "2.6"


@pytest.mark.reference
@pytest.mark.parametrize("name", list(CONFIGS))
def test_reference_state_dict_loads_and_outputs_match(name: str, reference: dict) -> None:
    ref = reference[name]
    model = loaded(name, reference)
    got = run_calls(model, ref["calls"])
    assert len(got) == len(ref["outputs"])
    for i, (ours, theirs) in enumerate(zip(got, ref["outputs"])):
        for what, a, b in zip(("h", "c"), flat_outputs(ours), flat_outputs(theirs)):
            assert_close(a, b, f"call {i} {what}")
        if option(name, "kind") == "srupp":
            for j, (a, b) in enumerate(zip(ours[2]["saved_inputs"], theirs[2]["saved_inputs"])):
                assert_close(a, b, f"call {i} saved_inputs[{j}]")


@pytest.mark.reference
@pytest.mark.parametrize("name", [n for n in CONFIGS if not option(n, "train")])
def test_scripted_matches_reference(name: str, reference: dict, tmp_path: Path) -> None:
    ref = reference[name]
    scripted = torch.jit.script(loaded(name, reference))
    torch.jit.save(scripted, str(tmp_path / "m.pt"))
    scripted = torch.jit.load(str(tmp_path / "m.pt"))
    for i, (ours, theirs) in enumerate(zip(run_calls(scripted, ref["calls"]), ref["outputs"])):
        for what, a, b in zip(("h", "c"), flat_outputs(ours), flat_outputs(theirs)):
            assert_close(a, b, f"scripted call {i} {what}")


@pytest.mark.reference
@pytest.mark.parametrize("name", [n for n in CONFIGS if option(n, "stream")])
def test_forward_state_in_chunks_ends_in_reference_state(name: str, reference: dict) -> None:
    ref = reference[name]
    model = loaded(name, reference)
    x = ref["calls"][0]["args"][0]
    h_ref, c_ref = ref["outputs"][0]
    state, hs = None, []
    with torch.no_grad():
        for lo, hi in ((0, 3), (3, 4), (4, L)):
            h, state = model.forward_state(x[lo:hi], state)
            hs.append(h)
        assert_close(torch.cat(hs), h_ref, "h")
        assert_close(state.c, c_ref, "state c")
        scripted = torch.jit.script(Streamer(model))
        flat = model.init_state_flat(B)
        h1, flat = scripted(x[:4], flat)
        h2, flat = scripted(x[4:], flat)
        assert_close(torch.cat([h1, h2]), h_ref, "scripted h")
        assert_close(flat[0], c_ref, "scripted c")


class Streamer(nn.Module):
    """forward_state_flat as the forward of a module to script."""

    def __init__(self, rnn: SRU) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: Tensor, state: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
        return self.rnn.forward_state_flat(x, state)


def test_sru_2_6_state_dicts_load_into_either_layout() -> None:
    """rnnx to rnnx: a state dict of one layout into a model of the other, both ways, same outputs."""
    x = torch.randn(L, B, 6)
    for kwargs in (dict(projection_size=3), dict(projection_size=0), dict(layer_norm=True)):
        old = SRU(6, 4, num_layers=2, sru_version="2.6", **kwargs).eval()
        new = SRU(6, 4, num_layers=2, sru_version="3.0", **kwargs).eval()
        assert "rnn_lst.0.weight" in old.state_dict() and "rnn_lst.0.weight" not in new.state_dict()
        new.load_state_dict(old.state_dict())
        with torch.no_grad():
            assert_close(new(x)[0], old(x)[0], f"{kwargs} 2.6 -> 3.0")
            old.load_state_dict(SRU(6, 4, num_layers=2, sru_version="3.0", **kwargs).state_dict())
            new.load_state_dict(old.state_dict())
            assert_close(new(x)[0], old(x)[0], f"{kwargs} 3.0 -> 2.6")
    mismatched = SRU(6, 4, projection_size=3, sru_version="3.0")
    with pytest.raises(RuntimeError, match="transform_module"):
        mismatched.load_state_dict(SRU(6, 4).state_dict())


def test_srupp_cell_default_transform_runs_like_an_sru_cell() -> None:
    """sru 3.0's SRUppCell builds an nn.Linear / nn.Sequential without a transform_module (and then cannot
    run it: it passes the masks); rnnx's calls it with the input alone, as SRUCell does."""
    cell = SRUppCell(6, 6, projection_size=3)
    twin = SRUCell(6, 6, projection_size=3)
    assert type(cell.transform_module) is nn.Sequential and twin.sru_version == "3.0" and twin.normalize_after
    twin.load_state_dict(cell.state_dict())
    x = torch.randn(L, B, 6)
    with torch.no_grad():
        for got, want in zip(cell(x), twin(x)):
            assert_close(got, want, "SRUppCell vs SRUCell")
        for got, want in zip(torch.jit.script(cell)(x), twin(x)):
            assert_close(got, want, "scripted SRUppCell")


def test_user_transform_trains() -> None:
    torch.manual_seed(0)
    model = SRU(6, 6, num_layers=2, transform_module=[CausalAttention(6, 18), MLP(6, 18)])
    x, target = torch.randn(10, 4, 6), torch.randn(10, 4, 6)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = (model(x)[0] - target).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.rnn_lst[0].transform_module.parameters())


def test_errors() -> None:
    mlp = MLP(4, 12)
    with pytest.raises(TypeError, match="both custom_m .* and transform_module"):
        SRU(4, 4, custom_m=mlp, transform_module=mlp)
    with pytest.raises(TypeError, match="both n_proj .* and projection_size"):
        SRU(4, 4, n_proj=2, projection_size=2)
    with pytest.raises(TypeError, match="both n_proj .* and projection_size"):
        SRUCell(4, 4, n_proj=2, projection_size=2)
    with pytest.raises(TypeError, match="both custom_m .* and transform_module"):
        SRUCell(4, 4, custom_m=mlp, transform_module=mlp)
    with pytest.raises(TypeError, match="both custom_m .* and transform_module"):
        SRUppCell(4, 4, custom_m=mlp, transform_module=mlp)
    with pytest.raises(ValueError, match="list of 1 modules but the SRU has 2 layers"):
        SRU(4, 4, num_layers=2, transform_module=[mlp])
    with pytest.raises(ValueError, match=r"projection_size must be an int or one int per layer \(3\), got \(2, 2\)"):
        SRU(4, 4, num_layers=3, projection_size=(2, 2))
    with pytest.raises(TypeError, match="sru 2.6 argument.*custom_m.*sru 3.0 argument.*projection_size"):
        SRU(4, 4, custom_m=mlp, projection_size=(0, 2))
    with pytest.raises(ValueError, match="sru_version must be one of"):
        SRU(4, 4, sru_version="2.7")
    with pytest.raises(TypeError, match="nn.Module or a list"):
        SRU(4, 4, transform_module="linear")
    with pytest.raises(ValueError, match=r"transform module must map the input \(5, 2, 4\) to U .* = \(5, 2, 12\)"):
        SRU(4, 4, transform_module=nn.Linear(4, 8))(torch.randn(5, 2, 4))
    with pytest.raises(NotImplementedError, match="second output V"):
        SRUCell(4, 4, transform_module=_TwoOutputs())(torch.randn(5, 2, 4))
    with pytest.raises(RuntimeError, match="transform_module of layer 0 .*SRUppAttention.* has a state of its own"):
        SRU(8, 8, transform_module=SRUppAttention(8, 24, 4)).forward_state(torch.randn(3, 2, 8))


class _TwoOutputs(nn.Module):
    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x.repeat(1, 1, 3), x.repeat(1, 1, 2)


class StreamingEncoder(nn.Module):
    """features (B, T, 6) -> (B, T, 8); an SRU whose layers compute U with MLPs; state {"rnn": SRUState}."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = SRU(6, 8, num_layers=2, transform_module=[MLP(6, 32), MLP(8, 24)])

    def init_state(self, batch: int) -> dict:
        return {"rnn": self.rnn.init_state(batch)}

    def forward(self, features: Tensor, state: dict) -> tuple[Tensor, dict]:
        h, s = self.rnn.forward_state(features.transpose(0, 1), state["rnn"])
        return h.transpose(0, 1), {"rnn": s}


def test_custom_transform_exports_and_runs_in_runtime(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    import rnnx.runtime as rt
    from rnnx.export import export

    torch.manual_seed(3)
    model = StreamingEncoder().eval()
    result = export(model, (torch.randn(2, 5, 6),), tmp_path / "out", target="onnxruntime", chained_calls=4)
    assert result.parity.passed, result.parity.verdict()
    graph = onnx.load(str(tmp_path / "out" / "model.onnx"), load_external_data=False)
    scans = [n for n in graph.graph.node if n.op_type == "SRUScan"]
    assert len(scans) == 2 and {n.domain for n in scans} == {"rnnx"}
    session = rt.load(tmp_path / "out", backend="onnxruntime")
    x = np.random.default_rng(1).standard_normal((3, 12, 6)).astype(np.float32)
    whole = session.run(features=x)["output"]
    session.reset()
    chunks = np.concatenate([session.run(features=x[:, i : i + 5])["output"] for i in range(0, 12, 5)], 1)
    with torch.no_grad():
        want, _ = model(torch.from_numpy(x), model.init_state(3))
    scale = np.abs(want.numpy()).max()
    assert np.abs(whole - want.numpy()).max() / scale <= 1e-4
    assert np.abs(chunks - whole).max() <= 1e-5
