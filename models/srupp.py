"""SRU++ (Lei 2021, "When Attention Meets Fast Recurrence") with softmax or causal linear attention.

:class:`SRUpp` takes the constructor arguments, parameter and buffer names of ``sru.SRUpp`` from the
published ``sru`` 3.0.0.dev6 release, so its ``state_dict`` loads unchanged, and its ``forward``
matches that package numerically (softmax attention). Layer ``i`` is an :class:`SRUppCell` whose
``transform_module`` computes ``U`` (L, B, out*k) from the (optionally pre-normed) layer input:

- :class:`SRUppAttention`: softmax self-attention (the package's module),
- :class:`SRUppLinearAttention`: causal linear attention, same parameters (``attention="linear"``),
- :class:`SRUppProjectedLinear`: ``linear2(LN(linear1(x)))`` on layers without attention.

The elementwise recurrence runs through :func:`rnnx.models.ops.sru_scan.sru_scan`, linear attention
through :func:`rnnx.models.ops.causal_linear_attention.causal_linear_attention`.

Streaming (unidirectional only): :meth:`SRUpp.init_state` and :meth:`SRUpp.forward_state` carry an
:class:`~rnnx.models.state.SRUppState` between calls; attention is causal over everything fed so
far (the KV cache of softmax layers grows, linear-attention layers keep a fixed-size ``(S, z)``).
"""

from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.jit import Final

from .ops import causal_linear_attention as _linear_attention
from .ops.dtypes import state_dtype
from .sru import SRUCell, dims_text, shape_text
from .state import AttentionState, KVCache, LinearAttentionState, SRUppState, flatten_state
from .zero_states import zero_state

ATTENTION_KINDS = ("softmax", "linear")


def _check_mask_pad(mask_pad: Optional[Tensor], length: int, batch: int) -> None:
    """Raises ValueError unless ``mask_pad`` is None or (length, batch)."""
    if mask_pad is not None and list(mask_pad.shape) != [length, batch]:
        raise ValueError(f"mask_pad has shape {shape_text(mask_pad)} but expected {dims_text([length, batch])}")


def _reset_projections(linears: list[nn.Linear], dropout: float) -> None:
    """sru's initialisation of a transform's projections: Xavier-uniform weights, the last one (the output
    projection) then scaled by sqrt(1 - dropout) when dropout > 0."""
    for linear in linears:
        nn.init.xavier_uniform_(linear.weight)
    if dropout > 0:
        linears[-1].weight.data.mul_((1 - dropout) ** 0.5)


def _pad_bool(mask_pad: Optional[Tensor], length: int, batch: int, device: torch.device) -> Tensor:
    """(length, batch) bool, True at pad positions (all False when ``mask_pad`` is None)."""
    if mask_pad is None:
        return torch.zeros(length, batch, dtype=torch.bool, device=device)
    return mask_pad.to(device=device) != 0


