"""Incremental fetch sessions, the leader's side (KIP-227; Kafka's FetchSession.scala).

A fetcher that sends every partition it follows on every fetch pays for all of them on
both sides even when nothing happens. With a session the leader remembers each
partition's fetch parameters (fetch offset, max bytes, current leader epoch) and what
it last answered (high watermark, last stable offset, log start offset); after one full
fetch the fetcher sends only the partitions it added or changed and the ones it forgets,
and the leader answers only the partitions that have something to say: records, a
changed high watermark, last stable offset or log start offset, or an error.

The request's session id and epoch say what it is:

* epoch -1 (FINAL): a full fetch without a session (an id given is closed);
* epoch 0 (INITIAL): a full fetch that creates a session (an id given is closed first);
  the response carries the new id, or 0 when the cache had no room;
* epoch N > 0 with an id: an incremental fetch, accepted only when N is exactly the
  session's next epoch (else INVALID_FETCH_SESSION_EPOCH); an unknown id is
  FETCH_SESSION_ID_NOT_FOUND. Epochs wrap from 2^31-1 to 1.

The cache holds up to `max_entries` sessions (max.incremental.fetch.session.cache.slots,
1000 in Kafka). A new session may take the slot of one that has been idle longer than
`eviction_ms` (min.incremental.fetch.session.eviction.ms), or else of the least valuable
evictable one, Kafka's rule: followers' sessions ("privileged") outrank consumers', a
larger session outranks a smaller one, and no session is evictable in its first
`eviction_ms` except a consumer's by a follower. Unlike Kafka, sessions idle longer than
`eviction_ms` are also dropped as soon as the cache is next used, not only when a slot
is needed: a fetcher that went away (a follower restarted gets a new session) would
otherwise keep its partitions in memory indefinitely.

Locks: the cache's lock may be held while taking a session's, never the other way round.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.compact import compacted
from wire.errors import ErrorCode
from zkdata.znodes import SharedValues, TopicPartition

if TYPE_CHECKING:
    from broker.replica_manager import Partition

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

DEFAULT_MAX_ENTRIES = 1000
DEFAULT_EVICTION_MS = 120_000

# One partition of a fetch response, as the wire codec has it (FetchResponse
# PartitionData: partition_index, error_code, high_watermark, last_stable_offset,
# log_start_offset, records, preferred_read_replica, ...).
PartitionData = dict[str, Any]


def next_epoch(epoch: int) -> int:
    """The epoch that follows `epoch` (FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH  # nothing follows the final epoch
    if epoch == _MAX_EPOCH:
        return 1  # wrap around, skipping INITIAL_EPOCH
    return epoch + 1


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class PartitionRequest:
    """What a fetch request asks of one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the follower's; -1 from consumers

    @classmethod
    def from_wire(cls, fp: Mapping[str, Any]) -> PartitionRequest:
        """From a FetchRequest FetchPartition (any version: absent fields default)."""
        return cls(
            fp["fetch_offset"],
            fp["partition_max_bytes"],
            fp.get("current_leader_epoch", -1),
            fp.get("last_fetched_epoch", -1),
            fp.get("log_start_offset", -1),
        )


_SHARED_SIZES: SharedValues[int] = SharedValues(1024)


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the fetcher's last request parameters, and what the
    leader last answered for it (-1: nothing yet, or an error, so the next answer goes
    out whatever it says).

    Of a request's parameters, those the leader uses, but not the fetcher's log start
    offset (Kafka keeps it; ours goes unused) nor its last fetched epoch, which only a
    fetcher that checks divergence on fetch sends (our followers ask with
    OffsetForLeaderEpoch and send none): the session keeps those few apart
    (FetchSession.last_fetched_epochs). A leader holds one of these per partition per
    follower; the two more made it 112 bytes, not 96."""

    topic_partition: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # A follower's session: the leader's partition as of the leader's last look at it
    # (None: not looked at yet, or not led here then); with ``fetch_offset`` it is the
    # follower's position the leader records. Kept here, not in a dict of its own: a
    # leader holds one per partition per follower.
    partition: Partition | None = None

    @classmethod
    def from_request(cls, tp: TopicPartition, req: PartitionRequest) -> CachedPartition:
        return cls(
            tp,
            req.fetch_offset,
            # One int for the few sizes fetchers ask for (1 MB: a new object each time one
            # is decoded), not one per partition of each session.
            _SHARED_SIZES(req.max_bytes),
            req.current_leader_epoch,
        )

    def update_request(self, req: PartitionRequest) -> None:
        self.fetch_offset = req.fetch_offset
        if req.max_bytes != self.max_bytes:  # else keep the shared int (see from_request)
            self.max_bytes = _SHARED_SIZES(req.max_bytes)
        self.current_leader_epoch = req.current_leader_epoch

    def maybe_update_response(self, data: PartitionData, update: bool) -> bool:
        """Whether `data` must be sent to the fetcher of an incremental session; with
        `update`, remember it as sent (CachedPartition.maybeUpdateResponseData)."""
        must = False
        records = data.get("records")
        if records is not None and len(records) > 0:
            must = True
        hw = data["high_watermark"]
        if hw != self.high_watermark:
            must = True
            if update:
                self.high_watermark = hw
        lso = data.get("last_stable_offset", -1)
        if lso != self.last_stable_offset:
            must = True
            if update:
                self.last_stable_offset = lso
        log_start = data.get("log_start_offset", -1)
        if log_start != self.log_start_offset:
            must = True
            if update:
                self.log_start_offset = log_start
        if data.get("preferred_read_replica", -1) >= 0:
            must = True
        if "diverging_epoch" in data:
            # Always answered, so that the fetcher truncates (Kafka's
            # maybeUpdateResponseData).
            must = True
        if data["error_code"] != ErrorCode.NONE:
            # Errors always go out; forgetting what was sent makes the partition go out
            # again once the error clears.
            must = True
            if update:
                self.high_watermark = -1
                self.last_stable_offset = -1
                self.log_start_offset = -1
        return must


class FetchClock:
    """When a follower's session last fetched (ms since the epoch). A fetch round that
    lists no partition moves this one clock instead of touching each partition of the
    session (tens of thousands on an idle broker); the leader reads a follower whose
    position has not moved as caught up as of this time (ReplicaManager).

    ``forgot`` is set when the session forgets a partition (its follower state stops
    reading this clock): the ISR expiry scan then reads every partition again, not only
    those watched since its last scan (broker/isr_expiry.py)."""

    __slots__ = ("forgot", "ms")

    def __init__(self) -> None:
        self.ms = 0
        self.forgot = False


class FetchSession:
    """One session: its partitions (in response-fairness order), epoch and use times.

    Guarded by `lock` (take the cache's lock first when both are needed)."""

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[TopicPartition, CachedPartition],
        now_ms: int,
        replica_id: int = -1,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.replica_id = replica_id  # the follower's broker id; -1 for a consumer
        self.partitions = partitions
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)  # what the next request must carry
        self.cached_size = len(partitions)  # the size as of the last touch, for eviction
        self.lock = threading.Lock()
        # The last fetched epoch (KIP-595) of the partitions whose last request gave one
        # (>= 0), for the leader's divergence check; Kafka's CachedPartition keeps it.
        self.last_fetched_epochs: dict[TopicPartition, int] = {}
        # Partitions whose last answer was an error: errors go out on every fetch.
        self.errored: set[TopicPartition] = {
            tp for tp, cp in partitions.items() if cp.high_watermark == -1
        }
        # The leader's fetch handler's view (a follower's position in each partition is
        # in its CachedPartition): whether its next read must look at every partition,
        # and the generation of partition state it last read at.
        self.look_at_all = True
        self.checked_generation = -1
        #: the positions changed by a look at every partition, not yet recorded
        self.positions_unrecorded = False
        # The sweep: besides what changed, each read looks at the next part of the
        # session, so that every partition is looked at once an interval (changes nobody
        # notifies; every follower position recorded) without a pass over all of them
        # at once (100,000 on a large broker, while appends wait to wake the fetches).
        self._sweep: list[TopicPartition] = []
        self._swept = 0
        self._sweep_started_ms = now_ms
        #: partitions the sweep looked at whose positions are not recorded yet
        self.swept_unrecorded: list[CachedPartition] = []
        self.clock = FetchClock()

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, "
            f"partitions={len(self.partitions)}, epoch={self.epoch})"
        )

    def restart_sweep(self, now_ms: int) -> None:
        """Start a sweep over the session's partitions as they are now (after a look at
        all of them, and when the last sweep ended)."""
        self._sweep = list(self.partitions)
        self._swept = 0
        self._sweep_started_ms = now_ms

    def sweep_due(self, now_ms: int, interval_ms: int) -> list[CachedPartition]:
        """The partitions the sweep is due to look at by ``now_ms``: the share of the
        sweep that ``interval_ms`` allots the time since it started. A sweep done, the
        next starts."""
        total = len(self._sweep)
        if self._swept >= total:
            self.restart_sweep(now_ms)
            return []
        elapsed = now_ms - self._sweep_started_ms
        due = total if elapsed >= interval_ms else total * max(elapsed, 0) // interval_ms
        if due <= self._swept:
            return []
        part = self._sweep[self._swept : due]
        self._swept = due
        cached = self.partitions
        return [cp for tp in part if (cp := cached.get(tp)) is not None]

    def positions(self) -> list[tuple[Partition, int]]:
        """A follower's position in every partition the leader's last look found led here:
        (the leader's partition, the fetch offset)."""
        return [
            (p, cp.fetch_offset)
            for cp in self.partitions.values()
            if (p := cp.partition) is not None
        ]

    def position(self, tp: TopicPartition) -> tuple[Partition, int] | None:
        cp = self.partitions.get(tp)
        if cp is None or cp.partition is None:
            return None
        return cp.partition, cp.fetch_offset

    def move_to_end(self, tp: TopicPartition) -> None:
        """Answered partitions go to the back (response fairness)."""
        self.partitions[tp] = self.partitions.pop(tp)

    def update(
        self,
        fetch_data: Mapping[TopicPartition, PartitionRequest],
        to_forget: Iterable[TopicPartition],
    ) -> tuple[list[TopicPartition], list[TopicPartition], list[TopicPartition]]:
        """Apply an incremental request: (added, updated, removed) partitions."""
        added: list[TopicPartition] = []
        updated: list[TopicPartition] = []
        removed: list[TopicPartition] = []
        epochs = self.last_fetched_epochs
        for tp, req in fetch_data.items():
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition.from_request(tp, req)
                added.append(tp)
            else:
                cached.update_request(req)
                updated.append(tp)
            if req.last_fetched_epoch >= 0:
                epochs[tp] = req.last_fetched_epoch
            elif epochs:
                epochs.pop(tp, None)
        for tp in to_forget:
            epochs.pop(tp, None)
            cached = self.partitions.pop(tp, None)
            if cached is not None:
                removed.append(tp)
                if cached.partition is not None:  # the follower no longer fetches it here
                    state = cached.partition.followers.get(self.replica_id)
                    if state is not None and state.clock is self.clock:
                        state.clock = None
                        self.clock.forgot = True  # after the change it announces
                self.errored.discard(tp)
        if removed:
            # A leader that gave most of its leaderships away (a cold start's first
            # controller) would keep the table of every partition it led.
            self.partitions = compacted(self.partitions)
            if not self.errored:
                # Emptied here, not by an answer (which gives it a fresh set then): its
                # table would stay sized for every partition that once erred (a leader
                # not yet told it leads them; 1 MB each at 100,000 partitions).
                self.errored = set()
        return added, updated, removed


