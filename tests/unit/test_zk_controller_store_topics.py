"""ZkControllerStore's writes of topic znodes and of /admin/reassign_partitions, on the
fake ZooKeeper: each conditional on the zkVersion just read, so an admin's write that
lands in between (Kafka 2.8's AdminZkClient add-partitions, kafka-reassign-partitions) is
read again rather than overwritten; a BADVERSION is a re-read, never an error; and
topic configs read as KafkaZkClient.getEntityConfigs does (a missing or unreadable one:
the broker defaults)."""

from __future__ import annotations

import uuid
from typing import Any, cast

import pytest
from kazoo.exceptions import NoAuthError

from controller.store import ZkControllerStore
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    TopicAssignment,
    TopicPartition,
    decode_reassignment_entries,
    decode_topic,
    encode_reassignment,
    encode_topic,
    encode_topic_config,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def cluster() -> tuple[FakeZk, ZkControllerStore, int]:
    zk = FakeZk()
    zk.ensure_paths([paths.CONTROLLER_EPOCH, "/admin", "/config/topics"])
    return zk, ZkControllerStore(cast(ZkClient, zk)), zk.nodes[paths.CONTROLLER_EPOCH][1].version


def before_the_first_write(zk: FakeZk, meanwhile: Any) -> None:
    """``meanwhile()`` runs once, between the store's read and its first fenced write."""
    real_batched, real_single = zk.multi_fenced_batched, zk.multi_fenced
    done: list[bool] = []

    def first() -> None:
        if not done:
            done.append(True)
            meanwhile()

    def batched(*args: Any, **kwargs: Any) -> Any:
        first()
        return real_batched(*args, **kwargs)

    def single(*args: Any, **kwargs: Any) -> Any:
        first()
        return real_single(*args, **kwargs)

    zk.multi_fenced_batched = batched  # type: ignore[method-assign]
    zk.multi_fenced = single  # type: ignore[method-assign]


def test_topic_configs_missing_or_unreadable_are_the_defaults() -> None:
    zk, store, _ = cluster()
    zk.put(paths.topic_config("a"), encode_topic_config({"retention.ms": "5"}))
    zk.put(paths.topic_config("b"), b"{not json")
    assert store.topic_configs(["c", "b", "a"]) == {"a": {"retention.ms": "5"}, "b": {}, "c": {}}


def test_partitions_an_admin_adds_between_the_read_and_the_write_are_kept() -> None:
    zk, store, epoch = cluster()
    path = paths.topic("t")
    zk.ensure_paths(["/brokers/topics"])
    zk.put(path, encode_topic(TopicAssignment("t", {0: (1, 2)})))
    topic_id = uuid.uuid4()
    before_the_first_write(
        zk, lambda: zk.set_data(path, encode_topic(TopicAssignment("t", {0: (1, 2), 1: (2, 1)})))
    )
    gone = store.write_topic_assignments([TopicAssignment("t", {0: (1, 2)}, topic_id)], epoch)
    assert gone == set()
    written = decode_topic("t", zk.nodes[path][0], path)
    assert written.topic_id == topic_id
    assert written.partitions == {0: (1, 2), 1: (2, 1)}


def test_a_topic_znode_deleted_before_the_write_is_skipped_and_named() -> None:
    zk, store, epoch = cluster()
    zk.ensure_paths(["/brokers/topics"])
    for topic in ("gone", "kept"):
        zk.put(paths.topic(topic), encode_topic(TopicAssignment(topic, {0: (1,)})))
    before_the_first_write(zk, lambda: zk.delete(paths.topic("gone")))
    gone = store.write_topic_assignments(
        [TopicAssignment("gone", {0: (2,)}), TopicAssignment("kept", {0: (2,)})], epoch
    )
    assert gone == {"gone"}
    assert paths.topic("gone") not in zk.nodes
    kept = decode_topic("kept", zk.nodes[paths.topic("kept")][0])
    assert kept.partitions == {0: (2,)}


def test_a_restore_is_conditional_on_the_version_read() -> None:
    zk, store, epoch = cluster()
    path = paths.topic("t")
    zk.ensure_paths(["/brokers/topics"])
    zk.put(path, encode_topic(TopicAssignment("t", {0: (1,), 1: (2,)})))
    zk.set_data(path, encode_topic(TopicAssignment("t", {0: (1,), 1: (2,), 2: (3,)})))
    assert not store.restore_topic_assignment(TopicAssignment("t", {0: (1,)}), 0, epoch)
    assert decode_topic("t", zk.nodes[path][0]).partitions == {0: (1,), 1: (2,), 2: (3,)}
    assert store.restore_topic_assignment(TopicAssignment("t", {0: (1,)}), 1, epoch)
    assert decode_topic("t", zk.nodes[path][0]).partitions == {0: (1,)}
    assert not store.restore_topic_assignment(TopicAssignment("x", {0: (1,)}), 0, epoch)


