"""Static membership (KIP-345) with real clients and real brokers: confluent-kafka
consumers with a `group.instance.id`. A static member that restarts within its session
timeout takes its old place (and its old partitions) without a rebalance, an older
instance of it is fenced, one that does not come back is dropped after its session
timeout, and the group's static members survive their coordinator's SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from cluster.supervised import wait_for
from groups.offset_records import partition_for
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap
from tests.integration.harness import Cluster
from tests.integration.test_consumer_groups import (
    GROUP_SETTINGS,
    OFFSETS_PARTITIONS,
    coordinator_of,
    find_coordinator,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
ALL = set(range(PARTITIONS))
# The brokers' group.min.session.timeout.ms is Kafka's 6000 (group.max: 1800000).
SESSION_MS = 10_000

# (Each deadline below only catches a hang: it is far longer than what it waits for.)
DEADLINE_S = 120


@dataclass
class Member:
    """One consumer of the group and what librdkafka told it."""

    instance: str
    consumer: Consumer = field(init=False)
    assigns: list[set[int]] = field(default_factory=list)
    revokes: list[set[int]] = field(default_factory=list)
    # From error_cb, and from poll() (errors other than a partition's end).
    errors: list[KafkaError] = field(default_factory=list)
    closed: bool = False

    def held(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def fenced(self) -> bool:
        return any(is_fenced(e) for e in self.errors)

    def fatal(self) -> list[KafkaError]:
        return [e for e in self.errors if is_fatal(e)]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def describe_error(e: KafkaError) -> str:
    return f"{e.name()}({e.code()}{', fatal' if e.fatal() else ''}): {e.str()}"


def is_fatal(error: KafkaError) -> bool:
    # (confluent-kafka hands error_cb librdkafka's _FATAL itself, its fatal() False, the
    # underlying error named in its text.)
    return error.fatal() or error.code() == KafkaError._FATAL


def is_fenced(error: KafkaError) -> bool:
    """A fatal error for FENCED_INSTANCE_ID: librdkafka's "Fatal consumer error: Broker:
    Static consumer fenced by other consumer with same group.instance.id"."""
    if error.code() in (KafkaError._FENCED, KafkaError.FENCED_INSTANCE_ID):
        return True
    fenced = KafkaError(KafkaError.FENCED_INSTANCE_ID).str()
    return error.code() == KafkaError._FATAL and fenced in error.str()


def static_member(
    c: Cluster, group: str, instance: str, topic: str, *, session_ms: int = SESSION_MS
) -> Member:
    """A consumer of ``group`` with group.instance.id ``instance``, subscribed to
    ``topic``, its rebalance callbacks and errors recorded."""
    member = Member(instance)
    member.consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(c),
            "group.id": group,
            "group.instance.id": instance,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": member.errors.append,
        }
    )

    def on_assign(_c: Consumer, tps: list[TopicPartition]) -> None:
        member.assigns.append({tp.partition for tp in tps})

    def on_revoke(_c: Consumer, tps: list[TopicPartition]) -> None:
        member.revokes.append({tp.partition for tp in tps})

    member.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    return member


