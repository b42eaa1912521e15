"""zkctl's output where the terminal's encoding cannot hold a character."""

from __future__ import annotations

import io

import pytest

from zkctl import common


def latin1_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="latin-1", write_through=True)


def test_out_writes_what_the_locale_cannot_encode_as_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stdout = latin1_stream()
    monkeypatch.setattr(common.sys, "stdout", stdout)
    common.out("controller is broker 日本, épée")
    common.out("next")
    written = stdout.buffer.getvalue().decode("latin-1")  # type: ignore[attr-defined]
    assert written == "controller is broker \\u65e5\\u672c, épée\nnext\n"


def test_err_writes_what_the_locale_cannot_encode_as_escapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr = latin1_stream()
    monkeypatch.setattr(common.sys, "stderr", stderr)
    common.err("zkctl: 日本")
    assert stderr.buffer.getvalue() == b"zkctl: \\u65e5\\u672c\n"  # type: ignore[attr-defined]
