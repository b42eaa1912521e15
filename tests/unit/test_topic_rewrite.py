"""The controller's rewrite of a topic's znode: partitions an admin added meanwhile stay,
except where the topic is being deleted: then its assignment is restored, as Kafka does.
And a topic's id: an admin's write never lands on a later incarnation of its topic, and
the controller never takes a known topic's id from its znode."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from admin import metadata as admin_metadata
from admin import topics as admin_topics
from admin.errors import ConcurrentChangeError
from controller import events as ev
from controller.controller import KafkaController, topic_id_restored
from controller.store import keeping_added_partitions
from tests.unit.fake_cluster import Controller, ZooKeeperData, cluster, drain, start_controller
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import TopicAssignment, TopicPartition, decode_topic, encode_topic

REPLICAS = st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True).map(tuple)
PARTITIONS = st.dictionaries(st.integers(0, 7), REPLICAS, min_size=1)
TOPIC_ID = uuid.UUID(int=1)


@given(ours=PARTITIONS, theirs=PARTITIONS, adding=st.booleans())
def test_the_controllers_partitions_win_and_only_unknown_ones_are_added(
    ours: dict[int, tuple[int, ...]], theirs: dict[int, tuple[int, ...]], adding: bool
) -> None:
    first = min(ours)
    mine = TopicAssignment(
        "t", ours, TOPIC_ID, {first: ours[first]} if adding else {}, {first: (9,)} if adding else {}
    )
    current = TopicAssignment("t", theirs, uuid.UUID(int=2), {min(theirs): (8,)})
    merged = keeping_added_partitions(mine, current)
    assert merged.partitions == {**theirs, **ours}
    # the rest is the controller's: its topic id, its reassignments in progress
    assert (merged.topic, merged.topic_id) == ("t", TOPIC_ID)
    assert (merged.adding_replicas, merged.removing_replicas) == (
        mine.adding_replicas,
        mine.removing_replicas,
    )
    if set(theirs) <= set(ours):
        assert merged is mine


def test_a_znode_that_could_not_be_read_is_rewritten_from_the_controllers() -> None:
    mine = TopicAssignment("t", {0: (1, 2)}, TOPIC_ID)
    assert keeping_added_partitions(mine, None) is mine


def add_partition_while_deleting(zk: FakeZk, c: KafkaController) -> None:
    """Topic t queued for deletion (broker 3 down: held), then partition 1 added to its
    znode by someone else."""
    del zk.nodes[paths.broker(3)]
    zk.fire(paths.BROKER_IDS, "CHILD")
    zk.put(paths.delete_topic("t"), b"")
    zk.fire(paths.DELETE_TOPICS, "CHILD")
    drain(c)
    assert c.ctx.is_topic_queued_for_deletion("t")
    current = decode_topic("t", zk.nodes[paths.topic("t")][0])
    added = {**current.partitions, 1: (1, 2, 3)}
    zk.set_data(paths.topic("t"), encode_topic(TopicAssignment("t", added, current.topic_id)))
    zk.fire(paths.topic("t"), "CHANGED")
    drain(c)


def test_partitions_added_to_a_topic_being_deleted_are_taken_back_out_of_its_znode() -> None:
    """Kafka's processPartitionModifications restores the controller's assignment
    (restorePartitionReplicaAssignment); the event only logged, and the znode kept a
    partition no controller created, which a failover meanwhile created."""
    zk, c = cluster()
    add_partition_while_deleting(zk, c)
    restored = decode_topic("t", zk.nodes[paths.topic("t")][0])
    assert restored.partitions == {0: (2, 3, 1)}
    assert restored.topic_id == c.ctx.topic_ids["t"]
    c._resign("a failover follows")
    del zk.nodes[paths.CONTROLLER]
    successor = start_controller(zk.share(0x222), broker_id=2)
    assert successor.is_active
    assert TopicPartition("t", 1) not in set(successor.ctx.all_partitions())


def test_a_restore_that_loses_to_another_write_waits_for_its_watch() -> None:
    zk, c = cluster()
    zk.put(paths.delete_topic("t"), b"")
    zk.fire(paths.DELETE_TOPICS, "CHILD")
    drain(c)
    topic_id = c.ctx.topic_ids["t"]
    zk.set_data(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (2, 3, 1), 1: (1,)})))
    version = zk.nodes[paths.topic("t")][1].version
    assignment = TopicAssignment("t", {0: (2, 3, 1)}, topic_id)
    assert not c.store.restore_topic_assignment(assignment, version - 1, c.ctx.epoch_zk_version)
    assert c.store.restore_topic_assignment(assignment, version, c.ctx.epoch_zk_version)
    assert decode_topic("t", zk.nodes[paths.topic("t")][0]).partitions == {0: (2, 3, 1)}


def leader_and_isr_topic_ids(c: Controller, topic: str) -> set[uuid.UUID]:
    ids: set[uuid.UUID] = set()
    for r in c.sent:
        if r.api_key.name != "LEADER_AND_ISR":
            continue
        body = r.make_body() if r.make_body is not None else r.shared._make_body(r.broker_epoch)  # type: ignore[union-attr]
        ids.update(ts["topic_id"] for ts in body["topic_states"] if ts["topic_name"] == topic)
    return ids


def delete_and_create_again(data: ZooKeeperData, c: Controller, new_id: uuid.UUID) -> None:
    """Topic r deleted (the controller's whole deletion), then created again by someone
    else: a new znode, at version 0 again, with a new id and other replicas."""
    data.request_deletion("r")
    c.run(ev.TopicDeletion())
    c.drain()
    c.answer_stop_replicas("r")
    assert not data.has(paths.topic("r"))
    data.zk.put(paths.topic("r"), encode_topic(TopicAssignment("r", {0: (2, 3)}, new_id)))
    c.run(ev.TopicChange())
    c.drain()
    assert c.controller.ctx.topic_ids["r"] == new_id


def test_adding_partitions_refuses_a_topic_deleted_and_created_again_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """add_partitions writes conditional on the version it read; a topic deleted and
    created again meanwhile has a new znode at version 0 again, and the write landed on it
    with the old incarnation's id and partitions. (Kafka 2.8's writeTopicPartitionAssignment
    re-reads the id.) The incarnation (czxid, id) is read again just before the write."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("r", {0: (1, 2)})
    new_id = uuid.uuid4()
    with Controller(data) as c:
        c.elect()
        real = admin_metadata.topics_marked_for_deletion  # the module admin.topics uses

        def racing(zk: Any) -> Any:
            marked = real(zk)
            if not data.has(paths.delete_topic("r")) and data.assignment("r").topic_id != new_id:
                delete_and_create_again(data, c, new_id)
            return marked

        monkeypatch.setattr(admin_metadata, "topics_marked_for_deletion", racing)
        with pytest.raises(ConcurrentChangeError, match="deleted and created again"):
            admin_topics.add_partitions(data.zk, "r", 2)  # type: ignore[arg-type]
        assert data.assignment("r") == TopicAssignment("r", {0: (2, 3)}, new_id)


