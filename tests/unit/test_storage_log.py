"""PartitionLog: appends, reads, rolling, indexes, timestamps, retention, truncation."""

from __future__ import annotations

import gc
import os
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import codecs
from storage import segment as segment_module
from storage.codecs import Compression
from storage.epoch_cache import LeaderEpochCache
from storage.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OffsetOverflowError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from storage.log import (
    LOG_LOCK_STRIPES,
    LogConfig,
    PartitionLog,
    high_watermark_of,
    log_start_offset_of,
    parse_log_dir_name,
    recovery_point_of,
)
from storage.records import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    batch_crc,
    iter_batches,
    iter_records,
    read_header,
)
from storage.segment import LogSegment, shared_ms
from storage.testing import RecordSpec, build_batch, with_body

NOW = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(directory: Path, clock: Clock | None = None, **config: int | bool) -> PartitionLog:
    return PartitionLog(directory, LogConfig(**config), time_ms=clock or Clock())  # type: ignore[arg-type]


def produce(
    log: PartitionLog, count: int = 1, size: int = 100, *, epoch: int = 0, ts: int = NOW
) -> int:
    """Append one batch of ``count`` records; returns its base offset."""
    info = log.append_as_leader(build_batch([b"v" * size] * count, base_timestamp=ts), epoch)
    return info.first_offset


def batches_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for h in iter_batches(data)]


def all_batches(log: PartitionLog) -> list[tuple[int, int]]:
    """Every batch of the log, reading segment after segment."""
    found: list[tuple[int, int]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 30)
        found += batches_of(read.to_bytes())
        offset = read.next_offset
    return found


def test_append_and_read_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "orders-0")
    sent = [build_batch([b"a" * 10] * n, base_timestamp=NOW) for n in (1, 3, 2)]
    infos = [log.append_as_leader(batch, 5) for batch in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 3), (4, 5)]
    assert infos[-1].log_end_offset == log.log_end_offset == 6
    data = log.read(0, 1 << 20).to_bytes()
    assert data == b"".join(sent)  # byte for byte as assigned (offsets, epoch patched)
    assert batches_of(data) == [(0, 0), (1, 3), (4, 5)]
    assert {h.partition_leader_epoch for h in iter_batches(data)} == {5}
    log.flush()  # the epoch checkpoint is written with the first flush
    files = sorted(os.listdir(tmp_path / "orders-0"))
    assert files == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]


def test_directory_name_must_be_topic_partition(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="topic"):
        open_log(tmp_path / "nodash")
    log = open_log(tmp_path / "my-topic-with-dashes-12")
    assert (log.topic, log.partition) == ("my-topic-with-dashes", 12)


def test_a_bad_batch_appends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log)
    size = log.size_in_bytes
    bad = build_batch([b"x"])
    bad[-1] ^= 0x55
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(build_batch([b"ok"]) + bad, 0)
    assert log.log_end_offset == 1
    assert log.size_in_bytes == size
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log") == size


def test_reads_start_at_the_batch_holding_the_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        produce(log, count=4)
    info = log.read(6, 1 << 20)
    assert info.first_offset == 4  # the batch [4, 7] holds offset 6
    assert info.next_offset == 12
    assert batches_of(info.to_bytes()) == [(4, 7), (8, 11)]


def test_read_at_the_end_is_empty_and_outside_the_log_is_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, count=2)
    empty = log.read(2, 1000)
    assert empty.region is None
    assert empty.to_bytes() == b""
    assert empty.next_offset == 2
    with pytest.raises(OffsetOutOfRangeError) as caught:
        log.read(3, 1000)
    assert (caught.value.log_start_offset, caught.value.log_end_offset) == (0, 2)


def test_max_bytes_stops_at_a_batch_boundary_but_returns_one_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(4):
        produce(log, size=200)
    one = log.read(0, 1).size
    assert one > 200
    assert batches_of(log.read(0, 1).to_bytes()) == [(0, 0)]  # KIP-74: at least one
    assert log.read(0, 1, min_one_batch=False).region is None
    assert batches_of(log.read(0, int(one * 2.5)).to_bytes()) == [(0, 0), (1, 1)]


def test_max_offset_exclusive_leaves_out_batches_reaching_it(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, count=3)  # [0, 2]
    produce(log, count=3)  # [3, 5]
    assert batches_of(log.read(0, 1 << 20, max_offset_exclusive=5).to_bytes()) == [(0, 2)]
    assert batches_of(log.read(0, 1 << 20, max_offset_exclusive=6).to_bytes()) == [
        (0, 2),
        (3, 5),
    ]
    assert log.read(3, 1 << 20, max_offset_exclusive=3).region is None


def test_segments_roll_at_segment_bytes_and_reads_stay_in_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    for _ in range(20):
        produce(log, count=2, size=100)  # ~ 300-byte batches
    bases = log.segment_base_offsets()
    assert len(bases) > 5
    for base in bases:
        path = tmp_path / "t-0" / f"{base:020d}.log"
        assert path.stat().st_size <= 1000
        assert read_header(path.read_bytes()).base_offset == base
    read = log.read(0, 1 << 20)
    assert read.next_offset == bases[1]  # one segment per read


def test_a_read_tells_what_is_readable_up_to_the_end_and_whether_the_end_is_further_on(
    tmp_path: Path,
) -> None:
    """What a fetch with min_bytes counts (Kafka 2.8's DelayedFetch.tryComplete): the bytes
    from the batch read first to the readable end within its segment (exact up to
    ``count_to``), and whether that end lies in a later segment (Case F: answer at once).
    A read reaching neither gives no more than what it saw unless asked to count further."""
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    for _ in range(12):  # three batches a segment
        produce(log, count=2, size=100)
    bases = log.segment_base_offsets()
    assert bases == [0, 6, 12, 18]
    size = len(log.read(0, 1).to_bytes())  # every batch is the same size here
    per_segment = bases[1] // 2  # batches in the first segment
    # The last batch of the first segment, the high watermark segments further on.
    tail = log.read(bases[1] - 2, 1 << 20, log.log_end_offset, count_to=1 << 20)
    assert (tail.end_in_later_segment, tail.bytes_to_end, tail.size) == (True, size, size)
    # The high watermark inside the first segment: counted to it, not past it.
    inside = log.read(0, 1 << 20, 4, count_to=1 << 20)
    assert (inside.end_in_later_segment, inside.bytes_to_end) == (False, 2 * size)
    # Reads cut by max_bytes: without count_to, what the read saw (the batch left out
    # included); with it, counted on to the readable end.
    last = bases[-1]
    cut = log.read(last, size, count_to=0)
    assert (cut.end_in_later_segment, cut.size) == (False, size)
    assert size < cut.bytes_to_end <= 2 * size
    whole = log.read(last, size, count_to=1 << 20)
    assert whole.bytes_to_end == (log.log_end_offset - last) // 2 * size
    assert (
        log.read(0, size, bases[1] - 2, count_to=1 << 20).bytes_to_end == (per_segment - 1) * size
    )
    # A batch too large for what is left (not the first of the answer): nothing read,
    # still counted.
    skipped = log.read(0, size - 1, min_one_batch=False, count_to=1 << 20)
    assert skipped.region is None
    assert (skipped.end_in_later_segment, skipped.bytes_to_end) == (True, per_segment * size)
    # At the readable end: nothing.
    at_end = log.read(log.log_end_offset, 1 << 20, count_to=1 << 20)
    assert (at_end.end_in_later_segment, at_end.bytes_to_end) == (False, 0)


