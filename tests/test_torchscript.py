"""rnnx's SRU drop-ins under TorchScript, as ``sru``'s users deploy them (issue 16): SRU, SRUCell, SRUpp.

For every option of the grids below, built with the published ``sru`` (2.6.0 for SRU / SRUCell, 3.0.0.dev6
for SRUpp; in a subprocess, ``tests/sru_reference.py``) and with rnnx from the same weights:

* ``torch.jit.script(rnnx module)`` gives the eager module's outputs to 1e-6 and the scripted ``sru``
  module's outputs to 1e-5, with and without an initial state and a pad mask (SRUpp: h and c; rnnx's
  linear-attention SRUpp, which sru lacks, against eager only);
* ``torch.jit.save`` / ``torch.jit.load`` round-trips; a scripted module takes a state dict afterwards
  (``scale_x`` is read from its buffer under TorchScript, so a rescaled layer follows the loaded value);
* errors stay clear under scripting (the shape checks are TorchScript code, not dropped).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from sru_reference import missing_reason, reference_dir, run_reference

from rnnx.models import SRU, SRUCell, SRUpp, load_checkpoint
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path

# torch.jit.save / load are what sru's TorchScript users call; torch 2.13 marks them deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.(script|save|load)` is deprecated:DeprecationWarning")
IN, HIDDEN, L, B = 12, 16, 7, 3
#: sru 2.6 constructor options that its own modules script with (two layers; the first has k = 4 since
#: IN != output size, the second k = 3).
SRU_GRID = {
    "base": {},
    "bidirectional": {"bidirectional": True},
    "projection": {"projection_size": 6},
    "layer_norm": {"layer_norm": True},
    "normalize_after": {"layer_norm": True, "normalize_after": True},
    "rescale": {"rescale": True, "highway_bias": -1.0},
    "no_skip": {"has_skip_term": False},
    "tanh": {"use_tanh": True},
    "v1": {"v1": True},
    "nn_rnn_return": {"bidirectional": True, "nn_rnn_compatible_return": True},
    "input_to_hidden": {"proj_input_to_hidden_first": True, "rescale": True},
}
#: sru 3.0.0.dev6 SRUpp options (input 12, hidden 16, proj 8, two layers).
SRUPP_GRID = {
    "srupp": {},
    "srupp_heads_every2": {"num_heads": 2, "attention_every_n_layers": 2},
    "srupp_layer_norm": {"layer_norm": True, "normalize_after": True},
    "srupp_no_attn_norm": {"attn_layer_norm": False},
    "srupp_bidirectional_rescale": {"bidirectional": True, "rescale": True},
    "srupp_input_to_hidden": {"proj_input_to_hidden_first": True, "nn_rnn_compatible_return": True},
}
CELL_GRID = {
    "cell": {},
    "cell_bidirectional_rescale": {"bidirectional": True, "rescale": True, "highway_bias": -0.5},
    "cell_projection_layer_norm": {"n_proj": 5, "layer_norm": True},
}


def inputs(bidirectional: bool, layers: int | None, seed: int) -> dict[str, torch.Tensor]:
    """x (L, B, IN), a c0 (for a stack (layers, B, out), for a cell (B, out)) and a right-padding mask."""
    g = torch.Generator().manual_seed(seed)
    out = HIDDEN * (2 if bidirectional else 1)
    c0_shape = (B, out) if layers is None else (layers, B, out)
    mask = torch.zeros(L, B, dtype=torch.bool)
    mask[5:, 0] = True
    mask[3:, 2] = True
    return {"x": torch.randn(L, B, IN, generator=g), "c0": torch.randn(*c0_shape, generator=g), "mask": mask}


def calls(t: dict[str, torch.Tensor]) -> list[dict]:
    return [{"args": [t["x"]]}, {"args": [t["x"], t["c0"]], "kwargs": {"mask_pad": t["mask"]}}]


SCRIPT_REFERENCE = """
scripted = torch.jit.script(model)
with torch.no_grad():
    extra["scripted"] = [scripted(*c.get("args", []), **c.get("kwargs", {})) for c in case["calls"]]
