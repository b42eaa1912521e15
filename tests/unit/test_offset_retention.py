"""Committed offsets expire (``offsets.retention.minutes``, KIP-211): the rules as pure
functions (groups/retention.py), then the coordinator (groups/coordinator.py) applying
them over a real ReplicaManager and logs, as tests/unit/test_group_coordinator.py runs it,
with a clock of the test's own: the tombstones it writes, the groups it deletes, and what
a new coordinator reads back from the same log.
"""

from __future__ import annotations

import dataclasses
import queue
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.group_apis import GroupApis
from groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from groups.membership import GroupState, JoinAnswer
from groups.offset_records import (
    NO_TIMESTAMP,
    CommittedOffset,
    GroupKey,
    GroupMetadata,
    OffsetKey,
    read_offset_records,
)
from groups.retention import CONSUMER_PROTOCOL, expired_offsets, subscribed_topics
from storage.records import iter_batches
from tests.unit.test_group_coordinator import (
    BROKER,
    OTHER,
    PARTITIONS,
    Call,
    leader_and_isr,
    metadata_knowing,
    on_partition,
    tp,
    wait_until,
)
from tests.unit.test_group_coordinator import Node as CoordinatorNode
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

RETENTION_MS = 1_000
NOW = 1_700_000_000_000  # the test clock's start (ms)
SESSION_MS = 10_000  # longer than any time the test clock moves on while a member is in
G0 = on_partition(0)
A0, A1, B0, C0 = tp("a", 0), tp("a", 1), tp("b", 0), tp("c", 0)


def committed(
    value: int, *, ts: int = NOW, expire: int = NO_TIMESTAMP, epoch: int = 3
) -> CommittedOffset:
    return CommittedOffset(value, epoch, "", ts, expire)


# --- ConsumerProtocolSubscription bytes ---------------------------------------------------


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def subscription(
    topics: Sequence[str],
    *,
    version: int = 0,
    user_data: bytes | None = None,
    owned: Sequence[tuple[str, Sequence[int]]] = (),
) -> bytes:
    """A consumer's subscription as the Java client writes it: v0 the topics and the
    user data (int32 length, -1 for null); v1 adds the owned partitions."""
    out = struct.pack(">h", version) + struct.pack(">i", len(topics))
    out += b"".join(_string(t) for t in topics)
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data))
    out += user_data or b""
    if version >= 1:
        out += struct.pack(">i", len(owned))
        for topic, partitions in owned:
            out += _string(topic) + struct.pack(">i", len(partitions))
            out += b"".join(struct.pack(">i", p) for p in partitions)
    return out


# --- 1. expired_offsets -------------------------------------------------------------------


def expired(
    offsets: dict[TopicPartition, CommittedOffset],
    now_ms: int,
    *,
    has_members: bool = False,
    stable: bool | None = None,
    protocol_type: str | None = None,
    empty_since_ms: int | None = None,
    subscribed: frozenset[str] | None = None,
    pending: Sequence[TopicPartition] = (),
) -> set[TopicPartition]:
    """A group with members is Stable unless ``stable`` says not; one without, Empty."""
    return set(
        expired_offsets(
            offsets,
            now_ms=now_ms,
            retention_ms=RETENTION_MS,
            empty=not has_members,
            stable=has_members if stable is None else stable,
            protocol_type=protocol_type,
            empty_since_ms=empty_since_ms,
            subscribed=subscribed,
            pending=pending,
        )
    )


def test_a_standalone_offset_expires_retention_after_its_commit() -> None:
    offsets = {A0: committed(1, ts=5_000), A1: committed(2, ts=5_500)}
    assert expired(offsets, 5_000 + RETENTION_MS - 1) == set()
    assert expired(offsets, 5_000 + RETENTION_MS) == {A0}  # the boundary expires
    assert expired(offsets, 5_500 + RETENTION_MS - 1) == {A0}
    assert expired(offsets, 5_500 + RETENTION_MS) == {A0, A1}
    assert expired({}, 10**12) == set()


def test_an_empty_group_counts_from_when_it_became_empty() -> None:
    # Committed long ago, but the group became Empty only recently.
    offsets = {A0: committed(1, ts=0)}
    empty: dict[str, Any] = {"empty_since_ms": 5_000, "protocol_type": CONSUMER_PROTOCOL}
    assert expired(offsets, 5_000 + RETENTION_MS - 1, **empty) == set()
    assert expired(offsets, 5_000 + RETENTION_MS, **empty) == {A0}
    # (Kafka's removeExpiredOffsets counts from it for a group of a protocol type alone:
    # of none, from the commits.)
    assert expired(offsets, RETENTION_MS, empty_since_ms=5_000) == {A0}


def test_an_explicit_expire_timestamp_wins() -> None:
    # Sooner than the retention: expires at it, and not before.
    soon = {A0: committed(1, ts=0, expire=300)}
    assert expired(soon, 299) == set()
    assert expired(soon, 300) == {A0}
    # Later than the retention (or than the Empty group's): kept until it.
    late = {A0: committed(1, ts=0, expire=10 * RETENTION_MS)}
    assert expired(late, 10 * RETENTION_MS - 1) == set()
    assert expired(late, 10 * RETENTION_MS - 1, empty_since_ms=0) == set()
    assert expired(late, 10 * RETENTION_MS, empty_since_ms=0) == {A0}
    # Even with members: a consumer group's unsubscribed topic expires at it.
    members: dict[str, Any] = {
        "has_members": True,
        "protocol_type": CONSUMER_PROTOCOL,
        "subscribed": frozenset({"b"}),
    }
    assert expired(soon, 299, **members) == set()
    assert expired(soon, 300, **members) == {A0}
    assert expired(late, 10 * RETENTION_MS - 1, **members) == set()
    assert expired(late, 10 * RETENTION_MS, **members) == {A0}
    # A subscribed topic does not expire while its members are there (Kafka 2.8 filters
    # the subscribed topics out first), whatever its expire timestamp.
    assert expired({B0: committed(1, ts=0, expire=300)}, 10**12, **members) == set()


def test_a_consumer_group_with_members_expires_only_unsubscribed_topics() -> None:
    offsets = {A0: committed(1, ts=0), A1: committed(2, ts=0), B0: committed(3, ts=0)}
    offsets[C0] = committed(4, ts=5_000)
    args: dict[str, Any] = {"has_members": True, "protocol_type": CONSUMER_PROTOCOL}
    subscribed = frozenset({"a"})
    assert expired(offsets, RETENTION_MS - 1, subscribed=subscribed, **args) == set()
    assert expired(offsets, 10**12, subscribed=subscribed, **args) == {B0, C0}
    # Counted from the commit (empty_since is not for a group with members).
    at = 5_000 + RETENTION_MS - 1
    assert expired(offsets, at, subscribed=subscribed, empty_since_ms=at, **args) == {B0}
    assert expired(offsets, 10**12, subscribed=frozenset({"a", "b", "c"}), **args) == set()
    assert expired(offsets, 10**12, subscribed=frozenset(), **args) == set(offsets)


