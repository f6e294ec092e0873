"""transformers checkpoint folders in, tokens out (issue 41): ``rnnx.models.from_pretrained``, ``export-model FOLDER``
and every runtime on the four families (Gated DeltaNet hybrid ``qwen3_5_text``, ``mamba2``, the Mamba-2 hybrid
``nemotron_h`` and ``lfm2``), against transformers itself.

Each family is a tiny random config (the recipes of shared/FIELD.md: vocab 256, hidden 64; ``initializer_range``
0.2 so that greedy decoding does not repeat one token) saved with ``save_pretrained`` into a temporary folder: a
real checkpoint folder, no hub. The reference is transformers' own ``generate`` with its cache (greedy, no stop
token) and its forward pass; rnnx runs the folder on torch (the twin), on ONNX Runtime (the export), through the C
API and through the JavaScript runtime.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rnnx.runtime.serving.triton.local_server import TritonServer, run_client, venv_python

transformers = pytest.importorskip("transformers")

import rnnx.runtime as rt  # noqa: E402
from rnnx.export import export_model  # noqa: E402
from rnnx.models import UnsupportedCheckpoint, from_pretrained  # noqa: E402
from rnnx.runtime.contract.artifact import numpy_dtype  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NEW_TOKENS = 32
#: A batch of three prompts of different lengths (right-padded by the runtimes).
PROMPTS = [[3, 5, 7, 9, 11, 13, 200, 17, 19], [40, 41], [250, 1, 2, 3, 4, 99]]
#: Relative tolerance of per-step logits against transformers' (fp32; chunked and token-loop forms differ).
LOGITS_RTOL = 1e-4


def _config(family: str):
    common = dict(vocab_size=256, hidden_size=64, initializer_range=0.2)
    if family == "qwen3_5_text":
        return transformers.Qwen3_5TextConfig(
            **common, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
            intermediate_size=128,
        )  # fmt: skip
    if family == "qwen3_5_moe_text":  # 4 experts, 2 picked per token, a shared expert
        return transformers.Qwen3_5MoeTextConfig(
            **common, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
            moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2,
        )  # fmt: skip
    if family == "mamba2":
        return transformers.Mamba2Config(
            **common, num_hidden_layers=2, num_heads=8, head_dim=16, state_size=16, n_groups=1, expand=2, chunk_size=16
        )
    if family == "nemotron_h":
        return transformers.NemotronHConfig(
            **common, num_hidden_layers=4, hybrid_override_pattern="M*M-", mamba_num_heads=8, mamba_head_dim=16,
            ssm_state_size=16, n_groups=1, expand=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=128, chunk_size=16,
        )  # fmt: skip
    assert family == "lfm2"
    return transformers.Lfm2Config(
        **common, num_hidden_layers=4, layer_types=["conv", "full_attention", "conv", "full_attention"],
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
    )  # fmt: skip


FAMILIES = ("qwen3_5_text", "mamba2", "nemotron_h", "lfm2", "qwen3_5_moe_text")
#: The family whose checkpoint folder carries a tokenizer and a chat template (text is the same for every family).
TEXT_FAMILY = "qwen3_5_text"
#: A ChatML-style template, as Qwen's checkpoints have (tokenizer_config.json "chat_template").
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _train_tokenizer(folder: Path, vocab_size: int) -> None:
    """A BPE tokenizer (Metaspace pre-tokenizer, as SentencePiece-style checkpoints have) trained here on the README,
    saved as ``tokenizer.json`` with a ``tokenizer_config.json`` naming its eos token and the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<|im_start|>", "<|im_end|>"])
    tokenizer.train_from_iterator((REPO / "README.md").read_text().splitlines(keepends=True), trainer)
    assert tokenizer.get_vocab_size() == vocab_size, "the README is too short to train the test tokenizer"
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "eos_token": "<|im_end|>",
              "chat_template": CHAT_TEMPLATE}  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each family's random checkpoint folder, as ``save_pretrained`` writes it."""
    out = {}
    for i, family in enumerate(FAMILIES):
        torch.manual_seed(i)
        model = transformers.AutoModelForCausalLM.from_config(_config(family))
        out[family] = tmp_path_factory.mktemp(family) / "checkpoint"
        model.save_pretrained(out[family])
        if family == TEXT_FAMILY:
            _train_tokenizer(out[family], vocab_size=256)
    return out


