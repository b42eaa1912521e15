"""The ListOffsets handler's answers to clients while a new leader's high watermark lags
the start of its leader epoch (KIP-207), as Kafka 2.8's Partition.fetchOffsetForTimestamp
gives them. A real request handler and logs, the wire codec both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from storage.codecs import Compression
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from storage.testing import RecordSpec, build_batch, with_body
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    T0,
    T1,
    Loopback,
    change_partitions,
    make_leader,
)
from tests.unit.test_zstd import frame_of_257_huffman_weights
from wire.api import ApiKey
from wire.errors import ErrorCode

LATEST, EARLIEST = -1, -2
NOW = 1_700_000_000_000


@pytest.fixture
def lagging(tmp_path: Path) -> Iterator[tuple[KafkaApis, ReplicaManager]]:
    """Broker LEADER re-elected (leader epoch 1, starting at offset 2) over two records
    its follower has not fetched: the high watermark, 0, lags the epoch's start."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    apis, replicas, _zk = make_leader([T0], isr=(LEADER, FOLLOWER), logs=logs)
    error, _p, _info, _why = replicas.append_as_leader(T0, build_batch([b"v1", b"v2"]), 1)
    assert error == ErrorCode.NONE
    change_partitions(apis, {T0: (LEADER, 1, (LEADER, FOLLOWER))})
    p = replicas.partitions[T0]
    assert (p.high_watermark, p.epoch_start_offset) == (0, 2)
    yield apis, replicas
    logs.close()


