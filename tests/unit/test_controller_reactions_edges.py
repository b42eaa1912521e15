"""Edges of the controller's reactions (controller/reactions.py) the scenario tests left
open, found by mutation testing: what a broker's start lets resume, which partitions an
ISR change notification or a preferred election takes, a controlled shutdown's moves, and
a broker's LeaderAndIsr answer naming replicas on a failed log directory (Kafka 2.8
KafkaController's onBrokerStartup, processIsrChangeNotification, onReplicaElection,
doControlledShutdown, processLeaderAndIsrResponseReceived)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller import reactions
from controller.context import PartitionReplica, PartitionStateName, ReplicaStateName
from controller.reassignment import reassign_partition
from tests.unit.test_state_machines import Cluster
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import LeaderAndIsr, TopicPartition

P = PartitionStateName
R = ReplicaStateName

T = "orders"
T0, T1 = TopicPartition(T, 0), TopicPartition(T, 1)


# --- a broker's start: what it lets resume ------------------------------------------------


def test_a_start_resumes_the_reassignments_whose_target_holds_the_broker() -> None:
    """onBrokerStartup resumes the reassignments with a target replica on a new broker:
    one kept from the origin counts as one being added does; one being removed does not."""
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create_topic(T, {0: (1, 2, 3)})
    c.kill(4)
    assert not reassign_partition(c.psm, c.rsm, T0, (1, 2, 4))  # waits for 4
    c.kill(2)
    assert c.start(2).reassignments == [T0]  # kept in the target, not being added
    c.kill(3)
    assert c.start(3).reassignments == []  # being removed
    assert c.start(4).reassignments == [T0]  # being added


def test_a_start_lets_go_only_the_held_deletions_with_a_replica_on_the_broker() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2)})
    c.kill(3)
    c.ctx.topics_to_be_deleted.add(T)
    c.deletion.mark_ineligible([T], "a replica is offline")
    assert c.start(3).deletions == []  # no replica of it on 3
    c.kill(2)
    assert c.start(2).deletions == [T]


# --- an ISR change notification --------------------------------------------------------


def test_an_isr_change_does_not_elect_an_offline_partition_of_a_topic_being_deleted() -> None:
    """As test_an_offline_partition_an_isr_change_made_electable_is_elected, but the topic
    is queued for deletion meanwhile: its partitions are no longer elected (the deletion
    takes them Offline, then NonExistent)."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]
    c.leader_sets_isr(T0, (1, 2))
    c.kill(2)
    assert c.ctx.partition_state(T0) is P.OFFLINE
    c.ctx.topics_to_be_deleted.add(T)
    c.store.leader_change(T0, lambda lai: LeaderAndIsr(1, lai.leader_epoch, (1, 3), lai.zk_version))
    c.isr_change_notification([T0])
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.leader_and_isr(T0).leader == 1
    assert c.ctx.leadership[T0].leader_and_isr.isr == (1, 3)  # the state read is adopted


def test_an_isr_change_leaving_no_online_isr_member_elects_nothing() -> None:
    """An Offline partition whose ISR read holds no online replica is not handed to an
    election (which would fail, read its state again and warn): the notification answers
    nothing."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.leader_sets_isr(T0, (1,))
    c.kill(1)
    assert c.ctx.partition_state(T0) is P.OFFLINE
    states = c.store.read_partition_states([T0])
    reads = c.store.reads
    assert reactions.isr_changes_noticed(c.psm, states) == {}
    assert c.store.reads == reads  # not read again
    assert c.ctx.partition_state(T0) is P.OFFLINE


# --- a preferred election ---------------------------------------------------------------


def test_a_preferred_election_leaves_out_topics_queued_for_deletion() -> None:
    """onReplicaElection's callers (the auto rebalance, the admin's request) skip the
    partitions of topics queued for deletion."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.create_topic("other", {0: (1, 2, 3)})
    u0 = TopicPartition("other", 0)
    c.kill(1)
    c.start(1)
    for tp in (T0, u0):
        c.leader_sets_isr(tp, (2, 3, 1))  # 1 caught up
    assert c.leader_and_isr(T0).leader == 2
    assert c.leader_and_isr(u0).leader == 2
    c.ctx.topics_to_be_deleted.add(T)
    c.deletion.mark_ineligible([T], "held")  # even held before its deletion started
    results = reactions.preferred_election(c.psm, [T0, u0])
    assert list(results) == [u0]
    assert c.leader_and_isr(u0).leader == 1
    assert c.leader_and_isr(T0).leader == 2


def test_a_preferred_election_takes_only_partitions_not_led_by_their_first_replica() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2), 1: (3, 1)})
    c.kill(1)
    c.start(1)
    c.leader_sets_isr(T0, (2, 1))  # 1 caught up
    assert c.leader_and_isr(T0).leader == 2  # its last replica leads
    before = c.leader_and_isr(T1)
    assert before.leader == 3  # its first replica leads
    results = reactions.preferred_election(c.psm, [T0, T1])
    assert list(results) == [T0]
    assert c.leader_and_isr(T0).leader == 1
    assert c.leader_and_isr(T1) == before  # not written


