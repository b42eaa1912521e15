"""Record batches (message format v2, magic 2): validation, offset assignment, parsing.

A records blob (the ``records`` field of Produce and Fetch) is a sequence of batches::

    offset  field                 type
    0       baseOffset            int64
    8       batchLength           int32   bytes after this field
    12      partitionLeaderEpoch  int32
    16      magic                 int8    = 2
    17      crc                   uint32  CRC-32C of bytes 21..end of batch
    21      attributes            int16   compression bits 0-2, timestampType bit 3,
                                          isTransactional bit 4, isControl bit 5
    23      lastOffsetDelta       int32
    27      baseTimestamp         int64
    35      maxTimestamp          int64
    43      producerId            int64
    51      producerEpoch         int16
    53      baseSequence          int32
    57      recordsCount          int32
    61      records               (varint-encoded, compressed as a whole if compressed)

The CRC starts at ``attributes``, so the leader rewrites ``baseOffset`` and
``partitionLeaderEpoch`` in place without recomputing it. On the append path a batch is
checked by its header and its CRC, an uncompressed one's records by their lengths
(``check_records``; field by field in a compacted topic, for the keys), and written as
the producer sent it, compressed or not, but for an uncompressed batch's maxTimestamp,
set to its records' largest as Kafka sets it. ``iter_records`` decodes records for tests, for
ListOffsets by timestamp and for readers of internal topics.

``build_batch`` is the other direction: it encodes records into one batch as a producer
would (varint-framed records, the 61-byte header, CRC-32C), for writers inside the broker
(``groups.offset_records``, for ``__consumer_offsets``) and for tests and benchmarks.
Batches of every codec are real (``storage.codecs``; see its docstring).

CRC-32C comes from the ``crc32c`` package (a C extension using the CPU's crc32
instruction, ~10-26 GB/s): the storage layer's one dependency. The standard library has
only CRC-32 (zlib), a different polynomial, and a pure-Python CRC-32C runs at a few MB/s,
a hundred times below the throughput goal.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from crc32c import crc32c

from storage import codecs
from storage.codecs import Compression
from storage.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    DecompressionError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
    UnknownCompressionError,
    UnreadableRecordLengthError,
    UnsupportedMagicError,
)

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "NO_TIMESTAMP",
    "BatchHeader",
    "BatchesInfo",
    "Compression",
    "Record",
    "RecordSpec",
    "as_int64",
    "assign_offsets",
    "batch_crc",
    "build_batch",
    "check_records",
    "decode_varint",
    "encode_varint",
    "entry_size",
    "iter_batches",
    "iter_records",
    "keyless_indexes",
    "max_decompressed_bytes",
    "producer_batches",
    "read_header",
    "recompress",
    "validate_follower_batches",
]

LOG_OVERHEAD: Final = 12  # baseOffset + batchLength
BATCH_HEADER_SIZE: Final = 61  # every field before the records
MIN_BATCH_LENGTH: Final = BATCH_HEADER_SIZE - LOG_OVERHEAD  # smallest valid batchLength
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21  # where the CRC's coverage starts
MAX_TIMESTAMP_OFFSET: Final = 35
NO_TIMESTAMP: Final = -1

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08  # 1: LogAppendTime
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20
_LAST_CODEC: Final = Compression.ZSTD  # 5-7 name none

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header
_LENGTH: Final = struct.Struct(">qi")
# LegacyRecord.RECORD_OVERHEAD_V0: the smallest size field Kafka's iterator takes (entry_size).
_RECORD_OVERHEAD_V0: Final = 14
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1


def as_int64(value: int) -> int:
    """``value`` as Java's long arithmetic leaves it (64-bit two's complement): a record's
    timestamp is its batch's base timestamp plus its delta, which Kafka adds (and a
    producer's delta subtracts) in longs, wrapping past either end."""
    return (value + 2**63) % 2**64 - 2**63


class BatchHeader(NamedTuple):
    """One batch's header. ``position`` is where the batch starts in its blob or file;
    ``size`` is its whole length (batchLength + 12)."""

    position: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)


class BatchesInfo(NamedTuple):
    """What a records blob holds, after validation (and, for the leader, assignment).

    ``size`` counts the bytes of the whole batches (an incomplete trailing entry, a
    follower's or a producer's, is not counted: it is not written).
    ``offset_of_max_timestamp`` is the last offset of the batch with the largest
    ``maxTimestamp`` (Kafka's shallow offset).
    ``batches`` are the headers as they now are in the buffer.
    """

    first_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    offset_of_max_timestamp: int
    size: int
    batches: tuple[BatchHeader, ...]
    log_append_time: int

    @property
    def batch_count(self) -> int:
        return len(self.batches)


