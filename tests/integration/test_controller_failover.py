"""Controller election and failover with real brokers and a real ZooKeeper."""

from __future__ import annotations

import time

import pytest

from tests.integration.conftest import ClusterFactory
from tests.integration.harness import wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode

pytestmark = pytest.mark.integration

ASSIGNMENT = {p: tuple((1, 2, 3)[(p + i) % 3] for i in range(3)) for p in range(6)}


def test_three_brokers_race_and_exactly_one_wins_epoch_1(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    controller_id, epoch = c.wait_controller()
    assert epoch == 1
    elected = [b for b in c.brokers.values() if b.state_changes("controller_elected")]
    assert [b.broker_id for b in elected] == [controller_id]
    # The losers remember who won.
    for b in c.brokers.values():
        if b.broker_id != controller_id:
            seen = b.state_changes("controller_seen")
            assert seen
            assert seen[-1]["controller"] == controller_id


@pytest.mark.slow
def test_sigkill_controller_fails_over_and_its_partitions_are_reelected(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory()
    old_id, old_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    before = c.wait_topic_online("t")
    led = {p for p, s in before.items() if s.leader == old_id}
    assert led

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


def test_graceful_stop_of_the_controller_fails_over_without_the_session_timeout(
    cluster_factory: ClusterFactory,
) -> None:
    # A long session: a graceful stop must not wait for it.
    c = cluster_factory(zookeeper_session_timeout_ms="30000")
    old_id, old_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_topic_online("t")
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
    c.wait_topic_online("t")
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
    # Brokers refuse a request carrying the zombie's epoch, as they would the zombie's own.
    target = next(b for b in c.brokers.values() if b.broker_id not in (zombie_id,))
    with KafkaConnection("127.0.0.1", target.port(), timeout_s=10) as conn:
        response = conn.request(
            ApiKey.UPDATE_METADATA,
            7,
            {
                "controller_id": zombie_id,
                "controller_epoch": zombie_epoch,
                "broker_epoch": -1,
                "topic_states": [],
                "live_brokers": [],
            },
        )
    assert response["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
    # Every request a broker received from the zombie's epoch after it had heard from the new
    # controller was rejected (the log shows rejections, never an application).
    for b in c.brokers.values():
        applied = [r for r in b.state_changes("leader_and_isr") if r["result"] == "applied"]
        seen_new = False
        for r in applied:
            if r["controller_epoch"] >= new_epoch:
                seen_new = True
            assert not (seen_new and r["controller_epoch"] < new_epoch), r
