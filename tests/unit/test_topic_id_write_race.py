"""A new topic without a topic id (an older tool created it) gets one from the
controller; deleted between the controller's read and that write, it is a topic being
removed (its TopicChange follows), not an error that ends the term (Kafka 2.8's
KafkaZkClient.setTopicIds ignores the results of its writes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from controller import events as ev
from controller.controller import KafkaController
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
from zkdata.client import SetData
from zkdata.znodes import TopicAssignment, TopicPartition, decode_topic, encode_topic


def without_id(zk: FakeZk, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
    zk.put(paths.topic(topic), encode_topic(TopicAssignment(topic, partitions, None)))


def remove_topic(zk: FakeZk, topic: str) -> None:
    zk.nodes.pop(paths.topic(topic), None)


def removed_after_nth_read(zk: FakeZk, topic: str, n: int) -> None:
    """``topic``'s znode removed just after the controller's ``n``-th read of it."""
    real = zk.get_many
    reads = {"n": 0}

    def get_many(path_list: Iterable[str], *a: Any, **kw: Any) -> Any:
        path_list = list(path_list)
        out = real(path_list, *a, **kw)
        if paths.topic(topic) in path_list:
            reads["n"] += 1
            if reads["n"] == n:
                remove_topic(zk, topic)
        return out

    zk.get_many = get_many  # type: ignore[method-assign]


def removed_before_the_write(zk: FakeZk, topic: str) -> None:
    """``topic``'s znode removed after the controller's last read, just before its write."""
    real: Callable[..., Any] = zk.multi_fenced_batched

    def multi_fenced_batched(epoch_zk_version: int, items: Iterable[Any], **kw: Any) -> Any:
        items = list(items)
        if any(op.path == paths.topic(topic) for item in items for op in item):
            remove_topic(zk, topic)
        return real(epoch_zk_version, items, **kw)

    zk.multi_fenced_batched = multi_fenced_batched  # type: ignore[method-assign]


def topic_change(zk: FakeZk, c: KafkaController) -> None:
    process(c, ev.TopicChange())
    drain(c)


def test_a_new_topic_removed_after_it_was_read_is_skipped() -> None:
    """The reviewer's: the write's re-read found no znode and raised; the event ended
    the term ("error processing TopicChange") and a failover followed."""
    zk, c = cluster()
    without_id(zk, "new", {0: (1, 2)})
    without_id(zk, "other", {0: (2, 3)})
    removed_after_nth_read(zk, "new", 1)
    topic_change(zk, c)
    assert c.is_active
    assert c.resignations == 0
    assert "new" not in c.ctx.all_topics
    assert "new" not in c.ctx.topic_ids
    assert TopicPartition("new", 0) not in set(c.ctx.all_partitions())
    # the other topic of the batch is created, with the id written
    other = decode_topic("other", zk.nodes[paths.topic("other")][0])
    assert other.topic_id is not None
    assert c.ctx.topic_ids["other"] == other.topic_id
    assert TopicPartition("other", 0) in set(c.ctx.all_partitions())


def test_a_new_topic_removed_just_before_the_write_is_skipped() -> None:
    """Gone between the write's re-read and its multi: NoNode, which raised too."""
    zk, c = cluster()
    without_id(zk, "new", {0: (1, 2)})
    removed_before_the_write(zk, "new")
    topic_change(zk, c)
    assert c.is_active
    assert c.resignations == 0
    assert "new" not in c.ctx.all_topics
    assert "new" not in c.ctx.topic_ids


def test_a_removed_topic_created_again_is_read_as_new() -> None:
    """Nothing of the skipped topic stays in the context: the TopicChange of its creation
    again reads it as a new topic (a half-added one would be taken as known)."""
    zk, c = cluster()
    without_id(zk, "new", {0: (1, 2)})
    removed_after_nth_read(zk, "new", 1)
    topic_change(zk, c)
    without_id(zk, "new", {0: (3, 1)})
    topic_change(zk, c)
    assert c.resignations == 0
    assert c.ctx.assignments["new"][0].replicas == (3, 1)
    assert c.ctx.topic_ids["new"] == decode_topic("new", zk.nodes[paths.topic("new")][0]).topic_id


def test_a_failover_skips_a_topic_removed_before_its_id_was_written() -> None:
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    add_topic(zk, "t", {0: (2, 3, 1)})
    without_id(zk, "old", {0: (1, 2)})
    removed_after_nth_read(zk, "old", 1)
    c = start_controller(zk)
    assert c.is_active
    assert c.resignations == 0
    assert "old" not in c.ctx.all_topics
    assert "t" in c.ctx.all_topics


def test_a_reassignment_whose_topic_was_removed_goes_on() -> None:
    """The same skip for a reassignment's rewrite of its topic's znode (Kafka 2.8's
    updateReplicaAssignmentForPartition throws on NoNode): the topic, removed under it with
    its partitions' znodes, leaves at its TopicChange and the term goes on."""
    zk, c = cluster()
    real: Callable[..., Any] = zk.multi_fenced_batched

    def multi_fenced_batched(epoch_zk_version: int, items: Iterable[Any], **kw: Any) -> Any:
        items = list(items)
        if any(isinstance(op, SetData) and op.path == paths.topic("t") for i in items for op in i):
            for path in [p for p in zk.nodes if p.startswith(paths.topic("t"))]:
                del zk.nodes[path]
        return real(epoch_zk_version, items, **kw)

    zk.multi_fenced_batched = multi_fenced_batched  # type: ignore[method-assign]
    request = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}
    zk.put(paths.REASSIGN_PARTITIONS, json.dumps(request).encode())
    process(c, ev.PartitionReassignment())
    drain(c)
    zk.multi_fenced_batched = real  # type: ignore[method-assign]
    topic_change(zk, c)
    assert c.is_active
    assert c.resignations == 0
    assert "t" not in c.ctx.all_topics
