"""The config change listener (broker/config_changes.py) at its edges: the expiration
boundary, notifications processed once, the watch, a purge losing ZooKeeper, and the
listener's thread (woken at start, by the watch, by a new session, after a failed pass;
gone once closed), as Kafka 2.8's ZkNodeChangeNotificationListener."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss

from broker import config_changes
from broker.config_changes import ConfigChangeListener, notification_sequence
from tests.unit.fake_zk import FakeZk
from tests.unit.test_config_changes import ChangesZk
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import encode_config_change

FIFTEEN_MINUTES_MS = 15 * 60 * 1000


def test_only_the_config_change_prefix_names_a_notification() -> None:
    assert notification_sequence("config_entity_0000000012") is None
    assert notification_sequence("config_change_0000000012") == 12


def test_a_notification_is_purged_only_once_older_than_fifteen_minutes() -> None:
    """Kafka's purgeObsoleteNotifications deletes a notification when now - ctime >
    changeExpirationMs (15 minutes): not at exactly 15 minutes, one millisecond later."""
    zk = ChangesZk()
    now = [5_000]
    listener = ConfigChangeListener(cast(ZkClient, zk), lambda _t: None, now_ms=lambda: now[0])
    name = zk.notify("topics/a", ctime=5_000)
    listener.process()
    assert zk.get_children(paths.CONFIG_CHANGES) == [name]  # fresh: kept
    now[0] = 5_000 + FIFTEEN_MINUTES_MS
    listener.process()
    assert zk.get_children(paths.CONFIG_CHANGES) == [name]  # exactly 15 minutes: kept
    now[0] += 1
    listener.process()
    assert zk.get_children(paths.CONFIG_CHANGES) == []


def test_a_processed_notification_is_not_applied_again() -> None:
    """lastExecutedChange: the next pass starts after the last notification processed."""
    zk = ChangesZk()
    applied: list[str] = []
    listener = ConfigChangeListener(cast(ZkClient, zk), applied.append, now_ms=lambda: 0)
    zk.notify("topics/a")
    zk.notify("topics/b")
    assert listener.process() == ["a", "b"]
    assert listener.process() == []
    zk.notify("topics/c")
    assert listener.process() == ["c"]
    assert applied == ["a", "b", "c"]


class WatchRecordingZk(ChangesZk):
    def __init__(self) -> None:
        super().__init__()
        self.watched: list[tuple[str, bool]] = []

    def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        self.watched.append((path, watch))
        return super().get_children(path, watch=watch)


def test_each_pass_watches_the_notifications() -> None:
    """The listing sets the watch that wakes the listener for the next notification."""
    zk = WatchRecordingZk()
    listener = ConfigChangeListener(cast(ZkClient, zk), lambda _t: None, now_ms=lambda: 0)
    listener.process()
    assert zk.watched == [(paths.CONFIG_CHANGES, True)]


def test_a_purge_losing_zookeeper_fails_the_pass_to_be_taken_again() -> None:
    """ZooKeeper out of reach while deleting an expired notification is no failure of
    that notification (logged and left for a later notification's pass): the pass is
    taken again, and the retry deletes it."""
    zk = ChangesZk()
    name = zk.notify("topics/a")
    delete = zk.delete
    lost = [True]

    def deleting(path: str, version: int = -1) -> None:
        if lost[0]:
            raise ConnectionLoss()
        delete(path, version)

    zk.delete = deleting  # type: ignore[method-assign]
    later = FIFTEEN_MINUTES_MS + 1
    listener = ConfigChangeListener(cast(ZkClient, zk), lambda _t: None, now_ms=lambda: later)
    with pytest.raises(ConnectionLoss):
        listener.process()
    assert zk.get_children(paths.CONFIG_CHANGES) == [name]
    lost[0] = False
    assert listener.process() == []
    assert zk.get_children(paths.CONFIG_CHANGES) == []


# --- the listener's thread -----------------------------------------------------------------


def _wait_for(condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds; a generous deadline only to catch a hang."""
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _notify(zk: FakeZk, n: int, topic: str) -> None:
    zk.put(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}{n:010d}",
        encode_config_change(f"topics/{topic}"),
    )


class Applied:
    def __init__(self) -> None:
        self.topics: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, topic: str) -> None:
        with self._lock:
            self.topics.append(topic)

    def seen(self) -> list[str]:
        with self._lock:
            return list(self.topics)


@pytest.fixture
def running() -> Iterator[tuple[FakeZk, Applied, ConfigChangeListener]]:
    """A started listener over a FakeZk whose /config/changes holds one notification
    (topic a), made before the start; closed after the test."""
    zk = FakeZk()
    zk.put("/config", b"")
    zk.put(paths.CONFIG_CHANGES, b"")
    _notify(zk, 0, "a")
    applied = Applied()
    listener = ConfigChangeListener(cast(ZkClient, zk), applied, now_ms=lambda: 0)
    listener.start()
    try:
        yield zk, applied, listener
    finally:
        listener.close()


