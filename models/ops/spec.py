"""The op contract: names, attributes and defaults of the two recurrent ops, defined once.

Everything that names an op — the ``torch.library`` registration, the ONNX exporter, the TensorRT
plugins' tests and the runtime — imports it from here. See docs/ops.md for the maths and layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: ``torch.library`` namespace of the PyTorch ops (``torch.ops.rnnx.*``).
TORCH_NAMESPACE = "rnnx"
#: ONNX domain of the custom nodes and of their local functions.
ONNX_DOMAIN = "rnnx"
#: Version of that ONNX domain (``opset_import`` entry for ``ONNX_DOMAIN``).
ONNX_DOMAIN_VERSION = 1
#: TensorRT plugin namespace and version, carried by every custom node as attributes.
PLUGIN_NAMESPACE = "rnnx"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE_ATTR = "plugin_namespace"
PLUGIN_VERSION_ATTR = "plugin_version"


@dataclass(frozen=True)
class OpSpec:
    """One recurrent op: its PyTorch and ONNX names, its inputs, outputs and attributes."""

    torch_name: str
    onnx_name: str
    inputs: tuple[str, ...]
    optional_inputs: frozenset[str]
    outputs: tuple[str, ...]
    #: attribute name -> default value (the type of the default is the attribute's type).
    attributes: dict[str, object] = field(default_factory=dict)

    @property
    def qualname(self) -> str:
        """``rnnx::name`` as ``torch.library`` spells it."""
        return f"{TORCH_NAMESPACE}::{self.torch_name}"


#: SRU elementwise recurrence.
#:
#: U        (L, B, D*d*k)  projections, laid out (L, B, D, d, k) as in the ``sru`` package:
#:                         for each (direction, hidden unit) the k columns x~, f, r[, x'] interleave.
#: x        (L, B, D*d)    skip input x' before scaling (k = 3 with a skip term), else absent.
#: weight_c (2*D*d,)       [v_f (D, d); v_r (D, d)].
#: bias     (2*D*d,)       [b_f (D, d); b_r (D, d)].
#: c0       (B, D*d)       initial cell state; fp32 when the activations are fp16/bf16.
#: mask_pad (L, B)         optional, non-zero marks a pad step: c is carried, h is 0.
#: h        (L, B, D*d)    output, dtype of U.
#: c_last   (B, D*d)       last cell state, dtype of c0.
SRU_SCAN = OpSpec(
    torch_name="sru_scan",
    onnx_name="SRUScan",
    inputs=("U", "x", "weight_c", "bias", "c0", "mask_pad"),
    optional_inputs=frozenset({"x", "mask_pad"}),
    outputs=("h", "c_last"),
    attributes={
        "hidden_size": 0,  # d, per direction; required (0 is not valid)
        "num_directions": 1,  # D: 1, or 2 for bidirectional
        "num_matrices": 3,  # k: 3 (x~, f, r) or 4 (+ highway projection x')
        "has_skip_term": 1,  # whether h gets the highway term (1 - r) * x'
        "use_tanh": 0,  # g = tanh if 1 else identity
        "scale_x": 1.0,  # x' = scale_x * x when k = 3
    },
)

#: Causal linear attention with phi(x) = elu(x) + 1.
#:
#: q, k     (B, H, L, E)
#: v        (B, H, L, M)
#: S0       (B, H, E, M)   optional initial state, fp32 (zeros when absent)
#: z0       (B, H, E)      optional initial normaliser, fp32 (zeros when absent)
#: out      (B, H, L, M)   dtype of q
#: S_last   (B, H, E, M)   fp32 (fp64 when q is fp64)
#: z_last   (B, H, E)      fp32 (fp64 when q is fp64)
CAUSAL_LINEAR_ATTENTION = OpSpec(
    torch_name="causal_linear_attention",
    onnx_name="CausalLinearAttention",
    inputs=("q", "k", "v", "S0", "z0"),
    optional_inputs=frozenset({"S0", "z0"}),
    outputs=("out", "S_last", "z_last"),
    attributes={
        "eps": 1e-6,  # added to the denominator phi(q)^T z
    },
)

ALL_OPS: tuple[OpSpec, ...] = (SRU_SCAN, CAUSAL_LINEAR_ATTENTION)


def state_dtype_for(dtype: torch.dtype) -> torch.dtype:  # noqa: F821
    """The dtype recurrent state is kept in for activations of ``dtype``: fp32, or fp64 for fp64."""
    import torch

    return torch.float64 if dtype == torch.float64 else torch.float32
