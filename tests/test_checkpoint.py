"""Checkpoint directories: round trip, atomic overwrite, and one clear CheckpointError per broken case."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from rnnx.models.checkpoint import (
    DEMO_CHECKPOINTS,
    CheckpointError,
    demo_checkpoint_path,
    load_checkpoint,
    save_checkpoint,
    sha256_file,
)
from rnnx.models.registry import build_model
from rnnx.models.training.copy_task import CopyTask, evaluate

SMALL = {
    "linear_transformer": dict(vocab_size=11, d_model=16, num_layers=2, num_heads=2),
    "sru": dict(vocab_size=11, embed_dim=8, hidden_size=12, num_layers=2),
    "srupp": dict(vocab_size=11, embed_dim=8, hidden_size=12, proj_size=4, num_layers=2, attention="linear"),
}


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    return save_checkpoint(build_model("linear_transformer", SMALL["linear_transformer"]), tmp_path / "ckpt")


@pytest.mark.parametrize("model_type", sorted(SMALL))
def test_round_trip_gives_identical_logits(tmp_path: Path, model_type: str) -> None:
    torch.manual_seed(0)
    model = build_model(model_type, SMALL[model_type]).eval()
    path = save_checkpoint(model, tmp_path / "ckpt", metrics={"acc": 0.5}, task={"name": "t"})
    info = json.loads((path / "config.json").read_text())
    assert info["format"] == "rnnx-checkpoint" and info["format_version"] == 1
    assert info["model_type"] == model_type and info["config"] == model.config
    assert info["weights_sha256"] == sha256_file(path / "model.pt")
    tokens = torch.randint(0, 11, (2, 7))
    for where in (path, path / "config.json", str(path)):
        loaded, loaded_info = load_checkpoint(where)
        assert not loaded.training
        assert loaded_info["metrics"] == {"acc": 0.5} and loaded_info["task"] == {"name": "t"}
        with torch.no_grad():
            assert torch.equal(loaded(tokens)[0], model(tokens)[0])


def test_overwrite_replaces_and_leaves_no_temporaries(saved: Path) -> None:
    torch.manual_seed(1)
    other = build_model("sru", SMALL["sru"])
    save_checkpoint(other, saved)
    assert load_checkpoint(saved)[1]["model_type"] == "sru"
    assert sorted(p.name for p in saved.parent.iterdir()) == ["ckpt"]
    assert sorted(p.name for p in saved.iterdir()) == ["config.json", "model.pt"]


def test_failed_save_keeps_the_old_checkpoint(saved: Path) -> None:
    class Unsaveable(torch.nn.Module):
        config: dict = {}

    with pytest.raises(KeyError, match="is not a registered model type"):
        save_checkpoint(Unsaveable(), saved)
    load_checkpoint(saved)
    assert sorted(p.name for p in saved.parent.iterdir()) == ["ckpt"]


def edit_config(**changes: object) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        info = json.loads((path / "config.json").read_text())
        info.update(changes)
        (path / "config.json").write_text(json.dumps(info))

    return edit


def replace_weights(make_state: Callable[[dict], object]) -> Callable[[Path], None]:
    """Writes new weights and a matching sha256, so the check that fires is the one under test."""

    def edit(path: Path) -> None:
        state = torch.load(path / "model.pt", weights_only=True)
        torch.save(make_state(state), path / "model.pt")
        edit_config(weights_sha256=sha256_file(path / "model.pt"))(path)

    return edit


def write_bytes(data: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def edit(path: Path) -> None:
        (path / "model.pt").write_bytes(data((path / "model.pt").read_bytes()))
        edit_config(weights_sha256=sha256_file(path / "model.pt"))(path)

    return edit


def flip_byte(path: Path) -> None:
    data = bytearray((path / "model.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "model.pt").write_bytes(bytes(data))


def drop(key: str) -> Callable[[dict], dict]:
    return lambda s: {k: v for k, v in s.items() if k != key}


BROKEN: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # case: (how to break it, file named in the message, words the message must contain)
    "missing_config": (lambda p: (p / "config.json").unlink(), "config.json", "missing checkpoint config"),
    "invalid_json": (lambda p: (p / "config.json").write_text("{not json"), "config.json", "invalid JSON"),
    "foreign_json": (
        lambda p: (p / "config.json").write_text('{"model_type": "bert", "hidden_size": 768}'),
        "config.json",
        "not an rnnx checkpoint",
    ),
    "json_list": (lambda p: (p / "config.json").write_text("[1, 2]"), "config.json", "not an rnnx checkpoint"),
    "future_version": (edit_config(format_version=2), "config.json", "unsupported format_version 2"),
    "unknown_model_type": (
        edit_config(model_type="gpt"),
        "config.json",
        "unknown model_type 'gpt'; known: decoder, linear_transformer, sru, srupp",
    ),
    "bad_config_kwarg": (edit_config(config={"vocab_size": 11, "d_modle": 16}), "config.json", "bad config .*d_modle"),
    "bad_config_value": (
        edit_config(config={"vocab_size": 11, "d_model": 10, "num_heads": 3}),
        "config.json",
        "bad config .*multiple of num_heads",
    ),
    "missing_weights": (lambda p: (p / "model.pt").unlink(), "model.pt", "missing weights file"),
    "corrupt_weights": (flip_byte, "model.pt", "sha256 mismatch"),
    "not_a_torch_file": (write_bytes(lambda b: b"hello, world" * 10), "model.pt", "unreadable weights"),
    "truncated_weights": (write_bytes(lambda b: b[: len(b) // 2]), "model.pt", "unreadable weights"),
    "missing_tensor": (replace_weights(drop("head.weight")), "model.pt", "missing tensors .*head.weight"),
    "unexpected_tensor": (
        replace_weights(lambda s: {**s, "extra.bias": torch.zeros(3)}),
        "model.pt",
        "unexpected tensors .*extra.bias",
    ),
    "shape_mismatch": (
        replace_weights(lambda s: {**s, "embedding.weight": torch.zeros(12, 16)}),
        "model.pt",
        r"embedding.weight has shape \(12, 16\), expected \(11, 16\)",
    ),
    "not_a_state_dict": (replace_weights(lambda s: [1, 2]), "model.pt", "not a state_dict"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_checkpoint_raises_one_clear_line(saved: Path, case: str) -> None:
    breaker, filename, words = BROKEN[case]
    breaker(saved)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(saved)
    message = str(err.value)
    assert "\n" not in message
    assert isinstance(err.value, ValueError)
    assert str(saved / filename) in message
    assert re.search(words, message), message


def test_missing_directory_or_wrong_file(saved: Path) -> None:
    with pytest.raises(CheckpointError, match="checkpoint directory does not exist"):
        load_checkpoint(saved.parent / "nope")
    with pytest.raises(CheckpointError, match="model.pt: not a checkpoint directory nor its config.json"):
        load_checkpoint(saved / "model.pt")


def test_unknown_demo_name() -> None:
    with pytest.raises(KeyError, match="linear_transformer_copy"):
        demo_checkpoint_path("nope")


@pytest.mark.parametrize("name", DEMO_CHECKPOINTS)
def test_demo_checkpoint_loads_is_small_and_copies(name: str) -> None:
    path = demo_checkpoint_path(name)
    size = sum(f.stat().st_size for f in path.iterdir())
    assert size < 5 * 2**20
    model, info = load_checkpoint(path)
    task = CopyTask.from_description(info["task"])
    assert info["metrics"]["per_token_accuracy"] >= 0.99
    torch.manual_seed(0)
    metrics = evaluate(model, task, num_sequences=32, seed=2024)
    assert metrics["per_token_accuracy"] >= 0.95, metrics
    assert metrics["exact_sequence_accuracy"] >= 0.75, metrics
