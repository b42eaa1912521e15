"""A Kafka client's admin against the brokers: confluent-kafka's AdminClient creates topics,
grows and deletes them (CreateTopics, CreatePartitions, DeleteTopics, carried out by the
controller's broker as in Kafka 2.8), and each ends in the znodes `zkctl topic` would have
written; bad requests get Kafka's error codes, and a broker that is not the controller
answers NOT_CONTROLLER."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from admin import reassign
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap
from tests.integration.harness import Cluster, wait_for
from tests.integration.harness import run_zkctl as zkctl
from tests.integration.test_consumer_groups import coordinates, wait_known
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths, znodes

pytestmark = pytest.mark.integration

TIMEOUT_S = 30  # operation timeouts: only a hang reaches them


def admin(c: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap(c)})


def wait_controller_known(c: Cluster) -> int:
    """The active controller, once every live broker's metadata names it. The controller
    writes its elections to ZooKeeper before its UpdateMetadata reaches the brokers, and
    librdkafka sends admin requests to the controller its first metadata named (looking
    again only at its next metadata refresh, every 5 minutes by default): one that asked
    in between waited on a SIGKILLed controller until each request timed out."""
    controller, _ = c.wait_controller()

    def named() -> bool:
        for b in (b for b, broker in c.brokers.items() if broker.alive()):
            with KafkaConnection("127.0.0.1", c[b].port()) as conn:
                described = conn.request(ApiKey.DESCRIBE_CLUSTER, 0, {})
            if described["controller_id"] != controller:
                return False
        return True

    wait_for(named, 60, f"every live broker's metadata naming controller {controller}")
    return controller


def outcome(futures: dict[str, Any]) -> dict[str, int]:
    """Each topic's result: 0, or its Kafka error code."""
    got: dict[str, int] = {}
    for name, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_S * 2)
            got[name] = 0
        except KafkaException as e:
            error: KafkaError = e.args[0]
            got[name] = error.code()
    return got


def topic_config(c: Cluster, name: str) -> dict[str, str]:
    got = c.zk.get(paths.topic_config(name))
    assert got is not None
    return znodes.decode_topic_config(name, got[0])


def replicas(c: Cluster, name: str) -> dict[int, tuple[int, ...]]:
    a = c.assignment(name)
    assert a is not None
    return dict(a.partitions)


def topics_listed(a: AdminClient) -> set[tuple[str, int]]:
    """Each topic and its partition count, in the Metadata of whichever broker answers."""
    topics = a.list_topics(timeout=TIMEOUT_S).topics
    return {(name, len(t.partitions)) for name, t in topics.items()}


