"""The group APIs' wire mapping for static membership (broker/group_apis.py): requests
decoded at the versions that carry a group instance id pass it on, and responses encode
at every version served (an older version's member gets no instance ids, which it has
no field for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from broker.group_apis import GroupApis
from groups.membership import JoinAnswer, SyncAnswer
from tests.unit.test_group_coordinator import G0, Node, metadata_knowing
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)


class Coordinator:
    """Records the calls the APIs make and answers as told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def join_group(self, *args: Any, **kwargs: Any) -> JoinAnswer:
        self.calls.append(("join", args, kwargs))
        return JoinAnswer(
            ErrorCode.NONE,
            3,
            "consumer",
            "range",
            "a-1",
            "a-1",
            (("a-1", b"meta-a"), ("d-1", b"meta-d")),
            ("a", None),
        )

    def leave_group_members(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        self.calls.append(("leave", (group_id, members), {}))
        return ErrorCode.NONE, [ErrorCode.NONE, ErrorCode.FENCED_INSTANCE_ID][: len(members)]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, dict[str, Any]]:
        return ErrorCode.NONE, {
            "group_state": "Stable",
            "protocol_type": "consumer",
            "protocol_data": "range",
            "members": [
                {
                    "member_id": "a-1",
                    "group_instance_id": "a",
                    "client_id": "c",
                    "client_host": "/127.0.0.1",
                    "member_metadata": b"",
                    "member_assignment": b"",
                }
            ],
        }


