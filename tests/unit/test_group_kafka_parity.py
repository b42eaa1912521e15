"""Details of Kafka 2.8's group APIs and coordinator that a client rarely meets, kept as
Kafka has them: a JoinGroup v1+ with a negative rebalance timeout keeps it (only v0's is
the session timeout, JoinGroupRequest.maybeOverrideRebalanceTimeout), and an empty
group.instance.id is an instance id (KafkaApis takes Option(groupInstanceId): a static
member named "")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from broker.group_apis import GroupApis
from broker.network import SocketServer
from groups.membership import Group, GroupState, SyncAnswer
from tests.unit import test_group_coordinator as shell
from tests.unit.test_group_apis_static import Coordinator, answered, through_the_wire
from tests.unit.test_group_coordinator import (
    G0,
    Call,
    Node,
    join,
    member_ids,
    metadata_knowing,
    node,  # noqa: F401 (a fixture)
    nodes,  # noqa: F401 (a fixture)
    stable_member,
    wait_until,
)
from tests.unit.test_group_membership import DELAY, LIMITS, join_new, rejoin, state, sync
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import decode_response, encode_request

# The most negative an int32 rebalance timeout can be.
MOST_NEGATIVE = -(2**31)


def _join_request(**fields: Any) -> dict[str, Any]:
    return {
        "group_id": "g",
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 30_000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"meta-a"}],
        **fields,
    }


def _joined_with(version: int, request: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments JoinGroup ``version`` passes the coordinator."""
    coordinator = Coordinator()
    apis = GroupApis(cast(Any, coordinator), cast(Any, None), None, offsets_replication_factor=1)
    body = through_the_wire(ApiKey.JOIN_GROUP, version, request)
    answered(ApiKey.JOIN_GROUP, version, apis.join_group(version, body, {"client_id": "c"}, "h"))
    return coordinator.calls[0][2]


# --- a negative rebalance timeout -------------------------------------------------------


@pytest.mark.parametrize("version", [1, 4, 7])
def test_a_negative_rebalance_timeout_of_join_group_v1_and_later_is_kept(version: int) -> None:
    """JoinGroupRequest.maybeOverrideRebalanceTimeout replaces it by the session timeout
    for v0 alone; KafkaApis passes a v1+ request's value to the coordinator as it is."""
    kwargs = _joined_with(version, _join_request(rebalance_timeout_ms=-1))
    assert kwargs["rebalance_timeout_ms"] == -1
    assert kwargs["session_timeout_ms"] == 10_000


def test_join_group_v0_takes_the_session_timeout_for_the_rebalance_timeout() -> None:
    kwargs = _joined_with(0, _join_request())
    assert kwargs["rebalance_timeout_ms"] == 10_000


def test_a_negative_rebalance_timeout_ends_the_join_phase_at_once() -> None:
    """The group's rebalance timeout is its members' largest, folded from 0 (Kafka's
    GroupMetadata.rebalanceTimeoutMs): all negative, the DelayedJoin has no delay and the
    leader rejoining forms the next generation at once, without the follower that did not
    rejoin; and the sync phase has none either (DelayedSync): the member that has not
    synced by the next tick is dropped."""
    group = Group("g", LIMITS)
    join_new(group, "a", 0, rebalance=-1)
    join_new(group, "b", 0, rebalance=-1)
    # (The initial delay is waited whole, and not extended: the rebalance timeout leaves
    # nothing of it, InitialDelayedJoin's remaining max(-1 - delay, 0).)
    assert set(group.tick(DELAY).joins) == {"a", "b"}
    assert not sync(group, "b", 1, DELAY)
    assert set(sync(group, "a", 1, DELAY, {"a": b"A", "b": b"B"}).syncs) == {"a", "b"}
    assert state(group) is GroupState.STABLE
    now = DELAY + 100
    answers = rejoin(group, "a", now, protocols=(("range", b"new"),), rebalance=-1)
    assert answers.joins["a"].error == ErrorCode.NONE
    assert answers.joins["a"].generation_id == 2
    assert set(group.members) == {"a"}
    assert state(group) is GroupState.COMPLETING_REBALANCE
    assert group.next_deadline_ms() == now
    group.tick(now)
    assert not group.members
    assert state(group) is GroupState.EMPTY
    assert group.next_deadline_ms() is None


