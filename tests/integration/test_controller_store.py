"""The controller's ZooKeeper store against a real server: reads of many partition states."""

from __future__ import annotations

import pytest

from controller import store as store_module
from controller.store import ZkControllerStore
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import LeaderAndIsr, TopicPartition, encode_partition_state


def test_partition_states_read_in_slices_come_back_whole_and_in_order(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slices of 4 over 23 partitions: slice boundaries fall inside and at the ends.
    monkeypatch.setattr(store_module, "READ_SLICE", 4)
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        tps = [TopicPartition("t", p) for p in range(23)]
        for tp in tps:
            path = paths.partition_state(tp.topic, tp.partition)
            if tp.partition == 9:
                continue  # no state znode
            data = (
                b"{not json"
                if tp.partition == 14
                else encode_partition_state(LeaderAndIsr(tp.partition % 3, tp.partition, (0, 1)), 7)
            )
            zk.create(path, data, make_parents=True)
        got = ZkControllerStore(zk).read_partition_states(tps)
    finally:
        zk.close()
    assert list(got) == tps
    assert got[TopicPartition("t", 9)] is None  # missing
    assert got[TopicPartition("t", 14)] is None  # malformed: reported and skipped
    for tp in tps:
        if tp.partition in (9, 14):
            continue
        state = got[tp]
        assert state is not None
        assert state.leader_and_isr.leader == tp.partition % 3
        assert state.leader_and_isr.leader_epoch == tp.partition
        assert state.leader_and_isr.isr == (0, 1)
        assert state.controller_epoch == 7


def test_equal_partition_states_decode_to_one_shared_object(zk_connect: str) -> None:
    zk = ZkClient(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        data = encode_partition_state(LeaderAndIsr(1, 4, (1, 2)), 3)
        tps = [TopicPartition("t", p) for p in range(4)]
        for tp in tps:
            zk.create(paths.partition_state(tp.topic, tp.partition), data, make_parents=True)
        zk.set(paths.partition_state("t", 3), data)  # the same data at zkVersion 1
        got = ZkControllerStore(zk).read_partition_states(tps)
    finally:
        zk.close()
    first = got[tps[0]]
    assert first is not None
    assert first.leader_and_isr == LeaderAndIsr(1, 4, (1, 2), 0)
    assert got[tps[1]] is first
    assert got[tps[2]] is first
    other = got[tps[3]]
    assert other is not None
    assert other is not first
    assert other.leader_and_isr.zk_version == 1
