"""Controller election and failover with real brokers and a real ZooKeeper."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from admin import topics
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume, lost_acknowledged, produce
from tests.integration.harness import Cluster, logged, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths, znodes
from zkdata.client import Create, Delete, ZkClient
from zkdata.znodes import TopicPartition

pytestmark = pytest.mark.integration

ASSIGNMENT = {p: tuple((1, 2, 3)[(p + i) % 3] for i in range(3)) for p in range(6)}


def exists(c: Cluster, path: str) -> bool:
    return c.zk.exists(path) is not None


def test_three_brokers_race_and_exactly_one_wins_epoch_1(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    controller_id, epoch = c.wait_controller()
    assert epoch == 1
    elected = [b for b in c.brokers.values() if b.state_changes("controller_elected")]
    assert [b.broker_id for b in elected] == [controller_id]
    # The losers remember who won: each logs it once its own election is over, which the
    # winner's status file does not wait for.
    for b in c.brokers.values():
        if b.broker_id != controller_id:
            seen = wait_for(
                lambda b=b: b.state_changes("controller_seen"),  # type: ignore[misc]  # binds the loop's variable
                30,
                f"broker {b.broker_id}'s controller_seen line",
            )
            assert seen[-1]["controller"] == controller_id


@pytest.mark.slow
def test_sigkill_controller_fails_over_and_its_partitions_are_reelected(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    old_id, old_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    # Applied by every replica before the kill: replicas never told of the topic would
    # refuse to lead with no log of it (item 34), and the elections would be written twice.
    before = c.wait_topic_applied("t")
    led = {p for p, s in before.items() if s.leader == old_id}
    assert led
    # One partition it leads with its next replica, alive, out of the ISR (as while its
    # leader has not yet let it back in): the failover must pass over that replica for
    # the ISR member after it. With every ISR full, any live replica was in it.
    shrunk = min(led)
    first, lagging, in_sync = ASSIGNMENT[shrunk]
    assert first == old_id
    state, controller_epoch = c.partition_state("t", shrunk)
    c.zk.set(
        paths.partition_state("t", shrunk),
        znodes.encode_partition_state(state._replace(isr=(old_id, in_sync)), controller_epoch),
        version=state.zk_version,
    )
    before[shrunk] = c.partition_state("t", shrunk)[0]

    c[old_id].kill()
    new_id, new_epoch = c.wait_controller(not_id=old_id, timeout=c.session_timeout_s + 30)
    assert new_epoch == old_epoch + 1
    after = c.wait_partitions(
        "t",
        lambda s: all(st.leader not in (old_id, -1) for st in s.values()),
        "leaders moved off the dead broker",
    )
    for p in led:
        # Re-elected from the ISR, with a newer leader epoch, and the dead broker is out.
        assert after[p].leader in before[p].isr
        assert after[p].leader_epoch > before[p].leader_epoch
        assert old_id not in after[p].isr
    for p, st in after.items():
        assert old_id not in st.isr, f"partition {p} kept the dead broker in its ISR"
    assert after[shrunk].leader == in_sync, (lagging, after[shrunk])

    # The new controller wrote each partition the dead one led once, straight to its new
    # leader: never leaderless in between (Kafka's failover, taking the dead replicas out
    # of the ISRs before the elections, writes leader -1 first).
    def rows() -> list[dict[str, object]]:
        return [
            r
            for r in c[new_id].state_changes("partition_state")
            if r["controller_epoch"] == new_epoch and r["topic"] == "t"
        ]

    wait_for(lambda: {r["partition"] for r in rows()} >= led, 30, "the elections logged")
    assert sorted(r["partition"] for r in rows() if r["partition"] in led) == sorted(led)
    assert all(r["leader"] != -1 for r in rows())
    for p in led:
        assert after[p].leader_epoch == before[p].leader_epoch + 1

    # Its failover's requests: when the UpdateMetadata was written to the last broker's
    # socket, then when the last broker answered it, both from the election.
    acked = wait_for(
        lambda: [
            r
            for r in c[new_id].state_changes("requests_acknowledged")
            if r["controller_epoch"] == new_epoch
        ],
        30,
        "the failover's requests answered",
    )
    first_acked = acked[0]
    assert first_acked["requests"]["UPDATE_METADATA"] >= 2  # at least once to each live broker
    sent_ms, acked_ms = (
        first_acked["sent_ms_by_api"]["UPDATE_METADATA"],
        first_acked["acked_ms_by_api"]["UPDATE_METADATA"],
    )
    assert 0 < sent_ms <= acked_ms


def test_graceful_stop_of_the_controller_fails_over_without_the_session_timeout(
    cluster_factory: ClusterFactory,
) -> None:
    # A long session: a graceful stop must not wait for it.
    c = cluster_factory(zookeeper_session_timeout_ms="30000")
    old_id, old_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_topic_applied("t")
    assert c[old_id].stop() == 0
    # Well inside the 30 s session: the closed session removed /controller at once.
    _new_id, new_epoch = c.wait_controller(not_id=old_id, timeout=20)
    assert new_epoch == old_epoch + 1
    states = c.partition_states("t")
    assert all(s.leader not in (old_id, -1) for s in states.values())
    # Controlled shutdown moved its leaderships before it left.
    reasons = {r["reason"] for b in c.brokers.values() for r in b.state_changes("partition_state")}
    assert "controlled_shutdown" in reasons


@pytest.mark.slow
def test_zombie_controller_is_fenced(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    zombie_id, zombie_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_topic_applied("t")
    zombie = c[zombie_id]
    paused_at_ms = time.time() * 1000
    zombie.pause()
    try:
        _new_id, new_epoch = c.wait_controller(not_id=zombie_id, timeout=c.session_timeout_s + 30)
        assert new_epoch == zombie_epoch + 1
        # Let the new controller act: it moves the zombie's leaderships.
        c.wait_partitions(
            "t", lambda s: all(st.leader != zombie_id for st in s.values()), "leaders moved"
        )
        resumed_at_zxid = c.zk.get("/controller_epoch")[1].mzxid  # type: ignore[index]
    finally:
        zombie.resume()
    # The zombie finds its session expired and resigns; it never writes with its old epoch.
    wait_for(
        lambda: any(
            r["controller_epoch"] == zombie_epoch
            for r in zombie.state_changes("controller_resigned")
        ),
        30,
        "the zombie to resign",
    )
    for p in range(6):
        _state, controller_epoch = c.partition_state("t", p)
        stat = c.zk.get(f"/brokers/topics/t/partitions/{p}/state")[1]  # type: ignore[index]
        if stat.mzxid > resumed_at_zxid:
            assert controller_epoch >= new_epoch
    # Rows are logged only after a write succeeded: none from the zombie after its pause.
    assert [r for r in zombie.state_changes("partition_state") if r["ts"] > paused_at_ms] == []
    # Resumed, the zombie often hears of its ended session before it sends anything (the
    # loop below then finds nothing to judge). Brokers must refuse each request it could
    # have sent, each one a change if applied: made here of the zombie's identity, its
    # epoch and the broker's current broker epoch.
    target = next(b for b in c.brokers.values() if b.broker_id != zombie_id)
    wait_for(
        lambda: any(
            r["controller_epoch"] == new_epoch and r["result"] == "applied"
            for r in target.state_changes("leader_and_isr")
        ),
        30,
        f"broker {target.broker_id} to hear from the new controller",
    )
    state, _ = c.partition_state("t", 0)
    # The millisecond the broker stamps its rows with (time_ns // 10**6), not a float in
    # it: a refusal logged later in the same millisecond has ts below time.time() * 1000.
    sent_at_ms = time.time_ns() // 1_000_000
    answers = zombie_requests(c, target.broker_id, zombie_id, zombie_epoch, state)
    assert answers == dict.fromkeys(answers, ErrorCode.STALE_CONTROLLER_EPOCH)
    rejected = [
        r["api"]
        for r in target.state_changes("request_rejected")
        if r["controller_id"] == zombie_id
        and r["controller_epoch"] == zombie_epoch
        and r["ts"] >= sent_at_ms  # not the zombie's own, refused too
    ]
    assert sorted(rejected) == ["LeaderAndIsr", "StopReplica", "UpdateMetadata"]
    # Nothing of them applied: no leadership of the zombie's making, the replica kept.
    assert not [
        r
        for r in target.state_changes("leader_and_isr")
        if r["topic"] == "t" and r.get("leader_epoch") == state.leader_epoch + 5
    ]
    assert (target.first_log_dir / "t-0").is_dir()
    # Every request a broker received from the zombie's epoch after it had heard from the new
    # controller was rejected (the log shows rejections, never an application).
    for b in c.brokers.values():
        applied = [r for r in b.state_changes("leader_and_isr") if r["result"] == "applied"]
        seen_new = False
        for r in applied:
            if r["controller_epoch"] >= new_epoch:
                seen_new = True
            assert not (seen_new and r["controller_epoch"] < new_epoch), r


def zombie_requests(
    c: Cluster, broker_id: int, zombie_id: int, zombie_epoch: int, state: Any
) -> dict[str, ErrorCode]:
    """A zombie controller's three requests to ``broker_id``, of its identity and epoch
    and the broker's current broker epoch, each a change if applied: a LeaderAndIsr
    making the zombie leader of t-0 at a newer leader epoch, a StopReplica deleting the
    broker's t-0, an UpdateMetadata. Their error codes, by API."""
    broker_epoch = c.broker_epoch(broker_id)
    assert broker_epoch is not None
    head = {
        "controller_id": zombie_id,
        "controller_epoch": zombie_epoch,
        "broker_epoch": broker_epoch,
    }
    leader_and_isr = {
        **head,
        "type": 0,
        "topic_states": [
            {
                "topic_name": "t",
                "topic_id": uuid.UUID(int=0),
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": zombie_epoch,
                        "leader": zombie_id,
                        "leader_epoch": state.leader_epoch + 5,
                        "isr": list(state.isr),
                        "partition_epoch": 0,
                        "replicas": list(ASSIGNMENT[0]),
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": False,
                    }
                ],
            }
        ],
        "live_leaders": [
            {"broker_id": zombie_id, "host_name": "127.0.0.1", "port": c[zombie_id].port()}
        ],
    }
    stop_replica = {
        **head,
        "topic_states": [
            {
                "topic_name": "t",
                "partition_states": [
                    {
                        "partition_index": 0,
                        "leader_epoch": state.leader_epoch + 5,
                        "delete_partition": True,
                    }
                ],
            }
        ],
    }
    update_metadata = {**head, "topic_states": [], "live_brokers": []}
    answers: dict[str, ErrorCode] = {}
    with KafkaConnection("127.0.0.1", c[broker_id].port(), timeout_s=10) as conn:
        for name, api, version, body in (
            ("LeaderAndIsr", ApiKey.LEADER_AND_ISR, 5, leader_and_isr),
            ("StopReplica", ApiKey.STOP_REPLICA, 3, stop_replica),
            ("UpdateMetadata", ApiKey.UPDATE_METADATA, 7, update_metadata),
        ):
            answers[name] = ErrorCode.of(conn.request(api, version, body)["error_code"])
    return answers


