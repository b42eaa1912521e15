"""Incremental fetch sessions (KIP-227): the leader's cache, its fetch handler, and the
follower's fetcher, in process (the wire codec in between, no sockets)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.fetch_session import (
    DEFAULT_EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchClock,
    FetchResult,
    FetchSessionCache,
    IncrementalContext,
    PartitionData,
    PartitionRequest,
    next_epoch,
)
from broker.fetcher import FetchState, ReplicaFetcherThread, _Fetch
from broker.metadata_cache import MetadataCache
from broker.replica_manager import FollowerState, ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import update_metadata_listing
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import decode_request_header, decode_response, encode_request, encode_response
from wire.protocol import request_codec as _request_codec
from zkdata.client import SetData
from zkdata.znodes import TopicPartition, shared_index

T0 = TopicPartition("a", 0)
T1 = TopicPartition("a", 1)
T2 = TopicPartition("b", 0)
T3 = TopicPartition("d", 0)
MAX_EPOCH = 2**31 - 1


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def req(offset: int = 0, max_bytes: int = 1024, epoch: int = -1) -> PartitionRequest:
    return PartitionRequest(offset, max_bytes, epoch)


def data(
    partition: int = 0,
    *,
    hw: int = 0,
    error: ErrorCode = ErrorCode.NONE,
    lso: int | None = None,
    log_start: int = 0,
    records: bytes | None = None,
    preferred: int = -1,
) -> PartitionData:
    return {
        "partition_index": partition,
        "error_code": int(error),
        "high_watermark": hw,
        "last_stable_offset": hw if lso is None else lso,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": preferred,
        "records": records,
    }


def answered(result: FetchResult) -> list[TopicPartition]:
    return [tp for tp, _ in result.partitions]


def open_session(
    cache: FetchSessionCache,
    partitions: Mapping[TopicPartition, PartitionRequest] | None = None,
    *,
    privileged: bool = True,
) -> int:
    """A full fetch creating a session; its id."""
    partitions = partitions if partitions is not None else {T0: req(), T1: req(), T2: req()}
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, partitions, [], privileged)
    result = ctx.respond({tp: data(tp.partition) for tp in partitions})
    assert result.error == ErrorCode.NONE
    return result.session_id


def incremental(
    cache: FetchSessionCache,
    session_id: int,
    epoch: int,
    updates: Mapping[TopicPartition, PartitionData],
    listed: Mapping[TopicPartition, PartitionRequest] | None = None,
    forgotten: list[TopicPartition] | None = None,
) -> FetchResult:
    ctx = cache.new_context(session_id, epoch, listed or {}, forgotten or [], True)
    return ctx.respond(updates)


# --- epochs -----------------------------------------------------------------------------


def test_next_epoch_increments_wraps_to_1_and_stays_final() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_fetch_creates_a_session_answering_every_partition() -> None:
    cache = FetchSessionCache(clock=Clock())
    partitions = {T0: req(5), T1: req(7, 99, 3)}
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, partitions, [], True)
    assert ctx.error == ErrorCode.NONE
    assert not ctx.incremental
    result = ctx.respond({T0: data(0, hw=10), T1: data(1, hw=20)})
    assert result.error == ErrorCode.NONE
    assert result.session_id != INVALID_SESSION_ID
    assert answered(result) == [T0, T1]
    session = cache.get(result.session_id)
    assert session is not None
    assert session.privileged
    assert session.epoch == 1
    assert list(session.partitions) == [T0, T1]
    t1 = session.partitions[T1]
    assert (t1.fetch_offset, t1.max_bytes, t1.current_leader_epoch) == (7, 99, 3)
    assert (t1.high_watermark, t1.last_stable_offset, t1.log_start_offset) == (20, 20, 0)
    assert len(cache) == 1
    assert cache.total_partitions() == 2


def test_consumer_sessions_are_not_privileged() -> None:
    cache = FetchSessionCache(clock=Clock())
    session = cache.get(open_session(cache, privileged=False))
    assert session is not None
    assert not session.privileged


def test_sessionless_full_fetch_makes_no_session_and_answers_everything() -> None:
    cache = FetchSessionCache(clock=Clock())
    ctx = cache.new_context(INVALID_SESSION_ID, FINAL_EPOCH, {T0: req(), T1: req()}, [], True)
    result = ctx.respond({T0: data(0), T1: data(1)})
    assert result.session_id == INVALID_SESSION_ID
    assert answered(result) == [T0, T1]
    assert len(cache) == 0


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    cache = FetchSessionCache(clock=Clock())
    old = open_session(cache)
    # Epoch 0 with the id: closed, and a new session made.
    ctx = cache.new_context(old, INITIAL_EPOCH, {T0: req()}, [], True)
    assert cache.get(old) is None
    new = ctx.respond({T0: data()}).session_id
    assert new not in (old, INVALID_SESSION_ID)
    assert len(cache) == 1
    # Epoch -1 with the id: closed, and no session.
    ctx = cache.new_context(new, FINAL_EPOCH, {T0: req()}, [], True)
    assert ctx.respond({T0: data()}).session_id == INVALID_SESSION_ID
    assert len(cache) == 0
    assert cache.total_partitions() == 0


def test_an_unknown_session_is_not_found() -> None:
    cache = FetchSessionCache(clock=Clock())
    open_session(cache)
    for session_id in (12345, INVALID_SESSION_ID):
        ctx = cache.new_context(session_id, 1, {T0: req()}, [], True)
        assert ctx.error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        result = ctx.respond({})
        assert result == FetchResult(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID)


@pytest.mark.parametrize("epoch", [2, 3, 100, -5])
def test_an_epoch_other_than_the_next_is_refused_and_changes_nothing(epoch: int) -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    ctx = cache.new_context(session_id, epoch, {TopicPartition("new", 0): req()}, [T0], True)
    assert ctx.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    session = cache.get(session_id)
    assert session is not None
    assert session.epoch == 1
    assert list(session.partitions) == [T0, T1, T2]


def test_epochs_advance_by_one_and_a_repeat_is_refused() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    for epoch in (1, 2, 3):
        assert incremental(cache, session_id, epoch, {}).error == ErrorCode.NONE
    assert incremental(cache, session_id, 3, {}).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert incremental(cache, session_id, 4, {}).error == ErrorCode.NONE


def test_the_epoch_wraps_from_max_to_1() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    session = cache.get(session_id)
    assert session is not None
    session.epoch = MAX_EPOCH
    assert incremental(cache, session_id, MAX_EPOCH, {}).error == ErrorCode.NONE
    assert session.epoch == 1
    assert incremental(cache, session_id, 1, {}).error == ErrorCode.NONE


def test_a_response_for_an_epoch_overtaken_meanwhile_is_refused() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    first = cache.new_context(session_id, 1, {}, [], True)
    second = cache.new_context(session_id, 2, {}, [], True)
    assert first.respond({T0: data(hw=5)}) == FetchResult(
        ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id
    )
    assert answered(second.respond({T0: data(hw=5)})) == [T0]


# --- incremental requests ---------------------------------------------------------------


def test_an_incremental_fetch_adds_updates_and_forgets_partitions() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache, {T0: req(1), T1: req(2)})
    new = TopicPartition("c", 4)
    ctx = cache.new_context(
        session_id, 1, {T1: req(9, 512, 6), new: req(3)}, [T0, TopicPartition("x", 9)], True
    )
    assert isinstance(ctx, IncrementalContext)
    session = cache.get(session_id)
    assert session is not None
    assert list(session.partitions) == [T1, new]
    t1 = session.partitions[T1]
    assert (t1.fetch_offset, t1.max_bytes, t1.current_leader_epoch) == (9, 512, 6)
    assert session.partitions[new].fetch_offset == 3
    assert session.epoch == 2
    assert cache.total_partitions() == 2
    # The new partition has never been answered: it goes out; the updated one has no news.
    result = ctx.respond({T1: data(1), new: data(4)})
    assert answered(result) == [new]


def test_forgetting_every_partition_ends_the_session() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache, {T0: req(), T1: req()})
    ctx = cache.new_context(session_id, 1, {}, [T0, T1], True)
    assert not ctx.incremental
    result = ctx.respond({})
    assert result.session_id == INVALID_SESSION_ID
    assert cache.get(session_id) is None
    assert cache.total_partitions() == 0


def test_only_partitions_with_news_are_answered() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    epoch = 1

    def fetch(updates: Mapping[TopicPartition, PartitionData]) -> list[TopicPartition]:
        nonlocal epoch
        result = incremental(cache, session_id, epoch, updates)
        epoch += 1
        assert result.error == ErrorCode.NONE
        assert result.session_id == session_id
        return answered(result)

    now = {T0: data(0), T1: data(1), T2: data(0)}
    assert fetch(now) == []
    now[T1] = data(1, hw=3)
    assert fetch(now) == [T1]
    assert fetch(now) == []  # the new high watermark was sent
    now[T1] = data(1, hw=3, lso=2)
    assert fetch(now) == [T1]
    now[T1] = data(1, hw=3, lso=2, log_start=1)
    assert fetch(now) == [T1]
    assert fetch(now) == []
    assert fetch({**now, T2: data(0, records=b"batch")}) == [T2]
    assert fetch({**now, T2: data(0, records=b"batch")}) == [T2]  # records always go
    assert fetch({**now, T2: data(0, records=b"")}) == []
    assert fetch({**now, T0: data(0, preferred=2)}) == [T0]
    # The caller may leave out partitions it knows have nothing to say.
    assert fetch({T2: data(0, hw=1)}) == [T2]
    assert fetch({}) == []


def test_errors_always_go_out_and_the_partition_goes_out_again_once_cleared() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    fenced = data(0, hw=-1, error=ErrorCode.FENCED_LEADER_EPOCH)
    assert answered(incremental(cache, session_id, 1, {T0: fenced})) == [T0]
    assert answered(incremental(cache, session_id, 2, {T0: fenced})) == [T0]
    # The same high watermark as before the error: still sent, since the error reset it.
    assert answered(incremental(cache, session_id, 3, {T0: data(0)})) == [T0]
    assert answered(incremental(cache, session_id, 4, {T0: data(0)})) == []


def test_the_errored_set_gives_its_table_back_once_every_error_cleared() -> None:
    # A session whose partitions all erred (a leader not yet told it leads them) keeps
    # a set as large as the session unless it is replaced when the errors clear.
    many = {TopicPartition("t", p): req() for p in range(5_000)}
    cache = FetchSessionCache(clock=Clock())
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, many, [], True)
    not_leader = ErrorCode.NOT_LEADER_OR_FOLLOWER
    result = ctx.respond({tp: data(tp.partition, hw=-1, error=not_leader) for tp in many})
    session = cache.get(result.session_id)
    assert session is not None
    assert len(session.errored) == 5_000
    full = sys.getsizeof(session.errored)
    updates = {tp: data(tp.partition) for tp in many}
    assert len(answered(incremental(cache, result.session_id, 1, updates))) == 5_000
    assert session.errored == set()
    assert sys.getsizeof(session.errored) < full // 100
    # Errors are still tracked in the new set.
    incremental(cache, result.session_id, 2, {TopicPartition("t", 7): data(7, error=not_leader)})
    assert session.errored == {TopicPartition("t", 7)}


def test_the_errored_set_gives_its_table_back_once_its_partitions_are_forgotten() -> None:
    # The erring partitions forgotten (their leadership moved away before they were
    # answered without error): the set emptied by the forgetting is replaced too.
    many = {TopicPartition("t", p): req() for p in range(5_000)}
    cache = FetchSessionCache(clock=Clock())
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, {**many, T0: req()}, [], True)
    not_leader = ErrorCode.NOT_LEADER_OR_FOLLOWER
    erring = {tp: data(tp.partition, hw=-1, error=not_leader) for tp in many}
    result = ctx.respond({**erring, T0: data(0)})
    session = cache.get(result.session_id)
    assert session is not None
    full = sys.getsizeof(session.errored)
    incremental(cache, result.session_id, 1, {}, forgotten=list(many)[:4_999])
    assert len(session.errored) == 1
    incremental(cache, result.session_id, 2, {}, forgotten=[TopicPartition("t", 4_999)])
    assert session.errored == set()
    assert sys.getsizeof(session.errored) < full // 100
    # Errors are still tracked in the new set.
    incremental(cache, result.session_id, 3, {T0: data(0, hw=-1, error=not_leader)})
    assert session.errored == {T0}


def test_one_int_for_a_size_every_partition_of_every_session_asks_for() -> None:
    one_mb = 1 << 20
    cache = FetchSessionCache(clock=Clock())
    asked = {T0: req(max_bytes=int(str(one_mb))), T1: req(max_bytes=int(str(one_mb)))}
    session = cache.get(open_session(cache, asked))
    assert session is not None
    t0, t1 = session.partitions[T0], session.partitions[T1]
    assert t0.max_bytes is t1.max_bytes
    # The same size asked again keeps it; another is taken.
    incremental(cache, session.id, 1, {}, listed={T0: req(5, max_bytes=int(str(one_mb)))})
    assert t0.max_bytes is t1.max_bytes
    incremental(cache, session.id, 2, {}, listed={T0: req(6, max_bytes=512)})
    assert (t0.max_bytes, t0.fetch_offset) == (512, 6)


def test_a_session_partition_keeps_what_the_leader_uses_in_96_bytes() -> None:
    # A leader holds one per partition per follower: 200,000 at 100,000 partitions.
    cache = FetchSessionCache(clock=Clock())
    asked = {T0: PartitionRequest(7, 1024, 3, last_fetched_epoch=2, log_start_offset=5)}
    session = cache.get(open_session(cache, asked))
    assert session is not None
    t0 = session.partitions[T0]
    assert (t0.fetch_offset, t0.max_bytes, t0.current_leader_epoch) == (7, 1024, 3)
    assert sys.getsizeof(t0) <= 96


def test_a_new_partition_is_keyed_by_the_shared_int_of_its_index() -> None:
    _apis, replicas, _zk = make_leader([TopicPartition("t", int("700"))])
    (key,) = replicas.partitions
    assert key.partition is shared_index(700)


def test_a_session_that_forgot_most_of_its_partitions_gives_its_table_back() -> None:
    # A cold start's first controller led every partition, its two followers' sessions
    # held them all; a preferred election then took two thirds of them away.
    many = {TopicPartition("t", p): req() for p in range(30_000)}
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache, many)
    session = cache.get(session_id)
    assert session is not None
    # Every partition answered once (each moved to the end, as a busy session's are).
    assert len(answered(incremental(cache, session_id, 1, {tp: data(hw=1) for tp in many}))) == (
        30_000
    )
    full = sys.getsizeof(session.partitions)
    gone = [tp for tp in many if tp.partition % 3]
    incremental(cache, session_id, 2, {}, forgotten=gone)
    assert list(session.partitions) == [tp for tp in many if tp.partition % 3 == 0]
    assert sys.getsizeof(session.partitions) * 4 < full
    # The session goes on as before: news goes out, nothing else does.
    kept = TopicPartition("t", 3)
    assert answered(incremental(cache, session_id, 3, {kept: data(3, hw=2)})) == [kept]
    assert answered(incremental(cache, session_id, 4, {kept: data(3, hw=2)})) == []
    assert session.partitions[kept].high_watermark == 2


def test_answered_partitions_move_to_the_back_of_the_session() -> None:
    cache = FetchSessionCache(clock=Clock())
    session_id = open_session(cache)
    incremental(cache, session_id, 1, {T0: data(0, hw=1)})
    session = cache.get(session_id)
    assert session is not None
    assert list(session.partitions) == [T1, T2, T0]


def test_partition_request_from_the_wire_defaults_fields_of_older_versions() -> None:
    v4 = {"partition": 0, "fetch_offset": 3, "partition_max_bytes": 10}
    assert PartitionRequest.from_wire(v4) == PartitionRequest(3, 10, -1, -1, -1)


# --- eviction -----------------------------------------------------------------------------


def test_a_full_cache_refuses_a_session_while_none_may_be_evicted() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000, clock=clock)
    first = open_session(cache)
    second = open_session(cache)
    ctx = cache.new_context(INVALID_SESSION_ID, INITIAL_EPOCH, {T0: req()}, [], True)
    result = ctx.respond({T0: data()})
    assert result.session_id == INVALID_SESSION_ID
    assert answered(result) == [T0]  # answered all the same, without a session
    assert {s.id for s in cache.sessions()} == {first, second}


def test_a_follower_session_evicts_a_consumer_session_but_not_the_other_way() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000, clock=clock)
    follower = open_session(cache, privileged=True)
    consumer = open_session(cache, privileged=False)
    assert open_session(cache, privileged=False) == INVALID_SESSION_ID
    newcomer = open_session(cache, privileged=True)
    assert newcomer != INVALID_SESSION_ID
    assert cache.get(consumer) is None
    assert {s.id for s in cache.sessions()} == {follower, newcomer}
    assert cache.evictions == 1


def test_an_established_session_may_be_evicted_by_a_larger_one_only() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_entries=2, eviction_ms=1000, clock=clock)
    small = open_session(cache, {T0: req()})
    large = open_session(cache, {T0: req(), T1: req(), T2: req()})
    # Past eviction_ms since creation, and in use (touched) since: evictable.
    clock.ms += 900
    incremental(cache, small, 1, {})
    incremental(cache, large, 1, {})
    clock.ms += 900
    incremental(cache, small, 2, {})
    incremental(cache, large, 2, {})
    assert open_session(cache, {}) == INVALID_SESSION_ID  # smaller than both
    two = {T0: req(), T1: req()}
    replacement = open_session(cache, two)  # larger than the smaller one
    assert replacement != INVALID_SESSION_ID
    assert cache.get(small) is None
    assert cache.get(large) is not None
    four = {T0: req(), T1: req(), T2: req(), T3: req()}
    assert open_session(cache, four) != INVALID_SESSION_ID  # larger than the established one
    assert cache.get(large) is None
    assert cache.get(replacement) is not None
    # Only sessions in their first eviction_ms are left: none may go, whatever the size.
    five = {**four, TopicPartition("e", 0): req()}
    assert open_session(cache, five) == INVALID_SESSION_ID


def test_sessions_idle_past_eviction_ms_expire_least_recently_used_first() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_entries=10, eviction_ms=1000, clock=clock)
    first = open_session(cache)
    clock.ms += 10
    second = open_session(cache)
    clock.ms += 10
    third = open_session(cache)
    clock.ms += 500
    assert incremental(cache, first, 1, {}).error == ErrorCode.NONE  # now the most recent
    clock.ms += 501  # second and third idle 1011 and 1001 ms; first 501
    assert cache.new_context(third, 1, {}, [], True).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert {s.id for s in cache.sessions()} == {first}
    assert cache.get(second) is None
    assert cache.evictions == 2
    assert cache.total_partitions() == 3


def test_a_stale_session_makes_room_in_a_full_cache() -> None:
    clock = Clock()
    cache = FetchSessionCache(max_entries=1, eviction_ms=1000, clock=clock)
    old = open_session(cache)
    clock.ms += 1001
    new = open_session(cache, privileged=False)
    assert new != INVALID_SESSION_ID
    assert cache.get(old) is None


def test_session_ids_are_positive_and_unique() -> None:
    cache = FetchSessionCache(max_entries=500, clock=Clock())
    ids = {open_session(cache, {T0: req()}) for _ in range(500)}
    assert len(ids) == 500
    assert all(0 < i <= MAX_EPOCH for i in ids)


def test_the_default_limits_are_kafkas() -> None:
    cache = FetchSessionCache()
    assert cache.max_entries == 1000
    assert cache.eviction_ms == DEFAULT_EVICTION_MS == 120_000


def test_the_handlers_session_cache_has_the_configured_limits() -> None:
    """max.incremental.fetch.session.cache.slots and
    min.incremental.fetch.session.eviction.ms size the handler's cache (it was always
    FetchSessionCache() with 1000 slots); with no slots every fetch is sessionless."""
    apis, replicas, _zk = make_leader([T0])
    try:
        cache = apis._fetch_session_cache()
        assert (cache.max_entries, cache.eviction_ms) == (1000, 120_000)
        apis = KafkaApis(
            LEADER,
            MetadataCache(LEADER, "PLAINTEXT"),
            replicas,
            cast(Any, None),
            StateChangeLog(None, LEADER),
            lambda: 1,
            fetch_session_cache_slots=0,
            fetch_session_eviction_ms=5000,
        )
        cache = apis._fetch_session_cache()
        assert (cache.max_entries, cache.eviction_ms) == (0, 5000)
        response = Loopback(apis).request(ApiKey.FETCH, 12, fetch_body({T0: 0}))
        assert (response["error_code"], response["session_id"]) == (0, INVALID_SESSION_ID)
    finally:
        replicas.close()


# --- the leader's fetch handler -----------------------------------------------------------

LEADER = 1
FOLLOWER = 2


class FakeZk:
    """Accepts the leader's conditional ISR writes (and its change notifications)."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self._lock = threading.Lock()

    def multi_batched(self, items: list[list[Any]], **_: Any) -> list[list[Any]]:
        class Stat:
            def __init__(self, version: int) -> None:
                self.version = version

        out = []
        with self._lock:
            for item in items:
                results = []
                for op in item:
                    if isinstance(op, SetData):
                        self.writes.append(op.path)
                        results.append(Stat(op.version + 1))
                    else:
                        results.append(op.path)
                out.append(results)
        return out

    def wait_for_writes(self, count: int, timeout: float = 10.0) -> list[str]:
        """The ISR writer runs on its own thread: wait (bounded) for its writes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.writes) >= count:
                    return list(self.writes)
            time.sleep(0.01)
        return list(self.writes)


def leader_and_isr(
    partitions: Mapping[TopicPartition, tuple[int, int, tuple[int, ...]]],
    replicas: tuple[int, ...] = (LEADER, FOLLOWER),
) -> dict[str, Any]:
    """A LeaderAndIsr body: partition -> (leader, leader epoch, ISR)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, (leader, epoch, isr) in partitions.items():
        topics.setdefault(tp.topic, []).append(
            {
                "topic_name": tp.topic,
                "partition_index": tp.partition,
                "controller_epoch": 1,
                "leader": leader,
                "leader_epoch": epoch,
                "isr": list(isr),
                "partition_epoch": 0,
                "replicas": list(replicas),
                "is_new": True,  # its log is made here, as for a new partition
            }
        )
    return {
        "controller_id": 9,
        "controller_epoch": 1,
        "broker_epoch": -1,
        "topic_states": [{"topic_name": t, "partition_states": ps} for t, ps in topics.items()],
    }


