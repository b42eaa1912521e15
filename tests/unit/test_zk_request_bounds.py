"""Every ZooKeeper request of ZkClient waits at most a session timeout for its answer.

kazoo holds a request made while its connection is down (SUSPENDED) until the connection
is back or the session is declared expired; its failed reconnection attempts never fail
it, and its sync calls wait for good. A controller whose event thread waited so on a
single read never resigned while ZooKeeper was out of reach (item 2 of
docs/architecture.md): the Expire its session-timeout timer queued was never processed.
Now each single request, as multis and multiReads already did, fails after a session
timeout with OperationTimeoutError (a lost answer, handled as ConnectionLoss is), and the
event's term ends (item 35). No server: a real KazooClient is told it connected, then
that its connection dropped, through kazoo's own session callback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from unittest.mock import MagicMock

import pytest
from kazoo.exceptions import OperationTimeoutError
from kazoo.protocol.states import KeeperState

from controller import events as ev
from controller.controller import ControllerConfig, KafkaController
from election.controller_election import FencingToken
from zkdata.client import CancelledWhileDisconnected, SetData, ZkClient

SESSION_TIMEOUT_MS = 300


class Suspended:
    """A ZkClient whose kazoo connected (no server) and then lost its connection: every
    request is queued by kazoo, its wake-up pipe a socket pair read by nobody."""

    def __init__(self) -> None:
        self.zk = ZkClient("127.0.0.1:1", session_timeout_ms=SESSION_TIMEOUT_MS)
        self.kazoo = self.zk.kazoo
        self.read_end, self.write_end = socket.socketpair()
        self.kazoo._connection._write_sock = self.write_end
        self.kazoo._session_callback(KeeperState.CONNECTING)
        self.kazoo._session_callback(KeeperState.CONNECTED)

    def drop_connection(self) -> None:
        self.kazoo._session_callback(KeeperState.CONNECTING)  # SUSPENDED

    def close(self) -> None:
        # The session ends: kazoo fails what it still holds, and a waiter moves on.
        self.kazoo._session_callback(KeeperState.EXPIRED_SESSION)
        self.read_end.close()
        self.write_end.close()


@pytest.fixture
def suspended() -> Iterator[Suspended]:
    s = Suspended()
    s.drop_connection()
    yield s
    s.close()


def outcome_within(fn: Callable[[], Any], limit_s: float) -> BaseException | None:
    """What ``fn()`` raised (None: it returned), run on a thread; a call still waiting
    after ``limit_s`` fails the test (it is released when the fixture ends the session)."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:
            raised.append(e)
        else:
            raised.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"still waiting for ZooKeeper after {limit_s} s"
    return raised[0]


SINGLE_CALLS: dict[str, Callable[[ZkClient], Any]] = {
    "get": lambda zk: zk.get("/a"),
    "get watched": lambda zk: zk.get("/a", watch=True),
    "exists": lambda zk: zk.exists("/a"),
    "exists watched": lambda zk: zk.exists("/a", watch=True),
    "exists with a watcher": lambda zk: zk.exists("/a", watcher=lambda _e: None),
    "get_children": lambda zk: zk.get_children("/a"),
    "get_children watched": lambda zk: zk.get_children("/a", watch=True),
    "create": lambda zk: zk.create("/a", b"x", ephemeral=True),
    "create with parents": lambda zk: zk.create("/a/b", b"x", make_parents=True),
    "set": lambda zk: zk.set("/a", b"x", 3),
    "delete": lambda zk: zk.delete("/a"),
    "ensure_paths": lambda zk: zk.ensure_paths(["/a/b"]),
}


@pytest.mark.parametrize("call", SINGLE_CALLS.values(), ids=SINGLE_CALLS.keys())
def test_a_single_request_made_while_disconnected_times_out(
    suspended: Suspended, call: Callable[[ZkClient], Any]
) -> None:
    started = time.monotonic()
    raised = outcome_within(lambda: call(suspended.zk), 3.0)
    assert isinstance(raised, OperationTimeoutError), raised
    assert time.monotonic() - started >= SESSION_TIMEOUT_MS / 1000 * 0.9


BATCHED_CALLS: dict[str, Callable[[ZkClient], Any]] = {
    "multi": lambda zk: zk.multi([SetData("/a", b"x")]),
    "multi_fenced": lambda zk: zk.multi_fenced(1, [SetData("/a", b"x")]),
    "get_many": lambda zk: zk.get_many(["/a", "/b"]),
    "get_many watched": lambda zk: zk.get_many(["/a", "/b"], watch=True),
    "get_children_many": lambda zk: zk.get_children_many(["/a"]),
}


@pytest.mark.parametrize("call", BATCHED_CALLS.values(), ids=BATCHED_CALLS.keys())
def test_multis_and_multireads_time_out_with_the_same_error(
    suspended: Suspended, call: Callable[[ZkClient], Any]
) -> None:
    raised = outcome_within(lambda: call(suspended.zk), 3.0)
    assert isinstance(raised, OperationTimeoutError), raised


def test_a_timed_out_request_is_waited_out_like_a_lost_connection(suspended: Suspended) -> None:
    """A broker's start-up steps retry a request until connected (until_connected): the
    timeout is one more failure for want of a connection, and a stop asked for meanwhile
    ends the wait, as it does after a ConnectionLoss."""
    cancelled = threading.Event()
    threading.Timer(SESSION_TIMEOUT_MS / 1000 * 2, cancelled.set).start()
    raised = outcome_within(
        lambda: suspended.zk.until_connected(lambda: suspended.zk.get("/a"), cancelled=cancelled),
        3.0,
    )
    assert isinstance(raised, CancelledWhileDisconnected), raised


# The reviewer's case, through the controller: an event waiting on a read made after the
# connection dropped must not keep the term alive.
@pytest.mark.parametrize("blocked_read", [False, True], ids=["idle", "blocked-read"])
def test_disconnected_controller_resigns_after_the_session_timeout(blocked_read: bool) -> None:
    s = Suspended()
    zk = s.zk
    c = KafkaController(
        ControllerConfig(broker_id=1, session_timeout_ms=SESSION_TIMEOUT_MS),
        zk,
        MagicMock(),
        lambda: 1,
    )
    c.token = FencingToken(5, 1, zk.session_generation)  # active, epoch 5
    c.ctx.epoch, c.ctx.epoch_zk_version = 5, 1
    channel = c.channel = MagicMock()
    zk.add_state_listener(c._on_zk_state)
    c.events.start()
    try:
        s.drop_connection()
        if blocked_read:
            # A broker change watch that fired just before the drop, processed after it.
            c.events.put(ev.BrokerChange())
        # Five session timeouts later: the suspended timer has queued its Expire.
        deadline = time.monotonic() + 5 * SESSION_TIMEOUT_MS / 1000
        while time.monotonic() < deadline and c.is_active:
            time.sleep(0.05)
        assert not c.is_active, (
            "still controller of epoch 5 five session timeouts after losing ZooKeeper;"
            f" event thread blocked in {c.events.current_event}"
        )
        channel.close.assert_called()
    finally:
        s.close()
        c.events.close(timeout_s=2)
