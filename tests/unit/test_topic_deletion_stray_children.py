"""A topic deletion whose topic znode, config or deletion request has a child someone put
under it (NotEmpty). Kafka 2.8's ControllerDeletionClient.deleteTopic deletes
/brokers/topics/<t> with deleteRecursive (its children go too), then the config and the
request, ignoring those deletes' results (only the /controller_epoch check failing
throws): the deletion completes and the controller goes on. Here the deletion's one
fenced multi failed NotEmpty, which ended the term: the failover resumed the deletion,
failed again, and the epoch climbed every round with the topic never deleted."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from controller import events as ev
from controller.store import MAX_STRAYS_SAID, ZkControllerStore, said_of, stray_topic_znodes
from tests.unit.fake_cluster import (
    Controller,
    ZooKeeperData,
    cluster,
    drain,
    empty_cluster,
    process,
    register,
    start_controller,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import ControllerMovedError, Delete, WriteOp

CONFIG = b'{"version":1,"config":{}}'

STRAYS: dict[str, Callable[[], str]] = {
    "delete_request": lambda: paths.delete_topic("t") + "/stray",
    "topic_config": lambda: paths.topic_config("t") + "/stray",
    "topic_znode": lambda: paths.topic("t") + "/stray",
    "partition_state": lambda: paths.partition_state("t", 0) + "/stray",
    "deeper": lambda: paths.topic_config("t") + "/a/b",
}


def _put_with_parents(zk: FakeZk, path: str) -> None:
    parts = path.split("/")
    for i in range(2, len(parts) + 1):
        p = "/".join(parts[:i])
        if p not in zk.nodes:
            zk.put(p, b"")


def _znodes_of_t(zk: FakeZk) -> list[str]:
    roots = (paths.topic("t"), paths.topic_config("t"), paths.delete_topic("t"))
    return [p for p in zk.nodes if any(p == r or p.startswith(r + "/") for r in roots)]


def _deleted_in_one_term(data: ZooKeeperData) -> None:
    """The controller deletes topic t (its replicas answering StopReplica) without
    resigning or moving the epoch, and nothing of t is left in ZooKeeper."""
    with Controller(data).elect() as c:
        epoch = data.zk.nodes[paths.CONTROLLER_EPOCH][0]
        c.answer_stop_replicas("t")
        c.drain()
        assert c.controller.is_active
        assert c.controller.resignations == 0
        assert data.zk.nodes[paths.CONTROLLER_EPOCH][0] == epoch
        assert "t" not in c.controller.ctx.all_topics
    assert _znodes_of_t(data.zk) == []


@pytest.mark.parametrize("stray", list(STRAYS.values()), ids=list(STRAYS))
def test_a_topic_deletion_with_a_stray_child_completes(stray: Callable[[], str]) -> None:
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    data.zk.put(paths.topic_config("t"), CONFIG)
    data.request_deletion("t")
    _put_with_parents(data.zk, stray())
    _deleted_in_one_term(data)


def _recording_deletes(zk: FakeZk) -> list[list[str]]:
    """Each multi's deleted paths, in the order the multis were applied."""
    calls: list[list[str]] = []
    multi = zk.multi

    def recorded(ops: Sequence[WriteOp], *, session: int | None = None) -> list[Any]:
        calls.append([op.path for op in ops if isinstance(op, Delete)])
        return multi(ops, session=session)

    zk.multi = recorded  # type: ignore[method-assign]
    return calls


def test_the_store_deletes_every_child_the_topic_before_its_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    zk, c = cluster(topics={"t": {0: (2, 3, 1), 1: (3, 1, 2)}})
    zk.put(paths.topic_config("t"), CONFIG)
    zk.put(paths.delete_topic("t"), b"")
    strays = [f() for f in STRAYS.values()] + [paths.partition("t", 1) + "/x/y"]
    for s in strays:
        _put_with_parents(zk, s)
    calls = _recording_deletes(zk)
    with caplog.at_level(logging.WARNING, logger="controller.store"):
        c.store.delete_topic("t", [0, 1], c.ctx.epoch_zk_version)
    assert _znodes_of_t(zk) == []
    deleted = [p for call in calls for p in call]
    for s in strays:  # each said, once
        assert sum(s in r.getMessage() for r in caplog.records) == 1, (s, caplog.text)

    def call_of(path: str) -> int:
        return next(i for i, call in enumerate(calls) if path in call)

    # Architecture item 29: no deletion cut short leaves a request naming no topic.
    assert call_of(paths.topic("t")) == call_of(paths.delete_topic("t"))
    assert call_of(paths.topic("t")) == call_of(paths.topic_config("t"))
    # Leaves first: ZooKeeper deletes no znode with children.
    assert deleted.index(paths.partition_state("t", 0)) < deleted.index(paths.partition("t", 0))
    assert deleted.index(paths.partition("t", 0)) < deleted.index(paths.topic_partitions("t"))


