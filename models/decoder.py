"""Decoder language models of stacked blocks: the recurrent and hybrid families that transformers' checkpoints hold
(Qwen3.5's Gated DeltaNet with gated attention, Mamba-2, Mamba-2 hybrids such as Nemotron-H, LFM2's short
convolutions with attention) as one rnnx language model, :class:`DecoderLM`.

A DecoderLM is token embeddings -> blocks -> a final RMS norm -> the LM head (tied to the embeddings or not). A
block is one pre-norm residual step, ``x = x + module(norm(x))``, its module one of :data:`BLOCK_KINDS`:

* ``gated_deltanet``: :class:`~rnnx.models.gated_deltanet.GatedDeltaNet` (conv + the gated delta rule); state
  ``ConvRecurrentState``, conv (B, C, K-1) and recurrent (B, H, d_k, d_v);
* ``mamba2``: :class:`~rnnx.models.mamba2.Mamba2Mixer` (conv + the gated rule); state ``ConvRecurrentState``;
* ``attention``: :class:`Attention`, softmax attention with RoPE, GQA and a KV cache; state ``KVCache``, key and
  value (B, H_kv, T, d) and valid (B, T), which grows by the call's length;
* ``short_conv``: :class:`ShortConv`, LFM2's ``c * conv(b * x)``; state ``ShortConvState``, conv (B, hidden, K-1);
* ``mlp``: :class:`MLP`, gated (SwiGLU) or plain (ReLU squared); no state;
* ``moe``: :class:`SparseMoE`, top-k routed SwiGLU experts and a gated shared expert (Qwen3.5 MoE); no state.

A transformers "layer" is one or two blocks (Qwen3.5's and LFM2's a token mixer then an MLP, Mamba-2's one mixer,
Nemotron-H's one of anything); :mod:`rnnx.models.from_pretrained` maps each family onto blocks and carries the
weights.

Padding and positions: ``pad_mask`` (B, L) True at pad steps. A pad step changes no state: the recurrent blocks
carry theirs over it, and an attention block caches its key and value with ``valid = False``, never attended to.
Positions for RoPE come from the state: a token's position in its row is the number of valid (non-pad) tokens
before it, the first attention block's ``valid`` count plus the real tokens before it in the call. So a
right-padded batch equals each row alone, and a prefill followed by single steps equals one pass.

The states are fp32 (fp64 for an fp64 model), the KV cache in the activation dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .gated_deltanet import GatedDeltaNet
from .lm import RecurrentLM, check_tokens
from .mamba2 import Mamba2Mixer
from .ops.causal_conv_with_state import causal_conv_with_state
from .ops.dtypes import state_dtype
from .state import KVCache
from .zero_states import zero_state

__all__ = [
    "BLOCK_KINDS",
    "Attention",
    "DecoderLM",
    "DecoderState",
    "MLP",
    "RMSNorm",
    "ShortConv",
    "ShortConvState",
    "SparseMoE",
]


@dataclass
class ShortConvState:
    """State of one :class:`ShortConv` block: its convolution's last K-1 inputs, conv (B, hidden, K-1), fp32."""

    conv: Tensor


