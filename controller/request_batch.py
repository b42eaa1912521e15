"""Collects the requests a controller decision owes each broker (ControllerBrokerRequestBatch).

A state change adds per-broker partition states here; `build` turns them into at most one
LeaderAndIsr, one UpdateMetadata and one StopReplica body per broker, in that order
(Kafka sends LeaderAndIsr before UpdateMetadata so that a broker knows its own role first).
Pure: it reads the context when building and touches no socket.
"""

from __future__ import annotations

import functools
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, NamedTuple

from controller.context import ControllerContext, LeaderIsrAndControllerEpoch, ReplicaAssignment
from wire.api import ApiKey, UpdateMetadataType
from wire.protocol import EncodedBody, request_codec
from zkdata.znodes import LEADER_DURING_DELETE, TopicPartition

LEADER_AND_ISR_VERSION = 5
# v8 for its Type: a full update's last request is FULL (UpdateMetadataType).
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 3

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2

_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
_ZERO_UUID = uuid.UUID(int=0)


Body = dict[str, Any]

# Partitions per LeaderAndIsr/UpdateMetadata request: a 100,000-partition decision goes out
# in chunks, so no process ever holds it as dicts all at once (the controller builds each
# chunk when it sends it, a broker decodes one chunk at a time). Small chunks also keep the
# heap compact: the objects a broker keeps (partitions, logs) are allocated between the
# request's transient dicts, and the memory those leave free mostly stays mapped. A
# broker applying 30,000 partitions as one request held 3.2 KB per partition, as three
# requests 2.4 KB, as six 2.1 KB; but each request is a round trip, and a broker leading
# 10,000 partitions is moved in one.
MAX_PARTITIONS_PER_REQUEST = 10_000


@dataclass(frozen=True, slots=True)
class BrokerRequest:
    """One request for one broker. Its body is built on demand, by the sender thread, from
    an immutable snapshot taken when the controller decided: by ``make_body``, or, for a
    body shared by several brokers, by ``shared`` with this broker's epoch."""

    broker_id: int
    api_key: ApiKey
    api_version: int
    make_body: Callable[[], Body] | None
    partitions: tuple[TopicPartition, ...] = ()
    # For StopReplica: whether it deletes the partitions (topic deletion waits for these).
    delete_partitions: bool = False
    # Set by the controller: the event whose decisions this request carries, and which of
    # the event's sends it went out in (1 for its first).
    tracker: Any = None
    tracker_round: int = 0
    # Set when the body is encoded once for several brokers (an UpdateMetadata, a
    # LeaderAndIsr to brokers of the same partitions): the channel sends a copy of that
    # encoding with this broker's epoch written in, instead of encoding ``body`` itself.
    shared: SharedBody | None = None
    broker_epoch: int = -1
    # For UpdateMetadata: the rows it carries (shared by its brokers' copies), so that the
    # channel can tell when a newer UpdateMetadata waiting behind it says all it says.
    update_metadata_rows: list[UpdateMetadataRow] | None = None
    # For UpdateMetadata: its Type, FULL for the last request of a full update.
    update_metadata_type: UpdateMetadataType = UpdateMetadataType.UNKNOWN

    def __post_init__(self) -> None:
        if (self.make_body is None) == (self.shared is None):
            raise ValueError("a request's body is made by make_body or shared, one of them")

    @property
    def body(self) -> Body:
        if self.shared is not None:
            return self.shared.body(self.broker_epoch)
        assert self.make_body is not None  # __post_init__
        return self.make_body()

    def wire_body(self) -> Body | EncodedBody:
        """What the channel sends: the shared encoding if there is one, else the body."""
        if self.shared is not None:
            return self.shared.encoded(self.broker_epoch)
        return self.body


class _LeaderAndIsrEntry(NamedTuple):
    """A partition's state for its brokers' LeaderAndIsr; immutable, so the brokers of a
    partition share one (a failover queues one per replica: 300,000 for 100,000)."""

    lice: LeaderIsrAndControllerEpoch
    assignment: ReplicaAssignment
    is_new: bool


