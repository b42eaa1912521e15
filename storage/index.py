"""A segment's offset index and time index, in Kafka's byte formats.

* ``.index``: 8-byte entries, big-endian ``relative offset int32, position int32``: the
  batch holding offset ``base + relative offset`` starts at or after ``position``.
* ``.timeindex``: 12-byte entries ``timestamp int64, relative offset int32``: every
  record at or below that offset has a timestamp at most ``timestamp``.

Both are sparse (an entry per ``index.interval.bytes`` of log) and sorted. Kafka
preallocates and memory-maps them; here the files hold exactly their entries (as Kafka
leaves them after a roll or a clean shutdown), entries are appended with ``write`` and
looked up by binary search with ``pread``. Nothing of an index lives in Python memory
but its entry count and last entry, so a broker's memory does not grow with its logs
(a mapped index's touched pages would count in its resident set). A lookup costs about
log2(entries) small preads, and none for the common case of an offset at or past the
last entry (a consumer or follower at the log's end).
"""

from __future__ import annotations

import errno
import os
import struct
import threading
from pathlib import Path
from typing import Final, NamedTuple

from storage.errors import OffsetOverflowError
from storage.records import NO_TIMESTAMP

__all__ = ["IndexEntry", "OffsetIndex", "TimeIndex", "TimestampEntry"]

_OFFSET_ENTRY: Final = struct.Struct(">ii")
_TIME_ENTRY: Final = struct.Struct(">qi")
_INT32_MAX: Final = 2**31 - 1


class IndexEntry(NamedTuple):
    offset: int
    position: int


class TimestampEntry(NamedTuple):
    timestamp: int
    offset: int


_OPENING = threading.Lock()


def _open_append(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)


class _Index:
    """What both indexes share: an append-only file of fixed-size sorted entries."""

    # Slots and a str path: a broker keeps two indexes per partition, 100,000s of them.
    __slots__ = (
        "_closed",
        "_fd",
        "_path",
        "base_offset",
        "entries",
        "max_entries",
        "torn",
        "truncations",
    )
    entry_size: int

    def __init__(self, path: Path | str, base_offset: int, max_index_bytes: int) -> None:
        self._path = os.fspath(path)
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        # The file descriptor is opened on first use (Kafka's lazy index): a broker with
        # 10,000 partitions that are mostly idle would otherwise hold 20,000 more open
        # files, past a common 20,000 limit.
        fd = _open_append(self._path)
        try:
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        self._fd = -1
        self._closed = False
        #: a file that is not a whole number of entries (a torn write) is corrupt
        self.torn = size % self.entry_size != 0
        self.entries = size // self.entry_size
        #: truncations of the file: a lookup (lock-free) that finds an entry gone tells
        #: it from a damaged file by it
        self.truncations = 0

    def _file(self) -> int:
        fd = self._fd
        if fd >= 0:
            return fd
        with _OPENING:  # two readers racing to open would leak a descriptor
            if self._fd < 0:
                if self._closed:
                    raise OSError(errno.EBADF, f"{self.path} is closed")
                self._fd = _open_append(self._path)
            return self._fd

    @property
    def path(self) -> Path:
        return Path(self._path)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def _read(self, slot: int) -> bytes:
        size = self.entry_size
        data = os.pread(self._file(), size, slot * size)
        if len(data) != size:
            raise OSError(f"short read of entry {slot} of {self.path}")
        return data

    def _truncate_entries(self, entries: int) -> None:
        self.truncations += 1  # before the cut: see _entry_unless_cut
        os.ftruncate(self._file(), entries * self.entry_size)
        self.entries = entries
        self.torn = False

    def reset(self) -> None:
        """Remove every entry (before a rebuild)."""
        self._truncate_entries(0)
        self._after_truncate()

    def _after_truncate(self) -> None:
        raise NotImplementedError

    def _entry_unless_cut(self, slot: int, truncations: int) -> IndexEntry | TimestampEntry | None:
        """Entry ``slot`` of a lookup begun at ``truncations``, or None if a truncation
        has cut the file since (the log's, under its lock; a lookup takes none). Its
        short read is then no damage: an I/O error of a log takes its whole directory
        offline (KIP-112), and Kafka's lookups in a mapped index never fail for it."""
        try:
            return self._entry(slot)
        except OSError:
            if self.truncations == truncations:
                raise
            return None

    def _entry(self, slot: int) -> IndexEntry | TimestampEntry:
        raise NotImplementedError

    def _relative(self, offset: int) -> int:
        """``offset`` as an entry holds it, relative to the base (Kafka's
        AbstractIndex.relativeOffset): OffsetOverflowError if 32 bits cannot hold it,
        instead of a bare struct.error (segment rolls keep offsets within it)."""
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise OffsetOverflowError(
                f"{self.path}: offset {offset} is not within 2**31 above the base"
                f" offset {self.base_offset}"
            )
        return relative

    def truncate_to(self, offset: int) -> None:
        """Remove the entries with offsets >= ``offset`` (both kinds are sorted by offset)."""
        lo, hi = 0, self.entries  # first slot whose offset >= offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entry(mid).offset < offset:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.entries:
            self._truncate_entries(lo)
            self._after_truncate()

    def flush(self) -> None:
        if self._closed:
            raise OSError(errno.EBADF, f"{self.path} is closed")
        if self._fd >= 0:  # never opened here: nothing written by this process to sync
            os.fsync(self._fd)

    def close(self) -> None:
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, path: Path) -> None:
        """Under the lock its first open takes: a reader opening it meanwhile would make
        an empty file under the old name (it opens with O_CREAT)."""
        with _OPENING:
            os.rename(self._path, path)
            self._path = os.fspath(path)


