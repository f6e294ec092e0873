"""A fast-transformers causal-linear language model: trained in parallel form, decoded recurrently, exported.

The task: sequences ``[step marker, d0, d1, ...]`` where ``d(i+1) = (d(i) + step) mod 10`` and the
marker (token 10, 11 or 12) gives the step 1, 2 or 3; the model has to find the marker among the past
tokens (attention) and add its step to the current digit. The LM is ``Embedding ->
TransformerEncoder (attention_type="causal-linear") -> Linear``, trained with
``TransformerEncoderBuilder`` and decoded greedily with a ``RecurrentEncoderBuilder`` twin holding the
same weights, as fast-transformers documents. ``rnnx.models.convert`` turns the encoder into
``rnnx.models.LinearTransformerEncoder``; a small stateful wrapper is exported to ONNX Runtime and
decoded with the runtime's ``StatefulSession``: the tokens equal fast-transformers' own decode.

Run it with ``python docs/examples/fast_transformers_lm.py`` (needs pytorch-fast-transformers 0.4.0,
which ``bash scripts/setup.sh`` installs).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from fast_transformers.builders import RecurrentEncoderBuilder, TransformerEncoderBuilder
from fast_transformers.masking import TriangularCausalMask
from torch import Tensor, nn

import rnnx.runtime
from rnnx.models import convert
from rnnx.models.fast_transformers import LinearTransformerEncoder
from rnnx.models.state import LinearAttentionState

sys.path.insert(0, str(Path(__file__).resolve().parent))  # example_support.py, beside this file
from example_support import fit, one_thread, onnxruntime_export, parity_numbers, print_report, seeded

DIGITS = 10
STEPS = (1, 2, 3)
VOCAB = DIGITS + len(STEPS)
LENGTH = 12
PROMPT = 3
NEW_TOKENS = 9
SEED = 0

#: the builders' keywords: d_model = n_heads * value_dimensions = 32
ENCODER = dict(
    n_layers=2,
    n_heads=4,
    query_dimensions=8,
    value_dimensions=8,
    feed_forward_dimensions=64,
    dropout=0.0,
    attention_type="causal-linear",
)
D_MODEL = ENCODER["n_heads"] * ENCODER["value_dimensions"]


def make_batch(batch: int, length: int, gen: torch.Generator) -> Tensor:
    """Random sequences of the task: a step marker, then digits counting by that step modulo 10."""
    step_index = torch.randint(0, len(STEPS), (batch, 1), generator=gen)
    start = torch.randint(0, DIGITS, (batch, 1), generator=gen)
    steps = torch.tensor(STEPS)[step_index]
    digits = (start + steps * torch.arange(length - 1)) % DIGITS
    return torch.cat([DIGITS + step_index, digits], dim=1)


class ParallelLM(nn.Module):
    """The training-time model: tokens (B, L) -> next-token logits (B, L, V), causal mask."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.encoder = TransformerEncoderBuilder.from_kwargs(**ENCODER).get()
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens: Tensor) -> Tensor:
        """All positions at once."""
        mask = TriangularCausalMask(tokens.shape[1], device=tokens.device)
        return self.head(self.encoder(self.embed(tokens), attn_mask=mask))


class StatefulLM(nn.Module):
    """The exported model: ``forward(tokens (B, L), state) -> (logits (B, L, V), state)``."""

    def __init__(self, embed: nn.Embedding, encoder: LinearTransformerEncoder, head: nn.Linear) -> None:
        super().__init__()
        self.embed, self.encoder, self.head = embed, encoder, head

    def init_state(self, batch: int) -> list[LinearAttentionState]:
        """One (S, z) attention state per layer, zeros."""
        return self.encoder.init_state(batch)

    def forward(self, tokens: Tensor, state: list[LinearAttentionState]) -> tuple[Tensor, list[LinearAttentionState]]:
        """Prefill (L > 1) or one step (L = 1) from ``state``."""
        y, state = self.encoder.forward_state(self.embed(tokens), state)
        return self.head(y), state


