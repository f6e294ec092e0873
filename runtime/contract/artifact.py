"""The rnnx artifact contract: what an export directory holds and how its graph is called.

This module is the one place that defines the names, axes, dtypes, files and metadata layout that the
exporter writes and every runtime reads. It imports only the standard library and numpy, so a machine
that serves an export on ONNX Runtime needs neither torch nor onnx (``pip install "rnnx[onnxruntime]"``).
A native runtime reads the same facts from ``rnnx.json``: nothing here is needed to interpret it.

An export directory::

    model.onnx                  the graph (prefill and decode in one)
    model.onnx.data             the graph's weights, only in an export with external data (below)
    rnnx.json                   this contract's metadata (below), written last
    parity.json                 the export's parity report (with --check)
    parity_reference.npz        the PyTorch side of the parity run, replayable without torch
    polygraphy_inputs.json      the same calls for ``polygraphy run --load-inputs / --load-outputs``
    polygraphy_outputs.json

Every graph is ``inputs..., past state... -> outputs..., present state...``. Two interfaces:

* ``"causal_lm"`` (an rnnx language model, :func:`lm_io`)::

    inputs   input_ids (batch, length) int64, attention_mask (batch, length) int64 (1 = token, 0 = pad),
             past_key_values.<state name> ...
    outputs  logits (batch, length, vocab) fp32 / fp16, present.<state name> ...

* ``"stateful"`` (any module, ``rnnx.export.export``): the module's own inputs and outputs, named and
  shaped as ``inputs`` / ``outputs`` say (axis names the user declared, usually ``batch`` and
  ``length``), then the state as above; no ``vocab_size``. A stateless module has no state tensors.

``rnnx.json`` (format ``rnnx-onnx``, version 2; version 1, the same without ``"stateful"``, still reads)::

    {"format": "rnnx-onnx", "format_version": 2, "interface": "causal_lm" | "stateful",
     "model_file": "model.onnx", "model_sha256": "<hex>",
     "external_data": {"file": "model.onnx.data", "sha256": "<hex>"} | null (absent: null),
     "model_type": "srupp", "config": {...}, "vocab_size": 12 (causal_lm only),
     "target": "tensorrt" | "onnxruntime", "precision": "fp32" | "fp16", "opset": 20,
     "inputs":  [{"name": "input_ids", "shape": ["batch", "length"], "dtype": "int64"}, ...],
     "outputs": [{"name": "logits", "shape": ["batch", "length", 12], "dtype": "float32"}, ...],
     "state": [{"name": "c", "input": "past_key_values.c", "output": "present.c",
                "shape": [4, "batch", 128], "dtype": "float32", "grows": false}, ...],
     "ops": [{"name": "SRUScan", "domain": "rnnx", "version": 1,
              "plugin_version": "1", "plugin_namespace": "rnnx"}, ...],
     "opset_imports": {"": 20, "rnnx": 1},
     "source": {"checkpoint": "/abs/path" | null, "weights_sha256": "<hex>" | null,
                "factory": "package.module:function" | "/abs/file.py:function" | null (stateful only),
                "factory_root": "/abs/folder package was imported from" | null (stateful only),
                "weights": "/abs/weights.pt" | null (stateful only)},
     "versions": {"rnnx": ..., "torch": ..., "onnx": ..., "onnxscript": ...},
     "signature": "<hex>" (model_signature below, for runtimes in other languages; absent in older exports),
     "quantization": {"scheme": "int4", "bits": 4, "block_size": 32, "symmetric": true,
                      "format": "MatMulNBits" | "DequantizeLinear", "accuracy_level": 4 | null,
                      "head": "fp", "embedding": false, "quantized": [...], "excluded": [...],
                      "tool": "...", "tool_version": "..."} | null (absent: null; export-model --quantize),
     "onnxruntime": {"session_config": {"optimization.disable_specified_optimizers": "NchwcTransformer"}}
                    (ORT_SESSION_CONFIG below; absent in older exports),
     "text": {"tokenizer": "tokenizer.json", "tokenizer_sha256": "<hex>", "chat_template": "chat_template.jinja" | null,
              "bos_token": "<s>" | null, "eos_token": "</s>" | null, "eos_token_ids": [2, ...]}
             | null (absent: null; an export of a transformers checkpoint with a tokenizer, docs/checkpoints.md),
     "parity": {...} | null}

Shapes hold ints and axis names (:data:`BATCH`, :data:`LENGTH`, :data:`PAST_LENGTH`, or one a stateful
export declared); a growing KV cache's ``present`` has ``past_length + length`` along its ``past_length``
axis. Every state tensor has a ``batch`` axis. dtypes are numpy's
spellings (``float32``, ``bool``; ``bfloat16`` where a graph has it).

External data: a serialized ONNX protobuf cannot exceed 2 GB, so an export whose weights pass that
(or one asked for it) keeps its tensors in :data:`EXTERNAL_DATA_FILE` beside ``model.onnx``, which
names that file (a path relative to the model's directory) in its initializers. ONNX Runtime and
TensorRT's ``parse_from_file`` resolve it against the model's path, so a runtime always opens the model by
path and keeps the two files together. ``model_sha256`` then covers only the graph; ``external_data``
records the data file's sha256, which :func:`read_metadata` checks like the model's.

The layout above is also a JSON Schema (draft 2020-12), ``runtime/contract/rnnx.schema.json``, and a state file's
header is ``rnnx-state.schema.json`` beside it: both are generated from this module's records (``TABLES``,
``STATE_HEADER``, below) by ``python3 -m rnnx.runtime.contract.schema --write``, together with the tables the C API and
the JavaScript runtime read ``rnnx.json`` with. Every reader checks in one order and refuses with one text
(``REFUSALS``; "metadata: the records every reader checks" below).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

# TOLERANCES: one of the contract's names, defined there
from .targets import DEQUANTIZE_LINEAR, MATMUL_NBITS, PRECISION_RECORDS, PRECISIONS, TARGETS, TOLERANCES  # noqa: F401

# -- names ---------------------------------------------------------------------------------------

#: Graph input: token ids (batch, length) int64.
INPUT_IDS = "input_ids"
#: Graph input: (batch, length) int64, 1 = token, 0 = pad (a pad never changes a row's state).
ATTENTION_MASK = "attention_mask"
#: Graph output: next-token logits (batch, length, vocab).
LOGITS = "logits"
#: A state tensor named ``<name>`` enters as ``past_key_values.<name>`` and leaves as ``present.<name>``.
PAST_PREFIX = "past_key_values."
PRESENT_PREFIX = "present."

#: Symbolic axes of the graph and of the metadata shapes.
BATCH, LENGTH, PAST_LENGTH = "batch", "length", "past_length"
AXES = (BATCH, LENGTH, PAST_LENGTH)

#: What the graph computes: a causal language model (:func:`lm_io`), or any module with state.
CAUSAL_LM = "causal_lm"
STATEFUL = "stateful"
INTERFACES = (CAUSAL_LM, STATEFUL)

# -- files and format ------------------------------------------------------------------------------

FORMAT = "rnnx-onnx"
FORMAT_VERSION = 2
#: Versions this reader accepts (1: causal_lm only).
READABLE_FORMAT_VERSIONS = (1, 2)
METADATA_FILE = "rnnx.json"
MODEL_FILE = "model.onnx"
PARITY_FILE = "parity.json"
PARITY_REFERENCE_FILE = "parity_reference.npz"
POLYGRAPHY_INPUTS = "polygraphy_inputs.json"
POLYGRAPHY_OUTPUTS = "polygraphy_outputs.json"
#: The weights of an export with external data, beside :data:`MODEL_FILE` (the ONNX ``location`` of
#: every external tensor); named in ``rnnx.json`` ``"external_data"``.
EXTERNAL_DATA_FILE = MODEL_FILE + ".data"
#: The onnxruntime-genai variant (``export-model --genai``, docs/genai.md): its graph, that graph's weights when
#: they are external, and the ``genai_config.json`` that ``onnxruntime_genai.Model(DIR)`` reads.
GENAI_MODEL_FILE = "genai.onnx"
GENAI_DATA_FILE = GENAI_MODEL_FILE + ".data"
GENAI_CONFIG_FILE = "genai_config.json"
GENAI_FILES = (GENAI_DATA_FILE, GENAI_MODEL_FILE, GENAI_CONFIG_FILE)
#: ``session_options.log_id`` of the ``genai_config.json`` rnnx writes: marks a config as rnnx's.
GENAI_LOG_ID = "rnnx-genai"
#: The text an export carries from a transformers checkpoint (``rnnx.json`` ``"text"``): its tokenizer (read with the
#: ``tokenizers`` package) and its chat template (Jinja).
TOKENIZER_FILE = "tokenizer.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
#: Every file an export writes (the genai variant's aside); an export removes the ones, these and
#: :data:`GENAI_FILES`, that a new export of the same dir did not rewrite.
#: The files of a checkpoint's text (rnnx.json "text"), written only when the checkpoint had a tokenizer.
TEXT_FILES = (TOKENIZER_FILE, CHAT_TEMPLATE_FILE)
EXPORT_FILES = (EXTERNAL_DATA_FILE, MODEL_FILE, PARITY_FILE, PARITY_REFERENCE_FILE, POLYGRAPHY_INPUTS,
                POLYGRAPHY_OUTPUTS, *TEXT_FILES, METADATA_FILE)  # fmt: skip


def genai_copied_library(out_dir: Path) -> Optional[str]:
    """The file name of the op library an earlier ``--genai --native-ops`` export copied into ``out_dir``: the one
    its ``genai_config.json`` names, when rnnx wrote that config (``log_id`` :data:`GENAI_LOG_ID`) and the name is a
    plain file name. None otherwise (no config, an unreadable one, one rnnx did not write, a path)."""
    try:
        session = json.loads((Path(out_dir) / GENAI_CONFIG_FILE).read_text())["model"]["decoder"]["session_options"]
        name = session["custom_ops_library"] if session["log_id"] == GENAI_LOG_ID else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(name, str) or name in ("", ".", "..") or name != Path(name).name:
        return None
    return name


# -- opsets ----------------------------------------------------------------------------------------------

#: ONNX opsets an export may use (the default is the newest that every supported runtime reads).
SUPPORTED_OPSETS = (18, 19, 20, 21)
DEFAULT_OPSET = 20

#: ONNX Runtime session config entries every export is opened with: the exporter records them in rnnx.json
#: ("onnxruntime": {"session_config": ...}) and every rnnx runtime (Python, the C API) applies them; other
#: clients should too. ``NchwcTransformer`` (the NCHWc convolution layout pass; these models have no
#: convolution, so it costs nothing) is off: with it, ONNX Runtime 1.32's CPU session creation crashes
#: (SIGSEGV, together with FuseFp16InitializerToFp32NodeTransformer) on some fp16 graphs, e.g. a batch-first
#: SRU tagger's output transposed into an fp16 MatMul.
ORT_SESSION_CONFIG = {"optimization.disable_specified_optimizers": "NchwcTransformer"}


def ort_session_config(metadata: dict[str, Any]) -> dict[str, str]:
    """The ONNX Runtime session config entries an export asks for (rnnx.json "onnxruntime"; {} when absent)."""
    section = metadata.get("onnxruntime") or {}
    return {str(k): str(v) for k, v in (section.get("session_config") or {}).items()}


# -- weight-only quantization (export-model --quantize) -----------------------------------------------

#: Quantization scheme -> bits of the quantized weights.
QUANTIZATION_SCHEMES = {"int8": 8, "int4": 4}
#: What ``--head`` takes: keep the head fp, or quantize it with one of the schemes.
QUANTIZATION_HEADS = ("fp", *QUANTIZATION_SCHEMES)
#: Block sizes ``--block-size`` takes (ONNX Runtime's MatMulNBits: a power of two >= 16).
QUANTIZATION_BLOCK_SIZES = (16, 32, 64, 128, 256)
#: The block sizes TensorRT documents for INT4 weights (its Dequantize takes no other).
TENSORRT_INT4_BLOCK_SIZES = (64, 128)
#: The parity budget of a quantized export against the fp32 PyTorch model, per scheme: ``max_rel`` of the
#: logits (``max |got - want| / max |want|`` per call), ``mean_kl`` (KL(reference || candidate) of the
#: next-token distributions, mean over real positions), ``drift`` (mean logits error of the last 16 of 256
#: chained decode steps over the first 16's) and, on a trained checkpoint, ``top1`` (teacher-forced
#: agreement of the greedy tokens: both sides are fed the reference's tokens).
QUANTIZATION_BUDGETS = {
    "int8": {"max_rel": 0.15, "mean_kl": 1e-2, "drift": 3.0, "top1": 0.97},
    "int4": {"max_rel": 0.5, "mean_kl": 0.1, "drift": 3.0, "top1": 0.95},
}

# -- dtypes ------------------------------------------------------------------------------------------

#: numpy dtype name -> bytes per element.
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4,
            "int8": 1, "uint8": 1, "bool": 1}  # fmt: skip
#: ONNX ``TensorProto`` element type -> numpy dtype name (the numbers are ONNX's, fixed by its spec).
ONNX_ELEMENT_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
                      11: "float64", 16: "bfloat16"}  # fmt: skip


class MetadataError(ValueError):
    """Metadata that is missing, malformed or does not match its model file; one line. ``reason``: the key of its
    template in :data:`REFUSALS` (the same refusal in every reader), None for an error outside that table."""

    def __init__(self, message: str, reason: Optional[str] = None) -> None:
        super().__init__(message)
        self.reason = reason


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a metadata dtype name; MetadataError for ``bfloat16`` (numpy has none) or an unknown name."""
    if name not in NUMPY_DTYPES:
        raise MetadataError(f"dtype {name!r} has no numpy equivalent; known: {', '.join(NUMPY_DTYPES)}")
    return np.dtype(np.bool_ if name == "bool" else name)


