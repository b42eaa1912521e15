"""Codec semantics: defaults, version gaps, nulls, errors, tagged fields, large values."""

from __future__ import annotations

import gc
import struct
import uuid
from typing import Any

import pytest

from wire.codec import UNKNOWN_TAGGED_FIELDS, ZERO_UUID, _uvarint, decode, encode, get_codec
from wire.errors import DecodeError, EncodeError, UnsupportedVersionError


def partition(**overrides: Any) -> dict[str, Any]:
    return {
        "partition_index": 0,
        "controller_epoch": 1,
        "leader": 1,
        "leader_epoch": 1,
        "isr": [1],
        "partition_epoch": 1,
        "replicas": [1],
        **overrides,
    }


def leader_and_isr(*partitions: dict[str, Any]) -> dict[str, Any]:
    return {
        "controller_id": 1,
        "controller_epoch": 1,
        "topic_states": [{"topic_name": "t", "partition_states": list(partitions)}],
    }


def test_codecs_are_cached_and_versions_checked() -> None:
    assert get_codec("LeaderAndIsrRequest", 5) is get_codec("LeaderAndIsrRequest", 5)
    with pytest.raises(UnsupportedVersionError, match="valid: 0-7"):
        get_codec("LeaderAndIsrRequest", 8)
    with pytest.raises(KeyError):
        get_codec("NoSuchRequest", 0)


def test_missing_fields_take_schema_defaults() -> None:
    body = {"max_wait_ms": 1, "min_bytes": 2, "topics": []}
    encoded = encode("FetchRequest", 4, body)
    # replica_id -1, max_wait_ms, min_bytes, max_bytes 0x7fffffff, isolation_level 0, topics []
    assert encoded == struct.pack(">iiiibi", -1, 1, 2, 0x7FFFFFFF, 0, 0)


def test_decode_fills_fields_absent_from_the_version() -> None:
    v0 = decode("FetchRequest", 0, struct.pack(">iiii", -1, 1, 2, 0))
    assert v0["max_bytes"] == 0x7FFFFFFF
    assert v0["session_epoch"] == -1
    assert v0["rack_id"] == ""
    assert v0["cluster_id"] is None
    assert v0["replica_state"] == {"replica_id": -1, "replica_epoch": -1}
    assert v0["forgotten_topics_data"] == []
    latest = get_codec("FetchRequest", 16).new()
    assert set(v0) == set(latest)


def test_default_bodies_are_fresh_objects() -> None:
    codec = get_codec("FetchRequest", 16)
    first = codec.new()
    first["topics"].append("x")
    first["replica_state"]["replica_id"] = 5
    second = codec.new()
    assert second["topics"] == []
    assert second["replica_state"]["replica_id"] == -1


def test_non_ignorable_field_missing_from_the_version_must_be_default() -> None:
    body = leader_and_isr(partition(), partition(partition_index=1, leader_recovery_state=1))
    with pytest.raises(EncodeError) as info:
        encode("LeaderAndIsrRequest", 5, body)
    message = str(info.value)
    assert "LeaderAndIsrRequest v5" in message
    assert "topic_states[0].partition_states[1].leader_recovery_state" in message
    assert "not in this version and not ignorable" in message
    # The default value is fine, and so is any value of an ignorable field.
    body = leader_and_isr(partition(leader_recovery_state=0, topic_name="dropped"))
    assert (
        decode("LeaderAndIsrRequest", 5, encode("LeaderAndIsrRequest", 5, body))["topic_states"][0][
            "partition_states"
        ][0]["topic_name"]
        == ""
    )
    with pytest.raises(EncodeError, match="ungrouped_partition_states"):
        encode("LeaderAndIsrRequest", 5, {"ungrouped_partition_states": [partition()]})
    encode("LeaderAndIsrRequest", 5, {"ungrouped_partition_states": []})


