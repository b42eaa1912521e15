"""Recovery at start: torn and corrupt tails, index rebuilds, clean shutdown, epochs."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.log import LogConfig, PartitionLog
from storage.records import batch_crc, iter_batches
from storage.testing import build_batch

SEGMENT = "00000000000000000000"
NOW = 1_700_000_000_000


def open_log(directory: Path, **kwargs: object) -> PartitionLog:
    config = kwargs.pop("config", LogConfig(index_interval_bytes=100))
    return PartitionLog(directory, config, **kwargs)  # type: ignore[arg-type]


def fill(directory: Path, batches: int = 6, config: LogConfig | None = None) -> list[int]:
    """A log of ``batches`` batches with varied sizes and epochs; returns the byte
    position where each batch ends in the first segment."""
    log = open_log(directory, config=config or LogConfig(index_interval_bytes=100))
    for i in range(batches):
        log.append_as_leader(build_batch([bytes([65 + i]) * (20 + 15 * i)] * (1 + i % 3)), i // 2)
    log.close()
    ends: list[int] = []
    data = (directory / f"{SEGMENT}.log").read_bytes()
    for header in iter_batches(data):
        ends.append(header.position + header.size)
    return ends


def read_all(log: PartitionLog) -> bytes:
    parts: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 30)
        parts.append(read.to_bytes())
        offset = read.next_offset
    return b"".join(parts)


def test_torn_tail_at_every_byte_of_the_last_batch(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    ends = fill(directory)
    log_file = directory / f"{SEGMENT}.log"
    original = log_file.read_bytes()
    last_start = ends[-2]
    prefix_offsets = [(h.base_offset, h.last_offset) for h in iter_batches(original)][:-1]
    for cut in range(last_start, len(original) + 1):
        log_file.write_bytes(original[:cut])
        log = open_log(directory)  # unclean: no recovery point, so everything is scanned
        report = log.recovery_report
        assert report is not None
        if cut == len(original):
            assert report.truncated_bytes == 0
            assert log.log_end_offset == prefix_offsets[-1][1] + 1 + 3
        elif cut == last_start:  # the last batch entirely gone: a valid, shorter log
            assert report.truncated_bytes == 0
            assert log.log_end_offset == prefix_offsets[-1][1] + 1
        else:
            assert report.truncated_bytes == cut - last_start, cut
            assert report.truncation_reason is not None
            assert log.log_end_offset == prefix_offsets[-1][1] + 1
            assert read_all(log) == original[:last_start]
            assert log_file.stat().st_size == last_start
        log.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_recovered_log_is_the_longest_valid_prefix(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    directory = tmp_path_factory.mktemp("rec") / "t-0"
    ends = fill(directory, batches=5)
    log_file = directory / f"{SEGMENT}.log"
    original = bytearray(log_file.read_bytes())
    starts = [0, *ends[:-1]]
    position = data.draw(st.integers(0, len(original) - 1), label="position")
    batch = max(i for i, s in enumerate(starts) if s <= position)
    if 12 <= position - starts[batch] < 16:
        return  # partitionLeaderEpoch is outside the CRC, by design: not a detectable change
    if position - starts[batch] < 8:
        # So is baseOffset: a lower one is caught (offsets go back), a higher one reads as
        # a compacted log's gap (Kafka's recovery does not check it either).
        return
    original[position] ^= data.draw(st.integers(1, 255), label="xor")
    log_file.write_bytes(original)
    log = open_log(directory)
    assert read_all(log) == bytes(original[: starts[batch]])
    assert log.recovery_report is not None
    assert log.recovery_report.truncated_bytes == len(original) - starts[batch]
    log.close()


def test_zeros_after_the_last_batch_are_cut(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    ends = fill(directory)
    with open(directory / f"{SEGMENT}.log", "ab") as f:
        f.write(bytes(4096))  # a preallocated or half-written tail
    log = open_log(directory)
    assert log.recovery_report is not None
    assert log.recovery_report.truncated_bytes == 4096
    assert log.size_in_bytes == ends[-1]


def test_a_clean_shutdown_skips_the_scan(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory)
    log = open_log(directory, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 0
    assert log.recovery_point == log.log_end_offset == 12


def test_only_segments_from_the_recovery_point_are_scanned(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=300, index_interval_bytes=100)
    log = open_log(directory, config=config)
    for _ in range(10):
        log.append_as_leader(build_batch([b"x" * 150]), 0)
    bases = log.segment_base_offsets()
    log.close()
    assert len(bases) == 10
    log = open_log(directory, config=config, recovery_point=7)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 3  # the one holding 7, and after
    assert log.recovery_point == 7
    log.close()


def test_a_torn_middle_segment_drops_every_later_one(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=300)
    log = open_log(directory, config=config)
    for _ in range(6):
        log.append_as_leader(build_batch([b"x" * 150]), 0)
    log.close()
    middle = directory / f"{3:020d}.log"
    os.truncate(middle, middle.stat().st_size - 1)
    log = open_log(directory, config=config, recovery_point=2)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_deleted == 2
    assert log.log_end_offset == 3
    assert log.segment_base_offsets() == [0, 1, 2, 3]
    assert not (directory / f"{4:020d}.log").exists()


def test_rebuilt_indexes_equal_the_ones_written(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory, batches=12)
    written = {
        suffix: (directory / f"{SEGMENT}.{suffix}").read_bytes()
        for suffix in ("index", "timeindex")
    }
    assert written["index"]
    log = open_log(directory)  # unclean: rebuilds
    log.close()
    for suffix, content in written.items():
        assert (directory / f"{SEGMENT}.{suffix}").read_bytes() == content


def test_batches_without_timestamps_get_no_time_index_entry(tmp_path: Path) -> None:
    """A batch's maxTimestamp is -1 when its records carry none: the empty time index got
    an entry (-1, offset -1), below the segment's base, so every load found the index
    corrupt and rescanned the segment. Kafka's maybeAppend compares with (-1, base) and
    writes none; a rebuild writes the same entries as the appends did."""
    directory = tmp_path / "t-0"
    config = LogConfig(index_interval_bytes=100, segment_bytes=700)
    log = open_log(directory, config=config)
    for i in range(12):  # the first segments' batches have no timestamps, the last's do
        log.append_as_leader(build_batch([b"v" * 80], base_timestamp=-1 if i < 8 else 1000 + i), 0)
    bases = log.segment_base_offsets()
    log.close()
    assert len(bases) == 3
    written = {base: (directory / f"{base:020d}.timeindex").read_bytes() for base in bases}
    assert written[bases[0]] == written[bases[1]] == b""
    assert written[bases[2]]
    log = open_log(directory, config=config, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 0
    log.close()
    log = open_log(directory, config=config)  # unclean, from offset 0: rebuilds them all
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 3
    log.close()
    for base, content in written.items():
        assert (directory / f"{base:020d}.timeindex").read_bytes() == content


@pytest.mark.parametrize("index_interval_bytes", [100, 4096])  # offset index entries or none
def test_an_empty_time_index_beside_timestamps_is_rebuilt_after_a_clean_shutdown(
    tmp_path: Path, index_interval_bytes: int
) -> None:
    """An empty time index passed the checks, so the segment's largest timestamp read as
    none (-1) and a lookup by timestamp skipped it: a consumer resetting by time skipped
    its records. Only a segment without timestamps has an empty time index (an offset
    index entry, a roll and a close each write one), so it is rebuilt."""
    directory = tmp_path / "t-0"
    config = LogConfig(index_interval_bytes=index_interval_bytes, segment_bytes=700)
    log = open_log(directory, config=config)
    for i in range(12):
        log.append_as_leader(build_batch([b"v" * 80], base_timestamp=NOW + i * 1000), 0)
    bases = log.segment_base_offsets()
    log.close()
    assert len(bases) == 3
    time_index = directory / f"{bases[0]:020d}.timeindex"
    good = time_index.read_bytes()
    time_index.write_bytes(b"")
    log = open_log(directory, config=config, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    assert time_index.read_bytes() == good
    found = log.offset_for_timestamp(NOW + 1500)
    assert found is not None
    assert (found.offset, found.timestamp) == (2, NOW + 2000)
    log.close()


@pytest.mark.parametrize("index_interval_bytes", [100, 4096])
def test_an_empty_time_index_beside_batches_without_timestamps_is_kept(
    tmp_path: Path, index_interval_bytes: int
) -> None:
    """The other side of the check above: batches without timestamps write no time index
    entry, and their segments load as they are after a clean shutdown."""
    directory = tmp_path / "t-0"
    config = LogConfig(index_interval_bytes=index_interval_bytes, segment_bytes=700)
    log = open_log(directory, config=config)
    for _ in range(12):
        log.append_as_leader(build_batch([b"v" * 80], base_timestamp=-1), 0)
    log.close()
    log = open_log(directory, config=config, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments == 3
    assert log.recovery_report.segments_recovered == 0
    assert log.offset_for_timestamp(0) is None
    log.close()


@pytest.mark.parametrize("damage", ["missing", "torn", "past-the-end"])
def test_a_bad_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path: Path, damage: str) -> None:
    directory = tmp_path / "t-0"
    fill(directory, batches=12)
    index = directory / f"{SEGMENT}.index"
    good = index.read_bytes()
    if damage == "missing":
        index.unlink()
    elif damage == "torn":
        index.write_bytes(good + b"\x00\x00\x01")
    else:
        index.write_bytes(good + (1000).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    log = open_log(directory, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    assert index.read_bytes() == good
    for offset in range(log.log_end_offset):
        read = log.read(offset, 1)
        assert read.first_offset <= offset < read.next_offset


@pytest.mark.parametrize("into", ["header", "body", "an-earlier-batch", "near-the-end"])
def test_an_index_entry_not_at_its_batch_is_rebuilt_after_a_clean_shutdown(
    tmp_path: Path, into: str
) -> None:
    """The log end offset is read from the batches after the last index entry: an entry
    pointing inside the file but not at its batch had garbage parsed as batch headers (a
    log end offset in the billions, or a CorruptRecordError failing the load). The
    batch there must be the entry's, so the index is rebuilt instead."""
    directory = tmp_path / "t-0"
    ends = fill(directory, batches=12)
    index = directory / f"{SEGMENT}.index"
    good = index.read_bytes()
    position = {
        "header": ends[-3] + 7,
        "body": ends[-3] + 70,
        "an-earlier-batch": ends[2],  # a batch boundary, of other offsets
        "near-the-end": ends[-1] - 20,  # less than a header left
    }[into]
    index.write_bytes(good[:-4] + position.to_bytes(4, "big"))
    log = open_log(directory, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    assert log.recovery_report.truncated_bytes == 0
    assert index.read_bytes() == good
    assert log.log_end_offset == 24
    for offset in range(log.log_end_offset):
        read = log.read(offset, 1)
        assert read.first_offset <= offset < read.next_offset
    log.close()


def test_a_torn_last_batch_after_a_clean_shutdown_is_cut(tmp_path: Path) -> None:
    """A clean shutdown skips the scan, and the log end offset is read from the last
    segment's batch headers: a batch running past the file's end counted as whole (a log
    end offset past the data). The segment is recovered as after a crash instead."""
    directory = tmp_path / "t-0"
    ends = fill(directory, batches=12)
    os.truncate(directory / f"{SEGMENT}.log", ends[-1] - 1)
    log = open_log(directory, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    assert log.recovery_report.truncated_bytes == ends[-1] - 1 - ends[-2]
    assert log.log_end_offset == 21  # the last batch (offsets 21..23) is gone
    assert log.size_in_bytes == ends[-2]
    log.close()


def test_leftover_files_are_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory)
    (directory / f"{5:020d}.log.deleted").write_bytes(b"old")
    (directory / "leader-epoch-checkpoint.tmp").write_text("junk")
    (directory / f"{99:020d}.index").write_bytes(b"")  # an index without a log
    log = open_log(directory, clean_shutdown=True)
    names = set(os.listdir(directory))
    assert f"{5:020d}.log.deleted" not in names
    assert "leader-epoch-checkpoint.tmp" not in names
    assert f"{99:020d}.index" not in names
    assert log.segment_base_offsets() == [0]


def test_recovery_restores_epochs_and_drops_those_past_the_end(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory)  # epochs 0, 0, 1, 1, 2, 2 on batches of 1, 2, 3, 1, 2, 3 records
    saved = (directory / "leader-epoch-checkpoint").read_text()
    assert saved == "0\n3\n0 0\n1 3\n2 7\n"
    (directory / "leader-epoch-checkpoint").unlink()  # lost: rebuilt from the batches
    log = open_log(directory)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(0, 0), (1, 3), (2, 7)]
    log.close()
    log_file = directory / f"{SEGMENT}.log"
    data = log_file.read_bytes()
    last_two = [h.position for h in iter_batches(data)][-2]
    os.truncate(log_file, last_two + 5)  # epoch 2 loses both its batches
    log = open_log(directory)
    assert log.log_end_offset == 7
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(0, 0), (1, 3)]


