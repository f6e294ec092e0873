"""The on-disk engine cache: keys, atomic writes, and detection of corrupt or foreign entries.

A TensorRT engine is valid only for the exact ONNX file (its sha256, and its external data file's
sha256 for an export with external data: the weights live there), TensorRT version (and its major, an
explicit part: an engine of TensorRT 10 is never served to 11, whatever the version strings), GPU (name,
compute capability and device index), precision, optimization profiles, workspace limit and plugin
library (the sha256 of the file, not its path) it was built with. :class:`KeyParts` holds those;
:meth:`KeyParts.key` is the sha256 of their canonical JSON and names the files::

    <cache dir>/<model_sha256[:12]>-<precision>-<key[:24]>.engine   the serialized engine
    <cache dir>/<same stem>.json                                     sidecar: key, parts, engine sha256, size

Writes go to a temporary file in the cache dir, are fsynced, then ``os.replace``\\ d, engine first and
sidecar last, so a reader sees either the old complete entry, or a new engine whose sidecar does not
match it yet (detected as corrupt and rebuilt), never a half-written engine that passes. A lookup
checks that the sidecar's key and parts match and that the engine's sha256 and size are the recorded
ones. Cache dir: ``$RNNX_ENGINE_CACHE``, else ``$XDG_CACHE_HOME/rnnx/engines``, else
``~/.cache/rnnx/engines``. Pure Python: no TensorRT needed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Union

from ..contract.artifact import atomic_write_bytes, sha256_file
from ._trt import tensorrt_major as major_of_version
from .profiles import Profile

CACHE_ENV = "RNNX_ENGINE_CACHE"
SIDECAR_FORMAT = "rnnx-trt-engine"
#: 3: the key parts hold ``tensorrt_major``.
SIDECAR_VERSION = 3


def default_cache_dir() -> Path:
    """``$RNNX_ENGINE_CACHE`` | ``$XDG_CACHE_HOME/rnnx/engines`` | ``~/.cache/rnnx/engines``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "rnnx" / "engines"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class KeyParts:
    """Everything an engine depends on. ``model_sha256`` is the sha256 of the ONNX file; ``profiles`` are
    :meth:`Profile.to_dict` dicts; ``device_index`` is the CUDA device the engine is built for;
    ``workspace_bytes`` is the builder's workspace limit (None: TensorRT's default); ``plugin_sha256`` is the
    sha256 of the plugin library file, None when no plugin library is needed; ``external_data_sha256`` is
    the sha256 of the ONNX file's external data file (its weights), None for a single-file model;
    ``builder_flags`` the ``BuilderFlag`` s set (True) or cleared (False) beyond TensorRT's defaults;
    ``tensorrt_major`` the major of ``tensorrt_version`` (filled in from it when not given; an engine never
    crosses a major: the plugin library and the engine format are per major)."""

    model_sha256: str
    tensorrt_version: str
    gpu_name: str
    compute_capability: str
    precision: str
    profiles: tuple[Any, ...]
    plugin_sha256: Optional[str] = None
    device_index: int = 0
    workspace_bytes: Optional[int] = None
    external_data_sha256: Optional[str] = None
    builder_flags: tuple[tuple[str, bool], ...] = ()
    tensorrt_major: Optional[int] = None

    def __post_init__(self) -> None:
        if self.tensorrt_major is None:  # ValueError for a version string without a major
            object.__setattr__(self, "tensorrt_major", major_of_version(self.tensorrt_version))

    @classmethod
    def create(
        cls, *, model_sha256: str, tensorrt_version: str, gpu_name: str,
        compute_capability: Union[str, tuple[int, int]], precision: str, profiles: list[Profile],
        plugin_library: Optional[Union[str, Path]] = None, device_index: int = 0,
        workspace_bytes: Optional[int] = None, external_data_sha256: Optional[str] = None,
        builder_flags: Optional[dict[str, bool]] = None,
    ) -> KeyParts:  # fmt: skip
        """Builds the parts, hashing ``plugin_library`` (a file) when given."""
        if not isinstance(compute_capability, str):
            compute_capability = ".".join(str(int(v)) for v in compute_capability)
        plugin = sha256_file(plugin_library) if plugin_library is not None else None
        workspace = int(workspace_bytes) if workspace_bytes is not None else None
        return cls(model_sha256, str(tensorrt_version), str(gpu_name), compute_capability, precision,
                   tuple(p.to_dict() for p in profiles), plugin, int(device_index), workspace,
                   external_data_sha256, tuple(sorted((builder_flags or {}).items())))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["profiles"] = list(self.profiles)
        return out

    def key(self) -> str:
        """Hex sha256 of the canonical JSON of the parts (stable across runs and dict orders)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def file_stem(self) -> str:
        """``<model_sha256[:12]>-<precision>-<key[:24]>``: readable and unique per key."""
        return f"{self.model_sha256[:12]}-{self.precision}-{self.key()[:24]}"


@dataclass(frozen=True)
class Lookup:
    """A cache lookup: ``path`` of a valid engine (None otherwise) and, for an invalid entry, why."""

    path: Optional[Path]
    problem: Optional[str] = None

    @property
    def hit(self) -> bool:
        return self.path is not None


class EngineCache:
    """Engines in one directory, keyed by :class:`KeyParts`."""

    def __init__(self, directory: Optional[Union[str, Path]] = None) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else default_cache_dir()

    def engine_path(self, parts: KeyParts) -> Path:
        return self.directory / f"{parts.file_stem()}.engine"

    def sidecar_path(self, parts: KeyParts) -> Path:
        return self.directory / f"{parts.file_stem()}.json"

    def lookup(self, parts: KeyParts) -> Lookup:
        """A valid cached engine for ``parts``, or a miss (with ``problem`` set when an entry exists
        but is corrupt, truncated, or was built for other parts)."""
        engine, sidecar = self.engine_path(parts), self.sidecar_path(parts)
        if not engine.is_file() and not sidecar.is_file():
            return Lookup(None)
        if not engine.is_file():
            return Lookup(None, f"{engine.name}: engine file missing (sidecar without engine)")
        if not sidecar.is_file():
            return Lookup(None, f"{sidecar.name}: sidecar missing; engine of unknown origin")
        try:
            info = json.loads(sidecar.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            return Lookup(None, f"{sidecar.name}: unreadable sidecar ({e})")
        if (
            not isinstance(info, dict)
            or info.get("format") != SIDECAR_FORMAT
            or info.get("format_version") != SIDECAR_VERSION
        ):
            return Lookup(None, f"{sidecar.name}: not an rnnx engine sidecar")
        recorded = info.get("parts")
        if isinstance(recorded, dict) and recorded.get("tensorrt_major") != parts.tensorrt_major:
            return Lookup(
                None, f"{sidecar.name}: built with TensorRT {recorded.get('tensorrt_version')} (major "
                f"{recorded.get('tensorrt_major')}), this is TensorRT {parts.tensorrt_version} (foreign entry)"
            )  # fmt: skip
        if info.get("key") != parts.key() or recorded != json.loads(json.dumps(parts.to_dict())):
            return Lookup(None, f"{sidecar.name}: built for other key parts (foreign entry)")
        size = engine.stat().st_size
        if size != info.get("engine_bytes"):
            return Lookup(
                None, f"{engine.name}: {size} bytes, sidecar records {info.get('engine_bytes')} (truncated or replaced)"
            )
        if sha256_file(engine) != info.get("engine_sha256"):
            return Lookup(None, f"{engine.name}: sha256 does not match its sidecar (corrupt or replaced)")
        return Lookup(engine)

    def store(self, parts: KeyParts, engine_bytes: bytes) -> Path:
        """Atomically writes the engine, then its sidecar; returns the engine path."""
        if not engine_bytes:
            raise ValueError("refusing to cache an empty engine")
        engine = self.engine_path(parts)
        atomic_write_bytes(engine, bytes(engine_bytes))
        sidecar = {
            "format": SIDECAR_FORMAT, "format_version": SIDECAR_VERSION, "key": parts.key(),
            "parts": parts.to_dict(), "engine_file": engine.name,
            "engine_sha256": sha256_bytes(bytes(engine_bytes)), "engine_bytes": len(engine_bytes),
        }  # fmt: skip
        atomic_write_bytes(self.sidecar_path(parts), (json.dumps(sidecar, indent=1) + "\n").encode())
        return engine

    def remove(self, parts: KeyParts) -> None:
        """Deletes an entry (both files), e.g. one :meth:`lookup` found corrupt."""
        self.engine_path(parts).unlink(missing_ok=True)
        self.sidecar_path(parts).unlink(missing_ok=True)
