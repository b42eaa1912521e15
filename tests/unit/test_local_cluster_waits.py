"""What up and broker start wait for (cluster/local.py), on a scripted ZooKeeper view:
no process or ZooKeeper is started here."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from cluster import local
from tests.unit.test_local_launcher import make_cluster


class _Zk:
    def close(self, **_kwargs: Any) -> None:
        pass


def _script(monkeypatch: pytest.MonkeyPatch, views: list[local.ZkView]) -> list[local.ZkView]:
    """ZooKeeper answers with ``views`` in turn (the last one from then on); the brokers
    run. Returns the views read so far."""
    read: list[local.ZkView] = []

    def read_zk_view(_zk: object) -> local.ZkView:
        view = views[min(len(read), len(views) - 1)]
        read.append(view)
        return view

    monkeypatch.setattr(local, "_zk_client", lambda *a, **k: _Zk())
    monkeypatch.setattr(local, "read_zk_view", read_zk_view)
    monkeypatch.setattr(local, "_gone", lambda b: False)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    return read


def test_broker_start_waits_for_a_new_registration_not_the_killed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed broker's /brokers/ids/<id> stays until its session expires: the started
    one is registered once the znode is another (a new czxid: its broker epoch)."""
    cluster = make_cluster(tmp_path / "c")
    stale = local.ZkView({1: 100, 2: 50}, 1, 1)
    fresh = local.ZkView({1: 100, 2: 120}, 1, 1)
    read = _script(monkeypatch, [stale, stale, fresh])
    local._wait_registered(cluster, cluster.brokers[1], 0, 50, 600.0, None)
    assert read == [stale, stale, fresh]


def test_broker_start_without_an_old_registration_takes_the_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = make_cluster(tmp_path / "c")
    none = local.ZkView({1: 100}, 1, 1)
    registered = local.ZkView({1: 100, 2: 120}, 1, 1)
    read = _script(monkeypatch, [none, registered])
    local._wait_registered(cluster, cluster.brokers[1], 0, None, 600.0, None)
    assert read == [none, registered]


def test_up_waits_for_a_controller_among_its_brokers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """up returns once every broker is registered and /controller names one of them
    (KafkaController elected), with that controller: neither alone is enough."""
    cluster = make_cluster(tmp_path / "c")
    offsets = {1: 0, 2: 0}
    views = [
        local.ZkView({1: 10}, 1, 1),  # a controller, but broker 2 not yet registered
        local.ZkView({1: 10, 2: 11}, None, 1),  # every broker, but no controller (resigned)
        local.ZkView({1: 10, 2: 11}, 2, 2),
    ]
    read = _script(monkeypatch, views)
    got = local._wait_cluster_ready(cluster, offsets, time.monotonic() + 600.0, 600.0, None)
    assert (got.controller_id, got.controller_epoch) == (2, 2)
    assert read == views


def test_a_broker_whose_port_was_taken_is_tried_on_three_ports_in_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its port taken between choosing and binding it, a broker is relaunched on a new
    port: PORT_ATTEMPTS ports in all (its first included), then up gives up, saying so."""
    cluster = make_cluster(tmp_path / "c")
    broker = cluster.brokers[0]
    launched: list[int] = []
    new_ports = iter(range(9101, 9200))

    def launch(b: local.BrokerProcess, _python: str) -> int:
        launched.append(b.port)
        offset = b.out_file.stat().st_size
        with b.out_file.open("a") as out:
            out.write("OSError: [Errno 98] Address already in use\n")
        return offset

    monkeypatch.setattr(local, "free_ports", lambda n: [next(new_ports) for _ in range(n)])
    monkeypatch.setattr(local, "write_properties", lambda *a: None)
    monkeypatch.setattr(local, "_launch", launch)
    broker.out_file.write_text("OSError: [Errno 98] Address already in use\n")
    attempts: dict[int, int] = {}
    offset = 0
    for _ in range(local.PORT_ATTEMPTS - 1):
        got = local._exited_during_startup(cluster, broker, offset, attempts)
        assert got is not None
        offset = got
    assert launched == [9101, 9102]
    with pytest.raises(local.LocalClusterError, match=r"port already in use \(3 ports tried\)"):
        local._exited_during_startup(cluster, broker, offset, attempts)
    assert launched == [9101, 9102]
    assert broker.address == "127.0.0.1:9102"


def test_a_broker_that_exited_for_another_reason_is_not_relaunched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = make_cluster(tmp_path / "c")
    broker = cluster.brokers[0]
    broker.out_file.write_text("old run: Address already in use\n")
    offset = broker.out_file.stat().st_size
    with broker.out_file.open("a") as out:
        out.write("ConfigError: bad log.dirs\n")
    monkeypatch.setattr(local, "_launch", lambda *a: pytest.fail(f"launched {a}"))
    with pytest.raises(local.LocalClusterError, match="during start-up") as raised:
        local._exited_during_startup(cluster, broker, offset, {})
    assert "ConfigError: bad log.dirs" in str(raised.value)
    assert "old run" not in str(raised.value)


def test_broker_start_of_a_broker_whose_port_is_taken_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """broker start reuses the broker's port (its clients know it): when another process
    took it meanwhile the broker exits, and the error names the port."""
    cluster = make_cluster(tmp_path / "c")
    broker = cluster.brokers[1]
    broker.out_file.write_text("OSError: [Errno 98] Address already in use\n")
    monkeypatch.setattr(local, "_gone", lambda b: True)
    with pytest.raises(local.LocalClusterError) as raised:
        local._wait_registered(cluster, broker, 0, None, 600.0, None)
    assert f"(port {broker.port} is in use by another process)" in str(raised.value)
    assert "during start-up" in str(raised.value)


@pytest.mark.parametrize(
    "handle",
    [
        {"kind": "external", "connect_string": "127.0.0.1:1"},
        {"kind": "container", "connect_string": "127.0.0.1:1", "container_id": "0123456789ab"},
    ],
)
def test_broker_start_on_a_zookeeper_not_its_own_starts_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handle: dict[str, str]
) -> None:
    """Only a local ZooKeeper's pids are the cluster's to check: a container's or a given
    one's are not, the broker is started (and its registration waited for)."""
    directory = tmp_path / "c"
    cluster = make_cluster(directory)
    cluster.zookeeper = handle
    local.save(cluster)
    launched: list[int] = []

    def launch(b: local.BrokerProcess, _python: str) -> int:
        launched.append(b.id)
        b.pid = 4242
        return 0

    monkeypatch.setattr(local, "_launch", launch)
    monkeypatch.setattr(local, "_try_zk_view", lambda *a: (None, "no ZooKeeper"))
    got = local.broker_start(directory, 2, wait=False)
    assert (got.id, got.pid, launched) == (2, 4242, [2])
