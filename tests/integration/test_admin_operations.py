"""The administration paths end to end: an admin operation (the admin modules or the `zkctl`
CLI, both writing znodes), real brokers and their controller acting on it, and the
ZooKeeper state it ends in, read back from the znodes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from kazoo.protocol.states import ZnodeStat

from admin import reassign, topics
from storage.checkpoints import read_topic_ids
from storage.log_manager import TOPIC_IDS_FILE
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume, produce
from tests.integration.harness import Cluster, logged, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from zkdata import paths, znodes
from zkdata.znodes import LeaderAndIsr, TopicPartition, decode_topic_config

pytestmark = pytest.mark.integration

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def zkctl(c: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m zkctl --zookeeper <connect> ...`, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "zkctl", "--zookeeper", c.zk_connect, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=PROJECT_ROOT,
    )


def metadata_topics(c: Cluster, broker_id: int) -> dict[str, dict[str, Any]]:
    """The topics broker `broker_id` answers a Metadata request with, by name."""
    with KafkaConnection("127.0.0.1", c[broker_id].port(), timeout_s=10) as conn:
        response = conn.request(ApiKey.METADATA, 1, {"topics": None})
    return {t["name"]: t for t in response["topics"]}


def exists(c: Cluster, path: str) -> bool:
    return c.zk.exists(path) is not None


def elected(c: Cluster, broker_id: int, reason: str, count: int) -> list[dict[str, Any]]:
    """The controller's partition_state rows for `reason`, once there are `count`."""

    def rows() -> list[dict[str, Any]] | None:
        got = [r for r in c[broker_id].state_changes("partition_state") if r["reason"] == reason]
        return got if len(got) >= count else None

    return wait_for(rows, 30, f"{count} {reason!r} partition states logged")


def led_by_preferred(c: Cluster, topic: str) -> dict[int, LeaderAndIsr] | None:
    a = c.assignment(topic)
    states = c.partition_states(topic)
    assert a is not None
    ok = all(states[p].leader == r[0] for p, r in a.partitions.items())
    return states if ok else None


