"""A partition's log: the segments of one ``<topic>-<partition>`` directory.

``PartitionLog`` appends (as leader: validate, assign offsets and epoch in place, write;
as follower: validate, check contiguity, write), reads whole batches as file regions,
rolls segments, truncates (KIP-101), applies retention, flushes by policy, keeps the
leader epoch cache consistent, and on opening recovers whatever a crash left unflushed.

Concurrency: one lock serialises the changes (appends, rolls, truncation, retention); a
read takes no lock. It works from a snapshot of the segment list and the log end offset,
and ``pread`` never moves a file position, so reads run beside an append. Segments that
retention or truncation remove are renamed ``.deleted`` and closed only
``file.delete.delay.ms`` later (when a scheduler is given), so a region handed out just
before stays readable.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import operator
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

from storage import codecs
from storage.checkpoints import fsync_dir
from storage.compaction import first_keyless_offset
from storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from storage.errors import (
    CheckpointError,
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    OffsetOverflowError,
    RecordBatchTooLargeError,
)
from storage.partition_dir import (
    PartitionDir,
    join_partition_dir,
    log_dir_name,
    parse_log_dir_name,
)
from storage.records import (
    BatchesInfo,
    BatchHeader,
    Compression,
    assign_offsets,
    decompressed,
    iter_records,
    keyless_indexes,
    max_decompressed_bytes,
    producer_batches,
    recompress,
    validate_follower_batches,
)
from storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    FileRegion,
    LogSegment,
    cleaned_paths,
    random_segment_jitter,
    segment_paths,
    shared_ms,
)
from zkdata.znodes import SharedValues

if TYPE_CHECKING:
    from broker.config import TopicConfig

__all__ = [
    "AppendInfo",
    "Defer",
    "DirFailed",
    "LogConfig",
    "OffsetsMoved",
    "PartitionLog",
    "ReadInfo",
    "RecoveryReport",
    "TimestampOffset",
    "log_dir_name",
    "parse_log_dir_name",
]

log = logging.getLogger(__name__)

LONG_MAX: Final = 2**63 - 1
_INT32_MAX: Final = 2**31 - 1
_SEGMENT_NAME = re.compile(r"(\d{20})\.(log|index|timeindex)")
_LEFTOVER_SUFFIXES: Final = (DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX, ".swap")
# A cleaned segment that replaces the segments from its base offset up to (not including)
# the second offset: once renamed to this name, it is the truth for that range (see
# replace_segments), and opening the log completes the swap.
_SWAP_NAME = re.compile(r"(\d{20})\.log\.(\d{20})\.swap")
_BASE_OFFSET: Final = operator.attrgetter("base_offset")  # bisect key over segments

#: ``defer(action, delay_ms)`` runs ``action`` later on a background thread.
Defer = Callable[[Callable[[], None], int], None]
#: ``dir_failed(log_dir, message, error)``: an I/O error in the log directory ``log_dir``
#: (LogDirFailureChannel.maybe_add_offline_log_dir: it queues the directory once for the
#: broker's failure handler, taking no lock a log operation holds).
DirFailed = Callable[[str, str, BaseException], None]

# A log's lock guards its offsets and segment list for one append, roll, truncation or
# flush's bookkeeping, and is never held while another log's is taken. So logs share
# locks from a fixed set, picked by partition, where Kafka gives each log its own: a lock
# costs ~110 bytes (the object and its semaphore), 11 MB in a broker hosting 100,000
# partitions. Two busy logs share one with odds of 1 in 1,024.
LOG_LOCK_STRIPES: Final = 1024
_LOG_LOCKS: Final = tuple(threading.Lock() for _ in range(LOG_LOCK_STRIPES))


def _log_lock(topic: str, partition: int) -> threading.Lock:
    return _LOG_LOCKS[hash((topic, partition)) % LOG_LOCK_STRIPES]


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The topic configs a log uses (``LogConfig.from_topic_config`` takes them from a
    broker.config.TopicConfig); the defaults are Kafka's."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: forever
    retention_bytes: int = -1  # -1: no limit
    delete_enabled: bool = True  # cleanup.policy includes "delete"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    max_timestamp_difference_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    # Compaction (cleanup.policy includes "compact"): storage/cleaner.py reads these.
    compact: bool = False
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    # compression.type: the codec a producer's batches are compressed again with; None
    # ("producer"): kept as the producer compressed them.
    compression: int | None = None
    # min.insync.replicas: acks=all produce checks read it here, in memory (Kafka's
    # leaderLog.config.minInSyncReplicas), never from ZooKeeper.
    min_insync_replicas: int = 1
    # message.downconversion.enable: whether a consumer's Fetch v0-v3 gets this log's
    # batches converted to its messages (else UNSUPPORTED_VERSION).
    downconversion_enabled: bool = True
    #: how long the active segment may be written before it rolls (Kafka's
    #: LogConfig.maxSegmentMs): ``segment.ms``, or ``max.compaction.lag.ms`` if lower for
    #: a compacted topic, since the active segment is never cleaned (KIP-354)
    max_segment_ms: int = field(init=False, repr=False, compare=False)

    @property
    def max_decompressed_bytes(self) -> int:
        """How many bytes a batch's records may take decompressed where they are read
        whole (``records.max_decompressed_bytes``: 16 times ``max.message.bytes``)."""
        return max_decompressed_bytes(self.max_message_bytes)

    def __post_init__(self) -> None:
        max_segment_ms = self.segment_ms
        if self.compact and self.max_compaction_lag_ms > 0:
            max_segment_ms = min(self.max_compaction_lag_ms, max_segment_ms)
        object.__setattr__(self, "max_segment_ms", max_segment_ms)

    @classmethod
    def from_topic_config(cls, config: TopicConfig) -> LogConfig:
        """The log config of a topic config; equal ones are one shared object (a broker
        with 100,000 partitions of a few configs keeps a few, not 100,000)."""
        made = cls(
            segment_bytes=config.segment_bytes,
            segment_ms=config.segment_ms,
            segment_jitter_ms=config.segment_jitter_ms,
            segment_index_bytes=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            delete_enabled="delete" in config.cleanup_policy,
            flush_messages=config.flush_messages,
            flush_ms=config.flush_ms,
            max_message_bytes=config.max_message_bytes,
            log_append_time=config.message_timestamp_type == "LogAppendTime",
            max_timestamp_difference_ms=config.message_timestamp_difference_max_ms,
            file_delete_delay_ms=config.file_delete_delay_ms,
            compact="compact" in config.cleanup_policy,
            delete_retention_ms=config.delete_retention_ms,
            min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
            min_compaction_lag_ms=config.min_compaction_lag_ms,
            max_compaction_lag_ms=config.max_compaction_lag_ms,
            compression=_COMPRESSION_TYPES.get(config.compression_type),
            min_insync_replicas=config.min_insync_replicas,
            downconversion_enabled=config.message_downconversion_enable,
        )
        return _SHARED_LOG_CONFIGS(made)


#: compression.type's values naming a codec ("producer" names none)
_COMPRESSION_TYPES: Final = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


_SHARED_LOG_CONFIGS: SharedValues[LogConfig] = SharedValues(10_000)


class AppendInfo(NamedTuple):
    """The result of an append: the offsets the batches got (or had) and what the
    Produce response needs (``log_append_time`` is -1 for CreateTime topics)."""

    first_offset: int
    last_offset: int
    record_count: int
    batch_count: int
    size: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    log_end_offset: int


class ReadInfo(NamedTuple):
    """Whole batches read from one segment.

    ``region`` is the file region to send (None when nothing was read); its batches hold
    offsets ``first_offset`` (the base offset of the first batch, which may be below the
    offset asked for) to ``next_offset - 1``. ``to_bytes()`` materialises it.
    ``log_start_offset``/``log_end_offset`` are the log's as the read saw them.
    """

    start_offset: int
    first_offset: int
    next_offset: int
    region: FileRegion | None
    log_start_offset: int
    log_end_offset: int
    # What a fetch with min_bytes counts (Kafka 2.8's DelayedFetch.tryComplete): the
    # bytes from the first batch at or past the offset asked for to the readable end
    # within its segment (exact up to the read's ``count_to``, at least that beyond it),
    # and whether the readable end lies in a later segment (its Case F).
    bytes_to_end: int = 0
    end_in_later_segment: bool = False

    @property
    def size(self) -> int:
        return 0 if self.region is None else self.region.length

    def to_bytes(self) -> bytes:
        return b"" if self.region is None else self.region.to_bytes()


class TimestampOffset(NamedTuple):
    """ListOffsets by timestamp: the first record with a timestamp >= the one asked."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening a log did. ``truncated_bytes`` is what was cut off a torn or corrupt
    tail (``truncation_reason`` says what was found there)."""

    clean_shutdown: bool
    segments: int
    segments_recovered: int
    bytes_recovered: int
    truncated_bytes: int
    truncation_reason: str | None
    segments_deleted: int
    log_end_offset: int
    seconds: float


def _modified_ms(path: Path) -> int:
    """A file's last modification time, 0 if it cannot be read (Java's File.lastModified)."""
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return 0


def _now_ms() -> int:
    return int(time.time() * 1000)


Retainable = Callable[[LogSegment, LogSegment | None], bool]
"""A retention rule: whether a segment (given the next one, None for the active segment)
may be deleted."""


def deletable_segments(
    segments: Sequence[LogSegment],
    high_watermark: int,
    log_end_offset: int,
    predicate: Retainable,
) -> int:
    """How many of the oldest segments retention deletes (Kafka 2.8's
    Log.deletableSegments): while ``predicate`` holds, each wholly below the high
    watermark (its end: the next segment's base, the log end for the active one, so the
    log start never passes the high watermark). The active segment may be among them,
    unless it is empty (it would only be made again)."""
    count = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        end = log_end_offset if following is None else following.base_offset
        if (
            high_watermark < end
            or (following is None and segment.size == 0)
            or not predicate(segment, following)
        ):
            break
        count += 1
    return count


def _check_keys(
    records: bytearray | memoryview, where: str, max_batch_size: int, max_size: int
) -> None:
    """A compacted topic's records must have keys: InvalidRecordError (INVALID_RECORD)
    for the first that has none, as Kafka's LogValidator refuses it (validateKey, before
    a record's timestamp is looked at). Compressed batches only: ``assign_offsets`` walks
    the uncompressed ones' records.

    Decoding takes a while (a zstd batch of 1 MB, seconds): it reads only the producer's
    bytes, so it runs before the append takes any lock. Batches ``assign_offsets``
    refuses whole (CRC, a bad size or magic, over ``max_batch_size``, no codec) are left
    to it, its error first as before; an incomplete entry after the whole batches is
    left out, as it leaves it (``producer_batches``). No offset is assigned yet: the one
    named is the record's in the producer's batch (base offset 0 plus its index, Kafka's
    RecordError batchIndex)."""
    view = memoryview(records)
    try:
        headers = producer_batches(view)
    except CorruptRecordError:
        return
    if any(h.size > max_batch_size or not codecs.readable(h.compression) for h in headers):
        return
    for header in headers:
        if header.compression == Compression.NONE:
            continue
        batch = view[header.position : header.position + header.size]
        offset = first_keyless_offset(batch, header, max_size=max_size)
        if offset is not None:
            # Every such record's index, as Kafka's answer lists them (decoded again:
            # a refusal only).
            body = decompressed(batch, header, max_size)
            raise InvalidRecordError(
                f"compacted topic cannot accept a record without a key in topic partition {where}",
                position=header.position,
                offset=offset,
                keyless=keyless_indexes(body, header.record_count),
            )


def _headers_unless_cut(
    segment: LogSegment, start: int, end: int, truncations: int
) -> Iterator[BatchHeader]:
    """``segment.headers(start, end)`` for a lock-free reader that took the segment's
    truncation count ``truncations`` before ``end``: ending where a truncation since cut
    them (no answer beyond, as at the log end), CorruptRecordError only for damage."""
    try:
        yield from segment.headers(start, end)
    except CorruptRecordError:
        if segment.truncations == truncations:
            raise


def _complete_swaps(names: list[str], directory: str) -> list[str]:
    """Finish a compaction's swap that a crash interrupted: the ``.swap`` segment replaces
    every segment file in its range (some may already be gone), then takes its base
    offset's name; its indexes, missing, are rebuilt when it is opened. Returns the
    directory's names after."""
    for name in names:
        match = _SWAP_NAME.fullmatch(name)
        if match is None:
            continue
        base, end = int(match.group(1)), int(match.group(2))
        for other in names:
            segment = _SEGMENT_NAME.fullmatch(other)
            if segment is not None and base <= int(segment.group(1)) < end:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, other))
        os.rename(os.path.join(directory, name), segment_paths(directory, base)[0])
        log.info("completed the swap of %s's cleaned segment %d", directory, base)
    fsync_dir(Path(directory))
    return os.listdir(directory)