def make_leader(
    partitions: list[TopicPartition],
    isr: tuple[int, ...] = (LEADER, FOLLOWER),
    logs: LogManager | None = None,
) -> tuple[KafkaApis, ReplicaManager, FakeZk]:
    """Broker LEADER leading `partitions` (with their logs in `logs`, if given), and its
    request handler."""
    zk = FakeZk()
    replicas = ReplicaManager(LEADER, cast(Any, zk), StateChangeLog(None, LEADER), logs=logs)
    replicas.start()  # the ISR writer
    replicas.become_leader_or_follower(leader_and_isr({tp: (LEADER, 0, isr) for tp in partitions}))
    metadata = MetadataCache(LEADER, "PLAINTEXT")
    # What the controller's UpdateMetadata says of them (Produce looks there first).
    metadata.update(update_metadata_listing(partitions, LEADER, [LEADER, FOLLOWER]))
    apis = KafkaApis(
        LEADER,
        metadata,
        replicas,
        cast(Any, None),
        StateChangeLog(None, LEADER),
        lambda: 1,
    )
    replicas.on_data = apis.wake_fetches  # as the broker wires them
    return apis, replicas, zk


def change_partitions(
    apis: KafkaApis, states: Mapping[TopicPartition, tuple[int, int, tuple[int, ...]]]
) -> None:
    """A LeaderAndIsr as the broker applies it: the new states, then fetches woken."""
    seen = apis.fetch_changes.generation
    apis.replicas.become_leader_or_follower(leader_and_isr(states))
    assert apis.fetch_changes.generation > seen


