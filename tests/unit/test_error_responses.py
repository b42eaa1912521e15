"""A request that cannot be decoded, or whose handler fails, is answered with an error the
client can read, or its connection is closed: never with an error-free answer.

Kafka's AbstractRequest.getErrorResponse puts the error where the version has room for
it: the top-level error code, or each partition's, topic's or key's of the request (Fetch
v4-v6, Produce, ListOffsets, OffsetFetch v1, FindCoordinator v4...). A default response
whose only error field the version lacks went out error-free (the encoder drops an
ignorable field silently), or failed to encode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from broker.apis import SUPPORTED
from broker.error_responses import error_response
from broker.network import SocketServer
from tests.unit.test_wire_roundtrip import full_body
from wire.api import ApiKey, request_spec
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request, request_codec

ADVERTISED = [
    (ApiKey(key), version)
    for key, s in sorted(SUPPORTED.items())
    for version in range(s.min_version, s.max_version + 1)
]
IDS = [f"{key.name}-v{version}" for key, version in ADVERTISED]


class Failing:
    """Every API and version supported; every handler fails."""

    def supported(self, api_key: int, version: int) -> bool:
        return True

    def handle(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("handler failed")


@pytest.fixture(scope="module")
def server() -> Iterator[SocketServer]:
    s = SocketServer("127.0.0.1", 0, Failing)  # type: ignore[arg-type]
    yield s
    s.stop()


def errors_in(value: Any) -> list[int]:
    """Every non-zero error code of a decoded response (a field its version lacks decodes
    as its default, so an error the encoder dropped is not found)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "error_code" and item:
                found.append(item)
            found += errors_in(item)
    elif isinstance(value, list):
        for item in value:
            found += errors_in(item)
    return found


def answer(
    server: SocketServer, api_key: int, version: int, body: dict[str, Any], cut: int = 0
) -> dict[str, Any] | None:
    """The decoded response to a request (its last `cut` bytes cut off), or None if the
    connection is closed."""
    frame = bytearray(encode_request(api_key, version, 7, "c", body))[4:]
    if cut:
        frame = frame[:-cut]
    out = server._handle(frame, ("127.0.0.1", 1))
    if out is None:
        return None
    assert out, "no response at all"
    correlation_id, response = decode_response(api_key, version, bytes(out)[4:])
    assert correlation_id == 7
    return response


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED, ids=IDS)
def test_a_failed_handler_answers_an_error_for_every_advertised_version(
    server: SocketServer, api_key: ApiKey, version: int
) -> None:
    # A request naming things (two of each item): the answer says the error about them.
    full = full_body(request_spec(api_key).fields, version)
    response = answer(server, api_key, version, full)
    assert response is not None, "closed, though the response could carry the error"
    assert set(errors_in(response)) == {ErrorCode.UNKNOWN_SERVER_ERROR}
    # A request naming nothing: the error where there is room for it, or closed.
    response = answer(server, api_key, version, request_codec(api_key, version).new())
    assert response is None or errors_in(response), f"error-free answer {response}"


@pytest.mark.parametrize(("api_key", "version"), ADVERTISED, ids=IDS)
def test_a_request_that_does_not_decode_gets_an_error_or_a_close(
    server: SocketServer, api_key: ApiKey, version: int
) -> None:
    full = full_body(request_spec(api_key).fields, version)
    response = answer(server, api_key, version, full, cut=1)
    assert response is None or set(errors_in(response)) == {ErrorCode.INVALID_REQUEST}, (
        f"error-free answer {response}"
    )


def fetch(version: int) -> dict[str, Any]:
    partitions = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1} for p in (0, 3)]
    return {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "session_id": 12,
        "topics": [{"topic": "t", "partitions": partitions}],
    }


@pytest.mark.parametrize("version", [4, 6, 7, 12])
def test_fetch_errors_go_in_every_partition_and_the_top_level_where_there_is_one(
    server: SocketServer, version: int
) -> None:
    response = answer(server, ApiKey.FETCH, version, fetch(version))
    assert response is not None
    (topic,) = response["responses"]
    assert topic["topic"] == "t"
    assert [p["partition_index"] for p in topic["partitions"]] == [0, 3]
    for p in topic["partitions"]:
        assert p["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert p["high_watermark"] == -1
        assert p["records"] is not None  # empty, never null
        assert bytes(p["records"]) == b""
    if version >= 7:
        assert response["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert response["session_id"] == 12


def test_offset_fetch_v1_errors_go_in_every_partition(server: SocketServer) -> None:
    body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 2]}]}
    response = answer(server, ApiKey.OFFSET_FETCH, 1, body)
    assert response is not None
    assert response["topics"] == [
        {
            "name": "t",
            "partitions": [
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
                }
                for p in (0, 2)
            ],
        }
    ]
    # A request naming no topic has nothing to say it with: closed.
    assert answer(server, ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": []}) is None


def test_find_coordinator_v4_errors_go_in_every_key(server: SocketServer) -> None:
    response = answer(server, ApiKey.FIND_COORDINATOR, 4, {"coordinator_keys": ["a", "b"]})
    assert response is not None
    assert [(c["key"], c["error_code"]) for c in response["coordinators"]] == [
        ("a", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("b", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]
    # Undecodable: its keys are unknown, so there is no field for the error.
    assert answer(server, ApiKey.FIND_COORDINATOR, 4, {"coordinator_keys": ["a"]}, cut=1) is None


def test_metadata_errors_go_in_every_topic_asked_for(server: SocketServer) -> None:
    response = answer(server, ApiKey.METADATA, 9, {"topics": [{"name": "a"}, {"name": "b"}]})
    assert response is not None
    assert [(t["name"], t["error_code"], t["partitions"]) for t in response["topics"]] == [
        ("a", ErrorCode.UNKNOWN_SERVER_ERROR, []),
        ("b", ErrorCode.UNKNOWN_SERVER_ERROR, []),
    ]
    # All topics (Kafka answers an empty, error-free response): closed instead.
    assert answer(server, ApiKey.METADATA, 9, {"topics": None}) is None


def test_a_produce_wanting_no_answer_is_closed_on_a_failure() -> None:
    # ProduceRequest.getErrorResponse returns null for acks=0: Kafka closes the connection.
    topic = {"name": "t", "partition_data": [{"index": 0, "records": b""}]}
    request = {"acks": 0, "timeout_ms": 1, "topic_data": [topic]}
    assert error_response(ApiKey.PRODUCE, 8, ErrorCode.UNKNOWN_SERVER_ERROR, request) is None
    request["acks"] = 1
    response = error_response(ApiKey.PRODUCE, 8, ErrorCode.UNKNOWN_SERVER_ERROR, request)
    assert response is not None
    (partition,) = response["responses"][0]["partition_responses"]
    assert (partition["index"], partition["error_code"], partition["base_offset"]) == (
        0,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        -1,
    )