@pytest.mark.slow
def test_a_new_controller_takes_over_pending_admin_work(cluster_factory: ClusterFactory) -> None:
    """Work the dead controller had begun or not yet seen is the new one's: a reassignment
    waiting on a broker that is down, a topic deletion held by that broker, and, asked
    for while the controller was paused, a preferred election, a new topic and a new
    partition (their znodes exist before the new controller watches them, so only the
    failover's own reads find them; Kafka's onControllerFailover). Each ends as it would
    have under the old controller."""
    c = cluster_factory(brokers=(1, 2, 3, 4), auto_leader_rebalance_enable="false")
    old_id, old_epoch = c.wait_controller()
    down, other, third = (b for b in (1, 2, 3, 4) if b != old_id)
    c.create_topic("moving", {0: (other, old_id)})
    c.create_topic("held", {0: (other, down)})
    c.create_topic("preferred", {0: (third, other)})
    for topic in ("moving", "held", "preferred"):
        c.wait_topic_online(topic)
    # "preferred" led by its second replica: its first one stops and comes back.
    assert c[third].stop() == 0
    c[third].start()
    c.wait_partitions(
        "preferred",
        lambda s: s[0].leader == other and third in s[0].isr,
        "the first replica back in the ISR of a partition the second one leads",
    )

    assert c[down].stop() == 0
    wait_for(lambda: down not in c.registered(), 30, f"broker {down} gone")
    c.zk.create(
        paths.REASSIGN_PARTITIONS,
        znodes.encode_reassignment({TopicPartition("moving", 0): (other, down)}),
    )
    wait_for(
        lambda: (a := c.assignment("moving")) is not None and a.adding_replicas == {0: (down,)},
        30,
        "the reassignment started",
    )
    topics.delete_topic(c.zk, "held")
    halted = "deletion of topics ['held'] halted: a replica is on a dead broker"
    wait_for(lambda: halted in c[old_id].output(), 30, "the controller to hold the deletion")

    c[old_id].pause()
    c.zk.create(
        paths.PREFERRED_REPLICA_ELECTION,
        znodes.encode_partition_list([TopicPartition("preferred", 0)]),
    )
    # Partitions no controller has seen: a topic, and one added to a topic.
    c.create_topic("born", {0: (other, third)})
    topics.add_partitions(c.zk, "preferred", 2, replica_assignment={0: [other, third]})
    c[old_id].kill()
    new_id, new_epoch = c.wait_controller(not_id=old_id, timeout=c.session_timeout_s + 30)
    assert new_epoch == old_epoch + 1

    # The preferred election, from the znode the failover read.
    c.wait_partitions("preferred", lambda s: s[0].leader == third, "the preferred leader elected")
    wait_for(
        lambda: not exists(c, paths.PREFERRED_REPLICA_ELECTION), 30, "the election znode deleted"
    )
    preferred_rows = [
        r
        for r in c[new_id].state_changes("partition_state")
        if r["reason"] == "preferred" and r["controller_epoch"] == new_epoch
    ]
    assert [(r["topic"], r["partition"], r["leader"]) for r in preferred_rows] == [
        ("preferred", 0, third)
    ]

    # The partitions created while it was paused are online, led by their first replica.
    for topic, partition in (("born", 0), ("preferred", 1)):
        state = c.wait_partitions(
            topic,
            lambda s, p=partition: p in s and s[p].leader == other,  # type: ignore[misc]  # binds the loop's variable
            f"{topic}-{partition} online",
        )[partition]
        assert tuple(state.isr) == (other, third)
        assert state.leader_epoch == 0
    assert {
        (r["topic"], r["partition"])
        for r in c[new_id].state_changes("partition_state")
        if r["reason"] == "new"
    } == {("born", 0), ("preferred", 1)}

    # The reassignment and the deletion still wait for the broker that is down.
    wait_for(lambda: halted in c[new_id].output(), 30, "the new controller to hold the deletion")
    assert exists(c, paths.REASSIGN_PARTITIONS)
    assert exists(c, paths.delete_topic("held"))
    assert exists(c, paths.topic("held"))
    moving = c.assignment("moving")
    assert moving is not None
    assert moving.adding_replicas == {0: (down,)}

    c[down].start()
    wait_for(
        lambda: (
            not exists(c, paths.REASSIGN_PARTITIONS)
            and (a := c.assignment("moving")) is not None
            and a.partitions == {0: (other, down)}
            and not a.adding_replicas
            and not a.removing_replicas
        ),
        60,
        "the reassignment to complete",
    )
    wait_for(
        lambda: not exists(c, paths.delete_topic("held")) and not exists(c, paths.topic("held")),
        60,
        "the held deletion to complete",
    )
    # The replica on the dead controller was removed; the new one caught up.
    states = c.wait_partitions(
        "moving", lambda s: set(s[0].isr) == {other, down}, "the target replicas in the ISR"
    )
    assert states[0].leader == other
    # Its line is written after the znodes are deleted.
    assert [r["topic"] for r in logged(c, new_id, "topic_deleted", 1)] == ["held"]
    assert "invalid replica state transition" not in c[new_id].output()


