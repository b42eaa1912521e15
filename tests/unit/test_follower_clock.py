"""The leader's lazy accounting of a follower's fetches against Kafka's rule.

Kafka updates a follower's state on every fetch, for every partition of the request. The
leader here records one by one only the partitions a round lists (their positions moved),
answers with records (behind the log end) or looks at in full; a session's clock stands for
the others, which sit at the log end with their positions unmoved, and a leader settles
the clock's verdict into the partition before appending. The caught-up time must come out
exactly as Kafka's, whatever the order of rounds, appends and time passing."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.fetch_session import FetchClock
from broker.replica_manager import FollowerState


@dataclass
class KafkaFollower:
    """Kafka's Replica.updateFetchState, run on every fetch, listed or not."""

    fetch_offset: int = 0
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = 0

    def fetch(self, offset: int, leader_leo: int, now: int) -> None:
        if offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.fetch_offset = offset
        self.last_fetch_ms = now
        self.last_fetch_leader_leo = leader_leo


EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("tick"), st.integers(1, 50), st.booleans()),
        st.tuples(st.just("append"), st.integers(1, 3), st.booleans()),
        # a fetch round: how far the follower got, and whether the round lists the
        # partition although its position did not move (a round that looked at all)
        st.tuples(st.just("fetch"), st.integers(0, 3), st.booleans()),
    ),
    max_size=60,
)


@settings(max_examples=500, deadline=None)
@given(EVENTS)
def test_the_lazy_rule_gives_kafkas_caught_up_times(
    events: list[tuple[str, int, bool]],
) -> None:
    now = leader_leo = 0
    fetches = [(0, 0)]  # (time, the leader's log end then) of every fetch
    clock = FetchClock()
    lazy = FollowerState()
    kafka = KafkaFollower()
    clock.ms = now
    lazy.record_fetch(0, leader_leo, now, clock)  # the session's first (full) fetch
    kafka.fetch(0, leader_leo, now)
    for kind, amount, flag in events:
        if kind == "tick":
            now += amount
        elif kind == "append":
            lazy.settle(leader_leo)  # as ReplicaManager.append_as_leader does
            leader_leo += amount
        else:
            offset = min(leader_leo, lazy.fetch_offset + amount)
            clock.ms = now  # every round moves the session's clock
            # Recorded one by one: a partition the request lists (its position moved),
            # one answered with records (behind the log end), or any in a round that looked
            # at every partition.
            if offset != lazy.fetch_offset or offset < leader_leo or flag:
                lazy.record_fetch(offset, leader_leo, now, clock)
            kafka.fetch(offset, leader_leo, now)
            fetches.append((now, leader_leo))
        assert lazy.fetch_offset == kafka.fetch_offset
        assert lazy.caught_up_ms(leader_leo) == kafka.last_caught_up_ms
        # and Kafka's rule is sound: the follower now holds all the leader held then
        assert kafka.last_caught_up_ms <= max(t for t, leo in fetches if kafka.fetch_offset >= leo)
