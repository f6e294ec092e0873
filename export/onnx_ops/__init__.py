"""The ONNX side of the rnnx custom ops (one record per op, listed in :mod:`.registry`).

Usage, with ``t`` one of :data:`TARGETS`::

    with custom_op_schemas():
        program = torch.onnx.export(model, args, dynamo=True,
                                    custom_translation_table=translation_table(t), ...)
    model_proto = finalize(program.model_proto, t)

``finalize`` adds a model-local function with a standard-op body for every rnnx node, so the file
passes ``onnx.checker`` (full check) and runs on stock ONNX Runtime; TensorRT maps the same nodes to
the rnnx plugins by op type, ``plugin_version`` and ``plugin_namespace``. For the ``onnxruntime`` target,
``fuse_skip_layer_norm`` then writes the residual sums and their layer norms as ONNX Runtime's fused node.
"""

from __future__ import annotations

from rnnx.runtime.contract.targets import TARGETS

from .finalize import finalize
from .lean import fuse_skip_layer_norm
from .registry import custom_op_schemas, translation_table
from .schemas import op_schema

__all__ = ["TARGETS", "custom_op_schemas", "finalize", "fuse_skip_layer_norm", "op_schema", "translation_table"]
