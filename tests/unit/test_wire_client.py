"""KafkaConnection and version negotiation against an in-process fake broker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cluster import ports
from wire.api import VERSION_RANGES, ApiKey
from wire.client import KafkaConnection, KafkaConnectionError, negotiate_versions
from wire.errors import EncodeError, ErrorCode
from wire.protocol import (
    EncodedBody,
    decode_request_body,
    decode_request_header,
    encode_response,
    frame_size,
    request_codec,
)

# A handler gets (header, body) and returns a response frame, or None to hang up.
Handler = Callable[[dict[str, Any], dict[str, Any] | None], bytes | None]


def read_exactly(conn: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class FakeBroker:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            while True:
                prefix = read_exactly(conn, 4)
                if prefix is None:
                    return
                frame = read_exactly(conn, frame_size(prefix))
                if frame is None:
                    return
                header, offset = decode_request_header(frame)
                key, version = header["request_api_key"], header["request_api_version"]
                try:
                    body: dict[str, Any] | None = decode_request_body(key, version, frame, offset)
                except Exception:
                    body = None  # e.g. a version this broker "does not support"
                self.requests.append((header, body))
                response = self.handler(header, body)
                if response is None:
                    return
                conn.sendall(response)

    def close(self) -> None:
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept()
        except OSError:
            pass
        self.server.close()
        self.thread.join(timeout=5)


@pytest.fixture
def broker_factory() -> Iterator[Callable[[Handler], FakeBroker]]:
    brokers: list[FakeBroker] = []

    def make(handler: Handler) -> FakeBroker:
        broker = FakeBroker(handler)
        brokers.append(broker)
        return broker

    yield make
    for broker in brokers:
        broker.close()


def kafka_like(ranges: dict[int, tuple[int, int]]) -> Handler:
    """Answers ApiVersions like Kafka (v0 UNSUPPORTED_VERSION above its range) and Metadata."""

    def handle(header: dict[str, Any], body: dict[str, Any] | None) -> bytes:
        key, version = header["request_api_key"], header["request_api_version"]
        cid = header["correlation_id"]
        if key == ApiKey.API_VERSIONS:
            lo, hi = ranges[ApiKey.API_VERSIONS]
            listed = [
                {"api_key": k, "min_version": a, "max_version": b} for k, (a, b) in ranges.items()
            ]
            if version > hi:
                error = {
                    "error_code": ErrorCode.UNSUPPORTED_VERSION,
                    "api_keys": [{"api_key": 18, "min_version": lo, "max_version": hi}],
                }
                return encode_response(key, 0, cid, error)
            return encode_response(key, version, cid, {"error_code": 0, "api_keys": listed})
        assert key == ApiKey.METADATA
        assert body is not None
        reply = {
            "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
            "controller_id": 1,
            "topics": [{"name": t["name"], "error_code": 3} for t in body["topics"] or []],
        }
        return encode_response(key, version, cid, reply)

    return handle


def test_requests_and_correlation_ids(broker_factory: Callable[[Handler], FakeBroker]) -> None:
    broker = broker_factory(kafka_like({18: (0, 3), 3: (0, 12)}))
    with KafkaConnection("127.0.0.1", broker.port, client_id="tester", timeout_s=5) as conn:
        for version in (1, 9, 12):
            response = conn.request(ApiKey.METADATA, version, {"topics": [{"name": "a"}]})
            assert response["brokers"][0]["host"] == "localhost"
            assert response["topics"][0]["name"] == "a"
            assert response["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(EncodeError):
            conn.request(ApiKey.METADATA, 9, {"topics": 5})
        conn.request(ApiKey.METADATA, 9, {"topics": None})  # still usable after EncodeError
    assert conn.closed
    ids = [header["correlation_id"] for header, _ in broker.requests]
    assert len(ids) == 4
    assert len(set(ids)) == 4
    assert {header["client_id"] for header, _ in broker.requests} == {"tester"}
    with pytest.raises(KafkaConnectionError, match="closed"):
        conn.request(ApiKey.METADATA, 9, {})


def test_negotiate_versions(broker_factory: Callable[[Handler], FakeBroker]) -> None:
    ranges = {18: (0, 3), 3: (0, 9), 4: (0, 4), 1000: (0, 1)}
    broker = broker_factory(kafka_like(ranges))
    with KafkaConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        versions = negotiate_versions(conn)
    assert versions == {ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 9, ApiKey.LEADER_AND_ISR: 4}
    header, body = broker.requests[0]
    assert header["request_api_version"] == 3
    assert body == {"client_software_name": "zkctl-wire", "client_software_version": "0.1.0"}


def test_negotiate_falls_back_when_broker_lacks_our_api_versions_version(
    broker_factory: Callable[[Handler], FakeBroker],
) -> None:
    broker = broker_factory(kafka_like({18: (0, 2), 3: (4, 20), 0: (9, 9)}))
    ours = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12), ApiKey.PRODUCE: (0, 8)}
    with KafkaConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        versions = negotiate_versions(conn, ours)
    assert versions == {ApiKey.API_VERSIONS: 2, ApiKey.METADATA: 12}
    assert [h["request_api_version"] for h, _ in broker.requests] == [3, 2]
    assert VERSION_RANGES[ApiKey.API_VERSIONS] == (0, 3)


def test_correlation_id_mismatch_closes(broker_factory: Callable[[Handler], FakeBroker]) -> None:
    def wrong_id(header: dict[str, Any], body: dict[str, Any] | None) -> bytes:
        return encode_response(ApiKey.METADATA, 9, header["correlation_id"] + 1, {})

    broker = broker_factory(wrong_id)
    conn = KafkaConnection("127.0.0.1", broker.port, timeout_s=5)
    with pytest.raises(KafkaConnectionError, match="correlation id 2, expected 1"):
        conn.request(ApiKey.METADATA, 9, {})
    assert conn.closed


def test_eof_raises(broker_factory: Callable[[Handler], FakeBroker]) -> None:
    broker = broker_factory(lambda header, body: None)
    with KafkaConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        with pytest.raises(KafkaConnectionError, match="closed the connection") as info:
            conn.request(ApiKey.METADATA, 9, {})
        assert isinstance(info.value, ConnectionError)
        assert conn.closed


def test_timeout_raises(broker_factory: Callable[[Handler], FakeBroker]) -> None:
    release = threading.Event()

    def hang(header: dict[str, Any], body: dict[str, Any] | None) -> bytes | None:
        release.wait(10)
        return None

    broker = broker_factory(hang)
    try:
        with KafkaConnection("127.0.0.1", broker.port, timeout_s=0.2) as conn:
            with pytest.raises(KafkaConnectionError, match=r"no response .* within 0.2s"):
                conn.request(ApiKey.METADATA, 9, {})
            assert conn.closed
    finally:
        release.set()


def test_garbage_response_raises(broker_factory: Callable[[Handler], FakeBroker]) -> None:
    def garbage(header: dict[str, Any], body: dict[str, Any] | None) -> bytes:
        cid = int(header["correlation_id"])
        return b"\x00\x00\x00\x06" + cid.to_bytes(4, "big") + b"\x00\x7f"

    broker = broker_factory(garbage)
    conn = KafkaConnection("127.0.0.1", broker.port, timeout_s=5)
    with pytest.raises(KafkaConnectionError, match="bad response"):
        conn.request(ApiKey.METADATA, 9, {})
    assert conn.closed


def closed_port() -> int:
    """A port nothing listens on, from below the kernel's ephemeral range. One the kernel
    picked (a closed server's) may be picked again as the connection's own local port:
    a TCP connection to itself, which "connects" (about once in 28,000 tries)."""
    [port] = ports.free_ports(1, "127.0.0.1")
    return port


def test_connect_failure() -> None:
    port = closed_port()
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        KafkaConnection("127.0.0.1", port, timeout_s=1)


@pytest.mark.parametrize("host", ["a..b", "a" * 64 + ".com", "\udcff"])
def test_a_host_the_resolver_cannot_be_asked_about_is_a_connect_failure(host: str) -> None:
    """socket's IDNA encoding of the host raises UnicodeError, not OSError: a broker
    registered under such a host is one that cannot be reached, for every caller."""
    with pytest.raises(KafkaConnectionError, match=r"cannot connect to .* is not a host name"):
        KafkaConnection(host, 9092, timeout_s=1)


def test_produce_with_acks_0_expects_no_response(
    broker_factory: Callable[[Handler], FakeBroker],
) -> None:
    def no_reply_to_acks_0(header: dict[str, Any], body: dict[str, Any] | None) -> bytes:
        assert body is not None
        assert body["acks"] == 0
        return b""  # Kafka sends nothing back

    broker = broker_factory(no_reply_to_acks_0)
    produce = {"acks": 0, "timeout_ms": 100, "topic_data": []}
    with KafkaConnection("127.0.0.1", broker.port, timeout_s=0.5) as conn:
        assert conn.request(ApiKey.PRODUCE, 9, produce) == {}
        assert conn.request(ApiKey.PRODUCE, 9, produce) == {}
        deadline = time.monotonic() + 5
        while len(broker.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(broker.requests) == 2


def test_a_pre_encoded_body_is_sent_as_it_is(
    broker_factory: Callable[[Handler], FakeBroker],
) -> None:
    broker = broker_factory(kafka_like({18: (0, 3), 3: (0, 12)}))
    body = {"topics": [{"name": "a"}]}
    encoded = EncodedBody(ApiKey.METADATA, 9, request_codec(ApiKey.METADATA, 9).encode(body))
    produce = request_codec(ApiKey.PRODUCE, 9).encode(
        {"acks": 0, "timeout_ms": 1, "topic_data": []}
    )
    with KafkaConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        response = conn.request(ApiKey.METADATA, 9, encoded)
        assert response["topics"][0]["name"] == "a"
        with pytest.raises(ValueError, match="encoded for api key"):
            conn.request(ApiKey.METADATA, 8, encoded)
        with pytest.raises(ValueError, match="Produce"):  # its acks decide if an answer comes
            conn.request(ApiKey.PRODUCE, 9, EncodedBody(ApiKey.PRODUCE, 9, produce))
        assert conn.request(ApiKey.METADATA, 9, body) == response  # still usable
    assert len(broker.requests) == 2  # the refused ones never reached the wire
    for _, got in broker.requests:
        assert got is not None
        assert [t["name"] for t in got["topics"]] == ["a"]


def _rcvbuf_given(size: int) -> int:
    """SO_RCVBUF as the system reports it once ``size`` is asked (Linux doubles it)."""
    with socket.socket() as scratch:
        scratch.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
        return scratch.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def test_a_receive_buffer_size_is_the_connections_and_minus_1_the_systems() -> None:
    """Kafka's Selector.connect sets the socket's receive buffer before connecting
    (the size its TCP window scale is agreed for) unless it is -1, the OS default."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.socket() as plain:
            default = plain.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        size = 6000 if _rcvbuf_given(6000) != default else 9000
        with KafkaConnection("127.0.0.1", port, receive_buffer_bytes=size) as conn:
            assert conn._sock is not None
            assert conn._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == _rcvbuf_given(size)
        with KafkaConnection("127.0.0.1", port, receive_buffer_bytes=-1) as conn:
            assert conn._sock is not None
            assert conn._sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == default


def test_a_connection_with_a_receive_buffer_size_fails_as_any_other_to_a_closed_port() -> None:
    port = closed_port()
    with pytest.raises(KafkaConnectionError, match=f"cannot connect to 127.0.0.1:{port}"):
        KafkaConnection("127.0.0.1", port, receive_buffer_bytes=8192, timeout_s=5)
