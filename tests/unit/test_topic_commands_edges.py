"""`zkctl topic` against an in-memory tree: describe's report flags, its lines field for
field and its JSON, and the create/delete/add-partitions messages, as Kafka 2.8's
kafka-topics.sh --zookeeper (TopicCommand's ZookeeperTopicService) prints them."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.unit.test_cli_args import TreeZk, run, tree_with_topic
from zkctl import topic_commands
from zkdata import paths
from zkdata.znodes import LeaderAndIsr, TopicAssignment, encode_partition_state, encode_topic

DESCRIBE = ("--zookeeper", "127.0.0.1:2181", "topic", "describe")


def on_tree(monkeypatch: pytest.MonkeyPatch, zk: TreeZk) -> None:
    """zkctl's topic commands talk to ``zk`` instead of connecting to ZooKeeper."""
    zk.put("/admin", b"")  # the fake's create does not make parents

    @contextlib.contextmanager
    def session(args: argparse.Namespace) -> Iterator[TreeZk]:
        yield zk

    monkeypatch.setattr(topic_commands, "zk_session", session)


def put_state(zk: TreeZk, topic: str, partition: int, leader: int, isr: tuple[int, ...]) -> None:
    zk.put(
        paths.partition_state(topic, partition),
        encode_partition_state(LeaderAndIsr(leader, 4, isr), 2),
    )


def put_topic(zk: TreeZk, assignment: TopicAssignment) -> None:
    zk.put(paths.topic(assignment.topic), encode_topic(assignment))


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> TreeZk:
    """Brokers 1 and 2 live (3 is not). Topic "a": partition 0 healthy, 1 under-replicated
    with a live leader, 2 led by the dead broker 3 with a full ISR, 3 without a state
    znode (no leader, no ISR). Topic "b": healthy, with config overrides (written out of
    order). Topic "c": healthy, marked for deletion. Topic "__consumer_offsets": healthy."""
    zk = tree_with_topic("a", {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3]}, (1, 2))
    put_state(zk, "a", 0, 1, (1, 2))
    put_state(zk, "a", 1, 2, (2,))
    put_state(zk, "a", 2, 3, (3, 1))
    put_topic(zk, TopicAssignment("b", {0: (2, 1)}))
    put_state(zk, "b", 0, 2, (2, 1))
    zk.put(
        paths.topic_config("b"),
        b'{"version":1,"config":{"segment.ms":"9000","cleanup.policy":"compact"}}',
    )
    put_topic(zk, TopicAssignment("c", {0: (1,)}))
    put_state(zk, "c", 0, 1, (1,))
    zk.put(paths.delete_topic("c"), b"")
    put_topic(zk, TopicAssignment("__consumer_offsets", {0: (1,)}))
    put_state(zk, "__consumer_offsets", 0, 1, (1,))
    on_tree(monkeypatch, zk)
    return zk


