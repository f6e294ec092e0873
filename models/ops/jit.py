"""The torch extensions rnnx compiles at run time (``torch.utils.cpp_extension.load``): their names, and
:class:`LazyExtension`, the build-once loader each one uses.

torch keeps a JIT build in ``~/.cache/torch_extensions/<python>_<device>/<name>`` and rebuilds it whenever
the build command it recorded there differs from the one it is asked for. Two checkouts or environments
on one machine that share a name therefore rebuild each other's extension on every load (other source
paths, another ninja or compiler). :func:`extension_name` names a build by a hash of everything that
goes into it (the sources and every header beside them, their paths, the flags, the compiler, ninja,
Python and torch), so each distinct build has a directory of its own and a load reuses it; changing a
header also gets a new build, which torch's own check (sources only) would miss.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Optional

#: Files whose bytes enter the hash, besides the sources: headers in the sources' and include folders.
_HEADER_SUFFIXES = (".h", ".hpp", ".cuh")


def extension_name(base: str, sources: Sequence[Path], include_dirs: Iterable[Path], flags: Sequence[str]) -> str:
    """``base`` plus 12 hex digits of a sha256 over the build's inputs (see the module doc)."""
    import torch

    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode()
            digest.update(len(data).to_bytes(8, "little") + data)

    folders = dict.fromkeys([*(Path(s).resolve().parent for s in sources), *(Path(d).resolve() for d in include_dirs)])
    headers = sorted({h for folder in folders for h in folder.iterdir() if h.suffix in _HEADER_SUFFIXES})
    for path in [*(Path(s).resolve() for s in sources), *headers]:
        add(path, path.read_bytes())
    add(*flags)
    add(
        sys.executable,
        torch.__version__,
        shutil.which("ninja") or "",
        os.environ.get("CXX", ""),
        shutil.which("c++") or "",
    )
    return f"{base}_{digest.hexdigest()[:12]}"


def build_extension(
    base: str,
    sources: Sequence[Path],
    include_dirs: Sequence[Path] = (),
    cflags: Sequence[str] = (),
    cuda_cflags: Sequence[str] = (),
    ldflags: Sequence[str] = (),
) -> ModuleType:
    """Compiles (or reuses) the torch extension of ``sources``, named by :func:`extension_name` from ``base``
    and every input of the build; compiler errors propagate."""
    from torch.utils.cpp_extension import load

    flags = [*cflags, *(f"cuda:{f}" for f in cuda_cflags), *ldflags]
    return load(
        name=extension_name(base, sources, include_dirs, flags),
        sources=[str(s) for s in sources],
        extra_include_paths=[str(d) for d in include_dirs],
        extra_cflags=list(cflags),
        extra_cuda_cflags=list(cuda_cflags),
        extra_ldflags=list(ldflags),
        verbose=False,
    )


class Unavailable(Exception):
    """An extension cannot be built here for an expected reason (no CUDA device): recorded, not warned about."""


class LazyExtension:
    """A torch extension built on the first :meth:`load` of the process, at most once (thread-safe).

    ``build`` compiles and returns the module. :class:`Unavailable` from it is recorded as the reason; any
    other exception is recorded and warned once with ``warning`` (a format string with ``{error}``), since
    the op then runs its torch code: a failed build costs speed, never correctness.
    """

    def __init__(self, build: Callable[[], ModuleType], warning: str) -> None:
        self._build = build
        self._warning = warning
        self._lock = threading.Lock()
        self.module: Optional[ModuleType] = None
        self.error: Optional[str] = None

    def load(self) -> Optional[ModuleType]:
        """The built module, or ``None`` when it cannot be built (the reason in :attr:`error`)."""
        if self.module is not None or self.error is not None:
            return self.module
        with self._lock:
            if self.module is None and self.error is None:
                try:
                    self.module = self._build()
                except Unavailable as e:
                    self.error = str(e)
                except Exception as exc:  # any build failure falls back to the torch code
                    self.error = f"{type(exc).__name__}: {exc}"
                    warnings.warn(self._warning.format(error=self.error), RuntimeWarning, stacklevel=3)
        return self.module
