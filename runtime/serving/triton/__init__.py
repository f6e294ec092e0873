"""Triton Inference Server model repositories for rnnx exports.

:func:`write_repository` writes one model directory of a variant (``python``, ``onnxruntime``,
``tensorrt``; see :mod:`.config`), as ``export-model --triton-repo DIR`` does; :mod:`.python_model` is the
Python-backend model of the ``python`` variant. Torch-free, like the rest of ``rnnx.runtime``.
"""

from __future__ import annotations

from .config import VARIANTS, TritonConfigError, graph_config, python_config
from .repository import model_name, write_repository

__all__ = ["VARIANTS", "TritonConfigError", "graph_config", "model_name", "python_config", "write_repository"]
