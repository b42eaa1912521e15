"""`__consumer_offsets` records: Kafka 2.8's key and value formats, the group's partition,
and batches of offset commits."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groups.offset_records import (
    NO_LEADER_EPOCH,
    NO_TIMESTAMP,
    CommittedOffset,
    GroupKey,
    MalformedOffsetRecord,
    OffsetKey,
    decode_key,
    decode_offset_value,
    encode_offset_key,
    encode_offset_value,
    offset_commit_batch,
    partition_for,
    read_offset_records,
)
from storage.records import (
    RecordSpec,
    assign_offsets,
    build_batch,
    iter_batches,
    iter_records,
    read_header,
)

INT32_MAX = 2**31 - 1


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def _group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _string(group)


# --------------------------------------------------------------------------- partition_for

# Values from Java (jshell): s.hashCode(), and Utils.abs(s.hashCode()) % 50.
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("my-group", -1906497762, 12),
    ("console-consumer-46999", 161351158, 8),
    ("\U0001f600", 1772899, 49),  # one code point, two UTF-16 code units
    ("gr\u00fcppe-\U0001f600-x", 1337195879, 29),
    ("Aa", 2112, 12),
    ("BB", 2112, 12),  # Java's classic collision
]


@pytest.mark.parametrize(("group", "java_hash", "of_50"), JAVA_HASHES)
def test_partition_for_matches_java(group: str, java_hash: int, of_50: int) -> None:
    assert partition_for(group, 50) == of_50
    # modulo Integer.MAX_VALUE, the partition is Utils.abs(hashCode) itself
    expected = 0 if java_hash == -(2**31) else abs(java_hash)
    assert partition_for(group, INT32_MAX) == expected % INT32_MAX


def test_partition_for_lone_surrogate_is_its_code_unit() -> None:
    assert partition_for("\ud800", INT32_MAX) == 0xD800  # Java: "\uD800".hashCode() == 55296


def test_partition_for_one_partition_and_bad_counts() -> None:
    assert partition_for("anything", 1) == 0
    for bad in (0, -3):
        with pytest.raises(ValueError, match="at least one partition"):
            partition_for("g", bad)


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_for_is_in_range(group: str, partitions: int) -> None:
    assert 0 <= partition_for(group, partitions) < partitions


# --------------------------------------------------------------------------- byte-exact


def test_offset_key_bytes() -> None:
    key = OffsetKey("gr\u00fcppe", "topic", 7)
    expected = struct.pack(">hh7sh5si", 1, 7, "gr\u00fcppe".encode(), 5, b"topic", 7)
    assert encode_offset_key(key) == expected
    # version 1 | len 7 | "grüppe" (ü is 2 bytes) | len 5 | "topic" | partition 7
    assert expected.hex() == "000100076772c3bc7070650005746f70696300000007"
    assert decode_key(expected) == key


def test_offset_value_v3_bytes() -> None:
    value = CommittedOffset(42, 5, "meta", 1_700_000_000_000)
    expected = struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1_700_000_000_000)
    assert encode_offset_value(value) == expected
    assert len(expected) == 2 + 8 + 4 + 2 + 4 + 8
    assert decode_offset_value(expected) == value


def test_offset_value_without_epoch_or_metadata() -> None:
    value = CommittedOffset(0, NO_LEADER_EPOCH, "", 0)
    assert encode_offset_value(value) == struct.pack(">hqihq", 3, 0, -1, 0, 0)


def test_expire_timestamp_is_written_as_v1_like_kafka() -> None:
    # Kafka 2.8 writes version 1 for a commit with an expire timestamp (the only version
    # holding one); the leader epoch, absent from v1, is dropped
    value = CommittedOffset(9, 3, "m", 1000, expire_timestamp_ms=2000)
    expected = struct.pack(">hqh1sqq", 1, 9, 1, b"m", 1000, 2000)
    assert encode_offset_value(value) == expected
    assert decode_offset_value(expected) == CommittedOffset(9, -1, "m", 1000, 2000)


def test_group_key_decodes() -> None:
    assert decode_key(_group_key("g1")) == GroupKey("g1")


# --------------------------------------------------------------------------- every version


def test_key_v0_decodes_as_offset_key() -> None:
    data = struct.pack(">h", 0) + _string("g") + _string("t") + struct.pack(">i", 3)
    assert decode_key(data) == OffsetKey("g", "t", 3)


def test_value_v0() -> None:
    data = struct.pack(">hq", 0, 100) + _string("md") + struct.pack(">q", 555)
    assert decode_offset_value(data) == CommittedOffset(100, -1, "md", 555, -1)


def test_value_v1() -> None:
    data = struct.pack(">hq", 1, 100) + _string("md") + struct.pack(">qq", 555, 999)
    assert decode_offset_value(data) == CommittedOffset(100, -1, "md", 555, 999)


def test_value_v1_without_expiry() -> None:
    data = struct.pack(">hq", 1, 100) + _string("") + struct.pack(">qq", 555, -1)
    assert decode_offset_value(data) == CommittedOffset(100, -1, "", 555, NO_TIMESTAMP)


def test_value_v2() -> None:
    data = struct.pack(">hq", 2, 100) + _string("md") + struct.pack(">q", 555)
    assert decode_offset_value(data) == CommittedOffset(100, -1, "md", 555, -1)


def test_value_v3() -> None:
    data = struct.pack(">hqi", 3, 100, 7) + _string("md") + struct.pack(">q", 555)
    assert decode_offset_value(data) == CommittedOffset(100, 7, "md", 555, -1)


# --------------------------------------------------------------------------- malformed

GOOD_KEY = encode_offset_key(OffsetKey("group", "topic", 1))
GOOD_VALUE = encode_offset_value(CommittedOffset(5, 1, "meta", 10))


@pytest.mark.parametrize("cut", range(len(GOOD_KEY)))
def test_truncated_key(cut: int) -> None:
    with pytest.raises(MalformedOffsetRecord, match="truncated"):
        decode_key(GOOD_KEY[:cut])


@pytest.mark.parametrize("cut", range(len(GOOD_VALUE)))
def test_truncated_value(cut: int) -> None:
    with pytest.raises(MalformedOffsetRecord, match="truncated"):
        decode_offset_value(GOOD_VALUE[:cut])


def test_truncated_group_key() -> None:
    with pytest.raises(MalformedOffsetRecord, match=r"group metadata key v2 .* truncated"):
        decode_key(_group_key("abc")[:-1])


def test_trailing_bytes() -> None:
    with pytest.raises(MalformedOffsetRecord, match="1 bytes after its last field"):
        decode_key(GOOD_KEY + b"\x00")
    with pytest.raises(MalformedOffsetRecord, match="2 bytes after its last field"):
        decode_offset_value(GOOD_VALUE + b"\x00\x00")
    with pytest.raises(MalformedOffsetRecord, match="bytes after its last field"):
        decode_key(_group_key("g") + b"x")


@pytest.mark.parametrize("version", [-1, 3, 4, 0x7FFF])
def test_unknown_key_version(version: int) -> None:
    data = struct.pack(">h", version) + GOOD_KEY[2:]
    with pytest.raises(MalformedOffsetRecord, match=f"unknown key version {version}"):
        decode_key(data)


@pytest.mark.parametrize("version", [-1, 4, 5, 100])
def test_unknown_value_version(version: int) -> None:
    data = struct.pack(">h", version) + GOOD_VALUE[2:]
    with pytest.raises(
        MalformedOffsetRecord, match=f"unknown offset commit value version {version}"
    ):
        decode_offset_value(data)


def test_bad_utf8() -> None:
    key = struct.pack(">hh2s", 1, 2, b"\xc3\x28") + _string("t") + struct.pack(">i", 0)
    with pytest.raises(MalformedOffsetRecord, match="group is not valid UTF-8"):
        decode_key(key)
    value = struct.pack(">hqih1sq", 3, 1, 1, 1, b"\xff", 0)
    with pytest.raises(MalformedOffsetRecord, match="metadata is not valid UTF-8"):
        decode_offset_value(value)


def test_null_string_is_malformed() -> None:
    value = struct.pack(">hqihq", 3, 1, 1, -1, 0)
    with pytest.raises(MalformedOffsetRecord, match="metadata is null"):
        decode_offset_value(value)


def test_malformed_is_a_value_error() -> None:
    assert issubclass(MalformedOffsetRecord, ValueError)


def test_encoding_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="partition"):
        encode_offset_key(OffsetKey("g", "t", 2**31))
    with pytest.raises(ValueError, match="over the 32767"):
        encode_offset_key(OffsetKey("g" * 32768, "t", 0))
    with pytest.raises(ValueError, match="UTF-8"):
        encode_offset_key(OffsetKey("\ud800", "t", 0))
    with pytest.raises(ValueError, match="offset"):
        encode_offset_value(CommittedOffset(2**63, -1, "", 0))
    with pytest.raises(ValueError, match="leader epoch"):
        encode_offset_value(CommittedOffset(0, 2**31, "", 0))
    # the longest string fits
    assert decode_key(encode_offset_key(OffsetKey("g" * 32767, "t", 0))).group == "g" * 32767


# --------------------------------------------------------------------------- batches


def test_batch_round_trip() -> None:
    commits: list[tuple[OffsetKey, CommittedOffset | None]] = [
        (OffsetKey("g", "orders", 0), CommittedOffset(10, 2, "", 1_000)),
        (OffsetKey("g", "orders", 1), CommittedOffset(20, -1, "x", 1_000, 5_000)),
        (OffsetKey("g", "payments", 0), None),
    ]
    batch = offset_commit_batch(commits, 1_000)
    header = read_header(batch)
    assert (header.magic, header.compression, header.record_count) == (2, 0, 3)
    assert header.base_timestamp == header.max_timestamp == 1_000
    assert [h.record_count for h in iter_batches(batch)] == [3]  # whole, CRC good
    records = list(iter_records(batch))
    assert [r.key for r in records] == [encode_offset_key(k) for k, _ in commits]
    assert records[2].value is None
    assert all(r.timestamp == 1_000 for r in records)
    assert list(read_offset_records(batch)) == commits
    # the leader's append path takes it as a producer's batch
    appended = bytearray(batch)
    info = assign_offsets(appended, 40, 3)
    assert (info.first_offset, info.last_offset) == (40, 42)
    assert list(read_offset_records(appended)) == commits
    assert list(read_offset_records(memoryview(bytes(appended)))) == commits


def test_empty_commit_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        offset_commit_batch([], 0)


def test_group_metadata_values_are_skipped_and_tombstones_kept() -> None:
    offset_key = encode_offset_key(OffsetKey("g", "t", 0))
    batch = build_batch(
        [
            RecordSpec(key=_group_key("g"), value=b"\x00\x03opaque group metadata"),
            RecordSpec(key=offset_key, value=encode_offset_value(CommittedOffset(1, 0, "", 5))),
            RecordSpec(key=_group_key("g"), value=None),
        ],
        base_timestamp=5,
    )
    assert list(read_offset_records(batch)) == [
        (OffsetKey("g", "t", 0), CommittedOffset(1, 0, "", 5)),
        (GroupKey("g"), None),
    ]


def test_control_batches_are_skipped() -> None:
    marker = build_batch(
        [RecordSpec(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")],
        control=True,
        transactional=True,
        producer_id=7,
        producer_epoch=0,
        base_timestamp=0,
    )
    assert list(read_offset_records(marker)) == []


def test_gzip_batches_are_read() -> None:
    key = OffsetKey("g", "t", 0)
    value = CommittedOffset(3, 1, "", 9)
    batch = build_batch(
        [RecordSpec(key=encode_offset_key(key), value=encode_offset_value(value))],
        compression=1,
        base_timestamp=9,
    )
    assert list(read_offset_records(batch)) == [(key, value)]


def test_malformed_records_in_a_batch_name_their_offset() -> None:
    good = encode_offset_key(OffsetKey("g", "t", 0))
    no_key = build_batch([b"v"], base_offset=100, base_timestamp=0)
    with pytest.raises(MalformedOffsetRecord, match="offset 100 has no key"):
        list(read_offset_records(no_key))
    bad_key = build_batch(
        [RecordSpec(key=good, value=None), RecordSpec(key=b"\x00\x09", value=None)],
        base_offset=100,
        base_timestamp=0,
    )
    with pytest.raises(MalformedOffsetRecord, match="offset 101: unknown key version 9"):
        list(read_offset_records(bad_key))
    bad_value = build_batch([RecordSpec(key=good, value=b"\x00\x03\x00")], base_timestamp=0)
    with pytest.raises(MalformedOffsetRecord, match=r"offset 0 .*truncated"):
        list(read_offset_records(bad_value))


# --------------------------------------------------------------------------- properties

_text = st.text(max_size=30)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_keys = st.builds(OffsetKey, _text, _text, _int32)
_values = st.one_of(
    st.builds(CommittedOffset, _int64, _int32, _text, _int64, st.just(NO_TIMESTAMP)),
    # an expire timestamp is written as v1, which has no leader epoch
    st.builds(
        CommittedOffset,
        _int64,
        st.just(NO_LEADER_EPOCH),
        _text,
        _int64,
        _int64.filter(lambda t: t != NO_TIMESTAMP),
    ),
)


@given(_keys, _values)
def test_key_and_value_round_trip(key: OffsetKey, value: CommittedOffset) -> None:
    assert decode_key(encode_offset_key(key)) == key
    assert decode_offset_value(encode_offset_value(value)) == value


@settings(max_examples=50)
@given(st.lists(st.tuples(_keys, st.one_of(st.none(), _values)), min_size=1, max_size=8), _int64)
def test_batch_round_trip_property(
    commits: list[tuple[OffsetKey, CommittedOffset | None]], timestamp: int
) -> None:
    assert list(read_offset_records(offset_commit_batch(commits, timestamp))) == commits


@given(st.binary(max_size=40))
def test_arbitrary_bytes_decode_or_raise_malformed(data: bytes) -> None:
    for decode in (decode_key, decode_offset_value):
        try:
            decode(data)
        except MalformedOffsetRecord:
            pass
