"""The first versions of OffsetCommit and OffsetFetch, as Kafka 2.8 serves them, through
the socket server's request path (its version check, the wire codec both ways,
KafkaApis, GroupApis) to a real group coordinator and a fake ZooKeeper.

OffsetCommit v1 goes to the group coordinator, as v2+ do, each partition with the
commit_timestamp it carries (v1 only; -1: now) and no expire timestamp (Kafka 2.8's
handleOffsetCommitRequest: the request's retention_time_ms, v2-v4 only, is -1). OffsetCommit
v0 and OffsetFetch v0 are Kafka 0.8's ZooKeeper-kept offsets: the offset, as decimal text,
at /consumers/<group>/offsets/<topic>/<partition> (KafkaZkClient's
setOrCreateConsumerOffset and getConsumerOffset), seen by no later version (those read
the coordinator), written and read whichever broker coordinates the group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from groups.offset_records import NO_TIMESTAMP
from tests.unit import test_group_protocol_versions as protocol_versions
from tests.unit.fake_zk import FakeZk
from tests.unit.test_group_coordinator import G0
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import MalformedZnode, TopicPartition, decode_consumer_offset

DAY_MS = 24 * 3600 * 1000


class Broker(protocol_versions.Broker):
    """test_group_protocol_versions' Broker (the socket server's request path over a real
    coordinator) with a fake ZooKeeper; its metadata knows topic "t" (2 partitions)."""

    def __init__(self, root: Path) -> None:
        self.zk = FakeZk()
        super().__init__(root, topics={"t": 2}, zk=self.zk)

    def commit(
        self, version: int, partitions: dict[str, list[dict[str, Any]]], **extra: Any
    ) -> list[tuple[str, int, int]]:
        """(topic, partition, error) of each partition answered."""
        body = {
            "group_id": G0,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [{"name": t, "partitions": ps} for t, ps in partitions.items()],
            **extra,
        }
        answer = self.ask(ApiKey.OFFSET_COMMIT, version, body)
        return [
            (t["name"], p["partition_index"], p["error_code"])
            for t in answer["topics"]
            for p in t["partitions"]
        ]

    def fetch(
        self, version: int, partitions: dict[str, list[int]], group_id: str = G0
    ) -> list[tuple[str, int, int, str | None, int]]:
        """(topic, partition, offset, metadata, error) of each partition answered."""
        body = {
            "group_id": group_id,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()],
        }
        answer = self.ask(ApiKey.OFFSET_FETCH, version, body)
        assert answer.get("error_code", 0) == ErrorCode.NONE
        return [
            (t["name"], p["partition_index"], p["committed_offset"], p["metadata"], p["error_code"])
            for t in answer["topics"]
            for p in t["partitions"]
        ]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path) as b:
        yield b


def part(index: int, offset: int, **extra: Any) -> dict[str, Any]:
    return {"partition_index": index, "committed_offset": offset, **extra}


# --- OffsetCommit v1 -------------------------------------------------------------------


def test_offset_commit_v1_stores_its_commit_timestamp_or_now_in_the_coordinator(
    broker: Broker,
) -> None:
    """Kafka 2.8's handleOffsetCommitRequest, v1: the partition's commit_timestamp, or
    now when it is -1 (DEFAULT_TIMESTAMP); no expire timestamp (v1 has no
    retention_time_ms). Read back by OffsetFetch v1 and v5, from the coordinator."""
    before = int(time.time() * 1000)
    answered = broker.commit(
        1,
        {
            "t": [
                part(0, 11, commit_timestamp=-1, committed_metadata="m0"),
                part(1, 12, commit_timestamp=123_456, committed_metadata=None),
            ]
        },
    )
    after = int(time.time() * 1000)
    assert answered == [("t", 0, ErrorCode.NONE), ("t", 1, ErrorCode.NONE)]
    for version in (1, 5):
        assert broker.fetch(version, {"t": [0, 1]}) == [
            ("t", 0, 11, "m0", ErrorCode.NONE),
            ("t", 1, 12, "", ErrorCode.NONE),
        ]
    error, found = broker.node.groups.fetch_offsets(G0, None)
    assert error == ErrorCode.NONE
    now_committed = found[TopicPartition("t", 0)]
    given = found[TopicPartition("t", 1)]
    assert now_committed is not None
    assert given is not None
    assert before <= now_committed.commit_timestamp_ms <= after
    assert given.commit_timestamp_ms == 123_456
    assert now_committed.expire_timestamp_ms == given.expire_timestamp_ms == NO_TIMESTAMP
    # A simple consumer's offsets expire offsets.retention.minutes (7 days) after their
    # commit timestamp (GroupMetadata.removeExpiredOffsets): the one given long ago at
    # once, the one committed now not for a week.
    assert broker.node.groups.expire_offsets(after + DAY_MS) == 1
    assert broker.fetch(1, {"t": [0, 1]}) == [
        ("t", 0, 11, "m0", ErrorCode.NONE),
        ("t", 1, -1, "", ErrorCode.NONE),
    ]


def test_offset_commit_v1_checks_the_member_and_generation_as_v2(broker: Broker) -> None:
    """v1 names the member and generation (Kafka 2.8 hands them to handleCommitOffsets as
    for v2+, doCommitOffsets): a simple consumer's commit (generation -1, member "") to
    an Empty group is written, a member the group does not have is UNKNOWN_MEMBER_ID; a
    topic the metadata does not know is UNKNOWN_TOPIC_OR_PARTITION, before the
    coordinator."""
    assert broker.commit(
        1,
        {"t": [part(0, 5, commit_timestamp=-1)], "gone": [part(0, 1, commit_timestamp=-1)]},
    ) == [("t", 0, ErrorCode.NONE), ("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert broker.commit(
        1,
        {"t": [part(0, 6, commit_timestamp=-1)]},
        member_id="stranger",
        generation_id_or_member_epoch=3,
    ) == [("t", 0, ErrorCode.UNKNOWN_MEMBER_ID)]
    assert broker.fetch(1, {"t": [0]}) == [("t", 0, 5, "", ErrorCode.NONE)]


# --- OffsetCommit v0 and OffsetFetch v0: ZooKeeper ---------------------------------------


def znode(broker: Broker, group_id: str, topic: str, partition: int) -> bytes | None:
    got = broker.zk.get(paths.consumer_offset(group_id, topic, partition))
    return None if got is None else got[0]


def test_offset_commit_v0_writes_zookeeper_and_offset_fetch_v0_reads_it(broker: Broker) -> None:
    """KafkaZkClient.setOrCreateConsumerOffset: the znode made (its parents too), then set;
    the offset as decimal text, the metadata not kept (OffsetFetch v0 answers
    NO_METADATA). The coordinator has none of it (OffsetFetch v1 and v5 answer -1), and
    OffsetFetch v0 none of the coordinator's."""
    assert broker.commit(0, {"t": [part(0, 42, committed_metadata="m"), part(1, 7)]}) == [
        ("t", 0, ErrorCode.NONE),
        ("t", 1, ErrorCode.NONE),
    ]
    assert znode(broker, G0, "t", 0) == b"42"
    assert broker.commit(0, {"t": [part(0, 43)]}) == [("t", 0, ErrorCode.NONE)]
    assert znode(broker, G0, "t", 0) == b"43"
    assert broker.zk.get(paths.consumer_offset(G0, "t", 0))[1].version == 1  # type: ignore[index]
    assert broker.fetch(0, {"t": [0, 1]}) == [
        ("t", 0, 43, "", ErrorCode.NONE),
        ("t", 1, 7, "", ErrorCode.NONE),
    ]
    for version in (1, 5):
        assert broker.fetch(version, {"t": [0, 1]}) == [
            ("t", 0, -1, "", ErrorCode.NONE),
            ("t", 1, -1, "", ErrorCode.NONE),
        ]
    assert broker.commit(2, {"t": [part(1, 99)]}) == [("t", 1, ErrorCode.NONE)]
    assert broker.fetch(0, {"t": [1]}) == [("t", 1, 7, "", ErrorCode.NONE)]
    assert znode(broker, G0, "t", 1) == b"7"