def batch_crc(batch: bytes | bytearray | memoryview) -> int:
    """The CRC-32C a batch's header should hold (over ``attributes``..end)."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """The header of the batch at ``position`` (no checks beyond the header's presence)."""
    if len(buf) - position < BATCH_HEADER_SIZE:
        raise CorruptRecordError("shorter than a batch header", position=position)
    base, length, *rest = _HEADER.unpack_from(buf, position)
    return BatchHeader(position, length + LOG_OVERHEAD, base, *rest)


#: how many times its topic's max.message.bytes a batch's records may take decompressed
DECOMPRESSED_RATIO: Final = 16


def max_decompressed_bytes(max_message_bytes: int) -> int:
    """How many bytes a batch's records may take once decompressed, in a topic whose
    batches take ``max_message_bytes`` at most: 16 times that (16 MiB by default).

    The broker holds a batch's decompressed records whole where it reads them (a
    compacted topic's keys, a recompression, the cleaner, ListOffsets); Kafka streams
    them a record at a time and has no such bound. Without one, a few bytes made
    gigabytes (a gzip or zstd stream of one repeated byte). Producers' batches are far
    smaller: librdkafka's batch.size bounds a batch's uncompressed records (1 MB by
    default), the Java producer's its compressed size (16 KB by default); and a batch
    refused for it is MESSAGE_TOO_LARGE, which the Java producer answers by sending it
    again in halves."""
    return DECOMPRESSED_RATIO * max_message_bytes


def decompressed(
    batch: bytes | bytearray | memoryview, header: BatchHeader, max_size: int
) -> bytes:
    """The records body of one batch (``batch`` holds exactly it), decompressed: a body
    that is not a valid stream of its codec is DecompressionError (or InvalidRecordError,
    ``_truncated``), one making more than ``max_size`` bytes DecompressedTooLargeError; a
    codec naming none (5-7) raises UnsupportedCodecError."""
    data = memoryview(batch)[BATCH_HEADER_SIZE : header.size]
    position, offset = header.position, header.base_offset
    try:
        return codecs.decompress(header.compression, data, max_size)
    except codecs.TooLargeError as e:
        raise DecompressedTooLargeError(str(e), position=position, offset=offset) from None
    except codecs.TruncatedError as e:
        _truncated(e, header.record_count, position, offset)
        raise DecompressionError(str(e), position=position, offset=offset) from None
    except codecs.CodecError as e:
        raise DecompressionError(str(e), position=position, offset=offset) from None


def _truncated(e: codecs.TruncatedError, count: int, position: int, offset: int) -> None:
    """A stream cut short: InvalidRecordError if its records run past what it made (or
    do not parse, or are followed by more), as Kafka's record iterator, reading them
    out of the stream, meets the EOFException in them ("premature EOF reached"); else
    the caller's DecompressionError, as Kafka meets it past them, in its check that no
    bytes remain (a KafkaException)."""
    check_records(e.made, count, position=position, offset=offset)


def entry_size(buf: bytes | bytearray | memoryview, position: int = 0) -> int | None:
    """The size of the whole entry (a record batch, or a message of magic 0 or 1) at
    ``position`` of a producer's records, as Kafka 2.8's ByteBufferLogInputStream gives
    it (MemoryRecords.batches, no size limit). None where that iteration ends: fewer than
    LOG_OVERHEAD bytes left, too few to reach the magic byte, or fewer than the size
    field says (an incomplete entry, which Log.append leaves out: trimInvalidBytes).
    CorruptRecordError where its nextBatchSize throws: a size field below 14
    (LegacyRecord.RECORD_OVERHEAD_V0), once there are 12 bytes to read it, or a magic
    outside 0-2, once there are 17."""
    remaining = len(buf) - position
    if remaining < LOG_OVERHEAD:
        return None
    (length,) = _INT32.unpack_from(buf, position + 8)
    if length < _RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"record size {length} is less than the minimum record overhead"
            f" ({_RECORD_OVERHEAD_V0})",
            position=position,
        )
    if remaining <= MAGIC_OFFSET:
        return None
    magic = buf[position + MAGIC_OFFSET]
    if magic > 2:  # a Java byte: 128-255 are its negative magics, refused too
        raise CorruptRecordError(
            f"unknown magic {magic - 256 if magic > 127 else magic}", position=position
        )
    size: int = length + LOG_OVERHEAD
    return size if size <= remaining else None


def _scan(
    buf: memoryview,
    *,
    max_batch_size: int | None,
    producer: bool,
) -> tuple[list[tuple[int, tuple[int, ...]]], int]:
    """Validate every whole batch in ``buf``: length, magic, CRC, header sanity.

    Returns ``(position, header fields)`` per batch (the fields as ``_HEADER`` unpacks
    them) and the position just past the last whole batch. A ``producer``'s records are
    read as Kafka 2.8's log reads them (``entry_size``): an incomplete trailing entry
    ends the scan, one with a bad size field or magic is an error, each met after the
    batches before it are checked (Log.analyzeAndValidateRecords checks each batch as
    its iterator gives it). Otherwise (a fetch response, or a log's bytes, which may end
    mid-batch) an incomplete trailing batch ends the scan, its magic and length checked
    where they are there. Raises CorruptRecordError (or a subclass) naming the position
    of the first bad batch.
    """
    found: list[tuple[int, tuple[int, ...]]] = []
    end = len(buf)
    pos = 0
    unpack = _HEADER.unpack_from
    while pos < end:
        if producer and entry_size(buf, pos) is None:
            break  # what is left, Log.append does not write (trimInvalidBytes)
        remaining = end - pos
        if remaining >= BATCH_HEADER_SIZE:
            fields = unpack(buf, pos)
            base, length, magic = fields[0], fields[1], fields[3]
        elif remaining >= LOG_OVERHEAD:
            base, length = _LENGTH.unpack_from(buf, pos)
            magic = buf[pos + MAGIC_OFFSET] if remaining > MAGIC_OFFSET else 2
            fields = ()
        else:
            break
        if magic != 2:
            if magic in (0, 1):
                raise UnsupportedMagicError(magic, position=pos, offset=base)
            raise CorruptRecordError(f"unknown magic {magic}", position=pos, offset=base)
        if length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}",
                position=pos,
                offset=base,
            )
        size = length + LOG_OVERHEAD
        if max_batch_size is not None and size > max_batch_size:
            raise RecordTooLargeError(size, max_batch_size, position=pos)
        if size > remaining:  # a fetch's incomplete batch (a producer's ended above)
            break
        if crc32c(buf[pos + ATTRIBUTES_OFFSET : pos + size]) != fields[4]:
            raise CorruptRecordError(
                f"CRC-32C mismatch (stored {fields[4]:#010x})", position=pos, offset=base
            )
        if fields[6] < 0 or fields[12] < 0:
            raise CorruptRecordError(
                f"negative lastOffsetDelta ({fields[6]}) or record count ({fields[12]})",
                position=pos,
                offset=base,
            )
        found.append((pos, fields))
        pos += size
    return found, pos


