"""The contract between rnnx's engine builder / backend and TensorRT 10 and 11, on CPU.

TensorRT cannot run here (no GPU, no TensorRT library), so each test drives rnnx's code with a
STAND-IN for the TensorRT object it talks to, written against TensorRT's documented behaviour:

* ``StandInRegistry`` plays ``tensorrt.IPluginRegistry`` (``load_library``, ``get_creator``,
  ``all_creators``, ``register_creator``). Like TensorRT's registry, ``load_library`` registers what the
  library's ``getCreators`` returns and FAILS (returns None) when one of those creators is already
  registered, e.g. on a second load of the same library, and ``register_creator`` refuses a duplicate
  (name, version, namespace).
* ``StandInNetwork`` / ``StandInLayer`` play ``INetworkDefinition`` / ``ILayer`` (``num_layers``,
  ``get_layer(i)``, ``layer.type``, ``layer.name``) as TensorRT's ONNX parser leaves them: one layer per
  node, named after the node (``node_of_<output>`` for an unnamed one).
* ``StandInTensorRT`` plays the ``tensorrt`` module for ``_build``: it records the network creation flags
  and the builder flags. ``StandInTensorRT11`` plays TensorRT 11's module: its ``BuilderFlag`` has no
  ``FP16`` / ``BF16`` / ``INT8`` / ``OBEY_PRECISION_CONSTRAINTS`` (removed in 11; NvInfer.h of 11.1), so any
  use of them fails as it would there.
* A plugin library is a small file holding the version marker a real build embeds
  (``rnnx-trt-plugins:tensorrt-headers=<version>\0``): ``rnnx.plugins.check_library_major`` reads only that
  marker, so the stand-in needs no CUDA build (:func:`stand_in_library`).

The real objects are exercised by the tests marked ``tensorrt`` (tests/test_tensorrt_layer.py) and by
``bash scripts/gpu_check.sh`` on a GPU machine with TensorRT.
"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path
from typing import Any, Optional

import pytest

from rnnx.export import read_metadata
from rnnx.runtime.contract import ops as spec
from rnnx.runtime.tensorrt import (
    MIN_TENSORRT_VERSION,
    ProfileLimits,
    TensorRTNotInstalled,
    TensorRTTooOld,
    build_profiles,
    builder,
    require_tensorrt,
)
from rnnx.runtime.tensorrt.builder import (
    EngineBuildError,
    OnnxNode,
    check_plugin_layers,
    load_plugin_library,
    read_rnnx_nodes,
    required_creators,
    resolve_precision,
)

#: (name, version, namespace) of every creator the library registers, from the op records.
CREATORS = tuple((op.onnx_name, spec.PLUGIN_VERSION, spec.PLUGIN_NAMESPACE) for op in spec.ALL_OPS)
FIRST, SECOND = (op.onnx_name for op in spec.ALL_OPS[:2])
#: The plugin version every node carries and every creator reports.
VERSION = spec.PLUGIN_VERSION

# -- stand-ins ------------------------------------------------------------------------------------------


class StandInCreator:
    """A registered creator: ``name``, ``plugin_version``, ``plugin_namespace`` as TensorRT's Python API has them."""

    def __init__(self, name: str, version: str, namespace: str) -> None:
        self.name, self.plugin_version, self.plugin_namespace = name, version, namespace

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.name, self.plugin_version, self.plugin_namespace)


class StandInRegistry:
    """STAND-IN for ``tensorrt.IPluginRegistry`` (TensorRT cannot run here). ``libraries`` maps a path to the
    creators its ``getCreators`` returns. Fails like TensorRT's registry: ``load_library`` returns None when a
    creator of the library is already registered (a second load), ``register_creator`` refuses duplicates."""

    def __init__(self, libraries: dict[str, list[tuple[str, str, str]]]) -> None:
        self.libraries = libraries
        self._creators: list[StandInCreator] = []
        self.load_library_calls: list[str] = []
        self.register_calls: list[tuple[str, str, str]] = []

    @property
    def all_creators(self) -> list[StandInCreator]:
        return list(self._creators)

    def get_creator(self, name: str, version: str, plugin_namespace: str = "") -> Optional[StandInCreator]:
        return next((c for c in self._creators if c.key == (name, version, plugin_namespace)), None)

    def register_creator(self, creator: StandInCreator, plugin_namespace: str = "") -> bool:
        self.register_calls.append(creator.key)
        if self.get_creator(creator.name, creator.plugin_version, plugin_namespace) is not None:
            return False
        self._creators.append(creator)
        return True

    def load_library(self, plugin_path: str) -> Any:
        self.load_library_calls.append(plugin_path)
        creators = [StandInCreator(*key) for key in self.libraries.get(str(Path(plugin_path).resolve()), [])]
        if not creators or any(self.get_creator(*c.key) is not None for c in creators):
            return None  # TensorRT: registering the library's creators failed
        for creator in creators:
            self.register_creator(creator, creator.plugin_namespace)
        return object()  # an opaque library handle


def stand_in_trt(registry: StandInRegistry, version: str = "10.14.1.48") -> Any:
    """STAND-IN for the ``tensorrt`` module: what load_plugin_library / check_plugin_layers use."""
    layer_type = types.SimpleNamespace(PLUGIN_V3="PLUGIN_V3", CONVOLUTION="CONVOLUTION", SCAN="LOOP")
    return types.SimpleNamespace(get_plugin_registry=lambda: registry, LayerType=layer_type, __version__=version)


