"""A reassignment's step that meets a ZooKeeper error (a lost connection) part-way: the
controller drops the event's batched requests, resigns and starts a new term from what
ZooKeeper holds (item 35 of docs/architecture.md). What ZooKeeper holds must then be
enough for the next term to finish the job, so each step writes in Kafka's order:

- a completion sends the removed replicas' StopReplicas before it writes the final
  assignment (Kafka's B4-B5 before B6): a failure before the write leaves the replicas
  being removed in the topic's znode, and the next term stops them again;
- a reassignment writes the topic's znode with its new replicas (Kafka's U1) before it
  gives a partition that never had a leader its first one among them (item 26).

Found by review, over the in-memory controller (tests/unit/fake_cluster.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from controller import events as ev
from controller.request_batch import BrokerRequest
from tests.unit.fake_cluster import Controller, ZooKeeperData
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import SetData
from zkdata.znodes import TopicAssignment, TopicPartition, encode_topic, new_topic_id

T0 = TopicPartition("t", 0)


def _stops_to(c: Controller, broker: int, *, delete: bool = True) -> list[BrokerRequest]:
    return [
        r
        for r in c.sent
        if r.api_key.name == "STOP_REPLICA"
        and r.broker_id == broker
        and r.delete_partitions == delete
        and T0 in r.partitions
    ]


def _fail_once(c: Controller, name: str, when: Callable[..., bool]) -> list[bool]:
    """The controller's ZooKeeper call ``name`` raises ConnectionLoss the first time
    ``when`` holds for its arguments; the list holds True until it did."""
    real = getattr(c.zk, name)
    armed = [True]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if armed[0] and when(*args, **kwargs):
            armed[0] = False
            raise ConnectionLoss()
        return real(*args, **kwargs)

    setattr(c.zk, name, flaky)
    return armed


def _writes_topic(ops: list[Any], **_kwargs: Any) -> bool:
    return any(isinstance(op, SetData) and op.path == paths.topic("t") for op in ops)


def _reassigning_t0_from_123_to_124() -> tuple[ZooKeeperData, Controller]:
    data = ZooKeeperData(brokers=(1, 2, 3, 4))
    data.topic("t", {0: (1, 2, 3)})
    c = Controller(data).elect()
    c.run(ev.AlterPartitionReassignments({T0: (1, 2, 4)}, lambda *a: None))
    c.drain()
    assert T0 in c.controller.ctx.partitions_being_reassigned
    c.sent.clear()
    return data, c


def test_a_replica_removed_by_a_reassignment_is_stopped_though_zookeeper_failed_after_the_final_write() -> (  # noqa: E501
    None
):
    """The completing event meets a lost connection after the final assignment was
    written (its look at /admin/reassign_partitions): the event's requests are dropped,
    and the next term, starting from the final assignment, no longer knows broker 3's
    replica. Its StopReplica (delete) went out before the write."""
    data, c = _reassigning_t0_from_123_to_124()
    with c:
        armed = _fail_once(c, "get", lambda path, **_: path == paths.REASSIGN_PARTITIONS)
        data.leader_sets_isr(T0, (1, 2, 3, 4))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()  # the failed event, then the re-election and its failover
        assert not armed[0], "the injected error did not happen"
        assert c.controller.is_active

        assert data.assignment("t").partitions == {0: (1, 2, 4)}
        assert not data.assignment("t").removing_replicas
        assert T0 not in c.controller.ctx.partitions_being_reassigned
        assert _stops_to(c, 3), "broker 3 was never told to delete its replica of t-0"


def test_a_replica_removed_by_a_reassignment_is_stopped_again_when_the_final_write_failed() -> None:
    """The final assignment's write itself meets the lost connection: ZooKeeper still
    shows the replica being removed, and the next term completes the reassignment again,
    stopping it again."""
    data, c = _reassigning_t0_from_123_to_124()
    with c:
        armed = _fail_once(c, "multi", _writes_topic)
        data.leader_sets_isr(T0, (1, 2, 3, 4))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.run(ev.ReassignmentIsrChanges())  # the one it queued, run here
        assert not armed[0], "the injected error did not happen"
        # Sent before the write that failed.
        assert _stops_to(c, 3)
        assert data.assignment("t").removing_replicas == {0: (3,)}
        c.sent.clear()
        c.drain()  # the re-election and its failover, which resumes the reassignment
        assert c.controller.is_active
        assert data.assignment("t").partitions == {0: (1, 2, 4)}
        assert not data.assignment("t").removing_replicas
        assert _stops_to(c, 3)


def test_the_stops_of_many_completed_reassignments_go_one_request_per_broker() -> None:
    """Sent before the final write, the completion's requests are still batched per
    broker: 20 partitions completing together send broker 3 one StopReplica."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4))
    data.topic("t", {p: (1, 2, 3) for p in range(20)})
    with Controller(data).elect() as c:
        tps = [TopicPartition("t", p) for p in range(20)]
        c.run(ev.AlterPartitionReassignments(dict.fromkeys(tps, (1, 2, 4)), lambda *a: None))
        c.drain()
        c.sent.clear()
        for tp in tps:
            data.leader_sets_isr(tp, (1, 2, 3, 4))
        # As the watches' events gather them: one event looks at them all.
        c.controller.reassignments.isr_changed.update(tps)
        c.run(ev.ReassignmentIsrChanges())
        assert data.assignment("t").partitions == {p: (1, 2, 4) for p in range(20)}
        deletes = [r for r in c.sent if r.api_key.name == "STOP_REPLICA" and r.delete_partitions]
        assert [(r.broker_id, len(r.partitions)) for r in deletes] == [(3, 20)]


