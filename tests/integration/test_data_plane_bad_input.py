"""Bad input on the data plane, over the raw protocol, against real brokers.

Requests are built with the project's own codec (wire/) and record batches with
storage.testing.build_batch, then damaged on purpose. Each refusal must carry the
protocol's error, append nothing (checked afterwards with ListOffsets and Fetch), and
leave the connection, or at least the broker, serving others.

Not repeated here: malformed frames, unknown API keys and unsupported versions of
Metadata, Fetch and ApiVersions (tests/integration/test_bad_input.py), and a batch over a
topic's max.message.bytes sent by confluent-kafka (test_data_plane.py).
"""

from __future__ import annotations

import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from admin import elect, reassign
from broker.apis import SUPPORTED
from cluster import zookeeper as zkp
from storage.records import Compression, iter_batches, iter_records
from storage.testing import build_batch, legacy_message
from tests.integration.conftest import FAST
from tests.integration.dataplane import Acked, producer
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from wire.protocol import encode_request
from zkdata import paths
from zkdata.znodes import TopicPartition

pytestmark = pytest.mark.integration

PRODUCE_V = 8  # librdkafka 2.x's choice against this broker (3..9)
LIST_OFFSETS_V = 5
FETCH_V = 11
MESSAGE_MAX_BYTES = 20_000  # broker-wide: the default of every topic's max.message.bytes
LATEST = -1