def test_null_rules() -> None:
    with pytest.raises(EncodeError, match=r"topic_states\[0\]\.topic_name: null is not allowed"):
        encode("LeaderAndIsrRequest", 5, {"topic_states": [{"topic_name": None}]})
    with pytest.raises(EncodeError, match="isr: null"):
        encode("LeaderAndIsrRequest", 1, {"ungrouped_partition_states": [partition(isr=None)]})
    # Nullable in this version: null round-trips and differs from empty.
    assert (
        decode("MetadataRequest", 12, encode("MetadataRequest", 12, {"topics": None}))["topics"]
        is None
    )
    assert (
        decode("MetadataRequest", 12, encode("MetadataRequest", 12, {"topics": []}))["topics"] == []
    )
    # A null where the version forbids it is a malformed message.
    with pytest.raises(DecodeError, match="non-nullable field 'topics' is null"):
        decode("MetadataRequest", 0, b"\xff\xff\xff\xff")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"controller_id": "one"}, r"controller_id: .*integer"),
        ({"controller_id": 2**31}, r"controller_id: .*2147483647"),
        ({"broker_epoch": 1.5}, r"broker_epoch: .*integer"),
        ({"topic_states": [{"topic_name": 5}]}, r"topic_states\[0\]\.topic_name"),
        ({"topic_states": [{"partition_states": [partition(isr=["a"])]}]}, r"\[0\]\.isr"),
        ({"topic_states": [{"topic_nme": "t"}]}, r"\[0\]: unknown field\(s\) topic_nme;"),
        ({"topic_states": ["not a dict"]}, r"topic_states\[0\]: a struct must be a dict"),
        ({"topic_states": 5}, r"topic_states: .*len"),
        ({"topic_states": [{"topic_name": "x" * 40000}]}, r"longer than the 32767"),
        ({"topic_states": [{"topic_id": b"short"}]}, r"topic_id: a uuid needs 16 bytes"),
    ],
)
def test_bad_values_name_the_field(body: dict[str, Any], match: str) -> None:
    with pytest.raises(EncodeError, match=match):
        encode("LeaderAndIsrRequest", 5, body)


def test_body_must_be_a_dict() -> None:
    with pytest.raises(EncodeError, match="body must be a dict, got list"):
        encode("LeaderAndIsrRequest", 5, [])  # type: ignore[arg-type]


def test_uuid_accepts_bytes_and_decodes_to_uuid() -> None:
    topic_id = uuid.uuid4()
    body = {"topic_states": [{"topic_name": "t", "topic_id": topic_id.bytes}]}
    decoded = decode("LeaderAndIsrRequest", 5, encode("LeaderAndIsrRequest", 5, body))
    assert decoded["topic_states"][0]["topic_id"] == topic_id
    assert (
        decode("LeaderAndIsrRequest", 5, encode("LeaderAndIsrRequest", 5, {}))["topic_states"] == []
    )
    empty = decode(
        "LeaderAndIsrRequest", 5, encode("LeaderAndIsrRequest", 5, {"topic_states": [{}]})
    )
    assert empty["topic_states"][0]["topic_id"] == ZERO_UUID


def produce(records: Any) -> dict[str, Any]:
    return {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }


@pytest.mark.parametrize("version", [3, 9])
def test_records_are_opaque_and_zero_copy(version: int) -> None:
    batch = bytes(range(256)) * 3
    for records in (batch, bytearray(batch), memoryview(batch)):
        encoded = encode("ProduceRequest", version, produce(records))
        decoded = decode("ProduceRequest", version, encoded)
        got = decoded["topic_data"][0]["partition_data"][0]["records"]
        assert isinstance(got, memoryview)
        assert got == batch
        assert got.obj is not None
    null = decode("ProduceRequest", version, encode("ProduceRequest", version, produce(None)))
    assert null["topic_data"][0]["partition_data"][0]["records"] is None


@pytest.mark.parametrize("version", [1, 5])  # classic and flexible encodings
def test_long_arrays_and_strings(version: int) -> None:
    replicas = list(range(300))
    name = "topic-" + "é" * 200  # a 406-byte string: a two-byte compact length
    body = leader_and_isr(partition(isr=replicas[:64], replicas=replicas))
    body["topic_states"][0]["topic_name"] = name
    body["topic_states"] *= 130  # a two-byte compact count
    if version == 1:
        body = {
            "ungrouped_partition_states": [{**partition(isr=replicas, replicas=replicas[:127])}],
            "live_leaders": [{"broker_id": 1, "host_name": name, "port": 1}] * 200,
        }
    decoded = decode("LeaderAndIsrRequest", version, encode("LeaderAndIsrRequest", version, body))
    if version == 1:
        assert decoded["ungrouped_partition_states"][0]["isr"] == replicas
        assert decoded["ungrouped_partition_states"][0]["replicas"] == replicas[:127]
        assert decoded["live_leaders"][199]["host_name"] == name
    else:
        assert len(decoded["topic_states"]) == 130
        state = decoded["topic_states"][129]
        assert state["topic_name"] == name
        assert state["partition_states"][0]["replicas"] == replicas
        assert state["partition_states"][0]["isr"] == replicas[:64]


def api_versions_v3(tail: bytes) -> bytes:
    """An ApiVersionsResponse v3 body whose top-level tagged section is `tail`."""
    return b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + tail


