"""``python3 -m rnnx.runtime.native``: builds the native runtime (see the package docstring)."""

from . import main

main()