@pytest.fixture(scope="module")
def cluster(
    zookeeper: zkp.ZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three brokers for every case (each case uses topics of its own)."""
    connect = zkp.chroot_connect_string(
        zookeeper.connect_string, f"/tests/data-plane-bad-input-{uuid.uuid4().hex[:8]}"
    )
    settings = {**FAST, "message.max.bytes": str(MESSAGE_MAX_BYTES)}
    c = Cluster(connect, tmp_path_factory.mktemp("data-plane-bad-input"), (1, 2, 3), settings)
    try:
        c.start()
        yield c
    finally:
        c.close()
        zkp.delete_chroot(connect)


def new_topic(c: Cluster, replicas: tuple[int, ...] = (1, 2, 3), **config: str) -> str:
    """A one-partition topic, online and with its whole ISR, led by replicas[0]."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    c.create_topic(name, {0: replicas}, {k.replace("_", "."): v for k, v in config.items()})
    c.wait_partitions(
        name,
        lambda s: s[0].leader == replicas[0] and set(s[0].isr) == set(replicas),
        f"{name} online with a full ISR",
    )
    # The leader must know it leads (LeaderAndIsr applied) before it is asked to append.
    with connect(c, replicas[0]) as conn:
        wait_for(
            lambda: list_offset(conn, name) == 0,
            30,
            f"broker {replicas[0]} serving {name}",
        )
    # And every broker must know the partition: the controller's requests to each go on a
    # channel of their own, and a broker that has not had its own yet answers for a
    # partition it does not know UNKNOWN_TOPIC_OR_PARTITION, as Kafka's does, where a
    # case expects a follower's NOT_LEADER_OR_FOLLOWER or its metadata's leader. (Each
    # replica's LeaderAndIsr comes before its UpdateMetadata.)
    for b in c.brokers:
        with connect(c, b) as conn:
            wait_for(
                lambda conn=conn: known_leader(conn, name) == replicas[0],  # type: ignore[misc]  # binds the loop's variable
                30,
                f"broker {b}'s metadata naming the leader of {name}",
            )
    return name


def connect(c: Cluster, broker_id: int) -> KafkaConnection:
    return KafkaConnection("127.0.0.1", c[broker_id].port(), client_id="bad-input", timeout_s=30)


def produce_body(
    topic: str, records: bytes | bytearray, acks: int = -1, partition: int = 0
) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10_000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def produce(
    conn: KafkaConnection,
    topic: str,
    records: bytes | bytearray,
    acks: int = -1,
    partition: int = 0,
) -> dict[str, Any]:
    """The one partition's answer to a Produce request."""
    body = conn.request(ApiKey.PRODUCE, PRODUCE_V, produce_body(topic, records, acks, partition))
    [t] = body["responses"]
    [p] = t["partition_responses"]
    return dict(p)


def list_offset(
    conn: KafkaConnection, topic: str, timestamp: int = LATEST, replica_id: int = -1
) -> int | None:
    """ListOffsets for partition 0: the offset, or None with an error. replica_id >= 0
    asks as a follower would: the leader's log end rather than the high watermark."""
    body = conn.request(
        ApiKey.LIST_OFFSETS,
        LIST_OFFSETS_V,
        {
            "replica_id": replica_id,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
        },
    )
    [p] = body["topics"][0]["partitions"]
    return None if p["error_code"] != ErrorCode.NONE else int(p["offset"])


def log_end(conn: KafkaConnection, topic: str) -> tuple[int | None, int | None]:
    """(high watermark, log end offset) of partition 0 on this broker (its leader)."""
    return list_offset(conn, topic), list_offset(conn, topic, replica_id=1)


def fetch_values(conn: KafkaConnection, topic: str, offset: int = 0) -> list[tuple[int, bytes]]:
    """Every record readable from `offset` (up to the high watermark), as (offset, value)."""
    p = fetch_partition(conn, topic, offset)
    assert p["error_code"] == ErrorCode.NONE, ErrorCode.of(p["error_code"]).name
    records = bytes(p["records"] or b"")
    out = []
    for h in iter_batches(records):
        for r in iter_records(records[h.position : h.position + h.size]):
            out.append((r.offset, r.value or b""))
    return out


def fetch_partition(
    conn: KafkaConnection, topic: str, offset: int = 0, version: int = FETCH_V
) -> dict[str, Any]:
    """A consumer's Fetch of partition 0 from `offset`: the partition's answer."""
    body = conn.request(
        ApiKey.FETCH,
        version,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 16 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": 16 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    [p] = body["responses"][0]["partitions"]
    return dict(p)


def error_name(answer: dict[str, Any]) -> str:
    return ErrorCode.of(answer["error_code"]).name


def value(tag: str, i: int, size: int = 100) -> bytes:
    return f"{tag}-{i:06d}-".encode().ljust(size, b"x")


def good_batch(tag: str, count: int = 3, size: int = 100) -> bytearray:
    return build_batch([value(tag, i, size) for i in range(count)])


# --- batches refused whole ------------------------------------------------------------------

CRC_FIELD = 17  # baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8


def flipped(batch: bytearray, position: int) -> bytearray:
    damaged = bytearray(batch)
    damaged[position] ^= 0x01
    return damaged


def crc_byte_flipped() -> bytes:
    return bytes(flipped(good_batch("crc"), CRC_FIELD + 3))


def record_byte_flipped() -> bytes:
    batch = good_batch("body")
    return bytes(flipped(batch, len(batch) - 10))  # inside the last record's value


def second_batch_corrupt() -> bytes:
    """A good batch, then a bad one, in one request: the good one must not be kept."""
    return bytes(good_batch("first") + flipped(good_batch("second"), CRC_FIELD))


def two_batches() -> bytes:
    """A produce request holds one batch (Kafka's ProduceRequest.validateRecords)."""
    return bytes(good_batch("first") + good_batch("second"))


def batch_cut_short() -> bytes:
    """A well-framed request whose record set ends inside its batch: no whole batch,
    which Kafka's ProduceRequest.validateRecords refuses (its iterator reads none)."""
    batch = good_batch("cut", 10)
    return bytes(batch[: len(batch) // 2])


def trailing_bad_size() -> bytes:
    """After the batch, an entry whose size field is below 14: Kafka's iterator throws
    CorruptRecordException (ByteBufferLogInputStream.nextBatchSize). Three bytes of
    garbage instead are left out, the batch appended (the test after this one)."""
    return bytes(good_batch("tail") + struct.pack(">qi", 0, 13))


def legacy_format() -> bytes:
    return bytes(legacy_message(b"magic one"))


def nonzero_base_offset() -> bytes:
    return bytes(build_batch([b"x"], base_offset=5))


def no_records() -> bytes:
    return b""


def over_message_max_bytes() -> bytes:
    return bytes(build_batch([b"x" * (MESSAGE_MAX_BYTES + 1)]))


REFUSED: list[tuple[Callable[[], bytes], ErrorCode]] = [
    (crc_byte_flipped, ErrorCode.CORRUPT_MESSAGE),
    (record_byte_flipped, ErrorCode.CORRUPT_MESSAGE),
    (second_batch_corrupt, ErrorCode.INVALID_RECORD),
    (two_batches, ErrorCode.INVALID_RECORD),
    (batch_cut_short, ErrorCode.INVALID_RECORD),
    (trailing_bad_size, ErrorCode.CORRUPT_MESSAGE),
    (legacy_format, ErrorCode.INVALID_RECORD),  # Kafka's ProduceRequest.validateRecords
    (nonzero_base_offset, ErrorCode.INVALID_RECORD),
    (no_records, ErrorCode.INVALID_RECORD),
    (over_message_max_bytes, ErrorCode.MESSAGE_TOO_LARGE),
]


@pytest.mark.parametrize(("bad", "expected"), REFUSED, ids=[f.__name__ for f, _ in REFUSED])
def test_a_bad_batch_is_refused_with_its_error_and_nothing_is_appended(
    cluster: Cluster, bad: Callable[[], bytes], expected: ErrorCode
) -> None:
    topic = new_topic(cluster)
    with connect(cluster, 1) as conn:
        first = produce(conn, topic, bytes(good_batch("before")))
        assert (error_name(first), first["base_offset"]) == ("NONE", 0)
        assert log_end(conn, topic) == (3, 3)
        for acks in (-1, 1):
            answer = produce(conn, topic, bad(), acks=acks)
            assert error_name(answer) == expected.name, answer.get("error_message")
            assert answer["base_offset"] == -1
        assert log_end(conn, topic) == (3, 3), "a refused request appended something"
        # The same connection goes on, and the next batch lands right after the first.
        after = produce(conn, topic, bytes(good_batch("after")))
        assert (error_name(after), after["base_offset"]) == ("NONE", 3)
        got = fetch_values(conn, topic)
    assert got == [(i, value("before", i)) for i in range(3)] + [
        (3 + i, value("after", i)) for i in range(3)
    ]
    # The followers hold exactly the same.
    for follower in (2, 3):
        assert_same_on(cluster, topic, follower, got)


def test_an_incomplete_entry_after_the_batch_is_left_out_on_every_replica(
    cluster: Cluster,
) -> None:
    """Kafka 2.8 reads a producer's records with ByteBufferLogInputStream: an incomplete
    entry after the batch (a few bytes of garbage, a batch cut short) ends them, and the
    log writes the whole batch only (Log.trimInvalidBytes): appended, answered NONE, the
    next batch right after it, the followers holding the same."""
    topic = new_topic(cluster)
    cut = bytes(good_batch("cut"))
    with connect(cluster, 1) as conn:
        for i, tail in enumerate((b"\x00\x00\x00", cut[:16], cut[:-1])):
            answer = produce(conn, topic, bytes(good_batch(f"b{i}")) + tail)
            assert (error_name(answer), answer["base_offset"]) == ("NONE", 3 * i)
        assert log_end(conn, topic) == (9, 9)
        got = fetch_values(conn, topic)
    assert got == [(3 * b + i, value(f"b{b}", i)) for b in range(3) for i in range(3)]
    for follower in (2, 3):
        assert_same_on(cluster, topic, follower, got)


def assert_same_on(
    c: Cluster, topic: str, broker_id: int, expected: list[tuple[int, bytes]]
) -> None:
    """A follower's log holds exactly `expected`. A follower serves no reads, so its segment
    files are read directly; acks=all answered, so every ISR member has everything."""
    state, _ = c.partition_state(topic, 0)
    assert broker_id in state.isr
    with connect(c, broker_id) as conn:
        assert list_offset(conn, topic) is None  # NOT_LEADER_OR_FOLLOWER
    directory = c[broker_id].data_dir / f"{topic}-0"
    data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    on_disk = [
        (r.offset, r.value or b"")
        for h in iter_batches(data)
        for r in iter_records(data[h.position : h.position + h.size])
    ]
    assert on_disk == expected


def test_zstd_needs_produce_v7_and_a_zstd_topic_needs_fetch_v10(cluster: Cluster) -> None:
    """KIP-110: a zstd batch in a Produce below version 7 is refused
    (UNSUPPORTED_COMPRESSION_TYPE), and so is a consumer's Fetch below version 10 of a
    topic whose compression.type is zstd; an uncompressed batch is stored zstd there, and
    the followers, fetching at their version, replicate it all."""
    topic = new_topic(cluster, compression_type="zstd")
    zstd_batch = bytes(build_batch([value("z", i) for i in range(3)], compression=Compression.ZSTD))
    with connect(cluster, 1) as conn:
        for version in (3, 6):
            body = conn.request(ApiKey.PRODUCE, version, produce_body(topic, zstd_batch))
            [answer] = body["responses"][0]["partition_responses"]
            assert error_name(answer) == "UNSUPPORTED_COMPRESSION_TYPE"
        for version, base_offset, batch in ((7, 0, zstd_batch), (6, 3, bytes(good_batch("u")))):
            body = conn.request(ApiKey.PRODUCE, version, produce_body(topic, batch))
            [answer] = body["responses"][0]["partition_responses"]
            assert (error_name(answer), answer["base_offset"]) == ("NONE", base_offset)
        old = fetch_partition(conn, topic, version=9)
        assert error_name(old) == "UNSUPPORTED_COMPRESSION_TYPE"
        assert (old["high_watermark"], bytes(old["records"] or b"")) == (-1, b"")
        assert error_name(fetch_partition(conn, topic, version=10)) == "NONE"
        got = fetch_values(conn, topic)
    assert got == [(i, value("z", i)) for i in range(3)] + [
        (3 + i, value("u", i)) for i in range(3)
    ]
    for follower in (2, 3):
        assert_same_on(cluster, topic, follower, got)
    directory = cluster[2].data_dir / f"{topic}-0"
    data = b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))
    assert {h.compression for h in iter_batches(data)} == {Compression.ZSTD}


def test_message_max_bytes_limits_each_batch_and_a_topic_may_raise_it(cluster: Cluster) -> None:
    """Kafka's rule: the limit is each batch's (a request may hold more: one batch a
    partition), and a topic's max.message.bytes overrides the broker's
    message.max.bytes."""
    topic = new_topic(cluster)
    just_fits = build_batch([b"a" * (MESSAGE_MAX_BYTES - 100)])
    assert len(just_fits) <= MESSAGE_MAX_BYTES
    one_large = build_batch([b"c" * (MESSAGE_MAX_BYTES + 1)])
    with connect(cluster, 1) as conn:
        for offset in (0, 1):
            answer = produce(conn, topic, bytes(just_fits))
            assert (error_name(answer), answer["base_offset"]) == ("NONE", offset)
        answer = produce(conn, topic, bytes(one_large))
        assert error_name(answer) == "MESSAGE_TOO_LARGE"
        assert str(MESSAGE_MAX_BYTES) in (answer["error_message"] or "")
        assert log_end(conn, topic) == (2, 2)
    roomy = new_topic(cluster, max_message_bytes=str(4 * MESSAGE_MAX_BYTES))
    with connect(cluster, 1) as conn:
        answer = produce(conn, roomy, bytes(one_large))
        assert (error_name(answer), answer["base_offset"]) == ("NONE", 0)


# --- frames that never complete, versions we do not speak ------------------------------------


def test_a_truncated_produce_frame_closes_only_its_connection(cluster: Cluster) -> None:
    """Half a Produce frame, held open: the broker waits on that connection alone; others
    produce and fetch meanwhile. Closed mid-frame, it appends nothing."""
    topic = new_topic(cluster)
    frame = encode_request(
        ApiKey.PRODUCE, PRODUCE_V, 1, "half", produce_body(topic, bytes(good_batch("half")))
    )
    stalled = socket.create_connection(("127.0.0.1", cluster[1].port()), timeout=10)
    try:
        stalled.sendall(frame[: len(frame) // 2])
        with connect(cluster, 1) as conn:
            for i in range(5):
                answer = produce(conn, topic, bytes(good_batch(f"other{i}", 1)))
                assert (error_name(answer), answer["base_offset"]) == ("NONE", i)
            assert len(fetch_values(conn, topic)) == 5
    finally:
        stalled.close()
    # A frame that claims more than it carries, then EOF: closed, nothing appended.
    with socket.create_connection(("127.0.0.1", cluster[1].port()), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame) - 4 + 100) + frame[4:])
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(1) == b""
    # A frame whose Produce body does not decode (the records' length runs past the end):
    # a Produce response has no top-level error code, so the broker closes.
    body_end = frame[: len(frame) - 50]
    with socket.create_connection(("127.0.0.1", cluster[1].port()), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body_end) - 4) + body_end[4:])
        assert sock.recv(1) == b""
    with connect(cluster, 1) as conn:
        assert log_end(conn, topic) == (5, 5)
        assert not [v for _, v in fetch_values(conn, topic) if v.startswith(b"half")]
    assert all(b.alive() for b in cluster.brokers.values())


