"""A partition reassignment's steps (KIP-455; Kafka's KafkaController.onPartitionReassignment),
over the context, the state machines and the store port.

The shell asks for the first step when a reassignment is requested or resumed (a failover,
a target replica's broker back), and again each time the partition's ISR changes; each call
reads the partition's state from the store and does what that state allows:

- Not all target replicas in the ISR: the topic's assignment is written with the full
  replica set (origin and target) and the replicas being added and removed; every replica
  of that set learns it with the next leader epoch (U2); the new replicas start (U3) and
  will be added to the ISR by the leader once they have caught up.
- All target replicas in the ISR: the target becomes the assignment (B1-B9); a leader
  outside it, or not alive, is replaced (the reassignment election), else the leader epoch
  is bumped again; the removed replicas are stopped and deleted, these requests sent
  before the final assignment is written (the only record of the replicas being removed
  until then); every broker learns the final assignment.

A block of reassignments (an admin's request, a failover, caught-up replicas) takes each
step for all its partitions at once (`reassign_partitions`): a few pipelined ZooKeeper
rounds whatever their number, not a round trip or more per partition as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

from broker.state_change_log import PartitionStateRow
from controller.context import (
    ControllerContext,
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
)
from controller.election import ElectionStrategy
from controller.state_machines import (
    ControllerOps,
    PartitionStateMachine,
    ReplicaStateMachine,
    partition_state_row,
)
from wire.errors import ErrorCode
from zkdata.znodes import LeaderAndIsr, PartitionState, TopicAssignment, TopicPartition

log = logging.getLogger(__name__)

P = PartitionStateName
R = ReplicaStateName

# Re-read-and-retry rounds of a leader epoch bump whose conditional write keeps losing to
# the leader's own ISR changes.
MAX_BUMP_ROUNDS = 20


def reassignment_to(
    current: ReplicaAssignment, target: tuple[int, ...], isr: tuple[int, ...]
) -> ReplicaAssignment:
    """The assignment of a reassignment to `target` (KIP-455): the target, then the origin
    replicas, the origin being removed. `current` may be a reassignment in progress that
    the new target overrides; the replicas it was adding that the new target drops are
    stopped at once (Kafka's updateCurrentReassignment), except those in the ISR: they stay,
    removed like origin replicas once the target has caught up. Kafka stops them too, and a
    partition such a replica alone leads goes offline, its ISR outside its replicas. A kept
    replica is no origin replica (listed adding and removing, in the topic's znode too), so
    a cancel, whose target is the origin, goes back to the true origin, as Kafka's."""
    kept = tuple(r for r in current.adding if r in isr and r not in target)
    return ReplicaAssignment.for_reassignment(current.origin_replicas, target, kept)


class ReassignmentRefused(NamedTuple):
    """Why an admin's AlterPartitionReassignments request for a partition is not carried
    out (Kafka's error code and message)."""

    error_code: ErrorCode
    message: str


def api_reassignment_targets(
    ctx: ControllerContext, requested: Mapping[TopicPartition, tuple[int, ...] | None]
) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, ReassignmentRefused]]:
    """An admin's AlterPartitionReassignments checked as Kafka 2.8's controller checks it
    (processApiPartitionReassignment, in its order): each partition's target replicas,
    or None to cancel the reassignment in progress (its target is then the origin
    replicas). The targets to carry out, and the partitions refused with why."""
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    refused: dict[TopicPartition, ReassignmentRefused] = {}
    live = ctx.live_broker_ids
    for tp, replicas in requested.items():
        current = ctx.full_assignment(tp)
        target = current.origin_replicas if replicas is None else replicas
        why = _refusal(current, replicas, live)
        if why is None and ctx.is_topic_queued_for_deletion(tp.topic):
            why = ReassignmentRefused(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp.topic} is being deleted"
            )
        elif why is None and not current.replicas:
            why = ReassignmentRefused(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp} does not exist"
            )
        if why is None:
            targets[tp] = target
        else:
            refused[tp] = why
    return targets, refused