@pytest.fixture(scope="module")
def references(checkpoints) -> dict[str, dict]:
    """transformers' side of each family: the model (eval) and its greedy tokens for each prompt alone."""
    out = {}
    for family, folder in checkpoints.items():
        model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
        model.generation_config.eos_token_id = None  # 32 tokens whatever comes
        with torch.no_grad():  # an explicit mask: a prompt token equal to pad_token_id is no pad
            ids = [torch.tensor([p]) for p in PROMPTS]
            tokens = [
                model.generate(i, attention_mask=torch.ones_like(i), max_new_tokens=NEW_TOKENS, do_sample=False)[
                    0, i.shape[1] :
                ].tolist()
                for i in ids
            ]
        out[family] = {"model": model, "tokens": tokens}
    return out


@pytest.fixture(scope="module")
def exports(checkpoints, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``export-model FOLDER --target onnxruntime --genai`` of each family (its parity check and the genai graph's
    passed, or it raises)."""
    out = {}
    for family, folder in checkpoints.items():
        out[family] = tmp_path_factory.mktemp(f"{family}_export") / "export"
        export_model(folder, out[family], target="onnxruntime", genai=True, log=lambda *_: None)
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_the_twin_generates_transformers_tokens_with_its_logits(family, checkpoints, references) -> None:
    """Batch 1, each prompt: rnnx's greedy tokens (prefill, then one step per token) equal transformers' generate,
    and the logits of every step equal transformers' forward over the same sequence within LOGITS_RTOL."""
    twin = from_pretrained(checkpoints[family])
    hf = references[family]["model"]
    for prompt, want in zip(PROMPTS, references[family]["tokens"]):
        with torch.no_grad():
            logits, state = twin(torch.tensor([prompt]))
            steps, got = [logits[0, -1]], []
            for _ in range(NEW_TOKENS):
                got.append(int(steps[-1].argmax()))
                logits, state = twin(torch.tensor([[got[-1]]]), state)
                steps.append(logits[0, -1])
            ref = hf(torch.tensor([prompt + got])).logits[0, len(prompt) - 1 :]
        assert got == want, f"{family}: prompt {prompt}"
        ours = torch.stack(steps)
        assert float((ours - ref).abs().max() / ref.abs().max()) < LOGITS_RTOL, family


@pytest.mark.parametrize("family", FAMILIES)
def test_a_padded_batch_equals_each_row_alone_on_torch_and_onnxruntime(family, checkpoints, exports, references):
    """The three prompts right-padded into one batch give each row's transformers tokens, on the torch backend (the
    checkpoint folder itself) and on the onnxruntime export."""
    want = references[family]["tokens"]
    for path, backend in ((checkpoints[family], "torch"), (exports[family], "onnxruntime")):
        session = rt.load(path, backend=backend)
        assert session.generate_all(PROMPTS, NEW_TOKENS, temperature=0) == want, f"{family} on {backend}"


def test_the_c_api_and_javascript_run_every_family(exports, references) -> None:
    """The native runtime's rnnx-generate and the Node example give transformers' tokens for every family: hybrid
    state (a growing KV cache beside conv and recurrent states) read from rnnx.json like any other."""
    from rnnx.plugins import native_runtime
    from rnnx.runtime import ortops

    if shutil.which("cmake") is None or shutil.which("node") is None:
        pytest.skip("cmake or node not found: the C API or the JavaScript runtime cannot run here")
    program = native_runtime.build() / "rnnx-generate"
    node_modules = REPO / ".cache" / "js" / "node_modules"
    for family, export in exports.items():
        want = references[family]["tokens"]
        prompts = [a for p in PROMPTS for a in ("--prompt", " ".join(map(str, p)))]
        c = subprocess.run([str(program), str(export), *prompts, "--max-new-tokens", str(NEW_TOKENS), "--ort-ops",
                            str(ortops.build())], capture_output=True, text=True, timeout=300)  # fmt: skip
        assert c.returncode == 0, c.stderr[-2000:]
        rows = [line.split(":", 1)[1].split() for line in c.stdout.splitlines() if line.startswith("row ")]
        assert [[int(t) for t in row] for row in rows] == want, f"{family} in C"
        js = subprocess.run(
            ["node", str(REPO / "runtime" / "js" / "generate.mjs"), str(export), "--max-new-tokens", str(NEW_TOKENS),
             "--json", "--ids", *[a for p in PROMPTS for a in ("--prompt", ",".join(map(str, p)))]],
            capture_output=True, text=True, timeout=300, env={**os.environ, "NODE_PATH": str(node_modules)},
        )  # fmt: skip
        assert js.returncode == 0, js.stderr[-2000:]
        assert json.loads(js.stdout)["tokens"] == want, f"{family} in JavaScript"


def _edited(folder: Path, tmp_path: Path, edit) -> Path:
    """A copy of the checkpoint ``folder`` whose config.json ``edit`` changed (in place on the dict)."""
    copy = tmp_path / "edited"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    edit(config)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize(
    "family, edit, message",
    [
        ("qwen3_5_text", lambda c: c.update(model_type="llama"), 'model_type "llama" is not supported; rnnx converts'),
        ("qwen3_5_text", lambda c: c.update(new_field=1), "field 'new_field' (qwen3_5_text) is not one rnnx's"),
        ("qwen3_5_text", lambda c: c["rope_parameters"].update(rope_type="yarn"), 'rope_type is "yarn"; rnnx converts'),
        ("lfm2", lambda c: c.update(layer_types=["conv", "sliding_attention"] * 2), 'layer_types[1] is "sliding_'),
        (
            "nemotron_h",
            lambda c: c.update(layers_block_type=["mamba", "moe", "mamba", "mlp"]),
            "layers_block_type[1] is",
        ),
        ("mamba2", lambda c: c.update(hidden_act="gelu"), "field 'hidden_act' is \"gelu\"; rnnx converts"),
        ("mamba2", lambda c: c.update(state_size=8), "has shape"),
    ],
)
def test_what_cannot_be_converted_is_refused_in_one_line_and_nothing_is_written(
    family, edit, message, checkpoints, tmp_path
) -> None:
    folder = _edited(checkpoints[family], tmp_path, edit)
    with pytest.raises(UnsupportedCheckpoint) as refused:
        from_pretrained(folder)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    out = tmp_path / "out"
    result = subprocess.run(["export-model", str(folder), "--out", str(out)], capture_output=True, text=True)
    assert result.returncode != 0 and message in result.stderr
    assert not out.exists()


PROMPT_TEXT = "export-model takes a checkpoint folder"
MESSAGES = [{"role": "user", "content": "How do I run the tests?"}]


@pytest.fixture(scope="module")
def text_reference(checkpoints, references) -> dict:
    """transformers' side of text: its tokenizer (AutoTokenizer on the checkpoint folder), the prompt's and the chat
    turn's ids (``apply_chat_template``), and the replies its ``generate`` makes, stopping at the eos token."""
    folder = checkpoints[TEXT_FAMILY]
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = references[TEXT_FAMILY]["model"]
    eos = tokenizer.convert_tokens_to_ids("<|im_end|>")
    out = {"eos": eos, "ids": {}, "replies": {}}
    prompts = {
        "text": tokenizer(PROMPT_TEXT)["input_ids"],
        "chat": list(tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)["input_ids"]),
    }
    for name, ids in prompts.items():
        with torch.no_grad():
            i = torch.tensor([ids])
            new = model.generate(i, attention_mask=torch.ones_like(i), max_new_tokens=NEW_TOKENS, do_sample=False,
                                 eos_token_id=eos)[0, len(ids) :]  # fmt: skip
        out["ids"][name] = ids
        out["replies"][name] = tokenizer.decode(new, skip_special_tokens=True)
    return out


