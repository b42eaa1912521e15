"""zkctl's output where the terminal's encoding cannot hold a character, and of control
characters."""

from __future__ import annotations

import io
import json
import sys

import pytest

from zkctl import common


def latin1_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="latin-1", write_through=True)


def test_out_writes_what_the_locale_cannot_encode_as_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stdout = latin1_stream()
    monkeypatch.setattr(sys, "stdout", stdout)  # the module zkctl.common uses
    common.out("controller is broker 日本, épée")
    common.out("next")
    written = stdout.buffer.getvalue().decode("latin-1")  # type: ignore[attr-defined]
    assert written == "controller is broker \\u65e5\\u672c, épée\nnext\n"


def test_err_writes_what_the_locale_cannot_encode_as_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr = latin1_stream()
    monkeypatch.setattr(sys, "stderr", stderr)  # the module zkctl.common uses
    common.err("zkctl: 日本")
    assert stderr.buffer.getvalue() == b"zkctl: \\u65e5\\u672c\n"  # type: ignore[attr-defined]


# What a znode or a Kafka answer may carry (a broker's host, a group id are any text): C0
# controls with a tab among them, ESC sequences that clear the screen or retitle the
# window, DEL and the 8-bit CSI.
HOSTILE = "a\x00b\t\x07\x1b]0;owned\x07\x1b[2J\x7f\x9b2J"
ESCAPED = "a\\x00b\\x09\\x07\\x1b]0;owned\\x07\\x1b[2J\\x7f\\x9b2J"


def test_text_output_escapes_control_characters_as_zkctl_watch_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """zkctl's text lines show control characters as \\xNN escapes, as zkctl watch shows
    them (watch.text.printable), so a registration cannot clear the screen through
    `zkctl controller` either; the newlines between the lines of a text are kept, and
    printable text, non-ASCII included, is left as it is."""
    common.out(f"Controller: broker 1 (PLAINTEXT://{HOSTILE}:9092)\nbrøker ✓")
    common.warn(f"group {HOSTILE}")
    written = capsys.readouterr()
    assert written.out == f"Controller: broker 1 (PLAINTEXT://{ESCAPED}:9092)\nbrøker ✓\n"
    assert written.err == f"zkctl: warning: group {ESCAPED}\n"


def test_tab_separated_fields_keep_their_tabs_and_escape_their_own(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka's topic describe lines are split on tabs by scripts: the separators stay
    tabs, a tab inside a field (a config's value) does not split it."""
    common.out_fields(["", "Topic: t", f"Configs: x={HOSTILE}"])
    assert capsys.readouterr().out == f"\tTopic: t\tConfigs: x={ESCAPED}\n"


def test_json_output_is_left_to_json_escapes(capsys: pytest.CaptureFixture[str]) -> None:
    common.print_json({"host": HOSTILE, "lines": ["a", "b"]})
    written = capsys.readouterr().out
    assert json.loads(written) == {"host": HOSTILE, "lines": ["a", "b"]}
    assert "\\u001b" in written
    assert not any(ord(c) < 0x20 and c != "\n" for c in written), repr(written)