def test_a_group_with_members_of_another_protocol_expires_nothing() -> None:
    offsets = {A0: committed(1, ts=0), B0: committed(2, ts=0, expire=1)}
    for protocol_type in ("connect", ""):
        assert (
            expired(
                offsets,
                10**12,
                has_members=True,
                protocol_type=protocol_type,
                subscribed=frozenset(),
            )
            == set()
        )
    # Without members, the same offsets expire.
    assert expired(offsets, 10**12, protocol_type="connect") == {A0, B0}
    # (Of no protocol type, members or not, they expire from their commits: Kafka's
    # `case None`.)
    assert expired(offsets, 10**12, has_members=True, protocol_type=None) == {A0, B0}


def test_a_rebalancing_group_expires_nothing() -> None:
    """Kafka 2.8's removeExpiredOffsets expires a consumer group's unsubscribed offsets
    only while it is Stable, and an Empty group's: a group rebalancing (with members or,
    PreparingRebalance, with none left) keeps everything."""
    offsets = {A0: committed(1, ts=0), B0: committed(2, ts=0, expire=1)}
    for has_members in (True, False):
        kept = expired_offsets(
            offsets,
            now_ms=10**12,
            retention_ms=RETENTION_MS,
            empty=False,
            stable=False,
            protocol_type=CONSUMER_PROTOCOL,
            empty_since_ms=0 if not has_members else None,
            subscribed=frozenset({"a"}),
        )
        assert kept == []
    assert expired(
        offsets, 10**12, has_members=True, protocol_type=CONSUMER_PROTOCOL, subscribed=frozenset()
    ) == {A0, B0}


def test_a_consumer_group_with_members_of_unknown_subscriptions_expires_nothing() -> None:
    offsets = {A0: committed(1, ts=0), B0: committed(2, ts=0, expire=1)}
    assert (
        expired(offsets, 10**12, has_members=True, protocol_type=CONSUMER_PROTOCOL, subscribed=None)
        == set()
    )


def test_pending_partitions_never_expire() -> None:
    offsets = {A0: committed(1, ts=0), A1: committed(2, ts=0, expire=1), B0: committed(3, ts=0)}
    assert expired(offsets, 10**12, pending=[A0, A1]) == {B0}
    assert expired(offsets, 10**12, pending=[A0, A1], empty_since_ms=0) == {B0}
    assert expired(
        offsets,
        10**12,
        pending=[B0],
        has_members=True,
        protocol_type=CONSUMER_PROTOCOL,
        subscribed=frozenset(),
    ) == {A0, A1}
    # A pending partition with no offset yet changes nothing.
    assert expired(offsets, 10**12, pending=[C0]) == set(offsets)


# --- 2. subscribed_topics ----------------------------------------------------------------


def test_subscribed_topics_is_the_union_of_the_members_topics() -> None:
    v0 = subscription(["a", "b"])
    v0_user_data = subscription(["c"], user_data=b"\x00\x01user")
    v1 = subscription(["b", "d"], version=1, owned=[("b", [0, 1]), ("d", [2])])
    v1_no_owned = subscription(["e"], version=1, user_data=b"")
    unicode_topic = subscription(["t\u00e9l\u00e9"])
    assert subscribed_topics([v0]) == frozenset({"a", "b"})
    assert subscribed_topics([v0, v0_user_data, v1, v1_no_owned, unicode_topic]) == frozenset(
        {"a", "b", "c", "d", "e", "t\u00e9l\u00e9"}
    )
    assert subscribed_topics([subscription([])]) == frozenset()
    assert subscribed_topics([]) == frozenset()
    # Versions past 1 lead with the same fields (v3 would add a rack): still read.
    assert subscribed_topics([subscription(["x"], version=3, owned=[])]) == frozenset({"x"})


def test_a_malformed_subscription_is_unknown() -> None:
    good = subscription(["a", "b"])
    malformed = {
        "empty": b"",
        "version only": b"\x00\x00",
        "truncated count": b"\x00\x00\x00\x00",
        "truncated in a topic's length": good[:7],
        "truncated in a topic's name": good[:8],
        "a topic missing": subscription(["a"])[:-4][:-3],  # count 1, no topic after it
        "no user data": struct.pack(">hi", 0, 0),
        "no user data, a negative version": struct.pack(">hi", -1, 0),
        "user data past the data": struct.pack(">hii", 0, 0, 5) + b"abcd",
        "negative count": struct.pack(">hi", 0, -1),
        "count past the data": struct.pack(">hi", 0, 1_000_000),
        "negative length": struct.pack(">hih", 0, 1, -1),
        "length past the data": struct.pack(">hih", 0, 1, 50) + b"ab",
    }
    for name, data in malformed.items():
        assert subscribed_topics([data]) is None, name
        # One malformed member makes the whole group's subscription unknown.
        assert subscribed_topics([good, data]) is None, name
        assert subscribed_topics([data, good]) is None, name


def test_a_subscription_of_any_version_is_read_as_version_0() -> None:
    """Kafka 2.8's computeSubscribedTopics reads the version and parses the rest as v0
    (deserializeSubscription(buffer, 0)) whatever it says: a negative one too."""
    for version in (-1, -(2**15), 2, 2**15 - 1):
        data = subscription(["a", "b"], version=version, user_data=b"u")
        assert subscribed_topics([data]) == frozenset({"a", "b"}), version
        assert subscribed_topics([data, subscription(["c"])]) == frozenset({"a", "b", "c"})


def test_a_topic_name_not_utf8_is_read_with_replacement_characters() -> None:
    """Kafka's Readable.readString is new String(bytes, UTF_8), which replaces a malformed
    sequence: the subscription parses (its mangled name matches no topic)."""
    data = struct.pack(">hih", 0, 2, 2) + b"\xff\xfe" + _string("a") + struct.pack(">i", -1)
    assert subscribed_topics([data]) == frozenset({"\ufffd\ufffd", "a"})


_topic = st.text(min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_topic, max_size=5), max_size=5),
    st.integers(-(2**15), 2**15 - 1),
    st.one_of(st.none(), st.binary(max_size=8)),
)
def test_subscriptions_decode_to_the_union_of_their_topics(
    members: list[list[str]], version: int, user_data: bytes | None
) -> None:
    data = [
        subscription(topics, version=version, user_data=user_data, owned=[(t, [0]) for t in topics])
        for topics in members
    ]
    assert subscribed_topics(data) == frozenset(t for topics in members for t in topics)


# --- 3. the coordinator ------------------------------------------------------------------


class Clock:
    """The coordinator's clock, moved on by the test (``ms``)."""

    def __init__(self, ms: int) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


