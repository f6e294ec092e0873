"""A bidirectional SRU tagger built on the published ``sru`` 2.6 package, exported to ONNX Runtime.

The task: tag each token 1 when it equals its left or its right neighbour, else 0. The right neighbour
is only visible to the backward direction, the left one to the forward direction, so the tagger needs
both. The model is ``Embedding -> sru.SRU(bidirectional=True) -> Linear``; ``rnnx.export.export``
replaces the ``sru.SRU`` by ``rnnx.models.SRU`` (same weights) on its own.

Run it with the published package on the path (it compiles a small CPU extension the first time)::

    PYTHONPATH=.reference/sru-2.6.0 python docs/examples/bisru_tagger.py
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, Optional

import numpy as np
import sru
import torch
from torch import Tensor, nn

from rnnx.runtime.parity import errors

sys.path.insert(0, str(Path(__file__).resolve().parent))  # example_support.py, beside this file
from example_support import fit, one_thread, onnxruntime_export, parity_numbers, print_report, seeded

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


def tagging_loss(model: BiSRUTagger, gen: torch.Generator) -> Tensor:
    """The training loss: cross-entropy of the tags of a fresh batch of 32 random sentences."""
    tokens, tags = make_batch(32, LENGTH, gen)
    return nn.functional.cross_entropy(model(tokens).reshape(-1, 2), tags.reshape(-1))


@one_thread()
def main(out_dir: Optional[str] = None, steps: int = 300) -> dict[str, Any]:
    """Trains, exports and checks the tagger; returns the numbers it measured."""
    gen = seeded(SEED)
    model = BiSRUTagger()
    warnings.filterwarnings("ignore", message="Running SRU on CPU with grad_enabled")
    loss = fit(model, steps, lr=1e-2, batch_loss=lambda: tagging_loss(model, gen))

    test_tokens, test_tags = make_batch(256, LENGTH, gen)
    with torch.no_grad():
        accuracy = float((model(test_tokens).argmax(-1) == test_tags).float().mean())

    with onnxruntime_export(model, (test_tokens[:4],), out_dir) as (result, session):
        # new sentences, of a length and batch size the export never saw
        sentences, _ = make_batch(5, 23, gen)
        logits = session.run(tokens=sentences.numpy())["output"]
    with torch.no_grad():
        expected = model(sentences).numpy()

    ort_tags, torch_tags = logits.argmax(-1), expected.argmax(-1)
    rel = errors(logits, expected)[1]  # max |got - want| / max |want|, as rnnx's parity reports measure
    assert np.array_equal(ort_tags, torch_tags), "ONNX Runtime tags differ from PyTorch's"
    assert rel <= 1e-4, f"logits differ by {rel:.3e} relative"
    return {
        "train_loss": loss,
        "accuracy": accuracy,
        **parity_numbers(result),
        "inputs": [spec.name for spec in session.inputs],
        "sentences": sentences.tolist(),
        "tags": ort_tags.tolist(),
        "tags_equal": True,
        "logits_rel": rel,
    }


#: what running this file prints, a line per template filled in with main()'s numbers
REPORT = (
    "training loss {train_loss:.2e}, tagging accuracy {accuracy:.4f}",
    "export parity: {parity_verdict}",
    "sentence: {sentences[0]}",
    "tags:     {tags[0]}",
    "ONNX Runtime tags equal PyTorch's; logits max relative difference {logits_rel:.3e}",
)

if __name__ == "__main__":
    print_report(REPORT, main())
