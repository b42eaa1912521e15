"""`__consumer_offsets` records: Kafka 2.8's key and value formats (offset commits and
group metadata), the group's partition, and batches of offset commits and group
metadata."""

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
    GroupMetadata,
    MalformedOffsetRecord,
    MemberMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_record,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    group_metadata_batch,
    offset_commit_batch,
    partition_for,
    read_offset_records,
    tombstone_batches,
)
from storage.records import (
    Compression,
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


def _nullable(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else _string(text)


def _bytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


MEMBER = MemberMetadata(
    "consumer-1-6f0d", "instance-a", "consumer-1", "/10.0.0.7", 300_000, 10_000, b"sub", b"as"
)


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


def test_group_metadata_values_and_tombstones_are_read() -> None:
    offset_key = encode_offset_key(OffsetKey("g", "t", 0))
    group = GroupMetadata("consumer", 1, "range", "m", 5, (MEMBER,))
    batch = build_batch(
        [
            RecordSpec(key=_group_key("g"), value=encode_group_value(group)),
            RecordSpec(key=offset_key, value=encode_offset_value(CommittedOffset(1, 0, "", 5))),
            RecordSpec(key=_group_key("g"), value=None),
        ],
        base_timestamp=5,
    )
    assert list(read_offset_records(batch)) == [
        (GroupKey("g"), group),
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
    for decode in (decode_key, decode_offset_value, decode_group_value):
        try:
            decode(data)
        except MalformedOffsetRecord:
            pass


# --------------------------------------------------------------------------- group metadata


def _member_bytes(version: int, member: MemberMetadata) -> bytes:
    """A member as Kafka's MEMBER_METADATA_V<version> schema lays it out."""
    parts = [_string(member.member_id)]
    if version >= 3:
        parts.append(_nullable(member.group_instance_id))
    parts += [_string(member.client_id), _string(member.client_host)]
    if version >= 1:
        parts.append(struct.pack(">i", member.rebalance_timeout_ms))
    parts += [
        struct.pack(">i", member.session_timeout_ms),
        _bytes(member.subscription),
        _bytes(member.assignment),
    ]
    return b"".join(parts)


def _group_value_bytes(version: int, group: GroupMetadata) -> bytes:
    """A group value as Kafka's GROUP_METADATA_VALUE_SCHEMA_V<version> lays it out."""
    parts = [
        struct.pack(">h", version),
        _string(group.protocol_type),
        struct.pack(">i", group.generation),
        _nullable(group.protocol),
        _nullable(group.leader),
    ]
    if version >= 2:
        parts.append(struct.pack(">q", group.current_state_timestamp_ms))
    parts.append(struct.pack(">i", len(group.members)))
    parts += [_member_bytes(version, m) for m in group.members]
    return b"".join(parts)


def _as_read_from(version: int, group: GroupMetadata) -> GroupMetadata:
    """What a group written as ``version`` reads back as: the fields it lacks defaulted
    as Kafka defaults them."""
    members = tuple(
        MemberMetadata(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms if version >= 1 else m.session_timeout_ms,
            m.session_timeout_ms,
            m.subscription,
            m.assignment,
        )
        for m in group.members
    )
    timestamp = group.current_state_timestamp_ms if version >= 2 else NO_TIMESTAMP
    return GroupMetadata(
        group.protocol_type, group.generation, group.protocol, group.leader, timestamp, members
    )


STATIC = MEMBER
DYNAMIC = MemberMetadata("consumer-2-aa", None, "consumer-2", "/10.0.0.8", 60_000, 45_000, b"", b"")
GROUP = GroupMetadata(
    "consumer", 7, "range", STATIC.member_id, 1_700_000_000_123, (STATIC, DYNAMIC)
)


def test_group_key_bytes() -> None:
    expected = struct.pack(">hh7s", 2, 7, "gr\u00fcppe".encode())
    assert encode_group_key("gr\u00fcppe") == expected
    assert expected.hex() == "000200076772c3bc707065"
    assert decode_key(expected) == GroupKey("gr\u00fcppe")
    with pytest.raises(ValueError, match="over the 32767"):
        encode_group_key("g" * 32768)


def test_group_value_v3_bytes() -> None:
    expected = b"".join(
        (
            # version 3 | protocol_type | generation | protocol; then leader | timestamp
            struct.pack(">hh8sih5s", 3, 8, b"consumer", 7, 5, b"range"),
            struct.pack(">h15sq", 15, b"consumer-1-6f0d", 1_700_000_000_123),
            struct.pack(">i", 2),  # two members
            # member_id | group_instance_id | client_id | client_host
            struct.pack(">h15sh10sh10sh9s", 15, b"consumer-1-6f0d", 10, b"instance-a", 10,
                        b"consumer-1", 9, b"/10.0.0.7"),
            # rebalance_timeout | session_timeout | subscription | assignment
            struct.pack(">iii3si2s", 300_000, 10_000, 3, b"sub", 2, b"as"),
            # a dynamic member: group_instance_id null (-1), empty subscription, assignment
            struct.pack(">h13shh10sh9siiii", 13, b"consumer-2-aa", -1, 10, b"consumer-2", 9,
                        b"/10.0.0.8", 60_000, 45_000, 0, 0),
        )
    )  # fmt: skip
    assert encode_group_value(GROUP) == expected
    assert expected == _group_value_bytes(3, GROUP)
    assert decode_group_value(expected) == GROUP


def test_empty_group_value_bytes() -> None:
    # what Kafka writes for a group whose members all left: no protocol, no leader
    empty = GroupMetadata("", 3, None, None, NO_TIMESTAMP, ())
    data = encode_group_value(empty)
    assert data.hex() == "0003000000000003ffffffffffffffffffffffff00000000"
    assert decode_group_value(data) == empty


def test_group_value_v0() -> None:
    # no current_state_timestamp, no group_instance_id, no rebalance_timeout
    data = (
        struct.pack(">h", 0)
        + _string("consumer")
        + struct.pack(">i", 2)
        + _string("range")
        + _string("m1")
        + struct.pack(">i", 1)
        + _string("m1")
        + _string("c1")
        + _string("/h1")
        + struct.pack(">i", 30_000)
        + _bytes(b"\x00\x01")
        + _bytes(b"\x02")
    )
    member = MemberMetadata("m1", None, "c1", "/h1", 30_000, 30_000, b"\x00\x01", b"\x02")
    assert decode_group_value(data) == GroupMetadata("consumer", 2, "range", "m1", -1, (member,))


def test_group_value_v1() -> None:
    # rebalance_timeout before session_timeout; still no timestamp or instance id
    data = (
        struct.pack(">h", 1)
        + _string("consumer")
        + struct.pack(">i", 2)
        + _string("range")
        + _string("m1")
        + struct.pack(">i", 1)
        + _string("m1")
        + _string("c1")
        + _string("/h1")
        + struct.pack(">ii", 90_000, 30_000)
        + _bytes(b"s")
        + _bytes(b"a")
    )
    member = MemberMetadata("m1", None, "c1", "/h1", 90_000, 30_000, b"s", b"a")
    assert decode_group_value(data) == GroupMetadata("consumer", 2, "range", "m1", -1, (member,))


def test_group_value_v2() -> None:
    # current_state_timestamp after leader; members as v1
    data = (
        struct.pack(">h", 2)
        + _string("consumer")
        + struct.pack(">i", 2)
        + _string("range")
        + _string("m1")
        + struct.pack(">q", 1_234)
        + struct.pack(">i", 1)
        + _string("m1")
        + _string("c1")
        + _string("/h1")
        + struct.pack(">ii", 90_000, 30_000)
        + _bytes(b"s")
        + _bytes(b"a")
    )
    member = MemberMetadata("m1", None, "c1", "/h1", 90_000, 30_000, b"s", b"a")
    assert decode_group_value(data) == GroupMetadata("consumer", 2, "range", "m1", 1_234, (member,))


def test_group_value_v3() -> None:
    # group_instance_id after member_id
    data = (
        struct.pack(">h", 3)
        + _string("consumer")
        + struct.pack(">i", 2)
        + _string("range")
        + _string("m1")
        + struct.pack(">q", 1_234)
        + struct.pack(">i", 2)
        + _string("m1")
        + _string("static-1")
        + _string("c1")
        + _string("/h1")
        + struct.pack(">ii", 90_000, 30_000)
        + _bytes(b"s")
        + _bytes(b"a")
        + _string("m2")
        + struct.pack(">h", -1)
        + _string("c2")
        + _string("/h2")
        + struct.pack(">ii", 1, 2)
        + _bytes(b"")
        + _bytes(b"")
    )
    assert decode_group_value(data) == GroupMetadata(
        "consumer",
        2,
        "range",
        "m1",
        1_234,
        (
            MemberMetadata("m1", "static-1", "c1", "/h1", 90_000, 30_000, b"s", b"a"),
            MemberMetadata("m2", None, "c2", "/h2", 1, 2, b"", b""),
        ),
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_value_every_version_with_nulls(version: int) -> None:
    group = GroupMetadata("", -5, None, None, NO_TIMESTAMP, ())
    assert decode_group_value(_group_value_bytes(version, group)) == group
    # an empty protocol and leader are not null
    group = GroupMetadata("", 0, "", "", NO_TIMESTAMP, ())
    assert decode_group_value(_group_value_bytes(version, group)) == group


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_group_value_every_version_reads_as_kafka(version: int) -> None:
    assert decode_group_value(_group_value_bytes(version, GROUP)) == _as_read_from(version, GROUP)


GOOD_GROUP_VALUE = encode_group_value(GROUP)


@pytest.mark.parametrize("cut", range(len(GOOD_GROUP_VALUE)))
def test_truncated_group_value(cut: int) -> None:
    with pytest.raises(MalformedOffsetRecord, match="truncated"):
        decode_group_value(GOOD_GROUP_VALUE[:cut])


def test_truncated_group_value_names_its_field() -> None:
    with pytest.raises(
        MalformedOffsetRecord,
        match=r"group metadata value v3 of 180 bytes is truncated: the length of"
        r" members\[1\]\.assignment needs 4 bytes at byte 177, 3 left",
    ):
        decode_group_value(GOOD_GROUP_VALUE[:-1])
    static_last = encode_group_value(GroupMetadata("consumer", 1, "range", None, 0, (STATIC,)))
    with pytest.raises(
        MalformedOffsetRecord, match=r"truncated: members\[0\]\.assignment needs 2 bytes"
    ):
        decode_group_value(static_last[:-1])
    empty = encode_group_value(GroupMetadata("", 0, None, None, -1, ()))
    with pytest.raises(MalformedOffsetRecord, match="the count of members needs 4 bytes"):
        decode_group_value(empty[:-1])


def test_group_value_trailing_bytes() -> None:
    with pytest.raises(MalformedOffsetRecord, match="group metadata value v3 has 1 bytes after"):
        decode_group_value(GOOD_GROUP_VALUE + b"\x00")


def test_group_value_more_members_than_bytes() -> None:
    data = _group_value_bytes(3, GroupMetadata("c", 1, "p", None, 0, ()))
    data = data[:-4] + struct.pack(">i", 2**31 - 1)  # a huge count, no members
    with pytest.raises(MalformedOffsetRecord, match=r"truncated: the length of members\[0\]"):
        decode_group_value(data)


@pytest.mark.parametrize("version", [-1, 4, 5, 0x7FFF])
def test_unknown_group_value_version(version: int) -> None:
    data = struct.pack(">h", version) + GOOD_GROUP_VALUE[2:]
    with pytest.raises(
        MalformedOffsetRecord, match=f"unknown group metadata value version {version}"
    ):
        decode_group_value(data)


def _v3_with_member(member: bytes, count: int = 1) -> bytes:
    head = struct.pack(">h", 3) + _string("c") + struct.pack(">i", 1) + _string("p")
    return head + _string("m") + struct.pack(">qi", 0, count) + member


_MEMBER_TAIL = _string("c") + _string("h") + struct.pack(">ii", 1, 1) + _bytes(b"") + _bytes(b"")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # protocol_type is not nullable
        (
            struct.pack(">h", 3) + struct.pack(">h", -1) + struct.pack(">i", 1),
            r"group metadata value v3: protocol_type is null \(length -1\)",
        ),
        (
            _v3_with_member(struct.pack(">h", -1) + _nullable(None) + _MEMBER_TAIL),
            r"members\[0\]\.member_id is null",
        ),
        (
            _v3_with_member(
                _string("m") + _nullable(None) + struct.pack(">h", -1) + _MEMBER_TAIL[3:]
            ),
            r"members\[0\]\.client_id is null",
        ),
        (
            _v3_with_member(
                _string("m")
                + _nullable(None)
                + _string("c")
                + _string("h")
                + struct.pack(">iii", 1, 1, -1)
                + _bytes(b"")
            ),
            r"members\[0\]\.subscription is null \(length -1\)",
        ),
        (
            _v3_with_member(
                _string("m")
                + _nullable(None)
                + _string("c")
                + _string("h")
                + struct.pack(">ii", 1, 1)
                + _bytes(b"x")
                + struct.pack(">i", -7)
            ),
            r"members\[0\]\.assignment is null \(length -7\)",
        ),
        (_v3_with_member(b"", count=-1), r"members is null \(count -1\)"),
        (
            _v3_with_member(
                _string("m") + _nullable(None) + _string("c") + b"\x00\x01\xff" + _MEMBER_TAIL[6:]
            ),
            r"members\[0\]\.client_host is not valid UTF-8",
        ),
    ],
)
def test_malformed_group_values(data: bytes, message: str) -> None:
    with pytest.raises(MalformedOffsetRecord, match=message):
        decode_group_value(data)


def test_a_nullable_string_of_any_negative_length_is_null() -> None:
    """Kafka 2.8 reads __consumer_offsets' values with its generated readers
    (GroupMetadataManager.readGroupMessageValue), which take any negative length of a
    nullable field as null; -2 and -3 were refused here, the group left unloaded."""
    head = struct.pack(">h", 3) + _string("c") + struct.pack(">i", 1)
    data = head + struct.pack(">h", -2) + struct.pack(">h", -32768) + struct.pack(">qi", 0, 0)
    assert decode_group_value(data) == GroupMetadata("c", 1, None, None, 0, ())
    member = _v3_with_member(_string("m") + struct.pack(">h", -3) + _MEMBER_TAIL)
    assert decode_group_value(member).members[0].group_instance_id is None


def test_the_malformed_cases_are_otherwise_well_formed() -> None:
    # the member built by the cases above decodes when nothing is wrong with it
    good = _v3_with_member(_string("m") + _nullable(None) + _MEMBER_TAIL)
    member = MemberMetadata("m", None, "c", "h", 1, 1, b"", b"")
    assert decode_group_value(good) == GroupMetadata("c", 1, "p", "m", 0, (member,))


def test_group_encoding_refuses_what_does_not_fit() -> None:
    def group(**changes: object) -> GroupMetadata:
        fields: dict[str, object] = {**GROUP.__dict__, **changes}
        return GroupMetadata(**fields)  # type: ignore[arg-type]

    def member(**changes: object) -> GroupMetadata:
        fields: dict[str, object] = {**DYNAMIC.__dict__, **changes}
        return group(members=(STATIC, MemberMetadata(**fields)))  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="generation"):
        encode_group_value(group(generation=2**31))
    with pytest.raises(ValueError, match="current state timestamp"):
        encode_group_value(group(current_state_timestamp_ms=-(2**63) - 1))
    with pytest.raises(ValueError, match=r"protocol type .* over the 32767"):
        encode_group_value(group(protocol_type="t" * 32768))
    with pytest.raises(ValueError, match=r"leader .* not encodable"):
        encode_group_value(group(leader="\udc00"))
    with pytest.raises(ValueError, match="member 1 rebalance timeout"):
        encode_group_value(member(rebalance_timeout_ms=2**31))
    with pytest.raises(ValueError, match="member 1 session timeout"):
        encode_group_value(member(session_timeout_ms=-(2**31) - 1))
    with pytest.raises(ValueError, match="member 1 group instance id"):
        encode_group_value(member(group_instance_id="i" * 40_000))
    with pytest.raises(ValueError, match="member 1 client host"):
        encode_group_value(member(client_host="\ud800"))
    # Kafka refuses to write members without the protocol their subscriptions are for
    with pytest.raises(ValueError, match="2 members needs a protocol"):
        encode_group_value(group(protocol=None))
    # the extremes fit
    edge = group(generation=-(2**31), current_state_timestamp_ms=2**63 - 1, leader="l" * 32767)
    assert decode_group_value(encode_group_value(edge)) == edge


def test_group_metadata_batch() -> None:
    batch = group_metadata_batch("g", GROUP, 1_000)
    header = read_header(batch)
    assert (header.magic, header.compression, header.record_count) == (2, 0, 1)
    assert header.base_timestamp == header.max_timestamp == 1_000
    assert [h.record_count for h in iter_batches(batch)] == [1]  # whole, CRC good
    (record,) = iter_records(batch)
    assert (record.key, record.value) == (encode_group_key("g"), encode_group_value(GROUP))
    assert record.timestamp == 1_000
    assert decode_offset_record(record) == (GroupKey("g"), GROUP)
    assert list(read_offset_records(batch)) == [(GroupKey("g"), GROUP)]


def test_group_metadata_tombstone_batch() -> None:
    batch = group_metadata_batch("g", None, 7)
    (record,) = iter_records(batch)
    assert (record.key, record.value) == (_group_key("g"), None)
    assert list(read_offset_records(batch)) == [(GroupKey("g"), None)]


def test_group_metadata_batch_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="generation"):
        group_metadata_batch("g", GroupMetadata("", 2**31, None, None, -1, ()), 0)
    with pytest.raises(ValueError, match=r"group .* over the 32767"):
        group_metadata_batch("g" * 32768, None, 0)


