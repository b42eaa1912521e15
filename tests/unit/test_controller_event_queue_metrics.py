"""The controller's event queue as Kafka 2.8's ControllerEventManager observes it: each
event's queue time (EventQueueTimeMs, in milliseconds, from the QueuedEvent's enqueue
time to when the event thread takes it), its size (EventQueueSize), percentiles of the
recent queue times, and a closed queue that queues nothing more (clearAndPut included)
and still stops its thread."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from controller import events as ev

TIMEOUT_S = 10


class Clock:
    """time.monotonic as the event manager reads it, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def run_until_shutdown(manager: ev.ControllerEventManager) -> None:
    """The event thread's loop, on a thread of the test's, until the queued shutdown."""
    t = threading.Thread(target=manager._run, daemon=True)
    t.start()
    t.join(TIMEOUT_S)
    assert not t.is_alive(), "the event loop did not stop at the queued shutdown"


def test_queue_time_is_in_milliseconds_from_enqueue_to_take(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(ev, "time", SimpleNamespace(monotonic=clock))
    seen: list[tuple[str | None, float]] = []
    manager = ev.ControllerEventManager(
        lambda e: seen.append((manager.current_event, manager.current_enqueued_at))
    )
    manager.put(ev.BrokerChange())  # enqueued at 100.0
    clock.now = 100.25
    manager.put(ev.TopicChange())  # enqueued at 100.25
    assert manager.queue_size == 2
    clock.now = 101.5  # both taken at 101.5
    manager.close()  # the thread never started: only the shutdown is queued
    run_until_shutdown(manager)
    # The running event's name, and when it was enqueued (not when it was taken).
    assert seen == [("BrokerChange", 100.0), ("TopicChange", 100.25)]
    assert manager.current_event is None
    stats = manager.queue_time.snapshot()
    assert stats["count"] == 2
    assert stats["max_ms"] == 1500.0
    assert manager.queue_size == 0


def test_queue_time_percentiles_are_of_the_recent_events_and_the_max_of_all() -> None:
    stats = ev.QueueTimeStats(keep=100)
    for ms in range(1000, 0, -1):  # the largest first: it leaves the recent ones
        stats.record(float(ms))
    assert stats.snapshot() == {
        "count": 1000,
        "recent": 100,
        "p50_ms": 51.0,
        "p99_ms": 99.0,
        "max_ms": 1000.0,
    }


def test_percentiles_of_one_hundred_queue_times() -> None:
    stats = ev.QueueTimeStats()
    for ms in range(1, 101):
        stats.record(float(ms))
    got = stats.snapshot()
    assert (got["p50_ms"], got["p99_ms"], got["max_ms"]) == (51.0, 99.0, 100.0)


def test_no_queue_time_yet() -> None:
    assert ev.QueueTimeStats().snapshot() == {
        "count": 0,
        "recent": 0,
        "p50_ms": 0.0,
        "p99_ms": 0.0,
        "max_ms": 0.0,
    }


def test_closing_twice_queues_one_shutdown() -> None:
    manager = ev.ControllerEventManager(lambda e: None)
    manager.close()
    manager.close()
    assert manager.queue_size == 1


def test_clearing_a_closed_queue_keeps_its_shutdown_and_queues_nothing() -> None:
    """Kafka's clearAndPut after the manager closed: the thread still stops, and the event
    put (a session expiry the ZooKeeper client reported late) is not queued."""
    seen: list[ev.ControllerEvent] = []
    manager = ev.ControllerEventManager(seen.append)
    dropped = manager.put(ev.TopicChange())
    manager.close()
    manager.clear_and_put(ev.Expire())
    assert manager.queue_size == 1  # the shutdown alone
    run_until_shutdown(manager)
    assert seen == []
    assert dropped.name == "TopicChange"
