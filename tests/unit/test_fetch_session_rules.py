"""Incremental fetch sessions (KIP-227), the leader's cache alone: which partitions an
incremental answer includes (Kafka 2.8's CachedPartition.maybeUpdateResponseData) and
which session a new one may take the slot of (FetchSessionCache.tryEvict and touch).
No server: the cache is driven directly, on a clock of its own."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, cast

from broker.fetch_session import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    ChangeJournal,
    FetchResult,
    FetchSession,
    FetchSessionCache,
    PartitionData,
    PartitionRequest,
)
from broker.replica_manager import FollowerState
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

T0 = TopicPartition("a", 0)
T1 = TopicPartition("a", 1)
T2 = TopicPartition("b", 0)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def req(offset: int = 0) -> PartitionRequest:
    return PartitionRequest(offset, 1024, -1)


def data(
    partition: int = 0,
    *,
    hw: int = 0,
    lso: int = 0,
    log_start: int = 0,
    error: ErrorCode = ErrorCode.NONE,
    preferred: int = -1,
) -> PartitionData:
    return {
        "partition_index": partition,
        "error_code": int(error),
        "high_watermark": hw,
        "last_stable_offset": lso,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": preferred,
        "records": None,
    }


def answered(result: FetchResult) -> list[TopicPartition]:
    assert result.error == ErrorCode.NONE
    return [tp for tp, _ in result.partitions]


def open_session(
    cache: FetchSessionCache,
    partitions: Mapping[TopicPartition, PartitionRequest],
    privileged: bool,
) -> int:
    """A full fetch creating a session: its id (INVALID_SESSION_ID: no slot)."""
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, partitions, [], privileged)
    return ctx.respond({tp: data(tp.partition) for tp in partitions}).session_id


def fetch(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    updates: Mapping[TopicPartition, PartitionData],
) -> list[TopicPartition]:
    """An incremental fetch listing nothing: the partitions answered."""
    return answered(cache.new_context(session_id, epoch, {}, [], True).respond(updates))


# --- what an incremental answer includes ----------------------------------------------------


def test_a_high_watermark_move_alone_is_answered() -> None:
    # Kafka: highWatermark != respData.highWatermark -> mustRespond (the last stable offset
    # of a follower's answer stays where it was, as a read_uncommitted one's may).
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache, {T0: req(), T1: req()}, True)
    assert fetch(cache, session_id, 1, {T0: data(0, hw=5), T1: data(1)}) == [T0]
    assert fetch(cache, session_id, 2, {T0: data(0, hw=5), T1: data(1)}) == []


def test_a_look_without_update_remembers_nothing_of_the_answer() -> None:
    # The handler first looks at what a partition would answer (update False), then the
    # context answers it (update True): only the answer may move what was last sent.
    cp = CachedPartition.from_request(T0, req())
    assert cp.maybe_update_response(data(hw=5, lso=4, log_start=2), True)
    sent = (cp.high_watermark, cp.last_stable_offset, cp.log_start_offset)
    assert sent == (5, 4, 2)
    for news in (data(hw=6, lso=4, log_start=2), data(hw=5, lso=5), data(hw=5, lso=4, log_start=3)):
        assert cp.maybe_update_response(news, False)
        assert cp.maybe_update_response(news, False)  # looked at twice: still news
        assert (cp.high_watermark, cp.last_stable_offset, cp.log_start_offset) == sent
    error = data(hw=5, lso=4, log_start=2, error=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert cp.maybe_update_response(error, False)
    assert (cp.high_watermark, cp.last_stable_offset, cp.log_start_offset) == sent
    assert not cp.maybe_update_response(data(hw=5, lso=4, log_start=2), False)


def test_a_preferred_read_replica_of_broker_0_is_answered() -> None:
    # Kafka: respData.preferredReadReplica.isPresent; broker id 0 is a replica like any.
    cp = CachedPartition.from_request(T0, req())
    assert cp.maybe_update_response(data(), True)
    assert not cp.maybe_update_response(data(), True)
    assert cp.maybe_update_response(data(preferred=0), True)
    assert cp.maybe_update_response(data(preferred=3), True)


def test_an_error_answered_with_a_high_watermark_goes_out_again_once_cleared() -> None:
    # OFFSET_OUT_OF_RANGE (or a storage error) is answered with the partition's real high
    # watermark; the error still forgets it (Kafka: highWatermark = -1), so the next
    # answer without the error goes out even at the same high watermark.
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache, {T0: req(), T1: req()}, True)
    assert fetch(cache, session_id, 1, {T0: data(0, hw=10, lso=10)}) == [T0]
    out_of_range = data(0, hw=10, lso=10, error=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert fetch(cache, session_id, 2, {T0: out_of_range}) == [T0]
    assert fetch(cache, session_id, 3, {T0: data(0, hw=10, lso=10)}) == [T0]
    assert fetch(cache, session_id, 4, {T0: data(0, hw=10, lso=10)}) == []


# --- which session a new one may take the slot of -----------------------------------------


def touch(cache: FetchSessionCache, session_id: int, epoch: int) -> None:
    assert fetch(cache, session_id, epoch, {}) == []


def test_a_session_idle_exactly_eviction_ms_is_not_stale() -> None:
    # Kafka: stale when now - lastUsedMs > evictionMs, strictly.
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    old = open_session(cache, {T0: req(), T1: req(), T2: req()}, True)
    clock.ms += 1000
    assert open_session(cache, {T0: req()}, True) == INVALID_SESSION_ID
    assert cache.get(old) is not None
    assert cache.evictions == 0
    clock.ms += 1
    assert open_session(cache, {T0: req()}, True) != INVALID_SESSION_ID
    assert cache.get(old) is None
    assert cache.evictions == 1


def test_a_session_is_established_once_used_more_than_eviction_ms_after_its_creation() -> None:
    # Kafka's touch: evictable by anyone when now - creationMs > evictionMs at the touch.
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    small = open_session(cache, {T0: req()}, True)
    clock.ms += 1000
    touch(cache, small, 1)  # exactly eviction_ms after its creation: not yet
    assert open_session(cache, {T0: req(), T1: req()}, True) == INVALID_SESSION_ID
    clock.ms += 1
    touch(cache, small, 2)
    larger = open_session(cache, {T0: req(), T1: req()}, True)
    assert larger != INVALID_SESSION_ID
    assert cache.get(small) is None


def test_a_session_is_evictable_as_of_its_last_use_not_as_of_now() -> None:
    # Kafka decides at touch: a session last used 500 ms after its creation stays
    # unevictable until it is used again, however old it is now (short of stale).
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    small = open_session(cache, {T0: req()}, True)
    clock.ms += 500
    touch(cache, small, 1)
    clock.ms += 700  # 1200 ms since its creation, idle 700
    assert open_session(cache, {T0: req(), T1: req()}, True) == INVALID_SESSION_ID
    touch(cache, small, 2)
    assert open_session(cache, {T0: req(), T1: req()}, True) != INVALID_SESSION_ID
    assert cache.get(small) is None


def test_a_session_that_grew_is_counted_and_valued_at_its_size_as_of_its_last_use() -> None:
    # Kafka's touch: numPartitions and the session's cachedSize (its EvictableKey) follow
    # what the session holds after each incremental fetch.
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    grown = open_session(cache, {T0: req()}, True)
    assert cache.total_partitions() == 1
    for epoch in (1, 2):
        clock.ms += 600
        listed = {T1: req(), T2: req()} if epoch == 1 else {}
        ctx = cache.new_context(grown, epoch, listed, [], True)
        ctx.respond({T1: data(1), T2: data(0)} if epoch == 1 else {})
        assert cache.total_partitions() == 3
    # Established, and worth three partitions: a session of two may not take its slot.
    assert open_session(cache, {T0: req(), T1: req()}, True) == INVALID_SESSION_ID
    assert cache.get(grown) is not None
    clock.ms += 600
    ctx = cache.new_context(grown, 3, {}, [T1, T2], True)
    assert cache.total_partitions() == 1
    assert open_session(cache, {T0: req(), T1: req()}, True) != INVALID_SESSION_ID
    assert cache.get(grown) is None
    assert cache.total_partitions() == 2


def test_sessions_gone_idle_while_a_full_fetch_was_read_expire_before_its_session_is_made() -> None:
    # The cache drops sessions idle past eviction_ms whenever it is used, creating a
    # session included (here with room to spare, so no slot has to be found).
    clock = Clock()
    cache = FetchSessionCache(max_entries=10, eviction_ms=1000, clock=clock)
    idle = open_session(cache, {T0: req()}, False)
    clock.ms += 1000
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, {T1: req()}, [], True)
    assert cache.get(idle) is not None
    clock.ms += 1  # the partitions read
    created = ctx.respond({T1: data(1)}).session_id
    assert {s.id for s in cache.sessions()} == {created}
    assert cache.evictions == 1
    assert cache.total_partitions() == 1


def establish(cache: FetchSessionCache, clock: Clock, *session_ids: int) -> None:
    """Use each session past eviction_ms after its creation (evictable by anyone)."""
    for epoch in (1, 2):
        clock.ms += 600
        for session_id in session_ids:
            touch(cache, session_id, epoch)


def test_a_session_of_the_same_kind_and_size_is_not_evicted() -> None:
    # Kafka: the new session's key (privileged, size, id 0) must not be less than the
    # victim's; with the same kind and size the new one's id 0 is less.
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    old = open_session(cache, {T0: req(), T1: req()}, False)
    establish(cache, clock, old)
    assert open_session(cache, {T0: req(), T2: req()}, False) == INVALID_SESSION_ID
    assert cache.get(old) is not None
    assert open_session(cache, {T0: req(), T1: req(), T2: req()}, False) != INVALID_SESSION_ID
    assert cache.get(old) is None


def test_a_consumers_session_goes_before_a_smaller_followers() -> None:
    # Kafka's EvictableKey orders by privileged first, then size: of two established
    # sessions, the consumer's is the least valuable even when it is the larger.
    clock = Clock()
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000, clock=clock)
    consumer = open_session(cache, {T0: req(), T1: req(), T2: req()}, False)
    follower = open_session(cache, {T0: req()}, True)
    establish(cache, clock, consumer, follower)
    assert open_session(cache, {T0: req(), T1: req()}, True) != INVALID_SESSION_ID
    assert cache.get(consumer) is None
    assert cache.get(follower) is not None


def test_a_consumer_never_evicts_a_followers_session_however_large() -> None:
    # Kafka: a privileged key outranks any unprivileged one, whatever the sizes.
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    follower = open_session(cache, {T0: req()}, True)
    establish(cache, clock, follower)
    assert open_session(cache, {T0: req(), T1: req(), T2: req()}, False) == INVALID_SESSION_ID
    assert cache.get(follower) is not None
    assert cache.evictions == 0


def test_a_consumer_may_not_evict_a_consumers_session_in_its_first_eviction_ms() -> None:
    # Kafka: a consumer's new session may only take the slot of an entry of
    # evictableByAll (used more than eviction_ms after its creation), however small the
    # young one is; a follower's may take any consumer's.
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    young = open_session(cache, {T0: req()}, False)
    assert open_session(cache, {T0: req(), T1: req(), T2: req()}, False) == INVALID_SESSION_ID
    assert cache.get(young) is not None
    assert open_session(cache, {T0: req()}, True) != INVALID_SESSION_ID
    assert cache.get(young) is None


# --- forgetting partitions ------------------------------------------------------------------


def test_a_forgotten_partition_leaves_the_errored_set() -> None:
    # Partitions whose last answer was an error are read every round; a forgotten one is
    # no longer the session's, and the set gives its table back once nothing errs.
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache, {T0: req(), T1: req(), T2: req()}, True)
    not_leader = data(0, hw=-1, lso=-1, log_start=-1, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert fetch(cache, session_id, 1, {T0: not_leader}) == [T0]
    session = cache.get(session_id)
    assert session is not None
    assert session.errored == {T0}
    assert cache.new_context(session_id, 2, {}, [T0], True).incremental
    assert session.errored == set()
    assert list(session.partitions) == [T1, T2]


def test_forgetting_a_partition_stops_only_this_sessions_clock_for_its_follower() -> None:
    # A follower with two fetcher threads to this leader has two sessions; a partition
    # moved from one thread to the other is added to the second (whose clock then stands
    # for the follower's fetches of it) and forgotten by the first: that must leave the
    # second's clock in place, or the follower's caught-up time stops moving.
    first = FetchSession(1, True, {T0: CachedPartition.from_request(T0, req())}, 0, replica_id=2)
    second = FetchSession(2, True, {}, 0, replica_id=2)
    state = FollowerState()
    first.partitions[T0].partition = cast(Any, SimpleNamespace(followers={2: state}))
    state.clock = second.clock
    first.update({}, [T0])
    assert state.clock is second.clock
    # Forgotten by the session whose clock it was: the clock no longer stands for it.
    third = FetchSession(3, True, {T0: CachedPartition.from_request(T0, req())}, 0, replica_id=2)
    third.partitions[T0].partition = cast(Any, SimpleNamespace(followers={2: state}))
    state.clock = third.clock
    third.update({}, [T0])
    assert state.clock is None


# --- the change journal ---------------------------------------------------------------------


def test_the_change_journal_filled_exactly_to_capacity_forgets_nothing() -> None:
    # "As far back as capacity changes": a journal holding exactly capacity still answers
    # a reader from its start (else every session would look at all its partitions).
    journal = ChangeJournal(capacity=4)
    journal.record([T0, T1])
    journal.record([T2, T0])
    assert journal.since(0) == [T0, T1, T2, T0]
    assert journal.since(2) == [T2, T0]
    journal.record([T1])  # one past capacity: the oldest go
    assert journal.since(0) is None
    assert journal.since(4) == [T1]


def test_a_full_fetch_closes_the_session_it_names_whoever_made_it() -> None:
    # Kafka 2.8's newContext: any session a full fetch names is removed, whatever its kind.
    cache = FetchSessionCache(clock=Clock())
    follower = open_session(cache, {T0: req()}, True)
    consumer = open_session(cache, {T1: req()}, False)
    for named, privileged in ((follower, False), (consumer, True)):
        ctx = cache.new_context(named, INITIAL_EPOCH, {T2: req()}, [], privileged)
        assert cache.get(named) is None
        ctx.respond({T2: data(0)})
    assert len(cache) == 2
    assert cache.total_partitions() == 2