class Node(CoordinatorNode):
    """The node of test_group_coordinator.py, with the test's clock and retention, and
    ways to lead or follow both offsets partitions and read their records."""

    def __init__(
        self, root: Path, clock: Clock, *, retention_ms: int, check_interval_ms: int
    ) -> None:
        super().__init__(
            root,
            clock=clock,
            offsets_retention_ms=retention_ms,
            offsets_retention_check_interval_ms=check_interval_ms,
        )

    def apply(self, request: dict[str, Any]) -> None:
        answer = self.replicas.become_leader_or_follower(request)
        assert answer["error_code"] == 0
        errors = [e["error_code"] for t in answer["topics"] for e in t["partition_errors"]]
        assert set(errors) == {0}

    def lead_all(self, *, epoch: int) -> None:
        """Leads both offsets partitions (ISR: this broker alone), loaded."""
        self.apply(leader_and_isr(dict.fromkeys(range(PARTITIONS), (BROKER, epoch))))
        self.wait_all_loaded()

    def follow_all(self, *, epoch: int) -> None:
        self.apply(leader_and_isr(dict.fromkeys(range(PARTITIONS), (OTHER, epoch))))

    def wait_all_loaded(self) -> None:
        for index in range(PARTITIONS):
            group_id = on_partition(index)

            def loaded(group_id: str = group_id) -> bool:
                return self.groups.coordinates(group_id) == ErrorCode.NONE

            wait_until(f"{group_id} loaded", loaded)

    def offsets_partition(self, index: int = 0) -> Any:
        return self.replicas.partitions[TopicPartition(OFFSETS_TOPIC, index)]

    def records(
        self, index: int = 0
    ) -> list[tuple[OffsetKey | GroupKey, CommittedOffset | GroupMetadata | None]]:
        """Every record of the offsets partition, decoded, in log order."""
        plog = self.offsets_partition(index).log
        assert plog is not None
        out: list[tuple[OffsetKey | GroupKey, CommittedOffset | GroupMetadata | None]] = []
        position = plog.log_start_offset
        while position < plog.log_end_offset:
            read = plog.read(position, 1 << 24)
            assert read.region is not None
            data = memoryview(read.region.to_bytes())
            for header in iter_batches(data):
                out += read_offset_records(data[header.position : header.position + header.size])
            assert read.next_offset > position
            position = read.next_offset
        return out


@pytest.fixture
def clock() -> Clock:
    return Clock(NOW)


@pytest.fixture
def nodes(tmp_path: Path, clock: Clock) -> Iterator[Callable[..., Node]]:
    """Makes nodes over ``tmp_path`` sharing ``clock`` (one at a time: a new one after
    closing the last reads the same logs); all are closed at the end. The expirer thread
    runs only when a test asks (its interval is an hour by default)."""
    made: list[Node] = []

    def make(retention_ms: int = RETENTION_MS, check_interval_ms: int = 3_600_000) -> Node:
        node = Node(tmp_path, clock, retention_ms=retention_ms, check_interval_ms=check_interval_ms)
        made.append(node)
        return node

    try:
        yield make
    finally:
        for node in reversed(made):
            node.close()


@pytest.fixture
def node(nodes: Callable[..., Node]) -> Node:
    n = nodes()
    n.lead_all(epoch=0)
    return n


def commit(
    groups: GroupCoordinator,
    offsets: dict[TopicPartition, CommittedOffset],
    member_id: str = "",
    generation: int = -1,
) -> None:
    assert groups.commit_offsets(G0, member_id, generation, offsets) == dict.fromkeys(
        offsets, ErrorCode.NONE
    )


def fetched(groups: GroupCoordinator) -> dict[TopicPartition, CommittedOffset | None]:
    error, offsets = groups.fetch_offsets(G0, None)
    assert error == ErrorCode.NONE
    return offsets


def listed(groups: GroupCoordinator) -> dict[str, tuple[str, str]]:
    error, rows = groups.list_groups()
    assert error == ErrorCode.NONE
    return {group_id: (protocol_type, state) for group_id, protocol_type, state in rows}


def group_state(groups: GroupCoordinator) -> str:
    error, described = groups.describe_group(G0)
    assert error == ErrorCode.NONE
    return cast(str, described["group_state"])


def join(
    groups: GroupCoordinator,
    protocols: tuple[tuple[str, bytes], ...],
    group_id: str = G0,
    group_instance_id: str | None = None,
) -> JoinAnswer:
    """A new consumer's JoinGroup (held until the join phase ends)."""
    return groups.join_group(
        group_id,
        "",
        require_known_member_id=False,
        client_id="consumer",
        client_host="/127.0.0.1",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        protocol_type=CONSUMER_PROTOCOL,
        protocols=protocols,
        group_instance_id=group_instance_id,
    )


def consumer_member(groups: GroupCoordinator, topics: Sequence[str]) -> JoinAnswer:
    """A consumer subscribed to ``topics`` joins (at once: no initial delay) and syncs."""
    joined = join(groups, (("range", subscription(topics)),))
    assert joined.error == ErrorCode.NONE
    assert joined.leader == joined.member_id
    synced = groups.sync_group(
        G0, joined.member_id, joined.generation_id, CONSUMER_PROTOCOL, "range", {}
    )
    assert synced.error == ErrorCode.NONE
    assert group_state(groups) == GroupState.STABLE.value
    return joined


def test_a_standalone_commit_expires_and_stays_expired_after_a_restart(
    nodes: Callable[..., Node],
) -> None:
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    commit(groups, {A0: committed(5, ts=NOW), A1: committed(6, ts=NOW + 100)})
    end_before = first.offsets_partition().log_end_offset

    # b. Not before the retention has passed since the commit.
    assert groups.expire_offsets(NOW + RETENTION_MS - 1) == 0
    assert fetched(groups) == {A0: committed(5, ts=NOW), A1: committed(6, ts=NOW + 100)}
    assert listed(groups) == {G0: ("", GroupState.EMPTY.value)}
    assert first.offsets_partition().log_end_offset == end_before  # nothing written

    # a. One at a time, each retention after its own commit.
    assert groups.expire_offsets(NOW + RETENTION_MS) == 1
    assert fetched(groups) == {A1: committed(6, ts=NOW + 100)}
    assert listed(groups) == {G0: ("", GroupState.EMPTY.value)}
    assert groups.expire_offsets(NOW + RETENTION_MS + 100) == 1
    assert groups.fetch_offsets(G0, [A0, A1]) == (ErrorCode.NONE, {A0: None, A1: None})
    assert listed(groups) == {}
    assert group_state(groups) == GroupState.DEAD.value
    assert groups.expire_offsets(NOW + 100 * RETENTION_MS) == 0  # nothing more
    # The offsets' tombstones are in the log, and none of the group's: known by its
    # offsets alone (generation 0), it has no record (Kafka's cleanupGroupMetadata).
    assert first.records()[-2:] == [
        (OffsetKey(G0, "a", 0), None),
        (OffsetKey(G0, "a", 1), None),
    ]
    assert GroupKey(G0) not in [key for key, _value in first.records()]
    first.close()

    second = nodes()  # a new coordinator over the same log
    second.lead_all(epoch=1)
    assert fetched(second.groups) == {}
    assert listed(second.groups) == {}
    # The group is usable again, from scratch.
    commit(second.groups, {A0: committed(7, ts=NOW + 5 * RETENTION_MS)})
    assert fetched(second.groups) == {A0: committed(7, ts=NOW + 5 * RETENTION_MS)}


def test_a_consumer_group_with_a_member_keeps_its_subscribed_topics(node: Node) -> None:
    groups = node.groups
    joined = consumer_member(groups, ["a"])
    values = {A0: committed(10), A1: committed(11), B0: committed(20)}
    commit(groups, values, joined.member_id, joined.generation_id)

    assert groups.expire_offsets(NOW + RETENTION_MS - 1) == 0
    assert groups.expire_offsets(NOW + RETENTION_MS) == 1  # b only
    assert fetched(groups) == {A0: committed(10), A1: committed(11)}
    assert groups.expire_offsets(NOW + 100 * RETENTION_MS) == 0
    assert listed(groups) == {G0: (CONSUMER_PROTOCOL, GroupState.STABLE.value)}
    assert groups.heartbeat(G0, joined.member_id, joined.generation_id) == ErrorCode.NONE
    assert node.records()[-1] == (OffsetKey(G0, "b", 0), None)


