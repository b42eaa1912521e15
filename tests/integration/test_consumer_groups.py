"""Consumer groups with real clients and real brokers: confluent-kafka consumers that
subscribe() share a topic's partitions through the group coordinator, commit offsets to
the replicated __consumer_offsets topic, and find those offsets again after the
coordinating broker is SIGKILLed."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from admin import topics as topics_admin
from groups.offset_records import partition_for
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap, group_consumer, poll_until, produce
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths

pytestmark = pytest.mark.integration

OFFSETS_PARTITIONS = 5
GROUP_SETTINGS = {
    "group_initial_rebalance_delay_ms": "0",
    "offsets_topic_num_partitions": str(OFFSETS_PARTITIONS),
}


def find_coordinator(c: Cluster, group: str, via: int) -> tuple[int, int]:
    """(error code, node id) a FindCoordinator for ``group`` gets from broker ``via``."""
    with KafkaConnection("127.0.0.1", c[via].port()) as conn:
        answer = conn.request(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
    return int(answer["error_code"]), int(answer["node_id"])


def coordinates(c: Cluster, group: str, broker: int) -> bool:
    """Whether ``broker`` answers as ``group``'s coordinator, the group's offsets
    partition loaded. A FindCoordinator names the leader in the asked broker's metadata,
    whose UpdateMetadata may come before the leader's own LeaderAndIsr (each broker's
    requests go on a channel of their own) or before the leader has loaded the
    partition: the broker named answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS
    meanwhile, which a client retries."""
    if broker not in c.brokers or not c[broker].alive():  # named by a stale metadata
        return False
    try:
        with KafkaConnection("127.0.0.1", c[broker].port()) as conn:
            answer = conn.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]})
    except OSError:  # killed since
        return False
    return bool(answer["groups"][0]["error_code"] == ErrorCode.NONE)


def coordinator_of(c: Cluster, group: str, via: int) -> int:
    """The coordinator broker ``via`` names for ``group``, once it answers as such."""

    def found() -> int | None:
        error, node = find_coordinator(c, group, via)
        return node if error == ErrorCode.NONE and coordinates(c, group, node) else None

    return wait_for(found, 60, f"the coordinator of group {group}")


def wait_known(c: Cluster, broker: int, topic: str, partitions: int) -> None:
    """Until ``broker``'s metadata has the topic's partitions: an OffsetCommit of a
    partition it does not know is refused UNKNOWN_TOPIC_OR_PARTITION, as Kafka's is."""

    def known() -> bool:
        with KafkaConnection("127.0.0.1", c[broker].port()) as conn:
            answer = conn.request(ApiKey.METADATA, 9, {"topics": None})
        return any(
            t["name"] == topic and t["error_code"] == 0 and len(t["partitions"]) == partitions
            for t in answer["topics"]
        )

    wait_for(known, 60, f"broker {broker}'s metadata of topic {topic}")


