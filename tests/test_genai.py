"""onnxruntime-genai runs rnnx exports (``export-model --genai``, docs/genai.md).

Real parts throughout: onnxruntime-genai 0.18 from PyPI, its ``og.Model`` / ``og.Generator`` on the demos'
exports and on a user's SRU++ LM exported through the generic ``export``; the reference is ``rnnx.runtime``
on the same export's ``model.onnx``. The genai program is the one in docs/genai.md, extracted from the page and
run as a script, so the page cannot drift from what is tested. The layout's repacking is checked against the
torch modules without genai.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.export import ExportError, export
from rnnx.export.genai import CONV, RECURRENT, GenaiAdapter, genai_layout, pack, unpack
from rnnx.models import SRUpp
from rnnx.models.stateful import find_state_specs
from rnnx.runtime.contract.artifact import GENAI_CONFIG_FILE, GENAI_MODEL_FILE

DOC = Path(__file__).resolve().parents[1] / "docs" / "genai.md"
PROMPTS = [[3, 5, 7, 1, 0, 2, 4, 6, 8, 9, 10], [2, 2, 4, 4, 6, 6, 8, 8, 1, 1, 3, 10]]
NEW_TOKENS = 10


def genai_installed() -> bool:
    try:
        import onnxruntime_genai  # noqa: F401
    except ImportError:
        return False
    return True


needs_genai = pytest.mark.skipif(
    not genai_installed(), reason="onnxruntime-genai is not installed (bash scripts/setup.sh installs 0.18.0)"
)


class UserSRUppLM(nn.Module):
    """A user's LM on rnnx's SRU++ (linear attention): forward(input_ids, attention_mask, state)."""

    VOCAB = 13

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(self.VOCAB, 16)
        self.body = SRUpp(16, 24, 8, num_layers=2, num_heads=2, attention="linear")
        self.head = nn.Linear(24, self.VOCAB)

    def init_state(self, batch: int) -> dict:
        return {"body": self.body.init_state(batch)}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, state: dict):
        pad = (attention_mask == 0).t()
        h, s = self.body.forward_state(self.embed(input_ids).transpose(0, 1), state["body"], mask_pad=pad)
        return self.head(h.transpose(0, 1)), {"body": s}


@pytest.fixture(scope="module")
def user_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(3)
    model = UserSRUppLM().eval()
    ids = torch.randint(0, UserSRUppLM.VOCAB - 1, (2, 5))
    out = tmp_path_factory.mktemp("user-lm") / "export"
    export(model, (ids, torch.ones(2, 5, dtype=torch.int64)), out, target="onnxruntime", genai=True, check=True,
           chained_calls=4)  # fmt: skip
    return out


def with_genai_variant(name: str, export_dir: Path, dest: Path) -> Path:
    """A copy of the shared export of demo ``name`` (made without --genai) with the genai variant added by the step
    ``export_model(..., genai=True)`` runs (``genai_step`` on the plan and options export_model builds for it): the
    files that export would write, without tracing ``model.onnx`` a second time, and paid only by the worker that
    runs this file. The user's LM below goes through ``export(..., genai=True)`` end to end."""
    import shutil

    from rnnx.export.exporter import export_options, lm_plan
    from rnnx.export.genai import GenaiOptions, genai_step
    from rnnx.models.checkpoint import demo_checkpoint_path
    from rnnx.runtime import parity
    from rnnx.runtime.contract.artifact import DEFAULT_OPSET, EXTERNAL_DATA_FILE

    shutil.copytree(export_dir, dest)
    options = export_options("onnxruntime", "fp32", DEFAULT_OPSET, check=False)
    plan = lm_plan(str(demo_checkpoint_path(name)), options.precision, parity.DEFAULT_DECODE_STEPS)
    tmp = dest.parent / f".{dest.name}.genai"
    tmp.mkdir()
    one_file = not (dest / EXTERNAL_DATA_FILE).exists()
    try:
        written = genai_step(plan, options, GenaiOptions())(tmp, one_file, lambda _: None)
    finally:
        plan.restore()
    for file in written:
        (tmp / file).replace(dest / file)
    return dest


