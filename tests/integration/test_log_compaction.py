"""Log compaction with real brokers and real clients: a compacted topic produced to by
confluent-kafka keeps every key's latest value on every replica while the rest goes; a
replica that was down catches up across the gaps, then leads, and a consumer reading it
from the start gets every key's latest value. The offsets topic is compacted too: a
group's commits, written over and over, read back after its coordinator dies."""

from __future__ import annotations

import time
from typing import cast

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from storage import codecs
from storage.records import (
    BATCH_HEADER_SIZE,
    Compression,
    iter_batches,
    iter_records,
)
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap, headers_on_disk, producer, segment_files
from tests.integration.harness import Cluster, wait_for

pytestmark = pytest.mark.integration

Record = tuple[int, bytes | None, bytes | None]  # offset, key, value

COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.01",
}
FAST_CLEANER = {"log_cleaner_backoff_ms": "100"}


def records_on_disk(c: Cluster, broker: int, topic: str, partition: int) -> list[Record]:
    """Every record in a broker's segment files of the partition, read as they are on
    disk (read again while a compaction's swap moves them: ``segment_files``)."""
    directory = c[broker].data_dir / f"{topic}-{partition}"

    def read() -> list[Record] | None:
        files = segment_files(directory)
        if files is None:
            return None
        found: list[Record] = []
        try:
            for data in files:
                for header in iter_batches(data):
                    batch = data[header.position : header.position + header.size]
                    found.extend((r.offset, r.key, r.value) for r in iter_records(batch))
        except ValueError:
            return None  # an active segment's tail being written
        return found

    return wait_for(read, 30, f"broker {broker}'s files of {topic}-{partition}")


def latest(records: list[Record]) -> dict[bytes, tuple[int, bytes | None]]:
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in sorted(records, key=lambda r: r[0]):
        if key is not None:
            out[key] = (offset, value)
    return out


def codecs_on_disk(c: Cluster, broker: int, topic: str, partition: int) -> set[int]:
    """The compression codecs of the batches in a broker's segment files."""
    return {header.compression for header in headers_on_disk(c, broker, topic, partition)}


def rewritten_batches(c: Cluster, broker: int, topic: str, partition: int) -> int:
    """How many batches in a broker's segment files hold fewer records than their offset
    range: rewritten by the cleaner."""
    return sum(
        header.record_count < header.last_offset - header.base_offset + 1
        for header in headers_on_disk(c, broker, topic, partition)
    )


def rewritten_sizes(c: Cluster, broker: int, topic: str, partition: int) -> list[tuple[int, int]]:
    """Each batch the cleaner rewrote in a broker's segment files: its records body's size
    as stored, and decompressed."""
    directory = c[broker].data_dir / f"{topic}-{partition}"

    def read() -> list[tuple[int, int]] | None:
        files = segment_files(directory)
        if files is None:
            return None
        sizes: list[tuple[int, int]] = []
        try:
            for data in files:
                for h in iter_batches(data):
                    if h.record_count < h.last_offset - h.base_offset + 1:
                        body = data[h.position + BATCH_HEADER_SIZE : h.position + h.size]
                        sizes.append((len(body), len(codecs.decompress(h.compression, body))))
        except ValueError:
            return None
        return sizes

    return wait_for(read, 30, f"broker {broker}'s files of {topic}-{partition}")


def produce_keyed(
    c: Cluster, topic: str, pairs: list[tuple[bytes, bytes | None]], **conf: object
) -> list[Record]:
    """Produce (key, value) pairs in order to partition 0; their acknowledged records."""
    acked: list[Record] = []
    errors: list[object] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    # Small batches: segments roll between batches, and these are a few records each.
    p = producer(
        c, linger_ms=2, batch_num_messages=5, enable_idempotence=False, max_in_flight=1, **conf
    )
    for key, value in pairs:
        p.produce(topic, value, key=key, partition=0, on_delivery=delivered)
        p.poll(0)
    assert p.flush(120) == 0
    assert errors == []
    return acked


def read_from_start(c: Cluster, topic: str) -> list[Record]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(c),
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[Record] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if cast(KafkaError, msg.error()).code() == KafkaError._PARTITION_EOF:
                    return out
                if cast(KafkaError, msg.error()).retriable():
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            out.append((cast(int, msg.offset()), msg.key(), msg.value()))
        raise TimeoutError(f"read {len(out)} records, no end of partition in 120 s")
    finally:
        consumer.close()