class StandInLayer:
    def __init__(self, name: str, type: str) -> None:
        self.name, self.type = name, type


class StandInNetwork:
    """STAND-IN for ``tensorrt.INetworkDefinition`` after parsing: ``num_layers`` and ``get_layer(i)``."""

    def __init__(self, layers: list[StandInLayer]) -> None:
        self.layers = layers

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def get_layer(self, index: int) -> StandInLayer:
        return self.layers[index]


@pytest.fixture
def fresh_loads(monkeypatch):
    """A process that has loaded no plugin library yet (the builder's per-process memory, emptied)."""
    monkeypatch.setattr(builder, "_LOADED", {})


def stand_in_library(path: Path, headers: Optional[str] = "10.14.0") -> Path:
    """STAND-IN for a built plugin library (no TensorRT here to load a real one): a file holding the marker a
    real build embeds, ``rnnx-trt-plugins:tensorrt-headers=<headers>\0``, among other bytes; ``headers=None``
    writes none (a library built before the marker existed)."""
    marker = f"rnnx-trt-plugins:tensorrt-headers={headers}\0".encode() if headers is not None else b""
    path.write_bytes(b"\x7fELF stand-in library\0" + marker + b"\0trailing bytes")
    return path


@pytest.fixture
def library(tmp_path) -> Path:
    return stand_in_library(tmp_path / "librnnx_trt_plugins.so")


# -- one load per process and path ------------------------------------------------------------------------


def test_stand_in_fails_like_tensorrt_on_a_second_load(library):
    """The premise: a second load_library of a library whose creators are registered returns None."""
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    assert registry.load_library(str(library)) is not None
    assert registry.load_library(str(library)) is None


def test_builder_then_backend_load_once_and_register_each_creator_once(library, fresh_loads):
    """build_engine then TensorRTBackend both call load_plugin_library: one load_library, one registration
    per creator; the second call neither loads nor fails."""
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    trt = stand_in_trt(registry)
    first = load_plugin_library(trt, library, CREATORS)  # build_engine
    second = load_plugin_library(trt, library, CREATORS)  # TensorRTBackend.__init__
    assert first is not None and second is first
    assert registry.load_library_calls == [str(library)]
    assert sorted(registry.register_calls) == sorted(CREATORS)
    assert sorted(c.key for c in registry.all_creators) == sorted(CREATORS)
    # Another spelling of the same file is the same library.
    assert load_plugin_library(trt, library.parent / "." / library.name, CREATORS) is first
    assert len(registry.load_library_calls) == 1


def test_the_backend_uses_the_builders_loader():
    from rnnx.runtime.tensorrt import backend as tensorrt_backend

    assert tensorrt_backend.load_plugin_library is builder.load_plugin_library


def test_creators_registered_by_a_plain_dlopen_are_not_loaded_again(library, fresh_loads):
    """The self-registering library was dlopened first (polygraphy --plugins style): its initialiser
    registered the creators, so load_library (which would fail) is never called."""
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    for key in CREATORS:
        registry.register_creator(StandInCreator(*key), key[2])
    trt = stand_in_trt(registry)
    assert load_plugin_library(trt, library, CREATORS) is None
    assert load_plugin_library(trt, library, CREATORS[:1]) is None
    assert registry.load_library_calls == []
    assert len(registry.all_creators) == len(CREATORS)


def test_partly_registered_creators_are_an_error(library, fresh_loads):
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    registry.register_creator(StandInCreator(*CREATORS[0]), CREATORS[0][2])
    rest = ", ".join(f"rnnx::{name} v{VERSION}" for name, _, _ in CREATORS[1:])
    with pytest.raises(EngineBuildError, match=f"already registered but {rest} not") as e:
        load_plugin_library(stand_in_trt(registry), library, CREATORS)
    assert "\n" not in str(e.value) and registry.load_library_calls == []


def test_an_export_of_an_older_plugin_version_is_told_to_re_export(library, fresh_loads):
    """An export written for plugin version 1 (the attention's heads apart) needs creators this library does not
    have: the error names them and says to re-export, in one line."""
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    old = tuple((name, "1", namespace) for name, _, namespace in CREATORS)
    with pytest.raises(EngineBuildError, match=r"v1 not registered by it: the export was written for plugin version 1 "
                       rf"and this rnnx's plugins are version {VERSION} .*re-export") as e:  # fmt: skip
        load_plugin_library(stand_in_trt(registry), library, old)
    assert "\n" not in str(e.value)


def test_a_failed_load_is_one_line(tmp_path, fresh_loads):
    static = stand_in_library(tmp_path / "librnnx_trt_plugins_static.so")
    registry = StandInRegistry({})  # load_library finds no getCreators: None
    with pytest.raises(EngineBuildError, match="could not load the plugin library .*takes librnnx_trt_plugins.so"):
        load_plugin_library(stand_in_trt(registry), static, CREATORS)
    other = stand_in_library(tmp_path / "libother.so")
    registry = StandInRegistry({str(other.resolve()): [("Other", "1", "x")]})
    every = ", ".join(f"rnnx::{name} v{VERSION}" for name, _, _ in CREATORS)
    with pytest.raises(EngineBuildError, match=f"loaded, but {every} not"):
        load_plugin_library(stand_in_trt(registry), other, CREATORS)


