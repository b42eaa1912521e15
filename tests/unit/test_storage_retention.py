"""Retention beside lock-free reads, and of the active segment (Kafka 2.8's Log.read,
deletableSegments and deleteSegments)."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest

from storage import segment as segment_module
from storage.errors import KafkaStorageError, OffsetOutOfRangeError
from storage.log import LogConfig, PartitionLog
from storage.records import iter_batches
from storage.scheduler import Scheduler
from storage.testing import build_batch

NOW = 1_700_000_000_000
HOUR = 3_600_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def produce(log: PartitionLog, size: int = 200, *, ts: int = NOW, epoch: int = 1) -> int:
    return log.append_as_leader(build_batch([b"v" * size], base_timestamp=ts), epoch).first_offset


def four_segments(directory: Path) -> PartitionLog:
    """Offsets 0-3, one a segment, all below the high watermark; retention.bytes=1 takes
    the first three."""
    log = PartitionLog(directory, LogConfig(segment_bytes=400, retention_ms=-1, retention_bytes=1))
    for _ in range(4):
        produce(log)
    log.update_high_watermark(log.log_end_offset)
    assert log.segment_base_offsets() == [0, 1, 2, 3]
    return log


def answer(log: PartitionLog, offset: int) -> object:
    try:
        return log.read(offset, 1 << 20).first_offset
    except OffsetOutOfRangeError:
        return "OFFSET_OUT_OF_RANGE"


# --- a read racing retention ----------------------------------------------------------


def test_a_read_racing_retention_never_serves_a_later_offset_for_a_deleted_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read (lock-free) while retention renames the doomed segments saw the new segment
    list but the old log start offset: offset 0 passed the range check, the read was
    clamped to the first segment left and answered offset 3's records, error NONE (a
    consumer skips records; a follower appends with a hole). Kafka 2.8's Log.read:
    segments.floorEntry(startOffset) is null -> OffsetOutOfRangeException."""
    log = four_segments(tmp_path / "a-0")
    seen: list[tuple[object, object, int]] = []
    real_rename = segment_module.LogSegment.rename_to_deleted
    real_publish = PartitionLog._publish

    def rename_then_read(self: segment_module.LogSegment) -> None:
        real_rename(self)
        seen.append((answer(log, 0), answer(log, log.log_start_offset), log.log_start_offset))

    def publish_then_read(self: PartitionLog, segments: object) -> None:
        real_publish(self, segments)  # type: ignore[arg-type]
        seen.append((answer(log, 0), answer(log, log.log_start_offset), log.log_start_offset))

    monkeypatch.setattr(segment_module.LogSegment, "rename_to_deleted", rename_then_read)
    monkeypatch.setattr(PartitionLog, "_publish", publish_then_read)
    assert log.delete_old_segments() == 3
    # Once the shorter list is out, offset 0 is out of range and the log start offset
    # (ListOffsets EARLIEST, a fetch's range check) is where the segments begin.
    assert seen == [("OFFSET_OUT_OF_RANGE", 3, 3)] * 4, seen


def test_a_read_below_the_first_segment_is_out_of_range_whatever_the_log_start_says(
    tmp_path: Path,
) -> None:
    """Kafka's floorEntry: a start offset no segment holds is out of range, not the
    first segment's records (a log start offset read before a change of the segments,
    a full truncation's or retention's, may still lie below them)."""
    log = four_segments(tmp_path / "a-0")
    assert log.delete_old_segments() == 3
    log._log_start = 0  # as a reader that read the start before the segments moved
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20)
    assert answer(log, 3) == 3


def test_reads_beside_retention_never_skip_forward(tmp_path: Path) -> None:
    """Readers fetching from the log start offset while retention deletes (with
    file.delete.delay.ms=0): each answer starts where it was asked, or is
    OFFSET_OUT_OF_RANGE (the reviewer's stress)."""
    scheduler = Scheduler("t")
    scheduler.start()
    config = LogConfig(
        segment_bytes=2000, retention_bytes=6000, retention_ms=-1, file_delete_delay_ms=0
    )
    log = PartitionLog(tmp_path / "a-0", config, defer=scheduler.defer)
    stop = threading.Event()
    bad: list[str] = []
    outcomes: dict[str, int] = {}

    def reader() -> None:
        while not stop.is_set():
            start = log.log_start_offset
            try:
                read = log.read(start, 1 << 16, log.high_watermark)
                data = read.to_bytes() if read.region is not None else b""
                if data and read.first_offset != start:
                    bad.append(f"asked {start}, answered {read.first_offset}")
                for header in iter_batches(data):
                    if header.base_offset < read.first_offset:
                        bad.append(f"offset {header.base_offset} < {read.first_offset}")
                outcomes["ok"] = outcomes.get("ok", 0) + 1
            except OffsetOutOfRangeError:
                outcomes["oor"] = outcomes.get("oor", 0) + 1
            except KafkaStorageError:  # a segment closed under the read (delay 0)
                outcomes["storage"] = outcomes.get("storage", 0) + 1
            except OSError as exc:
                # A region read after its segment was closed (delay 0: the fetch path
                # answers KAFKA_STORAGE_ERROR for it, broker/apis.py).
                if exc.errno != errno.EBADF:
                    bad.append(repr(exc))
                outcomes["closed"] = outcomes.get("closed", 0) + 1
            except Exception as exc:  # anything else is a failure of the test
                bad.append(repr(exc))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2
    try:
        while time.monotonic() < deadline and not bad:
            for _ in range(20):
                produce(log, 300)
            log.update_high_watermark(log.log_end_offset)
            log.delete_old_segments()
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        scheduler.close()
        scheduler.drain_one_offs()
    assert outcomes.get("ok"), outcomes
    assert not bad, (bad[:5], outcomes)


