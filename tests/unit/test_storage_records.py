"""Record batch v2: validation, in-place offset assignment, follower checks, decoding."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import errors
from storage.records import (
    ATTR_TIMESTAMP_TYPE,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    Compression,
    assign_offsets,
    batch_crc,
    decode_varint,
    iter_batches,
    iter_records,
    read_header,
    validate_follower_batches,
)
from storage.testing import RecordSpec, build_batch, encode_varint, legacy_message
from wire.errors import ErrorCode


def test_error_codes_are_kafkas() -> None:
    expected: dict[type[errors.StorageError], ErrorCode] = {
        errors.CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
        errors.UnsupportedMagicError: ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        errors.InvalidRecordError: ErrorCode.INVALID_RECORD,
        errors.DecompressedTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
        errors.RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
        errors.RecordBatchTooLargeError: ErrorCode.RECORD_LIST_TOO_LARGE,
        errors.InvalidTimestampError: ErrorCode.INVALID_TIMESTAMP,
        errors.OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
        errors.FencedLeaderEpochError: ErrorCode.FENCED_LEADER_EPOCH,
        errors.KafkaStorageError: ErrorCode.KAFKA_STORAGE_ERROR,
        errors.UnexpectedAppendOffsetError: ErrorCode.UNKNOWN_SERVER_ERROR,
        errors.UnknownCompressionError: ErrorCode.UNKNOWN_SERVER_ERROR,
        errors.DecompressionError: ErrorCode.UNKNOWN_SERVER_ERROR,
    }
    for cls, code in expected.items():
        assert ErrorCode(cls.error_code) is code, cls


def test_builder_matches_the_spec_layout() -> None:
    batch = build_batch([b"a", b"bc"], base_timestamp=1000, producer_id=7, base_sequence=3)
    header = read_header(batch)
    assert header.size == len(batch)
    assert header.magic == 2
    assert header.record_count == 2
    assert header.last_offset_delta == 1
    assert header.base_timestamp == header.max_timestamp == 1000
    assert header.producer_id == 7
    assert header.base_sequence == 3
    assert header.crc == batch_crc(batch)
    # CRC-32C's check value (RFC 3720): the package computes Castagnoli, not zlib's CRC-32
    from crc32c import crc32c

    assert crc32c(b"123456789") == 0xE3069283


def test_varint_encoding_matches_protobuf_zigzag() -> None:
    assert encode_varint(0) == b"\x00"
    assert encode_varint(-1) == b"\x01"
    assert encode_varint(1) == b"\x02"
    assert encode_varint(63) == b"\x7e"
    assert encode_varint(-64) == b"\x7f"
    assert encode_varint(64) == b"\x80\x01"


def test_varint_decoding_stops_at_ten_bytes_and_64_bits() -> None:
    # Kafka's readVarlong: at most 10 bytes, and the tenth may say bit 63 only (any
    # higher bit would overflow its long; this reader would return a value no int64 holds).
    for value in (0, -1, 64, 2**63 - 1, -(2**63)):
        data = encode_varint(value)
        assert decode_varint(data + b"\x00", 0) == (value, len(data))
    assert len(encode_varint(-(2**63))) == 10
    with pytest.raises(ValueError, match="beyond 64 bits"):
        decode_varint(b"\xff" * 9 + b"\x02", 0)
    with pytest.raises(ValueError, match="beyond 64 bits"):
        decode_varint(b"\x80" * 9 + b"\x7f", 0)
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        decode_varint(b"\xff" * 10 + b"\x00", 0)


def test_assign_offsets_patches_offset_and_epoch_in_place_keeping_the_crc() -> None:
    batch = build_batch([b"x"] * 5, base_timestamp=500)
    before = bytes(batch)
    info = assign_offsets(batch, 1000, 7)
    assert (info.first_offset, info.last_offset, info.record_count) == (1000, 1004, 5)
    assert info.batch_count == 1
    assert info.size == len(batch)
    assert info.max_timestamp == 500
    assert info.offset_of_max_timestamp == 1004
    header = read_header(batch)
    assert header.base_offset == 1000
    assert header.partition_leader_epoch == 7
    assert header.crc == batch_crc(batch)  # still valid: the CRC starts at attributes
    assert batch[21:] == before[21:]  # nothing the CRC covers changed
    assert [r.offset for r in iter_records(batch)] == [1000, 1001, 1002, 1003, 1004]


def test_several_batches_get_consecutive_offsets() -> None:
    blob = build_batch([b"a", b"b"]) + build_batch([b"c"]) + build_batch([b"d"] * 3)
    info = assign_offsets(blob, 10, 1)
    assert [(h.base_offset, h.last_offset) for h in iter_batches(blob)] == [
        (10, 11),
        (12, 12),
        (13, 15),
    ]
    assert info.last_offset == 15
    assert info.record_count == 6


@pytest.mark.parametrize(
    "codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
)
def test_compressed_batches_pass_through_untouched(codec: int) -> None:
    batch = build_batch([b"v" * 100] * 4, compression=codec)
    payload = bytes(batch[21:])
    info = assign_offsets(batch, 42, 3)
    assert info.last_offset == 45
    assert bytes(batch[21:]) == payload
    assert read_header(batch).compression == codec


def test_gzip_batches_decode() -> None:
    specs = [RecordSpec(b"v1", key=b"k1", timestamp=10), RecordSpec(None, headers=(("h", b""),))]
    batch = build_batch(specs, base_timestamp=10, compression=Compression.GZIP)
    records = list(iter_records(batch))
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k1", b"v1", ()),
        (None, None, (("h", b""),)),
    ]


def with_records_body(body: bytes, count: int = 1) -> bytearray:
    """An uncompressed batch of ``count`` records (header, length and CRC valid) whose
    records body is ``body``: the producer's CRC covers whatever it sends."""
    batch = build_batch([b"v"] * count, base_timestamp=10)[:BATCH_HEADER_SIZE] + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    return batch


