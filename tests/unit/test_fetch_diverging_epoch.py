"""Fetch v12's last fetched epoch (KIP-595, KAFKA-10554): a fetcher that sends the epoch
of the last batch it fetched learns in the answer when its log diverged from the
leader's (a former leader's records this leader never had), as Kafka 2.8's
Partition.readRecords tells it: the leader's (epoch, end offset) for that epoch as
diverging_epoch, no records, answered at once, and the fetcher's offset not taken as its
position (KAFKA-13141). Our own followers ask with OffsetForLeaderEpoch instead and send
no epoch; these are other fetchers'. A real request handler and logs, the wire codec
both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_empty_fetch import LONG_WAIT_MS, answered
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    T0,
    T1,
    Loopback,
    change_partitions,
    fetch_body,
    make_leader,
    response_partitions,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

NO_DIVERGENCE = {"epoch": -1, "end_offset": -1}  # the tagged field's default


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[tuple[KafkaApis, ReplicaManager]]:
    """LEADER leads T0 and T1 (ISR: LEADER and FOLLOWER): three batches of one record in
    leader epoch 0 (offsets 0-2), then two in epoch 2 (offsets 3-4): another broker led
    in epoch 1 and had no record appended here."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    apis, replicas, _zk = make_leader([T0, T1], isr=(LEADER, FOLLOWER), logs=logs)
    try:
        for tp in (T0, T1):
            for i in range(3):
                assert replicas.append_as_leader(tp, build_batch([b"e0-%d" % i]), 1)[0] == 0
        change_partitions(apis, {tp: (LEADER, 2, (LEADER, FOLLOWER)) for tp in (T0, T1)})
        for tp in (T0, T1):
            for i in range(2):
                assert replicas.append_as_leader(tp, build_batch([b"e1-%d" % i]), 1)[0] == 0
            log = replicas.partitions[tp].log
            assert log is not None
            assert log.end_offset_for_epoch(0) == (0, 3)
            assert log.end_offset_for_epoch(2) == (2, 5)
        yield apis, replicas
    finally:
        replicas.close()
        logs.close()


def _body(positions: dict[TopicPartition, tuple[int, int]], **kwargs: Any) -> dict[str, Any]:
    """A Fetch body: partition -> (fetch offset, last fetched epoch), current leader epoch
    2, waiting long unless answered."""
    body = fetch_body(
        {tp: offset for tp, (offset, _) in positions.items()}, leader_epoch=2, **kwargs
    )
    for topic in body["topics"]:
        for fp in topic["partitions"]:
            fp["last_fetched_epoch"] = positions[TopicPartition(topic["topic"], fp["partition"])][1]
    body["max_wait_ms"] = LONG_WAIT_MS
    return body


def _divergence(part: dict[str, Any]) -> dict[str, int]:
    return dict(part.get("diverging_epoch", NO_DIVERGENCE))


def test_a_follower_whose_log_diverged_is_told_where_at_once_and_not_counted(
    leader: tuple[KafkaApis, ReplicaManager],
) -> None:
    """The follower fetched offsets 0-4 in epoch 0 (its own records 3-4 as a former
    leader): this leader's epoch 0 ended at 3. It is answered diverging_epoch (0, 3) and
    no records at once, though it asked to wait; its offset 5 is no position here, so
    the high watermark does not move. Once it has truncated and fetched again with its
    last epoch right, it is read and counted."""
    apis, replicas = leader
    conn = Loopback(apis)
    hw_before = replicas.partitions[T0].high_watermark
    got = response_partitions(answered(conn, _body({T0: (5, 0)})))[T0]
    assert (got["error_code"], got["records"]) == (ErrorCode.NONE, b"")
    assert _divergence(got) == {"epoch": 0, "end_offset": 3}
    assert got["high_watermark"] == hw_before
    assert replicas.partitions[T0].high_watermark == hw_before
    # At or below where the epoch it names ended here: no divergence.
    got = response_partitions(conn.request(ApiKey.FETCH, 12, _body({T0: (3, 0)})))[T0]
    assert _divergence(got) == NO_DIVERGENCE
    assert got["records"]
    got = response_partitions(answered(conn, {**_body({T0: (5, 2)}), "max_wait_ms": 0}))[T0]
    assert _divergence(got) == NO_DIVERGENCE
    assert replicas.partitions[T0].high_watermark == 5  # now counted: caught up


