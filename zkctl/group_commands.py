"""``zkctl groups``: consumer groups read over the Kafka protocol, as Kafka 2.8's
``kafka-consumer-groups.sh --bootstrap-server`` reads them (--list, with --state STATES the
groups in those states only; --describe with its offsets view, --members or --state). The
requests are admin/group_admin.py's; this module checks the arguments and renders the
answers as its tables or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from watch.text import printable
from zkctl.common import CommandError, UsageError, out, print_json, seconds, warn

if TYPE_CHECKING:
    from admin.group_admin import GroupDescription, GroupListing, Member, OffsetRow
    from zkctl.common import Subparsers
    from zkdata.znodes import TopicPartition

MISSING = "-"  # kafka-consumer-groups.sh's MISSING_COLUMN_VALUE
DEFAULT_TIMEOUT_S = 30.0
_REBALANCING = ("PreparingRebalance", "CompletingRebalance")
# Kafka 2.8's ConsumerGroupState names but Unknown, in its order (the valid --state values).
CONSUMER_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_MAX_KAFKA_STRING_BYTES = 0x7FFF  # an int16 length, compact or not


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    groups = subparsers.add_parser(
        "groups",
        parents=[common],
        help="list and describe consumer groups (kafka-consumer-groups.sh)",
        description=(
            "Read consumer groups from the brokers over the Kafka protocol, as Kafka 2.8's"
            " kafka-consumer-groups.sh --bootstrap-server does. --list asks every live"
            " broker (ListGroups) for the groups it coordinates (with --state STATES, those"
            " in these states only). --describe asks each"
            " group's coordinator (FindCoordinator, DescribeGroups, OffsetFetch) for its"
            " state, members and committed offsets, and each partition's leader for its"
            " log end offset (ListOffsets): per partition, the committed offset, the log"
            " end offset, the lag and the member assigned it; --members lists the members"
            " and their partitions instead, --state the coordinator, assignment strategy,"
            " state and number of members. ZooKeeper is not used."
        ),
    )
    groups.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        required=True,
        help="brokers to start from (comma-separated)",
    )
    mode = groups.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--list", action="store_true", help="list the groups (with --state: and their states)"
    )
    mode.add_argument(
        "--describe", action="store_true", help="describe the groups named by --group"
    )
    groups.add_argument(
        "--group",
        metavar="GROUP",
        action="append",
        help="with --describe: a group to describe (repeat for more)",
    )
    view = groups.add_mutually_exclusive_group()
    view.add_argument(
        "--offsets",
        action="store_true",
        help="with --describe: each partition's offsets, lag and member (the default)",
    )
    view.add_argument(
        "--members",
        action="store_true",
        help="with --describe: the members (id, client id, host) and their partitions",
    )
    view.add_argument(
        "--state",
        nargs="?",
        const=True,  # given without a value (Kafka's withOptionalArg)
        metavar="STATES",
        help="with --describe (no value): the coordinator, assignment strategy, state and"
        " #members; with --list: each group's state too, and only the groups in these states"
        f" (comma-separated, as Kafka names them: {', '.join(CONSUMER_GROUP_STATES)}); no"
        " value: every group",
    )
    groups.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"each request's timeout (default: {DEFAULT_TIMEOUT_S:g})",
    )
    groups.add_argument("--json", action="store_true", help="print JSON")
    groups.set_defaults(handler=_groups, parser=groups)


def checked_groups(args: argparse.Namespace) -> list[str]:
    """The groups to describe, each once, in the order given ([] with --list); a
    UsageError for a combination that does not make sense."""
    named: list[str] = list(args.group or [])
    if args.list:
        # (--state with --list is a filter, checked by list_states.)
        views = (("--members", args.members), ("--offsets", args.offsets))
        given = [flag for flag, on in views if on]
        if named:
            given.insert(0, "--group")
        if given:
            verb = "goes" if len(given) == 1 else "go"
            raise UsageError(f"{', '.join(given)} {verb} with --describe, not --list")
        return []
    if not named:
        raise UsageError("--describe needs --group GROUP (one or more)")
    if args.state is not None and args.state is not True:
        # Kafka 2.8's checkArgs: "Option [describe] does not take a value for [state]".
        raise UsageError("--describe does not take a value for --state")
    if any(not g.strip() for g in named):
        raise UsageError("--group: a group id cannot be empty")
    for g in named:
        problem = _group_id_problem(g)
        if problem is not None:
            raise UsageError(f"--group: {problem}")
    return list(dict.fromkeys(named))


def _group_id_problem(value: str) -> str | None:
    """Why the group id ``value`` cannot go in a request as a Kafka string (UTF-8 of at
    most 32767 bytes), or None: the wire's encoder would refuse it (an EncodeError). A
    byte of the command line that is no UTF-8 arrives as a lone surrogate
    (surrogateescape)."""
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        return f"{value!r} is not UTF-8 text (Kafka's strings are)"
    if size > _MAX_KAFKA_STRING_BYTES:
        return (
            f"a group id of {size} bytes of UTF-8 is longer than the"
            f" {_MAX_KAFKA_STRING_BYTES} a Kafka string holds"
        )
    return None


def list_states(args: argparse.Namespace) -> list[str]:
    """The states --list --state keeps, each once, in the order given; [] for every
    group (no --state, or one with no value or an empty one)."""
    if not isinstance(args.state, str):
        return []
    return consumer_group_states(args.state)


def consumer_group_states(value: str) -> list[str]:
    """Kafka 2.8's consumerGroupStatesFromString: comma-separated names, each trimmed and
    spelled as ConsumerGroupState spells it (its parse is case-sensitive); a UsageError
    naming the valid states for any other, as Kafka's usage error does."""
    names = value.split(",")
    while names and not names[-1]:  # Java's String.split drops trailing empty strings
        names.pop()
    from broker.config import java_trim  # String.trim: controls too, not U+00A0

    states = [java_trim(name) for name in names]
    if any(state not in CONSUMER_GROUP_STATES for state in states):
        raise UsageError(
            f"--state: Invalid state list '{value}'."
            f" Valid states are: {', '.join(CONSUMER_GROUP_STATES)}"
        )
    return list(dict.fromkeys(states))