class Loopback:
    """A connection to a KafkaApis in this process, through the wire codec both ways
    (requests decoded from a bytearray, as broker/network.py reads them: a producer's
    records are then writable, as the leader's append wants)."""

    def __init__(self, apis: KafkaApis, client_id: str = "test") -> None:
        self.apis = apis
        self.client_id = client_id
        self.requests: list[dict[str, Any]] = []
        self.closed = False

    def request(self, api_key: int, api_version: int, body: Mapping[str, Any]) -> Any:
        if self.closed:
            raise ConnectionError("closed")
        frame = bytearray(encode_request(api_key, api_version, 7, self.client_id, body)[4:])
        header, offset = decode_request_header(frame)
        decoded, _ = _request_codec(api_key, api_version).decode_from(frame, offset)
        self.requests.append(decoded)
        result = self.apis.handle(api_key, api_version, header, decoded)
        assert result is not None
        _, out = decode_response(
            api_key, api_version, encode_response(api_key, api_version, 7, result)[4:]
        )
        return out

    def close(self) -> None:
        self.closed = True


def fetch_body(
    partitions: Mapping[TopicPartition, int],
    *,
    session_id: int = 0,
    epoch: int = INITIAL_EPOCH,
    forgotten: list[TopicPartition] | None = None,
    replica_id: int = FOLLOWER,
    leader_epoch: int = 0,
) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, offset in partitions.items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition": tp.partition,
                "current_leader_epoch": leader_epoch,
                "fetch_offset": offset,
                "last_fetched_epoch": -1,
                "log_start_offset": 0,
                "partition_max_bytes": 1024,
            }
        )
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "forgotten_topics_data": [
            {"topic": tp.topic, "partitions": [tp.partition]} for tp in forgotten or []
        ],
    }


