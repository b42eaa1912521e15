"""The controller's view of the cluster (Kafka's ControllerContext).

Owned by the controller's event thread and nothing else: no locks. The state machines and
election strategies are functions over it. Everything here is loaded from ZooKeeper at
failover and kept current by the events that follow.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import NamedTuple

from zkdata.znodes import (
    BrokerRegistration,
    LeaderAndIsr,
    PartitionState,
    SharedValues,
    TopicPartition,
)


class IdentityHashedEnum(enum.Enum):
    """An enum hashed by identity (its members are singletons, equal only to themselves):
    a decision hashes a state for every partition it touches, and Enum's own __hash__ is
    Python code, this one C."""

    __hash__ = object.__hash__


class PartitionStateName(IdentityHashedEnum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


class ReplicaStateName(IdentityHashedEnum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


P = PartitionStateName
R = ReplicaStateName

# Valid previous states of each target state (PartitionStateMachine.scala).
PARTITION_VALID_PREVIOUS: dict[PartitionStateName, frozenset[PartitionStateName]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

# Valid previous states of each target state (ReplicaStateMachine.scala).
REPLICA_VALID_PREVIOUS: dict[ReplicaStateName, frozenset[ReplicaStateName]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}


_ReplicaStates = tuple[tuple[int, ReplicaStateName], ...]
_shared_states: SharedValues[_ReplicaStates] = SharedValues(100_000)


def replica_states_value(states: dict[int, ReplicaStateName]) -> _ReplicaStates:
    """How ControllerContext.replica_states holds a partition's (non-empty) replica
    states: one shared value for equal states."""
    return _shared_states(tuple(states.items()))


# (a partition's replica states, replicas of it, their new state) -> the partition's new
# states. The same few transitions repeat for every partition of a broker (10,000s when it
# is lost): each is worked out once.
_replicas_transitions: dict[
    tuple[_ReplicaStates, tuple[int, ...], ReplicaStateName], _ReplicaStates
] = {}
_REPLICA_TRANSITIONS_MAX = 10_000


class ReplicaAssignment(NamedTuple):
    """A partition's replicas; during a reassignment also the replicas being added/removed.

    While reassigning, `replicas` is the full set (target first, then the rest of the
    origin), as Kafka's ReplicaAssignment (KIP-455): `adding` is what is not in the origin,
    `removing` what is not in the target. A replica an overriding target dropped but kept
    (docs/architecture.md, item 18) is in neither, so in both lists.
    """

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    def without_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding if r != replica),
            tuple(r for r in self.removing if r != replica),
        )

    @staticmethod
    def for_reassignment(
        origin: tuple[int, ...], target: tuple[int, ...], kept: tuple[int, ...] = ()
    ) -> ReplicaAssignment:
        """From `origin` to `target` (Kafka's reassignTo), `kept` (replicas of neither)
        staying until the target has caught up."""
        full = tuple(dict.fromkeys(target + origin + kept))
        return ReplicaAssignment(
            full,
            adding=tuple(r for r in full if r not in origin),
            removing=tuple(r for r in full if r not in target),
        )


class LeaderIsrAndControllerEpoch(NamedTuple):
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


class PartitionReplica(NamedTuple):
    topic_partition: TopicPartition
    replica: int


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0

    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    # Replicas a live broker answered KAFKA_STORAGE_ERROR for: their log directory failed
    # (KIP-112). Offline although their broker lives, until it registers anew. Nearly
    # always empty: the hot paths test it for truth before asking per partition.
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    # Written through set_partition_state / drop_partition_state, which keep the count of
    # Offline partitions per topic that the metrics read.
    partition_states: dict[TopicPartition, PartitionStateName] = field(default_factory=dict)
    offline_by_topic: dict[str, int] = field(default_factory=dict)
    # Replica states are keyed by partition, then broker: 100,000 partitions need no
    # 300,000 composite keys.
    # Each partition's replica states as a shared tuple of (replica, state) pairs: nearly
    # every partition has all its replicas Online, so 100,000 of them share a handful of
    # tuples instead of holding 100,000 dicts (~230 bytes each).
    replica_states: dict[TopicPartition, tuple[tuple[int, ReplicaStateName], ...]] = field(
        default_factory=dict
    )

    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    # Topics listed in /brokers/topics whose znode could not be read when they appeared:
    # not in the assignments, created once their znode is repaired (its watch fires).
    unreadable_topics: set[str] = field(default_factory=set)

    # Counters the state-change log and metrics read.
    unclean_elections: int = 0

    # --- brokers -----------------------------------------------------------------------

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_brokers)

    @property
    def live_broker_ids(self) -> set[int]:
        return set(self.live_brokers) - self.shutting_down_broker_ids

    def is_replica_online(
        self,
        broker_id: int,
        tp: TopicPartition | None = None,
        include_shutting_down: bool = False,
    ) -> bool:
        """Kafka's isReplicaOnline: on a live broker (or one shutting down, if asked) and,
        given its partition, not on a failed log directory of that broker."""
        if broker_id not in self.live_brokers:
            return False
        if not include_shutting_down and broker_id in self.shutting_down_broker_ids:
            return False
        return tp is None or not self.is_on_offline_dir(broker_id, tp)

    def is_on_offline_dir(self, broker_id: int, tp: TopicPartition) -> bool:
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is not None and tp in offline

    def online_replicas(
        self, tp: TopicPartition, replicas: Iterable[int], include_shutting_down: bool = False
    ) -> tuple[int, ...]:
        """The replicas that are online (``is_replica_online``), in their order."""
        return tuple(r for r in replicas if self.is_replica_online(r, tp, include_shutting_down))

    def add_live_brokers(self, brokers: dict[int, tuple[BrokerRegistration, int]]) -> None:
        for broker_id, (registration, broker_epoch) in brokers.items():
            self.live_brokers[broker_id] = registration
            self.broker_epochs[broker_id] = broker_epoch
            self.replicas_on_offline_dirs.pop(broker_id, None)

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.broker_epochs.pop(broker_id, None)
            # A broker that registers again starts with every log directory it has.
            self.replicas_on_offline_dirs.pop(broker_id, None)

    # --- topics and partitions ---------------------------------------------------------

    @property
    def all_topics(self) -> set[str]:
        return set(self.assignments)

    def all_partitions(self) -> Iterator[TopicPartition]:
        """Every partition, as the key object the leadership map holds where it has one:
        the maps keyed by partition then share one object per partition (~11 MB fewer
        for 100,000 partitions). The leadership map is usually in the assignments' order
        (a failover fills it in that order, new topics are added to both): walked in
        step with it, nothing is made (a failover's state machines walk every partition
        twice: 40 ms each at 100,000 otherwise); from the first difference on, keys are
        looked up. Listed before the caller sees any, so the caller may change the maps."""
        out: list[TopicPartition] = []
        keys = iter(self.leadership)
        known: dict[TopicPartition, TopicPartition] | None = None
        for topic, parts in self.assignments.items():
            for p in parts:
                if known is None:
                    key = next(keys, None)
                    if key is not None and key.partition == p and key.topic == topic:
                        out.append(key)
                        continue
                    known = {tp: tp for tp in self.leadership}
                tp = TopicPartition(topic, p)
                out.append(known.get(tp, tp))
        return iter(out)

    def known_partitions(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Those of `tps` with an assignment here (a notification may name a partition of
        a topic deleted since)."""
        assignments = self.assignments
        return [tp for tp in tps if tp.partition in assignments.get(tp.topic, ())]

    def adopt_partition_states(
        self, states: Mapping[TopicPartition, PartitionState | None]
    ) -> None:
        """Partition states read from ZooKeeper become the partitions' leaderships. Equal
        states come back as one object; their leaderships are one object too (immutable:
        a later decision replaces a partition's, never changes it)."""
        values = list(states.values())
        # One leadership per distinct state object, then set in one pass that loops in C.
        distinct = dict(zip(map(id, values), values, strict=True))
        shared = {
            key: LeaderIsrAndControllerEpoch(state.leader_and_isr, state.controller_epoch)
            for key, state in distinct.items()
            if state is not None
        }
        if len(shared) == len(distinct):
            self.leadership.update(
                zip(states.keys(), map(shared.__getitem__, map(id, values)), strict=True)
            )
        else:  # some partitions have no state: they get no leadership
            self.leadership.update(
                (tp, shared[id(state)]) for tp, state in states.items() if state is not None
            )

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in self.assignments.get(topic, {})]

    def partitions_by_topic(self, topics: Iterable[str]) -> dict[str, list[TopicPartition]]:
        """Each topic's partitions (``partitions_for_topic``), for a step that names them
        several times: made once, shared by its lists and requests. Where the topics
        hold a quarter of all partitions or more (a deletion of every topic, say), they
        are the key objects the leadership map holds, found in one walk of
        ``all_partitions`` (in proportion to the step's own work): made anew, 100,000 of
        them were 6.4 MB more held through the step."""
        wanted = dict.fromkeys(t for t in topics if t in self.assignments)
        out: dict[str, list[TopicPartition]] = {t: [] for t in wanted}
        held = sum(len(self.assignments[t]) for t in wanted)
        if held * 4 < self.partition_count():
            for t in wanted:
                out[t] = self.partitions_for_topic(t)
            return out
        for tp in self.all_partitions():
            of_topic = out.get(tp.topic)
            if of_topic is not None:
                of_topic.append(tp)
        return out

    def replicas_of(self, tps: Iterable[TopicPartition]) -> list[PartitionReplica]:
        """Every replica of the partitions, in their order, sharing their objects."""
        full = self.full_assignment
        return [PartitionReplica(tp, r) for tp in tps for r in full(tp).replicas]

    def partition_count(self) -> int:
        """Safe from another thread (the status file's): the topic dicts are copied into a
        list in one step under the GIL before they are counted, so a topic added or removed
        by the event thread meanwhile cannot break the walk."""
        return sum(map(len, list(self.assignments.values())))

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        parts = self.assignments.get(tp.topic)
        ra = parts.get(tp.partition) if parts else None
        return ra if ra is not None else ReplicaAssignment(())

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.full_assignment(tp).replicas

    def update_assignment(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        self.assignments.setdefault(tp.topic, {})[tp.partition] = ra

    def _partitions_and_assignments(self) -> Iterator[tuple[TopicPartition, ReplicaAssignment]]:
        """Every partition, as `all_partitions` gives it, with its assignment. The key
        objects go into requests that may wait long in a broker's queue (a broker joining
        a 100,000-partition cluster takes its LeaderAndIsr over tens of seconds): one made
        anew for each held 100,000 more TopicPartition objects until the last was sent."""
        assignments = chain.from_iterable(map(dict.values, self.assignments.values()))
        return zip(self.all_partitions(), assignments, strict=True)

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, ra in self._partitions_and_assignments() if broker_id in ra.replicas]

    def replicas_on_brokers(self, broker_ids: set[int]) -> list[PartitionReplica]:
        return [
            PartitionReplica(tp, r)
            for tp, ra in self._partitions_and_assignments()
            for r in ra.replicas
            if r in broker_ids
        ]

    def replicas_for_topic(self, topic: str) -> list[PartitionReplica]:
        # One TopicPartition a partition, shared by its replicas.
        return self.replicas_of(self.partitions_for_topic(topic))

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        return [
            tp for tp, lice in self.leadership.items() if lice.leader_and_isr.leader == broker_id
        ]

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_for_topic(topic):
            self.leadership.pop(tp, None)
            self.drop_partition_state(tp)
            self.replica_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)

    # --- states ------------------------------------------------------------------------

    def partition_state(self, tp: TopicPartition) -> PartitionStateName:
        return self.partition_states.get(tp, P.NON_EXISTENT)

    def set_partition_state(self, tp: TopicPartition, state: PartitionStateName) -> None:
        self.set_partition_states((tp,), state)

    def set_partition_states(
        self, tps: Iterable[TopicPartition], state: PartitionStateName
    ) -> None:
        """Set the partitions' states, keeping the Offline count of each topic."""
        states = self.partition_states
        offline = state is P.OFFLINE
        changed: dict[str, int] = {}
        for tp in tps:
            was = states.get(tp, P.NON_EXISTENT)
            states[tp] = state
            if (was is P.OFFLINE) != offline:
                changed[tp.topic] = changed.get(tp.topic, 0) + 1
        for topic, n in changed.items():
            self._count_offline(topic, n if offline else -n)

    def drop_partition_state(self, tp: TopicPartition) -> None:
        if self.partition_states.pop(tp, None) is P.OFFLINE:
            self._count_offline(tp.topic, -1)

    def recount_offline_partitions(self) -> None:
        """After partition_states was written directly (a failover's initial states:
        100,000 of them, at a fraction of the cost of set_partition_state each)."""
        offline: dict[str, int] = {}
        for tp, state in self.partition_states.items():
            if state is P.OFFLINE:
                offline[tp.topic] = offline.get(tp.topic, 0) + 1
        self.offline_by_topic = offline

    def _count_offline(self, topic: str, change: int) -> None:
        count = self.offline_by_topic.get(topic, 0) + change
        if count:
            self.offline_by_topic[topic] = count
        else:
            del self.offline_by_topic[topic]

    def replica_state(self, pr: PartitionReplica) -> ReplicaStateName:
        for replica, state in self.replica_states.get(pr.topic_partition, ()):
            if replica == pr.replica:
                return state
        return R.NON_EXISTENT

    def replica_states_of(self, tp: TopicPartition) -> dict[int, ReplicaStateName]:
        return dict(self.replica_states.get(tp, ()))

    def set_replica_states(self, tp: TopicPartition, states: dict[int, ReplicaStateName]) -> None:
        if states:
            self.replica_states[tp] = replica_states_value(states)
        else:
            self.replica_states.pop(tp, None)

    def put_replica_state(self, pr: PartitionReplica, state: ReplicaStateName) -> None:
        self.put_replicas_state(pr.topic_partition, (pr.replica,), state)

    def put_replicas_state(
        self, tp: TopicPartition, replica_ids: tuple[int, ...], state: ReplicaStateName
    ) -> None:
        """Several replicas of one partition put in one state: one lookup of the
        partition's new states, not one a replica (a deletion's Offline step moves
        300,000 replicas of 100,000 partitions)."""
        old = self.replica_states.get(tp, ())
        key = (old, replica_ids, state)
        new = _replicas_transitions.get(key)
        if new is None:
            states = dict(old)
            for replica_id in replica_ids:
                states[replica_id] = state
            new = replica_states_value(states)
            if len(_replicas_transitions) >= _REPLICA_TRANSITIONS_MAX:
                _replicas_transitions.clear()
            _replicas_transitions[key] = new
        self.replica_states[tp] = new

    def remove_replica_state(self, pr: PartitionReplica) -> None:
        states = self.replica_states_of(pr.topic_partition)
        if states.pop(pr.replica, None) is not None:
            self.set_replica_states(pr.topic_partition, states)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_in_service(self, topic: str) -> bool:
        """Whether the topic's partitions are led as any topic's: elected when offline,
        their leaders moved off lost and stopping brokers, their ISRs told to their
        replicas. A topic queued for deletion is not, unless its deletion is held before
        it started (ineligible, not in topics_with_deletion_started: a reassignment of it
        in progress, item 33), which waits on its partitions being led (item 36)."""
        return topic not in self.topics_to_be_deleted or (
            topic in self.topics_ineligible_for_deletion
            and topic not in self.topics_with_deletion_started
        )

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return R.DELETION_STARTED in self.topic_replica_states(topic)

    def topic_replica_states(self, topic: str) -> set[ReplicaStateName]:
        """The states the topic's replicas are in (NON_EXISTENT for one with none). A
        deletion asks after every answer of a broker, for every topic queued: a partition's
        states are one shared value (``replica_states_value``), so each distinct value is
        read once, not each of 3,000 replicas of a topic made into an object and looked up
        (100 topics of 1,000 partitions: 0.2 s an answer)."""
        get = self.replica_states.get
        held = {
            (ra.replicas, get(TopicPartition(topic, p), ()))
            for p, ra in self.assignments.get(topic, {}).items()
        }
        states: set[ReplicaStateName] = set()
        for replicas, replica_states in held:
            known = dict(replica_states)
            states.update(known.get(r, R.NON_EXISTENT) for r in replicas)
        return states

    @property
    def offline_partition_count(self) -> int:
        """Offline partitions, those of topics queued for deletion left out. Safe to read
        from another thread (the status file's): it copies two small collections, each in
        one step under the GIL, rather than walk every partition while the event thread
        changes them."""
        offline = dict(self.offline_by_topic)
        deleting = set(self.topics_to_be_deleted)
        return sum(n for topic, n in offline.items() if topic not in deleting)

    def reset(self) -> None:
        """Drop everything: what a resigning controller does (it may not act on stale state)."""
        fresh = ControllerContext()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))