class OffsetsMoved:
    """The logs whose checkpointed offsets (high watermark, recovery point, log start)
    moved since the checkpoint of that offset last took them. A checkpoint reads only
    these, not every log: with 100,000 logs its passes over them all kept the GIL 2-9 ms
    at a time, 28-38 ms a run, whenever one high watermark moved, and a produce beside
    them waited that long (benchmarks/HISTORY.md, 2026-12-07).

    A log adds itself after it set the offset, and a checkpoint takes a log out before
    it reads the offset (see ``take``), so a move is never missed; at worst it is read
    twice. Set operations on logs (hashed by identity) are atomic under the GIL."""

    __slots__ = ("high_watermark", "log_start", "recovery_point")

    def __init__(self) -> None:
        self.high_watermark: set[PartitionLog] = set()
        self.recovery_point: set[PartitionLog] = set()
        self.log_start: set[PartitionLog] = set()

    def all_moved(self, partition_log: PartitionLog) -> None:
        self.high_watermark.add(partition_log)
        self.recovery_point.add(partition_log)
        self.log_start.add(partition_log)

    def forget(self, partition_log: PartitionLog) -> None:
        """A log the manager let go of: its marks go with it."""
        self.high_watermark.discard(partition_log)
        self.recovery_point.discard(partition_log)
        self.log_start.discard(partition_log)

    @staticmethod
    def take(
        moved: set[PartitionLog], wanted: Callable[[PartitionLog], bool] | None = None
    ) -> list[PartitionLog]:
        """Take out of ``moved`` its logs (those ``wanted`` says, if given) and return
        them; the caller reads their offsets after this, so a log moving again meanwhile
        is marked again for the next checkpoint."""
        logs = list(moved)  # one C call: no other thread runs while it copies
        if wanted is not None:
            logs = [pl for pl in logs if wanted(pl)]
        moved.difference_update(logs)
        return logs


