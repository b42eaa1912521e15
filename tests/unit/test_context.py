"""ControllerContext, ReplicaAssignment and the valid-transition tables."""

from __future__ import annotations

import dataclasses
import sys
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.context import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    PartitionState,
    TopicPartition,
)

P = PartitionStateName
R = ReplicaStateName

# PartitionStateMachine.scala / ReplicaStateMachine.scala (Kafka 2.8), transcribed.
KAFKA_PARTITION_PREVIOUS = {
    "NewPartition": {"NonExistentPartition"},
    "OnlinePartition": {"NewPartition", "OnlinePartition", "OfflinePartition"},
    "OfflinePartition": {"NewPartition", "OnlinePartition", "OfflinePartition"},
    "NonExistentPartition": {"OfflinePartition"},
}
KAFKA_REPLICA_PREVIOUS = {
    "NewReplica": {"NonExistentReplica"},
    "OnlineReplica": {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
    "OfflineReplica": {
        "NewReplica",
        "OnlineReplica",
        "OfflineReplica",
        "ReplicaDeletionIneligible",
    },
    "ReplicaDeletionStarted": {"OfflineReplica"},
    "ReplicaDeletionSuccessful": {"ReplicaDeletionStarted"},
    "ReplicaDeletionIneligible": {"OfflineReplica", "ReplicaDeletionStarted"},
    "NonExistentReplica": {"ReplicaDeletionSuccessful"},
}


def test_partition_transition_table_is_kafkas() -> None:
    assert set(PARTITION_VALID_PREVIOUS) == set(P)
    assert {
        target.value: {s.value for s in previous}
        for target, previous in PARTITION_VALID_PREVIOUS.items()
    } == KAFKA_PARTITION_PREVIOUS


def test_replica_transition_table_is_kafkas() -> None:
    assert set(REPLICA_VALID_PREVIOUS) == set(R)
    assert {
        target.value: {s.value for s in previous}
        for target, previous in REPLICA_VALID_PREVIOUS.items()
    } == KAFKA_REPLICA_PREVIOUS


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "h", 9092),))


def test_live_sets() -> None:
    ctx = ControllerContext()
    ctx.add_live_brokers({1: (registration(1), 10), 2: (registration(2), 20)})
    ctx.shutting_down_broker_ids.add(2)
    assert ctx.live_or_shutting_down_broker_ids == {1, 2}
    assert ctx.live_broker_ids == {1}
    assert ctx.is_replica_online(1)
    assert not ctx.is_replica_online(2)
    assert ctx.is_replica_online(2, include_shutting_down=True)
    assert not ctx.is_replica_online(3, include_shutting_down=True)
    ctx.remove_live_brokers([2, 3])
    assert ctx.live_or_shutting_down_broker_ids == {1}
    assert ctx.broker_epochs == {1: 10}


def populated() -> ControllerContext:
    ctx = ControllerContext(epoch=4, epoch_zk_version=2)
    ctx.add_live_brokers({b: (registration(b), b) for b in (1, 2, 3)})
    for topic in ("a", "b"):
        for p, replicas in enumerate(((1, 2), (2, 3), (3, 1))):
            tp = TopicPartition(topic, p)
            ctx.update_assignment(tp, ReplicaAssignment(replicas))
            ctx.leadership[tp] = LeaderIsrAndControllerEpoch(
                LeaderAndIsr(replicas[0], 0, replicas), 4
            )
            ctx.set_partition_state(tp, P.ONLINE)
            for r in replicas:
                ctx.put_replica_state(PartitionReplica(tp, r), R.ONLINE)
    return ctx


