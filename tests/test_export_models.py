"""export_model on every model family and both targets: ONNX Runtime against PyTorch, graph checks,
names and dtypes, metadata, atomic writes.

The parity loop here is independent of rnnx.runtime.parity: it drives the PyTorch model through its
own API (tokens, state object, pad_mask) and ONNX Runtime through the graph names, prefill then 64
chained steps (each side feeding its own state back), and compares logits and every state tensor.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

import numpy as np
import onnx
import pytest
import torch

from rnnx.runtime.contract import targets

ort = pytest.importorskip("onnxruntime")

from rnnx.export import (  # noqa: E402
    ExportError,
    MetadataError,
    export_model,
    read_metadata,
)
from rnnx.models.registry import build_model  # noqa: E402
from rnnx.models.state import flatten_state  # noqa: E402
from rnnx.models.stateful import lm_state_specs  # noqa: E402

FAMILIES = {
    "linear_transformer": ("linear_transformer", dict(vocab_size=19, d_model=32, num_layers=2, num_heads=2)),
    "sru": ("sru", dict(vocab_size=19, embed_dim=24, hidden_size=32, num_layers=2)),
    "srupp_softmax": ("srupp", dict(vocab_size=19, embed_dim=24, hidden_size=32, proj_size=16, num_layers=2,
                                    num_heads=2, attention="softmax")),
    "srupp_linear": ("srupp", dict(vocab_size=19, embed_dim=24, hidden_size=32, proj_size=16, num_layers=2,
                                   num_heads=2, attention="linear")),
}  # fmt: skip
TARGETS = ("tensorrt", "onnxruntime")
FP32_TOL = 1e-4
FP16_TOL = 1e-2
STEPS = 64


def make_model(family: str) -> torch.nn.Module:
    torch.manual_seed(1234)
    model_type, config = FAMILIES[family]
    return build_model(model_type, config).eval()


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (0 for two empty or equal tensors)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape
    if got.size == 0:
        return 0.0
    err = np.max(np.abs(got - want))
    return float(err / max(np.max(np.abs(want)), 1e-12)) if err else 0.0


def prompts(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(3, 9) tokens, right-padded: row lengths 9, 6, 4; pad_mask True = pad."""
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, vocab, (3, 9), generator=gen)
    pad = torch.arange(9)[None, :] >= torch.tensor([9, 6, 4])[:, None]
    return tokens, pad


@torch.no_grad()
def chained_parity(model, session: ort.InferenceSession, steps: int = STEPS) -> list[dict[str, float]]:
    """Per call (prefill, then ``steps`` single tokens) the relative error of logits and each state."""
    tokens, pad = prompts(model.vocab_size)
    B = tokens.shape[0]
    state = model.init_state(B)
    names = [name for name, _ in flatten_state(state)]
    onnx_past = [(t.float() if t.is_floating_point() else t).numpy() for _, t in flatten_state(state)]
    last = (~pad).sum(1) - 1
    errors = []
    for _ in range(steps + 1):
        logits, state = model(tokens, state, pad_mask=pad)
        feed = {"input_ids": tokens.numpy(), "attention_mask": (~pad).long().numpy()}
        feed.update({f"past_key_values.{n}": p for n, p in zip(names, onnx_past)})
        outs = session.run(None, feed)
        row = {"logits": rel_err(outs[0], logits.float().numpy())}
        flat = flatten_state(state)
        assert [n for n, _ in flat] == names
        for (name, t), got in zip(flat, outs[1:]):
            row[name] = rel_err(got, t.float().numpy())
        errors.append(row)
        onnx_past = outs[1:]
        tokens = logits[torch.arange(B), last].argmax(-1)[:, None]
        pad, last = torch.zeros(B, 1, dtype=torch.bool), torch.zeros(B, dtype=torch.long)
    return errors


def session_for(path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=[(f, t) for f in FAMILIES for t in TARGETS], ids=lambda p: f"{p[0]}-{p[1]}")
def exported(request, tmp_path_factory):
    family, target = request.param
    model = make_model(family)
    out = tmp_path_factory.mktemp(f"{family}-{target}") / "export"
    result = export_model(model, out, target=target, check=False)
    return family, target, model, result


def test_ort_matches_torch_prefill_and_chained_steps(exported):
    family, target, model, result = exported
    errors = chained_parity(model, session_for(result.model_path))
    assert len(errors) == STEPS + 1
    worst = {name: max(row[name] for row in errors) for name in errors[0]}
    assert all(v <= FP32_TOL for v in worst.values()), worst


def test_graph_passes_checker_and_strict_shape_inference(exported):
    _, _, _, result = exported
    onnx.checker.check_model(str(result.model_path), full_check=True)
    model = onnx.load(str(result.model_path))
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)


