"""Consumer groups read over the Kafka protocol, for `zkctl groups` (the reading half of
Kafka 2.8's kafka-consumer-groups.sh --bootstrap-server):

* list: ListGroups asked of every live broker (each answers for the groups it
  coordinates, in the states asked for), the brokers taken from a Metadata answer;
* describe: FindCoordinator (v3, key type group) names the group's coordinator, which
  answers DescribeGroups (state, members, each member's assignment) and OffsetFetch (the
  committed offsets); each partition's log end offset is ListOffsets(latest) from its
  leader. The coordinator's answers COORDINATOR_LOAD_IN_PROGRESS,
  COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR (and a coordinator that cannot be
  reached) are retried a few times, with a short backoff, after finding the coordinator
  again.

A member's assignment is decoded as Kafka's ConsumerProtocol assignment
(decode_assignment); one that does not decode, or a group of another protocol type, is
shown as unreadable rather than failing the command.

The versions asked for are ones Kafka 2.8 brokers serve too.
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from admin.cluster_admin import Body, ClusterAdmin, Endpoint, error_name
from admin.errors import AdminError
from wire.api import ApiKey
from wire.client import KafkaConnectionError
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

T = TypeVar("T")

# --- ConsumerProtocol assignments ----------------------------------------------------------

CONSUMER_PROTOCOL_TYPE = "consumer"
# The groups --list shows, as Kafka 2.8's KafkaAdminClient.listConsumerGroups keeps them
# (maybeAddConsumerGroup): a consumer group's, or a simple consumer group's (it only
# commits offsets; no protocol type). A Kafka Connect cluster's ("connect") is left out.
_LISTED_PROTOCOL_TYPES = frozenset({CONSUMER_PROTOCOL_TYPE, ""})
# ConsumerProtocolAssignment's versions 0-3 share one layout; a later version may add
# fields after those, which are not read.
LATEST_ASSIGNMENT_VERSION = 3


class MalformedAssignmentError(ValueError):
    """Bytes that are not a ConsumerProtocol assignment; the message says why."""


@dataclass(frozen=True)
class ConsumerAssignment:
    version: int
    partitions: tuple[TopicPartition, ...]  # sorted, each once
    user_data: bytes | None


class _Reader:
    """Big-endian reads off a byte string; MalformedAssignmentError past its end."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, size: int, what: str) -> bytes:
        if size > self.remaining:
            raise MalformedAssignmentError(
                f"{what}: needs {size} bytes at offset {self.pos}, {self.remaining} left"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self, what: str) -> int:
        value: int = struct.unpack(">h", self._take(2, what))[0]
        return value

    def int32(self, what: str) -> int:
        value: int = struct.unpack(">i", self._take(4, what))[0]
        return value

    def array_length(self, what: str, min_item_size: int) -> int:
        """A non-nullable array's length, checked against the bytes left (so a corrupt
        length cannot make us loop or allocate for billions of items)."""
        n = self.int32(f"{what} length")
        if n < 0:
            raise MalformedAssignmentError(f"{what}: length {n} (the array is not nullable)")
        if n * min_item_size > self.remaining:
            raise MalformedAssignmentError(
                f"{what}: {n} items cannot fit in the {self.remaining} bytes left"
            )
        return n

    def string(self, what: str) -> str:
        n = self.int16(f"{what} length")
        if n < 0:
            raise MalformedAssignmentError(f"{what}: length {n} (the string is not nullable)")
        raw = self._take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedAssignmentError(f"{what}: not UTF-8") from None

    def nullable_bytes(self, what: str) -> bytes | None:
        n = self.int32(f"{what} length")
        if n == -1:
            return None
        if n < 0:
            raise MalformedAssignmentError(f"{what}: length {n}")
        return self._take(n, what)


