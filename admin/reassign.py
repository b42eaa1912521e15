"""Partition reassignment through /admin/reassign_partitions (Kafka's ZooKeeper-based
kafka-reassign-partitions.sh): parse and validate the targets, start, verify.

The controller carries a reassignment out (adding replicas, waiting for them to join the
ISR, moving leadership, removing replicas) and deletes each partition from the znode when
it is done; this module only asks for it and reports how far it got.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from admin import metadata
from admin.errors import AdminError, InvalidArgumentError, Problems
from admin.metadata import PendingReassignment
from admin.topics import MAX_ID, check_topic_name, parse_replicas
from controller.assignment import (
    AssignmentError,
    BrokerMetadata,
    RackAwareMode,
    assign_replicas_to_brokers,
)
from zkdata import paths, znodes
from zkdata.client import NodeExistsError, ZkClient
from zkdata.znodes import TopicAssignment, TopicPartition

Targets = dict[TopicPartition, tuple[int, ...]]

IN_PROGRESS_MESSAGE = (
    "a reassignment is in progress ({path} exists); follow it with `zkctl reassign --verify"
    " --reassignment-json-file <file>` and start a new one when it is done"
)


def _bad(source: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{source}: {message}")


def _is_id(value: object) -> TypeGuard[int]:
    """A broker or partition id: a JSON integer from 0 to a Java int's maximum, as
    Kafka's parser reads it (and the wire carries it)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID


def _int_field(source: str, item: Mapping[str, Any], key: str) -> int:
    value = item.get(key)
    if not _is_id(value):
        raise _bad(source, f"{key!r} must be an integer from 0 to {MAX_ID} in {json.dumps(item)}")
    return value


def parse_reassignment_json(text: str, source: str = "reassignment JSON") -> Targets:
    """Kafka's reassignment file: ``{"version":1,"partitions":[{"topic":..,"partition":..,
    "replicas":[..]}]}``. ``log_dirs`` is accepted when every entry is "any" (the only
    placement this cluster has). Raises InvalidArgumentError naming the problem."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise _bad(source, f"not valid JSON ({e})") from None
    except RecursionError:  # json.loads's answer to deep nesting, not a ValueError
        raise _bad(source, "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise _bad(source, "expected a JSON object with a 'partitions' list")
    version = obj.get("version", 1)
    if version != 1:
        raise _bad(source, f"unsupported version {version!r} (only 1)")
    items = obj.get("partitions")
    if not isinstance(items, list):
        raise _bad(source, "'partitions' must be a list")
    if not items:
        raise _bad(source, "the partition reassignment list is empty")
    targets: Targets = {}
    duplicates: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad(source, f"partition entry {json.dumps(item)} is not an object")
        topic = item.get("topic")
        if not isinstance(topic, str):
            raise _bad(source, f"'topic' must be a string in {json.dumps(item)}")
        problem = paths.topic_name_problem(topic)
        if problem is not None:
            raise _bad(source, problem)
        partition = _int_field(source, item, "partition")
        replicas = item.get("replicas")
        if not isinstance(replicas, list) or not replicas or not all(_is_id(r) for r in replicas):
            raise _bad(
                source,
                f"'replicas' must be a non-empty list of broker ids (0 to {MAX_ID}) in"
                f" {json.dumps(item)}",
            )
        tp = TopicPartition(topic, partition)
        if len(set(replicas)) != len(replicas):
            raise _bad(source, f"the replica list of {tp} contains duplicates: {replicas}")
        log_dirs = item.get("log_dirs")
        if log_dirs is not None and (
            not isinstance(log_dirs, list)
            or len(log_dirs) != len(replicas)
            or any(d != "any" for d in log_dirs)
        ):
            raise _bad(source, f'log_dirs of {tp}: only "any" (one per replica) is supported here')
        if tp in targets:
            duplicates.append(str(tp))
        targets[tp] = tuple(replicas)
    if duplicates:
        raise _bad(source, f"duplicate partitions: {', '.join(duplicates)}")
    return targets


def targets_from_args(topic: str, partition: int, replicas: str) -> Targets:
    """One partition from ``--topic T --partition P --replicas 1,2,3``."""
    check_topic_name(topic)
    if not 0 <= partition <= MAX_ID:
        raise InvalidArgumentError(f"--partition must be from 0 to {MAX_ID}, not {partition}")
    return {TopicPartition(topic, partition): tuple(parse_replicas(replicas))}


def parse_topics_to_move_json(text: str, source: str = "topics JSON") -> list[str]:
    """Kafka's --topics-to-move-json-file: ``{"topics":[{"topic":"t"},...],"version":1}``.
    A topic listed twice is refused, as Kafka refuses it."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise _bad(source, f"not valid JSON ({e})") from None
    except RecursionError:  # json.loads's answer to deep nesting, not a ValueError
        raise _bad(source, "JSON nested too deeply") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("topics"), list):
        raise _bad(source, "expected a JSON object with a 'topics' list")
    version = obj.get("version", 1)
    if version != 1:
        raise _bad(source, f"unsupported version {version!r} (only 1)")
    names: list[str] = []
    for item in obj["topics"]:
        if not isinstance(item, dict) or not isinstance(item.get("topic"), str):
            raise _bad(source, f"each entry needs a 'topic' name: {json.dumps(item)}")
        check_topic_name(item["topic"])
        names.append(item["topic"])
    if not names:
        raise _bad(source, "the topic list is empty")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _bad(
            source, f"List of topics to reassign contains duplicate entries: {','.join(dupes)}"
        )
    return names


