"""Build (or reuse from the cache) a TensorRT engine for an rnnx export directory.

Uses TensorRT's Python API directly (``Builder``, ``OnnxParser``, ``IPluginRegistry.load_library``,
optimization profiles, ``BuilderFlag.FP16`` / ``BF16``, timing cache). The rnnx custom nodes carry
``plugin_namespace`` / ``plugin_version``, so with the rnnx plugin library loaded the ONNX parser
imports them as plugins; without it the parser falls back to each node's ONNX local function (the
slow reference body). ``build_engine`` therefore requires the plugin library whenever the export
uses rnnx ops, unless ``allow_function_fallback=True``.

NOT RUN IN CI: this machine has no GPU and no TensorRT. The code follows the documented
TensorRT 10 Python API; tests that need it are marked ``tensorrt`` and skip without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional, Union

from ..artifact import MetadataError, read_metadata
from ._trt import require_tensorrt
from .cache import EngineCache, KeyParts, atomic_write_bytes
from .profiles import Profile, ProfileLimits, build_profiles

ENGINE_PRECISIONS = ("fp32", "fp16", "bf16")

Log = Callable[[str], None]


class EngineBuildError(RuntimeError):
    """The engine could not be built (bad export, parser or builder failure); one line."""


def device_identity(device_index: int = 0) -> tuple[str, str]:
    """``(GPU name, "major.minor")`` of a CUDA device via torch; EngineBuildError without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise EngineBuildError("building a TensorRT engine needs a CUDA GPU; torch.cuda.is_available() is False")
    major, minor = torch.cuda.get_device_capability(device_index)
    return torch.cuda.get_device_name(device_index), f"{major}.{minor}"


def default_plugin_library() -> Optional[Path]:
    """``rnnx.plugins.plugin_library_path()`` when that module exists and the library is built, else None."""
    try:
        from rnnx import plugins
    except ImportError:
        return None
    try:
        path = plugins.plugin_library_path()
    except Exception:  # not built / not found: treated as absent
        return None
    return Path(path) if path is not None and Path(path).is_file() else None


def resolve_precision(metadata: dict[str, Any], precision: Optional[str]) -> str:
    """The engine precision: ``precision`` or the export's; ValueError for an unknown one."""
    chosen = precision or metadata.get("precision", "fp32")
    if chosen not in ENGINE_PRECISIONS:
        raise ValueError(f"unsupported engine precision {chosen!r}; supported: {', '.join(ENGINE_PRECISIONS)}")
    return chosen


def key_parts(
    metadata: dict[str, Any], precision: str, profiles: list[Profile], plugin_library: Optional[Path],
    tensorrt_version: str, gpu: tuple[str, str],
) -> KeyParts:  # fmt: skip
    """The cache :class:`KeyParts` of an engine (pure; TensorRT version and GPU are passed in)."""
    return KeyParts.create(
        model_sha256=metadata["model_sha256"], tensorrt_version=tensorrt_version, gpu_name=gpu[0],
        compute_capability=gpu[1], precision=precision, profiles=profiles, plugin_library=plugin_library,
    )  # fmt: skip


def load_plugin_library(trt: Any, path: Path) -> None:
    """Registers the rnnx plugins: ``trt.get_plugin_registry().load_library(path)``."""
    handle = trt.get_plugin_registry().load_library(str(path))
    if handle is None:
        raise EngineBuildError(f"{path}: TensorRT could not load the plugin library")


def build_engine(
    model_dir: Union[str, Path],
    precision: Optional[str] = None,
    profiles: Optional[list[Profile]] = None,
    plugin_library: Optional[Union[str, Path]] = None,
    timing_cache: Optional[Union[str, Path]] = None,
    cache_dir: Optional[Union[str, Path]] = None,
    *,
    limits: Optional[ProfileLimits] = None,
    allow_function_fallback: bool = False,
    workspace_bytes: Optional[int] = None,
    log: Optional[Log] = None,
) -> Path:
    """The path of a cached engine for ``model_dir`` (``rnnx.json`` + ``model.onnx``), built if needed.

    ``precision``: fp32 | fp16 | bf16 (default: the export's); ``profiles`` default to
    :func:`build_profiles` with ``limits``; ``plugin_library`` defaults to the built rnnx plugin
    library; ``timing_cache`` is loaded when it exists and saved after a build; ``cache_dir``
    defaults to :func:`rnnx.runtime.tensorrt.cache.default_cache_dir`. Raises
    :class:`TensorRTNotInstalled` first when TensorRT is absent, then :class:`EngineBuildError`.
    """
    log = log or (lambda message: None)
    trt = require_tensorrt()
    model_dir = Path(model_dir)
    try:
        meta = read_metadata(model_dir)
    except MetadataError as e:
        raise EngineBuildError(str(e)) from None
    if meta["target"] != "tensorrt":
        raise EngineBuildError(f"{model_dir}: exported for target {meta['target']!r}; TensorRT needs --target tensorrt")
    precision = resolve_precision(meta, precision)
    profiles = profiles if profiles is not None else build_profiles(meta, limits)
    plugin = Path(plugin_library) if plugin_library is not None else default_plugin_library()
    if meta["ops"] and plugin is None and not allow_function_fallback:
        raise EngineBuildError(
            "the export uses rnnx ops but the rnnx TensorRT plugin library is not built "
            "(build plugins/ or pass plugin_library=...)"
        )
    parts = key_parts(meta, precision, profiles, plugin, str(trt.__version__), device_identity())
    cache = EngineCache(cache_dir)
    found = cache.lookup(parts)
    if found.hit:
        log(f"engine cache hit: {found.path}")
        assert found.path is not None
        return found.path
    if found.problem:
        log(f"discarding cache entry: {found.problem}")
        cache.remove(parts)
    logger = trt.Logger(trt.Logger.WARNING)
    if plugin is not None:
        load_plugin_library(trt, plugin)
    data = _build(trt, logger, model_dir / meta["model_file"], precision, profiles, timing_cache, workspace_bytes, log)
    path = cache.store(parts, data)
    log(f"engine written: {path}")
    return path


def _build(
    trt: Any, logger: Any, onnx_path: Path, precision: str, profiles: list[Profile],
    timing_cache: Optional[Union[str, Path]], workspace_bytes: Optional[int], log: Log,
) -> bytes:  # fmt: skip
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
    parser = trt.OnnxParser(network, logger)
    log(f"parsing {onnx_path}")
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise EngineBuildError(f"TensorRT's ONNX parser failed: {errors[0] if errors else 'unknown error'}")
    config = builder.create_builder_config()
    if workspace_bytes is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_bytes))
    if precision == "fp16":
        config.set_flag(trt.BuilderFlag.FP16)
    elif precision == "bf16":
        config.set_flag(trt.BuilderFlag.BF16)
    for profile in profiles:
        index = config.add_optimization_profile(profile.apply(builder.create_optimization_profile()))
        if index < 0:
            raise EngineBuildError(f"TensorRT rejected optimization profile {profile.name!r}")
    cache_path = Path(timing_cache) if timing_cache is not None else None
    blob = cache_path.read_bytes() if cache_path is not None and cache_path.is_file() else b""
    tcache = config.create_timing_cache(blob)
    config.set_timing_cache(tcache, ignore_mismatch=False)
    log(f"building the engine ({precision}, profiles: {', '.join(p.name for p in profiles)})")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise EngineBuildError("TensorRT's builder failed (see the TensorRT log above)")
    if cache_path is not None:
        atomic_write_bytes(cache_path, bytes(memoryview(config.get_timing_cache().serialize())))
    return bytes(memoryview(serialized))
