"""Triton model repositories for rnnx exports, and a real tritonserver serving concurrent streams.

* The ``onnxruntime`` and ``tensorrt`` configs of both demo exports parse into Triton's own ``ModelConfig``
  protobuf (``tritonclient.grpc.model_config_pb2``, in the Triton venv) and name exactly the ONNX graph's
  data inputs, data outputs and state pairs, with the sequence batcher's controls and zero initial state.
* The ``python`` variant is served by the real ``tritonserver`` of the ``nvidia-pytriton`` 0.7.0 wheel
  (Triton 2.51, CPU, 127.0.0.1 only, bounded in time): 10 concurrent streams with interleaved requests
  each get exactly the tokens ``rnnx.runtime`` gives for that prompt alone (greedy and seeded sampling),
  a malformed request gets a Triton error while its stream and the others go on, ended and idle streams
  hold no state (``held_streams`` measured), and a sequence that expired cannot be continued; a conversation
  (``conversation_id``) started by one of those streams and resumed by a second sequence from the shared
  conversation directory equals the whole conversation run in one piece.

The server tests need the venv that ``scripts/setup.sh`` builds (``.cache/triton/venv``); without it they
skip and say so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import onnx
import pytest

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt
from rnnx.models.checkpoint import DEMO_CHECKPOINTS
from rnnx.runtime.contract.artifact import data_inputs, data_outputs, read_metadata, state_specs
from rnnx.runtime.serving.conversations import conversation_filename
from rnnx.runtime.serving.triton import TritonConfigError, graph_config, write_repository
from rnnx.runtime.serving.triton.config import CONTROL_INPUTS, PYTHON_INPUTS, PYTHON_OUTPUTS, batch_first
from rnnx.runtime.serving.triton.local_server import TritonServer, run_client, venv_python

needs_triton = pytest.mark.skipif(
    venv_python() is None, reason="the Triton venv .cache/triton/venv is missing: run scripts/setup.sh"
)


def test_the_venv_is_looked_for_in_this_checkout():
    """scripts/setup.sh builds the venv under the checkout's .cache/triton; the server looks there (a wrong
    path would skip every Triton test below instead of failing)."""
    from rnnx.runtime.serving.triton import local_server

    checkout = Path(__file__).resolve().parents[1]
    assert local_server._ROOT == checkout
    if "RNNX_TRITON_VENV" not in os.environ:
        assert local_server.VENV == checkout / ".cache" / "triton" / "venv"


def graph_io(model_path: Path) -> tuple[list[str], list[str]]:
    graph = onnx.load(str(model_path), load_external_data=False).graph
    return [i.name for i in graph.input], [o.name for o in graph.output]


@needs_triton
@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_graph_configs_parse_and_name_exactly_the_graph(name, demo_exports, tmp_path):
    ort_dir = write_repository(demo_exports[(name, "onnxruntime")], tmp_path / "repo", "onnxruntime")
    trt_export = demo_exports[(name, "tensorrt")]
    trt_config = (
        tmp_path / "tensorrt.pbtxt"
    )  # the tensorrt variant's directory needs a built engine; its config does not
    trt_config.write_text(graph_config(read_metadata(trt_export), "trt", "tensorrt"))
    parsed = run_client("parse", {"configs": [str(ort_dir / "config.pbtxt"), str(trt_config)]})
    assert (ort_dir / "1" / "model.onnx").is_file()
    for config, export, platform, kind in (
        (parsed[0], demo_exports[(name, "onnxruntime")], "onnxruntime_onnx", "KIND_CPU"),
        (parsed[1], trt_export, "tensorrt_plan", "KIND_GPU"),
    ):
        meta = read_metadata(export)
        graph_inputs, graph_outputs = graph_io(export / "model.onnx")
        specs = state_specs(meta)
        assert config["platform"] == platform and config["instances"][0][:2] == [1, kind]
        # TensorRT: a context for the engine's decode (0) and prefill (1) profiles
        assert config["instances"][0][2] == (["0", "1"] if platform == "tensorrt_plan" else [])
        assert [t[0] for t in config["inputs"]] == [t.name for t in data_inputs(meta)]
        assert [t[0] for t in config["outputs"]] == [t.name for t in data_outputs(meta)]
        assert [s[:2] for s in config["state"]] == [[s.input, s.output] for s in specs]
        # together: exactly the graph's inputs and outputs
        assert sorted([t[0] for t in config["inputs"]] + [s[0] for s in config["state"]]) == sorted(graph_inputs)
        assert sorted([t[0] for t in config["outputs"]] + [s[1] for s in config["state"]]) == sorted(graph_outputs)
        # no control inputs: the graph takes none (Triton's backends refuse one the model lacks)
        assert config["controls"] == {} and config["strategy"] == "oldest"
        batched = batch_first(meta)
        assert (config["max_batch_size"] > 0) == batched
        # Triton requires preferred batch sizes <= max_batch_size: none when not batching
        assert config["preferred"] == ([config["max_batch_size"]] if batched else [])
        for entry, spec in zip(config["state"], specs):
            shape = spec.concrete_shape(1, 0)
            want = list(shape[1:]) if batched else list(shape)
            assert entry[2] == "TYPE_FP32" and entry[3] == want and entry[4] == [want] and entry[5] == [True]
        ids = dict((t[0], t) for t in config["inputs"])["input_ids"]
        assert ids[1] == "TYPE_INT64" and ids[2] == ([-1] if batched else [1, -1])


@needs_triton
def test_python_config_parses(demo_exports, tmp_path):
    model_dir = write_repository(demo_exports[(DEMO_CHECKPOINTS[0], "onnxruntime")], tmp_path / "repo", "python",
                                 max_streams=16, instances=2)  # fmt: skip
    (config,) = run_client("parse", {"configs": [str(model_dir / "config.pbtxt")]})
    assert config["backend"] == "python" and config["max_batch_size"] == 16
    assert [t[0] for t in config["inputs"]] == list(PYTHON_INPUTS)
    assert [t[3] for t in config["inputs"]] == [opt for _, _, opt in PYTHON_INPUTS.values()]
    assert [t[4] for t in config["inputs"]] == [n == "input_ids" for n in PYTHON_INPUTS]  # prompts beside steps
    assert [t[0] for t in config["outputs"]] == list(PYTHON_OUTPUTS)
    assert config["controls"] == {n: [k] for n, k in CONTROL_INPUTS.items()} and config["state"] == []
    assert config["corrid_type"] == ["TYPE_UINT64"] and config["preferred"] == [16]
    assert config["instances"] == [[2, "KIND_CPU", []]]
    assert (model_dir / "1" / "model.py").is_file() and (model_dir / "1" / "export" / "rnnx.json").is_file()


def test_bad_repository_requests_are_one_line_errors(demo_exports, tmp_path):
    export = demo_exports[(DEMO_CHECKPOINTS[0], "tensorrt")]
    with pytest.raises(TritonConfigError, match="needs the engine built for the serving GPU"):
        write_repository(export, tmp_path / "repo", "tensorrt")
    with pytest.raises(TritonConfigError, match="needs a target 'tensorrt' export"):
        write_repository(demo_exports[(DEMO_CHECKPOINTS[0], "onnxruntime")], tmp_path / "repo", "tensorrt")
    with pytest.raises(TritonConfigError, match="variant 'vllm'"):
        write_repository(export, tmp_path / "repo", "vllm")
    with pytest.raises(TritonConfigError, match="model name"):
        write_repository(export, tmp_path / "repo", "python", name="a/b")
    with pytest.raises(TritonConfigError, match="only the python variant parks conversations"):
        write_repository(demo_exports[(DEMO_CHECKPOINTS[0], "onnxruntime")], tmp_path / "repo", "onnxruntime",
                         conversation_dir=tmp_path / "chats")  # fmt: skip
    assert not (tmp_path / "repo").exists() or not any((tmp_path / "repo").iterdir())


def test_a_failed_rewrite_leaves_the_model_directory_as_it_was(demo_exports, tmp_path, monkeypatch):
    export = demo_exports[(DEMO_CHECKPOINTS[0], "onnxruntime")]
    model_dir = write_repository(export, tmp_path / "repo", "python")
    before = {p.relative_to(model_dir): p.read_bytes() for p in model_dir.rglob("*") if p.is_file()}
    from rnnx.runtime.serving.triton import repository

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(repository, "_link_or_copy", broken)
    with pytest.raises(OSError, match="disk full"):
        write_repository(export, tmp_path / "repo", "python", max_streams=3)
    after = {p.relative_to(model_dir): p.read_bytes() for p in model_dir.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == [model_dir.name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # no scratch directory left beside it


@needs_triton
@pytest.mark.slow
def test_real_tritonserver_serves_concurrent_streams(demo_exports, tmp_path):
    name = DEMO_CHECKPOINTS[0]
    export = demo_exports[(name, "onnxruntime")]
    model_dir = write_repository(
        export, tmp_path / "repo", "python", max_streams=16, idle_timeout_s=3.0, conversation_dir=tmp_path / "chats"
    )
    session = rt.load(export, backend="onnxruntime")
    prompts = [[(3 * i + j) % 10 for j in range(10 + i % 5)] + [10] for i in range(10)]
    specs = [{"id": 100 + i, "prompt": p, "steps": 12 + i % 7} for i, p in enumerate(prompts[:8])]
    specs += [
        {"id": 200, "prompt": prompts[8], "steps": 10, "temperature": 0.9, "seed": 5},
        {"id": 201, "prompt": prompts[9], "steps": 10, "temperature": 1.2, "top_k": 4, "top_p": 0.9, "seed": 6},
    ]
    specs[3]["bad_at"] = 4
    specs[5]["conversation_id"] = "chat/1"  # turn 1 of a conversation, among the concurrent streams
    turn2 = {"id": 301, "prompt": prompts[2][:4], "steps": 8, "temperature": 0.8, "seed": 9}
    turn2["conversation_id"] = "chat/1"  # turn 2: a second sequence resumes it
    with TritonServer(tmp_path / "repo", tmp_path / "server.log") as server:
        url, model = server.grpc_url, model_dir.name
        out = run_client("streams", {"url": url, "model": model, "streams": specs})
        resumed = run_client("streams", {"url": url, "model": model, "streams": [turn2]})["streams"]["301"]
        after = run_client("probe", {"url": url, "model": model, "id": 999, "tokens": [1, 10]})
        # a stream left open expires after the idle timeout and frees its row
        opened = run_client("probe", {"url": url, "model": model, "id": 777, "tokens": [1, 10], "end": False})
        time.sleep(4.0)
        expired = run_client("probe", {"url": url, "model": model, "id": 778, "tokens": [2, 10]})
        continued = run_client("probe", {"url": url, "model": model, "id": 777, "tokens": [3], "start": False})
    for spec in specs:
        got = out["streams"][str(spec["id"])]
        options = {k: spec[k] for k in ("top_k", "top_p", "seed") if k in spec}
        want = session.generate_all(
            [spec["prompt"]], spec["steps"], temperature=spec.get("temperature", 0.0), **options
        )
        assert got["tokens"] == want[0], f"stream {spec['id']}"
    history = specs[5]["prompt"] + out["streams"][str(specs[5]["id"])]["tokens"] + turn2["prompt"]
    assert resumed["tokens"] == session.generate_all([history], 8, temperature=0.8, seed=9)[0]
    assert resumed["held"][-1] == 0 and [p.name for p in (tmp_path / "chats").iterdir()] == [
        conversation_filename("chat/1")
    ]
    bad = out["streams"][str(specs[3]["id"])]["errors"]
    assert len(bad) == 1 and "out of vocabulary" in bad[0], bad
    # streams overlapped: some response saw several streams held at once
    assert max(max(s["held"]) for s in out["streams"].values()) >= 4
    assert after == {"token": after["token"], "held": 0}, after  # every ended stream freed its row
    assert opened["held"] == 1
    assert expired["held"] == 0, expired
    assert "error" in continued, continued
    log = (tmp_path / "server.log").read_text()
    assert "successfully loaded" in log and "Traceback" not in log


def test_export_model_cli_writes_the_repository(tmp_path):
    from click.testing import CliRunner

    from rnnx.export.cli import main

    out, repo = tmp_path / "export", tmp_path / "repo"
    result = CliRunner().invoke(
        main, ["--target", "onnxruntime", "--no-check", "--out", str(out), "--triton-repo", str(repo)]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in repo.iterdir()) == ["export_onnxruntime", "export_python"]
    assert (repo / "export_onnxruntime" / "1" / "model.onnx").read_bytes() == (out / "model.onnx").read_bytes()
    assert (repo / "export_python" / "1" / "export" / "rnnx.json").is_file()
    refused = CliRunner().invoke(
        main, ["--out", str(tmp_path / "x"), "--triton-repo", str(repo), "--triton-variant", "tensorrt"]
    )
    assert refused.exit_code != 0 and "needs --engine" in refused.output
    assert not (tmp_path / "x").exists()


def test_a_growing_kv_cache_is_refused_by_the_graph_variants_and_served_by_python(tmp_path):
    from rnnx.export import export_model
    from rnnx.models.lm import SRUppLM

    model = SRUppLM(vocab_size=16, embed_dim=8, hidden_size=8, proj_size=4, num_layers=1, attention="softmax")
    export = export_model(model, tmp_path / "kv", target="onnxruntime", check=False).out_dir
    with pytest.raises(TritonConfigError, match="grow with the context .* the python variant serves it"):
        write_repository(export, tmp_path / "repo", "onnxruntime")
    with pytest.raises(TritonConfigError, match="grow with the context"):
        graph_config(read_metadata(export), "kv", "onnxruntime")
    assert (write_repository(export, tmp_path / "repo", "python") / "config.pbtxt").is_file()
