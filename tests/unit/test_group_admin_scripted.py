"""GroupAdmin's requests against scripted brokers, and the edges of `zkctl groups`' output
that tests/unit/test_group_admin.py leaves open: the log end offsets (ListOffsets latest,
read uncommitted, from each partition's leader, as Kafka 2.8's ConsumerGroupService
getLogEndOffsets), the committed offsets (collectGroupOffsets), a group the coordinator
does not know (Dead: no offsets read), ListGroups asked of every broker, and the notes and
JSON of the describe views."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from admin.errors import AdminError
from admin.group_admin import (
    Coordinator,
    GroupAdmin,
    GroupDescription,
    MalformedAssignmentError,
    Member,
    decode_assignment,
    encode_assignment,
    members_of,
    offset_rows,
)
from tests.unit.test_cli_args import run
from tests.unit.test_group_admin import BOOT, _Conn, _described_as, _scripted
from wire.api import ApiKey
from wire.client import KafkaConnectionError
from wire.errors import ErrorCode
from zkctl.group_commands import assignment_text, describe_json, notes, offsets_lines
from zkdata.znodes import TopicPartition as TP

COORD = Coordinator(1, "b", 1)

# --- assignments -------------------------------------------------------------------------------


def test_a_negative_partition_is_refused_even_minus_one() -> None:
    data = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">iii", 1, -1, -1)
    with pytest.raises(MalformedAssignmentError, match="partition -1 of 't' is negative"):
        decode_assignment(data)


def test_an_array_one_byte_short_is_refused_by_its_length() -> None:
    # Two partitions need 8 bytes; 7 are left: refused before reading any.
    data = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 2) + b"\x00" * 7
    with pytest.raises(MalformedAssignmentError, match="2 items cannot fit in the 7 bytes left"):
        decode_assignment(data)


def test_an_empty_assignment_of_another_protocol_type_is_no_partitions() -> None:
    """A member the coordinator sent no assignment yet has none, whatever the group's
    protocol type (it is not unreadable)."""
    (m,) = members_of("connect", [{"member_id": "w", "member_assignment": b""}])
    assert (m.partitions, m.problem) == ((), None)


# --- log end offsets ---------------------------------------------------------------------------


def test_log_end_offsets_come_from_each_leader_with_retries_for_a_moving_one() -> None:
    """ListOffsets latest (read uncommitted) from each partition's leader; a leader that is
    moving (NOT_LEADER_OR_FOLLOWER), or no live leader, or a partition left out of the
    answer is tried again with fresh metadata; any other error, an offset of -1 or a
    partition that is not in the metadata (a topic with an error is not) is final."""
    asked: list[dict[str, Any]] = []
    moving = [int(ErrorCode.NOT_LEADER_OR_FOLLOWER)]

    def handle(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.METADATA:
            t_parts = [
                {"partition_index": 0, "leader_id": 1},
                {"partition_index": 1, "leader_id": 7},  # not a live broker
                {"partition_index": 2, "leader_id": 1},
                {"partition_index": 3, "leader_id": 1},
                {"partition_index": 4, "leader_id": 1},
                {"partition_index": 5, "leader_id": 1},
            ]
            return {
                "brokers": [{"node_id": 1, "host": "b", "port": 1}],
                "topics": [
                    {"error_code": 0, "name": "t", "partitions": t_parts},
                    {
                        "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        "name": "gone",
                        "partitions": [{"partition_index": 0, "leader_id": 1}],
                    },
                ],
            }
        assert api == ApiKey.LIST_OFFSETS
        asked.append(body)
        answers = []
        for p in body["topics"][0]["partitions"]:
            i = p["partition_index"]
            if i == 0:
                answers.append({"partition_index": 0, "error_code": 0, "offset": 42})
            elif i == 2:
                code = moving.pop() if moving else 0
                answers.append({"partition_index": 2, "error_code": code, "offset": 17})
            elif i == 4:
                answers.append({"partition_index": 4, "error_code": 0, "offset": -1})
            elif i == 5:
                code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                answers.append({"partition_index": 5, "error_code": code, "offset": -1})
            # 3: left out of every answer
        return {"topics": [{"name": "t", "partitions": answers}]}

    admin, slept = _scripted({("b", 1): handle})
    wanted = [TP("t", i) for i in range(6)] + [TP("gone", 0)]
    found, warnings = admin.log_end_offsets(wanted)
    assert found == {
        TP("t", 0): 42,
        TP("t", 1): None,
        TP("t", 2): 17,
        TP("t", 3): None,
        TP("t", 4): None,
        TP("t", 5): None,
        TP("gone", 0): None,
    }
    assert warnings == [
        "log end offset unknown for gone-0: not in the brokers' metadata;"
        " t-1: no live leader (leader 7);"
        " t-3: leader 1 did not answer for it;"
        " t-4: NONE from leader 1;"
        " t-5: UNKNOWN_SERVER_ERROR from leader 1"
    ]
    assert slept == [0.2, 0.4, 0.8]  # t-1 and t-3 pending to the last of 4 tries
    first, second, *rest = (
        sorted(p["partition_index"] for p in b["topics"][0]["partitions"]) for b in asked
    )
    assert first == [0, 2, 3, 4, 5]
    assert second == [2, 3]
    assert rest == [[3], [3]]
    for body in asked:
        assert (body["isolation_level"], body["replica_id"]) == (0, -1)
        assert {p["timestamp"] for p in body["topics"][0]["partitions"]} == {-1}


# --- describing --------------------------------------------------------------------------------


def _coordinator(
    *,
    describe_code: int = 0,
    state: str = "Stable",
    find_codes: list[int] | None = None,
    offsets: list[dict[str, Any]] | None = None,
    named: str | None = None,
) -> Any:
    find = list(find_codes or [])
    fetched: list[str] = []

    def handle(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.FIND_COORDINATOR:
            code = find.pop(0) if find else 0
            return {"error_code": code, "node_id": 1, "host": "b", "port": 1}
        if api == ApiKey.DESCRIBE_GROUPS:
            group: dict[str, Any] = {
                "error_code": describe_code,
                "group_id": named or body["groups"][0],
                "group_state": state,
                "protocol_type": "consumer",
                "protocol_data": "range",
                "members": [],
            }
            return {"groups": [group]}
        if api == ApiKey.OFFSET_FETCH:
            fetched.append(body["group_id"])
            return {"error_code": 0, "topics": [{"name": "t", "partitions": offsets or []}]}
        if api == ApiKey.METADATA:
            brokers = [{"node_id": 1, "host": "b", "port": 1}]
            parts = [{"partition_index": i, "leader_id": 1} for i in range(3)]
            return {
                "brokers": brokers,
                "topics": [{"error_code": 0, "name": "t", "partitions": parts}],
            }
        if api == ApiKey.LIST_OFFSETS:
            ps = [
                {"partition_index": p["partition_index"], "error_code": 0, "offset": 50}
                for p in body["topics"][0]["partitions"]
            ]
            return {"topics": [{"name": "t", "partitions": ps}]}
        raise AssertionError(api)

    handle.fetched = fetched  # type: ignore[attr-defined]
    return handle


@pytest.mark.parametrize(("code", "state"), [(int(ErrorCode.GROUP_ID_NOT_FOUND), ""), (0, "Dead")])
def test_a_group_the_coordinator_does_not_know_is_dead_and_no_offsets_are_read(
    code: int, state: str
) -> None:
    """DescribeGroups' Dead (or GROUP_ID_NOT_FOUND, newer brokers' word for it): no
    members, and no OffsetFetch (Kafka 2.8: "Consumer group 'G' does not exist")."""
    handle = _coordinator(describe_code=code, state=state)
    admin, _ = _scripted({("b", 1): handle})
    d = admin.describe("g")
    assert (d.state, d.exists, d.members, d.rows) == ("Dead", False, (), ())
    assert handle.fetched == []


def test_committed_offsets_leave_out_no_commit_and_warn_of_errors() -> None:
    """OffsetFetch's -1 is no commit (no row); a partition's error is a warning."""
    offsets = [
        {"partition_index": 0, "error_code": 0, "committed_offset": 30},
        {"partition_index": 1, "error_code": 0, "committed_offset": -1},
        {
            "partition_index": 2,
            "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT),
            "committed_offset": 5,
        },
    ]
    admin, _ = _scripted({("b", 1): _coordinator(offsets=offsets)})
    d = admin.describe("g")
    assert [(r.partition, r.committed, r.log_end, r.lag) for r in d.rows] == [
        (TP("t", 0), 30, 50, 20)
    ]
    assert d.warnings == ("committed offset unknown for t-2: UNSTABLE_OFFSET_COMMIT",)


def test_find_coordinator_is_asked_again_while_there_is_none() -> None:
    codes = [int(ErrorCode.COORDINATOR_NOT_AVAILABLE), int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]
    admin, slept = _scripted({("b", 1): _coordinator(find_codes=codes)})
    d = admin.describe("g", offsets=False)
    assert (d.state, d.coordinator) == ("Stable", COORD)
    assert slept == [0.2, 0.4]


def test_an_answer_about_another_group_is_an_error() -> None:
    admin, _ = _scripted({("b", 1): _coordinator(named="other")})
    with pytest.raises(AdminError, match="the answer does not mention group 'g'"):
        admin.describe("g", offsets=False)


# --- listing -----------------------------------------------------------------------------------


def test_list_asks_every_broker_once_each_group_and_says_which_failed() -> None:
    """Each live broker's ListGroups (a loading coordinator asked again); a group two
    brokers list is listed once; a broker that refuses or cannot be reached is a
    failure, the others' groups still listed."""
    loading = [int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]

    def groups(*ids: str) -> list[dict[str, Any]]:
        return [{"group_id": g, "group_state": "Stable", "protocol_type": "consumer"} for g in ids]

    def first(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.METADATA:
            brokers = [{"node_id": n, "host": "b", "port": n} for n in (4, 3, 2, 1)]
            return {"brokers": brokers, "topics": []}
        assert api == ApiKey.LIST_GROUPS
        code = loading.pop() if loading else 0
        return {"error_code": code, "groups": groups("b", "dup")}

    def second(api: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": 0, "groups": groups("dup", "a")}

    def refusing(api: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "groups": groups("x")}

    admin, slept = _scripted({("b", 1): first, ("b", 2): second, ("b", 3): refusing})
    listing = admin.list_groups()
    assert [(g.group_id, g.state, g.coordinator) for g in listing.groups] == [
        ("a", "Stable", 2),
        ("b", "Stable", 1),
        ("dup", "Stable", 1),
    ]
    assert listing.failures == [
        "broker 3 (b:3): ListGroups refused: UNKNOWN_SERVER_ERROR",
        "broker 4 (b:4): no answer after 4 tries (cannot connect to b:4)",
    ]
    assert slept == [0.2, 0.2, 0.4, 0.8]


def test_a_broker_that_fails_to_list_is_the_commands_error_after_the_others(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def connect(self: GroupAdmin, endpoint: tuple[str, int]) -> _Conn:
        def handle(api: int, body: dict[str, Any]) -> dict[str, Any]:
            if api == ApiKey.METADATA:
                brokers = [{"node_id": n, "host": "b", "port": n} for n in (1, 2)]
                return {"brokers": brokers, "topics": []}
            if endpoint[1] == 2:
                return {"error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "groups": []}
            return {"error_code": 0, "groups": [{"group_id": "g", "group_state": "Empty"}]}

        return _Conn(handle)

    monkeypatch.setattr(GroupAdmin, "_connect", connect)
    code, out, err = run([*BOOT, "--list"], capsys)
    assert (code, out) == (1, "g\n")
    assert err == (
        "zkctl: error: ListGroups failed at broker 2 (b:2): ListGroups refused:"
        " UNKNOWN_SERVER_ERROR: the groups coordinated there are not listed\n"
    )


# --- the command's output ----------------------------------------------------------------------


def _group(**fields: Any) -> GroupDescription:
    base: dict[str, Any] = {
        "group_id": "g",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": "range",
        "coordinator": COORD,
        "members": (),
    }
    base.update(fields)
    return GroupDescription(**base)


def test_a_member_with_no_ids_shows_dashes_in_the_offsets_table() -> None:
    m = Member("", "", "", (TP("t", 0),))
    d = _group(members=(m,), rows=offset_rows([m], {TP("t", 0): 3}, {TP("t", 0): 5}))
    assert offsets_lines(d)[1].split() == ["g", "t", "0", "3", "5", "2", "-", "-", "-"]


def test_notes_say_a_rebalance_of_either_kind_and_nothing_of_a_dead_group() -> None:
    for state in ("PreparingRebalance", "CompletingRebalance"):
        (note,) = notes(_group(state=state))
        assert note.startswith(f"consumer group 'g' is rebalancing ({state})")
    assert notes(_group(state="Dead", warnings=("x",))) == []


def test_json_has_the_lag_and_the_warnings() -> None:
    rows = offset_rows([], {TP("t", 0): 3}, {TP("t", 0): 5})
    doc = describe_json(_group(rows=rows, warnings=("w",)), offsets=True)
    assert (doc["offsets"][0]["current_offset"], doc["offsets"][0]["lag"]) == (3, 2)
    assert doc["assignment_strategy"] == "range"
    assert doc["warnings"] == ["w"]


def test_several_dead_groups_are_named_in_one_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _described_as(monkeypatch)
    for given in (["a", "b"], ["b", "a"]):  # by group id, as the tables (TreeMap)
        argv = [arg for g in given for arg in ("--group", g)]
        code, out, err = run([*BOOT, "--describe", *argv], capsys)
        assert (code, out) == (1, "")
        assert err == "zkctl: error: consumer groups 'a', 'b' do not exist\n"


def test_describe_flags_with_list_are_named_together(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run([*BOOT, "--list", "--group", "g", "--members"], capsys)
    assert code == 2
    assert "--group, --members go with --describe, not --list" in err


def test_describe_state_reads_no_offsets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = _described_as(monkeypatch, _group())
    code, out, _ = run([*BOOT, "--describe", "--group", "g", "--state", "--json"], capsys)
    assert code == 0
    assert asked == [("g", False)]
    assert json.loads(out)["groups"][0]["state"] == "Stable"


def test_a_member_with_no_partition_has_no_row_in_the_offsets_view() -> None:
    """Kafka 2.8's collectGroupsOffsets keeps only the members with partitions
    (members.filter(!_.assignment.topicPartitions.isEmpty)): a member with none assigned
    (more consumers than partitions) shows in --members, not in the offsets table. A
    member whose assignment is unreadable keeps its row (and its warning)."""
    busy = Member("a", "ca", "h", (TP("t", 0),))
    idle = Member("b", "cb", "h", ())
    broken = Member("c", "cc", "h", None, "version -1 is negative")
    rows = offset_rows([busy, idle, broken], {TP("t", 0): 1}, {TP("t", 0): 2})
    assert [(r.partition, r.member) for r in rows] == [(TP("t", 0), busy), (None, broken)]
    # A Stable group whose only member has no partition and no commit: no table at all.
    assert offset_rows([idle], {}, {}) == ()


def test_describe_reads_every_partition_from_the_coordinator_found_and_each_leader() -> None:
    """The coordinator FindCoordinator names (not the bootstrap broker) answers
    DescribeGroups and OffsetFetch (all topics; a loading coordinator asked again); the
    log end offsets are read for the assigned partitions as well as the committed ones,
    each leader's UNKNOWN_TOPIC_OR_PARTITION or an unreachable leader tried again; what
    stays unknown is the description's warning."""
    loading = [int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)]
    fetches: list[dict[str, Any]] = []
    unknown = [int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    unreachable = [True]

    def bootstrap(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.FIND_COORDINATOR:
            return {"error_code": 0, "node_id": 2, "host": "b", "port": 2}
        assert api == ApiKey.METADATA
        parts = [
            {"partition_index": 0, "leader_id": 2},
            {"partition_index": 1, "leader_id": 3},
        ]
        return {
            "brokers": [{"node_id": n, "host": "b", "port": n} for n in (1, 2, 3)],
            "topics": [{"error_code": 0, "name": "t", "partitions": parts}],
        }

    def coordinator(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.DESCRIBE_GROUPS:
            member = {
                "member_id": "m",
                "client_id": "c",
                "client_host": "h",
                "member_assignment": encode_assignment([TP("t", 0), TP("t", 1)]),
            }
            group: dict[str, Any] = {
                "error_code": 0,
                "group_id": "g",
                "group_state": "Stable",
                "protocol_type": "consumer",
                "protocol_data": "sticky",
                "members": [member],
            }
            return {"groups": [group]}
        if api == ApiKey.OFFSET_FETCH:
            fetches.append(body)
            offsets = [
                {"partition_index": 0, "error_code": 0, "committed_offset": 5},
                {"partition_index": 2, "error_code": 0, "committed_offset": 1},
            ]
            code = loading.pop() if loading else 0
            return {"error_code": code, "topics": [{"name": "t", "partitions": offsets}]}
        assert api == ApiKey.LIST_OFFSETS
        code = unknown.pop() if unknown else 0
        answer = {"partition_index": 0, "error_code": code, "offset": 9}
        return {"topics": [{"name": "t", "partitions": [answer]}]}

    def leader3(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if unreachable and unreachable.pop():
            raise KafkaConnectionError("connection reset")
        answer = {"partition_index": 1, "error_code": 0, "offset": 4}
        return {"topics": [{"name": "t", "partitions": [answer]}]}

    admin, slept = _scripted({("b", 1): bootstrap, ("b", 2): coordinator, ("b", 3): leader3})
    d = admin.describe("g")
    assert (d.coordinator, d.protocol) == (Coordinator(2, "b", 2), "sticky")
    assert [(r.partition, r.committed, r.log_end, r.lag) for r in d.rows] == [
        (TP("t", 0), 5, 9, 4),
        (TP("t", 1), None, 4, None),  # assigned, never committed: its end read too
        (TP("t", 2), 1, None, None),
    ]
    assert d.warnings == ("log end offset unknown for t-2: not in the brokers' metadata",)
    assert [(f["group_id"], f["topics"]) for f in fetches] == [("g", None), ("g", None)]
    assert slept == [0.2, 0.2]  # OffsetFetch's retry, then the log end offsets' one


@pytest.mark.parametrize("api", [ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH])
def test_a_coordinator_refusal_is_an_error_at_once(api: ApiKey) -> None:
    refused = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    handle = _coordinator()

    def refusing(asked: int, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = handle(asked, body)
        if asked == api:
            answer["error_code"] = refused
        return answer

    admin, slept = _scripted({("b", 1): refusing})
    expected = (
        "FindCoordinator for group 'g' refused"
        if api == ApiKey.FIND_COORDINATOR
        else "OFFSET_FETCH for group 'g' refused"
    )
    with pytest.raises(AdminError, match=f"{expected}: GROUP_AUTHORIZATION_FAILED"):
        admin.describe("g")
    assert slept == []


def test_each_groups_notes_are_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _described_as(
        monkeypatch,
        _group(group_id="a", state="Empty"),
        _group(group_id="b", state="Empty"),
    )
    code, out, err = run([*BOOT, "--describe", "--group", "a", "--group", "b"], capsys)
    assert (code, out) == (0, "")
    assert err.splitlines() == [
        "zkctl: warning: consumer group 'a' has no active members",
        "zkctl: warning: consumer group 'b' has no active members",
    ]


def test_a_members_assignment_lists_its_topics_sorted_with_a_comma_and_space() -> None:
    """Kafka 2.8's printMembers (--verbose): each topic's partitions sorted in
    parentheses, the topics sorted and joined by ", " (mkString(", "))."""
    assert assignment_text([TP("b", 0), TP("a", 2), TP("a", 0)]) == "a(0,2), b(0)"
    assert assignment_text([TP("orders", 1)]) == "orders(1)"


@pytest.mark.parametrize("view", [[], ["--members"], ["--state"]])
def test_groups_are_printed_sorted_by_id_whatever_the_order_given(
    view: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's describeGroups collects the groups into a TreeMap (collectGroupsOffsets,
    collectGroupsMembers, collectGroupsState) and prints them in its order: by group id."""
    m = Member("m", "c", "h", (TP("t", 0),))
    rows = offset_rows([m], {TP("t", 0): 1}, {TP("t", 0): 1})
    _described_as(
        monkeypatch,
        *(_group(group_id=g, state="Empty", members=(m,), rows=rows) for g in ("b", "a")),
    )
    code, out, err = run([*BOOT, "--describe", "--group", "b", "--group", "a", *view], capsys)
    assert code == 0
    firsts = [line.split()[0] for line in out.splitlines() if line]
    assert [g for g in firsts if g != "GROUP"] == ["a", "b"]
    assert [line.split("'")[1] for line in err.splitlines()] == ["a", "b"]


def test_groups_are_sorted_as_java_compares_strings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """String.compareTo compares UTF-16 code units: a character past U+FFFF (a surrogate
    pair, from U+D800) sorts before U+FF61, which a code point order puts first."""
    high, astral = "\uff61", "\U0001f600"
    _described_as(monkeypatch, _group(group_id=high), _group(group_id=astral))
    code, out, _ = run([*BOOT, "--describe", "--group", high, "--group", astral, "--state"], capsys)
    assert code == 0
    firsts = [line.split()[0] for line in out.splitlines() if line]
    assert [g for g in firsts if g != "GROUP"] == [astral, high]


def test_list_leaves_out_the_groups_of_another_protocol_type() -> None:
    """Kafka 2.8's KafkaAdminClient.listConsumerGroups (maybeAddConsumerGroup) keeps the
    groups whose protocol type is "consumer" or empty (a simple consumer group's, which
    only commits offsets); a Kafka Connect cluster's group ("connect") is not listed."""

    def handle(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.METADATA:
            return {"brokers": [{"node_id": 1, "host": "b", "port": 1}], "topics": []}
        groups = [
            {"group_id": "billing", "group_state": "Stable", "protocol_type": "consumer"},
            {"group_id": "connect-cluster", "group_state": "Stable", "protocol_type": "connect"},
            {"group_id": "simple", "group_state": "Empty", "protocol_type": ""},
        ]
        return {"error_code": 0, "groups": groups}

    admin, _ = _scripted({("b", 1): handle})
    listing = admin.list_groups()
    assert [(g.group_id, g.protocol_type) for g in listing.groups] == [
        ("billing", "consumer"),
        ("simple", ""),
    ]
