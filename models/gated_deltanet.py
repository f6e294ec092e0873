"""The Gated DeltaNet layer (Yang, Kautz, Hatamizadeh 2024) as used by Qwen3-Next and Qwen3.5, on rnnx's ops.

:class:`GatedDeltaNet` is the twin of transformers' ``Qwen3_5GatedDeltaNet`` (``qwen3_5``, ``qwen3_5_moe``) and
``Qwen3NextGatedDeltaNet`` (``qwen3_next``), which share the maths and differ only in how the input projection is
laid out (:mod:`rnnx.models.convert_transformers` converts both). Per token x (hidden), with H_k key heads of
d_k, H_v value heads of d_v (H_v a multiple of H_k) and a depthwise causal convolution of kernel K::

    [q | k | v] = silu(conv(in_proj_qkv(x)))          conv over the 2*H_k*d_k + H_v*d_v channels, carried state
    z = in_proj_z(x)    b = in_proj_b(x)    a = in_proj_a(x)          (z: H_v*d_v; b, a: H_v)
    q, k <- q / sqrt(|q|^2 + 1e-6), k / sqrt(|k|^2 + 1e-6)            per key head (L2 norm, eps inside)
    q, k <- repeated to H_v heads: value head h reads key head h // (H_v / H_k)
    g = -exp(A_log) * softplus(a + dt_bias)    (log-space decay per value head)    beta = sigmoid(b)
    S_t = e^g S_{t-1} + beta k (v - (e^g S_{t-1})^T k)^T    o = S_t^T q / sqrt(d_k)     (``gated_delta``)
    y = out_proj(weight * rmsnorm(o) * silu(z))      RMS norm per value head (eps ``eps``), then the gate

The recurrence is :func:`~rnnx.models.ops.linear_recurrence.linear_recurrence` (``gated_delta``, scale 0 =
1/sqrt(d_k)) and the convolution :func:`~rnnx.models.ops.causal_conv_with_state.causal_conv_with_state`
(``silu``). Grouped heads: transformers shares a *key* head among H_v / H_k value heads, each value head keeping
its own state: the op's grouped value (``q_num_heads = H_k``, ``kv_num_heads = H_v``), with ``qk_l2_norm`` for the
norms, so neither the normalised nor the repeated q and k are ever written out.

State (:class:`ConvRecurrentState`): ``conv`` (B, 2*H_k*d_k + H_v*d_v, K-1), the last K-1 projected inputs of
the convolution, and ``recurrent`` (B, H_v, d_k, d_v), both fp32 (fp64 for an fp64 layer). transformers keeps
the last K inputs in its conv cache (``[..., 1:]`` of it is this state) and the recurrent state in the same
(B, H_v, d_k, d_v) layout. ``pad_mask`` (B, T), non-zero = pad, carries both states over a pad step, so a
right-padded batch equals each row alone; a prefill followed by one-token steps equals one pass.

Precision: the decay is computed in fp32 and passed to the op in the activation dtype; the op normalises q and k
and keeps the state in fp32; transformers runs the whole rule in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .ops.causal_conv_with_state import causal_conv_with_state
from .ops.dtypes import state_dtype
from .ops.linear_recurrence import linear_recurrence
from .zero_states import zero_state

__all__ = ["ConvRecurrentMixer", "ConvRecurrentState", "GatedDeltaNet", "GatedRMSNorm"]


@dataclass
class ConvRecurrentState:
    """State of one conv + linear-recurrence layer.

    conv: (B, C, K-1), the convolution's last K-1 inputs, fp32 (None for a layer without a convolution);
    recurrent: (B, H, d_k, d_v), the linear recurrence's state S (output o = S^T q), fp32.
    """

    conv: Optional[Tensor]
    recurrent: Tensor

    @classmethod
    def zeros(
        cls,
        batch_size: int,
        conv_channels: int,
        conv_kernel: int,
        recurrent_dims: list[int],
        like: Tensor,
        device: Optional[torch.device] = None,
    ) -> ConvRecurrentState:
        """A fresh state: zero ``conv`` (B, conv_channels, conv_kernel - 1) and ``recurrent`` (B, *recurrent_dims)
        in the state dtype of ``like`` (a parameter of the layer) on ``device`` (``like``'s when None)."""
        return cls(
            conv=zero_state([batch_size, conv_channels, conv_kernel - 1], like, device),
            recurrent=zero_state([batch_size, *recurrent_dims], like, device),
        )


class GatedRMSNorm(nn.Module):
    """RMS norm with a SiLU gate over groups of ``group_size`` channels of the last dim (default: all of it).

    ``norm_before_gate`` (Qwen3-Next / Qwen3.5): ``weight * rmsnorm(x) * silu(z)``; otherwise (Mamba-2):
    ``weight * rmsnorm(x * silu(z))``. rmsnorm(u) = u / sqrt(mean(u^2) + eps) per group; computed in fp32
    (fp64 for fp64), returned in x's dtype. ``weight`` (dim,) starts at ones.
    """

    def __init__(self, dim: int, group_size: Optional[int] = None, eps: float = 1e-6, norm_before_gate: bool = True):
        super().__init__()
        group_size = dim if group_size is None else group_size
        if dim % group_size:
            raise ValueError(f"GatedRMSNorm: dim {dim} is not a multiple of group_size {group_size}")
        self.dim, self.group_size, self.eps, self.norm_before_gate = dim, group_size, eps, norm_before_gate
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor, z: Tensor) -> Tensor:
        """x, z (..., dim) -> (..., dim) in x's dtype."""
        dt = state_dtype(x.dtype)
        u, gate = x.to(dt), F.silu(z.to(dt))
        if not self.norm_before_gate:
            u = u * gate
        if self.group_size == self.dim:  # x / sqrt(mean(x^2) + eps) * w: the form ONNX Runtime fuses into one node
            u = u / torch.sqrt(u.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.to(dt)
        else:
            groups = u.reshape(*u.shape[:-1], self.dim // self.group_size, self.group_size)
            groups = groups / torch.sqrt(groups.pow(2).mean(-1, keepdim=True) + self.eps)
            u = groups.reshape(u.shape) * self.weight.to(dt)
        if self.norm_before_gate:
            u = u * gate
        return u.to(x.dtype)


class ConvRecurrentMixer(nn.Module):
    """Base of the token mixers whose state is a :class:`ConvRecurrentState` (:class:`GatedDeltaNet`,
    :class:`~rnnx.models.mamba2.Mamba2Mixer`): the state handling, around the subclass's :meth:`mix`.

    A subclass sets ``conv_dim`` (C), ``conv_kernel`` (K) and ``recurrent_dims`` (the recurrent state's dims
    after the batch, e.g. (H, d_k, d_v)), has an ``out_proj`` whose weight gives the state's dtype and device, and
    implements :meth:`mix`.
    """

    conv_dim: int
    conv_kernel: int
    recurrent_dims: list[int]
    out_proj: nn.Linear

    def mix(
        self, x: Tensor, conv_state: Optional[Tensor], recurrent: Optional[Tensor], pad_mask: Optional[Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """x (B, T, hidden) from the two states (zeros when None) -> ``(y (B, T, hidden), conv_state, recurrent)``."""
        raise NotImplementedError

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> ConvRecurrentState:
        """Zero state for ``batch_size`` rows in the state dtype (fp32; fp64 for an fp64 layer)."""
        return ConvRecurrentState.zeros(
            batch_size, self.conv_dim, self.conv_kernel, self.recurrent_dims, self.out_proj.weight, device
        )

    def forward(
        self, x: Tensor, state: Optional[ConvRecurrentState] = None, pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, ConvRecurrentState]:
        """x (B, T, hidden) from ``state`` (zeros when None); pad_mask (B, T) non-zero = pad.

        Returns ``(y (B, T, hidden), ConvRecurrentState)``.
        """
        conv_state = None if state is None else state.conv
        recurrent = None if state is None else state.recurrent
        y, conv_state, recurrent = self.mix(x, conv_state, recurrent, pad_mask)
        return y, ConvRecurrentState(conv=conv_state, recurrent=recurrent)


class GatedDeltaNet(ConvRecurrentMixer):
    """Gated DeltaNet token mixer: (B, T, hidden) + :class:`ConvRecurrentState` -> (B, T, hidden) + state.

    Parameters keep transformers' ``Qwen3_5GatedDeltaNet`` names and shapes: ``in_proj_qkv`` (hidden ->
    2*H_k*d_k + H_v*d_v; q, k, v concatenated, heads packed), ``in_proj_z`` (-> H_v*d_v), ``in_proj_b`` and
    ``in_proj_a`` (-> H_v), ``conv1d`` (depthwise, weight (C, 1, K), no bias; only its weights are used),
    ``dt_bias`` and ``A_log`` (H_v,), ``norm`` (:class:`GatedRMSNorm` over d_v, norm before gate) and
    ``out_proj`` (H_v*d_v -> hidden). The maths is in the module docstring.
    """

    def __init__(
        self,
        hidden_size: int,
        num_key_heads: int,
        num_value_heads: int,
        key_head_dim: int,
        value_head_dim: int,
        conv_kernel: int = 4,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        if num_value_heads % num_key_heads:
            raise ValueError(f"num_value_heads {num_value_heads} is not a multiple of num_key_heads {num_key_heads}")
        self.hidden_size = hidden_size
        self.num_key_heads, self.num_value_heads = num_key_heads, num_value_heads
        self.key_head_dim, self.value_head_dim = key_head_dim, value_head_dim
        self.key_dim, self.value_dim = num_key_heads * key_head_dim, num_value_heads * value_head_dim
        self.conv_kernel = conv_kernel
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.recurrent_dims = [num_value_heads, key_head_dim, value_head_dim]
        self.in_proj_qkv = nn.Linear(hidden_size, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(hidden_size, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(hidden_size, num_value_heads, bias=False)
        self.in_proj_a = nn.Linear(hidden_size, num_value_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel, groups=self.conv_dim, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(num_value_heads))
        self.A_log = nn.Parameter(torch.zeros(num_value_heads))
        self.norm = GatedRMSNorm(value_head_dim, eps=eps, norm_before_gate=True)
        self.out_proj = nn.Linear(self.value_dim, hidden_size, bias=False)

    def mix(
        self, x: Tensor, conv_state: Optional[Tensor], recurrent: Optional[Tensor], pad_mask: Optional[Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The gated delta rule of the module docstring on x (B, T, hidden): one MatMul for the four input
        projections, the causal convolution over q, k, v, then the recurrence (q and k normalised and grouped in
        the op). Returns ``(y (B, T, hidden), conv_state, recurrent)`` (see :meth:`ConvRecurrentMixer.mix`)."""
        B, T, _ = x.shape
        Hk, Hv, dv = self.num_key_heads, self.num_value_heads, self.value_head_dim
        # one MatMul for the four projections (their weights concatenated: a constant the runtime folds)
        weight = torch.cat(
            [self.in_proj_qkv.weight, self.in_proj_z.weight, self.in_proj_b.weight, self.in_proj_a.weight]
        )
        mixed, z, b, a = F.linear(x, weight).split([self.conv_dim, self.value_dim, Hv, Hv], dim=-1)
        qkv, conv_state = causal_conv_with_state(
            mixed.transpose(1, 2), self.conv1d.weight, self.conv1d.bias, conv_state, activation="silu",
            pad_mask=pad_mask,
        )  # fmt: skip
        # q and k L2-normalised and each shared by Hv / Hk value heads inside the op (qk_l2_norm, grouped value)
        q, k, v = qkv.transpose(1, 2).split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        dt = state_dtype(x.dtype)
        decay = -self.A_log.to(dt).exp() * F.softplus(a.to(dt) + self.dt_bias.to(dt))
        beta = torch.sigmoid(b)
        out, recurrent = linear_recurrence(
            q, k, v, recurrent, decay.to(x.dtype), beta,
            q_num_heads=Hk, kv_num_heads=Hv, update_rule="gated_delta", scale=0.0, pad_mask=pad_mask, qk_l2_norm=True,
        )  # fmt: skip
        out = self.norm(out.reshape(B, T, Hv, dv), z.reshape(B, T, Hv, dv)).reshape(B, T, Hv * dv)
        return self.out_proj(out), conv_state, recurrent
