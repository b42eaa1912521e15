"""``zkctl reassign``, ``zkctl elect-leaders`` and ``zkctl controller``."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zkctl import controller_status
from zkctl.common import (
    UsageError,
    err,
    ids,
    out,
    partition_id,
    print_json,
    read_text_file,
    report_problems,
    warn,
    zk_session,
)

if TYPE_CHECKING:
    from admin.reassign import PartitionReassignmentStatus, Targets
    from zkctl.common import Subparsers
    from zkdata.znodes import TopicPartition


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    reassign = subparsers.add_parser(
        "reassign",
        parents=[common],
        help="move partition replicas (kafka-reassign-partitions.sh)",
        description=(
            "Start a partition reassignment by writing /admin/reassign_partitions, or check"
            " one with --verify. Targets come from Kafka's reassignment JSON"
            ' ({"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]})'
            " or, for one partition, from --topic, --partition and --replicas. With"
            " --bootstrap-server the controller is asked over the Kafka protocol"
            " (AlterPartitionReassignments, ListPartitionReassignments), as Kafka 2.8's"
            " tool does, and --list and --cancel are available. --generate proposes a"
            " reassignment of whole topics onto --broker-list, to save and --execute."
        ),
    )
    reassign.add_argument(
        "--reassignment-json-file", metavar="FILE", help="the targets, in Kafka's JSON"
    )
    reassign.add_argument("--topic", help="the topic of the one partition to move")
    reassign.add_argument(
        "--partition", type=partition_id, metavar="P", help="the partition to move"
    )
    reassign.add_argument("--replicas", metavar="IDS", help="its new replicas, e.g. 1,2,3")
    mode = reassign.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="start the reassignment (default)")
    mode.add_argument("--verify", action="store_true", help="report how far the targets are")
    mode.add_argument(
        "--list", action="store_true", help="list the reassignments in progress (needs a broker)"
    )
    mode.add_argument(
        "--generate",
        action="store_true",
        help="propose an assignment of the topics of --topics-to-move-json-file onto the"
        " brokers of --broker-list (printed; nothing starts)",
    )
    mode.add_argument(
        "--cancel",
        action="store_true",
        help="cancel the targets' reassignments in progress: back to their replicas before"
        " (needs a broker)",
    )
    reassign.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="ask the brokers (comma-separated) rather than write the znode",
    )
    reassign.add_argument(
        "--additional",
        action="store_true",
        help="with --bootstrap-server: start even while other reassignments are in progress",
    )
    reassign.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='with --generate: the topics, as {"topics":[{"topic":"t"}],"version":1}',
    )
    reassign.add_argument(
        "--broker-list", metavar="IDS", help="with --generate: the brokers to spread them over"
    )
    reassign.add_argument(
        "--disable-rack-aware",
        action="store_true",
        help="with --generate: place replicas without regard to the brokers' racks",
    )
    reassign.add_argument("--json", action="store_true", help="print JSON")
    reassign.set_defaults(handler=_reassign, parser=reassign)

    elect = subparsers.add_parser(
        "elect-leaders",
        parents=[common],
        help="move leadership back to the preferred replicas",
        description=(
            "Ask the controller for a preferred replica election by writing"
            " /admin/preferred_replica_election. A partition moves only if its first replica"
            " is live and in the ISR."
        ),
    )
    elect.add_argument(
        "--preferred",
        action="store_true",
        required=True,
        help="preferred replica election (the only kind ZooKeeper-based tools can ask for)",
    )
    elect.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    elect.add_argument("--topic", help="one topic's partitions")
    elect.add_argument(
        "--partition", type=partition_id, metavar="P", help="with --topic: one partition"
    )
    elect.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='partitions as {"partitions":[{"topic":"t","partition":0},...]}',
    )
    elect.add_argument("--json", action="store_true", help="print JSON")
    elect.set_defaults(handler=_elect, parser=elect)

    controller = subparsers.add_parser(
        "controller",
        parents=[common],
        help="show the controller: broker id, epoch, and its status file when local",
        description=(
            "The controller's broker id (/controller), when it was elected, and its epoch"
            " (/controller_epoch, whose zkVersion fences every controller write). When it"
            " is a broker of the local cluster (zkctl up), also what its status file says,"
            " rewritten every second: whether it is acting as controller, its event queue"
            " (events waiting, how long they waited and took), the requests waiting to be"
            " sent to each broker, and what its last failover cost."
        ),
    )
    controller.add_argument(
        "--json", action="store_true", help="print JSON, with the whole status file"
    )
    controller.set_defaults(handler=_controller, parser=controller)


# --- reassign ---------------------------------------------------------------------------------


def _targets(args: argparse.Namespace) -> Targets:
    from admin import reassign

    single = [args.topic, args.partition, args.replicas]
    if args.reassignment_json_file is not None:
        if any(v is not None for v in single):
            raise UsageError(
                "--reassignment-json-file cannot be combined with --topic, --partition or"
                " --replicas"
            )
        path = args.reassignment_json_file
        return reassign.parse_reassignment_json(read_text_file(path, "reassignment file"), path)
    if all(v is None for v in single):
        raise UsageError(
            "give --reassignment-json-file FILE, or --topic, --partition and --replicas"
        )
    missing = [
        flag
        for flag, v in zip(("--topic", "--partition", "--replicas"), single, strict=True)
        if v is None
    ]
    if missing:
        raise UsageError(f"missing {', '.join(missing)} (one partition needs all three)")
    return reassign.targets_from_args(args.topic, args.partition, args.replicas)


def _reassign(args: argparse.Namespace) -> int:
    from admin import reassign

    if args.generate:
        return _generate(args)
    generate_only = _given(
        ("--topics-to-move-json-file", args.topics_to_move_json_file is not None),
        ("--broker-list", args.broker_list is not None),
        ("--disable-rack-aware", args.disable_rack_aware),
    )
    if generate_only:
        raise UsageError(f"{', '.join(generate_only)} go(es) with --generate")
    # Kafka 2.8's permittedArgs ("Option ... can't be used with action ..."), checked
    # before it asks for --bootstrap-server.
    action = (
        "--verify"
        if args.verify
        else "--list"
        if args.list
        else "--cancel"
        if args.cancel
        else None
    )
    if args.additional and action is not None:
        raise UsageError(f"--additional goes with --execute, not {action}")
    if args.list:
        targets_given = _given(
            ("--reassignment-json-file", args.reassignment_json_file is not None),
            ("--topic", args.topic is not None),
            ("--partition", args.partition is not None),
            ("--replicas", args.replicas is not None),
        )
        if targets_given:
            raise UsageError(f"--list takes no partitions; not {', '.join(targets_given)}")
    if args.bootstrap_server is not None:
        return _reassign_over_the_wire(args)
    if args.list or args.cancel or args.additional:
        flag = "--list" if args.list else "--cancel" if args.cancel else "--additional"
        raise UsageError(f"{flag} needs --bootstrap-server HOST:PORT")
    targets = _targets(args)
    if args.verify:
        with zk_session(args) as zk:
            result = reassign.verify_reassignment(zk, targets)
        report_problems(result.problems)
        _print_statuses(
            args,
            result.statuses,
            pending_znode=result.pending,
            problems=result.problems.to_json(),
        )
        return 0

    with zk_session(args) as zk:
        started = reassign.start_reassignment(zk, targets)
    report_problems(started.problems)
    if args.json:
        # The znode holds them all or none: every target started, none refused.
        print_json(
            _execute_json(
                started=sorted(started.targets),
                targets=started.targets,
                current=started.current,
                problems=started.problems.to_json(),
                errors=[],
            )
        )
        return 0
    out("Current partition replica assignment\n")
    out(reassign.format_reassignment_json(started.current))
    out("\nSave this to use as the --reassignment-json-file option during rollback")
    out(started_line(started.targets))
    return 0


def _given(*flags: tuple[str, bool]) -> list[str]:
    """The flags of ``(flag, given)`` pairs that were given."""
    return [flag for flag, given in flags if given]


def _generate(args: argparse.Namespace) -> int:
    """kafka-reassign-partitions.sh --generate: the topics' current assignment and a
    proposed one over the listed brokers (from ZooKeeper, or the brokers' Metadata with
    --bootstrap-server); nothing is written."""
    from admin import metadata, reassign
    from admin.cluster_admin import ClusterAdmin, parse_bootstrap
    from admin.errors import AdminError, Problems
    from admin.topics import parse_replicas
    from controller.assignment import BrokerMetadata
    from zkdata.znodes import TopicPartition

    if args.topics_to_move_json_file is None or args.broker_list is None:
        raise UsageError("--generate needs --topics-to-move-json-file FILE and --broker-list IDS")
    others = _given(
        ("--reassignment-json-file", args.reassignment_json_file is not None),
        ("--topic", args.topic is not None),
        ("--partition", args.partition is not None),
        ("--replicas", args.replicas is not None),
        ("--additional", args.additional),
    )
    if others:
        raise UsageError(f"--generate takes whole topics; not {', '.join(others)}")
    path = args.topics_to_move_json_file
    topics = reassign.parse_topics_to_move_json(read_text_file(path, "topics file"), path)
    wanted = parse_replicas(args.broker_list, "--broker-list")
    if args.bootstrap_server is not None:
        admin = ClusterAdmin(parse_bootstrap(args.bootstrap_server))
        current = admin.replicas(topics)
        racks = {b["node_id"]: b["rack"] for b in admin.metadata([])["brokers"]}
    else:
        problems = Problems()
        with zk_session(args) as zk:
            records, _missing = metadata.read_topics(zk, topics, problems)
            live = metadata.live_brokers(zk, problems)
        report_problems(problems)
        current = {
            TopicPartition(name, p): replicas
            for name, record in records.items()
            for p, replicas in record.assignment.partitions.items()
        }
        racks = {broker_id: r.rack for broker_id, r in live.items()}
    found = {tp.topic for tp in current}
    missing = [t for t in topics if t not in found]
    if missing:
        raise AdminError(f"topic(s) not found: {', '.join(missing)}")
    absent = [b for b in wanted if b not in racks]
    if absent:
        warn(f"--broker-list: broker(s) {ids(absent)} not registered: the proposal leaves them out")
    brokers = [BrokerMetadata(b, racks[b]) for b in wanted if b in racks]
    proposed = reassign.proposed_assignment(
        current, brokers, rack_aware=not args.disable_rack_aware
    )
    if args.json:
        print_json(
            {
                "current": json.loads(reassign.format_reassignment_json(current)),
                "proposed": json.loads(reassign.format_reassignment_json(proposed)),
            }
        )
        return 0
    out("Current partition replica assignment")
    out(reassign.format_reassignment_json(current))
    out()
    out("Proposed partition reassignment configuration")
    out(reassign.format_reassignment_json(proposed))
    return 0


EXISTING_REASSIGNMENTS = (
    "Cannot execute because there are reassignments in progress ({partitions}). Use"
    " --additional to start this one beside them, or --cancel them first."
)


def _reassign_over_the_wire(args: argparse.Namespace) -> int:
    """kafka-reassign-partitions.sh --bootstrap-server: the controller checks, starts,
    lists and cancels; ZooKeeper is not touched."""
    from admin import reassign
    from admin.cluster_admin import ClusterAdmin, parse_bootstrap, report_lines
    from admin.errors import AdminError

    admin = ClusterAdmin(parse_bootstrap(args.bootstrap_server))
    if args.list:
        moving = admin.list_partition_reassignments()
        if args.json:
            print_json(
                {
                    "reassignments": [
                        {
                            "topic": tp.topic,
                            "partition": tp.partition,
                            "replicas": list(replicas),
                            "adding": list(adding),
                            "removing": list(removing),
                        }
                        for tp, (replicas, adding, removing) in sorted(moving.items())
                    ]
                }
            )
        elif not moving:
            out("No partition reassignments found.")
        else:
            out("Current partition reassignments:")
            for tp, (replicas, adding, removing) in sorted(moving.items()):
                # Kafka 2.8's curReassignmentsToString names adding and removing only
                # when there are some.
                out(
                    f"{tp}: replicas: {ids(replicas)}."
                    + (f" adding: {ids(adding)}." if adding else "")
                    + (f" removing: {ids(removing)}." if removing else "")
                )
        return 0

    if args.cancel:
        active = sorted(admin.list_partition_reassignments(_cancelled(args)))
        results = admin.alter_partition_reassignments(dict.fromkeys(active)) if active else {}
        failed = report_lines(results)
        cancelled = [tp for tp in active if results.get(tp, (-1, None))[0] == 0]
        if args.json:
            print_json(
                {"cancelled": [str(tp) for tp in cancelled], "errors": failed},
            )
        elif not active:
            out("None of the specified partition reassignments are active.")
        if failed:
            # Kafka 2.8's cancelAssignment: any refusal is the command's error, and then
            # no success line is printed.
            raise AdminError(
                f"Error cancelling partition reassignment{plural(failed)} for:\n"
                + "\n".join(failed)
            )
        if cancelled and not args.json:
            out(
                f"Successfully cancelled partition reassignment{plural(cancelled)} for: "
                + ",".join(str(tp) for tp in cancelled)
            )
        return 0

    targets = _targets(args)
    asked = sorted(targets)
    current = admin.replicas([tp.topic for tp in asked])
    if args.verify:
        moving = admin.list_partition_reassignments(asked)
        statuses = []
        for tp in asked:
            replicas, adding, removing = moving.get(tp, (current.get(tp, ()), (), ()))
            statuses.append(
                reassign.partition_status(
                    tp, targets[tp], replicas if tp in current else None, adding, removing
                )
            )
        # The --verify --json of the znode's mode, with no znode read: nothing pending
        # there to tell of (null), nothing malformed skipped.
        _print_statuses(args, statuses, pending_znode=None, problems=[])
        return 0

    if not args.additional:
        in_progress = admin.list_partition_reassignments()
        if in_progress:
            raise AdminError(
                EXISTING_REASSIGNMENTS.format(
                    partitions=",".join(str(tp) for tp in sorted(in_progress))
                )
            )
    # Kafka 2.8's executeAssignment checks every target broker (verifyBrokerIds) and topic
    # (describeTopics) before it asks for anything: a file with one bad entry starts none.
    registered = {b["node_id"] for b in admin.metadata([])["brokers"]}
    unknown = sorted({b for replicas in targets.values() for b in replicas} - registered)
    if unknown:
        raise AdminError(f"Unknown broker id {unknown[0]}")
    absent = sorted({tp.topic for tp in asked} - {tp.topic for tp in current})
    if absent:
        raise AdminError(
            "cannot reassign: " + "; ".join(f"topic {t!r} does not exist" for t in absent)
        )
    results = admin.alter_partition_reassignments(targets)
    failed = report_lines(results)
    rollback = {tp: current[tp] for tp in asked if tp in current}
    started = [tp for tp in asked if results.get(tp, (-1, None))[0] == 0]
    if args.json:
        # No znode is read: nothing malformed to skip.
        print_json(
            _execute_json(
                started=started, targets=targets, current=rollback, problems=[], errors=failed
            )
        )
    else:
        out("Current partition replica assignment\n")
        out(reassign.format_reassignment_json(rollback))
        out("\nSave this to use as the --reassignment-json-file option during rollback")
    if failed:
        raise AdminError("Error reassigning partition(s):\n" + "\n".join(failed))
    if started and not args.json:
        out(started_line(started))
    return 0


def _execute_json(
    *,
    started: list[TopicPartition],
    targets: Mapping[TopicPartition, tuple[int, ...]],
    current: Mapping[TopicPartition, tuple[int, ...]],
    problems: list[dict[str, str]],
    errors: list[str],
) -> dict[str, Any]:
    """--execute --json, one shape with or without --bootstrap-server: the partitions
    started ("t-0"), what was asked and the rollback (Kafka's reassignment JSON), the
    malformed znodes skipped (as every --json's "problems") and the partitions the
    controller refused (as --cancel's "errors"; they make the exit code 1)."""
    from admin import reassign

    return {
        "started": [str(tp) for tp in started],
        "targets": json.loads(reassign.format_reassignment_json(targets)),
        "current": json.loads(reassign.format_reassignment_json(current)),
        "problems": problems,
        "errors": errors,
    }


def _print_statuses(
    args: argparse.Namespace, statuses: list[PartitionReassignmentStatus], **more_json: Any
) -> None:
    if args.json:
        print_json(
            {
                "complete": all(s.status == "complete" for s in statuses),
                **more_json,
                "partitions": [s.to_json() for s in statuses],
            }
        )
        return
    out("Status of partition reassignment:")
    for s in statuses:
        out(status_line(s))


def status_line(s: PartitionReassignmentStatus) -> str:
    """A partition's line of --verify, in Kafka 2.8's words
    (partitionReassignmentStatesToString); --json gives the replicas being moved."""
    tp = s.partition
    if s.status == "complete":
        return f"Reassignment of partition {tp} is complete."
    if s.status == "in_progress":
        return f"Reassignment of partition {tp} is still in progress."
    if s.status == "failed" and s.current is not None:
        return (
            f"There is no active reassignment of partition {tp}, but replica set is"
            f" {','.join(map(str, s.current))} rather than {','.join(map(str, s.target))}."
        )
    return f"Reassignment of partition {tp}: status unknown ({s.detail})."


def plural(items: Collection[object]) -> str:
    """Kafka 2.8's reassignment messages: "" for one item, else "s"."""
    return "" if len(items) == 1 else "s"


def started_line(partitions: Collection[TopicPartition]) -> str:
    """Kafka 2.8's executeAssignment: "reassignment" for one partition, else plural."""
    return f"Successfully started partition reassignment{plural(partitions)} for " + ",".join(
        str(tp) for tp in sorted(partitions)
    )


def _cancelled(args: argparse.Namespace) -> list[TopicPartition]:
    """The partitions --cancel names: those of the targets, or one partition by --topic
    and --partition alone (its replicas are not needed to cancel)."""
    from admin.topics import check_topic_name
    from zkdata.znodes import TopicPartition

    if args.replicas is None and args.topic is not None and args.partition is not None:
        check_topic_name(args.topic)
        return [TopicPartition(args.topic, args.partition)]
    return sorted(_targets(args))


# --- elect-leaders ----------------------------------------------------------------------------


def _elect(args: argparse.Namespace) -> int:
    from admin import elect

    listed = None
    if args.path_to_json_file is not None:
        path = args.path_to_json_file
        listed = elect.parse_election_json(read_text_file(path, "election file"), path)
    scope = elect.parse_scope(
        all_partitions=args.all_topic_partitions,
        topic=args.topic,
        partition=args.partition,
        partitions=listed,
    )
    with zk_session(args) as zk:
        result = elect.start_preferred_election(zk, scope)
    report_problems(result.problems)
    if args.json:
        print_json(
            {
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition} for tp in result.partitions
                ],
                "expected_unchanged": [
                    {
                        "topic": n.partition.topic,
                        "partition": n.partition.partition,
                        "preferred": n.preferred,
                        "reason": n.reason,
                    }
                    for n in result.unchanged
                ],
                "problems": result.problems.to_json(),
            }
        )
        return 0
    if not result.partitions:
        out("There are no partitions to elect leaders for.")
        return 0
    out(
        "Successfully started preferred replica election for partitions "
        + ",".join(str(tp) for tp in result.partitions)
    )
    moving = len(result.partitions) - len(result.unchanged)
    if result.unchanged:
        out(f"Expected to move: {moving}; expected to stay as they are:")
        for n in result.unchanged:
            out(f"  {n.partition}: {n.reason}")
    return 0


# --- controller -------------------------------------------------------------------------------


# How long `zkctl controller` waits for a status file written since the election: the
# broker rewrites it every second.
_STATUS_FRESH_WAIT_S = 2.5
# A status file older than this says its broker is not running its status loop.
_STATUS_STALE_S = 3.0


def _status_file(
    args: argparse.Namespace, controller_id: int | None, elected_at_ms: int | None
) -> dict[str, Any] | None:
    """The controller's broker-status.json, when it is a broker of the local cluster in
    --dir that this command is talking to. One written before the election (it would show
    the broker not yet controller), or one written while its failover was still under way,
    is read again until a newer one is there, for a few seconds; ``written_before_election``
    says if none came (the broker may be paused)."""
    from cluster import local

    if controller_id is None:
        return None
    try:
        cluster = local.load(Path(args.dir))
    except local.LocalClusterError:
        return None
    if cluster is None or cluster.state == "stopped":
        return None
    if cluster.connect_string != getattr(args, "connect_string", None):
        return None
    broker = next((b for b in cluster.brokers if b.id == controller_id), None)
    if broker is None:
        return None

    def before_election(data: dict[str, Any] | None) -> bool:
        if data is None or elected_at_ms is None:
            return False
        updated_at = data.get("updated_at")
        return isinstance(updated_at, int | float) and updated_at * 1000 < elected_at_ms

    def not_yet_active(data: dict[str, Any] | None) -> bool:
        # Written after the znode was made but before the broker's failover finished
        # (it loads the cluster first): the next write shows it active.
        controller = data.get("controller") if isinstance(data, dict) else None
        return isinstance(controller, dict) and controller.get("active") is False

    deadline = time.monotonic() + _STATUS_FRESH_WAIT_S
    data, age = local.read_status_file(broker)
    while (before_election(data) or not_yet_active(data)) and time.monotonic() < deadline:
        time.sleep(0.1)
        data, age = local.read_status_file(broker)
    return {
        "path": str(broker.status_file),
        "age_s": age,
        "written_before_election": before_election(data),
        "content": data,
    }


def _status_heading(status: dict[str, Any]) -> str:
    """The line above what the status file says: where it is, and how much to trust it."""
    stale = ""
    if status["written_before_election"]:
        stale = ", before this election: the broker has not rewritten it since"
    elif status["age_s"] > _STATUS_STALE_S:
        stale = ": it is rewritten every second, so the broker is paused or stuck"
    return (
        f"Its status file ({status['path']}, updated {status['age_s']:.1f} s ago{stale};"
        " --json for all of it):"
    )


def _controller(args: argparse.Namespace) -> int:
    from admin.controller_info import read_controller

    with zk_session(args) as zk:
        info = read_controller(zk)
    report_problems(info.problems)
    status = _status_file(args, info.controller_id, info.elected_at_ms)
    if args.json:
        doc = info.to_json()
        doc["status_file"] = status
        print_json(doc)
        return 0
    if info.controller_id is None:
        out("Controller: none (/controller does not exist or is unreadable)")
    else:
        endpoint = f" ({info.endpoint})" if info.endpoint else " (not registered)"
        out(f"Controller: broker {info.controller_id}{endpoint}")
    if info.epoch is not None:
        out(f"Controller epoch: {info.epoch} (zkVersion {info.epoch_zk_version})")
    if info.elected_at_ms is not None:
        ago = time.time() - info.elected_at_ms / 1000
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.elected_at_ms / 1000))
        out(f"Elected at: {when} ({ago:.1f} s ago)")
    if status is not None:
        if status["content"] is None:
            err(f"zkctl: no readable status file at {status['path']} yet")
        else:
            out(_status_heading(status))
            for line in controller_status.describe(status["content"]):
                out(f"  {line}")
    return 0
