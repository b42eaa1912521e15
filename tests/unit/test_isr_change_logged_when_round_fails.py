"""A leader's ISR write whose answer was lost, found landed by the next round's re-read,
is logged once (docs/state-change-log.md: every successful write to a partition's state
znode is in the logs once), even if that round then fails on ZooKeeper: the round after
finds nothing unseen, so a row dropped with the failed round was never logged. (Kafka's
leader logs its ISR update as the write's answer is handled.)"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.states import ZnodeStat

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from tests.unit.test_isr_expansion_high_watermark import (
    IN_SYNC,
    JOINING,
    LEADER,
    TP,
    fetch,
    leader_and_isr,
    produce,
    write_round,
)
from zkdata.client import BadVersionError
from zkdata.znodes import (
    LeaderAndIsr,
    TopicPartition,
    decode_partition_state,
    encode_partition_state,
)


class Zk:
    def __init__(self) -> None:
        self.state = LeaderAndIsr(LEADER, 2, (LEADER, IN_SYNC), 0)
        self.versions: list[int] = []  # every zkVersion a write gave the znode
        # ok; lost: lands, its answer lost; down: never lands; refused: BadVersion, and
        # the read that follows is refused by a lost connection.
        self.mode = "ok"
        self.refused_writes = 0

    def multi_batched(self, items: list[Any]) -> list[list[Any]]:
        (op,) = items[0]
        if self.mode == "down":
            raise ConnectionLoss()
        if op.version != self.state.zk_version or self.mode == "refused":
            self.refused_writes += 1
            return [[BadVersionError()]]
        self.state = decode_partition_state(op.path, op.data, op.version + 1).leader_and_isr
        self.versions.append(self.state.zk_version)
        if self.mode == "lost":
            raise ConnectionLoss()
        return [[ZnodeStat(0, 0, 0, 0, self.state.zk_version, 0, 0, 0, 0, 0, 0)]]

    def _stored(self) -> tuple[bytes, Any]:
        data = encode_partition_state(self.state, 3)
        return data, SimpleNamespace(version=self.state.zk_version)

    def get_many(self, path_list: list[str]) -> list[tuple[bytes, Any]]:
        if self.mode == "refused" and self.refused_writes:
            raise ConnectionLoss()  # the read after the refused write
        return [self._stored() for _ in path_list]


@contextlib.contextmanager
def leader_with_addition_asked(tmp_path: Path) -> Iterator[tuple[ReplicaManager, Zk, Any]]:
    """A leader of TP whose JOINING replica caught up: its addition to the ISR is asked
    for; the replica manager closed at the end."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    zk = Zk()
    scl = StateChangeLog(tmp_path, LEADER)
    rm = ReplicaManager(LEADER, zk, scl, logs=logs)  # type: ignore[arg-type]
    try:
        rm.become_leader_or_follower(leader_and_isr([LEADER, IN_SYNC]))
        p = rm.partitions[TP]
        p.zk_version = 0
        produce(rm, 4)
        fetch(rm, IN_SYNC, 4)
        fetch(rm, JOINING, 4)
        yield rm, zk, p
    finally:
        rm.close()
        logs.close()
        scl.close()


@pytest.mark.parametrize("failure", ["down", "refused"])
def test_a_landed_isr_write_found_by_a_round_that_then_fails_is_logged(
    tmp_path: Path, failure: str
) -> None:
    with leader_with_addition_asked(tmp_path) as (rm, zk, p):
        zk.mode = "lost"  # round 1: the addition lands, its answer is lost
        write_round(rm)
        rm._request_isr_changes([p], remove=IN_SYNC, why="fell behind")
        zk.mode = failure  # round 2: its re-read finds the addition; the removal fails
        write_round(rm)
        zk.mode = "ok"  # round 3
        write_round(rm)
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    logged = sorted(r["zk_version"] for r in rows if r["event"] == "isr_change")
    assert len(zk.versions) == 2
    assert logged == zk.versions


@pytest.mark.parametrize("failure", ["down", "refused"])
def test_a_landed_isr_write_found_by_a_round_that_then_fails_is_announced(
    tmp_path: Path, failure: str
) -> None:
    """The same rounds: the addition found landed by the round that failed is named by the
    ISR writer's next change notification, or the controller never learns the new ISR
    (its brokers' metadata keeps the old one until the partition changes again): no later
    round finds that ISR changed, so the failed round must hand it on."""
    with leader_with_addition_asked(tmp_path) as (rm, zk, p):
        announced: set[TopicPartition] = set()  # what the ISR writer's loop gathers
        zk.mode = "lost"
        assert rm._isr_round(announced) == (True, False)
        rm._request_isr_changes([p], remove=IN_SYNC, why="fell behind")
        zk.mode = failure
        assert rm._isr_round(announced) == (True, False)
        with rm._lock:
            rm._isr_intents.clear()  # the removal withdrawn: no later round changes TP
        zk.mode = "ok"
        assert rm._isr_round(announced) == (False, False)
    assert TP in announced
