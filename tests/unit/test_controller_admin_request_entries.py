"""An entry of /admin/reassign_partitions or /admin/preferred_replica_election that cannot be
read (repeated or no replicas, a negative partition, no object) is reported with the
znode's path and skipped, and the others are carried out, as Kafka 2.8 decodes these
znodes entry by entry and acts on each partition alone (processZkPartitionReassignment,
which takes a failed one out of the znode, maybeRemoveFromZkReassignment;
processReplicaLeaderElection). One such entry made the whole znode malformed: the
controller removed the request and the valid partitions in it were never moved or
elected. Found by review (a real ZooKeeper showed it:
/tmp/review-handlers/t/test_reassign_one_bad_entry.py). A znode that is no JSON object
with a list of entries is still removed whole."""

from __future__ import annotations

import json

import pytest

from controller import events as ev
from controller.store import ZkControllerStore
from tests.unit.fake_cluster import Controller, ZooKeeperData
from zkdata import paths
from zkdata.znodes import LeaderAndIsr, TopicPartition, decode_reassignment

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def request(*entries: object) -> bytes:
    return json.dumps({"version": 1, "partitions": list(entries)}).encode()


def reported(caplog: pytest.LogCaptureFixture, path: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if path in r.getMessage()]


def test_a_reassignment_beside_an_unreadable_entry_is_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """t-0's move to 1, 2 completes at once (both in the ISR); t-1's entry repeats a
    broker: reported, left as it is, and taken out with t-0's, so the znode goes."""
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3), 1: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.zk.put(
            paths.REASSIGN_PARTITIONS,
            request(
                {"topic": "t", "partition": 0, "replicas": [1, 2]},
                {"topic": "t", "partition": 1, "replicas": [2, 2]},
            ),
        )
        c.run(ev.PartitionReassignment())
        c.drain()
        assert data.assignment("t").partitions == {0: (1, 2), 1: (1, 2, 3)}
        assert not data.has(paths.REASSIGN_PARTITIONS)
        assert c.controller.is_active
    (line,) = reported(caplog, paths.REASSIGN_PARTITIONS)
    assert "[2, 2]" in line


def test_an_unreadable_reassignment_entry_is_taken_out_while_the_others_go_on() -> None:
    """t-0's move to 4 waits for 4 to catch up; t-1's entry has no replicas. The znode
    then asks for t-0's move only, and goes when it completes."""
    data = ZooKeeperData(brokers=(1, 2, 3, 4))
    data.topic("t", {0: (1, 2, 3), 1: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.zk.put(
            paths.REASSIGN_PARTITIONS,
            request(
                {"topic": "t", "partition": 1, "replicas": []},
                {"topic": "t", "partition": 0, "replicas": [1, 2, 4]},
            ),
        )
        c.run(ev.PartitionReassignment())
        c.drain()
        assert T0 in c.controller.ctx.partitions_being_reassigned
        assert decode_reassignment(data.zk.nodes[paths.REASSIGN_PARTITIONS][0]) == {T0: (1, 2, 4)}
        data.leader_sets_isr(T0, (1, 2, 3, 4))
        c.run(ev.PartitionReassignmentIsrChange(T0))
        c.drain()
        assert data.assignment("t").partitions == {0: (1, 2, 4), 1: (1, 2, 3)}
        assert not data.has(paths.REASSIGN_PARTITIONS)


def test_a_failover_makes_the_reassignments_beside_an_unreadable_entry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3), 1: (1, 2, 3)})
    data.zk.put(
        paths.REASSIGN_PARTITIONS,
        request(
            {"topic": "t", "partition": -1, "replicas": [1]},
            {"topic": "t", "partition": 0, "replicas": [1, 2]},
        ),
    )
    with Controller(data).elect():
        assert data.assignment("t").partitions == {0: (1, 2), 1: (1, 2, 3)}
        assert not data.has(paths.REASSIGN_PARTITIONS)
    assert len(reported(caplog, paths.REASSIGN_PARTITIONS)) == 1


def test_a_reassignment_request_of_unreadable_entries_only_is_removed() -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.zk.put(paths.REASSIGN_PARTITIONS, request(7, ["t", 0]))
        c.run(ev.PartitionReassignment())
        assert not data.has(paths.REASSIGN_PARTITIONS)
        assert data.assignment("t").partitions == {0: (1, 2, 3)}


def test_a_reassignment_request_with_no_list_of_entries_is_still_removed_whole() -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    data.topic("t", {0: (1, 2, 3)})
    with Controller(data).elect() as c:
        data.zk.put(
            paths.REASSIGN_PARTITIONS,
            b'{"version":1,"partitions":{"topic":"t","partition":0,"replicas":[1]}}',
        )
        c.run(ev.PartitionReassignment())
        assert not data.has(paths.REASSIGN_PARTITIONS)
        assert data.assignment("t").partitions == {0: (1, 2, 3)}


def test_a_preferred_election_beside_an_unreadable_entry_is_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    data = ZooKeeperData(brokers=(1, 2))
    data.topic("t", {0: (1, 2)}, {0: LeaderAndIsr(2, 1, (1, 2), 0)})
    with Controller(data).elect() as c:
        data.zk.put(
            paths.PREFERRED_REPLICA_ELECTION,
            request(
                {"topic": "t", "partition": 0},
                {"topic": "t", "partition": -1},
            ),
        )
        c.run(ev.PreferredReplicaElection())
        c.drain()
        assert data.state(T0).leader == 1
        assert not data.has(paths.PREFERRED_REPLICA_ELECTION)
    (line,) = reported(caplog, paths.PREFERRED_REPLICA_ELECTION)
    assert "-1" in line


def test_the_store_takes_unreadable_entries_out_whenever_it_writes_the_znode() -> None:
    data = ZooKeeperData(brokers=(1, 2, 3))
    zk = data.zk
    store = ZkControllerStore(zk)  # type: ignore[arg-type]
    bad = {"topic": "t", "partition": 2, "replicas": [3, 3]}
    good = [
        {"topic": "t", "partition": 0, "replicas": [1, 2]},
        {"topic": "t", "partition": 1, "replicas": [2, 3]},
    ]
    zk.put(paths.REASSIGN_PARTITIONS, request(*good, bad))
    version = zk.nodes[paths.CONTROLLER_EPOCH][1].version
    assert not store.remove_from_reassignment_znode({}, version)  # nothing asked: untouched
    assert json.loads(zk.nodes[paths.REASSIGN_PARTITIONS][0])["partitions"] == [*good, bad]
    assert not store.remove_from_reassignment_znode({T0: (1, 2)}, version)
    assert decode_reassignment(zk.nodes[paths.REASSIGN_PARTITIONS][0]) == {T1: (2, 3)}
    zk.put(paths.REASSIGN_PARTITIONS, request(good[1], bad))
    assert not store.remove_from_reassignment_znode({}, version, drop_unreadable=True)
    assert decode_reassignment(zk.nodes[paths.REASSIGN_PARTITIONS][0]) == {T1: (2, 3)}
    zk.put(paths.REASSIGN_PARTITIONS, request(bad))
    assert store.remove_from_reassignment_znode({}, version, drop_unreadable=True)
    assert not data.has(paths.REASSIGN_PARTITIONS)
