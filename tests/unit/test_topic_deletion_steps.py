"""Steps of a topic deletion (controller/topic_deletion.py, Kafka 2.8's
TopicDeletionManager) the other tests did not hold (found by mutation testing), over the
state machines and the in-memory store (tests/unit/test_state_machines.py's Cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.context import PartitionReplica, ReplicaStateName
from controller.controller import stop_replica_partition_errors
from tests.unit.test_state_machines import (
    EPOCH,
    T0,
    T1,
    T2,
    Cluster,
    T,
    delete,
    dir_fails,
    refused_transitions,
    three_partitions,
)
from wire.api import ApiKey
from zkdata.znodes import LeaderAndIsr, TopicPartition

R = ReplicaStateName


def replicas_on(broker: int) -> list[PartitionReplica]:
    return [PartitionReplica(tp, broker) for tp in (T0, T1, T2)]


def test_a_failed_deletion_none_other_awaits_is_set_to_be_retried_at_once() -> None:
    """Kafka's failReplicaDeletion marks the replicas ineligible, holds the topic, then
    runs resumeDeletions: no replica of the topic is being deleted any more and some are
    ineligible, so those are moved back Offline (retryDeletionForIneligibleReplicas),
    ready for the deletion's next start, which a broker's return or a repaired log
    directory brings."""
    c = three_partitions()
    delete(c, T)
    c.deletion.complete_replica_deletion(replicas_on(1) + replicas_on(2))
    c.deletion.fail_replica_deletion(replicas_on(3))  # broker 3 answered with an error
    assert {c.ctx.replica_state(pr) for pr in replicas_on(3)} == {R.OFFLINE}
    assert T in c.ctx.topics_ineligible_for_deletion
    assert T in c.ctx.all_topics
    c.sent.clear()
    c.deletion.resume_for([T])
    assert {c.ctx.replica_state(pr) for pr in replicas_on(3)} == {R.DELETION_STARTED}
    deletes = [r for r in c.requests(ApiKey.STOP_REPLICA) if r.delete_partitions]
    assert [(r.broker_id, set(r.partitions)) for r in deletes] == [(3, {T0, T1, T2})]
    c.deletion.complete_replica_deletion(replicas_on(3))
    assert T not in c.ctx.all_topics


def test_while_another_replica_awaits_its_answer_a_failed_one_stays_ineligible() -> None:
    """resumeDeletions retries ineligible replicas only once no replica of the topic is
    being deleted (isAnyReplicaInState(topic, ReplicaDeletionStarted))."""
    c = three_partitions()
    delete(c, T)
    c.deletion.fail_replica_deletion(replicas_on(3))
    assert {c.ctx.replica_state(pr) for pr in replicas_on(3)} == {R.DELETION_INELIGIBLE}
    c.deletion.complete_replica_deletion(replicas_on(1) + replicas_on(2))
    assert {c.ctx.replica_state(pr) for pr in replicas_on(3)} == {R.OFFLINE}
    assert T in c.ctx.all_topics


def test_a_replica_on_a_failed_log_directory_holds_the_deletion_as_a_dead_one() -> None:
    """Kafka's onPartitionDeletion splits the replicas by isReplicaOnline(replica,
    partition), which counts a replica on a failed log directory of a live broker as
    offline: it is made ineligible and holds the topic; its broker is asked to delete
    only its other replicas."""
    c = three_partitions()
    assert dir_fails(c, 3, {T0}) == {T0}
    c.sent.clear()
    delete(c, T)
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.DELETION_INELIGIBLE
    assert {c.ctx.replica_state(PartitionReplica(tp, 3)) for tp in (T1, T2)} == {R.DELETION_STARTED}
    assert T in c.ctx.topics_ineligible_for_deletion
    deletes = [r for r in c.requests(ApiKey.STOP_REPLICA) if r.delete_partitions]
    assert {tp for r in deletes if r.broker_id == 3 for tp in r.partitions} == {T1, T2}


def test_a_replica_failed_twice_is_made_ineligible_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Broker 3 answers its StopReplica with an error, then dies while the other replicas'
    answers are awaited: its replicas are ineligible already, and ReplicaDeletionIneligible
    is no valid next state of itself (Kafka's validPreviousStates: Offline, DeletionStarted),
    so nothing is asked of the state machine the second time."""
    c = three_partitions()
    delete(c, T)
    c.deletion.fail_replica_deletion(replicas_on(3))
    c.kill(3)
    assert {c.ctx.replica_state(pr) for pr in replicas_on(3)} == {R.DELETION_INELIGIBLE}
    assert refused_transitions(caplog) == []
    c.deletion.complete_replica_deletion(replicas_on(1) + replicas_on(2))
    assert T in c.ctx.all_topics  # held for broker 3
    assert refused_transitions(caplog) == []


