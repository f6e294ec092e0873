"""Turn a user's PyTorch model built on published recurrent packages into its rnnx equivalent.

:func:`convert` returns a deep copy of the given module in which every layer of a supported published
package is replaced by its rnnx twin (same configuration, weights carried over), anywhere in the
module tree, the given module itself included. The input module is never modified.

Converters live in the modules named by :data:`CONVERTER_MODULES`, imported lazily (so importing
``rnnx.models`` imports neither ``sru`` nor ``fast_transformers``; convert never imports them either:
it recognises classes by their qualified name and reads the package version from ``sys.modules``).
Each such module defines ``CONVERTERS: dict[str, Converter]`` keyed by the fully qualified class
name ``f"{cls.__module__}.{cls.__qualname__}"`` of the published class. A converter is called as
``converter(layer, dotted_path)`` and returns the rnnx replacement, or raises
:class:`ConversionError` whose message is one line starting with ``dotted_path``. The root module's
path is :data:`ROOT_PATH`.

Error contract: anything that cannot be converted (an unsupported package version, an option the rnnx
twin does not implement, weights that do not fit) raises :class:`ConversionError` (a ValueError)
naming the layer's dotted path; nothing is half-converted since the work happens on a copy. A model
with no convertible layer is returned as an unchanged copy.
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import sys
from collections.abc import Callable, Mapping
from typing import Optional

from torch import nn

__all__ = [
    "CONVERTER_MODULES",
    "ROOT_PATH",
    "ConversionError",
    "Converter",
    "carry_over",
    "conversion_error",
    "convert",
    "package_version",
    "qualified_name",
    "supported",
]

#: modules defining ``CONVERTERS``; one that is absent (not installed yet) is skipped
CONVERTER_MODULES: tuple[str, ...] = (
    "rnnx.models.convert_sru",
    "rnnx.models.fast_transformers",
    "rnnx.models.convert_transformers",
)

#: the dotted path a converter receives for the root module (``named_modules`` calls it "")
ROOT_PATH = "<root>"

Converter = Callable[[nn.Module, str], nn.Module]


class ConversionError(ValueError):
    """A layer of a published package cannot be converted; the message is one line naming its path."""


def qualified_name(cls: type) -> str:
    """``f"{cls.__module__}.{cls.__qualname__}"``, the key of :data:`CONVERTERS` tables."""
    return f"{cls.__module__}.{cls.__qualname__}"


def package_version(layer: nn.Module) -> Optional[str]:
    """The version of the top-level package defining ``type(layer)``, without importing anything.

    ``sys.modules[top].__version__`` when present, else the installed distribution's metadata for
    ``top``, else None.
    """
    top = type(layer).__module__.split(".")[0]
    version = getattr(sys.modules.get(top), "__version__", None)
    if version is not None:
        return str(version)
    try:
        return importlib.metadata.version(top)
    except importlib.metadata.PackageNotFoundError:
        return None


def conversion_error(path: str, what: str, reason: str) -> ConversionError:
    """``ConversionError("{path}: {what} cannot be converted: {reason}")`` on one line."""
    return ConversionError(" ".join(f"{path}: {what} cannot be converted: {reason}".split()))


def carry_over(
    original: nn.Module, twin: nn.Module, path: str, state_dict: Optional[Mapping[str, object]] = None
) -> nn.Module:
    """Moves ``original``'s weights into ``twin`` and gives it ``original``'s modes; returns ``twin``.

    ``state_dict`` defaults to ``original.state_dict(keep_vars=True)``; it is loaded strictly with
    ``assign=True``, so every parameter and buffer keeps its tensor (dtype, device, storage: weights
    tied elsewhere in the model stay tied). ``requires_grad`` and ``training`` are copied per name
    (a twin submodule with no namesake in ``original`` takes ``original.training``). A state dict
    that does not fit raises :class:`ConversionError`.
    """
    if state_dict is None:
        state_dict = original.state_dict(keep_vars=True)
    # read before loading: assign=True gives the assigned Parameters the twin's requires_grad
    grads = {name: p.requires_grad for name, p in original.named_parameters()}
    try:
        twin.load_state_dict(state_dict, strict=True, assign=True)
    except RuntimeError as exc:
        raise conversion_error(
            path, qualified_name(type(original)), f"its weights do not fit {type(twin).__name__}: {exc}"
        ) from exc
    for name, param in twin.named_parameters():
        param.requires_grad_(grads.get(name, param.requires_grad))
    modes = {name: m.training for name, m in original.named_modules()}
    for name, module in twin.named_modules():
        module.training = modes.get(name, original.training)
    return twin


def _import_converters(module_name: str) -> Mapping[str, Converter]:
    """``module_name.CONVERTERS``, or {} when that very module does not exist."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return {}
        raise
    return module.CONVERTERS


def _converters() -> dict[str, Converter]:
    """Every converter of :data:`CONVERTER_MODULES`, by qualified class name."""
    table: dict[str, Converter] = {}
    for module_name in CONVERTER_MODULES:
        for name, converter in _import_converters(module_name).items():
            if name in table:
                raise RuntimeError(f"{module_name} registers a converter for {name}, already registered")
            table[name] = converter
    return table


def supported() -> list[str]:
    """Qualified class names (``module.qualname``) that :func:`convert` knows, sorted.

    A known class can still be rejected for its version or options (see the converter modules).
    """
    return sorted(_converters())


def _convert_node(
    module: nn.Module, path: str, table: Mapping[str, Converter], done: dict[int, nn.Module]
) -> nn.Module:
    """The replacement of ``module`` (itself when not convertible, its children converted in place).

    ``done`` maps id(module) -> result so a module reachable twice is converted (and shared) once.
    """
    if id(module) in done:
        return done[id(module)]
    converter = table.get(qualified_name(type(module)))
    if converter is not None:
        result = converter(module, path)
    else:
        result = module
        for name, child in list(module.named_children()):
            child_path = name if path == ROOT_PATH else f"{path}.{name}"
            new_child = _convert_node(child, child_path, table, done)
            if new_child is not child:
                setattr(module, name, new_child)
    done[id(module)] = result
    return result


def convert(module: nn.Module) -> nn.Module:
    """A converted deep copy of ``module``; ``module`` itself is left untouched.

    Walks the copy top-down; a layer whose class has a converter (see :func:`supported`: sru 2.6.0
    ``SRU`` / ``SRUCell`` -> :class:`rnnx.models.SRU` / :class:`rnnx.models.SRUCell`, sru 3.0.0.dev6
    ``SRUpp`` -> :class:`rnnx.models.SRUpp`, plus the converters of the other
    :data:`CONVERTER_MODULES`) is replaced by its rnnx twin and not descended into. Weights,
    requires_grad, train/eval mode, device and dtype are carried over. Returns the copy (the twin
    itself when ``module`` is a convertible layer; an unchanged copy when nothing is convertible).

    Raises :class:`ConversionError` (one line naming the layer's dotted path) for a layer that
    cannot be converted.
    """
    table = _converters()
    return _convert_node(copy.deepcopy(module), ROOT_PATH, table, {})