COMMIT_0 = CommittedOffset(10, 2, "", 1_000)
COMMIT_1 = CommittedOffset(11, 2, "m", 1_000)


def test_offsets_and_group_metadata_in_one_batch_in_order() -> None:
    empty = GroupMetadata("consumer", 8, None, None, 2_000, ())
    orders_0, orders_1 = OffsetKey("g", "orders", 0), OffsetKey("g", "orders", 1)
    expected = [
        (orders_0, COMMIT_0),
        (GroupKey("g"), GROUP),
        (orders_1, COMMIT_1),
        (orders_0, None),
        (GroupKey("g"), empty),
        (GroupKey("h"), None),
    ]
    specs = [
        RecordSpec(key=encode_offset_key(orders_0), value=encode_offset_value(COMMIT_0)),
        RecordSpec(key=encode_group_key("g"), value=encode_group_value(GROUP)),
        RecordSpec(key=encode_offset_key(orders_1), value=encode_offset_value(COMMIT_1)),
        RecordSpec(key=encode_offset_key(orders_0), value=None),
        RecordSpec(key=encode_group_key("g"), value=encode_group_value(empty)),
        RecordSpec(key=encode_group_key("h"), value=None),
    ]
    batch = build_batch(specs, base_offset=50, base_timestamp=1_000)
    assert list(read_offset_records(batch)) == expected
    assert [decode_offset_record(r) for r in iter_records(batch)] == expected


