"""Edges of the partition and replica state machines that the scenarios of
test_state_machines leave open (PartitionStateMachine/ReplicaStateMachine.scala)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.context import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from controller.election import ElectionStrategy
from controller.state_machines import StateChangeFailed, replicas_by_partition
from tests.unit.test_state_machines import EPOCH, T0, T1, T2, Cluster, T, three_partitions
from wire.api import ApiKey
from zkdata.znodes import LeaderAndIsr, TopicPartition

P = PartitionStateName
R = ReplicaStateName


# --- a failover's initial partition states -------------------------------------------


def test_a_leader_on_a_failed_log_directory_starts_its_partition_offline() -> None:
    """initializePartitionState: Online only when the leader is online (isReplicaOnline,
    which a replica on a failed log directory is not, though its broker lives)."""
    c = Cluster(brokers=(1, 2, 3))
    c.load(T0, (1, 2, 3), LeaderAndIsr(1, 4, (1, 2, 3), 9))
    c.load(T1, (2, 1, 3), LeaderAndIsr(2, 4, (2, 1, 3), 9))
    c.load(T2, (3, 1, 2), None)
    c.ctx.replicas_on_offline_dirs = {1: {T0}, 2: {TopicPartition("other", 0)}}
    c.psm.initialize_states()
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.ctx.partition_state(T1) is P.ONLINE
    assert c.ctx.partition_state(T2) is P.NEW
    assert c.ctx.offline_by_topic == {T0.topic: 1}


def test_initial_states_count_an_offline_state_held_from_before() -> None:
    """The Offline count covers every partition state the context holds, not only those
    this pass wrote."""
    c = Cluster(brokers=(1, 2))
    c.load(T0, (1, 2), LeaderAndIsr(3, 4, (3,), 9))  # leader on dead broker 3
    c.load(T1, (1, 2), LeaderAndIsr(1, 4, (1, 2), 9))
    gone = TopicPartition("gone", 0)
    c.ctx.partition_states[gone] = P.OFFLINE
    c.psm.initialize_states()
    assert c.ctx.partition_state(T0) is P.OFFLINE
    assert c.ctx.offline_by_topic == {T0.topic: 1, "gone": 1}


# --- bringing partitions online -------------------------------------------------------


def test_the_online_trigger_passes_by_a_topic_queued_for_deletion() -> None:
    """triggerOnlinePartitionStateChange leaves out topics queued up for deletion: an
    Offline partition of one is not elected, one of a topic in service is."""
    c = Cluster(brokers=(1, 2, 3))
    doomed = TopicPartition("doomed", 0)
    for tp in (T0, doomed):
        c.load(tp, (1, 2, 3), LeaderAndIsr(1, 4, (1, 2, 3), 9))
    c.psm.initialize_states()
    c.ctx.remove_live_brokers([1])  # as a broker loss finds it, before its elections
    c.ctx.topics_to_be_deleted.add("doomed")
    c.ctx.set_partition_states((T0, doomed), P.OFFLINE)
    before = c.leader_and_isr(doomed)
    result = c.psm.trigger_online_partition_state_change()
    assert list(result) == [T0]
    assert c.leader_and_isr(T0) == LeaderAndIsr(2, 5, (2, 3), 10)
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.ctx.partition_state(doomed) is P.OFFLINE
    assert c.leader_and_isr(doomed) == before
    # named by topic, the same
    assert c.psm.trigger_online_partition_state_change(["doomed"]) == {}
    assert c.ctx.partition_state(doomed) is P.OFFLINE


def test_an_adopted_state_with_a_dead_leader_is_elected_whatever_the_strategy() -> None:
    """A New partition whose state exists already, led by a broker that is gone, is
    Offline: it gets an offline election in the same step even when the step's own
    strategy is another (a preferred election, say) or none."""
    for strategy in (ElectionStrategy.PREFERRED, None):
        c = Cluster(brokers=(1, 2, 3))
        c.store.put(T0, LeaderAndIsr(4, 3, (4, 2)), EPOCH)  # broker 4 is dead
        c.ctx.update_assignment(T0, ReplicaAssignment((4, 2, 3)))
        c.psm.handle_state_changes([T0], P.NEW)
        result = c.psm.handle_state_changes([T0], P.ONLINE, strategy)
        assert result[T0] == LeaderAndIsr(2, 4, (2,), 1), strategy
        assert c.leader_and_isr(T0) == LeaderAndIsr(2, 4, (2,), 1)
        assert c.ctx.partition_state(T0) is P.ONLINE
        c.assert_context_matches_store()


def test_a_new_partition_without_a_live_replica_is_a_failed_state_change() -> None:
    """Kafka's initializeLeaderAndIsrForPartitions logs a failed state change for it: the
    caller is answered with the failure, and the partition stays New."""
    c = Cluster(brokers=(1,))
    c.ctx.update_assignment(T0, ReplicaAssignment((2, 3)))
    c.psm.handle_state_changes([T0], P.NEW)
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert isinstance(result[T0], StateChangeFailed)
    assert c.ctx.partition_state(T0) is P.NEW
    assert c.store.writes == []


# --- replicas going offline -----------------------------------------------------------


def test_a_replica_of_a_topic_queued_for_deletion_goes_offline_untold() -> None:
    """The Offline step tells no broker of a topic queued up for deletion (Kafka's
    `!isTopicQueuedUpForDeletion` around its LeaderAndIsr): an ISR holding the replica is
    still shrunk in ZooKeeper, but neither that state nor, for an ISR without it, the
    replica's being offline goes out."""
    c = three_partitions()
    c.leader_sets_isr(T0, (1, 2))  # 3 fell out of sync in T0; T1 and T2 still hold it
    c.ctx.topics_to_be_deleted.add(T)
    c.ctx.remove_live_brokers([3])
    c.sent.clear()
    c.rsm.handle_state_changes([PartitionReplica(tp, 3) for tp in (T0, T1)], R.OFFLINE)
    assert c.leader_and_isr(T1) == LeaderAndIsr(2, 1, (2, 1), 1)
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 0, (1, 2), 1)
    for tp in (T0, T1):
        assert c.ctx.replica_state(PartitionReplica(tp, 3)) is R.OFFLINE
        assert c.partition_states_sent(ApiKey.UPDATE_METADATA, tp) == {}
        assert c.partition_states_sent(ApiKey.LEADER_AND_ISR, tp) == {}
    c.assert_context_matches_store()