@pytest.mark.slow
def test_a_broker_stopping_while_the_controller_is_a_zombie_is_moved_by_the_next_one(
    cluster_factory: ClusterFactory,
) -> None:
    """A broker asks a paused controller for its controlled shutdown. The request waits in
    the zombie's socket; when the zombie wakes, fenced, it answers NOT_CONTROLLER (rather
    than never, which left the broker waiting out its 30 s request timeout), and the
    broker's next attempt goes to the new controller, which moves its leaderships."""
    c = cluster_factory()
    zombie_id, zombie_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_topic_applied("t")
    leaving = next(b for b in (1, 2, 3) if b != zombie_id)
    zombie = c[zombie_id]
    zombie.pause()
    try:
        c[leaving].terminate()
        new_id, new_epoch = c.wait_controller(not_id=zombie_id, timeout=c.session_timeout_s + 30)
        assert new_epoch == zombie_epoch + 1
    finally:
        zombie.resume()
    assert c[leaving].wait_exit(60) == 0
    attempts = c[leaving].state_changes("controlled_shutdown")
    assert attempts[-1]["remaining"] == 0, attempts
    output = c[leaving].output()
    assert "controlled shutdown succeeded" in output
    # The first attempt went to the zombie (stopped well inside its 3 s session, the
    # broker found /controller still naming it), which answered once awake; it did not
    # time out.
    assert len(attempts) > 1, attempts
    assert attempts[0]["remaining"] is None, attempts
    assert f"controller {zombie_id} refused the controlled shutdown: NOT_CONTROLLER" in output
    assert "timed out" not in output, attempts
    # The new controller moved its leaderships (it may be the leaving broker itself).
    moved = [
        r
        for r in c[new_id].state_changes("partition_state")
        if r["reason"] == "controlled_shutdown" and r["controller_epoch"] == new_epoch
    ]
    assert moved
    assert all(r["leader"] not in (leaving, -1) for r in moved)
    states = c.partition_states("t")
    assert all(s.leader not in (leaving, -1) for s in states.values())
    assert not [
        r
        for r in zombie.state_changes("partition_state")
        if r["controller_epoch"] == zombie_epoch and r["reason"] == "controlled_shutdown"
    ]


