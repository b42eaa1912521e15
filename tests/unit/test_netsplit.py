"""The proxy the partition tests cut: it forwards, drops everything while cut (neither end
sees a close), and after healing forwards new connections and closes the cut ones."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from cluster.netsplit import TcpProxy, ZooKeeperLink


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def proxy(echo: int) -> Iterator[TcpProxy]:
    p = TcpProxy(("127.0.0.1", echo))
    try:
        yield p
    finally:
        p.close()


def connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(0.5)
    return s


def test_forwards_both_ways(proxy: TcpProxy) -> None:
    with connect(proxy.port) as s:
        s.sendall(b"ping")
        assert s.recv(16) == b"ping"


def test_a_cut_drops_bytes_without_closing_and_a_heal_closes_the_cut_connection(
    proxy: TcpProxy,
) -> None:
    with connect(proxy.port) as old:
        old.sendall(b"a")
        assert old.recv(16) == b"a"
        proxy.cut()
        old.sendall(b"lost")
        with pytest.raises(TimeoutError):
            old.recv(16)  # nothing back, and no close either
        with connect(proxy.port) as during:  # accepted, goes nowhere
            during.sendall(b"x")
            with pytest.raises(TimeoutError):
                during.recv(16)
            proxy.heal()
            old.settimeout(5)
            during.settimeout(5)
            assert old.recv(16) == b""  # closed at the heal
            assert during.recv(16) == b""
    with connect(proxy.port) as new:
        new.sendall(b"back")
        assert new.recv(16) == b"back"


def test_a_connection_that_ended_is_forgotten(proxy: TcpProxy) -> None:
    for _ in range(20):
        with connect(proxy.port) as s:
            s.sendall(b"x")
            assert s.recv(16) == b"x"
    deadline = time.monotonic() + 10
    while proxy.open_connections() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.open_connections() == 0
    with connect(proxy.port) as s:  # and it still forwards
        s.sendall(b"y")
        assert s.recv(16) == b"y"
        assert proxy.open_connections() == 1


def test_a_link_rewrites_every_host_of_a_connect_string_and_keeps_the_chroot(echo: int) -> None:
    link = ZooKeeperLink(f"127.0.0.1:{echo},127.0.0.1:{echo}/some/chroot")
    try:
        hosts, _, chroot = link.connect_string.partition("/")
        assert chroot == "some/chroot"
        ports = [int(h.rpartition(":")[2]) for h in hosts.split(",")]
        assert ports == [p.port for p in link.proxies]
        assert all(p.upstream == ("127.0.0.1", echo) for p in link.proxies)
    finally:
        link.close()


def test_a_looked_up_upstream_is_looked_up_for_each_connection_and_none_refuses(
    echo: int,
) -> None:
    where: list[tuple[str, int] | None] = [None]
    p = TcpProxy(lambda: where[0])
    try:
        with connect(p.port) as refused:
            refused.settimeout(5)
            assert refused.recv(16) == b""  # closed: nothing to forward to
        where[0] = ("127.0.0.1", echo)
        with connect(p.port) as s:
            s.sendall(b"found")
            assert s.recv(16) == b"found"
    finally:
        p.close()


def test_a_slowed_link_delivers_every_byte_late_in_order_each_way(proxy: TcpProxy) -> None:
    with connect(proxy.port) as s:
        s.settimeout(5)
        proxy.slow(0.2)
        started = time.monotonic()
        for i in range(20):
            s.sendall(b"%02d" % i)
        got = b""
        while len(got) < 40:
            got += s.recv(64)
        # There and back, each way 0.2 s late at least.
        assert time.monotonic() - started >= 0.4
        assert got == b"".join(b"%02d" % i for i in range(20))


def test_bytes_under_way_at_the_heal_still_arrive_and_before_later_ones(proxy: TcpProxy) -> None:
    with connect(proxy.port) as s:
        s.settimeout(5)
        proxy.slow(0.3)
        s.sendall(b"early")
        proxy.heal()
        s.sendall(b"later")
        got = b""
        while len(got) < 10:
            got += s.recv(64)
        assert got == b"earlylater"
    with connect(proxy.port) as new:  # not slowed any more: answered at once
        new.sendall(b"x")
        assert new.recv(16) == b"x"


def test_an_end_under_way_arrives_after_the_bytes_before_it() -> None:
    received: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as server:
        p = TcpProxy(("127.0.0.1", server.getsockname()[1]))
        try:
            with connect(p.port) as s:
                upstream, _ = server.accept()
                p.slow(0.2)
                s.sendall(b"last words")
            # Closed at once by the client; the server reads the bytes, then the end.
            with upstream:
                upstream.settimeout(5)
                while data := upstream.recv(64):
                    received.append(data)
        finally:
            p.close()
    assert b"".join(received) == b"last words"