#: record bodies that do not parse, each as Kafka's DefaultRecord.readFrom refuses it
MALFORMED_RECORDS = {
    "cut short": b"\x10\x00",  # a record of 8 bytes with one of them
    "a varint over 10 bytes": b"\xff" * 12,
    "fields past the record's length": bytes([0x06, 0, 0, 0, 1, 4, 0x76, 0x76, 0]),
    "fewer fields than the record's length": bytes([0x10, 0, 0, 0, 1, 2, 0x76, 0, 0, 0]),
    "a negative header count": bytes([0x0C, 0, 0, 0, 1, 2, 0x76, 1]),
    "a header without a key": bytes([0x10, 0, 0, 0, 1, 2, 0x76, 2, 1, 1]),
    "bytes after the last record": bytes([0x0C, 0, 0, 0, 1, 2, 0x76, 0, 0]),
    "fewer records than the header counts": bytes([0x0C, 0, 0, 0, 1, 2, 0x76, 0]) * 1,
}


@pytest.mark.parametrize("name", sorted(MALFORMED_RECORDS))
def test_records_that_do_not_parse_raise_invalid_record_error(name: str) -> None:
    count = 2 if name == "fewer records than the header counts" else 1
    batch = with_records_body(MALFORMED_RECORDS[name], count)
    with pytest.raises(errors.InvalidRecordError):
        list(iter_records(batch))


@pytest.mark.parametrize("name", sorted(MALFORMED_RECORDS))
def test_the_leader_refuses_a_batch_whose_records_do_not_parse(name: str) -> None:
    # Kafka's LogValidator reads every record of a producer's batch (INVALID_RECORD); the
    # leader took any body its CRC covered, and readers later failed on it.
    count = 2 if name == "fewer records than the header counts" else 1
    blob = build_batch([b"ok"]) + with_records_body(MALFORMED_RECORDS[name], count)
    before = bytes(blob)
    with pytest.raises(errors.InvalidRecordError, match="do not parse") as refused:
        assign_offsets(blob, 7, 0)
    assert refused.value.error_code == ErrorCode.INVALID_RECORD
    assert (refused.value.position, refused.value.offset) == (len(build_batch([b"ok"])), 8)
    assert bytes(blob) == before  # nothing changed


