"""The ApiVersions handler's answers as Kafka 2.8's handleApiVersionsRequest gives them:
a v3+ request naming its client software other than
[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])? (ApiVersionsRequest.isValid) is
INVALID_REQUEST, with ApiVersionsRequest.getErrorResponse's body (the error and the
throttle time; no API keys). Through the socket server's request path, the wire codec
both ways."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from broker.apis import SUPPORTED
from broker.network import SocketServer
from tests.unit.test_fetch_session import LEADER, T0, make_leader
from wire.api import ApiKey
from wire.client import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request


def handled(frame: bytes) -> bytes | bytearray | None:
    """The socket server's answer to a request frame (without its size prefix)."""
    apis, _replicas, _zk = make_leader([T0], isr=(LEADER,))
    server = SocketServer("127.0.0.1", 0, lambda: apis)  # not started: _handle only
    try:
        return server._handle(bytearray(frame), ("127.0.0.1", 1))
    finally:
        server.stop()


def api_versions(version: int, name: str, software_version: str) -> dict[str, Any]:
    body = {"client_software_name": name, "client_software_version": software_version}
    response = handled(encode_request(ApiKey.API_VERSIONS, version, 9, "c", body)[4:])
    assert response is not None
    correlation_id, got = decode_response(ApiKey.API_VERSIONS, version, bytes(response[4:]))
    assert correlation_id == 9
    answer: dict[str, Any] = got
    return answer


@pytest.mark.parametrize(
    ("name", "software_version"),
    [
        ("my client", "1.0"),  # a space
        ("-leading-dash", "1.0"),
        ("trailing.", "1.0"),
        ("ok", "1.0_beta"),  # an underscore
        ("", "1.0"),
        ("ok", ""),
    ],
)
def test_a_v3_request_naming_its_software_badly_is_invalid_request(
    name: str, software_version: str
) -> None:
    got = api_versions(3, name, software_version)
    assert got["error_code"] == ErrorCode.INVALID_REQUEST
    assert (got["api_keys"], got["throttle_time_ms"]) == ([], 0)


@pytest.mark.parametrize(
    ("name", "software_version"),
    [
        ("confluent-kafka-python", "2.3.0-rdkafka-2.3.0"),  # librdkafka's, sanitized
        ("librdkafka", "2.16.0"),
        ("apache-kafka-java", "2.8.2"),
        (CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION),  # this project's wire client
        ("a", "1"),
    ],
)
def test_a_v3_request_naming_its_software_well_is_answered(
    name: str, software_version: str
) -> None:
    got = api_versions(3, name, software_version)
    assert got["error_code"] == ErrorCode.NONE
    assert {k["api_key"] for k in got["api_keys"]} >= {ApiKey.API_VERSIONS, ApiKey.PRODUCE}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_before_v3_there_is_no_software_to_check(version: int) -> None:
    got = api_versions(version, "", "")
    assert got["error_code"] == ErrorCode.NONE


def test_a_negative_version_is_answered_unsupported_in_v0() -> None:
    """Kafka 2.8 reads the header of any version (RequestHeader.parse) and answers an
    ApiVersions version it does not support, a negative one too, in v0 with its ranges
    (RequestContext.isUnsupportedApiVersionsRequest); the connection was closed."""
    response = handled(struct.pack(">hhih", ApiKey.API_VERSIONS, -1, 9, 1) + b"c")
    assert response is not None
    correlation_id, got = decode_response(ApiKey.API_VERSIONS, 0, bytes(response[4:]))
    assert (correlation_id, got["error_code"]) == (9, ErrorCode.UNSUPPORTED_VERSION)
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in got["api_keys"]}
    assert ranges == {int(k): (s.min_version, s.max_version) for k, s in SUPPORTED.items()}


def test_a_negative_version_of_another_api_closes_the_connection() -> None:
    # Kafka's RequestContext.parseRequest throws InvalidRequestException: it closes too.
    metadata = struct.pack(">hhih", ApiKey.METADATA, -1, 9, 1) + b"c" + struct.pack(">i", -1)
    assert handled(metadata) is None


def test_every_api_is_served_from_v0_as_kafka_2_8_and_the_readme_says_so() -> None:
    """Kafka 2.8 serves every API listed here from v0, and so does this broker (the
    README's list of what is not served named OffsetForLeaderEpoch v0-v1, OffsetCommit
    v0-v1 and OffsetFetch v0 until they were). A version past this broker's newest closes
    the connection (an OffsetCommit v9, in the schemas, past Kafka 2.8's v8)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    not_served = readme[readme.index("Not served (") :]
    not_served = " ".join(not_served[: not_served.index("\n\n")].split())
    assert "Every API served is served from v0" in not_served
    for key, supported in SUPPORTED.items():
        assert supported.min_version == 0, key.name
    assert SUPPORTED[ApiKey.OFFSET_COMMIT].max_version == 8
    offset_commit_v9 = struct.pack(">hhih", ApiKey.OFFSET_COMMIT, 9, 9, 1) + b"c"
    assert handled(offset_commit_v9) is None
