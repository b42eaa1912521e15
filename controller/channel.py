"""The controller's channel to brokers (ControllerChannelManager).

One queue and one sender thread per broker: requests to a broker leave in the order the
controller decided them (LeaderAndIsr before the UpdateMetadata that follows it), and a
slow or dead broker holds up nobody else. A request is retried with backoff (tenacity)
until it is answered or its broker is removed from the channel; the answer goes to a
callback, which only enqueues a controller event.

A broker removed from the channel (dead, or bounced: a new incarnation) has its sender
stopped as Kafka's RequestSendThread is shut down: its connection is closed under the
request in flight, and no answer is delivered after stop() returns (the request is
reported abandoned instead). A late answer would reach a controller that has moved on: a
StopReplica meant for the broker's earlier incarnation, answered STALE_BROKER_EPOCH by
the new one, failed the deletion the new one had just been asked to make. A live broker
that registers other endpoints (the same incarnation) keeps its sender and its queue: the
sender moves to the new address, and sends the request in flight there again first.

UpdateMetadata that waits in a broker's queue is dropped when newer UpdateMetadata queued
right behind it says everything it says (each of its partitions, newer, and the live
brokers, newer): sending both one after the other would leave the broker where the newer
alone does. A broker busy for a while (creating 100,000 logs at a cold start) would
otherwise make the controller hold several full copies of the cluster's metadata for it.
The dropped request is reported answered when the one that replaced it is.

A newer incremental UpdateMetadata's rows for partitions that one waiting carries too go
into that one instead (_hand_rows_forward): a broker busy applying 100,000 new logs is
otherwise sent, and the controller holds for it meanwhile, a row for each ISR change of
each partition, in requests of a few thousand partitions that no newer one repeats whole.
Rows go past the LeaderAndIsr and StopReplica waiting between them that do not name their
partitions: where leaderships move while a broker is slow, its queue interleaves those
with UpdateMetadata.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from controller.events import QueueTimeStats
from controller.request_batch import (
    BrokerRequest,
    UpdateMetadataRow,
    update_metadata_scope,
    with_update_metadata_rows,
)
from wire.api import ApiKey, UpdateMetadataType
from wire.client import KafkaConnection, KafkaConnectionError
from wire.protocol import EncodedBody, request_codec

log = logging.getLogger(__name__)

ResponseCallback = Callable[[BrokerRequest, dict[str, Any]], None]
# A request that will never be answered: its broker left the channel first.
AbandonCallback = Callable[[BrokerRequest], None]


class _Stopped(Exception):
    pass


@dataclass
class _Sent:
    requests: int = 0
    retries: int = 0
    superseded: int = 0  # UpdateMetadata dropped for newer ones queued behind them


@dataclass(slots=True)
class _Queued:
    request: BrokerRequest | None  # None: the stop signal
    enqueued_at: float = 0.0  # monotonic, for the queue time
    # Requests this one replaced: answered or abandoned with it (their bodies dropped).
    superseded: list[BrokerRequest] = dataclasses.field(default_factory=list)
    # Newer ones it took the rows of (_hand_rows_forward): answered or abandoned after it.
    absorbed: list[BrokerRequest] = dataclasses.field(default_factory=list)
    # Whether some of its rows went into a request waiting before it (_hand_rows_forward):
    # its answer then waits for that one's too.
    rows_sent_before: bool = False
    # False once its own request is answered with another (see _supersede): it is sent,
    # and not told of.
    answered_here: bool = True

    def told(self) -> tuple[BrokerRequest, ...]:
        """The requests told of this one's fate, in order."""
        own = (self.request,) if self.request is not None and self.answered_here else ()
        return (*self.superseded, *own, *self.absorbed)


# Requests a newer UpdateMetadata row may go past (for partitions they do not name), to
# an UpdateMetadata waiting before them.
_ROWS_GO_PAST = frozenset((ApiKey.UPDATE_METADATA, ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA))


def _is_update_metadata(q: _Queued) -> bool:
    return q.request is not None and q.request.api_key == ApiKey.UPDATE_METADATA


