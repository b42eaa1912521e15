"""`zkctl topic`'s checks at their limits, and what `topic list` and `topic describe` make of
what they read: the bounds of a create request (a partition count a znode holds, a
replication factor that is a Java short, broker ids from 0), a growth that is no growth,
internal topics left out of a listing, and a partition's leader, replication factor and
under-replication while a reassignment adds replicas."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kazoo.protocol.states import ZnodeStat

from admin import metadata, topics
from admin.errors import (
    AdminError,
    ConcurrentChangeError,
    InvalidArgumentError,
    PartitionCountError,
    ReassignmentInProgressError,
    UnknownTopicError,
)
from controller.assignment import BrokerMetadata
from tests.unit.test_cli_args import TreeZk, tree_with_topic
from zkdata import paths
from zkdata.znodes import (
    LeaderAndIsr,
    PartitionState,
    TopicAssignment,
    decode_topic_config,
    encode_topic,
    encode_topic_config,
)


def test_a_create_request_takes_partitions_up_to_what_a_znode_holds() -> None:
    most = topics.parse_create_request("t", partitions=topics.MAX_PARTITIONS, replication_factor=1)
    assert most.partitions == topics.MAX_PARTITIONS
    with pytest.raises(InvalidArgumentError, match=f"at most {topics.MAX_PARTITIONS} partitions"):
        topics.parse_create_request("t", partitions=topics.MAX_PARTITIONS + 1, replication_factor=1)


def test_a_create_request_takes_a_replication_factor_that_is_a_java_short() -> None:
    """CreateTopics carries the replication factor as an INT16: 32767 at most."""
    assert topics.MAX_REPLICATION_FACTOR == 32767
    most = topics.parse_create_request("t", partitions=1, replication_factor=32767)
    assert most.replication_factor == 32767
    with pytest.raises(InvalidArgumentError, match="--replication-factor must be at most 32767"):
        topics.parse_create_request("t", partitions=1, replication_factor=32768)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", [0]),
        ("0,1", [0, 1]),
        ("2147483647", [2147483647]),
        ("-1", None),
        ("2147483648", None),
    ],
    ids=repr,
)
def test_broker_ids_run_from_0_to_a_java_ints_maximum(
    text: str, expected: list[int] | None
) -> None:
    if expected is None:
        with pytest.raises(InvalidArgumentError, match="is not a broker id"):
            topics.parse_replicas(text)
    else:
        assert topics.parse_replicas(text) == expected


def test_the_same_partition_count_is_no_increase_even_without_brokers() -> None:
    """AdminZkClient.createNewPartitionsAssignment: partitionsToAdd <= 0 is refused
    (InvalidPartitionsException) before any broker is looked at."""
    a = TopicAssignment("t", {0: (1,), 1: (2,)})
    with pytest.raises(PartitionCountError, match="can only be increased"):
        topics.plan_new_partitions(a, 2, [])
    with pytest.raises(PartitionCountError, match="can only be increased"):
        topics.plan_new_partitions(a, 1, [BrokerMetadata(1, None)])


def test_a_listing_leaves_out_the_internal_topics_only_when_asked() -> None:
    """TopicCommand --list --exclude-internal: Topic.isInternal's topics left out."""
    zk = TreeZk()
    for name in ("__consumer_offsets", "__transaction_state", "orders", "_private"):
        zk.put(paths.topic(name), b"{}")
    zk.put(paths.delete_topic("orders"), b"")
    every = topics.list_topics(zk)  # type: ignore[arg-type]
    assert [(t.name, t.marked_for_deletion) for t in every] == [
        ("__consumer_offsets", False),
        ("__transaction_state", False),
        ("_private", False),
        ("orders", True),
    ]
    without = topics.list_topics(zk, exclude_internal=True)  # type: ignore[arg-type]
    assert [t.name for t in without] == ["_private", "orders"]


