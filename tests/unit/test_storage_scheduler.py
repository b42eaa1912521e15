"""The background scheduler: one-off and periodic tasks, as Kafka's KafkaScheduler runs them."""

from __future__ import annotations

import threading
import time

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

    def close() -> None:
        scheduler.close()
        closed.set()

    threading.Thread(target=close, daemon=True).start()
    assert closed.wait(5), "Scheduler.close() hung: the thread is spinning"
    assert runs in ([], [1])


class SteppedWallClock:
    """time.time() stepped by the test (an NTP correction)."""

    def __init__(self) -> None:
        self.step_s = 0.0
        self._real = time.time

    def __call__(self) -> float:
        return self._real() + self.step_s


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> SteppedWallClock:
    clock = SteppedWallClock()
    monkeypatch.setattr(time, "time", clock)
    return clock


def test_a_wall_clock_step_back_does_not_stall_the_tasks(wall: SteppedWallClock) -> None:
    """The default clock is monotonic, as Kafka's KafkaScheduler (a
    ScheduledThreadPoolExecutor, on System.nanoTime): the wall clock stepped back an hour
    stalls no flush, retention check or checkpoint for the hour."""
    scheduler = Scheduler()
    runs: list[int] = []
    scheduler.schedule("periodic", lambda: runs.append(1), 20, 20)
    wall.step_s = -3600
    time.sleep(0.05)
    assert scheduler.run_pending() == 1
    time.sleep(0.05)
    assert scheduler.run_pending() == 1
    assert runs == [1, 1]


def test_a_wall_clock_step_forward_runs_nothing_early(wall: SteppedWallClock) -> None:
    """A deferred deletion (log.segment.delete.delay.ms: readers may still use the files)
    is not run early by a step of the wall clock forward, nor a periodic task at once."""
    scheduler = Scheduler()
    runs: list[str] = []
    scheduler.defer(lambda: runs.append("deleted"), 60_000)
    scheduler.schedule("periodic", lambda: runs.append("periodic"), 30_000, 30_000)
    wall.step_s = 3600
    assert scheduler.run_pending() == 0
    assert runs == []


def test_the_thread_runs_tasks_across_a_wall_clock_step_back(wall: SteppedWallClock) -> None:
    scheduler = Scheduler()
    ran = threading.Event()
    scheduler.start()
    try:
        scheduler.schedule("soon", ran.set, 200)
        wall.step_s = -3600  # after its due time was taken
        assert ran.wait(5), "a task due in 200 ms did not run"
    finally:
        scheduler.close()
