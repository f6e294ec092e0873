"""The distribution maps the top-level folders into the `rnnx` namespace completely."""

from __future__ import annotations

from pathlib import Path

import tomllib

from rnnx.runtime.contract import ops

REPO = Path(__file__).resolve().parents[1]
MAPPED = {"rnnx.models": "models", "rnnx.export": "export", "rnnx.runtime": "runtime", "rnnx.plugins": "plugins"}


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def test_package_dir_maps_the_top_level_folders() -> None:
    assert _pyproject()["tool"]["setuptools"]["package-dir"] == MAPPED


def test_every_python_package_folder_is_listed() -> None:
    """A non-editable install ships only the listed packages: a folder left out would be lost."""
    found = set()
    for package, folder in MAPPED.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            found.add(".".join([package, *rel.parts]))
    assert set(_pyproject()["tool"]["setuptools"]["packages"]) == found


def test_torch_requirement_is_never_pinned_to_a_cuda_build() -> None:
    """Wherever torch is required (the core dependencies or an extra), the requirement stays loose."""
    project = _pyproject()["project"]
    deps = [
        *project["dependencies"],
        *(d for extra in project.get("optional-dependencies", {}).values() for d in extra),
    ]
    torch_req = [d for d in deps if d.startswith("torch")]
    assert torch_req and all("+cu" not in d and "==" not in d for d in torch_req)


def _package_folder(package: str) -> Path:
    """The source folder of a listed package, through the package-dir mapping."""
    top = ".".join(package.split(".")[:2])
    return REPO / MAPPED[top] / Path(*package.split(".")[2:])


def test_shipped_kernel_sources_and_checkpoints_are_package_data() -> None:
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        assert all(list(_package_folder(package).glob(p)) for p in patterns), (package, patterns)


def test_data_files_are_exactly_the_package_data() -> None:
    """No implicit data from a manifest: the wheel's data files are the package-data patterns, nothing else."""
    assert _pyproject()["tool"]["setuptools"]["include-package-data"] is False


def test_every_plugin_source_is_package_data() -> None:
    """The kernels and the plugin library build from an installed wheel: every file of plugins/ (CMake files,
    C++/CUDA sources and headers, linker maps, the C++ tests the CMake tree adds) matches a package-data
    pattern of rnnx.plugins; only Python modules (shipped as the package) and caches are not data."""
    patterns = _pyproject()["tool"]["setuptools"]["package-data"]["rnnx.plugins"]
    folder = _package_folder("rnnx.plugins")
    shipped = {path for pattern in patterns for path in folder.glob(pattern)}
    on_disk = {
        path
        for path in folder.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    assert on_disk - shipped == set()
    assert {folder / "kernels" / "include" / "rnnx" / "kernel_types.h", folder / "tests" / "CMakeLists.txt"} <= shipped


def test_op_folders_are_named_by_the_ops_torch_names() -> None:
    """Each op's native sources sit in plugins/<op>/ (its torch name), split by language; an op folder is one with
    a language folder, and the shared folders (common, cpu, kernels, ort, tests, torch) have none, so the globs
    over plugins/*/<language>/ take the op folders' sources only. Every op folder is named by an op record (one
    in ALL_OPS, or one recorded ahead of joining it), every op of ALL_OPS has one, and its Python op is
    models/ops/<op>/, same name. (Their files are package data of rnnx.plugins:
    test_every_plugin_source_is_package_data.)"""
    from rnnx import plugins

    folder = _package_folder("rnnx.plugins")
    languages = plugins.OP_LANGUAGE_FOLDERS
    op_folders = {d.name for d in folder.iterdir() if any((d / name).is_dir() for name in languages)}
    recorded = {record.torch_name for record in vars(ops).values() if isinstance(record, ops.OpSpec)}
    assert op_folders <= recorded
    assert {op.torch_name for op in ops.ALL_OPS} <= op_folders
    assert {"common", "cpu", "kernels", "ort", "tests", "torch"} <= {d.name for d in folder.iterdir() if d.is_dir()}
    assert all((_package_folder("rnnx.models.ops") / name / "op.py").is_file() for name in op_folders)


def test_kernel_sources_are_named_by_rnnx_plugins() -> None:
    """rnnx.plugins is the one place that says where the kernel sources are; the torch binding uses it."""
    from rnnx import plugins
    from rnnx.models.ops import cuda

    assert plugins.SOURCE_DIR == (REPO / "plugins").resolve()
    assert plugins.OPS_DIR.resolve() == (REPO / "plugins").resolve()
    # Each kernel in its op folder's cuda/ (a new op's are found by the glob); the headers they share in
    # KERNELS_SRC_DIR.
    assert [p.relative_to(plugins.OPS_DIR).as_posix() for p in plugins.KERNEL_SOURCES] == [
        "causal_conv_with_state/cuda/causal_conv_with_state.cu",
        "causal_linear_attention/cuda/causal_linear_attention.cu",
        "linear_recurrence/cuda/linear_recurrence.cu",
        "linear_recurrence/cuda/linear_recurrence_mma.cu",
        "sru_scan/cuda/sru_scan.cu",
    ]
    assert {p.parent for p in plugins.KERNEL_SOURCES} == set(plugins.OPS_DIR.glob("*/cuda"))
    assert all(p.is_file() for p in plugins.KERNEL_SOURCES)
    assert (plugins.KERNELS_SRC_DIR / "type_utils.cuh").is_file()
    assert plugins.KERNEL_INCLUDE_DIRS == (plugins.KERNELS_INCLUDE_DIR, plugins.OPS_DIR, plugins.KERNELS_SRC_DIR)
    assert (plugins.KERNELS_INCLUDE_DIR / "rnnx" / "kernel_types.h").is_file()
    # Each op's launcher in its own folder (no umbrella header naming the ops).
    assert not (plugins.KERNELS_INCLUDE_DIR / "rnnx" / "kernels.h").exists()
    assert all((d / f"{d.parent.name}.h").is_file() for d in plugins.OPS_DIR.glob("*/cuda"))
    assert cuda.KERNEL_SOURCES == plugins.KERNEL_SOURCES
    assert cuda.sources_present()


def test_plugin_build_dir_is_the_checkout_build_folder_or_a_user_cache(monkeypatch, tmp_path) -> None:
    from rnnx import plugins

    assert plugins.REPO_ROOT == REPO.resolve()
    # One build folder per TensorRT major (default: the installed TensorRT's, else the headers').
    major = plugins.target_tensorrt_major()
    assert plugins.default_build_dir() == REPO.resolve() / "build" / "plugins" / f"tensorrt-{major}"
    assert plugins.default_build_dir(11) == REPO.resolve() / "build" / "plugins" / "tensorrt-11"
    monkeypatch.setattr(plugins, "REPO_ROOT", None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert plugins.default_build_dir(10) == tmp_path / "rnnx" / "plugins" / plugins._rnnx_version() / "tensorrt-10"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert plugins.default_build_dir().parent.parent == tmp_path / "home" / ".cache" / "rnnx" / "plugins"
    assert plugins.default_build_dir().name == f"tensorrt-{major}"
