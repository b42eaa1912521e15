"""A leader's ISR writes against Kafka 2.8's (ZkIsrManager / ReplicationUtils
.updateLeaderAndIsr, conditional on the partition's zkVersion): the state written carries
the epoch of the controller that made this leader, not the broker's latest controller
epoch; a partition stopped or replaced by a newer LeaderAndIsr before the writer runs is
not written; a state znode found gone, unreadable or of another leader epoch leaves the
partition waiting for the controller (stale), and the zkVersion found is remembered so a
delayed repeat of the epoch held is not taken back; additions asked for while a write is
in flight are still waited for. A fake ZooKeeper; the writer's rounds are run by hand."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.errors import ErrorCode
from zkdata.client import BadVersionError, NoNodeError, SetData
from zkdata.znodes import (
    LeaderAndIsr,
    TopicPartition,
    decode_partition_state,
    encode_partition_state,
)

LEADER, IN_SYNC, JOINING, LATE = 1, 2, 3, 4
TP = TopicPartition("t", 0)
PATH = "/brokers/topics/t/partitions/0/state"


class Zk:
    """Every write answered with ``outcome`` (a zkVersion, or an error object), after
    ``during`` runs; reads give ``stored`` (None: the znode is gone), for every path."""

    def __init__(self) -> None:
        self.writes: list[SetData] = []
        self.outcome: Any = None
        self.stored: tuple[bytes, int] | None = None
        self.during: Any = None
        self.reads: list[list[str]] = []  # each batch of reads

    def multi_batched(self, items: list[list[Any]]) -> list[list[Any]]:
        if self.during is not None:
            self.during()
        out: list[list[Any]] = []
        for (op,) in items:
            self.writes.append(op)
            if self.outcome is None:  # written: the next version
                out.append([SimpleNamespace(version=op.version + 1)])
            else:
                out.append([self.outcome])
        return out

    def get_many(self, path_list: list[str]) -> list[tuple[bytes, Any] | None]:
        self.reads.append(list(path_list))
        if self.stored is None:
            return [None for _ in path_list]
        data, version = self.stored
        return [(data, SimpleNamespace(version=version)) for _ in path_list]


def state(leader: int, epoch: int, isr: tuple[int, ...], zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, zk_version)


@pytest.fixture
def zk() -> Zk:
    return Zk()


@pytest.fixture
def rm(tmp_path: Path, zk: Zk) -> Iterator[ReplicaManager]:
    """LEADER leads TP at epoch 2 (replicas 1-4, ISR 1, 2; zkVersion 2, made by the
    controller of epoch 3) with ten records, which IN_SYNC has."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    manager = ReplicaManager(LEADER, cast(Any, zk), StateChangeLog(tmp_path, LEADER), logs=logs)
    manager.become_leader_or_follower(
        leader_and_isr_request(TP, LEADER, 2, [LEADER, IN_SYNC], [1, 2, 3, 4], is_new=True)
    )
    assert manager.append_as_leader(TP, build_batch([b"v"] * 10), 1)[0] == ErrorCode.NONE
    manager.record_follower_fetch(manager.partitions[TP], IN_SYNC, 10)
    try:
        yield manager
    finally:
        manager.close()
        logs.close()


def write_round(rm: ReplicaManager) -> set[TopicPartition]:
    changed: set[TopicPartition] = set()
    failed, _more = rm._isr_round(changed)
    assert not failed
    return changed


def lagging(rm: ReplicaManager, replica: int) -> None:
    p = rm.partitions[TP]
    p.followers[replica].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()


def test_the_isr_is_written_with_the_controller_epoch_that_made_the_leader(
    rm: ReplicaManager, zk: Zk
) -> None:
    # A newer controller's request since (an UpdateMetadata-less StopReplica of another
    # partition, say) raised the broker's controller epoch; this leader's state is the
    # controller of epoch 3's.
    rm.controller_epoch = 7
    rm.record_follower_fetch(rm.partitions[TP], JOINING, 10)
    assert write_round(rm) == {TP}
    (write,) = zk.writes
    assert (write.path, write.version) == (PATH, 2)
    written = decode_partition_state(PATH, write.data, 3)
    assert written.controller_epoch == 3
    assert written.leader_and_isr.isr == (LEADER, IN_SYNC, JOINING)
    assert rm.partitions[TP].isr == (LEADER, IN_SYNC, JOINING)


