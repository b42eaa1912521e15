"""Round trips of every message in every version, with bodies derived from the schemas.

The expected decoded shape is computed here from the schema independently of the codec:
fields present in the version keep their values, everything else takes its default.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire_bodies import INT_BOUNDS, default_for, struct_strategy
from wire.codec import compile_codec, get_codec
from wire.errors import DecodeError
from wire.schema_types import FieldSpec, MessageSpec
from wire.schema_types import FieldSpec as F
from wire.schemas import MESSAGES

CASES = [(spec.name, version) for spec in MESSAGES.values() for version in spec.versions]


def expected(body: dict[str, Any], fields: tuple[FieldSpec, ...], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in fields:
        if field.present_in(version) and field.key in body:
            value = body[field.key]
            if field.is_struct and value is not None:
                if field.is_array:
                    value = [expected(item, field.fields, version) for item in value]
                else:
                    value = expected(value, field.fields, version)
            out[field.key] = value
        elif field.is_struct and not field.is_array and default_for(field) is not None:
            out[field.key] = expected({}, field.fields, version)
        else:
            out[field.key] = default_for(field)
    return out


def full_value(field: FieldSpec, version: int, salt: int) -> Any:
    """A deterministic non-default value (arrays of two, non-empty strings)."""
    if field.is_struct:
        element: Any = full_body(field.fields, version, salt)
        return [element, full_body(field.fields, version, salt + 1)] if field.is_array else element
    kind = field.element_type
    if kind in INT_BOUNDS:
        lo, hi = INT_BOUNDS[kind]
        value: Any = min(hi, max(lo, 1000 + salt))
    else:
        value = {
            "bool": True,
            "float64": 1.5 + salt,
            "string": f"s{salt}é",
            "bytes": bytes([salt % 256]) * 3,
            "records": b"\x00rec" * (1 + salt % 3),
            "uuid": uuid.UUID(int=salt + 1),
        }[kind]
    return [value, value] if field.is_array else value


def full_body(fields: tuple[FieldSpec, ...], version: int, salt: int = 0) -> dict[str, Any]:
    return {
        f.key: full_value(f, version, salt + i)
        for i, f in enumerate(fields)
        if f.present_in(version)
    }


def spec_of(name: str) -> MessageSpec:
    return MESSAGES[name]


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_round_trip(name: str, version: int, data: st.DataObject) -> None:
    spec = spec_of(name)
    body = data.draw(struct_strategy(spec.fields, version), label="body")
    codec = get_codec(name, version)
    encoded = codec.encode(body)
    decoded = codec.decode(encoded)
    assert decoded == expected(body, spec.fields, version)
    assert codec.encode(decoded) == encoded
    # Arrays may be any sized iterable: the controller sends its context's tuples as they are.
    assert codec.encode(as_tuples(body)) == encoded


def as_tuples(value: Any) -> Any:
    """``value`` with every list in it (at any depth) a tuple."""
    if isinstance(value, dict):
        return {k: as_tuples(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(as_tuples(v) for v in value)
    return value


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_every_prefix_of_a_full_message_is_a_decode_error(name: str, version: int) -> None:
    spec = spec_of(name)
    body = full_body(spec.fields, version)
    codec = get_codec(name, version)
    encoded = codec.encode(body)
    assert codec.decode(encoded) == expected(body, spec.fields, version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            codec.decode(encoded[:cut])
    with pytest.raises(DecodeError, match="unexpected bytes"):
        codec.decode(encoded + b"\x00")


FUZZ_TARGETS = [
    ("LeaderAndIsrRequest", 5),
    ("UpdateMetadataRequest", 7),
    ("MetadataResponse", 12),
    ("FetchResponse", 16),
    ("FetchRequest", 4),
    ("ApiVersionsResponse", 3),
    ("ProduceRequest", 9),
    ("CreateTopicsRequest", 7),
]


@pytest.mark.parametrize(("name", "version"), FUZZ_TARGETS)
@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_decode_error(name: str, version: int, data: bytes) -> None:
    try:
        get_codec(name, version).decode(data)
    except DecodeError:
        pass


@pytest.mark.parametrize(("name", "version"), FUZZ_TARGETS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_corrupted_messages_decode_or_raise_decode_error(
    name: str, version: int, data: st.DataObject
) -> None:
    spec = spec_of(name)
    encoded = bytearray(get_codec(name, version).encode(full_body(spec.fields, version)))
    index = data.draw(st.integers(0, len(encoded) - 1))
    encoded[index] = data.draw(st.integers(0, 255))
    try:
        get_codec(name, version).decode(bytes(encoded))
    except DecodeError:
        pass


# Types and shapes the Kafka schemas above do not happen to use, in one synthetic message:
# v0 classic, v1 flexible, v2 flexible with one more field.
_INNER = (F("A", "int32", "0+"), F("B", "string", "1+", nullable_versions="1+"))
EVERY_TYPE = MessageSpec(
    name="EveryTypeRequest",
    type="request",
    api_key=None,
    valid_versions="0-2",
    flexible_versions="1+",
    fields=(
        *(F(f"{kind.title()}Value", kind, "0+") for kind in sorted(INT_BOUNDS)),
        F("BoolValue", "bool", "0+", default="true"),
        F("Float64Value", "float64", "0+", default="2.5"),
        F("StringValue", "string", "0+", default="dflt"),
        F("BytesValue", "bytes", "0+"),
        F("UuidValue", "uuid", "0+"),
        F("RecordsValue", "records", "0+", nullable_versions="0+"),
        F("NullableString", "string", "0+", nullable_versions="0+", default="null"),
        F("NullableBytes", "bytes", "0+", nullable_versions="0+"),
        F("ClassicString", "string", "0+", flexible_versions="none"),
        *(F(f"{kind.title()}s", f"[]{kind}", "0+") for kind in sorted(INT_BOUNDS)),
        F("Bools", "[]bool", "0+"),
        F("Float64s", "[]float64", "0+"),
        F("Strings", "[]string", "0+"),
        F("Uuids", "[]uuid", "0+"),
        F("BytesList", "[]bytes", "0+"),
        F("MaybeInt64s", "[]int64", "0+", nullable_versions="0+", default="null"),
        F("Inner", "Inner", "0+", fields=_INNER),
        F("MaybeInner", "MaybeInner", "0+", nullable_versions="0+", fields=_INNER),
        F("Inners", "[]Inner", "0+", fields=_INNER),
        F(
            "TagString",
            "string",
            "1+",
            tagged_versions="1+",
            tag=0,
            nullable_versions="1+",
            default="null",
        ),
        F("TagInts", "[]int32", "1+", tagged_versions="1+", tag=1),
        F("TagInner", "TagInner", "1+", tagged_versions="1+", tag=2, fields=_INNER),
        F("TagUuid", "uuid", "1+", tagged_versions="1+", tag=3),
        F("TagFloat", "float64", "1+", tagged_versions="1+", tag=4, default="1.5"),
        F("TagBool", "bool", "1+", tagged_versions="1+", tag=5, default="true"),
        F("TagUint32", "uint32", "1+", tagged_versions="1+", tag=6, default="0x10"),
        F("TagInners", "[]Inner", "1+", tagged_versions="1+", tag=7, fields=_INNER),
        F("Late", "int32", "2+", default="5"),
    ),
)


@pytest.mark.parametrize("version", [0, 1, 2])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_type_round_trips(version: int, data: st.DataObject) -> None:
    body = data.draw(struct_strategy(EVERY_TYPE.fields, version), label="body")
    codec = compile_codec(EVERY_TYPE, version)
    encoded = codec.encode(body)
    decoded = codec.decode(encoded)
    assert decoded == expected(body, EVERY_TYPE.fields, version)
    assert codec.encode(decoded) == encoded


@pytest.mark.parametrize("version", [0, 1, 2])
def test_every_type_prefixes_and_defaults(version: int) -> None:
    codec = compile_codec(EVERY_TYPE, version)
    body = full_body(EVERY_TYPE.fields, version)
    encoded = codec.encode(body)
    assert codec.decode(encoded) == expected(body, EVERY_TYPE.fields, version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            codec.decode(encoded[:cut])
    defaults = codec.decode(codec.encode({}))
    assert defaults == codec.new()
    assert defaults["bool_value"] is True
    assert defaults["float64_value"] == 2.5
    assert defaults["string_value"] == "dflt"
    assert defaults["tag_uint32"] == 16
    assert defaults["late"] == 5
    assert defaults["records_value"] is None
    assert defaults["inner"] == {"a": 0, "b": ""}
