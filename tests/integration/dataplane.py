"""Real clients against real brokers: produce, consume, and check what was acknowledged."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cluster.supervised import BrokerExited, SupervisedCluster, wait_for
from storage.records import BatchHeader, iter_batches


def bootstrap(c: SupervisedCluster) -> str:
    """The running brokers' addresses: those up now (their status file written), else
    each starting one once it is up. One that exits while starting (its start gave up on
    ZooKeeper in an outage) is left out, unless none is left. A client needs only one to
    find the others, and a fault schedule may be restarting any of them meanwhile."""
    statuses = [b.status() for b in c.brokers.values() if b.alive()]
    up = [f"127.0.0.1:{int(st['port'])}" for st in statuses if st is not None]
    if up:
        return ",".join(up)
    addresses = []
    gone: list[BrokerExited] = []
    for b in c.brokers.values():
        if b.alive():
            try:
                addresses.append(f"127.0.0.1:{b.port()}")
            except BrokerExited as e:
                gone.append(e)
    if not addresses and gone:
        raise gone[0]
    return ",".join(addresses)


@dataclass
class Acked:
    """What the brokers acknowledged: (partition, offset) -> value, and the errors seen."""

    by_offset: dict[tuple[int, int], bytes] = field(default_factory=dict)
    # An offset acknowledged again for another message: the first was lost (a truncation
    # gave its offset away), though reading back ``by_offset`` alone would not show it.
    # ((partition, offset), first value, later value)
    reassigned: list[tuple[tuple[int, int], bytes, bytes]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # The partition of each error (-1: not yet assigned one), in step with ``errors``.
    error_partitions: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def callback(self, err: KafkaError | None, msg: object) -> None:
        with self.lock:
            if err is not None:
                self.errors.append(err.name())
                partition = msg.partition()  # type: ignore[attr-defined]
                self.error_partitions.append(-1 if partition is None else partition)
            else:
                key = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
                value = msg.value()  # type: ignore[attr-defined]
                first = self.by_offset.setdefault(key, value)
                if first != value:
                    self.reassigned.append((key, first, value))


def lost_acknowledged(
    read: dict[int, list[tuple[int, bytes]]], *acked: Acked
) -> list[tuple[tuple[int, int], bytes]]:
    """The acknowledged messages not read back at their offsets (``read``: what `consume`
    returned), each offset acknowledged for two messages counting as a loss too."""
    at = {(p, o): v for p, msgs in read.items() for o, v in msgs}
    # Every (offset, message) acknowledged, once each: at most one message per offset can
    # be read back, so any other acknowledged there was lost.
    every: dict[tuple[tuple[int, int], bytes], None] = {}
    for a in acked:
        every.update(dict.fromkeys(a.by_offset.items()))
        every.update(dict.fromkeys((key, later) for key, _first, later in a.reassigned))
    return [(key, value) for key, value in every if at.get(key) != value]


def producer(c: SupervisedCluster, **conf: object) -> Producer:
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap(c),
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Producer(settings)


def produce(
    c: SupervisedCluster,
    topic: str,
    values: Iterable[bytes],
    acked: Acked | None = None,
    partition: int | None = None,
    **conf: object,
) -> Acked:
    acked = acked or Acked()
    p = producer(c, **conf)
    for v in values:
        while True:
            try:
                if partition is None:
                    p.produce(topic, v, on_delivery=acked.callback)
                else:
                    p.produce(topic, v, partition=partition, on_delivery=acked.callback)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    remaining = p.flush(180)
    assert remaining == 0, f"{remaining} messages still unacknowledged after 180 s"
    return acked


# What a client may hear while leadership moves: the broker its metadata names as leader
# has not yet applied (or has just given up) the leadership. Clients retry these.
_LEADERSHIP_MOVING = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # A new leader whose high watermark has not reached its epoch's start offset yet
    # (KIP-207): its followers' next fetches move it.
    KafkaError.OFFSET_NOT_AVAILABLE,
    # librdkafka dropping its handle of a broker that left the metadata (seen once, in a
    # full run, while the killed leader's broker was replaced): the query is asked again.
    KafkaError._DESTROY_BROKER,
    KafkaError._TRANSPORT,
}


def watermark_high(consumer: Consumer, topic: str, partition: int, timeout: float = 30) -> int:
    """The partition's high watermark, asked of its leader until the leader answers:
    librdkafka's query does not retry a moving leadership itself."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(deadline - time.monotonic(), 1)
            )
            return int(high)
        except KafkaException as e:
            if e.args[0].code() not in _LEADERSHIP_MOVING or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def consume(
    c: SupervisedCluster,
    topic: str,
    partitions: Iterable[int],
    *,
    start: int = 0,
    timeout: float = 120,
) -> dict[int, list[tuple[int, bytes]]]:
    """Everything in each partition from `start` to its end, read with assign() and
    explicit offsets (no consumer group), as (offset, value)."""
    parts = list(partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(c),
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        ends = {p: watermark_high(consumer, topic, p) for p in parts}
        consumer.assign([TopicPartition(topic, p, start) for p in parts])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in parts}
        deadline = time.monotonic() + timeout
        while any((out[p][-1][0] + 1 if out[p] else start) < ends[p] for p in parts):
            if time.monotonic() > deadline:
                reached = {p: out[p][-1][0] if out[p] else None for p in parts}
                raise TimeoutError(
                    f"read {sum(map(len, out.values()))} messages; ends {ends}, reached {reached}"
                )
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    if cast(KafkaError, msg.error()).code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error: {msg.error()}")
                out[cast(int, msg.partition())].append(
                    (cast(int, msg.offset()), cast(bytes, msg.value()))
                )
        return out
    finally:
        consumer.close()


