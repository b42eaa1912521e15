"""Produce v0-v2 and Fetch v0-v3, whose records are messages of magic 0 and 1 (the
clients before Kafka 0.11), as Kafka 2.8 serves them with log.message.format.version 2.8:
a produce's messages converted up to a record batch (LogValidator), a fetch's batches down
to messages (KafkaApis.maybeConvertFetchedData, RecordsUtil.downConvert). A real request
handler and logs, the wire codec both ways."""

from __future__ import annotations

import gzip
import logging
import random
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from broker.apis import KafkaApis
from broker.config import BrokerConfig, effective_topic_config
from storage import codecs
from storage.codecs import Compression
from storage.legacy import LegacyUnsupportedCompressionError, down_convert
from storage.log import LogConfig
from storage.log_manager import LogManager
from storage.records import RecordSpec, build_batch, iter_batches, iter_records
from tests.unit.test_fetch_session import FOLLOWER, LEADER, T0, Loopback, make_leader
from wire.api import ApiKey
from wire.errors import ErrorCode


class Message(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def message(
    offset: int,
    magic: int,
    value: bytes | None,
    key: bytes | None = None,
    timestamp: int = -1,
    attributes: int = 0,
) -> bytes:
    body = struct.pack(">BB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


def messages(data: bytes) -> list[Message]:
    """A message set's messages, compressed ones' inner messages with theirs."""
    data = bytes(data)
    out: list[Message] = []
    pos = 0
    while pos < len(data):
        offset, size, crc = struct.unpack_from(">qiI", data, pos)
        body = data[pos + 16 : pos + 12 + size]
        assert zlib.crc32(body) == crc
        magic, attributes = body[0], body[1]
        at = 2
        timestamp = -1
        if magic == 1:
            (timestamp,) = struct.unpack_from(">q", body, at)
            at += 8
        fields: list[bytes | None] = []
        for _ in range(2):
            (n,) = struct.unpack_from(">i", body, at)
            at += 4
            fields.append(None if n < 0 else body[at : at + n])
            at += max(n, 0)
        out.append(Message(offset, magic, attributes, timestamp, fields[0], fields[1]))
        pos += 12 + size
    return out


@pytest.fixture
def apis(tmp_path: Path) -> Iterator[KafkaApis]:
    yield from _apis(tmp_path, LogConfig())


def _apis(tmp_path: Path, topic: LogConfig) -> Iterator[KafkaApis]:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    manager = LogManager([tmp_path], config, topic_config=lambda _topic: topic)
    try:
        apis, _replicas, _zk = make_leader([T0], isr=(LEADER,), logs=manager)
        yield apis
    finally:
        manager.close()


def produce(client: Loopback, version: int, records: bytes) -> dict[str, Any]:
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": T0.topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    got = client.request(ApiKey.PRODUCE, version, body)
    (answer,) = got["responses"][0]["partition_responses"]
    result: dict[str, Any] = answer
    return result


def fetch(
    client: Loopback, version: int, offset: int, max_bytes: int = 1 << 20, replica_id: int = -1
) -> dict[str, Any]:
    body = {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "topics": [
            {
                "topic": T0.topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": max_bytes}
                ],
            }
        ],
    }
    got = client.request(ApiKey.FETCH, version, body)
    (answer,) = got["responses"][0]["partitions"]
    result: dict[str, Any] = answer
    return result


def test_a_produce_of_magic_1_messages_is_appended_as_a_record_batch(apis: KafkaApis) -> None:
    """Kafka 2.8 takes a Produce v2's messages of magic 1 (Produce v0-v2 may carry
    message formats v0 and v1: ProduceRequest.validateRecords checks versions 3 and up)
    and its LogValidator converts them to a record batch, offsets assigned, keys, values
    and timestamps kept. The broker served Produce from v3 only: the request closed the
    connection."""
    client = Loopback(apis)
    records = message(0, 1, b"a", b"k", 1_000) + message(1, 1, None, b"k2", 1_005)
    answer = produce(client, 2, records)
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["base_offset"] == 0
    assert answer["log_append_time_ms"] == -1
    compressed = message(0, 1, b"b", None, 2_000) + message(1, 1, b"c", None, 2_001)
    wrapper = message(1, 1, gzip.compress(compressed), None, 2_001, Compression.GZIP)
    answer = produce(client, 2, wrapper)
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["base_offset"] == 2
    got = fetch(client, 12, 0)
    batches = list(iter_batches(got["records"]))
    assert [b.compression for b in batches] == [Compression.NONE, Compression.GZIP]
    records_read = [
        (r.offset, r.timestamp, r.key, r.value)
        for b in batches
        for r in iter_records(got["records"][b.position : b.position + b.size])
    ]
    assert records_read == [
        (0, 1_000, b"k", b"a"),
        (1, 1_005, b"k2", None),
        (2, 2_000, None, b"b"),
        (3, 2_001, None, b"c"),
    ]


def test_a_produce_of_magic_0_messages_has_no_timestamps(apis: KafkaApis) -> None:
    """Magic 0 carries no timestamp: Kafka's conversion gives the records NO_TIMESTAMP
    (-1). A message whose CRC does not hold is CORRUPT_MESSAGE, nothing appended."""
    client = Loopback(apis)
    answer = produce(client, 0, message(0, 0, b"a") + message(1, 0, b"b", b"k"))
    assert answer["error_code"] == ErrorCode.NONE
    got = fetch(client, 12, 0)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in iter_records(got["records"])] == [
        (0, -1, None, b"a"),
        (1, -1, b"k", b"b"),
    ]
    bad = bytearray(message(0, 0, b"c"))
    bad[-1] ^= 1
    assert produce(client, 1, bytes(bad))["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert fetch(client, 12, 0)["high_watermark"] == 2


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
@pytest.mark.parametrize(
    "codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4]
)
def test_a_fetch_before_v4_is_answered_messages(
    apis: KafkaApis, version: int, magic: int, codec: int
) -> None:
    """Kafka 2.8 down-converts a Fetch v0-v1's records to magic 0 and a v2-v3's to magic
    1 (RecordsUtil.downConvert): the headers dropped, an uncompressed batch's records
    from the fetch offset on, a compressed batch as one compressed message of its codec
    holding all its records, those below the fetch offset too, which consumers drop
    (downConvert filters on firstOffset for uncompressed batches only; magic 1: offsets
    relative to its first, the wrapper's the last). The broker served Fetch from v4
    only: the request closed the connection; then it left a compressed batch's records
    below the fetch offset out of its message."""
    client = Loopback(apis)
    batch = build_batch(
        [
            RecordSpec(b"a", b"k", 1_000),
            RecordSpec(b"b", None, 1_003, headers=(("h", b"x"),)),
            RecordSpec(None, b"k", 1_002),
        ],
        compression=codec,
    )
    assert produce(client, 8, bytes(batch))["error_code"] == ErrorCode.NONE
    answer = fetch(client, version, 1)
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["high_watermark"] == 3
    ts = (lambda t: t) if magic == 1 else (lambda _t: -1)
    expected = [(1, b"b", None, ts(1_003)), (2, None, b"k", ts(1_002))]
    got = messages(answer["records"])
    if codec == Compression.NONE:
        assert [(m.offset, m.value, m.key, m.timestamp) for m in got] == expected
        assert {(m.magic, m.attributes) for m in got} == {(magic, 0)}
        return
    (wrapper,) = got
    assert (wrapper.offset, wrapper.magic, wrapper.attributes) == (2, magic, codec)
    assert wrapper.timestamp == ts(1_003)
    expected.insert(0, (0, b"a", b"k", ts(1_000)))
    assert wrapper.value is not None
    frame = wrapper.value
    if codec == Compression.LZ4 and magic == 0:
        # Kafka's magic 0 frames: the header checksum over the magic number too.
        assert frame[6] == (codecs.xxh32(frame[0:6]) >> 8) & 0xFF
        frame = frame[:6] + bytes([(codecs.xxh32(frame[4:6]) >> 8) & 0xFF]) + frame[7:]
    inner = messages(codecs.decompress(codec, frame))
    # magic 1's inner offsets are relative to the first (0), magic 0's absolute
    assert [(m.offset, m.value, m.key, m.timestamp) for m in inner] == expected


def test_a_log_append_time_topic_answers_its_time_in_produce_v2_and_fetch_v2(
    tmp_path: Path,
) -> None:
    """message.timestamp.type=LogAppendTime: a Produce v2's answer carries the broker's
    time (log_append_time_ms), and a Fetch v2's magic 1 messages carry it with their
    LogAppendTime attribute, as Kafka's down-conversion writes them."""
    for apis in _apis(tmp_path, LogConfig(log_append_time=True)):
        client = Loopback(apis)
        answer = produce(client, 2, message(0, 1, b"a", None, 1_000))
        assert answer["error_code"] == ErrorCode.NONE
        appended = answer["log_append_time_ms"]
        assert appended > 1_000
        (got,) = messages(fetch(client, 2, 0)["records"])
        assert (got.timestamp, got.attributes) == (appended, 0x08)


def test_a_down_converted_answer_holds_the_first_batch_over_max_bytes(apis: KafkaApis) -> None:
    """Kafka answers the first batch whole whatever max_bytes (KIP-74), converted or
    not, and sends no more than the records it read, converted."""
    client = Loopback(apis)
    for value in (b"x" * 300, b"y"):
        assert produce(client, 8, bytes(build_batch([value])))["error_code"] == ErrorCode.NONE
    answer = fetch(client, 3, 0, max_bytes=100)
    assert [m.offset for m in messages(answer["records"])] == [0]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_fetch_v0_to_v2_is_cut_at_its_partition_max_bytes(apis: KafkaApis, version: int) -> None:
    """Before KIP-74 (Fetch v3) a partition's max bytes is a hard limit: Kafka 2.8
    reads with minOneMessage false (fetchMessages' hardMaxBytesLimit), LogSegment.read
    slices the log at max_bytes and readFromLocalLog keeps the incomplete first entry for
    those versions. With no whole batch in the slice nothing is converted
    (hasCompatibleMagic finds no batch), so the client gets the first max_bytes bytes of
    the record batch as they are, a message cut short (the Java consumer's
    RecordTooLargeException; librdkafka fetches more); 0 bytes get none. The first
    batch was answered whole, converted, as to a v3+ fetch."""
    client = Loopback(apis)
    for value in (b"x" * 300, b"y"):
        assert produce(client, 8, bytes(build_batch([value])))["error_code"] == ErrorCode.NONE
    stored = fetch(client, 12, 0)["records"]
    answer = fetch(client, version, 0, max_bytes=100)
    assert answer["error_code"] == ErrorCode.NONE
    assert answer["high_watermark"] == 2
    assert answer["records"] == stored[:100]
    assert fetch(client, version, 0, max_bytes=0)["records"] == b""
    # The second batch fits its bytes: converted as ever.
    assert [m.value for m in messages(fetch(client, version, 1, max_bytes=100)["records"])] == [
        b"y"
    ]


@pytest.mark.parametrize("version", [0, 3])
def test_a_zstd_batch_after_others_ends_the_down_converted_answer(
    apis: KafkaApis, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A zstd batch cannot be down-converted (RecordsUtil.downConvert:
    UNSUPPORTED_COMPRESSION_TYPE), but Kafka 2.8 answers so only when it is the first
    batch to send: after others, LazyDownConversionRecordsSend ends the answer at the
    start of its chunk (an overflow message; here the batch before it is in its chunk),
    the consumer gets the messages before and is told the error when it fetches from
    the zstd batch. The whole partition was answered the
    error: a consumer of a topic whose producers moved to zstd never got the messages
    written before. Nor is the error logged as a damaged log's (Kafka traces it): it
    took the directory's one log line a minute."""
    client = Loopback(apis)
    for value, codec in ((b"a", Compression.GZIP), (b"b", Compression.NONE)):
        batch = build_batch([value], compression=codec)
        assert produce(client, 8, bytes(batch))["error_code"] == ErrorCode.NONE
    zstd = build_batch([b"c"], compression=Compression.ZSTD)
    assert produce(client, 8, bytes(zstd))["error_code"] == ErrorCode.NONE
    answer = fetch(client, version, 0)
    assert answer["error_code"] == ErrorCode.NONE
    got = messages(answer["records"])
    assert [(m.offset, m.attributes) for m in got] == [(0, Compression.GZIP)]
    got = messages(fetch(client, version, 1)["records"])
    assert [(m.offset, m.attributes) for m in got] == [(1, 0)]
    answer = fetch(client, version, 2)
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert not answer["records"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def _wrapper(offset: int, magic: int, inner: bytes, codec: int = Compression.GZIP) -> bytes:
    value = gzip.compress(inner) if codec == Compression.GZIP else codecs.compress(codec, inner)
    return message(offset, magic, value, None, 5 if magic == 1 else -1, codec)


@pytest.mark.parametrize(
    ("version", "records"),
    [
        pytest.param(1, message(0, 0, b"a") + message(1, 1, b"b", None, 5), id="magics mixed"),
        pytest.param(
            2,
            _wrapper(0, 1, message(0, 1, b"a", None, 5)) + _wrapper(0, 1, message(0, 1, b"b")),
            id="two compressed messages",
        ),
        pytest.param(
            0,
            message(0, 0, b"a") + _wrapper(0, 0, message(0, 0, b"b")),
            id="compressed and not",
        ),
        pytest.param(2, _wrapper(0, 1, b""), id="an empty compressed message"),
        pytest.param(
            2,
            _wrapper(1, 1, message(0, 1, b"a", None, 5) + message(2, 1, b"b", None, 5)),
            id="a wrapper offset below its last inner one",
        ),
        pytest.param(2, _wrapper(0, 1, message(0, 1, b"a", None, 5), Compression.ZSTD), id="zstd"),
        pytest.param(
            1,
            message(0, 1, b"a", None, 5) + bytes(build_batch([b"b"])),
            id="a record batch after a message",
        ),
    ],
)
def test_a_message_set_kafka_refuses_is_invalid_record(
    apis: KafkaApis, version: int, records: bytes
) -> None:
    """Kafka 2.8's LogValidator refuses these INVALID_RECORD (InvalidRecordException),
    nothing appended: a message of another magic than the first's (validateBatch), a
    compressed message with any other (getFirstBatchAndMaybeValidateNoMoreBatches:
    "Compressed outer record has more than one batch"), a compressed message holding
    none, one of magic 1 whose offset (not 0) is below its last inner message's, or zstd
    (AbstractLegacyRecordBatch's DeepRecordsIterator), a record batch of magic 2 after a
    message (validateBatch). They were appended, the empty one answered CORRUPT_MESSAGE
    (which a producer retries) and zstd UNSUPPORTED_COMPRESSION_TYPE; the record batch
    CORRUPT_MESSAGE."""
    client = Loopback(apis)
    answer = produce(client, version, records)
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    assert fetch(client, 12, 0)["high_watermark"] == 0


def test_a_record_batch_among_messages_whose_crc_fails_is_corrupt_message(
    apis: KafkaApis,
) -> None:
    """Kafka's Log.analyzeAndValidateRecords checks each entry's CRC before LogValidator
    looks at their magics: a record batch among messages whose CRC-32C does not hold is
    CORRUPT_MESSAGE, as is a message after it whose CRC-32 does not."""
    client = Loopback(apis)
    batch = bytearray(build_batch([b"b"]))
    batch[-1] ^= 1
    answer = produce(client, 2, message(0, 1, b"a", None, 5) + bytes(batch))
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE
    bad = bytearray(message(1, 1, b"c", None, 5))
    bad[-1] ^= 1
    answer = produce(client, 2, message(0, 1, b"a", None, 5) + bytes(build_batch([b"b"])) + bad)
    assert answer["error_code"] == ErrorCode.CORRUPT_MESSAGE
    assert fetch(client, 12, 0)["high_watermark"] == 0


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1)])
def test_a_message_set_of_no_whole_message_is_answered_none_and_appends_nothing(
    apis: KafkaApis, version: int, magic: int
) -> None:
    """Kafka 2.8's ByteBufferLogInputStream does not read an incomplete message at the
    end of a message set: a Produce v0-v2 of one cut short has no entry, and Log.append
    returns at once (shallowCount 0), answered NONE with offset -1, nothing appended; a
    whole message before one cut short is appended alone. The cut one was answered
    CORRUPT_MESSAGE, which a producer sends again until its delivery timeout."""
    client = Loopback(apis)
    whole = message(0, magic, b"a", None, 5)
    answer = produce(client, version, whole[:-1])
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, -1)
    assert fetch(client, 12, 0)["high_watermark"] == 0
    answer = produce(client, version, whole + message(1, magic, b"b", None, 5)[:-3])
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, 0)
    assert [m.value for m in messages(fetch(client, version, 0)["records"])] == [b"a"]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_record_batch_in_produce_v0_to_v2_is_the_logs_to_check(
    apis: KafkaApis, version: int
) -> None:
    """Kafka 2.8's ProduceRequest.validateRecords checks versions 3 and up only, so a
    Produce v0-v2 holding a record batch of magic 2 is left to the log: a zstd batch is
    appended (LogValidator refuses zstd only below inter.broker.protocol.version 2.1), an
    incomplete entry after the batch is left out (ByteBufferLogInputStream), no bytes at
    all append nothing and are answered NONE with offset -1 (Log.append), and a second
    batch is INVALID_RECORD (LogValidator.getFirstBatchAndMaybeValidateNoMoreBatches).
    Those versions were checked as v3's: zstd UNSUPPORTED_COMPRESSION_TYPE, the empty
    request and the cut entry INVALID_RECORD."""
    client = Loopback(apis)
    zstd = bytes(build_batch([b"z"], compression=Compression.ZSTD))
    answer = produce(client, version, zstd)
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, 0)
    answer = produce(client, version, bytes(build_batch([b"a"])) + zstd[:30])
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, 1)
    answer = produce(client, version, b"")
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, -1)
    answer = produce(client, version, bytes(build_batch([b"b"])) + bytes(build_batch([b"c"])))
    assert answer["error_code"] == ErrorCode.INVALID_RECORD
    got = fetch(client, 12, 0)["records"]
    values = [r.value for h in iter_batches(got) for r in iter_records(got[h.position :])]
    assert values == [b"z", b"a"]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
