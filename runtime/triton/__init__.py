"""``rnnx.runtime.triton`` is :mod:`rnnx.runtime.serving.triton` under its earlier name: the same objects, and
:mod:`.python_model`, which model repositories written before the move import by this name."""

from ..serving.triton import *  # noqa: F403
from ..serving.triton import __all__  # noqa: F401
