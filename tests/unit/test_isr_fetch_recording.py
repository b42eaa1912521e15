"""What a leader does with a follower's fetch, against Kafka 2.8's Partition
(updateFollowerFetchState, maybeExpandIsr, maybeIncrementLeaderHW): a replica found
caught up counts for the high watermark from that moment (Kafka's "maximal ISR" while
the expansion is pending), even for a high watermark moved by another follower's fetch
before the expansion is queued; the caught-up time a session's clock implied is kept
when the leader appends; a partition whose ISR write found it moved on asks for no ISR
change until the next LeaderAndIsr. A fake ZooKeeper; the ISR writer's rounds are run by
hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.fetch_session import FetchClock
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from tests.unit.test_isr_expansion_high_watermark import write_round
from tests.unit.test_isr_rejoin_and_moved_on import Zk
from wire.errors import ErrorCode
from zkdata.znodes import LeaderAndIsr, TopicPartition

LEADER, IN_SYNC, JOINING = 1, 2, 3
TP = TopicPartition("t", 0)


@pytest.fixture
def zk() -> Zk:
    return Zk()


@pytest.fixture
def rm(tmp_path: Path, zk: Zk) -> Iterator[ReplicaManager]:
    """LEADER leads TP (replicas 1, 2, 3; ISR 1, 2) with ten records."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    manager = ReplicaManager(LEADER, cast(Any, zk), StateChangeLog(tmp_path, LEADER), logs=logs)
    manager.become_leader_or_follower(
        leader_and_isr_request(TP, LEADER, 2, [LEADER, IN_SYNC], [1, 2, 3], is_new=True)
    )
    assert manager.append_as_leader(TP, build_batch([b"v"] * 10), 1)[0] == ErrorCode.NONE
    try:
        yield manager
    finally:
        manager.close()
        logs.close()


def test_a_replica_found_caught_up_holds_the_high_watermark_before_its_expansion_is_queued(
    rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = rm.partitions[TP]
    rm.record_follower_fetch(p, IN_SYNC, 5)
    assert p.high_watermark == 5
    real = rm._request_isr_changes

    def in_sync_fetches_meanwhile(*args: Any, **kwargs: Any) -> None:
        # Another fetch round, of the ISR member, between the joiner's round and its
        # expansion being queued (the lock is let go of in between).
        rm.record_follower_fetch(p, IN_SYNC, 10)
        real(*args, **kwargs)

    monkeypatch.setattr(rm, "_request_isr_changes", in_sync_fetches_meanwhile)
    # JOINING reaches the high watermark: it is taken into the ISR, and ZooKeeper may
    # name it there before this leader hears the write landed.
    rm.record_follower_fetch(p, JOINING, 5)
    assert JOINING in p.isr_adding
    assert p.high_watermark == 5  # not 10: JOINING has only what is below 5
    assert [i.add for i in rm._isr_intents.values()] == [(JOINING,)]


def test_an_append_keeps_the_caught_up_time_a_sessions_rounds_implied(
    rm: ReplicaManager,
) -> None:
    p = rm.partitions[TP]
    clock = FetchClock()
    rm.record_follower_fetches(IN_SYNC, [(p, 10)], clock)  # at the log end
    state = p.followers[IN_SYNC]
    fetched_at = state.last_caught_up_ms
    # Later rounds of the session did not list TP (its position unmoved, at the log end).
    clock.ms = fetched_at + 7_000
    assert state.caught_up_ms(10) == fetched_at + 7_000
    assert rm.append_as_leader(TP, build_batch([b"w"]), 1)[0] == ErrorCode.NONE
    # Behind the log end now, but caught up as of the session's last round.
    assert state.caught_up_ms(11) == fetched_at + 7_000


def test_a_partition_found_moved_on_asks_for_no_isr_change(rm: ReplicaManager, zk: Zk) -> None:
    p = rm.partitions[TP]
    # The leader's lag check drops IN_SYNC; its write finds the controller bumped the
    # leader epoch meanwhile (this broker still the leader).
    p.followers[IN_SYNC].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    zk.stored = LeaderAndIsr(LEADER, 3, (LEADER, IN_SYNC), p.zk_version + 1)
    assert not write_round(rm)[0]
    assert p.stale
    assert p.moved_on
    # JOINING reaches the high watermark before the LeaderAndIsr of epoch 3 comes.
    rm.record_follower_fetches(JOINING, [(p, p.high_watermark)])
    # and the lag check, run again, finds IN_SYNC still lagging
    rm.maybe_shrink_isr()
    assert not rm._isr_intents
    assert p.isr_adding == ()


def test_a_fetch_recorded_against_a_replaced_state_moves_no_high_watermark(
    rm: ReplicaManager,
) -> None:
    old = rm.partitions[TP]
    rm.record_follower_fetch(old, IN_SYNC, 5)
    assert old.high_watermark == 5
    # A fetch round looked the partition up; a LeaderAndIsr of a newer epoch (the ISR
    # write that added JOINING landed, and the controller bumped the epoch) replaced it
    # before the round recorded its position.
    rm.become_leader_or_follower(
        leader_and_isr_request(TP, LEADER, 3, [LEADER, IN_SYNC, JOINING], [1, 2, 3])
    )
    rm.record_follower_fetch(old, IN_SYNC, 10)
    # JOINING, in the ISR now, has fetched nothing this epoch: the high watermark waits.
    assert rm.partitions[TP].high_watermark == 5


def test_an_isr_change_asked_after_a_new_leader_epoch_is_written_for_that_epoch(
    rm: ReplicaManager, zk: Zk
) -> None:
    old = rm.partitions[TP]
    old.followers[IN_SYNC].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()  # queued; the writer has not run yet
    # The controller bumps the leader epoch (this broker still leads, the same ISR).
    rm.become_leader_or_follower(
        leader_and_isr_request(TP, LEADER, 3, [LEADER, IN_SYNC], [1, 2, 3])
    )
    new = rm.partitions[TP]
    new.followers[IN_SYNC].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    zk.outcome = SimpleNamespace(version=new.zk_version + 1)
    assert write_round(rm) == (False, {TP})
    # Written with the epoch's zkVersion, not dropped with the replaced state's request.
    assert new.isr == (LEADER,)
    assert new.zk_version == 4


def test_a_fetch_from_a_broker_that_is_no_replica_is_not_recorded(rm: ReplicaManager) -> None:
    p = rm.partitions[TP]
    rm.record_follower_fetch(p, 9, p.high_watermark)  # broker 9 holds no replica of TP
    assert not rm._isr_intents
    assert p.isr_adding == ()
    rm.record_follower_fetch(p, IN_SYNC, 10)
    assert p.high_watermark == 10  # nothing held back by it
