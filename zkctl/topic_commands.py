"""``zkctl topic create|delete|list|describe|add-partitions|alter-config`` (kafka-topics.sh)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from zkctl.common import (
    UsageError,
    ids,
    java_int,
    out,
    out_fields,
    print_json,
    report_problems,
    warn,
    zk_session,
)

if TYPE_CHECKING:
    from admin.topics import DescribeResult, PartitionDescription
    from zkctl.common import Subparsers


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    topic = subparsers.add_parser(
        "topic",
        help="create, delete, list, describe and grow topics",
        description="Topic administration through ZooKeeper, as kafka-topics.sh --zookeeper.",
    )
    sub = topic.add_subparsers(dest="topic_command", metavar="ACTION", required=True)

    create = sub.add_parser(
        "create",
        parents=[common],
        help="create a topic",
        description=(
            "Create a topic: replicas are assigned to the registered brokers as Kafka does"
            " (rack-aware when the brokers have racks), or as --replica-assignment says."
        ),
    )
    create.add_argument("--topic", required=True, help="the topic's name")
    create.add_argument("--partitions", type=java_int, metavar="N", help="number of partitions")
    create.add_argument(
        "--replication-factor", type=java_int, metavar="N", help="replicas of each partition"
    )
    create.add_argument(
        "--replica-assignment",
        metavar="ASSIGNMENT",
        help="explicit replicas, partitions separated by ',' and replicas by ':'"
        " (e.g. 1:2,2:3,3:1); instead of --partitions and --replication-factor",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic config override (repeatable), e.g. --config min.insync.replicas=2",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="do nothing if the topic exists"
    )
    create.add_argument(
        "--disable-rack-aware", action="store_true", help="ignore the brokers' racks"
    )
    create.set_defaults(handler=_create, parser=create)

    delete = sub.add_parser(
        "delete",
        parents=[common],
        help="mark a topic for deletion",
        description="Create /admin/delete_topics/<topic>; the controller deletes the topic.",
    )
    delete.add_argument("--topic", required=True, help="the topic's name")
    delete.add_argument(
        "--if-exists", action="store_true", help="do nothing if the topic does not exist"
    )
    delete.set_defaults(handler=_delete, parser=delete)

    listing = sub.add_parser("list", parents=[common], help="list the topics")
    listing.add_argument(
        "--exclude-internal", action="store_true", help="leave out Kafka's internal topics"
    )
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=_list, parser=listing)

    describe = sub.add_parser(
        "describe",
        parents=[common],
        help="show assignment, leaders, ISR and configs (--json: leader epochs too)",
    )
    describe.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="a topic to describe (repeatable; default: every topic)",
    )
    describe.add_argument(
        "--if-exists", action="store_true", help="skip --topic names that do not exist"
    )
    # Kafka 2.8's checkArgs takes one report flag at a time, and none with
    # --topics-with-overrides.
    reports = describe.add_mutually_exclusive_group()
    reports.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replicas",
    )
    reports.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a leader, or whose leader is not a live broker",
    )
    reports.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="refused, as Kafka 2.8's --zookeeper mode refuses it: it needs the brokers'"
        " configuration (their min.insync.replicas), which ZooKeeper mode does not have",
    )
    reports.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="refused, as --under-min-isr-partitions",
    )
    reports.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="only the topics with configs of their own, without their partitions",
    )
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out Kafka's internal topics"
    )
    describe.add_argument("--json", action="store_true", help="print JSON")
    describe.set_defaults(handler=_describe, parser=describe)

    add = sub.add_parser(
        "add-partitions",
        parents=[common],
        help="increase a topic's partition count (kafka-topics.sh --alter --partitions)",
        description=(
            "Grow a topic to --partitions partitions. New partitions are assigned as Kafka"
            " does (starting where partition 0's first replica sits) or by"
            " --replica-assignment, which may list the new partitions only or all of them."
        ),
    )
    add.add_argument("--topic", required=True, help="the topic's name")
    add.add_argument(
        "--partitions",
        type=java_int,
        required=True,
        metavar="N",
        help="the new total partition count",
    )
    add.add_argument("--replica-assignment", metavar="ASSIGNMENT", help="as for create")
    add.add_argument(
        "--if-exists", action="store_true", help="do nothing if the topic does not exist"
    )
    add.add_argument("--disable-rack-aware", action="store_true", help="ignore the brokers' racks")
    add.set_defaults(handler=_add_partitions, parser=add)

    alter = sub.add_parser(
        "alter-config",
        parents=[common],
        help="set or remove topic config overrides (kafka-configs.sh --alter)",
    )
    alter.add_argument("--topic", required=True, help="the topic's name")
    alter.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K1=V1,K2=[V1,V2]",
        help="configs to set, as kafka-configs.sh --add-config takes them: separated by ','"
        " (a value holding ',' or '=' in square brackets, which are dropped); repeatable",
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K1,K2",
        help="config overrides to remove, separated by ',' as kafka-configs.sh takes them"
        " (repeatable)",
    )
    alter.set_defaults(handler=_alter_config, parser=alter)


def _create(args: argparse.Namespace) -> int:
    from admin import topics

    request = topics.parse_create_request(
        args.topic,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        replica_assignment=args.replica_assignment,
        config=args.config,
        if_not_exists=args.if_not_exists,
        disable_rack_aware=args.disable_rack_aware,
    )
    with zk_session(args) as zk:
        result = topics.create_topic(zk, request)
    report_problems(result.problems)
    for w in result.warnings:
        warn(w)
    if result.created:
        out(f"Created topic {result.name}.")
    else:
        out(f"Topic {result.name} already exists; nothing done (--if-not-exists).")
    return 0


def _delete(args: argparse.Namespace) -> int:
    from admin import topics

    with zk_session(args) as zk:
        result = topics.delete_topic(zk, args.topic, if_exists=args.if_exists)
    if result.outcome == "marked":
        out(f"Topic {result.name} is marked for deletion.")
        out("Note: This will have no impact if delete.topic.enable is not set to true.")
    elif result.outcome == "already_marked":
        out(f"Topic {result.name} is already marked for deletion.")
    else:
        out(f"Topic {result.name} does not exist; nothing done (--if-exists).")
    return 0


def _list(args: argparse.Namespace) -> int:
    from admin import topics

    with zk_session(args) as zk:
        listing = topics.list_topics(zk, exclude_internal=args.exclude_internal)
    if args.json:
        print_json(
            {
                "topics": [
                    {"name": t.name, "marked_for_deletion": t.marked_for_deletion} for t in listing
                ]
            }
        )
        return 0
    for t in listing:
        out(f"{t.name} - marked for deletion" if t.marked_for_deletion else t.name)
    return 0


def _check_reports(args: argparse.Namespace) -> None:
    """Kafka 2.8's checkArgs refuses the min-ISR reports with --zookeeper: whether a
    partition is below or at min.insync.replicas depends on the brokers' default of it
    for a topic without an override, and ZooKeeper holds no broker's configuration."""
    for flag, given in (
        ("--under-min-isr-partitions", args.under_min_isr_partitions),
        ("--at-min-isr-partitions", args.at_min_isr_partitions),
    ):
        if given:
            raise UsageError(
                f"{flag} needs the brokers' configuration (their min.insync.replicas),"
                " which ZooKeeper mode does not have (as Kafka 2.8's --zookeeper mode)"
            )