# --- the active segment ---------------------------------------------------------------


def idle_log(directory: Path, clock: Clock, **config: int) -> PartitionLog:
    """One record (offset 0, epoch 1, timestamp NOW) in the only segment, below the high
    watermark; then nothing more is written."""
    log = PartitionLog(directory, LogConfig(**config), time_ms=clock)  # type: ignore[arg-type]
    produce(log, 100)
    log.update_high_watermark(1)
    return log


def test_an_idle_partition_past_retention_ms_rolls_and_deletes_its_last_segment(
    tmp_path: Path,
) -> None:
    """A segment rolls only on an append: an idle partition kept its last records
    whatever retention.ms and segment.ms said (the reviewer's, 30 days past a 1 h
    retention). Kafka 2.8's deletableSegments takes the active segment when it is not
    empty and the high watermark is at the log end; deleteSegments rolls first ("we must
    always have at least one segment")."""
    clock = Clock()
    log = idle_log(tmp_path / "a-0", clock, retention_ms=HOUR, segment_ms=HOUR)
    clock.now = NOW + HOUR  # not past: now - largest timestamp must exceed retention.ms
    assert log.delete_old_segments() == 0
    clock.now = NOW + 30 * 24 * HOUR
    assert log.delete_old_segments() == 1
    # The new active segment starts at the log end, where the log start now is.
    assert log.segment_base_offsets() == [1]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (1, 1, 1)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20)
    assert log.read(1, 1 << 20).region is None
    # The leader epoch stays, starting at the log start (ListOffsets EARLIEST's epoch).
    assert log.latest_epoch == 1
    assert log.earliest_offset_and_epoch() == (1, 1)
    assert log.end_offset_for_epoch(1) == (1, 1)
    # Nothing more to delete: an empty active segment is never rolled again.
    assert log.delete_old_segments() == 0
    assert log.segment_base_offsets() == [1]
    assert produce(log, 100) == 1
    assert log.read(1, 1 << 20).first_offset == 1
    assert not [n for n in (tmp_path / "a-0").iterdir() if n.name.endswith(".deleted")]


def test_retention_bytes_zero_empties_an_idle_partition(tmp_path: Path) -> None:
    clock = Clock()
    log = idle_log(tmp_path / "a-0", clock, retention_ms=-1, retention_bytes=0)
    assert log.delete_old_segments() == 1
    assert (log.segment_base_offsets(), log.log_start_offset, log.size_in_bytes) == ([1], 1, 0)


def test_every_segment_past_retention_goes_with_the_active_one(tmp_path: Path) -> None:
    clock = Clock()
    log = PartitionLog(
        tmp_path / "a-0", LogConfig(segment_bytes=400, retention_ms=HOUR), time_ms=clock
    )
    for i in range(4):
        produce(log, ts=NOW + i)
    log.update_high_watermark(4)
    assert log.segment_base_offsets() == [0, 1, 2, 3]
    clock.now = NOW + 2 * HOUR
    assert log.delete_old_segments() == 4
    assert (log.segment_base_offsets(), log.log_start_offset) == ([4], 4)


def test_the_active_segment_stays_while_the_high_watermark_is_below_the_log_end(
    tmp_path: Path,
) -> None:
    """A follower (or a leader waiting for its ISR) whose high watermark is below its log
    end keeps the active segment: the log start never passes the high watermark."""
    clock = Clock()
    log = PartitionLog(tmp_path / "a-0", LogConfig(retention_ms=HOUR), time_ms=clock)
    produce(log, 100)
    produce(log, 100)
    log.update_high_watermark(1)
    clock.now = NOW + 2 * HOUR
    assert log.delete_old_segments() == 0
    assert (log.segment_base_offsets(), log.log_start_offset) == ([0], 0)
    log.update_high_watermark(2)
    assert log.delete_old_segments() == 1
    assert (log.segment_base_offsets(), log.log_start_offset) == ([2], 2)