_States = dict[TopicPartition, _LeaderAndIsrEntry]
_ChunkEntries = tuple[_LeaderAndIsrEntry, ...]


class _ChunkStates(NamedTuple):
    """A LeaderAndIsr chunk's partition states, in its partitions' order: what its body is
    built from. References to the context's states and assignments, not entries (a tuple
    of 10,000 references is 80 KB; 10,000 entries take 640 KB more)."""

    lices: tuple[LeaderIsrAndControllerEpoch, ...]
    assignments: tuple[ReplicaAssignment, ...]
    is_new: tuple[bool, ...]

    @classmethod
    def of(cls, entries: Sequence[_LeaderAndIsrEntry]) -> _ChunkStates:
        return cls(
            tuple(map(_LICE, entries)), tuple(map(_ASSIGNMENT, entries)), tuple(map(_NEW, entries))
        )


_LICE, _ASSIGNMENT, _NEW = itemgetter(0), itemgetter(1), itemgetter(2)


@dataclass
class RequestBatch:
    #: Each broker's LeaderAndIsr states. Brokers sent the same states share one map (the
    #: same object), copied for a broker when it is sent something the others are not: a
    #: failover re-sends every partition's state to each of its replicas, and three maps
    #: of 100,000 partitions were 15 MiB of hash tables at that step's peak (5 MiB shared).
    leader_and_isr: dict[int, _States] = field(default_factory=dict)
    #: The maps to write for each set of brokers named so far: valid until a map is made,
    #: copied or dropped (a partition at a time, a broker's start names 100,000 of them).
    _targets: dict[tuple[int, ...], list[_States]] = field(
        default_factory=dict, repr=False, compare=False
    )
    update_metadata_brokers: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    update_metadata_all: bool = False
    #: StopReplica partitions per broker as named, those to stop and those to stop and
    #: delete; a partition named both ways is deleted (Kafka's batch keeps one state a
    #: partition, deleting if any asked that). Lists, merged when built: a deletion of
    #: every topic names each replica twice, and three maps of 100,000 partitions were
    #: 15 MB at the step's peak, against 2.4 MB.
    stop_replica: dict[int, tuple[list[TopicPartition], list[TopicPartition]]] = field(
        default_factory=dict
    )
    #: whose address a LeaderAndIsr gives for each leader (inter.broker.listener.name)
    inter_broker_listener: str = "PLAINTEXT"

    def is_empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_brokers or self.stop_replica)

    def clear(self) -> None:
        self.leader_and_isr.clear()
        self._targets.clear()
        self.update_metadata_brokers.clear()
        self.update_metadata_partitions.clear()
        self.update_metadata_all = False
        self.stop_replica.clear()

    def add_leader_and_isr(
        self,
        ctx: ControllerContext,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        lice: LeaderIsrAndControllerEpoch,
        assignment: ReplicaAssignment,
        *,
        is_new: bool,
        update_metadata: bool = True,
    ) -> None:
        """A partition's state for these brokers; by default every live broker also gets
        the partition in an UpdateMetadata. `update_metadata=False` is for re-sending a
        state every broker already has (a failover sends a full UpdateMetadata first)."""
        self.add_leader_and_isr_many(((broker_ids, tp, lice, assignment),), is_new=is_new)
        if update_metadata:
            self._add_to_update_metadata(ctx, (tp,))

    def add_leader_and_isr_updates(
        self,
        ctx: ControllerContext,
        partitions: Sequence[
            tuple[Iterable[int], TopicPartition, LeaderIsrAndControllerEpoch, ReplicaAssignment]
        ],
    ) -> None:
        """Each (brokers, partition, state, assignment) as add_leader_and_isr adds it (not
        new, with the UpdateMetadata): an election or ISR step of 10,000s of partitions
        adds them in one call."""
        if not partitions:
            return
        self.add_leader_and_isr_many(partitions, is_new=False)
        self._add_to_update_metadata(ctx, [entry[1] for entry in partitions])

    def hold_leader_and_isr(self, partitions: Collection[TopicPartition]) -> dict[int, _States]:
        """Take these partitions' LeaderAndIsr entries out of the batch, for
        `restore_leader_and_isr` to put back after the batch was sent."""
        held: dict[int, _States] = {}
        taken_from: dict[int, _States] = {}
        for broker_id, states in list(self.leader_and_isr.items()):
            # A map shared by several brokers is emptied once; each of them holds its take.
            taken = taken_from.get(id(states))
            if taken is None:
                taken = taken_from[id(states)] = {
                    tp: entry for tp in partitions if (entry := states.pop(tp, None))
                }
            if taken:
                held[broker_id] = taken
            if not states:
                del self.leader_and_isr[broker_id]
                self._targets.clear()
        return held

    def restore_leader_and_isr(
        self, held: Mapping[int, Mapping[TopicPartition, _LeaderAndIsrEntry]]
    ) -> None:
        """Put held entries back, under those added since (newer states)."""
        brokers_by_take: dict[int, list[int]] = {}
        for broker_id, taken in held.items():
            brokers_by_take.setdefault(id(taken), []).append(broker_id)
        for broker_ids in brokers_by_take.values():
            taken = held[broker_ids[0]]
            for states in self._maps_of(broker_ids):
                for tp, entry in taken.items():
                    states.setdefault(tp, entry)

    def _maps_of(self, broker_ids: Iterable[int]) -> list[_States]:
        """The maps to write for exactly these brokers (negative ids are no broker): a
        map one of them shares with a broker not among them is copied for them first,
        and those without one get a new one, shared."""
        ids = {b for b in broker_ids if b >= 0}
        batch = self.leader_and_isr
        fresh = [b for b in ids if b not in batch]
        if fresh:
            self._targets.clear()
            new: _States = {}
            for b in fresh:
                batch[b] = new
        maps: dict[int, _States] = {}
        for b in sorted(ids):
            states = batch[b]
            if id(states) in maps:
                continue
            owners = [o for o, shared in batch.items() if shared is states]
            if not ids.issuperset(owners):
                self._targets.clear()
                states = dict(states)
                for o in owners:
                    if o in ids:
                        batch[o] = states
            maps[id(states)] = states
        return list(maps.values())

    def _add_to_update_metadata(
        self, ctx: ControllerContext, partitions: Iterable[TopicPartition]
    ) -> None:
        """These partitions go to every live broker in the batch's UpdateMetadata."""
        if not self.update_metadata_brokers >= ctx.live_brokers.keys():
            self.update_metadata_brokers.update(ctx.live_brokers)
        self.update_metadata_partitions.update(partitions)

    def add_leader_and_isr_many(
        self,
        partitions: Iterable[
            tuple[Iterable[int], TopicPartition, LeaderIsrAndControllerEpoch, ReplicaAssignment]
        ],
        *,
        is_new: bool,
    ) -> None:
        """Each (brokers, partition, state, assignment) as add_leader_and_isr adds it,
        without the UpdateMetadata: a failover re-sends every partition's state (300,000
        entries at 100,000 partitions), so the maps of each set of brokers named are
        looked up once."""
        targets = self._targets
        for broker_ids, tp, lice, assignment in partitions:
            entry = _LeaderAndIsrEntry(lice, assignment, is_new)
            key = broker_ids if type(broker_ids) is tuple else tuple(broker_ids)
            maps = targets.get(key)
            if maps is None:
                # _maps_of empties the cache first if it makes or copies a map.
                maps = targets[key] = self._maps_of(key)
            for states in maps:
                previous = states.get(tp)
                if previous is not None and previous.is_new and not is_new:
                    states[tp] = entry._replace(is_new=True)  # is_new sticks within a batch
                else:
                    states[tp] = entry

    def add_update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] | None
    ) -> None:
        """Partitions None means all of them (a full metadata refresh)."""
        self.update_metadata_brokers.update(b for b in broker_ids if b >= 0)
        if partitions is None:
            self.update_metadata_all = True
        else:
            self.update_metadata_partitions.update(partitions)

    def add_stop_replica(
        self, broker_ids: Iterable[int], tp: TopicPartition, *, delete_partition: bool
    ) -> None:
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            named = self.stop_replica.get(broker_id)
            if named is None:
                named = self.stop_replica[broker_id] = ([], [])
            named[delete_partition].append(tp)

    # --- building -----------------------------------------------------------------------

    def build(self, ctx: ControllerContext, controller_id: int) -> list[BrokerRequest]:
        """The requests for live brokers, and clear the batch."""
        out: list[BrokerRequest] = []
        live = ctx.live_or_shutting_down_broker_ids
        listener = self.inter_broker_listener
        endpoints = {b: reg.address(listener) for b, reg in ctx.live_brokers.items()}
        # Within the build only: a chunk's entries (its body holds _ChunkStates).
        shared: dict[tuple[TopicPartition, ...], tuple[_ChunkEntries, SharedBody]] = {}
        # A map shared by brokers is read once: its partitions and their entries, in order.
        ordered: dict[int, tuple[tuple[TopicPartition, ...], _ChunkEntries]] = {}
        for broker_id, states in sorted(self.leader_and_isr.items()):
            if broker_id in live:
                in_order = ordered.get(id(states))
                if in_order is None:
                    in_order = ordered[id(states)] = (tuple(states), tuple(states.values()))
                out.extend(
                    self._leader_and_isr_requests(
                        ctx, controller_id, broker_id, *in_order, endpoints, shared
                    )
                )
        del ordered  # each broker's requests hold their chunks, not the whole map's order
        if self.update_metadata_brokers:
            targets = sorted(b for b in self.update_metadata_brokers if b in live)
            if targets:
                full = self.update_metadata_all
                rows = update_metadata_rows(ctx, None if full else self.update_metadata_partitions)
                brokers = update_metadata_live_brokers(ctx)
                topic_ids = dict(ctx.topic_ids)
                # brokers only: one, no partitions
                row_chunks = update_metadata_chunks(rows) or [[]]
                chunks = []
                for i, chunk in enumerate(row_chunks):
                    # A full update's last request says it is whole (the requests before
                    # it carry the rest): a new broker holds Metadata until then.
                    last_of_full = full and i == len(row_chunks) - 1
                    kind = (
                        UpdateMetadataType.FULL if last_of_full else UpdateMetadataType.INCREMENTAL
                    )
                    body = SharedBody(
                        ApiKey.UPDATE_METADATA,
                        UPDATE_METADATA_VERSION,
                        functools.partial(
                            _update_metadata_body,
                            controller_id,
                            ctx.epoch,
                            rows=chunk,
                            topic_ids=topic_ids,
                            live_brokers=brokers,
                            update_type=kind,
                        ),
                    )
                    chunks.append((chunk, body, kind))
                for broker_id in targets:
                    broker_epoch = ctx.broker_epochs.get(broker_id, -1)
                    for chunk, um, kind in chunks:
                        out.append(
                            BrokerRequest(
                                broker_id,
                                ApiKey.UPDATE_METADATA,
                                UPDATE_METADATA_VERSION,
                                None,
                                shared=um,
                                broker_epoch=broker_epoch,
                                update_metadata_rows=chunk,
                                update_metadata_type=kind,
                            )
                        )
        for broker_id, (stopped, deleted) in sorted(self.stop_replica.items()):
            if broker_id not in live:
                continue
            # One request per delete flag, so a deletion's responses are told apart.
            deleting = set(deleted)
            for delete, tps in (
                (False, sorted({tp for tp in stopped if tp not in deleting})),
                (True, sorted(deleting)),
            ):
                if tps:
                    out.append(
                        self._stop_replica_request(ctx, controller_id, broker_id, tps, delete)
                    )
        self.clear()
        return out

    @staticmethod
    def _leader_and_isr_requests(
        ctx: ControllerContext,
        controller_id: int,
        broker_id: int,
        tps: tuple[TopicPartition, ...],
        all_entries: _ChunkEntries,
        endpoints: dict[int, tuple[str, int]],
        shared: dict[tuple[TopicPartition, ...], tuple[_ChunkEntries, SharedBody]],
    ) -> list[BrokerRequest]:
        """This broker's LeaderAndIsr requests, of its partitions and their entries in
        order; a chunk of the same partitions in the same states as another broker's is
        encoded once for both (``shared``)."""
        # Each chunk holds only its own states, so a chunk sent lets go of them: a broker
        # joining a 100,000-partition cluster takes its ten chunks over tens of seconds,
        # and a body reading the broker's whole map held all 100,000 entries (12.6 MiB)
        # until the last was sent; now 3.1 MiB, less with each chunk sent.
        out = []
        broker_epoch = ctx.broker_epochs.get(broker_id, -1)
        for start in range(0, len(tps), MAX_PARTITIONS_PER_REQUEST):
            end = start + MAX_PARTITIONS_PER_REQUEST
            chunk = tps[start:end]
            entries = all_entries[start:end]
            seen = shared.get(chunk)
            # A partition's brokers share its entry: tuple equality finds the same objects
            # at C speed (equal ones made apart encode the same too).
            if seen is not None and seen[0] == entries:
                body = seen[1]
            else:
                chunk_states = _ChunkStates.of(entries)
                topic_ids = {tp.topic: ctx.topic_ids.get(tp.topic, _ZERO_UUID) for tp in chunk}
                body = SharedBody(
                    ApiKey.LEADER_AND_ISR,
                    LEADER_AND_ISR_VERSION,
                    functools.partial(
                        _leader_and_isr_body,
                        controller_id,
                        ctx.epoch,
                        chunk=chunk,
                        states=chunk_states,
                        topic_ids=topic_ids,
                        endpoints=endpoints,
                    ),
                )
                shared[chunk] = (entries, body)
            out.append(
                BrokerRequest(
                    broker_id,
                    ApiKey.LEADER_AND_ISR,
                    LEADER_AND_ISR_VERSION,
                    None,
                    chunk,
                    shared=body,
                    broker_epoch=broker_epoch,
                )
            )
        return out

    @staticmethod
    def _stop_replica_request(
        ctx: ControllerContext,
        controller_id: int,
        broker_id: int,
        tps: list[TopicPartition],
        delete: bool,
    ) -> BrokerRequest:
        broker_epoch = ctx.broker_epochs.get(broker_id, -1)
        epochs: list[int] = []
        for tp in tps:
            # Kafka 2.8's addStopReplicaRequestForBrokers: -2, which skips the broker's
            # epoch check, only for a topic queued for deletion (its epoch is not bumped);
            # else the leader epoch, whatever the delete flag, so a late copy of a
            # reassignment's delete is fenced once the broker has the replica back.
            if ctx.is_topic_queued_for_deletion(tp.topic):
                epochs.append(EPOCH_DURING_DELETE)
            else:
                lice = ctx.leadership.get(tp)
                epochs.append(lice.leader_and_isr.leader_epoch if lice else NO_EPOCH)
        partitions = tuple(tps)
        # The body is made by the sender, as it is encoded: a dict a partition, held by
        # every broker's request until answered, was 52.6 MB for a 100K deletion's three.
        return BrokerRequest(
            broker_id,
            ApiKey.STOP_REPLICA,
            STOP_REPLICA_VERSION,
            functools.partial(
                _stop_replica_body,
                controller_id,
                ctx.epoch,
                broker_epoch,
                partitions,
                tuple(epochs),
                delete,
            ),
            partitions,
            delete,
            broker_epoch=broker_epoch,
        )