# -- tensor and state specs --------------------------------------------------------------------------

Dim = Union[int, str]


@dataclass(frozen=True)
class TensorSpec:
    """One graph input or output: name, shape (ints, axis names, or ``"past_length + length"``), dtype name."""

    name: str
    shape: tuple[Dim, ...]
    dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> TensorSpec:
        return cls(entry["name"], tuple(entry["shape"]), entry["dtype"])


@dataclass(frozen=True)
class StateSpec:
    """One state tensor of the graph.

    ``name`` is its flat name (``layers.0.S``); it enters as :attr:`input` (``past_key_values.<name>``)
    and leaves as :attr:`output` (``present.<name>``) with the same dtype. ``shape`` holds ints and
    the axis names ``batch`` / ``past_length``; ``grows`` marks a KV-cache tensor whose
    ``past_length`` axis grows by ``length`` per call. Floating state is fp32 in every precision.
    """

    name: str
    shape: tuple[Dim, ...]
    dtype: str
    grows: bool = False

    @property
    def input(self) -> str:
        return PAST_PREFIX + self.name

    @property
    def output(self) -> str:
        return PRESENT_PREFIX + self.name

    @property
    def batch_axis(self) -> int:
        """The axis holding the batch (1 for a stacked SRU cell state ``c``, 0 for most others)."""
        return self.shape.index(BATCH)

    @property
    def grow_axis(self) -> Optional[int]:
        """The ``past_length`` axis of a KV-cache tensor, else None."""
        return self.shape.index(PAST_LENGTH) if PAST_LENGTH in self.shape else None

    @property
    def output_shape(self) -> tuple[Dim, ...]:
        """The shape of :attr:`output`: ``past_length`` becomes ``past_length + length``."""
        return tuple(f"{PAST_LENGTH} + {LENGTH}" if d == PAST_LENGTH else d for d in self.shape)

    def concrete_shape(self, batch: int, past_length: int = 0) -> tuple[int, ...]:
        """The shape with ``batch`` and ``past_length`` substituted."""
        return resolve_shape(self.shape, {BATCH: batch, PAST_LENGTH: past_length})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "input": self.input, "output": self.output, "shape": list(self.shape),
                "dtype": self.dtype, "grows": self.grows}  # fmt: skip

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> StateSpec:
        """From one item of ``rnnx.json`` "state"; its input/output names must follow the prefixes."""
        spec = cls(entry["name"], tuple(entry["shape"]), entry["dtype"], bool(entry.get("grows", False)))
        if entry.get("input", spec.input) != spec.input or entry.get("output", spec.output) != spec.output:
            raise MetadataError(
                f"state {spec.name!r}: input/output names {entry.get('input')!r} / {entry.get('output')!r}, "
                f"expected {spec.input!r} / {spec.output!r}"
            )
        return spec


