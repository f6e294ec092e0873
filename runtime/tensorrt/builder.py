"""Build (or reuse from the cache) a TensorRT engine for an rnnx export directory.

Uses TensorRT's Python API directly (``Builder``, ``OnnxParser``, ``IPluginRegistry.load_library``,
optimization profiles, timing cache). The contract with TensorRT, each part checked here:

* **One load per process and path.** :func:`load_plugin_library` asks the registry for the rnnx creators
  (``get_creator(name, version, namespace)``) first, remembers what it loaded (path -> handle), and calls
  ``load_library`` at most once per library per process: a second ``load_library`` of a library whose
  creators are registered fails in TensorRT (it returns None). The builder and the TensorRT backend both
  go through it. It loads ``librnnx_trt_plugins.so`` (``rnnx.plugins.plugin_library_path()``), the library
  that exports ``getCreators`` and registers nothing by itself (docs/tensorrt.md). Before anything else, also
  for a library this process already loaded, ``rnnx.plugins.check_library_major`` refuses a library compiled
  against another TensorRT major than the running one (one line), and every call checks that the creators the
  export needs are registered (an export of an older plugin version is told to re-export).
* **No silent fallback.** Every rnnx node also carries its ONNX local function (the slow reference body).
  After parsing, :func:`check_plugin_layers` requires that each ``rnnx`` node of the graph became an
  ``IPluginV3`` layer (``LayerType.PLUGIN_V3``); the parser names a node's layer after the node
  (``node.name``, or ``node_of_<first output>`` for an unnamed node; ``_<n>`` appended when the name is
  taken). Otherwise the build fails with one line naming the node and why. The node list is read from the
  ONNX file by :func:`read_rnnx_nodes`, a small protobuf wire-format reader (stdlib only: ``onnx`` is not a
  runtime dependency, and the check must not depend on whether it happens to be installed).
* **Strongly typed precisions.** The network is created ``STRONGLY_TYPED`` (TensorRT 10; TensorRT 11's
  networks are always strongly typed and its flag, deprecated and ignored, is passed only while the enum
  has it): the engine computes in the ONNX file's types, so an fp16 engine is built from an fp16 export,
  without ``BuilderFlag.FP16`` (deprecated for strongly typed networks in 10, removed in 11, as are
  ``BF16`` / ``INT8`` / ``OBEY_PRECISION_CONSTRAINTS``: no precision flag is ever set). Asking for another
  precision than the export's is an error that says how to export it. The exporter writes fp32 and fp16
  (:data:`ENGINE_PRECISIONS`).
* **No TF32 in fp32 engines.** ``BuilderFlag.TF32`` is on by default and strong typing does not turn it
  off: fp32 matmuls and convolutions would then run in TF32 (about 1e-3 relative error on Ampere and
  Hopper, against the fp32 parity tolerance of 1e-4). An fp32 engine clears it (:func:`builder_flags`).
* **Timing cache.** A timing cache TensorRT refuses (another GPU or TensorRT: ``set_timing_cache`` returns
  False) is logged in one line and the build uses a fresh one; a timing cache that cannot be read back or
  saved is logged and never costs the built engine.
* **Cache key.** TensorRT version and major, GPU name, compute capability and index, precision, the builder flags
  set or cleared, profiles, workspace limit, the plugin library's sha256, the ONNX file's sha256 and, for
  an export with external data, the data file's sha256 (:class:`~.cache.KeyParts`).
* **External data.** An export past 2 GB keeps its weights in ``model.onnx.data`` beside ``model.onnx``
  (:data:`~rnnx.runtime.contract.artifact.EXTERNAL_DATA_FILE`). ``parse_from_file`` resolves it against the
  model's path; nothing here reads the model into memory and parses it without its data
  (:func:`read_rnnx_nodes` reads only the graph's nodes, and ``model.onnx`` holds only references then).

TensorRT 10.7 to 10.x or 11.x is required (:data:`._trt.MIN_TENSORRT_VERSION`: from 10.7 the parser prefers a
registered plugin over the node's local function; :data:`._trt.MAX_TENSORRT_MAJOR`). The builder and the
backend share one ``trt.Logger`` (:func:`._trt.tensorrt_logger`).

NOT RUN IN CI: this machine has no GPU and no TensorRT. The code follows the documented TensorRT 10
Python API, in the part that TensorRT 11 keeps; tests/test_tensorrt_contract.py drives it with labelled
stand-ins (TensorRT 10 and 11 shaped) and the tests that need the real thing are marked ``tensorrt`` and
skip without it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from ..contract.artifact import MetadataError, read_metadata, sha256_file
from ..contract.ops import PLUGIN_VERSION
from ..contract.targets import ENGINE_PRECISIONS, PRECISION_RECORDS, Precision, exported_precision, exported_target
from ..contract.targets import precision as as_precision
from ._trt import MIN_TENSORRT_VERSION, require_tensorrt, tensorrt_logger
from .cache import EngineCache, KeyParts, atomic_write_bytes
from .profiles import Profile, ProfileLimits, build_profiles

#: The precisions an engine is built in: those the exporter writes (a strongly typed engine computes in the
#: ONNX file's types).
#: ONNX domain of the rnnx custom nodes (rnnx.runtime.contract.ops.ONNX_DOMAIN; not imported: it pulls in torch).
RNNX_DOMAIN = "rnnx"

Log = Callable[[str], None]


class EngineBuildError(RuntimeError):
    """The engine could not be built (bad export, parser or builder failure); one line."""


# -- device --------------------------------------------------------------------------------------------


def device_index(device: Union[int, str, None] = None) -> int:
    """The CUDA device index of ``device``: an int, ``"cuda:N"``, or ``"cuda"`` / None (torch's current
    device). EngineBuildError for anything else."""
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    text = "cuda" if device is None else str(device)
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if match is None:
        raise EngineBuildError(f"a TensorRT engine is built on a CUDA device ('cuda' or 'cuda:N'), got {device!r}")
    if match.group(1) is not None:
        return int(match.group(1))
    import torch

    return int(torch.cuda.current_device()) if torch.cuda.is_available() else 0


def device_identity(device: Union[int, str, None] = None) -> tuple[str, str, int]:
    """``(GPU name, "major.minor", index)`` of a CUDA device via torch; EngineBuildError without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise EngineBuildError("building a TensorRT engine needs a CUDA GPU; torch.cuda.is_available() is False")
    index = device_index(device)
    if index >= torch.cuda.device_count():
        raise EngineBuildError(f"CUDA device {index} does not exist ({torch.cuda.device_count()} visible)")
    major, minor = torch.cuda.get_device_capability(index)
    return torch.cuda.get_device_name(index), f"{major}.{minor}", index


