"""Gated linear attention (GLA) and RetNet-style retention: small rnnx token mixers on the ``gated`` rule.

Both are :func:`~rnnx.models.ops.linear_recurrence.linear_recurrence` with ``update_rule="gated"`` and H heads of
key size d_k and value size d_v; they differ in the decay. rnnx's own definitions (the published papers' maths,
without their training-time extras), heads packed (B, T, H*d):

:class:`GatedLinearAttention` (Yang, Wang, Shen, Panda, Kim 2024), data-dependent decay per key dim::

    q, k, v, g = q_proj(x), k_proj(x), v_proj(x), g_proj(x)
    log_a = logsigmoid(gk_proj(x)) / gate_logit_normalizer        (B, T, H*d_k); gk_proj is low rank, r -> H*d_k
    S_t = diag(exp(log_a_t)) S_{t-1} + k_t v_t^T        o_t = S_t^T q_t / sqrt(d_k)
    y = o_proj(weight * rmsnorm(o) * silu(g))                       RMS norm per head, then the output gate

:class:`RetentionLayer` (Sun et al. 2023, multi-scale retention in its recurrent form), constant decay per head::

    gamma_h = 1 - 2^(-5 - h), h = 0 .. H-1                         decay log(gamma_h) at every step
    S_t = gamma_h S_{t-1} + k_t v_t^T                   o_t = S_t^T q_t / sqrt(d_k)
    y = o_proj(weight * rmsnorm(o) * silu(g_proj(x)))

RetNet's xPos rotation of q and k is left out (it would need the position in the state) and its per-head
GroupNorm is an RMS norm, as in the GLA layer. State: :class:`~rnnx.models.gated_deltanet.ConvRecurrentState`
with ``conv`` None and ``recurrent`` (B, H, d_k, d_v) fp32. ``pad_mask`` (B, T), non-zero = pad, carries the
state over a pad step; a prefill followed by one-token steps equals one pass.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .gated_deltanet import ConvRecurrentState, GatedRMSNorm
from .ops.dtypes import state_dtype
from .ops.linear_recurrence import linear_recurrence
from .zero_states import zero_state

__all__ = ["GatedLinearAttention", "RetentionLayer", "retention_log_decay"]


def retention_log_decay(num_heads: int) -> Tensor:
    """RetNet's per-head log decay log(1 - 2^(-5 - h)), h = 0 .. num_heads-1, fp64 (num_heads,)."""
    h = torch.arange(num_heads, dtype=torch.float64)
    return torch.log1p(-torch.pow(2.0, -5.0 - h))


