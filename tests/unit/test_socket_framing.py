"""The socket server's framing and request path, on loopback: a request's 4-byte size
against socket.request.max.bytes, a bad size or a truncated frame, an API or version we do
not serve (ApiVersions answered in v0 with UNSUPPORTED_VERSION and our ranges, as Kafka's
ApiVersionsRequest.getErrorResponse; anything else closed), a handler closing the connection
or giving no answer, and each bad connection closed while the others are served (Kafka 2.8's
SocketServer Processor and KafkaApis.handle)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from broker.apis import SUPPORTED, CloseConnection
from broker.network import SocketServer
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request

#: correlation ids that make Scripted's handler do something other than answer
CLOSE, SILENT, FAIL = 100, 101, 102


class Scripted:
    """ApiVersions v0..3 and Metadata v0..1 served; the handler answers ApiVersions, or
    closes the connection, answers nothing or fails, by the request's correlation id."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, str | None, str]] = []
        self.serving = True

    def supported(self, api_key: int, version: int) -> bool:
        if api_key == ApiKey.API_VERSIONS:
            return 0 <= version <= 3
        return api_key == ApiKey.METADATA and 0 <= version <= 1

    def handle(
        self,
        api_key: int,
        version: int,
        header: dict[str, Any],
        body: dict[str, Any],
        *,
        listener: str | None,
        client_host: str,
    ) -> dict[str, Any] | None:
        correlation_id = header["correlation_id"]
        self.calls.append((api_key, correlation_id, listener, client_host))
        if correlation_id == CLOSE:
            raise CloseConnection("asked to")
        if correlation_id == SILENT:
            return None
        if correlation_id == FAIL:
            raise RuntimeError("handler failed")
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}


def versions_request(correlation_id: int, version: int = 0) -> bytes:
    return encode_request(ApiKey.API_VERSIONS, version, correlation_id, "x", {})


def _read(c: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        try:
            more = c.recv(n - len(data))
        except ConnectionResetError:
            more = b""
        if not more:
            assert not data, "closed in the middle of an answer"
            return None
        data += more
    return data


def read_answer(c: socket.socket) -> bytes | None:
    """The next response frame (without its size), or None once the server closed."""
    prefix = _read(c, 4)
    if prefix is None:
        return None
    frame = _read(c, struct.unpack(">i", prefix)[0])
    assert frame is not None, "closed in the middle of an answer"
    return frame


def answered_id(c: socket.socket) -> int:
    frame = read_answer(c)
    assert frame is not None, "closed without an answer"
    return decode_response(ApiKey.API_VERSIONS, 0, frame)[0]


def header_v1(api_key: int, version: int, correlation_id: int) -> bytes:
    """A request header v1, by hand, so that any key and version can be sent."""
    return struct.pack(">hhih", api_key, version, correlation_id, 1) + b"x"


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def connect(s: SocketServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", s.port), timeout=10)


def still_serving(s: SocketServer, correlation_id: int = 9) -> None:
    with connect(s) as c:
        c.sendall(versions_request(correlation_id))
        assert answered_id(c) == correlation_id


def served(apis: Scripted, **kwargs: Any) -> Generator[SocketServer, None, None]:
    s = SocketServer(
        "127.0.0.1",
        0,
        lambda: apis if apis.serving else None,  # type: ignore[arg-type,return-value]
        **kwargs,
    )
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def apis() -> Scripted:
    return Scripted()


@pytest.fixture
def server(apis: Scripted) -> Iterator[SocketServer]:
    yield from served(apis, listener_name="INTERNAL")


def test_a_request_of_socket_request_max_bytes_is_served_and_one_byte_more_closed(
    apis: Scripted,
) -> None:
    """Kafka's NetworkReceive refuses a size above socket.request.max.bytes only: a
    request of exactly that size is read and answered."""
    size = len(versions_request(5)) - 4
    for s in served(apis, max_request_size=size):
        with connect(s) as c:
            c.sendall(versions_request(5))
            assert answered_id(c) == 5
    for s in served(apis, max_request_size=size - 1):
        with connect(s) as c:
            c.sendall(versions_request(5))
            assert read_answer(c) is None
        # The broker goes on with the next connection.
        s.max_request_size = size
        still_serving(s)


def test_a_negative_request_size_closes_that_connection_only(server: SocketServer) -> None:
    with connect(server) as other:
        with connect(server) as c:
            c.sendall(struct.pack(">i", -1) + versions_request(5))
            assert read_answer(c) is None
        other.sendall(versions_request(6))
        assert answered_id(other) == 6


def test_a_truncated_request_is_not_answered_and_the_broker_goes_on(
    server: SocketServer, apis: Scripted
) -> None:
    with connect(server) as c:
        c.sendall(versions_request(5)[:-1])
        c.shutdown(socket.SHUT_WR)
        assert read_answer(c) is None
    assert apis.calls == []
    still_serving(server)


def test_pipelined_requests_are_answered_in_order(server: SocketServer) -> None:
    with connect(server) as c:
        c.sendall(b"".join(versions_request(i) for i in (1, 2, 3)))
        assert [answered_id(c) for _ in range(3)] == [1, 2, 3]


def test_an_api_versions_version_not_served_is_answered_in_v0_with_our_ranges(
    server: SocketServer, apis: Scripted
) -> None:
    """ApiVersionsRequest.getErrorResponse: UNSUPPORTED_VERSION and the broker's ranges,
    in v0 (which every client reads), so the client retries a version it has."""
    with connect(server) as c:
        # A version newer than ours: header v2 (flexible), an empty tagged-field section.
        c.sendall(framed(header_v1(ApiKey.API_VERSIONS, 99, 8) + b"\x00"))
        frame = read_answer(c)
        assert frame is not None
        correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, frame)
        assert correlation_id == 8
        assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        assert {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]} == {
            int(k): (v.min_version, v.max_version) for k, v in SUPPORTED.items()
        }
        # The connection goes on: the client asks again in a version we serve.
        c.sendall(versions_request(9))
        assert answered_id(c) == 9
    assert apis.calls == [(ApiKey.API_VERSIONS, 9, "INTERNAL", "/127.0.0.1")]