def test_a_record_whose_fields_disagree_with_its_length_passes_where_only_lengths_are_read() -> (
    None
):
    # Its value says 2 bytes where its length leaves 1 (then its header count reads the
    # next record's length). A topic that is not compacted reads lengths only, a seventh
    # of the cost of every field (docs/architecture.md, kept differences); a compacted
    # one reads every field for the keys, and readers refuse it.
    record = bytes([0x0E, 0, 0, 0, 1, 4, 0x76, 0])
    blob = with_records_body(record + record, 2)
    assert assign_offsets(bytearray(blob), 0, 0).record_count == 2
    with pytest.raises(errors.InvalidRecordError, match="do not parse"):
        assign_offsets(bytearray(blob), 0, 0, compacted=True)
    with pytest.raises(errors.InvalidRecordError):
        list(iter_records(blob))


def test_a_compacted_topic_refuses_an_uncompressed_record_without_a_key() -> None:
    blob = build_batch([RecordSpec(b"v", key=b"k")]) + build_batch(
        [RecordSpec(b"v", key=b"k"), RecordSpec(b"no key")]
    )
    with pytest.raises(errors.InvalidRecordError, match="without a key") as refused:
        assign_offsets(blob, 10, 0, compacted=True)
    assert refused.value.offset == 12  # the second batch's second record
    assert assign_offsets(blob, 10, 0).last_offset == 12  # a topic not compacted takes it


def test_a_header_key_that_is_not_utf8_is_read_with_replacement_characters() -> None:
    # Java's String (Kafka's Utils.utf8) replaces what is not UTF-8; Kafka accepts it.
    body = bytes([0x14, 0, 0, 0, 1, 2, 0x76, 2, 2, 0xFF, 1])
    (record,) = iter_records(with_records_body(body))
    assert (record.key, record.value, record.headers) == (None, b"v", (("\ufffd", None),))


def test_a_crc_mismatch_is_refused_and_nothing_is_changed() -> None:
    good = build_batch([b"ok"])
    bad = build_batch([b"hello"])
    bad[-1] ^= 0xFF
    blob = good + bad
    before = bytes(blob)
    with pytest.raises(errors.CorruptRecordError, match="CRC") as caught:
        assign_offsets(blob, 0, 0)
    assert caught.value.position == len(good)
    assert ErrorCode(caught.value.error_code) is ErrorCode.CORRUPT_MESSAGE
    assert bytes(blob) == before  # the first, valid batch was not patched either


@pytest.mark.parametrize("magic", [0, 1])
def test_old_message_formats_are_refused(magic: int) -> None:
    with pytest.raises(errors.UnsupportedMagicError) as caught:
        assign_offsets(legacy_message(b"old", magic=magic), 0, 0)
    assert caught.value.magic == magic
    assert ErrorCode(caught.value.error_code) is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_unknown_magic_is_corrupt() -> None:
    batch = build_batch([b"x"], magic=3)
    with pytest.raises(errors.CorruptRecordError, match="unknown magic 3"):
        assign_offsets(batch, 0, 0)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        # Below 14 Kafka's iterator refuses it (nextBatchSize); below a batch's header
        # it reads it, and the batch is refused.
        (lambda b: struct.pack_into(">i", b, 8, 10), "minimum record overhead"),
        (lambda b: struct.pack_into(">i", b, 8, 30), "below the minimum"),
        # Longer than the bytes there: no whole batch (Kafka's iterator reads none).
        (lambda b: struct.pack_into(">i", b, 8, len(b)), "no record batch"),
        (lambda b: b.extend(struct.pack(">qi", 0, 13)), "minimum record overhead"),
    ],
)
def test_length_sanity(mutate: object, message: str) -> None:
    batch = build_batch([b"abc"])
    mutate(batch)  # type: ignore[operator]
    with pytest.raises(errors.CorruptRecordError, match=message):
        assign_offsets(batch, 0, 0)


# A producer's records as Kafka 2.8's ByteBufferLogInputStream reads them: an entry after
# the whole batches that is shorter than 12 bytes, than 17, or than its size field says
# ends them, left out (Log.trimInvalidBytes); a size field below 14 or a magic above 2
# (each once there are bytes to read it) is CorruptRecordException.
_SECOND = bytes(build_batch([b"x"]))
_PARTIAL_TAILS = {
    "5 bytes": _SECOND[:5],
    "12 bytes": _SECOND[:12],
    "16 bytes": _SECOND[:16],
    "17 bytes": _SECOND[:17],
    "all but a byte": _SECOND[:-1],
    "magic 0": bytes(legacy_message(b"old", magic=0))[:-1],
    "magic 1": bytes(legacy_message(b"old", magic=1))[:20],
    "a size over the limit": struct.pack(">qi", 0, 1 << 30) + _SECOND[12:30],
    "a size of 14": struct.pack(">qi", 0, 14) + _SECOND[12:20],
}


