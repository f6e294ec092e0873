"""The JavaScript runtime (runtime/js/rnnx.mjs) against rnnx.runtime on the demo exports and a softmax SRU++
whose KV cache grows (onnxruntime target): greedy tokens equal generate_all's under onnxruntime-node (batch 1,
and a right-padded batch of 2 where one row stops early), seeded samples equal Python's and repeat (both demos at
batch 1 and 3; tests/test_sampling_conformance.py runs the golden sampling cases), the same
on onnxruntime-web's wasm build under Node, numpy's generator and sampling reproduced on random logits, the
Node example's output and errors, and the demo page generating in headless Chromium with onnxruntime-web
(WebAssembly, and WebGPU on SwiftShader's software adapter). Real ONNX Runtime sessions throughout:
onnxruntime-node's native binding and onnxruntime-web from the packages pinned in runtime/js/package-lock.json,
which scripts/setup.sh installs into .cache/js (``npm ci --ignore-scripts``); without node or those packages
the tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prompt_cases import PARSED, PROMPT_CASES, REFUSED, expected_error

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS
from rnnx.runtime.contract import artifact
from rnnx.runtime.contract.targets import ONNXRUNTIME
from rnnx.runtime.sampling import sample

pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[1]
JS = REPO / "runtime" / "js"
NODE_MODULES = Path(os.environ.get("RNNX_JS_MODULES", REPO / ".cache" / "js" / "node_modules"))
#: The ONNX Runtime packages every test needs; the browser ones only the page test needs.
ORT_PACKAGES = ("onnxruntime-node", "onnxruntime-web")
BROWSER_PACKAGES = ("puppeteer-core", "@sparticuz/chromium")
NODE = shutil.which("node")


def _missing_packages(packages: tuple[str, ...]) -> list[str]:
    return [p for p in packages if not (NODE_MODULES / p / "package.json").is_file()]


pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed: the JavaScript runtime cannot run"),
    pytest.mark.skipif(
        bool(_missing_packages(ORT_PACKAGES)),
        reason=f"{_missing_packages(ORT_PACKAGES)} of runtime/js/package.json not in {NODE_MODULES}: run setup.sh",
    ),
]
needs_browser = pytest.mark.skipif(
    bool(_missing_packages(BROWSER_PACKAGES)),
    reason=f"the page test's browser packages {_missing_packages(BROWSER_PACKAGES)} are not in {NODE_MODULES}: run "
    "scripts/setup.sh",
)

#: A copy-task prompt whose copy holds a 0 (the stop token below: that row stops after 10 tokens) and one without.
PROMPTS = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 10], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 10]]
STOP = [0]
MAX_NEW = 16
#: A seeded sampled run (every filter on).
SAMPLED = {"temperature": 1.3, "top_k": 6, "top_p": 0.95, "seed": 7}


def node(*args: str, check: bool = True, stdin: str = "") -> subprocess.CompletedProcess:
    """``node args...`` with the packages on NODE_PATH; AssertionError with its stderr when it fails (``check``)."""
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    result = subprocess.run([NODE, *args], input=stdin, capture_output=True, text=True, timeout=120, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"node {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def rnnx_mjs(names: str, data: Any, body: str) -> Any:
    """Runs ``body`` as an ES module in node with ``names`` (``"PCG64, sampleRow"``) imported from rnnx.mjs and
    ``data`` as the constant ``data`` (JSON through stdin); returns the JSON ``body`` prints (one console.log)."""
    script = (
        "import { readFileSync } from 'node:fs';\n"
        f"import {{ {names} }} from {json.dumps((JS / 'rnnx.mjs').as_uri())};\n"
        "const data = JSON.parse(readFileSync(0, 'utf8'));\n" + body
    )
    return json.loads(node("--input-type=module", "-e", script, stdin=json.dumps(data)).stdout)


def js_generate(export: Path, prompts: list[list[int]], *options: str) -> list[list[int]]:
    """runtime/js/generate.mjs --json: each row's new tokens."""
    args = [str(JS / "generate.mjs"), str(export), "--max-new-tokens", str(MAX_NEW), "--json"]
    args += [a for p in prompts for a in ("--prompt", ",".join(map(str, p)))]
    return json.loads(node(*args, *options).stdout)["tokens"]