def _groups(args: argparse.Namespace) -> int:
    from admin.cluster_admin import parse_bootstrap
    from admin.group_admin import GroupAdmin

    names = checked_groups(args)
    states = list_states(args) if args.list else []
    admin = GroupAdmin(parse_bootstrap(args.bootstrap_server), timeout_s=args.timeout)
    if args.list:
        listing = admin.list_groups(states)
        if args.json:
            print_json(list_json(listing))
        else:
            for line in list_lines(listing, with_states=args.state is not None):
                out(line)
        if listing.failures:
            raise CommandError(
                "ListGroups failed at "
                + "; ".join(listing.failures)
                + ": the groups coordinated there are not listed"
            )
        return 0

    view = "members" if args.members else "state" if args.state is not None else "offsets"
    offsets = view == "offsets"
    described = [admin.describe(name, offsets=offsets) for name in names]
    # Kafka 2.8's describeGroups prints the groups in a TreeMap's order: by group id (Java's
    # String.compareTo, UTF-16 code units). The JSON keeps the order given.
    in_order = sorted(described, key=lambda d: d.group_id.encode("utf-16-be"))
    if args.json:
        print_json({"groups": [describe_json(d, offsets=offsets) for d in described]})
    else:
        for line in describe_lines(in_order, view=view):
            out(line)
    for d in in_order:
        for note in notes(d):
            warn(note)
    dead = [d.group_id for d in in_order if not d.exists]
    if dead:
        quoted = ", ".join(repr(g) for g in dead)
        raise CommandError(
            f"consumer group {quoted} does not exist"
            if len(dead) == 1
            else f"consumer groups {quoted} do not exist"
        )
    return 0


# --- text -------------------------------------------------------------------------------------


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], min_widths: Sequence[int] = ()
) -> list[str]:
    """Left-aligned columns, each as wide as its widest cell (and at least its
    ``min_widths`` entry), one space apart; no trailing spaces. Cells are made printable
    first, so that a control character's \\xNN escape is counted in its column's width."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = []
    for i, header in enumerate(headers):
        least = min_widths[i] if i < len(min_widths) else 0
        widths.append(max(least, len(header), *(len(row[i]) for row in rows)))
    return [
        " ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (headers, *rows)
    ]


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def list_lines(listing: GroupListing, *, with_states: bool) -> list[str]:
    """kafka-consumer-groups.sh --list's lines: with --state (a value or none) its table of
    groups and states, without it the group ids alone, one a line (Kafka 2.8's listGroups)."""
    if not with_states:
        return [g.group_id for g in listing.groups]
    return table(
        ("GROUP", "STATE"), [(g.group_id, g.state or MISSING) for g in listing.groups], (15,)
    )


def state_lines(d: GroupDescription) -> list[str]:
    """The group's line of kafka-consumer-groups.sh --describe --state's table."""
    return table(
        ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
        [(d.group_id, str(d.coordinator), d.protocol or MISSING, d.state, str(len(d.members)))],
        (15, 25, 20, 15),
    )


def offsets_lines(d: GroupDescription) -> list[str]:
    """kafka-consumer-groups.sh --describe --offsets' table."""
    return table(
        (
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ),
        [_offsets_cells(d.group_id, row) for row in d.rows],
        (15, 15, 10, 15, 15, 15, 15, 15),
    )


def _offsets_cells(group_id: str, row: OffsetRow) -> tuple[str, ...]:
    tp, m = row.partition, row.member
    return (
        group_id,
        MISSING if tp is None else tp.topic,
        MISSING if tp is None else str(tp.partition),
        _text(row.committed),
        _text(row.log_end),
        _text(row.lag),
        MISSING if m is None else m.member_id or MISSING,
        MISSING if m is None else m.host or MISSING,
        MISSING if m is None else m.client_id or MISSING,
    )


def assignment_text(partitions: Sequence[TopicPartition] | None) -> str:
    """``audit(1), orders(0,2)`` as kafka-consumer-groups.sh --members --verbose shows
    them (Kafka 2.8's printMembers: each topic's partitions sorted, the topics sorted,
    joined by ", "); ``-`` for none, ``(unreadable)`` for an assignment that did not
    decode."""
    if partitions is None:
        return "(unreadable)"
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items()))