@pytest.mark.slow
@contextlib.contextmanager
def no_controller_watching(c: Cluster) -> Iterator[None]:
    """No controller acts meanwhile: an admin session holds /controller (one multi, delete
    and create, so no broker wins in between; 99 is no broker). On leaving, its
    /controller goes with its session and the brokers race again."""
    hold = ZkClient(c.zk_connect, session_timeout_ms=30_000)
    hold.start()
    try:
        hold.multi(
            [
                Delete(paths.CONTROLLER),
                Create(paths.CONTROLLER, znodes.encode_controller(99), ephemeral=True),
            ]
        )
        wait_for(
            lambda: (
                not any(
                    ((b.status() or {}).get("controller") or {}).get("active")
                    for b in c.brokers.values()
                )
            ),
            30,
            "no active controller",
        )
        yield
    finally:
        hold.close()


def epoch_writes_logged(c: Cluster, broker_id: int, epoch: int, topic: str) -> list[dict[str, Any]]:
    """The controller's partition_state rows of ``topic`` in ``epoch``, once there is one:
    each is written after ZooKeeper accepted the write it records."""
    return wait_for(
        lambda: [
            r
            for r in c[broker_id].state_changes("partition_state")
            if r["controller_epoch"] == epoch and r["topic"] == topic
        ],
        30,
        f"broker {broker_id}'s partition states of {topic} in epoch {epoch} logged",
    )


