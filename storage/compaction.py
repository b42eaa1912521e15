"""Log compaction's decisions, as pure functions over bytes and numbers.

A compacted topic (``cleanup.policy=compact``) keeps, for every key, at least its latest
record. Kafka's log cleaner (LogCleaner, LogCleanerManager) decides, and this module
decides the same way; ``storage.cleaner`` does the reading, writing and swapping:

- Which part of a log may be cleaned: from its log start offset up to the first
  uncleanable offset, the lowest of the active segment's base offset, the high watermark
  and the first segment holding records younger than ``min.compaction.lag.ms``, rounded
  down to a segment boundary. Of that, what lies at or above the first dirty offset (where
  the last cleaning ended) is dirty (``cleanable_range``).
- Whether to clean it now: when the dirty part's share of the bytes is above
  ``min.cleanable.dirty.ratio``, or when a dirty record is older than
  ``max.compaction.lag.ms`` (``should_clean``).
- Which records stay: a record stays unless a later record of its key is in the dirty
  part (the offset map holds each key's latest offset there), it has no key, or it is a
  tombstone (a null value) in a segment older than the delete horizon (``retain``).
  A map that fills up (``OffsetMap``) ends the cleaning after the last offset it holds,
  inside a segment if need be (Kafka's offsetMap.latestOffset + 1): the records past
  that stay whatever they are, and the next cleaning starts there. So every record
  below where cleanings ended was in some cleaning's map, and a tombstone there may go
  at the delete horizon: that cleaning dropped the records it deleted, unless they were
  in a batch it could not read (below).
- How a batch is rewritten (``filter_batch``): its base offset, last offset delta, base
  timestamp, leader epoch, producer fields and attributes stay; the retained records keep
  their bytes (their deltas are relative to those), so only the header's length, count,
  maxTimestamp (the largest kept record's, from -1 as MemoryRecordsBuilder's) and CRC
  change. Offsets are never reassigned: a compacted log has gaps.
  A batch left with no record goes. Kafka rewrites a batch with the first retained
  record's timestamp as base; keeping the old base is equally valid in the format and
  leaves the records' bytes alone.

Batches of every codec are read (``storage.codecs``), and a rewritten batch keeps its
codec. A batch whose attributes name no codec (5-7), whose body does not decode, or whose
records decompress to more than the cleaner reads (16 times the topic's *current*
``max.message.bytes``: a batch written before it was lowered, or while the topic was
delete-only, may be over it) is kept whole and unread (``filter_batch`` says why), and
its keys are not put in the map, so its records are never dropped and never make
another record drop: that errs on the side of keeping data. A record in it may be one
that a later tombstone deleted, which Kafka's cleaner (it reads every batch, a record
at a time, unbounded) drops in the cleaning that maps the tombstone; here it stays, so
the tombstone must too, or the record is its key's latest again once the tombstone goes.
So a cleaning keeps every tombstone above the first batch it kept unread, whatever the
horizon (``retain``'s ``first_unread``); one below it cannot have deleted a record in
it and goes as usual. Batches are copied in offset order, so that batch is known before
any tombstone above it is looked at.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

from storage import codecs
from storage.errors import CorruptRecordError, DecompressedTooLargeError
from storage.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    as_int64,
    batch_crc,
    check_records,
    decode_varint,
    decompressed,
    encode_varint,
    read_header,
)

__all__ = [
    "Filtered",
    "KeyedRecord",
    "OffsetMap",
    "SegmentStat",
    "batch_keys",
    "cleanable_range",
    "delete_horizon_ms",
    "dirty_ratio",
    "filter_batch",
    "first_keyless_offset",
    "group_segments",
    "keyed_records",
    "retain",
    "should_clean",
]

_INT32_MAX: Final = 2**31 - 1
# The header after its first 12 bytes (base offset, batch length), as Kafka lays it out.
_LENGTH: Final = struct.Struct(">i")
_CRC_OFFSET: Final = 17
_MAX_TIMESTAMP_OFFSET: Final = 35
_RECORD_COUNT_OFFSET: Final = 57
_UINT32: Final = struct.Struct(">I")
_INT64: Final = struct.Struct(">q")


class KeyedRecord(NamedTuple):
    """One record of a batch, as compaction needs it: its bytes are
    ``body[start:end]`` of the batch's (decompressed) records body."""

    start: int
    end: int
    offset: int
    timestamp: int
    key: bytes | None
    tombstone: bool  # a null value