@pytest.mark.parametrize("tail", _PARTIAL_TAILS.values(), ids=_PARTIAL_TAILS.keys())
def test_an_incomplete_trailing_entry_is_left_out(tail: bytes) -> None:
    """``size`` counts the whole batches only, which are assigned; the tail's bytes are
    left as they came (the log writes ``size`` bytes). The tail's size field is not held
    to max.message.bytes (Kafka's analyzeAndValidateRecords never reads it as a batch).
    It was CorruptRecordError ("trailing bytes", "only N bytes remain") or, for the
    size over the limit, RecordTooLargeError."""
    batches = build_batch([b"a", b"b"]) + build_batch([b"c"])
    buf = batches + tail
    info = assign_offsets(buf, 10, 3, max_batch_size=1000)
    assert info.size == len(batches)
    assert (info.first_offset, info.last_offset, info.record_count) == (10, 12, 3)
    assert info.batch_count == 2
    assert bytes(buf[len(batches) :]) == tail
    assert [(h.base_offset, h.position) for h in iter_batches(buf[: info.size])] == [
        (10, 0),
        (12, info.batches[1].position),
    ]


_CORRUPT_TAILS = {
    "size 13": struct.pack(">qi", 0, 13),
    "size -5": struct.pack(">qi", 0, -5) + bytes(20),
    "magic 3, 17 bytes": _SECOND[:16] + b"\x03",
    "magic 128, incomplete": _SECOND[:16] + b"\x80" + _SECOND[17:-1],
}


@pytest.mark.parametrize("tail", _CORRUPT_TAILS.values(), ids=_CORRUPT_TAILS.keys())
def test_a_trailing_entry_with_a_bad_size_or_magic_is_corrupt(tail: bytes) -> None:
    """ByteBufferLogInputStream.nextBatchSize's CorruptRecordException, at the tail's
    position, the buffer unchanged (as before, when any tail was corrupt)."""
    batch = build_batch([b"a"])
    buf = batch + tail
    before = bytes(buf)
    with pytest.raises(errors.CorruptRecordError) as caught:
        assign_offsets(buf, 10, 3)
    assert caught.value.position == len(batch)
    assert bytes(buf) == before


def test_the_whole_batches_are_checked_before_a_bad_tail() -> None:
    """Kafka's analyzeAndValidateRecords checks each batch (size, CRC) as its iterator
    gives it, so a batch's error comes before the tail's."""
    damaged = build_batch([b"a"])
    damaged[-1] ^= 1
    with pytest.raises(errors.CorruptRecordError, match="CRC"):
        assign_offsets(damaged + struct.pack(">qi", 0, 13), 0, 0)
    large = build_batch([b"a" * 100])
    with pytest.raises(errors.RecordTooLargeError):
        assign_offsets(large + struct.pack(">qi", 0, 13), 0, 0, max_batch_size=50)


@pytest.mark.parametrize(
    "records", [b"12345", bytes(build_batch([b"a"]))[:-1]], ids=["5 bytes", "all but a byte"]
)
def test_an_incomplete_entry_alone_is_no_batch(records: bytes) -> None:
    """Kafka's iterator reads no batch (for Produce v3+ validateRecords refuses it
    INVALID_RECORD first); it was "trailing bytes" or "only N bytes remain"."""
    with pytest.raises(errors.CorruptRecordError, match="no record batch"):
        assign_offsets(bytearray(records), 0, 0)


def test_empty_request_is_corrupt() -> None:
    with pytest.raises(errors.CorruptRecordError, match="no record batch"):
        assign_offsets(bytearray(), 0, 0)


