"""Converters for layers of the published ``sru`` package (asappresearch), used by :func:`rnnx.models.convert`.

- ``sru.SRU`` / ``sru.SRUCell`` of sru **2.6.0** -> :class:`rnnx.models.SRU` / :class:`rnnx.models.SRUCell`;
- ``sru.SRUpp`` of sru **3.0.0.dev6** -> :class:`rnnx.models.SRUpp` (softmax attention).

The rnnx twins take the same constructor arguments and have the same state_dict names and layouts,
so a twin is built from the configuration the original stores in its attributes (and in those of
its layers ``rnn_lst[i]``) and then takes the original's tensors. ``sru`` is never imported: classes
are recognised by qualified name (``sru.modules.<Class>``), the version from ``sru.__version__``.

Rejected with :class:`~rnnx.models.convert.ConversionError`: any other sru version (sru 3.0's
``SRU`` / ``SRUCell`` compute U with a ``transform_module`` of ``nn.Linear`` layers, a different
parameter layout from 2.6's ``weight`` / ``weight_proj``), ``custom_m``, layers whose per-layer
options disagree with each other, SRU++ layers whose transform modules do not follow an
``attention_every_n_layers`` / ``attention_last_n_layers`` schedule, and SRU++ cells with options
the ``SRUpp`` constructor never sets (rnn_dropout, tanh, no skip term).
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
from torch import nn

from .convert import Converter, carry_over, conversion_error, package_version
from .sru import SRU, SRUCell
from .srupp import SRUpp

__all__ = ["CONVERTERS", "SRU_VERSION", "SRUPP_VERSION"]

#: the sru release whose SRU / SRUCell rnnx.models.SRU / SRUCell are drop-ins for
SRU_VERSION = "2.6.0"
#: the sru release whose SRUpp rnnx.models.SRUpp is a drop-in for
SRUPP_VERSION = "3.0.0.dev6"

#: per-layer attributes that change the forward pass; every layer of a stack must agree on them
_SRU_LAYER_OPTIONS = ("activation_type", "rescale", "has_skip_term", "normalize_after", "rnn_dropout", "v1")


def _describe(layer: nn.Module) -> str:
    """``"sru.SRU (sru 2.6.0)"``: the public class name and the package version."""
    return f"sru.{type(layer).__qualname__} (sru {package_version(layer) or 'version unknown'})"


def _require_version(layer: nn.Module, path: str, expected: str, twin: type) -> None:
    """Raises ConversionError unless ``layer`` comes from sru ``expected``."""
    version = package_version(layer)
    if version == expected:
        return
    if version is None:
        reason = f"cannot tell which sru version defines it (no sru.__version__); {twin.__name__} needs {expected}"
    elif twin is not SRUpp and version.startswith("3."):
        reason = (
            f"sru {version} computes U with a transform_module (nn.Linear weights) instead of sru 2.6's "
            f"weight / weight_proj parameters; rnnx.models.{twin.__name__} is the twin of sru {expected}"
        )
    else:
        reason = f"rnnx.models.{twin.__name__} is the twin of sru {expected} only"
    raise conversion_error(path, _describe(layer), reason)


def _option(layer: nn.Module, name: str, path: str) -> Any:
    """``layer.<name>``; ConversionError when the attribute is missing (an older pickled layer)."""
    if not hasattr(layer, name):
        raise conversion_error(path, _describe(layer), f"it has no attribute {name!r} (pickled by an older sru?)")
    return getattr(layer, name)


def _build(twin: type, kwargs: dict[str, Any]) -> nn.Module:
    """``twin(**kwargs)`` without touching the caller's RNG state or warning about deprecated options."""
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return twin(**kwargs)