def through_the_wire(api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    frame = encode_request(api, version, 7, "client", body)[4:]
    _header, offset = decode_request_header(frame)
    return decode_request_body(api, version, frame, offset)


def answered(api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
    frame = encode_response(api, version, 7, body)[4:]
    return decode_response(api, version, frame)[1]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_join_group_passes_the_instance_id_and_answers_at_each_version(version: int) -> None:
    coordinator = Coordinator()
    apis = GroupApis(cast(Any, coordinator), cast(Any, None), None, offsets_replication_factor=1)
    request: dict[str, Any] = {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta-a"}],
    }
    if version >= 5:
        request["group_instance_id"] = "a"
    body = through_the_wire(ApiKey.JOIN_GROUP, version, request)
    response = apis.join_group(version, body, {"client_id": "c"}, "/127.0.0.1")
    decoded = answered(ApiKey.JOIN_GROUP, version, response)
    assert coordinator.calls[0][2]["group_instance_id"] == ("a" if version >= 5 else None)
    # The header's client id and the connection's host (a new member's id starts with the
    # client id, Kafka 2.8's generateMemberId; DescribeGroups shows both).
    assert (coordinator.calls[0][2]["client_id"], coordinator.calls[0][2]["client_host"]) == (
        "c",
        "/127.0.0.1",
    )
    members = {m["member_id"]: m.get("group_instance_id") for m in decoded["members"]}
    assert members == ({"a-1": "a", "d-1": None} if version >= 5 else {"a-1": None, "d-1": None})


def test_leave_group_v3_names_members_by_instance_id() -> None:
    coordinator = Coordinator()
    apis = GroupApis(cast(Any, coordinator), cast(Any, None), None, offsets_replication_factor=1)
    body = through_the_wire(
        ApiKey.LEAVE_GROUP,
        3,
        {
            "group_id": "g",
            "members": [
                {"member_id": "", "group_instance_id": "a"},
                {"member_id": "b-old", "group_instance_id": "b"},
            ],
        },
    )
    decoded = answered(ApiKey.LEAVE_GROUP, 3, apis.leave_group(3, body, {}))
    assert coordinator.calls[0][1] == ("g", [("", "a"), ("b-old", "b")])
    assert [
        (m["member_id"], m["group_instance_id"], m["error_code"]) for m in decoded["members"]
    ] == [
        ("", "a", 0),
        ("b-old", "b", int(ErrorCode.FENCED_INSTANCE_ID)),
    ]
    v2 = apis.leave_group(
        2, through_the_wire(ApiKey.LEAVE_GROUP, 2, {"group_id": "g", "member_id": "m"}), {}
    )
    assert v2["error_code"] == 0
    assert coordinator.calls[1][1] == ("g", [("m", None)])


@pytest.mark.parametrize("version", [3, 4])
def test_leave_group_v3_to_a_broker_not_coordinating_answers_the_group_error(
    tmp_path: Path, version: int
) -> None:
    """LeaveGroup v3+ naming members, sent to a broker that does not coordinate the group:
    the group's error with no members (Kafka 2.8's handleLeaveGroup: validateGroupStatus,
    then leaveError(error, List.empty)). The request's members were zipped strictly with
    the coordinator's empty list: a ValueError, answered UNKNOWN_SERVER_ERROR."""
    node = Node(tmp_path)  # leads nothing: NOT_COORDINATOR for every group
    try:
        apis = GroupApis(node.groups, metadata_knowing({}), None, offsets_replication_factor=1)
        body = through_the_wire(
            ApiKey.LEAVE_GROUP,
            version,
            {"group_id": G0, "members": [{"member_id": "m-1", "group_instance_id": None}]},
        )
        decoded = answered(ApiKey.LEAVE_GROUP, version, apis.leave_group(version, body, {}))
    finally:
        node.close()
    assert (decoded["error_code"], decoded["members"]) == (int(ErrorCode.NOT_COORDINATOR), [])


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_describe_groups_shows_instance_ids_from_v4(version: int) -> None:
    apis = GroupApis(cast(Any, Coordinator()), cast(Any, None), None, offsets_replication_factor=1)
    body = through_the_wire(ApiKey.DESCRIBE_GROUPS, version, {"groups": ["g"]})
    decoded = answered(ApiKey.DESCRIBE_GROUPS, version, apis.describe_groups(version, body, {}))
    member = decoded["groups"][0]["members"][0]
    assert member.get("group_instance_id") == ("a" if version >= 4 else None)


@pytest.mark.parametrize(
    ("api", "version", "extra"),
    [
        (ApiKey.HEARTBEAT, 3, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
        (
            ApiKey.SYNC_GROUP,
            3,
            {"group_id": "g", "generation_id": 1, "member_id": "m", "assignments": []},
        ),
        (
            ApiKey.OFFSET_COMMIT,
            7,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": 1,
                "member_id": "m",
                "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}],
            },
        ),
    ],
)
def test_heartbeat_sync_and_commit_pass_the_instance_id(
    api: ApiKey, version: int, extra: dict[str, Any]
) -> None:
    body = through_the_wire(api, version, {**extra, "group_instance_id": "a"})
    seen: list[Any] = []

    class Recording:
        def heartbeat(self, *args: Any, **kwargs: Any) -> ErrorCode:
            seen.append(kwargs.get("group_instance_id"))
            return ErrorCode.NONE

        def sync_group(self, *args: Any, **kwargs: Any) -> Any:
            seen.append(kwargs.get("group_instance_id"))
            return SyncAnswer(ErrorCode.NONE)

        def commit_offsets(self, *args: Any, **kwargs: Any) -> dict[Any, ErrorCode]:
            seen.append(kwargs.get("group_instance_id"))
            return dict.fromkeys(args[3], ErrorCode.NONE)

    apis = GroupApis(
        cast(Any, Recording()), metadata_knowing({"t": 1}), None, offsets_replication_factor=1
    )
    handler = {
        ApiKey.HEARTBEAT: apis.heartbeat,
        ApiKey.SYNC_GROUP: apis.sync_group,
        ApiKey.OFFSET_COMMIT: apis.offset_commit,
    }[api]
    answered(api, version, handler(version, body, {}))
    assert seen == ["a"]


@pytest.mark.parametrize("version", [3, 5])
@pytest.mark.parametrize("asked", [True, False])
def test_describe_groups_answers_a_groups_authorized_operations_when_asked(
    version: int, asked: bool
) -> None:
    """Kafka 2.8 without an authorizer: READ, DESCRIBE and DELETE (a group's supported
    operations, bits 3, 8 and 6); the schema's default when not asked."""
    apis = GroupApis(cast(Any, Coordinator()), cast(Any, None), None, offsets_replication_factor=1)
    request = {"groups": ["g"], "include_authorized_operations": asked}
    body = through_the_wire(ApiKey.DESCRIBE_GROUPS, version, request)
    decoded = answered(ApiKey.DESCRIBE_GROUPS, version, apis.describe_groups(version, body, {}))
    expected = (1 << 3 | 1 << 8 | 1 << 6) if asked else -(2**31)
    assert decoded["groups"][0]["authorized_operations"] == expected


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_group_before_v3_answers_the_members_own_error(tmp_path: Path, version: int) -> None:
    """LeaveGroup v0-v2 has one error field: the group's, else the member's (Kafka 2.8's
    LeaveGroupResponse.getError), so a member the group does not know is told
    UNKNOWN_MEMBER_ID, and a known one NONE."""
    node = Node(tmp_path)
    try:
        node.lead()
        node.wait_loaded(G0)
        apis = GroupApis(node.groups, metadata_knowing({}), None, offsets_replication_factor=1)

        def leave(member_id: str) -> int:
            body = through_the_wire(
                ApiKey.LEAVE_GROUP, version, {"group_id": G0, "member_id": member_id}
            )
            response = answered(ApiKey.LEAVE_GROUP, version, apis.leave_group(version, body, {}))
            return int(response["error_code"])

        assert leave("stranger") == ErrorCode.UNKNOWN_MEMBER_ID
        joined = node.groups.join_group(
            G0,
            "",
            require_known_member_id=False,
            client_id="c",
            client_host="/127.0.0.1",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            protocol_type="consumer",
            protocols=(("range", b"meta"),),
        )
        assert joined.error == ErrorCode.NONE
        assert leave(joined.member_id) == ErrorCode.NONE
        assert leave(joined.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        node.close()


def test_describe_groups_answers_no_authorized_operations_for_a_group_in_error(
    tmp_path: Path,
) -> None:
    """Kafka 2.8's handleDescribeGroupsRequest sets a group's authorized operations only
    when it is described without an error: a broker not coordinating it answers the
    schema's default, even when asked."""
    node = Node(tmp_path)  # leads nothing: NOT_COORDINATOR for every group
    try:
        apis = GroupApis(node.groups, metadata_knowing({}), None, offsets_replication_factor=1)
        request = {"groups": [G0], "include_authorized_operations": True}
        body = through_the_wire(ApiKey.DESCRIBE_GROUPS, 3, request)
        decoded = answered(ApiKey.DESCRIBE_GROUPS, 3, apis.describe_groups(3, body, {}))
    finally:
        node.close()
    group = decoded["groups"][0]
    assert group["error_code"] == ErrorCode.NOT_COORDINATOR
    assert group["authorized_operations"] == -(2**31)
