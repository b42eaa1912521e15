"""Which partition states `zkctl watch` picks to watch when there are too many to watch
each: each kind counted exactly, so that a kind left out or a partition put in the wrong
kind shows."""

from __future__ import annotations

from watch.zk_source import choose_canaries
from zkdata.znodes import LeaderAndIsr, TopicPartition


def tp(p: int) -> TopicPartition:
    return TopicPartition("t", p)


def test_a_follower_canary_is_a_partition_the_broker_follows_not_one_it_leads() -> None:
    # Broker 3 leads t-0 and t-2, broker 1 leads t-1 and follows t-2: with room for one
    # of each per broker, broker 1's follower canary is t-2 (a leader is no follower of
    # its own partition), the only one to see broker 1 drop out of an ISR.
    topics = {"t": {0: (3,), 1: (1,), 2: (3, 1)}}
    states = {
        tp(0): LeaderAndIsr(3, 0, (3,)),
        tp(1): LeaderAndIsr(1, 0, (1,)),
        tp(2): LeaderAndIsr(3, 0, (3, 1)),
    }
    canaries = choose_canaries(topics, states, {1, 3}, per_broker=1, per_kind=0)
    assert sorted(canaries) == [tp(0), tp(1), tp(2)]


def test_a_replica_in_the_isr_that_is_not_registered_is_its_own_kind() -> None:
    # t-1's ISR still names broker 3, lost: the leader is about to shrink it. The ISR is
    # as long as the replicas, so only that kind picks it.
    topics = {"t": {0: (1, 2, 3), 1: (1, 2, 3), 2: (1, 2, 3)}}
    states = {p: LeaderAndIsr(1, 0, (1, 2, 3)) for p in map(tp, range(3))}
    canaries = choose_canaries(topics, states, {1, 2}, per_broker=0, per_kind=1)
    assert canaries == [tp(0)]
    canaries = choose_canaries(topics, states, {1, 2}, per_broker=0, per_kind=2)
    assert canaries == [tp(0), tp(1)]


def test_a_preferred_replica_not_leading_is_watched_only_while_it_is_registered() -> None:
    # t-1's preferred replica 2 is alive and could lead again (a preferred election);
    # t-0's preferred replica 3 is down, so its leader 1 is where it should be for now
    # (t-0 is watched as a short ISR all the same).
    topics = {"t": {0: (3, 1), 1: (2, 1)}}
    states = {tp(0): LeaderAndIsr(1, 0, (1,)), tp(1): LeaderAndIsr(1, 0, (1, 2))}
    canaries = choose_canaries(topics, states, {1, 2}, per_broker=0, per_kind=1)
    assert canaries == [tp(0), tp(1)]


def test_a_leader_during_delete_is_no_leader_to_watch_nor_leaderless() -> None:
    # Leader -2 (LeaderAndIsr.LeaderDuringDelete) is a topic being deleted, as the view
    # shows it: neither a broker's led partition nor an offline one.
    topics = {"t": {0: ()}}
    states = {tp(0): LeaderAndIsr(-2, 0, ())}
    assert choose_canaries(topics, states, {1}, per_broker=1, per_kind=1) == []


def test_a_partition_assigned_no_replicas_is_no_preferred_replica_to_compare() -> None:
    # A hand-written topic znode may assign a partition no replicas.
    topics = {"t": {0: ()}}
    states = {tp(0): LeaderAndIsr(1, 0, (1,))}
    assert choose_canaries(topics, states, {1}, per_broker=1, per_kind=1) == [tp(0)]