def _refusal(
    current: ReplicaAssignment, replicas: tuple[int, ...] | None, live: set[int]
) -> ReassignmentRefused | None:
    """Kafka's validateReplicas and maybeBuildReassignment: what is wrong with a target
    (or a cancellation) whatever the partition's topic."""
    bad = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    if replicas is None:
        if current.is_being_reassigned:
            return None
        return ReassignmentRefused(
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment is in progress to cancel"
        )
    if not replicas:
        return ReassignmentRefused(bad, "empty replica list specified in partition reassignment")
    if len(set(replicas)) != len(replicas):
        return ReassignmentRefused(
            bad, f"duplicate replica ids in partition reassignment replica list: {list(replicas)}"
        )
    if any(r < 0 for r in replicas):
        return ReassignmentRefused(bad, f"invalid broker id in replica list: {list(replicas)}")
    adding = [r for r in replicas if r not in current.origin_replicas]
    if not set(adding) <= live:
        return ReassignmentRefused(
            bad,
            f"replica assignment has brokers that are not alive: adding {adding},"
            f" live brokers {sorted(live)}",
        )
    return None


def reassign_partition(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    tp: TopicPartition,
    target: tuple[int, ...] | None = None,
) -> bool:
    """`reassign_partitions` for one partition: True once its reassignment is complete."""
    return tp in reassign_partitions(partition_sm, replica_sm, {tp: target})


def reassign_partitions(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    targets: Mapping[TopicPartition, tuple[int, ...] | None],
    states: Mapping[TopicPartition, PartitionState | None] | None = None,
) -> set[TopicPartition]:
    """The reassignments' next steps: for each partition, towards a new target (requested,
    or one that overrides a reassignment in progress), or, for None, the reassignment in
    progress resumed. The partitions whose reassignment is complete (the target is the
    assignment and the removed replicas are gone). ``states``: the partitions' states as
    the caller read them in this event, not read again.

    Each step is taken for every partition at once, so a request for 1,000 partitions
    reads and writes their states in a few pipelined rounds, not 1,000 round trips each;
    each partition's steps are those of Kafka's onPartitionReassignment, in its order."""
    ops = partition_sm.ops
    ctx = ops.ctx
    tps = list(targets)
    if not tps:
        return set()
    # While a reassignment is in progress its topic's deletion waits (Kafka's
    # onPartitionReassignment marks it ineligible): the callers start none of a topic
    # queued for deletion and resume those of topics held already; this holds any other.
    unheld = sorted(
        {tp.topic for tp in tps if ctx.is_topic_queued_for_deletion(tp.topic)}
        - ctx.topics_ineligible_for_deletion
    )
    if unheld:
        ctx.topics_ineligible_for_deletion.update(unheld)
        log.info("deletion of topics %s halted: partitions are being reassigned", unheld)
    if states is None or not all(tp in states for tp in tps):
        known = ops.store.read_partition_states(tps)
    else:
        known = {tp: states[tp] for tp in tps}
    reassignments: dict[TopicPartition, ReplicaAssignment] = {}
    changed: dict[TopicPartition, ReplicaAssignment] = {}
    unneeded: list[PartitionReplica] = []
    for tp in tps:
        before = ctx.full_assignment(tp)
        target = targets[tp]
        if target is None:
            reassignments[tp] = before
        else:
            current = known.get(tp)
            isr = current.leader_and_isr.isr if current is not None else ()
            reassignments[tp] = reassignment_to(before, target, isr)
        ctx.partitions_being_reassigned.add(tp)
        if reassignments[tp] != before:
            changed[tp] = reassignments[tp]
        unneeded.extend(
            PartitionReplica(tp, r) for r in before.replicas if r not in reassignments[tp].replicas
        )
    # Kafka's U1 (updateCurrentReassignment): only an assignment that changes is written.
    # A reassignment resumed as ZooKeeper shows it writes nothing here, so its completion
    # writes its topic once.
    write_assignments(partition_sm, changed)
    if unneeded:
        stop_removed_replicas(replica_sm, unneeded)
        known.update(
            ops.store.read_partition_states(
                list(dict.fromkeys(pr.topic_partition for pr in unneeded))
            )
        )
    # A new replica an override kept (it is in the ISR, being removed) is started no more.
    replica_sm.handle_state_changes(
        [
            pr
            for tp, ra in reassignments.items()
            for pr in (PartitionReplica(tp, r) for r in ra.replicas)
            if (pr.replica not in ra.adding or pr.replica in ra.removing)
            and ctx.replica_state(pr) is R.NEW
        ],
        R.ONLINE,
    )
    complete: dict[TopicPartition, ReplicaAssignment] = {}
    in_progress: dict[TopicPartition, ReplicaAssignment] = {}
    for tp, ra in reassignments.items():
        if can_complete(ctx, tp, ra, known.get(tp)):
            complete[tp] = ra
        else:
            in_progress[tp] = ra
    if in_progress:
        # A partition that never had a leader (its replicas were all down since it was
        # created) and now has a live replica to add gets its first leader and ISR below,
        # as a broker's return would give it; the others learn their replica set by a bump.
        first_elections = [
            tp
            for tp in in_progress
            if ctx.partition_state(tp) is P.NEW and ctx.online_replicas(tp, ctx.replicas(tp))
        ]
        bump_leader_epochs(
            partition_sm,
            {tp: ra for tp, ra in in_progress.items() if tp not in first_elections},
            known,
        )
        _drop_isr_strays(replica_sm, in_progress)
        # A reassignment resumed (by a failover, or its broker back) finds its new
        # replicas Online or Offline already: they are started, not new (Kafka tries them
        # anyway and logs an invalid transition).
        replica_sm.handle_state_changes(
            [
                pr
                for tp, ra in in_progress.items()
                for pr in (PartitionReplica(tp, r) for r in ra.adding if r not in ra.removing)
                if ctx.replica_state(pr) is R.NON_EXISTENT
            ],
            R.NEW,
        )
        # As onNewPartitionCreation: New replicas, the partition Online, those in its
        # ISR Online. The topic's znode shows the replicas being added first (Kafka's
        # U1 comes before any state write): a ZooKeeper error after the election's
        # write would otherwise leave a leader and ISR outside the replicas ZooKeeper
        # shows, and the next term, seeing a leader, would never elect again.
        if first_elections:
            write_pending_topics(ops)
        elected = partition_sm.handle_state_changes(first_elections, P.ONLINE)
        replica_sm.handle_state_changes(
            [
                PartitionReplica(tp, r)
                for tp, lai in elected.items()
                if not isinstance(lai, Exception)
                for r in lai.isr
                if ctx.replica_state(PartitionReplica(tp, r)) is R.NEW
            ],
            R.ONLINE,
        )
    if not complete:
        return set()
    return _complete(partition_sm, replica_sm, complete, known)


