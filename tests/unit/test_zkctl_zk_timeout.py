"""--zk-timeout bounds every wait of a zkctl command for ZooKeeper: connecting, each
request's answer, and the close.

What a stopped ZooKeeper (SIGSTOP, or its machine gone) looks like to a client: the
connection is accepted by the kernel and nothing is ever answered, from the start or after
the connect handshake. kazoo derives its handshake and read timeouts from the session
timeout (10 s at least here, not to expire a slow but live ZooKeeper's session mid-command),
and its stop waits for that read: `zkctl controller --zk-timeout 2` took ~10.5 s before it
said "cannot connect ... within 2 s", and a read-only command whose server stopped
answering after the handshake took ~6.8 s and said a change may have been made.

No ZooKeeper: real sockets and a server that answers the handshake only. The deadlines
are generous (they catch the session-timeout waits, not a slow machine)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.exceptions import OperationTimeoutError

from zkctl import cli
from zkdata.client import ZkClient

TIMEOUT_S = 1.0
# The bound checked: the timeout, the close after it and a slow machine's share. The
# session-timeout waits it catches are 10 s and more.
DEADLINE_S = TIMEOUT_S + 3


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    took = time.monotonic() - started
    return code, capsys.readouterr().err, took


@contextlib.contextmanager
def server(*, answer_connect: bool) -> Iterator[str]:
    """A connect string whose server accepts connections and never answers a request;
    with ``answer_connect``, it answers the session handshake first (a ZooKeeper stopped
    after the client connected)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    held: list[socket.socket] = []
    stop = threading.Event()

    def handshake(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.settimeout(5)
            (length,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
            conn.recv(length, socket.MSG_WAITALL)  # the ConnectRequest
            # ConnectResponse: protocol version, negotiated session timeout (ms), session
            # id, password (a buffer), read-only flag.
            body = struct.pack(">iiqi", 0, 10_000, 0x5EED, 16) + bytes(16) + b"\x00"
            conn.sendall(struct.pack(">i", len(body)) + body)

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                conn = listener.accept()[0]
                held.append(conn)
                if answer_connect:
                    handshake(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def failed_within_the_timeout(
    command: list[str], capsys: pytest.CaptureFixture[str], *, answer_connect: bool
) -> tuple[str, str]:
    """Run ``command`` against a server that never answers (after the handshake, with
    ``answer_connect``): it failed (exit 1) with one error line, within the deadline.
    The connect string and stderr."""
    with server(answer_connect=answer_connect) as connect:
        argv = ["--zookeeper", connect, "--zk-timeout", f"{TIMEOUT_S:g}", *command]
        code, err, took = run(argv, capsys)
    assert code == 1, err
    assert [line.startswith("zkctl: error:") for line in err.splitlines()][-1:] == [True], err
    assert err.count("zkctl: error:") == 1, err
    assert took < DEADLINE_S, f"--zk-timeout {TIMEOUT_S:g} but it took {took:.1f} s: {err}"
    return connect, err


@pytest.mark.parametrize(
    "command", [["controller"], ["topic", "list"], ["broker", "identities"], ["watch", "--plain"]]
)
def test_a_zookeeper_that_never_answers_fails_the_command_within_the_timeout(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    connect, err = failed_within_the_timeout(command, capsys, answer_connect=False)
    assert f"cannot connect to ZooKeeper at {connect} within {TIMEOUT_S:g} s" in err


@pytest.mark.parametrize("command", [["controller"], ["topic", "list"], ["topic", "describe"]])
def test_a_zookeeper_that_stops_answering_fails_a_read_within_the_timeout_changing_nothing(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that only reads says so: nothing was changed, no need to look first."""
    connect, err = failed_within_the_timeout(command, capsys, answer_connect=True)
    assert connect in err
    assert "nothing was changed" in err
    assert "may or may not" not in err


def test_a_write_left_unanswered_may_have_been_made() -> None:
    """Each request waits at most the request timeout; the client counts the writes it
    sent, so zkctl says a change may have been made only when it asked for one."""
    with server(answer_connect=True) as connect:
        zk = ZkClient(
            connect, session_timeout_ms=10_000, connection_timeout_ms=5000, request_timeout_ms=500
        )
        zk.start()
        started = time.monotonic()
        with pytest.raises(OperationTimeoutError):
            zk.get("/brokers/ids")
        assert zk.writes_sent == 0
        with pytest.raises(OperationTimeoutError):
            zk.create("/admin/preferred_replica_election", b"{}")
        assert zk.writes_sent == 1
        zk.close(timeout_s=0)
        took = time.monotonic() - started
    assert took < 1 + DEADLINE_S, f"two requests of 0.5 s and a close took {took:.1f} s"


def test_a_failed_start_waits_no_longer_than_the_connection_timeout() -> None:
    """ZkClient.start gives up after the connection timeout, whatever the session timeout
    (zkctl status, and a broker's start, connect so too)."""
    with server(answer_connect=False) as connect:
        zk = ZkClient(connect, session_timeout_ms=30_000, connection_timeout_ms=1000)
        started = time.monotonic()
        with pytest.raises(Exception, match="time-out"):
            zk.start()
        took = time.monotonic() - started
    assert took < DEADLINE_S, f"a 1 s connection timeout took {took:.1f} s"


def test_zkctl_status_reads_zookeeper_within_its_timeout() -> None:
    """`zkctl status` reads the cluster's view through cluster.local's own session: its
    requests and its close waited out the session's timeouts (6.1 s with --zk-timeout 1,
    seen) where ZooKeeper stopped answering after the handshake."""
    from cluster import local

    with server(answer_connect=True) as connect:
        started = time.monotonic()
        view, error = local._try_zk_view(connect, TIMEOUT_S)
        took = time.monotonic() - started
    assert view is None
    assert error is not None
    assert error.startswith(f"cannot read ZooKeeper at {connect}")
    assert took < DEADLINE_S, f"took {took:.1f} s"
