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
