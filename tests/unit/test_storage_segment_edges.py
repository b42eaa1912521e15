"""LogSegment on its own (Kafka 2.8's LogSegment.scala): what an append, a truncation
and a recovery leave in the segment's memory and files."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from storage.errors import CorruptRecordError, OffsetOverflowError
from storage.records import BATCH_HEADER_SIZE, build_batch, iter_batches
from storage.segment import LogSegment
from tests.unit.test_storage_log import Clock, open_log

NOW = 1_700_000_000_000


def new_segment(
    directory: Path, base: int = 0, interval: int = 4096, max_index_bytes: int = 1 << 20
) -> LogSegment:
    return LogSegment.create(
        directory,
        base,
        index_interval_bytes=interval,
        max_index_bytes=max_index_bytes,
        new_directory=True,
    )


def reopened(segment: LogSegment) -> LogSegment:
    segment.close()
    return LogSegment(
        segment.directory,
        segment.base_offset,
        index_interval_bytes=segment.index_interval_bytes,
        max_index_bytes=1 << 20,
    )


def batch(offset: int, *, count: int = 1, ts: int = NOW, epoch: int = 0) -> bytearray:
    return build_batch(
        [b"v%d" % i for i in range(count)],
        base_offset=offset,
        base_timestamp=ts,
        partition_leader_epoch=epoch,
    )


def append(segment: LogSegment, *batches: bytearray) -> None:
    data = b"".join(batches)
    segment.append(memoryview(data), tuple(iter_batches(data)))


def test_a_batch_below_the_segments_base_is_refused_before_a_byte_is_written(
    tmp_path: Path,
) -> None:
    # Kafka 2.8's LogSegment.ensureOffsetInRange: an offset below the base has no
    # relative offset an index entry could hold.
    segment = new_segment(tmp_path, 10)
    with pytest.raises(OffsetOverflowError):
        append(segment, batch(5))
    assert segment.size == 0
    append(segment, batch(10))
    assert segment.next_offset() == 11
    segment.close()


def test_the_rolling_timestamp_is_the_first_batchs_as_a_reopen_reads_it(
    tmp_path: Path,
) -> None:
    # segment.ms counts from the first batch's maxTimestamp (Kafka 2.8's
    # loadFirstBatchTimestamp on a segment it opens): a follower's append of several
    # batches into an empty segment gives the same time as reading them back.
    segment = new_segment(tmp_path)
    append(segment, batch(0, ts=NOW), batch(1, ts=NOW + 5_000))
    assert segment.rolling_timestamp() == NOW
    segment = reopened(segment)
    assert segment.rolling_timestamp() == NOW
    segment.close()


def test_a_failed_write_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = new_segment(tmp_path)
    append(segment, batch(0))
    size = segment.size
    real_write = os.write

    def half_then_full_disk(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full_disk)
    with pytest.raises(OSError, match="No space"):
        append(segment, batch(1))
    monkeypatch.setattr(os, "write", real_write)
    assert segment.size == size == os.path.getsize(segment.path)
    append(segment, batch(1))
    assert segment.next_offset() == 2
    segment.close()


def test_a_timestamp_of_zero_is_a_timestamp(tmp_path: Path) -> None:
    # Only NO_TIMESTAMP (-1) is none: Kafka 2.8's largestTimestamp takes the file's
    # modification time when maxTimestampSoFar < 0, and a roll's maybeAppend writes any
    # timestamp above the empty time index's -1.
    segment = new_segment(tmp_path)
    append(segment, batch(0, ts=0), batch(1, ts=0))
    assert segment.largest_timestamp() == 0
    segment.on_become_inactive()
    assert segment.time_index.entries == 1
    assert segment.time_index.last_entry == (0, 0)
    segment.close()


def test_a_roll_writes_the_largest_timestamp_into_a_full_time_index(tmp_path: Path) -> None:
    # Kafka 2.8's onBecomeInactiveSegment: maybeAppend(..., skipFullCheck = true), into
    # the slot TimeIndex.isFull keeps for it.
    segment = new_segment(tmp_path, interval=0, max_index_bytes=24)  # two time entries
    append(segment, batch(0, ts=NOW), batch(1, ts=NOW + 1))
    assert segment.time_index.is_full  # (NOW + 1, 1) took the one slot it gives
    append(segment, batch(2, ts=NOW + 2))
    assert segment.time_index.entries == 1
    segment.on_become_inactive()
    assert segment.time_index.entries == 2
    assert segment.time_index.last_entry == (NOW + 2, 2)
    segment.close()


def test_a_truncation_returns_the_bytes_it_cut(tmp_path: Path) -> None:
    # Kafka 2.8's LogSegment.truncateTo returns log.truncateTo's bytes truncated; a batch
    # straddling the offset goes whole, and an offset past the end cuts nothing.
    segment = new_segment(tmp_path)
    first, second, third = batch(0), batch(1, count=3), batch(4)
    append(segment, first, second, third)
    assert segment.truncate_to(5) == 0
    assert segment.truncate_to(2) == len(second) + len(third)
    assert segment.size == os.path.getsize(segment.path) == len(first)
    assert segment.next_offset() == 1
    assert segment.truncate_to(0) == len(first)
    assert segment.size == 0
    assert segment.rolling_timestamp() is None  # rollingBasedTimestamp = None
    segment.close()


def test_after_a_truncation_the_index_interval_counts_from_zero(tmp_path: Path) -> None:
    # Kafka 2.8's truncateTo: bytesSinceLastIndexEntry = 0, so the batches written again
    # are indexed as a recovery of the segment indexes them.
    first = batch(0)
    segment = new_segment(tmp_path, interval=len(first) * 3 // 2)
    append(segment, first, batch(1))
    segment.truncate_to(1)
    append(segment, batch(1))
    assert segment.offset_index.entries == 0
    segment.recover(None)
    assert segment.offset_index.entries == 0
    segment.close()


def test_the_largest_timestamp_after_a_truncation_is_at_its_first_batch(
    tmp_path: Path,
) -> None:
    # Kafka 2.8's loadLargestTimestamp (FileRecords.largestTimestampAfter): a later batch
    # takes over only with a larger timestamp, as an append's and a recovery's scans.
    segment = new_segment(tmp_path)
    append(segment, batch(0, ts=NOW), batch(1, ts=NOW + 7), batch(2, ts=NOW + 7))
    append(segment, batch(3, ts=NOW + 9))
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (NOW + 9, 3)
    segment.truncate_to(3)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (NOW + 7, 1)
    segment.recover(None)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (NOW + 7, 1)
    segment.close()


def test_a_recovery_finds_each_epoch_where_it_rose(tmp_path: Path) -> None:
    # Kafka 2.8's LogSegment.recover: cache.assign(epoch, baseOffset) when the batch's
    # epoch is above the cache's latest (latestEpoch.forall(epoch > _)), never again
    # for a batch of the same epoch.
    segment = new_segment(tmp_path)
    append(segment, batch(0, epoch=0), batch(1, epoch=0), batch(2, epoch=3), batch(3, epoch=3))
    assert segment.recover(None).epoch_starts == ((0, 0), (3, 2))
    assert segment.recover(0).epoch_starts == ((3, 2),)
    assert segment.recover(3).epoch_starts == ()
    segment.close()


def test_a_recovery_cuts_at_a_batch_shorter_than_a_batch_header(tmp_path: Path) -> None:
    # Kafka 2.8's DefaultRecordBatch.ensureValid: sizeInBytes < RECORD_BATCH_OVERHEAD is
    # a CorruptRecordException, whatever the bytes after it. Here a 21-byte "batch"
    # (length 9) whose CRC-32C over no bytes is right, and magic 2.
    segment = new_segment(tmp_path)
    append(segment, batch(0))
    valid = segment.size
    segment.close()
    garbage = struct.pack(">qiibI", 1, 9, 0, 2, 0) + bytes(40)
    with open(segment.path, "ab") as file:
        file.write(garbage)
    segment = reopened(segment)
    recovered = segment.recover(None)
    assert (recovered.valid_bytes, recovered.truncated_bytes) == (valid, len(garbage))
    assert recovered.next_offset == 1
    assert recovered.reason is not None
    assert "batch length 9" in recovered.reason
    segment.close()


def test_a_recovery_keeps_the_last_offset_a_segment_can_index(tmp_path: Path) -> None:
    # Kafka 2.8's canConvertToRelativeOffset: offset - baseOffset <= Int.MaxValue, so a
    # compacted segment's batch at base + 2**31 - 1 is kept by a recovery.
    segment = new_segment(tmp_path, 10)
    append(segment, batch(10), batch(10 + 2**31 - 1))
    size = segment.size
    recovered = segment.recover(None)
    assert (recovered.valid_bytes, recovered.truncated_bytes) == (size, 0)
    assert recovered.next_offset == 10 + 2**31
    segment.close()


def test_a_read_finds_a_batch_shorter_than_a_batch_header_corrupt(tmp_path: Path) -> None:
    # As a recovery: a batch length below the batch overhead is damage where it starts,
    # not a batch to step over.
    segment = new_segment(tmp_path)
    append(segment, batch(0))
    valid = segment.size
    segment.close()
    with open(segment.path, "ab") as file:
        file.write(struct.pack(">qiibI", 1, 9, 0, 2, 0) + bytes(40))
    segment = reopened(segment)
    with pytest.raises(CorruptRecordError, match="batch length 9") as raised:
        list(segment.headers(0, segment.size))
    assert raised.value.position == valid
    segment.close()


def test_an_empty_time_index_beside_timestamps_of_zero_is_a_problem(tmp_path: Path) -> None:
    # A close writes the largest timestamp into the time index (as a roll does), so an
    # empty one beside batches with timestamps, 0 among them, is damage to rebuild.
    segment = new_segment(tmp_path)
    append(segment, batch(0, ts=0))
    segment.on_become_inactive()
    segment.flush()
    assert segment.index_problem() is None
    time_index_path = segment.time_index.path
    segment.close()
    os.truncate(time_index_path, 0)
    segment = reopened(segment)
    problem = segment.index_problem()
    assert problem is not None
    assert "empty beside batches with timestamps" in problem
    segment.close()


def test_a_recovery_takes_the_largest_timestamp_at_its_batchs_last_offset(
    tmp_path: Path,
) -> None:
    # Kafka 2.8's recover: TimestampOffset(batch.maxTimestamp, batch.lastOffset), then
    # the time index entry a roll writes.
    segment = new_segment(tmp_path)
    append(segment, batch(0, count=3, ts=NOW), batch(3, count=2, ts=NOW - 1))
    segment.recover(None)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (NOW, 2)
    assert segment.time_index.last_entry == (NOW, 2)
    segment.close()


def test_a_recovery_cuts_at_a_batch_overlapping_the_one_before(tmp_path: Path) -> None:
    # Offsets only grow (a compacted log's gaps aside): a batch whose first offset is the
    # last offset of the batch before is out of order.
    segment = new_segment(tmp_path)
    first = batch(0, count=3)
    append(segment, first)
    append(segment, batch(3))
    segment.close()
    with open(segment.path, "ab") as file:
        file.write(batch(3))
    segment = reopened(segment)
    recovered = segment.recover(None)
    assert recovered.valid_bytes == len(first) + len(batch(3))
    assert recovered.next_offset == 4
    segment.close()


def test_an_index_entry_at_a_batch_cut_short_is_a_problem(tmp_path: Path) -> None:
    # The file lost its last batch's end (an unclean shutdown) while the index entry for
    # that batch was written: the indexes are rebuilt, not trusted.
    segment = new_segment(tmp_path, interval=0)
    append(segment, batch(0, count=5), batch(5, count=5), batch(10, count=5))
    entry = segment.offset_index.last_entry
    assert entry.offset == 14
    segment.flush()
    segment.close()
    os.truncate(segment.path, entry.position + BATCH_HEADER_SIZE + 1)
    segment = reopened(segment)
    problem = segment.index_problem()
    assert problem is not None
    assert "running past the log's end" in problem
    segment.close()


def test_a_segment_cut_to_nothing_counts_segment_ms_from_the_cut(tmp_path: Path) -> None:
    # Kafka 2.8's LogSegment.truncateTo: if (log.sizeInBytes == 0) { created =
    # time.milliseconds; rollingBasedTimestamp = None }.
    segment = LogSegment.create(
        tmp_path,
        0,
        index_interval_bytes=4096,
        max_index_bytes=1 << 20,
        now_ms=NOW - 3_600_000,
        new_directory=True,
    )
    append(segment, batch(0, ts=NOW - 3_600_000))
    segment.truncate_to(1, now_ms=NOW)  # cuts nothing
    assert segment.created_ms == NOW - 3_600_000
    segment.truncate_to(0, now_ms=NOW)
    assert (segment.created_ms, segment.rolling_timestamp()) == (NOW, None)
    segment.close()


def test_batches_without_timestamps_after_a_cut_to_an_empty_segment_roll_on_time(
    tmp_path: Path,
) -> None:
    # Batches with no timestamp (-1) roll on time since the segment's creation (Kafka
    # 2.8's timeWaitedForRoll: now - created), and a follower's truncation that empties
    # its active segment makes it as new.
    clock = Clock(NOW)
    log = open_log(tmp_path / "t-0", clock, segment_ms=3_600_000)
    log.append_as_follower(batch(0, ts=-1))
    log.roll()
    log.append_as_follower(batch(1, ts=-1))
    clock.now += 2 * 3_600_000
    assert log.truncate_to(1)
    assert log.segment_base_offsets() == [0, 1]
    log.append_as_follower(batch(1, ts=-1))
    log.append_as_follower(batch(2, ts=-1))  # an hour has not passed since the cut
    assert log.segment_base_offsets() == [0, 1]
    clock.now += 3_600_001
    log.append_as_follower(batch(3, ts=-1))
    assert log.segment_base_offsets() == [0, 1, 3]
    log.close()


def test_a_segment_marked_for_deletion_renames_all_three_files(tmp_path: Path) -> None:
    # Kafka 2.8's LogSegment.changeFileSuffixes("", Log.DeletedFileSuffix): the log and
    # each index.
    segment = new_segment(tmp_path)
    append(segment, batch(0))
    segment.rename_to_deleted()
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000000.index.deleted",
        "00000000000000000000.log.deleted",
        "00000000000000000000.timeindex.deleted",
    ]
    assert segment.deleted
    segment.close_and_remove()
    assert os.listdir(tmp_path) == []


def test_a_segment_whose_indexes_were_lost_is_trusted_once_recovered(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    append(segment, batch(0), batch(1))
    segment.flush()
    index_path, time_index_path = segment.offset_index.path, segment.time_index.path
    segment.close()
    os.unlink(index_path)
    os.unlink(time_index_path)
    segment = reopened(segment)
    problem = segment.index_problem()
    assert problem is not None
    assert "index files missing" in problem
    assert segment.recover(None).next_offset == 2
    assert segment.index_problem() is None
    segment.close()


def test_a_closed_segment_never_opened_cannot_be_flushed(tmp_path: Path) -> None:
    segment = new_segment(tmp_path)
    segment.close()
    with pytest.raises(OSError, match="closed"):
        segment.flush()
