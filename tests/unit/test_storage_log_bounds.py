"""PartitionLog at its boundaries: the exact sizes, offsets and times where Kafka 2.8's
kafka.log.Log changes its answer (an append's size against segment.bytes, a roll, a
read's limits, retention, truncation, the log start offset)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage.errors import OffsetOverflowError, RecordBatchTooLargeError
from storage.log import PartitionLog
from storage.testing import RecordSpec, build_batch
from tests.unit.test_storage_log import NOW, Clock, open_log

FAR = 3_000_000_000


def batch(size: int = 100, count: int = 1, ts: int = NOW) -> bytearray:
    return bytearray(build_batch([b"v" * size] * count, base_timestamp=ts))


def test_an_append_of_exactly_segment_bytes_is_taken_one_byte_more_refused(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's Log.append: RecordBatchTooLargeException only when the batches'
    size is more than segment.bytes; exactly segment.bytes fits a segment."""
    size = len(batch())
    exact = open_log(tmp_path / "t-0", segment_bytes=size)
    assert exact.append_as_leader(batch(), 0).first_offset == 0
    assert exact.log_end_offset == 1
    short = open_log(tmp_path / "t-1", segment_bytes=size - 1)
    with pytest.raises(RecordBatchTooLargeError):
        short.append_as_leader(batch(), 0)
    assert short.log_end_offset == 0


def far_batch(offset: int) -> bytearray:
    return bytearray(build_batch([b"v"], base_offset=offset, base_timestamp=NOW))


