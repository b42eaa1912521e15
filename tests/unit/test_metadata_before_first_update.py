"""A broker's Metadata answer before its first UpdateMetadata: it waits for one, within a
bound, rather than tell a client the cluster has no brokers and no topics."""

from __future__ import annotations

import threading
from typing import Any, cast

from broker.apis import KafkaApis
from broker.metadata_cache import MetadataCache
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


def test_past_the_bound_the_empty_cache_answers_as_kafka_would() -> None:
    out: list[dict[str, Any]] = []
    ask(apis(MetadataCache(1), wait_s=0.05), out).join(10)
    (answer,) = out
    assert answer["brokers"] == []
    assert answer["controller_id"] == -1
    assert answer["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_after_the_first_update_nothing_waits_even_for_a_topic_it_does_not_know() -> None:
    cache = MetadataCache(1)
    cache.update(request(("other", [state(0, 2)])))
    out: list[dict[str, Any]] = []
    thread = ask(apis(cache, wait_s=3600), out)
    thread.join(10)
    assert not thread.is_alive()
    assert out[0]["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
