"""Weight-only int8 / int4 quantization inside the export (issue 18): ``export-model --quantize``.

* Both demo checkpoints x both targets x {int8, int4}: the export passes ``onnx.checker`` (full_check), its
  parity budget (``rnnx.runtime.contract.artifact.QUANTIZATION_BUDGETS``: logits max_rel, mean KL, drift over 256
  steps, teacher-forced top-1 on the copy task's answers) against the fp32 PyTorch model, and runs in
  ``rnnx.runtime`` with IO binding on and off to the same logits; every weight MatMul but the head is
  quantized, in the target's format; the tensorrt files meet TensorRT's Dequantize rules (the static check
  ``tensorrt_rule_violations``, itself tested on files that break each rule).
* Tied and untied heads quantize when ``head`` asks; an SRU LM with two SRUScan overloads quantizes and loads
  (the overloads and the functions' opsets kept); the embedding quantizes on onnxruntime (int4).
* A quantized export records what it did, its state files do not load into the fp32 export, and the torch
  backend refuses it with one line instead of running fp32 weights.
* Options a target cannot honour fail before exporting, and a budget miss fails the export and leaves the
  output directory as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import rnnx.runtime as rt
from rnnx.export import ExportError, export_model
from rnnx.export.cli import main as export_cli
from rnnx.export.quantize import QuantizeOptions, quantize_matrix, tensorrt_rule_violations
from rnnx.models import build_model
from rnnx.models.checkpoint import demo_checkpoint_path
from rnnx.runtime.backends.base import InputError
from rnnx.runtime.contract import artifact
from rnnx.runtime.contract.artifact import QUANTIZATION_BUDGETS, read_metadata

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
#: Each scheme on each target once, each demo on both targets (a case per demo x target x scheme repeats what
#: these cover: the pass is per weight matrix, the demos differ in layers, not in how a MatMul is quantized).
CASES = [
    ("linear_transformer_copy", "onnxruntime", "int4"),
    ("linear_transformer_copy", "tensorrt", "int8"),
    ("srupp_linear_copy", "onnxruntime", "int8"),
    ("srupp_linear_copy", "tensorrt", "int4"),
]
FORMATS = {"onnxruntime": "MatMulNBits", "tensorrt": "DequantizeLinear"}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory, demo_exports) -> dict[tuple[str, str, str], Path]:
    """The quantized exports of :data:`CASES`, and the session's fp32 demo exports as ``(name, target, "fp32")``."""
    root = tmp_path_factory.mktemp("quantized")
    out = {(name, target, "fp32"): path for (name, target), path in demo_exports.items()}
    for case in CASES:
        name, target, scheme = case
        out[case] = export_model(
            demo_checkpoint_path(name), root / "-".join(case), target=target, quantize=scheme
        ).out_dir
    return out