def reassignment(zk: FakeZk) -> dict[TopicPartition, tuple[int, ...]]:
    got = zk.nodes.get(paths.REASSIGN_PARTITIONS)
    assert got is not None
    requested, _ = decode_reassignment_entries(got[0])
    return {tp: tuple(r) for tp, r in requested.items()}


def test_a_request_rewritten_between_the_read_and_the_delete_is_read_again() -> None:
    zk, store, epoch = cluster()
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1, 2]}))
    before_the_first_write(
        zk,
        lambda: zk.set_data(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1, 2], T1: [3]})),
    )
    assert not store.remove_from_reassignment_znode({T0: (1, 2)}, epoch)
    assert reassignment(zk) == {T1: (3,)}


def test_a_request_for_another_target_stays() -> None:
    zk, store, epoch = cluster()
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1, 2], T1: [3]}))
    assert not store.remove_from_reassignment_znode({T0: (2, 1), T1: (3,)}, epoch)
    assert reassignment(zk) == {T0: (1, 2)}
    assert store.remove_from_reassignment_znode({T0: (1, 2)}, epoch)
    assert paths.REASSIGN_PARTITIONS not in zk.nodes


def test_unreadable_entries_are_dropped_on_request_alone() -> None:
    zk, store, epoch = cluster()
    data = (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
        b'{"topic":"t","partition":"x","replicas":[1]}]}'
    )
    zk.put(paths.REASSIGN_PARTITIONS, data)
    assert not store.remove_from_reassignment_znode({}, epoch)
    assert zk.nodes[paths.REASSIGN_PARTITIONS][0] == data
    assert not store.remove_from_reassignment_znode({}, epoch, drop_unreadable=True)
    assert reassignment(zk) == {T0: (1,)}
    assert zk.nodes[paths.REASSIGN_PARTITIONS][1].version == 1


def test_the_last_request_goes_with_the_children_put_under_the_znode() -> None:
    zk, store, epoch = cluster()
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1]}))
    zk.put(paths.REASSIGN_PARTITIONS + "/child", b"")
    zk.put(paths.REASSIGN_PARTITIONS + "/child/grandchild", b"")
    assert store.remove_from_reassignment_znode({T0: (1,)}, epoch)
    assert not [p for p in zk.nodes if p.startswith(paths.REASSIGN_PARTITIONS)]


def test_a_request_created_anew_since_the_read_is_left_for_the_controller() -> None:
    zk, store, epoch = cluster()
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1]}))
    read_czxid = zk.nodes[paths.REASSIGN_PARTITIONS][1].czxid
    zk.delete(paths.REASSIGN_PARTITIONS)
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1]}))
    assert store.remove_from_reassignment_znode({T0: (1,)}, epoch, read_czxid=read_czxid)
    assert reassignment(zk) == {T0: (1,)}


def test_deleting_a_topic_whose_znodes_are_gone_is_done() -> None:
    zk, store, epoch = cluster()
    zk.ensure_paths(["/brokers/topics", "/admin/delete_topics"])
    store.delete_topic("t", [0, 1], epoch)
    assert not [p for p in zk.nodes if p.startswith(paths.topic("t"))]


def test_a_topic_delete_failing_otherwise_than_not_empty_names_its_znode() -> None:
    zk, store, epoch = cluster()
    zk.ensure_paths([paths.partition_state("t", 0), paths.delete_topic("t")])
    real = zk.multi_fenced_batched
    state = paths.partition_state("t", 0)

    def refused(epoch_zk_version: int, items: Any, **kwargs: Any) -> Any:
        items = list(items)
        if any(getattr(op, "path", None) == state for item in items for op in item):
            return [[NoAuthError()] if item[0].path == state else [True] for item in items]
        return real(epoch_zk_version, items, **kwargs)

    zk.multi_fenced_batched = refused  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match=f"could not delete {state}: NoAuth"):
        store.delete_topic("t", [0], epoch)
    assert paths.topic("t") in zk.nodes


def test_the_request_is_read_with_its_watch_armed_again() -> None:
    """A rewrite of the controller's spends the watch its last read armed: each read here
    arms it again, as Kafka 2.8's ZooKeeperClient does for a path with a handler."""
    zk, store, epoch = cluster()
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({T0: [1], T1: [2]}))
    reads: list[tuple[str, bool]] = []
    real = zk.get

    def get(path: str, *, watch: bool = False) -> Any:
        reads.append((path, watch))
        return real(path, watch=watch)

    zk.get = get  # type: ignore[method-assign]
    assert not store.remove_from_reassignment_znode({T0: (1,)}, epoch)
    assert reads
    assert all(r == (paths.REASSIGN_PARTITIONS, True) for r in reads)
