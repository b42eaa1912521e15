"""Deleting a cluster's chroot: what `zkctl down` does to a cluster started against a
ZooKeeper of one's own (`--zookeeper host:port/chroot`), and the tests after each test.

For each size (partitions, in topics of 1,000 with RF 3, as `write_cluster_state` leaves
them: each topic's znode and config, each partition's znode and state), a chroot holding
that cluster is deleted by `cluster.zookeeper.delete_chroot` (ZkClient.delete_tree: the
tree listed a level at a time in pipelined multiReads, deleted leaves first in packed
multis). The baseline, in the same run on the same ZooKeeper: kazoo's recursive delete
(a request and an answer per znode, and a listing per znode), the code before, up to
``--baseline-max`` partitions (at 100,000 it takes minutes).

    .venv/bin/python benchmarks/bench_delete_chroot.py [--sizes 1000,10000,100000]
        [--baseline-max 10000]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import chroot, emit, sizes, write_cluster_state, zookeeper
from kazoo.exceptions import NoNodeError

from cluster import zookeeper as zkp
from zkdata.client import ZkClient
from zkdata.tree import subtrees_leaves_first

PARTITIONS_PER_TOPIC = 1_000


def cluster_state(partitions: int) -> dict[str, dict[int, tuple[int, ...]]]:
    topics = max(1, partitions // PARTITIONS_PER_TOPIC)
    per_topic = min(partitions, PARTITIONS_PER_TOPIC)
    return {f"t{t}": {p: (1, 2, 3) for p in range(per_topic)} for t in range(topics)}


def kazoo_recursive_delete(connect: str) -> None:
    hosts, path = zkp.split_chroot(connect)
    with zkp.kazoo_client(hosts, 30.0) as zk, contextlib.suppress(NoNodeError):
        zk.delete(path, recursive=True)


def timed_deletion(base: str, partitions: int, delete: Any, name: str) -> tuple[float, int]:
    """Seconds `delete` took to delete a chroot holding that cluster; how many znodes it
    held (counted before, untimed)."""
    connect = chroot(base, f"delete-{name}-{partitions}")
    write_cluster_state(connect, cluster_state(partitions))
    hosts, root = zkp.split_chroot(connect)
    zk = ZkClient(hosts, session_timeout_ms=30_000)
    zk.start()
    try:
        znodes = len(subtrees_leaves_first(zk, [root]))
    finally:
        zk.close()
    started = time.perf_counter()
    delete(connect)
    return round(time.perf_counter() - started, 3), znodes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=sizes, default=[1_000, 10_000, 100_000])
    parser.add_argument("--baseline-max", type=int, default=10_000)
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with zookeeper() as base:
        for partitions in args.sizes:
            seconds, znodes = timed_deletion(base, partitions, zkp.delete_chroot, "tree")
            row: dict[str, Any] = {
                "partitions": partitions,
                "znodes": znodes,
                "delete_chroot_s": seconds,
            }
            if partitions <= args.baseline_max:
                row["baseline_kazoo_recursive_s"], _ = timed_deletion(
                    base, partitions, kazoo_recursive_delete, "kazoo"
                )
                row["baseline_vs_delete_chroot"] = round(
                    row["baseline_kazoo_recursive_s"] / row["delete_chroot_s"], 1
                )
            results.append(row)
            print(row, file=sys.stderr, flush=True)
    emit(
        {
            "benchmark": "delete_chroot",
            "what": (
                "seconds to delete a chroot holding a cluster's topics and partition "
                "states; baseline: kazoo's recursive delete of the same, in the same run"
            ),
            "results": results,
        }
    )


if __name__ == "__main__":
    main()