@pytest.mark.parametrize("first", [-(2**63) + 5, 2**63 - 1])
def test_timestamps_near_both_ends_of_64_bits_are_taken_as_kafka_takes_them(
    apis: KafkaApis, codec: int, first: int
) -> None:
    """Kafka 2.8 converts messages of magic 1 to a record batch with MemoryRecordsBuilder,
    whose timestamp deltas from the first are long subtractions, and reads a record's
    timestamp back as a long addition: both wrap, so timestamps near either end of 64
    bits come back as sent, and the batch's maxTimestamp is the largest. The delta was
    written beyond 64 bits (a varint of 11 bytes) and the request answered
    INVALID_RECORD; a record batch of magic 2 built so (as a Java producer builds it)
    was refused or got another maxTimestamp."""
    client = Loopback(apis)
    stamps = [first, -(2**63) + 5 if first > 0 else 2**63 - 1]
    one = message(0, 1, b"a", None, stamps[0]) + message(1, 1, b"b", None, stamps[1])
    records = one if codec == Compression.NONE else _wrapper(1, 1, one, codec)
    answer = produce(client, 2, records)
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, 0)
    specs = [RecordSpec(b"c", None, stamps[0]), RecordSpec(b"d", None, stamps[1])]
    batch = bytes(build_batch(specs, base_timestamp=stamps[0], compression=codec))
    answer = produce(client, 1, batch)
    assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, 2)
    got = fetch(client, 12, 0)["records"]
    headers = list(iter_batches(got))
    assert [h.max_timestamp for h in headers] == [2**63 - 1, 2**63 - 1]
    read = [(r.value, r.timestamp) for h in headers for r in iter_records(got[h.position :])]
    assert read == list(zip([b"a", b"b", b"c", b"d"], stamps * 2, strict=True))
    converted = messages(fetch(client, 2, 0)["records"])
    if codec == Compression.NONE:
        assert [(m.value, m.timestamp) for m in converted] == read
    else:
        assert [m.timestamp for m in converted] == [2**63 - 1, 2**63 - 1]


