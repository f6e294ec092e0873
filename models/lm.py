"""One language-model interface over every rnnx model family.

A :class:`RecurrentLM` maps token ids to next-token logits and carries an O(1)-size recurrent state:

* ``tokens``   (B, L) int64, batch-first, any L >= 1;
* ``pad_mask`` (B, L) bool, True marks a pad step: its token does not change the state (its logits
  are meaningless); optional;
* ``state``    a dataclass from :mod:`rnnx.models.state` (fp32 tensors; fp64 for an fp64 model),
  ``None`` meaning a fresh state from :meth:`RecurrentLM.init_state`;
* returns ``(logits (B, L, V), new_state)``.

Feeding ``n`` tokens and then ``m`` single tokens, each time passing the state on, gives the same
logits and state as one call on all ``n + m`` tokens: prefill and decode are the same function.

``config`` is a JSON-serialisable dict such that ``type(model)(**model.config)`` rebuilds the model;
:data:`MODEL_TYPES` names the families and :func:`build_model` builds one from its name and config
(what checkpoints store).
"""

from __future__ import annotations

from typing import Any, Optional, Union

import torch
from torch import Tensor, nn

from .ops.spec import state_dtype_for

Device = Optional[Union[str, torch.device]]


class RecurrentLM(nn.Module):
    """Base class: subclasses set ``self.vocab_size`` and ``self.config`` and implement the two methods."""

    vocab_size: int
    config: dict[str, Any]

    def init_state(self, batch_size: int, device: Device = None) -> Any:
        """A fresh (all-zero) state for ``batch_size`` rows on ``device`` (the model's by default)."""
        raise NotImplementedError

    def forward(self, tokens: Tensor, state: Any = None, pad_mask: Optional[Tensor] = None) -> tuple[Tensor, Any]:
        """``tokens`` (B, L) int64 -> ``(logits (B, L, V), new_state)``; see the module docstring."""
        raise NotImplementedError

    @property
    def state_dtype(self) -> torch.dtype:
        """dtype of the recurrent state: fp32, or fp64 when the model's parameters are fp64."""
        return state_dtype_for(next(self.parameters()).dtype)

    def _device(self, device: Device) -> torch.device:
        return torch.device(device) if device is not None else next(self.parameters()).device


def _check_inputs(tokens: Tensor, pad_mask: Optional[Tensor]) -> None:
    if tokens.dim() != 2 or tokens.shape[1] < 1:
        raise ValueError(f"tokens must be (B, L) with L >= 1, got shape {tuple(tokens.shape)}")
    if pad_mask is not None and pad_mask.shape != tokens.shape:
        raise ValueError(f"pad_mask shape {tuple(pad_mask.shape)} != tokens shape {tuple(tokens.shape)}")


def _time_major_mask(pad_mask: Optional[Tensor]) -> Optional[Tensor]:
    """(B, L) bool, True = pad  ->  (L, B) mask_pad as the SRU modules take it."""
    return None if pad_mask is None else pad_mask.to(torch.bool).t().contiguous()


class _EmbedRNNHead(RecurrentLM):
    """embedding (V, E) -> time-major recurrent stack (E -> H) -> optional LayerNorm -> LM head (H -> V)."""

    def _build_head(self, embed_dim: int, out_dim: int, tie_weights: bool, final_norm: bool) -> None:
        self.embedding = nn.Embedding(self.vocab_size, embed_dim)
        self.norm = nn.LayerNorm(out_dim) if final_norm else nn.Identity()
        self.head = nn.Linear(out_dim, self.vocab_size, bias=False)
        if tie_weights:
            if embed_dim != out_dim:
                raise TypeError(f"tie_weights needs embed_dim == output size, got {embed_dim} != {out_dim}")
            self.head.weight = self.embedding.weight

    def forward(self, tokens: Tensor, state: Any = None, pad_mask: Optional[Tensor] = None) -> tuple[Tensor, Any]:
        _check_inputs(tokens, pad_mask)
        if state is None:
            state = self.init_state(tokens.shape[0], tokens.device)
        x = self.embedding(tokens).transpose(0, 1)  # (L, B, E)
        h, new_state = self.rnn.forward_state(x, state, mask_pad=_time_major_mask(pad_mask))
        return self.head(self.norm(h.transpose(0, 1))), new_state

    def init_state(self, batch_size: int, device: Device = None) -> Any:
        return self.rnn.init_state(batch_size, device=self._device(device))


