"""A whole topic reassigned by a client, over the Kafka protocol.

A 3-broker cluster and one topic of N partitions with 2 replicas each, led by their first;
a client's AlterPartitionReassignments (admin/cluster_admin.py, as `zkctl reassign
--bootstrap-server` sends it) gives every partition a third replica. Figures: the time
until the controller answered (every reassignment started), and until the topic's znode
shows every partition on its three replicas with nothing being added (the new replicas
caught up, the reassignments completed); how many times the topic's znode was written
(its zkVersion; a topic's znode holds every partition's replicas, so one write per
partition would write N znodes of N partitions). Floor, in the same run and against the
same server: the ZooKeeper writes the reassignments need, as fast as the client can
issue them: 2N epoch-checked conditional writes of partition state znodes (each
partition's leader epoch moves at the start and at the end), packed and pipelined, and
the topic's znode written twice.

    .venv/bin/python benchmarks/bench_reassignment.py [--partitions 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_leader_moves import floor_writes
from common import at_least, chroot, emit, wait_quiet, write_cluster_state, zookeeper

from admin.cluster_admin import ClusterAdmin
from cluster.supervised import SupervisedCluster
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import TopicPartition, decode_topic

TOPIC = "moved"
SETTINGS = {"zookeeper.session.timeout.ms": "6000", "auto.leader.rebalance.enable": "false"}


def reassign_once(connect: str, partitions: int, root: Path) -> dict[str, Any]:
    before = {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(partitions)}
    target = {p: (*r, 1 + (p + 2) % 3) for p, r in before.items()}
    write_cluster_state(connect, {TOPIC: before})
    c = SupervisedCluster(connect, root, (1, 2, 3), SETTINGS)
    try:
        c.start()
        c.wait_registered([1, 2, 3], timeout=120)
        c.wait_controller(timeout=120)
        wait_quiet(connect)
        got = c.zk.get(paths.topic(TOPIC))
        assert got is not None
        version_before = got[1].version
        admin = ClusterAdmin([("127.0.0.1", c[b].port()) for b in (1, 2, 3)], timeout_s=600)
        started = time.monotonic()
        results = admin.alter_partition_reassignments(
            {TopicPartition(TOPIC, p): r for p, r in target.items()}
        )
        answered = time.monotonic() - started
        refused = [tp for tp, (code, _m) in results.items() if code != 0]
        if refused:
            raise RuntimeError(f"reassignments refused: {refused[:5]}")
        while True:
            got = c.zk.get(paths.topic(TOPIC))
            assert got is not None
            now = decode_topic(TOPIC, got[0])
            if now.partitions == target and not now.adding_replicas:
                break
            if time.monotonic() - started > 600:
                raise TimeoutError("the reassignments did not complete in 600 s")
            time.sleep(0.02)
        complete = time.monotonic() - started
        return {
            "answered_s": round(answered, 3),
            "complete_s": round(complete, 3),
            "topic_znode_writes": got[1].version - version_before,
        }
    finally:
        c.close()


def floor(connect: str, partitions: int) -> float:
    """2N packed conditional partition state writes, and two writes of the topic's znode."""
    packed = floor_writes(connect, 2 * partitions)["packed_multis_s"]
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    try:
        data = (
            b'{"version":3,"partitions":{'
            + b",".join(b'"%d":[1,2,3]' % p for p in range(partitions))
            + b'},"adding_replicas":{},"removing_replicas":{}}'
        )
        zk.ensure_paths(["/floor-topic"])
        started = time.perf_counter()
        zk.set("/floor-topic", data)
        zk.set("/floor-topic", data)
        return packed + (time.perf_counter() - started)
    finally:
        zk.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=at_least(1), default=1000)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    args = parser.parse_args()
    rounds: list[dict[str, Any]] = []
    floors: list[float] = []
    with zookeeper() as connect, tempfile.TemporaryDirectory(prefix="bench-reassign-") as tmp:
        for i in range(args.rounds):
            rounds.append(
                reassign_once(chroot(connect, f"reassign-{i}"), args.partitions, Path(tmp) / str(i))
            )
            floors.append(floor(chroot(connect, f"floor-{i}"), args.partitions))
    complete = statistics.median_high(r["complete_s"] for r in rounds)
    floor_s = statistics.median_high(floors)
    emit(
        {
            "benchmark": "reassignment",
            "partitions": args.partitions,
            "rounds": rounds,
            "answered_s_median": statistics.median_high(r["answered_s"] for r in rounds),
            "complete_s_median": complete,
            "floor_s_median": round(floor_s, 3),
            "vs_floor": round(complete / floor_s, 2),
        }
    )


if __name__ == "__main__":
    main()
