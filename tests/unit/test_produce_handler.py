"""The Produce handler's answers as Kafka 2.8's handleProduceRequest and appendRecords
give them: what it refuses whole, and what it appends. A real request handler and logs,
the wire codec both ways."""

from __future__ import annotations

import gzip
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from storage.codecs import Compression
from storage.log import LogConfig
from storage.log_manager import LogManager
from storage.records import BATCH_HEADER_SIZE, decode_varint, encode_varint
from storage.testing import RecordSpec, build_batch, with_body
from tests.unit.leader_and_isr_requests import update_metadata_listing
from tests.unit.test_codecs import zstd_rle_frame
from tests.unit.test_fetch_session import FOLLOWER, LEADER, T0, Loopback, make_leader
from tests.unit.test_zstd import frame_of_257_huffman_weights
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import LEADER_DURING_DELETE, TopicPartition

OFFSETS0 = TopicPartition("__consumer_offsets", 0)


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config)
    yield manager
    manager.close()


def leading(logs: LogManager, tp: TopicPartition = T0) -> tuple[KafkaApis, ReplicaManager]:
    apis, replicas, _zk = make_leader([tp], isr=(LEADER, FOLLOWER), logs=logs)
    return apis, replicas


def produce(
    tp: TopicPartition, acks: int, *batches: list[bytes], timeout_ms: int = 1000
) -> dict[str, Any]:
    """A Produce body of ``tp``, listing it once for each batch given."""
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [
            {
                "name": tp.topic,
                "partition_data": [
                    {"index": tp.partition, "records": bytes(build_batch(values))}
                    for values in batches
                ],
            }
        ],
    }


def answers(response: dict[str, Any]) -> list[tuple[str, int, int]]:
    return [
        (t["name"], p["index"], p["error_code"])
        for t in response["responses"]
        for p in t["partition_responses"]
    ]


@pytest.mark.parametrize("acks", [2, -2, 1000])
def test_acks_other_than_minus_one_zero_or_one_are_refused_and_nothing_is_appended(
    logs: LogManager, acks: int
) -> None:
    """Kafka's appendRecords takes acks -1, 0 and 1 only; any other (librdkafka allows
    request.required.acks up to 1000) is answered INVALID_REQUIRED_ACKS for every
    partition and nothing is written. It was appended and acknowledged as acks=1."""
    apis, replicas = leading(logs)
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce(T0, acks, [b"v1", b"v2"]))
    assert answers(got) == [("a", 0, ErrorCode.INVALID_REQUIRED_ACKS)]
    assert replicas.partitions[T0].log_end_offset == 0


def test_a_clients_produce_to_an_internal_topic_is_refused(logs: LogManager) -> None:
    """Kafka's appendToLocalLog refuses internal topics (INVALID_TOPIC_EXCEPTION) unless
    the client id is the admin client's: a client's records in __consumer_offsets could
    corrupt the group coordinator's. They were appended."""
    apis, replicas = leading(logs, OFFSETS0)
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce(OFFSETS0, 1, [b"v"]))
    assert answers(got) == [("__consumer_offsets", 0, ErrorCode.INVALID_TOPIC_EXCEPTION)]
    assert replicas.partitions[OFFSETS0].log_end_offset == 0
    admin = Loopback(apis, client_id="__admin_client")
    got = admin.request(ApiKey.PRODUCE, 8, produce(OFFSETS0, 1, [b"v"]))
    assert answers(got) == [("__consumer_offsets", 0, ErrorCode.NONE)]
    assert replicas.partitions[OFFSETS0].log_end_offset == 1


