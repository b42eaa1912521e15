"""The broker's metadata cache: what UpdateMetadata leaves in it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker import metadata_cache
from broker.metadata_cache import MetadataCache, PartitionMetadata
from zkdata.znodes import LEADER_DURING_DELETE

TOPIC_ID = uuid.UUID("5f1c6c1e-8d1b-4a44-a0f1-0c7a1b2c3d4e")


def state(partition: int, leader: int, leader_epoch: int = 3, **kw: Any) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "controller_epoch": kw.get("controller_epoch", 2),
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": kw.get("isr", [1, 2, 3]),
        "zk_version": kw.get("zk_version", 5),
        "replicas": kw.get("replicas", [1, 2, 3]),
        "offline_replicas": kw.get("offline_replicas", []),
    }


def request(*topic_states: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "controller_id": 1,
        "controller_epoch": 2,
        "broker_epoch": 10,
        "topic_states": [
            {"topic_name": t, "topic_id": TOPIC_ID, "partition_states": ps}
            for t, ps in topic_states
        ],
        "live_brokers": [
            {
                "id": b,
                "endpoints": [
                    {"port": 9090 + b, "host": "h", "listener": "PLAINTEXT", "security_protocol": 0}
                ],
                "rack": None,
            }
            for b in (1, 2, 3)
        ],
    }


def test_equal_partition_states_share_one_metadata_object() -> None:
    cache = MetadataCache(1)
    cache.update(
        request(
            ("a", [state(0, 1), state(1, 1), state(2, 2)]),
            ("b", [state(0, 1), state(1, 1, offline_replicas=[3])]),
        )
    )
    a0 = cache.partition("a", 0)
    assert a0 == PartitionMetadata(1, 3, (1, 2, 3), (1, 2, 3), (), 5, 2)
    assert cache.partition("a", 1) is a0
    assert cache.partition("b", 0) is a0
    assert cache.partition("a", 2) == PartitionMetadata(2, 3, (1, 2, 3), (1, 2, 3), (), 5, 2)
    b1 = cache.partition("b", 1)
    assert b1 is not None
    assert b1.offline_replicas == (3,)
    # A later update changes one partition only.
    cache.update(request(("a", [state(1, 2, leader_epoch=4, isr=[2, 3])])))
    assert cache.partition("a", 0) is a0
    assert cache.partition("a", 1) == PartitionMetadata(2, 4, (2, 3), (1, 2, 3), (), 5, 2)


def test_values_stay_right_when_the_shared_table_fills_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata_cache, "_SHARED_METADATA_MAX", 2)
    cache = MetadataCache(1)
    cache.update(request(("t", [state(p, p % 3 + 1, leader_epoch=p) for p in range(7)])))
    for p in range(7):
        assert cache.partition("t", p) == PartitionMetadata(
            p % 3 + 1, p, (1, 2, 3), (1, 2, 3), (), 5, 2
        )


def test_a_topic_being_deleted_leaves_the_cache() -> None:
    cache = MetadataCache(1)
    cache.update(request(("t", [state(0, 1), state(1, 2)])))
    deleted = cache.update(
        request(("t", [state(0, LEADER_DURING_DELETE), state(1, LEADER_DURING_DELETE)]))
    )
    assert deleted == ["t"]
    assert cache.topics() == []