def test_a_log_of_commit_and_group_batches_reads_back_in_order() -> None:
    commits: list[tuple[OffsetKey, CommittedOffset | None]] = [
        (OffsetKey("g", "orders", 0), COMMIT_0),
        (OffsetKey("g", "orders", 1), COMMIT_1),
    ]
    log = bytearray()
    log += offset_commit_batch(commits, 1_000)
    log += group_metadata_batch("g", GROUP, 1_001)
    log += offset_commit_batch([(OffsetKey("g", "orders", 1), None)], 1_002)
    log += group_metadata_batch("g", None, 1_003)
    info = assign_offsets(log, 100, 4)
    assert (info.first_offset, info.last_offset) == (100, 104)
    read = []
    for header in iter_batches(log):
        batch = memoryview(log)[header.position : header.position + header.size]
        read += [(r.offset, decode_offset_record(r)) for r in iter_records(batch)]
        assert [v for _, v in read[-header.record_count :]] == list(read_offset_records(batch))
    assert read == [
        (100, commits[0]),
        (101, commits[1]),
        (102, (GroupKey("g"), GROUP)),
        (103, (OffsetKey("g", "orders", 1), None)),
        (104, (GroupKey("g"), None)),
    ]


def test_malformed_group_value_in_a_batch_names_its_offset_and_group() -> None:
    batch = build_batch(
        [
            RecordSpec(key=_group_key("g"), value=GOOD_GROUP_VALUE),
            RecordSpec(key=_group_key("g"), value=GOOD_GROUP_VALUE[:-3]),
        ],
        base_offset=200,
        base_timestamp=0,
    )
    with pytest.raises(
        MalformedOffsetRecord,
        match=r"offset 201 \(GroupKey\(group='g'\)\): group metadata value v3 .* truncated",
    ):
        list(read_offset_records(batch))
    bad_version = build_batch(
        [RecordSpec(key=_group_key("g"), value=b"\x00\x04")], base_timestamp=0
    )
    with pytest.raises(MalformedOffsetRecord, match="unknown group metadata value version 4"):
        list(read_offset_records(bad_version))


