"""A topic's cleanup.policy leaving compact stops a cleaning of its logs under way.

Kafka 2.8's updateLogConfig only swaps the config: a cleaning under way went on and
swapped in its cleaned segments, dropping records with superseded keys from a topic
that had become delete-only (a cleaning of a large log takes minutes). Kafka 3.1 fixed
it (KAFKA-12840): LogManager.updateTopicConfig calls abortCleaning when the old config
was compact and the new one is not; abortCleaning waits for the cleaning to stop and
keeps the cleaner checkpoint. Kept here on purpose (docs/architecture.md)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest

import storage.cleaner as cleaner_mod
from broker.config import BrokerConfig
from storage.log import LogConfig
from storage.log_manager import LogManager
from tests.unit.test_log_cleaner import (
    _cleaner_checkpoint,
    _history,
    compacted,
    everything,
    fill,
    put,
)
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)
KEY = (TP.topic, TP.partition)


def _manager(tmp_path: Path) -> LogManager:
    config = BrokerConfig.from_properties(
        {
            "zookeeper.connect": "127.0.0.1:2181",
            "broker.id": "1",
            "log.dirs": str(tmp_path),
            "log.cleaner.enable": "false",
        }
    )
    return LogManager([tmp_path], config)


def _wait_until_aborting(manager: LogManager, switcher: threading.Thread) -> None:
    """Until the config change is waiting for the cleaning to stop."""
    for _ in range(3000):
        if KEY in manager.cleaner._aborting:
            return
        switcher.join(0.01)
    raise AssertionError("the config change did not abort the cleaning")


@pytest.mark.parametrize("delete_before", [False, True], ids=["compact", "compact,delete"])
def test_switching_to_delete_aborts_the_cleaning_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delete_before: bool
) -> None:
    # The reviewer's case: the switch comes while the log is being cleaned, in the
    # cleaning's own thread's time (the cleaning holds on until the switch waits for it).
    manager = _manager(tmp_path)
    try:
        before_config = compacted(retention_ms=-1, delete_enabled=delete_before)
        log = manager.get_or_create(TP, before_config)
        fill(log, 200)
        before = everything(log)
        as_deleted = dataclasses.replace(before_config, compact=False, delete_enabled=True)
        original = cleaner_mod.clean
        switchers: list[threading.Thread] = []

        def clean_while_the_policy_changes(
            to_clean: cleaner_mod.LogToClean, **kwargs: object
        ) -> cleaner_mod.CleaningResult:
            switcher = threading.Thread(
                target=manager.update_topic_config, args=("t", as_deleted), daemon=True
            )
            switchers.append(switcher)
            switcher.start()
            _wait_until_aborting(manager, switcher)
            assert switcher.is_alive()  # it waits for the cleaning to stop
            return original(to_clean, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(cleaner_mod, "clean", clean_while_the_policy_changes)
        result = manager.cleaner.clean_one(log, force=True)
        (switcher,) = switchers
        switcher.join(30)
        assert not switcher.is_alive()
        assert not log.config.compact
        assert result is not None
        assert not result.complete
        assert result.records_dropped == 0
        assert everything(log) == before
        assert not list(log.dir.glob("*.cleaned"))
        assert manager.cleaner._aborting == {}
    finally:
        manager.close()


def test_the_switch_waits_for_the_cleaning_and_keeps_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cleaning thread held inside a segment's copy: the config change waits until it
    # stopped, it swaps nothing more, and the checkpoint stays where the last complete
    # cleaning put it (Kafka's abortCleaning is abortAndPauseCleaning then
    # resumeCleaning: doneCleaning records nothing for an aborted cleaning).
    manager = _manager(tmp_path)
    reading = threading.Event()
    go_on = threading.Event()
    real_batches = cleaner_mod._batches
    results: list[object] = []
    try:
        log = manager.get_or_create(TP, compacted(segment_bytes=1 << 20))
        _history(log, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1"), (b"d", b"1")])
        log.update_high_watermark(log.log_end_offset)
        first = manager.cleaner.clean_one(log, force=True)
        assert first is not None
        assert first.complete
        checkpoint = _cleaner_checkpoint(tmp_path)
        assert checkpoint == {KEY: first.end_offset}
        _history(log, [(b"a", b"2"), (b"b", b"2"), (b"c", b"2"), (b"d", b"2")])
        log.update_high_watermark(log.log_end_offset)
        before = everything(log)
        segments_before = log.segments_snapshot()

        def batches(segment: object, **kwargs: int) -> object:
            if not reading.is_set():  # the first segment the rewriting reads
                reading.set()
                assert go_on.wait(30)
            return real_batches(segment, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(cleaner_mod, "_batches", batches)
        cleaning = threading.Thread(
            target=lambda: results.append(manager.cleaner.clean_one(log, force=True))
        )
        cleaning.start()
        assert reading.wait(30)
        switcher = threading.Thread(
            target=manager.update_topic_config, args=("t", LogConfig(segment_bytes=1 << 20))
        )
        switcher.start()
        _wait_until_aborting(manager, switcher)
        assert switcher.is_alive()
        go_on.set()
        switcher.join(30)
        assert not switcher.is_alive()
        # Once the change is applied, the cleaning is over.
        assert KEY not in manager.cleaner._in_progress
        cleaning.join(30)
        (result,) = results
        assert isinstance(result, cleaner_mod.CleaningResult)
        assert not result.complete
        assert result.records_dropped == 0
        assert log.segments_snapshot() == segments_before  # nothing swapped
        assert everything(log) == before
        assert not list(log.dir.glob("*.cleaned"))
        assert _cleaner_checkpoint(tmp_path) == checkpoint
    finally:
        go_on.set()
        monkeypatch.undo()
        manager.close()


def test_a_log_surveyed_before_the_switch_is_not_claimed_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pass surveys the compacted logs, then claims the filthiest: the switch may come
    # in between, when no cleaning is under way to abort. The claim must not start one.
    manager = _manager(tmp_path)
    try:
        log = manager.get_or_create(TP, compacted(retention_ms=-1))
        fill(log, 200)
        before = everything(log)
        real_survey = cleaner_mod.survey

        def survey_then_switch(*args: object, **kwargs: object) -> object:
            surveyed = real_survey(*args, **kwargs)  # type: ignore[arg-type]
            manager.update_topic_config("t", LogConfig(retention_ms=-1))
            return surveyed

        monkeypatch.setattr(cleaner_mod, "survey", survey_then_switch)
        assert manager.cleaner.clean_once(force=True) == []
        assert everything(log) == before
    finally:
        manager.close()


def test_delete_compact_delete_in_a_row_leaves_nothing_behind(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    try:
        log = manager.get_or_create(TP, LogConfig(retention_ms=-1))
        as_compacted = compacted(retention_ms=-1)
        for _ in range(3):
            manager.update_topic_config("t", as_compacted)
            manager.update_topic_config("t", LogConfig(retention_ms=-1))
        assert manager.cleaner._aborting == {}
        assert manager.compacted_logs() == []
        # compact once more: its cleanings run as before
        manager.update_topic_config("t", as_compacted)
        fill(log, 200)
        result = manager.cleaner.clean_one(log, force=True)
        assert result is not None
        assert result.complete
        assert result.records_dropped > 0
    finally:
        manager.close()


def test_a_switch_from_inside_the_cleaning_thread_does_not_wait_for_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = _manager(tmp_path)
    try:
        log = manager.get_or_create(TP, compacted(retention_ms=-1))
        fill(log, 200)
        before = everything(log)
        original = cleaner_mod.clean

        def switch_then_clean(
            to_clean: cleaner_mod.LogToClean, **kwargs: object
        ) -> cleaner_mod.CleaningResult:
            manager.update_topic_config("t", LogConfig(retention_ms=-1))
            return original(to_clean, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(cleaner_mod, "clean", switch_then_clean)
        result = manager.cleaner.clean_one(log, force=True)  # no wait for itself
        assert result is not None
        assert not result.complete
        assert result.records_dropped == 0
        assert everything(log) == before
        assert manager.cleaner._aborting == {}
    finally:
        manager.close()


# --- the checkpoint entry of a log that left compact ------------------------------------
#
# Kafka 2.8's LogCleanerManager.updateCheckpoints keeps an entry while its partition has
# a log (its cleaner is built with all the current logs), whatever the log's policy. The
# cleaner's checkpoint write kept only the compacted logs' entries: the next cleaning of
# another compacted log of the directory dropped the entry of a log that had left
# compact, and switched back the log was taken as dirty from its start.

U = TopicPartition("u", 0)
FOUR_KEYS: list[tuple[bytes, bytes | None]] = [
    (b"a", b"1"),
    (b"b", b"1"),
    (b"c", b"1"),
    (b"d", b"1"),
]


def test_the_entry_of_a_log_that_left_compact_outlives_another_logs_cleaning(
    tmp_path: Path,
) -> None:
    # The reviewer's case.
    manager = _manager(tmp_path)
    try:
        config = compacted(segment_bytes=1 << 20)
        t = manager.get_or_create(TP, config)
        u = manager.get_or_create(U, config)
        for log in (t, u):
            _history(log, FOUR_KEYS, more=4)
            log.update_high_watermark(log.log_end_offset)
        first = manager.cleaner.clean_one(t, force=True)
        assert first is not None
        assert first.complete
        assert _cleaner_checkpoint(tmp_path)[KEY] == first.end_offset

        manager.update_topic_config(
            "t", dataclasses.replace(config, compact=False, delete_enabled=True)
        )
        assert _cleaner_checkpoint(tmp_path)[KEY] == first.end_offset

        assert manager.cleaner.clean_one(u, force=True) is not None
        assert _cleaner_checkpoint(tmp_path).get(KEY) == first.end_offset
        assert manager.cleaner._checkpoint_of(t) == first.end_offset
    finally:
        manager.close()


@pytest.mark.parametrize("other_cleaned", [False, True], ids=["alone", "another-cleaned"])
def test_back_to_compact_a_log_is_dirty_from_its_checkpoint(
    tmp_path: Path, other_cleaned: bool
) -> None:
    # Back to compact with a little new data, the log is not due (its dirty share from
    # its checkpoint is below min.cleanable.dirty.ratio); taken as dirty from its start
    # (share 1.0) it was cleaned again whole. "alone" passed before too (the control).
    manager = _manager(tmp_path)
    try:
        config = compacted(segment_bytes=1 << 20)
        t = manager.get_or_create(TP, config)
        u = manager.get_or_create(U, config)
        for log in (t, u):
            _history(log, FOUR_KEYS, more=6)
            log.update_high_watermark(log.log_end_offset)
        assert manager.cleaner.clean_one(t, force=True) is not None
        manager.update_topic_config(
            "t", dataclasses.replace(config, compact=False, delete_enabled=True)
        )
        if other_cleaned:
            assert manager.cleaner.clean_one(u, force=True) is not None
        manager.update_topic_config("t", config)
        put(t, (b"z", b"1"))
        t.roll()
        put(t, (b"y", b"1"))
        t.update_high_watermark(t.log_end_offset)
        again = manager.cleaner.clean_one(t)  # not forced: only if due
        assert again is None, f"cleaned again from offset {again.first_dirty_offset}"
    finally:
        manager.close()


def test_a_deleted_logs_entry_still_goes_and_another_directorys_log_keeps_none(
    tmp_path: Path,
) -> None:
    # What the write keeps is the entries of the partitions with a log in its directory:
    # a partition whose log is elsewhere (or gone) has no entry here.
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    config = BrokerConfig.from_properties(
        {
            "zookeeper.connect": "127.0.0.1:2181",
            "broker.id": "1",
            "log.dirs": f"{one},{two}",
            "log.cleaner.enable": "false",
        }
    )
    manager = LogManager([one, two], config)
    try:
        log_config = compacted(segment_bytes=1 << 20)
        t = manager.get_or_create(TP, log_config)
        u = manager.get_or_create(U, log_config)
        assert t.log_dir != u.log_dir
        for log in (t, u):
            _history(log, FOUR_KEYS, more=4)
            log.update_high_watermark(log.log_end_offset)
        assert manager.cleaner.clean_one(t, force=True) is not None
        t_dir = Path(t.log_dir)
        # An entry for u in t's directory (an older version's, say) goes at t's next write.
        manager.cleaner._checkpoints[t.log_dir][(U.topic, U.partition)] = 1
        put(t, (b"e", b"1"))
        t.roll()
        t.update_high_watermark(t.log_end_offset)
        assert manager.cleaner.clean_one(t, force=True) is not None
        assert (U.topic, U.partition) not in _cleaner_checkpoint(t_dir)
        assert KEY in _cleaner_checkpoint(t_dir)
    finally:
        manager.close()
