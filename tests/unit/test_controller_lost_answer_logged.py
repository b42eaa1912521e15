"""A partition state the controller wrote whose answer a lost connection took is logged
(docs/state-change-log.md: each write to a partition's state znode is in the logs once).

Over an in-memory ZooKeeper with a real state-change log: ZooKeeper applies a controller's
partition-state multi and the answer never comes (ConnectionLoss), so the on_written /
on_created callbacks that log each write never run, and the controller resigns (item 35
of docs/architecture.md). Before its next election, or on reconnection, it reads those
partitions back and logs each write found landed, once, as the broker's ISR writer logs
its own such writes ("found written, its answer lost")."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss

from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller.controller import KafkaController
from controller.state_machines import FOUND_WRITTEN
from controller.store import ZkControllerStore
from tests.unit.fake_cluster import (
    add_topic,
    broker_session,
    drain,
    empty_cluster,
    process,
    queued,
    register,
    start_controller,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import WriteOp
from zkdata.znodes import (
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
    encode_topic,
    new_topic_id,
)

Mode = str  # "lost": applied, its answer lost; "down": never applied, no answer


def active_now(c: KafkaController) -> bool:
    """Whether ``c`` is the controller now (a call: mypy keeps no narrowing of it)."""
    return c.is_active


def lose_next_state_write(zk: FakeZk, mode: Mode = "lost", answered: int = 0) -> list[bool]:
    """The next fenced multi batch writing partition states: its first ``answered`` items
    applied and answered, the rest applied (``lost``) or not (``down``), and ConnectionLoss
    raised instead of their answers. The list returned gets True once that happened."""
    real = zk.multi_fenced_batched
    done: list[bool] = []

    def write(epoch_zk_version: int, items: Iterable[Sequence[WriteOp]], **kw: Any) -> Any:
        items = list(items)
        if done or not any(getattr(op, "path", "").endswith("/state") for i in items for op in i):
            return real(epoch_zk_version, items, **kw)
        done.append(True)
        real(epoch_zk_version, items[:answered], **kw)
        if mode == "lost":
            real(epoch_zk_version, items[answered:])  # ZooKeeper applies them ...
        raise ConnectionLoss()  # ... and their answers never come back

    zk.multi_fenced_batched = write  # type: ignore[method-assign]
    return done


def lines(tmp_path: Path) -> list[dict[str, Any]]:
    text = (tmp_path / "state-change.log").read_text()
    return [json.loads(line) for line in text.splitlines()]


def state_lines(tmp_path: Path, topic: str) -> list[dict[str, Any]]:
    return [r for r in lines(tmp_path) if r["event"] == "partition_state" and r["topic"] == topic]


def stored(zk: FakeZk, topic: str, partition: int) -> tuple[LeaderAndIsr, int]:
    path = paths.partition_state(topic, partition)
    data, stat = zk.nodes[path]
    state = decode_partition_state(path, data, stat.version)
    return state.leader_and_isr, state.controller_epoch


def reelect(c: KafkaController) -> None:
    for _ in range(5):
        if c.is_active:
            return
        process(c, ev.Reelect())
        drain(c)


def single_state_reads(zk: FakeZk) -> list[str]:
    """Partition states read one get each (the read back must be pipelined multiReads)."""
    seen: list[str] = []
    real = zk.get

    def get(path: str, **kw: Any) -> Any:
        if path.endswith("/state"):
            seen.append(path)
        return real(path, **kw)

    zk.get = get  # type: ignore[method-assign]
    return seen


def three_partitions_led_by_2(tmp_path: Path) -> tuple[FakeZk, KafkaController, StateChangeLog]:
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    add_topic(zk, "t", {0: (2, 3, 1), 1: (2, 1, 3), 2: (2, 3, 1)})
    log = StateChangeLog(tmp_path, 1)
    c = start_controller(zk, state_log=log)
    assert c.is_active
    return zk, c, log


def test_an_election_whose_answer_was_lost_is_logged_once(tmp_path: Path) -> None:
    zk, c, log = three_partitions_led_by_2(tmp_path)
    term = c.ctx.epoch
    lost = lose_next_state_write(zk)
    single_gets = single_state_reads(zk)
    del zk.nodes[paths.broker(2)]  # the leader of every partition is lost
    process(c, ev.BrokerChange())
    assert lost
    assert not c.is_active
    drain(c)
    reelect(c)
    assert active_now(c)
    assert c.ctx.epoch > term
    process(c, ev.Reelect())  # nothing is read back, nor logged, twice
    drain(c)
    log.close()
    assert single_gets == []
    for p in range(3):
        lai, controller_epoch = stored(zk, "t", p)
        assert controller_epoch == term  # the lost write's, not the next term's
        found = [r for r in state_lines(tmp_path, "t") if r["partition"] == p]
        assert [r["zk_version"] for r in found] == [lai.zk_version], found
        (row,) = found
        assert row["why"] == FOUND_WRITTEN
        assert row["reason"] == "offline"
        assert row["controller_epoch"] == term
        assert (row["leader"], row["leader_epoch"], row["isr"]) == (
            lai.leader,
            lai.leader_epoch,
            list(lai.isr),
        )
        assert row["replicas"]
        assert row["leader"] in (1, 3)


def test_a_new_partition_whose_creation_answer_was_lost_is_logged(tmp_path: Path) -> None:
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    log = StateChangeLog(tmp_path, 1)
    c = start_controller(zk, state_log=log)
    term = c.ctx.epoch
    lost = lose_next_state_write(zk)
    zk.put(paths.topic("n"), encode_topic(TopicAssignment("n", {0: (1, 2, 3)}, new_topic_id())))
    process(c, ev.TopicChange())
    drain(c)
    reelect(c)
    log.close()
    assert lost
    assert c.is_active
    (row,) = state_lines(tmp_path, "n")
    assert (row["reason"], row["zk_version"], row["controller_epoch"]) == ("new", 0, term)
    assert row["why"] == FOUND_WRITTEN
    assert row["replicas"] == [1, 2, 3]


def lose_broker_2_and_reelect(zk: Any, c: Any, log: Any) -> None:
    """Broker 2, the leader of every partition, is lost; the controller's writes meet the
    ZooKeeper loss set up before, it resigns, and this broker is elected again."""
    del zk.nodes[paths.broker(2)]
    process(c, ev.BrokerChange())
    drain(c)
    reelect(c)
    log.close()


def test_a_write_that_never_landed_gets_no_line(tmp_path: Path) -> None:
    zk, c, log = three_partitions_led_by_2(tmp_path)
    term = c.ctx.epoch
    lost = lose_next_state_write(zk, "down")
    lose_broker_2_and_reelect(zk, c, log)
    assert lost
    assert c.is_active
    rows = state_lines(tmp_path, "t")
    assert not [r for r in rows if "why" in r or r["controller_epoch"] == term]
    # The next term elected them itself, and logged that as any election.
    for p in range(3):
        lai, controller_epoch = stored(zk, "t", p)
        assert controller_epoch == c.ctx.epoch
        assert [r["zk_version"] for r in rows if r["partition"] == p] == [lai.zk_version]


def test_writes_answered_before_the_loss_are_not_logged_again(tmp_path: Path) -> None:
    zk, c, log = three_partitions_led_by_2(tmp_path)
    lost = lose_next_state_write(zk, answered=1)
    lose_broker_2_and_reelect(zk, c, log)
    assert lost
    assert c.is_active
    rows = state_lines(tmp_path, "t")
    keys = [(r["partition"], r["zk_version"]) for r in rows]
    assert len(keys) == len(set(keys)), rows
    assert len([r for r in rows if "why" in r]) == 2  # the one answered was logged then
    for p in range(3):
        lai, _ = stored(zk, "t", p)
        assert (p, lai.zk_version) in keys


def test_read_back_after_the_session_ended_and_another_broker_was_elected(
    tmp_path: Path,
) -> None:
    """The lost write's controller is not elected again: it still logs the write, on its
    event thread, once it can read ZooKeeper (a first read back that fails is tried again)."""
    zk, c, log = three_partitions_led_by_2(tmp_path)
    term = c.ctx.epoch
    lost = lose_next_state_write(zk)
    del zk.nodes[paths.broker(2)]
    process(c, ev.BrokerChange())
    assert lost
    assert not c.is_active
    queued(c)  # the session ends before its look at the election
    process(c, ev.Expire("session expired"))
    del zk.nodes[paths.CONTROLLER]  # ephemeral: gone with the session
    other = start_controller(zk.share(broker_session(3)), 3)
    assert other.is_active
    zk.fail_next.append(ConnectionLoss())  # the first read back meets another blip
    process(c, ev.RegisterBrokerAndReelect())
    assert c.ops.unanswered is not None
    queued(c)
    process(c, ev.RegisterBrokerAndReelect())
    log.close()
    assert not c.is_active
    assert c.active_controller_id == 3
    rows = state_lines(tmp_path, "t")
    assert sorted(r["partition"] for r in rows if r.get("why") == FOUND_WRITTEN) == [0, 1, 2]
    assert {r["controller_epoch"] for r in rows if "why" in r} == {term}


def test_the_store_reports_only_the_unanswered_writes() -> None:
    zk = empty_cluster()
    zk.put(paths.CONTROLLER_EPOCH, b"1")
    add_topic(zk, "t", {0: (1, 2), 1: (1, 2), 2: (1, 2)})
    lose_next_state_write(zk, answered=2)
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    tps = [TopicPartition("t", p) for p in range(3)]
    states = {tp: LeaderAndIsr(2, 2, (2,), 0) for tp in tps}
    states[tps[1]] = LeaderAndIsr(2, 2, (2,), 7)  # refused: BadVersion, answered
    written: list[dict[TopicPartition, LeaderAndIsr]] = []
    unanswered: list[dict[TopicPartition, LeaderAndIsr]] = []

    def record(into: list[Any]) -> Callable[[Any], None]:
        return into.append

    with pytest.raises(ConnectionLoss):
        store.update_partition_states(states, 1, 0, record(written), record(unanswered))
    assert written == [{tps[0]: LeaderAndIsr(2, 2, (2,), 1)}]
    assert unanswered == [{tps[2]: LeaderAndIsr(2, 2, (2,), 1)}]


def test_the_unanswered_write_of_a_state_at_the_last_int32_version_expects_it_wrapped() -> None:
    """ZooKeeper's version is a Java int: a setData of a znode at 2**31 - 1 gives it
    -2**31 (PrepRequestProcessor's checkAndIncVersion), so that is the version an
    unanswered write has if it landed, and the one found_written then looks for."""
    zk = empty_cluster()
    zk.put(paths.CONTROLLER_EPOCH, b"1")
    add_topic(zk, "t", {0: (1, 2)})
    tp = TopicPartition("t", 0)
    path = paths.partition_state("t", 0)
    data, stat = zk.nodes[path]
    zk.nodes[path] = (data, stat._replace(version=2**31 - 1))
    lose_next_state_write(zk)
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    unanswered: list[dict[TopicPartition, LeaderAndIsr]] = []
    with pytest.raises(ConnectionLoss):
        store.update_partition_states(
            {tp: LeaderAndIsr(2, 2, (2,), 2**31 - 1)}, 1, 0, None, unanswered.append
        )
    assert zk.nodes[path][1].version == -(2**31)  # it landed
    assert unanswered == [{tp: LeaderAndIsr(2, 2, (2,), -(2**31))}]
