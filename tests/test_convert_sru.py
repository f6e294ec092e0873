"""rnnx.models.convert on models built with the published ``sru`` package (2.6.0 SRU, 3.0.0.dev6 SRUpp).

The published packages cannot be imported here (2.6.0 and 3.0.0.dev6 are both ``sru``), so this
file doubles as the script of one subprocess per version (``python test_convert_sru.py VERSION OUT``,
sru's folder on PYTHONPATH, its compiled extension cached as tests/sru_reference.py does): the child
builds the published models of every case of :data:`CASES` for that version, randomises their
weights, converts them with ``rnnx.models.convert``, runs both in eval mode on the same inputs and
saves a report per case (max abs errors of every output tensor, converted class names, facts). The
tests assert on those reports: fp32 max abs error <= 1e-5 on outputs and final cell states.

The mechanism itself (converter modules, the tree walk) is tested in this process without sru.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sru_reference
import torch
from torch import Tensor, nn

import rnnx.models
from rnnx.models import convert as convert_api
from rnnx.models.convert import CONVERTER_MODULES, ConversionError, convert, qualified_name, supported

TOL = 1e-5
LENGTH, BATCH = 7, 3
#: exit status of the child when ``import sru`` failed or found the wrong package
_IMPORT_FAILED = 3

# --------------------------------------------------------------------------------------------------
# child side: cases built from the imported sru package, each returning a report dict
# --------------------------------------------------------------------------------------------------


def randomize_(model: nn.Module, seed: int = 1) -> nn.Module:
    """Perturbs every parameter (layer norms, alpha included) so a misplaced tensor shows."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            if name.endswith("alpha"):
                p.add_(0.7)
    return model


def pad_mask() -> Tensor:
    """(LENGTH, BATCH) bool: row 1 has two trailing pads, row 2 a leading one."""
    mask = torch.zeros(LENGTH, BATCH, dtype=torch.bool)
    mask[-2:, 1] = True
    mask[0, 2] = True
    return mask


def causal_mask() -> Tensor:
    """Additive (LENGTH, LENGTH) mask, -inf above the diagonal."""
    return torch.full((LENGTH, LENGTH), float("-inf")).triu(1)


def _flatten(out: Any, label: str = "out") -> dict[str, Tensor]:
    """Every tensor in a nested output, by path: ``out[0]``, ``out[2].saved_inputs[1]``, ..."""
    if isinstance(out, Tensor):
        return {label: out}
    items = out.items() if isinstance(out, dict) else enumerate(out)
    flat: dict[str, Tensor] = {}
    for key, value in items:
        flat.update(_flatten(value, f"{label}.{key}" if isinstance(out, dict) else f"{label}[{key}]"))
    return flat


def _errors(ref: Any, ours: Any) -> dict[str, float]:
    """Max abs error per output tensor; a missing tensor or a shape mismatch raises."""
    ref_flat, ours_flat = _flatten(ref), _flatten(ours)
    assert ref_flat.keys() == ours_flat.keys(), (ref_flat.keys(), ours_flat.keys())
    errors = {}
    for key, r in ref_flat.items():
        assert r.shape == ours_flat[key].shape, (key, r.shape, ours_flat[key].shape)
        errors[key] = (r.double() - ours_flat[key].double()).abs().max().item() if r.numel() else 0.0
    return errors


def _snapshot(model: nn.Module) -> dict[str, Any]:
    """What convert must not change: tensors (cloned), module classes, modes, requires_grad."""
    return {
        "tensors": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "classes": {n: qualified_name(type(m)) for n, m in model.named_modules()},
        "modes": {n: m.training for n, m in model.named_modules()},
        "grads": {n: p.requires_grad for n, p in model.named_parameters()},
    }


def _unchanged(before: dict[str, Any], model: nn.Module) -> bool:
    after = _snapshot(model)
    same_tensors = before["tensors"].keys() == after["tensors"].keys() and all(
        torch.equal(v, after["tensors"][k]) for k, v in before["tensors"].items()
    )
    return same_tensors and all(before[k] == after[k] for k in ("classes", "modes", "grads"))


