"""A cancellation after an override goes back to the true origin (found by review).

An overriding target keeps a replica the first reassignment was adding and the new target
drops, if it is in the ISR (docs/architecture.md, item 18). That replica used to join the
origin (replicas minus adding, in memory and in the topic's znode), so a later cancel
(AlterPartitionReassignments with a null target) "reverted" to the origin plus it: the
partition kept a replica it never had, its replication factor grown for good. Kafka 2.8
reverts to the original replicas. The kept replica is now listed both adding (it is not
an origin replica) and removing (it is not a target one), within Kafka's znode layout, so
a failover reads the same origin: a KafkaController over an in-memory ZooKeeper
(tests/unit/fake_cluster.py)."""

from __future__ import annotations

from typing import Any

from controller import events as ev
from tests.unit.fake_cluster import Controller, ZooKeeperData
from zkdata import paths
from zkdata.znodes import TopicPartition

T0 = TopicPartition("t", 0)


def alter(c: Controller, targets: dict[TopicPartition, tuple[int, ...] | None]) -> list[Any]:
    got: list[Any] = []
    c.controller.events.put(ev.AlterPartitionReassignments(targets, lambda *a: got.append(a)))
    c.drain()
    return got


def overridden(c: Controller, data: ZooKeeperData) -> None:
    """Origin (1, 2, 3) moved to (4, 5, 1); 4 catches up, 5 does not; then (1, 2, 6)
    overrides it, keeping 4 (in the ISR) until 1, 2 and 6 are."""
    alter(c, {T0: (4, 5, 1)})
    data.leader_sets_isr(T0, (1, 2, 3, 4))
    c.run(ev.PartitionReassignmentIsrChange(T0))
    c.drain()
    assert T0 in c.controller.ctx.partitions_being_reassigned
    alter(c, {T0: (1, 2, 6)})
    a = data.assignment("t")
    assert set(a.partitions[0]) == {1, 2, 3, 4, 6}
    # 4 is neither an origin nor a target replica: added by the first, removed by the second
    assert set(a.adding_replicas[0]) == {4, 6}
    assert set(a.removing_replicas[0]) == {3, 4}
    ra = c.controller.ctx.full_assignment(T0)
    assert set(ra.origin_replicas) == {1, 2, 3}
    assert set(ra.target_replicas) == {1, 2, 6}


def test_a_cancel_after_an_override_reverts_to_the_original_replicas() -> None:
    data = ZooKeeperData(brokers=(1, 2, 3, 4, 5, 6))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        overridden(c, data)
        alter(c, {T0: None})
        a = data.assignment("t")
        assert T0 not in c.controller.ctx.partitions_being_reassigned
        assert set(a.partitions[0]) == {1, 2, 3}, a
        assert not a.adding_replicas
        assert not a.removing_replicas
        assert set(data.state(T0).isr) <= {1, 2, 3}


def test_a_cancel_after_an_override_with_the_kept_replicas_broker_dead() -> None:
    """Broker 4 gone meanwhile: it used to become a permanent replica outside the ISR."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4, 5, 6))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        overridden(c, data)
        data.unregister(4)
        c.run(ev.BrokerChange())
        c.drain()
        alter(c, {T0: None})
        a = data.assignment("t")
        assert T0 not in c.controller.ctx.partitions_being_reassigned, a
        assert set(a.partitions[0]) == {1, 2, 3}, a


def test_a_cancel_after_an_override_and_a_failover_reverts_to_the_original_replicas() -> None:
    """The kept replica's place (adding and removing) is in the topic's znode: a new
    controller reads the same origin."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4, 5, 6))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        overridden(c, data)
    data.zk.nodes.pop(paths.CONTROLLER, None)  # its session expired
    with Controller(data, broker_id=2).elect() as second:
        ra = second.controller.ctx.full_assignment(T0)
        assert set(ra.origin_replicas) == {1, 2, 3}
        assert T0 in second.controller.ctx.partitions_being_reassigned
        alter(second, {T0: None})
        a = data.assignment("t")
        assert T0 not in second.controller.ctx.partitions_being_reassigned, a
        assert set(a.partitions[0]) == {1, 2, 3}, a


def test_the_kept_replica_leaves_once_the_new_target_has_caught_up() -> None:
    """No cancel: the override completes, 4 removed with the origin's 3 (item 18)."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4, 5, 6))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        overridden(c, data)
        data.leader_sets_isr(T0, (1, 2, 3, 4, 6))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        a = data.assignment("t")
        assert T0 not in c.controller.ctx.partitions_being_reassigned, a
        assert set(a.partitions[0]) == {1, 2, 6}, a
