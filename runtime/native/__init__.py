"""The native runtime's sources: ``librnnx_runtime`` (C++17, a C API in ``include/rnnx/rnnx.h``), ``rnnx-generate``
and the test drivers, a CMake project in this folder (``src/``, ``include/``, ``tools/``). They are built by
:mod:`rnnx.plugins.native_runtime` (the room that owns every native build):
``python3 -m rnnx.runtime.native [--sanitize address,undefined]``.
"""
