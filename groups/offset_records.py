"""Committed offsets and group metadata as records of `__consumer_offsets`, in Kafka's formats.

The bytes are those of Kafka 2.8's GroupMetadataManager (the OffsetCommitKey,
OffsetCommitValue, GroupMetadataKey and GroupMetadataValue schemas), so a log written here
reads as Kafka's and the other way round. Every key and value starts with an int16 schema
version; strings are an int16 byte length and UTF-8 (a nullable string's length -1 is
null); bytes are an int32 length and the bytes; an array is an int32 count and its
elements; integers are big-endian::

    key   v0, v1  group string, topic string, partition int32          (an offset commit)
    key   v2      group string                                         (group metadata)
    value v0      offset int64, metadata string, timestamp int64
    value v1      offset int64, metadata string, commit_timestamp int64, expire_timestamp int64
    value v2      offset int64, metadata string, commit_timestamp int64
    value v3      offset int64, leader_epoch int32, metadata string, commit_timestamp int64

and the value of a group metadata key (v2), the group's generation and its members::

    group value   protocol_type string, generation int32, protocol nullable string,
                  leader nullable string, current_state_timestamp int64 (v2 and later),
                  members array of:
    member        member_id string, group_instance_id nullable string (v3),
                  client_id string, client_host string, rebalance_timeout int32 (v1 and
                  later), session_timeout int32, subscription bytes, assignment bytes

Written are key v1, value v3 and group value v3, as Kafka 2.8 writes them (inter-broker
protocol 2.1 and later for offsets, 2.3 and later for groups); a commit with an explicit
expire timestamp is written as value v1, as Kafka does, since only v1 holds one (v1 has
no leader epoch: it is dropped, as in Kafka, where no commit carries both). A group value
older than v3 reads with no group instance ids; older than v2, with
current_state_timestamp -1; v0, with each member's rebalance timeout its session timeout
(as Kafka reads them). A null value is a tombstone: the offset (or group) was deleted.

Decoding is strict: an unknown version, a buffer too short for its fields or longer than
them, a null string, bytes or array where none is nullable, a negative length other than
-1, or a non-UTF-8 string raise `MalformedOffsetRecord`. (Kafka ignores trailing bytes,
reads any negative length of a nullable string as null and decodes bad UTF-8 with
replacement characters; none of these is ever written by Kafka or here, so each means
the record is not what it claims to be.)

A group's coordinator is the leader of partition `partition_for(group_id, partitions)` of
the topic, Kafka's `Utils.abs(groupId.hashCode) % partitions`, and every record of that
group (its offsets and its metadata) goes to that partition.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from storage.records import (
    BATCH_HEADER_SIZE,
    Compression,
    Record,
    RecordSpec,
    build_batch,
    iter_records,
    read_header,
)

__all__ = [
    "GROUP_KEY_VERSION",
    "GROUP_VALUE_VERSION",
    "NO_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "OFFSET_KEY_VERSION",
    "OFFSET_VALUE_VERSION",
    "CommittedOffset",
    "GroupKey",
    "GroupMetadata",
    "MalformedOffsetRecord",
    "MemberMetadata",
    "OffsetKey",
    "decode_group_value",
    "decode_key",
    "decode_offset_record",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "group_metadata_batch",
    "offset_commit_batch",
    "partition_for",
    "read_offset_records",
    "tombstone_batches",
]

OFFSET_KEY_VERSION: Final = 1  # the offset commit key version written (0 and 1 are read)
GROUP_KEY_VERSION: Final = 2  # the group metadata key's only version
OFFSET_VALUE_VERSION: Final = 3  # the offset commit value version written (0 to 3 are read)
GROUP_VALUE_VERSION: Final = 3  # the group metadata value version written (0 to 3 are read)
_EXPIRING_VALUE_VERSION: Final = 1  # the only value version with an expire timestamp
NO_LEADER_EPOCH: Final = -1  # RecordBatch.NO_PARTITION_LEADER_EPOCH
NO_TIMESTAMP: Final = -1  # OffsetCommitRequest.DEFAULT_TIMESTAMP: no expire timestamp
# (also a group's current_state_timestamp when it has none: Kafka's default, and what a
# group value older than v2 reads as)

_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
# The most a tombstone record takes besides its key: its length, attributes, timestamp
# delta (0), offset delta and key length (varints of at most 5 bytes each), the null
# value's length and the header count.
_TOMBSTONE_OVERHEAD: Final = 5 + 1 + 1 + 5 + 5 + 1 + 1
_INT64: Final = struct.Struct(">q")
_MAX_STRING_BYTES: Final = 0x7FFF  # an int16 length
_NULL_LENGTH: Final = -1  # the length (or count) of a null string, bytes or array
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


class MalformedOffsetRecord(ValueError):
    """A `__consumer_offsets` key or value that is not in any known format."""


@dataclass(frozen=True)
class OffsetKey:
    """The key of a committed offset: the group's offset for one topic partition."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    """The key of a group's metadata record (its generation, protocol and members)."""

    group: str


@dataclass(frozen=True)
class CommittedOffset:
    """A committed offset (Kafka's OffsetAndMetadata). ``leader_epoch`` -1: unknown
    (`NO_LEADER_EPOCH`); ``expire_timestamp_ms`` -1: none (`NO_TIMESTAMP`), the offset
    expires by the broker's retention instead."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = NO_TIMESTAMP


@dataclass(frozen=True)
class MemberMetadata:
    """One member of a group as its group metadata record holds it (Kafka's
    GroupMetadataValue.MemberMetadata): ``group_instance_id`` None for a dynamic member;
    ``subscription`` its metadata for the group's protocol, ``assignment`` what the
    leader assigned it (both opaque here)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadata:
    """A group's metadata record (Kafka's GroupMetadataValue): its generation, chosen
    protocol and leader (None while it has none) and members. ``protocol_type`` is ""
    for a group without one (as Kafka writes it); ``current_state_timestamp_ms`` -1
    (`NO_TIMESTAMP`): unknown."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