def response_partitions(response: Mapping[str, Any]) -> dict[TopicPartition, dict[str, Any]]:
    return {
        TopicPartition(t["topic"], p["partition_index"]): p
        for t in response["responses"]
        for p in t["partitions"]
    }


def test_handler_answers_a_full_fetch_in_full_and_an_idle_incremental_one_empty() -> None:
    apis, _replicas, _zk = make_leader([T0, T1, T2])
    conn = Loopback(apis)
    full = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0, T2: 0}))
    assert full["error_code"] == ErrorCode.NONE
    assert set(response_partitions(full)) == {T0, T1, T2}
    session_id = full["session_id"]
    assert session_id != INVALID_SESSION_ID
    idle = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))
    assert idle["error_code"] == ErrorCode.NONE
    assert idle["session_id"] == session_id
    assert idle["responses"] == []


def test_handler_answers_only_the_partition_whose_leadership_changed() -> None:
    apis, _replicas, _zk = make_leader([T0, T1, T2])
    conn = Loopback(apis)
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0, T2: 0}))["session_id"]
    # T1 gets a new leader epoch: our epoch 0 is fenced, for T1 only.
    change_partitions(apis, {T1: (LEADER, 1, (LEADER, FOLLOWER))})
    got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        T1: ErrorCode.FENCED_LEADER_EPOCH
    }
    # Listing T1 at the new epoch clears it: answered once more (its error reset it).
    got = conn.request(
        ApiKey.FETCH, 12, fetch_body({T1: 0}, session_id=session_id, epoch=2, leader_epoch=1)
    )
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        T1: ErrorCode.NONE
    }
    # T2 moves to another leader, at a new epoch: our epoch 0 is fenced (the epoch is
    # checked before the leadership, as Kafka's getLocalLog does), for T2 only.
    change_partitions(apis, {T2: (FOLLOWER, 1, (FOLLOWER,))})
    got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=3))
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        T2: ErrorCode.FENCED_LEADER_EPOCH
    }
    # Listed at the new epoch: NOT_LEADER_OR_FOLLOWER.
    got = conn.request(
        ApiKey.FETCH, 12, fetch_body({T2: 0}, session_id=session_id, epoch=4, leader_epoch=1)
    )
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        T2: ErrorCode.NOT_LEADER_OR_FOLLOWER
    }
    # Forgotten, it is answered no more.
    got = conn.request(
        ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=5, forgotten=[T2])
    )
    assert got["responses"] == []


def test_a_follower_checks_the_current_leader_epoch_before_its_leadership() -> None:
    """Kafka 2.8's Partition.getLocalLog checks the current leader epoch first for a
    hosted partition, a follower's included: an older one is FENCED_LEADER_EPOCH (the
    client's metadata is behind) and a newer one UNKNOWN_LEADER_EPOCH (this broker is
    behind); only at its own epoch, or none given, is it NOT_LEADER_OR_FOLLOWER. A
    follower answered NOT_LEADER_OR_FOLLOWER whatever the epoch."""
    apis, replicas, _zk = make_leader([T0])
    change_partitions(apis, {T0: (FOLLOWER, 1, (LEADER, FOLLOWER))})
    assert replicas.leader_partition(T0, 0) == (ErrorCode.FENCED_LEADER_EPOCH, None)
    assert replicas.leader_partition(T0, 2) == (ErrorCode.UNKNOWN_LEADER_EPOCH, None)
    assert replicas.leader_partition(T0, 1) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    assert replicas.leader_partition(T0, -1) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    # Through the handler: a consumer at the older epoch is told it is fenced.
    got = Loopback(apis).request(ApiKey.FETCH, 12, fetch_body({T0: 0}, replica_id=-1))
    assert response_partitions(got)[T0]["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    # Stopped (not hosted, in Kafka's terms): NOT_LEADER_OR_FOLLOWER, epoch or not.
    replicas.stop_replicas(
        {
            "controller_id": 9,
            "controller_epoch": 1,
            "topic_states": [
                {"topic_name": "a", "partition_states": [{"partition_index": 0, "leader_epoch": 1}]}
            ],
        }
    )
    assert replicas.leader_partition(T0, 0) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    assert replicas.leader_partition(T0, 2) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)