def can_complete(
    ctx: ControllerContext,
    tp: TopicPartition,
    ra: ReplicaAssignment,
    state: PartitionState | None,
) -> bool:
    """Whether the reassignment's next step completes it. Nothing to add or remove (a new
    order of the same replicas) does; else every target replica must be in the ISR
    (Kafka's isReassignmentComplete) and, unlike Kafka, the partition must be able to be
    led from the target then: its leader stays, a target replica can be elected, or it has
    no online leader to lose. Kafka completes a reassignment whose target replicas are in
    the ISR but shutting down, stopping the leader it could not replace: the partition is
    left without one, yet Online to the state machine, so no election follows."""
    if not ra.is_being_reassigned:
        return True
    if state is None:
        return False
    lai = state.leader_and_isr
    if not all(r in lai.isr for r in ra.target_replicas):
        return False
    if lai.leader in ra.target_replicas or not ctx.is_replica_online(
        lai.leader, tp, include_shutting_down=True
    ):
        return True
    return any(ctx.is_replica_online(r, tp) for r in ra.target_replicas)


def _complete(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    reassignments: Mapping[TopicPartition, ReplicaAssignment],
    states: Mapping[TopicPartition, PartitionState | None],
) -> set[TopicPartition]:
    """Caught-up reassignments made the assignment (Kafka's B1-B8); the partitions whose
    reassignment completed (see `_still_led_by_origin` for the others)."""
    ops = partition_sm.ops
    ctx = ops.ctx
    # The assignment being completed is durable before anything is sent for it (Kafka's
    # U1 before B1-B5): see the barrier below.
    write_pending_topics(ops)
    # The new replicas are started (B1); one whose broker is down stays New or Offline
    # until its broker returns (Kafka makes it Online there too, its broker down). One an
    # override kept, being removed, is stopped below, not started.
    replica_sm.handle_state_changes(
        [
            PartitionReplica(tp, r)
            for tp, ra in reassignments.items()
            for r in ra.adding
            if r not in ra.removing and ctx.is_replica_online(r, tp, include_shutting_down=True)
        ],
        R.ONLINE,
    )
    finals = {tp: ReplicaAssignment(ra.target_replicas) for tp, ra in reassignments.items()}
    to_elect: list[TopicPartition] = []
    to_bump: dict[TopicPartition, ReplicaAssignment] = {}
    for tp, final in finals.items():
        ctx.update_assignment(tp, final)
        current = states.get(tp)
        leader = current.leader_and_isr.leader if current is not None else -1
        if leader not in final.replicas or not ctx.is_replica_online(leader, tp):
            to_elect.append(tp)
        else:
            to_bump[tp] = final
    elected = partition_sm.handle_state_changes(to_elect, P.ONLINE, ElectionStrategy.REASSIGN)
    kept = {tp: reassignments[tp] for tp in _still_led_by_origin(ctx, reassignments, elected)}
    if kept:
        for tp, ra in kept.items():
            ctx.update_assignment(tp, ra)
            del finals[tp]
        # Its replicas learn the replica set it keeps (the stop of those an override
        # dropped wrote nothing the leader would see), over the state the election read.
        bump_leader_epochs(partition_sm, kept, ops.store.read_partition_states(list(kept)))
        _drop_isr_strays(replica_sm, kept)
        reassignments = {tp: reassignments[tp] for tp in finals}
    # One that could not be elected otherwise either (its leader shutting down, or none
    # online) has its leader epoch bumped all the same, as one that keeps its leader: its
    # replicas learn the new replica set, and a leader still counting a removed replica
    # among its replicas has its next ISR change fenced by the new zkVersion (Kafka leaves
    # it unbumped; the stateful model found such a leader putting a removed replica back).
    to_bump.update(
        (tp, finals[tp])
        for tp, outcome in elected.items()
        if isinstance(outcome, Exception) and tp in finals
    )
    bump_leader_epochs(partition_sm, to_bump, states)
    stop_removed_replicas(
        replica_sm,
        [PartitionReplica(tp, r) for tp, ra in reassignments.items() for r in ra.removing],
    )
    _drop_isr_strays(replica_sm, finals)
    # B3-B5's requests (the leader epoch bumps or elections, the removed replicas'
    # StopReplicas) go out before the final assignment is written (B6), as Kafka's: it
    # is the only record of the replicas being removed. A ZooKeeper error ends the term
    # and drops what the event batched (item 35): before the write, the next term finds
    # them being removed and stops them again; after it, they were told already, where
    # sent at the event's end they were stopped by no one, their logs kept for good.
    # One send for the whole block: each broker gets one request of each kind.
    ops.barrier()
    write_assignments(partition_sm, finals)
    ctx.partitions_being_reassigned.difference_update(finals)
    ops.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, list(finals))
    ops.flush()
    return set(finals)


