"""The leader epoch a StopReplica carries. Kafka 2.8's addStopReplicaRequestForBrokers
sends -2 (EpochDuringDelete, which skips the broker's epoch check) only for a topic
queued for deletion, and the partition's leader epoch otherwise, whatever the delete
flag. A reassignment's StopReplica (delete) of a removed replica so carries the leader
epoch: a late copy of it (the channel resends after a socket timeout) reaching the
broker after it was given the replica back at a newer epoch is fenced, not obeyed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller.request_batch import BrokerRequest
from storage.log_manager import LogManager
from tests.unit.fake_cluster import Controller, ZooKeeperData
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

T0 = TopicPartition("t", 0)
REMOVED = 3
CONFIG = BrokerConfig.from_properties(
    {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(REMOVED)}
)


def leader_epochs(request: BrokerRequest) -> list[int]:
    return [p["leader_epoch"] for t in request.body["topic_states"] for p in t["partition_states"]]


def sent_to(c: Controller, broker_id: int, api: ApiKey) -> list[BrokerRequest]:
    return [r for r in c.sent if r.broker_id == broker_id and r.api_key == api]


@pytest.fixture
def reassigned_off_3() -> Iterator[Controller]:
    """t-0 on (1, 2, 3) reassigned to (1, 2, 4), run to its end: broker 3 removed."""
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    data.request_reassignment({T0: (1, 2, 4)})
    with Controller(data).elect() as c:
        c.run(ev.PartitionReassignment())
        c.drain()
        data.leader_sets_isr(T0, (1, 2, 3, 4))  # the new replica caught up
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        assert data.assignment("t").partitions == {0: (1, 2, 4)}
        yield c


def test_a_reassignments_stop_replicas_carry_the_leader_epoch(
    reassigned_off_3: Controller,
) -> None:
    c = reassigned_off_3
    stops = sent_to(c, REMOVED, ApiKey.STOP_REPLICA)
    assert [r.delete_partitions for r in stops][-1] is True, stops
    epoch = c.controller.ctx.leadership[T0].leader_and_isr.leader_epoch
    for r in stops:
        assert leader_epochs(r) == [epoch], (r.delete_partitions, leader_epochs(r), epoch)


def test_a_topic_deletions_stop_replicas_carry_epoch_during_delete() -> None:
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    data.request_deletion("t")
    with Controller(data).elect() as c:
        c.run(ev.TopicDeletion())
        c.drain()
        stops = [r for r in c.sent if r.api_key == ApiKey.STOP_REPLICA]
        assert {r.broker_id for r in stops} == {1, 2, 3}
        assert all(leader_epochs(r) == [-2] for r in stops)


def _broker_3_replays(c: Controller, tmp_path: Path) -> tuple[ReplicaManager, LogManager]:
    """Broker 3's replica manager, with real logs, given every LeaderAndIsr and
    StopReplica the controller sent it, in order."""
    logs = LogManager([tmp_path / "logs"], CONFIG)
    rm = ReplicaManager(REMOVED, cast(Any, None), StateChangeLog(tmp_path, REMOVED), logs=logs)
    # The log it had before the controller's requests (a follower's, made at creation).
    logs.get_or_create(T0)
    for r in c.sent:
        if r.broker_id != REMOVED:
            continue
        if r.api_key == ApiKey.LEADER_AND_ISR:
            answer = rm.become_leader_or_follower(dict(r.body))
            assert answer["error_code"] == 0, answer
        elif r.api_key == ApiKey.STOP_REPLICA:
            answer = rm.stop_replicas(dict(r.body))
            codes = [p["error_code"] for p in answer["partition_errors"]]
            assert codes == [0], (r.delete_partitions, codes, leader_epochs(r))
    return rm, logs


def test_the_removed_replicas_log_is_still_deleted(
    reassigned_off_3: Controller, tmp_path: Path
) -> None:
    rm, logs = _broker_3_replays(reassigned_off_3, tmp_path)
    try:
        assert T0 not in rm.partitions
        assert logs.get_log(T0) is None
        assert not (tmp_path / "logs" / "t-0").exists()
    finally:
        rm.close()
        logs.close()


def test_a_late_copy_does_not_delete_the_replica_given_back(
    reassigned_off_3: Controller, tmp_path: Path
) -> None:
    c = reassigned_off_3
    rm, logs = _broker_3_replays(c, tmp_path)
    try:
        (late,) = [r for r in sent_to(c, REMOVED, ApiKey.STOP_REPLICA) if r.delete_partitions]
        # A later reassignment gives broker 3 the replica back, at a newer epoch ...
        c.data.request_reassignment({T0: (1, 2, 4, 3)})
        c.sent.clear()
        c.run(ev.PartitionReassignment())
        c.drain()
        (give_back,) = sent_to(c, REMOVED, ApiKey.LEADER_AND_ISR)
        assert rm.become_leader_or_follower(dict(give_back.body))["error_code"] == 0
        assert T0 in rm.partitions
        # ... then a copy of the earlier StopReplica (delete) lands.
        answer = rm.stop_replicas(dict(late.body, controller_epoch=c.controller.ctx.epoch))
        codes = [p["error_code"] for p in answer["partition_errors"]]
        assert codes == [int(ErrorCode.FENCED_LEADER_EPOCH)]
        assert T0 in rm.partitions
        assert logs.get_log(T0) is not None
    finally:
        rm.close()
        logs.close()