def proposed_assignment(
    current: Mapping[TopicPartition, tuple[int, ...]],
    brokers: Sequence[BrokerMetadata],
    *,
    rack_aware: bool = True,
    rng: random.Random | None = None,
) -> Targets:
    """Kafka's --generate (ReassignPartitionsCommand.calculateAssignment): each topic's
    partitions spread over ``brokers`` as a new topic's would be (assignReplicasToBrokers,
    rack-aware unless told not to), keeping the topic's replication factor (its first
    partition's). Raises AdminError when they cannot hold it, or only some have a rack."""
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for tp, replicas in current.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = replicas
    mode = RackAwareMode.ENFORCED if rack_aware else RackAwareMode.DISABLED
    proposed: Targets = {}
    for topic, parts in sorted(by_topic.items()):
        factor = len(parts[min(parts)])
        try:
            spread = assign_replicas_to_brokers(
                brokers, len(parts), factor, rng=rng, rack_aware_mode=mode
            )
        except AssignmentError as e:
            raise AdminError(f"topic {topic!r}: {e}") from None
        proposed.update((TopicPartition(topic, p), tuple(r)) for p, r in sorted(spread.items()))
    return proposed


def check_targets(
    targets: Mapping[TopicPartition, tuple[int, ...]],
    topics: Mapping[str, TopicAssignment],
    registered_brokers: Collection[int],
    marked_for_deletion: Collection[str],
    malformed_topics: Collection[str] = (),
) -> None:
    """Pure: raise AdminError listing every target that cannot be reassigned."""
    problems: list[str] = []
    for name in sorted({tp.topic for tp in targets}):
        if name in malformed_topics:
            problems.append(f"topic {name!r} has a malformed znode {paths.topic(name)}")
        elif name not in topics:
            problems.append(f"topic {name!r} does not exist")
        elif name in marked_for_deletion:
            problems.append(f"topic {name!r} is marked for deletion")
    absent = sorted(
        str(tp)
        for tp in targets
        if tp.topic in topics and tp.partition not in topics[tp.topic].partitions
    )
    if absent:
        problems.append(f"non-existent partitions: {', '.join(absent)}")
    unknown = sorted({b for r in targets.values() for b in r} - set(registered_brokers))
    if unknown:
        problems.append(
            f"broker(s) {', '.join(map(str, unknown))} are not registered"
            f" (registered: {', '.join(map(str, sorted(registered_brokers))) or 'none'})"
        )
    if problems:
        raise AdminError("cannot reassign: " + "; ".join(problems))


@dataclass
class StartReassignmentResult:
    targets: Targets
    current: Targets
    problems: Problems


def _snapshot(
    zk: ZkClient, targets: Mapping[TopicPartition, tuple[int, ...]], problems: Problems
) -> dict[str, TopicAssignment]:
    names = sorted({tp.topic for tp in targets})
    records, _missing = metadata.read_topics(zk, names, problems)
    return {n: r.assignment for n, r in records.items()}


def start_reassignment(
    zk: ZkClient, targets: Mapping[TopicPartition, tuple[int, ...]]
) -> StartReassignmentResult:
    """Validate and write /admin/reassign_partitions; refuse while one is in progress."""
    data = reassignment_znode_data(targets)
    problems = Problems()
    if zk.exists(paths.REASSIGN_PARTITIONS) is not None:
        raise AdminError(IN_PROGRESS_MESSAGE.format(path=paths.REASSIGN_PARTITIONS))
    topics = _snapshot(zk, targets, problems)
    check_targets(
        targets,
        topics,
        metadata.registered_broker_ids(zk, problems),
        metadata.topics_marked_for_deletion(zk),
        malformed_topics={tp.topic for tp in targets if paths.topic(tp.topic) in problems.paths()},
    )
    current = {tp: topics[tp.topic].partitions[tp.partition] for tp in targets}
    try:
        zk.create(paths.REASSIGN_PARTITIONS, data, make_parents=True)
    except NodeExistsError:
        raise AdminError(IN_PROGRESS_MESSAGE.format(path=paths.REASSIGN_PARTITIONS)) from None
    return StartReassignmentResult(dict(targets), current, problems)


