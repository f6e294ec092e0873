"""TensorRT optimization profiles derived from an export's ``rnnx.json``.

An rnnx graph serves prefill and decode with one set of dynamic dims (``batch``, ``length``,
``past_length``; docs/export.md). TensorRT tunes kernels per optimization profile, so an engine gets
two profiles:

* ``decode`` (index 0): ``length`` fixed at 1 — the token-by-token step;
* ``prefill`` (index 1): ``length`` 1..max_length — prompts.

In both, ``batch`` is 1..max_batch and a growing KV cache's ``past_length`` is 0..max_context-1
(``present`` = past + length must stay <= max_context; TensorRT ranges are per dimension, so that sum
is checked by the runtime, not by the profile). ``past_length`` min 0 is deliberate: an empty cache is
a zero-size input, which TensorRT supports ("empty tensors": any dim may be 0; such an input may even
be bound to nullptr, the runtime binds its preallocated buffer anyway). Non-growing state tensors only
have their ``batch`` dim resolved.

Pure Python: no TensorRT needed. :meth:`Profile.apply` fills a real ``IOptimizationProfile``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..contract.artifact import BATCH, LENGTH, PAST_LENGTH

DECODE, PREFILL = "decode", "prefill"

Shape = tuple[int, ...]


class ProfileError(ValueError):
    """Bad profile limits or metadata that cannot be turned into profiles; one line."""


@dataclass(frozen=True)
class ShapeRange:
    """min / opt / max shape of one input (min <= opt <= max elementwise)."""

    min: Shape
    opt: Shape
    max: Shape

    def to_dict(self) -> dict[str, list[int]]:
        return {"min": list(self.min), "opt": list(self.opt), "max": list(self.max)}


@dataclass(frozen=True)
class Profile:
    """One optimization profile: a name and a :class:`ShapeRange` per graph input (graph order)."""

    name: str
    shapes: dict[str, ShapeRange]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (used in the engine cache key)."""
        return {"name": self.name, "shapes": {k: v.to_dict() for k, v in self.shapes.items()}}

    def apply(self, trt_profile: Any) -> Any:
        """Calls ``IOptimizationProfile.set_shape(name, min, opt, max)`` for every input."""
        for name, r in self.shapes.items():
            trt_profile.set_shape(name, r.min, r.opt, r.max)
        return trt_profile


@dataclass(frozen=True)
class ProfileLimits:
    """The ranges the engine is built for.

    ``max_batch`` rows, prompts of up to ``max_length`` tokens, and a KV cache of up to
    ``max_context`` positions in total (only matters for a growing cache; default ``max_length``).
    ``opt_*`` are what TensorRT tunes for (defaults: batch 1, prefill length ``max_length``,
    decode past_length ``max_context // 2``). ``axes`` gives ``(min, opt, max)`` for every other axis
    name a stateful export declared (e.g. ``{"frames": (1, 64, 1024)}``), the same in both profiles.
    """

    max_batch: int = 8
    max_length: int = 512
    max_context: Optional[int] = None
    opt_batch: Optional[int] = None
    opt_length: Optional[int] = None
    opt_context: Optional[int] = None
    axes: Optional[dict[str, tuple[int, int, int]]] = None

    def resolved(self) -> ProfileLimits:
        """Defaults filled in and every limit validated; :class:`ProfileError` otherwise."""
        for field_name in ("max_batch", "max_length"):
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProfileError(f"{field_name} must be an integer >= 1, got {value!r}")
        max_context = self.max_length if self.max_context is None else self.max_context
        if isinstance(max_context, bool) or not isinstance(max_context, int) or max_context < self.max_length:
            raise ProfileError(f"max_context must be an integer >= max_length ({self.max_length}), got {max_context!r}")
        opt_batch = 1 if self.opt_batch is None else self.opt_batch
        opt_length = self.max_length if self.opt_length is None else self.opt_length
        opt_context = max_context // 2 if self.opt_context is None else self.opt_context
        _check_between("opt_batch", opt_batch, 1, self.max_batch)
        _check_between("opt_length", opt_length, 1, self.max_length)
        _check_between("opt_context", opt_context, 0, max_context - 1)
        axes = dict(self.axes or {})
        for name, bounds in axes.items():
            if name in (BATCH, LENGTH, PAST_LENGTH):
                raise ProfileError(f"axes[{name!r}]: set {name} through max_batch / max_length / max_context")
            if not (isinstance(bounds, (tuple, list)) and len(bounds) == 3):
                raise ProfileError(f"axes[{name!r}] must be (min, opt, max), got {bounds!r}")
            _check_between(f"axes[{name!r}] min", bounds[0], 0, bounds[2])
            _check_between(f"axes[{name!r}] opt", bounds[1], bounds[0], bounds[2])
        return ProfileLimits(
            self.max_batch, self.max_length, max_context, opt_batch, opt_length, opt_context, axes or None
        )