def committed(c: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = group_consumer(c, group)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        deadline = time.monotonic() + 60
        while True:
            try:
                return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def test_subscribed_consumers_share_partitions_and_their_commits_survive_the_coordinator(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    topic = "orders"
    c.create_topic(topic, {p: (1, 2, 3) for p in range(4)})
    c.wait_topic_online(topic)
    values = [b"order-%d" % i for i in range(80)]
    acked = produce(c, topic, values)
    assert acked.errors == []

    counts = {p: sum(1 for (q, _o) in acked.by_offset if q == p) for p in range(4)}
    first = group_consumer(c, "billing")
    second = group_consumer(c, "billing")
    try:
        first.subscribe([topic])
        second.subscribe([topic])
        seen: dict[tuple[int, int], bytes] = {}

        def shared() -> bool:
            a, b = first.assignment(), second.assignment()
            return len(a) == 2 and len(b) == 2 and len(seen) == len(values)

        poll_until([first, second], seen, shared, 120, "two members, two partitions each")
        owned = {tp.partition for tp in first.assignment()} | {
            tp.partition for tp in second.assignment()
        }
        assert owned == {0, 1, 2, 3}
        assert sorted(seen.values()) == sorted(values)
        # Each member commits its partitions' ends, explicitly: what librdkafka stored
        # for a partition is dropped when a rebalance takes it away, and a member that
        # read everything alone before the other joined has it again without rereading.
        for member in (first, second):
            mine = [tp.partition for tp in member.assignment() if counts[tp.partition]]
            if mine:
                member.commit(
                    offsets=[TopicPartition(topic, p, counts[p]) for p in mine],
                    asynchronous=False,
                )
    finally:
        first.close()
        second.close()

    # Each partition's end; -1001 (librdkafka's "no offset") where the producer put
    # nothing: a member commits the partitions it consumed from.
    ends = {p: n or -1001 for p, n in counts.items()}
    assert committed(c, "billing", topic, 4) == ends

    # The coordinator dies: the group's offsets partition is led elsewhere, the new
    # leader reads the commits back, and a new member starts where the group left off.
    coordinator = coordinator_of(c, "billing", via=1)
    c[coordinator].kill()
    survivor = next(b for b in (1, 2, 3) if b != coordinator)
    index = partition_for("billing", OFFSETS_PARTITIONS)
    c.wait_partitions(
        "__consumer_offsets",
        lambda states: states[index].leader not in (-1, coordinator),
        "the group's offsets partition led by a live broker",
    )
    # (The survivor learns the new leader from the controller's UpdateMetadata, which
    # follows the partition state written in ZooKeeper.)
    wait_for(
        lambda: coordinator_of(c, "billing", via=survivor) != coordinator or None,
        60,
        "the survivor naming the new coordinator",
    )
    assert committed(c, "billing", topic, 4) == ends

    more = [b"late-%d" % i for i in range(8)]
    assert produce(c, topic, more).errors == []
    late = group_consumer(c, "billing")
    try:
        late.subscribe([topic])
        after: dict[tuple[int, int], bytes] = {}
        poll_until([late], after, lambda: len(after) >= len(more), 120, "the late member")
        assert sorted(after.values()) == sorted(more)  # nothing consumed again
    finally:
        late.close()


def test_group_requests_get_kafkas_errors(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    coordinator = coordinator_of(c, "checks", via=1)
    c.create_topic("t", {0: (1, 2, 3)})
    c.wait_topic_online("t")
    wait_known(c, coordinator, "t", 1)
    other = next(b for b in (1, 2, 3) if b != coordinator)
    join: dict[str, Any] = {
        "group_id": "checks",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m"}],
    }
    with KafkaConnection("127.0.0.1", c[other].port()) as conn:
        assert conn.request(ApiKey.JOIN_GROUP, 4, join)["error_code"] == ErrorCode.NOT_COORDINATOR
    with KafkaConnection("127.0.0.1", c[coordinator].port()) as conn:
        bad = conn.request(ApiKey.JOIN_GROUP, 4, {**join, "session_timeout_ms": 10})
        assert bad["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
        first = conn.request(ApiKey.JOIN_GROUP, 4, join)
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
        member = first["member_id"]
        assert member
        joined = conn.request(ApiKey.JOIN_GROUP, 4, {**join, "member_id": member})
        assert joined["error_code"] == ErrorCode.NONE
        assert joined["leader"] == member
        assert joined["generation_id"] == 1
        assert [m["member_id"] for m in joined["members"]] == [member]
        sync = {
            "group_id": "checks",
            "generation_id": 1,
            "member_id": member,
            "assignments": [{"member_id": member, "assignment": b"a"}],
        }
        synced = conn.request(ApiKey.SYNC_GROUP, 2, sync)
        assert (synced["error_code"], synced["assignment"]) == (ErrorCode.NONE, b"a")
        beat = {"group_id": "checks", "generation_id": 1, "member_id": member}
        assert conn.request(ApiKey.HEARTBEAT, 2, beat)["error_code"] == ErrorCode.NONE
        stale = conn.request(ApiKey.HEARTBEAT, 2, {**beat, "generation_id": 0})
        assert stale["error_code"] == ErrorCode.ILLEGAL_GENERATION
        stranger = conn.request(ApiKey.HEARTBEAT, 2, {**beat, "member_id": "nobody"})
        assert stranger["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        commit = {
            "group_id": "checks",
            "generation_id_or_member_epoch": 1,
            "member_id": "nobody",
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7}]}
            ],
        }
        refused = conn.request(ApiKey.OFFSET_COMMIT, 6, commit)
        assert refused["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
        accepted = conn.request(ApiKey.OFFSET_COMMIT, 6, {**commit, "member_id": member})
        assert accepted["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
        fetched = conn.request(
            ApiKey.OFFSET_FETCH,
            7,
            {"group_id": "checks", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        )
        assert fetched["error_code"] == ErrorCode.NONE
        assert [
            (p["partition_index"], p["committed_offset"])
            for p in fetched["topics"][0]["partitions"]
        ] == [(0, 7), (1, -1)]
        # A group this coordinator would have but does not is Dead; one of another
        # coordinator's partitions is NOT_COORDINATOR.
        index = partition_for("checks", OFFSETS_PARTITIONS)
        names = (f"none-{i}" for i in range(1000))
        unknown = next(n for n in names if partition_for(n, OFFSETS_PARTITIONS) == index)
        leaders = {p: s.leader for p, s in c.partition_states("__consumer_offsets").items()}
        elsewhere = next(
            n for n in names if leaders[partition_for(n, OFFSETS_PARTITIONS)] != coordinator
        )
        described = conn.request(
            ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["checks", unknown, elsewhere]}
        )
        states = {g["group_id"]: (g["error_code"], g["group_state"]) for g in described["groups"]}
        assert states == {
            "checks": (ErrorCode.NONE, "Stable"),
            unknown: (ErrorCode.NONE, "Dead"),
            elsewhere: (ErrorCode.NOT_COORDINATOR, ""),
        }
        listed = conn.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert ("checks", "Stable") in {(g["group_id"], g["group_state"]) for g in listed["groups"]}
        leave = conn.request(ApiKey.LEAVE_GROUP, 2, {"group_id": "checks", "member_id": member})
        assert leave["error_code"] == ErrorCode.NONE
        assert conn.request(ApiKey.HEARTBEAT, 2, beat)["error_code"] == (
            ErrorCode.UNKNOWN_MEMBER_ID
        )


def test_join_group_v7_and_sync_group_v5_name_the_groups_protocol(
    cluster_factory: ClusterFactory,
) -> None:
    """The flexible versions Kafka 2.8 serves, KIP-559's: JoinGroup v7 and SyncGroup v5
    answers name the group's protocol type and name, and a SyncGroup v5 naming another
    is INCONSISTENT_GROUP_PROTOCOL (doSyncGroup). They were not served: the broker closed
    the connection."""
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    coordinator = coordinator_of(c, "kip-559", via=1)
    join: dict[str, Any] = {
        "group_id": "kip-559",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m"}],
    }

    def member_id_given() -> str | None:
        # FindCoordinator names the partition's leader as soon as some broker's metadata
        # does; until the leader has loaded the partition it answers NOT_COORDINATOR or
        # COORDINATOR_LOAD_IN_PROGRESS, and a client asks again.
        with KafkaConnection("127.0.0.1", c[coordinator].port()) as conn:
            first = conn.request(ApiKey.JOIN_GROUP, 7, join)
        if first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED:
            return str(first["member_id"])
        return None

    member = wait_for(member_id_given, 60, "a member id from the coordinator of kip-559")
    with KafkaConnection("127.0.0.1", c[coordinator].port()) as conn:
        joined = conn.request(ApiKey.JOIN_GROUP, 7, {**join, "member_id": member})
        assert (joined["error_code"], joined["leader"]) == (ErrorCode.NONE, member)
        assert (joined["protocol_type"], joined["protocol_name"]) == ("consumer", "range")
        sync = {
            "group_id": "kip-559",
            "generation_id": joined["generation_id"],
            "member_id": member,
            "protocol_type": "consumer",
            "assignments": [{"member_id": member, "assignment": b"a"}],
        }
        other = conn.request(ApiKey.SYNC_GROUP, 5, {**sync, "protocol_name": "roundrobin"})
        assert other["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        synced = conn.request(ApiKey.SYNC_GROUP, 5, {**sync, "protocol_name": "range"})
        assert (synced["error_code"], synced["assignment"]) == (ErrorCode.NONE, b"a")
        assert (synced["protocol_type"], synced["protocol_name"]) == ("consumer", "range")


def test_a_consuming_group_follows_its_coordinator_through_a_sigkill(
    cluster_factory: ClusterFactory,
) -> None:
    """The coordinator dies under a member that is consuming and committing: the member
    finds the new coordinator, which read the group's generation back, and goes on
    there without a rebalance."""
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    topic = "events"
    c.create_topic(topic, {p: (1, 2, 3) for p in range(2)})
    c.wait_topic_online(topic)
    first = [b"before-%d" % i for i in range(20)]
    assert produce(c, topic, first).errors == []
    member = group_consumer(c, "audit")
    assignments: list[list[int]] = []
    try:
        member.subscribe(
            [topic],
            on_assign=lambda _c, tps: assignments.append(sorted(tp.partition for tp in tps)),
        )
        seen: dict[tuple[int, int], bytes] = {}
        poll_until([member], seen, lambda: len(seen) == len(first), 120, "before the kill")
        assert assignments == [[0, 1]]
        member.commit(asynchronous=False)
        coordinator = coordinator_of(c, "audit", via=1)
        c[coordinator].kill()
        second = [b"after-%d" % i for i in range(20)]
        assert produce(c, topic, second).errors == []
        # (A produce retried across the kill may be written twice: compare the values.)
        poll_until(
            [member],
            seen,
            lambda: set(seen.values()) >= set(second),
            120,
            "after the kill",
        )
        assert set(seen.values()) == set(first + second)

        def commit() -> bool:
            try:
                member.commit(asynchronous=False)
            except Exception:
                member.poll(0.2)  # the rejoin goes on meanwhile
                return False
            return True

        wait_for(commit, 120, "a commit to the new coordinator")
        assert assignments == [[0, 1]]  # no rebalance: the member kept its generation
        survivor = next(b for b in (1, 2, 3) if b != coordinator)
        assert coordinator_of(c, "audit", via=survivor) != coordinator
    finally:
        member.close()
    ends: dict[int, int] = {}
    for p, o in seen:
        ends[p] = max(ends.get(p, 0), o + 1)
    assert committed(c, "audit", topic, 2) == {p: ends.get(p, -1001) for p in range(2)}


def test_kcat_consumes_as_a_group_member_and_commits(cluster_factory: ClusterFactory) -> None:
    """`kcat -G`: librdkafka's balanced consumer as a command-line member of a group."""
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    topic = "lines"
    c.create_topic(topic, {p: (1, 2, 3) for p in range(3)})
    c.wait_topic_online(topic)
    values = [b"line-%d" % i for i in range(30)]
    acked = produce(c, topic, values)
    assert acked.errors == []
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by the set-up script"
    run = subprocess.run(
        [
            kcat,
            "-b",
            bootstrap(c),
            "-G",
            "kcat-readers",
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "session.timeout.ms=10000",
            "-e",
            "-q",
            "-f",
            "%s\\n",
            topic,
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert sorted(run.stdout.split()) == sorted(values)
    # What kcat committed: each partition's end (the producer may have left one empty:
    # nothing consumed there, nothing committed, -1001 for librdkafka's "no offset").
    ends = {p: sum(1 for (q, _o) in acked.by_offset if q == p) for p in range(3)}
    assert committed(c, "kcat-readers", topic, 3) == {p: n or -1001 for p, n in ends.items()}

    # confluent-kafka's admin sees the group (ListGroups from every broker; FindCoordinator
    # then DescribeGroups and OffsetFetch from its coordinator).
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    listed = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
    assert "kcat-readers" in {g.group_id for g in listed.valid}
    assert listed.errors == []
    described = admin.describe_consumer_groups(["kcat-readers"], request_timeout=30)
    group = described["kcat-readers"].result(timeout=60)
    assert group.members == []  # kcat left the group
    assert str(group.state) == "ConsumerGroupState.EMPTY"
    asked = [ConsumerGroupTopicPartitions("kcat-readers")]
    found = admin.list_consumer_group_offsets(asked, request_timeout=30)
    offsets = found["kcat-readers"].result(timeout=60)
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {
        p: n for p, n in ends.items() if n
    }


def test_committed_offsets_expire_and_stay_expired_after_the_coordinator_dies(
    cluster_factory: ClusterFactory,
) -> None:
    """An OffsetCommit v2 with a retention time expires then (the broker's check every
    half second), and a group committing alone is deleted with its last offset; the
    partition's next leader serves them as expired too (from the tombstones it fetched,
    or, had it not fetched them yet, by expiring them again)."""
    c = cluster_factory(**GROUP_SETTINGS, offsets_retention_check_interval_ms="500")
    c.wait_controller()
    coordinator = coordinator_of(c, "short-lived", via=1)
    c.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    c.wait_topic_online("t")
    wait_known(c, coordinator, "t", 2)

    def fetch(conn: KafkaConnection) -> list[tuple[int, int]]:
        answer = conn.request(
            ApiKey.OFFSET_FETCH,
            7,
            {"group_id": "short-lived", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        )
        assert answer["error_code"] == ErrorCode.NONE
        return [
            (p["partition_index"], p["committed_offset"]) for p in answer["topics"][0]["partitions"]
        ]

    with KafkaConnection("127.0.0.1", c[coordinator].port()) as conn:
        commit = {
            "group_id": "short-lived",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time_ms": 4000,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 42},
                        {"partition_index": 1, "committed_offset": 43},
                    ],
                }
            ],
        }
        answer = conn.request(ApiKey.OFFSET_COMMIT, 2, commit)
        assert [p["error_code"] for p in answer["topics"][0]["partitions"]] == [0, 0]
        assert fetch(conn) == [(0, 42), (1, 43)]  # well within its 4 s
        wait_for(lambda: fetch(conn) == [(0, -1), (1, -1)] or None, 30, "the offsets expired")
        listed = conn.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
        assert "short-lived" not in {g["group_id"] for g in listed["groups"]}
    c[coordinator].kill()
    index = partition_for("short-lived", OFFSETS_PARTITIONS)
    states = c.wait_partitions(
        "__consumer_offsets",
        lambda s: s[index].leader not in (-1, coordinator),
        "the group's offsets partition led by a live broker",
    )

    def fetch_or_none(conn: KafkaConnection) -> list[tuple[int, int]] | None:
        try:
            return fetch(conn)
        except AssertionError:  # loading (COORDINATOR_LOAD_IN_PROGRESS)
            return None

    with KafkaConnection("127.0.0.1", c[states[index].leader].port()) as conn:
        expired = [(0, -1), (1, -1)]
        wait_for(lambda: fetch_or_none(conn) == expired or None, 60, "the new coordinator")


def test_a_deleted_topics_committed_offsets_go_with_it(cluster_factory: ClusterFactory) -> None:
    """A group's offsets of a topic go when the topic is deleted (Kafka's
    handleDeletedPartitions, on the UpdateMetadata that marks it deleted): a topic created
    again under the same name is read from its start, not from the old offsets (which
    would be past its end, and a consumer reset to the end would skip its records)."""
    c = cluster_factory(**GROUP_SETTINGS)
    c.wait_controller()
    coordinator = coordinator_of(c, "readers", via=1)
    c.create_topic("kept", {0: (1, 2)})
    c.create_topic("gone", {0: (2, 3), 1: (3, 1)})
    for topic, partitions in (("kept", 1), ("gone", 2)):
        c.wait_topic_online(topic)
        wait_known(c, coordinator, topic, partitions)

    def commit(topic: str, offsets: dict[int, int]) -> None:
        with KafkaConnection("127.0.0.1", c[coordinator].port()) as conn:
            body = {
                "group_id": "readers",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "committed_offset": o}
                            for p, o in offsets.items()
                        ],
                    }
                ],
            }
            answer = conn.request(ApiKey.OFFSET_COMMIT, 7, body)
        assert [p["error_code"] for p in answer["topics"][0]["partitions"]] == [0] * len(offsets)

    commit("kept", {0: 40})
    commit("gone", {0: 41, 1: 42})
    assert committed(c, "readers", "gone", 2) == {0: 41, 1: 42}
    topics_admin.delete_topic(c.zk, "gone")
    wait_for(lambda: c.zk.exists(paths.topic("gone")) is None or None, 60, "the deletion")
    c.create_topic("gone", {0: (2, 3), 1: (3, 1)})
    c.wait_topic_online("gone")
    assert committed(c, "readers", "gone", 2) == {0: -1001, 1: -1001}
    assert committed(c, "readers", "kept", 1) == {0: 40}