def test_client_rules() -> None:
    with pytest.raises(errors.InvalidRecordError, match="baseOffset 0"):
        assign_offsets(build_batch([b"x"], base_offset=5), 0, 0)
    with pytest.raises(errors.InvalidRecordError, match="control"):
        assign_offsets(build_batch([b"x"], control=True), 0, 0)
    with pytest.raises(errors.InvalidRecordError, match="base sequence"):
        assign_offsets(build_batch([b"x"], producer_id=1, base_sequence=-1), 0, 0)
    inconsistent = build_batch([b"x", b"y"])
    struct.pack_into(">i", inconsistent, 23, 5)  # lastOffsetDelta 5 with 2 records
    struct.pack_into(">I", inconsistent, 17, batch_crc(inconsistent))
    with pytest.raises(errors.InvalidRecordError, match="record count 2"):
        assign_offsets(inconsistent, 0, 0)


def test_batch_size_limit() -> None:
    batch = build_batch([b"x" * 1000])
    with pytest.raises(errors.RecordTooLargeError) as caught:
        assign_offsets(batch, 0, 0, max_batch_size=len(batch) - 1)
    assert caught.value.size == len(batch)
    assign_offsets(batch, 0, 0, max_batch_size=len(batch))


def test_read_only_buffers_are_refused() -> None:
    with pytest.raises(TypeError):
        assign_offsets(memoryview(bytes(build_batch([b"x"]))), 0, 0)


def test_log_append_time_rewrites_type_and_max_timestamp_and_the_crc() -> None:
    batch = build_batch([b"a", b"b"], base_timestamp=100)
    info = assign_offsets(batch, 0, 0, log_append_time_ms=99_999)
    header = read_header(batch)
    assert header.attributes & ATTR_TIMESTAMP_TYPE
    assert header.max_timestamp == 99_999
    assert header.crc == batch_crc(batch)
    assert info.log_append_time == 99_999
    assert [r.timestamp for r in iter_records(batch)] == [99_999, 99_999]


def _with_max_timestamp(batch: bytearray, max_ts: int) -> bytearray:
    struct.pack_into(">q", batch, MAX_TIMESTAMP_OFFSET, max_ts)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    return batch


TEN_YEARS = 10 * 365 * 24 * 3_600_000


def test_an_uncompressed_batchs_max_timestamp_is_its_records_largest() -> None:
    # Kafka 2.8's LogValidator.assignOffsetsNonCompressed sets a batch's maxTimestamp to
    # its records' largest (batch.setMaxTimestamp). Kept as the producer wrote it, a
    # header 10 years ahead pinned time retention and escaped
    # message.timestamp.difference.max.ms, which reads the records.
    now = 1_700_000_000_000
    specs: list[RecordSpec | bytes] = [
        RecordSpec(b"a", timestamp=now),
        RecordSpec(b"b", timestamp=now + 7),
        b"c",
    ]
    ahead = _with_max_timestamp(build_batch(specs, base_timestamp=now), now + TEN_YEARS)
    behind = _with_max_timestamp(build_batch(specs, base_timestamp=now), now - 1)
    info = assign_offsets(ahead + behind, 0, 0, now_ms=now, max_timestamp_difference_ms=60_000)
    assert info.max_timestamp == now + 7
    assert info.offset_of_max_timestamp == 2  # the first batch's: its max is not exceeded
    for batch in (ahead, behind):
        info = assign_offsets(batch, 0, 0)
        header = read_header(batch)
        assert header.max_timestamp == info.max_timestamp == now + 7
        assert header.crc == batch_crc(batch)  # recomputed: maxTimestamp is inside it
        assert info.batches[0].crc == header.crc
    # In a compacted topic, whose records are read field by field, as well.
    keyed = [RecordSpec(b"a", key=b"k", timestamp=now + 3), RecordSpec(b"b", key=b"k")]
    batch = _with_max_timestamp(build_batch(keyed, base_timestamp=now), now + TEN_YEARS)
    assert assign_offsets(batch, 0, 0, compacted=True).max_timestamp == now + 3
    assert read_header(batch).max_timestamp == now + 3
    # Records without timestamps: -1, as Kafka's max starts at NO_TIMESTAMP.
    none = _with_max_timestamp(build_batch([b"a"], base_timestamp=-1), now)
    assert assign_offsets(none, 0, 0).max_timestamp == -1
    assert read_header(none).max_timestamp == -1
    negative = _with_max_timestamp(build_batch([RecordSpec(b"a", timestamp=-5)]), now)
    assert assign_offsets(negative, 0, 0).max_timestamp == -1
    # An error in a later batch changes nothing, the rewritten header neither.
    lying = _with_max_timestamp(build_batch(specs, base_timestamp=now), now + TEN_YEARS)
    blob = lying + build_batch([b"x"], control=True)
    before = bytes(blob)
    with pytest.raises(errors.InvalidRecordError):
        assign_offsets(blob, 0, 0)
    assert bytes(blob) == before


