"""The log cleaner: compaction of the logs whose topics have ``cleanup.policy=compact``.

Kafka's LogCleaner, with its decisions in ``storage.compaction`` (pure) and the I/O here.
``log.cleaner.threads`` threads go over the compacted logs, each cleaning those that are
due (no two the same log at once), and wait ``log.cleaner.backoff.ms`` after a pass that
found none due. Each takes the filthiest log first (the highest dirty ratio), as Kafka's.
One cleaning of a log:

1. Its cleanable part: the segments below the first uncleanable offset (the active
   segment, the high watermark, ``min.compaction.lag.ms``), split at the first dirty
   offset, where the last cleaning ended (``cleaner-offset-checkpoint`` in each log
   directory, as Kafka's; a log it does not name is dirty from its start).
2. The offset map: every key's latest offset in the dirty part, read segment by segment
   until the map's budget (``log.cleaner.dedupe.buffer.size`` shared by the threads) is
   spent. The cleaning ends after the last offset the map holds: at the next segment's
   base after a segment mapped whole, else inside the segment where the map filled
   (Kafka's offsetMap.latestOffset + 1), whose records past it are kept as they are.
3. Every segment below that end, clean and dirty, in runs of at most ``segment.bytes``:
   each run is read batch by batch and written, with only the records that stay, to one
   new segment (``<base>.log.cleaned`` with both indexes, fsynced, its modification time
   the run's latest), which ``PartitionLog.replace_segments`` swaps in crash-safely.
   A batch it cannot read is kept whole, and so is every tombstone above it
   (``storage.compaction``); the first such batch is in the result (``kept_unread``),
   and ``LogCleaner`` logs it once as a warning.
   The run's old files are read through their own descriptors: an append, a fetch or a
   retention goes on beside it. A truncation of the log since the survey (its
   truncation count moved: the offset map may name later records the truncation
   removed, and dropping what they replaced would lose a key's only record; Kafka
   aborts a cleaning before it truncates), or a retention that took any of the run's
   segments, makes the swap refuse (the cleaning stops there; the next one starts again).
4. The checkpoint moves to the end, unless the log was truncated, deleted or set aside
   meanwhile; the write keeps the entry of every partition with a log in the directory,
   whatever its policy (Kafka's updateCheckpoints: a log that left compact may come
   back, dirty from where it was). A log deleted or set aside loses its entry before its
   directory is renamed (``forget``, which first aborts a cleaning of it under way and
   waits for it to stop, as Kafka's abortCleaning: it stops before the next batch it
   would read, for the offset map or the copy; ``abort_cleaning`` does the same, keeping
   the entry, for a log whose ``cleanup.policy`` leaves compact), and a truncation
   lowers it to the log's active segment's base offset (``maybe_truncate_checkpoint``;
   ``LogManager`` calls these, as Kafka's does): what is written again at truncated
   offsets, or by another log of the partition, was never cleaned. At start-up
   (``reconcile``) the entries naming no log of their directory go, and those past their
   log's end are lowered.

Offsets are never changed, so replicas clean on their own (as in Kafka) and agree on
every offset they both hold; a follower fetching a cleaned range gets its gaps.

An I/O error fails the log's directory (Kafka's LogDirFailureChannel); a log closed or
deleted meanwhile is left alone. Any other error (a damaged batch in a closed segment,
say) marks the log uncleanable, as Kafka's (KIP-346): it is logged, the log is skipped
until it is loaded again (a new log object: a restart, or the partition deleted and
made again), and the other logs go on being cleaned.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from storage.checkpoints import read_offset_checkpoint, write_atomically
from storage.compaction import (
    KeyedRecord,
    OffsetMap,
    SegmentStat,
    batch_keys,
    cleanable_range,
    delete_horizon_ms,
    dirty_ratio,
    filter_batch,
    group_segments,
    read_headers,
    retain,
    should_clean,
)
from storage.errors import CheckpointError, CorruptRecordError, KafkaStorageError
from storage.index import OffsetIndex, TimeIndex
from storage.log import PartitionLog
from storage.records import NO_TIMESTAMP, BatchHeader, read_header
from storage.segment import LogSegment, cleaned_paths

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CleaningResult",
    "LogCleaner",
    "LogToClean",
    "clean",
    "clean_log",
    "survey",
]

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
_READ_CHUNK: Final = 1 << 20
_WRITE_CHUNK: Final = 1 << 20
#: which records of a batch a cleaning keeps (``filter_batch``'s ``keep``)
Keep = Callable[[KeyedRecord], bool]


@dataclass(frozen=True, slots=True)
class CleaningResult:
    """What one cleaning of one log did."""

    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int  # the next cleaning's first dirty offset
    keys_mapped: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_dropped: int
    segments_before: int
    segments_after: int
    seconds: float
    complete: bool  # False: a swap was refused (the log moved); the checkpoint stays
    #: the first batch kept unread (its base offset, why), whose records stay as they are
    #: and past which no tombstone goes (``storage.compaction.retain``); None if none
    kept_unread: tuple[int, str] | None = None


def _stat(segment: LogSegment) -> SegmentStat:
    mtime = int(segment.log.stat().st_mtime * 1000)
    first = segment.rolling_timestamp()
    largest = segment.max_timestamp if segment.max_timestamp >= 0 else mtime
    return SegmentStat(
        segment.base_offset, segment.size, -1 if first is None else first, largest, mtime
    )


def _batches(segment: LogSegment, *, start: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every whole batch of a (non-active) segment from the batch at ``start`` (a batch
    boundary), read a chunk at a time. CorruptRecordError for a damaged batch header
    or a batch running past the end."""
    size = segment.size
    position = start
    while position < size:
        chunk = segment.log.pread(min(_READ_CHUNK, size - position), position)
        headers = read_headers(chunk)
        if not headers:  # a batch larger than the chunk
            header = read_header(chunk)
            if header.size > size - position:
                raise CorruptRecordError(
                    f"{segment.path}: a batch of {header.size} bytes at {position} runs"
                    f" past the segment's end ({size})",
                    position=position,
                    offset=header.base_offset,
                )
            chunk = segment.log.pread(header.size, position)
            headers = [header]
        view = memoryview(chunk)
        for header in headers:
            yield header, bytes(view[header.position : header.position + header.size])
        position += headers[-1].position + headers[-1].size