def sampled_options() -> list[str]:
    return [f"--{key.replace('_', '-')}={value}" for key, value in SAMPLED.items()]


#: The exports compared: both demos and the softmax SRU++, whose KV cache grows (a zero-length past at first).
SOFTMAX = "softmax_srupp"
EXPORTS = (*DEMO_CHECKPOINTS, SOFTMAX)


@pytest.fixture(scope="module")
def exports(demo_exports: dict[tuple[str, str], Path], softmax_srupp_export: Path) -> dict[str, Path]:
    return {
        **{name: demo_exports[(name, ONNXRUNTIME.name)] for name in DEMO_CHECKPOINTS},
        SOFTMAX: softmax_srupp_export,
    }


@pytest.fixture(scope="module")
def python_tokens(exports: dict[str, Path]) -> dict[tuple[str, str, int], list[list[int]]]:
    """rnnx.runtime's generate_all: (demo, "greedy" | "sampled", batch) -> tokens."""
    found = {}
    for name, path in exports.items():
        session = rt.load(path, backend="onnxruntime")
        for batch in (1, 2):
            prompts = PROMPTS[:batch]
            found[name, "greedy", batch] = session.generate_all(prompts, MAX_NEW, temperature=0, stop_tokens=STOP)
            found[name, "sampled", batch] = session.generate_all(prompts, MAX_NEW, stop_tokens=STOP, **SAMPLED)
    return found


@pytest.mark.parametrize("name", EXPORTS)
@pytest.mark.parametrize("batch", [1, 2])
def test_greedy_tokens_equal_python(name: str, batch: int, exports, python_tokens) -> None:
    want = python_tokens[name, "greedy", batch]
    if batch == 2 and name in DEMO_CHECKPOINTS:  # the stop token ends row 0 early, row 1 runs on beside a pad
        assert len(want[0]) == 10 and want[0][-1] in STOP and len(want[1]) == MAX_NEW
    got = js_generate(exports[name], PROMPTS[:batch], "--temperature=0", f"--stop={','.join(map(str, STOP))}")
    assert got == want


def test_onnxruntime_web_under_node_grows_the_kv_cache(exports, python_tokens) -> None:
    """onnxruntime-web's wasm build (the page's) from a zero-length past, in Node (a wasm start costs ~5 s)."""
    got = js_generate(exports[SOFTMAX], PROMPTS, "--ort=web", "--temperature=0", f"--stop={STOP[0]}")
    assert got == python_tokens[SOFTMAX, "greedy", 2]


@pytest.mark.parametrize("name", [DEMO_CHECKPOINTS[0], SOFTMAX])
def test_seeded_sampling_equals_python_and_repeats(name: str, exports, python_tokens) -> None:
    want = python_tokens[name, "sampled", 2]
    assert want != python_tokens[name, "greedy", 2], "the sampled run should differ from greedy"
    runs = [js_generate(exports[name], PROMPTS, *sampled_options(), f"--stop={STOP[0]}") for _ in range(2)]
    assert runs[0] == runs[1] == want


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
@pytest.mark.parametrize("batch", [1, 3])
def test_seeded_tokens_equal_python_on_the_demos(name: str, batch: int, exports) -> None:
    """Both demos at batch 1 and 3 (three prompts of different lengths): the seed's tokens are Python's."""
    prompts = [*PROMPTS, [7, 8, 9, 1, 2, 3, 10]][:batch]
    want = rt.load(exports[name], backend="onnxruntime").generate_all(prompts, MAX_NEW, **SAMPLED)
    assert js_generate(exports[name], prompts, *sampled_options()) == want


