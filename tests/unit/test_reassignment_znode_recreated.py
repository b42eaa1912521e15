"""A request written to /admin/reassign_partitions after an admin deleted the one the
controller was working through is carried out (found by review).

The controller's rewrite of the znode (one partition done, another still moving) spends
the watch its read armed. An admin deleting it then (Kafka's old way to give up a stuck
reassignment) and writing a new request went unseen: the last reassignment's completion
read the new znode, found nothing of its own in it, and left it, never read as a request,
until the next failover (`zkctl reassign --verify` said in progress for good). Kafka
2.8's ZooKeeperClient arms its handler's watch with every read of the path
(shouldWatch), its completion's check included. Here the completion's read arms it, and
a znode found with another czxid than the one the controller read is a request created
since: the controller reads it. A KafkaController over an in-memory ZooKeeper
(tests/unit/fake_cluster.py), whose watches fire only when told: the spent one never."""

from __future__ import annotations

from controller import events as ev
from tests.unit.fake_cluster import Controller, ZooKeeperData
from zkdata import paths
from zkdata.znodes import TopicPartition, decode_reassignment

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
DOWN = 5


def test_a_request_made_after_an_admin_deleted_the_znode_is_carried_out() -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3), 1: (1, 2, 3)})
    with Controller(data).elect() as c:
        # t-1 only changes its replicas' order: done at once, the znode rewritten to hold
        # t-0 alone, which waits for broker 5 (down).
        data.request_reassignment({T0: (1, 2, DOWN), T1: (2, 1, 3)})
        c.run(ev.PartitionReassignment())
        c.drain()
        assert data.assignment("t").partitions[1] == (2, 1, 3)
        got = data.zk.nodes[paths.REASSIGN_PARTITIONS]
        assert decode_reassignment(got[0]) == {T0: (1, 2, DOWN)}
        # The admin deletes it and asks for t-1's old order: the spent watch fires nothing.
        del data.zk.nodes[paths.REASSIGN_PARTITIONS]
        data.request_reassignment({T1: (1, 2, 3)})
        # t-0 completes: broker 5 back and caught up.
        data.register(DOWN)
        c.run(ev.BrokerChange())
        c.drain()
        data.leader_sets_isr(T0, (1, 2, 3, DOWN))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        a = data.assignment("t")
        assert a.partitions[0] == (1, 2, DOWN)
        assert a.partitions[1] == (1, 2, 3), a  # (2, 1, 3) before: never read
        assert not data.has(paths.REASSIGN_PARTITIONS)


def test_the_znode_the_controller_read_is_not_read_again_for_each_completion() -> None:
    """The same znode (the controller's own rewrite, same czxid) brings no new read."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4, DOWN))
    data.topic("t", {0: (1, 2, 3), 1: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.request_reassignment({T0: (1, 2, 4), T1: (1, 2, DOWN)})
        c.run(ev.PartitionReassignment())
        c.drain()
        data.leader_sets_isr(T0, (1, 2, 3, 4))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        assert c.drain() == ["ReassignmentIsrChanges"]
        got = data.zk.nodes[paths.REASSIGN_PARTITIONS]
        assert decode_reassignment(got[0]) == {T1: (1, 2, DOWN)}