def test_an_empty_directory_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-3", log_start_offset=500, high_watermark=9999)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert log.segment_base_offsets() == [500]


def test_reopening_keeps_appending_where_it_stopped(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    fill(directory)
    copy = tmp_path / "copy-0"
    shutil.copytree(directory, copy)
    for where, clean in ((directory, True), (copy, False)):
        log = open_log(where, clean_shutdown=clean)
        info = log.append_as_leader(build_batch([b"z"]), 3)
        assert info.first_offset == 12
        assert log.read(12, 100).first_offset == 12
        assert log.offset_for_timestamp(0) is not None
        log.close()


def _negate_index_position(index: Path, slot: int) -> int:
    """Garbage in entry ``slot``'s position (its top bit set: negative); its offset."""
    data = bytearray(index.read_bytes())
    rel: int
    rel, _position = struct.unpack_from(">ii", data, 8 * slot)
    struct.pack_into(">ii", data, 8 * slot, rel, -16)
    index.write_bytes(bytes(data))
    return rel


def test_a_negative_last_index_position_is_rebuilt_after_a_clean_shutdown(
    tmp_path: Path,
) -> None:
    """A negative position passed the index's checks, and the load read the batch header
    there: EINVAL, an OSError, took the whole log directory offline (one directory: the
    broker did not start). The index is rebuilt instead."""
    directory = tmp_path / "t-0"
    fill(directory, batches=12)
    index = directory / f"{SEGMENT}.index"
    good = index.read_bytes()
    _negate_index_position(index, len(good) // 8 - 1)
    log = open_log(directory, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    assert log.recovery_report.truncated_bytes == 0
    assert index.read_bytes() == good
    assert log.log_end_offset == 24
    log.close()


def test_a_negative_middle_index_position_is_read_from_the_segment_start(
    tmp_path: Path,
) -> None:
    """Kafka reads from max(position, 0) (LogSegment.translateOffset). A read looking up
    a negative position failed with EINVAL, reported as a disk failure: every partition
    of the directory went offline over one index entry."""
    directory = tmp_path / "t-0"
    fill(directory, batches=12)
    index = directory / f"{SEGMENT}.index"
    entries = len(index.read_bytes()) // 8
    assert entries >= 3
    rel = _negate_index_position(index, entries // 2)
    failed: list[str] = []
    log = open_log(
        directory,
        clean_shutdown=True,
        found=True,
        dir_failed=lambda _d, message, _e: failed.append(message),
    )
    try:
        assert log.recovery_report is not None
        assert log.recovery_report.segments_recovered == 0  # only the last entry checked
        for offset in range(rel - 1, rel + 2):
            read = log.read(offset, 1)
            assert read.first_offset <= offset < read.next_offset
        assert log.offset_for_timestamp(NOW) is not None
    finally:
        log.close()
    assert failed == []


def test_a_missing_epoch_checkpoint_beside_records_is_rebuilt_after_a_clean_shutdown(
    tmp_path: Path,
) -> None:
    """A clean shutdown skips the scan: a log whose leader-epoch-checkpoint was lost
    (deleted from outside, a partial restore) loaded with records and no epochs, and as a
    follower kept records its leader never had. Its epochs are read again from every
    batch, as for an unreadable checkpoint; a log without records is not scanned."""
    directory = tmp_path / "t-0"
    fill(directory)  # epochs 0, 1, 2 starting at 0, 3, 7
    (directory / "leader-epoch-checkpoint").unlink()
    log = open_log(directory, clean_shutdown=True)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(0, 0), (1, 3), (2, 7)]
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    log.close()
    assert (directory / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n1 3\n2 7\n"

    idle = tmp_path / "t-1"
    open_log(idle).close()
    assert "leader-epoch-checkpoint" not in os.listdir(idle)
    log = open_log(idle, clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 0
    log.close()


@pytest.mark.parametrize("clean", [False, True])
def test_a_log_start_past_the_recovered_end_restarts_the_log_there(
    tmp_path: Path, clean: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The log start offset checkpoint (fsynced) says more than the segments hold (their
    unflushed tail lost in a power cut, or files lost). Kafka 2.8's
    deleteSegmentsIfLogStartGreaterThanLogEnd deletes every segment, clears the epoch
    cache and starts an empty log at the log start offset: the offsets handed out
    (maybe consumed, committed) are never handed out again."""
    directory = tmp_path / "t-0"
    fill(directory)  # 12 records, offsets 0-11, epochs 0-2
    data = (directory / f"{SEGMENT}.log").read_bytes()
    fourth = [h.position for h in iter_batches(data)][3]
    os.truncate(directory / f"{SEGMENT}.log", fourth)  # offsets 0-5 left
    with caplog.at_level("WARNING", logger="storage.log"):
        log = open_log(
            directory,
            log_start_offset=20,
            high_watermark=20,
            recovery_point=0,
            clean_shutdown=clean,
        )
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (20, 20, 20)
    # raised with the log start (Kafka 2.8's updateLogStartOffset, after recoverLog)
    assert log.recovery_point == 20
    assert log.segment_base_offsets() == [20]
    assert not (directory / f"{SEGMENT}.log").exists()
    assert log.epoch_cache.entries() == []
    assert any("smaller than the log start offset 20" in r.getMessage() for r in caplog.records)
    info = log.append_as_leader(build_batch([b"new"]), 3)
    assert info.first_offset == 20
    log.close()
    log = open_log(directory, log_start_offset=20, clean_shutdown=True)
    assert (log.log_start_offset, log.log_end_offset) == (20, 21)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(3, 20)]
    log.close()


def test_a_recovery_point_past_the_recovered_end_is_lowered_to_it(tmp_path: Path) -> None:
    """Kafka 2.8's recoverLog: recoveryPoint = min(recoveryPoint, logEndOffset) after an
    unclean shutdown (records past it lost with the page cache): a flush from there
    fsyncs what is appended next."""
    directory = tmp_path / "t-0"
    fill(directory)  # offsets 0-11
    log = open_log(directory, recovery_point=500)
    assert (log.log_end_offset, log.recovery_point) == (12, 12)


def test_the_epoch_cache_is_truncated_from_the_loaded_log_start(tmp_path: Path) -> None:
    """Kafka 2.8's Log init: leaderEpochCache.truncateFromStart(logStartOffset) ("the
    earliest leader epoch may not be flushed during a hard failure"): ListOffsets EARLIEST
    answers the epoch holding the log start."""
    directory = tmp_path / "t-0"
    fill(directory)  # epochs (0, 0), (1, 3), (2, 7)
    log = open_log(directory, log_start_offset=4, clean_shutdown=True)
    assert [tuple(e) for e in log.epoch_cache.entries()] == [(1, 4), (2, 7)]
    assert log.earliest_offset_and_epoch() == (4, 1)


def test_rebuilt_indexes_equal_the_ones_written_at_the_interval_boundary(tmp_path: Path) -> None:
    """An index entry when more than index.interval.bytes were written since the last
    (Kafka 2.8's append and recover both use >): batches of exactly the interval."""
    directory = tmp_path / "t-0"
    one = len(build_batch([b"v" * 100], base_timestamp=NOW))
    log = open_log(directory, config=LogConfig(index_interval_bytes=one))
    for i in range(8):
        log.append_as_leader(build_batch([b"v" * 100], base_timestamp=NOW + i), 0)
    log.close()
    written = (directory / f"{SEGMENT}.index").read_bytes()
    assert written
    log = open_log(directory, config=LogConfig(index_interval_bytes=one))  # unclean
    log.close()
    assert (directory / f"{SEGMENT}.index").read_bytes() == written


def test_a_time_index_whose_last_timestamp_is_below_its_first_is_rebuilt(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's TimeIndex.sanityCheck: a last timestamp below the first is a corrupt
    index, rebuilt even after a clean shutdown (else the segment's largest timestamp,
    read from it, is wrong for lookups by time and for retention)."""
    directory = tmp_path / "t-0"
    log = open_log(directory, config=LogConfig(index_interval_bytes=0))
    for i in range(4):
        log.append_as_leader(build_batch([b"v" * 50], base_timestamp=NOW + i), 0)
    log.close()
    time_index = directory / f"{SEGMENT}.timeindex"
    good = time_index.read_bytes()
    assert len(good) >= 24
    last_offset = good[-4:]
    time_index.write_bytes(good[:-12] + struct.pack(">q", NOW - 1) + last_offset)
    log = open_log(directory, config=LogConfig(index_interval_bytes=0), clean_shutdown=True)
    assert log.recovery_report is not None
    assert log.recovery_report.segments_recovered == 1
    assert time_index.read_bytes() == good
    found = log.offset_for_timestamp(NOW + 3)
    assert found is not None
    assert found.offset == 3


def _write_segment(directory: Path, *batches: bytes | bytearray) -> Path:
    directory.mkdir()
    log_file = directory / f"{SEGMENT}.log"
    log_file.write_bytes(b"".join(batches))
    return log_file


def test_recovery_cuts_a_batch_whose_offsets_go_back(tmp_path: Path) -> None:
    """Offsets only grow in a segment (gaps are a compacted log's): a batch below the
    previous one's next offset is where the valid log ends."""
    first = build_batch([b"a"], base_offset=5, partition_leader_epoch=0)
    log_file = _write_segment(
        tmp_path / "t-0", first, build_batch([b"b"], base_offset=3, partition_leader_epoch=0)
    )
    log = open_log(tmp_path / "t-0")
    assert log.log_end_offset == 6
    assert log.recovery_report is not None
    assert log.recovery_report.truncated_bytes > 0
    assert log_file.read_bytes() == bytes(first)


def test_recovery_cuts_a_batch_too_far_above_its_segments_base(tmp_path: Path) -> None:
    """Kafka 2.8's LogSegment.recover: ensureOffsetInRange (an offset an index entry can
    hold relative to the base, 2**31 - 1 at most)."""
    first = build_batch([b"a"], base_offset=0, partition_leader_epoch=0)
    far = build_batch([b"b"], base_offset=2**31 + 5, partition_leader_epoch=0)
    log_file = _write_segment(tmp_path / "t-0", first, far)
    log = open_log(tmp_path / "t-0")
    assert log.log_end_offset == 1
    assert log_file.read_bytes() == bytes(first)


def test_recovery_cuts_a_batch_with_a_negative_last_offset_delta(tmp_path: Path) -> None:
    """A batch whose CRC holds but whose lastOffsetDelta is negative ends below its base
    offset: kept, the next append would be given its base offset again. It is where the
    valid log ends, and is cut from the file."""
    first = build_batch([b"a"], base_offset=0, partition_leader_epoch=0)
    bad = bytearray(build_batch([b"b"], base_offset=1, partition_leader_epoch=0))
    struct.pack_into(">i", bad, 23, -1)  # lastOffsetDelta
    struct.pack_into(">I", bad, 17, batch_crc(bad))
    log_file = _write_segment(tmp_path / "t-0", first, bytes(bad))
    log = open_log(tmp_path / "t-0")
    assert log.log_end_offset == 1
    assert log_file.read_bytes() == bytes(first)
