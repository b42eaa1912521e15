"""Config change notifications (/config/changes): their names, order and entities."""

from __future__ import annotations

import itertools
import logging
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.exceptions import ConnectionLoss, NoAuthError
from kazoo.protocol.states import ZnodeStat

from broker.config_changes import (
    CHANGE_EXPIRATION_MS,
    ConfigChangeListener,
    notification_sequence,
    pending_notifications,
    topic_of,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import MalformedZnode, decode_config_change, encode_config_change

PATH = "/config/changes/config_change_0000000007"


def test_a_notification_name_gives_its_sequence_number() -> None:
    assert notification_sequence("config_change_0000000012") == 12
    assert notification_sequence("config_change_2147483648") == 2_147_483_648
    for other in ("config_change_", "config_change_12a", "x_0000000001", "config_change_-1"):
        assert notification_sequence(other) is None
    assert notification_sequence("config_change_\u0661") is None  # a digit, not ASCII
    # Past a Java long: no sequence (int() raised ValueError past 4,300 digits, failing
    # every pass of the listener).
    assert notification_sequence("config_change_" + "9" * 19) == 10**19 - 1
    assert notification_sequence("config_change_" + "1" * 20) is None
    assert notification_sequence("config_change_" + "1" * 5000) is None


@given(st.lists(st.integers(0, 10**9), unique=True), st.integers(-1, 10**9))
def test_pending_notifications_are_those_after_the_last_processed_in_order(
    sequences: list[int], last: int
) -> None:
    names = [f"config_change_{n:010d}" for n in sequences] + ["stray"]
    pending = pending_notifications(reversed(names), last)
    assert [seq for seq, _ in pending] == sorted(n for n in sequences if n > last)
    assert all(notification_sequence(name) == seq for seq, name in pending)


def test_only_topic_entities_name_a_topic() -> None:
    assert topic_of("topics/orders") == "orders"
    for other in ("brokers/1", "users/alice/clients/c", "topics/", "topics/a/b", "topics"):
        assert topic_of(other) is None


def test_both_versions_of_a_notification_decode() -> None:
    assert decode_config_change(PATH, encode_config_change("topics/t")) == "topics/t"
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    assert decode_config_change(PATH, v1) == "topics/t"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"{",
        b'{"version":3,"entity_path":"topics/t"}',
        b'{"version":2}',
        b'{"version":2,"entity_path":7}',
        b'{"version":1,"entity_type":"topics"}',
    ],
)
def test_a_malformed_notification_is_reported_with_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZnode) as e:
        decode_config_change(PATH, data)
    assert e.value.path == PATH


