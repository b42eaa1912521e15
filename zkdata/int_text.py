"""Integers written as text, read as Java's Integer.parseInt reads them (Kafka's znode
readers, and its tools' arguments): an optional minus and ASCII digits, nothing else.

Python's int() also takes "1_0", " 1", "+1" and other scripts' digits ('²' passes
str.isdigit() and int() refuses it), and refuses a text of more than 4,300 digits with a
plain ValueError: these read the text themselves and never hand int() more digits than
the range holds, leading zeros aside.
"""

from __future__ import annotations

import re

INT_TEXT = re.compile(r"-?[0-9]+")
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def small_int_text(text: str, max_digits: int) -> int | None:
    """The integer a text of ASCII digits (after an optional minus) names, or None if it
    has more than ``max_digits`` digits past its leading zeros (never given to int())."""
    sign, digits = ("-", text[1:]) if text.startswith("-") else ("", text)
    digits = digits.lstrip("0") or "0"
    return int(sign + digits) if len(digits) <= max_digits else None


def int_text_in_range(text: str, low: int, high: int) -> int | None:
    """The integer ``text`` writes if it writes one (as above) from ``low`` to ``high``,
    else None."""
    if INT_TEXT.fullmatch(text) is None:
        return None
    value = small_int_text(text, len(str(max(abs(low), abs(high)))))
    return value if value is not None and low <= value <= high else None
