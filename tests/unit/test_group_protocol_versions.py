"""JoinGroup and SyncGroup at every version Kafka 2.8 serves (JoinGroup 0-7, SyncGroup
0-5; the flexible ones from JoinGroup v6 and SyncGroup v4), through the socket server's
request path (its version check, the wire codec both ways, KafkaApis, GroupApis) to a
real group coordinator. KIP-559: SyncGroup v5 names the group's protocol type and name,
which must be the group's (Kafka 2.8's doSyncGroup: INCONSISTENT_GROUP_PROTOCOL) and are
mandatory (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent); its answer and
JoinGroup v7's name them too. Heartbeat, LeaveGroup and OffsetCommit are served up to
their first flexible versions (v4, v4, v8), as in Kafka 2.8."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest

from broker.apis import SUPPORTED, KafkaApis, Supported
from broker.group_apis import GroupApis
from broker.network import SocketServer
from broker.state_change_log import StateChangeLog
from tests.unit.test_group_coordinator import BROKER, G0, Node, metadata_knowing
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request


class Broker:
    """A socket server (not listening: its request path only) over KafkaApis whose
    group APIs are a real coordinator's, leading every offsets partition."""

    def __init__(self, root: Path, topics: dict[str, int] | None = None, zk: Any = None) -> None:
        self.node = Node(root)
        self.node.lead()
        self.node.wait_loaded(G0)
        groups = GroupApis(
            self.node.groups,
            metadata_knowing({"t": 1} if topics is None else topics),
            None,
            offsets_replication_factor=1,
            zk=zk,
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

    def join(self, version: int, member_id: str = "", **extra: Any) -> dict[str, Any]:
        return self.ask(
            ApiKey.JOIN_GROUP,
            version,
            {
                "group_id": G0,
                "session_timeout_ms": 10_000,
                "rebalance_timeout_ms": 10_000,
                "member_id": member_id,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"range-meta"}],
                **extra,
            },
        )

    def joined(self, version: int) -> dict[str, Any]:
        """A first member's join, with the id MEMBER_ID_REQUIRED gives it from v4."""
        answer = self.join(version)
        if version >= 4:
            assert answer["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
            answer = self.join(version, answer["member_id"])
        assert answer["error_code"] == ErrorCode.NONE
        return answer

    def sync(self, version: int, joined: dict[str, Any], **extra: Any) -> dict[str, Any]:
        member_id = joined["member_id"]
        return self.ask(
            ApiKey.SYNC_GROUP,
            version,
            {
                "group_id": G0,
                "generation_id": joined["generation_id"],
                "member_id": member_id,
                "assignments": [{"member_id": member_id, "assignment": b"its-share"}],
                **extra,
            },
        )

    def close(self) -> None:
        self.server.stop()
        self.node.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with Broker(tmp_path) as b:
        yield b


def test_join_group_and_sync_group_are_advertised_as_kafka_2_8_serves_them() -> None:
    """Kafka 2.8's ApiKeys: JoinGroup 0-7, SyncGroup 0-5."""
    assert SUPPORTED[ApiKey.JOIN_GROUP] == Supported(0, 7)
    assert SUPPORTED[ApiKey.SYNC_GROUP] == Supported(0, 5)


@pytest.mark.parametrize(
    ("join_version", "sync_version"),
    # (JoinGroup v4 is the first told MEMBER_ID_REQUIRED, KIP-394: v3 is answered at once.)
    [(0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 3), (6, 4), (7, 5)],
)
def test_a_member_joins_and_syncs_at_each_version(
    broker: Broker, join_version: int, sync_version: int
) -> None:
    joined = broker.joined(join_version)
    assert (joined["protocol_name"], joined["leader"]) == ("range", joined["member_id"])
    # JoinGroup v7 names the protocol type too (KIP-559).
    assert joined.get("protocol_type") == ("consumer" if join_version >= 7 else None)
    synced = broker.sync(sync_version, joined, protocol_type="consumer", protocol_name="range")
    assert (synced["error_code"], synced["assignment"]) == (ErrorCode.NONE, b"its-share")
    named = (synced.get("protocol_type"), synced.get("protocol_name"))
    assert named == (("consumer", "range") if sync_version >= 5 else (None, None))


@pytest.mark.parametrize(
    ("protocol_type", "protocol_name"),
    [
        ("connect", "range"),  # another type
        ("consumer", "roundrobin"),  # another protocol than the group chose
        (None, "range"),  # v5 must name both
        ("consumer", None),
        (None, None),
    ],
)
def test_a_sync_group_v5_not_naming_the_groups_protocol_is_inconsistent(
    broker: Broker, protocol_type: str | None, protocol_name: str | None
) -> None:
    joined = broker.joined(7)
    synced = broker.sync(5, joined, protocol_type=protocol_type, protocol_name=protocol_name)
    assert synced["error_code"] == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # An error names no protocol (Kafka's SyncGroupResult(error)), nor any assignment.
    assert (synced["protocol_type"], synced["protocol_name"], synced["assignment"]) == (
        None,
        None,
        b"",
    )
    # The member may still sync as it should.
    synced = broker.sync(5, joined, protocol_type="consumer", protocol_name="range")
    assert (synced["error_code"], synced["assignment"]) == (ErrorCode.NONE, b"its-share")


@pytest.mark.parametrize("version", [3, 4])
def test_before_v5_a_sync_group_names_no_protocol_to_check(broker: Broker, version: int) -> None:
    """The fields are v5's: an older request's are absent (None), never checked."""
    joined = broker.joined(5)
    synced = broker.sync(version, joined)
    assert (synced["error_code"], synced["assignment"]) == (ErrorCode.NONE, b"its-share")


@pytest.mark.parametrize("version", [5, 6, 7])
def test_a_join_group_refused_names_no_protocol_from_v7(broker: Broker, version: int) -> None:
    """Kafka 2.8's handleJoinGroupRequest: from v7 an answer without a protocol has a
    null protocol name (joinResult.protocolName.orNull), before it "" (NoProtocol)."""
    answer = broker.join(version, session_timeout_ms=1)  # below group.min.session.timeout.ms
    assert answer["error_code"] == ErrorCode.INVALID_SESSION_TIMEOUT
    assert answer["protocol_name"] == (None if version >= 7 else "")
    assert answer.get("protocol_type") is None


def test_heartbeat_leave_group_and_offset_commit_are_served_at_their_flexible_versions(
    broker: Broker,
) -> None:
    """Kafka 2.8's ApiKeys: Heartbeat 0-4, LeaveGroup 0-4 and OffsetCommit 0-8, the last
    of each its first flexible version (OffsetCommit v0, ZooKeeper-stored, is served too:
    test_group_old_versions.py)."""
    assert SUPPORTED[ApiKey.HEARTBEAT] == Supported(0, 4)
    assert SUPPORTED[ApiKey.LEAVE_GROUP] == Supported(0, 4)
    assert SUPPORTED[ApiKey.OFFSET_COMMIT] == Supported(0, 8)
    joined = broker.joined(7)
    synced = broker.sync(5, joined, protocol_type="consumer", protocol_name="range")
    assert synced["error_code"] == ErrorCode.NONE
    member, generation = joined["member_id"], joined["generation_id"]
    beat = {"group_id": G0, "generation_id": generation, "member_id": member}
    assert broker.ask(ApiKey.HEARTBEAT, 4, beat)["error_code"] == ErrorCode.NONE
    commit = broker.ask(
        ApiKey.OFFSET_COMMIT,
        8,
        {
            "group_id": G0,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "topics": [
                {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 7}]}
            ],
        },
    )
    assert commit["topics"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    left = broker.ask(
        ApiKey.LEAVE_GROUP,
        4,
        {"group_id": G0, "members": [{"member_id": member, "group_instance_id": None}]},
    )
    assert (left["error_code"], [m["error_code"] for m in left["members"]]) == (0, [0])