def test_partition_queries() -> None:
    ctx = populated()
    assert ctx.all_topics == {"a", "b"}
    assert ctx.partition_count() == 6
    assert sorted(ctx.partitions_on_broker(1)) == [
        TopicPartition(t, p) for t in ("a", "b") for p in (0, 2)
    ]
    assert sorted(ctx.partitions_led_by(2)) == [TopicPartition("a", 1), TopicPartition("b", 1)]
    assert {(pr.topic_partition.partition, pr.replica) for pr in ctx.replicas_for_topic("a")} == {
        (0, 1),
        (0, 2),
        (1, 2),
        (1, 3),
        (2, 3),
        (2, 1),
    }
    assert len(ctx.replicas_on_brokers({1, 3})) == 8
    assert ctx.replicas(TopicPartition("c", 0)) == ()
    assert ctx.partition_state(TopicPartition("c", 0)) is P.NON_EXISTENT
    assert ctx.replica_state(PartitionReplica(TopicPartition("a", 0), 3)) is R.NON_EXISTENT


def test_remove_topic_forgets_everything_about_it() -> None:
    ctx = populated()
    ctx.topics_to_be_deleted.add("a")
    ctx.topics_with_deletion_started.add("a")
    ctx.partitions_being_reassigned.add(TopicPartition("a", 1))
    ctx.remove_topic("a")
    for field in ("assignments", "topic_ids"):
        assert "a" not in getattr(ctx, field)
    for field in ("leadership", "partition_states", "replica_states"):
        assert all(tp.topic == "b" for tp in getattr(ctx, field)), field
    assert not ctx.partitions_being_reassigned
    assert not ctx.topics_to_be_deleted
    assert not ctx.topics_with_deletion_started
    assert ctx.partition_count() == 3


def test_offline_partition_count_leaves_out_topics_being_deleted() -> None:
    ctx = populated()
    ctx.set_partition_state(TopicPartition("a", 0), P.OFFLINE)
    ctx.set_partition_state(TopicPartition("b", 0), P.OFFLINE)
    ctx.set_partition_state(TopicPartition("b", 1), P.OFFLINE)
    assert ctx.offline_partition_count == 3
    ctx.topics_to_be_deleted.add("a")
    assert ctx.offline_partition_count == 2
    ctx.set_partition_state(TopicPartition("b", 1), P.ONLINE)
    ctx.set_partition_state(TopicPartition("b", 0), P.OFFLINE)  # already Offline
    assert ctx.offline_partition_count == 1
    ctx.drop_partition_state(TopicPartition("b", 0))
    assert ctx.offline_partition_count == 0
    ctx.remove_topic("a")
    ctx.topics_to_be_deleted.clear()
    assert ctx.offline_partition_count == 0
    assert ctx.offline_by_topic == {}


def test_counts_read_from_another_thread_while_topics_come_and_go() -> None:
    """The status thread reads both counts while the event thread adds and removes topics.
    A Python-level walk of the live dicts raised 'dictionary changed size during
    iteration' here; with a tiny switch interval it did within the first few topics."""
    ctx = populated()
    for i in range(2000):
        ctx.update_assignment(TopicPartition(f"t{i}", 0), ReplicaAssignment((1,)))
    stop = threading.Event()
    errors: list[BaseException] = []

    def status_thread() -> None:
        while not stop.is_set():
            try:
                ctx.partition_count()
                _ = ctx.offline_partition_count
            except RuntimeError as e:  # what a walk of a changing dict raises
                errors.append(e)
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    reader = threading.Thread(target=status_thread, daemon=True)
    reader.start()
    try:
        for i in range(5000):
            tp = TopicPartition(f"n{i}", 0)
            ctx.update_assignment(tp, ReplicaAssignment((1,)))
            ctx.set_partition_state(tp, P.OFFLINE)
            ctx.topics_to_be_deleted.add(tp.topic)
            ctx.remove_topic(tp.topic)
            ctx.topics_to_be_deleted.discard(tp.topic)
            if errors:
                break
    finally:
        stop.set()
        reader.join(timeout=30)
        sys.setswitchinterval(interval)
    assert not errors
    assert ctx.partition_count() == 6 + 2000


