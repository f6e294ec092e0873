"""Builds the rnnx wheel for tests that check what a non-editable install ships. Test helper, not part of the package.

``build_wheel(dest)`` runs ``pip wheel --no-deps --no-build-isolation`` on a clean copy of the project's
files (what git tracks plus untracked files it does not ignore), not on the checkout itself: an in-tree
setuptools build writes ``build/lib`` and ``rnnx.egg-info`` into the shared checkout, and a stale
``build/lib`` (a module deleted since the last build, say) would be copied into the wheel.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Build outputs and caches left out of the copy where git is unavailable.
IGNORED = ("build", "dist", ".cache", ".reference", ".git", "__pycache__", "*.egg-info", ".pytest_cache", "*.so", "*.o")


def project_files(source: Path = REPO) -> list[Path] | None:
    """The project's files relative to ``source``: git's tracked and untracked-but-not-ignored files that
    exist (edits not yet committed included); ``None`` where ``source`` is not a git work tree."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(source), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    names = sorted({name for name in listed.decode().split("\0") if name})
    return [Path(name) for name in names if (source / name).is_file()]


def copy_project(source: Path, dest: Path) -> None:
    """Copies the project's files (:func:`project_files`, else everything outside :data:`IGNORED`) to ``dest``."""
    files = project_files(source)
    if files is None:
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*IGNORED))
        return
    for rel in files:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, dest / rel)


def build_wheel(dest: Path, source: Path = REPO) -> Path:
    """Builds the rnnx wheel of ``source`` into ``dest`` (created if needed) and returns its path.

    Raises ``RuntimeError`` with pip's output when the build fails.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rnnx-wheel-src-") as tmp:
        copy = Path(tmp) / "rnnx"
        copy_project(source, copy)
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dest)]
        result = subprocess.run([*cmd, str(copy)], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"pip wheel failed with exit code {result.returncode}:\n{result.stdout}{result.stderr}")
    wheels = sorted(dest.glob("rnnx-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"expected one rnnx wheel in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]