def test_unknown_tagged_fields_are_skipped_and_preserved() -> None:
    # Tags 1 (known: finalized_features_epoch) and 9, 12 (unknown to this schema).
    tail = b"\x03" + b"\x01\x08" + (42).to_bytes(8, "big") + b"\x09\x02hi" + b"\x0c\x00"
    data = api_versions_v3(tail)
    decoded = decode("ApiVersionsResponse", 3, data)
    assert decoded["finalized_features_epoch"] == 42
    assert decoded[UNKNOWN_TAGGED_FIELDS] == {9: b"hi", 12: b""}
    assert encode("ApiVersionsResponse", 3, decoded) == data


def test_unknown_tagged_fields_in_nested_structs() -> None:
    body = leader_and_isr(partition(**{UNKNOWN_TAGGED_FIELDS: {5: b"\x01\x02"}}))
    data = encode("LeaderAndIsrRequest", 5, body)
    decoded = decode("LeaderAndIsrRequest", 5, data)
    assert decoded["topic_states"][0]["partition_states"][0][UNKNOWN_TAGGED_FIELDS] == {
        5: b"\x01\x02"
    }
    assert UNKNOWN_TAGGED_FIELDS not in decoded["topic_states"][0]
    assert encode("LeaderAndIsrRequest", 5, decoded) == data


def test_unknown_tag_may_not_shadow_a_known_one() -> None:
    body = {"finalized_features_epoch": 3, UNKNOWN_TAGGED_FIELDS: {1: b"x"}}
    with pytest.raises(EncodeError, match="tag 1 is also a known field"):
        encode("ApiVersionsResponse", 3, body)


def test_tagged_fields_are_written_only_when_not_default() -> None:
    plain = encode("FetchRequest", 12, {"cluster_id": None})
    assert plain.endswith(b"\x00")  # no tagged fields
    tagged = encode("FetchRequest", 12, {"cluster_id": "c"})
    assert tagged[-5:] == b"\x01\x00\x02\x02c"  # one field: tag 0, 2 bytes, compact "c"
    partial = encode("FetchRequest", 15, {"replica_state": {"replica_id": -1}})
    assert partial == encode("FetchRequest", 15, {})