# -- plugin library ------------------------------------------------------------------------------------


def default_plugin_library() -> Optional[Path]:
    """``rnnx.plugins.plugin_library_path(kind="load_library")`` (``librnnx_trt_plugins.so``, the library
    that exports ``getCreators``) when that module exists and the library is built, else None."""
    try:
        from rnnx import plugins
    except ImportError:
        return None
    try:
        path = plugins.plugin_library_path(kind="load_library")
    except Exception:  # not built / not found: treated as absent
        return None
    return Path(path) if path is not None and Path(path).is_file() else None


#: Libraries this process loaded (or found registered), by real path -> handle (None: registered by another
#: loader, e.g. the self-registering library through a plain dlopen). Guarded by _LOAD_LOCK.
_LOADED: dict[str, Any] = {}
_LOAD_LOCK = threading.Lock()


def required_creators(metadata: dict[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """(name, version, namespace) of the plugin creators an export needs: its ``rnnx.json`` ``ops`` entries,
    which the exporter writes from rnnx.runtime.contract.ops (each op's ``onnx_name``, ``PLUGIN_VERSION``,
    ``PLUGIN_NAMESPACE``)."""
    return tuple(
        (str(op["name"]), str(op.get("plugin_version", "1")), str(op.get("plugin_namespace", RNNX_DOMAIN)))
        for op in metadata.get("ops", [])
    )


def _registered(registry: Any, creator: tuple[str, str, str]) -> bool:
    name, version, namespace = creator
    return registry.get_creator(name, version, namespace) is not None


def _creator_names(creators: Iterable[tuple[str, str, str]]) -> str:
    return ", ".join(f"{ns}::{name} v{version}" for name, version, ns in creators)


def _check_creators(registry: Any, path: Path, creators: Sequence[tuple[str, str, str]]) -> None:
    """EngineBuildError (one line) unless every creator of ``creators`` is registered: names the missing ones and,
    when they are of another plugin version than this rnnx's, says to re-export the model."""
    missing = [c for c in creators if not _registered(registry, c)]
    if not missing:
        return
    old = sorted({version for _, version, _ in missing if version != PLUGIN_VERSION})
    hint = (
        f": the export was written for plugin version {', '.join(old)} and this rnnx's plugins are version "
        f"{PLUGIN_VERSION} (docs/ops.md); re-export the model with this rnnx"
        if old
        else ""
    )
    raise EngineBuildError(f"{path}: loaded, but {_creator_names(missing)} not registered by it{hint}")


def _check_library_major(path: Path, trt: Any) -> None:
    """``rnnx.plugins.check_library_major(path, trt.__version__)``: PluginLibraryMismatch (one line) when the
    library at ``path`` was compiled against another TensorRT major than the running one, or carries no
    version marker (built by an older rnnx: rebuild it)."""
    from rnnx import plugins

    plugins.check_library_major(path, str(getattr(trt, "__version__", "unknown")))


def load_plugin_library(
    trt: Any, path: Union[str, Path], creators: Sequence[tuple[str, str, str]] = (), log: Optional[Log] = None,
) -> Any:  # fmt: skip
    """Registers the rnnx creators from the library at ``path`` once per process; returns the handle
    (None when the creators were already registered by someone else). ``creators``: (name, version,
    namespace) of those the caller needs, :func:`required_creators` of the export.

    Order: first ``rnnx.plugins.check_library_major`` (``PluginLibraryMismatch`` for a library of another
    TensorRT major, on every call); a path this process already loaded is not loaded again, and its creators are
    checked (EngineBuildError naming the missing ones, with the re-export hint for an export of another plugin
    version); when every creator in ``creators`` is already registered (``registry.get_creator``), nothing is
    loaded; when only some are, EngineBuildError (another rnnx library is loaded, and ``load_library`` would
    fail); otherwise ``trt.get_plugin_registry().load_library(path)`` once, and EngineBuildError when it returns
    None or the creators are not registered after it.
    """
    log = log or (lambda message: None)
    path = Path(path)
    _check_library_major(path, trt)
    key = os.path.realpath(path)
    with _LOAD_LOCK:
        registry = trt.get_plugin_registry()
        if key in _LOADED:
            _check_creators(registry, path, creators)
            return _LOADED[key]
        present = [c for c in creators if _registered(registry, c)]
        if creators and len(present) == len(creators):
            log(f"rnnx plugin creators already registered; not loading {path} again")
            _LOADED[key] = None
            return None
        if present:
            missing = [c for c in creators if c not in present]
            raise EngineBuildError(
                f"{path}: {_creator_names(present)} already registered but {_creator_names(missing)} not: another "
                "rnnx plugin library is loaded in this process, and TensorRT's load_library would fail"
            )
        handle = registry.load_library(str(path))
        if handle is None:
            hint = ""
            if path.name.endswith("_static.so"):
                hint = " (the self-registering library is for plain dlopen; load_library takes librnnx_trt_plugins.so)"
            raise EngineBuildError(f"{path}: TensorRT could not load the plugin library{hint}")
        _LOADED[key] = handle  # loaded: never load_library it again, even when the check below fails
        _check_creators(registry, path, creators)
        log(f"plugin library loaded: {path}")
        return handle


# -- the rnnx nodes of an ONNX file ---------------------------------------------------------------------


@dataclass(frozen=True)
class OnnxNode:
    """An rnnx node of the main graph: what the parser names its layer and which creator it needs."""

    name: str
    op_type: str
    domain: str
    first_output: str
    plugin_version: Optional[str] = None
    plugin_namespace: Optional[str] = None

    @property
    def layer_name(self) -> str:
        """The name TensorRT's ONNX parser gives the node's layer (its getNodeName)."""
        return self.name if self.name or not self.first_output else f"node_of_{self.first_output}"

    @property
    def creator(self) -> tuple[str, str, str]:
        return (self.op_type, self.plugin_version or "1", self.plugin_namespace or self.domain)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, Any]]:
    """Protobuf wire-format fields of ``data[start:end]``: (number, int) or (number, (start, end)) for
    length-delimited ones; fixed-width ones are skipped."""
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > end:
                raise ValueError("truncated length-delimited field")
            yield number, (pos, pos + length)
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
    if pos != end:
        raise ValueError("field overruns its message")