def test_a_broker_back_on_new_disks_while_no_controller_watched_does_not_lead_with_nothing(
    cluster_factory: ClusterFactory,
) -> None:
    """A broker that left and registered again while no controller watched (here: an
    admin session holds /controller meanwhile) is still in the ISRs its earlier
    incarnation was in, as their leader too: nothing judged it since. Its registration is
    newer than the states listing it were written, so the next controller takes it out of
    those ISRs and leaderships where another live member is left, as a controller that saw
    it bounce would have; it comes back into the ISR once it has fetched everything. Taken
    for the broker that left (Kafka 2.8 does), it led on its new, empty disks: what was
    acknowledged was gone."""
    c = cluster_factory()
    controller_id, epoch = c.wait_controller()
    target = next(b for b in (1, 2, 3) if b != controller_id)
    others = tuple(b for b in (1, 2, 3) if b != target)
    c.create_topic("t", {0: (target, *others)})
    c.wait_partitions(
        "t", lambda s: s[0].leader == target and len(s[0].isr) == 3, "t led by its first replica"
    )
    acked = produce(c, "t", [b"m%d" % i for i in range(300)], partition=0)
    assert not acked.errors
    assert len(acked.by_offset) == 300
    c.wait_partitions("t", lambda s: len(s[0].isr) == 3, "every replica in sync")
    before, _ = c.partition_state("t", 0)
    old_epoch = c.broker_epoch(target)

    with no_controller_watching(c):
        c[target].kill()
        c[target].replace_disks()
        c[target].start()
        wait_for(
            lambda: c.broker_epoch(target) not in (None, old_epoch),
            c.session_timeout_s + 60,
            f"broker {target} registered again",
        )
        assert c.partition_state("t", 0)[0] == before  # its earlier self still leads
    new_id, new_epoch = c.wait_controller(min_epoch=epoch + 1)
    after = c.wait_partitions(
        "t",
        lambda s: s[0].leader in others and s[0].leader_epoch > before.leader_epoch,
        "a leader that kept its log",
    )
    assert after[0].leader != target
    written = epoch_writes_logged(c, new_id, new_epoch, "t")
    assert written[0]["reason"] == "offline"
    assert written[0]["leader"] in others
    assert sorted(written[0]["isr"]) == sorted(others)
    read = consume(c, "t", [0])
    assert lost_acknowledged(read, acked) == []
    # It fetched everything again and is back in sync.
    c.wait_partitions("t", lambda s: target in s[0].isr, f"broker {target} back in the ISR")