def test_create_through_the_cli_and_add_partitions(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    proc = zkctl(
        c, "topic", "create", "--topic", "t", "--partitions", "3", "--replication-factor", "2",
        "--config", "unclean.leader.election.enable=true",
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (0, "Created topic t.\n"), proc.stderr
    states = c.wait_topic_online("t")
    a = c.assignment("t")
    assert a is not None
    assert sorted(a.partitions) == [0, 1, 2]
    replicas: Sequence[int]
    for p, replicas in a.partitions.items():
        # Every replica is live: the first one leads, and the ISR is all of them.
        assert (states[p].leader, states[p].isr) == (replicas[0], replicas)
    config = c.zk.get(paths.topic_config("t"))
    assert config is not None
    assert decode_topic_config("t", config[0]) == {"unclean.leader.election.enable": "true"}

    added = topics.add_partitions(c.zk, "t", 5).added
    assert sorted(added) == [3, 4]
    after = c.wait_topic_online("t")
    for p, replicas in added.items():
        assert (after[p].leader, after[p].isr) == (replicas[0], tuple(replicas))
    # The existing partitions were not touched: same leader, epoch, ISR and znode version.
    assert {p: after[p] for p in (0, 1, 2)} == states
    grown = c.assignment("t")
    assert grown is not None
    assert grown.partitions == {**a.partitions, **{p: tuple(r) for p, r in added.items()}}

    # A replica on a broker that is down: the first LIVE replica leads, the ISR is the live
    # ones (the assignment is written directly, as by a tool that saw broker 3 alive).
    assert c[3].stop() == 0
    c.wait_controller()
    c.create_topic("u", {0: (3, 1, 2), 1: (2, 3, 1)})
    states = c.wait_topic_online("u")
    assert (states[0].leader, states[0].isr) == (1, (1, 2))
    assert (states[1].leader, states[1].isr) == (2, (2, 1))


def test_delete_topic_and_a_deletion_held_by_a_broker_that_is_down(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    for name, assignment in (("gone", "1:2,2:3"), ("kept", "3:1"), ("held", "1:2,2:3")):
        topics.create_topic(c.zk, topics.parse_create_request(name, replica_assignment=assignment))
        c.wait_topic_online(name)
    wait_for(
        lambda: all({"gone", "kept"} <= set(metadata_topics(c, b)) for b in (1, 2, 3)),
        30,
        "every broker's metadata to list the topics",
    )

    assert topics.delete_topic(c.zk, "gone").outcome == "marked"
    wait_for(
        lambda: (
            not any(
                exists(c, p)
                for p in (
                    paths.delete_topic("gone"),
                    paths.topic("gone"),
                    paths.topic_config("gone"),
                )
            )
        ),
        30,
        "the deletion request and every znode of the topic to go",
    )
    wait_for(
        lambda: all("gone" not in metadata_topics(c, b) for b in (1, 2, 3)),
        30,
        "every broker's metadata to drop the topic",
    )
    assert all("kept" in metadata_topics(c, b) for b in (1, 2, 3))
    assert c.partition_states("kept")[0].leader == 3
    assert [r["topic"] for r in logged(c, controller_id, "topic_deleted", 1)] == ["gone"]

    # A replica of "held" is on broker 3, which is down: the deletion waits for it.
    victim = 3 if controller_id != 3 else 2
    assert c[victim].stop() == 0
    wait_for(lambda: victim not in c.registered(), 30, f"broker {victim} gone")
    # And a topic created while it is down, with a replica on it (Online, as in Kafka):
    # its deletion takes that replica Offline before holding it (Kafka asks for a
    # transition its state machine refuses; the teardown fails a test whose controller did).
    c.create_topic("born", {0: (victim, controller_id)})
    c.wait_topic_online("born")
    topics.delete_topic(c.zk, "held")
    topics.delete_topic(c.zk, "born")

    def held(topic: str) -> bool:
        return any(
            f"'{topic}'" in line and "halted: a replica is on a dead broker" in line
            for line in c[controller_id].output().splitlines()
        )

    for topic in ("held", "born"):
        wait_for(lambda t=topic: held(t), 30, f"the controller to hold the deletion of {topic}")  # type: ignore[misc]  # binds the loop's variable
        assert exists(c, paths.delete_topic(topic))
        assert exists(c, paths.topic(topic))
    c[victim].start()
    wait_for(
        lambda: (
            not any(
                exists(c, p)
                for t in ("held", "born")
                for p in (paths.delete_topic(t), paths.topic(t), paths.topic_config(t))
            )
        ),
        60,
        "the held deletions to complete once the broker returned",
    )
    deleted = [r["topic"] for r in logged(c, controller_id, "topic_deleted", 3)]
    assert deleted[0] == "gone"
    assert sorted(deleted[1:]) == ["born", "held"]
    assert exists(c, paths.topic("kept"))


def test_partitions_added_to_a_topic_being_deleted_are_deleted_with_it(
    cluster_factory: ClusterFactory,
) -> None:
    """An add-partitions whose check that the topic is not being deleted raced the
    deletion's marking writes the topic znode anyway (its write is conditional on the
    topic znode only, which the marking does not touch). The controller leaves the new
    partition alone (Kafka's processPartitionModifications); a controller that fails over
    loads it with the topic and deletes it with the rest: no state written for it, no log
    of it anywhere, every znode of the topic gone."""
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    victim, other = (b for b in (1, 2, 3) if b != controller_id)
    c.create_topic("raced", {0: (victim, other)})
    c.wait_topic_online("raced")
    # broker `victim` down holds the deletion, so the growth lands in a topic being deleted
    assert c[victim].stop() == 0
    wait_for(lambda: victim not in c.registered(), 30, f"broker {victim} gone")
    topics.delete_topic(c.zk, "raced")
    halted = "deletion of topics ['raced'] halted: a replica is on a dead broker"
    wait_for(lambda: halted in c[controller_id].output(), 30, "the controller to hold the deletion")

    data, stat = cast(tuple[bytes, ZnodeStat], c.zk.get(paths.topic("raced")))
    grown = znodes.decode_topic("raced", data)
    partitions = {**grown.partitions, 1: (controller_id, other)}
    c.zk.set(
        paths.topic("raced"),
        znodes.encode_topic(znodes.TopicAssignment("raced", partitions, topic_id=grown.topic_id)),
        version=stat.version,
    )
    ignored = "topic raced is being deleted: not adding partitions [1]"
    wait_for(lambda: ignored in c[controller_id].output(), 30, "the controller to ignore it")

    # The controller moves while the deletion is held: the next one loads the new
    # partition with the topic (and holds the deletion too: two replicas are down now).
    assert c[controller_id].stop() == 0
    new_id, _ = c.wait_controller(not_id=controller_id)
    assert new_id == other
    wait_for(lambda: halted in c[new_id].output(), 30, "the new controller to hold the deletion")
    assert c.assignment("raced") is not None
    c[victim].start()
    c[controller_id].start()
    wait_for(
        lambda: (
            not any(
                exists(c, p)
                for p in (
                    paths.delete_topic("raced"),
                    paths.topic("raced"),
                    paths.topic_config("raced"),
                )
            )
        ),
        60,
        "the deletion to complete once the brokers returned",
    )
    assert [r["topic"] for r in logged(c, new_id, "topic_deleted", 1)] == ["raced"]
    for b in (1, 2, 3):
        written = [r for r in c[b].state_changes("partition_state") if r["topic"] == "raced"]
        assert all(r["partition"] == 0 for r in written), (b, written)
        assert not (c[b].data_dir / "raced-1").exists()
    wait_for(
        lambda: all("raced" not in metadata_topics(c, b) for b in (1, 2, 3)),
        30,
        "every broker's metadata to drop the topic",
    )


def test_partitions_added_as_a_reassignment_starts_are_kept(
    cluster_factory: ClusterFactory,
) -> None:
    """An add-partitions whose check that no reassignment is pending came just before a
    reassignment request, and whose write of the topic znode landed just after it: the
    controller starts the reassignment, rewriting the topic znode, before it hears of the
    new partition. The rewrite must keep the new partition, which then goes online (the
    controller is paused meanwhile, so that both land before it reads either)."""
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    c.create_topic("grown", {0: (1, 2)})
    c.wait_topic_online("grown")
    c[controller_id].pause()
    try:
        c.zk.create(
            paths.REASSIGN_PARTITIONS,
            znodes.encode_reassignment({TopicPartition("grown", 0): (2, 3)}),
        )
        data, stat = cast(tuple[bytes, ZnodeStat], c.zk.get(paths.topic("grown")))
        before = znodes.decode_topic("grown", data)
        c.zk.set(
            paths.topic("grown"),
            znodes.encode_topic(
                znodes.TopicAssignment(
                    "grown", {**before.partitions, 1: (3, 1)}, topic_id=before.topic_id
                )
            ),
            version=stat.version,
        )
    finally:
        c[controller_id].resume()
    wait_for(lambda: not exists(c, paths.REASSIGN_PARTITIONS), 60, "the reassignment to complete")
    states = c.wait_topic_online("grown")
    assert sorted(states) == [0, 1]
    after = c.assignment("grown")
    assert after is not None
    assert after.partitions == {0: (2, 3), 1: (3, 1)}
    assert after.topic_id == before.topic_id


def test_a_topic_created_again_does_not_serve_the_deleted_ones_records(
    cluster_factory: ClusterFactory,
) -> None:
    """A replica moved off a broker while it was down keeps its log there (the StopReplica
    never reached it), and the topic's deletion asks only the replicas it has then. The
    topic created again with that broker leading: the broker finds the old log under the
    new topic id, sets it aside and starts empty, so readers get only the new records
    (before topic ids, the new topic served the old one's). Such a log left while the
    broker is up goes when the topic is deleted."""
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    away = 2 if controller_id != 2 else 3
    others = tuple(b for b in (1, 2, 3) if b != away)
    c.create_topic("again", {0: (others[0], away)})
    c.wait_topic_online("again")
    produce(c, "again", [f"old-{i}".encode() for i in range(100)])
    assert c[away].stop() == 0
    wait_for(lambda: away not in c.registered(), 30, f"broker {away} gone")
    reassign.start_reassignment(c.zk, {TopicPartition("again", 0): others})
    wait_for(lambda: not exists(c, paths.REASSIGN_PARTITIONS), 60, "the reassignment")
    topics.delete_topic(c.zk, "again")
    wait_for(lambda: not exists(c, paths.topic("again")), 60, "the deletion")
    assert (c[away].data_dir / "again-0").is_dir()  # its stray log

    c[away].start()
    c.wait_registered([away])
    c.create_topic("again", {0: (away, others[0])})
    c.wait_topic_online("again")
    produce(c, "again", [f"new-{i}".encode() for i in range(3)])
    assert [v for _, v in consume(c, "again", [0])[0]] == [f"new-{i}".encode() for i in range(3)]
    (stray,) = c[away].data_dir.glob("again-0.*-stray")
    assert "set aside as" in c[away].output()
    # A restart leaves the stray directory alone, and the new log is its own.
    assert c[away].stop() == 0
    c[away].start()
    c.wait_registered([away])
    assert stray.is_dir()
    assert [v for _, v in consume(c, "again", [0])[0]] == [f"new-{i}".encode() for i in range(3)]
    # Moved off it again while it is away, then deleted: its log, which no StopReplica
    # names, goes with the deletion (the UpdateMetadata marking the topic deleted).
    assert c[away].stop() == 0
    wait_for(lambda: away not in c.registered(), 30, f"broker {away} gone again")
    reassign.start_reassignment(c.zk, {TopicPartition("again", 0): others})
    wait_for(lambda: not exists(c, paths.REASSIGN_PARTITIONS), 60, "the second reassignment")
    c[away].start()
    c.wait_registered([away])
    assert (c[away].data_dir / "again-0").is_dir()
    topics.delete_topic(c.zk, "again")
    wait_for(lambda: not exists(c, paths.topic("again")), 60, "the second deletion")
    wait_for(lambda: not (c[away].data_dir / "again-0").exists(), 30, "the orphaned log deleted")
    assert stray.is_dir()
    # No log directory names the deleted topic's id any more (those with its replicas
    # forget it at their StopReplica, the orphan's at the deletion's UpdateMetadata).
    wait_for(
        lambda: all(
            "again" not in read_topic_ids(c[b].data_dir / TOPIC_IDS_FILE) for b in (1, 2, 3)
        ),
        30,
        "the topic ids forgotten",
    )


def test_reassignment_to_a_broker_started_later_moving_the_leader(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    c = cluster_factory(brokers=(1, 2, 3, 4), start=False)
    for b in (1, 2, 3):
        c[b].start()
    c.wait_registered([1, 2, 3])
    controller_id, _ = c.wait_controller()
    c.create_topic("t", {0: (1, 2), 1: (2, 1)})
    c.wait_topic_online("t")
    c[4].start()
    c.wait_registered([4])

    # t-0: leader 1 is not in the target, so leadership must move; t-1 moves to broker 4.
    target = {0: (2, 3), 1: (4, 2)}
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": "t", "partition": p, "replicas": list(r)} for p, r in target.items()
                ],
            }
        )
    )
    proc = zkctl(c, "reassign", "--reassignment-json-file", str(plan), "--execute")
    assert proc.returncode == 0, proc.stderr
    assert "Successfully started partition reassignments for t-0,t-1" in proc.stdout

    def done() -> bool:
        a = c.assignment("t")
        return (
            a is not None
            and a.partitions == target
            and not exists(c, paths.REASSIGN_PARTITIONS)
            and not a.adding_replicas
            and not a.removing_replicas
        )

    wait_for(done, 60, "the reassignment to complete")
    states = c.partition_states("t")
    for p, replicas in target.items():
        assert states[p].leader in replicas
        assert set(states[p].isr) <= set(replicas)
    assert states[0].leader == 2  # the first target replica that was in the ISR
    assert states[1].leader == 2  # still in the target: kept
    verify = zkctl(c, "reassign", "--reassignment-json-file", str(plan), "--verify")
    assert "Reassignment of partition t-0 is complete." in verify.stdout, verify.stdout
    # Every broker learns the new replica sets; broker 1 hosts nothing any more.
    wait_for(
        lambda: all(
            {p["partition_index"]: tuple(p["replica_nodes"]) for p in md["partitions"]} == target
            for md in (metadata_topics(c, b)["t"] for b in (1, 2, 3, 4))
        ),
        30,
        "every broker's metadata to show the target replicas",
    )
    wait_for(
        lambda: (c[1].status() or {}).get("partitions") == 0,
        30,
        "broker 1 to stop hosting the partitions moved away",
    )
    # Its logs are deleted: the StopReplicas (delete) carry the leader epoch, not the -2
    # of a topic deletion, and still apply (broker 1 holds an older one).
    wait_for(
        lambda: not any((c[1].data_dir / f"t-{p}").exists() for p in target),
        30,
        "broker 1's logs of the partitions moved away deleted",
    )
    # The new replicas caught up: the ISR is the whole target.
    c.wait_partitions(
        "t",
        lambda s: all(set(s[p].isr) == set(r) for p, r in target.items()),
        "the ISRs to be the target replicas",
    )

    # The controller watches for the next reassignment too (Kafka: "ensure we detect
    # future reassignments" once it deleted the znode).
    reassign.start_reassignment(c.zk, {TopicPartition("t", 1): (2, 4)})
    wait_for(
        lambda: (
            not exists(c, paths.REASSIGN_PARTITIONS)
            and (a := c.assignment("t")) is not None
            and a.partitions[1] == (2, 4)
        ),
        30,
        "a second reassignment to complete",
    )
    # Every step was a valid one (the removed replicas' StopReplica answers are not taken
    # for a topic deletion's, the new replicas are started once).
    assert "invalid replica state transition" not in c[controller_id].output()