def test_admin_client_creates_grows_and_deletes_topics(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory(num_partitions="2", default_replication_factor="2")
    a = admin(c)
    created = a.create_topics(
        [
            NewTopic("orders", 6, 3, config={"retention.ms": "3600000"}),
            NewTopic("placed", 3, replica_assignment=[[1, 2], [2, 3], [3, 1]]),
            NewTopic("defaults", -1, -1),  # the brokers' num.partitions and replication factor
        ],
        operation_timeout=TIMEOUT_S,
    )
    assert outcome(created) == {"orders": 0, "placed": 0, "defaults": 0}
    # Answered once every partition had a leader: online in ZooKeeper, and in Metadata.
    for name, count in (("orders", 6), ("placed", 3), ("defaults", 2)):
        assert len(c.wait_topic_online(name, timeout=1)) == count
    assert topic_config(c, "orders") == {"retention.ms": "3600000"}
    assert topic_config(c, "placed") == {}
    assert replicas(c, "placed") == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
    assert {len(r) for r in replicas(c, "orders").values()} == {3}
    assert {len(r) for r in replicas(c, "defaults").values()} == {2}
    # CreateTopics waits for the answering broker's metadata only, as Kafka's; librdkafka
    # may ask another broker, which applies the same UpdateMetadata a moment later.
    wait_for(
        lambda: topics_listed(a) >= {("orders", 6), ("placed", 3), ("defaults", 2)},
        60,
        "every broker's Metadata listing the new topics",
    )

    grown = a.create_partitions(
        [NewPartitions("orders", 8), NewPartitions("placed", 4, [[3, 2]])],
        operation_timeout=TIMEOUT_S,
    )
    assert outcome(grown) == {"orders": 0, "placed": 0}
    assert len(c.wait_topic_online("orders", timeout=1)) == 8
    assert replicas(c, "placed")[3] == (3, 2)
    # The controller's decisions for the new partitions, in its state-change log.
    controller = c.controller()
    assert controller is not None
    new = {
        (r["topic"], r["partition"])
        for r in c[controller[0]].state_changes("partition_state")
        if r["reason"] == "new"
    }
    assert {("orders", 6), ("orders", 7), ("placed", 3)} <= new

    deleted = a.delete_topics(["orders", "defaults"])
    assert outcome(deleted) == {"orders": 0, "defaults": 0}
    # Answered once the topics were gone from the controller's metadata; ZooKeeper's
    # znodes go in the same deletion.
    wait_for(
        lambda: (
            c.zk.exists(paths.topic("orders")) is None
            and c.zk.exists(paths.topic("defaults")) is None
        ),
        60,  # after every replica's StopReplica: seconds on a loaded machine
        "the deleted topics' znodes gone",
    )
    assert not c.zk.get_children(paths.DELETE_TOPICS)
    wait_for(
        lambda: {name for name, _ in topics_listed(a)} == {"placed"},
        60,
        "Metadata listing only the topic left",
    )


def test_bad_admin_requests_get_kafkas_errors_and_change_nothing(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    a = admin(c)
    assert outcome(a.create_topics([NewTopic("t", 2, 2)])) == {"t": 0}
    bad = a.create_topics(
        [
            NewTopic("t", 1, 1),
            NewTopic("t_x", 1, 4),
            NewTopic("bad/name", 1, 1),
            NewTopic("cfg", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("nowhere", 1, replica_assignment=[[1, 9]]),
            NewTopic("nothing", 0, 1),
        ],
        operation_timeout=TIMEOUT_S,
    )
    assert outcome(bad) == {
        "t": ErrorCode.TOPIC_ALREADY_EXISTS,
        "t_x": ErrorCode.INVALID_REPLICATION_FACTOR,
        "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "cfg": ErrorCode.INVALID_CONFIG,
        "nowhere": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "nothing": ErrorCode.INVALID_PARTITIONS,
    }
    checked = a.create_topics([NewTopic("checked", 3, 3)], validate_only=True)
    assert outcome(checked) == {"checked": 0}
    grow = a.create_partitions(
        [NewPartitions("t", 1), NewPartitions("absent", 3), NewPartitions("..", 2)]
    )
    assert outcome(grow) == {
        "t": ErrorCode.INVALID_PARTITIONS,
        "absent": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "..": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # no topic has it (Kafka's answer)
    }
    # A replica list for every partition, not the new ones only: refused, as Kafka 2.8's
    # ZkAdminManager does (zkctl's --replica-assignment may list them all).
    every = a.create_partitions([NewPartitions("t", 4, [[1, 2], [2, 1], [1, 2], [2, 1]])])
    assert outcome(every) == {"t": ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    checked_growth = a.create_partitions([NewPartitions("t", 5)], validate_only=True)
    assert outcome(checked_growth) == {"t": 0}
    gone = a.delete_topics(["absent", "bad/name"])
    assert outcome(gone) == {
        "absent": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "bad/name": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    # Nothing of the refused or validated requests was written.
    assert sorted(c.zk.get_children(paths.BROKER_TOPICS) or []) == ["t"]
    assert sorted(c.zk.get_children(paths.CONFIG_TOPICS) or []) == ["t"]
    assert len(replicas(c, "t")) == 2

    # A broker that is not the controller refuses, as Kafka 2.8's do; the client above
    # found the controller through Metadata.
    controller = c.controller()
    assert controller is not None
    other = next(b for b in c.brokers if b != controller[0])
    with KafkaConnection("127.0.0.1", c[other].port()) as conn:
        answer = conn.request(
            ApiKey.CREATE_TOPICS,
            4,
            {"topics": [creatable("u")], "timeout_ms": 1000},
        )
        assert [t["error_code"] for t in answer["topics"]] == [ErrorCode.NOT_CONTROLLER]
        answer = conn.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["t"], "timeout_ms": 0})
        assert [t["error_code"] for t in answer["responses"]] == [ErrorCode.NOT_CONTROLLER]
    assert c.zk.exists(paths.topic("u")) is None
    assert c.zk.exists(paths.delete_topic("t")) is None

    with KafkaConnection("127.0.0.1", c[controller[0]].port()) as conn:
        # timeout_ms 0: answered at once, REQUEST_TIMED_OUT, and the change is made all the
        # same (Kafka 2.8's ZkAdminManager); validate_only is answered as checked.
        answer = conn.request(
            ApiKey.CREATE_TOPICS,
            4,
            {"topics": [creatable("quick")], "timeout_ms": 0},
        )
        assert [t["error_code"] for t in answer["topics"]] == [ErrorCode.REQUEST_TIMED_OUT]
        answer = conn.request(
            ApiKey.CREATE_TOPICS,
            4,
            {"topics": [creatable("checked")], "timeout_ms": 0, "validate_only": True},
        )
        assert [t["error_code"] for t in answer["topics"]] == [0]
        c.wait_topic_online("quick", timeout=30)
        answer = conn.request(
            ApiKey.CREATE_PARTITIONS,
            2,
            {
                "topics": [{"name": "quick", "count": 2, "assignments": None}],
                "timeout_ms": 0,
                "validate_only": False,
            },
        )
        assert [r["error_code"] for r in answer["results"]] == [ErrorCode.REQUEST_TIMED_OUT]
        wait_for(lambda: len(replicas(c, "quick")) == 2, 30, "topic quick grown")
        # Listed by this broker first: Kafka 2.8's DeleteTopics answers a topic its
        # metadata cache lacks UNKNOWN_TOPIC_OR_PARTITION.
        wait_for(lambda: in_metadata(conn, "quick"), 30, "topic quick in the metadata")
        answer = conn.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["quick"], "timeout_ms": 0})
        assert [t["error_code"] for t in answer["responses"]] == [ErrorCode.REQUEST_TIMED_OUT]
        wait_for(lambda: c.zk.exists(paths.topic("quick")) is None, 30, "topic quick deleted")
        assert c.zk.exists(paths.topic("checked")) is None
        # 1,000 new partitions on broker 9, not registered: answered, broker 9 named once
        # (a problem a partition was more than a Kafka string holds: the connection closed).
        new = [{"broker_ids": [9, 1]}] * 1000
        answer = conn.request(
            ApiKey.CREATE_PARTITIONS,
            2,
            {
                "topics": [{"name": "t", "count": 1002, "assignments": new}],
                "timeout_ms": 0,
                "validate_only": True,
            },
        )
        (refused,) = answer["results"]
        assert refused["error_code"] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert refused["error_message"].count("broker(s) 9 not available") == 1

        # DeleteTopics v6 names a topic by its id.
        topic_id = topic_id_of(c, "t")
        answer = conn.request(
            ApiKey.DELETE_TOPICS,
            6,
            {"topics": [{"name": None, "topic_id": topic_id}], "timeout_ms": TIMEOUT_S * 1000},
        )
    assert [(r["name"], r["error_code"]) for r in answer["responses"]] == [("t", 0)]
    wait_for(lambda: c.zk.exists(paths.topic("t")) is None, 10, "topic t's znode gone")
    assert all(b.alive() for b in c.brokers.values())


def in_metadata(conn: KafkaConnection, topic: str) -> bool:
    """Whether the broker's metadata lists the topic."""
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    got = conn.request(ApiKey.METADATA, 4, body)
    return bool(got["topics"][0]["error_code"] == ErrorCode.NONE)


def creatable(name: str) -> dict[str, Any]:
    """A CreateTopics request's topic: one partition, one replica."""
    return {
        "name": name,
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }


def topic_id_of(c: Cluster, name: str) -> Any:
    a = c.assignment(name)
    assert a is not None
    assert a.topic_id is not None
    return a.topic_id


def test_deletion_disabled_is_refused(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory((1,), delete_topic_enable="false")
    a = admin(c)
    assert outcome(a.create_topics([NewTopic("kept", 1, 1)])) == {"kept": 0}
    refused = a.delete_topics(["kept"])
    assert outcome(refused) == {"kept": ErrorCode.TOPIC_DELETION_DISABLED}
    with KafkaConnection("127.0.0.1", c[1].port()) as conn:  # v2: no such error yet
        answer = conn.request(ApiKey.DELETE_TOPICS, 2, {"topic_names": ["kept"], "timeout_ms": 0})
    assert [r["error_code"] for r in answer["responses"]] == [ErrorCode.INVALID_REQUEST]
    assert c.zk.exists(paths.topic("kept")) is not None
    assert c.zk.exists(paths.delete_topic("kept")) is None


def elected(future: Any) -> dict[tuple[str, int], int]:
    """ElectLeaders' per-partition results: 0, or the Kafka error code."""
    got: dict[tuple[str, int], int] = {}
    for tp, outcome in future.result(timeout=TIMEOUT_S * 2).items():
        error = outcome.args[0] if isinstance(outcome, KafkaException) else outcome
        got[(tp.topic, tp.partition)] = 0 if error is None else error.code()
    return got


def test_admin_client_elects_preferred_and_unclean_leaders(
    cluster_factory: ClusterFactory,
) -> None:
    """ElectLeaders, carried out by the controller as an event of its own: preferred
    leaders back, and an unclean election of a partition no ISR member can lead (its
    topic does not allow one by itself)."""
    c = cluster_factory()
    c.create_topic("p", {0: (3, 1)})  # broker 3 preferred
    c.create_topic("u", {0: (2, 3)})
    c.wait_topic_online("p")
    c.wait_topic_online("u")
    c[3].kill()
    c.wait_partitions("u", lambda s: s[0].isr == (2,), "u's ISR [2]", c.session_timeout_s + 30)
    c.wait_partitions("p", lambda s: s[0].leader == 1, "p led by 1", c.session_timeout_s + 30)
    c[2].kill()
    c.wait_partitions("u", lambda s: s[0].leader == -1, "u offline", c.session_timeout_s + 30)
    wait_controller_known(c)  # (a controller SIGKILLed above may still be named)
    a = admin(c)
    # Broker 3, p's preferred leader, is down: not available; u has no live replica.
    first = a.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition("p", 0), TopicPartition("nosuch", 0)]
    )
    assert elected(first) == {
        ("p", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ("nosuch", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    unclean = a.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("u", 0)])
    assert elected(unclean) == {("u", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}

    c[3].start()  # not in u's ISR: u stays offline (unclean election is off)
    c.wait_partitions(
        "p", lambda s: 3 in s[0].isr, "broker 3 back in p's ISR", c.session_timeout_s + 30
    )
    assert c.partition_state("u", 0)[0].leader == -1
    epoch_before = c.partition_state("p", 0)[0].leader_epoch
    preferred = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition("p", 0)])
    assert elected(preferred) == {("p", 0): 0}
    # Answered once its metadata showed it: ZooKeeper has it already.
    state = c.partition_state("p", 0)[0]
    assert (state.leader, state.leader_epoch) == (3, epoch_before + 1)
    again = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition("p", 0)])
    assert elected(again) == {("p", 0): ErrorCode.ELECTION_NOT_NEEDED}
    # Every partition: those not needing one are left out of the answer; u's preferred
    # replica (2) is down.
    assert elected(a.elect_leaders(ElectionType.PREFERRED, None)) == {
        ("u", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }

    unclean = a.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("u", 0)])
    assert elected(unclean) == {("u", 0): 0}
    state = c.partition_state("u", 0)[0]
    assert (state.leader, state.isr) == (3, (3,))
    controller = c.controller()
    assert controller is not None
    rows = [
        r
        for r in c[controller[0]].state_changes("partition_state")
        if r["topic"] in ("p", "u") and r["reason"] in ("preferred", "unclean")
    ]
    assert [(r["topic"], r["reason"], r["leader"]) for r in rows] == [
        ("p", "preferred", 3),
        ("u", "unclean", 3),
    ]


