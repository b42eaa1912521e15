"""Every partition state the controller wrote is in the state-change log, even when the
call that wrote it then fails (docs/state-change-log.md: every successful write to a
partition's state znode is in the logs once).

A fence that moves between two packed multis (another controller elected) raises
ControllerMovedError after ZooKeeper applied the earlier ones, and a ZooKeeper error later
in the same step raises too. The states written before are logged a multi at a time as
ZooKeeper answers each (the elections and the ISR shrinks always did): the move of
leaders lacking their logs and the failover's removal of stale replicas
(`_write_offline_states`), a reassignment's leader-epoch bump, and the creation of new
partitions' states logged only once the whole call had returned. (Kafka logs each
partition's state change as its write's answer is handled.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kazoo.exceptions import ConnectionLoss

from broker.state_change_log import StateChangeLog
from controller import events as ev
from controller import reactions, reassignment
from controller.context import ReplicaAssignment
from tests.unit.fake_cluster import empty_cluster, process, register, start_controller
from tests.unit.test_state_machines import EPOCH, Cluster, P, T
from zkdata import paths
from zkdata.client import ControllerMovedError, WriteOp
from zkdata.znodes import (
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
    encode_topic,
    new_topic_id,
)


def logged_states(log_dir: Path, *, new: bool) -> list[TopicPartition]:
    path = log_dir / "state-change.log"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return sorted(
        TopicPartition(r["topic"], r["partition"])
        for r in rows
        if r["event"] == "partition_state" and (r["reason"] == "new") == new
    )


def test_leaders_lacking_their_logs_fenced_midway(tmp_path: Path) -> None:
    c = Cluster(log_dir=tmp_path)
    c.create_topic(T, {p: (1, 2, 3) for p in range(8)})
    writes = len(c.store.writes)
    c.store.fence_moves_after_updates = 5
    with pytest.raises(ControllerMovedError):
        reactions.leaders_lacking_their_logs(c.psm, 1, [TopicPartition(T, p) for p in range(8)])
    written = sorted(w.tp for w in c.store.writes[writes:])
    c.state_log.close()
    assert len(written) == 5
    assert logged_states(tmp_path, new=False) == written


def test_bump_leader_epochs_fenced_midway(tmp_path: Path) -> None:
    c = Cluster(log_dir=tmp_path)
    tps = [TopicPartition(T, p) for p in range(8)]
    c.create_topic(T, {p: (1, 2, 3) for p in range(8)})
    writes = len(c.store.writes)
    c.store.fence_moves_after_updates = 5
    with pytest.raises(ControllerMovedError):
        reassignment.bump_leader_epochs(
            c.psm,
            {tp: ReplicaAssignment((1, 2, 3)) for tp in tps},
            c.store.read_partition_states(tps),
        )
    written = sorted(w.tp for w in c.store.writes[writes:])
    c.state_log.close()
    assert len(written) == 5
    assert logged_states(tmp_path, new=False) == written


def test_new_partitions_fenced_midway_in_the_memory_store(tmp_path: Path) -> None:
    c = Cluster(log_dir=tmp_path)
    tps = [TopicPartition(T, p) for p in range(8)]
    for tp in tps:
        c.ctx.update_assignment(tp, ReplicaAssignment((1, 2, 3)))
    c.psm.handle_state_changes(tps, P.NEW)
    c.store.fence_moves_after_updates = 5
    with pytest.raises(ControllerMovedError):
        c.psm.handle_state_changes(tps, P.ONLINE)
    created = sorted(w.tp for w in c.store.writes if w.op == "create")
    c.state_log.close()
    assert len(created) == 5
    assert logged_states(tmp_path, new=True) == created


def test_states_created_before_the_fence_moved_are_logged(tmp_path: Path) -> None:
    """Through ZkControllerStore: its creations are reported a multi at a time."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    scl = StateChangeLog(tmp_path, 1)
    c = start_controller(zk, state_log=scl)
    assert c.is_active
    assignment = TopicAssignment("n", {p: (1, 2, 3) for p in range(6)}, new_topic_id())
    zk.put(paths.topic("n"), encode_topic(assignment))
    real_multi = zk.multi
    created = []

    def multi(ops: list[WriteOp]) -> list[object]:
        out = real_multi(ops)
        if any(getattr(op, "path", "").endswith("/state") for op in ops) and not isinstance(
            out[-1], Exception
        ):
            created.append(ops[-1].path)
            if len(created) == 3:  # another controller won
                zk.set_data(paths.CONTROLLER_EPOCH, zk.nodes[paths.CONTROLLER_EPOCH][0])
        return out

    zk.multi = multi  # type: ignore[method-assign]
    process(c, ev.TopicChange())
    scl.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    logged = [r for r in rows if r["event"] == "partition_state" and r["topic"] == "n"]
    in_zk = [
        p
        for p in zk.nodes
        if p.startswith("/brokers/topics/n/partitions/") and p.endswith("/state")
    ]
    assert len(in_zk) == 3
    assert len(logged) == len(in_zk)


def test_created_states_logged_when_the_adopt_read_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New partitions, one of whose states an interrupted earlier attempt left: the read of
    that one fails (a ZooKeeper error: the controller resigns) after the others' were
    created, which were logged only at the end of `_initialize`."""
    c = Cluster(log_dir=tmp_path)
    tps = [TopicPartition(T, p) for p in range(3)]
    for tp in tps:
        c.ctx.update_assignment(tp, ReplicaAssignment((1, 2, 3)))
    c.store.put(tps[2], LeaderAndIsr(1, 0, (1, 2, 3), 0), EPOCH)
    c.psm.handle_state_changes(tps, P.NEW)

    def fail(*_a: object, **_k: object) -> object:
        raise ConnectionLoss()

    monkeypatch.setattr(c.store, "read_partition_states", fail)
    with pytest.raises(ConnectionLoss):
        c.psm.handle_state_changes(tps, P.ONLINE)
    created = sorted(w.tp for w in c.store.writes if w.op == "create")
    c.state_log.close()
    assert created == tps[:2]
    assert logged_states(tmp_path, new=True) == created