def _convert_report(model: nn.Module) -> tuple[nn.Module, dict[str, Any]]:
    """Converts ``model``; the report has the converted classes, modes, grads, dtypes and whether
    the original and the global RNG state were left untouched."""
    before, rng = _snapshot(model), torch.get_rng_state()
    converted = convert(model)
    return converted, {
        "unchanged": _unchanged(before, model),
        "rng_unchanged": torch.equal(rng, torch.get_rng_state()),
        "root_class": qualified_name(type(converted)),
        "classes": {n: qualified_name(type(m)) for n, m in converted.named_modules()},
        "modes": {n: m.training for n, m in converted.named_modules()},
        "original_modes": before["modes"],
        "grads": {n: p.requires_grad for n, p in converted.named_parameters()},
        "original_grads": before["grads"],
        "dtypes": {k: str(v.dtype) for k, v in converted.state_dict().items()},
        "original_dtypes": {k: str(v.dtype) for k, v in model.state_dict().items()},
    }


def _parity(model: nn.Module, calls: list[tuple[tuple, dict]]) -> dict[str, Any]:
    """Converts the eval-mode ``model`` and runs both on each call (args, kwargs)."""
    model.eval()
    converted, report = _convert_report(model)
    report["errors"] = {}
    with torch.no_grad():
        for i, (args, kwargs) in enumerate(calls):
            errors = _errors(model(*args, **kwargs), converted(*args, **kwargs))
            report["errors"].update({f"call{i}:{k}": v for k, v in errors.items()})
    return report


def _expect_error(model: nn.Module) -> dict[str, Any]:
    """Converts ``model`` expecting ConversionError; reports its message and that nothing changed."""
    before = _snapshot(model)
    try:
        convert(model)
    except ConversionError as exc:
        return {
            "message": str(exc),
            "is_value_error": isinstance(exc, ValueError),
            "unchanged": _unchanged(before, model),
        }
    return {"message": None, "unchanged": _unchanged(before, model)}