def describe(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code, out, err = run([*DESCRIBE, *argv], capsys)
    assert code == 0, err
    return out.splitlines()


def describe_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run([*DESCRIBE, *argv, "--json"], capsys)
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def shown(doc: dict[str, Any]) -> dict[str, list[int]]:
    """The topics of a describe --json and the partitions listed under each."""
    return {t["name"]: [p["partition"] for p in t["partitions"]] for t in doc["topics"]}


A1 = "\tTopic: a\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2"
A2 = "\tTopic: a\tPartition: 2\tLeader: 3\tReplicas: 3,1\tIsr: 3,1"
A3 = "\tTopic: a\tPartition: 3\tLeader: none\tReplicas: 1,3\tIsr: \t(no state znode yet)"


def test_under_replicated_partitions_are_those_whose_isr_is_short_without_headers(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """DescribeOptions: no topic line with a partition report; shouldPrintPartition keeps
    a partition whose ISR is smaller than its replicas (a dead leader with a full ISR is
    not under-replicated), a topic without one prints nothing."""
    assert describe(capsys, "--under-replicated-partitions") == [A1, A3]
    assert shown(describe_json(capsys, "--under-replicated-partitions")) == {"a": [1, 3]}


def test_unavailable_partitions_are_those_without_a_live_leader(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """hasUnavailablePartitions: no leader, or a leader not among the live brokers (an
    under-replicated partition with a live leader is available)."""
    assert describe(capsys, "--unavailable-partitions") == [A2, A3]
    assert shown(describe_json(capsys, "--unavailable-partitions")) == {"a": [2, 3]}


def test_a_partition_report_of_a_healthy_topic_prints_nothing(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    for flag in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert describe(capsys, "--topic", "b", flag) == []
        doc = describe_json(capsys, "--topic", "b", flag)
        assert doc["topics"] == []


def test_without_a_report_flag_every_topic_and_partition_is_described(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """The topic line (configs in key order, MarkedForDeletion last), then each partition's
    line (MarkedForDeletion on those too); --json lists every topic, healthy ones too."""
    lines = describe(capsys)
    assert lines == [
        "Topic: __consumer_offsets\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: ",
        "\tTopic: __consumer_offsets\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1",
        "Topic: a\tPartitionCount: 4\tReplicationFactor: 2\tConfigs: ",
        "\tTopic: a\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        A1,
        A2,
        A3,
        "Topic: b\tPartitionCount: 1\tReplicationFactor: 2"
        "\tConfigs: cleanup.policy=compact,segment.ms=9000",
        "\tTopic: b\tPartition: 0\tLeader: 2\tReplicas: 2,1\tIsr: 2,1",
        "Topic: c\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \tMarkedForDeletion: true",
        "\tTopic: c\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tMarkedForDeletion: true",
    ]
    assert shown(describe_json(capsys)) == {
        "__consumer_offsets": [0],
        "a": [0, 1, 2, 3],
        "b": [0],
        "c": [0],
    }


def test_topics_with_overrides_prints_their_topic_lines_alone(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """--topics-with-overrides: describePartitions is off, and only topics with configs."""
    assert describe(capsys, "--topics-with-overrides") == [
        "Topic: b\tPartitionCount: 1\tReplicationFactor: 2"
        "\tConfigs: cleanup.policy=compact,segment.ms=9000"
    ]
    doc = describe_json(capsys, "--topics-with-overrides")
    assert shown(doc) == {"b": []}
    assert doc["topics"][0]["partition_count"] == 1


def test_exclude_internal_leaves_internal_topics_out(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not any("__consumer_offsets" in line for line in describe(capsys, "--exclude-internal"))
    assert "__consumer_offsets" not in shown(describe_json(capsys, "--exclude-internal"))
    # Named with --if-exists, an internal topic is skipped as one that does not exist.
    lines = describe(
        capsys, "--exclude-internal", "--if-exists", "--topic", "__consumer_offsets", "--topic", "b"
    )
    assert [line.split("\t")[0] for line in lines] == ["Topic: b", ""]


def test_describe_if_exists_skips_the_topics_that_do_not_exist(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """ensureTopicExists(topics, opts.topic, !opts.ifExists): the others are described."""
    lines = describe(capsys, "--if-exists", "--topic", "nope", "--topic", "b")
    assert [line.split("\t")[0] for line in lines] == ["Topic: b", ""]
    assert shown(describe_json(capsys, "--if-exists", "--topic", "nope")) == {}
    code, out, err = run([*DESCRIBE, "--topic", "nope", "--topic", "b"], capsys)
    assert (code, out) == (1, "")
    assert "'nope' do not exist" in err


def test_report_flags_are_one_at_a_time(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's checkArgs: the report options exclude one another."""
    code, out, err = run(
        [*DESCRIBE, "--under-replicated-partitions", "--unavailable-partitions"], capsys
    )
    assert (code, out) == (2, "")
    assert "not allowed with argument" in err
    for flag in ("--under-min-isr-partitions", "--at-min-isr-partitions"):
        code, out, err = run([*DESCRIBE, flag], capsys)
        assert (code, out) == (2, "")
        assert f"{flag} needs the brokers' configuration" in err


def test_a_reassigned_partition_shows_its_adding_and_removing_replicas(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PartitionDescription.printDescription given a reassignment (as Kafka 2.8's
    --bootstrap-server describe prints it; its --zookeeper mode passes none): Adding
    Replicas, then Removing Replicas, after Isr."""
    zk = tree_with_topic("r", {0: [1]}, (1, 2, 3))
    put_topic(
        zk,
        TopicAssignment(
            "r", {0: (3, 2, 1)}, adding_replicas={0: (3,)}, removing_replicas={0: (1,)}
        ),
    )
    put_state(zk, "r", 0, 2, (2, 1))
    on_tree(monkeypatch, zk)
    assert describe(capsys)[1] == (
        "\tTopic: r\tPartition: 0\tLeader: 2\tReplicas: 3,2,1\tIsr: 2,1"
        "\tAdding Replicas: 3\tRemoving Replicas: 1"
    )


def test_a_malformed_config_znode_is_named_on_the_topic_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    zk = tree_with_topic("m", {0: [1]}, (1,))
    put_state(zk, "m", 0, 1, (1,))
    zk.put(paths.topic_config("m"), b"[1]")
    on_tree(monkeypatch, zk)
    code, out, err = run([*DESCRIBE], capsys)
    assert code == 0
    header = out.splitlines()[0]
    assert header.startswith("Topic: m\tPartitionCount: 1\tReplicationFactor: 1")
    assert "\tConfigs: (malformed config znode: " in header
    assert f"malformed data in znode {paths.topic_config('m')}" in err


# --- create, delete, list, add-partitions ---------------------------------------------------

TOPIC = ("--zookeeper", "127.0.0.1:2181", "topic")


def register(zk: TreeZk, broker_id: int, rack: str | None = None) -> None:
    registration: dict[str, Any] = {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://127.0.0.1:{9000 + broker_id}"],
        "jmx_port": -1,
        "host": "127.0.0.1",
        "timestamp": "1",
        "port": 9000 + broker_id,
        "version": 5,
    }
    if rack is not None:
        registration["rack"] = rack
    zk.put(paths.broker(broker_id), json.dumps(registration).encode())


@pytest.fixture
def tree(monkeypatch: pytest.MonkeyPatch) -> TreeZk:
    """Topic "t" (partition 0 on brokers 1, 2) on brokers 1, 2 and 3."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    return zk


def test_create_says_created_or_that_the_topic_exists(
    tree: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    create = [*TOPIC, "create", "--partitions", "1", "--replication-factor", "2"]
    code, out, err = run([*create, "--topic", "new"], capsys)
    assert (code, out, err) == (0, "Created topic new.\n", "")
    code, out, err = run([*create, "--topic", "t", "--if-not-exists"], capsys)
    assert (code, out, err) == (0, "Topic t already exists; nothing done (--if-not-exists).\n", "")
    code, out, err = run([*create, "--topic", "t"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("zkctl: error: topic 't' already exists")


def test_create_prints_the_collision_warning_and_the_malformed_znodes_met(
    tree: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """TopicCommand warns of a name with '.' or '_' (metric names collide); a broker
    registration that cannot be read is named on stderr, the topic created all the same."""
    tree.put(f"{paths.BROKER_IDS}/abc", b"")
    argv = [*TOPIC, "create", "--topic", "my_topic", "--partitions", "1"]
    code, out, err = run([*argv, "--replication-factor", "1"], capsys)
    assert (code, out) == (0, "Created topic my_topic.\n")
    assert "zkctl: warning: Due to limitations in metric names" in err
    assert f"zkctl: warning: malformed data in znode {paths.BROKER_IDS}/abc" in err


def test_disable_rack_aware_assigns_without_the_racks_some_brokers_lack(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's RackAwareMode.Enforced refuses brokers of which only some have a rack;
    --disable-rack-aware (create and --alter --partitions) assigns without racks."""
    zk = tree_with_topic("t", {0: [1, 2]}, ())
    register(zk, 1, "r1")
    register(zk, 2)
    on_tree(monkeypatch, zk)
    create = [*TOPIC, "create", "--topic", "u", "--partitions", "2", "--replication-factor", "2"]
    grow = [*TOPIC, "add-partitions", "--topic", "t", "--partitions", "2"]
    for argv in (create, grow):
        code, out, err = run(argv, capsys)
        assert (code, out) == (1, "")
        assert "Not all brokers have rack information" in err
        code, out, err = run([*argv, "--disable-rack-aware"], capsys)
        assert code == 0, err
    assert paths.topic("u") in zk.nodes


def test_add_partitions_lists_the_new_partitions_in_order(
    tree: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*TOPIC, "add-partitions", "--topic", "t", "--partitions", "3"]
    code, out, err = run([*argv, "--replica-assignment", "1:2,2:3,3:1"], capsys)
    assert code == 0
    assert out == "Adding partitions succeeded! Topic t: new partitions 1:2,3 2:3,1\n"
    assert "zkctl: warning: If partitions are increased for a topic that has a key" in err


def test_delete_says_marked_then_already_marked_and_if_exists_does_nothing(
    tree: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    """ZookeeperTopicService.deleteTopic's lines: marked (with the delete.topic.enable
    note), already marked (NodeExists); ensureTopicExists(..., !ifExists)."""
    tree.put(paths.DELETE_TOPICS, b"")  # the fake's create does not make parents
    delete = [*TOPIC, "delete", "--topic"]
    code, out, err = run([*delete, "t"], capsys)
    assert (code, err) == (0, "")
    assert out == (
        "Topic t is marked for deletion.\n"
        "Note: This will have no impact if delete.topic.enable is not set to true.\n"
    )
    code, out, err = run([*delete, "t"], capsys)
    assert (code, out, err) == (0, "Topic t is already marked for deletion.\n", "")
    code, out, err = run([*delete, "nope", "--if-exists"], capsys)
    assert (code, out, err) == (0, "Topic nope does not exist; nothing done (--if-exists).\n", "")
    code, out, err = run([*delete, "nope"], capsys)
    assert (code, out) == (1, "")
    assert "'nope' does not exist" in err


def test_list_marks_the_topics_marked_for_deletion(
    cluster: TreeZk, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run([*TOPIC, "list"], capsys)
    assert (code, out) == (0, "__consumer_offsets\na\nb\nc - marked for deletion\n")
    code, out, _ = run([*TOPIC, "list", "--exclude-internal", "--json"], capsys)
    assert json.loads(out) == {
        "topics": [
            {"name": "a", "marked_for_deletion": False},
            {"name": "b", "marked_for_deletion": False},
            {"name": "c", "marked_for_deletion": True},
        ]
    }
