"""A stale partition (its ISR write found the partition moved on, or a StopReplica stopped
it) and a LeaderAndIsr of the leader epoch it already holds. Kafka 2.8 applies only a
newer leader epoch. Here a stopped follower takes its epoch again (a new controller's
failover resend restarts it: a StopReplica at the epoch it holds stops it, which Kafka
ignores), but no state older than one the broker held or read: a leader whose ISR
write found a newer epoch in ZooKeeper would otherwise take back an ISR older than
ZooKeeper's and let its high watermark pass a replica ZooKeeper names in the ISR. A
fake ZooKeeper applies the ISR writer's versioned writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.protocol.states import ZnodeStat

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request, stop_replica_request
from wire.errors import ErrorCode
from zkdata.client import BadVersionError
from zkdata.znodes import (
    LeaderAndIsr,
    TopicPartition,
    decode_partition_state,
    encode_partition_state,
)

ME, A, B = 1, 2, 3
TP = TopicPartition("t", 0)


def lai(
    epoch: int, isr: tuple[int, ...], version: int, *, leader: int = ME, is_new: bool = False
) -> dict[str, Any]:
    r = leader_and_isr_request(TP, leader, epoch, list(isr), [ME, A, B], is_new=is_new)
    r["topic_states"][0]["partition_states"][0]["partition_epoch"] = version
    return r


def stop_replica(epoch: int) -> dict[str, Any]:
    return stop_replica_request(TP, epoch)


class Zk:
    """One partition state znode; the ISR writer's writes are conditional on its version."""

    def __init__(self) -> None:
        self.state = LeaderAndIsr(ME, 2, (ME, A), 5)

    def multi_batched(self, items: list[Any]) -> list[list[Any]]:
        out: list[list[Any]] = []
        for (op,) in items:
            if op.version != self.state.zk_version:
                out.append([BadVersionError()])
                continue
            self.state = decode_partition_state(op.path, op.data, op.version + 1).leader_and_isr
            out.append([ZnodeStat(0, 0, 0, 0, self.state.zk_version, 0, 0, 0, 0, 0, 0)])
        return out

    def get(self, path: str) -> tuple[bytes, Any]:
        return encode_partition_state(self.state, 3), SimpleNamespace(version=self.state.zk_version)

    def get_many(self, path_list: list[str]) -> list[tuple[bytes, Any]]:
        return [self.get(p) for p in path_list]


@pytest.fixture
def rm_zk(tmp_path: Path) -> Iterator[tuple[ReplicaManager, Zk]]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    zk = Zk()
    rm = ReplicaManager(ME, zk, StateChangeLog(tmp_path, ME), logs=logs)  # type: ignore[arg-type]
    try:
        yield rm, zk
    finally:
        rm.close()
        logs.close()


def write_round(rm: ReplicaManager) -> None:
    failed, _ = rm._isr_round(set())
    assert not failed


def fetch(rm: ReplicaManager, replica: int, offset: int) -> None:
    rm.record_follower_fetches(replica, [(rm.partitions[TP], offset)])


