"""The name of :mod:`rnnx.models.ops.causal_linear_attention` in rnnx 0.1.0 (an op's folders are named by its torch
name, ``causal_linear_attention``).

Deprecated: importing it warns. Its public names are the new package's (``from rnnx.models.ops.linear_attention import
causal_linear_attention`` goes on working); the old deep paths (``rnnx.models.ops.linear_attention.naive``) are gone:
import them from ``rnnx.models.ops.causal_linear_attention``.
"""

import warnings as _warnings

from rnnx.models.ops.causal_linear_attention import *  # noqa: F403
from rnnx.models.ops.causal_linear_attention import __all__  # noqa: F401

_warnings.warn(
    "rnnx.models.ops.linear_attention is deprecated: import rnnx.models.ops.causal_linear_attention (the same names)",
    DeprecationWarning,
    stacklevel=2,
)
