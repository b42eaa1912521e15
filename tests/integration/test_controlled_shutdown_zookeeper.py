"""A broker stopped (SIGTERM) while its ZooKeeper is out of reach: for good, or for a blip
its session survives. Kafka's controlled shutdown reads the controller from ZooKeeper,
waiting for a connection up to zookeeper.connection.timeout.ms, then gives up and shuts
down anyway."""

from __future__ import annotations

import subprocess

import pytest

from cluster.netsplit import linked
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
