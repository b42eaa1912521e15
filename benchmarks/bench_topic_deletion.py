"""Deleting every topic of a cluster of 10K (or 100K) partitions, and the memory it leaves.

A 3-broker cluster (RF 3) whose ZooKeeper holds that many partitions, 1,000 to a topic,
settled (every broker hosting every partition, every ISR full, each broker under a
quarter of a core for 2 s). Then every topic's deletion is requested at once (one multi of
``/admin/delete_topics/<topic>`` znodes, as many ``kafka-topics.sh --delete`` would leave
them). Figures: the time until the controller removed every topic's znodes and every
request (``deleted_s``), and until every broker hosts no partition (its status file's
``partitions``, ``brokers_empty_s``); each broker's resident memory before and after,
and the controller's peak while it deletes (sampled every 50 ms). The floor, measured in
the same run against the same ZooKeeper: the same znodes (a copy of the topics' tree in
another chroot) deleted leaves first, each multi checked against /controller_epoch as the
controller's are, as fast as the client can (packed multis, pipelined).

Kafka's controller makes each replica of a deleted topic offline (its ISR written without
it) before the brokers delete the logs; the floor has none of that, nor the brokers'
work: it is the part of the deletion no controller can skip.

    .venv/bin/python benchmarks/bench_topic_deletion.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    RssSampler,
    chroot,
    emit,
    round_robin,
    rss_mb,
    sizes,
    wait_cpu_quiet,
    wait_quiet,
    write_cluster_state,
    zookeeper,
)

from tests.integration.harness import Cluster, wait_for
from zkdata import paths
from zkdata.client import Create, Delete, ZkClient, is_own_failure

BROKERS = (1, 2, 3)
PER_TOPIC = 1000
SETTINGS = {
    "zookeeper.session.timeout.ms": "10000",
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.wait.max.ms": "500",
}


def floor_delete(connect: str, assignments: dict[str, dict[int, tuple[int, ...]]]) -> float:
    """The topics' znodes written in a chroot of their own, then deleted as the
    controller deletes them (leaves first, fenced multis); the seconds the deletes took."""
    connect = chroot(connect, "deletion-floor")
    write_cluster_state(connect, assignments)
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    try:
        got = zk.get(paths.CONTROLLER_EPOCH)
        assert got is not None
        epoch_zk_version = got[1].version
        started = time.perf_counter()
        for level in (
            [paths.partition_state(t, p) for t, parts in assignments.items() for p in parts],
            [paths.partition(t, p) for t, parts in assignments.items() for p in parts],
            [paths.topic_partitions(t) for t in assignments],
            [p for t in assignments for p in (paths.topic(t), paths.topic_config(t))],
        ):
            for results in zk.multi_fenced_batched(epoch_zk_version, [[Delete(p)] for p in level]):
                if any(is_own_failure(r) for r in results):
                    raise RuntimeError(f"floor delete failed: {results}")
        return time.perf_counter() - started
    finally:
        zk.close()


def hosted_partitions(c: Cluster, broker_id: int) -> int | None:
    status = c[broker_id].first_log_dir / "broker-status.json"
    try:
        return int(json.loads(status.read_text())["partitions"])
    except (OSError, ValueError, KeyError):
        return None


def run_size(base_connect: str, partitions: int, workdir: Path) -> dict[str, Any]:
    connect = chroot(base_connect, f"deletion-{partitions}")
    assignments = round_robin(partitions, min(PER_TOPIC, partitions))
    write_cluster_state(connect, assignments)
    floor_s = floor_delete(base_connect, assignments)
    c = Cluster(connect, workdir / f"p{partitions}", BROKERS, SETTINGS)
    try:
        c.start()
        started = time.perf_counter()
        controller_id, _ = c.wait_controller(timeout=600)
        # Settled: every broker hosts every partition (RF 3 on 3 brokers), every ISR is
        # full, and the brokers are idle: the written state's ISRs look full from the
        # start, while the brokers go on making their logs and starting their followers
        # (a deletion timed then measured that work too: 35-69 s for the same code).
        wait_for(
            lambda: all(hosted_partitions(c, b) == partitions for b in BROKERS),
            900,
            "every broker to host every partition",
        )
        wait_quiet(connect, timeout=900)
        wait_cpu_quiet([c[b].pid for b in BROKERS], timeout=900)
        settle_s = time.perf_counter() - started
        controller_id = c.controller()[0]  # type: ignore[index]
        rss_before = {b: round(rss_mb(c[b].pid), 1) for b in BROKERS}
        with RssSampler([c[b].pid for b in BROKERS]) as sampler:
            started = time.perf_counter()
            c.zk.multi([Create(paths.delete_topic(t)) for t in assignments])
            wait_for(
                lambda: (
                    not (c.zk.get_children(paths.BROKER_TOPICS) or [])
                    and not (c.zk.get_children(paths.DELETE_TOPICS) or [])
                ),
                1800,
                "every topic to be deleted",
            )
            deleted_s = time.perf_counter() - started
            wait_for(
                lambda: all(hosted_partitions(c, b) == 0 for b in BROKERS),
                600,
                "every broker to host no partition",
            )
            brokers_empty_s = time.perf_counter() - started
        time.sleep(5)
        rss_after = {b: round(rss_mb(c[b].pid), 1) for b in BROKERS}
        return {
            "partitions": partitions,
            "topics": len(assignments),
            "settle_s": round(settle_s, 1),
            "controller_id": controller_id,
            "deleted_s": round(deleted_s, 2),
            "brokers_empty_s": round(brokers_empty_s, 2),
            "floor_delete_znodes_s": round(floor_s, 3),
            "deleted_vs_floor": round(deleted_s / floor_s, 1),
            "rss_mb_before": rss_before,
            "rss_mb_after": rss_after,
            "peak_rss_mb_by_broker": {b: sampler.peak_mb(c[b].pid) for b in BROKERS},
        }
    finally:
        c.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=sizes, default="10000", help="partitions, comma-separated")
    args = parser.parse_args()
    with (
        zookeeper() as connect,
        tempfile.TemporaryDirectory(
            prefix="bench-deletion-", dir=ROOT / ".zkctl" if (ROOT / ".zkctl").exists() else None
        ) as tmp,
    ):
        results = [run_size(connect, n, Path(tmp)) for n in args.sizes]
    emit(
        {
            "benchmark": "topic_deletion",
            "what": (
                "deleted_s: every topic's deletion requested at once -> every topic znode and "
                "request gone; brokers_empty_s: -> every broker hosts no partition; floor: "
                "the same znodes deleted by one client, fenced packed multis"
            ),
            "results": results,
        }
    )


if __name__ == "__main__":
    main()