"""


@pytest.fixture(scope="module")
def reference() -> dict:
    """Every grid case run by sru 2.6.0, eager and scripted, in one subprocess."""
    reason = missing_reason("2.6.0")
    if reason is not None:
        pytest.skip(reason)
    cases = []
    for name, kwargs in SRU_GRID.items():
        t = inputs(kwargs.get("bidirectional", False), 2, seed=len(cases))
        cases.append({"name": name, "kwargs": {"input_size": IN, "hidden_size": HIDDEN, "num_layers": 2, **kwargs},
                      "calls": calls(t), "code": SCRIPT_REFERENCE})  # fmt: skip
    for name, kwargs in CELL_GRID.items():
        t = inputs(kwargs.get("bidirectional", False), None, seed=len(cases))
        cases.append({"name": name, "factory": "sru.SRUCell", "kwargs": {"input_size": IN, "hidden_size": HIDDEN,
                      **kwargs}, "calls": calls(t), "code": SCRIPT_REFERENCE})  # fmt: skip
    results = run_reference(reference_dir("2.6.0"), cases)
    srupp_cases = []
    if missing_reason("3.0.0.dev6") is None:
        for name, kwargs in SRUPP_GRID.items():
            t = inputs(kwargs.get("bidirectional", False), 2, seed=len(cases) + len(srupp_cases))
            shape = {"input_size": IN, "hidden_size": HIDDEN, "proj_size": 8, "num_layers": 2}
            srupp_cases.append({"name": name, "factory": "sru.SRUpp", "kwargs": {**shape, **kwargs}, "calls": calls(t),
                                "code": SCRIPT_REFERENCE})  # fmt: skip
        results.update(run_reference(reference_dir("3.0.0.dev6"), srupp_cases))
    failed = {n: r["error"] for n, r in results.items() if r["error"]}
    assert not failed, failed
    return {"cases": {c["name"]: c for c in (*cases, *srupp_cases)}, "results": results}


def assert_close(got, want, tol: float, what: str) -> None:
    for g, w in zip(got, want):
        assert g.shape == w.shape, what
        assert torch.allclose(g, w, atol=tol, rtol=tol), f"{what}: max |diff| {(g - w).abs().max().item():.3g}"


def build(name: str, reference: dict) -> torch.nn.Module:
    case, result = reference["cases"][name], reference["results"][name]
    cls = {"sru.SRUCell": SRUCell, "sru.SRUpp": SRUpp}.get(case.get("factory"), SRU)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = cls(**case["kwargs"])
    module.load_state_dict(result["state_dict"])
    return module.eval()


@pytest.mark.parametrize("name", [*SRU_GRID, *CELL_GRID, *SRUPP_GRID])
def test_scripted_module_matches_eager_and_scripted_sru(name, reference, tmp_path: Path):
    if name not in reference["cases"]:
        pytest.skip(f"sru 3.0.0.dev6: {missing_reason('3.0.0.dev6')}")
    module = build(name, reference)
    scripted = torch.jit.script(module)
    case, result = reference["cases"][name], reference["results"][name]
    path = tmp_path / "scripted.pt"
    torch.jit.save(scripted, str(path))
    loaded = torch.jit.load(str(path))
    with torch.no_grad():
        for i, call in enumerate(case["calls"]):
            args, kwargs = call.get("args", []), call.get("kwargs", {})
            eager, got = module(*args, **kwargs)[:2], scripted(*args, **kwargs)[:2]
            assert_close(got, eager, 1e-6, f"{name} call {i}: scripted vs eager")
            assert_close(got, result["extra"]["scripted"][i][:2], 1e-5, f"{name} call {i}: vs scripted sru")
            assert_close(loaded(*args, **kwargs)[:2], got, 0.0, f"{name} call {i}: after torch.jit.save / load")


@pytest.mark.parametrize("kwargs", [{}, {"num_heads": 2, "bidirectional": True}], ids=["one_head", "two_heads_bi"])
def test_scripted_linear_attention_srupp_matches_eager(kwargs, tmp_path: Path):
    """rnnx's SRU++ with causal linear attention (no sru counterpart): scripted vs eager, save / load."""
    torch.manual_seed(3)
    module = SRUpp(IN, HIDDEN, 8, num_layers=2, attention="linear", **kwargs).eval()
    scripted = torch.jit.script(module)
    assert "rnnx::causal_linear_attention" in str(scripted.inlined_graph)
    scripted.save(str(tmp_path / "srupp.pt"))
    loaded = torch.jit.load(str(tmp_path / "srupp.pt"))
    t = inputs(kwargs.get("bidirectional", False), 2, seed=4)
    with torch.no_grad():
        for call in calls(t):
            args, kw = call.get("args", []), call.get("kwargs", {})
            got = scripted(*args, **kw)[:2]
            assert_close(got, module(*args, **kw)[:2], 1e-6, "scripted vs eager")
            assert_close(loaded(*args, **kw)[:2], got, 0.0, "after torch.jit.save / load")