def _header(position: int, fields: tuple[int, ...]) -> BatchHeader:
    base, length, *rest = fields
    return BatchHeader(position, length + LOG_OVERHEAD, base, *rest)


def _check_codec(pos: int, fields: tuple[int, ...]) -> None:
    # Kafka's Log.analyzeAndValidateRecords reads batch.compressionType, which throws for
    # the ids naming no codec (CompressionType.forId).
    codec = fields[5] & ATTR_COMPRESSION_MASK
    if codec > _LAST_CODEC:
        raise UnknownCompressionError(codec, position=pos)


def _check_client_batch(pos: int, fields: tuple[int, ...]) -> None:
    # Kafka's LogValidator.validateBatch for AppendOrigin.Client.
    (base, _, _, _, _, attributes, last_offset_delta, _, _, producer_id, _, base_sequence,
     count) = fields  # fmt: skip
    if base != 0:
        raise InvalidRecordError(
            f"a producer's batch must have baseOffset 0, not {base}", position=pos, offset=base
        )
    _check_codec(pos, fields)
    if count <= 0 or count != last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {count} does not match the offset range [0, {last_offset_delta}]",
            position=pos,
            offset=base,
        )
    if attributes & ATTR_CONTROL:
        raise InvalidRecordError("clients may not write control batches", position=pos)
    if producer_id >= 0 and base_sequence < 0:
        raise InvalidRecordError(f"producer id {producer_id} without a base sequence", position=pos)
    if attributes & ATTR_TIMESTAMP_TYPE:
        # LogValidator.validateTimestamp, whatever the topic's message.timestamp.type:
        # taken, its maxTimestamp (the producer's) would pass for the broker's time.
        raise InvalidTimestampError(
            f"the batch at position {pos}: a producer should not set the timestamp type"
            " to LogAppendTime"
        )


def _check_timestamp(ts: int, now_ms: int, max_difference_ms: int, where: str) -> None:
    # Kafka's LogValidator.validateTimestamp: NO_TIMESTAMP (-1) is not checked.
    if ts != NO_TIMESTAMP and abs(ts - now_ms) > max_difference_ms:
        raise InvalidTimestampError(
            f"timestamp {ts} of {where} is more than {max_difference_ms} ms from the"
            f" broker's clock ({now_ms})"
        )


def _check_timestamps(
    view: memoryview, pos: int, fields: tuple[int, ...], now_ms: int, max_difference_ms: int
) -> None:
    """message.timestamp.difference.max.ms over a CreateTime batch: every record's
    timestamp (base + delta) in an uncompressed batch, read in a walk by the records'
    lengths (only with the setting below its default: then nothing is walked); a
    compressed batch's base and max timestamps stand for its records, which are not
    decompressed for this (docs/architecture.md). Kafka checks records only, never the
    header's fields. Runs after ``check_records``: the lengths fill the body.

    Each record out of range of an uncompressed batch is a record error (its index in
    the batch and Kafka's text), all of them in one InvalidTimestampError, as Kafka's
    processRecordErrors throws them for the Produce answer's record errors."""
    base_ts = fields[7]
    if fields[5] & ATTR_COMPRESSION_MASK:
        for ts in (base_ts, fields[8]):  # baseTimestamp, maxTimestamp
            _check_timestamp(ts, now_ms, max_difference_ms, f"the batch at position {pos}")
        return
    body = view[pos + BATCH_HEADER_SIZE : pos + fields[1] + LOG_OVERHEAD]
    varint = decode_varint
    at = 0
    refused: list[tuple[int, str]] = []
    try:
        for i in range(fields[12]):
            length, at = varint(body, at)
            delta, after = varint(body, at + 1)  # after the attributes byte
            ts = as_int64(base_ts + delta)
            if ts != NO_TIMESTAMP and abs(ts - now_ms) > max_difference_ms:
                offset_delta, _ = varint(body, after)
                refused.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {fields[0] + offset_delta} is"
                        " out of range. The timestamp should be within"
                        f" [{now_ms - max_difference_ms}, {now_ms + max_difference_ms}]",
                    )
                )
            at += length
    except (IndexError, ValueError) as e:  # a timestamp delta that does not parse
        raise InvalidRecordError(f"the batch's records do not parse: {e}", position=pos) from None
    if refused:
        raise InvalidTimestampError(
            f"{len(refused)} records of the batch at position {pos} are more than"
            f" {max_difference_ms} ms from the broker's clock ({now_ms})",
            record_errors=tuple(refused),
        )


