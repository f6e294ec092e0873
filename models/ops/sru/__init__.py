"""SRU scan op. Entry point: :func:`sru_scan` (being replaced by the registered op)."""

from .naive import sru_scan_naive as sru_scan
from .naive import sru_scan_naive

__all__ = ["sru_scan", "sru_scan_naive"]
