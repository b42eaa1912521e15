"""A leader's ISR and high watermark against Kafka 2.8's Partition: a follower outside
the ISR rejoins it under steady produce load (the high watermark counts followers caught
up within replica.lag.time.max.ms, KAFKA-7128); an ISR write that finds the controller
moved the partition on (a new leader epoch, this broker still its leader) neither fails
the producers waiting for acks=all nor lets the high watermark pass a replica ZooKeeper
may name in the ISR, until the next LeaderAndIsr says what is true. No ZooKeeper: the
ISR writer is not started; its rounds are run by hand."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from broker.config import BrokerConfig
from broker.replica_manager import Partition, ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log import AppendInfo
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from tests.unit.test_isr_expansion_high_watermark import write_round
from wire.errors import ErrorCode
from zkdata.client import BadVersionError
from zkdata.znodes import LeaderAndIsr, TopicPartition, encode_partition_state

LEADER, IN_SYNC, JOINING = 1, 2, 3
TP = TopicPartition("t", 0)


def leader_and_isr(
    epoch: int, isr: list[int], replicas: list[int], *, leader: int = LEADER
) -> dict[str, Any]:
    """Its log made at the first one (epoch 2); the partition epoch is the state znode's
    version the fake ZooKeeper gives (5 + epoch)."""
    request = leader_and_isr_request(TP, leader, epoch, isr, replicas, is_new=epoch == 2)
    request["topic_states"][0]["partition_states"][0]["partition_epoch"] = 5 + epoch
    return request


class Zk:
    """The ISR writer's ZooKeeper: every write answered with ``outcome`` (an exception
    other than BadVersion is raised, as a lost connection is); reads give ``stored``."""

    def __init__(self) -> None:
        self.outcome: Any = BadVersionError()
        self.stored: LeaderAndIsr | None = None

    def multi_batched(self, items: list[Any]) -> list[list[Any]]:
        if isinstance(self.outcome, Exception) and not isinstance(self.outcome, BadVersionError):
            raise self.outcome
        return [[self.outcome] for _ in items]

    def get(self, path: str) -> tuple[bytes, Any]:
        assert self.stored is not None
        return encode_partition_state(self.stored, 3), SimpleNamespace(
            version=self.stored.zk_version
        )

    def get_many(self, path_list: list[str]) -> list[tuple[bytes, Any]]:
        return [self.get(p) for p in path_list]


@pytest.fixture
def rm_zk(tmp_path: Path) -> Iterator[tuple[ReplicaManager, Zk]]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    zk = Zk()
    rm = ReplicaManager(LEADER, zk, StateChangeLog(tmp_path, LEADER), logs=logs)  # type: ignore[arg-type]
    try:
        yield rm, zk
    finally:
        rm.close()
        logs.close()


def produce(rm: ReplicaManager, n: int, acks: int) -> tuple[Partition, AppendInfo]:
    error, p, info, why = rm.append_as_leader(TP, build_batch([b"v"] * n), acks)
    assert error == 0, why
    assert p is not None
    assert info is not None
    return p, info


def fetch(rm: ReplicaManager, replica: int, offset: int) -> None:
    rm.record_follower_fetches(replica, [(rm.partitions[TP], offset)])


def wait_in_background(
    rm: ReplicaManager, p: Partition, offset: int, timeout_s: float
) -> tuple[threading.Thread, list[ErrorCode]]:
    result: list[ErrorCode] = []
    waiter = threading.Thread(
        target=lambda: result.append(rm.wait_for_replication(p, offset, timeout_s)), daemon=True
    )
    waiter.start()
    time.sleep(0.2)
    return waiter, result


# --- a follower outside the ISR rejoins it under load ----------------------------------


def test_a_follower_one_record_behind_a_steady_producer_rejoins_the_isr(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    """ISR = [leader]; follower 2 fetches right behind a steady producer (each fetch from
    where the previous answer ended, one record having arrived meanwhile). Counting it in
    the high watermark (caught up within the lag time) stops the high watermark short of
    the leader's log end, so the follower reaches it and is asked into the ISR."""
    rm, _zk = rm_zk
    rm.become_leader_or_follower(leader_and_isr(2, [LEADER], [LEADER, IN_SYNC]))
    p = rm.partitions[TP]
    for i in range(1, 51):
        produce(rm, 1, 1)  # the log end becomes i
        fetch(rm, IN_SYNC, i - 1)  # the follower has everything the previous answer gave
        assert p.high_watermark <= i
    assert IN_SYNC in p.isr_adding, (
        f"follower 2, one record behind for 50 fetches, never asked into the ISR:"
        f" HW {p.high_watermark}, LEO {p.log_end_offset}, isr {p.isr}"
    )


