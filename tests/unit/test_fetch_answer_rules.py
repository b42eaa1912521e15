"""A Fetch's answer rules as Kafka 2.8's ReplicaManager.fetchMessages / readFromLocalLog
give them, each seen through the request handler and the wire codec: when a fetch is
answered without waiting out max_wait_ms, and what each partition's answer holds."""

from __future__ import annotations

from pathlib import Path

from broker.apis import _Readable
from broker.config import BrokerConfig
from storage.codecs import Compression
from storage.log import LogConfig, ReadInfo
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_empty_fetch import LONG_WAIT_MS, answered
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    T0,
    T1,
    Loopback,
    fetch_body,
    leader_and_isr,
    make_leader,
    response_partitions,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

UNKNOWN = TopicPartition("not-here", 0)


def test_a_fetch_with_a_partition_error_is_answered_at_once() -> None:
    """fetchMessages answers at once when reading any partition gave an error
    (errorReadingData), whatever min_bytes and max_wait_ms: a consumer learns of an
    unknown partition (or a moved leader) without a long poll, its other partitions
    answered with what they have."""
    apis, _replicas, _zk = make_leader([T0], isr=(1,))
    body = fetch_body({T0: 0, UNKNOWN: 0}, replica_id=-1, leader_epoch=-1)
    body.update(max_wait_ms=LONG_WAIT_MS, min_bytes=1)
    got = answered(Loopback(apis), body)
    parts = response_partitions(got)
    assert parts[UNKNOWN]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (parts[T0]["error_code"], parts[T0]["records"]) == (ErrorCode.NONE, b"")


def test_a_consumer_reads_up_to_the_high_watermark_a_follower_to_the_log_end(
    tmp_path: Path,
) -> None:
    """readFromLocalLog bounds a consumer's read by the high watermark (FetchHighWatermark)
    and a follower's by the log end (FetchLogEnd): records the ISR has not all got are
    not given to a consumer, which a leader change could take back."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER, FOLLOWER), logs=logs)
        error, *_ = replicas.append_as_leader(T0, build_batch([b"v1", b"v2"]), 1)
        assert error == ErrorCode.NONE
        assert replicas.partitions[T0].high_watermark == 0
        conn = Loopback(apis)
        consumer = response_partitions(
            conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}, replica_id=-1, leader_epoch=-1))
        )[T0]
        assert (consumer["error_code"], consumer["high_watermark"]) == (ErrorCode.NONE, 0)
        assert consumer["records"] == b""
        follower = response_partitions(conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0})))[T0]
        assert follower["error_code"] == ErrorCode.NONE
        assert len(follower["records"]) > 0
        # The follower fetches past them: the high watermark moves, the consumer reads.
        conn.request(ApiKey.FETCH, 12, fetch_body({T0: 2}))
        assert replicas.partitions[T0].high_watermark == 2
        consumer = response_partitions(
            conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}, replica_id=-1, leader_epoch=-1))
        )[T0]
        assert consumer["records"] == follower["records"]
        assert (consumer["high_watermark"], consumer["last_stable_offset"]) == (2, 2)
    finally:
        logs.close()


def test_a_partition_max_bytes_of_zero_still_answers_the_first_batch(tmp_path: Path) -> None:
    """KIP-74: the first partition with records gets its first batch whatever its limit,
    0 too (LogSegment.read with minOneMessage: max(maxSize, the batch's size)); a Java
    consumer's max.partition.fetch.bytes may be 0. A later partition with 0 gets nothing."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0, T1], isr=(LEADER,), logs=logs)
        batch = build_batch([b"v" * 100])
        for tp in (T0, T0, T1):
            assert replicas.append_as_leader(tp, bytearray(batch), 1)[0] == ErrorCode.NONE
        body = fetch_body({T0: 0, T1: 0}, replica_id=-1, leader_epoch=-1)
        for p in body["topics"][0]["partitions"]:
            p["partition_max_bytes"] = 0
        got = response_partitions(Loopback(apis).request(ApiKey.FETCH, 12, body))
        assert len(got[T0]["records"]) == len(batch)
        assert got[T1]["records"] == b""
        assert (got[T0]["error_code"], got[T1]["error_code"]) == (ErrorCode.NONE, ErrorCode.NONE)
    finally:
        logs.close()


def test_readable_bytes_count_each_partition_up_to_its_max_bytes() -> None:
    """DelayedFetch.tryComplete (Case G) adds min(bytes to the readable end, partition max
    bytes) per partition: a read that saw more readable than its partition may take
    counts only that much towards min_bytes."""
    readable = _Readable(1100)
    readable.add(ReadInfo(0, 0, 1, None, 0, 3, bytes_to_end=1200), 1000)
    assert readable.available == 1000
    assert not readable.enough()
    readable.add(ReadInfo(0, 0, 1, None, 0, 3, bytes_to_end=150), 1000)
    assert readable.enough()
    later = _Readable(1 << 20)
    later.add(ReadInfo(0, 0, 1, None, 0, 3, bytes_to_end=10, end_in_later_segment=True), 1000)
    assert later.enough()  # Case F: the readable end is in a later segment


def test_broker_zero_fetches_as_a_follower(tmp_path: Path) -> None:
    """Any replica id from 0 up is a follower (FetchRequest.isFromFollower: replicaId >= 0):
    broker 0 reads to the log end, and its position moves the high watermark."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        replicas.become_leader_or_follower(
            leader_and_isr({T0: (LEADER, 1, (LEADER, 0))}, replicas=(LEADER, 0))
        )
        error, *_ = replicas.append_as_leader(T0, build_batch([b"v1", b"v2"]), 1)
        assert error == ErrorCode.NONE
        assert replicas.partitions[T0].high_watermark == 0
        conn = Loopback(apis)
        got = response_partitions(
            conn.request(ApiKey.FETCH, 12, fetch_body({T0: 0}, replica_id=0, leader_epoch=1))
        )[T0]
        assert got["error_code"] == ErrorCode.NONE
        assert len(got["records"]) > 0
        conn.request(ApiKey.FETCH, 12, fetch_body({T0: 2}, replica_id=0, leader_epoch=1))
        assert replicas.partitions[T0].high_watermark == 2
    finally:
        logs.close()


def test_a_zstd_topic_fetched_before_v10_is_answered_the_error_alone(tmp_path: Path) -> None:
    """A fetch older than v10 of a topic whose compression.type is zstd is answered
    UNSUPPORTED_COMPRESSION_TYPE as Kafka 2.8's errorResponse gives it: no records, and
    high watermark, last stable offset and log start offset -1."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(compression=Compression.ZSTD)
    logs = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        assert replicas.append_as_leader(T0, build_batch([b"v"]), 1)[0] == ErrorCode.NONE
        body = fetch_body({T0: 0}, replica_id=-1, leader_epoch=-1)
        got = response_partitions(Loopback(apis).request(ApiKey.FETCH, 9, body))[T0]
        assert got["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert got["records"] == b""
        assert (got["high_watermark"], got["last_stable_offset"], got["log_start_offset"]) == (
            -1,
            -1,
            -1,
        )
        # From v10 it is read.
        got = response_partitions(Loopback(apis).request(ApiKey.FETCH, 10, body))[T0]
        assert (got["error_code"], got["high_watermark"]) == (ErrorCode.NONE, 1)
        assert got["records"]
    finally:
        logs.close()
