"""Converters from transformers' recurrent token mixers to their rnnx twins (:func:`rnnx.models.convert`).

:data:`CONVERTERS` maps, by qualified class name (transformers 5.x; checked with 5.24.0):

* ``Qwen3_5GatedDeltaNet`` (``qwen3_5``), ``Qwen3_5MoeGatedDeltaNet`` (``qwen3_5_moe``) ->
  :class:`~rnnx.models.gated_deltanet.GatedDeltaNet`, weights as they are (same names and layouts);
* ``Qwen3NextGatedDeltaNet`` (``qwen3_next``) -> :class:`~rnnx.models.gated_deltanet.GatedDeltaNet`, with its
  fused projections split: ``in_proj_qkvz`` (hidden -> H_k * [q d_k | k d_k | v r*d_v | z r*d_v], r = H_v/H_k,
  grouped per key head) becomes ``in_proj_qkv`` (all q, all k, all v) and ``in_proj_z``; ``in_proj_ba`` (hidden
  -> H_k * [b r | a r]) becomes ``in_proj_b`` and ``in_proj_a``; value head h of key head h // r keeps index h;
* ``Mamba2Mixer`` (``mamba2``) -> :class:`~rnnx.models.mamba2.Mamba2Mixer`, weights as they are.

Only these layers are replaced: a whole model converts to the same tree with the mixers swapped, its attention,
MLP, norm and embedding layers untouched. The twins take ``(x, state, pad_mask) -> (y, state)``, not
transformers' ``(hidden_states, cache=, attention_mask=)``, so a converted transformers model is a container of
rnnx layers, not a drop-in for transformers' own forward. Rejected with
:class:`~rnnx.models.convert.ConversionError`: a convolution activation other than SiLU, a layer missing an
attribute this module reads (another transformers layout), or weights that do not fit.

transformers is never imported here; classes are recognised by name.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .convert import Converter, carry_over, conversion_error, package_version, qualified_name
from .gated_deltanet import GatedDeltaNet
from .mamba2 import Mamba2Mixer

__all__ = ["CONVERTERS", "TRANSFORMERS_VERSION", "convert_gated_deltanet", "convert_mamba2_mixer"]

#: the transformers release these converters were checked against
TRANSFORMERS_VERSION = "5.24.0"

_SILU = ("silu", "swish")


def _describe(layer: nn.Module) -> str:
    return f"{qualified_name(type(layer))} (transformers {package_version(layer) or 'version unknown'})"


def _read(layer: nn.Module, path: str, name: str) -> object:
    if not hasattr(layer, name):
        raise conversion_error(path, _describe(layer), f"it has no attribute {name!r} (another transformers layout?)")
    return getattr(layer, name)


def _check_silu(layer: nn.Module, path: str, name: str) -> None:
    activation = _read(layer, path, name)
    if activation not in _SILU:
        raise conversion_error(path, _describe(layer), f"its {name} is {activation!r}; the twin supports silu only")


def _gdn_twin(layer: nn.Module, path: str) -> GatedDeltaNet:
    _check_silu(layer, path, "activation")
    norm = _read(layer, path, "norm")
    return GatedDeltaNet(
        hidden_size=int(_read(layer, path, "hidden_size")),
        num_key_heads=int(_read(layer, path, "num_k_heads")),
        num_value_heads=int(_read(layer, path, "num_v_heads")),
        key_head_dim=int(_read(layer, path, "head_k_dim")),
        value_head_dim=int(_read(layer, path, "head_v_dim")),
        conv_kernel=int(_read(layer, path, "conv_kernel_size")),
        eps=float(_read(norm, path, "variance_epsilon")),
    ).to(device=layer.out_proj.weight.device, dtype=layer.out_proj.weight.dtype)


def convert_gated_deltanet(layer: nn.Module, path: str) -> GatedDeltaNet:
    """``Qwen3_5GatedDeltaNet`` / ``Qwen3_5MoeGatedDeltaNet`` -> :class:`GatedDeltaNet` (same state dict)."""
    return carry_over(layer, _gdn_twin(layer, path), path)


def convert_qwen3_next_gated_deltanet(layer: nn.Module, path: str) -> GatedDeltaNet:
    """``Qwen3NextGatedDeltaNet`` -> :class:`GatedDeltaNet`, its fused ``in_proj_qkvz`` / ``in_proj_ba`` split."""
    twin = _gdn_twin(layer, path)
    Hk, Hv, dk, dv = twin.num_key_heads, twin.num_value_heads, twin.key_head_dim, twin.value_head_dim
    r = Hv // Hk
    state = dict(layer.state_dict(keep_vars=True))
    qkvz = state.pop("in_proj_qkvz.weight", None)
    ba = state.pop("in_proj_ba.weight", None)
    if qkvz is None or ba is None:
        raise conversion_error(path, _describe(layer), "it has no in_proj_qkvz / in_proj_ba weights")
    hidden = twin.hidden_size
    if tuple(qkvz.shape) != (Hk * (2 * dk + 2 * r * dv), hidden) or tuple(ba.shape) != (2 * Hv, hidden):
        raise conversion_error(
            path, _describe(layer), f"in_proj_qkvz {tuple(qkvz.shape)} / in_proj_ba {tuple(ba.shape)} do not fit "
            f"{Hk} key heads of {dk} and {Hv} value heads of {dv} on hidden {hidden}",
        )  # fmt: skip
    with torch.no_grad():
        q, k, v, z = qkvz.detach().reshape(Hk, 2 * dk + 2 * r * dv, hidden).split([dk, dk, r * dv, r * dv], dim=1)
        b, a = ba.detach().reshape(Hk, 2 * r, hidden).split([r, r], dim=1)
        state["in_proj_qkv.weight"] = nn.Parameter(
            torch.cat([q.reshape(-1, hidden), k.reshape(-1, hidden), v.reshape(-1, hidden)]).contiguous(),
            requires_grad=qkvz.requires_grad,
        )
        state["in_proj_z.weight"] = nn.Parameter(z.reshape(-1, hidden).contiguous(), qkvz.requires_grad)
        state["in_proj_b.weight"] = nn.Parameter(b.reshape(-1, hidden).contiguous(), ba.requires_grad)
        state["in_proj_a.weight"] = nn.Parameter(a.reshape(-1, hidden).contiguous(), ba.requires_grad)
    twin = carry_over(layer, twin, path, state)
    for name, source in (("in_proj_qkv", qkvz), ("in_proj_z", qkvz), ("in_proj_b", ba), ("in_proj_a", ba)):
        getattr(twin, name).weight.requires_grad_(source.requires_grad)
    return twin


def convert_mamba2_mixer(layer: nn.Module, path: str) -> Mamba2Mixer:
    """``Mamba2Mixer`` -> :class:`Mamba2Mixer` (same state dict)."""
    _check_silu(layer, path, "activation")
    num_heads, head_dim = int(_read(layer, path, "num_heads")), int(_read(layer, path, "head_dim"))
    intermediate = int(_read(layer, path, "intermediate_size"))
    if num_heads * head_dim != intermediate:
        raise conversion_error(
            path, _describe(layer), f"num_heads {num_heads} x head_dim {head_dim} != intermediate_size {intermediate}"
        )
    limit = tuple(_read(layer, path, "time_step_limit"))
    weight = layer.out_proj.weight
    twin = Mamba2Mixer(
        hidden_size=int(_read(layer, path, "hidden_size")),
        num_heads=num_heads,
        head_dim=head_dim,
        state_size=int(_read(layer, path, "ssm_state_size")),
        n_groups=int(_read(layer, path, "n_groups")),
        conv_kernel=int(_read(layer, path, "conv_kernel_size")),
        use_conv_bias=bool(_read(layer, path, "use_conv_bias")),
        use_bias=bool(_read(layer, path, "use_bias")),
        eps=float(_read(layer.norm, path, "variance_epsilon")),
        norm_before_gate=False,
        time_step_limit=(float(limit[0]), float(limit[1]) if limit[1] is not None else math.inf),
    ).to(device=weight.device, dtype=weight.dtype)
    return carry_over(layer, twin, path)


CONVERTERS: dict[str, Converter] = {
    "transformers.models.qwen3_5.modeling_qwen3_5.Qwen3_5GatedDeltaNet": convert_gated_deltanet,
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe.Qwen3_5MoeGatedDeltaNet": convert_gated_deltanet,
    "transformers.models.qwen3_next.modeling_qwen3_next.Qwen3NextGatedDeltaNet": convert_qwen3_next_gated_deltanet,
    "transformers.models.mamba2.modeling_mamba2.Mamba2Mixer": convert_mamba2_mixer,
}
