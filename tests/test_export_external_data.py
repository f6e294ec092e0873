"""Large exports: ONNX external data (``model.onnx.data`` beside ``model.onnx``), forced on tiny models.

The auto threshold is tested by lowering :data:`rnnx.export.stages.EXTERNAL_DATA_THRESHOLD`, not by
building a > 1.5 GiB model; a > 2 GB export is a benchmark, not a CI test.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rnnx.runtime.contract import targets

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import rnnx.runtime as rt  # noqa: E402
from rnnx.export import ExportError, export, export_model, exporter, stages  # noqa: E402
from rnnx.export.cli import main as export_cli  # noqa: E402
from rnnx.models import SRU  # noqa: E402
from rnnx.models.registry import build_model  # noqa: E402
from rnnx.runtime.contract.artifact import (  # noqa: E402
    EXPORT_FILES,
    EXTERNAL_DATA_FILE,
    TEXT_FILES,
    MetadataError,
    model_signature,
    read_metadata,
    sha256_file,
    validate_metadata,
)

DATA = EXTERNAL_DATA_FILE
LM_CONFIG = dict(vocab_size=19, d_model=32, num_layers=2, num_heads=2)  # 32 x 32 fp32 weights: 4 KiB tensors


def tiny_lm() -> torch.nn.Module:
    torch.manual_seed(1234)
    return build_model("linear_transformer", LM_CONFIG).eval()


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.fixture(scope="module")
def lm_exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, exporter.ExportResult]:
    """The same LM exported with external data (with the parity check) and as one file (without): the default
    (``external_data=None``), which the size of its tensors decides."""
    root = tmp_path_factory.mktemp("external")
    model = tiny_lm()
    external = export_model(model, root / "external", external_data=True, decode_steps=16)
    single = export_model(model, root / "single", check=False)
    return external.out_dir, single.out_dir, external


def test_external_data_files_metadata_and_parity(lm_exports) -> None:
    out, single, result = lm_exports
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(set(EXPORT_FILES) - set(TEXT_FILES)) and DATA in names  # no text
    assert [p.name for p in result.files][:2] == [DATA, "model.onnx"] and result.files[-1].name == "rnnx.json"
    meta = read_metadata(out)
    assert meta["external_data"] == {"file": DATA, "sha256": sha256_file(out / DATA)}
    assert meta["model_sha256"] == sha256_file(out / "model.onnx")
    assert result.parity is not None and result.parity.passed and meta["parity"]["passed"] is True
    # The weights (26,688 fp32 parameters, 107 KB) are in the data file, not in model.onnx.
    weights = 26_688 * 4
    assert (single / "model.onnx").stat().st_size - (out / "model.onnx").stat().st_size > 0.9 * weights
    assert (out / DATA).stat().st_size > 0.9 * weights
    assert read_metadata(single)["external_data"] is None and not (single / DATA).exists()


def test_runtime_generates_the_same_as_a_single_file_export(lm_exports) -> None:
    out, single, _ = lm_exports
    a = rt.load(out, backend="onnxruntime")
    b = rt.load(single, backend="onnxruntime")
    ids = np.array([[3, 1, 4, 1, 5, 9]], dtype=np.int64)
    mask = np.ones_like(ids)
    la, lb = a.run(input_ids=ids, attention_mask=mask)["logits"], b.run(input_ids=ids, attention_mask=mask)["logits"]
    np.testing.assert_array_equal(la, lb)  # the same graph and weights on the same runtime: bit-identical
    prompts = [[1, 2, 3, 4, 5], [7, 8], [11]]
    assert a.generate_all(prompts, 12, temperature=0) == b.generate_all(prompts, 12, temperature=0)
    assert a.generate_all(prompts, 12, seed=5) == b.generate_all(prompts, 12, seed=5)


def test_a_tampered_or_missing_data_file_is_refused(lm_exports, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(lm_exports[0], out)
    data = bytearray((out / DATA).read_bytes())
    data[100] ^= 0xFF
    (out / DATA).write_bytes(bytes(data))
    with pytest.raises(MetadataError) as info:
        read_metadata(out)
    message = str(info.value)
    assert "\n" not in message and str(out / DATA) in message and "sha256" in message
    read_metadata(out, verify_hash=False)  # the layout itself is fine
    (out / DATA).unlink()
    with pytest.raises(MetadataError, match="external data file .* is missing"):
        read_metadata(out)


def test_a_failed_late_export_leaves_an_external_data_export_byte_identical(lm_exports, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(lm_exports[0], out)
    before = snapshot(out)
    monkeypatch.setitem(
        targets.PRECISION_RECORDS, "fp32", replace(targets.FP32, tolerance=-1.0)
    )  # every comparison fails
    with pytest.raises(ExportError, match="parity check failed"):
        export_model(tiny_lm(), out, external_data=True, decode_steps=2)
    with pytest.raises(ExportError, match="parity check failed"):
        export_model(tiny_lm(), out, external_data=False, decode_steps=2)
    assert snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary directory left behind


def test_reexport_without_external_data_removes_the_stale_data_file(lm_exports, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(lm_exports[0], out)
    (out / "sentinel.bin").write_bytes(b"keep me")
    result = export_model(tiny_lm(), out, external_data=False, check=False)
    assert not (out / DATA).exists() and (out / "sentinel.bin").read_bytes() == b"keep me"
    assert sorted(p.name for p in result.files) == ["model.onnx", "rnnx.json"]
    assert read_metadata(out)["external_data"] is None
    assert rt.load(out, backend="onnxruntime").generate_all([[1, 2, 3]], 4, temperature=0) == rt.load(
        lm_exports[1], backend="onnxruntime"
    ).generate_all([[1, 2, 3]], 4, temperature=0)
    # ... and back: external data again.
    export_model(tiny_lm(), out, external_data=True, check=False)
    assert read_metadata(out)["external_data"]["file"] == DATA and (out / DATA).is_file()


def test_auto_threshold_decides(lm_exports, tmp_path: Path, monkeypatch) -> None:
    model = tiny_lm()
    small = lm_exports[1]  # default None, tiny weights: one file
    assert not (small / DATA).exists() and read_metadata(small)["external_data"] is None
    monkeypatch.setattr(stages, "EXTERNAL_DATA_THRESHOLD", 16 << 10)  # the tiny LM has ~100 KiB of tensors
    lines: list[str] = []
    export_model(model, tmp_path / "big", check=False, log=lines.append)
    assert read_metadata(tmp_path / "big")["external_data"]["file"] == DATA and (tmp_path / "big" / DATA).is_file()
    assert any(f"with external data {DATA}" in line for line in lines)
    export_model(model, tmp_path / "forced-off", check=False, external_data=False)  # False wins over the size
    assert not (tmp_path / "forced-off" / DATA).exists()


@pytest.mark.parametrize("bad", [1, "yes", 0.0])
def test_bad_external_data_option_is_a_one_line_error(tmp_path: Path, bad) -> None:
    with pytest.raises(ExportError, match="external_data must be True, False or None"):
        export_model(tiny_lm(), tmp_path / "out", external_data=bad)
    assert not (tmp_path / "out").exists()


def test_stock_polygraphy_reads_the_data_file_beside_the_model(lm_exports, tmp_path: Path) -> None:
    from test_export_cli import polygraphy_executable

    out, _, result = lm_exports
    command = result.polygraphy_command
    assert command is not None and shlex.join(command).startswith(f"polygraphy run {out / 'model.onnx'} --onnxrt")
    # From another working directory: the data file is found beside the model, not in the cwd.
    proc = subprocess.run([polygraphy_executable(), *command[1:]], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PASSED" in log and "Passed: 9/9 iterations" in log, log[-3000:]


class Encoder(torch.nn.Module):
    """features (B, T, 5) -> (B, T, 32); an SRU state."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(5, 32)
        self.rnn = SRU(32, 32, num_layers=2)

    def init_state(self, batch: int):
        return self.rnn.init_state(batch)

    def forward(self, features, state):
        h, s = self.rnn.forward_state(self.proj(features).transpose(0, 1), state)
        return h.transpose(0, 1), s