def test_a_failover_resend_of_the_epoch_held_does_not_undo_what_zookeeper_moved_on_to(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    """Broker 1 leads epoch 2, ISR [1, 2] (zkVersion 5). A new controller fails over and
    queues its resend of that state; broker 1 adds replica 3 (zkVersion 6); the controller
    bumps the epoch (its write, refused at 5, re-read and made again: epoch 3, ISR
    [1, 2, 3], zkVersion 7), its LeaderAndIsr queued behind the resend. Broker 1's next
    ISR write finds epoch 3: stale. The resend of epoch 2 then arrives: a repeat, not the
    controller's word (it is older than what broker 1 read), so the ISR stays [1, 2, 3]
    for the high watermark, and acks=all waits for replica 3."""
    rm, zk = rm_zk
    rm.become_leader_or_follower(lai(2, (ME, A), 5, is_new=True))
    failover_resend = lai(2, (ME, A), 5)
    rm.append_as_leader(TP, build_batch([b"v"] * 4), 1)
    fetch(rm, A, 4)
    fetch(rm, B, 4)
    write_round(rm)
    assert zk.state == LeaderAndIsr(ME, 2, (ME, A, B), 6)
    err, appended, info, _ = rm.append_as_leader(TP, build_batch([b"w"] * 4), -1)
    assert err == ErrorCode.NONE
    assert appended is not None
    assert info is not None
    fetch(rm, A, 8)
    assert appended.high_watermark == 4  # replica 3, in the ISR, has 4
    zk.state = LeaderAndIsr(ME, 3, (ME, A, B), 7)
    bump = lai(3, (ME, A, B), 7)
    rm._request_isr_changes([appended], remove=B, why="replica 3 fell behind")
    write_round(rm)  # refused; the re-read finds epoch 3
    assert appended.stale
    assert appended.moved_on

    response = rm.become_leader_or_follower(failover_resend)

    assert response["topics"][0]["partition_errors"][0]["error_code"] == 0
    assert rm.partitions[TP] is appended  # a repeat: nothing applied
    assert (appended.stale, appended.isr) == (True, (ME, A, B))
    fetch(rm, A, 8)
    assert appended.high_watermark == 4
    assert rm.wait_for_replication(appended, info.last_offset, 0.3) != ErrorCode.NONE
    rm.become_leader_or_follower(bump)
    p = rm.partitions[TP]
    assert (p.leader_epoch, p.isr, p.stale) == (3, (ME, A, B), False)
    fetch(rm, A, 8)
    assert p.high_watermark == 4  # replica 3, in ZooKeeper's ISR, still has 4
    fetch(rm, B, 8)
    assert p.high_watermark == 8


def test_a_stopped_leader_takes_no_same_epoch_state_older_than_its_own_isr_write(
    rm_zk: tuple[ReplicaManager, Zk],
) -> None:
    rm, _ = rm_zk
    rm.become_leader_or_follower(lai(2, (ME, A), 5, is_new=True))
    rm.append_as_leader(TP, build_batch([b"v"] * 4), 1)
    fetch(rm, A, 4)
    fetch(rm, B, 4)
    write_round(rm)
    old = rm.partitions[TP]
    assert (old.isr, old.zk_version) == ((ME, A, B), 6)
    rm.stop_replicas(stop_replica(2))
    assert old.stale

    rm.become_leader_or_follower(lai(2, (ME, A), 5))  # older than what it wrote
    assert rm.partitions[TP] is old

    rm.become_leader_or_follower(lai(2, (ME, A, B), 6))  # what ZooKeeper holds
    new = rm.partitions[TP]
    assert new is not old
    assert (new.stale, new.isr, new.zk_version) == (False, (ME, A, B), 6)


@pytest.mark.parametrize("version", [5, 6])
def test_a_follower_stopped_at_its_epoch_is_restarted_by_a_failover_resend(
    rm_zk: tuple[ReplicaManager, Zk], version: int
) -> None:
    """Broker 1 follows broker 2, outside the ISR (epoch 2, zkVersion 5). Its controlled
    shutdown stops it with a StopReplica of epoch 2 (it is in no ISR to be taken out of,
    so the epoch stays 2). The controller fails over and its resend of epoch 2 (the
    leader may have changed the ISR since: zkVersion 6) restarts it: Kafka ignores such a
    StopReplica, so its follower never stopped."""
    rm, _ = rm_zk
    rm.become_leader_or_follower(lai(2, (A, B), 5, leader=A, is_new=True))
    old = rm.partitions[TP]
    rm.stop_replicas(stop_replica(2))
    assert old.stale

    response = rm.become_leader_or_follower(lai(2, (A, B), version, leader=A))

    assert response["topics"][0]["partition_errors"][0]["error_code"] == 0
    new = rm.partitions[TP]
    assert new is not old
    assert (new.leader, new.leader_epoch, new.stale, new.zk_version) == (A, 2, False, version)