# --------------------------------------------------------------------------- group properties

_nullable_text = st.one_of(st.none(), _text)
_members = st.builds(
    MemberMetadata,
    _text,
    _nullable_text,
    _text,
    _text,
    _int32,
    _int32,
    st.binary(max_size=40),
    st.binary(max_size=40),
)
_groups = st.one_of(
    st.builds(
        GroupMetadata,
        _text,
        _int32,
        _text,
        _nullable_text,
        _int64,
        st.lists(_members, max_size=4).map(tuple),
    ),
    # a group without a protocol has no members (Kafka writes no other)
    st.builds(GroupMetadata, _text, _int32, st.none(), _nullable_text, _int64, st.just(())),
)


@given(_text, _groups)
def test_group_key_and_value_round_trip(group_id: str, group: GroupMetadata) -> None:
    assert decode_key(encode_group_key(group_id)) == GroupKey(group_id)
    data = encode_group_value(group)
    assert data == _group_value_bytes(3, group)  # the layout of Kafka's v3 schema
    assert decode_group_value(data) == group


@given(st.integers(0, 3), _groups)
def test_every_group_value_version_reads_as_kafka_reads_it(
    version: int, group: GroupMetadata
) -> None:
    assert decode_group_value(_group_value_bytes(version, group)) == _as_read_from(version, group)


