"""Names for the torch extensions rnnx compiles at run time (``torch.utils.cpp_extension.load``).

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
from collections.abc import Iterable, Sequence
from pathlib import Path

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
