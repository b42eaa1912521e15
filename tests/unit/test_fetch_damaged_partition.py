"""A batch damaged on disk (a bad sector, a bit flip in its length field) in a segment
recovery does not scan (below the recovery point, or after a clean shutdown, as in Kafka)
makes a read of its partition raise CorruptRecordError. That escaped the Fetch and
ListOffsets handlers, and the whole request was answered UNKNOWN_SERVER_ERROR: a follower
fetching hundreds of partitions from this leader stopped replicating all of them. Kafka
2.8's ReplicaManager.readFromLocalLog (and handleListOffsetRequest) catch per partition:
only the damaged partition is answered an error (CORRUPT_MESSAGE), the others are served.
A real request handler and logs, the wire codec both ways."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.fetcher import FetchState, ReplicaFetcherThread
from broker.log_limit import OncePer
from broker.replica_manager import ReplicaManager
from storage.log import LogConfig
from storage.log_manager import LogManager
from storage.records import iter_batches
from storage.testing import build_batch
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    Loopback,
    fetch_body,
    make_leader,
    response_partitions,
)
from tests.unit.test_fetcher_capped_session import Logs
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

NOW = 1_700_000_000_000
BAD = TopicPartition("bad", 0)
GOOD = TopicPartition("good", 0)
RECORDS = 20


def _config() -> BrokerConfig:
    return BrokerConfig.from_properties(
        {"zookeeper.connect": "127.0.0.1:2181", "broker.id": str(LEADER)}
    )


@pytest.fixture
def damaged(tmp_path: Path) -> Iterator[tuple[KafkaApis, ReplicaManager]]:
    """The leader of BAD and GOOD, 20 records each over several segments, restarted
    after a clean shutdown (no scan) with BAD's fourth batch's length field rotted."""
    logs = LogManager([tmp_path], _config())
    for tp in (BAD, GOOD):
        log = logs.get_or_create(tp, LogConfig(index_interval_bytes=100_000, segment_bytes=800))
        for i in range(RECORDS):
            log.append_as_leader(build_batch([b"o" * 80], base_timestamp=NOW + i), 0)
        log.update_high_watermark(RECORDS)
        assert len(log.segment_base_offsets()) > 1
    logs.close()
    segment = tmp_path / "bad-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    fourth = list(iter_batches(bytes(data)))[3]
    struct.pack_into(">i", data, fourth.position + 8, 5)  # a batch length of 5
    segment.write_bytes(bytes(data))
    logs = LogManager([tmp_path], _config())
    apis, replicas, _zk = make_leader([BAD, GOOD], isr=(LEADER,), logs=logs)
    try:
        assert replicas.partitions[BAD].high_watermark == RECORDS
        yield apis, replicas
    finally:
        replicas.close()
        logs.close()


def fetch(conn: Loopback, body: dict[str, Any]) -> dict[TopicPartition, dict[str, Any]]:
    got = conn.request(ApiKey.FETCH, 12, body)
    assert got["error_code"] == ErrorCode.NONE
    return response_partitions(got)


@pytest.mark.parametrize("replica_id", [-1, FOLLOWER])
def test_a_damaged_batch_fails_its_partition_not_the_fetch(
    damaged: tuple[KafkaApis, ReplicaManager], replica_id: int
) -> None:
    apis, _replicas = damaged
    body = fetch_body({BAD: 0, GOOD: 0}, replica_id=replica_id, epoch=-1)
    body["max_wait_ms"] = 0
    answered = fetch(Loopback(apis), body)
    assert answered[BAD]["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert answered[BAD]["records"] in (b"", None)
    assert answered[GOOD]["error_code"] == ErrorCode.NONE
    assert answered[GOOD]["records"]


def test_a_fetch_session_answers_the_damaged_partition_its_error_each_time(
    damaged: tuple[KafkaApis, ReplicaManager], caplog: pytest.LogCaptureFixture
) -> None:
    """A follower's session: the full fetch and each incremental one after it answer the
    damaged partition CORRUPT_MESSAGE and serve the other; the damage is logged once,
    with the log's directory, not once per fetch of a follower retrying every few ms."""
    apis, _replicas = damaged
    conn = Loopback(apis)
    with caplog.at_level(logging.DEBUG, logger="broker.apis"):
        full = conn.request(ApiKey.FETCH, 12, fetch_body({BAD: 0, GOOD: 0}))
        assert full["error_code"] == ErrorCode.NONE
        answered = response_partitions(full)
        assert answered[BAD]["error_code"] == ErrorCode.CORRUPT_MESSAGE
        assert answered[GOOD]["records"]
        for epoch in (1, 2, 3):
            body = fetch_body({}, session_id=full["session_id"], epoch=epoch)
            body["max_wait_ms"] = 0
            answered = fetch(conn, body)
            assert answered[BAD]["error_code"] == ErrorCode.CORRUPT_MESSAGE
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "bad-0" in warnings[0].getMessage()
    assert not warnings[0].exc_info  # no stack trace: the reason says what is wrong


