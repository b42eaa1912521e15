"""A connection's reads and writes, without a socket: a long idle limit waited in steps of
one socket wait, the last step only what is left of it (Kafka keeps connections.max.idle.ms
as a long), and an answer sent whole however little each send takes; and the idle limit
and a bad request size on a served connection."""

from __future__ import annotations

import errno
import logging
import socket
import struct
import threading

import pytest

import broker.network
from broker.network import SocketServer, _LongIdleConn, _send_all
from tests.unit.test_socket_framing import (
    Scripted,
    apis,
    connect,
    read_answer,
    served,
    server,
    still_serving,
    versions_request,
)

__all__ = ["apis", "server"]  # the fixtures


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SilentPeer:
    """A socket whose peer says nothing for `silent` waits: each wait times out after the
    socket's timeout, on the fake clock; then `recv_into` gets 5 bytes."""

    def __init__(self, clock: Clock, silent: int) -> None:
        self.clock = clock
        self.silent = silent
        self.timeout = 1.0
        self.timeouts: list[float] = []

    def settimeout(self, value: float) -> None:
        self.timeout = value
        self.timeouts.append(value)

    def recv_into(self, buffer: memoryview, nbytes: int) -> int:
        if self.silent:
            self.silent -= 1
            self.clock.now += self.timeout
            raise TimeoutError
        return 5


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(broker.network, "MAX_SOCKET_WAIT_S", 1.0)
    monkeypatch.setattr("broker.network.time.monotonic", c)
    return c


def test_a_long_idle_limit_is_waited_in_steps_its_last_one_what_is_left(clock: Clock) -> None:
    peer = SilentPeer(clock, silent=10)
    conn = _LongIdleConn(peer, 2.5)  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        conn.recv_into(memoryview(bytearray(8)), 8)
    # Waits of 1, 1 and 0.5: closed once silent for the whole limit, not a step later;
    # then the socket's wait is one socket wait again.
    assert clock.now == 2.5
    assert peer.timeouts == [1.0, 0.5, 1.0]


def test_a_peer_speaking_within_the_limit_is_read(clock: Clock) -> None:
    peer = SilentPeer(clock, silent=1)
    conn = _LongIdleConn(peer, 2.5)  # type: ignore[arg-type]
    assert conn.recv_into(memoryview(bytearray(8)), 8) == 5
    # The next wait starts whole again.
    assert peer.timeouts == [1.0, 1.0]


class SlowReader:
    """A peer taking at most 3 bytes a send."""

    def __init__(self) -> None:
        self.got = bytearray()
        self.sends = 0

    def send(self, data: memoryview) -> int:
        self.sends += 1
        assert self.sends < 100, "sending forever"
        chunk = bytes(data[:3])
        self.got += chunk
        return len(chunk)


def test_an_answer_taken_a_little_at_a_time_is_sent_whole_once() -> None:
    peer = SlowReader()
    _send_all(peer, b"0123456789")  # type: ignore[arg-type]
    assert bytes(peer.got) == b"0123456789"
    assert peer.sends == 4


def test_a_limit_above_one_socket_wait_is_waited_in_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A limit between one and two socket waits is waited in steps too (else a plain
    socket wait, of one socket wait, closed the connection before the limit)."""
    stepped = threading.Event()

    class Recorded(_LongIdleConn):
        def __init__(self, sock: socket.socket, idle_s: float) -> None:
            stepped.set()
            super().__init__(sock, idle_s)

    monkeypatch.setattr(broker.network, "MAX_SOCKET_WAIT_S", 5.0)
    monkeypatch.setattr(broker.network, "_LongIdleConn", Recorded)
    for s in served(Scripted(), connections_max_idle_ms=6000):
        still_serving(s)
        assert stepped.is_set()


def test_connections_max_idle_ms_of_0_closes_a_connection_at_once() -> None:
    """0 is an idle limit (Kafka's Selector expires connections only for a negative one):
    a connection sending nothing is closed."""
    for s in served(Scripted(), connections_max_idle_ms=0):
        with connect(s) as c:
            assert read_answer(c) is None  # (not closed: a timeout after 10 s)


def test_a_negative_request_size_is_reported_as_such(
    server: SocketServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's NetworkReceive: InvalidReceiveException for a negative size, the connection
    closed (not a failure of the connection's thread)."""
    with caplog.at_level(logging.WARNING, logger="broker.network"), connect(server) as c:
        c.sendall(struct.pack(">i", -1) + versions_request(5))
        assert read_answer(c) is None
    assert any("request size -1 outside" in r.getMessage() for r in caplog.records)


def test_socket_send_buffer_bytes_is_each_connections_send_buffer() -> None:
    """Acceptor.accept sets SO_SNDBUF of each connection; a size below the OS default
    shows it was set (Linux reports twice the size given, for its bookkeeping)."""
    size = 10_000
    for s in served(Scripted(), socket_send_buffer_bytes=size):
        with connect(s) as c:
            c.sendall(versions_request(5))
            assert read_answer(c) is not None
            (conn,) = list(s._connections)
            assert conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) in (size, 2 * size)


def test_a_failed_accept_leaves_the_acceptor_accepting() -> None:
    """An accept that fails (EMFILE: out of file descriptors) loses no acceptor: Kafka's
    Acceptor logs it and goes on."""
    s = SocketServer("127.0.0.1", 0, Scripted)  # type: ignore[arg-type]
    real = s._listener
    failed = threading.Event()

    class FailingOnce:
        def accept(self) -> tuple[socket.socket, object]:
            if not failed.is_set():
                failed.set()
                raise OSError(errno.EMFILE, "Too many open files")
            return real.accept()

        def close(self) -> None:
            real.close()

    s._listener = FailingOnce()  # type: ignore[assignment]
    s.start()
    try:
        still_serving(s)
        assert failed.is_set()
    finally:
        s.stop()
