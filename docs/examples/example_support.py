"""What the worked examples in this folder share: torch on one thread while an example runs, the seeds and the
training loop, the export to ONNX Runtime with its parity check, the parity numbers each example returns, and the
report it prints.

The examples import it from beside themselves (each puts this folder on ``sys.path``), so they run as
``python docs/examples/<name>.py`` from anywhere.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Optional

import torch
from torch import Tensor, nn

import rnnx.runtime
from rnnx.export import ExportResult, export


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Runs torch on one thread meanwhile (a ``with`` block, or ``@one_thread()`` on a function): models this
    small train fastest so, even on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def seeded(seed: int) -> torch.Generator:
    """Seeds torch's global generator (a model's initial weights) and returns a generator seeded alike (for the
    data), so that a run is the same every time."""
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def fit(model: nn.Module, steps: int, lr: float, batch_loss: Callable[[], Tensor]) -> float:
    """Adam at learning rate ``lr`` for ``steps`` steps, each on ``batch_loss()`` (the loss of a fresh random
    batch); returns the final training loss and leaves ``model`` in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss = torch.tensor(0.0)
    model.train()
    for _ in range(steps):
        loss = batch_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return loss.item()


@contextlib.contextmanager
def onnxruntime_export(
    module: nn.Module, example_inputs: tuple[Any, ...], out_dir: Optional[str] = None, **options: Any
) -> Iterator[tuple[ExportResult, rnnx.runtime.StatefulSession]]:
    """Exports ``module`` for ONNX Runtime into ``out_dir`` (None: a temporary folder, removed when the block
    ends), checks that the export's parity report passed, and yields the export result with the exported
    graph loaded on ONNX Runtime. ``options``: :func:`rnnx.export.export`'s other keywords (``output_names``)."""
    with tempfile.TemporaryDirectory() as tmp:
        target_dir = Path(out_dir or tmp)
        result = export(module, example_inputs, target_dir, target="onnxruntime", **options)
        assert result.parity is not None and result.parity.passed, result.parity
        yield result, rnnx.runtime.load(target_dir, backend="onnxruntime")


def parity_numbers(result: ExportResult) -> dict[str, Any]:
    """The export's parity report as the examples return it: passed, worst relative error and verdict."""
    assert result.parity is not None, "the export ran no parity check"
    return {
        "parity_passed": result.parity.passed,
        "parity_worst_rel": result.parity.worst_rel,
        "parity_verdict": result.parity.verdict(),
    }


def print_report(templates: Iterable[str], numbers: dict[str, Any]) -> None:
    """Prints one line per ``str.format`` template, filled in with an example's ``main()`` numbers
    (``"accuracy {accuracy:.4f}"``, ``"tags: {tags[0]}"``)."""
    for template in templates:
        print(template.format(**numbers))
