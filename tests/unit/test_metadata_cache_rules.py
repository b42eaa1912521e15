"""The metadata cache against Kafka 2.8's ZkMetadataCache: what UpdateMetadata replaces or
keeps, and the per-partition rules of the Metadata answer (getPartitionMetadata)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from broker import metadata_cache
from broker.metadata_cache import ZERO_UUID, BrokerEndpoint, MetadataCache
from tests.unit.test_metadata_cache import (
    TOPIC_ID,
    addresses,
    request,
    state,
    two_listener_request,
)
from wire.errors import ErrorCode
from zkdata.znodes import LEADER_DURING_DELETE


def partitions(response: dict[str, Any], topic: str = "t") -> list[dict[str, Any]]:
    (entry,) = [t for t in response["topics"] if t["name"] == topic]
    return list(entry["partitions"])


def test_an_endpoint_without_a_listener_name_is_named_plaintext() -> None:
    """UpdateMetadata before v3 names no listener: Kafka names the endpoint after its
    security protocol (ListenerName.forSecurityProtocol), PLAINTEXT here."""
    body = request(("t", [state(0, 1)]))
    for b in body["live_brokers"]:
        for e in b["endpoints"]:
            del e["listener"]
    cache = MetadataCache(1)
    cache.update(body)
    assert addresses(cache.metadata_response(None, 12, "PLAINTEXT")) == {
        1: ("h", 9091),
        2: ("h", 9092),
        3: ("h", 9093),
    }
    assert cache.endpoint(2, "PLAINTEXT") == BrokerEndpoint(2, "h", 9092, "PLAINTEXT", None)


def test_the_zero_topic_id_is_not_recorded() -> None:
    """ZkMetadataCache keeps a topic's id only when it is not Uuid.ZERO_UUID (an
    UpdateMetadata before v7, or a topic created without one)."""
    body = request(("t", [state(0, 1)]))
    body["topic_states"][0]["topic_id"] = ZERO_UUID
    cache = MetadataCache(1)
    cache.update(body)
    assert cache.topic_id("t") == ZERO_UUID
    assert cache.topic_name(ZERO_UUID) is None
    assert cache.topic_names([ZERO_UUID]) == {}


def test_a_deleted_topic_forgets_its_id() -> None:
    """Once its last partition is removed (leader -2) the topic's id goes with it
    (ZkMetadataCache.removePartitionInfo)."""
    cache = MetadataCache(1)
    cache.update(request(("t", [state(0, 1)])))
    assert cache.topic_name(TOPIC_ID) == "t"
    cache.update(request(("t", [state(0, LEADER_DURING_DELETE)])))
    assert cache.topic_id("t") == ZERO_UUID
    assert cache.topic_name(TOPIC_ID) is None
    assert cache.topic_names([TOPIC_ID]) == {}


def test_brokers_left_out_of_an_update_are_no_longer_alive() -> None:
    """Each UpdateMetadata's live brokers replace the cache's (aliveBrokers and aliveNodes
    are rebuilt from the request): a broker it leaves out is dead, on every listener, and
    a partition it leads has no leader available."""
    cache = MetadataCache(1)
    first = request(("t", [state(0, 3)]))
    # broker 3 alone has an EXTRA listener too
    first["live_brokers"][2]["endpoints"].append(
        {"port": 9300, "host": "x", "listener": "EXTRA", "security_protocol": 0}
    )
    cache.update(first)
    assert cache.endpoint(3, "EXTRA") == BrokerEndpoint(3, "x", 9300, "EXTRA", None)
    body = request()
    body["live_brokers"] = body["live_brokers"][:2]
    cache.update(body)
    assert cache.endpoint(3, "EXTRA") is None
    assert cache.metadata_response(None, 12, "EXTRA")["brokers"] == []
    assert sorted(b.broker_id for b in cache.alive_brokers()) == [1, 2]
    assert cache.broker(3) is None
    assert cache.endpoint(3, "PLAINTEXT") is None
    answer = cache.metadata_response(["t"], 12, "PLAINTEXT")
    assert sorted(addresses(answer)) == [1, 2]
    assert [(p["leader_id"], p["error_code"]) for p in partitions(answer)] == [
        (-1, int(ErrorCode.LEADER_NOT_AVAILABLE))
    ]


def test_a_brokers_rack_is_answered() -> None:
    body = request(("t", [state(0, 1)]))
    body["live_brokers"][0]["rack"] = "rack-a"
    cache = MetadataCache(1)
    cache.update(body)
    assert cache.broker(1) == BrokerEndpoint(1, "h", 9091, "PLAINTEXT", "rack-a")
    racks = {b["node_id"]: b["rack"] for b in cache.metadata_response(None, 12)["brokers"]}
    assert racks == {1: "rack-a", 2: None, 3: None}


@pytest.mark.parametrize(
    ("version", "error"),
    [(6, ErrorCode.LISTENER_NOT_FOUND), (5, ErrorCode.LEADER_NOT_AVAILABLE)],
)
def test_listener_not_found_is_answered_from_v6(version: int, error: ErrorCode) -> None:
    """KafkaApis passes errorUnavailableListeners = version >= 6."""
    cache = MetadataCache(1, "REPLICATION")
    cache.update(two_listener_request(replication_only=(2,)))
    answer = cache.metadata_response(["t"], version, "CLIENT")
    assert [(p["leader_id"], p["error_code"]) for p in partitions(answer)] == [
        (1, 0),
        (-1, int(error)),
        (3, 0),
    ]


def dead_broker_3_cache(leader: int) -> MetadataCache:
    """Replicas and ISR 1, 2, 3 led by ``leader``; broker 3 is not alive."""
    body = request(("t", [state(0, leader)]))
    body["live_brokers"] = body["live_brokers"][:2]
    cache = MetadataCache(1)
    cache.update(body)
    return cache


@pytest.mark.parametrize("version", [1, 5, 12])
def test_after_v0_every_replica_is_answered_dead_or_alive(version: int) -> None:
    """errorUnavailableEndpoints is version == 0 only: later versions list the replicas
    and ISR as the controller gave them, with no REPLICA_NOT_AVAILABLE."""
    (p,) = partitions(dead_broker_3_cache(1).metadata_response(["t"], version))
    assert (p["error_code"], p["leader_id"]) == (0, 1)
    assert (p["replica_nodes"], p["isr_nodes"]) == ([1, 2, 3], [1, 2, 3])


def test_v0_answers_only_live_replicas_and_isr() -> None:
    (p,) = partitions(dead_broker_3_cache(1).metadata_response(["t"], 0))
    assert (p["error_code"], p["leader_id"]) == (int(ErrorCode.REPLICA_NOT_AVAILABLE), 1)
    assert (p["replica_nodes"], p["isr_nodes"]) == ([1, 2], [1, 2])


def test_v0_without_a_live_leader_is_leader_not_available_not_replica_not_available() -> None:
    """getPartitionMetadata: no leader endpoint is LEADER_NOT_AVAILABLE, whatever the
    replicas; REPLICA_NOT_AVAILABLE is only for a partition with its leader."""
    (p,) = partitions(dead_broker_3_cache(3).metadata_response(["t"], 0))
    assert (p["error_code"], p["leader_id"]) == (int(ErrorCode.LEADER_NOT_AVAILABLE), -1)
    assert (p["replica_nodes"], p["isr_nodes"]) == ([1, 2], [1, 2])


def test_the_leader_epoch_and_offline_replicas_are_answered() -> None:
    cache = MetadataCache(1)
    cache.update(request(("t", [state(0, 1, leader_epoch=7, isr=[1, 2], offline_replicas=[3])])))
    for version in (12, 0):
        (p,) = partitions(cache.metadata_response(["t"], version))
        assert p["leader_epoch"] == 7
        assert p["offline_replicas"] == [3]
    # Even with no leader available.
    (p,) = partitions(dead_broker_3_cache(3).metadata_response(["t"], 12))
    assert (p["leader_id"], p["leader_epoch"]) == (-1, 3)


def test_a_known_internal_topic_is_answered_internal() -> None:
    cache = MetadataCache(1)
    cache.update(request(("__consumer_offsets", [state(0, 1)]), ("t", [state(0, 1)])))
    answer = cache.metadata_response(None, 12)
    internal = {t["name"]: t["is_internal"] for t in answer["topics"]}
    assert internal == {"__consumer_offsets": True, "t": False}


def test_before_any_update_the_broker_gives_itself_on_the_listener_asked_on() -> None:
    cache = MetadataCache(1, "REPLICATION")
    cache.own = {
        "REPLICATION": BrokerEndpoint(1, "r", 9101, "REPLICATION", None),
        "CLIENT": BrokerEndpoint(1, "c", 9001, "CLIENT", None),
    }
    assert addresses(cache.metadata_response(None, 12, "CLIENT")) == {1: ("c", 9001)}
    assert addresses(cache.metadata_response(None, 12)) == {1: ("r", 9101)}
    assert cache.metadata_response(None, 12, "NOWHERE")["brokers"] == []


def test_v0_filters_replicas_and_isr_by_the_listener_asked_on() -> None:
    """maybeFilterAliveReplicas keeps a replica only if its broker is alive with an
    endpoint on the request's listener: a live broker without it is left out as well."""
    cache = MetadataCache(1, "REPLICATION")
    cache.update(two_listener_request(replication_only=(2,)))
    p0 = partitions(cache.metadata_response(["t"], 0, "CLIENT"))[0]
    assert (p0["leader_id"], p0["error_code"]) == (1, int(ErrorCode.REPLICA_NOT_AVAILABLE))
    assert (p0["replica_nodes"], p0["isr_nodes"]) == ([1, 3], [1, 3])
    # On the listener every broker has, nothing is left out.
    p0 = partitions(cache.metadata_response(["t"], 0, "REPLICATION"))[0]
    assert (p0["error_code"], p0["replica_nodes"], p0["isr_nodes"]) == (0, [1, 2, 3], [1, 2, 3])


