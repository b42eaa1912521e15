"""Lock-free reads of a log racing its truncation (a follower's, or a leader's that lost
its leadership): each interleaving is driven by a hook in the real code, not by a race."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import storage.log
from storage.errors import CorruptRecordError, KafkaStorageError
from storage.index import OffsetIndex, TimeIndex
from storage.log import LogConfig, PartitionLog
from storage.records import BatchHeader, iter_batches
from storage.segment import LogSegment
from storage.testing import build_batch

NOW = 1_700_000_000_000


def open_log(directory: Path, failed: list[str], **config: int) -> PartitionLog:
    return PartitionLog(
        directory,
        LogConfig(**config),  # type: ignore[arg-type]
        time_ms=lambda: NOW,
        # Removed segments are closed file.delete.delay.ms later, as a broker's are.
        defer=lambda _action, _delay_ms: None,
        dir_failed=lambda _parent, message, _error: failed.append(message),
    )


def follow(log: PartitionLog, base: int, count: int = 2, size: int = 100, ts: int = NOW) -> None:
    """Append one batch of ``count`` records at ``base`` as a follower does."""
    log.append_as_follower(build_batch([b"v" * size] * count, base_offset=base, base_timestamp=ts))


def batches_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in iter_batches(data)]


def test_a_read_whose_segment_is_truncated_after_its_first_batch_ends_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed)
    for base in range(0, 10, 2):
        follow(log, base)  # batches [0,1] [2,3] ... [8,9], one segment
    find_batch = LogSegment.find_batch

    def truncated_after(self: LogSegment, offset: int, end: int) -> BatchHeader | None:
        # The read has taken the segment's size and found its first batch: a truncation
        # now (under the log's lock, which a read does not take) cuts the file short.
        header = find_batch(self, offset, end)
        monkeypatch.setattr(LogSegment, "find_batch", find_batch)
        log.truncate_to(4)
        return header

    monkeypatch.setattr(LogSegment, "find_batch", truncated_after)
    read = log.read(0, 1 << 20)
    assert batches_of(read.to_bytes()) == [(0, 1), (2, 3)]
    assert read.next_offset <= 4
    assert not failed


def test_a_read_whose_segment_is_truncated_and_written_again_ends_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed)
    for base in range(0, 10, 2):
        follow(log, base)
    headers = LogSegment.headers

    def rewritten_inside(self: LogSegment, start: int, end: int) -> Iterator[BatchHeader]:
        for n, header in enumerate(headers(self, start, end)):
            yield header
            if n == 1:
                # The reader is two batches past its first: the new leader's records,
                # larger, take their place, so the next header is read inside a batch.
                monkeypatch.setattr(LogSegment, "headers", headers)
                log.truncate_to(2)
                follow(log, 2, count=1, size=150)
                follow(log, 3, count=1, size=150)

    monkeypatch.setattr(LogSegment, "headers", rewritten_inside)
    read = log.read(0, 1 << 20)
    assert read.first_offset == 0
    assert not failed


def test_a_read_with_nothing_left_of_its_first_batch_reads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed, index_interval_bytes=1)
    for base in range(0, 10, 2):
        follow(log, base)
    lookup = OffsetIndex.lookup

    def truncated_after(self: OffsetIndex, offset: int) -> object:
        entry = lookup(self, offset)  # the entry of batch [6,7], about to be cut
        monkeypatch.setattr(OffsetIndex, "lookup", lookup)
        log.truncate_to(2)
        return entry

    monkeypatch.setattr(OffsetIndex, "lookup", truncated_after)
    read = log.read(7, 1 << 20)
    assert read.region is None
    assert read.next_offset == 7
    assert not failed


def test_damage_in_a_segment_no_truncation_touched_still_raises(tmp_path: Path) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed)
    for base in range(0, 10, 2):
        follow(log, base)
    path = tmp_path / "t-0" / "00000000000000000000.log"
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # the third batch's length: far past the file's end
        second = next(h for h in iter_batches(path.read_bytes()) if h.base_offset == 4)
        f.seek(second.position + 8)
        f.write((1 << 20).to_bytes(4, "big"))
    assert os.path.getsize(path) == size
    with pytest.raises(CorruptRecordError):
        log.read(0, 1 << 20)


def test_a_lookup_by_timestamp_whose_segment_is_truncated_under_it_finds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed)
    for n, base in enumerate(range(0, 10, 2)):
        follow(log, base, ts=NOW + n)
    headers = LogSegment.headers

    def truncated_after_one(self: LogSegment, start: int, end: int) -> Iterator[BatchHeader]:
        for n, header in enumerate(headers(self, start, end)):
            yield header
            if n == 0:  # the walk goes on to its end taken before the cut
                monkeypatch.setattr(LogSegment, "headers", headers)
                log.truncate_to(4)  # the batch of NOW + 4 goes, with [4,5] and [6,7]

    monkeypatch.setattr(LogSegment, "headers", truncated_after_one)
    assert log.offset_for_timestamp(NOW + 4) is None
    assert not failed


def test_an_offset_index_lookup_beside_its_truncation_is_no_disk_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed, index_interval_bytes=1)
    for base in range(0, 20, 2):
        follow(log, base)  # an index entry for each batch but the first
    entry = OffsetIndex._entry
    calls = [0]

    def truncated_during(self: OffsetIndex, slot: int) -> object:
        calls[0] += 1
        if calls[0] == 2:  # inside the binary search: the index is cut under it
            log.truncate_to(2)
        return entry(self, slot)

    monkeypatch.setattr(OffsetIndex, "_entry", truncated_during)
    try:
        read = log.read(5, 1 << 20)
    except KafkaStorageError:
        read = None
    assert not failed, failed  # its log directory is not taken offline
    assert read is not None
    assert read.region is None  # what it looked for was cut meanwhile


def test_a_time_index_lookup_beside_its_truncation_is_no_disk_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed, index_interval_bytes=1)
    for n, base in enumerate(range(0, 20, 2)):
        follow(log, base, ts=NOW + n)
    entry = TimeIndex._entry
    calls = [0]

    def truncated_during(self: TimeIndex, slot: int) -> object:
        calls[0] += 1
        if calls[0] == 1:
            log.truncate_to(2)
        return entry(self, slot)

    monkeypatch.setattr(TimeIndex, "_entry", truncated_during)
    try:
        found: object = log.offset_for_timestamp(NOW + 3)
    except KafkaStorageError as exc:
        found = exc
    assert not failed, failed  # its log directory is not taken offline
    assert found is None  # what it looked for was cut meanwhile


def test_a_read_finding_its_segment_cut_reads_on_in_no_segment_the_truncation_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed, segment_bytes=600)
    for base in range(0, 12, 2):
        follow(log, base)  # segments at 0, 4 and 8
    assert log.segment_base_offsets() == [0, 4, 8]

    def truncated_after(*args: object, **kwargs: object) -> int:
        # The read has taken the segment list and picked its segment (at 4): the
        # truncation cuts that one to [4,5] and removes the one at 8.
        found = bisect.bisect_right(*args, **kwargs)  # type: ignore[call-overload]
        monkeypatch.setattr(storage.log, "bisect", bisect)
        log.truncate_to(6)
        return int(found)

    monkeypatch.setattr(storage.log, "bisect", SimpleNamespace(bisect_right=truncated_after))
    read = log.read(6, 1 << 20)
    assert log.log_end_offset == 6
    # Not [8,9] [10,11] of the removed segment, past a gap: a follower fetching at 6 would
    # take them for the next records (or find its log not continued and fail it).
    assert read.region is None
    assert read.next_offset == 6
    assert not failed


def test_a_consumer_read_up_to_the_high_watermark_beside_a_truncation_to_it_ends_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A caught-up consumer's read walks on to the header of the batch at the high
    # watermark, to find it is not below it: a leader losing its leadership truncates to
    # its high watermark meanwhile. Answered CORRUPT_MESSAGE, a Java consumer's poll
    # throws ("Encountered corrupt message when fetching offset").
    failed: list[str] = []
    log = open_log(tmp_path / "t-0", failed)
    for base in range(0, 8, 2):
        follow(log, base)
    log.update_high_watermark(4)
    find_batch = LogSegment.find_batch

    def truncated_after(self: LogSegment, offset: int, end: int) -> BatchHeader | None:
        header = find_batch(self, offset, end)
        monkeypatch.setattr(LogSegment, "find_batch", find_batch)
        log.truncate_to(4)
        return header

    monkeypatch.setattr(LogSegment, "find_batch", truncated_after)
    read = log.read(2, 1 << 20, max_offset_exclusive=4)
    assert batches_of(read.to_bytes()) == [(2, 3)]
    assert read.next_offset == 4
    assert not failed
