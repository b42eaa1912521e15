"""The broker's view of cluster metadata, filled by the controller's UpdateMetadata requests.

This is what Metadata requests are answered from, so clients see what the controller last
told this broker, and a broker cut off from ZooKeeper keeps serving its last metadata.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from typing import Any

from wire.api import UpdateMetadataType
from wire.errors import ErrorCode
from zkdata.paths import INTERNAL_TOPICS, topic_name_problem
from zkdata.znodes import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    TopicPartition,
    shared_indexes,
    shared_ints,
)

ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    listener: str
    rack: str | None


# Distinct partition metadata values shared (a bound: values come from requests).
_SHARED_METADATA_MAX = 10_000
_NO_PARTITIONS: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


class StaleControllerEpoch(Exception):
    """An UpdateMetadata from an older controller than one this cache was updated by."""


class MetadataCache:
    def __init__(self, broker_id: int, listener: str = "PLAINTEXT") -> None:
        self.broker_id = broker_id
        self.listener = listener
        self._lock = threading.Lock()
        self.controller_id = -1
        self.controller_epoch = -1
        self.cluster_id: str | None = None
        #: live brokers at their inter-broker address (``listener``, else their first
        #: endpoint): replication's view
        self._brokers: dict[int, BrokerEndpoint] = {}
        #: live brokers by listener name, each broker under each listener it has
        self._by_listener: dict[str, dict[int, BrokerEndpoint]] = {}
        #: the ids of the live brokers, those without any endpoint too (Kafka's
        #: aliveBrokers): a partition led by one is LISTENER_NOT_FOUND, not unavailable
        self._alive: set[int] = set()
        self._topics: dict[str, dict[int, PartitionMetadata]] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}
        # Equal partition metadata is one immutable object: most partitions of a cluster
        # share a handful of (leader, epochs, ISR, replicas) values.
        self._shared: dict[tuple[Any, ...], PartitionMetadata] = {}
        # Set by the first UpdateMetadata that leaves the cache whole: until then it knows
        # no broker and no topic, or only some of them, which is not what the cluster
        # holds (see KafkaApis._handle_metadata). A full update comes in requests of whole
        # topics, each but the last marked INCREMENTAL: the last (FULL) makes it whole; a
        # request of an older version (or another controller's, UNKNOWN) is taken whole.
        self._first_update = threading.Event()
        # Notified after each update, for those waiting to see an outcome in it (the
        # admin APIs). Its own lock: a waiter's check takes the cache's.
        self._updated = threading.Condition()
        # This broker's own endpoints, by listener (set once it listens): before the
        # first update, the only broker it knows is alive.
        self.own: dict[str, BrokerEndpoint] = {}

    # --- updates ------------------------------------------------------------------------

    def update(self, request: dict[str, Any]) -> list[str]:
        """Apply an UpdateMetadata request; returns deleted topics. One from an older
        controller than the last applied raises StaleControllerEpoch and changes nothing:
        the caller's check of the epoch and this update are two steps, and a deposed
        controller's request checked just before the new controller's first one could
        otherwise land after it (Kafka checks and applies under one lock)."""
        brokers: dict[int, BrokerEndpoint] = {}
        by_listener: dict[str, dict[int, BrokerEndpoint]] = {}
        alive: set[int] = set()
        for b in request.get("live_brokers", []):
            alive.add(b["id"])
            endpoints = [
                # Before v3 an endpoint has no listener name: Kafka names it after its
                # security protocol, and PLAINTEXT is the only one served here.
                BrokerEndpoint(
                    b["id"], e["host"], e["port"], e.get("listener") or "PLAINTEXT", b.get("rack")
                )
                for e in b.get("endpoints") or []
            ]
            for endpoint in endpoints:
                by_listener.setdefault(endpoint.listener, {})[b["id"]] = endpoint
            # A broker without our inter-broker listener is misconfigured; its first
            # endpoint is still more use to replication than none (as the controller does).
            # Only replication's: clients on any listener are given that listener's alone.
            chosen = next((e for e in endpoints if e.listener == self.listener), None)
            if chosen is None and endpoints:
                chosen = endpoints[0]
            if chosen is not None:
                brokers[b["id"]] = chosen
        deleted: list[str] = []
        with self._lock:
            if request["controller_epoch"] < self.controller_epoch:
                raise StaleControllerEpoch(
                    f"controller epoch {request['controller_epoch']} is older than"
                    f" {self.controller_epoch}"
                )
            self.controller_id = request["controller_id"]
            self.controller_epoch = request["controller_epoch"]
            self._brokers = brokers
            self._by_listener = by_listener
            self._alive = alive
            shared = self._shared
            for topic_state in request.get("topic_states", []):
                topic = topic_state["topic_name"]
                topic_id = topic_state.get("topic_id")
                parts = self._topics.setdefault(topic, {})
                known = len(parts)
                marked = False  # a partition of it removed (leader -2)
                if isinstance(topic_id, uuid.UUID) and topic_id != ZERO_UUID:
                    self._topic_ids[topic] = topic_id
                for p in topic_state.get("partition_states", []):
                    if p["leader"] == LEADER_DURING_DELETE:
                        parts.pop(p["partition_index"], None)
                        marked = True
                        continue
                    fields = (
                        p["leader"],
                        p["leader_epoch"],
                        tuple(p["isr"]),
                        tuple(p["replicas"]),
                        tuple(p.get("offline_replicas") or ()),
                        p.get("zk_version", 0),
                        p["controller_epoch"],
                    )
                    metadata = shared.get(fields)
                    if metadata is None:
                        # New to the table: its tuples are the shared ones (the table
                        # keeps its key, and equal keys find this entry).
                        leader, epoch, isr, replicas, offline, zk_version, ce = fields
                        fields = (
                            leader,
                            epoch,
                            shared_ints(isr),
                            shared_ints(replicas),
                            shared_ints(offline),
                            zk_version,
                            ce,
                        )
                        metadata = PartitionMetadata(*fields)
                        if len(shared) >= _SHARED_METADATA_MAX:
                            shared.clear()  # values of the past: start over
                        shared[fields] = metadata
                    parts[p["partition_index"]] = metadata
                if len(parts) > known:
                    # New partitions: their keys are kept for good, as the shared ints
                    # of their indexes (a dict keeps the key it was first given).
                    parts = dict(zip(shared_indexes(list(parts)), parts.values(), strict=True))
                    self._topics[topic] = parts
                if not parts:
                    del self._topics[topic]
                    self._topic_ids.pop(topic, None)
                    if marked:
                        # Not an entry of no partitions for a topic not known: Kafka 2.8
                        # reports the partitions it removed, and it removed none (a topic
                        # reported deleted loses its groups' committed offsets).
                        deleted.append(topic)
        if request.get("type", UpdateMetadataType.UNKNOWN) != UpdateMetadataType.INCREMENTAL:
            self._first_update.set()
        with self._updated:
            self._updated.notify_all()
        return deleted

    def wait_first_update(self, timeout_s: float) -> bool:
        """Whether the cache has been made whole (a first full update applied, every
        request of it), waiting up to `timeout_s` for that."""
        return self._first_update.wait(timeout_s)

    def wait_until(self, ready: Callable[[], bool], timeout_s: float) -> bool:
        """Whether ``ready()`` (a look at this cache) holds, waiting up to ``timeout_s``
        for updates to make it so."""
        deadline = time.monotonic() + timeout_s
        with self._updated:
            while not ready():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._updated.wait(remaining)
        return True

    # --- reads --------------------------------------------------------------------------

    def alive_brokers(self) -> list[BrokerEndpoint]:
        with self._lock:
            return list(self._brokers.values())

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        with self._lock:
            return self._brokers.get(broker_id)

    def endpoint(self, broker_id: int, listener: str | None) -> BrokerEndpoint | None:
        """A live broker's address on ``listener``, None if it has none there; with no
        listener named, replication's (``broker``)."""
        with self._lock:
            if listener is None:
                return self._brokers.get(broker_id)
            return self._by_listener.get(listener, {}).get(broker_id)

    def topics(self) -> list[str]:
        with self._lock:
            return list(self._topics)

    def contains(self, topic: str) -> bool:
        """Whether the topic is listed (Kafka's MetadataCache.contains): not once an
        UpdateMetadata marked it deleted (leader -2)."""
        with self._lock:
            return topic in self._topics

    def all_partitions(self) -> list[TopicPartition]:
        """Every partition of every topic known (Kafka's getAllPartitions)."""
        with self._lock:
            return [TopicPartition(t, p) for t, parts in self._topics.items() for p in parts]

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        with self._lock:
            return self._topics.get(topic, {}).get(partition)

    def partition_indexes(self, topic: str) -> Container[int]:
        """The topic's partitions listed now, to test membership in at once and let go
        (later updates may change it in place): a fetch session's look at thousands of
        partitions asks once a topic rather than taking the lock once a partition."""
        with self._lock:
            return self._topics.get(topic, _NO_PARTITIONS)

    def leaders_known(self, topic: str, partitions: Iterable[int]) -> bool:
        """Whether each of the topic's ``partitions`` is known and has a leader."""
        with self._lock:
            known = self._topics.get(topic, {})
            for p in partitions:
                metadata = known.get(p)
                if metadata is None or metadata.leader < 0:
                    return False
        return True

    def topic_id(self, topic: str) -> uuid.UUID:
        with self._lock:
            return self._topic_ids.get(topic, ZERO_UUID)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        with self._lock:
            for name, tid in self._topic_ids.items():
                if tid == topic_id:
                    return name
        return None

    def topic_names(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The names of the topics of ``topic_ids`` known (one pass over the topics)."""
        wanted = set(topic_ids)
        with self._lock:
            return {tid: name for name, tid in self._topic_ids.items() if tid in wanted}

    def partition_count(self, topic: str) -> int:
        with self._lock:
            return len(self._topics.get(topic, {}))

    def metadata_response(
        self, topics: Iterable[str] | None, version: int, listener: str | None = None
    ) -> dict[str, Any]:
        """A MetadataResponse body; `topics` None means all of them. Brokers are given at
        their address on ``listener`` (None: the inter-broker one); a broker without
        that listener is left out, and a partition it leads answered, as by Kafka, with
        LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before), the inter-broker listener
        as any other (replication's fallback to a first endpoint is not a client's)."""
        # Before its first full UpdateMetadata is whole (no controller has reached it yet,
        # or only the first requests of it have come) the broker does not know every
        # topic: it cannot say one does not exist. A topic it does not know is "not
        # available yet" (clients retry), not unknown (librdkafka fails the messages it
        # holds for an unknown topic); before any update, it gives itself as the one
        # broker it knows.
        informed = self._first_update.is_set()
        missing = (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if informed else ErrorCode.LEADER_NOT_AVAILABLE
        )
        with self._lock:
            alive = self._alive
            if not informed and self.controller_epoch < 0:  # no update applied yet
                own = self.own.get(listener or self.listener)
                brokers = {} if own is None else {own.broker_id: own}
            else:
                brokers = dict(self._by_listener.get(listener or self.listener, {}))
            names = list(self._topics) if topics is None else list(topics)
            topic_entries = []
            for name in names:
                parts = self._topics.get(name)
                if parts is None:
                    # A name no topic can have is INVALID_TOPIC_EXCEPTION, as Kafka's
                    # getTopicMetadata answers it (Topic.validate): the Java producer
                    # then fails the send at once instead of waiting max.block.ms.
                    invalid = topic_name_problem(name) is not None
                    topic_entries.append(
                        {
                            "error_code": int(
                                ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else missing
                            ),
                            "name": name,
                            "topic_id": ZERO_UUID,
                            "is_internal": name in INTERNAL_TOPICS,
                            "partitions": [],
                        }
                    )
                    continue
                partitions = []
                for index, pm in sorted(parts.items()):
                    leader = pm.leader
                    error = ErrorCode.NONE
                    if leader == NO_LEADER or leader not in alive:
                        error = ErrorCode.LEADER_NOT_AVAILABLE
                        leader = NO_LEADER
                    elif leader not in brokers:
                        error = (
                            ErrorCode.LISTENER_NOT_FOUND
                            if version >= 6
                            else ErrorCode.LEADER_NOT_AVAILABLE
                        )
                        leader = NO_LEADER
                    replicas = list(pm.replicas)
                    isr = list(pm.isr)
                    if version == 0:
                        # v0 clients want only live replicas, with REPLICA_NOT_AVAILABLE.
                        live_replicas = [r for r in replicas if r in brokers]
                        if len(live_replicas) < len(replicas) and error == ErrorCode.NONE:
                            error = ErrorCode.REPLICA_NOT_AVAILABLE
                        replicas = live_replicas
                        isr = [r for r in isr if r in brokers]
                    partitions.append(
                        {
                            "error_code": int(error),
                            "partition_index": index,
                            "leader_id": leader,
                            "leader_epoch": pm.leader_epoch,
                            "replica_nodes": replicas,
                            "isr_nodes": isr,
                            "offline_replicas": list(pm.offline_replicas),
                        }
                    )
                topic_entries.append(
                    {
                        "error_code": 0,
                        "name": name,
                        "topic_id": self._topic_ids.get(name, ZERO_UUID),
                        "is_internal": name in INTERNAL_TOPICS,
                        "partitions": partitions,
                    }
                )
            return {
                "throttle_time_ms": 0,
                "brokers": [
                    {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in sorted(brokers.values(), key=lambda b: b.broker_id)
                ],
                "cluster_id": self.cluster_id,
                "controller_id": self.controller_id,
                "topics": topic_entries,
            }
