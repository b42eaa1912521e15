"""ZooKeeper faults: an ensemble member lost, and ZooKeeper unreachable for a while."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cluster import zookeeper as zkp
from tests.integration.conftest import ClusterFactory
from tests.integration.harness import Cluster, serving_member, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ASSIGNMENT = {p: tuple((1, 2, 3)[(p + i) % 3] for i in range(3)) for p in range(6)}


def metadata_of(c: Cluster, broker_id: int) -> dict[str, object]:
    with KafkaConnection("127.0.0.1", c[broker_id].port(), timeout_s=10) as conn:
        return dict(conn.request(ApiKey.METADATA, 9, {"topics": None}))


def leaders_seen(c: Cluster, broker_id: int, topic: str) -> dict[int, int]:
    md = metadata_of(c, broker_id)
    for t in md["topics"]:  # type: ignore[attr-defined]
        if t["name"] == topic:
            return {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
    return {}


@pytest.fixture
def single_zk() -> Iterator[zkp.LocalZooKeeper]:
    zk = zkp.start_local(servers=1)
    try:
        yield zk
    finally:
        zk.close()


def test_losing_one_ensemble_member_goes_unnoticed(
    cluster_factory: ClusterFactory, zk_ensemble: zkp.LocalZooKeeper
) -> None:
    connect = zkp.chroot_connect_string(zk_ensemble.connect_string, "/cluster")
    # A session long enough to outlast the ensemble's own leader election.
    c = cluster_factory(connect=connect, zookeeper_session_timeout_ms="8000")
    controller = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    before = c.wait_topic_online("t")
    leader = zk_ensemble.leader()
    assert leader is not None
    leader.kill()
    zk_ensemble.wait_quorum(timeout=60)
    # Longer than a session: had anyone lost theirs, it would show by now.
    time.sleep(c.session_timeout_s * 1.5)
    assert c.controller() == controller
    assert c.registered() == {1, 2, 3}
    assert c.partition_states("t") == before
    for b in c.brokers.values():
        assert b.state_changes("controller_resigned") == []
    assert not any(
        r["dead"] or r["bounced"]
        for b in c.brokers.values()
        for r in b.state_changes("broker_change")
    )
    # The lost member comes back and the cluster still has not noticed.
    leader.restart()
    zk_ensemble.wait_ready(timeout=60)
    assert c.controller() == controller


def test_zookeeper_unreachable_brokers_serve_controller_resigns_all_recovers(
    cluster_factory: ClusterFactory, single_zk: zkp.LocalZooKeeper
) -> None:
    connect = zkp.chroot_connect_string(single_zk.connect_string, "/cluster")
    c = cluster_factory(connect=connect)
    old_id, old_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    states = c.wait_topic_online("t")
    expected = {p: s.leader for p, s in states.items()}
    for b in (1, 2, 3):
        wait_for(
            lambda b=b: leaders_seen(c, b, "t") == expected,  # type: ignore[misc]
            30,
            f"broker {b}'s metadata",
        )
    c.zk.close()  # the test's own client would only retry against a dead server

    server = single_zk.servers[0]
    server.kill()
    # Unreachable for longer than a session: the controller must stop acting...
    wait_for(
        lambda: any(
            r["controller_epoch"] == old_epoch
            for r in c[old_id].state_changes("controller_resigned")
        ),
        c.session_timeout_s + 30,
        "the controller to resign",
    )
    # ...while every broker keeps serving the metadata it last had.
    for b in (1, 2, 3):
        assert leaders_seen(c, b, "t") == expected

    server.restart()
    c.zk = type(c.zk)(connect, session_timeout_ms=10_000)
    c.zk.start()
    new_id, new_epoch = c.wait_controller(min_epoch=old_epoch + 1, timeout=90)
    assert new_epoch > old_epoch
    c.wait_registered([1, 2, 3])
    c.wait_topic_online("t")
    # Everyone agrees on the new controller again.
    for b in (1, 2, 3):
        wait_for(
            lambda b=b: metadata_of(c, b)["controller_id"] == new_id,  # type: ignore[misc]
            60,
            f"broker {b} to see the controller",
        )


def test_a_controller_reconnected_to_another_member_still_sees_brokers_leave_and_return(
    cluster_factory: ClusterFactory, zk_ensemble: zkp.LocalZooKeeper
) -> None:
    # The member the controller is connected to dies; its session moves to another member,
    # which knows none of its watches until the client re-arms them.
    connect = zkp.chroot_connect_string(zk_ensemble.connect_string, "/cluster")
    c = cluster_factory(connect=connect, zookeeper_session_timeout_ms="8000")
    controller_id, _epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_topic_online("t")
    stat = c.zk.exists("/controller")
    assert stat is not None
    member = serving_member(zk_ensemble, stat.ephemeralOwner)
    reconnections = len(c[controller_id].state_changes("zookeeper_session"))
    member.kill()
    wait_for(
        lambda: (
            [r["state"] for r in c[controller_id].state_changes("zookeeper_session")][
                reconnections:
            ][-1:]
            == ["CONNECTED"]
        ),
        60,
        "the controller to reconnect to another member",
    )
    assert c.controller() == (controller_id, _epoch)  # the session survived
    other = next(b for b in (1, 2, 3) if b != controller_id)
    c[other].kill()
    wait_for(
        lambda: any(other in r["dead"] for r in c[controller_id].state_changes("broker_change")),
        c.session_timeout_s + 30,
        f"the controller to see broker {other} leave",
    )
    c[other].start()
    wait_for(
        lambda: any(other in r["new"] for r in c[controller_id].state_changes("broker_change")),
        60,
        f"the controller to see broker {other} return",
    )
    c.wait_partitions(
        "t", lambda s: all(len(st.isr) == 3 for st in s.values()), "every ISR full", timeout=60
    )
    member.restart()
