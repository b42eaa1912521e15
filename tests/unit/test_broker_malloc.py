"""The broker's malloc settings (arena limit, fixed mmap threshold): set through glibc
unless the environment sets them; and the trim of freed heap."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest

from broker.server import _return_free_memory, fix_malloc_mmap_threshold, limit_malloc_arenas


def test_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas() is False


def test_set_through_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    expected = platform.libc_ver()[0] == "glibc"
    assert limit_malloc_arenas() is expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MALLOC_MMAP_THRESHOLD_", "65536"),
        ("GLIBC_TUNABLES", "glibc.malloc.check=0:glibc.malloc.mmap_threshold=65536"),
    ],
)
def test_the_environment_wins_for_the_mmap_threshold(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setenv(name, value)
    assert fix_malloc_mmap_threshold() is False


# Run in a process of its own (the setting lasts for the process): a block of twice the
# broker's threshold is mapped and freed, which makes glibc raise its own threshold to
# that size; then another of that size is made. It is mapped (glibc's mallinfo2 counts
# it in hblkhd, the bytes in mappings) only if the threshold stayed where the broker put
# it; from the heap, its pages would stay resident once freed until the next trim.
_MAPPED_AFTER_A_FREE = textwrap.dedent(
    """
    import ctypes, sys
    from broker.server import MMAP_THRESHOLD, fix_malloc_mmap_threshold
    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    if sys.argv[1] == "fixed":
        assert fix_malloc_mmap_threshold()
    size = 2 * MMAP_THRESHOLD
    first = bytearray(size)
    del first
    before = libc.mallinfo2().hblkhd
    block = bytearray(size)
    print(libc.mallinfo2().hblkhd - before >= size)
    """
)


def _glibc_at_least(major: int, minor: int) -> bool:
    name, version = platform.libc_ver()
    parts = version.split(".")
    return name == "glibc" and (int(parts[0]), int(parts[1])) >= (major, minor)


@pytest.mark.skipif(not _glibc_at_least(2, 33), reason="mallopt is glibc's, mallinfo2 2.33's")
@pytest.mark.parametrize(("setting", "mapped"), [("fixed", True), ("glibc's", False)])
def test_a_large_block_is_mapped_after_one_as_large_was_freed(setting: str, mapped: bool) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")
    }
    done = subprocess.run(
        [sys.executable, "-c", _MAPPED_AFTER_A_FREE, setting],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # With glibc's own threshold it comes from the heap: what fixing it is there to avoid.
    assert done.stdout.strip() == str(mapped)


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
