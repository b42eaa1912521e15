"""The log cleaner over real PartitionLogs on disk: what a cleaning keeps, the swap and
its crash recovery, the checkpoint, reads and follower appends across the gaps, and the
cases where the log moves under a cleaning."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import struct
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig
from storage.cleaner import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleaner,
    clean,
    clean_log,
    reconciled,
    survey,
)
from storage.compaction import OffsetMap
from storage.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    InvalidRecordError,
    RecordTooLargeError,
    UnknownCompressionError,
)
from storage.log import LogConfig, PartitionLog
from storage.log_manager import LogManager
from storage.records import (
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    Compression,
    batch_crc,
    iter_batches,
    iter_records,
)
from storage.segment import cleaned_paths, segment_paths
from storage.testing import RecordSpec, build_batch, with_body
from tests.unit.test_codecs import zstd_rle_frame
from zkdata.znodes import TopicPartition

NOW = 1_700_000_000_000
DAY_MS = 24 * 3600 * 1000


def compacted(**overrides: int | float | bool) -> LogConfig:
    settings_: dict[str, int | float | bool] = {
        "segment_bytes": 1024,
        "index_interval_bytes": 128,
        "compact": True,
        "delete_enabled": False,
        "min_cleanable_dirty_ratio": 0.5,
        "file_delete_delay_ms": 0,
    }
    settings_.update(overrides)
    return LogConfig(**settings_)  # type: ignore[arg-type]


def open_log(directory: Path, config: LogConfig | None = None) -> PartitionLog:
    return PartitionLog(directory, config or compacted(), time_ms=lambda: NOW)


def put(log: PartitionLog, *pairs: tuple[bytes | None, bytes | None], ts: int = NOW) -> int:
    """One batch of (key, value) records; returns its base offset. A record without a
    key is written as before the topic was compacted (a compacted log refuses it)."""
    batch = build_batch([RecordSpec(v, key=k) for k, v in pairs], base_timestamp=ts)
    config = log.config
    if any(k is None for k, _v in pairs):
        log.config = dataclasses.replace(config, compact=False)
    try:
        info = log.append_as_leader(batch, 0)
    finally:
        log.config = config
    log.update_high_watermark(log.log_end_offset)
    return info.first_offset


def everything(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, read as a consumer reads."""
    found: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 30)
        if read.region is None:
            break
        for header in iter_batches(read.to_bytes()):
            data = read.to_bytes()[header.position : header.position + header.size]
            found += [(r.offset, r.key, r.value) for r in iter_records(data)]
        offset = read.next_offset
    return found


def latest(
    records: list[tuple[int, bytes | None, bytes | None]],
) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        if key is not None:
            out[key] = (offset, value)
    return out


def fill(log: PartitionLog, rounds: int, keys: int = 5, size: int = 40) -> None:
    for i in range(rounds):
        key = b"k%d" % (i % keys)
        put(log, (key, b"%d:" % i + b"v" * size))


def test_cleaning_keeps_each_keys_latest_record_at_its_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 200)
    before = everything(log)
    segments_before = len(log.segments_snapshot())
    result = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    assert result is not None
    assert result.complete
    after = everything(log)
    active_base = log.segments_snapshot()[-1].base_offset
    # Below the active segment only each key's latest record stays; the active one whole.
    cleaned = [r for r in after if r[0] < active_base]
    assert len({r[1] for r in cleaned}) == len(cleaned)
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert latest(after) == latest(before)
    assert set(after) <= set(before)  # offsets, keys and values unchanged
    assert result.records_dropped == len(before) - len(after)
    assert result.end_offset == active_base
    # Runs are grouped by their sizes before cleaning (as Kafka's): the next cleaning
    # merges the small cleaned segments.
    assert len(log.segments_snapshot()) == segments_before
    again = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert again is not None
    assert again.records_dropped == 0
    assert len(log.segments_snapshot()) < segments_before / 4
    assert everything(log) == after


def test_a_later_record_in_the_active_segment_still_counts(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 100)
    put(log, (b"k0", b"newest"))
    clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    # k0's older records below the active segment may stay (the map covers only the
    # dirty part below it); what matters: its newest is read last.
    assert latest(everything(log))[b"k0"][1] == b"newest"


def test_reopening_after_cleaning_finds_the_same_records(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 150)
    clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    after = everything(log)
    end = log.log_end_offset
    log.flush()
    log.close()
    for clean_shutdown in (True, False):
        again = PartitionLog(tmp_path / "t-0", compacted(), clean_shutdown=clean_shutdown)
        assert again.log_end_offset == end
        assert everything(again) == after
        report = again.recovery_report
        assert report is not None
        assert report.truncated_bytes == 0
        again.close()


def test_keyless_records_go_and_tombstones_stay_until_the_horizon(tmp_path: Path) -> None:
    config = compacted(delete_retention_ms=DAY_MS)
    log = open_log(tmp_path / "t-0", config)
    put(log, (b"gone", b"value"), (None, b"no key"))
    put(log, (b"gone", None))  # a tombstone
    fill(log, 80)
    first = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    assert first is not None
    records = everything(log)
    assert (None, b"no key") not in [(r[1], r[2]) for r in records]
    assert latest(records)[b"gone"] == (2, None)  # kept: nothing was clean before
    # Once the tombstone's segment is older than the horizon (the last clean segment's
    # modification time less delete.retention.ms), the next cleaning drops it.
    old = (NOW - 3 * DAY_MS) / 1000
    for segment in log.segments_snapshot()[:1]:
        os.utime(segment.log.path, (old, old))
    fill(log, 80)
    second = clean_log(log, checkpoint=first.end_offset, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert second is not None
    assert b"gone" not in latest(everything(log))


def test_nothing_due_below_the_ratio_and_nothing_past_the_high_watermark(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 100)
    first = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    assert first is not None
    assert clean_log(log, checkpoint=first.end_offset, map_bytes=1 << 20, now_ms=NOW) is None
    # Data not yet replicated everywhere is not cleaned.
    hw = log.high_watermark
    for i in range(60):
        log.append_as_leader(build_batch([RecordSpec(b"x", key=b"k%d" % (i % 3))]), 0)
    assert log.high_watermark == hw
    again = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert again is not None
    assert again.end_offset <= hw


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compacted(min_compaction_lag_ms=DAY_MS))
    fill(log, 100)
    assert clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True) is None
    later = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW + 2 * DAY_MS)
    assert later is not None
    assert later.records_dropped > 0


def test_max_compaction_lag_rolls_the_active_segment(tmp_path: Path) -> None:
    # The active segment is never cleaned: a compacted topic's rolls after the lower of
    # segment.ms and max.compaction.lag.ms (Kafka's LogConfig.maxSegmentMs, KIP-354), or
    # a replaced value waited there up to segment.ms (7 days by default).
    hour = 3600 * 1000
    config = compacted(segment_bytes=1 << 30, max_compaction_lag_ms=hour)
    assert config.segment_ms == 7 * DAY_MS
    assert config.max_segment_ms == hour
    log = open_log(tmp_path / "t-0", config)
    put(log, (b"k", b"secret"), ts=NOW)
    put(log, (b"other", b"1"), ts=NOW + hour - 1)
    assert [s.base_offset for s in log.segments_snapshot()] == [0]
    put(log, (b"k", None), ts=NOW + hour + 1)
    assert [s.base_offset for s in log.segments_snapshot()] == [0, 2]
    put(log, (b"other", b"2"), ts=NOW + 2 * hour + 2)
    assert [s.base_offset for s in log.segments_snapshot()] == [0, 2, 3]
    # The tombstone's segment closed, a cleaning drops the value it deleted.
    result = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW + 3 * hour)
    assert result is not None
    assert (b"k", b"secret") not in [(r[1], r[2]) for r in everything(log)]
    # Not compacted, or a max lag above segment.ms: segment.ms alone.
    assert dataclasses.replace(config, compact=False).max_segment_ms == 7 * DAY_MS
    assert compacted(max_compaction_lag_ms=8 * DAY_MS).max_segment_ms == 7 * DAY_MS
    assert compacted(max_compaction_lag_ms=0).max_segment_ms == 7 * DAY_MS
    plain = PartitionLog(
        tmp_path / "plain-0", dataclasses.replace(config, compact=False), time_ms=lambda: NOW
    )
    for ts in (NOW, NOW + 2 * hour):
        plain.append_as_leader(build_batch([RecordSpec(b"v", key=b"k")], base_timestamp=ts), 0)
    assert [s.base_offset for s in plain.segments_snapshot()] == [0]