def test_an_acks_0_produce_that_is_refused_closes_the_connection(cluster: Cluster) -> None:
    """acks=0 has no answer to carry an error: a refused batch closes the connection (as
    Kafka does), so the producer notices; a good one is appended with no answer."""
    topic = new_topic(cluster)
    good = encode_request(
        ApiKey.PRODUCE, PRODUCE_V, 1, "acks0", produce_body(topic, bytes(good_batch("g")), 0)
    )
    bad = encode_request(
        ApiKey.PRODUCE, PRODUCE_V, 2, "acks0", produce_body(topic, crc_byte_flipped(), 0)
    )
    with socket.create_connection(("127.0.0.1", cluster[1].port()), timeout=10) as sock:
        sock.sendall(good)
        with connect(cluster, 1) as conn:
            wait_for(lambda: log_end(conn, topic) == (3, 3), 30, "the acks=0 batch appended")
        sock.sendall(bad)
        assert sock.recv(1) == b""  # closed, and no answer was sent for either request
    with connect(cluster, 1) as conn:
        assert log_end(conn, topic) == (3, 3)


@pytest.mark.parametrize("version", [10, 11])
def test_a_produce_version_we_do_not_speak_closes_the_connection(
    cluster: Cluster, version: int
) -> None:
    """Produce v10 or v11 (in Kafka's schemas, above ours; every version below is served):
    the request cannot be answered in a version the client reads, so the connection
    closes, nothing is appended, and ApiVersions told the client the range beforehand."""
    assert version not in range(
        SUPPORTED[ApiKey.PRODUCE].min_version, SUPPORTED[ApiKey.PRODUCE].max_version + 1
    )
    topic = new_topic(cluster)
    frame = encode_request(
        ApiKey.PRODUCE, version, 1, "old", produce_body(topic, bytes(good_batch("v")))
    )
    with socket.create_connection(("127.0.0.1", cluster[1].port()), timeout=10) as sock:
        sock.sendall(frame)
        assert sock.recv(1) == b""
    with connect(cluster, 1) as conn:
        assert log_end(conn, topic) == (0, 0)
        versions = conn.request(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "probe", "client_software_version": "1"},
        )
        [produce_range] = [k for k in versions["api_keys"] if k["api_key"] == ApiKey.PRODUCE]
        assert (produce_range["min_version"], produce_range["max_version"]) == (0, 9)