@settings(max_examples=50)
@given(
    st.lists(
        st.one_of(
            st.tuples(_keys, st.one_of(st.none(), _values)),
            st.tuples(_text.map(GroupKey), st.one_of(st.none(), _groups)),
        ),
        min_size=1,
        max_size=6,
    ),
    _int64,
)
def test_mixed_batch_round_trip_property(
    records: list[tuple[OffsetKey | GroupKey, CommittedOffset | GroupMetadata | None]],
    timestamp: int,
) -> None:
    specs = []
    for key, value in records:
        if isinstance(key, OffsetKey):
            assert value is None or isinstance(value, CommittedOffset)
            encoded = None if value is None else encode_offset_value(value)
            specs.append(RecordSpec(key=encode_offset_key(key), value=encoded))
        else:
            assert value is None or isinstance(value, GroupMetadata)
            encoded = None if value is None else encode_group_value(value)
            specs.append(RecordSpec(key=encode_group_key(key.group), value=encoded))
    batch = build_batch(specs, base_timestamp=timestamp)
    assert list(read_offset_records(batch)) == records


@given(_text, st.one_of(st.none(), _groups), _int64)
def test_group_batch_round_trip_property(
    group_id: str, group: GroupMetadata | None, timestamp: int
) -> None:
    batch = group_metadata_batch(group_id, group, timestamp)
    assert list(read_offset_records(batch)) == [(GroupKey(group_id), group)]


