"""The export targets and precisions as records: what each one means, written once.

A **target** is the runtime an export's graph is laid out for (docs/export.md, "Targets"); a **precision** is
the dtype of its weights and activations (state is fp32 in every precision). Code asks a record what it
needs to know (``target.every_input_present``, ``precision.tolerance``) instead of comparing names; the
names themselves appear in this module, in the CLI's choices and in ``rnnx.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

#: Quantized weight formats (``Target.quantization_format``).
MATMUL_NBITS = "MatMulNBits"
DEQUANTIZE_LINEAR = "DequantizeLinear"


@dataclass(frozen=True)
class Target:
    """One export target.

    ``every_input_present``: every rnnx node has all its inputs at fixed positions, no empty slot (TensorRT's
    ONNX parser hands a plugin its node's inputs by position); else absent optional inputs are left out.
    ``function_overloads``: each op's local function is specialised per structure with IR-10 overloads; else
    one function per op whose body reads the structure from the node's attributes (TensorRT keys local
    functions by name only). ``contrib_ops``: the graph may use ONNX Runtime's ``com.microsoft`` ops (the
    attention lowered to ``LinearAttention``). ``quantization_format``: how weight-only quantization is
    written (:data:`MATMUL_NBITS` or :data:`DEQUANTIZE_LINEAR`). ``builds_engine``: TensorRT engines (and
    Triton's tensorrt variant) are built from exports of this target. ``custom_domain``: the graph keeps rnnx's
    custom nodes (domain ``rnnx``, each with its model-local function); else the functions are inlined, so the
    file holds standard ops only (default-domain opset :data:`PORTABLE_OPSET`: ``LinearAttention`` and
    ``CausalConvWithState`` are standard there) and any runtime of that opset runs it.
    """

    name: str
    every_input_present: bool
    function_overloads: bool
    contrib_ops: bool
    quantization_format: str
    builds_engine: bool
    custom_domain: bool = True


TENSORRT = Target("tensorrt", every_input_present=True, function_overloads=False, contrib_ops=False,
                  quantization_format=DEQUANTIZE_LINEAR, builds_engine=True)  # fmt: skip
ONNXRUNTIME = Target("onnxruntime", every_input_present=False, function_overloads=True, contrib_ops=True,
                     quantization_format=MATMUL_NBITS, builds_engine=False)  # fmt: skip
#: The default-domain opset of the portable target (the one that standardised the linear-recurrence family).
PORTABLE_OPSET = 27
ONNX = Target("onnx", every_input_present=False, function_overloads=True, contrib_ops=False,
              quantization_format=DEQUANTIZE_LINEAR, builds_engine=False, custom_domain=False)  # fmt: skip
#: Every target by name, the default (the CLI's and ``export``'s) first.
TARGET_RECORDS = {t.name: t for t in (TENSORRT, ONNXRUNTIME, ONNX)}
#: The target names, the default first.
TARGETS = tuple(TARGET_RECORDS)


@dataclass(frozen=True)
class Precision:
    """One precision.

    ``dtype``: the dtype name of its weights and activations (numpy's and ``rnnx.json``'s spelling).
    ``tolerance``: the largest accepted relative error (``max |got - want| / max |want|``, per tensor and call)
    of a backend against the fp32 PyTorch model (the fp16 figure covers fp16 weights and activations over a
    long chain of decode steps). ``exported``: the exporter writes it (and ONNX Runtime runs it). ``engine``:
    TensorRT engines are built in it (strongly typed, from an export of it). ``torch``: the torch backend runs
    a checkpoint cast to it.
    ``reference``: the precision models are defined and checked in (fp32): an export in it uses the model as
    it is, and a TensorRT engine in it must not round matmuls to TF32.
    """

    name: str
    dtype: str
    tolerance: float
    exported: bool
    engine: bool
    torch: bool = True
    reference: bool = False


FP32 = Precision("fp32", "float32", 1e-4, exported=True, engine=True, reference=True)
FP16 = Precision("fp16", "float16", 1e-2, exported=True, engine=True)
BF16 = Precision("bf16", "bfloat16", 3e-2, exported=False, engine=False)
#: Every precision by name.
PRECISION_RECORDS = {p.name: p for p in (FP32, FP16, BF16)}
#: The precisions an export (and a TensorRT engine) comes in.
PRECISIONS = tuple(name for name, p in PRECISION_RECORDS.items() if p.exported)
#: The precisions a TensorRT engine is built in.
ENGINE_PRECISIONS = tuple(name for name, p in PRECISION_RECORDS.items() if p.engine)
#: Tolerance by precision name.
TOLERANCES = {name: p.tolerance for name, p in PRECISION_RECORDS.items()}


def target(name: Union[str, Target]) -> Target:
    """The :class:`Target` named ``name`` (a Target is returned as it is); ValueError naming the choices."""
    found = name if isinstance(name, Target) else TARGET_RECORDS.get(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"unknown target {name!r}; supported: {', '.join(TARGETS)}")
    return found


def precision(name: Union[str, Precision], exported: bool = True) -> Precision:
    """The :class:`Precision` named ``name`` (a Precision is returned as it is; ``exported``: one an export comes
    in); ValueError naming the choices."""
    found = name if isinstance(name, Precision) else PRECISION_RECORDS.get(name) if isinstance(name, str) else None
    if found is None or (exported and not found.exported):
        choices = PRECISIONS if exported else tuple(PRECISION_RECORDS)
        raise ValueError(f"unsupported precision {name!r}; supported: {', '.join(choices)}")
    return found


def exported_target(metadata: Mapping[str, Any]) -> Target:
    """The :class:`Target` an export's ``rnnx.json`` records."""
    return target(metadata["target"])


def exported_precision(metadata: Mapping[str, Any]) -> Precision:
    """The :class:`Precision` an export's ``rnnx.json`` records (fp32 where it records none)."""
    return precision(metadata.get("precision", FP32.name))
