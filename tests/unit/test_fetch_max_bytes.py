"""A fetch's max_bytes (KIP-74): only the first partition that returns records may go over
it, by its first batch; later partitions get what is left of it and no "at least one
batch", as in Kafka 2.8's ReplicaManager.readFromLocalLog (minOneMessage turns false once
a partition returned records). A later partition given a whole batch over the limit made
an answer larger than a librdkafka consumer's receive.message.max.bytes: it read nothing
and reconnected forever."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import BrokerConfig
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_fetch_session import (
    LEADER,
    Loopback,
    fetch_body,
    make_leader,
    response_partitions,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

A = TopicPartition("m", 0)
B = TopicPartition("m", 1)


class Leader:
    """The only replica (so the high watermark follows appends) of A and B."""

    def __init__(self, tmp_path: Path) -> None:
        config = BrokerConfig.from_properties(
            {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(LEADER)}
        )
        self.logs = LogManager([tmp_path / "data"], config)
        self.apis, self.replicas, _zk = make_leader([A, B], isr=(LEADER,), logs=self.logs)
        self.conn = Loopback(self.apis)

    def append(self, tp: TopicPartition, size: int) -> int:
        """A batch of one record of `size` value bytes: its length in the log."""
        batch = build_batch([b"x" * size])
        error, _p, info, message = self.replicas.append_as_leader(tp, batch, 1)
        assert error == ErrorCode.NONE, message
        assert info is not None
        return len(batch)

    def fetch(self, body: dict[str, Any]) -> dict[TopicPartition, int]:
        """Record bytes answered for each partition."""
        got = self.conn.request(ApiKey.FETCH, 12, body)
        assert got["error_code"] == ErrorCode.NONE
        return {tp: len(p["records"] or b"") for tp, p in response_partitions(got).items()}


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    leader = Leader(tmp_path)
    yield leader
    leader.logs.close()


def consumer_fetch(
    offsets: dict[TopicPartition, int],
    max_bytes: int,
    partition_max_bytes: int = 1 << 20,
    **kw: Any,
) -> dict[str, Any]:
    body = fetch_body(offsets, replica_id=-1, leader_epoch=-1, **kw)
    body["max_bytes"] = max_bytes
    for topic in body["topics"]:
        for p in topic["partitions"]:
            p["partition_max_bytes"] = partition_max_bytes
    return body


def sessionless(offsets: dict[TopicPartition, int], max_bytes: int, **kw: Any) -> dict[str, Any]:
    return consumer_fetch(offsets, max_bytes, session_id=0, epoch=-1, **kw)


def test_a_later_partitions_batch_over_what_is_left_is_not_answered(leader: Leader) -> None:
    small = leader.append(A, 600)
    leader.append(B, 50_000)
    assert leader.fetch(sessionless({A: 0, B: 0}, 1000)) == {A: small, B: 0}


def test_a_later_partitions_batch_over_what_is_left_is_not_answered_in_a_session(
    leader: Leader,
) -> None:
    got = leader.conn.request(ApiKey.FETCH, 12, consumer_fetch({A: 0, B: 0}, 1 << 20))
    session_id = int(got["session_id"])
    assert session_id
    small = leader.append(A, 600)
    big = leader.append(B, 50_000)
    # B is answered for its new high watermark, without its records.
    got = leader.fetch(consumer_fetch({}, 1000, session_id=session_id, epoch=1))
    assert got == {A: small, B: 0}
    # B's batch comes in the next answer, alone (the first partition with records there),
    # though nothing changed since: the cut is remembered.
    assert leader.fetch(consumer_fetch({A: 1}, 1000, session_id=session_id, epoch=2)) == {B: big}


def test_the_first_partition_with_records_may_go_over_by_one_batch(leader: Leader) -> None:
    leader.append(A, 10)  # offset 0: not fetched
    big = leader.append(A, 50_000)
    leader.append(A, 10)
    leader.append(B, 10)
    # A has nothing at the offset asked for... (its log end): B comes first with records.
    assert leader.fetch(sessionless({A: 3, B: 0}, 1000)) == {A: 0, B: leader_batch(10)}
    # A's oversized batch is answered whole and alone, whatever the limits.
    got = leader.fetch(sessionless({A: 1, B: 0}, 1000, partition_max_bytes=100))
    assert got == {A: big, B: 0}


def test_a_batch_too_large_for_its_partition_max_bytes_after_the_first(leader: Leader) -> None:
    small = leader.append(A, 10)
    leader.append(B, 5000)
    assert leader.fetch(sessionless({A: 0, B: 0}, 1 << 20, partition_max_bytes=1000)) == {
        A: small,
        B: 0,
    }


def test_the_first_partition_is_held_to_the_fetch_max_bytes_beyond_its_first_batch(
    leader: Leader,
) -> None:
    one = leader.append(A, 600)
    leader.append(A, 600)
    leader.append(A, 600)
    # max_bytes 1000 under a partition_max_bytes of 1 MB: one batch, not all three.
    assert leader.fetch(sessionless({A: 0}, 1000)) == {A: one}


def leader_batch(size: int) -> int:
    return len(build_batch([b"x" * size]))


def test_a_later_partition_left_no_bytes_at_all_comes_in_the_next_round(leader: Leader) -> None:
    """The first partition's batch spends max_bytes exactly: nothing is left for B, whose
    batch is left out (readFromLocalLog reads it with limitBytes 0) and must come in the
    session's next answer though nothing changed since."""
    got = leader.conn.request(ApiKey.FETCH, 12, consumer_fetch({A: 0, B: 0}, 1 << 20))
    session_id = int(got["session_id"])
    assert session_id
    small = leader.append(A, 600)
    b = leader.append(B, 100)
    got = leader.fetch(consumer_fetch({}, small, session_id=session_id, epoch=1))
    assert got == {A: small, B: 0}
    assert leader.fetch(consumer_fetch({A: 1}, 1000, session_id=session_id, epoch=2)) == {B: b}


