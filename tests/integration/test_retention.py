"""Retention on running brokers: an idle partition's records go once past retention.ms,
on its leader and its follower (Kafka 2.8 rolls the active segment to delete it)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition

from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import (
    Acked,
    bootstrap,
    consume,
    produce,
    producer,
)
from tests.integration.harness import Cluster, wait_for

pytestmark = pytest.mark.integration

HOUR = 3_600_000


def bytes_on_disk(c: Cluster, broker: int) -> int | None:
    """The size of t-0's segment files on a broker (.deleted ones aside); None while one
    is renamed under the count."""
    try:
        return sum(p.stat().st_size for p in (c[broker].data_dir / "t-0").glob("*.log"))
    except FileNotFoundError:
        return None


def test_an_idle_partition_past_retention_is_emptied_on_its_leader_and_follower(
    cluster_factory: ClusterFactory,
) -> None:
    """Five records two hours old under a one-hour retention.ms, then nothing written:
    both replicas delete their only segment (rolled first), the log start offset is the
    log end, a read from offset 0 is out of range (the consumer resets to the earliest
    offset, 5), and after the leader dies the follower leads from there."""
    c = cluster_factory((1, 2), log_retention_check_interval_ms="300")
    c.wait_controller()
    c.create_topic("t", {0: (1, 2)}, {"retention.ms": str(HOUR)})
    c.wait_topic_online("t")
    old = int(time.time() * 1000) - 2 * HOUR
    p = producer(c)
    acked = Acked()
    for i in range(5):
        p.produce("t", b"old-%d" % i, partition=0, timestamp=old, on_delivery=acked.callback)
    assert p.flush(60) == 0
    assert (acked.errors, sorted(acked.by_offset)) == ([], [(0, i) for i in range(5)])

    consumer = Consumer({"bootstrap.servers": bootstrap(c), "group.id": "watermarks"})
    try:

        def emptied() -> bool:
            low_high = consumer.get_watermark_offsets(KafkaPartition("t", 0), timeout=10)
            return tuple(low_high) == (5, 5)

        wait_for(emptied, 60, "the leader's log start offset at its log end")
    finally:
        consumer.close()
    for b in (1, 2):
        wait_for(lambda b=b: bytes_on_disk(c, b) == 0, 60, f"broker {b}'s records of t-0 gone")  # type: ignore[misc]  # binds the loop's variable

    c.wait_partitions("t", lambda s: set(s[0].isr) == {1, 2}, "broker 2 in t-0's ISR")
    c[1].kill()
    c.wait_partitions("t", lambda s: s[0].leader == 2, "broker 2 leads t-0")
    assert produce(c, "t", [b"new"], partition=0).by_offset == {(0, 5): b"new"}
    assert consume(c, "t", [0], start=0) == {0: [(5, b"new")]}