def test_deletion_in_progress() -> None:
    ctx = populated()
    assert not ctx.is_topic_deletion_in_progress("a")
    ctx.put_replica_state(PartitionReplica(TopicPartition("a", 1), 3), R.DELETION_STARTED)
    assert ctx.is_topic_deletion_in_progress("a")
    assert not ctx.is_topic_deletion_in_progress("b")


def test_remove_replica_state_drops_empty_partitions() -> None:
    ctx = populated()
    tp = TopicPartition("a", 0)
    ctx.remove_replica_state(PartitionReplica(tp, 1))
    assert ctx.replica_states_of(tp) == {2: R.ONLINE}
    ctx.remove_replica_state(PartitionReplica(tp, 2))
    assert tp not in ctx.replica_states
    ctx.remove_replica_state(PartitionReplica(tp, 2))  # again: nothing to do


def test_reset_forgets_everything_and_shares_nothing() -> None:
    ctx = populated()
    ctx.shutting_down_broker_ids.add(1)
    ctx.unclean_elections = 3
    ctx.reset()
    fresh = ControllerContext()
    for f in dataclasses.fields(ControllerContext):
        assert getattr(ctx, f.name) == getattr(fresh, f.name), f.name
    ctx.live_brokers[9] = registration(9)
    assert ControllerContext().live_brokers == {}


replica_lists = st.lists(st.integers(0, 8), min_size=1, max_size=5, unique=True).map(tuple)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(origin=replica_lists, target=replica_lists, extra=st.integers(0, 8))
def test_reassignment_properties(
    origin: tuple[int, ...], target: tuple[int, ...], extra: int
) -> None:
    ra = ReplicaAssignment.for_reassignment(origin, target)
    # KIP-455: the full set is the target first, then the rest of the origin
    assert ra.replicas == target + tuple(r for r in origin if r not in target)
    assert ra.adding == tuple(r for r in target if r not in origin)
    assert ra.removing == tuple(r for r in origin if r not in target)
    assert ra.target_replicas == target
    # the origin in full-set order, as Kafka's replicas.diff(addingReplicas)
    assert ra.origin_replicas == tuple(r for r in ra.replicas if r in origin)
    assert sorted(ra.origin_replicas) == sorted(origin)
    assert ra.is_being_reassigned == (set(origin) != set(target))
    without = ra.without_replica(extra)
    for part in (without.replicas, without.adding, without.removing):
        assert extra not in part
    assert without.replicas == tuple(r for r in ra.replicas if r != extra)
    plain = ReplicaAssignment(origin)
    assert plain.target_replicas == plain.origin_replicas == origin
    assert not plain.is_being_reassigned


_LICE = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1)


@settings(max_examples=200, deadline=None)
@given(
    assigned=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)), unique=True, max_size=12
    ),
    led=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", "gone"]), st.integers(0, 6)),
        unique=True,
        max_size=12,
    ),
    led_in_assignment_order=st.booleans(),
)
def test_all_partitions_are_the_assignments_as_the_leadership_keys(
    assigned: list[tuple[str, int]],
    led: list[tuple[str, int]],
    led_in_assignment_order: bool,
) -> None:
    """Whatever order the leadership map is in, and whatever it holds that is not assigned
    (or lacks), every assigned partition comes once, in the assignments' order, as the
    leadership's own key object where it has one."""
    ctx = ControllerContext()
    for topic, p in assigned:
        ctx.update_assignment(TopicPartition(topic, p), ReplicaAssignment((1,)))
    expected_order = [TopicPartition(t, p) for t, parts in ctx.assignments.items() for p in parts]
    if led_in_assignment_order:
        led = [(tp.topic, tp.partition) for tp in expected_order] + [
            x for x in led if TopicPartition(*x) not in expected_order
        ]
    for topic, p in led:
        ctx.leadership[TopicPartition(topic, p)] = _LICE
    keys = {tp: tp for tp in ctx.leadership}
    got = list(ctx.all_partitions())
    assert got == expected_order
    for tp in got:
        if tp in keys:
            assert tp is keys[tp]
    # The caller may change the maps while it walks them.
    for tp in ctx.all_partitions():
        ctx.leadership[TopicPartition(tp.topic, tp.partition + 100)] = _LICE


