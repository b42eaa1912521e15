"""A broker's replicas: which partitions it leads or follows, as the controller decided.

LeaderAndIsr and StopReplica land here, after the request-level fencing (broker epoch in
`broker.apis`): a request from an older controller epoch is refused whole with
STALE_CONTROLLER_EPOCH, and a partition state whose leader epoch is not newer than the one
held is refused for that partition, so a zombie controller or a reordered request never
moves a partition backwards.

As leader, the broker tracks its followers' fetches and adds a caught-up follower to the
ISR itself (Kafka 2.6's model: a zkVersion-conditional write of the partition state, then
an ISR change notification for the controller). A write refused because the state moved
on is re-read once: if the partition has a new leader or epoch, this broker stops touching
it until the controller tells it more; it never retries in a loop.

A log directory that fails (KIP-112; storage.log_dir_failure) is handled by the log dir
failure handler thread (``handle_log_dir_failure``, Kafka's): its partitions go offline
here until the broker restarts (every request for them is answered KAFKA_STORAGE_ERROR),
their logs leave the log manager, and a log dir event notification tells the controller,
which moves their leadership away. With no log directory left, the broker halts.
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kazoo.protocol.states import ZnodeStat

from broker.compact import compacted
from broker.config import TopicConfig
from broker.isr_expiry import IsrExpiry
from broker.partition_errors import PartitionErrors
from broker.state_change_log import LeaderAndIsrRow, StateChangeLog
from storage.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    DecompressionError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    StorageError,
    UnknownCompressionError,
    UnreadableRecordLengthError,
    UnsupportedMagicError,
)
from storage.log import AppendInfo, PartitionLog
from storage.log_manager import LogManager
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import BadVersionError, Create, NoNodeError, SetData, ZkClient
from zkdata.znodes import (
    MAX_ZNODE_BYTES,
    LeaderAndIsr,
    MalformedZnode,
    SharedValues,
    TopicPartition,
    decode_partition_state,
    encode_log_dir_event,
    encode_partition_list,
    encode_partition_state,
    shared_index,
    shared_ints,
)

if TYPE_CHECKING:
    from broker.fetch_session import FetchClock

log = logging.getLogger(__name__)

# How often the leader batches ISR changes into one notification znode. Kafka waits up to
# 5 s (IsrChangePropagationBlackOut); a short window keeps metadata fresh for clients.
ISR_PROPAGATION_INTERVAL_S = 0.2
# Partitions per ISR change notification, and its bytes: its znode must stay under
# jute.maxbuffer (1 MiB; MAX_ZNODE_BYTES less a margin for the request's framing). Count
# alone does not bound it: 10,000 partitions of topics named with 249 characters (Kafka's
# limit) are 2.8 MB, which ZooKeeper refuses by dropping the connection.
ISR_NOTIFICATION_PARTITIONS = 10_000
ISR_NOTIFICATION_BYTES = MAX_ZNODE_BYTES - 100_000
# ISR changes the writer takes per round. When followers of 100,000 partitions join at
# once, all of them in one round would be ~100 MB of plans, ops, results and log rows at
# the same time, made while the partitions' new ISRs are: the process would keep that
# memory, fragmented, for good.
ISR_WRITES_PER_ROUND = 10_000
# Locks that partitions' follower appends share (a partition's is fixed by its hash): a
# fetcher thread per leader takes them, so a few dozen keep contention negligible.
_FOLLOWER_LOCK_STRIPES = 64
# Looks at a topic's config after its new logs were made (_settle_new_logs_config): each
# one past the first follows a config change made meanwhile, so a few are plenty.
_SETTLE_ROUNDS = 8


class RejectedRecords(str):
    """The error message of a produce refused for some of its records (Kafka 2.8's
    RecordValidationException), with each record's RecordError: ``(batch index,
    message)``, which a Produce answer of version 8 and up lists (``record_errors``)."""

    record_errors: tuple[tuple[int, str], ...]

    def __new__(cls, message: str, record_errors: Iterable[tuple[int, str]]) -> RejectedRecords:
        self = super().__new__(cls, message)
        self.record_errors = tuple(record_errors)
        return self


@dataclass(slots=True)
class _IsrIntent:
    """What a leader wants done to one partition's ISR; merged until the writer runs, so
    two expansions decided while a write is in flight cannot overwrite each other.

    Replica ids and reasons are shared tuples, not a set and a list each: when followers
    of 100,000 partitions catch up at once (a cold start), every partition has an intent
    waiting, ~660 bytes each that way (66 MB, made while the followers' state was, and
    left as holes in the heap) against ~70 here."""

    partition: Partition
    add: tuple[int, ...] = ()
    remove: tuple[int, ...] = ()
    why: tuple[str, ...] = ()

    def merge(self, *, add: int | None = None, remove: int | None = None, why: str) -> None:
        """The latest word on a replica wins; each reason is kept once, in order."""
        if add is not None:
            self.add = _with(self.add, add)
            self.remove = _without(self.remove, add)
        if remove is not None:
            self.remove = _with(self.remove, remove)
            self.add = _without(self.add, remove)
        if why not in self.why:
            self.why = _SHARED_REASONS((*self.why, why))


# A handful of distinct reasons ("replica 2 caught up") and combinations of them.
_SHARED_REASONS: SharedValues[tuple[str, ...]] = SharedValues(10_000)


def _with(ids: tuple[int, ...], replica: int) -> tuple[int, ...]:
    return ids if replica in ids else shared_ints((*ids, replica))


def _without(ids: tuple[int, ...], replica: int) -> tuple[int, ...]:
    return shared_ints(r for r in ids if r != replica) if replica in ids else ids


@dataclass(slots=True)
class FollowerState:
    """What a leader knows of one follower: its log end (the offset it fetches from) and
    when it was last caught up (Kafka's rule: at the leader's log end, or at least where
    the leader's log ended when the follower fetched before)."""

    fetch_offset: int = -1
    last_fetch_ms: int = 0
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = 0
    # The session it fetches this partition in: while its position equals the leader's
    # log end, it was caught up at the session's last fetch (see caught_up_ms).
    clock: FetchClock | None = None

    def caught_up_ms(self, leader_leo: int) -> int:
        """When it was last caught up, counting the session's fetch rounds that did not
        list this partition (its position unchanged) as Kafka counts every fetch."""
        clock = self.clock
        if (
            clock is not None
            and clock.ms > self.last_caught_up_ms
            and self.fetch_offset >= leader_leo
        ):
            return clock.ms
        return self.last_caught_up_ms

    def settle(self, leader_leo: int) -> None:
        """Called before the leader's log end moves past ``leader_leo``: fix the caught-up
        time the session's rounds implied, before they stop implying it."""
        self.last_caught_up_ms = self.caught_up_ms(leader_leo)

    def record_fetch(
        self, fetch_offset: int, leader_leo: int, now_ms: int, clock: FetchClock | None
    ) -> bool:
        """A fetch from ``fetch_offset`` while the leader's log ends at ``leader_leo``
        (Kafka's updateFollowerFetchState); returns whether the position moved."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = now_ms
        elif fetch_offset >= self.last_fetch_leader_leo:
            # At least where the log ended at the previous fetch: caught up as of that one.
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        if clock is not None:
            self.clock = clock
        moved = fetch_offset != self.fetch_offset
        self.fetch_offset = fetch_offset
        self.last_fetch_ms = now_ms
        self.last_fetch_leader_leo = leader_leo
        return moved


class Followers(Mapping[int, FollowerState]):
    """A leader's followers of one partition, by broker id, kept as two tuples: a leader
    of 100,000 partitions holds one of these each, and a dict of two costs ~200 bytes."""

    __slots__ = ("_ids", "_states")

    def __init__(self, ids: tuple[int, ...], states: tuple[FollowerState, ...]) -> None:
        self._ids = ids
        self._states = states

    def __getitem__(self, broker_id: int) -> FollowerState:
        try:
            return self._states[self._ids.index(broker_id)]
        except ValueError:
            raise KeyError(broker_id) from None

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, broker_id: object) -> bool:
        return broker_id in self._ids

    def get(  # type: ignore[override]  # one signature for Mapping.get's two overloads
        self, broker_id: int, default: FollowerState | None = None
    ) -> FollowerState | None:
        """As Mapping.get, in one frame and without a KeyError made for a miss: called per
        partition of every fetch round."""
        try:
            return self._states[self._ids.index(broker_id)]
        except ValueError:
            return default

    def pairs(self) -> Iterator[tuple[int, FollowerState]]:
        """(broker id, state) of each follower, from the two tuples directly."""
        return zip(self._ids, self._states, strict=True)

    def __repr__(self) -> str:
        return f"Followers({dict(zip(self._ids, self._states, strict=True))!r})"


NO_FOLLOWERS = Followers((), ())


@dataclass(slots=True)
class Partition:
    topic_partition: TopicPartition
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int  # of the controller whose decision made this leader
    # Leader only; a follower's partition shares one empty mapping (no dict each).
    followers: Followers = field(default_factory=lambda: NO_FOLLOWERS)
    # Set when our ISR write found the partition moved on: wait for the next LeaderAndIsr.
    # Its high watermark stays where it is until then (the ISR may be other than ours).
    stale: bool = False
    # Stale only because the write found a newer leader epoch with this broker still the
    # leader (the controller took a replica out, say): the next LeaderAndIsr most likely
    # keeps it leading, so producers waiting for acks=all wait for it (Kafka's
    # DelayedProduce does: its leader has only given up on the ISR change).
    moved_on: bool = False
    # The zkVersion of the newer state (another leader epoch) our ISR write found stored,
    # -1 if none: a LeaderAndIsr of our own epoch is then older than ZooKeeper's state.
    found_zk_version: int = -1
    log: PartitionLog | None = None
    # As leader: where this leader epoch began (a follower joins the ISR only past it).
    epoch_start_offset: int = 0
    # As leader: replicas whose addition to the ISR is asked for and not yet known written
    # or refused (queued, in flight, or lost to a ZooKeeper blip: written perhaps). The
    # high watermark waits for them too, as for Kafka's "maximal ISR" while an expansion
    # is pending: ZooKeeper may already name one in the ISR, and a controller may elect it.
    isr_adding: tuple[int, ...] = ()

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset if self.log is not None else 0

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log is not None else 0

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset if self.log is not None else 0


Become = Callable[[list[Partition], list[Partition]], None]


_EMPTY_PARTITION_LIST_BYTES = len(encode_partition_list(()))


def stale_takes_its_epoch_again(held_zk_version: int, found_zk_version: int, offered: int) -> bool:
    """Whether a stale partition takes a LeaderAndIsr state of the leader epoch it holds,
    whose zkVersion (partition epoch) is ``offered``.

    A StopReplica of the epoch a partition holds stops it (Kafka ignores one), so a new
    controller's resend of that epoch must restart it: taken if no older than the state
    held (its leader may have written the ISR since). One older than a state this broker
    held, or than the newer state its ISR write found stored, is a delayed repeat (a
    failover's resend read before that write): applied, it would take back an ISR
    ZooKeeper no longer holds, and the high watermark could pass a replica ZooKeeper
    names in the ISR. Kafka 2.8 applies only a newer leader epoch.
    """
    return offered >= held_zk_version and offered > found_zk_version


def isr_notification_chunks(
    changed: Sequence[TopicPartition],
    max_partitions: int = ISR_NOTIFICATION_PARTITIONS,
    max_bytes: int = ISR_NOTIFICATION_BYTES,
) -> list[list[TopicPartition]]:
    """``changed`` cut, in order, into the partitions of each ISR change notification:
    each chunk as long as it can be with at most ``max_partitions`` partitions and an
    encoding (encode_partition_list) of at most ``max_bytes``. A partition's share of the
    encoding is worked out exactly (its topic's once for each run of its partitions)."""
    chunks: list[list[TopicPartition]] = []
    chunk: list[TopicPartition] = []
    size = _EMPTY_PARTITION_LIST_BYTES
    topic: str | None = None
    topic_bytes = 0
    for tp in changed:
        if tp.topic != topic:
            topic = tp.topic
            # The entry of partition 0 (one digit), without the comma between entries.
            topic_bytes = (
                len(encode_partition_list((TopicPartition(topic, 0),)))
                - _EMPTY_PARTITION_LIST_BYTES
                - 1
            )
        entry = topic_bytes + len(str(tp.partition)) + (1 if chunk else 0)
        if chunk and (len(chunk) >= max_partitions or size + entry > max_bytes):
            chunks.append(chunk)
            chunk, size = [], _EMPTY_PARTITION_LIST_BYTES
            entry -= 1  # no comma before the first entry
        chunk.append(tp)
        size += entry
    if chunk:
        chunks.append(chunk)
    return chunks


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        zk: ZkClient,
        state_log: StateChangeLog,
        *,
        replica_lag_time_max_ms: int = 30_000,
        logs: LogManager | None = None,
        topic_config: Callable[[str], TopicConfig] | None = None,
        new_logs_topic_configs: Callable[[Sequence[str]], Mapping[str, TopicConfig]] | None = None,
    ) -> None:
        self.logs = logs
        self.topic_config = topic_config
        # The configs of the topics a LeaderAndIsr makes logs of, read for them at once (one
        # batch, not a ZooKeeper round trip a topic); without it, topic_config's, each.
        self.new_logs_topic_configs = new_logs_topic_configs
        # Whether the cluster's metadata has a partition (set by the server): an unhosted
        # partition it has is NOT_LEADER_OR_FOLLOWER to clients, not unknown.
        self.known_partition: Callable[[TopicPartition], bool] | None = None
        # Producers waiting for acks=all wait on this; a high watermark moving wakes them.
        self.replicated = threading.Condition()
        # Called (outside locks) when data or partition state moved (True) or only a high
        # watermark (False), with the partitions concerned (None: unknown): long-polling
        # fetches (followers wait for data, not for a high watermark).
        self.on_data: Callable[[bool, Collection[TopicPartition] | None], None] | None = None
        self.broker_id = broker_id
        self.zk = zk
        self.state_log = state_log
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.controller_epoch = -1  # the highest controller epoch this broker has seen
        self._lock = threading.RLock()
        # Held by each controller request's whole change of partition state here
        # (LeaderAndIsr, StopReplica, the deletion of a deleted topic's orphaned logs) and
        # by a failed log directory's taking offline, and by nothing else (Kafka's
        # replicaStateChangeLock): they apply one at a time, so a LeaderAndIsr never
        # makes a partition's log while a StopReplica is deleting it, and their fetcher
        # changes go in their order. Taken before _lock, never under
        # it: the log work done under it (deletions, which wait for a cleaning of the
        # log to stop) blocks no produce or fetch.
        self._state_change_lock = threading.RLock()
        # A partition's follower appends and truncations, and its change of state, hold
        # its stripe: a fetch answer from a leader this broker no longer follows (it was
        # in flight while a LeaderAndIsr moved the partition on) is then dropped, never
        # applied to a log that now leads or follows another leader. Striped, not one lock
        # per partition: a broker holds 100,000s of partitions.
        self._follower_locks = tuple(threading.Lock() for _ in range(_FOLLOWER_LOCK_STRIPES))
        self.partitions: dict[TopicPartition, Partition] = {}
        self._isr_intents: dict[TopicPartition, _IsrIntent] = {}
        # What the ISR expiry scan reads: every change that may leave a follower of a
        # partition led here behind (a new leadership, an append, a fetch) watches it.
        self._isr_expiry = IsrExpiry()
        # Partitions whose last ISR write went out in a round that failed (a lost
        # connection): it may have landed unanswered, so the next round reads their state
        # before deciding anything about them (Kafka's client re-sends the same write).
        self._isr_unsure: dict[TopicPartition, Partition] = {}
        # Partitions whose ISR write landed in a round that then failed: the ISR writer's
        # next change notification names them (no later round finds them changed).
        self._isr_changed_unannounced: set[TopicPartition] = set()
        self._changes = 0  # bumped whenever leadership or staleness may have changed
        self._counted_at = -1
        self._leader_count = 0
        self._isr_cond = threading.Condition(self._lock)
        self._closed = False
        self._closed_event = threading.Event()
        # Kafka's HostedPartition.Offline: partitions whose log directory failed, until
        # the broker restarts. Not in ``partitions``; read without the lock (a dict only
        # added to, under it): empty (falsy) while every log directory is online.
        self.offline_partitions: dict[TopicPartition, None] = {}
        # Partitions that are not new whose log this broker made empty (it had lost it:
        # new disks): it does not lead them while the ISR lists others, until it has
        # caught up with a leader or led them (as the ISR's only member; see
        # _would_lead_without_its_log).
        self._lost_logs: set[TopicPartition] = set()
        # Taken by every change of _lost_logs (they come from the request handler, under
        # _lock or before it, and from the fetcher, under a follower lock), so that one
        # emptying it can give its table back without losing another's add.
        self._lost_logs_lock = threading.Lock()
        # Called with the log directories when none is online any more (default: halt
        # the process with exit status 1, as Kafka does); the server's closes the
        # ZooKeeper session first, so the controller hears of it at once.
        self.on_all_log_dirs_failed: Callable[[list[str]], None] | None = None
        self._dir_failure_handler = threading.Thread(
            target=self._handle_log_dir_failures, name="log-dir-failure-handler", daemon=True
        )
        # Called (outside the lock) with partitions that became leaders and followers.
        self.on_become: Become | None = None
        self.on_stop: Callable[[list[TopicPartition], bool], None] | None = None
        # Called (outside the lock) with a StopReplica's partitions before their logs are
        # deleted: the server's fetchers let go of them first.
        self.on_stopping: Callable[[list[TopicPartition]], None] | None = None
        self._propagator = threading.Thread(target=self._isr_writer, name="isr-writer", daemon=True)

    def start(self) -> None:
        self._propagator.start()
        if self.logs is not None:
            self._dir_failure_handler.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._closed_event.set()
            self._isr_cond.notify_all()

    # --- controller epoch ---------------------------------------------------------------

    def check_controller_epoch(self, epoch: int) -> bool:
        """True (and remember it) unless `epoch` is older than one already seen."""
        with self._lock:
            if epoch < self.controller_epoch:
                return False
            self.controller_epoch = epoch
            return True

    # --- LeaderAndIsr -------------------------------------------------------------------

    def _settle_new_logs_config(self, topic: str, used: TopicConfig) -> None:
        """Logs of ``topic`` just made with ``used`` take the topic's config as it is now if
        it changed meanwhile: a change notification applied while they were being made
        reached only the logs there then, and these would keep the config read before it
        for good (Kafka's LogManager re-reads the config of the logs it was initializing,
        KAFKA-8813). The broker keeps a topic's new config before it applies it to the
        topic's logs, so looking again until the config read is the one last applied
        here leaves no change behind, whichever order the two threads go in."""
        topic_config, logs = self.topic_config, self.logs
        if topic_config is None or logs is None:
            return
        applied = used
        for _ in range(_SETTLE_ROUNDS):
            current = topic_config(topic)
            if current is applied or current == applied:
                return
            logs.update_topic_config(topic, current)
            log.info("topic %s: its config changed while its logs were made; applied", topic)
            applied = current

    def _new_logs_configs(self, topics: Sequence[str]) -> Mapping[str, TopicConfig]:
        """The configs to make these topics' new logs with (none known: the defaults)."""
        if not topics:
            return {}
        if self.new_logs_topic_configs is not None:
            return self.new_logs_topic_configs(topics)
        if self.topic_config is not None:
            return {topic: self.topic_config(topic) for topic in topics}
        return {}

    def become_leader_or_follower(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._state_change_lock:
            return self._become_leader_or_follower(request)

    def _become_leader_or_follower(self, request: dict[str, Any]) -> dict[str, Any]:
        controller_id = request["controller_id"]
        controller_epoch = request["controller_epoch"]
        topics_out = []
        rows: list[LeaderAndIsrRow] = []
        leaders: list[Partition] = []
        followers: list[Partition] = []
        taken_offline: list[TopicPartition] = []  # hosted ones that went offline
        # One TopicPartition per partition for the logs, the partitions and whatever keys
        # on them (a broker holds 100,000s): the one already in use, else a new one. (Read
        # without the lock: only the key object, and whether it has a log, are taken.)
        # Per topic: (partition, its state, whether its log may be missing).
        topics: list[list[tuple[TopicPartition, dict[str, Any], bool]]] = []
        if self.logs is not None and controller_epoch >= self.controller_epoch:
            self._set_aside_earlier_incarnations(request["topic_states"])
        known = self.partitions.get
        for topic_state in request["topic_states"]:
            topic = topic_state["topic_name"]
            entries = []
            for ps in topic_state["partition_states"]:
                tp = TopicPartition(topic, ps["partition_index"])
                current = known(tp)
                if current is None:
                    # Kept for good, as the partition's key: one int for its index.
                    entries.append((TopicPartition(topic, shared_index(tp.partition)), ps, True))
                else:
                    entries.append((current.topic_partition, ps, current.log is None))
            topics.append(entries)
        if self.logs is not None and controller_epoch >= self.controller_epoch:
            # Create the new partitions' logs before taking the lock (files and folders:
            # seconds for thousands), so produce and fetch go on meanwhile.
            to_make: list[tuple[str, Any, list[tuple[TopicPartition, dict[str, Any]]]]] = []
            for topic_state, entries in zip(request["topic_states"], topics, strict=True):
                missing = [
                    (tp, ps)
                    for tp, ps, maybe_missing in entries
                    if maybe_missing
                    # not a replica here: answered UNKNOWN_TOPIC_OR_PARTITION below
                    and self.broker_id in ps["replicas"]
                    and tp not in self.logs
                    # answered KAFKA_STORAGE_ERROR below
                    and not (self.offline_partitions and tp in self.offline_partitions)
                    # answered REPLICA_NOT_AVAILABLE below
                    and not self._would_lead_without_its_log(ps)
                ]
                if missing:
                    to_make.append(
                        (topic_state["topic_name"], topic_state.get("topic_id"), missing)
                    )
            configs = self._new_logs_configs([topic for topic, _, _ in to_make])
            for topic, new_topic_id, missing in to_make:
                config = configs.get(topic)
                made = False
                for tp, ps in missing:
                    if tp not in self.logs:
                        try:
                            self.logs.get_or_create(
                                tp,
                                config,
                                sync_dir=False,
                                is_new=ps.get("is_new", False),
                                topic_id=new_topic_id,
                            )
                        except KafkaStorageError:
                            pass  # tried again below, where it is answered
                        else:
                            made = True
                            if not ps.get("is_new", False):
                                self._log_lost(tp)
                if made and config is not None:
                    self._settle_new_logs_config(topic, config)
        with self._lock:
            if controller_epoch < self.controller_epoch:
                self.state_log.request_rejected(
                    "LeaderAndIsr",
                    controller_id,
                    controller_epoch,
                    request.get("broker_epoch", -1),
                    "STALE_CONTROLLER_EPOCH",
                )
                return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "topics": []}
            self.controller_epoch = controller_epoch
            self._changes += 1
            me, apply = self.broker_id, self._apply_partition_state
            # One int for the request's new leaders' followers, not one per partition (a
            # broker taking 100,000 leaderships holds each until the follower fetches).
            now_ms = _now_ms()
            for topic_state, entries in zip(request["topic_states"], topics, strict=True):
                topic = topic_state["topic_name"]
                topic_id = topic_state.get("topic_id") or uuid.UUID(int=0)
                errors = []
                for tp, ps, _ in entries:
                    current = known(tp)
                    if (
                        current is not None
                        and not current.stale
                        and ps["leader_epoch"] == current.leader_epoch
                        and me in ps["replicas"]
                    ):
                        # A repeat (a new controller resends every partition at failover):
                        # nothing changes, nothing to log.
                        errors.append({"partition_index": tp.partition, "error_code": 0})
                        continue
                    error, applied = apply(tp, current, topic_id, ps, taken_offline, now_ms)
                    errors.append({"partition_index": tp.partition, "error_code": int(error)})
                    if applied is not None:
                        (leaders if applied.leader == me else followers).append(applied)
                        rows.append(
                            LeaderAndIsrRow(
                                topic,
                                tp.partition,
                                applied.leader,
                                applied.leader_epoch,
                                applied.isr,
                                applied.replicas,
                                controller_id,
                                controller_epoch,
                                "applied",
                                None,
                            )
                        )
                    elif error != ErrorCode.NONE:
                        rows.append(
                            LeaderAndIsrRow.of_request(
                                topic, ps, controller_id, controller_epoch, error.name
                            )
                        )
                topics_out.append({"topic_id": topic_id, "partition_errors": errors})
        if self.logs is not None:
            # New partitions' folders are durable before the controller hears they exist.
            self.logs.sync_new_dirs()
            self.logs.write_topic_ids()
        self.state_log.leader_and_isr(rows)
        if taken_offline:
            # As the failure handler's: the fetchers drop them, their waiters answer.
            if self.on_stop is not None:
                self.on_stop(taken_offline, False)
            self._notify_progress(taken_offline)
        if leaders or followers:
            # Fetches waiting on these answer or look again (only a change can give a
            # waiting fetch something to say).
            self._notify_progress([p.topic_partition for p in (*leaders, *followers)])
            if self.on_become is not None:
                self.on_become(leaders, followers)
        return {"error_code": 0, "topics": topics_out}

    def delete_orphaned_logs(self, topics: Collection[str]) -> list[TopicPartition]:
        """An UpdateMetadata marked these topics deleted: delete their logs here that no
        partition state holds. The controller's StopReplicas delete the replicas the
        topic has; a log of a replica moved off this broker while it was away (its
        StopReplica never came) is none of them, and would stay for good."""
        if self.logs is None:
            return []
        with self._state_change_lock:  # no LeaderAndIsr makes one of them meanwhile
            return self._delete_orphaned_logs(self.logs, topics)

    def _delete_orphaned_logs(
        self, logs: LogManager, topics: Collection[str]
    ) -> list[TopicPartition]:
        wanted = set(topics)
        held = logs.partitions_of(wanted)
        with self._lock:
            orphans = [tp for tp in held if tp not in self.partitions]
        deleted, failed = logs.delete_many(orphans)
        for tp, e in failed.items():
            log.error("deleting the orphaned log of %s: %s", tp, e)
        # A directory left with no log of these topics forgets their ids.
        logs.forget_topic_ids(wanted)
        logs.write_topic_ids()
        if deleted:
            log.warning(
                "deleted the logs of %s: their topics are being deleted and no replica here"
                " holds them (moved off this broker while it was away)",
                sorted(deleted),
            )
        return deleted

    def _set_aside_earlier_incarnations(self, topic_states: list[dict[str, Any]]) -> None:
        """Logs of an earlier incarnation of a topic the request names by another id (the
        topic was deleted while this broker was away, so it never got the StopReplica,
        and was created again) are set aside, and any state of them dropped: the new
        topic's partitions start from empty logs here, as everywhere else. Kafka 2.8
        answers INCONSISTENT_TOPIC_ID and leaves the replica unusable; before topic ids,
        the new topic served the old one's records."""
        assert self.logs is not None
        earlier: list[TopicPartition] = []
        for topic_state in topic_states:
            topic_id = topic_state.get("topic_id")
            if topic_id is not None and topic_id.int != 0:
                earlier += self.logs.claim_topic(topic_state["topic_name"], topic_id)
        if not earlier:
            return
        with self._lock:
            for tp in earlier:
                with self._follower_lock(tp):
                    self.partitions.pop(tp, None)
        set_aside, failed = self.logs.set_aside_many(earlier)
        for tp, e in failed.items():
            log.error("the log of %s is of an earlier incarnation of its topic: %s", tp, e)
        for tp, where in set_aside.items():
            log.warning(
                "the log of %s is of an earlier incarnation of topic %s (deleted while this"
                " broker was away): set aside as %s",
                tp,
                tp.topic,
                where,
            )
        self._notify_progress(earlier)  # fetches of these get an error
        if self.on_stop is not None:
            self.on_stop(earlier, True)

    def _log_lost(self, tp: TopicPartition) -> None:
        """``tp``'s log was made empty here though the partition is not new."""
        with self._lost_logs_lock:
            self._lost_logs.add(tp)

    def _log_found(self, tp: TopicPartition) -> None:
        """``tp``'s log holds what the ISR acknowledged (or it leads with it): no longer
        lost. The set emptied gives back its table: a set never shrinks, and a broker back
        on new disks with 100,000 partitions kept 4 MiB for none."""
        with self._lost_logs_lock:
            lost = self._lost_logs
            lost.discard(tp)
            if not lost:
                lost.clear()  # an empty set's clear() frees the table, changing nothing else

    def _apply_partition_state(
        self,
        tp: TopicPartition,
        current: Partition | None,
        topic_id: uuid.UUID,
        ps: dict[str, Any],
        taken_offline: list[TopicPartition],
        now_ms: int,
    ) -> tuple[ErrorCode, Partition | None]:
        """The fencing of one partition state; returns the error and the applied partition.

        An equal leader epoch is a repeat (a new controller resends every partition at
        failover): not an error worth logging, and nothing changes. A stale partition
        takes one again when ``stale_takes_its_epoch_again`` says so. A partition whose
        log cannot be had for a failed directory goes offline (a hosted one is added to
        ``taken_offline``, for the caller to stop its fetcher outside the lock).
        ``current``: the partition's state held (``partitions``), looked up by the caller.
        """
        # An offline partition is never in ``partitions``: hosted ones skip the check.
        if current is None and self.offline_partitions and tp in self.offline_partitions:
            log.warning("LeaderAndIsr for %s refused: its log directory is offline", tp)
            return ErrorCode.KAFKA_STORAGE_ERROR, None
        me = self.broker_id
        replicas = shared_ints(ps["replicas"])
        if me not in replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        epoch = ps["leader_epoch"]
        if current is not None and not current.stale:
            if epoch < current.leader_epoch:
                return ErrorCode.STALE_CONTROLLER_EPOCH, None
            if epoch == current.leader_epoch:
                return ErrorCode.NONE, None
        if current is not None and current.stale:
            if epoch < current.leader_epoch:
                return ErrorCode.STALE_CONTROLLER_EPOCH, None
            if epoch == current.leader_epoch and not stale_takes_its_epoch_again(
                current.zk_version, current.found_zk_version, ps.get("partition_epoch", 0)
            ):
                return ErrorCode.NONE, None  # a repeat, as for a partition not stale
        partition = Partition(
            tp,
            topic_id,
            ps["leader"],
            epoch,
            shared_ints(ps["isr"]),
            replicas,
            ps.get("partition_epoch", 0),
            ps["controller_epoch"],
        )
        if self.logs is not None:
            # Nearly always there already (made above, or long ago): looked up without the
            # log manager's lock, which a broker loss would take 10,000s of times.
            existing = self.logs.get_log(tp)
            lost = self._lost_logs  # nearly always empty: no cost per partition then
            if lost and ps.get("is_new", False):
                self._log_found(tp)
            if (
                lost
                and current is not None
                and self.broker_id not in current.isr
                and self.broker_id in ps["isr"]
                and tp in lost
            ):
                # Taken into the ISR since it began following with the log made empty: its
                # leader saw it reach the high watermark (Kafka's maybeExpandIsr). Its own
                # fetch answer may not have told it yet: on an idle partition the leader
                # holds it up to replica.fetch.wait.max.ms, and a preferred election right
                # after the ISR change was refused, the leadership bounced back.
                self._log_found(tp)
            if (existing is None or (lost and tp in lost)) and self._would_lead_without_its_log(ps):
                log.error(
                    "LeaderAndIsr for %s refused: told to lead at leader epoch %d, this broker"
                    " has no log of it (new disks?) while the ISR %s lists others that may"
                    " hold its records",
                    tp,
                    epoch,
                    list(ps["isr"]),
                )
                return ErrorCode.REPLICA_NOT_AVAILABLE, None
            if existing is None:
                config = self.topic_config(tp.topic) if self.topic_config is not None else None
                try:
                    existing = self.logs.get_or_create(
                        tp,
                        config,
                        sync_dir=False,
                        is_new=ps.get("is_new", False),
                        topic_id=topic_id,
                    )
                    if not ps.get("is_new", False):
                        self._log_lost(tp)
                except KafkaStorageError as e:
                    # Not new while a log directory is offline (its log may be there), or
                    # its creation failed: Kafka's makeLeaders/makeFollowers answer so,
                    # and becomeLeaderOrFollower marks it offline (no local log) until
                    # the broker restarts. Else a later LeaderAndIsr sending it as new
                    # would make a second, empty log of it in a healthy directory.
                    log.error("LeaderAndIsr for %s refused: %s", tp, e)
                    if self._mark_offline(tp):
                        taken_offline.append(tp)
                    return ErrorCode.KAFKA_STORAGE_ERROR, None
                if config is not None:
                    self._settle_new_logs_config(tp.topic, config)
            elif (
                current is None
                and self.logs.offline_dirs
                and existing.log_dir in self.logs.offline_dirs
            ):
                # Its directory failed and the failure handler has not taken it yet (a
                # hosted partition is: the handler takes those it finds hosted).
                self._mark_offline(tp)
                log.warning("LeaderAndIsr for %s refused: its log directory is offline", tp)
                return ErrorCode.KAFKA_STORAGE_ERROR, None
            partition.log = existing
        elif current is not None:
            partition.log = current.log
        leads = partition.leader == me
        if leads:
            # A new leader gives every follower a fresh lag allowance (as Kafka does), as of
            # the request's apply.
            isr = partition.isr
            ids = shared_ints([r for r in replicas if r != me])
            partition.followers = Followers(
                ids,
                tuple([FollowerState(last_caught_up_ms=now_ms if r in isr else 0) for r in ids]),
            )
        with self._follower_locks[hash(tp) % _FOLLOWER_LOCK_STRIPES]:  # _follower_lock's
            # No follower append or truncation is under way, and none for the state
            # replaced can start after this.
            if leads and partition.log is not None:
                # A new leader's epoch starts at its log end (KIP-101): followers that
                # diverged truncate to it, and none joins the ISR before reaching it.
                partition.epoch_start_offset = partition.log.log_end_offset
                partition.log.assign_epoch_start_offset(epoch, partition.epoch_start_offset)
            self.partitions[tp] = partition
        if leads:
            self._isr_expiry.watch(partition)
        if leads and self._lost_logs:
            # It leads with this log now (it passed _would_lead_without_its_log): what is
            # acknowledged from here on is in it, and the ISR's others take their records
            # from it. Kept, a later leader epoch for it (a follower lost, a reassignment)
            # would be refused as if its log were still the emptied one.
            self._log_found(tp)
        # An ISR of the leader alone puts the high watermark at its log end now (Kafka's
        # makeLeader does so), not at the next produce: after a restart the checkpointed
        # one may lag, and every acknowledged record above it would stay unreadable.
        # Looked at only then: a follower's never moves, and any other ISR member of a new
        # leadership has not fetched yet (its fetch offset -1 holds the high watermark).
        isr = partition.isr
        if leads and isr.count(me) == len(isr):
            self._maybe_increment_high_watermark(partition)
        return ErrorCode.NONE, partition

    def _would_lead_without_its_log(self, ps: Mapping[str, Any]) -> bool:
        """A partition state (of a partition whose log this broker does not have, or made
        empty and has not caught up since) that would make it the leader of a partition
        that is not new while the ISR lists other replicas: it lost the log (came back on
        new disks, or its directory was emptied), and leading with an empty or partial one
        would have those replicas truncate to it, losing what was acknowledged. Refused
        (REPLICA_NOT_AVAILABLE): the controller hands the leadership to another ISR
        member and sends this broker the state as a follower. Kafka 2.8 creates the empty
        log and leads; the ISR's only member still does here (nothing better is left)."""
        return (
            ps["leader"] == self.broker_id
            and not ps.get("is_new", False)
            and any(r != self.broker_id for r in ps["isr"])
        )

    def _follower_lock(self, tp: TopicPartition) -> threading.Lock:
        return self._follower_locks[hash(tp) % _FOLLOWER_LOCK_STRIPES]

    def _followed(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> Partition | None:
        """The partition, if this broker follows ``leader_id`` in it at ``leader_epoch``
        (call with its follower lock held)."""
        p = self.partitions.get(tp)
        if (
            p is None
            or p.log is None
            or p.stale
            or p.leader != leader_id
            or p.leader_epoch != leader_epoch
            or leader_id == self.broker_id
        ):
            return None
        return p

    # --- StopReplica --------------------------------------------------------------------

    def stop_replicas(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._state_change_lock:
            return self._stop_replicas(request)

    def _stop_replicas(self, request: dict[str, Any]) -> dict[str, Any]:
        controller_id = request["controller_id"]
        controller_epoch = request["controller_epoch"]
        with self._lock:
            if controller_epoch < self.controller_epoch:
                self.state_log.request_rejected(
                    "StopReplica",
                    controller_id,
                    controller_epoch,
                    request.get("broker_epoch", -1),
                    "STALE_CONTROLLER_EPOCH",
                )
                return {"error_code": int(ErrorCode.STALE_CONTROLLER_EPOCH), "partition_errors": []}
            self.controller_epoch = controller_epoch
            self._changes += 1
            errors = PartitionErrors()
            stopped: list[TopicPartition] = []
            deleted: list[TopicPartition] = []
            for topic_state in request.get("topic_states", []):
                for ps in topic_state["partition_states"]:
                    tp = TopicPartition(topic_state["topic_name"], ps["partition_index"])
                    if self.offline_partitions and tp in self.offline_partitions:
                        log.warning(
                            "StopReplica (delete=%s) of %s refused: its log directory is offline",
                            bool(ps.get("delete_partition")),
                            tp,
                        )
                        errors.add(tp, int(ErrorCode.KAFKA_STORAGE_ERROR))
                        continue
                    current = self.partitions.get(tp)
                    if current is not None:
                        # The partition's own key kept in the lists and answers, the one
                        # just made let go: 6 MiB at 100,000 partitions.
                        tp = current.topic_partition
                    epoch = ps.get("leader_epoch", -1)
                    # -1: no epoch given; -2: a topic deletion's, which always applies.
                    # An older epoch is a request overtaken (a late copy of a
                    # reassignment's delete after the replica came back, say): fenced.
                    if current is not None and epoch >= 0 and epoch < current.leader_epoch:
                        log.warning(
                            "StopReplica (delete=%s) of %s ignored: its leader epoch %d is"
                            " older than the current %d",
                            bool(ps.get("delete_partition")),
                            tp,
                            epoch,
                            current.leader_epoch,
                        )
                        errors.add(tp, int(ErrorCode.FENCED_LEADER_EPOCH))
                        continue
                    if ps.get("delete_partition"):
                        # Gone from the partitions, under its follower lock, before its
                        # log is deleted: no produce, fetch or follower append (a fetch
                        # answer in flight is dropped) reaches the log from now on.
                        with self._follower_lock(tp):
                            self.partitions.pop(tp, None)
                        deleted.append(tp)
                    elif current is not None:
                        # Stop replicating; keep the epoch so older states stay refused.
                        with self._follower_lock(tp):
                            current.stale = True
                            current.moved_on = False  # a real loss: its waiters answer
                        current.followers = NO_FOLLOWERS
                        stopped.append(tp)
                    errors.add(tp)
        if (stopped or deleted) and self.on_stopping is not None:
            # Kafka's stopReplicas stops the fetchers first. After the logs' deletion (a
            # StopReplica of 100,000 renames them for seconds) the followers went on
            # fetching them from leaders that had deleted them already, each round answered
            # an error a partition: a third of the controller's CPU in a py-spy profile of
            # a 100K deletion went to those fetches, served and made.
            self.on_stopping([*stopped, *deleted])
        if deleted and self.logs is not None:
            # Not under self._lock, which every produce and fetch takes: a deletion waits
            # for a cleaning of the log to stop (LogCleaner.forget_many). The state change lock
            # held keeps any LeaderAndIsr from making the partition's log meanwhile.
            # All of them at once: each log directory's checkpoints written once.
            _, failed = self.logs.delete_many(deleted)
            if failed:
                for position in errors.set_error(failed, int(ErrorCode.KAFKA_STORAGE_ERROR)):
                    tp = errors.partition(position)
                    log.error("StopReplica of %s: %s", tp, failed[tp])
            # A directory left with no log of a topic forgets its id.
            self.logs.forget_topic_ids({tp.topic for tp in deleted})
            self.logs.write_topic_ids()
        if stopped or deleted:
            self._notify_progress([*stopped, *deleted])  # fetches of these get an error
        if self.on_stop is not None:
            if stopped:
                self.on_stop(stopped, False)
            if deleted:
                self.on_stop(deleted, True)
        return {"error_code": 0, "partition_errors": errors}

    # --- leader: follower fetches and the ISR ---------------------------------------------

    def leader_partition(
        self, tp: TopicPartition, current_leader_epoch: int, leader_only: bool = True
    ) -> tuple[ErrorCode, Partition | None]:
        """The partition if this broker leads it (or, not ``leader_only``, hosts it) at
        that epoch (-1: any epoch).

        The epoch is checked first, a follower's included (Kafka 2.8's
        Partition.getLocalLog): an older one is FENCED_LEADER_EPOCH, a newer one
        UNKNOWN_LEADER_EPOCH, and only then is a follower NOT_LEADER_OR_FOLLOWER. A
        stale partition (stopped, or waiting for the controller) is that whatever the
        epoch, as for one Kafka no longer hosts."""
        with self._lock:
            p = self.partitions.get(tp)
            if p is not None:
                if p.stale:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
                if current_leader_epoch >= 0:
                    if current_leader_epoch < p.leader_epoch:
                        return ErrorCode.FENCED_LEADER_EPOCH, None
                    if current_leader_epoch > p.leader_epoch:
                        return ErrorCode.UNKNOWN_LEADER_EPOCH, None
                if leader_only and p.leader != self.broker_id:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
                return ErrorCode.NONE, p
            if self.offline_partitions and tp in self.offline_partitions:
                return ErrorCode.KAFKA_STORAGE_ERROR, None
        # A partition the cluster has but this broker does not host (a reassignment moved
        # it away, say) sends the client to refresh its metadata, as Kafka's
        # getPartitionOrError does; only a partition nobody knows is unknown.
        if self._is_known(tp):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None

    def _is_known(self, tp: TopicPartition) -> bool:
        """Whether the cluster's metadata here lists the partition."""
        known = self.known_partition
        return known is not None and known(tp)

    def record_follower_fetch(self, p: Partition, replica_id: int, fetch_offset: int) -> None:
        """Note a follower's fetch; add it to the ISR once caught up (leader only)."""
        self.record_follower_fetches(replica_id, [(p, fetch_offset)])

    def record_follower_fetches(
        self,
        replica_id: int,
        fetches: Iterable[tuple[Partition, int]],
        clock: FetchClock | None = None,
    ) -> None:
        """Note where a follower fetched from (its log end) in partitions of one fetch
        round, with one clock reading and one lock for all of them: add it to the ISR once
        caught up, and advance high watermarks its progress allows (waking producers
        waiting for acks=all and consumers waiting for data). With a session's ``clock``,
        the round also counts for the session's partitions not listed here."""
        now = _now_ms()
        if clock is not None:
            clock.ms = now
        expand: list[Partition] = []
        advanced: list[TopicPartition] = []
        with self._lock:
            for p, fetch_offset in fetches:
                state = p.followers.get(replica_id)
                if state is None:
                    continue  # not a replica of this partition
                if not p.log_start_offset <= fetch_offset <= p.log_end_offset:
                    # Answered OFFSET_OUT_OF_RANGE: not where the follower is (Kafka skips
                    # a read that failed). Past the log end it has records this leader
                    # lacks, not these: counted, the high watermark passed what it holds.
                    continue
                clock_before = state.clock
                moved = state.record_fetch(fetch_offset, p.log_end_offset, now, clock)
                if fetch_offset < p.log_end_offset or state.clock is not clock_before:
                    self._isr_expiry.watch(p)  # behind, or in another session now
                if p.stale:
                    continue
                # Kafka's rule: caught up to the high watermark and into this leader epoch.
                if (
                    replica_id not in p.isr
                    and fetch_offset >= p.high_watermark
                    and fetch_offset >= p.epoch_start_offset
                ):
                    expand.append(p)
                    if replica_id not in p.isr_adding:
                        # Before the high watermark moves below: from now on it waits for
                        # this replica too (its addition is asked for just after).
                        p.isr_adding = shared_ints((*p.isr_adding, replica_id))
                if moved and self._maybe_increment_high_watermark(p):
                    advanced.append(p.topic_partition)
        if expand:
            self._request_isr_changes(expand, add=replica_id, why=f"replica {replica_id} caught up")
        if advanced:
            self._notify_progress(advanced, data=False)

    def _maybe_increment_high_watermark(self, p: Partition) -> bool:
        """High watermark = the lowest log end over the ISR (the leader's included), the
        replicas being added to it, and the followers caught up within
        replica.lag.time.max.ms (Kafka's maybeIncrementLeaderHW since KAFKA-7128); it only
        ever grows. A follower in the ISR that has not fetched yet holds it back.

        Counting a caught-up follower outside the ISR stops the high watermark short of
        the leader's log end under steady load: the follower, a fetch behind it, reaches
        the high watermark and rejoins the ISR (else it never would, the ISR being the
        leader alone and the high watermark the log end, always one produce ahead)."""
        if (
            p.log is None
            or p.leader != self.broker_id
            or p.stale
            or self.partitions.get(p.topic_partition) is not p
        ):
            # A stale partition's ISR may be other than ours (a controller bump read an
            # expansion of ours that landed unanswered): frozen until the LeaderAndIsr
            # brings the true one, as Kafka's pending ISR state holds it. A replaced one
            # shares its log with the new state: only that one moves it.
            return False
        leo = p.log.log_end_offset
        hw = leo
        if p.followers:
            isr, adding = p.isr, p.isr_adding
            oldest_caught_up = _now_ms() - self.replica_lag_time_max_ms
            for r, state in p.followers.pairs():
                offset = state.fetch_offset
                if offset < hw and (
                    r in isr or r in adding or state.caught_up_ms(leo) >= oldest_caught_up
                ):
                    hw = offset
        for r in itertools.chain(p.isr, p.isr_adding):
            if r != self.broker_id and r not in p.followers:
                hw = -1  # a member this leader has no state of holds it (never the case)
        if hw > p.log.high_watermark:
            p.log.update_high_watermark(hw)
            return True
        return False

    def _notify_progress(
        self, partitions: Collection[TopicPartition] | None, *, data: bool = True
    ) -> None:
        """Wake producers waiting for acks=all, and the long-polling fetches: all of them
        for new data or a state change (`data`), only consumers' for a high watermark;
        `partitions` are the ones that changed (None: unknown)."""
        with self.replicated:
            self.replicated.notify_all()
        if self.on_data is not None:
            self.on_data(data, partitions)

    # --- leader: appends ---------------------------------------------------------------

    @staticmethod
    def min_insync_replicas(partition_log: PartitionLog | None) -> int:
        """A partition's min.insync.replicas: its log's config, in memory, which a config
        change updates as it updates retention (Kafka's leaderLog.config.minInSyncReplicas).
        Never read from ZooKeeper here: an outage would hold acks=all produces past their
        timeout."""
        return 1 if partition_log is None else partition_log.config.min_insync_replicas

    @staticmethod
    def _not_enough_replicas(
        p: Partition,
    ) -> tuple[ErrorCode, Partition | None, AppendInfo | None, str | None]:
        return (
            ErrorCode.NOT_ENOUGH_REPLICAS,
            p,
            None,
            f"ISR {list(p.isr)} is smaller than min.insync.replicas",
        )

    def append_as_leader(
        self, tp: TopicPartition, records: bytearray | None, required_acks: int
    ) -> tuple[ErrorCode, Partition | None, AppendInfo | None, str | None]:
        """A producer's batches, appended by this partition's leader.

        acks=all with an ISR smaller than min.insync.replicas is refused before anything
        is written (NOT_ENOUGH_REPLICAS); an invalid batch is refused whole. No records:
        NONE and no AppendInfo, once those checks pass; null records UNKNOWN_SERVER_ERROR
        (Kafka 2.8's Log.append throws a NullPointerException on them)."""
        error, p = self.leader_partition(tp, -1)
        if p is None or p.log is None:
            return (error if p is None else ErrorCode.KAFKA_STORAGE_ERROR), None, None, None
        if required_acks == -1 and len(p.isr) < self.min_insync_replicas(p.log):
            return self._not_enough_replicas(p)  # before recompressing for nothing
        if records is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR, p, None, None
        if not records:
            # Nothing to append (a Produce v0-v2 of no whole message): Kafka's Log.append
            # returns at once, answered with no error and offset -1.
            return ErrorCode.NONE, p, None, None
        try:
            # Before the lock: recompressing (pure Python for most codecs) takes a while.
            prepared = p.log.recompressed(records)
            # A LeaderAndIsr making this broker a follower, or a StopReplica, changes the
            # partition under this lock: the check and the append are one step, or a batch
            # checked here could land in a follower's log, at offsets the new leader gives
            # other records (Kafka appends under leaderIsrUpdateLock's read lock).
            with self._follower_lock(tp):
                current = self.partitions.get(tp)
                if current is None or current.leader != self.broker_id or current.stale:
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER, None, None, None
                p = current
                if p.log is None:
                    return ErrorCode.KAFKA_STORAGE_ERROR, None, None, None
                # Again: a LeaderAndIsr during the recompression (same leader, new epoch)
                # may have shrunk the ISR; appended anyway, the batch would be answered
                # NOT_ENOUGH_REPLICAS_AFTER_APPEND and sent again (Kafka checks and
                # appends under one leaderIsrUpdateLock read lock).
                if required_acks == -1 and len(p.isr) < self.min_insync_replicas(p.log):
                    return self._not_enough_replicas(p)
                if p.followers:
                    leader_leo = p.log.log_end_offset
                    for state in list(p.followers.values()):
                        state.settle(leader_leo)
                info = p.log.append_as_leader(prepared, p.leader_epoch, recompressed=True)
                if p.followers:
                    self._isr_expiry.watch(p)  # its followers are behind the log end now
        except RecordTooLargeError as e:
            return ErrorCode.MESSAGE_TOO_LARGE, p, None, str(e)
        except RecordBatchTooLargeError as e:
            return ErrorCode.RECORD_LIST_TOO_LARGE, p, None, str(e)
        except UnsupportedMagicError as e:
            return ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, p, None, str(e)
        except InvalidTimestampError as e:
            if e.record_errors:
                # Kafka's processRecordErrors: the records out of range, under its message.
                rejected = RejectedRecords(
                    "One or more records have been rejected due to invalid timestamp",
                    e.record_errors,
                )
                return ErrorCode.INVALID_TIMESTAMP, p, None, rejected
            return ErrorCode.INVALID_TIMESTAMP, p, None, str(e)
        except InvalidRecordError as e:
            if e.keyless:
                # Kafka's LogValidator.validateKey: a RecordError for each record without
                # a key, under processRecordErrors' message.
                why = f"Compacted topic cannot accept message without key in topic partition {tp}."
                rejected = RejectedRecords(
                    "One or more records have been rejected", ((i, why) for i in e.keyless)
                )
                return ErrorCode.INVALID_RECORD, p, None, rejected
            return ErrorCode.INVALID_RECORD, p, None, str(e)
        except DecompressedTooLargeError as e:
            return ErrorCode.MESSAGE_TOO_LARGE, p, None, str(e)
        except (DecompressionError, UnreadableRecordLengthError) as e:
            # Kafka's KafkaException (IllegalArgumentException), answered so by
            # appendToLocalLog's case t: Throwable: a final error, where CORRUPT_MESSAGE
            # has the producer send the batch again.
            return ErrorCode.UNKNOWN_SERVER_ERROR, p, None, str(e)
        except CorruptRecordError as e:
            return ErrorCode.CORRUPT_MESSAGE, p, None, str(e)
        except FencedLeaderEpochError as e:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, p, None, str(e)
        except UnknownCompressionError as e:
            return ErrorCode.UNKNOWN_SERVER_ERROR, p, None, str(e)
        except KafkaStorageError as e:
            # Its log directory is reported (and logged) where the error happened.
            return ErrorCode.KAFKA_STORAGE_ERROR, p, None, str(e)
        except StorageError as e:
            log.exception("append to %s failed", tp)
            return ErrorCode.KAFKA_STORAGE_ERROR, p, None, str(e)
        with self._lock:
            advanced = self._maybe_increment_high_watermark(p)
        if advanced or p.followers:
            self._notify_progress([tp])  # followers' long polls have something to fetch
        return ErrorCode.NONE, p, info, None

    def wait_for_replication(
        self, p: Partition, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        """acks=all: wait until the high watermark passes `required_offset` (every ISR
        member has it); `p` is the partition append_as_leader appended to and returned.
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas
        meanwhile; NOT_LEADER_OR_FOLLOWER if leadership moved (UNKNOWN_TOPIC_OR_PARTITION
        if the partition was deleted and the metadata lists it no more: its topic's
        deletion); REQUEST_TIMED_OUT after the producer's timeout. A partition our ISR
        write found moved on with this broker still its leader (``moved_on``) has not
        lost it: the wait goes on until the next LeaderAndIsr says whether it still leads
        (a StopReplica ends it).

        A new leader epoch with this broker still the leader (the controller bumps it when
        the ISR shrinks, for one) is a new Partition: the wait goes on with it, as Kafka's
        DelayedProduce fails only once the broker no longer leads (it was answered
        NOT_LEADER_OR_FOLLOWER, though the batch got committed, and producers wrote it
        twice). Only while it has the same log, still holding the batch as appended:
        leadership that left and came back between two looks may have truncated and
        rewritten those offsets (their epoch is then a later one)."""
        deadline = time.monotonic() + timeout_s
        tp = p.topic_partition
        appended_epoch = p.leader_epoch  # append_as_leader appends with its partition's
        appended_log = p.log
        with self.replicated:
            while True:
                current = self.partitions.get(tp)
                if (
                    current is not p
                    and current is not None
                    and appended_log is not None
                    and current.log is appended_log
                    and required_offset < appended_log.log_end_offset
                    and appended_log.epoch_cache.epoch_for_offset(required_offset) == appended_epoch
                ):
                    p = current  # whether this broker still leads it is checked next
                if current is not p or (p.stale and not p.moved_on) or p.leader != self.broker_id:
                    if self.offline_partitions and tp in self.offline_partitions:
                        return ErrorCode.KAFKA_STORAGE_ERROR
                    if current is None:
                        break  # deleted here: answered below, out of the lock
                    return ErrorCode.NOT_LEADER_OR_FOLLOWER
                if p.high_watermark > required_offset:
                    # As it is now (Kafka's DelayedProduce reads the log's config each time).
                    if len(p.isr) < self.min_insync_replicas(p.log or appended_log):
                        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                    return ErrorCode.NONE
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return ErrorCode.REQUEST_TIMED_OUT
                self.replicated.wait(min(remaining, 0.5))
        # Kafka's DelayedProduce asks getPartitionOrError: a partition gone from the
        # cluster's metadata too (its topic's deletion) is unknown, as `leader_partition`.
        if self._is_known(tp):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # --- follower: appends and truncation -------------------------------------------------

    def append_as_follower(
        self,
        tp: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        records: memoryview | bytes | None,
        leader_high_watermark: int,
        leader_log_start: int = 0,
    ) -> int | None:
        """Append what leader ``leader_id`` sent for ``leader_epoch``; returns the offset
        to fetch from next, or None if this broker no longer follows that leader at that
        epoch (the answer is stale and nothing is appended). The log start offset follows
        the leader's (Kafka's ReplicaFetcherThread.processPartitionData), up to this log's
        high watermark: what the leader's retention or DeleteRecords removed is not served
        again should this replica lead, and its own retention removes those segments."""
        with self._follower_lock(tp):
            p = self._followed(tp, leader_id, leader_epoch)
            if p is None or p.log is None:
                return None
            if records:
                p.log.append_as_follower(records)
            if self._lost_logs and p.log.log_end_offset >= leader_high_watermark:
                self._log_found(tp)  # caught up: what the ISR acknowledged, it has
            hw = min(leader_high_watermark, p.log.log_end_offset)
            if hw > p.log.high_watermark:
                p.log.update_high_watermark(hw)
            start = min(leader_log_start, p.log.high_watermark)
            if start > p.log.log_start_offset:
                p.log.maybe_increment_log_start_offset(start)
            return p.log.log_end_offset

    def follower_position(self, tp: TopicPartition) -> tuple[int | None, int, int]:
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return None, 0, 0
        return p.log.latest_epoch, p.log.log_end_offset, p.log.high_watermark

    def follower_log_start(self, tp: TopicPartition) -> int:
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return -1
        return p.log.log_start_offset

    def follower_end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        p = self.partitions.get(tp)
        if p is None or p.log is None:
            return -1, -1
        return p.log.end_offset_for_epoch(epoch)

    def truncate(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        """Truncate a follower's log (KIP-101: where it diverged from the leader's), as
        leader ``leader_id`` answered for ``leader_epoch``. Returns the log end afterwards,
        or None if this broker no longer follows that leader at that epoch (nothing is
        cut: a leader's answer can arrive after the partition moved on, even after this
        broker became its leader). What was cut is logged, with how many offsets."""
        with self._follower_lock(tp):
            p = self._followed(tp, leader_id, leader_epoch)
            if p is None or p.log is None:
                return None
            before = p.log.log_end_offset
            # Also at or past the log end: the epochs that start there (with no record:
            # this broker led them and wrote nothing) go, as Kafka's truncateTo drops
            # them, or the next question would name them again.
            truncated = (
                p.log.truncate_to(offset)
                if self.logs is None
                else self.logs.truncate_to(p.log, offset)  # the cleaner's checkpoint too
            )
            if truncated:
                after = p.log.log_end_offset  # a batch straddling ``offset`` went whole
                self._log_truncation(p, before, after, before - after, why)
            return p.log.log_end_offset

    def start_at(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        """A follower whose log lies wholly below its leader's log start (retention there
        deleted what it lacks): empty it and start it at ``offset`` (Kafka's
        truncateFullyAndStartAt). Returns the log end afterwards, or None if this broker no
        longer follows that leader at that epoch."""
        with self._follower_lock(tp):
            p = self._followed(tp, leader_id, leader_epoch)
            if p is None or p.log is None:
                return None
            before, start = p.log.log_end_offset, p.log.log_start_offset
            if offset > before:
                if self.logs is None:
                    p.log.truncate_fully_and_start_at(offset)
                else:  # the cleaner's checkpoint too
                    self.logs.truncate_fully_and_start_at(p.log, offset)
                self._log_truncation(p, before, offset, before - start, why)
            return p.log.log_end_offset

    def _log_truncation(self, p: Partition, before: int, after: int, lost: int, why: str) -> None:
        tp = p.topic_partition
        self.state_log.write(
            "truncated",
            topic=tp.topic,
            partition=tp.partition,
            from_offset=before,
            to_offset=after,
            offsets_lost=lost,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            why=why,
        )

    def checkpoint_truncated(self, tps: Collection[TopicPartition]) -> None:
        """Make the recovery points these truncations moved back durable, before the
        fetcher appends after them (see LogManager.checkpoint_recovery_points_in)."""
        if self.logs is None:
            return
        dirs = {
            p.log.log_dir
            for p in map(self.partitions.get, tps)
            if p is not None and p.log is not None
        }
        if dirs:
            self.logs.checkpoint_recovery_points_in(dirs)

    def maybe_shrink_isr(self) -> None:
        """Drop followers that have not caught up within replica.lag.time.max.ms.

        Only the partitions a follower may have fallen behind in are read
        (broker/isr_expiry.py), and without the lock: at 100,000 partitions a read of
        all of them is a fifth of a second of Python, and every acks=all produce waited
        that long for the lock to move its high watermark. Kafka scans under each
        partition's own lock. A state read while a fetch moves it is at most a round
        old, as the decision is by the time the ISR writer acts on it anyway; the writer
        re-checks that the partition is still this broker's to lead."""
        # By follower: a dead follower lags in every partition it follows here.
        for r, partitions_lagging in self.followers_out_of_sync().items():
            self._request_isr_changes(partitions_lagging, remove=r, why=f"replica {r} fell behind")

    def followers_out_of_sync(self) -> dict[int, list[Partition]]:
        """The partitions led here whose ISR holds a follower not caught up within
        replica.lag.time.max.ms, by follower."""
        return self._isr_expiry.out_of_sync(
            _now_ms(), self.replica_lag_time_max_ms, self.broker_id, self.partitions
        )

    def _request_isr_changes(
        self,
        partitions: Iterable[Partition],
        *,
        add: int | None = None,
        remove: int | None = None,
        why: str,
    ) -> None:
        with self._lock:
            intents = self._isr_intents
            for p in partitions:
                intent = intents.get(p.topic_partition)
                if intent is None or intent.partition is not p:
                    intent = intents[p.topic_partition] = _IsrIntent(p)
                intent.merge(add=add, remove=remove, why=why)
                if add is not None and add not in p.isr_adding:
                    # Kept until a write round settles it, even if a removal follows: a
                    # write naming it may be in flight.
                    p.isr_adding = shared_ints((*p.isr_adding, add))
            self._isr_cond.notify_all()

    def _write_isr_changes(self, intents: list[_IsrIntent]) -> list[TopicPartition]:
        changed: list[TopicPartition] = []
        try:
            self._write_isr_changes_to_zookeeper(intents, changed)
        except Exception:
            with self._lock:
                for intent in intents:
                    self._isr_unsure[intent.partition.topic_partition] = intent.partition
                # The writes the round saw land before it failed: no later round finds
                # those ISRs changed, so the next notification names them from here, and
                # a smaller ISR moves the high watermark now (as Kafka's maybeShrinkIsr
                # does once its write is done), else acknowledged records stay unreadable
                # and acks=all produces time out until the next append or fetch.
                self._isr_changed_unannounced.update(changed)
                for tp in changed:
                    if (current := self.partitions.get(tp)) is not None:
                        self._maybe_increment_high_watermark(current)
            if changed:
                self._notify_progress(changed)
            raise
        # Every write of the round is settled (a lost connection raised instead): what is
        # still to be added is what the queue holds. A smaller ISR, or a settled addition,
        # may let the high watermark move (no longer held back by the replica).
        with self._lock:
            written = set(changed)
            settled = set(written)
            for intent in intents:
                p = intent.partition
                if p.stale:
                    # Moved on: ZooKeeper may name the replica being added in the ISR;
                    # the high watermark waits for it until the next LeaderAndIsr.
                    continue
                if p.isr_adding:
                    queued = self._isr_intents.get(p.topic_partition)
                    pending = queued is not None and queued.partition is p
                    p.isr_adding = queued.add if queued is not None and pending else ()
                    settled.add(p.topic_partition)
            # A settled addition that changed nothing (withdrawn, or refused) may still
            # release the high watermark: those partitions are told of too.
            moved = [
                tp
                for tp in settled
                if (current := self.partitions.get(tp)) is not None
                and self._maybe_increment_high_watermark(current)
                and tp not in written
            ]
        # Also the partitions found fenced (stale): a fetch of one is answered with an error.
        touched = [i.partition.topic_partition for i in intents if i.partition.stale]
        if changed or touched or moved:
            # Also wakes producers waiting on a shrinking ISR.
            self._notify_progress([*changed, *touched, *moved])
        return changed

    def _write_isr_changes_to_zookeeper(
        self, intents: list[_IsrIntent], changed: list[TopicPartition]
    ) -> list[TopicPartition]:
        """One round of the ISR writer: every intent as a zkVersion-conditional write, all
        in packed multis. Adds the partitions whose ISR changed to ``changed`` as it learns
        of each write (what it learned stands if it raises part way), and returns it."""
        rows: list[dict[str, object]] = []
        with self._lock:
            unsure = [
                (i.partition, "; ".join(i.why))
                for i in intents
                if self._isr_unsure.pop(i.partition.topic_partition, None) is i.partition
            ]
        # Each row is logged even if a later step of the round raises (a write refused
        # by a lost connection, the read after a refused write): a write found landed, or
        # answered, is not found again by the next round, which would leave it unlogged.
        try:
            return self._write_isr_round(intents, unsure, changed, rows)
        finally:
            self.state_log.write_many("isr_change", rows)

    def _write_isr_round(
        self,
        intents: list[_IsrIntent],
        unsure: list[tuple[Partition, str]],
        changed: list[TopicPartition],
        rows: list[dict[str, object]],
    ) -> list[TopicPartition]:
        """The round's reads and writes; adds to ``changed`` and ``rows`` as it learns of
        each write, so that what it learned stands if it raises part way."""
        for tp, row in self._reread_unsure(unsure) if unsure else ():
            rows.append(row)
            changed.append(tp)
        plans: list[tuple[Partition, LeaderAndIsr, str, str]] = []
        with self._lock:
            for intent in intents:
                p = intent.partition
                tp = p.topic_partition
                if p.stale or self.partitions.get(tp) is not p or p.leader != self.broker_id:
                    continue
                isr = [r for r in p.isr if r not in intent.remove]
                isr += sorted(r for r in intent.add if r not in isr and r in p.replicas)
                if not isr or tuple(isr) == p.isr:
                    continue  # never empty an ISR; nothing to change
                desired = LeaderAndIsr(p.leader, p.leader_epoch, tuple(isr), p.zk_version)
                path = paths.partition_state(tp.topic, tp.partition)
                plans.append((p, desired, path, "; ".join(intent.why)))
        if not plans:
            return changed
        items = [
            [SetData(path, encode_partition_state(desired, p.controller_epoch), desired.zk_version)]
            for p, desired, path, _ in plans
        ]
        results = self.zk.multi_batched(items)
        refused: list[tuple[Partition, str, LeaderAndIsr, str]] = []
        with self._lock:
            for (p, desired, path, why), result in zip(plans, results, strict=True):
                outcome = result[0]
                if isinstance(outcome, BadVersionError):
                    refused.append((p, path, desired, why))
                elif isinstance(outcome, NoNodeError):
                    p.stale = True
                    self._changes += 1
                elif isinstance(outcome, Exception):
                    log.warning("ISR write for %s failed: %r", p.topic_partition, outcome)
                else:
                    p.isr = shared_ints(desired.isr)
                    p.zk_version = outcome.version
                    changed.append(p.topic_partition)
                    rows.append(
                        {
                            "topic": p.topic_partition.topic,
                            "partition": p.topic_partition.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "isr": list(desired.isr),
                            "zk_version": outcome.version,
                            "why": why,
                        }
                    )
        # What is stored, read in one batch of pipelined multiReads, not a round trip a
        # partition: the controller changing many states at once (a broker's loss) refuses
        # as many writes. Should the read fail, the round fails and the next reads them all.
        stored = self.zk.get_many([path for _p, path, _d, _w in refused]) if refused else []
        for (p, path, _desired, why), got in zip(refused, stored, strict=True):
            found_row = self._adopt_stored_state(p, path, got, why)
            if found_row is not None:
                rows.append(found_row)
                changed.append(p.topic_partition)
        return changed

    def _reread_unsure(
        self, unsure: list[tuple[Partition, str]]
    ) -> list[tuple[TopicPartition, dict[str, object]]]:
        """The states of partitions whose last write may have landed unanswered, read in
        pipelined multiReads (a lost connection still raises: the round fails again);
        the isr_change rows of the writes found landed."""
        path_list = [
            paths.partition_state(p.topic_partition.topic, p.topic_partition.partition)
            for p, _ in unsure
        ]
        got = self.zk.get_many(path_list)
        found = []
        for (p, why), path, state in zip(unsure, path_list, got, strict=True):
            with self._lock:
                if p.stale or self.partitions.get(p.topic_partition) is not p:
                    continue
            row = self._adopt_stored_state(p, path, state, why)
            if row is not None:
                found.append((p.topic_partition, row))
        return found

    def _adopt_stored_state(
        self, p: Partition, path: str, got: tuple[bytes, ZnodeStat] | None, why: str
    ) -> dict[str, object] | None:
        """What is stored, after a write refused for its zkVersion or one whose answer
        was lost. Our own leader epoch with another zkVersion there means our own earlier
        write landed unanswered (only the leader writes an ISR without a new leader
        epoch): adopt it, and return its isr_change row, since no other row records that
        write. Another leader epoch: the partition moved on; wait for the controller."""
        with self._lock:
            if got is None:
                p.stale = True
                self._changes += 1
                return None
            try:
                state = decode_partition_state(path, got[0], got[1].version)
            except MalformedZnode as e:
                log.error("%s", e)
                p.stale = True
                self._changes += 1
                return None
            stored = state.leader_and_isr
            if stored.leader == p.leader and stored.leader_epoch == p.leader_epoch:
                if stored.zk_version == p.zk_version:
                    return None  # nothing of ours landed unseen
                log.info(
                    "%s: our ISR write %s had landed (its answer was lost), zkVersion %d",
                    p.topic_partition,
                    list(stored.isr),
                    stored.zk_version,
                )
                p.isr = shared_ints(stored.isr)
                p.zk_version = stored.zk_version
                return {
                    "topic": p.topic_partition.topic,
                    "partition": p.topic_partition.partition,
                    "leader": stored.leader,
                    "leader_epoch": stored.leader_epoch,
                    "isr": list(stored.isr),
                    "zk_version": stored.zk_version,
                    "why": f"{why}; found written, its answer lost",
                }
            log.info(
                "%s moved on (leader %d epoch %d); waiting for the controller",
                p.topic_partition,
                stored.leader,
                stored.leader_epoch,
            )
            p.stale = True
            p.found_zk_version = stored.zk_version
            # Still ours to lead as ZooKeeper has it: the next LeaderAndIsr says more.
            p.moved_on = stored.leader == self.broker_id
            self._changes += 1
            return None

    def _isr_writer(self) -> None:
        """Writes queued ISR changes in batches, then tells the controller about them with
        ISR change notifications (at most every ISR_PROPAGATION_INTERVAL_S)."""
        changed: set[TopicPartition] = set()
        last_notified = 0.0
        while True:
            with self._lock:
                while not self._isr_intents and not changed and not self._closed:
                    self._isr_cond.wait()
                if self._closed:
                    return
            failed, more = self._isr_round(changed)
            if failed:
                time.sleep(1)
                continue
            wait = ISR_PROPAGATION_INTERVAL_S - (time.monotonic() - last_notified)
            if changed and wait > 0:
                if not more:
                    time.sleep(wait)  # batch what changes in the window
                continue
            if changed:
                try:
                    self._notify_isr_changes(sorted(changed))
                    changed.clear()
                    last_notified = time.monotonic()
                except Exception:
                    log.exception("could not write an ISR change notification; retrying")
                    time.sleep(1)

    def _isr_round(self, changed: set[TopicPartition]) -> tuple[bool, bool]:
        """One round of the ISR writer: writes up to ISR_WRITES_PER_ROUND queued intents,
        adding the partitions whose ISR changed to ``changed``. A round that fails puts its
        intents back (behind any newer one for the same partition) and adds the changes it
        saw land, for the next notification. Returns (failed, more intents queued)."""
        with self._lock:
            queued = self._isr_intents
            intents = [
                queued.pop(tp) for tp in list(itertools.islice(queued, ISR_WRITES_PER_ROUND))
            ]
            more = bool(queued)
            # Taken from its front, it kept its table (a dict never shrinks): 0.6 MB after
            # a cold start's wave of 20,000 (measured), 5 MiB after one of 100,000.
            self._isr_intents = compacted(queued)
        try:
            changed.update(self._write_isr_changes(intents))
        except Exception:
            log.exception("ISR writes failed; retrying them")
            with self._lock:
                for intent in intents:
                    self._isr_intents.setdefault(intent.partition.topic_partition, intent)
                changed.update(self._take_unannounced_isr_changes())
            return True, more
        # The batch is let go of on return, not when the next one comes (after a burst the
        # thread's loop held thousands of intents, each with its partition, while all was quiet).
        return False, more

    def _take_unannounced_isr_changes(self) -> set[TopicPartition]:
        """The partitions whose ISR writes landed in rounds that then failed, taken out:
        for the ISR writer's next notification. Holds the lock."""
        taken, self._isr_changed_unannounced = self._isr_changed_unannounced, set()
        return taken

    def _notify_isr_changes(self, changed: list[TopicPartition]) -> None:
        prefix = f"{paths.ISR_CHANGE_NOTIFICATION}/{paths.ISR_CHANGE_PREFIX}"
        chunks = isr_notification_chunks(changed)
        for result in self.zk.multi_batched(
            [[Create(prefix, encode_partition_list(chunk), sequential=True)] for chunk in chunks]
        ):
            if isinstance(result[0], Exception):
                raise result[0]

    # --- log directory failure (KIP-112) -------------------------------------------------

    def _handle_log_dir_failures(self) -> None:
        """The log dir failure handler thread (Kafka's LogDirFailureHandler): takes each
        failed directory from the log manager's channel and stops serving it. The code
        that met the error only queued the directory, whatever locks it held."""
        assert self.logs is not None
        channel = self.logs.dir_failures
        while not self._closed:
            log_dir = channel.take_next_offline_log_dir(timeout_s=0.5)
            if log_dir is None or self._closed:
                # Stopping: a directory failing in the clean shutdown's own writes is the
                # log manager's to leave (Kafka stops this thread first).
                continue
            try:
                self.handle_log_dir_failure(log_dir)
            except Exception:
                log.exception("handling the failure of log directory %s failed", log_dir)
            if self.logs.live_log_dirs:
                self._notify_log_dir_event()

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Stop serving the failed ``log_dir`` (Kafka's ReplicaManager.handleLogDirFailure,
        up to its ZooKeeper notification, which the handler thread writes next): its
        partitions stop being fetched and go offline (``offline_partitions``), the log
        manager drops and closes their logs; with no log directory left the broker halts
        (``on_all_log_dirs_failed``). Returns the partitions taken offline."""
        logs = self.logs
        if logs is None:
            return []
        # Under the state change lock, as Kafka's handleLogDirFailure: the fetcher changes
        # of a LeaderAndIsr applied before (a follow) cannot land after this unfollow. The
        # log manager's part and the halt are outside it, as Kafka's; this thread holds
        # nothing else, and no holder of the lock waits for it.
        with self._state_change_lock:
            offline = self._take_offline(log_dir)
        logs.handle_log_dir_failure(log_dir)
        log.error(
            "log directory %s failed: %d partitions offline on broker %d until it restarts",
            log_dir,
            len(offline),
            self.broker_id,
        )
        if not logs.live_log_dirs and not self._closed:
            halt = self.on_all_log_dirs_failed or _halt
            halt([os.fspath(d) for d in logs.log_dirs])
        return offline

    def _take_offline(self, log_dir: str) -> list[TopicPartition]:
        """The hosted partitions of ``log_dir`` leave ``partitions`` for
        ``offline_partitions`` and stop being fetched."""
        offline: list[TopicPartition] = []
        with self._lock:
            for tp, p in list(self.partitions.items()):
                if p.log is not None and p.log.log_dir == log_dir:
                    self._mark_offline(tp)
                    offline.append(tp)
            self._changes += 1
        if offline:
            # The fetchers drop them; fetches and producers waiting on them answer.
            if self.on_stop is not None:
                self.on_stop(offline, False)
            self._notify_progress(offline)
        return offline

    def _mark_offline(self, tp: TopicPartition) -> bool:
        """Kafka's markPartitionOffline (call with the lock held): ``tp`` leaves
        ``partitions`` for ``offline_partitions`` until the broker restarts, and every
        request for it is answered KAFKA_STORAGE_ERROR. True if it was hosted: the caller
        then tells its fetcher and its waiters, outside the lock."""
        p = self.partitions.get(tp)
        if p is not None:
            with self._follower_lock(tp):
                # No follower append or truncation is under way, and none can start on
                # it after this.
                del self.partitions[tp]
                p.stale = True
            p.followers = NO_FOLLOWERS
            self._isr_intents.pop(tp, None)
            self._isr_unsure.pop(tp, None)
        self.offline_partitions[tp] = None
        return p is not None

    def log_dir_event_notification(self) -> tuple[str, bytes]:
        """The path (before ZooKeeper's sequence number) and data of the log dir event
        notification this broker writes when one of its log directories failed."""
        path = f"{paths.LOG_DIR_EVENT_NOTIFICATION}/{paths.LOG_DIR_EVENT_PREFIX}"
        return path, encode_log_dir_event(self.broker_id)

    def _notify_log_dir_event(self) -> None:
        """The sequential /log_dir_event_notification/log_dir_event_<n> naming this broker
        (Kafka's propagateLogDirEvent), retried until written: ZooKeeper may be out of
        reach for a while, and the controller learns of the failure only from it."""
        path, data = self.log_dir_event_notification()
        while True:
            try:
                created, _stat = self.zk.create(path, data, sequential=True)
            except Exception as e:
                if self._closed:
                    log.warning("log dir event notification not written (stopping): %r", e)
                    return
                log.warning("could not write a log dir event notification (%r); retrying", e)
                self._closed_event.wait(1.0)
                continue
            log.info("wrote log dir event notification %s", created)
            return

    # --- views --------------------------------------------------------------------------

    def snapshot(self) -> list[Partition]:
        with self._lock:
            return list(self.partitions.values())

    def leader_count(self) -> int:
        """How many partitions this broker leads; recounted only after leadership changed
        (a status line every second must not walk 100,000 partitions)."""
        with self._lock:
            if self._counted_at != self._changes:
                self._leader_count = sum(
                    1
                    for p in self.partitions.values()
                    if p.leader == self.broker_id and not p.stale
                )
                self._counted_at = self._changes
            return self._leader_count

    def led_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [
                tp
                for tp, p in self.partitions.items()
                if p.leader == self.broker_id and not p.stale
            ]


def _halt(log_dirs: list[str]) -> None:
    """Kafka's LogManager: every log directory failed, the broker halts (exit 1)."""
    log.critical("Shutdown broker because all log dirs in %s have failed", ", ".join(log_dirs))
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000
