"""A user's model as the exporter and the torch backend take it: a module, example inputs and its state.

:func:`load_factory` imports a *factory* named ``package.module:function`` or ``path/to/file.py:function``
(what ``export-model --module`` takes and a stateful export records as ``source.factory``), calls it and
loads an optional weights file (a ``state_dict`` saved with ``torch.save``) into the module it returns.
A factory returns either ``(module, example_inputs)`` or a dict of :func:`rnnx.export.export`'s keyword
arguments with at least ``module`` and ``example_inputs`` (and optionally ``init_state``,
``input_names``, ``output_names``, ``dynamic_axes``, ``config``).

:func:`prepare` turns a module into the graph view the exporter traces: layers of the published
packages replaced by their rnnx twins (:func:`rnnx.models.convert`), ``init_state`` resolved (the
argument, else the module's own ``init_state`` method, else none: a stateless module), wrapped in
:class:`~rnnx.models.stateful.StatefulModule`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import torch
from torch import Tensor, nn

from ..runtime.contract.artifact import PAST_PREFIX
from .stateful import StatefulModule

#: Keyword arguments a factory's dict may hold besides ``module`` and ``example_inputs``.
FACTORY_OPTIONS = ("init_state", "input_names", "output_names", "dynamic_axes", "config")


class FactoryError(ValueError):
    """A factory that cannot be imported or returns something else than a model; one line."""


@dataclass
class ModelSpec:
    """What a factory returns, normalised: the module, its example data inputs and export options."""

    module: nn.Module
    example_inputs: tuple[Tensor, ...]
    options: dict[str, Any] = field(default_factory=dict)


def import_factory(spec: str, root: Optional[Union[str, Path]] = None) -> Callable[[], Any]:
    """The function named by ``package.module:function`` or ``path/to/file.py:function``; ``root``: the folder
    ``package`` was imported from when the export was made (:func:`factory_root`), searched first."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise FactoryError(f"factory {spec!r}: expected 'package.module:function' or 'path/to/file.py:function'")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise FactoryError(f"factory {spec!r}: {path} does not exist")
        module_name = f"rnnx_factory_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"  # stable across runs
        loader = importlib.util.spec_from_file_location(module_name, path)
        if loader is None or loader.loader is None:
            raise FactoryError(f"factory {spec!r}: cannot load {path} as Python")
        module = importlib.util.module_from_spec(loader)
        sys.modules[module_name] = module
        loader.loader.exec_module(module)
    else:
        if root is not None and str(root) not in sys.path:
            sys.path.insert(0, str(root))
        elif root is None and "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))  # `package.module` resolves from here, as with `python -m`
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            raise FactoryError(f"factory {spec!r}: cannot import {target!r} ({e})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise FactoryError(f"factory {spec!r}: {target} has no function {name!r}")
    return function


def factory_root(spec: str) -> Optional[str]:
    """The folder the top package of an imported ``package.module:function`` factory came from (what
    ``sys.path`` needed), so that a later process elsewhere imports the same code; None for a
    ``file.py:function`` factory (recorded by its absolute path) or a module without a file."""
    target = spec.rpartition(":")[0]
    if target.endswith(".py"):
        return None
    top = sys.modules.get(target.split(".")[0])
    location = getattr(top, "__file__", None) or next(iter(getattr(top, "__path__", [])), None)
    if location is None:
        return None
    location = Path(location).resolve()
    is_package = location.name == "__init__.py" or location.is_dir()
    folder = location.parent if location.is_file() else location
    return str(folder.parent if is_package else folder)


def model_spec(result: Any, where: str) -> ModelSpec:
    """A factory's return value normalised to :class:`ModelSpec`; :class:`FactoryError` naming ``where``."""
    if isinstance(result, dict):
        unknown = sorted(set(result) - {"module", "example_inputs", *FACTORY_OPTIONS})
        if unknown or "module" not in result or "example_inputs" not in result:
            raise FactoryError(
                f"{where}: a factory's dict needs 'module' and 'example_inputs' (optional: "
                f"{', '.join(FACTORY_OPTIONS)}); got keys {sorted(result)}"
            )
        module, examples = result["module"], result["example_inputs"]
        options = {k: result[k] for k in FACTORY_OPTIONS if k in result}
    elif isinstance(result, (tuple, list)) and len(result) == 2:
        (module, examples), options = result, {}
    else:
        raise FactoryError(f"{where}: expected (module, example_inputs) or a dict, got {type(result).__name__}")
    if not isinstance(module, nn.Module):
        raise FactoryError(f"{where}: the module is a {type(module).__name__}, expected a torch.nn.Module")
    examples = (examples,) if isinstance(examples, Tensor) else tuple(examples)
    return ModelSpec(module, examples, options)


def load_factory(
    spec: str, weights: Optional[Union[str, Path]] = None, root: Optional[Union[str, Path]] = None
) -> ModelSpec:
    """Imports (from ``root``, see :func:`import_factory`) and calls the factory ``spec``, then loads
    ``weights`` (a state_dict file) into its module."""
    result = model_spec(import_factory(spec, root)(), f"factory {spec!r}")
    if weights is not None:
        path = Path(weights)
        if not path.is_file():
            raise FactoryError(f"{path}: weights file does not exist")
        try:
            state_dict = torch.load(path, map_location="cpu", weights_only=True)
            result.module.load_state_dict(state_dict)
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise FactoryError(f"{path}: cannot load these weights into the factory's module: {first}") from None
    return result


def resolve_init_state(module: nn.Module, init_state: Optional[Callable[[int], Any]]) -> Optional[Callable[[int], Any]]:
    """``init_state`` if given, else the module's own ``init_state`` method, else None (stateless)."""
    if init_state is not None:
        if not callable(init_state):
            raise FactoryError(f"init_state must be a function batch -> state, got {type(init_state).__name__}")
        return init_state
    from .sru import SRU

    if isinstance(module, SRU):  # its forward takes and returns the cell states c, not an SRUState
        return lambda batch: module.init_state(batch).c
    method = getattr(module, "init_state", None)
    return method if callable(method) else None


def prepare(
    module: nn.Module, num_inputs: int, init_state: Optional[Callable[[int], Any]] = None
) -> tuple[StatefulModule, nn.Module]:
    """``(graph view, converted module)``: published layers converted (:func:`rnnx.models.convert`), in
    eval mode, wrapped in :class:`StatefulModule` with the resolved ``init_state``."""
    from .convert import convert

    converted = convert(module).cpu().float().eval()  # a copy: the caller's module is never touched
    if init_state is not None and init_state == getattr(module, "init_state", None):
        init_state = None  # the original's bound method: use the converted module's
    graph = StatefulModule(converted, resolve_init_state(converted, init_state), num_inputs).eval()
    return graph, converted


def load_factory_module(metadata: dict[str, Any], where: str) -> StatefulModule:
    """The graph view of a stateful export's recorded source (``source.factory`` + ``source.weights``)."""
    source = metadata.get("source") or {}
    if not source.get("factory"):
        raise FactoryError(
            f"{where}: source.factory is null (exported from Python, not from a factory); "
            "build the module yourself and pass it to rnnx.runtime.backends.torch_backend.TorchBackend"
        )
    spec = load_factory(source["factory"], source.get("weights"), source.get("factory_root"))
    num_inputs = sum(1 for t in metadata["inputs"] if not t["name"].startswith(PAST_PREFIX))
    graph, _ = prepare(spec.module, num_inputs, spec.options.get("init_state"))
    return graph
