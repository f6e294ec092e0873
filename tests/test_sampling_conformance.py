"""One sampling definition, three runtimes (docs/sampling.md): the golden cases of tests/data/sampling_cases.json
(logits, temperature, top-k, top-p, seed -> tokens, or the option a runtime must refuse) drawn by Python
(``SamplingOptions``), C (``rnnx_sampling_cases``, the native runtime's sampler: numpy's PCG64 seeded through
SeedSequence) and JavaScript (rnnx.mjs under node), each compared with the file token for token. The file is what
tests/data/make_sampling_cases.py makes from the reference, rnnx.runtime.sampling; every "off" spelling draws
what no filter draws. Seeded generation on the demo exports is compared across runtimes in
tests/test_native_runtime.py and tests/test_js_runtime.py.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rnnx.plugins import native_runtime as native
from rnnx.runtime import ortops
from rnnx.runtime.sampling import SamplingOptions

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
CASES_FILE = DATA / "sampling_cases.json"
CASES: list[dict[str, Any]] = json.loads(CASES_FILE.read_text())["cases"]
NODE = shutil.which("node")
#: The name JavaScript gives each option in its messages.
JS_NAMES = {"temperature": "temperature", "top_k": "topK", "top_p": "topP"}


def _make_module() -> Any:
    spec = importlib.util.spec_from_file_location("make_sampling_cases", DATA / "make_sampling_cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compare(runtime: str, got: list[dict[str, Any]], names: dict[str, str]) -> None:
    """Every case's tokens equal the file's, or its refusal names the option; one message listing the misses."""
    assert len(got) == len(CASES), f"{runtime}: {len(got)} results for {len(CASES)} cases"
    misses = []
    for case, result in zip(CASES, got):
        if "error" in case:
            if names[case["error"]] not in result.get("error", ""):
                misses.append(f"{case['name']}: expected a refusal naming {names[case['error']]}, got {result}")
        elif result.get("tokens") != case["tokens"]:
            misses.append(f"{case['name']}: expected {case['tokens']}, got {result}")
    assert not misses, f"{runtime} differs from the reference in {len(misses)} cases:\n" + "\n".join(misses)


def test_the_file_is_what_the_script_makes() -> None:
    assert _make_module().render() == CASES_FILE.read_text(), "run python tests/data/make_sampling_cases.py"


def test_the_cases_cover_the_spec() -> None:
    names = {c["name"] for c in CASES}
    assert len(CASES) >= 30
    for prefix in ("top_p_at_", "top_p_just_past_", "top_k_ties", "temperature_near_0", "top_k_above_v", "error_"):
        assert any(n.startswith(prefix) for n in names), prefix
    off = [c for c in CASES if c["name"].startswith("off_")]
    forms = {(json.dumps(c["top_k"]), json.dumps(c["top_p"])) for c in off}
    assert {("null", "null"), ("0", "null"), ("-1", "null"), ("null", "0.0"), ("null", "1.0"), ("null", "1")} <= forms
    assert all(c["tokens"] == off[0]["tokens"] for c in off), "every off form draws what no filter draws"


def test_python_draws_the_cases() -> None:
    got = []
    for case in CASES:
        try:
            options = SamplingOptions(case["temperature"], case["top_k"], case["top_p"], case["seed"])
        except ValueError as error:
            got.append({"error": str(error)})
            continue
        logits = np.asarray(case["logits"], dtype=np.float32)
        rngs = options.generators(len(logits))
        draws = [options.sample(logits, rngs) for _ in range(case["draws"])]
        got.append({"tokens": np.asarray(draws).T.tolist()})
    _compare("Python", got, {n: n for n in JS_NAMES})


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not found: cannot build the native runtime")
def test_c_draws_the_cases() -> None:
    if not (ortops.headers_dir() / "onnxruntime_cxx_api.h").is_file():
        pytest.fail(f"ONNX Runtime headers missing in {ortops.headers_dir()}: run scripts/setup.sh")
    program = native.build() / "rnnx_sampling_cases"  # the build test_native_runtime.py uses (incremental)
    result = subprocess.run([str(program), str(CASES_FILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    _compare("C", json.loads(result.stdout), {n: n for n in JS_NAMES})


JS_RUNNER = """
import { readFileSync } from 'node:fs';
import { rowGenerators, sampleRow, checkSamplingOptions } from '%s';
const cases = JSON.parse(readFileSync(0, 'utf8')).cases;
const out = cases.map((c) => {
  const options = { temperature: c.temperature, topK: c.top_k, topP: c.top_p };
  try { checkSamplingOptions(options); } catch (error) { return { error: error.message }; }
  const rngs = rowGenerators(c.seed, c.logits.length);
  return { tokens: c.logits.map((row, b) => Array.from({ length: c.draws }, () => sampleRow(row, rngs[b], options))) };
});
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript runtime cannot run")
def test_javascript_draws_the_cases() -> None:
    script = JS_RUNNER % (REPO / "runtime" / "js" / "rnnx.mjs").as_uri()
    result = subprocess.run([NODE, "--input-type=module", "-e", script], input=CASES_FILE.read_text(),
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    _compare("JavaScript", json.loads(result.stdout), JS_NAMES)