def _records_max_timestamp(body: memoryview, count: int, base_ts: int, max_delta: int) -> int:
    """A CreateTime batch's maxTimestamp from its records': the base timestamp plus their
    largest delta, -1 (none) if that is lower, as Kafka's max starts at NO_TIMESTAMP.
    Kafka adds them in longs, which wrap: where a sum may pass either end (a base below
    0, or the largest sum beyond 64 bits) each record's timestamp is read as Kafka reads
    it and the largest taken, as LogValidator.assignOffsetsNonCompressed takes it."""
    max_ts = base_ts + max_delta
    if base_ts < 0 or max_ts > _INT64_MAX:
        max_ts = NO_TIMESTAMP
        pos = 0
        for _ in range(count):  # the walk before found every length and delta sound
            length, pos = decode_varint(body, pos)
            delta, _ = decode_varint(body, pos + 1)  # after the attributes byte
            max_ts = max(max_ts, as_int64(base_ts + delta))
            pos += length
    return max(max_ts, NO_TIMESTAMP)


def assign_offsets(
    buf: bytearray | memoryview,
    base_offset: int,
    leader_epoch: int,
    *,
    max_batch_size: int | None = None,
    log_append_time_ms: int | None = None,
    now_ms: int | None = None,
    max_timestamp_difference_ms: int | None = None,
    compacted: bool = False,
) -> BatchesInfo:
    """The leader's path: validate every batch a producer sent, then, in place, give the
    batches consecutive offsets from ``base_offset`` and stamp ``leader_epoch``.

    An uncompressed batch's records are walked (``check_records``): by their lengths
    alone, or field by field in a ``compacted`` topic, whose keys are looked at. What
    does not parse is InvalidRecordError, as Kafka's LogValidator refuses it, and so is a
    record without a key in a compacted topic. A compressed batch's records are not
    decompressed here (the caller reads them where it must: a compacted topic's keys).

    An uncompressed batch's maxTimestamp becomes its records' largest timestamp (read in
    the same walk), and its CRC is recomputed if that changed it, as Kafka's
    LogValidator sets it: a producer's header claiming another (10 years ahead) pinned
    time retention and escaped ``max_timestamp_difference_ms``. A compressed batch's
    is kept (its records are not decompressed here; docs/architecture.md, item 40).

    With ``log_append_time_ms`` (topic ``message.timestamp.type=LogAppendTime``) each
    batch's timestamp type becomes LogAppendTime and its maxTimestamp that time, and its
    CRC is recomputed (those fields are inside the CRC). ``max_timestamp_difference_ms``
    (with ``now_ms``) checks CreateTime batches' timestamps (``_check_timestamps``).

    The batches are read as Kafka 2.8's log reads a producer's (``entry_size``): an
    incomplete entry after the whole ones is left out, unchanged and not counted in
    ``size``, the bytes to write (Log.trimInvalidBytes); one with a size field below 14
    or a magic outside 0-2 is CorruptRecordError. No whole batch at all is
    CorruptRecordError too (Produce v3+ refuse it before: ProduceRequest.validateRecords).

    Validation runs over every batch before any byte is changed: on an error the buffer
    is as it was. ``buf`` must be writable (a bytearray, or a memoryview of one).
    """
    view = memoryview(buf)
    if view.readonly:
        raise TypeError("assign_offsets needs a writable buffer (bytearray)")
    found, size = _scan(view, max_batch_size=max_batch_size, producer=True)
    if not found:
        raise CorruptRecordError("no record batch in the request", position=0)
    offset = base_offset  # each batch's, once assigned
    # An uncompressed CreateTime batch's maxTimestamp, its records' largest (None: kept).
    records_max: list[int | None] = []
    for pos, fields in found:
        _check_client_batch(pos, fields)
        batch_max: int | None = None
        if not fields[5] & ATTR_COMPRESSION_MASK:
            body = view[pos + BATCH_HEADER_SIZE : pos + fields[1] + LOG_OVERHEAD]
            keyless, max_delta = _checked_records(body, fields[12], pos, offset, not compacted)
            if compacted and keyless >= 0:
                raise InvalidRecordError(
                    "a compacted topic cannot accept a record without a key",
                    position=pos,
                    offset=offset + keyless,
                    keyless=keyless_indexes(body, fields[12]),
                )
            if log_append_time_ms is None:
                batch_max = _records_max_timestamp(body, fields[12], fields[7], max_delta)
        records_max.append(batch_max)
        offset += fields[6] + 1
    if (
        max_timestamp_difference_ms is not None
        and log_append_time_ms is None
        and now_ms is not None
    ):
        for pos, fields in found:
            _check_timestamps(view, pos, fields, now_ms, max_timestamp_difference_ms)

    assigned: list[BatchHeader] = []
    next_offset = base_offset
    max_ts = NO_TIMESTAMP
    offset_of_max_ts = -1
    records = 0
    pack_offset = _INT64.pack_into
    pack_epoch = _INT32.pack_into
    for (pos, fields), batch_max in zip(found, records_max, strict=True):
        (_, length, _, magic, crc, attributes, last_offset_delta, base_ts, batch_max_ts,
         producer_id, producer_epoch, base_sequence, count) = fields  # fmt: skip
        pack_offset(view, pos, next_offset)
        pack_epoch(view, pos + 12, leader_epoch)
        if log_append_time_ms is not None:
            attributes |= ATTR_TIMESTAMP_TYPE
            batch_max_ts = log_append_time_ms
            _INT16.pack_into(view, pos + ATTRIBUTES_OFFSET, attributes)
            _INT64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, batch_max_ts)
            crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + length + LOG_OVERHEAD])
            _UINT32.pack_into(view, pos + CRC_OFFSET, crc)
        elif batch_max is not None and batch_max != batch_max_ts:
            # Kafka's assignOffsetsNonCompressed (batch.setMaxTimestamp): the header's
            # claim, which retention, the time index and ListOffsets trust, is not taken.
            batch_max_ts = batch_max
            _INT64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, batch_max_ts)
            crc = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + length + LOG_OVERHEAD])
            _UINT32.pack_into(view, pos + CRC_OFFSET, crc)
        assigned.append(
            BatchHeader(
                pos,
                length + LOG_OVERHEAD,
                next_offset,
                leader_epoch,
                magic,
                crc,
                attributes,
                last_offset_delta,
                base_ts,
                batch_max_ts,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
            )
        )
        next_offset += last_offset_delta + 1
        records += count
        if batch_max_ts > max_ts:
            max_ts = batch_max_ts
            offset_of_max_ts = next_offset - 1
    return BatchesInfo(
        base_offset,
        next_offset - 1,
        records,
        max_ts,
        offset_of_max_ts,
        size,
        tuple(assigned),
        NO_TIMESTAMP if log_append_time_ms is None else log_append_time_ms,
    )


