"""A single background thread running delayed and periodic tasks (Kafka's KafkaScheduler,
with one thread): retention checks, flushes, checkpoints, delayed file deletion.

``run_pending(now_ms)`` runs whatever is due; tests call it directly with their own clock
instead of starting the thread.

Due times are on a monotonic clock by default, as KafkaScheduler's
ScheduledThreadPoolExecutor runs on System.nanoTime: a step of the wall clock back would
stall every flush, retention check and checkpoint for the step, and one forward would run
them all at once and delete files deferred for their readers early.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Scheduler", "monotonic_ms"]

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Task:
    due_ms: int
    seq: int
    name: str = field(compare=False)
    action: Callable[[], object] = field(compare=False)
    period_ms: int | None = field(compare=False, default=None)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Scheduler:
    def __init__(
        self, name: str = "log-manager", time_ms: Callable[[], int] = monotonic_ms
    ) -> None:
        """``time_ms``: the clock of the due times (monotonic; a test's own), which
        ``run_pending(now_ms)`` is given the times of."""
        self.name = name
        self._time_ms = time_ms
        self._tasks: list[_Task] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def schedule(
        self, name: str, action: Callable[[], object], delay_ms: int, period_ms: int | None = None
    ) -> None:
        """Run ``action`` in ``delay_ms``, then every ``period_ms`` if given.

        As Kafka's KafkaScheduler: a negative period runs the task once; a period of 0 is
        refused (scheduleAtFixedRate throws), for the task would be due again at once and
        spin the thread forever."""
        if period_ms == 0:
            raise ValueError(f"task {name}: a period of 0 ms would spin the scheduler")
        if period_ms is not None and period_ms < 0:
            period_ms = None
        with self._cond:
            due = self._time_ms() + max(delay_ms, 0)
            heapq.heappush(self._tasks, _Task(due, next(self._seq), name, action, period_ms))
            self._cond.notify()

    def defer(self, action: Callable[[], object], delay_ms: int) -> None:
        """``schedule`` for one-off actions (PartitionLog's ``defer``)."""
        self.schedule("deferred", action, delay_ms)

    def run_pending(self, now_ms: int | None = None) -> int:
        """Run every task due at ``now_ms`` (default: now); returns how many ran."""
        ran = 0
        while True:
            now = self._time_ms() if now_ms is None else now_ms
            with self._cond:
                if not self._tasks or self._tasks[0].due_ms > now:
                    return ran
                task = heapq.heappop(self._tasks)
                if task.period_ms is not None:
                    task.due_ms = now + task.period_ms
                    task.seq = next(self._seq)
                    heapq.heappush(self._tasks, task)
            try:
                task.action()
            except Exception:
                log.exception("background task %s failed", task.name)
            ran += 1

    def pending(self) -> list[str]:
        with self._cond:
            return [t.name for t in sorted(self._tasks)]

    def drain_one_offs(self) -> int:
        """Run every one-off task now, whatever its delay (at shutdown)."""
        with self._cond:
            one_offs = [t for t in self._tasks if t.period_ms is None]
            self._tasks = [t for t in self._tasks if t.period_ms is not None]
            heapq.heapify(self._tasks)
        for task in sorted(one_offs):
            try:
                task.action()
            except Exception:
                log.exception("background task %s failed", task.name)
        return len(one_offs)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                wait = 3600.0
                if self._tasks:
                    wait = min(max(self._tasks[0].due_ms - self._time_ms(), 0) / 1000, wait)
                if wait > 0:
                    self._cond.wait(timeout=wait)
            if self._is_stopping():
                return
            self.run_pending()

    def _is_stopping(self) -> bool:
        with self._cond:
            return self._stopping

    def close(self) -> None:
        """Stop the thread (a task already running finishes first)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
