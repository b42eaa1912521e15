"""Replicated partition logs with real clients: nothing acknowledged is ever lost."""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from typing import cast

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition

from admin import elect, reassign, topics
from cluster.netsplit import linked
from storage.records import Compression
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import (
    Acked,
    bootstrap,
    consume,
    headers_on_disk,
    lost_acknowledged,
    produce,
    producer,
)
from tests.integration.harness import Cluster, wait_for
from zkdata import paths
from zkdata.znodes import TopicPartition

pytestmark = pytest.mark.integration

RF3 = {p: tuple((1, 2, 3)[(p + i) % 3] for i in range(3)) for p in range(3)}


def values(n: int, tag: str = "m", size: int = 100) -> list[bytes]:
    return [f"{tag}-{i:08d}-".encode().ljust(size, b"x") for i in range(n)]


def check_acked_readable(c: Cluster, topic: str, acked: Acked, partitions: list[int]) -> None:
    """Every acknowledged message is readable at the offset it was acknowledged with."""
    missing = lost_acknowledged(consume(c, topic, partitions), acked)
    assert not missing, f"{len(missing)} acknowledged messages lost or changed, e.g. {missing[:3]}"


def test_produce_and_consume_100k_with_kcat_and_confluent_kafka(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    c.create_topic("t", RF3, {"min.insync.replicas": "2"})
    c.wait_topic_online("t")
    sent = values(50_000, "ck")
    acked = produce(c, "t", sent)
    assert acked.errors == []
    # kcat produces the other half, acks=all, one message per line.
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by the set-up script"
    lines = values(50_000, "kc")
    subprocess.run(
        [kcat, "-P", "-b", bootstrap(c), "-t", "t", "-X", "acks=all", "-p", "1"],
        input=b"\n".join(lines) + b"\n",
        check=True,
        timeout=300,
    )
    read = consume(c, "t", [0, 1, 2])
    got = [v for p in (0, 1, 2) for _, v in read[p]]
    assert sorted(got) == sorted(sent + lines)
    for p, msgs in read.items():
        offsets = [o for o, _ in msgs]
        assert offsets == list(range(len(offsets))), f"partition {p} has gaps or disorder"
        # Per partition, each producer's messages are in the order it sent them.
        mine = [v for _, v in msgs if v.startswith(b"ck-")]
        assert mine == sorted(mine)
    assert [v for _, v in read[1] if v.startswith(b"kc-")] == lines
    # kcat reads them back too.
    out = subprocess.run(
        [
            kcat,
            "-C",
            "-b",
            bootstrap(c),
            "-t",
            "t",
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %s\\n",
        ],
        capture_output=True,
        check=True,
        timeout=300,
    ).stdout.splitlines()
    assert [line.split(b" ", 1)[1] for line in out] == [v for _, v in read[1]]


@pytest.mark.slow
def test_leader_killed_mid_stream_loses_nothing_acknowledged(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(replica_lag_time_max_ms="5000")
    controller_id, _ = c.wait_controller()
    c.create_topic("t", RF3, {"min.insync.replicas": "2"})
    states = c.wait_topic_online("t")
    victim = next(
        b for b in (1, 2, 3) if b != controller_id and any(s.leader == b for s in states.values())
    )
    acked = Acked()
    done = threading.Event()

    def stream() -> None:
        produce(c, "t", values(40_000, "s", 200), acked)
        done.set()

    t = threading.Thread(target=stream)
    t.start()
    wait_for(lambda: len(acked.by_offset) > 5_000, 60, "the stream to be under way")
    c[victim].kill()
    t.join(300)
    assert done.is_set()
    assert acked.errors == [], acked.errors[:5]
    assert len(acked.by_offset) == 40_000
    check_acked_readable(c, "t", acked, [0, 1, 2])


@pytest.mark.slow
def test_paused_follower_leaves_and_rejoins_the_isr_and_min_isr_is_enforced(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(replica_lag_time_max_ms="2000", zookeeper_session_timeout_ms="20000")
    c.wait_controller()
    c.create_topic("t", {0: (1, 2, 3)}, {"min.insync.replicas": "2"})
    c.wait_topic_online("t")
    produce(c, "t", values(100, "a"), partition=0)
    c[3].pause()  # a follower; its session (20 s) outlives the lag time (2 s)
    try:
        c.wait_partitions("t", lambda s: s[0].isr == (1, 2), "broker 3 out of the ISR", timeout=60)
        # The leader took it out for lagging, not the controller for a lost session. (Its
        # line is written once ZooKeeper answered the write.)
        shrunk = wait_for(
            lambda: [r for r in c[1].state_changes("isr_change") if r["isr"] == [1, 2]],
            30,
            "broker 1's ISR shrink logged",
        )
        assert "replica 3 fell behind" in shrunk[0]["why"]
        acked = produce(c, "t", values(1000, "b"), partition=0)  # acks=all goes on with 2
        assert acked.errors == []
    finally:
        c[3].resume()
    c.wait_partitions(
        "t", lambda s: set(s[0].isr) == {1, 2, 3}, "broker 3 back in the ISR", timeout=60
    )
    # Two followers down: acks=all must fail with NOT_ENOUGH_REPLICAS, never acknowledge.
    c[2].pause()
    c[3].pause()
    try:
        c.wait_partitions("t", lambda s: s[0].isr == (1,), "only the leader in the ISR", timeout=60)
        refused = produce(c, "t", values(10, "c"), partition=0, message_timeout_ms=5000)
        assert refused.by_offset == {}
        assert set(refused.errors) <= {
            "NOT_ENOUGH_REPLICAS",
            "_MSG_TIMED_OUT",
            "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        }
        assert refused.errors
    finally:
        c[2].resume()
        c[3].resume()
    read = consume(c, "t", [0])
    assert not [v for _, v in read[0] if v.startswith(b"c-")], "a refused message became readable"


@pytest.mark.slow
def test_every_broker_restarted_logs_recover_nothing_acknowledged_missing(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    c.wait_controller()
    c.create_topic("t", RF3, {"min.insync.replicas": "2"})
    c.wait_topic_online("t")
    acked = produce(c, "t", values(20_000, "r"))
    before = c.partition_states("t")
    for b in c.brokers.values():
        b.kill()
    for b in c.brokers.values():
        b.start()
    c.wait_registered([1, 2, 3], timeout=120)
    c.wait_controller(timeout=120)
    c.wait_topic_online("t")
    check_acked_readable(c, "t", acked, [0, 1, 2])
    after = c.partition_states("t")
    for p in before:
        assert after[p].leader_epoch >= before[p].leader_epoch


def refused_or_none(c: Cluster, topic: str, tag: str) -> Acked | None:
    """One acks=all message to partition 0 (5 s to be acknowledged): its outcome if it
    was refused, None if it was acknowledged."""
    outcome = produce(c, topic, values(1, tag), partition=0, message_timeout_ms=5000)
    return outcome if outcome.errors else None


ISR_TOO_SMALL = {"NOT_ENOUGH_REPLICAS", "_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"}


def test_a_topic_config_changed_while_its_brokers_run_is_applied(
    cluster_factory: ClusterFactory,
) -> None:
    """`zkctl topic alter-config` (the overrides and a /config/changes notification, as
    kafka-configs.sh writes them) reaches the running leader: min.insync.replicas raised
    above the ISR refuses acks=all, and removed again accepts it. A topic deleted and made
    again under its name has its own config, not the old one's."""
    c = cluster_factory()
    c.wait_controller()
    c.create_topic("t", {0: (1, 2)}, {"min.insync.replicas": "1"})
    c.wait_topic_online("t")
    assert produce(c, "t", values(5, "a"), partition=0).errors == []
    topics.alter_topic_config(c.zk, "t", {"min.insync.replicas": "3"}, [])
    refused = wait_for(lambda: refused_or_none(c, "t", "b"), 60, "acks=all refused")
    assert set(refused.errors) <= ISR_TOO_SMALL
    assert refused.by_offset == {}
    topics.alter_topic_config(c.zk, "t", {}, ["min.insync.replicas"])
    wait_for(lambda: refused_or_none(c, "t", "c") is None, 60, "acks=all acknowledged again")
    # The leader applied each change (its log says so), and so did the follower, on a
    # thread of its own that nothing above waited for.
    for b in (1, 2):
        wait_for(
            lambda b=b: "config of topic t changed" in c[b].output(),  # type: ignore[misc]  # binds the loop's variable
            30,
            f"broker {b}'s config change logged",
        )

    topics.alter_topic_config(c.zk, "t", {"min.insync.replicas": "3"}, [])
    wait_for(lambda: refused_or_none(c, "t", "d"), 60, "acks=all refused again")
    topics.delete_topic(c.zk, "t")
    wait_for(lambda: c.assignment("t") is None, 60, "topic t deleted")
    c.create_topic("t", {0: (1, 2)}, {"min.insync.replicas": "1"})
    c.wait_topic_online("t")
    assert produce(c, "t", values(5, "e"), partition=0, message_timeout_ms=30_000).errors == []


def test_the_topics_compression_type_is_what_its_replicas_store(
    cluster_factory: ClusterFactory,
) -> None:
    """compression.type=gzip: lz4 and uncompressed producers' batches are stored gzip by the
    leader, so by its followers; consumers read every one. Changed to zstd while the
    brokers run, a snappy producer's batches are stored zstd from then on."""
    c = cluster_factory()
    c.wait_controller()
    c.create_topic("t", {0: (1, 2, 3)}, {"compression.type": "gzip"})
    c.wait_topic_online("t")
    acked = produce(c, "t", values(300, "a"), partition=0, compression_type="lz4")
    produce(c, "t", values(300, "b"), partition=0, acked=acked)
    assert acked.errors == []

    def codecs_of(broker: int, records: int) -> set[int] | None:
        headers = headers_on_disk(c, broker, "t", 0)
        got = sum(h.record_count for h in headers)
        return {h.compression for h in headers} if got == records else None

    for b in (1, 2, 3):
        assert wait_for(lambda b=b: codecs_of(b, 600), 60, f"broker {b}'s copy") == {  # type: ignore[misc]  # binds the loop's variable
            Compression.GZIP
        }
    topics.alter_topic_config(c.zk, "t", {"compression.type": "zstd"}, [])
    wait_for(
        lambda: all("config of topic t changed" in c[b].output() for b in (1, 2, 3)),
        60,
        "the change applied",
    )
    produce(c, "t", values(300, "c"), partition=0, acked=acked, compression_type="snappy")
    assert acked.errors == []
    for b in (1, 2, 3):
        wait_for(lambda b=b: codecs_of(b, 900), 60, f"broker {b}'s copy")  # type: ignore[misc]  # binds the loop's variable
        headers = headers_on_disk(c, b, "t", 0)
        assert {h.compression for h in headers if h.base_offset >= 600} == {Compression.ZSTD}
    check_acked_readable(c, "t", acked, [0])


def test_a_log_made_while_zookeeper_is_out_of_reach_waits_for_its_topics_config(
    cluster_factory: ClusterFactory,
) -> None:
    """A replica's log is made when its broker is told of it (LeaderAndIsr), with its
    topic's config read from ZooKeeper. A broker that cannot reach ZooKeeper then waits for
    it (Kafka's read retries until connected) rather than make the log with the broker's
    defaults (which would have stored this topic's batches as sent, not gzip; or kept a
    compacted topic's records by retention, not by key)."""
    c = cluster_factory(start=False, zookeeper_session_timeout_ms="20000")
    with linked(c) as link:
        c.start()
        controller_id, _ = c.wait_controller()
        newcomer = next(b for b in (1, 2, 3) if b != controller_id)
        rest = tuple(b for b in (1, 2, 3) if b != newcomer)
        c.create_topic("t", {0: rest}, {"compression.type": "gzip"})
        c.wait_topic_online("t")
        link[newcomer].cut()
        try:
            reassign.start_reassignment(c.zk, {TopicPartition("t", 0): (newcomer, *rest)})
            wait_for(
                lambda: any(
                    said in c[newcomer].output()
                    for said in ("retrying once connected", "using the broker's defaults")
                ),
                30,
                f"broker {newcomer} to read the topic's config",
            )
        finally:
            link[newcomer].heal()
        c.wait_partitions(
            "t",
            lambda s: cast(bool, s[0].isr and set(s[0].isr) == {newcomer, *rest}),
            "the reassignment done",
            timeout=60,
        )
        wait_for(
            lambda: c.zk.exists(paths.REASSIGN_PARTITIONS) is None or None,
            60,
            "the reassignment finished",
        )
        elect.start_preferred_election(c.zk, elect.parse_scope(topic="t"))
        c.wait_partitions("t", lambda s: s[0].leader == newcomer, f"broker {newcomer} leading")
        acked = produce(c, "t", values(50, "g"), partition=0)
        assert acked.errors == []
        headers = headers_on_disk(c, newcomer, "t", 0)
        assert {h.compression for h in headers} == {Compression.GZIP}


def test_a_batch_over_max_message_bytes_is_refused(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    c.wait_controller()
    c.create_topic("t", {0: (1, 2, 3)}, {"max.message.bytes": "10000"})
    c.wait_topic_online("t")
    p = producer(c, message_timeout_ms=10_000)
    outcome: list[str] = []
    p.produce(
        "t",
        b"x" * 20_000,
        partition=0,
        on_delivery=lambda err, _m: outcome.append(err.name() if err else "acknowledged"),
    )
    p.flush(30)
    assert outcome == ["MSG_SIZE_TOO_LARGE"]
    assert consume(c, "t", [0]) == {0: []}


def test_a_librdkafka_consumer_reads_partitions_whose_batches_pass_fetch_max_bytes(
    cluster_factory: ClusterFactory,
) -> None:
    # librdkafka only asks receive.message.max.bytes >= fetch.max.bytes + 512: KIP-74's
    # bound (a response goes over fetch.max.bytes by one batch at most, its first
    # partition's). A second partition's batch answered over it made an answer it refused
    # ("Invalid response size ... increase receive.message.max.bytes"), every retry.
    c = cluster_factory((1,))
    c.wait_controller()
    c.create_topic("t", {0: (1,), 1: (1,)}, {"max.message.bytes": "200000"})
    c.wait_topic_online("t")
    p = producer(c)
    p.produce("t", b"a" * 18_000, partition=0)
    p.produce("t", b"b" * 50_000, partition=1)
    assert p.flush(30) == 0
    complaints: list[str] = []

    class Complaints(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            complaints.append(record.getMessage())

    log = logging.getLogger("test-fetch-max-bytes")
    log.addHandler(Complaints())
    log.propagate = False
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(c),
            "group.id": "g",
            "enable.auto.commit": False,
            "fetch.max.bytes": 20_000,
            "message.max.bytes": 1000,
            "receive.message.max.bytes": 60_000,
            "logger": log,
        }
    )
    consumer.assign([KafkaPartition("t", 0, 0), KafkaPartition("t", 1, 0)])
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 2 and time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and not m.error():
                got.append((cast(int, m.partition()), cast(int, m.offset())))
    finally:
        consumer.close()
    assert not [m for m in complaints if "receive.message.max.bytes" in m]
    assert sorted(got) == [(0, 0), (1, 0)]


def truncations(b: object) -> list[dict[str, object]]:
    return [r for r in b.state_changes("truncated")]  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_follower_with_a_divergent_tail_truncates_to_the_new_leader(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(zookeeper_session_timeout_ms="6000")
    controller_id, _ = c.wait_controller()
    leader = next(b for b in (1, 2, 3) if b != controller_id)
    followers = [b for b in (1, 2, 3) if b != leader]
    c.create_topic("t", {0: (leader, *followers)})
    c.wait_topic_online("t")
    kept = produce(c, "t", values(100, "kept"), partition=0)
    # The followers freeze (shorter than their sessions): the leader alone takes 50 more.
    for f in followers:
        c[f].pause()
    # A follower fetch parked at the leader (replica.fetch.wait.max.ms is 200 ms here) must be
    # answered, empty, before the stray records exist: else they sit in a paused follower's
    # socket buffer and it replicates them on resuming, and nothing diverges.
    time.sleep(1.0)
    try:
        p = producer(c, acks=1)
        for v in values(50, "stray"):
            p.produce("t", v, partition=0)
        assert p.flush(30) == 0
    finally:
        c[leader].kill()  # it dies holding records nobody else has
        for f in followers:
            c[f].resume()
    c.wait_partitions("t", lambda s: s[0].leader in followers, "a follower to lead", timeout=60)
    later = produce(c, "t", values(30, "later"), partition=0, acks="all")
    c[leader].start()
    c.wait_partitions(
        "t", lambda s: leader in s[0].isr, "the old leader back in the ISR", timeout=90
    )
    # It cut exactly its 50 stray records, nothing more.
    cut = truncations(c[leader])
    assert [r["offsets_lost"] for r in cut] == [50], cut
    assert cut[0]["to_offset"] == 100
    # Led by it again, the partition holds what the cluster acknowledged, and no stray record.
    c.zk.create(
        "/admin/preferred_replica_election",
        b'{"version":1,"partitions":[{"topic":"t","partition":0}]}',
    )
    c.wait_partitions(
        "t", lambda s: s[0].leader == leader, "the old leader to lead again", timeout=60
    )
    read = consume(c, "t", [0])
    assert [v for _, v in read[0]] == list(kept.by_offset.values()) + list(later.by_offset.values())


@pytest.mark.slow
def test_unclean_election_counts_the_data_it_loses(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    a, b = (x for x in (1, 2, 3) if x != controller_id)
    c.create_topic("t", {0: (a, b)}, {"unclean.leader.election.enable": "true"})
    c.wait_topic_online("t")
    produce(c, "t", values(100, "both"), partition=0)
    c[b].kill()
    c.wait_partitions("t", lambda s: s[0].isr == (a,), "ISR [a]", timeout=c.session_timeout_s + 30)
    produce(c, "t", values(50, "only-a"), partition=0)  # acknowledged by the ISR, [a] alone
    c[a].kill()
    c.wait_partitions("t", lambda s: s[0].leader == -1, "offline", timeout=c.session_timeout_s + 30)
    c[b].start()  # out of the ISR, but unclean election is on: it leads, without the 50
    c.wait_partitions("t", lambda s: s[0].leader == b, "b elected uncleanly", timeout=60)

    def unclean() -> list[dict[str, object]]:
        return [
            r
            for x in c.brokers.values()
            for r in x.state_changes("partition_state")
            if r["reason"] == "unclean"
        ]

    # The controller logs a state after ZooKeeper accepted it: the test may see it first.
    rows = wait_for(unclean, 30, "the unclean election in the state-change log")
    assert [(r["topic"], r["partition"], r["leader"]) for r in rows] == [("t", 0, b)]
    c[a].start()  # back as a follower: it truncates the 50 the unclean leader never had
    c.wait_partitions("t", lambda s: a in s[0].isr, "a back in the ISR", timeout=90)
    assert [r["offsets_lost"] for r in truncations(c[a])] == [50]
    assert len(consume(c, "t", [0])[0]) == 100


def test_a_lone_replica_killed_and_restarted_serves_what_it_acknowledged(
    cluster_factory: ClusterFactory,
) -> None:
    # No high watermark checkpoint survives a SIGKILL; with no follower to move it, the
    # restarted leader moves it to its log end on becoming leader (Kafka's makeLeader).
    c = cluster_factory((1,))
    c.wait_controller()
    c.create_topic("t", {0: (1,)})
    c.wait_topic_online("t")
    acked = produce(c, "t", values(50, "k"))
    c[1].kill()
    c[1].start()
    c.wait_registered([1], timeout=120)
    c.wait_topic_online("t")
    check_acked_readable(c, "t", acked, [0])


def test_logs_that_cannot_be_closed_cleanly_do_not_keep_the_broker_registered(
    cluster_factory: ClusterFactory,
) -> None:
    # The partition's directory made immutable: the clean shutdown cannot write its leader
    # epoch checkpoint. That log directory fails then (KIP-112; as Kafka's per-directory
    # shutdown, no marker is written there) and the broker still ends its ZooKeeper
    # session, rather than leaving its registration for the session timeout; it exits 0
    # (the directory failed, not the shutdown, as Kafka's does), and its next start
    # recovers the log with nothing acknowledged missing.
    c = cluster_factory((1,), zookeeper_session_timeout_ms="60000")
    c.wait_controller()
    c.create_topic("t", {0: (1,)})
    c.wait_topic_online("t")
    acked = produce(c, "t", values(50, "s"))
    partition_dir = c[1].data_dir / "t-0"
    subprocess.run(["chattr", "+i", str(partition_dir)], check=True, timeout=30)
    try:
        c[1].terminate()
        assert c[1].wait_exit(120) == 0
        # Gone with the session, not after it timed out (60 s).
        wait_for(lambda: 1 not in c.registered(), 30, "broker 1's registration to go")
        assert "at shutdown failed: [Errno 1] Operation not permitted" in c[1].output()
        assert f"log directory {c[1].data_dir} is going offline" in c[1].output()
        assert not (c[1].data_dir / ".kafka_cleanshutdown").exists()
    finally:
        subprocess.run(["chattr", "-i", str(partition_dir)], check=True, timeout=30)
    c[1].start()
    c.wait_registered([1], timeout=120)
    c.wait_topic_online("t")
    check_acked_readable(c, "t", acked, [0])


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_a_client_of_message_format_v0_produces_and_consumes_in_a_group(
    cluster_factory: ClusterFactory, codec: str
) -> None:
    # librdkafka told the broker is Kafka 0.9.0 (no ApiVersions) produces messages of
    # magic 0 (Produce v1), looks offsets up with ListOffsets v0 and fetches with Fetch
    # v1, as Kafka 2.8 serves them by conversion; each request closed the connection.
    c = cluster_factory((1,), offsets_topic_replication_factor="1")
    c.wait_controller()
    # A longer name than "t": librdkafka 2.x parsing a Metadata v0 of a 1-character
    # topic runs out of its own buffer ("tmpabuf memory shortage"), a client bug.
    c.create_topic("legacy", {0: (1,)})
    c.wait_topic_online("legacy")
    old = {"api.version.request": False, "broker.version.fallback": "0.9.0"}
    p = producer(c, acks=1, message_timeout_ms=30_000, compression_codec=codec, **old)
    delivered: list[str] = []
    for i in range(3):
        p.produce(
            "legacy",
            b"v%d" % i,
            key=b"k",
            on_delivery=lambda err, _m: delivered.append(err.name() if err else "ok"),
        )
    assert p.flush(40) == 0
    assert delivered == ["ok"] * 3
    consumer = Consumer(
        {"bootstrap.servers": bootstrap(c), "group.id": "g", "auto.offset.reset": "earliest"} | old
    )
    consumer.subscribe(["legacy"])
    got: list[tuple[int, bytes | None]] = []
    deadline = time.monotonic() + 40
    try:
        while len(got) < 3 and time.monotonic() < deadline:
            m = consumer.poll(0.3)
            if m is not None and not m.error():
                got.append((cast(int, m.offset()), m.value()))
    finally:
        consumer.close()
    assert got == [(0, b"v0"), (1, b"v1"), (2, b"v2")]
    # Today's clients read them as record batches, without timestamps (magic 0 has none).
    assert consume(c, "legacy", [0]) == {0: [(0, b"v0"), (1, b"v1"), (2, b"v2")]}