def recompress(
    buf: bytearray | memoryview,
    codec: int,
    *,
    max_batch_size: int | None = None,
    max_size: int = codecs.MAX_SIZE,
) -> bytearray | memoryview:
    """A producer's batches with their records compressed with ``codec`` (a topic's
    ``compression.type``; ``Compression.NONE``: uncompressed), as Kafka's LogValidator
    rebuilds them: offsets, timestamps, producer fields and record count as they were,
    the attributes' codec bits, length and CRC new. ``buf`` itself if no batch changes
    (each is of ``codec`` already, or a control batch), less an incomplete entry after
    the whole batches, which is left out as ``assign_offsets`` leaves it.

    The batches are validated first (length, magic, CRC: CorruptRecordError, as
    ``assign_offsets`` would raise, which checks the rebuilt ones again, their size too;
    a batch over ``max_batch_size``, max.message.bytes, is RecordTooLargeError before it
    is read, as Kafka's Log.analyzeAndValidateRecords checks the producer's batches
    before its LogValidator rebuilds them); a codec Kafka does not know (5-7) is
    UnknownCompressionError, as in ``assign_offsets``; a body that is not a valid stream
    of its codec is DecompressionError (or InvalidRecordError, ``_truncated``), one
    decompressing to
    over ``max_size`` bytes DecompressedTooLargeError; records that do not parse, or not
    as many as the header counts, are InvalidRecordError."""
    view = memoryview(buf)
    found, size = _scan(view, max_batch_size=max_batch_size, producer=True)
    for pos, fields in found:
        _check_codec(pos, fields)
    if all(
        fields[5] & ATTR_COMPRESSION_MASK == codec or fields[5] & ATTR_CONTROL
        for _, fields in found
    ):
        return buf if size == len(view) else view[:size]
    out = bytearray()
    for pos, fields in found:
        size = fields[1] + LOG_OVERHEAD
        attributes = fields[5]
        source = attributes & ATTR_COMPRESSION_MASK
        if source == codec or attributes & ATTR_CONTROL:
            out += view[pos : pos + size]
            continue
        try:
            body = codecs.decompress(source, view[pos + BATCH_HEADER_SIZE : pos + size], max_size)
        except codecs.TooLargeError as e:
            raise DecompressedTooLargeError(
                f"the batch's records are too large to compress them again ({e})",
                position=pos,
                offset=fields[0],
            ) from None
        except (codecs.CodecError, codecs.UnsupportedCodecError) as e:
            if isinstance(e, codecs.TruncatedError):
                _truncated(e, fields[12], pos, fields[0])
            raise DecompressionError(
                f"the batch's records cannot be read to compress them again ({e})",
                position=pos,
                offset=fields[0],
            ) from None
        # Its records as the header counts them, or none is stored: a body holding
        # fewer (a stream read short) would be acknowledged whole and stored without
        # them. Kafka reads every record here (InvalidRecordException), a compressed
        # one's from the stream (a negative length: UnreadableRecordLengthError).
        _checked_records(body, fields[12], pos, fields[0], False, stream=source != codecs.NONE)
        start = len(out)
        out += view[pos : pos + BATCH_HEADER_SIZE]
        out += codecs.compress(codec, body)
        _INT32.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
        _INT16.pack_into(
            out, start + ATTRIBUTES_OFFSET, attributes & ~ATTR_COMPRESSION_MASK | codec
        )
        _UINT32.pack_into(
            out, start + CRC_OFFSET, crc32c(memoryview(out)[start + ATTRIBUTES_OFFSET :])
        )
    return out