def test_a_magic_1_wrapper_of_offset_0_or_above_its_last_inner_one_is_taken(
    apis: KafkaApis,
) -> None:
    """Kafka takes a magic 1 wrapper whose offset is 0 (some librdkafka versions send
    it) or at least its last inner message's, the offsets assigned afresh."""
    client = Loopback(apis)
    inner = message(0, 1, b"a", None, 5) + message(2, 1, b"b", None, 5)
    for offset, base in ((0, 0), (7, 2)):
        answer = produce(client, 2, _wrapper(offset, 1, inner))
        assert (answer["error_code"], answer["base_offset"]) == (ErrorCode.NONE, base)
    assert fetch(client, 12, 0)["high_watermark"] == 4


def test_a_topic_without_down_conversion_answers_old_consumers_unsupported_version(
    tmp_path: Path,
) -> None:
    """message.downconversion.enable=false (the topic's, or the broker's
    log.message.downconversion.enable): a consumer's Fetch v0-v3 that would need its
    batches converted is answered UNSUPPORTED_VERSION, no records and no offsets (Kafka
    2.8's maybeConvertFetchedData, errorResponse); one with nothing to convert, a Fetch
    v4+, and a follower's fetch (converted whatever the topic says) are served."""
    config = effective_topic_config(None, {"message.downconversion.enable": "false"})
    for apis in _apis(tmp_path, LogConfig.from_topic_config(config)):
        client = Loopback(apis)
        assert fetch(client, 3, 0)["error_code"] == ErrorCode.NONE  # nothing to convert
        assert produce(client, 8, bytes(build_batch([b"a"])))["error_code"] == ErrorCode.NONE
        for version in (0, 3):
            answer = fetch(client, version, 0)
            assert answer["error_code"] == ErrorCode.UNSUPPORTED_VERSION
            assert (answer["records"], answer["high_watermark"]) == (b"", -1)
        answer = fetch(client, 4, 0)
        assert (answer["error_code"], answer["high_watermark"]) == (ErrorCode.NONE, 1)
        assert len(list(iter_batches(answer["records"]))) == 1
        follower = fetch(client, 3, 0, replica_id=FOLLOWER)
        assert follower["error_code"] == ErrorCode.NONE
        assert [m.value for m in messages(follower["records"])] == [b"a"]
    default = LogConfig.from_topic_config(effective_topic_config(None, {}))
    assert (default.downconversion_enabled, LogConfig().downconversion_enabled) == (True, True)