def test_a_new_partitions_state_goes_to_its_isr_not_a_replica_shutting_down() -> None:
    """initializeLeaderAndIsrForPartitions sends the new state to its ISR, the online
    replicas: a replica on a broker shutting down is in neither."""
    c = Cluster(brokers=(1, 2, 3))
    c.ctx.shutting_down_broker_ids = {3}
    c.create_topic(T, {0: (3, 1, 2)})
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 0, (1, 2), 0)
    assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == [1, 2]


def test_the_replica_start_up_works_out_a_partition_on_a_failed_directory_alone() -> None:
    """Replicas start Online where online (isReplicaOnline), ReplicaDeletionIneligible
    elsewhere: a replica on a failed log directory is not online, though another partition
    with the same replicas has it online on the same broker."""
    c = Cluster(brokers=(1, 2, 3))
    for tp in (T0, T1, T2):
        c.load(tp, (1, 2, 3), LeaderAndIsr(1, 4, (1, 2, 3), 9))
    c.ctx.replicas_on_offline_dirs = {2: {T1}}
    dead = c.rsm.startup()
    assert dead == [PartitionReplica(T1, 2)]
    assert c.ctx.replica_state(PartitionReplica(T1, 2)) is R.DELETION_INELIGIBLE
    for tp in (T0, T2):
        assert c.ctx.replica_state(PartitionReplica(tp, 2)) is R.ONLINE


def test_an_adopted_state_led_by_a_broker_shutting_down_is_kept() -> None:
    """An existing state whose leader is shutting down is led still (its controlled
    shutdown moves it): adopted as it is, Online, with no election written."""
    c = Cluster(brokers=(1, 2, 3))
    c.ctx.shutting_down_broker_ids = {2}
    c.store.put(T0, LeaderAndIsr(2, 3, (2, 3)), EPOCH)
    c.ctx.update_assignment(T0, ReplicaAssignment((2, 3, 1)))
    c.psm.handle_state_changes([T0], P.NEW)
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert result[T0] == LeaderAndIsr(2, 3, (2, 3))
    assert c.ctx.partition_state(T0) is P.ONLINE
    assert c.store.writes == []
    assert sorted(c.partition_states_sent(ApiKey.LEADER_AND_ISR, T0)) == [1, 2, 3]


def test_no_eligible_leader_in_zookeepers_state_fails_after_one_read() -> None:
    """The cache without an eligible leader is read once; ZooKeeper's state without one
    ends the election of that partition there, with its own failure, not after rounds
    of reading it again."""
    c = three_partitions()
    c.leader_sets_isr(T0, (1,))
    c.ctx.remove_live_brokers([1])
    reads = c.store.reads
    result = c.psm.handle_state_changes([T0], P.ONLINE, ElectionStrategy.OFFLINE)
    assert c.store.reads == reads + 1
    assert isinstance(result[T0], StateChangeFailed)
    assert "no eligible leader" in str(result[T0])
    assert c.leader_and_isr(T0) == LeaderAndIsr(1, 0, (1,), 1)


