"""A broker's Metadata answer before its first UpdateMetadata: it waits for one, within a
bound, rather than tell a client the cluster has no brokers and no topics; past the bound
it gives itself and says the topic is not available yet."""

from __future__ import annotations

import threading
from typing import Any, cast

from broker.apis import KafkaApis
from broker.metadata_cache import BrokerEndpoint, MetadataCache
from broker.state_change_log import StateChangeLog
from tests.unit.test_metadata_cache import request, state
from wire.errors import ErrorCode


def apis(cache: MetadataCache, wait_s: float) -> KafkaApis:
    none = cast(Any, None)
    return KafkaApis(
        1, cache, none, none, StateChangeLog(None, 1), lambda: 1, metadata_wait_s=wait_s
    )


def ask(a: KafkaApis, out: list[dict[str, Any]]) -> threading.Thread:
    body = {"topics": [{"name": "t"}]}
    thread = threading.Thread(target=lambda: out.append(a.handle(3, 9, {}, body) or {}))
    thread.start()
    return thread


def test_a_request_before_the_first_update_is_answered_from_it() -> None:
    cache = MetadataCache(1)
    out: list[dict[str, Any]] = []
    thread = ask(apis(cache, wait_s=60), out)
    thread.join(0.3)
    assert thread.is_alive()
    assert out == []
    cache.update(request(("t", [state(0, 2)])))
    thread.join(10)
    assert not thread.is_alive()
    (answer,) = out
    assert [b["node_id"] for b in answer["brokers"]] == [1, 2, 3]
    (topic,) = answer["topics"]
    assert topic["error_code"] == 0
    assert [(p["partition_index"], p["leader_id"]) for p in topic["partitions"]] == [(0, 2)]


def test_past_the_bound_the_broker_says_what_it_knows() -> None:
    """No controller has reached it: it knows itself alive, and cannot say the topic does
    not exist. Kafka answers UNKNOWN_TOPIC_OR_PARTITION and no brokers, and librdkafka
    then fails the messages it holds for that topic (a fault schedule saw 6,300 given up
    while no controller existed for over the bound)."""
    cache = MetadataCache(1)
    cache.own = {"PLAINTEXT": BrokerEndpoint(1, "127.0.0.1", 9092, "PLAINTEXT", None)}
    out: list[dict[str, Any]] = []
    ask(apis(cache, wait_s=0.05), out).join(10)
    (answer,) = out
    assert answer["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}]
    assert answer["controller_id"] == -1
    (topic,) = answer["topics"]
    assert (topic["name"], topic["error_code"]) == ("t", ErrorCode.LEADER_NOT_AVAILABLE)
    assert topic["partitions"] == []


def test_after_the_first_update_nothing_waits_even_for_a_topic_it_does_not_know() -> None:
    cache = MetadataCache(1)
    cache.update(request(("other", [state(0, 2)])))
    out: list[dict[str, Any]] = []
    thread = ask(apis(cache, wait_s=3600), out)
    thread.join(10)
    assert not thread.is_alive()
    assert out[0]["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