@settings(max_examples=200, deadline=None)
@given(
    assigned=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 5),
            st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True),
        ),
        unique_by=lambda x: (x[0], x[1]),
        max_size=12,
    ),
    led=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 6)), unique=True),
    brokers=st.sets(st.integers(1, 4)),
)
def test_a_brokers_partitions_and_replicas_are_the_leadership_keys(
    assigned: list[tuple[str, int, list[int]]],
    led: list[tuple[str, int]],
    brokers: set[int],
) -> None:
    """`partitions_on_broker` and `replicas_on_brokers`, as made from the assignments, with
    the leadership's own key objects where it has them: a joining broker's queued
    LeaderAndIsr holds these keys, and new ones made for each held 100,000 more objects."""
    ctx = ControllerContext()
    for topic, p, brokers_of in assigned:
        ctx.update_assignment(TopicPartition(topic, p), ReplicaAssignment(tuple(brokers_of)))
    for topic, p in led:
        ctx.leadership[TopicPartition(topic, p)] = _LICE
    keys = {tp: tp for tp in ctx.leadership}
    everything = [
        (TopicPartition(t, p), ra)
        for t, parts in ctx.assignments.items()
        for p, ra in parts.items()
    ]
    replicas = ctx.replicas_on_brokers(brokers)
    assert replicas == [
        PartitionReplica(tp, r) for tp, ra in everything for r in ra.replicas if r in brokers
    ]
    for broker_id in (1, 2, 3, 4):
        on_broker = ctx.partitions_on_broker(broker_id)
        assert on_broker == [tp for tp, ra in everything if broker_id in ra.replicas]
        for tp in on_broker + [pr.topic_partition for pr in replicas]:
            assert tp is keys.get(tp, tp)


def test_recounting_offline_partitions_after_states_written_directly() -> None:
    ctx = populated()
    ctx.partition_states[TopicPartition("a", 0)] = P.OFFLINE
    ctx.partition_states[TopicPartition("a", 2)] = P.OFFLINE
    ctx.partition_states[TopicPartition("b", 1)] = P.OFFLINE
    assert ctx.offline_partition_count == 0  # not told
    ctx.recount_offline_partitions()
    assert ctx.offline_by_topic == {"a": 2, "b": 1}
    assert ctx.offline_partition_count == 3


_STATE_CHANGES = st.lists(
    st.tuples(
        st.lists(
            st.builds(TopicPartition, st.sampled_from(["a", "b", "c"]), st.integers(0, 3)),
            max_size=8,
        ),
        st.sampled_from(list(P)),
    ),
    max_size=10,
)


@given(_STATE_CHANGES)
def test_setting_partition_states_keeps_the_offline_counts(
    changes: list[tuple[list[TopicPartition], PartitionStateName]],
) -> None:
    ctx = ControllerContext(epoch=1, epoch_zk_version=0)
    model: dict[TopicPartition, PartitionStateName] = {}
    for tps, state in changes:
        for tp in tps:
            model[tp] = state
        ctx.set_partition_states(tps, state)
        assert ctx.partition_states == model
        offline: dict[str, int] = {}
        for tp, s in model.items():
            if s is P.OFFLINE:
                offline[tp.topic] = offline.get(tp.topic, 0) + 1
        assert ctx.offline_by_topic == offline


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.sampled_from(list(R))), max_size=30)
)
def test_a_replica_state_put_is_the_partitions_states_with_that_one_changed(
    puts: list[tuple[int, int, ReplicaStateName]],
) -> None:
    ctx = ControllerContext(epoch=1, epoch_zk_version=0)
    expected: dict[TopicPartition, dict[int, ReplicaStateName]] = {}
    for partition, replica, state in puts:
        tp = TopicPartition("t", partition)
        ctx.put_replica_state(PartitionReplica(tp, replica), state)
        expected.setdefault(tp, {})[replica] = state
        assert ctx.replica_states_of(tp) == expected[tp]
        assert list(ctx.replica_states_of(tp)) == list(expected[tp])  # in first-put order
        assert ctx.replica_state(PartitionReplica(tp, replica)) is state