def list_offset(
    apis: KafkaApis, timestamp: int, version: int = 5, replica_id: int = -1
) -> dict[str, Any]:
    body = {
        "replica_id": replica_id,
        "isolation_level": 0,
        "topics": [
            {
                "name": T0.topic,
                "partitions": [
                    {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                ],
            }
        ],
    }
    got = Loopback(apis).request(ApiKey.LIST_OFFSETS, version, body)
    answer: dict[str, Any] = got["topics"][0]["partitions"][0]
    return answer


def test_a_client_is_told_to_retry_while_the_high_watermark_lags_the_epoch_start(
    lagging: tuple[KafkaApis, ReplicaManager],
) -> None:
    """The latest offset, and an offset by timestamp not found below the high watermark,
    are OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) until the high watermark
    reaches the epoch's start: the lagging high watermark was answered as the latest
    offset, which a consumer resetting to it would start below what was acknowledged."""
    apis, replicas = lagging
    assert list_offset(apis, LATEST)["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE
    assert list_offset(apis, LATEST, version=4)["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
    assert list_offset(apis, 0)["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE
    earliest = list_offset(apis, EARLIEST)
    assert (earliest["error_code"], earliest["offset"]) == (ErrorCode.NONE, 0)
    # A follower's question is answered from the log end, as before.
    follower = list_offset(apis, LATEST, replica_id=FOLLOWER)
    assert (follower["error_code"], follower["offset"]) == (ErrorCode.NONE, 2)
    # The follower catches up: the high watermark reaches the epoch's start.
    replicas.record_follower_fetch(replicas.partitions[T0], FOLLOWER, 2)
    latest = list_offset(apis, LATEST)
    assert (latest["error_code"], latest["offset"]) == (ErrorCode.NONE, 2)
    by_time = list_offset(apis, 0)
    assert (by_time["error_code"], by_time["offset"]) == (ErrorCode.NONE, 0)


def test_a_timestamp_over_a_zstd_batch_that_does_not_decode_is_answered(tmp_path: Path) -> None:
    """A topic of compression.type producer stores a producer's batch as sent (its CRC
    holds): a zstd body whose Huffman tree has 257 weights is read by ListOffsets by
    timestamp, which takes a batch that does not decode whole (its first offset). The
    decoder's ValueError failed the whole request."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        one = build_batch([RecordSpec(b"v", timestamp=NOW)], base_timestamp=NOW)
        bad = with_body(one, frame_of_257_huffman_weights(), compression=Compression.ZSTD)
        error, _p, _info, why = replicas.append_as_leader(T0, bad, 1)
        assert error == ErrorCode.NONE, why
        answer = list_offset(apis, NOW - 5)
        assert (answer["error_code"], answer["offset"]) == (ErrorCode.NONE, 0)
    finally:
        logs.close()


def test_earliest_answers_the_leader_epoch_of_the_log_start(tmp_path: Path) -> None:
    """Kafka 2.8's Log.fetchOffsetByTimestamp(EARLIEST_TIMESTAMP) answers the earliest
    epoch cache entry's epoch when that entry starts at or below the log start offset,
    and KafkaApis puts it in the answer from v4: it was always -1 here."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        error, *_ = replicas.append_as_leader(T0, build_batch([b"v1", b"v2"]), 1)
        assert error == ErrorCode.NONE
        # Re-elected: the log still starts in epoch 0.
        change_partitions(apis, {T0: (LEADER, 1, (LEADER,))})
        earliest = list_offset(apis, EARLIEST)
        assert (earliest["error_code"], earliest["offset"], earliest["leader_epoch"]) == (
            ErrorCode.NONE,
            0,
            0,
        )
    finally:
        logs.close()


def test_earliest_answers_no_epoch_when_the_cache_starts_above_the_log_start(
    tmp_path: Path,
) -> None:
    """Records written without a leader epoch (an older message format) leave the epoch
    cache starting above the log start: no epoch is answered (Kafka's Optional.empty)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        log = logs.get_or_create(T0)
        log.append_as_follower(bytes(build_batch([b"old"], partition_leader_epoch=-1)))
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        assert replicas.partitions[T0].log is log
        assert log.epoch_cache.entries()[0].start_offset == 1  # epoch 0 starts past "old"
        earliest = list_offset(apis, EARLIEST)
        assert (earliest["error_code"], earliest["offset"], earliest["leader_epoch"]) == (
            ErrorCode.NONE,
            0,
            -1,
        )
    finally:
        logs.close()


def list_offsets(
    apis: KafkaApis, partitions: list[dict[str, Any]], version: int = 6
) -> list[dict[str, Any]]:
    """Several entries in one request: the answers, in order."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": T0.topic, "partitions": partitions}],
    }
    got = Loopback(apis).request(ApiKey.LIST_OFFSETS, version, body)
    answers: list[dict[str, Any]] = got["topics"][0]["partitions"]
    return answers


def test_a_partition_listed_twice_is_answered_invalid_request_each_time(tmp_path: Path) -> None:
    """Kafka 2.8's handleListOffsetRequestV1AndAbove answers every entry of a partition in
    offsetRequest.duplicatePartitions INVALID_REQUEST (timestamp and offset -1): it was
    answered once per entry, as if asked separately. Other partitions are answered."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0, T1], isr=(LEADER,), logs=logs)
        replicas.append_as_leader(T0, build_batch([b"v1"]), 1)
        entry = {"partition_index": 0, "current_leader_epoch": -1, "timestamp": EARLIEST}
        answers = list_offsets(
            apis, [entry, dict(entry, partition_index=T1.partition), dict(entry, timestamp=LATEST)]
        )
        assert [(a["partition_index"], a["error_code"]) for a in answers] == [
            (0, ErrorCode.INVALID_REQUEST),
            (T1.partition, ErrorCode.NONE),
            (0, ErrorCode.INVALID_REQUEST),
        ]
        for a in (answers[0], answers[2]):
            assert (a["timestamp"], a["offset"], a["leader_epoch"]) == (-1, -1, -1)
        # Also when the topic is listed twice, the partition once in each.
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": T0.topic, "partitions": [entry]}] * 2,
        }
        got = Loopback(apis).request(ApiKey.LIST_OFFSETS, 6, body)
        assert [p["error_code"] for t in got["topics"] for p in t["partitions"]] == [
            ErrorCode.INVALID_REQUEST
        ] * 2
    finally:
        logs.close()


def test_the_debugging_replica_id_reads_to_the_log_end_and_is_answered_by_a_follower(
    lagging: tuple[KafkaApis, ReplicaManager],
) -> None:
    """Kafka 2.8's handleListOffsetRequestV1AndAbove bounds only a consumer (-1) by the
    high watermark (isolationLevelOpt None otherwise) and answers the debugging replica id
    (-2) from a follower too (fetchOnlyFromLeader false): -2 was taken for a consumer,
    told to retry while the high watermark lagged and refused by a follower."""
    apis, _replicas = lagging
    debugging = list_offset(apis, LATEST, replica_id=-2)
    assert (debugging["error_code"], debugging["offset"]) == (ErrorCode.NONE, 2)
    # This broker becomes the follower: a consumer is sent to the leader, -2 is answered.
    change_partitions(apis, {T0: (FOLLOWER, 2, (LEADER, FOLLOWER))})
    client = list_offset(apis, LATEST)
    assert client["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    debugging = list_offset(apis, LATEST, replica_id=-2)
    assert (debugging["error_code"], debugging["offset"]) == (ErrorCode.NONE, 2)
    assert list_offset(apis, EARLIEST, replica_id=-2)["offset"] == 0
    # A follower's own id still needs the leader.
    follower = list_offset(apis, LATEST, replica_id=FOLLOWER)
    assert follower["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_v0_request_is_answered_old_style_offsets(
    lagging: tuple[KafkaApis, ReplicaManager],
) -> None:
    """Kafka 2.8 serves ListOffsets v0 (handleListOffsetRequestV0, Log.legacyFetchOffsetsBefore):
    the segments' base offsets and the log end offset, at most max_num_offsets from the
    one of the time asked for down, a consumer's bounded by the high watermark (which
    then comes first). librdkafka with broker.version.fallback=0.9.0 looks its start
    offset up so; the request closed the connection."""
    apis, replicas = lagging
    body = {
        "replica_id": -1,
        "topics": [
            {
                "name": T0.topic,
                "partitions": [
                    {"partition_index": 0, "timestamp": t, "max_num_offsets": n}
                    for t, n in ((EARLIEST, 1), (LATEST, 1), (LATEST, 5))
                ],
            }
        ],
    }
    client = Loopback(apis)
    got = client.request(ApiKey.LIST_OFFSETS, 0, body)
    answers = [(p["error_code"], p["old_style_offsets"]) for p in got["topics"][0]["partitions"]]
    # Each entry answered (Kafka's v0 handler looks for no duplicate): the latest offsets
    # of a consumer start with the high watermark, 0, the log end (2) dropped.
    assert answers == [(ErrorCode.NONE, [0]), (ErrorCode.NONE, [0]), (ErrorCode.NONE, [0, 0])]
    body["replica_id"] = -2  # the debugging id: up to the log end
    got = client.request(ApiKey.LIST_OFFSETS, 0, body)
    answers = [(p["error_code"], p["old_style_offsets"]) for p in got["topics"][0]["partitions"]]
    assert answers == [(ErrorCode.NONE, [0]), (ErrorCode.NONE, [2]), (ErrorCode.NONE, [2, 0])]
    assert replicas.partitions[T0].high_watermark == 0


def test_a_clients_latest_offset_is_the_high_watermark_with_the_leader_epoch(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's Partition.fetchOffsetForTimestamp answers LATEST_TIMESTAMP with the last
    fetchable offset (a consumer's: the high watermark, below the log end while a
    follower has not fetched) and the partition's leader epoch (v4 and up)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        change_partitions(apis, {T0: (LEADER, 3, (LEADER, FOLLOWER))})
        error, *_ = replicas.append_as_leader(T0, build_batch([b"v1", b"v2"]), 1)
        assert error == ErrorCode.NONE
        p = replicas.partitions[T0]
        assert (p.high_watermark, p.epoch_start_offset, p.log_end_offset) == (0, 0, 2)
        latest = list_offset(apis, LATEST)
        assert (latest["error_code"], latest["offset"], latest["leader_epoch"]) == (
            ErrorCode.NONE,
            0,
            3,
        )
        debugging = list_offset(apis, LATEST, replica_id=-2)
        assert (debugging["offset"], debugging["leader_epoch"]) == (2, 3)
    finally:
        logs.close()


def test_a_lookup_error_is_answered_over_offset_not_available(
    lagging: tuple[KafkaApis, ReplicaManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    """fetchOffsetForTimestamp looks the timestamp up first: its exception (a failed log
    directory) is the answer, OFFSET_NOT_AVAILABLE only for a lookup that found nothing
    below the high watermark while it lags."""
    apis, replicas = lagging
    log = replicas.partitions[T0].log
    assert log is not None

    def fail(_log: object, _timestamp: int) -> None:
        raise KafkaStorageError("the log directory failed")

    monkeypatch.setattr(type(log), "offset_for_timestamp", fail)
    answer = list_offset(apis, 0)
    assert (answer["error_code"], answer["offset"]) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)


@pytest.mark.parametrize(
    ("current_epoch", "error"),
    [
        (0, ErrorCode.FENCED_LEADER_EPOCH),
        (2, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (1, ErrorCode.NONE),
        (-1, ErrorCode.NONE),
    ],
)
def test_the_current_leader_epoch_is_checked(
    lagging: tuple[KafkaApis, ReplicaManager], current_epoch: int, error: ErrorCode
) -> None:
    """KIP-320: Kafka 2.8's handleListOffsetRequestV1AndAbove passes the entry's
    current_leader_epoch to getPartitionOrException / fetchOffsetForTimestamp: an older
    epoch is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, -1 not checked."""
    apis, _replicas = lagging  # leader epoch 1
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": T0.topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "current_leader_epoch": current_epoch,
                        "timestamp": EARLIEST,
                    }
                ],
            }
        ],
    }
    got = Loopback(apis).request(ApiKey.LIST_OFFSETS, 5, body)
    answer = got["topics"][0]["partitions"][0]
    assert answer["error_code"] == error
    assert answer["offset"] == (0 if error == ErrorCode.NONE else -1)


def test_a_timestamp_lookup_answers_the_batch_timestamp_offset_and_epoch(tmp_path: Path) -> None:
    """Log.fetchOffsetByTimestamp answers the first record at or after the timestamp: its
    batch's max timestamp (message format 2), its offset and its batch's leader epoch."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        early = build_batch([RecordSpec(b"a", timestamp=NOW)], base_timestamp=NOW)
        assert replicas.append_as_leader(T0, early, 1)[0] == ErrorCode.NONE
        change_partitions(apis, {T0: (LEADER, 4, (LEADER,))})
        late = build_batch([RecordSpec(b"b", timestamp=NOW + 10)], base_timestamp=NOW + 10)
        assert replicas.append_as_leader(T0, late, 1)[0] == ErrorCode.NONE
        found = list_offset(apis, NOW + 5)
        assert (found["error_code"], found["timestamp"], found["offset"]) == (
            ErrorCode.NONE,
            NOW + 10,
            1,
        )
        assert found["leader_epoch"] == 4
        assert list_offset(apis, NOW)["leader_epoch"] == 0
        # None at or after: no timestamp, no offset.
        none = list_offset(apis, NOW + 11)
        assert (none["error_code"], none["timestamp"], none["offset"]) == (ErrorCode.NONE, -1, -1)
    finally:
        logs.close()


def test_a_v0_request_of_the_debugging_id_is_answered_by_a_follower(
    lagging: tuple[KafkaApis, ReplicaManager],
) -> None:
    """handleListOffsetRequestV0: fetchOnlyFromLeader is false for the debugging replica
    id only; a consumer asking a follower is told NOT_LEADER_OR_FOLLOWER."""
    apis, _replicas = lagging
    change_partitions(apis, {T0: (FOLLOWER, 2, (LEADER, FOLLOWER))})
    body: dict[str, Any] = {
        "replica_id": -2,
        "topics": [
            {
                "name": T0.topic,
                "partitions": [{"partition_index": 0, "timestamp": LATEST, "max_num_offsets": 1}],
            }
        ],
    }
    client = Loopback(apis)
    got = client.request(ApiKey.LIST_OFFSETS, 0, body)["topics"][0]["partitions"][0]
    assert (got["error_code"], got["old_style_offsets"]) == (ErrorCode.NONE, [2])
    body["replica_id"] = -1
    got = client.request(ApiKey.LIST_OFFSETS, 0, body)["topics"][0]["partitions"][0]
    assert (got["error_code"], got["old_style_offsets"]) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, [])
