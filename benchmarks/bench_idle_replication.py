"""Idle replication cost: CPU and memory of three brokers that only keep their followers
in sync, with no data flowing.

Provisions ZooKeeper (cluster.zookeeper.provision: ZKCTL_ZOOKEEPER, a container, or a
local server), starts three brokers, measures them with no partitions (the baseline),
then creates topics (replication factor 3, leaders spread evenly) up to each
--partitions total, waits until every partition is online with a full ISR and every
broker has created every partition's log, lets the cluster settle, and measures again.
Each measurement is the CPU time (utime + stime from /proc/<pid>/stat) each broker
process used over --measure seconds of wall time, as a fraction of one core, and its
resident set size. After each measurement the ISRs
are checked again: a broker whose followers stopped fetching would have shrunk them.
Prints one JSON object.

    .venv/bin/python benchmarks/bench_idle_replication.py [--partitions 10000 100000]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster import zookeeper as zkp
from storage.log import parse_log_dir_name
from tests.integration.harness import Cluster, wait_for
from zkdata import paths
from zkdata.znodes import decode_partition_state

BROKERS = (1, 2, 3)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # Fields 14 and 15 of the whole line (utime, stime); [0] here is field 3 (state).
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure(cluster: Cluster, seconds: float) -> dict[str, Any]:
    pids = {b: cluster[b].pid for b in BROKERS}
    before = {b: cpu_seconds(pid) for b, pid in pids.items()}
    start = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - start
    cpu = {b: (cpu_seconds(pid) - before[b]) / wall for b, pid in pids.items()}
    return {
        "cpu_fraction": {str(b): round(cpu[b], 4) for b in BROKERS},
        "cpu_fraction_mean": round(sum(cpu.values()) / len(cpu), 4),
        "rss_mib": {str(b): round(rss_bytes(pid) / 2**20, 1) for b, pid in pids.items()},
        "seconds": round(wall, 2),
    }


def create_topics(cluster: Cluster, first: int, count: int, per_topic: int) -> list[str]:
    """Topics of `per_topic` partitions with `count` partitions in all; replicas rotate
    over the brokers so that each leads a third."""
    names = []
    for t in range(first, first + count // per_topic):
        name = f"idle-{t:05d}"
        assignment = {
            p: tuple(BROKERS[(t + p + i) % len(BROKERS)] for i in range(len(BROKERS)))
            for p in range(per_topic)
        }
        cluster.create_topic(name, assignment)
        names.append(name)
    return names


def in_sync(cluster: Cluster, partitions: list[tuple[str, int]]) -> tuple[int, int]:
    """(partitions online with every replica in the ISR, partitions in all)."""
    state_paths = [paths.partition_state(t, p) for t, p in partitions]
    full = 0
    for path, got in zip(state_paths, cluster.zk.get_many(state_paths), strict=True):
        if got is None:
            continue
        state = decode_partition_state(path, got[0], got[1].version).leader_and_isr
        if state.leader >= 0 and len(state.isr) == len(BROKERS):
            full += 1
    return full, len(partitions)


def all_in_sync(cluster: Cluster, partitions: list[tuple[str, int]]) -> bool:
    full, count = in_sync(cluster, partitions)
    return full == count


def hosted_logs(cluster: Cluster) -> int:
    """The fewest partition logs any broker holds (directories ``<topic>-<partition>``)."""
    counts = []
    for b in BROKERS:
        with os.scandir(cluster[b].data_dir) as entries:
            counts.append(
                sum(1 for e in entries if e.is_dir() and parse_log_dir_name(e.name) is not None)
            )
    return min(counts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--measure", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument(
        "--settle", type=float, default=20.0, help="seconds to wait before measuring"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="per step, seconds")
    parser.add_argument("--zookeeper", help="a connect string (else provisioned)")
    args = parser.parse_args()

    zk = zkp.provision(args.zookeeper, progress=lambda m: print(m, file=sys.stderr))
    root = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    connect = zkp.chroot_connect_string(zk.connect_string, f"/bench-idle-{uuid.uuid4().hex[:8]}")
    cluster = Cluster(connect, root, BROKERS, {})
    result: dict[str, Any] = {
        "benchmark": "idle_replication",
        "brokers": len(BROKERS),
        "replication_factor": len(BROKERS),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "zookeeper": type(zk).__name__,
        "runs": [],
    }
    try:
        cluster.start()
        time.sleep(args.settle)
        run = {"partitions": 0, **measure(cluster, args.measure)}
        result["runs"].append(run)
        print(json.dumps(run), file=sys.stderr)
        partitions: list[tuple[str, int]] = []
        topics = 0
        for total in sorted(args.partitions):
            per_topic = 100 if total <= 10_000 else 1000
            started = time.monotonic()
            names = create_topics(cluster, topics, total - len(partitions), per_topic)
            topics += len(names)
            partitions += [(n, p) for n in names for p in range(per_topic)]
            wait_for(
                functools.partial(all_in_sync, cluster, list(partitions)),
                args.timeout,
                f"{len(partitions)} partitions online with full ISRs",
                interval=2.0,
            )
            online_s = time.monotonic() - started
            # Online in ZooKeeper is not yet idle: the brokers are still creating the logs.
            expected = len(partitions)
            wait_for(
                lambda: hosted_logs(cluster) >= expected,  # noqa: B023 (used in this pass)
                args.timeout,
                f"every broker hosting {len(partitions)} partition logs",
                interval=2.0,
            )
            hosted_s = time.monotonic() - started
            time.sleep(args.settle)
            run = {
                "partitions": len(partitions),
                "topics": topics,
                "seconds_to_online": round(online_s, 1),
                "seconds_to_logs_created": round(hosted_s, 1),
                **measure(cluster, args.measure),
            }
            run["isr_full_after"] = all_in_sync(cluster, partitions)
            result["runs"].append(run)
            print(json.dumps(run), file=sys.stderr)
    finally:
        cluster.close()
        try:
            zkp.delete_chroot(connect)
        finally:
            zk.close()
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
