"""Which committed offsets have expired, and which groups are gone with them: Kafka 2.8's
rules (KIP-211: GroupMetadata.removeExpiredOffsets, GroupMetadataManager.cleanupGroupMetadata)
as pure functions; the coordinator writes the tombstones.

An offset committed with an expire timestamp (OffsetCommit v2-v4's ``retention_time_ms``)
expires then. Any other expires ``offsets.retention.minutes`` after a base time:

- a group with no members now (Empty): since it became Empty, or since the commit if that
  time is not known (a group that never had members: a consumer that assigns its own
  partitions and only commits);
- a consumer group with members (protocol type ``consumer``): only the offsets of topics
  none of its members subscribes to, counted from their commit;
- any other group with members: none.

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
    has_members: bool,
    protocol_type: str | None,
    empty_since_ms: int | None,
    subscribed: frozenset[str] | None,
    pending: Iterable[TopicPartition] = (),
) -> list[TopicPartition]:
    """The partitions whose committed offset has expired (see the module's docstring).
    ``subscribed``: the topics a consumer group's members subscribe to (None: unknown, so
    nothing of a group with members expires)."""
    if has_members and (protocol_type != CONSUMER_PROTOCOL or subscribed is None):
        return []
    skip = frozenset(pending)
    expired: list[TopicPartition] = []
    for tp, committed in offsets.items():
        if tp in skip or (has_members and subscribed is not None and tp.topic in subscribed):
            continue
        if committed.expire_timestamp_ms != NO_TIMESTAMP:
            if now_ms >= committed.expire_timestamp_ms:
                expired.append(tp)
            continue
        base = committed.commit_timestamp_ms
        if not has_members and empty_since_ms is not None:
            base = empty_since_ms
        if now_ms - base >= retention_ms:
            expired.append(tp)
    return expired


def subscribed_topics(subscriptions: Iterable[bytes]) -> frozenset[str] | None:
    """The topics named by consumer protocol subscriptions (ConsumerProtocolSubscription
    v0-v3: a version, then the topics as an array of strings; what follows is not
    needed); None if one does not parse (Kafka then expires none of the group's offsets
    while it has members)."""
    topics: set[str] = set()
    try:
        for data in subscriptions:
            (version,) = _INT16.unpack_from(data, 0)
            if version < 0:
                return None
            (count,) = _INT32.unpack_from(data, 2)
            if count < 0 or count > len(data):
                return None
            pos = 6
            for _ in range(count):
                (length,) = _INT16.unpack_from(data, pos)
                pos += 2
                if length < 0 or pos + length > len(data):
                    return None
                topics.add(data[pos : pos + length].decode())
                pos += length
    except (struct.error, UnicodeDecodeError):
        return None
    return frozenset(topics)
