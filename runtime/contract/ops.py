"""The op contract: one record per recurrent op, defined once.

Each op is an :class:`OpSpec`: its PyTorch and ONNX names, one :class:`OpTensor` per input and output
(name, role, symbolic shape, optional, which state input a state output continues) and one
:class:`OpAttribute` per attribute (name, default, required). Everything that needs a fact about an op
reads it from here: the ``torch.library`` registration, the ONNX schemas, nodes and local functions
(``rnnx.export.onnx_ops``), the TensorRT plugins' tests (tests/test_plugins.py compares the plugins'
fields, outputs, roles and output types with these records) and the runtime. See docs/ops.md
for the maths and layouts, and CONTRIBUTING.md for adding an op.

Roles decide dtypes: an ``activation`` or ``parameter`` tensor has the op's activation dtype (that
of its first input: fp32 / fp16 / bf16 / fp64), a ``state`` tensor has the state dtype of it
(fp32, fp64 for fp64: :func:`rnnx.models.ops.dtypes.state_dtype`), a ``mask`` tensor is bool / integer /
floating with non-zero meaning "pad".
A state output that ``updates`` a state input has its shape; it never aliases it (the runtime double-buffers
state, so no call writes the buffer it reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, TypeVar

#: ``torch.library`` namespace of the PyTorch ops (``torch.ops.rnnx.*``).
TORCH_NAMESPACE = "rnnx"
#: ONNX domain of the custom nodes and of their local functions.
ONNX_DOMAIN = "rnnx"
#: Version of that ONNX domain (``opset_import`` entry for ``ONNX_DOMAIN``). Version 2 (rnnx 0.4): the attention
#: op takes packed heads ``(B, L, H*E)`` and a pad mask; version 1 exports (heads apart, ``(B, H, L, E)``) still
#: run on their function bodies, but not on rnnx's native kernels or plugins of version 2 (re-export them).
ONNX_DOMAIN_VERSION = 2
#: TensorRT plugin namespace and version, carried by every custom node as attributes (the version follows
#: ``ONNX_DOMAIN_VERSION``).
PLUGIN_NAMESPACE = "rnnx"
PLUGIN_VERSION = "2"
PLUGIN_NAMESPACE_ATTR = "plugin_namespace"
PLUGIN_VERSION_ATTR = "plugin_version"

#: Per-step values (inputs and outputs); the op's activation dtype.
ACTIVATION = "activation"
#: Weights that are inputs of the op (no sequence axis); the activation dtype.
PARAMETER = "parameter"
#: Recurrent state carried between calls; the state dtype of the activation dtype (fp32; fp64 for fp64).
STATE = "state"
#: Pad mask: bool / integer / floating, non-zero marks a pad step.
MASK = "mask"
ROLES = (ACTIVATION, PARAMETER, STATE, MASK)
#: Role -> dtype rule: ``activation`` (the activation dtype), ``state`` or ``mask``.
DTYPE_RULES = {ACTIVATION: ACTIVATION, PARAMETER: ACTIVATION, STATE: STATE, MASK: MASK}


@dataclass(frozen=True)
class OpTensor:
    """One input or output of an op.

    ``dims`` is the symbolic shape, e.g. ``("L", "B", "D*d*k")`` (its length is the rank); ``updates``,
    on a state output only, names the state input whose updated value it is (same shape and dtype; the
    next call takes it as that input).
    """

    name: str
    role: str
    dims: tuple[str, ...]
    optional: bool = False
    updates: Optional[str] = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"tensor {self.name!r}: role {self.role!r} is not one of {ROLES}")
        if self.updates is not None and self.role != STATE:
            raise ValueError(f"tensor {self.name!r}: only a state tensor can update a state input")

    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.dims)

    @property
    def shape(self) -> str:
        """The symbolic shape as docs spell it: ``(L, B, D*d)``, ``(2*D*d,)``."""
        return f"({', '.join(self.dims)}{',' if self.rank == 1 else ''})"

    @property
    def dtype_rule(self) -> str:
        """``activation`` (the op's activation dtype), ``state`` (the state dtype of it) or ``mask``."""
        return DTYPE_RULES[self.role]


@dataclass(frozen=True)
class OpAttribute:
    """One attribute of an op (an ONNX node attribute, a TensorRT plugin field).

    The type of ``default`` is the attribute's type (bool is stored as int in ONNX and TensorRT). A
    ``required`` attribute has no usable default: ``default`` is only a placeholder of the right type.
    """

    name: str
    default: bool | int | float | str
    required: bool = False
    doc: str = ""

    @property
    def kind(self) -> str:
        """``int`` (bool and int), ``float`` or ``str``: the ONNX attribute / plugin field kind."""
        if isinstance(self.default, (bool, int)):
            return "int"
        return "float" if isinstance(self.default, float) else "str"


@dataclass(frozen=True)
class OpSpec:
    """One recurrent op: its PyTorch and ONNX names and its input, output and attribute records.

    The order of ``input_records`` / ``output_records`` / ``attribute_records`` is the order of the
    torch schema, the ONNX node / function and the plugin field table.
    """

    torch_name: str
    onnx_name: str
    input_records: tuple[OpTensor, ...]
    output_records: tuple[OpTensor, ...]
    attribute_records: tuple[OpAttribute, ...] = ()

    def __post_init__(self) -> None:
        names = [t.name for t in (*self.input_records, *self.output_records)]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.onnx_name}: tensor names are not unique: {names}")
        if not self.input_records or self.input_records[0].role != ACTIVATION:
            raise ValueError(f"{self.onnx_name}: the first input must be an activation (it sets the dtype)")
        for out in self.output_records:
            if out.updates is None:
                continue
            source = self.input(out.updates)
            if source.role != STATE or source.dims != out.dims:
                raise ValueError(
                    f"{self.onnx_name}: {out.name} updates {source.name}, which is not a state of its shape"
                )

    @property
    def qualname(self) -> str:
        """``rnnx::name`` as ``torch.library`` spells it."""
        return f"{TORCH_NAMESPACE}::{self.torch_name}"

    @property
    def inputs(self) -> tuple[str, ...]:
        """Input names, in schema / node order."""
        return tuple(t.name for t in self.input_records)

    @property
    def outputs(self) -> tuple[str, ...]:
        """Output names, in schema / node order."""
        return tuple(t.name for t in self.output_records)

    @property
    def optional_inputs(self) -> frozenset[str]:
        """Names of the inputs that may be absent (``Tensor?``, an empty ONNX input name)."""
        return frozenset(t.name for t in self.input_records if t.optional)

    @property
    def attributes(self) -> dict[str, bool | int | float | str]:
        """Attribute name -> default, in field-table order (the type of the default is the attribute's)."""
        return {a.name: a.default for a in self.attribute_records}

    @property
    def required_attributes(self) -> frozenset[str]:
        """Names of the attributes a node / plugin must be given (their default is a placeholder)."""
        return frozenset(a.name for a in self.attribute_records if a.required)

    @property
    def state_pairs(self) -> tuple[tuple[str, str], ...]:
        """``(state input, state output)`` pairs, e.g. ``(("c0", "c_last"),)``: the output continues the input."""
        return tuple((t.updates, t.name) for t in self.output_records if t.updates is not None)

    @property
    def dtype_input(self) -> str:
        """The input whose dtype is the op's activation dtype (the first input)."""
        return self.input_records[0].name

    @property
    def mask_input(self) -> Optional[str]:
        """The pad-mask input, or None when the op has none."""
        masks = self.inputs_with_role(MASK)
        return masks[0] if masks else None

    def inputs_with_role(self, role: str) -> tuple[str, ...]:
        """Names of the inputs of ``role`` (one of ``ROLES``), in order."""
        return tuple(t.name for t in self.input_records if t.role == role)

    def input(self, name: str) -> OpTensor:
        """The input record ``name``; ``KeyError`` for another name."""
        return _by_name(self.input_records, name, f"{self.onnx_name} input")

    def output(self, name: str) -> OpTensor:
        """The output record ``name``; ``KeyError`` for another name."""
        return _by_name(self.output_records, name, f"{self.onnx_name} output")

    def attribute(self, name: str) -> OpAttribute:
        """The attribute record ``name``; ``KeyError`` for another name."""
        return _by_name(self.attribute_records, name, f"{self.onnx_name} attribute")


