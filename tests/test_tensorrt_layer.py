"""The thin TensorRT layer: profiles, engine cache, binding plan (pure Python, run everywhere) and
the engine build / backend (marked ``tensorrt``: skip where TensorRT is not installed, e.g. CI)."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from rnnx.export import export_model, read_metadata
from rnnx.models.registry import build_model
from rnnx.runtime.tensorrt import (
    CACHE_ENV,
    BindingError,
    EngineCache,
    KeyParts,
    ProfileError,
    ProfileLimits,
    TensorRTNotInstalled,
    bindings,
    build_profiles,
    default_cache_dir,
    plan_bindings,
    require_tensorrt,
    select_profile,
    tensorrt_available,
)  # fmt: skip
from rnnx.runtime.tensorrt.bindings import PING_PONG

needs_tensorrt = pytest.mark.skipif(not tensorrt_available(), reason="TensorRT is not installed")


@pytest.fixture
def cuda_device() -> None:
    """Skips the test where torch sees no CUDA device (the engine tests build and run engines on one)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.fixture(scope="module")
def linear_meta(demo_exports):
    """The shipped linear-transformer demo exported without the parity check (fixed-size state)."""
    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    return out, read_metadata(out)


@pytest.fixture(scope="module")
def softmax_meta(tmp_path_factory):
    """A small SRU++ softmax model: its KV cache grows (past_length)."""
    model = build_model("srupp", dict(vocab_size=12, embed_dim=16, hidden_size=16, proj_size=8, num_layers=2,
                                      num_heads=2, attention="softmax"))  # fmt: skip
    out = tmp_path_factory.mktemp("sm") / "export"
    export_model(model, out, check=False)
    return out, read_metadata(out)


# -- profiles -------------------------------------------------------------------------------------


def test_profiles_linear_transformer(linear_meta):
    _, meta = linear_meta
    decode, prefill = build_profiles(meta, ProfileLimits(max_batch=8, max_length=64))
    assert (decode.name, prefill.name) == ("decode", "prefill")
    names = [t["name"] for t in meta["inputs"]]
    assert list(decode.shapes) == names and list(prefill.shapes) == names
    ids = decode.shapes["input_ids"]
    assert (ids.min, ids.opt, ids.max) == ((1, 1), (1, 1), (8, 1))
    ids = prefill.shapes["input_ids"]
    assert (ids.min, ids.opt, ids.max) == ((1, 1), (1, 64), (8, 64))
    assert prefill.shapes["attention_mask"] == ids
    s = decode.shapes["past_key_values.layers.0.S"]
    assert (s.min, s.max) == ((1, 4, 32, 32), (8, 4, 32, 32))
    assert decode.shapes["past_key_values.position"].max == (8,)


def test_profiles_growing_cache(softmax_meta):
    _, meta = softmax_meta
    decode, prefill = build_profiles(meta, ProfileLimits(max_batch=4, max_length=32, max_context=128, opt_batch=2))
    key = "past_key_values.attention.0.key"
    # past_length 0 (an empty cache is a zero-size input) .. max_context - 1 (present <= max_context)
    assert decode.shapes[key].min == (1, 2, 0, 4)
    assert decode.shapes[key].opt == (2, 2, 64, 4)
    assert decode.shapes[key].max == (4, 2, 127, 4)
    assert prefill.shapes[key].opt == (2, 2, 0, 4)
    assert prefill.shapes["past_key_values.attention.1.valid"].max == (4, 127)
    assert decode.shapes["past_key_values.c"].max == (2, 4, 16)
    for profile in (decode, prefill):
        for r in profile.shapes.values():
            assert all(lo <= o <= hi for lo, o, hi in zip(r.min, r.opt, r.max))
    assert select_profile([decode, prefill], {"input_ids": (3, 1)}) == 0
    assert select_profile([decode, prefill], {"input_ids": (3, 7)}) == 1
    with pytest.raises(ProfileError, match="no optimization profile covers"):
        select_profile([decode, prefill], {"input_ids": (5, 1)})