def test_a_consumer_group_with_an_unreadable_subscription_keeps_everything(node: Node) -> None:
    groups = node.groups
    joined = join(groups, (("range", b"\x00\x00\x00\x00\x00\x05junk"),))
    assert joined.error == ErrorCode.NONE
    assert (
        groups.sync_group(G0, joined.member_id, joined.generation_id, None, None, {}).error
        == ErrorCode.NONE
    )
    commit(groups, {A0: committed(1), B0: committed(2)}, joined.member_id, joined.generation_id)
    assert groups.expire_offsets(NOW + 100 * RETENTION_MS) == 0
    assert set(fetched(groups)) == {A0, B0}


def test_a_consumer_group_whose_subscription_has_a_negative_version_expires_the_rest(
    node: Node,
) -> None:
    """Kafka 2.8 parses a subscription of a negative version as v0 (computeSubscribedTopics),
    so the Stable group's offsets of topics no member subscribes to expire as ever
    (removeExpiredOffsets). It was unknown: nothing of the group expired."""
    groups = node.groups
    joined = join(groups, (("range", subscription(["a"], version=-1)),))
    assert joined.error == ErrorCode.NONE
    synced = groups.sync_group(G0, joined.member_id, 1, CONSUMER_PROTOCOL, "range", {})
    assert synced.error == ErrorCode.NONE
    commit(groups, {A0: committed(10), B0: committed(20)}, joined.member_id, 1)
    assert groups.expire_offsets(NOW + RETENTION_MS) == 1
    assert fetched(groups) == {A0: committed(10)}


def test_a_consumer_group_completing_a_rebalance_keeps_its_offsets(node: Node) -> None:
    """Kafka 2.8's removeExpiredOffsets expires a consumer group's unsubscribed offsets only
    while it is Stable: CompletingRebalance (the leader's SyncGroup not yet in), nothing
    expires; Stable, the unsubscribed topic's offset does."""
    groups = node.groups
    commit(groups, {A0: committed(10), B0: committed(20)})  # committed alone
    joined = join(groups, (("range", subscription(["a"])),))
    assert joined.error == ErrorCode.NONE
    assert group_state(groups) == GroupState.COMPLETING_REBALANCE.value
    assert groups.expire_offsets(NOW + 100 * RETENTION_MS) == 0
    assert set(fetched(groups)) == {A0, B0}
    synced = groups.sync_group(G0, joined.member_id, 1, CONSUMER_PROTOCOL, "range", {})
    assert synced.error == ErrorCode.NONE
    assert groups.expire_offsets(NOW + 100 * RETENTION_MS) == 1
    assert set(fetched(groups)) == {A0}


def test_a_stable_groups_subscriptions_are_its_generations(node: Node) -> None:
    """Kafka 2.8 reads a group's subscribed topics when a generation starts
    (initNextGeneration's computeSubscribedTopics): a static member taking its place in
    the Stable group with a subscription of other topics (no rebalance: the protocol
    stays) does not change them until the next generation."""
    groups = node.groups

    def static_join(topics: Sequence[str]) -> JoinAnswer:
        return join(groups, (("range", subscription(topics)),), group_instance_id="static")

    first = static_join(["a"])
    assert first.error == ErrorCode.NONE
    synced = groups.sync_group(G0, first.member_id, 1, CONSUMER_PROTOCOL, "range", {})
    assert synced.error == ErrorCode.NONE
    commit(groups, {A0: committed(10), B0: committed(20)}, first.member_id, 1)
    restarted = static_join(["a", "b"])
    assert (restarted.error, restarted.generation_id) == (ErrorCode.NONE, 1)
    assert group_state(groups) == GroupState.STABLE.value
    assert groups.expire_offsets(NOW + RETENTION_MS) == 1  # b: not the generation's
    assert set(fetched(groups)) == {A0}


def test_a_member_joining_without_the_groups_protocol_does_not_break_expiry(
    node: Node,
) -> None:
    """A member may join a Stable group with none of the protocol in use, only one every
    member supports (a rolling change of assignor): while it rebalances, the group has a
    member without metadata for the current protocol. Its subscriptions are unknown then
    (nothing of the group expires), and the other groups expire as ever."""
    groups = node.groups
    other = on_partition(0, "other-")
    commit(groups, {A0: committed(1)})  # G0's own, standalone
    assert groups.commit_offsets(other, "", -1, {A0: committed(2)}) == {A0: ErrorCode.NONE}
    both = (("range", subscription(["a"])), ("roundrobin", subscription(["a"])))
    first = join(groups, both, other)
    assert first.error == ErrorCode.NONE
    synced = groups.sync_group(other, first.member_id, first.generation_id, None, None, {})
    assert synced.error == ErrorCode.NONE
    assert synced.protocol_name == "range"
    second = Call(lambda: join(groups, (("roundrobin", subscription(["b"])),), other))
    assert second.waiting(0.05)  # held until the first member rejoins
    error, described = groups.describe_group(other)
    assert (error, described["group_state"]) == (
        ErrorCode.NONE,
        GroupState.PREPARING_REBALANCE.value,
    )
    assert len(described["members"]) == 2

    assert groups.expire_offsets(NOW + 10 * RETENTION_MS) == 1  # G0's
    assert fetched(groups) == {}
    assert groups.fetch_offsets(other, None) == (ErrorCode.NONE, {A0: committed(2)})


def wait_for_empty_record(node: Node, generation: int) -> GroupMetadata:
    """The Empty group's metadata record, written in the background."""
    found: list[GroupMetadata] = []

    def written() -> bool:
        for key, value in node.records():
            if (
                key == GroupKey(G0)
                and isinstance(value, GroupMetadata)
                and value.generation == generation
                and not value.members
            ):
                found.append(value)
                return True
        return False

    wait_until(f"{G0}'s Empty record at generation {generation}", written)
    return found[0]


def left_empty(node: Node, clock: Clock, left_at: int) -> JoinAnswer:
    """A member subscribed to "a" commits a and b (at NOW), b expires, and the member
    leaves at ``left_at``: the group is Empty, its record written."""
    groups = node.groups
    joined = consumer_member(groups, ["a"])
    commit(groups, {A0: committed(10), B0: committed(20)}, joined.member_id, joined.generation_id)
    assert groups.expire_offsets(NOW + RETENTION_MS) == 1
    assert fetched(groups) == {A0: committed(10)}

    clock.ms = left_at
    assert groups.leave_group(G0, [joined.member_id]) == (
        ErrorCode.NONE,
        {joined.member_id: ErrorCode.NONE},
    )
    assert group_state(groups) == GroupState.EMPTY.value
    record = wait_for_empty_record(node, joined.generation_id + 1)
    assert record.current_state_timestamp_ms == left_at
    assert record.protocol_type == CONSUMER_PROTOCOL
    return joined


