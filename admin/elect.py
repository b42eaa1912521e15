"""Preferred replica leader election through /admin/preferred_replica_election (Kafka's
ZooKeeper-based kafka-preferred-replica-election.sh and kafka-leader-election.sh
--election-type preferred).

The controller moves leadership to each partition's first replica only if it is live and
in the ISR; this module also predicts, from what ZooKeeper shows now, which partitions
will stay as they are and why, so the user is not left wondering.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from admin import metadata
from admin.errors import AdminError, InvalidArgumentError, Problems
from admin.topics import MAX_ID, check_topic_name
from zkdata import paths, znodes
from zkdata.client import NodeExistsError, ZkClient
from zkdata.znodes import PartitionState, TopicAssignment, TopicPartition


@dataclass(frozen=True)
class ElectionScope:
    """Which partitions: every one, one topic (optionally one partition), or a list."""

    all_partitions: bool = False
    topic: str | None = None
    partition: int | None = None
    partitions: tuple[TopicPartition, ...] | None = None


def parse_election_json(text: str, source: str = "election JSON") -> list[TopicPartition]:
    """``{"partitions":[{"topic":"t","partition":0},...]}``; duplicates are an error."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise InvalidArgumentError(f"{source}: not valid JSON ({e})") from None
    except RecursionError:  # json.loads's answer to deep nesting, not a ValueError
        raise InvalidArgumentError(f"{source}: JSON nested too deeply") from None
    items = obj.get("partitions") if isinstance(obj, dict) else None
    if not isinstance(items, list) or not items:
        raise InvalidArgumentError(f"{source}: expected a non-empty 'partitions' list")
    out: list[TopicPartition] = []
    for item in items:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        if (
            not isinstance(topic, str)
            or not isinstance(partition, int)
            or isinstance(partition, bool)
            or not 0 <= partition <= MAX_ID
        ):
            raise InvalidArgumentError(
                f"{source}: entry {json.dumps(item)} needs a string 'topic' and an integer"
                f" 'partition' from 0 to {MAX_ID}"
            )
        problem = paths.topic_name_problem(topic)
        if problem is not None:
            raise InvalidArgumentError(f"{source}: {problem}")
        out.append(TopicPartition(topic, partition))
    dupes = sorted({str(tp) for tp in out if out.count(tp) > 1})
    if dupes:
        raise InvalidArgumentError(f"{source}: duplicate partitions: {', '.join(dupes)}")
    return out


def parse_scope(
    *,
    all_partitions: bool = False,
    topic: str | None = None,
    partition: int | None = None,
    partitions: Sequence[TopicPartition] | None = None,
) -> ElectionScope:
    """Exactly one of all, --topic (with an optional --partition) or a JSON list."""
    given = sum((all_partitions, topic is not None, partitions is not None))
    if given != 1:
        raise InvalidArgumentError(
            "give exactly one of --all-topic-partitions, --topic (with an optional"
            " --partition) or --path-to-json-file"
        )
    if partition is not None and topic is None:
        raise InvalidArgumentError("--partition needs --topic")
    if topic is not None:
        check_topic_name(topic)
    if partition is not None and not 0 <= partition <= MAX_ID:
        raise InvalidArgumentError(f"--partition must be from 0 to {MAX_ID}, not {partition}")
    return ElectionScope(
        all_partitions=all_partitions,
        topic=topic,
        partition=partition,
        partitions=None if partitions is None else tuple(partitions),
    )


def resolve_scope(
    scope: ElectionScope,
    topics: Mapping[str, TopicAssignment],
    marked_for_deletion: Collection[str],
    malformed_topics: Collection[str] = (),
) -> list[TopicPartition]:
    """Pure: the partitions the scope names; AdminError if any of them does not exist."""
    if scope.all_partitions:
        return sorted(
            TopicPartition(t, p)
            for t, a in topics.items()
            if t not in marked_for_deletion
            for p in a.partitions
        )
    if scope.topic is not None:
        a = topics.get(scope.topic)
        if a is None:
            what = "has a malformed znode" if scope.topic in malformed_topics else "does not exist"
            raise AdminError(f"topic {scope.topic!r} {what}")
        if scope.partition is None:
            wanted = [TopicPartition(scope.topic, p) for p in sorted(a.partitions)]
        else:
            wanted = [TopicPartition(scope.topic, scope.partition)]
    else:
        wanted = list(scope.partitions or ())
    absent = [
        str(tp)
        for tp in wanted
        if tp.topic not in topics or tp.partition not in topics[tp.topic].partitions
    ]
    if absent:
        raise AdminError(f"non-existent partitions: {', '.join(absent)}")
    deleting = sorted({tp.topic for tp in wanted if tp.topic in marked_for_deletion})
    if deleting:
        raise AdminError(f"topic(s) marked for deletion: {', '.join(deleting)}")
    return wanted


