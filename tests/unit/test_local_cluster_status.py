"""zkctl status's view of a local cluster (cluster/local.py status), on a fake process
table and a scripted ZooKeeper view: which broker runs, is registered, is the controller,
and what a running broker's status file says of its failed log directories (KIP-112)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster import local
from tests.unit.test_local_cluster_processes import FakeProcesses, install_fake
from tests.unit.test_local_launcher import make_cluster


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeProcesses:
    return install_fake(monkeypatch)


def _running(directory: Path, fake: FakeProcesses) -> local.LocalCluster:
    """make_cluster's two brokers, both running (pids 11 and 12)."""
    cluster = make_cluster(directory)
    for pid, b in zip((11, 12), cluster.brokers, strict=True):
        b.pid = pid
        fake.add(pid, b.properties)
    local.save(cluster)
    return cluster


def _status_file(broker: local.BrokerProcess, offline_partitions: object) -> None:
    broker.status_file.write_text(
        json.dumps(
            {"offline_log_dirs": [str(broker.data_dir)], "offline_partitions": offline_partitions}
        )
    )


def test_status_marks_the_controller_and_the_registered_brokers(
    tmp_path: Path,
    fake: FakeProcesses,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory = tmp_path / "c"
    _running(directory, fake)
    view = local.ZkView({1: 10}, 1, 3)
    monkeypatch.setattr(local, "_try_zk_view", lambda connect, timeout: (view, None))
    got = local.status(directory).to_json()
    assert (got["controller_id"], got["controller_epoch"]) == (1, 3)
    brokers = {b["id"]: b for b in got["brokers"]}
    assert brokers[1]["controller"] is True
    assert brokers[2]["controller"] is False
    assert (brokers[1]["registered"], brokers[2]["registered"]) == (True, False)
    assert brokers[1]["process"] == brokers[2]["process"] == "alive"


def test_status_of_a_stopped_cluster_does_not_ask_zookeeper(
    tmp_path: Path,
    fake: FakeProcesses,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its ZooKeeper was stopped with it (or is another's, its chroot deleted)."""
    make_cluster(tmp_path / "c", state="stopped")
    monkeypatch.setattr(local, "_try_zk_view", lambda *a: pytest.fail("asked ZooKeeper"))
    got = local.status(tmp_path / "c")
    assert got.view is None
    assert [b.registered for b in got.brokers] == [None, None]


def test_status_reports_a_running_brokers_offline_log_dirs_only(
    tmp_path: Path,
    fake: FakeProcesses,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dead broker's status file is what it said before it stopped: not now's."""
    directory = tmp_path / "c"
    cluster = _running(directory, fake)
    del fake.table[12]  # broker 2 died
    for b in cluster.brokers:
        _status_file(b, 4)
    monkeypatch.setattr(local, "_try_zk_view", lambda *a: (None, "no ZooKeeper"))
    alive, dead = local.status(directory).brokers
    assert (alive.process, alive.offline_partitions) == ("alive", 4)
    assert alive.offline_log_dirs == [str(cluster.brokers[0].data_dir)]
    assert (dead.process, dead.offline_log_dirs, dead.offline_partitions) == ("dead", [], 0)


@pytest.mark.parametrize("count", [True, "4", 4.0, None])
def test_status_ignores_an_offline_partition_count_that_is_no_integer(
    tmp_path: Path,
    fake: FakeProcesses,
    monkeypatch: pytest.MonkeyPatch,
    count: object,
) -> None:
    directory = tmp_path / "c"
    cluster = _running(directory, fake)
    _status_file(cluster.brokers[0], count)
    monkeypatch.setattr(local, "_try_zk_view", lambda *a: (None, "no ZooKeeper"))
    assert local.status(directory).brokers[0].offline_partitions == 0