class Tagger(nn.Module):
    """A user model: embedding -> recurrent encoder -> linear head; tokens (L, B) -> logits (L, B, tags)."""

    def __init__(self, rnn: nn.Module, vocab: int, emb: int, out: int, tags: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = rnn
        self.head = nn.Linear(out, tags)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.rnn(self.emb(tokens))[0]
        return self.head(h)


class Nested(nn.Module):
    """``encoder.rnn`` holds the layer, so the dotted path in an error is ``encoder.rnn``."""

    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.encoder = nn.ModuleDict({"rnn": rnn})


# ---- sru 2.6.0 ------------------------------------------------------------------------------------

#: sru.SRU constructor kwargs of the parity cases (the model is the root of the conversion)
SRU_PARITY: dict[str, dict[str, Any]] = {
    "uni": dict(input_size=5, hidden_size=4),
    "bidirectional": dict(input_size=5, hidden_size=4, bidirectional=True),
    "layer_norm": dict(input_size=4, hidden_size=4, layer_norm=True),
    "layer_norm_after": dict(input_size=5, hidden_size=4, layer_norm=True, normalize_after=True),
    "projection": dict(input_size=8, hidden_size=6, projection_size=3),
    "one_layer": dict(input_size=5, hidden_size=4, num_layers=1),
    "three_layers_highway_bias": dict(input_size=5, hidden_size=4, num_layers=3, highway_bias=-1.0),
    "no_skip_term": dict(input_size=5, hidden_size=4, num_layers=3, has_skip_term=False),
    "rescale": dict(input_size=5, hidden_size=4, num_layers=3, rescale=True, highway_bias=-1.0),
    "rnn_compatible_return": dict(input_size=5, hidden_size=4, num_layers=3, bidirectional=True,
                                  nn_rnn_compatible_return=True),
    "input_to_hidden_first": dict(input_size=6, hidden_size=4, proj_input_to_hidden_first=True, dropout=0.2),
    "tanh_v1_weight_c_init": dict(input_size=5, hidden_size=4, use_tanh=True, v1=True, weight_c_init=0.5),
}  # fmt: skip


def sru_parity(sru: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    torch.manual_seed(0)
    model = randomize_(sru.SRU(**kwargs))
    layers, out = model.num_layers, model.output_size
    x, c0 = torch.randn(LENGTH, BATCH, kwargs["input_size"]), torch.randn(layers, BATCH, out)
    return _parity(model, [((x,), {}), ((x, c0), {"mask_pad": pad_mask()})])


def sru_cell(sru: Any) -> dict[str, Any]:
    """SRUCell alone: a sequence with c0 and pads, and one step (B, in)."""
    torch.manual_seed(0)
    model = randomize_(sru.SRUCell(5, 4, highway_bias=-0.5))
    x, c0 = torch.randn(LENGTH, BATCH, 5), torch.randn(BATCH, 4)
    return _parity(model, [((x, c0), {"mask_pad": pad_mask()})])


def sru_cell_options(sru: Any) -> dict[str, Any]:
    torch.manual_seed(0)
    cell = sru.SRUCell(8, 3, n_proj=2, bidirectional=True, layer_norm=True, normalize_after=True, rescale=True)
    model = randomize_(cell)
    x, c0 = torch.randn(LENGTH, BATCH, 8), torch.randn(BATCH, 6)
    return _parity(model, [((x, c0), {"mask_pad": pad_mask()})])


def _tagger(sru: Any, **rnn_kwargs: Any) -> Tagger:
    torch.manual_seed(0)
    rnn = sru.SRU(6, 5, num_layers=2, bidirectional=True, layer_norm=True, **rnn_kwargs)
    return randomize_(Tagger(rnn, vocab=11, emb=6, out=10, tags=7))


def sru_tagger(sru: Any) -> dict[str, Any]:
    """A whole user model: only ``rnn`` is replaced; embedding and head are plain copies."""
    tokens = torch.randint(0, 11, (LENGTH, BATCH), generator=torch.Generator().manual_seed(3))
    return _parity(_tagger(sru), [((tokens,), {})])


def sru_tagger_modes(sru: Any) -> dict[str, Any]:
    """Mixed modes (model training, one layer in eval), frozen parameters, a float64 model."""
    model = _tagger(sru, dropout=0.1).double().train()
    model.rnn.rnn_lst[1].eval()
    model.emb.weight.requires_grad_(False)
    model.rnn.rnn_lst[0].weight_c.requires_grad_(False)
    return _convert_report(model)[1]


def sru_shared(sru: Any) -> dict[str, Any]:
    """One sru.SRU reachable twice stays one (shared) rnnx module."""
    rnn = sru.SRU(4, 4)
    pair = nn.ModuleDict({"a": rnn, "b": nn.Sequential(rnn)})
    converted, report = _convert_report(pair)
    report["shared"] = converted["a"] is converted["b"][0]
    return report


def sru_custom_m(sru: Any) -> dict[str, Any]:
    rnn = sru.SRU(6, 5, num_layers=2, custom_m=[nn.Linear(6, 20), nn.Linear(5, 15)])
    return _expect_error(Tagger(rnn, vocab=11, emb=6, out=5, tags=7))


def sru_fake_version(sru: Any) -> dict[str, Any]:
    """sru.__version__ patched to 2.5.0: the SRU is rejected, naming its dotted path."""
    saved = sru.__version__
    sru.__version__ = "2.5.0"
    try:
        return _expect_error(Nested(sru.SRU(4, 4)))
    finally:
        sru.__version__ = saved


def sru_version_fallback(sru: Any) -> dict[str, Any]:
    """No sru.__version__: the version comes from the installed distribution's metadata."""
    saved = sru.__version__
    del sru.__version__
    try:
        return _convert_report(sru.SRU(4, 4))[1]
    finally:
        sru.__version__ = saved


# ---- sru 3.0.0.dev6 -------------------------------------------------------------------------------

#: sru.SRUpp constructor kwargs of the parity cases
SRUPP_PARITY: dict[str, dict[str, Any]] = {
    "defaults": dict(input_size=8, hidden_size=8, proj_size=4),
    "every2_heads2_pre_ln": dict(input_size=6, hidden_size=8, proj_size=8, num_layers=3, num_heads=2,
                                 layer_norm=True, attention_every_n_layers=2),
    "last1_post_ln_rescale": dict(input_size=6, hidden_size=8, proj_size=4, num_layers=3, layer_norm=True,
                                  normalize_after=True, attention_last_n_layers=1, rescale=True,
                                  highway_bias=-1.0, attn_layer_norm=False),
    "no_attention": dict(input_size=8, hidden_size=8, proj_size=4, num_layers=2, attention_every_n_layers=3),
    "one_layer_bidir_rnn_return": dict(input_size=5, hidden_size=4, proj_size=4, num_layers=1, num_heads=2,
                                       bidirectional=True, nn_rnn_compatible_return=True,
                                       proj_input_to_hidden_first=True),
}  # fmt: skip


def srupp_parity(sru: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    torch.manual_seed(0)
    model = randomize_(sru.SRUpp(**kwargs))
    x = torch.randn(LENGTH, BATCH, kwargs["input_size"])
    c0 = torch.randn(model.num_layers, BATCH, model.output_size)
    masked = {"mask_pad": pad_mask(), "attn_mask": causal_mask()}
    return _parity(model, [((x,), {}), ((x, c0), masked)])


class SRUppLM(nn.Module):
    """A user LM: tokens (L, B) -> logits (L, B, vocab), the SRUpp at ``encoder``."""

    def __init__(self, sru: Any) -> None:
        super().__init__()
        self.emb = nn.Embedding(13, 8)
        self.encoder = sru.SRUpp(8, 8, 4, num_layers=2, dropout=0.1, attn_dropout=0.1, layer_norm=True)
        self.head = nn.Linear(8, 13)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.encoder(self.emb(tokens), attn_mask=causal_mask())[0])


def srupp_lm(sru: Any) -> dict[str, Any]:
    torch.manual_seed(0)
    tokens = torch.randint(0, 13, (LENGTH, BATCH), generator=torch.Generator().manual_seed(3))
    return _parity(randomize_(SRUppLM(sru)), [((tokens,), {})])


def srupp_lm_train_mode(sru: Any) -> dict[str, Any]:
    torch.manual_seed(0)
    return _convert_report(SRUppLM(sru).train())[1]


def sru30_sru(sru: Any) -> dict[str, Any]:
    """sru 3.0's SRU has another parameter layout (transform_module): rejected."""
    return _expect_error(Nested(sru.SRU(4, 4)))


def sru30_cell_root(sru: Any) -> dict[str, Any]:
    return _expect_error(sru.SRUCell(4, 4))


def srupp_fake_version(sru: Any) -> dict[str, Any]:
    saved = sru.__version__
    sru.__version__ = "3.0.0.dev5"
    try:
        return _expect_error(Nested(sru.SRUpp(8, 8, 4)))
    finally:
        sru.__version__ = saved


def _named(version: str, *runs: Callable[[Any], dict[str, Any]]) -> dict[str, tuple[str, Callable]]:
    """The cases of ``version`` named after their functions."""
    return {run.__name__: (version, run) for run in runs}


#: case name -> (sru version, function of the imported sru package returning the report)
CASES: dict[str, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    **{f"sru_{n}": ("2.6.0", functools.partial(sru_parity, kwargs=kw)) for n, kw in SRU_PARITY.items()},
    **_named(
        "2.6.0",
        sru_cell,
        sru_cell_options,
        sru_tagger,
        sru_tagger_modes,
        sru_shared,
        sru_custom_m,
        sru_fake_version,
        sru_version_fallback,
    ),
    **{f"srupp_{n}": ("3.0.0.dev6", functools.partial(srupp_parity, kwargs=kw)) for n, kw in SRUPP_PARITY.items()},
    **_named("3.0.0.dev6", srupp_lm, srupp_lm_train_mode, sru30_sru, sru30_cell_root, srupp_fake_version),
}
PARITY_CASES = [n for n in CASES if n.removeprefix("sru_") in SRU_PARITY or n.removeprefix("srupp_") in SRUPP_PARITY]
PARITY_CASES += ["sru_cell", "sru_cell_options", "sru_tagger", "srupp_lm"]


def _child(version: str, out_path: str) -> int:
    """Child entry point: imports sru (from the reference folder on PYTHONPATH), runs the cases."""
    ref_dir = sru_reference.reference_dir(version)
    try:
        sru = sru_reference.import_sru()
    except Exception:
        traceback.print_exc()
        return _IMPORT_FAILED
    if ref_dir not in Path(sru.__file__).resolve().parents or sru.__version__ != version:
        print(f"imported sru {sru.__version__} from {sru.__file__}, expected {version} from {ref_dir}", file=sys.stderr)
        return _IMPORT_FAILED
    results: dict[str, dict[str, Any]] = {}
    for name, (case_version, run) in CASES.items():
        if case_version != version:
            continue
        try:
            results[name] = {"report": run(sru), "error": None}
        except Exception:
            results[name] = {"report": None, "error": traceback.format_exc()}
    torch.save(results, out_path)
    return 0


# --------------------------------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------------------------------


def _run_child(version: str) -> dict[str, dict[str, Any]]:
    """Every case of ``version`` from one subprocess; fails (not skips) when sru is not set up."""
    reason = sru_reference.missing_reason(version)
    if reason is not None:
        pytest.fail(reason)
    ref_dir = sru_reference.reference_dir(version)
    with tempfile.TemporaryDirectory() as tmp:
        out_path = Path(tmp) / "results.pt"
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), version, str(out_path)],
            env=sru_reference._child_env(ref_dir, allow_cuda=False),
            capture_output=True,
            text=True,
            timeout=900,
        )
        tail = (proc.stdout + proc.stderr)[-4000:]
        if proc.returncode == _IMPORT_FAILED:
            pytest.fail(f"`import sru` {version} from {ref_dir} failed; run `bash scripts/setup.sh`:\n{tail}")
        assert proc.returncode == 0 and out_path.is_file(), f"child failed (exit {proc.returncode}):\n{tail}"
        return torch.load(out_path, weights_only=False)