# --------------------------------------------------------------------------- partitioning


def _java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over the UTF-16 code units, in int32 arithmetic.

    Lone surrogates (which a Python str, like a Java String, can hold) count as the code
    unit they are.
    """
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x1_0000_0000 if h > _INT32_MAX else h


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition of a group: Kafka's
    ``Utils.abs(groupId.hashCode) % partitions``, where ``Utils.abs(Integer.MIN_VALUE)``
    is 0."""
    if partitions <= 0:
        raise ValueError(f"the offsets topic needs at least one partition, not {partitions}")
    h = _java_string_hash(group_id)
    return (0 if h == _INT32_MIN else abs(h)) % partitions


# --------------------------------------------------------------------------- encoding


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} {value} does not fit its field ({low}..{high})")


def _encode_string(name: str, text: str) -> bytes:
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} {text!r} is not encodable as UTF-8: {exc.reason}") from exc
    if len(data) > _MAX_STRING_BYTES:
        raise ValueError(
            f"{name} is {len(data)} bytes in UTF-8, over the {_MAX_STRING_BYTES} a string holds"
        )
    return _INT16.pack(len(data)) + data


def _encode_nullable_string(name: str, text: str | None) -> bytes:
    return _INT16.pack(_NULL_LENGTH) if text is None else _encode_string(name, text)


def _encode_bytes(name: str, data: bytes) -> bytes:
    if len(data) > _INT32_MAX:
        raise ValueError(f"{name} is {len(data)} bytes, over the {_INT32_MAX} bytes hold")
    return _INT32.pack(len(data)) + bytes(data)


def encode_offset_key(key: OffsetKey) -> bytes:
    """An offset commit key, version 1: group, topic, partition.

    Raises ValueError if a string is over 32767 bytes of UTF-8 (or not encodable: a lone
    surrogate) or the partition is not an int32.
    """
    _check_int("partition", key.partition, _INT32_MIN, _INT32_MAX)
    return b"".join(
        (
            _INT16.pack(OFFSET_KEY_VERSION),
            _encode_string("group", key.group),
            _encode_string("topic", key.topic),
            _INT32.pack(key.partition),
        )
    )