def read_rnnx_nodes(onnx_path: Union[str, Path], domain: str = RNNX_DOMAIN) -> list[OnnxNode]:
    """The nodes of ``domain`` in the main graph of an ONNX file, in graph order.

    Only the nodes are read: initializers (GraphProto field 5) are skipped whether they hold their bytes or
    reference ONNX external data, so a model with external data needs only its ``model.onnx``.

    Reads the protobuf wire format directly (ModelProto.graph = 7; GraphProto.node = 1; NodeProto: output 2,
    name 3, op_type 4, attribute 5, domain 7; AttributeProto: name 1, s 4), so it needs neither ``onnx`` nor
    protobuf. EngineBuildError when the file is not a readable ONNX model.
    """
    data = memoryview(Path(onnx_path).read_bytes())

    def text(span: tuple[int, int]) -> str:
        return bytes(data[span[0] : span[1]]).decode("utf-8", errors="replace")

    nodes: list[OnnxNode] = []
    try:
        for number, graph in _fields(data, 0, len(data)):
            if number != 7 or not isinstance(graph, tuple):
                continue
            for gnum, span in _fields(data, *graph):
                if gnum != 1 or not isinstance(span, tuple):
                    continue
                values: dict[str, str] = {}
                outputs: list[str] = []
                attributes: dict[str, str] = {}
                for nnum, value in _fields(data, *span):
                    if not isinstance(value, tuple):
                        continue
                    if nnum == 2:
                        outputs.append(text(value))
                    elif nnum in (3, 4, 7):
                        values[{3: "name", 4: "op_type", 7: "domain"}[nnum]] = text(value)
                    elif nnum == 5:
                        attr = {anum: text(v) for anum, v in _fields(data, *value) if anum in (1, 4)}
                        if 1 in attr and 4 in attr:
                            attributes[attr[1]] = attr[4]
                if values.get("domain", "") != domain:
                    continue
                nodes.append(OnnxNode(
                    values.get("name", ""), values.get("op_type", ""), domain, outputs[0] if outputs else "",
                    attributes.get("plugin_version"), attributes.get("plugin_namespace"),
                ))  # fmt: skip
    except (ValueError, IndexError) as e:
        raise EngineBuildError(f"{onnx_path}: not a readable ONNX model ({e})") from None
    return nodes


