"""ZkClient's binding of a write to a session (`session_generation`, ``session=``), over a
real but unconnected KazooClient driven through kazoo's own session callback: kazoo
opens a new session at once when one expires, and requests made meanwhile are queued and
sent in it. A write bound to the expired session must never be: the ones kazoo held when
the session ended fail with SessionExpiredError (kazoo's _notify_pending), the later ones
are refused before they reach kazoo's queue."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.states import KeeperState

from election import controller_election
from zkdata.client import SetData, ZkClient


class Idle:
    """A ZkClient whose kazoo is told it connected (no server): requests are queued on
    kazoo's queue, its wake-up pipe a socket pair read by nobody until ``drain``."""

    def __init__(self) -> None:
        self.zk = ZkClient("127.0.0.1:1", session_timeout_ms=2000)
        self.kazoo = self.zk.kazoo
        self.read_end, write_end = socket.socketpair()
        self.kazoo._connection._write_sock = write_end
        self.kazoo._session_callback(KeeperState.CONNECTING)
        self.kazoo._session_callback(KeeperState.CONNECTED)

    def expire(self) -> None:
        """What kazoo's connection thread does when ZooKeeper says the session expired,
        then as it connects again (a new session: requests are queued for it)."""
        self.kazoo._session_callback(KeeperState.EXPIRED_SESSION)
        self.kazoo._session_callback(KeeperState.CONNECTING)

    def queued(self) -> int:
        return len(self.kazoo._queue)

    def drain(self) -> None:
        self.read_end.setblocking(False)
        try:
            while self.read_end.recv(65536):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        self.read_end.close()
        self.kazoo._connection._write_sock.close()


@pytest.fixture
def idle() -> Iterator[Idle]:
    c = Idle()
    yield c
    c.close()


WRITE = [SetData("/brokers/topics/t/partitions/0/state", b"{}", 3)]


def test_a_write_of_the_current_session_is_queued(idle: Idle) -> None:
    idle.zk._multi_async(WRITE, idle.zk.session_generation)
    assert idle.queued() == 1


def test_a_write_queued_when_the_session_expired_fails_with_it(idle: Idle) -> None:
    pending = idle.zk._multi_async(WRITE, idle.zk.session_generation)
    idle.expire()
    with pytest.raises(SessionExpiredError):
        pending.get(timeout=1)


def test_a_fenced_write_bound_to_an_expired_session_is_refused_not_sent_in_the_next(
    idle: Idle,
) -> None:
    term = idle.zk.session_generation
    idle.expire()
    assert idle.zk.session_generation == term + 1
    with pytest.raises(SessionExpiredError):
        idle.zk.multi_fenced(1, WRITE, session=term)
    with pytest.raises(SessionExpiredError):
        idle.zk.multi_fenced_batched(1, [WRITE, WRITE], max_ops=1, session=term)
    with pytest.raises(SessionExpiredError):
        idle.zk.multi(WRITE, session=term)
    assert idle.queued() == 0  # nothing waits to be sent in the new session
    # Unbound, or bound to the new session: queued for it, as before.
    idle.zk._multi_async(WRITE)
    idle.zk._multi_async(WRITE, term + 1)
    assert idle.queued() == 2


def test_state_listeners_hear_of_the_loss_after_the_generation_moved_on(idle: Idle) -> None:
    """The controller's listener queues its Expire on LOST: by then its term's writes are
    refused already, so no write made after the Expire was queued reaches kazoo."""
    term = idle.zk.session_generation
    seen: list[tuple[str, int, int]] = []

    def listener(state: str) -> None:
        if state == "LOST":
            idle.zk._multi_async(WRITE, term)
            seen.append((state, idle.zk.session_generation, idle.queued()))

    idle.zk.add_state_listener(listener)
    idle.expire()
    assert seen == [("LOST", term + 1, 0)]


def test_the_session_ends_while_a_write_waits_on_the_wake_up_pipe(idle: Idle) -> None:
    """kazoo's wake-up write blocks while its connection thread reads nothing (it is
    reconnecting), and that thread moves the generation on when the session ends: the
    write must not hold the lock the thread takes (or neither goes on again)."""
    write_end = idle.kazoo._connection._write_sock
    write_end.setblocking(False)
    try:
        while True:
            write_end.send(b"\0")
    except BlockingIOError:
        pass
    write_end.setblocking(True)
    term = idle.zk.session_generation
    writer = threading.Thread(target=idle.zk._multi_async, args=(WRITE, term), daemon=True)
    writer.start()
    writer.join(0.2)
    assert writer.is_alive()  # blocked on the full pipe, its multi queued
    ender = threading.Thread(target=idle.expire, daemon=True)
    ender.start()
    ender.join(2)
    alive = ender.is_alive()
    idle.drain()
    writer.join(2)
    ender.join(2)
    assert not alive, "the session's end waited on a write blocked on the wake-up pipe"
    assert idle.zk.session_generation == term + 1
    assert idle.queued() == 0  # kazoo failed the queued multi with the session


def test_the_election_is_made_in_the_session_it_started_in(
    idle: Idle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """try_elect binds its multi to the session it started in: a session that ended after
    its read of /controller_epoch gives no term (SessionExpiredError), never one won in
    the next session."""

    def read_then_expire(zk: ZkClient) -> controller_election.FencingToken:
        idle.expire()  # the epoch was read in the session that just ended
        return controller_election.FencingToken(0, 0, zk.session_generation)

    monkeypatch.setattr(controller_election, "read_controller_epoch", read_then_expire)
    with pytest.raises(SessionExpiredError):
        controller_election.try_elect(idle.zk, 1)
    assert idle.queued() == 0