def test_a_held_sync_of_a_member_with_a_negative_rebalance_timeout_waits_for_the_leader(
    node: Node,  # noqa: F811 (the fixture imported)
) -> None:
    """The sync phase is timed by the group's rebalance timeout (Kafka's DelayedSync): a
    follower whose own is negative still has its SyncGroup held until the leader's
    assignment, not answered at once with an error."""
    groups = node.groups
    first = stable_member(groups, G0)
    second = Call(lambda: join(groups, G0, client_id="second", rebalance_ms=MOST_NEGATIVE))
    wait_until("the second member in the group", lambda: len(member_ids(groups, G0)) == 2)
    assert join(groups, G0, first.member_id).generation_id == 2
    follower = second.answer().member_id
    held = Call(lambda: shell.sync(groups, G0, follower, 2))
    assert held.waiting(0.1)
    assert shell.sync(groups, G0, first.member_id, 2, {follower: b"yours"}).error == ErrorCode.NONE
    assert held.answer().error == ErrorCode.NONE
    assert held.answer().assignment == b"yours"


# --- an empty group.instance.id ---------------------------------------------------------


@pytest.mark.parametrize("version", [5, 7])
def test_join_group_passes_an_empty_instance_id_as_one(version: int) -> None:
    """KafkaApis.handleJoinGroupRequest: Option(groupInstanceId) is Some(""), a static
    member, and requireKnownMemberId = version >= 4 && groupInstanceId.isEmpty is false:
    it joins without the MEMBER_ID_REQUIRED round. No instance id (null) is a dynamic
    member, which needs that round from v4."""
    kwargs = _joined_with(version, _join_request(group_instance_id=""))
    assert kwargs["group_instance_id"] == ""
    assert kwargs["require_known_member_id"] is False
    kwargs = _joined_with(version, _join_request(group_instance_id=None))
    assert kwargs["group_instance_id"] is None
    assert kwargs["require_known_member_id"] is True


