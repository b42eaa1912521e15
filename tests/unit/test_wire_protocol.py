"""Framing, header versions, API keys and error codes."""

from __future__ import annotations

import struct

import pytest

from wire.api import ApiKey, version_range
from wire.errors import DecodeError, EncodeError, ErrorCode, UnsupportedVersionError
from wire.protocol import (
    MAX_FRAME_SIZE,
    EncodedBody,
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    frame_size,
    request_codec,
    request_header_version,
    response_header_version,
)


@pytest.mark.parametrize(
    ("api_key", "version", "header"),
    [
        (ApiKey.API_VERSIONS, 0, 1),
        (ApiKey.API_VERSIONS, 2, 1),
        (ApiKey.API_VERSIONS, 3, 2),
        (ApiKey.API_VERSIONS, 4, 2),  # newer than the schema: still flexible
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0),
        (ApiKey.CONTROLLED_SHUTDOWN, 1, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 3, 2),
        (ApiKey.METADATA, 8, 1),
        (ApiKey.METADATA, 9, 2),
        (ApiKey.FETCH, 11, 1),
        (ApiKey.FETCH, 12, 2),
        (ApiKey.LEADER_AND_ISR, 3, 1),
        (ApiKey.LEADER_AND_ISR, 4, 2),
        (ApiKey.DESCRIBE_CLUSTER, 0, 2),
    ],
)
def test_request_header_version(api_key: ApiKey, version: int, header: int) -> None:
    assert request_header_version(api_key, version) == header


@pytest.mark.parametrize(
    ("api_key", "version", "header"),
    [
        (ApiKey.API_VERSIONS, 0, 0),
        (ApiKey.API_VERSIONS, 3, 0),  # always v0, so clients can read UNSUPPORTED_VERSION
        (ApiKey.METADATA, 8, 0),
        (ApiKey.METADATA, 9, 1),
        (ApiKey.UPDATE_METADATA, 5, 0),
        (ApiKey.UPDATE_METADATA, 6, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0),
    ],
)
def test_response_header_version(api_key: ApiKey, version: int, header: int) -> None:
    assert response_header_version(api_key, version) == header


@pytest.mark.parametrize("api_key", list(ApiKey))
def test_request_and_response_frames_round_trip_at_every_version(api_key: ApiKey) -> None:
    lo, hi = version_range(api_key)
    for version in range(lo, hi + 1):
        frame = encode_request(api_key, version, 1234, "client", {})
        assert frame_size(frame) == len(frame) - 4
        header, offset = decode_request_header(frame[4:])
        assert header["request_api_key"] == api_key
        assert header["request_api_version"] == version
        assert header["correlation_id"] == 1234
        assert header["client_id"] == (
            "" if request_header_version(api_key, version) == 0 else "client"
        )
        body = decode_request_body(api_key, version, frame[4:], offset)
        assert isinstance(body, dict)
        response = encode_response(api_key, version, 99, {})
        assert decode_response(api_key, version, response[4:])[0] == 99


def test_null_client_id() -> None:
    frame = encode_request(ApiKey.METADATA, 4, 1, None, {"topics": None})
    assert frame[12:14] == b"\xff\xff"
    assert decode_request_header(frame[4:])[0]["client_id"] is None
    # Any negative length of the nullable client id is null, as Kafka's RequestHeaderData
    # reads it, and the request is served; -2 was taken for an unreadable header.
    frame = struct.pack(">hhih", ApiKey.METADATA, 1, 7, -2) + struct.pack(">i", -1)
    header, offset = decode_request_header(frame)
    assert (header["client_id"], header["correlation_id"], offset) == (None, 7, 10)


