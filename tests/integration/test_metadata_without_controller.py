"""A broker that restarted while no controller can reach it knows no topic: a producer's
messages for a topic it asks about wait, rather than fail as for a deleted topic."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Message

from election.controller_election import delete_own_controller_znode, try_elect
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import producer
from tests.integration.harness import wait_for
from zkdata import paths
from zkdata.client import ZkClient

pytestmark = pytest.mark.integration

SOMEONE_ELSE = 99  # a controller id no broker has: a term held by the test's own session


def test_a_producer_waits_for_a_broker_no_controller_has_reached(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory((1,), keep_ports=True)
    c.create_topic("t", {0: (1,)})
    c.wait_topic_online("t")
    # librdkafka fails a topic's messages once it has been said not to exist for this
    # long (30 s by default): shortened so the test need not wait that out.
    p = producer(c, topic_metadata_propagation_max_ms=1000)
    errors: list[str] = []
    delivered: list[int] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err.name())
        else:
            delivered.append(msg.offset() or 0)

    p.produce("t", b"before", on_delivery=report)
    assert p.flush(60) == 0
    assert errors == []

    c[1].kill()
    # Once its session is gone, a session of the test's takes the controller's term: the
    # broker comes back, but no controller will send it an UpdateMetadata.
    wait_for(lambda: c.zk.exists(paths.CONTROLLER) is None, 30, "the controller's term ended")
    holder = ZkClient(c.zk_connect, session_timeout_ms=10_000)
    holder.start()
    try:
        assert try_elect(holder, SOMEONE_ELSE).token is not None
        c[1].start()
        c.wait_registered([1])
        for i in range(200):
            p.produce("t", f"during-{i}".encode(), on_delivery=report)
        # Longer than the broker holds a Metadata request (3 s here), and than librdkafka
        # then waits before it fails messages for a topic said not to exist.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            p.poll(0.2)
        assert errors == []
        assert delivered == [0]  # nothing could be written meanwhile
        assert delete_own_controller_znode(holder, SOMEONE_ELSE)
    finally:
        holder.close()
    c.wait_controller()
    assert p.flush(60) == 0
    assert errors == []
    assert len(delivered) == 201