_Record = TypeVar("_Record", OpTensor, OpAttribute)


def _by_name(records: tuple[_Record, ...], name: str, what: str) -> _Record:
    for record in records:
        if record.name == name:
            return record
    raise KeyError(f"no {what} {name!r}")


#: SRU elementwise recurrence (docs/ops.md, "SRU").
SRU_SCAN = OpSpec(
    torch_name="sru_scan",
    onnx_name="SRUScan",
    input_records=(
        OpTensor(
            "U",
            ACTIVATION,
            ("L", "B", "D*d*k"),
            doc="projections, laid out (L, B, D, d, k): per (direction, unit) the k columns x~, f, r[, x'] interleave",
        ),
        OpTensor(
            "x", ACTIVATION, ("L", "B", "D*d"), optional=True, doc="skip input x' before scaling (k = 3 with skip)"
        ),
        OpTensor("weight_c", PARAMETER, ("2*D*d",), doc="[v_f (D, d); v_r (D, d)]"),
        OpTensor("bias", PARAMETER, ("2*D*d",), doc="[b_f (D, d); b_r (D, d)]"),
        OpTensor("c0", STATE, ("B", "D*d"), doc="initial cell state"),
        OpTensor("mask_pad", MASK, ("L", "B"), optional=True, doc="non-zero marks a pad step: c is carried, h is 0"),
    ),
    output_records=(
        OpTensor("h", ACTIVATION, ("L", "B", "D*d"), doc="hidden states"),
        OpTensor("c_last", STATE, ("B", "D*d"), updates="c0", doc="last cell state"),
    ),
    attribute_records=(
        OpAttribute("hidden_size", 0, required=True, doc="d, per direction (0 is a placeholder)"),
        OpAttribute("num_directions", 1, doc="D: 1, or 2 for bidirectional"),
        OpAttribute("num_matrices", 3, doc="k: 3 (x~, f, r) or 4 (+ highway projection x')"),
        OpAttribute("has_skip_term", 1, doc="whether h gets the highway term (1 - r) * x'"),
        OpAttribute("use_tanh", 0, doc="g = tanh if 1 else identity"),
        OpAttribute("scale_x", 1.0, doc="x' = scale_x * x when k = 3"),
    ),
)