def test_a_seed_past_2_to_the_53_is_kept_exactly(exports) -> None:
    """generate.mjs --seed reads a big integer as a BigInt: 2^60 + 1 samples what Python's seed 2^60 + 1 does, and
    not what 2^60 does (a Number would round the two to one seed)."""
    name, seed = DEMO_CHECKPOINTS[0], 2**60 + 1
    options = {**SAMPLED, "temperature": 3.0, "top_k": None, "top_p": None}
    session = rt.load(exports[name], backend="onnxruntime")
    want = {s: session.generate_all(PROMPTS[:1], MAX_NEW, **{**options, "seed": s}) for s in (seed, seed - 1)}
    assert want[seed] != want[seed - 1], "two seeds should give different samples at temperature 3"
    assert js_generate(exports[name], PROMPTS[:1], "--temperature=3", f"--seed={seed}") == want[seed]
    bad = node(str(JS / "generate.mjs"), str(exports[name]), "--prompt", "1,2", "--seed", "1.5", check=False)
    assert bad.returncode == 2 and '--seed: expected a non-negative integer, got "1.5"' in bad.stderr


def test_gpu_buffer_states_are_disposed(exports) -> None:
    """stateLocation 'gpu-buffer': each generate() disposes the previous state, a caller's early stop keeps the state
    as model.state until reset(), takeState() hands one out (disposeState frees it, a step on it then fails with
    one line), and a state a second generate() replaced while the first ran is freed when the first ends. No GPU
    here: tests/js/state_disposal.mjs stands in for WebGPU's buffers (a test double of the GPU only; the numbers
    come from a real onnxruntime-node session), counting the live ones; its greedy tokens equal the CPU run's."""
    name = DEMO_CHECKPOINTS[1]
    out = node(str(REPO / "tests" / "js" / "state_disposal.mjs"), str(exports[name]), json.dumps(PROMPTS[0]), "12")
    result = json.loads(out.stdout)
    n = result["states"]
    assert n > 0 and result["disposalGreedy"] == result["greedy"]
    checks = result["checks"]
    assert checks["interleaved"] == {"first": result["greedy"], "second": result["greedy"]}
    assert {k: v for k, v in checks.items() if k != "interleaved"} == {
        "afterOne": n, "afterTwo": n, "afterBreak": n, "afterReset": 0, "afterTake": 2 * n, "afterDisposeTaken": n,
        "stepOnDisposed": "state: disposed (disposeState, reset or a later generate freed it)",
        "afterInterleaved": n, "afterFinalReset": 0,
    }  # fmt: skip


def test_demo_server_answers_a_bad_escape_and_keeps_serving(exports) -> None:
    """serve.mjs: /export/%E0 (not UTF-8) is a 404, not a crash; the server serves the next request."""
    script = (
        "import { serve } from " + json.dumps((JS / "demo" / "serve.mjs").as_uri()) + ";\n"
        "const { server, url } = await serve(process.argv[1], { port: 0 });\n"
        "const codes = [];\n"
        "for (const path of ['export/%E0', 'export/%2e%2e%2frnnx.json', 'export/rnnx.json'])\n"
        "  codes.push((await fetch(url + path)).status);\n"
        "server.close();\n"
        "console.log(JSON.stringify(codes));\n"
    )
    codes = json.loads(node("--input-type=module", "-e", script, str(exports[DEMO_CHECKPOINTS[0]])).stdout)
    assert codes == [404, 404, 200]


def test_the_module_names_are_the_contracts() -> None:
    """The contract's names rnnx.mjs exports (from contract.generated.mjs, generated from the records: the generated
    file itself is held to them by tests/test_contract_schema.py) equal artifact.py's."""
    script = f"import * as m from {json.dumps((JS / 'rnnx.mjs').as_uri())}; console.log(JSON.stringify(m));"
    names = json.loads(node("--input-type=module", "-e", script).stdout)
    constants = ("FORMAT", "METADATA_FILE", "CAUSAL_LM", "INPUT_IDS", "ATTENTION_MASK", "LOGITS", "PAST_PREFIX",
                 "PRESENT_PREFIX", "BATCH", "PAST_LENGTH")  # fmt: skip
    want = {name: getattr(artifact, name) for name in constants}
    want["READABLE_FORMAT_VERSIONS"] = list(artifact.READABLE_FORMAT_VERSIONS)
    assert {k: names.get(k) for k in want} == want