def _message_size(magic: int, value: bytes) -> int:
    """A message's bytes with a null key: offset, size, CRC, magic, attributes, [a
    timestamp], the key's and the value's lengths, the value."""
    return 8 + 4 + 4 + 1 + 1 + (8 if magic == 1 else 0) + 4 + 4 + len(value)


@pytest.mark.parametrize("magic", [0, 1])
def test_a_later_uncompressed_batch_gives_the_messages_that_fit_whole(magic: int) -> None:
    """Kafka 2.8's LazyDownConversionRecordsSend writes the converted messages up to the
    answer's size, max(the bytes read, the first converted batch's) (LazyDownConversion-
    Records.sizeInBytes), the last one cut at that limit: a later uncompressed batch's
    messages that fit whole reach the consumer, which ignores the cut one. Ours sent a
    later batch only if all its messages fit, so a consumer got fewer messages a fetch."""
    small = [b"%02d" % i + b"v" * 8 for i in range(10)]
    first = build_batch([b"x" * 1_000], base_offset=0)
    second = build_batch(small, base_offset=1)
    records = bytes(first + second)
    room = len(records) - _message_size(magic, b"x" * 1_000)
    fitting = room // _message_size(magic, small[0])
    assert 0 < fitting < len(small)
    got = messages(down_convert(records, magic, 0, max_size=codecs.MAX_SIZE))
    assert [m.offset for m in got] == list(range(1 + fitting))
    assert [m.value for m in got[1:]] == small[:fitting]