@pytest.mark.parametrize(
    "limits, message",
    [
        (ProfileLimits(max_length=0), "max_length must be an integer >= 1"),
        (ProfileLimits(max_batch=0), "max_batch must be an integer >= 1"),
        (ProfileLimits(max_batch=True), "max_batch must be an integer >= 1"),
        (ProfileLimits(max_length=16, max_context=8), r"max_context must be an integer >= max_length \(16\)"),
        (ProfileLimits(max_batch=2, opt_batch=3), r"opt_batch must be an integer in \[1, 2\]"),
        (ProfileLimits(max_length=8, opt_length=9), r"opt_length must be an integer in \[1, 8\]"),
        (ProfileLimits(max_length=8, opt_context=8), r"opt_context must be an integer in \[0, 7\]"),
    ],
)
def test_profile_limits_validation(limits, message):
    with pytest.raises(ProfileError, match=message):
        limits.resolved()


def test_profile_unknown_symbolic_dim(linear_meta):
    _, meta = linear_meta
    bad = json.loads(json.dumps(meta))
    bad["inputs"][2]["shape"][1] = "heads"
    with pytest.raises(ProfileError, match=r"no range for axis 'heads'.*ProfileLimits\(axes="):
        build_profiles(bad)


def test_profile_declared_axis_ranges(linear_meta):
    """A stateful export's own axis names get their (min, opt, max) from ProfileLimits.axes."""
    _, meta = linear_meta
    declared = json.loads(json.dumps(meta))
    declared["inputs"][0]["shape"] = ["batch", "length", "frames"]
    decode, prefill = build_profiles(declared, ProfileLimits(max_batch=2, max_length=8, axes={"frames": (1, 4, 16)}))
    name = declared["inputs"][0]["name"]
    assert decode.shapes[name].to_dict() == {"min": [1, 1, 1], "opt": [1, 1, 4], "max": [2, 1, 16]}
    assert prefill.shapes[name].to_dict() == {"min": [1, 1, 1], "opt": [1, 8, 4], "max": [2, 8, 16]}
    for axes, message in [
        ({"frames": (1, 20, 16)}, r"opt must be an integer in \[1, 16\]"),
        ({"batch": (1, 1, 2)}, "set batch through max_batch"),
        ({"frames": (1, 2)}, "must be"),
    ]:
        with pytest.raises(ProfileError, match=message):
            ProfileLimits(axes=axes).resolved()


# -- engine cache ---------------------------------------------------------------------------------


def _parts(meta, **override):
    profiles = build_profiles(meta, ProfileLimits(max_batch=2, max_length=16))
    args = dict(model_sha256=meta["model_sha256"], tensorrt_version="10.14.1", gpu_name="NVIDIA H100 80GB HBM3",
                compute_capability=(9, 0), precision="fp16", profiles=profiles, plugin_library=None,
                device_index=0, workspace_bytes=None)  # fmt: skip
    args.update(override)
    return KeyParts.create(**args)


def test_cache_key_stable_and_sensitive(linear_meta, softmax_meta, tmp_path):
    """The key changes with everything that changes an engine: the ONNX file's hash, TensorRT version, GPU
    name, compute capability and index, precision, profiles, workspace and the plugin library's content."""
    _, meta = linear_meta
    base = _parts(meta)
    assert base.key() == _parts(meta).key() and len(base.key()) == 64
    assert base.compute_capability == "9.0"
    plugin = tmp_path / "librnnx_trt_plugins.so"
    plugin.write_bytes(b"plugin v1")
    other_profiles = build_profiles(meta, ProfileLimits(max_batch=4, max_length=16))
    variants = {
        "model": _parts(softmax_meta[1]),
        "onnx": _parts(meta, model_sha256="0" * 64),
        "trt": _parts(meta, tensorrt_version="10.13.0"),
        "gpu": _parts(meta, gpu_name="NVIDIA H200"),
        "cc": _parts(meta, compute_capability="8.0"),
        "device": _parts(meta, device_index=1),
        "precision": _parts(meta, precision="fp32"),
        "profiles": _parts(meta, profiles=other_profiles),
        "workspace": _parts(meta, workspace_bytes=1 << 30),
        "workspace2": _parts(meta, workspace_bytes=2 << 30),
        "plugin": _parts(meta, plugin_library=plugin),
    }
    keys = {name: p.key() for name, p in variants.items()}
    assert base.key() not in keys.values() and len(set(keys.values())) == len(keys)
    plugin.write_bytes(b"plugin v2")
    assert _parts(meta, plugin_library=plugin).key() != keys["plugin"]
    # The library's content counts, not its path: the same bytes elsewhere give the same key.
    copy = tmp_path / "elsewhere" / "librnnx_trt_plugins.so"
    copy.parent.mkdir()
    copy.write_bytes(b"plugin v2")
    assert _parts(meta, plugin_library=copy).key() == _parts(meta, plugin_library=plugin).key()
    assert "/" not in json.dumps(_parts(meta, plugin_library=copy).to_dict()["plugin_sha256"])
    stem = base.file_stem()
    assert stem.startswith(meta["model_sha256"][:12] + "-fp16-") and "/" not in stem