def test_an_empty_group_keeps_its_protocol_type(nodes: Callable[..., Node], clock: Clock) -> None:
    """A group left Empty is written, listed and described with the protocol type its
    members had, and read back so, as Kafka 2.8's (GroupMetadata.protocolType is set by
    add() when the group has no member and by loadGroup, never cleared). It was cleared:
    the record said "", which a Kafka broker reading the log takes for a group that
    never had members (its offsets expiring from their commit), and ListGroups and
    DescribeGroups answered "" (Kafka's AdminClient calls that a simple consumer group).
    A new first member's protocol type replaces it, as Kafka's add() does."""
    first = nodes()
    first.lead_all(epoch=0)
    left_at = NOW + 3 * RETENTION_MS
    left_empty(first, clock, left_at)
    assert listed(first.groups) == {G0: (CONSUMER_PROTOCOL, GroupState.EMPTY.value)}
    error, described = first.groups.describe_group(G0)
    assert error == ErrorCode.NONE
    assert (described["protocol_type"], described["members"]) == (CONSUMER_PROTOCOL, [])
    first.close()

    second = nodes()  # a new coordinator reads the Empty record back
    second.lead_all(epoch=1)
    groups = second.groups
    assert listed(groups) == {G0: (CONSUMER_PROTOCOL, GroupState.EMPTY.value)}
    assert groups.describe_group(G0)[1]["protocol_type"] == CONSUMER_PROTOCOL
    assert fetched(groups) == {A0: committed(10)}
    # Its offsets expire retention after it became Empty (Kafka's removeExpiredOffsets:
    # a protocol type and Empty), not after their commit.
    assert groups.expire_offsets(left_at + RETENTION_MS - 1) == 0
    # A member of another protocol type makes it its own.
    other = groups.join_group(
        G0,
        "",
        require_known_member_id=False,
        client_id="connect-worker",
        client_host="/127.0.0.1",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=SESSION_MS,
        protocol_type="connect",
        protocols=(("sessioned", b""),),
    )
    assert (other.error, other.protocol_type) == (ErrorCode.NONE, "connect")
    assert listed(groups)[G0][0] == "connect"


def test_an_empty_group_expires_retention_after_it_became_empty_then_is_deleted(
    nodes: Callable[..., Node], clock: Clock
) -> None:
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    left_at = NOW + 3 * RETENTION_MS  # a's commit is older than the retention by then
    left_empty(first, clock, left_at)

    assert groups.expire_offsets(left_at + RETENTION_MS - 1) == 0
    assert fetched(groups) == {A0: committed(10)}
    assert listed(groups) == {G0: (CONSUMER_PROTOCOL, GroupState.EMPTY.value)}

    assert groups.expire_offsets(left_at + RETENTION_MS) == 1
    assert fetched(groups) == {}
    assert listed(groups) == {}
    assert group_state(groups) == GroupState.DEAD.value
    assert first.records()[-2:] == [(OffsetKey(G0, "a", 0), None), (GroupKey(G0), None)]

    # Read again by the same coordinator (a new leader epoch) ...
    first.follow_all(epoch=1)
    first.lead_all(epoch=2)
    assert fetched(groups) == {}
    assert listed(groups) == {}
    first.close()
    # ... and by a new one: the group is not brought back by its earlier records.
    second = nodes()
    second.lead_all(epoch=3)
    assert fetched(second.groups) == {}
    assert listed(second.groups) == {}
    # A member joining makes a new group: its first generation.
    assert consumer_member(second.groups, ["a"]).generation_id == 1
    assert listed(second.groups) == {G0: (CONSUMER_PROTOCOL, GroupState.STABLE.value)}


def test_an_empty_groups_time_is_read_back_by_a_new_coordinator(
    nodes: Callable[..., Node], clock: Clock
) -> None:
    first = nodes()
    first.lead_all(epoch=0)
    left_at = NOW + 3 * RETENTION_MS
    left_empty(first, clock, left_at)
    first.close()

    clock.ms = left_at + RETENTION_MS // 2
    second = nodes()
    second.lead_all(epoch=1)
    groups = second.groups
    assert listed(groups) == {G0: (CONSUMER_PROTOCOL, GroupState.EMPTY.value)}
    assert groups.expire_offsets(left_at + RETENTION_MS - 1) == 0
    assert groups.expire_offsets(left_at + RETENTION_MS) == 1
    assert listed(groups) == {}


def test_an_empty_group_without_offsets_is_deleted(node: Node) -> None:
    groups = node.groups
    joined = consumer_member(groups, ["a"])
    assert groups.leave_group(G0, [joined.member_id])[0] == ErrorCode.NONE
    wait_for_empty_record(node, joined.generation_id + 1)
    assert groups.expire_offsets(NOW) == 0
    assert listed(groups) == {}
    assert node.records()[-1] == (GroupKey(G0), None)


def test_an_empty_record_written_late_does_not_bring_a_deleted_group_back(
    nodes: Callable[..., Node],
) -> None:
    """An Empty group with no offset is deleted at the next check, maybe before the
    writer thread has written its Empty record: that record, written after the
    tombstone, must not bring the group back."""
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    joined = consumer_member(groups, ["a"])
    writer_queue = groups._empty_writes
    groups._empty_writes = queue.Queue()  # the writer thread does not see the next write
    try:
        assert groups.leave_group(G0, [joined.member_id])[0] == ErrorCode.NONE
        item = groups._empty_writes.get_nowait()
        assert item is not None
        group_id, coordinator_epoch, metadata = item
        assert (group_id, metadata.generation) == (G0, joined.generation_id + 1)
        assert groups.expire_offsets(NOW) == 0
        assert listed(groups) == {}
        assert first.records()[-1] == (GroupKey(G0), None)
        # The writer thread gets to it now (as its _write_loop would).
        assert groups._store_group(group_id, metadata, coordinator_epoch) == ErrorCode.NONE
    finally:
        groups._empty_writes = writer_queue
    assert listed(groups) == {}
    first.close()
    second = nodes()
    second.lead_all(epoch=1)
    assert listed(second.groups) == {}


def test_a_pending_commit_is_not_expired(node: Node) -> None:
    groups = node.groups
    commit(groups, {A0: committed(1), B0: committed(2)})
    with groups._cond:
        groups._count_pending(G0, [A0], 1)
    assert groups.expire_offsets(NOW + 10 * RETENTION_MS) == 1  # b only
    assert fetched(groups) == {A0: committed(1)}
    assert node.records()[-1] == (OffsetKey(G0, "b", 0), None)
    # a released; b committed again, in flight: a expires, but the group stays.
    with groups._cond:
        groups._count_pending(G0, [A0], -1)
        groups._count_pending(G0, [B0], 1)
        assert groups._pending == {G0: {B0: 1}}
    assert groups.expire_offsets(NOW + 10 * RETENTION_MS) == 1
    assert fetched(groups) == {}
    assert listed(groups) == {G0: ("", GroupState.EMPTY.value)}
    with groups._cond:
        groups._count_pending(G0, [B0], -1)
        assert groups._pending == {}
    # Released: the group, left with nothing, is deleted (with no record to tombstone).
    assert groups.expire_offsets(NOW + 10 * RETENTION_MS) == 0
    assert listed(groups) == {}
    assert node.records()[-1] == (OffsetKey(G0, "a", 0), None)


