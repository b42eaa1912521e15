"""The broker's socket server at its edges: a connection whose thread cannot start (or
whose set-up fails at all) is closed and the listener goes on accepting; an IPv6 listener
binds IPv6, and one with no host every interface, IPv6 too where the system can; the idle
limit is kept whatever its length."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import broker.network
from broker.network import BindError, SocketServer
from wire.api import ApiKey
from wire.protocol import decode_response, encode_request


class VersionsOnly:
    """A request handler answering ApiVersions only."""

    def supported(self, api_key: int, version: int) -> bool:
        return api_key == ApiKey.API_VERSIONS and 0 <= version <= 3

    def handle(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}


def ask(host: str, port: int, correlation_id: int = 5) -> int:
    """The correlation id of the answer to an ApiVersions request."""
    with socket.create_connection((host, port), timeout=5) as c:
        c.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation_id, "x", {}))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            more = c.recv(65536)
            assert more, "closed without an answer"
            data += more
        return decode_response(ApiKey.API_VERSIONS, 0, data[4:])[0]


@pytest.fixture
def served() -> Iterator[SocketServer]:
    s = SocketServer("127.0.0.1", 0, VersionsOnly)  # type: ignore[arg-type]
    s.start()
    yield s
    s.stop()


def test_a_connection_whose_thread_cannot_start_is_closed_and_the_next_served(
    served: SocketServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a process limit a thread may not start ("can't start new thread"): that
    connection is lost, not the acceptor (Kafka's Acceptor goes on too). The acceptor's
    thread died with it, and no later client was ever served."""
    assert ask("127.0.0.1", served.port) == 5
    failed = threading.Event()

    class NoThread(threading.Thread):
        def start(self) -> None:
            failed.set()
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading, "Thread", NoThread)  # the module broker.network starts with
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as lost:
        assert failed.wait(5)
        assert lost.recv(1) == b""  # closed
    monkeypatch.undo()
    assert ask("127.0.0.1", served.port, 6) == 6
    # The lost connection was let go too (the last one's goes once its thread sees it close).
    deadline = time.monotonic() + 5
    while served._connections and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not served._connections


def ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def test_an_ipv6_listener_binds_ipv6() -> None:
    """``PLAINTEXT://[::1]:9092`` (the configuration accepts it, as Kafka does): bound as
    IPv6. It failed to bind ("address family for hostname not supported"), and the broker
    did not start. Where the system has no IPv6, that is said clearly."""
    if not ipv6_loopback():
        with pytest.raises(BindError, match=r"failed to bind to \[?::1"):
            SocketServer("::1", 0, VersionsOnly)  # type: ignore[arg-type]
        return
    s = SocketServer("::1", 0, VersionsOnly)  # type: ignore[arg-type]
    s.start()
    try:
        assert ask("::1", s.port) == 5
    finally:
        s.stop()


def test_a_listener_without_a_host_serves_every_interface() -> None:
    s = SocketServer("", 0, VersionsOnly)  # type: ignore[arg-type]
    s.start()
    try:
        assert ask("127.0.0.1", s.port) == 5
        if socket.has_dualstack_ipv6() and ipv6_loopback():
            assert ask("::1", s.port) == 5  # IPv6 clients too, as on Kafka's JVM
    finally:
        s.stop()


def test_a_connection_idle_past_connections_max_idle_ms_is_closed() -> None:
    """A client gone without a FIN (a host lost) would hold its connection's thread and
    socket for good: one with nothing read for connections.max.idle.ms is closed, as
    Kafka's Selector closes it. A client asking within that time is served on."""
    # A limit far above the busy client's gaps (0.1 s): only a stall of 2 s closes it.
    s = SocketServer("127.0.0.1", 0, VersionsOnly, connections_max_idle_ms=2000)  # type: ignore[arg-type]
    s.start()
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=30) as busy:
            for correlation_id in range(25):  # 2.5 s in all, past the limit, 0.1 s apart
                busy.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation_id, "x", {}))
                size = struct.unpack(">i", busy.recv(4, socket.MSG_WAITALL))[0]
                assert len(busy.recv(size, socket.MSG_WAITALL)) == size
                time.sleep(0.1)
            with socket.create_connection(("127.0.0.1", s.port), timeout=30) as idle:
                assert idle.recv(1) == b""  # closed by the broker (else: a timeout, 30 s)
        deadline = time.monotonic() + 30
        while s._connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not s._connections
    finally:
        s.stop()


