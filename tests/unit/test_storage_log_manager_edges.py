"""LogManager at the edges: where a new log goes after deletions, the checkpoints a
deletion writes, the deleted log's files closed, a name too long for the file system,
the first run and period of the background tasks, a marker left by a failed shutdown
(Kafka 2.8 LogManager: nextLogDirs, asyncDelete, startup's schedules, shutdown)."""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from storage import checkpoints, epoch_cache
from storage import log_manager as log_manager_module
from storage.checkpoints import read_offset_checkpoint, read_topic_ids
from storage.errors import KafkaStorageError, LogDirLockedError, StorageError
from storage.log import LogConfig, PartitionLog
from storage.log_manager import CLEAN_SHUTDOWN_FILE, TOPIC_IDS_FILE, LogManager, lock_log_dirs
from storage.partition_dir import PartitionDir, join_partition_dir
from tests.unit.test_storage_log_manager import (
    A0,
    A1,
    B0,
    NOW,
    Clock,
    broker_config,
    produce,
    recorded_flushes,
)
from zkdata.znodes import TopicPartition

C0 = TopicPartition("c", 0)


def test_a_new_log_goes_where_fewest_logs_are_now_deletions_counted(tmp_path: Path) -> None:
    # Kafka's nextLogDirs counts the logs each directory holds now: one emptied by
    # deletions is the emptiest.
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    for tp in (A0, A1, B0):
        manager.get_or_create(tp)
    placed = {tp: log.dir.parent for tp, log in manager.all_logs().items()}
    assert placed == {A0: dirs[0], A1: dirs[1], B0: dirs[0]}
    assert manager.delete(A0)
    assert manager.delete(B0)
    assert manager.get_or_create(C0).dir.parent == dirs[0]
    manager.close()


def test_a_deletion_writes_its_directorys_checkpoints_without_the_log(tmp_path: Path) -> None:
    # Kafka 2.8's asyncDelete checkpoints the recovery points and log starts of the
    # directory at once: a log made again for the partition, then a crash before the next
    # periodic checkpoint, must not take the deleted log's offsets.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    produce(manager, A0, count=3)
    produce(manager, A1, count=2)
    for log in manager.all_logs().values():
        log.flush()
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    recovery = tmp_path / "recovery-point-offset-checkpoint"
    starts = tmp_path / "log-start-offset-checkpoint"
    assert read_offset_checkpoint(recovery) == {("a", 0): 3, ("a", 1): 2}
    assert manager.delete(A0)
    assert read_offset_checkpoint(recovery) == {("a", 1): 2}
    assert read_offset_checkpoint(starts) == {("a", 1): 0}
    manager.close()


