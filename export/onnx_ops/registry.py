"""The exporter's list of rnnx ops: one :class:`~.op_export.OpExport` record per op, each defined beside its bodies.

Everything in :mod:`rnnx.export.onnx_ops` that needs every op (the translation table, the ONNX schemas,
:func:`~.finalize.finalize`) reads :data:`EXPORTS`; adding an op adds one line here.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any, Union

import onnx
import torch

from rnnx.runtime.contract import ops as spec
from rnnx.runtime.contract import targets
from rnnx.runtime.contract.targets import Target

from .attention_function import ATTENTION_EXPORT
from .op_export import OpExport
from .recurrence_family import CAUSAL_CONV_EXPORT, LINEAR_RECURRENCE_EXPORT
from .schemas import op_schema
from .sru_function import SRU_EXPORT

#: Every op the exporter writes, in ``ALL_OPS`` order and then the recurrence family.
EXPORTS: tuple[OpExport, ...] = (SRU_EXPORT, ATTENTION_EXPORT, LINEAR_RECURRENCE_EXPORT, CAUSAL_CONV_EXPORT)
#: The records by ONNX op type.
BY_ONNX_NAME: dict[str, OpExport] = {e.spec.onnx_name: e for e in EXPORTS}


def _torch_op(op: spec.OpSpec) -> torch._ops.OpOverload:
    return getattr(getattr(torch.ops, spec.TORCH_NAMESPACE), op.torch_name).default


def translation_table(target: Union[str, Target]) -> dict[torch._ops.OpOverload, Callable[..., Any]]:
    """``{torch.ops.rnnx.<op>.default: translation function}`` for ``target`` (a :class:`Target` or its name): nodes
    with every input at its position when the target needs that (``every_input_present``), else with absent
    inputs left out. Importing each op's ``torch_module`` registers its torch op."""
    target = targets.target(target)
    for entry in EXPORTS:
        importlib.import_module(entry.torch_module)
    return {_torch_op(entry.spec): entry.translation(target) for entry in EXPORTS}


def _registered(op: spec.OpSpec) -> bool:
    return onnx.defs.has(op.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN)


@contextlib.contextmanager
def custom_op_schemas() -> Iterator[None]:
    """Registers the ``OpSchema`` of every op of :data:`EXPORTS` (:func:`~.schemas.op_schema`) for the block and
    deregisters them on exit.

    Re-entrant: schemas that were already registered when the block starts are left alone.
    """
    added = []
    try:
        for op in (entry.spec for entry in EXPORTS):
            if not _registered(op):
                onnx.defs.register_schema(op_schema(op))
                added.append(op)
        yield
    finally:
        for op in reversed(added):
            onnx.defs.deregister_schema(op.onnx_name, spec.ONNX_DOMAIN_VERSION, spec.ONNX_DOMAIN)
