"""Integers written as text.

``java_int_in_range`` reads one as Java's Integer.parseInt / Long.parseLong (Scala's
toInt / toLong) do, where Kafka reads text so (its znode readers, its checkpoint files,
its configs after a trim, its tools' arguments): an optional '+' or '-', then one or more
chars Character.digit(ch, 10) takes: Unicode decimal digits (category Nd) of the Basic
Multilingual Plane only, since Java reads UTF-16 chars (a digit beyond it is two
surrogates, neither a digit). No space, no '_', nothing else.

``int_text_in_range`` is stricter, an optional minus and ASCII digits, for text Kafka
matches against ``[0-9]+`` before it parses (a bootstrap server's port).

Python's int() takes "1_0", " 1" and digits beyond the BMP, and refuses a text of more
than 4,300 digits with a plain ValueError: these read the text themselves and never hand
int() more digits than the range holds, leading zeros aside.
"""

from __future__ import annotations

import re
import unicodedata

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


def java_int_in_range(text: str, low: int, high: int) -> int | None:
    """The integer Java's parseInt / parseLong read in ``text`` (above), if from ``low``
    to ``high``, else None (their NumberFormatException, or out of the range)."""
    if len(text) <= 4000 and text.isascii() and text.isdigit():  # most: int() takes 4,300
        value = int(text)
        return value if low <= value <= high else None
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body:
        return None
    max_digits = len(str(max(abs(low), abs(high))))
    value = 0
    significant = 0  # digits after the leading zeros: past max_digits, past the range
    for ch in body:
        if ch > "\uffff" or unicodedata.category(ch) != "Nd":
            return None
        digit = unicodedata.decimal(ch)
        if value or digit:
            significant += 1
            if significant > max_digits:
                return None
        value = value * 10 + digit
    if text[0] == "-":
        value = -value
    return value if low <= value <= high else None