# -- the post-parse check ------------------------------------------------------------------------------


def check_plugin_layers(trt: Any, network: Any, nodes: Sequence[OnnxNode], registry: Any = None) -> None:
    """Every node of ``nodes`` became an IPluginV3 layer of ``network``, else EngineBuildError (one line
    naming the first node that did not, and why: its creator is not registered, or this TensorRT imported
    the node's local function although the creator is registered).

    A node's layer is the one the parser named after it: ``layer_name`` exactly, or with a ``_<n>`` suffix
    the parser appends when the name is already taken. Each plugin layer stands for one node only: exact
    names are matched first, and a suffixed name that is another node's own name, or that an earlier node
    already took, never counts."""
    plugin_v3 = trt.LayerType.PLUGIN_V3
    plugin_layers = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type == plugin_v3:
            plugin_layers.append(str(layer.name))
    own_names = {node.layer_name for node in nodes}
    taken = {name for name in own_names if name in plugin_layers}
    for node in nodes:
        name = node.layer_name
        if name in taken:
            continue
        suffixed = re.compile(re.escape(name) + r"_\d+")
        match = next((n for n in plugin_layers if n not in taken and n not in own_names and suffixed.fullmatch(n)),
                     None)  # fmt: skip
        if match is not None:
            taken.add(match)
            continue
        op, version, namespace = node.creator
        registry = registry if registry is not None else trt.get_plugin_registry()
        if registry.get_creator(op, version, namespace) is None:
            why = (
                f"plugin {namespace}::{op} v{version} is not registered (load librnnx_trt_plugins.so with "
                "IPluginRegistry.load_library before parsing), so the parser imported its ONNX local function"
            )
        else:
            minimum = ".".join(str(v) for v in MIN_TENSORRT_VERSION)
            why = (
                f"plugin {namespace}::{op} v{version} is registered, but TensorRT {getattr(trt, '__version__', '?')} "
                f"imported the node otherwise (its ONNX local function; TensorRT < {minimum} prefers local functions)"
            )
        raise EngineBuildError(f"rnnx node {name!r} ({op}) did not become a TensorRT plugin layer: {why}")


