"""Triton Inference Server ``config.pbtxt`` for an rnnx export: the three repository variants.

Every variant uses Triton's *sequence batcher*: all requests of one stream (one correlation id) go to the
model instance that holds its state, with the control inputs START (first request of a sequence), END
(last), READY (a real request; 0 marks the padding of the ``direct`` strategy) and CORRID (the
correlation id, uint64), and an idle timeout after which the server forgets a silent sequence.

* ``onnxruntime`` (platform ``onnxruntime_onnx``) and ``tensorrt`` (platform ``tensorrt_plan``): Triton
  runs the graph itself with *implicit state*: every ``past_key_values.<name>`` input is paired with its
  ``present.<name>`` output in a ``state`` entry (zeros at START), so a request carries only the data
  inputs (``input_ids`` / ``attention_mask``) and gets ``logits``; the client samples. When every
  state tensor has its batch on axis 0, ``max_batch_size`` > 0 and the dims leave the batch out (Triton
  adds it); otherwise (a stacked SRU state ``(layers, batch, d)``) ``max_batch_size`` is 0 and each
  request is one sequence with batch 1 written out.
* ``python``: a Python-backend model (:mod:`rnnx.runtime.serving.triton.python_model`) that embeds rnnx's
  :class:`~rnnx.runtime.serving.slots.StatePool`: per-stream state keyed by CORRID, batched across streams,
  sampling on the server. A request sends the tokens to feed (the prompt at START, then usually the
  previous ``next_token``) and optional sampling options (read at START), and gets ``next_token`` and
  ``held_streams`` (streams holding state on that instance after the request).

All names below are defined once here and used by the repository writer, the Python model and the tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

from ...contract.artifact import BATCH, INPUT_IDS, MODEL_FILE, data_inputs, data_outputs, state_specs
from ...contract.targets import exported_target

#: Control inputs of the sequence batcher: name -> control kind.
CONTROL_INPUTS = {
    "START": "CONTROL_SEQUENCE_START",
    "END": "CONTROL_SEQUENCE_END",
    "READY": "CONTROL_SEQUENCE_READY",
    "CORRID": "CONTROL_SEQUENCE_CORRID",
}
START, END, READY, CORRID = CONTROL_INPUTS

#: The Python variant's request input naming a conversation (read at START): the sequence resumes that
#: conversation's parked state and parks its final state under the id at END.
CONVERSATION_ID = "conversation_id"
#: The Python variant's request inputs: name -> (Triton type, dims, optional). ``input_ids`` is the
#: contract's name for tokens; the options and the conversation id are read at START (defaults: greedy, no
#: top-k / top-p, no conversation).
PYTHON_INPUTS = {
    INPUT_IDS: ("TYPE_INT64", (-1,), False),
    "temperature": ("TYPE_FP32", (1,), True),
    "top_k": ("TYPE_INT32", (1,), True),
    "top_p": ("TYPE_FP32", (1,), True),
    "seed": ("TYPE_INT64", (1,), True),
    CONVERSATION_ID: ("TYPE_STRING", (1,), True),
}
#: The Python variant's outputs: name -> (Triton type, dims).
PYTHON_OUTPUTS = {"next_token": ("TYPE_INT64", (1,)), "held_streams": ("TYPE_INT64", (1,))}
#: ``parameters`` keys of the Python variant's config.
PARAM_EXPORT_DIR, PARAM_BACKEND, PARAM_MAX_STREAMS = "rnnx_export_dir", "rnnx_backend", "rnnx_max_streams"
#: ``parameters`` key of the Python variant's conversation store directory (shared by instances and servers).
PARAM_CONVERSATION_DIR = "rnnx_conversation_dir"

#: The tensorrt variant's model file (a serialized engine) in the version directory.
PLAN_FILE = "model.plan"


class TritonConfigError(ValueError):
    """An export Triton cannot serve in the asked variant; the message says why."""


@dataclass(frozen=True)
class Variant:
    """One repository variant.

    ``platform``: the Triton platform that runs the graph itself with implicit state (None: rnnx's Python
    model serves it). ``model_file``: the file in the version directory. ``instance_kind``: where Triton
    places an instance. ``profiles``: the TensorRT optimization profiles each instance's contexts use.
    ``needs_engine``: the model file is an engine built for the serving GPU (``export-model --engine``), from
    an export of a target that builds engines. ``generation``: it serves language models only (sampling on
    the server).
    """

    name: str
    platform: Optional[str]
    model_file: str
    instance_kind: str
    profiles: tuple[str, ...] = ()
    needs_engine: bool = False
    generation: bool = False

    def refusal(self, metadata: Mapping[str, Any]) -> Optional[str]:
        """Why this variant cannot serve the export ``metadata`` describes (None: it can)."""
        if self.generation and metadata.get("vocab_size") is None:
            return f"the {self.name} variant serves language models (generation)"
        if self.needs_engine and not exported_target(metadata).builds_engine:
            return f"the {self.name} variant needs a target 'tensorrt' export"
        graph_state = state_specs(dict(metadata)) if self.platform is not None and "state" in metadata else []
        grow = [s.name for s in graph_state if s.grows]
        if grow:
            return (
                f"state tensors {grow} grow with the context (a KV cache): Triton's implicit state holds "
                "fixed-size tensors; the python variant serves it (rnnx's state pool batches KV caches)"
            )
        return None


ONNXRUNTIME_VARIANT = Variant("onnxruntime", "onnxruntime_onnx", MODEL_FILE, "KIND_CPU")
# an rnnx engine has a decode profile (0) and a prefill profile (1): a context for each
TENSORRT_VARIANT = Variant("tensorrt", "tensorrt_plan", PLAN_FILE, "KIND_GPU", ("0", "1"), needs_engine=True)
PYTHON_VARIANT = Variant("python", None, "model.py", "KIND_CPU", generation=True)
#: The variants by name.
VARIANT_RECORDS = {v.name: v for v in (ONNXRUNTIME_VARIANT, TENSORRT_VARIANT, PYTHON_VARIANT)}
#: The repository variants.
VARIANTS = tuple(VARIANT_RECORDS)
#: What ``export-model --triton-repo`` writes when no variant is named, in this order (each where it applies).
DEFAULT_VARIANTS = (PYTHON_VARIANT, ONNXRUNTIME_VARIANT, TENSORRT_VARIANT)


def variant(name: Union[str, Variant]) -> Variant:
    """The :class:`Variant` named ``name`` (a Variant is returned as it is); TritonConfigError naming the choices."""
    found = name if isinstance(name, Variant) else VARIANT_RECORDS.get(name) if isinstance(name, str) else None
    if found is None:
        raise TritonConfigError(f"variant {name!r}: expected one of {', '.join(VARIANTS)}")
    return found


#: Defaults of the writer's options.
DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_QUEUE_DELAY_US = 500

#: metadata dtype name -> Triton data type.
TRITON_TYPES = {
    "float32": "TYPE_FP32", "float16": "TYPE_FP16", "bfloat16": "TYPE_BF16", "float64": "TYPE_FP64",
    "int64": "TYPE_INT64", "int32": "TYPE_INT32", "int8": "TYPE_INT8", "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL",
}  # fmt: skip


def triton_type(dtype: str, what: str) -> str:
    if dtype not in TRITON_TYPES:
        raise TritonConfigError(f"{what}: dtype {dtype!r} has no Triton type; known: {', '.join(TRITON_TYPES)}")
    return TRITON_TYPES[dtype]


def batch_first(metadata: dict[str, Any]) -> bool:
    """Whether every data tensor and state tensor has its batch on axis 0 (Triton batches axis 0 only)."""
    tensors = [*data_inputs(metadata), *data_outputs(metadata), *state_specs(metadata)]
    return all(t.shape and t.shape[0] == BATCH for t in tensors)


def _dims(shape: tuple[Any, ...], drop_batch: bool) -> list[int]:
    """Triton dims of an rnnx shape: ints kept, ``batch`` dropped (or 1), other axis names variable (-1)."""
    dims = []
    for i, d in enumerate(shape):
        if d == BATCH:
            if not drop_batch:
                dims.append(1)
            elif i != 0:
                raise TritonConfigError(f"batch axis {i} of shape {shape}: Triton batches axis 0 only")
        elif isinstance(d, int):
            dims.append(d)
        else:
            dims.append(-1)
    return dims


def _tensor(
    name: str, data_type: str, dims: list[int] | tuple[int, ...], optional: bool = False, ragged: bool = False
) -> str:
    extra = (" optional: true" if optional else "") + (" allow_ragged_batch: true" if ragged else "")
    return f'  {{ name: "{name}" data_type: {data_type} dims: [ {", ".join(str(d) for d in dims)} ]{extra} }}'


def _sequence_batching(
    state: list[str], idle_timeout_s: float, candidates: int, preferred: int, queue_delay_us: int, controls: bool
) -> str:
    """The ``sequence_batching`` block: ``oldest`` strategy (``preferred_batch_size`` only when batching:
    Triton requires it <= max_batch_size), control inputs when the model reads them (the Python variant;
    a graph has no such inputs, and Triton's ONNX Runtime / TensorRT backends refuse a control the
    model lacks: their implicit state resets on the request's START flag), the implicit state entries."""
    lines = [
        "sequence_batching {",
        f"  max_sequence_idle_microseconds: {int(idle_timeout_s * 1e6)}",
        "  oldest {",
        f"    max_candidate_sequences: {candidates}",
        *([f"    preferred_batch_size: [ {preferred} ]"] if preferred > 0 else []),
        f"    max_queue_delay_microseconds: {queue_delay_us}",
        "  }",
    ]
    if controls:
        entries = []
        for name, kind in CONTROL_INPUTS.items():
            if name == CORRID:
                control = f"{{ kind: {kind} data_type: TYPE_UINT64 }}"
            else:
                control = f"{{ kind: {kind} int32_false_true: [ 0, 1 ] }}"
            entries.append(f'    {{ name: "{name}" control [ {control} ] }}')
        lines += ["  control_input [", ",\n".join(entries), "  ]"]
    if state:
        lines += ["  state [", ",\n".join(state), "  ]"]
    return "\n".join([*lines, "}"])


def _instances(count: int, kind: str, profiles: tuple[str, ...] = ()) -> str:
    quoted = ", ".join(f'"{p}"' for p in profiles)
    profile = f" profile: [ {quoted} ]" if profiles else ""
    return f"instance_group [ {{ count: {count} kind: {kind}{profile} }} ]"


def graph_config(
    metadata: dict[str, Any],
    name: str,
    variant: Union[str, Variant],
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    instances: int = 1,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    queue_delay_us: int = DEFAULT_QUEUE_DELAY_US,
) -> str:
    """``config.pbtxt`` text of the ``onnxruntime`` or ``tensorrt`` variant for an export's metadata: data
    inputs / outputs, one implicit ``state`` entry per state tensor (zeros at START), the sequence
    batcher's controls, ``max_batch_size`` (0 when a tensor is not batch-first) and instance groups
    (CPU for onnxruntime, GPU for tensorrt)."""
    record = variant if isinstance(variant, Variant) else VARIANT_RECORDS.get(variant)
    if record is None or record.platform is None:
        graphs = " / ".join(v.name for v in VARIANT_RECORDS.values() if v.platform is not None)
        raise TritonConfigError(f"variant {variant!r}: graph configs are for {graphs}")
    why = record.refusal(metadata)
    if why is not None:
        raise TritonConfigError(f"{name}: {why}")
    batched = batch_first(metadata) and max_batch_size > 0
    inputs = [_tensor(t.name, triton_type(t.dtype, t.name), _dims(t.shape, batched)) for t in data_inputs(metadata)]
    outputs = [_tensor(t.name, triton_type(t.dtype, t.name), _dims(t.shape, batched)) for t in data_outputs(metadata)]
    state = []
    for s in state_specs(metadata):
        ttype = triton_type(s.dtype, s.name)
        dims = initial = _dims(s.shape, batched)  # fixed: the variant's refusal named growing states
        state.append(
            f'    {{ input_name: "{s.input}" output_name: "{s.output}" data_type: {ttype} '
            f"dims: [ {', '.join(map(str, dims))} ] initial_state: [ {{ data_type: {ttype} "
            f'dims: [ {", ".join(map(str, initial))} ] zero_data: true name: "zeros" }} ] }}'
        )
    batch = max_batch_size if batched else 0
    parts = [
        f'name: "{name}"',
        f'platform: "{record.platform}"',
        f'default_model_filename: "{record.model_file}"',
        f"max_batch_size: {batch}",
        "input [\n" + ",\n".join(inputs) + "\n]",
        "output [\n" + ",\n".join(outputs) + "\n]",
        _sequence_batching(state, idle_timeout_s, max(batch, 1) * max(instances, 1), batch, queue_delay_us, False),
        _instances(instances, record.instance_kind, record.profiles),
    ]
    return "\n".join(parts) + "\n"


def python_config(
    name: str,
    max_streams: int = 64,
    instances: int = 1,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    queue_delay_us: int = DEFAULT_QUEUE_DELAY_US,
    backend: str = "onnxruntime",
    export_dir: str = "export",
    conversation_dir: Optional[str] = None,
) -> str:
    """``config.pbtxt`` text of the ``python`` variant: the model in ``<version>/model.py`` serves up to
    ``max_streams`` streams per instance from the export in ``<version>/<export_dir>`` on rnnx backend
    ``backend``; conversations park in ``conversation_dir`` (an absolute path; None: each instance's memory)."""
    # ragged: requests of different lengths (a prompt beside one-token steps) still share a batch
    inputs = [_tensor(n, t, d, opt, ragged=n == INPUT_IDS) for n, (t, d, opt) in PYTHON_INPUTS.items()]
    outputs = [_tensor(n, t, d) for n, (t, d) in PYTHON_OUTPUTS.items()]
    params = {PARAM_EXPORT_DIR: export_dir, PARAM_BACKEND: backend, PARAM_MAX_STREAMS: str(max_streams)}
    if conversation_dir is not None:
        params[PARAM_CONVERSATION_DIR] = conversation_dir
    # json's quoting is protobuf text format's for these strings (a path may hold quotes or backslashes)
    parameters = [
        f"  {{ key: {json.dumps(k)} value: {{ string_value: {json.dumps(v, ensure_ascii=False)} }} }}"
        for k, v in params.items()
    ]
    parts = [
        f'name: "{name}"',
        'backend: "python"',
        f"max_batch_size: {max_streams}",
        "input [\n" + ",\n".join(inputs) + "\n]",
        "output [\n" + ",\n".join(outputs) + "\n]",
        _sequence_batching([], idle_timeout_s, max_streams, max_streams, queue_delay_us, True),
        _instances(instances, PYTHON_VARIANT.instance_kind),
        "parameters [\n" + ",\n".join(parameters) + "\n]",
    ]
    return "\n".join(parts) + "\n"


__all__ = [
    "CONTROL_INPUTS", "CONVERSATION_ID", "CORRID", "END", "PARAM_CONVERSATION_DIR", "PYTHON_INPUTS", "PYTHON_OUTPUTS",
    "READY", "START", "TRITON_TYPES",
    "DEFAULT_VARIANTS", "ONNXRUNTIME_VARIANT", "PYTHON_VARIANT", "TENSORRT_VARIANT", "TritonConfigError", "VARIANTS",
    "VARIANT_RECORDS", "Variant", "batch_first", "graph_config", "python_config", "variant",
]  # fmt: skip
