"""The group coordinator's shell (Kafka's GroupCoordinator and GroupMetadataManager): the
groups whose `__consumer_offsets` partition this broker leads, their members' requests
held until the membership state machine (groups/membership.py) answers them, and their
committed offsets, written to that partition and answered once every in-sync replica
has them.

A group belongs to partition `partition_for(group_id)` of `__consumer_offsets`; its
leader is the group's coordinator. When this broker becomes that leader it reads the
partition from its start to rebuild the committed offsets and the groups
(COORDINATOR_LOAD_IN_PROGRESS meanwhile); when it stops leading it, the partition's groups
are dropped and their waiting members told NOT_COORDINATOR, so they find the new
coordinator. A generation's assignment is written (Kafka's group metadata record) before
its members get it, and so is a group left Empty, so a new coordinator takes the group
up where it was: its members go on heartbeating there, without a rebalance. Committed
offsets are never lost.

Threads: request handlers (connection threads) call in and may wait on the one
condition; a ticker thread times sessions and join phases; a loader thread reads
partitions. All group state is guarded by that condition's lock.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import logging
import queue
import struct
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from broker.replica_manager import Partition, ReplicaManager
from groups.membership import (
    Answers,
    Group,
    GroupLimits,
    GroupState,
    JoinAnswer,
    SyncAnswer,
    UnexpectedPendingMember,
)
from groups.offset_records import (
    CommittedOffset,
    GroupKey,
    GroupMetadata,
    MalformedOffsetRecord,
    OffsetKey,
    decode_offset_record,
    group_metadata_batch,
    offset_commit_batch,
    partition_for,
    tombstone_batches,
)
from groups.retention import expired_offsets
from storage.errors import CorruptRecordError, OffsetOutOfRangeError
from storage.log import AppendInfo, LogConfig, PartitionLog
from storage.records import (
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Record,
    iter_batches,
    iter_records,
)
from wire.errors import ErrorCode
from zkdata.znodes import MalformedZnode, TopicPartition, decode_topic

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
# The first bytes of a group metadata record's key (key version 2).
_GROUP_KEY_VERSION = b"\x00\x02"
# How much of a partition one read takes while loading.
_LOAD_READ_BYTES = 4 * 1024 * 1024
# Kafka's offset.metadata.max.bytes default.
OFFSET_METADATA_MAX_BYTES = 4096
# Kafka's offsets.commit.timeout.ms default: how long a commit waits for the ISR.
COMMIT_TIMEOUT_S = 5.0
# A load that failed is tried again after this, doubling up to the most (its groups are
# answered COORDINATOR_LOAD_IN_PROGRESS meanwhile, which clients retry).
LOAD_RETRY_S = 0.5
LOAD_RETRY_MAX_S = 30.0
# A held JoinGroup or SyncGroup is answered by the state machine, at the latest when the
# ticker ends its join or sync phase. It is given up on (COORDINATOR_NOT_AVAILABLE) only
# this long after that phase's end, should the answer never come: were the ticker thread
# to die on an unexpected error, every held request would otherwise wait forever, its
# connection muted. While the ticker runs, the phase ends first and this never fires.
_HELD_REQUEST_SLACK_S = 30.0

# What a failed write of commits means to the committer (Kafka's mapping).
_COMMIT_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    # The ISR did not have it within offsets.commit.timeout.ms: said as it is (Kafka's
    # `case other => other`), which librdkafka retries without taking the coordinator
    # for dead, as it takes it on COORDINATOR_NOT_AVAILABLE.
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}

# What a failed write of a group's metadata means to its members (Kafka's storeGroup):
# a timeout sends them to rejoin, and a record too large is no commit's size.
_GROUP_WRITE_ERRORS = {
    **_COMMIT_WRITE_ERRORS,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


@dataclass
class _Stored:
    """A committed offset and where in the partition its record is: a later record
    replaces an earlier one, whichever commit finished first."""

    value: CommittedOffset | None  # None: a deletion (a tombstone), until merged
    log_offset: int


@dataclass
class _Held:
    """A JoinGroup or SyncGroup waiting for its answer."""

    answer: JoinAnswer | SyncAnswer | None = None


def offsets_topic_partition_count(data: bytes | None, configured: int) -> int:
    """How many partitions a group's partition is hashed over, from the data of
    /brokers/topics/__consumer_offsets (None: no topic yet): an existing topic's count,
    else ``configured`` (offsets.topic.num.partitions), as Kafka 2.8's KafkaServer.startup
    gives its coordinator getTopicPartitionCount(...).getOrElse(offsetsTopicPartitions).
    A malformed znode is warned of and leaves the setting."""
    if data is None:
        return configured
    try:
        return len(decode_topic(OFFSETS_TOPIC, data).partitions)
    except MalformedZnode as e:
        log.warning("%s; hashing groups over offsets.topic.num.partitions=%d", e, configured)
        return configured


def readable_batches(
    data: memoryview,
) -> tuple[list[BatchHeader], list[CorruptRecordError], bool]:
    """The whole batches of ``data`` (batches read from a log) that pass validation, with
    their positions in ``data``; the damage found (positions in ``data``); and whether
    the rest was given up. A damaged batch whose length field leads to a next batch (a
    CRC mismatch, a bad magic) is passed over alone; after one whose length leads nowhere
    no later batch can be found, and the rest of ``data`` is given up."""
    headers: list[BatchHeader] = []
    damage: list[CorruptRecordError] = []
    position = 0
    while position < len(data):
        try:
            found = list(iter_batches(data[position:]))
        except CorruptRecordError as e:
            bad = position + e.position
            found = list(iter_batches(data[position:bad]))
            headers += [h._replace(position=position + h.position) for h in found]
            damage.append(CorruptRecordError(e.reason, position=bad, offset=e.offset))
            length = (
                struct.unpack_from(">i", data, bad + 8)[0]
                if bad + LOG_OVERHEAD <= len(data)
                else -1
            )
            if length < MIN_BATCH_LENGTH or bad + LOG_OVERHEAD + length > len(data):
                return headers, damage, True
            position = bad + LOG_OVERHEAD + length
            continue
        headers += [h._replace(position=position + h.position) for h in found]
        break
    return headers, damage, False


def metadata_length(metadata: str) -> int:
    """A commit's metadata length as Kafka 2.8 measures it against
    offset.metadata.max.bytes (validateOffsetMetadataLength: a Java String's length(),
    its UTF-16 code units; not its UTF-8 bytes, despite the setting's name)."""
    if metadata.isascii():
        return len(metadata)
    return len(metadata.encode("utf-16-le", "surrogatepass")) // 2


def _read_up_to_damage(plog: PartitionLog, position: int, end: int) -> tuple[bytes, int, int]:
    """After a read of ``plog`` at ``position`` met a batch whose length field is
    damaged: the whole batches from ``position`` up to it (no more than a load's read,
    below ``end``), the offset after them, and the offset to read on from: the next
    segment's base offset (no batch after the damage in its segment can be found),
    ``end`` if there is none. It reads the segment itself, walking its batches as
    PartitionLog.read does, which gives up the batches before the damage too."""
    segments = plog.segments_snapshot()
    index = max(bisect.bisect_right(segments, position, key=lambda s: s.base_offset) - 1, 0)
    for k in range(index, len(segments)):
        segment = segments[k]
        after = segments[k + 1].base_offset if k + 1 < len(segments) else end
        first: BatchHeader | None = None
        last: BatchHeader | None = None
        try:
            # As PartitionLog.read: the first segment with a batch at or past position.
            first = segment.find_batch(position, segment.size)
            if first is None:
                continue
            last = first
            for header in segment.headers(first.position + first.size, segment.size):
                if (
                    header.last_offset >= end
                    or header.position + header.size - first.position > _LOAD_READ_BYTES
                ):
                    # Where PartitionLog.read stops: no damage met, the log changed
                    # meanwhile (truncated, cleaned). Read on from here.
                    after = header.base_offset
                    break
                last = header
        except CorruptRecordError:
            pass
        except OSError as e:
            raise plog.report_failure("read of", e) from e
        if first is None or last is None:
            return b"", position, max(after, position + 1)
        try:
            data = segment.log.pread(last.position + last.size - first.position, first.position)
        except OSError as e:
            raise plog.report_failure("read of", e) from e
        return data, last.next_offset, max(after, last.next_offset)
    return b"", position, end


class GroupCoordinator:
    def __init__(
        self,
        broker_id: int,
        replicas: ReplicaManager,
        *,
        offsets_partitions: int,
        limits: GroupLimits,
        commit_timeout_s: float = COMMIT_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        offsets_retention_ms: int = 7 * 24 * 3600 * 1000,
        offsets_retention_check_interval_ms: int = 600_000,
        offsets_compression: int = 0,
        offset_metadata_max_bytes: int = OFFSET_METADATA_MAX_BYTES,
    ) -> None:
        self.broker_id = broker_id
        # offsets.topic.compression.codec: the codec of the records written here.
        self.offsets_compression = offsets_compression
        # offset.metadata.max.bytes: the longest metadata a commit may carry.
        self.offset_metadata_max_bytes = offset_metadata_max_bytes
        self.replicas = replicas
        # How many partitions a group's partition is hashed over: the setting
        # (offsets.topic.num.partitions) until start() is given the existing topic's.
        self.offsets_partitions = offsets_partitions
        self.limits = limits
        self.commit_timeout_s = commit_timeout_s
        self.offsets_retention_ms = offsets_retention_ms
        self.offsets_retention_check_interval_ms = offsets_retention_check_interval_ms
        # ``clock``, the wall clock, for what is written or kept (commit and record
        # timestamps, when a group became Empty, offsets retention); ``monotonic`` for
        # every deadline (sessions, join and sync phases), as Kafka's purgatories run on
        # System.nanoTime: a step of the wall clock must not stall or fire them.
        self._clock = clock
        self._monotonic = monotonic
        self._cond = threading.Condition()
        # Partitions of __consumer_offsets led here: loaded, or being loaded, each with
        # its coordinator epoch (Kafka's): the leader epoch at which this broker became
        # its leader, kept while it stays leader (a load finishes, a write decided in
        # it is appended, only while the partition is still led from that election).
        self._loaded: dict[int, int] = {}
        self._loading: dict[int, int] = {}
        self._load_failures: dict[int, int] = {}  # loads failed in a row, by partition
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, dict[TopicPartition, _Stored]] = {}
        # Commits appended and not yet in the cache (group -> partition -> how many):
        # their offsets do not expire meanwhile (Kafka's pendingOffsetCommits).
        self._pending: dict[str, dict[TopicPartition, int]] = {}
        self._held: dict[tuple[str, str, str], _Held] = {}
        # One append at a time per partition, so records reach the log in the order
        # their commits were checked.
        self._append_locks = {i: threading.Lock() for i in range(offsets_partitions)}
        self._loads: queue.Queue[tuple[int, int] | None] = queue.Queue()
        self._stopped = threading.Event()
        # Empty groups' metadata records, written in the background, each with the
        # coordinator epoch of its partition when decided.
        self._empty_writes: queue.Queue[tuple[str, int, GroupMetadata] | None] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._tick_loop, name="group-ticker", daemon=True),
            threading.Thread(target=self._load_loop, name="group-loader", daemon=True),
            threading.Thread(target=self._write_loop, name="group-writer", daemon=True),
            threading.Thread(target=self._expire_loop, name="group-expirer", daemon=True),
        ]

    def start(self, offsets_partitions: int | None = None) -> None:
        """``offsets_partitions``: the partition count of an existing __consumer_offsets,
        which wins over the setting for good (Kafka 2.8's GroupMetadataManager.startup
        keeps the count it is given once)."""
        if offsets_partitions is not None and offsets_partitions != self.offsets_partitions:
            self.offsets_partitions = offsets_partitions
            self._append_locks = {i: threading.Lock() for i in range(offsets_partitions)}
        for t in self._threads:
            t.start()

    def close(self) -> None:
        self._stopped.set()
        self._loads.put(None)
        self._empty_writes.put(None)
        with self._cond:
            for index in list(self._loaded) + list(self._loading):
                self._unload(index)
            self._cond.notify_all()
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=5)

    def _now_ms(self) -> int:
        """The monotonic clock's time: for deadlines only."""
        return int(self._monotonic() * 1000)

    def _wall_ms(self) -> int:
        """The wall clock's time: for what is recorded or compared with records."""
        return int(self._clock() * 1000)

    # --- partition leadership ----------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.offsets_partitions)

    def on_become(self, leaders: Iterable[Partition], followers: Iterable[Partition]) -> None:
        """LeaderAndIsr applied: load the offsets partitions now led here, drop the ones
        now followed."""
        with self._cond:
            for p in followers:
                if p.topic_partition.topic == OFFSETS_TOPIC:
                    self._unload(p.topic_partition.partition)
            for p in leaders:
                tp = p.topic_partition
                if tp.topic != OFFSETS_TOPIC or tp.partition >= self.offsets_partitions:
                    continue
                if tp.partition in self._loaded or tp.partition in self._loading:
                    # Still led here (a follow or a stop would have unloaded it), at a
                    # new leader epoch: the controller bumps it, the leader unchanged,
                    # whenever a follower goes offline. No election: Kafka 2.8's
                    # Partition.makeLeader answers isNewLeader false and onElection is
                    # not called; the groups stay served (or the load goes on) at the
                    # coordinator epoch of the election.
                    continue
                self._load_failures.pop(tp.partition, None)
                self._loading[tp.partition] = p.leader_epoch
                self._loads.put((tp.partition, p.leader_epoch))

    def on_stop(self, tps: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in tps:
                if tp.topic == OFFSETS_TOPIC:
                    self._unload(tp.partition)

    def _unload(self, index: int) -> None:
        self._load_failures.pop(index, None)
        was_loaded = self._loaded.pop(index, None) is not None
        was_loading = self._loading.pop(index, None) is not None
        # A load under way, or its retry, finds the partition no longer loading at its
        # epoch and puts nothing back.
        if not was_loaded and not was_loading:
            return
        dropped = [g for g in self._groups if self.partition_of(g) == index]
        for group_id in dropped:
            self._deliver(group_id, self._groups.pop(group_id).unload())
        for group_id in [g for g in self._offsets if self.partition_of(g) == index]:
            del self._offsets[group_id]
        log.info(
            "no longer the coordinator of %s-%d: %d groups unloaded",
            OFFSETS_TOPIC,
            index,
            len(dropped),
        )

    def _load_loop(self) -> None:
        while True:
            item = self._loads.get()
            if item is None or self._stopped.is_set():
                return
            index, leader_epoch = item
            try:
                self._load(index, leader_epoch)
            except Exception:
                # An I/O error (the log's directory failing, the log closed meanwhile):
                # tried again, after a backoff, while still led at that epoch; given up,
                # its groups would be answered NOT_COORDINATOR until the leadership moved.
                # (Damaged batches do not come here: _load skips them and serves the
                # rest, as a retry would meet them again, forever.)
                with self._cond:
                    if self._loading.get(index) != leader_epoch or self._stopped.is_set():
                        continue
                    failures = self._load_failures.get(index, 0) + 1
                    self._load_failures[index] = failures
                delay = min(LOAD_RETRY_MAX_S, LOAD_RETRY_S * 2 ** (failures - 1))
                log.exception(
                    "loading %s-%d failed; trying again in %.1f s", OFFSETS_TOPIC, index, delay
                )
                retry = threading.Timer(delay, self._loads.put, ((index, leader_epoch),))
                retry.daemon = True
                retry.start()
            else:
                with self._cond:
                    if self._loaded.get(index) == leader_epoch:
                        self._load_failures.pop(index, None)

    def _load(self, index: int, leader_epoch: int) -> None:
        """Read the partition from its start and keep each group's latest offsets."""
        with self._cond:
            if self._loading.get(index) != leader_epoch:
                return
        tp = TopicPartition(OFFSETS_TOPIC, index)
        started = time.monotonic()
        offsets: dict[str, dict[TopicPartition, _Stored]] = {}
        # group -> (generation, log offset, its latest metadata; None: deleted)
        metadata: dict[str, tuple[int, int, GroupMetadata | None]] = {}
        p = self.replicas.partitions.get(tp)
        records = 0
        latest: dict[bytes, Record] = {}  # an offset key's bytes -> its last record
        group_records: list[Record] = []
        # (Led at a later leader epoch meanwhile: the same leader, see on_become.)
        if (
            p is not None
            and p.log is not None
            and p.leader == self.broker_id
            and p.leader_epoch >= leader_epoch
        ):
            plog = p.log
            position = plog.log_start_offset
            end = plog.log_end_offset
            while position < end:
                try:
                    read = plog.read(position, _LOAD_READ_BYTES, end)
                except OffsetOutOfRangeError:
                    position = plog.log_start_offset  # the start moved on meanwhile
                    continue
                except CorruptRecordError as e:
                    # A batch's length field damaged on disk: no batch after it in its
                    # segment can be found. Kafka 2.8 logs the error and serves what it
                    # loaded; here the batches before it are kept, and the load reads on
                    # from the next segment (a retry would fail the same way, forever).
                    data, read_to, after = _read_up_to_damage(plog, position, end)
                    if read_to < after:
                        log.error(
                            "%s: %s; offsets %d to %d cannot be read: loaded without them",
                            tp,
                            e,
                            read_to,
                            after - 1,
                        )
                else:
                    if read.region is None or read.next_offset <= position:
                        break
                    data, after = read.to_bytes(), read.next_offset
                view = memoryview(data)
                headers, damage, rest_lost = readable_batches(view)
                for bad in damage:
                    log.error(
                        "%s: a damaged batch%s skipped: %s",
                        tp,
                        "" if bad.offset is None else f" at offset {bad.offset}",
                        bad.reason,
                    )
                if rest_lost:
                    log.error(
                        "%s: the batches after it, to offset %d, cannot be found", tp, after - 1
                    )
                for header in headers:
                    if header.is_control:
                        continue
                    batch = view[header.position : header.position + header.size]
                    try:
                        batch_records = list(iter_records(batch))
                    except (NotImplementedError, ValueError, IndexError, CorruptRecordError) as e:
                        log.error("%s: a batch at %d skipped: %s", tp, header.base_offset, e)
                        continue
                    records += len(batch_records)
                    for record in batch_records:
                        # Only a key's last record counts, so most are never decoded:
                        # remember where each key was last, by its bytes. Group records
                        # (few) are all kept: their latest generation wins, see below.
                        key_bytes = record.key
                        if key_bytes is not None and key_bytes[:2] == _GROUP_KEY_VERSION:
                            group_records.append(record)
                        elif key_bytes is not None:
                            latest[key_bytes] = record
                        else:
                            log.error("%s: a record without a key at %d", tp, record.offset)
                position = after
        for record in itertools.chain(latest.values(), group_records):
            try:
                key, value = decode_offset_record(record)
            except MalformedOffsetRecord as e:
                log.error("%s: a malformed offset record skipped: %s", tp, e)
                continue
            if isinstance(key, GroupKey):
                # The latest generation wins. Appends are in generation order (see
                # _store_group), so it is also the last; a log written before that was
                # so may hold an Empty group's record after a later generation's. A
                # tombstone (the group deleted, expire_offsets) ends what came before it
                # (group records are read in log order): a group made again after it starts
                # again at generation 1.
                assert value is None or isinstance(value, GroupMetadata)
                seen = metadata.get(key.group)
                if value is None:
                    metadata[key.group] = (-1, record.offset, None)
                elif (
                    seen is None or seen[2] is None or (value.generation, record.offset) >= seen[:2]
                ):
                    metadata[key.group] = (value.generation, record.offset, value)
                continue
            assert value is None or isinstance(value, CommittedOffset)
            group = offsets.setdefault(key.group, {})
            # A key of version 0 and one of version 1 name the same offset (Kafka's
            # GroupTopicPartition) by different bytes: the record later in the log wins.
            tp_key = TopicPartition(key.topic, key.partition)
            seen_offset = group.get(tp_key)
            if seen_offset is None or seen_offset.log_offset < record.offset:
                group[tp_key] = _Stored(value, record.offset)
        with self._cond:
            current = self.replicas.partitions.get(tp)
            if (
                self._loading.get(index) != leader_epoch
                or current is None
                or current.leader != self.broker_id
                or current.leader_epoch < leader_epoch
            ):
                return
            del self._loading[index]
            self._loaded[index] = leader_epoch
            for group_id, stored in offsets.items():
                self._merge(group_id, stored)
            now_ms = self._now_ms()
            for group_id, (_generation, _at, value) in metadata.items():
                # (None of the partition's groups is in memory: they went when it
                # stopped being led here, and a partition still led is not read again.)
                if value is not None and group_id not in self._groups:
                    self._groups[group_id] = Group.from_metadata(
                        group_id, value, self.limits, now_ms, wall_ms=self._wall_ms()
                    )
        log.info(
            "coordinator of %s: %d records read, offsets of %d groups loaded in %.3f s",
            tp,
            records,
            sum(1 for g in offsets.values() if any(s.value for s in g.values())),
            time.monotonic() - started,
        )

    def _merge(self, group_id: str, stored: dict[TopicPartition, _Stored]) -> None:
        """Take offsets into the cache (lock held): the record later in the log wins,
        whether read by a load or just written by a commit; a deletion removes."""
        cache = self._offsets.setdefault(group_id, {})
        for tp, new in stored.items():
            current = cache.get(tp)
            if current is None or current.log_offset < new.log_offset:
                cache[tp] = new
        for tp in [tp for tp, s in cache.items() if s.value is None]:
            del cache[tp]
        if not cache:
            del self._offsets[group_id]

    def _state_of(self, group_id: str) -> ErrorCode:
        """Whether this broker coordinates ``group_id`` now (call with the lock held)."""
        if self._stopped.is_set():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        index = self.partition_of(group_id)
        if index in self._loaded:
            return ErrorCode.NONE
        if index in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def coordinates(self, group_id: str) -> ErrorCode:
        with self._cond:
            return self._state_of(group_id)

    # --- answers held and delivered -----------------------------------------------------

    def _deliver(self, group_id: str, answers: Answers) -> None:
        if not answers:
            return
        for member_id, join in answers.joins.items():
            held = self._held.pop((group_id, member_id, "join"), None)
            if held is not None:
                held.answer = join
        for member_id, sync in answers.syncs.items():
            held = self._held.pop((group_id, member_id, "sync"), None)
            if held is not None:
                held.answer = sync
        self._cond.notify_all()

    def _hold(self, key: tuple[str, str, str], timeout_s: float) -> JoinAnswer | SyncAnswer | None:
        """Wait (lock held) for the answer to the caller's request; None if none came."""
        return self._wait(key, self._register(key), self._after(timeout_s))

    @staticmethod
    def _after(timeout_s: float) -> Callable[[], float]:
        deadline = time.monotonic() + timeout_s
        return lambda: deadline

    def _join_phase_end(self, group: Group) -> Callable[[], float]:
        """When a JoinGroup held in ``group`` is given up on: _HELD_REQUEST_SLACK_S after
        its join phase's end (on time.monotonic()), read again at each wake-up while the
        group is PreparingRebalance, as the phase may be extended (an initial delay's next
        one, another rebalance timeout when no member rejoined)."""
        end = time.monotonic()

        def bound() -> float:
            nonlocal end
            if group.state is GroupState.PREPARING_REBALANCE:
                # (The phase's deadline moved to this clock: past, it stays where it was.)
                remaining_s = (group.join_deadline_ms - self._now_ms()) / 1000
                end = max(end, time.monotonic() + remaining_s)
            return end + _HELD_REQUEST_SLACK_S

        return bound

    def _register(self, key: tuple[str, str, str]) -> _Held:
        """Where the answer to the caller's request is to be put (lock held)."""
        older = self._held.get(key)
        if older is not None:
            # The member asked again (its first request's answer would reach nobody).
            older.answer = (
                JoinAnswer(ErrorCode.REBALANCE_IN_PROGRESS, member_id=key[1])
                if key[2] == "join"
                else SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)
            )
        held = self._held[key] = _Held()
        self._cond.notify_all()
        return held

    def _wait(
        self, key: tuple[str, str, str], held: _Held, deadline: Callable[[], float]
    ) -> JoinAnswer | SyncAnswer | None:
        """Wait (lock held) until ``held`` is answered; None if it was not by
        ``deadline()`` (on time.monotonic(), asked again at each wake-up)."""
        while held.answer is None:
            remaining = deadline() - time.monotonic()
            if remaining <= 0 or self._stopped.is_set():
                if self._held.get(key) is held:
                    del self._held[key]
                return None
            self._cond.wait(remaining)
        return held.answer

    def _forget_if_unused(self, group_id: str) -> None:
        """A group a refused join made, with no member, generation or offset, is not
        kept (nor listed)."""
        group = self._groups.get(group_id)
        if (
            group is not None
            and group.state is GroupState.EMPTY
            and not group.members
            and not group.pending_members
            and group.generation_id == 0
            and group_id not in self._offsets
        ):
            del self._groups[group_id]

    def _group(self, group_id: str) -> Group:
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = Group(group_id, self.limits, persist=True)
        return group

    # --- membership ------------------------------------------------------------------

    def join_group(
        self,
        group_id: str,
        member_id: str,
        *,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        group_instance_id: str | None = None,
    ) -> JoinAnswer:
        if not group_id:
            return JoinAnswer(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        # (Kafka's generateMemberId: a static member's id starts with its instance id, an
        # empty one too.)
        prefix = client_id if group_instance_id is None else group_instance_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        with self._cond:
            error = self._state_of(group_id)
            if error != ErrorCode.NONE:
                return JoinAnswer(error, member_id=member_id)
            group = self._groups.get(group_id)
            if group is None and member_id:
                return JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._group(group_id)
            answers = group.join(
                member_id=member_id,
                new_member_id=new_member_id,
                require_known_member_id=require_known_member_id,
                client_id=client_id,
                client_host=client_host,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                protocol_type=protocol_type,
                protocols=protocols,
                now_ms=self._now_ms(),
                group_instance_id=group_instance_id,
                wall_ms=self._wall_ms(),
            )
            key = member_id or new_member_id
            replacement = answers.replacement
            if replacement is None:
                # (An earlier request of the member's still held gets the same answer.)
                own = answers.joins.get(key)
                self._deliver(group_id, answers)
                self._maybe_store_empty(group_id, group)
                if own is not None:
                    self._forget_if_unused(group_id)
                    return own
                self._cond.notify_all()  # the ticker: a new deadline
                # Held until the join phase ends, however long that is (Kafka's DelayedJoin
                # completes it then): the group's rebalance timeout, its members' largest,
                # not this member's own, and a phase with no member rejoined waits another
                # (see _join_phase_end).
                key_held = (group_id, key, "join")
                held = self._wait(key_held, self._register(key_held), self._join_phase_end(group))
                if isinstance(held, JoinAnswer):
                    return held
                return JoinAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=key)
            # A static member took its old place in a Stable group: written before it is
            # answered (Kafka's storeGroup), so a new coordinator knows its id. (The old
            # id's requests still waiting are answered now.)
            metadata = group.to_metadata()
            coordinator_epoch = self._loaded[self.partition_of(group_id)]
            replaced = answers.joins.pop(key)
            self._deliver(group_id, dataclasses.replace(answers, replacement=None))
        write_error = self._store_group(group_id, metadata, coordinator_epoch)
        with self._cond:
            if self._groups.get(group_id) is not group:
                return JoinAnswer(ErrorCode.NOT_COORDINATOR, member_id=key)
            if write_error == ErrorCode.NONE:
                return replaced
            reverted = group.static_replacement_failed(replacement, write_error)
            failed = reverted.joins.pop(key)
            self._deliver(group_id, reverted)
            return failed

    def sync_group(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        group_instance_id: str | None = None,
    ) -> SyncAnswer:
        if not group_id:
            return SyncAnswer(ErrorCode.INVALID_GROUP_ID)
        with self._cond:
            error = self._state_of(group_id)
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # Kafka's answer: the member joins again, as older clients do not expect
                # COORDINATOR_LOAD_IN_PROGRESS from SyncGroup (the Java client's is fatal).
                return SyncAnswer(ErrorCode.REBALANCE_IN_PROGRESS)
            if error != ErrorCode.NONE:
                return SyncAnswer(error)
            group = self._groups.get(group_id)
            if group is None:
                return SyncAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
            now_ms = self._now_ms()
            answers = group.sync(
                member_id=member_id,
                generation_id=generation_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=assignments,
                now_ms=now_ms,
                group_instance_id=group_instance_id,
                wall_ms=self._wall_ms(),
            )
            key = (group_id, member_id, "sync")
            stored: tuple[int, GroupMetadata] | None = None
            waiting: _Held | None = None
            coordinator_epoch = self._loaded[self.partition_of(group_id)]
            if answers.store:
                stored = (group.generation_id, group.to_metadata())
                # While the assignment is written, the group may move on (a member joins:
                # the leader is answered REBALANCE_IN_PROGRESS): that answer waits here.
                waiting = self._register(key)
        if stored is not None:
            # The leader's assignment is written before any member gets it (Kafka's
            # storeGroup), so a new coordinator reads this generation back.
            generation, metadata = stored
            write_error = self._store_group(group_id, metadata, coordinator_epoch)
            with self._cond:
                if self._groups.get(group_id) is not group:
                    if self._held.get(key) is waiting:
                        del self._held[key]
                    return SyncAnswer(ErrorCode.NOT_COORDINATOR)
                if write_error == ErrorCode.NONE:
                    answers = group.assignment_stored(
                        generation, self._now_ms(), wall_ms=self._wall_ms()
                    )
                else:
                    answers = group.assignment_store_failed(
                        generation, write_error, self._now_ms(), wall_ms=self._wall_ms()
                    )
                    self._maybe_store_empty(group_id, group)
        with self._cond:
            own = answers.syncs.get(member_id)
            self._deliver(group_id, answers)
            if own is not None:
                return own
            if waiting is not None and isinstance(waiting.answer, SyncAnswer):
                return waiting.answer  # answered during the write
            self._cond.notify_all()
            member = group.members.get(member_id)
            if member is None or self._groups.get(group_id) is not group:
                if waiting is not None and self._held.get(key) is waiting:
                    del self._held[key]
                return SyncAnswer(ErrorCode.NOT_COORDINATOR)
            # The sync phase ends at the group's rebalance timeout (Kafka's DelayedSync),
            # not the member's own, which may be negative (kept from JoinGroup v1+).
            wait_s = group.rebalance_timeout_ms() / 1000 + _HELD_REQUEST_SLACK_S
            held = (
                self._hold(key, wait_s)
                if waiting is None
                else self._wait(key, waiting, self._after(wait_s))
            )
        if isinstance(held, SyncAnswer):
            return held
        return SyncAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def _store_group(
        self,
        group_id: str,
        metadata: GroupMetadata | None,
        coordinator_epoch: int,
    ) -> ErrorCode:
        """Write the group's metadata record to its partition; NONE once every in-sync
        replica has it, else the error a waiting member is told (Kafka's mapping).
        Written only while the partition is led from the election that decided it (its
        ``coordinator_epoch``)."""
        offsets_tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        try:
            batch = group_metadata_batch(
                group_id, metadata, self._wall_ms(), self.offsets_compression
            )
        except ValueError as e:  # a member's metadata too long for the record's fields
            log.warning("the metadata of group %s cannot be written: %s", group_id, e)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        with self._append_locks[offsets_tp.partition]:
            # A group's records are appended in generation order: compaction keeps only
            # a key's last record, so an Empty record written late by the writer thread
            # must not land after a later generation's (that group moved on: skipped),
            # nor after the group's tombstone (deleted meanwhile, expire_offsets: skipped).
            with self._cond:
                led_since = self._loaded.get(offsets_tp.partition)
                if led_since != coordinator_epoch:
                    # Decided by a coordinator since gone (the partition moved away and
                    # back): the group may have moved on under another leader, and Kafka
                    # appends the record in the election it was decided in.
                    log.warning(
                        "the metadata of group %s, decided at coordinator epoch %d, not"
                        " written: the partition was led again since (epoch %s)",
                        group_id,
                        coordinator_epoch,
                        led_since,
                    )
                    return ErrorCode.NOT_COORDINATOR
                group = self._groups.get(group_id)
                if metadata is not None and (
                    group is None or group.generation_id > metadata.generation
                ):
                    return ErrorCode.NONE
            error, p, info, _message = self.replicas.append_as_leader(offsets_tp, batch, -1)
        if p is not None and info is not None:
            error = self.replicas.wait_for_replication(p, info.last_offset, self.commit_timeout_s)
        if error != ErrorCode.NONE:
            log.warning("writing the metadata of group %s failed: %s", group_id, error.name)
            return _GROUP_WRITE_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)
        return ErrorCode.NONE

    def _maybe_store_empty(self, group_id: str, group: Group) -> None:
        """A group that became Empty at a generation not yet written is written so (by
        the writer thread), so that a new coordinator does not bring back its members
        (lock held)."""
        coordinator_epoch = self._loaded.get(self.partition_of(group_id))
        if coordinator_epoch is None:
            return  # (a group in memory is of a loaded partition)
        if group.state is GroupState.EMPTY and group.generation_id > group.persisted_generation:
            group.persisted_generation = group.generation_id
            metadata = group.to_metadata()
            self._empty_writes.put((group_id, coordinator_epoch, metadata))

    def _write_loop(self) -> None:
        while True:
            item = self._empty_writes.get()
            if item is None or self._stopped.is_set():
                return
            group_id, coordinator_epoch, metadata = item
            # (A failed write is not tried again, as in Kafka, which only warns: a new
            # coordinator reads the generation before, whose members' sessions end.)
            self._store_group(group_id, metadata, coordinator_epoch)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        # (Kafka's isValidGroupId: an empty group id is taken by OffsetCommit,
        # OffsetFetch, DescribeGroups and DeleteGroups alone.)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        with self._cond:
            error = self._state_of(group_id)
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                # Kafka answers NONE, blindly (older clients do not expect the error);
                # the member's session is not renewed.
                return ErrorCode.NONE
            if error != ErrorCode.NONE:
                return error
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return group.heartbeat(
                member_id=member_id,
                generation_id=generation_id,
                now_ms=self._now_ms(),
                group_instance_id=group_instance_id,
            )

    def leave_group(
        self, group_id: str, member_ids: list[str]
    ) -> tuple[ErrorCode, dict[str, ErrorCode]]:
        """LeaveGroup by member ids (see leave_group_members)."""
        error, errors = self.leave_group_members(group_id, [(m, None) for m in member_ids])
        return error, dict(zip(member_ids, errors, strict=True)) if errors else {}

    def leave_group_members(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup of (member id, group instance id) pairs: the group's error, and
        each member's, in order (none when the group's is not NONE)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        with self._cond:
            error = self._state_of(group_id)
            if error != ErrorCode.NONE:
                return error, []
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
            try:
                errors, answers = group.leave_members(
                    members, self._now_ms(), wall_ms=self._wall_ms()
                )
            except UnexpectedPendingMember as e:
                # The request fails whole (the broker answers UNKNOWN_SERVER_ERROR, as
                # Kafka's KafkaApis does), but the members named before the one it failed
                # on have left: their answers and the group's record as for any leave.
                self._deliver(group_id, e.answers)
                self._maybe_store_empty(group_id, group)
                raise
            self._deliver(group_id, answers)
            self._maybe_store_empty(group_id, group)
            return ErrorCode.NONE, errors

    def _tick_loop(self) -> None:
        with self._cond:
            while not self._stopped.is_set():
                now_ms = self._now_ms()
                wall_ms = self._wall_ms()
                next_ms: int | None = None
                for group_id, group in list(self._groups.items()):
                    deadline = group.next_deadline_ms()
                    if deadline is not None and deadline <= now_ms:
                        self._deliver(group_id, group.tick(now_ms, wall_ms=wall_ms))
                        self._maybe_store_empty(group_id, group)
                        deadline = group.next_deadline_ms()
                    if deadline is not None:
                        next_ms = deadline if next_ms is None else min(next_ms, deadline)
                wait_s = 1.0 if next_ms is None else (next_ms - now_ms) / 1000
                self._cond.wait(min(1.0, max(wait_s, 0.01)))

    # --- offsets ---------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: dict[TopicPartition, CommittedOffset],
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Write the offsets to the group's partition; answered once every in-sync
        replica has them (then a new coordinator reads them), or with the error."""
        out: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        for tp, value in offsets.items():
            if metadata_length(value.metadata) > self.offset_metadata_max_bytes:
                out[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = value
        batch: bytearray | None = None
        if valid:
            try:
                batch = offset_commit_batch(
                    [(OffsetKey(group_id, tp.topic, tp.partition), v) for tp, v in valid.items()],
                    self._wall_ms(),
                    self.offsets_compression,
                )
            except ValueError as e:  # a name or offset too long for the record's fields
                log.warning("offset commit of group %s refused: %s", group_id, e)
                out.update(dict.fromkeys(valid, ErrorCode.INVALID_COMMIT_OFFSET_SIZE))
        index = self.partition_of(group_id)
        # Checked and appended under the partition's append lock: a commit checked before
        # a rebalance is appended before any commit checked after it, so a commit of an
        # ended generation never lands after (and overwrites) one of the next.
        with self._append_locks[index]:
            with self._cond:
                error = self._check_commit(group_id, member_id, generation_id, group_instance_id)
                if error != ErrorCode.NONE:
                    return dict.fromkeys(offsets, error)
                if batch is None:
                    return out
                self._count_pending(group_id, valid, 1)
            offsets_tp = TopicPartition(OFFSETS_TOPIC, index)
            try:
                write_error, p, info, _message = self.replicas.append_as_leader(
                    offsets_tp, batch, -1
                )
            except BaseException:
                with self._cond:
                    self._count_pending(group_id, valid, -1)
                raise
        return self._finish_commit(group_id, valid, write_error, p, info, out)

    def _check_commit(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode:
        """Whether the member may commit to the group now (lock held)."""
        error = self._state_of(group_id)
        if error != ErrorCode.NONE:
            return error
        # (An empty group id is one here, as in Kafka 2.8's OffsetCommit.)
        group = self._groups.get(group_id)
        if group is None and (generation_id < 0 or group_id in self._offsets):
            # A consumer assigning its partitions; or a group known by its offsets alone
            # (read back so), which Kafka's load makes an Empty group: a member naming
            # itself is then UNKNOWN_MEMBER_ID, as before the partition was read back.
            group = self._group(group_id)
        if group is None:
            return ErrorCode.ILLEGAL_GENERATION
        return group.check_commit(member_id, generation_id, self._now_ms(), group_instance_id)

    def _count_pending(self, group_id: str, offsets: Iterable[TopicPartition], delta: int) -> None:
        pending = self._pending.setdefault(group_id, {})
        for tp in offsets:
            count = pending.get(tp, 0) + delta
            if count > 0:
                pending[tp] = count
            else:
                pending.pop(tp, None)
        if not pending:
            del self._pending[group_id]

    def _finish_commit(
        self,
        group_id: str,
        valid: dict[TopicPartition, CommittedOffset],
        write_error: ErrorCode,
        p: Partition | None,
        info: AppendInfo | None,
        out: dict[TopicPartition, ErrorCode],
    ) -> dict[TopicPartition, ErrorCode]:
        """A commit appended (or refused): answered once replicated, then cached. It is
        pending (counted in _pending) until then: no longer pending and cached in one
        step under the lock, as Kafka's onOffsetCommitAppend, so a fetch requiring stable
        offsets never finds the new offset pending after it was cached."""
        try:
            if p is not None and info is not None:
                write_error = self.replicas.wait_for_replication(
                    p, info.last_offset, self.commit_timeout_s
                )
        except BaseException:
            with self._cond:
                self._count_pending(group_id, valid, -1)
            raise
        if write_error != ErrorCode.NONE or info is None:
            with self._cond:
                self._count_pending(group_id, valid, -1)
            mapped = _COMMIT_WRITE_ERRORS.get(write_error, ErrorCode.UNKNOWN_SERVER_ERROR)
            log.warning("offset commit of group %s failed: %s", group_id, write_error.name)
            out.update(dict.fromkeys(valid, mapped))
            return out
        with self._cond:
            pending = dict(self._pending.get(group_id, {}))
            self._count_pending(group_id, valid, -1)
            if self._state_of(group_id) not in (
                ErrorCode.NONE,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ):
                # Unloaded meanwhile: the new coordinator reads the record from the log.
                out.update(dict.fromkeys(valid, ErrorCode.NOT_COORDINATOR))
                return out
            # Replicated, so in the log whatever a load running now has read of it. (One
            # no longer pending had its topic deleted meanwhile: tombstoned, not taken.)
            self._merge(
                group_id,
                {
                    tp: _Stored(v, info.first_offset + i)
                    for i, (tp, v) in enumerate(valid.items())
                    if tp in pending
                },
            )
            out.update(dict.fromkeys(valid, ErrorCode.NONE))
        return out

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None]]:
        """The committed offsets of ``partitions`` (None: every partition the group has
        an offset for); a partition without one maps to None."""
        error, found, _unstable = self.fetch_offsets_stable(group_id, partitions)
        return error, found

    def fetch_offsets_stable(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None], set[TopicPartition]]:
        """As fetch_offsets, and which of the partitions answered have a commit written
        and not yet answered (Kafka's hasPendingOffsetCommitsForTopicPartition): OffsetFetch
        v7's require_stable answers those UNSTABLE_OFFSET_COMMIT, the client retrying.
        None lists the partitions with an offset in the cache, as Kafka's allOffsets: one
        whose first commit is pending is not among them."""
        with self._cond:
            error = self._state_of(group_id)
            if error != ErrorCode.NONE:
                return error, {}, set()
            stored = self._offsets.get(group_id, {})
            if partitions is None:
                found = {tp: s.value for tp, s in stored.items()}
            else:
                found = {tp: (stored[tp].value if tp in stored else None) for tp in partitions}
            pending = self._pending.get(group_id, {})
            return ErrorCode.NONE, found, {tp for tp in found if tp in pending}

    # --- offsets retention (groups/retention.py decides) -----------------------------

    def _expire_loop(self) -> None:
        interval_s = self.offsets_retention_check_interval_ms / 1000
        while not self._stopped.wait(interval_s):
            try:
                self.expire_offsets()
            except Exception:  # the next check tries again
                log.exception("expiring committed offsets failed")

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Kafka's cleanupGroupMetadata: in every partition led here, the expired offsets
        (``offsets.retention.minutes``, see groups/retention.py) are tombstoned and
        dropped, and a group left Empty with no offset is deleted (its metadata record
        tombstoned). Returns how many offsets expired. The tombstones are appended with
        acks=0, as Kafka's are (no min.insync.replicas check, no wait for the followers):
        one lost with its leader expires again at the next check of the next
        coordinator."""
        now = self._wall_ms() if now_ms is None else now_ms
        return self._remove_offsets(lambda index: self._expired_in(index, now), now, "expired")

    def handle_deleted_topics(self, topics: Collection[str]) -> int:
        """Kafka's handleDeletedPartitions (on the UpdateMetadata that marks the topics
        deleted): every offset committed here for their partitions is dropped and
        tombstoned, and a group left Empty with no offset is deleted, as expire_offsets does.
        Else a group would resume a topic created again under the same name from the
        old topic's offsets. Returns how many offsets were removed."""
        gone = {t for t in topics if t != OFFSETS_TOPIC}
        if not gone:
            return 0
        return self._remove_offsets(
            lambda index: self._offsets_of_topics(index, gone),
            self._wall_ms(),
            "of deleted topics removed",
        )

    def _remove_offsets(
        self,
        chosen: Callable[[int], tuple[list[tuple[str, TopicPartition]], list[str]]],
        now: int,
        what: str,
    ) -> int:
        """Drop the offsets and groups ``chosen(index)`` names (lock held) in each
        partition of the offsets topic led here, then append their tombstones. As Kafka
        2.8's cleanupGroupMetadata: the cache first, then one batch per group (split at
        max.message.bytes should it exceed it, where Kafka's is refused), with acks=0 (no
        min.insync.replicas check, no wait for the followers), so a partition whose ISR is
        below min.insync.replicas, or an append that fails (only logged), does not keep
        them: a deleted topic's offsets are removed once, with the UpdateMetadata. A
        tombstone lost is an expired offset's that expires again at the next check (of
        this coordinator's successor: this one no longer has it), or a deleted topic's
        that a new coordinator brings back, as in Kafka."""
        with self._cond:
            indexes = sorted(self._loaded)
        removed_count = 0
        for index in indexes:
            # The partition's append lock first: no commit lands between the decision and
            # the tombstones, and one appended before them is pending, so kept.
            with self._append_locks[index]:
                with self._cond:
                    if index not in self._loaded:
                        continue
                    removed, dead = chosen(index)
                    # Only a group that had a generation has a record to tombstone; one
                    # known by its offsets alone gets none (Kafka's cleanupGroupMetadata
                    # skips generation 0: "only using Kafka for offset storage").
                    deleted: set[str] = set()
                    for group_id, tp in removed:
                        # Commits of these written and not yet answered are not taken
                        # into the cache when answered (Kafka's removeOffsets drops them
                        # too).
                        pending = self._pending.get(group_id)
                        if pending is not None and pending.pop(tp, 0) and not pending:
                            del self._pending[group_id]
                        cached = self._offsets.get(group_id)
                        if cached is not None:
                            cached.pop(tp, None)
                            if not cached:
                                del self._offsets[group_id]
                    for group_id in dead:
                        group = self._groups.get(group_id)
                        if (
                            group is not None
                            and not group.members
                            and group_id not in self._offsets
                        ):
                            group.state = GroupState.DEAD
                            del self._groups[group_id]
                            if group.generation_id > 0:
                                deleted.add(group_id)
                if not removed and not dead:
                    continue
                offsets_tp = TopicPartition(OFFSETS_TOPIC, index)
                # One batch per group, as Kafka's cleanupGroupMetadata: all of a partition's
                # in one went past max.message.bytes with enough groups, and was refused
                # whole.
                by_group: dict[str, list[OffsetKey]] = {}
                for group_id, tp in removed:
                    by_group.setdefault(group_id, []).append(
                        OffsetKey(group_id, tp.topic, tp.partition)
                    )
                limit = self._max_batch_bytes(offsets_tp)
                failed: list[str] = []
                for group_id in sorted(by_group.keys() | deleted):
                    for batch in tombstone_batches(
                        by_group.get(group_id, []),
                        group_id if group_id in deleted else None,
                        now,
                        self.offsets_compression,
                        limit,
                    ):
                        error, _p, _info, message = self.replicas.append_as_leader(
                            offsets_tp, batch, 0
                        )
                        if error != ErrorCode.NONE:
                            failed.append(f"{group_id}: {error.name} {message}")
            removed_count += len(removed)
            if failed:
                log.warning(
                    "%s: %d committed offsets %s and %d groups deleted, but the tombstones of"
                    " %d batches were not written (first %s)",
                    offsets_tp,
                    len(removed),
                    what,
                    len(dead),
                    len(failed),
                    failed[0],
                )
                continue
            log.info(
                "%s: %d committed offsets %s, %d groups deleted",
                offsets_tp,
                len(removed),
                what,
                len(dead),
            )
        return removed_count

    def _max_batch_bytes(self, offsets_tp: TopicPartition) -> int:
        """The most a batch appended to the partition may take: its max.message.bytes, or
        its segment.bytes if lower (offsets.topic.segment.bytes may be), which the log
        refuses past too (the defaults if it has no log here: then the append fails
        anyway)."""
        p = self.replicas.partitions.get(offsets_tp)
        config = LogConfig() if p is None or p.log is None else p.log.config
        return min(config.max_message_bytes, config.segment_bytes)

    def _offsets_of_topics(
        self, index: int, topics: set[str]
    ) -> tuple[list[tuple[str, TopicPartition]], list[str]]:
        """(group, partition) of every offset of these topics committed by the groups of
        partition ``index``, in the cache or still being written (its record is before
        the tombstone), and the groups left Empty with none (lock held)."""
        removed: list[tuple[str, TopicPartition]] = []
        dead: list[str] = []
        names = {g for g in self._offsets if self.partition_of(g) == index}
        names |= {g for g in self._pending if self.partition_of(g) == index}
        for group_id in sorted(names):
            offsets = {tp for tp, s in self._offsets.get(group_id, {}).items() if s.value}
            offsets |= set(self._pending.get(group_id, ()))
            gone = sorted(tp for tp in offsets if tp.topic in topics)
            if not gone:
                continue
            removed += [(group_id, tp) for tp in gone]
            group = self._groups.get(group_id)
            if len(gone) == len(offsets) and (
                group is None or (not group.members and group.state is GroupState.EMPTY)
            ):
                dead.append(group_id)
        return removed, dead

    def _expired_in(
        self, index: int, now_ms: int
    ) -> tuple[list[tuple[str, TopicPartition]], list[str]]:
        """(group, partition) of every expired offset of the groups of partition ``index``,
        and the groups that go with them (lock held)."""
        expired: list[tuple[str, TopicPartition]] = []
        dead: list[str] = []
        names = {g for g in self._offsets if self.partition_of(g) == index}
        names |= {g for g in self._groups if self.partition_of(g) == index}
        for group_id in sorted(names):
            group = self._groups.get(group_id)
            offsets = {tp: s.value for tp, s in self._offsets.get(group_id, {}).items() if s.value}
            has_members = group is not None and bool(group.members)
            pending = self._pending.get(group_id, {})
            gone = expired_offsets(
                offsets,
                now_ms=now_ms,
                retention_ms=self.offsets_retention_ms,
                # (A group known by its offsets alone: Kafka's load makes it an Empty
                # group of no protocol type.)
                empty=group is None or group.state is GroupState.EMPTY,
                stable=group is not None and group.state is GroupState.STABLE,
                protocol_type=None if group is None else group.protocol_type,
                empty_since_ms=(
                    group.empty_since_ms if group is not None and group.generation_id > 0 else None
                ),
                subscribed=None if group is None else group.subscribed_topics,
                pending=pending,
            )
            expired += [(group_id, tp) for tp in gone]
            if (
                not has_members
                and not pending
                and len(gone) == len(offsets)
                and (group is None or group.state is GroupState.EMPTY)
            ):
                dead.append(group_id)
        return expired, dead

    # --- listing -----------------------------------------------------------------------

    def list_groups(self) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(group id, protocol type, state) of every group coordinated here; while an
        offsets partition loads, COORDINATOR_LOAD_IN_PROGRESS with the groups of those
        loaded (Kafka's handleListGroups answers currentGroups with it)."""
        with self._cond:
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
            names = set(self._groups) | set(self._offsets)
            out = []
            for name in sorted(names):
                group = self._groups.get(name)
                if group is None:  # known by its offsets alone
                    out.append((name, "", GroupState.EMPTY.value))
                else:
                    out.append((name, group.protocol_type or "", group.state.value))
            return error, out

    def describe_group(self, group_id: str) -> tuple[ErrorCode, dict[str, Any]]:
        """DescribeGroups' view of a group: its state, protocol and members, with each
        member's metadata and assignment once the group is Stable (Kafka's summary); a
        group unknown here is Dead."""
        with self._cond:
            error = self._state_of(group_id)
            if error != ErrorCode.NONE:
                return error, {}
            group = self._groups.get(group_id)
            if group is None:
                state = GroupState.EMPTY if group_id in self._offsets else GroupState.DEAD
                return ErrorCode.NONE, {"group_state": state.value, "members": []}
            stable = group.state is GroupState.STABLE and group.protocol_name is not None
            return ErrorCode.NONE, {
                "group_state": group.state.value,
                "protocol_type": group.protocol_type or "",
                "protocol_data": group.protocol_name if stable else "",
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": (
                            m.metadata(group.protocol_name)
                            if stable and group.protocol_name
                            else b""
                        ),
                        "member_assignment": m.assignment if stable else b"",
                    }
                    for m in group.members.values()
                ],
            }
