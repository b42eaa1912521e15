"""A notification znode the controller cannot delete (a child an operator or a tool put
under it: NotEmpty). Kafka 2.8's deleteIsrChangeNotifications, deleteLogDirEventNotifications
and deleteTopicDeletions ignore the deletes' results (only the /controller_epoch check
failing throws), so the controller works on. Raising made every failover fail and resign:
the epoch climbed and no broker stayed controller."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from controller import events as ev
from controller.store import ZkControllerStore
from tests.unit.fake_cluster import (
    add_topic,
    cluster,
    drain,
    empty_cluster,
    process,
    register,
    start_controller,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ControllerMovedError
from zkdata.znodes import (
    TopicPartition,
    encode_log_dir_event,
    encode_partition_list,
    encode_reassignment,
)

ISR_CHANGE = b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'


def _three_brokers() -> FakeZk:
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    add_topic(zk, "t", {0: (2, 3, 1)})
    return zk


def _epoch(zk: FakeZk) -> int:
    return int(zk.nodes[paths.CONTROLLER_EPOCH][0])


def _put_with_child(zk: FakeZk, path: str, data: bytes) -> None:
    zk.put(path, data)
    zk.put(path + "/stray", b"")


@pytest.mark.parametrize(
    ("path", "data", "config"),
    [
        (paths.isr_change_notification("isr_change_0000000001"), ISR_CHANGE, {}),
        (
            paths.log_dir_event_notification("log_dir_event_0000000001"),
            encode_log_dir_event(2),
            {},
        ),
        # A deletion request removed at failover since topic deletion is disabled.
        (paths.delete_topic("t"), b"", {"delete_topic_enable": False}),
    ],
    ids=["isr_change", "log_dir_event", "delete_topics"],
)
def test_failover_survives_an_undeletable_notification(
    path: str, data: bytes, config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    zk = _three_brokers()
    _put_with_child(zk, path, data)
    with caplog.at_level(logging.WARNING, logger="controller.store"):
        c = start_controller(zk, **config)
        epochs = [_epoch(zk)]
        for _ in range(2):  # /controller deleted again: the failover runs once more
            process(c, ev.Reelect())
            drain(c)
            epochs.append(_epoch(zk))
    assert c.is_active, f"no controller: every failover resigned (epochs {epochs})"
    assert c.resignations == 0
    assert path in zk.nodes  # left, with its child
    warned = [r.getMessage() for r in caplog.records if path in r.getMessage()]
    assert len(warned) == 1, warned  # once, naming the znode, not at every failover


def test_isr_change_event_survives_an_undeletable_notification(
    caplog: pytest.LogCaptureFixture,
) -> None:
    zk, c = cluster()
    stuck = paths.isr_change_notification("isr_change_0000000001")
    _put_with_child(zk, stuck, ISR_CHANGE)
    with caplog.at_level(logging.WARNING, logger="controller.store"):
        for n in (2, 3):
            zk.put(paths.isr_change_notification(f"isr_change_000000000{n}"), ISR_CHANGE)
            process(c, ev.IsrChangeNotification())
            assert c.is_active
            assert c.resignations == 0
            # The others are deleted as ever; the one with a child is left.
            assert zk.children(paths.ISR_CHANGE_NOTIFICATION) == ["isr_change_0000000001"]
    warned = [r.getMessage() for r in caplog.records if stuck in r.getMessage()]
    assert len(warned) == 1, warned  # once, not at every ISR change


def test_log_dir_event_survives_an_undeletable_notification() -> None:
    zk, c = cluster()
    stuck = paths.log_dir_event_notification("log_dir_event_0000000001")
    _put_with_child(zk, stuck, encode_log_dir_event(2))
    process(c, ev.LogDirEventNotification())
    assert c.is_active
    assert c.resignations == 0
    assert zk.children(paths.LOG_DIR_EVENT_NOTIFICATION) == ["log_dir_event_0000000001"]


def test_notification_deletes_are_still_fenced() -> None:
    zk, _ = cluster()
    n = paths.isr_change_notification("isr_change_0000000001")
    zk.put(n, ISR_CHANGE)
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    stale = zk.nodes[paths.CONTROLLER_EPOCH][1].version - 1
    with pytest.raises(ControllerMovedError):
        store.delete_notifications([n], stale)
    assert n in zk.nodes


@pytest.mark.parametrize(
    "data",
    [encode_partition_list([TopicPartition("t", 0)]), b"garbage"],
    ids=["request", "malformed"],
)
def test_failover_deletes_a_preferred_election_request_with_a_child(data: bytes) -> None:
    # Kafka deletes /admin/preferred_replica_election recursively (deleteRecursive).
    zk = _three_brokers()
    _put_with_child(zk, paths.PREFERRED_REPLICA_ELECTION, data)
    c = start_controller(zk)
    assert c.is_active
    assert c.resignations == 0
    assert paths.PREFERRED_REPLICA_ELECTION not in zk.nodes
    assert paths.PREFERRED_REPLICA_ELECTION + "/stray" not in zk.nodes


def test_failover_deletes_a_malformed_reassignment_with_a_child() -> None:
    zk = _three_brokers()
    _put_with_child(zk, paths.REASSIGN_PARTITIONS, b"garbage")
    c = start_controller(zk)
    assert c.is_active
    assert c.resignations == 0
    assert paths.REASSIGN_PARTITIONS not in zk.nodes


def test_a_finished_reassignment_znode_with_a_child_is_deleted() -> None:
    zk, _ = cluster()
    tp = TopicPartition("t", 0)
    _put_with_child(zk, paths.REASSIGN_PARTITIONS, encode_reassignment({tp: (2, 3, 1)}))
    zk.put(paths.REASSIGN_PARTITIONS + "/stray/deeper", b"")
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    version = zk.nodes[paths.CONTROLLER_EPOCH][1].version
    assert store.remove_from_reassignment_znode({tp: (2, 3, 1)}, version)
    assert not [p for p in zk.nodes if p.startswith(paths.REASSIGN_PARTITIONS)]


@pytest.mark.parametrize(
    "path", [paths.PREFERRED_REPLICA_ELECTION, paths.REASSIGN_PARTITIONS], ids=["ple", "reassign"]
)
def test_failover_deletes_an_admin_znode_with_a_chain_deeper_than_the_recursion_limit(
    path: str,
) -> None:
    """Its subtree was read by recursion: RecursionError, the failover failed, for good."""
    zk = _three_brokers()
    zk.put(path, b"garbage")
    deep = path
    for _ in range(1200):
        deep += "/a"
        zk.put(deep, b"")
    c = start_controller(zk)
    assert c.is_active
    assert c.resignations == 0
    assert not [p for p in zk.nodes if p.startswith(path)]


def test_a_finished_reassignment_znode_with_a_deep_chain_is_deleted() -> None:
    zk, _ = cluster()
    tp = TopicPartition("t", 0)
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({tp: (2, 3, 1)}))
    deep = paths.REASSIGN_PARTITIONS
    for _ in range(1200):
        deep += "/a"
        zk.put(deep, b"")
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    version = zk.nodes[paths.CONTROLLER_EPOCH][1].version
    assert store.remove_from_reassignment_znode({tp: (2, 3, 1)}, version)
    assert not [p for p in zk.nodes if p.startswith(paths.REASSIGN_PARTITIONS)]
