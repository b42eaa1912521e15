"""Broker loss, unclean election, session expiry, and clients reading metadata."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from admin import topics
from cluster.netsplit import ZooKeeperLink, linked
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume, lost_acknowledged, produce
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import ZkClient

pytestmark = pytest.mark.integration

ASSIGNMENT = {p: tuple((1, 2, 3)[(p + i) % 3] for i in range(3)) for p in range(6)}


@pytest.mark.slow
def test_broker_loss_moves_leaders_and_shrinks_isrs(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    victim = next(b for b in (1, 2, 3) if b != controller_id)
    c.create_topic("t", ASSIGNMENT)
    before = c.wait_topic_online("t")
    c[victim].kill()
    after = c.wait_partitions(
        "t",
        lambda s: all(victim not in st.isr and st.leader not in (victim, -1) for st in s.values()),
        "the lost broker out of every ISR and leadership",
        timeout=c.session_timeout_s + 30,
    )
    for p, st in after.items():
        assert st.leader_epoch > before[p].leader_epoch
        assert st.leader in before[p].isr
    rows = c[controller_id].state_changes("broker_change")
    assert any(victim in r["dead"] for r in rows)


@pytest.mark.slow
def test_without_unclean_election_a_partition_stays_offline_until_an_isr_member_returns(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    offline_with_an_out_of_sync_replica_down(c)
    # No live ISR member: leader -1, and the ISR keeps its last member (never emptied).
    assert c.partition_state("t", 0)[0].isr == (2,)
    # Broker 3 (not in the ISR) returns: still offline.
    c[3].start()
    c.wait_registered([3])
    c.wait_controller()
    assert c.partition_state("t", 0)[0].leader == -1
    # The ISR member returns: it leads again.
    c[2].start()
    c.wait_partitions("t", lambda s: s[0].leader == 2, "broker 2 leads again")
    unclean = [
        r
        for b in c.brokers.values()
        for r in b.state_changes("partition_state")
        if r["reason"] == "unclean"
    ]
    assert unclean == []


@pytest.mark.slow
def test_unclean_election_turned_on_while_a_partition_is_offline_elects_it_at_once(
    cluster_factory: ClusterFactory,
) -> None:
    """Kafka's TopicUncleanLeaderElectionEnable: a topic config change (the overrides and
    a /config/changes notification) that turns unclean election on while a partition of
    the topic has no live ISR replica elects the live out-of-sync one then, not at the
    next broker change, and logs it as unclean."""
    c = cluster_factory()
    offline_with_an_out_of_sync_replica_down(c)
    c[3].start()  # not in the ISR, and unclean election is off: it stays offline
    c.wait_registered([3])
    c.wait_controller()
    time.sleep(1)
    assert c.partition_state("t", 0)[0].leader == -1
    topics.alter_topic_config(c.zk, "t", {"unclean.leader.election.enable": "true"}, [])
    states = c.wait_partitions("t", lambda s: s[0].leader == 3, "broker 3 elected uncleanly", 30)
    assert states[0].isr == (3,)
    assert unclean_elections_logged(c, "t")[-1]["leader"] == 3


@pytest.mark.slow
def test_unclean_election_enabled_by_topic_config_elects_and_is_logged(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    offline_with_an_out_of_sync_replica_down(c, {"unclean.leader.election.enable": "true"})
    c[3].start()  # not in the ISR, but unclean election is allowed for this topic
    states = c.wait_partitions("t", lambda s: s[0].leader == 3, "broker 3 elected uncleanly")
    assert states[0].isr == (3,)
    assert unclean_elections_logged(c, "t")[-1]["leader"] == 3


def offline_with_an_out_of_sync_replica_down(
    c: Cluster, config: dict[str, str] | None = None
) -> None:
    """Topic "t" (with ``config``), one partition on brokers 2 and 3: broker 3 killed
    (out of the ISR), then broker 2, so the partition is offline, its ISR [2]."""
    c.wait_controller()
    c.create_topic("t", {0: (2, 3)}, config)
    c.wait_topic_online("t")
    c[3].kill()
    c.wait_partitions("t", lambda s: s[0].isr == (2,), "ISR [2]", timeout=c.session_timeout_s + 30)
    c[2].kill()
    c.wait_partitions(
        "t", lambda s: s[0].leader == -1, "partition 0 offline", timeout=c.session_timeout_s + 30
    )


def unclean_elections_logged(c: Cluster, topic: str) -> list[dict[str, object]]:
    """The topic's unclean elections in the state-change logs, once there is one (the
    controller logs a state after ZooKeeper accepted it: a test may see the znode first)."""

    def unclean() -> list[dict[str, object]]:
        return [
            r
            for b in c.brokers.values()
            for r in b.state_changes("partition_state")
            if r["reason"] == "unclean" and r["topic"] == topic
        ]

    return wait_for(unclean, 30, "the unclean election in the state-change log")


def registrations_logged(c: Cluster, broker_id: int, epoch: int) -> list[int]:
    """The broker epochs of the broker's `broker_registered` lines, once the one of
    ``epoch`` is there: the line follows the registration's create, so a test that saw
    the registration in ZooKeeper can be a moment ahead of it."""

    def logged() -> list[int] | None:
        epochs = [r["broker_epoch"] for r in c[broker_id].state_changes("broker_registered")]
        return epochs if epoch in epochs else None

    return wait_for(logged, 30, f"broker {broker_id}'s registration (epoch {epoch}) logged")


@pytest.mark.slow
def test_broker_session_expiry_reregisters_with_a_new_broker_epoch(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    victim = next(b for b in (1, 2, 3) if b != controller_id)
    old_epoch = c.broker_epoch(victim)
    c[victim].pause()  # past its session timeout: ZooKeeper expires the session
    try:
        wait_for(
            lambda: victim not in c.registered(),
            c.session_timeout_s + 30,
            "the expired registration to go",
        )
    finally:
        c[victim].resume()
    new_epoch = wait_for(
        lambda: (e := c.broker_epoch(victim)) and e != old_epoch and e,
        60,
        "re-registration with a new broker epoch",
    )
    assert old_epoch is not None
    assert new_epoch > old_epoch
    assert registrations_logged(c, victim, new_epoch)[-2:] == [old_epoch, new_epoch]
    # The controller saw the broker come back (as a new broker: its old session is gone).
    wait_for(
        lambda: any(
            victim in r["new"] or victim in r["bounced"]
            for r in c[controller_id].state_changes("broker_change")
        ),
        30,
        "the controller to see it",
    )


@pytest.mark.slow
def test_a_broker_that_bounced_unseen_is_treated_as_failed_and_restarted(
    cluster_factory: ClusterFactory,
) -> None:
    """The controller sees broker 3's registration only after it was made again by a new
    process: the same id, a new broker epoch (czxid), no moment without it. The new process
    knows nothing of its partitions, so the controller must treat the broker as failed
    (its leaderships move, it leaves the ISRs) and as started (told its replicas). A
    partition on broker 3 alone goes offline, then broker 3 leads it again."""
    # Broker 1 is the controller, and its session outlives broker 3's by far: paused, it
    # misses broker 3's expiry and registration, and is told of them in one watch event.
    c = cluster_factory(start=False, auto_leader_rebalance_enable="false")
    c[1].overrides["zookeeper.session.timeout.ms"] = "30000"
    c[1].start()
    c.wait_registered([1])
    assert c.wait_controller()[0] == 1
    for b in (2, 3):
        c[b].start()
    c.wait_registered([1, 2, 3])
    c.create_topic("t", ASSIGNMENT)
    c.create_topic("solo", {0: (3,)})
    before = c.wait_topic_online("t")
    solo_before = c.wait_topic_online("solo")[0]
    led_by_3 = sorted(p for p, st in before.items() if st.leader == 3)
    assert led_by_3
    acked = produce(c, "t", (b"before-%d" % i for i in range(60)))
    solo_acked = produce(c, "solo", (b"solo-before-%d" % i for i in range(20)))
    old_epoch = c.broker_epoch(3)
    assert old_epoch is not None

    c[1].pause()
    try:
        c[3].kill()
        restarted_ms = time.time() * 1000
        c[3].start()
        new_epoch = wait_for(
            lambda: (e := c.broker_epoch(3)) and e != old_epoch and e,
            c.session_timeout_s + 60,
            "broker 3 registered again (once its old session expired)",
        )
    finally:
        c[1].resume()
    assert new_epoch > old_epoch

    changes = wait_for(
        lambda: [r for r in c[1].state_changes("broker_change") if 3 in r["bounced"]],
        60,
        "the controller to see broker 3 bounced",
    )
    assert (changes[0]["new"], changes[0]["dead"]) == ([], [])
    assert not any(3 in r["dead"] for r in c[1].state_changes("broker_change"))
    # Treated as failed: the leaderships of its old incarnation moved, with new leader
    # epochs. Treated as started: the new process was told every replica it hosts.
    after = c.wait_partitions(
        "t",
        lambda s: all(s[p].leader in (1, 2) for p in led_by_3),
        "broker 3's leaderships moved",
    )
    for p in led_by_3:
        assert after[p].leader_epoch > before[p].leader_epoch
        assert after[p].leader in before[p].isr

    solo = c.wait_partitions(
        "solo",
        lambda s: s[0].leader == 3 and s[0].leader_epoch > solo_before.leader_epoch,
        "broker 3 leading solo-0 again, with a new leader epoch",
    )
    assert solo[0].isr == (3,)

    def told() -> bool:
        applied = {
            (r["topic"], r["partition"])
            for r in c[3].state_changes("leader_and_isr")
            if r["result"] == "applied" and r["ts"] >= restarted_ms
        }
        return applied >= {("t", p) for p in ASSIGNMENT} | {("solo", 0)}

    wait_for(told, 60, "the new broker 3 told of each of its replicas")
    # It fetches as a follower again: back in every ISR, and nothing acknowledged is lost.
    c.wait_partitions(
        "t", lambda s: all(3 in st.isr for st in s.values()), "broker 3 back in every ISR"
    )
    acked = produce(c, "t", (b"after-%d" % i for i in range(60)), acked)
    read = consume(c, "t", ASSIGNMENT)
    assert lost_acknowledged(read, acked) == []
    solo_acked = produce(c, "solo", (b"solo-after-%d" % i for i in range(20)), solo_acked)
    assert lost_acknowledged(consume(c, "solo", [0]), solo_acked) == []


def test_kcat_and_confluent_kafka_see_brokers_controller_and_partitions(
    cluster_factory: ClusterFactory,
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka.admin")
    c = cluster_factory()
    controller_id, _ = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    states = c.wait_topic_online("t")
    # Brokers learn of the topic through UpdateMetadata, a moment after the znodes.
    port = c[1].port()
    admin = confluent_kafka.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})

    def metadata():  # type: ignore[no-untyped-def]
        md = admin.list_topics(timeout=10)
        return md if "t" in md.topics and len(md.brokers) == 3 else None

    md = wait_for(metadata, 30, "metadata with the topic")
    assert md.controller_id == controller_id
    assert sorted(md.brokers) == [1, 2, 3]
    for p, pm in md.topics["t"].partitions.items():
        assert pm.leader == states[p].leader
        assert list(pm.replicas) == list(ASSIGNMENT[p])
        assert sorted(pm.isrs) == sorted(states[p].isr)

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is installed by the set-up script"

    def kcat_listing() -> dict[str, Any] | None:
        out = subprocess.run(
            [kcat, "-b", f"127.0.0.1:{port}", "-L", "-J"],
            capture_output=True,
            timeout=60,
            check=True,
        )
        got: dict[str, Any] = json.loads(out.stdout)
        has_topic = any(t["topic"] == "t" for t in got["topics"])
        return got if has_topic and len(got["brokers"]) == 3 else None

    # kcat asks broker 1, which the admin client, having learned of the others, may not
    # have asked: as above, until broker 1 has the UpdateMetadata too.
    listing = wait_for(kcat_listing, 30, "kcat's metadata with the topic", interval=0.5)
    assert listing["controllerid"] == controller_id
    assert sorted(b["id"] for b in listing["brokers"]) == [1, 2, 3]
    topic = next(t for t in listing["topics"] if t["topic"] == "t")
    assert {p["partition"]: p["leader"] for p in topic["partitions"]} == {
        p: s.leader for p, s in states.items()
    }


@pytest.mark.slow
def test_a_restarted_broker_applies_no_request_of_its_earlier_incarnation(
    cluster_factory: ClusterFactory,
) -> None:
    """Restarted within its session timeout, a broker waits for its earlier registration
    to expire before it registers. A controller request meant for the earlier incarnation
    (its broker epoch) that reaches the new process meanwhile, as a request the
    controller's channel sends again after the kill would, is not applied: it waits for
    the registration (Kafka processes no request before it registers) and is refused,
    STALE_BROKER_EPOCH. Applied, it would make the new process leader of a partition it
    knows nothing of."""
    c = cluster_factory(keep_ports=True, zookeeper_session_timeout_ms="15000")
    controller_id, controller_epoch = c.wait_controller()
    victim = next(b for b in (1, 2, 3) if b != controller_id)
    others = [b for b in (1, 2, 3) if b != victim]
    c.create_topic("t", {0: (*others, victim)})
    state = c.wait_topic_online("t")[0]
    old_epoch = c.broker_epoch(victim)
    assert old_epoch is not None
    port = c[victim].port()
    c[victim].kill()
    start_and_wait_for_the_earlier_registration(c, victim)
    assert c.broker_epoch(victim) == old_epoch  # the earlier registration, still there
    replicas = [*others, victim]
    body = {
        "controller_id": controller_id,
        "controller_epoch": controller_epoch,
        "broker_epoch": old_epoch,
        "type": 0,
        "topic_states": [
            {
                "topic_name": "t",
                "topic_id": uuid.UUID(int=0),
                "partition_states": [
                    {
                        "partition_index": 0,
                        "controller_epoch": controller_epoch,
                        "leader": victim,
                        "leader_epoch": state.leader_epoch + 5,
                        "isr": replicas,
                        "partition_epoch": 0,
                        "replicas": replicas,
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": False,
                    }
                ],
            }
        ],
        "live_leaders": [{"broker_id": victim, "host_name": "127.0.0.1", "port": port}],
    }
    with KafkaConnection("127.0.0.1", port, timeout_s=c.session_timeout_s + 60) as conn:
        answer = conn.request(ApiKey.LEADER_AND_ISR, 5, body)
    assert ErrorCode.of(answer["error_code"]).name == "STALE_BROKER_EPOCH"
    new_epoch = c.broker_epoch(victim)
    assert new_epoch is not None
    assert new_epoch > old_epoch
    applied = [
        r
        for r in c[victim].state_changes("leader_and_isr")
        if r.get("leader_epoch") == state.leader_epoch + 5
    ]
    assert applied == []


@contextlib.contextmanager
def earlier_registration(c: Cluster, broker_id: int) -> Iterator[ZkClient]:
    """A broker id's registration left by an earlier incarnation whose session is still
    alive (an ephemeral znode of another session, 30 s long), as after a restart within
    the session timeout (KAFKA-7165); yields that session's client."""
    stale = ZkClient(c.zk_connect, session_timeout_ms=30_000)
    stale.start()
    try:
        stale.ensure_paths([paths.BROKER_IDS])
        stale.create(paths.broker(broker_id), b"{}", ephemeral=True)
        yield stale
    finally:
        stale.close()