@dataclass(frozen=True)
class ElectionNote:
    """A partition whose leader will not move, and why."""

    partition: TopicPartition
    preferred: int
    reason: str


def predict_unchanged(
    partitions: Sequence[TopicPartition],
    topics: Mapping[str, TopicAssignment],
    states: Mapping[TopicPartition, PartitionState],
    live_brokers: Collection[int],
) -> list[ElectionNote]:
    """Pure: partitions already led by their preferred replica, or whose preferred replica
    cannot lead (not live, not in the ISR), as Kafka's preferred election decides."""
    notes = []
    for tp in partitions:
        preferred = topics[tp.topic].partitions[tp.partition][0]
        state = states.get(tp)
        if state is None:
            notes.append(ElectionNote(tp, preferred, "no leadership yet (no state znode)"))
        elif state.leader_and_isr.leader == preferred:
            notes.append(ElectionNote(tp, preferred, "already led by its preferred replica"))
        elif preferred not in live_brokers:
            notes.append(ElectionNote(tp, preferred, f"preferred replica {preferred} is not live"))
        elif preferred not in state.leader_and_isr.isr:
            notes.append(
                ElectionNote(tp, preferred, f"preferred replica {preferred} is not in the ISR")
            )
    return notes


@dataclass
class ElectionResult:
    partitions: list[TopicPartition]
    unchanged: list[ElectionNote]
    problems: Problems


def start_preferred_election(zk: ZkClient, scope: ElectionScope) -> ElectionResult:
    """Write /admin/preferred_replica_election; refuse while one is pending. Nothing is
    written when the scope names no partition (every partition, and there are none)."""
    problems = Problems()
    if zk.exists(paths.PREFERRED_REPLICA_ELECTION) is not None:
        raise AdminError(
            "a preferred replica election is already in progress"
            f" ({paths.PREFERRED_REPLICA_ELECTION} exists); try again when the controller"
            " has finished it"
        )
    if scope.all_partitions:
        names = metadata.topic_names(zk)
    elif scope.topic is not None:
        names = [scope.topic]
    else:
        names = sorted({tp.topic for tp in scope.partitions or ()})
    records, _missing = metadata.read_topics(zk, names, problems)
    topics = {n: r.assignment for n, r in records.items()}
    malformed = {n for n in names if paths.topic(n) in problems.paths()}
    wanted = resolve_scope(scope, topics, metadata.topics_marked_for_deletion(zk), malformed)
    if not wanted:
        # Every partition of a cluster that has none: nothing to do, as Kafka 2.8's tools
        # find (both exit 0); an empty znode would only make the controller read it.
        return ElectionResult([], [], problems)
    data = znodes.encode_partition_list(wanted)
    if len(data) > znodes.MAX_ZNODE_BYTES:
        raise AdminError(
            f"{len(wanted)} partitions do not fit in one election znode ({len(data)} bytes);"
            " elect them topic by topic"
        )
    states = metadata.read_partition_states(zk, wanted, problems)
    unchanged = predict_unchanged(
        wanted, topics, states, metadata.registered_broker_ids(zk, problems)
    )
    try:
        zk.create(paths.PREFERRED_REPLICA_ELECTION, data, make_parents=True)
    except NodeExistsError:
        raise AdminError(
            "a preferred replica election is already in progress"
            f" ({paths.PREFERRED_REPLICA_ELECTION} was created meanwhile)"
        ) from None
    return ElectionResult(wanted, unchanged, problems)