def test_a_broker_restarted_with_another_partition_count_finds_groups_where_they_are(
    cluster_factory: ClusterFactory,
) -> None:
    """An existing __consumer_offsets decides a group's partition, whatever
    offsets.topic.num.partitions the broker is (re)started with (Kafka 2.8's
    KafkaServer.startup: getTopicPartitionCount(...).getOrElse(offsetsTopicPartitions)).
    Restarted with the default 50, the broker hashed "g0" to partition 41 of a topic of 5
    and answered COORDINATOR_NOT_AVAILABLE for good: its committed offsets out of reach."""
    group = "g0"  # partition 1 of 5, 41 of 50
    c = cluster_factory(
        (1,), **GROUP_SETTINGS, offsets_topic_replication_factor="1", default_replication_factor="1"
    )
    c.create_topic("t", {0: (1,)})
    c.wait_topic_online("t")
    assert coordinator_of(c, group, via=1) == 1
    wait_known(c, 1, "t", 1)

    commit = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": -1,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7}]}],
    }
    with KafkaConnection("127.0.0.1", c[1].port()) as conn:
        answer = conn.request(ApiKey.OFFSET_COMMIT, 2, commit)
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE

    c[1].stop()
    c[1].overrides["offsets.topic.num.partitions"] = "50"
    c[1].start()
    c.wait_registered([1])
    assert len(c.partition_states("__consumer_offsets")) == OFFSETS_PARTITIONS
    assert partition_for(group, OFFSETS_PARTITIONS) == 1
    assert coordinator_of(c, group, via=1) == 1

    def fetched() -> int | None:
        with KafkaConnection("127.0.0.1", c[1].port()) as conn:
            answer = conn.request(
                ApiKey.OFFSET_FETCH,
                1,
                {"group_id": group, "topics": [{"name": "t", "partition_indexes": [0]}]},
            )
        p = answer["topics"][0]["partitions"][0]
        return int(p["committed_offset"]) if p["error_code"] == ErrorCode.NONE else None

    assert wait_for(fetched, 30, "the group's committed offset") == 7


