"""Checks of a reassignment's steps that Kafka 2.8's KafkaController makes and the other
tests of controller/reassignment.py did not hold (found by mutation testing): the refusal
of a target naming a negative broker id, the leader replaced at completion when it is a
target replica on a broker shutting down, the topic's znode showing the replicas being
removed before a completion inside a block sends anything, and no leader epoch bump over
a state a newer controller wrote."""

from __future__ import annotations

import json
from pathlib import Path

from controller import reactions
from controller.context import PartitionReplica, ReplicaStateName
from controller.reassignment import (
    api_reassignment_targets,
    coalesced_topic_writes,
    reassign_partitions,
)
from tests.unit.test_reassignment import T0, T, reassign, resume, started_on
from tests.unit.test_state_machines import EPOCH, Cluster
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import LeaderAndIsr, TopicPartition

T1 = TopicPartition(T, 1)

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


def test_a_first_leader_elected_by_a_reassignment_is_started_not_new() -> None:
    """A partition that never had a leader gets its first one on its new replica (4) at
    the reassignment's first step, as onNewPartitionCreation does, its ISR's replicas then
    Online: a log directory failure on 4's broker before the completion sends it its
    partition as not new, so a log in the failed directory is reported, not made again."""
    c = Cluster(brokers=(4,))
    c.create_topic(T, {0: (1, 2, 3)})
    assert not reassign(c, T0, (4,))
    assert c.leader_and_isr(T0).leader == 4
    c.sent.clear()
    reactions.log_dir_failure(c.rsm, [4])
    c.ops.flush()
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sent[4]["is_new"] is False, sent[4]


def test_a_leader_being_removed_and_shutting_down_keeps_the_partition_when_none_else_can() -> None:
    """As test_a_completion_whose_target_left_the_isr_meanwhile_stays_in_progress, the
    leader (1, being removed) shrinking the ISR to itself before the election's write, but
    1 is shutting down (alone in the ISR, its controlled shutdown could not move it): it
    still leads, so the reassignment stays in progress under it rather than stopping it
    and leaving the partition without a leader."""
    c = started_on((1, 2, 3), (1, 2, 3))
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]
    c.leader_sets_isr(T0, (1, 2))
    c.store.race(T0, lambda lai: LeaderAndIsr(1, lai.leader_epoch, (1,), lai.zk_version))
    assert not reassign(c, T0, (2,))
    assert c.store.pending_races() == 0
    state = c.leader_and_isr(T0)
    assert (state.leader, state.isr) == (1, (1,))
    assert T0 in c.ctx.partitions_being_reassigned
    assert c.ctx.full_assignment(T0).target_replicas == (2,)
    assert c.ctx.replica_state(PartitionReplica(T0, 1)) is R.ONLINE