def test_a_started_listener_applies_what_is_there_at_once(
    running: tuple[FakeZk, Applied, ConfigChangeListener],
) -> None:
    """No watch has fired: the first pass is taken at the start."""
    _zk, applied, _listener = running
    _wait_for(lambda: applied.seen() == ["a"])


def test_the_watch_wakes_the_listener(
    running: tuple[FakeZk, Applied, ConfigChangeListener],
) -> None:
    zk, applied, _listener = running
    _wait_for(lambda: applied.seen() == ["a"])
    _notify(zk, 1, "b")
    zk.fire(paths.CONFIG_CHANGES, "CHILD")
    _wait_for(lambda: applied.seen() == ["a", "b"])


def test_a_new_session_wakes_the_listener(
    running: tuple[FakeZk, Applied, ConfigChangeListener],
) -> None:
    """A new session has no watches: the listener looks again (and re-arms the watch)."""
    zk, applied, _listener = running
    _wait_for(lambda: applied.seen() == ["a"])
    _notify(zk, 1, "b")
    for state_listener in zk.listeners:
        state_listener("CONNECTED")
    _wait_for(lambda: applied.seen() == ["a", "b"])


def test_a_failed_pass_is_taken_again_without_a_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_changes, "RETRY_S", 0.01)
    zk = FakeZk()
    zk.put("/config", b"")
    zk.put(paths.CONFIG_CHANGES, b"")
    _notify(zk, 0, "a")
    zk.fail_next = [ConnectionLoss()]
    applied = Applied()
    listener = ConfigChangeListener(cast(ZkClient, zk), applied, now_ms=lambda: 0)
    listener.start()
    try:
        _wait_for(lambda: applied.seen() == ["a"])
    finally:
        listener.close()


def test_a_closed_listener_stops_its_thread_and_takes_no_more_passes() -> None:
    zk = FakeZk()
    zk.put("/config", b"")
    zk.put(paths.CONFIG_CHANGES, b"")
    passes: list[int] = []
    get_children = zk.get_children

    def counted(path: str, *, watch: bool = False) -> Any:
        passes.append(1)
        return get_children(path, watch=watch)

    zk.get_children = counted  # type: ignore[method-assign]
    listener = ConfigChangeListener(cast(ZkClient, zk), lambda _t: None, now_ms=lambda: 0)
    listener.start()
    _wait_for(lambda: len(passes) == 1)
    listener.close()
    assert not listener._thread.is_alive()
    assert len(passes) == 1
    assert zk.handlers[paths.CONFIG_CHANGES] == []  # the watch no longer wakes it


def test_a_notification_of_another_entity_applies_nothing() -> None:
    """Broker, user and client configs are not modelled: their notifications are read
    and passed over, the topics' applied."""
    zk = ChangesZk()
    applied: list[str] = []
    listener = ConfigChangeListener(cast(ZkClient, zk), applied.append, now_ms=lambda: 0)
    zk.notify("brokers/1")
    zk.notify("topics/a")
    zk.notify("users/alice")
    assert listener.process() == ["a"]
    assert applied == ["a"]


class VanishingZk(ChangesZk):
    """A notification listed, then gone before it is read (another broker purged it)."""

    def get(self, path: str, *, watch: bool = False) -> Any:
        if path.endswith("0000000000"):
            return None
        return super().get(path, watch=watch)


def test_a_notification_gone_before_it_is_read_is_passed_over_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    zk = VanishingZk()
    applied: list[str] = []
    listener = ConfigChangeListener(cast(ZkClient, zk), applied.append, now_ms=lambda: 0)
    zk.notify("topics/gone")
    zk.notify("topics/b")
    with caplog.at_level(logging.WARNING, logger="broker.config_changes"):
        assert listener.process() == ["b"]
    assert caplog.records == []


def test_a_watch_firing_during_a_pass_takes_another_pass() -> None:
    """A notification made while a pass applies the previous one (its watch fired then)
    is not lost: the listener looks again."""
    zk = FakeZk()
    zk.put("/config", b"")
    zk.put(paths.CONFIG_CHANGES, b"")
    _notify(zk, 0, "a")
    applied = Applied()

    def on_change(topic: str) -> None:
        applied(topic)
        if topic == "a":
            _notify(zk, 1, "b")
            zk.fire(paths.CONFIG_CHANGES, "CHILD")

    listener = ConfigChangeListener(cast(ZkClient, zk), on_change, now_ms=lambda: 0)
    listener.start()
    try:
        _wait_for(lambda: applied.seen() == ["a", "b"])
    finally:
        listener.close()
