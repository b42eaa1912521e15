"""ZkClient's watched reads against a real server, including the creation race."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from cluster import zookeeper as zkp
from tests.integration.harness import serving_member, wait_for
from zkdata.client import ZkClient, event_kind

PATH = "/admin/preferred_replica_election"


@pytest.fixture
def clients(zk_connect: str) -> Iterator[tuple[ZkClient, ZkClient]]:
    watcher = ZkClient(zk_connect, session_timeout_ms=10_000)
    admin = ZkClient(zk_connect, session_timeout_ms=10_000)
    watcher.start()
    admin.start()
    try:
        yield watcher, admin
    finally:
        watcher.close()
        admin.close()


def race_creation(watcher: ZkClient, admin: ZkClient, method: str) -> None:
    """Make the watcher's next read miss a znode the admin creates just after it."""
    real = getattr(watcher.kazoo, f"{method}_async")
    calls = {"n": 0}

    def read_then_lose_the_race(path: str, watch: Any = None) -> Any:
        calls["n"] += 1
        answer = real(path, watch=watch)
        if calls["n"] == 1:
            answer.wait(10)
            admin.create(PATH, b'{"version":1,"partitions":[]}', make_parents=True)
        return answer

    # The first read finds nothing (the znode does not exist yet); the znode appears
    # before the exists watch is set, as when an admin tool re-creates it at once.
    setattr(watcher.kazoo, f"{method}_async", read_then_lose_the_race)


@pytest.mark.parametrize("method", ["get", "get_children"])
def test_a_znode_created_between_the_read_and_its_exists_watch_is_read(
    clients: tuple[ZkClient, ZkClient], method: str
) -> None:
    watcher, admin = clients
    admin.ensure_paths(["/admin"])
    race_creation(watcher, admin, method)
    fired = threading.Event()
    watcher.register_handler(PATH, lambda _event: fired.set())
    if method == "get":
        got = watcher.get(PATH, watch=True)
        assert got is not None  # read again once its existence was seen
        assert got[0] == b'{"version":1,"partitions":[]}'
    else:
        assert watcher.get_children(PATH, watch=True) == []
    # And it is watched: its deletion is noticed.
    admin.delete(PATH)
    assert fired.wait(10), "the deletion of the znode read after the race was not noticed"


@pytest.mark.parametrize("many", ["get_many", "get_children_many"])
def test_a_znode_created_between_a_watched_batch_read_and_its_exists_watch_is_read(
    clients: tuple[ZkClient, ZkClient], many: str
) -> None:
    watcher, admin = clients
    admin.ensure_paths(["/admin"])
    exists = watcher.exists

    def create_then_exists(path: str, *, watch: bool = False) -> Any:
        # The batch's read found nothing; the znode appears before the exists watch.
        if path == PATH and watch and not admin.exists(PATH):
            admin.create(PATH, b'{"version":1,"partitions":[]}')
        return exists(path, watch=watch)

    watcher.exists = create_then_exists  # type: ignore[method-assign, assignment]  # no watcher passed
    fired = threading.Event()
    watcher.register_handler(PATH, lambda _event: fired.set())
    got = getattr(watcher, many)([PATH], watch=True)
    if many == "get_many":
        assert got[0] is not None, "reported missing, though it was there when watched"
        assert got[0][0] == b'{"version":1,"partitions":[]}'
    else:
        assert got == [[]]
    # And it is watched: its deletion is noticed.
    admin.delete(PATH)
    assert fired.wait(10), "the deletion of the znode read after the race was not noticed"


def test_a_missing_znode_is_watched_for_its_creation(
    clients: tuple[ZkClient, ZkClient],
) -> None:
    watcher, admin = clients
    fired = threading.Event()
    watcher.register_handler(PATH, lambda _event: fired.set())
    assert watcher.get(PATH, watch=True) is None
    admin.create(PATH, b"{}", make_parents=True)
    assert fired.wait(10), "the creation was not noticed"