def decodable(header: BatchHeader) -> bool:
    """Whether this batch's records can be read here (its attributes name a codec)."""
    return codecs.readable(header.compression)


def keyed_records(
    batch: bytes | memoryview, header: BatchHeader, *, max_size: int = codecs.MAX_SIZE
) -> tuple[bytes, list[KeyedRecord]]:
    """The records body of one batch (``batch`` holds exactly it) and its records.
    CorruptRecordError if the body does not parse or decompresses to more than
    ``max_size`` bytes (the caller keeps such a batch whole); only decodable batches
    (``decodable``) may be given."""
    body = decompressed(batch, header, max_size)
    try:
        records: list[KeyedRecord] = []
        base_offset = header.base_offset
        base_timestamp = header.base_timestamp
        append_time = header.max_timestamp if header.is_log_append_time else None
        pos = 0
        for _ in range(header.record_count):
            length, pos = decode_varint(body, pos)
            start = pos
            end = pos + length
            if length < 0 or end > len(body):
                raise CorruptRecordError(
                    f"record length {length} past the batch's end",
                    position=header.position,
                    offset=header.base_offset,
                )
            pos += 1  # attributes
            ts_delta, pos = decode_varint(body, pos)
            offset_delta, pos = decode_varint(body, pos)
            key_length, pos = decode_varint(body, pos)
            key = None if key_length < 0 else body[pos : pos + key_length]
            pos += max(key_length, 0)
            value_length, pos = decode_varint(body, pos)
            if pos > end:
                raise CorruptRecordError(
                    "record fields past the record's length",
                    position=header.position,
                    offset=header.base_offset,
                )
            timestamp = as_int64(base_timestamp + ts_delta) if append_time is None else append_time
            records.append(
                KeyedRecord(
                    start, end, base_offset + offset_delta, timestamp, key, value_length < 0
                )
            )
            pos = end
    except (IndexError, ValueError) as exc:
        raise CorruptRecordError(
            f"records body: {exc}", position=header.position, offset=header.base_offset
        ) from None
    if pos != len(body):
        raise CorruptRecordError(
            f"{len(body) - pos} bytes after its records",
            position=header.position,
            offset=header.base_offset,
        )
    return body, records


def batch_keys(
    batch: bytes | memoryview, header: BatchHeader, *, max_size: int = codecs.MAX_SIZE
) -> list[tuple[bytes, int]]:
    """(key, offset) of every keyed record of a batch, in offset order; none for a batch
    that cannot be decoded or parsed (its keys do not go in the offset map)."""
    if header.is_control or not decodable(header):
        return []
    try:
        _, records = keyed_records(batch, header, max_size=max_size)
    except CorruptRecordError:
        return []
    return [(r.key, r.offset) for r in records if r.key is not None]


def first_keyless_offset(
    batch: bytes | memoryview, header: BatchHeader, *, max_size: int = codecs.MAX_SIZE
) -> int | None:
    """The offset of the batch's first record without a key (its base offset plus its
    index), which a compacted topic refuses (Kafka's LogValidator.validateKey); None if
    every record has one, or the batch names no codec (let through, as the cleaner keeps
    it whole). InvalidRecordError if its records do not parse (``check_records``),
    CorruptRecordError if its body is not a valid stream of its codec or decompresses to
    more than ``max_size`` bytes."""
    if header.is_control or not decodable(header):
        return None
    # Walked, not read into a record each: this runs on the produce path.
    body = decompressed(batch, header, max_size)
    position, offset = header.position, header.base_offset
    keyless = check_records(body, header.record_count, position=position, offset=offset)
    return None if keyless < 0 else header.base_offset + keyless


