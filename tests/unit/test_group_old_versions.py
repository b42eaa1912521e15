"""The first versions of OffsetCommit and OffsetFetch, as Kafka 2.8 serves them, through
the socket server's request path (its version check, the wire codec both ways,
KafkaApis, GroupApis) to a real group coordinator.

OffsetCommit v1 goes to the group coordinator, as v2+ do, each partition with the
commit_timestamp it carries (v1 only; -1: now) and no expire timestamp (Kafka 2.8's
handleOffsetCommitRequest: the request's retention_time_ms, v2-v4 only, is -1)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.apis import KafkaApis
from broker.group_apis import GroupApis
from broker.network import SocketServer
from broker.state_change_log import StateChangeLog
from groups.offset_records import NO_TIMESTAMP
from tests.unit.test_group_coordinator import BROKER, G0, Node, metadata_knowing
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request
from zkdata.znodes import TopicPartition

DAY_MS = 24 * 3600 * 1000


class Broker:
    """A socket server (not listening: its request path only) over KafkaApis whose
    group APIs are a real coordinator's, leading every offsets partition; its metadata
    knows topic "t" (2 partitions)."""

    def __init__(self, root: Path) -> None:
        self.node = Node(root)
        self.node.lead()
        self.node.wait_loaded(G0)
        groups = GroupApis(
            self.node.groups,
            metadata_knowing({"t": 2}),
            None,
            offsets_replication_factor=1,
        )
        self.apis = KafkaApis(
            BROKER,
            metadata_knowing({}),
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            StateChangeLog(None, BROKER),
            lambda: 10,
            groups=groups,
        )
        self.server = SocketServer("127.0.0.1", 0, lambda: self.apis)
        self.correlation_id = 0

    def ask(self, api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        frame = encode_request(api, version, self.correlation_id, "consumer", body)[4:]
        response = self.server._handle(bytearray(frame), ("127.0.0.1", 1))
        assert response is not None, f"{api.name} v{version}: the connection was closed"
        correlation_id, answer = decode_response(api, version, bytes(response[4:]))
        assert correlation_id == self.correlation_id
        return dict(answer)

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

    def close(self) -> None:
        self.server.stop()
        self.node.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    try:
        yield b
    finally:
        b.close()


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