def test_a_compressed_batch_is_one_message_that_fits_whole_or_ends_the_answer() -> None:
    """A compressed batch converts to one wrapper message: after the first batch, it is
    sent if it fits whole within the answer's size (max(the bytes read, the first
    converted batch's)), and if not the answer ends there, the messages after it
    left out though they would fit, as Kafka's byte stream is cut inside the wrapper
    (a partial message the consumer ignores) and holds nothing after it. An
    uncompressed batch after a wrapper that fits gives the messages that fit."""
    rng = random.Random(7)
    values = [rng.randbytes(30) for _ in range(100)]  # incompressible: a large wrapper
    first = build_batch([b"x" * 1_000], base_offset=0)
    gzip_ = build_batch(values, base_offset=1, compression=Compression.GZIP)
    small = [b"%02d" % i + b"v" * 8 for i in range(10)]
    after = build_batch(small, base_offset=101)
    head = down_convert(bytes(first), 1, 0, max_size=codecs.MAX_SIZE)
    wrapper = down_convert(bytes(gzip_), 1, 0, max_size=codecs.MAX_SIZE)
    records = bytes(first + gzip_ + after)
    # The wrapper does not fit within what was read, a message after it would.
    assert len(head) + len(wrapper) > len(records)
    assert len(head) + _message_size(1, small[0]) <= len(records)
    got = messages(down_convert(records, 1, 0, max_size=codecs.MAX_SIZE))
    assert [m.offset for m in got] == [0]
    # With more read after it, the wrapper fits, and then what fits of the last batch.
    many = [b"%03d" % i + b"v" * 7 for i in range(100)]
    after = build_batch(many, base_offset=101)
    records = bytes(first + gzip_ + after)
    room = len(records) - len(head) - len(wrapper)
    fitting = room // _message_size(1, many[0])
    assert 0 < fitting < len(many)
    got = messages(down_convert(records, 1, 0, max_size=codecs.MAX_SIZE))
    assert [(m.offset, m.attributes) for m in got] == [(0, 0), (100, Compression.GZIP)] + [
        (101 + i, 0) for i in range(fitting)
    ]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("seed", range(20))
