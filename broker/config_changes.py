"""Topic config changes reach running brokers, as in Kafka (ZkNodeChangeNotificationListener
and TopicConfigHandler).

A tool that changes a topic's overrides in /config/topics/<t> (`zkctl topic alter-config`,
kafka-configs.sh) also creates a sequential /config/changes/config_change_<n> naming the
topic, in the same multi. Every broker watches the children of /config/changes, reads the
notifications newer than the last it processed, in sequence order, and applies each named
topic's config as it now is in ZooKeeper: its logs roll, retain and flush by it, its
produce checks use its min.insync.replicas, and, on the controller's broker, a topic whose
unclean.leader.election.enable became true has its offline partitions elected again.
Notifications older than 15 minutes are deleted, with whatever is under them, by whichever
broker sees them (Kafka's changeExpirationMs); one that cannot be deleted is logged once
and tried again in later passes. A broker starting reads every topic's config afresh
anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from kazoo.exceptions import ConnectionClosedError
from kazoo.protocol.states import WatchedEvent

from zkdata import paths
from zkdata.client import ZOOKEEPER_UNAVAILABLE, ZkClient
from zkdata.tree import subtrees_leaves_first
from zkdata.znodes import MalformedZnode, decode_config_change

log = logging.getLogger(__name__)

# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
# After a failed pass (ZooKeeper unreachable): the next try, unless a watch fires first.
RETRY_S = 1.0
# What fails a pass, to be taken again: ZooKeeper out of reach (or the client closed, as
# the broker stops). Anything else fails one notification only.
RETRIED: tuple[type[Exception], ...] = (*ZOOKEEPER_UNAVAILABLE, ConnectionClosedError)


def notification_sequence(name: str) -> int | None:
    """config_change_0000000012 -> 12; None for a child of any other name."""
    if not name.startswith(paths.CONFIG_CHANGE_PREFIX):
        return None
    digits = name[len(paths.CONFIG_CHANGE_PREFIX) :]
    # A Java long at most (Kafka's toLong): int() refuses past 4,300 digits anyway.
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
        return None
    return int(digits)


def pending_notifications(children: Iterable[str], last_processed: int) -> list[tuple[int, str]]:
    """The notifications after ``last_processed``, as (sequence, name), in sequence order."""
    found = ((notification_sequence(name), name) for name in children)
    return sorted((seq, name) for seq, name in found if seq is not None and seq > last_processed)


def topic_of(entity_path: str) -> str | None:
    """The topic of an entity path ("topics/t"); None for other entities (brokers, users,
    clients: configs this project does not model)."""
    kind, _, name = entity_path.partition("/")
    return name if kind == "topics" and name and "/" not in name else None


class ConfigChangeListener:
    """Watches /config/changes and calls ``on_topic_change(topic)`` for the topics of the
    notifications newer than the last processed, in order, each once a pass, on a thread
    of its own (the watch callback only wakes it). A pass that meets ZooKeeper out of reach
    (reading a notification, or in a call) is taken again whole (applying a topic's config
    twice changes nothing); any other failure of one notification is logged and that
    notification skipped, as Kafka's ZkNodeChangeNotificationListener wraps each in a Try:
    one bad notification must not hold every later config change back, on every broker."""

    def __init__(
        self,
        zk: ZkClient,
        on_topic_change: Callable[[str], None],
        *,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.zk = zk
        self.on_topic_change = on_topic_change
        self._now_ms = now_ms
        self._last_processed = -1
        self._created_ms: dict[str, int] = {}  # processed notifications still there
        self._purge_failed: set[str] = set()  # of those, the ones whose delete failed
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-changes", daemon=True)

    def start(self) -> None:
        self.zk.register_handler(paths.CONFIG_CHANGES, self._on_watch)
        self.zk.add_state_listener(self._on_state)
        self._wake.set()
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self.zk.unregister_handler(paths.CONFIG_CHANGES, self._on_watch)
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _on_watch(self, event: WatchedEvent) -> None:
        self._wake.set()

    def _on_state(self, state: str) -> None:
        # A new session has no watches: look again (and re-arm). Harmless otherwise.
        if state == "CONNECTED":
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.process()
            except Exception as e:
                log.warning("topic config changes not processed yet (%r); retrying", e)
                if self._stop.wait(RETRY_S):
                    return
                self._wake.set()

    def process(self) -> list[str]:
        """One pass: the new notifications' topics, each applied in turn (those applied
        returned), and the expired notifications deleted."""
        children = self.zk.get_children(paths.CONFIG_CHANGES, watch=True)
        if children is None:  # not made yet: the watch is on its creation
            return []
        pending = pending_notifications(children, self._last_processed)
        # Each topic once a pass, however many notifications name it (a broker starting
        # reads up to 15 minutes of them): its config is read as it is now anyway.
        topics: dict[str, str] = {}
        for _sequence, name in pending:
            path = f"{paths.CONFIG_CHANGES}/{name}"
            try:
                got = self.zk.get(path)
                if got is None:
                    continue
                self._created_ms[name] = got[1].ctime
                topic = topic_of(decode_config_change(path, got[0]))
            except RETRIED:
                raise  # the whole pass is taken again
            except MalformedZnode as e:
                log.error("%s; skipping the notification", e)
                continue
            except Exception:
                log.exception("reading the config change notification %s failed; skipping it", path)
                continue
            if topic is not None:
                topics.setdefault(topic, name)
        applied = []
        for topic, name in topics.items():
            log.info("config of topic %s changed (%s)", topic, name)
            try:
                self.on_topic_change(topic)
            except RETRIED:
                raise  # the whole pass is taken again
            except Exception:
                log.exception(
                    "applying the config change %s of topic %r failed; skipping it", name, topic
                )
                continue
            applied.append(topic)
        if pending:
            self._last_processed = pending[-1][0]
        self._purge(children)
        return applied

    def _purge(self, children: list[str]) -> None:
        present = set(children)
        self._created_ms = {n: ms for n, ms in self._created_ms.items() if n in present}
        self._purge_failed = {n for n in self._purge_failed if n in self._created_ms}
        expired = [
            name
            for name, created in self._created_ms.items()
            if self._now_ms() - created > CHANGE_EXPIRATION_MS
        ]
        for name in expired:
            path = f"{paths.CONFIG_CHANGES}/{name}"
            try:
                # With whatever is under it, as Kafka's deletePath (deleteRecursive): a
                # child someone put there failed the delete (NotEmpty), every pass.
                for znode in subtrees_leaves_first(self.zk, [path]):
                    self.zk.delete(znode)
            except RETRIED:
                raise  # the whole pass is taken again
            except Exception as e:
                # Kafka logs a failed purge and goes on. Tried again in later passes (a
                # new notification's), said once.
                if name not in self._purge_failed:
                    self._purge_failed.add(name)
                    log.warning("could not delete the expired notification %s: %r", path, e)
                continue
            del self._created_ms[name]
