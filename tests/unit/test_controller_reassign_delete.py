"""Reassignments and topic deletions as the whole controller carries them out over the admin
znodes (/admin/reassign_partitions, /admin/delete_topics) and the topics' znodes, across
failovers: a KafkaController over an in-memory ZooKeeper (tests/unit/controller_harness.py)."""

from __future__ import annotations

import pytest

from controller import events as ev
from controller.context import PartitionReplica, ReplicaStateName
from tests.unit.controller_harness import Controller, ZooKeeperData
from zkdata import paths
from zkdata.znodes import LeaderAndIsr, TopicPartition

R = ReplicaStateName
T0 = TopicPartition("t", 0)


def refused_transitions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "state transition" in r.getMessage()]


# --- a reassignment asked for a topic queued for deletion --------------------------------


def test_a_failover_refuses_a_requested_reassignment_of_a_topic_queued_for_deletion(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both asked while no controller ran: the failover refuses the reassignment and takes
    it out of /admin/reassign_partitions, as outside a failover and as Kafka's
    initializePartitionReassignments does (maybeTriggerPartitionReassignment), and deletes
    the topic. It used to start the reassignment and the deletion both, neither holding
    the other: the leader then let the new replica in before its StopReplica landed, and
    the reassignment's completion asked the state machines for transitions they refuse."""
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    data.request_reassignment({T0: (1, 2, 4)})
    data.request_deletion("t")
    with Controller(data).elect() as c:
        ctx = c.controller.ctx
        assert T0 not in ctx.partitions_being_reassigned
        assert not data.assignment("t").adding_replicas
        assert not data.has(paths.REASSIGN_PARTITIONS)
        assert {b for r in c.stop_replica_deletes("t") for b in [r.broker_id]} == {1, 2, 3}
        assert ctx.replica_state(PartitionReplica(T0, 4)) is R.NON_EXISTENT
        data.leader_sets_isr(T0, (1, 2, 3))  # what a leader may still write meanwhile
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))
        assert not data.has(paths.delete_topic("t"))
    assert refused_transitions(caplog) == []


def test_a_reassignment_the_topic_znode_shows_in_progress_resumes_holding_the_deletion(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reassignment begun before the topic was marked for deletion resumes at the
    failover (Kafka's maybeResumeReassignments) and holds the deletion until it completes;
    the same target asked in /admin/reassign_partitions is taken out of it all the same."""
    data = ZooKeeperData()
    data.topic(
        "t",
        {0: (1, 2, 3, 4)},
        {0: LeaderAndIsr(1, 0, (1, 2, 3), 0)},  # 4 has not caught up
        adding={0: (4,)},
        removing={0: (3,)},
    )
    data.request_reassignment({T0: (1, 2, 4)})
    data.request_deletion("t")
    with Controller(data).elect() as c:
        ctx = c.controller.ctx
        assert T0 in ctx.partitions_being_reassigned
        assert "t" in ctx.topics_ineligible_for_deletion
        assert not c.stop_replica_deletes("t")
        assert not data.has(paths.REASSIGN_PARTITIONS)
        data.leader_sets_isr(T0, (1, 2, 3, 4))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        assert T0 not in ctx.partitions_being_reassigned
        assert data.assignment("t").partitions == {0: (1, 2, 4)}
        # the removed replica deleted by the reassignment, the others by the deletion
        assert ctx.replica_states_of(T0) == dict.fromkeys((1, 2, 4), R.DELETION_STARTED)
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))
        assert not data.has(paths.delete_topic("t"))
    assert refused_transitions(caplog) == []