def test_an_epoch_the_leader_never_had_diverges_at_the_next_ones_start(
    leader: tuple[KafkaApis, ReplicaManager],
) -> None:
    """An epoch between two of the leader's is answered with the largest below it and
    the start of the next (LeaderEpochFileCache.endOffsetFor): the fetcher's records of
    epoch 1 are none of this log's, even at an offset this log has."""
    apis, _replicas = leader
    got = response_partitions(answered(Loopback(apis), _body({T0: (3, 1)})))[T0]
    assert _divergence(got) == {"epoch": 0, "end_offset": 3}
    assert got["records"] == b""


def test_an_epoch_above_the_leaders_or_an_offset_below_its_log_start_is_out_of_range(
    leader: tuple[KafkaApis, ReplicaManager],
) -> None:
    """readRecords throws OffsetOutOfRangeException when the leader cannot say where the
    epoch ends (above every epoch it has) and, whether or not the logs diverged, when
    the fetch offset is below the log start (KAFKA-12996). The other partition of the
    request is served."""
    apis, replicas = leader
    conn = Loopback(apis)
    got = response_partitions(answered(conn, _body({T0: (5, 7), T1: (0, 0)})))
    assert got[T0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (got[T1]["error_code"], _divergence(got[T1])) == (ErrorCode.NONE, NO_DIVERGENCE)
    assert got[T1]["records"]
    log = replicas.partitions[T0].log
    assert log is not None
    log.update_high_watermark(5)
    assert log.maybe_increment_log_start_offset(2)
    # Epoch 1 would diverge (at 3); below the log start that is not what is answered.
    got = response_partitions(answered(conn, _body({T0: (1, 1)})))
    assert got[T0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _divergence(got[T0]) == NO_DIVERGENCE


def test_a_consumer_may_send_its_last_fetched_epoch_too(
    leader: tuple[KafkaApis, ReplicaManager],
) -> None:
    """readRecords checks whoever sends the epoch: a consumer's fetch (replica id -1)
    that diverged is told so as well."""
    apis, _replicas = leader
    got = response_partitions(answered(Loopback(apis), _body({T0: (4, 0)}, replica_id=-1)))[T0]
    assert (got["error_code"], got["records"]) == (ErrorCode.NONE, b"")
    assert _divergence(got) == {"epoch": 0, "end_offset": 3}


def test_a_fetch_session_keeps_the_epoch_and_answers_the_divergence_each_time(
    leader: tuple[KafkaApis, ReplicaManager],
) -> None:
    """The session keeps each partition's last fetched epoch (Kafka's CachedPartition):
    an incremental fetch that lists nothing still finds the divergence, and answers it
    at once every time (maybeUpdateResponseData: always sent), without counting the
    follower's offset; one that lists the partition with no epoch drops it."""
    apis, replicas = leader
    conn = Loopback(apis)
    opened = answered(conn, _body({T0: (5, 0)}))
    session_id = opened["session_id"]
    assert session_id != 0
    first = response_partitions(opened)
    assert _divergence(first[T0]) == {"epoch": 0, "end_offset": 3}
    for epoch in (1, 2):
        again = response_partitions(answered(conn, _body({}, session_id=session_id, epoch=epoch)))
        assert list(again) == [T0]
        assert _divergence(again[T0]) == {"epoch": 0, "end_offset": 3}
    assert replicas.partitions[T0].high_watermark == 0
    # Truncated to 3 and fetching on without an epoch: read from there.
    body = {**_body({T0: (3, -1)}, session_id=session_id, epoch=3), "max_wait_ms": 0}
    now = response_partitions(conn.request(ApiKey.FETCH, 12, body))
    assert _divergence(now[T0]) == NO_DIVERGENCE
    assert now[T0]["records"]
    session = apis._fetch_session_cache().get(session_id)
    assert session is not None
    assert session.last_fetched_epochs == {}
