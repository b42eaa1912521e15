"""How many partitions of __consumer_offsets a group's partition is hashed over: Kafka
2.8's KafkaServer.startup starts the group coordinator with
``zkClient.getTopicPartitionCount(__consumer_offsets).getOrElse(offsetsTopicPartitions)``,
so an existing topic's count wins over offsets.topic.num.partitions, whatever setting a
broker is (re)started with."""

from __future__ import annotations

import logging
import types
from typing import Any, cast

import pytest

from broker.config import load_broker_config
from broker.group_apis import GroupApis
from broker.metadata_cache import MetadataCache
from broker.server import KafkaServer
from groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from groups.membership import GroupLimits
from groups.offset_records import partition_for
from tests.unit.fake_zk import FakeZk
from tests.unit.test_metadata_cache import request, state
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import TopicAssignment, encode_topic, new_topic_id

GROUP = "g0"  # partition 1 of 5, 41 of 50
EXISTING = 5
SETTING = 50


def broker(zk: FakeZk) -> Any:
    """What KafkaServer's start of its group coordinator uses, with that method (the real
    one), its coordinator built as KafkaServer builds it: from the setting."""
    config = load_broker_config(
        text=f"zookeeper.connect=z:2181\noffsets.topic.num.partitions={SETTING}\n"
    )
    s = types.SimpleNamespace(
        zk=zk,
        config=config,
        stop_requested=types.SimpleNamespace(is_set=lambda: False),
        groups=GroupCoordinator(
            1,
            cast(Any, None),
            offsets_partitions=config.offsets_topic_num_partitions,
            limits=GroupLimits(),
        ),
    )
    s._start_group_coordinator = types.MethodType(KafkaServer._start_group_coordinator, s)
    return s


@pytest.fixture
def zk() -> FakeZk:
    return FakeZk()


def put_offsets_topic(zk: FakeZk, partitions: int) -> None:
    zk.put(
        paths.topic(OFFSETS_TOPIC),
        encode_topic(
            TopicAssignment(OFFSETS_TOPIC, {p: (1,) for p in range(partitions)}, new_topic_id())
        ),
    )


def started(zk: FakeZk) -> GroupCoordinator:
    s = broker(zk)
    s._start_group_coordinator()
    coordinator: GroupCoordinator = s.groups
    coordinator.close()
    return coordinator


def test_an_existing_offsets_topic_decides_a_groups_partition_over_the_setting(
    zk: FakeZk,
) -> None:
    """A topic made with 5 partitions, the broker started with the default 50: the
    coordinator hashed over 50, so FindCoordinator looked for partition 41 of a topic of 5
    and answered COORDINATOR_NOT_AVAILABLE for good (the group's committed offsets out of
    reach), and groups hashing below 5 landed on the wrong partitions."""
    put_offsets_topic(zk, EXISTING)
    coordinator = started(zk)
    assert coordinator.offsets_partitions == EXISTING
    assert coordinator.partition_of(GROUP) == partition_for(GROUP, EXISTING) == 1
    assert sorted(coordinator._append_locks) == list(range(EXISTING))

    # FindCoordinator over the broker's metadata: the topic's 5 partitions, led by 2.
    cache = MetadataCache(1)
    cache.update(request((OFFSETS_TOPIC, [state(p, 2) for p in range(EXISTING)])))
    apis = GroupApis(coordinator, cache, None, offsets_replication_factor=1)
    answer = apis.find_coordinator(3, {"key": GROUP, "key_type": 0}, None)
    assert (answer["error_code"], answer["node_id"]) == (ErrorCode.NONE, 2)


def test_without_the_topic_the_setting_decides(zk: FakeZk) -> None:
    coordinator = started(zk)
    assert coordinator.offsets_partitions == SETTING
    assert coordinator.partition_of(GROUP) == 41
    assert len(coordinator._append_locks) == SETTING


def test_a_malformed_offsets_topic_znode_leaves_the_setting_with_a_warning(
    zk: FakeZk, caplog: pytest.LogCaptureFixture
) -> None:
    zk.put(paths.topic(OFFSETS_TOPIC), b'{"version": 2, "partitions": "five"}')
    with caplog.at_level(logging.WARNING):
        coordinator = started(zk)
    assert coordinator.offsets_partitions == SETTING
    assert any(
        r.levelno == logging.WARNING and paths.topic(OFFSETS_TOPIC) in r.getMessage()
        for r in caplog.records
    )