class _NegativeLength(ValueError):
    """A record's length is negative (which Kafka's readers tell apart: see
    UnreadableRecordLengthError)."""


def keyless_indexes(body: bytes | memoryview, count: int) -> tuple[int, ...]:
    """The index of every record without a key in a records body (decompressed) that
    ``check_records`` found to hold ``count`` records that parse: a compacted topic
    refuses each (Kafka's LogValidator gives each its RecordError)."""
    indexes = []
    pos = 0
    for i in range(count):
        length, pos = decode_varint(body, pos)
        end = pos + length
        _, key_at = decode_varint(body, pos + 1)  # attributes, timestamp delta
        _, key_at = decode_varint(body, key_at)  # offset delta
        key_length, _ = decode_varint(body, key_at)
        if key_length < 0:
            indexes.append(i)
        pos = end
    return tuple(indexes)


class _LongLength(ValueError):
    """A record's length is a varint of more than 5 bytes (UnreadableRecordLengthError)."""


#: the most bytes of a varint (an int32) Kafka's ByteUtils.readVarint reads
_VARINT_MAX_BYTES: Final = 5


def _walk_records(body: bytes | memoryview, count: int) -> tuple[int, int]:
    """Walk ``count`` records of a records body by their lengths and fields, reading no
    key, value or header: the index of the first record without a key (-1: none) and
    the largest timestamp delta (``_NO_DELTA``: no record). ValueError or IndexError
    (past the body's end) where one does not parse, as ``_read_record`` would, or bytes
    follow the last."""
    varint = decode_varint
    keyless = -1
    max_delta = _NO_DELTA
    pos = 0
    for i in range(count):
        start = pos
        length, pos = varint(body, pos)
        if pos - start > _VARINT_MAX_BYTES:
            raise _LongLength(f"record {i}'s length is a varint of {pos - start} bytes")
        if length < 0:
            raise _NegativeLength(f"record {i}'s length is {length}")
        end = pos + length
        delta, pos = varint(body, pos + 1)  # attributes, timestamp delta
        max_delta = max(max_delta, delta)
        _, pos = varint(body, pos)  # offset delta
        key_length, pos = varint(body, pos)
        if key_length >= 0:
            pos += key_length
        elif keyless < 0:
            keyless = i
        value_length, pos = varint(body, pos)
        if value_length > 0:
            pos += value_length
        headers, pos = varint(body, pos)
        if headers < 0:
            raise ValueError(f"a header count of {headers}")
        for _ in range(headers):
            header_key_length, pos = varint(body, pos)
            if header_key_length < 0:
                raise ValueError("a header without a key")
            header_value_length, pos = varint(body, pos + header_key_length)
            if header_value_length > 0:
                pos += header_value_length
        if pos != end:
            raise ValueError(f"record {i}'s length {length} does not match its fields")
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes after the last of {count} records")
    return keyless, max_delta


#: a record's fields take 6 bytes at least (attributes, and five varints of a byte)
_MIN_RECORD: Final = 6


#: below any timestamp delta (a 64-bit varint): the largest of no record
_NO_DELTA: Final = -(2**64)


def _walk_lengths(body: bytes | memoryview, count: int) -> int:
    """Walk ``count`` records of a records body by their lengths, reading each one's
    timestamp delta too (after its attributes byte): the largest delta (``_NO_DELTA``: no
    record), for the batch's maxTimestamp. ValueError or IndexError if a record is
    shorter than a record's fields or runs past the body, its delta does not parse or
    ends past it, or bytes follow the last. A length of one or two bytes (a record
    under 8 KB) and a delta of one or two (under 8 s) are read here, the rarer longer
    ones by ``decode_varint`` (docs/storage.md, Appends: what the delta costs)."""
    pos = 0
    max_delta = _NO_DELTA
    for i in range(count):
        first = body[pos]
        if first < 0x80:
            zigzag = first
            pos += 1
        elif body[pos + 1] < 0x80:
            zigzag = (first & 0x7F) | body[pos + 1] << 7
            pos += 2
        else:
            length, end = decode_varint(body, pos)
            if end - pos > _VARINT_MAX_BYTES:
                raise _LongLength(f"record {i}'s length is a varint of {end - pos} bytes")
            pos = end
            zigzag = length << 1 if length >= 0 else 1
        length = zigzag >> 1
        if zigzag & 1 or length < _MIN_RECORD:  # odd: a negative length
            raise ValueError(f"record {i}'s length is below the {_MIN_RECORD} bytes of its fields")
        first = body[pos + 1]  # the delta's first byte, after the attributes
        if first < 0x80:
            delta = (first >> 1) ^ -(first & 1)
        elif body[pos + 2] < 0x80:
            zigzag = (first & 0x7F) | body[pos + 2] << 7
            delta = (zigzag >> 1) ^ -(zigzag & 1)
        else:
            delta, end = decode_varint(body, pos + 1)
            if end > pos + length:
                raise ValueError(f"record {i}'s timestamp delta runs past its length")
        if delta > max_delta:  # noqa: PLR1730 (a call to max() costs more, per record)
            max_delta = delta
        pos += length
    if pos != len(body):
        raise ValueError(f"the lengths of {count} records add up to {pos} bytes, not {len(body)}")
    return max_delta


