"""Causal linear-attention transformer encoders of ``fast-transformers`` 0.4 as one rnnx module.

``fast_transformers`` (idiap, pytorch-fast-transformers 0.4.0) trains with a ``TransformerEncoder``
built by ``TransformerEncoderBuilder`` (``attention_type="causal-linear"``) and decodes with a
``RecurrentTransformerEncoder`` from ``RecurrentEncoderBuilder`` holding the same weights. They become
:class:`LinearTransformerEncoder` and :class:`RecurrentLinearTransformerEncoder` here, drop-ins for the
originals' calls (``encoder(x, attn_mask, length_mask) -> y``; ``recurrent(x_t, state) -> (y_t, state)``),
so a user's model keeps working after :func:`rnnx.models.convert`. Both also have one sequence form that
takes and returns the attention state, ``forward_state(x (B, L, D), state, pad_mask) -> (y, state)``
(the recurrent twin's ``forward`` takes a (B, L, D) sequence too), so the same weights prefill a prompt
and then decode token by token.

The maths (read from fast-transformers 0.4, reimplemented). Each encoder layer is post-norm::

    x = norm1(x + dropout(attention(x)))
    x = norm2(x + dropout(linear2(dropout(act(linear1(x))))))     act: relu or gelu (exact, erf)

and the encoder applies an optional final ``norm``. The attention projects x to H heads of queries
and keys of ``query_dimensions`` (E) and values of ``value_dimensions`` (M) with separate biased
``query/key/value_projection``, and maps the concatenated heads back with ``out_projection``; E and
M need not be d_model / H. Per head, with phi(x) = elu(x) + 1, fast-transformers computes

    out_t = (sum_{s<=t} phi(q_t).phi(k_s) v_s) / (phi(q_t).(sum_{s<=t} phi(k_s)) + eps)

(parallel form: ``causal_dot_product`` times ``1 / (einsum(Q, K.cumsum) + eps)``; recurrent form:
S += phi(k) v^T, z += phi(k), out = phi(q)^T S / (phi(q).z + eps)). That is exactly
``rnnx::causal_linear_attention``: out = phi(q)^T S / (phi(q)^T z + eps) with eps added once to the
denominator (never inside phi, never to the numerator), default 1e-6 in both packages; the rnnx op
also applies phi to q and k itself, so q, k, v go to it as projected. fast-transformers' recurrent
state of a layer is the list ``[Si (B, H, E, M), Zi (B, H, E)]``: the same layout as
:class:`~rnnx.models.state.LinearAttentionState` ``(S, z)``. Both forms are accepted, and the new state
comes back in the form given; unlike fast-transformers, which adds into the given ``Si`` / ``Zi``, the
state passed in is never modified.

Padding: fast-transformers' ``LengthMask`` multiplies phi(k) of pad positions by 0; here the pad mask is
the op's ``mask_pad``, which carries S and z over a pad step, so pads add nothing to S or z and every output
equals the original's. q, k, v go to the op packed, (B, L, H*E), as the projections give them.

Conversion (:data:`CONVERTERS`, used by :func:`rnnx.models.convert`): fast-transformers 0.4.0
``TransformerEncoder`` / ``RecurrentTransformerEncoder`` and their bare encoder layers, with causal
linear attention and the default feature map, convert; the state_dict names and shapes are the
originals'. Rejected with :class:`~rnnx.models.convert.ConversionError`: any other attention (full
softmax, non-causal linear, clustered, ...), a feature map other than the default elu + 1 (Favor,
random Fourier features, a user-given map), an event dispatcher with listeners (the rnnx module
dispatches no events), another fast-transformers version, and the decoder / cross-attention classes.
``fast_transformers`` is not imported by this module; converters import it only when given one of
its layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .convert import ROOT_PATH, Converter, carry_over, conversion_error, package_version, qualified_name
from .ops.causal_linear_attention import causal_linear_attention
from .ops.dtypes import state_dtype
from .state import LinearAttentionState

__all__ = [
    "CONVERTERS",
    "FAST_TRANSFORMERS_VERSION",
    "CausalLinearAttentionLayer",
    "LinearTransformerEncoder",
    "RecurrentLinearTransformerEncoder",
    "LinearTransformerEncoderLayer",
    "convert_encoder",
    "convert_encoder_layer",
]

#: the pytorch-fast-transformers release whose encoders convert
FAST_TRANSFORMERS_VERSION = "0.4.0"

#: default of fast-transformers' (and rnnx's) causal linear attention eps
DEFAULT_EPS = 1e-6

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}

Device = Union[str, torch.device, None]
#: One layer's state: rnnx's dataclass, or fast-transformers' ``[Si, Zi]`` list.
LayerState = Union[LinearAttentionState, list[Tensor]]

#: raises the ConversionError of the module being converted, with the given reason
Fail = Callable[[str], NoReturn]


class CausalLinearAttentionLayer(nn.Module):
    """Multi-head causal linear self-attention with fast-transformers' ``AttentionLayer`` parameters.

    ``query_projection`` / ``key_projection``: d_model -> n_heads * d_keys; ``value_projection``:
    d_model -> n_heads * d_values; ``out_projection``: n_heads * d_values -> d_model (all biased).
    d_keys and d_values default to d_model // n_heads.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_keys: Optional[int] = None,
        d_values: Optional[int] = None,
        eps: float = DEFAULT_EPS,
    ) -> None:
        super().__init__()
        d_keys = d_keys or d_model // n_heads
        d_values = d_values or d_model // n_heads
        self.n_heads, self.d_keys, self.d_values, self.eps = n_heads, d_keys, d_values, float(eps)
        self.query_projection = nn.Linear(d_model, d_keys * n_heads)
        self.key_projection = nn.Linear(d_model, d_keys * n_heads)
        self.value_projection = nn.Linear(d_model, d_values * n_heads)
        self.out_projection = nn.Linear(d_values * n_heads, d_model)

    def init_state(
        self, batch_size: int, device: Device = None, dtype: Optional[torch.dtype] = None
    ) -> LinearAttentionState:
        """Zeros: S (B, H, E, M) and z (B, H, E) in the state dtype of ``dtype`` (default: the weights')."""
        weight = self.query_projection.weight
        device = weight.device if device is None else device
        kept = state_dtype(weight.dtype if dtype is None else dtype)
        H, E, M = self.n_heads, self.d_keys, self.d_values
        return LinearAttentionState(
            S=torch.zeros(batch_size, H, E, M, device=device, dtype=kept),
            z=torch.zeros(batch_size, H, E, device=device, dtype=kept),
        )

    def forward(
        self, x: Tensor, state: LinearAttentionState, pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, LinearAttentionState]:
        """x (B, L, d_model), state, pad_mask (B, L) bool True = pad -> (B, L, d_model), new state."""
        q, k, v = self.query_projection(x), self.key_projection(x), self.value_projection(x)
        out, (S, z) = causal_linear_attention(
            q, k, v, state=(state.S, state.z), eps=self.eps, num_heads=self.n_heads, pad_mask=pad_mask
        )
        return self.out_projection(out), LinearAttentionState(S, z)

    def forward_rows(
        self, x: Tensor, batch: int, length: int, state: LinearAttentionState, pad_mask: Optional[Tensor]
    ) -> tuple[Tensor, LinearAttentionState]:
        """:meth:`forward` on x as rows, (B*L, d_model) -> (B*L, d_model): the export's form (see
        :meth:`LinearTransformerEncoder.forward_state`). One projection for q, k and v (the weights concatenate
        once), shaped (B, L, .) for the attention only."""
        projections = (self.query_projection, self.key_projection, self.value_projection)
        weight = torch.cat([p.weight for p in projections])
        bias = torch.cat([p.bias for p in projections])
        qkv = F.linear(x, weight, bias).view(batch, length, -1)
        q, k, v = qkv.split([p.out_features for p in projections], dim=-1)
        out, (S, z) = causal_linear_attention(
            q, k, v, state=(state.S, state.z), eps=self.eps, num_heads=self.n_heads, pad_mask=pad_mask
        )
        return self.out_projection(out.reshape(-1, out.shape[-1])), LinearAttentionState(S, z)