def test_a_commit_waiting_for_the_isr_is_not_expired(nodes: Callable[..., Node]) -> None:
    """A real commit in flight: with another broker in the ISR, it waits (pending) until
    that broker fetches it; an expiry meanwhile leaves its partition alone."""
    n = nodes()
    request = leader_and_isr({0: (BROKER, 0)})
    state = request["topic_states"][0]["partition_states"][0]
    state["isr"] = state["replicas"] = [BROKER, OTHER]
    n.apply(request)
    wait_until("loaded", lambda: n.groups.coordinates(G0) == ErrorCode.NONE)
    groups = n.groups
    p = n.offsets_partition()

    def replicated(values: dict[TopicPartition, CommittedOffset]) -> Call[Any]:
        end = p.log_end_offset
        call = Call(lambda: groups.commit_offsets(G0, "", -1, values))
        wait_until("the commit appended", lambda: p.log_end_offset > end)
        return call

    first = replicated({A0: committed(1), B0: committed(2)})
    n.replicas.record_follower_fetch(p, OTHER, p.log_end_offset)
    assert first.answer() == {A0: ErrorCode.NONE, B0: ErrorCode.NONE}

    second = replicated({A0: committed(3)})
    assert second.waiting(0.05)
    with groups._cond:
        assert groups._pending == {G0: {A0: 1}}
    assert groups.expire_offsets(NOW + 10 * RETENTION_MS) == 1  # b only
    assert fetched(groups) == {A0: committed(1)}
    n.replicas.record_follower_fetch(p, OTHER, p.log_end_offset)
    assert second.answer() == {A0: ErrorCode.NONE}
    with groups._cond:
        assert groups._pending == {}
    # The commit landed after the tombstones: its offset is the one kept, and it expires
    # in its turn.
    assert fetched(groups) == {A0: committed(3)}
    assert groups.expire_offsets(NOW + 10 * RETENTION_MS) == 1
    assert fetched(groups) == {}


def test_an_offset_commit_v2_expires_at_its_own_retention(nodes: Callable[..., Node]) -> None:
    n = nodes(retention_ms=24 * 3600 * 1000)  # the broker's retention: long
    n.lead_all(epoch=0)
    apis = GroupApis(
        n.groups, metadata_knowing({"a": 1, "b": 1, "c": 1}), None, offsets_replication_factor=1
    )

    def offset_commit(version: int, topic: str, retention_ms: int) -> None:
        body: dict[str, Any] = {
            "group_id": G0,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": "m"}
                    ],
                }
            ],
        }
        if version <= 4:
            body["retention_time_ms"] = retention_ms
        answer = apis.offset_commit(version, body, {})
        assert answer["topics"][0]["partitions"][0]["error_code"] == 0

    before = int(time.time() * 1000)
    offset_commit(2, "a", 2_000)
    offset_commit(2, "b", -1)  # -1: the broker's retention
    offset_commit(5, "c", 0)
    after = int(time.time() * 1000)
    values = fetched(n.groups)
    a = values[A0]
    assert a is not None
    assert before <= a.commit_timestamp_ms <= after
    assert a.expire_timestamp_ms == a.commit_timestamp_ms + 2_000
    for other in (B0, C0):
        value = values[other]
        assert value is not None
        assert value.expire_timestamp_ms == NO_TIMESTAMP

    # A new coordinator reads the expire timestamp back with the offset.
    n.follow_all(epoch=1)
    n.lead_all(epoch=2)
    groups = n.groups
    reloaded = fetched(groups)[A0]
    assert reloaded is not None
    assert reloaded.expire_timestamp_ms == a.expire_timestamp_ms
    assert groups.expire_offsets(a.expire_timestamp_ms - 1) == 0
    assert groups.expire_offsets(a.expire_timestamp_ms) == 1
    assert set(fetched(groups)) == {B0, C0}
    assert listed(groups) == {G0: ("", GroupState.EMPTY.value)}


def test_the_expirer_thread_expires_on_its_own(nodes: Callable[..., Node], clock: Clock) -> None:
    n = nodes(check_interval_ms=20)
    n.lead_all(epoch=0)
    commit(n.groups, {A0: committed(1, ts=NOW - RETENTION_MS + 300)})
    time.sleep(0.1)  # checks run, with nothing to expire yet
    assert set(fetched(n.groups)) == {A0}
    clock.ms = NOW + 300
    wait_until("a0 expired", lambda: fetched(n.groups) == {})
    wait_until("the group deleted", lambda: listed(n.groups) == {})


# --- offsets of deleted topics (Kafka's handleDeletedPartitions) --------------------------


def test_a_deleted_topics_offsets_are_removed_for_good(nodes: Callable[..., Node]) -> None:
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    commit(groups, {A0: committed(5), A1: committed(6), B0: committed(7)})
    assert groups.handle_deleted_topics(["c", OFFSETS_TOPIC]) == 0  # none of theirs
    assert groups.handle_deleted_topics(["a"]) == 2
    # A topic created again under the name is not resumed from the old offsets.
    assert fetched(groups) == {B0: committed(7)}
    assert groups.fetch_offsets(G0, [A0]) == (ErrorCode.NONE, {A0: None})
    assert listed(groups) == {G0: ("", GroupState.EMPTY.value)}  # it has B0's
    assert groups.handle_deleted_topics(["a"]) == 0  # already gone
    assert groups.handle_deleted_topics(["b"]) == 1
    assert listed(groups) == {}  # no offset left, no member: deleted
    assert first.records()[-3:] == [
        (OffsetKey(G0, "a", 0), None),
        (OffsetKey(G0, "a", 1), None),
        (OffsetKey(G0, "b", 0), None),
    ]
    first.close()
    second = nodes()  # a new coordinator over the same log
    second.lead_all(epoch=1)
    assert fetched(second.groups) == {}


def isr_below_min(n: Node) -> None:
    """min.insync.replicas=2 for __consumer_offsets (a topic config change), whose
    partitions have an ISR of this broker alone: an acks=all append is refused."""
    for index in range(PARTITIONS):
        plog = n.offsets_partition(index).log
        assert plog is not None
        assert len(n.offsets_partition(index).isr) == 1
        n.logs.update_topic_config(
            OFFSETS_TOPIC, dataclasses.replace(plog.config, min_insync_replicas=2)
        )


def test_tombstones_are_written_with_the_isr_below_min_insync_replicas(
    nodes: Callable[..., Node],
) -> None:
    """The coordinator's tombstones (a deleted topic's offsets, expired offsets, a dead
    group's metadata) are appended with acks=0, as Kafka 2.8's cleanupGroupMetadata
    appends them (requiredAcks = 0: no min.insync.replicas check). They were appended
    with acks=all: with the ISR below min.insync.replicas all were refused and nothing
    was removed; a deleted topic's offsets stayed for good (handle_deleted_topics runs
    once), and a topic made again under the name resumed from them."""
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    commit(groups, {A0: committed(5), B0: committed(7, ts=NOW + 10 * RETENTION_MS)})
    isr_below_min(first)
    assert groups.handle_deleted_topics(["a"]) == 1
    assert fetched(groups) == {B0: committed(7, ts=NOW + 10 * RETENTION_MS)}
    assert groups.expire_offsets(NOW + 11 * RETENTION_MS) == 1
    assert fetched(groups) == {}
    assert listed(groups) == {}  # no offset left, no member: deleted
    assert first.records()[-2:] == [
        (OffsetKey(G0, "a", 0), None),
        (OffsetKey(G0, "b", 0), None),
    ]
    first.close()
    second = nodes()  # a new coordinator over the same log
    second.lead_all(epoch=1)
    assert fetched(second.groups) == {}
    assert listed(second.groups) == {}


