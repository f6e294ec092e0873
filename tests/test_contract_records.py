"""The records that replace name comparisons (issue 29): targets, precisions, backends, Triton variants.

Each record is the one place its facts are written; these tests hold the places that still spell a name (the
native runtime's C++ tables, ``rnnx.json``, the CLI's choices) to the records, and check that behaviour follows
the records' fields.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rnnx.runtime.backends import AUTO_ORDER, BACKEND_KINDS, BACKENDS
from rnnx.runtime.contract import targets
from rnnx.runtime.serving.triton.config import DEFAULT_VARIANTS, VARIANT_RECORDS, TritonConfigError, variant

NATIVE_SRC = Path(targets.__file__).resolve().parents[1] / "native" / "src"


def test_records_are_looked_up_by_name_and_refuse_others():
    assert targets.target("onnxruntime") is targets.ONNXRUNTIME
    assert targets.target(targets.TENSORRT) is targets.TENSORRT
    with pytest.raises(ValueError, match=r"unknown target 'openvino'; supported: tensorrt, onnxruntime"):
        targets.target("openvino")
    assert targets.precision("fp16") is targets.FP16
    with pytest.raises(ValueError, match=r"unsupported precision 'bf16'; supported: fp32, fp16"):
        targets.precision("bf16")
    assert targets.precision("bf16", exported=False) is targets.BF16
    assert targets.exported_target({"target": "tensorrt"}).builds_engine
    assert targets.exported_precision({}) is targets.FP32  # rnnx.json before precisions were recorded


def test_the_tables_derived_from_the_records():
    assert targets.TARGETS == ("tensorrt", "onnxruntime", "onnx")  # the CLI's default first
    assert targets.PRECISIONS == ("fp32", "fp16")
    assert targets.ENGINE_PRECISIONS == ("fp32", "fp16")  # bf16: no export produces it, so no engine either
    assert [p.name for p in targets.PRECISION_RECORDS.values() if p.reference] == ["fp32"]
    assert targets.TOLERANCES["fp32"] < targets.TOLERANCES["fp16"] < targets.TOLERANCES["bf16"]


def test_the_engine_builder_flags_follow_the_reference_precision():
    from rnnx.runtime.tensorrt.builder import builder_flags

    assert builder_flags("fp32") == {"TF32": False}
    assert builder_flags(targets.FP16) == {}


def _cpp_rows(text: str, table: str) -> list[tuple[str, ...]]:
    body = re.search(rf"{table}\[\] = \{{(.*?)\}};", text, re.S)
    assert body is not None, f"{table} not found"
    return [tuple(x.strip().strip('"') for x in row.split(",")) for row in re.findall(r"\{([^{}]*)\}", body[1])]


def test_the_native_runtime_tables_match_the_records():
    """The C API reads rnnx.json itself: its target / precision / backend tables are the records' rows."""
    header = (NATIVE_SRC / "artifact.h").read_text()
    want_targets = [(t.name, str(t.builds_engine).lower()) for t in targets.TARGET_RECORDS.values()]
    assert _cpp_rows(header, "kTargets") == want_targets
    want_precisions = [(p.name, p.dtype) for p in targets.PRECISION_RECORDS.values() if p.exported]
    assert _cpp_rows(header, "kPrecisions") == want_precisions
    backends = _cpp_rows((NATIVE_SRC / "backend.h").read_text(), "kBackends")
    assert {row[0] for row in backends} <= set(BACKENDS)
    assert {row[0]: row[1] for row in backends} == {
        k.name: ("cuda" if k.cuda_only else "cpu") for k in BACKEND_KINDS.values() if not k.runs_checkpoints
    }


def test_backend_kinds():
    assert BACKENDS == ("torch", "onnxruntime", "tensorrt")
    assert [k.name for k in BACKEND_KINDS.values() if k.runs_checkpoints] == ["torch"]
    assert AUTO_ORDER[-1].runs_checkpoints  # the last resort for an export: its source checkpoint
    assert [k.name for k in BACKEND_KINDS.values() if "io_binding" in k.options] == ["onnxruntime"]


def test_triton_variants(tmp_path):
    assert variant("tensorrt").needs_engine and variant("tensorrt").profiles == ("0", "1")
    with pytest.raises(TritonConfigError, match="variant 'vllm': expected one of onnxruntime, tensorrt, python"):
        variant("vllm")
    lm_on_ort = {"target": "onnxruntime", "vocab_size": 16}
    assert [v.name for v in DEFAULT_VARIANTS if v.refusal(lm_on_ort) is None] == ["python", "onnxruntime"]
    module_on_trt = {"target": "tensorrt"}
    assert [v.name for v in DEFAULT_VARIANTS if v.refusal(module_on_trt) is None] == ["onnxruntime", "tensorrt"]
    assert set(VARIANT_RECORDS) == {v.name for v in DEFAULT_VARIANTS}
    kv = {"name": "kv.key", "shape": ["batch", 2, "past_length", 4], "dtype": "float32", "grows": True}
    hybrid_on_ort = {**lm_on_ort, "state": [kv]}
    assert [v.name for v in DEFAULT_VARIANTS if v.refusal(hybrid_on_ort) is None] == ["python"]
    assert "grow with the context" in variant("onnxruntime").refusal(hybrid_on_ort)