class ChangesZk:
    """/config/changes in memory: what the listener reads and deletes."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}
        self._seq = itertools.count(0)
        self.failing: set[str] = set()  # paths whose read loses the connection

    def notify(self, entity_path: str | bytes, ctime: int = 0) -> str:
        name = f"{paths.CONFIG_CHANGE_PREFIX}{next(self._seq):010d}"
        data = entity_path if isinstance(entity_path, bytes) else encode_config_change(entity_path)
        self.nodes[f"{paths.CONFIG_CHANGES}/{name}"] = (data, ctime)
        return name

    def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        prefix = path + "/"
        return [p[len(prefix) :] for p in self.nodes if p.startswith(prefix)]

    def get_children_many(
        self, path_list: list[str], *, watch: bool = False, batch: int = 0
    ) -> list[list[str] | None]:
        return [
            [n for n in self.get_children(path) if "/" not in n] if path in self.nodes else None
            for path in path_list
        ]

    def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat] | None:
        if path in self.failing:
            raise ConnectionLoss()
        got = self.nodes.get(path)
        if got is None:
            return None
        return got[0], ZnodeStat(1, 1, got[1], got[1], 0, 0, 0, 0, len(got[0]), 0, 1)

    def delete(self, path: str, version: int = -1) -> None:
        self.nodes.pop(path, None)


def listening(zk: ChangesZk, on_change: Any) -> ConfigChangeListener:
    later = CHANGE_EXPIRATION_MS + 1  # every notification (ctime 0) has expired
    return ConfigChangeListener(cast(ZkClient, zk), on_change, now_ms=lambda: later)


def test_a_notification_that_fails_is_skipped_and_later_ones_applied() -> None:
    """Kafka's ZkNodeChangeNotificationListener wraps each notification in a Try. Here one
    that failed (a topic making an invalid znode path: kazoo's ValueError "relative paths
    not allowed") failed the whole pass, retried every second for good: no later config
    change was applied by any broker, and no expired notification was ever purged."""
    zk = ChangesZk()
    applied: list[str] = []

    def on_change(topic: str) -> None:
        if topic == "..":
            raise ValueError("relative paths not allowed")
        applied.append(topic)

    listener = listening(zk, on_change)
    zk.notify("topics/a")
    zk.notify("topics/..")
    zk.notify(b"\xff not json")
    zk.notify("topics/b")
    assert listener.process() == ["a", "b"]
    assert applied == ["a", "b"]
    assert zk.get_children(paths.CONFIG_CHANGES) == []  # all expired: purged
    zk.notify("topics/c")
    assert listener.process() == ["c"]  # nothing before it again
    assert applied == ["a", "b", "c"]


def test_zookeeper_out_of_reach_takes_the_pass_again() -> None:
    zk = ChangesZk()
    applied: list[str] = []
    lost = [True]

    def on_change(topic: str) -> None:
        if topic == "b" and lost[0]:
            raise ConnectionLoss()
        applied.append(topic)

    listener = listening(zk, on_change)
    zk.notify("topics/a")
    zk.notify("topics/b")
    with pytest.raises(ConnectionLoss):
        listener.process()
    assert len(zk.get_children(paths.CONFIG_CHANGES)) == 2  # nothing purged
    lost[0] = False
    failing = f"{paths.CONFIG_CHANGES}/{zk.notify('topics/c')}"
    zk.failing.add(failing)
    with pytest.raises(ConnectionLoss):
        listener.process()
    zk.failing.clear()
    assert listener.process() == ["a", "b", "c"]
    # The pass that lost the connection reading c applied nothing: a notification is read
    # before any topic is applied.
    assert applied == ["a", "a", "b", "c"]


def _changes_in(zk: FakeZk, count: int) -> list[str]:
    """``count`` notifications in ``zk``, made at ctime 0, their paths in order."""
    zk.put("/config", b"")
    zk.put(paths.CONFIG_CHANGES, b"")
    made = [f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}{n:010d}" for n in range(count)]
    for n, path in enumerate(made):
        zk.put(path, encode_config_change(f"topics/t{n}"))
    return made


def test_an_expired_notification_is_purged_with_whatever_is_under_it() -> None:
    """Kafka 2.8's purgeObsoleteNotifications deletes with deletePath, recursively. Here
    a child someone put under a notification (or a chain of them deeper than Python's
    recursion limit) failed its delete NotEmpty: every pass failed, retried every second
    on every broker, and no later notification was ever purged."""
    zk = FakeZk()
    first, second, _third = _changes_in(zk, 3)
    zk.put(first + "/stray", b"")
    deep = second
    for _ in range(1200):  # a chain deeper than the recursion limit
        deep += "/a"
        zk.put(deep, b"")
    applied: list[str] = []
    listener = listening(cast(Any, zk), applied.append)
    assert listener.process() == ["t0", "t1", "t2"]
    assert zk.children(paths.CONFIG_CHANGES) == []
    assert [p for p in zk.nodes if p.startswith(paths.CONFIG_CHANGES + "/")] == []


def test_a_purge_that_fails_is_logged_once_and_holds_no_other_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Kafka 2.8's processNotifications catches and logs a failed purge. A notification
    that cannot be deleted (here: no permission) neither fails the pass nor keeps later
    ones; it is tried again in later passes, its failure said once."""
    zk = FakeZk()
    first, _second = _changes_in(zk, 2)
    delete = zk.delete
    refused = [first]

    def refusing(path: str, version: int = -1) -> bool:
        if path in refused:
            raise NoAuthError()
        return delete(path, version)

    zk.delete = refusing  # type: ignore[method-assign]
    listener = listening(cast(Any, zk), lambda _topic: None)
    with caplog.at_level(logging.WARNING, logger="broker.config_changes"):
        for _ in range(3):
            listener.process()
    assert zk.children(paths.CONFIG_CHANGES) == [first.rsplit("/", 1)[1]]
    assert sum(first in r.getMessage() for r in caplog.records) == 1, caplog.text
    refused.clear()
    listener.process()
    assert zk.children(paths.CONFIG_CHANGES) == []
