"""rnnx's ONNX Runtime custom-op library (``rnnx.runtime.ortops``): native SRUScan on the CPU EP.

* Every SRUScan variant the exporter writes (k 3 / 4, skip term, tanh, bidirectional, pad mask, and the
  tensorrt target's fixed layout with a 1-element dummy x and an all-false mask) in a one-node graph that
  has no function body, so only the library can run it, against the naive time loop
  (``sru_scan_naive``), fp32, tolerance 1e-5 relative to the magnitude.
* The SRU++ demo exports (both targets) give identical greedy tokens with and without the library, and
  the ORT profiler shows the SRUScan node run as one kernel (no ``Scan`` node) only with it.
* Version gate and errors: one line each.

Needs the library that ``scripts/setup.sh`` builds (``python3 -m rnnx.runtime.ortops``); skips and says so
without it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

pytest.importorskip("onnxruntime")

import onnxruntime as ort

import rnnx.runtime as rt
from rnnx.models.checkpoint import demo_checkpoint_path
from rnnx.models.ops.spec import SRU_SCAN
from rnnx.models.ops.sru.naive import sru_scan_naive
from rnnx.runtime import ortops
from rnnx.runtime.backends.base import BackendUnavailable
from rnnx.runtime.backends.ort_backend import OrtBackend

needs_library = pytest.mark.skipif(
    ortops.find_library() is None,
    reason=f"{ortops.library_path()} not built (or onnxruntime < 1.{ortops.ORT_API_VERSION}): run scripts/setup.sh",
)
TOLERANCE = 1e-5
#: (k, skip, tanh, directions, mask, tensorrt layout)
VARIANTS = [
    (k, skip, tanh, D, mask, False) for k in (3, 4) for skip in (0, 1) for tanh in (0, 1) for D in (1, 2)
    for mask in (False, True)
] + [(3, 1, 0, 1, False, True), (4, 0, 1, 2, False, True)]  # fmt: skip


def one_node_model(k: int, skip: int, tanh: int, D: int, d: int, with_x: bool, with_mask: bool) -> bytes:
    inputs = ["U", "x" if with_x else "", "weight_c", "bias", "c0", "mask_pad" if with_mask else ""]
    node = helper.make_node(
        SRU_SCAN.onnx_name, inputs, ["h", "c_last"], domain="rnnx", hidden_size=d, num_directions=D,
        num_matrices=k, has_skip_term=skip, use_tanh=tanh, scale_x=0.5,
    )  # fmt: skip
    f32 = TensorProto.FLOAT
    values = [helper.make_tensor_value_info("U", f32, ["L", "B", D * d * k])]
    if with_x:
        values.append(helper.make_tensor_value_info("x", f32, None))
    values += [
        helper.make_tensor_value_info("weight_c", f32, [2 * D * d]),
        helper.make_tensor_value_info("bias", f32, [2 * D * d]),
        helper.make_tensor_value_info("c0", f32, ["B", D * d]),
    ]
    if with_mask:
        values.append(helper.make_tensor_value_info("mask_pad", TensorProto.BOOL, ["L", "B"]))
    outputs = [helper.make_tensor_value_info("h", f32, None), helper.make_tensor_value_info("c_last", f32, None)]
    graph = helper.make_graph([node], "sru", values, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("rnnx", 1)])
    return model.SerializeToString()


def native_session(model: bytes, profile: bool = False) -> ort.InferenceSession:
    options = ort.SessionOptions()
    ortops.register(options)
    options.enable_profiling = profile
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


@needs_library
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "k{}-skip{}-tanh{}-D{}-mask{}-trt{}".format(*v))
def test_native_sru_scan_matches_the_naive_loop(variant):
    k, skip, tanh, D, mask, trt_layout = variant
    L, B, d = 9, 3, 40  # d > 32: more than one block of hidden units per row
    g = torch.Generator().manual_seed(sum(map(int, variant)) + 7 * D)
    U = torch.randn(L, B, D * d * k, generator=g)
    x = torch.randn(L, B, D * d, generator=g)
    w, b = torch.randn(2 * D * d, generator=g) * 0.5, torch.randn(2 * D * d, generator=g) * 0.5
    c0 = torch.randn(B, D * d, generator=g)
    pad = torch.zeros(L, B, dtype=torch.bool)
    if mask:
        pad[6:, 0] = True
        pad[8:, 2] = True
    reads_x = bool(skip) and k == 3
    h_ref, c_ref = sru_scan_naive(
        U, x if reads_x else None, w, b, c0, pad if mask else None, hidden_size=d, num_directions=D,
        num_matrices=k, has_skip_term=bool(skip), use_tanh=bool(tanh), scale_x=0.5,
    )  # fmt: skip
    feeds = {"U": U.numpy(), "weight_c": w.numpy(), "bias": b.numpy(), "c0": c0.numpy()}
    with_x, with_mask = reads_x or trt_layout, mask or trt_layout
    if with_x:
        feeds["x"] = x.numpy() if reads_x else np.zeros(1, np.float32)  # the tensorrt layout's dummy x
    if with_mask:
        feeds["mask_pad"] = pad.numpy()
    h, c_last = native_session(one_node_model(k, skip, tanh, D, d, with_x, with_mask)).run(None, feeds)
    for got, want in ((h, h_ref.numpy()), (c_last, c_ref.numpy())):
        assert np.max(np.abs(got - want)) <= TOLERANCE * max(1.0, float(np.max(np.abs(want))))


@needs_library
@pytest.mark.parametrize("target", ["onnxruntime", "tensorrt"])
def test_demo_export_same_tokens_with_and_without_the_library(target, demo_exports):
    export = demo_exports[("srupp_linear_copy", target)]
    native = rt.Session(OrtBackend(export, native_ops=True))
    bodies = rt.Session(OrtBackend(export, native_ops=False))
    assert "native rnnx ops" in native.backend.describe() and "native" not in bodies.backend.describe()
    assert rt.load(export, backend="onnxruntime").backend.native_ops  # on by default on the CPU
    prompts = [[1, 2, 3, 4, 5, 6, 7, 10], [9, 8, 7, 10], [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 10]]
    assert native.generate_all(prompts, 24, temperature=0) == bodies.generate_all(prompts, 24, temperature=0)
    assert demo_checkpoint_path("srupp_linear_copy").is_dir()


@needs_library
def test_the_profiler_shows_the_native_kernel(demo_exports, tmp_path):
    model = str(demo_exports[("srupp_linear_copy", "onnxruntime")] / "model.onnx")
    ops = {}
    for native in (True, False):
        options = ort.SessionOptions()
        if native:
            ortops.register(options)
        options.enable_profiling = True
        options.profile_file_prefix = str(tmp_path / f"native-{native}")
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in session.get_inputs():
            shape = [2 if "batch" in str(s) else 5 if isinstance(s, str) else s for s in i.shape]
            feeds[i.name] = np.ones(shape, np.int64) if "int64" in i.type else np.zeros(shape, np.float32)
        session.run(None, feeds)
        events = json.load(open(session.end_profiling()))
        ops[native] = {e["args"].get("op_name") for e in events if e.get("cat") == "Node"}
    assert "SRUScan" in ops[True] and "Scan" not in ops[True]
    assert "Scan" in ops[False] and "SRUScan" not in ops[False]


def test_version_gate_and_errors(tmp_path, monkeypatch, demo_exports):
    assert ortops.onnxruntime_supported(f"1.{ortops.ORT_API_VERSION}.0")
    assert not ortops.onnxruntime_supported(f"1.{ortops.ORT_API_VERSION - 1}.2")
    monkeypatch.setenv("RNNX_ORT_OPS", str(tmp_path / "missing.so"))
    assert ortops.find_library() is None
    export = demo_exports[("srupp_linear_copy", "onnxruntime")]
    assert not OrtBackend(export).native_ops  # default: silently the function bodies
    with pytest.raises(BackendUnavailable, match="not built; run: python3 -m rnnx.runtime.ortops"):
        OrtBackend(export, native_ops=True)
    with pytest.raises(rt.InputError, match="native_ops: only the onnxruntime backend"):
        rt.load(demo_checkpoint_path("srupp_linear_copy"), native_ops=True)
    monkeypatch.setenv("RNNX_ORT_HEADERS", str(tmp_path / "none"))
    with pytest.raises(ortops.OrtOpsError, match="headers not found"):
        ortops.build(out=tmp_path / "lib.so", force=True)
    assert onnx.__version__  # the one-node graphs above are built with onnx's helper


ASAN_CHILD = r"""
import sys
import numpy as np
import onnxruntime as ort
import torch
sys.path.insert(0, sys.argv[2])
import test_ort_native_ops as t
from rnnx.models.ops.sru.naive import sru_scan_naive