def test_a_batch_larger_than_a_segment_is_refused_a_leader(tmp_path: Path) -> None:
    """Kafka 2.8's Log.append: RecordBatchTooLargeException (RECORD_LIST_TOO_LARGE),
    nothing written; batches that fit go on."""
    log = open_log(tmp_path / "t-0", segment_bytes=500)
    produce(log, size=10)
    with pytest.raises(RecordBatchTooLargeError, match=r"segment\.bytes 500"):
        produce(log, size=2000)
    produce(log, size=10)
    assert log.log_end_offset == 2
    assert all_batches(log) == [(0, 0), (1, 1)]


def test_a_follower_batch_larger_than_a_segment_gets_one_to_itself(tmp_path: Path) -> None:
    """One the leader took before its segment.bytes was lowered: refusing it would stop
    the partition's replication for good; it gets a segment to itself."""
    log = open_log(tmp_path / "t-0", segment_bytes=500)
    for offset, size in enumerate((10, 2000, 10)):
        log.append_as_follower(build_batch([b"v" * size], base_offset=offset))
    assert log.segment_base_offsets() == [0, 1, 2]


def test_segments_roll_at_segment_ms(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_ms=60_000)
    produce(log, ts=NOW)
    produce(log, ts=NOW + 59_000)
    assert log.segment_base_offsets() == [0]
    produce(log, ts=NOW + 61_000)  # by record timestamps, as Kafka
    assert log.segment_base_offsets() == [0, 2]


def test_a_jitter_over_segment_ms_does_not_roll_every_append(tmp_path: Path) -> None:
    # segment.jitter.ms may exceed segment.ms (both atLeast only, in Kafka): Kafka's
    # LogConfig.randomSegmentJitter draws below min(segment.jitter.ms, segment.ms), so
    # segment.ms - jitter stays positive. Drawn up to segment.jitter.ms, it went negative
    # and every append rolled a segment.
    log = open_log(tmp_path / "t-0", segment_ms=3_600_000, segment_jitter_ms=86_400_000_000)
    for _ in range(20):  # at the same instant: no time has passed
        produce(log)
    assert log.segment_base_offsets() == [0]
    log.close()


@pytest.mark.parametrize(
    ("jitter_ms", "segment_ms", "drawn", "expected"),
    [
        (0, 1000, 2**31 - 1, 0),
        (500, 1000, 2**31 - 1, (2**31 - 1) % 500),
        (5000, 1000, 2**31 - 1, (2**31 - 1) % 1000),
        (5000, 1000, 0, 0),
        (2**40, 2**50, 2**31 - 1, 2**31 - 1),  # nextInt: never more than Int.MaxValue
    ],
)
def test_segment_jitter_is_drawn_as_kafka_draws_it(
    jitter_ms: int, segment_ms: int, drawn: int, expected: int
) -> None:
    assert segment_module.random_segment_jitter(jitter_ms, segment_ms, lambda: drawn) == expected


def test_a_segment_found_at_start_rolls_with_a_jitter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka 2.8's loadSegmentFiles opens every segment found with LogSegment.open, whose
    # rollJitterMs is config.randomSegmentJitter: the active segment a restart finds rolls
    # segment.ms less its jitter after its first batch, as a new one does. Loaded with none,
    # every log's active segment rolled a whole segment.ms after its first batch.
    monkeypatch.setattr(random, "getrandbits", lambda bits: 20_000)
    config = LogConfig(segment_ms=60_000, segment_jitter_ms=30_000)
    log = PartitionLog(tmp_path / "t-0", config, time_ms=Clock())
    produce(log, ts=NOW)
    log.close()
    log = PartitionLog(tmp_path / "t-0", config, clean_shutdown=True, time_ms=Clock())
    assert log.segments_snapshot()[-1].roll_jitter_ms == 20_000
    produce(log, ts=NOW + 45_000)  # past segment.ms less the jitter (40 s), not segment.ms
    assert log.segment_base_offsets() == [0, 1]
    log.close()


def test_explicit_roll(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.roll()  # empty: nothing to roll
    produce(log)
    log.roll()
    assert log.segment_base_offsets() == [0, 1]


def _index_entries(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    assert len(data) % 8 == 0
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def test_offset_index_has_kafkas_layout(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1000)
    for _ in range(30):
        produce(log, count=2, size=150)
    log.close()
    segment = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    entries = _index_entries(tmp_path / "t-0" / "00000000000000000000.index")
    assert len(entries) >= 5
    previous = -1
    for relative_offset, position in entries:
        header = read_header(segment, position)  # a batch starts at every position
        assert header.last_offset == relative_offset  # base offset 0: relative == absolute
        assert position - previous > 1000 or previous < 0
        previous = position
    times = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    assert len(times) % 12 == 0
    assert times


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(st.integers(1, 5), min_size=1, max_size=40),
    sizes=st.lists(st.integers(1, 300), min_size=1, max_size=40),
    interval=st.sampled_from([0, 50, 400, 4096]),
    # A batch is 1.6 KB at most: a leader refuses one larger than a segment.
    segment_bytes=st.sampled_from([1700, 3000, 1 << 20]),
)
def test_any_offset_finds_its_batch(
    tmp_path_factory: pytest.TempPathFactory,
    counts: list[int],
    sizes: list[int],
    interval: int,
    segment_bytes: int,
) -> None:
    directory = tmp_path_factory.mktemp("idx") / "t-0"
    log = open_log(directory, index_interval_bytes=interval, segment_bytes=segment_bytes)
    ranges = []
    for i, count in enumerate(counts):
        first = produce(log, count=count, size=sizes[i % len(sizes)])
        ranges.append((first, first + count - 1))
    for offset in range(log.log_end_offset):
        got = batches_of(log.read(offset, 1).to_bytes())
        assert len(got) == 1
        assert got[0][0] <= offset <= got[0][1]
        assert got[0] in ranges
    log.close()


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])  # none, gzip, snappy, lz4, zstd
def test_offset_for_timestamp_exact_in_batches_read_here(tmp_path: Path, codec: int) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=0)
    specs = [RecordSpec(b"a", timestamp=NOW + t) for t in (5, 1, 9, 3)]
    log.append_as_leader(build_batch(specs, base_timestamp=NOW, compression=codec), 2)
    log.append_as_leader(build_batch([RecordSpec(b"b", timestamp=NOW + 20)]), 3)
    found = log.offset_for_timestamp(NOW + 6)
    assert found is not None
    assert (found.offset, found.timestamp, found.leader_epoch) == (2, NOW + 9, 2)
    found = log.offset_for_timestamp(NOW + 10)
    assert found is not None
    assert (found.offset, found.leader_epoch) == (4, 3)
    assert log.offset_for_timestamp(NOW + 21) is None


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 1000), min_size=1, max_size=6), max_size=30),
    target=st.integers(-5, 1010),
    segment_bytes=st.sampled_from([400, 1 << 20]),
)
def test_offset_for_timestamp_matches_a_scan(
    tmp_path_factory: pytest.TempPathFactory,
    batches: list[list[int]],
    target: int,
    segment_bytes: int,
) -> None:
    directory = tmp_path_factory.mktemp("ts") / "t-0"
    log = open_log(directory, index_interval_bytes=0, segment_bytes=segment_bytes)
    everything: list[tuple[int, int]] = []  # (offset, timestamp)
    for stamps in batches:
        specs = [RecordSpec(b"x", timestamp=NOW + t) for t in stamps]
        info = log.append_as_leader(build_batch(specs, base_timestamp=NOW), 0)
        everything += [(info.first_offset + i, NOW + t) for i, t in enumerate(stamps)]
    expected = next(((o, t) for o, t in everything if t >= NOW + target), None)
    found = log.offset_for_timestamp(NOW + target)
    assert (None if found is None else (found.offset, found.timestamp)) == expected
    log.close()