def _still_led_by_origin(
    ctx: ControllerContext,
    reassignments: Mapping[TopicPartition, ReplicaAssignment],
    elected: Mapping[TopicPartition, LeaderAndIsr | Exception],
) -> list[TopicPartition]:
    """Reassignments that cannot complete after all: `can_complete` said they could, but
    the leader shrank the ISR before the election's write, so no target replica could be
    elected, and the partition's leader, one of the replicas being removed, is online or
    shutting down. They stay in progress under that leader until the target is back in
    the ISR (see `can_complete` for what Kafka does). Found by the stateful model."""
    kept = []
    for tp, outcome in elected.items():
        lice = ctx.leadership.get(tp)
        if not isinstance(outcome, Exception) or lice is None:
            continue
        ra = reassignments[tp]
        leader = lice.leader_and_isr.leader
        if (
            leader in ra.replicas
            and leader not in ra.target_replicas
            and ctx.is_replica_online(leader, tp, include_shutting_down=True)
        ):
            log.warning(
                "no replica of the target %s of %s is in its ISR any more: the reassignment "
                "stays in progress, led by %d",
                list(ra.target_replicas),
                tp,
                leader,
            )
            kept.append(tp)
    return kept


def _drop_isr_strays(
    replica_sm: ReplicaStateMachine, assignments: Mapping[TopicPartition, ReplicaAssignment]
) -> None:
    """Out of the ISR, any replica that is no longer the partition's (``assignments``:
    each partition's replicas after this step). A replica an overriding reassignment
    dropped was stopped (and taken out of the ISR, or found outside it) before this step's
    leader epoch bump or election, while the leader, still counting it among its
    replicas, may have added it back: that bump or election then wrote the ISR it read
    again, the replica in it (Kafka stops removed replicas after its bump at completion,
    so it removes one then; not after the bump of a step that leaves the reassignment in
    progress). Found by a fault schedule (a replica whose log was deleted stayed in the
    ISR, and moving the partition back counted it caught up) and, for a step in progress,
    by the stateful model."""
    ctx, ops = replica_sm.ctx, replica_sm.ops
    strays: dict[int, list[TopicPartition]] = {}
    for tp, final in assignments.items():
        lice = ctx.leadership.get(tp)
        if lice is None:
            continue
        lai = lice.leader_and_isr
        for r in lai.isr:
            if r not in final.replicas and r != lai.leader:
                strays.setdefault(r, []).append(tp)
    for replica_id, tps in sorted(strays.items()):
        log.warning(
            "replica %d is in the ISR of %s, not among its replicas: removed", replica_id, tps
        )
        updated, _untouched = replica_sm.remove_replica_from_isr(replica_id, tps, "reassign")
        ops.batch.add_leader_and_isr_updates(
            ctx,
            [
                (assignments[tp].replicas, tp, lice, assignments[tp])
                for tp, lice in updated.items()
                if ctx.is_topic_in_service(tp.topic)
            ],
        )
    ops.flush()


