"""The artifact contract (rnnx.runtime.contract.artifact): one definition of every name, the runtime free of the
exporter, metadata validation with one-line errors, state specs, and the saved parity reference."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from rnnx.runtime.contract import artifact
from rnnx.runtime.contract.artifact import MetadataError, StateSpec, read_metadata, validate_metadata, write_metadata
from rnnx.runtime.parity import Call, load_reference, save_reference

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "export", "runtime", "plugins")
#: The contract's names: each must be spelled only in runtime/contract/artifact.py.
CONTRACT_NAMES = {
    artifact.INPUT_IDS, artifact.ATTENTION_MASK, artifact.LOGITS, artifact.PAST_PREFIX, artifact.PRESENT_PREFIX,
    *artifact.AXES, artifact.METADATA_FILE, artifact.MODEL_FILE, artifact.PARITY_FILE, artifact.PARITY_REFERENCE_FILE,
    artifact.POLYGRAPHY_INPUTS, artifact.POLYGRAPHY_OUTPUTS, artifact.FORMAT,
}  # fmt: skip
#: Modules under runtime/ allowed to import torch: the torch backend (it runs the PyTorch model), and
#: the TensorRT backend / engine builder, which keep device buffers, streams and CUDA graphs in torch
#: and read the GPU's identity through it (both only on a GPU machine, imported inside functions).
TORCH_ALLOWED = {
    "runtime/backends/torch_backend.py",
    "runtime/tensorrt/backend.py",
    "runtime/tensorrt/builder.py",
}


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py"))


def _imports(path: Path) -> list[str]:
    """Absolute module names imported by ``path`` (relative imports resolved against the rnnx layout)."""
    rel = path.relative_to(REPO)
    package = ["rnnx", *rel.parts[:-1]]  # each top-level folder is rnnx.<folder>
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                out.append(".".join([*base, *([node.module] if node.module else [])]))
            else:
                out.append(node.module or "")
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            docs.add(id(body[0].value))
    return docs


def test_runtime_never_imports_the_exporter() -> None:
    offenders = [
        f"{p.relative_to(REPO)}: {m}"
        for p in _python_files("runtime")
        for m in _imports(p)
        if m.startswith("rnnx.export")
    ]
    assert not offenders, offenders


def test_runtime_imports_torch_and_onnx_only_where_allowed() -> None:
    offenders = []
    for path in _python_files("runtime"):
        rel = str(path.relative_to(REPO))
        for module in _imports(path):
            top = module.split(".")[0]
            if top in ("onnx", "onnxscript") or (top == "torch" and rel not in TORCH_ALLOWED):
                offenders.append(f"{rel}: {module}")
            if module.startswith("rnnx.models") and rel != "runtime/backends/torch_backend.py":
                offenders.append(f"{rel}: {module}")
    assert not offenders, offenders


def test_the_contract_needs_only_numpy_and_the_standard_library() -> None:
    """runtime/contract/ (artifact format, op records, target / precision records) imports no other rnnx room
    and nothing outside the standard library but numpy, so every room and the torch-free install can use it."""
    files = _python_files("runtime/contract")
    assert {p.name for p in files} >= {"artifact.py", "ops.py", "targets.py"}
    imported = {m for p in files for m in _imports(p)} - {"__future__"}
    outside = {m for m in imported if not m.startswith("rnnx.runtime.contract")}
    assert {m.split(".")[0] for m in outside if m.split(".")[0] not in sys.stdlib_module_names} == {"numpy"}


def test_every_contract_name_is_spelled_once() -> None:
    """Axis, tensor and file names appear as string literals only in runtime/contract/artifact.py. Keys of reports
    and file headers (dict displays and ``.get("key")``), which only share the spelling, are not counted."""
    found = []
    for path in _python_files(*PACKAGES):
        if path == REPO / "runtime" / "contract" / "artifact.py":
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree) | {id(k) for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys if k}
        skip |= {
            id(n.args[0])
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in CONTRACT_NAMES and id(node) not in skip:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not found, found


# -- metadata ----------------------------------------------------------------------------------------


@pytest.fixture()
def export_dir(demo_exports, tmp_path: Path) -> Path:
    out = tmp_path / "export"
    shutil.copytree(demo_exports[("linear_transformer_copy", "onnxruntime")], out)
    return out


def _edit(directory: Path, change) -> None:
    path = directory / artifact.METADATA_FILE
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda m: m.pop("state"), 'field "state" missing, expected an array'),
        (lambda m: m.update(format_version=3), "unsupported format_version 3"),
        (lambda m: m.update(vocab_size=True), 'field "vocab_size" is true, expected an integer >= 1'),
        (lambda m: m.update(interface="seq2seq"), 'unsupported interface "seq2seq"'),
        (lambda m: m["state"][0].update(input="past.x"), 'expected "past_key_values.layers.0.S"'),
        (lambda m: m["state"][0].update(shape=[2, 64, 64]), 'expected a shape with a "batch" axis'),
        (lambda m: m["state"][0].pop("dtype"), 'field "state[0].dtype" missing'),
        (lambda m: m["inputs"].pop(2), '"past_key_values.layers.0.S" is not a graph input'),
        (lambda m: m["outputs"].append(m["outputs"][0]), "the name of an earlier input or output"),
    ],
)  # fmt: skip
def test_bad_metadata_is_one_line_naming_the_file(export_dir: Path, change, message: str) -> None:
    """The contract's refusals (tests/test_contract_schema.py runs its fixtures through every reader)."""
    _edit(export_dir, change)
    with pytest.raises(MetadataError, match=re.escape(message)) as info:
        read_metadata(export_dir)
    assert str(export_dir / artifact.METADATA_FILE) in str(info.value) and "\n" not in str(info.value)
    assert info.value.reason in artifact.REFUSALS


