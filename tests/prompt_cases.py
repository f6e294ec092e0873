"""The prompt syntax's cases (docs/embedding.md, "Prompts"), shared by the Python (test_runtime_ort.py), C
(test_native_runtime.py) and JavaScript (test_js_runtime.py) tests: one table, every runtime.

Each case is ``(text, ids)`` for a prompt that parses, or ``(text, piece)`` with ``piece`` a string: the error
line names it (``"x" is not a token id``), or, for ``""``, says ``no token ids``. Ids stay below 12, the copy
demos' vocabulary, so the tests can generate from each parsed prompt.
"""

from __future__ import annotations

from typing import Union

#: (prompt text, its token ids or the bad piece its error names; "" for an empty prompt)
PROMPT_CASES: list[tuple[str, Union[list[int], str]]] = [
    ("3 5 7", [3, 5, 7]),
    ("3,5,7", [3, 5, 7]),
    ("3, 5, 7", [3, 5, 7]),
    (" 3\t5\n7 ", [3, 5, 7]),
    ("3,,5 ,7,", [3, 5, 7]),
    ("10", [10]),
    ("007 0", [7, 0]),
    ("", ""),
    (" , ", ""),
    ("3 x 7", "x"),
    ("3 -5 7", "-5"),
    ("3 5.0 7", "5.0"),
    ("+3", "+3"),
    ("3;5", "3;5"),
    ("0x3", "0x3"),
]


def expected_error(text: str, piece: str) -> str:
    """The part of the error line every runtime prints for a refused prompt."""
    problem = "no token ids" if piece == "" else f'"{piece}" is not a token id'
    return f'prompt "{text}": {problem} (token ids are non-negative integers separated by spaces and/or commas)'


PARSED = [(text, ids) for text, ids in PROMPT_CASES if isinstance(ids, list)]
REFUSED = [(text, piece) for text, piece in PROMPT_CASES if isinstance(piece, str)]
