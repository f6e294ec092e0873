"""The worked examples of docs/bring-your-own-model.md run and measure what the guide says they do.

Each example runs in its own subprocess (``main(out_dir)`` through :func:`runpy.run_path`), which
prints the dict of numbers it returns as JSON; the tests assert on those numbers. The sru tagger's
subprocess has the published sru 2.6.0 on ``PYTHONPATH`` with the environment
``tests/sru_reference.py`` gives its own children, and imports sru as they do (its extensions built by content).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pytest
import sru_reference

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "examples"
MARK = "RNNX-EXAMPLE-NUMBERS "

#: the child: runs the example's main(out_dir) and prints its numbers after MARK
DRIVER = f"""
import json, runpy, sys
numbers = runpy.run_path(sys.argv[1])["main"](sys.argv[2])
print({MARK!r} + json.dumps(numbers))
"""
#: prepended to the driver of an example that uses the published sru: imports it as tests/sru_reference.py's
#: children do, before the example's own ``import sru``
SRU_PRELUDE = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import sru_reference
sru_reference.import_sru()
sys.path.pop(0)
"""


def run_example(name: str, out_dir: Path, env: Optional[dict[str, str]] = None, prelude: str = "") -> dict[str, Any]:
    """``docs/examples/<name>.py``'s ``main(out_dir)`` in a subprocess (``prelude`` run first) -> the numbers it
    returned."""
    child_env = dict(env if env is not None else os.environ)
    child_env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.run(
        [sys.executable, "-c", prelude + DRIVER, str(EXAMPLES / f"{name}.py"), str(out_dir)],
        cwd=REPO,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"{name}.py failed (exit {proc.returncode}):\n{tail}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    assert len(lines) == 1, f"{name}.py printed no numbers:\n{tail}"
    return json.loads(lines[0][len(MARK) :])


def check_export(out_dir: Path, numbers: dict[str, Any]) -> None:
    """The export directory holds the graph, the metadata and a passing parity report."""
    assert (out_dir / "model.onnx").is_file() and (out_dir / "rnnx.json").is_file()
    assert numbers["parity_passed"] is True, numbers["parity_verdict"]
    assert numbers["parity_worst_rel"] <= 1e-4
    assert numbers["parity_verdict"].startswith("PASS")
    assert json.loads((out_dir / "parity.json").read_text())["passed"] is True


@pytest.mark.slow
def test_bisru_tagger(tmp_path: Path) -> None:
    reason = sru_reference.missing_reason("2.6.0")
    if reason is not None:
        pytest.fail(f"{reason}; the guide's tagger example needs it (`bash scripts/setup.sh`)")
    env = sru_reference._child_env(sru_reference.reference_dir("2.6.0"), allow_cuda=False)
    numbers = run_example("bisru_tagger", tmp_path / "tagger", env, prelude=SRU_PRELUDE)
    check_export(tmp_path / "tagger", numbers)
    assert numbers["inputs"] == ["tokens"]
    assert numbers["accuracy"] >= 0.95, numbers
    assert numbers["tags_equal"] is True
    assert numbers["logits_rel"] <= 1e-4
    assert len(numbers["tags"]) == len(numbers["sentences"]) == 5


@pytest.mark.slow
def test_streaming_encoder(tmp_path: Path) -> None:
    numbers = run_example("streaming_encoder", tmp_path / "encoder")
    check_export(tmp_path / "encoder", numbers)
    assert numbers["state_names"] == ["c"]
    assert numbers["chunks"] == 13
    assert numbers["chunked_vs_whole_max_abs"] <= 1e-5
    assert numbers["resumed_vs_stream_max_abs"] <= 1e-5
    assert numbers["onnxruntime_vs_torch_rel"] <= 1e-4


@pytest.mark.slow
def test_fast_transformers_lm(tmp_path: Path) -> None:
    if importlib.util.find_spec("fast_transformers") is None:
        pytest.skip("pytorch-fast-transformers 0.4.0 is not installed: run `bash scripts/setup.sh`")
    numbers = run_example("fast_transformers_lm", tmp_path / "lm")
    check_export(tmp_path / "lm", numbers)
    assert numbers["tokens_equal"] is True
    assert numbers["convert_max_abs"] <= 1e-4
    assert numbers["decode_accuracy"] >= 0.9, numbers
    assert numbers["state_names"] == ["0.S", "0.z", "1.S", "1.z"]
    assert len(numbers["decoded"]) == 9


def test_streaming_encoder_factory_is_what_export_model_takes() -> None:
    from rnnx.models.factory import load_factory

    spec = load_factory(f"{EXAMPLES / 'streaming_encoder.py'}:factory")
    assert type(spec.module).__name__ == "StreamingEncoder"
    assert [tuple(t.shape) for t in spec.example_inputs] == [(2, 16, 40)]
    assert spec.options == {"output_names": ["encoded"]}
