"""The reader thread and the callbacks of `zkctl watch`'s ZooKeeper source
(watch/zk_source.py), over an in-memory ZooKeeper: a connection state change is reported
and, when the connection comes back, everything is read (and watched) again; nothing is
read while it is away; a lost connection is no read failure to report; a summary is
emitted when asked for, and only then; stopping leaves no handler behind."""

from __future__ import annotations

import threading

from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from tests.unit.fake_zk import FakeZk
from tests.unit.test_watch_source import a_cluster
from watch.model import (
    CONNECTED,
    LOST,
    SUSPENDED,
    ConnectionSeen,
    Observation,
    ProblemsSeen,
    SummaryRequested,
)
from watch.zk_source import ALL_GROUPS, PARTITIONS, READ, TOPICS, ZkSource, groups_for
from zkdata import paths

DEADLINE = 10.0  # only to catch a hang


class Zk(FakeZk):
    connected = True


def a_source(connected: bool = True) -> tuple[Zk, ZkSource, list[Observation]]:
    zk = Zk()
    zk.nodes = a_cluster(1, (1, 2)).nodes
    zk.connected = connected
    seen: list[Observation] = []
    lock = threading.Lock()

    def emit(observations: list[Observation]) -> None:
        with lock:
            seen.extend(observations)

    return zk, ZkSource(zk, emit), seen  # type: ignore[arg-type]


def test_the_connection_s_states_are_reported_and_its_return_reads_all_again() -> None:
    _zk, src, seen = a_source()
    src._refresh(ALL_GROUPS)
    assert src.armed_paths()
    src._on_state("SUSPENDED")
    # kazoo drops the watch callbacks with the connection: every watch is to be set again.
    assert src.armed_paths() == set()
    assert [src._connected] == [False]
    src._on_state("LOST")
    src._dirty.clear()
    src._on_state("CONNECTED")
    assert [src._connected] == [True]
    assert src._dirty == ALL_GROUPS
    src._on_state("CLOSED")  # our own close: nothing to report
    states = [o.state for o in seen if isinstance(o, ConnectionSeen)]
    assert states == [SUSPENDED, LOST, CONNECTED]


def test_a_watch_event_without_a_path_marks_nothing() -> None:
    """A session event (a state change) comes to a watcher with no path."""
    _zk, src, _seen = a_source()
    src._on_watch(WatchedEvent(EventType.NONE, KeeperState.CONNECTED, None))
    assert src._dirty == set()
    src._on_watch(WatchedEvent(EventType.CHILD, KeeperState.CONNECTED, paths.DELETE_TOPICS))
    assert src._dirty == {TOPICS, PARTITIONS}


def test_the_deletion_queue_firing_reads_the_topics_again() -> None:
    assert groups_for(paths.DELETE_TOPICS) == {TOPICS, PARTITIONS}


def test_nothing_is_read_while_the_connection_is_away() -> None:
    """A summary asked for then is emitted, but no read is tried until the connection
    comes back."""
    _zk, src, _seen = a_source(connected=False)
    summarised = threading.Event()
    emit = src._emit

    def watching(observations: list[Observation]) -> None:
        emit(observations)
        if any(isinstance(o, SummaryRequested) for o in observations):
            summarised.set()

    src._emit = watching
    src.start()
    try:
        src.request_summary()
        assert summarised.wait(DEADLINE)
    finally:
        src.stop()
    assert src.refreshes == 0
    assert src._dirty == ALL_GROUPS
    assert not src.ready.is_set()


def test_a_summary_is_emitted_when_asked_for_and_only_then() -> None:
    _zk, src, seen = a_source()
    src.start()
    try:
        assert src.ready.wait(DEADLINE)
        assert not [o for o in seen if isinstance(o, SummaryRequested)]
        src.request_summary()  # the thread waits for nothing else: the request wakes it
        for _ in range(int(DEADLINE / 0.05)):
            if [o for o in seen if isinstance(o, SummaryRequested)]:
                break
            threading.Event().wait(0.05)
    finally:
        src.stop()
    assert len([o for o in seen if isinstance(o, SummaryRequested)]) == 1


def test_a_lost_connection_is_no_read_failure_to_report() -> None:
    """It is reported as a connection state (by kazoo's listener); the read is tried
    again."""
    zk, src, seen = a_source()
    zk.fail_next = [ConnectionLoss()]
    src.start()
    try:
        assert src.ready.wait(DEADLINE)
    finally:
        src.stop()
    failures = [o for o in seen if isinstance(o, ProblemsSeen) and o.scope == READ and o.problems]
    assert failures == []


def test_a_read_failure_is_reported() -> None:
    zk, src, seen = a_source()
    zk.fail_next = [RuntimeError("bad answer")]
    src.start()
    try:
        assert src.ready.wait(DEADLINE)
    finally:
        src.stop()
    failures = [o for o in seen if isinstance(o, ProblemsSeen) and o.scope == READ and o.problems]
    assert len(failures) == 1
    assert "RuntimeError: bad answer" in failures[0].problems[READ]


def test_stopping_unregisters_every_handler() -> None:
    zk, src, _seen = a_source()
    src.start()
    try:
        assert src.ready.wait(DEADLINE)
        assert any(zk.handlers.values())
    finally:
        src.stop()
    assert not any(zk.handlers.values()), {p: h for p, h in zk.handlers.items() if h}


def test_nothing_is_emitted_once_stopped_and_the_work_is_all_taken() -> None:
    zk, src, seen = a_source()
    src.start()
    try:
        assert src.ready.wait(DEADLINE)
        with src._cond:
            assert src._dirty == set()  # taken, not read over and over
    finally:
        src.stop()
    n = len(seen)
    for listener in zk.listeners:
        listener("SUSPENDED")
    assert len(seen) == n


def test_a_read_failing_as_the_source_stops_is_not_reported() -> None:
    """Stopping closes the ZooKeeper client under a read in flight: its failure is the
    stop, not a problem to show (nor to wait a retry for)."""
    zk, src, seen = a_source()

    def stopping_then_failing() -> None:
        with src._cond:
            src._stopping = True
            src._cond.notify_all()
        raise RuntimeError("the client was closed")

    real = zk.get_many

    def get_many(*args: object, **kwargs: object) -> object:
        stopping_then_failing()
        return real(*args, **kwargs)  # type: ignore[arg-type]

    zk.get_many = get_many  # type: ignore[method-assign,assignment]
    src.start()
    src._thread.join(DEADLINE)
    assert not src._thread.is_alive()
    src.stop()
    assert [o for o in seen if isinstance(o, ProblemsSeen)] == []
