"""The broker's socket server: Kafka frames in, responses out, one thread per connection.

A connection's requests are handled one at a time and answered in order, as Kafka does
(it mutes a connection while a request is in flight). Bad input never takes the broker
down: a request whose header we can read but whose body is malformed gets the API's
error response (INVALID_REQUEST) where its version has a top-level error code, and is
closed otherwise (Kafka closes on any request it cannot parse); a request whose handler
fails gets the API's error response for it (broker/error_responses.py), or is closed
where that response could carry no error; an ApiVersions request of a version we do not
know gets UNSUPPORTED_VERSION in v0 form, so the client can retry lower; an unknown API
key, a version outside the schemas, an oversized or truncated frame closes that one
connection (there is no way to answer it in the protocol), and every other connection
goes on.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from broker.apis import CloseConnection, KafkaApis, api_versions_response
from broker.connection_quotas import (
    ConnectionQuotas,
    IpAddress,
    QuotaStopped,
    TooManyConnections,
    ip_of,
)
from broker.error_responses import error_response
from wire.api import ApiKey
from wire.errors import DecodeError, ErrorCode, UnsupportedVersionError
from wire.protocol import decode_request_header, encode_response_frame, request_codec

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")

#: the last-used time of a connection close_lru is closing
_CLOSING: Final = float("inf")

#: The longest socket wait CPython keeps exactly: it hands poll() a C int of milliseconds,
#: so a longer timeout wraps (2**32 ms became 0) or raises OverflowError.
MAX_SOCKET_WAIT_S: Final = (2**31 - 1) / 1000


def idle_wait_left(idle_s: float | None, waited_s: float) -> float | None:
    """How long a connection idle for ``waited_s`` may wait on for its peer: None without
    an idle limit, 0 once idle for the limit (close it), at most one socket wait."""
    if idle_s is None:
        return None
    return min(max(idle_s - waited_s, 0.0), MAX_SOCKET_WAIT_S)


class _Closed(Exception):
    pass


class BindError(ValueError):
    """A listener's address cannot be bound (in use, not local, not permitted)."""


def is_wildcard(host: str) -> bool:
    """Whether a listener's host means every interface: none, or an unspecified address
    ("::", "0.0.0.0"), all of which Kafka's JVM binds as its dual-stack wildcard."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def buffer_size_problem(key: str, size: int) -> str | None:
    """What is wrong with a socket buffer size: a positive size, or -1 for the OS's."""
    if size > 0 or size == -1:
        return None
    return f"{key}={size}: a buffer size must be above 0, or -1 for the OS default"


def _listen(
    address: tuple[str, int], family: socket.AddressFamily, *, dualstack: bool, rcvbuf: int
) -> socket.socket:
    """socket.create_server, with SO_RCVBUF set before binding: the size a connection's
    window scale is agreed for, which its socket inherits (Kafka sets it there too)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dualstack else 1)
        if rcvbuf != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.bind(address)
        sock.listen()
    except BaseException:
        sock.close()
        raise
    return sock


def _bind(host: str, port: int, rcvbuf: int = -1) -> socket.socket:
    """The listening socket: of the host's address family (an IPv6 listener,
    ``PLAINTEXT://[::1]:9092``, binds IPv6); for every interface ("", "::", "0.0.0.0"),
    IPv4 and IPv6 where the system can, as Kafka's (a java.nio channel binds an AF_INET6
    socket with IPV6_V6ONLY off, and 0.0.0.0 as the IPv6 wildcard). ``rcvbuf``: its
    SO_RCVBUF, -1 the OS default."""
    if is_wildcard(host):
        if socket.has_dualstack_ipv6():
            return _listen(("", port), socket.AF_INET6, dualstack=True, rcvbuf=rcvbuf)
        return _listen(("0.0.0.0", port), socket.AF_INET, dualstack=False, rcvbuf=rcvbuf)
    family, *_ = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    return _listen((host, port), family, dualstack=False, rcvbuf=rcvbuf)


class _Conn(Protocol):
    def recv_into(self, buffer: memoryview, nbytes: int, /) -> int: ...
    def send(self, data: memoryview, /) -> int: ...


class _LongIdleConn:
    """A connection whose idle limit is longer than one socket wait (about 24.8 days):
    a wait that times out goes on, in steps of at most one socket wait, until the peer has
    been silent for the whole limit (Kafka keeps connections.max.idle.ms as a long)."""

    def __init__(self, sock: socket.socket, idle_s: float) -> None:
        self._sock = sock
        self._idle_s = idle_s

    def recv_into(self, buffer: memoryview, nbytes: int, /) -> int:
        return self._wait(lambda: self._sock.recv_into(buffer, nbytes))

    def send(self, data: memoryview, /) -> int:
        return self._wait(lambda: self._sock.send(data))

    def _wait(self, op: Callable[[], int]) -> int:
        started = time.monotonic()
        shortened = False
        try:
            while True:
                try:
                    return op()
                except TimeoutError:
                    left = idle_wait_left(self._idle_s, time.monotonic() - started)
                    if not left:
                        raise
                    self._sock.settimeout(left)
                    shortened = True
        finally:
            if shortened:
                self._sock.settimeout(MAX_SOCKET_WAIT_S)


def _read_exactly(sock: _Conn, n: int) -> bytearray:
    """Exactly n bytes, in a bytearray: a producer's records (a view into it) then get
    their offsets assigned in place, without a copy."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if r == 0:
            raise _Closed("peer closed the connection" if got == 0 else "truncated frame")
        got += r
    return buf