def test_a_partition_stopped_before_the_writer_runs_is_not_written(
    rm: ReplicaManager, zk: Zk
) -> None:
    lagging(rm, IN_SYNC)
    rm.stop_replicas(
        {
            "controller_id": 9,
            "controller_epoch": 3,
            "broker_epoch": 100,
            "topic_states": [
                {
                    "topic_name": "t",
                    "partition_states": [
                        {"partition_index": 0, "leader_epoch": 2, "delete_partition": False}
                    ],
                }
            ],
        }
    )
    assert write_round(rm) == set()
    assert zk.writes == []


def test_a_request_of_a_state_replaced_before_the_writer_runs_is_not_written(
    rm: ReplicaManager, zk: Zk
) -> None:
    lagging(rm, IN_SYNC)
    rm.become_leader_or_follower(
        leader_and_isr_request(TP, LEADER, 3, [LEADER, IN_SYNC], [1, 2, 3, 4])
    )
    assert write_round(rm) == set()
    assert zk.writes == []
    assert rm.partitions[TP].isr == (LEADER, IN_SYNC)


def test_a_state_znode_gone_leaves_the_partition_waiting_for_the_controller(
    rm: ReplicaManager, zk: Zk
) -> None:
    p = rm.partitions[TP]
    zk.outcome = NoNodeError()
    lagging(rm, IN_SYNC)
    assert write_round(rm) == set()
    assert p.stale
    assert p.isr == (LEADER, IN_SYNC)


@pytest.mark.parametrize("stored", [None, b"{not json"])
def test_a_refused_write_whose_state_cannot_be_read_back_leaves_the_partition_stale(
    rm: ReplicaManager, zk: Zk, stored: bytes | None
) -> None:
    p = rm.partitions[TP]
    zk.outcome = BadVersionError()
    zk.stored = None if stored is None else (stored, 5)
    lagging(rm, IN_SYNC)
    assert write_round(rm) == set()
    assert p.stale
    assert p.isr == (LEADER, IN_SYNC)


def test_the_states_of_many_refused_writes_are_read_back_in_one_batch(
    rm: ReplicaManager, zk: Zk
) -> None:
    """A controller changing many states at once refuses as many writes: what is stored
    is read in one batch of pipelined reads, not a round trip a partition."""
    other = TopicPartition("t", 1)
    rm.become_leader_or_follower(
        leader_and_isr_request(other, LEADER, 2, [LEADER, IN_SYNC], [1, 2, 3, 4], is_new=True)
    )
    rm.record_follower_fetch(rm.partitions[other], IN_SYNC, 0)
    zk.outcome = BadVersionError()
    for tp in (TP, other):
        rm.partitions[tp].followers[IN_SYNC].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
    rm.maybe_shrink_isr()
    assert write_round(rm) == set()
    assert len(zk.writes) == 2
    assert zk.reads == [[PATH, "/brokers/topics/t/partitions/1/state"]]
    assert [rm.partitions[tp].stale for tp in (TP, other)] == [True, True]  # znodes gone


def test_a_delayed_repeat_of_the_epoch_held_older_than_the_state_found_is_not_taken(
    rm: ReplicaManager, zk: Zk
) -> None:
    p = rm.partitions[TP]
    # The controller bumped the epoch (zkVersion 4) while our shrink was on its way.
    zk.outcome = BadVersionError()
    zk.stored = (encode_partition_state(state(LEADER, 3, (LEADER, IN_SYNC), 4), 3), 4)
    lagging(rm, IN_SYNC)
    write_round(rm)
    assert p.stale
    assert p.found_zk_version == 4
    # A failover's resend of epoch 2 read before that bump (zkVersion 3 >= the 2 held).
    repeat = leader_and_isr_request(TP, LEADER, 2, [LEADER, IN_SYNC], [1, 2, 3, 4])
    repeat["topic_states"][0]["partition_states"][0]["partition_epoch"] = 3
    response = rm.become_leader_or_follower(repeat)
    assert response["topics"][0]["partition_errors"][0]["error_code"] == 0
    assert rm.partitions[TP] is p  # not taken: still waiting for epoch 3


def test_an_addition_asked_while_a_write_is_in_flight_is_still_waited_for(
    rm: ReplicaManager, zk: Zk
) -> None:
    p = rm.partitions[TP]
    rm.record_follower_fetch(p, JOINING, 10)  # JOINING's addition is queued
    # While its write is in flight, LATE reaches the high watermark too.
    zk.during = lambda: rm.record_follower_fetch(p, LATE, 10)
    assert write_round(rm) == {TP}
    assert p.isr == (LEADER, IN_SYNC, JOINING)
    # LATE's addition is queued, not yet written: the high watermark still waits for it.
    assert p.isr_adding == (LATE,)
    zk.during = None
    assert write_round(rm) == {TP}
    assert rm.partitions[TP].isr == (LEADER, IN_SYNC, JOINING, LATE)