def resolve_dim(dim: Dim, dims: dict[str, int]) -> int:
    """An int, an axis name (``batch``) or a sum of them (``past_length + length``) -> int.
    MetadataError for an axis missing from ``dims`` or a malformed dim."""
    if isinstance(dim, bool):
        raise MetadataError(f"bad dim {dim!r}")
    if isinstance(dim, int):
        return dim
    if isinstance(dim, str):
        total = 0
        for term in dim.split("+"):
            term = term.strip()
            if term.isdigit():
                total += int(term)
            elif term in dims:
                total += dims[term]
            else:
                raise MetadataError(f"unknown symbolic dim {term!r} in {dim!r} (known: {', '.join(dims)})")
        return total
    raise MetadataError(f"bad dim {dim!r}")


def resolve_shape(shape: tuple[Dim, ...], dims: dict[str, int]) -> tuple[int, ...]:
    """:func:`resolve_dim` over a shape."""
    return tuple(resolve_dim(d, dims) for d in shape)


def lm_io(vocab_size: int, states: list[StateSpec], logits_dtype: str) -> tuple[list[TensorSpec], list[TensorSpec]]:
    """The inputs and outputs of a language model's graph, in graph order."""
    inputs = [TensorSpec(INPUT_IDS, (BATCH, LENGTH), "int64"), TensorSpec(ATTENTION_MASK, (BATCH, LENGTH), "int64")]
    outputs = [TensorSpec(LOGITS, (BATCH, LENGTH, vocab_size), logits_dtype)]
    inputs += [TensorSpec(s.input, s.shape, s.dtype) for s in states]
    outputs += [TensorSpec(s.output, s.output_shape, s.dtype) for s in states]
    return inputs, outputs