def test_a_segment_with_a_recent_record_stays(tmp_path: Path) -> None:
    """The active segment's time retention counts from its largest timestamp."""
    clock = Clock()
    log = PartitionLog(tmp_path / "a-0", LogConfig(retention_ms=HOUR), time_ms=clock)
    produce(log, 100, ts=NOW)
    produce(log, 100, ts=NOW + HOUR)
    log.update_high_watermark(2)
    clock.now = NOW + 2 * HOUR
    assert log.delete_old_segments() == 0
    clock.now = NOW + 2 * HOUR + 1
    assert log.delete_old_segments() == 1


def test_the_log_start_alone_never_takes_the_active_segment(tmp_path: Path) -> None:
    """Kafka 2.8's deleteLogStartOffsetBreachedSegments needs a next segment at or below
    the log start: DeleteRecords up to the log end leaves the active segment (nothing
    below the start is readable anyway)."""
    log = idle_log(tmp_path / "a-0", Clock(), retention_ms=-1)
    assert log.maybe_increment_log_start_offset(1)
    assert log.delete_old_segments() == 0
    assert log.segment_base_offsets() == [0]


def test_a_compact_only_idle_partition_keeps_its_records(tmp_path: Path) -> None:
    clock = Clock()
    log = idle_log(tmp_path / "a-0", clock, retention_ms=HOUR, delete_enabled=False)
    clock.now = NOW + 2 * HOUR
    assert log.delete_old_segments() == 0
    assert log.segment_base_offsets() == [0]


def test_an_idle_partition_emptied_by_retention_opens_again_at_its_log_end(
    tmp_path: Path,
) -> None:
    clock = Clock()
    log = idle_log(tmp_path / "a-0", clock, retention_ms=HOUR)
    clock.now = NOW + 2 * HOUR
    assert log.delete_old_segments() == 1
    log.flush()
    log.close()
    again = PartitionLog(
        tmp_path / "a-0",
        LogConfig(retention_ms=HOUR),
        time_ms=clock,
        found=True,
        clean_shutdown=True,
        recovery_point=1,
        log_start_offset=1,
        high_watermark=1,
    )
    assert again.segment_base_offsets() == [1]
    assert (again.log_start_offset, again.log_end_offset) == (1, 1)
    with pytest.raises(OffsetOutOfRangeError):
        again.read(0, 1 << 20)
    assert produce(again, 100) == 1


def test_an_empty_active_segment_is_never_deleted_however_old_its_file(tmp_path: Path) -> None:
    """Kafka 2.8's deletableSegments never takes the last segment when it is empty: its
    file's mtime counts for retention.ms, and deleting it would roll one at the same base
    offset (its files renamed .deleted under the new one)."""
    clock = Clock()
    log = idle_log(tmp_path / "a-0", clock, retention_ms=HOUR)
    clock.now = NOW + 2 * HOUR
    assert log.delete_old_segments() == 1
    clock.now = int(time.time() * 1000) + 2 * HOUR  # past the new segment's mtime too
    assert log.delete_old_segments() == 0
    assert log.segment_base_offsets() == [1]
    assert (tmp_path / "a-0" / f"{1:020d}.log").exists()


def test_retention_never_moves_the_log_start_back(tmp_path: Path) -> None:
    """The log start inside the first segment left stays there (Kafka 2.8's
    deleteSegments: maybeIncrementLogStartOffset, which only moves it up)."""
    log = PartitionLog(tmp_path / "a-0", LogConfig(segment_bytes=400, retention_ms=-1))
    for _ in range(4):
        log.append_as_leader(build_batch([b"v" * 100] * 2, base_timestamp=NOW), 1)
    log.update_high_watermark(8)
    assert log.segment_base_offsets() == [0, 2, 4, 6]
    assert log.maybe_increment_log_start_offset(3)
    assert log.delete_old_segments() == 1
    assert (log.segment_base_offsets(), log.log_start_offset) == ([2, 4, 6], 3)


def test_retention_truncates_the_epoch_cache_from_the_new_log_start(tmp_path: Path) -> None:
    """Kafka 2.8's deleteSegments -> maybeIncrementLogStartOffset ->
    leaderEpochCache.truncateFromStart: ListOffsets EARLIEST answers the epoch of the
    first record left, and the checkpoint says so."""
    log = PartitionLog(
        tmp_path / "a-0", LogConfig(segment_bytes=400, retention_ms=-1, retention_bytes=1)
    )
    for epoch in (1, 1, 2, 2):
        produce(log, epoch=epoch)
    log.update_high_watermark(4)
    assert log.delete_old_segments() == 3
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(2, 3)]
    assert log.earliest_offset_and_epoch() == (3, 2)
    assert (tmp_path / "a-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n2 3\n"
