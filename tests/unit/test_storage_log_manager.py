"""LogManager: loading log dirs, placement, deletion, checkpoints, background tasks."""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig, effective_topic_config
from storage import checkpoints
from storage import log_manager as log_manager_module
from storage.checkpoints import read_offset_checkpoint, write_atomically
from storage.errors import KafkaStorageError, LogDirLockedError, StorageError
from storage.log import LogConfig, PartitionLog, recovery_point_of
from storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    STRAY_SUFFIX,
    TOPIC_IDS_FILE,
    LogManager,
    lock_log_dirs,
)
from storage.records import iter_batches
from storage.testing import build_batch
from zkdata.znodes import TopicPartition, shared_index

NOW = 1_700_000_000_000
A0 = TopicPartition("a", 0)
A1 = TopicPartition("a", 1)
B0 = TopicPartition("b-with-dash", 0)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def broker_config(**overrides: str) -> BrokerConfig:
    props = {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", **overrides}
    return BrokerConfig.from_properties(props)


def produce(manager: LogManager, tp: TopicPartition, count: int = 1, size: int = 50) -> None:
    log = manager.get_or_create(tp)
    log.append_as_leader(build_batch([b"x" * size] * count, base_timestamp=NOW), 1)


def recorded_flushes(manager: LogManager) -> list[int | None]:
    """The manager's flush_dirty_logs replaced by one that records each call's now_ms."""
    runs: list[int | None] = []

    def flush_dirty_logs(now_ms: int | None = None) -> int:
        runs.append(now_ms)
        return 0

    manager.flush_dirty_logs = flush_dirty_logs  # type: ignore[method-assign]
    return runs


def test_logs_spread_over_dirs_and_come_back_after_a_clean_shutdown(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config())
    for tp in (A0, A1, B0):
        produce(manager, tp, count=3)
    placed = {tp: log.dir.parent for tp, log in manager.all_logs().items()}
    assert sorted(str(d) for d in placed.values()).count(str(dirs[0])) == 2  # fewest first
    manager.get_or_create(A0).update_high_watermark(2)
    manager.close()
    for directory in dirs:
        assert (directory / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offset_checkpoint(placed[A0] / "recovery-point-offset-checkpoint")[("a", 0)] == 3
    assert read_offset_checkpoint(placed[A0] / "replication-offset-checkpoint")[("a", 0)] == 2

    again = LogManager(dirs, broker_config())
    assert set(again.all_logs()) == {A0, A1, B0}
    assert all(
        r.clean_shutdown and r.segments_recovered == 0 for r in again.recovery_reports.values()
    )
    log = again.get_log(A0)
    assert log is not None
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (3, 2, 3)
    for directory in dirs:  # a crash from now on is not a clean shutdown
        assert not (directory / CLEAN_SHUTDOWN_FILE).exists()
    again.close()


def test_after_a_crash_logs_are_recovered_from_the_recovery_point(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_config())
    produce(manager, A0, count=2)
    manager.checkpoint_recovery_points()  # nothing flushed yet: recovery point 0
    log = manager.get_or_create(A0)
    log.flush()
    manager.checkpoint_recovery_points()
    produce(manager, A0, count=2)
    segment = log.dir / "00000000000000000000.log"
    size = segment.stat().st_size
    # a crash: no close(), and the last batch half written
    os.truncate(segment, size - 10)
    manager._unlock_dirs()  # the crashed process's lock is gone with it
    recovered = LogManager([tmp_path], broker_config())
    report = recovered.recovery_reports[A0]
    assert not report.clean_shutdown
    assert report.truncated_bytes > 0
    recovered_log = recovered.get_log(A0)
    assert recovered_log is not None
    assert recovered_log.log_end_offset == 2
    recovered.close()


def test_a_truncation_checkpointed_is_recovered_from_after_a_power_loss(tmp_path: Path) -> None:
    """A follower's truncation moves its log's recovery point back, and the fetcher has
    it written at once (Kafka's LogManager.truncateTo). The file saying the old point
    instead, a power loss before the next periodic checkpoint had recovery skip the
    truncated segment, now holding the new leader's records not yet on disk: a torn batch
    was served, and the log end was past a hole."""
    manager = LogManager([tmp_path], broker_config())
    log = manager.get_or_create(A0, LogConfig(segment_bytes=1000, index_interval_bytes=100))
    for _ in range(30):  # 150-byte batches: segments of six
        log.append_as_leader(build_batch([b"o" * 80], base_timestamp=NOW), 1)
    log.flush()
    manager.checkpoint_recovery_points()
    cut = log.segment_base_offsets()[1] + 2
    log.truncate_to(cut)
    manager.checkpoint_recovery_points_in([log.log_dir])
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint(checkpoint)[("a", 0)] == cut
    while len(log.segment_base_offsets()) < 4:  # the new leader's records; a roll
        log.append_as_leader(build_batch([b"N" * 80], base_timestamp=NOW), 2)
    # The power lost before the roll's flush: half of the first new batch reached the disk.
    segment = log.dir / f"{cut - 2:020d}.log"
    torn = next(h for h in iter_batches(segment.read_bytes()) if h.base_offset >= cut)
    os.truncate(segment, torn.position + torn.size // 2)
    manager._unlock_dirs()  # the process is gone, its lock with it

    recovered = LogManager([tmp_path], broker_config())
    assert recovered.recovery_reports[A0].truncated_bytes > 0
    again = recovered.get_log(A0)
    assert again is not None
    assert again.log_end_offset == cut
    assert again.segment_base_offsets() == [0, cut - 2]  # the later ones deleted
    recovered.close()


def test_a_checkpoint_read_before_a_truncation_does_not_land_after_its_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The periodic checkpoint reads every recovery point, then writes the file: one that
    read before a truncation is written before the truncation's own, not after it."""
    manager = LogManager([tmp_path], broker_config())
    for _ in range(5):
        produce(manager, A0)
    log = manager.get_or_create(A0)
    log.flush()
    read, resume = threading.Event(), threading.Event()
    real_value = recovery_point_of

    def slow_value(partition_log: Any) -> int:
        offset = real_value(partition_log)
        if threading.current_thread().name == "periodic":
            read.set()  # its offsets are read, the file not written yet: truncate now
            resume.wait(10)
        return offset

    monkeypatch.setattr(log_manager_module, "recovery_point_of", slow_value)
    periodic = threading.Thread(target=manager.checkpoint_recovery_points, name="periodic")
    periodic.start()
    assert read.wait(10)
    log.truncate_to(2)
    truncation = threading.Thread(
        target=manager.checkpoint_recovery_points_in, args=([log.log_dir],)
    )
    truncation.start()
    truncation.join(0.2)  # it waits for the periodic write to end
    resume.set()
    periodic.join(10)
    truncation.join(10)
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint(checkpoint)[("a", 0)] == 2
    manager.close()


@pytest.mark.parametrize(
    "name",
    [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ],
)
@pytest.mark.parametrize(
    ("garbage", "complaint"),
    [
        (b"0\n1\na 0\n", "malformed line"),
        (b"\x00\xff\xfe" * 10, "not text"),
        # Kafka reads an offset as a Long and a partition as an Int (parseLong, parseInt)
        (b"0\n1\na 0 -1\n", "malformed line"),
        (b"0\n1\na 0 9223372036854775808\n", "malformed line"),
        (b"0\n1\na 0_0 2\n", "malformed line"),
    ],
)
def test_an_unreadable_offset_checkpoint_costs_its_offsets_not_the_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, garbage: bytes, complaint: str
) -> None:
    """Kafka warns and resets a recovery point or log start checkpoint it cannot read;
    here the high watermarks' too (they are learned again): the broker starts, every log
    there, the recovery point's from its first segment."""
    directory = tmp_path / "d1"
    manager = LogManager([directory], broker_config())
    for _ in range(3):
        produce(manager, A0)
    manager.get_or_create(A0).update_high_watermark(2)
    manager.close()
    (directory / name).write_bytes(garbage)
    (directory / CLEAN_SHUTDOWN_FILE).unlink()  # and it crashed
    again = LogManager([directory], broker_config())
    assert f"{directory / name}: {complaint}" in caplog.text
    log = again.get_log(A0)
    assert log is not None
    assert again.is_log_dir_online(directory)
    assert log.log_end_offset == 3
    assert log.high_watermark == (0 if name == "replication-offset-checkpoint" else 2)
    # the recovery starts from the first segment: it is where the recovery point is left
    assert log.recovery_point == (0 if name == "recovery-point-offset-checkpoint" else 3)
    again.close()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("0\n2\n5 10\n3 20\n", "entries not increasing"),
        # an epoch past Kafka's Int became the latest (the follower's OffsetsForLeaderEpoch
        # could not be encoded); a negative one was served to OffsetsForLeaderEpoch
        ("0\n2\n1 0\n3000000000 3\n", "malformed line"),
        ("0\n2\n-7 -5\n6 5\n", "malformed line"),
    ],
)
def test_an_unreadable_leader_epoch_checkpoint_is_read_again_from_the_batches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, complaint: str
) -> None:
    """Every batch carries its leader epoch: a log whose epoch checkpoint cannot be read
    rebuilds it from all of them (Kafka fails the broker's start-up), even after a clean
    shutdown, and writes it again at its next flush."""
    directory = tmp_path / "d1"
    manager = LogManager([directory], broker_config())
    log = manager.get_or_create(A0, LogConfig(segment_bytes=400))
    for epoch in (1, 1, 3, 3, 3, 6, 6):
        log.append_as_leader(build_batch([b"x" * 100], base_timestamp=NOW), epoch)
    epochs = log.epoch_cache.entries()
    assert len(log.segment_base_offsets()) > 2
    manager.close()
    checkpoint = log.dir / "leader-epoch-checkpoint"
    checkpoint.write_text(text)
    again = LogManager([directory], broker_config())
    assert complaint in caplog.text
    reloaded = again.get_log(A0)
    assert reloaded is not None
    assert reloaded.epoch_cache.entries() == epochs
    assert reloaded.log_end_offset == 7
    reloaded.flush()
    assert checkpoints.read_epoch_checkpoint(checkpoint) == [tuple(e) for e in epochs]
    again.close()


