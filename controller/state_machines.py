"""The partition and replica state machines (PartitionStateMachine/ReplicaStateMachine.scala).

They turn a requested transition into decisions (from `controller.election`, pure), write
those decisions through the store (fenced, batched), record the outcome in the context,
and queue the requests each broker is owed in the request batch. Both run only on the
controller's event thread. A `ControllerMovedError` from the store propagates: the event
loop then resigns, and nothing of this controller's term is written after that.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from broker.config import topic_override_bool
from broker.state_change_log import PartitionStateRow, StateChangeLog
from controller import election
from controller.context import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    ControllerContext,
    LeaderIsrAndControllerEpoch,
    PartitionReplica,
    PartitionStateName,
    ReplicaAssignment,
    ReplicaStateName,
    replica_states_value,
)
from controller.election import ElectionStrategy
from controller.request_batch import BrokerRequest, RequestBatch
from controller.store import ControllerStore, WrittenCallback
from zkdata.client import ControllerMovedError, NodeExistsError
from zkdata.znodes import LeaderAndIsr, MalformedZnode, PartitionState, TopicPartition

log = logging.getLogger(__name__)

P = PartitionStateName
R = ReplicaStateName

# Re-read-and-retry rounds before an election gives up on a partition whose state keeps
# moving under it (a leader changing the ISR at the same moment). Kafka loops forever.
MAX_WRITE_ROUNDS = 50

_REASONS = {
    ElectionStrategy.OFFLINE: "offline",
    ElectionStrategy.REASSIGN: "reassign",
    ElectionStrategy.PREFERRED: "preferred",
    ElectionStrategy.CONTROLLED_SHUTDOWN: "controlled_shutdown",
}


# Distinct leaderships ControllerOps shares at most (cleared when full: epochs move on).
SHARED_LEADERSHIPS_MAX = 10_000


# What a partition_state line found written after its answer was lost says of itself (the
# broker's isr_change lines of such writes end their `why` the same way).
FOUND_WRITTEN = "found written, its answer lost"


@dataclass(frozen=True)
class UnansweredStates:
    """Partition states a controller term sent whose answer a lost connection took: the
    partition_state rows they get if ZooKeeper applied them (each with the zkVersion the
    write gives), and the controller epoch they were written with."""

    controller_epoch: int
    rows: tuple[PartitionStateRow, ...]

    def partitions(self) -> list[TopicPartition]:
        return [TopicPartition(r.topic, r.partition) for r in self.rows]


def found_written(
    unanswered: UnansweredStates, stored: Mapping[TopicPartition, PartitionState | None]
) -> list[PartitionStateRow]:
    """The rows of the unanswered writes that landed: ZooKeeper holds, at exactly the
    zkVersion the write gives, the leader, leader epoch and ISR it sent, under its
    controller epoch. Only that write can have put them there: another controller writes
    another controller epoch, and a leader's ISR change keeps the leader epoch the
    controller's write moved on from. Anything else (an older version: it never landed; a
    newer one: written again since, the landing unknowable) gets no row."""
    rows = []
    for row in unanswered.rows:
        state = stored.get(TopicPartition(row.topic, row.partition))
        if state is None or state.controller_epoch != unanswered.controller_epoch:
            continue
        lai = state.leader_and_isr
        if (
            lai.zk_version == row.zk_version
            and lai.leader == row.leader
            and lai.leader_epoch == row.leader_epoch
            and tuple(lai.isr) == tuple(row.isr)
        ):
            rows.append(row)
    return rows


class StateChangeFailed(Exception):
    """A partition's transition could not be made; the partition keeps its state."""


