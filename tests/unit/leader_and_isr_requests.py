"""A controller's LeaderAndIsr request of one partition, as the replica manager takes it
(the unit tests of the data plane send it to real replica managers)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from zkdata.znodes import TopicPartition

TOPIC_ID = uuid.UUID(int=7)


def leader_and_isr_request(
    tp: TopicPartition,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    replicas: Sequence[int],
    *,
    is_new: bool = False,
) -> dict[str, Any]:
    """``is_new``: the partition was just made (its first leader makes its log; a leader
    that is told otherwise and has no log refuses, see ReplicaManager)."""
    return {
        "controller_id": 9,
        "controller_epoch": 3,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": tp.topic,
                "topic_id": TOPIC_ID,
                "partition_states": [
                    {
                        "partition_index": tp.partition,
                        "controller_epoch": 3,
                        "leader": leader,
                        "leader_epoch": leader_epoch,
                        "isr": list(isr),
                        "partition_epoch": leader_epoch,
                        "replicas": list(replicas),
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": is_new,
                    }
                ],
            }
        ],
    }


def stop_replica_request(
    tp: TopicPartition,
    leader_epoch: int = -1,
    *,
    delete: bool = False,
    controller_epoch: int = 3,
    broker_epoch: int = 100,
) -> dict[str, Any]:
    """A StopReplica (v3) of one partition; ``leader_epoch`` -1 is "no epoch", -2 a topic
    deletion's (EpochDuringDelete)."""
    return {
        "controller_id": 9,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": [
            {
                "topic_name": tp.topic,
                "partition_states": [
                    {
                        "partition_index": tp.partition,
                        "leader_epoch": leader_epoch,
                        "delete_partition": delete,
                    }
                ],
            }
        ],
    }


def update_metadata_listing(
    tps: Sequence[TopicPartition], leader: int, replicas: Sequence[int]
) -> dict[str, Any]:
    """An UpdateMetadata (controller epoch 0) listing these partitions, led by ``leader``:
    what a broker's metadata cache holds of the partitions it leads (a Produce of one it
    does not list is UNKNOWN_TOPIC_OR_PARTITION, as in Kafka)."""
    return {
        "controller_id": 9,
        "controller_epoch": 0,
        "topic_states": [
            {
                "topic_name": tp.topic,
                "partition_states": [
                    {
                        "partition_index": tp.partition,
                        "controller_epoch": 0,
                        "leader": leader,
                        "leader_epoch": 0,
                        "isr": list(replicas),
                        "zk_version": 0,
                        "replicas": list(replicas),
                        "offline_replicas": [],
                    }
                ],
            }
            for tp in tps
        ],
        "live_brokers": [],
    }
