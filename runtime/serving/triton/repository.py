"""Writes a Triton Inference Server model repository for an rnnx export (the variants of :mod:`.config`).

Layout, for a model named ``NAME`` in repository ``REPO``::

    REPO/NAME/config.pbtxt
    REPO/NAME/1/model.onnx  [+ model.onnx.data]       onnxruntime variant
    REPO/NAME/1/model.plan                            tensorrt variant (an engine built on the target GPU)
    REPO/NAME/plugins/librnnx_trt_plugins_static.so   tensorrt variant: start tritonserver with
                                                      --backend-config=tensorrt,plugins=<that path>
    REPO/NAME/1/model.py + REPO/NAME/1/export/        python variant: the whole export beside model.py

Each model directory is built in a scratch directory beside ``REPO`` (never inside it: Triton would take
it for a model) and moved in with ``os.replace``; an existing entry is moved aside first and put back if
the move fails, so it is replaced only by a complete new one (a server polling the repository may see
the name missing for that instant). Other models in the repository are never touched.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Optional, Union

from ...contract.artifact import EXPORT_FILES, METADATA_FILE, external_data_file, read_metadata
from .config import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_BATCH_SIZE,
    TritonConfigError,
    Variant,
    graph_config,
    python_config,
)  # fmt: skip
from .config import (
    variant as as_variant,
)

#: The Python variant's ``<version>/model.py``: Triton's stub imports the class from rnnx.
PYTHON_MODEL_PY = "from rnnx.runtime.serving.triton.python_model import TritonPythonModel  # noqa: F401\n"
#: Where the tensorrt variant keeps its plugin library, relative to the model directory.
PLUGIN_DIR = "plugins"
VERSION = "1"


def model_name(export_dir: Union[str, os.PathLike], variant: Union[str, Variant]) -> str:
    """``<export dir name>_<variant>``, with characters other than letters, digits, ``-``, ``_`` replaced."""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", Path(export_dir).resolve().name) or "model"
    return f"{base}_{as_variant(variant).name}"


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_repository(
    export_dir: Union[str, os.PathLike],
    repo_dir: Union[str, os.PathLike],
    variant: Union[str, Variant] = "python",
    name: Optional[str] = None,
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_streams: int = 64,
    instances: int = 1,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    backend: str = "onnxruntime",
    plan: Optional[Union[str, os.PathLike]] = None,
    plugin_library: Optional[Union[str, os.PathLike]] = None,
    conversation_dir: Optional[Union[str, os.PathLike]] = None,
) -> Path:
    """Writes ``repo_dir/<name>`` for the export in ``export_dir`` and returns that directory.

    ``variant``: ``python`` (rnnx's scheduler inside Triton's Python backend, ``max_streams`` per
    instance, rnnx backend ``backend``), ``onnxruntime`` (Triton's ONNX Runtime backend with implicit
    state, ``max_batch_size``) or ``tensorrt`` (Triton's TensorRT backend: ``plan`` is the engine file
    built for the serving GPU, e.g. by ``export-model --engine``, and ``plugin_library`` the
    self-registering rnnx plugin library, default the built one). ``conversation_dir`` (python variant): the
    directory of parked conversations that every instance, and every server given the same directory, shares
    (default: each instance keeps them in its memory). Raises
    :class:`~rnnx.runtime.serving.triton.config.TritonConfigError` (one line) for what cannot be served.
    """
    record = as_variant(variant)
    export_dir = Path(export_dir)
    metadata = read_metadata(export_dir)
    why = record.refusal(metadata)
    if why is not None:
        raise TritonConfigError(f"{export_dir}: {why}")
    name = name or model_name(export_dir, record)
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise TritonConfigError(f"model name {name!r}: use letters, digits, '-' and '_'")
    for what, value in (("max_batch_size", max_batch_size), ("max_streams", max_streams), ("instances", instances)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if what == "max_batch_size" else 1):
            raise TritonConfigError(f"{what}: expected a positive integer, got {value!r}")
    if conversation_dir is not None and record.platform is not None:
        raise TritonConfigError(f"conversation_dir: only the python variant parks conversations, not {record.name}")
    sources: dict[str, Path] = {}
    if record.needs_engine:
        if plan is None or not Path(plan).is_file():
            raise TritonConfigError(
                f"the tensorrt variant needs the engine built for the serving GPU (plan=, or export-model --engine); "
                f"got {plan!r}"
            )
        library = Path(plugin_library) if plugin_library else _static_plugin_library()
        if library is None or not library.is_file():
            raise TritonConfigError(
                f"rnnx TensorRT plugin library not found ({library}); build it: python -m rnnx.plugins"
            )
        sources = {f"{VERSION}/{record.model_file}": Path(plan), f"{PLUGIN_DIR}/{library.name}": library}
        config = graph_config(metadata, name, record, max_batch_size, instances, idle_timeout_s)
        config = (
            f"# Start tritonserver with --backend-config=tensorrt,plugins=<this dir>/{PLUGIN_DIR}/{library.name}\n"
            + config
        )
    elif record.platform is not None:
        files = [record.model_file] + ([external_data_file(metadata)] if external_data_file(metadata) else [])
        sources = {f"{VERSION}/{f}": export_dir / f for f in files}
        config = graph_config(metadata, name, record, max_batch_size, instances, idle_timeout_s)
    else:
        files = [f for f in (*EXPORT_FILES, METADATA_FILE) if (export_dir / f).is_file()]
        sources = {f"{VERSION}/export/{f}": export_dir / f for f in files}
        shared = None if conversation_dir is None else str(Path(conversation_dir).resolve())
        config = python_config(
            name, max_streams, instances, idle_timeout_s, backend=backend, export_dir="export", conversation_dir=shared
        )
    repo_dir = Path(repo_dir)
    repo_dir.mkdir(parents=True, exist_ok=True)
    # Built beside the repository (Triton would take a directory inside it for a model), on the same
    # filesystem, then swapped in: the old entry is moved aside first and put back if the swap fails.
    scratch = Path(tempfile.mkdtemp(prefix=f".{repo_dir.name}.{name}.", dir=repo_dir.resolve().parent))
    try:
        staging = scratch / name
        (staging / VERSION).mkdir(parents=True)
        for rel, src in sources.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            _link_or_copy(src, staging / rel)
        if record.platform is None:
            (staging / VERSION / record.model_file).write_text(PYTHON_MODEL_PY)
        (staging / "config.pbtxt").write_text(config)
        staging.chmod(0o755)
        target = repo_dir / name
        if target.exists():
            os.replace(target, scratch / "old")
            try:
                os.replace(staging, target)
            except OSError:
                os.replace(scratch / "old", target)
                raise
        else:
            os.replace(staging, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return repo_dir / name


def _static_plugin_library() -> Optional[Path]:
    """The self-registering plugin library (what Triton's TensorRT backend loads with dlopen), if built."""
    try:
        from rnnx import plugins
    except ImportError:
        return None
    try:
        path = plugins.plugin_library_path(kind="dlopen")
    except Exception:  # not built: treated as absent
        return None
    return Path(path) if path is not None else None