def test_a_compressed_batchs_max_timestamp_is_kept_as_sent() -> None:
    # Its records are not decompressed for it (docs/architecture.md, item 40).
    now = 1_700_000_000_000
    batch = _with_max_timestamp(
        build_batch([b"a"], base_timestamp=now, compression=Compression.GZIP), now + 5
    )
    assert assign_offsets(batch, 0, 0).max_timestamp == now + 5


def test_a_producers_batch_of_log_append_time_is_invalid_timestamp() -> None:
    # Kafka 2.8's LogValidator.validateTimestamp: "Producer should not set timestamp type
    # to LogAppendTime", whatever the topic's message.timestamp.type.
    for topic_time in (None, 1_000):
        batch = build_batch([b"a"], base_timestamp=500, log_append_time=True)
        before = bytes(batch)
        with pytest.raises(errors.InvalidTimestampError, match="LogAppendTime"):
            assign_offsets(batch, 0, 0, log_append_time_ms=topic_time)
        assert bytes(batch) == before


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_producers_batch_naming_no_codec_is_refused(codec: int) -> None:
    # Kafka 2.8's Log.analyzeAndValidateRecords reads batch.compressionType, which throws
    # for these ids (CompressionType.forId): UNKNOWN_SERVER_ERROR, nothing written. The
    # storage layer's readers keep such a batch whole (test_compaction.py): the refusal
    # is the leader's, of a producer's batch.
    batch = build_batch([b"a"], compression=codec)
    before = bytes(batch)
    with pytest.raises(errors.UnknownCompressionError, match=f"codec {codec}"):
        assign_offsets(batch, 0, 0)
    assert bytes(batch) == before
    assert validate_follower_batches(batch, 0).record_count == 1


def test_timestamp_difference_check() -> None:
    batch = build_batch([b"a"], base_timestamp=1_000)
    with pytest.raises(errors.InvalidTimestampError):
        assign_offsets(batch, 0, 0, now_ms=1_000_000, max_timestamp_difference_ms=1000)
    assign_offsets(batch, 0, 0, now_ms=1_500, max_timestamp_difference_ms=1000)


def test_timestamp_difference_is_checked_for_every_record_of_an_uncompressed_batch() -> None:
    # Kafka 2.8's LogValidator checks each record's timestamp (base + delta), not the
    # batch's: librdkafka's base timestamp is its first record's, so an older record
    # after it has a negative delta, below the base and the max.
    now = 10_000_000
    old = build_batch([b"now", RecordSpec(b"old", timestamp=1_000), b"again"], base_timestamp=now)
    assert read_header(old).max_timestamp == now
    with pytest.raises(errors.InvalidTimestampError, match="1000"):
        assign_offsets(old, 0, 0, now_ms=now, max_timestamp_difference_ms=60_000)
    # Within the difference: taken. Unchecked at the default (no setting).
    near = build_batch([b"now", RecordSpec(b"near", timestamp=now - 59_000)], base_timestamp=now)
    assign_offsets(near, 0, 0, now_ms=now, max_timestamp_difference_ms=60_000)
    assign_offsets(old, 0, 0, now_ms=now)
    # A LogAppendTime topic's records are not checked (their time is the broker's).
    old = build_batch([b"now", RecordSpec(b"old", timestamp=1_000)], base_timestamp=now)
    assign_offsets(old, 0, 0, log_append_time_ms=now, now_ms=now, max_timestamp_difference_ms=1)