def update_metadata_chunks(rows: list[UpdateMetadataRow]) -> list[list[UpdateMetadataRow]]:
    """``rows`` (grouped by topic, as update_metadata_rows makes them) in requests of at
    most MAX_PARTITIONS_PER_REQUEST partitions, a topic never split: its partitions all go
    in one request, whatever its size (a topic has at most 100,000). A broker that applied
    part of a topic would answer Metadata with fewer partitions than the topic has, and a
    keyed producer would map keys to other partitions meanwhile."""
    if len(rows) <= MAX_PARTITIONS_PER_REQUEST:
        return [rows] if rows else []
    # Each topic's row count, in row order (Counter counts in C: no loop per row here).
    sizes = Counter(map(itemgetter(0), rows)).values()
    chunks: list[list[UpdateMetadataRow]] = []
    start = end = 0
    for size in sizes:
        if end > start and end - start + size > MAX_PARTITIONS_PER_REQUEST:
            chunks.append(rows[start:end])
            start = end
        end += size
    chunks.append(rows[start:end])
    return chunks


# (topic, partition, leadership, replicas, offline replicas, being deleted): immutable, so a
# sender thread may build the request body from it while the context moves on.
UpdateMetadataRow = tuple[
    str, int, LeaderIsrAndControllerEpoch, tuple[int, ...], tuple[int, ...], bool
]