def test_a_log_dir_is_locked_while_in_use(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_config())
    with pytest.raises(LogDirLockedError, match="in use"):
        LogManager([tmp_path], broker_config())
    manager.close()
    LogManager([tmp_path], broker_config()).close()


@pytest.mark.parametrize("syncs_filesystems", [True, False])
def test_an_append_racing_the_clean_shutdown_is_refused_not_left_unflushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syncs_filesystems: bool
) -> None:
    """A producer's request still being handled while the broker closes its logs (its
    connection cut, its handler thread not waited for) appended after the flush: the
    records were neither synced nor under the recovery point, and yet the clean-shutdown
    marker told the next start to trust the log. Kafka's request handlers are drained
    before its LogManager shuts down; here the logs refuse appends (and truncations) from
    the moment the close starts, so what the flush covers is the whole log."""
    manager = LogManager([tmp_path], broker_config())
    produce(manager, A0, count=3)
    partition_log = manager.get_or_create(A0)
    late: list[object] = []

    def append_meanwhile() -> None:
        if late:
            return
        try:
            late.append(partition_log.append_as_leader(build_batch([b"late"]), 1))
        except KafkaStorageError as e:
            late.append(e)

    monkeypatch.setattr(log_manager_module, "can_sync_filesystems", lambda: syncs_filesystems)
    real_sync, real_flush = checkpoints.sync_filesystems, PartitionLog.flush

    def sync(dirs: Any) -> None:
        append_meanwhile()
        real_sync(dirs)

    def flush(self: PartitionLog, offset: int | None = None) -> None:
        real_flush(self, offset)
        append_meanwhile()  # after this log's fsyncs, before its close

    monkeypatch.setattr(log_manager_module, "sync_filesystems", sync)
    monkeypatch.setattr(PartitionLog, "flush", flush)
    manager.close()
    assert len(late) == 1
    assert isinstance(late[0], KafkaStorageError), "appended after the close began"
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    recovery_points = read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert recovery_points[("a", 0)] == 3
    monkeypatch.undo()
    again = LogManager([tmp_path], broker_config())
    try:
        reloaded = again.get_log(A0)
        assert reloaded is not None
        assert reloaded.log_end_offset == reloaded.recovery_point == 3
    finally:
        again.close()