@pytest.mark.parametrize("undecodable", ["no known codec", "a body that does not decode"])
def test_offset_for_timestamp_in_a_batch_not_read_here_is_the_batch_start(
    tmp_path: Path, undecodable: str
) -> None:
    # Attributes naming no codec (5), or an lz4 batch whose body is no lz4 frame (the
    # producer's CRC covers it): answered, not raised. A leader refuses the first from a
    # producer; a follower copies it as its leader holds it.
    log = open_log(tmp_path / "t-0")
    produce(log, ts=NOW)
    specs = [RecordSpec(b"a", timestamp=NOW + t) for t in (1, 50, 2)]
    codec = 5 if undecodable == "no known codec" else 3
    batch = build_batch(specs, base_offset=1, base_timestamp=NOW + 1, compression=codec)
    if codec == 3:
        batch[BATCH_HEADER_SIZE:] = b"\x00" * (len(batch) - BATCH_HEADER_SIZE)
        struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    log.append_as_follower(batch)
    found = log.offset_for_timestamp(NOW + 40)
    assert found is not None
    assert (found.offset, found.timestamp) == (1, NOW + 50)


def test_offset_for_timestamp_in_a_batch_whose_records_do_not_parse_is_the_batch_start(
    tmp_path: Path,
) -> None:
    # A batch whose CRC holds but whose record is cut short, as a follower copies it
    # (followers check no records): ListOffsets answers with the batch, where an
    # IndexError escaped and the broker closed the client's connection.
    log = open_log(tmp_path / "t-0", index_interval_bytes=0)
    batch = build_batch([RecordSpec(b"v", timestamp=NOW)], base_timestamp=NOW)
    batch = batch[:BATCH_HEADER_SIZE] + b"\x10\x00"
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    log.append_as_follower(batch)
    found = log.offset_for_timestamp(NOW)
    assert found is not None
    assert (found.offset, found.timestamp) == (0, NOW)


@pytest.mark.parametrize("compact", [False, True])
def test_the_leader_refuses_a_batch_whose_records_do_not_parse(
    tmp_path: Path, compact: bool
) -> None:
    # Uncompressed: walked on every topic. gzip: read where a compacted topic's keys are
    # looked at. Refused INVALID_RECORD, as Kafka's LogValidator refuses it; the batch
    # was acknowledged, and readers of the records failed on it later.
    log = open_log(tmp_path / "t-0", compact=compact)
    one = build_batch([RecordSpec(b"v", key=b"k", timestamp=NOW)], base_timestamp=NOW)
    cut = b"\x10\x00"  # a record of 8 bytes with one of them
    bad = [with_body(one, cut)]
    if compact:
        bad.append(with_body(one, codecs.compress(codecs.GZIP, cut), compression=codecs.GZIP))
    for batch in bad:
        with pytest.raises(InvalidRecordError, match="do not parse"):
            log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0
    assert log.append_as_leader(one, 0).first_offset == 0


def test_retention_by_time_takes_the_active_segment_last(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=400, retention_ms=60_000)
    for i in range(6):
        produce(log, size=200, ts=NOW + i * 10_000)
    log.update_high_watermark(log.log_end_offset)
    assert len(log.segment_base_offsets()) == 6
    clock.now = NOW + 95_000  # segments with timestamps up to NOW + 30s are past 60 s
    assert log.delete_old_segments() == 4
    assert log.segment_base_offsets() == [4, 5]
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 100)
    clock.now = NOW + 10_000_000
    # The active segment goes too, once past retention and below the high watermark:
    # a new, empty one is rolled at the log end first (Kafka 2.8's deleteSegments).
    assert log.delete_old_segments() == 2
    assert (log.segment_base_offsets(), log.log_start_offset) == ([6], 6)
    names = os.listdir(tmp_path / "t-0")
    assert not [n for n in names if n.endswith(".deleted")]


def test_a_batch_header_claiming_a_later_max_timestamp_does_not_pin_time_retention(
    tmp_path: Path,
) -> None:
    # A segment's largest timestamp decides its time retention. Taken from a producer's
    # header 10 years ahead of its records, it kept the segment for 10 years; Kafka 2.8
    # sets an uncompressed batch's maxTimestamp to its records' largest.
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, retention_ms=3_600_000)
    lying = build_batch([RecordSpec(b"v", timestamp=NOW)], base_timestamp=NOW)
    struct.pack_into(">q", lying, MAX_TIMESTAMP_OFFSET, NOW + 10 * 365 * 86_400_000)
    struct.pack_into(">I", lying, CRC_OFFSET, batch_crc(lying))
    assert log.append_as_leader(lying, 0).max_timestamp == NOW
    region = log.read(0, 1 << 20).region
    assert region is not None
    (stored,) = iter_batches(region.to_bytes())
    assert stored.max_timestamp == NOW
    log.roll()
    clock.now = NOW + 2 * 3_600_000
    produce(log, ts=clock.now)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == 1
    assert log.log_start_offset == 1