def test_a_follower_append_may_span_2_to_the_31_offsets_less_one_not_2_to_the_31(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's LogSegment.ensureOffsetInRange: a segment holds offsets up to
    2**31 - 1 above its base. Batches spanning exactly that share a new segment at their
    first offset; one offset more are refused before anything rolls."""
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(far_batch(0))
    with pytest.raises(OffsetOverflowError):
        log.append_as_follower(far_batch(1) + far_batch(1 + 2**31))
    assert (log.log_end_offset, log.segment_base_offsets()) == (1, [0])
    log.append_as_follower(far_batch(1) + far_batch(2**31))
    assert (log.log_end_offset, log.segment_base_offsets()) == (2**31 + 1, [0, 1])


def test_follower_appends_flush_at_flush_messages(tmp_path: Path) -> None:
    """Kafka 2.8's Log.append flushes once flush.messages are unflushed, whoever
    appends: a follower's batches move the recovery point too."""
    log = open_log(tmp_path / "t-0", flush_messages=3)
    log.append_as_follower(build_batch([b"v"] * 2, base_offset=0, base_timestamp=NOW))
    assert log.recovery_point == 0
    log.append_as_follower(build_batch([b"v"], base_offset=2, base_timestamp=NOW))
    assert log.recovery_point == 3


def test_a_batch_ending_2_to_the_31_less_one_above_the_segment_base_stays_in_it(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's LogSegment.shouldRoll: offsets beyond base + Int.MaxValue need a new
    segment; the last one that fits, base + 2**31 - 1, does not roll."""
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(far_batch(0))
    log.append_as_follower(far_batch(2**31 - 1))
    assert log.segment_base_offsets() == [0]
    log.append_as_follower(far_batch(2**31))
    assert log.segment_base_offsets() == [0, 2**31]


def test_a_full_time_index_rolls_the_segment(tmp_path: Path) -> None:
    """Kafka 2.8's shouldRoll: timeIndex.isFull too, which is one entry short of the
    file's (TimeIndex.isFull: the last slot is kept for the entry written at the roll).
    Index files of 24 bytes hold three offset entries, two time entries (12 bytes each):
    with an entry per batch after the first, and rising timestamps, the time index is
    full after the second batch, and the third rolls; the roll's entry takes the last
    slot."""
    log = open_log(tmp_path / "t-0", segment_index_bytes=24, index_interval_bytes=0)
    for i in range(6):
        log.append_as_leader(batch(ts=NOW + i), 0)
    assert log.segment_base_offsets() == [0, 2, 4]
    for segment in log.segments_snapshot():
        assert segment.time_index.entries <= segment.time_index.max_entries


def test_a_read_without_min_one_batch_takes_a_batch_of_exactly_max_bytes(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's LogSegment.read without minOneMessage: the first batch is read when
    it fits max bytes (size <= maxSize), exactly too; one byte less reads nothing."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(), 0)
    size = len(batch())
    exact = log.read(0, size, min_one_batch=False)
    assert exact.region is not None
    assert (exact.region.length, exact.next_offset) == (size, 1)
    short = log.read(0, size - 1, min_one_batch=False)
    assert (short.region, short.next_offset) == (None, 0)


def test_the_log_start_offset_moved_to_itself_is_no_increment(tmp_path: Path) -> None:
    """Kafka 2.8's maybeIncrementLogStartOffset changes it only for a higher offset."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(count=3), 0)
    log.update_high_watermark(3)
    assert log.maybe_increment_log_start_offset(1)
    assert not log.maybe_increment_log_start_offset(1)
    assert not log.maybe_increment_log_start_offset(0)
    assert log.log_start_offset == 1


def test_the_high_watermark_is_clamped_between_the_log_start_and_end(tmp_path: Path) -> None:
    """Kafka 2.8's Log.updateHighWatermark: below the log start offset it is the log
    start, above the log end the log end."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(count=4), 0)
    assert log.update_high_watermark(9) == 4
    assert log.maybe_increment_log_start_offset(2)
    assert log.update_high_watermark(1) == 2
    assert log.high_watermark == 2
    assert log.update_high_watermark(3) == 3


def test_compact_only_topics_keep_their_segments_past_retention_bytes(tmp_path: Path) -> None:
    """Kafka 2.8's Log.deleteOldSegments: without cleanup.policy=delete only the log start
    offset deletes segments, never retention.bytes."""
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_bytes=0, delete_enabled=False)
    for _ in range(3):
        log.append_as_leader(batch(200), 0)
    log.update_high_watermark(3)
    assert log.delete_old_segments() == 0
    assert log.segment_base_offsets() == [0, 1, 2]


def test_retention_ms_zero_deletes_every_segment_older_than_now(tmp_path: Path) -> None:
    """Kafka 2.8's deleteRetentionMsBreachedSegments: only a negative retention.ms keeps
    segments for ever; 0 deletes those whose largest timestamp is before now."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=400, retention_ms=0)
    for _ in range(3):
        log.append_as_leader(batch(200, ts=NOW - 1), 0)
    log.update_high_watermark(3)
    assert log.delete_old_segments() == 3
    assert (log.log_start_offset, log.segment_base_offsets()) == (3, [3])


def test_retention_bytes_met_exactly_deletes_the_empty_segments_in_front(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's deleteRetentionSizeBreachedSegments goes on when the log's size is
    retention.bytes or more (it stops only below): with the size exactly at the limit, a
    leading segment of no bytes (the empty one a follower's first batch past a compacted
    gap rolled away from) still goes, and the log start moves past it."""
    log = open_log(tmp_path / "t-0", retention_ms=-1, retention_bytes=len(far_batch(FAR)))
    log.append_as_follower(far_batch(FAR))
    assert log.segment_base_offsets() == [0, FAR]
    log.update_high_watermark(FAR + 1)
    assert log.size_in_bytes == log.config.retention_bytes
    assert log.delete_old_segments() == 1
    assert (log.log_start_offset, log.segment_base_offsets()) == (FAR, [FAR])


def two_segments(directory: Path) -> PartitionLog:
    """Offsets 0-1 in a segment at 0, offset 2 in one at 2 (rolled by hand)."""
    log = open_log(directory)
    log.append_as_leader(batch(count=2), 0)
    log.roll()
    log.append_as_leader(batch(), 0)
    assert log.segment_base_offsets() == [0, 2]
    return log


def test_legacy_offsets_start_at_the_log_start_and_end_at_the_log_end(tmp_path: Path) -> None:
    """Kafka 2.8's Log.legacyFetchOffsetsBefore (ListOffsets v0): each segment's base
    offset, at least the log start offset, then the log end offset when the last
    segment holds anything; highest first."""
    log = two_segments(tmp_path / "t-0")
    log.update_high_watermark(3)
    assert log.maybe_increment_log_start_offset(1)
    assert log.legacy_offsets_before(-1, 10) == [3, 2, 1]
    assert log.legacy_offsets_before(-2, 10) == [1]
    log.roll()  # an empty last segment: the log end is its base, not listed twice
    assert log.legacy_offsets_before(-1, 10) == [3, 2, 1]
    assert log.legacy_offsets_before(-1, 2) == [3, 2]


def test_legacy_offsets_before_a_time_take_a_segment_modified_at_it(tmp_path: Path) -> None:
    """Kafka 2.8's legacyFetchOffsetsBefore starts at the last entry whose time (a
    segment file's last modification) is at most the one asked for."""
    log = two_segments(tmp_path / "t-0")
    first, second = log.segments_snapshot()
    os.utime(first.path, (1000, 1000))
    os.utime(second.path, (5000, 5000))
    assert log.legacy_offsets_before(5_000_000, 10) == [2, 0]
    assert log.legacy_offsets_before(4_999_999, 10) == [0]
    assert log.legacy_offsets_before(999_999, 10) == []


def test_a_lookup_by_timestamp_skips_records_below_the_log_start(tmp_path: Path) -> None:
    """Kafka 2.8's FileRecords.searchForTimestamp takes the first record with
    timestamp >= the target and offset >= the log start offset: a later record of a
    batch the log start cut into is below it."""
    log = open_log(tmp_path / "t-0")
    specs = [RecordSpec(b"a", timestamp=NOW + 10), RecordSpec(b"b", timestamp=NOW + 1)]
    specs.append(RecordSpec(b"c", timestamp=NOW + 20))
    log.append_as_leader(bytearray(build_batch(specs, base_timestamp=NOW)), 0)
    assert log.offset_for_timestamp(NOW + 5) == (NOW + 10, 0, 0)
    log.update_high_watermark(3)
    assert log.maybe_increment_log_start_offset(1)
    assert log.offset_for_timestamp(NOW + 5) == (NOW + 20, 2, 0)


def test_a_lookup_by_timestamp_takes_a_log_append_time_batch_by_its_time(
    tmp_path: Path,
) -> None:
    """Kafka 2.8: a LogAppendTime batch's records have its maxTimestamp (the broker's
    time), not the producer's timestamps left in them, so the lookup answers with its
    first record at or above the log start."""
    clock = Clock(NOW + 60_000)
    log = open_log(tmp_path / "t-0", clock, log_append_time=True)
    log.append_as_leader(batch(count=3, ts=NOW), 0)
    assert log.offset_for_timestamp(NOW + 60_000) == (NOW + 60_000, 0, 0)
    log.update_high_watermark(3)
    assert log.maybe_increment_log_start_offset(1)
    assert log.offset_for_timestamp(NOW + 30_000) == (NOW + 60_000, 1, 0)


def test_a_truncation_to_a_negative_offset_is_refused(tmp_path: Path) -> None:
    """Kafka 2.8's Log.truncateTo: IllegalArgumentException below 0, nothing cut."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(count=2), 0)
    with pytest.raises(ValueError, match="negative"):
        log.truncate_to(-1)
    assert (log.log_end_offset, log.segment_base_offsets()) == (2, [0])


def test_a_read_limit_at_the_next_segments_base_ends_in_the_later_segment(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's DelayedFetch (LogOffsetMetadata.onOlderSegment): a high watermark at
    the next segment's base offset lies in that segment, so a fetch from the one before
    has its end in a later segment (its whole rest readable)."""
    log = two_segments(tmp_path / "t-0")
    size = len(batch(count=2))
    small = log.read(0, 1, 2, min_one_batch=False, count_to=1 << 20)
    assert (small.region, small.end_in_later_segment, small.bytes_to_end) == (None, True, size)
    whole = log.read(0, 1 << 20, 2, count_to=1 << 20)
    assert (whole.next_offset, whole.end_in_later_segment, whole.bytes_to_end) == (2, True, size)


def test_a_log_start_offset_moved_up_takes_the_recovery_point_with_it(tmp_path: Path) -> None:
    """Kafka 2.8's Log.updateLogStartOffset: the recovery point is never below the log
    start offset, however the start moves (DeleteRecords or a follower's increment,
    retention, a follower starting over at its leader's log start, loading)."""
    log = open_log(tmp_path / "t-0", segment_bytes=200, retention_ms=-1)
    for _ in range(4):
        log.append_as_leader(batch(), 0)
    assert (log.recovery_point, log.log_end_offset) == (0, 4)
    assert log.maybe_increment_log_start_offset(2)
    assert log.recovery_point == 2
    log.truncate_fully_and_start_at(10)
    assert log.recovery_point == 10
    log.append_as_follower(build_batch([b"v"], base_offset=10, base_timestamp=NOW))
    log.close()
    again = PartitionLog(
        tmp_path / "t-0", log.config, time_ms=Clock(), recovery_point=3, log_start_offset=11
    )
    assert (again.log_start_offset, again.recovery_point) == (11, 11)
    again.close()
    retained = open_log(tmp_path / "t-1", segment_bytes=200, retention_ms=0)
    for _ in range(4):
        retained.append_as_leader(batch(ts=NOW - 1), 0)
    retained.update_high_watermark(4)
    assert retained.recovery_point == 0
    # every record past retention.ms: the last segment too, once an empty one rolled
    assert retained.delete_old_segments(NOW) == 4
    assert retained.recovery_point == retained.log_start_offset == 4


def test_a_log_start_offset_below_the_recovery_point_leaves_it(tmp_path: Path) -> None:
    """The recovery point only rises with the log start offset (Kafka 2.8: `if
    (this.recoveryPoint < offset)`): flushed offsets above the new start stay flushed."""
    log = open_log(tmp_path / "t-0")
    for _ in range(4):
        log.append_as_leader(batch(), 0)
    log.flush()
    assert log.recovery_point == 4
    assert log.maybe_increment_log_start_offset(2)
    assert log.recovery_point == 4