def test_every_live_broker_hears_the_partitions_are_being_deleted_at_each_start() -> None:
    """Kafka's onTopicDeletion sends every live broker an UpdateMetadata with leader -2
    (LeaderDuringDelete) for the topic's partitions, so they stop serving them, each time
    the deletion (re)starts: a broker back after holding it is told too."""
    c = three_partitions()
    c.kill(3)
    c.sent.clear()
    delete(c, T)
    for tp in (T0, T1, T2):
        sent = c.partition_states_sent(ApiKey.UPDATE_METADATA, tp)
        assert {b: s["leader"] for b, s in sent.items()} == {1: -2, 2: -2}
    c.deletion.complete_replica_deletion(replicas_on(1) + replicas_on(2))
    resume = c.start(3)
    c.sent.clear()
    c.deletion.resume_for(resume.deletions)
    for tp in (T0, T1, T2):
        sent = c.partition_states_sent(ApiKey.UPDATE_METADATA, tp)
        assert {b: s["leader"] for b, s in sent.items()} == {1: -2, 2: -2, 3: -2}


def test_a_completed_deletion_is_logged_once_its_znodes_are_gone(tmp_path: Path) -> None:
    """docs/state-change-log.md: the controller's `topic_deleted` line (topic, controller
    epoch) says a topic's deletion completed and its znodes are gone; the analytics cut a
    partition's history into generations there."""
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    delete(c, T)
    c.deletion.complete_replica_deletion(replicas_on(1) + replicas_on(2))

    def deleted_lines() -> list[dict[str, Any]]:
        rows = [
            json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()
        ]
        return [r for r in rows if r["event"] == "topic_deleted"]

    assert deleted_lines() == []  # held for broker 3's answers
    c.deletion.complete_replica_deletion(replicas_on(3))
    assert c.store.deleted_topics == [T]
    [line] = deleted_lines()
    assert (line["topic"], line["controller_epoch"]) == (T, EPOCH)


def test_a_deletion_takes_each_partitions_replicas_out_of_its_isr_in_one_write(
    tmp_path: Path,
) -> None:
    """Kafka's Offline step takes the replicas out of the ISRs a broker at a time: three
    writes of each partition (RF 3). Here one (item 56 of docs/architecture.md): the
    leader and ISR those three would leave, its leader epoch bumped once, one
    `partition_state` line (reason `deleted`) a partition."""
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    a_broker_at_a_time = three_partitions()
    for b in (1, 2, 3):  # Kafka's passes
        a_broker_at_a_time.rsm.handle_state_changes(replicas_on(b), R.OFFLINE, reason="deleted")
    delete(c, T)
    for tp in (T0, T1, T2):
        each = a_broker_at_a_time.leader_and_isr(tp)
        once = c.leader_and_isr(tp)
        assert (once.leader, once.isr) == (each.leader, each.isr) == (-1, (3,))
        assert (once.leader_epoch, once.zk_version) == (1, 1)
        assert (each.leader_epoch, each.zk_version) == (3, 3)
        assert c.ctx.leadership[tp].leader_and_isr == once
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    deleted = [r for r in rows if r["event"] == "partition_state" and r["reason"] == "deleted"]
    assert sorted((r["partition"], r["leader"], r["isr"]) for r in deleted) == [
        (0, -1, [3]),
        (1, -1, [3]),
        (2, -1, [3]),
    ]
    replicas = [pr for b in (1, 2, 3) for pr in replicas_on(b)]
    assert {c.ctx.replica_state(pr) for pr in replicas} == {R.DELETION_STARTED}
    stops = [r for r in c.requests(ApiKey.STOP_REPLICA) if r.delete_partitions]
    assert sorted((r.broker_id, sorted(r.partitions)) for r in stops) == [
        (b, [T0, T1, T2]) for b in (1, 2, 3)
    ]


def test_a_state_a_leader_changed_under_the_deletion_is_read_and_written_again() -> None:
    """The one write is conditional on the cached zkVersion: a leader's ISR change that
    landed first fails it (BadVersion), and the state ZooKeeper holds is decided again."""
    c = three_partitions()
    c.store.leader_change(
        T1, lambda lai: LeaderAndIsr(lai.leader, lai.leader_epoch, (2, 3), lai.zk_version)
    )
    delete(c, T)
    changed = c.leader_and_isr(T1)
    assert (changed.leader, changed.isr, changed.leader_epoch) == (-1, (3,), 1)
    assert c.ctx.leadership[T1].leader_and_isr == changed
    assert {c.ctx.replica_state(PartitionReplica(T1, b)) for b in (1, 2, 3)} == {R.DELETION_STARTED}


def test_a_stop_replica_answer_names_the_requests_partitions_where_it_lists_them_so() -> None:
    """The answer's partitions are the request's own TopicPartitions where they are listed
    in its order, as brokers answer (14 MB less held for 100,000); a partition listed out
    of order, or not asked, is still read; one left out is not reported."""
    asked = tuple(TopicPartition(t, p) for t in ("a", "b") for p in range(3))
    listed = [asked[0], asked[1], asked[3], TopicPartition("c", 0), asked[2]]
    response = {
        "error_code": 0,
        "partition_errors": [
            {"topic_name": tp.topic, "partition_index": tp.partition, "error_code": i}
            for i, tp in enumerate(listed)
        ],
    }
    errors = stop_replica_partition_errors(response, asked)
    assert errors == {tp: i for i, tp in enumerate(listed)}
    assert [any(tp is a for a in asked) for tp in errors] == [True, True, False, False, False]
    assert stop_replica_partition_errors(response) == errors
    assert stop_replica_partition_errors({"error_code": 9, "partition_errors": []}, asked) == {}