@given(
    assigned=st.dictionaries(
        st.integers(0, 5), st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True)
    ),
    puts=st.lists(
        st.tuples(st.integers(0, 6), st.integers(1, 5), st.sampled_from(list(R))), max_size=30
    ),
)
def test_a_topics_replica_states_are_those_of_each_of_its_replicas(
    assigned: dict[int, list[int]], puts: list[tuple[int, int, ReplicaStateName]]
) -> None:
    # What the deletion reads after every broker answer, from shared values: the same as
    # asking each replica (one with no state NonExistent; a state of a replica or
    # partition the assignment does not hold counts for nothing).
    ctx = ControllerContext(epoch=1, epoch_zk_version=0)
    for p, replicas in assigned.items():
        ctx.update_assignment(TopicPartition("t", p), ReplicaAssignment(tuple(replicas)))
    for p, replica, state in puts:
        ctx.put_replica_state(PartitionReplica(TopicPartition("t", p), replica), state)
    expected = {ctx.replica_state(pr) for pr in ctx.replicas_for_topic("t")}
    assert ctx.topic_replica_states("t") == expected
    assert ctx.is_topic_deletion_in_progress("t") == (R.DELETION_STARTED in expected)
    assert ctx.topic_replica_states("other") == set()


def test_adopted_states_become_leaderships_equal_ones_shared() -> None:
    ctx = ControllerContext()
    a, b, c, gone = (TopicPartition("t", p) for p in range(4))
    for tp in (a, b, c):
        ctx.update_assignment(tp, ReplicaAssignment((1, 2)))
    shared = PartitionState(LeaderAndIsr(1, 3, (1, 2), 7), 5)
    ctx.adopt_partition_states({a: shared, b: shared, c: None})
    assert ctx.leadership[a] == LeaderIsrAndControllerEpoch(shared.leader_and_isr, 5)
    assert ctx.leadership[a] is ctx.leadership[b]  # one object for equal states
    assert c not in ctx.leadership  # no state read: no leadership
    other = PartitionState(LeaderAndIsr(2, 4, (2,), 8), 6)
    ctx.adopt_partition_states({a: shared, b: other})
    assert ctx.leadership[b].leader_and_isr.leader == 2
    assert ctx.leadership[a] is not ctx.leadership[b]
    # a notification naming a partition no topic has is ignored
    assert ctx.known_partitions([gone, a, TopicPartition("x", 0), c]) == [a, c]


@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.lists(st.integers(1, 4), min_size=1, max_size=4),
            st.sampled_from(list(R)),
        ),
        max_size=20,
    )
)
def test_replicas_put_together_are_each_of_them_put_in_turn(
    puts: list[tuple[int, list[int], ReplicaStateName]],
) -> None:
    # The Offline and deletion steps put a partition's replicas together (one lookup of
    # the partition's new states): the same states, in the same order, as one at a time.
    together = ControllerContext(epoch=1, epoch_zk_version=0)
    in_turn = ControllerContext(epoch=1, epoch_zk_version=0)
    for partition, replicas, state in puts:
        tp = TopicPartition("t", partition)
        together.put_replicas_state(tp, tuple(replicas), state)
        for replica in replicas:
            in_turn.put_replica_state(PartitionReplica(tp, replica), state)
        assert list(together.replica_states_of(tp).items()) == list(
            in_turn.replica_states_of(tp).items()
        )
    assert together.replica_states == in_turn.replica_states