def test_a_small_offset_map_cleans_less_and_never_loses_a_latest(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(300):
        put(log, (b"key-%03d" % (i % 60), b"%d" % i))
    before = everything(log)
    result = clean_log(log, checkpoint=None, map_bytes=1, now_ms=NOW)  # one key fits... none
    assert result is not None
    assert latest(everything(log)) == latest(before)
    end = result.end_offset
    # Cleaning on from where it ended gets the rest done.
    while end < log.segments_snapshot()[-1].base_offset:
        more = clean_log(log, checkpoint=end, map_bytes=1 << 20, now_ms=NOW, force=True)
        assert more is not None
        end = more.end_offset
    assert latest(everything(log)) == latest(before)


def test_a_crash_after_the_swap_began_is_finished_on_opening(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 150)
    # What a cleaning would leave: copy the result of a real cleaning aside first.
    expected = None
    shadow_dir = tmp_path / "shadow" / "t-0"
    shutil.copytree(log.directory, shadow_dir)
    shadow = open_log(shadow_dir)
    clean_log(shadow, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    expected = everything(shadow)
    first_run = shadow.segments_snapshot()[0]
    run_end = shadow.segments_snapshot()[1].base_offset
    shadow.flush()
    shadow.close()
    log.flush()
    log.close()
    # The crash: the cleaned run renamed to its swap name, the old segments still there.
    directory = str(tmp_path / "t-0")
    base = first_run.base_offset
    swap = f"{segment_paths(directory, base)[0]}.{run_end:020d}.swap"
    with open(swap, "wb") as out, open(segment_paths(str(shadow_dir), base)[0], "rb") as src:
        out.write(src.read())
    open(cleaned_paths(directory, base)[1], "wb").close()  # a leftover index
    again = PartitionLog(tmp_path / "t-0", compacted(), clean_shutdown=True)
    assert [s.base_offset for s in again.segments_snapshot()] == [
        s.base_offset for s in PartitionLog(shadow_dir, compacted()).segments_snapshot()
    ]
    assert everything(again) == expected
    assert not [n for n in os.listdir(directory) if n.endswith((".swap", ".cleaned"))]


def test_the_swap_is_refused_when_the_log_moved(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 150)
    truncations = log.truncations
    segments = log.segments_snapshot()
    old = segments[:2]
    # Files as a cleaning would have written them, then the log truncated into them.
    for path in cleaned_paths(log.directory, old[0].base_offset):
        open(path, "wb").close()
    log.truncate_to(old[1].base_offset + 1)
    assert log.truncations == truncations + 1
    for count in (truncations, log.truncations):  # also by the segments alone
        assert not log.replace_segments(old, segments[2], truncations=count)
    assert log.segments_snapshot()[0] is old[0]
    # Appends since, rolling segments on past the offset the one that followed had:
    # still refused (other records at those offsets now).
    while log.segments_snapshot()[-1].base_offset <= segments[2].base_offset:
        put(log, (b"k", b"after the truncation"))
    assert log.segments_snapshot()[:2] == old
    for count in (truncations, log.truncations):
        assert not log.replace_segments(old, segments[2], truncations=count)


def test_a_truncation_during_a_cleaning_refuses_its_swaps(tmp_path: Path) -> None:
    # The offset map covers every dirty segment; a truncation in a later one than the
    # run being swapped left that run's segments and the one after them the very same
    # objects, so the swap went ahead, dropping records whose later ones of their keys
    # the truncation had removed: a key's only surviving record went. Kafka aborts a
    # cleaning before it truncates; the truncation count the survey read refuses here.
    log = open_log(tmp_path / "t-0", compacted(segment_bytes=300))
    big = b"x" * 120
    put(log, (b"K", b"v-at-0"), (b"a", big))  # segment 0: offsets 0-1
    put(log, (b"b", big), (b"c", b"1"))  # 2-3
    put(log, (b"K", b"v-at-4"), (b"d", big))  # 4-5
    put(log, (b"e", big))  # 6: the active segment
    assert [s.base_offset for s in log.segments_snapshot()] == [0, 2, 4, 6]
    to_clean = survey(log, checkpoint=None, now_ms=NOW, force=True)
    assert to_clean is not None
    assert to_clean.truncations == log.truncations

    def stopping() -> bool:
        # Asked after the offset map was built (K at 4), before the first run's swap: a
        # follower's truncation (after an unclean election) lands in segment 2.
        if log.log_end_offset > 3:
            log.truncate_to(3)
        return False

    result = clean(to_clean, map_bytes=1 << 20, stopping=stopping)
    assert not result.complete
    assert result.segments_after == 2
    # The truncated log holds offsets 0-1 (the batch of 2-3 went whole): K's record at 0
    # is its latest, and stays.
    assert latest(everything(log)) == {b"K": (0, b"v-at-0"), b"a": (1, big)}
    assert not [n for n in os.listdir(log.directory) if n.endswith(".cleaned")]
    # The next cleaning (surveyed after the truncation) goes through.
    put(log, (b"f", big))
    again = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert again is not None
    assert again.complete
    assert latest(everything(log))[b"K"] == (0, b"v-at-0")


def test_reads_and_a_follower_cross_the_gaps(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    fill(leader, 200, keys=3)
    clean_log(leader, checkpoint=None, map_bytes=1 << 20, now_ms=NOW)
    follower = PartitionLog(tmp_path / "follower" / "t-0", compacted())
    while follower.log_end_offset < leader.log_end_offset:
        read = leader.read(follower.log_end_offset, 300)
        follower.append_as_follower(read.to_bytes())
    assert everything(follower) == everything(leader)
    # A fetch from inside a gap gets the next batch.
    offsets = [r[0] for r in everything(leader)]
    assert offsets[0] > leader.log_start_offset == 0
    assert leader.read(0, 1 << 20).first_offset == offsets[0]


def test_a_new_replica_takes_a_cleaned_gap_of_more_than_2_to_the_31(tmp_path: Path) -> None:
    # The leader's key K at 0, then again at 3,000,000,000 (its segment rolled there: no
    # segment holds both); cleaned, the segment at 0 is empty. A new replica (a
    # reassignment) fetches from 0 into its empty segment at 0: the batch at
    # 3,000,000,000 needs a segment of its own, as in the leader.
    far = 3_000_000_000
    leader = open_log(tmp_path / "leader" / "t-0")
    for offset, value in ((0, b"old"), (far, b"new")):
        batch = build_batch([RecordSpec(value, key=b"K")], base_offset=offset, base_timestamp=NOW)
        leader.append_as_follower(batch)
    leader.roll()
    leader.update_high_watermark(leader.log_end_offset)
    assert clean_log(leader, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert everything(leader) == [(far, b"K", b"new")]
    follower = open_log(tmp_path / "follower" / "t-0")
    while follower.log_end_offset < leader.log_end_offset:
        read = leader.read(follower.log_end_offset, 1 << 20)
        follower.append_as_follower(read.to_bytes())
    assert follower.segment_base_offsets() == [0, far]
    put(follower, (b"K", b"newer"))  # then leading it
    assert everything(follower) == [(far, b"K", b"new"), (far + 1, b"K", b"newer")]
    # Cleaned in its turn: the empty segment and the gapped one stay apart.
    follower.roll()
    assert clean_log(follower, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert everything(follower) == [(far + 1, b"K", b"newer")]
    follower.close()
    again = PartitionLog(tmp_path / "follower" / "t-0", compacted(), time_ms=lambda: NOW)
    assert everything(again) == [(far + 1, b"K", b"newer")]


def test_appends_and_reads_go_on_during_cleanings(tmp_path: Path) -> None:
    # As a broker's logs: replaced segments are closed file.delete.delay.ms later, so a
    # read that picked one just before goes on.
    timers: list[threading.Timer] = []

    def defer(action: Callable[[], None], delay_ms: int) -> None:
        timers.append(threading.Timer(delay_ms / 1000, action))
        timers[-1].start()

    log = PartitionLog(
        tmp_path / "t-0", compacted(file_delete_delay_ms=1000), time_ms=lambda: NOW, defer=defer
    )
    fill(log, 100)
    stop = threading.Event()
    problems: list[BaseException] = []

    def writer() -> None:
        i = 0
        try:
            while not stop.is_set():
                put(log, (b"k%d" % (i % 7), b"w%d" % i))
                everything(log)
                i += 1
        except BaseException as exc:  # reported below
            problems.append(exc)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        checkpoint = None
        for _ in range(20):
            result = clean_log(
                log, checkpoint=checkpoint, map_bytes=1 << 20, now_ms=NOW, force=True
            )
            if result is not None and result.complete:
                checkpoint = result.end_offset
    finally:
        stop.set()
        thread.join(30)
        for timer in timers:
            timer.cancel()
    assert not problems
    records = everything(log)
    assert [r[0] for r in records] == sorted({r[0] for r in records})
    assert latest(records)[b"k0"][1] is not None


def test_the_cleaner_checkpoints_where_each_cleaning_ended(tmp_path: Path) -> None:
    logs = {n: open_log(tmp_path / f"t-{n}") for n in range(2)}
    plain = PartitionLog(tmp_path / "plain-0", LogConfig(segment_bytes=1024), time_ms=lambda: NOW)
    for each in logs.values():
        fill(each, 120)
    for _ in range(60):
        plain.append_as_leader(build_batch([RecordSpec(b"x", key=b"same")]), 0)
    cleaner = LogCleaner(lambda: [*logs.values(), plain], time_ms=lambda: NOW)
    results = cleaner.clean_once()
    assert sorted((r.topic, r.partition) for r in results) == [("t", 0), ("t", 1)]
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text().split("\n")
    assert text[:2] == ["0", "2"]
    rows = {tuple(line.split()[:2]): int(line.split()[2]) for line in text[2:] if line}
    assert rows == {
        ("t", str(n)): r.end_offset
        for n, r in zip(range(2), sorted(results, key=lambda r: r.partition), strict=True)
    }
    assert cleaner.clean_once() == []  # nothing due now
    # A new cleaner reads the checkpoint: still nothing due.
    assert LogCleaner(lambda: [*logs.values(), plain], time_ms=lambda: NOW).clean_once() == []


def test_a_pass_cleans_the_filthiest_log_first(tmp_path: Path) -> None:
    # Each log first holds 120 distinct keys, all cleaned (nothing to drop), then a
    # different amount of new keys: its dirty ratio grows with it. (Kafka's cleaner
    # takes the filthiest log first.)
    config = compacted(min_cleanable_dirty_ratio=0.05)
    logs = [open_log(tmp_path / f"t-{n}", config) for n in range(4)]
    for each in logs:
        fill(each, 120, keys=120)
    cleaner = LogCleaner(lambda: logs, time_ms=lambda: NOW)
    assert len(cleaner.clean_once()) == 4
    for each, rounds in zip(logs, (30, 150, 60, 0), strict=True):
        for i in range(rounds):
            put(each, (b"new%d" % i, b"v" * 40))
    surveyed = {
        n: survey(each, checkpoint=cleaner._checkpoint_of(each), now_ms=NOW)
        for n, each in enumerate(logs)
    }
    ratios = {n: s.ratio for n, s in surveyed.items() if s is not None}
    assert set(ratios) == {0, 1, 2}  # the fourth has nothing dirty
    assert ratios[1] > ratios[2] > ratios[0]
    results = cleaner.clean_once()
    assert [r.partition for r in results] == [1, 2, 0]
    assert cleaner.clean_once() == []


def test_the_cleaner_threads_start_and_stop(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 120)
    cleaner = LogCleaner(lambda: [log], threads=2, backoff_ms=10, time_ms=lambda: NOW)
    cleaner.start()
    try:
        for _ in range(500):
            if ("t", 0) in cleaner.last_results:
                break
            threading.Event().wait(0.01)
    finally:
        cleaner.close(10)
    assert ("t", 0) in cleaner.last_results
    assert all(not t.is_alive() for t in cleaner._threads)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(
        st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", None]), st.booleans()),
        min_size=1,
        max_size=120,
    ),
    cleanings=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_any_history_keeps_every_keys_latest_value(
    tmp_path_factory: pytest.TempPathFactory,
    writes: list[tuple[bytes | None, bool]],
    cleanings: int,
    seed: int,
) -> None:
    rng = random.Random(seed)
    log = open_log(tmp_path_factory.mktemp("prop") / "t-0", compacted(segment_bytes=400))
    checkpoint = None
    chunks = [writes[i : i + rng.randint(1, 4)] for i in range(0, len(writes), 4)]
    per_cleaning = max(len(chunks) // cleanings, 1)
    for n, chunk in enumerate(chunks):
        pairs = [(k, None if tomb else b"v%d" % n) for k, tomb in chunk]
        put(log, *pairs)
        if n % per_cleaning == per_cleaning - 1:
            result = clean_log(
                log, checkpoint=checkpoint, map_bytes=1 << 20, now_ms=NOW, force=True
            )
            if result is not None:
                checkpoint = result.end_offset
    model: dict[bytes, tuple[int, bytes | None]] = {}
    offset = 0
    for n, chunk in enumerate(chunks):
        for k, tomb in chunk:
            if k is not None:
                model[k] = (offset, None if tomb else b"v%d" % n)
            offset += 1
    records = everything(log)
    assert latest(records) == model  # tombstones kept: nothing is past the horizon
    assert [r[0] for r in records] == sorted(r[0] for r in records)
    assert log.log_end_offset == offset


def test_a_checkpoint_past_its_logs_end_at_start_up_is_lowered(tmp_path: Path) -> None:
    # A broker stopped between a truncation below the checkpoint and the lowered
    # checkpoint's write: the log manager's start finds the entry past the log's end and
    # lowers it as the truncation would have, before appends carry the log past it
    # again (then the offsets written again would be taken for cleaned).
    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    config = compacted(segment_bytes=1 << 20)
    try:
        log = manager.get_or_create(tp, config)
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]
        log.truncate_to(5)  # not through the manager: its checkpoint write never came
        assert _cleaner_checkpoint(tmp_path) == {("t", 0): 12}
    finally:
        manager.close()
    manager = LogManager([tmp_path], manager.config, topic_config=lambda _topic: config)
    try:
        log = manager.get_or_create(tp)
        assert log.log_end_offset == 5
        assert _cleaner_checkpoint(tmp_path) == {("t", 0): 0}  # the active segment's base
        _history(log, [(b"K", b"v"), (b"x", b"1"), (b"y", b"1"), (b"K", None)], more=3)
        log.update_high_watermark(log.log_end_offset)
        (again,) = manager.cleaner.clean_once(force=True)
        assert again.first_dirty_offset == 0
        assert latest(everything(log))[b"K"][1] is None
    finally:
        manager.close()
    # An entry at or below its log's end stays.
    manager = LogManager([tmp_path], manager.config, topic_config=lambda _topic: config)
    manager.close()
    assert _cleaner_checkpoint(tmp_path) == {("t", 0): again.end_offset}


@pytest.mark.parametrize(
    "compression", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_a_compacted_log_refuses_a_batch_whose_body_does_not_decode(
    tmp_path: Path, compression: int
) -> None:
    # The producer's CRC covers a body that is no stream of its codec: UNKNOWN_SERVER_ERROR
    # (Kafka's KafkaException, "Failed to decompress record stream"; CORRUPT_MESSAGE is
    # retriable), and the log goes on taking batches.
    log = open_log(tmp_path / "t-0")
    batch = build_batch([RecordSpec(b"v", key=b"k")], compression=compression)
    batch[BATCH_HEADER_SIZE:] = b"\x07" * (len(batch) - BATCH_HEADER_SIZE)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    with pytest.raises(CorruptRecordError) as refused:
        log.append_as_leader(batch, 0)
    assert refused.value.error_code == -1
    assert log.log_end_offset == 0
    put(log, (b"k", b"v"))
    assert log.log_end_offset == 1


def test_a_compacted_log_refuses_records_without_a_key(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    put(log, (b"k", b"v"))
    for compression in (
        Compression.NONE,
        Compression.GZIP,
        Compression.SNAPPY,
        Compression.LZ4,
        Compression.ZSTD,
    ):
        keyless = build_batch(
            [RecordSpec(b"v", key=b"k"), RecordSpec(b"no key")], compression=compression
        )
        with pytest.raises(InvalidRecordError, match="without a key") as refused:
            log.append_as_leader(keyless, 0)
        # The second record: at the log end + 1 where the records are walked as they are
        # appended; a compressed batch is decoded before the append takes its lock, its
        # offsets not yet assigned: the record's index (Kafka's RecordError batchIndex).
        assert refused.value.offset == (2 if compression == Compression.NONE else 1)
    assert log.log_end_offset == 1  # nothing written
    # An attribute naming no codec is refused whatever the records (Kafka's
    # CompressionType.forId throws: UNKNOWN_SERVER_ERROR); it passed, unread. The
    # cleaner keeps a batch it cannot read whole (test_compaction.py).
    unknown = build_batch([RecordSpec(b"no key")], compression=5)
    with pytest.raises(UnknownCompressionError):
        log.append_as_leader(unknown, 0)
    # A topic that is not compacted takes them.
    plain = PartitionLog(tmp_path / "plain-0", LogConfig(), time_ms=lambda: NOW)
    assert plain.append_as_leader(build_batch([RecordSpec(b"no key")]), 0).first_offset == 0


def test_a_batch_the_append_refuses_whole_is_refused_so_before_its_keys_are_read(
    tmp_path: Path,
) -> None:
    """The key check decodes a producer's batches before the append takes its lock; a
    request the append refuses whole (a CRC mismatch, a batch over max.message.bytes) is
    left to it, refused as before for what is wrong with it. An incomplete entry after
    the batches is left out by both, as Kafka's iterator ends there (it was refused
    CorruptRecordError, the keys unread): the batch's keys are read and refused."""
    log = open_log(tmp_path / "t-0", compacted(max_message_bytes=1024))
    keyless = build_batch([RecordSpec(b"no key")], compression=Compression.ZSTD)
    torn = keyless + keyless[:20]
    with pytest.raises(InvalidRecordError, match="without a key") as refused:
        log.append_as_leader(torn, 0)
    assert refused.value.keyless == (0,)
    bad_tail = keyless + struct.pack(">qi", 0, 13)  # a size field below 14: corrupt
    with pytest.raises(CorruptRecordError, match="13"):
        log.append_as_leader(bad_tail, 0)
    damaged = bytearray(keyless)
    damaged[CRC_OFFSET] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_leader(damaged, 0)
    large = build_batch(
        [RecordSpec(random.Random(1).randbytes(2000))], compression=Compression.ZSTD
    )
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(keyless + large, 0)
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append_as_leader(keyless, 0)
    assert log.log_end_offset == 0


def test_a_compacted_log_refuses_a_batch_holding_more_than_it_reads_in_bounded_memory(
    tmp_path: Path,
) -> None:
    # With max.message.bytes 64 KB a batch's records may take 1 MB decompressed. This
    # zstd body of 263 bytes holds 8 MB (128 KB RLE blocks of 4 bytes, as RFC 8878
    # allows): it was made whole before its keys were looked at (with 2 MB blocks, a
    # 99-byte batch made 33 MB). MESSAGE_TOO_LARGE, and the log goes on taking batches.
    log = open_log(tmp_path / "t-0", compacted(max_message_bytes=64 * 1024))
    one = build_batch([RecordSpec(b"v", key=b"k")])
    bomb = with_body(one, zstd_rle_frame(64), compression=Compression.ZSTD)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedTooLargeError) as refused:
            log.append_as_leader(bomb, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.error_code == 10  # MESSAGE_TOO_LARGE
    assert peak < 2 << 20
    assert log.log_end_offset == 0
    put(log, (b"k", b"v"))
    assert log.log_end_offset == 1


def test_the_log_manager_gives_the_cleaner_only_compacted_logs(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "log.dirs": str(tmp_path)}
    )
    manager = LogManager([tmp_path], config)
    try:
        plain = TopicPartition("plain", 0)
        kept = TopicPartition("kept", 0)
        manager.get_or_create(plain, LogConfig())
        manager.get_or_create(kept, compacted())
        assert [(g.topic, g.partition) for g in manager.compacted_logs()] == [("kept", 0)]
        manager.update_topic_config("plain", compacted())
        manager.update_topic_config("kept", LogConfig())
        assert [(g.topic, g.partition) for g in manager.compacted_logs()] == [("plain", 0)]
        manager.delete(plain)
        assert manager.compacted_logs() == []
    finally:
        manager.close()


def _damage_second_batch(log: PartitionLog, length: int) -> None:
    """Write ``length`` into the length field of the second batch of the log's first
    segment (a closed one)."""
    first = log.segments_snapshot()[0]
    with open(first.log.path, "rb") as f:
        data = f.read()
    second = struct.unpack_from(">i", data, 8)[0] + 12
    fd = os.open(first.log.path, os.O_WRONLY)
    try:
        os.pwrite(fd, struct.pack(">i", length), second + 8)
    finally:
        os.close(fd)


@pytest.mark.parametrize("length", [-12, 0, 1 << 24])
def test_a_log_whose_cleaning_fails_is_uncleanable_and_the_others_are_cleaned(
    tmp_path: Path, length: int
) -> None:
    # A damaged closed segment (its batch length -12: a CorruptRecordError; 0: garbage
    # read as headers; 16 MiB: a batch running past the segment's end, which read as far
    # as the file goes was copied cut short into the cleaned segment) made the cleaning
    # raise out of the pass; the damaged log, the filthiest, came first again on every
    # pass, so no other log was ever cleaned.
    # Kafka's cleaner (KIP-346) marks the partition uncleanable and goes on.
    bad = open_log(tmp_path / "bad-0")
    good = open_log(tmp_path / "good-0")
    fill(bad, 200, keys=2)  # the filthiest
    fill(good, 120, keys=40)
    _damage_second_batch(bad, length)
    logs = [bad, good]
    cleaner = LogCleaner(lambda: logs, time_ms=lambda: NOW)
    results = cleaner.clean_once()
    assert [(r.topic, r.partition) for r in results] == [("good", 0)]
    assert cleaner.uncleanable_partitions == [("bad", 0)]
    assert ("bad", 0) not in cleaner.last_results
    assert CLEANER_OFFSET_CHECKPOINT in os.listdir(tmp_path)
    # Skipped from then on, by the passes and by clean_one alike.
    fill(good, 120, keys=40)
    assert [(r.topic, r.partition) for r in cleaner.clean_once(force=True)] == [("good", 0)]
    assert cleaner.clean_one(bad, force=True) is None
    assert cleaner.uncleanable_partitions == [("bad", 0)]
    # The log loaded again (a restart, say: another log object) is tried again (after a
    # clean shutdown, so no recovery cuts the damage off).
    bad.flush()
    bad.close()
    logs[0] = PartitionLog(tmp_path / "bad-0", compacted(), clean_shutdown=True)
    logs[0].update_high_watermark(logs[0].log_end_offset)
    assert cleaner.clean_once(force=True) == []
    assert cleaner.uncleanable_partitions == [("bad", 0)]
    assert cleaner._uncleanable[("bad", 0)] is logs[0]
    # Gone from the logs: its mark goes too.
    del logs[0]
    cleaner.clean_once(force=True)
    assert cleaner.uncleanable_partitions == []


def test_a_log_whose_survey_fails_is_uncleanable_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.cleaner

    bad = open_log(tmp_path / "bad-0")
    good = open_log(tmp_path / "good-0")
    fill(bad, 120)
    fill(good, 120)
    real_survey = storage.cleaner.survey

    def survey_(partition_log: PartitionLog, **kwargs: object) -> object:
        if partition_log is bad:
            raise ValueError("a bad segment")
        return real_survey(partition_log, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.cleaner, "survey", survey_)
    cleaner = LogCleaner(lambda: [bad, good], time_ms=lambda: NOW)
    assert [(r.topic, r.partition) for r in cleaner.clean_once()] == [("good", 0)]
    assert cleaner.uncleanable_partitions == [("bad", 0)]
    assert cleaner.clean_one(bad, force=True) is None


def _manager(tmp_path: Path) -> LogManager:
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "log.dirs": str(tmp_path)}
    )
    return LogManager([tmp_path], config)


def _cleaner_checkpoint(directory: Path) -> dict[tuple[str, int], int]:
    from storage.checkpoints import read_offset_checkpoint

    return read_offset_checkpoint(directory / CLEANER_OFFSET_CHECKPOINT)


def _history(log: PartitionLog, first: list[tuple[bytes, bytes | None]], more: int = 2) -> None:
    """``first`` (four records) in a segment of their own, then ``more`` segments of four
    new keys each: the same segment boundaries (0, 4, 8, ...) whatever ``first`` holds."""
    for pair in first:
        put(log, pair)
    log.roll()
    for n in range(more):
        for i in range(4):
            put(log, (b"f%d-%d-%d" % (log.log_end_offset, n, i), b"x"))
        log.roll()


def _deleted(log: PartitionLog, key: bytes) -> bool:
    found = latest(everything(log)).get(key)
    return found is None or found[1] is None


@pytest.mark.parametrize("how", ["delete", "set_aside"])
def test_a_log_made_again_is_not_taken_for_cleaned(tmp_path: Path, how: str) -> None:
    # The cleaner checkpoint's entry of a deleted log stayed (on file and in the
    # cleaner): the topic made again, its new log, rolling at the same offsets, was
    # taken for cleaned up to there. Below it nothing was ever mapped: K's tombstone
    # went at the delete horizon while the value it deleted stayed. Kafka removes the
    # entry when it deletes the log (updateCheckpoints with partitionToRemove).
    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    config = compacted(segment_bytes=1 << 20, delete_retention_ms=0)
    try:
        old = manager.get_or_create(tp, config)
        _history(old, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]
        assert _cleaner_checkpoint(tmp_path) == {("t", 0): 12}
        getattr(manager, how)(tp)
        assert _cleaner_checkpoint(tmp_path) == {}
        assert manager.cleaner._checkpoint_of(old) is None
        new = manager.get_or_create(tp, config)
        assert new.log_end_offset == 0
        _history(new, [(b"K", b"v"), (b"x", b"1"), (b"y", b"1"), (b"K", None)], more=3)
        assert _deleted(new, b"K")
        (first,) = manager.cleaner.clean_once(force=True)
        assert first.first_dirty_offset == 0
        _history(new, [(b"z", b"1")] * 4, more=0)  # and once more, past the horizon
        manager.cleaner.clean_once(force=True)
        assert _deleted(new, b"K")
    finally:
        manager.close()


_KILLED_AT_THE_RENAME = """
import os, signal, sys
from pathlib import Path
from tests.unit.test_log_cleaner import _history, _manager, compacted
from zkdata.znodes import TopicPartition
tmp, how = Path(sys.argv[1]), sys.argv[2]
manager = _manager(tmp)
tp = TopicPartition("t", 0)
old = manager.get_or_create(tp, compacted(segment_bytes=1 << 20, delete_retention_ms=0))
_history(old, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]
old.flush()
real_rename = os.rename
def rename(source, target, *args, **kwargs):
    real_rename(source, target, *args, **kwargs)
    if Path(source) == old.dir:  # kill -9 once the log's directory is renamed away
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
getattr(manager, how)(tp)
print("not killed")
"""


@pytest.mark.parametrize("how", ["delete", "set_aside"])
def test_a_log_made_again_after_a_crash_in_its_deletion_is_not_taken_for_cleaned(
    tmp_path: Path, how: str
) -> None:
    # The broker killed (kill -9) as the deletion renamed the log's directory away: the
    # entry of the deleted log was removed from cleaner-offset-checkpoint only after that
    # rename, so it survived, and the topic made again was taken for cleaned up to it
    # (K's deleted value came back, as in test_a_log_made_again_is_not_taken_for_cleaned).
    # Kafka's asyncDelete removes the entry before it renames the directory.
    import signal
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", _KILLED_AT_THE_RENAME, str(tmp_path), how],
        cwd=Path(__file__).resolve().parents[2],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert _cleaner_checkpoint(tmp_path) == {}
    manager = _manager(tmp_path)  # the restart
    tp = TopicPartition("t", 0)
    config = compacted(segment_bytes=1 << 20, delete_retention_ms=0)
    try:
        assert tp not in manager.all_logs()
        new = manager.get_or_create(tp, config)
        assert new.log_end_offset == 0
        _history(new, [(b"K", b"v"), (b"x", b"1"), (b"y", b"1"), (b"K", None)], more=3)
        (first,) = manager.cleaner.clean_once(force=True)
        assert first.first_dirty_offset == 0
        _history(new, [(b"z", b"1")] * 4, more=0)  # and once more, past the horizon
        manager.cleaner.clean_once(force=True)
        assert _deleted(new, b"K")
    finally:
        manager.close()


def test_entries_of_logs_not_in_their_directory_are_dropped_at_start_up(
    tmp_path: Path,
) -> None:
    # An entry left by a broker stopped inside a deletion (or by any older version) for
    # a partition with no log in that directory was kept: the partition's log made
    # there again was taken for cleaned up to it. Each directory's checkpoint keeps the
    # entries of the logs loaded from it alone, whatever the other directories hold.
    first, second = tmp_path / "a", tmp_path / "b"
    config = compacted(segment_bytes=1 << 20, delete_retention_ms=0)
    broker = BrokerConfig.from_properties(
        {
            "zookeeper.connect": "127.0.0.1:2181",
            "broker.id": "1",
            "log.dirs": f"{first},{second}",
        }
    )
    manager = LogManager([first], broker, topic_config=lambda _topic: config)
    try:
        log = manager.get_or_create(TopicPartition("t", 0))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]
    finally:
        manager.close()
    second.mkdir()
    LogCleaner._write_locked(str(first), {("t", 0): 12, ("gone", 0): 12})
    LogCleaner._write_locked(str(second), {("t", 0): 12, ("gone", 1): 4})
    manager = LogManager([first, second], broker, topic_config=lambda _topic: config)
    try:
        assert _cleaner_checkpoint(first) == {("t", 0): 12}
        assert _cleaner_checkpoint(second) == {}
        for partition in (0, 1):  # made again, in whichever directory
            made_again = manager.get_or_create(TopicPartition("gone", partition))
            assert manager.cleaner._checkpoint_of(made_again) is None
    finally:
        manager.close()


def test_the_cleaner_checkpoint_loses_a_logs_entry_before_its_directory_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's asyncDelete: abortCleaning, updateCheckpoints(partitionToRemove), then
    # renameDir; whatever the process dies after, no entry outlives its log.
    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    seen: list[dict[tuple[str, int], int]] = []
    real_rename = os.rename
    try:
        log = manager.get_or_create(tp, compacted(segment_bytes=1 << 20))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]

        def rename(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
            if Path(source) == log.dir:
                seen.append(_cleaner_checkpoint(tmp_path))
            real_rename(source, target)

        monkeypatch.setattr(os, "rename", rename)
        manager.delete(tp)
        assert seen == [{}]
    finally:
        monkeypatch.undo()
        manager.close()


def test_a_cleaning_under_way_is_aborted_before_its_log_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's asyncDelete aborts a cleaning of the log (abortCleaning) and waits for it
    # to stop before it touches the checkpoint and the directory: the deletion waits,
    # and the cleaning stops at its next segment, incomplete, leaving nothing behind.
    import storage.cleaner

    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    reading = threading.Event()
    go_on = threading.Event()
    real_batches = storage.cleaner._batches
    results: list[object] = []
    try:
        log = manager.get_or_create(tp, compacted(segment_bytes=1 << 20))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        log.update_high_watermark(log.log_end_offset)
        source = log.dir

        def batches(segment: object, **kwargs: int) -> object:
            if not reading.is_set():  # the first segment the rewriting reads
                reading.set()
                assert go_on.wait(30)
            return real_batches(segment, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(storage.cleaner, "_batches", batches)
        cleaning = threading.Thread(
            target=lambda: results.append(manager.cleaner.clean_one(log, force=True))
        )
        cleaning.start()
        assert reading.wait(30)
        deleting = threading.Thread(target=manager.delete, args=(tp,))
        deleting.start()
        deleting.join(0.3)
        assert deleting.is_alive()  # it waits for the cleaning
        assert source.exists()
        go_on.set()
        deleting.join(30)
        cleaning.join(30)
        assert not deleting.is_alive()
        assert not cleaning.is_alive()
        (result,) = results
        assert isinstance(result, storage.cleaner.CleaningResult)
        assert not result.complete
        assert result.segments_after == result.segments_before  # no swap after the abort
        assert not source.exists()
        (gone,) = tmp_path.glob("t-0.*-delete")
        assert not list(gone.glob("*.cleaned"))
        assert _cleaner_checkpoint(tmp_path) == {}
    finally:
        go_on.set()
        monkeypatch.undo()
        manager.close()


@pytest.mark.parametrize("phase", ["batch_keys", "filter_batch"])
def test_a_cleaning_aborted_inside_a_segment_reads_no_further_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    # The abort was looked at only between the copy phase's segments: a deletion waited
    # for the whole offset map's build over the dirty section (every batch of it) and
    # the rest of the segment being copied. Kafka's cleaner checks it (checkDone) for
    # each segment and each read buffer of buildOffsetMap and each buffer of cleanInto.
    import storage.cleaner

    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    held = threading.Event()
    go_on = threading.Event()
    real = getattr(storage.cleaner, phase)
    calls: list[int] = []
    results: list[object] = []
    try:
        log = manager.get_or_create(tp, compacted(segment_bytes=1 << 20))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        log.update_high_watermark(log.log_end_offset)
        source = log.dir

        def holding(*args: object, **kwargs: object) -> object:
            calls.append(1)
            if not held.is_set():  # the first batch this phase reads
                held.set()
                assert go_on.wait(30)
            return real(*args, **kwargs)

        monkeypatch.setattr(storage.cleaner, phase, holding)
        cleaning = threading.Thread(
            target=lambda: results.append(manager.cleaner.clean_one(log, force=True))
        )
        cleaning.start()
        assert held.wait(30)
        deleting = threading.Thread(target=manager.delete, args=(tp,))
        deleting.start()
        for _ in range(3000):  # until the deletion is waiting for the cleaning
            if (tp.topic, tp.partition) in manager.cleaner._aborting:
                break
            deleting.join(0.01)
        assert (tp.topic, tp.partition) in manager.cleaner._aborting
        go_on.set()
        deleting.join(30)
        cleaning.join(30)
        assert not deleting.is_alive()
        assert not cleaning.is_alive()
        assert len(calls) == 1  # the batch held, and no other after the abort
        (result,) = results
        assert isinstance(result, storage.cleaner.CleaningResult)
        assert not result.complete
        assert result.segments_after == result.segments_before  # nothing swapped
        assert not source.exists()
        (gone,) = tmp_path.glob("t-0.*-delete")
        assert not list(gone.glob("*.cleaned"))
        assert _cleaner_checkpoint(tmp_path) == {}
    finally:
        go_on.set()
        monkeypatch.undo()
        manager.close()


def test_a_deleted_logs_last_cleaning_is_forgotten(tmp_path: Path) -> None:
    # LogCleaner.last_results kept the last cleaning of every log ever cleaned: a broker
    # whose compacted topics are made and deleted over its life grew it for good.
    manager = _manager(tmp_path)
    config = compacted(segment_bytes=1 << 20)
    try:
        for n in range(5):
            tp = TopicPartition(f"churn-{n}", 0)
            log = manager.get_or_create(tp, config)
            _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
            assert manager.cleaner.clean_once(force=True)
            assert (f"churn-{n}", 0) in manager.cleaner.last_results
            manager.delete(tp) if n % 2 else manager.set_aside(tp)
        assert manager.cleaner.last_results == {}
    finally:
        manager.close()


@pytest.mark.parametrize("how", ["truncate_to", "truncate_fully_and_start_at"])
def test_a_truncation_lowers_the_cleaner_checkpoint(tmp_path: Path, how: str) -> None:
    # A truncation below the checkpoint (after an unclean election) left it where it
    # was: the offsets written again were taken for cleaned (the same deleted key came
    # back). Kafka lowers it to the active segment's base (maybeTruncateCheckpoint).
    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    try:
        log = manager.get_or_create(tp, compacted(segment_bytes=1 << 20, delete_retention_ms=0))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]
        # Within the active segment, or nothing cut: the checkpoint stays.
        put(log, (b"e", b"1"))
        assert manager.truncate_to(log, 12)
        assert not manager.truncate_to(log, 40)
        assert _cleaner_checkpoint(tmp_path) == {("t", 0): 12}
        if how == "truncate_to":
            assert manager.truncate_to(log, 0)
        else:
            manager.truncate_fully_and_start_at(log, 0)
        assert _cleaner_checkpoint(tmp_path) == {("t", 0): 0}
        assert manager.cleaner._checkpoint_of(log) == 0
        _history(log, [(b"K", b"v"), (b"x", b"1"), (b"y", b"1"), (b"K", None)], more=3)
        (first,) = manager.cleaner.clean_once(force=True)
        assert first.first_dirty_offset == 0
        _history(log, [(b"z", b"1")] * 4, more=0)
        manager.cleaner.clean_once(force=True)
        assert _deleted(log, b"K")
    finally:
        manager.close()


@pytest.mark.parametrize("meanwhile", ["truncate", "delete"])
def test_a_cleaning_records_nothing_for_a_log_truncated_or_deleted_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: str
) -> None:
    # After the cleaning's last swap, before its checkpoint is written: a truncation
    # lowered the entry, a deletion removed it, and neither may be undone.
    import storage.cleaner

    manager = _manager(tmp_path)
    tp = TopicPartition("t", 0)
    real_clean = storage.cleaner.clean
    try:
        log = manager.get_or_create(tp, compacted(segment_bytes=1 << 20))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])

        def clean_(to_clean: storage.cleaner.LogToClean, **kwargs: object) -> object:
            result = real_clean(to_clean, **kwargs)  # type: ignore[arg-type]
            assert result.complete
            if meanwhile == "truncate":
                manager.truncate_to(log, 2)
            else:
                manager.delete(tp)
            return result

        monkeypatch.setattr(storage.cleaner, "clean", clean_)
        (result,) = manager.cleaner.clean_once(force=True)
        assert result.end_offset == 12
        assert _cleaner_checkpoint(tmp_path) == {}  # no entry was written, nor is one now
        assert manager.cleaner._checkpoint_of(log) is None
        if meanwhile == "delete":  # nor is its result kept
            assert manager.cleaner.last_results == {}
    finally:
        manager.close()


