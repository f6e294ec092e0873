"""transformers checkpoint folders -> rnnx language models: :func:`from_pretrained`.

A folder as transformers' ``save_pretrained`` writes it (``config.json`` and ``model.safetensors``, or its shards
with ``model.safetensors.index.json``) becomes a :class:`~rnnx.models.decoder.DecoderLM` with the weights carried.
The families (:data:`FAMILIES`, by ``config.json``'s ``model_type``; checked with transformers 5.24):

==================  ===================================================================================================
``qwen3_5_text``,   Gated DeltaNet (``gated_deltanet`` blocks) and gated softmax attention (partial RoPE, q / k norm,
``qwen3_5``         a sigmoid output gate), each followed by a SwiGLU MLP; zero-centred RMS norms (``qwen3_5``: the
                    text model of ``Qwen3_5ForConditionalGeneration``, its vision tower left out)
``mamba2``          Mamba-2 mixers
``nemotron_h``      Mamba-2 mixers, attention without positions and ReLU-squared MLPs, one per block
                    (``layers_block_type``)
``lfm2``            LFM2's gated short convolutions and attention (RoPE, q / k norm), each followed by a SwiGLU MLP
==================  ===================================================================================================

Every field of ``config.json`` is either read (and its value checked against what the twin computes) or known
not to change the model's outputs (initialisation, training, generation defaults); anything else, and any value
the twin does not compute, is refused with :class:`UnsupportedCheckpoint`, one line naming the field, and nothing
is written. So are unknown model types, and weights that are missing, left over or of the wrong shape.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import torch

from ..runtime.contract.artifact import sha256_file
from .checkpoint import CheckpointError, load_checkpoint
from .decoder import DecoderLM
from .lm import RecurrentLM

__all__ = ["FAMILIES", "UnsupportedCheckpoint", "from_pretrained", "is_transformers_checkpoint", "load_model", "plan"]

PathLike = Union[str, os.PathLike]
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"


class UnsupportedCheckpoint(CheckpointError):
    """A checkpoint folder rnnx cannot convert; the message names the file and the field or weight, in one line."""


#: Fields of every family that do not change a model's outputs: what the weights were initialised and trained
#: with, generation defaults, bookkeeping.
_IGNORED = frozenset({
    "architectures", "bos_token_id", "eos_token_id", "pad_token_id", "dtype", "torch_dtype", "initializer_range",
    "transformers_version", "use_cache", "max_position_embeddings", "attention_dropout", "hidden_dropout",
    "output_attentions", "output_hidden_states", "return_dict", "num_logits_to_keep",
})  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """What a checkpoint becomes: the :class:`DecoderLM` configuration and, per rnnx parameter, the checkpoint
    tensor it takes (``prefix`` is prepended to every checkpoint name)."""

    config: dict[str, Any]
    names: dict[str, str]


class _Fields:
    """Reads a ``config.json`` dict, remembering what it read; :meth:`refuse_others` refuses the rest."""

    def __init__(self, config: dict[str, Any], where: str) -> None:
        self.config, self.where, self.read = config, where, set(_IGNORED) | {"model_type"}

    def get(self, name: str, default: Any = None) -> Any:
        self.read.add(name)
        return self.config.get(name, default)

    def need(self, name: str) -> Any:
        if name not in self.config:
            raise UnsupportedCheckpoint(f"{self.where}: field {name!r} missing")
        return self.get(name)

    def expect(self, name: str, allowed: Iterable[Any], default: Any = None) -> Any:
        value = self.get(name, default)
        allowed = tuple(allowed)
        if value not in allowed:
            shown = ", ".join(json.dumps(a) for a in allowed)
            raise UnsupportedCheckpoint(
                f"{self.where}: field {name!r} is {json.dumps(value)}; rnnx converts {shown} only"
            )
        return value

    def allow(self, *names: str) -> None:
        """Fields known not to matter for this family (its MoE sizes when no layer is MoE, and the like)."""
        self.read.update(names)

    def refuse_others(self) -> None:
        for name in self.config:
            if name not in self.read:
                raise UnsupportedCheckpoint(
                    f"{self.where}: field {name!r} ({self.config['model_type']}) is not one rnnx's converter handles"
                )


def _float(value: Any) -> Optional[float]:
    """A config number (transformers writes infinity as ``{"__float__": "Infinity"}``); None for +infinity."""
    if isinstance(value, dict) and "__float__" in value:
        value = float(value["__float__"])
    value = float(value)
    return None if math.isinf(value) and value > 0 else value


def _rope(f: _Fields, head_dim: int) -> tuple[int, float]:
    """(rotary_dim, theta) of ``rope_parameters`` (default RoPE only)."""
    rope = dict(f.need("rope_parameters"))
    if rope.get("rope_type", "default") != "default":
        raise UnsupportedCheckpoint(
            f'{f.where}: rope_parameters.rope_type is {json.dumps(rope.get("rope_type"))}; rnnx converts "default" only'
        )
    unknown = sorted(set(rope) - {"rope_type", "rope_theta", "partial_rotary_factor", "mrope_section",
                                  "mrope_interleaved"})  # fmt: skip
    if unknown:
        raise UnsupportedCheckpoint(f"{f.where}: rope_parameters.{unknown[0]} is not one rnnx's converter handles")
    return int(head_dim * float(rope.get("partial_rotary_factor", 1.0))), float(rope["rope_theta"])


def _mlp_block(names: dict[str, str], index: int, hf: str, norm: str, parts: dict[str, str], **options: Any) -> dict:
    """An ``mlp`` block at ``index`` whose norm is ``hf.norm`` and whose projections are ``hf.<parts[name]>``."""
    names[f"blocks.{index}.norm.weight"] = f"{norm}.weight"
    for ours, theirs in parts.items():
        names[f"blocks.{index}.module.{ours}.weight"] = f"{hf}.{theirs}.weight"
    return {"kind": "mlp", "options": options}


def _module_names(names: dict[str, str], index: int, norm: str, module: str, params: Iterable[str]) -> None:
    """``blocks.<index>.norm`` <- ``norm``; ``blocks.<index>.module.<p>`` <- ``module.<p>`` for each of ``params``."""
    names[f"blocks.{index}.norm.weight"] = f"{norm}.weight"
    for p in params:
        names[f"blocks.{index}.module.{p}"] = f"{module}.{p}"


_GDN_PARAMS = ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight", "conv1d.weight",
               "dt_bias", "A_log", "norm.weight", "out_proj.weight")  # fmt: skip
_MAMBA_PARAMS = ("in_proj.weight", "conv1d.weight", "dt_bias", "A_log", "D", "norm.weight", "out_proj.weight")


def _attention_params(bias: bool, norm: bool) -> list[str]:
    params = [f"{p}_proj.{w}" for p in "qkvo" for w in (("weight", "bias") if bias else ("weight",))]
    return params + (["q_norm.weight", "k_norm.weight"] if norm else [])


def _qwen3_5(config: dict[str, Any], where: str) -> Plan:
    text = config
    prefix = "model."
    if config.get("model_type") in ("qwen3_5", "qwen3_5_moe"):  # the text model of ...ForConditionalGeneration
        f = _Fields(config, where)
        text = dict(f.need("text_config"))
        f.allow("vision_config", "image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id",
                "tie_word_embeddings")  # fmt: skip
        f.refuse_others()
        text.setdefault("tie_word_embeddings", config.get("tie_word_embeddings", False))
        text.setdefault("model_type", f"{config['model_type']}_text")
        prefix = "model.language_model."
    f = _Fields(text, where)
    f.expect("hidden_act", ("silu",))
    f.allow("mtp_num_hidden_layers", "mtp_use_dedicated_embeddings")
    hidden, eps, vocab = int(f.need("hidden_size")), float(f.need("rms_norm_eps")), int(f.need("vocab_size"))
    heads, kv_heads = int(f.need("num_attention_heads")), int(f.need("num_key_value_heads"))
    head_dim = int(f.get("head_dim") or hidden // heads)
    rotary_dim, theta = _rope(f, head_dim)
    bias = bool(f.get("attention_bias", False))
    layer_types = list(f.need("layer_types"))
    if len(layer_types) != int(f.need("num_hidden_layers")):
        raise UnsupportedCheckpoint(f"{where}: layer_types has {len(layer_types)} entries, num_hidden_layers is "
                                    f"{f.config['num_hidden_layers']}")  # fmt: skip
    gdn = dict(num_key_heads=int(f.need("linear_num_key_heads")), num_value_heads=int(f.need("linear_num_value_heads")),
               key_head_dim=int(f.need("linear_key_head_dim")), value_head_dim=int(f.need("linear_value_head_dim")),
               conv_kernel=int(f.need("linear_conv_kernel_dim")), eps=eps)  # fmt: skip
    attention = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, rotary_dim=rotary_dim, rope_theta=theta,
                     qk_norm_eps=eps, qk_norm_offset=1.0, output_gate=True, bias=bias)  # fmt: skip
    moe = text.get("model_type") == "qwen3_5_moe_text"
    if moe:
        f.allow("router_aux_loss_coef", "output_router_logits")  # training only
        experts = dict(num_experts=int(f.need("num_experts")), top_k=int(f.need("num_experts_per_tok")),
                       intermediate_size=int(f.need("moe_intermediate_size")),
                       shared_intermediate_size=int(f.need("shared_expert_intermediate_size")))  # fmt: skip
    else:
        mlp = {"intermediate_size": int(f.need("intermediate_size")), "gated": True, "activation": "silu"}
    blocks: list[dict] = []
    names: dict[str, str] = {}
    for i, kind in enumerate(layer_types):
        layer = f"{prefix}layers.{i}"
        if kind == "linear_attention":
            _module_names(names, len(blocks), f"{layer}.input_layernorm", f"{layer}.linear_attn", _GDN_PARAMS)
            blocks.append({"kind": "gated_deltanet", "options": gdn})
        elif kind == "full_attention":
            _module_names(names, len(blocks), f"{layer}.input_layernorm", f"{layer}.self_attn",
                          _attention_params(bias, norm=True))  # fmt: skip
            blocks.append({"kind": "attention", "options": attention})
        else:
            raise UnsupportedCheckpoint(f"{where}: layer_types[{i}] is {json.dumps(kind)}; rnnx converts "
                                        '"linear_attention", "full_attention" only')  # fmt: skip
        if moe:
            params = ["gate.weight", "shared_expert_gate.weight",
                      *(f"{m}.{p}_proj.weight" for m in ("shared_expert", *(f"experts.{e}" for e in
                                                                            range(experts["num_experts"])))
                        for p in ("gate", "up", "down"))]  # fmt: skip
            _module_names(names, len(blocks), f"{layer}.post_attention_layernorm", f"{layer}.mlp", params)
            blocks.append({"kind": "moe", "options": experts})
            continue
        parts = {"gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"}
        blocks.append(_mlp_block(names, len(blocks), f"{layer}.mlp", f"{layer}.post_attention_layernorm", parts, **mlp))
    tie = bool(f.get("tie_word_embeddings", False))
    f.refuse_others()
    return _finish(names, prefix, "embed_tokens", "norm", tie, config["model_type"],
        dict(vocab_size=vocab, hidden_size=hidden, blocks=blocks, norm_eps=eps, norm_offset=1.0))  # fmt: skip


def _mamba2_options(f: _Fields, heads: str, head_dim: str, state: str, limit: tuple) -> dict[str, Any]:
    f.expect("hidden_act" if "hidden_act" in f.config else "mamba_hidden_act", ("silu", "swish"), "silu")
    return dict(
        num_heads=int(f.need(heads)), head_dim=int(f.need(head_dim)), state_size=int(f.need(state)),
        n_groups=int(f.need("n_groups")), conv_kernel=int(f.need("conv_kernel")),
        use_conv_bias=bool(f.get("use_conv_bias", True)), use_bias=bool(f.get("use_bias", False)),
        eps=float(f.need("layer_norm_epsilon")), norm_before_gate=False, time_step_limit=list(limit),
    )  # fmt: skip


def _mamba_params(options: dict[str, Any]) -> list[str]:
    params = list(_MAMBA_PARAMS)
    if options["use_conv_bias"]:
        params.append("conv1d.bias")
    if options["use_bias"]:
        params += ["in_proj.bias", "out_proj.bias"]
    return params


def _mamba2(config: dict[str, Any], where: str) -> Plan:
    f = _Fields(config, where)
    hidden, vocab = int(f.need("hidden_size")), int(f.need("vocab_size"))
    limit = [_float(v) for v in f.get("time_step_limit", [0.0, None])]
    mixer = _mamba2_options(f, "num_heads", "head_dim", "state_size", tuple(limit))
    if int(f.get("expand", 2)) * hidden != mixer["num_heads"] * mixer["head_dim"]:
        raise UnsupportedCheckpoint(f"{where}: expand * hidden_size != num_heads * head_dim")
    f.allow("chunk_size", "time_step_rank", "time_step_min", "time_step_max", "time_step_floor",
            "rescale_prenorm_residual", "residual_in_fp32", "expand")  # fmt: skip
    blocks, names = [], {}
    for i in range(int(f.need("num_hidden_layers"))):
        layer = f"backbone.layers.{i}"
        _module_names(names, i, f"{layer}.norm", f"{layer}.mixer", _mamba_params(mixer))
        blocks.append({"kind": "mamba2", "options": mixer})
    tie = bool(f.get("tie_word_embeddings", False))
    f.refuse_others()
    eps = mixer["eps"]
    return _finish(names, "backbone.", "embeddings", "norm_f", tie, "mamba2",
        dict(vocab_size=vocab, hidden_size=hidden, blocks=blocks, norm_eps=eps, norm_offset=0.0))  # fmt: skip


#: nemotron_h's block names (``layers_block_type``; the one-letter ``hybrid_override_pattern`` of older configs).
_NEMOTRON_KINDS = {"linear_attention": "mamba2", "mamba": "mamba2", "M": "mamba2", "full_attention": "attention",
                   "attention": "attention", "*": "attention", "mlp": "mlp", "-": "mlp"}  # fmt: skip


def _nemotron_h(config: dict[str, Any], where: str) -> Plan:
    f = _Fields(config, where)
    hidden, eps = int(f.need("hidden_size")), float(f.need("layer_norm_epsilon"))
    vocab = int(f.need("vocab_size"))
    pattern = f.get("layers_block_type") or list(f.get("hybrid_override_pattern") or "")
    f.allow("hybrid_override_pattern", "num_hidden_layers", "chunk_size", "time_step_rank", "time_step_max",
            "time_step_floor", "rescale_prenorm_residual", "residual_in_fp32", "expand", "mamba_ssm_cache_dtype",
            "use_mamba_kernels", "time_step_limit", "mtp_layers_block_type", "num_nextn_predict_layers",
            "moe_intermediate_size", "moe_latent_size", "moe_shared_expert_intermediate_size",
            "moe_shared_expert_overlap", "n_group", "n_routed_experts", "n_shared_experts", "norm_topk_prob",
            "num_experts_per_tok", "output_router_logits", "routed_scaling_factor", "topk_group")  # fmt: skip
    if f.get("sliding_window") is not None:
        raise UnsupportedCheckpoint(f"{where}: field 'sliding_window' is {f.config['sliding_window']}; rnnx converts "
                                    "null only")  # fmt: skip
    # transformers' NemotronH mixer clamps dt to (time_step_min, inf), not time_step_limit
    mixer = _mamba2_options(f, "mamba_num_heads", "mamba_head_dim", "ssm_state_size",
                            (float(f.need("time_step_min")), None))  # fmt: skip
    mixer["use_bias"] = bool(f.get("use_bias", False))
    f.allow("mamba_proj_bias")
    heads, kv_heads = int(f.need("num_attention_heads")), int(f.need("num_key_value_heads"))
    bias = bool(f.get("attention_bias", False))
    attention = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=int(f.get("head_dim") or hidden // heads),
                     rotary_dim=0, bias=bias)  # fmt: skip
    f.expect("mlp_hidden_act", ("relu2",))
    mlp = dict(intermediate_size=int(f.need("intermediate_size")), gated=False, activation="relu2",
               bias=bool(f.get("mlp_bias", False)))  # fmt: skip
    blocks, names = [], {}
    for i, name in enumerate(pattern):
        kind = _NEMOTRON_KINDS.get(name)
        if kind is None:
            raise UnsupportedCheckpoint(f"{where}: layers_block_type[{i}] is {json.dumps(name)}; rnnx converts "
                                        "mamba, attention and mlp blocks (no MoE)")  # fmt: skip
        layer = f"model.layers.{i}"
        params = {"mamba2": _mamba_params(mixer), "attention": _attention_params(bias, norm=False),
                  "mlp": [f"{p}.{w}" for p in ("up_proj", "down_proj")
                          for w in (("weight", "bias") if mlp["bias"] else ("weight",))]}[kind]  # fmt: skip
        _module_names(names, i, f"{layer}.norm", f"{layer}.mixer", params)
        blocks.append({"kind": kind, "options": {"mamba2": mixer, "attention": attention, "mlp": mlp}[kind]})
    tie = bool(f.get("tie_word_embeddings", False))
    f.refuse_others()
    return _finish(names, "model.", "embeddings", "norm_f", tie, "nemotron_h",
        dict(vocab_size=vocab, hidden_size=hidden, blocks=blocks, norm_eps=eps, norm_offset=0.0))  # fmt: skip


def _lfm2(config: dict[str, Any], where: str) -> Plan:
    f = _Fields(config, where)
    hidden, eps = int(f.need("hidden_size")), float(f.need("norm_eps"))
    vocab = int(f.need("vocab_size"))
    heads, kv_heads = int(f.need("num_attention_heads")), int(f.need("num_key_value_heads"))
    head_dim = hidden // heads
    rotary_dim, theta = _rope(f, head_dim)
    layer_types = list(f.need("layer_types"))
    f.allow("num_hidden_layers", "full_attn_idxs", "block_auto_adjust_ff_dim", "block_ffn_dim_multiplier",
            "block_multiple_of", "intermediate_size")  # fmt: skip
    conv = dict(kernel_size=int(f.need("conv_L_cache")), bias=bool(f.get("conv_bias", False)))
    attention = dict(num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, rotary_dim=rotary_dim, rope_theta=theta,
                     qk_norm_eps=eps, qk_norm_offset=0.0)  # fmt: skip
    conv_params = ["in_proj.weight", "conv.weight", "out_proj.weight"] + (
        ["in_proj.bias", "conv.bias", "out_proj.bias"] if conv["bias"] else [])  # fmt: skip
    blocks, names = [], {}
    for i, kind in enumerate(layer_types):
        layer = f"model.layers.{i}"
        index = len(blocks)
        names[f"blocks.{index}.norm.weight"] = f"{layer}.operator_norm.weight"
        if kind == "conv":
            for p in conv_params:
                names[f"blocks.{index}.module.{p}"] = f"{layer}.conv.{p}"
            blocks.append({"kind": "short_conv", "options": conv})
        elif kind == "full_attention":
            for ours, theirs in (
                ("q_proj", "q_proj"),
                ("k_proj", "k_proj"),
                ("v_proj", "v_proj"),
                ("o_proj", "out_proj"),
                ("q_norm", "q_layernorm"),
                ("k_norm", "k_layernorm"),
            ):
                names[f"blocks.{index}.module.{ours}.weight"] = f"{layer}.self_attn.{theirs}.weight"  # fmt: skip
            blocks.append({"kind": "attention", "options": attention})
        else:
            raise UnsupportedCheckpoint(f"{where}: layer_types[{i}] is {json.dumps(kind)}; rnnx converts \"conv\", "
                                        '"full_attention" only')  # fmt: skip
        parts = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
        # the MLP's width comes from its weights (the config's is adjusted by block_auto_adjust_ff_dim and friends)
        blocks.append(_mlp_block(names, len(blocks), f"{layer}.feed_forward", f"{layer}.ffn_norm", parts,
                                 intermediate_size=-1, gated=True, activation="silu"))  # fmt: skip
    tie = bool(f.get("tie_word_embeddings", True))
    f.refuse_others()
    return _finish(names, "model.", "embed_tokens", "embedding_norm", tie, "lfm2",
        dict(vocab_size=vocab, hidden_size=hidden, blocks=blocks, norm_eps=eps, norm_offset=0.0))  # fmt: skip


def _finish(
    names: dict[str, str], prefix: str, embedding: str, norm: str, tie: bool, model_type: str, config: dict
) -> Plan:
    """The plan: ``names`` plus the embedding, final norm and (untied) head weights; ``config`` (the DecoderLM's
    sizes, blocks and norms) plus the tie and the source's model type."""
    names["embedding.weight"] = f"{prefix}{embedding}.weight"
    names["norm.weight"] = f"{prefix}{norm}.weight"
    if not tie:
        names["head.weight"] = "lm_head.weight"
    return Plan({**config, "tie_word_embeddings": tie, "source": {"model_type": model_type}}, names)


