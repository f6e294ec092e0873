"""Scripted rnnx modules in a C++ program without Python (issue 16): ``librnnx_torch_ops`` and the example
``docs/examples/libtorch/run_scripted.cpp``, built here with g++ against the torch wheel's libtorch.

* The library, loaded into a Python process that does not import rnnx, defines the rnnx ops with the Python
  registrations' schemas.
* A bidirectional, rescaled two-layer ``rnnx.models.SRU`` and a module calling
  ``torch.ops.rnnx.causal_linear_attention`` (heads packed, a pad mask, then a time-major continuation of its
  state) are scripted and saved in Python; the C++ program loads each, runs it on inputs it builds itself
  (``sin(0.37 j + i)``) and prints the outputs, which must match eager PyTorch on the same inputs to 1e-5 (fp32;
  the attention's C++ kernel is the recurrent form, the eager op the chunked one).
* Each demo language model, scripted (its flat-state signature, :mod:`rnnx.models.lm`) and saved, decodes
  greedily in the C++ program (``--generate``: ``init_state``, a prompt, then steps carrying the state) to the
  tokens eager PyTorch decodes.
* The program refuses a module whose ops are not registered with a clear error (the library not linked),
  and a call with a wrongly sized state with the op's one-line error (no out-of-bounds read).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from rnnx.models import SRU, load_checkpoint
from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.models.ops import libtorch
from rnnx.models.ops.causal_linear_attention import causal_linear_attention

pytestmark = [
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found: cannot build the libtorch example"),
    pytest.mark.filterwarnings("ignore:`torch.jit.(script|save|load)` is deprecated:DeprecationWarning"),
]
EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "libtorch" / "run_scripted.cpp"


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The op library and the example, linked against it and against nothing rnnx (for the error case)."""
    out = tmp_path_factory.mktemp("libtorch")
    library = libtorch.build()
    obj = out / "run_scripted.o"  # compiled once (the slow part), linked twice
    result = subprocess.run(["g++", *libtorch.compile_flags(), "-O1", "-c", str(EXAMPLE), "-o", str(obj)],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    built = {}
    for name, extra in (("linked", [f"-L{library.parent}", "-Wl,--no-as-needed", "-lrnnx_torch_ops",
                                    f"-Wl,-rpath,{library.parent}"]), ("bare", [])):  # fmt: skip
        exe = out / f"run_scripted_{name}"
        result = subprocess.run(["g++", str(obj), "-o", str(exe), *extra, *libtorch.link_flags()],
                                capture_output=True, text=True)  # fmt: skip
        assert result.returncode == 0, result.stderr[-4000:]
        built[name] = exe
    return built


def example_inputs(*shapes: tuple[int, ...]) -> list[torch.Tensor]:
    """The inputs the C++ program builds: input i is sin(0.37 j + i), j the row-major element index."""
    return [
        (torch.arange(torch.Size(s).numel(), dtype=torch.float32) * 0.37 + i).sin().reshape(s)
        for i, s in enumerate(shapes)
    ]


def run(exe: Path, module: Path, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    """The program's printed outputs as tensors."""
    args = [str(exe), str(module), *("x".join(map(str, s)) for s in shapes)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.splitlines()
    outputs = []
    for header, values in zip(lines[::2], lines[1::2]):
        dims = [int(d) for d in header.split()[2:]]
        outputs.append(torch.tensor([float(v) for v in values.split()], dtype=torch.float64).reshape(dims))
    return outputs


ATTENTION_HEADS = 3


class Attention(torch.nn.Module):
    """A scripted caller of the attention op (heads packed, 3 heads): the first 3 steps batch-first with a pad
    at step 1 of row 0, then their continuation time-major."""

    def __init__(self) -> None:
        super().__init__()
        self.num_heads = ATTENTION_HEADS

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pad = torch.zeros(q.size(0), 3, dtype=torch.bool)
        pad[0, 1] = True
        out, S, z = torch.ops.rnnx.causal_linear_attention(
            q[:, :3], k[:, :3], v[:, :3], None, None, pad, 1e-6, self.num_heads, 0
        )
        rest, S, z = torch.ops.rnnx.causal_linear_attention(
            q[:, 3:].transpose(0, 1), k[:, 3:].transpose(0, 1), v[:, 3:].transpose(0, 1), S, z, None, 1e-6,
            self.num_heads, 1,
        )  # fmt: skip
        return torch.cat([out, rest.transpose(0, 1)], dim=1), S


SCHEMAS_CHILD = """
import sys, torch
torch.ops.load_library(sys.argv[1])
for name in sys.argv[2:]:
    print(name, torch.ops.rnnx.__getattr__(name).default._schema)
"""


def test_the_library_registers_the_python_schemas(programs):
    """The built library, loaded into a Python process that never imports rnnx, defines each op with the
    schema the Python registration has."""
    want = libtorch.schemas()
    result = subprocess.run([sys.executable, "-c", SCHEMAS_CHILD, str(libtorch.library_path()), *want],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    got = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert got == want
    assert programs["linked"].is_file()


class BadState(torch.nn.Module):
    """Calls the scan with a c0 of the wrong batch size: the C++ kernel must refuse it, not read past it."""

    def forward(self, U: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = 4
        w, c0 = torch.zeros(2 * d), torch.zeros(U.size(1) + 1, d)
        return torch.ops.rnnx.sru_scan(U, None, w, w, c0, None, d, 1, 4, True, False, 1.0)


def test_bad_inputs_get_a_clear_error_in_cpp(programs, tmp_path):
    torch.jit.script(BadState()).save(str(tmp_path / "bad.pt"))
    result = subprocess.run([str(programs["linked"]), str(tmp_path / "bad.pt"), "3x2x16"], capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1
    assert "rnnx::sru_scan: c0 has shape [3, 4] but expected (B=2, D*d=4)" in result.stderr


def test_a_scripted_sru_runs_in_cpp_as_in_eager_pytorch(programs, tmp_path):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = SRU(12, 16, num_layers=2, bidirectional=True, rescale=True, highway_bias=-1.0).eval()
    scripted = torch.jit.script(model)
    assert "rnnx::sru_scan" in str(scripted.inlined_graph)
    scripted.save(str(tmp_path / "sru.pt"))
    (x,) = example_inputs((5, 2, 12))
    with torch.no_grad():
        h, c = model(x)
    got = run(programs["linked"], tmp_path / "sru.pt", (5, 2, 12))
    assert [t.shape for t in got] == [h.shape, c.shape]
    for g, want in zip(got, (h, c)):
        torch.testing.assert_close(g, want.double(), atol=1e-5, rtol=1e-5)


def test_a_scripted_attention_runs_in_cpp_as_in_eager_pytorch(programs, tmp_path):
    scripted = torch.jit.script(Attention())
    scripted.save(str(tmp_path / "attention.pt"))
    shapes = (2, 7, 12), (2, 7, 12), (2, 7, 15)  # E = 4, M = 5
    q, k, v = example_inputs(*shapes)
    pad = torch.zeros(2, 7, dtype=torch.bool)
    pad[0, 1] = True
    out, (S, _) = causal_linear_attention(q, k, v, num_heads=ATTENTION_HEADS, pad_mask=pad)
    got = run(programs["linked"], tmp_path / "attention.pt", *shapes)
    torch.testing.assert_close(got[0], out.double(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], S.double(), atol=1e-5, rtol=1e-5)


def test_without_the_library_the_program_says_what_is_missing(programs, tmp_path):
    torch.jit.script(Attention()).save(str(tmp_path / "attention.pt"))
    result = subprocess.run([str(programs["bare"]), str(tmp_path / "attention.pt"), "1x4x6", "1x4x6", "1x4x6"],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1
    assert "rnnx::causal_linear_attention" in result.stderr


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_a_scripted_language_model_generates_in_cpp_as_in_eager_pytorch(programs, tmp_path, name):
    model = load_checkpoint(demo_checkpoint_path(name))[0].eval()
    torch.jit.script(model).save(str(tmp_path / "lm.pt"))
    prompt, count = [1, 2, 3, 4, 10], 8
    want, tokens, state = [], torch.tensor([prompt]), None
    with torch.no_grad():
        for _ in range(count):
            logits, state = model(tokens, state)
            tokens = logits[:, -1:].argmax(-1)
            want.append(int(tokens))
    args = [str(programs["linked"]), str(tmp_path / "lm.pt"), "--generate", str(count), ",".join(map(str, prompt))]
    result = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.split() == ["tokens", *map(str, want)]
