"""A broker stopped (SIGTERM) while its ZooKeeper is out of reach: for good, or for a blip
its session survives. Kafka's controlled shutdown reads the controller from ZooKeeper,
waiting for a connection up to zookeeper.connection.timeout.ms, then gives up and shuts
down anyway."""

from __future__ import annotations

import subprocess
import threading

import pytest

from cluster.netsplit import linked
from cluster.supervised import wait_for
from storage.log_manager import CLEAN_SHUTDOWN_FILE
from tests.integration.conftest import ClusterFactory

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_controlled_shutdown_is_bounded_when_zookeeper_is_gone(
    cluster_factory: ClusterFactory,
) -> None:
    """The link is cut just before SIGTERM, for good: the controlled shutdown's read of
    /controller (a kazoo get, no timeout) waited for a reconnection that never came, so
    the broker never exited nor closed its logs. Bound: one attempt's ZooKeeper read
    (zookeeper.connection.timeout.ms, 12 s), then the rest of the shutdown."""
    c = cluster_factory(
        (1, 2),
        start=False,
        zookeeper_session_timeout_ms="12000",
        zookeeper_connection_timeout_ms="12000",
        request_timeout_ms="5000",
    )
    with linked(c) as links:
        c.start()
        c.create_topic("t", {0: (1, 2)})
        c.wait_partitions(
            "t", lambda s: s[0].leader == 1 and set(s[0].isr) == {1, 2}, "broker 1 leads"
        )
        links[1].cut()  # kazoo still takes its connection for alive for a while
        c[1].terminate()
        try:
            code: int | None = c[1].wait_exit(90)
        except subprocess.TimeoutExpired:
            code = None
        tail = "\n".join(c[1].output().splitlines()[-15:])
        assert code is not None, f"broker 1 still running 90 s after SIGTERM:\n{tail}"
        assert code == 0, tail
        assert (c[1].data_dir / CLEAN_SHUTDOWN_FILE).exists(), tail
        attempts = c[1].state_changes("controlled_shutdown")
        assert len(attempts) == 1, attempts  # given up, as Kafka's getControllerId ends it


def test_sigterm_during_a_zookeeper_blip_still_moves_the_leaderships(
    cluster_factory: ClusterFactory,
) -> None:
    """SIGTERM while the broker's connection is down and its session alive: the controlled
    shutdown was skipped (the broker checked that it was connected), so its partitions
    stayed led by a broker gone until its session expired. Kafka waits for the
    connection (up to zookeeper.connection.timeout.ms) and moves them."""
    c = cluster_factory(
        (1, 2),
        start=False,
        zookeeper_session_timeout_ms="12000",
        zookeeper_connection_timeout_ms="12000",
    )
    with linked(c) as links:
        c.start()
        c.create_topic("t", {0: (1, 2), 1: (1, 2)})
        c.wait_partitions(
            "t",
            lambda s: all(x.leader == 1 and set(x.isr) == {1, 2} for x in s.values()),
            "broker 1 leads, ISRs full",
        )
        links[1].cut()
        wait_for(
            lambda: (c[1].status() or {}).get("zookeeper_connected") is False or None,
            30,
            "broker 1 sees its ZooKeeper connection lost",
        )
        c[1].terminate()
        heal = threading.Timer(1.0, links[1].heal)  # well within the session
        heal.start()
        try:
            code = c[1].wait_exit(90)
        finally:
            heal.cancel()
        tail = "\n".join(c[1].output().splitlines()[-15:])
        assert code == 0, tail
        attempts = c[1].state_changes("controlled_shutdown")
        assert attempts, f"no controlled shutdown was attempted:\n{tail}"
        assert attempts[-1]["remaining"] == 0, attempts
        states = c.partition_states("t")
        assert all(s.leader == 2 for s in states.values()), states