class SRULM(_EmbedRNNHead):
    """Token embedding -> unidirectional stacked :class:`rnnx.models.sru.SRU` -> LM head.

    State: :class:`rnnx.models.state.SRUState` (c: (num_layers, B, hidden_size) fp32).
    ``sru_options`` are passed to the SRU constructor (e.g. ``{"use_tanh": true, "rescale": false}``).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 128,
        hidden_size: int = 128,
        num_layers: int = 2,
        dropout: float = 0.0,
        layer_norm: bool = False,
        tie_weights: bool = False,
        final_norm: bool = True,
        sru_options: Optional[dict[str, Any]] = None,
    ) -> None:
        super().__init__()
        from .sru import SRU

        self.vocab_size = vocab_size
        self.config = dict(
            vocab_size=vocab_size,
            embed_dim=embed_dim,
            hidden_size=hidden_size,
            num_layers=num_layers,
            dropout=dropout,
            layer_norm=layer_norm,
            tie_weights=tie_weights,
            final_norm=final_norm,
            sru_options=dict(sru_options or {}),
        )
        self.rnn = SRU(
            embed_dim,
            hidden_size,
            num_layers=num_layers,
            dropout=dropout,
            bidirectional=False,
            layer_norm=layer_norm,
            **(sru_options or {}),
        )
        self._build_head(embed_dim, hidden_size, tie_weights, final_norm)


class SRUppLM(_EmbedRNNHead):
    """Token embedding -> unidirectional :class:`rnnx.models.srupp.SRUpp` -> LM head.

    ``attention`` is ``"softmax"`` (state grows: a KV cache per attention layer) or ``"linear"``
    (causal linear attention: O(1) state). State: :class:`rnnx.models.state.SRUppState`.
    ``srupp_options`` are passed to the SRUpp constructor (e.g. ``{"attention_every_n_layers": 2}``).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int = 128,
        hidden_size: int = 128,
        proj_size: int = 64,
        num_layers: int = 2,
        num_heads: int = 1,
        attention: str = "linear",
        dropout: float = 0.0,
        attn_dropout: float = 0.0,
        layer_norm: bool = False,
        tie_weights: bool = False,
        final_norm: bool = True,
        srupp_options: Optional[dict[str, Any]] = None,
    ) -> None:
        super().__init__()
        from .srupp import SRUpp

        if attention not in ("softmax", "linear"):
            raise TypeError(f"attention must be 'softmax' or 'linear', got {attention!r}")
        self.vocab_size = vocab_size
        self.config = dict(
            vocab_size=vocab_size,
            embed_dim=embed_dim,
            hidden_size=hidden_size,
            proj_size=proj_size,
            num_layers=num_layers,
            num_heads=num_heads,
            attention=attention,
            dropout=dropout,
            attn_dropout=attn_dropout,
            layer_norm=layer_norm,
            tie_weights=tie_weights,
            final_norm=final_norm,
            srupp_options=dict(srupp_options or {}),
        )
        self.rnn = SRUpp(
            embed_dim,
            hidden_size,
            proj_size,
            num_layers=num_layers,
            dropout=dropout,
            attn_dropout=attn_dropout,
            num_heads=num_heads,
            bidirectional=False,
            layer_norm=layer_norm,
            attention=attention,
            **(srupp_options or {}),
        )
        self._build_head(embed_dim, hidden_size, tie_weights, final_norm)
