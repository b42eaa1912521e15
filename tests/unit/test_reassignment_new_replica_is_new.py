"""A reassignment's new replica whose broker was down when the reassignment began is sent
its partition as new once its broker is back (found by review).

Kafka 2.8's onBrokerStartup moves such a replica from NewReplica to Online, which sends
nothing, and the reassignment it resumes sends the replicas being added a LeaderAndIsr
with isNew (onPartitionReassignment's A1, updateLeaderEpochAndSendRequest), so their
broker makes the log in any online directory. The model's resumed step sent it as not
new: a broker back with one of its log directories offline refused it
(KAFKA_STORAGE_ERROR, the log may be in the failed directory) and took the partition
offline until its next restart, so the reassignment never completed. A replica started
before its broker went (Offline, not New) is still sent as not new, as Kafka's
Offline-to-Online move does: its log may be in the failed directory."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, cast

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from controller import events as ev
from storage.log_manager import LogManager
from tests.unit.fake_cluster import Controller, ZooKeeperData
from wire.api import ApiKey
from zkdata.znodes import TopicPartition

T0 = TopicPartition("t", 0)
ADDED = 5
CONFIG = BrokerConfig.from_properties(
    {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(ADDED)}
)
STORAGE_ERROR = 56


def is_new_sent(c: Controller, broker_id: int) -> list[bool]:
    """The is_new of each LeaderAndIsr state of t-0 sent to ``broker_id``, in order."""
    return [
        p["is_new"]
        for r in c.sent
        if r.broker_id == broker_id and r.api_key == ApiKey.LEADER_AND_ISR
        for t in r.body["topic_states"]
        for p in t["partition_states"]
        if t["topic_name"] == T0.topic and p["partition_index"] == T0.partition
    ]


def back(c: Controller, data: ZooKeeperData) -> None:
    c.sent.clear()
    data.register(ADDED)
    c.run(ev.BrokerChange())
    c.drain()


def replays(c: Controller, tmp_path: Path) -> tuple[list[int], LogManager, Path]:
    """Broker 5 with two log directories, one offline from the start (its
    meta.properties failed), given each LeaderAndIsr the controller sent it: the
    partitions' error codes, its logs and its healthy directory."""
    failed, healthy = tmp_path / "failed", tmp_path / "healthy"
    logs = LogManager(
        [failed, healthy],
        CONFIG,
        offline_at_start={os.fspath(failed): OSError(errno.EIO, "Input/output error")},
    )
    rm = ReplicaManager(ADDED, cast(Any, None), StateChangeLog(tmp_path, ADDED), logs=logs)
    codes: list[int] = []
    try:
        for r in c.sent:
            if r.broker_id == ADDED and r.api_key == ApiKey.LEADER_AND_ISR:
                answer: dict[str, Any] = rm.become_leader_or_follower(dict(r.body))
                codes += [e["error_code"] for t in answer["topics"] for e in t["partition_errors"]]
    finally:
        rm.close()
    return codes, logs, healthy


def test_a_new_replica_whose_broker_was_down_is_sent_as_new_when_it_is_back(
    tmp_path: Path,
) -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        # Kafka accepts a znode's target on a broker that is down, and waits for it.
        data.request_reassignment({T0: (1, 2, ADDED)})
        c.run(ev.PartitionReassignment())
        c.drain()
        assert data.assignment("t").adding_replicas == {0: (ADDED,)}
        back(c, data)
        assert is_new_sent(c, ADDED) == [True]  # [False] before
        codes, logs, healthy = replays(c, tmp_path)
        try:
            assert codes == [0]  # [KAFKA_STORAGE_ERROR] before
            made = logs.get_log(T0)
            assert made is not None
            assert made.log_dir == os.fspath(healthy)
        finally:
            logs.close()


def test_a_new_replica_started_before_its_broker_went_is_not_sent_as_new(
    tmp_path: Path,
) -> None:
    """Started (and so told of the partition), then its broker lost: back with a log
    directory offline, its log may be there: refused, as in Kafka."""
    data = ZooKeeperData(brokers=(1, 2, 3, ADDED))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.request_reassignment({T0: (1, 2, ADDED)})
        c.run(ev.PartitionReassignment())
        c.drain()
        assert is_new_sent(c, ADDED) == [True]
        data.unregister(ADDED)
        c.run(ev.BrokerChange())
        c.drain()
        back(c, data)
        assert is_new_sent(c, ADDED) == [False]
        codes, logs, _healthy = replays(c, tmp_path)
        try:
            assert codes == [STORAGE_ERROR]
            assert logs.get_log(T0) is None
        finally:
            logs.close()