def decode_assignment(data: bytes | bytearray | memoryview) -> ConsumerAssignment:
    """Kafka's ConsumerProtocol assignment: int16 version, an array of (string topic,
    int32 array of partitions), nullable bytes user data. Versions 0-3 must end there;
    a later one may carry more fields after, which are skipped. Empty bytes are a member
    with nothing assigned yet (as Kafka's admin client reads them: the coordinator sends
    none until the group is Stable). MalformedAssignmentError for anything else that
    does not decode: a negative version, lengths past the end, a null or empty topic
    name, a negative partition, bytes left over."""
    raw = bytes(data)
    if not raw:
        return ConsumerAssignment(0, (), None)
    r = _Reader(raw)
    version = r.int16("version")
    if version < 0:
        raise MalformedAssignmentError(f"version {version} is negative")
    partitions: set[TopicPartition] = set()
    # Each (topic, partitions) is at least a string length and an array length.
    for i in range(r.array_length("assigned partitions", 2 + 4)):
        topic = r.string(f"topic {i}")
        if not topic:
            raise MalformedAssignmentError(f"topic {i}: empty name")
        for _ in range(r.array_length(f"partitions of {topic!r}", 4)):
            index = r.int32(f"a partition of {topic!r}")
            if index < 0:
                raise MalformedAssignmentError(f"partition {index} of {topic!r} is negative")
            partitions.add(TopicPartition(topic, index))
    user_data = r.nullable_bytes("user data")
    if version <= LATEST_ASSIGNMENT_VERSION and r.remaining:
        raise MalformedAssignmentError(
            f"{r.remaining} bytes after a version {version} assignment's last field"
        )
    return ConsumerAssignment(version, tuple(sorted(partitions)), user_data)


def encode_assignment(
    partitions: Iterable[TopicPartition], version: int = 0, user_data: bytes | None = None
) -> bytes:
    """The inverse of decode_assignment (for tests and tools)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [struct.pack(">hi", version, len(by_topic))]
    for topic, indexes in by_topic.items():
        name = topic.encode("utf-8")
        out.append(struct.pack(">h", len(name)) + name)
        out.append(struct.pack(f">i{len(indexes)}i", len(indexes), *indexes))
    if user_data is None:
        out.append(struct.pack(">i", -1))
    else:
        out.append(struct.pack(">i", len(user_data)) + user_data)
    return b"".join(out)


# --- what a description holds ---------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    # None: its assignment could not be read (``problem`` says why).
    partitions: tuple[TopicPartition, ...] | None
    problem: str | None = None
    group_instance_id: str | None = None  # a static member's (KIP-345)


@dataclass(frozen=True)
class Coordinator:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port} ({self.node_id})"


@dataclass(frozen=True)
class OffsetRow:
    """One line of the offsets view: a partition (committed to, or assigned), or a
    member whose assignment is unreadable (``partition`` None)."""

    partition: TopicPartition | None
    committed: int | None  # None: no commit
    log_end: int | None  # None: not known
    member: Member | None  # None: no member is assigned the partition

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return self.log_end - self.committed


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str  # Kafka's names: Stable, Empty, PreparingRebalance, ..., Dead
    protocol_type: str
    protocol: str  # the assignment strategy, once Stable
    coordinator: Coordinator
    members: tuple[Member, ...]
    # Filled in when offsets were asked for.
    rows: tuple[OffsetRow, ...] = ()
    # What could not be read, one line each (the rows show "-" there).
    warnings: tuple[str, ...] = ()

    @property
    def exists(self) -> bool:
        return self.state != "Dead"


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    state: str
    protocol_type: str
    coordinator: int  # the broker that listed it


@dataclass
class GroupListing:
    groups: list[ListedGroup] = field(default_factory=list)
    # Brokers that did not answer ListGroups: the groups they coordinate are missing.
    failures: list[str] = field(default_factory=list)


def members_of(protocol_type: str, described: Sequence[Body]) -> tuple[Member, ...]:
    """DescribeGroups' members, each with its assignment decoded (or why not), sorted
    by member id."""
    members = []
    for m in described:
        raw = bytes(m.get("member_assignment") or b"")
        partitions: tuple[TopicPartition, ...] | None
        problem = None
        if not raw:
            partitions = ()
        elif protocol_type != CONSUMER_PROTOCOL_TYPE:
            partitions = None
            problem = f"protocol type {protocol_type!r}, not {CONSUMER_PROTOCOL_TYPE!r}"
        else:
            try:
                partitions = decode_assignment(raw).partitions
            except MalformedAssignmentError as e:
                partitions, problem = None, str(e)
        members.append(
            Member(
                member_id=str(m.get("member_id") or ""),
                client_id=str(m.get("client_id") or ""),
                host=str(m.get("client_host") or ""),
                partitions=partitions,
                problem=problem,
                group_instance_id=m.get("group_instance_id") or None,
            )
        )
    return tuple(sorted(members, key=lambda m: m.member_id))


def offset_rows(
    members: Sequence[Member],
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int | None],
) -> tuple[OffsetRow, ...]:
    """kafka-consumer-groups.sh's rows: each partition a member is assigned (its commit
    or none), each committed partition no member is assigned, sorted by partition; then
    each member whose assignment is unreadable. A member with no partition has no row
    (Kafka 2.8's collectGroupsOffsets keeps the members with partitions only)."""
    rows: list[OffsetRow] = []
    unreadable: list[OffsetRow] = []
    assigned: set[TopicPartition] = set()
    for m in members:
        if m.partitions is None:
            unreadable.append(OffsetRow(None, None, None, m))
            continue
        for tp in m.partitions:
            assigned.add(tp)
            rows.append(OffsetRow(tp, committed.get(tp), log_ends.get(tp), m))
    for tp, offset in committed.items():
        if tp not in assigned:
            rows.append(OffsetRow(tp, offset, log_ends.get(tp), None))
    rows.sort(key=lambda r: (r.partition, r.member.member_id if r.member else ""))
    return tuple(rows + unreadable)


# --- the client ---------------------------------------------------------------------------

_FIND_COORDINATOR_VERSION = 3
_DESCRIBE_GROUPS_VERSION = 5
_OFFSET_FETCH_VERSION = 7
_LIST_GROUPS_VERSION = 4
# Read uncommitted, as Kafka's tool. v4, the first with leader epochs: this broker cannot
# encode a v1-v3 answer to "latest" (it sets the v4+ leader epoch; the connection closes).
_LIST_OFFSETS_VERSION = 4
_KEY_TYPE_GROUP = 0
_LATEST = -1

_COORDINATOR_ATTEMPTS = 8
_LIST_ATTEMPTS = 4
_LOG_END_ATTEMPTS = 4
_BACKOFF_S = 0.2
_MAX_BACKOFF_S = 1.0

_COORDINATOR_MOVING = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)
# A ListOffsets answer that fresh metadata and another try may mend.
_LEADER_MOVING = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)


