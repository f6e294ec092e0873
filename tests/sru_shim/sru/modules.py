"""``sru.modules`` names the suites import, as rnnx's classes."""

from rnnx.models.sru import SRU, SRUCell
from rnnx.models.srupp import SRUpp, SRUppAttention, SRUppCell, SRUppProjectedLinear

__all__ = ["SRU", "SRUCell", "SRUpp", "SRUppAttention", "SRUppCell", "SRUppProjectedLinear"]
