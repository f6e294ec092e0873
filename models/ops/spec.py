"""``rnnx.models.ops.spec`` is :mod:`rnnx.runtime.contract.ops` under its earlier name (the same module object,
so either import sees one set of definitions)."""

import sys

from rnnx.runtime.contract import ops

sys.modules[__name__] = ops