def test_a_negative_connections_max_idle_ms_never_closes_an_idle_connection() -> None:
    s = SocketServer("127.0.0.1", 0, VersionsOnly, connections_max_idle_ms=-1)  # type: ignore[arg-type]
    s.start()
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=1) as idle:
            with pytest.raises(TimeoutError):
                idle.recv(1)
            assert ask("127.0.0.1", s.port) == 5
    finally:
        s.stop()


class BigAnswer:
    """A request handler answering ApiVersions with about 12 MB (2,000,000 api keys)."""

    def supported(self, api_key: int, version: int) -> bool:
        return api_key == ApiKey.API_VERSIONS and 0 <= version <= 3

    def handle(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        keys = [{"api_key": i % 60, "min_version": 0, "max_version": 1} for i in range(2_000_000)]
        return {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}


def test_an_answer_read_steadily_is_not_cut_off_as_idle() -> None:
    """connections.max.idle.ms is the time without a read or write (Kafka's idle expiry),
    not the time an answer takes to send: sendall's timeout covered the whole answer, so a
    client reading 12 MB steadily over more than the idle limit (1 s here) was cut off."""
    s = SocketServer("127.0.0.1", 0, BigAnswer, connections_max_idle_ms=1000)  # type: ignore[arg-type]
    s.start()
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "x", {}))
            head = c.recv(4, socket.MSG_WAITALL)
            size = struct.unpack(">i", head)[0]
            got, started = 0, time.monotonic()
            while got < size and time.monotonic() - started < 60:
                more = c.recv(min(256 * 1024, size - got))
                if not more:
                    break
                got += len(more)
                time.sleep(0.05)  # about 5 MB/s at most: over 2 s for the answer
            took = time.monotonic() - started
            assert got == size, f"cut off after {got} of {size} bytes in {took:.1f} s"
            assert took > 1.0  # it did take longer than the idle limit
    finally:
        s.stop()


def test_stop_returns_with_the_port_closed() -> None:
    """The acceptor waits in accept() up to 0.5 s; closing the listener under it left the
    port listening until it woke (a client connecting then was reset, and binding the
    port again failed). stop() waits for it, as Kafka's awaitShutdown of its Acceptor."""
    for _ in range(5):
        s = SocketServer("127.0.0.1", 0, VersionsOnly)  # type: ignore[arg-type]
        s.start()
        assert ask("127.0.0.1", s.port) == 5
        port = s.port
        s.stop()
        again = SocketServer("127.0.0.1", port, VersionsOnly)  # type: ignore[arg-type]
        again.stop()


@pytest.mark.parametrize(
    ("addr", "shown"),
    [
        (("127.0.0.1", 5000), "/127.0.0.1"),
        (("::ffff:10.0.0.7", 5000, 0, 0), "/10.0.0.7"),
        (("::1", 5000, 0, 0), "/0:0:0:0:0:0:0:1"),
        (("fe80::1%eth0", 5000, 0, 2), "/fe80:0:0:0:0:0:0:1%eth0"),
        (None, ""),
    ],
)
def test_a_clients_address_is_given_as_kafka_gives_it(addr: Any, shown: str) -> None:
    """JoinGroup's client_host (kafka-consumer-groups.sh --describe --members shows it) is
    Java's InetAddress.toString(): "/127.0.0.1"; an IPv4 client of the default, dual-stack
    listener was "::ffff:127.0.0.1", and one of an IPv4 listener "127.0.0.1"."""
    assert broker.network.client_address(addr) == shown


