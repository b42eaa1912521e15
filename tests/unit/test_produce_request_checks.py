"""What the Produce handler refuses before the log is asked (Kafka 2.8's
handleProduceRequest and ProduceRequest.validateRecords, ReplicaManager.appendRecords's
acks check), and the acks=0 answer, through a real request handler and log, the wire
codec both ways. The socket-level cases are in
tests/integration/test_data_plane_bad_input.py; these hold the same rules without a
cluster. Found by mutation testing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.apis import CloseConnection
from broker.config import BrokerConfig
from storage.codecs import Compression
from storage.log import LogConfig
from storage.log_manager import LogManager
from storage.testing import build_batch, legacy_message
from tests.unit.test_fetch_session import FOLLOWER, LEADER, T0, Loopback, make_leader
from tests.unit.test_message_format_conversion import _wrapper, message, produce
from tests.unit.test_produce_handler import (
    answers,
    logs,  # noqa: F401 (a fixture)
    produce_records,
)
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

TRANSACTIONS0 = TopicPartition("__transaction_state", 0)


def refused(manager: LogManager, version: int, records: bytes) -> dict[str, Any]:
    """The answer to a Produce of ``records`` at ``version``, which must append nothing."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
    got = Loopback(apis).request(ApiKey.PRODUCE, version, produce_records(T0, records))
    assert replicas.partitions[T0].log_end_offset == 0
    (answer,) = got["responses"][0]["partition_responses"]
    assert answer["base_offset"] == -1
    result: dict[str, Any] = answer
    return result


@pytest.mark.parametrize("version", [3, 8, 9])
@pytest.mark.parametrize("magic", [0, 1])
def test_from_v3_messages_of_magic_0_or_1_are_invalid_record(
    logs: LogManager,  # noqa: F811
    version: int,
    magic: int,
) -> None:
    """ProduceRequest.validateRecords (v3 and up): "Produce requests with version ...
    are only allowed to contain record batches with magic version 2". Produce v0-v2's
    messages are converted (tests/unit/test_message_format_conversion.py)."""
    answer = refused(logs, version, bytes(legacy_message(b"old", magic=magic)))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    if version >= 8:  # the error message came with v8 (KIP-467)
        assert "magic 2" in answer["error_message"]