# --- the valid transitions ------------------------------------------------------------


def test_the_valid_previous_states_are_kafkas() -> None:
    """PartitionState.validPreviousStates and ReplicaState.validPreviousStates of Kafka
    2.8, whole: a transition from any other state is refused."""
    assert {
        P.NEW: {P.NON_EXISTENT},
        P.ONLINE: {P.NEW, P.ONLINE, P.OFFLINE},
        P.OFFLINE: {P.NEW, P.ONLINE, P.OFFLINE},
        P.NON_EXISTENT: {P.OFFLINE},
    } == PARTITION_VALID_PREVIOUS
    assert {
        R.NEW: {R.NON_EXISTENT},
        R.ONLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
        R.OFFLINE: {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE},
        R.DELETION_STARTED: {R.OFFLINE},
        R.DELETION_SUCCESSFUL: {R.DELETION_STARTED},
        R.DELETION_INELIGIBLE: {R.OFFLINE, R.DELETION_STARTED},
        R.NON_EXISTENT: {R.DELETION_SUCCESSFUL},
    } == REPLICA_VALID_PREVIOUS


# --- the validity of a step's replicas, a partition at a time -------------------------

_HELD = st.dictionaries(
    st.integers(0, 3),
    st.dictionaries(st.integers(1, 4), st.sampled_from(list(R)), max_size=4),
    max_size=4,
)
_NAMED = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 5)), max_size=16)


@given(
    held=_HELD,
    named=_NAMED,
    target=st.sampled_from(list(R)),
    sort=st.booleans(),
    move=st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_replicas_found_valid_a_partition_at_a_time_are_those_found_one_at_a_time(
    held: dict[int, dict[int, ReplicaStateName]],
    named: list[tuple[int, int]],
    target: ReplicaStateName,
    sort: bool,
    move: bool,
) -> None:
    """The Offline and deletion steps ask a partition at a time (one lookup for each
    distinct states and replicas); what they get, and the states left behind (a replica
    with none put NonExistent; with ``move``, the valid ones put in ``target``), is what
    asking and moving each replica gives, grouped by partition in the order first named,
    a partition's replicas as named or sorted."""
    replicas = [PartitionReplica(TopicPartition("t", p), r) for p, r in named]
    one, grouped = Cluster(brokers=(1, 2, 3)), Cluster(brokers=(1, 2, 3))
    for c in (one, grouped):
        for p, states in held.items():
            for r, state in states.items():
                c.ctx.put_replica_state(PartitionReplica(TopicPartition("t", p), r), state)
    expected: dict[TopicPartition, list[int]] = {}
    for pr in one.rsm._valid(replicas, target):
        expected.setdefault(pr.topic_partition, []).append(pr.replica)
        if move:
            one.ctx.put_replica_state(pr, target)
    got = grouped.rsm._valid_by_partition(
        replicas_by_partition(replicas), target, sort=sort, move=move
    )
    assert got == {tp: tuple(sorted(ids) if sort else ids) for tp, ids in expected.items()}
    named_first = dict.fromkeys(pr.topic_partition for pr in replicas)
    assert list(got) == [tp for tp in named_first if tp in expected]
    assert grouped.ctx.replica_states == one.ctx.replica_states


@given(
    named=st.lists(st.tuples(st.sampled_from([T0, T1, T2]), st.integers(1, 4)), max_size=10),
    steps=st.lists(st.sampled_from(list(R)), min_size=1, max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_replicas_given_by_partition_are_handled_as_the_same_replicas_one_by_one(
    named: list[tuple[TopicPartition, int]], steps: list[ReplicaStateName]
) -> None:
    """A deletion hands the replica steps each partition's replica ids, not a replica
    object each: every step ends where the same replicas named one by one, a partition
    after another, end (states, partition states written, requests sent)."""
    by_partition = replicas_by_partition(PartitionReplica(tp, r) for tp, r in named)
    replicas = [PartitionReplica(tp, r) for tp, ids in by_partition.items() for r in ids]
    one, grouped = three_partitions(), three_partitions()
    for target in steps:
        one.rsm.handle_state_changes(replicas, target, reason="deleted")
        grouped.rsm.handle_state_changes(by_partition, target, reason="deleted")
        assert grouped.ctx.replica_states == one.ctx.replica_states
        assert grouped.ctx.assignments == one.ctx.assignments
        for tp in (T0, T1, T2):
            assert grouped.store.state(tp) == one.store.state(tp)
        assert [(r.broker_id, r.api_key, r.body) for batch in grouped.sent for r in batch] == [
            (r.broker_id, r.api_key, r.body) for batch in one.sent for r in batch
        ]