def test_generator_and_sampling_reproduce_numpy() -> None:
    """PCG64 seeded by (seed, row) as numpy's default_rng, and sample's filters and draw, on random logits of
    several vocabulary sizes (numpy's pairwise sum changes shape at 8 and 128 entries)."""
    rng = np.random.default_rng(0)
    options = [{}, {"temperature": 0.7}, {"temperature": 1.3, "top_k": 50}, {"top_p": 0.9},
               {"temperature": 0.5, "top_k": 5, "top_p": 0.8}, {"temperature": 0.0}]  # fmt: skip
    cases = [
        {"seed": seed, "logits": rng.standard_normal(vocab).astype(np.float32).tolist(), "options": opts}
        for seed, vocab, opts in zip((0, 17, 2**40 + 5, 3, 99, 5), (7, 12, 300, 1000, 129, 5000), options)
    ]
    got = rnnx_mjs(
        "PCG64, sampleRow",
        cases,
        "const draws = data.map((c) => { const g = new PCG64([c.seed, 0]); return [g.random(), g.random()]; });\n"
        "const tokens = data.map((c) => { const g = new PCG64([c.seed, 1]); const o = c.options;\n"
        "  return Array.from({ length: 20 }, () => sampleRow(Float32Array.from(c.logits), g,\n"
        "    { temperature: o.temperature ?? 1, topK: o.top_k ?? null, topP: o.top_p ?? null })); });\n"
        "console.log(JSON.stringify({ draws, tokens }));\n",
    )
    for case, draws, tokens in zip(cases, got["draws"], got["tokens"]):
        numpy_rng = np.random.default_rng([case["seed"], 0])
        assert draws == [numpy_rng.random(), numpy_rng.random()]
        row_rng = np.random.default_rng([case["seed"], 1])
        logits = np.array([case["logits"]], np.float32)
        want = [int(sample(logits, [row_rng], **{"temperature": 1.0, **case["options"]})[0]) for _ in range(20)]
        assert tokens == want, case["options"]


def test_node_example_prints_tokens_and_text(exports, python_tokens, tmp_path: Path) -> None:
    name = DEMO_CHECKPOINTS[1]
    vocab = tmp_path / "vocab.json"
    vocab.write_text(json.dumps([str(d) for d in range(10)] + ["|", "_"]))
    out = node(str(JS / "generate.mjs"), str(exports[name]), "--prompt", "1,2,3,4,5,6,7,8,9,0,10",
               "--max-new-tokens", str(MAX_NEW), "--stop", "0", "--vocab", str(vocab)).stdout  # fmt: skip
    want = python_tokens[name, "greedy", 1][0]
    assert out.splitlines() == [
        f"prompt 1: [{', '.join(map(str, PROMPTS[0]))}] -> [{', '.join(map(str, want))}]",
        f'  "1234567890|" -> "{"".join(map(str, want))}"',
    ]


def test_prompts_follow_the_shared_syntax(exports) -> None:
    """rnnx.mjs's parsePrompt (generate.mjs's and the demo page's) reads tests/prompt_cases.py's prompts as Python
    and C do (docs/embedding.md, "Prompts"); generate.mjs generates from them what Python does from their ids, and
    refuses a bad one with one line naming the piece."""
    got = rnnx_mjs(
        "parsePrompt",
        [t for t, _ in PROMPT_CASES],
        "const parse = (t) => { try { return parsePrompt(t); } catch (e) { return e.message; } };\n"
        "console.log(JSON.stringify(data.map(parse)));\n",
    )
    want = [ids if isinstance(ids, list) else expected_error(text, ids) for text, ids in PROMPT_CASES]
    assert got == want
    name = DEMO_CHECKPOINTS[0]
    texts = [a for text, _ in PARSED for a in ("--prompt", text)]
    out = node(str(JS / "generate.mjs"), str(exports[name]), *texts, "--max-new-tokens", "4", "--json").stdout
    session = rt.load(exports[name], backend="onnxruntime")
    assert json.loads(out)["tokens"] == session.generate_all([ids for _, ids in PARSED], 4, temperature=0)
    text, piece = REFUSED[-1]
    bad = node(str(JS / "generate.mjs"), str(exports[name]), "--prompt", text, check=False)
    assert bad.returncode == 2 and bad.stderr == f"generate.mjs: {expected_error(text, piece)}\n", bad.stderr