def test_a_deleted_topics_offsets_are_dropped_even_if_the_tombstones_are_not_written(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Kafka 2.8's cleanupGroupMetadata: the offsets go from the cache first, then
    their tombstones are appended; one that fails is only logged (an expired offset's is
    written again at a next check; a deleted topic's, by the next coordinator's none: as
    in Kafka)."""
    groups = node.groups
    commit(groups, {A0: committed(5), B0: committed(7)})

    def refused(*_args: Any) -> tuple[ErrorCode, None, None, str]:
        return ErrorCode.KAFKA_STORAGE_ERROR, None, None, "the log directory failed"

    monkeypatch.setattr(node.replicas, "append_as_leader", refused)
    assert groups.handle_deleted_topics(["a"]) == 1
    assert fetched(groups) == {B0: committed(7)}
    assert groups.handle_deleted_topics(["b"]) == 1
    assert fetched(groups) == {}
    assert listed(groups) == {}


def test_an_offset_commit_of_a_partition_the_metadata_does_not_know_is_refused(
    node: Node,
) -> None:
    """OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION for a partition the broker's
    metadata does not know (a topic deleted, or never made) and writes only the others,
    as Kafka's handleOffsetCommitRequest does. It wrote them all: a commit racing a
    topic's deletion outlived it, and a topic made again under the name resumed from it."""
    groups = node.groups
    apis = GroupApis(groups, metadata_knowing({"a": 1}), None, offsets_replication_factor=1)

    def offset_commit(partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
        body = {
            "group_id": G0,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": i, "committed_offset": 9} for i in indexes],
                }
                for topic, indexes in partitions.items()
            ],
        }
        answer = apis.offset_commit(7, body, {})
        return {
            (t["name"], p["partition_index"]): p["error_code"]
            for t in answer["topics"]
            for p in t["partitions"]
        }

    unknown = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert offset_commit({"a": [0, 1], "gone": [0]}) == {
        ("a", 0): 0,
        ("a", 1): unknown,
        ("gone", 0): unknown,
    }
    assert set(fetched(groups)) == {A0}
    assert offset_commit({"gone": [0]}) == {("gone", 0): unknown}
    assert set(fetched(groups)) == {A0}
    assert [key for key, _value in node.records()] == [OffsetKey(G0, "a", 0)]


def test_a_commit_being_written_when_its_topic_is_deleted_goes_too(
    nodes: Callable[..., Node],
) -> None:
    """A commit of a deleted topic's partition still waiting for the ISR when the
    deletion comes is tombstoned after its record and not taken into the cache when
    answered (Kafka's removeOffsets drops pending commits too). It was taken in after
    the deletion, and one of a partition with no offset yet was not tombstoned at all: a
    topic made again under the name resumed from it, here and after a reload."""
    n = nodes()
    request = leader_and_isr({0: (BROKER, 0)})
    state = request["topic_states"][0]["partition_states"][0]
    state["isr"] = state["replicas"] = [BROKER, OTHER]
    n.apply(request)
    wait_until("loaded", lambda: n.groups.coordinates(G0) == ErrorCode.NONE)
    groups = n.groups
    p = n.offsets_partition()
    first = Call(lambda: groups.commit_offsets(G0, "", -1, {A0: committed(1), B0: committed(2)}))
    wait_until("the first commit appended", lambda: p.log_end_offset == 2)
    n.replicas.record_follower_fetch(p, OTHER, p.log_end_offset)
    assert first.answer() == {A0: ErrorCode.NONE, B0: ErrorCode.NONE}

    # a-1 has no offset yet: its first is in flight with a-0's next.
    second = Call(lambda: groups.commit_offsets(G0, "", -1, {A0: committed(3), A1: committed(4)}))
    wait_until("the second commit appended", lambda: p.log_end_offset == 4)
    removed = groups.handle_deleted_topics(["a"])
    n.replicas.record_follower_fetch(p, OTHER, p.log_end_offset)
    assert second.answer() == {A0: ErrorCode.NONE, A1: ErrorCode.NONE}
    assert fetched(groups) == {B0: committed(2)}
    assert removed == 2
    with groups._cond:
        assert groups._pending == {}
    n.follow_all(epoch=1)
    n.lead_all(epoch=2)  # a new coordinator reads the log
    assert fetched(n.groups) == {B0: committed(2)}


def test_a_group_with_members_stays_when_its_topic_is_deleted(node: Node) -> None:
    groups = node.groups
    member = consumer_member(groups, ["a"])
    commit(groups, {A0: committed(5)}, member.member_id, member.generation_id)
    assert groups.handle_deleted_topics(["a"]) == 1
    assert fetched(groups) == {}
    assert group_state(groups) == GroupState.STABLE.value


# --- tombstones: one batch per group (Kafka's cleanupGroupMetadata) ----------------------


def small_max_message_bytes(n: Node, limit: int, key: str = "max_message_bytes") -> None:
    """max.message.bytes=``limit`` for __consumer_offsets (a topic config change); or
    the LogConfig field ``key`` names."""
    plog = n.offsets_partition(0).log
    assert plog is not None
    n.logs.update_topic_config(OFFSETS_TOPIC, dataclasses.replace(plog.config, **{key: limit}))


def batches(n: Node) -> list[tuple[int, list[OffsetKey | GroupKey]]]:
    """(size, keys) of every batch of offsets partition 0, in log order."""
    plog = n.offsets_partition(0).log
    assert plog is not None
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:  # a read stays within one segment
        read = plog.read(offset, 1 << 24)
        assert read.region is not None
        data = memoryview(read.region.to_bytes())
        for header in iter_batches(data):
            records = read_offset_records(data[header.position : header.position + header.size])
            out.append((header.size, [key for key, _value in records]))
            offset = header.last_offset + 1
    return out


MANY = [on_partition(0, prefix=f"many{i}-") for i in range(30)]
TWENTY = [tp("a", i) for i in range(20)]


def commit_many(n: Node) -> None:
    for group_id in MANY:
        offsets = {p: committed(10 + p.partition) for p in TWENTY}
        errors = n.groups.commit_offsets(group_id, "", -1, offsets)
        assert errors == dict.fromkeys(TWENTY, ErrorCode.NONE)


def assert_tombstoned_per_group(n: Node, written_before: int, limit: int) -> None:
    """Each group's offset tombstones in a batch of its own (none of the group's own:
    known by its offsets alone, it has no record)."""
    written = batches(n)[written_before:]
    assert [keys for _size, keys in written] == [
        [OffsetKey(g, p.topic, p.partition) for p in TWENTY] for g in sorted(MANY)
    ]
    assert max(size for size, _keys in written) <= limit