@pytest.fixture(scope="module")
def results() -> dict[str, dict[str, Any]]:
    """Reports of every case of both versions (two subprocesses)."""
    return {**_run_child("2.6.0"), **_run_child("3.0.0.dev6")}


def report(results: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    res = results[name]
    assert res["error"] is None, f"{name}:\n{res['error']}"
    return res["report"]


def _rnnx_classes(rep: dict[str, Any]) -> set[str]:
    return {c for c in rep["classes"].values() if c.startswith("rnnx.")}


@pytest.mark.reference
@pytest.mark.parametrize("name", PARITY_CASES)
def test_converted_matches_package(results: dict, name: str) -> None:
    rep = report(results, name)
    assert rep["errors"], "no outputs compared"
    worst = max(rep["errors"], key=rep["errors"].get)
    assert rep["errors"][worst] <= TOL, f"{worst}: {rep['errors'][worst]:.3g}"
    assert not any(c.startswith("sru.") for c in rep["classes"].values()), rep["classes"]
    assert rep["unchanged"], "convert modified the original model"
    assert rep["rng_unchanged"], "convert consumed random numbers of the global RNG"
    assert rep["dtypes"] == rep["original_dtypes"]


@pytest.mark.reference
@pytest.mark.parametrize("name", [n for n in PARITY_CASES if n not in ("sru_tagger", "srupp_lm")])
def test_final_states_compared(results: dict, name: str) -> None:
    """The final cell states c (second output of SRU / SRUCell / SRUpp) are among the compared tensors."""
    assert "call0:out[1]" in report(results, name)["errors"]


@pytest.mark.reference
def test_root_layer_is_replaced(results: dict) -> None:
    assert report(results, "sru_uni")["root_class"] == "rnnx.models.sru.SRU"
    assert report(results, "sru_cell")["root_class"] == "rnnx.models.sru.SRUCell"
    assert report(results, "srupp_defaults")["root_class"] == "rnnx.models.srupp.SRUpp"


@pytest.mark.reference
def test_tagger_replaces_only_the_sru(results: dict) -> None:
    rep = report(results, "sru_tagger")
    assert rep["root_class"].endswith(".Tagger")
    assert rep["classes"]["rnn"] == "rnnx.models.sru.SRU"
    assert rep["classes"]["emb"] == "torch.nn.modules.sparse.Embedding"
    assert rep["classes"]["head"] == "torch.nn.modules.linear.Linear"
    lm = report(results, "srupp_lm")
    assert lm["classes"]["encoder"] == "rnnx.models.srupp.SRUpp"
    assert "rnnx.models.srupp.SRUppAttention" in _rnnx_classes(lm)


@pytest.mark.reference
@pytest.mark.parametrize("name", ["sru_tagger_modes", "srupp_lm_train_mode"])
def test_modes_grads_dtypes_preserved(results: dict, name: str) -> None:
    rep = report(results, name)
    assert rep["unchanged"] and rep["rng_unchanged"]
    assert rep["modes"] == rep["original_modes"]
    assert rep["grads"] == rep["original_grads"]
    assert rep["dtypes"] == rep["original_dtypes"]


@pytest.mark.reference
def test_tagger_modes_case_is_mixed(results: dict) -> None:
    """The modes case exercises what it claims: mixed modes, frozen tensors, float64."""
    rep = report(results, "sru_tagger_modes")
    assert rep["modes"][""] and not rep["modes"]["rnn.rnn_lst.1"]
    assert not rep["grads"]["emb.weight"] and not rep["grads"]["rnn.rnn_lst.0.weight_c"]
    assert rep["dtypes"]["rnn.rnn_lst.0.weight"] == "torch.float64"


@pytest.mark.reference
def test_shared_layer_stays_shared(results: dict) -> None:
    rep = report(results, "sru_shared")
    assert rep["shared"]
    assert rep["classes"]["a"] == "rnnx.models.sru.SRU"


@pytest.mark.reference
def test_version_from_metadata_when_no_dunder_version(results: dict) -> None:
    assert report(results, "sru_version_fallback")["root_class"] == "rnnx.models.sru.SRU"


#: error case -> (expected message start, words the message must contain)
ERROR_CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sru_custom_m": ("rnn: sru.SRU (sru 2.6.0) with custom_m cannot be converted: ", ("rnn.rnn_lst.0", "Linear")),
    "sru_fake_version": ("encoder.rnn: sru.SRU (sru 2.5.0) cannot be converted: ", ("2.6.0",)),
    "sru30_sru": ("encoder.rnn: sru.SRU (sru 3.0.0.dev6) cannot be converted: ", ("transform_module", "2.6.0")),
    "sru30_cell_root": ("<root>: sru.SRUCell (sru 3.0.0.dev6) cannot be converted: ", ("transform_module",)),
    "srupp_fake_version": ("encoder.rnn: sru.SRUpp (sru 3.0.0.dev5) cannot be converted: ", ("3.0.0.dev6",)),
}