class _GatedRecurrentMixer(nn.Module):
    """The shared part: q, k, v and output-gate projections, a per-head gated RMS norm, the gated recurrence."""

    def __init__(self, hidden_size: int, num_heads: int, key_dim: int, value_dim: int, eps: float) -> None:
        super().__init__()
        if key_dim % num_heads or value_dim % num_heads:
            raise ValueError(f"key_dim {key_dim} and value_dim {value_dim} must be multiples of num_heads {num_heads}")
        self.hidden_size, self.num_heads = hidden_size, num_heads
        self.key_dim, self.value_dim = key_dim, value_dim
        self.head_k_dim, self.head_v_dim = key_dim // num_heads, value_dim // num_heads
        self.q_proj = nn.Linear(hidden_size, key_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, key_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, value_dim, bias=False)
        self.g_proj = nn.Linear(hidden_size, value_dim, bias=False)
        self.g_norm = GatedRMSNorm(self.head_v_dim, eps=eps, norm_before_gate=True)
        self.o_proj = nn.Linear(value_dim, hidden_size, bias=False)

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> ConvRecurrentState:
        """Zero state (``conv`` None) for ``batch_size`` rows in the state dtype (fp32; fp64 for fp64)."""
        shape = [batch_size, self.num_heads, self.head_k_dim, self.head_v_dim]
        return ConvRecurrentState(conv=None, recurrent=zero_state(shape, self.o_proj.weight, device))

    def log_decay(self, x: Tensor) -> Tensor:
        """The log-space decay for x (B, T, hidden): (B, T, H) or (B, T, H*d_k), in x's dtype."""
        raise NotImplementedError

    def recurrence_inputs(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(query, key, value, decay)`` of the op for x (B, T, hidden), heads packed."""
        return self.q_proj(x), self.k_proj(x), self.v_proj(x), self.log_decay(x)

    def output(self, o: Tensor, x: Tensor) -> Tensor:
        """The recurrence's output o (B, T, H*d_v) gated by x's output gate and projected: (B, T, hidden)."""
        B, T, _ = o.shape
        shape = (B, T, self.num_heads, self.head_v_dim)
        return self.o_proj(self.g_norm(o.reshape(shape), self.g_proj(x).reshape(shape)).reshape(B, T, -1))

    def forward(
        self, x: Tensor, state: Optional[ConvRecurrentState] = None, pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, ConvRecurrentState]:
        """x (B, T, hidden) from ``state`` (zeros when None); pad_mask (B, T) non-zero = pad.

        Returns ``(y (B, T, hidden), ConvRecurrentState(conv=None, recurrent=(B, H, d_k, d_v)))``.
        """
        q, k, v, decay = self.recurrence_inputs(x)
        o, recurrent = linear_recurrence(
            q, k, v, None if state is None else state.recurrent, decay, None,
            q_num_heads=self.num_heads, kv_num_heads=self.num_heads, update_rule="gated", scale=0.0,
            pad_mask=pad_mask,
        )  # fmt: skip
        return self.output(o, x), ConvRecurrentState(conv=None, recurrent=recurrent)


class GatedLinearAttention(_GatedRecurrentMixer):
    """GLA: data-dependent decay per key dim (module docstring). ``key_dim`` defaults to hidden_size / 2 and
    ``value_dim`` to hidden_size, as in the paper; ``gk_proj`` is Linear(hidden, r, no bias) then Linear(r,
    key_dim) with r = ``gate_low_rank_dim``."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        key_dim: Optional[int] = None,
        value_dim: Optional[int] = None,
        gate_low_rank_dim: int = 16,
        gate_logit_normalizer: float = 16.0,
        eps: float = 1e-6,
    ) -> None:
        key_dim = hidden_size // 2 if key_dim is None else key_dim
        value_dim = hidden_size if value_dim is None else value_dim
        super().__init__(hidden_size, num_heads, key_dim, value_dim, eps)
        self.gate_logit_normalizer = float(gate_logit_normalizer)
        self.gk_proj = nn.Sequential(
            nn.Linear(hidden_size, gate_low_rank_dim, bias=False), nn.Linear(gate_low_rank_dim, key_dim, bias=True)
        )

    def log_decay(self, x: Tensor) -> Tensor:
        """logsigmoid(gk_proj(x)) / gate_logit_normalizer, (B, T, H*d_k), computed in fp32."""
        logits = self.gk_proj(x)
        return (F.logsigmoid(logits.to(state_dtype(x.dtype))) / self.gate_logit_normalizer).to(x.dtype)


class RetentionLayer(_GatedRecurrentMixer):
    """RetNet-style retention: constant decay gamma_h = 1 - 2^(-5-h) per head (module docstring); ``key_dim``
    and ``value_dim`` default to hidden_size (RetNet doubles the value size; pass it)."""

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        key_dim: Optional[int] = None,
        value_dim: Optional[int] = None,
        eps: float = 1e-6,
    ) -> None:
        key_dim = hidden_size if key_dim is None else key_dim
        value_dim = hidden_size if value_dim is None else value_dim
        super().__init__(hidden_size, num_heads, key_dim, value_dim, eps)
        self.register_buffer("log_gamma", retention_log_decay(num_heads).to(torch.float32), persistent=False)

    def log_decay(self, x: Tensor) -> Tensor:
        """log(gamma_h) for every step, (B, T, H) in x's dtype."""
        B, T, _ = x.shape
        return self.log_gamma.to(x.dtype).expand(B, T, self.num_heads).contiguous()
