"""Incremental fetch sessions (KIP-227), the leader's cache alone: which partitions an
incremental answer includes (Kafka 2.8's CachedPartition.maybeUpdateResponseData) and
which session a new one may take the slot of (FetchSessionCache.tryEvict and touch).
No server: the cache is driven directly, on a clock of its own."""

from __future__ import annotations

from collections.abc import Mapping

from broker.fetch_session import (
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchResult,
    FetchSessionCache,
    PartitionData,
    PartitionRequest,
)
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
