"""The broker's handling of UpdateMetadata (KafkaApis): what each version's request leaves
in the metadata cache."""

from __future__ import annotations

from typing import Any, cast

from broker.apis import KafkaApis
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from wire.api import ApiKey
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