def stop_removed_replicas(replica_sm: ReplicaStateMachine, removed: list[PartitionReplica]) -> None:
    """Out of the ISR, stopped and deleted (Kafka's stopRemovedReplicasOfReassignedPartition)."""
    replica_sm.handle_state_changes(removed, R.OFFLINE, reason="reassign")
    replica_sm.handle_state_changes(removed, R.DELETION_STARTED)
    replica_sm.handle_state_changes(removed, R.DELETION_SUCCESSFUL)
    replica_sm.handle_state_changes(removed, R.NON_EXISTENT)


def write_assignments(
    partition_sm: PartitionStateMachine, assignments: Mapping[TopicPartition, ReplicaAssignment]
) -> None:
    """Partitions' assignments into the context and their topics' znodes (one fenced
    write); inside `coalesced_topic_writes`, the znodes are written once at its end."""
    ops = partition_sm.ops
    for tp, ra in assignments.items():
        ops.ctx.update_assignment(tp, ra)
    topics = dict.fromkeys(tp.topic for tp in assignments)
    if ops.topics_to_write is not None:
        ops.topics_to_write.update(topics)
    else:
        write_topics(ops, list(topics))


def topic_assignment(ctx: ControllerContext, topic: str) -> TopicAssignment:
    """What the topic's znode holds by the context: its partitions' replicas, its id and
    its reassignments in progress."""
    parts = ctx.assignments[topic]
    return TopicAssignment(
        topic,
        {p: a.replicas for p, a in parts.items()},
        ctx.topic_ids.get(topic),
        {p: a.adding for p, a in parts.items() if a.adding},
        {p: a.removing for p, a in parts.items() if a.removing},
    )


def write_pending_topics(ops: ControllerOps) -> None:
    """Inside `coalesced_topic_writes`, the topics' znodes it holds written now (one
    fenced multi), where a step needs them durable before what it does next."""
    if ops.topics_to_write:
        topics = sorted(ops.topics_to_write)
        ops.topics_to_write.clear()
        write_topics(ops, [t for t in topics if t in ops.ctx.assignments])