def test_unknown_api_key_and_unsupported_version() -> None:
    with pytest.raises(DecodeError, match="unknown API key 99"):
        decode_request_header(b"\x00\x63\x00\x00\x00\x00\x00\x01\x00\x00")
    for short in (b"", b"\x00\x03", b"\x00\x03\x00"):  # no whole api key and version
        with pytest.raises(DecodeError, match="too short"):
            decode_request_header(short)
    # A version newer than ours still has a readable header, so the broker can answer.
    frame = b"\x00\x12\x00\x09\x00\x00\x00\x05\x00\x01c\x00" + b"\x00\x00"
    header, offset = decode_request_header(frame)
    assert header["request_api_version"] == 9
    assert header["correlation_id"] == 5
    with pytest.raises(UnsupportedVersionError, match="ApiVersionsRequest has no version 9"):
        decode_request_body(ApiKey.API_VERSIONS, 9, frame, offset)
    # So has a negative version (header v1, as Kafka's RequestHeader.parse reads it), for
    # ApiVersions' answer in v0; its body is no version's.
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, -1, 6, 1) + b"c"
    header, offset = decode_request_header(frame)
    assert (header["request_api_version"], header["correlation_id"]) == (-1, 6)
    assert (header["client_id"], offset) == ("c", len(frame))
    with pytest.raises(UnsupportedVersionError, match="ApiVersionsRequest has no version -1"):
        decode_request_body(ApiKey.API_VERSIONS, -1, frame, offset)
    with pytest.raises(UnsupportedVersionError):
        encode_request(ApiKey.METADATA, 13, 1, "c", {})
    with pytest.raises(KeyError):
        encode_request(99, 0, 1, "c", {})


def test_a_body_or_response_no_codec_can_read_is_a_decode_error() -> None:
    # A reader catches DecodeError for what it cannot read: an unknown key or a version
    # outside the schema must not escape as KeyError or UnsupportedVersionError there.
    with pytest.raises(DecodeError, match="unknown API key 99"):
        decode_request_body(99, 0, b"\x00\x00", 0)
    frame = encode_response(ApiKey.HEARTBEAT, 0, 3, {"error_code": 0})[4:]
    with pytest.raises(DecodeError, match="HeartbeatResponse has no version 99"):
        decode_response(ApiKey.HEARTBEAT, 99, frame)
    assert decode_response(ApiKey.HEARTBEAT, 0, frame) == (
        3,
        {"throttle_time_ms": 0, "error_code": 0},
    )


def test_trailing_bytes_are_malformed() -> None:
    frame = encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"group_id": "g"})[4:]
    _header, offset = decode_request_header(frame)
    with pytest.raises(DecodeError, match="unexpected bytes"):
        decode_request_body(ApiKey.HEARTBEAT, 0, frame + b"\x00", offset)


def test_api_versions_response_falls_back_to_v0() -> None:
    """A broker that does not know ApiVersions v3 answers in v0 with UNSUPPORTED_VERSION."""
    body = {
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}],
    }
    frame = encode_response(ApiKey.API_VERSIONS, 0, 4, body)
    correlation_id, decoded = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert correlation_id == 4
    assert decoded["error_code"] == 35
    assert decoded["api_keys"] == body["api_keys"]
    with pytest.raises(DecodeError):
        decode_response(ApiKey.METADATA, 9, frame[4:])


def test_frame_size_limits() -> None:
    assert frame_size(b"\x00\x00\x01\x00") == 256
    with pytest.raises(DecodeError):
        frame_size(b"\xff\xff\xff\xff")
    with pytest.raises(DecodeError):
        frame_size(b"\x00\x00\x01\x00", max_size=255)
    with pytest.raises(DecodeError):
        frame_size(b"\x00")
    # As Kafka's NetworkReceive: only a size above the maximum is refused.
    assert frame_size(b"\x00\x00\x01\x00", max_size=256) == 256
    assert frame_size(b"\x00\x00\x00\x00") == 0
    # The default is Kafka's socket.request.max.bytes default, 104857600.
    assert MAX_FRAME_SIZE == 104857600
    assert frame_size(struct.pack(">i", 104857600)) == 104857600
    with pytest.raises(DecodeError, match=r"outside 0\.\.104857600"):
        frame_size(struct.pack(">i", 104857601))