@pytest.mark.parametrize("removal", ["expired", "deleted topic"])
def test_the_tombstones_of_many_groups_are_written_one_group_at_a_time(
    nodes: Callable[..., Node], removal: str
) -> None:
    """Kafka 2.8's cleanupGroupMetadata appends each group's tombstones (its offsets',
    then its own) as one batch. All those of an offsets partition went in one batch:
    past max.message.bytes (some 20,000 offsets at the default 1 MB) it was refused
    MESSAGE_TOO_LARGE, nothing was tombstoned, and as the cache had dropped them
    anyway, the next coordinator read every one back: expired offsets returned, and a
    topic made again under a deleted one's name resumed from the old offsets. Here the
    limit is made small (1,000 bytes) rather than the offsets many."""
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    commit_many(first)
    limit = 1_000
    small_max_message_bytes(first, limit)
    written_before = len(batches(first))
    if removal == "expired":
        assert groups.expire_offsets(NOW + RETENTION_MS) == len(MANY) * len(TWENTY)
    else:
        assert groups.handle_deleted_topics(["a"]) == len(MANY) * len(TWENTY)
    assert listed(groups) == {}
    assert_tombstoned_per_group(first, written_before, limit)
    first.close()

    second = nodes()  # a new coordinator over the same log
    second.lead_all(epoch=1)
    assert listed(second.groups) == {}
    for group_id in MANY:
        assert second.groups.fetch_offsets(group_id, None) == (ErrorCode.NONE, {})


@pytest.mark.parametrize("key", ["max_message_bytes", "segment_bytes"])
def test_one_groups_tombstones_over_max_message_bytes_are_split_at_it(
    nodes: Callable[..., Node], key: str
) -> None:
    """A group whose tombstones alone exceed max.message.bytes gets them in consecutive
    batches within it, its own last (Kafka 2.8's one batch would be refused, and the
    offsets come back with the next coordinator). The same under a segment.bytes
    lower than max.message.bytes, which the log refuses a batch past too. (The group
    had members, so it has a record to tombstone.)"""
    first = nodes()
    first.lead_all(epoch=0)
    groups = first.groups
    joined = consumer_member(groups, ["b"])
    partitions = [tp("a", i) for i in range(100)]
    for start in range(0, 100, 20):
        commit(
            groups,
            {p: committed(p.partition) for p in partitions[start : start + 20]},
            joined.member_id,
            joined.generation_id,
        )
    assert groups.leave_group(G0, [joined.member_id]) == (
        ErrorCode.NONE,
        {joined.member_id: ErrorCode.NONE},
    )
    wait_for_empty_record(first, joined.generation_id + 1)
    limit = 1_000
    small_max_message_bytes(first, limit, key)
    written_before = len(batches(first))
    assert groups.handle_deleted_topics(["a"]) == 100
    written = batches(first)[written_before:]
    assert len(written) > 1
    assert all(size <= limit for size, _keys in written)
    assert [key for _size, keys in written for key in keys] == [
        OffsetKey(G0, p.topic, p.partition) for p in sorted(partitions)
    ] + [GroupKey(G0)]
    first.close()

    second = nodes()
    second.lead_all(epoch=1)
    assert fetched(second.groups) == {}
    assert listed(second.groups) == {}


# --- a group's record refused: what SyncGroup answers (Kafka's storeGroup) ------------------


@pytest.mark.parametrize(
    ("refusal", "answered"),
    [
        ("max_message_bytes", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("segment_bytes", ErrorCode.UNKNOWN_SERVER_ERROR),
        ("timeout", ErrorCode.REBALANCE_IN_PROGRESS),
    ],
)
def test_a_refused_group_record_is_answered_as_kafkas_store_group_answers(
    nodes: Callable[..., Node], monkeypatch: pytest.MonkeyPatch, refusal: str, answered: ErrorCode
) -> None:
    """Kafka 2.8's storeGroup tells the members UNKNOWN_SERVER_ERROR when the group's
    record is too large for the offsets log (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE)
    and REBALANCE_IN_PROGRESS when its replication timed out; INVALID_COMMIT_OFFSET_SIZE
    and REQUEST_TIMED_OUT are storeOffsets' answers, which SyncGroup was given."""
    n = nodes()
    n.lead_all(epoch=0)
    groups = n.groups
    if refusal == "timeout":
        monkeypatch.setattr(
            groups.replicas, "wait_for_replication", lambda *_a: ErrorCode.REQUEST_TIMED_OUT
        )
    else:
        small_max_message_bytes(n, 1_000, refusal)
    joined = join(groups, (("range", subscription(["a"])),))
    assert joined.error == ErrorCode.NONE
    synced = groups.sync_group(
        G0,
        joined.member_id,
        joined.generation_id,
        CONSUMER_PROTOCOL,
        "range",
        {joined.member_id: b"x" * 5_000},
    )
    assert synced.error == answered


# --- a commit's append refused: what OffsetCommit answers (Kafka's storeOffsets) ----------


@pytest.mark.parametrize(
    ("refused", "answered"),
    [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT),
    ],
)
def test_a_refused_commit_is_answered_as_kafkas_store_offsets_answers(
    node: Node, monkeypatch: pytest.MonkeyPatch, refused: ErrorCode, answered: ErrorCode
) -> None:
    """Kafka 2.8's storeOffsets maps the append's error to the committer's: the offsets
    partition gone or short of replicas is COORDINATOR_NOT_AVAILABLE, its leadership or
    log directory lost NOT_COORDINATOR (the client finds the coordinator again), a batch
    too large INVALID_COMMIT_OFFSET_SIZE, anything else as it is. Nothing is cached."""
    groups = node.groups

    def refusing(*_args: Any) -> tuple[ErrorCode, None, None, str]:
        return refused, None, None, "refused"

    monkeypatch.setattr(node.replicas, "append_as_leader", refusing)
    assert groups.commit_offsets(G0, "", -1, {A0: committed(5)}) == {A0: answered}
    assert fetched(groups) == {}


def test_an_empty_group_counts_from_when_it_became_empty_even_for_a_later_commit() -> None:
    """Kafka 2.8's removeExpiredOffsets takes an Empty group's currentStateTimestamp as
    every offset's base, even one committed after it (a commit does not change the
    group's state)."""
    offsets = {A0: committed(1, ts=5_000), A1: committed(2, ts=0)}
    empty: dict[str, Any] = {"empty_since_ms": 0, "protocol_type": CONSUMER_PROTOCOL}
    assert expired(offsets, RETENTION_MS - 1, **empty) == set()
    assert expired(offsets, RETENTION_MS, **empty) == {A0, A1}


def test_an_empty_group_ignores_the_topics_its_members_subscribed_to() -> None:
    """Without members, the group's offsets expire whatever topics were subscribed to
    (Kafka 2.8 filters subscribed topics only for a consumer group with members)."""
    offsets = {A0: committed(1, ts=0), B0: committed(2, ts=0)}
    gone = expired(
        offsets,
        RETENTION_MS,
        protocol_type=CONSUMER_PROTOCOL,
        empty_since_ms=0,
        subscribed=frozenset({"a"}),
    )
    assert gone == {A0, B0}


def test_an_expire_timestamp_of_zero_or_below_is_already_past() -> None:
    """Only -1 means no expire timestamp (Kafka 2.8's OffsetCommitRequest.DEFAULT_TIMESTAMP);
    any other, a commit's time plus a negative retention_time_ms included, is one."""
    for expire in (0, -2):
        offsets = {A0: committed(1, ts=10**9, expire=expire)}
        assert expired(offsets, 0) == {A0}
    assert expired({A0: committed(1, ts=10**9, expire=-1)}, 0) == set()