def test_a_batch_deletion_writes_each_directorys_checkpoints_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka's batch asyncDelete (a StopReplica's partitions): every log renamed, then each
    # directory synced and its checkpoints written once. One at a time, deleting N
    # partitions wrote the directory's N-row checkpoints N times.
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    tps = [TopicPartition("t", p) for p in range(12)]
    for tp in tps:
        produce(manager, tp, count=2)
    for log in manager.all_logs().values():
        log.flush()
    manager.checkpoint_recovery_points()
    written: list[Path] = []
    synced: list[Path] = []
    real_write = checkpoints.write_offset_rows
    real_sync = checkpoints.fsync_dir

    def write_offset_rows(path: Path, *args: Any) -> Any:
        written.append(path)
        return real_write(path, *args)

    def fsync_dir(directory: Path) -> None:
        synced.append(Path(directory))
        real_sync(directory)

    monkeypatch.setattr(log_manager_module, "write_offset_rows", write_offset_rows)
    monkeypatch.setattr(log_manager_module, "fsync_dir", fsync_dir)
    gone, kept = tps[:9], tps[9:]
    deleted, failed = manager.delete_many([*gone, TopicPartition("absent", 0)])
    assert sorted(deleted) == sorted(gone)
    assert failed == {}
    assert sorted(synced) == dirs
    # Each of a directory's three checkpoints at most once (one that would not change
    # is left alone).
    assert len(written) == len(set(written)) <= 6, written
    assert {p.parent for p in written} == set(dirs)
    for directory in dirs:
        rows = read_offset_checkpoint(directory / "recovery-point-offset-checkpoint")
        assert rows == {
            (tp.topic, tp.partition): 2
            for tp in kept
            if (directory / f"{tp.topic}-{tp.partition}").is_dir()
        }
    renamed = [p for d in dirs for p in d.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == len(gone)
    assert sorted(manager.all_logs()) == kept
    # One scheduled task removes them all, log.segment.delete.delay.ms later.
    manager.scheduler.run_pending(NOW + 60_000)
    assert [p for d in dirs for p in d.iterdir() if p.name.endswith("-delete")] == []
    manager.close()


def test_a_deleted_log_is_closed_without_writing_its_epoch_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka renames a deleted log's directory without closing it and later closes only
    # its handlers: a leader epoch not yet written stays unwritten (a synced file per
    # partition, which a StopReplica of 10,000 deletions paid for each).
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    produce(manager, A0, count=2)
    produce(manager, A1, count=2)
    for log in manager.all_logs().values():
        log.flush()
        log.assign_epoch_start_offset(7, 2)  # assigned, not yet written
    written: list[Path] = []
    monkeypatch.setattr(
        epoch_cache, "write_epoch_checkpoint", lambda path, _entries: written.append(path)
    )
    assert manager.delete(A0)
    assert written == []
    deleted = manager.get_log(A1)
    assert deleted is not None
    # A log set aside (kept for an operator) is closed whole.
    assert manager.set_aside(A1) is not None
    assert [p.parent.name.split(".")[0] for p in written] == ["a-1"]
    assert deleted.closed
    manager.close()


def fail_syncs_of(failing: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log manager's fsync of ``failing`` raises EIO from now on; others sync."""
    real_sync = checkpoints.fsync_dir

    def fsync_dir(directory: Path) -> None:
        if Path(directory) == failing:
            raise OSError(errno.EIO, "injected")
        real_sync(directory)

    monkeypatch.setattr(log_manager_module, "fsync_dir", fsync_dir)


def test_a_directory_whose_sync_fails_after_the_renames_fails_its_deletions_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The renames are durable only once their directory is synced: a deletion answered
    # done must survive a crash. Its directory's partitions fail; the other's are done.
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        manager.get_or_create(tp)
    in_first = [tp for tp in tps if manager.all_logs()[tp].dir.parent == dirs[0]]
    fail_syncs_of(dirs[0], monkeypatch)
    deleted, failed = manager.delete_many(tps)
    assert sorted(failed) == in_first
    assert all(isinstance(e, KafkaStorageError) for e in failed.values())
    assert sorted(deleted) == [tp for tp in tps if tp not in in_first]
    assert manager.dir_failures.offline() == [os.fspath(dirs[0])]
    manager.close()


def test_each_deletions_removal_takes_its_own_logs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A removal keeps no name a log: it takes a directory's entries ending with its
    # batch's id. A later deletion's logs wait for their own delay, and logs renamed in a
    # directory whose sync failed (answered failed, not known gone) are not removed.
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    clock = Clock()
    manager = LogManager(dirs, broker_config(), time_ms=clock)
    tps = [TopicPartition("t", p) for p in range(6)]
    for tp in tps:
        manager.get_or_create(tp)
    in_first = {tp for tp in tps if manager.all_logs()[tp].dir.parent == dirs[0]}

    def renamed(directory: Path) -> list[str]:
        return sorted(
            p.name.split(".")[0] for p in directory.iterdir() if p.name.endswith("-delete")
        )

    assert in_first & set(tps[4:])
    first = tps[:4]
    deleted, failed = manager.delete_many(first)
    assert sorted(deleted) == first
    assert failed == {}
    clock.now = NOW + 30_000
    fail_syncs_of(dirs[0], monkeypatch)
    deleted, failed = manager.delete_many(tps[4:])
    assert set(failed) == in_first & set(tps[4:])
    assert set(deleted) == set(tps[4:]) - in_first
    monkeypatch.undo()
    later = sorted(f"t-{tp.partition}" for tp in tps[4:])
    assert sorted(renamed(dirs[0]) + renamed(dirs[1])) == sorted(
        [f"t-{tp.partition}" for tp in first] + later
    )
    # The first deletion's delay has passed, not the second's.
    manager.scheduler.run_pending(NOW + 60_000)
    assert sorted(renamed(dirs[0]) + renamed(dirs[1])) == later
    manager.scheduler.run_pending(NOW + 90_000)
    assert renamed(dirs[0]) == sorted(f"t-{tp.partition}" for tp in in_first & set(tps[4:]))
    assert renamed(dirs[1]) == []
    manager.close()


def _open_files_under(directory: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(os.fspath(directory)):
            found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_a_deleted_log_holds_no_file_open(tmp_path: Path) -> None:
    # Its files are closed before the rename: none left open to keep its disk space
    # once the renamed directory is removed.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    produce(manager, A0, count=3)
    log = manager.get_log(A0)
    assert log is not None
    source = log.dir
    assert _open_files_under(source)
    assert manager.delete(A0)
    renamed = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1
    assert _open_files_under(renamed[0]) == []
    manager.close()


def test_a_log_whose_name_is_too_long_fails_alone_not_its_directory(tmp_path: Path) -> None:
    # A topic of 249 characters and partition 100000: 256 characters, over the 255 of a
    # file name. The partition's error (KafkaStorageError), the directory stays online.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    long_name = TopicPartition("t" * 249, 100_000)
    with pytest.raises(KafkaStorageError) as caught:
        manager.get_or_create(long_name)
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.__cause__.errno == errno.ENAMETOOLONG
    assert manager.is_log_dir_online(tmp_path)
    assert not manager.dir_failures.offline()
    assert long_name not in manager
    assert manager.get_or_create(A0).dir.parent == tmp_path
    manager.close()


def test_retention_first_runs_after_the_initial_delay_then_every_check_interval(
    tmp_path: Path,
) -> None:
    # LogManager.startup: retention at InitialTaskDelayMs (30 s), then every
    # log.retention.check.interval.ms (5 minutes by default).
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    runs: list[int | None] = []

    def cleanup_logs(now_ms: int | None = None) -> int:
        runs.append(now_ms)
        return 0

    manager.cleanup_logs = cleanup_logs  # type: ignore[method-assign]
    manager.schedule_tasks()
    manager.scheduler.run_pending(NOW + 29_999)
    assert runs == []
    manager.scheduler.run_pending(NOW + 30_000)
    assert runs == [None]
    manager.scheduler.run_pending(NOW + 329_999)
    assert runs == [None]
    manager.scheduler.run_pending(NOW + 330_000)
    assert runs == [None, None]
    manager.close()


def test_a_broker_flush_ms_below_a_second_is_checked_that_often(tmp_path: Path) -> None:
    # log.flush.interval.ms (the topics' default flush.ms) of 100 ms: the flusher looks
    # every 100 ms, not once a second.
    config = broker_config(**{"log.flush.interval.ms": "100"})
    manager = LogManager([tmp_path], config, time_ms=Clock())
    runs = recorded_flushes(manager)
    manager.schedule_tasks()
    manager.scheduler.run_pending(NOW + 99)
    assert runs == []
    manager.scheduler.run_pending(NOW + 100)
    manager.scheduler.run_pending(NOW + 200)
    assert runs == [None, None]
    manager.close()


def test_a_directory_whose_fsync_fails_at_shutdown_is_left_without_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The marker is touched, the fsync that would make it durable fails: the marker is
    # taken away again, the directory reported failed, its logs recovered next time.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    produce(manager, A0, count=2)

    def failing_fsync(directory: str | os.PathLike[str]) -> None:
        raise OSError(errno.EIO, "fsync failed", os.fspath(directory))

    monkeypatch.setattr(log_manager_module, "fsync_dir", failing_fsync)
    manager.close()
    monkeypatch.undo()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert os.fspath(tmp_path) in manager.dir_failures.offline()
    again = LogManager([tmp_path], broker_config(), time_ms=Clock())
    assert not again.recovery_reports[A0].clean_shutdown
    again.close()


def test_a_deletion_still_pending_is_finished_by_the_clean_shutdown(tmp_path: Path) -> None:
    # log.segment.delete.delay.ms (a minute) has not passed: close() removes the renamed
    # directory all the same, nothing is left for the next start.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    produce(manager, A0)
    assert manager.delete(A0)
    assert [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    manager.close()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]


def test_a_failed_directory_releases_its_lock(tmp_path: Path) -> None:
    # handleLogDirFailure: the directory's lock goes with its logs (an operator may
    # replace the disk while the broker serves the others).
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    produce(manager, A0)
    failed = os.fspath(manager.get_log(A0).dir.parent)  # type: ignore[union-attr]
    manager.dir_failures.maybe_add_offline_log_dir(failed, "disk gone", OSError(errno.EIO, "x"))
    assert manager.handle_log_dir_failure(failed) == [A0]
    assert manager.handle_log_dir_failure(failed) == []
    lock_log_dirs([failed]).release()  # would be LogDirLockedError, were it still held
    other = next(d for d in dirs if os.fspath(d) != failed)
    with pytest.raises(LogDirLockedError):
        lock_log_dirs([other])
    manager.close()


def test_no_checkpoint_is_written_into_a_failed_directory(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    produce(manager, A0, count=2)
    produce(manager, A1, count=3)
    manager.get_log(A0).flush()  # type: ignore[union-attr]
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    manager.checkpoint_high_watermarks()
    failed = manager.get_log(A0).dir.parent  # type: ignore[union-attr]
    names = [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
    ]
    before = {name: (failed / name).read_bytes() for name in names}
    assert read_offset_checkpoint(failed / names[0]) == {("a", 0): 2}
    manager.dir_failures.maybe_add_offline_log_dir(
        os.fspath(failed), "disk gone", OSError(errno.EIO, "x")
    )
    manager.handle_log_dir_failure(os.fspath(failed))
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    manager.checkpoint_high_watermarks()
    manager.close()
    assert {name: (failed / name).read_bytes() for name in names} == before
    assert not (failed / CLEAN_SHUTDOWN_FILE).exists()


def test_a_checkpoint_left_as_it_was_when_only_another_directory_changed(
    tmp_path: Path,
) -> None:
    # A log made in the other directory: this one's logs and offsets are the same, its
    # files are not written again (an idle broker's megabytes every few seconds).
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    produce(manager, A0, count=2)
    manager.checkpoint_recovery_points()
    path = dirs[0] / "recovery-point-offset-checkpoint"
    written = path.stat().st_ino
    manager.get_or_create(A1)  # in d2, the emptier
    assert manager.get_log(A1).dir.parent == dirs[1]  # type: ignore[union-attr]
    manager.checkpoint_recovery_points()
    assert path.stat().st_ino == written
    assert read_offset_checkpoint(dirs[1] / "recovery-point-offset-checkpoint") == {("a", 1): 0}
    manager.close()


ID_X = uuid.UUID(int=1)
ID_Y = uuid.UUID(int=2)


def test_a_new_log_keeps_the_topic_id_its_directory_recorded(tmp_path: Path) -> None:
    # The id given with a new log is recorded only where none is: the directory's
    # logs of the topic are of the incarnation it named first.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    manager.get_or_create(A0, topic_id=ID_X)
    manager.get_or_create(A1, topic_id=ID_Y)
    manager.write_topic_ids()
    assert read_topic_ids(tmp_path / TOPIC_IDS_FILE) == {"a": ID_X}
    assert sorted(manager.claim_topic("a", ID_Y)) == [A0, A1]
    manager.close()


def test_no_topic_ids_are_written_into_a_failed_directory(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    manager.get_or_create(A0)
    manager.get_or_create(A1)
    failed = manager.get_log(A0).dir.parent  # type: ignore[union-attr]
    # Claimed in both directories, then one fails before the ids are written.
    assert manager.claim_topic("a", ID_X) == []
    manager.dir_failures.maybe_add_offline_log_dir(
        os.fspath(failed), "disk gone", OSError(errno.EIO, "x")
    )
    manager.handle_log_dir_failure(os.fspath(failed))
    manager.write_topic_ids()
    assert not (failed / TOPIC_IDS_FILE).exists()
    live = next(d for d in dirs if d != failed)
    assert read_topic_ids(live / TOPIC_IDS_FILE) == {"a": ID_X}
    manager.close()


def test_a_log_failing_to_load_takes_its_directory_offline_with_its_other_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka 2.8's loadLogs: an IOException loading a log fails its directory (offline
    # from the start, none of its logs served); the other directories load.
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    for tp in (A0, A1, B0):
        produce(manager, tp)
    placed = {tp: log.dir.parent for tp, log in manager.all_logs().items()}
    assert placed == {A0: dirs[0], A1: dirs[1], B0: dirs[0]}
    manager.close()

    def partition_log(where: PartitionDir, *args: Any, **kwargs: Any) -> PartitionLog:
        if (where.topic, where.partition) == (A0.topic, A0.partition):
            raise OSError(errno.EIO, "unreadable", join_partition_dir(*where))
        return PartitionLog(where, *args, **kwargs)

    monkeypatch.setattr(log_manager_module, "PartitionLog", partition_log)
    again = LogManager(dirs, broker_config(), time_ms=Clock())
    monkeypatch.undo()
    assert set(again.all_logs()) == {A1}
    assert not again.is_log_dir_online(dirs[0])
    assert again.dir_failures.offline() == [os.fspath(dirs[0])]
    assert again.live_log_dirs == [dirs[1]]
    # Nothing more is written there: its clean-shutdown marker is not removed either.
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).exists()
    assert not (dirs[1] / CLEAN_SHUTDOWN_FILE).exists()
    again.close()


def test_new_log_directories_are_synced_only_where_online(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    manager.get_or_create(A0, sync_dir=False)
    manager.get_or_create(A1, sync_dir=False)
    synced: list[str] = []
    monkeypatch.setattr(log_manager_module, "fsync_dir", lambda d: synced.append(os.fspath(d)))
    failed = os.fspath(manager.get_log(A0).dir.parent)  # type: ignore[union-attr]
    manager.dir_failures.maybe_add_offline_log_dir(failed, "disk gone", OSError(errno.EIO, "x"))
    manager.sync_new_dirs()
    assert synced == [os.fspath(manager.get_log(A1).dir.parent)]  # type: ignore[union-attr]
    manager.sync_new_dirs()
    assert len(synced) == 1  # synced once
    monkeypatch.undo()
    manager.close()


def test_a_directory_that_could_not_be_locked_first_stays_offline(tmp_path: Path) -> None:
    # lock_log_dirs found it unusable before anything was read (a file where the
    # directory should be); made usable meanwhile, it is still offline for this start,
    # as the broker decided without it.
    blocked, good = tmp_path / "blocker" / "d1", tmp_path / "d2"
    (tmp_path / "blocker").write_bytes(b"")
    locked = lock_log_dirs([blocked, good])
    assert list(locked.failed) == [blocked]
    (tmp_path / "blocker").unlink()
    blocked.mkdir(parents=True)
    manager = LogManager([blocked, good], broker_config(), time_ms=Clock(), locked=locked)
    assert manager.live_log_dirs == [good]
    assert not manager.is_log_dir_online(blocked)
    assert manager.get_or_create(A0).dir.parent == good
    manager.close()
    locked.release()
    assert not (blocked / ".lock").exists()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_the_logs_of_a_directory_failing_its_shutdown_flush_are_closed_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing more is written there, but its files are not left open.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    produce(manager, A0, count=2)
    assert _open_files_under(tmp_path / "a-0")

    def failing_flush(*args: Any) -> None:
        raise OSError(errno.EIO, "flush failed")

    monkeypatch.setattr(log_manager_module, "can_sync_filesystems", lambda: True)
    monkeypatch.setattr(log_manager_module, "sync_filesystems", failing_flush)
    manager.close()
    monkeypatch.undo()
    assert manager.dir_failures.offline() == [os.fspath(tmp_path)]
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert _open_files_under(tmp_path / "a-0") == []


def test_a_log_leaving_compact_leaves_the_cleaners_logs(tmp_path: Path) -> None:
    # Kafka 3.1 (KAFKA-12840): a topic become delete-only is not cleaned any more.
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    manager.get_or_create(A0, LogConfig(compact=True))
    manager.get_or_create(A1, LogConfig(compact=True))
    manager.get_or_create(B0)
    assert sorted(log.dir.name for log in manager.compacted_logs()) == ["a-0", "a-1"]
    assert manager.update_topic_config("a", LogConfig(compact=False)) == 2
    assert manager.compacted_logs() == []
    assert manager.update_topic_config("b-with-dash", LogConfig(compact=True)) == 1
    assert [log.dir.name for log in manager.compacted_logs()] == ["b-with-dash-0"]
    manager.close()


def test_no_log_is_made_after_the_clean_shutdown(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    made = manager.get_or_create(A0)
    manager.close()
    assert manager.get_or_create(A0) is made  # an existing log is still found
    with pytest.raises(StorageError, match="closed"):
        manager.get_or_create(A1)
    assert not (tmp_path / "a-1").exists()


def test_starting_twice_schedules_each_task_once(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], broker_config(), time_ms=Clock())
    manager.start()
    manager.start()
    try:
        pending = manager.scheduler.pending()
        assert sorted(pending) == sorted(set(pending))
        assert "log-retention" in pending
    finally:
        manager.close()


@pytest.mark.parametrize("error", [KafkaStorageError, StorageError])
def test_a_log_failing_its_flush_or_retention_leaves_the_others_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[StorageError]
) -> None:
    # Kafka's flushDirtyLogs and cleanupLogs go on past a log that fails (its
    # directory reported for an I/O error, the error logged otherwise).
    clock = Clock()
    manager = LogManager(
        [tmp_path], broker_config(), topic_config=lambda t: LogConfig(flush_ms=1000), time_ms=clock
    )
    for tp in (A0, A1):
        produce(manager, tp, count=2)
    failing = manager.get_log(A0)
    real_flush, real_retention = PartitionLog.maybe_flush, PartitionLog.delete_old_segments

    def maybe_flush(self: PartitionLog, now_ms: int | None = None) -> bool:
        if self is failing:
            raise error("flush failed")
        return real_flush(self, now_ms)

    retained: list[PartitionLog] = []

    def delete_old_segments(self: PartitionLog, now_ms: int | None = None) -> int:
        retained.append(self)
        if self is failing:
            raise error("retention failed")
        return real_retention(self, now_ms)

    monkeypatch.setattr(PartitionLog, "maybe_flush", maybe_flush)
    monkeypatch.setattr(PartitionLog, "delete_old_segments", delete_old_segments)
    clock.now += 1000
    if error is KafkaStorageError:
        assert manager.flush_dirty_logs() == 1
        assert manager.get_log(A1).recovery_point == 2  # type: ignore[union-attr]
    assert manager.cleanup_logs() == 0  # nothing past retention, no error raised
    assert manager.get_log(A1) in retained
    monkeypatch.undo()
    manager.close()


def test_a_directory_that_cannot_be_listed_at_start_is_offline_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka 2.8's loadLogs: an IOException reading a directory takes it offline; the
    # broker starts on the others.
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    LogManager(dirs, broker_config(), time_ms=Clock()).close()
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if os.fspath(path) == os.fspath(dirs[0]):
            raise PermissionError(errno.EACCES, "cannot list", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    manager = LogManager(dirs, broker_config(), time_ms=Clock())
    monkeypatch.undo()
    assert manager.live_log_dirs == [dirs[1]]
    assert manager.dir_failures.offline() == [os.fspath(dirs[0])]
    manager.close()