def test_a_down_converted_answer_is_the_most_of_its_messages_within_kafkas_size(
    magic: int, seed: int
) -> None:
    """Whatever the batches (uncompressed or gzip, of records of any size): the first
    converted batch is sent whole, even when larger than the bytes read; then the
    converted messages in order while each fits whole within max(the bytes read, the
    first converted batch's), Kafka 2.8's LazyDownConversionRecords.sizeInBytes; the
    answer is never larger, and the next message would not fit. A control batch (a
    transaction's marker) first is dropped, and the batch after it is the first, sent
    once (Kafka's iterator sends it again, the consumer dropping the repeats)."""
    rng = random.Random(seed)
    batches: list[bytes] = []
    offset = 0
    marker = b""
    if seed % 4 == 0:
        marker = bytes(build_batch([b""], transactional=True, control=True))
        offset += 1
    for _ in range(rng.randint(1, 6)):
        values = [rng.randbytes(rng.choice((0, 3, 40, 300))) for _ in range(rng.randint(1, 8))]
        codec = rng.choice((Compression.NONE, Compression.NONE, Compression.GZIP))
        batches.append(bytes(build_batch(values, base_offset=offset, compression=codec)))
        offset += len(values)
    # Each batch converted alone: its messages (a compressed one's is its wrapper).
    converted = [down_convert(b, magic, 0, max_size=codecs.MAX_SIZE) for b in batches]
    units = [message_bytes for c in converted[1:] for message_bytes in _split_messages(c)]
    records = marker + b"".join(batches)
    size = max(len(records), len(converted[0]))
    expected = bytearray(converted[0])
    for unit in units:
        if len(expected) + len(unit) > size:
            break
        expected += unit
    got = down_convert(records, magic, 0, max_size=codecs.MAX_SIZE)
    assert got == expected
    assert len(got) <= size