def pump(members: Iterable[Member], done: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll every member (callbacks are served by poll) until ``done()``."""
    group = list(members)
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            state = [
                (m.instance, sorted(m.held()), list(map(describe_error, m.errors))) for m in group
            ]
            raise TimeoutError(f"{what}: (instance, partitions held, errors) {state}")
        poll(group)


def poll(group: list[Member]) -> None:
    for m in group:
        msg = m.consumer.poll(0.1)
        error = None if msg is None else msg.error()
        if error is not None and error.code() != KafkaError._PARTITION_EOF:
            m.errors.append(error)


def settle(members: Iterable[Member], seconds: float) -> None:
    """Poll the members for a while (a few heartbeat intervals): room for a rebalance
    that should not happen to show itself in their callbacks."""
    group = list(members)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        poll(group)


def shared(*members: Member) -> bool:
    """Each member holds partitions, and together they hold each partition once."""
    held = [m.held() for m in members]
    return all(held) and sum(map(len, held)) == PARTITIONS and set().union(*held) == ALL


def describe_until(
    c: Cluster,
    group: str,
    check: Callable[[Any], bool],
    members: Iterable[Member],
    what: str,
) -> Any:
    """AdminClient.describe_consumer_groups (FindCoordinator, then DescribeGroups v4+
    from the coordinator) until ``check(description)``, polling ``members`` meanwhile.
    (AdminClient has no close(): its handle goes with this function's reference.)"""
    group_members = list(members)
    admin = AdminClient({"bootstrap.servers": bootstrap(c)})
    deadline = time.monotonic() + DEADLINE_S
    last: object = None
    while True:
        try:
            futures = admin.describe_consumer_groups([group], request_timeout=10)
            last = futures[group].result(timeout=30)
            if check(last):
                return last
        except KafkaException as e:  # a coordinator moving or loading
            last = e
            if e.args[0].code() == KafkaError._TIMED_OUT:
                # librdkafka keeps a group's coordinator cached while each request uses
                # it, and a request whose cached coordinator is down waits for a broker's
                # state to change before asking again: one that never came up (a SIGKILLed
                # broker named by a stale FindCoordinator answer) times every request out.
                # A new client asks afresh.
                admin = AdminClient({"bootstrap.servers": bootstrap(c)})
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: last described {last!r}")
        settle(group_members, 0.3)


def names_a_live_coordinator(c: Cluster, group: str, via: int, dead: int) -> Callable[[], bool]:
    """Whether broker ``via``'s FindCoordinator for ``group`` names a broker other than
    ``dead``: once its metadata has the new leader of the group's offsets partition."""
    return lambda: find_coordinator(c, group, via)[1] not in (-1, dead)


def instances(description: Any) -> dict[str, str]:
    """group instance id -> member id, of the members described."""
    return {m.group_instance_id: m.member_id for m in description.members}


def stable(description: Any) -> bool:
    return str(description.state) == "ConsumerGroupState.STABLE"


def assigned_in(description: Any, instance: str) -> set[int]:
    (member,) = [m for m in description.members if m.group_instance_id == instance]
    return {tp.partition for tp in member.assignment.topic_partitions}


def make_topic(c: Cluster, topic: str) -> None:
    c.wait_controller()
    c.create_topic(topic, {p: (1, 2, 3) for p in range(PARTITIONS)})
    c.wait_topic_online(topic)


def start_pair(c: Cluster, group: str, topic: str, session_ms: int = SESSION_MS) -> list[Member]:
    """Static members "a" and "b" of ``group``, started together, once they share the
    partitions. (Their joins race the leader's assignment write: a join arriving during
    that write used to lose the leader's SyncGroup answer, and the group then formed only
    after the leader's session timeout.)"""
    made: list[Member] = []
    try:
        made.append(static_member(c, group, "a", topic, session_ms=session_ms))
        made.append(static_member(c, group, "b", topic, session_ms=session_ms))
        pump(made, lambda: shared(*made), DEADLINE_S, "a and b sharing the partitions")
    except BaseException:
        for m in made:
            m.close()
        raise
    return made


def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    topic = "static-restart"
    make_topic(c, topic)
    made = start_pair(c, "restarts", topic)
    a, b = made
    try:
        old_a_parts, b_parts = a.held(), b.held()
        old_a_id, b_id = a.consumer.memberid(), b.consumer.memberid()
        assert old_a_id
        assert old_a_id.startswith("a-")  # Kafka's: a static member's id names it
        assert b_id
        before = describe_until(c, "restarts", stable, made, "the group Stable")
        assert instances(before) == {"a": old_a_id, "b": b_id}
        b_assigns, b_revokes = list(b.assigns), list(b.revokes)

        # librdkafka sends no LeaveGroup for a static member: the coordinator keeps "a"
        # until its session timeout, and a new consumer with its instance id takes its
        # place well within it.
        a.close()
        new_a = static_member(c, "restarts", "a", topic)
        made.append(new_a)
        pump([new_a, b], lambda: bool(new_a.held()), DEADLINE_S, "the new a assigned")
        assert new_a.assigns == [old_a_parts]
        settle([new_a, b], 3)  # six of b's heartbeats
        assert new_a.held() == old_a_parts
        assert new_a.assigns == [old_a_parts]
        assert new_a.revokes == []
        assert (b.assigns, b.revokes) == (b_assigns, b_revokes)
        assert b.held() == b_parts

        new_a_id = new_a.consumer.memberid()
        assert new_a_id not in ("", old_a_id)
        assert new_a_id.startswith("a-")
        assert b.consumer.memberid() == b_id
        after = describe_until(
            c,
            "restarts",
            lambda d: stable(d) and instances(d).get("a") == new_a_id,
            [new_a, b],
            "the group Stable with the new a",
        )
        assert instances(after) == {"a": new_a_id, "b": b_id}
        assert assigned_in(after, "a") == old_a_parts
        assert assigned_in(after, "b") == b_parts

        # The new member id commits (OffsetCommit v7, with its instance id).
        mine = [TopicPartition(topic, p, 0) for p in sorted(old_a_parts)]
        new_a.consumer.commit(offsets=mine, asynchronous=False)
        assert [m.fatal() for m in (new_a, b)] == [[], []]
    finally:
        for m in made:
            m.close()


def test_an_older_instance_of_a_static_member_is_fenced(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    topic = "static-fencing"
    make_topic(c, topic)
    made = start_pair(c, "fencing", topic)
    a, b = made
    try:
        a_parts, b_parts = a.held(), b.held()
        b_assigns, b_revokes = list(b.assigns), list(b.revokes)
        b_id = b.consumer.memberid()

        # A second consumer with a's instance id, while the first one still runs: the
        # first one's next heartbeat is FENCED_INSTANCE_ID, a fatal error to librdkafka.
        second = static_member(c, "fencing", "a", topic)
        made.append(second)
        pump(
            made,
            lambda: a.fenced() and bool(second.held()),
            DEADLINE_S,
            "the first a fenced and the second assigned",
        )
        assert [is_fenced(e) for e in a.fatal()] == [True]
        # Fatal: the first a can do nothing more in the group.
        with pytest.raises(KafkaException) as refused:
            a.consumer.commit(offsets=[TopicPartition(topic, min(a_parts), 0)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError._FATAL
        assert second.assigns == [a_parts]
        settle([second, b], 3)
        assert second.held() == a_parts
        assert second.assigns == [a_parts]
        assert (b.assigns, b.revokes) == (b_assigns, b_revokes)
        assert b.held() == b_parts
        assert [m.fatal() for m in (second, b)] == [[], []]

        second_id = second.consumer.memberid()
        described = describe_until(
            c,
            "fencing",
            lambda d: stable(d) and instances(d).get("a") == second_id,
            [second, b],
            "the group Stable with the second a",
        )
        assert instances(described) == {"a": second_id, "b": b_id}
        assert assigned_in(described, "a") == a_parts
    finally:
        for m in made:
            m.close()


def test_a_static_member_that_does_not_come_back_is_dropped_after_its_session_timeout(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    topic = "static-gone"
    make_topic(c, topic)
    # The smallest session the brokers allow: "a" is missed after it.
    made = start_pair(c, "departures", topic, session_ms=6000)
    a, b = made
    try:
        b_parts = b.held()
        b_id = b.consumer.memberid()
        b_assigns = len(b.assigns)
        a.close()  # no LeaveGroup: only the session timeout tells the coordinator
        pump([b], lambda: b.held() == ALL, DEADLINE_S, "b holding every partition")
        assert b.revokes[-1] == b_parts
        assert b.assigns[b_assigns:] == [ALL]
        described = describe_until(
            c,
            "departures",
            lambda d: stable(d) and len(d.members) == 1,
            [b],
            "the group Stable with b alone",
        )
        assert instances(described) == {"b": b_id}
        assert assigned_in(described, "b") == ALL
        assert b.fatal() == []
    finally:
        for m in made:
            m.close()


def test_static_members_survive_their_coordinators_sigkill(
    cluster_factory: ClusterFactory,
) -> None:
    """The static member "a" stops, then the coordinator is SIGKILLed: the new
    coordinator reads the group back (its metadata records carry the instance ids) and
    still counts "a" in it, so a new "a" takes its old place there without a
    rebalance."""
    c = cluster_factory(**GROUP_SETTINGS)
    topic = "static-failover"
    make_topic(c, topic)
    # A session that outlasts the failover: the new coordinator gives the loaded members
    # a full session from when it read the group.
    made = start_pair(c, "survivors", topic, session_ms=30_000)
    a, b = made
    try:
        a_parts, b_parts = a.held(), b.held()
        old_a_id, b_id = a.consumer.memberid(), b.consumer.memberid()
        describe_until(
            c,
            "survivors",
            lambda d: stable(d) and instances(d) == {"a": old_a_id, "b": b_id},
            made,
            "the group Stable",
        )
        b_assigns, b_revokes = list(b.assigns), list(b.revokes)
        a.close()

        coordinator = coordinator_of(c, "survivors", via=1)
        c[coordinator].kill()
        index = partition_for("survivors", OFFSETS_PARTITIONS)
        c.wait_partitions(
            "__consumer_offsets",
            lambda states: states[index].leader not in (-1, coordinator),
            "the group's offsets partition led by a live broker",
        )
        # Until a survivor's UpdateMetadata arrives (after the controller's write), its
        # FindCoordinator still names the killed broker, and an admin client that asked
        # then would wait on it (see describe_until).
        for survivor in [b for b in c.brokers if b != coordinator]:
            wait_for(
                names_a_live_coordinator(c, "survivors", survivor, dead=coordinator),
                60,
                f"broker {survivor}'s FindCoordinator naming a live coordinator",
            )
        moved = describe_until(
            c,
            "survivors",
            lambda d: d.coordinator.id != coordinator and stable(d),
            [b],
            "the group served by a new coordinator",
        )
        assert instances(moved) == {"a": old_a_id, "b": b_id}
        assert assigned_in(moved, "a") == a_parts

        new_a = static_member(c, "survivors", "a", topic, session_ms=30_000)
        made.append(new_a)
        pump([new_a, b], lambda: bool(new_a.held()), DEADLINE_S, "the new a assigned")
        assert new_a.assigns == [a_parts]
        settle([new_a, b], 3)
        assert new_a.held() == a_parts
        assert new_a.assigns == [a_parts]
        assert (b.assigns, b.revokes) == (b_assigns, b_revokes)
        assert b.held() == b_parts
        new_a_id = new_a.consumer.memberid()
        assert new_a_id not in ("", old_a_id)
        after = describe_until(
            c,
            "survivors",
            lambda d: stable(d) and instances(d).get("a") == new_a_id,
            [new_a, b],
            "the group Stable with the new a",
        )
        assert instances(after) == {"a": new_a_id, "b": b_id}
        assert after.coordinator.id != coordinator
        assert [m.fatal() for m in (new_a, b)] == [[], []]
    finally:
        for m in made:
            m.close()