def test_required_creators_are_those_of_the_op_spec(demo_exports):
    """The creators the builder and the backend ask the registry for come from rnnx.json's op list, which
    the exporter writes from the op records; the domain constant is spec's."""
    for (_, target), out in demo_exports.items():
        meta = read_metadata(out)
        used = {op["name"] for op in meta["ops"]}
        assert used or target != "tensorrt", f"{out}: a TensorRT export without rnnx ops"
        assert required_creators(meta) == tuple(c for c in CREATORS if c[0] in used)
    assert builder.RNNX_DOMAIN == spec.ONNX_DOMAIN


# -- every rnnx node became a plugin layer ----------------------------------------------------------------

SRU = OnnxNode(f"/layers.0/{FIRST}", FIRST, "rnnx", "h0", VERSION, "rnnx")
ATTENTION = OnnxNode(f"/layers.1/{SECOND}", SECOND, "rnnx", "out1", VERSION, "rnnx")
UNNAMED = OnnxNode("", FIRST, "rnnx", "h2", VERSION, "rnnx")


def _registered_registry() -> StandInRegistry:
    registry = StandInRegistry({})
    for key in CREATORS:
        registry.register_creator(StandInCreator(*key), key[2])
    return registry


def test_every_node_a_plugin_layer_passes():
    registry = _registered_registry()
    network = StandInNetwork([
        StandInLayer("embed", "GATHER"), StandInLayer(SRU.name, "PLUGIN_V3"),
        StandInLayer(ATTENTION.name + "_1", "PLUGIN_V3"),  # the parser's suffix for a taken name
        StandInLayer("node_of_h2", "PLUGIN_V3"),
    ])  # fmt: skip
    check_plugin_layers(stand_in_trt(registry), network, [SRU, ATTENTION, UNNAMED])


def test_a_suffixed_layer_counts_for_one_node_only():
    """The ``_<n>`` suffix match cannot accept another node's layer: with nodes ``a`` and ``a_1`` where only
    ``a_1`` became a plugin layer, node ``a`` is refused (the layer is ``a_1``'s own); and one suffixed layer
    cannot stand for two nodes of one name."""
    registry = _registered_registry()
    a, a_1 = (OnnxNode(name, FIRST, "rnnx", f"out_{name}", VERSION, "rnnx") for name in ("a", "a_1"))
    network = StandInNetwork([StandInLayer("a_1", "PLUGIN_V3"), StandInLayer("a/Loop", "LOOP")])
    with pytest.raises(EngineBuildError, match=r"^rnnx node 'a' .*did not become a TensorRT plugin layer"):
        check_plugin_layers(stand_in_trt(registry), network, [a, a_1])
    twice = [OnnxNode("b", FIRST, "rnnx", "x", VERSION, "rnnx"), OnnxNode("b", FIRST, "rnnx", "y", VERSION, "rnnx")]
    check_plugin_layers(stand_in_trt(registry), StandInNetwork([StandInLayer("b", "PLUGIN_V3"),
                                                                StandInLayer("b_1", "PLUGIN_V3")]), twice)  # fmt: skip
    with pytest.raises(EngineBuildError, match=r"^rnnx node 'b' "):
        check_plugin_layers(stand_in_trt(registry), StandInNetwork([StandInLayer("b_1", "PLUGIN_V3")]), twice)


def test_a_node_imported_as_its_local_function_is_refused_naming_it():
    """The parser imported the attention node's local function (its layers are a loop, no plugin layer)."""
    registry = StandInRegistry({})  # nothing registered
    network = StandInNetwork([
        StandInLayer(SRU.name, "PLUGIN_V3"),
        StandInLayer(ATTENTION.name + "/Loop", "LOOP"), StandInLayer(ATTENTION.name + "_2", "LOOP"),
    ])  # fmt: skip
    with pytest.raises(EngineBuildError) as e:
        check_plugin_layers(stand_in_trt(registry), network, [SRU, ATTENTION])
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith(f"rnnx node '/layers.1/{SECOND}' ({SECOND}) did not become a TensorRT plugin layer")
    assert f"plugin rnnx::{SECOND} v{VERSION} is not registered" in message


def test_a_registered_plugin_that_lost_to_the_local_function_names_the_version():
    registry = _registered_registry()
    network = StandInNetwork([StandInLayer(SRU.name, "LOOP")])
    with pytest.raises(EngineBuildError, match=r"is registered, but TensorRT 10\.3\.0 imported the node otherwise"):
        check_plugin_layers(stand_in_trt(registry, "10.3.0"), network, [SRU])
    with pytest.raises(EngineBuildError, match="rnnx node 'node_of_h2' "):
        check_plugin_layers(stand_in_trt(registry), StandInNetwork([]), [UNNAMED])


def test_read_rnnx_nodes_matches_onnx(demo_exports):
    """The stdlib ONNX reader finds the same rnnx nodes (name, op, first output, plugin attributes) as onnx."""
    import onnx

    for (name, target), out in demo_exports.items():
        if target != "tensorrt":
            continue
        model = onnx.load(str(out / "model.onnx"), load_external_data=False)
        expected = []
        for node in model.graph.node:
            if node.domain != "rnnx":
                continue
            attrs = {a.name: a.s.decode() for a in node.attribute if a.type == onnx.AttributeProto.STRING}
            expected.append(OnnxNode(node.name, node.op_type, "rnnx", node.output[0],
                                     attrs.get("plugin_version"), attrs.get("plugin_namespace")))  # fmt: skip
        assert expected, f"{name}: no rnnx node in the export"
        assert read_rnnx_nodes(out / "model.onnx") == expected
        assert all(n.creator in CREATORS for n in expected)