def test_the_brokers_fetch_max_bytes_caps_a_requests_max_bytes(tmp_path: Path) -> None:
    """Kafka 2.8's handleFetchRequest fetches min(request max_bytes, the broker's
    fetch.max.bytes) and asks for at most that as min_bytes: a consumer asking for more
    than the broker allows gets at most fetch.max.bytes (or one batch), at once."""
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(LEADER)}
    )
    logs = LogManager([tmp_path / "data"], config)
    try:
        apis, replicas, _zk = make_leader([A], isr=(LEADER,), logs=logs)
        apis.fetch_max_bytes = 1024
        batch = build_batch([b"x" * 600])
        for _ in range(3):
            assert replicas.append_as_leader(A, bytearray(batch), 1)[0] == ErrorCode.NONE
        body = sessionless({A: 0}, 1 << 20)
        # min_bytes over what is readable: capped too, so answered without waiting.
        body.update(min_bytes=1 << 20, max_wait_ms=600_000)
        conn = Loopback(apis)
        answers: list[dict[str, Any]] = []
        t = threading.Thread(target=lambda: answers.append(conn.request(ApiKey.FETCH, 12, body)))
        t.daemon = True
        t.start()
        t.join(30.0)  # a bound that only catches a hang
        assert answers, "the fetch waited for min_bytes over the broker's fetch.max.bytes"
        assert len(response_partitions(answers[0])[A]["records"]) == len(batch)
    finally:
        logs.close()


def test_a_max_bytes_of_zero_answers_the_first_batch_only(leader: Leader) -> None:
    """A Java consumer's fetch.max.bytes may be 0: Kafka 2.8's readFromLocalLog starts
    with limitBytes 0, so the first partition with records gets its first batch (KIP-74's
    minOneMessage) and the others nothing. 0 was taken for no limit: every batch of
    every partition was answered."""
    one = leader.append(A, 600)
    leader.append(A, 600)
    leader.append(B, 600)
    assert leader.fetch(sessionless({A: 0, B: 0}, 0)) == {A: one, B: 0}


