"""SRU (Simple Recurrent Unit) layers, a drop-in for ``sru.SRU`` / ``sru.SRUCell`` of the published
``sru`` package (asappresearch), both of release 2.6.0 and of release 3.0.0.dev6.

The two releases spell some constructor arguments differently and lay out the projection differently
(docs/models.md has the full table):

- **sru 2.6** (``custom_m``, ``n_proj``): the projection is the layer's own parameters ``weight`` /
  ``weight_proj``; a custom module computing U is ``custom_m``.
- **sru 3.0** (``transform_module``, ``projection_size``, per-layer projection sizes): U comes from the
  layer's ``transform_module``, by default ``nn.Linear(in, out*k, bias=False)``, or
  ``nn.Sequential(nn.Linear(in, p), nn.Linear(p, out*k))`` when projected (both bias-free).

Both spellings are accepted. Which release a layer follows (its ``sru_version``, "2.6" or "3.0") decides
the layout of the built-in projection, the initialisation recipe and the defaults the two releases
disagree on; it is the ``sru_version`` argument, else read from the spelling (a 3.0-only name, or an
``SRU`` ``projection_size`` without a 2.6-only name: 3.0; a 2.6-only name or none: 2.6, rnnx's
historical default). State dicts
of either release load into a layer of either layout (the keys are translated on load, see
:meth:`SRUCell._load_from_state_dict`), and the same seed gives the release's initial weights.

Layouts, per layer with ``D`` directions, hidden size ``d`` per direction, output size
``out = D*d`` and ``k`` projections (3: x~, f, r; 4 adds the highway projection x' when the layer's
input size differs from ``out`` and there is a skip term):

- ``weight``      (in, out*k), or (projection_size, out*k) with ``weight_proj`` (in, projection_size)
  (sru 2.6 layout); ``transform_module.weight`` (out*k, in), or ``transform_module.{0,1}.weight``
  (p, in) and (out*k, p) (sru 3.0 layout). U's columns are viewed as (D, d, k): the k columns of one
  (direction, unit) interleave.
- ``weight_c``    (2*out,)  ``[v_f (D, d); v_r (D, d)]``
- ``bias``        (2*out,)  ``[b_f (D, d); b_r (D, d)]``
- ``scale_x``     buffer (1,), the highway rescaling constant (used when ``rescale`` is on).
- ``layer_norm``  ``nn.LayerNorm`` over the layer input (pre-norm) or the output (``normalize_after``).

The skip input x' of a k = 3 layer is the layer input *before* its layer norm (the residual). The
elementwise recurrence goes through :func:`rnnx.models.ops.sru_scan.sru_scan` (the ``SRUScan`` op of
docs/ops.md); a user's transform module is ordinary torch code in front of it.

``SRU`` and ``SRUCell`` script with ``torch.jit.script`` as sru's modules do (this file therefore keeps
real annotations, no ``from __future__ import annotations``): under TorchScript the scan is the op
``torch.ops.rnnx.sru_scan`` itself, ``scale_x`` is read from its buffer, and a PackedSequence input is
eager-only (as in sru, whose scripted ``forward`` takes a tensor). A transform module must then be
scriptable too.
"""

import copy
import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from .ops.dtypes import state_dtype
from .ops.sru_scan import sru_scan
from .state import SRUState
from .zero_states import zero_state

__all__ = ["SRU", "SRUCell", "SRU_VERSIONS", "ScaleXMixin", "dims_text", "highway_dropout", "shape_text"]

#: the sru releases whose constructors rnnx follows: "2.6" (2.6.0) and "3.0" (3.0.0.dev6)
SRU_VERSIONS = ("2.6", "3.0")


def dims_text(dims: list[int]) -> str:
    """``(a, b, c)``: a shape in error messages, the same in eager and TorchScript code."""
    return "(" + ", ".join([str(d) for d in dims]) + ")"


def shape_text(t: Tensor) -> str:
    """:func:`dims_text` of a tensor's shape."""
    return dims_text(list(t.shape))


def dropout_mask(like: Tensor, size: tuple[int, int], p: float) -> Tensor:
    """Inverted-dropout mask of ``size`` in ``like``'s dtype/device, drawn as sru draws it."""
    return like.new_empty(size).bernoulli_(1 - p).div_(1 - p)


def highway_dropout(h: Tensor, skip: Optional[Tensor], mask_c: Tensor, mask_pad: Optional[Tensor]) -> Tensor:
    """sru's dropout on the recurrent part of h: from the scan's h_t = x'_t + r_t (g(c_t) - x'_t),
    h_t = x'_t + mask_c r_t (g(c_t) - x'_t) (h * mask_c without a skip term); pad steps stay 0.

    h (L, B, out); skip x' (L, B, out) already scaled, or None; mask_c (B, out); mask_pad (L, B).
    """
    if skip is None:
        return h * mask_c
    h = skip + mask_c * (h - skip)
    if mask_pad is not None:
        h = h.masked_fill((mask_pad != 0).unsqueeze(-1), 0.0)
    return h