def test_compaction_keeps_each_keys_latest_value_on_every_replica_and_across_catch_up(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**FAST_CLEANER)
    c.wait_controller()
    topic = "profiles"
    c.create_topic(topic, {0: (1, 2, 3)}, COMPACTED)
    c.wait_topic_online(topic)
    # A record without a key is refused (Kafka's INVALID_RECORD), as the client sees it.
    refused: list[KafkaError] = []
    p = producer(c, enable_idempotence=False)
    p.produce(
        topic,
        b"no key",
        partition=0,
        on_delivery=lambda err, _m: refused.append(cast(KafkaError, err)),
    )
    assert p.flush(60) == 0
    assert [e.code() for e in refused] == [KafkaError.INVALID_RECORD]
    c[3].stop()  # it catches up later, from logs compacted meanwhile
    c.wait_partitions(topic, lambda s: 3 not in s[0].isr, "broker 3 out of the ISR")

    pairs: list[tuple[bytes, bytes | None]] = [
        (b"user-%02d" % (i % 20), b"profile-%d-" % i + b"x" * 60) for i in range(1500)
    ]
    pairs += [(b"user-00", None), (b"user-01", None)]  # tombstones
    acked = produce_keyed(c, topic, pairs)
    assert len(acked) == len(pairs)
    model = latest(acked)

    def compacted_on(broker: int) -> list[Record] | None:
        on_disk = records_on_disk(c, broker, topic, 0)
        return on_disk if len(on_disk) < len(pairs) // 4 else None

    for broker in (1, 2):
        on_disk = wait_for(lambda b=broker: compacted_on(b), 60, f"broker {broker} compacted")  # type: ignore[misc]  # binds the loop's variable
        assert latest(on_disk) == model  # tombstones kept: within delete.retention.ms
        assert set(on_disk) <= set(acked)  # offsets, keys and values as produced

    # Broker 3 fetches the leader's compacted log from the start: across its gaps.
    c[3].start()
    c.wait_partitions(topic, lambda s: 3 in s[0].isr, "broker 3 back in the ISR", timeout=60)
    on_three = records_on_disk(c, 3, topic, 0)
    assert latest(on_three) == model
    assert set(on_three) <= set(acked)
    # It leads now, and a consumer reads every key's latest value from it.
    c[1].kill()
    c[2].kill()
    c.wait_partitions(topic, lambda s: s[0].leader == 3, "broker 3 leading", timeout=60)
    read = read_from_start(c, topic)
    assert latest(read) == model
    assert len(read) < len(pairs) // 4
    assert [r[0] for r in read] == sorted({r[0] for r in read})