def _check_between(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProfileError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def _resolve(name: str, shape: list[Any], dims: dict[str, int]) -> Shape:
    out = []
    for d in shape:
        if isinstance(d, bool):
            raise ProfileError(f"input {name!r}: bad dim {d!r} in shape {shape}")
        if isinstance(d, int):
            if d < 0:
                raise ProfileError(f"input {name!r}: negative dim {d} in shape {shape}")
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(dims[d])
        else:
            raise ProfileError(
                f"input {name!r}: no range for axis {d!r} (shape {shape}); give it with "
                f"ProfileLimits(axes={{{d!r}: (min, opt, max)}}) (known: {', '.join(dims)})"
            )
    return tuple(out)


def _profile(name: str, inputs: list[dict[str, Any]], lo: dict[str, int], opt: dict[str, int],
             hi: dict[str, int]) -> Profile:  # fmt: skip
    shapes = {}
    for entry in inputs:
        n, shape = entry["name"], list(entry["shape"])
        shapes[n] = ShapeRange(_resolve(n, shape, lo), _resolve(n, shape, opt), _resolve(n, shape, hi))
    return Profile(name, shapes)


def build_profiles(metadata: dict[str, Any], limits: Optional[ProfileLimits] = None) -> list[Profile]:
    """``[decode, prefill]`` profiles covering every graph input of ``metadata`` (an ``rnnx.json`` dict).

    Raises :class:`ProfileError` for bad limits or an input shape with an unknown symbolic dim.
    """
    lim = (limits or ProfileLimits()).resolved()
    inputs = metadata.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise ProfileError("metadata has no 'inputs' list")
    assert lim.max_context is not None and lim.opt_batch is not None  # resolved() filled them
    max_past = lim.max_context - 1
    extra = lim.axes or {}
    lo_x, opt_x, hi_x = ({n: b[i] for n, b in extra.items()} for i in range(3))
    decode = _profile(
        DECODE, inputs,
        {BATCH: 1, LENGTH: 1, PAST_LENGTH: 0, **lo_x},
        {BATCH: lim.opt_batch, LENGTH: 1, PAST_LENGTH: int(lim.opt_context or 0), **opt_x},
        {BATCH: lim.max_batch, LENGTH: 1, PAST_LENGTH: max_past, **hi_x},
    )  # fmt: skip
    prefill = _profile(
        PREFILL, inputs,
        {BATCH: 1, LENGTH: 1, PAST_LENGTH: 0, **lo_x},
        {BATCH: lim.opt_batch, LENGTH: int(lim.opt_length or 1), PAST_LENGTH: 0, **opt_x},
        {BATCH: lim.max_batch, LENGTH: lim.max_length, PAST_LENGTH: max_past, **hi_x},
    )  # fmt: skip
    return [decode, prefill]


def select_profile(profiles: list[Profile], feeds: dict[str, Shape]) -> int:
    """Index of the first profile whose ranges contain every given input shape (decode first, so a
    one-token step picks the decode profile). :class:`ProfileError` when none does."""
    for index, profile in enumerate(profiles):
        if all(
            name in profile.shapes
            and len(shape) == len(profile.shapes[name].min)
            and all(lo <= s <= hi for s, lo, hi in zip(shape, profile.shapes[name].min, profile.shapes[name].max))
            for name, shape in feeds.items()
        ):
            return index
    shown = ", ".join(f"{k}={list(v)}" for k, v in feeds.items())
    raise ProfileError(
        f"no optimization profile covers the input shapes {shown}; rebuild the engine with larger limits"
    )