def update_metadata_rows(
    ctx: ControllerContext, partitions: Iterable[TopicPartition] | None
) -> list[UpdateMetadataRow]:
    """What UpdateMetadata says of these partitions (None: all), grouped by topic."""
    live = ctx.live_broker_ids
    on_failed_dirs = ctx.replicas_on_offline_dirs
    leadership = ctx.leadership
    deleting = ctx.topics_to_be_deleted
    if partitions is None:
        wanted: dict[str, Iterable[int]] = {t: parts.keys() for t, parts in ctx.assignments.items()}
    else:
        grouped: dict[str, list[int]] = {}
        for tp in partitions:
            grouped.setdefault(tp.topic, []).append(tp.partition)
        wanted = dict(grouped)
    rows: list[UpdateMetadataRow] = []
    # Each distinct replica list's offline replicas, once: one shared tuple for the many
    # partitions on the same brokers (at a cold start every partition has some offline).
    offline_of: dict[tuple[int, ...], tuple[int, ...]] = {}
    for topic, partition_ids in wanted.items():
        assignment = ctx.assignments.get(topic)
        if assignment is None:
            continue
        during_delete = topic in deleting
        for p in partition_ids:
            lice = leadership.get(TopicPartition(topic, p))
            ra = assignment.get(p)
            if lice is None or ra is None:
                continue  # no leader decided yet: nothing to tell
            replicas = ra.replicas
            offline = offline_of.get(replicas)
            if offline is None:
                offline = offline_of[replicas] = tuple(r for r in replicas if r not in live)
            if on_failed_dirs:
                tp = TopicPartition(topic, p)
                if any(ctx.is_on_offline_dir(r, tp) for r in replicas):
                    offline = tuple(r for r in replicas if not ctx.is_replica_online(r, tp))
            rows.append((topic, p, lice, replicas, offline, during_delete))
    return rows


