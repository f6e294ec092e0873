"""``rnnx.runtime.scheduler`` is :mod:`rnnx.runtime.serving.scheduler` under its earlier name (the same module
object)."""

import sys

from .serving import scheduler

sys.modules[__name__] = scheduler