def retain(
    record: KeyedRecord, latest_offset: int, keep_tombstones: bool, first_unread: int = -1
) -> bool:
    """Kafka's LogCleaner.shouldRetainRecord: ``latest_offset`` is the offset map's entry
    for the record's key (-1: none). ``first_unread`` is the base offset of the first
    batch this cleaning kept unread (-1: none): a tombstone above it stays whatever the
    horizon, since a record it deleted may be in that batch, still there."""
    if record.key is None:
        return False  # a compacted topic's record without a key (Kafka drops it too)
    if record.offset < latest_offset:
        return False  # a later record of its key exists
    if not record.tombstone or keep_tombstones:
        return True
    return 0 <= first_unread < record.offset


class Filtered(NamedTuple):
    """What ``filter_batch`` made of a batch: ``batch`` is the same object if every record
    stays or it was kept unread, None if none stays, else the rebuilt batch; ``unread``
    says why it was kept unread (None: it was read, or is a control batch)."""

    batch: bytes | None
    unread: str | None = None


def filter_batch(
    batch: bytes,
    header: BatchHeader,
    keep: Callable[[KeyedRecord], bool],
    *,
    max_size: int = codecs.MAX_SIZE,
) -> Filtered:
    """``batch`` (exactly one batch) with only the records ``keep`` accepts (see the
    module's docstring); one that cannot be read is kept whole, never dropped."""
    if header.is_control:
        return Filtered(batch)
    if not decodable(header):
        return Filtered(batch, f"its attributes name no codec ({header.compression})")
    try:
        body, records = keyed_records(batch, header, max_size=max_size)
    except DecompressedTooLargeError:
        return Filtered(batch, f"its records decompress to more than {max_size} bytes")
    except CorruptRecordError as exc:
        return Filtered(batch, str(exc))
    kept = [r for r in records if keep(r)]
    if len(kept) == len(records):
        return Filtered(batch)
    if not kept:
        return Filtered(None)
    new_body = b"".join(encode_varint(r.end - r.start) + body[r.start : r.end] for r in kept)
    new_body = codecs.compress(header.compression, new_body)
    rebuilt = bytearray(batch[:BATCH_HEADER_SIZE])
    rebuilt += new_body
    _LENGTH.pack_into(rebuilt, 8, len(rebuilt) - LOG_OVERHEAD)
    if not header.is_log_append_time:
        # MemoryRecordsBuilder's maxTimestamp starts at NO_TIMESTAMP: kept records all
        # before the epoch (or wrapped to the bottom) leave -1, as Kafka's cleaner writes.
        max_timestamp = max(NO_TIMESTAMP, *(r.timestamp for r in kept))
        _INT64.pack_into(rebuilt, _MAX_TIMESTAMP_OFFSET, max_timestamp)
    _LENGTH.pack_into(rebuilt, _RECORD_COUNT_OFFSET, len(kept))
    _UINT32.pack_into(rebuilt, _CRC_OFFSET, batch_crc(rebuilt))
    return Filtered(bytes(rebuilt))


class OffsetMap:
    """Each key's latest offset in the dirty part of a log, within a memory budget.

    Kafka's SkimpyOffsetMap keeps a 16-byte hash and an offset per key (24 bytes) in
    ``log.cleaner.dedupe.buffer.size``; this map keeps the key itself in a dict, so the
    budget is counted as what each entry costs here (its key's length and the entry's
    objects). ``put`` refuses a new key once the budget is spent (unless forced)."""

    __slots__ = ("_latest", "_used", "capacity_bytes")

    #: a dict slot, a bytes object's header and an int (CPython 3.11, 64-bit)
    ENTRY_OVERHEAD: Final = 8 * 3 + sys.getsizeof(b"") + sys.getsizeof(2**40)

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._latest: dict[bytes, int] = {}
        self._used = 0

    def put(self, key: bytes, offset: int, *, force: bool = False) -> bool:
        """Record ``offset`` as ``key``'s latest; False (nothing stored) if ``key`` is new
        and the budget is spent, unless ``force`` (the cleaner's first key: a cleaning
        always maps one, so it always moves on)."""
        latest = self._latest
        if key not in latest:
            cost = len(key) + self.ENTRY_OVERHEAD
            if self._used + cost > self.capacity_bytes and not force:
                return False
            self._used += cost
        latest[key] = offset
        return True

    def get(self, key: bytes) -> int:
        """``key``'s latest offset, -1 if it has none here."""
        return self._latest.get(key, -1)

    def __len__(self) -> int:
        return len(self._latest)

    @property
    def bytes_used(self) -> int:
        return self._used