def test_builder_key_parts_take_the_device_workspace_and_onnx_hash(linear_meta, tmp_path):
    """builder.key_parts: the device index from the caller, the workspace, the ONNX file's own hash."""
    from rnnx.runtime.tensorrt.builder import key_parts

    _, meta = linear_meta
    profiles = build_profiles(meta, ProfileLimits(max_batch=2, max_length=16))
    gpu0, gpu1 = ("NVIDIA H100", "9.0", 0), ("NVIDIA H100", "9.0", 1)
    a = key_parts(meta, "fp32", profiles, None, "10.14.1", gpu0)
    assert a.model_sha256 == meta["model_sha256"] and a.device_index == 0 and a.workspace_bytes is None
    assert key_parts(meta, "fp32", profiles, None, "10.14.1", gpu1).key() != a.key()
    assert key_parts(meta, "fp32", profiles, None, "10.14.1", gpu0, workspace_bytes=1 << 28).key() != a.key()
    assert key_parts(meta, "fp32", profiles, None, "10.14.1", gpu0, onnx_sha256="f" * 64).key() != a.key()


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "engines"))
    assert default_cache_dir() == tmp_path / "engines"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "rnnx" / "engines"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "rnnx" / "engines"


def test_cache_store_lookup_and_corruption(linear_meta, tmp_path):
    _, meta = linear_meta
    cache, parts = EngineCache(tmp_path / "c"), _parts(meta)
    assert not cache.lookup(parts).hit and cache.lookup(parts).problem is None
    engine = os.urandom(4096)
    path = cache.store(parts, engine)
    assert path == cache.engine_path(parts) and path.read_bytes() == engine
    assert cache.lookup(parts).path == path
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, cache.sidecar_path(parts).name])
    # truncated engine
    path.write_bytes(engine[:100])
    assert "truncated" in cache.lookup(parts).problem
    # same size, different bytes
    path.write_bytes(bytes(b ^ 1 for b in engine))
    assert "sha256 does not match" in cache.lookup(parts).problem
    # a foreign sidecar (other key parts) under this name
    cache.store(parts, engine)
    sidecar = cache.sidecar_path(parts)
    info = json.loads(sidecar.read_text())
    info["parts"]["gpu_name"] = "other GPU"
    sidecar.write_text(json.dumps(info))
    assert "foreign" in cache.lookup(parts).problem
    sidecar.write_text("{not json")
    assert "unreadable sidecar" in cache.lookup(parts).problem
    sidecar.unlink()
    assert "sidecar missing" in cache.lookup(parts).problem
    cache.remove(parts)
    assert not path.exists() and cache.lookup(parts).problem is None


def test_cache_write_is_atomic(linear_meta, tmp_path, monkeypatch):
    """A failure while writing leaves the previous good entry intact and no temporary files."""
    _, meta = linear_meta
    cache, parts = EngineCache(tmp_path), _parts(meta)
    good = cache.store(parts, b"good engine")

    def failing_fsync(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="disk full"):
        cache.store(parts, b"new engine, half written")
    monkeypatch.undo()
    assert good.read_bytes() == b"good engine" and cache.lookup(parts).path == good
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([good.name, cache.sidecar_path(parts).name])
    with pytest.raises(ValueError, match="empty engine"):
        cache.store(parts, b"")


# -- binding plan ---------------------------------------------------------------------------------


def test_binding_plan_linear_transformer(linear_meta):
    _, meta = linear_meta
    plan = plan_bindings(meta)
    assert [d.name for d in plan.data] == ["input_ids", "attention_mask", "logits"]
    assert [s.name for s in plan.states] == [s["name"] for s in meta["state"]]
    assert all(s.mode == PING_PONG for s in plan.states)
    even, odd = plan.addresses(0), plan.addresses(1)
    assert even["past_key_values.layers.0.S"] == "layers.0.S#0" == odd["present.layers.0.S"]
    assert even["present.layers.0.S"] == "layers.0.S#1" == odd["past_key_values.layers.0.S"]
    assert even["logits"] == "logits"
    specs = plan.buffer_specs(batch=2, max_length=10, max_context=10)
    assert specs["input_ids"].nbytes == 2 * 10 * 8
    assert specs["logits"].shape == (2, 10, 12) and specs["logits"].nbytes == 2 * 10 * 12 * 4
    assert specs["layers.0.S#0"].nbytes == specs["layers.0.S#1"].nbytes == 2 * 4 * 32 * 32 * 4
    assert specs["position#1"].nbytes == 2 * 4
    exact = sum(s.nbytes for s in specs.values())
    assert plan.total_bytes(2, 10, 10, alignment=1) == exact <= plan.total_bytes(2, 10, 10)