def op_counts(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in onnx.load(str(path)).graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_a_quantized_demo_passes_its_budget_and_runs(exports, case) -> None:
    name, target, scheme = case
    directory = exports[case]
    meta = read_metadata(directory)
    onnx.checker.check_model(str(directory / "model.onnx"), full_check=True)
    record = meta["quantization"]
    assert record["scheme"] == scheme and record["format"] == FORMATS[target] and record["symmetric"]
    assert record["gates"] == ["max_rel", "mean_kl", "drift", "top1"]  # a trained checkpoint: top-1 gated too
    quality = meta["parity"]["quality"]
    budget = QUANTIZATION_BUDGETS[scheme]
    assert meta["parity"]["passed"] and not quality["failures"]
    assert quality["max_rel"] <= budget["max_rel"] and quality["mean_kl"] <= budget["mean_kl"]
    assert quality["top1"] >= budget["top1"] and 0 < quality["drift"] <= budget["drift"]
    assert quality["positions"] == sum(record["scored_calls"]) > 0
    heads = [e for e in record["excluded"] if "head" in e["reason"]]
    assert len(heads) == 1 and all(not e["head"] for e in record["quantized"])
    counts = op_counts(directory / "model.onnx")
    if target == "onnxruntime":
        assert counts.get("MatMulNBits") == len(record["quantized"]) and counts.get("MatMul") == 1
        assert record["accuracy_level"] == 4 and record["block_size"] == (32 if scheme == "int4" else 128)
    else:
        assert counts.get("DequantizeLinear") == len(record["quantized"])
        assert tensorrt_rule_violations(directory / "model.onnx") == []
        assert meta["opset_imports"][""] == 21
    fp32 = exports[(name, target, "fp32")]
    assert (directory / "model.onnx").stat().st_size < 0.5 * (fp32 / "model.onnx").stat().st_size

    prompts = [[1, 2, 3, 4, 10], [5, 6, 10]]
    logits = []
    for io_binding in (True, False):
        session = rt.load(directory, backend="onnxruntime", io_binding=io_binding)
        state = session.prefill(prompts)
        step = [state.last_logits]
        for _ in range(3):
            step.append(session.step(np.argmax(step[-1], -1).tolist(), state))
        logits.append(np.stack(step))
    np.testing.assert_allclose(logits[0], logits[1], rtol=1e-5, atol=1e-5)


def test_quantized_state_files_and_the_torch_backend(exports, tmp_path: Path) -> None:
    quantized = exports[("srupp_linear_copy", "onnxruntime", "int8")]
    fp32 = exports[("srupp_linear_copy", "onnxruntime", "fp32")]
    session = rt.load(quantized, backend="onnxruntime")
    path = session.prefill([[1, 2, 10]]).save(tmp_path / "state.npz")
    with pytest.raises(Exception, match="saved from a different model"):
        rt.load(fp32, backend="onnxruntime").load_state(path)
    with pytest.raises(InputError, match=r"weights are int8 \(MatMulNBits\), and backend torch would run the fp32"):
        rt.load(quantized, backend="torch")


@pytest.mark.parametrize("target", artifact.TARGETS)
def test_tied_and_untied_heads_quantize_when_asked(target: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    for tied in (True, False):
        model = build_model("linear_transformer", {"vocab_size": 40, "d_model": 64, "num_heads": 2,
                                                   "tie_weights": tied})  # fmt: skip
        options = QuantizeOptions("int8", block_size=64, head="int4")
        result = export_model(model, tmp_path / f"{target}-{tied}", target=target, quantize=options, decode_steps=8)
        record = result.metadata["quantization"]
        heads = [e for e in record["quantized"] if e["head"]]
        assert [h["bits"] for h in heads] == [4] and record["excluded"] == [], (tied, record["excluded"])
        assert record["gates"] == ["max_rel", "mean_kl", "drift"]  # untrained: no top-1 gate
        graph = onnx.load(str(result.model_path)).graph
        gathered = {n.input[0] for n in graph.node if n.op_type == "Gather"}
        assert not any(n.op_type == "Transpose" and n.input[0] in gathered for n in graph.node)  # folded
        if target == "tensorrt":
            assert tensorrt_rule_violations(result.model_path) == []


def test_a_tied_head_kept_fp_stores_no_second_table(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model("linear_transformer", {"vocab_size": 400, "d_model": 64, "num_heads": 2, "tie_weights": True})
    fp32 = export_model(model, tmp_path / "fp32", target="onnxruntime", decode_steps=2, check=False).model_path
    int8 = export_model(model, tmp_path / "int8", target="onnxruntime", quantize="int8", decode_steps=8).model_path
    assert int8.stat().st_size < 0.7 * fp32.stat().st_size  # (K = 64 pads to the int8 block of 128)
    graph = onnx.load(str(int8)).graph
    assert sum(len(t.raw_data) >= 400 * 64 * 4 for t in graph.initializer) == 1  # the one fp32 table


def test_an_sru_lm_with_two_scan_overloads_quantizes_and_loads(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_model("sru", {"vocab_size": 20, "embed_dim": 16, "hidden_size": 64, "num_layers": 2})
    result = export_model(model, tmp_path / "sru", target="onnxruntime", quantize="int8", decode_steps=8)
    proto = onnx.load(str(result.model_path))
    overloads = sorted(f.overload for f in proto.functions if f.name == "SRUScan")
    assert len(overloads) == 2 and all(overloads)
    model_opset = {o.domain: o.version for o in proto.opset_import}[""]
    assert all(o.version == model_opset for f in proto.functions for o in f.opset_import if o.domain == "")
    assert op_counts(result.model_path).get("MatMulNBits") == 2
    session = rt.load(result.out_dir, backend="onnxruntime")
    assert session.step([3], session.prefill([[1, 2, 3]])).shape == (1, 20)


def test_the_embedding_quantizes_on_onnxruntime(tmp_path: Path) -> None:
    options = QuantizeOptions("int4", embedding=True)
    result = export_model(demo_checkpoint_path("srupp_linear_copy"), tmp_path / "emb", target="onnxruntime",
                          quantize=options)  # fmt: skip
    assert op_counts(result.model_path).get("GatherBlockQuantized") == 1
    assert [e["bits"] for e in result.metadata["quantization"]["quantized"] if e.get("embedding")] == [4]
    onnx.checker.check_model(str(result.model_path), full_check=True)


def test_options_a_target_cannot_honour_fail_before_exporting(tmp_path: Path) -> None:
    demo = demo_checkpoint_path("linear_transformer_copy")
    cases = [
        ("tensorrt", QuantizeOptions("int4", block_size=32), "TensorRT takes for INT4 weights .* 64, 128"),
        ("tensorrt", QuantizeOptions("int8", embedding=True), "not available on the tensorrt target"),
        ("onnxruntime", QuantizeOptions("int8", embedding=True), "needs --quantize int4"),
        ("onnxruntime", QuantizeOptions("int3"), "unknown quantization 'int3'"),
        ("onnxruntime", QuantizeOptions("int8", block_size=48), "unsupported block size 48"),
    ]
    for target, options, message in cases:
        with pytest.raises(ExportError, match=message):
            export_model(demo, tmp_path / "never", target=target, quantize=options)
    assert not (tmp_path / "never").exists()
    result = CliRunner().invoke(export_cli, ["--head", "int8", "--out", str(tmp_path / "cli")])
    assert result.exit_code != 0 and "need --quantize int8|int4" in result.output


def test_a_budget_miss_fails_the_export_and_keeps_the_old_one(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    export_model(demo_checkpoint_path("linear_transformer_copy"), out, target="onnxruntime", decode_steps=4)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setitem(artifact.QUANTIZATION_BUDGETS, "int8", {**QUANTIZATION_BUDGETS["int8"], "mean_kl": 1e-12})
    with pytest.raises(ExportError, match=r"parity check failed: FAIL.*over budget: mean_kl .* > 1e-12"):
        export_model(demo_checkpoint_path("linear_transformer_copy"), out, target="onnxruntime", quantize="int8")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_block_quantization_matches_a_naive_loop() -> None:
    """quantize_matrix against a per-block loop: the chosen scale gives the least squared error of the
    clip ratios, every value is round(w / scale) clipped to the int4 range."""
    from rnnx.export.quantize import CLIP_RATIOS

    w = np.random.default_rng(0).standard_normal((128, 6)).astype(np.float32)
    q, scale = quantize_matrix(w, 4, 64)
    assert q.shape == (128, 6) and scale.shape == (2, 6) and (scale > 0).all()
    for b in range(2):
        for n in range(6):
            block = w[b * 64 : (b + 1) * 64, n]
            errs = {}
            for r in CLIP_RATIOS:
                s = np.float32(r) * np.abs(block).max() / 7
                errs[r] = (((np.clip(np.rint(block / s), -8, 7) * s) - block) ** 2).sum()
            best = np.float32(min(errs, key=errs.get)) * np.abs(block).max() / 7
            assert np.isclose(scale[b, n], best, rtol=1e-6)
            np.testing.assert_array_equal(q[b * 64 : (b + 1) * 64, n], np.clip(np.rint(block / scale[b, n]), -8, 7))


def _dq_model(path: Path, data: onnx.TensorProto, scale: np.ndarray, opset: int = 21, zero=None, **attrs) -> Path:
    inputs = [data.name, "scale"] + (["zero"] if zero is not None else [])
    node = helper.make_node("DequantizeLinear", inputs, ["w"], name="dq", **attrs)
    inits = [data, numpy_helper.from_array(scale, "scale")] + ([zero] if zero is not None else [])
    out = helper.make_tensor_value_info("w", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", [], [out], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def test_the_tensorrt_rule_check_catches_each_broken_rule(tmp_path: Path) -> None:
    int4 = helper.make_tensor("q", TensorProto.INT4, [128, 4], np.zeros(256, np.uint8).tobytes(), raw=True)
    int4_odd = helper.make_tensor("q", TensorProto.INT4, [128, 3], np.zeros(192, np.uint8).tobytes(), raw=True)
    int8 = numpy_helper.from_array(np.zeros((128, 4), np.int8), "q")
    blocks = np.ones((2, 4), np.float32)
    good = _dq_model(tmp_path / "good.onnx", int4, blocks, axis=0, block_size=64)
    assert tensorrt_rule_violations(good) == []
    assert tensorrt_rule_violations(_dq_model(tmp_path / "c.onnx", int8, np.ones(4, np.float32), axis=1)) == []
    broken = {
        "negative": (int4, -blocks, {}, {"axis": 0, "block_size": 64}, "not strictly positive"),
        "zero point": (int8, np.ones(4, np.float32), numpy_helper.from_array(np.ones(4, np.int8), "zero"),
                       {"axis": 1}, "zero point must be absent or all zeros"),
        "block 32": (int4, np.ones((4, 4), np.float32), {}, {"axis": 0, "block_size": 32}, "block size 32"),
        "int8 blocks": (int8, blocks, {}, {"axis": 0, "block_size": 64}, "block quantization is INT4 only"),
        "odd": (int4_odd, np.ones((2, 3), np.float32), {}, {"axis": 0, "block_size": 64}, "even last dimension"),
        "per tensor int4": (int4, np.ones(1, np.float32), {}, {}, "INT4 needs per-block scales"),
    }  # fmt: skip
    for what, (data, scale, zero, attrs, message) in broken.items():
        path = _dq_model(tmp_path / f"{what}.onnx", data, scale, zero=zero or None, **attrs)
        problems = tensorrt_rule_violations(path)
        assert any(message in p for p in problems), (what, problems)
    old = _dq_model(tmp_path / "old.onnx", int4, blocks, opset=20, axis=0, block_size=64)
    assert any("INT4 needs opset >= 21, the model has 20" in p for p in tensorrt_rule_violations(old))


def test_the_export_directory_is_complete_after_a_cli_quantized_export(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    result = CliRunner().invoke(export_cli, ["--quantize", "int4", "--target", "tensorrt", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "int4 budget" in result.output and "PASS" in result.output
    assert read_metadata(out)["quantization"]["block_size"] == 64
    shutil.rmtree(out)


def test_a_user_module_quantizes_through_the_generic_export(tmp_path: Path) -> None:
    """A streaming encoder (not a language model): its projections quantize, the scan stays rnnx's, and the
    budget is max_rel and drift over the chained calls."""
    from rnnx.export import export
    from rnnx.models import SRU

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj, self.rnn, self.out = torch.nn.Linear(8, 64), SRU(64, 64, num_layers=2), torch.nn.Linear(64, 6)

        def init_state(self, batch: int):
            return self.rnn.init_state(batch)

        def forward(self, x: torch.Tensor, state):
            h, state = self.rnn.forward_state(self.proj(x).transpose(0, 1), state)
            return self.out(h.transpose(0, 1)), state

    torch.manual_seed(1)
    options = QuantizeOptions("int4", block_size=64, head="int8")
    result = export(Encoder().eval(), torch.randn(2, 7, 8), tmp_path / "enc", target="tensorrt", quantize=options)
    record = result.metadata["quantization"]
    assert record["gates"] == ["max_rel", "drift"] and result.parity.passed
    assert [e["reason"] for e in record["excluded"]] == ["K=8 is not a multiple of the block size 64"]
    assert sorted(e["bits"] for e in record["quantized"]) == [4, 4, 8]  # two SRU projections, the int8 head
    assert tensorrt_rule_violations(result.model_path) == []
    assert "SRUScan" in op_counts(result.model_path)


@pytest.mark.parametrize("head", ["fp", "int8"])
def test_merged_projection_weights_fold_into_one_quantized_weight(head: str) -> None:
    """An export's merged q/k/v projection is ``MatMul(x, Transpose(Concat(Wq, Wk, Wv)))``: the fold makes it one
    (in, 3 * out) initializer, which is then quantized like any weight (head kept fp or not); the Concat and
    Transpose go, and the folded weight equals the concatenation."""
    from rnnx.export.quantize import _fold_transposed_weights, find_weights, quantize_model

    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((16, 32)).astype(np.float32) for _ in range(3)]  # (out, in) each, as nn.Linear
    inits = [numpy_helper.from_array(p, f"W{i}") for i, p in enumerate(parts)]
    nodes = [
        helper.make_node("Concat", ["W0", "W1", "W2"], ["cat"], axis=0, name="cat"),
        helper.make_node("Transpose", ["cat"], ["catT"], perm=[1, 0], name="t"),
        helper.make_node("MatMul", ["x", "catT"], ["qkv"], name="proj"),
        helper.make_node("Relu", ["qkv"], ["y"], name="act"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 48])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    _fold_transposed_weights(folded.graph, merged_only=True)
    (weight,) = find_weights(folded.graph)
    assert [n.op_type for n in folded.graph.node] == ["MatMul", "Relu"]
    value = numpy_helper.to_array(next(t for t in folded.graph.initializer if t.name == weight.initializer))
    np.testing.assert_array_equal(value, np.concatenate(parts).T)
    _, record = quantize_model(model, "tensorrt", QuantizeOptions(scheme="int8", head=head))
    assert [n.op_type for n in model.graph.node if n.op_type in ("Concat", "Transpose")] == []
    assert [q["shape"] for q in record["quantized"]] == [[32, 48]]
