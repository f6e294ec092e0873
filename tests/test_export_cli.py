"""The ``export-model`` CLI: the demo export with no arguments, the printed Polygraphy command run with
stock Polygraphy, and one-line errors that leave the output directory as it was."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("onnxruntime")

from rnnx.export import read_metadata
from rnnx.export.cli import main
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.runtime.contract.artifact import EXPORT_FILES, EXTERNAL_DATA_FILE, TEXT_FILES

DEMO = DEMO_CHECKPOINTS[0]


def polygraphy_executable() -> str:
    """The ``polygraphy`` script next to this interpreter, else the one on PATH."""
    local = Path(sys.executable).parent / "polygraphy"
    found = str(local) if local.exists() else shutil.which("polygraphy")
    if found is None:
        pytest.skip("the polygraphy command-line tool is not installed")
    return found


@pytest.fixture(scope="module")
def demo_export(demo_cli_export):
    """``export-model`` with no arguments, run in an empty working directory (tests/conftest.py)."""
    return demo_cli_export


def test_no_arguments_exports_the_demo(demo_export):
    cwd, result = demo_export
    assert result.exit_code == 0, result.output
    out = cwd / "rnnx-export" / DEMO
    # everything an export writes (a demo-sized model is one file: no external data)
    assert sorted(p.name for p in out.iterdir()) == sorted(set(EXPORT_FILES) - {EXTERNAL_DATA_FILE, *TEXT_FILES})
    text = result.output
    assert f"exporting the shipped demo {DEMO!r}" in text
    for step in ("tracing", "checker", "parity", "writing"):
        assert step in text
    assert "PASS: onnxruntime vs torch" in text and "+ 64 decode steps" in text
    assert "logits" in text and "present.layers.1.S" in text
    meta = read_metadata(out)
    info = json.loads((demo_checkpoint_path(DEMO) / "config.json").read_text())
    assert meta["source"]["checkpoint"] == str(demo_checkpoint_path(DEMO))
    assert meta["source"]["weights_sha256"] == info["weights_sha256"]
    assert meta["model_type"] == info["model_type"] and meta["config"] == info["config"]
    assert meta["parity"]["passed"] is True and meta["parity"]["tolerance"] == 1e-4


def test_printed_polygraphy_command_passes_with_stock_polygraphy(demo_export):
    cwd, result = demo_export
    lines = result.output.splitlines()
    command = shlex.split(lines[lines.index("re-check with stock Polygraphy:") + 1])
    out = Path("rnnx-export") / DEMO
    assert command[:8] == [
        "polygraphy", "run", str(out / "model.onnx"), "--onnxrt",
        "--load-inputs", str(out / "polygraphy_inputs.json"),
        "--load-outputs", str(out / "polygraphy_outputs.json"),
    ]  # fmt: skip
    assert "--atol" in command and command[-2:] == ["--rtol", "0.0001"]
    proc = subprocess.run([polygraphy_executable(), *command[1:]], cwd=cwd, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "PASSED" in log and "Passed: 9/9 iterations" in log


def _bad_checkpoint(tmp_path: Path, kind: str) -> str:
    if kind == "missing":
        return str(tmp_path / "no-such-checkpoint")
    ckpt = tmp_path / "ckpt"
    shutil.copytree(demo_checkpoint_path(DEMO), ckpt)
    if kind == "corrupt-weights":
        data = (ckpt / "model.pt").read_bytes()
        (ckpt / "model.pt").write_bytes(data[: len(data) // 2])
    elif kind == "corrupt-config":
        (ckpt / "config.json").write_text("{not json")
    elif kind == "unknown-model-type":
        info = json.loads((ckpt / "config.json").read_text())
        info["model_type"] = "gru"
        (ckpt / "config.json").write_text(json.dumps(info))
    return str(ckpt)


@pytest.mark.parametrize(
    "kind, options, message",
    [
        ("missing", [], "checkpoint directory does not exist"),
        ("corrupt-weights", [], "sha256 mismatch"),
        ("corrupt-config", [], "invalid JSON"),
        ("unknown-model-type", [], "unknown model_type 'gru'"),
        ("demo", ["--opset", "17"], "unsupported opset 17; supported: 18-21"),
        ("demo", ["--precision", "int8"], "unsupported precision 'int8'"),
        ("demo", ["--target", "cuda"], "unknown target 'cuda'"),
    ],
)
def test_bad_input_is_one_line_error_and_leaves_out_dir(tmp_path, kind, options, message):
    out = tmp_path / "out"
    out.mkdir()
    sentinel = os.urandom(256)
    (out / "sentinel.bin").write_bytes(sentinel)
    (out / "model.onnx").write_bytes(b"an earlier export")
    args = ([] if kind == "demo" else [_bad_checkpoint(tmp_path, kind)]) + ["--out", str(out), *options]
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("Error: ") and message in errors[0], result.stderr
    assert "Traceback" not in result.output
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx", "sentinel.bin"]
    assert (out / "sentinel.bin").read_bytes() == sentinel
    assert (out / "model.onnx").read_bytes() == b"an earlier export"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary directory left