def reassignment_znode_data(targets: Mapping[TopicPartition, tuple[int, ...]]) -> bytes:
    """Pure: /admin/reassign_partitions's data for ``targets``; AdminError when it is more
    than ZooKeeper takes (its server would drop the connection, not answer an error)."""
    data = znodes.encode_reassignment(targets)
    if len(data) > znodes.MAX_ZNODE_BYTES:
        raise AdminError(
            f"the reassignment of {len(targets):,} partitions would take {len(data):,} bytes,"
            f" more than a znode holds ({znodes.MAX_ZNODE_BYTES:,}, ZooKeeper's"
            " jute.maxbuffer): split the file and run each part once the previous one is done"
        )
    return data


def format_reassignment_json(targets: Mapping[TopicPartition, tuple[int, ...]]) -> str:
    """Kafka 2.8's formatAsReassignmentJson (what --generate and --execute print, and
    --reassignment-json-file reads): compact, the partitions in topic-partition order, each
    with "log_dirs" ("any" per replica: this cluster places no replica on a named
    directory). The znode's encoding (znodes.encode_reassignment) has no log_dirs."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(replicas),
                    "log_dirs": ["any"] * len(replicas),
                }
                for tp, replicas in sorted(targets.items())
            ],
        },
        separators=(",", ":"),
    )


@dataclass(frozen=True)
class PartitionReassignmentStatus:
    partition: TopicPartition
    target: tuple[int, ...]
    current: tuple[int, ...] | None
    # "complete", "in_progress", "failed", or "unknown" (topic or partition gone, malformed)
    status: str
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.partition.topic,
            "partition": self.partition.partition,
            "target": list(self.target),
            "current": None if self.current is None else list(self.current),
            "status": self.status,
            "detail": self.detail,
        }


def reassignment_status(
    tp: TopicPartition,
    target: tuple[int, ...],
    assignment: TopicAssignment | None,
    pending: PendingReassignment | None,
) -> PartitionReassignmentStatus:
    """Pure: done when the assignment equals the target and nothing is being added or
    removed; in progress while the partition is still pending or moving."""
    if assignment is None or tp.partition not in assignment.partitions:
        return partition_status(tp, target, None)
    return partition_status(
        tp,
        target,
        assignment.partitions[tp.partition],
        assignment.adding_replicas.get(tp.partition, ()),
        assignment.removing_replicas.get(tp.partition, ()),
        pending=pending is not None and pending.holds(tp),
    )


def partition_status(
    tp: TopicPartition,
    target: tuple[int, ...],
    current: tuple[int, ...] | None,
    adding: tuple[int, ...] = (),
    removing: tuple[int, ...] = (),
    *,
    pending: bool = False,
) -> PartitionReassignmentStatus:
    """Pure: a partition's reassignment status from its replicas (None: no such
    partition), the replicas being added and removed, and whether a request for it is
    still pending."""
    if current is None:
        return PartitionReassignmentStatus(tp, target, None, "unknown", "partition not found")
    if adding or removing or pending:
        detail = ""
        if adding or removing:
            detail = f"adding {list(adding)}, removing {list(removing)}"
        return PartitionReassignmentStatus(tp, target, current, "in_progress", detail)
    if current == target:
        return PartitionReassignmentStatus(tp, target, current, "complete")
    return PartitionReassignmentStatus(
        tp, target, current, "failed", f"the replicas are {list(current)}, not the target"
    )


@dataclass
class VerifyResult:
    statuses: list[PartitionReassignmentStatus]
    pending: bool
    problems: Problems

    @property
    def complete(self) -> bool:
        return all(s.status == "complete" for s in self.statuses)


def verify_reassignment(
    zk: ZkClient, targets: Mapping[TopicPartition, tuple[int, ...]]
) -> VerifyResult:
    problems = Problems()
    pending = metadata.pending_reassignment(zk, problems)
    topics = _snapshot(zk, targets, problems)
    malformed = set(problems.paths())
    statuses = [
        PartitionReassignmentStatus(
            tp, target, None, "unknown", f"malformed topic znode {paths.topic(tp.topic)}"
        )
        if paths.topic(tp.topic) in malformed
        else reassignment_status(tp, target, topics.get(tp.topic), pending)
        for tp, target in sorted(targets.items())
    ]
    return VerifyResult(statuses, pending is not None, problems)
