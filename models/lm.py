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

Flat state. Each family computes on the state's tensors as a list, in :func:`rnnx.models.state.flatten_state`
order (:meth:`RecurrentLM.state_names`: ``layers.0.S``, ...): :meth:`~RecurrentLM.forward_flat` and
:meth:`~RecurrentLM.init_state_flat` are TorchScript code; ``forward`` and ``init_state`` wrap them in the
dataclasses. ``torch.jit.script(model)`` scripts that flat view (the dataclasses are Python only)::

    forward(tokens, state: List[Tensor], pad_mask: Optional[Tensor] = None) -> Tuple[Tensor, List[Tensor]]
    init_state(batch_size: int) -> List[Tensor]      # zeros on the model's device
    state_names() -> List[str]                        # the names of the state tensors, in order

``config`` is a JSON-serialisable dict such that ``type(model)(**model.config)`` rebuilds the model;
:data:`MODEL_TYPES` names the families and :func:`build_model` builds one from its name and config
(what checkpoints store).
"""

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn

from .ops.dtypes import state_dtype
from .sru import dims_text, shape_text
from .state import flatten_state

Device = Optional[Union[str, torch.device]]


class RecurrentLM(nn.Module):
    """Base class: subclasses set ``self.vocab_size`` and ``self.config`` (:meth:`_keep_config` sets both from
    the constructor's arguments) and implement either the three flat-state methods (``init_state_flat``,
    ``forward_flat``, ``state_from_flat``: ``forward``, ``init_state`` and scripting then follow) or
    ``init_state`` and ``forward`` themselves."""

    __jit_unused_properties__ = ["state_dtype"]
    __jit_ignored_attributes__ = ["config"]
    vocab_size: int
    config: dict[str, Any]

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """A fresh (all-zero) state as a list of tensors on ``device`` (the model's when None)."""
        raise NotImplementedError(f"{type(self).__name__} has no flat-state form")

    def forward_flat(
        self, tokens: Tensor, state: list[Tensor], pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        """``forward`` on the state's tensors (:meth:`state_names` order); TorchScript code."""
        raise NotImplementedError(f"{type(self).__name__} has no flat-state form")

    def state_from_flat(self, tensors: list[Tensor]) -> Any:
        """The state dataclass holding ``tensors`` (the inverse of :func:`~rnnx.models.state.flatten_state`)."""
        raise NotImplementedError(f"{type(self).__name__} has no flat-state form")

    def init_state(self, batch_size: int, device: Device = None) -> Any:
        """A fresh (all-zero) state for ``batch_size`` rows on ``device`` (the model's by default)."""
        return self.state_from_flat(self.init_state_flat(batch_size, self._device(device)))

    def forward(self, tokens: Tensor, state: Any = None, pad_mask: Optional[Tensor] = None) -> tuple[Tensor, Any]:
        """``tokens`` (B, L) int64 -> ``(logits (B, L, V), new_state)``; see the module docstring."""
        check_tokens(tokens, pad_mask)
        if state is None:
            tensors = self.init_state_flat(tokens.shape[0], tokens.device)
        else:
            named = flatten_state(state)
            names, expected = [name for name, _ in named], self.state_names()
            if names != expected:
                raise ValueError(f"state holds the tensors {names}, the model takes {expected}")
            tensors = [t for _, t in named]
        logits, tensors = self.forward_flat(tokens, tensors, pad_mask)
        return logits, self.state_from_flat(tensors)

    def _keep_config(self, init: Callable[..., None], arguments: Mapping[str, Any]) -> None:
        """Sets ``config`` to the constructor ``init``'s arguments, each parameter but ``self`` in signature order
        with its value in ``arguments`` (the constructor's ``locals()``, read once it has filled in the defaults
        it computes and copied what it keeps, and before it changes any of them), so that
        ``type(self)(**config)`` rebuilds the model; and ``vocab_size`` from its ``vocab_size``."""
        names = [name for name in inspect.signature(init).parameters if name != "self"]
        self.config = {name: arguments[name] for name in names}
        self.vocab_size = self.config["vocab_size"]

    def state_names(self) -> list[str]:
        """The state tensors' names in flat order (:func:`~rnnx.models.state.flatten_state`). They follow from
        the configuration alone, so they are worked out once (``forward`` checks a given state against them)."""
        names = self.__dict__.get("_state_names")
        if names is None:
            names = self.__dict__["_state_names"] = [name for name, _ in flatten_state(self.init_state(1, "meta"))]
        return list(names)

    @property
    def state_dtype(self) -> torch.dtype:
        """dtype of the recurrent state: fp32, or fp64 when the model's parameters are fp64."""
        return state_dtype(next(self.parameters()).dtype)

    def _device(self, device: Device) -> torch.device:
        return torch.device(device) if device is not None else next(self.parameters()).device

    def __prepare_scriptable__(self) -> nn.Module:
        """What ``torch.jit.script(model)`` compiles: a view of this model (same parameters and submodules)
        whose ``forward`` is :meth:`forward_flat`, with ``init_state(batch_size)`` and ``state_names()``."""
        if type(self).forward_flat is RecurrentLM.forward_flat:
            raise TypeError(f"{type(self).__name__} has no flat-state form, so it cannot be scripted")
        view = _flat_view_class(type(self)).__new__(_flat_view_class(type(self)))
        view.__dict__.update(self.__dict__)
        view._modules = dict(self._modules)
        view._state_names = self.state_names()  # what the scripted state_names() returns
        return view


def _scripted_init_state(self, batch_size: int) -> list[Tensor]:
    return self.init_state_flat(batch_size, None)


def _scripted_state_names(self) -> list[str]:
    return self._state_names


@functools.cache
def _flat_view_class(cls: type) -> type:
    """``cls`` with the flat-state methods as the scripted module's ``forward`` / ``init_state`` / ``state_names``."""
    return type(
        f"Scripted{cls.__name__}",
        (cls,),
        {
            "__module__": cls.__module__,
            "forward": cls.forward_flat,
            "init_state": torch.jit.export(_scripted_init_state),
            "state_names": torch.jit.export(_scripted_state_names),
        },
    )


def check_tokens(tokens: Tensor, pad_mask: Optional[Tensor]) -> None:
    """tokens must be (B, L) with L >= 1 and pad_mask None or of the same shape; TorchScript code."""
    if tokens.dim() != 2 or tokens.shape[1] < 1:
        raise ValueError(f"tokens must be (B, L) with L >= 1, got shape {shape_text(tokens)}")
    if pad_mask is not None and list(pad_mask.shape) != list(tokens.shape):
        raise ValueError(f"pad_mask shape {shape_text(pad_mask)} != tokens shape {dims_text(list(tokens.shape))}")


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

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        return self.rnn.init_state_flat(batch_size, device)

    def state_from_flat(self, tensors: list[Tensor]) -> Any:
        return self.rnn.state_from_flat(tensors)

    def forward_flat(
        self, tokens: Tensor, state: list[Tensor], pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        check_tokens(tokens, pad_mask)
        x = self.embedding(tokens).transpose(0, 1)  # (L, B, E)
        h, new_state = self.rnn.forward_state_flat(x, state, _time_major_mask(pad_mask))
        return self.head(self.norm(h.transpose(0, 1))), new_state


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

        sru_options = dict(sru_options or {})
        self._keep_config(SRULM.__init__, locals())
        self.rnn = SRU(
            embed_dim,
            hidden_size,
            num_layers=num_layers,
            dropout=dropout,
            bidirectional=False,
            layer_norm=layer_norm,
            **sru_options,
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
        srupp_options = dict(srupp_options or {})
        self._keep_config(SRUppLM.__init__, locals())
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
            **srupp_options,
        )
        self._build_head(embed_dim, hidden_size, tie_weights, final_norm)
