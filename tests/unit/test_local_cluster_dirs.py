"""What up may clear or reuse in a cluster directory (cluster/local.py): only what is
inside it, and nothing a cluster would write into unless cluster.json records it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from cluster import local
from cluster import zookeeper as zkp
from tests.unit.test_local_launcher import make_cluster


@pytest.mark.parametrize("leftover", ["broker-1", "broker-3", "zookeeper"])
def test_up_without_cluster_json_refuses_any_directory_it_would_write(
    tmp_path: Path, leftover: str
) -> None:
    """The last broker's directory counts as much as the first's."""
    (tmp_path / leftover).mkdir()
    with pytest.raises(local.LocalClusterError, match=f"{tmp_path / leftover} exist"):
        local._check_fresh(tmp_path, 3)


def test_up_without_cluster_json_leaves_other_directories_alone(tmp_path: Path) -> None:
    """broker-4 is no directory of a 3-broker cluster; other files are not its either."""
    (tmp_path / "broker-4").mkdir()
    (tmp_path / "notes").mkdir()
    local._check_fresh(tmp_path, 3)


def test_clearing_a_previous_clusters_data_stays_inside_its_directory(tmp_path: Path) -> None:
    """cluster.json's paths are absolute: one pointing outside the cluster's directory (a
    hand-edited file, a symlink) is never deleted."""
    directory = tmp_path / "c"
    inside = directory / "broker-1"
    outside = tmp_path / "elsewhere" / "broker-1"
    for d in (inside, outside):
        (d / "data").mkdir(parents=True)
    escaping = directory / "link"
    escaping.symlink_to(tmp_path / "elsewhere")
    local._remove_old_data([inside, outside, escaping / "broker-1"], directory, None)
    assert not inside.exists()
    assert (outside / "data").is_dir()


def test_up_in_a_moved_running_cluster_dir_refuses_when_another_cluster_took_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mv c4 c6` while c4's cluster runs, then `zkctl up` in c4 again: c4's cluster.json
    records a new cluster (another created_at), not the one still running from c6's
    record. up in c6 refuses, rather than delete the data under its running brokers."""
    old, new = tmp_path / "c4" / ".zkctl", tmp_path / "c6" / ".zkctl"
    running = make_cluster(old)
    shutil.copytree(old, new)
    successor = local.load(old)
    assert successor is not None
    successor.created_at = running.created_at + 1
    local.save(successor)
    monkeypatch.setattr(
        local, "_live_processes", lambda c: ["broker 1 (pid 4242)"] if c is not successor else []
    )

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        raise AssertionError("a ZooKeeper was started")

    monkeypatch.setattr(zkp, "provision", provision)
    with pytest.raises(local.LocalClusterError, match="recorded nowhere else"):
        local.up(new, 2)
    assert (new / "broker-1" / "data" / "demo-0").is_dir()


@pytest.mark.parametrize("chroot", ["/zkctl-0a1b2c3d", None])
def test_teardown_deletes_the_clusters_own_chroot_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chroot: str | None
) -> None:
    """On a ZooKeeper given by --zookeeper, up made a chroot of its own, which down
    deletes; without one (its own ZooKeeper) there is nothing of the kind to delete."""
    cluster = make_cluster(tmp_path / "c")
    cluster.zookeeper = {"kind": "external", "connect_string": "127.0.0.1:1"}
    cluster.chroot = chroot
    cluster.connect_string = f"127.0.0.1:1{chroot or ''}"
    deleted: list[str] = []
    monkeypatch.setattr(zkp, "delete_chroot", deleted.append)
    assert local._teardown(cluster, None) == []
    assert deleted == ([f"127.0.0.1:1{chroot}"] if chroot else [])


def test_teardown_warns_of_a_chroot_it_could_not_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = make_cluster(tmp_path / "c")
    cluster.zookeeper = {"kind": "external", "connect_string": "127.0.0.1:1"}
    cluster.chroot = "/zkctl-0a1b2c3d"
    cluster.connect_string = "127.0.0.1:1/zkctl-0a1b2c3d"

    def fail(connect: str) -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(zkp, "delete_chroot", fail)
    (warning,) = local._teardown(cluster, None)
    assert "could not delete chroot /zkctl-0a1b2c3d" in warning
    assert "delete it by hand" in warning
