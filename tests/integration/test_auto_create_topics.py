"""auto.create.topics.enable: a client's Metadata for an unknown topic creates it (Kafka
2.8's getTopicMetadata), with num.partitions and default.replication.factor."""

from __future__ import annotations

import pytest

from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume, produce
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths

pytestmark = pytest.mark.integration


def metadata(c: Cluster, broker: int, topic: str, *, allow: bool, version: int = 9) -> int:
    """The error code a Metadata request for ``topic`` gets from ``broker``."""
    with KafkaConnection("127.0.0.1", c[broker].port()) as conn:
        answer = conn.request(
            ApiKey.METADATA,
            version,
            {"topics": [{"name": topic}], "allow_auto_topic_creation": allow},
        )
    (entry,) = answer["topics"]
    return int(entry["error_code"])


def test_a_producer_to_an_unknown_topic_creates_it_and_is_acknowledged(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(
        auto_create_topics_enable="true", num_partitions="3", default_replication_factor="2"
    )
    c.wait_controller()
    acked = produce(c, "made-by-a-producer", [b"m-%d" % i for i in range(30)])
    assert acked.errors == []
    assignment = c.assignment("made-by-a-producer")
    assert assignment is not None
    assert sorted(assignment.partitions) == [0, 1, 2]
    assert {len(r) for r in assignment.partitions.values()} == {2}
    read = consume(c, "made-by-a-producer", [0, 1, 2])
    assert sorted(v for p in read.values() for _, v in p) == sorted(b"m-%d" % i for i in range(30))

    # Over the wire: a new topic is answered LEADER_NOT_AVAILABLE and made by whichever
    # broker is asked; one the client does not want made (a consumer's) is not.
    c.wait_topic_online("made-by-a-producer")
    assert metadata(c, 2, "asked", allow=True) == ErrorCode.LEADER_NOT_AVAILABLE
    assert c.zk.exists(paths.topic("asked")) is not None
    c.wait_topic_online("asked")
    assert metadata(c, 3, "not-wanted", allow=False) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata(c, 3, "bad name!", allow=True) == ErrorCode.INVALID_TOPIC_EXCEPTION
    # __transaction_state is never made (no transaction coordinator here); a Metadata
    # naming __consumer_offsets makes it with its own settings, as Kafka 2.8's
    # creatableTopic (tests/unit/test_metadata_auto_create_offsets.py): the consumer
    # above, having a group id, made it through FindCoordinator already.
    assert metadata(c, 3, "__transaction_state", allow=True) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    for never in ("not-wanted", "bad name!", "__transaction_state"):
        assert c.zk.exists(paths.topic(never)) is None
    # Metadata v0-v3 has no such field: creation is allowed, as in Kafka.
    assert metadata(c, 1, "old-client", allow=True, version=1) == ErrorCode.LEADER_NOT_AVAILABLE
    wait_for(lambda: c.zk.exists(paths.topic("old-client")), 30, "topic old-client")


def test_without_it_an_unknown_topic_stays_unknown_and_too_few_brokers_are_said(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    c.wait_controller()
    c.wait_registered([1, 2, 3])
    wait_for(
        lambda: metadata(c, 1, "nope", allow=True) != ErrorCode.LEADER_NOT_AVAILABLE,
        30,
        "broker 1 to know the cluster",
    )
    assert metadata(c, 1, "nope", allow=True) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert c.zk.exists(paths.topic("nope")) is None
    c.close()

    wide = cluster_factory(auto_create_topics_enable="true", default_replication_factor="4")
    wide.wait_controller()
    wide.wait_registered([1, 2, 3])
    # As above: until the controller's first UpdateMetadata reaches broker 1 (the
    # controller is active once it is sent), an unknown topic is "not available yet" and
    # nothing is created. Asked without creation, so as not to make it.
    wait_for(
        lambda: metadata(wide, 1, "too-wide", allow=False) != ErrorCode.LEADER_NOT_AVAILABLE,
        30,
        "broker 1 to know the cluster",
    )
    assert metadata(wide, 1, "too-wide", allow=True) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert wide.zk.exists(paths.topic("too-wide")) is None
