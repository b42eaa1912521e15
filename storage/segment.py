"""One log segment: ``<base offset, 20 digits>.log`` with its ``.index`` and ``.timeindex``.

The ``.log`` file is record batches back to back, byte for byte as they were appended.
Appends go to the end with one ``write`` (the file is opened ``O_APPEND``); reads use
``pread`` and never move a file position, so any number of threads may read while one
appends. The indexes are described in ``storage.index``.
"""

from __future__ import annotations

import errno
import os
import random
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from crc32c import crc32c

from storage.errors import CorruptRecordError, OffsetOverflowError
from storage.index import OffsetIndex, TimeIndex
from storage.partition_dir import PartitionDir, join_partition_dir
from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    BatchHeader,
    read_header,
)

__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "FileRegion",
    "LogSegment",
    "RecoveredSegment",
    "SegmentFile",
    "cleaned_paths",
    "random_segment_jitter",
    "segment_paths",
]

LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
DELETED_SUFFIX: Final = ".deleted"
CLEANED_SUFFIX: Final = ".cleaned"  # a compacted segment being written (storage.cleaner)
_RECOVERY_CHUNK: Final = 1 << 20
_INT32_MAX: Final = 2**31 - 1
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_FIELDS_AFTER_LENGTH: Final = 2


_LAST_MS: list[int] = [0]


def shared_ms(ms: int) -> int:
    """``ms``, as the previous call's int object when it was the same millisecond: a
    broker making 100,000 logs makes about ten a millisecond, and each log kept two times of
    its making (32 bytes each, 6.4 MB in all). Unlocked: a race only loses a sharing."""
    last = _LAST_MS[0]
    if last == ms:
        return last
    _LAST_MS[0] = ms
    return ms


def _draw_31_bits() -> int:
    return random.getrandbits(31)


def random_segment_jitter(
    segment_jitter_ms: int, segment_ms: int, draw: Callable[[], int] = _draw_31_bits
) -> int:
    """A new segment's roll jitter, as Kafka 2.8's LogConfig.randomSegmentJitter:
    ``abs(nextInt) % min(segment.jitter.ms, segment.ms)``. Bounded by ``segment.ms``, so a
    jitter over it (which both keys allow) cannot make every append roll; ``draw`` gives
    what Utils.abs(nextInt) gives, 0 to Int.MaxValue."""
    if segment_jitter_ms == 0:
        return 0
    return draw() % min(segment_jitter_ms, segment_ms)


def segment_paths(directory: Path | str, base_offset: int) -> tuple[str, str, str]:
    """The .log, .index and .timeindex paths of the segment at ``base_offset``."""
    stem = os.path.join(directory, f"{base_offset:020d}")
    return stem + LOG_SUFFIX, stem + INDEX_SUFFIX, stem + TIME_INDEX_SUFFIX


def cleaned_paths(directory: Path | str, base_offset: int) -> tuple[str, str, str]:
    """Where the cleaner writes a compacted segment's three files before the swap."""
    log_path, index_path, time_index_path = segment_paths(directory, base_offset)
    return log_path + CLEANED_SUFFIX, index_path + CLEANED_SUFFIX, time_index_path + CLEANED_SUFFIX


_OPENING = threading.Lock()  # a descriptor opened twice by racing readers would leak
_MATERIALIZING = threading.Lock()
_CREATE_EMPTY: Final = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


