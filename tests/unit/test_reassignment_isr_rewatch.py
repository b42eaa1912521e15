"""A reassignment whose new replicas join the ISR one at a time completes at the last
one: the ISR change that finds it not yet caught up re-arms the watch on its partition
state (ZooKeeper's watches fire once), as Kafka 2.8's processPartitionReassignmentIsrChange
leaves the handler registered and reads the state with a watch again. A KafkaController
over an in-memory ZooKeeper (tests/unit/fake_cluster.py) that records the paths read
with a watch."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from controller import events as ev
from tests.unit.fake_cluster import Controller, ZooKeeperData
from zkdata import paths
from zkdata.znodes import TopicPartition

T0 = TopicPartition("t", 0)


def watched_reads(c: Controller, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the controller reads with a watch from now on."""
    watched: list[str] = []
    get_many = c.zk.get_many

    def recording(path_list: Iterable[str], *, watch: bool = False, batch: int = 0) -> Any:
        path_list = list(path_list)
        if watch:
            watched.extend(path_list)
        return get_many(path_list, watch=watch, batch=batch)

    monkeypatch.setattr(c.zk, "get_many", recording)
    return watched


def test_a_reassignment_waits_through_isr_changes_until_every_new_replica_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = ZooKeeperData(brokers=(1, 2, 3, 4, 5))
    data.topic("t", {0: (1, 2, 3)})
    state = paths.partition_state("t", 0)
    with Controller(data).elect() as c:
        data.request_reassignment({T0: (1, 4, 5)})
        c.run(ev.PartitionReassignment())
        c.drain()
        assert T0 in c.controller.ctx.partitions_being_reassigned
        watched = watched_reads(c, monkeypatch)
        data.leader_sets_isr(T0, (1, 2, 3, 4))  # 4 caught up, 5 not yet
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        assert T0 in c.controller.ctx.partitions_being_reassigned
        assert watched == [state]  # its next change will be heard
        data.leader_sets_isr(T0, (1, 2, 3, 4, 5))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        assert T0 not in c.controller.ctx.partitions_being_reassigned
        assert data.assignment("t").partitions[0] == (1, 4, 5)
        assert watched == [state]  # done: not watched again