def test_retention_stops_at_the_high_watermark(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=400, retention_ms=1)
    for _ in range(5):
        produce(log, size=200)
    log.update_high_watermark(2)
    clock.now += 10_000
    log.delete_old_segments()
    assert log.segment_base_offsets() == [2, 3, 4]


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_bytes=900, retention_ms=-1)
    for _ in range(6):
        produce(log, size=200)
    log.update_high_watermark(log.log_end_offset)
    segment_size = log.size_in_bytes // 6
    assert log.delete_old_segments() == 2
    # Kafka's rule: a segment goes only if the log stays at least retention.bytes
    assert 900 <= log.size_in_bytes < 900 + segment_size
    assert log.log_start_offset == log.segment_base_offsets()[0]


def test_compact_only_topics_keep_their_segments(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_bytes=400, retention_ms=1, delete_enabled=False)
    for _ in range(3):
        produce(log, size=200)
    log.update_high_watermark(3)
    clock.now += 10_000
    assert log.delete_old_segments() == 0


def test_log_start_offset_moves_and_segments_below_it_go(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=-1)
    for _ in range(5):
        produce(log, size=200)
    log.update_high_watermark(5)
    assert log.maybe_increment_log_start_offset(3)
    assert not log.maybe_increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(6)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert batches_of(log.read(3, 1).to_bytes()) == [(3, 3)]
    assert log.delete_old_segments() == 3
    assert log.segment_base_offsets() == [3, 4]


def test_the_checkpoints_readers_give_what_the_properties_do(tmp_path: Path) -> None:
    """The checkpoints read offsets through C-level readers of the slots; each must
    follow its property through appends, a flush, high watermark and log start moves."""
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=-1)

    def readers() -> tuple[int, int, int]:
        return high_watermark_of(log), recovery_point_of(log), log_start_offset_of(log)

    def properties() -> tuple[int, int, int]:
        return log.high_watermark, log.recovery_point, log.log_start_offset

    assert readers() == properties() == (0, 0, 0)
    for _ in range(6):
        produce(log, size=200)
    log.flush()
    log.update_high_watermark(5)
    assert log.maybe_increment_log_start_offset(2)
    assert readers() == properties() == (5, 6, 2)
    log.truncate_to(4)
    assert readers() == properties() == (4, 4, 2)


def test_deleted_segments_stay_readable_until_the_delay(tmp_path: Path) -> None:
    deferred: list[tuple[Callable[[], None], int]] = []
    log = PartitionLog(
        tmp_path / "t-0",
        LogConfig(segment_bytes=400, retention_ms=-1, file_delete_delay_ms=60_000),
        defer=lambda action, delay: deferred.append((action, delay)),
    )
    for _ in range(3):
        produce(log, size=200)
    deferred.clear()  # roll flushes
    log.update_high_watermark(3)
    region = log.read(0, 1000)
    log.maybe_increment_log_start_offset(2)
    log.delete_old_segments()
    names = sorted(os.listdir(tmp_path / "t-0"))
    assert "00000000000000000000.log.deleted" in names
    assert batches_of(region.to_bytes()) == [(0, 0)]  # still readable
    assert [delay for _, delay in deferred] == [60_000]
    deferred[0][0]()
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".deleted")]


def test_truncate_to_removes_whole_batches_and_later_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=600)
    for epoch in (1, 1, 2, 2, 3, 3):
        produce(log, count=2, size=100, epoch=epoch)  # batches [0,1] [2,3] ... [10,11]
    assert len(log.segment_base_offsets()) > 2
    log.update_high_watermark(12)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(1, 0), (2, 4), (3, 8)]
    assert log.truncate_to(7)  # inside batch [6, 7]: it goes whole
    assert log.log_end_offset == 6
    assert log.high_watermark == 6
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(1, 0), (2, 4)]
    assert all(base <= 6 for base in log.segment_base_offsets())
    assert all_batches(log) == [(0, 1), (2, 3), (4, 5)]
    assert not log.truncate_to(100)
    # the log goes on from the new end
    assert produce(log, epoch=4) == 6
    assert log.end_offset_for_epoch(2) == (2, 6)
    assert log.end_offset_for_epoch(4) == (4, 7)
    assert all_batches(log) == [(0, 1), (2, 3), (4, 5), (6, 6)]


def test_truncate_below_the_first_segment_starts_over(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=-1)
    for _ in range(4):
        produce(log, size=200)
    log.update_high_watermark(4)
    log.maybe_increment_log_start_offset(2)
    log.delete_old_segments()
    assert log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset) == (1, 1)
    assert log.segment_base_offsets() == [1]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, count=3, epoch=1)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    assert log.epoch_cache.entries() == []
    assert log.segment_base_offsets() == [100]
    follower_batch = build_batch([b"x"], base_offset=100, partition_leader_epoch=4)
    assert log.append_as_follower(follower_batch).last_offset == 100
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == ["00000000000000000100.log"]


def test_follower_appends_keep_offsets_and_record_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    blob = (
        build_batch([b"a", b"b"], base_offset=0, partition_leader_epoch=1)
        + build_batch([b"c"], base_offset=2, partition_leader_epoch=1)
        + build_batch([b"d"], base_offset=3, partition_leader_epoch=4)
    )
    info = log.append_as_follower(blob)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 3, 3)
    assert log.read(0, 1 << 20).to_bytes() == bytes(blob)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(1, 0), (4, 3)]
    size = log.size_in_bytes
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(build_batch([b"e"], base_offset=3, partition_leader_epoch=4))
    assert (log.log_end_offset, log.size_in_bytes) == (4, size)
    # A gap (a compacted leader's dropped batches) is taken as it is.
    gap = build_batch([b"e"], base_offset=7, partition_leader_epoch=4)
    assert log.append_as_follower(gap).first_offset == 7
    assert log.log_end_offset == 8
    assert log.append_as_follower(b"").batch_count == 0


# A compacted leader's gap of more than 2**31 offsets, as a new replica fetches it: its
# active segment is empty at base 0 (or at the offset truncate_fully_and_start_at gave
# it), the first batch arrives at 3,000,000,000.
FAR = 3_000_000_000


def far_batch(offset: int, count: int = 1, epoch: int = 0) -> bytearray:
    return build_batch(
        [b"v%d" % i for i in range(count)],
        base_offset=offset,
        partition_leader_epoch=epoch,
        base_timestamp=NOW,
    )


