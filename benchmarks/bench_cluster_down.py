"""`zkctl down`: how long stopping a local cluster takes, against stopping it without
controlled shutdowns.

Each round starts a local cluster as `zkctl up` does (its own ZooKeeper, N brokers, a
topic of --partitions partitions with replication factor N, every ISR whole), and times
`zkctl down`'s work (cluster.local.down): every broker but the controller stopped with a
controlled shutdown, then the controller, then ZooKeeper. The controller goes last, when
no other broker is left to take its leaderships; Kafka's broker makes its three attempts
5 s apart regardless (controlled.shutdown.max.retries, .retry.backoff.ms), which is what
this benchmark was written to show gone. Floor, in the same run: the same cluster started
with controlled.shutdown.enable=false, stopped the same way (the brokers' exits and
ZooKeeper's, no controlled shutdown). Medians of --rounds rounds, the two alternating, in
seconds.

    .venv/bin/python benchmarks/bench_cluster_down.py [--brokers 3] [--partitions 30]
        [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, emit, wait_quiet

from admin.topics import CreateTopicRequest, create_topic
from cluster import local
from zkdata.client import ZkClient

NO_CONTROLLED_SHUTDOWN = "controlled.shutdown.enable=false"


def one_down(root: Path, brokers: int, partitions: int, controlled: bool) -> dict[str, Any]:
    """A cluster started, a topic created and replicated, then `down` timed."""
    directory = root / ("controlled" if controlled else "floor")
    overrides = [] if controlled else [NO_CONTROLLED_SHUTDOWN]
    started = local.up(directory, brokers, overrides=overrides)
    try:
        connect = started.cluster.connect_string
        zk = ZkClient(connect, session_timeout_ms=30_000)
        zk.start()
        try:
            create_topic(
                zk,
                CreateTopicRequest("bench", partitions=partitions, replication_factor=brokers),
            )
        finally:
            zk.close()
        wait_quiet(connect, timeout=120)
        begun = time.perf_counter()
        result = local.down(directory)
        down_s = time.perf_counter() - begun
    except BaseException:
        local.down(directory, timeout=10)
        raise
    if set(result.brokers.values()) != {"stopped"}:
        raise RuntimeError(f"not every broker stopped cleanly: {result.brokers}")
    return {"down_s": round(down_s, 3), "controller_id": started.controller_id}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=at_least(1), default=3)
    parser.add_argument("--partitions", type=at_least(1), default=30)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    args = parser.parse_args()
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-down-") as d:
        for i in range(args.rounds):
            for controlled in (True, False):
                one = one_down(Path(d) / str(i), args.brokers, args.partitions, controlled)
                rounds.append({"controlled_shutdown": controlled, **one})
    down = statistics.median(r["down_s"] for r in rounds if r["controlled_shutdown"])
    floor = statistics.median(r["down_s"] for r in rounds if not r["controlled_shutdown"])
    emit(
        {
            "benchmark": "cluster_down",
            "what": "down_s: zkctl down of a local cluster (controlled shutdowns, the"
            " controller last); floor_down_s: the same with controlled.shutdown.enable=false",
            "brokers": args.brokers,
            "partitions": args.partitions,
            "down_s": round(down, 3),
            "floor_down_s": round(floor, 3),
            "down_vs_floor": round(down / floor, 2) if floor > 0 else None,
            "kafka_reference": "the last broker's controlled shutdown retried 3 times, 5 s"
            " apart: about 10 s more",
            "rounds": rounds,
        }
    )


if __name__ == "__main__":
    main()
