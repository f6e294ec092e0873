"""Compiles the native CPU kernels now rather than on first use: ``python -m rnnx.models.ops.build``.

Exits non-zero, printing the compiler's error, when a kernel cannot be built (the ops would then
fall back to their slower torch loops).
"""

from __future__ import annotations

import sys
import time
import warnings


def main() -> int:
    """Builds every kernel; returns the process exit code."""
    from .sru import cpu_kernel

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = cpu_kernel.load()
    if module is None:
        print(f"rnnx: building the SRU scan CPU kernel failed:\n{cpu_kernel.build_error()}", file=sys.stderr)
        return 1
    print(f"rnnx: SRU scan CPU kernel ready ({module.__file__}, {time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
