"""Fixtures for tests with real broker processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.harness import Cluster, close_all
from zkdata.client import ZkClient

# Short sessions make failovers quick to observe; ZooKeeper's minimum here is 1 s.
FAST = {
    "zookeeper.session.timeout.ms": "3000",
    "zookeeper.connection.timeout.ms": "15000",
    "controlled.shutdown.retry.backoff.ms": "200",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    # A consumer with a group id (the tests' readers too) makes __consumer_offsets: a
    # few partitions, not Kafka's 50, keep the clusters small.
    "offsets.topic.num.partitions": "5",
}

ClusterFactory = Callable[..., Cluster]

# Lines a broker's output must never hold, whatever a test did to the cluster: a decision
# the state machines refused (the shell asked for a transition it should not have), or an
# event that raised out of its handler.
CONTROLLER_BUG_MARKERS = (
    "invalid partition state transition",
    "invalid replica state transition",
    "error processing controller event",
    "controller failover failed",
)


@pytest.fixture
def cluster_factory(zk_connect: str, tmp_path: Path) -> Iterator[ClusterFactory]:
    made: list[Cluster] = []

    def make(
        brokers: tuple[int, ...] = (1, 2, 3),
        *,
        start: bool = True,
        connect: str | None = None,
        keep_ports: bool = False,
        **overrides: str,
    ) -> Cluster:
        settings = {**FAST, **{k.replace("_", "."): v for k, v in overrides.items()}}
        c = Cluster(
            connect or zk_connect,
            tmp_path / f"cluster-{len(made)}",
            brokers,
            settings,
            keep_ports=keep_ports,
        )
        made.append(c)
        if start:
            c.start()
        return c

    yield make
    failed = close_all(made)
    problems = [
        f"broker {b.broker_id}: {line}"
        for c in made
        for b in c.brokers.values()
        if b.starts
        for line in b.output().splitlines()
        if any(marker in line for marker in CONTROLLER_BUG_MARKERS)
    ]
    failures = []
    if failed:
        failures.append("closing a cluster failed:\n" + "\n".join(failed))
    if problems:
        failures.append("the controller logged what it never should:\n" + "\n".join(problems[:20]))
    if failures:
        pytest.fail("\n".join(failures))


@pytest.fixture
def own_session(zk_connect: str) -> Iterator[ZkClient]:
    """A ZooKeeper session of the test's own, for ephemerals that go when it closes."""
    client = ZkClient(zk_connect, session_timeout_ms=10_000)
    client.start()
    try:
        yield client
    finally:
        client.close()