def state(leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(LeaderAndIsr(leader, 3, isr), 1)


@pytest.mark.parametrize("leader", [-1, -2])
def test_a_partition_led_by_no_broker_has_no_leader(leader: int) -> None:
    """-1 (no leader) and -2 (the leader while the topic is deleted) are no broker."""
    p = topics.PartitionDescription("t", 0, (1, 2), state=state(leader, (1,)))
    assert p.leader is None
    assert p.is_unavailable({1, 2})
    assert p.to_json({1, 2})["leader"] is None
    led = topics.PartitionDescription("t", 0, (1, 2), state=state(0, (0,)))
    assert led.leader == 0


def test_replicas_being_added_count_neither_for_the_factor_nor_for_under_replication() -> None:
    """As Kafka's TopicCommand: while a reassignment adds replicas, the replication factor
    is the replicas less the ones being added, and a partition whose ISR holds all of
    those is not under-replicated."""
    moving = topics.PartitionDescription(
        "t", 0, (1, 2, 3), adding_replicas=(3,), removing_replicas=(), state=state(1, (1, 2))
    )
    assert not moving.is_under_replicated()
    assert moving.to_json({1, 2, 3})["under_replicated"] is False
    short = topics.PartitionDescription(
        "t", 0, (1, 2, 3), adding_replicas=(3,), state=state(1, (1,))
    )
    assert short.is_under_replicated()
    settled = topics.PartitionDescription("t", 0, (1, 2, 3), state=state(1, (1, 2)))
    assert settled.is_under_replicated()
    description = topics.TopicDescription("t", None, (moving, settled), {}, False)
    assert description.replication_factor == 2
    assert description.to_json({1, 2, 3})["replication_factor"] == 2


def test_partitions_are_not_added_while_the_topic_znode_shows_a_reassignment() -> None:
    """Kafka 2.8 refuses to add partitions to a topic some of whose partitions are being
    reassigned (ReassignmentInProgressException): here the topic znode's adding and
    removing replicas say so, with /admin/reassign_partitions already gone."""
    for moving in ({"adding_replicas": {0: (3,)}}, {"removing_replicas": {0: (1,)}}):
        zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
        a = TopicAssignment("t", {0: (1, 2, 3)}, **moving)  # type: ignore[arg-type]
        zk.put(paths.topic("t"), encode_topic(a))
        before = zk.nodes[paths.topic("t")]
        with pytest.raises(ReassignmentInProgressError, match="reassignment of topic 't'"):
            topics.add_partitions(zk, "t", 2)  # type: ignore[arg-type]
        assert zk.nodes[paths.topic("t")] == before


def stat(czxid: int, version: int) -> ZnodeStat:
    return ZnodeStat(czxid, czxid, 0, 0, version, 0, 0, 0, 10, 0, czxid)


def test_a_topic_created_again_without_an_id_is_another_incarnation() -> None:
    """A topic whose znode names no id (one written before topic ids) deleted and created
    again the same way: the id cannot tell them apart, the new znode's creation (czxid)
    can, even at the version that was read."""
    a = TopicAssignment("t", {0: (1,)})
    data = encode_topic(a)
    assert topics.incarnation_change("t", stat(5, 0), a, (data, stat(5, 0))) is None
    again = topics.incarnation_change("t", stat(5, 0), a, (data, stat(9, 0)))
    assert isinstance(again, ConcurrentChangeError)
    assert "deleted and created again" in str(again)
    changed = topics.incarnation_change("t", stat(5, 0), a, (data, stat(5, 1)))
    assert isinstance(changed, ConcurrentChangeError)
    assert "changed by someone else" in str(changed)
    gone = topics.incarnation_change("t", stat(5, 0), a, None)
    assert isinstance(gone, UnknownTopicError)


def test_a_topic_znode_rewritten_with_another_id_is_named_so_not_as_created_again() -> None:
    """The same znode (same czxid) rewritten with another topic id, or left unreadable, is
    refused too, but named for what happened: no deletion or creation took place."""
    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    a = TopicAssignment("t", {0: (1,)}, first)
    rewritten = encode_topic(TopicAssignment("t", {0: (1,)}, second))
    other = topics.incarnation_change("t", stat(5, 0), a, (rewritten, stat(5, 1)))
    assert isinstance(other, ConcurrentChangeError)
    assert "deleted and created again" not in str(other)
    assert f"rewritten with topic id {second} (it had {first})" in str(other)
    unreadable = topics.incarnation_change("t", stat(5, 0), a, (b"{", stat(5, 1)))
    assert isinstance(unreadable, ConcurrentChangeError)
    assert f"rewritten with no readable topic id (it had {first})" in str(unreadable)
    new_znode = topics.incarnation_change("t", stat(5, 0), a, (rewritten, stat(9, 0)))
    assert "deleted and created again" in str(new_znode)


def test_add_partitions_validate_only_writes_nothing() -> None:
    """A CreatePartitions request's validate_only: the partitions planned, nothing written."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    before = zk.nodes[paths.topic("t")]
    result = topics.add_partitions(zk, "t", 3, validate_only=True)  # type: ignore[arg-type]
    assert sorted(result.added) == [1, 2]
    assert zk.nodes[paths.topic("t")] == before
    written = topics.add_partitions(zk, "t", 3)  # type: ignore[arg-type]
    assert written.added == result.added
    assert zk.nodes[paths.topic("t")] != before


def test_altering_the_config_of_a_missing_topic_says_it_does_not_exist() -> None:
    """TopicCommand's ensureTopicExists comes first: even a deletion of a config the topic
    could not have is answered "does not exist", and nothing is written."""
    zk = TreeZk()
    with pytest.raises(UnknownTopicError, match="'t' does not exist"):
        topics.alter_topic_config(zk, "t", {}, ["retention.ms"])  # type: ignore[arg-type]
    with pytest.raises(UnknownTopicError, match="'t' does not exist"):
        topics.alter_topic_config(zk, "t", {"retention.ms": "1"}, [])  # type: ignore[arg-type]
    assert zk.nodes == {}


def test_a_config_changed_meanwhile_is_not_overwritten() -> None:
    """The config znode is rewritten on the version read: someone else's change between
    the read and the write is answered ConcurrentChangeError, and theirs stays."""

    class RacingZk(TreeZk):
        def multi(self, ops: Any, *, session: int | None = None) -> list[Any]:
            path = paths.topic_config("t")
            self.set_data(path, encode_topic_config({"retention.ms": "7"}))
            return super().multi(ops, session=session)

    zk = RacingZk()
    zk.nodes.update(tree_with_topic("t", {0: [1]}, (1,)).nodes)
    zk.put(paths.topic_config("t"), encode_topic_config({"retention.ms": "5"}))
    with pytest.raises(ConcurrentChangeError, match="changed by someone else meanwhile"):
        topics.alter_topic_config(zk, "t", {"segment.ms": "100000"}, [])  # type: ignore[arg-type]
    theirs = decode_topic_config("t", zk.nodes[paths.topic_config("t")][0])
    assert theirs == {"retention.ms": "7"}
    assert not any(p.startswith(paths.CONFIG_CHANGES + "/") for p in zk.nodes)


def test_a_partition_count_past_what_a_znode_holds_is_refused_before_any_assignment() -> None:
    """A CreateTopics or CreatePartitions request may ask for up to 2**31 - 1 partitions:
    a count no topic znode holds is refused on its own, no assignment computed for it."""
    too_many = topics.MAX_PARTITIONS + 1
    request = topics.CreateTopicRequest("t", partitions=too_many, replication_factor=1)
    with pytest.raises(PartitionCountError, match=f"at most 100000 partitions, not {too_many}"):
        topics.plan_topic_creation(request, [BrokerMetadata(1, None)], [], [])
    a = TopicAssignment("t", {0: (1,)})
    with pytest.raises(PartitionCountError, match=f"at most 100000 partitions, not {too_many}"):
        topics.plan_new_partitions(a, too_many, [BrokerMetadata(1, None)])


@pytest.mark.parametrize(
    ("config", "problem"),
    [("retention.ms=abc", "retention.ms"), ("no.such.config=1", "no.such.config")],
)
def test_a_config_to_add_is_validated_with_the_arguments(config: str, problem: str) -> None:
    """kafka-configs.sh checks the configs given (LogConfig.validate) before it changes
    anything: a bad one is an argument error, found before any topic is read."""
    with pytest.raises(InvalidArgumentError, match=problem):
        topics.parse_config_alteration("t", [config], [])


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"partitions": 3}, "missing --replication-factor"),
        ({"replication_factor": 2}, "missing --partitions"),
        ({}, "missing --partitions and --replication-factor"),
    ],
)
def test_a_create_request_without_an_assignment_needs_both_counts(
    given: dict[str, int], missing: str
) -> None:
    """TopicCommand with --zookeeper requires --partitions and --replication-factor unless
    --replica-assignment is given."""
    with pytest.raises(InvalidArgumentError, match=f"^{missing} "):
        topics.parse_create_request("t", **given)  # type: ignore[arg-type]


def test_describe_names_a_topic_given_twice_once() -> None:
    zk = tree_with_topic("t", {0: [1]}, (1,))
    result = topics.describe_topics(zk, ["t", "t"])  # type: ignore[arg-type]
    assert [t.name for t in result.topics] == ["t"]


def test_describing_every_topic_skips_one_deleted_while_it_was_read() -> None:
    """Every topic: one listed under /brokers/topics whose znode is gone by the time it is
    read (being deleted) is left out, not an error as a topic named and missing is."""
    zk = tree_with_topic("t", {0: [1]}, (1,))
    zk.put(paths.partition_state("gone", 0), b"{}")  # its children remain, not its znode
    assert "gone" in metadata.topic_names(zk)  # type: ignore[arg-type]
    result = topics.describe_topics(zk)  # type: ignore[arg-type]
    assert [t.name for t in result.topics] == ["t"]
    with pytest.raises(UnknownTopicError, match="'gone'"):
        topics.describe_topics(zk, ["t", "gone"])  # type: ignore[arg-type]


def test_a_config_key_deleted_twice_is_deleted_once() -> None:
    assert topics.parse_config_alteration("t", [], ["retention.ms", "retention.ms,segment.ms"]) == (
        {},
        ["retention.ms", "segment.ms"],
    )
    with pytest.raises(AdminError, match=r"^cannot delete config\(s\) segment.ms: not set"):
        topics.plan_config_alteration({"retention.ms": "1"}, {}, ["retention.ms", "segment.ms"])