def test_a_followers_truncation_lowers_the_cleaner_checkpoint(tmp_path: Path) -> None:
    # The replica manager truncates through the log manager (Kafka's truncateTo).
    from broker.replica_manager import ReplicaManager
    from broker.state_change_log import StateChangeLog
    from tests.unit.leader_and_isr_requests import leader_and_isr_request

    manager = _manager(tmp_path / "data")
    tp = TopicPartition("t", 0)
    replicas = ReplicaManager(2, None, StateChangeLog(tmp_path, 2), logs=manager)  # type: ignore[arg-type]
    try:
        log = manager.get_or_create(tp, compacted(segment_bytes=1 << 20))
        replicas.become_leader_or_follower(leader_and_isr_request(tp, 1, 1, [1], [1, 2]))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        assert [r.end_offset for r in manager.cleaner.clean_once(force=True)] == [12]
        # The cleaning merged 0-11 into one segment, the active one after the cut.
        assert replicas.truncate(tp, 1, 1, 5, "test") == 5
        assert _cleaner_checkpoint(tmp_path / "data") == {("t", 0): 0}
        assert manager.cleaner._checkpoint_of(log) == 0
    finally:
        replicas.close()
        manager.close()


def test_a_cleaning_whose_map_fills_inside_a_segment_ends_there(tmp_path: Path) -> None:
    # The map filled inside the first dirty segment, but the cleaning ended, and the
    # checkpoint moved, at that segment's end: its records past the map's end were
    # never mapped. K's tombstone there then went at the delete horizon, while K's
    # value it deleted, never replaced in any map, stayed. Kafka's cleaning ends after
    # the map's last offset (offsetMap.latestOffset + 1), mid-segment if need be.
    log = open_log(tmp_path / "t-0", compacted(segment_bytes=1 << 20, delete_retention_ms=0))
    put(log, (b"K", b"v"))
    for i in range(5):
        put(log, (b"a%d" % i, b"x"))
    put(log, (b"K", None))  # offsets 0-6 in segment 0
    log.roll()
    put(log, (b"b", b"1"))
    log.roll()
    put(log, (b"c", b"1"))  # the active segment
    before = everything(log)
    three_keys = 3 * (1 + OffsetMap.ENTRY_OVERHEAD) + 4
    cleaner = LogCleaner(lambda: [log], dedupe_buffer_size=three_keys, time_ms=lambda: NOW)
    (first,) = cleaner.clean_once(force=True)
    assert (first.keys_mapped, first.end_offset) == (3, 3)  # K, a0, a1: on to 3
    assert _cleaner_checkpoint(tmp_path) == {("t", 0): 3}
    assert everything(log) == before  # nothing replaced below 3; kept as is from 3
    ends = [first.end_offset]
    while ends[-1] < log.segments_snapshot()[-1].base_offset:
        (more,) = cleaner.clean_once(force=True)
        assert more.first_dirty_offset == ends[-1]
        ends.append(more.end_offset)
        assert _deleted(log, b"K")
    assert ends == [3, 6, 8]  # a2, a3, a4 | K (at 6), b: the next segment's base
    after = latest(everything(log))
    assert after.pop(b"K", (6, None)) == (6, None)
    assert after == {k: v for k, v in latest(before).items() if k != b"K"}


