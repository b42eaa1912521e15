"""`zkctl elect-leaders --preferred`'s checks: its JSON file as Kafka's preferred election
tools read it (a partition is a JSON integer, not a boolean; a topic a legal topic name),
its --partition's range, topics malformed or being deleted, an election in progress."""

from __future__ import annotations

import pytest

from admin import elect
from admin.errors import AdminError, InvalidArgumentError
from tests.unit.test_cli_args import tree_with_topic
from zkdata import paths
from zkdata.znodes import TopicAssignment, TopicPartition, encode_partition_list


@pytest.mark.parametrize("partition", ["true", "false", "1.0", '"1"', "-1"])
def test_a_partition_is_a_json_integer_from_0(partition: str) -> None:
    text = f'{{"partitions":[{{"topic":"t","partition":{partition}}}]}}'
    with pytest.raises(InvalidArgumentError, match="an integer 'partition' from 0"):
        elect.parse_election_json(text, "f.json")


@pytest.mark.parametrize(
    ("topic", "problem"),
    [
        ("t t", "illegal characters"),
        ("..", "cannot be"),
        ("", "must not be empty"),
        ("x" * 250, "at most 249 characters"),
    ],
)
def test_a_partition_names_a_legal_topic(topic: str, problem: str) -> None:
    text = f'{{"partitions":[{{"topic":"{topic}","partition":0}}]}}'
    with pytest.raises(InvalidArgumentError, match=rf"^f\.json: .*{problem}"):
        elect.parse_election_json(text, "f.json")


def test_a_valid_file_keeps_its_order() -> None:
    text = '{"partitions":[{"topic":"b.c","partition":2},{"topic":"a","partition":0}]}'
    assert elect.parse_election_json(text) == [TopicPartition("b.c", 2), TopicPartition("a", 0)]


def test_a_partition_option_is_from_0_to_a_java_ints_maximum() -> None:
    assert elect.parse_scope(topic="t", partition=0).partition == 0
    assert elect.parse_scope(topic="t", partition=2**31 - 1).partition == 2**31 - 1
    for bad in (-1, 2**31):
        with pytest.raises(InvalidArgumentError, match="--partition must be from 0 to"):
            elect.parse_scope(topic="t", partition=bad)


TOPICS = {
    "t": TopicAssignment("t", {0: (1, 2), 1: (2, 1)}),
    "d": TopicAssignment("d", {0: (1, 2)}),
}


def test_a_topic_whose_znode_is_malformed_is_not_called_missing() -> None:
    with pytest.raises(AdminError, match=r"^topic 'bad' has a malformed znode$"):
        elect.resolve_scope(elect.parse_scope(topic="bad"), TOPICS, [], {"bad"})
    with pytest.raises(AdminError, match=r"^topic 'gone' does not exist$"):
        elect.resolve_scope(elect.parse_scope(topic="gone"), TOPICS, [], {"bad"})


@pytest.mark.parametrize(
    "scope",
    [
        elect.parse_scope(topic="d"),
        elect.parse_scope(topic="d", partition=0),
        elect.parse_scope(partitions=[TopicPartition("t", 1), TopicPartition("d", 0)]),
    ],
    ids=["topic", "partition", "json"],
)
def test_a_topic_being_deleted_is_refused_by_name(scope: elect.ElectionScope) -> None:
    """The controller would skip its partitions (Kafka's onPreferredReplicaElection: "the
    respective topics are being deleted"): refused up front, naming it. Every partition
    (--all-topic-partitions) leaves such topics out instead."""
    with pytest.raises(AdminError, match=r"^topic\(s\) marked for deletion: d$"):
        elect.resolve_scope(scope, TOPICS, ["d"])
    assert elect.resolve_scope(scope, TOPICS, [])


def test_an_election_in_progress_is_reported_before_the_scope_is_checked() -> None:
    """Kafka 2.8's tool fails on the existing znode whatever the partitions named; the
    pending election is left as it is."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2))
    zk.put("/admin", b"")
    pending = encode_partition_list([TopicPartition("t", 0)])
    zk.put(paths.PREFERRED_REPLICA_ELECTION, pending)
    for scope in (elect.parse_scope(topic="gone"), elect.parse_scope(topic="t", partition=5)):
        with pytest.raises(AdminError, match="already in progress") as info:
            elect.start_preferred_election(zk, scope)  # type: ignore[arg-type]
        assert f"({paths.PREFERRED_REPLICA_ELECTION} exists)" in str(info.value)
        assert zk.nodes[paths.PREFERRED_REPLICA_ELECTION][0] == pending


def test_an_election_bigger_than_a_znode_is_refused_before_anything_is_written() -> None:
    """More partitions than one znode holds (ZooKeeper's jute.maxbuffer): refused, with
    the way round it, rather than sent and lost with the connection ZooKeeper drops."""
    name = "x" * 200
    zk = tree_with_topic(name, {p: [1] for p in range(6_000)}, (1,))
    zk.put("/admin", b"")
    with pytest.raises(AdminError, match=r"do not fit in one election znode .*topic by topic"):
        elect.start_preferred_election(zk, elect.parse_scope(topic=name))  # type: ignore[arg-type]
    assert paths.PREFERRED_REPLICA_ELECTION not in zk.nodes
    one = elect.start_preferred_election(zk, elect.parse_scope(topic=name, partition=7))  # type: ignore[arg-type]
    assert one.partitions == [TopicPartition(name, 7)]
    assert paths.PREFERRED_REPLICA_ELECTION in zk.nodes


def test_partitions_are_elected_in_topic_and_partition_order() -> None:
    """Whatever order the topic znodes list them in (a znode written by another tool need
    not list its partitions in order), the znode and the report are in order."""
    shuffled = {
        "b": TopicAssignment("b", {2: (1,), 0: (1,), 1: (1,)}),
        "a": TopicAssignment("a", {1: (1,), 0: (1,)}),
    }
    everything = elect.resolve_scope(elect.parse_scope(all_partitions=True), shuffled, [])
    assert everything == [
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 0),
        TopicPartition("b", 1),
        TopicPartition("b", 2),
    ]
    one = elect.resolve_scope(elect.parse_scope(topic="b"), shuffled, [])
    assert one == [TopicPartition("b", p) for p in range(3)]


@pytest.mark.parametrize(
    "entry", ['{"topic":5,"partition":0}', '{"partition":0}', '{"topic":null,"partition":0}', "7"]
)
def test_an_entry_needs_a_string_topic(entry: str) -> None:
    with pytest.raises(InvalidArgumentError, match="needs a string 'topic'"):
        elect.parse_election_json(f'{{"partitions":[{entry}]}}', "f.json")