@pytest.mark.reference
@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_conversion_errors(results: dict, name: str) -> None:
    rep = report(results, name)
    start, words = ERROR_CASES[name]
    message = rep["message"]
    assert message is not None, "no ConversionError raised"
    assert rep["is_value_error"]
    assert "\n" not in message
    assert message.startswith(start), message
    assert all(w in message for w in words), message
    assert rep["unchanged"], "a failed convert modified the original model"


# ---- the mechanism, without sru -------------------------------------------------------------------


def test_public_api() -> None:
    assert rnnx.models.convert is convert
    assert rnnx.models.ConversionError is ConversionError
    assert convert_api.ConversionError is ConversionError and convert_api.supported is supported
    assert issubclass(ConversionError, ValueError)
    assert {"sru.modules.SRU", "sru.modules.SRUCell", "sru.modules.SRUpp"} <= set(supported())


def test_importing_rnnx_models_imports_no_published_package() -> None:
    published = "('sru', 'fast_transformers')"
    code = f"import sys, rnnx.models; print(sorted(m for m in sys.modules if m.split('.')[0] in {published}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_model_without_convertible_layer_is_an_unchanged_copy() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.LSTM(4, 2)).eval()
    converted = convert(model)
    assert converted is not model and converted[0] is not model[0]
    assert [type(m) for m in converted.modules()] == [type(m) for m in model.modules()]
    for (k, v), (k2, v2) in zip(model.state_dict().items(), converted.state_dict().items()):
        assert k == k2 and torch.equal(v, v2) and v.data_ptr() != v2.data_ptr()
    assert not converted.training