def test_log_dirs_locked_first_are_taken_over_by_the_manager(tmp_path: Path) -> None:
    """The broker locks its directories before anything else (lock_log_dirs); its
    LogManager holds those locks then, and releases them when it closes."""
    a, b = tmp_path / "a", tmp_path / "b"
    locked = lock_log_dirs([a, b])
    assert locked.holds(a)
    assert locked.holds(os.fspath(b))
    # Another broker on one of them is refused, and keeps none of the others' locks.
    with pytest.raises(LogDirLockedError, match="in use"):
        lock_log_dirs([tmp_path / "c", b])
    lock_log_dirs([tmp_path / "c"]).release()
    manager = LogManager([a, b], broker_config(), locked=locked)
    assert not locked.holds(a)
    assert not locked.holds(b)
    locked.release()  # nothing of the manager's
    with pytest.raises(LogDirLockedError):
        lock_log_dirs([a])
    manager.close()
    lock_log_dirs([a, b]).release()


@pytest.mark.parametrize("second", ["{d}/", "{d}/../data", "{d}/./", "{link}"])
def test_the_same_log_dir_twice_is_refused_as_a_duplicate(tmp_path: Path, second: str) -> None:
    """Kafka 2.8's LogManager.createAndValidateLogDirs compares the directories'
    canonical paths: "Duplicate log directory found". The second lock of the same
    directory said it "is in use by another broker", sending the user after a process
    that does not exist. Nothing is created or locked."""
    d = tmp_path / "data"
    link = tmp_path / "link"
    link.symlink_to(d, target_is_directory=True)
    dirs = [os.fspath(d), second.format(d=d, link=link)]
    with pytest.raises(ValueError, match=r"^Duplicate log directory found: ") as info:
        lock_log_dirs(dirs)
    assert "another broker" not in str(info.value)
    assert f"{dirs[1]} is {dirs[0]}" in str(info.value)
    assert not d.exists()
    with pytest.raises(ValueError, match=r"^Duplicate log directory found: "):
        LogManager(dirs, broker_config())
    assert not d.exists()
    lock_log_dirs([d, tmp_path / "other"]).release()


def test_delete_renames_then_removes(tmp_path: Path) -> None:
    clock = Clock()
    manager = LogManager([tmp_path], broker_config(), time_ms=clock)
    produce(manager, A0)
    produce(manager, A1)
    assert manager.delete(A0)
    assert not manager.delete(A0)
    renamed = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1
    assert renamed[0].startswith("a-0.")
    assert A0 not in manager
    assert ("a", 0) not in read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    manager.scheduler.run_pending(NOW + 59_000)
    assert (tmp_path / renamed[0]).exists()
    manager.scheduler.run_pending(NOW + 60_000)  # log.segment.delete.delay.ms
    assert not (tmp_path / renamed[0]).exists()
    # a -delete directory left by a crash is removed at start
    manager.close()
    (tmp_path / "a-1.0123abcd-delete").mkdir()
    LogManager([tmp_path], broker_config()).close()
    assert not (tmp_path / "a-1.0123abcd-delete").exists()


def test_background_retention_and_checkpoints(tmp_path: Path) -> None:
    clock = Clock()
    config = broker_config(**{"log.retention.check.interval.ms": "1000"})
    topic = LogConfig.from_topic_config(
        effective_topic_config(config, {"segment.bytes": "300", "retention.ms": "5000"})
    )
    manager = LogManager([tmp_path], config, time_ms=clock)
    log = manager.get_or_create(A0, topic)
    for i in range(4):
        log.append_as_leader(build_batch([b"x" * 200], base_timestamp=NOW + i), 2)
    log.update_high_watermark(4)
    manager.schedule_tasks()
    clock.now = NOW + 30_000
    manager.scheduler.run_pending()
    # Every record is past retention.ms and below the high watermark: the active
    # segment goes too, a new one rolled at the log end (Kafka 2.8's deleteSegments).
    assert log.segment_base_offsets() == [4]
    assert log.log_start_offset == 4
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") == {("a", 0): 4}
    clock.now += 60_000
    manager.scheduler.run_pending()
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {("a", 0): 4}
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]
    manager.close()


def test_flush_ms_is_honoured_by_the_background_thread(tmp_path: Path) -> None:
    config = broker_config(**{"log.flush.interval.ms": "20"})
    manager = LogManager([tmp_path], config)
    log = manager.get_or_create(A0, effective_topic_config(config))
    assert log.config.flush_ms == 20
    manager.start()
    try:
        produce(manager, A0, count=5)
        done = threading.Event()
        for _ in range(200):
            if log.recovery_point == 5:
                done.set()
                break
            threading.Event().wait(0.02)
        assert done.is_set()
    finally:
        manager.close()


def test_the_flusher_flushes_each_log_whose_topic_sets_flush_ms_made_or_found(
    tmp_path: Path,
) -> None:
    clock = Clock()

    def topic_config(topic: str) -> LogConfig:
        return LogConfig(flush_ms=1000) if topic == "a" else LogConfig()

    manager = LogManager([tmp_path], broker_config(), topic_config=topic_config, time_ms=clock)
    for tp in (A0, A1, B0):
        produce(manager, tp, count=2)
    clock.now += 999
    assert manager.flush_dirty_logs() == 0
    clock.now += 1
    assert manager.flush_dirty_logs() == 2
    assert [manager.get_log(tp).recovery_point for tp in (A0, A1, B0)] == [2, 2, 0]  # type: ignore[union-attr]
    manager.delete(A1)
    manager.close()

    again = LogManager([tmp_path], broker_config(), topic_config=topic_config, time_ms=clock)
    for tp in (A0, B0):
        produce(again, tp)
    clock.now += 1000
    assert again.flush_dirty_logs() == 1  # a0, found on disk; a1 was deleted
    assert again.get_log(A0).recovery_point == 3  # type: ignore[union-attr]
    again.close()