def group_consumer(c: SupervisedCluster, group: str, **conf: object) -> Consumer:
    """A consumer of ``group`` that subscribes (commits are the test's own)."""
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap(c),
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    settings.update({k.replace("_", "."): v for k, v in conf.items()})
    return Consumer(settings)


def poll_until(
    consumers: Iterable[Consumer],
    seen: dict[tuple[int, int], bytes],
    done: Callable[[], bool],
    timeout: float,
    what: str,
) -> None:
    """Poll every consumer (each must be polled for its group to make progress) until
    ``done()``, recording (partition, offset) -> value of each message."""
    deadline = time.monotonic() + timeout
    group = list(consumers)
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {len(seen)} messages seen")
        for consumer in group:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF or error.retriable(), error
                continue
            seen[(cast(int, msg.partition()), cast(int, msg.offset()))] = cast(bytes, msg.value())


def segment_files(directory: Path) -> list[bytes] | None:
    """The bytes of a partition directory's segment files in offset order, each offset
    range once; None while a compaction's swap is under way or the files changed while
    being read (read again). A swap renames the cleaned file to ``.swap``, the old
    segments to ``.deleted``, then the ``.swap`` to its ``.log``: no single ``.log``
    listing covers the range meanwhile, and two listings taken apart can both miss it."""

    def listing() -> list[str]:
        return sorted(n for n in os.listdir(directory) if n.endswith((".log", ".swap")))

    try:
        names = listing()
        if any(n.endswith(".swap") for n in names):
            return None
        data = [(directory / n).read_bytes() for n in names]
        return data if listing() == names else None
    except FileNotFoundError:
        return None


def headers_on_disk(
    c: SupervisedCluster, broker: int, topic: str, partition: int
) -> list[BatchHeader]:
    """The headers of the batches in a broker's segment files (read again while a swap
    moves them: ``segment_files``)."""
    directory = c[broker].data_dir / f"{topic}-{partition}"

    def read() -> list[BatchHeader] | None:
        files = segment_files(directory)
        if files is None:
            return None
        try:
            return [header for data in files for header in iter_batches(data)]
        except ValueError:
            return None  # an active segment's tail being written

    return wait_for(read, 30, f"broker {broker}'s files of {topic}-{partition}")