class _CleanedSegment:
    """The cleaned segment being written at ``cleaned_paths``: its batches and both
    indexes, as LogSegment.append writes them."""

    def __init__(self, log_: PartitionLog, base_offset: int) -> None:
        self.base_offset = base_offset
        directory = log_.directory
        self.paths = cleaned_paths(directory, base_offset)
        for path in self.paths:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
        self._fd = os.open(self.paths[0], os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        max_index = log_.config.segment_index_bytes
        self._offset_index = OffsetIndex(self.paths[1], base_offset, max_index)
        self._time_index = TimeIndex(self.paths[2], base_offset, max_index)
        self._interval = log_.config.index_interval_bytes
        self._pending = bytearray()
        self.size = 0  # bytes written or pending
        self._since_index = 0
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = -1

    def append(self, batch: bytes) -> None:
        header = read_header(batch)
        last_offset = header.base_offset + header.last_offset_delta
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = last_offset
        if self._since_index > self._interval:
            self._offset_index.append(last_offset, self.size)
            self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._since_index = 0
        self._since_index += len(batch)
        self._pending += batch
        self.size += len(batch)
        if len(self._pending) >= _WRITE_CHUNK:
            self._write_pending()

    def _write_pending(self) -> None:
        view = memoryview(self._pending)
        written = 0
        while written < len(view):
            written += os.write(self._fd, view[written:])
        self._pending = bytearray()

    def finish(self, last_modified_ms: int) -> None:
        """Write what is pending, the time index's last entry, fsync all three files and
        give the log file the run's latest modification time (the delete horizon of the
        next cleaning reads it, as Kafka's)."""
        self._write_pending()
        if self._max_timestamp >= 0:
            self._time_index.maybe_append(
                self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
            )
        os.fsync(self._fd)
        self._offset_index.flush()
        self._time_index.flush()
        self.close()
        seconds = last_modified_ms / 1000
        os.utime(self.paths[0], (seconds, seconds))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._offset_index.close()
        self._time_index.close()

    def remove(self) -> None:
        self.close()
        for path in self.paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A log that is due, as surveyed: its segments then, their stats (the active one's
    times unread), its cleanable range (Kafka's LogToClean) and its truncation count
    before those were read (a swap is refused once it moved)."""

    log: PartitionLog
    truncations: int
    segments: tuple[LogSegment, ...]
    stats: tuple[SegmentStat, ...]
    first_dirty: int
    first_uncleanable: int
    ratio: float  # the dirty part's share of the cleanable bytes
    started: float  # perf_counter() when surveyed

    @property
    def key(self) -> tuple[str, int]:
        return (self.log.topic, self.log.partition)


def survey(
    partition_log: PartitionLog,
    *,
    checkpoint: int | None,
    now_ms: int | None = None,
    force: bool = False,
) -> LogToClean | None:
    """The log's cleanable part if it is due (``force``: if it has anything dirty at
    all); None if it is not. ``checkpoint`` is its first dirty offset on record."""
    started = time.perf_counter()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    config = partition_log.config
    # First: a truncation after this (while the segments are read, say) refuses the swaps.
    truncations = partition_log.truncations
    segments = partition_log.segments_snapshot()
    # The active segment's times are never read (it is never cleaned): not opened here.
    active = segments[-1]
    stats = [_stat(s) for s in segments[:-1]]
    stats.append(SegmentStat(active.base_offset, active.size, -1, -1, -1))
    first_dirty, first_uncleanable = cleanable_range(
        stats,
        log_start_offset=partition_log.log_start_offset,
        checkpoint=checkpoint,
        high_watermark=partition_log.high_watermark,
        now_ms=now,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
    )
    if not should_clean(
        stats,
        first_dirty,
        first_uncleanable,
        min_cleanable_ratio=0.0 if force else config.min_cleanable_dirty_ratio,
        now_ms=now,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
    ):
        return None
    return LogToClean(
        partition_log,
        truncations,
        tuple(segments),
        tuple(stats),
        first_dirty,
        first_uncleanable,
        dirty_ratio(stats, first_dirty, first_uncleanable),
        started,
    )


def clean_log(
    partition_log: PartitionLog,
    *,
    checkpoint: int | None,
    map_bytes: int,
    now_ms: int | None = None,
    force: bool = False,
    stopping: Callable[[], bool] | None = None,
) -> CleaningResult | None:
    """Clean ``partition_log`` once if it is due (``force``: if it has anything dirty at
    all); None if it was not. ``checkpoint`` is its first dirty offset on record;
    ``stopping()`` true ends the cleaning after the run under way (incomplete).
    OSError and KafkaStorageError propagate (the caller reports them)."""
    to_clean = survey(partition_log, checkpoint=checkpoint, now_ms=now_ms, force=force)
    if to_clean is None:
        return None
    return clean(to_clean, map_bytes=map_bytes, stopping=stopping)


def clean(
    to_clean: LogToClean,
    *,
    map_bytes: int,
    stopping: Callable[[], bool] | None = None,
    aborted: Callable[[], bool] | None = None,
) -> CleaningResult:
    """Clean a surveyed log (see clean_log). A truncation of the log since the survey,
    or a segment it dropped, makes the next run's swap refuse: the cleaning ends there,
    incomplete. ``aborted()`` true (the log is being deleted, or its
    policy left compact) ends it at once, before
    the next segment or batch is read, in the offset map's build or the copy, its run's
    cleaned files removed (Kafka's checkDone, for each segment and read buffer): the
    deletion waits for one batch, not for the whole map build."""
    partition_log = to_clean.log
    config = partition_log.config
    segments, stats = to_clean.segments, to_clean.stats
    first_dirty, first_uncleanable = to_clean.first_dirty, to_clean.first_uncleanable
    offset_map = OffsetMap(map_bytes)
    max_size = config.max_decompressed_bytes
    mapped_to = _build_offset_map(
        segments, first_dirty, first_uncleanable, offset_map, max_size=max_size, aborted=aborted
    )
    if mapped_to is None:  # aborted: nothing copied, nothing to record
        return _result(to_clean, first_dirty, offset_map, 0, 0, 0, 0, complete=False)
    end_offset = mapped_to
    horizon = delete_horizon_ms(stats, first_dirty, config.delete_retention_ms)
    runs = group_segments(stats, end_offset, max_bytes=config.segment_bytes)
    read = written = records_read = dropped = 0
    complete = True
    # The first batch this cleaning keeps unread: the records it holds stay, so the
    # tombstones above it stay too (a record one deleted may be in it). Batches are
    # copied in offset order, so it is known before any tombstone above it is looked at.
    kept_unread: tuple[int, str] | None = None
    first_unread = [-1]  # its base offset, read by ``keep`` as the copy goes on
    for start, end in runs:
        if (
            (stopping is not None and stopping())
            or (aborted is not None and aborted())
            or partition_log.truncations != to_clean.truncations
        ):
            complete = False
            break
        old = segments[start:end]
        cleaned = _CleanedSegment(partition_log, old[0].base_offset)
        swapped = stop = False
        try:
            for segment, stat, following in zip(
                old, stats[start:end], stats[start + 1 : end + 1], strict=True
            ):
                if stop or (aborted is not None and aborted()):
                    stop = True  # not swapped: the run's files go, the cleaning ends
                    break
                keep_tombstones = stat.last_modified_ms > horizon

                def keep_mapped(
                    record: KeyedRecord,
                    keep_tombstones: bool = keep_tombstones,
                    first_unread: list[int] = first_unread,
                ) -> bool:
                    latest = -1 if record.key is None else offset_map.get(record.key)
                    return retain(record, latest, keep_tombstones, first_unread[0])

                def keep_to_end(record: KeyedRecord, keep_mapped: Keep = keep_mapped) -> bool:
                    # Past the map's end (inside this segment): kept as it is, as Kafka's.
                    return record.offset >= end_offset or keep_mapped(record)

                keep = keep_to_end if following.base_offset > end_offset else keep_mapped
                for header, batch in _batches(segment):
                    if aborted is not None and aborted():
                        stop = True
                        break
                    read += header.size
                    records_read += header.record_count
                    kept, unread = filter_batch(batch, header, keep, max_size=max_size)
                    if unread is not None and kept_unread is None:
                        kept_unread = (header.base_offset, unread)
                        first_unread[0] = header.base_offset
                    if kept is None:
                        dropped += header.record_count
                        continue
                    if kept is not batch:
                        dropped += header.record_count - read_header(kept).record_count
                    cleaned.append(kept)
            if not stop:
                cleaned.finish(max(s.last_modified_ms for s in stats[start:end]))
                written += cleaned.size
                swapped = partition_log.replace_segments(
                    old, segments[end], truncations=to_clean.truncations
                )
        except BaseException:
            cleaned.remove()
            raise
        if not swapped:
            cleaned.remove()
            complete = False
            break
    return _result(
        to_clean,
        end_offset,
        offset_map,
        read,
        written,
        records_read,
        dropped,
        complete=complete,
        kept_unread=kept_unread,
    )


def _result(
    to_clean: LogToClean,
    end_offset: int,
    offset_map: OffsetMap,
    read: int,
    written: int,
    records_read: int,
    dropped: int,
    *,
    complete: bool,
    kept_unread: tuple[int, str] | None = None,
) -> CleaningResult:
    partition_log = to_clean.log
    return CleaningResult(
        partition_log.topic,
        partition_log.partition,
        to_clean.first_dirty,
        end_offset,
        len(offset_map),
        read,
        written,
        records_read,
        dropped,
        len(to_clean.segments),
        len(partition_log.segments_snapshot()),
        time.perf_counter() - to_clean.started,
        complete,
        kept_unread,
    )


def _build_offset_map(
    segments: Sequence[LogSegment],
    first_dirty: int,
    first_uncleanable: int,
    offset_map: OffsetMap,
    *,
    max_size: int,
    aborted: Callable[[], bool] | None = None,
) -> int | None:
    """Map the dirty segments' keys until the map's budget is spent (Kafka's
    buildOffsetMap); returns the offset the cleaning ends at: the next segment's base
    after a segment mapped whole, else the offset after the last one mapped (inside a
    segment), so that no record below it is missing from the map. The first key is
    mapped whatever the budget: a cleaning always moves on. None once ``aborted()`` is
    true, looked at before each segment and each batch (Kafka's checkDone)."""
    end = first_dirty
    put = offset_map.put
    for i, segment in enumerate(segments[:-1]):
        following = segments[i + 1].base_offset
        if following <= first_dirty:
            continue
        if segment.base_offset >= first_uncleanable:
            break
        if aborted is not None and aborted():
            return None
        start = 0
        if first_dirty > segment.base_offset:  # where the last cleaning ended, inside it
            start = segment.offset_index.lookup(first_dirty).position
        whole: BatchHeader | None = None  # the last batch mapped whole
        for header, batch in _batches(segment, start=start):
            if header.last_offset < first_dirty:
                continue
            if aborted is not None and aborted():
                return None
            keys = batch_keys(batch, header, max_size=max_size)
            if header.base_offset < first_dirty:  # the last cleaning ended inside it
                keys = [(key, offset) for key, offset in keys if offset >= first_dirty]
            for key, offset in keys:
                if not put(key, offset):
                    if offset_map:  # full: the rest waits for the next cleaning
                        mapped = [o for _key, o in keys if o < offset]
                        if mapped:
                            return mapped[-1] + 1
                        return end if whole is None else whole.last_offset + 1
                    put(key, offset, force=True)
            whole = header
        end = following
    return end


def reconciled(
    entries: dict[tuple[str, int], int], logs: dict[tuple[str, int], tuple[int, int]]
) -> dict[tuple[str, int], int]:
    """A log directory's checkpoint ``entries`` once its ``logs`` are loaded (each
    partition's log end offset and active segment's base offset), at start-up:

    * an entry naming no log of the directory goes, as ``forget`` would have removed it:
      a broker killed inside a deletion (before Kafka's order was kept, or an entry
      written by an older version) must not have the partition's log made again there
      taken for cleaned up to it (an entry belongs to the directory whose file holds it);
    * an entry past its log's end is lowered to the active segment's base, as a
      truncation lowers it: a broker stopped between a truncation below the checkpoint
      and the lowered checkpoint's write finds it so, which could no longer be told once
      appends carried the log past it again (Kafka resets such a checkpoint to the log
      start when it cleans).
    """
    kept = {}
    for key, offset in entries.items():
        if key not in logs:
            continue
        log_end, active_base = logs[key]
        kept[key] = active_base if offset > log_end else offset
    return kept


class LogCleaner:
    """Threads that keep the compacted logs clean (see the module's docstring).

    ``logs()`` gives the logs to clean now (the log manager's compacted logs);
    ``log_of(topic, partition)`` the partition's current log whatever its policy (the
    log manager's; without it, those ``logs()`` gives): the checkpoint keeps the entries
    of the partitions it names. ``clean_once()`` runs one pass in the caller's thread
    (tests, and a shutdown that wants it)."""

    def __init__(
        self,
        logs: Callable[[], Iterable[PartitionLog]],
        *,
        log_of: Callable[[str, int], PartitionLog | None] | None = None,
        threads: int = 1,
        backoff_ms: int = 15_000,
        dedupe_buffer_size: int = 128 * 1024 * 1024,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        self._logs = logs
        self._log_of = log_of
        self._threads_wanted = threads
        self._backoff_s = backoff_ms / 1000
        self._map_bytes = max(dedupe_buffer_size // max(threads, 1), 1)
        self._time_ms = time_ms if time_ms is not None else (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()
        # The logs being cleaned, each with its cleaning's thread; notified when one ends.
        self._in_progress: dict[tuple[str, int], int] = {}
        self._cleaning_ended = threading.Condition(self._lock)
        # The logs whose cleaning under way is to stop (being deleted or set aside, or
        # their cleanup.policy no longer compact): one entry for each caller waiting for
        # it. Tuples, replaced whole: the cleaning reads them without the lock.
        self._aborting: dict[tuple[str, int], tuple[PartitionLog, ...]] = {}
        self._checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        # The logs whose cleaning failed other than by an I/O error (Kafka's
        # uncleanablePartitions): skipped while that very log object is the partition's.
        self._uncleanable: dict[tuple[str, int], PartitionLog] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: the last cleaning of each log there is (forget drops a deleted log's)
        self.last_results: dict[tuple[str, int], CleaningResult] = {}

    # --- checkpoints ------------------------------------------------------------------

    def _entries_locked(self, log_dir: str) -> dict[tuple[str, int], int]:
        """The checkpoint entries of ``log_dir``, read from its file the first time."""
        entries = self._checkpoints.get(log_dir)
        if entries is None:
            path = Path(log_dir) / CLEANER_OFFSET_CHECKPOINT
            try:
                entries = read_offset_checkpoint(path)
            except (CheckpointError, OSError) as exc:
                log.warning("%s unreadable, every log there is dirty: %s", path, exc)
                entries = {}
            self._checkpoints[log_dir] = entries
        return entries

    @staticmethod
    def _write_locked(log_dir: str, entries: dict[tuple[str, int], int]) -> None:
        lines = [f"0\n{len(entries)}\n"]
        lines += [f"{topic} {partition} {off}\n" for (topic, partition), off in entries.items()]
        write_atomically(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT, lines)

    def _checkpoint_of(self, partition_log: PartitionLog) -> int | None:
        with self._lock:
            entries = self._entries_locked(partition_log.log_dir)
            return entries.get((partition_log.topic, partition_log.partition))

    def _record(self, partition_log: PartitionLog, offset: int, truncations: int) -> bool:
        """Write the log directory's checkpoint with ``offset`` for this log, keeping the
        entries of the partitions that still have a log there, whatever its policy (Kafka's
        updateCheckpoints keeps an entry while its partition has a log: one whose
        ``cleanup.policy`` left compact keeps where its last cleaning ended, for when it
        compacts again); whether it was written. Not if the log is no longer its
        partition's (deleted or set aside meanwhile: its entry went, and another log of
        the partition must not take it) or was truncated since the cleaning's survey
        (``truncations``: its entry was lowered), as Kafka's doneCleaning records nothing
        for an aborted cleaning."""
        key = (partition_log.topic, partition_log.partition)
        log_dir = partition_log.log_dir
        with self._lock:
            log_of = self._log_of
            if log_of is None:
                present = {(each.topic, each.partition): each for each in self._logs()}

                def log_of(topic: str, partition: int) -> PartitionLog | None:
                    return present.get((topic, partition))

            def here(topic: str, partition: int) -> PartitionLog | None:
                other = log_of(topic, partition)
                if other is None or other.log_dir != log_dir or other.closed:
                    return None
                return other

            if here(*key) is not partition_log or partition_log.truncations != truncations:
                return False
            entries = self._entries_locked(log_dir)
            entries[key] = offset
            # One look-up per entry, whatever the number of logs.
            for gone in [k for k in entries if here(*k) is None]:
                del entries[gone]
            self._write_locked(log_dir, entries)
            return True

    def forget(self, partition_log: PartitionLog) -> None:
        """``partition_log`` is being deleted or set aside (no longer its partition's
        log, not yet renamed): a cleaning of it under way is aborted and waited for
        (Kafka's abortCleaning), then its entry leaves its directory's checkpoint, written
        durably (Kafka's updateCheckpoints with partitionToRemove), so that a log made
        again for the partition (its topic deleted and created again) is not taken for
        cleaned up to there, even after a crash in the deletion. Its last result and
        uncleanable mark go too. OSError if the file cannot be written."""
        for error in self.forget_many([partition_log]).values():
            raise error

    def forget_many(self, partition_logs: Sequence[PartitionLog]) -> dict[str, OSError]:
        """``forget`` of each of ``partition_logs``: their cleanings aborted and waited
        for together, each directory's checkpoint written once for all of its logs
        (Kafka's asyncDelete of many logs updates each directory's checkpoint once).
        Returns the error of each log directory whose checkpoint could not be written."""
        errors: dict[str, OSError] = {}
        with self._lock:
            # Not a cleaning in this very thread (a deletion from inside it): that one
            # records nothing either, its log being no longer the partition's.
            self._abort_locked(partition_logs)
            changed: dict[str, dict[tuple[str, int], int]] = {}
            for partition_log in partition_logs:
                key = (partition_log.topic, partition_log.partition)
                if self._uncleanable.get(key) is partition_log:
                    del self._uncleanable[key]
                self.last_results.pop(key, None)
                entries = self._entries_locked(partition_log.log_dir)
                if entries.pop(key, None) is not None:
                    changed[partition_log.log_dir] = entries
            for log_dir, entries in changed.items():
                try:
                    self._write_locked(log_dir, entries)
                except OSError as exc:
                    errors[log_dir] = exc
        return errors

    def abort_cleaning(self, partition_logs: Iterable[PartitionLog]) -> None:
        """These logs' ``cleanup.policy`` no longer holds compact: a cleaning of any of them
        under way is stopped and waited for, as ``forget``'s (its ``.cleaned`` files
        removed; nothing it cleaned is swapped in once this returns), and their checkpoint
        entries stay where the last complete cleaning put them (Kafka 3.1's
        updateTopicConfig calling abortCleaning, KAFKA-12840: abortAndPauseCleaning, then
        resumeCleaning; doneCleaning records nothing for an aborted cleaning). Not a
        cleaning in this very thread, which stops by itself (``_clean``'s ``aborted``).
        The caller must hold no lock a cleaning takes (``_record`` calls ``log_of``, or
        ``logs()`` without it, under this cleaner's lock)."""
        partition_logs = list(partition_logs)
        if partition_logs:
            with self._lock:
                self._abort_locked(partition_logs)

    def _abort_locked(self, partition_logs: Sequence[PartitionLog]) -> None:
        """Under ``_lock``: mark these logs' cleanings to stop, wait until none of their
        partitions is being cleaned by another thread, then take the marks back."""
        me = threading.get_ident()
        keys = [(each.topic, each.partition) for each in partition_logs]
        in_progress = self._in_progress
        if all(in_progress.get(key, me) == me for key in keys):
            # Nothing to wait for: the marks would be taken back before the lock is let
            # go, unseen (most of what forget_many took of a 100,000-log deletion, profiled).
            return
        for key, partition_log in zip(keys, partition_logs, strict=True):
            self._aborting[key] = (*self._aborting.get(key, ()), partition_log)
        try:
            while any(self._in_progress.get(key, me) != me for key in keys):
                self._cleaning_ended.wait()
        finally:
            for key, partition_log in zip(keys, partition_logs, strict=True):
                marks = list(self._aborting[key])
                del marks[next(i for i, each in enumerate(marks) if each is partition_log)]
                if marks:
                    self._aborting[key] = tuple(marks)
                else:
                    del self._aborting[key]

    def maybe_truncate_checkpoint(self, partition_log: PartitionLog) -> None:
        """After a truncation of ``partition_log``: its checkpoint is lowered to its active
        segment's base offset if above it (Kafka's maybeTruncateCheckpoint, as
        LogManager.truncateTo calls it), since the offsets the truncation removed are
        written again, never cleaned. OSError if the file cannot be written."""
        key = (partition_log.topic, partition_log.partition)
        offset = partition_log.segments_snapshot()[-1].base_offset
        with self._lock:
            entries = self._entries_locked(partition_log.log_dir)
            if entries.get(key, -1) > offset:
                entries[key] = offset
                self._write_locked(partition_log.log_dir, entries)

    def reconcile(self, log_dir: str, logs: Iterable[PartitionLog]) -> None:
        """Once the logs of ``log_dir`` are loaded (at start-up): an entry naming no log
        loaded from ``log_dir`` is dropped, and one past its log's end offset is lowered
        as a truncation lowers it (``reconciled``). OSError if the file cannot be
        written."""
        with self._lock:
            entries = self._entries_locked(log_dir)
            if not entries:
                return
            ends = {
                (each.topic, each.partition): (
                    each.log_end_offset,
                    each.segments_snapshot()[-1].base_offset,
                )
                for each in logs
            }
            kept = reconciled(entries, ends)
            if kept != entries:
                self._checkpoints[log_dir] = kept
                self._write_locked(log_dir, kept)

    # --- cleaning ---------------------------------------------------------------------

    def _candidates(self) -> list[PartitionLog]:
        """The compacted logs open now, but those marked uncleanable; the marks of logs
        no longer there are dropped (Kafka's maintainUncleanablePartitions)."""
        logs = [each for each in self._logs() if each.config.compact and not each.closed]
        with self._lock:
            uncleanable = self._uncleanable
            if not uncleanable:
                return logs
            present = {(each.topic, each.partition): each for each in logs}
            for key in [k for k, marked in uncleanable.items() if present.get(k) is not marked]:
                del uncleanable[key]
            return [each for each in logs if (each.topic, each.partition) not in uncleanable]

    @property
    def uncleanable_partitions(self) -> list[tuple[str, int]]:
        """The partitions whose cleaning failed other than by an I/O error and which are
        skipped until their log is loaded again (Kafka's uncleanable-partitions-count)."""
        with self._lock:
            return sorted(self._uncleanable)

    def _uncleanable_now(
        self, partition_log: PartitionLog, what: str, exc: Exception, truncations: int
    ) -> None:
        """``partition_log``'s cleaning failed by ``exc``, which is no I/O error: mark it
        uncleanable, as Kafka's cleaner thread does (KIP-346), so that one damaged log
        does not stop the cleaning of the others. Not if the log was closed, or truncated
        since its count was ``truncations`` (a segment cut while it was read: the log
        moved, as when a swap is refused, and it is cleaned again later)."""
        if partition_log.closed:
            log.info("%s %s stopped: the log went away (%r)", what, partition_log, exc)
            return
        if partition_log.truncations != truncations:
            log.info("%s %s stopped: the log was truncated (%r)", what, partition_log, exc)
            return
        log.error(
            "%s %s-%d failed, its partition is marked uncleanable (skipped until its log is"
            " loaded again): %r",
            what,
            partition_log.topic,
            partition_log.partition,
            exc,
            exc_info=exc,
        )
        with self._lock:
            self._uncleanable[(partition_log.topic, partition_log.partition)] = partition_log

    def _grab(self, *, force: bool, skip: set[tuple[str, int]]) -> LogToClean | None:
        """The filthiest due log (the highest dirty ratio) that no thread is cleaning and
        ``skip`` does not name, claimed for this thread (Kafka's
        grabFilthiestCompactedLog); None if none is due."""
        with self._lock:
            busy = self._in_progress.keys() | skip
        due = []
        now = self._time_ms()
        for partition_log in self._candidates():
            if (partition_log.topic, partition_log.partition) in busy:
                continue
            truncations = partition_log.truncations
            try:
                to_clean = survey(
                    partition_log,
                    checkpoint=self._checkpoint_of(partition_log),
                    now_ms=now,
                    force=force,
                )
            except (OSError, KafkaStorageError) as exc:
                self._failed(partition_log, "surveying", exc)
                continue
            except Exception as exc:  # a damaged segment, say: the others go on
                self._uncleanable_now(partition_log, "surveying", exc, truncations)
                continue
            if to_clean is not None:
                due.append(to_clean)
        # Stable: of equally dirty logs, the first listed.
        due.sort(key=lambda each: each.ratio, reverse=True)
        with self._lock:
            for to_clean in due:
                if (  # another thread may have won it, or a deletion be aborting it, or
                    # its policy have left compact since the survey (abort_cleaning, which
                    # found nothing to abort then: the config changes before it locks)
                    to_clean.key not in self._in_progress
                    and to_clean.key not in self._aborting
                    and to_clean.log.config.compact
                ):
                    self._in_progress[to_clean.key] = threading.get_ident()
                    return to_clean
        return None

    def _failed(self, partition_log: PartitionLog, what: str, exc: Exception) -> None:
        if isinstance(exc, KafkaStorageError):
            log.error("%s %s failed: %s", what, partition_log, exc)  # its dir is reported
        elif partition_log.closed or (
            isinstance(exc, OSError) and exc.errno in (errno.EBADF, errno.ENOENT)
        ):
            log.info("%s %s stopped: the log went away (%s)", what, partition_log, exc)
        else:
            assert isinstance(exc, OSError)
            log.error(
                "%s %s failed: %s",
                what,
                partition_log,
                partition_log.report_failure("cleaning of", exc),
            )

    def _clean(self, to_clean: LogToClean) -> CleaningResult | None:
        """Clean a log this thread claimed, then release it."""
        partition_log = to_clean.log

        def aborted() -> bool:
            # Its policy no longer compact stops it too, even when the change comes from
            # this very thread (abort_cleaning does not wait for it), and so does the
            # cleaner stopping (Kafka's checkDone: a shutdown waits for one batch, not for
            # the offset map's build and a run of segment.bytes).
            return (
                self._stop.is_set()
                or not partition_log.config.compact
                or any(each is partition_log for each in self._aborting.get(to_clean.key, ()))
            )

        try:
            result = clean(
                to_clean, map_bytes=self._map_bytes, stopping=self._stop.is_set, aborted=aborted
            )
            if result.complete:
                self._record(partition_log, result.end_offset, to_clean.truncations)
            with self._lock:
                before = self.last_results.get(to_clean.key)
                # Not for a log deleted from inside this very cleaning (forget is done).
                if not partition_log.closed:
                    self.last_results[to_clean.key] = result
            if result.kept_unread is not None and (
                before is None or before.kept_unread != result.kept_unread
            ):
                # Once, not at every cleaning: the operator learns why the log keeps
                # records and tombstones it would otherwise drop.
                log.warning(
                    "cleaning %s-%d: the batch at offset %d cannot be read (%s): it is kept"
                    " whole, and every tombstone above it is kept (a record one deleted may"
                    " be in it); docs/storage.md, Compaction",
                    result.topic,
                    result.partition,
                    *result.kept_unread,
                )
            log.info(
                "cleaned %s-%d (dirty ratio %.2f): offsets %d-%d mapped (%d keys), %d of %d"
                " records dropped, %d bytes to %d, %d segments to %d in %.3f s%s",
                result.topic,
                result.partition,
                to_clean.ratio,
                result.first_dirty_offset,
                result.end_offset,
                result.keys_mapped,
                result.records_dropped,
                result.records_read,
                result.bytes_read,
                result.bytes_written,
                result.segments_before,
                result.segments_after,
                result.seconds,
                "" if result.complete else " (stopped: the log moved or the cleaning was aborted)",
            )
            return result
        except (OSError, KafkaStorageError) as exc:
            self._failed(partition_log, "cleaning", exc)
            return None
        except Exception as exc:  # a damaged segment, say: the others go on
            self._uncleanable_now(partition_log, "cleaning", exc, to_clean.truncations)
            return None
        finally:
            with self._lock:
                del self._in_progress[to_clean.key]
                self._cleaning_ended.notify_all()

    def clean_one(
        self, partition_log: PartitionLog, *, force: bool = False
    ) -> CleaningResult | None:
        """Clean this log now if it is due (``force``: if anything is dirty); None if it
        was not, another thread is cleaning it, it is marked uncleanable, or its policy is
        not compact."""
        key = (partition_log.topic, partition_log.partition)
        with self._lock:
            if (
                key in self._in_progress
                or key in self._aborting
                or self._uncleanable.get(key) is partition_log
                or not partition_log.config.compact
            ):
                return None
            self._in_progress[key] = threading.get_ident()
        truncations = partition_log.truncations
        try:
            to_clean = survey(
                partition_log,
                checkpoint=self._checkpoint_of(partition_log),
                now_ms=self._time_ms(),
                force=force,
            )
        except (OSError, KafkaStorageError) as exc:
            self._failed(partition_log, "surveying", exc)
            to_clean = None
        except Exception as exc:  # a damaged segment, say
            self._uncleanable_now(partition_log, "surveying", exc, truncations)
            to_clean = None
        if to_clean is None:
            with self._lock:
                del self._in_progress[key]
                self._cleaning_ended.notify_all()
            return None
        return self._clean(to_clean)

    def clean_once(self, *, force: bool = False) -> list[CleaningResult]:
        """One pass: every compacted log that is due, the filthiest first (surveyed
        again after each cleaning), each at most once."""
        results = []
        done: set[tuple[str, int]] = set()
        while not self._stop.is_set():
            to_clean = self._grab(force=force, skip=done)
            if to_clean is None:
                break
            done.add(to_clean.key)
            result = self._clean(to_clean)
            if result is not None:
                results.append(result)
        return results

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once()
            except Exception:
                log.exception("the log cleaner's pass failed")
                cleaned = []
            if not cleaned:
                self._stop.wait(self._backoff_s)

    def start(self) -> None:
        for i in range(self._threads_wanted):
            thread = threading.Thread(target=self._run, name=f"log-cleaner-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop the threads: a cleaning under way stops before the next batch it would
        read, incomplete, its run's cleaned files removed (as an aborted one)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