def backoff_s(attempt: int) -> float:
    """The wait before retry ``attempt`` (1, 2, ...): doubling from 0.2 s, at most 1 s."""
    return float(min(_BACKOFF_S * 2 ** (attempt - 1), _MAX_BACKOFF_S))


class _Retry(Exception):
    """Worth another try after the backoff (the message is kept for the final error)."""


class GroupAdmin(ClusterAdmin):
    """Reads consumer groups. Every request is sent with the timeout given (per request);
    the retries are bounded by a count, not by it."""

    def __init__(
        self,
        bootstrap: Sequence[Endpoint],
        timeout_s: float = 30.0,
        client_id: str = "zkctl",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(bootstrap, timeout_s, client_id)
        self._sleep = sleep

    # --- listing ------------------------------------------------------------------------

    def list_groups(self, states: Sequence[str] = ()) -> GroupListing:
        """Every consumer group of every live broker (those of another protocol type left
        out), each once (by id), sorted by id; with ``states``, only those in these states
        (ListGroups v4's filter, which the brokers apply, as Kafka's admin client leaves it
        to them)."""
        brokers = sorted(
            (int(b["node_id"]), (str(b["host"]), int(b["port"])))
            for b in self.metadata([])["brokers"]
        )
        listing = GroupListing()
        seen: set[str] = set()
        for node_id, endpoint in brokers:
            try:
                answer = self._retrying(
                    _LIST_ATTEMPTS, functools.partial(self._list_groups_at, endpoint, states)
                )
            except AdminError as e:
                listing.failures.append(f"broker {node_id} ({endpoint[0]}:{endpoint[1]}): {e}")
                continue
            for g in answer["groups"]:
                group_id = str(g["group_id"])
                protocol_type = str(g.get("protocol_type") or "")
                if protocol_type not in _LISTED_PROTOCOL_TYPES or group_id in seen:
                    continue
                seen.add(group_id)
                listing.groups.append(
                    ListedGroup(
                        group_id=group_id,
                        state=str(g.get("group_state") or ""),
                        protocol_type=protocol_type,
                        coordinator=node_id,
                    )
                )
        listing.groups.sort(key=lambda g: g.group_id)
        return listing

    def _list_groups_at(self, endpoint: Endpoint, states: Sequence[str]) -> Body:
        try:
            with self._connect(endpoint) as conn:
                answer = conn.request(
                    ApiKey.LIST_GROUPS, _LIST_GROUPS_VERSION, {"states_filter": list(states)}
                )
        except KafkaConnectionError as e:
            raise _Retry(str(e)) from None
        code = int(answer["error_code"])
        if code in _COORDINATOR_MOVING:
            raise _Retry(f"ListGroups: {error_name(code)}")
        if code != ErrorCode.NONE:
            raise AdminError(f"ListGroups refused: {error_name(code)}")
        return answer

    # --- describing ---------------------------------------------------------------------

    def describe(self, group_id: str, *, offsets: bool = True) -> GroupDescription:
        """The group as its coordinator describes it; with ``offsets``, its committed
        offsets too, beside each partition's log end offset. A group the coordinator does
        not know is Dead, with no members and no offsets."""
        coordinator, answer = self._at_coordinator(
            group_id,
            ApiKey.DESCRIBE_GROUPS,
            _DESCRIBE_GROUPS_VERSION,
            {"groups": [group_id], "include_authorized_operations": False},
            lambda a: _described(a, group_id)[0],
        )
        code, described = _described(answer, group_id)
        if code == ErrorCode.GROUP_ID_NOT_FOUND:  # newer brokers' word for Dead
            described = {"group_state": "Dead", "members": []}
        protocol_type = str(described.get("protocol_type") or "")
        members = members_of(protocol_type, described.get("members") or [])
        state = str(described.get("group_state") or "")
        warnings = [
            f"member {m.member_id}'s assignment is unreadable: {m.problem}"
            for m in members
            if m.problem is not None
        ]
        rows: tuple[OffsetRow, ...] = ()
        if offsets and state != "Dead":
            committed, offset_warnings = self.committed_offsets(group_id)
            wanted = set(committed) | {tp for m in members for tp in m.partitions or ()}
            log_ends, end_warnings = self.log_end_offsets(wanted)
            rows = offset_rows(members, committed, log_ends)
            warnings += offset_warnings + end_warnings
        return GroupDescription(
            group_id=group_id,
            state=state,
            protocol_type=protocol_type,
            protocol=str(described.get("protocol_data") or ""),
            coordinator=coordinator,
            members=members,
            rows=rows,
            warnings=tuple(warnings),
        )

    def committed_offsets(self, group_id: str) -> tuple[dict[TopicPartition, int], list[str]]:
        """Every partition the group has committed an offset for, and the partitions
        whose commit came back with an error."""
        _, answer = self._at_coordinator(
            group_id,
            ApiKey.OFFSET_FETCH,
            _OFFSET_FETCH_VERSION,
            {"group_id": group_id, "topics": None, "require_stable": False},
            lambda a: int(a.get("error_code", ErrorCode.NONE)),
        )
        committed: dict[TopicPartition, int] = {}
        problems = []
        for t in answer["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(str(t["name"]), int(p["partition_index"]))
                code = int(p["error_code"])
                if code != ErrorCode.NONE:
                    problems.append(f"{tp}: {error_name(code)}")
                elif int(p["committed_offset"]) >= 0:
                    committed[tp] = int(p["committed_offset"])
        warnings = [f"committed offset unknown for {', '.join(problems)}"] if problems else []
        return committed, warnings

    def find_coordinator(self, group_id: str) -> Coordinator:
        """The group's coordinator, as the first bootstrap broker that answers names it;
        _Retry while it has none; AdminError when no bootstrap broker answers."""
        failures = []
        for endpoint in self.bootstrap:
            try:
                with self._connect(endpoint) as conn:
                    answer = conn.request(
                        ApiKey.FIND_COORDINATOR,
                        _FIND_COORDINATOR_VERSION,
                        {"key": group_id, "key_type": _KEY_TYPE_GROUP},
                    )
            except KafkaConnectionError as e:
                failures.append(str(e))
                continue
            code = int(answer["error_code"])
            if code in _COORDINATOR_MOVING:
                message = answer.get("error_message")
                raise _Retry(
                    f"FindCoordinator: {error_name(code)}" + (f" ({message})" if message else "")
                )
            if code != ErrorCode.NONE:
                raise AdminError(
                    f"FindCoordinator for group {group_id!r} refused: {error_name(code)}"
                )
            return Coordinator(int(answer["node_id"]), str(answer["host"]), int(answer["port"]))
        # Not the coordinator moving: the brokers cannot be reached at all.
        raise AdminError(f"no bootstrap server answered: {'; '.join(failures)}")

    def _at_coordinator(
        self,
        group_id: str,
        api: ApiKey,
        version: int,
        body: Body,
        error_of: Callable[[Body], int],
    ) -> tuple[Coordinator, Body]:
        """``body`` answered by the group's coordinator, found afresh for each try; tried
        again while the coordinator is moving or loading, or cannot be reached."""

        def attempt() -> tuple[Coordinator, Body]:
            coordinator = self.find_coordinator(group_id)
            try:
                with self._connect((coordinator.host, coordinator.port)) as conn:
                    answer = conn.request(api, version, body)
            except KafkaConnectionError as e:
                raise _Retry(f"coordinator {coordinator}: {e}") from None
            code = error_of(answer)
            if code in _COORDINATOR_MOVING:
                raise _Retry(f"{api.name} at broker {coordinator.node_id}: {error_name(code)}")
            if code not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                raise AdminError(f"{api.name} for group {group_id!r} refused: {error_name(code)}")
            return coordinator, answer

        try:
            return self._retrying(_COORDINATOR_ATTEMPTS, attempt)
        except AdminError as e:
            raise AdminError(f"group {group_id!r}: {e}") from None

    def _retrying(self, attempts: int, call: Callable[[], T]) -> T:
        last = ""
        for i in range(attempts):
            if i:
                self._sleep(backoff_s(i))
            try:
                return call()
            except _Retry as e:
                last = str(e)
        raise AdminError(f"no answer after {attempts} tries ({last})")

    # --- log end offsets ----------------------------------------------------------------

    def log_end_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, int | None], list[str]]:
        """Each partition's log end offset (what a consumer can read up to: ListOffsets
        latest, from its leader); None where it could not be had, with a warning line."""
        pending = set(partitions)
        found: dict[TopicPartition, int | None] = {}
        why: dict[TopicPartition, str] = {}
        for i in range(_LOG_END_ATTEMPTS):
            if not pending:
                break
            if i:
                self._sleep(backoff_s(i))
            metadata = self.metadata(None)
            brokers = {
                int(b["node_id"]): (str(b["host"]), int(b["port"])) for b in metadata["brokers"]
            }
            leaders: dict[TopicPartition, int] = {}
            for t in metadata["topics"]:
                if int(t["error_code"]) != ErrorCode.NONE:
                    continue
                for p in t["partitions"]:
                    leaders[TopicPartition(str(t["name"]), int(p["partition_index"]))] = int(
                        p["leader_id"]
                    )
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(pending):
                leader = leaders.get(tp)
                if leader is None:
                    found[tp] = None  # no such partition (its topic deleted, say): final
                    why[tp] = "not in the brokers' metadata"
                    pending.discard(tp)
                elif leader not in brokers:
                    why[tp] = f"no live leader (leader {leader})"
                else:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, tps in by_leader.items():
                for tp, offset, problem, final in self._list_latest(leader, brokers[leader], tps):
                    if offset is not None:
                        found[tp] = offset
                        why.pop(tp, None)
                        pending.discard(tp)
                    else:
                        why[tp] = problem
                        if final:
                            found[tp] = None
                            pending.discard(tp)
        for tp in pending:
            found[tp] = None
        warnings = []
        if why:
            detail = "; ".join(f"{tp}: {reason}" for tp, reason in sorted(why.items()))
            warnings.append(f"log end offset unknown for {detail}")
        return found, warnings

    def _list_latest(
        self, leader: int, endpoint: Endpoint, tps: Sequence[TopicPartition]
    ) -> list[tuple[TopicPartition, int | None, str, bool]]:
        """(partition, offset or None, why not, whether that is final) for each."""
        topics: dict[str, list[Body]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "current_leader_epoch": -1, "timestamp": _LATEST}
            )
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": name, "partitions": ps} for name, ps in topics.items()],
        }
        try:
            with self._connect(endpoint) as conn:
                answer = conn.request(ApiKey.LIST_OFFSETS, _LIST_OFFSETS_VERSION, body)
        except KafkaConnectionError as e:
            return [(tp, None, f"leader {leader}: {e}", False) for tp in tps]
        results: list[tuple[TopicPartition, int | None, str, bool]] = []
        answered: set[TopicPartition] = set()
        for t in answer["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(str(t["name"]), int(p["partition_index"]))
                answered.add(tp)
                code = int(p["error_code"])
                if code == ErrorCode.NONE and int(p["offset"]) >= 0:
                    results.append((tp, int(p["offset"]), "", True))
                else:
                    reason = f"{error_name(code)} from leader {leader}"
                    results.append((tp, None, reason, code not in _LEADER_MOVING))
        results.extend(
            (tp, None, f"leader {leader} did not answer for it", False)
            for tp in tps
            if tp not in answered
        )
        return results


def _described(answer: Body, group_id: str) -> tuple[int, Body]:
    """DescribeGroups' entry for ``group_id``: (its error code, the entry)."""
    for g in answer.get("groups") or []:
        if g.get("group_id") == group_id:
            return int(g["error_code"]), g
    raise AdminError(f"DescribeGroups: the answer does not mention group {group_id!r}")
