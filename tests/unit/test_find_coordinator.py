"""FindCoordinator's answer (broker/group_apis.py), against Kafka 2.8's
KafkaApis.handleFindCoordinatorRequest."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from broker.group_apis import GroupApis
from broker.metadata_cache import MetadataCache
from groups.coordinator import OFFSETS_TOPIC
from tests.unit.test_metadata_cache import request, state, two_listener_request
from wire.errors import ErrorCode


def group_apis(leader: int, *, without: str | None = None) -> GroupApis:
    """A broker (1, inter-broker listener REPLICATION) whose group's __consumer_offsets
    partition is led by ``leader``, which does not advertise ``without``."""
    cache = MetadataCache(1, "REPLICATION")
    body = two_listener_request()
    body["topic_states"] = request((OFFSETS_TOPIC, [state(0, leader)]))["topic_states"]
    for b in body["live_brokers"]:
        if b["id"] == leader:
            b["endpoints"] = [e for e in b["endpoints"] if e["listener"] != without]
    cache.update(body)
    coordinator = SimpleNamespace(partition_of=lambda _key: 0)
    return GroupApis(cast(Any, coordinator), cache, None, offsets_replication_factor=1)


def found(apis: GroupApis, listener: str | None) -> tuple[int, str, int, int]:
    answer = apis.find_coordinator(3, {"key": "g", "key_type": 0}, listener)
    return answer["node_id"], answer["host"], answer["port"], answer["error_code"]


def test_the_coordinator_is_given_at_its_address_on_the_listener_asked_on() -> None:
    apis = group_apis(2)
    assert found(apis, "CLIENT") == (2, "c", 9002, ErrorCode.NONE)
    assert found(apis, "REPLICATION") == (2, "r", 9102, ErrorCode.NONE)


def test_a_coordinator_without_the_listener_asked_on_is_not_available() -> None:
    """Kafka 2.8 takes the coordinator's endpoint on the request's listener
    (_.endpoints.get(listenerName)) and answers COORDINATOR_NOT_AVAILABLE when it has
    none, the inter-broker listener as any other. On the inter-broker listener the
    coordinator lacking it was given at its first endpoint, another listener's address."""
    for listener in ("CLIENT", "REPLICATION"):
        apis = group_apis(2, without=listener)
        assert found(apis, listener) == (-1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE)


def test_an_unknown_key_type_is_an_invalid_request_and_transactions_not_available() -> None:
    """Kafka 2.8's CoordinatorType.forId throws InvalidRequestException for a key type
    other than GROUP (0) and TRANSACTION (1); this broker has no transaction coordinator,
    so a transactional id's coordinator is not available."""
    apis = group_apis(2)
    for version in (0, 3):
        unknown = apis.find_coordinator(version, {"key": "g", "key_type": 7}, "CLIENT")
        assert unknown["error_code"] == ErrorCode.INVALID_REQUEST
        assert unknown["node_id"] == -1
        assert "7" in unknown["error_message"]
        transaction = apis.find_coordinator(version, {"key": "t", "key_type": 1}, "CLIENT")
        assert transaction["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    batched = apis.find_coordinator(4, {"key_type": 7, "coordinator_keys": ["a", "b"]}, "CLIENT")
    assert [c["error_code"] for c in batched["coordinators"]] == [ErrorCode.INVALID_REQUEST] * 2
    assert found(apis, "CLIENT") == (2, "c", 9002, ErrorCode.NONE)
