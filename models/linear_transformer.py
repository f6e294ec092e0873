"""Decoder-only causal linear-attention transformer ("Transformers are RNNs", Katharopoulos et al. 2020).

Every attention layer is :func:`rnnx.models.ops.causal_linear_attention.causal_linear_attention` over heads:
the parallel (chunked) form over the whole sequence for training and prefill, and the same op with
L = 1 for a decode step; both start from the carried state, so the two forms give the same numbers.

Positions. A learned or absolute table of positions would cap the sequence length and break the
O(1)-state promise, so there is none. Two choices, set by ``positions``:

* ``"sinusoidal"`` (default): the fixed sinusoidal encoding of the token's absolute index is added to
  its embedding. The index is computed, not looked up, so there is no length limit; the next index
  of each row is carried in the state (``position``, (B,) fp32, exact up to 2**24 tokens) and does
  not advance on pad steps. This is what makes tasks that address tokens by offset — the copy task —
  learnable in minutes.
* ``"none"``: no positional signal at all; causal linear attention is still order-aware through its
  prefix sums. The state is then the attention states only (``position`` is None).

Layout: batch-first activations (B, L, d_model); heads split d_model into num_heads x head_dim.

Flat state (what the scripted model takes, :class:`rnnx.models.lm.RecurrentLM`): ``[S_0, z_0, S_1, z_1, ...,
position]``, per layer S (B, H, E, E) and z (B, H, E), position last and only with sinusoidal positions.
"""

import math
from typing import Optional

import torch
from torch import Tensor, nn

from .lm import RecurrentLM, check_tokens
from .ops.causal_linear_attention import causal_linear_attention
from .state import LinearAttentionState, LinearTransformerState
from .zero_states import zero_state


def sinusoidal_encoding(position: Tensor, dim: int) -> Tensor:
    """Sinusoidal encoding of positions ``(...)`` (any float/int tensor) -> ``(..., dim)`` fp32.

    Channel 2i is sin(p w_i) and channel 2i+1 is cos(p w_i), written sin(p w_i + pi/2), with
    w_i = 10000^(-2i/dim): one product, one sum and one sine per channel (three graph nodes in an export).
    """
    channel = torch.arange(dim, device=position.device)
    odd = (channel % 2).to(torch.float32)
    freq = torch.exp((channel.to(torch.float32) - odd) * (-math.log(10000.0) / dim))
    return torch.sin(position.to(torch.float32).unsqueeze(-1) * freq + odd * (math.pi / 2))


class LinearSelfAttention(nn.Module):
    """Multi-head causal linear self-attention: (B, L, d_model) + layer state -> (B, L, d_model) + state."""

    def __init__(self, d_model: int, num_heads: int, eps: float = 1e-6) -> None:
        super().__init__()
        if d_model % num_heads:
            raise TypeError(f"d_model={d_model} is not a multiple of num_heads={num_heads}")
        self.num_heads, self.head_dim, self.eps = num_heads, d_model // num_heads, eps
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, S: Tensor, z: Tensor, pad_mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, L, d_model) from the layer state S (B, H, E, E), z (B, H, E); pad_mask (B, L) bool or None
        -> (B, L, d_model) and the new S, z. q, k, v stay packed (B, L, H*E), the op's layout, and pads are the
        op's mask. Under TorchScript the attention is the op itself."""
        q, k, v = self.qkv(x).split(self.num_heads * self.head_dim, dim=-1)
        if torch.jit.is_scripting():
            out, S, z = torch.ops.rnnx.causal_linear_attention(q, k, v, S, z, pad_mask, self.eps, self.num_heads, 0)
        else:
            out, (S, z) = causal_linear_attention(
                q, k, v, state=(S, z), eps=self.eps, num_heads=self.num_heads, pad_mask=pad_mask
            )
        return self.out(out), S, z