@dataclass
class FetchResult:
    """What the response says at the top level, and its partitions, in order."""

    error: ErrorCode
    session_id: int
    partitions: list[tuple[TopicPartition, PartitionData]] = field(default_factory=list)


class FetchContext(ABC):
    """How one fetch request is answered. `fetch_data` is what the request listed;
    `session` is set for an incremental fetch (and, once answered, for a full fetch
    that created one)."""

    error = ErrorCode.NONE
    incremental = False
    session: FetchSession | None = None
    max_bytes = 0x7FFFFFFF  # the request's total, across its partitions
    # Answer at once only once this many record bytes are readable (or on an error);
    # 1 or less: any news answers, a high watermark move included (a consumer's).
    min_bytes = 1
    # False for a consumer's fetch below version 10, which predates zstd (KIP-110): a
    # topic whose compression.type is zstd answers it UNSUPPORTED_COMPRESSION_TYPE.
    zstd_readable = True
    # True for Fetch v0-v2, whose byte limits are hard (Kafka's hardMaxBytesLimit): no
    # first batch goes over them, the bytes that fit are answered, a batch cut short.
    hard_max_bytes = False

    def __init__(self, fetch_data: Mapping[TopicPartition, PartitionRequest]) -> None:
        self.fetch_data = fetch_data

    @abstractmethod
    def respond(self, updates: Mapping[TopicPartition, PartitionData]) -> FetchResult:
        """The response, given the data read for the partitions to answer."""