def pick_alias(owner: str, old_name: str, old: Any, new_name: str, new: Any) -> Any:
    """The value of the argument sru 2.6 calls ``old_name`` and sru 3.0 ``new_name`` (None when neither
    was given). Raises TypeError naming both when both were given."""
    if old is not None and new is not None:
        raise TypeError(
            f"{owner} got both {old_name} (sru 2.6's name) and {new_name} (sru 3.0's name) for the same "
            "argument; pass one of them"
        )
    return old if new is None else new


def resolve_sru_version(owner: str, sru_version: Optional[str], names_26: list[str], names_30: list[str]) -> str:
    """The release a layer follows: ``sru_version`` when given, else "3.0" when any sru-3.0-only argument
    (``names_30``) was given, else "2.6". TypeError when the spelling names both releases."""
    if sru_version is not None:
        if sru_version not in SRU_VERSIONS:
            raise ValueError(f"{owner}: sru_version must be one of {SRU_VERSIONS}, got {sru_version!r}")
        return sru_version
    if names_26 and names_30:
        raise TypeError(
            f"{owner} got sru 2.6 argument(s) {', '.join(names_26)} and sru 3.0 argument(s) {', '.join(names_30)}; "
            "pass sru_version='2.6' or '3.0' to say whose defaults and parameter layout apply"
        )
    return "3.0" if names_30 else "2.6"


def default_transform(input_size: int, projection_size: int, out_features: int) -> nn.Module:
    """sru 3.0's built-in transform: ``nn.Linear(in, out)``, or ``nn.Sequential(nn.Linear(in, p),
    nn.Linear(p, out))`` for ``projection_size`` p > 0, all bias-free. Maps (L, B, in) -> (L, B, out)."""
    if projection_size == 0:
        return nn.Linear(input_size, out_features, bias=False)
    return nn.Sequential(
        nn.Linear(input_size, projection_size, bias=False), nn.Linear(projection_size, out_features, bias=False)
    )


def linear_layout(module: Optional[nn.Module]) -> int:
    """1 for a bias-free ``nn.Linear``, 2 for an ``nn.Sequential`` of two bias-free ``nn.Linear`` (the
    layouts of :func:`default_transform`), else 0."""
    if type(module) is nn.Linear and module.bias is None:
        return 1
    if type(module) is nn.Sequential and len(module) == 2 and all(linear_layout(m) == 1 for m in module):
        return 2
    return 0


def reset_transform_parameters(module: nn.Module, sru_version: str) -> None:
    """Re-initialises a transform module as the sru release does: sru 3.0 gives an ``nn.Linear``
    Xavier-uniform weights (zero bias) and recurses into an ``nn.Sequential``; otherwise (and in sru 2.6)
    the module's own ``reset_parameters()``. A module with parameters but without one keeps its values,
    with a warning."""
    if sru_version == "3.0" and isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif hasattr(module, "reset_parameters"):
        module.reset_parameters()
    elif sru_version == "3.0" and isinstance(module, nn.Sequential):
        for child in module:
            reset_transform_parameters(child, sru_version)
    elif next(module.parameters(), None) is not None:
        warnings.warn(
            f"transform module {type(module).__name__} has no reset_parameters(); its parameters keep their values",
            stacklevel=3,
        )


class ScaleXMixin(nn.Module):
    """Keeps the ``scale_x`` buffer's value as a Python float, the ``scale_x`` attribute of the scan.

    Read once at init and on every ``load_state_dict`` rather than per forward: reading a tensor's
    value would synchronise a GPU on every step, and export takes the attribute as a constant.
    """

    __jit_unused_properties__ = ["highway_scale"]
    scale_x: Tensor
    rescale: bool
    _scale_value: float = 1.0

    @property
    def highway_scale(self) -> float:
        """x' = highway_scale * x for a k = 3 layer: ``scale_x`` when ``rescale`` is on, else 1."""
        return self._scale_value if self.rescale else 1.0

    def _scan_scale(self) -> float:
        """:attr:`highway_scale`; under TorchScript read from the ``scale_x`` buffer, which a scripted
        module's ``load_state_dict`` updates (the Python float is fixed when the module is scripted). That read
        is one scalar per layer and call (a device sync on CUDA), and after ``.half()`` the buffer's value is
        rounded to fp16 where eager keeps the fp32 value."""
        if torch.jit.is_scripting():
            return float(self.scale_x[0]) if self.rescale else 1.0
        return self.highway_scale

    def _refresh_scale_value(self) -> None:
        self._scale_value = float(self.scale_x.detach().reshape(-1)[0].item())

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        """Loads as nn.Module does, then re-reads ``scale_x`` into the Python float the scan gets."""
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._refresh_scale_value()