class _FakeLayer(nn.Module):
    """Stands for a published class; :func:`fake_layer` builds it as ``fakepkg.modules.Layer``."""

    def __init__(self, bad: bool = False) -> None:
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self.bad = bad


#: a subclass whose qualified name is that of the fake published class
_FakePublished = type("Layer", (_FakeLayer,), {"__module__": "fakepkg.modules", "__qualname__": "Layer"})


def _fake_converters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, body: str) -> None:
    """Makes CONVERTER_MODULES ``("fake_conv_<n>", "rnnx.models.no_such_converters")`` with ``body``."""
    name = f"fake_conv_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = sys.modules["rnnx.models.convert"]  # the attribute rnnx.models.convert is the function
    monkeypatch.setattr(module, "CONVERTER_MODULES", (name, "rnnx.models.no_such_converters"))


FAKE_BODY = """
from torch import nn
from rnnx.models.convert import ConversionError

def to_identity(layer, path):
    if getattr(layer, "bad", False):
        raise ConversionError(f"{path}: fake cannot be converted: bad")
    out = nn.Identity()
    out.path = path
    return out

CONVERTERS = {"fakepkg.modules.Layer": to_identity}
"""


def _fake_layer(bad: bool = False) -> nn.Module:
    return _FakePublished(bad)


