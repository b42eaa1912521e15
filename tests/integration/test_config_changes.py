"""The broker's config change listener against a real ZooKeeper (/config/changes)."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import ConnectionLoss

from broker.config_changes import CHANGE_EXPIRATION_MS, ConfigChangeListener
from tests.integration.harness import wait_for
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import encode_config_change

pytestmark = pytest.mark.integration


def notify(zk: ZkClient, entity_path: str) -> str:
    created, _ = zk.create(
        f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
        encode_config_change(entity_path),
        sequential=True,
        make_parents=True,
    )
    return created.rsplit("/", 1)[1]


def test_notifications_are_applied_in_order_once_each_and_purged_when_expired(
    zk_connect: str,
) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    now = [0]
    applied: list[str] = []
    listener = ConfigChangeListener(zk, applied.append, now_ms=lambda: now[0])
    try:
        assert listener.process() == []  # no /config/changes yet
        first = notify(zk, "topics/a")
        notify(zk, "brokers/1")  # not a topic: nothing to apply
        zk.create(f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}", b"{", sequential=True)
        notify(zk, "topics/b")
        # A child someone put under one: deleted with it (Kafka's deletePath).
        zk.create(f"{paths.CONFIG_CHANGES}/{first}/stray/deeper", make_parents=True)
        now[0] = zk.get(f"{paths.CONFIG_CHANGES}/{first}")[1].ctime  # type: ignore[index]
        # The malformed one is reported and skipped; the others are applied in order.
        assert listener.process() == ["a", "b"]
        assert listener.process() == []  # nothing new: nothing applied twice
        notify(zk, "topics/a")
        last = notify(zk, "topics/a")
        assert listener.process() == ["a"]  # once a pass, however many name it
        assert applied == ["a", "b", "a"]
        # 15 minutes after the last, every notification seen is deleted (Kafka's purge),
        # and only those older than that before.
        newest = zk.get(f"{paths.CONFIG_CHANGES}/{last}")[1].ctime  # type: ignore[index]
        now[0] = newest + CHANGE_EXPIRATION_MS
        assert listener.process() == []
        assert last in (zk.get_children(paths.CONFIG_CHANGES) or [])
        now[0] += 1
        assert listener.process() == []
        assert zk.get_children(paths.CONFIG_CHANGES) == []
    finally:
        zk.close()


def test_a_change_that_fails_is_retried_and_a_watch_wakes_the_listener(zk_connect: str) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    applied: list[str] = []
    failures = [1]
    done = threading.Event()

    def apply(topic: str) -> None:
        if topic == "bad" and failures[0]:
            failures[0] -= 1
            raise ConnectionLoss("ZooKeeper unreachable (planted)")
        applied.append(topic)
        if topic == "last":
            done.set()

    listener = ConfigChangeListener(zk, apply)
    listener.start()
    try:
        notify(zk, "topics/bad")
        notify(zk, "topics/last")
        assert done.wait(30), applied
        # The one that met ZooKeeper out of reach was applied on the retry, before the one
        # after it (one failing otherwise is skipped: tests/unit/test_config_changes.py).
        assert applied == ["bad", "last"]
        notify(zk, "topics/later")
        wait_for(lambda: applied[-1] == "later", 30, "the watch to wake the listener")
    finally:
        listener.close()
        zk.close()