# -- files ------------------------------------------------------------------------------------------


def sha256_file(path: Union[str, os.PathLike]) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Union[str, os.PathLike], data: bytes) -> Path:
    """Writes ``data`` to ``path`` via a fsynced temporary file in the same directory and ``os.replace``:
    a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_metadata(directory: Union[str, os.PathLike], metadata: dict[str, Any]) -> Path:
    """Validates ``metadata`` (without the model hash check) and writes ``directory/rnnx.json`` atomically."""
    path = Path(directory) / METADATA_FILE
    validate_metadata(metadata, str(path))
    return atomic_write_bytes(path, (json.dumps(metadata, indent=2) + "\n").encode())


# -- metadata: the records every reader checks ---------------------------------------------------------------
#
# rnnx.json has three readers: this module (validate_metadata, read_metadata), the C API
# (runtime/native/src/artifact.cpp) and the JavaScript runtime (runtime/js/rnnx.mjs). Each applies the checks below
# in the order below and refuses with the same one line after "<path>: ": a template of REFUSALS, its values
# rendered by json_text. The records here (TABLES, LM_INPUTS / LM_OUTPUTS, REFUSALS, STATE_HEADER) are the facts;
# runtime/contract/schema.py turns them into the JSON Schemas (runtime/contract/rnnx.schema.json,
# rnnx-state.schema.json) and into the tables the C and JavaScript readers include
# (runtime/native/src/contract_generated.h, runtime/js/contract.generated.mjs). `python3 -m
# rnnx.runtime.contract.schema --write` regenerates those files; tests/test_contract_schema.py fails when one differs
# from what these records generate, and runs the bad-artifact fixtures (tests/data/bad_artifacts.json) through the
# three readers.
#
# The checks, in order:
#   1. the file: missing_file, unreadable_file, not_json (the C API first: no_directory);
#   2. the document: not_an_object, format, format_version (field_missing when absent), interface (a version's
#      interfaces: INTERFACES_BY_VERSION); then a reader that runs only some interfaces refuses the others
#      (interface_not_runnable: the C and JavaScript readers generate tokens, so they run causal_lm only);
#   3. every field of TABLES["metadata"] in table order, depth first (an object's members, an array's items):
#      field_missing (a field its interface needs), field_type, field_value (enumerations, minimums, file names,
#      a state shape's batch axis);
#   4. the graph: duplicate_name (inputs, then outputs), then per state tensor its input / output names
#      (state_io_name) and that they are graph inputs / outputs (state_not_in_graph);
#   5. a causal_lm graph's layout: per side (inputs, then outputs) lm_count, then lm_layout (LM_INPUTS, LM_OUTPUTS);
#   6. what one reader needs beyond the schema (READER_REFUSALS): Python checks a recorded signature
#      (signature_mismatch; the other readers cannot recompute it), the C API needs one (no_signature: its state
#      files carry it); Python (verify_hash) and the C API check the files' sha256s (model_missing, model_hash,
#      data_missing, data_hash); JavaScript, which also runs in a browser, hashes nothing.
#
# A state file's header (STATE_HEADER) has two readers, this package (runtime/state.py) and the C API
# (rnnx_state_load): state_unreadable (not safetensors, truncated), then state_format, state_format_version, the other
# fields (state_header_missing, state_header_value), then the model's signature (state_signature).

#: JSON kinds (JSON Schema's type names) -> how a refusal names one. An integer is a number with no fraction
#: (JSON Schema's rule: 2.0 is an integer).
KINDS = {"null": "null", "boolean": "a boolean", "integer": "an integer", "number": "a number", "string": "a string",
         "array": "an array", "object": "an object"}  # fmt: skip
#: The interfaces each readable format_version has.
INTERFACES_BY_VERSION = {1: (CAUSAL_LM,), 2: INTERFACES}
#: Every dtype name rnnx.json spells (:data:`ITEMSIZE`'s), and those with a numpy equivalent (a state tensor's: the
#: runtimes hold the state on the host too).
DTYPES = tuple(ITEMSIZE)
NUMPY_DTYPES = tuple(name for name in ITEMSIZE if name != "bfloat16")
#: The dtypes of a language model's logits: the exported precisions' (fp32, fp16).
LOGITS_DTYPES = tuple(dict.fromkeys(PRECISION_RECORDS[name].dtype for name in PRECISIONS))


def json_text(value: Any) -> str:
    """``value`` as a refusal shows it: compact JSON as JavaScript's ``JSON.stringify`` writes it (a number with no
    fraction as an integer, any other in JavaScript's shortest form), so that every reader renders it alike."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 2**53 else _js_number(float(value))
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json_text(str(k))}:{json_text(v)}" for k, v in value.items()) + "}"
    return json_text(str(value))