def test_a_reassignment_to_a_broker_that_is_down_waits_for_it_quietly(
    cluster_factory: ClusterFactory,
) -> None:
    """A target replica that cannot catch up (its broker died after the request was made:
    the znode is written directly, as a tool that saw it alive would have) holds the
    reassignment, without the controller re-sending it over and over; it completes once
    the broker is back."""
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    down = next(b for b in (1, 2, 3) if b != controller_id)
    other = next(b for b in (1, 2, 3) if b not in (controller_id, down))
    c.create_topic("t", {0: (controller_id, other)})
    c.wait_topic_online("t")
    assert c[down].stop() == 0
    c.zk.create(
        paths.REASSIGN_PARTITIONS,
        znodes.encode_reassignment({TopicPartition("t", 0): (controller_id, down)}),
    )
    wait_for(
        lambda: (a := c.assignment("t")) is not None and a.adding_replicas == {0: (down,)},
        30,
        "the reassignment started",
    )
    started, _ = c.partition_state("t", 0)
    c[down].start()
    wait_for(
        lambda: (
            not exists(c, paths.REASSIGN_PARTITIONS)
            and (a := c.assignment("t")) is not None
            and a.partitions == {0: (controller_id, down)}
        ),
        30,
        "the reassignment to complete",
    )
    done, _ = c.partition_state("t", 0)
    assert done.leader == controller_id
    # Each step bumps the leader epoch once (the new replica back, the assignment
    # finished); a controller re-sending the pending reassignment bumps it endlessly.
    assert done.leader_epoch - started.leader_epoch <= 6, (started, done)
    rows = c[controller_id].state_changes("partition_state")
    assert len([r for r in rows if r["reason"] == "reassign"]) <= 8
    # The new replica went Online with its broker: resumed, it is not started again.
    assert "invalid replica state transition" not in c[controller_id].output()