# -- precision and cache key ---------------------------------------------------------------------------


def builder_flags(precision: Union[str, Precision]) -> dict[str, bool]:
    """The ``BuilderFlag`` s an engine of ``precision`` sets (True) or clears (False) beyond TensorRT's defaults,
    by name: ``TF32`` cleared for the reference precision, fp32 (kept in the cache key, so an engine built with
    it never matches)."""
    return {"TF32": False} if as_precision(precision, exported=False).reference else {}


def resolve_precision(metadata: dict[str, Any], precision: Optional[str]) -> str:
    """The engine precision: ``precision`` or the export's; ValueError for an unknown one, EngineBuildError
    for one other than the export's (the network is strongly typed: the ONNX types are the engine's)."""
    exported = exported_precision(metadata).name
    chosen = precision or exported
    record = PRECISION_RECORDS.get(chosen)
    if record is None or not record.engine:
        raise ValueError(f"unsupported engine precision {chosen!r}; supported: {', '.join(ENGINE_PRECISIONS)}")
    if chosen != exported:
        raise EngineBuildError(
            f"the export is {exported} and engines are built strongly typed from the ONNX types: for a {chosen} "
            f"engine, export with --precision {chosen}"
        )
    return chosen


def key_parts(
    metadata: dict[str, Any], precision: str, profiles: list[Profile], plugin_library: Optional[Path],
    tensorrt_version: str, gpu: tuple[str, str, int], *, workspace_bytes: Optional[int] = None,
    onnx_sha256: Optional[str] = None, external_data_sha256: Optional[str] = None,
) -> KeyParts:  # fmt: skip
    """The cache :class:`KeyParts` of an engine (pure; TensorRT version, GPU ``(name, capability, index)``
    and the ONNX file's sha256 (default: the export's ``model_sha256``) are passed in). For an export with
    external data the key also holds the data file's sha256 (default: the one ``rnnx.json`` records), so
    new weights under the same ``model.onnx`` never hit an old engine."""
    if external_data_sha256 is None and metadata.get("external_data"):
        external_data_sha256 = metadata["external_data"]["sha256"]
    return KeyParts.create(
        model_sha256=onnx_sha256 or metadata["model_sha256"], tensorrt_version=tensorrt_version, gpu_name=gpu[0],
        compute_capability=gpu[1], device_index=gpu[2], precision=precision, profiles=profiles,
        plugin_library=plugin_library, workspace_bytes=workspace_bytes, external_data_sha256=external_data_sha256,
        builder_flags=builder_flags(precision),
    )  # fmt: skip


# -- build ---------------------------------------------------------------------------------------------


