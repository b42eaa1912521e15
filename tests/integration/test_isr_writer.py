"""A leader's ISR writer against a real ZooKeeper: many ISR changes at once are written in
bounded rounds, every one lands (conditional on the zkVersion the leader holds), and the
ISR change notifications name every changed partition."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker import replica_manager as replica_manager_module
from broker.replica_manager import Partition, ReplicaManager
from broker.state_change_log import StateChangeLog
from cluster.netsplit import ZooKeeperLink
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    LeaderAndIsr,
    TopicPartition,
    decode_partition_list,
    decode_partition_state,
    encode_partition_state,
)

LEADER = 1
FOLLOWER = 2
CONTROLLER_EPOCH = 4


def leader_and_isr(tps: list[TopicPartition]) -> dict[str, Any]:
    return {
        "controller_id": 9,
        "controller_epoch": CONTROLLER_EPOCH,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": "t",
                "topic_id": uuid.UUID(int=7),
                "partition_states": [
                    {
                        "partition_index": tp.partition,
                        "controller_epoch": CONTROLLER_EPOCH,
                        "leader": LEADER,
                        "leader_epoch": 3,
                        "isr": [LEADER],
                        "partition_epoch": 0,  # the state znode's zkVersion
                        "replicas": [LEADER, FOLLOWER],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": False,
                    }
                    for tp in tps
                ],
            }
        ],
    }


def wait_until(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def isr_now(p: Partition) -> tuple[int, ...]:
    """``p``'s ISR now (a call: mypy keeps no narrowing of it)."""
    return p.isr


def adding_now(p: Partition) -> tuple[int, ...]:
    """The replicas ``p`` is adding to its ISR now (a call: mypy keeps no narrowing of it)."""
    return p.isr_adding


def test_isr_changes_are_written_in_bounded_rounds_and_all_notified(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replica_manager_module, "ISR_WRITES_PER_ROUND", 3)
    tps = [TopicPartition("t", p) for p in range(8)]
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    rm = ReplicaManager(LEADER, zk, StateChangeLog(tmp_path, LEADER))
    # Each round is one packed write of partition states through the broker's ZooKeeper
    # client: count the writes of each call.
    rounds: list[int] = []
    multi_batched = zk.multi_batched

    def counted(items: list[Any], *args: Any, **kwargs: Any) -> Any:
        rounds.append(sum(1 for ops in items for op in ops if "/partitions/" in op.path))
        return multi_batched(items, *args, **kwargs)

    monkeypatch.setattr(zk, "multi_batched", counted)
    try:
        zk.ensure_paths([paths.ISR_CHANGE_NOTIFICATION])
        for tp in tps:
            zk.create(
                paths.partition_state(tp.topic, tp.partition),
                encode_partition_state(LeaderAndIsr(LEADER, 3, (LEADER,)), CONTROLLER_EPOCH),
                make_parents=True,
            )
        rm.become_leader_or_follower(leader_and_isr(tps))
        # The follower catches up in every partition in one fetch round (before the writer
        # runs: every change is queued when it starts).
        rm.record_follower_fetches(FOLLOWER, [(rm.partitions[tp], 0) for tp in tps])
        rm.start()

        def notified() -> set[TopicPartition]:
            children = zk.get_children(paths.ISR_CHANGE_NOTIFICATION) or []
            named: set[TopicPartition] = set()
            for child in children:
                path = paths.isr_change_notification(child)
                got = zk.get(path)
                assert got is not None
                named.update(decode_partition_list(path, got[0]))
            return named

        assert wait_until(lambda: notified() == set(tps), "every change notified")
        for tp in tps:
            path = paths.partition_state(tp.topic, tp.partition)
            got = zk.get(path)
            assert got is not None
            state = decode_partition_state(path, got[0], got[1].version)
            assert state.leader_and_isr.isr == (LEADER, FOLLOWER)
            assert state.leader_and_isr.zk_version == 1
            assert rm.partitions[tp].isr == (LEADER, FOLLOWER)
            assert rm.partitions[tp].zk_version == 1
        assert [n for n in rounds if n] == [3, 3, 2]
    finally:
        rm.close()
        zk.close()