class SegmentFile:
    """A segment's open ``.log`` file. Its descriptor stays valid until ``close()``; a
    deleted segment is closed only after ``file.delete.delay.ms``, so a FileRegion handed
    out just before a deletion can still be read."""

    __slots__ = ("_closed", "_fd", "_path", "initial_size")

    def __init__(self, path: Path | str) -> None:
        self._path = os.fspath(path)  # a str: a Path costs ~1 KB, times 100,000 partitions
        # Opened on first use: a broker with 100,000 partitions, most of them idle, would
        # otherwise hold 100,000 open files (a common limit is 20,000).
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            self.initial_size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        self._fd = -1
        self._closed = False

    @property
    def fd(self) -> int:
        """The descriptor, opened now if need be; -1 once closed (so a use after close
        fails with EBADF, as it always did)."""
        fd = self._fd
        if fd >= 0 or self._closed:
            return fd
        with _OPENING:
            if self._fd < 0 and not self._closed:
                self._fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
            return self._fd

    @property
    def path(self) -> Path:
        return Path(self._path)

    def pread(self, length: int, position: int) -> bytes:
        """Up to ``length`` bytes at ``position`` (fewer only at the end of the file)."""
        data = os.pread(self.fd, length, position)
        if len(data) == length or not data:
            return data
        parts = [data]
        got = len(data)
        while got < length:
            more = os.pread(self.fd, length - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def peek(self, length: int, position: int) -> bytes:
        """Up to ``length`` bytes at ``position``, leaving the file closed if it was: a
        load checks each segment's last index entry, and an idle segment keeps no
        descriptor."""
        if self._fd >= 0:
            return self.pread(length, position)
        with _OPENING:  # not between a rename and its new path (see rename)
            fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return os.pread(fd, length, position)
        finally:
            os.close(fd)

    def stat(self) -> os.stat_result:
        """The file's status, without opening it if it is not open."""
        fd = self._fd
        if fd >= 0:
            return os.fstat(fd)
        with _OPENING:  # not between a rename and its new path (see rename)
            return os.stat(self._path)

    def rename(self, path: Path) -> None:
        """Rename the file, keeping it open. Under the lock its first open takes: a reader
        opening it meanwhile would find neither name, and an I/O error in a log takes its
        whole log directory offline (KIP-112)."""
        with _OPENING:
            os.rename(self._path, path)
            self._path = os.fspath(path)

    def close(self) -> None:
        with _OPENING:
            self._closed = True
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class FileRegion(NamedTuple):
    """Bytes ``[position, position + length)`` of a segment file: whole record batches.

    ``to_bytes()`` reads them (one pread); ``sendfile(socket_fd)`` copies them to a socket
    inside the kernel, without passing through Python. If the log is truncated after the
    read (a leader change), the region can come out shorter than ``length``.
    """

    file: SegmentFile
    position: int
    length: int

    def fileno(self) -> int:
        return self.file.fd

    def to_bytes(self) -> bytes:
        return self.file.pread(self.length, self.position)

    def sendfile(self, out_fd: int) -> int:
        """Send the region to ``out_fd`` (a blocking socket); returns the bytes sent."""
        sent = 0
        while sent < self.length:
            n = os.sendfile(out_fd, self.file.fd, self.position + sent, self.length - sent)
            if n == 0:
                break
            sent += n
        return sent


@dataclass(frozen=True, slots=True)
class RecoveredSegment:
    """What recovering a segment found."""

    valid_bytes: int
    truncated_bytes: int
    next_offset: int | None  # offset after the last valid batch; None if no batch
    epoch_starts: tuple[tuple[int, int], ...]  # (epoch, start offset) where epochs rose
    reason: str | None  # why the tail was cut, if it was


class LogSegment:
    """A segment's files and the little state kept about them in memory (sizes, the
    largest timestamp, the bytes since the last index entry)."""

    # A new segment opens its file and index objects on first use: a broker creating
    # 100,000 partitions, most of them idle, would hold ~800 bytes more for each.
    __slots__ = (
        "_closed",
        "_log",
        "_max_index_bytes",
        "_offset_index",
        "_parent",
        "_partition",
        "_rolling_timestamp",
        "_time_index",
        "_topic",
        "base_offset",
        "bytes_since_last_index_entry",
        "created_ms",
        "deleted",
        "index_interval_bytes",
        "indexes_missing",
        "max_timestamp",
        "offset_of_max_timestamp",
        "roll_jitter_ms",
        "size",
        "truncations",
    )

    def __init__(
        self,
        directory: Path | str | PartitionDir,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        roll_jitter_ms: int = 0,
        now_ms: int | None = None,
        empty: bool = False,
        indexes_found: tuple[bool, bool] | None = None,
    ) -> None:
        """Open the segment's files (``empty``: they were just created empty, and are
        opened on first use). ``indexes_found``: whether the .index and .timeindex files
        exist, if the caller listed the directory."""
        # The directory as its parts (storage/partition_dir.py): a segment of each of a
        # broker's 100,000s of logs would otherwise hold the path's string.
        where = PartitionDir.of(directory)
        self._parent, self._topic, self._partition = where
        self._max_index_bytes = max_index_bytes
        self._closed = False
        self._log: SegmentFile | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = shared_ms(int(time.time() * 1000) if now_ms is None else now_ms)
        self.bytes_since_last_index_entry = 0
        self._rolling_timestamp: int | None = None  # the first batch's maxTimestamp
        self.deleted = False
        self.size = 0
        #: truncations that cut this segment: a lock-free reader that finds its batches
        #: cut short (or rewritten) tells a truncation from damage by it (truncate_to)
        self.truncations = 0
        self.indexes_missing = False
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        if empty:
            return
        log_path, index_path, time_index_path = segment_paths(self.directory, base_offset)
        if indexes_found is None:
            index_found, time_index_found = (
                os.path.exists(index_path),
                os.path.exists(time_index_path),
            )
        else:
            index_found, time_index_found = indexes_found
        if not index_found and not time_index_found and os.stat(log_path).st_size == 0:
            # Never written (its index files are made on first use): as a new segment, its
            # files are opened then. Creating two files costs more than opening them, and
            # an idle broker restarts with 100,000s of these.
            return
        indexes_missing = not (index_found and time_index_found)
        self._open_files()
        self.size = self.log.initial_size
        #: a segment with data but no index files (Kafka rebuilds them)
        self.indexes_missing = indexes_missing and self.size > 0
        last_time = self.time_index.last_entry
        if last_time is not None:
            self.max_timestamp = last_time.timestamp
            self.offset_of_max_timestamp = last_time.offset

    def _open_files(self) -> SegmentFile:
        with _MATERIALIZING:  # readers may race to open them
            log = self._log
            if log is not None:
                return log
            log_path, index_path, time_index_path = segment_paths(self.directory, self.base_offset)
            log = SegmentFile(log_path)
            self._offset_index = OffsetIndex(index_path, self.base_offset, self._max_index_bytes)
            self._time_index = TimeIndex(time_index_path, self.base_offset, self._max_index_bytes)
            if self._closed:  # a use after close fails as it always did (EBADF)
                log.close()
                self._offset_index.close()
                self._time_index.close()
            self._log = log  # last: the others are set once this is
            return log

    @property
    def log(self) -> SegmentFile:
        log = self._log
        return log if log is not None else self._open_files()

    @property
    def offset_index(self) -> OffsetIndex:
        if self._log is None:
            self._open_files()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._log is None:
            self._open_files()
        assert self._time_index is not None
        return self._time_index

    @property
    def directory(self) -> str:
        """The directory holding the segment's files."""
        return join_partition_dir(self._parent, self._topic, self._partition)

    @classmethod
    def create(
        cls,
        directory: Path | str | PartitionDir,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        segment_jitter_ms: int = 0,
        segment_ms: int = 7 * 24 * 3600 * 1000,
        now_ms: int | None = None,
        new_directory: bool = False,
    ) -> LogSegment:
        """A new, empty segment (any leftover files at that base offset are emptied).

        ``new_directory``: the partition's directory was just made, so nothing is left
        over in it; only the ``.log`` file is made now, the index files on first use (a
        segment that is never written has none). File creation is a journaled metadata
        write: a broker creating 100,000 partitions makes 200,000 fewer files."""
        where = PartitionDir.of(directory)
        log_path, index_path, time_index_path = segment_paths(
            join_partition_dir(*where), base_offset
        )
        for path in (log_path,) if new_directory else (log_path, index_path, time_index_path):
            os.close(os.open(path, _CREATE_EMPTY, 0o644))
        jitter = random_segment_jitter(segment_jitter_ms, segment_ms)
        return cls(
            where,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_bytes=max_index_bytes,
            roll_jitter_ms=jitter,
            now_ms=now_ms,
            empty=True,
        )

    # --- properties -----------------------------------------------------------------

    @property
    def path(self) -> Path:
        log = self._log
        if log is not None:
            return log.path  # renamed .deleted, perhaps
        return Path(segment_paths(self.directory, self.base_offset)[0])

    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment, else the file's mtime (Kafka's rule for
        retention.ms)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(self.log.stat().st_mtime * 1000)

    def rolling_timestamp(self) -> int | None:
        """The first batch's maxTimestamp (segment.ms counts from it), if any."""
        if self._rolling_timestamp is None and self.size >= BATCH_HEADER_SIZE:
            self._rolling_timestamp = read_header(
                self.log.pread(BATCH_HEADER_SIZE, 0)
            ).max_timestamp
        return self._rolling_timestamp

    @property
    def never_written(self) -> bool:
        """Empty with no index files when opened, and not used since (its files are
        opened, and the indexes made, on first use): nothing in it to recover."""
        return self._log is None

    def index_problem(self) -> str | None:
        """Why this segment's indexes cannot be trusted, or None."""
        if self.never_written:
            return None  # no entries to doubt
        if self.indexes_missing:
            return f"{self.path.name}: index files missing"
        return (
            self.offset_index.sanity_problem(self.size)
            or self.time_index.sanity_problem()
            or self._indexed_batch_problem()
        )

    def _indexed_batch_problem(self) -> str | None:
        """What the batch at the offset index's last entry (at 0 if it has none) says
        against the indexes. One small read, and none for a segment with no offset index
        entry and a time index entry (a small segment, closed after its appends).

        The log end offset is read from the batches after the last entry, so an entry
        inside a batch (garbage in the index) would have garbage parsed as batch headers.
        And a time index is empty only beside batches without timestamps (an offset index
        entry, a roll and a close each write one for a timestamp): an empty one beside
        timestamps would have the segment's largest timestamp read as none (-1), and
        lookups by timestamp skip the segment."""
        index = self.offset_index
        time_index = self.time_index
        time_index_empty = time_index.entries == 0 and self.size > 0
        if not index.entries and not time_index_empty:
            return None
        entry = index.last_entry  # (base offset, 0) if it has none
        header = self._peek_header(entry.position)
        if index.entries:
            where = f"{index.path.name}: last entry ({entry.offset} at {entry.position})"
            if header is None:
                return f"{where} points to no batch"
            if header.position + header.size > self.size:
                return f"{where} points to a batch running past the log's end"
            # Entries are written with the last offset of the batch at their position.
            if header.last_offset != entry.offset:
                return f"{where} points to the batch ending at offset {header.last_offset}"
        if time_index_empty and header is not None and header.max_timestamp >= 0:
            return f"{time_index.path.name} is empty beside batches with timestamps"
        return None

    def _peek_header(self, position: int) -> BatchHeader | None:
        """The header of a batch (magic 2) at ``position``, or None (the file left closed).
        A negative position (index garbage) is none: its pread's EINVAL is no disk error."""
        if position < 0:
            return None
        data = self.log.peek(BATCH_HEADER_SIZE, position)
        if len(data) < BATCH_HEADER_SIZE:
            return None
        base, length, *rest = _HEADER.unpack(data)
        header = BatchHeader(position, length + LOG_OVERHEAD, base, *rest)
        return header if header.magic == 2 and length >= MIN_BATCH_LENGTH else None

    # --- append ---------------------------------------------------------------------

    def append(self, data: memoryview, headers: tuple[BatchHeader, ...]) -> None:
        """Write whole validated batches (``headers`` positions are relative to ``data``)
        and index them. On a failed write the file is cut back and OSError re-raised."""
        if headers and (
            headers[0].base_offset < self.base_offset
            or headers[-1].last_offset - self.base_offset > _INT32_MAX
        ):
            # Kafka's ensureOffsetInRange: refused before a byte is written (an index
            # entry could not hold the offset relative to the base).
            raise OffsetOverflowError(
                f"{self.path}: offsets {headers[0].base_offset} to {headers[-1].last_offset}"
                f" are not within 2**31 above the segment's base {self.base_offset}"
            )
        start = self.size
        if start == 0 and headers:
            self._rolling_timestamp = headers[0].max_timestamp
        try:
            written = os.write(self.log.fd, data)
            while written < len(data):
                written += os.write(self.log.fd, data[written:])
        except OSError:
            os.ftruncate(self.log.fd, start)
            raise
        self.size = start + len(data)
        interval = self.index_interval_bytes
        for header in headers:
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset + header.last_offset_delta
            if self.bytes_since_last_index_entry > interval:
                self.offset_index.append(
                    header.base_offset + header.last_offset_delta, start + header.position
                )
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += header.size

    def on_become_inactive(self) -> None:
        """At a roll: record the segment's largest timestamp in the time index."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )

    # --- reading --------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader:
        data = self.log.pread(BATCH_HEADER_SIZE, position)
        if len(data) < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"{self.path}: batch header cut short at the end of the file", position=position
            )
        base, length, *rest = _HEADER.unpack(data)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"{self.path}: batch length {length}", position=position, offset=base
            )
        return BatchHeader(position, length + LOG_OVERHEAD, base, *rest)

    def headers(self, start: int, end: int) -> Iterator[BatchHeader]:
        """The batch headers from ``start`` (a batch boundary) up to ``end`` (one too).
        A batch running past ``end`` is torn or garbage: CorruptRecordError."""
        pos = start
        while pos < end:
            header = self.header_at(pos)
            if pos + header.size > end:
                raise CorruptRecordError(
                    f"{self.path}: a batch of {header.size} bytes at {pos} runs past {end}",
                    position=pos,
                    offset=header.base_offset,
                )
            yield header
            pos += header.size

    def find_batch(self, offset: int, end: int) -> BatchHeader | None:
        """The first batch (below ``end`` bytes) whose last offset is >= ``offset``."""
        start = self.offset_index.lookup(offset).position
        for header in self.headers(start, end):
            if header.base_offset + header.last_offset_delta >= offset:
                return header
        return None

    def next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset if empty)."""
        if self.size == 0:
            return self.base_offset
        start = self.offset_index.lookup(self.offset_index.last_entry.offset).position
        last: BatchHeader | None = None
        for header in self.headers(start, self.size):
            last = header
        return self.base_offset if last is None else last.next_offset

    # --- truncation, recovery ---------------------------------------------------------

    def truncate_to(self, offset: int, now_ms: int | None = None) -> int:
        """Remove every batch holding offsets >= ``offset`` (a batch straddling it goes
        whole). Returns the bytes removed. A segment cut to nothing counts its segment.ms
        from ``now_ms`` (now if None), as a new one (Kafka 2.8's truncateTo resets
        ``created``)."""
        header = self.find_batch(offset, self.size)
        if header is None:
            return 0
        cut = header.position
        removed = self.size - cut
        # Before anything is cut, the size first: a lock-free reader takes the count,
        # then the size (Log.read), so one that sees this count reads no further than
        # the cut, and one that does not sees it changed once it finds the file cut.
        self.size = cut
        self.truncations += 1
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        os.ftruncate(self.log.fd, cut)
        self.bytes_since_last_index_entry = 0
        if cut == 0:
            self._rolling_timestamp = None
            self.created_ms = shared_ms(int(time.time() * 1000) if now_ms is None else now_ms)
        self._recompute_max_timestamp()
        return removed

    def _recompute_max_timestamp(self) -> None:
        last = self.time_index.last_entry
        self.max_timestamp = NO_TIMESTAMP if last is None else last.timestamp
        self.offset_of_max_timestamp = -1 if last is None else last.offset
        start = 0 if last is None else self.offset_index.lookup(last.offset).position
        for header in self.headers(start, self.size):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset + header.last_offset_delta

    def recover(self, latest_epoch: int | None) -> RecoveredSegment:
        """Validate every batch from the start, rebuild both indexes, and cut the file at
        the first batch that is torn, corrupt or out of order. ``latest_epoch`` is the
        leader epoch cache's latest, for the epoch starts found (KIP-101)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        file_size = os.fstat(self.log.fd).st_size
        interval = self.index_interval_bytes
        valid = 0
        last_index_at = 0
        expected: int | None = None
        reason: str | None = None
        epochs: list[tuple[int, int]] = []
        epoch = latest_epoch
        buf = b""
        buf_start = 0
        while valid < file_size:
            rel = valid - buf_start
            if len(buf) - rel < BATCH_HEADER_SIZE:
                buf, buf_start, rel = self.log.pread(_RECOVERY_CHUNK, valid), valid, 0
            if len(buf) - rel < BATCH_HEADER_SIZE:
                reason = f"a torn batch header ({file_size - valid} bytes at the end)"
                break
            base, length = struct.unpack_from(">qi", buf, rel)
            if length < MIN_BATCH_LENGTH:
                reason = f"batch length {length} at position {valid}"
                break
            size = length + LOG_OVERHEAD
            if valid + size > file_size:
                reason = f"a torn batch: {size} bytes with {file_size - valid} left"
                break
            if len(buf) - rel < size:
                buf, buf_start, rel = self.log.pread(max(size, _RECOVERY_CHUNK), valid), valid, 0
            fields = _HEADER.unpack_from(buf, rel)
            header = BatchHeader(valid, size, base, *fields[_FIELDS_AFTER_LENGTH:])
            problem = _batch_problem(header, buf, rel, self.base_offset, expected)
            if problem is not None:
                reason = problem
                break
            last_offset = base + header.last_offset_delta
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = last_offset
            if valid - last_index_at > interval:
                self.offset_index.append(last_offset, valid)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                last_index_at = valid
            leader_epoch = header.partition_leader_epoch
            if leader_epoch >= 0 and (epoch is None or leader_epoch > epoch):
                epochs.append((leader_epoch, base))
                epoch = leader_epoch
            expected = last_offset + 1
            valid += size
        truncated = file_size - valid
        if truncated:
            os.ftruncate(self.log.fd, valid)
        self.size = valid
        self.bytes_since_last_index_entry = valid - last_index_at if valid else 0
        self._rolling_timestamp = None
        self.indexes_missing = False
        self.on_become_inactive()
        return RecoveredSegment(valid, truncated, expected, tuple(epochs), reason)

    # --- durability, lifecycle --------------------------------------------------------

    def flush(self) -> None:
        """fsync the log file and both indexes."""
        if self._log is None:  # never opened: nothing written here to sync
            if self._closed:
                raise OSError(errno.EBADF, f"{self.path} is closed")
            return
        os.fsync(self.log.fd)
        self.offset_index.flush()
        self.time_index.flush()

    def rename_to_deleted(self) -> None:
        """Mark the files for deletion (``<name>.deleted``), keeping them open."""
        log = self.log
        log.rename(log.path.with_name(log.path.name + DELETED_SUFFIX))
        for index in (self.offset_index, self.time_index):
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))
        self.deleted = True

    def close(self) -> None:
        with _MATERIALIZING:
            self._closed = True
            log, offset_index, time_index = self._log, self._offset_index, self._time_index
        if log is not None and offset_index is not None and time_index is not None:
            log.close()
            offset_index.close()
            time_index.close()

    def close_and_remove(self) -> None:
        paths = (self.log.path, self.offset_index.path, self.time_index.path)
        self.close()
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _batch_problem(
    header: BatchHeader, buf: bytes, rel: int, segment_base: int, expected: int | None
) -> str | None:
    if header.magic != 2:
        return f"magic {header.magic} at offset {header.base_offset}"
    if crc32c(memoryview(buf)[rel + ATTRIBUTES_OFFSET : rel + header.size]) != header.crc:
        return f"CRC-32C mismatch in the batch at offset {header.base_offset}"
    if header.last_offset_delta < 0 or header.record_count < 0:
        return f"negative lastOffsetDelta or count at offset {header.base_offset}"
    # Offsets only grow; gaps are a compacted log's dropped batches.
    want = segment_base if expected is None else expected
    if header.base_offset < want:
        return f"batch offset {header.base_offset} where at least {want} should follow"
    if header.base_offset + header.last_offset_delta - segment_base > _INT32_MAX:
        return f"offset {header.base_offset} too far from the segment's base {segment_base}"
    return None