def test_fp16_generic_export_with_external_data_matches_its_single_file_twin(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Encoder().eval()
    x = torch.randn(2, 7, 5)
    ext = export(model, (x,), tmp_path / "ext", target="onnxruntime", precision="fp16", external_data=True,
                 chained_calls=8)  # fmt: skip
    one = export(model, (x,), tmp_path / "one", target="onnxruntime", precision="fp16", check=False)
    assert ext.parity.passed and (ext.out_dir / DATA).is_file() and not (one.out_dir / DATA).exists()
    assert read_metadata(ext.out_dir)["inputs"][0]["dtype"] == "float16"
    feats = np.random.default_rng(3).standard_normal((2, 9, 5)).astype(np.float32)
    a, b = rt.load(ext.out_dir, backend="onnxruntime"), rt.load(one.out_dir, backend="onnxruntime")
    for chunk in (feats[:, :4], feats[:, 4:]):  # two chained calls: the state carries over
        np.testing.assert_array_equal(a.run(features=chunk)["output"], b.run(features=chunk)["output"])


def test_cli_external_data_flag(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path

    ckpt = str(demo_checkpoint_path(DEMO_CHECKPOINTS[0]))
    runner = CliRunner()
    result = runner.invoke(export_cli, [ckpt, "--out", str(tmp_path / "on"), "--external-data", "--no-check"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "on" / DATA).is_file() and read_metadata(tmp_path / "on")["external_data"]["file"] == DATA
    result = runner.invoke(export_cli, [ckpt, "--out", str(tmp_path / "on"), "--no-external-data", "--no-check"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "on" / DATA).exists() and read_metadata(tmp_path / "on")["external_data"] is None


def test_tensorrt_side_reads_nodes_and_keys_on_the_data_file(lm_exports) -> None:
    """No TensorRT needed: the stdlib node reader copes with external-data initializers, and the engine
    cache key changes when only the data file changes."""
    from rnnx.runtime.tensorrt.builder import key_parts, read_rnnx_nodes
    from rnnx.runtime.tensorrt.profiles import ProfileLimits, build_profiles

    out, single, _ = lm_exports
    nodes = read_rnnx_nodes(out / "model.onnx")
    assert nodes and nodes == read_rnnx_nodes(single / "model.onnx")
    meta = read_metadata(out)
    profiles = build_profiles(meta, ProfileLimits(max_batch=2, max_length=16))
    gpu = ("NVIDIA H100", "9.0", 0)
    base = key_parts(meta, "fp32", profiles, None, "10.14.1", gpu)
    assert base.external_data_sha256 == meta["external_data"]["sha256"]
    other = json.loads(json.dumps(meta))
    other["external_data"]["sha256"] = "0" * 64  # same model.onnx, other weights
    changed = key_parts(other, "fp32", profiles, None, "10.14.1", gpu)
    assert changed.model_sha256 == base.model_sha256 and changed.key() != base.key()
    assert changed.file_stem() != base.file_stem()
    single_meta = read_metadata(single)
    assert key_parts(single_meta, "fp32", profiles, None, "10.14.1", gpu).external_data_sha256 is None


def test_contract_records_and_validates_the_data_file(lm_exports) -> None:
    meta = read_metadata(lm_exports[0], verify_hash=False)
    for bad in ({"file": "../model.onnx.data", "sha256": "0"}, {"file": "a/b", "sha256": "0"}, {"file": DATA},
                "model.onnx.data", {"file": "", "sha256": "0"}):  # fmt: skip
        with pytest.raises(MetadataError, match="external_data"):
            validate_metadata({**meta, "external_data": bad})
    validate_metadata({**meta, "external_data": None})
    no_field = {k: v for k, v in meta.items() if k != "external_data"}
    validate_metadata(no_field)  # exports written before external data: a single file
    # The signature follows the weights: the data file's hash counts when the source weights are unknown,
    # and a single-file export's signature is what it was (the model file's hash).
    unknown = {**meta, "source": {**meta["source"], "weights_sha256": None}}
    other = {**unknown, "external_data": {**meta["external_data"], "sha256": "0" * 64}}
    assert model_signature(unknown) != model_signature(other)
    assert model_signature({**unknown, "external_data": None}) == model_signature(
        {k: v for k, v in unknown.items() if k != "external_data"}
    )


def _weights_model() -> onnx.ModelProto:
    """A small graph whose initializers straddle the external-data threshold (a Constant node, a local
    function and an int64 initializer too), for the one-file writer."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    big = numpy_helper.from_array(rng.standard_normal((64, 48)).astype(np.float32), "big")
    small = numpy_helper.from_array(np.arange(8, dtype=np.float32), "small")
    other = numpy_helper.from_array(rng.standard_normal((48, 8)).astype(np.float32), "other")
    shape = numpy_helper.from_array(np.array([-1, 8], dtype=np.int64), "shape")
    scale = helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(np.float32(0.5)))
    twice = helper.make_function(
        "local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])], [helper.make_opsetid("", 17)]
    )
    nodes = [
        scale,
        helper.make_node("MatMul", ["x", "big"], ["h"]),
        helper.make_node("MatMul", ["h", "other"], ["y0"]),
        helper.make_node("Add", ["y0", "small"], ["y1"]),
        helper.make_node("Mul", ["y1", "scale"], ["y2"]),
        helper.make_node("Twice", ["y2"], ["y3"], domain="local"),
        helper.make_node("Reshape", ["y3", "shape"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", 8])], [big, small, other, shape],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    return helper.make_model(graph, opset_imports=opsets, functions=[twice], producer_name="rnnx-test")


def test_internalize_writes_the_one_file_model_that_the_external_form_describes(tmp_path: Path) -> None:
    """The streaming one-file writer (export/onnx_files.py): the file parses to exactly the proto that
    ``onnx.load`` makes of the external form (tensor order, data, the rest of the graph), passes the
    checker, and runs in ONNX Runtime to the same outputs; the data file is gone."""
    import onnxruntime as ort

    from rnnx.export import onnx_files

    path = tmp_path / "model.onnx"
    data = stages.save_external(_weights_model(), path)
    assert data == tmp_path / DATA
    external_names = [t.name for t in onnx.load(str(path), load_external_data=False).graph.initializer
                      if t.data_location == onnx.TensorProto.EXTERNAL]  # fmt: skip
    assert external_names == ["big", "other"]  # the small ones stay inline
    expected = onnx.load(str(path))  # the external data read back into the proto
    x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]

    onnx_files.internalize(path, data)

    assert not data.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    got = onnx.load(str(path))
    assert [(t.name, t.data_type, list(t.dims), t.raw_data) for t in got.graph.initializer] == [
        (t.name, t.data_type, list(t.dims), t.raw_data) for t in expected.graph.initializer
    ]
    assert all(t.data_location == onnx.TensorProto.DEFAULT and not t.external_data for t in got.graph.initializer)
    sizes = onnx_files.tensor_bytes(got)
    got.graph.ClearField("initializer")
    expected.graph.ClearField("initializer")
    assert got == expected  # nodes, functions, opsets, inputs / outputs
    onnx.checker.check_model(str(path), full_check=True)
    np.testing.assert_array_equal(
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0], want
    )
    constant = _weights_model().graph.node[0].attribute[0].t.ByteSize()
    assert sizes == sum(t.ByteSize() for t in onnx.load(str(path)).graph.initializer) + constant


def test_internalize_refuses_a_short_data_file_and_keeps_the_external_form(tmp_path: Path) -> None:
    from rnnx.export import onnx_files

    path = tmp_path / "model.onnx"
    data = stages.save_external(_weights_model(), path)
    data.write_bytes(data.read_bytes()[:-100])
    before = snapshot(tmp_path)
    with pytest.raises(ValueError, match=r"model\.onnx\.data: ends inside tensor 'other'"):
        onnx_files.internalize(path, data)
    assert snapshot(tmp_path) == before
