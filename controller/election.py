"""Leader election strategies and the other leadership decisions, as pure functions.

Kafka's Election.scala and PartitionLeaderElectionAlgorithms. "Live" means online: on a
live broker, and not on a log directory of it that failed; shutting-down brokers count as
live only where said. Each decision that changes
the leader or the ISR bumps the leader epoch, and no decision empties an ISR.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import NamedTuple

from controller.context import ControllerContext, IdentityHashedEnum
from zkdata.znodes import NO_LEADER, LeaderAndIsr, TopicPartition


class ElectionStrategy(IdentityHashedEnum):
    OFFLINE = "offline"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


class ElectionResult(NamedTuple):
    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None  # None: no eligible leader
    live_replicas: tuple[int, ...]  # who receives the LeaderAndIsr
    unclean: bool = False


# --- the four algorithms ----------------------------------------------------------------


def offline_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    unclean_enabled: bool,
) -> tuple[int | None, bool]:
    """First live ISR member in assignment order; else, if allowed, first live replica.

    Returns (leader, unclean).
    """
    for r in assignment:
        if r in live and r in isr:
            return r, False
    if unclean_enabled:
        for r in assignment:
            if r in live:
                return r, True
    return None, False


def reassign_leader(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    for r in target:
        if r in live and r in isr:
            return r
    return None


def preferred_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    for r in assignment:
        if r in live_or_shutting_down and r in isr and r not in shutting_down:
            return r
    return None


# --- the strategies over the context ----------------------------------------------------


def _live(
    ctx: ControllerContext,
    tp: TopicPartition,
    replicas: Sequence[int],
    *,
    shutting_down: bool = False,
) -> tuple[int, ...]:
    """The online replicas (ctx.is_replica_online, inlined: called per partition)."""
    if ctx.replicas_on_offline_dirs:
        return ctx.online_replicas(tp, replicas, shutting_down)
    live = ctx.live_brokers
    down = ctx.shutting_down_broker_ids
    if shutting_down or not down:
        return tuple(filter(live.__contains__, replicas))  # no generator: called per partition
    return tuple(r for r in replicas if r in live and r not in down)


def leader_for_offline(
    ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr, unclean_enabled: bool
) -> ElectionResult:
    assignment = ctx.replicas(tp)
    live = _live(ctx, tp, assignment)
    leader, unclean = offline_leader(assignment, current.isr, live, unclean_enabled)
    if leader is None:
        return ElectionResult(tp, None, live)
    if leader in current.isr:
        # ctx.is_replica_online inlined: a broker loss asks it of 10,000s of ISRs.
        brokers, down = ctx.live_brokers, ctx.shutting_down_broker_ids
        if ctx.replicas_on_offline_dirs:
            new_isr = ctx.online_replicas(tp, current.isr)
        elif down:
            new_isr = tuple(r for r in current.isr if r in brokers and r not in down)
        else:
            new_isr = tuple(filter(brokers.__contains__, current.isr))
    else:
        new_isr = (leader,)
    return ElectionResult(tp, current.new_leader_and_isr(leader, new_isr), live, unclean)


def leader_for_reassign(
    ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr
) -> ElectionResult:
    target = ctx.full_assignment(tp).target_replicas
    live = _live(ctx, tp, target)
    leader = reassign_leader(target, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, live)
    # Told to every target replica live or shutting down, as Kafka's leaderForReassign:
    # a leader shutting down that is replaced but stays a replica must hear of it.
    told = _live(ctx, tp, target, shutting_down=True)
    return ElectionResult(tp, current.new_leader_and_isr(leader, current.isr), told)


def leader_for_preferred(
    ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr
) -> ElectionResult:
    assignment = ctx.replicas(tp)
    live = _live(ctx, tp, assignment)
    leader = preferred_leader(assignment, current.isr, live)
    if leader is None:
        return ElectionResult(tp, None, live)
    # Told to every replica live or shutting down, as Kafka's leaderForPreferredReplica
    # (the whole assignment; its sender drops the dead): a leader shutting down that is
    # replaced must hear of it, or it leads on at its old epoch.
    told = _live(ctx, tp, assignment, shutting_down=True)
    return ElectionResult(tp, current.new_leader_and_isr(leader, current.isr), told)


def leader_for_controlled_shutdown(
    ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr
) -> ElectionResult:
    assignment = ctx.replicas(tp)
    live = _live(ctx, tp, assignment, shutting_down=True)
    shutting = ctx.shutting_down_broker_ids
    leader = controlled_shutdown_leader(assignment, current.isr, live, shutting)
    if leader is None:
        return ElectionResult(tp, None, live)
    new_isr = tuple(r for r in current.isr if r not in shutting)
    return ElectionResult(tp, current.new_leader_and_isr(leader, new_isr), live)


def elect(
    ctx: ControllerContext,
    tp: TopicPartition,
    current: LeaderAndIsr,
    strategy: ElectionStrategy,
    unclean_enabled: bool = False,
) -> ElectionResult:
    if strategy is ElectionStrategy.OFFLINE:
        return leader_for_offline(ctx, tp, current, unclean_enabled)
    if strategy is ElectionStrategy.REASSIGN:
        return leader_for_reassign(ctx, tp, current)
    if strategy is ElectionStrategy.PREFERRED:
        return leader_for_preferred(ctx, tp, current)
    return leader_for_controlled_shutdown(ctx, tp, current)


# --- other leadership decisions ---------------------------------------------------------


def initial_leader_and_isr(ctx: ControllerContext, tp: TopicPartition) -> LeaderAndIsr | None:
    """A new partition: the first live replica leads, every live replica is in the ISR."""
    live = _live(ctx, tp, ctx.replicas(tp))
    if not live:
        return None
    return LeaderAndIsr(live[0], 0, live, zk_version=0)


def without_replica(current: LeaderAndIsr, replica: int) -> LeaderAndIsr:
    """A replica going offline: it leaves the ISR (never emptying it, KAFKA-5083) and,
    if it led, the partition has no leader until an election finds one."""
    leader = NO_LEADER if current.leader == replica else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return current.new_leader_and_isr(leader, isr)


def without_replicas(current: LeaderAndIsr, replicas: Sequence[int]) -> LeaderAndIsr:
    """Several replicas of a partition going offline together (a topic's deletion takes
    all of them): `without_replica` of each ISR member among them in turn, in `replicas`'
    order, as one decision (one leader epoch bump; Kafka writes one a replica)."""
    leader, isr = current.leader, current.isr
    for replica in replicas:
        if replica in isr:
            leader = NO_LEADER if leader == replica else leader
            isr = isr if len(isr) == 1 else tuple(r for r in isr if r != replica)
    return current.new_leader_and_isr(leader, isr)


def without_stale_replicas(
    ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr, stale: Collection[int]
) -> LeaderAndIsr | None:
    """A failover's repair of an ISR listing earlier incarnations of brokers that have
    registered again since it was written (`stale`): they leave the ISR, and a leadership
    of theirs goes to the first live ISR member left in assignment order (as an offline
    election would choose). None when no live member would be left: kept as it is (every
    live replica there came back unseen, after a whole cluster's restart say), as Kafka
    keeps it. A leader that is gone (not registered) is left to the failover's elections.
    Live is online, as for any election: not shutting down, nor on a failed log directory."""
    isr = tuple(r for r in current.isr if r not in stale)
    live = _live(ctx, tp, isr)
    if not live:
        return None
    leader = current.leader
    if leader in stale:
        chosen, _ = offline_leader(ctx.replicas(tp), isr, live, False)
        # None: its live members are outside the assignment (an admin's partial rewrite)
        leader = live[0] if chosen is None else chosen
    return current.new_leader_and_isr(leader, isr)


def without_leader_lacking_its_log(
    ctx: ControllerContext, tp: TopicPartition, current: LeaderAndIsr, lacking: int
) -> LeaderAndIsr | None:
    """The leader `lacking` answered that it has no log of the partition (back on new
    disks; see the broker's refusal): it leaves the ISR, and the leadership goes to the
    first live ISR member left in assignment order (as an offline election would choose),
    or to none while no member left is live (elected when one returns, as after losing
    every live ISR member). None when it leads no longer, or is the ISR's only member.
    Live is online, as for any election (Kafka's isReplicaOnline): a broker shutting down
    (or whose log directory of the partition failed) is never made leader."""
    if current.leader != lacking:
        return None
    isr = tuple(r for r in current.isr if r != lacking)
    if not isr:
        return None
    live = _live(ctx, tp, isr)
    if not live:
        return current.new_leader_and_isr(NO_LEADER, isr)
    chosen, _ = offline_leader(ctx.replicas(tp), isr, live, False)
    # None: its live members are outside the assignment (an admin's partial rewrite)
    return current.new_leader_and_isr(live[0] if chosen is None else chosen, isr)


def imbalanced_partitions(
    ctx: ControllerContext, imbalance_percentage: int
) -> dict[int, list[TopicPartition]]:
    """Auto leader rebalance: for each preferred broker whose share of partitions led by
    another broker exceeds the threshold, the partitions to move back to it.

    Skips topics being deleted and partitions being reassigned, and partitions whose
    preferred replica is not live and in the ISR (the election would fail anyway).
    """
    by_preferred: dict[int, list[TopicPartition]] = defaultdict(list)
    for topic, parts in ctx.assignments.items():
        if topic in ctx.topics_to_be_deleted:
            continue
        for p, ra in parts.items():
            if ra.replicas:
                by_preferred[ra.replicas[0]].append(TopicPartition(topic, p))
    out: dict[int, list[TopicPartition]] = {}
    for broker, tps in by_preferred.items():
        not_led = [
            tp
            for tp in tps
            if (lice := ctx.leadership.get(tp)) is not None and lice.leader_and_isr.leader != broker
        ]
        if not tps or len(not_led) * 100 <= imbalance_percentage * len(tps):
            continue
        candidates = [
            tp
            for tp in not_led
            if tp not in ctx.partitions_being_reassigned
            and ctx.is_replica_online(broker, tp)
            and broker in ctx.leadership[tp].leader_and_isr.isr
        ]
        if candidates:
            out[broker] = candidates
    return out