def test_a_stale_controllers_update_changes_nothing() -> None:
    """An UpdateMetadata of an older controller epoch is refused whole (STALE_CONTROLLER_EPOCH
    in ReplicaManager.maybeUpdateMetadataCache): no broker, topic or controller of it."""
    cache = MetadataCache(1)
    newer = request(("t", [state(0, 1)]))
    newer["controller_epoch"] = 5
    cache.update(newer)
    stale = request(("u", [state(0, 2)]))
    stale["controller_id"] = 2
    stale["live_brokers"] = stale["live_brokers"][1:]
    with pytest.raises(metadata_cache.StaleControllerEpoch):
        cache.update(stale)
    assert (cache.controller_id, cache.controller_epoch) == (1, 5)
    assert sorted(b.broker_id for b in cache.alive_brokers()) == [1, 2, 3]
    assert sorted(addresses(cache.metadata_response(None, 12))) == [1, 2, 3]
    assert cache.topics() == ["t"]
    # The same epoch is the same controller: applied.
    stale["controller_epoch"] = 5
    cache.update(stale)
    assert sorted(b.broker_id for b in cache.alive_brokers()) == [2, 3]


def test_topic_names_answers_only_the_ids_asked_for() -> None:
    other = uuid.UUID("0b7a1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d")
    body = request(("t", [state(0, 1)]), ("u", [state(0, 1)]))
    body["topic_states"][1]["topic_id"] = other
    cache = MetadataCache(1)
    cache.update(body)
    assert cache.topic_names([other, uuid.UUID(int=7)]) == {other: "u"}
    assert cache.topic_names([]) == {}
    assert cache.topic_name(other) == "u"