def test_an_encoded_body_goes_only_with_its_own_api_key_and_version() -> None:
    body = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    encoded = EncodedBody(ApiKey.HEARTBEAT, 1, request_codec(ApiKey.HEARTBEAT, 1).encode(body))
    frame = encode_request(ApiKey.HEARTBEAT, 1, 7, "c", encoded)
    assert frame == encode_request(ApiKey.HEARTBEAT, 1, 7, "c", body)
    with pytest.raises(ValueError, match="encoded for api key 12 v1 sent as api key 12 v2"):
        encode_request(ApiKey.HEARTBEAT, 2, 7, "c", encoded)
    with pytest.raises(ValueError, match="sent as api key 1 v1"):
        encode_request(ApiKey.FETCH, 1, 7, "c", encoded)


def test_encode_errors_carry_the_message_name() -> None:
    with pytest.raises(EncodeError, match=r"HeartbeatRequest v0: generation_id"):
        encode_request(ApiKey.HEARTBEAT, 0, 1, "c", {"generation_id": "x"})


def test_error_codes() -> None:
    expected = {
        "NONE": 0,
        "UNKNOWN_SERVER_ERROR": -1,
        "OFFSET_OUT_OF_RANGE": 1,
        "CORRUPT_MESSAGE": 2,
        "UNKNOWN_TOPIC_OR_PARTITION": 3,
        "LEADER_NOT_AVAILABLE": 5,
        "NOT_LEADER_OR_FOLLOWER": 6,
        "REQUEST_TIMED_OUT": 7,
        "STALE_CONTROLLER_EPOCH": 11,
        "NOT_ENOUGH_REPLICAS": 19,
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
        "UNSUPPORTED_VERSION": 35,
        "TOPIC_ALREADY_EXISTS": 36,
        "NOT_CONTROLLER": 41,
        "INVALID_REQUEST": 42,
        "KAFKA_STORAGE_ERROR": 56,
        "FENCED_LEADER_EPOCH": 74,
        "UNKNOWN_LEADER_EPOCH": 75,
        "STALE_BROKER_EPOCH": 77,
        "ELECTION_NOT_NEEDED": 84,
        "UNKNOWN_TOPIC_ID": 100,
        "INELIGIBLE_REPLICA": 107,
    }
    for name, code in expected.items():
        assert ErrorCode[name] == code
    codes = sorted(int(member) for member in ErrorCode)
    assert codes == list(range(-1, codes[-1] + 1))  # no gaps, no duplicates
    assert codes[-1] >= 100
    assert ErrorCode.of(-42) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.of(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_encode_error_paths() -> None:
    error = EncodeError("bad", ("isr",)).within("topic_states", "[3]")
    assert str(error) == "topic_states[3].isr: bad"
    assert error.path == ("topic_states", "[3]", "isr")


def test_a_client_id_that_is_not_utf8_is_read_with_replacement_characters() -> None:
    """Kafka reads the header's client id as Java's String does (bad bytes replaced) and
    serves the request; taken for an unreadable header, the connection was closed."""
    client_id = "caf\xe9".encode("latin-1")
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, 42, len(client_id)) + client_id
    header, offset = decode_request_header(frame)
    assert header["client_id"] == "caf\ufffd"
    assert header["correlation_id"] == 42
    assert offset == len(frame)
    # A header that is bad otherwise is still refused.
    with pytest.raises(DecodeError):
        decode_request_header(frame[:-2])
    # The flexible header (v2: no tagged fields here) reads it so too.
    flexible = struct.pack(">hhih", ApiKey.API_VERSIONS, 3, 43, len(client_id)) + client_id
    header, offset = decode_request_header(flexible + b"\x00")
    assert (header["client_id"], header["correlation_id"], offset) == (
        "caf\ufffd",
        43,
        len(flexible) + 1,
    )