def _covered_by(newer: Iterable[BrokerRequest]) -> dict[str, dict[int, bool]]:
    """topic -> partition -> whether the newer rows mark it being deleted."""
    covered: dict[str, dict[int, bool]] = {}
    for r in newer:
        for row in r.update_metadata_rows or ():
            parts = covered.get(row[0])
            if parts is None:
                parts = covered[row[0]] = {}
            parts[row[1]] = row[5] or parts.get(row[1], False)
    return covered


def _says_nothing_more(request: BrokerRequest, covered: dict[str, dict[int, bool]]) -> bool:
    rows = request.update_metadata_rows
    if rows is None:
        return False  # not built from rows: nothing to compare
    no_parts: dict[int, bool] = {}
    for topic, partition, *_, during_delete in rows:
        newer = covered.get(topic, no_parts).get(partition)
        # A topic marked deleted says so only once: a broker hosting none of its replicas
        # learns of the deletion from it alone (its group offsets and orphaned logs go),
        # and the topic made again under the name must not hide it.
        if newer is None or (during_delete and not newer):
            return False
    return True


def _stripped(request: BrokerRequest) -> BrokerRequest:
    """What the callbacks need of a dropped request, without its rows and body."""
    return dataclasses.replace(
        request,
        make_body=_dropped_body,
        shared=None,
        update_metadata_rows=None,
    )


def _dropped_body() -> dict[str, Any]:
    raise RuntimeError("a superseded request is never sent")


def _hand_rows_forward(
    waiting: Iterable[_Queued], newer: list[BrokerRequest]
) -> list[BrokerRequest] | None:
    """Hand the newer incremental UpdateMetadata's rows to the UpdateMetadata ``waiting``
    (a broker's queue, newest first) for partitions they carry too: the last of those to
    be sent carries the newer row in place of its own, and the newer request goes without
    it. A row goes past a LeaderAndIsr or StopReplica waiting that does not name its
    partition (one that does must reach the broker before the metadata that follows it),
    and past no other request. The broker learns each partition's newest state as
    early as before and no later than it would have; it ends where sending everything
    would leave it. A broker busy for minutes (applying 100,000 new logs) is otherwise
    sent a row for each change of a partition's ISR, each held by the controller until
    sent: 170,000 rows and more for one broker, measured.

    A row stays where it is when the request waiting does not name its leader among the
    live brokers or has another id for its topic (the broker would read a leader it has
    no address for, or mix two topics of one name), when either marks the topic being
    deleted (a deletion's mark is said once, see _says_nothing_more, and a row of the
    topic made again must not go before it), or when the topic has no id (the controller
    gives every topic one; without, two topics of one name are not told apart). Returns
    ``newer`` with the rows handed on taken out, or None when none was."""
    offered: dict[str, dict[int, tuple[UpdateMetadataRow, Mapping[str, uuid.UUID]]]] = {}
    for r in newer:
        scope = update_metadata_scope(r)
        if r.update_metadata_type != UpdateMetadataType.INCREMENTAL or scope is None:
            return None
        for row in r.update_metadata_rows or ():
            if not row[5]:
                offered.setdefault(row[0], {})[row[1]] = (row, scope.topic_ids)
    if not offered:
        return None
    undecided = sum(map(len, offered.values()))
    handed: dict[str, set[int]] = {}
    for q in waiting:  # newest first: a partition goes to the last waiting that has it
        if not undecided:
            break
        request = q.request
        if request is None or request.api_key not in _ROWS_GO_PAST:
            break  # the stop signal, or a request whose partitions are not known here
        if request.api_key != ApiKey.UPDATE_METADATA:
            # Its partitions' rows stay behind it: decided, whatever comes before.
            for tp in request.partitions:
                parts = offered.get(tp.topic)
                if parts is not None and parts.pop(tp.partition, None) is not None:
                    undecided -= 1
            continue
        rows = request.update_metadata_rows
        scope = update_metadata_scope(request)
        if rows is None or scope is None:
            continue
        live, _, topic_ids = scope
        taken: list[UpdateMetadataRow] | None = None
        for at, row in enumerate(rows):
            parts = offered.get(row[0])
            if parts is None:
                continue
            # Decided here whatever the outcome: an earlier row of it is sent before this
            # one, which says what the broker is left with.
            offer = parts.pop(row[1], None)
            if offer is None:
                continue
            undecided -= 1
            newer_row, newer_topic_ids = offer
            leader = newer_row[2].leader_and_isr.leader
            topic_id = newer_topic_ids.get(row[0])
            if (
                row[5]
                or topic_id is None
                or topic_ids.get(row[0]) != topic_id
                or (leader >= 0 and leader not in live)
            ):
                continue
            if taken is None:
                taken = list(rows)
            taken[at] = newer_row
            handed.setdefault(row[0], set()).add(row[1])
        if taken is not None:
            q.request = with_update_metadata_rows(request, taken)
    if not handed:
        return None
    out = []
    no_parts: set[int] = set()
    for r in newer:
        rows = r.update_metadata_rows or []
        kept_rows = [row for row in rows if row[1] not in handed.get(row[0], no_parts)]
        out.append(r if len(kept_rows) == len(rows) else with_update_metadata_rows(r, kept_rows))
    return out