class PartitionLog:
    """One partition's log in ``directory`` (named ``<topic>-<partition>``).

    Opening it loads and, after an unclean shutdown (``clean_shutdown=False``), recovers
    it from ``recovery_point``: every batch from the segment holding the recovery point
    to the end is checked (length, magic, CRC, offset order), a torn or corrupt tail is
    cut off (and every later segment deleted), and the indexes of the scanned segments
    are rebuilt. ``recovery_report`` says what was found (None: nothing was on disk).
    """

    # A broker hosts 100,000s of these (most of them idle): slots keep each one small.
    __slots__ = (
        "_closed",
        "_defer",
        "_dir_dirty",
        "_dir_failed",
        "_hw",
        "_last_flush_ms",
        "_leo",
        "_lock",
        "_log_start",
        "_moved",
        "_parent",
        "_recovery_point",
        "_sealed",
        "_segments",
        "_time_ms",
        "_truncations",
        "config",
        "epoch_cache",
        "partition",
        "recovery_report",
        "topic",
    )

    def __init__(
        self,
        directory: Path | str | PartitionDir,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        defer: Defer | None = None,
        time_ms: Callable[[], int] = _now_ms,
        found: bool = False,
        dir_failed: DirFailed | None = None,
        offsets_moved: OffsetsMoved | None = None,
    ) -> None:
        """``found``: the directory is known to exist (LogManager found it).
        ``dir_failed`` is told of every I/O error of the log once it is open (an error
        while opening raises OSError: LogManager reports that one). ``offsets_moved``
        is told whenever an offset its checkpoints hold moves after the log opened."""
        started = time.perf_counter()
        where = PartitionDir.of(directory)
        if where.topic is None:
            name = os.path.basename(where.parent)
            raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
        # Kept as its parts (see storage/partition_dir.py): the log directory and topic
        # strings are shared, and ``directory`` makes the path when a file is opened.
        self._parent = where.parent
        self.topic = where.topic
        self.partition = where.partition
        path = join_partition_dir(*where)  # made once for the loading below
        self.config = config
        self._defer = defer
        self._dir_failed = dir_failed
        self._moved = offsets_moved
        self._time_ms = time_ms
        self._lock = _log_lock(self.topic, self.partition)
        self._closed = False
        # Set when a clean shutdown begins (seal): nothing more is written, the flush
        # then covers the whole log.
        self._sealed = False
        self._dir_dirty = False
        self._truncations = 0
        names = self._list_or_make(found, path)
        new_directory = names is None  # made here: nothing in it to load
        present = names is not None and LEADER_EPOCH_CHECKPOINT in names
        try:
            self.epoch_cache = LeaderEpochCache(
                where, file_name=LEADER_EPOCH_CHECKPOINT, present=present
            )
            epochs_lost = False
        except CheckpointError as e:
            # Every batch carries its leader epoch: scanning them all rebuilds the cache
            # (Kafka fails the broker's start-up here).
            log.warning("%s; the leader epochs are read again from every batch", e)
            self.epoch_cache = LeaderEpochCache(
                where, file_name=LEADER_EPOCH_CHECKPOINT, present=False
            )
            epochs_lost = True

        segments = [] if names is None else self._load_segments(names, where, path)
        if not present and not epochs_lost and any(segment.size for segment in segments):
            # Records carry epochs, so a log with records has a checkpoint: this one was
            # lost (deleted from outside, a partial restore). Without epochs it would be
            # cut at its high watermark as a follower, and could not answer
            # OffsetsForLeaderEpoch as a leader. (A log without records has none: no cost
            # to the start of 100,000 idle logs.)
            log.warning(
                "%s: %s missing beside records; the leader epochs are read again from every batch",
                path,
                LEADER_EPOCH_CHECKPOINT,
            )
            epochs_lost = True
        recovered = bytes_recovered = truncated = deleted = 0
        reason: str | None = None
        leo: int | None = None  # read from the last segment if it is not recovered
        for i, segment in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            unflushed = not clean_shutdown and (next_base is None or next_base > recovery_point)
            if (
                not epochs_lost
                and (not unflushed or segment.never_written)
                and segment.index_problem() is None
            ):
                if next_base is not None:
                    continue
                try:
                    leo = segment.next_offset()
                    continue
                except CorruptRecordError as e:
                    # A torn or garbage batch at the end of a segment not scanned (a clean
                    # shutdown): recovered as after a crash, not a broker that fails to start.
                    log.warning("%s; the segment is recovered", e)
            result = segment.recover(self.epoch_cache.latest_epoch)
            recovered += 1
            bytes_recovered += result.valid_bytes + result.truncated_bytes
            for epoch, start in result.epoch_starts:
                self.epoch_cache.assign(epoch, start)
            if result.truncated_bytes and unflushed:
                truncated += result.truncated_bytes
                reason = f"{segment.path.name}: {result.reason}"
                for later in segments[i + 1 :]:
                    later.close_and_remove()
                    deleted += 1
                del segments[i + 1 :]
                break
            if result.truncated_bytes:  # an older segment with a bad index and a bad batch
                truncated += result.truncated_bytes
                reason = f"{segment.path.name}: {result.reason}"
        found_on_disk = bool(segments)
        if segments and log_start_offset > (
            end := segments[-1].next_offset() if leo is None else leo
        ):
            # The log start offset checkpoint is fsynced, the records are not (by
            # default): a power loss, or segment files lost, can leave it past the end
            # recovered. As Kafka 2.8's deleteSegmentsIfLogStartGreaterThanLogEnd: every
            # segment goes and the log restarts empty at its log start, so the offsets
            # already handed out (maybe consumed and committed) are not handed out again.
            log.warning(
                "%s: deleting all segments because the log end offset %d is smaller than"
                " the log start offset %d (records lost in a power loss, or segment files"
                " deleted)",
                path,
                end,
                log_start_offset,
            )
            self._remove_segments(segments)
            deleted += len(segments)
            segments = []
            leo = None
            self.epoch_cache.clear()
        if not segments:
            segments.append(self._new_segment(log_start_offset, new_directory=new_directory))
        self._publish(segments)
        self._leo = segments[-1].next_offset() if leo is None else leo
        self._log_start = min(max(log_start_offset, segments[0].base_offset), self._leo)
        self.epoch_cache.truncate_from_end(self._leo)
        self.epoch_cache.truncate_from_start(self._log_start)
        # Kafka's updateLogStartOffset: never below the log start, whatever moves it.
        self._recovery_point = max(
            self._leo if clean_shutdown else min(recovery_point, self._leo), self._log_start
        )
        self._hw = min(max(high_watermark, self._log_start), self._leo)
        self._last_flush_ms = shared_ms(time_ms())
        # A log created here had nothing to recover: no report (a broker creating
        # 100,000 partitions keeps 100,000 fewer objects).
        self.recovery_report = (
            None
            if not found_on_disk
            else RecoveryReport(
                clean_shutdown=clean_shutdown,
                segments=len(segments),
                segments_recovered=recovered,
                bytes_recovered=bytes_recovered,
                truncated_bytes=truncated,
                truncation_reason=reason,
                segments_deleted=deleted,
                log_end_offset=self._leo,
                seconds=time.perf_counter() - started,
            )
        )

    # --- loading ----------------------------------------------------------------------

    @staticmethod
    def _list_or_make(found: bool, directory: str) -> list[str] | None:
        """The names in the log's directory, or None if it was made here. What is known
        to be there (``found``: a load) is listed first, what is not is made first: one
        system call either way, then the names tell which files exist (a broker loads
        100,000s of logs, checking each file of each would double the calls)."""
        if found:
            with contextlib.suppress(FileNotFoundError):
                return os.listdir(directory)
        try:
            os.mkdir(directory)
            return None
        except FileExistsError:
            return os.listdir(directory)
        except FileNotFoundError:  # the log directory itself is missing
            os.makedirs(directory, exist_ok=True)
            return os.listdir(directory)

    def _load_segments(
        self, names: list[str], where: PartitionDir, directory: str
    ) -> list[LogSegment]:
        if any(name.endswith(".swap") for name in names):
            names = _complete_swaps(names, directory)
        bases: set[int] = set()
        others: list[tuple[int, str]] = []
        for name in names:
            if name.endswith(_LEFTOVER_SUFFIXES):
                os.unlink(os.path.join(directory, name))
                continue
            match = _SEGMENT_NAME.fullmatch(name)
            if match is None:
                continue
            if match.group(2) == "log":
                bases.add(int(match.group(1)))
            else:
                others.append((int(match.group(1)), name))
        indexed: set[str] = set()
        for base, name in others:
            if base not in bases:  # an index without its log
                os.unlink(os.path.join(directory, name))
            else:
                indexed.add(name)
        return [
            self._open_segment(
                where,
                base,
                (
                    f"{base:020d}{INDEX_SUFFIX}" in indexed,
                    f"{base:020d}{TIME_INDEX_SUFFIX}" in indexed,
                ),
            )
            for base in sorted(bases)
        ]

    def _open_segment(
        self, where: PartitionDir, base_offset: int, indexes_found: tuple[bool, bool]
    ) -> LogSegment:
        config = self.config
        return LogSegment(
            where,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_bytes=config.segment_index_bytes,
            # As a new segment's (Kafka 2.8's LogSegment.open draws one for every segment
            # it loads): else the active segment found at start rolls a whole segment.ms
            # after its first batch, every log's at once.
            roll_jitter_ms=random_segment_jitter(config.segment_jitter_ms, config.segment_ms),
            now_ms=self._time_ms(),
            indexes_found=indexes_found,
        )

    def _new_segment(self, base_offset: int, *, new_directory: bool = False) -> LogSegment:
        self._dir_dirty = True
        return LogSegment.create(
            self.where,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_bytes=self.config.segment_index_bytes,
            segment_jitter_ms=self.config.segment_jitter_ms,
            segment_ms=self.config.segment_ms,
            now_ms=self._time_ms(),
            new_directory=new_directory,
        )

    def _publish(self, segments: Sequence[LogSegment]) -> None:
        """Make these the log's segments: one immutable tuple, swapped atomically, so
        readers take no lock (they bisect it on the segments' base offsets)."""
        self._segments = tuple(segments)

    @property
    def directory(self) -> str:
        """The partition's directory, ``<log dir>/<topic>-<partition>``, as a str."""
        return join_partition_dir(self._parent, self.topic, self.partition)

    @property
    def where(self) -> PartitionDir:
        """The partition's directory as its parts (what its segments keep)."""
        return PartitionDir(self._parent, self.topic, self.partition)

    @property
    def log_dir(self) -> str:
        """The log directory holding this partition's directory."""
        return self._parent

    @property
    def dir(self) -> Path:
        """The partition's directory, ``<log dir>/<topic>-<partition>``."""
        return Path(self.directory)

    # --- state ------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        """Every offset below it is on disk (fsynced)."""
        return self._recovery_point

    @property
    def truncations(self) -> int:
        """How many times the log was truncated: a sync that began before a truncation
        did not sync what was appended after it (see ``synced_to``)."""
        return self._truncations

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    def earliest_offset_and_epoch(self) -> tuple[int, int]:
        """ListOffsets EARLIEST: the log start offset and its leader epoch, the earliest
        cached epoch if that starts at or below it, else -1 (records written without an
        epoch, in an older message format, start the log): Kafka 2.8's
        fetchOffsetByTimestamp(EARLIEST_TIMESTAMP)."""
        log_start = self._log_start
        entry = self.epoch_cache.earliest_entry
        epoch = entry.epoch if entry is not None and entry.start_offset <= log_start else -1
        return log_start, epoch

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def legacy_offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0, as Kafka 2.8's Log.legacyFetchOffsetsBefore: each segment's base
        offset (at least the log start offset) with its file's last modification time,
        and the log end offset with now if the last segment holds anything; from the last
        (latest, -1), the first (earliest, -2) or the last whose time is at most
        ``timestamp``, at most ``max_num_offsets`` of them going down, highest first."""
        segments = self._segments
        log_start = self._log_start
        entries = [(max(s.base_offset, log_start), _modified_ms(s.path)) for s in segments]
        if segments and segments[-1].size > 0:
            entries.append((self._leo, _now_ms()))
        if timestamp == -1:
            start = len(entries) - 1
        elif timestamp == -2:
            start = 0 if entries else -1
        else:
            start = len(entries) - 1
            while start >= 0 and entries[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        return sorted((entries[start - j][0] for j in range(count)), reverse=True)

    def segment_base_offsets(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start},"
            f" end={self._leo}, hw={self._hw}, segments={len(self._segments)})"
        )

    def _check_open(self) -> None:
        if self._closed or self._sealed:
            raise KafkaStorageError(f"log {self.dir} is closed")

    def _failed(self, what: str, error: OSError) -> KafkaStorageError:
        """An I/O error in this log: its log directory is reported failed (Kafka's
        LogDirFailureChannel.maybeAddOfflineLogDir, which every IOException of a log
        goes to), and the error to raise. A closed log (deleted, or already taken
        offline with its directory) reports nothing: its files are gone or going."""
        message = f"{what} {self.topic}-{self.partition} failed: {error}"
        # EBADF is a descriptor this process closed (a segment deleted meanwhile), not
        # the disk.
        if self._dir_failed is not None and not self._closed and error.errno != errno.EBADF:
            self._dir_failed(self._parent, message, error)
        return KafkaStorageError(message)

    # --- appends ----------------------------------------------------------------------

    def recompressed(self, records: bytearray | memoryview) -> bytearray | memoryview:
        """A producer's batches in the codec the topic's ``compression.type`` names (as
        they are if it names none), a compacted topic's keys checked (``_check_keys``):
        done before ``append_as_leader(..., recompressed=True)``, outside any lock, since
        both decode the batches."""
        config = self.config
        if config.compression is not None:
            records = recompress(
                records,
                config.compression,
                max_batch_size=config.max_message_bytes,
                max_size=config.max_decompressed_bytes,
            )
        if config.compact:
            _check_keys(
                records,
                f"{self.topic}-{self.partition}",
                config.max_message_bytes,
                config.max_decompressed_bytes,
            )
        return records

    def append_as_leader(
        self,
        records: bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        recompressed: bool = False,
    ) -> AppendInfo:
        """Append a producer's batches: validate them (length, magic 2, CRC-32C, a
        client's header rules, ``max.message.bytes``), give them the next offsets and
        ``leader_epoch`` in place (``records`` must be writable) and write them; an
        incomplete entry after them is left out, as Kafka's Log.append leaves it
        (``assign_offsets``). The first
        append in a new epoch records the epoch's start offset. All or nothing: a
        validation error raises before anything is written. ``recompressed``: the caller
        already made them ``recompressed(records)`` (a compacted topic's keys checked)."""
        config = self.config
        now = self._time_ms() if now_ms is None else now_ms
        if not recompressed:  # outside the lock: decoding and compressing take a while
            records = self.recompressed(records)
        with self._lock:
            self._check_open()
            latest = self.epoch_cache.latest_epoch
            if latest is not None and leader_epoch < latest:
                raise FencedLeaderEpochError(
                    f"leader epoch {leader_epoch} is older than the log's latest, {latest}"
                )
            info = assign_offsets(
                records,
                self._leo,
                leader_epoch,
                max_batch_size=config.max_message_bytes,
                log_append_time_ms=now if config.log_append_time else None,
                now_ms=now,
                max_timestamp_difference_ms=(
                    None
                    if config.max_timestamp_difference_ms == LONG_MAX
                    else config.max_timestamp_difference_ms
                ),
                compacted=config.compact,
            )
            # Kafka's Log.append holds what it writes, the trimmed records, to segment.bytes.
            if info.size > config.segment_bytes:
                raise RecordBatchTooLargeError(
                    f"record batches of {info.size} bytes appended to"
                    f" {self.topic}-{self.partition}, more than its segment.bytes"
                    f" {config.segment_bytes}"
                )
            self._append_locked(memoryview(records), info, now)
            if leader_epoch != latest:
                self.epoch_cache.assign(leader_epoch, info.first_offset)
            result = self._append_info(info)
            flush = self._leo - self._recovery_point >= config.flush_messages
        if flush:
            self.flush()
        return result

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from the leader, offsets and epochs as they are. The
        first must start at the log end offset and each next follow the previous one
        (UnexpectedAppendOffsetError otherwise); an incomplete trailing batch is left
        out. A batch whose epoch differs from the cache's latest records it with its
        start offset (Kafka 2.8's Log.append -> maybeAssignEpochStartOffset): usually a
        higher one, but a lower one too, which drops the entries above it (a leadership
        held here over an empty log, whose entry the leader's older records overwrite)."""
        now = self._time_ms()
        with self._lock:
            self._check_open()
            info = validate_follower_batches(records, self._leo)
            if info.batches:
                self._append_locked(memoryview(records)[: info.size], info, now)
                latest = self.epoch_cache.latest_epoch
                for header in info.batches:
                    epoch = header.partition_leader_epoch
                    if epoch >= 0 and epoch != latest:
                        self.epoch_cache.assign(epoch, header.base_offset)
                        latest = epoch
            result = self._append_info(info)
            flush = self._leo - self._recovery_point >= self.config.flush_messages
        if flush:
            self.flush()
        return result

    def _append_info(self, info: BatchesInfo) -> AppendInfo:
        return AppendInfo(
            info.first_offset,
            info.last_offset,
            info.record_count,
            len(info.batches),
            info.size,
            info.max_timestamp,
            info.offset_of_max_timestamp,
            info.log_append_time,
            self._log_start,
            self._leo,
        )

    def _append_locked(self, data: memoryview, info: BatchesInfo, now: int) -> None:
        try:
            segment = self._maybe_roll(info, now)
            segment.append(data[: info.size], info.batches)
        except OSError as exc:
            raise self._failed("append to", exc) from exc
        self._leo = info.last_offset + 1

    def _maybe_roll(self, info: BatchesInfo, now: int) -> LogSegment:
        segment = self._segments[-1]
        if info.last_offset - info.first_offset > _INT32_MAX:
            # No segment can hold them all (Kafka's LogSegment.ensureOffsetInRange): a
            # leader's read stays in one of its segments, so only a damaged one sends this.
            raise OffsetOverflowError(
                f"{self.topic}-{self.partition}: an append of offsets {info.first_offset}"
                f" to {info.last_offset} spans more than a segment holds (2**31 offsets)"
            )
        if info.last_offset - segment.base_offset > _INT32_MAX:
            # Whatever the segment's size, as Kafka 2.8's LogSegment.shouldRoll: a new
            # replica of a compacted topic has an empty segment at 0 (or where its log
            # was started), and the leader's first batch may lie 2**31 or more above it.
            # The new segment starts at the batch (Log.maybeRoll); an empty one below
            # stays, as Log.roll keeps it, holding no offsets (reads pass over it).
            return self._roll_locked(info.first_offset)
        if segment.size == 0:
            return segment
        config = self.config
        rolling_ts = segment.rolling_timestamp()
        if rolling_ts is not None and rolling_ts >= 0 and info.max_timestamp >= 0:
            waited = info.max_timestamp - rolling_ts
        else:
            waited = now - segment.created_ms
        if (
            segment.size > config.segment_bytes - info.size
            or waited > config.max_segment_ms - segment.roll_jitter_ms
            or segment.offset_index.is_full
            or segment.time_index.is_full
        ):
            return self._roll_locked(info.first_offset)
        return segment

    def roll(self) -> None:
        """Start a new segment at the log end offset (no-op if the active one is empty)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size:
                try:
                    self._roll_locked(self._leo)
                except OSError as exc:
                    raise self._failed("roll of", exc) from exc

    def _roll_locked(self, base_offset: int) -> LogSegment:
        old = self._segments[-1]
        old.on_become_inactive()
        segment = self._new_segment(base_offset)
        self._publish((*self._segments, segment))
        if self._defer is not None:  # Kafka flushes a rolled segment in the background
            self._defer(lambda: self.flush(base_offset), 0)
        return segment

    # --- reads ------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset_exclusive: int | None = None,
        *,
        min_one_batch: bool = True,
        count_to: int = 0,
    ) -> ReadInfo:
        """Whole batches from the one holding ``start_offset``, up to ``max_bytes`` (the
        first batch always, however large, when ``min_one_batch``: KIP-74), and only
        batches wholly below ``max_offset_exclusive`` (the high watermark, for consumers)
        and the log end offset. Reads stay within one segment, as Kafka's do. The answer
        also says how far the readable end is (ReadInfo.bytes_to_end, counted exactly up to
        ``count_to``: past what the read saw, through the offset index, not a scan).
        OffsetOutOfRangeError outside [log start offset, log end offset], and below the
        first segment (Kafka 2.8's floorEntry: the log start read here may predate a
        change of the segments read before it, a full truncation's)."""
        segments = self._segments
        leo = self._leo
        log_start = self._log_start
        index = bisect.bisect_right(segments, start_offset, key=_BASE_OFFSET) - 1
        if start_offset < log_start or start_offset > leo or index < 0:
            raise OffsetOutOfRangeError(start_offset, log_start, leo)
        limit = leo if max_offset_exclusive is None else min(max_offset_exclusive, leo)
        try:
            while start_offset < limit and index < len(segments):
                segment = segments[index]
                index += 1
                # The count first (see LogSegment.truncate_to): a batch found cut short
                # or rewritten then tells a truncation under this read from damage.
                truncations = segment.truncations
                end = segment.size
                try:
                    first = segment.find_batch(start_offset, end)
                except CorruptRecordError:
                    if segment.truncations == truncations:
                        raise
                    first = None
                if first is None:
                    if segment.truncations != truncations:
                        break  # its batch was cut meanwhile: nothing read, as at the end
                    if index < len(segments) and segments[index].deleted:
                        # Removed since the list was taken (a truncation removes the
                        # later segments before it cuts this one): read on there, the
                        # answer would skip the offsets cut here, a gap to its reader.
                        break
                    continue
                if first.last_offset >= limit:
                    break
                # A later segment holding offsets below the limit (or starting at it):
                # the limit is beyond this one, and all of its rest is readable.
                later = index < len(segments) and segments[index].base_offset <= limit
                length = 0
                next_offset = first.next_offset
                seen = first.size  # bytes known to be readable from the first batch on
                reached = True  # whether `seen` goes to the limit or the segment's end
                if min_one_batch or first.size <= max_bytes:
                    length = first.size
                    # A truncation cutting the segment under this read (a follower's,
                    # a leader's that lost leadership) ends it at the batches read whole,
                    # as Kafka's, whose fetch at worst gives fewer bytes.
                    after = first.position + first.size
                    for header in _headers_unless_cut(segment, after, end, truncations):
                        if header.last_offset >= limit:
                            break
                        if length + header.size > max_bytes:
                            seen, reached = length + header.size, False
                            break
                        length += header.size
                        next_offset = header.next_offset
                    if segment.truncations != truncations:
                        later = False  # the later segments read were removed
                    if reached:
                        seen = length
                else:
                    reached = False
                if later:
                    seen = end - first.position
                elif not reached and seen < count_to:
                    # The limit is in this segment: where its batch starts (the log
                    # end is the segment's end).
                    try:
                        at = segment.find_batch(limit, end) if limit < leo else None
                        seen = (end if at is None else at.position) - first.position
                    except CorruptRecordError:
                        if segment.truncations == truncations:
                            raise
                        seen = length  # cut meanwhile: what was read is what is known
                if not length:  # a first batch too large for what is left: none read
                    return ReadInfo(
                        start_offset, start_offset, start_offset, None, log_start, leo, seen, later
                    )
                return ReadInfo(
                    start_offset,
                    first.base_offset,
                    next_offset,
                    FileRegion(segment.log, first.position, length),
                    log_start,
                    leo,
                    seen,
                    later,
                )
        except OSError as exc:
            raise self._failed("read of", exc) from exc
        return ReadInfo(start_offset, start_offset, start_offset, None, log_start, leo)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets by timestamp: the earliest record at or above the log start offset
        whose timestamp is >= ``timestamp``, or None if there is none.

        The time index finds where to start; batches are then checked by their
        maxTimestamp, and inside the first that qualifies the records are decoded to find
        the exact one. For a batch that cannot be decoded (its attributes name no codec,
        or its body does not decode) the answer is the batch's first offset at or above
        the log start and its maxTimestamp: no record before it qualifies, but a few at
        its start may not either."""
        segments = self._segments
        leo = self._leo
        log_start = self._log_start
        try:
            for segment in segments:
                if segment.max_timestamp < timestamp:
                    continue
                truncations = segment.truncations  # before the size: as in read
                end = segment.size
                below = segment.time_index.lookup_below(timestamp)
                start = max(segment.base_offset if below is None else below.offset + 1, log_start)
                position = segment.offset_index.lookup(start).position
                for header in _headers_unless_cut(segment, position, end, truncations):
                    if header.last_offset < start:
                        continue
                    if header.next_offset > leo:
                        return None
                    if header.max_timestamp < timestamp:
                        continue
                    epoch = header.partition_leader_epoch
                    first = max(header.base_offset, start)
                    whole = TimestampOffset(header.max_timestamp, first, epoch)
                    if header.is_log_append_time or not codecs.readable(header.compression):
                        return whole
                    batch = segment.log.pread(header.size, header.position)
                    try:
                        for record in iter_records(
                            batch, max_size=self.config.max_decompressed_bytes
                        ):
                            if record.offset >= start and record.timestamp >= timestamp:
                                return TimestampOffset(record.timestamp, record.offset, epoch)
                    except CorruptRecordError as e:
                        # Its CRC held (the producer's), its body does not decode: the
                        # batch is the answer, as for one of a codec not read here.
                        log.warning("%s: %s", self.dir, e)
                        return whole
                if segment.truncations != truncations:
                    return None  # cut meanwhile: the later segments read were removed
        except OSError as exc:
            raise self._failed("read by timestamp of", exc) from exc
        return None

    # --- leader epochs (KIP-101) ------------------------------------------------------

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset); see LeaderEpochCache.end_offset_for."""
        return self.epoch_cache.end_offset_for(leader_epoch, self._leo)

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` (a new leader calls it
        with its log end offset, as Kafka's Partition.makeLeader does)."""
        with self._lock:
            self.epoch_cache.assign(leader_epoch, start_offset)

    # --- offsets the broker moves -----------------------------------------------------

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark (clamped to [log start, log end]); returns it. Retention
        deletes only segments wholly below it, as Kafka's does."""
        with self._lock:
            hw = min(max(high_watermark, self._log_start), self._leo)
            if hw != self._hw:
                self._hw = hw
                if self._moved is not None:
                    self._moved.high_watermark.add(self)
            return hw

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up (DeleteRecords, or a follower following its
        leader's); segments wholly below it go at the next retention check."""
        with self._lock:
            if offset <= self._log_start:
                return False
            if offset > self._leo:
                raise OffsetOutOfRangeError(offset, self._log_start, self._leo)
            self._log_start = offset
            self._hw = max(self._hw, offset)
            self._recovery_point = max(self._recovery_point, offset)
            self._offsets_moved()
            try:
                self.epoch_cache.truncate_from_start(offset)
            except OSError as exc:
                raise self._failed("epoch checkpoint of", exc) from exc
            return True

    # --- truncation -------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding offsets >= ``offset`` (a batch straddling it goes
        whole, so the log end becomes the last batch boundary at or below ``offset``).
        Returns whether anything was removed. The epoch cache drops the epochs that
        started at or after the new end (at or after the log end when nothing is cut)."""
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset ({offset})")
        with self._lock:
            self._check_open()
            if offset >= self._leo:
                # Nothing to cut; epochs starting at the log end have no record (a leader
                # that wrote none there) and go, as in Kafka's Log.truncateTo.
                try:
                    self.epoch_cache.truncate_from_end(self._leo)
                except OSError as exc:
                    raise self._failed("epoch checkpoint of", exc) from exc
                return False
            try:
                if offset < self._segments[0].base_offset:
                    self._truncate_fully_locked(offset)
                    return True
                doomed = [s for s in self._segments if s.base_offset > offset]
                if doomed:
                    self._publish([s for s in self._segments if s.base_offset <= offset])
                    self._remove_segments(doomed)
                active = self._segments[-1]
                active.truncate_to(offset, now_ms=self._time_ms())
                self._leo = active.next_offset()
                self._after_truncation()
            except OSError as exc:
                raise self._failed("truncation of", exc) from exc
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset`` (a follower whose
        log is entirely below its leader's log start offset)."""
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset ({offset})")
        with self._lock:
            self._check_open()
            try:
                self._truncate_fully_locked(offset)
            except OSError as exc:
                raise self._failed("truncation of", exc) from exc

    def _truncate_fully_locked(self, offset: int) -> None:
        doomed = self._segments
        self._remove_segments(doomed)
        self._publish([self._new_segment(offset)])
        self._leo = offset
        self._log_start = offset
        self.epoch_cache.clear()
        self._after_truncation()
        self._hw = offset
        self._recovery_point = offset
        self._offsets_moved()

    def _after_truncation(self) -> None:
        self._truncations += 1
        leo = self._leo
        self._log_start = min(self._log_start, leo)
        self._recovery_point = min(self._recovery_point, leo)
        self._hw = min(self._hw, leo)
        self._offsets_moved()
        self.epoch_cache.truncate_from_end(leo)

    def _offsets_moved(self) -> None:
        """After a change that may move every checkpointed offset (under the lock)."""
        if self._moved is not None:
            self._moved.all_moved(self)

    # --- retention --------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete the oldest segments past ``retention.ms`` (by their largest
        timestamp), then those past ``retention.bytes``, then those wholly below the log
        start offset (``deletable_segments``: never a segment holding offsets at or
        above the high watermark). The active segment goes too, once every record is
        below the high watermark: a new one is rolled at the log end first. The log
        start offset moves up to the first segment left. Returns the number of segments
        deleted."""
        now = self._time_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            try:
                config = self.config
                deleted = 0
                if config.delete_enabled and config.retention_ms >= 0:
                    retention_ms = config.retention_ms
                    deleted += self._delete_while(
                        lambda s, _next: now - s.largest_timestamp() > retention_ms
                    )
                if config.delete_enabled and config.retention_bytes >= 0:
                    excess = sum(s.size for s in self._segments) - config.retention_bytes

                    def over(segment: LogSegment, _next: LogSegment | None) -> bool:
                        nonlocal excess
                        if excess - segment.size >= 0:
                            excess -= segment.size
                            return True
                        return False

                    # At the limit too (Kafka's `size < retentionSize` returns): a
                    # leading segment of no bytes still goes.
                    if excess >= 0:
                        deleted += self._delete_while(over)
                log_start = self._log_start
                deleted += self._delete_while(
                    lambda _s, nxt: nxt is not None and nxt.base_offset <= log_start
                )
                return deleted
            except OSError as exc:
                raise self._failed("retention of", exc) from exc

    def _delete_while(self, predicate: Retainable) -> int:
        segments = self._segments
        count = deletable_segments(segments, self._hw, self._leo, predicate)
        if count == len(segments):
            # Kafka's deleteSegments: a log always has a segment, so an empty one is
            # rolled at the log end (an append's roll: under the lock) before the last
            # goes, and the log start moves there. Else an idle partition kept its last
            # records for ever: nothing rolls a segment but an append.
            self._roll_locked(self._leo)
            segments = self._segments
        if count:
            doomed, kept = segments[:count], segments[count:]
            # The log start moves before the shorter list is published: a lock-free
            # reader takes the segments, then the start, so one that sees the new list
            # sees the new start too (ListOffsets EARLIEST, a fetch's range check), and
            # an offset of a doomed segment is out of range, not the next one's records.
            self._log_start = max(self._log_start, kept[0].base_offset)
            self._recovery_point = max(self._recovery_point, self._log_start)
            self._offsets_moved()
            self.epoch_cache.truncate_from_start(self._log_start)
            self._publish(kept)
            self._remove_segments(doomed)
        return count

    def _remove_segments(self, doomed: Sequence[LogSegment]) -> None:
        """Rename to ``.deleted`` now, close and unlink after file.delete.delay.ms."""
        for segment in doomed:
            segment.rename_to_deleted()  # an OSError: the caller's _failed reports it
        self._dir_dirty = True
        if self._defer is None:
            for segment in doomed:
                segment.close_and_remove()
        else:

            def remove() -> None:
                try:
                    for segment in doomed:
                        segment.close_and_remove()
                except OSError as exc:
                    self._failed("removal of old segments of", exc)  # reported: no raise

            self._defer(remove, self.config.file_delete_delay_ms)

    # --- compaction (storage/cleaner.py writes the cleaned segments) ------------------

    def segments_snapshot(self) -> tuple[LogSegment, ...]:
        """The log's segments now (the active one last); the tuple never changes."""
        return self._segments

    def replace_segments(
        self, old: Sequence[LogSegment], following: LogSegment, *, truncations: int
    ) -> bool:
        """Swap in the cleaned segment the cleaner wrote (``cleaned_paths`` of ``old``'s
        first base offset) for ``old``, consecutive segments followed by ``following``.
        False (nothing changed; the caller removes its files) if the log moved
        meanwhile: closed, truncated since its truncation count was ``truncations``
        (the cleaner reads it before the segments: its offset map may name records a
        truncation removed, even one past ``following``, and dropping what they replaced
        would lose a key's only record), ``old`` no longer all there in that order (a
        retention took some), or not followed by that very segment.

        Crash-safe in three renames: the cleaned log file becomes
        ``<base>.log.<next base>.swap`` (from then on it is the truth for that range,
        and opening the log finishes what follows), ``old`` become ``.deleted`` (closed
        after file.delete.delay.ms, so a region read from them stays readable), and the
        cleaned files take their final names. Only renames and two directory fsyncs run
        under the log's lock; appends wait for nothing else."""
        base = old[0].base_offset
        with self._lock:
            if self._closed or self._sealed or self._truncations != truncations:
                return False
            segments = self._segments
            start = next((i for i, s in enumerate(segments) if s is old[0]), None)
            end = None if start is None else start + len(old)
            if (
                start is None
                or end is None
                or end >= len(segments)
                or any(a is not b for a, b in zip(segments[start:end], old, strict=True))
                or segments[end] is not following
            ):
                return False
            directory = self.directory
            cleaned_log, cleaned_index, cleaned_time_index = cleaned_paths(directory, base)
            final_log, final_index, final_time_index = segment_paths(directory, base)
            swap = f"{final_log}.{following.base_offset:020d}.swap"
            try:
                os.rename(cleaned_log, swap)
                fsync_dir(Path(directory))
                self._remove_segments(old)
                os.rename(cleaned_index, final_index)
                os.rename(cleaned_time_index, final_time_index)
                os.rename(swap, final_log)
                fsync_dir(Path(directory))
                cleaned = self._open_segment(self.where, base, (True, True))
            except OSError as exc:
                raise self._failed("compaction of", exc) from exc
            self._publish((*segments[:start], cleaned, *segments[end:]))
            return True

    def report_failure(self, what: str, error: OSError) -> KafkaStorageError:
        """An I/O error of work on this log done elsewhere (the cleaner's): its log
        directory is reported failed, as for the log's own errors; the error to raise."""
        return self._failed(what, error)

    # --- durability -------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments (and indexes) holding offsets from the recovery point up
        to ``offset`` (default: the log end), then move the recovery point there. The
        fsyncs run outside the lock: appends go on meanwhile."""
        if self.closed:
            return  # nothing more is written to a closed log (its directory may be gone)
        with self._lock:
            if self._closed:
                return
            target = self._leo if offset is None else min(offset, self._leo)
            point = self._recovery_point
            idle = target <= point and not self._dir_dirty
            if not idle:
                segments = self._segments
                first = max(bisect.bisect_right(segments, point, key=_BASE_OFFSET) - 1, 0)
                last = bisect.bisect_left(segments, target, key=_BASE_OFFSET)
                todo = segments[first:last] if target > point else ()
                truncations = self._truncations
                sync_dir = self._dir_dirty
                self._dir_dirty = False
        # The epoch entries before the recovery point moves (recovery no longer re-reads
        # the epochs of batches below it), and after ``target`` is read: an entry assigned
        # after this write starts at or past ``target`` (as Kafka's assign, which writes
        # the checkpoint at once).
        try:
            self.epoch_cache.flush()
        except OSError as exc:
            raise self._failed("epoch checkpoint of", exc) from exc
        if idle:
            return
        for segment in todo:
            try:
                segment.flush()
            except OSError as exc:
                if exc.errno != errno.EBADF or not segment.deleted:
                    raise self._failed("flush of", exc) from exc
        if sync_dir:
            try:
                fsync_dir(self.dir)
            except OSError as exc:
                raise self._failed("flush of", exc) from exc
        with self._lock:
            # A truncation meanwhile (a follower's, on its fetcher thread) may have been
            # followed by appends below ``target`` that these fsyncs missed: the
            # recovery point stays where the truncation put it, for the next flush.
            if target > self._recovery_point and truncations == self._truncations:
                self._recovery_point = min(target, self._leo)
                if self._moved is not None:
                    self._moved.recovery_point.add(self)
            self._last_flush_ms = self._time_ms()

    def synced_to(self, offset: int, truncations: int | None = None) -> None:
        """The file system holding the log was synced (syncfs) after the log reached
        ``offset``: everything below it is on disk, as after ``flush(offset)``. The epoch
        entries must have been made durable first (staged and committed, both synced).
        ``truncations``: the log's count when ``offset`` was read; if it was truncated
        since, what was appended after may not have been synced, and nothing moves."""
        with self._lock:
            if truncations is not None and truncations != self._truncations:
                return
            if offset > self._recovery_point:
                self._recovery_point = min(offset, self._leo)
                if self._moved is not None:
                    self._moved.recovery_point.add(self)
            self._last_flush_ms = self._time_ms()

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Flush if ``flush.ms`` has passed since the last flush and data is unflushed."""
        now = self._time_ms() if now_ms is None else now_ms
        flush_ms = self.config.flush_ms
        if (
            self._closed
            or flush_ms == LONG_MAX
            or self._leo <= self._recovery_point
            or now - self._last_flush_ms < flush_ms
        ):
            return False
        self.flush()
        return True

    def seal(self) -> None:
        """Refuse appends, truncations, rolls and deletions from now on (the ones under
        way end first: they hold the lock); flushes and ``close`` still run. A clean
        shutdown seals every log before its flush, so the flush, the recovery point and
        the clean-shutdown marker cover everything written: a request still being
        handled (Kafka drains its request handlers before its LogManager shuts down) or
        a fetcher's last answer is refused instead of landing after the flush."""
        with self._lock:
            self._sealed = True

    def close(self) -> None:
        """Record the active segment's largest timestamp and close every file. (Flush
        first for a clean shutdown: LogManager.close does.)"""
        with self._lock:
            if self._closed:
                return
            self.epoch_cache.flush()
            self._closed = True
            self._segments[-1].on_become_inactive()
            for segment in self._segments:
                segment.close()

    def close_handlers(self) -> None:
        """Close every file, writing nothing and never raising: the log's directory
        failed, or the log is being deleted (Kafka's Log.closeHandlers). Appends,
        truncations and flushes refuse from now on; a read already under way may fail
        with EBADF, which is not reported."""
        with self._lock:
            self._closed = True
            for segment in self._segments:
                try:
                    segment.close()
                except OSError as exc:
                    log.debug("closing %s without writing: %s", segment.path, exc)

    @property
    def closed(self) -> bool:
        return self._closed


# The offsets the checkpoint files hold, read by C code (unlocked, as the properties are):
# the checkpoints read one from every log every few seconds (100,000 logs on a large
# broker), and a Python call per log through the property costs 3-6x as much.
high_watermark_of: Final[Callable[[PartitionLog], int]] = operator.attrgetter("_hw")
recovery_point_of: Final[Callable[[PartitionLog], int]] = operator.attrgetter("_recovery_point")
log_start_offset_of: Final[Callable[[PartitionLog], int]] = operator.attrgetter("_log_start")
