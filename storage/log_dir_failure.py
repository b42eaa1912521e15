"""Failed log directories, as they are found (Kafka's LogDirFailureChannel, KIP-112).

Any code that meets an I/O error in a log directory calls
``maybe_add_offline_log_dir``; the directory is queued once, however many operations
fail in it, and the broker's log dir failure handler thread takes it from the queue and
stops serving it (``ReplicaManager.handle_log_dir_failure``). The report takes only this
channel's own lock, held for a set insertion, so it is safe from any code path, whatever
log, log manager or replica manager lock that path already holds.
"""

from __future__ import annotations

import logging
import queue
import threading

__all__ = ["LogDirFailureChannel"]

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    """The log directories found failed, each queued once for the failure handler."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: the failed directories (as reported: str paths). Only ever grows, so it may be
        #: read without the lock; empty (falsy) while every directory is online.
        self.offline_dirs: set[str] = set()
        self._queue: queue.SimpleQueue[str] = queue.SimpleQueue()

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, error: BaseException) -> None:
        """``log_dir`` failed (``message`` says in what): queue it for the failure handler
        unless it already was. Never raises, never blocks on anything but a set."""
        with self._lock:
            first = log_dir not in self.offline_dirs
            if first:
                self.offline_dirs.add(log_dir)
        if first:
            log.error("%s; log directory %s is going offline", message, log_dir, exc_info=error)
            self._queue.put(log_dir)
        else:
            # Already queued: one line, no traceback (every produce to its partitions
            # fails the same way until the handler has taken them offline).
            log.error("%s (log directory %s is offline)", message, log_dir)

    def mark_offline(self, log_dir: str, message: str) -> None:
        """``log_dir`` is offline from the broker's start (it could not be created,
        locked or read): logged, not queued, since no partition of it was ever served
        (the controller learns of them from the LeaderAndIsr answers)."""
        with self._lock:
            self.offline_dirs.add(log_dir)
        log.error("%s", message)

    def has_offline_log_dir(self, log_dir: str) -> bool:
        return log_dir in self.offline_dirs

    def offline(self) -> list[str]:
        """The failed directories, sorted (a copy: iterate this, not ``offline_dirs``)."""
        with self._lock:
            return sorted(self.offline_dirs)

    def take_next_offline_log_dir(self, timeout_s: float | None = None) -> str | None:
        """The next failed directory, waiting at most ``timeout_s`` (None if none came)."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
