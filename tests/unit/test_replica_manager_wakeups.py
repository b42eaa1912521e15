"""Which waiting fetches a replica manager wakes, against Kafka 2.8's ReplicaManager: a
StopReplica completes the delayed fetches and produces of its partitions
(completeDelayedFetchOrProduceRequests); a leader's append wakes its followers' long
polls (tryCompleteDelayedFetch), even when the high watermark does not move; a
follower's fetch that moves the high watermark wakes the consumers (data=False: only a
high watermark changed). No ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

TP = TopicPartition("t", 0)
Calls = list[tuple[bool, list[TopicPartition] | None]]


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Broker 1 leads TP (replicas 1, 2; ISR 1, 2)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    manager = ReplicaManager(1, cast(Any, None), StateChangeLog(tmp_path, 1), logs=logs)
    manager.become_leader_or_follower(leader_and_isr_request(TP, 1, 2, [1, 2], [1, 2], is_new=True))
    try:
        yield manager
    finally:
        manager.close()
        logs.close()


def notified(rm: ReplicaManager) -> Calls:
    calls: Calls = []
    rm.on_data = lambda data, partitions: calls.append(
        (data, None if partitions is None else list(partitions))
    )
    return calls


def test_an_append_held_by_a_follower_still_wakes_the_followers_long_polls(
    rm: ReplicaManager,
) -> None:
    calls = notified(rm)
    assert rm.append_as_leader(TP, build_batch([b"v"] * 3), 1)[0] == ErrorCode.NONE
    assert rm.partitions[TP].high_watermark == 0  # follower 2 has not fetched
    assert calls == [(True, [TP])]


def test_a_follower_fetch_moving_the_high_watermark_wakes_the_consumers(
    rm: ReplicaManager,
) -> None:
    assert rm.append_as_leader(TP, build_batch([b"v"] * 3), 1)[0] == ErrorCode.NONE
    calls = notified(rm)
    rm.record_follower_fetch(rm.partitions[TP], 2, 3)
    assert rm.partitions[TP].high_watermark == 3
    assert calls == [(False, [TP])]


@pytest.mark.parametrize("delete", [False, True])
def test_a_stop_replica_wakes_the_fetches_of_its_partitions(
    rm: ReplicaManager, delete: bool
) -> None:
    calls = notified(rm)
    stop = {"partition_index": 0, "leader_epoch": 2, "delete_partition": delete}
    rm.stop_replicas(
        {
            "controller_id": 9,
            "controller_epoch": 3,
            "broker_epoch": 100,
            "topic_states": [{"topic_name": "t", "partition_states": [stop]}],
        }
    )
    assert calls == [(True, [TP])]


def test_an_acks_all_wait_for_a_partition_gone_offline_is_a_storage_error(
    rm: ReplicaManager,
) -> None:
    # Kafka 2.8's DelayedProduce asks getPartitionOrError: HostedPartition.Offline is
    # KAFKA_STORAGE_ERROR (the partition is gone from those hosted here).
    error, p, info, _why = rm.append_as_leader(TP, build_batch([b"v"]), -1)
    assert error == ErrorCode.NONE
    assert p is not None
    assert info is not None
    with rm._lock:
        assert rm._mark_offline(TP)
    assert rm.wait_for_replication(p, info.last_offset, 30.0) == ErrorCode.KAFKA_STORAGE_ERROR
