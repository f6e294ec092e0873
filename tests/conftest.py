"""Shared fixtures: the shipped demo models exported once per test session.

Exporting is the slowest thing the suite does, so every test that needs an export of a demo model
takes it from here instead of exporting its own copy:

* ``demo_exports``: ``{(demo name, target): export dir}`` for every shipped demo and both targets,
  exported without the parity check (the tests run their own) and without the onnxruntime-genai variant
  (tests/test_genai.py adds it to copies of the onnxruntime ones, so only the worker that runs that file
  traces a genai graph);
* ``demo_cli_export``: ``export-model`` with no arguments, run in an empty working directory (the main
  job of the README): ``(cwd, click result)``; its export has the parity files;
* ``softmax_srupp_export``: a small SRU++ language model with softmax attention (a KV cache that grows), random
  weights (torch seed 0), exported for the onnxruntime target: the runtimes in other languages check a growing
  state on it.

Tests must not modify these directories; one that needs to, copies it first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rnnx.models.checkpoint import DEMO_CHECKPOINTS, demo_checkpoint_path
from rnnx.runtime.contract.artifact import TARGETS

DEMO_EXPORT_CASES = [(name, target) for name in DEMO_CHECKPOINTS for target in TARGETS]


@pytest.fixture(scope="session")
def demo_exports(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    from rnnx.export import export_model

    root = tmp_path_factory.mktemp("demo_exports")
    return {
        (name, target): export_model(
            str(demo_checkpoint_path(name)),
            root / f"{name}-{target}",
            target=target,
            check=False,
        ).out_dir
        for name, target in DEMO_EXPORT_CASES
    }


@pytest.fixture(scope="session")
def demo_cli_export(tmp_path_factory: pytest.TempPathFactory):
    """``export-model`` with no arguments in an empty working directory: ``(cwd, click Result)``."""
    from click.testing import CliRunner

    from rnnx.export.cli import main

    cwd = tmp_path_factory.mktemp("cli-demo")
    before = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, [], catch_exceptions=False)
    finally:
        os.chdir(before)
    return cwd, result


@pytest.fixture(scope="session")
def softmax_srupp_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from rnnx.export import export_model
    from rnnx.models import build_model
    from rnnx.runtime.contract.targets import ONNXRUNTIME

    torch.manual_seed(0)
    config = {"vocab_size": 12, "embed_dim": 32, "hidden_size": 32, "proj_size": 16, "num_layers": 2,
              "attention": "softmax"}  # fmt: skip
    model = build_model("srupp", config)
    return export_model(model, tmp_path_factory.mktemp("softmax_srupp"), target=ONNXRUNTIME.name, check=False).out_dir


@pytest.fixture(scope="module")
def demo_sessions(demo_exports) -> dict:
    """(demo, backend) -> a fresh ``Session`` per test module: the checkpoint on torch, and the ``onnxruntime``-target
    export on ONNX Runtime."""
    import rnnx.runtime as rt

    out = {}
    for name in DEMO_CHECKPOINTS:
        out[(name, "torch")] = rt.load(demo_checkpoint_path(name))
        out[(name, "onnxruntime")] = rt.load(demo_exports[(name, "onnxruntime")], backend="onnxruntime")
    return out