def test_text_in_text_out_equals_transformers_tokenizer_chat_template_and_generate(exports, text_reference) -> None:
    """The export carries the checkpoint's tokenizer and chat template: a text prompt's ids equal transformers'
    tokenizer, a chat turn's equal ``apply_chat_template``, the eos id comes from the tokenizer config, and the
    decoded replies (Python API and rnnx-generate, plain and --chat) equal transformers' generate + decode."""
    export = exports[TEXT_FAMILY]
    metadata = json.loads((export / "rnnx.json").read_text())
    assert (export / "tokenizer.json").is_file() and (export / "chat_template.jinja").read_text() == CHAT_TEMPLATE
    assert metadata["text"]["eos_token_ids"] == [text_reference["eos"]]
    session = rt.load(export)
    assert session.encode(PROMPT_TEXT) == text_reference["ids"]["text"]
    assert session.encode(MESSAGES) == text_reference["ids"]["chat"]
    replies = text_reference["replies"]
    assert session.generate_text(PROMPT_TEXT, NEW_TOKENS, temperature=0) == replies["text"]
    both = session.generate_text([PROMPT_TEXT, MESSAGES], NEW_TOKENS, temperature=0)
    assert both == [replies["text"], replies["chat"]]
    for flags, want in (([], replies["text"]), (["--chat"], replies["chat"])):
        prompt = MESSAGES[0]["content"] if flags else PROMPT_TEXT
        cli = subprocess.run(["rnnx-generate", str(export), "--prompt", prompt, "--max-new-tokens", str(NEW_TOKENS),
                              *flags], capture_output=True, text=True, timeout=300)  # fmt: skip
        assert cli.returncode == 0, cli.stderr[-2000:]
        assert cli.stdout == want + "\n", flags


