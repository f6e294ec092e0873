"""rnnx's SRU drop-ins under TorchScript, as ``sru``'s users deploy them (issue 16, SRU and SRUCell).

For every option of the grid below, built with the published ``sru`` 2.6.0 (in a subprocess,
``tests/sru_reference.py``) and with rnnx from the same weights:

* ``torch.jit.script(rnnx module)`` gives the eager module's outputs to 1e-6 and the scripted ``sru`` 2.6
  module's outputs to 1e-5, with and without an initial state and a pad mask;
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

from rnnx.models import SRU, SRUCell

# torch.jit.save / load are what sru's TorchScript users call; torch 2.13 marks them deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.(save|load)` is deprecated:DeprecationWarning")
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
    failed = {n: r["error"] for n, r in results.items() if r["error"]}
    assert not failed, failed
    return {"cases": {c["name"]: c for c in cases}, "results": results}


def assert_close(got, want, tol: float, what: str) -> None:
    for g, w in zip(got, want):
        assert g.shape == w.shape, what
        assert torch.allclose(g, w, atol=tol, rtol=tol), f"{what}: max |diff| {(g - w).abs().max().item():.3g}"


def build(name: str, reference: dict) -> torch.nn.Module:
    case, result = reference["cases"][name], reference["results"][name]
    cls = SRUCell if case.get("factory") == "sru.SRUCell" else SRU
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = cls(**case["kwargs"])
    module.load_state_dict(result["state_dict"])
    return module.eval()


@pytest.mark.parametrize("name", [*SRU_GRID, *CELL_GRID])
def test_scripted_module_matches_eager_and_scripted_sru26(name, reference, tmp_path: Path):
    module = build(name, reference)
    scripted = torch.jit.script(module)
    case, result = reference["cases"][name], reference["results"][name]
    path = tmp_path / "scripted.pt"
    torch.jit.save(scripted, str(path))
    loaded = torch.jit.load(str(path))
    with torch.no_grad():
        for i, call in enumerate(case["calls"]):
            args, kwargs = call.get("args", []), call.get("kwargs", {})
            eager, got = module(*args, **kwargs), scripted(*args, **kwargs)
            assert_close(got, eager, 1e-6, f"{name} call {i}: scripted vs eager")
            assert_close(got, result["extra"]["scripted"][i], 1e-5, f"{name} call {i}: vs scripted sru 2.6")
            assert_close(loaded(*args, **kwargs), got, 0.0, f"{name} call {i}: after torch.jit.save / load")


def test_a_scripted_module_follows_a_state_dict_loaded_after_scripting(reference):
    """scale_x differs between the two state dicts (highway_bias -1 vs 0, rescale on)."""
    trained = build("rescale", reference)
    scripted = torch.jit.script(SRU(IN, HIDDEN, num_layers=2, rescale=True).eval())
    scripted.load_state_dict(trained.state_dict())
    x = inputs(False, 2, seed=9)["x"]
    with torch.no_grad():
        assert_close(scripted(x), trained(x), 1e-6, "scripted, then loaded")


def test_errors_stay_clear_under_scripting():
    scripted = torch.jit.script(SRU(IN, HIDDEN, num_layers=2).eval())
    with pytest.raises(
        torch.jit.Error, match=r"c0 must be \(num_layers, batch, output_size\) = \[2, 3, 16\], got \[2, 4, 16\]"
    ):
        scripted(torch.randn(L, B, IN), torch.zeros(2, 4, HIDDEN))
    with pytest.raises(torch.jit.Error, match=r"SRU expects input_size 12, got last dim 5"):
        scripted(torch.randn(L, B, 5))
    cell = torch.jit.script(SRUCell(IN, HIDDEN).eval())
    with pytest.raises(torch.jit.Error, match=r"mask_pad must be \(length, batch\) = \[7, 3\], got \[7, 2\]"):
        cell(torch.randn(L, B, IN), None, torch.zeros(L, 2, dtype=torch.bool))
