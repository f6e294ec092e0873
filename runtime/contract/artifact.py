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
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from .targets import PRECISIONS, TARGETS, TOLERANCES  # noqa: F401  (the contract's names, defined there)

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
#: Every file an export writes (the genai variant's aside); an export removes the ones, these and
#: :data:`GENAI_FILES`, that a new export of the same dir did not rewrite.
EXPORT_FILES = (EXTERNAL_DATA_FILE, MODEL_FILE, PARITY_FILE, PARITY_REFERENCE_FILE, POLYGRAPHY_INPUTS,
                POLYGRAPHY_OUTPUTS, METADATA_FILE)  # fmt: skip


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
    """Metadata that is missing, malformed or does not match its model file; one line."""


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a metadata dtype name; MetadataError for ``bfloat16`` (numpy has none) or an unknown name."""
    if name not in ITEMSIZE or name == "bfloat16":
        raise MetadataError(
            f"dtype {name!r} has no numpy equivalent; known: {', '.join(n for n in ITEMSIZE if n != 'bfloat16')}"
        )
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


# -- metadata ----------------------------------------------------------------------------------------

_REQUIRED = {
    "format": str, "format_version": int, "model_file": str, "model_sha256": str, "model_type": str,
    "config": dict, "target": str, "precision": str, "opset": int, "inputs": list,
    "outputs": list, "state": list, "ops": list, "opset_imports": dict, "source": dict, "versions": dict,
}  # fmt: skip
#: Fields only one interface has.
_REQUIRED_BY_INTERFACE = {CAUSAL_LM: {"vocab_size": int}, STATEFUL: {}}


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


def validate_metadata(meta: Any, where: str = METADATA_FILE) -> dict[str, Any]:
    """Checks the layout of a metadata dict; MetadataError (one line, prefixed by ``where``) otherwise."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise MetadataError(f"{where}: not rnnx export metadata (format {found!r}, expected {FORMAT!r})")
    version = meta.get("format_version")
    if version not in READABLE_FORMAT_VERSIONS or isinstance(version, bool):
        supported = ", ".join(map(str, READABLE_FORMAT_VERSIONS))
        raise MetadataError(f"{where}: unsupported format_version {version!r} (supported: {supported})")
    interface = interface_of(meta)
    if interface not in (INTERFACES if version >= 2 else (CAUSAL_LM,)):
        raise MetadataError(
            f"{where}: unsupported interface {interface!r} for format_version {version} "
            f"(supported: {', '.join(INTERFACES)})"
        )
    for key, kind in {**_REQUIRED, **_REQUIRED_BY_INTERFACE[interface]}.items():
        if not isinstance(meta.get(key), kind) or (kind is int and isinstance(meta.get(key), bool)):
            raise MetadataError(f"{where}: field {key!r} missing or not a {kind.__name__}")
    try:
        inputs = [TensorSpec.from_dict(t) for t in meta["inputs"]]
        outputs = [TensorSpec.from_dict(t) for t in meta["outputs"]]
        states = [StateSpec.from_dict(s) for s in meta["state"]]
    except (KeyError, TypeError, AttributeError) as e:
        raise MetadataError(f"{where}: malformed inputs/outputs/state entry ({type(e).__name__}: {e})") from None
    except MetadataError as e:
        raise MetadataError(f"{where}: {e}") from None
    names = [t.name for t in inputs + outputs]
    if len(names) != len(set(names)) or not all(isinstance(n, str) for n in names):
        raise MetadataError(f"{where}: input/output names must be unique strings")
    for spec in states:
        if spec.input not in names or spec.output not in names:
            raise MetadataError(
                f"{where}: state {spec.name!r}: {spec.input!r} / {spec.output!r} are not graph inputs/outputs"
            )
        if BATCH not in spec.shape:
            raise MetadataError(f"{where}: state {spec.name!r}: shape {list(spec.shape)} has no {BATCH!r} axis")
    quantization = meta.get("quantization")
    if quantization is not None and not (
        isinstance(quantization, dict) and quantization.get("scheme") in QUANTIZATION_SCHEMES
        and isinstance(quantization.get("format"), str) and isinstance(quantization.get("quantized"), list)
    ):  # fmt: skip
        raise MetadataError(
            f"{where}: field 'quantization' must be null or an object with 'scheme' "
            f"({' | '.join(QUANTIZATION_SCHEMES)}), 'format' and 'quantized', got {quantization!r}"
        )
    onnxruntime = meta.get("onnxruntime")
    if onnxruntime is not None and not (
        isinstance(onnxruntime, dict) and isinstance(onnxruntime.get("session_config", {}), dict)
        and all(isinstance(v, str) for v in onnxruntime.get("session_config", {}).values())
    ):  # fmt: skip
        raise MetadataError(
            f"{where}: field 'onnxruntime' must be an object whose 'session_config' maps names to strings, "
            f"got {onnxruntime!r}"
        )
    external = meta.get("external_data")
    if external is not None and not (
        isinstance(external, dict) and isinstance(external.get("sha256"), str)
        and isinstance(external.get("file"), str) and external["file"] not in ("", ".", "..")
        and Path(external["file"]).name == external["file"] and "\\" not in external["file"]
    ):  # fmt: skip
        raise MetadataError(
            f"{where}: field 'external_data' must be null or an object with 'file' (a file name beside the "
            f"model) and 'sha256', got {external!r}"
        )
    return meta


def external_data_file(metadata: dict[str, Any]) -> Optional[str]:
    """The name of the export's external data file (beside the model file), None for a single-file model."""
    external = metadata.get("external_data")
    return external["file"] if external else None


def read_json_file(path: Path, what: str, error: type[Exception]) -> Any:
    """The JSON value in ``path``; ``error`` with one line naming the file when it is missing or not JSON."""
    if not path.is_file():
        raise error(f"{path}: missing {what}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: invalid JSON ({e})") from None


def read_metadata(directory: Union[str, os.PathLike], verify_hash: bool = True) -> dict[str, Any]:
    """Reads and validates ``directory/rnnx.json``; with ``verify_hash`` also checks that the model file
    and, for an export with external data, its data file exist and have the recorded sha256s. Raises
    :class:`MetadataError` (one line naming the file)."""
    path = Path(directory) / METADATA_FILE
    meta = read_json_file(path, "export metadata file", MetadataError)
    validate_metadata(meta, str(path))
    signature = meta.get("signature")
    if signature is not None and signature != model_signature(meta):
        raise MetadataError(
            f"{path}: field 'signature' does not match the model type, config, state layout and weights it names"
        )
    if verify_hash:
        model_path = Path(directory) / meta["model_file"]
        if not model_path.is_file():
            raise MetadataError(f"{model_path}: model file named by {METADATA_FILE} is missing")
        if sha256_file(model_path) != meta["model_sha256"]:
            raise MetadataError(
                f"{model_path}: sha256 does not match {METADATA_FILE}; the model was replaced or is corrupt"
            )
        data_file = external_data_file(meta)
        if data_file is not None:
            data_path = Path(directory) / data_file
            if not data_path.is_file():
                raise MetadataError(f"{data_path}: external data file named by {METADATA_FILE} is missing")
            if sha256_file(data_path) != meta["external_data"]["sha256"]:
                raise MetadataError(
                    f"{data_path}: sha256 does not match {METADATA_FILE}; the model's external data was "
                    "replaced or is corrupt"
                )
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
