"""Which znodes `zkctl watch` re-reads when a watch fires, and which partition states it
watches when there are too many to watch each one."""

from __future__ import annotations

from watch.zk_source import (
    ALL_GROUPS,
    BROKERS,
    CONTROLLER,
    NOTIFICATIONS,
    PARTITIONS,
    TOPICS,
    choose_canaries,
    groups_for,
)
from zkdata import paths
from zkdata.znodes import LeaderAndIsr, TopicPartition

N = 10_000


def big_cluster() -> tuple[
    dict[str, dict[int, tuple[int, ...]]], dict[TopicPartition, LeaderAndIsr]
]:
    topics: dict[str, dict[int, tuple[int, ...]]] = {
        "t": {p: (p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1) for p in range(N)}
    }
    states = {TopicPartition("t", p): LeaderAndIsr(r[0], 0, r) for p, r in topics["t"].items()}
    return topics, states


def test_each_watch_re_reads_what_it_may_have_changed() -> None:
    assert groups_for(paths.CONTROLLER) == {CONTROLLER, PARTITIONS}
    assert groups_for(paths.CONTROLLER_EPOCH) == {CONTROLLER, PARTITIONS}
    assert groups_for(paths.BROKER_IDS) == {BROKERS, PARTITIONS}
    assert groups_for(paths.broker(3)) == {BROKERS, PARTITIONS}
    assert groups_for(paths.BROKER_TOPICS) == {TOPICS, PARTITIONS}
    assert groups_for(paths.topic("orders")) == {TOPICS, PARTITIONS}
    assert groups_for(paths.partition_state("orders", 7)) == {PARTITIONS}
    assert groups_for(paths.ISR_CHANGE_NOTIFICATION) == {NOTIFICATIONS, PARTITIONS}
    assert groups_for(paths.LOG_DIR_EVENT_NOTIFICATION) == {NOTIFICATIONS, PARTITIONS}
    assert groups_for(paths.REASSIGN_PARTITIONS) == {NOTIFICATIONS, PARTITIONS}
    assert groups_for(paths.PREFERRED_REPLICA_ELECTION) == {NOTIFICATIONS, PARTITIONS}
    assert groups_for("/something/else") == ALL_GROUPS


def test_a_healthy_cluster_needs_a_few_canaries_per_broker() -> None:
    topics, states = big_cluster()
    canaries = choose_canaries(topics, states, {1, 2, 3}, per_broker=4, per_kind=16)
    assert len(canaries) <= 3 * 8
    assert len(set(canaries)) == len(canaries)
    for b in (1, 2, 3):
        led = [tp for tp in canaries if states[tp].leader == b]
        followed = [tp for tp in canaries if b in states[tp].isr and states[tp].leader != b]
        assert len(led) == 4, b  # a controlled shutdown or a rebalance moves one of these
        assert len(followed) >= 4, b


def test_a_lost_broker_puts_its_leaderless_partitions_and_dead_isrs_under_watch() -> None:
    topics, states = big_cluster()
    canaries = choose_canaries(topics, states, {1, 3}, per_broker=4, per_kind=16)
    leaderless = [tp for tp in canaries if states[tp].leader == 2]
    assert len(leaderless) == 16  # the controller is about to elect leaders for these
    dead_in_isr = [tp for tp in canaries if 2 in states[tp].isr]
    assert len(dead_in_isr) >= 16  # and to shrink these ISRs
    assert len(canaries) <= 2 * 8 + 5 * 16


def test_unsettled_partitions_of_every_kind_are_watched() -> None:
    topics = {"t": {0: (1, 2), 1: (1, 2), 2: (1, 2), 3: (2, 1), 4: (1, 2)}}
    states = {
        # 0 has no state yet (a new partition)
        TopicPartition("t", 1): LeaderAndIsr(-1, 1, (1, 2)),  # offline
        TopicPartition("t", 2): LeaderAndIsr(1, 0, (1,)),  # short ISR
        TopicPartition("t", 3): LeaderAndIsr(1, 0, (1, 2)),  # not the preferred leader
        TopicPartition("t", 4): LeaderAndIsr(1, 0, (1, 2)),  # healthy
    }
    canaries = choose_canaries(topics, states, {1, 2}, per_broker=0, per_kind=1)
    assert set(canaries) == {
        TopicPartition("t", 0),
        TopicPartition("t", 1),
        TopicPartition("t", 2),
        TopicPartition("t", 3),
    }


def test_unreadable_state_znodes_are_watched_to_see_their_repair() -> None:
    topics, states = big_cluster()
    unreadable = [TopicPartition("t", p) for p in range(5000, 5040)]
    canaries = choose_canaries(
        topics, states, {1, 2, 3}, unreadable=unreadable, per_broker=4, per_kind=16
    )
    assert [tp for tp in canaries if tp.partition >= 5000] == unreadable[:16]