def test_records_without_a_timestamp_are_not_checked_for_its_difference() -> None:
    # Kafka skips a record timestamp of -1 (RecordBatch.NO_TIMESTAMP), a base of -1 too.
    now = 10_000_000
    none = build_batch([b"a", RecordSpec(b"b", timestamp=-1)], base_timestamp=-1)
    assign_offsets(none, 0, 0, now_ms=now, max_timestamp_difference_ms=1000)
    mixed = build_batch([RecordSpec(b"a", timestamp=-1), b"b"], base_timestamp=now)
    assign_offsets(mixed, 0, 0, now_ms=now, max_timestamp_difference_ms=1000)
    later_old = build_batch([b"a", RecordSpec(b"b", timestamp=5)], base_timestamp=-1)
    with pytest.raises(errors.InvalidTimestampError):
        assign_offsets(later_old, 0, 0, now_ms=now, max_timestamp_difference_ms=1000)


def test_a_compressed_batchs_base_and_max_timestamps_are_checked() -> None:
    # Its records are not decompressed for this (docs/architecture.md): base and max
    # stand for them, -1 (no timestamp) skipped.
    now = 10_000_000
    far = build_batch([b"a"], base_timestamp=1_000, compression=Compression.GZIP)
    with pytest.raises(errors.InvalidTimestampError):
        assign_offsets(far, 0, 0, now_ms=now, max_timestamp_difference_ms=1000)
    none = build_batch([b"a"], base_timestamp=-1, compression=Compression.GZIP)
    assign_offsets(none, 0, 0, now_ms=now, max_timestamp_difference_ms=1000)


def test_follower_batches_must_go_on_from_the_log() -> None:
    blob = build_batch([b"a"] * 3, base_offset=10) + build_batch([b"b"], base_offset=13)
    info = validate_follower_batches(blob, 10)
    assert (info.first_offset, info.last_offset, info.batch_count) == (10, 13, 2)
    with pytest.raises(errors.UnexpectedAppendOffsetError) as caught:
        validate_follower_batches(blob, 11)
    assert (caught.value.expected, caught.value.found) == (11, 10)
    overlap = build_batch([b"a"] * 2, base_offset=10) + build_batch([b"b"], base_offset=11)
    with pytest.raises(errors.UnexpectedAppendOffsetError, match="starts inside the previous"):
        validate_follower_batches(overlap, 10)
    # Gaps, before the first batch and between batches, are a compacted leader's.
    gap = build_batch([b"a"], base_offset=12) + build_batch([b"b"], base_offset=15)
    info = validate_follower_batches(gap, 10)
    assert (info.first_offset, info.last_offset, info.batch_count) == (12, 15, 2)


def test_follower_drops_an_incomplete_trailing_batch() -> None:
    first = build_batch([b"a"], base_offset=0)
    second = build_batch([b"b" * 50], base_offset=1)
    info = validate_follower_batches(first + second[:30], 0)
    assert info.size == len(first)
    assert info.last_offset == 0
    empty = validate_follower_batches(b"", 5)
    assert empty.batch_count == 0


def test_follower_crc_is_checked() -> None:
    batch = build_batch([b"abc"], base_offset=0)
    batch[70] ^= 1
    with pytest.raises(errors.CorruptRecordError):
        validate_follower_batches(batch, 0)


_record = st.builds(
    RecordSpec,
    value=st.none() | st.binary(max_size=40),
    key=st.none() | st.binary(max_size=10),
    timestamp=st.none() | st.integers(0, 2**40),
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2
    ).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(
    specs=st.lists(_record, min_size=1, max_size=8),
    base=st.integers(0, 2**40),
    gzip=st.booleans(),
)
def test_records_round_trip(specs: list[RecordSpec], base: int, gzip: bool) -> None:
    batch = build_batch(
        specs, base_timestamp=5, compression=Compression.GZIP if gzip else Compression.NONE
    )
    info = assign_offsets(batch, base, 2)
    records = list(iter_records(batch))
    assert [r.offset for r in records] == list(range(base, base + len(specs)))
    assert [(r.key, r.value, r.headers) for r in records] == [
        (s.key, s.value, s.headers) for s in specs
    ]
    assert [r.timestamp for r in records] == [
        5 if s.timestamp is None else s.timestamp for s in specs
    ]
    assert info.max_timestamp == max(r.timestamp for r in records)
