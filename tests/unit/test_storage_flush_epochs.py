"""A flush racing an append of a new leader epoch: the recovery point never passes an
epoch start the leader-epoch-checkpoint does not hold, or a crash's recovery (which
re-reads epochs only above the recovery point) would rebuild the epoch at a later offset
and OffsetsForLeaderEpoch would over-report where the epoch before it ended."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from storage import segment as segment_module
from storage.epoch_cache import LeaderEpochCache
from storage.log import LogConfig, PartitionLog
from storage.records import build_batch

NOW = 1_700_000_000_000


def follower_batch(base: int, epoch: int, n: int = 2) -> bytearray:
    return build_batch(
        [b"v"] * n, base_offset=base, partition_leader_epoch=epoch, base_timestamp=NOW
    )


def crash_and_reopen(d: Path, log: PartitionLog) -> PartitionLog:
    """The epoch-2 segment rolled at the recovery point, more of epoch 2 appended, then a
    crash: the files reopened as they are, at the checkpointed recovery point."""
    log.roll()
    log.append_as_follower(follower_batch(4, epoch=2))
    assert log.epoch_cache.entries() == [(1, 0), (2, 2)]
    return PartitionLog(d, LogConfig(), recovery_point=log.recovery_point)


def test_an_epoch_assigned_between_the_checkpoint_and_the_target_is_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = tmp_path / "t-0"
    log = PartitionLog(d, LogConfig())
    log.append_as_follower(follower_batch(0, epoch=1))  # offsets 0..1, epoch 1
    log.flush()
    real_flush = LeaderEpochCache.flush
    armed = [True]

    def flush_then_fetcher_appends(cache: LeaderEpochCache) -> None:
        real_flush(cache)
        if armed[0]:
            armed[0] = False
            # The fetcher thread appends a batch of a new epoch right after the epoch
            # checkpoint is written.
            t = threading.Thread(target=log.append_as_follower, args=(follower_batch(2, epoch=2),))
            t.start()
            t.join(10)
            assert not t.is_alive()

    monkeypatch.setattr(LeaderEpochCache, "flush", flush_then_fetcher_appends)
    log.flush()
    monkeypatch.setattr(LeaderEpochCache, "flush", real_flush)
    again = crash_and_reopen(d, log)
    try:
        assert again.epoch_cache.entries() == [(1, 0), (2, 2)]
        assert again.end_offset_for_epoch(1) == (1, 2)
    finally:
        again.close()
        log.close()


def test_a_flush_during_a_slow_append_of_a_new_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing reordered: the append of an epoch-2 batch is slow to write (under the log's
    lock) and a flush starts meanwhile."""
    d = tmp_path / "t-0"
    log = PartitionLog(d, LogConfig())
    log.append_as_follower(follower_batch(0, epoch=1))
    log.flush()
    writing = threading.Event()
    real_append = segment_module.LogSegment.append

    def slow_append(self, data, headers):  # type: ignore[no-untyped-def]
        writing.set()
        time.sleep(0.3)
        return real_append(self, data, headers)

    monkeypatch.setattr(segment_module.LogSegment, "append", slow_append)
    fetcher = threading.Thread(target=log.append_as_follower, args=(follower_batch(2, epoch=2),))
    fetcher.start()
    assert writing.wait(10)
    log.flush()
    fetcher.join(10)
    assert not fetcher.is_alive()
    monkeypatch.setattr(segment_module.LogSegment, "append", real_append)
    again = crash_and_reopen(d, log)
    try:
        assert again.end_offset_for_epoch(1) == (1, 2)
    finally:
        again.close()
        log.close()