def _send_all(sock: _Conn, data: bytes | bytearray) -> None:
    """``sock.sendall``, but the socket's timeout (connections.max.idle.ms) bounds each wait
    for the peer to take more, not the whole answer: sendall's timeout covers all of it, so
    a large answer read steadily by a slow client was cut off as idle. Kafka's idle expiry
    closes only a connection with no read or write for that long."""
    view = memoryview(data)
    sent = 0
    while sent < len(view):
        sent += sock.send(view[sent:])


def client_address(addr: Any) -> str:
    """A client's address as Kafka's request context gives it to JoinGroup (Java's
    InetAddress.toString() of the socket's address, shown by kafka-consumer-groups.sh):
    "/127.0.0.1"; an IPv4 client of a dual-stack listener (::ffff:127.0.0.1) as its IPv4
    address, as Java makes it; IPv6 in Java's uncompressed form ("/0:0:0:0:0:0:0:1"), with
    its scope ("%eth0") where it has one."""
    if not isinstance(addr, tuple) or not addr:
        return ""
    host = str(addr[0])
    bare, percent, scope = host.partition("%")
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        return f"/{host}"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return f"/{ip.ipv4_mapped}"
        groups = (f"{int.from_bytes(ip.packed[i : i + 2], 'big'):x}" for i in range(0, 16, 2))
        return "/" + ":".join(groups) + percent + scope
    return f"/{ip}"


