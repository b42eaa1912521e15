"""The demo's traffic: a confluent-kafka producer and consumer kept running through failovers.

The producer sends numbered messages with acks=all at a steady rate and remembers where
each was acknowledged (partition, offset). The consumer reads every partition with
assign() from offset 0. At the end the two are compared: every acknowledged message must
have been read back at the offset it was acknowledged with, which is the data plane's
promise across failovers. On the way, the demo's timeline shows how far each has got and
the longest time the producer waited between two acknowledgements (a failover's stall, as
a client sees it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster.supervised import SupervisedCluster

Say = Callable[[str], None]


@dataclass
class Tally:
    """What the producer was told and what the consumer read; guarded by `lock`."""

    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)
    # An offset acknowledged again for another message: a truncation gave the first one's
    # offset away, so it is lost, though comparing `acked` with `read` alone would not
    # show it (as the nemesis tests' Acked). (partition, offset) -> the later values.
    reacked: dict[tuple[int, int], list[bytes]] = field(default_factory=dict)
    read: dict[tuple[int, int], bytes] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    sent: int = 0
    last_ack: dict[int, float] = field(default_factory=dict)  # partition -> when
    # The longest a partition waited for an acknowledgement: since the last one, or since
    # the producer started for its first (the demo's first failover begins before any).
    longest_stall_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, partitions: Iterable[int], now: float | None = None) -> None:
        """The producer starts sending to `partitions`: their waits count from now."""
        now = time.monotonic() if now is None else now
        with self.lock:
            for partition in partitions:
                self.last_ack.setdefault(partition, now)

    def on_delivery(self, err: Any, msg: Any) -> None:
        now = time.monotonic()
        with self.lock:
            if err is not None:
                self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
                return
            partition = msg.partition()
            pos, value = (partition, msg.offset()), msg.value()
            first = self.acked.setdefault(pos, value)
            if first != value and value not in self.reacked.get(pos, ()):
                self.reacked.setdefault(pos, []).append(value)
            last = self.last_ack.get(partition)
            if last is not None:
                self.longest_stall_s = max(self.longest_stall_s, now - last)
            self.last_ack[partition] = now

    def duplicates(self) -> int:
        """Messages read more than once: a retried send whose first attempt was written
        but whose answer was lost in a failover (at-least-once without idempotence)."""
        with self.lock:
            return len(self.read) - len(set(self.read.values()))

    def acknowledged(self) -> int:
        """Messages acknowledged, each (position, message) once."""
        with self.lock:
            return len(self.acked) + sum(map(len, self.reacked.values()))

    def lost(self) -> list[tuple[int, int]]:
        """The positions of acknowledged messages not read back there, one entry per
        message: of the messages acknowledged at one offset, at most one can be read back
        there, and every other is lost."""
        with self.lock:
            every = [*self.acked.items()]
            every += ((pos, v) for pos, later in self.reacked.items() for v in later)
            return sorted(pos for pos, v in every if self.read.get(pos) != v)


def bootstrap(cluster: SupervisedCluster) -> str:
    return ",".join(f"127.0.0.1:{b.port()}" for b in cluster.brokers.values() if b.alive())


class ClientWorkload:
    """A producer and a consumer on the demo topic (the `Workload` of cluster.demo)."""

    def __init__(self, rate: float = 200.0, report_every_s: float = 10.0) -> None:
        self.rate = rate
        self.report_every_s = report_every_s
        self.tally = Tally()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._note: Say = lambda _text: None
        self._partitions = 0
        self._log: logging.Logger | None = None

    def start(self, cluster: SupervisedCluster, topic: str, note: Say) -> None:
        from confluent_kafka import Consumer, Producer

        self._note = note
        # librdkafka's own log lines (connection refused while a broker is down) go to a
        # file: on the terminal they would tear up the view.
        log = logging.getLogger("zkctl.demo.clients")
        log.propagate = False
        if not log.handlers:
            handler = logging.FileHandler(cluster.root / "clients.log")
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            log.addHandler(handler)
        self._log = log
        assignment = cluster.assignment(topic)
        self._partitions = len(assignment.partitions) if assignment is not None else 1
        servers = bootstrap(cluster)
        producer = Producer(
            {
                "bootstrap.servers": servers,
                "acks": "all",
                "linger.ms": 5,
                # Long enough to ride out any failover the demo causes: retried, not failed.
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
                "logger": log,
            }
        )
        consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": "zkctl-demo-reader",  # librdkafka wants one; no group is joined
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 1000,
                "logger": log,
            }
        )
        from confluent_kafka import TopicPartition

        consumer.assign([TopicPartition(topic, p, 0) for p in range(self._partitions)])
        self._threads = [
            threading.Thread(
                target=self._produce, args=(producer, topic), name="demo-producer", daemon=True
            ),
            threading.Thread(
                target=self._consume, args=(consumer,), name="demo-consumer", daemon=True
            ),
            threading.Thread(target=self._report, name="demo-clients", daemon=True),
        ]
        for t in self._threads:
            t.start()
        note(
            f"a producer (acks=all, {self.rate:g} messages/s) and a consumer (assign(), from"
            f" offset 0) run on {topic!r} through every failover"
        )

    def _produce(self, producer: Any, topic: str) -> None:
        interval = 1.0 / self.rate
        self.tally.started(range(self._partitions))
        next_send = time.monotonic()
        n = 0
        while not self._stop.is_set():
            n += 1
            value = f"demo-{n:09d}".encode()
            while not self._stop.is_set():
                try:
                    producer.produce(
                        topic,
                        value,
                        partition=n % self._partitions,
                        on_delivery=self.tally.on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            with self.tally.lock:
                self.tally.sent = n
            next_send += interval
            producer.poll(max(0.0, next_send - time.monotonic()))
        # Whatever is in flight gets its answer (acknowledged or failed) before the count.
        producer.flush(self._flush_s)

    def _consume(self, consumer: Any) -> None:
        from confluent_kafka import KafkaError

        try:
            # After stop: read on until the producer has its last answers and every
            # acknowledged message is read, or the drain time is up.
            while not self._stop.is_set() or self._producing() or not self._caught_up():
                if self._stop.is_set() and time.monotonic() > self._drain_deadline:
                    break
                for msg in consumer.consume(500, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            with self.tally.lock:
                                name = f"consumer {err.name()}"
                                self.tally.errors[name] = self.tally.errors.get(name, 0) + 1
                        continue
                    with self.tally.lock:
                        self.tally.read[(msg.partition(), msg.offset())] = msg.value()
        finally:
            consumer.close()

    _drain_deadline = float("inf")
    _flush_s = 60.0

    def _producing(self) -> bool:
        return bool(self._threads) and self._threads[0].is_alive()

    def _caught_up(self) -> bool:
        with self.tally.lock:
            return all(pos in self.tally.read for pos in self.tally.acked)

    def _report(self) -> None:
        while not self._stop.wait(self.report_every_s):
            self._note(self.summary())

    def summary(self) -> str:
        t = self.tally
        with t.lock:
            errors = ", ".join(f"{k} x{v}" for k, v in sorted(t.errors.items())) or "no errors"
            read = len(t.read)
            distinct = len(set(t.read.values()))
        acknowledged = t.acknowledged()
        again = f" ({read - distinct:,} retried duplicates)" if read > distinct else ""
        return (
            f"clients: {t.sent:,} sent, {acknowledged:,} acknowledged, {read:,} read"
            f" back{again}; {errors}; longest a partition waited for an acknowledgement"
            f" {t.longest_stall_s:.1f} s"
        )

    def stop(self, interrupted: bool = False) -> None:
        """Stop sending, wait for the answers, let the consumer read the rest, and say
        whether every acknowledged message was read back where it was acknowledged.
        `interrupted` (Ctrl-C): wait a few seconds at most, and say what was not checked."""
        self._flush_s = 5.0 if interrupted else 60.0
        self._drain_deadline = time.monotonic() + (8 if interrupted else 70)
        self._stop.set()
        for t in self._threads:
            t.join(self._flush_s + 15)
        self._note(self.summary())
        if self._log is not None:
            for h in list(self._log.handlers):
                self._log.removeHandler(h)
                h.close()
        lost = self.tally.lost()
        if lost and interrupted:
            self._note(
                f"interrupted: {len(lost)} acknowledged messages were not read back yet;"
                " nothing is concluded about them"
            )
        elif lost:
            self._note(
                f"LOST: {len(lost)} acknowledged messages were not read back at their offsets,"
                f" first {lost[:5]}"
            )
        else:
            self._note(
                f"every one of the {self.tally.acknowledged():,} acknowledged messages was read"
                " back at the offset it was acknowledged with"
            )