def test_a_scripted_module_follows_a_state_dict_loaded_after_scripting(reference):
    """scale_x differs between the two state dicts (highway_bias -1 vs 0, rescale on)."""
    trained = build("rescale", reference)
    scripted = torch.jit.script(SRU(IN, HIDDEN, num_layers=2, rescale=True).eval())
    scripted.load_state_dict(trained.state_dict())
    x = inputs(False, 2, seed=9)["x"]
    with torch.no_grad():
        assert_close(scripted(x), trained(x), 1e-6, "scripted, then loaded")


def test_errors_stay_clear_under_scripting():
    """The same one-line messages as eager, shapes spelled as tuples."""
    with pytest.raises(
        ValueError, match=r"c0 must be \(num_layers, batch, output_size\) = \(2, 3, 16\), got \(2, 4, 16\)"
    ):
        SRU(IN, HIDDEN, num_layers=2)(torch.randn(L, B, IN), torch.zeros(2, 4, HIDDEN))
    scripted = torch.jit.script(SRU(IN, HIDDEN, num_layers=2).eval())
    with pytest.raises(
        torch.jit.Error, match=r"c0 must be \(num_layers, batch, output_size\) = \(2, 3, 16\), got \(2, 4, 16\)"
    ):
        scripted(torch.randn(L, B, IN), torch.zeros(2, 4, HIDDEN))
    with pytest.raises(torch.jit.Error, match=r"SRU expects input_size 12, got last dim 5"):
        scripted(torch.randn(L, B, 5))
    cell = torch.jit.script(SRUCell(IN, HIDDEN).eval())
    with pytest.raises(torch.jit.Error, match=r"mask_pad has shape \(7, 2\) but expected \(7, 3\)"):
        torch.jit.script(SRUpp(IN, HIDDEN, 8, num_layers=2).eval())(torch.randn(L, B, IN), None, torch.zeros(L, 2))
    with pytest.raises(torch.jit.Error, match=r"mask_pad must be \(length, batch\) = \(7, 3\), got \(7, 2\)"):
        cell(torch.randn(L, B, IN), None, torch.zeros(L, 2, dtype=torch.bool))


@pytest.mark.parametrize("name", ["linear_transformer_copy", "srupp_linear_copy", "SRU", "SRUpp"])
def test_torch_compile_fullgraph_keeps_working(name):
    """The other two entry points on the demo language models and the layers: ``torch.compile`` with
    ``fullgraph=True`` (no graph break; traced with backend aot_eager, no code generation) gives the eager
    outputs, prefill then a decode step from the returned state; ``torch.export`` is what every export
    test runs (``rnnx.export``)."""
    torch.manual_seed(0)
    if name in DEMO_CHECKPOINTS:
        model = load_checkpoint(demo_checkpoint_path(name))[0].eval()
        tokens = torch.tensor([[1, 2, 3, 10], [4, 5, 6, 10]])
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        with torch.no_grad():
            logits, state = model(tokens)
            got_logits, got_state = compiled(tokens)
            assert_close([got_logits], [logits], 1e-5, f"{name} prefill")
            step, _ = model(logits[:, -1:].argmax(-1), state)
            got_step, _ = compiled(logits[:, -1:].argmax(-1), got_state)
            assert_close([got_step], [step], 1e-5, f"{name} decode step")
        return
    module = (SRU(IN, HIDDEN, num_layers=2) if name == "SRU" else SRUpp(IN, HIDDEN, 8, num_layers=2)).eval()
    x = inputs(False, 2, seed=5)["x"]
    with torch.no_grad():
        assert_close(torch.compile(module, fullgraph=True, backend="aot_eager")(x)[:2], module(x)[:2], 1e-6, name)
