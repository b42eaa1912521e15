"""Checks of a reassignment's steps that Kafka 2.8's KafkaController makes and the other
tests of controller/reassignment.py did not hold (found by mutation testing): the refusal
of a target naming a negative broker id, the leader replaced at completion when it is a
target replica on a broker shutting down, the topic's znode showing the replicas being
removed before a completion inside a block sends anything, and no leader epoch bump over
a state a newer controller wrote."""

from __future__ import annotations

from controller import reactions
from controller.context import PartitionReplica, ReplicaStateName
from controller.reassignment import api_reassignment_targets, coalesced_topic_writes
from tests.unit.test_reassignment import T0, T, reassign, started_on
from tests.unit.test_state_machines import EPOCH
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import LeaderAndIsr

R = ReplicaStateName


def test_a_negative_broker_id_is_refused_as_an_invalid_id_not_as_a_dead_broker() -> None:
    """Kafka's validateReplicas checks `replicas.exists(_ < 0)` before the live brokers:
    -1 is an invalid broker id ("Invalid broker id in replica list"), whatever the live
    brokers are; each check's own message goes back to the admin."""
    c = started_on((1, 2, 3), (1, 2))
    for replicas in [(1, -1), (-1,), (2, -5)]:
        _, refused = api_reassignment_targets(c.ctx, {T0: replicas})
        assert refused[T0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert "invalid broker id" in refused[T0].message, replicas
    _, refused = api_reassignment_targets(c.ctx, {T0: (1, 7)})
    assert "not alive" in refused[T0].message
    _, refused = api_reassignment_targets(c.ctx, {T0: ()})
    assert "empty replica list" in refused[T0].message
    _, refused = api_reassignment_targets(c.ctx, {T0: (1, 1)})
    assert "duplicate replica ids" in refused[T0].message


def test_a_completion_moves_the_leadership_off_a_target_replica_shutting_down() -> None:
    """Kafka's onPartitionReassignment (B3): a new leader is elected when the current one
    is not in the target or is not online, isReplicaOnline counting a broker shutting down
    as not online. Broker 1 leads (alone in the ISR, so its controlled shutdown could not
    move it) and is shutting down; 2 is back in the ISR: the completion to (1, 2) elects 2,
    not a bump that keeps 1."""
    c = started_on((1, 2, 3), (1, 2, 3))
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]  # no one to take over
    c.leader_sets_isr(T0, (1, 2))
    before = c.leader_and_isr(T0)
    assert before.leader == 1
    assert reassign(c, T0, (1, 2))
    after = c.leader_and_isr(T0)
    assert after.leader == 2
    assert after.leader_epoch > before.leader_epoch
    assert c.store.topics[T].partitions == {0: (1, 2)}


def test_a_completion_inside_a_block_writes_the_replicas_being_removed_first() -> None:
    """Kafka's U1 comes before B1-B5: a reassignment that completes at once (its target
    already in the ISR) has its topic's znode list the replica being removed before the
    StopReplica that deletes it goes out; inside coalesced_topic_writes that write is not
    left to the block's end, where a ZooKeeper error before it would leave the replica
    deleted on its broker and no record that it was being removed."""
    c = started_on((1, 2, 3), (1, 2, 3))
    before = len(c.store.topic_writes)
    written_when_stopped: list[int] = []
    send = c.ops.send

    def sending(requests: list[object]) -> None:
        if any(getattr(r, "api_key", None) is ApiKey.STOP_REPLICA for r in requests):
            written_when_stopped.append(len(c.store.topic_writes))
        send(requests)  # type: ignore[arg-type]

    c.ops.send = sending  # type: ignore[assignment]
    with coalesced_topic_writes(c.ops):
        assert reassign(c, T0, (1, 2))
    assert written_when_stopped, "the removed replica was never stopped"
    first_stop = written_when_stopped[0]
    assert first_stop > before
    shown = c.store.topic_writes[before]
    assert shown.partitions == {0: (1, 2, 3)}
    assert shown.removing_replicas == {0: (3,)}
    assert c.store.topics[T].partitions == {0: (1, 2)}
    assert not c.store.topics[T].removing_replicas
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.NON_EXISTENT


def test_no_leader_epoch_bump_over_a_state_a_newer_controller_wrote() -> None:
    """Kafka's updateLeaderEpoch refuses a partition whose state carries a controller
    epoch newer than its own (StateChangeFailedException): the reassignment's step
    writes no new leader epoch over it and sends no LeaderAndIsr for it."""
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    current = c.leader_and_isr(T0)
    c.store.put(T0, current, EPOCH + 1, version=current.zk_version)
    c.sent.clear()
    assert not reassign(c, T0, (1, 2, 4))
    after = c.store.state(T0)
    assert after.controller_epoch == EPOCH + 1
    assert after.leader_and_isr == LeaderAndIsr(
        current.leader, current.leader_epoch, current.isr, current.zk_version
    )
    states = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert all(s["leader_epoch"] == current.leader_epoch for s in states.values()), states


def test_a_replica_an_override_keeps_in_the_isr_is_not_sent_as_new_again() -> None:
    """A replica the first reassignment added (4) is in the ISR, holding the partition's
    data, when a new target drops it; it stays until the new target catches up (item
    18), started, not New: a log directory failure on its broker then sends it its
    partition as not new (Kafka's move to Online after onBrokerLogDirFailure), so a log
    in the failed directory is reported (KAFKA_STORAGE_ERROR), not made again empty in
    another directory while the replica counts in the ISR."""
    c = started_on((1, 2, 3, 4, 5, 6), (1, 2, 3))
    assert not reassign(c, T0, (4, 5, 1))
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.NEW
    c.leader_sets_isr(T0, (1, 2, 3, 4))  # 4 caught up, 5 not
    assert not reassign(c, T0, (1, 2, 6))  # 4 kept: in the ISR
    ra = c.ctx.full_assignment(T0)
    assert 4 in ra.adding
    assert 4 in ra.removing
    c.sent.clear()
    reactions.log_dir_failure(c.rsm, [4])
    c.ops.flush()
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sent[4]["is_new"] is False, sent[4]
