"""Reassignments and topic deletions as the whole controller carries them out over the admin
znodes (/admin/reassign_partitions, /admin/delete_topics) and the topics' znodes, across
failovers: a KafkaController over an in-memory ZooKeeper (tests/unit/fake_cluster.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from controller import events as ev
from controller.context import PartitionReplica, ReplicaStateName
from controller.request_batch import BrokerRequest
from controller.topic_deletion import stale_deletion_requests
from handlers import zk_handlers
from tests.unit.fake_cluster import Controller, ZooKeeperData, add_topic
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import Delete, WriteOp
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


# --- a deletion cut short, and requests naming no topic ----------------------------------


def test_a_deletion_cut_short_removes_the_topic_and_its_request_together() -> None:
    """The topic's znode and its deletion request go in one fenced multi: a deletion cut
    between them (ZooKeeper lost, the controller gone) left a request naming no topic,
    which a failover keeps (item 29). Cut there, both are still there, and the next
    controller deletes the topic again."""
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    data.request_deletion("t")
    first = Controller(data, broker_id=1).elect()
    multi = first.zk.multi

    def lost_with_the_request(ops: Sequence[WriteOp], **kwargs: Any) -> list[Any]:
        if any(isinstance(op, Delete) and op.path == paths.delete_topic("t") for op in ops):
            raise ConnectionLoss()
        return multi(ops, **kwargs)

    first.zk.multi = lost_with_the_request  # type: ignore[method-assign]
    first.answer_stop_replicas("t")
    first.close()
    assert data.has(paths.topic("t")) == data.has(paths.delete_topic("t"))
    assert not data.has(paths.partition_state("t", 0))  # the leaves went first
    data.zk.nodes.pop(paths.CONTROLLER, None)  # its session expired
    with Controller(data, broker_id=2).elect() as second:
        second.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))
        assert not data.has(paths.delete_topic("t"))


def test_a_failover_removes_a_deletion_request_left_behind_by_a_finished_deletion() -> None:
    """A request naming no topic, older than any topic of its name (a deletion cut short
    by an earlier version, or by Kafka, left it): the failover removes it, as Kafka's
    completes a deletion with no replicas left. Kept, it blocked the name for good (the
    admin tools refuse a name marked for deletion) and deleted a topic made under it."""
    data = ZooKeeperData()
    data.request_deletion("t")
    with Controller(data).elect() as c:
        assert not data.has(paths.delete_topic("t"))
        data.topic("t", {0: (1, 2, 3)})  # made again under the name
        c.run(ev.TopicChange())
        c.drain()
        assert "t" in c.controller.ctx.all_topics
        assert "t" not in c.controller.ctx.topics_to_be_deleted
        assert not c.stop_replica_deletes("t")


def topics_read_before(c: Controller, hidden: str) -> None:
    """The failover's read of /brokers/topics comes before ``hidden`` was made."""
    get_children = c.zk.get_children

    def without_hidden(path: str, *, watch: bool = False) -> list[str] | None:
        children = get_children(path, watch=watch)
        if path == paths.BROKER_TOPICS and children is not None:
            c.zk.get_children = get_children  # type: ignore[method-assign]
            return [t for t in children if t != hidden]
        return children

    c.zk.get_children = without_hidden  # type: ignore[method-assign]


def test_a_failover_keeps_the_request_of_a_topic_made_after_it_read_the_topics() -> None:
    """Item 29: a topic created just after the failover read /brokers/topics, then marked
    for deletion before it read /admin/delete_topics. The request is newer than the
    topic: kept, and the topic's creation, heard of next, starts its deletion."""
    data = ZooKeeperData()
    data.topic("late", {0: (1, 2, 3)})
    data.request_deletion("late")
    with Controller(data) as c:
        topics_read_before(c, "late")
        c.elect()
        assert "late" not in c.controller.ctx.all_topics
        assert data.has(paths.delete_topic("late"))
        c.run(ev.TopicChange())  # the creation's watch
        c.drain()
        assert "late" in c.controller.ctx.topics_to_be_deleted
        c.answer_stop_replicas("late")
        assert not data.has(paths.topic("late"))
        assert not data.has(paths.delete_topic("late"))