#: Causal linear attention with phi(x) = elu(x) + 1 (docs/ops.md, "Causal linear attention"). Heads are packed in
#: the last axis: element (b, t, h, e) of q is ``q[b, t, h*E + e]`` (``q[t, b, h*E + e]`` when ``time_major``), so
#: a model's projections feed the op with no reshape or transpose, and ``out`` feeds its output projection.
CAUSAL_LINEAR_ATTENTION = OpSpec(
    torch_name="causal_linear_attention",
    onnx_name="CausalLinearAttention",
    input_records=(
        OpTensor("q", ACTIVATION, ("B", "L", "H*E"), doc="queries, heads packed; (L, B, H*E) when time_major"),
        OpTensor("k", ACTIVATION, ("B", "L", "H*E"), doc="keys, q's layout"),
        OpTensor("v", ACTIVATION, ("B", "L", "H*M"), doc="values, heads packed; (L, B, H*M) when time_major"),
        OpTensor("S0", STATE, ("B", "H", "E", "M"), optional=True, doc="initial state (zeros when absent)"),
        OpTensor("z0", STATE, ("B", "H", "E"), optional=True, doc="initial normaliser (zeros when absent)"),
        OpTensor(
            "mask_pad",
            MASK,
            ("B", "L"),
            optional=True,
            doc="non-zero marks a pad step: S and z are carried over it (its key and value are ignored); "
            "(L, B) when time_major",
        ),
    ),
    output_records=(
        OpTensor(
            "out", ACTIVATION, ("B", "L", "H*M"), doc="attention output, heads packed; (L, B, H*M) when time_major"
        ),
        OpTensor("S_last", STATE, ("B", "H", "E", "M"), updates="S0", doc="last state"),
        OpTensor("z_last", STATE, ("B", "H", "E"), updates="z0", doc="last normaliser"),
    ),
    attribute_records=(
        OpAttribute("eps", 1e-6, doc="added to the denominator phi(q)^T z"),
        OpAttribute(
            "num_heads", 0, required=True, doc="H: q, k split into H heads of E, v into H of M (0 is a placeholder)"
        ),
        OpAttribute("time_major", 0, doc="1: q, k, v, out are (L, B, H*.) and mask_pad (L, B); 0: batch-first"),
    ),
)