def test_a_topic_znode_naming_another_id_is_a_foreign_write_the_controller_undoes() -> None:
    """Whatever wrote it (an old incarnation's assignment landing on a new one), the
    controller keeps the id it knows (Kafka 2.8 sets ids only for topics lacking one) and
    restores its assignment: it never sends the other id, nor creates the partitions."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("r", {0: (2, 3)})
    known = data.topic_ids["r"]
    other = uuid.uuid4()
    with Controller(data) as c:
        c.elect()
        c.sent.clear()
        data.zk.set_data(
            paths.topic("r"), encode_topic(TopicAssignment("r", {0: (1, 2), 1: (2, 1)}, other))
        )
        c.run(ev.PartitionModifications("r"))
        c.drain()
        assert c.controller.ctx.topic_ids["r"] == known
        assert leader_and_isr_topic_ids(c, "r") <= {known}
        assert TopicPartition("r", 1) not in set(c.controller.ctx.all_partitions())
        assert data.assignment("r") == TopicAssignment("r", {0: (2, 3)}, known)


def old_tool_write(data: ZooKeeperData, partitions: dict[int, tuple[int, ...]]) -> None:
    """Topic r's znode rewritten by a tool older than Kafka 2.8 (2.7's kafka-topics.sh
    --zookeeper --alter --partitions): its partitions, and no topic_id."""
    data.zk.set_data(paths.topic("r"), encode_topic(TopicAssignment("r", partitions, None)))


def test_an_old_tools_add_partitions_gets_the_topic_id_written_back() -> None:
    """The reviewer's: the event created the added partition and kept the id in memory
    only; the next failover found no id in the znode, made a new one and sent it in every
    LeaderAndIsr, and each broker set the topic's logs aside as an earlier incarnation's
    (item 30). Now the id is written back with the added partition kept."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("r", {0: (2, 3)})
    known = data.topic_ids["r"]
    with Controller(data) as c:
        c.elect()
        old_tool_write(data, {0: (2, 3), 1: (3, 2)})
        c.run(ev.PartitionModifications("r"))
        c.drain()
        assert TopicPartition("r", 1) in set(c.controller.ctx.all_partitions())
        assert c.controller.ctx.topic_ids["r"] == known
        assert data.assignment("r") == TopicAssignment("r", {0: (2, 3), 1: (3, 2)}, known)
    # the controller moves: broker 2 takes over with a fresh failover
    del data.zk.nodes[paths.CONTROLLER]
    with Controller(data, broker_id=2) as c2:
        c2.elect()
        assert c2.controller.ctx.topic_ids["r"] == known
        assert leader_and_isr_topic_ids(c2, "r") == {known}
        assert data.assignment("r").topic_id == known