def test_preferred_replica_election_restores_the_leaders(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory(auto_leader_rebalance_enable="false")
    controller_id, _ = c.wait_controller()
    b = next(i for i in (1, 2, 3) if i != controller_id)
    other = next(i for i in (1, 2, 3) if i not in (b, controller_id))
    c.create_topic("t", {0: (b, other), 1: (other, b), 2: (b, controller_id)})
    c.wait_topic_online("t")
    # Bounce the preferred leader of partitions 0 and 2: their leadership moves away.
    assert c[b].stop() == 0
    c[b].start()
    c.wait_registered([b])
    c.wait_partitions(
        "t",
        lambda s: all(b in st.isr for st in s.values()) and s[0].leader != b,
        f"broker {b} back in every ISR, not leading",
    )
    proc = zkctl(c, "elect-leaders", "--preferred", "--all-topic-partitions")
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: not exists(c, paths.PREFERRED_REPLICA_ELECTION), 30, "the election done")
    states = wait_for(lambda: led_by_preferred(c, "t"), 30, "the preferred leaders")
    assert (states[0].leader, states[1].leader, states[2].leader) == (b, other, b)
    rows = elected(c, controller_id, "preferred", 2)
    assert {r["partition"] for r in rows} == {0, 2}
    # The controller watches for the next election request too.
    proc = zkctl(c, "elect-leaders", "--preferred", "--topic", "t")
    assert proc.returncode == 0, proc.stderr
    wait_for(lambda: not exists(c, paths.PREFERRED_REPLICA_ELECTION), 30, "a second election")