def _update_metadata_body(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    rows: list[UpdateMetadataRow],
    topic_ids: dict[str, uuid.UUID],
    live_brokers: list[Body],
    update_type: UpdateMetadataType,
) -> Body:
    return {
        "controller_id": controller_id,
        "type": int(update_type),
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": update_metadata_topic_states(rows, topic_ids),
        "live_brokers": live_brokers,
    }


class UpdateMetadataScope(NamedTuple):
    """What an UpdateMetadata built from rows tells beside its rows: the brokers it says
    are live (with their endpoints), and the topic ids its rows go with."""

    live_broker_ids: frozenset[int]
    live_brokers: Sequence[Body]
    topic_ids: Mapping[str, uuid.UUID]


def update_metadata_scope(request: BrokerRequest) -> UpdateMetadataScope | None:
    """The scope of an UpdateMetadata that RequestBatch built (None for another)."""
    made = _update_metadata_builder(request)
    if made is None:
        return None
    kw = made.keywords
    live = kw["live_brokers"]
    return UpdateMetadataScope(frozenset(b["id"] for b in live), live, kw["topic_ids"])


def with_update_metadata_rows(
    request: BrokerRequest, rows: list[UpdateMetadataRow]
) -> BrokerRequest:
    """``request`` (an UpdateMetadata that RequestBatch built) carrying ``rows`` instead,
    in a body of its own (no longer the one its brokers share)."""
    made = _update_metadata_builder(request)
    if made is None:
        raise ValueError("not an UpdateMetadata built from rows")
    body = SharedBody(
        ApiKey.UPDATE_METADATA, request.api_version, functools.partial(made, rows=rows)
    )
    return replace(request, shared=body, update_metadata_rows=rows)


