"""The old name of :mod:`rnnx.models.ops.causal_linear_attention` (an op's folders are named by its torch name,
``causal_linear_attention``).

Kept so that ``from rnnx.models.ops.linear_attention import causal_linear_attention`` goes on working: the public
names of the new package, re-exported. Old deep imports (``rnnx.models.ops.linear_attention.naive``) resolve to
the new package's modules themselves, aliased in ``sys.modules``, never imported a second time
(``torch.ops.rnnx.causal_linear_attention`` registers once).
"""

import sys as _sys

from rnnx.models.ops import causal_linear_attention as _package
from rnnx.models.ops.causal_linear_attention import *  # noqa: F403
from rnnx.models.ops.causal_linear_attention import __all__  # noqa: F401

for _name, _module in list(_sys.modules.items()):
    if _name.startswith(_package.__name__ + "."):
        _sys.modules[__name__ + _name[len(_package.__name__) :]] = _module
