"""Partition logs on disk: Kafka's log layer (segments, indexes, recovery, retention,
the leader epoch cache), for the brokers' data plane. ``docs/storage.md`` describes the
on-disk layout, recovery and the durability policy.

* ``storage.records``: record batch v2 validation, in-place offset assignment, parsing.
* ``storage.log``: ``PartitionLog``, one partition's segments.
* ``storage.log_manager``: ``LogManager``, every log of a broker across its log.dirs.
* ``storage.epoch_cache``: the leader epoch cache (KIP-101).
* ``storage.testing``: legacy message sets for refusal tests, and the batch builder
  (``storage.records.build_batch``) under the names tests and benchmarks import.
"""

from storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from storage.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
    UnsupportedMagicError,
)
from storage.log import (
    AppendInfo,
    LogConfig,
    PartitionLog,
    ReadInfo,
    RecoveryReport,
    TimestampOffset,
)
from storage.log_manager import LogManager
from storage.records import BatchesInfo, BatchHeader, assign_offsets, iter_batches, iter_records
from storage.segment import FileRegion

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "BatchHeader",
    "BatchesInfo",
    "CorruptRecordError",
    "FencedLeaderEpochError",
    "FileRegion",
    "InvalidRecordError",
    "InvalidTimestampError",
    "KafkaStorageError",
    "LeaderEpochCache",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadInfo",
    "RecordTooLargeError",
    "RecoveryReport",
    "StorageError",
    "TimestampOffset",
    "UnexpectedAppendOffsetError",
    "UnsupportedMagicError",
    "assign_offsets",
    "iter_batches",
    "iter_records",
]