class SRUppProjectedLinear(nn.Module):
    """``U = linear2(dropout(LN(linear1(x))))`` for SRU++ layers without attention.

    input (L, B, in_features) -> U (L, B, out_features). Parameters: ``linear1`` (proj, in),
    ``linear2`` (out, proj), optional ``layer_norm`` over proj_features.
    """

    def __init__(
        self, in_features: int, out_features: int, proj_features: int, dropout: float = 0.0, layer_norm: bool = False
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.proj_features = proj_features
        self.dropout = nn.Dropout(dropout)
        self.linear1 = nn.Linear(in_features, proj_features, bias=False)
        self.linear2 = nn.Linear(proj_features, out_features, bias=False)
        self.layer_norm = nn.LayerNorm(proj_features) if layer_norm else None
        self.num_state_tensors = 0
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights; ``linear2`` scaled by sqrt(1 - dropout) as in the package."""
        _reset_projections([self.linear1, self.linear2], self.dropout.p)

    def forward(
        self,
        input: Tensor,
        mask_pad: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        memory: Optional[Tensor] = None,
        memory_mask_pad: Optional[Tensor] = None,
    ) -> Tensor:
        """input (L, B, in) -> U (L, B, out); the mask and memory arguments are ignored."""
        out = self.linear1(input)
        if self.layer_norm is not None:
            out = self.layer_norm(out)
        return self.linear2(self.dropout(out))

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> None:
        """No state: returns None."""
        return None

    def forward_state(
        self, input: Tensor, state: None = None, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, None]:
        """Token-wise, so streaming is the plain forward: returns ``(U, None)``."""
        return self.forward(input), None

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """No state tensors."""
        return []

    def state_from_flat(self, tensors: list[Tensor]) -> None:
        return None

    def forward_state_flat(
        self, input: Tensor, state: list[Tensor], mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        """:meth:`forward_state` on the (empty) flat state; TorchScript code."""
        return self.forward(input), state


class _AttentionBase(nn.Module):
    """Parameters and the shared projections of the SRU++ attention sub-layer.

    Parameters (names as in ``sru.SRUppAttention``): ``linear1`` (proj, in), ``linear2``
    (2*proj, proj) giving [key; value], ``linear3`` (out, proj), ``alpha`` (1,), optional
    ``layer_norm`` over proj_features. Heads split proj_features into ``num_heads`` contiguous
    blocks of ``head_dim = proj_features // num_heads``.

    With ``normalize_after=True`` (what ``SRUpp`` builds) the layer norm is applied after the
    residual: ``out = linear3(dropout(LN(alpha * attn + linear1(x))))``; otherwise it is applied to
    ``linear1(x)`` before q, k, v are taken and ``out = linear3(dropout(alpha * attn + linear1(x)))``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        proj_features: int,
        num_heads: int = 1,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        rezero_init_alpha: float = 0.0,
        layer_norm: bool = False,
        normalize_after: bool = True,
    ) -> None:
        super().__init__()
        if proj_features % num_heads != 0:
            raise ValueError(f"proj_features ({proj_features}) must be divisible by num_heads ({num_heads})")
        self.in_features = in_features
        self.out_features = out_features
        self.proj_features = proj_features
        self.num_heads = num_heads
        self.head_dim = proj_features // num_heads
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = float(attn_dropout)
        self.rezero_init_alpha = float(rezero_init_alpha)
        self.normalize_after = normalize_after
        self.linear1 = nn.Linear(in_features, proj_features, bias=False)
        self.linear2 = nn.Linear(proj_features, proj_features * 2, bias=False)
        self.linear3 = nn.Linear(proj_features, out_features, bias=False)
        self.alpha = nn.Parameter(torch.tensor([self.rezero_init_alpha]))
        self.layer_norm = nn.LayerNorm(proj_features) if layer_norm else None
        self.num_state_tensors = 3
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform weights, ``alpha = rezero_init_alpha``, ``linear3`` scaled by sqrt(1 - dropout)."""
        _reset_projections([self.linear1, self.linear2, self.linear3], self.dropout.p)
        self.alpha.data.fill_(self.rezero_init_alpha)

    def _heads(self, x: Tensor) -> Tensor:
        """(L, B, proj) -> (B, H, L, head_dim)."""
        length, batch = x.shape[0], x.shape[1]
        return x.reshape(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _project(self, input: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """input (L, B, in) -> q, k, v (B, H, L, head_dim) and the residual linear1(input) (L, B, proj)."""
        z = residual = self.linear1(input)
        if self.layer_norm is not None and not self.normalize_after:
            z = self.layer_norm(z)
        k, v = self.linear2(z).chunk(2, dim=-1)
        return self._heads(z), self._heads(k), self._heads(v), residual

    def _output(self, attn: Tensor, residual: Tensor) -> Tensor:
        """attn (B, H, L, head_dim), residual (L, B, proj) -> U (L, B, out)."""
        length, batch = residual.shape[0], residual.shape[1]
        return self._output_packed(attn.permute(2, 0, 1, 3).reshape(length, batch, self.proj_features), residual)

    def _output_packed(self, attn: Tensor, residual: Tensor) -> Tensor:
        """attn (L, B, proj), heads packed, residual (L, B, proj) -> U (L, B, out)."""
        out = attn * self.alpha + residual
        if self.layer_norm is not None and self.normalize_after:
            out = self.layer_norm(out)
        return self.linear3(self.dropout(out))


def _masked_softmax(scores: Tensor, allowed: Optional[Tensor]) -> Tensor:
    """Softmax over the last axis where ``allowed`` (broadcastable bool); a row with no allowed
    position gives zeros instead of NaN."""
    if allowed is None:
        return F.softmax(scores, dim=-1)
    weights = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)


class SRUppAttention(_AttentionBase):
    """Softmax multi-head self-attention of SRU++ (``sru.SRUppAttention``), plus a KV-cache stream.

    ``attn = softmax(q k^T / sqrt(head_dim) + attn_mask, pads -> -inf) v``; see
    :class:`_AttentionBase` for the projections and the residual / layer norm / ``linear3`` path.
    """

    def forward(
        self,
        input: Tensor,
        mask_pad: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        memory: Optional[Tensor] = None,
        memory_mask_pad: Optional[Tensor] = None,
    ) -> Tensor:
        """Package-compatible forward (not causal unless ``attn_mask`` makes it so).

        input (L, B, in); mask_pad (L, B) non-zero = pad (never attended to); attn_mask (L, T+L)
        additive float; memory (T, B, in) extra keys/values in front of the input; memory_mask_pad
        (T, B). Returns U (L, B, out).
        """
        length, batch, in_dim = input.size(0), input.size(1), input.size(2)
        mem_len = 0
        if memory is not None:
            if memory.dim() != 3 or list(memory.shape[1:]) != [batch, in_dim]:
                raise ValueError(f"memory has shape {shape_text(memory)} but expected (*, {batch}, {in_dim})")
            mem_len = memory.shape[0]
            q, k, v, residual = self._project(torch.cat([memory, input], dim=0))
            q, residual = q[:, :, mem_len:], residual[mem_len:]
        else:
            q, k, v, residual = self._project(input)
        src_len = mem_len + length

        scores = torch.matmul(q * self.head_dim**-0.5, k.transpose(-1, -2))  # (B, H, L, src_len)
        if attn_mask is not None:
            if list(attn_mask.shape) != [length, src_len]:
                raise ValueError(
                    f"attn_mask has shape {shape_text(attn_mask)} but expected {dims_text([length, src_len])}"
                )
            scores = scores + attn_mask
        allowed: Optional[Tensor] = None
        if mask_pad is not None or memory_mask_pad is not None:
            _check_mask_pad(mask_pad, length, batch)
            pads = [_pad_bool(mask_pad, length, batch, input.device)]
            if mem_len > 0:
                _check_mask_pad(memory_mask_pad, mem_len, batch)
                pads.insert(0, _pad_bool(memory_mask_pad, mem_len, batch, input.device))
            allowed = ~torch.cat(pads, dim=0).t()[:, None, None, :]  # (B, 1, 1, src_len)
        weights = _masked_softmax(scores, allowed)
        weights = F.dropout(weights, p=self.attn_dropout, training=self.training)
        return self._output(torch.matmul(weights, v), residual)

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> KVCache:
        """Empty cache: key/value (B, H, 0, head_dim) in the parameter dtype, valid (B, 0) bool."""
        return self.state_from_flat(self.init_state_flat(batch_size, device))

    def forward_state(
        self, input: Tensor, state: Optional[KVCache] = None, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, KVCache]:
        """Causal attention of L new tokens over cache + themselves; returns ``(U, grown cache)``.

        input (L, B, in); mask_pad (L, B): pads are cached with ``valid=False`` and never attended
        to. The cache holds key/value after ``linear2`` and the head split, (B, H, T, head_dim).
        """
        if state is None:
            flat = self.init_state_flat(input.shape[1], input.device)
        else:
            flat = [state.key, state.value, state.valid]
        out, flat = self.forward_state_flat(input, flat, mask_pad)
        return out, self.state_from_flat(flat)

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """:meth:`init_state` as ``[key, value, valid]``; TorchScript code."""
        weight = self.linear1.weight
        device = weight.device if device is None else device
        empty = torch.zeros(batch_size, self.num_heads, 0, self.head_dim, dtype=weight.dtype, device=device)
        return [empty, empty.clone(), torch.zeros(batch_size, 0, dtype=torch.bool, device=device)]

    def state_from_flat(self, tensors: list[Tensor]) -> KVCache:
        return KVCache(key=tensors[0], value=tensors[1], valid=tensors[2])

    def forward_state_flat(
        self, input: Tensor, state: list[Tensor], mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        """:meth:`forward_state` on the flat cache ``[key, value, valid]``; TorchScript code."""
        length, batch = input.shape[0], input.shape[1]
        _check_mask_pad(mask_pad, length, batch)
        cached_key, cached_value, cached_valid = state[0], state[1], state[2]
        q, k, v, residual = self._project(input)
        key = torch.cat([cached_key.to(k.dtype), k], dim=2)
        value = torch.cat([cached_value.to(v.dtype), v], dim=2)
        valid = torch.cat([cached_valid, ~_pad_bool(mask_pad, length, batch, input.device).t()], dim=1)
        past = cached_key.shape[2]
        t_query = torch.arange(length, device=input.device)[:, None] + past
        causal = torch.arange(past + length, device=input.device)[None, :] <= t_query  # (L, T+L)
        allowed = causal[None, None] & valid[:, None, None, :]  # (B, 1, L, T+L)
        scores = torch.matmul(q * self.head_dim**-0.5, key.transpose(-1, -2))
        weights = F.dropout(_masked_softmax(scores, allowed), p=self.attn_dropout, training=self.training)
        out = self._output(torch.matmul(weights, value), residual)
        return out, [key, value, valid]


class SRUppLinearAttention(_AttentionBase):
    """Causal linear attention in place of SRU++'s softmax attention; same parameters and names.

    Per head, with q, k, v as in :class:`SRUppAttention` (q from the ``linear1`` output, normed first
    only when ``normalize_after=False``), and phi(x) = elu(x) + 1 applied inside the op::

        attn_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps),  S_t = S_{t-1} + phi(k_t) v_t^T,  z_t = z_{t-1} + phi(k_t)

    q is NOT scaled by 1/sqrt(head_dim) (the normalisation by ``phi(q)^T z`` takes its place).
    Causal by construction; the state per layer is ``(S (B, H, E, E), z (B, H, E))`` fp32 with
    E = head_dim, whatever the sequence length. q, k, v stay time-major and packed, (L, B, proj), the op's
    ``time_major`` layout, and pad steps are the op's mask: they never change ``(S, z)``.
    ``attn_dropout`` has no attention map to act on and is not used.
    """

    def __init__(self, *args, eps: float = 1e-6, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.eps = float(eps)
        self.num_state_tensors = 2

    def forward(
        self,
        input: Tensor,
        mask_pad: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        memory: Optional[Tensor] = None,
        memory_mask_pad: Optional[Tensor] = None,
    ) -> Tensor:
        """input (L, B, in), mask_pad (L, B) -> U (L, B, out), from a zero state.

        Raises ValueError for ``attn_mask`` / ``memory`` (causal by construction; carry a state with
        :meth:`forward_state` instead of memory).
        """
        if attn_mask is not None or memory is not None or memory_mask_pad is not None:
            raise ValueError(
                "linear attention is causal by construction and takes no attn_mask / memory / "
                "memory_mask_pad; use forward_state to carry context between calls"
            )
        return self._attend(input, None, None, mask_pad)[0]

    def init_state(self, batch_size: int, device: Optional[torch.device] = None) -> LinearAttentionState:
        """Zeros: S (B, H, E, E), z (B, H, E) in the state dtype (fp32; fp64 for an fp64 model)."""
        return self.state_from_flat(self.init_state_flat(batch_size, device))

    def forward_state(
        self, input: Tensor, state: Optional[LinearAttentionState] = None, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, LinearAttentionState]:
        """input (L, B, in), mask_pad (L, B) -> ``(U (L, B, out), new state)``."""
        S0, z0 = (None, None) if state is None else (state.S, state.z)
        U, S, z = self._attend(input, S0, z0, mask_pad)
        return U, LinearAttentionState(S=S, z=z)

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """:meth:`init_state` as ``[S, z]``; TorchScript code."""
        weight = self.linear1.weight
        return [
            zero_state([batch_size, self.num_heads, self.head_dim, self.head_dim], weight, device),
            zero_state([batch_size, self.num_heads, self.head_dim], weight, device),
        ]

    def state_from_flat(self, tensors: list[Tensor]) -> LinearAttentionState:
        return LinearAttentionState(S=tensors[0], z=tensors[1])

    def forward_state_flat(
        self, input: Tensor, state: list[Tensor], mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        """:meth:`forward_state` on the flat state ``[S, z]``; TorchScript code."""
        U, S, z = self._attend(input, state[0], state[1], mask_pad)
        return U, [S, z]

    def _attend(
        self, input: Tensor, S0: Optional[Tensor], z0: Optional[Tensor], mask_pad: Optional[Tensor]
    ) -> tuple[Tensor, Tensor, Tensor]:
        """input (L, B, in) from the state (S0, z0) (zeros when None) -> U (L, B, out), S, z. Under
        TorchScript the attention is the op ``torch.ops.rnnx.causal_linear_attention`` itself."""
        length, batch = input.shape[0], input.shape[1]
        _check_mask_pad(mask_pad, length, batch)
        q = residual = self.linear1(input)
        if self.layer_norm is not None and not self.normalize_after:
            q = self.layer_norm(q)
        k, v = self.linear2(q).chunk(2, dim=-1)
        pad = mask_pad if mask_pad is None or mask_pad.dtype == torch.bool else mask_pad != 0  # (L, B)
        if torch.jit.is_scripting():
            attn, S, z = torch.ops.rnnx.causal_linear_attention(q, k, v, S0, z0, pad, self.eps, self.num_heads, 1)
        else:
            prev = None if S0 is None or z0 is None else (S0, z0)
            attn, (S, z) = _linear_attention.causal_linear_attention(
                q, k, v, prev, eps=self.eps, num_heads=self.num_heads, pad_mask=pad, time_major=True
            )
        return self._output_packed(attn, residual), S, z


TransformModule = Union[SRUppAttention, SRUppLinearAttention, SRUppProjectedLinear]


class SRUppCell(SRUCell):
    """One SRU++ layer (``sru.SRUppCell`` 3.0.0.dev6, like it an :class:`~rnnx.models.SRUCell`): U from the
    transform module, which also gets the masks and the memory, then the SRU recurrence.

    input (L, B, input_size) -> h (L, B, D*hidden_size), c (B, D*hidden_size). Parameters and
    buffers: ``transform_module``, ``weight_c`` (2*D*d,) = [v_f; v_r], ``bias`` (2*D*d,) =
    [b_f; b_r], buffer ``scale_x`` (1,), optional ``layer_norm`` (over the input when
    ``normalize_after=False``, over the output otherwise). The skip term is the un-normed input
    (times ``scale_x`` when ``rescale``), or the 4th projection of U when input_size != D*d.

    :class:`SRUpp` gives each layer an :class:`SRUppAttention`, :class:`SRUppLinearAttention` or
    :class:`SRUppProjectedLinear`; another module is called as ``transform_module(input, mask_pad=...,
    attn_mask=..., memory=..., memory_mask_pad=...)`` as in sru, except sru 3.0's built-in ``nn.Linear`` /
    ``nn.Sequential`` (no ``transform_module`` given), which takes the input alone. Streaming
    (:meth:`forward_state`) needs the transform's flat-state protocol (``num_state_tensors``,
    ``init_state_flat``, ``state_from_flat``, ``forward_state_flat``), which the three SRU++ transforms have.
    """

    transform_takes_masks: Final[bool]

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        dropout: float = 0.0,
        rnn_dropout: float = 0.0,
        bidirectional: bool = False,
        projection_size: Optional[int] = None,
        highway_bias: float = 0.0,
        layer_norm: bool = False,
        normalize_after: bool = True,
        transform_module: Optional[nn.Module] = None,
        rescale: bool = False,
        has_skip_term: bool = True,
        use_tanh: bool = False,
        v1: bool = False,
        amp_recurrence_fp16: bool = True,
        weight_c_init: Optional[float] = 1.0,
        *,
        custom_m: Optional[nn.Module] = None,
        n_proj: Optional[int] = None,
    ) -> None:
        """Arguments of ``sru.SRUppCell`` 3.0.0.dev6, in its positional order and with its defaults
        (``projection_size`` None: 0); ``custom_m`` / ``n_proj`` are accepted as sru 2.6's names of
        ``transform_module`` / ``projection_size`` (TypeError when both names are given). Without a
        ``transform_module`` the layer builds sru 3.0's ``nn.Linear`` (``nn.Sequential`` when projected)."""
        super().__init__(
            input_size,
            hidden_size,
            dropout=dropout,
            rnn_dropout=rnn_dropout,
            bidirectional=bidirectional,
            n_proj=n_proj,
            use_tanh=use_tanh,
            highway_bias=highway_bias,
            has_skip_term=has_skip_term,
            layer_norm=layer_norm,
            rescale=rescale,
            v1=v1,
            custom_m=custom_m,
            amp_recurrence_fp16=amp_recurrence_fp16,
            normalize_after=normalize_after,
            weight_c_init=weight_c_init,
            projection_size=projection_size,
            transform_module=transform_module,
            sru_version="3.0",
        )
        self.transform_takes_masks = not isinstance(self.transform_module, (nn.Linear, nn.Sequential))

    def _transform(
        self,
        input: Tensor,
        mask_pad: Optional[Tensor],
        attn_mask: Optional[Tensor],
        memory: Optional[Tensor],
        memory_mask_pad: Optional[Tensor],
    ) -> Tensor:
        """U (L, B, out*k) from the transform module: the input alone for sru 3.0's built-in
        ``nn.Linear`` / ``nn.Sequential``, the masks and the memory too for any other module."""
        transform = self.transform_module
        if not self.transform_takes_masks:
            return self.compute_U(input)
        return transform(input, mask_pad=mask_pad, attn_mask=attn_mask, memory=memory, memory_mask_pad=memory_mask_pad)

    def forward(
        self,
        input: Tensor,
        c0: Optional[Tensor] = None,
        mask_pad: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        memory: Optional[Tensor] = None,
        memory_mask_pad: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor]:
        """input (L, B, in), c0 (B, D*d) (zeros if None) -> h (L, B, D*d), c (B, D*d) in the state
        dtype (fp32 for fp32/fp16/bf16 activations). mask_pad (L, B) non-zero = pad; attn_mask, memory and
        memory_mask_pad go to the transform module (see :class:`SRUppAttention`)."""
        if input.dim() != 3:
            raise ValueError(f"input must be (length, batch, {self.input_size}), got shape {shape_text(input)}")
        if c0 is None:
            c0 = input.new_zeros(input.shape[1], self.output_size, dtype=state_dtype(input.dtype))
        residual, x, mask_c = self._before_transform(input)
        U = self._transform(x, mask_pad, attn_mask, memory, memory_mask_pad)
        return self._after_transform(U, residual, c0.to(state_dtype(U.dtype)), mask_pad, mask_c)

    def forward_state(
        self, input: Tensor, c0: Tensor, attention: AttentionState, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, Tensor, AttentionState]:
        """Streaming step: input (L, B, in), c0 (B, d) fp32, the layer's attention state ->
        h (L, B, d), c (B, d) in c0's dtype, the new attention state."""
        flat = [t for _, t in flatten_state(attention)]
        h, c, flat = self.forward_state_flat(input, c0, flat, mask_pad)
        return h, c, self.transform_module.state_from_flat(flat)

    def forward_state_flat(
        self, input: Tensor, c0: Tensor, attention: list[Tensor], mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, Tensor, list[Tensor]]:
        """:meth:`forward_state` with the attention state as its flat list of tensors; TorchScript code."""
        residual, x, mask_c = self._before_transform(input)
        U, attention = self.transform_module.forward_state_flat(x, attention, mask_pad)
        h, c = self._after_transform(U, residual, c0.to(state_dtype(U.dtype)), mask_pad, mask_c)
        return h, c, attention