def _reject_custom_m(layer: nn.Module, path: str, cells: list[nn.Module]) -> None:
    """ConversionError when any of ``cells`` has a ``custom_m`` module computing U."""
    for i, cell in enumerate(cells):
        if getattr(cell, "custom_m", None) is not None:
            where = path if cell is layer else f"{path}.rnn_lst.{i}"
            raise conversion_error(
                path,
                f"{_describe(layer)} with custom_m",
                f"layer {where} computes U with a custom {type(cell.custom_m).__name__}; "
                "rnnx.models.SRU only has the built-in (optionally factorised) projection",
            )


def _check_same(layer: nn.Module, path: str, cells: list[nn.Module], names: tuple[str, ...]) -> None:
    """ConversionError unless every cell has the same value as ``cells[0]`` for each of ``names``."""
    for name in names:
        first = _option(cells[0], name, f"{path}.rnn_lst.0")
        for i, cell in enumerate(cells[1:], start=1):
            value = _option(cell, name, f"{path}.rnn_lst.{i}")
            if value != first:
                raise conversion_error(
                    path, _describe(layer), f"layer {i} has {name}={value!r} but layer 0 has {name}={first!r}"
                )


def _sru_cell_kwargs(cell: nn.Module, path: str) -> dict[str, Any]:
    """Constructor arguments of ``rnnx.models.SRUCell`` from an sru 2.6.0 SRUCell's attributes."""
    names = (
        "input_size", "hidden_size", "dropout", "rnn_dropout", "bidirectional", "projection_size",
        "activation_type", "highway_bias", "has_skip_term", "layer_norm", "rescale", "v1",
        "amp_recurrence_fp16", "normalize_after", "weight_c_init",
    )  # fmt: skip
    opt = {name: _option(cell, name, path) for name in names}
    opt["n_proj"] = opt.pop("projection_size")
    opt["use_tanh"] = opt.pop("activation_type") == 1
    opt["layer_norm"] = opt["layer_norm"] is not None
    opt["sru_version"] = "2.6"
    return opt


def convert_sru_cell(layer: nn.Module, path: str) -> SRUCell:
    """sru 2.6.0 ``SRUCell`` -> :class:`rnnx.models.SRUCell` (weight (in|proj, out*k), weight_proj, ...)."""
    _require_version(layer, path, SRU_VERSION, SRUCell)
    _reject_custom_m(layer, path, [layer])
    return carry_over(layer, _build(SRUCell, _sru_cell_kwargs(layer, path)), path)


def _sru_kwargs(layer: nn.Module, path: str, cells: list[nn.Module]) -> dict[str, Any]:
    """Constructor arguments of ``rnnx.models.SRU`` from an sru 2.6.0 SRU and its layers."""
    names = (
        "input_size", "hidden_size", "num_layers", "dropout", "rnn_dropout", "bidirectional", "projection_size",
        "has_skip_term", "nn_rnn_compatible_return", "amp_recurrence_fp16",
    )  # fmt: skip
    opt = {name: _option(layer, name, path) for name in names}
    cell = _sru_cell_kwargs(cells[0], f"{path}.rnn_lst.0")
    per_layer = ("use_tanh", "highway_bias", "rescale", "v1", "normalize_after", "weight_c_init")
    opt.update({name: cell[name] for name in per_layer})
    opt["layer_norm"] = bool(_option(layer, "use_layer_norm", path))
    opt["proj_input_to_hidden_first"] = _option(layer, "input_to_hidden", path) is not None
    opt["sru_version"] = "2.6"  # the published layout (weight / weight_proj), whatever projection_size is
    return opt


def convert_sru(layer: nn.Module, path: str) -> SRU:
    """sru 2.6.0 ``SRU`` -> :class:`rnnx.models.SRU` (state_dict ``rnn_lst.{i}.*``, ``input_to_hidden.weight``)."""
    _require_version(layer, path, SRU_VERSION, SRU)
    cells = list(_option(layer, "rnn_lst", path))
    _reject_custom_m(layer, path, cells)
    _check_same(layer, path, cells, _SRU_LAYER_OPTIONS)
    return carry_over(layer, _build(SRU, _sru_kwargs(layer, path, cells)), path)


