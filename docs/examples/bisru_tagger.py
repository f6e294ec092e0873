"""A bidirectional SRU tagger built on the published ``sru`` 2.6 package, exported to ONNX Runtime.

The task: tag each token 1 when it equals its left or its right neighbour, else 0. The right neighbour
is only visible to the backward direction, the left one to the forward direction, so the tagger needs
both. The model is ``Embedding -> sru.SRU(bidirectional=True) -> Linear``; ``rnnx.export.export``
replaces the ``sru.SRU`` by ``rnnx.models.SRU`` (same weights) on its own.

Run it with the published package on the path (it compiles a small CPU extension the first time)::

    PYTHONPATH=.reference/sru-2.6.0 python docs/examples/bisru_tagger.py
"""

from __future__ import annotations

import contextlib
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any, Optional

import numpy as np
import sru
import torch
from torch import Tensor, nn

import rnnx.runtime
from rnnx.export import export

VOCAB = 6
LENGTH = 16
SEED = 0


class BiSRUTagger(nn.Module):
    """tokens (B, L) int64 -> tag logits (B, L, 2); stateless (the backward direction reads the whole input)."""

    def __init__(self, vocab: int = VOCAB, dim: int = 16, hidden: int = 32, layers: int = 2, tags: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = sru.SRU(dim, hidden, num_layers=layers, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, tokens: Tensor) -> Tensor:
        """Batch-first in and out; sru wants time-major, hence the transposes."""
        h, _ = self.rnn(self.embed(tokens).transpose(0, 1))
        return self.head(h.transpose(0, 1))


def make_batch(batch: int, length: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Random sentences and their tags: 1 where a token equals a neighbour."""
    tokens = torch.randint(0, VOCAB, (batch, length), generator=gen)
    same = tokens[:, 1:] == tokens[:, :-1]
    tags = torch.zeros_like(tokens)
    tags[:, 1:] |= same.long()
    tags[:, :-1] |= same.long()
    return tokens, tags


def train(model: BiSRUTagger, steps: int, gen: torch.Generator) -> float:
    """Adam on fresh random batches; returns the final training loss."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = torch.tensor(0.0)
    model.train()
    warnings.filterwarnings("ignore", message="Running SRU on CPU with grad_enabled")
    for _ in range(steps):
        tokens, tags = make_batch(32, LENGTH, gen)
        loss = nn.functional.cross_entropy(model(tokens).reshape(-1, 2), tags.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: the measure rnnx's parity reports use."""
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Runs torch on one thread meanwhile: models this small train fastest so, even on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def main(out_dir: Optional[str] = None, steps: int = 300) -> dict[str, Any]:
    """Trains, exports and checks the tagger; returns the numbers it measured."""
    with one_thread():
        return _run(out_dir=out_dir, steps=steps)


def _run(out_dir: Optional[str], steps: int) -> dict[str, Any]:
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = BiSRUTagger()
    loss = train(model, steps, gen)
    model.eval()

    test_tokens, test_tags = make_batch(256, LENGTH, gen)
    with torch.no_grad():
        accuracy = float((model(test_tokens).argmax(-1) == test_tags).float().mean())

    with tempfile.TemporaryDirectory() as tmp:
        target_dir = out_dir or tmp
        result = export(model, (test_tokens[:4],), target_dir, target="onnxruntime")
        session = rnnx.runtime.load(target_dir, backend="onnxruntime")

        # new sentences, of a length and batch size the export never saw
        sentences, _ = make_batch(5, 23, gen)
        logits = session.run(tokens=sentences.numpy())["output"]
    with torch.no_grad():
        expected = model(sentences).numpy()

    ort_tags, torch_tags = logits.argmax(-1), expected.argmax(-1)
    rel = relative_error(logits, expected)
    assert result.parity is not None and result.parity.passed, result.parity
    assert np.array_equal(ort_tags, torch_tags), "ONNX Runtime tags differ from PyTorch's"
    assert rel <= 1e-4, f"logits differ by {rel:.3e} relative"
    return {
        "train_loss": loss,
        "accuracy": accuracy,
        "parity_passed": result.parity.passed,
        "parity_worst_rel": result.parity.worst_rel,
        "parity_verdict": result.parity.verdict(),
        "inputs": [spec.name for spec in session.inputs],
        "sentences": sentences.tolist(),
        "tags": ort_tags.tolist(),
        "tags_equal": True,
        "logits_rel": rel,
    }


if __name__ == "__main__":
    numbers = main()
    print(f"training loss {numbers['train_loss']:.2e}, tagging accuracy {numbers['accuracy']:.4f}")
    print(f"export parity: {numbers['parity_verdict']}")
    print(f"sentence: {numbers['sentences'][0]}")
    print(f"tags:     {numbers['tags'][0]}")
    print(f"ONNX Runtime tags equal PyTorch's; logits max relative difference {numbers['logits_rel']:.3e}")