def test_the_logs_by_topic_are_the_logs_through_creations_deletions_and_a_failed_dir(
    tmp_path: Path,
) -> None:
    # held_topics, partitions_of, update_topic_config and forget_topic_ids read the logs
    # by topic (a second index): after every change it must say what a scan would.
    rng = random.Random(7)
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    topics = ["a", "b", "c", "d"]
    every = [TopicPartition(t, p) for t in topics for p in range(4)]
    manager = LogManager(dirs, broker_config())

    def check() -> None:
        logs = manager.all_logs()
        assert sorted(manager.partitions_of(topics)) == sorted(logs)
        for topic in topics:
            held = {tp for tp in logs if tp.topic == topic}
            assert set(manager.partitions_of([topic])) == held
            assert manager.held_topics([topic]) == ({topic} if held else set())
            assert manager.update_topic_config(topic, LogConfig()) == len(held)

    try:
        for _ in range(200):
            tps = rng.sample(every, rng.randint(1, 5))
            action = rng.choice(["make", "make", "delete", "set_aside"])
            if action == "make":
                for tp in tps:
                    manager.get_or_create(tp)
            elif action == "delete":
                manager.delete_many(tps)
            else:
                manager.set_aside_many(tps)
            check()
        failed = os.fspath(dirs[0])
        in_failed = {tp for tp, pl in manager.all_logs().items() if pl.log_dir == failed}
        assert in_failed
        assert set(manager.handle_log_dir_failure(failed)) == in_failed
        check()
        for tp in every:
            manager.get_or_create(tp)  # all of them in the live directory now
        check()
        assert sorted(manager.partitions_of(topics)) == every
        assert manager.held_topics(topics) == set(topics)
    finally:
        manager.close()


def test_a_topic_config_change_reaches_every_log_of_the_topic_and_only_those(
    tmp_path: Path,
) -> None:
    clock = Clock()
    manager = LogManager([tmp_path], broker_config(), time_ms=clock)
    for tp in (A0, A1, B0):
        produce(manager, tp, count=2)
    assert manager.update_topic_config("a", LogConfig(flush_ms=1000, retention_ms=5)) == 2
    assert [manager.get_log(tp).config.retention_ms for tp in (A0, A1)] == [5, 5]  # type: ignore[union-attr]
    assert manager.get_log(B0).config == LogConfig()  # type: ignore[union-attr]
    # The flusher now flushes the topic's logs by its flush.ms, and stops when it goes.
    clock.now += 1000
    assert manager.flush_dirty_logs() == 2
    assert manager.update_topic_config("a", LogConfig()) == 2
    produce(manager, A0)
    clock.now += 10_000
    assert manager.flush_dirty_logs() == 0
    assert manager.update_topic_config("nope", LogConfig()) == 0
    manager.close()


def test_topic_configs_for_logs_found_on_disk(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_config())
    produce(manager, A0)
    manager.close()
    again = LogManager(
        [tmp_path],
        broker_config(),
        topic_config=lambda topic: LogConfig(retention_ms=123 if topic == "a" else 1),
    )
    log = again.get_log(A0)
    assert log is not None
    assert log.config.retention_ms == 123
    again.close()


def test_the_configs_of_the_logs_found_at_start_are_asked_for_in_one_batch(
    tmp_path: Path,
) -> None:
    """One call for every topic with a log on disk (a broker reads them in one batch of
    ZooKeeper reads, not one round trip a topic); a topic the batch leaves out is asked
    for on its own."""
    manager = LogManager([tmp_path], broker_config())
    for tp in (A0, A1, B0):
        produce(manager, tp)
    manager.close()
    batches: list[list[str]] = []
    singles: list[str] = []

    def topic_configs(topics: Sequence[str]) -> dict[str, LogConfig]:
        batches.append(list(topics))
        return {"a": LogConfig(retention_ms=123)}

    def topic_config(topic: str) -> LogConfig:
        singles.append(topic)
        return LogConfig(retention_ms=7)

    again = LogManager(
        [tmp_path], broker_config(), topic_config=topic_config, topic_configs=topic_configs
    )
    try:
        assert batches == [["a", B0.topic]]
        assert singles == [B0.topic]
        assert [again.get_log(tp).config.retention_ms for tp in (A0, A1, B0)] == [123, 123, 7]  # type: ignore[union-attr]
    finally:
        again.close()


def test_checkpoints_are_replaced_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    write_atomically(path, "0\n1\na 0 5\n")

    def crash(*_args: object) -> None:
        raise OSError("crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="crash"):
        write_atomically(path, "0\n1\na 0 9\n")
    assert read_offset_checkpoint(path) == {("a", 0): 5}  # the old one, whole
    monkeypatch.undo()
    manager = LogManager([tmp_path], broker_config())  # a leftover .tmp does no harm
    manager.close()
    assert path.read_text().startswith("0\n")


def test_new_partitions_share_one_fsync_of_their_log_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.log_manager as log_manager_module

    synced: list[Path] = []
    monkeypatch.setattr(log_manager_module, "fsync_dir", synced.append)
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, broker_config())
    for p in range(10):
        manager.get_or_create(TopicPartition("t", p), sync_dir=False)
    assert synced == []  # deferred: a LeaderAndIsr creating thousands pays once per directory
    manager.sync_new_dirs()
    assert sorted(p.resolve() for p in synced) == sorted(d.resolve() for d in dirs)
    manager.sync_new_dirs()
    assert len(synced) == 2  # nothing new, nothing to sync
    manager.get_or_create(TopicPartition("t", 10))  # the default syncs at once
    assert len(synced) == 3
    # Spread evenly, the new one in the directory with fewer partitions.
    counts = {d: len(list(d.glob("t-*"))) for d in dirs}
    assert sorted(counts.values()) == [5, 6], counts
    manager.close()