def test_binding_plan_has_no_in_place_mode(linear_meta, softmax_meta):
    """State is always double-buffered: no call reads and writes the same state buffer (the plugins
    declare no aliasing, and a captured graph must never update state in place)."""
    assert not hasattr(bindings, "IN_PLACE")
    assert "in_place" not in inspect.signature(plan_bindings).parameters
    for _, meta in (linear_meta, softmax_meta):
        plan = plan_bindings(meta)
        specs = plan.buffer_specs(2, 16, 16)
        for s in plan.states:
            assert s.mode == PING_PONG and s.buffers == (f"{s.name}#0", f"{s.name}#1")
            assert {f"{s.name}#0", f"{s.name}#1"} <= set(specs)
        for parity in (0, 1):
            addresses = plan.addresses(parity)
            assert all(addresses[s.input] != addresses[s.output] for s in plan.states)


def test_binding_plan_growing_cache(softmax_meta):
    _, meta = softmax_meta
    plan = plan_bindings(meta)
    specs = plan.buffer_specs(batch=3, max_length=16, max_context=100)
    assert specs["attention.0.key#0"].shape == (3, 2, 100, 4)
    assert specs["attention.0.key#1"].nbytes == 3 * 2 * 100 * 4 * 4
    assert specs["attention.1.valid#0"].nbytes == 3 * 100 * 1
    assert specs["c#0"].shape == (2, 3, 16)
    assert specs["attention_mask"].shape == (3, 16)
    with pytest.raises(BindingError, match="max_context .* must be >= max_length"):
        plan.buffer_specs(1, 16, 8)
    with pytest.raises(BindingError, match="batch must be an integer >= 1"):
        plan.buffer_specs(0, 16, 16)


def test_binding_plan_checks_engine_names(softmax_meta):
    _, meta = softmax_meta
    inputs = [t["name"] for t in meta["inputs"]]
    outputs = [t["name"] for t in meta["outputs"]]
    assert plan_bindings(meta, list(reversed(inputs)), outputs).states == plan_bindings(meta).states
    with pytest.raises(BindingError, match=r"missing: \['present.c'\]"):
        plan_bindings(meta, inputs, outputs[:1] + outputs[2:])
    with pytest.raises(BindingError, match="unexpected"):
        plan_bindings(meta, inputs + ["extra"], outputs)


# -- without TensorRT -----------------------------------------------------------------------------


@pytest.mark.skipif(tensorrt_available(), reason="checks the behaviour without TensorRT")
def test_require_tensorrt_message():
    with pytest.raises(TensorRTNotInstalled, match="TensorRT is not installed: pip install tensorrt"):
        require_tensorrt()


@pytest.mark.skipif(tensorrt_available(), reason="checks the behaviour without TensorRT")
def test_build_engine_and_backend_without_tensorrt(linear_meta):
    from rnnx.runtime.backends import BackendUnavailable
    from rnnx.runtime.tensorrt import TensorRTBackend, build_engine

    out, _ = linear_meta
    with pytest.raises(TensorRTNotInstalled, match="TensorRT is not installed"):
        build_engine(out)
    with pytest.raises(BackendUnavailable, match="TensorRT is not installed"):
        TensorRTBackend(out)