#: model_type -> the function that plans its conversion.
FAMILIES: dict[str, Callable[[dict[str, Any], str], Plan]] = {
    "qwen3_5_text": _qwen3_5,
    "qwen3_5": _qwen3_5,
    "qwen3_5_moe_text": _qwen3_5,
    "qwen3_5_moe": _qwen3_5,
    "mamba2": _mamba2,
    "nemotron_h": _nemotron_h,
    "lfm2": _lfm2,
}


def _read_config(folder: Path) -> dict[str, Any]:
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise UnsupportedCheckpoint(f"{path}: missing (a transformers checkpoint folder has config.json)")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UnsupportedCheckpoint(f"{path}: invalid JSON ({error})") from None
    if not isinstance(config, dict):
        raise UnsupportedCheckpoint(f"{path}: not a JSON object")
    return config


def is_transformers_checkpoint(folder: PathLike) -> bool:
    """Whether ``folder`` holds a transformers ``config.json`` (a ``model_type``, not an rnnx checkpoint's)."""
    path = Path(folder) / CONFIG_FILE
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model_type" in config and config.get("format") != "rnnx-checkpoint"


def plan(folder: PathLike) -> Plan:
    """The conversion of the checkpoint in ``folder`` (its ``config.json`` only); :class:`UnsupportedCheckpoint`."""
    folder = Path(folder)
    config = _read_config(folder)
    model_type = config.get("model_type")
    family = FAMILIES.get(model_type)
    if family is None:
        raise UnsupportedCheckpoint(
            f"{folder / CONFIG_FILE}: model_type {json.dumps(model_type)} is not supported; rnnx converts "
            f"{', '.join(sorted(FAMILIES))}"
        )
    return family(config, str(folder / CONFIG_FILE))