class OffsetIndex(_Index):
    """Offset -> file position of the batch to start scanning from."""

    __slots__ = ("last_entry",)
    entry_size = 8

    def __init__(self, path: Path | str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.last_entry = IndexEntry(base_offset, 0)
        self._after_truncate()

    def _after_truncate(self) -> None:
        if self.entries:
            rel, pos = _OFFSET_ENTRY.unpack(self._read(self.entries - 1))
            self.last_entry = IndexEntry(self.base_offset + rel, pos)
        else:
            self.last_entry = IndexEntry(self.base_offset, 0)

    def _entry(self, slot: int) -> IndexEntry:
        rel, pos = _OFFSET_ENTRY.unpack(self._read(slot))
        return IndexEntry(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets must grow (a broken invariant raises ValueError)."""
        if self.entries and offset <= self.last_entry.offset:
            raise ValueError(
                f"offset index {self.path}: entry {offset} is not above {self.last_entry.offset}"
            )
        os.write(self._file(), _OFFSET_ENTRY.pack(self._relative(offset), position))
        self.entries += 1
        self.last_entry = IndexEntry(offset, position)

    def lookup(self, offset: int) -> IndexEntry:
        """The entry with the largest offset <= ``offset``; (base offset, 0) if none. A
        negative position (garbage in an entry the load does not check) is read as 0, as
        Kafka's LogSegment.translateOffset does: a pread there fails with EINVAL, which
        would be taken for the disk failing."""
        truncations = self.truncations
        last = self.last_entry
        if self.entries == 0 or offset >= last.offset:
            if not self.entries:
                return IndexEntry(self.base_offset, 0)
            return last if last.position >= 0 else IndexEntry(last.offset, 0)
        lo, hi = 0, self.entries - 1  # answer in [lo-1, hi-1]: entry hi is > offset
        found = IndexEntry(self.base_offset, 0)
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self._entry_unless_cut(mid, truncations)
            if entry is None:
                # Cut by a truncation: an entry at or below the offset is still a batch
                # to scan from (the base, at worst), only further back.
                break
            assert isinstance(entry, IndexEntry)
            if entry.offset <= offset:
                found = entry
                lo = mid + 1
            else:
                hi = mid
        return found if found.position >= 0 else IndexEntry(found.offset, 0)

    def sanity_problem(self, log_size: int) -> str | None:
        """Why this index cannot be trusted for a log of ``log_size`` bytes, or None."""
        if self.torn:
            return f"{self.path} is not a whole number of {self.entry_size}-byte entries"
        if not self.entries:
            return None
        first = self._entry(0)
        last = self.last_entry
        if first.offset < self.base_offset or last.offset < first.offset:
            return f"{self.path}: entries out of order ({first.offset}..{last.offset})"
        # Garbage (a top bit set): the load reads the batch at the last entry's position.
        if first.position < 0 or last.position < first.position:
            return f"{self.path}: positions out of order ({first.position}..{last.position})"
        if last.position >= max(log_size, 1):
            return f"{self.path}: last entry points to {last.position}, past the log's end"
        return None


class TimeIndex(_Index):
    """Timestamp -> offset: every record at or below ``offset`` has a timestamp at most
    ``timestamp``, so a search for the first record with timestamp >= T can start after
    the last entry whose timestamp is below T."""

    __slots__ = ("last_entry",)
    entry_size = 12

    def __init__(self, path: Path | str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.last_entry: TimestampEntry | None = None
        self._after_truncate()

    def _after_truncate(self) -> None:
        self.last_entry = self._entry(self.entries - 1) if self.entries else None

    @property
    def is_full(self) -> bool:
        """One slot short of the file's entries (Kafka 2.8's TimeIndex.isFull): the last
        is kept for the entry written when the segment rolls (``maybe_append`` with
        ``skip_full_check``), which then stays within segment.index.bytes."""
        return self.entries >= self.max_entries - 1

    def _entry(self, slot: int) -> TimestampEntry:
        ts, rel = _TIME_ENTRY.unpack(self._read(slot))
        return TimestampEntry(ts, self.base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add an entry if ``timestamp`` is above the last entry's (Kafka's maybeAppend).
        A full index takes no more entries, except the one written when a segment rolls.
        An empty index compares with -1, as Kafka's (its last entry is then (-1, base)):
        batches without timestamps (-1) get no entry, whose offset (-1, none known) would
        be below the segment's base and have every load find the index corrupt."""
        if self.is_full and not skip_full_check:
            return
        last = self.last_entry
        if timestamp <= (NO_TIMESTAMP if last is None else last.timestamp):
            return
        if last is not None and offset < last.offset:
            raise ValueError(
                f"time index {self.path}: entry offset {offset} is below {last.offset}"
            )
        os.write(self._file(), _TIME_ENTRY.pack(timestamp, self._relative(offset)))
        self.entries += 1
        self.last_entry = TimestampEntry(timestamp, offset)

    def lookup_below(self, timestamp: int) -> TimestampEntry | None:
        """The last entry whose timestamp is < ``timestamp``, or None."""
        truncations = self.truncations
        last = self.last_entry
        if last is None:
            return None
        if last.timestamp < timestamp:
            return last
        lo, hi = 0, self.entries - 1
        found: TimestampEntry | None = None
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self._entry_unless_cut(mid, truncations)
            if entry is None:
                break  # cut by a truncation: the search starts from what was found
            assert isinstance(entry, TimestampEntry)
            if entry.timestamp < timestamp:
                found = entry
                lo = mid + 1
            else:
                hi = mid
        return found

    def sanity_problem(self) -> str | None:
        if self.torn:
            return f"{self.path} is not a whole number of {self.entry_size}-byte entries"
        if not self.entries:
            return None
        first = self._entry(0)
        last = self.last_entry
        assert last is not None
        if last.timestamp < first.timestamp or last.offset < first.offset:
            return f"{self.path}: entries out of order"
        if first.offset < self.base_offset:
            return f"{self.path}: entry offset {first.offset} below the segment's base"
        return None
