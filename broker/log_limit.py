"""Logging a problem that recurs at every request without flooding the log."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class OncePer:
    """Whether a recurring problem of a key is to be logged now: the first time, then at
    most once per ``interval_s`` (a follower retrying a damaged partition every
    replica.fetch.backoff.ms, a consumer polling it, would otherwise write the same lines
    many times a second). Keys not seen for an interval are forgotten as new ones come."""

    __slots__ = ("_clock", "_interval", "_last", "_lock")

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def __call__(self, key: Hashable) -> bool:
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self._interval:
                return False
            if len(self._last) >= 1024:  # bounded: forget those not seen for an interval
                self._last = {k: t for k, t in self._last.items() if now - t < self._interval}
            self._last[key] = now
            return True
