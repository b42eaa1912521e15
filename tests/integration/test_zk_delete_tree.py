"""Deleting a whole tree of znodes (a cluster's chroot) against a real server: listed a
level at a time and deleted deepest first in packed multis, not one znode at a time."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from kazoo.exceptions import NotEmptyError

from cluster import zookeeper as zkp
from zkdata.client import Create, ZkClient


@pytest.fixture
def zk(own_session: ZkClient) -> ZkClient:
    """The test's own session, in its chroot (tests/integration/conftest.py)."""
    return own_session


def make_tree(zk: ZkClient, root: str, topics: int, partitions: int) -> int:
    """A cluster's shape under ``root``: topics, their partitions and each partition's
    state znode, an ephemeral among them; how many znodes that is (root included)."""
    items: list[list[Create]] = [[Create(root)], [Create(f"{root}/brokers")]]
    items.append([Create(f"{root}/brokers/topics")])
    items.append([Create(f"{root}/brokers/ids")])
    items.append([Create(f"{root}/brokers/ids/1", b"{}", ephemeral=True)])
    for t in range(topics):
        topic = f"{root}/brokers/topics/t{t}"
        items += [[Create(topic, b"{}")], [Create(f"{topic}/partitions")]]
        for p in range(partitions):
            items.append([Create(f"{topic}/partitions/{p}")])
            items.append([Create(f"{topic}/partitions/{p}/state", b"{}")])
    for (result,) in zk.multi_batched(items):
        assert not isinstance(result, Exception), result
    return len(items)


def test_a_tree_is_deleted_whole_and_counted(zk: ZkClient) -> None:
    made = make_tree(zk, "/cluster", topics=5, partitions=300)
    zk.create("/beside", b"kept")
    assert zk.delete_tree("/cluster") == made == 3_015
    assert zk.get_children("/") == ["beside"]
    assert zk.delete_tree("/cluster") == 0  # absent: nothing to do


def test_a_znode_created_below_during_the_deletion_is_deleted_by_another_pass(
    zk: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker still writing (an ISR change) creates a znode after the listing: its
    parent's delete fails NotEmpty, and the tree is listed and deleted again."""
    made = make_tree(zk, "/cluster", topics=2, partitions=3)
    listed = zk.get_children_many
    written = 0

    def listing_then_a_write(paths: Sequence[str], **kwargs: object) -> list[list[str] | None]:
        nonlocal written
        got = listed(paths, **kwargs)  # type: ignore[arg-type]
        if not any(got) and not written:  # the deepest level listed (the state znodes)
            written += 1
            zk.create("/cluster/brokers/topics/t1/partitions/2/late", b"")
        return got

    monkeypatch.setattr(zk, "get_children_many", listing_then_a_write)
    assert zk.delete_tree("/cluster") == made + 1
    assert written == 1
    assert zk.exists("/cluster") is None


def test_a_tree_that_keeps_growing_fails_with_its_error_after_the_passes(
    zk: ZkClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tree(zk, "/cluster", topics=1, partitions=1)
    listed = zk.get_children_many
    written = 0

    def always_a_new_one(paths: Sequence[str], **kwargs: object) -> list[list[str] | None]:
        nonlocal written
        got = listed(paths, **kwargs)  # type: ignore[arg-type]
        if not any(got):  # the last level listed: a znode appears below the first
            written += 1
            zk.create(f"/cluster/brokers/late{written}", b"")
        return got

    monkeypatch.setattr(zk, "get_children_many", always_a_new_one)
    with pytest.raises(NotEmptyError):
        zk.delete_tree("/cluster", passes=2)
    assert written == 2
    assert zk.exists("/cluster/brokers") is not None  # what could not go is still there


def test_delete_chroot_deletes_a_clusters_chroot_and_nothing_beside_it(
    zookeeper: zkp.ZooKeeper, zk_connect: str, zk: ZkClient
) -> None:
    make_tree(zk, "/gone", topics=3, partitions=50)
    zk.create("/kept", b"")
    zkp.delete_chroot(f"{zk_connect}/gone")
    assert zk.exists("/gone") is None
    assert zk.exists("/kept") is not None
    zkp.delete_chroot(f"{zk_connect}/gone")  # absent is fine
