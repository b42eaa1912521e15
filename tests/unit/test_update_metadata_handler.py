"""The broker's handling of UpdateMetadata (KafkaApis): what each version's request leaves
in the metadata cache."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.metadata_cache import MetadataCache, StaleControllerEpoch
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from tests.unit.test_metadata_cache import request, state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec


def apis(cache: MetadataCache) -> KafkaApis:
    replicas = ReplicaManager(1, cast(Any, None), StateChangeLog(None, 1))
    return KafkaApis(1, cache, replicas, cast(Any, None), StateChangeLog(None, 1), lambda: 10)


def decoded(version: int, body: dict[str, Any]) -> dict[str, Any]:
    codec = request_codec(ApiKey.UPDATE_METADATA, version)
    return codec.decode(bytes(codec.encode(body)))


def test_v0_live_brokers_are_read_from_their_one_address() -> None:
    """v0 gives a live broker's address as v0_host/v0_port, no endpoints; they were
    dropped, and the broker then knew no live broker at all."""
    body = decoded(
        0,
        {
            "controller_id": 1,
            "controller_epoch": 1,
            "ungrouped_partition_states": [
                {
                    "topic_name": "t",
                    "partition_index": 0,
                    "controller_epoch": 1,
                    "leader": 2,
                    "leader_epoch": 0,
                    "isr": [2],
                    "zk_version": 0,
                    "replicas": [2],
                }
            ],
            "live_brokers": [
                {"id": 1, "v0_host": "h1", "v0_port": 9092},
                {"id": 2, "v0_host": "h2", "v0_port": 9093},
            ],
        },
    )
    cache = MetadataCache(1)
    assert apis(cache).handle(ApiKey.UPDATE_METADATA, 0, {}, body) == {"error_code": 0}
    brokers = {b.broker_id: (b.host, b.port, b.listener) for b in cache.alive_brokers()}
    assert brokers == {1: ("h1", 9092, "PLAINTEXT"), 2: ("h2", 9093, "PLAINTEXT")}
    answer = cache.metadata_response(["t"], 1)
    (partition,) = answer["topics"][0]["partitions"]
    assert (partition["error_code"], partition["leader_id"]) == (0, 2)


def leader_of_t0(cache: MetadataCache) -> int | None:
    partition = cache.partition("t", 0)
    return None if partition is None else partition.leader


def from_controller(controller_id: int, epoch: int, leader: int) -> dict[str, Any]:
    body = request(("t", [state(0, leader, leader_epoch=epoch, controller_epoch=epoch)]))
    body["controller_id"], body["controller_epoch"] = controller_id, epoch
    return body


def test_the_cache_refuses_an_update_of_an_older_controller() -> None:
    cache = MetadataCache(1)
    cache.update(from_controller(3, 6, leader=3))
    with pytest.raises(StaleControllerEpoch):
        cache.update(from_controller(2, 5, leader=2))
    assert (cache.controller_id, cache.controller_epoch) == (3, 6)
    assert leader_of_t0(cache) == 3
    cache.update(from_controller(3, 6, leader=1))  # the same controller again: applied
    assert leader_of_t0(cache) == 1


class PausingCache(MetadataCache):
    """The thread applying the deposed controller's request (epoch 5) is preempted between
    the handler's epoch check and the cache's update, until the new controller's request
    (epoch 6) has been applied."""

    def __init__(self) -> None:
        super().__init__(1)
        self.old_checked = threading.Event()
        self.new_applied = threading.Event()

    def update(self, req: dict[str, Any]) -> list[str]:
        if req["controller_epoch"] == 5:
            self.old_checked.set()
            self.new_applied.wait(10)
        try:
            return super().update(req)
        finally:
            if req["controller_epoch"] == 6:
                self.new_applied.set()


def test_a_deposed_controllers_update_checked_first_is_not_applied_after_the_new_ones() -> None:
    """Two controllers' requests on two connections: the deposed one's passed the epoch
    check just before the new one's came in; applied after it, the broker would serve the
    deposed controller's leaders, and name it controller, until the next UpdateMetadata.
    Kafka checks and applies under one lock (replicaStateChangeLock)."""
    cache = PausingCache()
    a = apis(cache)
    answers: dict[int, Any] = {}
    old = threading.Thread(
        target=lambda: answers.__setitem__(
            5, a.handle(ApiKey.UPDATE_METADATA, 7, {}, from_controller(2, 5, leader=2))
        )
    )
    old.start()
    assert cache.old_checked.wait(10)
    answers[6] = a.handle(ApiKey.UPDATE_METADATA, 7, {}, from_controller(3, 6, leader=3))
    old.join(10)
    assert not old.is_alive()
    assert answers == {
        5: {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)},
        6: {"error_code": 0},
    }
    assert (cache.controller_id, cache.controller_epoch) == (3, 6)
    assert leader_of_t0(cache) == 3


def test_requests_of_an_earlier_broker_epoch_are_refused_and_not_applied() -> None:
    """A controller request carrying an older broker epoch (addressed to this broker's
    previous incarnation) is answered STALE_BROKER_EPOCH and changes nothing; one carrying
    the current epoch is applied (Kafka's KafkaApis.isBrokerEpochStale)."""
    cache = MetadataCache(1)
    a = apis(cache)  # this broker's epoch is 10
    stale = from_controller(3, 6, leader=3)
    stale["broker_epoch"] = 9
    stale_answer = {"error_code": int(ErrorCode.STALE_BROKER_EPOCH)}
    assert a.handle(ApiKey.UPDATE_METADATA, 7, {}, stale) == stale_answer
    assert leader_of_t0(cache) is None
    assert a.replicas.controller_epoch == -1
    leader_and_isr = {
        "controller_id": 3,
        "controller_epoch": 6,
        "broker_epoch": 9,
        "topic_states": [
            {
                "topic_name": "t",
                "partition_states": [
                    {
                        "topic_name": "t",
                        "partition_index": 0,
                        "controller_epoch": 6,
                        "leader": 1,
                        "leader_epoch": 0,
                        "isr": [1],
                        "zk_version": 0,
                        "replicas": [1],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": True,
                    }
                ],
            }
        ],
        "live_leaders": [],
    }
    assert a.handle(ApiKey.LEADER_AND_ISR, 4, {}, leader_and_isr) == {
        "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
        "partition_errors": [
            {
                "topic_name": "t",
                "partition_index": 0,
                "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
            }
        ],
    }
    assert a.replicas.partitions == {}
    stop = {
        "controller_id": 3,
        "controller_epoch": 6,
        "broker_epoch": 9,
        "topic_states": [
            {
                "topic_name": "t",
                "partition_states": [
                    {"partition_index": 0, "leader_epoch": -2, "delete_partition": True}
                ],
            }
        ],
    }
    assert a.handle(ApiKey.STOP_REPLICA, 3, {}, stop) == {
        "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
        "partition_errors": [],
    }
    assert a.replicas.controller_epoch == -1
    stale["broker_epoch"] = 10
    assert a.handle(ApiKey.UPDATE_METADATA, 7, {}, stale) == {"error_code": 0}
    assert leader_of_t0(cache) == 3


def test_an_update_of_an_older_controller_leaves_the_controller_epoch_known() -> None:
    """Refused, a deposed controller's UpdateMetadata must not lower the controller epoch
    the replica manager fences LeaderAndIsr and StopReplica by (Kafka's
    ReplicaManager.maybeUpdateMetadataCache checks it before anything)."""
    cache = MetadataCache(1)
    a = apis(cache)
    assert a.handle(ApiKey.UPDATE_METADATA, 7, {}, from_controller(3, 6, leader=3)) == {
        "error_code": 0
    }
    assert a.handle(ApiKey.UPDATE_METADATA, 7, {}, from_controller(2, 5, leader=2)) == {
        "error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH)
    }
    assert a.replicas.controller_epoch == 6
    assert not a.replicas.check_controller_epoch(5)
    assert leader_of_t0(cache) == 3
    # The current controller's next update (the same epoch) is applied.
    assert a.handle(ApiKey.UPDATE_METADATA, 7, {}, from_controller(3, 6, leader=1)) == {
        "error_code": 0
    }
    assert leader_of_t0(cache) == 1