def _new_partition_on_a_dead_broker() -> tuple[ZooKeeperData, Controller]:
    """t-0 created while its only replica's broker (3) is down: New, no state znode."""
    data = ZooKeeperData(brokers=(1, 2))
    c = Controller(data).elect()
    data.zk.put(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (3,)}, new_topic_id())))
    c.run(ev.TopicChange())
    c.drain()
    assert not data.has(paths.partition_state("t", 0))
    return data, c


def test_a_first_leader_elected_by_a_reassignment_is_one_of_the_durable_replicas() -> None:
    """The topic's znode write of the reassignment's step meets a lost connection: no
    first leader was elected outside the replicas ZooKeeper shows."""
    data, c = _new_partition_on_a_dead_broker()
    with c:
        armed = _fail_once(c, "multi", _writes_topic)
        c.run(ev.AlterPartitionReassignments({T0: (1, 2)}, lambda *a: None))
        c.drain()  # the failed event, then the re-election and its failover
        assert not armed[0], "the injected error did not happen"
        assert c.controller.is_active
        replicas = data.assignment("t").partitions[0]
        if data.has(paths.partition_state("t", 0)):
            state = data.state(T0)
            assert state.leader in replicas or state.leader < 0, (state, replicas)
            assert set(state.isr) <= set(replicas), (state, replicas)


def test_the_admins_retry_after_the_failed_step_moves_the_partition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The failed event answers NOT_CONTROLLER, which an AdminClient retries: the retry
    moves the partition without asking the state machines for a transition they refuse
    (a leader and ISR written before the znode made the next term take replicas it never
    started for led)."""
    data, c = _new_partition_on_a_dead_broker()
    with c:
        armed = _fail_once(c, "multi", _writes_topic)
        answers: list[tuple[Any, ...]] = []
        c.run(ev.AlterPartitionReassignments({T0: (1, 2)}, lambda *a: answers.append(a)))
        c.drain()
        assert not armed[0]
        assert answers[0][0] == ErrorCode.NOT_CONTROLLER  # retriable
        c.run(ev.AlterPartitionReassignments({T0: (1, 2)}, lambda *a: answers.append(a)))
        c.drain()
        assert answers[1][0] == ErrorCode.NONE
        refused = [r.getMessage() for r in caplog.records if "invalid" in r.getMessage().lower()]
        assert refused == []
        assert data.state(T0).leader in (1, 2)
        assert data.assignment("t").partitions[0] in ((1, 2), (1, 2, 3))
