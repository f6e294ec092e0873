"""rnnx's classes under the published ``sru`` package's names, so that sru's own test suites run against
them unmodified (``scripts/sru_suites.sh``). ``__version__`` is the release whose suite runs."""

import os

from rnnx.models import SRU, SRUCell, SRUpp, SRUppCell

from . import modules

__version__ = os.environ.get("SRU_SHIM_VERSION", "3.0.0.dev6")
__all__ = ["SRU", "SRUCell", "SRUpp", "SRUppCell", "__version__", "modules"]