def _weight_files(folder: Path) -> list[Path]:
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [folder / shard for shard in shards]
    single = folder / WEIGHTS_FILE
    if not single.is_file():
        raise UnsupportedCheckpoint(f"{folder}: no {WEIGHTS_FILE} (or {WEIGHTS_INDEX}) with the weights")
    return [single]


#: The top-level prefixes one family's checkpoints spell either way (transformers' module tree and the hub's
#: files: Nemotron-H's ``model.`` is ``backbone.`` on disk).
_PREFIXES = ("model.", "backbone.")


def _on_disk(name: str, available: set[str]) -> str:
    """``name`` as the checkpoint spells it: itself, or with the other of :data:`_PREFIXES`."""
    if name in available:
        return name
    for old in _PREFIXES:
        if name.startswith(old):
            for new in _PREFIXES:
                if new != old and new + name[len(old) :] in available:
                    return new + name[len(old) :]
    return name


#: ``(tensors loaded, tensors wanted)``, called after each tensor a checkpoint load reads (a progress bar's feed).
Loaded = Callable[[int, int], None]


def _load_tensors(folder: Path, wanted: set[str], loaded: Optional[Loaded] = None) -> dict[str, torch.Tensor]:
    """The ``wanted`` checkpoint tensors by the names the plan gives them (found under either prefix); ``loaded``
    is told of each one read."""
    from safetensors import safe_open

    files = _weight_files(folder)
    available: dict[str, Path] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            available.update(dict.fromkeys(f.keys(), path))
    names = {name: _on_disk(name, set(available)) for name in wanted}
    tensors: dict[str, torch.Tensor] = {}
    for path in files:
        with safe_open(str(path), framework="pt") as f:
            for name, disk in names.items():
                if available.get(disk) == path:
                    tensors[name] = f.get_tensor(disk)
                    if loaded is not None:
                        loaded(len(tensors), len(names))
    return tensors


