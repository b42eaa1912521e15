"""A small blocking Kafka client connection: one request in flight at a time.

Used by the controller's channel to each broker, the CLI and tests:

    with KafkaConnection("localhost", 9092, client_id="zkctl", timeout_s=5) as conn:
        versions = negotiate_versions(conn)
        metadata = conn.request(ApiKey.METADATA, versions[ApiKey.METADATA], {"topics": None})

Any socket failure, EOF, timeout or correlation id mismatch raises KafkaConnectionError
(a ConnectionError) and closes the connection, since its byte stream can no longer be
trusted to line up with requests; so does a host that cannot be looked up, "a..b" too.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final

from wire.api import VERSION_RANGES, ApiKey
from wire.codec import Body
from wire.errors import DecodeError, ErrorCode
from wire.protocol import (
    MAX_FRAME_SIZE,
    EncodedBody,
    decode_response,
    encode_request,
    frame_size,
)

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "KafkaConnection",
    "KafkaConnectionError",
    "negotiate_versions",
]

# Sent in ApiVersionsRequest v3+; brokers require [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
CLIENT_SOFTWARE_NAME: Final = "zkctl-wire"
CLIENT_SOFTWARE_VERSION: Final = "0.1.0"


class KafkaConnectionError(ConnectionError):
    """The connection failed, timed out, was closed, or lost sync with its peer."""


def _connect(host: str, port: int, timeout_s: float, receive_buffer_bytes: int) -> socket.socket:
    """socket.create_connection, with SO_RCVBUF set before connecting when asked: the
    window scale a connection agrees on is fixed by the buffer it has then."""
    if receive_buffer_bytes == -1:
        return socket.create_connection((host, port), timeout=timeout_s)
    error: OSError | None = None
    for family, kind, proto, _name, address in socket.getaddrinfo(
        host, port, 0, socket.SOCK_STREAM
    ):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            sock.settimeout(timeout_s)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        return sock
    raise error or OSError(f"getaddrinfo returned no address for {host}")


class KafkaConnection:
    """A blocking connection to one Kafka broker."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "zkctl",
        timeout_s: float = 30.0,
        max_response_size: int = MAX_FRAME_SIZE,
        connect_timeout_s: float | None = None,
        receive_buffer_bytes: int = -1,
    ) -> None:
        """``timeout_s`` bounds each wait for an answer, ``connect_timeout_s`` (by default
        ``timeout_s``) the connection's. ``receive_buffer_bytes``: the socket's SO_RCVBUF,
        set before it connects, as Kafka's Selector sets it (-1: the system's)."""
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.max_response_size = max_response_size
        self._lock = threading.Lock()
        # Orders abort() (any thread, without _lock) and closing the socket: a shutdown
        # after its close could otherwise reach another socket given the same descriptor.
        self._closing = threading.Lock()
        self._correlation_ids = itertools.count(1)
        try:
            self._sock: socket.socket | None = _connect(
                host,
                port,
                timeout_s if connect_timeout_s is None else connect_timeout_s,
                receive_buffer_bytes,
            )
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {exc}") from exc
        except UnicodeError as exc:
            # The host's IDNA encoding failed ("a..b", a label over 63 characters): a host
            # that cannot be reached, like one DNS does not know, for every caller.
            reason = exc.__cause__ or exc
            raise KafkaConnectionError(
                f"cannot connect to {host}:{port}: {host!r} is not a host name ({reason})"
            ) from exc
        self._sock.settimeout(timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __repr__(self) -> str:
        state = "open" if self._sock is not None else "closed"
        return f"<KafkaConnection {self.host}:{self.port} {state}>"

    @property
    def closed(self) -> bool:
        return self._sock is None

    def request(
        self,
        api_key: int,
        api_version: int,
        body: Mapping[str, Any] | EncodedBody,
        *,
        while_waiting: Callable[[], None] | None = None,
    ) -> Body:
        """Send one request and return its decoded response body.

        A Produce request with acks=0 gets no response in Kafka; for it this returns {}
        once the request is sent. EncodeError/UnsupportedVersionError if the request
        cannot be encoded (the connection stays usable); KafkaConnectionError for anything
        that breaks the connection, including a response that does not decode.
        ``while_waiting`` is called once the request is sent, before the response is read
        (the caller's work overlaps the server's); it must not raise."""
        if isinstance(body, EncodedBody) and api_key == ApiKey.PRODUCE:
            # Its acks decide whether an answer comes: the body must be readable here.
            raise ValueError("a Produce request body cannot be sent pre-encoded")
        with self._lock:
            sock = self._sock
            if sock is None:
                raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed")
            correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
            frame = encode_request(api_key, api_version, correlation_id, self.client_id, body)
            try:
                return self._exchange(
                    sock, frame, api_key, api_version, correlation_id, body, while_waiting
                )
            except TimeoutError as exc:
                self._close_locked()
                raise KafkaConnectionError(
                    f"no response from {self.host}:{self.port} within {self.timeout_s}s "
                    f"(api key {api_key} v{api_version})"
                ) from exc
            except DecodeError as exc:
                self._close_locked()
                raise KafkaConnectionError(
                    f"bad response from {self.host}:{self.port}: {exc}"
                ) from exc
            except KafkaConnectionError:
                self._close_locked()
                raise
            except OSError as exc:
                self._close_locked()
                raise KafkaConnectionError(
                    f"connection to {self.host}:{self.port} failed: {exc}"
                ) from exc

    def _exchange(
        self,
        sock: socket.socket,
        frame: bytes,
        api_key: int,
        api_version: int,
        correlation_id: int,
        body: Mapping[str, Any] | EncodedBody,
        while_waiting: Callable[[], None] | None = None,
    ) -> Body:
        sock.sendall(frame)
        if api_key == ApiKey.PRODUCE and isinstance(body, Mapping) and body.get("acks") == 0:
            return {}
        if while_waiting is not None:
            while_waiting()
        prefix = self._read_exactly(sock, 4)
        response = self._read_exactly(sock, frame_size(prefix, self.max_response_size))
        if len(response) < 4:
            raise DecodeError(f"response of {len(response)} bytes has no header")
        got = int.from_bytes(response[:4], "big", signed=True)
        if got != correlation_id:
            raise KafkaConnectionError(
                f"{self.host}:{self.port} answered correlation id {got}, expected {correlation_id}"
            )
        _, body = decode_response(api_key, api_version, response)
        return body

    def _read_exactly(self, sock: socket.socket, size: int) -> bytearray:
        """`size` bytes, in the buffer they were received in: a fetch response's records
        are decoded as views into it, not copied again."""
        buf = bytearray(size)
        view = memoryview(buf)
        got = 0
        while got < size:
            n = sock.recv_into(view[got:], size - got)
            if n == 0:
                raise KafkaConnectionError(
                    f"{self.host}:{self.port} closed the connection ({got} of {size} bytes read)"
                )
            got += n
        return buf

    def _close_locked(self) -> None:
        with self._closing:
            sock, self._sock = self._sock, None
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass

    def abort(self) -> None:
        """End the connection from any thread, a request in flight on it too: that
        request raises KafkaConnectionError at once rather than waiting for its answer
        (close() waits for it, holding the connection's lock)."""
        with self._closing:
            sock = self._sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # not connected any more

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def negotiate_versions(
    conn: KafkaConnection, ours: Mapping[ApiKey, tuple[int, int]] | None = None
) -> dict[ApiKey, int]:
    """The highest version of each API that both the broker and we support.

    Asks with ApiVersions at our highest version; a broker that does not know it answers
    UNSUPPORTED_VERSION with its own ApiVersions range, and we ask again at the highest
    version we share (KIP-511). APIs the broker lacks, or with no common version, are left
    out. `ours` defaults to every API's range in the schemas."""
    ours = VERSION_RANGES if ours is None else ours
    lo, hi = ours.get(ApiKey.API_VERSIONS, VERSION_RANGES[ApiKey.API_VERSIONS])
    response = conn.request(ApiKey.API_VERSIONS, hi, _api_versions_body())
    if response["error_code"] == ErrorCode.UNSUPPORTED_VERSION:
        theirs = _ranges(response)
        if ApiKey.API_VERSIONS not in theirs:
            raise KafkaConnectionError("broker rejected ApiVersions without listing its range")
        their_lo, their_hi = theirs[ApiKey.API_VERSIONS]
        version = min(hi, their_hi)
        if version < max(lo, their_lo):
            raise KafkaConnectionError(
                f"no common ApiVersions version: ours {lo}-{hi}, broker's {their_lo}-{their_hi}"
            )
        response = conn.request(ApiKey.API_VERSIONS, version, _api_versions_body())
    if response["error_code"] != ErrorCode.NONE:
        raise KafkaConnectionError(
            f"ApiVersions failed: {ErrorCode.of(response['error_code']).name}"
        )
    theirs = _ranges(response)
    chosen: dict[ApiKey, int] = {}
    for key, (our_lo, our_hi) in ours.items():
        if key in theirs:
            their_lo, their_hi = theirs[key]
            version = min(our_hi, their_hi)
            if version >= max(our_lo, their_lo):
                chosen[ApiKey(key)] = version
    return chosen


def _api_versions_body() -> Body:
    return {
        "client_software_name": CLIENT_SOFTWARE_NAME,
        "client_software_version": CLIENT_SOFTWARE_VERSION,
    }


def _ranges(response: Body) -> dict[int, tuple[int, int]]:
    return {
        int(item["api_key"]): (int(item["min_version"]), int(item["max_version"]))
        for item in response["api_keys"]
    }