def test_an_old_tools_rewrite_adding_nothing_gets_the_topic_id_written_back() -> None:
    """An old tool's write of the same partitions (or of a partition's replicas the
    controller has moved since) adds nothing: the znode still gets the controller's
    assignment and id back."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("r", {0: (2, 3)})
    known = data.topic_ids["r"]
    with Controller(data) as c:
        c.elect()
        old_tool_write(data, {0: (3, 1)})
        c.run(ev.PartitionModifications("r"))
        c.drain()
        assert data.assignment("r") == TopicAssignment("r", {0: (2, 3)}, known)


def test_an_old_tools_add_to_a_topic_being_deleted_is_restored_with_its_id() -> None:
    zk, c = cluster()
    known = c.ctx.topic_ids["t"]
    del zk.nodes[paths.broker(3)]
    zk.fire(paths.BROKER_IDS, "CHILD")
    zk.put(paths.delete_topic("t"), b"")
    zk.fire(paths.DELETE_TOPICS, "CHILD")
    drain(c)
    assert c.ctx.is_topic_queued_for_deletion("t")
    zk.set_data(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (2, 3, 1), 1: (1, 2)})))
    zk.fire(paths.topic("t"), "CHANGED")
    drain(c)
    assert decode_topic("t", zk.nodes[paths.topic("t")][0]) == TopicAssignment(
        "t", {0: (2, 3, 1)}, known
    )


def test_a_lost_write_back_of_the_id_waits_for_the_znodes_watch() -> None:
    """The write is conditional on the version the event read: one that lands meanwhile
    (another old tool's add) is not overwritten, and its own event writes the id back."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("r", {0: (2, 3)})
    known = data.topic_ids["r"]
    with Controller(data) as c:
        c.elect()
        old_tool_write(data, {0: (2, 3), 1: (3, 2)})
        real = c.controller.store.restore_topic_assignment

        def racing(assignment: TopicAssignment, version: int, epoch_zk_version: int) -> bool:
            if 2 not in data.assignment("r").partitions:
                old_tool_write(data, {0: (2, 3), 1: (3, 2), 2: (1, 2)})
            return real(assignment, version, epoch_zk_version)

        c.controller.store.restore_topic_assignment = racing  # type: ignore[method-assign]
        c.run(ev.PartitionModifications("r"))
        assert data.assignment("r") == TopicAssignment("r", {0: (2, 3), 1: (3, 2), 2: (1, 2)})
        c.run(ev.PartitionModifications("r"))
        c.drain()
        assert {tp.partition for tp in c.controller.ctx.partitions_for_topic("r")} == {0, 1, 2}
        assert data.assignment("r") == TopicAssignment(
            "r", {0: (2, 3), 1: (3, 2), 2: (1, 2)}, known
        )


@given(ours=PARTITIONS, theirs=PARTITIONS, named=st.booleans())
def test_the_id_is_written_back_only_where_the_znode_names_none(
    ours: dict[int, tuple[int, ...]], theirs: dict[int, tuple[int, ...]], named: bool
) -> None:
    mine = TopicAssignment("t", ours, TOPIC_ID)
    current = TopicAssignment("t", theirs, TOPIC_ID if named else None)
    restored = topic_id_restored(mine, current)
    if named:
        assert restored is None
    else:
        assert restored == keeping_added_partitions(mine, current)
        assert restored is not None
        assert restored.topic_id == TOPIC_ID
    # a topic the controller knows no id of (none in the context) gets none written
    assert topic_id_restored(TopicAssignment("t", ours, None), current) is None