def test_read_rnnx_nodes_rejects_a_non_model(tmp_path):
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x0a\xff\xff\xff\xff\x0f")
    with pytest.raises(EngineBuildError, match="not a readable ONNX model"):
        read_rnnx_nodes(bad)


# -- strongly typed build ---------------------------------------------------------------------------------


class StandInTensorRT:
    """STAND-IN for the ``tensorrt`` module in ``_build``: a parser that turns each rnnx node into a plugin
    layer named after it, except those in ``fallback`` (imported as their local function: a LOOP layer)."""

    class NetworkDefinitionCreationFlag:
        STRONGLY_TYPED = 1

    class BuilderFlag:
        FP16 = "FP16"
        BF16 = "BF16"
        TF32 = "TF32"

    class MemoryPoolType:
        WORKSPACE = "WORKSPACE"

    LayerType = types.SimpleNamespace(PLUGIN_V3="PLUGIN_V3")
    __version__ = "10.14.1.48"

    class StandInTimingCache:
        def __init__(self, blob: bytes) -> None:
            self.blob = blob

        def serialize(self) -> bytes:
            return b"timing cache of this GPU"

    def __init__(self, fallback: tuple[str, ...] = ()) -> None:
        self.fallback = fallback
        self.foreign_timing_caches: set[bytes] = set()
        self.network_flags: list[int] = []
        self.builder_flags: list[Any] = []
        self.cleared_flags: list[Any] = []
        self.pool_limits: dict[str, int] = {}
        self.registry = _registered_registry()

    def get_plugin_registry(self) -> StandInRegistry:
        return self.registry

    def Builder(self, logger: Any) -> Any:
        trt = self

        class Config:
            def set_flag(self, flag: Any) -> None:
                trt.builder_flags.append(flag)

            def clear_flag(self, flag: Any) -> None:
                trt.cleared_flags.append(flag)

            def set_memory_pool_limit(self, pool: str, size: int) -> None:
                trt.pool_limits[pool] = size

            def add_optimization_profile(self, profile: Any) -> int:
                return 0

            timing_cache: Any = None

            def create_timing_cache(self, blob: bytes) -> Any:
                return trt.StandInTimingCache(blob)

            def set_timing_cache(self, cache: Any, ignore_mismatch: bool) -> bool:
                """False (TensorRT: the cache does not fit this device / version) for a blob in ``foreign``."""
                if cache.blob in trt.foreign_timing_caches:
                    return False
                self.timing_cache = cache
                return True

            def get_timing_cache(self) -> Any:
                return self.timing_cache  # None when none was set, as TensorRT's Python API returns

        class Builder:
            def create_network(self, flags: int) -> StandInNetwork:
                trt.network_flags.append(flags)
                return StandInNetwork([])

            def create_builder_config(self) -> Config:
                return Config()

            def create_optimization_profile(self) -> Any:
                return object()

            def build_serialized_network(self, network: Any, config: Any) -> bytes:
                return b"engine"

        return Builder()

    def OnnxParser(self, network: StandInNetwork, logger: Any) -> Any:
        fallback = self.fallback

        class Parser:
            num_errors = 0

            def parse_from_file(self, path: str) -> bool:
                for node in read_rnnx_nodes(path):
                    kind = "LOOP" if node.layer_name in fallback else "PLUGIN_V3"
                    network.layers.append(StandInLayer(node.layer_name, kind))
                return True

        return Parser()


class StandInProfile:
    name = "decode"

    def apply(self, profile: Any) -> Any:
        return profile


def test_build_is_strongly_typed_without_precision_flags_and_fp32_clears_tf32(demo_exports):
    """Strongly typed: no BuilderFlag.FP16 / BF16. TF32 (on by default, and not turned off by strong typing)
    is cleared for an fp32 engine, whose matmuls would otherwise run at about 1e-3 relative error; the
    setting is part of the cache key."""
    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    assert builder.ENGINE_PRECISIONS == ("fp32", "fp16")  # what the exporter writes: no bf16 engine on offer
    for precision, cleared in (("fp32", ["TF32"]), ("fp16", [])):
        trt = StandInTensorRT()
        data = builder._build(trt, None, out / "model.onnx", precision, [StandInProfile()], None, 1 << 30, print)
        assert data == b"engine"
        assert trt.network_flags == [1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)]
        assert trt.builder_flags == []  # no BuilderFlag.FP16 / BF16 on a strongly typed network
        assert trt.cleared_flags == cleared
        assert trt.pool_limits == {"WORKSPACE": 1 << 30}
    meta = read_metadata(out)
    profiles = build_profiles(meta, ProfileLimits())
    fp32 = builder.key_parts(meta, "fp32", profiles, None, "10.14.1", ("GPU", "9.0", 0))
    assert dict(fp32.builder_flags) == {"TF32": False} and "TF32" in json.dumps(fp32.to_dict())
    assert builder.key_parts(meta, "fp16", profiles, None, "10.14.1", ("GPU", "9.0", 0)).builder_flags == ()


