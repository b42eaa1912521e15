"""The broker's metadata cache: what UpdateMetadata leaves in it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker import metadata_cache
from broker.metadata_cache import MetadataCache, PartitionMetadata
from wire.errors import ErrorCode
from zkdata.znodes import LEADER_DURING_DELETE, shared_index

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


def test_partitions_are_keyed_by_the_shared_int_of_their_index() -> None:
    # 32 bytes a partition: a broker's cache of 100,000 would hold 2.4 MB of equal ints.
    cache = MetadataCache(1)
    cache.update(request(("a", [state(int("700"), 1)])))
    cache.update(request(("a", [state(int("700"), 2)])))  # a later state for it
    (key,) = cache._topics["a"]
    assert key is shared_index(700)
    assert cache.partition("a", 700) == PartitionMetadata(2, 3, (1, 2, 3), (1, 2, 3), (), 5, 2)


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


def two_listener_request(*, replication_only: tuple[int, ...] = ()) -> dict[str, Any]:
    """Brokers 1-3 advertise CLIENT (listed first) and REPLICATION; those in
    ``replication_only`` advertise REPLICATION only."""
    body = request(("t", [state(0, 1), state(1, 2), state(2, 3, isr=[3, 1])]))
    body["live_brokers"] = [
        {
            "id": b,
            "endpoints": (
                []
                if b in replication_only
                else [{"port": 9000 + b, "host": "c", "listener": "CLIENT", "security_protocol": 0}]
            )
            + [{"port": 9100 + b, "host": "r", "listener": "REPLICATION", "security_protocol": 0}],
            "rack": None,
        }
        for b in (1, 2, 3)
    ]
    return body


def addresses(response: dict[str, Any]) -> dict[int, tuple[str, int]]:
    return {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}


def test_metadata_gives_the_addresses_of_the_listener_asked_on() -> None:
    cache = MetadataCache(1, "REPLICATION")
    cache.update(two_listener_request())
    on_client = cache.metadata_response(None, 12, "CLIENT")
    assert addresses(on_client) == {1: ("c", 9001), 2: ("c", 9002), 3: ("c", 9003)}
    assert on_client["controller_id"] == 1
    assert [p["leader_id"] for p in on_client["topics"][0]["partitions"]] == [1, 2, 3]
    on_replication = cache.metadata_response(None, 12, "REPLICATION")
    assert addresses(on_replication) == {1: ("r", 9101), 2: ("r", 9102), 3: ("r", 9103)}
    # No listener named: the inter-broker one. Replication reaches brokers there.
    assert cache.metadata_response(None, 12) == on_replication
    assert cache.broker(2) == metadata_cache.BrokerEndpoint(2, "r", 9102, "REPLICATION", None)


def test_a_leader_without_the_listener_asked_on_is_listener_not_found() -> None:
    cache = MetadataCache(1, "REPLICATION")
    cache.update(two_listener_request(replication_only=(2,)))
    for version, error in ((12, ErrorCode.LISTENER_NOT_FOUND), (5, ErrorCode.LEADER_NOT_AVAILABLE)):
        response = cache.metadata_response(["t"], version, "CLIENT")
        assert addresses(response) == {1: ("c", 9001), 3: ("c", 9003)}
        partitions = response["topics"][0]["partitions"]
        assert [(p["leader_id"], p["error_code"]) for p in partitions] == [
            (1, 0),
            (-1, int(error)),
            (3, 0),
        ]
    # A listener no broker has: no brokers, every partition without a reachable leader.
    nowhere = cache.metadata_response(["t"], 12, "NOWHERE")
    assert nowhere["brokers"] == []
    # The controller as the last UpdateMetadata named it, whatever the listener: Kafka
    # 2.8's handleTopicMetadataRequest answers metadataCache.getControllerId.
    assert nowhere["controller_id"] == 1
    assert {p["error_code"] for p in nowhere["topics"][0]["partitions"]} == {
        int(ErrorCode.LISTENER_NOT_FOUND)
    }
    # v0 lists only the replicas reachable on the listener.
    v0 = cache.metadata_response(["t"], 0, "CLIENT")["topics"][0]["partitions"][2]
    assert (v0["replica_nodes"], v0["isr_nodes"]) == ([1, 3], [3, 1])
    assert v0["error_code"] == int(ErrorCode.REPLICA_NOT_AVAILABLE)


def test_a_broker_without_the_inter_broker_listener_is_reached_at_its_first_endpoint() -> None:
    cache = MetadataCache(1, "INTERNAL")
    cache.update(two_listener_request())
    assert cache.broker(3) == metadata_cache.BrokerEndpoint(3, "c", 9003, "CLIENT", None)


def test_a_broker_without_the_inter_broker_listener_is_not_given_to_clients_on_it() -> None:
    """Kafka 2.8 answers a Metadata request with each broker's address on the listener it
    came in on (brokers.flatMap(_.endpoints.get(listener))), the inter-broker one as any
    other: a broker lacking it is left out and a partition it leads is LISTENER_NOT_FOUND
    (v6+; ZkMetadataCache.getPartitionMetadata). The cache gave such a broker at another
    listener's address (its first endpoint, replication's fallback) with no error."""
    cache = MetadataCache(1, "REPLICATION")
    body = two_listener_request()
    # broker 2 advertises CLIENT only, not the inter-broker listener REPLICATION
    body["live_brokers"][1]["endpoints"] = body["live_brokers"][1]["endpoints"][:1]
    cache.update(body)
    for listener in ("REPLICATION", None):
        answer = cache.metadata_response(["t"], 12, listener)
        assert addresses(answer) == {1: ("r", 9101), 3: ("r", 9103)}
        partitions = answer["topics"][0]["partitions"]
        assert [(p["leader_id"], p["error_code"]) for p in partitions] == [
            (1, 0),
            (-1, int(ErrorCode.LISTENER_NOT_FOUND)),
            (3, 0),
        ]
    # FindCoordinator's look-up: none on the listener named, the inter-broker one included.
    assert cache.endpoint(2, "REPLICATION") is None
    assert cache.endpoint(2, "CLIENT") == metadata_cache.BrokerEndpoint(
        2, "c", 9002, "CLIENT", None
    )
    # Replication still reaches it at its first endpoint.
    assert cache.broker(2) == cache.endpoint(2, None) == cache.endpoint(2, "CLIENT")