def test_a_follower_batch_far_above_an_empty_segment_gets_a_segment_at_its_offset(
    tmp_path: Path,
) -> None:
    # Kafka 2.8's LogSegment.shouldRoll rolls on an offset the segment cannot hold
    # relative to its base whatever its size; Log.roll keeps the empty segment below.
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    log.append_as_follower(far_batch(FAR, 3))
    assert log.segment_base_offsets() == [0, FAR]
    log.append_as_follower(far_batch(FAR + 3))
    assert (log.log_start_offset, log.log_end_offset) == (0, FAR + 4)
    # a read anywhere in the gap gets the batch after it
    for offset in (0, 5, FAR - 1, FAR, FAR + 2):
        read = log.read(offset, 1 << 20, min_one_batch=False)
        assert read.first_offset == FAR
        assert batches_of(read.to_bytes()) == [(FAR, FAR + 2), (FAR + 3, FAR + 3)]
    assert all_batches(log) == [(FAR, FAR + 2), (FAR + 3, FAR + 3)]
    assert log.offset_for_timestamp(NOW) == (NOW, FAR, 0)
    log.flush()
    log.close()  # the time index's closing entry is relative to FAR
    for clean in (True, False):  # each segment read as it is, or every one recovered
        again = PartitionLog(
            tmp_path / "t-0",
            LogConfig(index_interval_bytes=1),
            time_ms=Clock(),
            clean_shutdown=clean,
            recovery_point=FAR + 4 if clean else 0,
        )
        assert (again.log_start_offset, again.log_end_offset) == (0, FAR + 4)
        assert again.segment_base_offsets() == [0, FAR]
        assert all_batches(again) == [(FAR, FAR + 2), (FAR + 3, FAR + 3)]
        again.close()


def test_a_follower_gap_of_more_than_2_to_the_31_is_recovered_after_a_crash(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    log.truncate_fully_and_start_at(7)  # every index file made: the one at 7 is opened
    log.append_as_follower(far_batch(7 + FAR, 3))
    log.flush()
    # a crash: no clean shutdown, every segment from the recovery point scanned
    again = PartitionLog(
        tmp_path / "t-0",
        LogConfig(index_interval_bytes=1),
        time_ms=Clock(),
        clean_shutdown=False,
        recovery_point=7,
        log_start_offset=7,
        high_watermark=7 + FAR + 3,
    )
    report = again.recovery_report
    assert report is not None
    assert (report.truncated_bytes, report.segments_deleted) == (0, 0), report
    assert (again.log_start_offset, again.log_end_offset) == (7, 7 + FAR + 3)
    assert again.segment_base_offsets() == [7, 7 + FAR]
    assert all_batches(again) == [(7 + FAR, 7 + FAR + 2)]
    again.append_as_follower(far_batch(7 + FAR + 3))
    assert again.log_end_offset == 7 + FAR + 4


def test_an_empty_segment_before_a_gapped_one_is_truncated_and_retained_as_others(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0", retention_ms=-1)
    log.append_as_follower(far_batch(FAR, 3))
    # Truncated into the gap: the gapped segment goes, the empty one is active again and
    # rolls again for the next batch.
    assert log.truncate_to(5)
    assert (log.log_end_offset, log.segment_base_offsets()) == (0, [0])
    log.append_as_follower(far_batch(FAR, 3))
    assert log.segment_base_offsets() == [0, FAR]
    # Truncated inside the gapped segment's batch: it goes whole, the segment stays.
    assert log.truncate_to(FAR + 1)
    assert (log.log_end_offset, log.segment_base_offsets()) == (FAR, [0, FAR])
    log.append_as_follower(far_batch(FAR, 3))
    # The log start offset following the leader's past the gap: the empty segment goes.
    log.update_high_watermark(FAR + 3)
    assert log.maybe_increment_log_start_offset(FAR)
    assert log.delete_old_segments() == 1
    assert (log.log_start_offset, log.segment_base_offsets()) == (FAR, [FAR])
    assert all_batches(log) == [(FAR, FAR + 2)]


def test_a_follower_append_spanning_more_than_2_to_the_31_is_refused_whole(
    tmp_path: Path,
) -> None:
    # No segment can hold both batches (Kafka's LogSegment.ensureOffsetInRange refuses
    # them with LogSegmentOffsetOverflowException): nothing is written, nothing rolls.
    log = open_log(tmp_path / "t-0")
    log.append_as_follower(far_batch(0))
    blob = far_batch(1) + far_batch(1 + FAR)
    with pytest.raises(OffsetOverflowError):
        log.append_as_follower(blob)
    assert (log.log_end_offset, log.segment_base_offsets()) == (1, [0])
    assert all_batches(log) == [(0, 0)]


def test_an_index_entry_too_far_from_its_base_is_a_storage_error(tmp_path: Path) -> None:
    segment = LogSegment.create(
        tmp_path, 10, index_interval_bytes=1, max_index_bytes=1 << 20, new_directory=True
    )
    with pytest.raises(OffsetOverflowError):
        segment.offset_index.append(10 + 2**31, 0)
    with pytest.raises(OffsetOverflowError):
        segment.offset_index.append(9, 0)
    with pytest.raises(OffsetOverflowError):
        segment.time_index.maybe_append(NOW, 10 + 2**31)
    segment.offset_index.append(10 + 2**31 - 1, 0)  # the largest relative offset
    segment.time_index.maybe_append(NOW, 10 + 2**31 - 1)
    assert segment.offset_index.entries == segment.time_index.entries == 1
    # a segment refuses batches it cannot index before writing them
    batch = far_batch(10 + 2**31)
    with pytest.raises(OffsetOverflowError):
        segment.append(memoryview(batch), tuple(iter_batches(batch)))
    assert segment.size == 0
    segment.close()


def test_leader_appends_record_epoch_starts_and_refuse_older_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, count=2, epoch=3)
    produce(log, count=2, epoch=3)
    log.assign_epoch_start_offset(5, log.log_end_offset)  # becoming leader in epoch 5
    produce(log, epoch=5)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(3, 0), (5, 4)]
    with pytest.raises(FencedLeaderEpochError):
        produce(log, epoch=4)
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.end_offset_for_epoch(4) == (3, 4)
    assert log.end_offset_for_epoch(5) == (5, 5)
    assert log.end_offset_for_epoch(9) == (-1, -1)


def test_log_append_time_topics_stamp_the_broker_clock(tmp_path: Path) -> None:
    clock = Clock(NOW + 123)
    log = open_log(tmp_path / "t-0", clock, log_append_time=True)
    info = log.append_as_leader(build_batch([b"a"], base_timestamp=5), 0)
    assert info.log_append_time == NOW + 123
    record = next(iter_records(log.read(0, 1000).to_bytes()))
    assert record.timestamp == NOW + 123