class LinearTransformerEncoderLayer(nn.Module):
    """Post-norm encoder layer with fast-transformers' ``TransformerEncoderLayer`` parameters.

    ``attention`` (:class:`CausalLinearAttentionLayer`), ``linear1`` (d_model -> d_ff), ``linear2``
    (d_ff -> d_model), ``norm1``, ``norm2`` (LayerNorm(d_model)) and one ``dropout`` used at all three
    places of the original. ``activation`` is "relu" or "gelu"; d_ff defaults to 4 * d_model.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_keys: Optional[int] = None,
        d_values: Optional[int] = None,
        d_ff: Optional[int] = None,
        dropout: float = 0.1,
        activation: str = "relu",
        eps: float = DEFAULT_EPS,
        layer_norm_eps: float = 1e-5,
    ) -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        d_ff = d_ff or 4 * d_model
        self.d_model, self.activation = d_model, activation
        self.attention = CausalLinearAttentionLayer(d_model, n_heads, d_keys, d_values, eps)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def init_state(
        self, batch_size: int, device: Device = None, dtype: Optional[torch.dtype] = None
    ) -> LinearAttentionState:
        """The attention's zero state (see :meth:`CausalLinearAttentionLayer.init_state`)."""
        return self.attention.init_state(batch_size, device, dtype)

    def forward(
        self, x: Tensor, state: Optional[LinearAttentionState] = None, pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, LinearAttentionState]:
        """x (B, L, d_model), state (None: zeros), pad_mask (B, L) bool True = pad -> (y, new state)."""
        _check_sequence(x, self.d_model, pad_mask)
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        a, state = self.attention(x, state, None if pad_mask is None else pad_mask.to(torch.bool))
        return self._feed_forward(x, a), state

    def forward_rows(
        self, x: Tensor, batch: int, length: int, state: LinearAttentionState, pad_mask: Optional[Tensor]
    ) -> tuple[Tensor, LinearAttentionState]:
        """:meth:`forward` on x as rows, (B*L, d_model), and a given state: the export's form."""
        a, state = self.attention.forward_rows(x, batch, length, state, pad_mask)
        return self._feed_forward(x, a), state

    def _feed_forward(self, x: Tensor, a: Tensor) -> Tensor:
        """The residual sums, norms and feed-forward after the attention's output ``a`` (x's shape)."""
        x = self.norm1(x + self.dropout(a))
        y = self.dropout(self.linear2(self.dropout(_ACTIVATIONS[self.activation](self.linear1(x)))))
        return self.norm2(x + y)