def test_a_checkpoint_is_rewritten_only_when_it_would_change(tmp_path: Path) -> None:
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    manager = LogManager(dirs, broker_config())
    try:
        produce(manager, A0, count=3)
        produce(manager, B0, count=2)
        manager.get_or_create(A1)
        manager.checkpoint_high_watermarks()
        files = [d / "replication-offset-checkpoint" for d in dirs]
        held = {tp for f in files for tp in read_offset_checkpoint(f)}
        assert held == {("a", 0), ("a", 1), ("b-with-dash", 0)}
        for f in files:
            os.utime(f, ns=(1, 1))  # a rewrite would show as a new mtime
        manager.checkpoint_high_watermarks()
        assert [f.stat().st_mtime_ns for f in files] == [1, 1]
        log = manager.get_log(A0)
        assert log is not None
        log.update_high_watermark(2)
        manager.checkpoint_high_watermarks()
        home = next(f for f in files if (f.parent / "a-0").exists())
        other = next(f for f in files if f is not home)
        assert home.stat().st_mtime_ns != 1
        assert other.stat().st_mtime_ns == 1
        assert read_offset_checkpoint(home)[("a", 0)] == 2
        other.unlink()  # removed behind the broker's back: written again, unchanged or not
        manager.checkpoint_high_watermarks()
        assert other.exists()
    finally:
        manager.close()


def test_a_checkpoint_written_in_pieces_reads_back_whole_and_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lines are formatted a few at a time (100,000 partitions never as one text): piece
    # boundaries fall inside and at the end of the file, and the order is by topic and
    # partition whatever order the logs were created in.
    monkeypatch.setattr(checkpoints, "_LINES_PER_PIECE", 2)
    created = [TopicPartition(t, p) for t in ("b", "a", "c") for p in (1, 0)]
    manager = LogManager([tmp_path], broker_config())
    try:
        for n, tp in enumerate(created):
            produce(manager, tp, count=n + 1)
    finally:
        manager.close()  # flushes every log and writes the checkpoints
    path = tmp_path / "recovery-point-offset-checkpoint"
    lines = path.read_text().splitlines()
    assert lines[:2] == ["0", "6"]
    assert [tuple(line.split()[:2]) for line in lines[2:]] == sorted(
        (tp.topic, str(tp.partition)) for tp in created
    )
    assert read_offset_checkpoint(path) == {
        (tp.topic, tp.partition): n + 1 for n, tp in enumerate(created)
    }


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def _leaders_of_new_partitions(manager: LogManager, count: int) -> list[TopicPartition]:
    """Each with a batch and a leader epoch entry not yet written (as after a
    LeaderAndIsr), in a directory not yet synced."""
    tps = [TopicPartition("t", p) for p in range(count)]
    for tp in tps:
        log = manager.get_or_create(tp, sync_dir=False)
        log.assign_epoch_start_offset(3, 0)
        log.append_as_leader(build_batch([b"x" * 20] * 2, base_timestamp=NOW), 3)
    return tps


@pytest.mark.skipif(not checkpoints.can_sync_filesystems(), reason="syncfs(2) is Linux's")
def test_a_clean_shutdown_syncs_the_file_system_not_each_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], broker_config())
    tps = _leaders_of_new_partitions(manager, 40)
    fsyncs = _count_fsyncs(monkeypatch)
    manager.close()
    # The three offset checkpoints and the marker's directory, not 40 logs' files: the
    # logs' data, their directories and epoch checkpoints are made durable by syncfs.
    assert len(fsyncs) <= 8, len(fsyncs)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert not list(tmp_path.glob("*/*.tmp"))
    monkeypatch.undo()
    again = LogManager([tmp_path], broker_config())
    try:
        for tp in tps:
            assert again.recovery_reports[tp].clean_shutdown
            log = again.get_log(tp)
            assert log is not None
            assert (log.log_end_offset, log.recovery_point) == (2, 2)
            assert log.epoch_cache.entries() == [(3, 0)]
    finally:
        again.close()


def test_without_syncfs_a_clean_shutdown_flushes_log_by_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import storage.log_manager as log_manager_module

    monkeypatch.setattr(log_manager_module, "can_sync_filesystems", lambda: False)
    manager = LogManager([tmp_path], broker_config())
    tps = _leaders_of_new_partitions(manager, 5)
    fsyncs = _count_fsyncs(monkeypatch)
    manager.close()
    assert len(fsyncs) >= 5 * 3  # each log's segment, its epoch checkpoint, its directory
    monkeypatch.undo()
    again = LogManager([tmp_path], broker_config())
    try:
        for tp in tps:
            log = again.get_log(tp)
            assert log is not None
            assert again.recovery_reports[tp].clean_shutdown
            assert (log.recovery_point, log.epoch_cache.entries()) == (2, [(3, 0)])
    finally:
        again.close()


@pytest.mark.skipif(not checkpoints.can_sync_filesystems(), reason="syncfs(2) is Linux's")
@pytest.mark.parametrize("failing_sync", [1, 2])
def test_a_failed_sync_of_the_file_system_is_no_clean_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_sync: int
) -> None:
    manager = LogManager([tmp_path], broker_config())
    tps = _leaders_of_new_partitions(manager, 5)
    syncs: list[int] = []
    real = checkpoints._syncfs

    def syncfs(fd: int) -> None:
        syncs.append(fd)
        if len(syncs) == failing_sync:  # before the epoch checkpoints' renames, or after
            raise OSError(5, "syncfs: Input/output error")
        real(fd)

    monkeypatch.setattr(checkpoints, "_syncfs", syncfs)
    manager.close()  # the directory failed, not the shutdown: reported, not raised
    assert manager.dir_failures.offline() == [os.fspath(tmp_path)]
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()
    monkeypatch.undo()
    again = LogManager([tmp_path], broker_config())  # as after a crash: recovered
    try:
        assert not list(tmp_path.glob("*/*.tmp"))  # staged files left over are removed
        for tp in tps:
            assert not again.recovery_reports[tp].clean_shutdown
            log = again.get_log(tp)
            assert log is not None
            assert (log.log_end_offset, log.latest_epoch) == (2, 3)
    finally:
        again.close()