def members_lines(d: GroupDescription) -> list[str]:
    """kafka-consumer-groups.sh --describe --members --verbose's table (with a
    GROUP-INSTANCE-ID column when a member is static, as that command does)."""
    static = any(m.group_instance_id for m in d.members)
    rows = [
        (
            d.group_id,
            m.member_id or MISSING,
            *((m.group_instance_id or MISSING,) if static else ()),
            m.host or MISSING,
            m.client_id or MISSING,
            MISSING if m.partitions is None else str(len(m.partitions)),
            assignment_text(m.partitions),
        )
        for m in d.members
    ]
    headers = ("GROUP", "CONSUMER-ID", *(("GROUP-INSTANCE-ID",) if static else ()), "HOST")
    return table(
        (*headers, "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"),
        rows,
        (15, 15, *((17,) if static else ()), 15, 15, 12),
    )


def describe_lines(described: Sequence[GroupDescription], *, view: str) -> list[str]:
    """Each existing group's table of the ``view`` ("offsets", "members" or "state"),
    blank-line separated: one view only, as Kafka 2.8's describeGroups prints (the state
    with --state alone). A table with no rows is left out, as kafka-consumer-groups.sh
    does; the state's always has its one."""
    blocks: list[list[str]] = []
    for d in described:
        if not d.exists:
            continue
        if view == "state":
            blocks.append(state_lines(d))
        elif view == "members":
            if d.members:
                blocks.append(members_lines(d))
        elif d.rows:
            blocks.append(offsets_lines(d))
    lines: list[str] = []
    for block in blocks:
        if lines:
            lines.append("")
        lines.extend(block)
    return lines


def notes(d: GroupDescription) -> list[str]:
    """What stderr says of a group beside its tables (its absence is the command's
    error, not a note)."""
    if not d.exists:
        return []
    said = []
    if d.state == "Empty":
        said.append(f"consumer group {d.group_id!r} has no active members")
    elif d.state in _REBALANCING:
        said.append(
            f"consumer group {d.group_id!r} is rebalancing ({d.state}): its members'"
            " assignments are not known until it is Stable"
        )
    said.extend(f"consumer group {d.group_id!r}: {w}" for w in d.warnings)
    return said


# --- JSON -------------------------------------------------------------------------------------


def list_json(listing: GroupListing) -> dict[str, Any]:
    return {
        "groups": [
            {
                "group": g.group_id,
                "state": g.state,
                "protocol_type": g.protocol_type,
                "coordinator": g.coordinator,
            }
            for g in listing.groups
        ],
        "errors": list(listing.failures),
    }


def _member_json(m: Member) -> dict[str, Any]:
    return {
        "consumer_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "host": m.host,
        "partitions": None
        if m.partitions is None
        else [{"topic": tp.topic, "partition": tp.partition} for tp in m.partitions],
        "assignment_error": m.problem,
    }


def _row_json(row: OffsetRow) -> dict[str, Any]:
    tp, m = row.partition, row.member
    return {
        "topic": None if tp is None else tp.topic,
        "partition": None if tp is None else tp.partition,
        "current_offset": row.committed,
        "log_end_offset": row.log_end,
        "lag": row.lag,
        "consumer_id": None if m is None else m.member_id,
        "host": None if m is None else m.host,
        "client_id": None if m is None else m.client_id,
    }


def describe_json(d: GroupDescription, *, offsets: bool) -> dict[str, Any]:
    """One group: None where the table shows ``-``; ``offsets`` only when they were read
    (not with --members or --state)."""
    doc: dict[str, Any] = {
        "group": d.group_id,
        "state": d.state,
        "protocol_type": d.protocol_type,
        "assignment_strategy": d.protocol,
        "coordinator": {
            "id": d.coordinator.node_id,
            "host": d.coordinator.host,
            "port": d.coordinator.port,
        },
        "members": [_member_json(m) for m in d.members],
    }
    if offsets:
        doc["offsets"] = [_row_json(r) for r in d.rows]
    doc["warnings"] = list(d.warnings)
    return doc