class SegmentStat(NamedTuple):
    """What planning needs of a segment: ``first_timestamp`` is its first batch's
    maxTimestamp (-1 if empty), ``largest_timestamp`` its largest record timestamp (else
    its file's modification time), ``last_modified_ms`` its file's modification time."""

    base_offset: int
    size: int
    first_timestamp: int
    largest_timestamp: int
    last_modified_ms: int


def cleanable_range(
    segments: Sequence[SegmentStat],
    *,
    log_start_offset: int,
    checkpoint: int | None,
    high_watermark: int,
    now_ms: int,
    min_compaction_lag_ms: int,
) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset); ``segments`` are the log's, the
    active one last. The first uncleanable offset is a segment boundary or the log start
    offset; the range is empty (first uncleanable <= first dirty) when nothing may be
    cleaned. ``checkpoint`` (where the last cleaning ended, inside a segment if its
    offset map filled there) is the first dirty offset if it lies between the log start
    offset and the active segment's base, else the log start offset is."""
    if not segments:
        return log_start_offset, log_start_offset
    # Whole segments only: the one holding the bound is not cleanable (the log start
    # offset, and so the high watermark, is never below the first segment's base).
    bound = min(segments[-1].base_offset, high_watermark)
    first_uncleanable = segments[max(_segment_index(segments, bound), 0)].base_offset
    # Below the log start: retention or DeleteRecords moved it on. Above the active
    # segment's base, where no cleaning ends: the log was truncated below it (Kafka
    # resets a checkpoint past the log end too). A truncation lowers the checkpoint
    # (LogManager.truncate_to, and LogCleaner.reconcile after a restart).
    first_dirty = log_start_offset
    if checkpoint is not None and log_start_offset <= checkpoint <= segments[-1].base_offset:
        first_dirty = checkpoint
    if min_compaction_lag_ms > 0:
        for segment in segments:
            if segment.base_offset >= first_uncleanable:
                break
            if _ends_at(segments, segment) <= first_dirty:
                continue
            if segment.largest_timestamp > now_ms - min_compaction_lag_ms:
                first_uncleanable = segment.base_offset
                break
    return first_dirty, max(first_uncleanable, log_start_offset)


def _segment_index(segments: Sequence[SegmentStat], offset: int) -> int:
    """The index of the segment holding ``offset`` (the last whose base is <= it)."""
    lo, hi = 0, len(segments)
    while lo < hi:
        mid = (lo + hi) // 2
        if segments[mid].base_offset <= offset:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _ends_at(segments: Sequence[SegmentStat], segment: SegmentStat) -> int:
    """The next segment's base offset (a segment's offsets end below it)."""
    index = _segment_index(segments, segment.base_offset)
    if index + 1 < len(segments):
        return segments[index + 1].base_offset
    return 2**63 - 1


def _split(
    segments: Sequence[SegmentStat], first_dirty: int, first_uncleanable: int
) -> tuple[list[SegmentStat], list[SegmentStat]]:
    """The cleanable segments below ``first_uncleanable``: (clean ones, dirty ones). A
    segment holding offsets at or above ``first_dirty`` is dirty."""
    clean: list[SegmentStat] = []
    dirty: list[SegmentStat] = []
    for segment in segments:
        if segment.base_offset >= first_uncleanable:
            break
        (dirty if _ends_at(segments, segment) > first_dirty else clean).append(segment)
    return clean, dirty


