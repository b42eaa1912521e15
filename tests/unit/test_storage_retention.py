"""Retention beside lock-free reads, and of the active segment (Kafka 2.8's Log.read,
deletableSegments and deleteSegments)."""

from __future__ import annotations

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