def _copy_export(source: Path, dest: Path, metadata: dict[str, Any]) -> Path:
    dest.mkdir()
    shutil.copy2(source / "model.onnx", dest / "model.onnx")
    (dest / "rnnx.json").write_text(json.dumps(metadata))
    return dest


def test_node_example_errors_are_one_line(exports, tmp_path: Path) -> None:
    source = exports[DEMO_CHECKPOINTS[0]]
    metadata = json.loads((source / "rnnx.json").read_text())
    names = {"name": "missing", "input": "past_key_values.missing", "output": "present.missing"}
    missing = {**metadata["state"][0], **names}
    cases = {
        "bad-format": ({**metadata, "format": "something-else"}, ["--prompt", "1,2"], 'format "something-else"'),
        "no-state-input": (
            {**metadata, "state": [missing]},
            ["--prompt", "1,2"],
            'state "missing": "past_key_values.missing" is not a graph input',
        ),
        "token-out-of-vocabulary": (metadata, ["--prompt", "1,12"], "prompts[0]: token 12 out of vocabulary"),
        "bad-top-p": (metadata, ["--prompt", "1,2", "--top-p", "1.5"], "topP must be in [0, 1]"),
    }
    for label, (meta, args, message) in cases.items():
        export = _copy_export(source, tmp_path / label, meta)
        result = node(str(JS / "generate.mjs"), str(export), *args, check=False)
        assert result.returncode == 2, (label, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, (label, result.stderr)


@needs_browser
def test_demo_page_generates_in_chromium(exports, python_tokens) -> None:
    """One Chromium launch: the page's greedy run (prompt "1 2 3 ...") and a seeded sampled run ("1, 2, 3, ...") on
    onnxruntime-web's wasm provider, and a greedy run on its WebGPU provider with the state kept on the GPU
    (SwiftShader's software adapter: no GPU here), each equal to Python's tokens."""
    name = DEMO_CHECKPOINTS[1]
    greedy = {"prompt": " ".join(map(str, PROMPTS[0])), "max": str(MAX_NEW), "temperature": "0", "stop": "0"}
    sampled = {**greedy, "prompt": ", ".join(map(str, PROMPTS[0])), "temperature": str(SAMPLED["temperature"]),
               "topk": str(SAMPLED["top_k"]), "topp": str(SAMPLED["top_p"]), "seed": str(SAMPLED["seed"])}  # fmt: skip
    cases = [greedy, sampled, {**greedy, "ep": "webgpu"}]
    out = node(str(REPO / "tests" / "js" / "demo_page_in_chromium.mjs"), str(exports[name]), json.dumps(cases))
    result = json.loads(out.stdout)
    runs = result["runs"]
    assert [run["error"] for run in runs] == [None] * 3, result
    assert [run["provider"] for run in runs] == ["wasm", "wasm", "webgpu"]
    assert [run["stateLocation"] for run in runs] == ["cpu", "cpu", "gpu-buffer"]  # WebGPU keeps the state there
    want = python_tokens[name, "greedy", 1][0]
    assert runs[0]["tokens"] == want and runs[2]["tokens"] == want
    assert runs[1]["tokens"] == python_tokens[name, "sampled", 1][0]
    assert runs[0]["status"].startswith(f"{len(want)} tokens in"), runs[0]["status"]