def ask_after_idle(port: int, idle_s: float, correlation_id: int = 7) -> int | None:
    """Connect, send nothing for idle_s, then ask ApiVersions: the answer's correlation id,
    or None if the broker closed the connection meanwhile."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        time.sleep(idle_s)
        try:
            c.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation_id, "x", {}))
            data = b""
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                more = c.recv(65536)
                if not more:
                    return None
                data += more
        except (ConnectionResetError, BrokenPipeError):
            return None
        return decode_response(ApiKey.API_VERSIONS, 0, data[4:])[0]


@pytest.mark.parametrize(
    ("idle_ms", "idle_s"),
    [
        (2**32, 0.3),  # handed to poll() as 0 ms: closed at the first wait for a request
        (2**32 + 1000, 1.5),  # as 1000 ms: closed after 1 s idle, not about 49.7 days
    ],
)
def test_an_idle_limit_above_what_one_socket_wait_can_be_is_not_wrapped(
    idle_ms: int, idle_s: float
) -> None:
    """connections.max.idle.ms is a long in Kafka, honoured exactly (its Selector's
    IdleExpiryManager). A socket's timeout reaches poll() as a C int of milliseconds:
    above 2**31-1 ms it wrapped, and a connection idle far less than the limit was closed."""
    s = SocketServer("127.0.0.1", 0, VersionsOnly, connections_max_idle_ms=idle_ms)  # type: ignore[arg-type]
    s.start()
    try:
        assert ask_after_idle(s.port, 0.0) == 7
        assert ask_after_idle(s.port, idle_s) == 7, f"closed after {idle_s} s idle"
    finally:
        s.stop()


def test_a_huge_idle_limit_leaves_the_acceptor_serving() -> None:
    """1e13 ms: settimeout raised OverflowError in the acceptor's thread, which it did not
    catch: the acceptor died, and neither that client nor any later one was served."""
    s = SocketServer("127.0.0.1", 0, VersionsOnly, connections_max_idle_ms=10**13)  # type: ignore[arg-type]
    s.start()
    try:
        assert ask_after_idle(s.port, 0.0) == 7
        assert ask_after_idle(s.port, 0.0, 8) == 8
        assert s._accept_thread.is_alive()
    finally:
        s.stop()


def test_an_idle_limit_above_one_socket_wait_is_kept_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above the longest socket wait (about 24.8 days; 0.2 s here) a connection waits in
    steps of it, closed only once idle for the whole limit (1 s here)."""
    monkeypatch.setattr(broker.network, "MAX_SOCKET_WAIT_S", 0.2)
    s = SocketServer("127.0.0.1", 0, VersionsOnly, connections_max_idle_ms=1000)  # type: ignore[arg-type]
    s.start()
    try:
        assert ask_after_idle(s.port, 0.6) == 7  # past three steps, within the limit
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as idle:
            started = time.monotonic()
            assert idle.recv(1) == b""  # closed by the broker (else: a timeout, 10 s)
            took = time.monotonic() - started
        assert 0.9 <= took < 5, f"closed after {took:.2f} s idle"
    finally:
        s.stop()


@pytest.mark.parametrize(
    ("idle_s", "waited_s", "left"),
    [
        (None, 0.0, None),
        (1.0, 0.0, 1.0),
        (1e10, 0.0, 2147483.647),  # (2**31 - 1) ms, the longest poll() takes
        (1e10, 1e10 - 5, 5.0),
        (1e10, 1e10, 0.0),
        (1.0, 2.0, 0.0),
    ],
)
def test_the_wait_left_is_capped_at_one_socket_wait(
    idle_s: float | None, waited_s: float, left: float | None
) -> None:
    assert broker.network.idle_wait_left(idle_s, waited_s) == pytest.approx(left)


