"""The Mamba-2 mixer (Dao, Gu 2024) on rnnx's ops: the twin of transformers' ``Mamba2Mixer`` (its torch path).

Per token x (hidden), with H heads of head_dim P, G groups of state size N (H a multiple of G), inner size
I = H*P and a depthwise causal convolution of kernel K over the C = I + 2*G*N channels of xBC::

    [z | xBC | dt] = in_proj(x)                                         (I, C, H channels)
    [x | B | C] = silu(conv(xBC))                                       (I, G*N, G*N), carried conv state
    dt = clamp(softplus(dt + dt_bias), *time_step_limit)    A = -exp(A_log)           (per head)
    h_t = exp(dt A) h_{t-1} + dt x_t B_t^T        y_t = h_t C_t + D x_t    per head; head h uses group h // (H/G)
    out = out_proj(weight * rmsnorm(y * silu(z)))      (RMS norm per group of I/G channels, gate first)

The SSM step is the ``gated`` rule of :func:`~rnnx.models.ops.linear_recurrence.linear_recurrence` with a scalar
decay per head, decay = dt*A (log space), read with scale 1. rnnx's state is S (d_k, d_v) with o = S^T q, so
Mamba's h (P, N) is S^T: d_k = N, d_v = P, and

    query = C    key = B    value = dt * x    S_t = exp(dt A) S_{t-1} + B_t (dt x_t)^T    y_t = S_t^T C_t

which is h_t = exp(dt A) h_{t-1} + dt x_t B_t^T read by C_t (the D skip is added outside the op). The value, not
the key, carries dt, as Mamba-2 itself scales x. Groups: B and C are shared by the H/G heads of a group while
every head keeps its own state; the op's grouping shares a *state* among query heads and needs key and value with
the same head count, so B and C are repeated to H heads explicitly (``q_num_heads = kv_num_heads = H``).

State (:class:`~rnnx.models.gated_deltanet.ConvRecurrentState`): ``conv`` (B, C, K-1) and ``recurrent``
(B, H, N, P), fp32 (fp64 for an fp64 layer). transformers keeps the last K conv inputs (``[..., 1:]`` of its conv
cache is this state) and the SSM state as (B, H, P, N), this state transposed. ``pad_mask`` (B, T), non-zero =
pad, carries both states over a pad step (transformers zeroes pad inputs instead, so its state still decays
there); a prefill followed by one-token steps equals one pass.

transformers' single-token path skips the ``time_step_limit`` clamp that its chunked path applies; with the
default limit (0, inf) the two agree (softplus is positive), and this module always clamps.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .gated_deltanet import ConvRecurrentMixer, GatedRMSNorm
from .ops.causal_conv_with_state import causal_conv_with_state
from .ops.dtypes import state_dtype
from .ops.linear_recurrence import linear_recurrence

__all__ = ["Mamba2Mixer"]


class Mamba2Mixer(ConvRecurrentMixer):
    """Mamba-2 token mixer: (B, T, hidden) + :class:`ConvRecurrentState` -> (B, T, hidden) + state.

    Parameters keep transformers' ``Mamba2Mixer`` names and shapes: ``in_proj`` (hidden -> I + C + H, bias
    ``use_bias``), ``conv1d`` (depthwise over C channels, weight (C, 1, K), bias ``use_conv_bias``; only its
    weights are used), ``dt_bias``, ``A_log`` and ``D`` (H,), ``norm`` (:class:`GatedRMSNorm` over I in G groups,
    gate before norm unless ``norm_before_gate``) and ``out_proj`` (I -> hidden, bias ``use_bias``).
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        head_dim: int,
        state_size: int = 128,
        n_groups: int = 1,
        conv_kernel: int = 4,
        use_conv_bias: bool = True,
        use_bias: bool = False,
        eps: float = 1e-6,
        norm_before_gate: bool = False,
        time_step_limit: tuple[float, Optional[float]] = (0.0, math.inf),
    ) -> None:
        super().__init__()
        if num_heads % n_groups:
            raise ValueError(f"num_heads {num_heads} is not a multiple of n_groups {n_groups}")
        self.hidden_size, self.num_heads, self.head_dim = hidden_size, num_heads, head_dim
        self.state_size, self.n_groups, self.conv_kernel = state_size, n_groups, conv_kernel
        self.intermediate_size = num_heads * head_dim
        self.conv_dim = self.intermediate_size + 2 * n_groups * state_size
        self.recurrent_dims = [num_heads, state_size, head_dim]  # the SSM state per head: N x P
        # an upper limit of None is no limit (a JSON-able configuration has no infinity)
        self.time_step_limit = (
            float(time_step_limit[0]),
            math.inf if time_step_limit[1] is None else float(time_step_limit[1]),
        )
        self.in_proj = nn.Linear(hidden_size, self.intermediate_size + self.conv_dim + num_heads, bias=use_bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, conv_kernel, groups=self.conv_dim, bias=use_conv_bias)
        self.dt_bias = nn.Parameter(torch.zeros(num_heads))
        self.A_log = nn.Parameter(torch.zeros(num_heads))
        self.D = nn.Parameter(torch.ones(num_heads))
        self.norm = GatedRMSNorm(
            self.intermediate_size, self.intermediate_size // n_groups, eps=eps, norm_before_gate=norm_before_gate
        )
        self.out_proj = nn.Linear(self.intermediate_size, hidden_size, bias=use_bias)

    def mix(
        self, x: Tensor, conv_state: Optional[Tensor], recurrent: Optional[Tensor], pad_mask: Optional[Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Mamba-2's step (module docstring) on x (B, T, hidden) -> ``(y, conv_state, recurrent)``."""
        Bsz, T, _ = x.shape
        H, P, N, G, I = self.num_heads, self.head_dim, self.state_size, self.n_groups, self.intermediate_size
        z, xBC, dt = self.in_proj(x).split([I, self.conv_dim, H], dim=-1)
        xBC, conv_state = causal_conv_with_state(
            xBC.transpose(1, 2), self.conv1d.weight, self.conv1d.bias, conv_state, activation="silu", pad_mask=pad_mask
        )
        xs, B, C = xBC.transpose(1, 2).split([I, G * N, G * N], dim=-1)
        sdt = state_dtype(x.dtype)
        dt = F.softplus(dt.to(sdt) + self.dt_bias.to(sdt)).clamp(*self.time_step_limit)  # (B, T, H)
        decay = dt * -self.A_log.to(sdt).exp()
        heads = xs.reshape(Bsz, T, H, P)
        value = (heads.to(sdt) * dt.unsqueeze(-1)).to(x.dtype).reshape(Bsz, T, H * P)
        query = C.reshape(Bsz, T, G, N).repeat_interleave(H // G, dim=2).reshape(Bsz, T, H * N)
        key = B.reshape(Bsz, T, G, N).repeat_interleave(H // G, dim=2).reshape(Bsz, T, H * N)
        y, recurrent = linear_recurrence(
            query, key, value, recurrent, decay.to(x.dtype), None,
            q_num_heads=H, kv_num_heads=H, update_rule="gated", scale=1.0, pad_mask=pad_mask,
        )  # fmt: skip
        y = y.reshape(Bsz, T, H, P) + self.D.to(x.dtype)[:, None] * heads
        y = self.norm(y.reshape(Bsz, T, I), z)
        return self.out_proj(y), conv_state, recurrent