def _js_number(x: float) -> str:
    """JavaScript's ``Number.prototype.toString`` of a double (ECMAScript's Number::toString, radix 10)."""
    if x != x or x in (float("inf"), float("-inf")):
        return "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
    if x == 0:
        return "0"
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = str(int(whole + fraction))
    stripped = digits.rstrip("0")
    k = len(stripped)
    n = k + int(exponent or 0) - len(fraction) + (len(digits) - k)  # x = 0.<stripped> * 10**n
    sign = "-" if x < 0 else ""
    if k <= n <= 21:
        return sign + stripped + "0" * (n - k)
    if 0 < n <= 21:
        return sign + stripped[:n] + "." + stripped[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + stripped
    e = n - 1
    return f"{sign}{stripped[0]}{'.' + stripped[1:] if k > 1 else ''}e{'+' if e >= 0 else '-'}{abs(e)}"


def one_of(values: tuple) -> str:
    """``"a"`` for one value, ``one of "a", "b"`` for several (JSON-rendered)."""
    shown = ", ".join(json_text(v) for v in values)
    return shown if len(values) == 1 else f"one of {shown}"


def json_kind(value: Any) -> str:
    """The JSON kind of a parsed value (a key of :data:`KINDS`; a non-JSON Python value: its type's name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def shown_as_got(value: Any) -> str:
    """How a refusal names a value it got: an array or object by its kind, anything else as JSON."""
    kind = json_kind(value)
    return KINDS[kind] if kind in ("array", "object") else json_text(value)


def is_file_name(name: str) -> bool:
    """A plain file name: no folder (``/`` or ``\\``), not ``""``, ``.`` or ``..``."""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name


@dataclass(frozen=True)
class Rule:
    """What one JSON value must be. ``kinds``: its JSON kinds (:data:`KINDS`). A string: one of ``strings`` when given,
    not empty when ``non_empty``, a plain file name when ``file_name`` (:func:`is_file_name`). An integer: one of
    ``integers`` when given, at least ``minimum``. An array: every item follows ``items``, and one item is
    ``contains``. An object: the fields of the table ``members`` (:data:`TABLES`), or every value follows
    ``values``. ``description``: what a refusal says was expected (else :attr:`expected` derives it)."""

    kinds: tuple[str, ...]
    strings: tuple[str, ...] = ()
    integers: tuple[int, ...] = ()
    minimum: Optional[int] = None
    non_empty: bool = False
    file_name: bool = False
    items: Optional[Rule] = None
    contains: Optional[str] = None
    members: Optional[str] = None
    values: Optional[Rule] = None
    description: str = ""

    @property
    def expected(self) -> str:
        """The text after "expected" in a refusal of a value that breaks this rule."""
        if self.description:
            return self.description
        parts = []
        for kind in self.kinds:
            if kind == "string" and (self.strings or self.file_name or self.non_empty):
                text = "a file name beside the model" if self.file_name else "a non-empty string"
                parts.append(one_of(self.strings) if self.strings else text)
            elif kind == "integer" and (self.integers or self.minimum is not None):
                parts.append(one_of(self.integers) if self.integers else f"an integer >= {self.minimum}")
            else:
                parts.append(KINDS[kind])
        return " or ".join(parts)


@dataclass(frozen=True)
class Field:
    """One member of an ``rnnx.json`` object: its name, its :class:`Rule`, and the interfaces whose metadata must have
    it (``()``: optional)."""

    name: str
    rule: Rule
    required: tuple[str, ...] = INTERFACES


_STRING = Rule(("string",))
_NAME = Rule(("string",), non_empty=True)
_OBJECT = Rule(("object",))
_ARRAY = Rule(("array",))
_BOOLEAN = Rule(("boolean",))
#: A graph input's / output's dim: an int, an axis name (one a stateful export declared) or a sum of them.
_DIM = Rule(("integer", "string"), minimum=0, non_empty=True)
#: A state tensor's dim: an int, ``batch`` or ``past_length`` (a runtime sizes it).
_STATE_DIM = Rule(("integer", "string"), minimum=0, strings=(BATCH, PAST_LENGTH))

#: The fields of each object of ``rnnx.json``, in check order: ``"metadata"`` the document (the layout at the top of
#: this module), ``"tensor"`` an item of ``inputs`` / ``outputs``, ``"state"`` an item of ``state``, then the
#: optional sections. Fields not listed are allowed (``parity``'s contents, ``source``, ``versions``, ...).
TABLES: dict[str, tuple[Field, ...]] = {
    "metadata": (
        Field("format", Rule(("string",), strings=(FORMAT,))),
        Field("format_version", Rule(("integer",), integers=READABLE_FORMAT_VERSIONS)),
        Field("interface", Rule(("string",), strings=INTERFACES), required=()),
        Field("model_file", _NAME),
        Field("model_sha256", _STRING),
        Field("external_data", Rule(("object", "null"), members="external_data"), required=()),
        Field("model_type", _STRING),
        Field("config", _OBJECT),
        Field("vocab_size", Rule(("integer",), minimum=1), required=(CAUSAL_LM,)),
        Field("target", Rule(("string",), strings=TARGETS)),
        Field("precision", Rule(("string",), strings=PRECISIONS)),
        Field("opset", Rule(("integer",), minimum=1)),
        Field("inputs", Rule(("array",), items=Rule(("object",), members="tensor"))),
        Field("outputs", Rule(("array",), items=Rule(("object",), members="tensor"))),
        Field("state", Rule(("array",), items=Rule(("object",), members="state"))),
        Field("ops", _ARRAY),
        Field("opset_imports", _OBJECT),
        Field("source", _OBJECT),
        Field("versions", _OBJECT),
        Field("signature", _STRING, required=()),
        Field("quantization", Rule(("object", "null"), members="quantization"), required=()),
        Field("onnxruntime", Rule(("object", "null"), members="onnxruntime"), required=()),
        Field("text", Rule(("object", "null"), members="text"), required=()),
        Field("parity", Rule(("object", "null")), required=()),
    ),
    "tensor": (
        Field("name", _NAME),
        Field("shape", Rule(("array",), items=_DIM)),
        Field("dtype", Rule(("string",), strings=DTYPES)),
    ),
    "state": (
        Field("name", _NAME),
        Field("input", _STRING, required=()),
        Field("output", _STRING, required=()),
        Field(
            "shape",
            Rule(("array",), items=_STATE_DIM, contains=BATCH, description=f"a shape with a {json_text(BATCH)} axis"),
        ),
        Field("dtype", Rule(("string",), strings=NUMPY_DTYPES)),
        Field("grows", _BOOLEAN, required=()),
    ),
    "external_data": (Field("file", Rule(("string",), file_name=True)), Field("sha256", _STRING)),
    "quantization": (
        Field("scheme", Rule(("string",), strings=tuple(QUANTIZATION_SCHEMES))),
        Field("bits", Rule(("integer",), integers=tuple(QUANTIZATION_SCHEMES.values())), required=()),
        Field("block_size", Rule(("integer",), minimum=1), required=()),
        Field("symmetric", _BOOLEAN, required=()),
        Field("format", Rule(("string",), strings=(MATMUL_NBITS, DEQUANTIZE_LINEAR))),
        Field("accuracy_level", Rule(("integer", "null")), required=()),
        Field("head", Rule(("string",), strings=QUANTIZATION_HEADS), required=()),
        Field("embedding", _BOOLEAN, required=()),
        Field("quantized", _ARRAY),
        Field("excluded", _ARRAY, required=()),
    ),
    "onnxruntime": (
        Field("session_config", Rule(("object",), values=_STRING, description="an object of strings"), required=()),
    ),
    "text": (
        Field("tokenizer", Rule(("string",), file_name=True)),
        Field("tokenizer_sha256", _STRING),
        Field("chat_template", Rule(("string", "null"), file_name=True), required=()),
        Field("bos_token", Rule(("string", "null")), required=()),
        Field("eos_token", Rule(("string", "null")), required=()),
        Field("eos_token_ids", Rule(("array",), items=Rule(("integer",), minimum=0)), required=()),
    ),
}

#: A causal_lm graph's data inputs and outputs, first and in this order (then one per state tensor): name, dtypes.
LM_INPUTS = ((INPUT_IDS, ("int64",)), (ATTENTION_MASK, ("int64",)))
LM_OUTPUTS = ((LOGITS, LOGITS_DTYPES),)

#: Every refusal of an ``rnnx.json`` or a state file, by reason: the text after ``"<path>: "`` (the path is the
#: export's ``rnnx.json``, or the model / data file a hash refusal names, or the state file). Placeholders are
#: ``{name}``; their values are JSON (:func:`json_text`) except ``{detail}``, the one part that is each reader's own
#: (a parser's or the system's words), and the counts of ``lm_count`` and the hex of ``state_signature``.
REFUSALS = {
    "no_directory": "no such export directory",
    "missing_file": "missing export metadata file",
    "unreadable_file": "cannot read export metadata ({detail})",
    "not_json": "invalid JSON ({detail})",
    "not_an_object": "not rnnx export metadata: the file holds {got}, expected an object",
    "format": "not rnnx export metadata (format {got}, expected {expected})",
    "format_version": "unsupported format_version {got} (supported: {expected})",
    "interface": "unsupported interface {got} for format_version {version} (supported: {expected})",
    "interface_not_runnable": "interface {got} is not run here: this runtime generates tokens from {expected} exports",
    "field_missing": "field {field} missing, expected {expected}",
    "field_type": "field {field} is {got}, expected {expected}",
    "field_value": "field {field} is {got}, expected {expected}",
    "duplicate_name": "field {field} is {got}, the name of an earlier input or output",
    "state_io_name": "field {field} is {got}, expected {expected} (the state's name after its prefix)",
    "state_not_in_graph": "state {name}: {got} is not a graph {end}",
    "lm_count": "field {field} has {got} entries, expected {expected} ({lead} and one per state tensor)",
    "lm_layout": "field {field} is {got}, expected {expected} in a {interface} graph",
    "signature_mismatch": 'field "signature" does not match the model type, config, state layout and weights it names',
    "no_signature": 'field "signature" missing (an export written before the native runtime existed); re-export it',
    "model_missing": f"model file named by {METADATA_FILE} is missing",
    "model_hash": f"sha256 does not match {METADATA_FILE}; the model was replaced or is corrupt",
    "data_missing": f"external data file named by {METADATA_FILE} is missing",
    "data_hash": f"sha256 does not match {METADATA_FILE}; the model's external data was replaced or is corrupt",
    "state_unreadable": "not an rnnx state file, or truncated ({detail})",
    "state_format": "not an rnnx state file (format {got}, expected {expected})",
    "state_format_version": "unsupported state file format_version {got} (supported: {expected})",
    "state_header_missing": "state file header field {field} missing, expected {expected}",
    "state_header_value": "state file header field {field} is {got}, expected {expected}",
    "state_signature": "state was saved from a different model: signature {got}..., this model {expected}...",
}
#: The refusals of a state file (the others: of an rnnx.json).
STATE_FILE_REFUSALS = ("state_unreadable", "state_format", "state_format_version", "state_header_missing",
                       "state_header_value", "state_signature")  # fmt: skip
#: The readers: this package, the C API, the JavaScript runtime.
READERS = ("python", "c", "js")
#: The refusals that only some readers give (every other: all of them); why is in the check list above. The state
#: file ones: JavaScript reads no state files.
READER_REFUSALS = {
    "no_directory": ("c",),
    "interface_not_runnable": ("c", "js"),
    "signature_mismatch": ("python",),
    "no_signature": ("c",),
    **{reason: ("python", "c") for reason in ("model_missing", "model_hash", "data_missing", "data_hash")},
    **{reason: ("python", "c") for reason in STATE_FILE_REFUSALS},
}


def refusal_text(reason: str, **values: str) -> str:
    """The template of ``reason`` (:data:`REFUSALS`) with its placeholders replaced by ``values`` (rendered already)."""
    return re.sub(r"\{(\w+)\}", lambda m: values[m[1]], REFUSALS[reason])


def refusal(where: str, reason: str, **values: str) -> MetadataError:
    """A :class:`MetadataError` ``"<where>: <refusal text>"`` carrying its ``reason``."""
    return MetadataError(f"{where}: {refusal_text(reason, **values)}", reason)


def _check_value(value: Any, rule: Rule, path: str, where: str, interface: str) -> None:
    kind = json_kind(value)
    if kind not in rule.kinds and not (kind == "integer" and "number" in rule.kinds):
        raise refusal(where, "field_type", field=json_text(path), got=shown_as_got(value), expected=rule.expected)
    bad_string = kind == "string" and (
        (rule.strings and value not in rule.strings)
        or (rule.non_empty and not value)
        or (rule.file_name and not is_file_name(value))
    )
    bad_integer = kind == "integer" and (
        (rule.integers and value not in rule.integers) or (rule.minimum is not None and value < rule.minimum)
    )
    if bad_string or bad_integer:
        raise refusal(where, "field_value", field=json_text(path), got=json_text(value), expected=rule.expected)
    if kind == "array":
        for i, item in enumerate(value if rule.items is not None else ()):
            _check_value(item, rule.items, f"{path}[{i}]", where, interface)
        if rule.contains is not None and rule.contains not in value:
            raise refusal(where, "field_value", field=json_text(path), got=json_text(value), expected=rule.expected)
    if kind == "object":
        if rule.members is not None:
            _check_fields(value, TABLES[rule.members], f"{path}.", where, interface)
        for key, item in value.items() if rule.values is not None else ():
            _check_value(item, rule.values, f"{path}.{key}", where, interface)


def _check_fields(entry: dict[str, Any], fields: tuple[Field, ...], prefix: str, where: str, interface: str) -> None:
    for field in fields:
        path = prefix + field.name
        if field.name in entry:
            _check_value(entry[field.name], field.rule, path, where, interface)
        elif interface in field.required:
            raise refusal(where, "field_missing", field=json_text(path), expected=field.rule.expected)


def validate_metadata(meta: Any, where: str = METADATA_FILE, runs: tuple[str, ...] = INTERFACES) -> dict[str, Any]:
    """Checks a metadata dict in the contract's order (the check list above: steps 2 to 5); :class:`MetadataError`
    (one line, prefixed by ``where``, with its ``reason``) otherwise. ``runs``: the interfaces the caller runs (the
    others are refused with ``interface_not_runnable``; this package runs both)."""
    if not isinstance(meta, dict):
        raise refusal(where, "not_an_object", got=shown_as_got(meta))
    if meta.get("format") != FORMAT:
        got = json_text(meta["format"]) if "format" in meta else "missing"
        raise refusal(where, "format", got=got, expected=json_text(FORMAT))
    if "format_version" not in meta:
        raise refusal(
            where, "field_missing", field=json_text("format_version"), expected=one_of(READABLE_FORMAT_VERSIONS)
        )
    version = meta["format_version"]
    if json_kind(version) != "integer" or version not in READABLE_FORMAT_VERSIONS:
        supported = ", ".join(json_text(v) for v in READABLE_FORMAT_VERSIONS)
        raise refusal(where, "format_version", got=json_text(version), expected=supported)
    interface = meta.get("interface", CAUSAL_LM)
    allowed = INTERFACES_BY_VERSION[int(version)]
    if json_kind(interface) != "string" or interface not in allowed:
        raise refusal(where, "interface", got=json_text(interface), version=json_text(int(version)),
                      expected=", ".join(json_text(i) for i in allowed))  # fmt: skip
    if interface not in runs:
        raise refusal(where, "interface_not_runnable", got=json_text(interface),
                      expected=", ".join(json_text(i) for i in runs))  # fmt: skip
    _check_fields(meta, TABLES["metadata"], "", where, interface)
    seen = set()
    for side in ("inputs", "outputs"):
        for i, entry in enumerate(meta[side]):
            if entry["name"] in seen:
                raise refusal(
                    where, "duplicate_name", field=json_text(f"{side}[{i}].name"), got=json_text(entry["name"])
                )
            seen.add(entry["name"])
    graph = {"input": {t["name"] for t in meta["inputs"]}, "output": {t["name"] for t in meta["outputs"]}}
    for i, entry in enumerate(meta["state"]):
        names = {"input": PAST_PREFIX + entry["name"], "output": PRESENT_PREFIX + entry["name"]}
        for end, name in names.items():
            if end in entry and entry[end] != name:
                raise refusal(where, "state_io_name", field=json_text(f"state[{i}].{end}"), got=json_text(entry[end]),
                              expected=json_text(name))  # fmt: skip
        for end, name in names.items():
            if name not in graph[end]:
                raise refusal(where, "state_not_in_graph", name=json_text(entry["name"]), got=json_text(name), end=end)
    if interface == CAUSAL_LM:
        for side, slots in (("inputs", LM_INPUTS), ("outputs", LM_OUTPUTS)):
            count = len(slots) + len(meta["state"])
            if len(meta[side]) != count:
                lead = ", ".join(json_text(name) for name, _ in slots)
                raise refusal(where, "lm_count", field=json_text(side), got=str(len(meta[side])), expected=str(count),
                              lead=lead)  # fmt: skip
            for i, (name, dtypes) in enumerate(slots):
                for key, want, ok in (("name", json_text(name), meta[side][i]["name"] == name),
                                      ("dtype", one_of(dtypes), meta[side][i]["dtype"] in dtypes)):  # fmt: skip
                    if not ok:
                        raise refusal(where, "lm_layout", field=json_text(f"{side}[{i}].{key}"),
                                      got=json_text(meta[side][i][key]), expected=want,
                                      interface=json_text(CAUSAL_LM))  # fmt: skip
    return meta


def external_data_file(metadata: dict[str, Any]) -> Optional[str]:
    """The name of the export's external data file (beside the model file), None for a single-file model."""
    external = metadata.get("external_data")
    return external["file"] if external else None


def _not_a_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_json_file(path: Path, what: str, error: type[Exception]) -> Any:
    """The JSON value in ``path``; ``error`` with one line naming the file when it is missing or not JSON."""
    if not path.is_file():
        raise error(f"{path}: missing {what}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: invalid JSON ({e})") from None


def read_metadata_file(path: Union[str, os.PathLike]) -> Any:
    """The JSON document of an ``rnnx.json`` (strict JSON: no ``NaN`` / ``Infinity``, which the other readers' parsers
    refuse too), unchecked; :class:`MetadataError` ``missing_file`` / ``unreadable_file`` / ``not_json`` otherwise."""
    path = Path(path)
    if not path.is_file():
        raise refusal(str(path), "missing_file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise refusal(str(path), "unreadable_file", detail=e.strerror or type(e).__name__) from None
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_not_a_json_constant)
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise refusal(str(path), "not_json", detail=str(e)) from None


def read_metadata(directory: Union[str, os.PathLike], verify_hash: bool = True) -> dict[str, Any]:
    """Reads and validates ``directory/rnnx.json``; with ``verify_hash`` also checks that the model file
    and, for an export with external data, its data file exist and have the recorded sha256s. Raises
    :class:`MetadataError` (one line naming the file, with its ``reason``: the check list above)."""
    path = Path(directory) / METADATA_FILE
    meta = validate_metadata(read_metadata_file(path), str(path))
    signature = meta.get("signature")
    if signature is not None and signature != model_signature(meta):
        raise refusal(str(path), "signature_mismatch")
    if verify_hash:
        files = [(Path(directory) / meta["model_file"], meta["model_sha256"], "model")]
        if external_data_file(meta) is not None:
            files.append((Path(directory) / external_data_file(meta), meta["external_data"]["sha256"], "data"))
        for file, sha256, what in files:
            if not file.is_file():
                raise refusal(str(file), f"{what}_missing")
            if sha256_file(file) != sha256:
                raise refusal(str(file), f"{what}_hash")
    return meta


def interface_of(metadata: dict[str, Any]) -> str:
    """The graph's interface (:data:`CAUSAL_LM` or :data:`STATEFUL`); version 1 metadata has no field."""
    return metadata.get("interface", CAUSAL_LM)


def data_inputs(metadata: dict[str, Any]) -> list[TensorSpec]:
    """The graph inputs that are not state (``input_ids``, ``attention_mask`` for a language model)."""
    states = {s["input"] for s in metadata["state"]}
    return [TensorSpec.from_dict(t) for t in metadata["inputs"] if t["name"] not in states]


def data_outputs(metadata: dict[str, Any]) -> list[TensorSpec]:
    """The graph outputs that are not state (``logits`` for a language model)."""
    states = {s["output"] for s in metadata["state"]}
    return [TensorSpec.from_dict(t) for t in metadata["outputs"] if t["name"] not in states]


def state_specs(metadata: dict[str, Any]) -> list[StateSpec]:
    """The :class:`StateSpec` of every state tensor of a metadata dict, graph order."""
    return [StateSpec.from_dict(s) for s in metadata["state"]]


def model_signature(metadata: dict[str, Any]) -> str:
    """Hex sha256 identifying a model for state compatibility: model type, config, state layout and the
    source weights' sha256 (when the weights are unknown, the ONNX file's sha256, joined by its external
    data file's for an export with external data: the file that holds the weights). A state saved by one
    backend loads into another backend of the same model."""
    source = metadata.get("source") or {}
    weights = source.get("weights_sha256") or metadata.get("model_sha256")
    if not source.get("weights_sha256") and metadata.get("external_data"):
        weights = f"{weights}+{metadata['external_data']['sha256']}"
    layout = [[s["name"], list(s["shape"]), s["dtype"], bool(s.get("grows", False))] for s in metadata["state"]]
    fields = [metadata["model_type"], metadata["config"], layout, weights]
    if metadata.get("quantization"):  # quantized weights are other weights
        fields.append(metadata["quantization"])
    blob = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# -- state files ---------------------------------------------------------------------------------------------

#: A saved state (runtime/state.py's ``State.save``, the C API's ``rnnx_state_save``) is a safetensors file: every
#: state tensor as ``state/<flat name>``, the last logits as ``last_logits`` (when known), and the header's
#: metadata (strings) :data:`STATE_HEADER`.
STATE_FORMAT = "rnnx-state"
STATE_FORMAT_VERSION = 2
STATE_TENSOR_PREFIX = "state/"
STATE_LAST_LOGITS = "last_logits"


@dataclass(frozen=True)
class HeaderField:
    """One string of a state file's header metadata. ``value``: the one it takes (its refusal is ``reason``);
    ``minimum``: it is a decimal integer (at most 18 digits) of at least this; ``required``: a reader refuses a file
    without it; ``description``: what it holds."""

    name: str
    value: str = ""
    reason: str = ""
    minimum: Optional[int] = None
    required: bool = True
    description: str = ""

    @property
    def expected(self) -> str:
        if self.value:
            return json_text(self.value)
        return f"a decimal integer >= {self.minimum}" if self.minimum is not None else "a string"


#: The header metadata of a state file, in check order.
STATE_HEADER = (
    HeaderField("format", value=STATE_FORMAT, reason="state_format", description="what the file is"),
    HeaderField(
        "format_version",
        value=str(STATE_FORMAT_VERSION),
        reason="state_format_version",
        description="the state file layout's version",
    ),  # fmt: skip
    HeaderField("names", description="the state tensors' flat names, graph order, as a JSON list"),
    HeaderField("batch", minimum=1, description="rows"),
    HeaderField("past_length", minimum=0, description="positions fed so far, pads included"),
    HeaderField("signature", description=f'the model\'s signature ({METADATA_FILE} "signature")'),
    HeaderField("backend", required=False, description="the backend that saved it (native: the C API)"),
    HeaderField("conversation", required=False, description="a parked conversation's id (rnnx.runtime's store)"),
    HeaderField(
        "chat",
        required=False,
        description='a parked conversation\'s chat transcript, JSON {"messages": [...], "consumed": "..."}: its '
        "messages so far and the rendered chat template text the state holds",
    ),  # fmt: skip
)
#: Header fields of a parked conversation's state file (rnnx.runtime.serving.conversations).
STATE_CONVERSATION, STATE_CHAT = "conversation", "chat"


def check_state_header(header: dict[str, Any], where: str, signature: Optional[str] = None) -> dict[str, Any]:
    """Checks a state file's header metadata (strings) in :data:`STATE_HEADER`'s order, then, when given, that it
    was saved from the model of ``signature``; :class:`MetadataError` (one line, prefixed by ``where``, with its
    ``reason``) otherwise."""
    for field in STATE_HEADER:
        value = header.get(field.name)
        if value is None and field.value:
            raise refusal(where, field.reason, got="missing", expected=field.expected)
        if value is None:
            if field.required:
                raise refusal(where, "state_header_missing", field=json_text(field.name), expected=field.expected)
            continue
        if field.value and value != field.value:
            raise refusal(where, field.reason, got=json_text(value), expected=field.expected)
        if field.minimum is not None and not (
            isinstance(value, str) and re.fullmatch(r"[0-9]{1,18}", value) and int(value) >= field.minimum
        ):
            raise refusal(where, "state_header_value", field=json_text(field.name), got=json_text(value),
                          expected=field.expected)  # fmt: skip
    if signature is not None and header["signature"] != signature:
        raise refusal(where, "state_signature", got=str(header["signature"])[:12], expected=signature[:12])
    return header
