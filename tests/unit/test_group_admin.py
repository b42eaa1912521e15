"""`zkctl groups`' own logic, without brokers: ConsumerProtocol assignments decoded (and
malformed ones refused, never crashing), the rows and tables of kafka-consumer-groups.sh,
the coordinator's retries against scripted answers, and the argument errors. The
requests themselves are tested against real brokers in
tests/integration/test_group_cli.py."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from types import TracebackType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from admin.errors import AdminError
from admin.group_admin import (
    ConsumerAssignment,
    Coordinator,
    GroupAdmin,
    GroupDescription,
    GroupListing,
    ListedGroup,
    MalformedAssignmentError,
    Member,
    backoff_s,
    decode_assignment,
    encode_assignment,
    members_of,
    offset_rows,
)
from tests.unit.test_cli_args import run
from wire.api import ApiKey
from wire.client import KafkaConnectionError
from wire.errors import ErrorCode
from zkctl import cli
from zkctl.group_commands import (
    assignment_text,
    checked_groups,
    describe_json,
    describe_lines,
    list_json,
    list_lines,
    members_lines,
    notes,
    offsets_lines,
    table,
)
from zkdata.znodes import TopicPartition as TP

# --- assignments ----------------------------------------------------------------------------


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


def test_assignments_of_every_version_decode() -> None:
    tps = [TP("orders", 2), TP("orders", 0), TP("audit", 1)]
    for version in range(4):
        for user_data in (None, b"", b"\x00\x01state"):
            got = decode_assignment(encode_assignment(tps, version, user_data))
            assert got == ConsumerAssignment(version, tuple(sorted(tps)), user_data)
    # The bytes as a Java consumer writes them, spelled out: v1, orders [0, 1], no data.
    java = (
        struct.pack(">hi", 1, 1)
        + _string(b"orders")
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">i", -1)
    )
    assert decode_assignment(java) == ConsumerAssignment(
        1, (TP("orders", 0), TP("orders", 1)), None
    )
    assert decode_assignment(memoryview(java)) == decode_assignment(bytearray(java))


def test_an_empty_assignment_is_no_partitions_and_duplicates_count_once() -> None:
    assert decode_assignment(b"") == ConsumerAssignment(0, (), None)
    assert decode_assignment(encode_assignment([])) == ConsumerAssignment(0, (), None)
    twice = encode_assignment([TP("t", 1), TP("t", 1), TP("t", 0)])
    assert decode_assignment(twice).partitions == (TP("t", 0), TP("t", 1))


def test_later_versions_may_carry_fields_after_the_known_ones() -> None:
    v4 = encode_assignment([TP("t", 0)], version=4, user_data=b"u") + b"\x00\x07future"
    assert decode_assignment(v4) == ConsumerAssignment(4, (TP("t", 0),), b"u")
    v3 = encode_assignment([TP("t", 0)], version=3) + b"\x00"
    with pytest.raises(MalformedAssignmentError, match="1 bytes after a version 3"):
        decode_assignment(v3)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00", "version: needs 2 bytes"),
        (struct.pack(">hi", -1, 0) + struct.pack(">i", -1), "version -1 is negative"),
        (struct.pack(">hi", 0, -1) + struct.pack(">i", -1), "length -1 .*not nullable"),
        (struct.pack(">hi", 0, 2**31 - 1), "items cannot fit"),
        (struct.pack(">hih", 0, 1, -1) + struct.pack(">ii", 0, -1), "topic 0: length -1"),
        (struct.pack(">hi", 0, 1) + _string(b"") + struct.pack(">ii", 0, -1), "empty name"),
        (struct.pack(">hi", 0, 1) + _string(b"\xff\xfe") + struct.pack(">ii", 0, -1), "UTF-8"),
        (
            struct.pack(">hi", 0, 1) + _string(b"t") + struct.pack(">iii", 1, -3, -1),
            "partition -3 of 't' is negative",
        ),
        (
            struct.pack(">hi", 0, 1) + _string(b"t") + struct.pack(">ii", 100, 0),
            "100 items cannot fit",
        ),
        (struct.pack(">hii", 0, 0, -2), "user data: length -2"),
        (struct.pack(">hii", 0, 0, 5) + b"abc", "user data: needs 5 bytes"),
        (b"not an assignment at all", "assigned partitions: .* items cannot fit"),
    ],
)
def test_malformed_assignments_are_refused_with_a_reason(data: bytes, why: str) -> None:
    with pytest.raises(MalformedAssignmentError, match=why):
        decode_assignment(data)


def test_every_truncation_of_an_assignment_is_refused() -> None:
    whole = encode_assignment([TP("orders", 0), TP("orders", 3), TP("audit", 1)], 2, b"data")
    for end in range(1, len(whole)):
        with pytest.raises(MalformedAssignmentError):
            decode_assignment(whole[:end])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_are_refused_never_crash(data: bytes) -> None:
    try:
        got = decode_assignment(data)
    except MalformedAssignmentError:
        return
    assert all(tp.partition >= 0 and tp.topic for tp in got.partitions)


# --- members and rows -----------------------------------------------------------------------


def _described(member_id: str, assignment: bytes) -> dict[str, Any]:
    return {
        "member_id": member_id,
        "client_id": f"client-{member_id}",
        "client_host": "127.0.0.1",
        "member_assignment": assignment,
    }


def test_members_assignments_are_decoded_or_marked_unreadable() -> None:
    good = encode_assignment([TP("t", 1), TP("t", 0)])
    got = members_of(
        "consumer",
        [_described("b", good), _described("a", b""), _described("c", b"\x00\x00\x7f")],
    )
    assert [m.member_id for m in got] == ["a", "b", "c"]
    assert got[0].partitions == ()
    assert got[0].problem is None
    assert got[1] == Member("b", "client-b", "127.0.0.1", (TP("t", 0), TP("t", 1)))
    assert got[2].partitions is None
    assert got[2].problem == "assigned partitions length: needs 4 bytes at offset 2, 1 left"
    connect = members_of("connect", [_described("w", good)])
    assert connect[0].partitions is None
    assert connect[0].problem == "protocol type 'connect', not 'consumer'"


def test_rows_pair_partitions_with_commits_and_members() -> None:
    a = Member("a", "ca", "h1", (TP("t", 0), TP("t", 2)))
    b = Member("b", "cb", "h2", (TP("t", 1),))
    idle = Member("c", "cc", "h3", ())
    broken = Member("d", "cd", "h4", None, "version -1 is negative")
    committed = {TP("t", 0): 5, TP("t", 1): 7, TP("u", 0): 3}
    ends = {TP("t", 0): 9, TP("t", 1): 7, TP("t", 2): 4, TP("u", 0): None}
    rows = offset_rows([a, b, idle, broken], committed, ends)
    assert [(r.partition, r.committed, r.log_end, r.lag, r.member) for r in rows] == [
        (TP("t", 0), 5, 9, 4, a),
        (TP("t", 1), 7, 7, 0, b),
        (TP("t", 2), None, 4, None, a),  # assigned, never committed
        (TP("u", 0), 3, None, None, None),  # committed, no member has it; end unknown
        (None, None, None, None, broken),  # idle has none: no row (Kafka 2.8)
    ]


# --- rendering ------------------------------------------------------------------------------

COORD = Coordinator(2, "127.0.0.1", 40102)


def _description(**fields: Any) -> GroupDescription:
    a = Member("consumer-1-aaaa", "rdkafka", "127.0.0.1", (TP("orders", 0), TP("orders", 1)))
    b = Member("consumer-2-bbbb", "rdkafka", "127.0.0.1", None, "version -1 is negative")
    committed = {TP("orders", 0): 20, TP("orders", 2): 15}
    ends = {TP("orders", 0): 25, TP("orders", 1): 10, TP("orders", 2): 15}
    base: dict[str, Any] = {
        "group_id": "billing",
        "state": "Stable",
        "protocol_type": "consumer",
        "protocol": "range",
        "coordinator": COORD,
        "members": (a, b),
        "rows": offset_rows([a, b], committed, ends),
    }
    base.update(fields)
    return GroupDescription(**base)


def test_table_columns_are_as_wide_as_their_widest_cell() -> None:
    assert table(("A", "BB"), [("xxx", "y"), ("z", "")], (2,)) == ["A   BB", "xxx y", "z"]


def test_the_offsets_table_is_kafka_consumer_groups_sh() -> None:
    d = _description()
    assert offsets_lines(d) == [
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG"
        "             CONSUMER-ID     HOST            CLIENT-ID",
        "billing         orders          0          20              25              5"
        "               consumer-1-aaaa 127.0.0.1       rdkafka",
        "billing         orders          1          -               10              -"
        "               consumer-1-aaaa 127.0.0.1       rdkafka",
        "billing         orders          2          15              15              0"
        "               -               -               -",
        "billing         -               -          -               -               -"
        "               consumer-2-bbbb 127.0.0.1       rdkafka",
    ]
    # The offsets alone, as Kafka 2.8's describeGroups prints them (the state: --state).
    assert describe_lines([d], view="offsets") == offsets_lines(d)
    assert describe_lines([d], view="state") == [
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS",
        "billing         127.0.0.1:40102 (2)       range                Stable          2",
    ]


def test_the_members_table_shows_each_members_partitions() -> None:
    d = _description()
    assert members_lines(d) == [
        "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS  ASSIGNMENT",
        "billing         consumer-1-aaaa 127.0.0.1       rdkafka         2            orders(0,1)",
        "billing         consumer-2-bbbb 127.0.0.1       rdkafka         -            (unreadable)",
    ]
    assert describe_lines([d], view="members") == members_lines(d)
    assert assignment_text([TP("a", 2), TP("b", 0), TP("a", 0)]) == "a(0,2), b(0)"
    assert assignment_text(()) == "-"


def test_the_members_table_shows_instance_ids_when_a_member_is_static() -> None:
    static = Member(
        "s-1111", "rdkafka", "127.0.0.1", (TP("orders", 2),), group_instance_id="host-7"
    )
    d = _description(members=(*_description().members, static))
    assert members_lines(d) == [
        "GROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID"
        "       #PARTITIONS  ASSIGNMENT",
        "billing         consumer-1-aaaa -                 127.0.0.1       rdkafka"
        "         2            orders(0,1)",
        "billing         consumer-2-bbbb -                 127.0.0.1       rdkafka"
        "         -            (unreadable)",
        "billing         s-1111          host-7            127.0.0.1       rdkafka"
        "         1            orders(2)",
    ]
    members = describe_json(d, offsets=False)["members"]
    assert [m["group_instance_id"] for m in members] == [None, None, "host-7"]
    described = [{**_described("s", b""), "group_instance_id": "host-7"}, _described("d", b"")]
    assert [m.group_instance_id for m in members_of("consumer", described)] == [None, "host-7"]


def test_dead_groups_and_empty_tables_are_left_out() -> None:
    dead = _description(group_id="gone", state="Dead", members=(), rows=())
    empty = _description(group_id="idle", state="Empty", members=(), rows=())
    lines = describe_lines([dead, empty, _description()], view="state")
    assert not any(line.startswith("gone") for line in lines)
    assert lines[1].startswith("idle ")
    assert lines[2] == ""
    assert describe_lines([dead, empty, _description()], view="offsets") == offsets_lines(
        _description()
    )
    assert describe_lines([dead, empty], view="members") == []
    assert notes(dead) == []
    assert notes(empty) == ["consumer group 'idle' has no active members"]
    rebalancing = _description(state="PreparingRebalance", warnings=("log end offset unknown",))
    assert notes(rebalancing)[0].startswith("consumer group 'billing' is rebalancing")
    assert notes(rebalancing)[1] == "consumer group 'billing': log end offset unknown"


def test_json_has_null_where_the_table_has_a_dash() -> None:
    doc = describe_json(_description(), offsets=True)
    json.dumps(doc)  # serialisable
    assert doc["coordinator"] == {"id": 2, "host": "127.0.0.1", "port": 40102}
    assert doc["offsets"][1] == {
        "topic": "orders",
        "partition": 1,
        "current_offset": None,
        "log_end_offset": 10,
        "lag": None,
        "consumer_id": "consumer-1-aaaa",
        "host": "127.0.0.1",
        "client_id": "rdkafka",
    }
    assert doc["members"][1]["partitions"] is None
    assert doc["members"][1]["assignment_error"] == "version -1 is negative"
    assert "offsets" not in describe_json(_description(), offsets=False)
    listing = GroupListing([ListedGroup("billing", "Stable", "consumer", 2)], ["broker 3: x"])
    # With --state: Kafka 2.8's printGroupStates table; without: the ids, one a line
    # (listConsumerGroups().foreach(println)).
    assert list_lines(listing, with_states=True) == [
        "GROUP           STATE",
        "billing         Stable",
    ]
    assert list_lines(listing, with_states=False) == ["billing"]
    assert list_json(listing) == {
        "groups": [
            {"group": "billing", "state": "Stable", "protocol_type": "consumer", "coordinator": 2}
        ],
        "errors": ["broker 3: x"],
    }


# --- the coordinator's retries, against scripted answers --------------------------------------

Handler = Callable[[int, dict[str, Any]], dict[str, Any]]


class _Conn:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def request(self, api: int, _version: int, body: dict[str, Any]) -> dict[str, Any]:
        return self.handler(api, body)

    def __enter__(self) -> _Conn:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        pass


def _scripted(brokers: dict[tuple[str, int], Handler]) -> tuple[GroupAdmin, list[float]]:
    slept: list[float] = []
    admin = GroupAdmin([("b", 1)], timeout_s=1, sleep=slept.append)

    def connect(endpoint: tuple[str, int]) -> _Conn:
        if endpoint not in brokers:
            raise KafkaConnectionError(f"cannot connect to {endpoint[0]}:{endpoint[1]}")
        return _Conn(brokers[endpoint])

    admin._connect = connect  # type: ignore[assignment,method-assign]
    return admin, slept


def _coordinator_answers(describe_errors: list[int]) -> Handler:
    """A broker that is its own group's coordinator, describing an empty group with the
    given errors first."""

    def handle(api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.FIND_COORDINATOR:
            return {"error_code": 0, "node_id": 1, "host": "b", "port": 1}
        if api == ApiKey.DESCRIBE_GROUPS:
            code = describe_errors.pop(0) if describe_errors else 0
            return {
                "groups": [
                    {
                        "error_code": code,
                        "group_id": body["groups"][0],
                        "group_state": "Empty",
                        "protocol_type": "consumer",
                        "protocol_data": "",
                        "members": [],
                    }
                ]
            }
        if api == ApiKey.OFFSET_FETCH:
            return {"error_code": 0, "topics": []}
        if api == ApiKey.METADATA:
            return {"brokers": [{"node_id": 1, "host": "b", "port": 1}], "topics": []}
        raise AssertionError(api)

    return handle


def test_a_moving_or_loading_coordinator_is_asked_again_with_a_backoff() -> None:
    moving = [
        int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        int(ErrorCode.NOT_COORDINATOR),
        int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
    ]
    admin, slept = _scripted({("b", 1): _coordinator_answers(moving)})
    d = admin.describe("g")
    assert (d.state, d.coordinator, d.rows) == ("Empty", Coordinator(1, "b", 1), ())
    assert slept == [0.2, 0.4, 0.8]


def test_the_retries_are_bounded() -> None:
    forever = [int(ErrorCode.NOT_COORDINATOR)] * 100
    admin, slept = _scripted({("b", 1): _coordinator_answers(forever)})
    with pytest.raises(AdminError, match=r"group 'g': no answer after 8 tries .*NOT_COORDINATOR"):
        admin.describe("g")
    assert len(slept) == 7
    assert max(slept) == 1.0
    assert [backoff_s(i) for i in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.0]


def test_other_errors_and_unreachable_brokers_fail_at_once() -> None:
    admin, slept = _scripted({("b", 1): _coordinator_answers([int(ErrorCode.INVALID_REQUEST)])})
    with pytest.raises(AdminError, match="DESCRIBE_GROUPS for group 'g' refused: INVALID_REQUEST"):
        admin.describe("g")
    admin, slept = _scripted({})
    with pytest.raises(AdminError, match="no bootstrap server answered"):
        admin.describe("g")
    with pytest.raises(AdminError, match="no bootstrap server answered"):
        admin.list_groups()
    assert slept == []


# --- arguments ------------------------------------------------------------------------------


BOOT = ["groups", "--bootstrap-server", "127.0.0.1:1"]  # nothing listens there


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["groups", "--list"], "the following arguments are required: --bootstrap-server"),
        (BOOT, "one of the arguments --list --describe is required"),
        ([*BOOT, "--list", "--describe"], "not allowed with argument --list"),
        ([*BOOT, "--describe"], "--describe needs --group GROUP (one or more)"),
        ([*BOOT, "--list", "--group", "g"], "--group goes with --describe, not --list"),
        ([*BOOT, "--list", "--members"], "--members goes with --describe, not --list"),
        ([*BOOT, "--describe", "--group", " "], "--group: a group id cannot be empty"),
        # A byte no UTF-8 (surrogateescape), more than a Kafka string holds: EncodeError.
        (
            [*BOOT, "--describe", "--group", "g", "--group", "caf\udce9"],
            "--group: 'caf\\udce9' is not UTF-8 text (Kafka's strings are)",
        ),
        (
            [*BOOT, "--describe", "--group", "\u00e9" * 16384],
            "--group: a group id of 32768 bytes of UTF-8 is longer than the 32767 a Kafka string",
        ),
        ([*BOOT, "--describe", "--group", "g", "--members", "--offsets"], "not allowed with"),
        ([*BOOT, "--describe", "--group", "g", "--state", "--members"], "not allowed with"),
        ([*BOOT, "--describe", "--group", "g", "--offsets", "--state"], "not allowed with"),
        ([*BOOT, "--list", "--timeout", "0"], "argument --timeout: 0 is not positive"),
        (["groups", "--bootstrap-server", "nohost", "--list"], "'nohost' is not host:port"),
    ],
)
def test_bad_arguments_exit_2_with_usage_and_one_error_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: zkctl groups")
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1, err
    assert expected in errors[0]


def test_groups_are_described_once_each_in_the_order_given() -> None:
    args = cli.build_parser().parse_args(
        [*BOOT, "--describe", "--group", "b", "--group", "a", "--group", "b"]
    )
    assert checked_groups(args) == ["b", "a"]


def test_a_group_id_of_as_many_bytes_as_a_kafka_string_holds_is_taken() -> None:
    longest = "\u00e9" * 16383 + "g"  # 32767 bytes of UTF-8
    args = cli.build_parser().parse_args([*BOOT, "--describe", "--group", longest])
    assert checked_groups(args) == [longest]


@pytest.mark.parametrize("mode", [["--list"], ["--describe", "--group", "g", "--json"]])
def test_no_broker_to_ask_exits_1_with_one_line(
    mode: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run([*BOOT, "--timeout", "2", *mode], capsys)
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("zkctl: error: ")
    assert "no bootstrap server answered" in err


def _described_as(
    monkeypatch: pytest.MonkeyPatch, *groups: GroupDescription
) -> list[tuple[str, bool]]:
    """GroupAdmin.describe answering with ``groups`` (any other group Dead); the
    (group, offsets) it was asked for are recorded."""
    by_id = {d.group_id: d for d in groups}
    asked: list[tuple[str, bool]] = []

    def describe(self: GroupAdmin, group_id: str, *, offsets: bool = True) -> GroupDescription:
        asked.append((group_id, offsets))
        dead = _description(group_id=group_id, state="Dead", members=(), rows=())
        return by_id.get(group_id, dead)

    monkeypatch.setattr(GroupAdmin, "describe", describe)
    return asked


def test_describe_prints_the_offsets_alone_and_the_state_only_with_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As Kafka 2.8's ConsumerGroupCommand.describeGroups: --describe, or --describe
    --offsets, prints the offsets table only; --state prints the state table only (without
    reading any offset); --members the members table."""
    d = _description()
    asked = _described_as(monkeypatch, d)
    for view in ([], ["--offsets"]):
        code, out, err = run([*BOOT, "--describe", "--group", "billing", *view], capsys)
        assert (code, err) == (0, "")
        assert out.splitlines() == offsets_lines(d)
    code, out, _ = run([*BOOT, "--describe", "--group", "billing", "--state"], capsys)
    assert code == 0
    assert out.splitlines() == [
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS",
        "billing         127.0.0.1:40102 (2)       range                Stable          2",
    ]
    code, out, _ = run([*BOOT, "--describe", "--group", "billing", "--members"], capsys)
    assert out.splitlines() == members_lines(d)
    assert asked == [("billing", True), ("billing", True), ("billing", False), ("billing", False)]
    code, out, _ = run([*BOOT, "--describe", "--group", "billing", "--state", "--json"], capsys)
    (doc,) = json.loads(out)["groups"]
    assert (doc["state"], "offsets" in doc) == ("Stable", False)