class SRUCell(ScaleXMixin):
    """One SRU layer (one or two directions), the counterpart of ``sru.SRUCell`` 2.6.0 and 3.0.0.dev6.

    ``forward(input (L, B, in) or (B, in), c0 (B, out) = None, mask_pad (L, B) = None)``
    returns ``h`` (L, B, out) (or (B, out) for a 2-D input) and the last cell state ``c`` (B, out).

    U (L, B, out*k) comes from the layer's ``transform_module`` when it has one (sru 3.0's built-in
    ``nn.Linear`` / ``nn.Sequential``, or a user's module: ``custom_m`` in sru 2.6), else from sru 2.6's
    ``weight`` / ``weight_proj`` parameters. ``custom_m`` is another name of ``transform_module``.
    """

    __jit_unused_properties__ = ["highway_scale", "custom_m"]
    scale_x: Tensor
    weight: Optional[Tensor]
    weight_proj: Optional[Tensor]

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        dropout: float = 0.0,
        rnn_dropout: float = 0.0,
        bidirectional: bool = False,
        n_proj: Optional[int] = None,
        use_tanh: bool = False,
        highway_bias: float = 0.0,
        has_skip_term: bool = True,
        layer_norm: bool = False,
        rescale: Optional[bool] = None,
        v1: bool = False,
        custom_m: Optional[nn.Module] = None,
        amp_recurrence_fp16: Optional[bool] = None,
        normalize_after: Optional[bool] = None,
        weight_c_init: Optional[float] = None,
        *,
        projection_size: Optional[int] = None,
        transform_module: Optional[nn.Module] = None,
        sru_version: Optional[str] = None,
    ) -> None:
        """Arguments of ``sru.SRUCell`` 2.6.0, in its positional order, and of 3.0.0.dev6 (its names that
        2.6 lacks are keyword-only here).

        ``n_proj`` / ``projection_size`` and ``custom_m`` / ``transform_module`` are the 2.6 / 3.0 names
        of one argument each (TypeError when both are given). ``transform_module``: any module mapping
        the (pre-normed) input (L, B, in) to U (L, B, out*k), used as is (not copied); it must return one
        tensor (sru's optional second output V is not supported). ``sru_version``: "2.6" or "3.0", else
        "3.0" when ``projection_size`` or ``transform_module`` is given, otherwise "2.6". Arguments left
        as None take that release's default: ``rescale`` True (2.6) / False (3.0), ``normalize_after``
        False / True, ``amp_recurrence_fp16`` False / True (accepted and ignored: the recurrence runs in
        fp32), ``weight_c_init`` sru 2.6's recipe / 1.0. With sru 2.6, a projection size that is not
        below both the input and the output size is dropped (no projection), as 2.6 does.
        """
        super().__init__()
        owner = type(self).__name__
        given_26 = [name for name, value in (("n_proj", n_proj), ("custom_m", custom_m)) if value is not None]
        given_30 = [
            name
            for name, value in (("projection_size", projection_size), ("transform_module", transform_module))
            if value is not None
        ]
        proj = pick_alias(owner, "n_proj", n_proj, "projection_size", projection_size)
        transform = pick_alias(owner, "custom_m", custom_m, "transform_module", transform_module)
        version = resolve_sru_version(owner, sru_version, given_26, given_30)
        if transform is not None and not isinstance(transform, nn.Module):
            raise TypeError(f"{owner}: transform_module must be an nn.Module, got {type(transform).__name__}")
        if input_size <= 0 or hidden_size <= 0:
            raise ValueError(f"input_size and hidden_size must be positive, got {input_size}, {hidden_size}")
        if not 0.0 <= dropout < 1.0 or not 0.0 <= rnn_dropout < 1.0:
            raise ValueError(f"dropout and rnn_dropout must be in [0, 1), got {dropout}, {rnn_dropout}")
        is_30 = version == "3.0"
        self.sru_version = version
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.num_directions
        self.dropout = float(dropout)
        self.rnn_dropout = float(rnn_dropout)
        self.bidirectional = bidirectional
        self.has_skip_term = has_skip_term
        self.highway_bias = highway_bias
        self.v1 = v1
        self.rescale = (not is_30) if rescale is None else rescale
        self.use_tanh = use_tanh
        self.activation_type = 1 if use_tanh else 0
        self.activation = "tanh" if use_tanh else "none"
        self.amp_recurrence_fp16 = is_30 if amp_recurrence_fp16 is None else amp_recurrence_fp16
        self.normalize_after = is_30 if normalize_after is None else normalize_after
        self.weight_c_init = 1.0 if weight_c_init is None and is_30 else weight_c_init

        proj = 0 if proj is None else int(proj)
        if is_30:
            self.projection_size = proj
        else:
            self.projection_size = proj if 0 < proj < min(input_size, self.output_size) else 0
        self.num_matrices = 4 if has_skip_term and input_size != self.output_size else 3

        k, out = self.num_matrices, self.output_size
        if transform is None and is_30:
            transform = default_transform(input_size, self.projection_size, out * k)
        self.transform_module = transform
        if transform is not None:
            self.weight = None
            self.weight_proj = None
        elif self.projection_size == 0:
            self.weight_proj = None
            self.weight = nn.Parameter(torch.empty(input_size, out * k))
        else:
            self.weight_proj = nn.Parameter(torch.empty(input_size, self.projection_size))
            self.weight = nn.Parameter(torch.empty(self.projection_size, out * k))
        self.weight_c = nn.Parameter(torch.empty(2 * out))
        self.bias = nn.Parameter(torch.empty(2 * out))
        self.register_buffer("scale_x", torch.zeros(1))

        self.layer_norm = nn.LayerNorm(out if self.normalize_after else input_size) if layer_norm else None
        self.reset_parameters()

    @property
    def custom_m(self) -> Optional[nn.Module]:
        """sru 2.6's name of :attr:`transform_module` (None for sru 2.6's built-in ``weight``)."""
        return self.transform_module

    def reset_parameters(self) -> None:
        """The release's recipe, drawing random numbers in the same order (same seed, same weights).

        Both: bias = [0 (forget); highway_bias (reset)]; scale_x = sqrt(1 + 2 e^hb) when rescale and
        has_skip_term, else 1; weight_c ~ U(+-weight_c_init), or with sru 2.6's default U(+-sqrt(3/2))
        (variance 1/2); zero and frozen with v1.

        sru 2.6 built-in weights: weight ~ U(+-sqrt(3/rows)) (variance 1/rows); x~ columns
        * sqrt(1-dropout) when dropout > 0; all * sqrt(1-rnn_dropout) when rnn_dropout > 0; all * 0.1 with
        layer norm; x' columns * scale_x when k = 4 and rescale; f, r columns * sqrt(1/2) unless v1;
        weight_proj ~ U(+-sqrt(3/in)). A transform module: :func:`reset_transform_parameters` (sru 3.0's
        ``nn.Linear`` layers get Xavier-uniform weights).
        """
        out, d, k = self.output_size, self.hidden_size, self.num_matrices
        with torch.no_grad():
            self.bias.zero_()
            self.bias[out:].fill_(self.highway_bias)
            scale_val = (1 + math.exp(self.highway_bias) * 2) ** 0.5
            self.scale_x.fill_(scale_val if self.rescale and self.has_skip_term else 1.0)
            self._refresh_scale_value()

            w: Optional[Tensor] = None
            if self.transform_module is not None:
                reset_transform_parameters(self.transform_module, self.sru_version)
            else:
                rows = self.weight.size(0)
                bound = (3.0 / rows) ** 0.5
                self.weight.uniform_(-bound, bound)
                if self.weight_proj is not None:
                    bound = (3.0 / self.weight_proj.size(0)) ** 0.5
                    self.weight_proj.uniform_(-bound, bound)
                w = self.weight.view(rows, self.num_directions, d, k)
                if self.dropout > 0:
                    w[..., 0].mul_((1 - self.dropout) ** 0.5)
                if self.rnn_dropout > 0:
                    w.mul_((1 - self.rnn_dropout) ** 0.5)
                if self.layer_norm is not None:
                    w.mul_(0.1)
                if self.rescale and self.has_skip_term and k == 4:
                    w[..., 3].mul_(scale_val)

            if self.v1:
                self.weight_c.zero_()
                self.weight_c.requires_grad_(False)
            else:
                if self.weight_c_init is None:
                    self.weight_c.uniform_(-(3.0**0.5), 3.0**0.5)
                    self.weight_c.mul_(0.5**0.5)
                else:
                    self.weight_c.uniform_(-self.weight_c_init, self.weight_c_init)
                if w is not None:
                    w[..., 1].mul_(0.5**0.5)
                    w[..., 2].mul_(0.5**0.5)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args: Any, **kwargs: Any) -> None:
        """Loads a state dict of either release's layout into this layer's.

        sru 2.6 ``custom_m.*`` -> ``transform_module.*``; between sru 2.6's built-in ``weight`` (in, out*k)
        / ``weight_proj`` (in, p) and sru 3.0's ``transform_module.weight`` (out*k, in) /
        ``transform_module.{0,1}.weight`` (p, in), (out*k, p), whichever this layer lacks, transposed.
        Keys of this layer's own layout are never overwritten; what cannot be mapped is left for the
        usual missing / unexpected key report.
        """
        sd = state_dict
        transform = self.transform_module
        if transform is not None:
            old = prefix + "custom_m."
            for key in [key for key in sd if key.startswith(old)]:
                new = prefix + "transform_module." + key[len(old) :]
                if new not in sd:
                    sd[new] = sd.pop(key)
        w, wp = prefix + "weight", prefix + "weight_proj"
        t1, t0 = prefix + "transform_module.weight", prefix + "transform_module.0.weight"
        t01 = prefix + "transform_module.1.weight"
        layout = linear_layout(transform)
        if self.weight is not None and w not in sd:
            if self.weight_proj is None and t1 in sd and t0 not in sd:
                sd[w] = sd.pop(t1).t().contiguous()
            elif self.weight_proj is not None and wp not in sd and t0 in sd and t01 in sd:
                sd[wp] = sd.pop(t0).t().contiguous()
                sd[w] = sd.pop(t01).t().contiguous()
        elif layout == 1 and t1 not in sd and w in sd and wp not in sd:
            sd[t1] = sd.pop(w).t().contiguous()
        elif layout == 2 and t0 not in sd and t01 not in sd and w in sd and wp in sd:
            sd[t0] = sd.pop(wp).t().contiguous()
            sd[t01] = sd.pop(w).t().contiguous()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def compute_U(self, input: Tensor) -> Tensor:
        """(L, B, in) -> U (L, B, out*k), laid out (L, B, D, d, k): the transform module's output, or
        ``input @ [weight_proj @] weight`` with sru 2.6's built-in weights."""
        transform = self.transform_module
        if transform is not None:
            U = transform(input)
            if not isinstance(U, Tensor):
                raise NotImplementedError(
                    f"the transform module of this SRU layer returned {type(U).__name__}; rnnx takes one "
                    "tensor U (sru's optional second output V, added to weight_c, is not supported)"
                )
            self._check_U(U, input)
        else:
            U = self._builtin_U(input)
        return U

    def _builtin_U(self, input: Tensor) -> Tensor:
        """U from sru 2.6's ``weight`` / ``weight_proj``: (..., in) -> (..., out*k)."""
        weight = self.weight
        if weight is None:
            raise RuntimeError("this SRU layer has neither a transform_module nor a weight")
        x = input.reshape(-1, self.input_size)
        weight_proj = self.weight_proj
        if weight_proj is not None:
            x = x.mm(weight_proj)
        return x.mm(weight).view(list(input.shape[:-1]) + [-1])

    def _check_U(self, U: Tensor, input: Tensor) -> None:
        """ValueError unless the transform module mapped the input (L, B, in) to U (L, B, out*k)."""
        expected = [input.size(0), input.size(1), self.output_size * self.num_matrices]
        if list(U.shape) != expected:
            raise ValueError(
                f"the transform module must map the input {shape_text(input)} to U (length, batch, "
                f"output_size * num_matrices) = {dims_text(expected)}, got {shape_text(U)}"
            )

    def forward(
        self, input: Tensor, c0: Optional[Tensor] = None, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, Tensor]:
        """input (L, B, in) or one step (B, in); c0 (B, out), zeros in the state dtype when None;
        mask_pad (L, B), non-zero marks a pad step (c carried, h = 0 before a post layer norm).

        Returns h (L, B, out) (or (B, out)) in the activation dtype and c (B, out) in c0's dtype.
        """
        if input.dim() not in (2, 3):
            raise ValueError(f"SRUCell input must be (L, B, in) or (B, in), got shape {shape_text(input)}")
        if input.size(-1) != self.input_size:
            raise ValueError(f"SRUCell expects input_size {self.input_size}, got last dim {input.size(-1)}")
        single_step = input.dim() == 2
        x = input.unsqueeze(0) if single_step else input
        L, B = x.shape[0], x.shape[1]
        if c0 is None:
            c0 = torch.zeros(B, self.output_size, dtype=state_dtype(x.dtype), device=x.device)
        elif list(c0.shape) != [B, self.output_size]:
            raise ValueError(
                f"c0 must be (batch, output_size) = {dims_text([B, self.output_size])}, got {shape_text(c0)}"
            )
        if mask_pad is not None:
            if mask_pad.numel() != L * B:
                raise ValueError(f"mask_pad must be (length, batch) = {dims_text([L, B])}, got {shape_text(mask_pad)}")
            mask_pad = mask_pad.reshape(L, B)

        residual, x, mask_c = self._before_transform(x)
        U = self.compute_U(x)
        h, c = self._after_transform(U, residual, c0, mask_pad, mask_c)
        return (h.squeeze(0) if single_step else h), c

    def _before_transform(self, x: Tensor) -> tuple[Tensor, Tensor, Optional[Tensor]]:
        """x (L, B, in) -> (the residual x, the transform's input (L, B, in), the dropout mask on h (B, out)
        or None): pre layer norm, then in training the input and output dropout masks, drawn in sru's order."""
        residual = x
        if self.layer_norm is not None and not self.normalize_after:
            x = self.layer_norm(x)
        batch = x.size(1)
        if self.training and self.rnn_dropout > 0:
            x = x * dropout_mask(self.bias, (batch, self.input_size), self.rnn_dropout)
        mask_c: Optional[Tensor] = None
        if self.training and self.dropout > 0:
            mask_c = dropout_mask(self.bias, (batch, self.output_size), self.dropout)
        return residual, x, mask_c

    def _after_transform(
        self, U: Tensor, residual: Tensor, c0: Tensor, mask_pad: Optional[Tensor], mask_c: Optional[Tensor]
    ) -> tuple[Tensor, Tensor]:
        """U (L, B, out*k), residual (L, B, in), c0 (B, out) -> h (L, B, out), c (B, out): the scan, the
        dropout on h, the post layer norm."""
        h, c = self._scan(U, residual, c0, mask_pad)
        if mask_c is not None:
            h = highway_dropout(h, self._skip_input(U, residual), mask_c, mask_pad)
        if self.layer_norm is not None and self.normalize_after:
            h = self.layer_norm(h)
        return h, c

    def _scan(self, U: Tensor, residual: Tensor, c0: Tensor, mask_pad: Optional[Tensor]) -> tuple[Tensor, Tensor]:
        """The recurrence: :func:`~rnnx.models.ops.sru_scan.sru_scan` (its checks included), or under TorchScript
        the op it wraps."""
        x = residual if self.has_skip_term and self.num_matrices == 3 else None
        if torch.jit.is_scripting():
            return torch.ops.rnnx.sru_scan(U, x, self.weight_c, self.bias, c0, mask_pad, self.hidden_size,
                                           self.num_directions, self.num_matrices, self.has_skip_term,
                                           self.use_tanh, self._scan_scale())  # fmt: skip
        return sru_scan(
            U,
            x,
            self.weight_c,
            self.bias,
            c0,
            mask_pad,
            hidden_size=self.hidden_size,
            num_directions=self.num_directions,
            num_matrices=self.num_matrices,
            has_skip_term=self.has_skip_term,
            use_tanh=self.use_tanh,
            scale_x=self.highway_scale,
        )

    def _skip_input(self, U: Tensor, residual: Tensor) -> Optional[Tensor]:
        """The scaled highway input x' (L, B, out) the scan used, or None without a skip term."""
        if not self.has_skip_term:
            return None
        if self.num_matrices == 4:
            return U.reshape(U.shape[0], U.shape[1], self.output_size, 4)[..., 3]
        return residual * self._scan_scale()

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.projection_size > 0:
            s += f", projection_size={self.projection_size}"
        if self.dropout > 0:
            s += f", dropout={self.dropout}"
        if self.rnn_dropout > 0:
            s += f", rnn_dropout={self.rnn_dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.highway_bias != 0:
            s += f", highway_bias={self.highway_bias}"
        if self.use_tanh:
            s += ", activation=tanh"
        if self.v1:
            s += ", v1=True"
        s += f", rescale={self.rescale}"
        if not self.has_skip_term:
            s += ", has_skip_term=False"
        if self.layer_norm is not None:
            s += ", layer_norm=True" + (", normalize_after=True" if self.normalize_after else "")
        return s + f", sru_version={self.sru_version}"