@pytest.fixture
def fake_class(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Converter modules: one converting ``fakepkg.modules.Layer`` to nn.Identity, one absent."""
    _fake_converters(monkeypatch, tmp_path, FAKE_BODY)


def test_walk_replaces_nested_and_root_layers(fake_class: None) -> None:
    assert supported() == ["fakepkg.modules.Layer"]
    model = nn.Sequential(nn.Linear(2, 2), nn.ModuleDict({"rnn": _fake_layer()}))
    converted = convert(model)
    assert isinstance(converted[1]["rnn"], nn.Identity) and converted[1]["rnn"].path == "1.rnn"
    assert isinstance(model[1]["rnn"], _FakeLayer)
    root = convert(_fake_layer())
    assert isinstance(root, nn.Identity) and root.path == "<root>"


def test_error_names_path_and_leaves_input(fake_class: None) -> None:
    model = nn.Sequential(nn.ModuleDict({"ok": _fake_layer(), "enc": _fake_layer(bad=True)}))
    with pytest.raises(ConversionError, match=r"^0\.enc: fake cannot be converted: bad$"):
        convert(model)
    assert all(isinstance(m, _FakeLayer) for m in model[0].values())


def test_broken_converter_module_is_not_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only an absent converter module is skipped; one failing to import its own dependency raises."""
    _fake_converters(monkeypatch, tmp_path, "import rnnx_no_such_dependency\nCONVERTERS = {}\n")
    with pytest.raises(ModuleNotFoundError, match="rnnx_no_such_dependency"):
        convert(nn.Linear(2, 2))


def test_converter_modules_listed() -> None:
    assert CONVERTER_MODULES == (
        "rnnx.models.convert_sru",
        "rnnx.models.fast_transformers",
        "rnnx.models.convert_transformers",
    )


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2]))