def test_but_not_a_leftover_request_older_than_a_topic_made_under_its_name() -> None:
    """A leftover request, and a topic made again under its name just after the failover
    read /brokers/topics: the request is older than the topic, so not for it."""
    data = ZooKeeperData()
    data.request_deletion("t")
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data) as c:
        topics_read_before(c, "t")
        c.elect()
        assert not data.has(paths.delete_topic("t"))
        c.run(ev.TopicChange())
        c.drain()
        assert "t" in c.controller.ctx.all_topics
        assert "t" not in c.controller.ctx.topics_to_be_deleted


def test_a_running_controller_keeps_the_request_of_a_topic_whose_creation_is_queued() -> None:
    """Item 29 outside a failover: t1 marked for deletion (its TopicDeletion queued), then
    t2 created (its TopicChange queued behind) and marked at once, before the
    TopicDeletion reads the requests (the children watch spent, no second TopicDeletion
    comes). The request names a topic the controller has not heard of yet; it removed it
    as one for an unknown topic (as Kafka 2.8's processTopicDeletion does), and t2 stayed
    for good. It is newer than t2's znode: kept, and t2's creation starts its deletion."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t1", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.request_deletion("t1")
        c.controller.events.put(ev.TopicDeletion())
        add_topic(data.zk, "t2", {0: (1, 2, 3)})
        c.controller.events.put(ev.TopicChange())
        data.request_deletion("t2")
        c.drain()
        c.answer_stop_replicas("t1")
        c.answer_stop_replicas("t2")
        assert not data.has(paths.topic("t1"))
        assert not data.has(paths.topic("t2"))
        assert not data.has(paths.delete_topic("t2"))


def test_a_running_controller_removes_a_request_naming_no_topic_or_older_than_its_topic() -> None:
    """The requests the rule of item 29 removes, outside a failover too: one naming no
    topic, and one older than the topic (not yet heard of) now holding its name."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    with Controller(data).elect() as c:
        data.request_deletion("gone")
        data.request_deletion("t")
        add_topic(data.zk, "t", {0: (1, 2, 3)})  # its TopicChange not yet run
        c.run(ev.TopicDeletion())
        assert not data.has(paths.delete_topic("gone"))
        assert not data.has(paths.delete_topic("t"))
        c.run(ev.TopicChange())
        c.drain()
        assert "t" in c.controller.ctx.all_topics
        assert "t" not in c.controller.ctx.topics_to_be_deleted


def test_stale_deletion_requests_are_those_naming_no_topic_or_older_than_it() -> None:
    got = stale_deletion_requests(
        [
            ("none", 5, None),  # names no topic
            ("older", 5, 7),  # older than the topic holding its name now
            ("newer", 9, 7),  # the topic's creation not heard of yet: kept
            ("same", 7, 7),  # made in the topic's own transaction (a multi): not older
            ("gone", None, 7),  # the request went meanwhile: nothing to remove
            ("neither", None, None),
        ]
    )
    assert got == ["none", "older"]


# --- a deletion held for a reassignment, and its partitions' leaders lost ----------------


def held_for_a_reassignment(data: ZooKeeperData) -> Controller:
    """Topic t's partition 0 (replicas 1, 2) being moved to 2, 3, then t marked for
    deletion: held for the reassignment (item 33)."""
    data.topic("t", {0: (1, 2)})
    c = Controller(data).elect()
    data.request_reassignment({T0: (2, 3)})
    c.run(ev.PartitionReassignment())
    c.drain()
    data.request_deletion("t")
    c.run(ev.TopicDeletion())
    c.drain()
    assert "t" in c.controller.ctx.topics_ineligible_for_deletion
    assert data.state(T0).leader == 1
    return c


def test_a_held_topics_partition_is_led_again_after_its_leaders_broker_is_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its partitions are led as any topic's until its deletion starts (item 36): elected
    when their leader's broker is lost, so the reassignment completes and the deletion
    goes on. It was left leaderless for good, even across the broker's return."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    with held_for_a_reassignment(data) as c:
        data.unregister(1)
        c.run(ev.BrokerChange())
        c.drain()
        assert data.state(T0).leader == 2
        data.register(1)
        c.run(ev.BrokerChange())
        c.drain()
        assert data.state(T0).leader == 2
        data.leader_sets_isr(T0, (2, 3))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        assert data.assignment("t").partitions == {0: (2, 3)}
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))
        assert not data.has(paths.delete_topic("t"))
    assert refused_transitions(caplog) == []