def build_engine(
    model_dir: Union[str, Path],
    precision: Optional[str] = None,
    profiles: Optional[list[Profile]] = None,
    plugin_library: Optional[Union[str, Path]] = None,
    timing_cache: Optional[Union[str, Path]] = None,
    cache_dir: Optional[Union[str, Path]] = None,
    *,
    limits: Optional[ProfileLimits] = None,
    workspace_bytes: Optional[int] = None,
    device: Union[int, str, None] = None,
    log: Optional[Log] = None,
) -> Path:
    """The path of a cached engine for ``model_dir`` (``rnnx.json`` + ``model.onnx``), built if needed.

    ``precision``: the export's (fp32 | fp16; another one is an error: export with that precision);
    ``profiles`` default to :func:`build_profiles` with ``limits``; ``plugin_library`` defaults to the built
    ``librnnx_trt_plugins.so``; ``timing_cache`` is loaded when it exists and saved after a build;
    ``cache_dir`` defaults to :func:`rnnx.runtime.tensorrt.cache.default_cache_dir`; ``device``: the CUDA
    device to build for (``"cuda:N"`` or N; default torch's current device). Raises
    :class:`TensorRTNotInstalled` / :class:`TensorRTTooOld` first, then :class:`EngineBuildError`.
    """
    log = log or (lambda message: None)
    trt = require_tensorrt()
    model_dir = Path(model_dir)
    try:
        meta = read_metadata(model_dir)
    except MetadataError as e:
        raise EngineBuildError(str(e)) from None
    if not exported_target(meta).builds_engine:
        raise EngineBuildError(f"{model_dir}: exported for target {meta['target']!r}; TensorRT needs --target tensorrt")
    precision = resolve_precision(meta, precision)
    profiles = profiles if profiles is not None else build_profiles(meta, limits)
    plugin = None
    if meta["ops"]:
        plugin = Path(plugin_library) if plugin_library is not None else default_plugin_library()
        if plugin is None:
            raise EngineBuildError(
                "the export uses rnnx ops but the rnnx TensorRT plugin library is not built "
                "(python -m rnnx.plugins, or pass plugin_library=...)"
            )
    onnx_path = model_dir / meta["model_file"]  # its external data, if any, was just verified by read_metadata
    gpu = device_identity(device)
    parts = key_parts(meta, precision, profiles, plugin, str(trt.__version__), gpu,
                      workspace_bytes=workspace_bytes, onnx_sha256=sha256_file(onnx_path))  # fmt: skip
    cache = EngineCache(cache_dir)
    found = cache.lookup(parts)
    if found.hit:
        log(f"engine cache hit: {found.path}")
        assert found.path is not None
        return found.path
    if found.problem:
        log(f"discarding cache entry: {found.problem}")
        cache.remove(parts)
    logger = tensorrt_logger(trt)
    if plugin is not None:
        load_plugin_library(trt, plugin, required_creators(meta), log=log)
    import torch

    with torch.cuda.device(gpu[2]):
        data = _build(trt, logger, onnx_path, precision, profiles, timing_cache, workspace_bytes, log)
    path = cache.store(parts, data)
    log(f"engine written: {path}")
    return path


def apply_builder_flags(trt: Any, config: Any, precision: str, log: Optional[Log] = None) -> None:
    """Sets / clears :func:`builder_flags` on an ``IBuilderConfig``. A flag this TensorRT's ``BuilderFlag`` enum
    lacks (a major that removed it) cannot be on: clearing it is skipped with a log line; setting it is an
    EngineBuildError (one line)."""
    log = log or (lambda message: None)
    for name, on in builder_flags(precision).items():
        flag = getattr(trt.BuilderFlag, name, None)
        if flag is None:
            if on:
                raise EngineBuildError(
                    f"TensorRT {getattr(trt, '__version__', '?')} has no BuilderFlag.{name}, which a {precision} "
                    "engine needs"
                )
            log(f"TensorRT {getattr(trt, '__version__', '?')} has no BuilderFlag.{name}: nothing to clear")
            continue
        if on:
            config.set_flag(flag)
        else:
            config.clear_flag(flag)


