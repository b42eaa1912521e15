"""Incremental cooperative rebalancing (KIP-429) with real clients and real brokers:
confluent-kafka consumers with `partition.assignment.strategy=cooperative-sticky`. Members
join one at a time, one leaves, one is SIGKILLed: each rebalance moves only the partitions
that change owner (revoked by the old owner before the new one is given them), the group
ends Stable with every partition held once, and the offsets committed meanwhile are where
the next owner starts. A member sharing no protocol with the group is refused
INCONSISTENT_GROUP_PROTOCOL (Kafka 2.8's GroupCoordinator.doJoinGroup); one listing the
group's among others is let in; and the group's protocol changes once every member votes
for another (GroupMetadata.selectProtocol)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError

from cluster.supervised import wait_for
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import bootstrap, producer
from tests.integration.harness import Cluster
from tests.integration.test_consumer_groups import GROUP_SETTINGS, committed, coordinator_of
from tests.integration.test_static_membership import describe_until, stable
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode

pytestmark = pytest.mark.integration

PARTITIONS = 6
ALL = set(range(PARTITIONS))
# The brokers' group.min.session.timeout.ms: a member gone without a LeaveGroup is missed
# after it.
SESSION_MS = 6000
# (Each deadline below only catches a hang: it is far longer than what it waits for.)
DEADLINE_S = 60

# A group member in its own process (so that it can be SIGKILLed: librdkafka sends a
# dynamic member's LeaveGroup whenever it is closed). It polls all the time, commits each
# message it consumes synchronously, and writes one JSON line per event, each stamped
# with the system-wide monotonic clock: assign, revoke and lost (its rebalance callbacks),
# msg (partition, offset), commit (partition, next offset), error. "close" on its stdin:
# it closes its consumer (a LeaveGroup) and exits.
MEMBER = r"""
import json, select, sys, time
from confluent_kafka import Consumer, KafkaError, KafkaException

conf = json.loads(sys.argv[1])
topic = conf.pop("topic")

def say(event, **fields):
    sys.stdout.write(json.dumps({"event": event, "t": time.monotonic(), **fields}) + "\n")
    sys.stdout.flush()

consumer = Consumer({**conf, "error_cb": lambda e: say("error", code=e.code(), text=e.str())})

def parts(tps):
    return sorted(tp.partition for tp in tps)

def on_assign(c, tps):
    say("assign", parts=parts(tps))

def on_revoke(c, tps):
    say("revoke", parts=parts(tps))

def on_lost(c, tps):
    say("lost", parts=parts(tps))

consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
say("started")
while True:
    if select.select([sys.stdin], [], [], 0)[0]:
        if sys.stdin.readline().strip() == "close":
            consumer.close()
            say("closed")
            sys.exit(0)
    msg = consumer.poll(0.1)
    if msg is None:
        continue
    error = msg.error()
    if error is not None:
        if error.code() != KafkaError._PARTITION_EOF:
            say("error", code=error.code(), text=error.str())
        continue
    say("msg", p=msg.partition(), o=msg.offset())
    try:
        consumer.commit(message=msg, asynchronous=False)
    except KafkaException as e:
        say("commit_failed", p=msg.partition(), o=msg.offset() + 1, text=str(e))
    else:
        say("commit", p=msg.partition(), o=msg.offset() + 1)
"""


@dataclass
class Member:
    """A member process and what it reported."""

    name: str
    process: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: threading.Thread | None = None
    killed_at: float | None = None
    closed_at: float | None = None

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self.lock:
                self.events.append(event)

    def seen(self, *kinds: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["event"] in kinds]

    def held(self) -> set[int]:
        """The partitions its callbacks have given it and not taken away."""
        owned: set[int] = set()
        for e in self.seen("assign", "revoke", "lost"):
            if e["event"] == "assign":
                owned |= set(e["parts"])
            else:
                owned -= set(e["parts"])
        return owned

    def close(self) -> None:
        """Close the consumer (a LeaveGroup) and wait for the process to end."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.closed_at = time.monotonic()
            self.process.stdin.write("close\n")
            self.process.stdin.flush()
            self.process.wait(DEADLINE_S)
        self.join_reader()

    def kill(self) -> None:
        self.killed_at = time.monotonic()
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(DEADLINE_S)
        self.join_reader()

    def join_reader(self) -> None:
        if self.reader is not None:
            self.reader.join(DEADLINE_S)