def test_handler_answers_a_session_partition_fetched_past_the_log_end_out_of_range(
    tmp_path: Path,
) -> None:
    """A follower whose position moved past the leader's log end (it holds records the
    leader never had) is told so at once, as a full fetch would tell it, not left to
    wait: the answer sends it to ask where the leader's log ends."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    apis, _replicas, _zk = make_leader([T0, T1], logs=logs)
    conn = Loopback(apis)
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0}))["session_id"]
    got = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 3}, session_id=session_id, epoch=1))
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        T0: ErrorCode.OFFSET_OUT_OF_RANGE
    }
    logs.close()


def test_handler_records_the_follower_for_every_session_partition_every_round() -> None:
    apis, replicas, zk = make_leader([T0, T1, T2], isr=(LEADER,))
    conn = Loopback(apis)
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0, T2: 0}))["session_id"]
    # The full fetch found the follower caught up everywhere: into every ISR.
    assert sorted(zk.wait_for_writes(3)) == sorted(
        f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state" for tp in (T0, T1, T2)
    )
    before = {tp: replicas.partitions[tp].followers[FOLLOWER].last_fetch_ms for tp in (T0, T1)}
    time.sleep(0.01)
    conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))
    for tp in (T0, T1):
        state = replicas.partitions[tp].followers[FOLLOWER]
        assert state.last_fetch_ms > before[tp]
        assert state.last_caught_up_ms == state.last_fetch_ms
        assert state.fetch_offset == 0


def test_handler_records_a_follower_in_a_partition_led_here_again_without_a_full_look() -> None:
    """A partition that was led elsewhere (its session entry then knew no partition of
    the leader's) and is led here again is read from the change journal, not looked at
    in full: the read itself must give the session its partition, or the follower's
    fetches of it are not recorded (Kafka 2.8 records every fetched partition's
    follower state) and it stays out of the ISR until the next sweep."""
    x = TopicPartition("x", 0)
    apis, replicas, _zk = make_leader([T0, T1, T2, T3, x])
    try:
        conn = Loopback(apis)
        full = fetch_body({T0: 0, T1: 0, T2: 0, T3: 0, x: 0})
        session_id = conn.request(ApiKey.FETCH, 12, full)["session_id"]
        conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))
        change_partitions(apis, {x: (FOLLOWER, 1, (FOLLOWER,))})
        got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=2))
        assert set(response_partitions(got)) == {x}
        change_partitions(apis, {x: (LEADER, 2, (LEADER,))})
        body = fetch_body({x: 0}, session_id=session_id, epoch=3, leader_epoch=2)
        got = conn.request(ApiKey.FETCH, 12, body)
        assert response_partitions(got)[x]["error_code"] == ErrorCode.NONE
        state = replicas.partitions[x].followers.get(FOLLOWER)
        assert state is not None
        assert state.last_fetch_ms > 0
    finally:
        replicas.close()


def test_a_broker_not_a_replica_reads_no_records_of_the_partition(tmp_path: Path) -> None:
    """A fetch with a replica id reads up to the log end, past the high watermark: from
    a broker id that is not one of the partition's replicas it read records not yet
    committed (its position was then not recorded). Kafka 2.8's updateFollowerFetchState
    answers such a partition with no records (withEmptyFetchInfo), error NONE, also in
    a session; a replica the reassignment added reads as any follower."""
    stranger = 77
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER, FOLLOWER), logs=logs)
        error, *_ = replicas.append_as_leader(T0, build_batch([b"uncommitted"]), 1)
        assert error == ErrorCode.NONE
        p = replicas.partitions[T0]
        assert (p.high_watermark, p.log_end_offset) == (0, 1)
        conn = Loopback(apis)
        full = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}, replica_id=stranger))
        data = response_partitions(full)[T0]
        assert (data["error_code"], data["high_watermark"]) == (ErrorCode.NONE, 0)
        assert not data["records"]
        # In its session too, once more records came.
        replicas.append_as_leader(T0, build_batch([b"more"]), 1)
        body = fetch_body({T0: 0}, session_id=full["session_id"], epoch=1, replica_id=stranger)
        got = response_partitions(conn.request(ApiKey.FETCH, 12, body))
        assert T0 not in got or not got[T0]["records"]
        assert stranger not in p.followers
        # The follower reads them.
        follower = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}))
        assert response_partitions(follower)[T0]["records"]
        # A replica a reassignment adds (in the leader's next LeaderAndIsr) reads too.
        added = 3
        replicas.become_leader_or_follower(
            leader_and_isr({T0: (LEADER, 1, (LEADER, FOLLOWER))}, (LEADER, FOLLOWER, added))
        )
        got = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}, replica_id=added, leader_epoch=1))
        assert response_partitions(got)[T0]["records"]
    finally:
        logs.close()


@pytest.mark.timeout(60)  # a fetch that waits out its max_wait_ms fails as a hang
def test_an_incremental_fetch_finding_an_error_is_answered_at_once() -> None:
    """Kafka 2.8's fetchMessages answers at once on errorReadingData, whatever
    max_wait_ms: a partition still erring (read every round) does not wait for it. 600 s
    asked: a fetch that waited for it would hang the test (its timeout)."""
    apis, replicas, _zk = make_leader([T0, T1])
    try:
        conn = Loopback(apis)
        session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0}))["session_id"]
        change_partitions(apis, {T0: (FOLLOWER, 1, (FOLLOWER,))})  # led elsewhere now
        body = fetch_body({}, session_id=session_id, epoch=1)
        assert set(response_partitions(conn.request(ApiKey.FETCH, 12, body))) == {T0}
        body = fetch_body({}, session_id=session_id, epoch=2)
        body["max_wait_ms"] = 600_000
        got = response_partitions(conn.request(ApiKey.FETCH, 12, body))
        # Our leader epoch is the old one: fenced, before the leadership is looked at.
        assert {tp: p["error_code"] for tp, p in got.items()} == {T0: ErrorCode.FENCED_LEADER_EPOCH}
    finally:
        replicas.close()


@pytest.mark.timeout(60)  # a fetch that waits out its max_wait_ms fails as a hang
def test_a_consumers_incremental_fetch_finding_a_new_high_watermark_is_answered_at_once(
    tmp_path: Path,
) -> None:
    """A consumer (min_bytes 1) is told of a high watermark that moved since its last
    fetch at once, records or not, as Kafka 2.8's session answers it (the move itself
    woke nobody: no fetch was waiting then). 600 s asked, as above."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        conn = Loopback(apis)
        first = fetch_body({T0: 0}, replica_id=-1)
        session_id = conn.request(ApiKey.FETCH, 12, first)["session_id"]
        error, *_ = replicas.append_as_leader(T0, build_batch([b"x"] * 3), 1)
        assert error == ErrorCode.NONE
        assert replicas.partitions[T0].high_watermark == 3
        # At the log end: nothing to read, only the new high watermark to tell.
        body = fetch_body({T0: 3}, session_id=session_id, epoch=1, replica_id=-1)
        body["max_wait_ms"] = 600_000
        got = response_partitions(conn.request(ApiKey.FETCH, 12, body))
        assert got[T0]["high_watermark"] == 3
        assert not got[T0]["records"]
    finally:
        logs.close()


