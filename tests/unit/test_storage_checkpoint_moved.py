"""The offset checkpoints written from the logs whose offsets moved (OffsetsMoved): after
any run of changes and checkpoints, each file holds every log's offset, as a write that
read every log would."""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig
from storage import log_manager as log_manager_module
from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
)
from storage.log import (
    OffsetsMoved,
    PartitionLog,
    high_watermark_of,
    log_start_offset_of,
    recovery_point_of,
)
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.beside import running_beside
from zkdata.znodes import TopicPartition

NOW = 1_700_000_000_000
PARTITIONS = [TopicPartition("t", p) for p in range(3)] + [TopicPartition("u", 0)]
OFFSETS: dict[str, Callable[[PartitionLog], int]] = {
    REPLICATION_CHECKPOINT: high_watermark_of,
    RECOVERY_POINT_CHECKPOINT: recovery_point_of,
    LOG_START_OFFSET_CHECKPOINT: log_start_offset_of,
}


def broker_config() -> BrokerConfig:
    return BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})


def checkpoint(manager: LogManager, name: str) -> None:
    {
        REPLICATION_CHECKPOINT: manager.checkpoint_high_watermarks,
        RECOVERY_POINT_CHECKPOINT: manager.checkpoint_recovery_points,
        LOG_START_OFFSET_CHECKPOINT: manager.checkpoint_log_start_offsets,
    }[name]()


def assert_files_hold_every_offset(manager: LogManager, name: str) -> None:
    """``name`` in each directory holds each of its logs' offsets, and nothing else."""
    value = OFFSETS[name]
    for directory in manager.log_dirs:
        expected = {
            (tp.topic, tp.partition): value(pl)
            for tp, pl in manager.all_logs().items()
            if pl.log_dir == str(directory)
        }
        assert read_offset_checkpoint(directory / name) == expected, (directory, name)


def assert_every_checkpoint_written_holds_every_offset(manager: LogManager) -> None:
    for name in OFFSETS:
        checkpoint(manager, name)
        assert_files_hold_every_offset(manager, name)


def append(log: PartitionLog, count: int) -> None:
    log.append_as_leader(build_batch([b"x"] * count, base_timestamp=NOW), 1)


# One step: (what, partition index, a number).
STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "append",
                "high_watermark",
                "truncate",
                "log_start",
                "flush",
                "delete",
                "create",
                "checkpoint",
            ]
        ),
        st.integers(0, len(PARTITIONS) - 1),
        st.integers(0, 12),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS, dir_count=st.integers(1, 2))
def test_checkpoints_hold_every_offset_after_any_changes(
    steps: list[tuple[str, int, int]], dir_count: int
) -> None:
    with tempfile.TemporaryDirectory() as base:
        dirs = [Path(base) / f"d{n}" for n in range(dir_count)]
        manager = LogManager(dirs, broker_config())
        try:
            for tp in PARTITIONS:
                manager.get_or_create(tp)
            for name in OFFSETS:
                checkpoint(manager, name)
            names = list(OFFSETS)
            for what, index, number in steps:
                tp = PARTITIONS[index]
                log = manager.get_log(tp)
                if what == "create":
                    manager.get_or_create(tp)
                elif what == "checkpoint":
                    name = names[number % len(names)]
                    checkpoint(manager, name)
                    assert_files_hold_every_offset(manager, name)
                elif log is None:
                    continue
                elif what == "append":
                    append(log, number + 1)
                elif what == "high_watermark":
                    log.update_high_watermark(number)
                elif what == "truncate":
                    log.truncate_to(number)
                elif what == "log_start":
                    if number <= log.log_end_offset:
                        log.maybe_increment_log_start_offset(number)
                elif what == "flush":
                    log.flush()
                elif what == "delete":
                    manager.delete(tp)
            assert_every_checkpoint_written_holds_every_offset(manager)
        finally:
            manager.close()


