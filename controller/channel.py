"""The controller's channel to brokers (ControllerChannelManager).

One queue and one sender thread per broker: requests to a broker leave in the order the
controller decided them (LeaderAndIsr before the UpdateMetadata that follows it), and a
slow or dead broker holds up nobody else. A request is retried with backoff (tenacity)
until it is answered or its broker is removed from the channel; the answer goes to a
callback, which only enqueues a controller event.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from controller.request_batch import BrokerRequest
from wire.client import KafkaConnection

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
        self.host = host
        self.port = port
        self.controller_id = controller_id
        self.on_response = on_response
        self.socket_timeout_s = socket_timeout_s
        self.queue: queue.SimpleQueue[BrokerRequest | None] = queue.SimpleQueue()
        self.stopped = threading.Event()
        self.stats = _Sent()
        self._conn: KafkaConnection | None = None
        # The next request, when taken from the queue early (None: the stop signal).
        self._ahead: list[BrokerRequest | None] = []
        # The wire body of the request being sent or of the one ahead, built once.
        self._body_of: BrokerRequest | None = None
        self._body: Any = None
        self.thread = threading.Thread(
            target=self._run, name=f"controller-to-broker-{broker_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.queue.put(None)

    def _connection(self) -> KafkaConnection:
        if self._conn is None:
            self._conn = KafkaConnection(
                self.host,
                self.port,
                client_id=f"controller-{self.controller_id}",
                timeout_s=self.socket_timeout_s,
            )
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    def _send_once(self, request: BrokerRequest) -> dict[str, Any]:
        if self.stopped.is_set():
            raise _Stopped
        if self._body_of is not request:
            self._body = request.wire_body()
            self._body_of = request
        try:
            return self._connection().request(
                request.api_key,
                request.api_version,
                self._body,
                while_waiting=self._prepare_next,
            )
        except OSError:
            self._drop_connection()
            raise

    def waiting(self) -> int:
        """Requests not yet sent (one taken ahead, being built, still waits)."""
        return self.queue.qsize() + len(self._ahead)

    def _next(self) -> BrokerRequest | None:
        if self._ahead:
            return self._ahead.pop()
        return self.queue.get()

    def _prepare_next(self) -> None:
        """While the broker works on the request just sent, build and encode the next one
        (a 10,000-partition chunk takes ~20 ms), so it leaves as soon as the answer comes.
        Still one request in flight, as Kafka's controller sends them."""
        if not self._ahead:
            try:
                self._ahead.append(self.queue.get_nowait())
            except queue.Empty:
                return
        request = self._ahead[0]
        if request is None or self._body_of is request:
            return
        try:
            self._body = request.wire_body()
            self._body_of = request
        except Exception:
            self._body_of = None  # built again when sent, and the error reported then

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
        request: BrokerRequest | None = None
        while not self.stopped.is_set():
            request = self._next()
            if request is None or self.stopped.is_set():
                break
            try:
                response = retrying(self._send_once, request)
            except (_Stopped, OSError):
                break  # the broker was removed from the channel while we retried
            except Exception:
                log.exception(
                    "request %s to broker %d could not be sent",
                    request.api_key.name,
                    self.broker_id,
                )
                if self._body_of is request:
                    self._body_of = self._body = None
                continue
            self.stats.requests += 1
            try:
                self.on_response(request, response)
            except Exception:
                log.exception("response callback failed")
            if self._body_of is request:
                self._body_of = self._body = None  # sent; the one ahead keeps its own
            request = None
        self._drop_connection()
        self._abandon(request)

    def _abandon(self, current: BrokerRequest | None) -> None:
        """Tell whoever waits for answers that these never will come."""
        if self.on_abandon is None:
            return
        left = [current] if current is not None else []
        left += [r for r in self._ahead if r is not None]
        self._ahead.clear()
        while True:
            try:
                queued = self.queue.get_nowait()
            except queue.Empty:
                break
            if queued is not None:
                left.append(queued)
        for r in left:
            try:
                self.on_abandon(r)
            except Exception:
                log.exception("abandon callback failed")


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
            if old is not None and (old.host, old.port) == (host, port):
                return
            if old is not None:
                old.stop()
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
        with self._lock:
            for request in requests:
                sender = self._senders.get(request.broker_id)
                if sender is None:
                    log.warning(
                        "no channel to broker %d; dropping %s",
                        request.broker_id,
                        request.api_key.name,
                    )
                    if self.on_abandon is not None:
                        self.on_abandon(request)
                    continue
                sender.queue.put(request)

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