def test_handler_session_errors() -> None:
    apis, _replicas, _zk = make_leader([T0])
    conn = Loopback(apis)
    got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=424242, epoch=1))
    assert got["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert got["responses"] == []
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}))["session_id"]
    got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=5))
    assert got["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_handler_serves_consumers_sessions_and_sessionless_old_versions() -> None:
    apis, _replicas, _zk = make_leader([T0, T1])
    conn = Loopback(apis)
    consumer = fetch_body({T0: 0, T1: 0}, replica_id=-1)
    session_id = conn.request(ApiKey.FETCH, 12, consumer)["session_id"]
    assert session_id != INVALID_SESSION_ID
    idle = fetch_body({}, session_id=session_id, epoch=1, replica_id=-1)
    assert conn.request(ApiKey.FETCH, 12, idle)["responses"] == []
    # v4 has no sessions: every fetch is full.
    old = conn.request(ApiKey.FETCH, 4, fetch_body({T0: 0, T1: 0}, replica_id=-1))
    assert set(response_partitions(old)) == {T0, T1}
    # Nor does it make one (Kafka 2.8: FetchMetadata.LEGACY, epoch -1): the cache holds
    # the v12 consumer's session alone.
    assert conn.request(ApiKey.FETCH, 4, fetch_body({T0: 0}, replica_id=-1))["responses"]
    assert [s.id for s in apis._fetch_session_cache().sessions()] == [session_id]


def test_handler_makes_a_fetch_from_broker_0_a_followers_session() -> None:
    """Kafka 2.8: isFromFollower is replicaId >= 0; broker id 0 is a broker like any."""
    apis, replicas, _zk = make_leader([T0])
    try:
        conn = Loopback(apis)
        cache = apis._fetch_session_cache()
        for replica_id, privileged in ((0, True), (-1, False), (FOLLOWER, True)):
            body = fetch_body({T0: 0}, replica_id=replica_id)
            session = cache.get(conn.request(ApiKey.FETCH, 12, body)["session_id"])
            assert session is not None
            assert (session.privileged, session.replica_id) == (privileged, replica_id)
    finally:
        replicas.close()


def test_handler_long_polls_until_woken_by_a_change() -> None:
    apis, _replicas, _zk = make_leader([T0, T1])
    conn = Loopback(apis)
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0}))["session_id"]
    body = fetch_body({}, session_id=session_id, epoch=1)
    body["max_wait_ms"] = 30_000

    def change() -> None:
        time.sleep(0.2)
        change_partitions(apis, {T0: (FOLLOWER, 1, (FOLLOWER,))})

    changer = threading.Thread(target=change)
    changer.start()
    got = conn.request(ApiKey.FETCH, 12, body)
    changer.join(60)  # a bound that only catches a hang
    assert not changer.is_alive(), "changer still running after 60 s"
    # Woken by the change, well before max_wait_ms, with just that partition.
    assert set(response_partitions(got)) == {T0}


def test_an_idle_incremental_round_reads_and_records_no_partition_but_moves_its_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    apis, replicas, _zk = make_leader([T0, T1, T2])
    conn = Loopback(apis)
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0, T2: 0}))["session_id"]
    conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))  # a look
    states = [replicas.partitions[tp].followers[FOLLOWER] for tp in (T0, T1, T2)]
    clock = states[0].clock
    assert clock is not None
    assert all(state.clock is clock for state in states)
    reads: list[TopicPartition] = []
    recorded: list[int] = []
    leader_partition = replicas.leader_partition
    record = replicas.record_follower_fetches

    def counting_read(tp: TopicPartition, epoch: int) -> Any:
        reads.append(tp)
        return leader_partition(tp, epoch)

    def counting_record(replica_id: int, fetches: Any, clock: Any = None) -> None:
        fetches = list(fetches)
        recorded.append(len(fetches))
        record(replica_id, fetches, clock)

    monkeypatch.setattr(replicas, "leader_partition", counting_read)
    monkeypatch.setattr(replicas, "record_follower_fetches", counting_record)
    for epoch in (2, 3, 4):
        before = clock.ms
        time.sleep(0.002)
        got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=epoch))
        assert got["responses"] == []
        assert clock.ms > before
        # Positions unchanged at the leader's log end: caught up as of this round.
        assert [state.caught_up_ms(0) for state in states] == [clock.ms] * 3
    assert reads == []
    assert recorded == [0, 0, 0]
    # A listed partition is read, and only it.
    conn.request(ApiKey.FETCH, 12, fetch_body({T1: 0}, session_id=session_id, epoch=5))
    assert reads == [T1]
    # Forgotten, a partition no longer follows the session's clock.
    conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=6, forgotten=[T2]))
    assert states[2].clock is None
    assert states[0].clock is clock


def test_a_follower_counts_as_caught_up_through_its_session_only_at_the_log_end() -> None:
    clock = FetchClock()
    state = FollowerState(fetch_offset=10, last_fetch_ms=100, last_caught_up_ms=100, clock=clock)
    clock.ms = 500  # rounds that did not list the partition
    assert state.caught_up_ms(10) == 500  # the leader's log ends where the follower is
    assert state.caught_up_ms(11) == 100  # data came: only listing moves it on
    # The leader settles before appending: the rounds up to now counted.
    state.settle(10)
    clock.ms = 900  # later rounds, still at offset 10, behind the new log end of 12
    assert state.caught_up_ms(12) == 500
    assert state.last_caught_up_ms == 500
    # An older clock never moves the time back.
    state.last_caught_up_ms = 1000
    assert state.caught_up_ms(10) == 1000
    state.clock = None
    assert state.caught_up_ms(10) == 1000


def test_a_change_nobody_notifies_is_seen_at_the_next_full_look() -> None:
    apis, replicas, _zk = make_leader([T0, T1])
    replicas.replica_lag_time_max_ms = 400  # a look at everything every 100 ms at least
    conn = Loopback(apis)
    session_id = conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0, T1: 0}))["session_id"]
    # A StopReplica (no wakeup): T0 is no longer led here.
    replicas.stop_replicas(
        {
            "controller_id": 9,
            "controller_epoch": 1,
            "topic_states": [
                {"topic_name": "a", "partition_states": [{"partition_index": 0, "leader_epoch": 1}]}
            ],
        }
    )
    time.sleep(0.15)
    got = conn.request(ApiKey.FETCH, 12, fetch_body({}, session_id=session_id, epoch=1))
    assert {tp: p["error_code"] for tp, p in response_partitions(got).items()} == {
        T0: ErrorCode.NOT_LEADER_OR_FOLLOWER
    }


# --- the follower's fetcher ---------------------------------------------------------------


def follower_fetcher(
    connect: Callable[[tuple[str, int], str, float], Loopback], **options: Any
) -> ReplicaFetcherThread:
    """The follower's fetcher from the leader, through ``connect``, sinking nothing."""
    return ReplicaFetcherThread(
        FOLLOWER,
        LEADER,
        ("127.0.0.1", 1),
        lambda _tp, _leader, _epoch, _records, _hw, _start: 0,
        max_wait_ms=20,
        connect=connect,
        **options,
    )