def test_and_a_failover_elects_a_held_topics_offline_partitions() -> None:
    """A failover that finds a held topic's partition without a leader (as an earlier
    version of the controller left it), or its leader's broker gone, elects it."""
    data = ZooKeeperData(brokers=(2, 3))
    data.topic(
        "t",
        {0: (2, 3, 1), 1: (2, 3, 1)},
        {0: LeaderAndIsr(-1, 3, (2,), 3), 1: LeaderAndIsr(1, 0, (1, 2), 0)},
        adding={0: (3,), 1: (3,)},
        removing={0: (1,), 1: (1,)},
    )
    data.request_deletion("t")
    with Controller(data, broker_id=2).elect() as c:
        assert "t" in c.controller.ctx.topics_ineligible_for_deletion
        assert data.state(T0).leader == 2
        assert data.state(TopicPartition("t", 1)).leader == 2
        assert not c.stop_replica_deletes("t")


# --- a StopReplica answer of a broker's earlier incarnation ------------------------------


def _bounce(c: Controller, data: ZooKeeperData, broker_id: int, *, seen_dead: bool) -> None:
    """The broker registers anew: seen as a bounce (a session expiry with the process
    alive), or as a death and a start (a restart on its port)."""
    if seen_dead:
        data.unregister(broker_id)
        c.run(ev.BrokerChange())
        c.drain()
    data.register(broker_id)
    c.run(ev.BrokerChange())
    c.drain()


def _deleting_on_2_then_bounced(
    c: Controller, data: ZooKeeperData, seen_dead: bool
) -> list[BrokerRequest]:
    """Topic t's replica on broker 2 asked to delete, then broker 2 bounced and asked
    again; the StopReplica requests meant for its earlier incarnation."""
    data.request_deletion("t")
    c.run(ev.TopicDeletion())
    c.drain()
    old_to_2 = [r for r in c.stop_replica_deletes("t") if r.broker_id == 2]
    assert old_to_2
    _bounce(c, data, 2, seen_dead=seen_dead)
    c.sent[:] = [r for r in c.sent if r not in old_to_2]
    assert [r for r in c.stop_replica_deletes("t") if r.broker_id == 2], "no retry"
    return old_to_2


@pytest.mark.parametrize("seen_dead", [False, True], ids=["bounce", "death-and-start"])
@pytest.mark.parametrize(
    "late_answer",
    [
        # The new process answers the old sender's request (resent to it on the same
        # port) once registered: STALE_BROKER_EPOCH listing no partition, as Kafka's
        # KafkaApis answers it. Kafka's callback sends no event for it.
        {"error_code": int(ErrorCode.STALE_BROKER_EPOCH), "partition_errors": []},
        # The old process answered before it went, its event handled after the bounce.
        {
            "error_code": 0,
            "partition_errors": [
                {
                    "topic_name": "t",
                    "partition_index": 0,
                    "error_code": int(ErrorCode.KAFKA_STORAGE_ERROR),
                }
            ],
        },
    ],
    ids=["stale-epoch-no-partitions", "earlier-incarnation-partition-error"],
)
def test_a_late_stop_replica_answer_of_a_bounced_broker_leaves_its_deletion_alone(
    seen_dead: bool, late_answer: dict[str, Any]
) -> None:
    """A StopReplica (delete) answer meant for the broker's earlier incarnation, handled
    after the controller asked the new one to delete again: it failed the replica just
    put in ReplicaDeletionStarted, the topic became ineligible, and the new incarnation's
    'deleted' then completed nothing (item 31): the deletion stalled for good."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (2,)})
    with Controller(data).elect() as c:
        old_to_2 = _deleting_on_2_then_bounced(c, data, seen_dead)
        for r in old_to_2:
            c.controller._on_response(r, late_answer)
        c.drain()
        assert "t" not in c.controller.ctx.topics_ineligible_for_deletion
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t")), "topic t never deleted"


def test_a_refused_stop_replica_listing_no_partition_fails_no_replica(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A top-level error with no partition listed (the broker refused the whole request)
    says nothing of any partition: Kafka's callback sends no event. It is logged."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (2,)})
    with Controller(data).elect() as c:
        data.request_deletion("t")
        c.run(ev.TopicDeletion())
        c.drain()
        (to_2,) = [r for r in c.stop_replica_deletes("t") if r.broker_id == 2]
        c.controller._on_response(
            to_2, {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "partition_errors": []}
        )
        assert c.drain() == []
        assert "t" not in c.controller.ctx.topics_ineligible_for_deletion
        assert any("STALE_CONTROLLER_EPOCH" in r.getMessage() for r in caplog.records)
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))


def test_a_deleted_topics_znode_handler_is_unregistered() -> None:
    """Kafka's completeDeleteTopic mutes the topic's partition modifications handler, so
    that a topic made again under its name is not taken for a change of the old one: once
    the deletion completes, no handler of the controller watches the topic's znode."""
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        assert c.zk.handlers.get(paths.topic("t"))
        data.request_deletion("t")
        c.run(ev.TopicDeletion())
        c.drain()
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))
        assert not c.zk.handlers.get(paths.topic("t"))