def test_the_cluster_id_is_answered() -> None:
    cache = MetadataCache(1)
    cache.cluster_id = "cluster-x"
    cache.update(request(("t", [state(0, 1)])))
    assert cache.metadata_response(None, 12)["cluster_id"] == "cluster-x"


@pytest.mark.parametrize(
    ("version", "error"),
    [(6, ErrorCode.LISTENER_NOT_FOUND), (5, ErrorCode.LEADER_NOT_AVAILABLE)],
)
def test_a_live_leader_with_no_endpoint_at_all_is_alive(version: int, error: ErrorCode) -> None:
    """Kafka 2.8's aliveBrokers holds every live broker of the UpdateMetadata, one with no
    endpoint too: a partition it leads is LISTENER_NOT_FOUND (v6+), alive but not on this
    listener. It was left out of the live brokers: LEADER_NOT_AVAILABLE."""
    body = request(("t", [state(0, 2), state(1, 4)]))
    body["live_brokers"][1]["endpoints"] = []  # broker 2
    cache = MetadataCache(1)
    cache.update(body)
    response = cache.metadata_response(["t"], version, "PLAINTEXT")
    assert addresses(response) == {1: ("h", 9091), 3: ("h", 9093)}
    assert [(p["leader_id"], p["error_code"]) for p in partitions(response)] == [
        (-1, error),
        (-1, ErrorCode.LEADER_NOT_AVAILABLE),  # broker 4 is not live at all
    ]
    assert cache.broker(2) is None  # nothing for replication to reach


def test_an_entry_of_no_partitions_for_an_unknown_topic_deletes_nothing() -> None:
    """Kafka 2.8's updateMetadata reports the partitions it removed (leader -2): an entry
    naming no partition of a topic it does not know removes none. It was reported a
    deleted topic, whose committed offsets the group coordinator then drops."""
    cache = MetadataCache(1)
    assert cache.update(request(("t", [state(0, 1)]), ("u", []))) == []
    assert not cache.contains("u")
    # A known topic's entry of no partitions changes nothing either.
    assert cache.update(request(("t", []))) == []
    assert cache.partition_count("t") == 1
    # Its partitions marked deleted: reported.
    assert cache.update(request(("t", [state(0, LEADER_DURING_DELETE)]))) == ["t"]
    assert not cache.contains("t")