def test_an_unknown_topic_or_partition_is_refused(cluster: Cluster) -> None:
    topic = new_topic(cluster)
    with connect(cluster, 1) as conn:
        missing = produce(conn, f"no-such-{uuid.uuid4().hex[:6]}", bytes(good_batch("x")))
        assert error_name(missing) == "UNKNOWN_TOPIC_OR_PARTITION"
        beyond = produce(conn, topic, bytes(good_batch("x")), partition=7)
        assert error_name(beyond) == "UNKNOWN_TOPIC_OR_PARTITION"
        assert log_end(conn, topic) == (0, 0)


def test_a_partition_this_broker_does_not_host_sends_the_client_to_its_metadata(
    cluster: Cluster,
) -> None:
    """A partition the cluster has on other brokers (a reassignment moved it away, say) is
    NOT_LEADER_OR_FOLLOWER to Produce, Fetch and ListOffsets, as Kafka's
    getPartitionOrError answers: a client refreshes its metadata and finds the leader. As
    UNKNOWN_TOPIC_OR_PARTITION a client may give up on a topic that exists."""
    topic = new_topic(cluster, (2,))
    with connect(cluster, 1) as elsewhere:
        wait_for(
            lambda: metadata_leader(elsewhere, topic)[0] == 2, 30, "broker 1 knowing the topic"
        )
        refused = produce(elsewhere, topic, bytes(good_batch("x")))
        assert error_name(refused) == "NOT_LEADER_OR_FOLLOWER"
        fetched = fetch_partition(elsewhere, topic)
        assert ErrorCode.of(fetched["error_code"]).name == "NOT_LEADER_OR_FOLLOWER"
        assert list_offset(elsewhere, topic) is None
    with connect(cluster, 2) as leader:
        assert log_end(leader, topic) == (0, 0)


