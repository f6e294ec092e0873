"""The exporter's error and how it words the failures it reports: one line each."""

from __future__ import annotations

import re


class ExportError(ValueError):
    """An export that cannot be done or did not validate; the message is one line."""


#: Terminal colour codes, which torch's exporter puts in its messages.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def one_line(e: BaseException) -> str:
    text = _ANSI.sub("", str(e)).strip()
    return text.splitlines()[0] if text else type(e).__name__


def with_cause(e: BaseException) -> str:
    """``Type: first line`` of ``e``, then of the exception at the end of its cause chain (what the exporter
    wraps: a torch.export error, say) with the model code it points at: one line."""
    line = f"{type(e).__name__}: {one_line(e).removesuffix(' Next steps:')}"
    root, seen = e, {id(e)}
    while True:
        nxt = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if nxt is None or id(nxt) in seen:
            break
        root = nxt
        seen.add(id(root))
    if root is not e:
        line += f"; caused by {type(root).__name__}: {one_line(root)}"
    text = _ANSI.sub("", str(root))
    call = re.search(r"The following call raised this error:\s*File \"(.+?)\", line (\d+), in (\S+)", text)
    caused = re.search(r"Caused by: \((.+?)\)", text)
    if call is None and caused is None:
        return line
    where = f"{call[1]}:{call[2]} in {call[3]}" if call else caused[1]
    return f"{line} (at {where})"
