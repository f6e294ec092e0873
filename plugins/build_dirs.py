"""Where rnnx's native builds go (the ONNX Runtime ops, the libtorch ops, the native runtime, the plugins) and how a
build holds its folder. Torch-free; part of the room that owns every native build (:mod:`rnnx.plugins`)."""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the checkout, or site-packages/rnnx
#: The checkout when rnnx runs from one (it has pyproject.toml), else None (an installed package).
CHECKOUT = _PACKAGE_ROOT if (_PACKAGE_ROOT / "pyproject.toml").is_file() else None


def user_cache() -> Path:
    """``$XDG_CACHE_HOME`` or ``~/.cache``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def native_library_path(env_var: str, folder: str, name: str) -> Path:
    """``$<env_var>`` when set; else ``<checkout>/build/<folder>/<name>`` in a checkout; else
    ``<user cache>/rnnx/<folder>/<name>`` for an installed package."""
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    if CHECKOUT is not None:
        return CHECKOUT / "build" / folder / name
    return user_cache() / "rnnx" / folder / name


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``folder`` (the file ``<folder>/.rnnx-build.lock``) while a build writes into it:
    two processes building one CMake tree at once (two test workers, two terminals) take turns instead of
    racing on its files; the second then finds the tree built and its incremental build does nothing."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".rnnx-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build_main(build: Callable[[], Path], errors: type[Exception]) -> None:
    """A library builder's ``python -m`` entry: prints the path ``build()`` returns, or ``error: ...`` on stderr
    and exit status 1 for one of ``errors``."""
    try:
        print(build())
    except errors as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
