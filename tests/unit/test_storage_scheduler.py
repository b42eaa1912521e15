"""The background scheduler: one-off and periodic tasks, as Kafka's KafkaScheduler runs them."""

from __future__ import annotations

import threading

import pytest

from storage.scheduler import Scheduler

NOW = 1_700_000_000_000


def test_a_periodic_task_runs_every_period() -> None:
    scheduler = Scheduler(time_ms=lambda: NOW)
    runs: list[int] = []
    scheduler.schedule("tick", lambda: runs.append(1), 10, 100)
    assert scheduler.run_pending(NOW + 9) == 0
    assert scheduler.run_pending(NOW + 10) == 1
    assert scheduler.run_pending(NOW + 109) == 0
    assert scheduler.run_pending(NOW + 110) == 1
    assert runs == [1, 1]


@pytest.mark.timeout(10)  # the task used to be due again at once: run_pending never returned
def test_a_negative_period_runs_the_task_once() -> None:
    # KafkaScheduler.schedule: a period >= 0 is scheduleAtFixedRate, a negative one a
    # single run after the delay.
    scheduler = Scheduler(time_ms=lambda: NOW)
    runs: list[int] = []
    scheduler.schedule("once", lambda: runs.append(1), 10, -1)
    assert scheduler.run_pending(NOW + 10) == 1
    assert scheduler.run_pending(NOW + 10_000) == 0
    assert runs == [1]
    assert scheduler.pending() == []


def test_a_period_of_zero_is_refused() -> None:
    # scheduleAtFixedRate throws IllegalArgumentException for a period of 0; here a task
    # due again at once would spin the scheduler's thread forever.
    scheduler = Scheduler(time_ms=lambda: NOW)
    with pytest.raises(ValueError, match="spin"):
        scheduler.schedule("spin", lambda: None, 0, 0)
    assert scheduler.pending() == []


def test_the_thread_stops_with_a_negative_period_task_scheduled() -> None:
    scheduler = Scheduler()
    runs: list[int] = []
    scheduler.schedule("once", lambda: runs.append(1), 0, -5)
    scheduler.start()
    closed = threading.Event()
    threading.Thread(target=lambda: (scheduler.close(), closed.set()), daemon=True).start()
    assert closed.wait(5), "Scheduler.close() hung: the thread is spinning"
    assert runs in ([], [1])
