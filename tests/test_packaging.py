"""The distribution maps the top-level folders into the `rnnx` namespace completely."""

from __future__ import annotations

from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]
MAPPED = {"rnnx.models": "models", "rnnx.export": "export", "rnnx.runtime": "runtime"}


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
    deps = _pyproject()["project"]["dependencies"]
    torch_req = [d for d in deps if d.startswith("torch")]
    assert torch_req and all("+cu" not in d and "==" not in d for d in torch_req)


def test_shipped_kernel_sources_and_checkpoints_are_package_data() -> None:
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        folder = REPO / MAPPED["rnnx.models"] / Path(*package.split(".")[2:])
        assert all(list(folder.glob(p)) for p in patterns), (package, patterns)
