"""The storage layer's exceptions, each carrying the Kafka error code a broker answers with.

The codes are Kafka's (``org.apache.kafka.common.protocol.Errors``); they are repeated here
as plain ints so that ``storage`` depends on nothing of the broker's (a unit test checks
them against ``wire.errors.ErrorCode``). A broker maps any of these with
``ErrorCode(exc.error_code)``.

An append that raises has appended nothing: validation runs over the whole request before
a byte is written, and a failed write is cut back off the segment.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "CheckpointError",
    "CorruptRecordError",
    "DecompressedTooLargeError",
    "DecompressionError",
    "FencedLeaderEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LogDirLockedError",
    "OffsetOutOfRangeError",
    "OffsetOverflowError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
    "UnknownCompressionError",
    "UnreadableRecordLengthError",
    "UnsupportedMagicError",
]


class StorageError(Exception):
    """Base class. ``error_code`` is the Kafka error code for a response."""

    error_code: ClassVar[int] = -1  # UNKNOWN_SERVER_ERROR


class CorruptRecordError(StorageError):
    """A record batch failed validation: bad length, CRC mismatch, bad header field.

    ``position`` is the byte position in the records blob (or segment file) where the bad
    batch starts; ``offset`` its base offset when it could be read, else None.
    """

    error_code = 2  # CORRUPT_MESSAGE

    def __init__(self, reason: str, *, position: int, offset: int | None = None) -> None:
        self.reason = reason
        self.position = position
        self.offset = offset
        where = f"position {position}" + ("" if offset is None else f" (offset {offset})")
        super().__init__(f"corrupt record batch at {where}: {reason}")


class UnsupportedMagicError(CorruptRecordError):
    """A batch is not of magic 2 (message format v0/v1 is not supported)."""

    error_code = 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT

    def __init__(self, magic: int, *, position: int, offset: int | None = None) -> None:
        self.magic = magic
        super().__init__(
            f"magic {magic} is not supported (only record batch v2, magic 2, is)",
            position=position,
            offset=offset,
        )


class DecompressedTooLargeError(CorruptRecordError):
    """A compressed batch whose records, decompressed, are more than the broker reads of
    one batch (``records.max_decompressed_bytes``). MESSAGE_TOO_LARGE, which Kafka's Java
    producer answers by splitting the batch and sending its halves again."""

    error_code = 10  # MESSAGE_TOO_LARGE


class DecompressionError(CorruptRecordError):
    """A compressed batch whose records body is not a valid stream of its codec (its CRC
    right: the producer's bug). Kafka 2.8 wraps the codec's IOException in KafkaException
    ("Failed to decompress record stream": CompressionType.wrapForInput,
    DefaultRecordBatch.StreamRecordIterator), which appendToLocalLog answers
    UNKNOWN_SERVER_ERROR, a final error for producers: CORRUPT_MESSAGE is retriable, and
    librdkafka sent the same batch again until its message.timeout.ms. A
    CorruptRecordError still for the readers that skip a batch that does not decode
    (the cleaner, ListOffsets, the group coordinator)."""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class UnreadableRecordLengthError(CorruptRecordError):
    """A producer's record whose length Kafka 2.8's readers throw IllegalArgumentException
    for, outside the try that makes their other failures InvalidRecordException, which
    appendToLocalLog answers UNKNOWN_SERVER_ERROR: a length varint whose fifth byte says
    more follow (ByteUtils.readVarint, in every reader of a record), or a negative length
    in a compressed batch the leader compresses again (a topic's ``compression.type``
    naming another codec: LogValidator's streamingIterator, whose
    DefaultRecord.readFrom(DataInput) allocates a buffer of that length). (A compressed
    batch kept in its codec is read by skipKeyValueIterator, which finds no bytes to read
    for a negative length: InvalidRecordException, INVALID_RECORD, as InvalidRecordError
    here.)"""

    error_code = -1  # UNKNOWN_SERVER_ERROR


class InvalidRecordError(CorruptRecordError):
    """A well-formed batch a client may not send (base offset not 0, count inconsistent
    with the offset range, a control batch, a producer id without a sequence, records
    without a key in a compacted topic). ``keyless``: the index in its batch of each
    record without a key a compacted topic refused (Kafka's RecordError batchIndex, one
    for each such record: LogValidator.validateKey), empty for the other refusals."""

    error_code = 87  # INVALID_RECORD

    def __init__(
        self,
        reason: str,
        *,
        position: int,
        offset: int | None = None,
        keyless: tuple[int, ...] = (),
    ) -> None:
        super().__init__(reason, position=position, offset=offset)
        self.keyless = keyless


class RecordTooLargeError(StorageError):
    """A batch is larger than the topic's ``max.message.bytes``."""

    error_code = 10  # MESSAGE_TOO_LARGE

    def __init__(self, size: int, limit: int, *, position: int) -> None:
        self.size = size
        self.limit = limit
        self.position = position
        super().__init__(
            f"record batch at position {position} is {size} bytes, larger than"
            f" max.message.bytes {limit}"
        )


class RecordBatchTooLargeError(StorageError):
    """A producer's batches larger than the topic's ``segment.bytes``: Kafka 2.8's
    Log.append refuses them (RecordBatchTooLargeException) rather than write a segment
    past its size. A final error for the Java producer, which does not split them."""

    error_code = 18  # RECORD_LIST_TOO_LARGE


class InvalidTimestampError(StorageError):
    """A CreateTime batch's timestamps are further from the broker's clock than
    ``message.timestamp.difference.max.ms``, or a producer's batch claims LogAppendTime.
    ``record_errors``: ``(batch index, message)`` of each record out of range (Kafka's
    RecordError, LogValidator.validateTimestamp), empty where no record is named."""

    error_code = 32  # INVALID_TIMESTAMP

    def __init__(self, reason: str, *, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        self.record_errors = record_errors
        super().__init__(reason)


class UnknownCompressionError(StorageError):
    """A producer's batch whose attributes name no compression codec (ids 5-7). Kafka
    2.8's CompressionType.forId throws IllegalArgumentException for them, which
    appendToLocalLog answers UNKNOWN_SERVER_ERROR (a final error for its producers, where
    CORRUPT_MESSAGE would have the Java producer send the batch again until its delivery
    timeout). Only the leader's path refuses it: a batch already in a log is read
    around (docs/storage.md)."""

    error_code = -1  # UNKNOWN_SERVER_ERROR

    def __init__(self, codec: int, *, position: int) -> None:
        self.codec = codec
        self.position = position
        super().__init__(
            f"the batch at position {position} names compression codec {codec}, which is"
            " none (0-4: none, gzip, snappy, lz4, zstd)"
        )


class OffsetOutOfRangeError(StorageError):
    """A read (or truncation) asked for an offset outside [log start, log end]."""

    error_code = 1  # OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose batches do not continue the log exactly (the first base
    offset must be the log end offset, each next batch must follow the previous one).

    Kafka raises UnexpectedAppendOffsetException here, which no response carries: the
    replica fetcher handles it (truncate and fetch again)."""

    error_code = -1

    def __init__(self, reason: str, *, expected: int, found: int) -> None:
        self.expected = expected
        self.found = found
        super().__init__(f"{reason}: expected offset {expected}, found {found}")


class OffsetOverflowError(StorageError):
    """An offset a segment cannot hold: its indexes keep offsets as 32-bit offsets
    relative to its base, so it holds offsets from its base to base + 2**31 - 1 (Kafka's
    LogSegmentOffsetOverflowException and IndexOffsetOverflowException). Rolls keep every
    append within that; this refuses one that would not be, before anything is written,
    instead of a bare ``struct.error`` from the index."""

    error_code = -1  # UNKNOWN_SERVER_ERROR, as for Kafka's KafkaException


class FencedLeaderEpochError(StorageError):
    """An append as leader with a leader epoch older than the log's latest epoch."""

    error_code = 74  # FENCED_LEADER_EPOCH


class KafkaStorageError(StorageError):
    """An I/O error in a log directory (disk full, permission, device gone)."""

    error_code = 56  # KAFKA_STORAGE_ERROR


class CheckpointError(StorageError):
    """A checkpoint file is malformed (named in the message with the bad line)."""


class LogDirLockedError(StorageError):
    """Another process holds the log directory's ``.lock``."""