def network_creation_flags(trt: Any) -> int:
    """The ``create_network`` flags: ``1 << STRONGLY_TYPED`` where ``NetworkDefinitionCreationFlag`` has it
    (TensorRT 10; deprecated and ignored in 11, whose networks are always strongly typed), else 0."""
    flags = getattr(trt, "NetworkDefinitionCreationFlag", None)
    strongly_typed = getattr(flags, "STRONGLY_TYPED", None) if flags is not None else None
    return 0 if strongly_typed is None else 1 << int(strongly_typed)


def _set_timing_cache(config: Any, path: Optional[Path], log: Log) -> None:
    """Gives ``config`` the timing cache read from ``path`` (a fresh one when there is no file, or when TensorRT
    cannot read it or refuses it: ``set_timing_cache`` returns False for a cache of another GPU or TensorRT).
    Each fallback is one log line; when TensorRT refuses a fresh cache too, the build runs without one."""

    def use(blob: bytes) -> bool:
        try:
            tcache = config.create_timing_cache(blob)
            return tcache is not None and bool(config.set_timing_cache(tcache, ignore_mismatch=False))
        except Exception:  # the Python API raises where the C++ API returns null / false
            return False

    blob = b""
    if path is not None and path.is_file():
        try:
            blob = path.read_bytes()
        except OSError as e:
            log(f"timing cache {path} unreadable ({e}); building with a fresh one")
    if blob:
        if use(blob):
            return
        log(f"timing cache {path}: TensorRT refused it (made on another GPU or TensorRT?); building with a fresh one")
    if not use(b""):
        log("TensorRT refused a fresh timing cache; building without one")


def _save_timing_cache(config: Any, path: Path, log: Log) -> None:
    """Writes the config's timing cache to ``path``; any problem (no cache, serialization, the write) is one log
    line: the engine that was just built is never lost to its timing cache."""
    try:
        tcache = config.get_timing_cache()
        if tcache is None:
            log(f"timing cache not saved to {path}: the build had none")
            return
        atomic_write_bytes(path, bytes(memoryview(tcache.serialize())))
    except Exception as e:  # a cache problem never costs the engine
        log(f"timing cache not saved to {path}: {type(e).__name__}: {e}")


def _build(
    trt: Any, logger: Any, onnx_path: Path, precision: str, profiles: list[Profile],
    timing_cache: Optional[Union[str, Path]], workspace_bytes: Optional[int], log: Log,
) -> bytes:  # fmt: skip
    """Parses ``onnx_path`` into a strongly typed network, checks its plugin layers and builds it."""
    builder = trt.Builder(logger)
    # Strongly typed: the ONNX file's types are the engine's (an fp16 export gives an fp16 engine).
    network = builder.create_network(network_creation_flags(trt))
    parser = trt.OnnxParser(network, logger)
    log(f"parsing {onnx_path} ({precision}, strongly typed)")
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        first = errors[0].strip().splitlines()[0] if errors and errors[0].strip() else "unknown error"
        raise EngineBuildError(f"TensorRT's ONNX parser failed: {first}")
    check_plugin_layers(trt, network, read_rnnx_nodes(onnx_path))
    config = builder.create_builder_config()
    apply_builder_flags(trt, config, precision, log)
    if workspace_bytes is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_bytes))
    for profile in profiles:
        index = config.add_optimization_profile(profile.apply(builder.create_optimization_profile()))
        if index < 0:
            raise EngineBuildError(f"TensorRT rejected optimization profile {profile.name!r}")
    cache_path = Path(timing_cache) if timing_cache is not None else None
    _set_timing_cache(config, cache_path, log)
    log(f"building the engine ({precision}, profiles: {', '.join(p.name for p in profiles)})")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise EngineBuildError("TensorRT's builder failed (see the TensorRT log above)")
    data = bytes(memoryview(serialized))
    if cache_path is not None:
        _save_timing_cache(config, cache_path, log)
    return data
