"""``rnnx.runtime.artifact`` is :mod:`rnnx.runtime.contract.artifact` under its earlier name (the same module
object, so either import sees one set of definitions)."""

import sys

from .contract import artifact

sys.modules[__name__] = artifact
