"""Lazy loader of the C++ CPU kernel of the SRU scan (``plugins/sru_scan/cpu/sru_scan_cpu.cpp``).

The kernel is compiled on first use with :func:`torch.utils.cpp_extension.load` (ninja, OpenMP)
into torch's extension cache under the name :data:`EXTENSION_BASE` plus an instruction set suffix
(``_avx2`` where torch reports AVX2 or AVX-512) plus a hash of the build's inputs
(:func:`rnnx.models.ops.jit.extension_name`: each checkout and environment gets its own build, and
none rebuilds another's). If it cannot be built (no compiler,
...), :func:`load` warns once with the compiler's error and returns ``None``;
the op then runs the torch loop instead, so a missing compiler costs speed, never correctness.
"""

from __future__ import annotations

import platform
from types import ModuleType

from rnnx import plugins

from ..jit import LazyExtension, build_extension

#: Name of the built extension, before its instruction-set suffix (which keeps builds for different
#: CPUs apart in a shared cache) and its build hash.
EXTENSION_BASE = "rnnx_sru_cpu_v2"
SOURCE = plugins.OPS_DIR / "sru_scan" / "cpu" / "sru_scan_cpu.cpp"
#: The shared headers the kernel includes (``plugins/torch``: ATen's parallel-for; ``plugins/cpu``: vector maths).
INCLUDE_DIRS = (plugins.TORCH_DIR, plugins.CPU_DIR)
LDFLAGS = ["-fopenmp"]


def _isa_flags() -> tuple[str, list[str]]:
    """(name suffix, compiler flags) for the vector instructions torch reports for this CPU."""
    import torch

    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if x86 and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        return "_avx2", ["-mavx2", "-mfma"]
    return "", []


def _build() -> ModuleType:
    suffix, isa = _isa_flags()
    cflags = ["-O3", "-fopenmp", "-fno-trapping-math", *isa]
    return build_extension(EXTENSION_BASE + suffix, [SOURCE], INCLUDE_DIRS, cflags, ldflags=LDFLAGS)


#: The kernel's one build per process.
EXTENSION = LazyExtension(
    _build,
    f"rnnx: could not build the SRU scan CPU kernel ({EXTENSION_BASE}); using the slower torch loop instead. "
    "Build error:\n{error}",
)

#: The compiled kernel module (``forward``, ``backward``), or ``None`` if it cannot be built (why:
#: ``EXTENSION.error``).
load = EXTENSION.load
