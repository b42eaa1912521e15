"""The broker's malloc arena limit: set through glibc unless the environment sets it."""

from __future__ import annotations

import platform

import pytest

from broker.server import limit_malloc_arenas


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


def test_set_through_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    expected = platform.libc_ver()[0] == "glibc"
    assert limit_malloc_arenas() is expected