def test_flush_moves_the_recovery_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []  # the names of the files fsynced
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    log = open_log(tmp_path / "t-0", flush_messages=5)
    produce(log, count=3)
    assert log.recovery_point == 0
    assert synced == []  # neither data nor the epoch's start: both wait for a flush
    produce(log, count=3)  # 6 unflushed >= flush.messages
    assert log.recovery_point == 6
    # The epoch entries first (recovery will not re-read these batches), then the log; not
    # the indexes: too few bytes for an entry, so never opened, nothing to sync.
    assert synced[:4] == [
        "leader-epoch-checkpoint.tmp",
        "t-0",
        "00000000000000000000.log",
        "t-0",
    ]
    synced.clear()
    produce(log, count=1, size=5000)  # past index.interval.bytes: the next batch is indexed
    produce(log, count=4)
    assert synced[0] == "00000000000000000000.log"
    assert "00000000000000000000.index" in synced
    synced.clear()
    log.flush()
    assert not synced  # nothing new to flush


def test_a_flush_that_a_truncation_overtook_leaves_the_recovery_point_to_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush fsyncs outside the lock. A follower's truncation and its appends landing
    meanwhile (on its fetcher thread) are not in what was fsynced: the recovery point stays
    where the truncation put it, and the roll's own flush then syncs them."""
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    for _ in range(5):
        produce(log, size=80, epoch=1)
    synced: dict[int, int] = {}  # segment base offset -> bytes it held when fsynced
    real_flush = LogSegment.flush

    def flush(segment: LogSegment) -> None:
        real_flush(segment)
        synced[segment.base_offset] = segment.size
        if len(synced) == 1 and log.log_end_offset == 5:  # meanwhile, on the fetcher thread
            log.truncate_to(2)
            while len(log.segment_base_offsets()) < 2:  # rolls at offset 3
                produce(log, size=330, epoch=2)

    monkeypatch.setattr(LogSegment, "flush", flush)
    log.flush()  # target: the log end then, 5
    assert log.recovery_point == 0  # where the truncation put it (nothing was flushed)
    log.flush(log.segment_base_offsets()[1])  # the roll's flush, deferred to the scheduler
    first = log.segments_snapshot()[0]
    assert log.recovery_point == first.next_offset()
    assert synced[0] == first.size  # every byte below the recovery point was fsynced


def test_flush_ms_policy(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, flush_ms=1000)
    produce(log)
    assert not log.maybe_flush()
    clock.now += 1000
    assert log.maybe_flush()
    assert log.recovery_point == 1
    clock.now += 5000
    assert not log.maybe_flush()  # nothing unflushed


def test_a_region_can_be_sent_with_sendfile(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        produce(log, count=2, size=300)
    region = log.read(0, 1 << 20).region
    assert region is not None
    left, right = socket.socketpair()
    with left, right:
        assert region.sendfile(left.fileno()) == region.length
        received = b""
        while len(received) < region.length:
            received += right.recv(1 << 16)
    assert received == region.to_bytes()
    assert batches_of(received) == [(0, 1), (2, 3), (4, 5)]


def test_reads_beside_appends_see_whole_valid_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=20_000, index_interval_bytes=500)
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        rng = random.Random(3)
        try:
            while not stop.is_set():
                end = log.log_end_offset
                if end == 0:
                    continue
                offset = rng.randrange(end)
                read = log.read(offset, rng.choice([1, 2000, 1 << 20]))
                got = batches_of(read.to_bytes())
                assert got, offset
                assert got[0][0] <= offset <= got[0][1]
                assert got[-1][1] + 1 == read.next_offset <= log.log_end_offset
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(400):
            produce(log, count=1 + i % 4, size=50 + i % 200)
    finally:
        stop.set()
        thread.join(60)  # a bound that only catches a hang
        assert not thread.is_alive(), "thread still running after 60 s"
    assert not errors, errors[0]
    assert len(log.segment_base_offsets()) > 3