@pytest.mark.parametrize("version", [3, 9])
def test_from_v3_a_request_holds_exactly_one_batch_and_some_records(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """validateRecords: a second batch, or none at all, is INVALID_RECORD; a few bytes
    after the batch, too short to reach another's magic byte, are the log's to refuse
    (CORRUPT_MESSAGE)."""
    one = bytes(build_batch([b"v"]))
    answer = refused(logs, version, one + bytes(build_batch([b"w"])))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    if version >= 8:
        assert "exactly one" in answer["error_message"]
    answer = refused(logs, version, one + bytes(16))
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE
    # Nor is a batch of another magic (its codec bits zstd's) this check's.
    other_magic = bytearray(build_batch([b"v"], compression=Compression.ZSTD))
    other_magic[16] = 3
    assert refused(logs, 6, bytes(other_magic))["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert refused(logs, version, b"")["error_code"] == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_before_v7_is_unsupported_compression_type(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """KIP-110: zstd batches from Produce v7; before, UNSUPPORTED_COMPRESSION_TYPE (the
    codec read from the attributes' low three bits, a timestamp type bit set or not)."""
    for log_append_time in (False, True):
        batch = bytes(build_batch([b"z"], compression=Compression.ZSTD))
        if log_append_time:  # the timestamp type bit beside the codec's
            batch = batch[:22] + bytes([batch[22] | 0x08]) + batch[23:]
        answer = refused(logs, version, batch)
        assert answer["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_zstd_from_v7_and_other_codecs_before_are_appended(
    logs: LogManager,  # noqa: F811
) -> None:
    """Each appended and answered with its base offset and the log start offset (v5+;
    a CreateTime topic's log append time -1)."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    client = Loopback(apis)
    codecs = ((7, Compression.ZSTD), (6, Compression.GZIP), (5, Compression.LZ4))
    for base_offset, (version, codec) in enumerate(codecs):
        body = produce_records(T0, bytes(build_batch([b"v"], compression=codec)))
        (answer,) = client.request(ApiKey.PRODUCE, version, body)["responses"][0][
            "partition_responses"
        ]
        assert (
            answer["error_code"],
            answer["base_offset"],
            answer["log_start_offset"],
            answer["log_append_time_ms"],
        ) == (ErrorCode.NONE, base_offset, 0, -1)
    assert replicas.partitions[T0].log_end_offset == 3


def test_acks_zero_is_appended_without_an_answer_and_a_refusal_closes_the_connection(
    logs: LogManager,  # noqa: F811
) -> None:
    """acks=0 is one of appendRecords's acks: appended, nothing answered. A partition
    refused has no answer to carry its error: the connection is closed, as Kafka's
    sendNoOpResponseExemptThrottle after closeConnection, so the producer notices."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    body = produce_records(T0, bytes(build_batch([b"v"])))
    body["acks"] = 0
    # As the socket server decodes it: writable records.
    body["topic_data"][0]["partition_data"][0]["records"] = build_batch([b"v"])
    assert apis.handle(ApiKey.PRODUCE, 8, {"client_id": "p"}, body) is None
    assert replicas.partitions[T0].log_end_offset == 1
    body["topic_data"][0]["partition_data"][0]["records"] = b""
    with pytest.raises(CloseConnection, match="INVALID_RECORD"):
        apis.handle(ApiKey.PRODUCE, 8, {"client_id": "p"}, body)
    # A request whose every partition is refused for acks alone is answered (acks=2).
    body["acks"] = 2
    got = apis.handle(ApiKey.PRODUCE, 8, {"client_id": "p"}, body)
    assert got is not None


def test_a_clients_produce_to_the_transaction_state_topic_is_refused(
    logs: LogManager,  # noqa: F811
) -> None:
    """Every internal topic is refused to a client (appendToLocalLog's
    Topic.isInternal), __transaction_state as __consumer_offsets; with acks=0 too, the
    connection closed."""
    apis, replicas, _zk = make_leader([TRANSACTIONS0], isr=(LEADER,), logs=logs)
    body = produce_records(TRANSACTIONS0, bytes(build_batch([b"v"])))
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, body)
    assert answers(got) == [("__transaction_state", 0, ErrorCode.INVALID_TOPIC_EXCEPTION)]
    body["acks"] = 0
    body["topic_data"][0]["partition_data"][0]["records"] = build_batch([b"v"])
    with pytest.raises(CloseConnection, match="INVALID_TOPIC_EXCEPTION"):
        apis.handle(ApiKey.PRODUCE, 8, {"client_id": "p"}, body)
    assert replicas.partitions[TRANSACTIONS0].log_end_offset == 0


def test_an_unexpected_append_error_is_answered_without_a_message(
    logs: LogManager,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """appendToLocalLog's ``case t: Throwable``: UNKNOWN_SERVER_ERROR with no error
    message (LogAppendInfo.unknownLogAppendInfoWithLogStartOffset has none)."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)

    def failing(*_args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(replicas, "append_as_leader", failing)
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(build_batch([b"v"]))))
    (answer,) = got["responses"][0]["partition_responses"]
    assert (answer["error_code"], answer["error_message"]) == (ErrorCode.UNKNOWN_SERVER_ERROR, None)


def test_acks_all_is_answered_once_the_isr_has_the_batch_or_timed_out_at_its_timeout(
    logs: LogManager,  # noqa: F811
) -> None:
    """DelayedProduce: acks=-1 waits, up to the request's timeout_ms, for every ISR
    member to have the batch; at the timeout it is answered REQUEST_TIMED_OUT (the batch
    appended all the same, its base offset given). Answered NONE once the follower has
    it, however long that took within the timeout."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER, FOLLOWER), logs=logs)
    p = replicas.partitions[T0]
    body = produce_records(T0, bytes(build_batch([b"v"])))
    body["acks"], body["timeout_ms"] = -1, 50
    (answer,) = Loopback(apis).request(ApiKey.PRODUCE, 8, body)["responses"][0][
        "partition_responses"
    ]
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.REQUEST_TIMED_OUT, 0)
    body["timeout_ms"] = 60_000
    got: list[Any] = []
    producing = threading.Thread(
        target=lambda: got.append(Loopback(apis).request(ApiKey.PRODUCE, 8, body))
    )
    producing.start()
    deadline = time.monotonic() + 30
    while p.log_end_offset < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    replicas.record_follower_fetch(p, FOLLOWER, 2)
    producing.join(30)
    assert answers(got[0]) == [("a", 0, ErrorCode.NONE)]


def test_acks_all_below_min_insync_replicas_is_not_enough_replicas_and_acks_one_appends(
    tmp_path: Path,
) -> None:
    """ReplicaManager.appendRecords passes the request's acks to the leader's append:
    with the ISR below the topic's min.insync.replicas, acks=-1 is refused
    NOT_ENOUGH_REPLICAS, nothing appended, while acks=1 is appended."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(min_insync_replicas=2)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        body = produce_records(T0, bytes(build_batch([b"v"])))
        client = Loopback(apis)
        body["acks"] = -1
        assert answers(client.request(ApiKey.PRODUCE, 8, body)) == [
            ("a", 0, ErrorCode.NOT_ENOUGH_REPLICAS)
        ]
        assert replicas.partitions[T0].log_end_offset == 0
        body["acks"] = 1
        assert answers(client.request(ApiKey.PRODUCE, 8, body)) == [("a", 0, ErrorCode.NONE)]
        assert replicas.partitions[T0].log_end_offset == 1
    finally:
        manager.close()


def test_messages_converted_are_bounded_as_a_batch_by_their_topics_decompressed_size(
    tmp_path: Path,
) -> None:
    """A Produce v2's compressed message is decompressed to be converted: it may hold no
    more than its topic's batches may (records.max_decompressed_bytes, 16 times
    max.message.bytes: 1 MB here), MESSAGE_TOO_LARGE as for a batch
    (test_produce_handler's zstd bomb), nothing appended; one within it is converted."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(max_message_bytes=64 * 1024)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        client = Loopback(apis)
        bomb = _wrapper(0, 1, message(0, 1, bytes(2 << 20), None, 5))
        assert produce(client, 2, bomb)["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
        assert replicas.partitions[T0].log_end_offset == 0
        within = _wrapper(0, 1, message(0, 1, bytes(200 << 10), None, 5))
        assert produce(client, 2, within)["error_code"] == ErrorCode.NONE
        assert replicas.partitions[T0].log_end_offset == 1
    finally:
        manager.close()


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_before_v7_is_told_before_a_second_batch(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """validateRecords looks at the first batch's codec before whether another batch
    follows: a zstd batch and another before v7 is UNSUPPORTED_COMPRESSION_TYPE, as one
    alone. It was INVALID_RECORD."""
    zstd = bytes(build_batch([b"z"], compression=Compression.ZSTD))
    answer = refused(logs, version, zstd + bytes(build_batch([b"w"])))
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
