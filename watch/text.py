"""Text from outside (znodes, a broker's log, a Kafka answer) made safe for a terminal:
the watch view's model and zkctl's text output (zkctl.common) both show it so."""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls (0x9b is an 8-bit CSI). The codecs take any string a
# znode's JSON holds (a broker's host is any valid UTF-8), and a view that wrote it raw
# would let a registration clear the screen or retitle the window; curses refuses a NUL.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str) -> str:
    """`text` with each control character written as a \\xNN escape."""
    return CONTROL.sub(_escape, text) if CONTROL.search(text) else text