#: The linear-recurrence family (docs/ops.md, "Linear recurrence"): ONNX opset 27's ``LinearAttention`` with rnnx's pad
#: mask. Names, layouts, attributes and defaults are the standard's, so ``ai.onnx::LinearAttention-27`` (and ONNX
#: Runtime's ``com.microsoft.LinearAttention``) is a lowering of the node: heads packed in the last axis, H_q a
#: multiple of H_kv (query head h reads kv head h // (H_q / H_kv)), decay in log space per head or per key dim.
#: Two extensions, both lowered to the standard by ordinary nodes before it: grouped value (H_kv a multiple of H_q:
#: query and key head h serve state heads h*R .. h*R+R-1, R = H_kv / H_q; Gated DeltaNet's layout) and
#: ``qk_l2_norm`` (ONNX Runtime's ``com.microsoft.GatedDeltaNet`` attribute of that name).
#: The epsilon of LINEAR_RECURRENCE's ``qk_l2_norm``: each head x becomes x / sqrt(sum(x^2) + QK_L2_NORM_EPS), as
#: transformers' and fla's ``l2norm`` (the kernels' kQK_L2_NORM_EPS in
#: plugins/linear_recurrence/linear_recurrence_constants.h; tests/test_ort_linear_recurrence.py checks they agree).
QK_L2_NORM_EPS = 1e-6
LINEAR_RECURRENCE = OpSpec(
    torch_name="linear_recurrence",
    onnx_name="LinearRecurrence",
    input_records=(
        OpTensor("query", ACTIVATION, ("B", "T", "Hq*dk"), doc="queries, heads packed"),
        OpTensor("key", ACTIVATION, ("B", "T", "Hk*dk"), doc="keys, heads packed; Hk = min(Hq, Hkv)"),
        OpTensor("value", ACTIVATION, ("B", "T", "Hkv*dv"), doc="values, heads packed"),
        OpTensor("past_state", STATE, ("B", "Hkv", "dk", "dv"), optional=True, doc="initial state (zeros when absent)"),
        OpTensor(
            "decay",
            ACTIVATION,
            ("B", "T", "Hkv*Dg"),
            optional=True,
            doc="log-space decay, Dg = 1 (per head) or dk (per key dim); gated and gated_delta only",
        ),
        OpTensor(
            "beta", ACTIVATION, ("B", "T", "Hb"), optional=True, doc="write strength, Hb = Hkv or 1; delta rules only"
        ),
        OpTensor(
            "mask_pad",
            MASK,
            ("B", "T"),
            optional=True,
            doc="non-zero marks a pad step: the state is carried over it (its key, decay and beta are ignored)",
        ),
    ),
    output_records=(
        OpTensor(
            "output",
            ACTIVATION,
            ("B", "T", "Ho*dv"),
            doc="scale * S_t^T q_t per query head (Hq >= Hkv) or per state head (Hkv > Hq); Ho = max(Hq, Hkv)",
        ),
        OpTensor("present_state", STATE, ("B", "Hkv", "dk", "dv"), updates="past_state", doc="last state"),
    ),
    attribute_records=(
        OpAttribute("q_num_heads", 0, required=True, doc="H_q (0 is a placeholder)"),
        OpAttribute(
            "kv_num_heads",
            0,
            required=True,
            doc="H_kv, state and value heads: a divisor of H_q, or a multiple (grouped value); 0 is a placeholder",
        ),
        OpAttribute("update_rule", "gated_delta", doc="linear | gated | delta | gated_delta (the standard's default)"),
        OpAttribute("scale", 0.0, doc="output scale; 0 means 1/sqrt(dk)"),
        OpAttribute("qk_l2_norm", 0, doc="1: each query and key head divided by sqrt(sum(x^2) + 1e-6) first"),
    ),
)

#: Depthwise causal convolution with a carried state (docs/ops.md, "Causal convolution with state"): ONNX opset 27's
#: ``CausalConvWithState`` (channels first, kernel K along time) with rnnx's pad mask and an fp32 state.
CAUSAL_CONV_WITH_STATE = OpSpec(
    torch_name="causal_conv_with_state",
    onnx_name="CausalConvWithState",
    input_records=(
        OpTensor("input", ACTIVATION, ("B", "C", "T"), doc="channels first"),
        OpTensor("weight", PARAMETER, ("C", "1", "K"), doc="one kernel of K taps per channel"),
        OpTensor("bias", PARAMETER, ("C",), optional=True, doc="per channel (zeros when absent)"),
        OpTensor(
            "past_state", STATE, ("B", "C", "K-1"), optional=True, doc="the last K-1 inputs before (zeros when absent)"
        ),
        OpTensor(
            "mask_pad",
            MASK,
            ("B", "T"),
            optional=True,
            doc="non-zero marks a pad step: it is skipped (output 0, state carried)",
        ),
    ),
    output_records=(
        OpTensor("output", ACTIVATION, ("B", "C", "T"), doc="y[b, c, t] = bias[c] + sum_j weight[c, 0, j] x[t-K+1+j]"),
        OpTensor("present_state", STATE, ("B", "C", "K-1"), updates="past_state", doc="the last K-1 inputs"),
    ),
    attribute_records=(
        OpAttribute("activation", "none", doc="none | silu | swish (silu and swish are y * sigmoid(y))"),
    ),
)

#: The linear-recurrence family's ops (ONNX opset 27's LinearAttention and CausalConvWithState with rnnx's pad mask).
RECURRENCE_FAMILY: tuple[OpSpec, ...] = (LINEAR_RECURRENCE, CAUSAL_CONV_WITH_STATE)

#: Every rnnx op, in the order of the plugin library's creators and the exporter's registry.
ALL_OPS: tuple[OpSpec, ...] = (SRU_SCAN, CAUSAL_LINEAR_ATTENTION, *RECURRENCE_FAMILY)