def test_a_follower_not_caught_up_within_the_lag_time_does_not_hold_the_high_watermark(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    """Outside the ISR and lagging longer than replica.lag.time.max.ms: the high watermark
    is the ISR's alone (the leader's log end here), as in Kafka."""
    rm, _zk = rm_zk
    rm.become_leader_or_follower(leader_and_isr(2, [LEADER], [LEADER, IN_SYNC]))
    p = rm.partitions[TP]
    produce(rm, 4, 1)
    fetch(rm, IN_SYNC, 2)
    p.followers[IN_SYNC].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    produce(rm, 4, 1)
    assert p.high_watermark == 8


def test_a_follower_caught_up_within_the_lag_time_never_lowers_the_high_watermark(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    rm, _zk = rm_zk
    rm.become_leader_or_follower(leader_and_isr(2, [LEADER], [LEADER, IN_SYNC]))
    p = rm.partitions[TP]
    produce(rm, 4, 1)
    assert p.high_watermark == 4
    fetch(rm, IN_SYNC, 2)
    p.followers[IN_SYNC].last_caught_up_ms = time.monotonic_ns() // 1_000_000
    produce(rm, 4, 1)
    assert p.high_watermark == 4  # held at 4 by the follower now, not lowered to 2
    fetch(rm, IN_SYNC, 6)
    assert p.high_watermark == 6


# --- an ISR write finds the partition moved on, this broker still its leader -----------


def test_acks_all_waiting_survives_an_isr_write_refused_by_a_controller_bump(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    """Broker 3 dies. The controller takes it out of the ISR (leader epoch 2 -> 3, broker
    1 still leader) while the leader's own lag check removes it too: the leader's write,
    conditional on the old zkVersion, is refused and the re-read finds epoch 3. As in
    Kafka 2.8 (INVALID_UPDATE_VERSION: 'giving up'; DelayedProduce waits on), the
    producer waiting for acks=all is answered NONE once the LeaderAndIsr of epoch 3 came
    and the high watermark passed its record, not NOT_LEADER_OR_FOLLOWER (a retry
    would write the committed record twice)."""
    rm, zk = rm_zk
    rm.become_leader_or_follower(
        leader_and_isr(2, [LEADER, IN_SYNC, JOINING], [LEADER, IN_SYNC, JOINING])
    )
    p = rm.partitions[TP]
    appended, info = produce(rm, 4, -1)
    fetch(rm, IN_SYNC, 4)  # follower 2 has the records; 3 is dead, holds the HW at 0
    assert p.high_watermark == 0
    waiter, result = wait_in_background(rm, appended, info.last_offset, 6.0)
    zk.stored = LeaderAndIsr(LEADER, 3, (LEADER, IN_SYNC), p.zk_version + 1)
    p.followers[JOINING].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    assert not write_round(rm)[0]  # refused: BadVersion; the re-read finds epoch 3
    assert p.stale
    time.sleep(0.3)
    assert not result, f"answered {result} before the LeaderAndIsr of epoch 3 came"
    rm.become_leader_or_follower(leader_and_isr(3, [LEADER, IN_SYNC], [LEADER, IN_SYNC, JOINING]))
    fetch(rm, IN_SYNC, 4)
    waiter.join(10)
    assert rm.partitions[TP].high_watermark == 4  # the record is committed
    assert result == [ErrorCode.NONE]


def test_acks_all_waiting_fails_once_the_next_leader_and_isr_makes_this_broker_a_follower(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    rm, zk = rm_zk
    rm.become_leader_or_follower(
        leader_and_isr(2, [LEADER, IN_SYNC, JOINING], [LEADER, IN_SYNC, JOINING])
    )
    p = rm.partitions[TP]
    appended, info = produce(rm, 4, -1)
    waiter, result = wait_in_background(rm, appended, info.last_offset, 6.0)
    zk.stored = LeaderAndIsr(LEADER, 3, (LEADER, IN_SYNC), p.zk_version + 1)
    p.followers[JOINING].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    assert not write_round(rm)[0]
    assert p.stale
    assert not result
    rm.become_leader_or_follower(
        leader_and_isr(4, [IN_SYNC], [LEADER, IN_SYNC, JOINING], leader=IN_SYNC)
    )
    waiter.join(10)
    assert result == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_acks_all_waiting_fails_at_once_when_zookeeper_names_another_leader(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    rm, zk = rm_zk
    rm.become_leader_or_follower(
        leader_and_isr(2, [LEADER, IN_SYNC, JOINING], [LEADER, IN_SYNC, JOINING])
    )
    p = rm.partitions[TP]
    appended, info = produce(rm, 4, -1)
    waiter, result = wait_in_background(rm, appended, info.last_offset, 6.0)
    zk.stored = LeaderAndIsr(IN_SYNC, 3, (IN_SYNC,), p.zk_version + 1)
    p.followers[JOINING].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    assert not write_round(rm)[0]
    waiter.join(3)
    assert result == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def test_acks_all_waiting_fails_when_a_stop_replica_follows_a_moved_on_write(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    rm, zk = rm_zk
    rm.become_leader_or_follower(
        leader_and_isr(2, [LEADER, IN_SYNC, JOINING], [LEADER, IN_SYNC, JOINING])
    )
    p = rm.partitions[TP]
    appended, info = produce(rm, 4, -1)
    waiter, result = wait_in_background(rm, appended, info.last_offset, 6.0)
    zk.stored = LeaderAndIsr(LEADER, 3, (LEADER, IN_SYNC), p.zk_version + 1)
    p.followers[JOINING].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    assert not write_round(rm)[0]
    assert not result
    rm.stop_replicas(
        {
            "controller_id": 9,
            "controller_epoch": 3,
            "broker_epoch": 100,
            "topic_states": [
                {"topic_name": "t", "partition_states": [{"partition_index": 0, "leader_epoch": 4}]}
            ],
        }
    )
    waiter.join(3)
    assert result == [ErrorCode.NOT_LEADER_OR_FOLLOWER]


def _expansion_landed_unanswered_then_bumped(rm: ReplicaManager, zk: Zk) -> Partition:
    """ISR [1, 2], 4 records everywhere; replica 3 catches up and its addition is written,
    the answer lost; the controller then bumps the leader epoch reading ISR [1, 2, 3];
    replica 3 stops fetching."""
    rm.become_leader_or_follower(leader_and_isr(2, [LEADER, IN_SYNC], [LEADER, IN_SYNC, JOINING]))
    p = rm.partitions[TP]
    version = p.zk_version
    produce(rm, 4, 1)
    fetch(rm, IN_SYNC, 4)
    assert p.high_watermark == 4
    fetch(rm, JOINING, 4)
    assert p.isr_adding == (JOINING,)
    zk.outcome = ConnectionLoss()
    assert write_round(rm) == (True, set())  # failed
    zk.stored = LeaderAndIsr(LEADER, 3, (LEADER, IN_SYNC, JOINING), version + 2)
    # Replica 3 then stops fetching, for longer than the lag time: only its place in the
    # ISR may hold the high watermark for it.
    p.followers[JOINING].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    return p


def test_the_high_watermark_never_passes_a_replica_zookeeper_names_in_the_isr(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    """Kafka 2.8: after INVALID_UPDATE_VERSION the expansion stays pending (maximalIsr
    holds replica 3), and the high watermark waits for it until a LeaderAndIsr comes."""
    rm, zk = rm_zk
    p = _expansion_landed_unanswered_then_bumped(rm, zk)
    produce(rm, 4, 1)
    fetch(rm, IN_SYNC, 8)
    assert p.high_watermark == 4  # held for replica 3 (unsettled)
    zk.outcome = BadVersionError()
    assert not write_round(rm)[0]  # re-reads the unsure state: epoch 3, moved on
    assert p.stale
    assert p.high_watermark == 4
    fetch(rm, IN_SYNC, 8)
    assert p.high_watermark == 4
    rm.become_leader_or_follower(
        leader_and_isr(3, [LEADER, IN_SYNC, JOINING], [LEADER, IN_SYNC, JOINING])
    )
    assert rm.partitions[TP].high_watermark == 4


def test_acks_all_not_acknowledged_while_a_replica_zookeeper_names_in_the_isr_lacks_it(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    rm, zk = rm_zk
    _expansion_landed_unanswered_then_bumped(rm, zk)
    appended, info = produce(rm, 4, -1)
    fetch(rm, IN_SYNC, 8)
    zk.outcome = BadVersionError()
    assert not write_round(rm)[0]
    rm.become_leader_or_follower(
        leader_and_isr(3, [LEADER, IN_SYNC, JOINING], [LEADER, IN_SYNC, JOINING])
    )
    fetch(rm, IN_SYNC, 8)
    assert rm.wait_for_replication(appended, info.last_offset, 0.5) == ErrorCode.REQUEST_TIMED_OUT
    fetch(rm, JOINING, 8)
    assert rm.wait_for_replication(appended, info.last_offset, 0.5) == ErrorCode.NONE