def test_a_cleaning_maps_one_key_whatever_its_budget(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    result = clean_log(log, checkpoint=None, map_bytes=1, now_ms=NOW, force=True)
    assert result is not None
    assert (result.keys_mapped, result.end_offset) == (1, 1)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(
        st.tuples(st.sampled_from([b"a", b"b", b"c", b"d", b"e"]), st.booleans()),
        min_size=1,
        max_size=80,
    ),
    map_keys=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_small_maps_never_bring_a_deleted_key_back(
    tmp_path_factory: pytest.TempPathFactory,
    writes: list[tuple[bytes, bool]],
    map_keys: int,
    seed: int,
) -> None:
    # Cleanings with maps of a few keys, tombstones going as soon as they may (a delete
    # horizon past every segment's time once any is clean, whatever the files' times):
    # each key's last record stays, or it goes if a tombstone.
    rng = random.Random(seed)
    directory = tmp_path_factory.mktemp("small") / "t-0"
    log = open_log(directory, compacted(segment_bytes=300, delete_retention_ms=-DAY_MS))
    cleaner = LogCleaner(
        lambda: [log],
        dedupe_buffer_size=map_keys * (1 + OffsetMap.ENTRY_OVERHEAD),
        time_ms=lambda: NOW,
    )
    model: dict[bytes, tuple[int, bytes | None]] = {}
    for n, (key, tombstone) in enumerate(writes):
        value = None if tombstone else b"v%d" % n
        model[key] = (put(log, (key, value)), value)
        if rng.random() < 0.3:
            cleaner.clean_once(force=True)
    for _ in range(3):
        cleaner.clean_once(force=True)
    found = latest(everything(log))
    for key, (offset, value) in model.items():
        if value is None:
            assert found.get(key, (offset, None)) == (offset, None), key
        else:
            assert found[key] == (offset, value)
    assert set(found) <= set(model)


def test_a_cleaning_failing_on_a_log_truncated_meanwhile_leaves_it_cleanable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A segment cut while the cleaner read it reads as damaged; the log moved, as when a
    # swap is refused: it is cleaned again later, not marked uncleanable.
    import storage.cleaner

    log = open_log(tmp_path / "t-0")
    fill(log, 120)
    real_clean = storage.cleaner.clean
    calls = []

    def clean_(to_clean: storage.cleaner.LogToClean, **kwargs: object) -> object:
        calls.append(to_clean.first_dirty)
        if len(calls) == 1:
            log.truncate_to(log.log_end_offset - 1)
            raise CorruptRecordError("shorter than a batch header", position=0)
        return real_clean(to_clean, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.cleaner, "clean", clean_)
    cleaner = LogCleaner(lambda: [log], time_ms=lambda: NOW)
    assert cleaner.clean_once() == []
    assert cleaner.uncleanable_partitions == []
    (result,) = cleaner.clean_once()
    assert result.complete


@pytest.mark.parametrize("how", ["max.message.bytes lowered", "delete to compact"])
def test_a_deleted_key_stays_deleted_when_its_old_value_cannot_be_read(
    tmp_path: Path, how: str
) -> None:
    # k's old value lies in a batch the cleaner cannot decompress within its bound (16 x
    # the topic's current max.message.bytes): a 3 MB value gzipped to ~3 KB, written
    # before the operator lowered max.message.bytes, or while the topic was delete-only
    # (whose batches are never decompressed). The cleaner kept that batch unread, so k's
    # old value stayed when its tombstone was mapped; the tombstone then went at the
    # delete horizon and the old value was k's latest again. Kafka 2.8's cleaner reads
    # every batch, dropping the value in the cleaning that maps the tombstone.
    lowered = how == "max.message.bytes lowered"
    config = compacted(
        compact=lowered,
        delete_enabled=not lowered,
        delete_retention_ms=3600 * 1000,
        min_cleanable_dirty_ratio=0.0,
        segment_bytes=3400,  # each segment below is a run of its own
        **({} if lowered else {"max_message_bytes": 100_000}),
    )
    log = open_log(tmp_path / "t-0", config)

    def write(*records: RecordSpec, compression: int = Compression.NONE) -> None:
        batch = build_batch(list(records), base_timestamp=NOW, compression=compression)
        log.append_as_leader(batch, 0)
        log.update_high_watermark(log.log_end_offset)
        log.roll()

    write(RecordSpec(b"\0" * (3 << 20), key=b"k"), compression=Compression.GZIP)
    # The operator lowers max.message.bytes, or makes the topic compacted
    # (LogManager.update_topic_config gives the log its new config).
    log.config = dataclasses.replace(
        log.config, max_message_bytes=100_000, compact=True, delete_enabled=False
    )
    write(RecordSpec(None, key=b"k"), RecordSpec(b"p" * 3200, key=b"pad"))  # k deleted
    write(RecordSpec(b"x", key=b"other"))
    assert latest(everything(log))[b"k"][1] is None

    first = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert first is not None
    assert first.complete
    assert first.kept_unread is not None
    assert first.kept_unread[0] == 0
    end = first.end_offset
    # Two hours pass (delete.retention.ms is one); the topic is written to and cleaned.
    for segment in log.segments_snapshot()[:-1]:
        two_hours_ago = os.stat(segment.path).st_mtime - 2 * 3600
        os.utime(segment.path, (two_hours_ago, two_hours_ago))
    for value in (b"y", b"z"):
        write(RecordSpec(value, key=b"other"))
        result = clean_log(log, checkpoint=end, map_bytes=1 << 20, now_ms=NOW, force=True)
        assert result is not None
        assert result.complete
        end = result.end_offset

    found = [(o, k, None if v is None else len(v)) for o, k, v in everything(log)]
    assert [r for r in found if r[1] == b"k"] == [(0, b"k", 3 << 20), (1, b"k", None)]
    assert latest(everything(log))[b"k"] == (1, None)  # still deleted
    assert b"pad" in latest(everything(log))


def test_tombstones_below_a_batch_kept_unread_still_go_at_the_horizon(tmp_path: Path) -> None:
    # Only the tombstones above the first batch kept unread stay: one below it cannot
    # have deleted a record in it.
    log = open_log(
        tmp_path / "t-0",
        compacted(delete_retention_ms=0, min_cleanable_dirty_ratio=0.0, segment_bytes=1 << 20),
    )
    put(log, (b"a", b"1"))
    put(log, (b"a", None))
    big = build_batch(
        [RecordSpec(b"\0" * (3 << 20), key=b"b")], base_timestamp=NOW, compression=Compression.GZIP
    )
    log.append_as_leader(big, 0)
    log.config = dataclasses.replace(log.config, max_message_bytes=100_000)
    put(log, (b"c", b"1"))
    put(log, (b"c", None))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    end = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert end is not None
    put(log, (b"d", b"1"))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    result = clean_log(log, checkpoint=end.end_offset, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert result is not None
    assert result.kept_unread is not None
    assert result.kept_unread[0] == 2
    found = [(o, k, None if v is None else len(v)) for o, k, v in everything(log)]
    # a's tombstone (below the batch) went; c's (above it) stays, though c has no record left
    assert found == [(2, b"b", 3 << 20), (4, b"c", None), (5, b"d", 1)]


def test_a_batch_kept_unread_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The operator is told, once and not at every cleaning, which batch keeps tombstones.
    log = open_log(
        tmp_path / "t-0", compacted(min_cleanable_dirty_ratio=0.0, segment_bytes=1 << 20)
    )
    big = build_batch(
        [RecordSpec(b"\0" * (3 << 20), key=b"b")], base_timestamp=NOW, compression=Compression.GZIP
    )
    log.append_as_leader(big, 0)
    log.config = dataclasses.replace(log.config, max_message_bytes=100_000)
    cleaner = LogCleaner(lambda: [log], time_ms=lambda: NOW)
    with caplog.at_level("WARNING", logger="storage.cleaner"):
        for value in (b"1", b"2", b"3"):
            put(log, (b"a", value))
            log.roll()
            log.update_high_watermark(log.log_end_offset)
            assert cleaner.clean_one(log, force=True) is not None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "t-0: the batch at offset 0 cannot be read" in warnings[0]
    assert "decompress to more than 1600000 bytes" in warnings[0]


@pytest.mark.parametrize("phase", ["batch_keys", "filter_batch"])
def test_the_cleaner_stopping_ends_a_cleaning_at_its_next_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str
) -> None:
    # A broker stopping (LogManager.close) stops the cleaner threads and waits for them:
    # a cleaning under way went on through the whole offset map's build and the run it
    # was copying (a run of segment.bytes, 1 GB by default, is a minute at the cleaner's
    # 23 MB/s), so the shutdown waited its 30 s for it, then went on with the thread
    # still cleaning. Kafka's CleanerThread.shutdown stops it at its next checkDone (for
    # each segment and read buffer, isRunning): its cleaned files go, nothing is swapped.
    import storage.cleaner

    held = threading.Event()
    go_on = threading.Event()
    real = getattr(storage.cleaner, phase)
    calls: list[int] = []
    log = open_log(tmp_path / "t-0", compacted(segment_bytes=1 << 20))
    _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
    log.update_high_watermark(log.log_end_offset)
    before = [s.base_offset for s in log.segments_snapshot()]
    cleaner = LogCleaner(lambda: [log], backoff_ms=10, time_ms=lambda: NOW)

    def holding(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if not held.is_set():  # the first batch this phase reads
            held.set()
            assert go_on.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(storage.cleaner, phase, holding)
    cleaner.start()
    try:
        assert held.wait(30)
        closing = threading.Thread(target=cleaner.close, args=(30,))
        closing.start()
        for _ in range(3000):  # until the stop is asked for
            if cleaner._stop.is_set():
                break
            closing.join(0.01)
        go_on.set()
        closing.join(30)
        assert not closing.is_alive()
        assert all(not t.is_alive() for t in cleaner._threads)
        assert len(calls) == 1  # the batch held, and no other after the stop
        assert [s.base_offset for s in log.segments_snapshot()] == before  # nothing swapped
        assert not list((tmp_path / "t-0").glob("*.cleaned"))
        assert _cleaner_checkpoint(tmp_path) == {}
    finally:
        go_on.set()
        cleaner.close(30)
        log.close()


def test_a_map_filling_inside_a_batch_ends_the_cleaning_after_its_last_key(
    tmp_path: Path,
) -> None:
    # A map of two keys fills at c, inside the batch a, b, c, d: the cleaning ends after
    # b (offsetMap.latestOffset + 1). The next one starts there, inside that batch, and
    # maps only its records from there (Kafka's buildOffsetMapForSegment: record.offset
    # >= startOffset): mapping a and b again would fill the map at c again, and no
    # cleaning would ever get past it.
    log = open_log(tmp_path / "t-0", compacted(segment_bytes=1 << 20))
    batch = build_batch(
        [RecordSpec(b"1", key=k) for k in (b"a", b"b", b"c", b"d")], base_timestamp=NOW
    )
    log.append_as_leader(batch, 0)  # offsets 0-3
    log.roll()
    put(log, (b"e", b"1"))  # 4
    log.roll()
    put(log, (b"f", b"1"))  # the active segment
    before = everything(log)
    two_keys = 2 * (1 + OffsetMap.ENTRY_OVERHEAD) + 1
    first = clean_log(log, checkpoint=None, map_bytes=two_keys, now_ms=NOW, force=True)
    assert first is not None
    assert (first.keys_mapped, first.end_offset) == (2, 2)
    # Only the segments below the end are rewritten (Kafka's groupSegmentsBySize over
    # logSegments(0, endOffset)): the one of e is left as it is, not merged in.
    assert [s.base_offset for s in log.segments_snapshot()] == [0, 4, 5]
    second = clean_log(log, checkpoint=2, map_bytes=two_keys, now_ms=NOW, force=True)
    assert second is not None
    assert (second.first_dirty_offset, second.keys_mapped, second.end_offset) == (2, 2, 4)
    assert everything(log) == before


def test_the_first_batch_kept_unread_is_the_one_reported(tmp_path: Path) -> None:
    # Two batches the cleaner cannot read within its bound: the first is reported (and
    # the tombstones above it kept), not the last.
    log = open_log(
        tmp_path / "t-0",
        compacted(delete_retention_ms=0, min_cleanable_dirty_ratio=0.0, segment_bytes=1 << 20),
    )

    def big(key: bytes) -> None:
        batch = build_batch(
            [RecordSpec(b"\0" * (3 << 20), key=key)],
            base_timestamp=NOW,
            compression=Compression.GZIP,
        )
        log.append_as_leader(batch, 0)

    put(log, (b"a", b"1"))  # 0
    big(b"b")  # 1
    put(log, (b"c", b"1"))  # 2
    big(b"d")  # 3
    log.config = dataclasses.replace(log.config, max_message_bytes=100_000)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    result = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert result is not None
    assert result.kept_unread is not None
    assert result.kept_unread[0] == 1


def test_a_cleaned_segment_keeps_its_runs_latest_modification_time(tmp_path: Path) -> None:
    # The delete horizon of later cleanings reads the cleaned segment's modification
    # time: it is the run's last (Kafka's cleanSegments: segments.last.lastModified), not
    # its first.
    log = open_log(tmp_path / "t-0", compacted(segment_bytes=1 << 20))
    for n in range(3):
        put(log, (b"k", b"%d" % n))
        log.roll()
    put(log, (b"other", b"1"))
    times = [NOW / 1000 - 3000, NOW / 1000 - 2000, NOW / 1000 - 1000]
    for segment, seconds in zip(log.segments_snapshot()[:-1], times, strict=True):
        os.utime(segment.path, (seconds, seconds))
    result = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert result is not None
    assert (result.segments_before, result.segments_after) == (4, 2)
    cleaned = log.segments_snapshot()[0]
    assert os.stat(cleaned.path).st_mtime == pytest.approx(times[-1], abs=0.01)


def test_a_segment_without_timestamps_is_as_young_as_its_file(tmp_path: Path) -> None:
    # min.compaction.lag.ms of a segment whose records have no timestamp (-1) counts
    # from its file's modification time (Kafka's LogSegment.largestTimestamp).
    hour = 3600 * 1000
    log = open_log(tmp_path / "t-0", compacted(min_compaction_lag_ms=hour))
    for n in range(3):
        batch = build_batch([RecordSpec(b"%d" % n, key=b"k")], base_timestamp=-1)
        log.append_as_leader(batch, 0)
    log.roll()
    put(log, (b"other", b"1"))
    log.update_high_watermark(log.log_end_offset)
    segment = log.segments_snapshot()[0]
    assert segment.max_timestamp < 0
    just_now = (NOW - 60_000) / 1000
    os.utime(segment.path, (just_now, just_now))
    assert survey(log, checkpoint=None, now_ms=NOW, force=True) is None
    long_ago = (NOW - 2 * hour) / 1000
    os.utime(segment.path, (long_ago, long_ago))
    assert survey(log, checkpoint=None, now_ms=NOW, force=True) is not None


def test_a_checkpoint_at_its_logs_end_at_start_up_stays() -> None:
    # Only an entry past its log's end is lowered (Kafka's cleanableOffsets resets a
    # checkpoint above logEndOffset): one at it, a segment boundary or where a map
    # filled inside a segment, names offsets not yet written, dirty when they are.
    entries = {("t", 0): 75, ("t", 1): 100, ("t", 2): 101}
    ends = {("t", 0): (75, 50), ("t", 1): (100, 50), ("t", 2): (100, 50)}
    assert reconciled(entries, ends) == {("t", 0): 75, ("t", 1): 100, ("t", 2): 50}


def test_each_cleaner_thread_has_its_share_of_the_dedupe_buffer(tmp_path: Path) -> None:
    # log.cleaner.dedupe.buffer.size is shared by the log.cleaner.threads threads
    # (Kafka's CleanerThread: dedupeBufferSize / numThreads for its offset map).
    log = open_log(tmp_path / "t-0")
    fill(log, 40)
    three_keys = 3 * (2 + OffsetMap.ENTRY_OVERHEAD) + 4
    cleaner = LogCleaner(
        lambda: [log], threads=2, dedupe_buffer_size=2 * three_keys, time_ms=lambda: NOW
    )
    (result,) = cleaner.clean_once(force=True)
    assert (result.keys_mapped, result.end_offset) == (3, 3)


def test_clean_one_skips_a_log_marked_uncleanable_though_it_would_clean_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A log whose survey failed once is skipped until it is loaded again, by clean_one
    # too, even when a survey would now succeed (Kafka's uncleanablePartitions).
    import storage.cleaner

    log = open_log(tmp_path / "t-0")
    fill(log, 120)
    real_survey = storage.cleaner.survey
    calls = []

    def survey_(partition_log: PartitionLog, **kwargs: object) -> object:
        calls.append(partition_log)
        if len(calls) == 1:
            raise ValueError("a bad segment")
        return real_survey(partition_log, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage.cleaner, "survey", survey_)
    cleaner = LogCleaner(lambda: [log], time_ms=lambda: NOW)
    assert cleaner.clean_once() == []
    assert cleaner.uncleanable_partitions == [("t", 0)]
    assert cleaner.clean_one(log, force=True) is None
    assert len(calls) == 1
    assert cleaner.uncleanable_partitions == [("t", 0)]
    # The log deleted: its mark goes with it at once (the uncleanable partitions count).
    cleaner.forget(log)
    assert cleaner.uncleanable_partitions == []


def test_forgetting_many_logs_writes_each_directorys_checkpoint_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deletion of many logs (a StopReplica deleting 100,000 partitions) forgets them
    # together: each directory's entries of those logs go in one write, the others stay,
    # and a directory whose file cannot be written is reported alone, its entries of the
    # forgotten logs out of the cleaner all the same (Kafka's asyncDelete of many logs).
    first, second = tmp_path / "a", tmp_path / "b"
    logs = [open_log(first / "t-0"), open_log(first / "t-1"), open_log(second / "t-2")]
    kept = open_log(first / "u-0")
    LogCleaner._write_locked(str(first), {("t", 0): 4, ("t", 1): 8, ("u", 0): 12})
    LogCleaner._write_locked(str(second), {("t", 2): 4})
    cleaner = LogCleaner(lambda: [*logs, kept], time_ms=lambda: NOW)
    writes: list[str] = []
    real_write = LogCleaner._write_locked

    def write(log_dir: str, entries: dict[tuple[str, int], int]) -> None:
        writes.append(log_dir)
        if log_dir == str(second):
            raise OSError(28, "No space left on device")
        real_write(log_dir, entries)

    monkeypatch.setattr(LogCleaner, "_write_locked", staticmethod(write))
    errors = cleaner.forget_many(logs)
    assert sorted(writes) == [str(first), str(second)]
    assert list(errors) == [str(second)]
    assert errors[str(second)].errno == 28
    assert _cleaner_checkpoint(first) == {("u", 0): 12}
    assert _cleaner_checkpoint(second) == {("t", 2): 4}  # the write failed
    assert [cleaner._checkpoint_of(each) for each in logs] == [None, None, None]
    assert cleaner._checkpoint_of(kept) == 12
    # One log at a time (forget) raises what forget_many reports.
    with pytest.raises(OSError, match="No space"):
        LogCleaner(lambda: logs, time_ms=lambda: NOW).forget(logs[2])
    assert cleaner.forget_many([]) == {}


def test_a_log_whose_cleaning_is_being_aborted_is_not_claimed_again(tmp_path: Path) -> None:
    # A deletion (forget) or a policy change waits, under its abort mark, for the
    # cleaning under way to stop; no pass and no clean_one claims the log meanwhile
    # (Kafka's grabFilthiestCompactedLog skips the partitions in inProgress, which
    # abortCleaning sets to LogCleaningAborted until it resumes or removes them).
    log = open_log(tmp_path / "t-0")
    fill(log, 120)
    before = everything(log)
    cleaner = LogCleaner(lambda: [log], time_ms=lambda: NOW)
    cleaner._aborting[("t", 0)] = (log,)  # as _abort_locked marks it while it waits
    assert cleaner.clean_once(force=True) == []
    assert cleaner.clean_one(log, force=True) is None
    assert everything(log) == before
    assert ("t", 0) not in cleaner.last_results
    del cleaner._aborting[("t", 0)]
    (result,) = cleaner.clean_once(force=True)
    assert result.complete


def test_a_batch_kept_unread_first_met_in_a_later_cleaning_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Once per batch kept unread, not once per log: a log whose earlier cleanings read
    # everything is reported when one first keeps a batch unread.
    log = open_log(
        tmp_path / "t-0", compacted(min_cleanable_dirty_ratio=0.0, segment_bytes=1 << 20)
    )
    cleaner = LogCleaner(lambda: [log], time_ms=lambda: NOW)
    with caplog.at_level("WARNING", logger="storage.cleaner"):
        put(log, (b"a", b"1"))
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        first = cleaner.clean_one(log, force=True)
        assert first is not None
        assert first.kept_unread is None
        big = build_batch(
            [RecordSpec(b"\0" * (3 << 20), key=b"b")],
            base_timestamp=NOW,
            compression=Compression.GZIP,
        )
        log.append_as_leader(big, 0)  # offset 1
        log.config = dataclasses.replace(log.config, max_message_bytes=100_000)
        put(log, (b"a", b"2"))
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        second = cleaner.clean_one(log, force=True)
        assert second is not None
        assert second.kept_unread is not None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "t-0: the batch at offset 1 cannot be read" in warnings[0]


def test_a_batch_larger_than_the_cleaners_read_chunk_is_cleaned_whole(tmp_path: Path) -> None:
    # A batch of more than the 1 MiB the cleaner reads at a time (max.message.bytes
    # raised) is read whole, for the offset map and for the copy: its record stays
    # intact, and an earlier record of its key goes.
    log = open_log(
        tmp_path / "t-0",
        compacted(segment_bytes=8 << 20, max_message_bytes=4 << 20, min_cleanable_dirty_ratio=0.0),
    )
    put(log, (b"big", b"old"))
    put(log, (b"a", b"1"))
    large = b"L" * (3 << 19)  # 1.5 MiB
    put(log, (b"big", large))
    put(log, (b"a", b"2"))
    log.roll()
    put(log, (b"c", b"1"))
    result = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert result is not None
    assert result.complete
    assert everything(log) == [(2, b"big", large), (3, b"a", b"2"), (4, b"c", b"1")]


def test_a_cleaned_segment_is_indexed_as_its_appends_would_index_it(tmp_path: Path) -> None:
    # A cleaning that drops nothing writes the segment's batches again: its offset and
    # time indexes get the entries the appends gave it, one each time more than
    # index.interval.bytes were written since the last (Kafka's LogSegment.append, which
    # the cleaner's copy goes through).
    # Batches of one size, the interval two of them: an entry every third batch, as
    # one is due only once more than the interval was written.
    size = len(build_batch([RecordSpec(b"v" * 40, key=b"k00")], base_timestamp=NOW))
    directory = tmp_path / "t-0"
    log = open_log(directory, compacted(segment_bytes=1 << 20, index_interval_bytes=2 * size))
    for n in range(60):  # timestamps that fall back, and that repeat the largest
        put(log, (b"k%02d" % n, b"v" * 40), ts=NOW + n // 4 * 10 - n % 4 // 3 * 25)
    log.roll()
    put(log, (b"other", b"1"))
    log.flush()
    _log_path, index_path, time_index_path = segment_paths(directory, 0)
    with open(index_path, "rb") as f:
        index = f.read()
    with open(time_index_path, "rb") as f:
        time_index = f.read()
    assert len(index) == 8 * 19  # at the 4th, 7th, ..., 58th batch
    result = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert result is not None
    assert (result.complete, result.records_dropped) == (True, 0)
    log.flush()
    with open(index_path, "rb") as f:
        assert f.read() == index
    with open(time_index_path, "rb") as f:
        assert f.read() == time_index


def test_a_tombstone_survives_the_cleaning_that_first_maps_it(tmp_path: Path) -> None:
    # The delete horizon is the last clean segment's time less delete.retention.ms
    # (Kafka's deleteHorizonMs over logSegments(0, firstDirtyOffset)), not the time of
    # the segments this cleaning maps: even with delete.retention.ms=0 a tombstone stays
    # through the cleaning that first reads it, so a consumer can see it, and goes in a
    # later one.
    log = open_log(
        tmp_path / "t-0", compacted(delete_retention_ms=0, min_cleanable_dirty_ratio=0.0)
    )
    put(log, (b"k", b"v"))
    put(log, (b"k", None))  # 1
    log.roll()
    put(log, (b"other", b"1"))  # 2
    log.roll()
    put(log, (b"active", b"1"))
    first = clean_log(log, checkpoint=None, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert first is not None
    assert first.end_offset == 3
    assert everything(log)[:2] == [(1, b"k", None), (2, b"other", b"1")]
    log.roll()
    put(log, (b"later", b"1"))
    again = clean_log(log, checkpoint=3, map_bytes=1 << 20, now_ms=NOW, force=True)
    assert again is not None
    assert [r[1] for r in everything(log)] == [b"other", b"active", b"later"]


def test_an_unreadable_cleaner_checkpoint_leaves_every_log_dirty_from_its_start(
    tmp_path: Path,
) -> None:
    # Kafka's allCleanerCheckpoints: a checkpoint file that cannot be read counts as
    # empty (logged), and the logs of its directory are cleaned from their start; the
    # next cleaning writes it anew.
    (tmp_path / CLEANER_OFFSET_CHECKPOINT).write_text("0\n1\nnot a checkpoint line\n")
    log = open_log(tmp_path / "t-0")
    fill(log, 120)
    cleaner = LogCleaner(lambda: [log], time_ms=lambda: NOW)
    (result,) = cleaner.clean_once()
    assert result.first_dirty_offset == 0
    assert cleaner.uncleanable_partitions == []
    assert _cleaner_checkpoint(tmp_path) == {("t", 0): result.end_offset}