def fetch_partitions(leader: Leader, body: dict[str, Any]) -> dict[TopicPartition, Any]:
    """The answer's partitions; a fetch that waits longer than a generous bound (its
    max_wait_ms may be long: an error must answer at once) fails the test."""
    answers: list[dict[str, Any]] = []
    t = threading.Thread(
        target=lambda: answers.append(leader.conn.request(ApiKey.FETCH, 12, body)), daemon=True
    )
    t.start()
    t.join(30.0)  # a bound that only catches a hang
    assert answers, "the fetch was not answered at once"
    assert answers[0]["error_code"] == ErrorCode.NONE
    return response_partitions(answers[0])


def offsets_of(p: dict[str, Any]) -> tuple[int, int, int, int]:
    """(error, high watermark, last stable offset, log start offset) of an answer."""
    return (
        p["error_code"],
        p["high_watermark"],
        p["last_stable_offset"],
        p["log_start_offset"],
    )


def test_a_negative_partition_max_bytes_with_records_to_read_is_an_error(
    leader: Leader,
) -> None:
    """Kafka 2.8's LogSegment.read refuses a negative size (IllegalArgumentException,
    answered UNKNOWN_SERVER_ERROR with no offsets, at once); Log.read answers before any
    segment read at the end of what the fetcher may read. It was read as 1 byte: the
    first batch."""
    leader.append(A, 10)
    leader.append(B, 10)
    body = sessionless({A: 0, B: 1}, 1 << 20)
    body.update(max_wait_ms=600_000, min_bytes=1 << 20)  # an error answers at once
    for p in body["topics"][0]["partitions"]:
        p["partition_max_bytes"] = -1
    got = fetch_partitions(leader, body)
    assert offsets_of(got[A]) == (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, -1)
    assert not got[A]["records"]
    # B is fetched at its high watermark: nothing to read, no error.
    assert offsets_of(got[B]) == (ErrorCode.NONE, 1, 1, 0)
    assert not got[B]["records"]


def test_a_negative_request_max_bytes_is_the_first_partitions_limit_only(
    leader: Leader,
) -> None:
    """readFromLocalLog gives the first partition min(its max bytes, the request's), then
    max(0, what is left): a negative max_bytes fails the first partition's read alone,
    and the next one gets its first batch (KIP-74, no partition having returned records)."""
    leader.append(A, 10)
    b_first = leader.append(B, 10)
    leader.append(B, 10)
    got = fetch_partitions(leader, sessionless({A: 0, B: 0}, -5))
    assert offsets_of(got[A]) == (ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, -1)
    assert offsets_of(got[B]) == (ErrorCode.NONE, 2, 2, 0)
    assert len(got[B]["records"]) == b_first
    # The first partition at its high watermark: no read, no error; B as before.
    got = fetch_partitions(leader, sessionless({A: 1, B: 0}, -5))
    assert offsets_of(got[A]) == (ErrorCode.NONE, 1, 1, 0)
    assert len(got[B]["records"]) == b_first


def test_a_read_that_fails_answers_no_offsets(leader: Leader) -> None:
    """An offset out of range is answered with the high watermark, last stable offset and
    log start offset unknown (-1), as every failed read in Kafka 2.8's readFromLocalLog;
    they were the partition's own."""
    leader.append(A, 10)
    got = fetch_partitions(leader, sessionless({A: 5}, 1 << 20))
    assert offsets_of(got[A]) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1)


def test_a_partition_given_no_bytes_is_still_told_its_offset_is_out_of_range(
    leader: Leader,
) -> None:
    """A's first batch spends the whole max_bytes; B, given no bytes, asks for an offset
    past its log end: Kafka's Log.read checks the offset before the size, so B is told
    OFFSET_OUT_OF_RANGE (its consumer resets its position now, not in a later round)."""
    small = leader.append(A, 600)
    leader.append(B, 10)
    got = fetch_partitions(leader, sessionless({A: 0, B: 7}, small))
    assert len(got[A]["records"]) == small
    assert offsets_of(got[B]) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1)