def check_records(
    body: bytes | memoryview,
    count: int,
    *,
    position: int,
    offset: int | None = None,
    lengths_only: bool = False,
) -> int:
    """That a batch's records body (decompressed) holds ``count`` records that parse and
    nothing after them, as Kafka's LogValidator reads every record of a producer's
    batch: InvalidRecordError otherwise (Kafka's InvalidRecordException). Returns the
    index of the first record without a key (-1: none), for a compacted topic.

    ``lengths_only``: each record's length alone is read (and its timestamp delta), and
    the lengths must fill the body exactly (-1 returned): a record's fields are not, at
    a seventh of the cost (docs/storage.md, Appends)."""
    return _checked_records(body, count, position, offset, lengths_only)[0]


def _checked_records(
    body: bytes | memoryview,
    count: int,
    position: int,
    offset: int | None,
    lengths_only: bool,
    *,
    stream: bool = False,
) -> tuple[int, int]:
    """``check_records``' answer, and the records' largest timestamp delta. ``stream``:
    the body was decompressed, and Kafka would read it as a stream (see
    UnreadableRecordLengthError)."""
    try:
        if lengths_only:
            return -1, _walk_lengths(body, count)
        return _walk_records(body, count)
    except _LongLength as e:
        raise UnreadableRecordLengthError(
            f"the batch's records cannot be read: {e}", position=position, offset=offset
        ) from None
    except _NegativeLength as e:
        if stream:
            raise UnreadableRecordLengthError(
                f"the batch's records cannot be read: {e}", position=position, offset=offset
            ) from None
        raise InvalidRecordError(
            f"the batch's records do not parse: {e}", position=position, offset=offset
        ) from None
    except (IndexError, ValueError) as e:  # IndexError: past the body's end
        raise InvalidRecordError(
            f"the batch's records do not parse: {e}", position=position, offset=offset
        ) from None


def validate_follower_batches(
    buf: bytes | bytearray | memoryview,
    expected_first_offset: int,
    *,
    max_batch_size: int | None = None,
) -> BatchesInfo:
    """The follower's path: batches already carry the leader's offsets and epochs.

    Checks each batch (length, magic, CRC) and that the offsets go on from the log's: no
    batch starts below ``expected_first_offset`` or below the end of the batch before it
    (UnexpectedAppendOffsetError otherwise). Gaps are allowed, as Kafka's follower allows
    them: a compacted log's leader has dropped whole batches. An incomplete trailing batch
    (a fetch response cut at its size limit) is left out, as Kafka does: ``info.size``
    says how many bytes to write. An empty blob gives an empty info.
    """
    view = memoryview(buf)
    found, end = _scan(view, max_batch_size=max_batch_size, producer=False)
    headers = [_header(pos, fields) for pos, fields in found]
    expected = expected_first_offset
    max_ts = NO_TIMESTAMP
    offset_of_max_ts = -1
    records = 0
    for header in headers:
        if header.base_offset < expected:
            reason = (
                "the first batch starts below the log end offset"
                if header.position == 0
                else f"the batch at position {header.position} starts inside the previous"
            )
            raise UnexpectedAppendOffsetError(reason, expected=expected, found=header.base_offset)
        expected = header.next_offset
        records += header.record_count
        if header.max_timestamp > max_ts:
            max_ts = header.max_timestamp
            offset_of_max_ts = header.last_offset
    return BatchesInfo(
        headers[0].base_offset if headers else expected_first_offset,
        expected - 1,
        records,
        max_ts,
        offset_of_max_ts,
        end,
        tuple(headers),
        NO_TIMESTAMP,
    )


def iter_batches(buf: bytes | bytearray | memoryview) -> Iterator[BatchHeader]:
    """The headers of the whole batches in a blob, validated (length, magic, CRC); an
    incomplete trailing batch is skipped, as a consumer would."""
    found, _ = _scan(memoryview(buf), max_batch_size=None, producer=False)
    return iter([_header(pos, fields) for pos, fields in found])


def producer_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """The headers of the whole batches of a producer's records, validated (length,
    magic, CRC) and read as ``assign_offsets`` reads them: an incomplete trailing entry
    left out, one with a bad size field or magic CorruptRecordError (``entry_size``)."""
    found, _ = _scan(memoryview(buf), max_batch_size=None, producer=True)
    return [_header(pos, fields) for pos, fields in found]


# --------------------------------------------------------------------------- records