def encode_offset_value(value: CommittedOffset) -> bytes:
    """An offset commit value: version 3 (offset, leader epoch, metadata, commit
    timestamp), or, if ``expire_timestamp_ms`` is set (not -1), version 1 (offset,
    metadata, commit timestamp, expire timestamp; no leader epoch), as Kafka 2.8 writes.

    Raises ValueError if a field does not fit (int64 offset and timestamps, int32 leader
    epoch, metadata up to 32767 bytes of UTF-8).
    """
    _check_int("offset", value.offset, _INT64_MIN, _INT64_MAX)
    _check_int("leader epoch", value.leader_epoch, _INT32_MIN, _INT32_MAX)
    _check_int("commit timestamp", value.commit_timestamp_ms, _INT64_MIN, _INT64_MAX)
    _check_int("expire timestamp", value.expire_timestamp_ms, _INT64_MIN, _INT64_MAX)
    metadata = _encode_string("metadata", value.metadata)
    if value.expire_timestamp_ms != NO_TIMESTAMP:
        return b"".join(
            (
                _INT16.pack(_EXPIRING_VALUE_VERSION),
                _INT64.pack(value.offset),
                metadata,
                _INT64.pack(value.commit_timestamp_ms),
                _INT64.pack(value.expire_timestamp_ms),
            )
        )
    return b"".join(
        (
            _INT16.pack(OFFSET_VALUE_VERSION),
            _INT64.pack(value.offset),
            _INT32.pack(value.leader_epoch),
            metadata,
            _INT64.pack(value.commit_timestamp_ms),
        )
    )


def encode_group_key(group: str) -> bytes:
    """A group metadata key, version 2: the group.

    Raises ValueError if the group is over 32767 bytes of UTF-8 (or not encodable).
    """
    return _INT16.pack(GROUP_KEY_VERSION) + _encode_string("group", group)


def _encode_member(index: int, member: MemberMetadata) -> bytes:
    name = f"member {index}"
    _check_int(f"{name} rebalance timeout", member.rebalance_timeout_ms, _INT32_MIN, _INT32_MAX)
    _check_int(f"{name} session timeout", member.session_timeout_ms, _INT32_MIN, _INT32_MAX)
    return b"".join(
        (
            _encode_string(f"{name} member id", member.member_id),
            _encode_nullable_string(f"{name} group instance id", member.group_instance_id),
            _encode_string(f"{name} client id", member.client_id),
            _encode_string(f"{name} client host", member.client_host),
            _INT32.pack(member.rebalance_timeout_ms),
            _INT32.pack(member.session_timeout_ms),
            _encode_bytes(f"{name} subscription", member.subscription),
            _encode_bytes(f"{name} assignment", member.assignment),
        )
    )


def encode_group_value(value: GroupMetadata) -> bytes:
    """A group metadata value, version 3, as Kafka 2.8 writes it: protocol type,
    generation, protocol, leader, current state timestamp, then each member (member id,
    group instance id, client id, client host, rebalance timeout, session timeout,
    subscription, assignment) in the order given.

    Raises ValueError if a field does not fit (int32 generation and timeouts, int64
    timestamp, strings up to 32767 bytes of UTF-8), or if the group has members but no
    protocol (Kafka refuses to write that too: a member's subscription is its metadata
    for the group's protocol).
    """
    _check_int("generation", value.generation, _INT32_MIN, _INT32_MAX)
    _check_int("current state timestamp", value.current_state_timestamp_ms, _INT64_MIN, _INT64_MAX)
    if value.members and value.protocol is None:
        raise ValueError(
            f"a group with {len(value.members)} members needs a protocol (it has none)"
        )
    parts = [
        _INT16.pack(GROUP_VALUE_VERSION),
        _encode_string("protocol type", value.protocol_type),
        _INT32.pack(value.generation),
        _encode_nullable_string("protocol", value.protocol),
        _encode_nullable_string("leader", value.leader),
        _INT64.pack(value.current_state_timestamp_ms),
        _INT32.pack(len(value.members)),
    ]
    parts.extend(_encode_member(i, member) for i, member in enumerate(value.members))
    return b"".join(parts)