def _filtering(args: argparse.Namespace) -> bool:
    """Whether only some partitions are reported (Kafka's DescribeOptions: no topic
    header then)."""
    return bool(args.under_replicated_partitions or args.unavailable_partitions)


def _selected(args: argparse.Namespace, p: PartitionDescription, live: set[int]) -> bool:
    """Kafka 2.8's shouldPrintPartition (one report flag at most, see _check_reports)."""
    if args.under_replicated_partitions:
        return p.is_under_replicated()
    if args.unavailable_partitions:
        return p.is_unavailable(live)
    return True


def _describe(args: argparse.Namespace) -> int:
    from admin import topics
    from admin.errors import UnknownTopicError
    from zkdata import paths

    _check_reports(args)
    names = args.topic
    if args.exclude_internal and names:
        # Kafka filters the names before it checks they exist: an internal topic named
        # with --exclude-internal is one that does not exist as expected.
        internal = [n for n in names if n in paths.INTERNAL_TOPICS]
        if internal and not args.if_exists:
            raise UnknownTopicError(
                f"topic(s) {', '.join(repr(n) for n in internal)} do not exist as expected"
                " (--exclude-internal leaves out internal topics)"
            )
        names = [n for n in names if n not in paths.INTERNAL_TOPICS]
    with zk_session(args) as zk:
        result = topics.describe_topics(zk, names, if_exists=args.if_exists)
    report_problems(result.problems)
    if args.exclude_internal:
        result.topics = [t for t in result.topics if t.name not in paths.INTERNAL_TOPICS]
    if args.topics_with_overrides:
        result.topics = [t for t in result.topics if t.config]
    if args.json:
        _describe_json(args, result)
    else:
        _describe_text(args, result)
    return 0