def dirty_ratio(segments: Sequence[SegmentStat], first_dirty: int, first_uncleanable: int) -> float:
    """The dirty part's share of the cleanable bytes (Kafka's cleanableRatio)."""
    clean, dirty = _split(segments, first_dirty, first_uncleanable)
    dirty_bytes = sum(s.size for s in dirty)
    total = dirty_bytes + sum(s.size for s in clean)
    return dirty_bytes / total if total else 0.0


def should_clean(
    segments: Sequence[SegmentStat],
    first_dirty: int,
    first_uncleanable: int,
    *,
    min_cleanable_ratio: float,
    now_ms: int,
    max_compaction_lag_ms: int,
) -> bool:
    """Whether the log is due: dirty enough, or holding a dirty record older than
    ``max.compaction.lag.ms`` (KIP-354: the earliest of the dirty segments' first
    batches' timestamps tells, as Kafka's; as there, one of 0 or less tells nothing:
    maxCompactionDelay keeps those above 0)."""
    if first_uncleanable <= first_dirty:
        return False
    _, dirty = _split(segments, first_dirty, first_uncleanable)
    if not dirty or not any(s.size for s in dirty):
        return False
    if dirty_ratio(segments, first_dirty, first_uncleanable) > min_cleanable_ratio:
        return True
    first = min((s.first_timestamp for s in dirty if s.first_timestamp > 0), default=-1)
    return first > 0 and now_ms - first > max_compaction_lag_ms


def delete_horizon_ms(
    segments: Sequence[SegmentStat], first_dirty: int, delete_retention_ms: int
) -> int:
    """Tombstones in a segment last modified at or before this are dropped: the
    modification time, less ``delete.retention.ms``, of the last segment holding clean
    offsets, the one holding the first dirty offset if it lies inside one (Kafka's
    deleteHorizonMs); 0 when nothing is clean yet, so a tombstone survives at least one
    cleaning and ``delete.retention.ms`` after it."""
    clean = [s for s in segments[:-1] if s.base_offset < first_dirty]
    if not clean:
        return 0
    return clean[-1].last_modified_ms - delete_retention_ms


def group_segments(
    segments: Sequence[SegmentStat], end_offset: int, *, max_bytes: int
) -> list[tuple[int, int]]:
    """The segments holding offsets below ``end_offset`` (at or below the active segment's
    base; it may lie inside a segment, which is then the last), in runs to clean into one
    segment each: ``(first index, end index)`` pairs. A run holds at most ``max_bytes``
    (``segment.bytes``; a larger segment is a run of its own) and offsets within 2**31 of
    its first base (the indexes keep offsets relative to it)."""
    below = 0
    while below < len(segments) - 1 and segments[below].base_offset < end_offset:
        below += 1  # the active segment (the last) is never among them
    runs: list[tuple[int, int]] = []
    i = 0
    while i < below:
        start = i
        size = segments[i].size
        i += 1
        while (
            i < below
            and size + segments[i].size <= max_bytes
            and segments[i + 1].base_offset - 1 - segments[start].base_offset <= _INT32_MAX
        ):
            size += segments[i].size
            i += 1
        runs.append((start, i))
    return runs


def read_headers(blob: bytes | memoryview) -> list[BatchHeader]:
    """The headers of the whole batches in ``blob`` (positions relative to it).
    CorruptRecordError for a batch length below a batch header's (a damaged header;
    Kafka's reader refuses it too), which would otherwise never move the reading on."""
    headers: list[BatchHeader] = []
    pos = 0
    while len(blob) - pos >= BATCH_HEADER_SIZE:
        header = read_header(blob, pos)
        if header.size < BATCH_HEADER_SIZE:
            raise CorruptRecordError(
                f"batch length {header.size - LOG_OVERHEAD} is below the minimum"
                f" {BATCH_HEADER_SIZE - LOG_OVERHEAD}",
                position=pos,
                offset=header.base_offset,
            )
        if pos + header.size > len(blob):
            break
        headers.append(header)
        pos += header.size
    return headers