def test_the_offsets_topic_is_compacted_and_its_commits_read_back(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(
        **FAST_CLEANER,
        offsets_topic_segment_bytes="4096",
        offsets_topic_num_partitions="1",
        group_initial_rebalance_delay_ms="0",
    )
    c.wait_controller()
    topic = "work"
    c.create_topic(topic, {p: (1, 2, 3) for p in range(3)})
    c.wait_topic_online(topic)
    settings = {
        "bootstrap.servers": bootstrap(c),
        "group.id": "committer",
        "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    consumer = Consumer(settings)
    try:
        for i in range(400):
            offsets = [TopicPartition(topic, p, i * 10 + p) for p in range(3)]
            deadline = time.monotonic() + 60
            while True:
                try:
                    consumer.commit(offsets=offsets, asynchronous=False)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
    finally:
        consumer.close()
    last = {p: 399 * 10 + p for p in range(3)}

    leader = c.partition_states("__consumer_offsets")[0].leader
    wait_for(
        lambda: len(records_on_disk(c, leader, "__consumer_offsets", 0)) < 600 or None,
        60,
        "__consumer_offsets compacted",
    )
    c[leader].kill()
    c.wait_partitions(
        "__consumer_offsets",
        lambda s: s[0].leader not in (-1, leader),
        "the offsets partition led by a live broker",
    )
    reader = Consumer(settings)
    try:

        def fetched() -> dict[int, int] | None:
            try:
                got = reader.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
            except Exception:
                return None
            return {tp.partition: tp.offset for tp in got}

        assert wait_for(fetched, 60, "the commits read back") == last
    finally:
        reader.close()


@pytest.mark.parametrize("codec", ["lz4", "snappy", "zstd"])
def test_batches_librdkafka_compressed_are_compacted_and_read_back(
    cluster_factory: ClusterFactory, codec: str
) -> None:
    """librdkafka's lz4 and zstd frames and snappy streams are read here: a compacted topic
    refuses such a batch's record without a key, the cleaner compacts them, and its
    rewritten batches (still of the codec, compressed here) are read back by librdkafka."""
    c = cluster_factory(brokers=(1,), **FAST_CLEANER)
    c.wait_controller()
    topic = f"compressed-{codec}"
    c.create_topic(topic, {0: (1,)}, COMPACTED)
    c.wait_topic_online(topic)
    refused: list[KafkaError] = []
    p = producer(c, enable_idempotence=False, compression_type=codec)
    p.produce(
        topic,
        b"no key " * 20,
        partition=0,
        on_delivery=lambda e, _m: refused.append(cast(KafkaError, e)),
    )
    assert p.flush(60) == 0
    assert [e.code() for e in refused] == [KafkaError.INVALID_RECORD]

    # 7 keys in batches of 5: the last batches keep some of their records, so the cleaner
    # rewrites them, once keys of their own after them close their segments.
    pairs: list[tuple[bytes, bytes | None]] = [
        (b"user-%02d" % (i % 7), b"profile-%d-" % i + b"x" * 200) for i in range(1500)
    ]
    pairs += [(b"filler-%d" % i, b"%d" % i * 100) for i in range(200)]
    acked = produce_keyed(c, topic, pairs, compression_type=codec)
    assert len(acked) == len(pairs)
    model = latest(acked)

    def compacted() -> list[Record] | None:
        on_disk = records_on_disk(c, 1, topic, 0)
        return on_disk if len(on_disk) < len(pairs) // 4 else None

    on_disk = wait_for(compacted, 60, "the topic compacted")
    assert latest(on_disk) == model
    assert set(on_disk) <= set(acked)
    codes = {"lz4": Compression.LZ4, "snappy": Compression.SNAPPY, "zstd": Compression.ZSTD}
    # Batches the cleaner rewrote (in their codec, as written here), once it has come to
    # those holding the keys' latest records.
    wait_for(lambda: rewritten_batches(c, 1, topic, 0) > 0, 60, "a batch rewritten")
    assert codecs_on_disk(c, 1, topic, 0) == {codes[codec]}
    # Compressed again: the values' runs of "x" are matches, not stored as they are.
    sizes = rewritten_sizes(c, 1, topic, 0)
    assert sizes
    assert all(stored < plain / 2 for stored, plain in sizes), sizes
    read = read_from_start(c, topic)
    assert latest(read) == model
    # As produced (the cleaner may have gone on since the files were read).
    assert set(read) <= set(acked)


def test_large_zstd_batches_librdkafka_wrote_at_a_high_level_decode(
    cluster_factory: ClusterFactory,
) -> None:
    """Batches of about 1 MB at level 12: frames of several blocks whose literals and
    sequence tables carry over from block to block, decoded back to what was produced."""
    c = cluster_factory(brokers=(1,))
    c.wait_controller()
    c.create_topic("big-zstd", {0: (1,)})
    c.wait_topic_online("big-zstd")
    words = [b"%x" % (i * 2654435761 % 2**32) for i in range(300)]
    pairs = [
        (b"big-%d" % i, b"".join(words[(i * 7 + j * 13) % 300] for j in range(200 + i * 5)))
        for i in range(300)
    ]
    p = producer(
        c,
        compression_type="zstd",
        compression_level=12,
        linger_ms=200,
        batch_size=1_000_000,
        enable_idempotence=False,
    )
    for key, value in pairs:
        p.produce("big-zstd", value, key=key, partition=0)
    assert p.flush(120) == 0
    on_disk = records_on_disk(c, 1, "big-zstd", 0)
    assert [(key, value) for _, key, value in sorted(on_disk)] == pairs
    assert codecs_on_disk(c, 1, "big-zstd", 0) == {Compression.ZSTD}