@pytest.mark.skipif(tensorrt_available(), reason="checks the behaviour without TensorRT")
def test_export_model_engine_without_tensorrt(tmp_path):
    """--engine is checked before exporting: one line, exit != 0, nothing exported."""
    from rnnx.export.cli import main

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["--out", str(out), "--no-check", "--engine"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["Error: --engine needs TensorRT, which is not installed: pip install tensorrt "
                     "(NVIDIA; needs a CUDA GPU); nothing was exported"]  # fmt: skip
    assert not out.exists()


def test_export_model_engine_option_errors(tmp_path, monkeypatch):
    """Bad --engine options are one-line errors before anything is exported (TensorRT faked present)."""
    import rnnx.runtime.tensorrt.engine_step as step
    from rnnx.export.cli import main

    monkeypatch.setattr(step, "tensorrt_available", lambda: True)
    out = tmp_path / "out"
    for options, message in (
        (["--target", "onnxruntime"], "Error: --engine needs --target tensorrt (got 'onnxruntime')"),
        (["--max-length", "0"], "Error: max_length must be an integer >= 1, got 0"),
        (
            ["--max-length", "16", "--max-context", "8"],
            "Error: max_context must be an integer >= max_length (16), got 8",
        ),
    ):
        result = CliRunner().invoke(main, ["--out", str(out), "--no-check", "--engine", *options])
        assert result.exit_code != 0 and result.output.strip().splitlines() == [message], result.output
        assert not out.exists()


# -- with TensorRT (skip here) --------------------------------------------------------------------


@pytest.mark.tensorrt
@needs_tensorrt
def test_build_engine_and_cache_hit(linear_meta, tmp_path, cuda_device):
    from rnnx.runtime.tensorrt import build_engine

    out, _ = linear_meta
    limits = ProfileLimits(max_batch=2, max_length=16)
    kwargs = dict(limits=limits, cache_dir=tmp_path, timing_cache=tmp_path / "timing.cache")
    first = build_engine(out, **kwargs)
    assert first.is_file() and (tmp_path / "timing.cache").is_file()
    stamp = first.stat().st_mtime_ns
    assert build_engine(out, **kwargs) == first and first.stat().st_mtime_ns == stamp


@pytest.mark.tensorrt
@needs_tensorrt
def test_backend_matches_onnxruntime(softmax_meta, tmp_path, cuda_device):
    import numpy as np

    from rnnx.runtime.backends.ort_backend import OrtBackend
    from rnnx.runtime.tensorrt import TensorRTBackend

    out, _ = softmax_meta
    trt_backend = TensorRTBackend(out, limits=ProfileLimits(max_batch=2, max_length=8, max_context=32),
                                  cache_dir=tmp_path)  # fmt: skip
    ort_backend = OrtBackend(out)
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.int64)
    mask = np.ones_like(ids)
    s_trt, s_ort = trt_backend.init_state(2), ort_backend.init_state(2)
    for step in range(6):
        feed = ids if step == 0 else ids[:, :1]
        inputs = {"input_ids": feed, "attention_mask": np.ones_like(feed)}
        a, s_trt = trt_backend.run(inputs, s_trt, donate=True)
        b, s_ort = ort_backend.run(inputs, s_ort)
        np.testing.assert_allclose(a["logits"], b["logits"], rtol=1e-3, atol=1e-3)
    assert s_trt.past_length == 4 + 5
    del mask


@pytest.mark.tensorrt
@needs_tensorrt
def test_cuda_graph_generation_matches_eager_and_onnxruntime(linear_meta, tmp_path, cuda_device):
    """The decode ring on a model with fixed-size state: generate donates, so after the prefill ping and
    pong are captured and replayed; the tokens equal an eager TensorRT backend's and ONNX Runtime's, and
    a batch change in between (an eager call) leaves the replays correct."""
    from rnnx.runtime import Session
    from rnnx.runtime.backends.ort_backend import OrtBackend
    from rnnx.runtime.tensorrt import TensorRTBackend

    out, _ = linear_meta
    limits = ProfileLimits(max_batch=4, max_length=32)
    graphs = Session(TensorRTBackend(out, limits=limits, cache_dir=tmp_path, cuda_graphs=True))
    eager = Session(TensorRTBackend(out, limits=limits, cache_dir=tmp_path, cuda_graphs=False))
    reference = Session(OrtBackend(out))
    prompts = [[3, 5, 7, 1, 0, 2, 4, 6, 8, 9, 10], [2, 2, 4, 4, 6, 6, 8, 8, 1, 1, 3, 10]]
    want = reference.generate_all(prompts, 16, temperature=0)
    assert graphs.generate_all(prompts, 16, temperature=0) == eager.generate_all(prompts, 16, temperature=0) == want
    captured = [c.graph for ring in graphs.backend._rings.values() for c in ring.contexts.values()]
    assert any(g is not None for g in captured), "the donated decode steps captured no CUDA graph"
    assert graphs.generate_all(prompts[:1], 8, temperature=0) == reference.generate_all(prompts[:1], 8, temperature=0)
    assert graphs.generate_all(prompts, 16, temperature=0) == want