def test_a_connection_failing_unexpectedly_is_lost_not_the_acceptor(
    served: SocketServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever goes wrong setting up one connection (an OverflowError from settimeout was
    one) closes that connection; the acceptor's thread died of anything but OSError and
    RuntimeError, and no later client was served."""
    failed = threading.Event()

    def fail(*_args: Any) -> None:
        failed.set()
        raise ValueError("unexpected")

    monkeypatch.setattr(served, "_start_serving", fail)
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as lost:
        assert failed.wait(5)
        assert lost.recv(1) == b""  # closed
    monkeypatch.undo()
    assert served._accept_thread.is_alive()
    assert ask("127.0.0.1", served.port, 6) == 6


@pytest.mark.parametrize("host", ["::", "0.0.0.0", ""])
def test_a_wildcard_listener_serves_ipv4_and_ipv6_clients(host: str) -> None:
    """Kafka binds every listener with a java.nio ServerSocketChannel: on a host with IPv6
    an AF_INET6 socket with IPV6_V6ONLY off, and 0.0.0.0 bound as the IPv6 wildcard. So
    ``PLAINTEXT://[::]:9092`` serves IPv4 clients and ``PLAINTEXT://0.0.0.0:9092`` IPv6
    ones; here "::" was IPv6 only (IPV6_V6ONLY on) and 0.0.0.0 IPv4 only."""
    s = SocketServer(host, 0, VersionsOnly)  # type: ignore[arg-type]
    s.start()
    try:
        assert ask("127.0.0.1", s.port) == 5
        if socket.has_dualstack_ipv6() and ipv6_loopback():
            assert ask("::1", s.port) == 5
    finally:
        s.stop()


@pytest.mark.parametrize(
    ("host", "wildcard"),
    [
        ("", True),
        ("::", True),
        ("0.0.0.0", True),
        ("0:0:0:0:0:0:0:0", True),
        ("::1", False),
        ("127.0.0.1", False),
        ("localhost", False),
        ("kafka1", False),
    ],
)
def test_which_hosts_are_every_interface(host: str, wildcard: bool) -> None:
    assert broker.network.is_wildcard(host) is wildcard


def test_the_socket_buffer_sizes_are_applied() -> None:
    """Kafka sets socket.receive.buffer.bytes as SO_RCVBUF of the listening socket, before
    it binds (its accepted sockets inherit it), and socket.send.buffer.bytes as SO_SNDBUF
    of each accepted one. Both were parsed and never applied. (Linux doubles the value
    given, for its bookkeeping.)"""
    # Above Linux's defaults (tcp_rmem 128 KiB, tcp_wmem 16 KiB), below its usual caps
    # (rmem_max and wmem_max, 208 KiB at least).
    size = 200_000
    s = SocketServer(
        "127.0.0.1",
        0,
        VersionsOnly,  # type: ignore[arg-type]
        socket_send_buffer_bytes=size,
        socket_receive_buffer_bytes=size,
    )
    accepted: list[socket.socket] = []
    real_start = s._start_serving

    def keep(conn: socket.socket, addr: Any) -> None:
        accepted.append(conn)
        real_start(conn, addr)

    s._start_serving = keep  # type: ignore[method-assign]
    s.start()
    try:
        listener_rcvbuf = s._listener.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        assert listener_rcvbuf >= size
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as client:
            # Once answered, the connection is set up (and open until the client closes).
            client.sendall(encode_request(ApiKey.API_VERSIONS, 0, 5, "x", {}))
            assert len(client.recv(4, socket.MSG_WAITALL)) == 4
            (conn,) = accepted
            assert conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= size
            assert conn.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    finally:
        s.stop()


def test_socket_buffer_sizes_of_minus_1_leave_the_os_defaults() -> None:
    with socket.socket() as fresh:
        default_rcvbuf = fresh.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    s = SocketServer(
        "127.0.0.1",
        0,
        VersionsOnly,  # type: ignore[arg-type]
        socket_send_buffer_bytes=-1,
        socket_receive_buffer_bytes=-1,
    )
    try:
        assert s._listener.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == default_rcvbuf
    finally:
        s.stop()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("socket_receive_buffer_bytes", 0),
        ("socket_receive_buffer_bytes", -2),
        ("socket_send_buffer_bytes", 0),
        ("socket_send_buffer_bytes", -5),
    ],
)
def test_a_socket_buffer_size_of_0_or_below_other_than_minus_1_is_refused(
    key: str, value: int
) -> None:
    """Kafka's listener fails to start with such a receive size (Java's
    setReceiveBufferSize throws), and its acceptor fails every connection with such a send
    size: refused at start here, both."""
    with pytest.raises(BindError, match=key.replace("_", ".")):
        SocketServer("127.0.0.1", 0, VersionsOnly, **{key: value})  # type: ignore[arg-type]


def test_a_listener_host_that_is_no_name_is_a_bind_error() -> None:
    """``PLAINTEXT://a..b:9092``: the resolver's IDNA codec raises UnicodeError, which
    reached the broker's start as "encoding with 'idna' codec failed", naming no listener;
    it is the bind failure, with the listener, as an unknown host's is."""
    with pytest.raises(BindError, match=r"failed to bind to a\.\.b:0: 'a\.\.b' is not a host name"):
        SocketServer("a..b", 0, VersionsOnly)  # type: ignore[arg-type]
