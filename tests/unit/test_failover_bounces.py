"""A failover's view of brokers that bounced while no controller watched: ISR members
registered after the last write of the partition state listing them (`stale_isr_members`)
leave the ISRs and leaderships where a live member is left (`without_stale_replicas`,
`drop_stale_isr_members`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.context import ControllerContext, ReplicaAssignment
from controller.election import without_stale_replicas
from controller.reactions import drop_stale_isr_members, stale_isr_members
from tests.unit.test_state_machines import Cluster, registration
from zkdata.client import ControllerMovedError
from zkdata.znodes import LeaderAndIsr, PartitionState, TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("u", 0)


def state(leader: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(LeaderAndIsr(leader, 3, isr, 5), 2)


def loaded(
    states: Mapping[TopicPartition, PartitionState | None],
    broker_epochs: Mapping[int, int],
    deleting: set[str] | None = None,
) -> ControllerContext:
    """A context as a failover loads it: these states, these brokers registered."""
    ctx = ControllerContext(epoch=3, epoch_zk_version=2)
    ctx.add_live_brokers({b: (registration(b), e) for b, e in broker_epochs.items()})
    ctx.adopt_partition_states(states)
    for tp, s in states.items():
        if s is not None:
            replicas = tuple(sorted({*s.leader_and_isr.isr, 1, 2, 3}))
            ctx.update_assignment(tp, ReplicaAssignment(replicas))
    ctx.topics_to_be_deleted = set(deleting or ())
    return ctx


def stale(
    states: Mapping[TopicPartition, PartitionState | None],
    written_at: Mapping[TopicPartition, int],
    broker_epochs: Mapping[int, int],
    deleting: set[str] | None = None,
) -> dict[TopicPartition, frozenset[int]]:
    return stale_isr_members(loaded(states, broker_epochs, deleting), written_at)


# --- which ISR members are stale ---------------------------------------------------------


def test_a_broker_registered_after_a_state_listing_it_was_written_is_stale_there() -> None:
    # Broker 2 registered at zxid 100, after t-0's state (zxid 40) listed it as leader.
    states = {T0: state(2, (2, 1, 3)), T1: state(1, (1, 3))}
    got = stale(states, {T0: 40, T1: 40}, {1: 10, 2: 100, 3: 12})
    assert got == {T0: frozenset({2})}


def test_nor_in_states_written_since() -> None:
    # Only states older than the newest registration come with their zxid; t-0 (ISR with
    # 2) was written since 2 registered, so it is not among them.
    states = {T0: state(2, (2, 1)), T1: state(1, (1, 3))}
    assert stale(states, {T1: 40}, {1: 10, 2: 100, 3: 12}) == {}


def test_missing_states_and_unregistered_brokers_are_left_out() -> None:
    states: dict[TopicPartition, PartitionState | None] = {T0: None, T1: state(4, (4, 2))}
    # 4 is not registered (no broker epoch); 2 registered before t-1 was written.
    assert stale(states, {T0: 1, T1: 40}, {1: 10, 2: 30}) == {}


def test_nor_in_a_topic_queued_for_deletion() -> None:
    """A broker's death leaves the states of a topic being deleted as they were (its
    replicas become ineligible for deletion, not Offline): after its return they are
    older than its registration, and say nothing of it."""
    states = {T0: state(2, (2, 1)), T2: state(2, (2, 1))}
    epochs = {1: 10, 2: 100}
    assert stale(states, {T0: 40}, epochs, deleting={"t"}) == {}
    assert stale(states, {T0: 40, T2: 40}, epochs, deleting={"t"}) == {T2: frozenset({2})}


def test_several_brokers_and_isrs() -> None:
    states = {T0: state(1, (1, 2)), T1: state(2, (2, 3)), T2: state(3, (3, 1))}
    written = {T0: 50, T1: 70, T2: 20}
    # 1 registered at 60: after t-0 (50) and u-0 (20); 2 at 65: after t-0 only; 3 at 25:
    # after u-0 (20), which lists it.
    assert stale(states, written, {1: 60, 2: 65, 3: 25}) == {
        T0: frozenset({1, 2}),
        T2: frozenset({1, 3}),
    }
    assert stale(states, written, {1: 15, 2: 45, 3: 15}) == {}


brokers = st.integers(1, 5)
isrs = st.lists(brokers, min_size=1, max_size=4, unique=True).map(tuple)


@given(
    st.dictionaries(
        st.integers(0, 30).map(lambda p: TopicPartition("t", p)),
        st.tuples(st.integers(-1, 5), isrs, st.integers(0, 200)),
    ),
    st.dictionaries(brokers, st.integers(0, 200)),
)
def test_stale_exactly_when_registered_after_the_write_of_a_state_listing_it(
    partitions: dict[TopicPartition, tuple[int, tuple[int, ...], int]],
    broker_epochs: dict[int, int],
) -> None:
    states = {tp: state(leader, isr) for tp, (leader, isr, _) in partitions.items()}
    newest = max(broker_epochs.values(), default=0)
    # What the store returns: the states last written before the newest registration.
    written = {tp: zxid for tp, (_, _, zxid) in partitions.items() if zxid < newest}
    got = stale(states, written, broker_epochs)
    for tp, (_, isr, zxid) in partitions.items():
        expected = {b for b in isr if broker_epochs.get(b, -1) > zxid}
        assert got.get(tp, frozenset()) == expected


# --- what becomes of the ISRs listing them -----------------------------------------------


def test_a_stale_leader_gives_way_to_the_first_live_member_left() -> None:
    ctx = loaded({T0: state(2, (2, 3, 1))}, {1: 10, 2: 100, 3: 12})
    current = LeaderAndIsr(2, 3, (2, 3, 1), 5)
    # assignment (1, 2, 3): 1 is the first live member left
    assert without_stale_replicas(ctx, T0, current, {2}) == LeaderAndIsr(1, 4, (3, 1), 5)


def test_a_stale_follower_leaves_the_isr_and_the_leader_stays() -> None:
    ctx = loaded({T0: state(1, (1, 2))}, {1: 10, 2: 100})
    current = LeaderAndIsr(1, 3, (1, 2), 5)
    assert without_stale_replicas(ctx, T0, current, {2}) == LeaderAndIsr(1, 4, (1,), 5)


def test_kept_as_it_is_when_no_live_member_would_be_left() -> None:
    """Every live member stale (a whole cluster restarted, say), or the only other one
    gone: nothing tells which replica has what, so nothing is changed, as in Kafka."""
    ctx = loaded({T0: state(2, (2, 3))}, {2: 100, 3: 90})
    assert without_stale_replicas(ctx, T0, LeaderAndIsr(2, 3, (2, 3), 5), {2, 3}) is None
    # 4 is in the ISR but not registered: no live member is left without 2
    ctx = loaded({T1: state(2, (2, 4))}, {1: 10, 2: 100})
    assert without_stale_replicas(ctx, T1, LeaderAndIsr(2, 3, (2, 4), 5), {2}) is None


def test_a_stale_leader_gives_way_only_to_an_online_member() -> None:
    """Live is online, as for every election: not shutting down, nor on a failed log
    directory (a failover's context holds neither yet; the decision is kept in line with
    the others all the same)."""
    current = LeaderAndIsr(2, 3, (2, 1, 3), 5)
    ctx = loaded({T0: state(2, (2, 1, 3))}, {1: 10, 2: 100, 3: 12})
    ctx.shutting_down_broker_ids.add(1)
    assert without_stale_replicas(ctx, T0, current, {2}) == LeaderAndIsr(3, 4, (1, 3), 5)
    ctx.shutting_down_broker_ids.clear()
    ctx.replicas_on_offline_dirs[1] = {T0}
    assert without_stale_replicas(ctx, T0, current, {2}) == LeaderAndIsr(3, 4, (1, 3), 5)
    ctx.replicas_on_offline_dirs[3] = {T0}
    assert without_stale_replicas(ctx, T0, current, {2}) is None  # no online member left


def test_a_gone_leader_is_left_to_the_elections() -> None:
    ctx = loaded({T0: state(4, (4, 2, 1))}, {1: 10, 2: 100})
    current = LeaderAndIsr(4, 3, (4, 2, 1), 5)
    assert without_stale_replicas(ctx, T0, current, {2}) == LeaderAndIsr(4, 4, (4, 1), 5)


def test_the_stale_members_leave_in_one_write_each_logged_offline(tmp_path: Path) -> None:
    c = Cluster(brokers=(1, 2, 3), log_dir=tmp_path)
    c.create_topic("t", {0: [2, 1, 3], 1: [1, 3, 2], 2: [3, 2, 1]})
    writes = len(c.store.writes)
    # Broker 2 came back unseen: stale in t-0 (which it leads) and t-1; t-2's ISR is all
    # stale but 2 (broker 3 came back too) and 1, which is gone.
    for b in (1, 2, 3):
        c.ctx.broker_epochs[b] = c.store.next_zxid()
    del c.ctx.live_brokers[1]
    stale_members = {
        T0: frozenset({2}),
        T1: frozenset({2}),
        TopicPartition("t", 2): frozenset({3, 2}),
    }
    written = drop_stale_isr_members(c.psm, stale_members)
    assert set(written) == {T0, T1}
    assert c.leader_and_isr(T0) == LeaderAndIsr(3, 1, (1, 3), 1)  # 1 is not live: 3
    assert c.leader_and_isr(T1) == LeaderAndIsr(1, 1, (1, 3), 1)
    assert c.ctx.leadership[T0].leader_and_isr == c.leader_and_isr(T0)
    assert len(c.store.writes) == writes + 2
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    logged = [(r["partition"], r["reason"]) for r in rows if r["event"] == "partition_state"]
    assert logged[-2:] == [(0, "offline"), (1, "offline")]


def test_a_state_a_leader_changed_meanwhile_is_read_again_and_kept() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic("t", {0: [2, 1, 3]})
    c.ctx.broker_epochs[2] = c.store.next_zxid()
    c.store.race(T0, lambda lai: LeaderAndIsr(2, lai.leader_epoch, (2, 1), lai.zk_version))
    assert drop_stale_isr_members(c.psm, {T0: frozenset({2})}) == {}
    assert c.leader_and_isr(T0).isr == (2, 1)
    assert c.ctx.leadership[T0].leader_and_isr == c.leader_and_isr(T0)


def test_a_fenced_controller_drops_nothing() -> None:
    c = Cluster(brokers=(1, 2, 3))
    c.create_topic("t", {0: [2, 1, 3]})
    before = c.store.snapshot()
    c.store.elect_other_controller()
    with pytest.raises(ControllerMovedError):
        drop_stale_isr_members(c.psm, {T0: frozenset({2})})
    assert c.store.snapshot() == before