def test_offset_commit_v0_keeps_offsets_in_zookeeper_for_offset_fetch_v0(
    cluster_factory: ClusterFactory,
) -> None:
    """Kafka 2.8 keeps an OffsetCommit v0's offsets where Kafka 0.8 did, in ZooKeeper:
    /consumers/<group>/offsets/<topic>/<partition>, the offset as decimal text (made with
    its parents, then set), written by whichever broker is asked, no coordinator needed,
    and read back by OffsetFetch v0 on any broker. An empty group id makes no valid path:
    refused (UNKNOWN_SERVER_ERROR), not written where kazoo would put it. /consumers is
    there before any commit: every broker makes it at start-up (createTopLevelPaths)."""
    c = cluster_factory()
    c.wait_controller()
    assert c.zk.get_children(paths.CONSUMERS) == []
    c.create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    c.wait_topic_online("t")
    for broker in (2, 3):
        wait_known(c, broker, "t", 2)
    commit = {
        "group_id": "old",
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 42, "committed_metadata": "m"},
                    {"partition_index": 1, "committed_offset": 7, "committed_metadata": None},
                    {"partition_index": 2, "committed_offset": 1, "committed_metadata": None},
                ],
            }
        ],
    }
    with KafkaConnection("127.0.0.1", c[2].port()) as conn:
        answer = conn.request(ApiKey.OFFSET_COMMIT, 0, commit)
        assert [
            (p["partition_index"], p["error_code"]) for p in answer["topics"][0]["partitions"]
        ] == [
            (0, ErrorCode.NONE),
            (1, ErrorCode.NONE),
            (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        answer = conn.request(ApiKey.OFFSET_COMMIT, 0, {**commit, "group_id": ""})
        assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    got = c.zk.get(paths.consumer_offset("old", "t", 0))
    assert got is not None
    assert got[0] == b"42"
    assert c.zk.get_children(paths.CONSUMERS) == ["old"]
    with KafkaConnection("127.0.0.1", c[3].port()) as conn:
        fetched = conn.request(
            ApiKey.OFFSET_FETCH,
            0,
            {"group_id": "old", "topics": [{"name": "t", "partition_indexes": [0, 1]}]},
        )
    assert [
        (p["partition_index"], p["committed_offset"], p["metadata"], p["error_code"])
        for p in fetched["topics"][0]["partitions"]
    ] == [(0, 42, "", ErrorCode.NONE), (1, 7, "", ErrorCode.NONE)]