def test_a_missing_or_mismatched_tokenizer_is_one_line(checkpoints, exports, tmp_path) -> None:
    """A tokenizer with more tokens than the model's vocabulary is refused at export (nothing written); an export
    whose tokenizer.json is gone or replaced, or one that never had one, refuses text in one line naming the file."""
    folder = tmp_path / "bigger"
    shutil.copytree(checkpoints[TEXT_FAMILY], folder)
    _train_tokenizer(folder, vocab_size=300)
    out = tmp_path / "out"
    refused = subprocess.run(["export-model", str(folder), "--out", str(out)], capture_output=True, text=True)
    assert refused.returncode != 0 and "300 tokens, but the model's vocabulary has 256" in refused.stderr
    assert not out.exists()

    export = tmp_path / "export"
    shutil.copytree(exports[TEXT_FAMILY], export)
    shutil.copyfile(folder / "tokenizer.json", export / "tokenizer.json")
    replaced = "tokenizer.json: sha256 does not match"
    cases = [(export, replaced)]
    missing = tmp_path / "missing"
    shutil.copytree(exports[TEXT_FAMILY], missing)
    (missing / "tokenizer.json").unlink()
    cases.append((missing, "tokenizer.json: the tokenizer"))
    for path, message in cases:
        with pytest.raises(rt.InputError, match=message):
            rt.load(path).generate_text(PROMPT_TEXT, 1)
        cli = subprocess.run(["rnnx-generate", str(path), "--prompt", PROMPT_TEXT], capture_output=True, text=True)
        assert cli.returncode != 0 and message in cli.stderr and len(cli.stderr.strip().splitlines()) == 1
    with pytest.raises(rt.InputError, match="carries no tokenizer"):
        rt.load(exports["mamba2"]).generate_text(PROMPT_TEXT, 1)