def test_a_leader_back_on_new_disks_with_every_isr_member_back_unseen_gives_way(
    cluster_factory: ClusterFactory,
) -> None:
    """As above, but every broker registers again while no controller watches (the
    others restarted with their disks: after a ZooKeeper outage every session expires
    alike). Nothing then tells the next controller which member holds what, so it keeps
    the state (as Kafka does), and sends the broker on new disks its leadership; the
    broker has no log of the partition while the ISR lists others, and refuses to lead
    (REPLICA_NOT_AVAILABLE): the controller hands the leadership to another member and
    takes it out of the ISR. A fault schedule found it (ensemble seed 114): the broker led
    from its empty log and its followers truncated 53,463 acknowledged offsets to it."""
    c = cluster_factory()
    controller_id, epoch = c.wait_controller()
    target = next(b for b in (1, 2, 3) if b != controller_id)
    others = tuple(b for b in (1, 2, 3) if b != target)
    c.create_topic("t", {0: (target, *others)})
    c.wait_partitions(
        "t", lambda s: s[0].leader == target and len(s[0].isr) == 3, "t led by its first replica"
    )
    acked = produce(c, "t", [b"m%d" % i for i in range(300)], partition=0)
    assert not acked.errors
    assert len(acked.by_offset) == 300
    c.wait_partitions("t", lambda s: len(s[0].isr) == 3, "every replica in sync")
    before, _ = c.partition_state("t", 0)
    old_epochs = {b: c.broker_epoch(b) for b in (1, 2, 3)}

    with no_controller_watching(c):
        for b in (1, 2, 3):
            c[b].kill()
        c[target].replace_disks()
        for b in (1, 2, 3):
            c[b].start()
        wait_for(
            lambda: all(c.broker_epoch(b) not in (None, old_epochs[b]) for b in (1, 2, 3)),
            c.session_timeout_s + 60,
            "every broker registered again",
        )
        assert c.partition_state("t", 0)[0] == before
    new_id, new_epoch = c.wait_controller(min_epoch=epoch + 1)
    after = c.wait_partitions(
        "t",
        lambda s: s[0].leader in others and s[0].leader_epoch > before.leader_epoch,
        "a leader that kept its log",
    )
    assert target not in after[0].isr or after[0].leader != target
    refused = [
        r
        for r in c[target].state_changes("leader_and_isr")
        if r["topic"] == "t" and r["result"] == "rejected"
    ]
    assert refused
    assert refused[0]["error"] == "REPLICA_NOT_AVAILABLE"
    assert refused[0]["leader"] == target
    written = epoch_writes_logged(c, new_id, new_epoch, "t")
    assert written[0]["reason"] == "offline"
    assert written[0]["leader"] in others
    assert sorted(written[0]["isr"]) == sorted(others)
    read = consume(c, "t", [0])
    assert lost_acknowledged(read, acked) == []
    # It fetched everything again and is back in sync.
    c.wait_partitions("t", lambda s: target in s[0].isr, f"broker {target} back in the ISR")