# --- an admin's ElectLeaders ------------------------------------------------------------


def test_an_admin_unclean_election_moves_a_lead_off_a_broker_shutting_down() -> None:
    """Kafka's processReplicaLeaderElection takes for an unclean election the partitions
    whose leader is not among the live brokers, which leave out those shutting down: a
    stopping broker left leading (no ISR member to take over) is replaced by a live
    replica."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]  # no one in the ISR to take over
    results = reactions.admin_election(c.psm, [T0], reactions.UNCLEAN_ELECTION)
    assert results[T0] == (ErrorCode.NONE, None, 2)
    assert c.leader_and_isr(T0).leader == 2


def test_an_admin_election_of_a_partition_in_no_electable_state_says_so() -> None:
    """A partition the state machine does not take Online (its state is none it moves
    from) is answered as a failed election with its state, not as elected."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.kill(1)
    c.start(1)
    c.leader_sets_isr(T0, (2, 3, 1))
    c.ctx.set_partition_state(T0, P.NON_EXISTENT)
    results = reactions.admin_election(c.psm, [T0], reactions.PREFERRED_ELECTION)
    assert results[T0] == (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        f"partition {T0} is in state NonExistentPartition",
        -1,
    )
    assert c.leader_and_isr(T0).leader == 2


# --- a broker's loss: who is told ---------------------------------------------------------


def update_metadata_counts(c: Cluster) -> dict[int, int]:
    counts: dict[int, int] = {}
    for r in c.requests(ApiKey.UPDATE_METADATA):
        counts[r.broker_id] = counts.get(r.broker_id, 0) + 1
    return counts


def test_the_loss_of_a_broker_hosting_nothing_is_told_to_every_live_broker() -> None:
    """No partition changes, so no election or ISR change tells the brokers: an
    UpdateMetadata without partitions does (Kafka 3.1's onReplicasBecomeOffline, KAFKA-13225)."""
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create_topic(T, {0: (1, 2, 3)})
    c.sent.clear()
    c.kill(4)
    assert update_metadata_counts(c) == {1: 1, 2: 1, 3: 1}
    [um] = c.requests(ApiKey.UPDATE_METADATA)[:1]
    assert um.body["topic_states"] == []


def test_a_loss_that_changes_partitions_sends_no_extra_update_metadata() -> None:
    """Where the replicas' Offline step or an election told every broker, no partitionless
    UpdateMetadata follows, whether or not some other partition stays offline."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.sent.clear()
    c.kill(3)  # a follower: its Offline step tells every broker
    assert update_metadata_counts(c) == {1: 1, 2: 1}
    c = Cluster(brokers=(1, 2, 3, 4, 5))
    c.create_topic(T, {0: (1, 2, 3), 1: (5,)})
    c.kill(5)  # T1 stays offline
    c.leader_sets_isr(T0, (1,))
    assert c.controlled_shutdown(1) == [T0]  # no one in the ISR to take over
    c.leader_sets_isr(T0, (1, 2))  # 2 caught up again
    c.sent.clear()
    c.kill(4)  # hosts nothing; 1, shutting down, is replaced at T0; T1 is not elected
    assert c.leader_and_isr(T0).leader == 2
    assert c.ctx.partition_state(T1) is P.OFFLINE
    assert update_metadata_counts(c) == {1: 1, 2: 1, 3: 1}


# --- a log directory failure ------------------------------------------------------------


def test_a_log_dir_failure_of_a_broker_gone_since_leaves_its_replicas_offline() -> None:
    """onBrokerLogDirFailure asks the broker for its replicas' states again: one no longer
    live is left out (its loss took its replicas offline), its replicas not moved Online."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.kill(3)
    c.sent.clear()
    reactions.log_dir_failure(c.rsm, [3])
    assert c.ctx.replica_state(PartitionReplica(T0, 3)) is R.OFFLINE
    assert c.requests() == []
    reactions.log_dir_failure(c.rsm, [2])  # a live one is asked
    assert c.ctx.replica_state(PartitionReplica(T0, 2)) is R.ONLINE
    assert [r.broker_id for r in c.requests(ApiKey.LEADER_AND_ISR)] == [2]


def test_a_log_dir_failure_leaves_replicas_being_deleted_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Only replicas the replica state machine may move Online are asked again: one whose
    deletion started or succeeded is left as it is, no refused transition logged."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3)})
    c.ctx.topics_to_be_deleted.add(T)
    c.deletion.resume()
    c.deletion.complete_replica_deletion([PartitionReplica(T0, 1)])
    started, done = PartitionReplica(T0, 2), PartitionReplica(T0, 1)
    assert c.ctx.replica_state(started) is R.DELETION_STARTED
    assert c.ctx.replica_state(done) is R.DELETION_SUCCESSFUL
    caplog.clear()
    reactions.log_dir_failure(c.rsm, [1, 2])
    assert c.ctx.replica_state(started) is R.DELETION_STARTED
    assert c.ctx.replica_state(done) is R.DELETION_SUCCESSFUL
    assert [r.getMessage() for r in caplog.records if "state transition" in r.getMessage()] == []