def _update_metadata_builder(request: BrokerRequest) -> functools.partial[Body] | None:
    shared = request.shared
    if request.update_metadata_rows is None or shared is None:
        return None
    made = shared._make_body
    if isinstance(made, functools.partial) and made.func is _update_metadata_body:
        return made
    return None


def encode_shared_bodies(requests: Iterable[BrokerRequest]) -> None:
    """Encode the requests' shared bodies now, in order, on the calling thread (a sender
    that wants one being encoded waits for it rather than encoding it again). One that
    cannot be encoded is left to its senders, which report it and abandon the request as
    they do any other: the caller (a failover) goes on."""
    for shared in dict.fromkeys(r.shared for r in requests if r.shared is not None):
        try:
            shared.prepare()
        except Exception:  # reported by the sender that tries again
            continue


class SharedBody:
    """A request body sent to several brokers that differs between them only in the
    broker epoch (an UpdateMetadata always; a LeaderAndIsr when the brokers host the same
    partitions): the sender that comes first builds and encodes it once, and each
    broker's copy gets its own broker epoch written in. 100,000 partitions to three
    brokers: one encoding instead of three (~0.3 s of the controller's CPU, and a third
    of the transient objects)."""

    __slots__ = ("_api_key", "_api_version", "_encoded", "_lock", "_make_body")

    def __init__(self, api_key: ApiKey, api_version: int, make_body: Callable[[int], Body]) -> None:
        self._api_key = api_key
        self._api_version = api_version
        self._make_body = make_body  # broker epoch -> body
        self._lock = threading.Lock()
        self._encoded: bytes | None = None

    def body(self, broker_epoch: int) -> Body:
        return self._make_body(broker_epoch)

    def prepare(self) -> None:
        """Encode it now, unless done already (the brokers' copies are then only copies)."""
        self._shared_encoding()

    def _shared_encoding(self) -> bytes:
        with self._lock:
            if self._encoded is None:
                codec = request_codec(self._api_key, self._api_version)
                self._encoded = codec.encode(self.body(_PROBE_BROKER_EPOCH))
                if self._encoded[self._epoch_at()] != _PROBE_BYTES:
                    # Not where this version keeps it: encode per broker instead.
                    self._encoded = b""
            return self._encoded

    @property
    def is_encoded(self) -> bool:
        return self._encoded is not None

    def encoded(self, broker_epoch: int) -> EncodedBody:
        shared = self._shared_encoding()
        if not shared:
            codec = request_codec(self._api_key, self._api_version)
            own = codec.encode(self.body(broker_epoch))
            return EncodedBody(self._api_key, self._api_version, own)
        copy = bytearray(shared)
        copy[self._epoch_at()] = _INT64.pack(broker_epoch)
        return EncodedBody(self._api_key, self._api_version, copy)

    def _epoch_at(self) -> slice:
        """Where the broker epoch is: UpdateMetadata v8 has isKRaftController (a bool)
        between controller_id and controller_epoch."""
        at = _BROKER_EPOCH_AT
        if self._api_key == ApiKey.UPDATE_METADATA and self._api_version >= 8:
            return slice(at.start + 1, at.stop + 1)
        return at