class Record(NamedTuple):
    """One record, with its absolute offset and timestamp (LogAppendTime batches give
    every record the batch's maxTimestamp, as consumers see it)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint (protobuf's sint64) at ``pos``: (value, next position)."""
    first = buf[pos]
    if first < 0x80:  # one byte: most of a record's lengths and deltas
        return (first >> 1) ^ -(first & 1), pos + 1
    shift = 0
    raw = 0
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
    if raw > 0xFFFFFFFFFFFFFFFF:
        # A tenth byte above 0x01: bits past 64, which Kafka's long overflows.
        raise ValueError("varint beyond 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def _bytes_field(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        return None, pos
    return bytes(buf[pos : pos + length]), pos + length


def _read_record(
    body: bytes, pos: int
) -> tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]:
    """The record at ``pos``: (timestamp delta, offset delta, key, value, headers, where
    it ends). ValueError or IndexError (past the body's end) if it does not parse."""
    length, pos = decode_varint(body, pos)
    end = pos + length
    pos += 1  # attributes
    ts_delta, pos = decode_varint(body, pos)
    offset_delta, pos = decode_varint(body, pos)
    key, pos = _bytes_field(body, pos)
    value, pos = _bytes_field(body, pos)
    count, pos = decode_varint(body, pos)
    if count < 0:
        raise ValueError(f"a header count of {count}")
    hdrs: list[tuple[str, bytes | None]] = []
    for _h in range(count):
        hkey, pos = _bytes_field(body, pos)
        if hkey is None:
            raise ValueError("a header without a key")
        hvalue, pos = _bytes_field(body, pos)
        hdrs.append((hkey.decode(errors="replace"), hvalue))
    if pos != end:
        raise ValueError(f"record length {length} does not match its fields")
    return ts_delta, offset_delta, key, value, tuple(hdrs), pos


def iter_records(
    batch: bytes | bytearray | memoryview, *, max_size: int = codecs.MAX_SIZE
) -> Iterator[Record]:
    """Decode the records of one batch (the bytes of exactly one batch).

    Every codec's batches are decoded (``storage.codecs``; a body that is not a valid
    stream of its codec raises DecompressionError, a CorruptRecordError, one
    decompressing to more than ``max_size`` bytes DecompressedTooLargeError); attributes
    naming no codec (5-7)
    raise UnsupportedCodecError, a NotImplementedError (the append and read paths never
    need to decompress). A record that does not parse (fields past its length or the
    body's end, a varint over 10 bytes, a negative header count, a header without a key,
    bytes left after the last record) raises InvalidRecordError, a CorruptRecordError,
    as Kafka's DefaultRecord.readFrom throws InvalidRecordException; a header key that
    is not UTF-8 is decoded with replacement characters, as Java's String does.
    """
    header = read_header(batch)
    body = decompressed(batch, header, max_size)
    pos = 0
    for i in range(header.record_count):
        try:
            ts_delta, offset_delta, key, value, hdrs, pos = _read_record(body, pos)
        except (IndexError, ValueError) as e:  # IndexError: past the body's end
            raise InvalidRecordError(
                f"record {i} does not parse: {e}",
                position=header.position,
                offset=header.base_offset,
            ) from None
        if i == header.record_count - 1 and pos != len(body):
            # Kafka's "Incorrect declared batch size, records still remaining"
            raise InvalidRecordError(
                f"{len(body) - pos} bytes after the last record",
                position=header.position,
                offset=header.base_offset,
            )
        timestamp = (
            header.max_timestamp
            if header.is_log_append_time
            else as_int64(header.base_timestamp + ts_delta)
        )
        yield Record(header.base_offset + offset_delta, timestamp, key, value, hdrs)


# --------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class RecordSpec:
    """One record to encode; ``timestamp`` None: the batch's base timestamp."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (protobuf sint64), as record fields use."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode_bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def _encode_record(offset_delta: int, timestamp_delta: int, record: RecordSpec) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    body += _encode_bytes_field(record.key)
    body += _encode_bytes_field(record.value)
    body += encode_varint(len(record.headers))
    for name, value in record.headers:
        body += _encode_bytes_field(name.encode())
        body += _encode_bytes_field(value)
    return encode_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[RecordSpec | bytes],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    compression: int = Compression.NONE,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytearray:
    """One record batch holding ``records`` (bytes are values), as a bytearray.

    ``base_timestamp`` None: now. Compressed batches are real streams of their codec
    (``storage.codecs.compress``); a ``compression`` naming no codec (5-7) carries the
    uncompressed record bytes under those attribute bits, which only tests of the
    storage layer's pass-through of batches it cannot read want. No check is made of the
    arguments (tests build invalid batches on purpose, e.g. ``magic``).
    """
    specs = [r if isinstance(r, RecordSpec) else RecordSpec(r) for r in records]
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    encoded = bytearray()
    max_ts = base_timestamp if not specs else -1
    for delta, spec in enumerate(specs):
        ts = base_timestamp if spec.timestamp is None else spec.timestamp
        max_ts = max(max_ts, ts)
        encoded += _encode_record(delta, as_int64(ts - base_timestamp), spec)
    payload: bytes = bytes(encoded)
    if codecs.readable(compression):
        payload = codecs.compress(compression, payload)
    attributes = compression
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    last_offset_delta = max(len(specs) - 1, 0)
    batch = bytearray(BATCH_HEADER_SIZE) + payload
    _HEADER.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        magic,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(specs),
    )
    _UINT32.pack_into(batch, CRC_OFFSET, batch_crc(batch))
    return batch