@given(st.integers(0, 3), st.binary(max_size=60))
def test_arbitrary_group_value_bodies_decode_or_raise_malformed(version: int, body: bytes) -> None:
    try:
        decode_group_value(struct.pack(">h", version) + body)
    except MalformedOffsetRecord:
        pass


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(0, 300),
    delete_group=st.booleans(),
    limit=st.integers(200, 5_000),
    compression=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]),
)
def test_tombstone_batches_hold_a_groups_tombstones_in_order_within_the_limit(
    count: int, delete_group: bool, limit: int, compression: int
) -> None:
    """One group's tombstones (its offsets', then its own), in one batch if it fits
    max.message.bytes, else split within it (decompressed too), in order."""
    keys = [OffsetKey("payments", f"topic-{i % 7}", i) for i in range(count)]
    batches = tombstone_batches(keys, "payments" if delete_group else None, 5, compression, limit)
    expected: list[OffsetKey | GroupKey] = [
        *keys,
        *([GroupKey("payments")] if delete_group else []),
    ]
    read: list[OffsetKey | GroupKey] = []
    for batch in batches:
        assert len(batch) <= limit
        assert read_header(batch).compression == compression
        for key, value in read_offset_records(batch):
            assert value is None
            read.append(key)
    assert read == expected
    if len(batches) > 1:  # split only when one might not fit (19: a record's most overhead)
        encoded = [encode_offset_key(k) for k in keys] + [encode_group_key("payments")]
        assert 61 + sum(len(k) + 19 for k in encoded[: len(expected)]) > limit
    whole = tombstone_batches(keys, "payments", 5, Compression.NONE, 1 << 20)
    assert len(whole) == 1  # a group's tombstones fit one default-sized batch


