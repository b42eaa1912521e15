"""Which committed offsets have expired, and which groups are gone with them: Kafka 2.8's
rules (KIP-211: GroupMetadata.removeExpiredOffsets, GroupMetadataManager.cleanupGroupMetadata)
as pure functions; the coordinator writes the tombstones.

An offset committed with an expire timestamp (OffsetCommit v2-v4's ``retention_time_ms``)
expires then. Any other expires ``offsets.retention.minutes`` after a base time, by the
cases of Kafka's removeExpiredOffsets:

- a group of no protocol type (a consumer that assigns its own partitions and only
  commits, known by its offsets alone): since the commit;
- an Empty group of a protocol type: since it became Empty, or since the commit if that
  time is not known;
- a Stable consumer group (protocol type ``consumer``) whose subscriptions are known:
  only the offsets of topics none of its members subscribes to, counted from their commit
  (the subscriptions are the generation's, read when it started: Kafka's
  GroupMetadata.subscribedTopics);
- any other group (rebalancing, or of another protocol type): none.

An offset whose commit is still being written never expires (the write would land after
the tombstone). A group left Empty with no offset is deleted (Dead), its metadata record
tombstoned.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Final

from groups.offset_records import NO_TIMESTAMP, CommittedOffset
from zkdata.znodes import TopicPartition

__all__ = ["CONSUMER_PROTOCOL", "expired_offsets", "subscribed_topics"]

CONSUMER_PROTOCOL: Final = "consumer"
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")


def expired_offsets(
    offsets: Mapping[TopicPartition, CommittedOffset],
    *,
    now_ms: int,
    retention_ms: int,
    empty: bool,
    stable: bool,
    protocol_type: str | None,
    empty_since_ms: int | None,
    subscribed: frozenset[str] | None,
    pending: Iterable[TopicPartition] = (),
) -> list[TopicPartition]:
    """The partitions whose committed offset has expired (see the module's docstring).
    ``empty``, ``stable``: the group's state is Empty, Stable (a group known by its offsets
    alone is Empty); ``subscribed``: the topics the members of a consumer group's
    generation subscribe to (None: unknown, so nothing of a Stable group expires)."""
    since_empty = False
    kept_topics: frozenset[str] = frozenset()
    if protocol_type is None:
        pass
    elif empty:
        since_empty = True
    elif stable and protocol_type == CONSUMER_PROTOCOL and subscribed is not None:
        kept_topics = subscribed
    else:
        return []
    skip = frozenset(pending)
    expired: list[TopicPartition] = []
    for tp, committed in offsets.items():
        if tp in skip or tp.topic in kept_topics:
            continue
        if committed.expire_timestamp_ms != NO_TIMESTAMP:
            if now_ms >= committed.expire_timestamp_ms:
                expired.append(tp)
            continue
        base = committed.commit_timestamp_ms
        if since_empty and empty_since_ms is not None:
            base = empty_since_ms
        if now_ms - base >= retention_ms:
            expired.append(tp)
    return expired


def subscribed_topics(subscriptions: Iterable[bytes]) -> frozenset[str] | None:
    """The topics named by consumer protocol subscriptions, each read as version 0 whatever
    version it says, negative too (Kafka 2.8's computeSubscribedTopics: deserializeVersion,
    then deserializeSubscription(buffer, 0), as every version leads with v0's fields): the
    topics, an array of strings (UTF-8, a malformed sequence replaced, as Java's new String
    does), then the user data, nullable bytes; what follows (a later version's fields) is
    not read. None if one does not parse: a field cut short (Kafka's BufferUnderflowException,
    a SchemaException: the subscriptions unknown, nothing of the group expires while it
    has members), and a negative array or string length or one past the data, which
    Kafka's generated reader throws a RuntimeException on, out of the join phase's end:
    taken as unknown here."""
    topics: set[str] = set()
    try:
        for data in subscriptions:
            _INT16.unpack_from(data, 0)  # the version, not looked at
            (count,) = _INT32.unpack_from(data, 2)
            if count < 0 or count > len(data):
                return None
            pos = 6
            for _ in range(count):
                (length,) = _INT16.unpack_from(data, pos)
                pos += 2
                if length < 0 or pos + length > len(data):
                    return None
                topics.add(data[pos : pos + length].decode("utf-8", "replace"))
                pos += length
            (user_data,) = _INT32.unpack_from(data, pos)
            if pos + 4 + max(user_data, 0) > len(data):
                return None
    except struct.error:
        return None
    return frozenset(topics)
