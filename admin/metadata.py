"""Reading the cluster's metadata from ZooKeeper for the admin commands.

Every reader takes a Problems collector: a znode whose data cannot be decoded is recorded
there (with its path) and left out of the result, so one bad znode never stops a command.
Reads of many znodes go through ZkClient.get_many (pipelined multiReads).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from admin.errors import Problems
from controller.assignment import BrokerMetadata
from zkdata import paths, znodes
from zkdata.client import ZkClient, ZnodeStat
from zkdata.znodes import (
    BrokerRegistration,
    MalformedZnode,
    PartitionState,
    TopicAssignment,
    TopicPartition,
)


def registered_broker_ids(zk: ZkClient, problems: Problems) -> set[int]:
    """Ids of the brokers registered in /brokers/ids (the live brokers), data unread."""
    ids: set[int] = set()
    for child in zk.get_children(paths.BROKER_IDS) or []:
        broker_id = paths.parse_broker_id(child)
        if broker_id is None:
            problems.add(MalformedZnode(f"{paths.BROKER_IDS}/{child}", "not a broker id; ignored"))
        else:
            ids.add(broker_id)
    return ids


def live_brokers(zk: ZkClient, problems: Problems) -> dict[int, BrokerRegistration]:
    """The registered brokers whose registration decodes, by id."""
    ids = sorted(registered_broker_ids(zk, problems))
    out: dict[int, BrokerRegistration] = {}
    for broker_id, got in zip(ids, zk.get_many([paths.broker(i) for i in ids]), strict=True):
        if got is None:  # deregistered between the two reads
            continue
        try:
            out[broker_id] = znodes.decode_broker(broker_id, got[0])
        except MalformedZnode as e:
            problems.add(e)
    return out


def broker_metadatas(registrations: Iterable[BrokerRegistration]) -> list[BrokerMetadata]:
    """What replica assignment needs of each live broker: its id and rack."""
    return [BrokerMetadata(r.broker_id, r.rack) for r in registrations]


def topic_names(zk: ZkClient) -> list[str]:
    return sorted(zk.get_children(paths.BROKER_TOPICS) or [])


def topics_marked_for_deletion(zk: ZkClient) -> set[str]:
    return set(zk.get_children(paths.DELETE_TOPICS) or [])


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic znode's decoded data and the stat it was read with (for conditional writes)."""

    assignment: TopicAssignment
    stat: ZnodeStat


def read_topics(
    zk: ZkClient, names: Sequence[str], problems: Problems
) -> tuple[dict[str, TopicRecord], set[str]]:
    """Decoded topic znodes by name, and the names whose znode does not exist.

    A malformed topic znode is in neither: it is in ``problems``.
    """
    records: dict[str, TopicRecord] = {}
    missing: set[str] = set()
    for name, got in zip(names, zk.get_many([paths.topic(n) for n in names]), strict=True):
        if got is None:
            missing.add(name)
            continue
        try:
            records[name] = TopicRecord(znodes.decode_topic(name, got[0]), got[1])
        except MalformedZnode as e:
            problems.add(e)
    return records, missing


def read_topic_configs(
    zk: ZkClient, names: Sequence[str], problems: Problems
) -> dict[str, dict[str, str]]:
    """Each topic's config overrides ({} when it has no /config/topics znode)."""
    out: dict[str, dict[str, str]] = {}
    for name, got in zip(names, zk.get_many([paths.topic_config(n) for n in names]), strict=True):
        if got is None:
            out[name] = {}
            continue
        try:
            out[name] = znodes.decode_topic_config(name, got[0])
        except MalformedZnode as e:
            problems.add(e)
    return out


def read_partition_states(
    zk: ZkClient, partitions: Sequence[TopicPartition], problems: Problems
) -> dict[TopicPartition, PartitionState]:
    """The state znodes that exist and decode; absent and malformed ones are left out."""
    out: dict[TopicPartition, PartitionState] = {}
    state_paths = [paths.partition_state(tp.topic, tp.partition) for tp in partitions]
    for tp, path, got in zip(partitions, state_paths, zk.get_many(state_paths), strict=True):
        if got is None:
            continue
        try:
            out[tp] = znodes.decode_partition_state(path, got[0], got[1].version)
        except MalformedZnode as e:
            problems.add(e)
    return out


@dataclass(frozen=True)
class PendingReassignment:
    """/admin/reassign_partitions as read: the targets of the entries that could be read,
    and whether the znode could be read at all (else any partition may be in it)."""

    targets: dict[TopicPartition, tuple[int, ...]]
    readable: bool = True

    def holds(self, tp: TopicPartition) -> bool:
        """Whether ``tp``'s move may still wait in the znode for the controller."""
        return not self.readable or tp in self.targets

    def holds_topic(self, topic: str) -> bool:
        return not self.readable or any(tp.topic == topic for tp in self.targets)


def pending_reassignment(zk: ZkClient, problems: Problems) -> PendingReassignment | None:
    """The content of /admin/reassign_partitions; None when it does not exist.

    A znode that cannot be read as a whole still means a reassignment is pending, of
    partitions unknown (readable False). An entry that cannot be read is reported and
    left out, as the controller skips it (and takes it out of the znode): a znode of
    such entries alone holds no partition's move.
    """
    got = zk.get(paths.REASSIGN_PARTITIONS)
    if got is None:
        return None
    try:
        targets, unreadable = znodes.decode_reassignment_entries(got[0])
    except MalformedZnode as e:
        problems.add(e)
        return PendingReassignment({}, readable=False)
    for entry_error in unreadable:
        problems.add(entry_error)
    return PendingReassignment(targets)


def all_partitions(records: Iterable[TopicRecord]) -> list[TopicPartition]:
    return sorted(
        TopicPartition(r.assignment.topic, p) for r in records for p in r.assignment.partitions
    )