def _split_messages(data: bytes) -> list[bytes]:
    """A message set's top-level messages, each one's bytes."""
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos + 8)
        out.append(data[pos : pos + 12 + size])
        pos += 12 + size
    return out


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
def test_a_fetch_before_v4_gets_the_messages_of_a_later_batch_that_fit(
    apis: KafkaApis, version: int, magic: int
) -> None:
    """Through the Fetch handler: a Fetch v0-v3 reading two uncompressed batches gets
    the first's message and as many of the second's messages as fit whole within what
    was read, as Kafka 2.8's LazyDownConversionRecordsSend delivers them. It got the
    first batch's only."""
    client = Loopback(apis)
    small = [b"%02d" % i + b"v" * 8 for i in range(10)]
    for values in ([b"x" * 1_000], small):
        assert produce(client, 8, bytes(build_batch(values)))["error_code"] == ErrorCode.NONE
    read = len(fetch(client, 12, 0)["records"])
    fitting = (read - _message_size(magic, b"x" * 1_000)) // _message_size(magic, small[0])
    assert 0 < fitting < len(small)
    answer = fetch(client, version, 0)
    assert answer["error_code"] == ErrorCode.NONE
    got = messages(answer["records"])
    assert [m.offset for m in got] == list(range(1 + fitting))
    assert {m.magic for m in got} == {magic}


