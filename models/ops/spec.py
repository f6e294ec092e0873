"""``rnnx.models.ops.spec`` is :mod:`rnnx.runtime.contract.ops` under its name of rnnx 0.1.0 (the same module object,
so either import sees one set of definitions). Deprecated: importing it warns; import ``rnnx.runtime.contract.ops``."""

import sys
import warnings

from rnnx.runtime.contract import ops

warnings.warn(
    "rnnx.models.ops.spec is deprecated: import rnnx.runtime.contract.ops (the same records)",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = ops
