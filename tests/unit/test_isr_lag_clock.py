"""When a leader counts a follower last caught up, against Kafka 2.8's
Replica.updateFetchState and Partition.makeLeader: a fetch at the leader's log end is
caught up as of that fetch (its time never goes back: math.max), with or without a fetch
session's clock; a new leader gives every ISR member a fresh lag allowance (its
lastCaughtUpTimeMs is now), so ISR expiry run at once names none of them; a follower is
out of sync only once more than replica.lag.time.max.ms has passed (isFollowerOutOfSync's
strict ">"). No ZooKeeper."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

import broker.replica_manager
from broker.config import BrokerConfig
from broker.fetch_session import FetchClock
from broker.replica_manager import FollowerState, ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)


def test_a_sessionless_fetch_at_the_log_end_is_caught_up_at_its_own_time() -> None:
    state = FollowerState()
    state.record_fetch(0, 0, 10, None)
    assert state.caught_up_ms(0) == 10
    # The leader appended 5; the follower's next fetch (no session) is at the log end.
    state.record_fetch(5, 5, 100, None)
    assert state.caught_up_ms(5) == 100  # not 10, the time of the fetch before


def test_a_session_clock_left_behind_does_not_take_the_caught_up_time_back() -> None:
    # A follower fetched in a session, then without one (its session was evicted, say):
    # the session's clock, no longer moved, must not stand for the later fetches.
    clock = FetchClock()
    clock.ms = 10
    state = FollowerState()
    state.record_fetch(5, 5, 10, clock)
    assert state.caught_up_ms(5) == 10
    state.record_fetch(5, 5, 100, None)
    assert state.caught_up_ms(5) == 100
    clock.ms = 200  # the session's clock moving on still counts
    assert state.caught_up_ms(5) == 200


def test_a_new_leader_gives_its_isr_a_fresh_lag_allowance(tmp_path: Path) -> None:
    rm = ReplicaManager(1, cast(Any, None), StateChangeLog(tmp_path, 1))
    rm.become_leader_or_follower(leader_and_isr_request(TP, 1, 4, [1, 2, 3], [1, 2, 3]))
    # No follower has fetched yet: none has been behind for replica.lag.time.max.ms.
    rm.maybe_shrink_isr()
    assert not rm._isr_intents
    followers = rm.partitions[TP].followers
    assert followers[2].last_caught_up_ms > 0
    assert followers[3].last_caught_up_ms > 0


def test_a_follower_is_out_of_sync_only_past_the_lag_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rm = ReplicaManager(1, cast(Any, None), StateChangeLog(tmp_path, 1))
    rm.become_leader_or_follower(leader_and_isr_request(TP, 1, 4, [1, 2, 3], [1, 2, 3]))
    followers = rm.partitions[TP].followers
    now = 10_000_000
    monkeypatch.setattr(broker.replica_manager, "_now_ms", lambda: now)
    lag = rm.replica_lag_time_max_ms
    followers[2].last_caught_up_ms = now - lag  # exactly the lag time: still in sync
    followers[3].last_caught_up_ms = now - lag - 1
    rm.maybe_shrink_isr()
    assert [(i.remove, i.add) for i in rm._isr_intents.values()] == [((3,), ())]


def test_a_follower_caught_up_exactly_the_lag_time_ago_still_holds_the_high_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka 2.8's maybeIncrementLeaderHW counts a replica with
    # curTime - lastCaughtUpTimeMs <= replicaLagTimeMaxMs.
    logs = LogManager(
        [tmp_path / "data"],
        BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"}),
    )
    rm = ReplicaManager(1, cast(Any, None), StateChangeLog(tmp_path, 1), logs=logs)
    try:
        rm.become_leader_or_follower(leader_and_isr_request(TP, 1, 4, [1], [1, 2], is_new=True))
        now = 10_000_000
        monkeypatch.setattr(broker.replica_manager, "_now_ms", lambda: now)
        p = rm.partitions[TP]
        follower = p.followers[2]
        follower.fetch_offset = 0
        follower.last_caught_up_ms = now - rm.replica_lag_time_max_ms
        assert rm.append_as_leader(TP, build_batch([b"v"] * 3), 1)[0] == ErrorCode.NONE
        assert p.high_watermark == 0
    finally:
        rm.close()
        logs.close()