def start_and_wait_for_the_earlier_registration(c: Cluster, broker_id: int) -> None:
    c[broker_id].start()
    wait_for(
        lambda: "waiting for it to expire" in c[broker_id].output(),
        60,
        "the broker to wait for the earlier registration",
    )


def blip_until_a_request_fails(c: Cluster, link: ZooKeeperLink) -> None:
    """Broker 1's link to ZooKeeper cut until a request of its fails for want of a
    connection (which it says it will retry), then healed."""
    link.cut()
    wait_for(
        lambda: "retrying once connected" in c[1].output() or not c[1].alive(),
        30,
        "a request of the broker's to fail for want of a connection",
    )
    link.heal()


def test_a_broker_asked_to_stop_while_starting_stops_and_exits_0(
    cluster_factory: ClusterFactory,
) -> None:
    """SIGTERM while the broker waits for its earlier session's registration to expire:
    it gives up waiting, never registers, and exits 0 at once, as a stop does, not after
    the wait or by the signal."""
    c = cluster_factory((1,), start=False)
    with earlier_registration(c, 1) as stale:
        start_and_wait_for_the_earlier_registration(c, 1)
        c[1].terminate()
        # Without giving up it would wait its own session timeout and 5 s more, then fail
        # to start (BrokerIdInUse: exit 1).
        assert c[1].wait_exit(timeout=25) == 0, c[1].output()
        owner = stale.exists(paths.broker(1))
        assert owner is not None
        assert int(owner.ephemeralOwner) == stale.session_id  # never registered
        assert "stopped while starting" in c[1].output()