def next_token_loss(model: ParallelLM, gen: torch.Generator) -> Tensor:
    """The training loss: next-token cross-entropy on a fresh batch of 32 random sequences, on the digits only."""
    tokens = make_batch(32, LENGTH, gen)
    logits = model(tokens[:, :-1])[:, 1:]
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 2:].reshape(-1))


@torch.no_grad()
def recurrent_decode(model: ParallelLM, prompts: Tensor, new_tokens: int) -> Tensor:
    """Greedy decoding the fast-transformers way: a RecurrentTransformerEncoder with the same weights,
    fed one token at a time (the prompt too)."""
    recurrent = RecurrentEncoderBuilder.from_kwargs(**ENCODER).get()
    recurrent.load_state_dict(model.encoder.state_dict())
    recurrent.eval()
    state, tokens = None, []
    for t in range(prompts.shape[1] + new_tokens - 1):
        token = prompts[:, t] if t < prompts.shape[1] else tokens[-1]
        y, state = recurrent(model.embed(token), state=state)
        if t >= prompts.shape[1] - 1:
            tokens.append(model.head(y).argmax(-1))
    return torch.stack(tokens, dim=1)


def onnxruntime_decode(session: rnnx.runtime.StatefulSession, prompts: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy decoding on the export: the prompt in one ``run``, then one token per ``run``."""
    session.reset()
    logits = session.run(tokens=prompts)["logits"]
    tokens = [logits[:, -1].argmax(-1)]
    for _ in range(new_tokens - 1):
        logits = session.run(tokens=tokens[-1][:, None])["logits"]
        tokens.append(logits[:, -1].argmax(-1))
    return np.stack(tokens, axis=1)


@one_thread()
def main(out_dir: Optional[str] = None, steps: int = 400) -> dict[str, Any]:
    """Trains, decodes both ways, exports and checks; returns the numbers it measured."""
    gen = seeded(SEED)
    model = ParallelLM()
    loss = fit(model, steps, lr=3e-3, batch_loss=lambda: next_token_loss(model, gen))

    sequences = make_batch(16, PROMPT + NEW_TOKENS, gen)
    prompts, answers = sequences[:, :PROMPT], sequences[:, PROMPT:]
    expected = recurrent_decode(model, prompts, NEW_TOKENS)
    accuracy = float((expected == answers).float().mean())

    lm = StatefulLM(model.embed, convert(model.encoder), model.head).eval()
    with torch.no_grad():
        converted_logits = lm(sequences, lm.init_state(16))[0]
        original_logits = model(sequences)
    convert_max_abs = float((converted_logits - original_logits).abs().max())

    with onnxruntime_export(lm, (prompts[:2],), out_dir, output_names=["logits"]) as (result, session):
        decoded = onnxruntime_decode(session, prompts.numpy(), NEW_TOKENS)
        state_names = list(session.state.to_host())

    tokens_equal = bool(np.array_equal(decoded, expected.numpy()))
    assert convert_max_abs <= 1e-4, f"converted vs original logits: {convert_max_abs:.3e}"
    assert tokens_equal, f"ONNX Runtime decoded {decoded.tolist()}, fast-transformers {expected.tolist()}"
    return {
        "train_loss": loss,
        "decode_accuracy": accuracy,
        "convert_max_abs": convert_max_abs,
        **parity_numbers(result),
        "state_names": state_names,
        "prompt": prompts[0].tolist(),
        "decoded": decoded[0].tolist(),
        "tokens_equal": tokens_equal,
    }


#: what running this file prints, a line per template filled in with main()'s numbers
REPORT = (
    "training loss {train_loss:.2e}, greedy decode accuracy {decode_accuracy:.4f}",
    "converted encoder vs fast-transformers: max abs logit diff {convert_max_abs:.3e}",
    "export parity: {parity_verdict}",
    "state tensors: {state_names}",
    "prompt {prompt} -> ONNX Runtime {decoded}",
    "ONNX Runtime greedy tokens equal the RecurrentEncoderBuilder decode",
)

if __name__ == "__main__":
    print_report(REPORT, main())