class Block(nn.Module):
    """Pre-LayerNorm block: x + attn(norm(x)), then x + ffn(norm(x)) with a GELU feed-forward."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float, eps: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = LinearSelfAttention(d_model, num_heads, eps)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Dropout(dropout), nn.Linear(d_ff, d_model))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, S: Tensor, z: Tensor, pad_mask: Optional[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, L, d_model) and the layer's attention state (S, z) -> the block's output and new (S, z)."""
        a, S, z = self.attn(self.norm1(x), S, z, pad_mask)
        x = x + self.drop(a)
        return x + self.drop(self.ffn(self.norm2(x))), S, z


class LinearTransformerLM(RecurrentLM):
    """Token embedding (+ sinusoidal positions) -> N pre-LN linear-attention blocks -> norm -> LM head.

    State: :class:`LinearTransformerState`; per layer S (B, H, E, E) and z (B, H, E) fp32
    with E = d_model / num_heads, plus ``position`` (B,) fp32 when ``positions == "sinusoidal"``.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int = 128,
        num_layers: int = 2,
        num_heads: int = 4,
        d_ff: Optional[int] = None,
        dropout: float = 0.0,
        positions: str = "sinusoidal",
        tie_weights: bool = False,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        if positions not in ("sinusoidal", "none"):
            raise TypeError(f"positions must be 'sinusoidal' or 'none', got {positions!r}")
        d_ff = d_ff or 4 * d_model
        self._keep_config(LinearTransformerLM.__init__, locals())
        self.d_model, self.num_heads, self.positions = d_model, num_heads, positions
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, num_heads, d_ff, dropout, eps) for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.embedding.weight

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """Zeros ``[S_0, z_0, ..., position]`` in the state dtype (fp32; fp64 for an fp64 model)."""
        weight = self.embedding.weight
        E = self.d_model // self.num_heads
        out: list[Tensor] = []
        for _ in self.blocks:
            out.append(zero_state([batch_size, self.num_heads, E, E], weight, device))
            out.append(zero_state([batch_size, self.num_heads, E], weight, device))
        if self.positions == "sinusoidal":
            out.append(zero_state([batch_size], weight, device))
        return out

    def state_from_flat(self, tensors: list[Tensor]) -> LinearTransformerState:
        n = 2 * len(self.blocks)
        layers = [LinearAttentionState(S=tensors[i], z=tensors[i + 1]) for i in range(0, n, 2)]
        return LinearTransformerState(layers=layers, position=tensors[n] if len(tensors) > n else None)

    def forward_flat(
        self, tokens: Tensor, state: list[Tensor], pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        check_tokens(tokens, pad_mask)
        n = 2 * len(self.blocks) + (1 if self.positions == "sinusoidal" else 0)
        if len(state) != n:
            raise ValueError(
                f"state has {len(state)} tensors, the model takes {n}: S and z for each of its "
                f"{len(self.blocks)} layers" + (", then position" if self.positions == "sinusoidal" else "")
            )
        pad: Optional[Tensor] = None if pad_mask is None else pad_mask.to(torch.bool)
        x = self.embedding(tokens)
        new_state: list[Tensor] = []
        if self.positions == "sinusoidal":
            position = state[n - 1]
            if pad is None:
                keep = torch.ones_like(tokens, dtype=position.dtype)
            else:  # one Where in an export (not a Not and a Cast)
                keep = torch.where(pad, 0.0, 1.0).to(position.dtype)
            # the index of each step, then the next one: pads repeat the next real index
            running = torch.cat((position[:, None], keep), 1).cumsum(1)  # (B, L + 1)
            x = x + sinusoidal_encoding(running[:, :-1], self.d_model).to(x.dtype)
            position = running[:, -1]
        else:
            position = None
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x, S, z = block(x, state[2 * i], state[2 * i + 1], pad)
            new_state.append(S)
            new_state.append(z)
        if position is not None:
            new_state.append(position)
        return self.head(self.norm(x)), new_state
