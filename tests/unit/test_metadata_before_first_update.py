"""A broker's Metadata answer before its first UpdateMetadata: it waits for one, within a
bound, rather than tell a client the cluster has no brokers and no topics; past the bound
it gives itself and says the topic is not available yet."""

from __future__ import annotations

import threading
import types
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.metadata_cache import BrokerEndpoint, MetadataCache
from broker.state_change_log import StateChangeLog
from controller import request_batch
from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from controller.request_batch import RequestBatch
from tests.unit.test_metadata_cache import request, state
from tests.unit.test_request_batch import registration
from wire.api import ApiKey, UpdateMetadataType
from wire.errors import ErrorCode
from wire.protocol import request_codec
from zkdata.znodes import LeaderAndIsr, TopicPartition


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


def test_the_hold_lasts_until_the_first_full_update_is_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full UpdateMetadata comes in requests of whole topics (10,000 partitions each,
    here 4). The hold ended at the first request: a topic in a later one was then
    UNKNOWN_TOPIC_OR_PARTITION (what the hold exists to avoid: librdkafka fails the
    messages it holds), and one split across requests showed fewer partitions than it
    has. It now ends at the full update's last request (FULL)."""
    monkeypatch.setattr(request_batch, "MAX_PARTITIONS_PER_REQUEST", 4)
    sizes = {"a": 3, "b": 3, "c": 2}
    ctx = ControllerContext(epoch=7, epoch_zk_version=3)
    ctx.add_live_brokers({b: (registration(b), 1000 + b) for b in (1, 2, 3)})
    for topic, n in sizes.items():
        for p in range(n):
            tp = TopicPartition(topic, p)
            ctx.update_assignment(tp, ReplicaAssignment((1, 2, 3)))
            lai = LeaderAndIsr(1 + p % 3, 0, (1, 2, 3), zk_version=0)
            ctx.leadership[tp] = LeaderIsrAndControllerEpoch(lai, 7)
    batch = RequestBatch()
    batch.add_update_metadata([2], None)  # a broker (re)starting: the full metadata
    requests = batch.build(ctx, 1)
    assert len(requests) == 3
    cache = MetadataCache(2)
    none = cast(Any, None)
    a = KafkaApis(2, cache, none, none, StateChangeLog(None, 2), lambda: 1002, metadata_wait_s=60)
    a.replicas = cast(Any, types.SimpleNamespace(check_controller_epoch=lambda epoch: True))
    out: list[dict[str, Any]] = []
    asking = threading.Thread(
        target=lambda: out.append(
            a.handle(ApiKey.METADATA, 9, {}, {"topics": [{"name": t} for t in sizes]}) or {}
        )
    )
    for i, r in enumerate(requests):
        codec = request_codec(r.api_key, r.api_version)
        body = codec.decode(bytes(codec.encode(r.body)))
        assert a.handle(ApiKey.UPDATE_METADATA, r.api_version, {}, body) == {"error_code": 0}
        if i == 0:
            asking.start()
        if i < len(requests) - 1:
            asking.join(0.2)
            assert asking.is_alive(), f"answered after {i + 1} of {len(requests)} requests"
    asking.join(10)
    assert not asking.is_alive()
    (answer,) = out
    seen = {t["name"]: (t["error_code"], len(t["partitions"])) for t in answer["topics"]}
    assert seen == {t: (0, n) for t, n in sizes.items()}


def test_an_update_of_another_controller_or_version_ends_the_hold() -> None:
    """v0-v7 (no Type) and a Kafka ZooKeeper-mode controller's v8 (Type 0) end it: only a
    request marked INCREMENTAL says more of a full update is on its way."""
    for kind in (UpdateMetadataType.UNKNOWN, UpdateMetadataType.FULL):
        cache = MetadataCache(1)
        cache.update({**request(("t", [state(0, 2)])), "type": int(UpdateMetadataType.INCREMENTAL)})
        assert not cache.wait_first_update(0)
        cache.update({**request(("u", [state(0, 2)])), "type": int(kind)})
        assert cache.wait_first_update(0)


def test_past_the_bound_with_part_of_the_full_update_it_says_what_it_has() -> None:
    """The brokers and topics the requests so far gave; a topic not among them is not
    available yet (it may come in the next request), not unknown."""
    cache = MetadataCache(1)
    cache.update({**request(("t", [state(0, 2)])), "type": int(UpdateMetadataType.INCREMENTAL)})
    answer = apis(cache, wait_s=0).handle(3, 9, {}, {"topics": [{"name": "t"}, {"name": "later"}]})
    assert answer is not None
    assert [b["node_id"] for b in answer["brokers"]] == [1, 2, 3]
    t, later = answer["topics"]
    assert (t["error_code"], [p["leader_id"] for p in t["partitions"]]) == (0, [2])
    assert later["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