def test_write_metadata_validates_first_and_never_leaves_a_partial_file(export_dir: Path) -> None:
    path = export_dir / artifact.METADATA_FILE
    before = path.read_bytes()
    meta = json.loads(before)
    with pytest.raises(MetadataError, match='field "ops" is null, expected an array'):
        write_metadata(export_dir, {**meta, "ops": None})
    assert path.read_bytes() == before
    assert sorted(p.name for p in export_dir.iterdir() if p.name.startswith(".")) == []  # no temporary left
    write_metadata(export_dir, meta)
    assert json.loads(path.read_text()) == meta
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # the mode open() gives, not mkstemp's 0600


def test_state_spec_round_trip_and_shapes() -> None:
    spec = StateSpec("attention.1.key", (artifact.BATCH, 2, artifact.PAST_LENGTH, 8), "float32", grows=True)
    assert spec.input == "past_key_values.attention.1.key" and spec.output == "present.attention.1.key"
    assert StateSpec.from_dict(spec.to_dict()) == spec
    assert spec.batch_axis == 0 and spec.grow_axis == 2
    assert spec.concrete_shape(3, 5) == (3, 2, 5, 8)
    assert spec.output_shape == ("batch", 2, "past_length + length", 8)
    assert artifact.resolve_shape(spec.output_shape, {"batch": 3, "past_length": 5, "length": 4}) == (3, 2, 9, 8)
    with pytest.raises(MetadataError, match="unknown symbolic dim 'length'"):
        artifact.resolve_shape(spec.output_shape, {"batch": 3, "past_length": 5})
    with pytest.raises(MetadataError, match="bfloat16"):
        artifact.numpy_dtype("bfloat16")
    assert artifact.numpy_dtype("bool") == np.bool_


def test_validate_metadata_accepts_what_the_exporter_writes(demo_exports) -> None:
    for directory in demo_exports.values():
        meta = read_metadata(directory)
        assert validate_metadata(meta) is meta and meta["interface"] == artifact.CAUSAL_LM
        assert [s.to_dict() for s in artifact.state_specs(meta)] == meta["state"]


# -- saved parity reference ---------------------------------------------------------------------------


def test_saved_reference_round_trip_and_bad_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ids = {"input_ids": np.ones((2, 3), np.int64), "attention_mask": np.ones((2, 3), np.int64)}
    step = {"input_ids": np.ones((2, 1), np.int64), "attention_mask": np.ones((2, 1), np.int64)}
    calls = [
        Call(ids, {"logits": rng.random((2, 3, 5), dtype=np.float32)}, {"c": rng.random((1, 2, 4), dtype=np.float32)}),
        Call(step, {"logits": rng.random((2, 1, 5), dtype=np.float32)}, None),
    ]  # fmt: skip
    path = save_reference(tmp_path / "ref.npz", calls, "test", [[1, 2, 3], [4, 5, 6]])
    loaded, header = load_reference(path)
    assert header["prompts"] == [[1, 2, 3], [4, 5, 6]] and header["source"] == "test"
    assert loaded[1].state is None and np.array_equal(loaded[0].state["c"], calls[0].state["c"])
    assert all(np.array_equal(a.outputs["logits"], b.outputs["logits"]) for a, b in zip(loaded, calls))
    assert all(list(a.inputs) == ["input_ids", "attention_mask"] for a in loaded)


def test_version_1_reference_still_loads(tmp_path: Path) -> None:
    """A parity reference written by rnnx before stateful exports (flat input_ids / logits keys)."""
    header = {"format": "rnnx-parity-reference", "format_version": 1, "calls": 1, "prompts": [[1]], "source": "old"}
    arrays = {"0/input_ids": np.ones((1, 1), np.int64), "0/attention_mask": np.ones((1, 1), np.int64),
              "0/logits": np.zeros((1, 1, 3), np.float32), "0/state/c": np.zeros((1, 1, 2), np.float32),
              "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)}  # fmt: skip
    np.savez(tmp_path / "v1.npz", **arrays)
    (call,), _ = load_reference(tmp_path / "v1.npz")
    assert list(call.inputs) == ["input_ids", "attention_mask"] and call.outputs["logits"].shape == (1, 1, 3)
    assert call.state["c"].shape == (1, 1, 2)


def test_bad_files_are_named(tmp_path: Path) -> None:
    np.savez(tmp_path / "other.npz", x=np.zeros(1))
    with pytest.raises(ValueError, match="not an rnnx parity reference"):
        load_reference(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError, match="no saved parity reference"):
        load_reference(tmp_path / "missing.npz")