def test_a_produce_to_a_topic_the_metadata_says_deleted_is_unknown_and_not_appended(
    logs: LogManager,
) -> None:
    """The controller's UpdateMetadata marked the topic deleted (leader -2) and the
    leader's StopReplica has not come yet (the controller takes the replicas offline,
    ZooKeeper writes, first; a deletion held behind a reassignment waits for it to end):
    Kafka 2.8's handleProduceRequest answers a partition its metadata cache does not list
    UNKNOWN_TOPIC_OR_PARTITION before anything is appended. The batch was appended and
    acknowledged, to be deleted with the topic."""
    apis, replicas = leading(logs)
    listing = update_metadata_listing([T0], LEADER, [LEADER, FOLLOWER])
    listing["topic_states"][0]["partition_states"][0]["leader"] = LEADER_DURING_DELETE
    assert apis.metadata.update(listing) == [T0.topic]
    for acks in (1, -1):
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce(T0, acks, [b"gone"]))
        assert answers(got) == [("a", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert replicas.partitions[T0].log_end_offset == 0


def produce_records(tp: TopicPartition, records: bytes) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": tp.topic, "partition_data": [{"index": tp.partition, "records": records}]}
        ],
    }


def test_a_batch_holding_more_than_its_topic_reads_is_message_too_large(tmp_path: Path) -> None:
    """A compacted topic's keys are read from a batch's records decompressed whole: a
    zstd body of 263 bytes holding 8 MB (more than the 1 MB a topic of max.message.bytes
    64 KB reads) is refused MESSAGE_TOO_LARGE, which the Java producer answers by
    splitting the batch, and the broker goes on serving."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(compact=True, max_message_bytes=64 * 1024)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas = leading(manager)
        one = build_batch([RecordSpec(b"v", key=b"k")])
        bomb = with_body(one, zstd_rle_frame(64), compression=Compression.ZSTD)
        client = Loopback(apis)
        got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(bomb)))
        assert answers(got) == [("a", 0, ErrorCode.MESSAGE_TOO_LARGE)]
        got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(one)))
        assert answers(got) == [("a", 0, ErrorCode.NONE)]
        assert replicas.partitions[T0].log_end_offset == 1
    finally:
        manager.close()


def test_a_batch_whose_records_do_not_parse_is_invalid_record(logs: LogManager) -> None:
    """Kafka's LogValidator reads every record of a producer's batch and refuses one that
    does not parse (INVALID_RECORD). Its CRC holding, it was appended and acknowledged."""
    apis, replicas = leading(logs)
    one = build_batch([b"v"])
    cut = with_body(one, b"\x10\x00")  # a record of 8 bytes with one of them
    client = Loopback(apis)
    got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(cut)))
    assert answers(got) == [("a", 0, ErrorCode.INVALID_RECORD)]
    got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(one)))
    assert answers(got) == [("a", 0, ErrorCode.NONE)]
    assert replicas.partitions[T0].log_end_offset == 1


def test_a_producers_batch_claiming_log_append_time_is_invalid_timestamp(
    logs: LogManager,
) -> None:
    """Kafka 2.8's LogValidator.validateTimestamp refuses a producer's batch whose
    timestamp type is LogAppendTime (INVALID_TIMESTAMP, "Producer should not set
    timestamp type to LogAppendTime"), whatever the topic's message.timestamp.type. It
    was appended as sent: its maxTimestamp, the producer's, passed for the broker's."""
    apis, replicas = leading(logs)
    batch = build_batch([b"v"], log_append_time=True)
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(batch)))
    assert answers(got) == [("a", 0, ErrorCode.INVALID_TIMESTAMP)]
    (answer,) = got["responses"][0]["partition_responses"]
    assert "LogAppendTime" in answer["error_message"]
    assert replicas.partitions[T0].log_end_offset == 0


@pytest.mark.parametrize("topic_codec", [None, Compression.GZIP])
def test_a_batch_naming_no_compression_codec_fails_its_partition(
    tmp_path: Path, topic_codec: int | None
) -> None:
    """Kafka 2.8's Log.analyzeAndValidateRecords reads batch.compressionType, which
    throws for codec ids 5-7 (CompressionType.forId): appendToLocalLog answers the
    partition UNKNOWN_SERVER_ERROR, nothing written, whatever the topic's
    compression.type; the request's other partitions are appended. It was acknowledged
    and stored for consumers to fail on (CORRUPT_MESSAGE, retriable, with a topic
    compression.type, which the Java producer sent again until its delivery timeout)."""
    t1 = TopicPartition(T0.topic, 1)
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(compression=topic_codec)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0, t1], isr=(LEADER,), logs=manager)
        body = produce_records(T0, bytes(build_batch([b"v"], compression=5)))
        body["topic_data"][0]["partition_data"].append(
            {"index": 1, "records": bytes(build_batch([b"v"]))}
        )
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, body)
        assert answers(got) == [
            ("a", 0, ErrorCode.UNKNOWN_SERVER_ERROR),
            ("a", 1, ErrorCode.NONE),
        ]
        answer = got["responses"][0]["partition_responses"][0]
        assert "compression codec 5" in answer["error_message"]
        assert replicas.partitions[T0].log_end_offset == 0
        assert replicas.partitions[t1].log_end_offset == 1
    finally:
        manager.close()


def test_a_partition_listed_twice_is_appended_once_with_its_last_entry(
    logs: LogManager,
) -> None:
    """Kafka's handleProduceRequest takes a request's partitions into a map: a partition
    listed twice is appended once, with the later entry, and answered once. Both were
    appended, under one answer, which told the producer of one batch."""
    apis, replicas = leading(logs)
    body = produce(T0, 1, [b"x"], [b"y", b"z"])
    got = Loopback(apis).request(ApiKey.PRODUCE, 8, body)
    assert answers(got) == [("a", 0, ErrorCode.NONE)]
    assert replicas.partitions[T0].log_end_offset == 2  # b"y" and b"z"


def test_a_corrupt_zstd_batch_of_a_compacted_topic_fails_its_partition_only(
    tmp_path: Path,
) -> None:
    """A compacted topic's batch is decompressed for its keys: a zstd body whose Huffman
    tree has 257 weights is UNKNOWN_SERVER_ERROR for its partition (Kafka's "Failed to
    decompress record stream", below), while the request's other partition is appended
    and answered. The decoder's ValueError escaped the handler: the whole request was
    answered UNKNOWN_SERVER_ERROR, the first partition's batch written (a producer
    retrying it wrote it twice)."""
    t1 = TopicPartition(T0.topic, 1)
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(compact=True)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0, t1], isr=(LEADER,), logs=manager)
        good = build_batch([RecordSpec(b"v", key=b"k")])
        bad = with_body(good, frame_of_257_huffman_weights(), compression=Compression.ZSTD)
        body = produce_records(T0, bytes(good))
        body["topic_data"][0]["partition_data"].append({"index": 1, "records": bytes(bad)})
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, body)
        assert answers(got) == [("a", 0, ErrorCode.NONE), ("a", 1, ErrorCode.UNKNOWN_SERVER_ERROR)]
        assert replicas.partitions[T0].log_end_offset == 1
        assert replicas.partitions[t1].log_end_offset == 0
    finally:
        manager.close()


def _undecodable_bodies() -> Iterator[tuple[str, int, bytes, ErrorCode]]:
    """(what, codec, body, Kafka 2.8.2's answer) for a batch of 20 keyed records."""
    body = bytes(_TWENTY[BATCH_HEADER_SIZE:])
    stream = gzip.compress(body, mtime=0)
    yield "lz4 past its header", Compression.LZ4, b"\x04\x22\x4d\x18" + b"\xff" * 20, USE
    crc = bytearray(stream)
    crc[-8] ^= 1  # the member's CRC-32: GZIPInputStream's "Corrupt GZIP trailer"
    yield "gzip, its CRC-32 wrong", Compression.GZIP, bytes(crc), USE
    # GZIPInputStream's EOFException in the records: "premature EOF reached"
    yield "gzip cut in its records", Compression.GZIP, stream[: len(stream) // 2], INVALID
    # ... past the records (the check that none remain): KafkaException
    yield "gzip cut in its trailer", Compression.GZIP, stream[:-4], USE
    # ... in its header, which wrapForInput reads: KafkaException
    yield "gzip cut in its header", Compression.GZIP, stream[:5], USE


_TWENTY = build_batch([RecordSpec(b"value-%d" % i, key=b"k%d" % i) for i in range(20)])
USE = ErrorCode.UNKNOWN_SERVER_ERROR
INVALID = ErrorCode.INVALID_RECORD


@pytest.mark.parametrize(
    "topic",
    [LogConfig(compact=True), LogConfig(compression=Compression.NONE)],
    ids=["compacted", "uncompressed"],
)
@pytest.mark.parametrize(
    ("what", "codec", "body", "error"),
    [pytest.param(*case, id=case[0]) for case in _undecodable_bodies()],
)
def test_a_compressed_body_that_does_not_decode_is_kafkas_final_error(
    tmp_path: Path, topic: LogConfig, what: str, codec: int, body: bytes, error: ErrorCode
) -> None:
    """Kafka 2.8.2 wraps a codec's IOException in KafkaException (CompressionType.
    wrapForInput, DefaultRecordBatch.StreamRecordIterator: "Failed to decompress record
    stream"), which appendToLocalLog answers UNKNOWN_SERVER_ERROR; an EOFException while
    it reads the records (a gzip stream cut short) is InvalidRecordException,
    INVALID_RECORD. Both are final for a producer. It was CORRUPT_MESSAGE, retriable:
    librdkafka sent the same batch 7 times, until its message.timeout.ms. A compacted
    topic reads the body for its keys, a compression.type naming a codec to compress it
    again; the batch's CRC failing is still CORRUPT_MESSAGE, as in Kafka."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        bad = with_body(_TWENTY, body, compression=codec)
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(bad)))
        assert answers(got) == [("a", 0, error)], what
        bad[-1] ^= 1  # the batch's CRC-32C no longer holds
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(bad)))
        assert answers(got) == [("a", 0, ErrorCode.CORRUPT_MESSAGE)]
        assert replicas.partitions[T0].log_end_offset == 0
    finally:
        manager.close()


def test_an_unexpected_error_in_one_partitions_append_fails_that_partition_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka 2.8's appendToLocalLog answers any other exception of one partition's append
    (``case t: Throwable``) with that partition's error, UNKNOWN_SERVER_ERROR, logged;
    the others are answered as they went. It escaped the handler, which answered every
    partition UNKNOWN_SERVER_ERROR, those already appended among them."""
    tps = [TopicPartition(T0.topic, i) for i in range(3)]
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader(tps, isr=(LEADER,), logs=manager)
        append = replicas.append_as_leader

        def failing(tp: TopicPartition, records: bytearray, acks: int) -> Any:
            if tp.partition == 1:
                raise RuntimeError("a bug")
            return append(tp, records, acks)

        monkeypatch.setattr(replicas, "append_as_leader", failing)
        body = produce_records(T0, bytes(build_batch([b"v"])))
        body["topic_data"][0]["partition_data"] += [
            {"index": i, "records": bytes(build_batch([b"v"]))} for i in (1, 2)
        ]
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, body)
        assert answers(got) == [
            ("a", 0, ErrorCode.NONE),
            ("a", 1, ErrorCode.UNKNOWN_SERVER_ERROR),
            ("a", 2, ErrorCode.NONE),
        ]
        assert [replicas.partitions[tp].log_end_offset for tp in tps] == [1, 0, 1]
        (record,) = [r for r in caplog.records if r.exc_info]
        assert "a-1" in record.getMessage()
        assert "a bug" in caplog.text
    finally:
        manager.close()


def test_a_batch_larger_than_a_segment_is_record_list_too_large(tmp_path: Path) -> None:
    """Kafka 2.8's Log.append refuses a batch larger than the topic's segment.bytes
    (RecordBatchTooLargeException: RECORD_LIST_TOO_LARGE) rather than write a segment
    past its size; the broker goes on taking batches that fit."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(segment_bytes=1024)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas = leading(manager)
        big = build_batch([b"x" * 2000])
        client = Loopback(apis)
        got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(big)))
        assert answers(got) == [("a", 0, ErrorCode.RECORD_LIST_TOO_LARGE)]
        assert replicas.partitions[T0].log_end_offset == 0
        got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(build_batch([b"v"]))))
        assert answers(got) == [("a", 0, ErrorCode.NONE)]
        assert replicas.partitions[T0].log_end_offset == 1
    finally:
        manager.close()


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (LogConfig(compression=Compression.NONE), USE),
        (LogConfig(compression=Compression.LZ4), USE),
        (LogConfig(compact=True), INVALID),
    ],
    ids=["uncompressed", "lz4", "compacted"],
)
@pytest.mark.parametrize("which", [0, 7])
def test_a_negative_record_length_in_a_compressed_body_is_answered_as_kafka_reads_it(
    tmp_path: Path, topic: LogConfig, error: ErrorCode, which: int
) -> None:
    """Kafka 2.8.2 reads a compressed batch's records in one of two ways. Compressed again
    (a compression.type naming another codec: LogValidator's streamingIterator),
    DefaultRecord.readFrom(DataInput) allocates a buffer of the record's length, a
    negative one IllegalArgumentException, which appendToLocalLog answers
    UNKNOWN_SERVER_ERROR. Kept as it came (the producer's codec; a compacted topic reads
    its keys: skipKeyValueIterator), readPartiallyFrom reads past no bytes,
    BufferUnderflowException, InvalidRecordException: INVALID_RECORD."""
    records = bytes(_TWENTY[BATCH_HEADER_SIZE:])
    start = 0
    for _ in range(which):  # the record ``which`` starts after the ones before
        length, pos = decode_varint(records, start)
        start = pos + length
    _, pos = decode_varint(records, start)
    body = records[:start] + encode_varint(-3) + records[pos:]
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        bad = with_body(_TWENTY, gzip.compress(body, mtime=0), compression=Compression.GZIP)
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(bad)))
        assert answers(got) == [("a", 0, error)]
        assert replicas.partitions[T0].log_end_offset == 0
    finally:
        manager.close()


@pytest.mark.parametrize(
    ("topic", "codec"),
    [
        (LogConfig(), Compression.NONE),
        (LogConfig(compact=True), Compression.NONE),
        (LogConfig(compact=True), Compression.GZIP),
        (LogConfig(compression=Compression.LZ4), Compression.GZIP),
    ],
    ids=["uncompressed", "compacted", "compacted-gzip", "lz4-from-gzip"],
)
def test_a_record_length_varint_over_five_bytes_is_kafkas_final_error(
    tmp_path: Path, topic: LogConfig, codec: int
) -> None:
    """Kafka 2.8.2's ByteUtils.readVarint throws IllegalArgumentException for a varint
    whose fifth byte says more follow, and every reader of a record (DefaultRecord.
    readFrom of a buffer or a stream, readPartiallyFrom) reads the record's length so
    before its try: appendToLocalLog answers UNKNOWN_SERVER_ERROR. Here the length was
    read as any varint up to 10 bytes, so such a batch, zero bytes padding a right
    length, was acknowledged and stored where a Java consumer cannot read it."""
    records = bytes(_TWENTY[BATCH_HEADER_SIZE:])
    length, pos = decode_varint(records, 0)
    zigzag = length << 1
    six = bytes([zigzag & 0x7F | 0x80, zigzag >> 7 | 0x80, 0x80, 0x80, 0x80, 0x00])
    body = six + records[pos:]
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        if codec == Compression.GZIP:
            body = gzip.compress(body, mtime=0)
        bad = with_body(_TWENTY, body, compression=codec)
        got = Loopback(apis).request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(bad)))
        assert answers(got) == [("a", 0, USE)]
        assert replicas.partitions[T0].log_end_offset == 0
    finally:
        manager.close()


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
def test_records_without_a_key_in_a_compacted_topic_are_answered_with_their_record_errors(
    tmp_path: Path, compression: int
) -> None:
    """Kafka 2.8's LogValidator.validateKey gives each record without a key of a
    compacted topic's batch a RecordError (its index in the batch, "Compacted topic
    cannot accept message without key in topic partition a-0."), and appendToLocalLog
    answers the RecordValidationException INVALID_RECORD with them (produce v8+), the
    message "One or more records have been rejected" and the log start offset. The
    answer listed no record error and no log start offset."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(compact=True)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas = leading(manager)
        specs = [RecordSpec(b"v0", key=b"k"), RecordSpec(b"v1"), RecordSpec(b"v2", key=b"k")]
        specs.append(RecordSpec(b"v3"))
        batch = build_batch(specs, compression=compression)
        client = Loopback(apis)
        got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(batch)))
        (answer,) = got["responses"][0]["partition_responses"]
        why = "Compacted topic cannot accept message without key in topic partition a-0."
        assert answer["error_code"] == ErrorCode.INVALID_RECORD
        assert answer["error_message"] == "One or more records have been rejected"
        assert answer["log_start_offset"] == 0
        assert [
            (e["batch_index"], e["batch_index_error_message"]) for e in answer["record_errors"]
        ] == [
            (1, why),
            (3, why),
        ]
        assert replicas.partitions[T0].log_end_offset == 0
        # Before v8 the answer has no record errors: the code alone.
        got = client.request(ApiKey.PRODUCE, 7, produce_records(T0, bytes(batch)))
        assert answers(got) == [("a", 0, ErrorCode.INVALID_RECORD)]
    finally:
        manager.close()


def test_records_out_of_the_timestamp_difference_are_answered_with_their_record_errors(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's LogValidator.validateTimestamp gives each record further from the
    broker's clock than message.timestamp.difference.max.ms a RecordError (its index in
    the batch, "Timestamp T of message with offset O is out of range. The timestamp
    should be within [now - d, now + d]"); processRecordErrors throws them under
    InvalidTimestampException("One or more records have been rejected due to invalid
    timestamp"), which appendToLocalLog answers with them (produce v8+) and the log start
    offset. The answer listed no record error and no log start offset, only the first
    record's refusal in a text of its own."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    topic = LogConfig(max_timestamp_difference_ms=60_000)
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, replicas = leading(manager)
        now = int(time.time() * 1000)
        specs = [
            RecordSpec(b"v0", timestamp=now),
            RecordSpec(b"v1", timestamp=1000),
            RecordSpec(b"v2", timestamp=-1),  # NO_TIMESTAMP: not checked
            RecordSpec(b"v3", timestamp=now + 3_600_000),
        ]
        client = Loopback(apis)
        got = client.request(ApiKey.PRODUCE, 8, produce_records(T0, bytes(build_batch(specs))))
        (answer,) = got["responses"][0]["partition_responses"]
        assert answer["error_code"] == ErrorCode.INVALID_TIMESTAMP
        assert answer["error_message"] == (
            "One or more records have been rejected due to invalid timestamp"
        )
        assert answer["log_start_offset"] == 0
        errors = [
            (e["batch_index"], e["batch_index_error_message"]) for e in answer["record_errors"]
        ]
        assert [index for index, _ in errors] == [1, 3]
        pattern = (
            r"Timestamp {ts} of message with offset {offset} is out of range\."
            r" The timestamp should be within \[(\d+), (\d+)\]"
        )
        for (_, why), ts, offset in zip(errors, (1000, now + 3_600_000), (1, 3), strict=True):
            match = re.fullmatch(pattern.format(ts=ts, offset=offset), why)
            assert match is not None, why
            low, high = int(match[1]), int(match[2])
            assert high - low == 120_000
            assert low <= now + 60_000 <= high
        assert replicas.partitions[T0].log_end_offset == 0
    finally:
        manager.close()
