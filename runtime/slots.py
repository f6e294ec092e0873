"""``rnnx.runtime.slots`` is :mod:`rnnx.runtime.serving.slots` under its earlier name (the same module object)."""

import sys

from .serving import slots

sys.modules[__name__] = slots