class SRU(nn.Module):
    """Stacked SRU, a drop-in for ``sru.SRU`` 2.6.0 and 3.0.0.dev6 plus the rnnx state API.

    ``forward(input (L, B, in) or PackedSequence, c0 (num_layers, B, out) = None, mask_pad (L, B) = None)``
    returns ``(h (L, B, out), c (num_layers, B, out))``; with ``nn_rnn_compatible_return`` c is
    (num_layers*D, B, d) as ``nn.LSTM`` lays it out. ``forward_state`` / ``init_state`` carry the
    cell states between calls in an :class:`~rnnx.models.state.SRUState` (unidirectional only).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 2,
        dropout: float = 0.0,
        rnn_dropout: float = 0.0,
        bidirectional: bool = False,
        projection_size: Optional[Union[int, Sequence[int]]] = None,
        use_tanh: bool = False,
        layer_norm: bool = False,
        highway_bias: float = 0.0,
        has_skip_term: bool = True,
        rescale: bool = False,
        v1: bool = False,
        nn_rnn_compatible_return: bool = False,
        custom_m: Optional[Union[nn.Module, Sequence[nn.Module]]] = None,
        proj_input_to_hidden_first: bool = False,
        amp_recurrence_fp16: Optional[bool] = None,
        normalize_after: bool = False,
        weight_c_init: Optional[float] = None,
        *,
        transform_module: Optional[Union[nn.Module, Sequence[nn.Module]]] = None,
        n_proj: Optional[Union[int, Sequence[int]]] = None,
        sru_version: Optional[str] = None,
    ) -> None:
        """Arguments of ``sru.SRU`` 2.6.0, in its positional order, and of 3.0.0.dev6 (its name that 2.6
        lacks, ``transform_module``, is keyword-only here).

        ``custom_m`` / ``transform_module`` are the 2.6 / 3.0 names of one argument (``n_proj`` is
        accepted as another name of ``projection_size``); TypeError when both names are given.
        ``projection_size``: one size for every layer (0: none, the default) or one per layer; given at all,
        it means sru 3.0's projection (layout, and a projection kept whatever its size) unless a 2.6-only
        name or ``sru_version="2.6"`` says otherwise.
        ``transform_module``: one module, deep-copied for each layer, or a list with one per layer (used as
        is), each mapping its layer's (pre-normed) input (L, B, in) to U (L, B, out*k) (see
        :class:`SRUCell`). ``sru_version``: "2.6" or "3.0" (see :class:`SRUCell`), else "3.0" when
        ``transform_module`` or ``projection_size`` is given (without ``custom_m`` / ``n_proj``), otherwise
        "2.6"; the layers
        follow it. ``amp_recurrence_fp16`` (ignored) and ``weight_c_init`` left as None take that
        release's default. ``dropout`` acts between layers (on every layer but the last), as in sru.
        """
        super().__init__()
        owner = type(self).__name__
        if num_layers <= 0:
            raise ValueError(f"num_layers must be positive, got {num_layers}")
        proj_is_list = isinstance(projection_size, Sequence)
        given_26 = [name for name, value in (("custom_m", custom_m), ("n_proj", n_proj)) if value is not None]
        given_30 = ["transform_module"] if transform_module is not None else []
        if proj_is_list:
            given_30.append("projection_size (one per layer)")
        elif projection_size is not None and not given_26 and not given_30:
            given_30.append("projection_size")  # both releases' name: read as 3.0's (docs/models.md says why)
        proj = pick_alias(owner, "n_proj", n_proj, "projection_size", projection_size)
        transform = pick_alias(owner, "custom_m", custom_m, "transform_module", transform_module)
        version = resolve_sru_version(owner, sru_version, given_26, given_30)
        projections = self._per_layer_projection(0 if proj is None else proj, num_layers)
        transforms = self._per_layer_transform(transform, num_layers)

        self.sru_version = version
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.num_directions
        self.num_layers = num_layers
        self.dropout = dropout
        self.rnn_dropout = rnn_dropout
        self.projection_size = tuple(projections) if isinstance(proj, Sequence) else projections[0]
        self.bidirectional = bidirectional
        self.use_layer_norm = layer_norm
        self.has_skip_term = has_skip_term
        self.nn_rnn_compatible_return = nn_rnn_compatible_return
        self.amp_recurrence_fp16 = (version == "3.0") if amp_recurrence_fp16 is None else amp_recurrence_fp16
        if rnn_dropout > 0:
            warnings.warn("rnn_dropout > 0 is deprecated in sru; use dropout instead", DeprecationWarning, stacklevel=2)
        if use_tanh:
            warnings.warn("use_tanh=True is deprecated in sru", DeprecationWarning, stacklevel=2)

        projects_first = proj_input_to_hidden_first and input_size != self.output_size
        self.input_to_hidden = nn.Linear(input_size, self.output_size, bias=False) if projects_first else None
        first_input_size = self.output_size if projects_first else input_size
        self.rnn_lst = nn.ModuleList()
        for i in range(num_layers):
            self.rnn_lst.append(
                SRUCell(
                    first_input_size if i == 0 else self.output_size,
                    hidden_size,
                    dropout=dropout if i + 1 != num_layers else 0.0,
                    rnn_dropout=rnn_dropout,
                    bidirectional=bidirectional,
                    use_tanh=use_tanh,
                    layer_norm=layer_norm,
                    highway_bias=highway_bias,
                    has_skip_term=has_skip_term,
                    rescale=rescale,
                    v1=v1,
                    amp_recurrence_fp16=self.amp_recurrence_fp16,
                    normalize_after=normalize_after,
                    weight_c_init=weight_c_init,
                    projection_size=projections[i],
                    transform_module=copy.deepcopy(transform) if transforms is None else transforms[i],
                    sru_version=version,
                )
            )
        self._stream_error = self._streaming_refusal()

    @staticmethod
    def _per_layer_projection(projection_size: Union[int, Sequence[int]], num_layers: int) -> list[int]:
        """One projection size per layer; ValueError for a sequence of the wrong length."""
        if not isinstance(projection_size, Sequence):
            return [int(projection_size)] * num_layers
        sizes = tuple(projection_size)
        if len(sizes) != num_layers or not all(isinstance(p, numbers.Integral) for p in sizes):
            raise ValueError(f"projection_size must be an int or one int per layer ({num_layers}), got {sizes!r}")
        return [int(p) for p in sizes]

    @staticmethod
    def _per_layer_transform(transform: Any, num_layers: int) -> Optional[list[nn.Module]]:
        """The per-layer transform modules of a list / tuple / ``nn.ModuleList`` (ValueError for the wrong
        length, TypeError for a non-module), or None for one module to copy (or none)."""
        if transform is None or isinstance(transform, nn.Module) and not isinstance(transform, nn.ModuleList):
            return None
        if not isinstance(transform, (list, tuple, nn.ModuleList)):
            raise TypeError(f"transform_module must be an nn.Module or a list of them, got {type(transform).__name__}")
        modules = list(transform)
        if len(modules) != num_layers:
            raise ValueError(
                f"transform_module is a list of {len(modules)} modules but the SRU has {num_layers} layers; "
                "give one per layer, or one module to copy for each"
            )
        return modules

    def _streaming_refusal(self) -> str:
        """Why :meth:`forward_state` cannot run (a layer whose transform carries a state of its own,
        e.g. an SRU++ attention), or "" when it can."""
        for i, layer in enumerate(self.rnn_lst):
            transform = layer.transform_module
            if int(getattr(transform, "num_state_tensors", 0)) > 0:
                return (
                    f"forward_state keeps only the SRU cell states c, but the transform_module of layer {i} "
                    f"({type(transform).__name__}) has a state of its own; stream it with SRUppCell.forward_state "
                    "or an SRUpp"
                )
        return ""

    def __getitem__(self, n: int) -> SRUCell:
        """The n-th layer."""
        return self.rnn_lst[n]

    def reset_parameters(self) -> None:
        """Re-initialises every layer (sru's order: layers first, then ``input_to_hidden``)."""
        for rnn in self.rnn_lst:
            rnn.reset_parameters()
        if self.input_to_hidden is not None:
            self.input_to_hidden.reset_parameters()

    def forward(
        self,
        input: Tensor,
        c0: Optional[Tensor] = None,
        mask_pad: Optional[Tensor] = None,
    ) -> tuple[Tensor, Tensor]:
        """input (L, B, in) or a PackedSequence (then mask_pad comes from its lengths);
        c0 (num_layers, B, out), zeros in the state dtype when None; mask_pad (L, B), non-zero = pad.

        Returns h (L, B, out) (a PackedSequence for a packed input) and the last cell states
        c (num_layers, B, out) in c0's dtype, or (num_layers*D, B, d) with nn_rnn_compatible_return.
        """
        if not torch.jit.is_scripting() and isinstance(input, PackedSequence):
            return self._forward_packed(input, c0)
        self._check_input(input, mask_pad)
        B = input.size(1)
        if c0 is not None and list(c0.shape) != [self.num_layers, B, self.output_size]:
            raise ValueError(
                f"c0 must be (num_layers, batch, output_size) = {dims_text([self.num_layers, B, self.output_size])}, "
                f"got {shape_text(c0)}"
            )
        h, c = self._run_layers(input, c0, mask_pad)
        if self.nn_rnn_compatible_return:
            c = (
                c.view(self.num_layers, B, self.num_directions, self.hidden_size)
                .transpose(1, 2)
                .reshape(self.num_layers * self.num_directions, B, self.hidden_size)
            )
        return h, c

    @torch.jit.unused
    def _forward_packed(self, input: PackedSequence, c0: Optional[Tensor]) -> tuple[PackedSequence, Tensor]:
        """A PackedSequence input (eager only): padded, masked by its lengths, packed again."""
        padded, lengths = pad_packed_sequence(input)
        steps = torch.arange(padded.size(0)).unsqueeze(1)
        h, c = self.forward(padded, c0, (steps >= lengths.unsqueeze(0)).to(padded.device))
        return pack_padded_sequence(h, lengths, enforce_sorted=False), c

    def init_state(self, batch_size: int, device: Optional[Union[str, torch.device]] = None) -> SRUState:
        """Zero state: c (num_layers, batch_size, out), fp32 (fp64 for an fp64 model)."""
        return self.state_from_flat(self.init_state_flat(batch_size, None if device is None else torch.device(device)))

    def forward_state(
        self, x: Tensor, state: Optional[SRUState] = None, mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, SRUState]:
        """Runs x (L, B, in), any L >= 1, from ``state`` (zeros when None); returns h (L, B, out) and
        the new state (fp32 c whatever x's dtype). Prefill n steps then m single steps gives the
        same h and state as one call over n + m. Pad steps (mask_pad != 0) leave the state as is.
        A transform module sees one call's x at a time, so that holds when it maps each step on its own
        (a linear map, an MLP); one with a state of its own (``num_state_tensors`` > 0) is refused.
        """
        flat = self.init_state_flat(x.size(1), x.device) if state is None else [state.c]
        h, flat = self.forward_state_flat(x, flat, mask_pad)
        return h, self.state_from_flat(flat)

    def init_state_flat(self, batch_size: int, device: Optional[torch.device] = None) -> list[Tensor]:
        """:meth:`init_state` as the flat list ``[c]``; TorchScript code."""
        return [zero_state([self.num_layers, batch_size, self.output_size], self.rnn_lst[0].bias, device)]

    def state_from_flat(self, tensors: list[Tensor]) -> SRUState:
        """``[c]`` -> :class:`SRUState`."""
        return SRUState(c=tensors[0])

    def forward_state_flat(
        self, x: Tensor, state: list[Tensor], mask_pad: Optional[Tensor] = None
    ) -> tuple[Tensor, list[Tensor]]:
        """:meth:`forward_state` on the flat state ``[c]``; TorchScript code."""
        if self.bidirectional:
            raise RuntimeError(
                "forward_state needs a causal SRU, but this model is bidirectional: its backward "
                "direction reads the whole sequence, so it has no step-by-step state; use forward()"
            )
        if self._stream_error != "":
            raise RuntimeError(self._stream_error)
        self._check_input(x, mask_pad)
        B = x.size(1)
        if len(state) != 1:
            raise ValueError(f"an SRU state is one tensor, c; got {len(state)}")
        if list(state[0].shape) != [self.num_layers, B, self.output_size]:
            raise ValueError(
                f"state.c must be (num_layers, batch, output_size) = "
                f"{dims_text([self.num_layers, B, self.output_size])}, got {shape_text(state[0])}"
            )
        h, c = self._run_layers(x, state[0].to(state_dtype(x.dtype)), mask_pad)
        return h, [c]

    def _check_input(self, x: Tensor, mask_pad: Optional[Tensor]) -> None:
        if x.dim() != 3:
            raise ValueError(f"SRU input must be (length, batch, input_size), got shape {shape_text(x)}")
        if x.size(-1) != self.input_size:
            raise ValueError(f"SRU expects input_size {self.input_size}, got last dim {x.size(-1)}")
        if x.size(0) == 0:
            raise ValueError("SRU input has length 0")
        if mask_pad is not None and list(mask_pad.shape) != [x.size(0), x.size(1)]:
            raise ValueError(
                f"mask_pad must be (length, batch) = {dims_text([x.size(0), x.size(1)])}, got {shape_text(mask_pad)}"
            )

    def _run_layers(self, x: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor]) -> tuple[Tensor, Tensor]:
        """x (L, B, in), c0 (num_layers, B, out) -> h (L, B, out), c (num_layers, B, out). c0 None: every layer
        starts from one zeros (B, out) in the state dtype (an export writes one zeros, not one per layer)."""
        h = x if self.input_to_hidden is None else self.input_to_hidden(x)
        zeros: Optional[Tensor] = None
        if c0 is None:
            zeros = torch.zeros(x.size(1), self.output_size, dtype=state_dtype(x.dtype), device=x.device)
        cs: list[Tensor] = []
        for i, rnn in enumerate(self.rnn_lst):
            h, c = rnn(h, zeros if c0 is None else c0[i], mask_pad=mask_pad)
            cs.append(c)
        return h, torch.stack(cs)
