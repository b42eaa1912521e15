"""What the Produce handler refuses before the log is asked (Kafka 2.8's
handleProduceRequest and ProduceRequest.validateRecords, ReplicaManager.appendRecords's
acks check), and the acks=0 answer, through a real request handler and log, the wire
codec both ways. The socket-level cases are in
tests/integration/test_data_plane_bad_input.py; these hold the same rules without a
cluster. Found by mutation testing."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker.apis import CloseConnection
from broker.config import BrokerConfig
from broker.error_responses import error_response
from storage.codecs import Compression
from storage.errors import UnknownCompressionError
from storage.log import LogConfig
from storage.log_manager import LogManager
from storage.records import BATCH_HEADER_SIZE
from storage.testing import build_batch, legacy_message
from tests.unit.test_fetch_session import FOLLOWER, LEADER, T0, T1, Loopback, make_leader
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
    """validateRecords: a second batch, or none at all, is INVALID_RECORD; 16 zero bytes
    after the batch, a size field of 0, are CORRUPT_MESSAGE (its iterator's
    nextBatchSize throws CorruptRecordException looking for a second batch)."""
    one = bytes(build_batch([b"v"]))
    answer = refused(logs, version, one + bytes(build_batch([b"w"])))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    if version >= 8:
        assert "exactly one" in answer["error_message"]
    answer = refused(logs, version, one + bytes(16))
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE
    # A batch of another magic is corrupt (nextBatchSize) before its codec bits, zstd's,
    # are looked at.
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


@pytest.mark.parametrize("version", [2, 3, 9])
def test_null_records_reach_the_log_and_are_unknown_server_error(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """Kafka 2.8's validateRecords passes null records (not an instance of Records) and
    the checks of appendRecords and the leader's append come first (acks, the internal
    topic, the leadership, min.insync.replicas); then Log.analyzeAndValidateRecords
    throws (a NullPointerException), which appendToLocalLog answers UNKNOWN_SERVER_ERROR
    with the partition's log start offset and no message. They were INVALID_RECORD "no
    records", told before those checks."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    client = Loopback(apis)
    body = produce_records(T0, bytes(build_batch([b"v", b"w", b"x"])))
    assert answers(client.request(ApiKey.PRODUCE, version, body)) == [("a", 0, ErrorCode.NONE)]
    log = replicas.partitions[T0].log
    assert log is not None
    log.maybe_increment_log_start_offset(2)
    body["topic_data"][0]["partition_data"][0]["records"] = None
    got = client.request(ApiKey.PRODUCE, version, body)
    (answer,) = got["responses"][0]["partition_responses"]
    assert answer["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert answer["base_offset"] == -1
    assert answer["log_start_offset"] == (2 if version >= 5 else -1)  # a v5+ field
    assert answer.get("error_message") is None
    assert replicas.partitions[T0].log_end_offset == 3
    body["acks"] = 2
    assert answers(client.request(ApiKey.PRODUCE, version, body)) == [
        ("a", 0, ErrorCode.INVALID_REQUIRED_ACKS)
    ]


def test_an_append_refused_past_the_logs_first_checks_carries_the_log_start_offset(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's appendToLocalLog answers the exceptions it does not list (its case t:
    Throwable: NotEnoughReplicasException, an InvalidRecordException LogValidator throws
    outside a record's validation, UnsupportedForMessageFormatException, any other) with
    the partition's log start offset (processFailedRecord), and those it lists
    (UnknownTopicOrPartition, NotLeaderOrFollower, RecordTooLarge, RecordBatchTooLarge,
    CorruptRecord, KafkaStorage) with -1. Every refusal here answered -1."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(min_insync_replicas=2, max_message_bytes=1000)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        client = Loopback(apis)
        body = produce_records(T0, bytes(build_batch([b"v", b"w", b"x"])))
        assert answers(client.request(ApiKey.PRODUCE, 8, body)) == [("a", 0, ErrorCode.NONE)]
        log = replicas.partitions[T0].log
        assert log is not None
        log.maybe_increment_log_start_offset(2)

        def refusal(records: bytes, acks: int = 1) -> tuple[int, int]:
            body = produce_records(T0, records)
            body["acks"] = acks
            (answer,) = client.request(ApiKey.PRODUCE, 8, body)["responses"][0][
                "partition_responses"
            ]
            return answer["error_code"], answer["log_start_offset"]

        one = bytes(build_batch([b"v"]))
        assert refusal(one, acks=-1) == (ErrorCode.NOT_ENOUGH_REPLICAS, 2)
        assert refusal(bytes(build_batch([b"v"], base_offset=5))) == (ErrorCode.INVALID_RECORD, 2)
        bad_crc = bytearray(one)
        bad_crc[-1] ^= 1
        assert refusal(bytes(bad_crc)) == (ErrorCode.CORRUPT_MESSAGE, -1)
        assert refusal(bytes(build_batch([bytes(2000)]))) == (ErrorCode.MESSAGE_TOO_LARGE, -1)
        assert replicas.partitions[T0].log_end_offset == 3
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


@pytest.mark.parametrize("version", [3, 6, 7, 9])
def test_a_batch_naming_no_codec_fails_a_v3_to_v6_request_whole(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """Before v7, validateRecords reads the first batch's codec (the zstd check), and
    CompressionType.forId throws IllegalArgumentException for ids 5-7: not an ApiException,
    so handleProduceRequest does not answer it per partition; the request fails whole
    (KafkaApis.handleError, ProduceRequest.getErrorResponse: every partition
    UNKNOWN_SERVER_ERROR, no message) and nothing of it is appended, the validation of
    every partition coming before any append. From v7 the log reads the codec (its
    per-partition UNKNOWN_SERVER_ERROR) and the request's other batches are appended. A
    partition the metadata does not know is never validated."""
    apis, replicas, _zk = make_leader([T0, T1], isr=(LEADER,), logs=logs)
    no_codec = bytes(build_batch([b"n"], compression=5))
    body = produce_records(T0, bytes(build_batch([b"v"])))
    body["topic_data"][0]["partition_data"].append({"index": T1.partition, "records": no_codec})
    unknown = {"index": 99, "records": no_codec}
    client = Loopback(apis)
    if version < 7:
        with pytest.raises(UnknownCompressionError, match="codec 5"):
            client.request(ApiKey.PRODUCE, version, body)
        assert [replicas.partitions[tp].log_end_offset for tp in (T0, T1)] == [0, 0]
        failed = error_response(
            ApiKey.PRODUCE, version, ErrorCode.UNKNOWN_SERVER_ERROR, client.requests[-1]
        )
        assert failed is not None
        assert answers(failed) == [
            (T0.topic, T0.partition, ErrorCode.UNKNOWN_SERVER_ERROR),
            (T1.topic, T1.partition, ErrorCode.UNKNOWN_SERVER_ERROR),
        ]
        # Its batch on a partition unknown to the metadata is not read: the request goes on.
        body["topic_data"][0]["partition_data"] = [body["topic_data"][0]["partition_data"][0]]
        body["topic_data"][0]["partition_data"].append(unknown)
        got = answers(client.request(ApiKey.PRODUCE, version, body))
        assert got == [
            (T0.topic, T0.partition, ErrorCode.NONE),
            (T0.topic, 99, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert replicas.partitions[T0].log_end_offset == 1
    else:
        got = answers(client.request(ApiKey.PRODUCE, version, body))
        assert got == [
            (T0.topic, T0.partition, ErrorCode.NONE),
            (T1.topic, T1.partition, ErrorCode.UNKNOWN_SERVER_ERROR),
        ]
        assert [replicas.partitions[tp].log_end_offset for tp in (T0, T1)] == [1, 0]


# A producer's records as Kafka 2.8 reads them (ByteBufferLogInputStream, through
# MemoryRecords.batches): an entry of fewer than 12 bytes, of fewer than 17 (its magic
# byte unread) or not whole ends the batches, and the log appends the whole ones only
# (Log.trimInvalidBytes); a size field below 14 (LegacyRecord.RECORD_OVERHEAD_V0) or a
# magic above 2 is CorruptRecordException, CORRUPT_MESSAGE.
TWO_RECORDS = bytes(build_batch([b"v", b"w"]))
SECOND = bytes(build_batch([b"x"]))


def _with_magic(entry: bytes, magic: int) -> bytes:
    return entry[:16] + bytes([magic]) + entry[17:]


PARTIAL_TAILS = {
    "5 bytes": SECOND[:5],
    "12 bytes": SECOND[:12],
    "16 bytes": SECOND[:16],
    "17 bytes": SECOND[:17],
    "a batch but its last byte": SECOND[:-1],
    "a batch's header": SECOND[:BATCH_HEADER_SIZE],
    "a size over max.message.bytes": struct.pack(">qi", 0, 2_000_000) + SECOND[12:40],
    "magic 0, 17 bytes": bytes(legacy_message(b"old", magic=0))[:17],
    "magic 0 but its last byte": bytes(legacy_message(b"old", magic=0))[:-1],
    "magic 1 but its last byte": bytes(legacy_message(b"old", magic=1))[:-1],
}


@pytest.mark.parametrize("tail", PARTIAL_TAILS.values(), ids=PARTIAL_TAILS.keys())
@pytest.mark.parametrize("version", [2, 3, 8, 9])
def test_an_incomplete_entry_after_the_batch_is_left_out_and_the_batch_appended(
    logs: LogManager,  # noqa: F811
    version: int,
    tail: bytes,
) -> None:
    """validateRecords reads no second batch in an incomplete entry (no INVALID_RECORD),
    and the log's analyzeAndValidateRecords counts the whole batch's bytes only, which
    trimInvalidBytes keeps: the batch is appended, its records only, the tail written
    nowhere, answered NONE. Produce v0-v2 (no validateRecords) append the same. Before,
    a tail of up to 16 bytes was CORRUPT_MESSAGE and a longer one INVALID_RECORD."""
    apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    client = Loopback(apis)
    body = produce_records(T0, TWO_RECORDS + tail)
    (answer,) = client.request(ApiKey.PRODUCE, version, body)["responses"][0]["partition_responses"]
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, 0)
    partition_log = replicas.partitions[T0].log
    assert partition_log is not None
    assert partition_log.log_end_offset == 2
    segment = partition_log.dir / "00000000000000000000.log"
    assert segment.stat().st_size == len(TWO_RECORDS)
    # The next batch follows it, as if the tail had never come.
    assert produce(client, version, SECOND)["base_offset"] == 2
    assert segment.stat().st_size == len(TWO_RECORDS) + len(SECOND)
    assert partition_log.log_end_offset == 3


CORRUPT_TAILS = {
    "size 13, 12 bytes": struct.pack(">qi", 0, 13),
    "size 13, 20 bytes": struct.pack(">qi", 0, 13) + bytes(8),
    "size -1": struct.pack(">qi", 0, -1) + SECOND[12:30],
    "magic 5, 17 bytes": _with_magic(SECOND[:17], 5),
    "magic 5, whole": _with_magic(SECOND, 5),
    "magic -1, incomplete": _with_magic(SECOND[:-1], 0xFF),
}


@pytest.mark.parametrize("tail", CORRUPT_TAILS.values(), ids=CORRUPT_TAILS.keys())
@pytest.mark.parametrize("version", [2, 3, 9])
def test_an_entry_after_the_batch_with_a_bad_size_or_magic_is_corrupt_message(
    logs: LogManager,  # noqa: F811
    version: int,
    tail: bytes,
) -> None:
    """ByteBufferLogInputStream.nextBatchSize throws CorruptRecordException for a size
    field below 14 (with 12 bytes to read it) or a magic outside 0-2 (with 17 bytes to
    read it), whole or not; validateRecords meets it looking for a second batch, and
    handleProduceRequest answers the partition CORRUPT_MESSAGE (an ApiException),
    nothing appended. Before, such a tail over 16 bytes was INVALID_RECORD."""
    answer = refused(logs, version, TWO_RECORDS + tail)
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    "records",
    [TWO_RECORDS[:5], TWO_RECORDS[:16], TWO_RECORDS[:17], TWO_RECORDS[:-1]],
    ids=["5 bytes", "16 bytes", "17 bytes", "all but a byte"],
)
@pytest.mark.parametrize("version", [3, 9])
def test_from_v3_an_incomplete_entry_alone_is_invalid_record(
    logs: LogManager,  # noqa: F811
    version: int,
    records: bytes,
) -> None:
    """validateRecords: an incomplete entry is no batch, "Produce requests with version
    ... must have at least one record batch" (INVALID_RECORD). Before, CORRUPT_MESSAGE
    (the log's "trailing bytes")."""
    answer = refused(logs, version, records)
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    if version >= 8:
        assert "at least one record batch" in answer["error_message"]


def test_from_v3_a_bad_size_or_magic_alone_is_corrupt_message(
    logs: LogManager,  # noqa: F811
) -> None:
    """The first hasNext of validateRecords meets nextBatchSize's CorruptRecordException
    too, before any magic or batch count is looked at."""
    for records in (struct.pack(">qi", 0, 13), _with_magic(TWO_RECORDS[:20], 9)):
        assert refused(logs, 9, records)["error_code"] == ErrorCode.CORRUPT_MESSAGE
    # A message of magic 0 whose size field is below 14: corrupt before its magic is read.
    short_legacy = bytearray(legacy_message(b"old", magic=0))
    struct.pack_into(">i", short_legacy, 8, 10)
    assert refused(logs, 9, bytes(short_legacy))["error_code"] == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("version", [3, 9])
def test_validate_records_order_holds_with_a_tail(
    logs: LogManager,  # noqa: F811
    version: int,
) -> None:
    """validateRecords' order: the first batch's magic, its codec (zstd before v7), then
    the next entry, whose bad size is CORRUPT_MESSAGE and whose whole batch INVALID_RECORD
    (exactly one), whatever follows that."""
    zstd = bytes(build_batch([b"z"], compression=Compression.ZSTD))
    bad_size = struct.pack(">qi", 0, 13)
    assert refused(logs, 6, zstd + bad_size)["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert refused(logs, 7, zstd + bad_size)["error_code"] == ErrorCode.CORRUPT_MESSAGE
    old = bytes(legacy_message(b"old", magic=1))
    assert refused(logs, version, old + bad_size)["error_code"] == ErrorCode.INVALID_RECORD
    two_whole = TWO_RECORDS + SECOND
    for tail in (SECOND[:20], bad_size):
        answer = refused(logs, version, two_whole + tail)
        assert answer["error_code"] == ErrorCode.INVALID_RECORD


def test_records_are_checked_before_acks(
    logs: LogManager,  # noqa: F811
) -> None:
    """handleProduceRequest runs validateRecords before appendRecords looks at acks: a
    bad tail is CORRUPT_MESSAGE with acks 2 too (it was INVALID_REQUIRED_ACKS)."""
    apis, _replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
    body = produce_records(T0, TWO_RECORDS + struct.pack(">qi", 0, 13))
    body["acks"] = 2
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, body)
    assert answers(got) == [("a", 0, ErrorCode.CORRUPT_MESSAGE)]