def start_member(
    c: Cluster, group: str, topic: str, name: str, strategy: str = "cooperative-sticky"
) -> Member:
    conf = {
        "bootstrap.servers": bootstrap(c),
        "group.id": group,
        "client.id": name,
        "topic": topic,
        "partition.assignment.strategy": strategy,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 300,
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    process = subprocess.Popen(
        [sys.executable, "-c", MEMBER, json.dumps(conf)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    member = Member(name, process)
    member.reader = threading.Thread(target=member.read, daemon=True)
    member.reader.start()
    return member


def stop_all(members: Iterable[Member]) -> None:
    for m in members:
        if m.process.poll() is None:
            os.kill(m.process.pid, signal.SIGKILL)
            m.process.wait(DEADLINE_S)


def until(done: Callable[[], bool], what: str, members: Iterable[Member]) -> None:
    group = list(members)

    def report() -> str:
        return str({m.name: (sorted(m.held()), m.events[-30:], m.process.poll()) for m in group})

    def check() -> bool:
        gone = [m.name for m in group if m.process.poll() not in (None, 0) and not m.killed_at]
        assert not gone, f"{what}: member processes {gone} failed: {report()}"
        return done()

    try:
        wait_for(check, DEADLINE_S, what)
    except AssertionError as e:
        raise AssertionError(f"{e}: {report()}") from None


def holding(*expected: tuple[Member, int]) -> Callable[[], bool]:
    """Each member holds the given number of partitions, together each partition once."""

    def done() -> bool:
        held = [m.held() for m, _ in expected]
        return [len(h) for h in held] == [n for _, n in expected] and set().union(*held) == ALL

    return done


def ownership(members: Iterable[Member], end: float) -> dict[int, list[tuple[float, float, str]]]:
    """partition -> (from, to, member) of each time a member held it, by its callbacks'
    clocks (a killed member: until it was killed; one still running: until ``end``)."""
    spans: dict[int, list[tuple[float, float, str]]] = {p: [] for p in ALL}
    for m in members:
        since: dict[int, float] = {}
        for e in m.seen("assign", "revoke", "lost"):
            for p in e["parts"]:
                if e["event"] == "assign":
                    assert p not in since, f"{m.name} assigned {p} it holds: {m.events}"
                    since[p] = e["t"]
                else:
                    assert p in since, f"{m.name} lost {p} it does not hold"
                    spans[p].append((since.pop(p), e["t"], m.name))
        for p, start in since.items():
            spans[p].append((start, m.killed_at or end, m.name))
    return spans


def feed(c: Cluster, topic: str, stop: threading.Event, acked: dict[int, int]) -> None:
    """Produce to every partition in turn until ``stop``: acked counts each one's."""
    p = producer(c)
    lock = threading.Lock()

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            with lock:
                acked[msg.partition()] = acked.get(msg.partition(), 0) + 1

    i = 0
    while not stop.is_set():
        p.produce(topic, b"m-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
        i += 1
        p.poll(0.02)  # (pacing: about 50 messages a second)
    assert p.flush(DEADLINE_S) == 0


def make_topic(c: Cluster, topic: str) -> None:
    c.wait_controller()
    c.create_topic(topic, {p: (1, 2, 3) for p in range(PARTITIONS)})
    c.wait_topic_online(topic)


def test_cooperative_members_move_only_the_partitions_that_change_owner(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    topic = "coop"
    group = "coop"
    make_topic(c, topic)
    members: list[Member] = []
    stop = threading.Event()
    acked: dict[int, int] = {}
    feeder = threading.Thread(target=feed, args=(c, topic, stop, acked))
    feeder.start()
    try:
        a = start_member(c, group, topic, "a")
        members.append(a)
        until(holding((a, 6)), "a holding every partition", members)
        b = start_member(c, group, topic, "b")
        members.append(b)
        until(holding((a, 3), (b, 3)), "a and b sharing the partitions", members)
        cc = start_member(c, group, topic, "c")
        members.append(cc)
        until(holding((a, 2), (b, 2), (cc, 2)), "a, b and c sharing the partitions", members)

        b.close()  # a LeaveGroup: a and c take b's partitions
        until(holding((a, 3), (cc, 3)), "a and c after b left", members)
        left = time.monotonic()
        # c commits in a partition it took from b, then dies.
        from_b = cc.held() - {
            p for e in cc.seen("assign") if e["t"] < b.closed_at for p in e["parts"]
        }
        until(
            lambda: any(e["p"] in from_b and e["t"] > left for e in cc.seen("commit")),
            "c committing in a partition it took from b",
            members,
        )
        cc.kill()  # no LeaveGroup: a takes c's partitions after c's session timeout
        until(holding((a, 6)), "a alone after c's session timeout", members)
        described = describe_until(
            c, group, lambda d: stable(d) and len(d.members) == 1, [], "the group Stable"
        )
        assert str(described.partition_assignor) == "cooperative-sticky"
        (only,) = described.members
        assert only.client_id == "a"
        assert {tp.partition for tp in only.assignment.topic_partitions} == ALL

        stop.set()
        feeder.join(DEADLINE_S)
        total = {p: acked.get(p, 0) for p in ALL}
        until(lambda: committed_by(members) == total, "a committing every partition's end", members)
        a.close()
    finally:
        stop.set()
        feeder.join(DEADLINE_S)
        stop_all(members)

    # No partition was held by two members at once: each assignment was of partitions
    # the old owner had revoked (or lost with its life).
    check_one_owner_at_a_time(members)
    assert [m.seen("lost") for m in members] == [[], [], []]
    # Incremental: a member's revocations while it stayed took only the partitions that
    # moved, never all it held (as an eager rebalance does), and those that joined or
    # left took nothing from the members that stayed.
    for m in (a, b):
        revoked = [e for e in m.seen("revoke") if e["t"] < (m.closed_at or float("inf"))]
        assert revoked, m.name
        for e in revoked:
            assert 0 < len(e["parts"]) < len(held_before(m, e["t"])), (m.name, m.events)
    assert [e for e in cc.seen("revoke")] == []
    assert [e for e in a.seen("revoke") if b.closed_at < e["t"] < a.closed_at] == []
    assert held_before(a, left) | held_before(cc, left) == ALL

    # Offsets: every message consumed, none again after a commit covering it (at least
    # once: what c consumed after its last commit is consumed again by a).
    consumed: dict[tuple[int, int], list[float]] = {}
    commits: dict[int, list[tuple[float, int]]] = {p: [] for p in ALL}
    for m in members:
        for e in m.seen("msg"):
            consumed.setdefault((e["p"], e["o"]), []).append(e["t"])
        for e in m.seen("commit"):
            commits[e["p"]].append((e["t"], e["o"]))
    for p in ALL:
        assert {o for q, o in consumed if q == p} == set(range(total[p])), p
    again = [
        (p, o)
        for (p, o), times in consumed.items()
        for t in sorted(times)[1:]
        if any(ct < t and co > o for ct, co in commits[p])
    ]
    assert again == []
    assert sum(total.values()) > 0
    assert committed(c, group, topic, PARTITIONS) == {p: total[p] or -1001 for p in ALL}


def committed_by(members: Iterable[Member]) -> dict[int, int]:
    """partition -> the highest offset any member reported committing."""
    best = dict.fromkeys(ALL, 0)
    for m in members:
        for e in m.seen("commit"):
            best[e["p"]] = max(best[e["p"]], e["o"])
    return best


def held_before(m: Member, t: float) -> set[int]:
    """What ``m``'s callbacks had given it before time ``t``."""
    owned: set[int] = set()
    for e in m.seen("assign", "revoke", "lost"):
        if e["t"] >= t:
            break
        owned = owned | set(e["parts"]) if e["event"] == "assign" else owned - set(e["parts"])
    return owned


def check_one_owner_at_a_time(members: Iterable[Member]) -> None:
    for p, held in ownership(members, time.monotonic()).items():
        ordered = sorted(held)
        for (_s1, e1, m1), (s2, _e2, m2) in itertools.pairwise(ordered):
            assert e1 <= s2, f"partition {p} held by {m1} and {m2} at once: {ordered}"


def subscription(topic: str) -> bytes:
    """A ConsumerProtocolSubscription v1 of ``topic``, owning no partition (as a Java
    consumer sends it; the leader's librdkafka reads it)."""
    name = topic.encode()
    return struct.pack(">hih", 1, 1, len(name)) + name + struct.pack(">ii", -1, 0)


def raw_member_joins(c: Cluster, group: str, topic: str, protocols: list[str]) -> dict[str, Any]:
    """A member that lists ``protocols`` joins (JoinGroup v5, twice: KIP-394's member id
    first), syncs and leaves; the JoinGroup answer."""
    coordinator = coordinator_of(c, group, via=1)
    with KafkaConnection("127.0.0.1", c[coordinator].port(), timeout_s=DEADLINE_S) as conn:
        join: dict[str, Any] = {
            "group_id": group,
            "session_timeout_ms": SESSION_MS,
            "rebalance_timeout_ms": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": n, "metadata": subscription(topic)} for n in protocols],
        }
        first = conn.request(ApiKey.JOIN_GROUP, 5, join)
        assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
        member = first["member_id"]
        joined = conn.request(ApiKey.JOIN_GROUP, 5, {**join, "member_id": member})
        if joined["error_code"] == ErrorCode.NONE:
            synced = conn.request(
                ApiKey.SYNC_GROUP,
                3,
                {
                    "group_id": group,
                    "generation_id": joined["generation_id"],
                    "member_id": member,
                    "group_instance_id": None,
                    "assignments": [],
                },
            )
            assert synced["error_code"] in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)
        left = conn.request(ApiKey.LEAVE_GROUP, 2, {"group_id": group, "member_id": member})
        assert left["error_code"] in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID)
        return joined


def test_a_member_sharing_no_protocol_is_refused_and_the_protocol_follows_the_votes(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(**GROUP_SETTINGS)
    topic = "mixed"
    group = "mixed"
    make_topic(c, topic)
    members: list[Member] = []
    try:
        a = start_member(c, group, topic, "a")
        members.append(a)
        until(holding((a, 6)), "a holding every partition", members)
        callbacks = len(a.seen("assign", "revoke", "lost"))

        # A consumer of "range" alone shares no protocol with the group.
        errors: list[KafkaError] = []
        eager = Consumer(
            {
                "bootstrap.servers": bootstrap(c),
                "group.id": group,
                "partition.assignment.strategy": "range",
                "session.timeout.ms": SESSION_MS,
                "error_cb": errors.append,
            }
        )
        try:
            eager.subscribe([topic])

            def refused() -> bool:
                msg = eager.poll(0.1)
                error = None if msg is None else msg.error()
                if error is not None:
                    errors.append(error)
                return any(e.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL for e in errors)

            wait_for(refused, DEADLINE_S, "INCONSISTENT_GROUP_PROTOCOL")
            assert eager.assignment() == []
        finally:
            eager.close()
        # (It never was a member: a saw no rebalance.)
        assert len(a.seen("assign", "revoke", "lost")) == callbacks

        # One listing both (as a Java consumer migrating to it does) is let in, and the
        # group keeps the protocol every member supports.
        joined = raw_member_joins(c, group, topic, ["range", "cooperative-sticky"])
        assert joined["error_code"] == ErrorCode.NONE
        assert joined["protocol_name"] == "cooperative-sticky"
        until(holding((a, 6)), "a holding every partition again", members)
        described = describe_until(
            c, group, lambda d: stable(d) and len(d.members) == 1, [], "the group Stable"
        )
        assert str(described.partition_assignor) == "cooperative-sticky"
        a.close()

        # Every member moves: the group's protocol is what their votes choose.
        e1 = start_member(c, group, topic, "e1", "range")
        e2 = start_member(c, group, topic, "e2", "roundrobin,range")
        e3 = start_member(c, group, topic, "e3", "roundrobin,range")
        members += [e1, e2, e3]
        until(holding((e1, 2), (e2, 2), (e3, 2)), "e1, e2 and e3 sharing", members)
        described = describe_until(
            c, group, lambda d: stable(d) and len(d.members) == 3, [], "three members Stable"
        )
        assert str(described.partition_assignor) == "range"
        e1.close()  # the last member of only "range" leaves
        until(holding((e2, 3), (e3, 3)), "e2 and e3 sharing", members)
        described = describe_until(
            c, group, lambda d: stable(d) and len(d.members) == 2, [], "two members Stable"
        )
        assert str(described.partition_assignor) == "roundrobin"
        # A member of "range" alone is let in (each member supports it), and the group
        # goes back to the one protocol they all support.
        e4 = start_member(c, group, topic, "e4", "range")
        members.append(e4)
        until(holding((e2, 2), (e3, 2), (e4, 2)), "e2, e3 and e4 sharing", members)
        described = describe_until(
            c, group, lambda d: stable(d) and len(d.members) == 3, [], "three members Stable"
        )
        assert str(described.partition_assignor) == "range"
        for m in (e2, e3, e4):
            m.close()
    finally:
        stop_all(members)
    check_one_owner_at_a_time(members)
