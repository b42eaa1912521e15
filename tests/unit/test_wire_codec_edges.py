"""Codec edges the other wire tests leave open: varint boundaries (127/128), the string length
limit on encode, truncated unknown tagged fields, the order of written tags, and defaults of
struct fields a version cannot carry (Kafka 2.8's ByteUtils and generated *Data code)."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

from wire.codec import (
    UNKNOWN_TAGGED_FIELDS,
    ZERO_UUID,
    _read_uvarint,
    _uvarint,
    compile_codec,
    decode,
    encode,
    get_codec,
)
from wire.errors import DecodeError, EncodeError
from wire.schema_types import FieldSpec as F
from wire.schema_types import MessageSpec


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**31, b"\x80\x80\x80\x80\x08"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varints_as_kafka_writes_them(value: int, data: bytes) -> None:
    # ByteUtils.writeUnsignedVarint: seven bits a byte, low first, high bit "more follows".
    assert _uvarint(value) == data
    assert _read_uvarint(data + b"\x00", 0) == (value, len(data))


@pytest.mark.parametrize("value", [-1, 2**32, 2**40])
def test_an_unsigned_varint_outside_32_bits_cannot_be_written(value: int) -> None:
    with pytest.raises(EncodeError, match="does not fit an unsigned varint"):
        _uvarint(value)
    # An unknown tag is written as such a varint: Kafka's tags are ints.
    with pytest.raises(EncodeError, match="does not fit"):
        encode("ApiVersionsRequest", 3, {UNKNOWN_TAGGED_FIELDS: {value: b""}})


def test_a_compact_string_of_127_bytes_has_a_two_byte_length() -> None:
    # Its compact length is 128, the first that needs a second varint byte.
    for size, head in ((126, b"\x7f"), (127, b"\x80\x01"), (128, b"\x81\x01")):
        name = "n" * size
        data = encode("ApiVersionsRequest", 3, {"client_software_name": name})
        assert data == head + name.encode() + b"\x01\x00"
        assert decode("ApiVersionsRequest", 3, data)["client_software_name"] == name


def test_a_tagged_section_of_128_fields_has_a_two_byte_count() -> None:
    unknown = {tag: bytes([tag]) for tag in range(128)}
    data = encode("ApiVersionsRequest", 3, {UNKNOWN_TAGGED_FIELDS: unknown})
    assert data[:4] == b"\x01\x01\x80\x01"  # two empty strings, then a count of 128
    assert data[4:7] == b"\x00\x01\x00"  # tag 0, 1 byte, the byte
    assert decode("ApiVersionsRequest", 3, data)[UNKNOWN_TAGGED_FIELDS] == unknown


def test_a_string_of_more_than_0x7fff_bytes_cannot_be_written() -> None:
    # Kafka's generated write: "'clientSoftwareName' field is too long to be serialized".
    at_limit = "s" * 0x7FFF
    for version in (0, 5):  # a classic and a compact string
        data = encode("DescribeGroupsRequest", version, {"groups": [at_limit]})
        assert decode("DescribeGroupsRequest", version, data)["groups"] == [at_limit]
        with pytest.raises(EncodeError, match="string of 32768 bytes is longer than the 32767"):
            encode("DescribeGroupsRequest", version, {"groups": [at_limit + "s"]})
    # Bytes, not characters: 0x4000 two-byte characters are 0x8000 bytes.
    with pytest.raises(EncodeError, match="string of 32768 bytes"):
        encode("ApiVersionsRequest", 3, {"client_software_name": "é" * 0x4000})


def test_an_unknown_tagged_field_running_past_the_input_is_truncated() -> None:
    # ApiVersionsRequest v3: two empty compact strings, then one tagged field, tag 9, that
    # declares 5 bytes of which 2 are there. It must not be read short, nor its end passed
    # on as where the message ends.
    data = b"\x01\x01" + b"\x01" + b"\x09\x05ab"
    codec = get_codec("ApiVersionsRequest", 3)
    with pytest.raises(DecodeError, match="truncated input: tagged field of 5 bytes"):
        codec.decode_from(data, 0)
    with pytest.raises(DecodeError, match="truncated input: tagged field of 3 bytes"):
        codec.decode_from(b"\x01\x01" + b"\x01" + b"\x09\x03ab", 0)  # one byte short
    # The same field inside a struct whose message goes on after it.
    partition = {
        "partition_index": 0,
        "leader": 1,
        "replicas": [1],
        "isr": [1],
        UNKNOWN_TAGGED_FIELDS: {9: b"abcde"},
    }
    body = {"topic_states": [{"topic_name": "t", "partition_states": [partition]}]}
    whole = encode("LeaderAndIsrRequest", 5, body)
    at = whole.index(b"\x09\x05abcde")
    cut = whole[: at + 4]
    with pytest.raises(DecodeError, match="truncated"):
        get_codec("LeaderAndIsrRequest", 5).decode_from(cut, 0)


def test_tagged_fields_are_written_in_tag_order_known_and_unknown_alike() -> None:
    # Kafka's generated write interleaves unknown tags with the known ones
    # (RawTaggedFieldWriter.writeRawTags up to the next known tag): ascending tags.
    body: dict[str, Any] = {
        "finalized_features_epoch": 7,  # known tag 1
        UNKNOWN_TAGGED_FIELDS: {9: b"z", 0x200: b"", 5: b"a"},
    }
    data = encode("ApiVersionsResponse", 3, body)
    tail = (
        b"\x04" + b"\x01\x08" + struct.pack(">q", 7) + b"\x05\x01a" + b"\x09\x01z" + b"\x80\x04\x00"
    )
    assert data.endswith(tail)
    assert decode("ApiVersionsResponse", 3, data)[UNKNOWN_TAGGED_FIELDS] == {
        5: b"a",
        9: b"z",
        0x200: b"",
    }
    # Unknown tags alone, given out of order, go out sorted too.
    data = encode("ApiVersionsRequest", 3, {UNKNOWN_TAGGED_FIELDS: {5: b"", 2: b"", 3: b""}})
    assert data == b"\x01\x01" + b"\x03" + b"\x02\x00\x03\x00\x05\x00"


def test_a_struct_field_the_version_cannot_carry_must_be_wholly_default() -> None:
    # FetchRequest's ReplicaState (v15+) is not ignorable: as Kafka's generated write, a
    # value in any of its fields at v14 raises rather than go silently missing.
    for state in ({"replica_id": 5, "replica_epoch": -1}, {"replica_id": -1, "replica_epoch": 3}):
        with pytest.raises(EncodeError, match="replica_state: not in this version"):
            encode("FetchRequest", 14, {"replica_state": state})
    default = {"replica_id": -1, "replica_epoch": -1}
    assert encode("FetchRequest", 14, {"replica_state": default}) == encode("FetchRequest", 14, {})
    assert encode("FetchRequest", 14, {"replica_state": {"replica_id": -1}}) == encode(
        "FetchRequest", 14, {}
    )


def _fetch_response_v12(diverging_epoch: dict[str, Any]) -> dict[str, Any]:
    partition = {"partition_index": 0, "records": b"", "diverging_epoch": diverging_epoch}
    return {"responses": [{"topic": "t", "partitions": [partition]}]}


def test_a_tagged_struct_holding_only_unknown_tagged_fields_is_written() -> None:
    # The default values with an unknown tagged field inside are not the default struct:
    # dropping it would lose the unknown field that was read.
    epoch = {"epoch": -1, "end_offset": -1, UNKNOWN_TAGGED_FIELDS: {4: b"x"}}
    data = encode("FetchResponse", 12, _fetch_response_v12(epoch))
    decoded = decode("FetchResponse", 12, data)
    got = decoded["responses"][0]["partitions"][0]["diverging_epoch"]
    assert got == epoch
    plain = encode("FetchResponse", 12, _fetch_response_v12({"epoch": -1, "end_offset": -1}))
    assert len(data) > len(plain)


# Shapes the Kafka schemas here do not happen to use (a nullable struct that is no array,
# a tagged struct holding an array), in a synthetic message: v0 classic, v1 flexible.
_PAIR = (F("A", "int32", "0+"), F("B", "int64", "0+"))
SHAPES = MessageSpec(
    name="ShapesRequest",
    type="request",
    api_key=None,
    valid_versions="0-1",
    flexible_versions="1+",
    fields=(
        F(
            "Items",
            "[]Item",
            "0+",
            fields=(F("Maybe", "Pair", "0+", nullable_versions="0+", fields=_PAIR),),
        ),
        F(
            "Tagged",
            "Holder",
            "1+",
            tagged_versions="1+",
            tag=0,
            fields=(F("Xs", "[]int32", "1+"),),
        ),
    ),
)


@pytest.mark.parametrize("version", [0, 1])
def test_a_nullable_struct_is_null_for_any_negative_marker(version: int) -> None:
    # Kafka's generated read: `if (_readable.readByte() < 0) this.maybe = null`.
    codec = compile_codec(SHAPES, version)
    tail = b"\x00" if version else b""
    for marker in (0xFF, 0x80, 0xC0):
        data = (b"\x02" if version else struct.pack(">i", 1)) + bytes([marker]) + tail + tail
        assert codec.decode(data)["items"] == [{"maybe": None}]
    present = codec.encode({"items": [{"maybe": {"a": 1, "b": 2}}]})
    assert codec.decode(present)["items"] == [{"maybe": {"a": 1, "b": 2}}]


@pytest.mark.parametrize("version", [0, 1])
def test_an_array_of_structs_each_holding_a_null_struct_is_not_too_long(version: int) -> None:
    # Each element is one byte (the null marker, plus its tags byte when flexible): a
    # claimed count is bounded by the fewest bytes an element can take, which for a
    # nullable struct is its marker, not the struct.
    codec = compile_codec(SHAPES, version)
    body = {"items": [{"maybe": None}] * 5}
    data = codec.encode(body)
    assert codec.decode(data)["items"] == body["items"]


def test_a_tagged_struct_with_a_null_array_is_no_default() -> None:
    # Its default has an empty array; null is not that, and not allowed: it is refused
    # rather than silently left out.
    codec = compile_codec(SHAPES, 1)
    with pytest.raises(EncodeError, match=r"tagged\.xs: null is not allowed"):
        codec.encode({"tagged": {"xs": None}})
    assert codec.encode({"tagged": {"xs": []}}) == codec.encode({})
    assert codec.decode(codec.encode({"tagged": {"xs": [3]}}))["tagged"] == {"xs": [3]}


def test_records_given_as_a_view_of_wider_items_are_written_by_their_bytes() -> None:
    # A view cast to 4-byte items has len() 2 but 8 bytes: the length must say 8.
    view = memoryview(bytes(range(8))).cast("I")
    for version in (3, 9):
        body = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": view}]}]}
        decoded = decode("ProduceRequest", version, encode("ProduceRequest", version, body))
        assert bytes(decoded["topic_data"][0]["partition_data"][0]["records"]) == bytes(range(8))


def test_a_null_tagged_field_whose_default_is_null_is_not_written() -> None:
    # FetchRequest v12's cluster_id (tag 0, default null): null is its default, so the
    # tagged section stays empty (one zero byte); a value makes it tag 0, 2 bytes, "c".
    plain = encode("FetchRequest", 12, {"cluster_id": None})
    assert plain == encode("FetchRequest", 12, {})
    tagged = encode("FetchRequest", 12, {"cluster_id": "c"})
    assert tagged == plain[:-1] + b"\x01\x00\x02\x02c"


def test_unknown_tagged_fields_alone_are_written_where_known_tags_could_be() -> None:
    # ApiVersionsResponse v3 has known tagged fields (0-3), all default here: the unknown
    # one read before still goes out.
    body = {UNKNOWN_TAGGED_FIELDS: {9: b"z"}}
    data = encode("ApiVersionsResponse", 3, body)
    assert data.endswith(b"\x01\x09\x01z")
    assert decode("ApiVersionsResponse", 3, data)[UNKNOWN_TAGGED_FIELDS] == {9: b"z"}


@pytest.mark.parametrize(
    ("message", "version", "data"),
    [
        ("DescribeGroupsRequest", 0, struct.pack(">i", 1000) + b"\x00\x01g"),  # strings
        ("DescribeGroupsRequest", 5, _uvarint(1001) + b"\x02g"),  # compact strings
    ],
)
def test_an_array_of_strings_claiming_more_elements_than_bytes_left_is_refused_at_once(
    message: str, version: int, data: bytes
) -> None:
    # As Kafka's generated readers ("Tried to read 1000 elements, but there are only 3
    # bytes remaining"): each element takes at least a byte, so the count alone says so.
    with pytest.raises(DecodeError, match="field 'groups' claims 1000 elements"):
        decode(message, version, data)


def test_a_tagged_struct_that_is_null_or_no_dict_is_refused_not_left_out() -> None:
    # FetchResponse v12's diverging_epoch is a tagged struct that is not nullable.
    with pytest.raises(EncodeError, match="diverging_epoch: null is not allowed"):
        encode("FetchResponse", 12, _fetch_response_v12(None))  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="diverging_epoch"):
        encode("FetchResponse", 12, _fetch_response_v12([1, 2]))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("message", "version", "data"),
    [
        ("DescribeGroupsRequest", 5, b""),  # no compact count
        ("DescribeGroupsRequest", 5, b"\x02\x02"),  # a string length and no string
        ("ApiVersionsRequest", 3, b"\x01\x01"),  # no tagged section
        ("ApiVersionsRequest", 3, b"\x01\x01\x01\x09"),  # a tag and no size
    ],
)
def test_input_ending_where_a_byte_was_due_is_a_truncation_error(
    message: str, version: int, data: bytes
) -> None:
    with pytest.raises(DecodeError, match=f"{message} v{version}: truncated input"):
        decode(message, version, data)


# A uuid field (v1+, not ignorable) that v0 cannot carry.
LATE_ID = MessageSpec(
    name="LateIdRequest",
    type="request",
    api_key=None,
    valid_versions="0-1",
    flexible_versions="none",
    fields=(F("Id", "uuid", "1+"),),
)


def test_a_uuid_the_version_cannot_carry_may_be_given_as_sixteen_zero_bytes() -> None:
    # The zero uuid is its default however it is given; any other value is refused.
    codec = compile_codec(LATE_ID, 0)
    assert codec.encode({"id": bytes(16)}) == codec.encode({"id": ZERO_UUID}) == b""
    with pytest.raises(EncodeError, match="id: not in this version"):
        codec.encode({"id": b"\x01" * 16})
    with pytest.raises(EncodeError, match="id: not in this version"):
        codec.encode({"id": uuid.UUID(int=1)})