# UpdateMetadata v5-v7 and LeaderAndIsr v2+ start with controller_id (int32),
# controller_epoch (int32) and broker_epoch (int64), v8 of UpdateMetadata with one more
# byte after controller_id; SharedBody checks this with a probe value on each use.
_INT64 = struct.Struct(">q")
_BROKER_EPOCH_AT = slice(8, 16)
_PROBE_BROKER_EPOCH = -0x0102030405060708
_PROBE_BYTES = _INT64.pack(_PROBE_BROKER_EPOCH)


def update_metadata_topic_states(
    rows: list[UpdateMetadataRow], topic_ids: dict[str, uuid.UUID]
) -> list[Body]:
    out: list[Body] = []
    current: list[Body] = []
    current_topic: str | None = None
    for topic, p, lice, replicas, offline, during_delete in rows:
        if topic != current_topic:
            current = []
            out.append(
                {
                    "topic_name": topic,
                    "topic_id": topic_ids.get(topic, _ZERO_UUID),
                    "partition_states": current,
                }
            )
            current_topic = topic
        lai = lice.leader_and_isr
        # The context's tuples go in as they are (the codec encodes any sized iterable as
        # an array): no list copies, three per partition, 300,000 at 100K partitions.
        current.append(
            {
                "partition_index": p,
                "controller_epoch": lice.controller_epoch,
                "leader": LEADER_DURING_DELETE if during_delete else lai.leader,
                "leader_epoch": lai.leader_epoch,
                "isr": lai.isr,
                "zk_version": lai.zk_version,
                "replicas": replicas,
                "offline_replicas": offline,
            }
        )
    return out