def test_auto_leader_rebalance_restores_the_leaders(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory(
        auto_leader_rebalance_enable="true", leader_imbalance_check_interval_seconds="2"
    )
    controller_id, _ = c.wait_controller()
    b = next(i for i in (1, 2, 3) if i != controller_id)
    c.create_topic("t", {0: (b, controller_id), 1: (controller_id, b)})
    c.wait_topic_online("t")
    assert c[b].stop() == 0
    c.wait_partitions("t", lambda s: s[0].leader == controller_id, "partition 0 moved away")
    c[b].start()
    c.wait_registered([b])
    states = wait_for(lambda: led_by_preferred(c, "t"), 60, "the preferred leaders back")
    assert states[0].leader == b
    assert not exists(c, paths.PREFERRED_REPLICA_ELECTION)  # no admin request was involved
    assert [r["leader"] for r in elected(c, controller_id, "preferred", 1)] == [b]


def test_controlled_shutdown_moves_leaders_and_leaves_isrs_before_deregistering(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    victim = next(i for i in (1, 2, 3) if i != controller_id)
    rest = [i for i in (1, 2, 3) if i != victim]
    # The victim leads partitions 0 and 1 and follows in 2; partition 3 is not on it.
    c.create_topic(
        "t", {0: (victim, *rest), 1: (victim, rest[1], rest[0]), 2: (*rest, victim), 3: tuple(rest)}
    )
    before = c.wait_topic_online("t")
    assert [p for p, s in before.items() if s.leader == victim] == [0, 1]

    assert c[victim].stop() == 0
    assert victim not in c.registered()

    def seen_gone() -> list[dict[str, Any]] | None:
        rows = c[controller_id].state_changes()
        gone = any(r["event"] == "broker_change" and victim in r["dead"] for r in rows)
        return rows if gone else None

    log = wait_for(seen_gone, 30, "the controller to see the registration go")
    gone_at = next(
        i for i, r in enumerate(log) if r["event"] == "broker_change" and victim in r["dead"]
    )
    shutdown_rows = [
        (i, r)
        for i, r in enumerate(log)
        if r["event"] == "partition_state" and r["reason"] == "controlled_shutdown"
    ]
    moved = {r["partition"]: r for i, r in shutdown_rows if i < gone_at}
    # Before the registration went: leadership moved to another ISR member, and the victim
    # left the ISR of every partition it was in.
    assert sorted(moved) == [0, 1, 2]
    for p, r in moved.items():
        assert r["leader"] != victim
        assert r["leader"] in before[p].isr
        assert victim not in r["isr"]
    after = c.partition_states("t")
    for p in (0, 1, 2):
        assert after[p].leader != victim
        assert victim not in after[p].isr
    assert after[3] == before[3]


def test_a_new_target_overrides_a_reassignment_in_progress(
    cluster_factory: ClusterFactory,
) -> None:
    """/admin/reassign_partitions rewritten while a reassignment waits (its new replica's
    broker is down). As in Kafka, the controller acts on the znode's creation, not on its
    changes; the next controller reads it at its failover, finds a target the topic znode
    does not show, and lets it take over (KIP-455): the replica only the first target
    added is dropped, and the new target completes."""
    c = cluster_factory(brokers=(1, 2, 3, 4))
    controller_id, _ = c.wait_controller()
    down, new, keep = [b for b in (1, 2, 3, 4) if b != controller_id]
    c.create_topic("t", {0: (controller_id, keep)})
    c.wait_topic_online("t")
    assert c[down].stop() == 0
    wait_for(lambda: down not in c.registered(), 30, f"broker {down} gone")
    tp = TopicPartition("t", 0)
    c.zk.create(
        paths.REASSIGN_PARTITIONS, znodes.encode_reassignment({tp: (controller_id, keep, down)})
    )
    wait_for(
        lambda: (a := c.assignment("t")) is not None and a.adding_replicas == {0: (down,)},
        30,
        "the first reassignment started",
    )
    c.zk.set(
        paths.REASSIGN_PARTITIONS, znodes.encode_reassignment({tp: (controller_id, keep, new)})
    )
    _, epoch = c.wait_controller()
    c.zk.delete(paths.CONTROLLER)  # an operator forcing a new election
    wait_for(lambda: (got := c.controller()) is not None and got[1] > epoch, 30, "a new controller")
    wait_for(
        lambda: (
            not exists(c, paths.REASSIGN_PARTITIONS)
            and (a := c.assignment("t")) is not None
            and a.partitions == {0: (controller_id, keep, new)}
            and not a.adding_replicas
            and not a.removing_replicas
        ),
        60,
        "the new target to complete",
    )
    states = c.wait_partitions(
        "t",
        lambda s: set(s[0].isr) == {controller_id, keep, new},
        "the new target's replicas in the ISR",
    )
    assert states[0].leader == controller_id
    # The dropped replica was stopped while its broker was down: back, it hosts nothing.
    c[down].start()
    c.wait_registered([down])
    wait_for(
        lambda: (c[down].status() or {}).get("partitions") == 0,
        30,
        f"broker {down} to host nothing",
    )


def test_a_request_made_after_an_admin_deleted_a_rewritten_znode_is_carried_out(
    cluster_factory: ClusterFactory,
) -> None:
    """The controller's own rewrite of /admin/reassign_partitions (one partition done,
    another still moving) spends the watch its read armed; an admin then deletes the
    znode (Kafka's old way to give up a stuck reassignment), the last reassignment
    completes, and a new request is made: it is carried out. Kafka 2.8's
    maybeRemoveFromZkReassignment checks the znode with its handler registered, and its
    ZooKeeperClient arms a watch with every read of a watched path (shouldWatch), so the
    completion's check watches for the next creation; the controller's read did not."""
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    down = next(b for b in (1, 2, 3) if b != controller_id)
    other = next(b for b in (1, 2, 3) if b not in (controller_id, down))
    c.create_topic("t", {0: (controller_id, other), 1: (other, controller_id)})
    c.wait_topic_online("t")
    assert c[down].stop() == 0
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    # t-1 only changes its replicas' order: done at once, and the znode rewritten to hold
    # t-0 alone, which waits for the broker that is down.
    c.zk.create(
        paths.REASSIGN_PARTITIONS,
        znodes.encode_reassignment({t0: (controller_id, down), t1: (controller_id, other)}),
    )

    def pending() -> dict[TopicPartition, tuple[int, ...]] | None:
        got = c.zk.get(paths.REASSIGN_PARTITIONS)
        return None if got is None else znodes.decode_reassignment(got[0])

    wait_for(lambda: pending() == {t0: (controller_id, down)}, 30, "the znode rewritten")
    c.zk.delete(paths.REASSIGN_PARTITIONS)
    c[down].start()
    wait_for(
        lambda: (a := c.assignment("t")) is not None and a.partitions[0] == (controller_id, down),
        30,
        "t-0's reassignment to complete",
    )
    c.zk.create(paths.REASSIGN_PARTITIONS, znodes.encode_reassignment({t1: (other, controller_id)}))
    wait_for(
        lambda: (
            not exists(c, paths.REASSIGN_PARTITIONS)
            and (a := c.assignment("t")) is not None
            and a.partitions[1] == (other, controller_id)
        ),
        30,
        "the new request carried out",
    )