def test_idle_leaders_cost_no_epoch_checkpoint_at_the_shutdown_or_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each got an epoch from a LeaderAndIsr and no batch since: the entry starts at the
    # log end, and the next load would drop it (and rewrite the file) anyway.
    manager = LogManager([tmp_path], broker_config())
    tps = [TopicPartition("idle", p) for p in range(20)]
    for tp in tps:
        manager.get_or_create(tp, sync_dir=False).assign_epoch_start_offset(3, 0)
    manager.close()
    assert not list(tmp_path.glob("idle-*/leader-epoch-checkpoint*"))
    fsyncs = _count_fsyncs(monkeypatch)
    again = LogManager([tmp_path], broker_config())
    assert len(fsyncs) <= 2, len(fsyncs)  # the clean-shutdown marker's removal
    monkeypatch.undo()
    try:
        for tp in tps:
            log = again.get_log(tp)
            assert log is not None
            assert (
                again.recovery_reports.get(tp) is None or again.recovery_reports[tp].clean_shutdown
            )
            assert log.epoch_cache.entries() == []
            log.assign_epoch_start_offset(4, 0)  # led again: a new epoch from there
    finally:
        again.close()


def test_loading_a_log_lists_its_directory_and_looks_for_no_file_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A broker loads 100,000s of logs: one listing each tells which files are there.
    manager = LogManager([tmp_path], broker_config())
    produce(manager, A0, count=3)
    for p in range(10):
        manager.get_or_create(TopicPartition("idle", p)).assign_epoch_start_offset(1, 0)
    manager.close()
    looked: list[str] = []
    real_exists, real_mkdir = os.path.exists, os.mkdir

    def exists(path: str | os.PathLike[str]) -> bool:
        looked.append(f"exists {path}")
        return real_exists(path)

    def mkdir(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        looked.append(f"mkdir {path}")
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os.path, "exists", exists)
    monkeypatch.setattr(os, "mkdir", mkdir)
    again = LogManager([tmp_path], broker_config())
    monkeypatch.undo()
    try:
        assert [x for x in looked if "idle-" in x or "a-0" in x] == []
        log = again.get_log(A0)
        assert log is not None
        assert (log.log_end_offset, log.epoch_cache.entries()) == (3, [(1, 0)])
        assert log.read(0, 10_000).next_offset == 3
        assert not any(s.indexes_missing for s in log._segments)  # found by the listing
    finally:
        again.close()


def test_a_log_knows_its_partition_by_the_shared_int_of_its_index(tmp_path: Path) -> None:
    # Parsed from its folder's name, made or found: one int for it per broker, not one
    # more per log (32 bytes each, 100,000s of logs).
    manager = LogManager([tmp_path], broker_config())
    made = manager.get_or_create(TopicPartition("a", int("700")))
    assert made.partition is shared_index(700)
    manager.close()
    again = LogManager([tmp_path], broker_config())
    ((key, found),) = again.all_logs().items()
    assert found.partition is shared_index(700)
    assert key.partition is shared_index(700)
    again.close()


def test_a_directory_with_a_second_name_for_a_partition_is_ignored_at_the_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "a-²" passes str.isdigit but not int(): it stopped the load with a ValueError.
    # "a-01" would be a second directory for partition a-1 ("a-1" is Kafka's name).
    manager = LogManager([tmp_path], broker_config())
    produce(manager, A1, count=2)
    manager.close()
    for name in ("a-\u00b2", "a-01"):
        (tmp_path / name).mkdir()
    with caplog.at_level("WARNING", logger="storage.log_manager"):
        again = LogManager([tmp_path], broker_config())
    assert set(again.all_logs()) == {A1}
    log = again.get_log(A1)
    assert log is not None
    assert log.log_end_offset == 2
    ignored = " ".join(r.getMessage() for r in caplog.records)
    assert "a-\u00b2" in ignored
    assert "a-01" in ignored
    again.close()


def test_a_partition_found_in_two_log_directories_is_refused_naming_both(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    for directory in dirs:
        manager = LogManager([directory], broker_config())
        produce(manager, A0)
        manager.close()
    with pytest.raises(StorageError, match="two logs") as refused:
        LogManager(dirs, broker_config())
    assert str(dirs[0] / "a-0") in str(refused.value)
    assert str(dirs[1] / "a-0") in str(refused.value)


@pytest.mark.parametrize("dir_count", [1, 2])
def test_an_unchanged_checkpoint_is_found_without_copying_the_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dir_count: int
) -> None:
    """A broker of 100,000 idle logs checks every few seconds whether its checkpoints
    changed: while no log came or went, only the logs whose offsets moved are read (the
    copies of the logs' table and offsets a write makes took 10 MB each time, and its
    passes over them all 28-38 ms)."""
    dirs = [tmp_path / f"d{n}" for n in range(dir_count)]
    manager = LogManager(dirs, broker_config())
    copies: list[Path] = []
    logs_in = manager._logs_in

    def counted(directory: Path) -> tuple[list[TopicPartition], list[object]]:
        copies.append(directory)
        return logs_in(directory)  # type: ignore[return-value]

    monkeypatch.setattr(manager, "_logs_in", counted)

    def held() -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for d in dirs:
            out.update(read_offset_checkpoint(d / "replication-offset-checkpoint"))
        return out

    try:
        produce(manager, A0, count=3)
        manager.get_or_create(B0)
        manager.checkpoint_high_watermarks()
        assert held() == {("a", 0): 0, ("b-with-dash", 0): 0}
        copies.clear()
        manager.checkpoint_high_watermarks()
        assert copies == []  # nothing came, went or moved
        log = manager.get_log(A0)
        assert log is not None
        log.update_high_watermark(3)
        manager.checkpoint_high_watermarks()
        assert held()[("a", 0)] == 3
        assert copies == []  # a moved offset: its row written, without copying the logs
        copies.clear()
        manager.checkpoint_high_watermarks()
        assert copies == []
        manager.get_or_create(A1)  # a new log: the next check writes it
        manager.checkpoint_high_watermarks()
        assert held() == {("a", 0): 3, ("a", 1): 0, ("b-with-dash", 0): 0}
        copies.clear()
        manager.checkpoint_high_watermarks()
        assert copies == []
        assert manager.delete(B0)
        manager.checkpoint_high_watermarks()
        assert held() == {("a", 0): 3, ("a", 1): 0}

        # A log made while a write copies the logs (after it read the generation): that
        # write does not hold it, and the next check must not take the file as current.
        late = TopicPartition("late", 0)

        def add_meanwhile(directory: Path) -> tuple[list[TopicPartition], list[object]]:
            found = logs_in(directory)
            if manager.get_log(late) is None:
                manager.get_or_create(late)
            return found  # type: ignore[return-value]

        monkeypatch.setattr(manager, "_logs_in", add_meanwhile)
        manager.get_or_create(TopicPartition("early", 0))  # the next write copies the logs
        log.update_high_watermark(2)
        manager.checkpoint_high_watermarks()
        if dir_count == 1:  # with two, the other directory's write may come after it
            assert ("late", 0) not in held()
        monkeypatch.setattr(manager, "_logs_in", counted)
        manager.checkpoint_high_watermarks()
        assert held() == {("a", 0): 2, ("a", 1): 0, ("early", 0): 0, ("late", 0): 0}
    finally:
        manager.close()