def test_a_deleted_topics_partition_handlers_are_unregistered() -> None:
    """The controller's per-partition leftovers of a deleted topic (a watch on a
    partition's state, a reassignment it remembers) go with its deletion: they are found
    by the topic's partitions, so before the context forgets them (Kafka's
    completeDeleteTopic mutes the handlers first). A watch left there would take a topic
    made again under the name for a reassignment of the old one."""
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    tp = TopicPartition("t", 0)
    state_path = paths.partition_state("t", 0)
    with Controller(data).elect() as c:
        ctl = c.controller
        ctl.handlers.register(zk_handlers.partition_reassignment_isr_change(ctl.events.put, tp))
        ctl.reassignments.zk_triggered[tp] = (1, 2, 3)
        assert c.zk.handlers.get(state_path)
        data.request_deletion("t")
        c.run(ev.TopicDeletion())
        c.drain()
        c.answer_stop_replicas("t")
        assert not data.has(paths.topic("t"))
        assert not c.zk.handlers.get(state_path)
        assert tp not in ctl.reassignments.zk_triggered


def test_a_late_deletion_answer_for_a_replica_a_reassignment_brought_back_leaves_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """t-0 moved off broker 1 (its StopReplica, deleting, unanswered), then back onto it,
    and t queued for deletion meanwhile, held for that reassignment (in service). The
    old StopReplica's failure answer then comes: it is not the deletion's (none started),
    and replica 1, being added again, stays so and in the ISR."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2)})
    with Controller(data).elect() as c:
        data.request_reassignment({T0: (2, 3)})
        c.run(ev.PartitionReassignment())
        c.drain()
        data.leader_sets_isr(T0, (1, 2, 3))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        (to_1,) = [r for r in c.stop_replica_deletes("t") if r.broker_id == 1]
        data.request_reassignment({T0: (2, 3, 1)})
        c.run(ev.PartitionReassignment())
        c.drain()
        data.leader_sets_isr(T0, (2, 3, 1))
        data.request_deletion("t")
        c.run(ev.TopicDeletion())
        c.drain()
        ctx = c.controller.ctx
        assert "t" in ctx.topics_ineligible_for_deletion
        assert ctx.is_topic_in_service("t")
        assert ctx.replica_state(PartitionReplica(T0, 1)) is R.NEW  # being added
        failed = int(ErrorCode.KAFKA_STORAGE_ERROR)
        c.controller._on_response(
            to_1,
            {
                "error_code": 0,
                "partition_errors": [
                    {"topic_name": "t", "partition_index": 0, "error_code": failed}
                ],
            },
        )
        c.drain()
        assert ctx.replica_state(PartitionReplica(T0, 1)) is R.NEW
        assert 1 in data.state(T0).isr
    assert refused_transitions(caplog) == []