def test_a_child_put_under_the_request_meanwhile_is_deleted_too() -> None:
    """A child created after the children were read (the multi fails NotEmpty) is read
    and deleted in the next round."""
    zk, c = cluster()
    zk.put(paths.topic_config("t"), CONFIG)
    zk.put(paths.delete_topic("t"), b"")
    multi = zk.multi
    raced: list[str] = []

    def racing(ops: Sequence[WriteOp], *, session: int | None = None) -> list[Any]:
        if not raced and any(getattr(op, "path", None) == paths.topic("t") for op in ops):
            raced.append(paths.delete_topic("t") + "/late")
            zk.put(raced[0], b"")
        return multi(ops, session=session)

    zk.multi = racing  # type: ignore[method-assign]
    c.store.delete_topic("t", [0], c.ctx.epoch_zk_version)
    assert raced
    assert _znodes_of_t(zk) == []


def test_a_topic_deletion_is_still_fenced() -> None:
    zk, _ = cluster()
    zk.put(paths.topic_config("t"), CONFIG)
    zk.put(paths.delete_topic("t"), b"")
    for f in STRAYS.values():
        _put_with_parents(zk, f())
    before = sorted(_znodes_of_t(zk))
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    stale = zk.nodes[paths.CONTROLLER_EPOCH][1].version - 1
    with pytest.raises(ControllerMovedError):
        store.delete_topic("t", [0], stale)
    assert sorted(_znodes_of_t(zk)) == before  # not even a child deleted


def test_an_unreadable_topics_deletion_with_a_stray_child_completes() -> None:
    """The deletion of a topic whose znode cannot be read goes straight to its znodes."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    zk.put(paths.topic("t"), b"garbage")
    zk.put(paths.topic("t") + "/stray", b"")
    zk.put(paths.delete_topic("t"), b"")
    zk.put(paths.delete_topic("t") + "/stray", b"")
    c = start_controller(zk)  # its failover resumes the deletion
    process(c, ev.TopicDeletion())
    drain(c)
    assert c.is_active
    assert c.resignations == 0
    assert _znodes_of_t(zk) == []


def test_stray_topic_znodes_are_those_a_controller_never_writes() -> None:
    own = [
        paths.topic_partitions("t"),
        paths.partition("t", 0),
        paths.partition_state("t", 0),
        paths.partition("t", 12),
    ]
    strays = [
        paths.topic("t") + "/stray",
        paths.topic_partitions("t") + "/01",
        paths.topic_partitions("t") + "/x",
        paths.partition_state("t", 0) + "/stray",
        paths.partition("t", 0) + "/other",
        paths.topic_config("t") + "/a",
        paths.delete_topic("t") + "/b",
        # Another topic's partitions are no partitions of t's.
        paths.topic_partitions("t2"),
    ]
    assert stray_topic_znodes("t", own + strays) == strays


def _chain(zk: FakeZk, path: str, depth: int) -> str:
    """A chain of ``depth`` children under ``path``; the deepest's path."""
    for _ in range(depth):
        path += "/a"
        zk.put(path, b"")
    return path


def test_a_stray_chain_deeper_than_the_recursion_limit_is_deleted() -> None:
    """The children were read by recursion, once a level: a chain deeper than Python's
    limit raised RecursionError on the event thread, the term ended, and the failover
    resumed the deletion and failed again (the epoch climbing, the topic never deleted).
    Kafka 2.8's deleteRecursive deletes it."""
    data = ZooKeeperData()
    data.topic("t", {0: (1, 2, 3)})
    data.zk.put(paths.topic_config("t"), CONFIG)
    data.request_deletion("t")
    _chain(data.zk, paths.delete_topic("t"), 1200)
    _chain(data.zk, paths.partition_state("t", 0), 1200)
    _deleted_in_one_term(data)


def test_a_warning_names_the_first_strays_and_counts_the_others() -> None:
    strays = [f"/config/topics/t/{n}" for n in range(MAX_STRAYS_SAID + 5)]
    assert said_of(strays[:2]) == "'/config/topics/t/0', '/config/topics/t/1'"
    said = said_of(strays)
    assert said.endswith("'/config/topics/t/19' and 5 more")
    assert "/20'" not in said
    assert said_of(["/x/" + "a" * 300]) == repr("/x/" + "a" * 197 + "...")


def test_the_znodes_of_a_deleted_topic_are_read_a_level_at_a_time() -> None:
    """One read (pipelined multiReads) a level of the three subtrees, not a round trip a
    znode (2N+2 for N partitions, one after the other)."""
    partitions = {p: (1, 2, 3) for p in range(100)}
    zk, c = cluster(topics={"t": partitions})
    zk.put(paths.topic_config("t"), CONFIG)
    zk.put(paths.delete_topic("t"), b"")
    single: list[str] = []
    levels: list[int] = []
    get_children, get_children_many = zk.get_children, zk.get_children_many

    def one(path: str, *, watch: bool = False) -> list[str] | None:
        single.append(path)
        return get_children(path, watch=watch)

    def many(
        path_list: Sequence[str], *, watch: bool = False, batch: int = 0
    ) -> list[list[str] | None]:
        levels.append(len(path_list))
        return get_children_many(path_list, watch=watch, batch=batch)

    zk.get_children = one  # type: ignore[method-assign]
    zk.get_children_many = many  # type: ignore[method-assign, assignment]  # a Sequence, as ZkClient's
    c.store.delete_topic("t", list(partitions), c.ctx.epoch_zk_version)
    assert _znodes_of_t(zk) == []
    # The three; partitions; the partitions; their states.
    assert (single, levels) == ([], [3, 1, 100, 100])