class SocketServer:
    def __init__(
        self,
        host: str,
        port: int,
        apis: Callable[[], KafkaApis | None],
        *,
        max_request_size: int = 100 * 1024 * 1024,
        listener_name: str | None = None,
        connections_max_idle_ms: int = 10 * 60 * 1000,
        socket_send_buffer_bytes: int = -1,
        socket_receive_buffer_bytes: int = -1,
        quotas: ConnectionQuotas | None = None,
    ) -> None:
        self.apis = apis
        #: max.connections and max.connections.per.ip, shared with the broker's other
        #: listeners (None: no limits)
        self.quotas = quotas
        where = f"{listener_name}://{host}:{port}" if listener_name else f"{host}:{port}"
        # Kafka's listener fails to start with such a receive size, and its acceptor
        # fails every connection with such a send size: refused here, both.
        for key, size in (
            ("socket.send.buffer.bytes", socket_send_buffer_bytes),
            ("socket.receive.buffer.bytes", socket_receive_buffer_bytes),
        ):
            problem = buffer_size_problem(key, size)
            if problem is not None:
                raise BindError(f"socket server failed to bind to {where}: {problem}")
        #: SO_SNDBUF of each connection (-1: the OS default), as Kafka's Acceptor sets it
        self.socket_send_buffer_bytes = socket_send_buffer_bytes
        # A connection with nothing read or written for this long is closed (Kafka's
        # connections.max.idle.ms): a client gone without a FIN (a host lost, a cable
        # pulled) would otherwise hold its thread and socket for good.
        # Negative: never (Kafka's Selector keeps no idle expiry then). Above one socket
        # wait, a connection waits in steps (_LongIdleConn).
        self.connections_max_idle_s: float | None = (
            None if connections_max_idle_ms < 0 else max(connections_max_idle_ms, 1) / 1000
        )
        #: each socket wait's timeout
        self._socket_timeout_s = idle_wait_left(self.connections_max_idle_s, 0.0)
        #: which listener this serves: Metadata answers with that listener's addresses
        self.listener_name = listener_name
        self.max_request_size = max_request_size
        try:
            self._listener = _bind(host, port, socket_receive_buffer_bytes)
        except OSError as e:
            raise BindError(f"socket server failed to bind to {where}: {e.strerror}") from e
        except UnicodeError as e:  # the IDNA codec's: a host such as "a..b" is no name
            problem = f"{host!r} is not a host name ({e.__cause__ or e})"
            raise BindError(f"socket server failed to bind to {where}: {problem}") from e
        self._listener.settimeout(0.5)
        #: the bound address (host as bound: "::", or "0.0.0.0" without IPv6, for every
        #: interface)
        self.host: str = self._listener.getsockname()[0]
        self.port: int = self._listener.getsockname()[1]
        self._stopped = threading.Event()
        self._accepting = threading.Event()
        #: open connections, each with when it was accepted or last read a request
        #: (time.monotonic()): the least recently used is closed first (close_lru)
        self._connections: dict[socket.socket, float] = {}
        #: the address each connection is counted under in ``quotas``
        self._counted_ip: dict[socket.socket, IpAddress] = {}
        self._lock = threading.Lock()
        if quotas is not None:
            quotas.register_closer(listener_name or "", self.close_lru)
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"socket-acceptor-{listener_name}", daemon=True
        )
        self.requests_handled = 0
        self.requests_failed = 0

    def start(self) -> None:
        self._accepting.set()
        self._accept_thread.start()

    def stop(self) -> None:
        """Stop accepting and close every connection (in-flight requests are cut off)."""
        self._stopped.set()
        try:
            self._listener.close()
        except OSError:
            pass
        # The acceptor may be waiting in accept() on the listener (up to its 0.5 s
        # timeout), which keeps the port listening: wait for it, so that the port is
        # closed when stop() returns (Kafka's awaitShutdown of its Acceptor).
        if self._accept_thread.is_alive() and self._accept_thread is not threading.current_thread():
            self._accept_thread.join(2.0)
        with self._lock:
            conns = list(self._connections)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopped.is_set():
                    return
                continue
            admitted, ip = self._count_in(conn, addr)
            if not admitted:
                continue
            with self._lock:
                self._connections[conn] = time.monotonic()
                if ip is not None:
                    self._counted_ip[conn] = ip
            try:
                self._start_serving(conn, addr)
            except Exception as e:
                # This connection is lost ("can't start new thread" under a process
                # limit, say), not the acceptor: the next ones are served (Kafka's
                # Acceptor goes on too).
                log.error("closing %s: could not serve it: %r", addr, e)
                self._forget(conn)
                conn.close()

    def _count_in(self, conn: socket.socket, addr: Any) -> tuple[bool, IpAddress | None]:
        """Count an accepted connection against the broker's limits (waiting for a slot
        under max.connections): whether it is to be served (False: it was closed), and
        the address it was counted under (None: nothing counted)."""
        if self.quotas is None:
            return True, None
        try:
            ip = ip_of(str(addr[0]))
        except (ValueError, IndexError, TypeError):
            return True, None  # not an IP connection: nothing to count
        try:
            self.quotas.inc(self.listener_name or "", ip, self._stopped)
        except TooManyConnections as e:
            # Kafka's Acceptor: logged and closed, nothing read from it.
            log.info("%s", e)
            conn.close()
            return False, None
        except QuotaStopped:
            conn.close()
            return False, None
        return True, ip

    def _forget(self, conn: socket.socket) -> None:
        """A connection closing: out of the open ones, and counted out of the limits."""
        with self._lock:
            self._connections.pop(conn, None)
            ip = self._counted_ip.pop(conn, None)
        if ip is not None and self.quotas is not None:
            self.quotas.dec(ip)

    def close_lru(self) -> bool:
        """Close this listener's least recently used connection, to make room for an
        inter-broker one past max.connections (Kafka's closeExcessConnections); False if it
        has none."""
        with self._lock:
            open_ones = [(t, c) for c, t in self._connections.items() if t != _CLOSING]
            if not open_ones:
                return False
            conn = min(open_ones, key=lambda used: used[0])[1]
            # So that a second excess connection closes another one.
            self._connections[conn] = _CLOSING
        log.info("closing the least recently used connection: max.connections reached")
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def _start_serving(self, conn: socket.socket, addr: Any) -> None:
        conn.settimeout(self._socket_timeout_s)
        # As Kafka's Acceptor.accept configures each connection.
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self.socket_send_buffer_bytes != -1:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.socket_send_buffer_bytes)
        threading.Thread(
            target=self._serve,
            args=(conn, addr),
            name=f"conn-{addr[0]}:{addr[1]}",
            daemon=True,
        ).start()

    def _serve(self, conn: socket.socket, addr: Any) -> None:
        idle_s = self.connections_max_idle_s
        io: _Conn = conn
        if idle_s is not None and idle_s > MAX_SOCKET_WAIT_S:
            io = _LongIdleConn(conn, idle_s)
        try:
            while not self._stopped.is_set():
                size = _SIZE.unpack(_read_exactly(io, 4))[0]
                if size < 0 or size > self.max_request_size:
                    log.warning(
                        "closing %s: request size %d outside 0..%d",
                        addr,
                        size,
                        self.max_request_size,
                    )
                    return
                frame = _read_exactly(io, size)
                self._used(conn)
                response = self._handle(frame, addr)
                if response is None:
                    return
                if response:
                    _send_all(io, response)
        except _Closed as e:
            if str(e) != "peer closed the connection":
                log.info("connection from %s: %s", addr, e)
        except TimeoutError:
            log.info("closing %s: idle longer than connections.max.idle.ms", addr)
        except OSError:
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass
            self._forget(conn)

    def _used(self, conn: socket.socket) -> None:
        if self.quotas is None:
            return  # nothing is ever closed for being least recently used
        with self._lock:
            if self._connections.get(conn) != _CLOSING:
                self._connections[conn] = time.monotonic()

    def _handle(self, frame: bytearray, addr: Any) -> bytes | bytearray | None:
        """The response frame; b"" for no response; None to close the connection."""
        try:
            header, offset = decode_request_header(frame)
        except DecodeError as e:
            log.warning("closing %s: unreadable request header (%s)", addr, e)
            return None
        api_key = header["request_api_key"]
        version = header["request_api_version"]
        correlation_id = header["correlation_id"]
        apis = self.apis()
        if apis is None:
            return None  # not serving yet
        if api_key == ApiKey.API_VERSIONS and not apis.supported(api_key, version):
            # Answer in v0, which every client reads, with our ranges (KIP-511).
            return encode_response_frame(
                api_key, 0, correlation_id, api_versions_response(ErrorCode.UNSUPPORTED_VERSION)
            )
        if not apis.supported(api_key, version):
            log.warning("closing %s: %s v%d is not supported", addr, ApiKey(api_key).name, version)
            return None
        try:
            # Trailing bytes are ignored, as Kafka's parser does: librdkafka's "all topics"
            # Metadata v9+ request leaves 3 unused bytes of a reserved array count behind.
            body, _end = request_codec(api_key, version).decode_from(frame, offset)
        except (DecodeError, UnsupportedVersionError) as e:
            log.warning(
                "malformed %s v%d from %s: %s (first bytes: %s)",
                ApiKey(api_key).name,
                version,
                addr,
                e,
                frame[:96].hex(),
            )
            self.requests_failed += 1
            answer = error_response(api_key, version, ErrorCode.INVALID_REQUEST)
            if answer is None:
                # No top-level error code in this version, and the request's items (where
                # its errors would go) are unknown: closing is the only answer, as Kafka
                # closes on any request it cannot parse.
                return None
            return self._encode(api_key, version, correlation_id, answer)
        try:
            result = apis.handle(
                api_key,
                version,
                header,
                body,
                listener=self.listener_name,
                client_host=client_address(addr),
            )
        except CloseConnection as e:
            log.info("closing %s: %s", addr, e)
            self.requests_handled += 1
            return None
        except Exception:
            log.exception("error handling %s v%d", ApiKey(api_key).name, version)
            self.requests_failed += 1
            # The API's error response for this request (Kafka's getErrorResponse), or a
            # closed connection where no field of the version can say the error.
            result = error_response(api_key, version, ErrorCode.UNKNOWN_SERVER_ERROR, body)
            if result is None:
                log.warning("closing %s: no error response for this request", addr)
                return None
        self.requests_handled += 1
        if result is None:
            return b""
        return self._encode(api_key, version, correlation_id, result)

    @staticmethod
    def _encode(
        api_key: int, version: int, correlation_id: int, body: dict[str, Any]
    ) -> bytearray | None:
        try:
            return encode_response_frame(api_key, version, correlation_id, body)
        except Exception:
            log.exception("could not encode the %s v%d response", ApiKey(api_key).name, version)
            return None
