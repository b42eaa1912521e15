"""An ISR shrink that lands in a write round which then fails on ZooKeeper is in effect
(the leader's ISR is the smaller one), so the high watermark moves at once and those
waiting on it are told, as after a round that succeeds. No later round finds the
partition changed to do it (the re-read finds its zkVersion already held; the requeued
shrink is a no-op): the high watermark stayed below the log end until the next append or
fetch, an acks=all produce that waited only for the removed (dead) follower timed out
(and was retried: a duplicate), and acks=1 records of an idle partition stayed unreadable.
Kafka 2.8's Partition.maybeShrinkIsr moves the high watermark (maybeIncrementLeaderHW) and
completes the delayed produces once its ISR write is done. (Found by review.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.states import ZnodeStat

from broker.config import BrokerConfig
from broker.replica_manager import Partition, ReplicaManager
from broker.state_change_log import StateChangeLog
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.leader_and_isr_requests import leader_and_isr_request
from wire.errors import ErrorCode
from zkdata.client import BadVersionError
from zkdata.znodes import (
    LeaderAndIsr,
    TopicPartition,
    decode_partition_state,
    encode_partition_state,
)

LEADER, DEAD = 1, 2
A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Zk:
    """The state znodes of A and B (leader epoch 2). ``refuse_then_down``: a write of B is
    refused (the controller changed B meanwhile) and the read that follows meets a lost
    connection. ``lost_multis``: how many multis still fail with a lost connection, the
    first of them landing its write of A (its answer lost)."""

    def __init__(self, b_version: int) -> None:
        self.states = {
            A: LeaderAndIsr(LEADER, 2, (LEADER, DEAD), 2),
            B: LeaderAndIsr(LEADER, 2, (LEADER, DEAD), b_version),
        }
        self.refuse_then_down = False
        self.lost_multis = 0
        self.multis = 0

    @staticmethod
    def _tp(path: str) -> TopicPartition:
        parts = path.split("/")
        return TopicPartition(parts[3], int(parts[5]))

    def _write(self, op: Any) -> Any:
        tp = self._tp(op.path)
        if op.version != self.states[tp].zk_version:
            return BadVersionError()
        self.states[tp] = decode_partition_state(op.path, op.data, op.version + 1).leader_and_isr
        return ZnodeStat(0, 0, 0, 0, op.version + 1, 0, 0, 0, 0, 0, 0)

    def multi_batched(self, items: list[Any]) -> list[list[Any]]:
        self.multis += 1
        if self.lost_multis:
            self.lost_multis -= 1
            if self.multis == 1:
                for (op,) in items:
                    if self._tp(op.path) == A:
                        self._write(op)
            raise ConnectionLoss()
        return [[self._write(op)] for (op,) in items]

    def _stored(self, path: str) -> tuple[bytes, Any]:
        st = self.states[self._tp(path)]
        return encode_partition_state(st, 3), SimpleNamespace(version=st.zk_version)

    def get_many(self, path_list: list[str]) -> list[tuple[bytes, Any]]:
        if self.refuse_then_down:
            raise ConnectionLoss()
        return [self._stored(p) for p in path_list]


@contextlib.contextmanager
def leading_a_and_b(tmp_path: Path, zk: Zk) -> Iterator[ReplicaManager]:
    """This broker leads A and B, with DEAD in their ISRs (A's zkVersion 2, B's 6)."""
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})
    logs = LogManager([tmp_path / "data"], config)
    scl = StateChangeLog(tmp_path, LEADER)
    rm = ReplicaManager(LEADER, zk, scl, logs=logs)  # type: ignore[arg-type]
    try:
        for tp in (A, B):
            req = leader_and_isr_request(tp, LEADER, 2, [LEADER, DEAD], [LEADER, DEAD], is_new=True)
            rm.become_leader_or_follower(req)
            rm.partitions[tp].zk_version = 2 if tp == A else 6
        rm.record_follower_fetches(DEAD, [(rm.partitions[A], 0), (rm.partitions[B], 0)])
        # DEAD stopped fetching longer ago than replica.lag.time.max.ms: the high watermark
        # waits for it only while it is in the ISR.
        for tp in (A, B):
            rm.partitions[tp].followers[DEAD].last_caught_up_ms -= 10 * rm.replica_lag_time_max_ms
        yield rm
    finally:
        rm.close()
        logs.close()
        scl.close()


def isr_of(p: Partition) -> tuple[int, ...]:
    """``p``'s ISR now (a call: mypy keeps no narrowing of it)."""
    return p.isr


def told_of(rm: ReplicaManager) -> list[TopicPartition | None]:
    """The partitions the replica manager tells its waiting fetches and producers of
    (None: any)."""
    told: list[TopicPartition | None] = []

    def on_data(_data: bool, partitions: Any) -> None:
        told.extend([None] if partitions is None else partitions)

    rm.on_data = on_data
    return told


def test_a_shrink_written_in_a_round_whose_other_write_then_fails_moves_the_high_watermark(
    tmp_path: Path,
) -> None:
    """A's write lands; B's is refused and the read that follows meets a lost connection:
    the round fails with A's shrink applied. An acks=all produce to A that waited only
    for DEAD completes."""
    zk = Zk(b_version=7)  # the controller bumped B meanwhile
    zk.refuse_then_down = True
    with leading_a_and_b(tmp_path, zk) as rm:
        a = rm.partitions[A]
        error, _p, info, why = rm.append_as_leader(A, build_batch([b"v"] * 4), -1)
        assert error == ErrorCode.NONE, why
        assert info is not None
        assert a.high_watermark == 0  # waits for DEAD, in the ISR
        rm.maybe_shrink_isr()  # asks for DEAD's removal from both
        told = told_of(rm)
        failed, _more = rm._isr_round(set())
        assert failed  # B's read met the lost connection
        assert a.isr == (LEADER,)  # A's shrink landed and is in effect
        assert a.high_watermark == 4
        assert A in told or None in told
        zk.refuse_then_down = False
        for _ in range(3):
            rm._isr_round(set())
        assert a.isr == (LEADER,)
        # The ISR is the leader alone, min.insync.replicas 1: everything is committed.
        assert rm.wait_for_replication(a, info.last_offset, 0.1) == ErrorCode.NONE


def test_a_shrink_found_landed_by_a_round_that_then_fails_moves_the_high_watermark(
    tmp_path: Path,
) -> None:
    """Round 1's multi lands A's write, its answer lost; round 2 finds it landed, then
    its multi (B's write) fails. acks=1 records of A, whose ISR is now the leader alone,
    are readable without waiting for another append or fetch."""
    zk = Zk(b_version=6)
    zk.lost_multis = 2
    with leading_a_and_b(tmp_path, zk) as rm:
        a = rm.partitions[A]
        error, _p, _info, why = rm.append_as_leader(A, build_batch([b"v"] * 4), 1)
        assert error == ErrorCode.NONE, why
        rm.maybe_shrink_isr()  # asks for DEAD's removal from both
        assert rm._isr_round(set())[0]  # round 1: A lands unanswered, the round fails
        assert isr_of(a) == (LEADER, DEAD)
        assert a.high_watermark == 0
        told = told_of(rm)
        assert rm._isr_round(set())[0]  # round 2: A found written; B's write fails
        assert a.isr == (LEADER,)
        assert a.high_watermark == a.log_end_offset == 4
        assert A in told or None in told
        for _ in range(3):
            assert not rm._isr_round(set())[0]
        assert a.isr == (LEADER,)
        assert rm.partitions[B].isr == (LEADER,)
        assert a.high_watermark == 4