def _describe_json(args: argparse.Namespace, result: DescribeResult) -> None:
    filtering = _filtering(args)
    docs = []
    for t in result.topics:
        doc = t.to_json(result.live_brokers)
        keep = [p for p in t.partitions if _selected(args, p, result.live_brokers)]
        if args.topics_with_overrides:
            keep = []  # the topics alone, as the text
        doc["partitions"] = [p.to_json(result.live_brokers) for p in keep]
        if keep or not filtering:
            docs.append(doc)
    print_json(
        {
            "topics": docs,
            "live_brokers": sorted(result.live_brokers),
            "problems": result.problems.to_json(),
        }
    )


def _describe_text(args: argparse.Namespace, result: DescribeResult) -> None:
    from zkdata.znodes import topic_id_to_str

    # Kafka 2.8's TopicCommand lines, field for field (scripts split them on tabs): no
    # TopicId without one, no leader epoch (--json has it).
    filtering = _filtering(args)
    deletion = ["MarkedForDeletion: true"]
    for t in result.topics:
        if not filtering:
            configs = ",".join(f"{k}={v}" for k, v in sorted(t.config.items()))
            if t.config_problem:
                configs = f"(malformed config znode: {t.config_problem})"
            topic_id = [f"TopicId: {topic_id_to_str(t.topic_id)}"] if t.topic_id else []
            out_fields(
                [
                    f"Topic: {t.name}",
                    *topic_id,
                    f"PartitionCount: {len(t.partitions)}",
                    f"ReplicationFactor: {t.replication_factor}",
                    f"Configs: {configs}",
                    *(deletion if t.marked_for_deletion else []),
                ]
            )
        if args.topics_with_overrides:
            continue
        for p in t.partitions:
            if not _selected(args, p, result.live_brokers):
                continue
            leader = "none" if p.leader is None else str(p.leader)
            fields = [
                "",  # the line starts with a tab
                f"Topic: {t.name}",
                f"Partition: {p.partition}",
                f"Leader: {leader}",
                f"Replicas: {ids(p.replicas)}",
                f"Isr: {ids(p.isr)}",
            ]
            if p.adding_replicas:
                fields.append(f"Adding Replicas: {ids(p.adding_replicas)}")
            if p.removing_replicas:
                fields.append(f"Removing Replicas: {ids(p.removing_replicas)}")
            if t.marked_for_deletion:
                fields += deletion
            if p.state_problem:
                fields.append(f"(malformed state znode: {p.state_problem})")
            elif p.state is None:
                fields.append("(no state znode yet)")
            out_fields(fields)


def _add_partitions(args: argparse.Namespace) -> int:
    from admin import topics
    from controller.assignment import RackAwareMode

    total, assignment = topics.parse_add_partitions(
        args.topic, args.partitions, args.replica_assignment
    )
    mode = RackAwareMode.DISABLED if args.disable_rack_aware else RackAwareMode.ENFORCED
    with zk_session(args) as zk:
        result = topics.add_partitions(
            zk,
            args.topic,
            total,
            replica_assignment=assignment,
            rack_aware_mode=mode,
            if_exists=args.if_exists,
        )
    report_problems(result.problems)
    if not result.exists:
        out(f"Topic {result.name} does not exist; nothing done (--if-exists).")
        return 0
    for w in result.warnings:
        warn(w)
    added = " ".join(f"{p}:{ids(r)}" for p, r in sorted(result.added.items()))
    out(f"Adding partitions succeeded! Topic {result.name}: new partitions {added}")
    return 0


def _alter_config(args: argparse.Namespace) -> int:
    from admin import topics

    additions, deletions = topics.parse_config_alteration(
        args.topic, args.add_config, args.delete_config
    )
    with zk_session(args) as zk:
        result = topics.alter_topic_config(zk, args.topic, additions, deletions)
    report_problems(result.problems)
    shown = ",".join(f"{k}={v}" for k, v in sorted(result.after.items())) or "(none)"
    out(f"Completed updating config for topic {result.name}. Overrides now: {shown}")
    return 0