class SessionErrorContext(FetchContext):
    """A session error: answered with that error and no partitions."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__({})
        self.error = error

    def respond(self, updates: Mapping[TopicPartition, PartitionData]) -> FetchResult:
        return FetchResult(self.error, INVALID_SESSION_ID)


class SessionlessContext(FetchContext):
    """A full fetch without a session: every partition of the request is answered."""

    def respond(self, updates: Mapping[TopicPartition, PartitionData]) -> FetchResult:
        return FetchResult(ErrorCode.NONE, INVALID_SESSION_ID, list(updates.items()))


class FullContext(FetchContext):
    """A full fetch that creates a session from the request and its answer."""

    def __init__(
        self,
        cache: FetchSessionCache,
        fetch_data: Mapping[TopicPartition, PartitionRequest],
        privileged: bool,
        replica_id: int,
    ) -> None:
        super().__init__(fetch_data)
        self.cache = cache
        self.privileged = privileged
        self.replica_id = replica_id

    def respond(self, updates: Mapping[TopicPartition, PartitionData]) -> FetchResult:
        def partitions() -> dict[TopicPartition, CachedPartition]:
            cached: dict[TopicPartition, CachedPartition] = {}
            for tp, data in updates.items():
                cp = CachedPartition.from_request(tp, self.fetch_data[tp])
                cp.maybe_update_response(data, True)
                cached[tp] = cp
            return cached

        self.session = self.cache.maybe_create_session(
            self.privileged, len(updates), partitions, replica_id=self.replica_id
        )
        if self.session is not None:
            self.session.last_fetched_epochs = {
                tp: req.last_fetched_epoch
                for tp, req in self.fetch_data.items()
                if req.last_fetched_epoch >= 0 and tp in updates
            }
        session_id = self.session.id if self.session is not None else INVALID_SESSION_ID
        return FetchResult(ErrorCode.NONE, session_id, list(updates.items()))


class IncrementalContext(FetchContext):
    """An incremental fetch: the session's partitions are fetched; only those with
    something to say are answered. `updates` given to respond() may leave out
    partitions the caller knows have nothing to say."""

    incremental = True

    def __init__(
        self,
        fetch_data: Mapping[TopicPartition, PartitionRequest],
        session: FetchSession,
        request_epoch: int,
    ) -> None:
        super().__init__(fetch_data)
        self.session = session
        self.request_epoch = request_epoch

    def respond(self, updates: Mapping[TopicPartition, PartitionData]) -> FetchResult:
        session = self.session
        assert session is not None
        with session.lock:
            if session.epoch != next_epoch(self.request_epoch):
                # Another request of this session was accepted since this one was.
                log.info(
                    "fetch session %d is at epoch %d, not %d: a duplicate request?",
                    session.id,
                    session.epoch,
                    next_epoch(self.request_epoch),
                )
                return FetchResult(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id)
            out = []
            errored = session.errored
            had_errors = bool(errored)
            for tp, data in updates.items():
                cached = session.partitions.get(tp)
                if cached is None or not cached.maybe_update_response(data, True):
                    continue
                if data["error_code"] != ErrorCode.NONE:
                    errored.add(tp)
                else:
                    errored.discard(tp)
                out.append((tp, data))
                # Answered partitions go to the back, so a response cut short by its
                # byte limit starts with the others next time.
                session.move_to_end(tp)
            if had_errors and not errored:
                # A set never shrinks: one that held thousands of erring partitions (a
                # leader not yet told it leads them) would keep its table (~2 MB each
                # for a cold start's two follower sessions, measured at 30,000).
                session.errored = set()
            return FetchResult(ErrorCode.NONE, session.id, out)


class ChangeJournal:
    """Which partitions changed (new data, a high watermark, a partition state), in
    order, as far back as `capacity` changes, so that an incremental fetch looks at those
    instead of every partition of its session (a leader of tens of thousands of
    partitions would otherwise walk all of them for each append to one).

    The generation counts changes; a reader remembers the generation it has seen and
    asks what changed since. A change of unknown partitions, or of more than `capacity`
    at once, and changes the journal has let go of, answer None: look at everything.
    Not thread-safe: the caller holds one lock around recording and reading."""

    __slots__ = ("_entries", "_start", "capacity")

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._entries: list[TopicPartition] = []
        self._start = 0  # the generation of _entries[0]

    @property
    def generation(self) -> int:
        return self._start + len(self._entries)

    def record(self, partitions: Collection[TopicPartition] | None) -> None:
        """Partitions that changed (None: unknown ones, maybe all)."""
        entries = self._entries
        if partitions is None or len(partitions) > self.capacity:
            # Readers behind this point look at everything.
            self._start = self.generation + (1 if partitions is None else len(partitions))
            entries.clear()
            return
        if len(entries) + len(partitions) > self.capacity:
            drop = max(len(entries) // 2, len(entries) + len(partitions) - self.capacity)
            del entries[:drop]
            self._start += drop
        entries.extend(partitions)

    def since(self, generation: int) -> list[TopicPartition] | None:
        """The partitions changed after `generation` (with repeats, oldest first), or None
        if the journal no longer knows (look at everything)."""
        if generation < self._start:
            return None
        return self._entries[generation - self._start :]


class FetchSessionCache:
    """The leader's sessions (FetchSessionCache + FetchManager.newContext)."""

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        eviction_ms: int = DEFAULT_EVICTION_MS,
        *,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.clock = clock
        self._lock = threading.Lock()
        # Least recently used first: touching a session moves it to the end.
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._num_partitions = 0
        self.evictions = 0
        self._random = random.Random()

    # --- views --------------------------------------------------------------------------

    def get(self, session_id: int) -> FetchSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def total_partitions(self) -> int:
        """Partitions cached over all sessions (as of their last use)."""
        with self._lock:
            return self._num_partitions

    def sessions(self) -> list[FetchSession]:
        with self._lock:
            return list(self._sessions.values())

    # --- requests -----------------------------------------------------------------------

    def new_context(
        self,
        session_id: int,
        epoch: int,
        fetch_data: Mapping[TopicPartition, PartitionRequest],
        to_forget: Iterable[TopicPartition],
        privileged: bool,
        *,
        replica_id: int = -1,
    ) -> FetchContext:
        """Resolve a fetch request's session (FetchManager.newContext). Followers'
        sessions are privileged; `replica_id` is kept for the logs."""
        with self._lock:
            now = self.clock()
            self._expire_idle(now)
            if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
                if session_id != INVALID_SESSION_ID:
                    closed = self._sessions.get(session_id)
                    if closed is not None:
                        self._remove(closed)
                        log.debug("full fetch closed fetch session %d", session_id)
                if epoch == FINAL_EPOCH:
                    return SessionlessContext(fetch_data)
                return FullContext(self, fetch_data, privileged, replica_id)
            session = self._sessions.get(session_id)
            if session is None:
                log.debug("incremental fetch of unknown fetch session %d", session_id)
                return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
            with session.lock:
                if session.epoch != epoch:
                    log.debug(
                        "fetch session %d expected epoch %d, got %d",
                        session_id,
                        session.epoch,
                        epoch,
                    )
                    return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
                session.update(fetch_data, to_forget)
                if not session.partitions:
                    # Everything forgotten: the session ends, this fetch is sessionless.
                    self._remove(session)
                    log.debug("fetch session %d closed: no partitions left", session_id)
                    return SessionlessContext(fetch_data)
                session.epoch = next_epoch(session.epoch)
            self._touch(session, now)
            return IncrementalContext(fetch_data, session, epoch)

    def maybe_create_session(
        self,
        privileged: bool,
        size: int,
        make_partitions: Callable[[], dict[TopicPartition, CachedPartition]],
        *,
        replica_id: int = -1,
    ) -> FetchSession | None:
        """A new session, if there is a free slot or one may be evicted; else None."""
        with self._lock:
            now = self.clock()
            self._expire_idle(now)
            if len(self._sessions) >= self.max_entries and not self._try_evict(
                privileged, size, now
            ):
                log.debug("no fetch session slot for privileged=%s size=%d", privileged, size)
                return None
            session = FetchSession(
                self._new_session_id(), privileged, make_partitions(), now, replica_id
            )
            self._sessions[session.id] = session
            self._num_partitions += session.cached_size
            # Followers' sessions are few and long-lived: worth a line each.
            log.log(
                logging.INFO if privileged else logging.DEBUG,
                "created fetch session %d for %s (%d partitions)",
                session.id,
                f"replica {replica_id}" if replica_id >= 0 else "a consumer",
                session.cached_size,
            )
            return session

    def remove(self, session_id: int) -> FetchSession | None:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                self._remove(session)
            return session

    # --- internals (under self._lock) ---------------------------------------------------

    def _new_session_id(self) -> int:
        while True:
            session_id = self._random.randint(1, _MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id

    def _touch(self, session: FetchSession, now: int) -> None:
        with session.lock:
            session.last_used_ms = now
            size = len(session.partitions)
        self._num_partitions += size - session.cached_size
        session.cached_size = size
        self._sessions.move_to_end(session.id)

    def _remove(self, session: FetchSession) -> None:
        if self._sessions.pop(session.id, None) is not None:
            self._num_partitions -= session.cached_size

    def _expire_idle(self, now: int) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_used_ms <= self.eviction_ms:
                return
            self._remove(oldest)
            self.evictions += 1
            log.info("fetch session %d expired after %d ms idle", oldest.id, self.eviction_ms)

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Make room for a new session (FetchSessionCache.tryEvict): evict the least
        recently used session if it is stale, or else the least valuable evictable one
        if it is worth less than the new one."""
        if not self._sessions:
            return False
        lru = next(iter(self._sessions.values()))
        if now - lru.last_used_ms > self.eviction_ms:
            self._remove(lru)
            self.evictions += 1
            return True
        # Evictable by anyone: sessions older than eviction_ms (as of their last use).
        # A follower may also evict any consumer's session.
        candidates = [
            s
            for s in self._sessions.values()
            if s.last_used_ms - s.creation_ms > self.eviction_ms
            or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if (privileged, size, 0) < (victim.privileged, victim.cached_size, victim.id):
            return False
        self._remove(victim)
        self.evictions += 1
        log.info("evicted fetch session %d to make room", victim.id)
        return True