def test_a_tombstone_over_the_limit_is_a_batch_alone() -> None:
    batches = tombstone_batches([OffsetKey("g", "t" * 200, 0)], "g", 5, Compression.NONE, 100)
    assert [len(list(iter_records(b))) for b in batches] == [1, 1]
    assert len(batches[0]) > 100  # refused when appended: nothing smaller holds it


def _tombstone_estimate(keys: list[bytes]) -> int:
    """A batch header and, per record, its key and the most a tombstone takes besides
    (19 bytes: see _TOMBSTONE_OVERHEAD)."""
    return 61 + sum(len(key) + 19 for key in keys)


def test_tombstones_are_cut_where_their_estimated_size_passes_the_limit() -> None:
    """Chunks are cut by the records' estimated uncompressed size: all in one batch while
    the estimate is at most the limit (the boundary included), a record more in a batch
    of its own past it."""
    keys = [OffsetKey("payments", f"topic-{i}", i) for i in range(6)]
    encoded = [encode_offset_key(k) for k in keys] + [encode_group_key("payments")]
    whole = _tombstone_estimate(encoded)

    def counts(limit: int) -> list[int]:
        batches = tombstone_batches(keys, "payments", 5, Compression.NONE, limit)
        return [read_header(batch).record_count for batch in batches]

    assert counts(whole) == [7]
    assert counts(whole - 1) == [6, 1]
    assert counts(_tombstone_estimate(encoded[:3])) == [3, 3, 1]
    assert counts(_tombstone_estimate(encoded[:3]) - 1) == [2, 2, 3]  # (the group's key is short)


