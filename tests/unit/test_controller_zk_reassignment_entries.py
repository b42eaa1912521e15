"""Entries of /admin/reassign_partitions the controller takes out at once (Kafka 2.8's
processZkPartitionReassignment and maybeRemoveFromZkReassignment), over an in-memory
ZooKeeper (tests/unit/fake_zk.py): one naming a partition that does not exist, one of a
topic queued for deletion, one whose partition is already on its target replicas; the
others stay until their reassignment completes."""

from __future__ import annotations

from controller import events as ev
from tests.unit import fake_cluster as fc
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import TopicPartition, decode_reassignment_entries, encode_reassignment

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def zk_with_topics() -> FakeZk:
    zk = fc.empty_cluster()
    for b in (1, 2, 3):
        fc.register(zk, b)
    fc.add_topic(zk, "t", {0: (2, 3, 1), 1: (3, 1, 2)})
    fc.add_topic(zk, "u", {0: (1, 2, 3)})
    return zk


def requested(zk: FakeZk) -> dict[TopicPartition, tuple[int, ...]]:
    got = zk.get(paths.REASSIGN_PARTITIONS)
    if got is None:
        return {}
    targets, _unreadable = decode_reassignment_entries(got[0])
    return targets


def test_an_unknown_partition_or_one_already_on_its_target_is_taken_out() -> None:
    zk = zk_with_topics()
    c = fc.start_controller(zk)
    # t-0 moves; t-1 is on (3, 1, 2) already; t-9 and x-0 do not exist.
    zk.put(
        paths.REASSIGN_PARTITIONS,
        encode_reassignment(
            {
                T0: (1, 2, 3),
                T1: (3, 1, 2),
                TopicPartition("t", 9): (1, 2, 3),
                TopicPartition("x", 0): (1, 2, 3),
            }
        ),
    )
    fc.process(c, ev.PartitionReassignment())
    fc.drain(c)
    left = requested(zk)
    assert TopicPartition("t", 9) not in left
    assert TopicPartition("x", 0) not in left
    assert T1 not in left
    assert c.ctx.replicas(T1) == (3, 1, 2)


def test_a_reassignment_of_a_topic_queued_for_deletion_is_taken_out() -> None:
    zk = zk_with_topics()
    c = fc.start_controller(zk)
    c.ctx.topics_to_be_deleted.add("u")
    c.ctx.topics_ineligible_for_deletion.add("u")  # held: nothing of it moves meanwhile
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({TopicPartition("u", 0): (3, 2, 1)}))
    fc.process(c, ev.PartitionReassignment())
    assert requested(zk) == {}
    assert c.ctx.replicas(TopicPartition("u", 0)) == (1, 2, 3)
    assert TopicPartition("u", 0) not in c.ctx.partitions_being_reassigned
