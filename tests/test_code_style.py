"""The tree conforms to its linters and formatters: ruff (lint + format) and clang-format.

The configurations are ``[tool.ruff]`` in pyproject.toml and ``.clang-format``; the same commands run
from ``.pre-commit-config.yaml``. Both tools are pinned in the ``test`` extra, so CI and a developer
check with the same versions.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CXX_SUFFIXES = (".cpp", ".h", ".cu", ".cuh")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; `bash scripts/setup.sh` installs it (the test extra pins it)")
    return path


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)


def _tracked(suffixes: tuple[str, ...]) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [p for p in out.split("\0") if p.endswith(suffixes) and (REPO / p).is_file()]


def test_ruff_lint_passes() -> None:
    result = _run([_tool("ruff"), "check", "--no-cache", "."])
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied() -> None:
    result = _run([_tool("ruff"), "format", "--check", "--no-cache", "."])
    assert result.returncode == 0, result.stdout + result.stderr


def test_clang_format_is_applied() -> None:
    files = _tracked(CXX_SUFFIXES)
    assert files, "no C++/CUDA sources found"
    result = _run([_tool("clang-format"), "--dry-run", "--Werror", *files])
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