def test_a_zookeeper_blip_while_a_broker_registers_is_waited_out(
    cluster_factory: ClusterFactory,
) -> None:
    """The broker's link to ZooKeeper is cut while it waits for its earlier session's
    registration to go: its requests fail with ConnectionLoss, which it waits out, as
    Kafka's client retries until connected, instead of failing its start-up."""
    c = cluster_factory((1,), start=False)
    with earlier_registration(c, 1) as stale, linked(c) as link:
        start_and_wait_for_the_earlier_registration(c, 1)
        blip_until_a_request_fails(c, link[1])
        stale.close()  # the earlier registration goes
        epoch = wait_for(lambda: c.broker_epoch(1), 30, "the broker registered")
        assert c[1].alive(), c[1].output()
        assert registrations_logged(c, 1, epoch) == [epoch]


def test_the_wait_for_an_earlier_registration_starts_over_after_a_lost_connection(
    cluster_factory: ClusterFactory,
) -> None:
    """ZooKeeper gives every session a fresh timeout after an outage or a new leader, so
    an earlier registration can outlive the wait's bound (the session timeout, 3 s, plus
    5 s) when the connection went meanwhile. The broker's own link is cut during the
    wait: the wait starts over, and the earlier registration, going after the first
    bound, is waited out instead of failing the start (BrokerIdInUse, exit 1)."""
    c = cluster_factory((1,), start=False)
    with earlier_registration(c, 1) as stale, linked(c) as link:
        start_and_wait_for_the_earlier_registration(c, 1)
        began = time.monotonic()  # the wait's first bound is 8 s from about now
        time.sleep(4)
        blip_until_a_request_fails(c, link[1])
        wait_for(
            lambda: "waiting 8 s more" in c[1].output() or not c[1].alive(),
            30,
            "the wait to start over",
        )
        # Past the first bound, the broker still waits (the second ends ~14 s from began).
        time.sleep(max(0.0, 11 - (time.monotonic() - began)))
        assert c[1].alive(), c[1].output()
        stale.close()  # the earlier registration goes
        epoch = wait_for(lambda: c.broker_epoch(1), 30, "the broker registered")
        assert c[1].alive(), c[1].output()
        assert registrations_logged(c, 1, epoch) == [epoch]