def test_build_refuses_a_node_that_fell_back_to_its_local_function(demo_exports):
    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    nodes = read_rnnx_nodes(out / "model.onnx")
    trt = StandInTensorRT(fallback=(nodes[-1].layer_name,))
    with pytest.raises(EngineBuildError, match=f"rnnx node '{nodes[-1].layer_name}' .*did not become"):
        builder._build(trt, None, out / "model.onnx", "fp32", [StandInProfile()], None, None, print)


@pytest.mark.parametrize("exported, asked", [("fp32", "fp16"), ("fp16", "fp32")])
def test_a_precision_other_than_the_exports_says_how_to_export(exported, asked):
    with pytest.raises(EngineBuildError, match=f"the export is {exported}.*export with --precision {asked}$"):
        resolve_precision({"precision": exported}, asked)
    assert resolve_precision({"precision": exported}, None) == exported
    with pytest.raises(ValueError, match="unsupported engine precision 'int8'"):
        resolve_precision({"precision": exported}, "int8")
    with pytest.raises(ValueError, match="unsupported engine precision 'bf16'; supported: fp32, fp16$"):
        resolve_precision({"precision": exported}, "bf16")


# -- minimum TensorRT version -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["8.6.1", "10.0.1.6", "10.6.0", "not a version"])
def test_require_tensorrt_refuses_a_too_old_tensorrt(monkeypatch, version):
    """STAND-IN ``tensorrt`` module (only ``__version__``) in sys.modules."""
    monkeypatch.setitem(sys.modules, "tensorrt", types.SimpleNamespace(__version__=version))
    with pytest.raises(TensorRTTooOld) as e:
        require_tensorrt()
    minimum = ".".join(map(str, MIN_TENSORRT_VERSION))
    assert str(e.value).startswith(f"TensorRT {version} is too old: rnnx needs TensorRT >= {minimum}")
    assert str(e.value).endswith("pip install 'tensorrt>=10.7,<12'")
    assert "\n" not in str(e.value) and isinstance(e.value, TensorRTNotInstalled)


@pytest.mark.parametrize("version", ["10.7.0", "10.14.1.48", "10.99.0", "11.0.0", "11.4.0.106", "11.99.1"])
def test_require_tensorrt_accepts_10_7_to_10_x_and_11_x(monkeypatch, version):
    """STAND-IN ``tensorrt`` module (only ``__version__``): 11.4.0.106 is what ``pip install tensorrt`` gives."""
    module = types.SimpleNamespace(__version__=version)
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    assert require_tensorrt() is module


@pytest.mark.parametrize("version", ["12.0.0", "12.1.0.7", "13.0"])
def test_require_tensorrt_refuses_a_major_it_was_not_written_for(monkeypatch, version):
    from rnnx.runtime.tensorrt._trt import MAX_TENSORRT_MAJOR, TensorRTTooNew

    assert MAX_TENSORRT_MAJOR == 12
    monkeypatch.setitem(sys.modules, "tensorrt", types.SimpleNamespace(__version__=version))
    with pytest.raises(TensorRTTooNew, match=rf"^TensorRT {version} is a major release .*supports 10\.7 up to 11\.x\); "
                       r"pip install 'tensorrt>=10\.7,<12'$") as e:  # fmt: skip
        require_tensorrt()
    assert isinstance(e.value, TensorRTNotInstalled) and "\n" not in str(e.value)


# -- TensorRT 11: strongly typed only, no precision builder flags ----------------------------------------------

#: BuilderFlag members TensorRT 11 removed (compare `enum class BuilderFlag` in NvInfer.h of 10.14 and 11.1).
REMOVED_IN_11 = ("FP16", "BF16", "INT8", "FP8", "INT4", "FP4", "OBEY_PRECISION_CONSTRAINTS",
                 "PREFER_PRECISION_CONSTRAINTS", "REJECT_EMPTY_ALGORITHMS", "WEIGHTLESS")  # fmt: skip


class StandInTensorRT11(StandInTensorRT):
    """STAND-IN for TensorRT 11's ``tensorrt`` module (TensorRT cannot run here): ``BuilderFlag`` as in the 11.1
    headers (no precision flags; ``TF32`` kept), ``NetworkDefinitionCreationFlag.STRONGLY_TYPED`` kept (deprecated,
    ignored), and an ``IBuilderConfig`` whose ``set_flag`` / ``clear_flag`` accept only members of that enum."""

    class BuilderFlag:
        DEBUG = "DEBUG"
        GPU_FALLBACK = "GPU_FALLBACK"
        REFIT = "REFIT"
        DISABLE_TIMING_CACHE = "DISABLE_TIMING_CACHE"
        TF32 = "TF32"
        SPARSE_WEIGHTS = "SPARSE_WEIGHTS"
        STRICT_NANS = "STRICT_NANS"

    __version__ = "11.4.0.106"

    def Builder(self, logger: Any) -> Any:
        builder = super().Builder(logger)
        members = {v for k, v in vars(self.BuilderFlag).items() if not k.startswith("_")}
        real_config = builder.create_builder_config

        def create_builder_config() -> Any:
            config = real_config()
            set_flag, clear_flag = config.set_flag, config.clear_flag

            def checked(call: Any) -> Any:
                def flag_call(flag: Any) -> None:
                    assert flag in members, f"BuilderFlag {flag!r} does not exist in TensorRT 11"
                    call(flag)

                return flag_call

            config.set_flag, config.clear_flag = checked(set_flag), checked(clear_flag)
            return config

        builder.create_builder_config = create_builder_config
        return builder