def test_nested_blocks_write_the_topics_znode_once_at_the_outer_end() -> None:
    """coalesced_topic_writes inside another is the outer one: nothing is written when the
    inner block ends, the outer's pending topics are kept, and the topic is written once."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2), 1: (2, 3)})
    before = len(c.store.topic_writes)
    with coalesced_topic_writes(c.ops):
        assert not reassign(c, T0, (1, 2, 3))
        with coalesced_topic_writes(c.ops):
            assert not reassign(c, T1, (2, 3, 1))
        assert len(c.store.topic_writes) == before
    [written] = c.store.topic_writes[before:]
    assert written.adding_replicas == {0: (3,), 1: (1,)}


def test_an_override_keeping_a_caught_up_replica_in_its_target_keeps_it_as_a_target() -> None:
    """Origin (1, 2, 3) moved to (4, 5, 1); 4 catches up; the new target (4, 6, 1) keeps 4:
    it is one of the target's replicas (being added), not one being removed (Kafka's
    reassignTo: removing = replicas not in the target), and the completion keeps it."""
    c = started_on((1, 2, 3, 4, 5, 6), (1, 2, 3))
    assert not reassign(c, T0, (4, 5, 1))
    c.leader_sets_isr(T0, (1, 2, 3, 4))
    assert not reassign(c, T0, (4, 6, 1))
    ra = c.ctx.full_assignment(T0)
    assert set(ra.adding) == {4, 6}
    assert set(ra.removing) == {2, 3}
    c.leader_sets_isr(T0, (1, 2, 3, 4, 6))
    assert reassign(c, T0, (4, 6, 1))
    assert c.store.topics[T].partitions == {0: (4, 6, 1)}


def test_an_offline_partition_learns_its_new_replica_set_by_a_bump_not_an_election() -> None:
    """Only a partition that never had a state (New) gets a first leader at the first
    step; an Offline one (its last ISR member dead, unclean election off) has its leader
    epoch bumped over its state as any other (updateLeaderEpochAndSendRequest), its
    replicas told the new replica set; no election is tried for it here."""
    c = started_on((1, 2, 3, 4), (1, 2))
    c.leader_sets_isr(T0, (1,))
    c.kill(1)
    before = c.leader_and_isr(T0)
    assert before.leader == -1
    assert not reassign(c, T0, (2, 4))
    after = c.leader_and_isr(T0)
    assert (after.leader, after.isr) == (-1, before.isr)
    assert after.leader_epoch == before.leader_epoch + 1


def test_a_bump_in_progress_is_logged_with_the_replica_set_its_brokers_learn(
    tmp_path: Path,
) -> None:
    """docs/state-change-log.md: a `partition_state` line is the state written, with the
    partition's replicas; a reassignment's first bump tells the brokers the full replica
    set (target and origin, Kafka's RS = ORS + TRS), and its line says the same."""
    c = started_on((1, 2, 3, 4), (1, 2, 3), tmp_path)
    assert not reassign(c, T0, (1, 2, 4))
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sent[1]["replicas"] == (1, 2, 4, 3)
    c.state_log.close()
    lines = (tmp_path / "state-change.log").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    [bump] = [r for r in rows if r["event"] == "partition_state" and r["reason"] == "reassign"]
    assert bump["replicas"] == [1, 2, 4, 3]


def test_states_given_for_some_partitions_only_are_read_for_all() -> None:
    """reassign_partitions' ``states``, read by the caller in this event, are used only
    when they cover every partition of the block: otherwise the states are read again."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2), 1: (2, 3)})
    partial = {T0: c.store.state(T0)}
    assert reassign_partitions(c.psm, c.rsm, {T0: (1, 2, 3), T1: (2, 3, 1)}, partial) == set()
    assert c.store.topics[T].adding_replicas == {0: (3,), 1: (1,)}


def test_a_new_replica_still_catching_up_stays_new_through_later_steps() -> None:
    """A step that leaves the reassignment in progress (an ISR change that did not let the
    new replica in) does not start the replica being added: it stays New until the
    completion (Kafka's B1), so a log directory failure on its broker meanwhile sends it
    its partition as new, and the broker makes the log in any online directory."""
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    assert not reassign(c, T0, (1, 2, 4))
    c.leader_sets_isr(T0, (1, 2))  # 3 fell behind; 4 has not caught up
    assert not resume(c, T0)
    assert c.ctx.replica_state(PartitionReplica(T0, 4)) is R.NEW
    c.sent.clear()
    reactions.log_dir_failure(c.rsm, [4])
    c.ops.flush()
    sent = c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)
    assert sent[4]["is_new"] is True, sent[4]


def test_a_target_adding_a_broker_shutting_down_is_refused() -> None:
    """Kafka's validateReplicas checks the replicas being added against
    controllerContext.liveBrokerIds, which leaves out the brokers shutting down: adding
    one is refused as not alive; keeping an origin replica on one is not."""
    c = started_on((1, 2, 3, 4), (1, 2, 3))
    assert c.controlled_shutdown(4) == []
    targets, refused = api_reassignment_targets(c.ctx, {T0: (1, 2, 4)})
    assert targets == {}
    assert refused[T0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "not alive" in refused[T0].message
    assert c.controlled_shutdown(3) == []
    assert api_reassignment_targets(c.ctx, {T0: (3, 1)})[0] == {T0: (3, 1)}