@dataclass
class DecoderState:
    """State of a :class:`DecoderLM`: one entry per block, ``None`` for a block without state (an MLP)."""

    blocks: list[Any]


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * (offset + weight)`` over the last dim, computed in fp32 (fp64 for fp64) and
    returned in x's dtype. ``offset`` 1 is Qwen3.5's zero-centred norm (``weight`` starts at zeros), 0 the usual one
    (``weight`` starts at ones)."""

    def __init__(self, dim: int, eps: float = 1e-6, offset: float = 0.0) -> None:
        super().__init__()
        self.eps, self.offset = float(eps), float(offset)
        self.weight = nn.Parameter(torch.zeros(dim) if offset else torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        dt = state_dtype(x.dtype)
        u = x.to(dt)
        u = u / torch.sqrt(u.pow(2).mean(-1, keepdim=True) + self.eps)
        return (u * (self.offset + self.weight.to(dt))).to(x.dtype)


class MLP(nn.Module):
    """``down_proj(act(gate_proj(x)) * up_proj(x))`` when ``gated`` (SwiGLU with ``activation="silu"``), else
    ``down_proj(act(up_proj(x)))``; ``activation`` ``silu`` or ``relu2`` (relu squared, Nemotron-H's)."""

    ACTIVATIONS = ("silu", "relu2")

    def __init__(
        self, hidden_size: int, intermediate_size: int, gated: bool = True, activation: str = "silu", bias: bool = False
    ) -> None:
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {self.ACTIVATIONS}, got {activation!r}")
        self.activation = activation
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias) if gated else None
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def _act(self, x: Tensor) -> Tensor:
        return F.silu(x) if self.activation == "silu" else torch.relu(x).square()

    def forward(self, x: Tensor, state: None = None, pad_mask: Optional[Tensor] = None) -> tuple[Tensor, None]:
        up = self.up_proj(x)
        hidden = self._act(self.gate_proj(x)) * up if self.gate_proj is not None else self._act(up)
        return self.down_proj(hidden), None

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> None:
        return None


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    """Causal softmax attention over a KV cache: GQA (``num_heads`` a multiple of ``num_kv_heads``), RoPE on the
    first ``rotary_dim`` dims of each head (``rope_theta``; none when ``rotary_dim`` is 0), an optional RMS norm of
    each query and key head (``qk_norm_eps``, ``qk_norm_offset``: Qwen3.5 and LFM2) and an optional sigmoid output
    gate (Qwen3.5: ``q_proj`` gives each head's query and gate side by side). Scores are scaled by
    ``head_dim ** -0.5``. Parameters: ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, ``q_norm``, ``k_norm``.

    ``forward(x (B, L, hidden), cache, pad_mask, positions (B, L))``: keys (after RoPE) and values are appended to
    the cache, pads with ``valid = False``; each query attends to the valid keys up to its own step.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        rotary_dim: int = 0,
        rope_theta: float = 10000.0,
        qk_norm_eps: Optional[float] = None,
        qk_norm_offset: float = 0.0,
        output_gate: bool = False,
        bias: bool = False,
    ) -> None:
        super().__init__()
        if num_heads % num_kv_heads:
            raise ValueError(f"Attention: num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
        if rotary_dim % 2 or rotary_dim > head_dim:
            raise ValueError(f"Attention: rotary_dim {rotary_dim} must be even and at most head_dim {head_dim}")
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.rotary_dim, self.rope_theta, self.output_gate = rotary_dim, float(rope_theta), output_gate
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim * (2 if output_gate else 1), bias=bias)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=bias)
        norm = qk_norm_eps is not None
        self.q_norm = RMSNorm(head_dim, qk_norm_eps, qk_norm_offset) if norm else None
        self.k_norm = RMSNorm(head_dim, qk_norm_eps, qk_norm_offset) if norm else None

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> KVCache:
        """An empty cache: key / value (B, H_kv, 0, head_dim) in the parameter dtype, valid (B, 0) bool."""
        weight = self.o_proj.weight
        device = weight.device if device is None else device
        empty = torch.zeros(batch_size, self.num_kv_heads, 0, self.head_dim, dtype=weight.dtype, device=device)
        return KVCache(
            key=empty, value=empty.clone(), valid=torch.zeros(batch_size, 0, dtype=torch.bool, device=device)
        )

    def _rope(self, x: Tensor, positions: Tensor) -> Tensor:
        """x (B, H, L, head_dim) rotated at ``positions`` (B, L) on its first ``rotary_dim`` dims."""
        if self.rotary_dim == 0:
            return x
        dt = state_dtype(x.dtype)
        steps = torch.arange(0, self.rotary_dim, 2, device=x.device, dtype=dt) / self.rotary_dim
        angles = positions.to(dt)[..., None] / self.rope_theta**steps  # (B, L, rotary_dim / 2)
        angles = torch.cat((angles, angles), dim=-1)[:, None]  # (B, 1, L, rotary_dim)
        rot, rest = x[..., : self.rotary_dim], x[..., self.rotary_dim :]
        rotated = rot.to(dt) * angles.cos() + _rotate_half(rot.to(dt)) * angles.sin()
        return torch.cat((rotated.to(x.dtype), rest), dim=-1)

    def forward(
        self, x: Tensor, state: Optional[KVCache], pad_mask: Optional[Tensor], positions: Tensor
    ) -> tuple[Tensor, KVCache]:
        B, L, _ = x.shape
        H, Hkv, d = self.num_heads, self.num_kv_heads, self.head_dim
        state = self.init_state(B, x.device) if state is None else state
        q = self.q_proj(x).reshape(B, L, H, -1)
        gate = None
        if self.output_gate:
            q, gate = q.split([d, d], dim=-1)
        k = self.k_proj(x).reshape(B, L, Hkv, d)
        v = self.v_proj(x).reshape(B, L, Hkv, d).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = self._rope(q.transpose(1, 2), positions), self._rope(k.transpose(1, 2), positions)
        key = torch.cat([state.key.to(k.dtype), k], dim=2)
        value = torch.cat([state.value.to(v.dtype), v], dim=2)
        keep = torch.ones(B, L, dtype=torch.bool, device=x.device) if pad_mask is None else ~pad_mask.to(torch.bool)
        valid = torch.cat([state.valid, keep], dim=1)
        past = state.key.shape[2]
        step = torch.arange(L, device=x.device)[:, None] + past
        allowed = (torch.arange(past + L, device=x.device)[None, :] <= step)[None, None] & valid[:, None, None, :]
        # GQA without copying the cache per query head: the query heads of a KV head are folded into its rows,
        # (B, Hkv, group * L, d), so both products are plain batched matmuls against the cache (B, Hkv, S, d)
        # (head h reads KV head h // group, as repeat_interleave would); the mask views the group axis apart.
        group, allowed = H // Hkv, allowed[:, :, None]
        scores = torch.matmul(q.reshape(B, Hkv, group * L, d), key.transpose(-1, -2)) * d**-0.5
        scores = scores.reshape(B, Hkv, group, L, -1).masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1).masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
        out = torch.matmul(weights.reshape(B, Hkv, group * L, -1), value)
        out = out.reshape(B, H, L, d).transpose(1, 2).reshape(B, L, H * d)
        if gate is not None:
            out = out * torch.sigmoid(gate.reshape(B, L, H * d))
        return self.o_proj(out), KVCache(key=key, value=value, valid=valid)


class ShortConv(nn.Module):
    """LFM2's gated short convolution: ``[b | c | x] = in_proj(h)``, ``y = out_proj(c * conv(b * x))``, the
    convolution depthwise and causal with kernel ``kernel_size`` and a carried state. Parameters ``in_proj``,
    ``conv`` (weight (hidden, 1, K)), ``out_proj``."""

    def __init__(self, hidden_size: int, kernel_size: int = 3, bias: bool = False) -> None:
        super().__init__()
        self.hidden_size, self.kernel_size = hidden_size, kernel_size
        self.in_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=bias)
        self.conv = nn.Conv1d(hidden_size, hidden_size, kernel_size, groups=hidden_size, bias=bias)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=bias)

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> ShortConvState:
        return ShortConvState(
            zero_state([batch_size, self.hidden_size, self.kernel_size - 1], self.out_proj.weight, device)
        )

    def forward(
        self, x: Tensor, state: Optional[ShortConvState] = None, pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, ShortConvState]:
        b, c, h = self.in_proj(x).chunk(3, dim=-1)
        y, conv = causal_conv_with_state(
            (b * h).transpose(1, 2), self.conv.weight, self.conv.bias, None if state is None else state.conv,
            activation="none", pad_mask=pad_mask,
        )  # fmt: skip
        return self.out_proj(c * y.transpose(1, 2)), ShortConvState(conv)


class SparseMoE(nn.Module):
    """A mixture of ``num_experts`` SwiGLU experts of which a softmax router picks ``top_k`` per token (their weights
    renormalised to sum to 1), plus a shared expert behind a sigmoid gate (Qwen3.5 MoE's block):

        p = softmax(gate(x));  (w, i) = top_k(p);  w = w / sum(w)
        y = sum_j w_j expert_{i_j}(x) + sigmoid(shared_expert_gate(x)) shared_expert(x)

    Every expert runs on every token and the router's weights (zero for the experts not picked) mix them: the same
    sum as a dispatch to the picked experts, in a graph of fixed shape that every target exports (TopK, ScatterElements,
    MatMuls); it costs ``num_experts / top_k`` times the picked experts' work, which suits the small expert counts of
    the checkpoints this converts, not a 128-expert model."""

    def __init__(
        self, hidden_size: int, num_experts: int, top_k: int, intermediate_size: int, shared_intermediate_size: int
    ) -> None:
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"SparseMoE: top_k must be in [1, num_experts={num_experts}], got {top_k}")
        self.top_k = top_k
        self.gate = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = nn.ModuleList(MLP(hidden_size, intermediate_size) for _ in range(num_experts))
        self.shared_expert = MLP(hidden_size, shared_intermediate_size)
        self.shared_expert_gate = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, x: Tensor, state: None = None, pad_mask: Optional[Tensor] = None) -> tuple[Tensor, None]:
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        picked, index = probs.topk(self.top_k, dim=-1)
        weights = torch.zeros_like(probs).scatter(-1, index, picked / picked.sum(-1, keepdim=True)).to(x.dtype)
        out = torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)[0]
        for e, expert in enumerate(self.experts):
            w = weights[..., e : e + 1]  # an expert not picked adds 0, even where its output overflows (fp16)
            out = out + torch.where(w > 0, w * expert(x)[0], 0.0)
        return out, None

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> None:
        return None


#: Block kind -> its module class (built as ``cls(hidden_size=..., **options)``).
BLOCK_KINDS: dict[str, type[nn.Module]] = {
    "gated_deltanet": GatedDeltaNet,
    "mamba2": Mamba2Mixer,
    "attention": Attention,
    "short_conv": ShortConv,
    "mlp": MLP,
    "moe": SparseMoE,
}


class Block(nn.Module):
    """``x + module(norm(x))``: one pre-norm residual step (see the module docstring)."""

    def __init__(self, kind: str, hidden_size: int, norm_eps: float, norm_offset: float, options: dict) -> None:
        super().__init__()
        if kind not in BLOCK_KINDS:
            raise ValueError(f"unknown block kind {kind!r}; known: {', '.join(BLOCK_KINDS)}")
        self.kind = kind
        self.norm = RMSNorm(hidden_size, norm_eps, norm_offset)
        self.module = BLOCK_KINDS[kind](hidden_size=hidden_size, **options)

    def forward(self, x: Tensor, state: Any, pad_mask: Optional[Tensor], positions: Optional[Tensor]) -> tuple:
        h = self.norm(x)
        if self.kind == "attention":
            out, state = self.module(h, state, pad_mask, positions)
        else:
            out, state = self.module(h, state, pad_mask)
        return x + out, state


class DecoderLM(RecurrentLM):
    """Token embeddings -> :class:`Block` s -> final RMS norm -> LM head; see the module docstring.

    ``blocks``: one ``{"kind": <BLOCK_KINDS key>, "options": {...module keyword arguments}}`` per block, in order;
    ``norm_eps`` / ``norm_offset``: every block's norm and the final one (:class:`RMSNorm`);
    ``tie_word_embeddings``: the LM head is the embedding matrix. ``source``: where the configuration came from
    (``{"model_type": ..., "transformers_version": ...}``), kept in the config, read by nothing here.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        blocks: list[dict[str, Any]],
        norm_eps: float = 1e-6,
        norm_offset: float = 0.0,
        tie_word_embeddings: bool = False,
        source: Optional[dict[str, Any]] = None,
    ) -> None:
        super().__init__()
        blocks, source = [dict(b) for b in blocks], dict(source or {})
        self._keep_config(DecoderLM.__init__, locals())
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        self.blocks = nn.ModuleList(
            Block(b["kind"], hidden_size, norm_eps, norm_offset, dict(b.get("options", {}))) for b in blocks
        )
        self.norm = RMSNorm(hidden_size, norm_eps, norm_offset)
        self.head = nn.Linear(hidden_size, vocab_size, bias=False)
        if tie_word_embeddings:
            self.head.weight = self.embedding.weight
        attention = [i for i, b in enumerate(self.blocks) if b.kind == "attention"]
        self._first_attention = attention[0] if attention else -1

    def init_state(self, batch_size: int, device: Any = None) -> DecoderState:
        device = self._device(device)
        return DecoderState([block.module.init_state(batch_size, device) for block in self.blocks])

    def _positions(self, state: DecoderState, keep: Tensor) -> Optional[Tensor]:
        """(B, L) positions of the call's tokens: the valid tokens cached before them plus the real ones of the
        call before them (a pad's position is its last real neighbour's)."""
        if self._first_attention < 0:
            return None
        past = state.blocks[self._first_attention].valid.sum(dim=1, keepdim=True)
        return (past + keep.long().cumsum(dim=1) - 1).clamp(min=0)

    def forward(self, tokens: Tensor, state: Any = None, pad_mask: Optional[Tensor] = None) -> tuple[Tensor, Any]:
        """``tokens`` (B, L) int64 -> ``(logits (B, L, V), DecoderState)``; see :class:`RecurrentLM`."""
        check_tokens(tokens, pad_mask)
        state = self.init_state(tokens.shape[0], tokens.device) if state is None else state
        if len(state.blocks) != len(self.blocks):
            raise ValueError(f"state holds {len(state.blocks)} blocks, the model has {len(self.blocks)}")
        keep = torch.ones_like(tokens, dtype=torch.bool) if pad_mask is None else ~pad_mask.to(torch.bool)
        positions = self._positions(state, keep)
        mask = None if pad_mask is None else pad_mask.to(torch.bool)
        x = self.embedding(tokens)
        new = []
        for block, block_state in zip(self.blocks, state.blocks):
            x, block_state = block(x, block_state, mask, positions)
            new.append(block_state)
        return self.head(self.norm(x)), DecoderState(new)