def test_admin_client_describes_topic_and_broker_configs(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory((1, 2), log_retention_hours="1")
    a = admin(c)
    made = a.create_topics(
        [NewTopic("t", 1, 2, config={"segment.bytes": "1048576"})], operation_timeout=TIMEOUT_S
    )
    assert outcome(made) == {"t": 0}
    # CreateTopics waits for the answering broker's metadata only (as Kafka's), and a
    # topic's DescribeConfigs is answered from the asked broker's own metadata: librdkafka
    # may ask the other broker before its UpdateMetadata is applied.
    for b in (1, 2):
        wait_known(c, b, "t", 1)
    asked = [
        ConfigResource(ResourceType.TOPIC, "t"),
        ConfigResource(ResourceType.TOPIC, "absent"),
        ConfigResource(ResourceType.BROKER, "2"),
    ]
    futures = a.describe_configs(asked, request_timeout=TIMEOUT_S)
    topic = futures[asked[0]].result(timeout=TIMEOUT_S * 2)
    segment, retention = topic["segment.bytes"], topic["retention.ms"]
    assert (segment.value, segment.source) == ("1048576", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # The brokers' log.retention.hours=1, resolved as the topic's default; a default, as in
    # Kafka 2.8, which answers a static source only for log.retention.ms itself.
    assert (retention.value, retention.source) == ("3600000", ConfigSource.DEFAULT_CONFIG.value)
    assert topic["cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException) as absent:
        futures[asked[1]].result(timeout=TIMEOUT_S * 2)
    assert absent.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    broker = futures[asked[2]].result(timeout=TIMEOUT_S * 2)
    assert broker["broker.id"].value == "2"  # asked of broker 2 itself
    assert broker["log.retention.hours"].value == "1"
    assert broker["log.retention.hours"].is_read_only
    # The broker "": the cluster-wide dynamic defaults (Kafka 2.8's ConfigHelper), none
    # here; not the asked broker's static configs.
    with KafkaConnection("127.0.0.1", c[1].port()) as conn:
        defaults = conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            {
                "resources": [
                    {"resource_type": 4, "resource_name": "", "configuration_keys": None}
                ],
                "include_synonyms": False,
            },
        )
    assert [(r["error_code"], r["configs"]) for r in defaults["results"]] == [(0, [])]
    # A BROKER_LOGGER resource (8): the broker's own loggers and their levels, as Kafka
    # 2.8's Log4jController lists its loggers; another broker's id is INVALID_REQUEST.
    with KafkaConnection("127.0.0.1", c[1].port()) as conn:
        loggers = conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            1,
            {
                "resources": [
                    {"resource_type": 8, "resource_name": n, "configuration_keys": keys}
                    for n, keys in (("1", None), ("1", ["root"]), ("2", None))
                ],
                "include_synonyms": True,
            },
        )
    every, root, other = loggers["results"]
    assert [r["error_code"] for r in (every, root, other)] == [0, 0, ErrorCode.INVALID_REQUEST]
    levels = {row["name"]: (row["value"], row["config_source"]) for row in every["configs"]}
    assert "broker.server" in levels
    assert [(row["name"], row["config_source"]) for row in root["configs"]] == [("root", 6)]
    assert root["configs"][0]["value"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

    # DescribeCluster v0 (Kafka 2.8's; the Java admin's describeCluster), from any broker:
    # what its Metadata says of the cluster.
    controller, _ = c.wait_controller()
    cluster_id = c.zk.get(paths.CLUSTER_ID)
    assert cluster_id is not None
    for b in (1, 2):
        with KafkaConnection("127.0.0.1", c[b].port()) as conn:
            described = conn.request(ApiKey.DESCRIBE_CLUSTER, 0, {})
        assert described["error_code"] == 0
        assert described["cluster_id"] == json.loads(cluster_id[0])["id"]
        assert described["controller_id"] == controller
        assert sorted((x["broker_id"], x["port"]) for x in described["brokers"]) == [
            (1, c[1].port()),
            (2, c[2].port()),
        ]


def test_admin_requests_reach_the_new_controller_across_a_failover(
    cluster_factory: ClusterFactory,
) -> None:
    """The controller SIGKILLed just before a client's admin requests: its broker is gone
    (or, paused, answers nothing), the others answer NOT_CONTROLLER until one of them is
    elected, and the client's retries reach it. The topic is made once."""
    c = cluster_factory()
    before = c.wait_controller()
    old = before[0]
    survivors = [b for b in c.brokers if b != old]
    c.create_topic("p", {0: tuple(survivors)})  # led by its preferred replica throughout
    c.wait_topic_online("p")
    # librdkafka sends admin requests to the controller its metadata names, and looks
    # again only at its next metadata refresh (every 5 minutes by default).
    a = AdminClient(
        {
            "bootstrap.servers": ",".join(f"127.0.0.1:{c[b].port()}" for b in survivors),
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c[old].kill()
    made = a.create_topics([NewTopic("during", 3, 2)], operation_timeout=TIMEOUT_S)
    # Written once, whoever answered: created, or (a retry of a write whose answer was
    # lost) already there.
    assert outcome(made)["during"] in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
    after = c.wait_controller(not_id=old)
    assert after[1] > before[1]
    assert len(c.wait_topic_online("during", timeout=TIMEOUT_S)) == 3
    assert {len(r) for r in replicas(c, "during").values()} == {2}
    assert set().union(*replicas(c, "during").values()) <= set(survivors)
    # The new controller answers elections too: p's preferred replica leads already.
    results = elected(a.elect_leaders(ElectionType.PREFERRED, [TopicPartition("p", 0)]))
    assert results == {("p", 0): ErrorCode.ELECTION_NOT_NEEDED}


def reassignment_answer(answer: dict[str, Any]) -> dict[tuple[str, int], int]:
    assert answer["error_code"] == 0, answer
    return {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in answer["responses"]
        for p in t["partitions"]
    }


def listed(conn: KafkaConnection, topics: list[dict[str, Any]] | None) -> dict[Any, Any]:
    """ListPartitionReassignments: each partition being reassigned, with its full replica
    set and the replicas being added and removed."""
    answer = conn.request(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 10_000, "topics": topics}
    )
    assert answer["error_code"] == 0, answer
    return {
        (t["name"], p["partition_index"]): (
            tuple(p["replicas"]),
            tuple(p["adding_replicas"]),
            tuple(p["removing_replicas"]),
        )
        for t in answer["topics"]
        for p in t["partitions"]
    }


def alter(conn: KafkaConnection, asked: dict[tuple[str, int], Any]) -> dict[str, Any]:
    """AlterPartitionReassignments of each (topic, partition) to its replicas (None:
    cancel its reassignment)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, p), replicas in asked.items():
        topics.setdefault(name, []).append({"partition_index": p, "replicas": replicas})
    return conn.request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        {
            "timeout_ms": TIMEOUT_S * 1000,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
        },
    )


def test_reassignments_are_started_listed_and_cancelled_over_the_wire(
    cluster_factory: ClusterFactory,
) -> None:
    """AlterPartitionReassignments and ListPartitionReassignments (KIP-455, as Kafka 2.8's
    kafka-reassign-partitions.sh --bootstrap-server sends them), carried out by the
    controller: a reassignment started and completed; Kafka's refusals; one asked for in
    /admin/reassign_partitions listed, then cancelled by a client, which takes it out of
    the znode and puts the origin replicas back."""
    c = cluster_factory(brokers=(1, 2, 3, 4))
    ctl, _ = c.wait_controller()
    keep, new, down = [b for b in (1, 2, 3, 4) if b != ctl]
    c.create_topic("t", {0: (ctl, keep), 1: (ctl, keep), 2: (keep, ctl)})
    c.wait_topic_online("t")
    assert c[down].stop() == 0
    wait_for(lambda: down not in c.registered(), 30, f"broker {down} gone")

    with KafkaConnection("127.0.0.1", c[keep].port()) as conn:  # not the controller
        refused = alter(conn, {("t", 0): [ctl, keep, new]})
        assert (refused["error_code"], refused["responses"]) == (ErrorCode.NOT_CONTROLLER, [])
        answer = conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"topics": None})
        assert answer["error_code"] == ErrorCode.NOT_CONTROLLER

    with KafkaConnection("127.0.0.1", c[ctl].port()) as conn:
        answer = alter(
            conn,
            {
                ("t", 0): [ctl, keep, new],
                ("t", 1): [ctl, down],  # its new replica's broker is not alive
                ("t", 2): [keep, keep],
                ("t", 7): [ctl],
                ("nosuch", 0): None,  # nothing to cancel
            },
        )
        assert reassignment_answer(answer) == {
            ("t", 0): 0,
            ("t", 1): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            ("t", 2): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            ("t", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nosuch", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        }
        wait_for(
            lambda: (
                (a := c.assignment("t")) is not None
                and a.partitions[0] == (ctl, keep, new)
                and not a.adding_replicas
                and not a.removing_replicas
            ),
            60,
            "t-0's reassignment to complete",
        )
        # The refused: unchanged.
        assert {p: r for p, r in replicas(c, "t").items() if p} == {1: (ctl, keep), 2: (keep, ctl)}
        c.wait_partitions(
            "t", lambda s: set(s[0].isr) == {ctl, keep, new}, "t-0's ISR the target replicas"
        )
        assert listed(conn, None) == {}

        # Asked for through the znode, to a broker that is down (the znode's writer is not
        # checked): it waits for that broker, listed as in progress.
        c.zk.create(
            paths.REASSIGN_PARTITIONS,
            znodes.encode_reassignment({znodes.TopicPartition("t", 1): (ctl, down)}),
        )
        wait_for(
            lambda: (a := c.assignment("t")) is not None and a.adding_replicas == {1: (down,)},
            30,
            "t-1's reassignment started",
        )
        in_progress = {("t", 1): ((ctl, down, keep), (down,), (keep,))}
        assert listed(conn, None) == in_progress
        assert listed(conn, [{"name": "t", "partition_indexes": [0, 1, 2]}]) == in_progress
        assert listed(conn, [{"name": "t", "partition_indexes": [0]}]) == {}

        # Cancelled by a client: back to its origin replicas, and out of the znode.
        assert reassignment_answer(alter(conn, {("t", 1): None})) == {("t", 1): 0}
        wait_for(
            lambda: (
                (a := c.assignment("t")) is not None
                and a.partitions[1] == (ctl, keep)
                and not a.adding_replicas
                and not a.removing_replicas
                and not exists(c, paths.REASSIGN_PARTITIONS)
            ),
            30,
            "t-1's reassignment cancelled",
        )
        assert listed(conn, None) == {}
        cancel_again = alter(conn, {("t", 1): None})
        assert reassignment_answer(cancel_again) == {
            ("t", 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        }
    rows = c[ctl].state_changes("partition_state")
    assert {r["partition"] for r in rows if r["topic"] == "t" and r["reason"] == "reassign"} == {
        0,
        1,
    }
    assert "invalid replica state transition" not in c[ctl].output()
    assert all(c[b].alive() for b in (1, 2, 3, 4) if b != down)


def exists(c: Cluster, path: str) -> bool:
    return c.zk.exists(path) is not None


def zkctl_wire(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`zkctl reassign --bootstrap-server <the live brokers> ...`."""
    return zkctl("reassign", "--bootstrap-server", bootstrap(c), *args)


def test_zkctl_reassign_over_the_wire_starts_verifies_lists_and_cancels(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """`zkctl reassign --bootstrap-server`, as kafka-reassign-partitions.sh
    --bootstrap-server: every mode through the controller, none through ZooKeeper."""
    c = cluster_factory()
    ctl, _ = c.wait_controller()
    a, b = [x for x in (1, 2, 3) if x != ctl]
    c.create_topic("t", {0: (ctl, a), 1: (ctl, a)})
    c.wait_topic_online("t")

    t0 = ("--topic", "t", "--partition", "0")
    started = zkctl_wire(c, *t0, "--replicas", f"{a},{b}", "--execute")
    assert started.returncode == 0, started.stderr
    assert "Successfully started partition reassignment for t-0" in started.stdout
    rollback = started.stdout.split("Current partition replica assignment")[1].split("Save")[0]
    assert json.loads(rollback) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [ctl, a], "log_dirs": ["any", "any"]}
        ],
    }
    wait_for(
        lambda: (x := c.assignment("t")) is not None and x.partitions[0] == (a, b),
        60,
        "t-0 moved",
    )
    verify = zkctl_wire(c, *t0, "--replicas", f"{a},{b}", "--verify")
    assert "Reassignment of partition t-0 is complete." in verify.stdout, verify.stdout
    nothing = zkctl_wire(c, "--list")
    assert nothing.stdout.strip() == "No partition reassignments found.", nothing.stdout

    # One in progress (asked for through the znode, its new replica's broker down).
    assert c[b].stop() == 0
    wait_for(lambda: b not in c.registered(), 30, f"broker {b} gone")
    c.zk.create(
        paths.REASSIGN_PARTITIONS,
        znodes.encode_reassignment({znodes.TopicPartition("t", 1): (ctl, b)}),
    )
    wait_for(
        lambda: (x := c.assignment("t")) is not None and x.adding_replicas == {1: (b,)},
        30,
        "t-1's reassignment started",
    )
    listing = zkctl_wire(c, "--list")
    assert listing.returncode == 0, listing.stderr
    assert f"t-1: replicas: {ctl},{b},{a}. adding: {b}. removing: {a}.\n" in listing.stdout
    as_json = json.loads(zkctl_wire(c, "--list", "--json").stdout)
    assert as_json == {
        "reassignments": [
            {"topic": "t", "partition": 1, "replicas": [ctl, b, a], "adding": [b], "removing": [a]}
        ]
    }
    t1 = ("--topic", "t", "--partition", "1", "--replicas", f"{ctl},{b}")
    pending = zkctl_wire(c, *t1, "--verify")
    assert "Reassignment of partition t-1 is still in progress" in pending.stdout, pending.stdout
    # Another reassignment is refused while one is in progress, unless --additional; a
    # target naming a broker the cluster does not have starts nothing, the good ones
    # beside it neither (Kafka's verifyBrokerIds), exit code 1.
    held = zkctl_wire(c, *t0, "--replicas", f"{ctl},{a}", "--execute")
    assert held.returncode == 1
    assert "Cannot execute because there are reassignments in progress (t-1)" in held.stderr
    mixed = {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [a, ctl]},
            {"topic": "t", "partition": 1, "replicas": [a, 9]},
        ],
    }
    mixed_file = tmp_path / "mixed.json"
    mixed_file.write_text(json.dumps(mixed))
    refused = zkctl_wire(
        c, "--reassignment-json-file", str(mixed_file), "--execute", "--additional"
    )
    assert refused.returncode == 1
    assert "Unknown broker id 9" in refused.stderr, refused.stderr
    assert "Successfully started" not in refused.stdout
    assert replicas(c, "t")[0] == (a, b)

    cancelled = zkctl_wire(c, "--topic", "t", "--partition", "1", "--cancel")  # no replicas
    assert cancelled.returncode == 0, cancelled.stderr
    assert "Successfully cancelled partition reassignment for: t-1" in cancelled.stdout
    wait_for(
        lambda: (
            (x := c.assignment("t")) is not None
            and x.partitions[1] == (ctl, a)
            and not x.adding_replicas
            and not exists(c, paths.REASSIGN_PARTITIONS)
        ),
        30,
        "t-1 back on its replicas",
    )
    again = zkctl_wire(c, *t1, "--cancel")
    assert "None of the specified partition reassignments are active." in again.stdout

    # Bad arguments: exit code 2, nothing asked.
    for args, message in [
        (("--list",), "--list needs --bootstrap-server"),
        (("--cancel", *t1), "--cancel needs --bootstrap-server"),
    ]:
        proc = zkctl("reassign", *args)
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr
    proc = zkctl("reassign", "--bootstrap-server", "nohost", "--list")
    assert proc.returncode == 2, proc.stderr
    assert "is not host:port" in proc.stderr

    # The controller SIGKILLed just before: Metadata names it until a new one is elected;
    # the command asks again (connection refused, then NOT_CONTROLLER) until one answers.
    c[b].start()
    c.wait_registered([b])
    c[ctl].kill()
    after_failover = zkctl_wire(c, "--list")
    assert after_failover.returncode == 0, after_failover.stderr
    assert after_failover.stdout.strip() == "No partition reassignments found."
    assert c.wait_controller(not_id=ctl)[0] != ctl