class StandInTensorRTWithoutStronglyTyped(StandInTensorRT11):
    """STAND-IN for a later 11.x module whose ``NetworkDefinitionCreationFlag`` dropped ``STRONGLY_TYPED``."""

    class NetworkDefinitionCreationFlag:
        PREFER_JIT_PYTHON_PLUGINS = 1
        PREFER_AOT_PYTHON_PLUGINS = 2


def test_tensorrt_11_stand_in_lacks_the_removed_flags():
    """The premise: the stand-in's enum has none of the flags 11 removed, so touching one raises."""
    for name in REMOVED_IN_11:
        assert not hasattr(StandInTensorRT11.BuilderFlag, name)
    assert StandInTensorRT11.BuilderFlag.TF32 == "TF32"


@pytest.mark.parametrize("stand_in, network_flags", [(StandInTensorRT11, 1 << 1),
                                                      (StandInTensorRTWithoutStronglyTyped, 0)])  # fmt: skip
def test_build_on_tensorrt_11_sets_no_removed_flag_and_still_clears_tf32(demo_exports, stand_in, network_flags):
    """_build (the config path: apply_builder_flags, profiles, workspace, timing cache) on an 11-shaped module:
    no precision flag is set or cleared, TF32 is cleared for fp32, and the network is created STRONGLY_TYPED
    while the enum has the flag (1 << 1 with the stand-in's value 1), with no flag once it is gone."""
    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    for precision, cleared in (("fp32", ["TF32"]), ("fp16", [])):
        trt = stand_in()
        logged: list[str] = []
        data = builder._build(trt, None, out / "model.onnx", precision, [StandInProfile()], None, 1 << 30,
                              logged.append)  # fmt: skip
        assert data == b"engine"
        assert trt.network_flags == [network_flags]
        assert trt.builder_flags == [] and trt.cleared_flags == cleared
        assert not any(name in flag for flag in trt.builder_flags + trt.cleared_flags for name in REMOVED_IN_11)
    assert builder.network_creation_flags(StandInTensorRT()) == 1 << 1
    assert builder.network_creation_flags(types.SimpleNamespace()) == 0


def test_a_builder_flag_the_enum_lacks_is_skipped_when_cleared_and_refused_when_set(monkeypatch):
    """A TensorRT whose BuilderFlag has no TF32: clearing it is a logged no-op (the flag cannot be on); a flag that
    would have to be set is a one-line EngineBuildError."""
    set_calls: list[Any] = []
    config = types.SimpleNamespace(set_flag=set_calls.append, clear_flag=set_calls.append)
    trt = types.SimpleNamespace(BuilderFlag=types.SimpleNamespace(DEBUG="DEBUG"), __version__="11.9.0")
    logged: list[str] = []
    builder.apply_builder_flags(trt, config, "fp32", logged.append)
    assert set_calls == [] and logged == ["TensorRT 11.9.0 has no BuilderFlag.TF32: nothing to clear"]
    monkeypatch.setattr(builder, "builder_flags", lambda precision: {"TF32": True})
    with pytest.raises(EngineBuildError, match=r"^TensorRT 11\.9\.0 has no BuilderFlag\.TF32, which a fp32 engine "):
        builder.apply_builder_flags(trt, config, "fp32")


# -- engine cache: an engine never crosses a TensorRT major ---------------------------------------------------


def test_an_engine_of_tensorrt_10_is_not_served_to_11(demo_exports, tmp_path):
    """The major is an explicit key part; a 10.x engine misses under 11.x (also when its sidecar is put under the
    11.x file name: refused as foreign, naming both versions) and hits under its own version."""
    from rnnx.runtime.tensorrt import EngineCache
    from rnnx.runtime.tensorrt.cache import SIDECAR_VERSION

    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    meta = read_metadata(out)
    profiles = build_profiles(meta, ProfileLimits(max_batch=2, max_length=16))
    gpu = ("NVIDIA H100", "9.0", 0)
    ten = builder.key_parts(meta, "fp32", profiles, None, "10.14.1.48", gpu)
    eleven = builder.key_parts(meta, "fp32", profiles, None, "11.4.0.106", gpu)
    assert (ten.tensorrt_major, eleven.tensorrt_major) == (10, 11) and SIDECAR_VERSION == 3
    assert ten.to_dict()["tensorrt_major"] == 10 and ten.key() != eleven.key()
    cache = EngineCache(tmp_path / "engines")
    stored = cache.store(ten, b"a TensorRT 10 engine")
    assert cache.lookup(ten).path == stored
    assert cache.lookup(builder.key_parts(meta, "fp32", profiles, None, "10.14.1.48", gpu)).hit
    miss = cache.lookup(eleven)
    assert not miss.hit and miss.problem is None
    # The 10.x entry under the 11.x names (a copied cache dir, a stem collision): still never served.
    cache.engine_path(eleven).write_bytes(stored.read_bytes())
    cache.sidecar_path(eleven).write_text(cache.sidecar_path(ten).read_text())
    refused = cache.lookup(eleven)
    assert not refused.hit
    assert "built with TensorRT 10.14.1.48 (major 10), this is TensorRT 11.4.0.106 (foreign entry)" in refused.problem
    with pytest.raises(ValueError, match="not a TensorRT version"):
        builder.key_parts(meta, "fp32", profiles, None, "unknown", gpu)


