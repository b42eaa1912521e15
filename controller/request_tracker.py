"""An event's broker requests counted until every broker answered them.

The controller hands each event's requests to the channel through one tracker; the
channel's sender threads call ``written``, ``ack`` and ``abandon``. When the last one is
answered, one ``requests_acknowledged`` line goes to the state-change log: how long the
event took from when the controller learned of it until every broker acknowledged
(what the benchmarks read), by API and by broker.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from broker.state_change_log import StateChangeLog
from controller.request_batch import BrokerRequest

__all__ = ["RequestTracker"]


class RequestTracker:
    """Counts the broker requests one event sent until every broker has answered, then
    logs how long that took from when the controller learned of the event."""

    def __init__(self, event: str, learned_at: float, log: StateChangeLog, epoch: int) -> None:
        self.event = event
        self.learned_at = learned_at  # monotonic
        self.learned_at_ms = time.time() * 1000 - (time.monotonic() - learned_at) * 1000
        self.log = log
        self.epoch = epoch
        self.sent: dict[str, int] = {}
        # When each API's requests were last written to a broker's socket (the last
        # broker's copy), and answered: a failover's UpdateMetadata sent, then applied.
        self.written_at: dict[str, float] = {}
        self.acked_at: dict[str, float] = {}
        self.acked_at_by_broker: dict[int, float] = {}
        self.abandoned = 0
        self.closed = False  # no more requests will be added (the event finished)
        self._lock = threading.Lock()
        # Unanswered requests per send of the event (requests a channel drops for newer
        # ones are answered with them, as copies: so counted by round, not by object),
        # and who waits for the sends up to a round (see when_answered).
        self._round = 0
        self._pending_by_round: dict[int, int] = {}
        self._waiting: list[tuple[int, Callable[[], None]]] = []

    def track(self, requests: list[BrokerRequest]) -> list[BrokerRequest]:
        """The requests of one send, marked as this event's: count them until answered."""
        with self._lock:
            self._round += 1
            tracked = [
                dataclasses.replace(r, tracker=self, tracker_round=self._round) for r in requests
            ]
            for r in tracked:
                self.sent[r.api_key.name] = self.sent.get(r.api_key.name, 0) + 1
            if tracked:
                self._pending_by_round[self._round] = len(tracked)
        return tracked

    def when_answered(self, fn: Callable[[], None]) -> None:
        """Call `fn` (on whichever thread answers last) once every request sent until now
        is answered or abandoned; requests sent later, and the rest of the event, are not
        waited for. At once if that has happened."""
        with self._lock:
            self._waiting.append((self._round, fn))
            ready = self._take_ready()
        for ready_fn in ready:
            ready_fn()

    def _answered(self, request: BrokerRequest) -> tuple[list[Callable[[], None]], bool]:
        """Under the lock: count `request` answered. Returns the waiters it was the last
        one for, and whether it was the event's last (then the event is logged)."""
        left = self._pending_by_round.get(request.tracker_round)
        if left is None:
            return [], False  # its send was all answered already: said twice
        if left > 1:
            self._pending_by_round[request.tracker_round] = left - 1
            return [], False
        del self._pending_by_round[request.tracker_round]
        return self._take_ready(), self.closed and not self._pending_by_round

    def _take_ready(self) -> list[Callable[[], None]]:
        if not self._waiting:
            return []
        first_unanswered = min(self._pending_by_round, default=self._round + 1)
        ready = [fn for upto, fn in self._waiting if upto < first_unanswered]
        if ready:
            self._waiting = [(upto, fn) for upto, fn in self._waiting if upto >= first_unanswered]
        return ready

    def close(self) -> None:
        with self._lock:
            self.closed = True
            done = not self._pending_by_round
            sent = bool(self.sent)
            ready = self._take_ready()
        for fn in ready:
            fn()
        if done and sent:
            self._finish()

    def written(self, request: BrokerRequest) -> None:
        """The channel wrote ``request`` to its broker's socket (called on its thread)."""
        now = time.monotonic()
        with self._lock:
            self.written_at[request.api_key.name] = now

    def ack(self, request: BrokerRequest) -> None:
        now = time.monotonic()
        with self._lock:
            self.acked_at[request.api_key.name] = now
            self.acked_at_by_broker[request.broker_id] = now
            ready, done = self._answered(request)
        for fn in ready:
            fn()
        if done:
            self._finish()

    def abandon(self, request: BrokerRequest) -> None:
        """A request whose broker left before answering: it will never be acknowledged."""
        with self._lock:
            self.abandoned += 1
            ready, done = self._answered(request)
        for fn in ready:
            fn()
        if done:
            self._finish()

    def _finish(self) -> None:
        last = max(self.acked_at.values(), default=time.monotonic())
        self.log.write(
            "requests_acknowledged",
            controller_epoch=self.epoch,
            after_event=self.event,
            learned_at_ms=round(self.learned_at_ms, 1),
            requests=self.sent,
            sent_ms_by_api={
                k: round((v - self.learned_at) * 1000, 1) for k, v in self.written_at.items()
            },
            acked_ms=round((last - self.learned_at) * 1000, 1),
            acked_ms_by_api={
                k: round((v - self.learned_at) * 1000, 1) for k, v in self.acked_at.items()
            },
            acked_ms_by_broker={
                str(b): round((v - self.learned_at) * 1000, 1)
                for b, v in sorted(self.acked_at_by_broker.items())
            },
            abandoned=self.abandoned,
        )