# --- topic ids --------------------------------------------------------------------------

OLD_ID = uuid.UUID(int=1)
NEW_ID = uuid.UUID(int=2)


def test_a_topic_id_is_adopted_then_kept_across_a_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config())
    produce(manager, A0)
    produce(manager, A1)
    # None recorded: the logs found take the id (as a log from before topic ids does).
    assert manager.claim_topic("a", OLD_ID) == []
    assert manager.claim_topic("a", OLD_ID) == []  # the same again: nothing to do
    manager.write_topic_ids()
    manager.close()
    for directory in dirs:
        assert checkpoints.read_topic_ids(directory / TOPIC_IDS_FILE) == {"a": OLD_ID}
    again = LogManager(dirs, broker_config())
    assert again.claim_topic("a", OLD_ID) == []
    assert set(again.all_logs()) == {A0, A1}
    again.close()


def test_logs_of_an_earlier_incarnation_are_named_and_set_aside_not_deleted(
    tmp_path: Path,
) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config())
    for tp in (A0, A1, B0):
        produce(manager, tp, count=3)
    assert manager.claim_topic("a", OLD_ID) == []
    assert manager.claim_topic("b-with-dash", OLD_ID) == []
    manager.write_topic_ids()
    manager.close()

    manager = LogManager(dirs, broker_config())
    # "a" was deleted while this broker was away and created again: a new id.
    assert sorted(manager.claim_topic("a", NEW_ID)) == [A0, A1]
    assert manager.claim_topic("a", NEW_ID) == []  # recorded at once: named only once
    assert manager.claim_topic("b-with-dash", OLD_ID) == []
    where = manager.set_aside(A0)
    assert where is not None
    assert where.name.startswith("a-0.")
    assert where.name.endswith(STRAY_SUFFIX)
    assert (where / "00000000000000000000.log").stat().st_size > 0  # kept whole
    assert manager.get_log(A0) is None
    assert manager.set_aside(A0) is None
    manager.get_or_create(A0)  # the new incarnation's log starts empty
    assert manager.get_log(A0) is not None
    assert manager.get_or_create(A0).log_end_offset == 0
    manager.write_topic_ids()
    manager.close()

    again = LogManager(dirs, broker_config())  # the stray directory is left alone
    assert set(again.all_logs()) == {A0, A1, B0}
    assert where.exists()
    assert again.claim_topic("a", NEW_ID) == []
    again.close()


@pytest.mark.parametrize(
    ("garbage", "complaint"),
    [(b"0\n1\na not-an-id\n", "malformed line"), (b"\x00\xff\xfe" * 10, "not text")],
)
def test_an_unreadable_topic_ids_file_is_taken_from_the_next_leader_and_isr(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: bytes, complaint: str
) -> None:
    directory = tmp_path / "d1"
    manager = LogManager([directory], broker_config())
    produce(manager, A0)
    manager.close()
    (directory / TOPIC_IDS_FILE).write_bytes(garbage)
    again = LogManager([directory], broker_config())
    assert complaint in caplog.text
    assert again.claim_topic("a", NEW_ID) == []  # adopted: nothing recorded to differ
    again.write_topic_ids()
    assert checkpoints.read_topic_ids(directory / TOPIC_IDS_FILE) == {"a": NEW_ID}
    again.close()


def recorded_ids(directory: Path) -> dict[str, uuid.UUID]:
    return checkpoints.read_topic_ids(directory / TOPIC_IDS_FILE)


def test_a_directory_left_with_no_log_of_a_topic_forgets_its_id(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config())
    try:
        produce(manager, A0)
        produce(manager, A1)
        produce(manager, B0)
        assert manager.claim_topic("a", OLD_ID) == []
        assert manager.claim_topic("b-with-dash", OLD_ID) == []
        manager.write_topic_ids()
        a0_dir = Path(manager.get_or_create(A0).log_dir)
        a1_dir = Path(manager.get_or_create(A1).log_dir)
        assert a0_dir != a1_dir
        assert manager.delete(A0)
        manager.forget_topic_ids({"a"})  # only where no log of the topic is left
        manager.write_topic_ids()
        assert recorded_ids(a0_dir) == {"b-with-dash": OLD_ID}
        assert recorded_ids(a1_dir) == {"a": OLD_ID, "b-with-dash": OLD_ID}
        assert manager.delete(A1)
        manager.forget_topic_ids({"a"})
        manager.write_topic_ids()
        assert recorded_ids(a1_dir) == {"b-with-dash": OLD_ID}
    finally:
        manager.close()


def test_a_log_made_after_its_topics_id_was_forgotten_records_the_id(tmp_path: Path) -> None:
    # A LeaderAndIsr claims the id, a StopReplica deleting the topic's last log here
    # forgets it, then the LeaderAndIsr makes its log: the log's directory names its id.
    directory = tmp_path / "d1"
    manager = LogManager([directory], broker_config())
    try:
        produce(manager, A0)
        assert manager.claim_topic("a", OLD_ID) == []
        assert manager.delete(A0)
        manager.forget_topic_ids({"a"})
        manager.get_or_create(A1, topic_id=OLD_ID)
        manager.get_or_create(B0, topic_id=uuid.UUID(int=0))  # no id given: none recorded
        manager.write_topic_ids()
        assert recorded_ids(directory) == {"a": OLD_ID}
    finally:
        manager.close()
    again = LogManager([directory], broker_config())
    try:
        # The topic deleted meanwhile and created again: its log here is set aside.
        assert again.claim_topic("a", NEW_ID) == [A1]
    finally:
        again.close()