def test_a_fetcher_that_stopped_following_most_partitions_gives_its_tables_back() -> None:
    def no_leader(_endpoint: tuple[str, int], _client_id: str, _timeout: float) -> Loopback:
        raise ConnectionRefusedError("never started")

    fetcher = follower_fetcher(no_leader)
    followed = [TopicPartition("t", p) for p in range(30_000)]
    fetcher.add_all((tp, FetchState(0, 0)) for tp in followed)
    fetcher._session_answered(
        _Fetch(True, 5, INITIAL_EPOCH, {tp: (0, 0) for tp in followed}), session_id=5
    )
    partitions_full = sys.getsizeof(fetcher.partitions)
    sent_full = sys.getsizeof(fetcher._sent)
    gone = [tp for tp in followed if tp.partition % 3]
    fetcher.remove(gone)
    # The next incremental fetch forgets them in the leader's session, then here.
    fetcher._session_answered(_Fetch(False, 5, 1, {}, gone), session_id=5)
    kept = [tp for tp in followed if tp.partition % 3 == 0]
    assert list(fetcher.partitions) == kept
    assert list(fetcher._sent) == kept
    assert sys.getsizeof(fetcher.partitions) * 3 < partitions_full
    assert sys.getsizeof(fetcher._sent) * 3 < sent_full


@pytest.fixture
def fetcher_setup() -> Iterator[tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread]]:
    apis, replicas, _zk = make_leader([T0, T1, T2])
    conn = Loopback(apis)

    def connect(_endpoint: tuple[str, int], _client_id: str, _timeout: float) -> Loopback:
        conn.closed = False
        return conn

    fetcher = follower_fetcher(connect, backoff_ms=100)
    for tp in (T0, T1, T2):
        fetcher.add_all([(tp, FetchState(0, 0))])
    fetcher.start()
    yield apis, replicas, conn, fetcher
    fetcher.stop()
    fetcher.thread.join(5)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def listed(body: Mapping[str, Any]) -> set[TopicPartition]:
    return {
        TopicPartition(t["topic"], p["partition"]) for t in body["topics"] for p in t["partitions"]
    }


def forgotten(body: Mapping[str, Any]) -> set[TopicPartition]:
    return {
        TopicPartition(t["topic"], p)
        for t in body["forgotten_topics_data"]
        for p in t["partitions"]
    }


def test_a_fetcher_forgets_in_the_session_only_partitions_the_session_holds() -> None:
    """A partition added and removed again before it was ever sent is not in the leader's
    session: it is not named among the forgotten (Kafka 2.8's FetchSessionHandler
    forgets only partitions of sessionPartitions)."""

    def no_leader(_endpoint: tuple[str, int], _client_id: str, _timeout: float) -> Loopback:
        raise ConnectionRefusedError("never started")

    fetcher = follower_fetcher(no_leader)
    fetcher.add_all([(T0, FetchState(0, 0)), (T1, FetchState(0, 0))])
    fetcher._session_answered(_Fetch(True, 5, INITIAL_EPOCH, {T0: (0, 0), T1: (0, 0)}), 5)
    fetcher.add_all([(T2, FetchState(0, 0))])
    fetcher.remove([T2, T1])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert (fetch.full, fetch.session_id, fetch.epoch) == (False, 5, 1)
    assert (fetch.listed, fetch.forgotten) == ({}, [T1])


def test_a_fetcher_forgets_a_partition_its_session_took_in_an_incremental_fetch() -> None:
    """A partition added by an incremental fetch is in the leader's session from its
    answer on: removed, it is forgotten there (Kafka 2.8's FetchSessionHandler adds the
    next request's partitions to sessionPartitions)."""

    def no_leader(_endpoint: tuple[str, int], _client_id: str, _timeout: float) -> Loopback:
        raise ConnectionRefusedError("never started")

    fetcher = follower_fetcher(no_leader)
    fetcher.add_all([(T0, FetchState(0, 0))])
    fetcher._session_answered(_Fetch(True, 5, INITIAL_EPOCH, {T0: (0, 0)}), 5)
    fetcher.add_all([(T1, FetchState(0, 0))])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert fetch.listed == {T1: (0, 0)}
    fetcher._session_answered(fetch, 5)
    fetcher.remove([T1])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert (fetch.session_id, fetch.epoch, fetch.forgotten) == (5, 2, [T1])


def test_a_fetcher_the_leader_had_no_session_for_names_none_next_time() -> None:
    """Session id 0 in a full fetch's answer (no room on the leader): the next fetch is a
    full one naming no session (Kafka 2.8's FetchSessionHandler: INITIAL)."""

    def no_leader(_endpoint: tuple[str, int], _client_id: str, _timeout: float) -> Loopback:
        raise ConnectionRefusedError("never started")

    fetcher = follower_fetcher(no_leader)
    fetcher.add_all([(T0, FetchState(0, 0))])
    fetcher._session_answered(_Fetch(True, 5, INITIAL_EPOCH, {T0: (0, 0)}), 5)
    fetcher._restart_session(close=True)  # as after a connection failure
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert (fetch.full, fetch.session_id) == (True, 5)  # closes the old one
    fetcher._session_answered(fetch, INVALID_SESSION_ID)
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert (fetch.full, fetch.session_id, fetch.epoch) == (True, INVALID_SESSION_ID, 0)


def test_fetcher_sends_one_full_fetch_then_empty_incremental_ones(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
) -> None:
    _apis, _replicas, conn, fetcher = fetcher_setup
    wait_until(lambda: len(conn.requests) >= 5, "five fetches")
    first, *rest = conn.requests[:5]
    assert (first["session_id"], first["session_epoch"]) == (0, INITIAL_EPOCH)
    assert listed(first) == {T0, T1, T2}
    session_id = fetcher.session_id
    assert session_id != INVALID_SESSION_ID
    for epoch, body in enumerate(rest, start=1):
        assert (body["session_id"], body["session_epoch"]) == (session_id, epoch)
        assert body["topics"] == []
        assert body["forgotten_topics_data"] == []
    assert fetcher.full_fetches == 1


CAPPED = [TopicPartition("m", p) for p in range(5)]


def capped_fetches(apis: KafkaApis, conn: Loopback, count: int) -> ReplicaFetcherThread:
    """A fetcher of CAPPED that lists at most 2 partitions per fetch, run until it made
    ``count`` fetches (bounded), then stopped."""
    fetcher = follower_fetcher(lambda _e, _c, _t: conn, max_partitions_per_fetch=2)
    for tp in CAPPED:
        fetcher.add_all([(tp, FetchState(0, 0))])
    fetcher.start()
    try:
        wait_until(lambda: len(conn.requests) >= count, f"{count} fetches")
    finally:
        fetcher.stop()
        fetcher.thread.join(5)
    return fetcher


def test_fetcher_lists_at_most_its_limit_per_fetch_and_adds_the_rest_without_waiting() -> None:
    # A follower of 100,000 partitions must not list them all in one fetch: the session
    # starts with the limit and the next fetches add the rest, answered at once (max wait
    # 0) until every partition is in; then the fetcher long-polls as usual.
    apis, _replicas, _zk = make_leader(CAPPED)
    conn = Loopback(apis)
    fetcher = capped_fetches(apis, conn, 5)
    first, second, third, *idle = conn.requests
    assert [len(listed(b)) for b in (first, second, third)] == [2, 2, 1]
    assert set().union(*(listed(b) for b in (first, second, third))) == set(CAPPED)
    assert [b["max_wait_ms"] for b in (first, second, third)] == [0, 0, 20]
    assert (second["session_epoch"], third["session_epoch"]) == (1, 2)
    assert all(listed(b) == set() and b["max_wait_ms"] == 20 for b in idle)
    assert fetcher.full_fetches == 1
    session = apis._fetch_session_cache().get(fetcher.session_id)
    assert session is not None
    assert set(session.partitions) == set(CAPPED)


