"""Record batch v2 at the edges of its checks: the minimum batch length, a batch cut one
byte short, negative counts, producer id 0, the timestamp difference at its bound, a
compressed batch's maxTimestamp, timestamps at 64 bits, the first record of a compacted
topic without a key (Kafka 2.8 DefaultRecordBatch, LogValidator)."""

from __future__ import annotations

import struct

import pytest

from storage import errors
from storage.records import (
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    Compression,
    assign_offsets,
    batch_crc,
    iter_batches,
    iter_records,
    read_header,
    recompress,
    validate_follower_batches,
)
from storage.testing import RecordSpec, build_batch, encode_varint, with_body

NOW = 10_000_000
BASE_TIMESTAMP_OFFSET = 27


def _resealed(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    return batch


def test_a_batch_length_one_below_the_61_byte_header_is_corrupt() -> None:
    # DefaultRecordBatch: a batch smaller than RECORD_BATCH_OVERHEAD (61 bytes, a
    # batchLength of 49) is corrupt, whatever its CRC says.
    batch = build_batch([b"abc"])
    struct.pack_into(">i", batch, 8, 48)
    with pytest.raises(errors.CorruptRecordError, match="below the minimum 49") as caught:
        list(iter_batches(batch))
    assert caught.value.position == 0
    # Exactly the header: a batch of no record, whole.
    empty = build_batch([], base_timestamp=NOW)
    assert len(empty) == 61
    header = read_header(empty)
    assert (header.record_count, header.last_offset_delta, header.max_timestamp) == (0, 0, NOW)
    assert [h.size for h in iter_batches(empty)] == [61]


def test_a_last_batch_one_byte_short_is_left_out_not_refused() -> None:
    # A fetch answer cut at its size limit, one byte before the end of its last batch:
    # the follower writes the whole batches before it, as Kafka's does.
    first = build_batch([b"a"], base_offset=0)
    second = build_batch([b"b" * 50], base_offset=1)
    info = validate_follower_batches(first + second[:-1], 0)
    assert (info.size, info.last_offset, info.batch_count) == (len(first), 0, 1)
    assert [h.base_offset for h in iter_batches(first + second[:-1])] == [0]
    # A producer's too, as Kafka's Log.append leaves it out (trimInvalidBytes): it was
    # refused CorruptRecordError ("only N bytes remain").
    produced = build_batch([b"a"]) + build_batch([b"b" * 50])[:-1]
    assert assign_offsets(produced, 0, 0).size == len(first)


@pytest.mark.parametrize(("field", "at"), [("lastOffsetDelta", 23), ("record count", 57)])
def test_a_negative_offset_delta_or_record_count_is_corrupt(field: str, at: int) -> None:
    batch = build_batch([b"a"], base_offset=5)
    struct.pack_into(">i", batch, at, -1)
    _resealed(batch)
    for read in (
        lambda: list(iter_batches(batch)),
        lambda: validate_follower_batches(batch, 5),
    ):
        with pytest.raises(errors.CorruptRecordError, match="negative") as caught:
            read()
        assert str(-1) in str(caught.value)
        assert field.split(maxsplit=1)[0] in str(caught.value)


def test_producer_id_zero_without_a_base_sequence_is_invalid() -> None:
    # LogValidator.validateBatch: batch.hasProducerId (any id but -1) with a negative
    # baseSequence is InvalidRecordException; 0 is an id.
    with pytest.raises(errors.InvalidRecordError, match="producer id 0 without a base sequence"):
        assign_offsets(build_batch([b"x"], producer_id=0, base_sequence=-1), 0, 0)
    assign_offsets(build_batch([b"x"], producer_id=0, base_sequence=0), 0, 0)
    assign_offsets(build_batch([b"x"], producer_id=-1, base_sequence=-1), 0, 0)


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_timestamp_exactly_the_difference_away_is_taken(codec: int) -> None:
    # LogValidator.validateTimestamp refuses |timestamp - now| > the difference only.
    for ts in (NOW - 1000, NOW + 1000):
        batch = build_batch([b"a"], base_timestamp=ts, compression=codec)
        assign_offsets(batch, 0, 0, now_ms=NOW, max_timestamp_difference_ms=1000)
    for ts in (NOW - 1001, NOW + 1001):
        batch = build_batch([b"a"], base_timestamp=ts, compression=codec)
        with pytest.raises(errors.InvalidTimestampError):
            assign_offsets(batch, 0, 0, now_ms=NOW, max_timestamp_difference_ms=1000)


def test_a_compressed_batchs_max_timestamp_is_checked_beside_its_base() -> None:
    # Its base timestamp in range, a later record's (its maxTimestamp) far ahead.
    specs: list[RecordSpec | bytes] = [b"a", RecordSpec(b"b", timestamp=NOW + 50_000)]
    batch = build_batch(specs, base_timestamp=NOW, compression=Compression.GZIP)
    assert read_header(batch).max_timestamp == NOW + 50_000
    before = bytes(batch)
    with pytest.raises(errors.InvalidTimestampError, match=str(NOW + 50_000)):
        assign_offsets(batch, 0, 0, now_ms=NOW, max_timestamp_difference_ms=1000)
    assert bytes(batch) == before


def _base_and_delta(base: int, delta: int) -> bytearray:
    """One record of timestamp delta ``delta`` on ``base`` (header's maxTimestamp 0)."""
    batch = build_batch([RecordSpec(b"a", timestamp=delta)], base_timestamp=0)
    struct.pack_into(">q", batch, BASE_TIMESTAMP_OFFSET, base)
    struct.pack_into(">q", batch, MAX_TIMESTAMP_OFFSET, 0)
    return _resealed(batch)


def test_a_records_timestamp_past_64_bits_wraps_as_kafkas_long_does() -> None:
    """Kafka 2.8 reads a record's timestamp as base + delta in longs, which wrap:
    assignOffsetsNonCompressed takes the largest of those (from NO_TIMESTAMP, -1). A sum
    past the top is a timestamp near the bottom, so the batch gets -1 here; it was
    refused INVALID_RECORD. LogAppendTime: the records' timestamps are not the batch's."""
    int64_max = 2**63 - 1
    at_max = _base_and_delta(int64_max - 1, 1)
    assert assign_offsets(at_max, 0, 0).max_timestamp == int64_max
    past = _base_and_delta(int64_max, 1)
    assert assign_offsets(past, 0, 0).max_timestamp == -1
    assert read_header(past).max_timestamp == -1
    assert [r.timestamp for r in iter_records(past)] == [-(2**63)]
    # Below the bottom: a timestamp near the top, the batch's largest.
    below = _base_and_delta(-(2**63), -1)
    assert assign_offsets(below, 0, 0).max_timestamp == int64_max
    info = assign_offsets(_base_and_delta(int64_max, 1), 0, 0, log_append_time_ms=NOW)
    assert info.max_timestamp == NOW


def test_a_batch_whose_records_are_all_before_the_epoch_gets_max_timestamp_minus_one() -> None:
    # Kafka's max starts at NO_TIMESTAMP (-1): records of -5 and -7 leave it there, in
    # the header the batch is written with too.
    batch = build_batch(
        [RecordSpec(b"a", timestamp=-5), RecordSpec(b"b", timestamp=-7)], base_timestamp=100
    )
    info = assign_offsets(batch, 0, 0)
    assert info.max_timestamp == -1
    header = read_header(batch)
    assert header.max_timestamp == -1
    assert header.crc == batch_crc(batch)


def test_a_compacted_topic_refuses_a_first_record_without_a_key() -> None:
    # Each keyless record is named; the error's offset is the first's.
    batch = build_batch([RecordSpec(b"v"), RecordSpec(b"w", key=b"k"), RecordSpec(b"x")])
    before = bytes(batch)
    with pytest.raises(errors.InvalidRecordError, match="without a key") as caught:
        assign_offsets(batch, 7, 0, compacted=True)
    assert caught.value.offset == 7
    assert caught.value.keyless == (0, 2)
    assert bytes(batch) == before
    assign_offsets(build_batch([RecordSpec(b"v"), RecordSpec(b"w")]), 7, 0)


def test_a_compacted_topic_takes_an_empty_key_as_a_key() -> None:
    # LogValidator: record.hasKey, a key of 0 bytes is one; only the null key is refused.
    batch = build_batch([RecordSpec(b"v", key=b""), RecordSpec(b"w"), RecordSpec(b"x", key=b"")])
    with pytest.raises(errors.InvalidRecordError, match="without a key") as caught:
        assign_offsets(batch, 0, 0, compacted=True)
    assert caught.value.keyless == (1,)
    assert caught.value.offset == 1
    assign_offsets(build_batch([RecordSpec(b"v", key=b"")]), 0, 0, compacted=True)


def test_recompressing_keeps_the_transactional_and_control_bits() -> None:
    # LogValidator rebuilds the batch with the producer's isTransactional; only the
    # codec bits change.
    batch = build_batch(
        [b"a", b"b"],
        base_timestamp=NOW,
        transactional=True,
        producer_id=4,
        producer_epoch=1,
        base_sequence=0,
    )
    out = recompress(batch, Compression.GZIP)
    (header,) = iter_batches(out)
    assert header.compression == Compression.GZIP
    assert header.is_transactional
    assert not header.is_control
    assert header.attributes == read_header(batch).attributes | Compression.GZIP


def test_recompressing_batches_already_of_the_codec_beside_a_control_batch_is_a_no_op() -> None:
    # A control batch is never rebuilt: with the others of the topic's codec already,
    # the producer's bytes are kept as they came.
    blob = build_batch([b"m"], control=True) + build_batch(
        [b"a"], compression=Compression.GZIP, base_offset=1
    )
    assert recompress(blob, Compression.GZIP) is blob


def _one_record_body(fields: bytes) -> bytes:
    """A records body of one record of ``fields`` (its length prefixed)."""
    return encode_varint(len(fields)) + fields


# A record keyed "k" of value "v" whose length covers its header count of -1, or its
# one header's key length of -1: the lengths add up, the fields do not.
_KEYED = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v"
BAD_HEADERS = {
    "a negative header count": _KEYED + bytes([1]),
    "a header without a key": _KEYED + bytes([2, 1]),
}


@pytest.mark.parametrize("name", sorted(BAD_HEADERS))
def test_headers_that_do_not_parse_are_refused_where_fields_are_read(name: str) -> None:
    # Kafka's DefaultRecord.readFrom: "Found invalid number of record headers", "Invalid
    # null header key found in headers". A compacted topic reads every field, and so
    # does a recompression.
    batch = with_body(build_batch([b"v"], base_timestamp=NOW), _one_record_body(BAD_HEADERS[name]))
    assert assign_offsets(bytearray(batch), 0, 0).record_count == 1  # lengths only
    with pytest.raises(errors.InvalidRecordError, match="do not parse"):
        assign_offsets(bytearray(batch), 0, 0, compacted=True)
    with pytest.raises(errors.InvalidRecordError, match="do not parse"):
        recompress(bytearray(batch), Compression.GZIP)
    with pytest.raises(errors.InvalidRecordError):
        list(iter_records(batch))


# Attributes, timestamp delta, offset delta, key "k", no value, no header: 7 bytes.
_FIELDS = bytes([0, 0, 0, 2]) + b"k" + bytes([1, 0])


def test_a_record_longer_than_its_fields_is_refused_where_fields_are_read() -> None:
    # The first record's length counts one byte past its fields, that byte the second
    # record's length: walked by the fields, the second starts at its own end.
    body = encode_varint(len(_FIELDS) + 1) + _FIELDS + encode_varint(len(_FIELDS)) + _FIELDS
    batch = with_body(build_batch([b"v", b"w"], base_timestamp=NOW), body)
    with pytest.raises(errors.InvalidRecordError, match="does not match its fields"):
        assign_offsets(bytearray(batch), 0, 0, compacted=True)
    with pytest.raises(errors.InvalidRecordError):
        list(iter_records(batch))


def test_bytes_after_the_last_record_are_refused_where_fields_are_read() -> None:
    body = _one_record_body(_FIELDS) + b"\x00"
    batch = with_body(build_batch([b"v"], base_timestamp=NOW), body)
    with pytest.raises(errors.InvalidRecordError, match="after the last"):
        assign_offsets(bytearray(batch), 0, 0, compacted=True)
    with pytest.raises(errors.InvalidRecordError, match="after the last"):
        recompress(bytearray(batch), Compression.GZIP)
    with pytest.raises(errors.InvalidRecordError, match="1 bytes after the last record"):
        list(iter_records(batch))
    assign_offsets(with_body(batch, _one_record_body(_FIELDS)), 0, 0, compacted=True)


def test_a_record_shorter_than_six_bytes_is_refused_where_lengths_are_read() -> None:
    # Attributes and five varints of a byte at least: a length of 2 cannot be a record,
    # even if the lengths fill the body.
    batch = with_body(build_batch([b"v"], base_timestamp=NOW), bytes([0x04, 0, 0]))
    with pytest.raises(errors.InvalidRecordError, match="below the 6 bytes"):
        assign_offsets(batch, 0, 0)


def test_a_negative_record_length_is_refused_where_lengths_are_read() -> None:
    # -7 (zig-zag 13): shifted as if positive it is 6, a record's fields exactly.
    batch = with_body(build_batch([b"v"], base_timestamp=NOW), bytes([13, 0, 0, 0, 1, 1, 0]))
    with pytest.raises(errors.InvalidRecordError, match="below the 6 bytes"):
        assign_offsets(batch, 0, 0)


def test_a_timestamp_delta_running_past_its_record_is_refused_where_lengths_are_read() -> None:
    # The first record's length (6) ends inside its delta's varint, which the second
    # record's length byte ends: the lengths alone would fill the body.
    first = bytes([0x0C, 0]) + b"\x80" * 5
    second = bytes([0x0C, 0, 0, 0, 1, 1, 0])
    batch = with_body(build_batch([b"v", b"w"], base_timestamp=NOW), first + second)
    with pytest.raises(errors.InvalidRecordError, match="delta runs past its length"):
        assign_offsets(batch, 0, 0)


def test_the_followers_offset_of_max_timestamp_is_the_first_batch_reaching_it() -> None:
    # Log.analyzeAndValidateRecords takes a batch's maxTimestamp only above the largest
    # so far: of two batches of the same, the first's last offset.
    blob = build_batch([b"a", b"b"], base_offset=10, base_timestamp=NOW) + build_batch(
        [b"c"], base_offset=12, base_timestamp=NOW
    )
    info = validate_follower_batches(blob, 10)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (NOW, 11)


@pytest.mark.parametrize("size", [0, 12, 60])
def test_a_buffer_shorter_than_a_batch_header_is_corrupt(size: int) -> None:
    short = bytes(build_batch([b"v"])[:size])
    with pytest.raises(errors.CorruptRecordError, match="shorter than a batch header"):
        read_header(short)
    with pytest.raises(errors.CorruptRecordError, match="shorter than a batch header"):
        list(iter_records(short))


def test_a_two_byte_negative_timestamp_delta_is_read_with_its_sign() -> None:
    # -100 (zig-zag 199, two bytes) after a record at the base: the max is the base.
    batch = build_batch([b"a", RecordSpec(b"b", timestamp=NOW - 100)], base_timestamp=NOW)
    struct.pack_into(">q", batch, MAX_TIMESTAMP_OFFSET, 0)
    _resealed(batch)
    assert assign_offsets(batch, 0, 0).max_timestamp == NOW
    assert read_header(batch).max_timestamp == NOW


def test_records_take_their_offsets_from_their_offset_deltas() -> None:
    # A cleaned batch keeps its records' offsets, with gaps: deltas 0 and 3 of a batch
    # whose lastOffsetDelta is 3 (DefaultRecord.offset = baseOffset + offsetDelta).
    def record(offset_delta: int, value: bytes) -> bytes:
        fields = bytes([0, 0]) + encode_varint(offset_delta) + bytes([1, 2]) + value + bytes([0])
        return encode_varint(len(fields)) + fields

    batch = build_batch([b"a", b"d"], base_offset=100, base_timestamp=NOW)
    struct.pack_into(">i", batch, 23, 3)  # lastOffsetDelta
    batch = with_body(batch, record(0, b"a") + record(3, b"d"))
    assert [(r.offset, r.value) for r in iter_records(batch)] == [(100, b"a"), (103, b"d")]
    (header,) = iter_batches(batch)
    assert (header.last_offset, header.next_offset) == (103, 104)


def test_build_batch_sets_the_transactional_bit_not_the_control_bit() -> None:
    header = read_header(build_batch([b"a"], transactional=True, producer_id=1, base_sequence=0))
    assert (header.is_transactional, header.is_control) == (True, False)
    header = read_header(build_batch([b"a"], control=True))
    assert (header.is_transactional, header.is_control) == (False, True)
