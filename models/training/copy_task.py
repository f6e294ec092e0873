"""The sequence-copy task of "Transformers are RNNs" (Katharopoulos et al. 2020), CPU-only, no download.

A sample is ``n`` random symbols from an alphabet of ``alphabet_size``, a separator, then the same
``n`` symbols again::

    s_1 ... s_n  SEP  s_1 ... s_n          n uniform in [min_len, max_len]

Token ids: symbols ``0 .. alphabet_size-1``, ``SEP = alphabet_size``, ``PAD = alphabet_size + 1``
(only pads batches to a common length). The model is trained as an LM on the whole sample with the
loss on the copy part only. Evaluation decodes the way a deployment does: prefill each prompt
``s_1 .. s_n SEP`` (batched, right-padded, with ``pad_mask``), then greedy single-token steps through
the recurrent state; it reports exact-sequence and per-token accuracy on fresh random sequences.

Run: ``python -m rnnx.models.training.copy_task --model linear_transformer --out DIR``. With the
defaults (seed 0, one thread) this reproduces the shipped demos ``linear_transformer_copy`` and, with
``--model srupp``, ``srupp_linear_copy``; each run stops early once the teacher-forced accuracy of a
fixed validation batch reaches 0.999, or after ``--time-limit`` seconds (a slow machine can be cut short).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ..checkpoint import load_checkpoint, save_checkpoint
from ..lm import RecurrentLM
from ..registry import build_model


@dataclass(frozen=True)
class CopyTask:
    """Task description (stored in the checkpoint's ``task`` entry)."""

    alphabet_size: int = 10
    min_len: int = 10
    max_len: int = 20

    @property
    def sep(self) -> int:
        return self.alphabet_size

    @property
    def pad(self) -> int:
        return self.alphabet_size + 1

    @property
    def vocab_size(self) -> int:
        return self.alphabet_size + 2

    def describe(self) -> dict[str, Any]:
        return {
            "name": "copy",
            **asdict(self),
            "sep_token": self.sep,
            "pad_token": self.pad,
            "vocab_size": self.vocab_size,
            "format": "s_1..s_n SEP s_1..s_n; loss on the copy part; greedy step-by-step evaluation",
        }

    @classmethod
    def from_description(cls, task: dict[str, Any]) -> CopyTask:
        return cls(task["alphabet_size"], task["min_len"], task["max_len"])

    def sample(self, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``symbols`` (B, max_len) int64 (PAD past each row's length) and ``lengths`` (B,) int64."""
        lengths = torch.randint(self.min_len, self.max_len + 1, (batch_size,), generator=generator)
        symbols = torch.randint(0, self.alphabet_size, (batch_size, self.max_len), generator=generator)
        valid = torch.arange(self.max_len)[None, :] < lengths[:, None]
        return symbols.masked_fill(~valid, self.pad), lengths

    def training_batch(self, symbols: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """LM inputs (B, T), targets (B, T) and loss weights (B, T) bool (True on the copy part).

        Each row is ``s SEP s`` right-padded with PAD to T = 2 * max_len (inputs drop the last token).
        """
        B, n_max = symbols.shape
        T = 2 * n_max + 1
        seq = torch.full((B, T), self.pad, dtype=torch.long)
        pos = torch.arange(T)[None, :]
        n = lengths[:, None]
        seq = torch.where(pos < n, symbols.gather(1, pos.clamp(max=n_max - 1).expand(B, T)), seq)
        seq = torch.where(pos == n, torch.full_like(seq, self.sep), seq)
        src = (pos - n - 1).clamp(0, n_max - 1).expand(B, T)
        copy = (pos > n) & (pos <= 2 * n)
        seq = torch.where(copy, symbols.gather(1, src), seq)
        return seq[:, :-1], seq[:, 1:], copy[:, 1:]


def task_prompts(task: Optional[dict[str, Any]], vocab_size: int, batch: int = 3, seed: int = 0) -> list[list[int]]:
    """Prompts for a parity check of a model trained on ``task`` (a checkpoint's ``task`` entry).

    The copy task gets its own prompts ``s_1 .. s_n SEP`` (n random, so rows differ in length);
    anything else gets :func:`rnnx.runtime.contract.prompts.random_prompts`.
    """
    if not task or task.get("name") != "copy":
        from ...runtime.contract.prompts import random_prompts

        return random_prompts(vocab_size, batch=batch, seed=seed)
    copy = CopyTask.from_description(task)
    symbols, lengths = copy.sample(batch, torch.Generator().manual_seed(seed))
    return [symbols[b, : int(lengths[b])].tolist() + [copy.sep] for b in range(batch)]


def task_scored_calls(task: Optional[dict[str, Any]], prompts: list[list[int]]) -> Optional[list[int]]:
    """Per prompt of :func:`task_prompts`, the calls of a greedy run (the prefill, then decode steps) whose
    last position the task scores: the copy task's answer, ``n`` tokens for ``s_1 .. s_n SEP``; None for a
    task without a scored span."""
    if not task or task.get("name") != "copy":
        return None
    return [len(p) - 1 for p in prompts]


def copy_loss(model: RecurrentLM, task: CopyTask, symbols: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """Mean cross-entropy over the copy part, and the teacher-forced per-token accuracy."""
    inputs, targets, weight = task.training_batch(symbols, lengths)
    logits, _ = model(inputs)
    loss = F.cross_entropy(logits[weight], targets[weight])
    acc = (logits[weight].argmax(-1) == targets[weight]).float().mean()
    return loss, acc


@torch.no_grad()
def greedy_copy(model: RecurrentLM, task: CopyTask, symbols: Tensor, lengths: Tensor) -> Tensor:
    """Greedy decoding through the recurrent form: batched prefill of the prompts, then one token per step.

    Returns the generated tokens (B, max(lengths)); entries past a row's length are to be ignored.
    """
    B = symbols.shape[0]
    n_max = int(lengths.max())
    prompt = torch.full((B, n_max + 1), task.pad, dtype=torch.long)
    prompt[:, :n_max] = symbols[:, :n_max]
    prompt[torch.arange(B), lengths] = task.sep
    pad_mask = torch.arange(n_max + 1)[None, :] > lengths[:, None]
    logits, state = model(prompt, pad_mask=pad_mask)
    token = logits[torch.arange(B), lengths].argmax(-1)
    out = [token]
    for _ in range(n_max - 1):
        logits, state = model(token[:, None], state)
        token = logits[:, -1].argmax(-1)
        out.append(token)
    return torch.stack(out, 1)


@torch.no_grad()
def evaluate(
    model: RecurrentLM, task: CopyTask, num_sequences: int, seed: int, batch_size: int = 256
) -> dict[str, float]:
    """Exact-sequence and per-token accuracy of :func:`greedy_copy` on fresh sequences from ``seed``."""
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    exact = tokens_ok = tokens = 0
    for start in range(0, num_sequences, batch_size):
        symbols, lengths = task.sample(min(batch_size, num_sequences - start), g)
        generated = greedy_copy(model, task, symbols, lengths)
        valid = torch.arange(generated.shape[1])[None, :] < lengths[:, None]
        ok = (generated == symbols[:, : generated.shape[1]]) & valid
        exact += int((ok.sum(1) == lengths).sum())
        tokens_ok += int(ok.sum())
        tokens += int(lengths.sum())
    model.train(was_training)
    return {
        "exact_sequence_accuracy": exact / num_sequences,
        "per_token_accuracy": tokens_ok / tokens,
        "eval_sequences": num_sequences,
    }


DEFAULT_CONFIGS: dict[str, dict[str, Any]] = {
    "linear_transformer": dict(d_model=128, num_layers=2, num_heads=4, d_ff=256),
    "srupp": dict(embed_dim=128, hidden_size=128, proj_size=128, num_layers=4, num_heads=4, attention="linear"),
    "sru": dict(embed_dim=128, hidden_size=256, num_layers=2),
}
#: Per model type: (steps of the cosine schedule, peak learning rate) used for the demos.
DEFAULT_SCHEDULES: dict[str, tuple[int, float]] = {
    "linear_transformer": (2000, 2e-3),
    "srupp": (2200, 3e-3),
    "sru": (2000, 2e-3),
}


def train(
    model_type: str,
    out: Optional[str],
    task: CopyTask,
    config: Optional[dict[str, Any]] = None,
    steps: int = 4000,
    batch_size: int = 64,
    lr: float = 2e-3,
    warmup: int = 200,
    seed: int = 0,
    time_limit: float = 600.0,
    eval_sequences: int = 1000,
    target_accuracy: float = 0.999,
    log_every: int = 50,
    init: Optional[str] = None,
) -> tuple[RecurrentLM, dict[str, Any]]:
    """Trains ``model_type`` on ``task``; saves a checkpoint to ``out`` (if given). Returns (model, metrics).

    Stops after ``steps``, after ``time_limit`` seconds, or once the teacher-forced accuracy of a
    fixed validation batch reaches ``target_accuracy``. ``init`` continues from a checkpoint's
    weights and config (a fresh optimizer and schedule; its training time is added to the metrics).
    """
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    previous: dict[str, Any] = {}
    if init:
        model, previous = load_checkpoint(init)
        if previous["model_type"] != model_type:
            raise ValueError(f"--init {init} holds a {previous['model_type']!r} model, not {model_type!r}")
        cfg = model.config
    else:
        cfg = {**DEFAULT_CONFIGS[model_type], **(config or {}), "vocab_size": task.vocab_size}
        model = build_model(model_type, cfg)
    params = sum(p.numel() for p in model.parameters())
    print(f"copy task {task.describe()}\nmodel {model_type} {json.dumps(cfg)} params={params}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    val = task.sample(512, torch.Generator().manual_seed(seed + 1))
    start, step = time.monotonic(), 0
    model.train()
    for step in range(1, steps + 1):
        loss, acc = copy_loss(model, task, *task.sample(batch_size, g))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == steps:
            model.eval()
            with torch.no_grad():
                val_loss, val_acc = copy_loss(model, task, *val)
            model.train()
            elapsed = time.monotonic() - start
            print(
                f"step {step} loss {loss.item():.4f} acc {acc.item():.4f} val_loss {val_loss.item():.4f} "
                f"val_acc {val_acc.item():.4f} lr {sched.get_last_lr()[0]:.2e} {elapsed:.0f}s",
                flush=True,
            )
            if val_acc.item() >= target_accuracy or elapsed > time_limit:
                break
    train_seconds = time.monotonic() - start
    model.eval()
    metrics = evaluate(model, task, eval_sequences, seed=seed + 12345)
    metrics.update(
        train_steps=step,
        train_seconds=round(train_seconds, 1),
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        parameters=params,
        torch_threads=torch.get_num_threads(),
        eval_decoding="greedy; batched prefill with pad_mask, then single-token recurrent steps",
    )
    if previous:
        prev = previous["metrics"]
        metrics.update(
            train_steps=step + prev["train_steps"],
            train_seconds=round(train_seconds + prev["train_seconds"], 1),
            stages=prev.get("stages", [{k: prev[k] for k in ("train_steps", "train_seconds", "lr", "seed")}])
            + [{"train_steps": step, "train_seconds": round(train_seconds, 1), "lr": lr, "seed": seed}],
        )
    print(f"eval {json.dumps(metrics)}", flush=True)
    if out:
        save_checkpoint(model, out, metrics=metrics, task=task.describe())
        print(f"saved {out}", flush=True)
    return model, metrics


def main(argv: Optional[list[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(DEFAULT_CONFIGS), default="linear_transformer")
    p.add_argument("--out", help="checkpoint directory to write")
    p.add_argument("--config", default="{}", help="JSON overrides of the model config")
    p.add_argument("--alphabet-size", type=int, default=10)
    p.add_argument("--min-len", type=int, default=10)
    p.add_argument("--max-len", type=int, default=20)
    p.add_argument("--steps", type=int, help="length of the cosine schedule (default: per model type)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, help="peak learning rate (default: per model type)")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds of training before stopping")
    p.add_argument("--eval-sequences", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--init", help="checkpoint to continue training from (its config is used)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    steps, lr = DEFAULT_SCHEDULES[a.model]
    train(
        a.model,
        a.out,
        CopyTask(a.alphabet_size, a.min_len, a.max_len),
        json.loads(a.config),
        steps=a.steps or steps,
        batch_size=a.batch_size,
        lr=a.lr or lr,
        warmup=a.warmup,
        seed=a.seed,
        time_limit=a.time_limit,
        eval_sequences=a.eval_sequences,
        init=a.init,
    )


if __name__ == "__main__":
    main()