def test_ids_of_topics_a_directory_holds_no_log_of_are_dropped_at_start(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config())
    produce(manager, A0)
    assert manager.claim_topic("a", OLD_ID) == []
    assert manager.claim_topic("gone", OLD_ID) == []
    manager.write_topic_ids()
    a0_dir = Path(manager.get_or_create(A0).log_dir)
    manager.close()
    for directory in dirs:
        assert recorded_ids(directory).keys() == {"a", "gone"}
    again = LogManager(dirs, broker_config())
    try:
        again.write_topic_ids()
        for directory in dirs:
            assert recorded_ids(directory) == ({"a": OLD_ID} if directory == a0_dir else {})
        assert again.claim_topic("a", OLD_ID) == []
    finally:
        again.close()


@pytest.mark.timeout(20)  # run_pending used to loop forever on it
def test_a_negative_high_watermark_checkpoint_interval_checkpoints_once(tmp_path: Path) -> None:
    # Kafka 2.8's KafkaScheduler runs a task with a negative period once, after its delay
    # (LogManager.InitialTaskDelayMs); here it used to be due again at once, forever.
    clock = Clock()
    config = broker_config(**{"replica.high.watermark.checkpoint.interval.ms": "-1"})
    manager = LogManager([tmp_path], config, time_ms=clock)
    runs: list[int] = []
    manager.checkpoint_high_watermarks = lambda: runs.append(1)  # type: ignore[method-assign]
    manager.schedule_tasks()
    manager.scheduler.run_pending(NOW + 29_999)
    assert runs == []
    manager.scheduler.run_pending(NOW + 30_000)
    manager.scheduler.run_pending(NOW + 90_000)
    assert runs == [1]
    manager.close()


def test_a_negative_checkpoint_interval_lets_the_manager_close(tmp_path: Path) -> None:
    manager = LogManager(
        [tmp_path], broker_config(**{"replica.high.watermark.checkpoint.interval.ms": "-1"})
    )
    manager.start()
    closed = threading.Event()

    def close() -> None:
        manager.close()
        closed.set()

    threading.Thread(target=close, daemon=True).start()
    assert closed.wait(5), "LogManager.close() hung: the scheduler's thread is spinning"


def test_a_period_of_zero_is_refused_at_start_not_spun_on(tmp_path: Path) -> None:
    # BrokerConfig refuses it; a config built around that check still never spins.
    config = dataclasses.replace(broker_config(), replica_high_watermark_checkpoint_interval_ms=0)
    manager = LogManager([tmp_path], config)
    with pytest.raises(ValueError, match="high-watermark-checkpoint"):
        manager.start()
    manager.close()


def test_a_negative_flush_scheduler_interval_leaves_the_flusher_at_once_a_second(
    tmp_path: Path,
) -> None:
    # Kafka's flusher would run once; here flush.ms is checked at least once a second
    # (docs/storage.md), not every millisecond.
    clock = Clock()
    config = broker_config(
        **{"log.flush.scheduler.interval.ms": "-1", "log.flush.interval.ms": "5000"}
    )
    manager = LogManager([tmp_path], config, time_ms=clock)
    runs = recorded_flushes(manager)
    manager.schedule_tasks()
    manager.scheduler.run_pending(NOW + 999)
    assert runs == []
    manager.scheduler.run_pending(NOW + 1000)
    manager.scheduler.run_pending(NOW + 1999)
    assert runs == [None]
    manager.close()


def test_a_log_start_checkpointed_past_the_data_left_after_a_power_loss_is_kept(
    tmp_path: Path,
) -> None:
    """The log start offset checkpoint is fsynced, the records are not (by default): a
    power loss can leave it past the log end recovered. The log restarts empty at its
    log start (Kafka 2.8's deleteSegmentsIfLogStartGreaterThanLogEnd), not at the end
    recovered: offsets already handed out are not handed out again."""
    manager = LogManager([tmp_path], broker_config())
    log = manager.get_or_create(A0)
    for _ in range(10):
        log.append_as_leader(build_batch([b"x" * 50], base_timestamp=NOW), 1)
    log.update_high_watermark(10)
    assert log.maybe_increment_log_start_offset(10)  # DeleteRecords up to 10
    manager.checkpoint_log_start_offsets()
    manager.checkpoint_high_watermarks()
    assert read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint")[("a", 0)] == 10
    segment = log.dir / "00000000000000000000.log"
    os.truncate(segment, segment.stat().st_size * 4 // 10)  # 4 batches reached the disk
    manager._unlock_dirs()  # the process is gone, its lock with it

    again = LogManager([tmp_path], broker_config())
    recovered = again.get_log(A0)
    assert recovered is not None
    assert (recovered.log_start_offset, recovered.log_end_offset) == (10, 10)
    assert recovered.high_watermark == 10
    info = recovered.append_as_leader(build_batch([b"new"], base_timestamp=NOW), 2)
    assert info.first_offset == 10
    again.close()


def test_the_scheduler_runs_on_the_monotonic_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manager on the broker's clocks: the scheduler's due times are monotonic (Kafka's
    KafkaScheduler), so a step of the wall clock forward does not delete a deleted log's
    files before log.segment.delete.delay.ms (readers may still hold them), and a step
    back does not hold the deletion for the step."""
    real = time.time
    step = {"s": 0.0}
    monkeypatch.setattr(time, "time", lambda: real() + step["s"])
    manager = LogManager([tmp_path], broker_config())
    try:
        produce(manager, A0)
        assert manager.delete(A0)
        renamed = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
        assert len(renamed) == 1
        step["s"] = 3600
        manager.scheduler.run_pending()
        assert renamed[0].exists()
        step["s"] = -3600
        monotonic_ns = time.monotonic_ns
        monkeypatch.setattr(time, "monotonic_ns", lambda: monotonic_ns() + 61 * 10**9)
        manager.scheduler.run_pending()
        assert not renamed[0].exists()
    finally:
        monkeypatch.undo()
        manager.close()
