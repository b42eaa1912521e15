"""A broker's start-up as Kafka 2.8's: what it registers, and the brokers it refuses to
start (a running broker's log directories, broker id or endpoint), which stop without
harming the broker they duplicate."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from broker.state_change_log import log_files
from cluster.supervised import SupervisedBroker
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration


def logged_bytes(log_dir: Path) -> bytes:
    """A broker's state-change logs, the rolled ones first, as one."""
    return b"".join(p.read_bytes() for p in log_files(log_dir))


def test_the_registration_is_version_5_with_features(cluster_factory: ClusterFactory) -> None:
    """Kafka 2.8's BrokerInfo: version 5 with the broker's features from
    inter.broker.protocol.version 2.7-IV0 on (its default, 2.8-IV1, included); this
    broker wrote version 4."""
    c = cluster_factory((1,))
    got = c.zk.get("/brokers/ids/1")
    assert got is not None
    registration = json.loads(got[0])
    assert registration["version"] == 5, got[0]
    assert registration["features"] == {}, got[0]


def _run_to_exit(broker: SupervisedBroker, timeout: float) -> int:
    broker.start()
    try:
        return broker.wait_exit(timeout)
    finally:
        broker.kill()


def test_a_second_broker_on_a_running_brokers_log_dirs_leaves_it_alone(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """The same configuration started again (same broker.id, same log.dirs) is refused by
    the .lock, as in Kafka. Its failed start then ran a controlled shutdown in the running
    broker's name (Kafka asks only once startupComplete), which moved every leadership
    off it, and wrote its attempts into the running broker's state-change log."""
    c = cluster_factory((1, 2))
    c.create_topic("t", {0: (1, 2), 1: (1, 2), 2: (1, 2)})
    c.wait_partitions(
        "t",
        lambda s: all(x.leader == 1 and set(x.isr) == {1, 2} for x in s.values()),
        "broker 1 leads every partition with a full ISR",
    )
    log_before = logged_bytes(c[1].first_log_dir)
    dup = SupervisedBroker(
        1, tmp_path / "dup", c.zk_connect, {**c[1].overrides, "log.dirs": str(c[1].data_dir)}
    )
    code = _run_to_exit(dup, 60)
    out = dup.output()
    assert code == 1, out[-2000:]
    assert "is in use by another broker (its .lock is locked)" in out, out[-2000:]
    time.sleep(2)
    states = c.partition_states("t")
    assert all(s.leader == 1 and set(s.isr) == {1, 2} for s in states.values()), states
    assert c[1].alive()
    # Nothing of the duplicate's in the running broker's state-change log.
    assert logged_bytes(c[1].first_log_dir)[: len(log_before)] == log_before
    assert c[1].state_changes("controlled_shutdown") == []


def test_a_broker_refused_its_id_leaves_the_running_broker_electable(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """A second broker with broker.id 1 (its own log.dirs) waits for /brokers/ids/1 and
    gives up (BrokerIdInUse). Its shutdown sent ControlledShutdown(broker 1): the
    controller moved the leaderships off broker 1 and kept it among the brokers shutting
    down, so that, broker 2 lost, broker 1 (alive, in every ISR) was never elected."""
    c = cluster_factory((1, 2))
    c.create_topic("t", {0: (1, 2), 1: (2, 1)})
    c.wait_partitions(
        "t",
        lambda s: (
            s[0].leader == 1 and s[1].leader == 2 and all(set(x.isr) == {1, 2} for x in s.values())
        ),
        "broker 1 leads partition 0, broker 2 partition 1, ISRs full",
    )
    dup = SupervisedBroker(1, tmp_path / "dup", c.zk_connect, dict(c[1].overrides))
    code = _run_to_exit(dup, 90)
    assert code == 1, dup.output()[-2000:]
    assert "BrokerIdInUse" in dup.output() or "same broker.id" in dup.output()
    time.sleep(2)
    states = c.partition_states("t")
    assert states[0].leader == 1, states
    assert all(set(s.isr) == {1, 2} for s in states.values()), states
    c[2].kill()
    c.wait_partitions(
        "t",
        lambda s: all(x.leader == 1 for x in s.values()),
        "broker 1 (alive, in the ISR) leads both partitions after broker 2's loss",
        30,
    )


def test_a_broker_advertising_another_brokers_endpoint_is_refused(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """Kafka 2.8's createBrokerInfo refuses to register a host:port another broker
    registered ("Configured end points ... are already registered by broker N"). It
    registered, and clients and followers were sent to the other broker for it."""
    c = cluster_factory((1,))
    port1 = c[1].port()
    dup = SupervisedBroker(
        2,
        tmp_path / "b2",
        c.zk_connect,
        {**c[1].overrides, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port1}"},
    )
    code = _run_to_exit(dup, 60)
    assert code == 1, dup.output()[-2000:]
    assert (
        f"Configured end points 127.0.0.1:{port1} in advertised listeners are already"
        " registered by broker 1"
    ) in dup.output()
    assert c.registered() == {1}
    assert c[1].alive()


def test_a_broker_refused_its_id_starts_once_its_id_is_fixed(
    cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    """A new broker on empty disks, started by mistake with a live broker's broker.id, is
    refused its registration; it had already written that id to meta.properties, so once
    the operator fixed broker.id it refused to start ("configured broker.id 2 does not
    match broker.id 1 stored in meta.properties"). Kafka 2.8 writes meta.properties only
    once registered; so does the broker now."""
    c = cluster_factory((1,))
    newcomer = SupervisedBroker(1, tmp_path / "new", c.zk_connect, dict(c[1].overrides))
    code = _run_to_exit(newcomer, 90)
    assert code == 1, newcomer.output()[-2000:]
    assert not (newcomer.data_dir / "meta.properties").exists()
    newcomer.broker_id = 2  # the operator fixes it; the same (empty) disks
    newcomer.start()
    try:
        meta = newcomer.data_dir / "meta.properties"
        deadline = time.monotonic() + 60
        # Written right after the registration.
        while newcomer.alive() and not meta.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert newcomer.alive(), newcomer.output()[-2000:]
        assert c.registered() == {1, 2}
        assert "broker.id=2" in meta.read_text()
    finally:
        newcomer.kill()