def test_node_and_the_page_in_chromium_take_and_show_text(exports, text_reference) -> None:
    """The Node example (text and --chat prompts) and the demo page in headless Chromium (a text prompt, a chat turn)
    give transformers' ids' tokens and its decoded replies: @huggingface/tokenizers and @huggingface/jinja read the
    export's tokenizer.json and chat template as tokenizers and jinja2 do in Python."""
    node_modules = REPO / ".cache" / "js" / "node_modules"
    needed = ["@huggingface/tokenizers", "@huggingface/jinja", "onnxruntime-node", "puppeteer-core"]
    needed.append("@sparticuz/chromium")
    missing = [p for p in needed if not (node_modules / p / "package.json").is_file()]
    if shutil.which("node") is None or missing:
        pytest.skip(f"node or the packages {missing} of runtime/js/package.json are missing: run scripts/setup.sh")
    env = {**os.environ, "NODE_PATH": str(node_modules)}
    export, replies = exports[TEXT_FAMILY], text_reference["replies"]
    chat = MESSAGES[0]["content"]
    js = subprocess.run(
        ["node", str(REPO / "runtime" / "js" / "generate.mjs"), str(export), "--max-new-tokens", str(NEW_TOKENS),
         "--json", "--prompt", PROMPT_TEXT], capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert js.returncode == 0, js.stderr[-2000:]
    assert json.loads(js.stdout)["text"] == [replies["text"]]
    js = subprocess.run(
        ["node", str(REPO / "runtime" / "js" / "generate.mjs"), str(export), "--max-new-tokens", str(NEW_TOKENS),
         "--chat", "--prompt", chat], capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert js.returncode == 0 and js.stdout == replies["chat"] + "\n", js.stderr[-2000:]
    cases = [{"prompt": PROMPT_TEXT, "max": str(NEW_TOKENS), "temperature": "0"},
             {"prompt": chat, "chat": "1", "max": str(NEW_TOKENS), "temperature": "0"}]  # fmt: skip
    page = subprocess.run(["node", str(REPO / "tests" / "js" / "demo_page_in_chromium.mjs"), str(export),
                           json.dumps(cases)], capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    assert page.returncode == 0, page.stderr[-2000:]
    runs = json.loads(page.stdout)["runs"]
    assert [run["error"] for run in runs] == [None, None], runs
    assert [run["text"] for run in runs] == [replies["text"], replies["chat"]]


def test_scheduler_streams_and_parked_conversations_equal_one_piece(exports, references, tmp_path) -> None:
    """Every family on the onnxruntime export, hybrid KV caches included. The scheduler: three streams of different
    lengths through two slots (the third joins as the second leaves, its cache padded to the pool's length) each
    give transformers' tokens. A conversation parked on disk after turn one and resumed for turn two gives what one
    piece (turn one's prompt and tokens, then turn two's prompt) gives, and its parked state holds exactly its own
    positions: the KV part is the per-position bytes times its tokens, the fixed part the same for every length."""
    lengths = [NEW_TOKENS, 8, 20]
    for family in FAMILIES:
        session = rt.load(exports[family])
        with rt.Scheduler(session, max_streams=2, conversations=tmp_path / family) as scheduler:
            streams = [scheduler.submit(p, n, temperature=0.0) for p, n in zip(PROMPTS, lengths)]
            got = [s.result(300) for s in streams]
            first = scheduler.submit(PROMPTS[0], 6, temperature=0.0, conversation="c").result(300)
            second = scheduler.submit(PROMPTS[1], 6, temperature=0.0, conversation="c").result(300)
            parked = scheduler.conversations.parked_bytes("c")
            short = scheduler.submit(PROMPTS[1], 1, temperature=0.0, conversation="d").result(300)
            parked_short = scheduler.conversations.parked_bytes("d")
        want = [tokens[:n] for tokens, n in zip(references[family]["tokens"], lengths)]
        assert got == want, family
        one_piece = session.generate_all([PROMPTS[0] + first + PROMPTS[1]], 6, temperature=0.0)[0]
        assert second == one_piece, family
        per_position = sum(
            np.dtype(numpy_dtype(s.dtype)).itemsize * int(np.prod([d for d in s.shape if isinstance(d, int)]))
            for s in session.backend.state_specs
            if s.grows
        )
        positions = len(PROMPTS[0]) + len(first) + len(PROMPTS[1]) + len(second)
        assert parked["kv"] == per_position * positions, family
        assert parked_short["kv"] == per_position * (len(PROMPTS[1]) + len(short))
        assert parked["fixed"] == parked_short["fixed"] > 0, family


def test_a_chat_continues_turn_by_turn_through_the_scheduler(exports, text_reference, tmp_path) -> None:
    """Messages in the scheduler: a conversation's first turn equals the one-shot chat (transformers'
    apply_chat_template ids, its generate's reply); the second turn's messages are rendered after the stored
    transcript (parked with the state, on disk) and its reply equals the one piece: the whole history's tokens."""
    session = rt.load(exports[TEXT_FAMILY])
    follow_up = [{"role": "user", "content": "And the docs?"}]
    with rt.Scheduler(session, conversations=tmp_path / "chats") as scheduler:
        first = scheduler.submit(MESSAGES, NEW_TOKENS, temperature=0.0, conversation="chat")
        assert first.reply(300) == text_reference["replies"]["chat"]
        turn_one = scheduler.submit(MESSAGES, NEW_TOKENS, temperature=0.0).result(300)  # the same, no conversation
        second = scheduler.submit(follow_up, NEW_TOKENS, temperature=0.0, conversation="chat")
        reply = second.reply(300)
        transcript = scheduler.conversations.transcript("chat")
    assert first.tokens == turn_one
    history = [*MESSAGES, {"role": "assistant", "content": text_reference["replies"]["chat"]}, *follow_up]
    assert list(transcript.messages) == [*history, {"role": "assistant", "content": reply}]
    text = session.text
    rendered = text.render_chat(history)
    consumed = text.render_chat(MESSAGES) + text.decode(first.tokens, skip_special_tokens=False)
    assert rendered.startswith(consumed)
    piece = text_reference["ids"]["chat"] + first.tokens
    piece += text.tokenizer.encode(rendered[len(consumed) :], add_special_tokens=False).ids
    stops = text.eos_token_ids
    assert second.tokens == session.generate_all([piece], NEW_TOKENS, temperature=0.0, stop_tokens=stops)[0]


def test_onnxruntime_genai_runs_every_family_the_mamba2_hybrid_included(exports, references, tmp_path) -> None:
    """--genai: onnxruntime-genai 0.18 loads each family's genai.onnx (a layered layout: genai's layer_types, KV
    slots for attention, conv / recurrent slots for Gated DeltaNet, Mamba-2 and LFM2's conv) and docs/genai.md's
    program gives transformers' greedy tokens at batch 1 and on a right-padded batch of three (each row cut at
    genai's eos, as genai stops there). genai's own builder has no Mamba-2 model: nemotron_h runs here only."""
    pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai is not installed (scripts/setup.sh installs it)")
    from test_genai import doc_program, until_eos

    script = tmp_path / "genai_demo.py"
    script.write_text(doc_program())
    for family, export in exports.items():
        config = json.loads((export / "genai_config.json").read_text())
        layer_types = config["model"]["decoder"].get("layer_types")  # hybrids: one per block with state
        assert layer_types is None if family == "mamba2" else len(layer_types) == len(_blocks(export)), family
        eos = config["model"]["eos_token_id"]
        for batch in (PROMPTS[:1], PROMPTS):
            args = [" ".join(map(str, p)) for p in batch]
            run = subprocess.run([sys.executable, str(script), str(export), *args], capture_output=True, text=True,
                                 timeout=300)  # fmt: skip
            assert run.returncode == 0, run.stderr[-2000:]
            got = [[int(t) for t in line.split()] for line in run.stdout.splitlines()]
            want = [until_eos(tokens[:10], eos) for tokens in references[family]["tokens"][: len(batch)]]
            assert got == want, (family, len(batch))


def _blocks(export: Path) -> set[str]:
    """The blocks with state of an export (its rnnx.json state names but their last component)."""
    return {s["name"].rpartition(".")[0] for s in json.loads((export / "rnnx.json").read_text())["state"]}


@pytest.mark.parametrize(
    "family, target, precision, quantize, init, steps",
    [
        ("qwen3_5_text", "onnxruntime", "fp32", "int4", 0.02, 16),  # MatMulNBits around Gated DeltaNet, attention
        ("nemotron_h", "tensorrt", "fp16", None, 0.2, 4),  # the plugin ops' graph, fp16 weights and activations
        ("lfm2", "onnx", "fp32", None, 0.2, 16),  # the portable target: standard opset-27 ops only
    ],
)
def test_the_other_targets_and_precisions_export_and_pass_their_checks(
    family, target, precision, quantize, init, steps, tmp_path
) -> None:
    """``export-model FOLDER --target T --precision P [--quantize int4]`` passes its own check against the fp32
    twin: the precision's tolerance and no diverging greedy token, or the int4 budget's gates. The random weights
    suit each check: ``initializer_range`` 0.02 (transformers' default) for int4, because with 0.2 a tiny random
    model is chaotic (int8 weights faked in PyTorch alone move its logits by 4-50%); 0.2 for fp16, because with
    0.02 its logits are so flat that fp16 rounding flips near-tied greedy tokens. fp16 chains 4 decode steps, not 16:
    on random logits a near tie comes within some dozens of greedy steps (seed 7: step 13, at a relative error of
    3.9e-3, inside the 1e-2 tolerance), which says nothing about the graph."""
    torch.manual_seed(7)
    config = _config(family)
    config.initializer_range = init
    folder = tmp_path / "checkpoint"
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    out = tmp_path / "export"
    args = [
        "--target",
        target,
        "--precision",
        precision,
        "--steps",
        str(steps),
        *(["--quantize", quantize] if quantize else []),
    ]
    result = subprocess.run(["export-model", str(folder), "--out", str(out), *args], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "PASS" in result.stdout and "\r" not in result.stdout  # into a pipe: plain lines, no bars
    metadata = json.loads((out / "rnnx.json").read_text())
    assert (metadata["target"], metadata["precision"], metadata["parity"]["passed"]) == (target, precision, True)
    if quantize:
        assert metadata["quantization"]["scheme"] == quantize and len(metadata["quantization"]["quantized"]) > 0


def test_export_model_on_a_terminal_shows_each_stage_with_its_time_and_bars(checkpoints, tmp_path) -> None:
    """``export-model`` under a pseudo-terminal (a real tty): the checkpoint's tensors and the parity steps as bars
    that fill, every slow stage closed with its time; the same export into a pipe prints plain lines (the test
    above)."""
    import pty

    out = tmp_path / "export"
    argv = ["export-model", str(checkpoints["lfm2"]), "--out", str(out), "--target", "onnxruntime", "--steps", "4"]
    pid, fd = pty.fork()
    if pid == 0:  # the child: export-model with the pty as its terminal
        os.execvp(argv[0], argv)
    shown, deadline = b"", time.monotonic() + 600
    while True:
        if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            os.kill(pid, signal.SIGKILL)  # a hung export fails this test instead of hanging the suite
            os.waitpid(pid, 0)
            pytest.fail(f"export-model did not finish within 600 s; it showed:\n{shown.decode(errors='replace')}")
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    _, status = os.waitpid(pid, 0)
    text = shown.decode()
    assert os.waitstatus_to_exitcode(status) == 0, text[-3000:]
    ends = [line.rpartition("\r")[2].strip() for line in text.replace("\r\n", "\n").split("\n")]
    assert re.search(r"\[#{24}\] (\d+)/\1 tensors", text), text[-3000:]
    assert "[########################] 5/5 decode steps" in text
    assert any(re.fullmatch(r"- loading .* \(\d+\.\d s\)", line) for line in ends), ends
    assert any(re.fullmatch(r"- tracing with torch\.export .* \(\d+\.\d s\)", line) for line in ends), ends
    assert "PASS" in text and (out / "rnnx.json").is_file()


def test_prefill_pieces_are_equal_long_enough_and_within_the_backends_limit(monkeypatch) -> None:
    """The piece size: one call up to twice PREFILL_PIECE_TOKENS, then equal pieces of at least that many positions
    (under twice), and never over a backend's per-call limit (a TensorRT engine's max_length)."""
    import rnnx.runtime.session as session_module
    from rnnx.runtime.session import prefill_pieces

    monkeypatch.setattr(session_module, "PREFILL_PIECE_TOKENS", 1024)
    for length in (1, 1023, 1024, 1500, 2047, 2048, 2049, 5000, 8192):
        size = prefill_pieces(length)
        count = -(-length // size)
        assert 1024 <= size < 2048 or (count == 1 and size == length), (length, size)
        assert length - (count - 1) * size > size - count, (length, size)  # the last piece short by < count
    assert prefill_pieces(600, max_call_length=512) == 300 and prefill_pieces(1500, max_call_length=512) == 500
    assert prefill_pieces(400, max_call_length=512) == 400


@pytest.mark.parametrize("family", ["qwen3_5_text", "lfm2"])
@pytest.mark.parametrize("limit", ["piece_tokens", "backend_max_call_length"])
def test_a_long_prompt_prefills_in_pieces_with_the_state_and_logits_of_one_call(family, limit, exports, monkeypatch):
    """``Session.prefill`` past PREFILL_PIECE_TOKENS, or past the backend's ``max_call_length``, feeds pieces, the
    state carried (KV caches, conv and recurrent states), and takes each row's last logits from the piece that holds
    its last token: a right-padded batch whose rows end in different pieces gives the one-call state and logits, and
    the same next step."""
    import rnnx.runtime as rt
    import rnnx.runtime.session as session_module

    session = rt.load(exports[family], backend="onnxruntime")
    tokens = np.random.default_rng(3).integers(0, session.vocab_size, size=(3, 37))
    lengths = [37, 20, 5]  # in four pieces of 10 or five of 8, the rows end in different pieces
    whole = session.prefill(tokens, lengths)
    if limit == "piece_tokens":
        monkeypatch.setattr(session_module, "PREFILL_PIECE_TOKENS", 8)  # 37 // 8 = 4 pieces of 10
    else:
        monkeypatch.setattr(session.backend, "max_call_length", 8, raising=False)  # 5 pieces of 8
    calls: list[int] = []
    run = session.backend.run
    monkeypatch.setattr(
        session.backend, "run", lambda feed, *a, **k: calls.append(feed["input_ids"].shape[1]) or run(feed, *a, **k)
    )
    pieces = session.prefill(tokens, lengths)
    assert calls == ([10, 10, 10, 7] if limit == "piece_tokens" else [8, 8, 8, 8, 5]), calls
    a, b = whole.to_host(), pieces.to_host()
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}
    for name in a:
        np.testing.assert_allclose(
            b[name], a[name], rtol=1e-4, atol=1e-5 * float(np.abs(a[name]).max() + 1), err_msg=name
        )
    np.testing.assert_allclose(pieces.last_logits, whole.last_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(session.step([1, 2, 3], state=pieces), session.step([1, 2, 3], state=whole), rtol=1e-4,
                               atol=1e-5)  # fmt: skip


@pytest.mark.skipif(venv_python() is None, reason="the Triton venv .cache/triton/venv is missing: run scripts/setup.sh")
def test_tritons_python_variant_serves_hybrid_streams_and_resumes_a_parked_conversation(exports, tmp_path) -> None:
    """The real tritonserver (the python variant, rnnx's state pool) serves Gated DeltaNet and Mamba-2 hybrids, KV
    caches included: concurrent streams of different lengths each get their solo greedy tokens, and a conversation
    parked by one sequence and resumed by another equals the whole conversation in one piece."""
    import rnnx.runtime as rt
    from rnnx.runtime.serving.triton import write_repository

    repo, families = tmp_path / "repo", ("qwen3_5_text", "nemotron_h")
    models = {f: write_repository(exports[f], repo, "python", name=f"m_{f}", max_streams=8, conversation_dir=tmp_path
                                  / f"chats_{f}").name for f in families}  # fmt: skip
    prompts = [[5, 9, 2, 7, 1, 3, 8], [11, 4], [6, 6, 2, 9, 12, 3, 1, 1, 7, 5, 2, 4], [3, 1, 4, 1, 5]]
    specs = [{"id": 10 + i, "prompt": p, "steps": 6 + 2 * i} for i, p in enumerate(prompts[:3])]
    specs[1]["conversation_id"] = "c1"
    turn2 = {"id": 20, "prompt": prompts[3], "steps": 6, "conversation_id": "c1"}
    with TritonServer(repo, tmp_path / "server.log") as server:
        got = {f: run_client("streams", {"url": server.grpc_url, "model": models[f], "streams": specs})["streams"]
               for f in families}  # fmt: skip
        resumed = {f: run_client("streams", {"url": server.grpc_url, "model": models[f], "streams": [turn2]})["streams"]
                   for f in families}  # fmt: skip
    for family in families:
        session = rt.load(exports[family], backend="onnxruntime")
        for spec in specs:
            want = session.generate_all([spec["prompt"]], spec["steps"], temperature=0.0)[0]
            assert got[family][str(spec["id"])]["tokens"] == want, (family, spec["id"])
        history = specs[1]["prompt"] + got[family][str(specs[1]["id"])]["tokens"] + turn2["prompt"]
        assert resumed[family]["20"]["tokens"] == session.generate_all([history], 6, temperature=0.0)[0], family
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log


def test_the_moe_block_equals_transformers_and_an_unpicked_overflowing_expert_adds_nothing() -> None:
    """rnnx's SparseMoE (every expert computed, mixed by the router's weights) against transformers'
    Qwen3_5MoeSparseMoeBlock (a dispatch to the picked experts) on the same weights; in fp16 an expert the router
    did not pick may overflow to inf and still adds nothing (no 0 x inf = NaN)."""
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeSparseMoeBlock

    from rnnx.models.decoder import SparseMoE

    config = _config("qwen3_5_moe_text")
    torch.manual_seed(5)
    theirs = Qwen3_5MoeSparseMoeBlock(config).eval()
    for p in theirs.parameters():
        torch.nn.init.normal_(p, std=0.2)
    ours = SparseMoE(64, config.num_experts, config.num_experts_per_tok, config.moe_intermediate_size,
                     config.shared_expert_intermediate_size).eval()  # fmt: skip
    state = {"gate.weight": theirs.gate.weight, "shared_expert_gate.weight": theirs.shared_expert_gate.weight}
    for p in ("gate", "up", "down"):
        state[f"shared_expert.{p}_proj.weight"] = getattr(theirs.shared_expert, f"{p}_proj").weight
    inter = config.moe_intermediate_size
    for e in range(config.num_experts):
        state[f"experts.{e}.gate_proj.weight"] = theirs.experts.gate_up_proj[e, :inter]
        state[f"experts.{e}.up_proj.weight"] = theirs.experts.gate_up_proj[e, inter:]
        state[f"experts.{e}.down_proj.weight"] = theirs.experts.down_proj[e]
    ours.load_state_dict({k: v.detach().clone() for k, v in state.items()})
    x = torch.randn(2, 7, 64)
    with torch.no_grad():
        np.testing.assert_allclose(ours(x)[0].numpy(), theirs(x).numpy(), rtol=1e-5, atol=1e-6)
        half = ours.half()
        picked = half.gate(x.half()).float().softmax(-1).topk(config.num_experts_per_tok, -1).indices
        rare = int(torch.stack([(picked == e).any(-1).sum() for e in range(config.num_experts)]).argmin())
        half.experts[rare].down_proj.weight.fill_(6e4)  # inf in fp16 wherever it runs
        out = half(x.half())[0]
    touched = (picked == rare).any(-1)  # the tokens that picked it overflow, as in transformers
    assert (~touched).any() and torch.isfinite(out[~touched]).all()
