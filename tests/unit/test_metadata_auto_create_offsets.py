"""A client's Metadata naming an absent __consumer_offsets, with auto.create.topics.enable
and allow_auto_topic_creation, makes it with the offsets topic's own settings and answers
LEADER_NOT_AVAILABLE, as Kafka 2.8 (KafkaApis.getTopicMetadata, AutoTopicCreationManager.
creatableTopic: offsets.topic.num.partitions, offsets.topic.replication.factor, the
coordinator's offsetsTopicConfigs): a console consumer reading it before any group waited
for good. __transaction_state is never made (no transaction coordinator here)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss

from broker import admin_apis
from broker.admin_apis import AdminApis
from broker.apis import KafkaApis
from broker.config import load_broker_config
from broker.group_apis import GroupApis
from broker.metadata_cache import MetadataCache
from broker.state_change_log import StateChangeLog
from tests.unit.fake_cluster import empty_cluster, register
from tests.unit.test_metadata_cache import request, state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec, response_codec
from zkdata import paths
from zkdata.client import ZkClient


def metadata_of(
    topic: str,
    *,
    auto_create: bool = True,
    zk_fails: int = 0,
    registered: tuple[int, ...] = (1, 2, 3),
) -> tuple[dict[str, Any], Any]:
    zk = empty_cluster()
    for b in registered:
        register(zk, b)
    zk.fail_next = [ConnectionLoss() for _ in range(zk_fails)]
    cache = MetadataCache(1)
    cache.update(request(("t", [state(0, 1)])))
    config = load_broker_config(
        overrides=[
            "broker.id=1",
            "zookeeper.connect=z:2181",
            f"auto.create.topics.enable={str(auto_create).lower()}",
            "offsets.topic.num.partitions=5",
            "offsets.topic.replication.factor=2",
        ]
    )
    admin = AdminApis(cast(ZkClient, zk), cache, lambda: False, config)
    coordinator = SimpleNamespace(offsets_partitions=5, partition_of=lambda _key: 0)
    groups = GroupApis(
        cast(Any, coordinator),
        cache,
        admin,
        offsets_replication_factor=2,
        offsets_segment_bytes=config.offsets_topic_segment_bytes,
    )
    none = cast(Any, None)
    apis = KafkaApis(
        1, cache, none, none, StateChangeLog(None, 1), lambda: 10,
        metadata_wait_s=0, admin=admin, groups=groups,
    )  # fmt: skip
    version = 9
    codec = request_codec(ApiKey.METADATA, version)
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": True}
    answer = apis.handle(ApiKey.METADATA, version, {}, codec.decode(bytes(codec.encode(body))))
    assert answer is not None
    out = response_codec(ApiKey.METADATA, version)
    (answered,) = out.decode(bytes(out.encode(answer)))["topics"]
    return answered, zk


def test_an_absent_offsets_topic_is_made_with_its_own_settings() -> None:
    topic, zk = metadata_of("__consumer_offsets")
    assert topic["is_internal"]
    assert topic["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
    data, _ = zk.get(paths.topic("__consumer_offsets"))
    partitions = json.loads(data)["partitions"]
    assert len(partitions) == 5
    assert all(len(replicas) == 2 for replicas in partitions.values())
    config, _ = zk.get(paths.topic_config("__consumer_offsets"))
    assert json.loads(config)["config"]["cleanup.policy"] == "compact"


@pytest.mark.parametrize(
    ("topic", "auto_create"), [("__transaction_state", True), ("__consumer_offsets", False)]
)
def test_no_internal_topic_is_made_otherwise(topic: str, auto_create: bool) -> None:
    answered, zk = metadata_of(topic, auto_create=auto_create)
    assert answered["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert zk.exists(paths.topic(topic)) is None


@pytest.mark.parametrize("topic", ["__consumer_offsets", "an-ordinary-topic"])
def test_zookeeper_not_answering_is_leader_not_available(
    topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A creation whose ZooKeeper request failed (the read, or the write whose answer was
    lost and may have landed) is LEADER_NOT_AVAILABLE, which a client's Metadata retries
    at once (an InvalidMetadataException), as Kafka's createTopicsInZk answers a
    REQUEST_TIMED_OUT; it was REQUEST_TIMED_OUT, which no client takes for stale
    metadata: it waited out metadata.max.age.ms (5 minutes)."""
    read_failed, _ = metadata_of(topic, zk_fails=1)
    assert read_failed["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE

    def lost(*_args: Any, **_kwargs: Any) -> bool:
        raise ConnectionLoss()

    monkeypatch.setattr(admin_apis, "write_topic_creation", lost)
    write_lost, _ = metadata_of(topic)
    assert write_lost["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE


@pytest.mark.parametrize("topic", ["__consumer_offsets", "an-ordinary-topic"])
def test_no_broker_registered_for_the_moment_is_leader_not_available(topic: str) -> None:
    """Every broker's registration gone at once (their sessions expired, each registering
    again) while this broker's metadata still lists them: Kafka 2.8 assigns from its
    metadata cache's live brokers and creates the topic (LEADER_NOT_AVAILABLE); it was
    INVALID_REQUEST ("no brokers are registered"), an answer Kafka never gives here,
    which no client takes for "ask again". Nothing is written."""
    answered, zk = metadata_of(topic, registered=())
    assert answered["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
    assert zk.exists(paths.topic(topic)) is None