def test_a_storage_error_for_a_partition_moved_off_the_broker_changes_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A LeaderAndIsr answer can arrive after a reassignment moved the replica away: the
    partition is recorded on the failed directory, but no replica of it goes offline."""
    c = Cluster(brokers=(1, 2, 3, 4))
    c.create_topic(T, {0: (1, 2, 3)})
    assert not reassign_partition(c.psm, c.rsm, T0, (1, 2, 4))
    c.leader_sets_isr(T0, (1, 2, 3, 4))  # 4 caught up
    assert reassign_partition(c.psm, c.rsm, T0)
    assert c.ctx.replicas(T0) == (1, 2, 4)
    before, writes = c.leader_and_isr(T0), len(c.store.writes)
    caplog.clear()
    new = reactions.replicas_reported_offline(
        c.psm, c.rsm, 3, [T0], [], c.deletion.fail_replica_deletion
    )
    assert new == {T0}
    assert c.leader_and_isr(T0) == before
    assert len(c.store.writes) == writes
    assert [r.getMessage() for r in caplog.records if "state transition" in r.getMessage()] == []


# --- a leader lacking its log ---------------------------------------------------------


def test_a_partition_a_leader_lacking_its_log_leaves_offline_is_elected_uncleanly_at_once() -> None:
    """As test_without_a_live_member_left_the_partition_waits_offline_for_one, but the topic
    allows unclean elections: the Offline partition is elected at once, as any Offline
    partition, by a live replica out of the ISR."""
    c = Cluster(brokers=(1, 2, 3), unclean_default=True)
    c.create_topic(T, {0: (2, 1, 3)})
    c.leader_sets_isr(T0, (2,))  # 1 and 3 fell behind
    c.kill(3)
    c.leader_sets_isr(T0, (2, 3))  # a state as a failover may load it: 3 not registered
    written = reactions.leaders_lacking_their_logs(c.psm, 2, [T0])
    assert (written[T0].leader, written[T0].isr) == (-1, (3,))
    lai = c.leader_and_isr(T0)
    assert lai.leader in (1, 2)
    assert c.ctx.partition_state(T0) is P.ONLINE


# --- a controlled shutdown --------------------------------------------------------------


def test_a_controlled_shutdown_leaves_single_replica_partitions_alone() -> None:
    """doControlledShutdown acts on the partitions with more than one replica: a single
    replica's partition is neither moved nor counted as one the broker led."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1,), 1: (1, 2)})
    c.sent.clear()
    writes = len(c.store.writes)
    led, remaining = reactions.controlled_shutdown_moves(c.psm, c.rsm, 1)
    assert (led, remaining) == ([T1], [])
    assert c.leader_and_isr(T0).leader == 1
    assert len(c.store.writes) == writes + 1  # T1's move only
    assert c.ctx.shutting_down_broker_ids == {1}


def test_a_controlled_shutdown_logs_its_isr_shrinks_as_such(tmp_path: Path) -> None:
    """The stopping broker's leaving the ISRs of the partitions it follows is logged with
    the reason controlled_shutdown, not as a replica gone offline."""
    c = Cluster(brokers=(1, 2, 3), log_dir=tmp_path)
    c.create_topic(T, {0: (1, 2, 3)})
    led, _remaining = reactions.controlled_shutdown_moves(c.psm, c.rsm, 2)
    assert led == []
    assert c.leader_and_isr(T0).isr == (1, 3)
    c.state_log.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    last = [r for r in rows if r["event"] == "partition_state"][-1]
    assert (last["isr"], last["reason"]) == ([1, 3], "controlled_shutdown")


def test_a_controlled_shutdown_stops_the_broker_following_without_deleting() -> None:
    """doControlledShutdown sends the stopping broker a StopReplica (deletePartition
    false) of each partition it follows, before it takes it out of the ISR (whose Offline
    move sends another, with the new leader epoch); none of those it led, nor to other
    brokers."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (1, 2, 3), 1: (2, 1, 3)})
    c.sent.clear()
    reactions.controlled_shutdown_moves(c.psm, c.rsm, 2)
    stops = c.requests(ApiKey.STOP_REPLICA)
    assert [r.broker_id for r in stops] == [2, 2]
    assert [
        (t["topic_name"], p["partition_index"], p["delete_partition"], p["leader_epoch"])
        for r in stops
        for t in r.body["topic_states"]
        for p in t["partition_states"]
    ] == [(T, 0, False, 0), (T, 0, False, 1)]


def test_a_leader_lacking_its_log_of_a_topic_queued_for_deletion_is_left_leading() -> None:
    """Partitions of a topic queued for deletion are not led as others' are: their
    deletion takes them offline, no leadership is moved."""
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic(T, {0: (2, 1, 3)})
    c.ctx.topics_to_be_deleted.add(T)
    before, writes = c.leader_and_isr(T0), len(c.store.writes)
    assert reactions.leaders_lacking_their_logs(c.psm, 2, [T0]) == {}
    assert c.leader_and_isr(T0) == before
    assert len(c.store.writes) == writes