# --- not the leader -----------------------------------------------------------------------------


def known_leader(conn: KafkaConnection, topic: str) -> int | None:
    """The leader of the topic's partition 0 in the broker's metadata; None while the
    broker does not know the topic."""
    body = conn.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}]})
    [t] = body["topics"]
    partitions = [p for p in t["partitions"] if p["partition_index"] == 0]
    if t["error_code"] != ErrorCode.NONE or not partitions:
        return None
    return int(partitions[0]["leader_id"])


def metadata_leader(conn: KafkaConnection, topic: str) -> tuple[int, int]:
    body = conn.request(ApiKey.METADATA, 9, {"topics": [{"name": topic}]})
    [t] = body["topics"]
    [p] = t["partitions"]
    assert p["error_code"] == ErrorCode.NONE
    return int(p["leader_id"]), int(p["leader_epoch"])


def test_produce_to_a_non_leader_is_refused_and_metadata_names_the_leader(
    cluster: Cluster,
) -> None:
    """A follower refuses with NOT_LEADER_OR_FOLLOWER and appends nothing; Metadata from it
    names the leader. When leadership moves while the old leader lives on, the old leader
    refuses in turn, and a real client, already producing, finds the new leader through
    Metadata with no error reaching the application."""
    topic = new_topic(cluster, (1, 2, 3))
    with connect(cluster, 2) as follower, connect(cluster, 1) as leader:
        refused = produce(follower, topic, bytes(good_batch("wrong")))
        assert error_name(refused) == "NOT_LEADER_OR_FOLLOWER"
        assert metadata_leader(follower, topic)[0] == 1
        answer = produce(leader, topic, bytes(good_batch("right")))
        assert (error_name(answer), answer["base_offset"]) == ("NONE", 0)
        assert log_end(leader, topic) == (3, 3)

    acked = Acked()
    stop = threading.Event()
    # Batches well under this cluster's message.max.bytes (20,000): librdkafka does not split
    # a batch the broker refuses as too large, and messages queued during the move would
    # otherwise fill one past it.
    p = producer(cluster, message_timeout_ms=60_000, batch_size=8_000)

    def stream() -> None:
        i = 0
        while not stop.is_set():
            p.produce(topic, value("live", i), partition=0, on_delivery=acked.callback)
            p.poll(0.002)
            i += 1
        p.flush(60)

    t = threading.Thread(target=stream)
    t.start()
    try:
        wait_for(lambda: len(acked.by_offset) > 200, 30, "the client producing")
        # Move leadership to broker 2 while broker 1 stays up: reorder, then elect.
        reassign.start_reassignment(cluster.zk, {TopicPartition(topic, 0): (2, 1, 3)})
        wait_for(
            lambda: cluster.zk.exists(paths.REASSIGN_PARTITIONS) is None, 30, "reassignment done"
        )
        elect.start_preferred_election(cluster.zk, elect.parse_scope(topic=topic))
        cluster.wait_partitions(topic, lambda s: s[0].leader == 2, "broker 2 leading")
        seen = len(acked.by_offset)
        wait_for(lambda: len(acked.by_offset) > seen + 200, 30, "deliveries after the move")
    finally:
        stop.set()
        t.join(90)
    assert acked.errors == []
    with connect(cluster, 1) as old, connect(cluster, 2) as new:
        wait_for(lambda: metadata_leader(old, topic)[0] == 2, 30, "broker 1's metadata updated")
        end = list_offset(new, topic)
        assert end is not None
        refused = produce(old, topic, bytes(good_batch("stale")))
        assert error_name(refused) == "NOT_LEADER_OR_FOLLOWER"
        assert list_offset(old, topic) is None
        answer = produce(new, topic, bytes(good_batch("moved")))
        assert (error_name(answer), answer["base_offset"]) == ("NONE", end)
        got = fetch_values(new, topic)
    offsets = [o for o, _ in got]
    assert offsets == list(range(len(offsets)))
    assert not [v for _, v in got if v.startswith((b"wrong", b"stale"))]
    at = dict(got)
    assert all(at.get(o) == v for (_, o), v in acked.by_offset.items())


@pytest.mark.parametrize("version", range(1, 7))
def test_list_offsets_is_answered_in_every_version_served(cluster: Cluster, version: int) -> None:
    """Earliest, latest and by timestamp, in each version advertised (v1-v3 answers have
    no leader epoch: a broker that put one in could not encode them)."""
    topic = new_topic(cluster)
    with connect(cluster, 1) as conn:
        assert produce(conn, topic, good_batch("lo", 3))["error_code"] == 0
        for timestamp, expected in ((-2, 0), (-1, 3), (0, 0)):
            body = conn.request(
                ApiKey.LIST_OFFSETS,
                version,
                {
                    "replica_id": -1,
                    "isolation_level": 0,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "current_leader_epoch": -1,
                                    "timestamp": timestamp,
                                }
                            ],
                        }
                    ],
                },
            )
            (answer,) = body["topics"][0]["partitions"]
            assert (answer["error_code"], answer["offset"]) == (0, expected)
            if version >= 4 and timestamp == -1:
                assert answer["leader_epoch"] == 0
