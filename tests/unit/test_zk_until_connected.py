"""ZkClient.until_connected: a request that failed for want of a connection is tried again
once connected; a cancel while disconnected ends the wait. No server: the connection's
state is the client's own (never started here) or stood in for."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from zkdata.client import CancelledWhileDisconnected, ZkClient


def test_a_request_is_tried_again_once_connected() -> None:
    client = ZkClient("127.0.0.1:1")
    failures = [ConnectionLoss(), SessionExpiredError()]
    waited: list[float] = []

    def wait_connected(timeout_s: float) -> bool:
        waited.append(timeout_s)
        return len(waited) % 2 == 0  # connected at the second look after each failure

    client.wait_connected = wait_connected  # type: ignore[method-assign]

    def request() -> int:
        if failures:
            raise failures.pop(0)
        return 7

    assert client.until_connected(request) == 7
    assert len(waited) == 4


def test_other_errors_are_the_callers() -> None:
    client = ZkClient("127.0.0.1:1")

    def request() -> int:
        raise NoNodeError()

    with pytest.raises(NoNodeError):
        client.until_connected(request)


def test_a_cancel_ends_the_wait_for_a_connection() -> None:
    client = ZkClient("127.0.0.1:1")  # never started: never connected
    cancelled = threading.Event()
    calls = 0

    def request() -> int:
        nonlocal calls
        calls += 1
        raise ConnectionLoss()

    threading.Timer(0.3, cancelled.set).start()
    with pytest.raises(CancelledWhileDisconnected):
        client.until_connected(request, cancelled=cancelled)
    assert calls == 1  # not tried again while there was no connection
