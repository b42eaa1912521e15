"""Kafka 0.8's consumer offsets, kept in ZooKeeper: what OffsetCommit v0 writes and
OffsetFetch v0 reads, as Kafka 2.8's KafkaZkClient.setOrCreateConsumerOffset and
getConsumerOffset do, at /consumers/<group>/offsets/<topic>/<partition> (zkdata/paths.py).
The group coordinator never sees them, nor they its offsets.

Either raises what ZooKeeper raised (a lost connection, a timeout, a create that lost a
race), MalformedZnode for a znode that holds no offset, or ValueError for a group id that
makes no valid path (Kafka's ZooKeeper client throws IllegalArgumentException): OffsetCommit
and OffsetFetch answer each UNKNOWN_SERVER_ERROR (Errors.forException).
"""

from __future__ import annotations

from kazoo.exceptions import NoNodeError

from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import TopicPartition, decode_consumer_offset, encode_consumer_offset


def _path(group_id: str, tp: TopicPartition) -> str:
    path = paths.consumer_offset(group_id, tp.topic, tp.partition)
    problem = paths.zookeeper_path_problem(path)
    if problem is not None:
        raise ValueError(f"group {group_id!r} makes an invalid ZooKeeper path {path!r}: {problem}")
    return path


def set_or_create_consumer_offset(
    zk: ZkClient, group_id: str, tp: TopicPartition, offset: int
) -> None:
    """Write the offset: set the znode, or, if it is not there, create it and any parent
    missing (createRecursive; one created meanwhile by another commit fails the create,
    NodeExistsError, as Kafka's throwIfPathExists does)."""
    path = _path(group_id, tp)
    data = encode_consumer_offset(offset)
    try:
        zk.set(path, data)
    except NoNodeError:
        zk.create(path, data, make_parents=True)


def get_consumer_offset(zk: ZkClient, group_id: str, tp: TopicPartition) -> int | None:
    """The offset committed, or None when there is none (no znode, or one with no data)."""
    path = _path(group_id, tp)
    got = zk.get(path)
    return None if got is None else decode_consumer_offset(path, got[0])