def test_graph_names_dtypes_and_dynamic_axes(exported):
    family, _, model, result = exported
    graph = onnx.load(str(result.model_path)).graph
    layout = lm_state_specs(model)
    names = [s.name for s in layout]
    assert names == [n for n, _ in flatten_state(model.init_state(1))]
    assert [v.name for v in graph.input] == ["input_ids", "attention_mask"] + [f"past_key_values.{n}" for n in names]
    assert [v.name for v in graph.output] == ["logits"] + [f"present.{n}" for n in names]
    elem = {v.name: v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.output)}
    assert elem["input_ids"] == elem["attention_mask"] == onnx.TensorProto.INT64
    assert elem["logits"] == onnx.TensorProto.FLOAT
    for s in layout:
        want = onnx.TensorProto.BOOL if s.name.endswith("valid") else onnx.TensorProto.FLOAT
        assert elem[f"past_key_values.{s.name}"] == elem[f"present.{s.name}"] == want
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.input}
    assert dims["input_ids"] == ["batch", "length"]
    if family == "srupp_softmax":
        assert dims["past_key_values.attention.0.key"][0] == "batch"
        assert dims["past_key_values.attention.0.key"][2] == "past_length"
        assert dims["past_key_values.attention.0.valid"] == ["batch", "past_length"]
        assert [s.grows for s in layout] == [False] + [True] * 6
    if family == "sru":
        assert dims["past_key_values.c"] == [2, "batch", 32]


def test_metadata_content(exported):
    family, target, model, result = exported
    meta = read_metadata(result.out_dir)
    assert meta == result.metadata
    assert meta["format"] == "rnnx-onnx" and meta["format_version"] == 2 and meta["interface"] == "causal_lm"
    assert meta["model_type"] == FAMILIES[family][0] and meta["config"] == model.config
    assert meta["vocab_size"] == 19 and meta["target"] == target
    assert meta["precision"] == "fp32" and meta["opset"] == 20
    assert meta["model_sha256"] == hashlib.sha256(result.model_path.read_bytes()).hexdigest()
    assert meta["source"] == {"checkpoint": None, "weights_sha256": None}
    assert meta["versions"]["torch"] == torch.__version__ and meta["versions"]["onnx"] == onnx.__version__
    assert [t["name"] for t in meta["inputs"]][:2] == ["input_ids", "attention_mask"]
    assert [t["name"] for t in meta["state"]] == [s.name for s in lm_state_specs(model)]
    assert meta["outputs"][0] == {"name": "logits", "shape": ["batch", "length", 19], "dtype": "float32"}
    ops = {op["name"]: op for op in meta["ops"]}
    if family != "linear_transformer":
        assert ops["SRUScan"] == {"name": "SRUScan", "domain": "rnnx", "version": 2,
                                  "plugin_version": "2", "plugin_namespace": "rnnx"}  # fmt: skip
    if target == "tensorrt" and family in ("linear_transformer", "srupp_linear"):
        assert "CausalLinearAttention" in ops
    if family == "srupp_softmax":
        key = next(s for s in meta["state"] if s["name"] == "attention.1.key")
        assert key["shape"] == ["batch", 2, "past_length", 8] and key["grows"] is True
        out = next(t for t in meta["outputs"] if t["name"] == "present.attention.1.valid")
        assert out == {"name": "present.attention.1.valid", "shape": ["batch", "past_length + length"], "dtype": "bool"}
    assert meta["parity"] is None  # exported with check=False


#: fp16 cases: every family once, and each op on each target (SRUScan: sru on tensorrt, both SRU++ on
#: onnxruntime; causal linear attention: linear_transformer on tensorrt, srupp_linear lowered to the ORT
#: contrib op). The fp32 ``exported`` fixture covers the full family x target product.
FP16_CASES = [
    ("linear_transformer", "tensorrt"), ("sru", "tensorrt"),
    ("srupp_softmax", "onnxruntime"), ("srupp_linear", "onnxruntime"),
]  # fmt: skip


@pytest.mark.parametrize("family, target", FP16_CASES)
def test_fp16_export_state_stays_fp32_and_matches_fp32_torch(tmp_path, family, target):
    model = make_model(family)
    result = export_model(model, tmp_path / "fp16", precision="fp16", target=target, check=False)
    graph = onnx.load(str(result.model_path)).graph
    elem = {v.name: v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.output)}
    assert elem["logits"] == onnx.TensorProto.FLOAT16
    for name, t in elem.items():
        if name.startswith(("past_key_values.", "present.")):
            assert t == (onnx.TensorProto.BOOL if name.endswith("valid") else onnx.TensorProto.FLOAT), name
    assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in graph.initializer)
    errors = chained_parity(model, session_for(result.model_path))  # reference: the fp32 model
    worst = {name: max(row[name] for row in errors) for name in errors[0]}
    assert all(v <= FP16_TOL for v in worst.values()), worst
    assert max(worst.values()) > 1e-6  # really computed in fp16
    assert read_metadata(result.out_dir)["precision"] == "fp16"
    assert next(p for p in model.parameters()).dtype == torch.float32  # the given module is untouched