@pytest.mark.parametrize(
    ("api", "version", "request_body"),
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
def test_heartbeat_sync_and_commit_pass_an_empty_instance_id_as_one(
    api: ApiKey, version: int, request_body: dict[str, Any]
) -> None:
    """handleHeartbeatRequest, handleSyncGroupRequest and handleOffsetCommitRequest pass
    Option(groupInstanceId): "" is checked as the instance id "" (fenced if another
    member holds it)."""
    body = through_the_wire(api, version, {**request_body, "group_instance_id": ""})
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
    assert seen == [""]


def test_leave_group_v3_passes_an_empty_instance_id_as_one() -> None:
    """GroupCoordinator.handleLeaveGroup takes each member's Option(groupInstanceId); the
    answer names it as asked."""
    coordinator = Coordinator()
    apis = GroupApis(cast(Any, coordinator), cast(Any, None), None, offsets_replication_factor=1)
    members = [
        {"member_id": "", "group_instance_id": ""},
        {"member_id": "b-old", "group_instance_id": None},
    ]
    body = through_the_wire(ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": members})
    decoded = answered(ApiKey.LEAVE_GROUP, 3, apis.leave_group(3, body, {}))
    assert coordinator.calls[0][1] == ("g", [("", ""), ("b-old", None)])
    assert [m["group_instance_id"] for m in decoded["members"]] == ["", None]


def test_a_member_with_an_empty_instance_id_is_a_static_member(
    node: Node,  # noqa: F811 (the fixture imported)
) -> None:
    """Through the APIs to the coordinator: a JoinGroup v5 with group.instance.id "" joins
    at once as the static member "" (its member id is the instance id, "", then "-" and a
    UUID: Kafka's generateMemberId), a JoinGroup of it again without a member id takes
    its place (its old id is fenced), and a LeaveGroup naming "" alone removes it."""
    apis = GroupApis(node.groups, metadata_knowing({}), None, offsets_replication_factor=1)

    def join_v5(member_id: str) -> dict[str, Any]:
        request = _join_request(group_id=G0, member_id=member_id, group_instance_id="")
        body = through_the_wire(ApiKey.JOIN_GROUP, 5, request)
        return apis.join_group(5, body, {"client_id": "client"}, "/127.0.0.1")

    first = join_v5("")
    assert first["error_code"] == ErrorCode.NONE
    assert first["member_id"].startswith("-")
    assert first["leader"] == first["member_id"]
    assert [m["group_instance_id"] for m in first["members"]] == [""]
    _error, described = node.groups.describe_group(G0)
    assert [m["group_instance_id"] for m in described["members"]] == [""]
    old = first["member_id"]
    assert shell.sync(node.groups, G0, old, 1, {old: b"mine"}).error == ErrorCode.NONE
    restarted = join_v5("")
    assert restarted["error_code"] == ErrorCode.NONE
    new = restarted["member_id"]
    assert new != old
    assert new.startswith("-")
    heartbeat = through_the_wire(
        ApiKey.HEARTBEAT,
        3,
        {"group_id": G0, "generation_id": 1, "member_id": old, "group_instance_id": ""},
    )
    assert apis.heartbeat(3, heartbeat, {})["error_code"] == ErrorCode.FENCED_INSTANCE_ID
    leave = through_the_wire(
        ApiKey.LEAVE_GROUP,
        3,
        {"group_id": G0, "members": [{"member_id": "", "group_instance_id": ""}]},
    )
    assert apis.leave_group(3, leave, {})["members"][0]["error_code"] == ErrorCode.NONE
    assert not member_ids(node.groups, G0)


# --- a pending member naming a group instance id ------------------------------------------


class _GroupApisOnly:
    """The broker's request handling (broker/network.py) over the group APIs alone."""

    def __init__(self, apis: GroupApis) -> None:
        self.apis = apis

    def supported(self, api_key: int, version: int) -> bool:
        return api_key in (ApiKey.JOIN_GROUP, ApiKey.LEAVE_GROUP)

    def handle(
        self, api_key: int, version: int, header: dict[str, Any], body: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        if api_key == ApiKey.JOIN_GROUP:
            return self.apis.join_group(version, body, header, kw["client_host"])
        return self.apis.leave_group(version, body, header)


Ask = Callable[[ApiKey, int, dict[str, Any]], dict[str, Any]]


@pytest.fixture
def ask(node: Node) -> Iterator[Ask]:  # noqa: F811 (the fixture imported)
    """A request to ``node``'s coordinator through the broker's request handling, which
    answers a handler's failure with the API's error response (Kafka's handleError)."""
    apis = _GroupApisOnly(
        GroupApis(node.groups, metadata_knowing({}), None, offsets_replication_factor=1)
    )
    server = SocketServer("127.0.0.1", 0, lambda: cast(Any, apis))

    def asked(api: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        frame = bytearray(encode_request(api, version, 7, "client", body))[4:]
        out = server._handle(frame, ("127.0.0.1", 1))
        assert out
        return decode_response(api, version, bytes(out)[4:])[1]

    try:
        yield asked
    finally:
        server.stop()


@pytest.mark.parametrize("version", [5, 7])
def test_a_pending_member_joining_with_an_instance_id_is_answered_unknown_server_error(
    node: Node,  # noqa: F811 (the fixture imported)
    ask: Ask,
    version: int,
) -> None:
    """Kafka 2.8's doJoinGroup throws IllegalStateException for a member told
    MEMBER_ID_REQUIRED (a pending member, only ever a dynamic one) that joins naming a
    group instance id, before it checks fencing; KafkaApis answers the request with
    JoinGroupRequest.getErrorResponse: UNKNOWN_SERVER_ERROR, no member id, generation -1,
    no protocol (null from v7). The member stays pending: its join without the instance
    id is served."""
    static = ask(ApiKey.JOIN_GROUP, version, _join_request(group_id=G0, group_instance_id="i"))
    assert static["error_code"] == ErrorCode.NONE
    told = ask(ApiKey.JOIN_GROUP, version, _join_request(group_id=G0))
    assert told["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    pending = told["member_id"]
    # A new instance id, and one a static member holds (Kafka checks the pending member
    # first: not FENCED_INSTANCE_ID).
    for instance_id in ("j", "i"):
        failed = ask(
            ApiKey.JOIN_GROUP,
            version,
            _join_request(group_id=G0, member_id=pending, group_instance_id=instance_id),
        )
        assert failed["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert (failed["member_id"], failed["generation_id"], failed["leader"]) == ("", -1, "")
        assert failed["members"] == []
        assert failed["protocol_name"] == (None if version >= 7 else "")
    assert node.groups._groups[G0].pending_members.keys() == {pending}
    assert member_ids(node.groups, G0) == {static["member_id"]}
    joined = Call(
        lambda: ask(ApiKey.JOIN_GROUP, version, _join_request(group_id=G0, member_id=pending))
    )
    wait_until("the pending member joined", lambda: len(member_ids(node.groups, G0)) == 2)
    assert not node.groups._groups[G0].pending_members
    # (The static member rejoins: the phase ends and the held join is answered.)
    again = _join_request(group_id=G0, member_id=static["member_id"], group_instance_id="i")
    assert ask(ApiKey.JOIN_GROUP, version, again)["error_code"] == ErrorCode.NONE
    assert joined.answer()["error_code"] == ErrorCode.NONE


def test_a_pending_member_leaving_with_an_instance_id_fails_the_leave_group(
    node: Node,  # noqa: F811 (the fixture imported)
    ask: Ask,
) -> None:
    """Kafka 2.8's handleLeaveGroup throws IllegalStateException for a pending member
    named with a group instance id, from within its map over the members: the members
    named before it have left, the response is LeaveGroupRequest.getErrorResponse
    (UNKNOWN_SERVER_ERROR, no members) and those named after it stay."""
    a = ask(ApiKey.JOIN_GROUP, 5, _join_request(group_id=G0, group_instance_id="a"))
    b = Call(lambda: ask(ApiKey.JOIN_GROUP, 5, _join_request(group_id=G0, group_instance_id="b")))
    wait_until("b in the group", lambda: len(member_ids(node.groups, G0)) == 2)
    pending = ask(ApiKey.JOIN_GROUP, 5, _join_request(group_id=G0))["member_id"]
    members = [
        {"member_id": a["member_id"], "group_instance_id": "a"},
        {"member_id": pending, "group_instance_id": "p"},
        {"member_id": "", "group_instance_id": "b"},
    ]
    for version in (3, 4):
        failed = ask(ApiKey.LEAVE_GROUP, version, {"group_id": G0, "members": members})
        assert failed["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
        assert failed["members"] == []
    group = node.groups._groups[G0]
    assert set(group.static_members) == {"b"}
    assert group.pending_members.keys() == {pending}
    # b's join is still held: the join phase waits for the pending member, whose leave
    # (without an instance id) ends it.
    assert b.waiting(0.05)
    left = ask(ApiKey.LEAVE_GROUP, 4, {"group_id": G0, "members": [{"member_id": pending}]})
    assert [m["error_code"] for m in left["members"]] == [ErrorCode.NONE]
    assert b.answer()["error_code"] == ErrorCode.NONE


# --- a partition named twice in one OffsetCommit -------------------------------------------


def test_an_offset_commit_answers_each_partition_once_and_writes_its_last_offset(
    node: Node,  # noqa: F811 (the fixture imported)
) -> None:
    """Kafka 2.8's handleOffsetCommitRequest collects the partitions in maps (the last
    entry of a partition named twice wins), and OffsetCommitResponse(throttle, Map) lists
    each partition once, under one entry of its topic: a topic named twice, or a
    partition, is not answered twice. An unknown partition named twice too."""
    apis = GroupApis(node.groups, metadata_knowing({"t": 2}), None, offsets_replication_factor=1)

    def partition(index: int, offset: int) -> dict[str, Any]:
        return {"partition_index": index, "committed_offset": offset}

    request = {
        "group_id": G0,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {"name": "t", "partitions": [partition(0, 5), partition(0, 6), partition(9, 1)]},
            {"name": "u", "partitions": [partition(0, 1)]},
            {"name": "t", "partitions": [partition(1, 7), partition(0, 8), partition(9, 2)]},
        ],
    }
    for version in (2, 8):
        body = through_the_wire(ApiKey.OFFSET_COMMIT, version, request)
        answer = answered(ApiKey.OFFSET_COMMIT, version, apis.offset_commit(version, body, {}))
        unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert [
            (t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in answer["topics"]
        ] == [("t", [(0, 0), (9, unknown), (1, 0)]), ("u", [(0, unknown)])]
        fetched = node.groups.fetch_offsets(G0, None)[1]
        assert {tp: value.offset for tp, value in fetched.items() if value} == {
            shell.tp("t", 0): 8,
            shell.tp("t", 1): 7,
        }