# -- the plugin library's TensorRT major ----------------------------------------------------------------------


def test_a_library_of_tensorrt_10_is_refused_by_an_11_loader_in_one_line(tmp_path, fresh_loads):
    """No TensorRT here: stand-in module and registry, a marker file for the library. A library built against the
    10.14 headers, loaded under 11.4: PluginLibraryMismatch naming both majors, before load_library is called."""
    from rnnx.plugins import PluginLibraryMismatch

    library = stand_in_library(tmp_path / "librnnx_trt_plugins.so", "10.14.0")
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    with pytest.raises(PluginLibraryMismatch) as e:
        load_plugin_library(stand_in_trt(registry, "11.4.0.106"), library, CREATORS)
    message = str(e.value)
    assert "\n" not in message and str(library) in message
    assert re.search(r"TensorRT 10\b", message) and re.search(r"TensorRT 11\b", message), message
    assert registry.load_library_calls == [] and registry.all_creators == []


def test_a_library_of_the_running_major_loads(tmp_path, fresh_loads):
    library = stand_in_library(tmp_path / "librnnx_trt_plugins.so", "11.1.0")
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    assert load_plugin_library(stand_in_trt(registry, "11.4.0.106"), library, CREATORS) is not None
    assert registry.load_library_calls == [str(library)]
    assert sorted(c.key for c in registry.all_creators) == sorted(CREATORS)


def test_the_major_is_checked_on_the_cached_path_too(library, fresh_loads):
    """A library this process already loaded (under 10.x) asked for again by an 11.x module: refused, not served
    from the per-process memory."""
    from rnnx.plugins import PluginLibraryMismatch

    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    assert load_plugin_library(stand_in_trt(registry, "10.14.1.48"), library, CREATORS) is not None
    with pytest.raises(PluginLibraryMismatch):
        load_plugin_library(stand_in_trt(registry, "11.4.0.106"), library, CREATORS)
    assert len(registry.load_library_calls) == 1


def test_a_library_without_the_marker_is_refused_with_a_rebuild_line(tmp_path, fresh_loads):
    from rnnx.plugins import PluginLibraryMismatch

    old = stand_in_library(tmp_path / "librnnx_trt_plugins.so", None)
    registry = StandInRegistry({str(old.resolve()): list(CREATORS)})
    with pytest.raises(PluginLibraryMismatch, match="rebuild") as e:
        load_plugin_library(stand_in_trt(registry), old, CREATORS)
    assert "\n" not in str(e.value) and registry.load_library_calls == []


def test_an_older_plugin_version_export_gets_the_re_export_hint_on_the_cached_path(library, fresh_loads):
    """The library is loaded already (a current export); a plugin-version-1 export then asks for its creators:
    the same one-line re-export hint as on a first load, not a later "not registered" from the parser."""
    registry = StandInRegistry({str(library.resolve()): list(CREATORS)})
    trt = stand_in_trt(registry)
    handle = load_plugin_library(trt, library, CREATORS)
    old = tuple((name, "1", namespace) for name, _, namespace in CREATORS)
    assert VERSION != "1"
    with pytest.raises(EngineBuildError, match=r"v1 not registered by it: the export was written for plugin version 1 "
                       rf"and this rnnx's plugins are version {VERSION} .*re-export") as e:  # fmt: skip
        load_plugin_library(trt, library, old)
    assert "\n" not in str(e.value) and registry.load_library_calls == [str(library)]
    assert load_plugin_library(trt, library, CREATORS) is handle


# -- timing cache: a refused or unsavable cache never costs the engine ----------------------------------------


def test_a_foreign_timing_cache_is_replaced_by_a_fresh_one(demo_exports, tmp_path):
    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    cache_file = tmp_path / "timing.cache"
    cache_file.write_bytes(b"timing cache of another GPU")
    trt = StandInTensorRT()
    trt.foreign_timing_caches.add(b"timing cache of another GPU")  # set_timing_cache returns False for it
    logged: list[str] = []
    data = builder._build(trt, None, out / "model.onnx", "fp32", [StandInProfile()], cache_file, None, logged.append)
    assert data == b"engine"
    refused = [line for line in logged if "timing cache" in line]
    assert refused == [f"timing cache {cache_file}: TensorRT refused it (made on another GPU or TensorRT?); "
                       "building with a fresh one"]  # fmt: skip
    assert cache_file.read_bytes() == b"timing cache of this GPU"


def test_a_timing_cache_problem_never_loses_the_built_engine(demo_exports, tmp_path):
    """Every cache TensorRT is offered is refused (so get_timing_cache returns None, which used to end in an
    AttributeError after the build); then a cache whose serialize fails: the engine comes back both times."""
    out = demo_exports[("linear_transformer_copy", "tensorrt")]
    cache_file = tmp_path / "timing.cache"
    trt = StandInTensorRT()
    trt.foreign_timing_caches.add(b"")  # even a fresh cache is refused
    logged: list[str] = []
    data = builder._build(trt, None, out / "model.onnx", "fp32", [StandInProfile()], cache_file, None, logged.append)
    assert data == b"engine" and not cache_file.exists()
    assert "TensorRT refused a fresh timing cache; building without one" in logged
    assert f"timing cache not saved to {cache_file}: the build had none" in logged

    def broken(self):
        raise RuntimeError("serialize failed")

    trt = StandInTensorRT()
    trt.StandInTimingCache = type("Broken", (StandInTensorRT.StandInTimingCache,), {"serialize": broken})
    logged.clear()
    data = builder._build(trt, None, out / "model.onnx", "fp32", [StandInProfile()], cache_file, None, logged.append)
    assert data == b"engine" and not cache_file.exists()
    assert f"timing cache not saved to {cache_file}: RuntimeError: serialize failed" in logged