@pytest.mark.parametrize(
    "request_bytes",
    [
        # A version of Metadata we do not serve, with a well-formed body
        encode_request(ApiKey.METADATA, 4, 5, "x", {"topics": None}),
        # An API key that is no API
        framed(header_v1(9999, 0, 5)),
        # Too short for a header
        framed(b"\x00\x03"),
    ],
    ids=["metadata-v4", "unknown-api-key", "no-header"],
)
def test_a_request_we_cannot_answer_closes_its_connection_unhandled(
    server: SocketServer, apis: Scripted, request_bytes: bytes
) -> None:
    with connect(server) as c:
        c.sendall(request_bytes)
        assert read_answer(c) is None
    assert apis.calls == []
    still_serving(server)


def test_a_broker_not_serving_yet_closes_the_connection(
    server: SocketServer, apis: Scripted
) -> None:
    apis.serving = False
    with connect(server) as c:
        c.sendall(versions_request(5))
        assert read_answer(c) is None
    apis.serving = True
    still_serving(server)


def test_a_handler_closing_the_connection_closes_it_unanswered(server: SocketServer) -> None:
    with connect(server) as c:
        c.sendall(versions_request(CLOSE))
        assert read_answer(c) is None
    still_serving(server)


def test_a_request_with_no_answer_leaves_the_connection_serving(server: SocketServer) -> None:
    """A handler with nothing to say (a Produce of acks=0) sends nothing; the next request
    on the connection is answered, and first."""
    with connect(server) as c:
        c.sendall(versions_request(SILENT) + versions_request(6))
        assert answered_id(c) == 6


def test_a_failure_no_error_response_can_carry_closes_the_connection(
    server: SocketServer, apis: Scripted
) -> None:
    """Metadata v0 of all topics has no field for an error: Kafka closes the connection
    where getErrorResponse gives nothing to send."""
    with connect(server) as c:
        c.sendall(encode_request(ApiKey.METADATA, 0, FAIL, "x", {"topics": []}))
        assert read_answer(c) is None
    assert [call[1] for call in apis.calls] == [FAIL]
    still_serving(server)


def test_the_handler_is_told_the_listener_and_the_clients_address(
    server: SocketServer, apis: Scripted
) -> None:
    still_serving(server, 5)
    assert apis.calls == [(ApiKey.API_VERSIONS, 5, "INTERNAL", "/127.0.0.1")]


def test_requests_handled_and_failed_are_counted(server: SocketServer) -> None:
    """The counts the broker's status shows (requests_handled)."""
    still_serving(server, 5)
    with connect(server) as c:
        c.sendall(versions_request(SILENT) + versions_request(6))
        assert answered_id(c) == 6
    with connect(server) as c:
        c.sendall(encode_request(ApiKey.METADATA, 1, FAIL, "x", {"topics": [{"name": "t"}]}))
        assert read_answer(c) is not None
    assert (server.requests_handled, server.requests_failed) == (4, 1)
    with connect(server) as c:
        # Metadata v1 whose topic array says 5 topics and gives none: malformed
        # (no field for the error in v1: closed)
        c.sendall(framed(header_v1(ApiKey.METADATA, 1, 7) + b"\x00\x00\x00\x05"))
        assert read_answer(c) is None
    assert (server.requests_handled, server.requests_failed) == (4, 2)


def test_stop_closes_the_open_connections(apis: Scripted) -> None:
    gen = served(apis)
    s = next(gen)
    with connect(s) as c:
        c.sendall(versions_request(5))
        assert answered_id(c) == 5
        closed = threading.Event()

        def wait_close() -> None:
            if c.recv(1) == b"":
                closed.set()

        t = threading.Thread(target=wait_close, daemon=True)
        t.start()
        gen.close()  # stops the server
        assert closed.wait(10)


def test_each_connection_is_set_up_as_kafkas_acceptor_does(
    server: SocketServer,
) -> None:
    """TCP_NODELAY and SO_KEEPALIVE on every accepted socket (Acceptor.accept)."""
    with connect(server) as c:
        c.sendall(versions_request(5))
        assert answered_id(c) == 5
        (conn,) = list(server._connections)
        assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert conn.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) != 0
