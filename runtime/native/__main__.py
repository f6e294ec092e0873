"""``python3 -m rnnx.runtime.native``: builds the native runtime (:mod:`rnnx.plugins.native_runtime`)."""

from rnnx.plugins.native_runtime import main

main()
