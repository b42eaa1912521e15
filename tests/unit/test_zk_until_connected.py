"""ZkClient.until_connected: a request that failed for want of a connection is tried again
once connected; a cancel while disconnected ends the wait. ZkClient.get_within: the same,
within a bound. No server: the connection's
state is the client's own (never started here) or stood in for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from zkdata.client import CancelledWhileDisconnected, ZkClient, ZooKeeperClientTimeout


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


# --- get_within: a read bounded by zookeeper.connection.timeout.ms, as Kafka's -------------


@pytest.mark.timeout(60)  # a read that waits for a connection for good hangs
def test_a_bounded_read_gives_up_without_a_connection() -> None:
    client = ZkClient("127.0.0.1:1")  # never started: never connected
    started = time.monotonic()
    with pytest.raises(ZooKeeperClientTimeout, match="within 300 ms"):
        client.get_within("/controller", 0.3)
    assert time.monotonic() - started > 0.25


@pytest.mark.timeout(60)  # a read that waits for its answer for good hangs
def test_a_bounded_read_gives_up_on_a_request_never_answered() -> None:
    """A request made while kazoo takes its connection for alive, or while it reconnects,
    waits for its answer for good in kazoo's own get."""
    client = ZkClient("127.0.0.1:1")
    client.wait_connected = lambda timeout_s: True  # type: ignore[method-assign]
    client.kazoo.get_async = lambda path, watch=None: client.kazoo.handler.async_result()
    with pytest.raises(ZooKeeperClientTimeout):
        client.get_within("/controller", 0.3)


def answering(client: ZkClient, answers: list[Any]) -> Callable[..., object]:
    """A kazoo ``*_async`` request of ``client`` whose results are ``answers`` in turn (an
    exception is the request's failure)."""

    def request(path: str, watch: object = None) -> object:
        result = client.kazoo.handler.async_result()
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            result.set_exception(answer)
        else:
            result.set(answer)
        return result

    return request


def test_a_bounded_read_is_sent_again_after_a_lost_connection() -> None:
    client = ZkClient("127.0.0.1:1")
    client.wait_connected = lambda timeout_s: True  # type: ignore[method-assign]
    answers: list[Any] = [ConnectionLoss(), (b"1", "stat")]
    client.kazoo.get_async = answering(client, answers)
    assert client.get_within("/controller", 5) == (b"1", "stat")
    assert answers == []


def test_bounded_children_are_read_as_the_bounded_read() -> None:
    """get_children_within: the children, None for a znode missing, sent again after a
    lost connection, and a timeout without one."""
    client = ZkClient("127.0.0.1:1")
    client.wait_connected = lambda timeout_s: True  # type: ignore[method-assign]
    answers: list[Any] = [ConnectionLoss(), ["1", "2"], NoNodeError()]
    client.kazoo.get_children_async = answering(client, answers)
    assert client.get_children_within("/brokers/ids", 5) == ["1", "2"]
    assert client.get_children_within("/brokers/ids", 5) is None
    assert answers == []
    never = ZkClient("127.0.0.1:1")  # never started: never connected
    with pytest.raises(ZooKeeperClientTimeout, match="within 200 ms"):
        never.get_children_within("/brokers/ids", 0.2)
