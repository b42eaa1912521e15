"""Controller events (Kafka's ControllerEvent), and the one thread that processes them.

Watch callbacks, request handlers and timers only `put` events; the event thread runs
each to completion, in order, and is the only code that touches the controller's state.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.context import ReplicaAssignment
from zkdata.znodes import TopicPartition

log = logging.getLogger(__name__)


class ControllerEvent:
    """Base of every event. `preempt` runs instead of processing when the queue is cleared
    (session expiry), and after processing that failed (the controller moved, ZooKeeper
    failed, a bug): an event that owes someone an answer gives it there."""

    def preempt(self) -> None:
        return None

    @property
    def name(self) -> str:
        return type(self).__name__


@dataclass
class Startup(ControllerEvent):
    pass


@dataclass
class ControllerChange(ControllerEvent):
    pass


@dataclass
class Reelect(ControllerEvent):
    pass


@dataclass
class Expire(ControllerEvent):
    """The ZooKeeper session is gone (or unreachable for longer than its timeout)."""

    reason: str = "session expired"
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class RegisterBrokerAndReelect(ControllerEvent):
    pass


@dataclass
class Reconnected(ControllerEvent):
    """The same session is connected again after a disconnection."""


@dataclass
class ReelectAfterZkError(ControllerEvent):
    """An event failed on a ZooKeeper error that did not end the session (a request timed
    out, the connection dropped): this broker's `/controller`, if its session still holds
    it, is removed and the election looked at again, once ZooKeeper answers."""

    # Which session's: one queued before the session expired is void (the new session's
    # RegisterBrokerAndReelect registers the broker, then elects).
    sessions_ended: int = 0


@dataclass
class BrokerChange(ControllerEvent):
    pass


@dataclass
class BrokerModifications(ControllerEvent):
    broker_id: int


@dataclass
class TopicChange(ControllerEvent):
    pass


@dataclass
class PartitionModifications(ControllerEvent):
    topic: str


@dataclass
class TopicDeletion(ControllerEvent):
    pass


@dataclass
class IsrChangeNotification(ControllerEvent):
    pass


@dataclass
class LogDirEventNotification(ControllerEvent):
    """A broker wrote /log_dir_event_notification: a log directory of it failed."""


@dataclass
class PartitionReassignment(ControllerEvent):
    pass


@dataclass
class PartitionReassignmentIsrChange(ControllerEvent):
    topic_partition: TopicPartition


@dataclass
class ReassignmentIsrChanges(ControllerEvent):
    """The ISR changes of reassigned partitions (PartitionReassignmentIsrChange events
    gathered): those whose new replicas caught up are completed together."""


@dataclass
class PreferredReplicaElection(ControllerEvent):
    """Triggered by /admin/preferred_replica_election."""


@dataclass
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    pass


@dataclass
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    """A config change made unclean.leader.election.enable true for a topic: its offline
    partitions are elected again, now allowed an out-of-sync leader."""

    topic: str


class _FirstAnswer:
    """Which of an event's would-be answers (from any thread) is given: the first."""

    __slots__ = ("_given", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._given = False

    def claim(self) -> bool:
        with self._lock:
            if self._given:
                return False
            self._given = True
            return True


@dataclass
class _Request(ControllerEvent):
    """An event a request handler waits on: answered once, from any thread (the event
    thread, or whoever drops it from the queue)."""

    _once: _FirstAnswer = field(default_factory=_FirstAnswer, init=False, repr=False, compare=False)

    def _reply_once(self, reply: Callable[..., None], *answer: Any) -> bool:
        """``reply(*answer)`` unless an answer was given: the first wins. False if one was."""
        if not self._once.claim():
            return False
        reply(*answer)
        return True


# An ElectLeaders request's answer: each partition's (error code, message, leader).
ElectionReply = Callable[[Mapping[TopicPartition, tuple[int, str | None, int]]], None]


@dataclass
class ElectLeaders(_Request):
    """An admin's ElectLeaders request (Kafka's ReplicaLeaderElection, admin-triggered):
    ``partitions`` (None: all those of the controller's context; the admin APIs name each,
    so a refusal lists them) elected by ``election_type`` (0 preferred, 1 unclean)."""

    partitions: list[TopicPartition] | None
    election_type: int
    reply: ElectionReply

    def answer(self, results: Mapping[TopicPartition, tuple[int, str | None, int]]) -> bool:
        """Reply once (from any thread): the first answer wins. False if one was given."""
        return self._reply_once(self.reply, results)

    def preempt(self) -> None:
        from wire.errors import ErrorCode

        # Resigned, or dropped from the queue: the client asks the new controller.
        not_controller = (int(ErrorCode.NOT_CONTROLLER), "this broker is not the controller", -1)
        self.answer({tp: not_controller for tp in self.partitions or ()})


# An AlterPartitionReassignments answer: a top-level error (NONE, or NOT_CONTROLLER for
# every partition), and each partition's (error code, message) under NONE.
ReassignmentReply = Callable[[int, Mapping[TopicPartition, tuple[int, str | None]]], None]


@dataclass
class AlterPartitionReassignments(_Request):
    """An admin's AlterPartitionReassignments (Kafka's ApiPartitionReassignment): each
    partition's target replicas, or None to cancel its reassignment in progress."""

    reassignments: dict[TopicPartition, tuple[int, ...] | None]
    reply: ReassignmentReply

    def answer(
        self, error_code: int, results: Mapping[TopicPartition, tuple[int, str | None]]
    ) -> bool:
        """Reply once (from any thread): the first answer wins. False if one was given."""
        return self._reply_once(self.reply, error_code, results)

    def preempt(self) -> None:
        from wire.errors import ErrorCode

        self.answer(int(ErrorCode.NOT_CONTROLLER), {})


# A ListPartitionReassignments answer: a top-level error, and under NONE each listed
# partition's full replica set with the replicas being added and removed.
ListingReply = Callable[[int, Mapping[TopicPartition, ReplicaAssignment]], None]


@dataclass
class ListPartitionReassignments(_Request):
    """An admin's ListPartitionReassignments: the reassignments in progress among
    ``partitions`` (None: all of them), from the controller's context."""

    partitions: list[TopicPartition] | None
    reply: ListingReply

    def answer(self, error_code: int, listed: Mapping[TopicPartition, ReplicaAssignment]) -> bool:
        """Reply once (from any thread): the first answer wins. False if one was given."""
        return self._reply_once(self.reply, error_code, listed)

    def preempt(self) -> None:
        from wire.errors import ErrorCode

        self.answer(int(ErrorCode.NOT_CONTROLLER), {})


ShutdownReply = Callable[[int, list[TopicPartition]], None]


@dataclass
class ControlledShutdown(_Request):
    broker_id: int
    broker_epoch: int
    reply: ShutdownReply

    def answer(self, error_code: int, remaining: list[TopicPartition]) -> bool:
        """Reply once (from any thread): the first answer wins. False if one was given."""
        return self._reply_once(self.reply, error_code, remaining)

    def preempt(self) -> None:
        from wire.errors import ErrorCode

        # The broker asks again, the active controller this time, rather than waiting out
        # its request timeout (Kafka answers a failed controlled shutdown with the error).
        self.answer(int(ErrorCode.NOT_CONTROLLER), [])


@dataclass
class LeaderAndIsrResponseReceived(ControllerEvent):
    broker_id: int
    response: dict[str, Any]
    broker_epoch: int = -1  # the one the request was sent to


@dataclass
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    broker_id: int
    request_error: int
    partition_errors: dict[TopicPartition, int]  # those the answer lists, no others
    broker_epoch: int  # the one the request was sent to


@dataclass
class Probe(ControllerEvent):
    """Runs a function on the event thread (tests and metrics snapshots use it)."""

    fn: Callable[[], Any]
    result: list[Any] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


class _Shutdown(ControllerEvent):
    pass


@dataclass
class _Queued:
    event: ControllerEvent
    enqueued_at: float


class QueueTimeStats:
    """Queue time of the last events, for percentiles; cheap enough for every event."""

    def __init__(self, keep: int = 4096) -> None:
        self._recent: deque[float] = deque(maxlen=keep)
        self.count = 0
        self.max_ms = 0.0
        self._lock = threading.Lock()

    def record(self, ms: float) -> None:
        with self._lock:
            self._recent.append(ms)
            self.count += 1
            self.max_ms = max(self.max_ms, ms)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            values = sorted(self._recent)
            count, max_ms = self.count, self.max_ms
        if not values:
            return {"count": count, "recent": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": max_ms}

        def pct(p: float) -> float:
            return round(values[min(len(values) - 1, round(p * (len(values) - 1)))], 3)

        # The percentiles are of the ``recent`` events kept; ``count`` and the max of all.
        return {
            "count": count,
            "recent": len(values),
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "max_ms": round(max_ms, 3),
        }


class ControllerEventManager:
    """One FIFO queue and the one thread that runs `process(event)` for each event."""

    def __init__(
        self, process: Callable[[ControllerEvent], None], *, name: str = "controller-event-thread"
    ) -> None:
        self._process = process
        self._queue: queue.SimpleQueue[_Queued] = queue.SimpleQueue()
        self._put_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.queue_time = QueueTimeStats()
        self.process_time = QueueTimeStats()
        self.current_event: str | None = None
        # When the running event was enqueued (monotonic): when the controller learned of it.
        self.current_enqueued_at = 0.0
        self._closed = False

    def start(self) -> None:
        self._thread.start()

    @property
    def queue_size(self) -> int:
        return self._queue.qsize()

    def put(self, event: ControllerEvent) -> ControllerEvent:
        with self._put_lock:
            if not self._closed:
                self._queue.put(_Queued(event, time.monotonic()))
            else:
                event.preempt()
        return event

    def clear_and_put(self, event: ControllerEvent) -> ControllerEvent:
        """Drop every queued event (telling each it was pre-empted), then queue `event`."""
        with self._put_lock:
            while True:
                try:
                    drained = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(drained.event, _Shutdown):
                    self._queue.put(drained)
                    break
                try:
                    drained.event.preempt()
                except Exception:
                    log.exception("pre-empting %s failed", drained.event.name)
            if not self._closed:
                self._queue.put(_Queued(event, time.monotonic()))
        return event

    def run_on_thread(self, fn: Callable[[], Any], timeout_s: float = 30.0) -> Any:
        """Run `fn` on the event thread and return its result (for tests and snapshots)."""
        probe = Probe(fn)
        self.put(probe)
        if not probe.done.wait(timeout_s):
            raise TimeoutError("the controller event thread did not answer")
        return probe.result[0] if probe.result else None

    def close(self, timeout_s: float = 10.0) -> None:
        with self._put_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_Queued(_Shutdown(), time.monotonic()))
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            event = item.event
            if isinstance(event, _Shutdown):
                return
            started = time.monotonic()
            self.queue_time.record((started - item.enqueued_at) * 1000)
            self.current_event = event.name
            self.current_enqueued_at = item.enqueued_at
            try:
                if isinstance(event, Probe):
                    try:
                        event.result.append(event.fn())
                    finally:
                        event.done.set()
                else:
                    self._process(event)
            except Exception:
                # The event thread never dies: a failed event is logged, the next one runs.
                log.exception("error processing controller event %s", event.name)
            finally:
                self.current_event = None
                self.process_time.record((time.monotonic() - started) * 1000)
            # Not kept while waiting for the next: an event can hold a large response
            # (a LeaderAndIsr answer lists 10,000 partitions).
            del item, event
