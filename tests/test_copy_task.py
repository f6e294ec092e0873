"""The copy task: sample layout, batched greedy decoding through the recurrent form, a tiny training run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rnnx.models.checkpoint import load_checkpoint
from rnnx.models.registry import build_model
from rnnx.models.training.copy_task import CopyTask, evaluate, greedy_copy, main, train

TASK = CopyTask(alphabet_size=6, min_len=2, max_len=5)


def test_training_batch_layout() -> None:
    symbols = torch.tensor([[1, 2, 3, 4, 5], [0, 5, TASK.pad, TASK.pad, TASK.pad]])
    inputs, targets, weight = TASK.training_batch(symbols, torch.tensor([5, 2]))
    S, P = TASK.sep, TASK.pad
    full = [[1, 2, 3, 4, 5, S, 1, 2, 3, 4, 5], [0, 5, S, 0, 5, P, P, P, P, P, P]]
    assert inputs.tolist() == [r[:-1] for r in full]
    assert targets.tolist() == [r[1:] for r in full]
    assert weight.tolist() == [[False] * 5 + [True] * 5, [False, False, True, True] + [False] * 6]


def test_sample_is_deterministic_and_in_range() -> None:
    a = TASK.sample(64, torch.Generator().manual_seed(3))
    b = TASK.sample(64, torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    symbols, lengths = a
    assert lengths.min() >= TASK.min_len and lengths.max() <= TASK.max_len
    valid = torch.arange(TASK.max_len)[None, :] < lengths[:, None]
    assert (symbols[valid] < TASK.alphabet_size).all() and (symbols[~valid] == TASK.pad).all()


@pytest.mark.parametrize(
    "model_type,config",
    [
        ("linear_transformer", dict(d_model=16, num_layers=2, num_heads=2)),
        ("srupp", dict(embed_dim=16, hidden_size=16, proj_size=8, num_layers=2, attention="linear")),
    ],
)
def test_batched_greedy_equals_row_by_row(model_type: str, config: dict) -> None:
    """Right-padded batched prefill (pad_mask) then steps decodes each row as it would alone."""
    torch.manual_seed(0)
    model = build_model(model_type, {"vocab_size": TASK.vocab_size, **config}).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    symbols, lengths = TASK.sample(6, torch.Generator().manual_seed(4))
    lengths[0], lengths[1] = TASK.min_len, TASK.max_len  # make sure the rows differ in length
    symbols[0, TASK.min_len :] = TASK.pad
    batched = greedy_copy(model, TASK, symbols, lengths)
    assert batched.shape == (6, TASK.max_len)
    for row in range(6):
        n = int(lengths[row])
        alone = greedy_copy(model, TASK, symbols[row : row + 1, :n], lengths[row : row + 1])
        assert torch.equal(batched[row, :n], alone[0]), row


def test_evaluate_scoring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Perfect copies score 1.0; one wrong token per row costs exactly that token (pads ignored)."""
    import rnnx.models.training.copy_task as ct

    model = build_model("linear_transformer", dict(vocab_size=TASK.vocab_size, d_model=8, num_layers=1, num_heads=1))
    monkeypatch.setattr(ct, "greedy_copy", lambda m, t, symbols, lengths: symbols[:, : int(lengths.max())].clone())
    assert evaluate(model, TASK, 40, seed=0)["exact_sequence_accuracy"] == 1.0

    def one_wrong(m, t, symbols, lengths):
        out = symbols[:, : int(lengths.max())].clone()
        out[:, 0] = (out[:, 0] + 1) % TASK.alphabet_size
        return out

    monkeypatch.setattr(ct, "greedy_copy", one_wrong)
    _, lengths = TASK.sample(40, torch.Generator().manual_seed(0))
    metrics = evaluate(model, TASK, 40, seed=0)
    assert metrics["exact_sequence_accuracy"] == 0.0
    assert metrics["per_token_accuracy"] == pytest.approx(1 - 40 / int(lengths.sum()))


def test_short_training_learns_and_saves(tmp_path: Path) -> None:
    task = CopyTask(alphabet_size=4, min_len=1, max_len=3)
    model, metrics = train(
        "linear_transformer",
        str(tmp_path / "ckpt"),
        task,
        config=dict(d_model=16, num_layers=1, num_heads=2, d_ff=32),
        steps=60,
        batch_size=16,
        lr=1e-2,
        warmup=10,
        eval_sequences=50,
        log_every=20,
    )
    assert metrics["per_token_accuracy"] > 0.5  # chance is 0.25
    loaded, info = load_checkpoint(tmp_path / "ckpt")
    assert info["task"]["alphabet_size"] == 4 and info["metrics"] == json.loads(json.dumps(metrics))
    again = evaluate(loaded, task, 50, seed=12345)  # the seed train() evaluates with (seed 0 + 12345)
    assert again["per_token_accuracy"] == metrics["per_token_accuracy"]


def test_cli_writes_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    main(
        [
            "--model",
            "srupp",
            "--out",
            str(tmp_path / "c"),
            "--steps",
            "2",
            "--eval-sequences",
            "4",
            "--min-len",
            "2",
            "--max-len",
            "3",
            "--config",
            '{"embed_dim": 8, "hidden_size": 8, "proj_size": 4}',
        ]
    )
    assert "eval {" in capsys.readouterr().out
    assert load_checkpoint(tmp_path / "c")[1]["config"]["attention"] == "linear"


def test_cli_continues_from_a_checkpoint(tmp_path: Path) -> None:
    common = ["--eval-sequences", "4", "--min-len", "2", "--max-len", "3"]
    main(
        [
            "--model",
            "linear_transformer",
            "--out",
            str(tmp_path / "a"),
            "--steps",
            "3",
            "--config",
            '{"d_model": 8, "num_layers": 1, "num_heads": 1}',
            *common,
        ]
    )
    main(
        [
            "--model",
            "linear_transformer",
            "--out",
            str(tmp_path / "b"),
            "--steps",
            "2",
            "--lr",
            "1e-4",
            "--init",
            str(tmp_path / "a"),
            *common,
        ]
    )
    first, second = (load_checkpoint(tmp_path / n) for n in "ab")
    assert second[1]["config"] == first[1]["config"]
    assert second[1]["metrics"]["train_steps"] == 5
    assert [s["lr"] for s in second[1]["metrics"]["stages"]] == [2e-3, 1e-4]
    assert not torch.equal(first[0].head.weight, second[0].head.weight)