@pytest.mark.parametrize(
    ("view", "stdout"),
    [
        ([], ""),  # no committed offset: no row, no table
        (["--offsets"], ""),
        (["--members"], ""),
        (
            ["--state"],
            "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE"
            "           #MEMBERS\n"
            "idle            127.0.0.1:40102 (2)       -                    Empty"
            "           0\n",
        ),
    ],
)
def test_an_empty_group_is_said_on_stderr_in_every_view(
    view: list[str],
    stdout: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka 2.8 (shouldPrintMemberState) writes "Consumer group 'G' has no active
    members." to stderr for an Empty group, whichever the view, and prints a table only
    where it has rows: the state's always, the offsets' when some are committed, the
    members' never."""
    empty = _description(group_id="idle", state="Empty", protocol="", members=(), rows=())
    _described_as(monkeypatch, empty)
    code, out, err = run([*BOOT, "--describe", "--group", "idle", *view], capsys)
    assert (code, out) == (0, stdout)
    assert err == "zkctl: warning: consumer group 'idle' has no active members\n"


def _brokers_listing(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every GroupAdmin connection answered by two brokers, each the coordinator of some
    of four groups, whose ListGroups keeps the groups in the states asked for (all when
    none are), as a Kafka 2.8 broker does (GroupCoordinator.handleListGroups); each
    ListGroups' states_filter is recorded."""
    coordinated = {
        1: [("billing", "Stable"), ("idle", "Empty")],
        2: [("audit", "PreparingRebalance"), ("orders", "Stable")],
    }
    filters: list[list[str]] = []

    def connect(self: GroupAdmin, endpoint: tuple[str, int]) -> _Conn:
        def handle(api: int, body: dict[str, Any]) -> dict[str, Any]:
            if api == ApiKey.METADATA:
                brokers = [{"node_id": n, "host": "b", "port": n} for n in coordinated]
                return {"brokers": brokers, "topics": []}
            assert api == ApiKey.LIST_GROUPS
            wanted = list(body["states_filter"])
            filters.append(wanted)
            groups = [
                {"group_id": g, "protocol_type": "consumer", "group_state": s}
                for g, s in coordinated[endpoint[1]]
                if not wanted or s in wanted
            ]
            return {"error_code": 0, "groups": groups}

        return _Conn(handle)

    monkeypatch.setattr(GroupAdmin, "_connect", connect)
    return filters


@pytest.mark.parametrize(
    ("state", "filtered", "listed"),
    [
        # Kafka 2.8's --list --state with no value (or an empty one): every group.
        (["--state"], [], ["audit", "billing", "idle", "orders"]),
        (["--state="], [], ["audit", "billing", "idle", "orders"]),
        (["--state", "Stable"], ["Stable"], ["billing", "orders"]),
        (["--state=Stable,Empty"], ["Stable", "Empty"], ["billing", "idle", "orders"]),
        # Each name trimmed, each once; String.split drops trailing empty strings.
        (
            ["--state", "Empty, PreparingRebalance ,Empty,"],
            ["Empty", "PreparingRebalance"],
            ["audit", "idle"],
        ),
        (["--state", "Dead,CompletingRebalance"], ["Dead", "CompletingRebalance"], []),
        # Java's String.trim takes every character up to U+0020, controls included.
        (["--state", "\x01Stable\t"], ["Stable"], ["billing", "orders"]),
    ],
)
def test_list_with_state_lists_the_groups_in_the_states_given(
    state: list[str],
    filtered: list[str],
    listed: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka 2.8's ConsumerGroupCommand takes --state with --list (stateOpt.availableIf(
    describeOpt, listOpt), withOptionalArg): its value, comma-separated states, is parsed
    by consumerGroupStatesFromString and sent as ListGroups' states filter; the groups
    listed are those in the states given, with their states. The value was refused
    (unrecognized arguments), and every group listed whatever the states."""
    filters = _brokers_listing(monkeypatch)
    code, out, err = run([*BOOT, "--list", *state], capsys)
    assert (code, err) == (0, "")
    assert filters == [filtered, filtered]  # each broker asked for those states
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["GROUP", "STATE"]
    assert [r[0] for r in rows[1:]] == listed


def test_list_without_state_lists_every_group(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    filters = _brokers_listing(monkeypatch)
    code, out, _ = run([*BOOT, "--list", "--json"], capsys)
    assert code == 0
    assert [g["group"] for g in json.loads(out)["groups"]] == [
        "audit",
        "billing",
        "idle",
        "orders",
    ]
    assert filters == [[], []]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # ConsumerGroupState.parse is case-sensitive in Kafka 2.8: "stable" is UNKNOWN.
        (
            ["--list", "--state", "stable"],
            "Invalid state list 'stable'. Valid states are:"
            " PreparingRebalance, CompletingRebalance, Stable, Dead, Empty",
        ),
        (["--list", "--state", "Stable,Bogus"], "Invalid state list 'Stable,Bogus'."),
        (["--list", "--state", "Unknown"], "Invalid state list 'Unknown'."),
        (["--list", "--state", "Stable,,Empty"], "Invalid state list 'Stable,,Empty'."),
        (["--list", "--state", " "], "Invalid state list ' '."),
        # ... and no space above it: a no-break space stays, an UNKNOWN state.
        (["--list", "--state", "Stable\u00a0"], "Invalid state list 'Stable"),
        # checkArgs: "Option [describe] does not take a value for [state]".
        (
            ["--describe", "--group", "g", "--state", "Stable"],
            "--describe does not take a value for --state",
        ),
        (
            ["--describe", "--group", "g", "--state="],
            "--describe does not take a value for --state",
        ),
    ],
)
def test_a_bad_state_filter_is_a_usage_error(
    argv: list[str],
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Kafka 2.8's consumerGroupStatesFromString refuses a state list with an unknown
    state (IllegalArgumentException, which run() answers with the usage), and checkArgs a
    value for --state with --describe; nothing is asked of the brokers."""
    filters = _brokers_listing(monkeypatch)
    code, out, err = run([*BOOT, *argv], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("usage: zkctl groups")
    (line,) = [line for line in err.splitlines() if ": error: " in line]
    assert expected in line
    assert filters == []


@pytest.mark.parametrize("view", [[], ["--members"], ["--state"], ["--json"]])
def test_a_group_that_does_not_exist_is_an_error_exit_1(
    view: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deliberate difference (README): Kafka 2.8's shouldPrintMemberState prints
    "Error: Consumer group 'G' does not exist." for a Dead group on stdout and the tool
    exits 0; here it is the command's error, on stderr, exit 1, after the groups that do
    exist, so a script sees it and --json's stdout stays JSON."""
    _described_as(monkeypatch, _description())
    code, out, err = run(
        [*BOOT, "--describe", "--group", "nobody", "--group", "billing", *view], capsys
    )
    assert code == 1
    assert err == "zkctl: error: consumer group 'nobody' does not exist\n"
    if view == ["--json"]:
        assert [g["group"] for g in json.loads(out)["groups"]] == ["nobody", "billing"]
    else:
        assert out.splitlines()[1].startswith("billing ")


def test_a_group_id_with_control_characters_is_listed_escaped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A group id is any text a client chose: its control characters are listed as \\xNN
    escapes, as zkctl watch shows a znode's (an ESC sequence printed raw cleared the
    screen); --json keeps the id, in JSON's own escapes."""
    hostile = "g\x1b[2J\tx"

    def list_groups(self: GroupAdmin, states: Any = ()) -> GroupListing:
        return GroupListing(
            [ListedGroup(hostile, "Stable", "consumer", 1), ListedGroup("b", "Empty", "", 1)]
        )

    monkeypatch.setattr(GroupAdmin, "list_groups", list_groups)
    code, out, err = run([*BOOT, "--list", "--state"], capsys)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1].split() == ["g\\x1b[2J\\x09x", "Stable"]
    # the STATE column lines up: the escapes are counted in the GROUP column's width
    assert lines[1].index("Stable") == lines[2].index("Empty") == lines[0].index("STATE")
    code, out, _ = run([*BOOT, "--list", "--json"], capsys)
    assert [g["group"] for g in json.loads(out)["groups"]] == [hostile, "b"]