def test_watches_survive_a_reconnection_within_the_session(
    zk_ensemble: zkp.LocalZooKeeper,
) -> None:
    """kazoo drops every watch when its connection drops, even when the session survives
    (it has no SetWatches); the ZooKeeper server it reconnects to knows none of them
    either. ZkClient re-arms them as the Java client does, so a change after the
    reconnection still reaches its handler."""
    watcher = ZkClient(zk_ensemble.connect_string, session_timeout_ms=20_000)
    watcher.start()
    member = serving_member(zk_ensemble, watcher.session_id)
    # The admin's writes go through a member that stays up.
    other = next(s for s in zk_ensemble.servers if s is not member)
    admin = ZkClient(other.address, session_timeout_ms=20_000)
    try:
        admin.start()
        admin.create("/a", b"1")
        admin.create("/kids", b"")
        expected = {"/a": "CHANGED", "/kids": "CHILD", "/missing": "CREATED"}
        fired = {path: threading.Event() for path in expected}

        def handler(event: Any) -> None:
            if event_kind(event) == expected[event.path]:
                fired[event.path].set()

        for path in expected:
            watcher.register_handler(path, handler)
        assert watcher.get("/a", watch=True) is not None
        assert watcher.get_children("/kids", watch=True) == []
        assert watcher.exists("/missing", watch=True) is None
        session = watcher.session_id
        states: list[str] = []
        watcher.add_state_listener(states.append)
        # The member serving the watcher dies: it reconnects to another, same session.
        member.kill()
        wait_for(lambda: states[-2:] == ["SUSPENDED", "CONNECTED"], 60, "the reconnection")
        assert watcher.session_id == session
        admin.set("/a", b"2")
        admin.create("/kids/x", b"")
        admin.create("/missing", b"")
        for path, event in fired.items():
            assert event.wait(10), f"the change of {path} after the reconnection went unseen"
    finally:
        watcher.close()
        admin.close()


def answer_once_out_of_order(client: ZkClient) -> None:
    """Make the next answer the client reads fail as kazoo fails one whose xid is not the
    one awaited (kazoo's issue 254): the request fails, and kazoo's connection loop ends."""
    connection = client.kazoo._connection
    real = connection._read_response
    fired = threading.Event()

    def out_of_order(header: Any, buffer: Any, offset: int) -> Any:
        if fired.is_set():
            return real(header, buffer, offset)
        fired.set()
        _, result, xid = client.kazoo._pending.popleft()
        error = RuntimeError("xids do not match, expected %r received %r", xid, xid + 1)
        result.set_exception(error)
        raise error

    connection._read_response = out_of_order


def test_a_connection_thread_ended_by_an_answer_out_of_order_is_started_again(
    zk_connect: str,
) -> None:
    """ZooKeeper answering out of order ends kazoo's connection thread for good (kazoo's
    issue 254; a nemesis schedule pausing ensemble members met it). The request awaited
    fails as a lost connection, and the client connects again with a new session, its
    listeners hearing LOST then CONNECTED, as after an expiry."""
    client = ZkClient(zk_connect, session_timeout_ms=10_000)
    client.start()
    states: list[str] = []
    client.add_state_listener(states.append)
    try:
        first_session = client.session_id
        answer_once_out_of_order(client)
        with pytest.raises(ConnectionLoss, match="out of order"):
            client.get("/")
        wait_for(lambda: states[-1:] == ["CONNECTED"], 30, "the client connected again")
        assert states == ["LOST", "CONNECTED"]
        assert client.connection_restarts == 1
        assert client.last_restart_delay_s == 0.0
        assert client.session_id not in (0, first_session)
        assert client.get("/") is not None
    finally:
        client.close()
    assert client.connection_restarts == 1


def test_restarts_of_the_connection_thread_back_off_and_close_ends_the_wait(
    zk_connect: str,
) -> None:
    """A second restart soon after the first waits (a ZooKeeper that keeps ending the
    loop is not met with new sessions in a tight loop), and close() during a restart's
    wait ends it: the closed client does not connect again."""
    client = ZkClient(zk_connect, session_timeout_ms=10_000)
    client.start()
    states: list[str] = []
    client.add_state_listener(states.append)
    try:
        for restarts in (1, 2):
            answer_once_out_of_order(client)
            with pytest.raises(ConnectionLoss):
                client.get("/")
            wait_for(
                lambda r=restarts: (
                    client.connection_restarts == r  # type: ignore[misc]
                    and states[-1:] == ["CONNECTED"]
                ),
                30,
                f"restart {restarts}",
            )
        assert client.last_restart_delay_s == 0.5
        # The third restart would wait 1 s; the client is closed during that wait.
        answer_once_out_of_order(client)
        with pytest.raises(ConnectionLoss):
            client.get("/")
        wait_for(lambda: states[-1:] == ["LOST"], 30, "the third loss")
    finally:
        client.close()
    restarters = [t for t in threading.enumerate() if t.name == "zk-client-restart"]
    for thread in restarters:
        thread.join(5)
        assert not thread.is_alive()
    assert client.connection_restarts == 2
    assert client.kazoo._stopped.is_set()