@dataclass
class ControllerOps:
    """What both state machines share: the context, the store, the batch and the outputs."""

    ctx: ControllerContext
    store: ControllerStore
    controller_id: int
    send: Callable[[list[BrokerRequest]], None]
    state_log: StateChangeLog
    unclean_default: bool = False
    batch: RequestBatch = field(default_factory=RequestBatch)
    # While an event runs, flushes wait for its end so that each broker gets one request of
    # each kind per event (every step of a broker loss would otherwise re-send the same
    # 10,000 partitions). `barrier` sends now, where Kafka's order demands it.
    deferred: bool = False
    # While not None, the elections keep here every partition state they write (see
    # replicas_become_offline, which hands them to the replica step).
    elections_written: dict[TopicPartition, LeaderAndIsr] | None = None
    # While not None, the topics whose znode a reassignment must rewrite, written once at
    # the end of the block (reassignment.coalesced_topic_writes).
    topics_to_write: set[str] | None = None
    # Equal leaderships decided as one object (they are immutable): the partitions on a
    # few brokers share a few dozen (leader, epochs, ISR, version) values, and a cold
    # start's elections would otherwise keep three objects per partition in the context.
    _shared_leaderships: dict[LeaderIsrAndControllerEpoch, LeaderIsrAndControllerEpoch] = field(
        default_factory=dict, init=False, repr=False
    )
    # The last batch of partition-state writes whose answer a lost connection took, kept
    # across the resignation that follows until KafkaController reads them back (and
    # logs those that landed); one batch at most, as no term starts before that.
    unanswered: UnansweredStates | None = None

    def flush(self) -> None:
        if not self.deferred:
            self.barrier()

    def barrier(self) -> list[BrokerRequest]:
        """Send what is batched now, even inside an event; the requests sent."""
        if self.batch.is_empty():
            return []
        requests = self.batch.build(self.ctx, self.controller_id)
        if requests:  # none when every recipient was a dead broker
            self.send(requests)
        return requests

    def drop_batch(self) -> None:
        """Fenced: another controller owns the cluster, so nothing decided in this term may
        reach a broker, not even decisions written before the fence (Kafka sends a batch only
        when the whole state change succeeded)."""
        self.batch.clear()

    def log_states(self, rows: list[PartitionStateRow]) -> None:
        if rows:
            self.state_log.partition_states(self.ctx.epoch, rows)

    def keep_unanswered(
        self, row: Callable[[TopicPartition, LeaderAndIsr], PartitionStateRow]
    ) -> WrittenCallback:
        """The store's ``on_unanswered`` of a partition-state write: ``row`` makes each
        unanswered state's partition_state row (as its ``on_written`` would have), kept
        with this term's epoch in ``unanswered``."""
        epoch = self.ctx.epoch

        def keep(states: dict[TopicPartition, LeaderAndIsr]) -> None:
            rows = tuple(row(tp, lai) for tp, lai in states.items())
            self.unanswered = UnansweredStates(epoch, rows)

        return keep

    def record_leadership(
        self, tp: TopicPartition, lai: LeaderAndIsr
    ) -> LeaderIsrAndControllerEpoch:
        lice = LeaderIsrAndControllerEpoch(lai, self.ctx.epoch)
        shared = self._shared_leaderships.get(lice)
        if shared is None:
            if len(self._shared_leaderships) >= SHARED_LEADERSHIPS_MAX:
                self._shared_leaderships.clear()  # values of the past: start over
            shared = self._shared_leaderships[lice] = lice
        self.ctx.leadership[tp] = shared
        return shared

    def cached_current(
        self, tps: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderAndIsr], list[TopicPartition]]:
        """The partition states this controller holds, and the partitions it holds none of
        (to be read)."""
        leadership = self.ctx.leadership
        current: dict[TopicPartition, LeaderAndIsr] = {}
        unknown: list[TopicPartition] = []
        for tp in tps:
            lice = leadership.get(tp)
            if lice is None:
                unknown.append(tp)
            else:
                current[tp] = lice.leader_and_isr
        return current, unknown

    def read_current(
        self, tps: Sequence[TopicPartition], failures: dict[TopicPartition, Exception]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Re-read partition states (decisions are made on what ZooKeeper holds now).

        A state written by a newer controller means this one was fenced while it slept:
        record a failure for it (the write would fail its epoch check anyway).
        """
        current: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, state in self.store.read_partition_states(tps).items():
            if state is None:
                failures[tp] = StateChangeFailed(f"no leader and ISR in ZooKeeper for {tp}")
            elif state.controller_epoch > self.ctx.epoch:
                failures[tp] = StateChangeFailed(
                    f"{tp} was written by controller epoch {state.controller_epoch}, newer than "
                    f"this controller's {self.ctx.epoch}: this controller has been replaced"
                )
            else:
                current[tp] = state.leader_and_isr
        return current


# The replica steps that go a partition at a time (ReplicaStateMachine.handle_state_changes).
_BY_PARTITION = frozenset(
    (R.OFFLINE, R.DELETION_STARTED, R.DELETION_SUCCESSFUL, R.DELETION_INELIGIBLE)
)


def replicas_by_partition(
    replicas: Iterable[PartitionReplica],
) -> dict[TopicPartition, tuple[int, ...]]:
    """Each partition's replica ids, in the order named (partitions in the order first
    named)."""
    grouped: dict[TopicPartition, tuple[int, ...]] = {}
    for tp, replica_id in replicas:
        named = grouped.get(tp)
        grouped[tp] = (replica_id,) if named is None else (*named, replica_id)
    return grouped


def _holds_any(isr: tuple[int, ...], replicas: Sequence[int]) -> bool:
    return replicas[0] in isr if len(replicas) == 1 else any(r in isr for r in replicas)


def _said(replicas: Sequence[int]) -> str:
    """`replica 3`, or `replicas 1, 2` (a log line's)."""
    if len(replicas) == 1:
        return f"replica {replicas[0]}"
    return "replicas " + ", ".join(map(str, replicas))


def partition_state_row(
    tp: TopicPartition, lai: LeaderAndIsr, reason: str, replicas: Sequence[int]
) -> PartitionStateRow:
    """The state-change log's record of a partition state the controller wrote; ``lai``
    carries the zkVersion the write gave the znode (0 for a create)."""
    return PartitionStateRow(
        tp.topic,
        tp.partition,
        lai.leader,
        lai.leader_epoch,
        lai.isr,
        reason,
        replicas,
        lai.zk_version,
    )


class PartitionStateMachine:
    def __init__(self, ops: ControllerOps) -> None:
        self.ops = ops
        self.ctx = ops.ctx

    def startup(self) -> None:
        self.initialize_states()
        self.trigger_online_partition_state_change()

    def initialize_states(self) -> None:
        ctx = self.ctx
        leadership = ctx.leadership
        states = ctx.partition_states
        # A leader on a live (or shutting down) broker: online (is_replica_online, inlined:
        # this runs for every partition at failover).
        live = ctx.live_brokers
        on_failed_dirs = ctx.replicas_on_offline_dirs
        offline: dict[str, int] = {}
        written = 0
        for tp in ctx.all_partitions():
            written += 1
            lice = leadership.get(tp)
            if lice is None:
                states[tp] = P.NEW
            elif lice.leader_and_isr.leader in live and not (
                on_failed_dirs and ctx.is_on_offline_dir(lice.leader_and_isr.leader, tp)
            ):
                states[tp] = P.ONLINE
            else:
                states[tp] = P.OFFLINE
                offline[tp.topic] = offline.get(tp.topic, 0) + 1
        if written == len(states):  # every state was written here: the count is whole
            ctx.offline_by_topic = offline
        else:
            ctx.recount_offline_partitions()

    def trigger_online_partition_state_change(
        self, topics: Iterable[str] | None = None
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Try to bring every New or Offline partition online (not of topics being deleted,
        but of those whose deletion is held before it started: `is_topic_in_service`)."""
        ctx = self.ctx
        candidates = (
            ctx.partition_states.items()
            if topics is None
            else (
                (tp, ctx.partition_state(tp)) for t in topics for tp in ctx.partitions_for_topic(t)
            )
        )
        tps = [
            tp
            for tp, state in candidates
            if state in (P.NEW, P.OFFLINE) and ctx.is_topic_in_service(tp.topic)
        ]
        return self.handle_state_changes(tps, P.ONLINE, ElectionStrategy.OFFLINE)

    def handle_state_changes(
        self,
        tps: Sequence[TopicPartition],
        target: PartitionStateName,
        strategy: ElectionStrategy | None = None,
        *,
        allow_unclean: bool = False,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        if not tps:
            return {}
        try:
            return self._do_handle(tps, target, strategy, allow_unclean)
        except ControllerMovedError:
            self.ops.drop_batch()
            raise
        finally:
            self.ops.flush()

    def _do_handle(
        self,
        tps: Sequence[TopicPartition],
        target: PartitionStateName,
        strategy: ElectionStrategy | None,
        allow_unclean: bool,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        ctx = self.ctx
        allowed = PARTITION_VALID_PREVIOUS[target]
        valid = []
        for tp in tps:
            state = ctx.partition_states.setdefault(tp, P.NON_EXISTENT)
            if state in allowed:
                valid.append(tp)
            else:
                log.error(
                    "invalid partition state transition of %s from %s to %s",
                    tp,
                    state.value,
                    target.value,
                )
        if target is P.NON_EXISTENT:
            for tp in valid:
                ctx.drop_partition_state(tp)
            return {}
        if target in (P.NEW, P.OFFLINE):
            ctx.set_partition_states(valid, target)
            return {}
        # target is ONLINE
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        uninitialized = [tp for tp in valid if ctx.partition_states[tp] is P.NEW]
        to_elect = [tp for tp in valid if ctx.partition_states[tp] in (P.OFFLINE, P.ONLINE)]
        if uninitialized:
            results.update(self._initialize(uninitialized))
            # An adopted state whose leader is gone was set Offline: elect it now, as any
            # Offline partition (nothing else would before an unrelated event).
            adopted_offline = [tp for tp in uninitialized if ctx.partition_states[tp] is P.OFFLINE]
            if adopted_offline and strategy is ElectionStrategy.OFFLINE:
                to_elect += adopted_offline
            elif adopted_offline:
                results.update(self._elect(adopted_offline, ElectionStrategy.OFFLINE, False))
        if to_elect:
            if strategy is None:
                raise ValueError("an election needs a strategy")
            results.update(self._elect(to_elect, strategy, allow_unclean))
        ctx.set_partition_states(
            (tp for tp, outcome in results.items() if not isinstance(outcome, Exception)), P.ONLINE
        )
        return results

    def _initialize(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """New -> Online: the first live replica leads, all live replicas form the ISR."""
        ctx, ops = self.ctx, self.ops
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        to_create: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            lai = election.initial_leader_and_isr(ctx, tp)
            if lai is None:
                results[tp] = StateChangeFailed(
                    f"no replica of {tp} is alive (replicas {list(ctx.replicas(tp))}, "
                    f"live brokers {sorted(ctx.live_broker_ids)})"
                )
            else:
                to_create[tp] = lai
        if not to_create:
            return results
        # What was created is recorded, logged and batched a multi at a time, as ZooKeeper
        # answers it: a fence that fails between two multis still raises, and the states
        # created before it are in the log.
        created = ops.store.create_partition_states(
            to_create,
            ctx.epoch,
            ctx.epoch_zk_version,
            partial(self._created, results),
            ops.keep_unanswered(
                lambda tp, lai: partition_state_row(tp, lai, "new", ctx.replicas(tp))
            ),
        )
        existing = [tp for tp, err in created.items() if isinstance(err, NodeExistsError)]
        for tp, err in created.items():
            if err is not None and not isinstance(err, NodeExistsError):
                # Not created (a parent znode gone: the topic was deleted meanwhile): a
                # failed state change, the partition left New (Kafka's logFailedStateChange).
                results[tp] = err
                log.error("could not initialise %s: creating its state failed (%r)", tp, err)
        if existing:
            # A state left by an interrupted earlier attempt: adopt it rather than fail.
            failures: dict[TopicPartition, Exception] = {}
            for tp, lai in ops.read_current(existing, failures).items():
                lice = ops.record_leadership(tp, lai)
                if not ctx.is_replica_online(lai.leader, tp, include_shutting_down=True):
                    # Its leader is gone (or -1): Offline, so the election that follows
                    # (_do_handle) picks one.
                    ctx.set_partition_state(tp, P.OFFLINE)
                    failures[tp] = StateChangeFailed(
                        f"{tp} already has a state in ZooKeeper, led by {lai.leader}, which "
                        "is not live: the partition is Offline until a leader is elected"
                    )
                    continue
                ops.batch.add_leader_and_isr(
                    ctx, ctx.replicas(tp), tp, lice, ctx.full_assignment(tp), is_new=True
                )
                results[tp] = lai
            for tp, err in failures.items():
                results[tp] = err
                log.error("could not initialise %s: %s", tp, err)
        return results

    def _created(
        self,
        results: dict[TopicPartition, LeaderAndIsr | Exception],
        created: dict[TopicPartition, LeaderAndIsr],
    ) -> None:
        """New partitions' states created: into the context and the state-change log, and
        their LeaderAndIsr into the batch."""
        ctx, ops = self.ctx, self.ops
        rows = []
        for tp, lai in created.items():
            lice = ops.record_leadership(tp, lai)
            ops.batch.add_leader_and_isr(
                ctx, lai.isr, tp, lice, ctx.full_assignment(tp), is_new=True
            )
            results[tp] = lai
            rows.append(partition_state_row(tp, lai, "new", ctx.replicas(tp)))
        ops.log_states(rows)

    def _unclean_allowed(
        self, current: dict[TopicPartition, LeaderAndIsr], allow_unclean: bool
    ) -> set[TopicPartition]:
        """Partitions allowed an unclean election: only those without a live ISR member need
        their topic's config read (as Kafka's collectUncleanLeaderElectionState)."""
        ctx = self.ctx
        online = ctx.live_broker_ids
        if ctx.replicas_on_offline_dirs:
            no_live_isr = [
                tp for tp, lai in current.items() if not ctx.online_replicas(tp, lai.isr)
            ]
        else:
            no_live_isr = [tp for tp, lai in current.items() if online.isdisjoint(lai.isr)]
        if not no_live_isr:
            return set()
        if allow_unclean:
            return set(no_live_isr)
        configs = self.ops.store.topic_configs({tp.topic for tp in no_live_isr})
        # Read as the brokers read it (trimmed, any case), so both agree on " true".
        default = self.ops.unclean_default
        return {
            tp
            for tp in no_live_isr
            if topic_override_bool(
                configs.get(tp.topic, {}), "unclean.leader.election.enable", default
            )
        }

    def _elect(
        self, tps: list[TopicPartition], strategy: ElectionStrategy, allow_unclean: bool
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Elect leaders and write them, each conditional on the zkVersion it was decided on.

        The first round decides from the controller's cached states, as the floor of a
        broker loss is only the writes. A cached state that ZooKeeper no longer holds
        loses its conditional write (BadVersion); that partition, and any the cache leaves
        without an eligible leader (a decision not to write needs ZooKeeper's state), are
        read and decided again. Kafka reads every state first.
        """
        ctx, ops = self.ctx, self.ops
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        remaining = tps
        from_cache = True
        for _ in range(MAX_WRITE_ROUNDS):
            if not remaining:
                break
            failures: dict[TopicPartition, Exception] = {}
            undecided: list[TopicPartition] = []
            if from_cache:
                current, undecided = ops.cached_current(remaining)
            else:
                current = ops.read_current(remaining, failures)
            unclean_ok = (
                self._unclean_allowed(current, allow_unclean)
                if strategy is ElectionStrategy.OFFLINE
                else set()
            )
            decided: dict[TopicPartition, election.ElectionResult] = {}
            for tp, lai in current.items():
                outcome = election.elect(ctx, tp, lai, strategy, tp in unclean_ok)
                if outcome.leader_and_isr is None and from_cache:
                    undecided.append(tp)
                elif outcome.leader_and_isr is None:
                    failures[tp] = StateChangeFailed(
                        f"no eligible leader for {tp} under the {strategy.value} strategy "
                        f"(replicas {list(ctx.replicas(tp))}, ISR {list(lai.isr)}, "
                        f"live brokers {sorted(ctx.live_broker_ids)})"
                    )
                else:
                    decided[tp] = outcome
            # What was written is recorded, logged and batched a multi at a time, while
            # ZooKeeper applies the rest.
            written = ops.store.update_partition_states(
                {tp: d.leader_and_isr for tp, d in decided.items() if d.leader_and_isr is not None},
                ctx.epoch,
                ctx.epoch_zk_version,
                partial(self._elected, decided, _REASONS[strategy], results),
                ops.keep_unanswered(partial(self._election_row, decided, _REASONS[strategy])),
            )
            failures.update(written.failed)
            for tp, err in failures.items():
                results[tp] = err
                log.warning("election of %s failed: %s", tp, err)
            remaining = written.retry + undecided
            from_cache = False
        for tp in remaining:
            results[tp] = StateChangeFailed(f"the state of {tp} kept changing during the election")
        return results

    def _election_row(
        self,
        decided: Mapping[TopicPartition, election.ElectionResult],
        reason: str,
        tp: TopicPartition,
        lai: LeaderAndIsr,
        replicas: Sequence[int] | None = None,
    ) -> PartitionStateRow:
        reason = "unclean" if decided[tp].unclean else reason
        return partition_state_row(
            tp, lai, reason, self.ctx.replicas(tp) if replicas is None else replicas
        )

    def _elected(
        self,
        decided: Mapping[TopicPartition, election.ElectionResult],
        reason: str,
        results: dict[TopicPartition, LeaderAndIsr | Exception],
        written: dict[TopicPartition, LeaderAndIsr],
    ) -> None:
        """Elections written: into the context and the state-change log, and their
        LeaderAndIsr into the batch."""
        ctx, ops = self.ctx, self.ops
        rows = []
        kept = ops.elections_written
        to_send = []
        for tp, lai in written.items():
            lice = ops.record_leadership(tp, lai)
            if kept is not None:
                kept[tp] = lai
            outcome = decided[tp]
            ra = ctx.full_assignment(tp)
            to_send.append((outcome.live_replicas, tp, lice, ra))
            if outcome.unclean:
                ctx.unclean_elections += 1
            rows.append(self._election_row(decided, reason, tp, lai, ra.replicas))
            results[tp] = lai
        ops.batch.add_leader_and_isr_updates(ctx, to_send)
        ops.log_states(rows)


class ReplicaStateMachine:
    def __init__(self, ops: ControllerOps) -> None:
        self.ops = ops
        self.ctx = ops.ctx

    def startup(self) -> list[PartitionReplica]:
        """Kafka's start-up, its first half: replicas on live brokers become Online (and are
        sent their partition's state). Returns the replicas on dead brokers, which start as
        Kafka's ReplicaDeletionIneligible; `start_state_machines` takes them Offline once
        the partitions have had their elections.

        One pass instead of a transition per replica: with 100,000 partitions this runs
        300,000 times per failover. No UpdateMetadata rides along: the failover has just
        sent a full one.
        """
        ctx, ops = self.ctx, self.ops
        offline: list[PartitionReplica] = []
        # What a replica list comes to depends only on which brokers are live: worked out
        # once per distinct list (a cluster has a handful), not once per partition:
        # (the replica states as the context holds them, the online replicas, the others).
        by_replicas: dict[
            tuple[int, ...], tuple[tuple[tuple[int, ReplicaStateName], ...], list[int], list[int]]
        ] = {}
        resend: list[
            tuple[list[int], TopicPartition, LeaderIsrAndControllerEpoch, ReplicaAssignment]
        ] = []
        try:
            assignments = ctx.assignments
            leadership = ctx.leadership
            replica_states = ctx.replica_states
            on_failed_dirs = ctx.replicas_on_offline_dirs
            for tp in ctx.all_partitions():
                ra = assignments[tp.topic][tp.partition]
                # A partition with a replica on a failed log directory is worked out alone.
                alone = on_failed_dirs and any(ctx.is_on_offline_dir(r, tp) for r in ra.replicas)
                known = None if alone else by_replicas.get(ra.replicas)
                if known is None:
                    states: dict[int, ReplicaStateName] = {}
                    for r in ra.replicas:
                        # A replica on a dead broker starts as Kafka's ReplicaDeletionIneligible.
                        online_now = ctx.is_replica_online(r, tp, include_shutting_down=True)
                        states[r] = R.ONLINE if online_now else R.DELETION_INELIGIBLE
                    known = (
                        replica_states_value(states) if states else (),
                        [r for r, state in states.items() if state is R.ONLINE],
                        [r for r, state in states.items() if state is not R.ONLINE],
                    )
                    if not alone:
                        by_replicas[ra.replicas] = known
                held, online, dead = known
                if dead:
                    offline.extend(PartitionReplica(tp, r) for r in dead)
                if held:
                    replica_states[tp] = held
                else:
                    replica_states.pop(tp, None)
                lice = leadership.get(tp)
                if lice is not None and online:
                    resend.append((online, tp, lice, ra))
            ops.batch.add_leader_and_isr_many(resend, is_new=False)
        except BaseException:
            ops.batch.clear()
            raise
        ops.flush()
        return offline

    def handle_state_changes(
        self,
        replicas: Iterable[PartitionReplica] | Mapping[TopicPartition, tuple[int, ...]],
        target: ReplicaStateName,
        *,
        reason: str = "offline",
        just_written: Mapping[TopicPartition, LeaderAndIsr] | None = None,
        offline_in_metadata: bool = False,
    ) -> None:
        """``replicas``: PartitionReplicas, or each partition's replica ids (a partition
        named once). The Offline and deletion steps go a partition at a time, and a
        deletion of every topic names 300,000 replicas: as objects they were 19 MB more
        at its peak, for 100,000 partitions.

        ``just_written``: partition states this controller wrote moments ago in the same
        event, which the Offline step may take as ZooKeeper's (see remove_replica_from_isr);
        their UpdateMetadata has gone out with them. ``offline_in_metadata``: every broker's
        metadata shows these replicas offline already (a failover's full UpdateMetadata
        went out after their brokers were known dead), so a partition whose ISR did not
        hold one needs no UpdateMetadata (item 6 of docs/architecture.md). The Offline
        step takes a partition's replicas of every broker out of its ISR in one write, not
        one a broker as Kafka's (item 56 of docs/architecture.md).
        """
        grouped: Mapping[TopicPartition, tuple[int, ...]] = {}
        by_broker: dict[int, list[PartitionReplica]] = defaultdict(list)
        if target in _BY_PARTITION:
            grouped = replicas if isinstance(replicas, Mapping) else replicas_by_partition(replicas)
        else:
            named = (
                (PartitionReplica(tp, r) for tp, ids in replicas.items() for r in ids)
                if isinstance(replicas, Mapping)
                else replicas
            )
            for pr in named:
                by_broker[pr.replica].append(pr)
        if not grouped and not by_broker:
            return
        try:
            if target is R.OFFLINE:
                self._offline_together(grouped, reason, just_written or {}, offline_in_metadata)
                return
            if target is R.DELETION_STARTED:
                self._deletion_started(grouped)
                return
            if target in (R.DELETION_SUCCESSFUL, R.DELETION_INELIGIBLE):
                # Only their states change (a deletion's answers: 100,000 replicas each).
                self._valid_by_partition(grouped, target, move=True)
                return
            # In broker id order, whatever the callers' (Kafka's is a hash map's).
            for broker_id, prs in sorted(by_broker.items()):
                self._do_handle(broker_id, prs, target)
        except ControllerMovedError:
            self.ops.drop_batch()
            raise
        finally:
            self.ops.flush()

    def _do_handle(
        self,
        replica_id: int,
        replicas: list[PartitionReplica],
        target: ReplicaStateName,
    ) -> None:
        ctx, ops = self.ctx, self.ops
        valid = self._valid(replicas, target)
        if target is R.NEW:
            for pr in valid:
                tp = pr.topic_partition
                lice = ctx.leadership.get(tp)
                if lice is not None:
                    if lice.leader_and_isr.leader == replica_id:
                        log.error(
                            "replica %d of %s cannot become new: it is asked to lead",
                            replica_id,
                            tp,
                        )
                        continue
                    ops.batch.add_leader_and_isr(
                        ctx, [replica_id], tp, lice, ctx.full_assignment(tp), is_new=True
                    )
                ctx.put_replica_state(pr, R.NEW)
        elif target is R.ONLINE:
            for pr in valid:
                tp = pr.topic_partition
                if ctx.replica_state(pr) is R.NEW:
                    ra = ctx.full_assignment(tp)
                    if replica_id not in ra.replicas:
                        log.error(
                            "adding replica %d of %s that is not in its assignment %s",
                            replica_id,
                            tp,
                            list(ra.replicas),
                        )
                        ctx.update_assignment(
                            tp, type(ra)((*ra.replicas, replica_id), ra.adding, ra.removing)
                        )
                else:
                    lice = ctx.leadership.get(tp)
                    if lice is not None:
                        ops.batch.add_leader_and_isr(
                            ctx, [replica_id], tp, lice, ctx.full_assignment(tp), is_new=False
                        )
                ctx.put_replica_state(pr, R.ONLINE)
        else:  # NON_EXISTENT: the others go a partition at a time (handle_state_changes)
            for pr in valid:
                tp = pr.topic_partition
                ctx.update_assignment(tp, ctx.full_assignment(tp).without_replica(replica_id))
                ctx.remove_replica_state(pr)

    def _valid(
        self, replicas: Iterable[PartitionReplica], target: ReplicaStateName
    ) -> list[PartitionReplica]:
        """Those of ``replicas`` that may move to ``target``; the others logged."""
        ctx = self.ctx
        allowed = REPLICA_VALID_PREVIOUS[target]
        valid = []
        for pr in replicas:
            state = ctx.replica_state(pr)
            if state is R.NON_EXISTENT:
                ctx.put_replica_state(pr, state)
            if state in allowed:
                valid.append(pr)
            else:
                log.error(
                    "invalid replica state transition of replica %d of %s from %s to %s",
                    pr.replica,
                    pr.topic_partition,
                    state.value,
                    target.value,
                )
        return valid

    def _valid_by_partition(
        self,
        grouped: Mapping[TopicPartition, tuple[int, ...]],
        target: ReplicaStateName,
        *,
        sort: bool = False,
        move: bool = False,
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """``_valid`` a partition at a time: each partition's replicas (``grouped``) that
        may move to ``target`` (partitions in their order; their replicas in the order
        named, or in broker id order with ``sort``), moved there with ``move``. A
        partition's replica states are one shared value, so what its replicas come to is
        worked out once for each distinct (states, replicas), not once a replica (a
        deletion of 100,000 partitions asks for 300,000 replicas three times)."""
        ctx = self.ctx
        allowed = REPLICA_VALID_PREVIOUS[target]
        replica_states = ctx.replica_states
        held_states = replica_states.get
        # (states, replicas) -> (those that may move, the states after the move, whether
        # _valid must see the others)
        known: dict[
            tuple[tuple[tuple[int, ReplicaStateName], ...], tuple[int, ...]],
            tuple[tuple[int, ...], tuple[tuple[int, ReplicaStateName], ...], bool],
        ] = {}
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, ids in grouped.items():
            key = (held_states(tp, ()), ids)
            found = known.get(key)
            if found is None:
                states = dict(key[0])
                ok = [r for r in ids if states.get(r, R.NON_EXISTENT) in allowed]
                if sort:
                    ok.sort()
                # A replica refused is logged, one without a state put NonExistent: _valid's.
                to_check = len(ok) < len(ids) or any(r not in states for r in ids)
                moved = key[0]
                if move and ok:
                    for r in ok:
                        states[r] = target
                    moved = replica_states_value(states)
                found = known[key] = (tuple(ok), moved, to_check)
            valid, moved, to_check = found
            if to_check:
                self._valid([PartitionReplica(tp, r) for r in ids], target)
                if move and valid:
                    ctx.put_replicas_state(tp, valid, target)
            elif move and valid:
                replica_states[tp] = moved
            if valid:
                out[tp] = valid
        return out

    def _deletion_started(self, grouped: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Replicas to be deleted: asked to (StopReplica with delete), a partition at a
        time."""
        batch = self.ops.batch
        for tp, ids in self._valid_by_partition(grouped, R.DELETION_STARTED, move=True).items():
            batch.add_stop_replica(ids, tp, delete_partition=True)

    def _offline_together(
        self,
        grouped: Mapping[TopicPartition, tuple[int, ...]],
        reason: str,
        just_written: Mapping[TopicPartition, LeaderAndIsr],
        offline_in_metadata: bool,
    ) -> None:
        """The Offline step, for replicas of every broker at once: each partition's leave
        its ISR in one write (`remove_replicas_from_isr`, taking them out in broker id
        order), where Kafka's passes a broker at a time write once a replica: a topic
        deletion's took 300,000 writes for 100,000 partitions (RF 3). The brokers hear only
        the last of those states anyway (Kafka's batch keeps one LeaderAndIsr a
        partition), and one write fences the leaders' ISR writes as several did (item 56)."""
        leaving = self._valid_by_partition(grouped, R.OFFLINE, sort=True)
        self._offline(leaving, reason, just_written, offline_in_metadata)

    def _offline(
        self,
        leaving: Mapping[TopicPartition, tuple[int, ...]],
        reason: str,
        just_written: Mapping[TopicPartition, LeaderAndIsr],
        offline_in_metadata: bool,
    ) -> None:
        """The Offline step of valid replicas, ``leaving`` their partitions (see
        handle_state_changes): each stopped (delete=false) and taken out of its ISR."""
        ctx, ops = self.ctx, self.ops
        for tp, ids in leaving.items():
            for replica_id in ids:
                ops.batch.add_stop_replica([replica_id], tp, delete_partition=False)
        leadership = ctx.leadership
        led = (
            leaving  # the common case, not copied (100,000 partitions at a deletion)
            if all(tp in leadership for tp in leaving)
            else {tp: ids for tp, ids in leaving.items() if tp in leadership}
        )
        updated, untouched = self.remove_replicas_from_isr(led, reason, just_written)
        to_tell = [tp for tp in leaving if tp not in led]
        if not offline_in_metadata:
            # Not in that ISR: the state is unchanged, but every broker's metadata must
            # now list the replica among the partition's offline replicas (Kafka's
            # doRemoveReplicasFromIsr returns these partitions too, and the Offline
            # step adds their UpdateMetadata for every live broker). Their LeaderAndIsr,
            # the same state again, is not re-sent: every replica would ignore it (5).
            # A state just written went out with its UpdateMetadata already.
            to_tell.extend(
                tp
                for tp in untouched
                if tp not in just_written and ctx.is_topic_in_service(tp.topic)
            )
        if to_tell:
            ops.batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, to_tell)
        to_send = []
        for tp, lice in updated.items():
            if ctx.is_topic_in_service(tp.topic):
                ra = ctx.full_assignment(tp)
                ids = leaving[tp]
                to_send.append(([r for r in ra.replicas if r not in ids], tp, lice, ra))
        ops.batch.add_leader_and_isr_updates(ctx, to_send)
        # A partition whose write failed keeps its replicas' states.
        for tps in (untouched, updated, (tp for tp in leaving if tp not in led)):
            for tp in tps:
                ctx.put_replicas_state(tp, leaving[tp], R.OFFLINE)

    def remove_replica_from_isr(
        self,
        replica_id: int,
        tps: Sequence[TopicPartition],
        reason: str,
        just_written: Mapping[TopicPartition, LeaderAndIsr] | None = None,
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], list[TopicPartition]]:
        """Take a replica out of the ISRs (and leadership) of these partitions, fenced
        (`remove_replicas_from_isr` of that one replica)."""
        return self.remove_replicas_from_isr(
            dict.fromkeys(tps, (replica_id,)), reason, just_written
        )

    def remove_replicas_from_isr(
        self,
        leaving: Mapping[TopicPartition, Sequence[int]],
        reason: str,
        just_written: Mapping[TopicPartition, LeaderAndIsr] | None = None,
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], list[TopicPartition]]:
        """Take replicas out of the ISRs (and leadership) of their partitions, fenced: each
        partition's (in ``leaving``) in one write (`election.without_replicas`).

        Returns the partitions changed, and those whose ISR held none of its replicas (only
        refreshed from ZooKeeper) or whose leader epoch cannot be incremented (as they are).

        A partition in ``just_written`` whose written ISR leaves its replicas out is not
        read again. That state was written in this event and its LeaderAndIsr sent since,
        so ZooKeeper still holds it until the new leader has applied it: every ISR write
        of a leader is conditional on the zkVersion its LeaderAndIsr gave it. Kafka's read
        here may land in that window too, so this is one of the outcomes Kafka allows, and
        a broker loss saves re-reading the 10,000s of states it has just elected.

        The first round takes the replica out of the cached states that hold it, each
        write conditional on the cached zkVersion, as the elections do: one a leader has
        changed since loses its write (BadVersion) and is read and decided again. A cached
        state without the replica is read first (a leader may have added it back since),
        since not writing is a decision too. Kafka reads every state.
        """
        ctx, ops = self.ctx, self.ops
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        untouched: list[TopicPartition] = []
        remaining = list(leaving)
        if just_written:
            to_read = []
            for tp in remaining:
                lai = just_written.get(tp)
                if lai is not None and not _holds_any(lai.isr, leaving[tp]):
                    untouched.append(tp)
                else:
                    to_read.append(tp)
            remaining = to_read
        from_cache = True
        for _ in range(MAX_WRITE_ROUNDS):
            if not remaining:
                break
            failures: dict[TopicPartition, Exception] = {}
            if from_cache:
                # Filtered in place, not copied: a deletion of every topic holds 100,000.
                current, to_read = ops.cached_current(remaining)
                stale = [tp for tp, lai in current.items() if not _holds_any(lai.isr, leaving[tp])]
                for tp in stale:
                    del current[tp]
                to_read.extend(stale)
                if to_read:
                    current.update(ops.read_current(to_read, failures))
                from_cache = False
            else:
                current = ops.read_current(remaining, failures)
            updates: dict[TopicPartition, LeaderAndIsr] = {}
            for tp, lai in current.items():
                ids = leaving[tp]
                if not _holds_any(lai.isr, ids):
                    ops.record_leadership(tp, lai)
                    untouched.append(tp)
                elif len(ids) == 1:
                    updates[tp] = election.without_replica(lai, ids[0])
                else:
                    updates[tp] = election.without_replicas(lai, ids)
            del current  # not held through the writes
            # Recorded and logged a multi at a time, while ZooKeeper applies the rest.
            written = ops.store.update_partition_states(
                updates,
                ctx.epoch,
                ctx.epoch_zk_version,
                partial(self._isr_written, reason, out),
                ops.keep_unanswered(
                    lambda tp, lai: partition_state_row(tp, lai, reason, ctx.replicas(tp))
                ),
            )
            for tp, err in {**failures, **written.failed}.items():
                if tp in written.failed and isinstance(err, MalformedZnode):
                    # Its leader epoch cannot be incremented (refuse_epochs_past_int32): the
                    # replica goes offline all the same, its state as it is, so that a
                    # deletion of its topic is not held up for it.
                    log.error(
                        "%s; %s goes offline leaving it as it is",
                        err,
                        _said(leaving[tp]),
                    )
                    untouched.append(tp)
                elif ctx.is_topic_in_service(tp.topic):
                    log.error(
                        "could not remove %s from the ISR of %s: %s",
                        _said(leaving[tp]),
                        tp,
                        err,
                    )
            remaining = written.retry
        for tp in remaining:
            log.error(
                "gave up removing %s from the ISR of %s: its state kept changing",
                _said(leaving[tp]),
                tp,
            )
        return out, untouched

    def _isr_written(
        self,
        reason: str,
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch],
        written: dict[TopicPartition, LeaderAndIsr],
    ) -> None:
        ctx, ops = self.ctx, self.ops
        rows = []
        for tp, lai in written.items():
            out[tp] = ops.record_leadership(tp, lai)
            rows.append(partition_state_row(tp, lai, reason, ctx.replicas(tp)))
        ops.log_states(rows)