def test_check_writes_parity_report_and_polygraphy_files(tmp_path):
    result = export_model(make_model("srupp_linear"), tmp_path / "out", decode_steps=STEPS, polygraphy_steps=2)
    report = result.parity
    assert report.passed and report.tolerance == FP32_TOL and len(report.steps) == STEPS + 1
    assert {e.name for e in report.steps[0].errors} >= {"logits", "present.c", "present.attention.1.S"}
    assert "PASS" in report.table()
    names = sorted(p.name for p in result.out_dir.iterdir())
    assert names == [
        "model.onnx", "parity.json", "parity_reference.npz", "polygraphy_inputs.json", "polygraphy_outputs.json",
        "rnnx.json",
    ]  # fmt: skip
    from polygraphy.comparator import RunResults
    from polygraphy.json import load_json

    feeds = load_json(str(result.out_dir / "polygraphy_inputs.json"))
    assert len(feeds) == 3 and list(feeds[0])[:2] == ["input_ids", "attention_mask"]
    runs = RunResults.load(str(result.out_dir / "polygraphy_outputs.json"))
    iterations = runs["reference"]
    assert len(iterations) == 3 and list(iterations[0].keys())[0] == "logits"
    meta = read_metadata(result.out_dir)
    assert meta["parity"]["passed"] is True and meta["parity"]["decode_steps"] == STEPS
    assert result.polygraphy_command[:3] == ["polygraphy", "run", str(result.model_path)]


@pytest.mark.parametrize("opset", [18, 21])
def test_other_opsets(tmp_path, opset):
    model = make_model("sru")
    result = export_model(model, tmp_path / "out", opset=opset, check=False)
    proto = onnx.load(str(result.model_path))
    assert {imp.domain: imp.version for imp in proto.opset_import}[""] == opset
    errors = chained_parity(model, session_for(result.model_path), steps=4)
    assert max(max(row.values()) for row in errors) <= FP32_TOL


@pytest.mark.parametrize(
    "kwargs, match",
    [({"target": "trt"}, "unknown target"), ({"precision": "int8"}, "unsupported precision"),
     ({"opset": 17}, "unsupported opset"), ({"opset": 22}, "unsupported opset")],
)  # fmt: skip
def test_bad_options_raise_before_writing(tmp_path, kwargs, match):
    out = tmp_path / "out"
    with pytest.raises(ExportError, match=match):
        export_model(make_model("sru"), out, **kwargs)
    assert os.listdir(tmp_path) == []


def _snapshot(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def test_late_failure_leaves_out_dir_untouched(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sentinel.bin").write_bytes(os.urandom(64))
    (out / "model.onnx").write_bytes(b"previous model")
    before = _snapshot(out)
    monkeypatch.setitem(
        targets.PRECISION_RECORDS, "fp32", replace(targets.FP32, tolerance=-1.0)
    )  # every comparison fails
    with pytest.raises(ExportError, match="parity check failed"):
        export_model(make_model("sru"), out, decode_steps=2)
    assert _snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary directory left behind


def test_reexport_replaces_model_and_keeps_other_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "sentinel.bin").write_bytes(b"keep me")
    (out / "polygraphy_inputs.json").write_text("stale")
    result = export_model(make_model("sru"), out, check=False)
    assert (out / "sentinel.bin").read_bytes() == b"keep me"
    assert not (out / "polygraphy_inputs.json").exists()  # stale file of an earlier export removed
    assert sorted(p.name for p in result.files) == ["model.onnx", "rnnx.json"]
    read_metadata(out)


def test_read_metadata_detects_a_replaced_model(tmp_path):
    result = export_model(make_model("sru"), tmp_path / "out", check=False)
    result.model_path.write_bytes(result.model_path.read_bytes() + b"\0")
    with pytest.raises(MetadataError, match="sha256"):
        read_metadata(result.out_dir)
    (result.out_dir / "rnnx.json").write_text('{"format": "other"}')
    with pytest.raises(MetadataError, match="not rnnx export metadata"):
        read_metadata(result.out_dir)


def test_export_leaves_the_callers_module_as_it_was(tmp_path, monkeypatch):
    """fp32 exports trace the caller's module itself (no whole-model copy): its train / eval modes come
    back as they were and no parameter changes, also when the export fails."""
    model = make_model("srupp_linear").train()
    next(iter(model.children())).eval()  # a mix of modes
    modes = {name: m.training for name, m in model.named_modules()}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    export_model(model, tmp_path / "out", check=True, decode_steps=2)
    monkeypatch.setitem(
        targets.PRECISION_RECORDS, "fp32", replace(targets.FP32, tolerance=-1.0)
    )  # the check fails after tracing
    with pytest.raises(ExportError, match="parity check failed"):
        export_model(model, tmp_path / "bad", decode_steps=1)
    assert {name: m.training for name, m in model.named_modules()} == modes
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
