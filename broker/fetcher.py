"""Followers fetch from their leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One fetcher thread per leader broker fetches every partition this broker follows from it,
with the Fetch API and this broker's replica id, as Kafka does. The leader counts those
fetches to decide who is in sync. A partition whose leader answers that it is not the
leader (or that our leader epoch is fenced or unknown) is set aside until the controller's
next LeaderAndIsr for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 12  # flexible, topics by name (v13 switches to topic ids)


@dataclass
class FetchState:
    fetch_offset: int
    leader_epoch: int
    delayed_until: float = 0.0


# (partition, fetched records, the leader's high watermark) -> new fetch offset
RecordsSink = Callable[[TopicPartition, memoryview | bytes | None, int], int]


class ReplicaFetcherThread:
    def __init__(
        self,
        broker_id: int,
        leader_id: int,
        endpoint: tuple[str, int],
        sink: RecordsSink,
        *,
        max_wait_ms: int = 500,
        backoff_ms: int = 1000,
        max_bytes: int = 10 * 1024 * 1024,
        partition_max_bytes: int = 1024 * 1024,
        socket_timeout_s: float = 30.0,
    ) -> None:
        self.broker_id = broker_id
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.sink = sink
        self.max_wait_ms = max_wait_ms
        self.backoff_s = backoff_ms / 1000
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.socket_timeout_s = socket_timeout_s
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._conn: KafkaConnection | None = None
        self.thread = threading.Thread(
            target=self._run, name=f"replica-fetcher-{broker_id}-from-{leader_id}", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()

    def add(self, tp: TopicPartition, state: FetchState) -> None:
        with self._lock:
            self.partitions[tp] = state
        self._wake.set()

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                self.partitions.pop(tp, None)

    def is_empty(self) -> bool:
        with self._lock:
            return not self.partitions

    def _ready(self) -> dict[TopicPartition, FetchState]:
        now = time.monotonic()
        with self._lock:
            return {tp: s for tp, s in self.partitions.items() if s.delayed_until <= now}

    def _run(self) -> None:
        while not self._stopped.is_set():
            ready = self._ready()
            if not ready:
                self._wake.wait(0.2)
                self._wake.clear()
                continue
            try:
                self._fetch_once(ready)
            except OSError as e:
                log.info(
                    "fetch from leader %d at %s:%d failed: %s", self.leader_id, *self.endpoint, e
                )
                self._close()
                self._stopped.wait(self.backoff_s)
            except Exception:
                log.exception("fetcher from leader %d failed", self.leader_id)
                self._close()
                self._stopped.wait(self.backoff_s)
        self._close()

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _fetch_once(self, ready: dict[TopicPartition, FetchState]) -> None:
        if self._conn is None:
            self._conn = KafkaConnection(
                *self.endpoint,
                client_id=f"replica-fetcher-{self.broker_id}",
                timeout_s=self.socket_timeout_s + self.max_wait_ms / 1000,
            )
        by_topic: dict[str, list[dict[str, object]]] = {}
        for tp, s in ready.items():
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": s.leader_epoch,
                    "fetch_offset": s.fetch_offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": 0,
                    "partition_max_bytes": self.partition_max_bytes,
                }
            )
        response = self._conn.request(
            ApiKey.FETCH,
            FETCH_VERSION,
            {
                "replica_id": self.broker_id,
                "max_wait_ms": self.max_wait_ms,
                "min_bytes": 1,
                "max_bytes": self.max_bytes,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            },
        )
        if response.get("error_code"):
            raise OSError(f"fetch refused: {ErrorCode(response['error_code']).name}")
        for topic_response in response.get("responses", []):
            topic = topic_response["topic"]
            for pr in topic_response["partitions"]:
                tp = TopicPartition(topic, pr["partition_index"])
                with self._lock:
                    state = self.partitions.get(tp)
                if state is None:
                    continue
                code = pr["error_code"]
                if code == ErrorCode.NONE:
                    state.fetch_offset = self.sink(tp, pr.get("records"), pr["high_watermark"])
                else:
                    # Not (yet) the leader at our epoch: wait for the controller to catch up.
                    state.delayed_until = time.monotonic() + self.backoff_s
                    log.debug("fetch of %s from %d: %s", tp, self.leader_id, ErrorCode(code).name)


class ReplicaFetcherManager:
    """Keeps one fetcher per leader for the partitions this broker follows."""

    def __init__(
        self,
        broker_id: int,
        sink: RecordsSink,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        *,
        max_wait_ms: int = 500,
        backoff_ms: int = 1000,
    ) -> None:
        self.broker_id = broker_id
        self.sink = sink
        self.endpoint_of = endpoint_of
        self.max_wait_ms = max_wait_ms
        self.backoff_ms = backoff_ms
        self._fetchers: dict[int, ReplicaFetcherThread] = {}
        self._lock = threading.Lock()

    def follow(self, partitions: list[tuple[TopicPartition, int, int, int]]) -> None:
        """(partition, leader id, leader epoch, fetch offset) for each followed partition."""
        with self._lock:
            moving = [tp for tp, *_ in partitions]
            for existing in self._fetchers.values():
                existing.remove(moving)
            for tp, leader, epoch, offset in partitions:
                if leader < 0 or leader == self.broker_id:
                    continue
                endpoint = self.endpoint_of(leader)
                if endpoint is None:
                    log.warning(
                        "no address known for leader %d of %s; not fetching yet", leader, tp
                    )
                    continue
                fetcher: ReplicaFetcherThread | None = self._fetchers.get(leader)
                if fetcher is not None and fetcher.endpoint != endpoint:
                    fetcher.stop()
                    fetcher = None
                if fetcher is None:
                    fetcher = ReplicaFetcherThread(
                        self.broker_id,
                        leader,
                        endpoint,
                        self.sink,
                        max_wait_ms=self.max_wait_ms,
                        backoff_ms=self.backoff_ms,
                    )
                    self._fetchers[leader] = fetcher
                    fetcher.start()
                fetcher.add(tp, FetchState(offset, epoch))
            self._drop_idle()

    def unfollow(self, tps: list[TopicPartition]) -> None:
        with self._lock:
            for fetcher in self._fetchers.values():
                fetcher.remove(tps)
            self._drop_idle()

    def _drop_idle(self) -> None:
        for leader, fetcher in list(self._fetchers.items()):
            if fetcher.is_empty():
                fetcher.stop()
                del self._fetchers[leader]

    def close(self) -> None:
        with self._lock:
            fetchers = list(self._fetchers.values())
            self._fetchers.clear()
        for f in fetchers:
            f.stop()