def test_a_failover_finds_no_stale_isr_member_where_a_controller_saw_the_registration(
    cluster_factory: ClusterFactory,
) -> None:
    """A broker restarted while a controller watched left the ISRs and came back into them
    by writes made after its new registration: the next failovers find nothing stale and
    write no partition state."""
    c = cluster_factory()
    c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_partitions("t", lambda s: all(len(st.isr) == 3 for st in s.values()), "full ISRs")
    controller_id, epoch = c.wait_controller()
    restarted = next(b for b in (1, 2, 3) if b != controller_id)
    old_broker_epoch = c.broker_epoch(restarted)
    c[restarted].kill()
    c[restarted].start()
    # Registered again (once its earlier session expired), and every ISR full again by a
    # write made since: the ISRs, full before the kill, were full at once.
    new_broker_epoch = wait_for(
        lambda: (e := c.broker_epoch(restarted)) not in (None, old_broker_epoch) and e,
        c.session_timeout_s + 60,
        f"broker {restarted} registered again",
    )

    def written_since_registered() -> bool:
        for p in ASSIGNMENT:
            got = c.zk.get(paths.partition_state("t", p))
            if got is None or got[1].mzxid < new_broker_epoch:
                return False
        return True

    c.wait_partitions(
        "t",
        lambda s: all(len(st.isr) == 3 for st in s.values()) and written_since_registered(),
        "full ISRs again, written since the registration",
        timeout=90,
    )
    quiet_from = epoch + 1
    for _ in range(2):
        c.zk.delete(paths.CONTROLLER)  # an operator forcing a new election
        controller_id, epoch = c.wait_controller(min_epoch=epoch + 1)
        # Its failover over (the line follows the stale members' writes) before the next.
        wait_for(
            lambda cid=controller_id, e=epoch: any(  # type: ignore[misc]  # binds the loop's variable
                r["controller_epoch"] == e for r in c[cid].state_changes("controller_failover")
            ),
            30,
            f"the failover of epoch {epoch}",
        )
    rows = [r for b in c.brokers.values() for r in b.state_changes("partition_state")]
    assert [r for r in rows if r["controller_epoch"] >= quiet_from and r["topic"] == "t"] == []
    assert not any("partition states listing them" in b.output() for b in c.brokers.values())
