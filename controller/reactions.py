"""What the controller does on each kind of event, over both state machines
(KafkaController.scala's onBrokerStartup, onBrokerFailure, onNewPartitionCreation, the
state machines' start in onControllerFailover, doControlledShutdown, and a preferred
election's choice of partitions).

These are the decisions' sequences, not I/O: the shell (`controller.controller`) calls them
from its event handlers after reading ZooKeeper, and the stateful model of the tests and
the log generator of `pipeline/` call the same functions, so what they exercise is what
the controller does. What the shell alone does around them (channels to brokers, watches,
the znodes of admin requests) stays in the shell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from controller.context import (
    REPLICA_VALID_PREVIOUS,
    ControllerContext,
    PartitionReplica,
    PartitionStateName,
    ReplicaStateName,
)
from controller.election import (
    ElectionStrategy,
    without_leader_lacking_its_log,
    without_stale_replicas,
)
from controller.state_machines import (
    ControllerOps,
    PartitionStateMachine,
    ReplicaStateMachine,
    StateChangeFailed,
    partition_state_row,
)
from wire.errors import ErrorCode
from zkdata.znodes import (
    NO_LEADER,
    BrokerRegistration,
    LeaderAndIsr,
    PartitionState,
    TopicPartition,
)

log = logging.getLogger(__name__)

P = PartitionStateName
R = ReplicaStateName

# (registration, broker epoch) of each broker, as the controller reads /brokers/ids.
Registrations = dict[int, tuple[BrokerRegistration, int]]


def new_partitions(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    tps: Sequence[TopicPartition],
) -> None:
    """onNewPartitionCreation: partitions whose assignments the context holds now (a new
    topic, or partitions added to one) go New, then Online with a leader from their live
    replicas; their replicas go New, then Online."""
    if not tps:
        return
    ctx = partition_sm.ops.ctx
    replicas = [PartitionReplica(tp, r) for tp in tps for r in ctx.replicas(tp)]
    partition_sm.handle_state_changes(tps, P.NEW)
    replica_sm.handle_state_changes(replicas, R.NEW)
    partition_sm.handle_state_changes(tps, P.ONLINE, ElectionStrategy.OFFLINE)
    replica_sm.handle_state_changes(replicas, R.ONLINE)


@dataclass
class BrokersStarted:
    """What a broker's return lets move on, for the caller to resume: the reassignments
    with a target replica on it, and the topics held from deletion that have a replica
    on it."""

    reassignments: list[TopicPartition] = field(default_factory=list)
    deletions: list[str] = field(default_factory=list)


def brokers_started(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    started: Registrations,
) -> BrokersStarted:
    """onBrokerStartup: the brokers join the live set; the brokers known before learn of
    them and they learn the whole cluster, before any LeaderAndIsr; their replicas go
    Online (each is sent its partition's state) and every New or Offline partition is
    elected."""
    ops = partition_sm.ops
    ctx = ops.ctx
    new = set(started)
    ctx.add_live_brokers(started)
    ctx.shutting_down_broker_ids -= new
    existing = ctx.live_or_shutting_down_broker_ids - new
    # Two sends, as Kafka's onBrokerStartup makes two requests: the brokers up already
    # learn only of the new ones, the new ones the whole cluster. A batch's UpdateMetadata
    # carries one set of partitions for all its brokers: together, each broker up got
    # every partition again at each broker's start (10 requests at 100,000 partitions).
    ops.batch.add_update_metadata(existing, [])
    ops.barrier()
    ops.batch.add_update_metadata(new, None)
    ops.barrier()
    # A reassignment's new replica whose broker was down since the reassignment began is
    # still New: its broker was never told of the partition. Kafka's move to Online sends
    # it nothing, and the resumed reassignment's LeaderAndIsr (A1) sends the replicas
    # being added as new (isNew), so their broker may make the log in any online
    # directory. Here it is told so now (the resumed step's bump follows in the same
    # batch, and is_new sticks). One started before (Offline now) is not new: its log may
    # be in a directory that failed.
    never_started = [
        PartitionReplica(tp, r)
        for tp in sorted(ctx.partitions_being_reassigned)
        for r in ctx.full_assignment(tp).adding
        if r in new
        and r not in ctx.full_assignment(tp).removing
        and ctx.replica_state(PartitionReplica(tp, r)) is R.NEW
    ]
    # A replica whose deletion succeeded before its broker went stays deleted (Kafka tries
    # to move it Online, which its state machine refuses).
    replica_sm.handle_state_changes(
        [
            pr
            for pr in ctx.replicas_on_brokers(new)
            if ctx.replica_state(pr) is not R.DELETION_SUCCESSFUL
        ],
        R.ONLINE,
    )
    for pr in never_started:
        tp = pr.topic_partition
        lice = ctx.leadership.get(tp)
        if lice is not None and ctx.replica_state(pr) is R.ONLINE:
            ops.batch.add_leader_and_isr(
                ctx, [pr.replica], tp, lice, ctx.full_assignment(tp), is_new=True
            )
    partition_sm.trigger_online_partition_state_change()
    return BrokersStarted(
        reassignments=[
            tp
            for tp in sorted(ctx.partitions_being_reassigned)
            if set(ctx.full_assignment(tp).target_replicas) & new
        ],
        deletions=[
            t
            for t in sorted(ctx.topics_ineligible_for_deletion)
            if any(pr.replica in new for pr in ctx.replicas_for_topic(t))
        ],
    )


def stale_isr_members(
    ctx: ControllerContext, written_at: Mapping[TopicPartition, int]
) -> dict[TopicPartition, frozenset[int]]:
    """For a failover: the ISR members that are earlier incarnations of brokers that
    bounced while no controller watched. Such a broker registered (its broker epoch, the
    czxid) after the last write of a partition state whose ISR lists it (`written_at`: the
    loaded states' mzxids, where older than some broker's registration): nothing judged
    its new incarnation in sync since, and it may have come back with less than it had, or
    nothing (a new disk).

    A controller that saw the registration change would have taken the broker out of
    every ISR (a write after it), and a leader lets a replica in only for fetches, which a
    new incarnation makes after it registered: so no member of a state written since its
    registration is found here. Topics queued for deletion are left out, but those whose
    deletion is held before it started (`is_topic_in_service`): their states are not
    rewritten when a broker dies (its replicas become ineligible for deletion)."""
    stale: dict[TopicPartition, frozenset[int]] = {}
    newest: dict[tuple[int, ...], int] = {}  # an ISR -> its newest member's broker epoch
    leadership, broker_epochs = ctx.leadership, ctx.broker_epochs
    for tp, zxid in written_at.items():
        lice = leadership.get(tp)
        if lice is None or not ctx.is_topic_in_service(tp.topic):
            continue
        isr = lice.leader_and_isr.isr
        latest = newest.get(isr)
        if latest is None:
            latest = newest[isr] = max((broker_epochs.get(b, -1) for b in isr), default=-1)
        if latest > zxid:
            stale[tp] = frozenset(b for b in isr if broker_epochs.get(b, -1) > zxid)
    return stale


def drop_stale_isr_members(
    partition_sm: PartitionStateMachine, stale: Mapping[TopicPartition, frozenset[int]]
) -> dict[TopicPartition, LeaderAndIsr]:
    """Before a failover starts its state machines: the stale ISR members
    (`stale_isr_members`) leave the ISRs and leaderships where a live member is left
    (`without_stale_replicas`), as if the controller had seen their brokers
    bounce; each such partition's state is written once, logged with the reason
    "offline" (their earlier incarnations' replicas went offline). The state machines'
    start then sends every replica the states, the brokers that bounced as followers.
    A state a leader changed meanwhile (BadVersion) is read again and kept: its write
    came after the registration. Returns the states written."""
    ops = partition_sm.ops
    ctx = ops.ctx
    updates: dict[TopicPartition, LeaderAndIsr] = {}
    for tp, members in stale.items():
        lice = ctx.leadership.get(tp)
        if lice is None:
            continue
        new = without_stale_replicas(ctx, tp, lice.leader_and_isr, members)
        if new is not None:
            updates[tp] = new
    return _write_offline_states(ops, updates, "take stale replicas out of the ISR of")


def _write_offline_states(
    ops: ControllerOps, updates: Mapping[TopicPartition, LeaderAndIsr], failing: str
) -> dict[TopicPartition, LeaderAndIsr]:
    """Write these partition states (fenced, each conditional on its zkVersion), record
    them in the context and log them with the reason "offline". A state changed
    meanwhile (BadVersion) is read again and kept. Returns the states written."""
    if not updates:
        return {}
    ctx = ops.ctx

    def on_written(written: dict[TopicPartition, LeaderAndIsr]) -> None:
        # Recorded and logged a multi at a time, as ZooKeeper answers it: a fence that
        # fails between two multis still raises, and what was written is in the log.
        rows = []
        for tp, lai in written.items():
            ops.record_leadership(tp, lai)
            rows.append(partition_state_row(tp, lai, "offline", ctx.replicas(tp)))
        ops.log_states(rows)

    written = ops.store.update_partition_states(
        updates,
        ctx.epoch,
        ctx.epoch_zk_version,
        on_written,
        ops.keep_unanswered(
            lambda tp, lai: partition_state_row(tp, lai, "offline", ctx.replicas(tp))
        ),
    )
    for tp, err in written.failed.items():
        log.error("could not %s %s: %s", failing, tp, err)
    if written.retry:
        ctx.adopt_partition_states(ops.store.read_partition_states(list(written.retry)))
    return dict(written.finished)


def brokers_failed(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    dead: Iterable[int],
    fail_replica_deletion: Callable[[list[PartitionReplica]], None],
) -> None:
    """onBrokerFailure: the brokers leave the live set (and the shutting-down one), and
    their replicas become offline (`replicas_become_offline`). A broker that bounced (a
    new registration, so a new broker epoch) goes through this, then `brokers_started`:
    whatever its old incarnation held is gone (KIP-380)."""
    ops = partition_sm.ops
    ctx = ops.ctx
    gone = set(dead)
    ctx.remove_live_brokers(gone)
    ctx.shutting_down_broker_ids -= gone
    replicas_become_offline(
        partition_sm, replica_sm, ctx.replicas_on_brokers(gone), fail_replica_deletion
    )
    # Sent now, while the brokers are out of the live set, as Kafka's state machines send
    # their batches within onBrokerFailure: what is owed to the failed brokers (the
    # StopReplica of each of their replicas) is dropped. A bounced broker's new
    # incarnation, live again by the event's end, was sent a StopReplica of every
    # partition it hosts, meant for the old one.
    ops.barrier()


def isr_changes_noticed(
    partition_sm: PartitionStateMachine, states: Mapping[TopicPartition, PartitionState | None]
) -> dict[TopicPartition, LeaderAndIsr | Exception]:
    """An ISR change notification: the states read of the partitions it names become their
    leaderships, and an Offline partition whose ISR now holds an online replica is elected.
    Its leader was alive but not online (shutting down, with no one to take over) when a
    broker change took it offline, and let a follower in after that election read its ISR;
    Kafka elects such a partition only at the next broker change."""
    ctx = partition_sm.ops.ctx
    ctx.adopt_partition_states(states)
    electable = []
    for tp in states:
        lice = ctx.leadership.get(tp)
        if (
            lice is not None
            and ctx.partition_state(tp) is P.OFFLINE
            and ctx.is_topic_in_service(tp.topic)
            and ctx.online_replicas(tp, lice.leader_and_isr.isr)
        ):
            electable.append(tp)
    if not electable:
        return {}
    return partition_sm.handle_state_changes(electable, P.ONLINE, ElectionStrategy.OFFLINE)


def preferred_election(
    partition_sm: PartitionStateMachine, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, LeaderAndIsr | Exception]:
    """onReplicaElection with the preferred strategy, for an admin request or the auto
    rebalance: the partitions that have a state, are not being deleted and are not led by
    their preferred replica already move to it where it is live and in the ISR."""
    ctx = partition_sm.ops.ctx
    eligible = []
    for tp in tps:
        lice = ctx.leadership.get(tp)
        if lice is None or ctx.is_topic_queued_for_deletion(tp.topic):
            continue
        replicas = ctx.replicas(tp)
        if replicas and lice.leader_and_isr.leader == replicas[0]:
            continue  # already led by its preferred replica
        eligible.append(tp)
    return partition_sm.handle_state_changes(eligible, P.ONLINE, ElectionStrategy.PREFERRED)


class AdminElectionResult(NamedTuple):
    """One partition's outcome of an ElectLeaders request: its error (NONE for an
    election made), why, and the leader elected (-1: none)."""

    error_code: ErrorCode
    message: str | None = None
    leader: int = -1


# ElectLeaders' election types.
PREFERRED_ELECTION = 0
UNCLEAN_ELECTION = 1


def admin_election(
    partition_sm: PartitionStateMachine,
    tps: Iterable[TopicPartition] | None,
    election_type: int,
) -> dict[TopicPartition, AdminElectionResult]:
    """Kafka's processReplicaLeaderElection for an admin's ElectLeaders: ``tps`` (None:
    every partition) moved to their preferred replica, or, for an unclean election, led
    by any live replica where no live broker leads. A partition that is unknown, being
    deleted, or already as asked (led by its preferred replica; led at all) is left alone
    and said so; a failed election says why."""
    ctx = partition_sm.ops.ctx
    unclean = election_type == UNCLEAN_ELECTION
    answers: dict[TopicPartition, AdminElectionResult] = {}
    eligible: list[TopicPartition] = []
    failed = (
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        if unclean
        else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    )
    for tp in ctx.all_partitions() if tps is None else tps:
        lice = ctx.leadership.get(tp)
        replicas = ctx.replicas(tp)
        if not replicas:
            answers[tp] = AdminElectionResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp} does not exist"
            )
        elif ctx.is_topic_queued_for_deletion(tp.topic):
            answers[tp] = AdminElectionResult(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic {tp.topic} is being deleted"
            )
        elif lice is None:
            # Never elected (no replica was live when it was made): it goes online when
            # one of its brokers starts, as any new partition does.
            answers[tp] = AdminElectionResult(failed, f"partition {tp} has had no leader yet")
        else:
            leader = lice.leader_and_isr.leader
            if (leader == replicas[0]) if not unclean else ctx.is_replica_online(leader, tp):
                answers[tp] = AdminElectionResult(
                    ErrorCode.ELECTION_NOT_NEEDED,
                    "the preferred replica leads already"
                    if not unclean
                    else "a live broker leads already",
                    leader,
                )
            else:
                eligible.append(tp)
    if not eligible:
        return answers
    outcomes = partition_sm.handle_state_changes(
        eligible,
        P.ONLINE,
        ElectionStrategy.OFFLINE if unclean else ElectionStrategy.PREFERRED,
        allow_unclean=unclean,
    )
    for tp in eligible:
        outcome = outcomes.get(tp)
        if isinstance(outcome, LeaderAndIsr):
            answers[tp] = AdminElectionResult(ErrorCode.NONE, None, outcome.leader)
        elif isinstance(outcome, StateChangeFailed):
            answers[tp] = AdminElectionResult(failed, str(outcome))
        elif outcome is None:
            answers[tp] = AdminElectionResult(
                failed, f"partition {tp} is in state {ctx.partition_state(tp).value}"
            )
        else:
            answers[tp] = AdminElectionResult(ErrorCode.UNKNOWN_SERVER_ERROR, repr(outcome))
    return answers


def start_state_machines(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    mark: Callable[[str], None] = lambda _phase: None,
) -> None:
    """A failover's start of the state machines (KafkaController.onControllerFailover),
    once its full UpdateMetadata is on its way: replicas on live brokers go Online and are
    sent their partition's state, every New or Offline partition is elected, then the
    replicas on dead brokers go Offline, out of the ISRs still holding them.
    ``mark(phase)`` is called as each of the three ends.

    Kafka takes the dead replicas Offline before the elections. A replica leaving the ISR
    of a partition it led leaves it without a leader, so each partition the dead broker
    led is written twice, leader -1 with a new leader epoch and then its elected leader,
    and is offline in ZooKeeper in between. That is the common failover: a controller
    that crashed led its share of the partitions. Here the elections come first, as after
    a broker loss (`replicas_become_offline`): one write each. The elected ISRs hold only
    live replicas, so the replica step leaves those partitions alone, and a partition that
    no live replica may lead ends as Kafka leaves it, without a leader.
    """
    ops = partition_sm.ops
    dead = replica_sm.startup()
    mark("replica_state_machine_ms")
    elected: dict[TopicPartition, LeaderAndIsr] = {}
    ops.elections_written = elected
    try:
        partition_sm.startup()
    finally:
        ops.elections_written = None
    mark("partition_state_machine_ms")
    # The new leaders go out before the replica step, as after a broker loss. Inside an
    # event the start-up's re-sent states are still batched: those of the partitions the
    # replica step is about to change are held back, or their brokers would get each of
    # them twice, the second moments after the first (20,000 of them when a crashed
    # controller followed 20,000 partitions). One the step leaves alone goes at the end.
    held = ops.batch.hold_leader_and_isr({pr.topic_partition for pr in dead} - elected.keys())
    ops.barrier()
    ops.batch.restore_leader_and_isr(held)
    # The failover's full UpdateMetadata, sent before the state machines started, lists
    # these replicas offline: only the ISRs this step changes are news to the brokers.
    replica_sm.handle_state_changes(dead, R.OFFLINE, just_written=elected, offline_in_metadata=True)
    mark("offline_replicas_ms")


def replicas_become_offline(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    replicas: Sequence[PartitionReplica],
    fail_replica_deletion: Callable[[list[PartitionReplica]], None],
) -> None:
    """onReplicasBecomeOffline (KafkaController.scala): what a broker loss sets in motion.

    The partitions these replicas led go Offline and are elected anew; then the replicas
    go Offline, which takes them out of the ISRs still holding them. Replicas of topics
    queued for deletion are handed to `fail_replica_deletion` instead, but those of a
    topic whose deletion is held before it started, which is led as any topic
    (`is_topic_in_service`, item 36): Kafka asks to make them ineligible (refused from
    Online, so their states stay as they were, leader and ISR); made Offline (item 19),
    they left their partitions leaderless for good, and the reassignment holding the
    deletion could never complete.
    """
    ops = partition_sm.ops
    ctx = ops.ctx
    for_deletion = [pr for pr in replicas if not ctx.is_topic_in_service(pr.topic_partition.topic)]
    not_for_deletion = [pr for pr in replicas if ctx.is_topic_in_service(pr.topic_partition.topic)]
    online = ctx.live_broker_ids  # is_replica_online, for every partition of the cluster
    on_failed_dirs = ctx.replicas_on_offline_dirs
    offline_leader = [
        tp
        for tp, lice in ctx.leadership.items()
        if (
            lice.leader_and_isr.leader not in online
            or (on_failed_dirs and ctx.is_on_offline_dir(lice.leader_and_isr.leader, tp))
        )
        and ctx.is_topic_in_service(tp.topic)
    ]
    elected: dict[TopicPartition, LeaderAndIsr] = {}
    ops.elections_written = elected
    try:
        partition_sm.handle_state_changes(offline_leader, P.OFFLINE)
        online_results = partition_sm.trigger_online_partition_state_change()
    finally:
        ops.elections_written = None
    # The new leaders go out now, as Kafka sends each state machine's batch, even within
    # an event that otherwise sends once at its end: the replicas' step below re-reads
    # the states it touches (all but those just elected without the lost replica) while
    # the brokers apply their new leaderships. It adds requests only for partitions whose
    # ISR still held a lost replica, which the elections just made have not touched, so
    # nothing is sent twice.
    ops.barrier()
    replica_sm.handle_state_changes(not_for_deletion, R.OFFLINE, just_written=elected)
    if for_deletion:
        fail_replica_deletion(for_deletion)
    # Every broker must hear that these replicas are offline (their brokers gone from its
    # live brokers). The Offline step tells it of each partition of theirs, and an
    # election made tells it; where neither happened, an UpdateMetadata without partitions
    # does. Kafka 2.8 sends one only where no partition had an offline leader, so a broker
    # hosting nothing was never reported gone while some other partition stayed offline
    # (KAFKA-13225); this is Kafka 3.1's condition (item 37 of docs/architecture.md).
    if not not_for_deletion and all(isinstance(r, Exception) for r in online_results.values()):
        ops.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, [])
        ops.flush()


def log_dir_failure(replica_sm: ReplicaStateMachine, broker_ids: Iterable[int]) -> None:
    """onBrokerLogDirFailure: a broker said a log directory of it failed. Each of its
    replicas is sent its partition's state again (their replica state machine's move to
    Online): the broker answers KAFKA_STORAGE_ERROR for those whose log was there, which
    `replicas_reported_offline` then takes offline. Brokers no longer live are left out
    (their loss has taken their replicas offline already)."""
    ctx = replica_sm.ctx
    live = set(broker_ids) & ctx.live_brokers.keys()
    to_online: list[PartitionReplica] = []
    for pr in ctx.replicas_on_brokers(live):
        state = ctx.replica_state(pr)
        if state is R.NEW:
            # A reassignment's new replica: asked too (Kafka's move of it to Online sends
            # nothing, so its broker's answer would never come), and left New.
            lice = ctx.leadership.get(pr.topic_partition)
            if lice is not None:
                ops = replica_sm.ops
                ra = ctx.full_assignment(pr.topic_partition)
                ops.batch.add_leader_and_isr(
                    ctx, [pr.replica], pr.topic_partition, lice, ra, is_new=True
                )
        elif state in REPLICA_VALID_PREVIOUS[R.ONLINE]:
            to_online.append(pr)
    replica_sm.handle_state_changes(to_online, R.ONLINE)


def replicas_reported_offline(
    partition_sm: PartitionStateMachine,
    replica_sm: ReplicaStateMachine,
    broker_id: int,
    offline: Iterable[TopicPartition],
    online: Iterable[TopicPartition],
    fail_replica_deletion: Callable[[list[PartitionReplica]], None],
) -> set[TopicPartition]:
    """A broker's LeaderAndIsr answer (processLeaderAndIsrResponseReceived): the
    partitions it answered KAFKA_STORAGE_ERROR are on a failed log directory of it, those
    it answered without an error are not (any more). The replicas newly found on a failed
    directory become offline as a lost broker's do (`replicas_become_offline`): leaders
    move, the ISRs leave them. Returns those partitions."""
    ctx = partition_sm.ops.ctx
    if broker_id not in ctx.live_brokers:
        return set()  # gone since it answered: its loss took its replicas offline
    previous = ctx.replicas_on_offline_dirs.get(broker_id, set())
    current = (previous - set(online)) | set(offline)
    if current:
        ctx.replicas_on_offline_dirs[broker_id] = current
    else:
        ctx.replicas_on_offline_dirs.pop(broker_id, None)
    new = current - previous
    # Only replicas it still has: an answer can arrive after a reassignment moved one away.
    offline_now = sorted(tp for tp in new if broker_id in ctx.replicas(tp))
    if offline_now:
        replicas_become_offline(
            partition_sm,
            replica_sm,
            [PartitionReplica(tp, broker_id) for tp in offline_now],
            fail_replica_deletion,
        )
    return new


def leaders_lacking_their_logs(
    partition_sm: PartitionStateMachine, broker_id: int, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, LeaderAndIsr]:
    """A broker refused to lead these partitions (its LeaderAndIsr answer
    REPLICA_NOT_AVAILABLE): it has no log of them while their ISRs list others, as a
    broker back on new disks that a failover kept in the ISR (every member had registered
    again unseen). Each leaves its ISR and the leadership goes to another member
    (`without_leader_lacking_its_log`), one fenced write each, logged with the reason
    "offline"; the new state goes to every live replica, the broker as a follower that
    fetches the log again. A partition left without a live member waits Offline. A state
    changed meanwhile (BadVersion) is read again and kept. Returns the states written."""
    ops = partition_sm.ops
    ctx = ops.ctx
    if broker_id not in ctx.live_brokers:
        return {}  # gone since it answered: its loss moved its leaderships
    updates: dict[TopicPartition, LeaderAndIsr] = {}
    for tp in tps:
        lice = ctx.leadership.get(tp)
        if lice is None or not ctx.is_topic_in_service(tp.topic):
            continue
        new = without_leader_lacking_its_log(ctx, tp, lice.leader_and_isr, broker_id)
        if new is not None:
            updates[tp] = new
    written = _write_offline_states(ops, updates, f"move off broker {broker_id} the lead of")
    to_send = []
    for tp, lai in written.items():
        ra = ctx.full_assignment(tp)
        if lai.leader == NO_LEADER:
            ctx.set_partition_state(tp, PartitionStateName.OFFLINE)
        live = [r for r in ra.replicas if r in ctx.live_brokers]
        to_send.append((live, tp, ctx.leadership[tp], ra))
    ops.batch.add_leader_and_isr_updates(ctx, to_send)
    offline = sorted(tp for tp, lai in written.items() if lai.leader == NO_LEADER)
    if offline:
        # As for any Offline partition: elected now if one can be (uncleanly, where the
        # topic allows it), else when an ISR member returns.
        partition_sm.handle_state_changes(
            offline, PartitionStateName.ONLINE, ElectionStrategy.OFFLINE
        )
    return written


def controlled_shutdown_moves(
    partition_sm: PartitionStateMachine, replica_sm: ReplicaStateMachine, broker_id: int
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """doControlledShutdown (KafkaController.scala): move a stopping broker's leaderships
    away and take it out of the ISRs of the partitions it follows.

    Returns the partitions it led, and those it still leads (no other ISR member could
    take over). Topics queued for deletion (but those whose deletion is held before it
    started, `is_topic_in_service`) and single-replica partitions are left alone.
    """
    ops = partition_sm.ops
    ctx = ops.ctx
    ctx.shutting_down_broker_ids.add(broker_id)
    candidates = [
        tp
        for tp in ctx.partitions_on_broker(broker_id)
        if len(ctx.replicas(tp)) > 1 and tp in ctx.leadership and ctx.is_topic_in_service(tp.topic)
    ]
    led = [tp for tp in candidates if ctx.leadership[tp].leader_and_isr.leader == broker_id]
    followed = [tp for tp in candidates if ctx.leadership[tp].leader_and_isr.leader != broker_id]
    partition_sm.handle_state_changes(led, P.ONLINE, ElectionStrategy.CONTROLLED_SHUTDOWN)
    for tp in followed:
        ops.batch.add_stop_replica([broker_id], tp, delete_partition=False)
    # The new leaders (and the StopReplicas) go out before the ISR step, as in Kafka and
    # as after a broker loss (see replicas_become_offline).
    ops.barrier()
    replica_sm.handle_state_changes(
        [PartitionReplica(tp, broker_id) for tp in followed],
        R.OFFLINE,
        reason="controlled_shutdown",
    )
    remaining = [
        tp
        for tp in ctx.partitions_led_by(broker_id)
        if len(ctx.replicas(tp)) > 1 and ctx.is_topic_in_service(tp.topic)
    ]
    return led, remaining