def test_list_offsets_answers_the_damaged_partition_its_error_and_the_others(
    damaged: tuple[KafkaApis, ReplicaManager],
) -> None:
    apis, _replicas = damaged
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": tp.topic,
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": NOW + 4}
                ],
            }
            for tp in (BAD, GOOD)
        ],
    }
    got = Loopback(apis).request(ApiKey.LIST_OFFSETS, 5, body)
    answers = {t["name"]: t["partitions"][0] for t in got["topics"]}
    assert answers[BAD.topic]["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert answers[BAD.topic]["offset"] == -1
    assert (answers[GOOD.topic]["error_code"], answers[GOOD.topic]["offset"]) == (
        ErrorCode.NONE,
        4,
    )


def test_a_follower_backs_off_the_damaged_partition_and_replicates_the_others(
    damaged: tuple[KafkaApis, ReplicaManager], caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's AbstractFetcherThread: a partition answered an error is delayed for the
    backoff (partitionsWithError); the others go on. An error that no leadership change
    explains is logged where it is seen (as Kafka's error(...)), not at debug level."""
    apis, _replicas = damaged
    logs = Logs()
    fetcher = ReplicaFetcherThread(
        FOLLOWER,
        LEADER,
        ("127.0.0.1", 1),
        logs.sink,
        max_wait_ms=0,
        connect=lambda *_: Loopback(apis),
        backoff_ms=60_000,
    )
    fetcher.add_all([(BAD, FetchState(0, 0)), (GOOD, FetchState(0, 0))])
    with caplog.at_level(logging.WARNING, logger="broker.fetcher"):
        for _ in range(3):
            fetch = fetcher._build_fetch()
            if fetch is not None:
                fetcher._fetch_once(fetch)
        assert fetcher.partitions[BAD].delayed_until > time.monotonic()
        # Added again (a LeaderAndIsr): fetched, answered the same, not logged again.
        fetcher.add_all([(BAD, FetchState(0, 0))])
        fetch = fetcher._build_fetch()
        assert fetch is not None
        assert BAD in fetch.listed
        fetcher._fetch_once(fetch)
    assert logs.appended.count(GOOD) == 4  # fetched on, round after round
    warned = [r.getMessage() for r in caplog.records if r.name == "broker.fetcher"]
    assert len(warned) == 1, warned  # once, not at each backoff's end
    assert "bad-0" in warned[0]
    assert "CORRUPT_MESSAGE" in warned[0]
    assert BAD not in logs.appended
    assert fetcher.partitions[BAD].delayed_until > time.monotonic()  # delayed again


def test_once_per_interval_per_key() -> None:
    now = [0.0]
    due = OncePer(60.0, clock=lambda: now[0])
    assert due("a")
    assert due("b")
    assert not due("a")
    now[0] = 59.9
    assert not due("a")
    now[0] = 60.0
    assert due("a")
    assert not due("a")