def test_tagged_field_with_wrong_size_is_malformed() -> None:
    tail = b"\x01" + b"\x01\x04" + (42).to_bytes(8, "big")
    with pytest.raises(DecodeError):
        decode("ApiVersionsResponse", 3, api_versions_v3(tail))
    tail = b"\x01" + b"\x01\x09" + (42).to_bytes(8, "big") + b"\x00"
    with pytest.raises(DecodeError, match="declares 9 bytes, uses 8"):
        decode("ApiVersionsResponse", 3, api_versions_v3(tail))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x00\x00\xff\xff\xff\xff\xff\x00", "varint longer than 5 bytes"),
        (b"\x00\x00\x7f", "claims 126 elements"),
        (b"\x00\x00\x01\x00\x00\x00\x00\x01\x05\x09", "truncated input: tagged field"),
        (b"\x00", "truncated"),
        (b"", "truncated"),
    ],
)
def test_malformed_input_messages(data: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode("ApiVersionsResponse", 3, data)


def test_a_string_not_utf8_is_read_with_replacement_characters_as_kafka_reads_it() -> None:
    """Kafka's Readable.readString is Java's new String(bytes, UTF_8): what is not UTF-8
    becomes U+FFFD and the message is read (a broker then answers, say, a topic no topic
    can have); it was a DecodeError, and the broker closed the connection."""
    assert decode("DescribeGroupsRequest", 0, b"\x00\x00\x00\x01\x00\x01\xff")["groups"] == [
        "\ufffd"
    ]
    # A sequence cut short is one U+FFFD, as in Java; the good text around it stays.
    cut = decode("DescribeGroupsRequest", 0, b"\x00\x00\x00\x01\x00\x04a\xe2\x82b")
    assert cut["groups"] == ["a\ufffdb"]

    def latin1(message: str, version: int, body: dict[str, Any]) -> Any:
        data = bytearray(encode(message, version, body))
        i = data.index(b"cafX")
        data[i + 3] = 0xE9  # "café" in Latin-1
        return decode(message, version, data)

    # Compact (flexible) and nullable strings, in requests and responses alike.
    assert latin1("DescribeGroupsRequest", 5, {"groups": ["cafX"]})["groups"] == ["caf\ufffd"]
    produce = latin1("ProduceRequest", 9, {"transactional_id": "cafX", "topic_data": []})
    assert produce["transactional_id"] == "caf\ufffd"
    response = {"topics": [{"name": "cafX", "error_code": 17, "partitions": []}]}
    for version in (4, 9):
        got = latin1("MetadataResponse", version, response)["topics"]
        assert [t["name"] for t in got] == ["caf\ufffd"]
    # What was read encodes again: U+FFFD is UTF-8's EF BF BD.
    again = encode("DescribeGroupsRequest", 0, {"groups": ["caf\ufffd"]})
    assert again == b"\x00\x00\x00\x01\x00\x06caf\xef\xbf\xbd"
    assert decode("DescribeGroupsRequest", 0, again)["groups"] == ["caf\ufffd"]


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_bad_lengths() -> None:
    # A field that is not nullable (here a string and an array) refuses every negative.
    with pytest.raises(DecodeError, match="has length -2"):
        decode("DescribeGroupsRequest", 0, b"\x00\x00\x00\x01\xff\xfe")
    with pytest.raises(DecodeError, match="has length -5"):
        decode("DescribeGroupsRequest", 0, b"\xff\xff\xff\xfb")
    # A compact length Kafka reads as negative (see below) is its null, refused as such.
    with pytest.raises(DecodeError, match="non-nullable field 'group_id' is null"):
        decode("HeartbeatRequest", 4, _uvarint(2**32 - 1) + b"\x00\x00\x00\x01\x02m\x00\x00")


def _heartbeat_v3(instance_length: int) -> bytes:
    """HeartbeatRequest v3: group_id "g", generation_id, member_id "m", then the nullable
    group_instance_id's int16 length (no bytes behind it)."""
    return _string("g") + struct.pack(">i", 1) + _string("m") + struct.pack(">h", instance_length)


def _produce(version: int, records_length: bytes) -> bytes:
    """ProduceRequest (v3 or flexible v9): no transactional id, one topic "t" of one
    partition, whose nullable records field has the given length and no bytes."""
    if version < 9:
        return (
            struct.pack(">hhii", -1, 1, 5, 1)
            + _string("t")
            + struct.pack(">ii", 1, 0)
            + records_length
        )
    head = b"\x00" + struct.pack(">hi", 1, 5) + b"\x02\x02t\x02" + struct.pack(">i", 0)
    return head + records_length + b"\x00\x00\x00"


# Kafka's generated readers take any negative length or count of a nullable field as null
# (MessageDataGenerator.generateVariableLengthReader: `if (length < 0)`), not -1 alone. A
# compact one is its unsigned varint minus 1, read into a Java int: above 2**31 the varint
# is negative there, and so is the length.
@pytest.mark.parametrize(
    ("message", "version", "data", "path"),
    [
        ("HeartbeatRequest", 3, _heartbeat_v3(-2), ("group_instance_id",)),
        ("HeartbeatRequest", 3, _heartbeat_v3(-(2**15)), ("group_instance_id",)),
        (
            "HeartbeatRequest",
            4,
            b"\x02g\x00\x00\x00\x01\x02m" + _uvarint(2**32 - 1) + b"\x00",
            ("group_instance_id",),
        ),
        ("MetadataRequest", 1, struct.pack(">i", -2), ("topics",)),
        ("MetadataRequest", 1, struct.pack(">i", -(2**31)), ("topics",)),
        ("MetadataRequest", 9, _uvarint(2**31 + 1) + b"\x00\x00\x00\x00", ("topics",)),
        (
            "ProduceRequest",
            3,
            _produce(3, struct.pack(">i", -2)),
            ("topic_data", 0, "partition_data", 0, "records"),
        ),
        (
            "ProduceRequest",
            9,
            _produce(9, _uvarint(2**32 - 1)),
            ("topic_data", 0, "partition_data", 0, "records"),
        ),
    ],
    ids=[
        "string -2",
        "string -32768",
        "compact string",
        "array -2",
        "array -2147483648",
        "compact array",
        "records -2",
        "compact records",
    ],
)
def test_any_negative_length_of_a_nullable_field_is_null(
    message: str, version: int, data: bytes, path: tuple[str | int, ...]
) -> None:
    body = decode(message, version, data)
    value: Any = body
    for step in path:
        value = value[step]
    assert value is None
    # Written back (as -1, or compact 0), it is read as null again.
    assert decode(message, version, encode(message, version, body)) == body


def test_a_compact_length_of_2_to_the_31_is_no_null() -> None:
    # Kafka's int of 2**31 is its lowest; minus 1 it wraps to the highest, a length.
    with pytest.raises(DecodeError, match="has length 2147483647"):
        decode("HeartbeatRequest", 4, b"\x02g\x00\x00\x00\x01\x02m" + _uvarint(2**31) + b"\x00")


def test_decode_from_an_offset_and_from_bytes_like() -> None:
    data = encode("LeaderAndIsrRequest", 5, leader_and_isr(partition()))
    codec = get_codec("LeaderAndIsrRequest", 5)
    body, end = codec.decode_from(b"junk" + data, 4)
    assert end == 4 + len(data)
    assert codec.decode(bytearray(data)) == body == codec.decode(memoryview(data))


def test_large_decode_pauses_the_collector_only_while_decoding() -> None:
    body = leader_and_isr(*(partition(partition_index=i) for i in range(5000)))
    data = encode("LeaderAndIsrRequest", 5, body)
    assert len(data) > 64 * 1024
    assert gc.isenabled()
    decoded = decode("LeaderAndIsrRequest", 5, data)
    assert gc.isenabled()
    assert len(decoded["topic_states"][0]["partition_states"]) == 5000
    gc.disable()
    try:
        decode("LeaderAndIsrRequest", 5, data)
        assert not gc.isenabled()  # an application's choice is left alone
    finally:
        gc.enable()
    with pytest.raises(DecodeError):
        decode("LeaderAndIsrRequest", 5, data[:-1])
    assert gc.isenabled()


def test_generated_source_is_kept_for_debugging() -> None:
    source = get_codec("UpdateMetadataRequest", 7).source
    assert source.startswith("# UpdateMetadataRequest v7")
    assert "def _enc" in source
    assert "def _dec" in source


def metadata_v9(name_length: bytes, name: bytes) -> bytes:
    """MetadataRequest v9 naming one topic: a compact array of 1 [name, tags], then
    allow_auto_topic_creation, the two include_*_authorized_operations, tags."""
    return b"\x02" + name_length + name + b"\x00" + b"\x01\x00\x00" + b"\x00"


def test_a_compact_string_longer_than_0x7fff_is_refused() -> None:
    # Kafka's generated readers throw "string field name had invalid length 40000" (and
    # this encoder refuses to write it): decode must not accept what encode cannot write.
    name = b"t" * 0x8000
    with pytest.raises(DecodeError, match=r"field 'name' has length 32768"):
        decode("MetadataRequest", 9, metadata_v9(_uvarint(len(name) + 1), name))
    at_limit = decode("MetadataRequest", 9, metadata_v9(_uvarint(0x7FFF + 1), name[:-1]))
    assert len(at_limit["topics"][0]["name"]) == 0x7FFF
    assert get_codec("MetadataRequest", 9).encode(at_limit) == metadata_v9(
        _uvarint(0x7FFF + 1), name[:-1]
    )
    # A classic string's int16 length cannot say more than 0x7FFF: 0x8000 is negative.
    with pytest.raises(DecodeError, match="has length -32768"):
        decode("DescribeGroupsRequest", 0, b"\x00\x00\x00\x01\x80\x00" + b"g" * 0x8000)


def test_an_unsigned_varint_beyond_32_bits_is_refused() -> None:
    # ApiVersionsRequest v3: two empty compact strings, then a tagged section of one field
    # whose tag is a five-byte varint. Kafka's readUnsignedVarint is an int: a fifth byte
    # above 0x0F overflows it, and this encoder cannot write such a tag back.
    codec = get_codec("ApiVersionsRequest", 3)
    for fifth in (0x10, 0x7F):
        data = b"\x01\x01\x01" + b"\xff\xff\xff\xff" + bytes([fifth]) + b"\x00"
        with pytest.raises(DecodeError, match="beyond 32 bits"):
            codec.decode(data)
    largest = b"\x01\x01\x01" + b"\xff\xff\xff\xff\x0f" + b"\x00"
    body = codec.decode(largest)
    assert body[UNKNOWN_TAGGED_FIELDS] == {0xFFFFFFFF: b""}
    assert codec.encode(body) == largest


def test_empty_records_decode_to_one_shared_writable_view() -> None:
    # A follower's Fetch response holds one per partition (10,000s): a slice of the frame
    # each cost 312 bytes.
    first = decode("ProduceRequest", 9, encode("ProduceRequest", 9, produce(b"")))
    again = decode("ProduceRequest", 9, encode("ProduceRequest", 9, produce(b"")))
    got = first["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(got, memoryview)
    assert len(got) == 0
    assert not got.readonly
    assert again["topic_data"][0]["partition_data"][0]["records"] is got
