"""Followers fetch from their leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One fetcher thread per leader broker fetches every partition this broker follows from it,
with the Fetch API and this broker's replica id, as Kafka does. The leader counts those
fetches to decide who is in sync. A partition whose leader answers that it is not the
leader (or that our leader epoch is fenced or unknown), or any other error (the leader
cannot read it: CORRUPT_MESSAGE; logged), is set aside for replica.fetch.backoff.ms, or
until the controller's next LeaderAndIsr for it; the others are fetched on.

Each fetcher keeps an incremental fetch session with its leader (KIP-227, the fetcher's
half of Kafka's FetchSessionHandler): one full fetch lists every partition and creates
the session; after that a fetch lists only the partitions added or changed (fetch offset,
leader epoch, our log start offset, which each listing gives as Kafka's follower does)
since the last one and forgets those removed or set aside, and the leader
answers only partitions with news. An idle round is an empty request and an empty
response, whatever the number of partitions. The session starts over with a full fetch
when the leader does not know it, refuses its epoch, or the connection fails. A fetch
lists at most max_partitions_per_fetch, the changed partitions waiting longest first;
an answer is taken only if it was read from the partition's current fetch offset (Kafka's
processFetchRequest), as the leader's session may still hold an older one. A partition
whose answer brought records goes to the back of the order a full fetch lists them in
(Kafka's partitionStates.updateAndMoveToEnd), so a batch over partition_max_bytes gets
its turn to come first (KIP-74) when there is no session.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.compact import compacted
from broker.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.log_limit import OncePer
from storage.errors import (
    CorruptRecordError,
    KafkaStorageError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # flexible, topics by name (v13 switches to topic ids)
# Partitions one fetch request lists at most. A follower of 100,000 partitions would
# otherwise list them all in its session's first fetch: ~35 MB of decoded dicts at once
# in the leader (for each follower) and as much again for the answer, made while the
# leader's long-lived per-partition objects are, which then keep that memory fragmented.
# The rest join the session in the next fetches (KIP-227: an incremental fetch may add
# partitions), sent without long-polling until every partition is in.
MAX_PARTITIONS_PER_FETCH = 10_000
# A partition answered these is led elsewhere now, or not yet here: the next LeaderAndIsr
# tells. Any other error (a leader's damaged batch: CORRUPT_MESSAGE) will not clear by
# itself, and is logged as an error as Kafka's AbstractFetcherThread does.
_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


@dataclass(slots=True)
class FetchState:
    fetch_offset: int
    leader_epoch: int
    delayed_until: float = 0.0
    # A new leader: first find where our log diverged from its, and truncate there.
    truncating: bool = True
    # Fetched outside the leader's log (OFFSET_OUT_OF_RANGE): before fetching again, ask
    # where its log starts and ends (with ``truncating``: not fetched meanwhile).
    out_of_range: bool = False
    # Our log's start offset as the last request listing the partition gave it (-1: not
    # listed yet): one that moved since lists the partition again, as Kafka's
    # FetchSessionHandler re-sends a partition whose PartitionData changed.
    # _ANSWER_DROPPED: the leader's answer was not taken (see _partition_answered).
    log_start: int = -1


# A FetchState.log_start no log has: the leader's session answered the partition and the
# answer was not taken. Its session answers a partition only with news, so that news would
# not come again: the partition is forgotten by the next fetch and listed anew by the one
# after, which the session answers as a partition new to it.
_ANSWER_DROPPED = -2


class FollowerLog(Protocol):
    """What the fetcher needs of the follower's logs to truncate them (KIP-101)."""

    def follower_position(self, tp: TopicPartition) -> tuple[int | None, int, int]:
        """(latest leader epoch in the log or None, log end offset, high watermark)."""
        ...

    def follower_end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        """(the largest epoch of ours <= ``epoch``, where it ends in our log), as a leader
        answers OffsetsForLeaderEpoch; (-1, -1) if we know no such epoch."""
        ...

    def follower_log_start(self, tp: TopicPartition) -> int:
        """Our log's start offset (-1 without a log), which a fetch tells the leader."""
        ...

    def truncate(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        """Cut the log at ``offset`` as ``leader_id`` answered for ``leader_epoch``; the
        log end after, or None if the partition no longer follows it at that epoch."""
        ...

    def start_at(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        """Empty the log and start it at ``offset`` (the leader's log start, above all we
        hold); the log end after, or None if the partition no longer follows that leader
        at that epoch."""
        ...

    def checkpoint_truncated(self, tps: Collection[TopicPartition]) -> None:
        """Make the truncations of ``tps`` durable in the recovery-point checkpoints:
        called once a round's truncations are done, before anything is fetched after
        them."""
        ...


OFFSET_FOR_LEADER_EPOCH_VERSION = 3

LIST_OFFSETS_VERSION = 4  # the first with the current leader epoch (fencing)
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2


# (partition, leader id, leader epoch, fetched records, the leader's high watermark, the
# leader's log start offset) -> the next fetch offset, or None when the partition no longer
# follows that leader at that epoch (the answer was in flight while it moved on: dropped,
# not applied).
RecordsSink = Callable[[TopicPartition, int, int, memoryview | bytes | None, int, int], int | None]

# What the leader's session holds for a partition: (fetch offset, leader epoch).
_Position = tuple[int, int]


class FetchConnection(Protocol):
    def request(self, api_key: int, api_version: int, body: Mapping[str, Any]) -> Any: ...

    def close(self) -> None: ...


Connect = Callable[[tuple[str, int], str, float], FetchConnection]


_LogPosition = tuple[int | None, int, int]  # FollowerLog.follower_position's


def _truncation_plan(
    positions: Mapping[TopicPartition, _LogPosition],
) -> tuple[
    dict[TopicPartition, _LogPosition],
    dict[TopicPartition, tuple[int, int]],
    dict[TopicPartition, int],
]:
    """How each partition about to be fetched is truncated, from its (latest epoch, log
    end, high watermark): asked about its epoch (KIP-101) if it has records; without an
    epoch, cut at its high watermark if records lie above it, as (log end, high
    watermark) (Kafka's fetchTruncatingPartitions sets these apart for
    truncateToHighWatermark); or fetched from its log end as it is."""
    asks: dict[TopicPartition, _LogPosition] = {}
    to_high_watermark: dict[TopicPartition, tuple[int, int]] = {}
    done: dict[TopicPartition, int] = {}
    for tp, (epoch, leo, hw) in positions.items():
        if epoch is not None and leo > 0:
            # An empty log is not asked, unlike Kafka's fetchTruncatingPartitions: there is
            # nothing to cut, and asking made every leadership move of 10,000s of empty
            # partitions cost a round trip and an epoch checkpoint write each. The entry of
            # a leadership held over no records goes with the first batch fetched (any
            # other epoch is assigned) or the next leadership here.
            asks[tp] = (epoch, leo, hw)
        elif epoch is None and leo > hw:
            to_high_watermark[tp] = (leo, hw)
        else:
            done[tp] = leo
    return asks, to_high_watermark, done


def _connect(
    endpoint: tuple[str, int], client_id: str, timeout_s: float, receive_buffer_bytes: int = -1
) -> FetchConnection:
    return KafkaConnection(
        *endpoint,
        client_id=client_id,
        timeout_s=timeout_s,
        receive_buffer_bytes=receive_buffer_bytes,
    )


@dataclass
class _Fetch:
    """One fetch request being made, and what it tells the leader's session."""

    full: bool
    session_id: int
    epoch: int
    listed: dict[TopicPartition, _Position]
    forgotten: list[TopicPartition] = field(default_factory=list)
    # More partitions wait to be listed: the leader should answer at once, not long-poll.
    more: bool = False
    # Our log start offset of each listed partition (FetchState.log_start as listed).
    log_starts: dict[TopicPartition, int] = field(default_factory=dict)


class ReplicaFetcherThread:
    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        endpoint: tuple[str, int],
        sink: RecordsSink,
        follower_log: FollowerLog | None = None,
        *,
        max_wait_ms: int = 500,
        backoff_ms: int = 1000,
        max_bytes: int = 10 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        min_bytes: int = 1,
        socket_timeout_s: float = 30.0,
        connect: Connect = _connect,
        max_partitions_per_fetch: int = MAX_PARTITIONS_PER_FETCH,
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.sink = sink
        self.follower_log = follower_log
        self.max_wait_ms = max_wait_ms
        self.backoff_s = backoff_ms / 1000
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.min_bytes = min_bytes
        self.socket_timeout_s = socket_timeout_s
        self.connect = connect
        self.max_partitions_per_fetch = max_partitions_per_fetch
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._conn: FetchConnection | None = None
        # The session with the leader: its id (0: none) and the epoch of the next request
        # (0: a full fetch, which closes the session of that id and opens a new one).
        self.session_id = INVALID_SESSION_ID
        self.session_epoch = INITIAL_EPOCH
        # What the leader's session holds, as of the last answered request.
        self._sent: dict[TopicPartition, _Position] = {}
        # Partitions that may differ from what the session holds: only these are looked
        # at to build an incremental request, so an idle round costs nothing per partition.
        # A dict for its order: a fetch capped at max_partitions_per_fetch lists those
        # waiting longest, so none waits forever behind partitions that keep changing.
        self._dirty: dict[TopicPartition, None] = {}
        # Partitions still to be truncated (their state's ``truncating``): each round looks
        # at these, not at every partition followed (tens of thousands, twice a second).
        self._truncating: set[TopicPartition] = set()
        # (until, sequence, partition): when set-aside partitions may be fetched again.
        self._delays: list[tuple[float, int, TopicPartition]] = []
        self._sequence = itertools.count()
        self.full_fetches = 0  # how many full fetches were made (sessions started)
        # Once a minute per partition: it is fetched again at each backoff's end.
        self._error_logged = OncePer(60.0)
        # The leader had no room for a session: every fetch is a full one, so each lists
        # every partition (a partition left for a later fetch would never be fetched).
        self._sessionless = False
        self.thread = threading.Thread(
            target=self._run, name=f"replica-fetcher-{broker_id}-from-{leader_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    def add_all(self, added: Iterable[tuple[TopicPartition, FetchState]]) -> None:
        """Partitions to fetch, under one lock and with one wake-up: a LeaderAndIsr can
        make this broker follow thousands at once."""
        with self._lock:
            for tp, state in added:
                self.partitions[tp] = state
                self._dirty[tp] = None
                if state.truncating:
                    self._truncating.add(tp)
                else:
                    self._truncating.discard(tp)
        self._wake.set()

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                if self.partitions.pop(tp, None) is not None:
                    self._dirty[tp] = None
                self._truncating.discard(tp)
            if not self._truncating:
                self._truncating.clear()  # gives back its table (see _truncated)
            self.partitions = compacted(self.partitions)

    def is_empty(self) -> bool:
        with self._lock:
            return not self.partitions

    def fetched(self) -> set[TopicPartition]:
        with self._lock:
            return set(self.partitions)

    def states(self) -> list[tuple[TopicPartition, FetchState]]:
        with self._lock:
            return list(self.partitions.items())

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            try:
                if self.follower_log is not None:
                    self._truncate_new_partitions()
                fetch = self._build_fetch()
                if fetch is None:
                    self._wake.wait(self._idle_wait())
                    continue
                self._fetch_once(fetch)
            except OSError as e:
                log.info(
                    "fetch from leader %d at %s:%d failed: %s", self.leader_id, *self.endpoint, e
                )
                self._close()
                self._stopped.wait(self.backoff_s)
            except Exception:
                log.exception("fetcher from leader %d failed", self.leader_id)
                self._close()
                self._stopped.wait(self.backoff_s)
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        # Whether the leader saw the last request is unknown: start over with a full
        # fetch, which also closes the old session on the leader if it still has it.
        with self._lock:
            self._restart_session(close=True)

    def _restart_session(self, *, close: bool) -> None:
        if not close:
            self.session_id = INVALID_SESSION_ID
        self.session_epoch = INITIAL_EPOCH
        self._sent = {}

    def _idle_wait(self) -> float:
        with self._lock:
            if self._delays:
                return max(0.0, min(1.0, self._delays[0][0] - time.monotonic()))
        return 1.0

    def _truncate_new_partitions(self) -> None:
        """KIP-101: for partitions just followed, ask the leader where our latest leader
        epoch ended in its log, and truncate ours there (not at a guess: a follower that
        once led may hold records the new leader never had). A log with records but no
        epoch (its epochs lost) has nothing to ask about: it is cut at its high
        watermark, the most it can know the leader holds too (Kafka's
        truncateToHighWatermark)."""
        follower_log = self.follower_log
        assert follower_log is not None
        now = time.monotonic()
        with self._lock:
            if not self._truncating:
                return
            states = self.partitions
            pending = {
                tp: s
                for tp, s in ((tp, states[tp]) for tp in self._truncating)
                if s.delayed_until <= now
            }
        if not pending:
            return
        resets = {tp: s for tp, s in pending.items() if s.out_of_range}
        if resets:
            pending = {tp: s for tp, s in pending.items() if not s.out_of_range}
            self._reset_out_of_range(resets)
        if not pending:
            return
        positions = {tp: follower_log.follower_position(tp) for tp in pending}
        asks, to_high_watermark, done = _truncation_plan(positions)
        cut: list[TopicPartition] = []
        for tp, (leo, hw) in to_high_watermark.items():
            why = f"no leader epoch in our log: cut at our high watermark {hw}"
            try:
                offset = follower_log.truncate(
                    tp, self.leader_id, pending[tp].leader_epoch, hw, why
                )
            except KafkaStorageError as e:
                self._mark_partition_failed(tp, pending[tp], e)
                continue
            if offset is not None:
                done[tp] = offset
                if offset < leo:
                    cut.append(tp)
        if asks:
            if self._conn is None:
                self._conn = self.connect(
                    self.endpoint, f"replica-fetcher-{self.broker_id}", self.socket_timeout_s
                )
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for tp, (epoch, _leo, _hw) in asks.items():
                by_topic.setdefault(tp.topic, []).append(
                    {
                        "partition": tp.partition,
                        "current_leader_epoch": pending[tp].leader_epoch,
                        "leader_epoch": epoch,
                    }
                )
            response = self._conn.request(
                ApiKey.OFFSET_FOR_LEADER_EPOCH,
                OFFSET_FOR_LEADER_EPOCH_VERSION,
                {
                    "replica_id": self.broker_id,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                },
            )
            for topic in response.get("topics", []):
                for pr in topic["partitions"]:
                    tp = TopicPartition(topic["topic"], pr["partition"])
                    if tp not in asks:
                        continue
                    if pr["error_code"]:
                        self._delay(tp, pending[tp])  # the leader does not know it leads yet
                        continue
                    _ours, leo, hw = asks[tp]
                    epoch, end = pr["leader_epoch"], pr["end_offset"]
                    complete = True
                    if epoch < 0 or end < 0:
                        target = hw  # the leader has no epoch this old: fall back (KIP-101)
                    else:
                        # KIP-279 (Kafka's getOffsetTruncationState): where our history
                        # has the epoch the leader answered with, the logs agree up to the
                        # earlier of its two ends. Where it lacks it, ours diverged before:
                        # cut where our largest epoch below it ended, and ask again about
                        # that one (one answer would keep our records of an epoch the
                        # leader never had, below its new records).
                        theirs, our_end = follower_log.follower_end_offset_for_epoch(tp, epoch)
                        if theirs < 0:
                            target = end
                        elif theirs != epoch:
                            target, complete = our_end, False
                        else:
                            target = min(our_end, end)
                    why = f"leader {self.leader_id} has epoch {epoch} ending at {end}"
                    try:
                        offset = follower_log.truncate(
                            tp, self.leader_id, pending[tp].leader_epoch, min(target, leo), why
                        )
                    except KafkaStorageError as e:
                        self._mark_partition_failed(tp, pending[tp], e)
                        continue
                    if offset is not None:
                        if complete:
                            done[tp] = offset
                        if offset < leo:
                            cut.append(tp)
        if cut:
            # (A checkpoint that cannot be written fails its directory, reported.)
            follower_log.checkpoint_truncated(cut)
        self._truncated(pending, done)

    def _truncated(
        self, pending: Mapping[TopicPartition, FetchState], done: dict[TopicPartition, int]
    ) -> None:
        """These partitions are truncated (or reset): fetched again from ``done``'s offsets."""
        with self._lock:
            for tp, offset in done.items():
                state = self.partitions.get(tp)
                if state is pending[tp]:
                    state.truncating = state.out_of_range = False
                    self._truncating.discard(tp)
                    state.fetch_offset = offset
                    self._dirty[tp] = None
            if not self._truncating:
                # A set never shrinks: one that held every partition of a LeaderAndIsr
                # (tens of thousands, 1-2 MB) would keep its table while empty.
                self._truncating.clear()

    def _reset_out_of_range(self, resets: dict[TopicPartition, FetchState]) -> None:
        """Kafka's fetchOffsetAndTruncate, for partitions whose fetch offset the leader
        answered OFFSET_OUT_OF_RANGE: ask where its log ends and starts (ListOffsets as
        its follower). Ending below ours (an unclean election made it leader): cut ours
        there. Starting above ours (retention deleted what we lack: we were away, or are
        a new replica of an old log): empty ours and start there. Else fetch again from
        our end."""
        follower_log = self.follower_log
        assert follower_log is not None
        if self._conn is None:
            self._conn = self.connect(
                self.endpoint, f"replica-fetcher-{self.broker_id}", self.socket_timeout_s
            )
        ends = self._list_offsets(resets, LATEST_TIMESTAMP)
        starts = self._list_offsets(resets, EARLIEST_TIMESTAMP)
        done: dict[TopicPartition, int] = {}
        cut: list[TopicPartition] = []
        for tp, state in resets.items():
            end, start = ends.get(tp), starts.get(tp)
            if end is None or start is None:
                self._delay(tp, state)  # the leader does not know it leads yet
                continue
            _epoch, leo, _hw = follower_log.follower_position(tp)
            why = f"leader {self.leader_id}'s log is [{start}, {end}), ours ends at {leo}"
            try:
                if end < leo:
                    offset = follower_log.truncate(tp, self.leader_id, state.leader_epoch, end, why)
                elif start > leo:
                    offset = follower_log.start_at(
                        tp, self.leader_id, state.leader_epoch, start, why
                    )
                else:
                    offset = leo
            except KafkaStorageError as e:
                self._mark_partition_failed(tp, state, e)
                continue
            if offset is not None:
                done[tp] = offset
                if offset != leo:
                    cut.append(tp)
        if cut:
            follower_log.checkpoint_truncated(cut)
        self._truncated(resets, done)

    def _list_offsets(
        self, partitions: Collection[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, int]:
        """The leader's offsets (as its follower: the latest is its log end) of the
        partitions it answered without error."""
        assert self._conn is not None
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in partitions:
            state = self.partitions.get(tp)
            epoch = state.leader_epoch if state is not None else -1
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "current_leader_epoch": epoch,
                    "timestamp": timestamp,
                }
            )
        response = self._conn.request(
            ApiKey.LIST_OFFSETS,
            LIST_OFFSETS_VERSION,
            {
                "replica_id": self.broker_id,
                "isolation_level": 0,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        found: dict[TopicPartition, int] = {}
        for topic in response.get("topics", []):
            for answer in topic["partitions"]:
                if not answer["error_code"] and answer["offset"] >= 0:
                    found[TopicPartition(topic["name"], answer["partition_index"])] = answer[
                        "offset"
                    ]
        return found

    def _mark_partition_failed(
        self, tp: TopicPartition, state: FetchState, error: StorageError
    ) -> None:
        """Kafka's markPartitionFailed: this fetcher stops fetching it, and goes on with
        the others, until a LeaderAndIsr follows it again. A failed log's directory was
        reported where the error happened, and the failure handler takes it offline."""
        log.error("stopped fetching %s from leader %d: %s", tp, self.leader_id, error)
        with self._lock:
            if self.partitions.get(tp) is state:
                del self.partitions[tp]
                self._dirty[tp] = None
                self._truncating.discard(tp)

    def _delay(self, tp: TopicPartition, state: FetchState) -> None:
        with self._lock:
            if self.partitions.get(tp) is state:
                state.delayed_until = until = time.monotonic() + self.backoff_s
                heapq.heappush(self._delays, (until, next(self._sequence), tp))
                self._dirty[tp] = None

    def _build_fetch(self) -> _Fetch | None:
        """The next request, or None when there is nothing to fetch."""
        now = time.monotonic()
        with self._lock:
            while self._delays and self._delays[0][0] <= now:
                self._dirty[heapq.heappop(self._delays)[2]] = None
            most = len(self.partitions) if self._sessionless else self.max_partitions_per_fetch
            dirty = self._dirty
            if self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH):
                dirty.clear()
                listed: dict[TopicPartition, _Position] = {}
                starts: dict[TopicPartition, int] = {}
                for tp, state in self.partitions.items():
                    if state.delayed_until <= now and not (state.truncating and self.follower_log):
                        if len(listed) < most:
                            listed[tp] = (state.fetch_offset, state.leader_epoch)
                            state.log_start = starts[tp] = self._log_start(tp)
                        else:
                            dirty[tp] = None  # listed by the next, incremental, fetches
                if not listed:
                    return None
                return _Fetch(
                    True,
                    self.session_id,
                    self.session_epoch,
                    listed,
                    more=bool(dirty),
                    log_starts=starts,
                )
            listed = {}
            starts = {}
            forgotten: list[TopicPartition] = []
            taken: list[TopicPartition] = []
            again: list[TopicPartition] = []  # forgotten now, to be listed anew next
            for tp in dirty:  # oldest first
                if len(listed) + len(forgotten) >= most:
                    break
                taken.append(tp)
                s = self.partitions.get(tp)
                held = self._sent.get(tp)
                if s is None or s.delayed_until > now or (s.truncating and self.follower_log):
                    if held is not None:
                        forgotten.append(tp)
                elif held is not None and s.log_start == _ANSWER_DROPPED:
                    forgotten.append(tp)
                    again.append(tp)
                else:
                    start = self._log_start(tp)
                    if held != (s.fetch_offset, s.leader_epoch) or start != s.log_start:
                        listed[tp] = (s.fetch_offset, s.leader_epoch)
                        s.log_start = starts[tp] = start
            for tp in taken:
                del dirty[tp]
            if not dirty:
                dirty.clear()  # gives back the table its deletions left (a dict never shrinks)
            else:
                # Mostly deleted entries (its front): copied, so neither its memory nor the
                # next fetch's walk past them to the oldest left lasts.
                self._dirty = compacted(dirty)
            for tp in again:
                self._dirty[tp] = None
            if not self._sent and not listed:
                return None
            return _Fetch(
                False,
                self.session_id,
                self.session_epoch,
                listed,
                forgotten,
                more=bool(dirty),
                log_starts=starts,
            )

    def _log_start(self, tp: TopicPartition) -> int:
        follower_log = self.follower_log
        return follower_log.follower_log_start(tp) if follower_log is not None else -1

    def _request_body(self, fetch: _Fetch) -> dict[str, Any]:
        # One topic entry per run of its partitions, as Kafka's FetchRequest.Builder
        # makes them: the leader reads in the request's order, which must stay ours.
        topics: list[dict[str, Any]] = []
        partitions: list[dict[str, Any]] = []
        starts = fetch.log_starts
        for tp, (offset, epoch) in fetch.listed.items():
            if not topics or topics[-1]["topic"] != tp.topic:
                partitions = []
                topics.append({"topic": tp.topic, "partitions": partitions})
            partitions.append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": epoch,
                    "fetch_offset": offset,
                    "last_fetched_epoch": -1,
                    # Our log's start, as Kafka's ReplicaFetcherThread.buildFetch sends it
                    # (the leader's low watermark, for DeleteRecords, is the lowest).
                    "log_start_offset": starts.get(tp, -1),
                    "partition_max_bytes": self.partition_max_bytes,
                }
            )
        forgotten: dict[str, list[int]] = {}
        for tp in fetch.forgotten:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        return {
            "replica_id": self.broker_id,
            "max_wait_ms": 0 if fetch.more else self.max_wait_ms,
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "isolation_level": 0,
            "session_id": fetch.session_id,
            "session_epoch": fetch.epoch,
            "topics": topics,
            "forgotten_topics_data": [
                {"topic": t, "partitions": ps} for t, ps in forgotten.items()
            ],
            "rack_id": "",
        }

    def _fetch_once(self, fetch: _Fetch) -> None:
        if self._conn is None:
            self._conn = self.connect(
                self.endpoint,
                f"replica-fetcher-{self.broker_id}",
                self.socket_timeout_s + self.max_wait_ms / 1000,
            )
        if fetch.full:
            self.full_fetches += 1
        response = self._conn.request(ApiKey.FETCH, FETCH_VERSION, self._request_body(fetch))
        code = response.get("error_code", 0)
        if code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            # The leader lost the session (restarted, evicted it) or we are out of step:
            # start over. An unknown id need not be closed; a known one must be.
            log.info(
                "fetch session %d with leader %d: %s; starting a new one",
                fetch.session_id,
                self.leader_id,
                ErrorCode.of(code).name,
            )
            with self._lock:
                self._restart_session(close=code == ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            return
        if code:
            raise OSError(f"fetch refused: {ErrorCode.of(code).name}")
        self._session_answered(fetch, response.get("session_id", INVALID_SESSION_ID))
        for topic_response in response.get("responses", []):
            topic = topic_response["topic"]
            for pr in topic_response["partitions"]:
                self._partition_answered(fetch, TopicPartition(topic, pr["partition_index"]), pr)

    def _session_answered(self, fetch: _Fetch, session_id: int) -> None:
        with self._lock:
            if fetch.full:
                # Session id 0: the leader had no room for a session; fetch in full again.
                self._sessionless = not session_id
                self.session_id = session_id
                self.session_epoch = next_epoch(INITIAL_EPOCH) if session_id else INITIAL_EPOCH
                self._sent = dict(fetch.listed) if session_id else {}
                if session_id:
                    log.debug(
                        "fetch session %d with leader %d: %d partitions",
                        session_id,
                        self.leader_id,
                        len(fetch.listed),
                    )
            elif session_id == INVALID_SESSION_ID:
                # We forgot every partition and the leader closed the session.
                self._restart_session(close=False)
            else:
                self.session_epoch = next_epoch(self.session_epoch)
                for tp in fetch.forgotten:
                    self._sent.pop(tp, None)
                self._sent.update(fetch.listed)
                if fetch.forgotten:
                    self._sent = compacted(self._sent)

    def _partition_answered(self, fetch: _Fetch, tp: TopicPartition, pr: dict[str, Any]) -> None:
        with self._lock:
            state = self.partitions.get(tp)
            position = fetch.listed.get(tp) or self._sent.get(tp)
            current = _answers_current_state(
                position, state, time.monotonic(), self.follower_log is not None
            )
            if not current and state is not None and tp in self._sent:
                # Set aside, or moved on since its session position: the session still
                # holds it and took this answer as told. A capped fetch (failovers: tens
                # of thousands set aside at once) need not have forgotten it; see
                # _ANSWER_DROPPED.
                state.log_start = _ANSWER_DROPPED
                self._dirty[tp] = None
        if not current:
            # The change is already marked to be sent, and this answer is for what it
            # replaced: applied, records read from an older offset would land at our log
            # end (the partition failed for it).
            log.debug("fetch of %s from %d: answer for %s ignored", tp, self.leader_id, position)
            return
        assert state is not None
        assert position is not None
        code = pr["error_code"]
        if code == ErrorCode.NONE:
            try:
                offset = self.sink(
                    tp,
                    self.leader_id,
                    state.leader_epoch,
                    pr.get("records"),
                    pr["high_watermark"],
                    pr.get("log_start_offset", -1),  # -1: not told (Fetch v0-v4)
                )
            except CorruptRecordError as e:
                # Kafka's processFetchRequest: logged, and this partition fetched again
                # after the backoff (a leader's log caught mid-truncation or mid-write is
                # read right later); the others go on.
                log.error(
                    "invalid records from leader %d for %s at %d: %s",
                    self.leader_id,
                    tp,
                    state.fetch_offset,
                    e,
                )
                self._delay(tp, state)
                return
            except StorageError as e:
                # Its log failed, or cannot take what the leader has (a batch starting
                # inside what it holds): Kafka's markPartitionFailed, until the controller
                # says more of it. Raised on, it stopped every partition from this leader.
                self._mark_partition_failed(tp, state, e)
                return
            if offset is not None and offset != position[0] and not pr.get("records"):
                # Nothing came, yet our log no longer ends where we fetched from: something
                # else wrote it. Taken as our position, we would fetch on past records the
                # leader never had (Kafka's "Offset mismatch": the partition fails).
                mismatch = UnexpectedAppendOffsetError(
                    f"the log of {tp} ends at {offset}, not where it was fetched from",
                    expected=position[0],
                    found=offset,
                )
                self._mark_partition_failed(tp, state, mismatch)
                return
            with self._lock:
                if (
                    offset is not None
                    and self.partitions.get(tp) is state
                    and offset != state.fetch_offset
                ):
                    state.fetch_offset = offset
                    self._dirty[tp] = None
                    # To the back of the order full fetches list partitions in (Kafka's
                    # partitionStates.updateAndMoveToEnd): only the first partition with
                    # records may exceed partition_max_bytes (KIP-74), so in a fixed order
                    # a batch over it behind a busy partition would never be fetched.
                    # An incremental fetch lists what changed, whatever this order.
                    del self.partitions[tp]
                    self.partitions[tp] = state
                elif (
                    offset is not None
                    and self.partitions.get(tp) is state
                    and state.log_start != self._log_start(tp)
                ):
                    # Our log start followed the leader's: the next fetch tells it.
                    self._dirty[tp] = None
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and self.follower_log is not None:
            # Our log lies outside the leader's: find out how, before fetching again (a
            # fetch from the same offset would be answered so forever).
            log.info("fetch of %s from %d at %d: out of range", tp, self.leader_id, position[0])
            with self._lock:
                if self.partitions.get(tp) is state:
                    state.out_of_range = state.truncating = True
                    self._truncating.add(tp)
                    self._dirty[tp] = None
            return
        # Not (yet) the leader at our epoch, or the leader cannot read it: set it aside,
        # out of the session, until the backoff ends or the controller tells us more.
        error = ErrorCode.of(code)
        if error not in _LEADERSHIP_ERRORS and self._error_logged(tp):
            log.error(
                "fetch of %s from leader %d at %d: %s (logged once a minute)",
                tp,
                self.leader_id,
                position[0],
                error.name,
            )
        else:
            log.debug("fetch of %s from %d: %s", tp, self.leader_id, error.name)
        with self._lock:
            if self.partitions.get(tp) is state:
                state.delayed_until = until = time.monotonic() + self.backoff_s
                heapq.heappush(self._delays, (until, next(self._sequence), tp))
                self._dirty[tp] = None


def _answers_current_state(
    position: _Position | None, state: FetchState | None, now: float, truncates: bool
) -> bool:
    """Whether a leader's answer, read at ``position`` (what its session held), is for
    the partition's current state: Kafka's processFetchRequest takes one only if its fetch
    offset is the partition's and the partition is ready to fetch, and ignores the others.
    A position differs when the partition moved away, its leader epoch changed while the
    fetch was out, or its fetch offset moved and a fetch capped at
    max_partitions_per_fetch has not told the leader yet (whose session may read it again
    from the old offset)."""
    return (
        state is not None
        and position == (state.fetch_offset, state.leader_epoch)
        and state.delayed_until <= now
        and not (state.truncating and truncates)
    )


class ReplicaFetcherManager:
    """Keeps one fetcher per leader for the partitions this broker follows."""

    def __init__(
        self,
        broker_id: int,
        sink: RecordsSink,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        *,
        max_wait_ms: int = 500,
        backoff_ms: int = 1000,
        max_bytes: int = 10 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        min_bytes: int = 1,
        socket_timeout_s: float = 30.0,
        receive_buffer_bytes: int = -1,
        follower_log: FollowerLog | None = None,
        connect: Connect | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.sink = sink
        self.follower_log = follower_log
        self.endpoint_of = endpoint_of
        # Kafka's replica.fetch.wait.max.ms, replica.fetch.backoff.ms,
        # replica.fetch.response.max.bytes, replica.fetch.max.bytes (per partition),
        # replica.fetch.min.bytes, replica.socket.timeout.ms and (in the connections)
        # replica.socket.receive.buffer.bytes.
        self.max_wait_ms = max_wait_ms
        self.backoff_ms = backoff_ms
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.min_bytes = min_bytes
        self.socket_timeout_s = socket_timeout_s
        self.connect: Connect = connect or functools.partial(
            _connect, receive_buffer_bytes=receive_buffer_bytes
        )
        self._fetchers: dict[int, ReplicaFetcherThread] = {}
        self._lock = threading.Lock()

    def follow(self, partitions: list[tuple[TopicPartition, int, int, int]]) -> None:
        """(partition, leader id, leader epoch, fetch offset) for each followed partition."""
        with self._lock:
            moving = [tp for tp, *_ in partitions]
            for existing in self._fetchers.values():
                existing.remove(moving)
            by_leader: dict[int, list[tuple[TopicPartition, FetchState]]] = {}
            for tp, leader, epoch, offset in partitions:
                if leader >= 0 and leader != self.broker_id:
                    by_leader.setdefault(leader, []).append((tp, FetchState(offset, epoch)))
            for leader, added in by_leader.items():
                endpoint = self.endpoint_of(leader)
                if endpoint is None:
                    log.warning(
                        "no address known for leader %d of %d partitions (%s first); "
                        "not fetching them yet",
                        leader,
                        len(added),
                        added[0][0],
                    )
                    continue
                fetcher: ReplicaFetcherThread | None = self._fetchers.get(leader)
                if fetcher is not None and fetcher.endpoint != endpoint:
                    fetcher = self._move(fetcher, endpoint)
                if fetcher is None:
                    fetcher = self._fetcher(leader, endpoint, [])
                fetcher.add_all(added)
            self._drop_idle()

    def refresh_endpoints(self) -> None:
        """Move the fetchers whose leader now has another address (it restarted on another
        port, say, while keeping its leader epochs: a LeaderAndIsr with the same epoch
        changes nothing, so only the metadata says so). Each partition starts over by
        asking where the logs diverged: the restarted leader may have lost its tail."""
        with self._lock:
            for leader, fetcher in list(self._fetchers.items()):
                endpoint = self.endpoint_of(leader)
                if endpoint is not None and endpoint != fetcher.endpoint:
                    self._move(fetcher, endpoint)

    def _move(
        self, fetcher: ReplicaFetcherThread, endpoint: tuple[str, int]
    ) -> ReplicaFetcherThread:
        """A fetcher in its place at the leader's new address, with its partitions (call
        with the lock held)."""
        log.info(
            "leader %d moved from %s:%d to %s:%d; fetching from there",
            fetcher.leader_id,
            *fetcher.endpoint,
            *endpoint,
        )
        fetcher.stop()
        return self._fetcher(
            fetcher.leader_id,
            endpoint,
            [(tp, FetchState(s.fetch_offset, s.leader_epoch)) for tp, s in fetcher.states()],
        )

    def _fetcher(
        self,
        leader: int,
        endpoint: tuple[str, int],
        partitions: list[tuple[TopicPartition, FetchState]],
    ) -> ReplicaFetcherThread:
        """A new, started fetcher from ``leader`` (call with the lock held)."""
        fetcher = ReplicaFetcherThread(
            self.broker_id,
            leader,
            endpoint,
            self.sink,
            self.follower_log,
            max_wait_ms=self.max_wait_ms,
            backoff_ms=self.backoff_ms,
            max_bytes=self.max_bytes,
            partition_max_bytes=self.partition_max_bytes,
            min_bytes=self.min_bytes,
            socket_timeout_s=self.socket_timeout_s,
            connect=self.connect,
        )
        fetcher.add_all(partitions)
        self._fetchers[leader] = fetcher
        fetcher.start()
        return fetcher

    def followed(self) -> dict[int, set[TopicPartition]]:
        """The partitions fetched, by leader."""
        with self._lock:
            fetchers = list(self._fetchers.items())
        return {leader: fetcher.fetched() for leader, fetcher in fetchers}

    def unfollow(self, tps: list[TopicPartition]) -> None:
        with self._lock:
            for fetcher in self._fetchers.values():
                fetcher.remove(tps)
            self._drop_idle()

    def _drop_idle(self) -> None:
        for leader, fetcher in list(self._fetchers.items()):
            if fetcher.is_empty():
                fetcher.stop()
                del self._fetchers[leader]

    def close(self) -> None:
        with self._lock:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
        for f in fetchers:
            f.stop()