def test_logs_made_in_the_same_millisecond_share_its_int(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each log kept two ints of the time it was made (its last flush, its segment's
    # creation): 6.4 MB for a broker making 100,000 logs, about ten a millisecond.
    monkeypatch.setattr(time, "time", lambda: NOW / 1000)  # the module storage.segment uses

    def fresh_int_clock() -> int:
        return int(str(NOW))  # equal each time, a new object each time

    made = [
        PartitionLog(tmp_path / f"t-{p}", LogConfig(), time_ms=fresh_int_clock) for p in range(3)
    ]
    assert len({id(log._last_flush_ms) for log in made}) == 1
    assert made[0]._last_flush_ms == NOW
    assert len({id(log._segments[0].created_ms) for log in made}) == 1
    assert made[0]._segments[0].created_ms == NOW
    later = int(str(NOW + 1))
    assert shared_ms(later) is later
    assert shared_ms(int(str(NOW + 1))) is later
    assert shared_ms(NOW + 2) == NOW + 2


def test_a_partition_directory_is_kept_as_its_parts_shared_between_logs(tmp_path: Path) -> None:
    # Its path as one string took ~100 bytes a log: 10 MB in a broker hosting 100,000.
    logs = [open_log(tmp_path / f"orders-{p}") for p in range(3)]
    for log in logs:
        produce(log)
        log.flush()
    parts = [(log, log._segments[0], log.epoch_cache) for log in logs]

    def strings(obj: object) -> set[int]:
        return {id(r) for r in gc.get_referents(obj) if isinstance(r, str)}

    # Every string the three objects of a log hold is held by the other logs' too.
    held = [set().union(*map(strings, objs)) for objs in parts]
    assert held[0] == held[1] == held[2]
    for p, log in enumerate(logs):
        directory = os.path.join(tmp_path, f"orders-{p}")
        assert log.directory == directory
        assert log.log_dir == str(tmp_path)
        assert log._segments[0].directory == directory
        assert str(log._segments[0].path) == os.path.join(directory, "0" * 20 + ".log")
        assert str(log.epoch_cache.path) == os.path.join(directory, "leader-epoch-checkpoint")
        assert log.epoch_cache.path is not None
        assert os.path.exists(log.epoch_cache.path)  # written where it says


def test_only_the_name_kafka_makes_is_a_partition_directory() -> None:
    assert parse_log_dir_name("orders-0") == ("orders", 0)
    assert parse_log_dir_name("my-topic-12") == ("my-topic", 12)
    # A second name for a partition, or digits that are not ASCII ("\u00b2" is a digit to
    # str.isdigit, and int() refuses it).
    for name in ("orders-007", "orders-00", "orders-\u00b2", "orders-\u0663", "orders-", "-1"):
        assert parse_log_dir_name(name) is None, name


def test_a_segment_or_cache_outside_a_partition_directory_keeps_its_whole_path(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    segment = LogSegment.create(scratch, 0, index_interval_bytes=4096, max_index_bytes=1 << 20)
    assert segment.directory == str(scratch)
    assert segment.path == scratch / ("0" * 20 + ".log")
    assert segment.path.exists()
    cache = LeaderEpochCache(scratch / "checkpoint")
    assert cache.path == scratch / "checkpoint"


def test_logs_share_their_locks_from_a_fixed_set(tmp_path: Path) -> None:
    # A lock each would cost a broker hosting 100,000 partitions ~11 MB.
    logs = [open_log(tmp_path / f"t-{p}") for p in range(LOG_LOCK_STRIPES + 200)]
    locks = {id(log._lock) for log in logs}
    assert len(locks) <= LOG_LOCK_STRIPES
    assert len(locks) > LOG_LOCK_STRIPES // 2  # spread over the set, not a few of them


def test_logs_sharing_a_lock_append_roll_truncate_and_flush_side_by_side(
    tmp_path: Path,
) -> None:
    """Four threads each work one log, and the four logs share one lock: no log waits
    for another's lock while holding its own, so none hangs, and each ends as if alone."""
    candidates = [open_log(tmp_path / f"t-{p}", segment_bytes=4_000) for p in range(3000)]
    by_lock: dict[int, list[PartitionLog]] = {}
    for log in candidates:
        by_lock.setdefault(id(log._lock), []).append(log)
    logs = max(by_lock.values(), key=len)[:4]
    assert len(logs) >= 3
    assert len({id(log._lock) for log in logs}) == 1
    errors: list[BaseException] = []

    def work(log: PartitionLog) -> None:
        try:
            for i in range(150):
                produce(log, count=1 + i % 3, size=100)
                if i % 25 == 24:
                    log.truncate_to(log.log_end_offset - 1)
                    log.flush()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(log,), daemon=True) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung on the shared lock"
    assert not errors, errors[0]
    # What each log must hold: a truncation to one below the end drops the last batch.
    sizes: list[int] = []
    for i in range(150):
        sizes.append(1 + i % 3)
        if i % 25 == 24:
            sizes.pop()
    ends = [sum(sizes[: k + 1]) - 1 for k in range(len(sizes))]
    for log in logs:
        assert [last for _first, last in all_batches(log)] == ends
        assert len(log.segment_base_offsets()) > 3
        assert log.recovery_point <= log.log_end_offset == ends[-1] + 1


def test_epochs_not_yet_written_are_rebuilt_by_recovery_after_a_crash(tmp_path: Path) -> None:
    """A new leader's epoch start is not fsynced at once; a crash before the log's flush
    loses nothing: recovery reads the epochs of the batches above the recovery point."""
    log = open_log(tmp_path / "t-0")
    produce(log, count=2, epoch=1)
    log.flush()  # epochs up to here durable, recovery point 2
    log.assign_epoch_start_offset(4, 2)  # a new leader
    produce(log, count=3, epoch=4)
    log.assign_epoch_start_offset(6, 5)  # another; no batch in it before the crash
    # The crash: nothing more is written; the files are reopened as they are.
    again = PartitionLog(tmp_path / "t-0", LogConfig(), recovery_point=2)
    assert again.epoch_cache.entries() == [(1, 0), (4, 2)]
    assert again.end_offset_for_epoch(1) == (1, 2)
    assert again.end_offset_for_epoch(4) == (4, 5)  # where epoch 6 would have said it ends
    log.close()
    again.close()


def test_a_new_log_makes_its_index_files_on_first_append(tmp_path: Path) -> None:
    """A partition made in a new directory has only its .log file (file creation is a
    journaled metadata write, 100,000s of them when a broker creates its partitions); the
    indexes appear with the first append and serve lookups as before."""
    directory = tmp_path / "t-0"
    log = open_log(directory, index_interval_bytes=1)
    assert sorted(os.listdir(directory)) == ["00000000000000000000.log"]
    log.flush()
    log.close()
    for clean in (True, False):  # a never-written log reopened, after a clean stop or not
        log = PartitionLog(directory, LogConfig(index_interval_bytes=1), clean_shutdown=clean)
        assert log.recovery_report is not None
        assert log.log_end_offset == 0
        assert sorted(os.listdir(directory)) == ["00000000000000000000.log"]
        log.close()
    log = PartitionLog(directory, LogConfig(index_interval_bytes=1), clean_shutdown=True)
    for _ in range(4):
        produce(log, size=100)
    assert {
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
    } <= set(os.listdir(directory))
    log.flush()
    log.close()
    again = PartitionLog(directory, LogConfig(index_interval_bytes=1), clean_shutdown=True)
    assert again.recovery_report is not None
    assert again.recovery_report.segments_recovered == 0
    assert batches_of(again.read(2, 1).to_bytes()) == [(2, 2)]
    assert all_batches(again) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    again.close()


def test_a_new_segment_in_an_existing_directory_empties_leftover_index_files(
    tmp_path: Path,
) -> None:
    """Only a directory made just now is known to hold nothing: a segment made where
    one was before (a log truncated fully, here) still empties the index files there,
    so no stale entry points into the new .log."""
    directory = tmp_path / "t-0"
    log = open_log(directory, index_interval_bytes=1)
    for _ in range(4):
        produce(log, size=100)
    log.truncate_fully_and_start_at(0)
    assert os.path.getsize(directory / "00000000000000000000.index") == 0
    assert os.path.getsize(directory / "00000000000000000000.timeindex") == 0
    for _ in range(2):
        produce(log, size=300)
    assert all_batches(log) == [(0, 0), (1, 1)]
    log.close()


def test_a_file_renamed_while_a_reader_opens_it_is_found_under_one_name(tmp_path: Path) -> None:
    """A segment's files open on first use, by name; retention renames them (.deleted)
    while readers may be opening them. The rename and the new name are one step for a
    reader: it never finds neither name (an I/O error, which would take the whole log
    directory offline), and an index opened meanwhile leaves no empty file under the old
    name. Threads switch every microsecond here, so a window between the two would show."""
    from storage.index import OffsetIndex
    from storage.segment import SegmentFile

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for i in range(1000):
            log_path, index_path = tmp_path / f"{i:05d}.log", tmp_path / f"{i:05d}.index"
            log_path.write_bytes(b"x" * 64)
            index_path.write_bytes(b"")
            segment_file = SegmentFile(log_path)  # not opened yet
            index = OffsetIndex(index_path, 0, 4096)
            errors: list[BaseException] = []

            def read(
                f: SegmentFile = segment_file,
                idx: OffsetIndex = index,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    assert f.pread(8, 0) == b"x" * 8
                    idx.lookup(0)
                except BaseException as e:
                    errors.append(e)

            reader = threading.Thread(target=read)
            reader.start()
            segment_file.rename(tmp_path / f"{i:05d}.log.deleted")
            index.rename(tmp_path / f"{i:05d}.index.deleted")
            reader.join(60)  # a bound that only catches a hang
            assert not reader.is_alive(), "reader still running after 60 s"
            assert errors == [], errors
            assert not log_path.exists()
            assert not index_path.exists(), "an empty index made under the old name"
            segment_file.close()
            index.close()
    finally:
        sys.setswitchinterval(interval)


# --- boundaries Kafka 2.8 draws (each test kills a mutant the others let live) --------


def test_a_read_leaves_out_a_first_batch_ending_at_the_limit(tmp_path: Path) -> None:
    """Only batches wholly below max_offset_exclusive (the high watermark) are read: a
    batch [0, 2] read below 2 gives nothing, not its offset 2 a consumer may not see."""
    log = open_log(tmp_path / "t-0")
    produce(log, count=3)  # [0, 2]
    produce(log, count=3)  # [3, 5]
    assert log.read(0, 1 << 20, max_offset_exclusive=2).region is None
    assert log.read(4, 1 << 20, max_offset_exclusive=5).region is None


def test_max_bytes_takes_the_batches_that_fill_it_exactly(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        produce(log, size=200)
    one = log.read(0, 1).size
    assert batches_of(log.read(0, 2 * one).to_bytes()) == [(0, 0), (1, 1)]
    assert batches_of(log.read(0, 2 * one - 1).to_bytes()) == [(0, 0)]


def test_the_high_watermark_is_never_set_past_the_log_end(tmp_path: Path) -> None:
    """Kafka 2.8's Log.updateHighWatermark: clamped to [log start, log end]."""
    log = open_log(tmp_path / "t-0")
    produce(log, count=2)
    assert log.update_high_watermark(100) == 2
    assert log.high_watermark == 2


def test_truncating_to_the_log_end_cuts_nothing(tmp_path: Path) -> None:
    """Kafka 2.8's truncateTo: a target at or past the log end is no truncation (false):
    the truncation count stays, so a cleaning or a flush under way is not undone."""
    log = open_log(tmp_path / "t-0")
    produce(log, count=2)
    truncations = log.truncations
    assert not log.truncate_to(log.log_end_offset)
    assert log.truncations == truncations
    assert log.log_end_offset == 2


def test_a_truncation_below_the_log_start_moves_the_log_start_down(tmp_path: Path) -> None:
    """Kafka 2.8's truncateTo: completeTruncation(min(target, logStartOffset)): the log
    start never stays above the new log end."""
    log = open_log(tmp_path / "t-0", retention_ms=-1)
    for _ in range(4):
        produce(log)
    log.update_high_watermark(4)
    assert log.maybe_increment_log_start_offset(3)  # inside the only segment
    assert log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (2, 2, 2)


def test_a_segment_rolls_only_when_the_batch_would_pass_segment_bytes(tmp_path: Path) -> None:
    """Kafka 2.8's shouldRoll: size > segment.bytes - the batch's size. Two batches filling
    segment.bytes exactly share a segment."""
    one = len(build_batch([b"v" * 100], base_timestamp=NOW))
    log = open_log(tmp_path / "t-0", segment_bytes=2 * one)
    for _ in range(3):
        produce(log)
    assert log.segment_base_offsets() == [0, 2]


def test_a_segment_rolls_only_once_more_than_segment_ms_has_passed(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_ms=60_000)
    produce(log, ts=NOW)
    produce(log, ts=NOW + 60_000)  # exactly segment.ms: not more
    assert log.segment_base_offsets() == [0]
    produce(log, ts=NOW + 60_001)
    assert log.segment_base_offsets() == [0, 2]


def test_a_full_offset_index_rolls_the_segment(tmp_path: Path) -> None:
    """Kafka 2.8's shouldRoll: offsetIndex.isFull (segment.index.bytes / 8 entries)."""
    # Records of one timestamp: the time index (24 // 12 entries) takes one entry only.
    log = open_log(tmp_path / "t-0", segment_index_bytes=24, index_interval_bytes=0)
    for _ in range(8):
        produce(log)
    assert len(log.segment_base_offsets()) > 1
    for segment in log.segments_snapshot():
        assert segment.offset_index.entries <= 3


def test_an_empty_active_segment_never_rolls_however_old(tmp_path: Path) -> None:
    """Kafka 2.8's shouldRoll rolls by time only a segment with data (size > 0): an empty
    one would be replaced by a second segment at the same base offset."""
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_ms=60_000)
    clock.now += 10 * 60_000
    produce(log, ts=clock.now)
    assert log.segment_base_offsets() == [0]
    assert all_batches(log) == [(0, 0)]


def test_a_segment_truncation_cuts_its_time_index_too(tmp_path: Path) -> None:
    """Kafka 2.8's LogSegment.truncateTo truncates the time index: the segment's largest
    timestamp (time retention) is the one of what is left."""
    log = open_log(tmp_path / "t-0", index_interval_bytes=0)
    for i in range(4):
        produce(log, ts=NOW + i)
    assert log.truncate_to(2)
    segment = log.segments_snapshot()[-1]
    assert (segment.max_timestamp, segment.offset_of_max_timestamp) == (NOW + 1, 1)
    assert segment.time_index.last_entry is None or segment.time_index.last_entry.offset < 2


def test_offset_for_timestamp_finds_the_first_record_of_a_timestamp_an_index_entry_has(
    tmp_path: Path,
) -> None:
    """The time index search starts after the last entry whose timestamp is below the
    one asked (Kafka 2.8's lookup: at the last entry at or below it, scanning from its
    offset): an entry of that very timestamp may have records of it before its offset."""
    log = open_log(tmp_path / "t-0", index_interval_bytes=0)
    for ts in (NOW, NOW, NOW + 1):
        produce(log, ts=ts)  # time index: (NOW, 0), (NOW + 1, 2)
    found = log.offset_for_timestamp(NOW)
    assert found is not None
    assert (found.offset, found.timestamp) == (0, NOW)


@pytest.mark.parametrize("compression", [None, Compression.GZIP])
def test_an_incomplete_entry_after_a_producers_batches_is_not_written(
    tmp_path: Path, compression: int | None
) -> None:
    """Kafka 2.8's Log.append counts a producer's whole batches only (its iterator ends at
    an incomplete entry) and writes them only (trimInvalidBytes); segment.bytes is held
    to what is written, as Log.append checks the trimmed records. The topic's
    compression.type recompresses the whole batches alone. It was CorruptRecordError
    ("only N bytes remain")."""
    batch = build_batch([b"v" * 50] * 2, base_timestamp=NOW)
    config = LogConfig(segment_bytes=len(batch), compression=compression)
    log = PartitionLog(tmp_path / "t-0", config, time_ms=Clock())
    tail = bytes(build_batch([b"w"]))[:-1]
    info = log.append_as_leader(batch + tail, 0)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 1, 2)
    written = os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log")
    assert written == log.size_in_bytes
    assert (written == len(batch)) if compression is None else (written < len(batch))
    assert all_batches(log) == [(0, 1)]
    assert [r.value for r in iter_records(log.read(0, 1 << 20).to_bytes())] == [b"v" * 50] * 2