@pytest.mark.parametrize("magic", [0, 1])
def test_a_zstd_batch_ends_the_answer_at_the_start_of_its_chunk(magic: int) -> None:
    """After the first converted batch, Kafka 2.8's LazyDownConversionRecords iterator
    converts the batches in chunks of up to 128 KiB read (MAX_READ_SIZE, at least one
    batch), each chunk by one RecordsUtil.downConvert, which throws for a zstd batch
    anywhere in it; LazyDownConversionRecordsSend then sends an overflow batch instead
    of the whole chunk. So the consumer gets the messages of the chunks before the zstd
    batch's, not those of the batches before it in its own chunk. Ours sent those too."""
    first = build_batch([b"a"], base_offset=0)
    small = build_batch([b"b"], base_offset=1)
    large = build_batch([b"c" * (129 * 1024)], base_offset=1)
    zstd = build_batch([b"z"], base_offset=2, compression=Compression.ZSTD)
    after = build_batch([b"d"], base_offset=3)

    def offsets(*batches: bytearray) -> list[int]:
        records = b"".join(bytes(b) for b in batches)
        got = down_convert(records, magic, 0, max_size=codecs.MAX_SIZE)
        return [m.offset for m in messages(got)]

    # The small batch and the zstd one are one chunk: the answer is the first batch.
    assert offsets(first, small, zstd, after) == [0]
    # A batch over 128 KiB is a chunk of its own: it is sent, the zstd one's is not.
    assert offsets(first, large, zstd, after) == [0, 1]
    # The next fetch starts at the small batch, which is then the first, sent whole.
    assert offsets(small, zstd, after) == [1]
    with pytest.raises(LegacyUnsupportedCompressionError):
        down_convert(bytes(zstd + after), magic, 2, max_size=codecs.MAX_SIZE)