def group_metadata_batch(
    group: str,
    value: GroupMetadata | None,
    timestamp_ms: int,
    compression: int = Compression.NONE,
) -> bytearray:
    """One record batch (magic 2) holding one group metadata record, as
    `offset_commit_batch` builds them, at ``timestamp_ms``, compressed with
    ``compression`` (offsets.topic.compression.codec). A None value writes a tombstone:
    the group is deleted.

    Raises ValueError for a field that does not fit its encoding (see
    `encode_group_value`).
    """
    spec = RecordSpec(
        key=encode_group_key(group),
        value=None if value is None else encode_group_value(value),
    )
    return build_batch([spec], base_timestamp=timestamp_ms, compression=compression)


def offset_commit_batch(
    commits: Sequence[tuple[OffsetKey, CommittedOffset | None]],
    timestamp_ms: int,
    compression: int = Compression.NONE,
) -> bytearray:
    """One record batch (magic 2) of offset commit records, as a producer sends it (base
    offset 0, no producer id), every record at ``timestamp_ms`` (the CreateTime Kafka
    gives them: the commit's time), compressed with ``compression``
    (offsets.topic.compression.codec, as Kafka's GroupMetadataManager). A None value
    writes a tombstone: the offset is deleted.

    Raises ValueError for no commits (a batch must hold a record) or a field that does not
    fit its encoding.
    """
    if not commits:
        raise ValueError("an offset commit batch needs at least one record")
    specs = [
        RecordSpec(
            key=encode_offset_key(key),
            value=None if value is None else encode_offset_value(value),
        )
        for key, value in commits
    ]
    return build_batch(specs, base_timestamp=timestamp_ms, compression=compression)


def tombstone_batches(
    offsets: Sequence[OffsetKey],
    group: str | None,
    timestamp_ms: int,
    compression: int,
    max_batch_bytes: int,
) -> list[bytearray]:
    """The tombstones of one group's ``offsets``, then of the group itself if ``group``
    names it, as Kafka 2.8's cleanupGroupMetadata writes them: one batch at
    ``timestamp_ms``, compressed with ``compression``. Should that exceed
    ``max_batch_bytes`` (the partition's max.message.bytes, which would refuse it whole;
    Kafka's does), they are split into consecutive batches within it, in the same order
    (the group's tombstone last). Each chunk is cut by its records' uncompressed size, so
    it fits compressed or not (the topic's compression.type may undo the codec); a
    compressed one over the limit all the same is halved. A single record over the limit
    is a batch alone (refused: nothing smaller holds it).
    """
    keys = [encode_offset_key(key) for key in offsets]
    if group is not None:
        keys.append(encode_group_key(group))
    chunks: list[list[bytes]] = []
    size = 0
    for key in keys:
        record = len(key) + _TOMBSTONE_OVERHEAD
        if chunks and size + record <= max_batch_bytes:
            chunks[-1].append(key)
            size += record
        else:
            chunks.append([key])
            size = BATCH_HEADER_SIZE + record
    batches: list[bytearray] = []
    while chunks:
        chunk = chunks.pop(0)
        specs = [RecordSpec(key=key, value=None) for key in chunk]
        batch = build_batch(specs, base_timestamp=timestamp_ms, compression=compression)
        if len(batch) > max_batch_bytes and len(chunk) > 1:
            half = len(chunk) // 2
            chunks[:0] = [chunk[:half], chunk[half:]]
            continue
        batches.append(batch)
    return batches


# --------------------------------------------------------------------------- decoding


