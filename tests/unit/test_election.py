"""Leader election strategies (Kafka's Election.scala), as tables and as properties.

"Live" is a broker in the context's live set and not shutting down, except for controlled
shutdown, where shutting-down brokers are live but may not lead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from controller.election import (
    ElectionResult,
    ElectionStrategy,
    elect,
    imbalanced_partitions,
    initial_leader_and_isr,
    without_replica,
    without_replicas,
)
from zkdata.znodes import BrokerRegistration, EndPoint, LeaderAndIsr, TopicPartition

TP = TopicPartition("t", 0)
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None)
BROKERS = range(1, 7)


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", f"b{broker_id}", 9092),))


def context(
    live: Iterable[int],
    shutting_down: Iterable[int] = (),
    assignments: dict[TopicPartition, ReplicaAssignment] | None = None,
) -> ControllerContext:
    ctx = ControllerContext(epoch=3, epoch_zk_version=1)
    ctx.add_live_brokers({b: (registration(b), 100 + b) for b in live})
    ctx.shutting_down_broker_ids = set(shutting_down)
    for tp, ra in (assignments or {}).items():
        ctx.update_assignment(tp, ra)
    return ctx


def single(
    replicas: Sequence[int], live: Iterable[int], shutting_down: Iterable[int] = ()
) -> ControllerContext:
    return context(live, shutting_down, {TP: ReplicaAssignment(tuple(replicas))})


def lai(leader: int, isr: Sequence[int], epoch: int = 7, zk_version: int = 4) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), zk_version)


# --- offline partition ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "isr", "live", "unclean", "leader", "new_isr", "was_unclean"),
    [
        # first replica, in assignment order, that is live and in the ISR
        ((1, 2, 3), (1, 2, 3), {2, 3}, False, 2, (2, 3), False),
        # assignment order decides, not ISR order; the new ISR keeps the ISR's order
        ((1, 2, 3), (3, 2), {2, 3}, False, 2, (3, 2), False),
        ((3, 1, 2), (1, 2, 3), {1, 2, 3}, False, 3, (1, 2, 3), False),
        # a live replica outside the ISR never leads a clean election
        ((1, 2, 3), (1, 3), {2, 3}, False, 3, (3,), False),
        # no live ISR member, unclean off: no leader
        ((1, 2, 3), (1,), {2, 3}, False, None, None, False),
        # ... unclean on: the first live replica, and the ISR is just it
        ((1, 2, 3), (1,), {2, 3}, True, 2, (2,), True),
        ((1, 2, 3), (1,), {3}, True, 3, (3,), True),
        # unclean allowed but not needed: still clean
        ((1, 2, 3), (1, 3), {2, 3}, True, 3, (3,), False),
        # nothing live at all
        ((1, 2, 3), (1, 2, 3), set(), True, None, None, False),
        # ISR members that are dead leave the ISR
        ((1, 2, 3, 4), (4, 1, 3, 2), {2, 4}, False, 2, (4, 2), False),
    ],
)
def test_offline_election(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    live: set[int],
    unclean: bool,
    leader: int | None,
    new_isr: tuple[int, ...] | None,
    was_unclean: bool,
) -> None:
    ctx = single(replicas, live)
    result = elect(ctx, TP, lai(1, isr), ElectionStrategy.OFFLINE, unclean)
    if leader is None:
        assert result.leader_and_isr is None
    else:
        assert result.leader_and_isr == LeaderAndIsr(leader, 8, new_isr or (), 4)
    assert result.unclean is was_unclean
    assert result.live_replicas == tuple(r for r in replicas if r in live)


def test_offline_election_treats_shutting_down_brokers_as_not_live() -> None:
    ctx = single((1, 2, 3), live={1, 2, 3}, shutting_down={1})
    result = elect(ctx, TP, lai(1, (1, 2, 3)), ElectionStrategy.OFFLINE)
    assert result.leader_and_isr == LeaderAndIsr(2, 8, (2, 3), 4)
    assert result.live_replicas == (2, 3)
    # and if only a shutting-down replica is in the ISR, even unclean election passes it by
    ctx = single((1, 2), live={1, 2}, shutting_down={1})
    assert elect(ctx, TP, lai(1, (1,)), ElectionStrategy.OFFLINE).leader_and_isr is None
    result = elect(ctx, TP, lai(1, (1,)), ElectionStrategy.OFFLINE, unclean_enabled=True)
    assert result.leader_and_isr == LeaderAndIsr(2, 8, (2,), 4)
    assert result.unclean


# --- reassignment ----------------------------------------------------------------------


def test_reassign_election_picks_the_first_live_target_replica_in_the_isr() -> None:
    ra = ReplicaAssignment.for_reassignment((1, 2, 3), (4, 5, 6))
    assert ra.replicas == (4, 5, 6, 1, 2, 3)
    assert ra.target_replicas == (4, 5, 6)
    ctx = context({1, 2, 3, 4, 5, 6}, assignments={TP: ra})
    result = elect(ctx, TP, lai(1, (1, 2, 3, 5, 4)), ElectionStrategy.REASSIGN)
    # ISR unchanged, epoch bumped
    assert result.leader_and_isr == LeaderAndIsr(4, 8, (1, 2, 3, 5, 4), 4)

    ctx = context({1, 2, 3, 5, 6}, assignments={TP: ra})  # 4 is dead
    result = elect(ctx, TP, lai(1, (1, 2, 3, 4, 5)), ElectionStrategy.REASSIGN)
    assert result.leader_and_isr is not None
    assert result.leader_and_isr.leader == 5


def test_reassign_election_never_picks_an_origin_replica() -> None:
    ra = ReplicaAssignment.for_reassignment((1, 2, 3), (3, 4, 5))
    assert ra.target_replicas == (3, 4, 5)
    ctx = context({1, 2, 4, 5}, assignments={TP: ra})  # 3 dead; 4, 5 not caught up
    assert elect(ctx, TP, lai(1, (1, 2, 3)), ElectionStrategy.REASSIGN).leader_and_isr is None
    ctx = context({1, 2, 3, 4, 5}, assignments={TP: ra})
    result = elect(ctx, TP, lai(1, (1, 2, 3)), ElectionStrategy.REASSIGN)
    assert result.leader_and_isr is not None
    assert result.leader_and_isr.leader == 3


# --- preferred replica ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("isr", "live", "shutting_down", "leader"),
    [
        ((2, 3, 1), {1, 2, 3}, set(), 1),
        ((2, 3), {1, 2, 3}, set(), None),  # preferred replica out of the ISR
        ((1, 2, 3), {2, 3}, set(), None),  # preferred replica dead
        ((1, 2, 3), {1, 2, 3}, {1}, None),  # preferred replica shutting down
    ],
)
def test_preferred_election(
    isr: tuple[int, ...], live: set[int], shutting_down: set[int], leader: int | None
) -> None:
    ctx = single((1, 2, 3), live, shutting_down)
    result = elect(ctx, TP, lai(2, isr), ElectionStrategy.PREFERRED)
    if leader is None:
        assert result.leader_and_isr is None
    else:
        assert result.leader_and_isr == LeaderAndIsr(leader, 8, isr, 4)


# --- controlled shutdown -------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "isr", "live", "shutting_down", "leader", "new_isr"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, 2, (2, 3)),
        ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, 3, (3,)),
        ((1, 2, 3), (1,), {1, 2, 3}, {1}, None, None),
        # a dead ISR member cannot lead, but stays in the ISR (only shutting-down ones leave)
        ((1, 2, 3), (1, 2, 3), {1, 3}, {1}, 3, (2, 3)),
        # two brokers shutting down at once
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1, 2}, 3, (3,)),
        ((1, 2, 3), (1, 2), {1, 2, 3}, {1, 2}, None, None),
    ],
)
def test_controlled_shutdown_election(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    live: set[int],
    shutting_down: set[int],
    leader: int | None,
    new_isr: tuple[int, ...] | None,
) -> None:
    ctx = single(replicas, live, shutting_down)
    result = elect(ctx, TP, lai(1, isr), ElectionStrategy.CONTROLLED_SHUTDOWN)
    if leader is None:
        assert result.leader_and_isr is None
    else:
        assert result.leader_and_isr == LeaderAndIsr(leader, 8, new_isr or (), 4)
    # the LeaderAndIsr goes to shutting-down replicas too
    assert result.live_replicas == tuple(r for r in replicas if r in live)


@pytest.mark.parametrize(
    ("strategy", "current", "shutting_down", "leader", "new_isr", "told"),
    [
        # a shutting-down broker is not live: it neither leads nor hears of it
        (ElectionStrategy.OFFLINE, lai(1, (1, 2, 3)), {1}, 2, (2, 3), (2, 3)),
        # ... but controlled shutdown tells it (and every other replica live or stopping)
        (ElectionStrategy.CONTROLLED_SHUTDOWN, lai(1, (1, 2, 3)), {1}, 2, (2, 3), (1, 2, 3)),
        (ElectionStrategy.PREFERRED, lai(2, (1, 2, 3)), {3}, 1, (1, 2, 3), (1, 2, 3)),
        (ElectionStrategy.REASSIGN, lai(2, (1, 2, 3)), {3}, 1, (1, 2, 3), (1, 2, 3)),
    ],
)
def test_a_failed_log_directory_elsewhere_leaves_shutting_down_brokers_as_they_were(
    strategy: ElectionStrategy,
    current: LeaderAndIsr,
    shutting_down: set[int],
    leader: int,
    new_isr: tuple[int, ...],
    told: tuple[int, ...],
) -> None:
    """With a replica on a failed log directory anywhere, liveness is asked of each replica
    (Kafka's isReplicaOnline, the one test there is): who is shutting down counts as it
    does without one."""
    ctx = single((1, 2, 3), live={1, 2, 3, 4}, shutting_down=shutting_down)
    ctx.replicas_on_offline_dirs = {4: {TopicPartition("other", 0)}}
    result = elect(ctx, TP, current, strategy)
    assert result.leader_and_isr == LeaderAndIsr(leader, 8, new_isr, 4)
    assert result.live_replicas == told


def test_a_replica_on_a_failed_log_directory_neither_leads_nor_hears_of_it() -> None:
    ctx = single((1, 2, 3), live={1, 2, 3}, shutting_down={1})
    ctx.replicas_on_offline_dirs = {2: {TP}}
    result = elect(ctx, TP, lai(1, (1, 2, 3)), ElectionStrategy.CONTROLLED_SHUTDOWN)
    assert result.leader_and_isr == LeaderAndIsr(3, 8, (2, 3), 4)
    assert result.live_replicas == (1, 3)
    result = elect(ctx, TP, lai(1, (1, 2, 3)), ElectionStrategy.OFFLINE)
    assert result.leader_and_isr == LeaderAndIsr(3, 8, (3,), 4)
    assert result.live_replicas == (3,)


# --- new partitions and replicas going offline ---------------------------------------


def test_initial_leader_and_isr() -> None:
    ctx = single((3, 1, 2), live={1, 2})
    assert initial_leader_and_isr(ctx, TP) == LeaderAndIsr(1, 0, (1, 2), 0)
    ctx = single((3, 1, 2), live={1, 2, 3}, shutting_down={3})
    assert initial_leader_and_isr(ctx, TP) == LeaderAndIsr(1, 0, (1, 2), 0)
    assert initial_leader_and_isr(single((3, 4), live={1, 2}), TP) is None
    assert initial_leader_and_isr(context({1}), TP) is None  # no assignment at all


@pytest.mark.parametrize(
    ("current", "replica", "expected"),
    [
        (lai(1, (1, 2, 3)), 1, LeaderAndIsr(-1, 8, (2, 3), 4)),
        (lai(1, (1, 2, 3)), 2, LeaderAndIsr(1, 8, (1, 3), 4)),
        # KAFKA-5083: the last ISR member stays, even when it was the leader
        (lai(1, (1,)), 1, LeaderAndIsr(-1, 8, (1,), 4)),
        (lai(-1, (2,)), 2, LeaderAndIsr(-1, 8, (2,), 4)),
    ],
)
def test_without_replica(current: LeaderAndIsr, replica: int, expected: LeaderAndIsr) -> None:
    assert without_replica(current, replica) == expected


# --- auto leader rebalance -----------------------------------------------------------


def rebalance_context(
    led_elsewhere: int, total: int = 10, live: Iterable[int] = (1, 2, 3)
) -> ControllerContext:
    ctx = context(live)
    for p in range(total):
        tp = TopicPartition("t", p)
        ctx.update_assignment(tp, ReplicaAssignment((1, 2, 3)))
        leader = 2 if p < led_elsewhere else 1
        ctx.leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 1, (1, 2, 3)), 3)
    return ctx


def test_rebalance_moves_partitions_back_once_the_imbalance_exceeds_the_threshold() -> None:
    ctx = rebalance_context(led_elsewhere=2)
    assert imbalanced_partitions(ctx, 10) == {1: [TopicPartition("t", 0), TopicPartition("t", 1)]}
    # exactly at the threshold: nothing moves (Kafka: ratio > percentage)
    assert imbalanced_partitions(rebalance_context(led_elsewhere=1), 10) == {}
    assert imbalanced_partitions(rebalance_context(led_elsewhere=0), 0) == {}
    assert imbalanced_partitions(rebalance_context(led_elsewhere=1), 0) == {1: [TP]}


def test_rebalance_skips_what_a_preferred_election_could_not_do() -> None:
    ctx = rebalance_context(led_elsewhere=5)
    # t-0: preferred replica out of the ISR; t-1: being reassigned
    ctx.leadership[TP] = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (2, 3)), 3)
    ctx.partitions_being_reassigned.add(TopicPartition("t", 1))
    assert imbalanced_partitions(ctx, 10) == {1: [TopicPartition("t", p) for p in (2, 3, 4)]}
    # preferred broker dead, or shutting down: nothing to propose
    assert imbalanced_partitions(rebalance_context(5, live=(2, 3)), 10) == {}
    ctx = rebalance_context(5)
    ctx.shutting_down_broker_ids.add(1)
    assert imbalanced_partitions(ctx, 10) == {}
    # topics being deleted are left alone
    ctx = rebalance_context(5)
    ctx.topics_to_be_deleted.add("t")
    assert imbalanced_partitions(ctx, 10) == {}


# --- properties --------------------------------------------------------------------------


@dataclass
class Scenario:
    ctx: ControllerContext
    current: LeaderAndIsr
    strategy: ElectionStrategy
    unclean: bool

    @property
    def assignment(self) -> ReplicaAssignment:
        return self.ctx.full_assignment(TP)

    def live(self, broker: int) -> bool:
        return self.ctx.is_replica_online(broker)

    def live_or_shutting_down(self, broker: int) -> bool:
        return self.ctx.is_replica_online(broker, include_shutting_down=True)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
    if draw(st.booleans()):
        target = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=4, unique=True))
        ra = ReplicaAssignment.for_reassignment(tuple(replicas), tuple(target))
    else:
        ra = ReplicaAssignment(tuple(replicas))
    # Each broker live three times in four; in half the scenarios some live brokers shut
    # down (each one time in four). Drawn as sets of brokers, most were dead and 85% of
    # the elections found no leader (1 in 300 unclean, 2 preferred elections made): too
    # few for the checks below to see a preferred election take a leader outside the ISR.
    live = {b for b in BROKERS if draw(st.integers(0, 3))}
    stopping = draw(st.booleans())
    shutting_down = {b for b in sorted(live) if stopping and not draw(st.integers(0, 3))}
    isr = draw(st.lists(st.sampled_from(ra.replicas), min_size=1, unique=True))
    leader = draw(st.sampled_from([-1, *isr]))
    current = LeaderAndIsr(
        leader, draw(st.integers(0, 10_000)), tuple(isr), draw(st.integers(0, 10_000))
    )
    ctx = context(live, shutting_down, {TP: ra})
    return Scenario(ctx, current, draw(st.sampled_from(ElectionStrategy)), draw(st.booleans()))


def candidates(s: Scenario) -> list[int]:
    """Who may lead, in the order Kafka tries them, restated from section 6 of the model."""
    isr = s.current.isr
    ra = s.assignment
    if s.strategy is ElectionStrategy.OFFLINE:
        clean = [r for r in ra.replicas if s.live(r) and r in isr]
        if clean or not s.unclean:
            return clean
        return [r for r in ra.replicas if s.live(r)]
    if s.strategy is ElectionStrategy.REASSIGN:
        return [r for r in ra.target_replicas if s.live(r) and r in isr]
    if s.strategy is ElectionStrategy.PREFERRED:
        first = ra.replicas[0]
        return [first] if s.live(first) and first in isr else []
    shutting = s.ctx.shutting_down_broker_ids
    return [r for r in ra.replicas if s.live_or_shutting_down(r) and r in isr and r not in shutting]


# 1,000 scenarios (a few seconds): at 300 some derandomized runs drew no scenario telling the
# first eligible replica from a later one for some strategy (an election taking the last
# live replica in an unclean election passed).
@settings(SETTINGS, max_examples=1000)
@given(scenarios())
def test_election_properties(s: Scenario) -> None:
    result: ElectionResult = elect(s.ctx, TP, s.current, s.strategy, s.unclean)
    old = s.current
    expected = candidates(s)
    assert result.topic_partition == TP
    if result.leader_and_isr is None:
        assert expected == [], "a leader was eligible but none was elected"
        assert not result.unclean
        return
    new = result.leader_and_isr
    # the first eligible replica in assignment order leads
    assert expected, "elected a leader nobody was eligible to be"
    assert new.leader == expected[0]
    assert new.leader in s.assignment.replicas
    # live; for controlled shutdown, live and not shutting down
    assert s.live_or_shutting_down(new.leader)
    assert new.leader not in s.ctx.shutting_down_broker_ids
    # clean elections pick from the ISR; unclean ones only when allowed and needed
    if result.unclean:
        assert s.strategy is ElectionStrategy.OFFLINE
        assert s.unclean
        assert not any(s.live(r) for r in old.isr)
        assert new.isr == (new.leader,)
    else:
        assert new.leader in old.isr
    # the new ISR is never empty, holds the leader, and only shrinks (plus the leader)
    assert new.isr
    assert new.leader in new.isr
    assert set(new.isr) <= set(old.isr) | {new.leader}
    assert len(set(new.isr)) == len(new.isr)
    # epochs: one more leader epoch, same zkVersion (the write is conditional on it)
    assert new.leader_epoch == old.leader_epoch + 1
    assert new.zk_version == old.zk_version
    # per strategy
    if s.strategy is ElectionStrategy.REASSIGN:
        assert new.leader in s.assignment.target_replicas
        assert new.isr == old.isr
    elif s.strategy is ElectionStrategy.PREFERRED:
        assert new.leader == s.assignment.replicas[0]
        assert new.isr == old.isr
    elif s.strategy is ElectionStrategy.CONTROLLED_SHUTDOWN:
        assert new.isr == tuple(r for r in old.isr if r not in s.ctx.shutting_down_broker_ids)
    elif not result.unclean:
        assert new.isr == tuple(r for r in old.isr if s.live(r))
    # the LeaderAndIsr goes only to live replicas of the partition
    for r in result.live_replicas:
        assert s.live_or_shutting_down(r)
        assert r in s.assignment.replicas


@SETTINGS
@given(scenarios())
def test_unclean_flag_never_changes_a_clean_outcome(s: Scenario) -> None:
    """Allowing unclean election only matters when no live ISR member exists."""
    clean = elect(s.ctx, TP, s.current, ElectionStrategy.OFFLINE, False)
    maybe = elect(s.ctx, TP, s.current, ElectionStrategy.OFFLINE, True)
    if clean.leader_and_isr is not None:
        assert maybe == clean
    elif any(s.live(r) for r in s.assignment.replicas):
        assert maybe.unclean


@SETTINGS
@given(
    isr=st.lists(st.sampled_from(BROKERS), min_size=1, unique=True),
    data=st.data(),
    epoch=st.integers(0, 10_000),
    zk_version=st.integers(0, 10_000),
)
def test_without_replica_properties(
    isr: list[int], data: st.DataObject, epoch: int, zk_version: int
) -> None:
    leader = data.draw(st.sampled_from([-1, *isr]))
    replica = data.draw(st.sampled_from(isr))
    current = LeaderAndIsr(leader, epoch, tuple(isr), zk_version)
    new = without_replica(current, replica)
    assert new.isr, "an ISR was emptied"
    if len(isr) == 1:
        assert new.isr == current.isr
    else:
        assert new.isr == tuple(r for r in isr if r != replica)
    assert new.leader == (-1 if replica == leader else leader)
    assert new.leader_epoch == epoch + 1
    assert new.zk_version == zk_version


@SETTINGS
@given(
    isr=st.lists(st.sampled_from(BROKERS), min_size=1, unique=True),
    data=st.data(),
    epoch=st.integers(0, 10_000),
    zk_version=st.integers(0, 10_000),
)
def test_without_replicas_is_each_isr_member_taken_out_in_turn_as_one_decision(
    isr: list[int], data: st.DataObject, epoch: int, zk_version: int
) -> None:
    """A topic deletion's Offline step, one write a partition (item 56 of
    docs/architecture.md): the leader and ISR that taking the replicas out one at a time
    (a broker at a time, as Kafka writes them) leaves, its leader epoch bumped once."""
    leader = data.draw(st.sampled_from([-1, *isr]))
    leaving = data.draw(st.lists(st.sampled_from(BROKERS), min_size=1, unique=True))
    current = LeaderAndIsr(leader, epoch, tuple(isr), zk_version)
    one_at_a_time = current
    for replica in leaving:
        if replica in one_at_a_time.isr:
            one_at_a_time = without_replica(one_at_a_time, replica)
    new = without_replicas(current, leaving)
    assert new.isr, "an ISR was emptied"
    assert (new.leader, new.isr) == (one_at_a_time.leader, one_at_a_time.isr)
    assert new.leader_epoch == epoch + 1
    assert new.zk_version == zk_version
    if len(leaving) == 1 and leaving[0] in isr:
        assert new == without_replica(current, leaving[0])


@st.composite
def rebalance_contexts(draw: st.DrawFn) -> ControllerContext:
    live = draw(st.sets(st.sampled_from(BROKERS), min_size=1))
    shutting_down = draw(st.sets(st.sampled_from(sorted(live))))
    ctx = context(live, shutting_down)
    for topic in ("a", "b"):
        for p in range(draw(st.integers(0, 6))):
            tp = TopicPartition(topic, p)
            replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True))
            ctx.update_assignment(tp, ReplicaAssignment(tuple(replicas)))
            if draw(st.booleans()):
                isr = draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))
                leader = draw(st.sampled_from([-1, *isr]))
                ctx.leadership[tp] = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(leader, 1, tuple(isr)), 3
                )
            if draw(st.integers(0, 9)) == 0:
                ctx.partitions_being_reassigned.add(tp)
    if draw(st.booleans()):
        ctx.topics_to_be_deleted.add("b")
    return ctx


@SETTINGS
@given(rebalance_contexts(), st.integers(0, 100))
def test_rebalance_properties(ctx: ControllerContext, percentage: int) -> None:
    proposed = imbalanced_partitions(ctx, percentage)
    for broker, tps in proposed.items():
        assert tps
        assert ctx.is_replica_online(broker), "proposed moving leaders to a dead broker"
        for tp in tps:
            assert tp.topic not in ctx.topics_to_be_deleted
            assert tp not in ctx.partitions_being_reassigned
            assert ctx.replicas(tp)[0] == broker
            lai = ctx.leadership[tp].leader_and_isr
            assert lai.leader != broker
            assert broker in lai.isr, "proposed a preferred replica outside the ISR"
            # the preferred election would succeed
            result = elect(ctx, tp, lai, ElectionStrategy.PREFERRED)
            assert result.leader_and_isr is not None
            assert result.leader_and_isr.leader == broker
    # completeness: every broker over the threshold gets all its movable partitions
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp in ctx.all_partitions():
        if tp.topic not in ctx.topics_to_be_deleted:
            by_preferred.setdefault(ctx.replicas(tp)[0], []).append(tp)
    for broker, tps in by_preferred.items():
        not_led = [
            tp
            for tp in tps
            if tp in ctx.leadership and ctx.leadership[tp].leader_and_isr.leader != broker
        ]
        movable = [
            tp
            for tp in not_led
            if tp not in ctx.partitions_being_reassigned
            and ctx.is_replica_online(broker)
            and broker in ctx.leadership[tp].leader_and_isr.isr
        ]
        if len(not_led) / len(tps) > percentage / 100 and movable:
            assert sorted(proposed[broker]) == sorted(movable)
        else:
            assert broker not in proposed
