"""A real broker's resident memory as its log grows from 100 MB to 2 GB.

benchmarks/bench_storage.py measures the storage layer inside its own process; this one
measures broker processes: 3 brokers (RF 3, acks=all, so the leader's request path and
the followers' fetch path are both in it), one partition, fed by confluent-kafka with
1 KiB random messages. At each step (100 MB, 500 MB, 1 GB, 2 GB of log on the leader)
the producer pauses, a consumer-style Fetch reads 1 MiB at 50 random offsets, and every
broker's VmRSS (/proc/<pid>/status) is sampled. Nothing proportional to the log may be
held in memory, so the RSS must stay flat from the first step to the last.

The floor is each broker's RSS with the topic created and its log empty, in the same run.

    .venv/bin/python benchmarks/bench_broker_memory.py [--max-mb 2000]
    .venv/bin/python benchmarks/bench_broker_memory.py --max-mb 200    # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, chroot, emit, rss_mb, zookeeper
from confluent_kafka import Producer

from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection

MB = 1_000_000
BROKERS = (1, 2, 3)
TOPIC = "grow"
STEPS_MB = (100, 500, 1000, 2000, 4000)
GOAL_GROWTH_MB = 16.0  # from the first step to the last, on any broker
SETTINGS = {
    "zookeeper.session.timeout.ms": "10000",
    "auto.leader.rebalance.enable": "false",
}


def log_bytes(c: Cluster, broker_id: int) -> int:
    directory = c[broker_id].data_dir / f"{TOPIC}-0"
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def segments(c: Cluster, broker_id: int) -> int:
    return len(list((c[broker_id].data_dir / f"{TOPIC}-0").glob("*.log")))


def high_watermark(conn: KafkaConnection) -> int:
    body = conn.request(
        ApiKey.LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        },
    )
    return int(body["topics"][0]["partitions"][0]["offset"])


def random_reads(conn: KafkaConnection, rng: random.Random, count: int = 50) -> int:
    """Consumer fetches of 1 MiB at random offsets below the high watermark; bytes read."""
    hw = high_watermark(conn)
    got = 0
    for _ in range(count):
        body = conn.request(
            ApiKey.FETCH,
            11,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": TOPIC,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": rng.randrange(max(1, hw)),
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        got += len(body["responses"][0]["partitions"][0]["records"] or b"")
    return got


def produce_until(p: Producer, c: Cluster, leader: int, target: int, values: list[bytes]) -> None:
    """Produce until the leader's log holds `target` bytes, then flush."""
    i = 0
    while log_bytes(c, leader) < target:
        for _ in range(5000):
            while True:
                try:
                    p.produce(TOPIC, values[i % len(values)], partition=0)
                    break
                except BufferError:
                    p.poll(0.01)
            i += 1
        p.poll(0)
    if p.flush(300):
        raise RuntimeError("messages still undelivered after 300 s")


def sample(c: Cluster) -> dict[str, float]:
    return {str(b): round(rss_mb(c[b].pid), 1) for b in BROKERS}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-mb", type=int, default=2000, help="the last step's log size")
    parser.add_argument(
        "--segment-bytes", type=int, default=256 << 20, help="the topic's segment.bytes"
    )
    args = parser.parse_args()
    steps = [s for s in STEPS_MB if s <= args.max_mb] or [args.max_mb]
    where = ROOT / ".zkctl" if (ROOT / ".zkctl").exists() else Path(tempfile.gettempdir())
    free = shutil.disk_usage(where).free
    needed = len(BROKERS) * steps[-1] * MB * 1.2
    if free < needed + 5e9:
        raise SystemExit(
            f"{free / 1e9:.1f} GB free in {where}; this run needs {needed / 1e9:.1f} GB + 5 GB"
        )
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with (
        zookeeper() as zk_connect,
        tempfile.TemporaryDirectory(prefix="bench-broker-memory-", dir=where) as tmp,
    ):
        c = Cluster(chroot(zk_connect, "broker-memory"), Path(tmp), BROKERS, SETTINGS)
        try:
            c.start()
            controller_id, _ = c.wait_controller()
            leader = next(b for b in BROKERS if b != controller_id)
            replicas = (leader, *(b for b in BROKERS if b != leader))
            c.create_topic(
                TOPIC,
                {0: replicas},
                {"min.insync.replicas": "2", "segment.bytes": str(args.segment_bytes)},
            )
            c.wait_partitions(
                TOPIC,
                lambda s: s[0].leader == leader and len(s[0].isr) == 3,
                "the topic online with a full ISR",
            )
            time.sleep(2)
            empty = sample(c)
            p = Producer(
                {
                    "bootstrap.servers": ",".join(f"127.0.0.1:{c[b].port()}" for b in BROKERS),
                    "acks": "all",
                    "linger.ms": 5,
                    "batch.size": 1_000_000,
                    "queue.buffering.max.messages": 32 * 1024,
                }
            )
            values = [random.Random(i).randbytes(1024) for i in range(256)]
            rng = random.Random(1)
            started = time.monotonic()
            with KafkaConnection("127.0.0.1", c[leader].port(), client_id="reader") as conn:
                for step in steps:
                    produce_until(p, c, leader, step * MB, values)
                    read = random_reads(conn, rng)
                    time.sleep(1)
                    rows.append(
                        {
                            "log_mb": round(log_bytes(c, leader) / MB),
                            "segments": segments(c, leader),
                            "follower_log_mb": {
                                str(b): round(log_bytes(c, b) / MB) for b in BROKERS if b != leader
                            },
                            "random_read_mb": round(read / MB, 1),
                            "rss_mb": sample(c),
                            "elapsed_s": round(time.monotonic() - started, 1),
                        }
                    )
                    print(json.dumps({"step": rows[-1]}), file=sys.stderr, flush=True)
            wait_for(lambda: all(c[b].alive() for b in BROKERS), 1, "every broker alive")
        finally:
            c.close()
    growth = {
        str(b): round(rows[-1]["rss_mb"][str(b)] - rows[0]["rss_mb"][str(b)], 1) for b in BROKERS
    }
    span_gb = (rows[-1]["log_mb"] - rows[0]["log_mb"]) / 1000
    worst = max(growth.values())
    emit(
        {
            "benchmark": "broker_memory",
            "what": (
                "VmRSS of each broker (leader first in replicas) as one RF 3 partition's log "
                f"grows, segment.bytes={args.segment_bytes}; 50 random 1 MiB consumer "
                "fetches at each step"
            ),
            "load_avg_before": [round(x, 2) for x in load_before],
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
            "leader": leader,
            "floor_rss_mb_empty_log": empty,
            "steps": rows,
            "rss_growth_mb_first_to_last_step": growth,
            "rss_growth_mb_per_gb_of_log": {
                b: round(g / span_gb, 2) if span_gb > 0 else None for b, g in growth.items()
            },
            "goal": {"max_rss_growth_mb": GOAL_GROWTH_MB},
            # One step compares a sample with itself: nothing was measured (null).
            "met": worst <= GOAL_GROWTH_MB if len(rows) > 1 else None,
        }
    )


if __name__ == "__main__":
    main()