def test_offset_commit_v0_checks_the_topic_then_the_metadata_size(broker: Broker) -> None:
    """handleOffsetCommitRequest: a partition the metadata does not know is
    UNKNOWN_TOPIC_OR_PARTITION; metadata longer than offset.metadata.max.bytes (4096, a
    Java String's length: UTF-16 code units) is OFFSET_METADATA_TOO_LARGE; neither is
    written. Each partition is answered once, its last offset written."""
    limit = broker.node.groups.offset_metadata_max_bytes
    answered = broker.commit(
        0,
        {
            "gone": [part(0, 1)],
            "t": [
                part(0, 1, committed_metadata="x" * (limit + 1)),
                part(1, 2, committed_metadata="x" * limit),
                part(5, 3),
                part(1, 4, committed_metadata="\U0001f600" * (limit // 2)),
            ],
        },
    )
    assert answered == [
        ("gone", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 0, ErrorCode.OFFSET_METADATA_TOO_LARGE),
        ("t", 1, ErrorCode.NONE),
        ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert znode(broker, G0, "t", 1) == b"4"
    assert broker.commit(0, {"t": [part(1, 5, committed_metadata="\U0001f600" * 2049)]}) == [
        ("t", 1, ErrorCode.OFFSET_METADATA_TOO_LARGE)
    ]
    assert znode(broker, G0, "t", 0) is None
    assert znode(broker, G0, "gone", 0) is None
    assert znode(broker, G0, "t", 5) is None
    assert znode(broker, G0, "t", 1) == b"4"


def test_offset_commit_v0_and_offset_fetch_v0_answer_a_zookeeper_failure_per_partition(
    broker: Broker,
) -> None:
    """What ZooKeeper raises answers its partition UNKNOWN_SERVER_ERROR (Errors.forException
    of a KeeperException), the others are written; OffsetFetch v0 answers it with -1
    (INVALID_OFFSET). A group id that makes no ZooKeeper path ("": an empty name) fails
    so (the Java client's IllegalArgumentException) rather than writing elsewhere: kazoo
    would drop the empty name."""
    broker.zk.fail_next = [ConnectionLoss()]
    assert broker.commit(0, {"t": [part(0, 1), part(1, 2)]}) == [
        ("t", 0, ErrorCode.UNKNOWN_SERVER_ERROR),
        ("t", 1, ErrorCode.NONE),
    ]
    broker.zk.fail_next = [ConnectionLoss()]
    assert broker.fetch(0, {"t": [1, 1, 0]}) == [
        ("t", 1, -1, "", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("t", 0, -1, "", ErrorCode.NONE),
    ]
    body = {
        "group_id": "",
        "topics": [{"name": "t", "partitions": [part(0, 9)]}],
    }
    answer = broker.ask(ApiKey.OFFSET_COMMIT, 0, body)
    assert answer["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert broker.fetch(0, {"t": [0]}, group_id="") == [
        ("t", 0, -1, "", ErrorCode.UNKNOWN_SERVER_ERROR)
    ]
    assert [p for p in broker.zk.nodes if p.startswith(paths.CONSUMERS)] == [
        "/consumers",
        f"/consumers/{G0}",
        f"/consumers/{G0}/offsets",
        f"/consumers/{G0}/offsets/t",
        f"/consumers/{G0}/offsets/t/1",
    ]


def test_offset_fetch_v0_of_a_partition_unknown_or_never_committed(broker: Broker) -> None:
    """handleOffsetFetchRequest v0: a partition the metadata does not know, or with no
    znode, is OffsetFetchResponse.UNKNOWN_PARTITION (offset -1, metadata "", error NONE);
    a znode that holds no offset is the read's failure, UNKNOWN_SERVER_ERROR."""
    broker.zk.ensure_paths([paths.consumer_offset(G0, "t", 0).rsplit("/", 1)[0]])
    broker.zk.create(paths.consumer_offset(G0, "t", 0), b"not a number")
    assert broker.fetch(0, {"gone": [0], "t": [7, 1, 0]}) == [
        ("gone", 0, -1, "", ErrorCode.NONE),
        ("t", 7, -1, "", ErrorCode.NONE),
        ("t", 1, -1, "", ErrorCode.NONE),
        ("t", 0, -1, "", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]


def test_offset_commit_v0_and_offset_fetch_v0_ask_no_coordinator(broker: Broker) -> None:
    """Kafka 2.8 answers v0 from ZooKeeper on any broker: a broker that does not
    coordinate the group (NOT_COORDINATOR from v1) writes and reads its offsets."""
    broker.node.follow(0, epoch=1)
    assert broker.commit(2, {"t": [part(0, 5)]}) == [("t", 0, ErrorCode.NOT_COORDINATOR)]
    assert broker.commit(0, {"t": [part(0, 5)]}) == [("t", 0, ErrorCode.NONE)]
    assert broker.fetch(0, {"t": [0]}) == [("t", 0, 5, "", ErrorCode.NONE)]


def test_the_consumer_offset_znode_is_read_and_its_path_checked_as_kafkas_client_does() -> None:
    """ConsumerOffset.decode: Option(bytes), then Long.parseLong of its UTF-8, untrimmed
    (a '+' taken, a space not); PathUtils.validatePath: no empty, '.' or '..' name, no
    control character; a group id with '/' is a deeper path, as in Kafka."""
    path = paths.consumer_offset(G0, "t", 0)
    assert decode_consumer_offset(path, None) is None
    assert decode_consumer_offset(path, b"+12") == 12
    assert decode_consumer_offset(path, b"-1") == -1
    assert decode_consumer_offset(path, str(2**63 - 1).encode()) == 2**63 - 1
    for bad in (b"", b" 1", b"1\n", str(2**63).encode(), b"\xff"):
        with pytest.raises(MalformedZnode):
            decode_consumer_offset(path, bad)
    assert paths.consumer_offset("a/b", "t", 3) == "/consumers/a/b/offsets/t/3"
    assert paths.zookeeper_path_problem("/consumers/a/b/offsets/t/3") is None
    assert paths.zookeeper_path_problem("/consumers/.../offsets/t/3") is None
    for group in ("", ".", "..", "a/", "x\x01", "x\x7f", "x\ud800", "\U0001f600"):
        assert paths.zookeeper_path_problem(paths.consumer_offset(group, "t", 0)), group
