"""Idle replication cost: CPU and memory of three brokers that only keep their followers
in sync, with no data flowing; and what light traffic to one partition costs beside them.

Provisions ZooKeeper (cluster.zookeeper.provision: ZKCTL_ZOOKEEPER, a container, or a
local server), starts three brokers, measures them with no partitions (the baseline),
then creates topics (replication factor 3, leaders spread evenly) up to each
--partitions total, waits until every partition is online with a full ISR and every
broker has created every partition's log, lets the cluster settle, and measures again.
Each measurement is the CPU time (utime + stime from /proc/<pid>/stat) each broker
process used over --measure seconds of wall time, as a fraction of one core, and its
resident set size. After each measurement the ISRs
are checked again: a broker whose followers stopped fetching would have shrunk them, and
its CPU would be that of less work, so the run fails instead of giving a figure.

Light traffic: after each idle measurement, a confluent-kafka producer sends
--traffic-rate messages a second (acks=all, no linger: one request each) to one partition
led by broker 1, and the brokers' CPU is measured the same way, with the acknowledgement
latency (p50, p99, max) of the messages produced over the measured seconds (not those of
the producer's first 3 s, which wait for its connections and metadata). Its baseline is
the same traffic measured first, when that partition is the only one: the difference is
what the idle partitions make each message cost (a leader that looked at every partition
of its followers' fetch sessions for each append to one paid for all of them).
Prints one JSON object.

    .venv/bin/python benchmarks/bench_idle_replication.py [--partitions 10000 100000]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import rss_mb
from confluent_kafka import KafkaError, Message, Producer

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
        "rss_mib": {str(b): round(rss_mb(pid), 1) for b, pid in pids.items()},
        "seconds": round(wall, 2),
    }


TRAFFIC_TOPIC = "traffic"


class WindowLatencies:
    """The delivery latencies of the messages produced since `start()`: those of the
    warm-up before it are left out (the producer's first messages wait for its
    connections and the topic's metadata: 0.5 s and more, which would be the p99 of a
    light load on one partition)."""

    def __init__(self) -> None:
        self.since = math.inf
        self.values: list[float] = []  # seconds from produce() to the delivery callback
        self.left_out = 0

    def start(self) -> None:
        self.since = time.monotonic()

    def add(self, latency: float, now: float | None = None) -> None:
        """A delivery seen at `now` (monotonic), `latency` seconds after its produce()."""
        delivered_at = time.monotonic() if now is None else now
        if delivered_at - latency >= self.since:
            self.values.append(latency)
        else:
            self.left_out += 1

    def percentile_ms(self, q: float) -> float | None:
        ordered = sorted(self.values)
        if not ordered:
            return None
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 1)


def measure_traffic(cluster: Cluster, rate: float, size: int, seconds: float) -> dict[str, Any]:
    """`rate` messages a second of `size` bytes to partition 0 of TRAFFIC_TOPIC (acks=all,
    one request each), the brokers measured over `seconds` after a warm-up, and the
    latencies of the messages produced over those seconds."""
    producer = Producer(
        {
            "bootstrap.servers": ",".join(f"127.0.0.1:{cluster[b].port()}" for b in BROKERS),
            "acks": "all",
            "linger.ms": 0,
        }
    )
    acknowledged: list[int] = [0, 0]  # delivered, failed
    latencies = WindowLatencies()

    def delivered(err: KafkaError | None, msg: Message) -> None:
        acknowledged[1 if err is not None else 0] += 1
        latency = msg.latency()
        if err is None and latency is not None:
            latencies.add(latency)

    stop = threading.Event()
    sent = 0

    def send() -> None:
        nonlocal sent
        start = time.monotonic()
        value = b"x" * size
        while not stop.is_set():
            producer.produce(TRAFFIC_TOPIC, value, partition=0, on_delivery=delivered)
            sent += 1
            producer.poll(0)
            # Waiting in poll: a delivery is seen (and its latency read) when it comes,
            # not at the next message. poll returns early once it served one.
            while (pause := start + sent / rate - time.monotonic()) > 0:
                producer.poll(pause)

    sender = threading.Thread(target=send, name="traffic")
    sender.start()
    try:
        time.sleep(3.0)  # connections made, metadata known
        latencies.start()
        run = measure(cluster, seconds)
    finally:
        stop.set()
        sender.join()
        left = producer.flush(30)
    run.update(
        rate=rate,
        sent=sent,
        delivered=acknowledged[0],
        failed=acknowledged[1],
        undelivered=left,
        latency_messages=len(latencies.values),
        latency_left_out_warm_up=latencies.left_out,
        latency_ms_p50=latencies.percentile_ms(0.5),
        latency_ms_p99=latencies.percentile_ms(0.99),
        latency_ms_max=latencies.percentile_ms(1.0),
    )
    return run


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


def require_full_isrs(in_sync_count: tuple[int, int], what: str) -> None:
    """Refuse (RuntimeError) a measurement after which some partition is offline or has
    a shrunk ISR (``in_sync``'s count): its followers stopped fetching during it, so
    its CPU figure is that of less replication work than the cluster's."""
    full, count = in_sync_count
    if full != count:
        raise RuntimeError(
            f"{what}: {count - full} of {count} partitions without a full ISR after it: no figure"
        )


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
    parser.add_argument(
        "--traffic-rate", type=float, default=100.0, help="messages/s of light traffic (0: none)"
    )
    parser.add_argument("--traffic-bytes", type=int, default=100, help="bytes per message")
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
        if args.traffic_rate > 0:
            cluster.create_topic(TRAFFIC_TOPIC, {0: BROKERS})
            wait_for(
                functools.partial(all_in_sync, cluster, [(TRAFFIC_TOPIC, 0)]),
                args.timeout,
                "the traffic partition online with a full ISR",
                interval=0.5,
            )
            run["traffic"] = measure_traffic(
                cluster, args.traffic_rate, args.traffic_bytes, args.measure
            )
            require_full_isrs(
                in_sync(cluster, [(TRAFFIC_TOPIC, 0)]), "the traffic measurement at 0"
            )
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
            require_full_isrs(
                in_sync(cluster, partitions), f"the idle measurement at {len(partitions)}"
            )
            if args.traffic_rate > 0:
                run["traffic"] = measure_traffic(
                    cluster, args.traffic_rate, args.traffic_bytes, args.measure
                )
                require_full_isrs(
                    in_sync(cluster, [*partitions, (TRAFFIC_TOPIC, 0)]),
                    f"the traffic measurement at {len(partitions)}",
                )
            result["runs"].append(run)
            print(json.dumps(run), file=sys.stderr)
    finally:
        cluster.close()
        try:
            zkp.delete_chroot(connect)
        finally:
            zk.close()
            shutil.rmtree(root, ignore_errors=True)
    if args.traffic_rate > 0:
        # The figure: what the traffic costs its leader (broker 1) over its idle CPU, at
        # each partition count; the baseline: the same with the traffic partition alone.
        result["traffic_leader_cpu_over_idle"] = {
            str(run["partitions"]): round(
                run["traffic"]["cpu_fraction"]["1"] - run["cpu_fraction"]["1"], 4
            )
            for run in result["runs"]
            if "traffic" in run
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