def write_topics(ops: ControllerOps, topics: Iterable[str]) -> None:
    """The topics' znodes rewritten from the context's assignments (one fenced multi)."""
    assignments = [topic_assignment(ops.ctx, topic) for topic in topics]
    if assignments:
        ops.store.write_topic_assignments(assignments, ops.ctx.epoch_zk_version)


@contextmanager
def coalesced_topic_writes(ops: ControllerOps) -> Iterator[None]:
    """Within the block, each reassigned partition's topic znode is written once, at the
    end, not once per partition: a topic's znode holds every partition's replicas, so a
    request for all N partitions of a topic would write N znodes of N partitions each.
    Two steps write sooner (`write_pending_topics`), as Kafka's order demands: the
    replicas a reassignment adds and removes (U1) before a first leader is elected among
    them, and before a completion sends anything. So no broker learns a replica set
    being added that its topic's znode does not show (the requests of the steps left in
    progress go at the event's end); only a completion's (B3-B5) go before its final
    assignment is written (B6), as in Kafka. A block ended by an error (fenced, or
    ZooKeeper failed) writes nothing more."""
    if ops.topics_to_write is not None:  # already coalescing
        yield
        return
    ops.topics_to_write = set()
    try:
        yield
        topics = sorted(ops.topics_to_write)
    finally:
        ops.topics_to_write = None
    write_topics(ops, [t for t in topics if t in ops.ctx.assignments])


def bump_leader_epochs(
    partition_sm: PartitionStateMachine,
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    states: Mapping[TopicPartition, PartitionState | None],
) -> None:
    """Same leader and ISR, next leader epoch: each partition's replicas learn its changed
    replica set. The first round writes over `states` (read in this event), each write
    conditional on the zkVersion read; one a leader's ISR change beat is read again."""
    ops = partition_sm.ops
    ctx = ops.ctx
    remaining = dict(assignments)
    current = states
    for _ in range(MAX_BUMP_ROUNDS):
        if not remaining:
            break
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in remaining:
            state = current.get(tp)
            if state is None or state.controller_epoch > ctx.epoch:
                log.error("cannot bump the leader epoch of %s: its state is missing or newer", tp)
                continue
            lai = state.leader_and_isr
            updates[tp] = lai.new_leader_and_isr(lai.leader, lai.isr)
        written = ops.store.update_partition_states(
            updates,
            ctx.epoch,
            ctx.epoch_zk_version,
            partial(_bumped, ops, remaining),
            ops.keep_unanswered(partial(_bump_row, remaining)),
        )
        for tp, err in written.failed.items():
            log.error("bumping the leader epoch of %s failed: %s", tp, err)
        remaining = {tp: remaining[tp] for tp in written.retry}
        if remaining:
            current = ops.store.read_partition_states(list(remaining))
    for tp in remaining:
        log.error("gave up bumping the leader epoch of %s: its state kept changing", tp)
    ops.flush()


def _bump_row(
    assignments: Mapping[TopicPartition, ReplicaAssignment], tp: TopicPartition, new: LeaderAndIsr
) -> PartitionStateRow:
    """A bump's partition_state row (for one whose answer was lost; _bumped's own)."""
    return partition_state_row(tp, new, "reassign", assignments[tp].replicas)


def _bumped(
    ops: ControllerOps,
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    written: dict[TopicPartition, LeaderAndIsr],
) -> None:
    """Leader epochs bumped: recorded, logged and batched a multi at a time, as ZooKeeper
    answers it (a fence that fails between two multis still raises, and what was written
    is in the state-change log)."""
    ctx = ops.ctx
    to_send = []
    rows = []
    for tp, new in written.items():
        ra = assignments[tp]
        to_send.append((ra.replicas, tp, ops.record_leadership(tp, new), ra))
        rows.append(partition_state_row(tp, new, "reassign", ra.replicas))
    ops.batch.add_leader_and_isr_updates(ctx, to_send)
    ops.log_states(rows)