def test_no_move_is_missed_by_a_checkpoint_running_beside_the_changes(
    tmp_path: Path,
) -> None:
    """Threads move high watermarks (and truncate) while checkpoints run: once they
    stopped, one more checkpoint holds every final high watermark, so no move was
    taken without being read."""
    manager = LogManager([tmp_path], broker_config())
    logs = [manager.get_or_create(TopicPartition("m", p)) for p in range(8)]
    for log in logs:
        append(log, 200)

    def mover(log: PartitionLog, seed: int) -> Callable[[], None]:
        rng = random.Random(seed)

        def move() -> None:
            if rng.random() < 0.02:
                log.truncate_to(rng.randrange(100, 200))
                append(log, 200 - log.log_end_offset)
            log.update_high_watermark(rng.randrange(0, 200))

        return move

    with running_beside(*(mover(log, n) for n, log in enumerate(logs))):
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            manager.checkpoint_high_watermarks()
            manager.checkpoint_recovery_points()
    try:
        assert_every_checkpoint_written_holds_every_offset(manager)
    finally:
        manager.close()


def test_a_log_let_go_leaves_no_mark_behind(tmp_path: Path) -> None:
    """A deleted log's marks go with it: nothing keeps it, and no checkpoint reads it."""
    manager = LogManager([tmp_path], broker_config())
    try:
        tp = TopicPartition("gone", 0)
        log = manager.get_or_create(tp)
        append(log, 3)
        log.update_high_watermark(2)
        log.truncate_to(1)
        moved: OffsetsMoved = manager._offsets_moved
        assert log in moved.high_watermark
        assert log in moved.recovery_point
        manager.delete(tp)
        assert log not in moved.high_watermark
        assert log not in moved.recovery_point
        assert log not in moved.log_start
        assert_every_checkpoint_written_holds_every_offset(manager)
    finally:
        manager.close()


def test_a_checkpoint_that_failed_keeps_its_marks(tmp_path: Path) -> None:
    """A write that raised took its logs' marks: they are put back, so a later
    checkpoint still writes those offsets."""
    manager = LogManager([tmp_path], broker_config())
    try:
        log = manager.get_or_create(TopicPartition("f", 0))
        append(log, 5)
        manager.checkpoint_high_watermarks()
        log.update_high_watermark(4)

        def refuse(*args: object) -> None:
            raise RuntimeError("write refused")

        real = manager._write_offsets
        manager._write_offsets = refuse  # type: ignore[method-assign,assignment]
        with pytest.raises(RuntimeError, match="write refused"):
            manager.checkpoint_high_watermarks()
        manager._write_offsets = real  # type: ignore[method-assign]
        assert log in manager._offsets_moved.high_watermark
        manager.checkpoint_high_watermarks()
        assert_files_hold_every_offset(manager, REPLICATION_CHECKPOINT)
    finally:
        manager.close()


def test_many_moved_logs_are_read_with_every_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past a sixteenth of the logs (and a floor), the moved logs are not found one by
    one: every log is read, and the file holds every offset either way."""
    monkeypatch.setattr(log_manager_module, "_MOVED_ONE_BY_ONE_UP_TO", 4)
    manager = LogManager([tmp_path], broker_config())
    copies: list[Path] = []
    logs_in = manager._logs_in

    def counted(directory: Path) -> tuple[list[TopicPartition], list[PartitionLog]]:
        copies.append(directory)
        return logs_in(directory)

    try:
        logs = [manager.get_or_create(TopicPartition("many", p)) for p in range(160)]
        for log in logs:
            append(log, 3)
        manager.checkpoint_high_watermarks()
        monkeypatch.setattr(manager, "_logs_in", counted)
        for log in logs[:10]:  # 10 of 160: over the floor, not over a sixteenth
            log.update_high_watermark(1)
        manager.checkpoint_high_watermarks()
        assert copies == []
        assert_files_hold_every_offset(manager, REPLICATION_CHECKPOINT)
        for log in logs[:11]:  # 11 of 160: over both
            log.update_high_watermark(2)
        manager.checkpoint_high_watermarks()
        assert copies == [tmp_path]
        assert_files_hold_every_offset(manager, REPLICATION_CHECKPOINT)
    finally:
        manager.close()