class LinearTransformerEncoder(nn.Module):
    """A stack of :class:`LinearTransformerEncoderLayer` and an optional final LayerNorm ``norm``.

    Parameter names and shapes are those of fast-transformers' ``TransformerEncoder`` /
    ``RecurrentTransformerEncoder`` (``layers.<i>.attention.query_projection.weight``, ...,
    ``norm.weight``), so ``load_state_dict(original.state_dict())`` works.

    ``forward(x (B, L, d_model), attn_mask=None, length_mask=None) -> y``: the call of fast-transformers'
    ``TransformerEncoder`` (``attn_mask`` None or a lower-triangular mask such as ``TriangularCausalMask``:
    the attention is causal; ``length_mask`` a ``LengthMask`` marking each row's real positions).

    ``forward_state(x (B, L, d_model), state, pad_mask (B, L)) -> (y (B, L, d_model), new_state)``: the
    state is a list with one :class:`~rnnx.models.state.LinearAttentionState` (S (B, H, E, M), z (B, H, E),
    fp32; fp64 for an fp64 model) per layer. A prefill over n tokens followed by calls with L = 1
    gives the outputs and state of one call over all the tokens. Pad positions (True in
    ``pad_mask``) leave the state unchanged; their outputs are computed but meaningless.
    """

    def __init__(self, layers: Sequence[LinearTransformerEncoderLayer], norm: Optional[nn.Module] = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        if not len(self.layers):
            raise ValueError("a LinearTransformerEncoder needs at least one layer")
        self.d_model = self.layers[0].d_model
        self.norm = norm

    @classmethod
    def from_config(
        cls,
        n_layers: int = 4,
        n_heads: int = 4,
        query_dimensions: int = 64,
        value_dimensions: int = 64,
        feed_forward_dimensions: int = 1024,
        dropout: float = 0.1,
        activation: str = "relu",
        final_normalization: bool = True,
        eps: float = DEFAULT_EPS,
    ) -> LinearTransformerEncoder:
        """The encoder ``TransformerEncoderBuilder.from_kwargs`` builds with the same keywords (and its
        defaults) and ``attention_type="causal-linear"``: d_model = value_dimensions * n_heads."""
        d_model = value_dimensions * n_heads
        layers = [
            LinearTransformerEncoderLayer(
                d_model, n_heads, query_dimensions, value_dimensions, feed_forward_dimensions, dropout, activation, eps
            )
            for _ in range(n_layers)
        ]
        return cls(layers, nn.LayerNorm(d_model) if final_normalization else None)

    def init_state(
        self, batch_size: int, device: Device = None, dtype: Optional[torch.dtype] = None
    ) -> list[LinearAttentionState]:
        """Zero state, one ``LinearAttentionState`` per layer, for activations of ``dtype`` (default: the
        weights' dtype) on ``device`` (default: the weights' device)."""
        return [layer.init_state(batch_size, device, dtype) for layer in self.layers]

    def forward(self, x: Tensor, attn_mask: Optional[object] = None, length_mask: Optional[object] = None) -> Tensor:
        """fast-transformers' ``TransformerEncoder.forward``: x (B, L, d_model) from a zero state -> y.

        ``attn_mask``: None or a mask whose ``lower_triangular`` is True (anything else is what causal
        linear attention cannot compute: ValueError, as the original raises); ``length_mask``: None or
        a ``LengthMask`` (its ``bool_matrix`` (B, L) is True at real positions)."""
        if attn_mask is not None and not getattr(attn_mask, "lower_triangular", False):
            raise ValueError("causal linear attention only supports a full lower-triangular attn_mask (or None)")
        # Always the boolean matrix, never a branch on ``length_mask.all_ones`` (a value computed from the
        # lengths: it would stop torch.export); a full mask costs one elementwise op.
        pad_mask = None if length_mask is None else ~length_mask.bool_matrix.to(x.device)
        return self.forward_state(x, None, pad_mask)[0]

    def forward_state(
        self, x: Tensor, state: Optional[Sequence[LayerState]] = None, pad_mask: Optional[Tensor] = None
    ) -> tuple[Tensor, list[LayerState]]:
        """x (B, L, d_model), state (None: zeros), pad_mask (B, L) bool True = pad -> (y, new state).

        A layer's state is a :class:`~rnnx.models.state.LinearAttentionState` or fast-transformers' own
        ``[Si (B, H, E, M), Zi (B, H, E)]``; the new state comes back in the form given (None: the
        ``LinearAttentionState`` form)."""
        return self._run(x, state, pad_mask, pairs=False)

    def _run(
        self, x: Tensor, state: Optional[Sequence[LayerState]], pad_mask: Optional[Tensor], pairs: bool
    ) -> tuple[Tensor, list[LayerState]]:
        """:meth:`forward_state`; ``pairs``: the form of the new state when ``state`` is None."""
        _check_sequence(x, self.d_model, pad_mask)
        if state is None:
            layer_states = self.init_state(x.shape[0], x.device, x.dtype)
        else:
            if len(state) != len(self.layers):
                raise ValueError(f"state has {len(state)} layers, the encoder {len(self.layers)}")
            layer_states = [_layer_state(s, i) for i, s in enumerate(state)]
            pairs = not isinstance(state[0], LinearAttentionState)
        pad = None if pad_mask is None else pad_mask.to(torch.bool)
        new_state: list[LayerState] = []
        # An export runs the layers on rows, (B*L, d_model): every projection is then a 2-D MatMul that ONNX Runtime
        # fuses with its bias (and the feed-forward's ReLU) into one Gemm, the residual norms work on any rank, and
        # only the attention sees (B, L, .).
        rows = torch.compiler.is_exporting()
        batch, length = x.shape[0], x.shape[1]
        if rows:
            x = x.reshape(-1, self.d_model)
        for layer, layer_state in zip(self.layers, layer_states):
            if rows:
                x, layer_state = layer.forward_rows(x, batch, length, layer_state, pad)
            else:
                x, layer_state = layer(x, layer_state, pad)
            new_state.append([layer_state.S, layer_state.z] if pairs else layer_state)
        if self.norm is not None:
            x = self.norm(x)
        return (x.view(batch, length, -1) if rows else x), new_state


class RecurrentLinearTransformerEncoder(LinearTransformerEncoder):
    """The twin of fast-transformers' ``RecurrentTransformerEncoder``: same layers and weights as
    :class:`LinearTransformerEncoder`; ``forward(x, state=None) -> (y, new_state)`` takes one step
    x (B, d_model) -> y (B, d_model) like the original, or a sequence x (B, L, d_model). The state is
    fast-transformers' list of ``[Si, Zi]`` per layer (what the original returns, also for ``state=None``)
    or a list of :class:`~rnnx.models.state.LinearAttentionState`; it comes back in the form given."""

    def forward(  # type: ignore[override]
        self, x: Tensor, state: Optional[Sequence[LayerState]] = None
    ) -> tuple[Tensor, list[LayerState]]:
        if x.dim() == 2:
            y, new_state = self._run(x.unsqueeze(1), state, None, pairs=True)
            return y.squeeze(1), new_state
        return self._run(x, state, None, pairs=True)


def _layer_state(state: object, index: int) -> LinearAttentionState:
    """One layer's state as a LinearAttentionState: one already, or fast-transformers' ``[Si, Zi]``."""
    if isinstance(state, LinearAttentionState):
        return state
    if isinstance(state, (list, tuple)) and len(state) == 2 and all(isinstance(t, Tensor) for t in state):
        return LinearAttentionState(S=state[0], z=state[1])
    got = type(state).__name__ if not isinstance(state, (list, tuple)) else f"a {type(state).__name__} of {len(state)}"
    raise ValueError(
        f"state[{index}]: expected fast-transformers' [Si (B, H, E, M), Zi (B, H, E)] or a LinearAttentionState, "
        f"got {got}"
    )


def _check_sequence(x: Tensor, d_model: int, pad_mask: Optional[Tensor]) -> None:
    """ValueError unless x is (B, L, d_model) and pad_mask None or (B, L)."""
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (B, L, {d_model}), got {tuple(x.shape)}")
    if pad_mask is not None and tuple(pad_mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"pad_mask must have shape (B, L) = {tuple(x.shape[:2])}, got {tuple(pad_mask.shape)}")


_FT = "fast_transformers"
_ENCODER = f"{_FT}.transformers.TransformerEncoder"
_ENCODER_LAYER = f"{_FT}.transformers.TransformerEncoderLayer"
_RECURRENT_ENCODER = f"{_FT}.recurrent.transformers.RecurrentTransformerEncoder"
_RECURRENT_ENCODER_LAYER = f"{_FT}.recurrent.transformers.RecurrentTransformerEncoderLayer"
_ATTENTION_LAYER = f"{_FT}.attention.attention_layer.AttentionLayer"
_RECURRENT_ATTENTION_LAYER = f"{_FT}.recurrent.attention.self_attention.attention_layer.RecurrentAttentionLayer"
_CAUSAL_LINEAR = f"{_FT}.attention.causal_linear_attention.CausalLinearAttention"
_RECURRENT_LINEAR = f"{_FT}.recurrent.attention.self_attention.linear_attention.RecurrentLinearAttention"

#: encoder class -> (its layer class, the layer's attention layer class, the inner attention class)
_FAMILIES = {
    _ENCODER: (_ENCODER_LAYER, _ATTENTION_LAYER, _CAUSAL_LINEAR),
    _RECURRENT_ENCODER: (_RECURRENT_ENCODER_LAYER, _RECURRENT_ATTENTION_LAYER, _RECURRENT_LINEAR),
}
_LAYER_FAMILIES = {layer: (attention, inner) for layer, attention, inner in _FAMILIES.values()}

#: why an attention other than causal linear is rejected, by the last part of its class name
_ATTENTION_REASONS = {
    "FullAttention": "softmax attention (attention_type='full') has no fixed-size recurrent state",
    "LinearAttention": "non-causal linear attention (attention_type='linear') lets every position see the "
    "whole sequence; only attention_type='causal-linear' can run as a recurrence",
    "RecurrentFullAttention": "recurrent softmax attention keeps a growing key/value cache, not a fixed state",
}


def _describe(module: nn.Module) -> str:
    """``"fast_transformers.transformers.TransformerEncoder (fast-transformers 0.4.0)"``."""
    return f"{qualified_name(type(module))} (fast-transformers {package_version(module) or 'version unknown'})"


def _check_dispatcher(module: nn.Module, sub: str, fail: Fail) -> None:
    """Fails when ``module``'s event dispatcher has listeners (or is not an ``EventDispatcher``).

    The test is on listeners, not identity: :func:`rnnx.models.convert` works on a deep copy, in which
    even the default global dispatcher is a copy (with copies of its listeners).
    """
    from fast_transformers.events import EventDispatcher

    dispatcher = getattr(module, "event_dispatcher", None)
    sub = _child_rel(sub, "event_dispatcher")
    if dispatcher is None:
        return
    if not isinstance(dispatcher, EventDispatcher):
        fail(f"{sub} is {type(dispatcher).__name__}, not a fast_transformers EventDispatcher")
    if getattr(dispatcher, "_listeners", None):
        fail(
            f"{sub} has listeners; the rnnx encoder dispatches no events (QKVEvent etc.), "
            "so they would silently stop being called"
        )


def _check_feature_map(inner: nn.Module, sub: str, fail: Fail) -> None:
    """Fails unless the attention's feature map is fast-transformers' default elu(x) + 1."""
    from fast_transformers.feature_maps.base import ActivationFunctionFeatureMap, elu_feature_map

    feature_map = getattr(inner, "feature_map", None)
    default = elu_feature_map(1).activation_function
    if type(feature_map) is not ActivationFunctionFeatureMap or feature_map.activation_function is not default:
        fail(
            f"{sub}.feature_map is {type(feature_map).__name__}, not the default elu(x) + 1 feature map; "
            "rnnx::causal_linear_attention applies phi = elu + 1 only"
        )


def _layer_norm(module: object, sub: str, fail: Fail) -> nn.LayerNorm:
    """An ``nn.LayerNorm`` configured like ``module`` (weights are loaded later); fails for other norms."""
    if type(module) is not nn.LayerNorm:
        fail(f"{sub} is {type(module).__name__}, not torch.nn.LayerNorm")
    return nn.LayerNorm(
        module.normalized_shape,
        eps=module.eps,
        elementwise_affine=module.elementwise_affine,
        bias=module.bias is not None,
    )


def _linear(module: object, sub: str, fail: Fail) -> nn.Linear:
    """``module`` checked to be a biased ``nn.Linear``."""
    if type(module) is not nn.Linear or module.bias is None:
        fail(f"{sub} is not a biased torch.nn.Linear (got {type(module).__name__})")
    return module


def _twin_layer(layer: nn.Module, sub: str, expected: tuple[str, str], fail: Fail) -> LinearTransformerEncoderLayer:
    """The :class:`LinearTransformerEncoderLayer` configured like the fast-transformers encoder layer
    ``layer`` (whose full dotted path is ``sub``, "" for the root), weights not loaded yet."""
    attention_class, inner_class = expected
    _check_dispatcher(layer, sub, fail)
    attention = getattr(layer, "attention", None)
    attention_sub = _child_rel(sub, "attention")
    if attention is None or qualified_name(type(attention)) != attention_class:
        fail(f"{attention_sub} is {type(attention).__name__}, not the self-attention layer {attention_class}")
    _check_dispatcher(attention, attention_sub, fail)
    inner = attention.inner_attention
    inner_sub = _child_rel(attention_sub, "inner_attention")
    inner_name = qualified_name(type(inner))
    if inner_name != inner_class:
        short = type(inner).__qualname__
        reason = _ATTENTION_REASONS.get(short, f"only causal linear attention ({inner_class}) converts")
        fail(f"{inner_sub} is {inner_name}: {reason}")
    _check_dispatcher(inner, inner_sub, fail)
    _check_feature_map(inner, inner_sub, fail)

    n_heads = int(attention.n_heads)
    q = _linear(attention.query_projection, _child_rel(attention_sub, "query_projection"), fail)
    k = _linear(attention.key_projection, _child_rel(attention_sub, "key_projection"), fail)
    v = _linear(attention.value_projection, _child_rel(attention_sub, "value_projection"), fail)
    o = _linear(attention.out_projection, _child_rel(attention_sub, "out_projection"), fail)
    linear1 = _linear(layer.linear1, _child_rel(sub, "linear1"), fail)
    _linear(layer.linear2, _child_rel(sub, "linear2"), fail)
    d_model = q.in_features
    if q.out_features % n_heads or v.out_features % n_heads:
        fail(
            f"{attention_sub} projects to {q.out_features} / {v.out_features} features, "
            f"not a multiple of its {n_heads} heads"
        )
    if k.out_features != q.out_features or o.in_features != v.out_features or o.out_features != d_model:
        fail(f"{attention_sub} has inconsistent projection sizes")

    activation = next((name for name, fn in _ACTIVATIONS.items() if layer.activation is fn), None)
    if activation is None:
        fail(f"{_child_rel(sub, 'activation')} is {layer.activation!r}, not torch.nn.functional.relu or gelu")
    if type(layer.dropout) is not nn.Dropout:
        fail(f"{_child_rel(sub, 'dropout')} is {type(layer.dropout).__name__}, not torch.nn.Dropout")

    twin = LinearTransformerEncoderLayer(
        d_model,
        n_heads,
        d_keys=q.out_features // n_heads,
        d_values=v.out_features // n_heads,
        d_ff=linear1.out_features,
        dropout=layer.dropout.p,
        activation=activation,
        eps=float(inner.eps),
    )
    twin.norm1 = _layer_norm(layer.norm1, _child_rel(sub, "norm1"), fail)
    twin.norm2 = _layer_norm(layer.norm2, _child_rel(sub, "norm2"), fail)
    return twin


def _child_rel(sub: str, name: str) -> str:
    """``sub.name``, or ``name`` when ``sub`` is empty (the root module)."""
    return f"{sub}.{name}" if sub else name


def _prefix(path: str) -> str:
    """The dotted path of the converted module as a prefix for its submodules' ("" for the root)."""
    return "" if path == ROOT_PATH else path


def _failer(module: nn.Module, path: str) -> Fail:
    """``fail(reason)``: raises the one-line ConversionError for ``module`` at ``path``."""

    def fail(reason: str) -> None:
        raise conversion_error(path, _describe(module), reason)

    return fail


def _require_version(module: nn.Module, fail: Fail) -> None:
    version = package_version(module)
    if version != FAST_TRANSFORMERS_VERSION:
        fail(
            f"it comes from fast-transformers {version or '(version unknown)'}; "
            f"rnnx.models.fast_transformers converts release {FAST_TRANSFORMERS_VERSION} only"
        )


def convert_encoder(encoder: nn.Module, path: str) -> LinearTransformerEncoder:
    """fast-transformers 0.4.0 ``TransformerEncoder`` / ``RecurrentTransformerEncoder`` with causal linear
    attention -> :class:`LinearTransformerEncoder` holding its weights (same tensors, hence device and
    dtype), requires_grad and train/eval modes. Raises ConversionError naming ``path`` otherwise."""
    fail = _failer(encoder, path)
    _require_version(encoder, fail)
    family = _FAMILIES.get(qualified_name(type(encoder)))
    if family is None:
        fail("it is not a fast-transformers encoder")
    layer_class, attention_class, inner_class = family
    prefix = _prefix(path)
    _check_dispatcher(encoder, prefix, fail)
    layers = []
    for i, layer in enumerate(encoder.layers):
        sub = _child_rel(prefix, f"layers.{i}")
        if qualified_name(type(layer)) != layer_class:
            fail(f"{sub} is {qualified_name(type(layer))}, not {layer_class}")
        layers.append(_twin_layer(layer, sub, (attention_class, inner_class), fail))
    if not layers:
        fail("it has no layers")
    norm = None if encoder.norm is None else _layer_norm(encoder.norm, _child_rel(prefix, "norm"), fail)
    twin = RecurrentLinearTransformerEncoder if qualified_name(type(encoder)) == _RECURRENT_ENCODER else (
        LinearTransformerEncoder)  # fmt: skip
    return carry_over(encoder, twin(layers, norm), path)


def convert_encoder_layer(layer: nn.Module, path: str) -> LinearTransformerEncoderLayer:
    """A bare fast-transformers 0.4.0 ``TransformerEncoderLayer`` / ``RecurrentTransformerEncoderLayer``
    with causal linear attention -> :class:`LinearTransformerEncoderLayer` (weights and modes carried
    over). Raises ConversionError naming ``path`` otherwise."""
    fail = _failer(layer, path)
    _require_version(layer, fail)
    expected = _LAYER_FAMILIES.get(qualified_name(type(layer)))
    if expected is None:
        fail("it is not a fast-transformers encoder layer")
    return carry_over(layer, _twin_layer(layer, _prefix(path), expected, fail), path)


def _reject(reason: str) -> Converter:
    """A converter that always raises ConversionError with ``reason`` (for classes with no rnnx twin)."""

    def converter(module: nn.Module, path: str) -> nn.Module:
        raise conversion_error(path, _describe(module), reason)

    return converter


_DECODER_REASON = (
    "decoders (cross-attention to a memory) have no rnnx twin; only encoders with causal linear self-attention convert"
)
_BARE_ATTENTION_REASON = (
    "a bare attention layer takes separate queries/keys/values and has no rnnx twin; convert the "
    "TransformerEncoder / RecurrentTransformerEncoder that holds it"
)

#: qualified name of the fast-transformers class -> converter (see rnnx.models.convert)
CONVERTERS: dict[str, Converter] = {
    _ENCODER: convert_encoder,
    _RECURRENT_ENCODER: convert_encoder,
    _ENCODER_LAYER: convert_encoder_layer,
    _RECURRENT_ENCODER_LAYER: convert_encoder_layer,
    f"{_FT}.transformers.TransformerDecoder": _reject(_DECODER_REASON),
    f"{_FT}.transformers.TransformerDecoderLayer": _reject(_DECODER_REASON),
    f"{_FT}.recurrent.transformers.RecurrentTransformerDecoder": _reject(_DECODER_REASON),
    f"{_FT}.recurrent.transformers.RecurrentTransformerDecoderLayer": _reject(_DECODER_REASON),
    _ATTENTION_LAYER: _reject(_BARE_ATTENTION_REASON),
    _RECURRENT_ATTENTION_LAYER: _reject(_BARE_ATTENTION_REASON),
    f"{_FT}.recurrent.attention.cross_attention.attention_layer.RecurrentCrossAttentionLayer": _reject(_DECODER_REASON),
}
