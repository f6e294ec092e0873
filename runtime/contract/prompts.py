"""The default prompts of a parity check: an export's check and ``rnnx-parity`` use them for a language model whose
training task has no prompts of its own (the copy task has: ``rnnx.models.training.copy_task.task_prompts``)."""

from __future__ import annotations

import numpy as np


def random_prompts(vocab_size: int, batch: int = 3, length: int = 12, seed: int = 0) -> list[list[int]]:
    """``batch`` random prompts with lengths from ``length`` down to about ``length / 2``."""
    rng = np.random.default_rng(seed)
    lengths = np.linspace(length, length // 2 + 1, batch).round().astype(int)
    return [rng.integers(0, vocab_size, int(n)).tolist() for n in lengths]