def _attention_schedule(flags: list[bool]) -> Optional[tuple[int, int]]:
    """``(attention_every_n_layers, attention_last_n_layers)`` giving attention exactly on the layers
    flagged True (the ``SRUpp`` constructor's rule), or None when no such pair exists."""
    n = len(flags)
    for every in range(1, n + 2):
        if flags == [(i + 1) % every == 0 for i in range(n)]:
            return every, -1
    for last in range(n + 1):
        if flags == [n - i <= last for i in range(n)]:
            return 1, last
    return None


def _check_srupp_cells(layer: nn.Module, path: str, cells: list[nn.Module]) -> None:
    """ConversionError for cells the SRUpp constructor cannot have built (options rnnx lacks)."""
    defaults = {"rnn_dropout": 0.0, "activation_type": 0, "has_skip_term": True}
    for i, cell in enumerate(cells):
        kind = type(_option(cell, "transform_module", f"{path}.rnn_lst.{i}")).__qualname__
        if kind not in ("SRUppAttention", "SRUppProjectedLinear"):
            raise conversion_error(path, _describe(layer), f"layer {i} has a transform_module of type {kind}")
        if kind == "SRUppAttention" and not cell.transform_module.normalize_after:
            raise conversion_error(path, _describe(layer), f"layer {i}'s attention has normalize_after=False")
        for name, value in defaults.items():
            if _option(cell, name, f"{path}.rnn_lst.{i}") != value:
                raise conversion_error(path, _describe(layer), f"layer {i} has {name}={getattr(cell, name)!r}")


def _srupp_kwargs(layer: nn.Module, path: str, cells: list[nn.Module]) -> dict[str, Any]:
    """Constructor arguments of ``rnnx.models.SRUpp`` from an sru 3.0.0.dev6 SRUpp and its layers."""
    names = (
        "input_size", "hidden_size", "proj_size", "num_layers", "dropout", "num_heads", "bidirectional",
        "nn_rnn_compatible_return",
    )  # fmt: skip
    opt = {name: _option(layer, name, path) for name in names}
    flags = [type(cell.transform_module).__qualname__ == "SRUppAttention" for cell in cells]
    schedule = _attention_schedule(flags)
    if schedule is None:
        layers = [i for i, flag in enumerate(flags) if flag]
        raise conversion_error(path, _describe(layer), f"attention on layers {layers} follows no SRUpp schedule")
    opt["attention_every_n_layers"], opt["attention_last_n_layers"] = schedule
    attention = [cell.transform_module for cell, flag in zip(cells, flags) if flag]
    opt["attn_dropout"] = attention[0].attn_dropout if attention else 0.0
    opt["attn_layer_norm"] = cells[0].transform_module.layer_norm is not None
    opt["layer_norm"] = bool(_option(layer, "use_layer_norm", path))
    opt["proj_input_to_hidden_first"] = _option(layer, "input_to_hidden", path) is not None
    for name in ("normalize_after", "highway_bias", "rescale", "weight_c_init"):
        opt[name] = _option(cells[0], name, f"{path}.rnn_lst.0")
    return opt


def convert_srupp(layer: nn.Module, path: str) -> SRUpp:
    """sru 3.0.0.dev6 ``SRUpp`` -> :class:`rnnx.models.SRUpp` with softmax attention (same state_dict)."""
    _require_version(layer, path, SRUPP_VERSION, SRUpp)
    cells = list(_option(layer, "rnn_lst", path))
    _check_srupp_cells(layer, path, cells)
    _check_same(layer, path, cells, ("rescale", "normalize_after"))
    return carry_over(layer, _build(SRUpp, _srupp_kwargs(layer, path, cells)), path)


#: qualified name of the published class -> converter (see rnnx.models.convert)
CONVERTERS: dict[str, Converter] = {
    "sru.modules.SRU": convert_sru,
    "sru.modules.SRUCell": convert_sru_cell,
    "sru.modules.SRUpp": convert_srupp,
}