class _Reader:
    """Reads the fields of one key or value, raising MalformedOffsetRecord for a short
    buffer, a null or non-UTF-8 string, or (at `finish`) bytes left over."""

    __slots__ = ("_data", "_pos", "what")

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self._data = bytes(data)
        self._pos = 0
        self.what = what  # names the key or value in messages; set once its version is known

    def _need(self, size: int, field: str) -> int:
        pos = self._pos
        left = len(self._data) - pos
        if left < size:
            raise MalformedOffsetRecord(
                f"{self.what} of {len(self._data)} bytes is truncated: {field} needs"
                f" {size} bytes at byte {pos}, {left} left"
            )
        self._pos = pos + size
        return pos

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack_from(self._data, self._need(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack_from(self._data, self._need(4, field))[0]
        return value

    def int64(self, field: str) -> int:
        value: int = _INT64.unpack_from(self._data, self._need(8, field))[0]
        return value

    def _not_nullable(self, field: str, length: int) -> MalformedOffsetRecord:
        return MalformedOffsetRecord(
            f"{self.what}: {field} is null (length {length}), but it is not nullable"
        )

    def string(self, field: str) -> str:
        length = self.int16(f"the length of {field}")
        if length < 0:
            raise self._not_nullable(field, length)
        return self._utf8(field, length)

    def nullable_string(self, field: str) -> str | None:
        length = self.int16(f"the length of {field}")
        if length < 0:  # any negative, as Kafka 2.8's generated readers take it
            return None
        return self._utf8(field, length)

    def bytes_(self, field: str) -> bytes:
        length = self.int32(f"the length of {field}")
        if length < 0:
            raise self._not_nullable(field, length)
        pos = self._need(length, field)
        return self._data[pos : pos + length]

    def count(self, field: str) -> int:
        count = self.int32(f"the count of {field}")
        if count < 0:
            raise MalformedOffsetRecord(
                f"{self.what}: {field} is null (count {count}), but it is not nullable"
            )
        return count

    def _utf8(self, field: str, length: int) -> str:
        pos = self._need(length, field)
        try:
            return self._data[pos : pos + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedOffsetRecord(
                f"{self.what}: {field} is not valid UTF-8 ({exc.reason} at byte {pos + exc.start})"
            ) from exc

    def finish(self) -> None:
        extra = len(self._data) - self._pos
        if extra:
            raise MalformedOffsetRecord(
                f"{self.what} has {extra} bytes after its last field (at byte {self._pos})"
            )


def decode_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupKey:
    """A `__consumer_offsets` key: versions 0 and 1 are offset commit keys, version 2 a
    group metadata key. Raises MalformedOffsetRecord for anything else."""
    reader = _Reader(data, "key")
    version = reader.int16("the version")
    key: OffsetKey | GroupKey
    if version in (0, 1):
        reader.what = f"offset commit key v{version}"
        group = reader.string("group")
        topic = reader.string("topic")
        key = OffsetKey(group, topic, reader.int32("partition"))
    elif version == GROUP_KEY_VERSION:
        reader.what = f"group metadata key v{version}"
        key = GroupKey(reader.string("group"))
    else:
        raise MalformedOffsetRecord(
            f"unknown key version {version} (0 and 1: offset commit, 2: group metadata)"
        )
    reader.finish()
    return key


def decode_offset_value(data: bytes | bytearray | memoryview) -> CommittedOffset:
    """An offset commit value of version 0 to 3; a field a version lacks is -1
    (`NO_LEADER_EPOCH`, `NO_TIMESTAMP`). Raises MalformedOffsetRecord for another
    version or a malformed buffer."""
    reader = _Reader(data, "offset commit value")
    version = reader.int16("the version")
    if not 0 <= version <= OFFSET_VALUE_VERSION:
        raise MalformedOffsetRecord(
            f"unknown offset commit value version {version} (0 to {OFFSET_VALUE_VERSION} known)"
        )
    reader.what = f"offset commit value v{version}"
    offset = reader.int64("offset")
    leader_epoch = reader.int32("leader_epoch") if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string("metadata")
    commit_timestamp = reader.int64("timestamp" if version == 0 else "commit_timestamp")
    expire_timestamp = reader.int64("expire_timestamp") if version == 1 else NO_TIMESTAMP
    reader.finish()
    return CommittedOffset(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def decode_group_value(data: bytes | bytearray | memoryview) -> GroupMetadata:
    """A group metadata value of version 0 to 3. A field a version lacks reads as Kafka
    reads it: group instance ids (v3) None, the current state timestamp (v2) -1
    (`NO_TIMESTAMP`), a member's rebalance timeout (v1) its session timeout. Raises
    MalformedOffsetRecord for another version or a malformed buffer."""
    reader = _Reader(data, "group metadata value")
    version = reader.int16("the version")
    if not 0 <= version <= GROUP_VALUE_VERSION:
        raise MalformedOffsetRecord(
            f"unknown group metadata value version {version} (0 to {GROUP_VALUE_VERSION} known)"
        )
    reader.what = f"group metadata value v{version}"
    protocol_type = reader.string("protocol_type")
    generation = reader.int32("generation")
    protocol = reader.nullable_string("protocol")
    leader = reader.nullable_string("leader")
    timestamp = reader.int64("current_state_timestamp") if version >= 2 else NO_TIMESTAMP
    members = []
    for index in range(reader.count("members")):
        field = f"members[{index}]"
        member_id = reader.string(f"{field}.member_id")
        instance_id = reader.nullable_string(f"{field}.group_instance_id") if version >= 3 else None
        client_id = reader.string(f"{field}.client_id")
        client_host = reader.string(f"{field}.client_host")
        rebalance_timeout = reader.int32(f"{field}.rebalance_timeout") if version >= 1 else None
        session_timeout = reader.int32(f"{field}.session_timeout")
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout,
                reader.bytes_(f"{field}.subscription"),
                reader.bytes_(f"{field}.assignment"),
            )
        )
    reader.finish()
    return GroupMetadata(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def read_offset_records(
    batch: bytes | bytearray | memoryview,
) -> Iterator[tuple[OffsetKey | GroupKey, CommittedOffset | GroupMetadata | None]]:
    """The records of one `__consumer_offsets` batch (the bytes of exactly one batch), in
    offset order, as ``(key, value)``:

    * ``(OffsetKey, CommittedOffset)``: an offset commit;
    * ``(OffsetKey, None)``: a tombstone, the offset was deleted;
    * ``(GroupKey, GroupMetadata)``: a group's metadata (generation and members);
    * ``(GroupKey, None)``: a tombstone, the group was deleted.

    Control batches (transaction markers) are skipped whole; the records of a
    transactional batch are yielded like any (no transactional offset commits are
    written here, so none are held back for their marker).

    A record without a key, or whose key or value is malformed, raises
    MalformedOffsetRecord naming the record's offset. The batch itself is expected to be
    whole and checked, as batches read back from a log are; framing errors are the
    storage layer's (CorruptRecordError; NotImplementedError for a batch naming no codec).
    """
    if read_header(batch).is_control:
        return
    for record in iter_records(batch):
        yield decode_offset_record(record)


def decode_offset_record(
    record: Record,
) -> tuple[OffsetKey | GroupKey, CommittedOffset | GroupMetadata | None]:
    """One record of `__consumer_offsets`, as `read_offset_records` yields it: an
    `OffsetKey`'s value is a `CommittedOffset`, a `GroupKey`'s a `GroupMetadata`, either
    None for a tombstone. MalformedOffsetRecord names the record's offset."""
    if record.key is None:
        raise MalformedOffsetRecord(f"the record at offset {record.offset} has no key")
    try:
        key = decode_key(record.key)
    except MalformedOffsetRecord as exc:
        raise MalformedOffsetRecord(f"the record at offset {record.offset}: {exc}") from exc
    if record.value is None:
        return key, None
    value: CommittedOffset | GroupMetadata
    try:
        if isinstance(key, OffsetKey):
            value = decode_offset_value(record.value)
        else:
            value = decode_group_value(record.value)
    except MalformedOffsetRecord as exc:
        raise MalformedOffsetRecord(f"the record at offset {record.offset} ({key}): {exc}") from exc
    return key, value