def test_an_isr_write_whose_answer_was_lost_is_adopted_logged_and_notified(
    zk_connect: str, tmp_path: Path
) -> None:
    """The leader's ISR expansion reaches ZooKeeper and is carried out, and its answer is
    lost (only ZooKeeper's side of the link is cut). Meanwhile the high watermark waits for
    the joining follower (ZooKeeper already names it in the ISR). Once the link is back,
    the write sent again meets another zkVersion: the leader reads the state, finds its
    own write, adopts it, logs it as an isr_change and notifies the controller, as for any
    ISR change of its own."""
    tp = TopicPartition("t", 0)
    direct = ZkClient(zk_connect, session_timeout_ms=10_000)
    direct.start()
    link = ZooKeeperLink(zk_connect)
    zk = ZkClient(link.connect_string, session_timeout_ms=4_000)
    zk.start()
    rm = ReplicaManager(LEADER, zk, StateChangeLog(tmp_path, LEADER))
    path = paths.partition_state(tp.topic, tp.partition)

    def stored() -> LeaderAndIsr:
        got = direct.get(path)
        assert got is not None
        return decode_partition_state(path, got[0], got[1].version).leader_and_isr

    try:
        direct.ensure_paths([paths.ISR_CHANGE_NOTIFICATION])
        direct.create(
            path,
            encode_partition_state(LeaderAndIsr(LEADER, 3, (LEADER,)), CONTROLLER_EPOCH),
            make_parents=True,
        )
        rm.become_leader_or_follower(leader_and_isr([tp]))
        rm.start()
        p = rm.partitions[tp]
        link.cut_answers()
        rm.record_follower_fetches(FOLLOWER, [(p, 0)])
        assert wait_until(lambda: stored().isr == (LEADER, FOLLOWER), "the write to land")
        assert wait_until(lambda: not zk.connected, "the leader to see its link dead")
        assert isr_now(p) == (LEADER,)  # it does not know
        assert adding_now(p) == (FOLLOWER,)
        link.heal()
        assert wait_until(lambda: p.isr == (LEADER, FOLLOWER), "the write adopted")
        assert p.zk_version == stored().zk_version == 1
        assert p.isr_adding == ()
        rows = [
            json.loads(line)
            for line in (tmp_path / "state-change.log").read_text().splitlines()
            if '"isr_change"' in line
        ]
        assert [(r["isr"], r["zk_version"]) for r in rows] == [([LEADER, FOLLOWER], 1)]
        assert "found written" in rows[0]["why"]

        def notified() -> bool:
            for child in direct.get_children(paths.ISR_CHANGE_NOTIFICATION) or []:
                got = direct.get(paths.isr_change_notification(child))
                assert got is not None
                if tp in decode_partition_list(child, got[0]):
                    return True
            return False

        assert wait_until(notified, "the controller told of the change")
        assert stored().isr == (LEADER, FOLLOWER)  # written once: no second write
    finally:
        rm.close()
        zk.close()
        link.close()
        direct.close()


def test_notifications_of_the_longest_topic_names_fit_in_znodes(zk_connect: str) -> None:
    # 10,000 partitions of a topic named with 249 characters (Kafka's limit) are 2.8 MB
    # of JSON: cut at 10,000 partitions only, ZooKeeper dropped the connection at the
    # write, and the ISR writer retried it forever.
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        zk.ensure_paths([paths.ISR_CHANGE_NOTIFICATION])
        changed = [TopicPartition("x" * 249, p) for p in range(10_000)]
        ReplicaManager._notify_isr_changes(SimpleNamespace(zk=zk), changed)  # type: ignore[arg-type]
        children = sorted(zk.get_children(paths.ISR_CHANGE_NOTIFICATION) or [])
        written = [zk.get(paths.isr_change_notification(c)) for c in children]
        notified = [
            tp
            for got in written
            if got is not None
            for tp in decode_partition_list(paths.ISR_CHANGE_NOTIFICATION, got[0])
        ]
        assert notified == changed
        # The largest a chunk may be was written too.
        assert max(len(got[0]) for got in written if got is not None) > 0.99 * (
            replica_manager_module.ISR_NOTIFICATION_BYTES
        )
    finally:
        zk.close()