@pytest.fixture(scope="module")
def exports(demo_exports, user_export, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("demo-genai")
    demos = {name: with_genai_variant(name, demo_exports[(name, "onnxruntime")], root / name)
             for name in ("linear_transformer_copy", "srupp_linear_copy")}  # fmt: skip
    return {**demos, "user_srupp_lm": user_export}


def rnnx_greedy(export_dir: Path, prompts: list[list[int]], pad: int) -> list[list[int]]:
    """rnnx.runtime's greedy tokens: ``generate_all`` for an rnnx LM; for a user's LM (a StatefulSession) the
    right-padded prompts in one ``run``, then one token per ``run`` from each row's last real position."""
    session = rt.load(export_dir, backend="onnxruntime")
    if hasattr(session, "generate_all"):
        return session.generate_all(prompts, NEW_TOKENS, temperature=0)
    width = max(map(len, prompts))
    ids = np.array([p + [pad] * (width - len(p)) for p in prompts], np.int64)
    mask = np.array([[1] * len(p) + [0] * (width - len(p)) for p in prompts], np.int64)
    logits = session.run(input_ids=ids, attention_mask=mask)["output"]
    tokens = logits[np.arange(len(prompts)), mask.sum(1) - 1].argmax(-1)
    out = [[int(t)] for t in tokens]
    for _ in range(NEW_TOKENS - 1):
        logits = session.run(input_ids=tokens[:, None], attention_mask=np.ones((len(prompts), 1), np.int64))["output"]
        tokens = logits[:, -1].argmax(-1)
        for row, t in zip(out, tokens):
            row.append(int(t))
    return out


def doc_program() -> str:
    """The genai program of docs/genai.md, as it stands there."""
    match = re.search(r"```python\n(import json, sys\n.*?)```", DOC.read_text(), re.S)
    assert match, "docs/genai.md lost its genai program"
    return match.group(1)


def until_eos(tokens: list[int], eos: int) -> list[int]:
    """genai stops a row at its eos token (included); rnnx's tokens cut the same way."""
    return tokens[: tokens.index(eos) + 1] if eos in tokens else tokens


@needs_genai
@pytest.mark.parametrize("name", ["linear_transformer_copy", "srupp_linear_copy", "user_srupp_lm"])
def test_doc_program_gives_rnnx_greedy_tokens(exports, tmp_path, name):
    export_dir = exports[name]
    config = json.loads((export_dir / GENAI_CONFIG_FILE).read_text())
    pad, eos = config["model"]["pad_token_id"], config["model"]["eos_token_id"]
    prompts = PROMPTS if name != "user_srupp_lm" else [[p % (UserSRUppLM.VOCAB - 1) for p in q] for q in PROMPTS]
    script = tmp_path / "genai_demo.py"
    script.write_text(doc_program())
    for batch in (prompts[:1], prompts):  # one row; a right-padded batch of two (row 0 is one shorter)
        result = subprocess.run([sys.executable, str(script), str(export_dir), *(" ".join(map(str, p)) for p in batch)],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        got = [[int(t) for t in line.split()] for line in result.stdout.splitlines()]
        want = [until_eos(row, eos) for row in rnnx_greedy(export_dir, batch, pad)]
        assert got == want, (name, len(batch))
        assert all(len(row) >= 2 for row in got)


@needs_genai
def test_left_padding_feeds_the_pads_as_tokens(exports):
    """genai masks only trailing pads: a left-padded row equals rnnx on the prompt with its pads as tokens."""
    import onnxruntime_genai as og

    export_dir = exports["linear_transformer_copy"]
    pad = json.loads((export_dir / GENAI_CONFIG_FILE).read_text())["model"]["pad_token_id"]
    model = og.Model(str(export_dir))
    width = max(map(len, PROMPTS))
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=width + NEW_TOKENS, batch_size=2, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array([[pad] * (width - len(p)) + p for p in PROMPTS], np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    got = [list(map(int, generator.get_sequence(row)[width:])) for row in range(2)]
    session = rt.load(export_dir, backend="onnxruntime")
    as_tokens = session.generate_all([[pad] + PROMPTS[0]], NEW_TOKENS, temperature=0)[0]
    unpadded = session.generate_all(PROMPTS[:1], NEW_TOKENS, temperature=0)[0]
    assert got[0] == as_tokens and got[0] != unpadded
    assert got[1] == session.generate_all(PROMPTS[1:], NEW_TOKENS, temperature=0)[0]


@needs_genai
def test_seeded_sampling_is_reproducible(exports):
    import onnxruntime_genai as og

    model = og.Model(str(exports["srupp_linear_copy"]))
    width = max(map(len, PROMPTS))

    def sample(seed: int) -> list[list[int]]:
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=width + 16, batch_size=2, do_sample=True, random_seed=seed,
                                  temperature=2.0, top_k=6)  # fmt: skip
        generator = og.Generator(model, params)
        generator.append_tokens(np.array([p + [11] * (width - len(p)) for p in PROMPTS], np.int32))
        while not generator.is_done():
            generator.generate_next_token()
        return [list(map(int, generator.get_sequence(row)[width:])) for row in range(2)]

    runs = {seed: [sample(seed) for _ in range(2)] for seed in (1, 2, 3)}
    assert all(first == second for first, second in runs.values())
    assert len({str(first) for first, _ in runs.values()}) > 1  # the seed matters: it is sampling


@needs_genai
def test_native_ops_library_is_copied_and_loaded(tmp_path):
    """--native-ops: the library sits in the export and genai loads it (same tokens as the function bodies)."""
    import onnxruntime_genai as og

    from rnnx.export.genai import GenaiOptions
    from rnnx.runtime import ortops

    library = ortops.find_library()
    if library is None:
        pytest.skip("rnnx's ONNX Runtime op library is not built (python3 -m rnnx.runtime.ortops)")
    torch.manual_seed(0)
    model = UserSRUppLM().eval()
    ids = torch.randint(0, UserSRUppLM.VOCAB, (2, 4))
    out = tmp_path / "native"
    export(model, (ids, torch.ones(2, 4, dtype=torch.int64)), out, target="onnxruntime", check=False,
           genai=GenaiOptions(native_ops=True, pad_token_id=12, eos_token_id=12))  # fmt: skip
    config = json.loads((out / GENAI_CONFIG_FILE).read_text())
    assert config["model"]["decoder"]["session_options"]["custom_ops_library"] == library.name
    assert (out / library.name).read_bytes() == library.read_bytes()
    genai_model = og.Model(str(out))
    params = og.GeneratorParams(genai_model)
    params.set_search_options(max_length=9, batch_size=1, do_sample=False)
    generator = og.Generator(genai_model, params)
    generator.append_tokens(np.array([[1, 2, 3, 4]], np.int32))
    while not generator.is_done():
        generator.generate_next_token()
    got = list(map(int, generator.get_sequence(0)[4:]))
    assert got == until_eos(rnnx_greedy(out, [[1, 2, 3, 4]], 12)[0][:5], 12)


@needs_genai
def test_genai_opens_the_graph_with_the_configs_session_entries(exports, tmp_path):
    """genai_config.json's session_options carry rnnx's ONNX Runtime session config entries (ORT_SESSION_CONFIG,
    which the fp16 graphs need), and onnxruntime-genai 0.18 hands such keys to ONNX Runtime: an entry that makes
    ONNX Runtime read the graph as an ORT-format file makes og.Model fail, so genai did pass it on."""
    import shutil

    import onnxruntime_genai as og

    from rnnx.export.genai import session_config_entries
    from rnnx.runtime.contract.artifact import ORT_SESSION_CONFIG

    source = exports["user_srupp_lm"]
    config = json.loads((source / GENAI_CONFIG_FILE).read_text())
    assert session_config_entries(config) == ORT_SESSION_CONFIG
    probe = tmp_path / "probe"
    shutil.copytree(source, probe)
    config["model"]["decoder"]["session_options"]["session.load_model_format"] = "ORT"
    (probe / GENAI_CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(Exception, match="ORT model verification failed"):
        og.Model(str(probe))


# -- without genai: the layout and the export's refusals ------------------------------------------------------


@torch.no_grad()
@pytest.mark.parametrize("name", ["linear_transformer", "srupp"])
def test_layout_round_trips_and_the_adapter_matches_the_model(name):
    """pack / unpack are inverse; the adapter on genai's inputs gives the module's logits and state."""
    from rnnx.models.registry import build_model
    from rnnx.models.stateful import StatefulLM, lm_example_data

    config = {"linear_transformer": dict(vocab_size=9, d_model=16, num_layers=2, num_heads=2),
              "srupp": dict(vocab_size=9, embed_dim=8, hidden_size=16, proj_size=8, num_layers=3, num_heads=2,
                            attention="linear")}[name]  # fmt: skip
    torch.manual_seed(0)
    graph = StatefulLM(build_model(name, config).eval())
    ids, mask = lm_example_data(graph.model, 2, 5)
    states = find_state_specs(graph, (ids, mask), 2, 5)
    slots = genai_layout(states)
    kinds = [s.kind for s in slots if s.main is not None]
    assert kinds.count(RECURRENT) == config["num_layers"]  # S and z folded: one recurrent slot per layer
    assert sum(s.kind == RECURRENT for s in slots) == sum(s.kind == CONV for s in slots)
    flat = [torch.randn(s.concrete_shape(2)) for s in states]
    packed = pack(slots, states, flat, [torch.zeros(2, *s.shape) for s in slots])
    assert all(t.shape[1:] == s.shape for t, s in zip(packed, slots))
    assert all(torch.equal(a, b) for a, b in zip(unpack(slots, states, packed), flat))
    adapter = GenaiAdapter(graph, states, slots, torch.int64)
    mask[1, 3:] = 0
    total = torch.cat((torch.ones(2, 4, dtype=torch.int64), mask), 1)  # 4 past positions, then this chunk
    logits, *new = adapter(ids, total, *packed)
    want_logits, *want_state = graph(ids, mask, *flat)
    assert torch.equal(logits, want_logits)
    assert all(torch.equal(a, b) for a, b in zip(unpack(slots, states, new), want_state))


class _Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(5, 8)
        self.body = SRUpp(8, 8, 4, num_layers=1, attention="linear")

    def init_state(self, batch: int):
        return self.body.init_state(batch)

    def forward(self, features, state):
        h, s = self.body.forward_state(self.proj(features).transpose(0, 1), state)
        return h.transpose(0, 1), s


class _CachedLM(UserSRUppLM):
    def __init__(self) -> None:
        super().__init__()
        self.body = SRUpp(16, 24, 8, num_layers=1, num_heads=2, attention="softmax")


@pytest.mark.parametrize(
    "module, inputs, match",
    [
        (_Encoder, (torch.randn(2, 3, 5),), "not a language model genai can run"),
        (_CachedLM, (torch.randint(0, 9, (2, 3)), torch.ones(2, 3, dtype=torch.int64)), "growing KV cache"),
    ],
)
def test_what_genai_cannot_run_is_refused_before_writing(tmp_path, module, inputs, match):
    out = tmp_path / "out"
    with pytest.raises(ExportError, match=match):
        export(module().eval(), inputs, out, target="onnxruntime", check=False, genai=True)
    assert not out.exists()


def _config(session_options: dict) -> str:
    return json.dumps({"model": {"decoder": {"session_options": session_options}}})


@pytest.mark.parametrize("old_config, library_removed", [
    ({"log_id": "rnnx-genai", "custom_ops_library": "librnnx_ort_ops.so"}, True),  # rnnx copied it: stale
    ({"log_id": "rnnx-genai"}, False),  # genai without --native-ops: the library file is the user's
    ({"log_id": "mine", "custom_ops_library": "librnnx_ort_ops.so"}, False),  # a config rnnx did not write
    ({"log_id": "rnnx-genai", "custom_ops_library": "../librnnx_ort_ops.so"}, False),  # not a file of the export
])  # fmt: skip
def test_publish_removes_what_an_older_export_wrote(tmp_path, old_config, library_removed):
    """stages.publish on fake files: an export without --genai removes the genai files and the op library an older
    ``--genai --native-ops`` export copied in (named by its genai_config.json), and nothing else of the folder's."""
    from rnnx.export import stages
    from rnnx.runtime.contract.artifact import GENAI_DATA_FILE, METADATA_FILE, MODEL_FILE, PARITY_FILE

    out, new = tmp_path / "out", tmp_path / "new"
    out.mkdir()
    new.mkdir()
    old = [MODEL_FILE, METADATA_FILE, PARITY_FILE, GENAI_MODEL_FILE, GENAI_DATA_FILE, "librnnx_ort_ops.so", "notes.txt"]
    for name in old:
        (out / name).write_text("old")
    (out / GENAI_CONFIG_FILE).write_text(_config(old_config))
    for name in (MODEL_FILE, METADATA_FILE):
        (new / name).write_text("new")
    stages.publish(new, out, [MODEL_FILE, METADATA_FILE])
    kept = {MODEL_FILE, METADATA_FILE, "notes.txt", *(() if library_removed else ("librnnx_ort_ops.so",))}
    assert {p.name for p in out.iterdir()} == kept
    assert (out / MODEL_FILE).read_text() == "new"


def test_publish_keeps_the_library_a_new_native_ops_export_writes(tmp_path):
    from rnnx.export import stages

    out, new = tmp_path / "out", tmp_path / "new"
    out.mkdir()
    new.mkdir()
    (out / GENAI_CONFIG_FILE).write_text(_config({"log_id": "rnnx-genai", "custom_ops_library": "librnnx_ort_ops.so"}))
    (out / "librnnx_ort_ops.so").write_text("old")
    (new / "librnnx_ort_ops.so").write_text("new")
    (new / GENAI_CONFIG_FILE).write_text(_config({"log_id": "rnnx-genai", "custom_ops_library": "librnnx_ort_ops.so"}))
    stages.publish(new, out, ["librnnx_ort_ops.so", GENAI_CONFIG_FILE])
    assert (out / "librnnx_ort_ops.so").read_text() == "new"