# -- one TensorRT logger per process --------------------------------------------------------------------------


def test_one_tensorrt_logger_per_process(monkeypatch):
    """STAND-IN tensorrt module counting Logger constructions: the builder's and the backend's logger are one."""
    from rnnx.runtime.tensorrt import _trt
    from rnnx.runtime.tensorrt import backend as tensorrt_backend

    made: list[Any] = []

    class Logger:
        WARNING = "WARNING"

        def __init__(self, severity: str) -> None:
            made.append(severity)

    module = types.SimpleNamespace(__version__="11.4.0.106", Logger=Logger)
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    monkeypatch.setattr(_trt, "_LOGGER", None)
    first = _trt.tensorrt_logger()
    assert _trt.tensorrt_logger(module) is first and _trt.tensorrt_logger() is first and made == ["WARNING"]
    assert builder.tensorrt_logger is _trt.tensorrt_logger and tensorrt_backend.tensorrt_logger is _trt.tensorrt_logger
    for source in (builder, tensorrt_backend):  # neither makes a logger of its own
        assert "trt.Logger(" not in Path(source.__file__).read_text()


# -- the backend: an engine's profiles, a disabled ring --------------------------------------------------------


class StandInEngine:
    """STAND-IN for ``tensorrt.ICudaEngine`` (TensorRT cannot run here): ``num_optimization_profiles`` and
    ``get_tensor_profile_shape(name, profile)`` -> [min, opt, max], from rnnx ``Profile`` s."""

    def __init__(self, profiles: list[Any]) -> None:
        self.profiles = profiles

    @property
    def num_optimization_profiles(self) -> int:
        return len(self.profiles)

    def get_tensor_profile_shape(self, name: str, profile: int) -> list[tuple[int, ...]]:
        r = self.profiles[profile].shapes[name]
        return [r.min, r.opt, r.max]


def test_an_engine_whose_profiles_are_not_decode_then_prefill_is_refused(demo_exports):
    from rnnx.runtime.backends.base import RnnxRuntimeError
    from rnnx.runtime.tensorrt.backend import check_engine_profiles

    meta = read_metadata(demo_exports[("linear_transformer_copy", "tensorrt")])
    limits = ProfileLimits(max_batch=4, max_length=16)
    decode, prefill = build_profiles(meta, limits)
    check_engine_profiles(StandInEngine([decode, prefill]), [decode, prefill], "model.engine")
    wider = build_profiles(meta, ProfileLimits(max_batch=8, max_length=32))  # an engine for larger limits serves
    check_engine_profiles(StandInEngine(wider), [decode, prefill], "model.engine")
    with pytest.raises(RnnxRuntimeError, match=r"^model\.engine: optimization profile 1 should be prefill "
                       r"\(input_ids \[1, 1\]\.\.\[4, 16\]\) but holds input_ids \[1, 1\]\.\.\[4, 1\]; rnnx needs "
                       r"profiles 0 = decode, 1 = prefill") as e:  # fmt: skip
        check_engine_profiles(StandInEngine([prefill, decode]), [decode, prefill], "model.engine")
    assert "\n" not in str(e.value)
    with pytest.raises(RnnxRuntimeError, match=r"^x\.engine: the engine has 1 optimization profile\(s\); rnnx needs 2"):
        check_engine_profiles(StandInEngine([prefill]), [decode, prefill], "x.engine")
    smaller = build_profiles(meta, ProfileLimits(max_batch=2, max_length=16))
    with pytest.raises(RnnxRuntimeError, match=r"profile 0 should be decode \(input_ids \[1, 1\]\.\.\[4, 1\]\) but "
                       r"holds input_ids \[1, 1\]\.\.\[2, 1\]"):  # fmt: skip
        check_engine_profiles(StandInEngine(smaller), [decode, prefill], "model.engine")


def test_disabling_a_ring_waits_for_the_stream_before_dropping_its_contexts(caplog):
    """STAND-IN stream (no CUDA here) recording what the ring still held when it was synchronised: the contexts
    (and their graphs) are dropped only after the work they enqueued has finished."""
    from rnnx.runtime.tensorrt.backend import DecodeRing, RingContext, TensorRTBackend

    ring = DecodeRing()
    ring.contexts = {"ping": RingContext("context", {}, {}, graph="graph"), "pong": RingContext("context", {}, {})}
    held: list[list[str]] = []
    backend = object.__new__(TensorRTBackend)  # __init__ needs TensorRT and CUDA; _disable needs only the stream
    backend.stream = types.SimpleNamespace(synchronize=lambda: held.append(sorted(ring.contexts)))
    with caplog.at_level("WARNING", logger="rnnx.runtime"):
        backend._disable(ring, 2, RuntimeError("capture failed"))
    assert held == [["ping", "pong"]] and ring.contexts == {} and ring.disabled
    assert "CUDA graphs off for batch 2" in caplog.text