def from_pretrained(folder: PathLike, dtype: torch.dtype = torch.float32, loaded: Optional[Loaded] = None) -> DecoderLM:
    """The rnnx twin of the transformers checkpoint in ``folder`` (see the module docstring), weights carried, in
    ``dtype``, in eval mode. :class:`UnsupportedCheckpoint` (one line) for what it cannot convert. ``loaded``:
    told ``(done, total)`` after each tensor read (for a progress bar)."""
    folder = Path(folder)
    p = plan(folder)
    tensors = _load_tensors(folder, set(p.names.values()), loaded)
    missing = sorted(set(p.names.values()) - set(tensors))
    if missing:
        raise UnsupportedCheckpoint(f"{folder}: weight {missing[0]!r} missing from the checkpoint")
    config = dict(p.config)
    config["blocks"] = [dict(b, options=dict(b["options"])) for b in config["blocks"]]
    for i, block in enumerate(config["blocks"]):  # an MLP's width from its weights
        if block["kind"] == "mlp" and block["options"]["intermediate_size"] == -1:
            block["options"]["intermediate_size"] = int(tensors[p.names[f"blocks.{i}.module.up_proj.weight"]].shape[0])
    with torch.device("meta"):  # no random init to overwrite: the checkpoint's tensors become the parameters
        model = DecoderLM(**config)
    own = model.state_dict()
    for ours, theirs in p.names.items():
        tensor = tensors[theirs]
        if ours not in own:
            raise UnsupportedCheckpoint(f"{folder}: weight {theirs!r} has no place in the rnnx model ({ours})")
        if tuple(tensor.shape) != tuple(own[ours].shape):
            raise UnsupportedCheckpoint(
                f"{folder}: weight {theirs!r} has shape {tuple(tensor.shape)}, the configuration gives "
                f"{tuple(own[ours].shape)}"
            )
    state = {ours: tensors[theirs] for ours, theirs in p.names.items()}
    if config["tie_word_embeddings"]:
        state["head.weight"] = state["embedding.weight"]
    unfilled = sorted(set(own) - set(state))
    if unfilled:
        raise UnsupportedCheckpoint(f"{folder}: nothing in the checkpoint fills rnnx's {unfilled[0]}")
    model.load_state_dict(state, assign=True)  # every parameter and buffer is in ``state`` (checked above)
    if config["tie_word_embeddings"]:  # assign gives each name a Parameter of its own: one again
        model.head.weight = model.embedding.weight
    return model.to(dtype).eval()


def load_model(
    path: PathLike, map_location: Union[str, torch.device] = "cpu", loaded: Optional[Loaded] = None
) -> tuple[RecurrentLM, dict[str, Any]]:
    """``(model in eval mode, info)`` of an rnnx checkpoint (:func:`~rnnx.models.checkpoint.load_checkpoint`) or of a
    transformers checkpoint folder (:func:`from_pretrained`, ``loaded`` told of each tensor read; its info:
    ``model_type`` ``"decoder"``, the twin's ``config``, ``source_model_type`` and the weights' ``weights_sha256``).
    :class:`CheckpointError` otherwise."""
    directory = Path(path).parent if Path(path).name == CONFIG_FILE else Path(path)
    if not is_transformers_checkpoint(directory):
        return load_checkpoint(path, map_location)
    model = from_pretrained(directory, loaded=loaded).to(map_location)
    files = _weight_files(directory)
    digest = sha256_file(files[0]) if len(files) == 1 else sha256_file(directory / WEIGHTS_INDEX)
    info = {"format": "transformers", "model_type": "decoder", "config": model.config,
            "source_model_type": model.config["source"].get("model_type"), "weights_sha256": digest,
            "metrics": {}, "task": {}}  # fmt: skip
    return model, info
