"""The broker's malloc arena limit: set through glibc unless the environment sets it."""

from __future__ import annotations

import os
import platform

import pytest

from broker.server import _return_free_memory, limit_malloc_arenas


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


def test_set_through_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    expected = platform.libc_ver()[0] == "glibc"
    assert limit_malloc_arenas() is expected


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_heap_goes_back_to_the_system() -> None:
    """What the broker's status thread does every second: glibc keeps the pages of
    blocks freed in the middle of its heap (a burst's temporaries between long-lived
    blocks) until malloc_trim gives them back."""
    chunks = [bytes(32 * 1024) for _ in range(1024)]  # 32 MiB from the heap (below mmap)
    kept = chunks[::8]  # every 8th stays: nothing at the heap's top to trim on free
    before = _rss_mib()
    del chunks
    freed = _rss_mib()
    _return_free_memory()
    after = _rss_mib()
    assert freed > before - 8, (before, freed)  # free() alone gave little back
    assert after < freed - 16, (freed, after)  # the trim gave back most of 28 MiB
    assert len(kept) == 128