def test_a_compressed_chunk_over_the_limit_is_halved_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chunk whose compressed batch is over the limit (a codec can grow what does not
    compress) is halved until each part fits or is one record, the order kept."""
    from groups import offset_records

    def growing_build_batch(
        specs: list[RecordSpec], *, base_timestamp: int, compression: int
    ) -> bytearray:
        """The batch, padded to at least a byte over its estimate: as if the codec grew it."""
        batch = build_batch(specs, base_timestamp=base_timestamp, compression=compression)
        grown = _tombstone_estimate([spec.key for spec in specs if spec.key is not None]) + 1
        return batch + bytearray(max(0, grown - len(batch)))

    monkeypatch.setattr(offset_records, "build_batch", growing_build_batch)
    keys = [OffsetKey("payments", f"topic-{i}", i) for i in range(9)]
    encoded = [encode_offset_key(k) for k in keys]
    limit = _tombstone_estimate(encoded[:4])  # cut in chunks of 4, 4 and 1 by estimate
    batches = tombstone_batches(keys, None, 5, Compression.GZIP, limit)
    read: list[OffsetKey | GroupKey] = []
    for padded in batches:
        assert len(padded) <= limit
        batch = padded[: read_header(padded).size]
        read += [key for key, _ in read_offset_records(batch)]
    assert read == keys
    assert [read_header(b).record_count for b in batches] == [2, 2, 2, 2, 1]  # halved
    # A two-record chunk over the limit is halved too, into single records.
    two = [OffsetKey("g", "t" * 40, 0), OffsetKey("g", "u" * 40, 1)]
    two_limit = _tombstone_estimate([encode_offset_key(k) for k in two])
    split = tombstone_batches(two, None, 5, Compression.GZIP, two_limit)
    assert [read_header(b).record_count for b in split] == [1, 1]


def test_an_empty_value_is_malformed_not_a_tombstone() -> None:
    """Only a null value is a tombstone; an empty one has no version to read (Kafka
    2.8's readOffsetMessageValue/readGroupMessageValue fail on it)."""
    keys = [encode_offset_key(OffsetKey("g", "t", 0)), encode_group_key("g")]
    for key in keys:
        batch = build_batch([RecordSpec(key=key, value=b"")], base_timestamp=5)
        with pytest.raises(MalformedOffsetRecord, match="offset 0"):
            list(read_offset_records(batch))
        tombstone = build_batch([RecordSpec(key=key, value=None)], base_timestamp=5)
        assert [value for _, value in read_offset_records(tombstone)] == [None]


def test_tombstones_carry_the_time_they_are_written_at() -> None:
    """Every tombstone, in each batch it is split into, has the time given (Kafka 2.8's
    cleanupGroupMetadata writes them at time.milliseconds())."""
    keys = [OffsetKey("payments", f"topic-{i}", i) for i in range(6)]
    limit = _tombstone_estimate([encode_offset_key(k) for k in keys[:2]])
    for compression in (Compression.NONE, Compression.GZIP):
        batches = tombstone_batches(keys, "payments", 1_234_567, compression, limit)
        assert len(batches) > 1
        for batch in batches:
            assert read_header(batch).max_timestamp == 1_234_567
            assert {record.timestamp for record in iter_records(batch)} == {1_234_567}