class _BrokerSender:
    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        controller_id: int,
        on_response: ResponseCallback,
        socket_timeout_s: float,
        on_abandon: AbandonCallback | None = None,
    ) -> None:
        self.on_abandon = on_abandon
        self.broker_id = broker_id
        # host, port and _conn change under _conn_lock (move_to, stop: other threads).
        self.host = host
        self.port = port
        self._conn_lock = threading.Lock()
        self.controller_id = controller_id
        self.on_response = on_response
        self.socket_timeout_s = socket_timeout_s
        self._queue: deque[_Queued] = deque()
        self._queued = threading.Condition(threading.Lock())
        self.stopped = threading.Event()
        # Held while an answer is delivered, and by stop() to set ``stopped``: once stop()
        # returns, no answer is delivered any more.
        self._delivering = threading.Lock()
        self.stats = _Sent()
        # From queued to taken to be sent, per request (Kafka's RequestRateAndQueueTimeMs).
        self.queue_time = QueueTimeStats()
        self._conn: KafkaConnection | None = None
        # The next request, when taken from the queue early.
        self._ahead: list[_Queued] = []
        # The wire bodies of the request being sent (kept until answered: a request sent
        # again after a hang-up is not encoded again) and of the one ahead, each built once.
        self._body_of: BrokerRequest | None = None
        self._body: Any = None
        self._ahead_body_of: BrokerRequest | None = None
        self._ahead_body: Any = None
        self.thread = threading.Thread(
            target=self._run, name=f"controller-to-broker-{broker_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Called by the controller's thread; the request in flight and those waiting are
        reported abandoned, never answered, even when the answer was arriving."""
        with self._delivering:
            self.stopped.set()
        self._interrupt()
        with self._queued:
            self._queue.append(_Queued(None))
            self._queued.notify()

    def move_to(self, host: str, port: int) -> None:
        """The broker's new address (the same incarnation, its endpoints changed): what
        waits is sent there, in order, after the request in flight, sent there again."""
        with self._conn_lock:
            if (host, port) == (self.host, self.port):
                return
            log.info(
                "broker %d moved from %s:%d to %s:%d",
                self.broker_id,
                self.host,
                self.port,
                host,
                port,
            )
            self.host, self.port = host, port
        self._interrupt()

    def _interrupt(self) -> None:
        """End the connection under the request in flight: it fails at once (and is sent
        again, to the new address, unless the sender stopped)."""
        with self._conn_lock:
            conn = self._conn
        if conn is not None:
            conn.abort()

    def put(self, requests: list[BrokerRequest]) -> None:
        """Queue requests for this broker, in order; called by the controller's thread."""
        now = time.monotonic()
        with self._queued:
            given = {id(r) for r in requests}
            requests, replaced, by = self._supersede(requests)
            # A request not among those given is one whose rows went in part into one
            # waiting (_hand_rows_forward makes it anew).
            queued = [_Queued(r, now, rows_sent_before=id(r) not in given) for r in requests]
            if replaced:
                queued[by].superseded = replaced
            self._queue.extend(queued)
            self._queued.notify()

    def _supersede(
        self, requests: list[BrokerRequest]
    ) -> tuple[list[BrokerRequest], list[BrokerRequest], int]:
        """Drop the UpdateMetadata at the queue's tail that the UpdateMetadata at the head
        of ``requests`` (nothing between them) make redundant, and hand the rows of those
        the UpdateMetadata left waiting carry too (see _hand_rows_forward); return
        ``requests`` as they are to be queued, the requests dropped, and which of the
        requests queued answers for them. Holds the queue's lock.

        A request ending a full update (FULL) tells a new broker that its metadata is
        whole, so it ends the broker's Metadata hold (item 13): it goes only for newer
        requests ending one, and one kept keeps those queued before it, which would
        otherwise reach the broker only after it (in the newer requests)."""
        newer: list[BrokerRequest] = []
        for r in requests:
            if r.api_key != ApiKey.UPDATE_METADATA:
                break
            newer.append(r)
        if not newer or not self._queue:
            return requests, [], 0
        tail: list[_Queued] = []  # newest first
        while self._queue and _is_update_metadata(self._queue[-1]):
            tail.append(self._queue.pop())
        # The newer rows' set is built only for a queued request they could cover: one
        # with more rows than all of them says something more without looking.
        newer_rows = sum(len(r.update_metadata_rows or ()) for r in newer)
        newer_full = any(r.update_metadata_type == UpdateMetadataType.FULL for r in newer)
        covered: dict[str, dict[int, bool]] | None = None
        kept: list[_Queued] = []
        dropped: list[_Queued] = []
        keep_the_rest = False
        for q in tail:
            assert q.request is not None
            full = q.request.update_metadata_type == UpdateMetadataType.FULL
            if keep_the_rest:  # queued before a FULL kept
                kept.append(q)
                continue
            rows = q.request.update_metadata_rows
            if rows is not None and len(rows) <= newer_rows and covered is None:
                covered = _covered_by(newer)
            if (
                covered is not None
                and (newer_full or not full)
                and _says_nothing_more(q.request, covered)
            ):
                dropped.append(q)
            else:
                kept.append(q)
                keep_the_rest = full
        self._queue.extend(reversed(kept))
        replaced: list[BrokerRequest] = []
        dropped_ids = {id(q) for q in dropped}
        after_a_drop = False
        for q in reversed(tail):  # oldest first
            assert q.request is not None
            if id(q) in dropped_ids:
                after_a_drop = True
                replaced += q.superseded
                if q.answered_here:
                    replaced.append(_stripped(q.request))
                replaced += q.absorbed
                self.stats.superseded += 1
            elif after_a_drop:
                # Those answered with a request kept may say rows sent before it by one
                # dropped now (its own rows handed on, or those of the requests answered
                # with it): they are answered after the newer ones that say them.
                replaced += q.superseded
                if q.rows_sent_before and q.answered_here:
                    replaced.append(_stripped(q.request))
                    q.answered_here = False
                replaced += q.absorbed
                q.superseded = []
                q.absorbed = []
        if newer_full:
            return requests, replaced, len(newer) - 1
        handed = _hand_rows_forward(reversed(self._queue), newer)
        if handed is None:
            return requests, replaced, len(newer) - 1
        # A newer request left with no row goes unless it has other live brokers to
        # tell: it is answered after the last UpdateMetadata waiting, which is sent after
        # every row it handed on. Those dropped above stay with the last newer one left,
        # or go with it: they say nothing the newer ones did not.
        last = next(q for q in reversed(self._queue) if _is_update_metadata(q))
        assert last.request is not None
        last_scope = update_metadata_scope(last.request)
        remaining: list[BrokerRequest] = []
        emptied: list[BrokerRequest] = []
        for r in handed:
            scope = update_metadata_scope(r)
            if (
                r.update_metadata_rows
                or last_scope is None
                or scope is None
                # brokers (or endpoints, racks) the last one waiting does not name
                or scope.live_brokers != last_scope.live_brokers
            ):
                remaining.append(r)
            else:
                emptied.append(_stripped(r))
                self.stats.superseded += 1
        rest = requests[len(newer) :]
        if not remaining:
            last.absorbed += replaced + emptied  # oldest first
            return rest, [], 0
        last.absorbed += emptied
        return remaining + rest, replaced, len(remaining) - 1

    def _connection(self) -> KafkaConnection:
        with self._conn_lock:
            conn = self._conn
            host, port = self.host, self.port
        if conn is not None:
            if (conn.host, conn.port) == (host, port):
                return conn
            self._drop_connection()  # the broker moved
        conn = KafkaConnection(
            host,
            port,
            client_id=f"controller-{self.controller_id}",
            timeout_s=self.socket_timeout_s,
        )
        with self._conn_lock:
            # Stopped or moved while connecting: stop() and move_to() saw no connection.
            if not self.stopped.is_set() and (host, port) == (self.host, self.port):
                self._conn = conn
                return conn
        conn.close()
        raise KafkaConnectionError(f"broker {self.broker_id} moved or left while connecting")

    def _drop_connection(self) -> None:
        with self._conn_lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass

    def _send_once(self, current: _Queued) -> dict[str, Any]:
        if self.stopped.is_set():
            raise _Stopped
        request = current.request
        assert request is not None
        if self._body_of is not request:
            if self._ahead_body_of is request:
                self._body, self._body_of = self._ahead_body, request
            else:
                self._body = _encoded_body(request)
                self._body_of = request
            self._ahead_body_of = self._ahead_body = None

        def sent() -> None:
            self._tell_written(current)
            self._prepare_next()

        try:
            return self._connection().request(
                request.api_key,
                request.api_version,
                self._body,
                while_waiting=sent,
            )
        except OSError:
            self._drop_connection()
            raise

    def waiting(self) -> int:
        """Requests not yet sent (one taken ahead, being built, still waits)."""
        with self._queued:
            return len(self._queue) + len(self._ahead)

    def _next(self) -> _Queued:
        with self._queued:
            if self._ahead:
                return self._ahead.pop()
            while not self._queue:
                self._queued.wait()
            return self._queue.popleft()

    def _prepare_next(self) -> None:
        """While the broker works on the request just sent, build and encode the next one
        (a 10,000-partition chunk takes ~20 ms), so it leaves as soon as the answer comes.
        Still one request in flight, as Kafka's controller sends them."""
        with self._queued:
            if not self._ahead:
                if not self._queue:
                    return
                self._ahead.append(self._queue.popleft())
            request = self._ahead[0].request
        if request is None or request is self._body_of or request is self._ahead_body_of:
            return
        try:
            self._ahead_body = _encoded_body(request)
            self._ahead_body_of = request
        except Exception:
            # Built again when sent, and the error reported then.
            self._ahead_body_of = self._ahead_body = None

    def _before_sleep(self, state: RetryCallState) -> None:
        self.stats.retries += 1
        outcome = state.outcome
        err = outcome.exception() if outcome is not None else None
        if state.attempt_number in (1, 10) or state.attempt_number % 100 == 0:
            log.warning(
                "request to broker %d at %s:%d failed (%s); retrying",
                self.broker_id,
                self.host,
                self.port,
                err,
            )

    def _sleep(self, seconds: float) -> None:
        self.stopped.wait(seconds)

    def _run(self) -> None:
        retrying = Retrying(
            retry=retry_if_exception_type(OSError),
            wait=wait_exponential(multiplier=0.05, max=1.0),
            stop=lambda _state: self.stopped.is_set(),
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        current: _Queued | None = None
        while not self.stopped.is_set():
            current = self._next()
            if current.request is None or self.stopped.is_set():
                break
            # Taken to be sent now, whether taken ahead or not (where Kafka's takes it).
            self.queue_time.record((time.monotonic() - current.enqueued_at) * 1000)
            if not self._send_and_tell(retrying, current):
                break  # the broker was removed from the channel while we retried
            current = None  # not kept while waiting for the next (it can be large)
        self._drop_connection()
        self._abandon(current)

    def _send_and_tell(self, retrying: Retrying, current: _Queued) -> bool:
        """Send one request until answered and report its fate; False if the sender stopped
        before its answer was delivered (the request is then still the caller's to
        abandon)."""
        request = current.request
        assert request is not None
        try:
            response = retrying(self._send_once, current)
        except (_Stopped, OSError):
            return False
        except Exception:
            log.exception(
                "request %s to broker %d could not be sent",
                request.api_key.name,
                self.broker_id,
            )
            if self._body_of is request:
                self._body_of = self._body = None
            self._tell(self.on_abandon, [current], None)
            return True
        with self._delivering:
            if self.stopped.is_set():
                # Removed from the channel while the answer came: abandoned, never
                # delivered, as Kafka's shut down send thread never calls back.
                return False
            self.stats.requests += 1
            self._tell(self.on_response, [current], response)
        if self._body_of is request:
            self._body_of = self._body = None  # answered; the one ahead keeps its own
        return True

    @staticmethod
    def _tell_written(queued: _Queued) -> None:
        """Tell the events whose requests these are that they are on the wire (those it
        replaced too: this one says all they said)."""
        for r in queued.told():
            if r.tracker is not None:
                try:
                    r.tracker.written(r)
                except Exception:
                    log.exception("written callback failed")

    def _tell(
        self,
        callback: Callable[..., None] | None,
        queued: list[_Queued],
        response: dict[str, Any] | None,
    ) -> None:
        """Report each request's fate, and that of the requests it replaced, to a callback
        (``on_response`` with the answer, or ``on_abandon``)."""
        if callback is None:
            return
        for q in queued:
            for r in q.told():
                try:
                    if response is None:
                        callback(r)
                    else:
                        callback(r, response)
                except Exception:
                    log.exception(
                        "%s callback failed", "abandon" if response is None else "response"
                    )

    def _abandon(self, current: _Queued | None) -> None:
        """Tell whoever waits for answers that these never will come."""
        with self._queued:
            left = [current] if current is not None else []
            left += self._ahead
            left += self._queue
            self._ahead.clear()
            self._queue.clear()
        self._tell(self.on_abandon, left, None)


class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        on_response: ResponseCallback,
        *,
        socket_timeout_s: float = 30.0,
        on_abandon: AbandonCallback | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.on_response = on_response
        self.on_abandon = on_abandon
        self.socket_timeout_s = socket_timeout_s
        self._senders: dict[int, _BrokerSender] = {}
        self._lock = threading.Lock()

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        with self._lock:
            old = self._senders.get(broker_id)
            if old is not None:
                # The same incarnation at another address (a new one is removed first):
                # its queue is meant for it still, as Kafka's processBrokerModification
                # leaves the channel untouched.
                old.move_to(host, port)
                return
            sender = _BrokerSender(
                broker_id,
                host,
                port,
                self.controller_id,
                self.on_response,
                self.socket_timeout_s,
                self.on_abandon,
            )
            self._senders[broker_id] = sender
            sender.start()

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send(self, requests: list[BrokerRequest]) -> None:
        per_broker: dict[int, list[BrokerRequest]] = {}
        for request in requests:
            per_broker.setdefault(request.broker_id, []).append(request)
        with self._lock:
            for broker_id, theirs in per_broker.items():
                sender = self._senders.get(broker_id)
                if sender is not None:
                    sender.put(theirs)
                    continue
                for request in theirs:
                    log.warning(
                        "no channel to broker %d; dropping %s", broker_id, request.api_key.name
                    )
                    if self.on_abandon is not None:
                        self.on_abandon(request)

    def superseded(self) -> int:
        """UpdateMetadata requests dropped so far for newer ones (see the module's doc)."""
        with self._lock:
            return sum(s.stats.superseded for s in self._senders.values())

    def queue_times(self) -> dict[int, dict[str, float]]:
        """Per broker in the channel: how long its requests waited to be sent (see
        QueueTimeStats.snapshot)."""
        with self._lock:
            return {b: s.queue_time.snapshot() for b, s in self._senders.items()}

    def queue_sizes(self) -> dict[int, int]:
        with self._lock:
            return {b: s.waiting() for b, s in self._senders.items()}

    def broker_ids(self) -> set[int]:
        with self._lock:
            return set(self._senders)

    def close(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            senders = list(self._senders.values())
            self._senders.clear()
        for s in senders:
            s.stop()
        deadline = time.monotonic() + timeout_s
        for s in senders:
            s.thread.join(max(0.0, deadline - time.monotonic()))


def _encoded_body(request: BrokerRequest) -> EncodedBody:
    """The request's body encoded, as the sender holds it until answered (and retries it):
    a 100,000-partition StopReplica's body is 18.4 MB of dicts and 1.0 MB encoded."""
    body = request.wire_body()
    if isinstance(body, EncodedBody):
        return body
    data = request_codec(request.api_key, request.api_version).encode(body)
    return EncodedBody(request.api_key, request.api_version, data)
