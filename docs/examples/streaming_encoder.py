"""A streaming SRU encoder over filterbank-like frames, exported to ONNX Runtime and fed chunk by chunk.

``forward(features (B, T, 40), state) -> (encoded (B, T, 64), state)`` with the state a dict
``{"c": (layers, B, hidden)}`` (its batch axis is axis 1, found by the exporter). The export's
``StatefulSession`` carries the state between calls, so 200 frames fed in chunks of 16 give what
one call on all 200 gives; the state can be forked, saved and loaded mid-stream.

Run it with ``python docs/examples/streaming_encoder.py``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from torch import Tensor, nn

import rnnx.runtime
from rnnx.models import SRU
from rnnx.runtime.parity import errors

sys.path.insert(0, str(Path(__file__).resolve().parent))  # example_support.py, beside this file
from example_support import one_thread, onnxruntime_export, parity_numbers, print_report

FEATURES = 40
HIDDEN = 64
LAYERS = 2
FRAMES = 200
CHUNK = 16
SEED = 0


class StreamingEncoder(nn.Module):
    """Linear -> 2-layer causal SRU -> Linear over (B, T, F) frames, with its SRU state carried."""

    def __init__(self, features: int = FEATURES, hidden: int = HIDDEN, layers: int = LAYERS) -> None:
        super().__init__()
        self.hidden, self.layers = hidden, layers
        self.proj = nn.Linear(features, hidden)
        self.rnn = SRU(hidden, hidden, num_layers=layers, layer_norm=True)
        self.out = nn.Linear(hidden, hidden)

    def init_state(self, batch: int) -> dict[str, Tensor]:
        """Zero cell states for ``batch`` streams."""
        return {"c": torch.zeros(self.layers, batch, self.hidden)}

    def forward(self, features: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """features (B, T, F) and the state -> encoded (B, T, hidden) and the state after the T frames."""
        h, c = self.rnn(self.proj(features).transpose(0, 1), state["c"])
        return self.out(h.transpose(0, 1)), {"c": c}


def factory() -> dict[str, Any]:
    """For ``export-model --module docs/examples/streaming_encoder.py:factory``: the module and export options."""
    torch.manual_seed(SEED)
    return {
        "module": StreamingEncoder().eval(),
        "example_inputs": (torch.randn(2, CHUNK, FEATURES),),
        "output_names": ["encoded"],
    }


def stream(session: rnnx.runtime.StatefulSession, features: np.ndarray, start: int = 0) -> np.ndarray:
    """Feeds ``features[:, start:]`` chunk by chunk from the session's current state; the outputs joined."""
    outs = [session.run(features=features[:, t : t + CHUNK])["encoded"] for t in range(start, features.shape[1], CHUNK)]
    return np.concatenate(outs, axis=1)


@one_thread()
def main(out_dir: Optional[str] = None) -> dict[str, Any]:
    """Exports the encoder, streams a long input through ONNX Runtime and checks it; returns the numbers."""
    torch.manual_seed(SEED)
    model = StreamingEncoder().eval()
    examples = torch.randn(2, CHUNK, FEATURES)
    features = torch.randn(3, FRAMES, FEATURES)
    with torch.no_grad():
        expected = model(features, model.init_state(3))[0].numpy()

    with (
        onnxruntime_export(model, (examples,), out_dir, output_names=["encoded"]) as (result, session),
        tempfile.TemporaryDirectory() as scratch,  # for the saved state
    ):
        x = features.numpy()

        whole = session.run(features=x)["encoded"]  # one call on all frames
        session.reset()
        chunked = stream(session, x)  # the same frames, 16 at a time

        # mid-stream: stop after 6 chunks, fork the state and save it, then continue three ways
        session.reset()
        middle = 6 * CHUNK
        head = stream(session, x[:, :middle])
        fork = session.state.fork()
        saved = session.state.save(Path(scratch) / "state.npz")
        tail = stream(session, x, middle)
        session.state = fork
        tail_fork = stream(session, x, middle)
        session.load_state(saved)
        tail_loaded = stream(session, x, middle)
        state_names = list(session.state.to_host())

    chunk_vs_whole = float(np.abs(chunked - whole).max())
    resume = max(float(np.abs(t - chunked[:, middle:]).max()) for t in (tail, tail_fork, tail_loaded))
    # max |got - want| / max |want|, as rnnx's parity reports measure
    rel_torch = max(errors(chunked, expected)[1], errors(whole, expected)[1])
    assert chunk_vs_whole <= 1e-5, f"chunked vs whole: {chunk_vs_whole:.3e}"
    assert np.array_equal(head, chunked[:, :middle]), "the first chunks differ from the full stream's"
    assert resume <= 1e-5, f"resumed streams differ by {resume:.3e}"
    assert rel_torch <= 1e-4, f"ONNX Runtime vs PyTorch: {rel_torch:.3e} relative"
    return {
        **parity_numbers(result),
        "state_names": state_names,
        "frames": FRAMES,
        "chunk": CHUNK,
        "chunks": -(-FRAMES // CHUNK),
        "chunked_vs_whole_max_abs": chunk_vs_whole,
        "resumed_vs_stream_max_abs": resume,
        "onnxruntime_vs_torch_rel": rel_torch,
    }


#: what running this file prints, a line per template filled in with main()'s numbers
REPORT = (
    "export parity: {parity_verdict}",
    "state tensors: {state_names}",
    "{frames} frames in {chunks} chunks of {chunk} vs one call: max abs diff {chunked_vs_whole_max_abs:.3e}",
    "fork / save / load after 6 chunks, then the rest: max abs diff {resumed_vs_stream_max_abs:.3e}",
    "ONNX Runtime vs PyTorch: max relative diff {onnxruntime_vs_torch_rel:.3e}",
)

if __name__ == "__main__":
    print_report(REPORT, main())
