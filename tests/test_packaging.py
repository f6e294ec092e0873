"""The distribution maps the top-level folders into the `rnnx` namespace completely."""

from __future__ import annotations

from pathlib import Path

import tomllib

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
    assert {folder / "kernels" / "include" / "rnnx" / "kernels.h", folder / "tests" / "CMakeLists.txt"} <= shipped


#: The folders of an op package holding its native sources (CPU kernel, CUDA kernels, ONNX Runtime op, plugin).
NATIVE_FOLDERS = ("csrc", "cuda", "ort", "tensorrt")


def test_every_native_source_of_an_op_is_package_data() -> None:
    """Each op's native sources sit in its op folder; the plugin and ONNX Runtime builds of an installed wheel
    need every one of them, so each file of an op package's native folders matches a package-data pattern."""
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    ops = [p for p in _pyproject()["tool"]["setuptools"]["packages"] if p.startswith("rnnx.models.ops.")]
    checked = 0
    for package in ops:
        folder = _package_folder(package)
        shipped = {path for pattern in data.get(package, ()) for path in folder.glob(pattern)}
        on_disk = {p for name in NATIVE_FOLDERS for p in (folder / name).rglob("*") if p.is_file()}
        on_disk = {p for p in on_disk if "__pycache__" not in p.parts}
        assert on_disk - shipped == set(), package
        checked += len(on_disk)
    assert checked >= 10


def test_kernel_sources_are_named_by_rnnx_plugins() -> None:
    """rnnx.plugins is the one place that says where the kernel sources are; the torch binding uses it."""
    from rnnx import plugins
    from rnnx.models.ops import cuda

    assert plugins.SOURCE_DIR == (REPO / "plugins").resolve()
    assert plugins.OPS_DIR.resolve() == (REPO / "models" / "ops").resolve()
    # Each kernel in its op folder's cuda/ (a new op's are found by the glob); the headers they share in
    # KERNELS_SRC_DIR.
    assert [p.relative_to(plugins.OPS_DIR).as_posix() for p in plugins.KERNEL_SOURCES] == [
        "linear_attention/cuda/linear_attention_decode.cu",
        "linear_attention/cuda/linear_attention_prefill.cu",
        "sru/cuda/sru_scan.cu",
    ]
    assert {p.parent for p in plugins.KERNEL_SOURCES} == set(plugins.OPS_DIR.glob("*/cuda"))
    assert all(p.is_file() for p in plugins.KERNEL_SOURCES)
    assert (plugins.KERNELS_SRC_DIR / "type_utils.cuh").is_file()
    assert plugins.KERNEL_INCLUDE_DIRS == (plugins.KERNELS_INCLUDE_DIR, plugins.KERNELS_SRC_DIR)
    assert (plugins.KERNELS_INCLUDE_DIR / "rnnx" / "kernels.h").is_file()
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
