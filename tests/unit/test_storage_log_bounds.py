"""PartitionLog at its boundaries: the exact sizes, offsets and times where Kafka 2.8's
kafka.log.Log changes its answer (an append's size against segment.bytes, a roll, a
read's limits, retention, truncation, the log start offset)."""

from __future__ import annotations

from pathlib import Path

from storage.log import LogConfig, PartitionLog
from storage.testing import build_batch

NOW = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(directory: Path, clock: Clock | None = None, **config: int | bool) -> PartitionLog:
    return PartitionLog(directory, LogConfig(**config), time_ms=clock or Clock())  # type: ignore[arg-type]


def batch(size: int = 100, count: int = 1, ts: int = NOW) -> bytearray:
    return bytearray(build_batch([b"v" * size] * count, base_timestamp=ts))


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
