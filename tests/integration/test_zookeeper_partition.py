"""A broker cut off from ZooKeeper while it goes on running (a network partition, not a
pause): it keeps its connections to the other brokers and to clients, so it can go on
acting on what it last knew. Fencing must hold anyway: the cut-off controller changes
nothing once another is elected, the cut-off leader acknowledges nothing that is then
lost, and both come back with a new broker epoch when the link heals. A controller that
only stops hearing ZooKeeper (its requests still arrive, so its session lives on) resigns
on its own, and once healed hands the term on and acts on what it missed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cluster.netsplit import ZooKeeperLink, linked
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import consume, lost_acknowledged
from tests.integration.harness import Cluster, wait_for
from tests.integration.workload import (
    ASSIGNMENT,
    BROKERS,
    PARTITIONS,
    REPLICA_LAG_S,
    TOPIC,
    Stream,
    history_problems,
    wait_healed,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def linked_cluster(
    cluster_factory: ClusterFactory,
) -> Iterator[tuple[Cluster, dict[int, ZooKeeperLink]]]:
    """Three brokers, each reaching ZooKeeper through a link of its own, and a topic."""
    c = cluster_factory(BROKERS, start=False, replica_lag_time_max_ms=str(REPLICA_LAG_S * 1000))
    with linked(c) as link:
        c.start()
        c.create_topic(TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
        wait_healed(c)
        yield c, link


def wait_reregistered(c: Cluster, broker_id: int, old_broker_epoch: int) -> None:
    """The broker registered again with a newer broker epoch, and the cluster healed."""
    new_broker_epoch = wait_for(
        lambda: (e := c.broker_epoch(broker_id)) is not None and e != old_broker_epoch and e,
        60,
        "re-registration with a new broker epoch",
    )
    assert new_broker_epoch > old_broker_epoch
    wait_healed(c)


def wait_resigned_unreachable(c: Cluster, broker_id: int, epoch: int) -> None:
    """The broker resigned the controller's term of ``epoch`` on its own, having heard
    nothing from ZooKeeper for a session timeout."""
    resigned = wait_for(
        lambda: [
            r
            for r in c[broker_id].state_changes("controller_resigned")
            if r["controller_epoch"] == epoch
        ],
        c.session_timeout_s + 30,
        f"broker {broker_id} to resign the term of epoch {epoch}",
    )
    assert "unreachable" in resigned[0]["reason"], resigned


def test_a_controller_cut_off_from_zookeeper_is_replaced_and_changes_nothing(
    linked_cluster: tuple[Cluster, dict[int, ZooKeeperLink]],
) -> None:
    c, link = linked_cluster
    old_id, old_epoch = c.wait_controller()
    old_broker_epoch = c.broker_epoch(old_id)
    assert old_broker_epoch is not None
    cut_at_ms = time.time() * 1000
    link[old_id].cut()
    try:
        new_id, new_epoch = c.wait_controller(not_id=old_id, timeout=c.session_timeout_s + 30)
        assert new_epoch == old_epoch + 1
        # The new controller moves the cut-off broker's leaderships and takes it out of
        # the ISRs (its registration went with its session), while the process runs.
        c.wait_partitions(
            TOPIC,
            lambda s: all(
                st.leader not in (old_id, -1) and old_id not in st.isr for st in s.values()
            ),
            "leaders moved and ISRs shrunk",
        )
        assert c[old_id].alive()
        # Still cut off, so never told its session expired: it stops acting on its own
        # once ZooKeeper has been unreachable for a session timeout.
        wait_resigned_unreachable(c, old_id, old_epoch)
    finally:
        link[old_id].heal()
    # Healed: it finds its session expired and comes back as a new broker.
    wait_reregistered(c, old_id, old_broker_epoch)
    assert c.controller() == (new_id, new_epoch)
    # Rows are logged after ZooKeeper accepted a write: none from the old term after the cut.
    late = [
        r
        for r in c[old_id].state_changes("partition_state")
        if r["ts"] > cut_at_ms and r["controller_epoch"] == old_epoch
    ]
    assert late == []
    # Among them: no broker applied a request of an older controller epoch after a newer.
    assert history_problems(c) == []


def test_a_leader_cut_off_from_zookeeper_loses_nothing_acknowledged(
    linked_cluster: tuple[Cluster, dict[int, ZooKeeperLink]],
) -> None:
    c, link = linked_cluster
    controller_id, _ = c.wait_controller()
    states = c.partition_states(TOPIC)
    # A broker that leads partitions and is not the controller: only its leaderships move.
    victim = next(
        b for b in BROKERS if b != controller_id and any(s.leader == b for s in states.values())
    )
    led = sorted(p for p, s in states.items() if s.leader == victim)
    old_broker_epoch = c.broker_epoch(victim)
    assert old_broker_epoch is not None
    stream = Stream(c)
    stream.start()
    try:
        time.sleep(2)  # the producer is writing to every partition
        link[victim].cut()
        try:
            # It goes on running and believing it leads; clients that ask it are told so,
            # and what they send it cannot be acknowledged: its followers left it.
            c.wait_partitions(
                TOPIC,
                lambda s: (
                    all(s[p].leader not in (victim, -1) for p in led)
                    and all(victim not in st.isr for st in s.values())
                ),
                "the cut-off leader's partitions led by others",
                timeout=c.session_timeout_s + 30,
            )
            time.sleep(3)  # the producer meets both the old leader and the new ones
            assert c[victim].alive()
        finally:
            link[victim].heal()
        wait_reregistered(c, victim, old_broker_epoch)
        time.sleep(2)  # and writes to the healed cluster
    finally:
        unanswered = stream.stop()
    assert unanswered == 0
    assert len(stream.acked.by_offset) > 1000, "the stream hardly ran"
    lost = lost_acknowledged(consume(c, TOPIC, range(PARTITIONS)), stream.acked)
    assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:3]}"
    assert history_problems(c) == []
    refused = stream.acked.errors
    assert not refused, f"{len(refused)} of {stream.sent} refused: {sorted(set(refused))}"


def test_a_controller_that_hears_nothing_from_zookeeper_acts_on_what_it_missed_when_healed(
    linked_cluster: tuple[Cluster, dict[int, ZooKeeperLink]],
) -> None:
    """Only ZooKeeper's answers to the controller are lost: its requests, pings and
    reconnection attempts still arrive, so its session never expires and its /controller
    stands, and no other broker can be elected. A broker dies meanwhile; the notification
    goes nowhere. Unable to hear ZooKeeper for a session timeout, the controller resigns
    on its own. Healed, it finds its session alive: it removes its own /controller (else
    no one would act, KAFKA-13407), an election runs, and the loss it missed is handled."""
    c, link = linked_cluster
    controller_id, epoch = c.wait_controller()
    victim = next(b for b in BROKERS if b != controller_id)
    led = sorted(p for p, s in c.partition_states(TOPIC).items() if s.leader == victim)
    assert led, "the victim leads nothing"
    link[controller_id].cut_answers()
    try:
        c[victim].kill()
        wait_for(
            lambda: c.broker_epoch(victim) is None,
            c.session_timeout_s + 30,
            "the dead broker's registration to go",
        )
        wait_resigned_unreachable(c, controller_id, epoch)
        # Its session lives on, and with it its /controller: nobody acted on the loss.
        assert c.controller() == (controller_id, epoch)
        states = c.partition_states(TOPIC)
        assert all(states[p].leader == victim for p in led), states
    finally:
        link[controller_id].heal()
    new_id, new_epoch = c.wait_controller(min_epoch=epoch + 1, timeout=c.session_timeout_s + 30)
    assert new_epoch == epoch + 1, (new_id, new_epoch)
    c.wait_partitions(
        TOPIC,
        lambda s: all(st.leader not in (victim, -1) and victim not in st.isr for st in s.values()),
        "the dead broker's leaderships moved and ISRs shrunk",
    )
    c[victim].start()
    wait_healed(c)
    assert history_problems(c) == []
