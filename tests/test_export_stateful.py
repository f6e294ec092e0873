"""``rnnx.export.export`` on modules of a user's own: a streaming encoder (dict state), a module with a
growing KV cache (tuple state), a stateless bidirectional tagger; the runtime's StatefulSession on them
(chunked == whole), ``export-model --module`` with weights, the torch backend and ``rnnx-parity`` from
the recorded factory, and the one-line errors that leave the output directory untouched.

References are the PyTorch modules themselves (fp32), run here directly, independent of the exporter's
own parity check; tolerance 1e-4 relative (the contract's fp32 tolerance).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch import nn

ort = pytest.importorskip("onnxruntime")

import rnnx.runtime as rt  # noqa: E402
from rnnx.export import ExportError, export  # noqa: E402
from rnnx.models import SRU, SRUpp  # noqa: E402
from rnnx.runtime.contract.artifact import read_metadata  # noqa: E402

TOL = 1e-4


def rel(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-12))


class StreamingEncoder(nn.Module):
    """features (B, T, 5) -> encoded (B, T, 16); state {"rnn": SRUState}."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(5, 16)
        self.rnn = SRU(16, 16, num_layers=2)

    def init_state(self, batch: int) -> dict:
        return {"rnn": self.rnn.init_state(batch)}

    def forward(self, features: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        h, s = self.rnn.forward_state(self.proj(features).transpose(0, 1), state["rnn"])
        return h.transpose(0, 1), {"rnn": s}


class CachedLM(nn.Module):
    """tokens (B, T) -> logits; SRU++ with softmax attention: the state holds a growing KV cache."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 12)
        self.body = SRUpp(12, 16, 8, num_layers=2, num_heads=2, attention="softmax")
        self.head = nn.Linear(16, 11)

    def init_state(self, batch: int) -> tuple:
        return (self.body.init_state(batch),)

    def forward(self, tokens: torch.Tensor, state: tuple) -> tuple[torch.Tensor, tuple]:
        h, s = self.body.forward_state(self.embed(tokens).transpose(0, 1), state[0])
        return self.head(h.transpose(0, 1)), (s,)


class Tagger(nn.Module):
    """Stateless: tokens (T, B) time-major -> tag logits (T, B, 3), bidirectional."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(9, 8)
        self.rnn = SRU(8, 6, num_layers=1, bidirectional=True)
        self.out = nn.Linear(12, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


@pytest.fixture(scope="module")
def encoder_export(tmp_path_factory: pytest.TempPathFactory):
    torch.manual_seed(0)
    model = StreamingEncoder().eval()
    out = tmp_path_factory.mktemp("encoder") / "export"
    result = export(model, (torch.randn(2, 7, 5),), out, target="onnxruntime")
    return model, result


def test_stateful_export_passes_parity_and_describes_itself(encoder_export) -> None:
    model, result = encoder_export
    assert result.parity.passed and len(result.parity.steps) == 33 and result.parity.worst_rel <= TOL
    meta = read_metadata(result.out_dir)
    assert meta["interface"] == "stateful" and "vocab_size" not in meta
    assert meta["model_type"].endswith("StreamingEncoder")
    assert meta["inputs"][0] == {"name": "features", "shape": ["batch", "length", 5], "dtype": "float32"}
    assert meta["outputs"][0] == {"name": "output", "shape": ["batch", "length", 16], "dtype": "float32"}
    assert [s["name"] for s in meta["state"]] == ["rnn.c"] and meta["state"][0]["shape"] == [2, "batch", 16]
    assert sorted(p.name for p in result.files) == sorted(
        ["model.onnx", "parity.json", "parity_reference.npz", "polygraphy_inputs.json", "polygraphy_outputs.json",
         "rnnx.json"]
    )  # fmt: skip


def test_streaming_chunks_equal_one_call_and_torch(encoder_export) -> None:
    model, result = encoder_export
    session = rt.load(result.out_dir, backend="onnxruntime")
    assert isinstance(session, rt.StatefulSession) and not isinstance(session, rt.Session)
    x = np.random.default_rng(1).standard_normal((3, 40, 5)).astype(np.float32)
    whole = session.run(features=x)["output"]
    session.reset()
    chunks = np.concatenate([session.run({"features": x[:, i : i + 7]})["output"] for i in range(0, 40, 7)], 1)
    assert np.abs(chunks - whole).max() <= 1e-5
    with torch.no_grad():
        want, _ = model(torch.from_numpy(x), model.init_state(3))
    assert rel(whole, want.numpy()) <= TOL
    fork = session.state.fork()
    a = session.run(features=x[:, :3])["output"]
    b = session.run(x[:, :3], state=fork)["output"]
    assert np.array_equal(a, b)


def test_session_input_errors_name_the_input(encoder_export) -> None:
    _, result = encoder_export
    session = rt.load(result.out_dir, backend="onnxruntime")
    with pytest.raises(rt.InputError, match=r"inputs: missing \['features'\], unknown \['x'\]"):
        session.run(x=np.zeros((1, 2, 5), np.float32))
    with pytest.raises(rt.InputError, match="features: axis 2 must be 5"):
        session.run(features=np.zeros((1, 2, 4), np.float32))
    with pytest.raises(rt.InputError, match="features: expected float32 values, got int64"):
        session.run(features=np.zeros((1, 2, 5), np.int64))
    session.run(features=np.zeros((2, 2, 5), np.float64))  # floats are cast
    with pytest.raises(rt.InputError, match="batch mismatch"):
        session.run(features=np.zeros((3, 1, 5), np.float32))


def test_growing_kv_cache_in_a_tuple_state(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = CachedLM().eval()
    tokens = torch.randint(0, 11, (2, 5))
    result = export(model, (tokens,), tmp_path / "out", target="tensorrt", chained_calls=8)
    assert result.parity.passed, result.parity.verdict()
    meta = read_metadata(result.out_dir)
    growing = [s for s in meta["state"] if s["grows"]]
    names = {f"0.attention.{i}.{part}" for i in (0, 1) for part in ("key", "value", "valid")}
    assert {s["name"] for s in growing} == names
    assert "past_length" in growing[0]["shape"] and {op["name"] for op in meta["ops"]} == {"SRUScan"}
    session = rt.load(result.out_dir, backend="onnxruntime")
    x = np.random.default_rng(2).integers(0, 11, (2, 9))
    whole = session.run(tokens=x)["output"]
    session.reset()
    parts = np.concatenate([session.run(tokens=x[:, :4])["output"], session.run(tokens=x[:, 4:])["output"]], 1)
    assert rel(parts, whole) <= 1e-5 and session.state.past_length == 9
    with torch.no_grad():
        want, _ = model(torch.from_numpy(x), model.init_state(2))
    assert rel(whole, want.numpy()) <= TOL


def test_stateless_time_major_tagger(tmp_path: Path) -> None:
    torch.manual_seed(2)
    model = Tagger().eval()
    tokens = torch.randint(0, 9, (6, 2))
    result = export(model, tokens, tmp_path / "out", target="onnxruntime",
                    dynamic_axes={"tokens": {0: "length", 1: "batch"}})  # fmt: skip
    assert result.parity.passed and read_metadata(result.out_dir)["state"] == []
    session = rt.load(result.out_dir, backend="onnxruntime")
    x = np.random.default_rng(3).integers(0, 9, (13, 4))
    got = session.run(tokens=x)["output"]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    assert got.shape == (13, 4, 3) and rel(got, want) <= TOL


FACTORY = """
import torch
from torch import nn
from rnnx.models import SRU


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = SRU(4, 8, num_layers=1)

    def init_state(self, batch):
        return [self.rnn.init_state(batch)]

    def forward(self, x, state):
        h, s = self.rnn.forward_state(x.transpose(0, 1), state[0])
        return h.transpose(0, 1), [s]


def build():
    torch.manual_seed(0)
    return Encoder(), (torch.randn(2, 5, 4),)
"""


def test_cli_module_with_weights_then_torch_backend_and_rnnx_parity(tmp_path: Path) -> None:
    from rnnx.export.cli import main
    from rnnx.runtime.parity.cli import main as parity_main

    factory = tmp_path / "my_model.py"
    factory.write_text(textwrap.dedent(FACTORY))
    torch.manual_seed(5)
    trained = {k: v + 0.1 * torch.randn_like(v) if v.is_floating_point() else v
               for k, v in SRU(4, 8, num_layers=1).state_dict().items()}  # fmt: skip
    weights = tmp_path / "weights.pt"
    torch.save({f"rnn.{k}": v for k, v in trained.items()}, weights)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["--module", f"{factory}:build", "--weights", str(weights), "--out", str(out),
                                       "--target", "onnxruntime", "--steps", "4"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output
    source = read_metadata(out)["source"]
    assert source["factory"] == f"{factory.resolve()}:build" and source["weights"] == str(weights.resolve())
    torch_session = rt.load(out, backend="torch")
    ort_session = rt.load(out, backend="onnxruntime")
    x = np.random.default_rng(4).standard_normal((2, 6, 4)).astype(np.float32)
    assert rel(ort_session.run(x=x)["output"], torch_session.run(x=x)["output"]) <= TOL
    assert torch_session.backend.model.rnn.rnn_lst[0].weight.allclose(trained["rnn_lst.0.weight"])
    check = CliRunner().invoke(parity_main, [str(out), "--reference", "torch", "--steps", "5"])
    assert check.exit_code == 0 and "PASS" in check.output, check.output
    saved = CliRunner().invoke(parity_main, [str(out), "--reference", "saved"])
    assert saved.exit_code == 0 and "PASS" in saved.output, saved.output
    bad = CliRunner().invoke(main, ["--module", f"{factory}:nothing", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "has no function 'nothing'" in bad.output and not (tmp_path / "x").exists()


def test_a_package_factory_is_found_from_any_directory_and_parity_falls_back_when_it_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--module package.module:function`` is imported from the working directory (as ``python -m``); the
    export records that folder, so ``rnnx-parity`` run elsewhere (a fresh process) imports the same code;
    when it cannot, ``--reference auto`` says so and replays the saved reference instead of failing."""
    import sys

    from rnnx.export.cli import main
    from rnnx.runtime.parity.cli import main as parity_main

    project = tmp_path / "project"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "models.py").write_text(textwrap.dedent(FACTORY))
    out = tmp_path / "out"
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "path", list(sys.path))
    result = CliRunner().invoke(main, ["--module", "mypkg.models:build", "--out", str(out), "--target",
                                       "onnxruntime", "--steps", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    for name in [m for m in sys.modules if m.split(".")[0] == "mypkg"]:
        monkeypatch.delitem(sys.modules, name)
    source = read_metadata(out)["source"]
    assert source["factory"] == "mypkg.models:build" and source["factory_root"] == str(project.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(project), str(project.resolve()))])
    check = subprocess.run(["rnnx-parity", str(out), "--steps", "3"], capture_output=True, text=True)
    assert check.returncode == 0 and "# reference: torch mypkg.models:build" in check.stdout, (
        check.stdout + check.stderr
    )
    (project / "mypkg").rename(project / "moved")
    fallback = CliRunner().invoke(parity_main, [str(out)])
    assert fallback.exit_code == 0, fallback.output
    assert "the PyTorch reference is not available here (factory 'mypkg.models:build': cannot import" in fallback.output
    assert "PASS: onnxruntime vs saved" in fallback.output
    forced = CliRunner().invoke(parity_main, [str(out), "--reference", "torch"])
    assert forced.exit_code != 0 and "cannot import 'mypkg.models'" in forced.output


class NoRnnx(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


class IntState(StreamingEncoder):
    def init_state(self, batch: int) -> dict:
        return {"rnn": self.rnn.init_state(batch), "count": 0}


class NoBatchAxis(StreamingEncoder):
    def init_state(self, batch: int) -> dict:
        return {"rnn": self.rnn.init_state(2)}


class TwoInputs(StreamingEncoder):
    def forward(self, features: torch.Tensor, mask: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        return super().forward(features * mask[..., None], state)


class DataBranch(StreamingEncoder):
    def forward(self, features: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        if bool(features.sum() > 0):  # a branch on the data: torch.export cannot trace it
            features = -features
        return super().forward(features, state)


@pytest.mark.parametrize(
    "module, inputs, match",
    [
        (NoRnnx(), (torch.randn(2, 3, 3),), "has no rnnx op"),
        (
            DataBranch(),
            (torch.randn(2, 3, 5),),
            r"^ONNX conversion failed: TorchExportError: Failed to export the model with torch\.export\. This is step "
            r"1/3 of exporting the model to ONNX\.; caused by \w+: Could not guard on data-dependent expression "
            r".*test_export_stateful\.py:\d+ in forward\)$",
        ),
        (IntState(), (torch.randn(2, 3, 5),), "must be tensors nested in .*int at 'count'"),
        (NoBatchAxis(), (torch.randn(2, 3, 5),), "no single batch axis"),
        (TwoInputs(), (torch.randn(2, 3, 5), torch.ones(3, 3)), r"'mask' axis 0 \('batch'\) has size 3"),
        (StreamingEncoder(), (torch.randn(2, 3, 4),), "failed on the example inputs"),
        (StreamingEncoder(), ([1, 2],), r"example_inputs\[0\] is a list"),
    ],
    ids=[
        "no-rnnx-op",
        "data-dependent-branch",
        "int-in-state",
        "no-batch-axis",
        "mismatched-inputs",
        "wrong-feature-size",
        "not-tensors",
    ],
)
def test_bad_modules_are_one_line_errors_and_leave_out_dir_alone(tmp_path: Path, module, inputs, match) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.onnx").write_bytes(b"a good earlier export")
    with pytest.raises(ExportError, match=match) as info:
        export(module, inputs, out, target="onnxruntime")
    assert "\n" not in str(info.value) and "\x1b" not in str(info.value)
    assert os.listdir(out) == ["model.onnx"] and (out / "model.onnx").read_bytes() == b"a good earlier export"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_io_binding_and_state_files_work_for_a_stateful_export(encoder_export, tmp_path: Path) -> None:
    _, result = encoder_export
    bound = rt.load(result.out_dir, backend="onnxruntime", io_binding=True)
    plain = rt.load(result.out_dir, backend="onnxruntime")
    x = np.random.default_rng(5).standard_normal((2, 9, 5)).astype(np.float32)
    assert np.array_equal(bound.run(features=x[:, :4])["output"], plain.run(features=x[:, :4])["output"])
    path = bound.state.save(tmp_path / "state.npz")
    plain.load_state(path)
    assert np.array_equal(bound.run(features=x[:, 4:])["output"], plain.run(features=x[:, 4:])["output"])
    assert bound.state.past_length == plain.state.past_length == 9


def test_fp16_stateful_export(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = StreamingEncoder().eval()
    result = export(model, (torch.randn(2, 7, 5),), tmp_path / "out", target="tensorrt", precision="fp16")
    meta = read_metadata(result.out_dir)
    assert result.parity.passed and result.parity.tolerance == 1e-2 and result.parity.worst_rel > 1e-6
    assert meta["inputs"][0]["dtype"] == "float16" and meta["outputs"][0]["dtype"] == "float16"
    assert meta["state"][0]["dtype"] == "float32"
    session = rt.load(result.out_dir, backend="onnxruntime")
    x = np.random.default_rng(6).standard_normal((2, 11, 5)).astype(np.float32)  # fp32 values are cast
    with torch.no_grad():
        want, _ = model(torch.from_numpy(x), model.init_state(2))
    assert rel(session.run(features=x)["output"], want.numpy()) <= 1e-2


FP16_TAGGER = """
import json, sys
import numpy as np, torch
from torch import nn
import rnnx.runtime as rt
from rnnx.export import export
from rnnx.models import SRU


class Tagger(nn.Module):  # batch-first: the SRU's output is transposed into an fp16 MatMul
    def __init__(self):
        super().__init__()
        self.rnn, self.head = SRU(8, 8, num_layers=1), nn.Linear(8, 5)

    def forward(self, x):
        h, _ = self.rnn(x.transpose(0, 1))
        return self.head(h.transpose(0, 1))


torch.manual_seed(0)
export(Tagger().eval(), (torch.randn(2, 7, 8),), sys.argv[1], target="onnxruntime", precision="fp16")
out = rt.load(sys.argv[1]).run(x=np.random.default_rng(0).standard_normal((3, 5, 8)).astype(np.float32))
print(json.dumps(list(out["output"].shape)))
"""


def test_an_fp16_export_that_crashed_onnx_runtime_opens_and_runs(tmp_path: Path) -> None:
    """ONNX Runtime 1.32 crashes (SIGSEGV) creating a CPU session for this fp16 graph with its default
    optimizations; the export records the session config that avoids it (artifact.ORT_SESSION_CONFIG) and the
    runtime applies it: the export's parity check and a later load both run. In a subprocess: a regression
    would kill the process, not the test run."""
    from rnnx.runtime.contract.artifact import ORT_SESSION_CONFIG

    out = tmp_path / "tagger"
    result = subprocess.run([sys.executable, "-c", FP16_TAGGER, str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.strip().splitlines()[-1] == "[3, 5, 5]"
    assert read_metadata(out)["onnxruntime"] == {"session_config": ORT_SESSION_CONFIG}


def test_stock_polygraphy_replays_a_stateful_export(encoder_export) -> None:
    import shlex
    import subprocess

    from test_export_cli import polygraphy_executable

    _, result = encoder_export
    command = result.polygraphy_command
    assert shlex.join(command).startswith(f"polygraphy run {result.out_dir / 'model.onnx'} --onnxrt")
    proc = subprocess.run([polygraphy_executable(), *command[1:]], capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PASSED" in log and "Passed: 9/9 iterations" in log, log[-3000:]


def test_an_unconvertible_layer_is_a_one_line_error(tmp_path: Path) -> None:
    builders = pytest.importorskip(
        "fast_transformers.builders",
        reason="pytorch-fast-transformers 0.4.0 is not installed: run bash scripts/setup.sh",
    )
    encoder = builders.TransformerEncoderBuilder.from_kwargs(
        n_layers=1, n_heads=2, query_dimensions=4, value_dimensions=4, feed_forward_dimensions=16,
        attention_type="full",
    ).get()  # fmt: skip

    class Wrapped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.encoder(x)

    out = tmp_path / "out"
    with pytest.raises(ExportError, match=r"cannot convert the module: encoder: .*FullAttention.*no fixed-size"):
        export(Wrapped(), (torch.randn(2, 3, 8),), out, target="onnxruntime")
    assert not out.exists() and os.listdir(tmp_path) == []


class LearnedStart(StreamingEncoder):
    def init_state(self, batch: int) -> dict:
        state = super().init_state(batch)
        state["rnn"].c.fill_(1.0)
        return state


class Pair(NamedTuple):
    rnn: Any
    frames: torch.Tensor


class FrameCache(nn.Module):
    """A named-tuple state with a cache of the last frame kept in the module's own dtype (fp16 in fp16)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(5, 8)
        self.rnn = SRU(16, 8, num_layers=1)

    def init_state(self, batch: int) -> Pair:
        return Pair(self.rnn.init_state(batch), torch.zeros(batch, 1, 5, dtype=self.proj.weight.dtype))

    def forward(self, features: torch.Tensor, state: Pair) -> tuple[torch.Tensor, Pair]:
        previous = torch.cat([state.frames, features[:, :-1]], dim=1)  # each frame with the one before it
        x = torch.cat([self.proj(features), self.proj(previous)], dim=-1)
        h, s = self.rnn.forward_state(x.transpose(0, 1), state.rnn)
        return h.transpose(0, 1), Pair(s, features[:, -1:])


class StepCell(nn.Module):
    """One step per call: x (B, 6) float -> h (B, 8); its axis 1 is features, not length."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = SRU(6, 8, num_layers=1)

    def init_state(self, batch: int) -> list:
        return [self.rnn.init_state(batch)]

    def forward(self, x: torch.Tensor, state: list) -> tuple[torch.Tensor, list]:
        h, s = self.rnn.forward_state(x[None], state[0])
        return h[0], [s]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_named_tuple_state_kept_in_the_module_dtype(tmp_path: Path, precision: str) -> None:
    torch.manual_seed(3)
    model = FrameCache().eval()
    result = export(model, (torch.randn(2, 6, 5),), tmp_path / "out", target="onnxruntime", precision=precision)
    assert result.parity.passed, result.parity.verdict()
    assert [s["name"] for s in read_metadata(result.out_dir)["state"]] == ["rnn.c", "frames"]
    session = rt.load(result.out_dir, backend="onnxruntime")
    x = np.random.default_rng(7).standard_normal((2, 12, 5)).astype(np.float32)
    whole = session.run(features=x)["output"]
    session.reset()
    parts = np.concatenate([session.run(features=x[:, i : i + 4])["output"] for i in range(0, 12, 4)], 1)
    assert rel(parts, whole) <= (1e-5 if precision == "fp32" else 1e-2)


def test_root_sru_and_single_step_inputs(tmp_path: Path) -> None:
    torch.manual_seed(4)
    sru = SRU(4, 6, num_layers=2).eval()
    result = export(sru, (torch.randn(5, 2, 4),), tmp_path / "sru", target="onnxruntime",
                    dynamic_axes={"input": {0: "length", 1: "batch"}})  # fmt: skip
    meta = read_metadata(result.out_dir)
    assert result.parity.passed and [s["name"] for s in meta["state"]] == ["state"]
    assert [t["name"] for t in meta["outputs"]] == ["output", "present.state"]
    cell = StepCell().eval()
    result = export(cell, (torch.randn(3, 6),), tmp_path / "cell", target="onnxruntime")
    meta = read_metadata(result.out_dir)
    assert result.parity.passed and meta["inputs"][0]["shape"] == ["batch", 6]  # axis 1 stays fixed
    session = rt.load(result.out_dir, backend="onnxruntime")
    xs = np.random.default_rng(8).standard_normal((5, 3, 6)).astype(np.float32)
    got = np.stack([session.run(x=x)["output"] for x in xs])
    with torch.no_grad():
        want, _ = cell.rnn(torch.from_numpy(xs))
    assert rel(got, want.numpy()) <= TOL


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"output_names": ["present.x"]}, "reserved state prefixes"),
        ({"config": {"f": object()}}, "config must be JSON-serialisable"),
        ({"init_state": lambda batch, device: None}, r"init_state\(1\) failed: TypeError"),
    ],
    ids=["reserved-output-name", "config-not-json", "init-state-raises"],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(ExportError, match=match) as info:
        export(StreamingEncoder(), (torch.randn(2, 3, 5),), tmp_path / "out", **kwargs)
    assert "\n" not in str(info.value) and os.listdir(tmp_path) == []


def test_a_non_zero_initial_state_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="'rnn.c': init_state gives non-zero values"):
        export(LearnedStart(), (torch.randn(2, 3, 5),), tmp_path / "out")
    assert os.listdir(tmp_path) == []
