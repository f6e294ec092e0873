"""The old name of :mod:`rnnx.models.ops.sru_scan` (an op's folders are named by its torch name, ``sru_scan``).

Kept so that ``from rnnx.models.ops.sru import sru_scan`` goes on working: the public names of the new package,
re-exported. Old deep imports (``rnnx.models.ops.sru.naive``) resolve to the new package's modules themselves,
aliased in ``sys.modules``, never imported a second time (``torch.ops.rnnx.sru_scan`` registers once).
"""

import sys as _sys

from rnnx.models.ops import sru_scan as _package
from rnnx.models.ops.sru_scan import *  # noqa: F403
from rnnx.models.ops.sru_scan import __all__  # noqa: F401

for _name, _module in list(_sys.modules.items()):
    if _name.startswith(_package.__name__ + "."):
        _sys.modules[__name__ + _name[len(_package.__name__) :]] = _module