for variant in t.VARIANTS:
    k, skip, tanh, D, mask, trt = variant
    L, B, d = 9, 3, 40
    g = torch.Generator().manual_seed(3)
    U, x = torch.randn(L, B, D * d * k, generator=g), torch.randn(L, B, D * d, generator=g)
    w, b = torch.randn(2 * D * d, generator=g) * 0.5, torch.randn(2 * D * d, generator=g) * 0.5
    c0, pad = torch.randn(B, D * d, generator=g), torch.zeros(L, B, dtype=torch.bool)
    if mask:
        pad[6:, 0] = True
    reads_x = bool(skip) and k == 3
    h_ref, c_ref = sru_scan_naive(U, x if reads_x else None, w, b, c0, pad if mask else None, hidden_size=d,
                                  num_directions=D, num_matrices=k, has_skip_term=bool(skip),
                                  use_tanh=bool(tanh), scale_x=0.5)
    feeds = {"U": U.numpy(), "weight_c": w.numpy(), "bias": b.numpy(), "c0": c0.numpy()}
    if reads_x or trt:
        feeds["x"] = x.numpy() if reads_x else np.zeros(1, np.float32)
    if mask or trt:
        feeds["mask_pad"] = pad.numpy()
    options = ort.SessionOptions()
    options.register_custom_ops_library(sys.argv[1])
    model = t.one_node_model(k, skip, tanh, D, d, reads_x or trt, mask or trt)
    h, c = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert np.max(np.abs(h - h_ref.numpy())) <= t.TOLERANCE * max(1.0, float(np.abs(h_ref).max())), variant
    assert np.max(np.abs(c - c_ref.numpy())) <= t.TOLERANCE * max(1.0, float(np.abs(c_ref).max())), variant
print("variants", len(t.VARIANTS))
"""


@needs_library
@pytest.mark.slow
def test_every_variant_under_address_sanitizer(tmp_path):
    """The same parity, with the library built with -fsanitize=address, in a process that loads libasan
    first: an out-of-bounds access in the kernel or the op fails the run."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not found: cannot build the AddressSanitizer library")
    libasan = subprocess.run([cxx, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not Path(libasan).is_file():
        pytest.skip(f"libasan not found ({libasan!r})")
    library = ortops.build(out=tmp_path / "librnnx_ort_ops_asan.so", sanitize="address", force=True)
    env = {**os.environ, "LD_PRELOAD": libasan, "ASAN_OPTIONS": "detect_leaks=0"}
    tests_dir = str(Path(__file__).resolve().parent)
    result = subprocess.run([sys.executable, "-c", ASAN_CHILD, str(library), tests_dir], capture_output=True,
                            text=True, env=env, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert f"variants {len(VARIANTS)}" in result.stdout
