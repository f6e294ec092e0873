"""The name of :mod:`rnnx.models.ops.sru_scan` in rnnx 0.1.0 (an op's folders are named by its torch name,
``sru_scan``).

Deprecated: importing it warns. Its public names are the new package's (``from rnnx.models.ops.sru import sru_scan``
goes on working); the old deep paths (``rnnx.models.ops.sru.naive``) are gone: import them from
``rnnx.models.ops.sru_scan``.
"""

import warnings as _warnings

from rnnx.models.ops.sru_scan import *  # noqa: F403
from rnnx.models.ops.sru_scan import __all__  # noqa: F401

_warnings.warn(
    "rnnx.models.ops.sru is deprecated: import rnnx.models.ops.sru_scan (the same names)",
    DeprecationWarning,
    stacklevel=2,
)