class SRUpp(nn.Module):
    """Stacked SRU++ layers, compatible with ``sru.SRUpp`` 3.0.0.dev6 checkpoints.

    Constructor arguments are the package's, plus ``attention``: ``"softmax"`` (the package's
    attention) or ``"linear"`` (:class:`SRUppLinearAttention`, same parameters; every layer then has
    O(1) state). Layer ``i`` has attention when ``(i + 1) % attention_every_n_layers == 0``, or, when
    ``attention_last_n_layers != -1``, when it is among the last ``attention_last_n_layers``;
    other layers use :class:`SRUppProjectedLinear`. ``proj_input_to_hidden_first`` adds
    ``input_to_hidden`` (out, in) in front when input_size != output_size.

    Parameter names: ``input_to_hidden.weight``, ``rnn_lst.{i}.{weight_c, bias, scale_x,
    layer_norm.*, transform_module.{linear1, linear2, linear3, alpha, layer_norm}.*}``.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        proj_size: int,
        num_layers: int = 2,
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        num_heads: int = 1,
        bidirectional: bool = False,
        layer_norm: bool = False,
        normalize_after: bool = False,
        attn_layer_norm: bool = True,
        highway_bias: float = -2.0,
        attention_every_n_layers: int = 1,
        attention_last_n_layers: int = -1,
        rescale: bool = False,
        nn_rnn_compatible_return: bool = False,
        proj_input_to_hidden_first: bool = False,
        weight_c_init: float = 1.0,
        attention: str = "softmax",
    ) -> None:
        super().__init__()
        if attention_every_n_layers != 1 and attention_last_n_layers != -1:
            raise ValueError("cannot set both attention_every_n_layers and attention_last_n_layers")
        if attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {attention!r}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.proj_size = proj_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.dropout = dropout
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.num_directions
        self.use_layer_norm = layer_norm
        self.nn_rnn_compatible_return = nn_rnn_compatible_return
        self.attention = attention
        projects_first = proj_input_to_hidden_first and input_size != self.output_size
        self.input_to_hidden = nn.Linear(input_size, self.output_size, bias=False) if projects_first else None
        first_in = self.output_size if projects_first else input_size
        if self.input_to_hidden is not None:
            nn.init.xavier_uniform_(self.input_to_hidden.weight)

        attention_cls = SRUppAttention if attention == "softmax" else SRUppLinearAttention
        self.rnn_lst = nn.ModuleList()
        for i in range(num_layers):
            in_features = first_in if i == 0 else self.output_size
            out_features = self.output_size * (3 if in_features == self.output_size else 4)
            if attention_last_n_layers != -1:
                has_attention = num_layers - i <= attention_last_n_layers
            else:
                has_attention = (i + 1) % attention_every_n_layers == 0
            if has_attention:
                transform: TransformModule = attention_cls(
                    in_features, out_features, proj_size, num_heads=num_heads, dropout=dropout,
                    attn_dropout=attn_dropout, layer_norm=attn_layer_norm,
                )  # fmt: skip
            else:
                transform = SRUppProjectedLinear(
                    in_features, out_features, proj_size, dropout=dropout, layer_norm=attn_layer_norm
                )
            self.rnn_lst.append(
                SRUppCell(
                    in_features,
                    hidden_size,
                    transform_module=transform,
                    dropout=dropout if i + 1 != num_layers else 0.0,
                    bidirectional=bidirectional,
                    highway_bias=highway_bias,
                    layer_norm=layer_norm,
                    normalize_after=normalize_after,
                    rescale=rescale,
                    weight_c_init=weight_c_init,
                )  # fmt: skip
            )

    def __getitem__(self, n: int) -> SRUppCell:
        """The n-th layer."""
        return self.rnn_lst[n]

    def reset_parameters(self) -> None:
        """Re-initialises every layer (and ``input_to_hidden``) as the package does."""
        for layer in self.rnn_lst:
            layer.reset_parameters()
        if self.input_to_hidden is not None:
            nn.init.xavier_uniform_(self.input_to_hidden.weight)

    def _check_input(self, input: Tensor) -> None:
        if input.dim() != 3 or input.shape[2] != self.input_size:
            raise ValueError(f"input must be (length, batch, {self.input_size}), got shape {shape_text(input)}")

    def forward(
        self,
        input: Tensor,
        c0: Optional[Tensor] = None,
        mask_pad: Optional[Tensor] = None,
        attn_mask: Optional[Tensor] = None,
        memory: Optional[list[Optional[Tensor]]] = None,
        memory_mask_pad: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor, dict[str, list[Tensor]]]:
        """The package's forward.

        input (L, B, input_size); c0 (num_layers, B, D*d) or None (zeros); mask_pad (L, B) non-zero
        = pad; attn_mask (L, T+L) additive (softmax only); memory: per layer (T, B, layer input) or
        None (softmax only); memory_mask_pad (T, B).

        Returns h (L, B, D*d), c (num_layers, B, D*d) in the state dtype (fp32; fp64 for fp64) — or
        (num_layers*D, B, d) with
        ``nn_rnn_compatible_return`` — and ``{'saved_inputs': [input of layer i, ...]}``.
        """
        self._check_input(input)
        length, batch = input.shape[0], input.shape[1]
        if c0 is None:
            c0 = input.new_zeros(self.num_layers, batch, self.output_size, dtype=state_dtype(input.dtype))
        elif list(c0.shape) != [self.num_layers, batch, self.output_size]:
            raise ValueError(
                f"c0 has shape {shape_text(c0)} but expected {dims_text([self.num_layers, batch, self.output_size])}"
            )
        _check_mask_pad(mask_pad, length, batch)
        if memory is not None and (not isinstance(memory, list) or len(memory) != self.num_layers):
            raise ValueError(f"memory must be a list of {self.num_layers} optional tensors")

        x = input if self.input_to_hidden is None else self.input_to_hidden(input)
        x = x.contiguous()
        saved_inputs: list[Tensor] = []
        cs: list[Tensor] = []
        for i, layer in enumerate(self.rnn_lst):
            saved_inputs.append(x)
            x, c = layer(
                x, c0[i], mask_pad=mask_pad, attn_mask=attn_mask,
                memory=None if memory is None else memory[i], memory_mask_pad=memory_mask_pad,
            )  # fmt: skip
            cs.append(c)
        c_all = torch.stack(cs)
        if self.nn_rnn_compatible_return:
            c_all = c_all.reshape(self.num_layers, batch, self.num_directions, self.hidden_size)
            c_all = c_all.transpose(1, 2).reshape(self.num_layers * self.num_directions, batch, self.hidden_size)
        return x, c_all, {"saved_inputs": saved_inputs}

    def _check_streaming(self) -> None:
        if self.bidirectional:
            raise ValueError(
                "streaming (init_state / forward_state) needs a unidirectional SRUpp; this one is bidirectional"
            )

    def init_state(self, batch_size: int, device: Optional[Union[str, torch.device]] = None) -> SRUppState:
        """Empty state: c zeros (num_layers, B, d) fp32 (fp64 for an fp64 model); per layer a zero
        ``LinearAttentionState``, an empty ``KVCache`` or None (no attention)."""
        return self.state_from_flat(self.init_state_flat(batch_size, None if device is None else torch.device(device)))

    def _check_state(self, state: SRUppState, batch: int) -> None:
        expected_c = (self.num_layers, batch, self.output_size)
        if tuple(state.c.shape) != expected_c:
            raise ValueError(f"state.c has shape {tuple(state.c.shape)} but expected {expected_c}")
        if len(state.attention) != self.num_layers:
            raise ValueError(
                f"state.attention has {len(state.attention)} entries but the model has {self.num_layers} layers"
            )
        for i, (layer, att) in enumerate(zip(self.rnn_lst, state.attention)):
            kind = {SRUppAttention: KVCache, SRUppLinearAttention: LinearAttentionState}.get(
                type(layer.transform_module), type(None)
            )
            if not isinstance(att, kind):
                raise ValueError(f"state.attention[{i}] is {type(att).__name__}, expected {kind.__name__}")

    def forward_state(
        self, input: Tensor, state: Optional[SRUppState] = None, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, SRUppState]:
        """Feeds L more tokens: input (L, B, input_size), mask_pad (L, B) non-zero = pad.

        Attention is causal over all tokens fed so far; pads are never attended to and leave c
        (and a linear-attention state) unchanged. Returns h (L, B, d) and the new state (c in the
        state dtype whatever the activation dtype). ``state=None`` starts from :meth:`init_state`.
        """
        self._check_streaming()
        self._check_input(input)
        if state is None:
            flat = self.init_state_flat(input.shape[1], input.device)
        else:
            self._check_state(state, input.shape[1])
            flat = [t for _, t in flatten_state(state)]
        h, flat = self.forward_state_flat(input, flat, mask_pad)
        return h, self.state_from_flat(flat)

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """:meth:`init_state` as ``[c, then each attention layer's tensors]`` (S, z or key, value, valid);
        TorchScript code."""
        self._check_streaming()
        weight = self.rnn_lst[0].weight_c
        device = weight.device if device is None else device
        flat = [zero_state([self.num_layers, batch_size, self.output_size], weight, device)]
        for layer in self.rnn_lst:
            flat.extend(layer.transform_module.init_state_flat(batch_size, device))
        return flat

    def state_from_flat(self, tensors: list[Tensor]) -> SRUppState:
        """The flat list of :meth:`init_state_flat` -> :class:`SRUppState`."""
        attention: list[AttentionState] = []
        offset = 1
        for layer in self.rnn_lst:
            n = layer.transform_module.num_state_tensors
            attention.append(layer.transform_module.state_from_flat(tensors[offset : offset + n]))
            offset += n
        return SRUppState(c=tensors[0], attention=attention)

    def forward_state_flat(
        self, input: Tensor, state: list[Tensor], mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        """:meth:`forward_state` on the flat state of :meth:`init_state_flat`; TorchScript code."""
        self._check_streaming()
        self._check_input(input)
        length, batch = input.shape[0], input.shape[1]
        _check_mask_pad(mask_pad, length, batch)
        expected = 1
        for layer in self.rnn_lst:
            expected += layer.transform_module.num_state_tensors
        if len(state) != expected:
            raise ValueError(
                f"the state has {len(state)} tensors but this SRUpp takes {expected}: c, then each attention "
                "layer's (S, z for linear attention; key, value, valid for softmax)"
            )
        expected_c = [self.num_layers, batch, self.output_size]
        if list(state[0].shape) != expected_c:
            raise ValueError(f"state.c has shape {shape_text(state[0])} but expected {dims_text(expected_c)}")
        x = input if self.input_to_hidden is None else self.input_to_hidden(input)
        cs: list[Tensor] = []
        new_state: list[Tensor] = []
        offset = 1
        for i, layer in enumerate(self.rnn_lst):
            n = layer.transform_module.num_state_tensors
            x, c, attention = layer.forward_state_flat(x, state[0][i], state[offset : offset + n], mask_pad)
            offset += n
            cs.append(c)
            new_state.extend(attention)
        return x, [torch.stack(cs)] + new_state