def test_fetcher_without_a_session_lists_every_partition_in_each_full_fetch() -> None:
    # The leader has no room for a session: every fetch is a full one, so after the first
    # answer says so, each lists every partition, beyond the per-fetch limit (else the
    # partitions past it would never be fetched).
    apis, _replicas, _zk = make_leader(CAPPED)
    apis._fetch_sessions = FetchSessionCache(max_entries=0)
    conn = Loopback(apis)
    fetcher = capped_fetches(apis, conn, 4)
    first, *rest = conn.requests[:4]
    assert len(listed(first)) == 2
    for body in rest:
        assert (body["session_id"], body["session_epoch"]) == (0, INITIAL_EPOCH)
        assert listed(body) == set(CAPPED)
        assert body["max_wait_ms"] == 20
    assert fetcher.session_id == INVALID_SESSION_ID


def test_fetcher_sends_added_changed_and_removed_partitions_only(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
) -> None:
    apis, _replicas, conn, fetcher = fetcher_setup
    wait_until(lambda: fetcher.session_epoch >= 2, "a session")
    new = TopicPartition("c", 0)
    change_partitions(apis, {new: (LEADER, 0, (LEADER, FOLLOWER))})
    # And the UpdateMetadata that follows (a partition the metadata cache does not list
    # is UNKNOWN_TOPIC_OR_PARTITION to a follower's fetch too).
    apis.metadata.update(update_metadata_listing([new], LEADER, [LEADER, FOLLOWER]))
    seen = len(conn.requests)
    fetcher.add_all([(new, FetchState(0, 0))])
    fetcher.add_all([(T0, FetchState(0, 0))])  # unchanged: not sent again
    fetcher.remove([T1])
    wait_until(lambda: any(listed(b) for b in conn.requests[seen:]), "the change sent")
    changes = [b for b in conn.requests[seen:] if listed(b) or forgotten(b)]
    assert len(changes) == 1
    assert listed(changes[0]) == {new}
    assert forgotten(changes[0]) == {T1}
    assert fetcher.full_fetches == 1


def test_fetcher_that_forgot_every_partition_starts_its_next_session_afresh(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
) -> None:
    """The leader closes a session left with no partition and answers session id 0: the
    fetcher's next fetch is a full one naming no session (Kafka 2.8's
    FetchSessionHandler: an incremental answer with INVALID_SESSION_ID -> INITIAL), not an
    incremental one of the closed session, which would be FETCH_SESSION_ID_NOT_FOUND."""
    apis, _replicas, conn, fetcher = fetcher_setup
    wait_until(lambda: fetcher.session_epoch >= 2, "a session")
    old = fetcher.session_id
    seen = len(conn.requests)
    fetcher.remove([T0, T1, T2])
    wait_until(lambda: any(forgotten(b) for b in conn.requests[seen:]), "the partitions forgotten")
    wait_until(lambda: fetcher.session_id == INVALID_SESSION_ID, "the session closed")
    assert apis._fetch_session_cache().get(old) is None
    fetcher.add_all([(T0, FetchState(0, 0))])
    wait_until(lambda: fetcher.session_epoch >= 2, "a new session")
    last_forget = max(i for i, b in enumerate(conn.requests) if forgotten(b))
    after = conn.requests[last_forget + 1 :]
    assert [(b["session_id"], b["session_epoch"]) for b in after][:1] == [
        (INVALID_SESSION_ID, INITIAL_EPOCH)
    ]
    assert all(b["session_id"] != old for b in after)
    assert fetcher.full_fetches == 2


def test_fetcher_sets_aside_a_fenced_partition_and_takes_it_back(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
) -> None:
    apis, _replicas, conn, fetcher = fetcher_setup
    wait_until(lambda: fetcher.session_epoch >= 2, "a session")
    seen = len(conn.requests)
    change_partitions(apis, {T2: (LEADER, 1, (LEADER, FOLLOWER))})
    # Fenced at epoch 0: forgotten from the session, then, after the backoff, listed again.
    wait_until(lambda: any(T2 in forgotten(b) for b in conn.requests[seen:]), "T2 forgotten")
    wait_until(lambda: any(T2 in listed(b) for b in conn.requests[seen:]), "T2 back")
    # The controller's news for this follower: the new epoch, listed, and no error then.
    fetcher.add_all([(T2, FetchState(0, 1))])
    wait_until(
        lambda: any(
            p["current_leader_epoch"] == 1
            for b in conn.requests[seen:]
            for t in b["topics"]
            if t["topic"] == T2.topic
            for p in t["partitions"]
        ),
        "T2 at epoch 1",
    )
    assert fetcher.full_fetches == 1


def test_fetcher_starts_over_when_the_leader_loses_the_session(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
) -> None:
    apis, _replicas, conn, fetcher = fetcher_setup
    wait_until(lambda: fetcher.session_epoch >= 2, "a session")
    old = fetcher.session_id
    cache = apis._fetch_session_cache()
    cache.remove(old)  # as a restarted or evicting leader would
    wait_until(lambda: fetcher.full_fetches == 2 and fetcher.session_epoch >= 2, "a new session")
    assert fetcher.session_id not in (old, INVALID_SESSION_ID)
    assert [s.id for s in cache.sessions()] == [fetcher.session_id]
    # An unknown id is not named again (Kafka 2.8's FetchSessionHandler: INITIAL).
    full = [b for b in conn.requests if b["session_epoch"] == INITIAL_EPOCH]
    assert [b["session_id"] for b in full] == [INVALID_SESSION_ID, INVALID_SESSION_ID]


def test_fetcher_out_of_step_closes_its_session_as_it_opens_a_new_one(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """INVALID_FETCH_SESSION_EPOCH: the leader still has the session, so the next full
    fetch names it to close it (Kafka 2.8's FetchSessionHandler: nextCloseExisting), on
    the same connection (a session error is not a failed request)."""
    apis, _replicas, conn, fetcher = fetcher_setup
    closes: list[None] = []
    monkeypatch.setattr(conn, "close", lambda: closes.append(None))
    wait_until(lambda: fetcher.session_epoch >= 2, "a session")
    old = fetcher.session_id
    cache = apis._fetch_session_cache()
    session = cache.get(old)
    assert session is not None
    with session.lock:
        session.epoch += 1000  # as if a request of ours were lost after the leader took it
    wait_until(lambda: fetcher.full_fetches == 2 and fetcher.session_epoch >= 2, "a new session")
    full = [b for b in conn.requests if b["session_epoch"] == INITIAL_EPOCH]
    assert full[-1]["session_id"] == old
    assert [s.id for s in cache.sessions()] == [fetcher.session_id]
    assert closes == []


def test_fetcher_starts_over_after_a_connection_failure_closing_the_old_session(
    fetcher_setup: tuple[KafkaApis, ReplicaManager, Loopback, ReplicaFetcherThread],
) -> None:
    apis, _replicas, conn, fetcher = fetcher_setup
    wait_until(lambda: fetcher.session_epoch >= 2, "a session")
    old = fetcher.session_id
    conn.closed = True  # the next request fails; the fetcher reconnects
    wait_until(lambda: fetcher.full_fetches == 2 and fetcher.session_epoch >= 2, "a new session")
    full = [b for b in conn.requests if b["session_epoch"] == INITIAL_EPOCH]
    assert full[-1]["session_id"] == old  # closes the old one as it opens the new one
    assert [s.id for s in apis._fetch_session_cache().sessions()] == [fetcher.session_id]
