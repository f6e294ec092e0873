"""rnnx checkpoints: a directory holding ``config.json`` and the weights ``model.pt``.

``config.json``::

    {"format": "rnnx-checkpoint", "format_version": 1,
     "model_type": "linear_transformer" | "sru" | "srupp",
     "config": {...constructor keyword arguments...},
     "weights_file": "model.pt", "weights_sha256": "<hex digest of the weights file>",
     "metrics": {...}, "task": {...}}

The weights are a ``state_dict`` written with ``torch.save`` and read with
``torch.load(weights_only=True)``. :func:`save_checkpoint` writes a sibling temporary directory and
renames it into place, so a good checkpoint is never left half-overwritten. :func:`load_checkpoint`
validates everything and raises :class:`CheckpointError` with one line naming the file and the problem.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

import torch

from ..runtime.contract.artifact import read_json_file, sha256_file
from .lm import RecurrentLM
from .registry import MODEL_TYPES, build_model, model_type_of

FORMAT = "rnnx-checkpoint"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pt"
#: Demo checkpoints shipped as package data under ``rnnx/models/checkpoints/<name>/``.
DEMO_CHECKPOINTS = ("linear_transformer_copy", "srupp_linear_copy")

PathLike = Union[str, os.PathLike]


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the file and the problem."""


def demo_checkpoint_path(name: str) -> Path:
    """Directory of the shipped demo checkpoint ``name`` (one of :data:`DEMO_CHECKPOINTS`)."""
    if name not in DEMO_CHECKPOINTS:
        raise KeyError(f"unknown demo checkpoint {name!r}; known: {', '.join(DEMO_CHECKPOINTS)}")
    return Path(__file__).resolve().parent / "checkpoints" / name


def save_checkpoint(
    model: RecurrentLM,
    path: PathLike,
    metrics: Optional[dict[str, Any]] = None,
    task: Optional[dict[str, Any]] = None,
) -> Path:
    """Writes ``model`` as a checkpoint directory at ``path`` (replacing one there) and returns it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    info = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model_type": model_type_of(model),
        "config": model.config,
        "weights_file": WEIGHTS_FILE,
        "weights_sha256": "",
        "metrics": metrics or {},
        "task": task or {},
    }
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a checkpoint is ordinary readable data
        state_dict = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        torch.save(state_dict, tmp / WEIGHTS_FILE)
        info["weights_sha256"] = sha256_file(tmp / WEIGHTS_FILE)
        (tmp / CONFIG_FILE).write_text(json.dumps(info, indent=2, sort_keys=False) + "\n")
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _read_info(config_path: Path) -> dict[str, Any]:
    info = read_json_file(config_path, "checkpoint config file", CheckpointError)
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        found = info.get("format") if isinstance(info, dict) else type(info).__name__
        raise CheckpointError(f"{config_path}: not an rnnx checkpoint (format marker {found!r}, expected {FORMAT!r})")
    if info.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{config_path}: unsupported format_version {info.get('format_version')!r} (supported: {FORMAT_VERSION})"
        )
    known = MODEL_TYPES
    if info.get("model_type") not in known:
        raise CheckpointError(
            f"{config_path}: unknown model_type {info.get('model_type')!r}; known: {', '.join(sorted(known))}"
        )
    if not isinstance(info.get("config"), dict):
        raise CheckpointError(f"{config_path}: 'config' must be an object of constructor arguments")
    return info


def _check_state_dict(weights_path: Path, model: RecurrentLM, state_dict: Any) -> None:
    if not isinstance(state_dict, dict):
        raise CheckpointError(f"{weights_path}: weights are a {type(state_dict).__name__}, not a state_dict")
    expected = model.state_dict()
    missing = [k for k in expected if k not in state_dict]
    unexpected = [k for k in state_dict if k not in expected]
    if missing:
        raise CheckpointError(f"{weights_path}: missing tensors in state_dict: {', '.join(missing)}")
    if unexpected:
        raise CheckpointError(f"{weights_path}: unexpected tensors in state_dict: {', '.join(unexpected)}")
    for name, want in expected.items():
        got = state_dict[name]
        if not isinstance(got, torch.Tensor):
            raise CheckpointError(f"{weights_path}: {name} is a {type(got).__name__}, not a tensor")
        if got.shape != want.shape:
            raise CheckpointError(
                f"{weights_path}: tensor {name} has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
            )


def load_checkpoint(
    path: PathLike, map_location: Union[str, torch.device] = "cpu"
) -> tuple[RecurrentLM, dict[str, Any]]:
    """Loads a checkpoint directory (or its ``config.json``) -> ``(model in eval mode, info dict)``.

    Raises :class:`CheckpointError` for anything that is not a valid, intact rnnx checkpoint.
    """
    path = Path(path)
    if path.name == CONFIG_FILE and not path.is_dir():
        directory, config_path = path.parent, path
    else:
        directory, config_path = path, path / CONFIG_FILE
    if path.is_file() and path.name != CONFIG_FILE:
        raise CheckpointError(f"{path}: not a checkpoint directory nor its {CONFIG_FILE}")
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: checkpoint directory does not exist")
    info = _read_info(config_path)
    try:
        model = build_model(info["model_type"], info["config"])
    except (TypeError, ValueError) as e:  # unknown or invalid constructor arguments
        raise CheckpointError(f"{config_path}: bad config for model_type {info['model_type']!r}: {e}") from None
    weights_path = directory / str(info.get("weights_file", WEIGHTS_FILE))
    if not weights_path.is_file():
        raise CheckpointError(f"{weights_path}: missing weights file")
    expected_sha = info.get("weights_sha256")
    if expected_sha and sha256_file(weights_path) != expected_sha:
        raise CheckpointError(f"{weights_path}: sha256 mismatch, the weights file is corrupt or was replaced")
    try:
        state_dict = torch.load(weights_path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises several types for a bad file: report them all the same way
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{weights_path}: unreadable weights (not a torch file or truncated: {reason})") from None
    _check_state_dict(weights_path, model, state_dict)
    model.load_state_dict(state_dict)
    return model.to(map_location).eval(), info
