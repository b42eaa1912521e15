"""ControllerContext edges (Kafka 2.8's ControllerContext.scala and the KafkaController
code keeping it): brokers coming back, topics forgotten, counts."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.context import (
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from tests.unit.test_context import registration
from zkdata.znodes import LeaderAndIsr, TopicPartition

P = PartitionStateName
R = ReplicaStateName


def test_a_broker_registering_again_has_every_log_directory_back() -> None:
    # KafkaController.onBrokerStartup: newBrokers.foreach(replicasOnOfflineDirs.remove),
    # a restarted broker's replicas on a once failed directory are online again.
    tp = TopicPartition("t", 0)
    ctx = ControllerContext()
    ctx.add_live_brokers({1: (registration(1), 10)})
    ctx.replicas_on_offline_dirs[1] = {tp}
    assert not ctx.is_replica_online(1, tp)
    ctx.add_live_brokers({1: (registration(1), 11)})
    assert ctx.is_replica_online(1, tp)
    assert ctx.replicas_on_offline_dirs == {}


def test_a_lost_broker_forgets_its_failed_log_directories() -> None:
    # KafkaController.onBrokerFailure: deadBrokers.foreach(replicasOnOfflineDirs.remove).
    tp = TopicPartition("t", 0)
    ctx = ControllerContext()
    ctx.add_live_brokers({1: (registration(1), 10), 2: (registration(2), 20)})
    ctx.replicas_on_offline_dirs[1] = {tp}
    ctx.replicas_on_offline_dirs[2] = {tp}
    ctx.remove_live_brokers([1])
    assert ctx.replicas_on_offline_dirs == {2: {tp}}
    assert not ctx.is_on_offline_dir(1, tp)


def test_partitions_on_a_broker_include_those_it_is_being_reassigned_off_or_onto() -> None:
    # Kafka 2.8's partitionsOnBroker reads the full replica list (KIP-455: origin and
    # target together while reassigning).
    ctx = ControllerContext()
    moving = TopicPartition("t", 0)
    ctx.update_assignment(moving, ReplicaAssignment.for_reassignment((1, 2), (2, 3)))
    ctx.update_assignment(TopicPartition("t", 1), ReplicaAssignment((2,)))
    assert ctx.partitions_on_broker(1) == [moving]
    assert ctx.partitions_on_broker(3) == [moving]
    assert [pr.replica for pr in ctx.replicas_on_brokers({1, 3})] == [3, 1]


def test_a_removed_topic_leaves_nothing_behind() -> None:
    ctx = ControllerContext()
    for topic in ("gone", "kept"):
        tp = TopicPartition(topic, 0)
        ctx.topic_ids[topic] = uuid.uuid4()
        ctx.update_assignment(tp, ReplicaAssignment((1, 2)))
        ctx.set_partition_state(tp, P.OFFLINE)
        ctx.put_replica_state(PartitionReplica(tp, 1), R.OFFLINE)
        ctx.topics_to_be_deleted.add(topic)
        ctx.topics_ineligible_for_deletion.add(topic)
    ctx.remove_topic("gone")
    assert set(ctx.topic_ids) == set(ctx.assignments) == {"kept"}
    assert [tp.topic for tp in ctx.replica_states] == ["kept"]
    assert [tp.topic for tp in ctx.partition_states] == ["kept"]
    assert ctx.offline_by_topic == {"kept": 1}
    assert ctx.topics_to_be_deleted == ctx.topics_ineligible_for_deletion == {"kept"}
    # a topic made again under the name starts with no deletion held
    ctx.update_assignment(TopicPartition("gone", 0), ReplicaAssignment((1,)))
    ctx.topics_to_be_deleted.add("gone")
    assert not ctx.is_topic_in_service("gone")


def test_only_offline_partitions_are_counted_offline_after_a_recount() -> None:
    ctx = ControllerContext()
    for p, state in enumerate((P.NEW, P.ONLINE, P.OFFLINE, P.NON_EXISTENT)):
        ctx.partition_states[TopicPartition("t", p)] = state
    ctx.recount_offline_partitions()
    assert ctx.offline_by_topic == {"t": 1}
    assert ctx.offline_partition_count == 1


def test_online_replicas_with_those_shutting_down_when_asked() -> None:
    # Kafka 2.8's isReplicaOnline(includeShuttingDownBrokers): a controlled shutdown's
    # leader moves count the stopping broker's replicas still in the ISR.
    tp = TopicPartition("t", 0)
    ctx = ControllerContext()
    ctx.add_live_brokers({b: (registration(b), b) for b in (1, 2)})
    ctx.shutting_down_broker_ids.add(2)
    assert ctx.online_replicas(tp, (2, 1, 3)) == (1,)
    assert ctx.online_replicas(tp, (2, 1, 3), include_shutting_down=True) == (2, 1)


def _context_of(topics: dict[str, int], led: bool = True) -> ControllerContext:
    """Topics of so many partitions each (RF 2), with leaderships where ``led``."""
    ctx = ControllerContext()
    for topic, count in topics.items():
        for p in range(count):
            tp = TopicPartition(topic, p)
            ctx.update_assignment(tp, ReplicaAssignment((1, 2)))
            if led:
                ctx.leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 1)
    return ctx


@settings(max_examples=200)
@given(
    sizes=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 6), max_size=6),
    asked=st.lists(st.sampled_from("abcdefg"), max_size=8),
    led=st.booleans(),
)
def test_partitions_by_topic_are_each_topics_partitions_in_order(
    sizes: dict[str, int], asked: list[str], led: bool
) -> None:
    ctx = _context_of(sizes, led)
    got = ctx.partitions_by_topic(asked)
    assert set(got) == {t for t in asked if t in ctx.assignments}
    for topic, tps in got.items():
        assert tps == ctx.partitions_for_topic(topic)


def test_partitions_of_a_large_share_are_the_leadership_maps_keys() -> None:
    """A deletion of most topics shares the leadership map's key objects (none made); a
    few topics of many get theirs made, without a walk of every partition."""
    ctx = _context_of({"a": 3, "b": 3, "c": 1, "d": 1})
    keys = {tp: tp for tp in ctx.leadership}
    got = ctx.partitions_by_topic(["a", "b"])
    assert all(tp is keys[tp] for tps in got.values() for tp in tps)
    assert [tp is keys[tp] for tp in ctx.partitions_by_topic(["c", "d"])["c"]] == [True]
    few = ctx.partitions_by_topic(["c"])  # 1 of 8: made anew
    assert few == {"c": [TopicPartition("c", 0)]}
    assert few["c"][0] is not keys[TopicPartition("c", 0)]


def test_replicas_of_partitions_share_their_objects() -> None:
    ctx = _context_of({"a": 2})
    tps = ctx.partitions_for_topic("a")
    replicas = ctx.replicas_of(tps)
    assert replicas == ctx.replicas_for_topic("a")
    assert [pr.topic_partition for pr in replicas] == [tps[0], tps[0], tps[1], tps[1]]
    assert all(pr.topic_partition is tps[i // 2] for i, pr in enumerate(replicas))
    assert ctx.replicas_of([TopicPartition("gone", 0)]) == []