def test_zkctl_reassign_generates_a_proposal_that_executes(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """`zkctl reassign --generate`, as kafka-reassign-partitions.sh --generate: a topic's
    current assignment and one over --broker-list, read from ZooKeeper or from the brokers'
    Metadata, the same either way; the proposal saved and --execute'd moves the topic."""
    c = cluster_factory()
    c.wait_controller()
    c.create_topic("t", {p: (1, 2) for p in range(4)})
    c.wait_topic_online("t")
    topics_file = tmp_path / "topics.json"
    topics_file.write_text('{"topics":[{"topic":"t"}],"version":1}')
    generate = ("--generate", "--topics-to-move-json-file", str(topics_file))

    def zk(*args: str) -> subprocess.CompletedProcess[str]:
        return zkctl("--zookeeper", c.zk_connect, "reassign", *args)

    text = zk(*generate, "--broker-list", "2,3,9")
    assert text.returncode == 0, text.stderr
    assert "broker(s) 9 not registered: the proposal leaves them out" in text.stderr
    current, proposed = text.stdout.split("Proposed partition reassignment configuration")
    assert current.startswith("Current partition replica assignment")
    assert json.loads(current.split("\n", 1)[1]) == json.loads(
        reassign.format_reassignment_json({znodes.TopicPartition("t", p): (1, 2) for p in range(4)})
    )
    moved = reassign.parse_reassignment_json(proposed)
    assert sorted(moved) == [znodes.TopicPartition("t", p) for p in range(4)]
    assert all(len(r) == 2 and set(r) == {2, 3} for r in moved.values())
    over_zk = json.loads(zk(*generate, "--broker-list", "2,3", "--json").stdout)
    over_wire = json.loads(zkctl_wire(c, *generate, "--broker-list", "2,3", "--json").stdout)
    assert over_zk["current"] == over_wire["current"]
    assert over_wire["proposed"]["partitions"][0]["topic"] == "t"

    nosuch = tmp_path / "nosuch.json"
    nosuch.write_text('{"topics":[{"topic":"t"},{"topic":"nosuch"}]}')
    for run in (zk, lambda *a: zkctl_wire(c, *a)):
        missing = run("--generate", "--topics-to-move-json-file", str(nosuch), "--broker-list", "2")
        assert missing.returncode == 1
        assert "topic(s) not found: nosuch" in missing.stderr, missing.stderr
    too_few = zk(*generate, "--broker-list", "3")
    assert too_few.returncode == 1
    assert "Replication factor: 2 larger than available brokers: 1" in too_few.stderr

    plan = tmp_path / "plan.json"
    plan.write_text(proposed)
    started = zk("--reassignment-json-file", str(plan), "--execute")
    assert started.returncode == 0, started.stderr
    wait_for(
        lambda: (
            (x := c.assignment("t")) is not None
            and {znodes.TopicPartition("t", p): r for p, r in x.partitions.items()} == moved
            and not x.adding_replicas
        ),
        60,
        "t moved onto brokers 2 and 3",
    )


def test_a_clients_reassignment_in_progress_survives_a_controller_failover(
    cluster_factory: ClusterFactory,
) -> None:
    """A reassignment asked for over the wire lives only in the topic znode (adding and
    removing replicas): its new replica's broker paused (alive to the controller until
    its session expires) so that it cannot catch up, the controller SIGKILLed; the next
    controller lists it as in progress and completes it once the broker is back."""
    c = cluster_factory(brokers=(1, 2, 3, 4))
    ctl, epoch = c.wait_controller()
    keep, other, new = [b for b in (1, 2, 3, 4) if b != ctl]
    c.create_topic("t", {0: (keep, other)})
    c.wait_topic_online("t")
    c[new].pause()
    try:
        with KafkaConnection("127.0.0.1", c[ctl].port()) as conn:
            answer = alter(conn, {("t", 0): [keep, other, new]})
        assert reassignment_answer(answer) == {("t", 0): 0}
        assert not exists(c, paths.REASSIGN_PARTITIONS)  # not a znode request
        wait_for(
            lambda: (a := c.assignment("t")) is not None and a.adding_replicas == {0: (new,)},
            30,
            "the reassignment started",
        )
        c[ctl].kill()
        successor, new_epoch = c.wait_controller(not_id=ctl, timeout=c.session_timeout_s + 30)
        assert new_epoch > epoch
        assert successor != new
        with KafkaConnection("127.0.0.1", c[successor].port()) as conn:
            moving = listed(conn, None)
        assert moving == {("t", 0): ((keep, other, new), (new,), ())}
    finally:
        c[new].resume()
    wait_for(
        lambda: (
            (a := c.assignment("t")) is not None
            and a.partitions == {0: (keep, other, new)}
            and not a.adding_replicas
        ),
        60,
        "the reassignment completed by the next controller",
    )
    c.wait_partitions("t", lambda s: set(s[0].isr) == {keep, other, new}, "the ISR the target")
    rows = c[successor].state_changes("partition_state")
    assert any(r["topic"] == "t" and r["reason"] == "reassign" for r in rows)


def test_delete_topics_deletes_the_offsets_topic_and_its_groups_go_with_it(
    cluster_factory: ClusterFactory,
) -> None:
    """Kafka 2.8's DeleteTopics deletes an internal topic as any other (only its
    TopicCommand refuses, as `zkctl topic delete` does): the controller deletes
    __consumer_offsets, each coordinator unloads its groups on the StopReplica, and the
    next FindCoordinator makes the topic again, empty, its groups coordinated anew."""
    c = cluster_factory(
        (1, 2),
        group_initial_rebalance_delay_ms="0",
        offsets_topic_num_partitions="2",
        offsets_topic_replication_factor="2",
    )
    c.wait_controller()
    c.create_topic("t", {0: (1, 2)})
    c.wait_topic_online("t")

    def coordinator() -> int:
        def found() -> int | None:
            with KafkaConnection("127.0.0.1", c[1].port()) as conn:
                got = conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            if got["error_code"] != ErrorCode.NONE:
                return None
            # Named before it may answer as the coordinator (see coordinates).
            return int(got["node_id"]) if coordinates(c, "g", int(got["node_id"])) else None

        return wait_for(found, 60, "group g's coordinator")

    def commit(offset: int) -> None:
        def committed() -> bool:
            with KafkaConnection("127.0.0.1", c[coordinator()].port()) as conn:
                body = {
                    "group_id": "g",
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "topics": [
                        {
                            "name": "t",
                            "partitions": [{"partition_index": 0, "committed_offset": offset}],
                        }
                    ],
                }
                got = conn.request(ApiKey.OFFSET_COMMIT, 7, body)
            error_code: int = got["topics"][0]["partitions"][0]["error_code"]
            return error_code == ErrorCode.NONE

        wait_for(committed, 60, f"group g's commit of offset {offset}")

    def fetched() -> int:
        with KafkaConnection("127.0.0.1", c[coordinator()].port()) as conn:
            body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
            got = conn.request(ApiKey.OFFSET_FETCH, 7, body)
        assert got["error_code"] == ErrorCode.NONE
        return int(got["topics"][0]["partitions"][0]["committed_offset"])

    commit(5)
    assert fetched() == 5
    controller, _ = c.wait_controller()
    with KafkaConnection("127.0.0.1", c[controller].port()) as conn:
        wait_for(lambda: in_metadata(conn, "__consumer_offsets"), 30, "the offsets topic listed")
        gone = conn.request(
            ApiKey.DELETE_TOPICS,
            4,
            {"topic_names": ["__consumer_offsets"], "timeout_ms": TIMEOUT_S * 1000},
        )
    assert [(r["error_code"], r["error_message"]) for r in gone["responses"]] == [(0, None)]
    wait_for(
        lambda: c.zk.exists(paths.topic("__consumer_offsets")) is None or None,
        60,
        "__consumer_offsets deleted",
    )
    # Made again at the next FindCoordinator, empty: the old commit went with the log.
    wait_for(lambda: fetched() == -1 or None, 60, "group g's offsets coordinated anew")
    commit(7)
    assert fetched() == 7
    assert all(b.alive() for b in c.brokers.values())