def _stop_replica_body(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    partitions: tuple[TopicPartition, ...],
    epochs: tuple[int, ...],
    delete: bool,
) -> Body:
    # One dict for each (partition index, leader epoch), shared by the topics that have
    # it: only read, by the encoder. A deletion's epochs are all -2, so its 100 topics of
    # 1,000 partitions need 1,000 dicts, not 100,000 (1.1 MB as built, not 19.3 MB).
    states: dict[tuple[int, int], Body] = {}
    by_topic: dict[str, list[Body]] = {}
    for tp, epoch in zip(partitions, epochs, strict=True):
        key = (tp.partition, epoch)
        state = states.get(key)
        if state is None:
            state = states[key] = {
                "partition_index": tp.partition,
                "leader_epoch": epoch,
                "delete_partition": delete,
            }
        by_topic.setdefault(tp.topic, []).append(state)
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "topic_states": [
            {"topic_name": t, "partition_states": parts} for t, parts in by_topic.items()
        ],
    }


def _leader_and_isr_body(
    controller_id: int,
    controller_epoch: int,
    broker_epoch: int,
    chunk: tuple[TopicPartition, ...],
    states: _ChunkStates,
    topic_ids: dict[str, uuid.UUID],
    endpoints: dict[int, tuple[str, int]],
) -> Body:
    by_topic: dict[str, list[Body]] = {}
    leader_ids: set[int] = set()
    for tp, lice, ra, is_new in zip(chunk, *states, strict=True):
        lai = lice.leader_and_isr
        leader_ids.add(lai.leader)
        # Tuples as they are, as in update_metadata_topic_states.
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "controller_epoch": lice.controller_epoch,
                "leader": lai.leader,
                "leader_epoch": lai.leader_epoch,
                "isr": lai.isr,
                "partition_epoch": lai.zk_version,
                "replicas": ra.replicas,
                "adding_replicas": ra.adding,
                "removing_replicas": ra.removing,
                "is_new": is_new,
            }
        )
    return {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "type": 0,
        "topic_states": [
            {"topic_name": t, "topic_id": topic_ids[t], "partition_states": parts}
            for t, parts in by_topic.items()
        ],
        "live_leaders": [
            {"broker_id": b, "host_name": endpoints[b][0], "port": endpoints[b][1]}
            for b in sorted(leader_ids)
            if b in endpoints
        ],
    }


def update_metadata_live_brokers(ctx: ControllerContext) -> list[dict[str, Any]]:
    return [
        {
            "id": broker_id,
            "endpoints": [
                {
                    "port": ep.port,
                    "host": ep.host,
                    "listener": ep.listener,
                    "security_protocol": _SECURITY_PROTOCOL_IDS.get(ep.security_protocol, 0),
                }
                for ep in reg.endpoints
            ],
            "rack": reg.rack,
        }
        for broker_id, reg in sorted(ctx.live_brokers.items())
    ]
