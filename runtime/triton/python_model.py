"""The Python-backend model under its earlier name: repositories written before the serving room existed hold a
``model.py`` that imports ``rnnx.runtime.triton.python_model``."""

from ..serving.triton.python_model import TritonPythonModel  # noqa: F401