def test_a_written_shrink_moves_the_high_watermark_at_once(rm: ReplicaManager, zk: Zk) -> None:
    p = rm.partitions[TP]
    assert rm.append_as_leader(TP, build_batch([b"w"] * 5), 1)[0] == ErrorCode.NONE
    assert p.high_watermark == 10  # IN_SYNC has 10 of 15
    lagging(rm, IN_SYNC)
    assert write_round(rm) == {TP}
    assert p.isr == (LEADER,)
    # As Kafka's maybeShrinkIsr: the smaller ISR lets the high watermark move now, not
    # at the next produce or fetch.
    assert p.high_watermark == 15


def test_an_addition_settled_between_a_fetch_and_its_request_is_asked_for_again(
    rm: ReplicaManager, zk: Zk, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = rm.partitions[TP]
    rm.record_follower_fetch(p, LATE, 10)  # LATE's addition queued
    real = rm._request_isr_changes

    def round_meanwhile(*args: Any, **kwargs: Any) -> None:
        # The writer's round (LATE's addition) runs between JOINING's fetch and its
        # request: it settles what the queue holds, which JOINING is not in yet.
        write_round(rm)
        real(*args, **kwargs)

    monkeypatch.setattr(rm, "_request_isr_changes", round_meanwhile)
    rm.record_follower_fetch(p, JOINING, 10)
    assert p.isr == (LEADER, IN_SYNC, LATE)
    assert p.isr_adding == (JOINING,)  # its write is still to come


def test_a_write_failing_otherwise_leaves_the_partition_led(rm: ReplicaManager, zk: Zk) -> None:
    p = rm.partitions[TP]
    zk.outcome = RuntimeError("some other ZooKeeper error")
    lagging(rm, IN_SYNC)
    assert write_round(rm) == set()
    assert not p.stale
    assert p.isr == (LEADER, IN_SYNC)


def test_an_isr_change_notification_that_is_not_created_raises(rm: ReplicaManager, zk: Zk) -> None:
    # The writer keeps the changed partitions and tries again (a notification lost
    # would leave the controller's view of the ISR stale until its next failover).
    zk.outcome = ConnectionLoss()
    with pytest.raises(ConnectionLoss):
        rm._notify_isr_changes([TP])
    (create,) = zk.writes
    assert create.path == "/isr_change_notification/isr_change_"


def test_a_round_finding_the_partition_moved_on_wakes_its_fetches(
    rm: ReplicaManager, zk: Zk
) -> None:
    calls: list[list[TopicPartition] | None] = []
    rm.on_data = lambda data, partitions: calls.append(
        None if partitions is None else list(partitions)
    )
    zk.outcome = BadVersionError()
    zk.stored = (encode_partition_state(state(2, 3, (IN_SYNC,), 4), 3), 4)
    lagging(rm, IN_SYNC)
    write_round(rm)
    assert rm.partitions[TP].stale
    assert [TP] in calls  # their fetches are answered with an error now


def test_a_failed_round_puts_its_request_back_behind_a_newer_one(
    rm: ReplicaManager, zk: Zk
) -> None:
    p = rm.partitions[TP]
    rm.record_follower_fetch(p, JOINING, 10)  # JOINING's addition is queued

    def shrink_then_lose_the_connection() -> None:
        lagging(rm, IN_SYNC)  # asked while the round is in flight
        raise ConnectionLoss()

    zk.during = shrink_then_lose_the_connection
    changed: set[TopicPartition] = set()
    failed, _more = rm._isr_round(changed)
    assert failed
    (intent,) = rm._isr_intents.values()
    assert intent.partition is p
    assert intent.remove == (IN_SYNC,)  # the newer request is not overwritten


def test_the_intents_taken_give_back_their_table(
    rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer takes queued intents from the front of their dict, which never shrinks
    by itself: once a wave of them (every partition of a leader whose followers joined)
    is written, the dict left holds no table sized for it."""
    p = rm.partitions[TP]
    many = [dataclasses.replace(p, topic_partition=TopicPartition("u", i)) for i in range(3_000)]
    rm._request_isr_changes(many, add=JOINING, why="joined")
    waved = sys.getsizeof(rm._isr_intents)
    assert waved > 50 * sys.getsizeof({})
    monkeypatch.setattr(rm, "_write_isr_changes", lambda intents: [])
    write_round(rm)
    assert not rm._isr_intents
    assert sys.getsizeof(rm._isr_intents) == sys.getsizeof({})
