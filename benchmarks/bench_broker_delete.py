"""A broker deleting the partitions of a StopReplica (delete=true), in one process.

bench_topic_deletion.py times a deletion end to end, where each broker's renaming of its
logs shares the CPU with the controller, ZooKeeper and the other brokers; this one times
only what a broker does with the controller's StopReplica, so a change to it shows.
Broker 1 holds N partitions (RF 3, 1,000 to a topic, as bench_broker_apply.py lays them
out) with their logs on disk; the StopReplica names them all with delete=true and leader
epoch -2 (a topic deletion's). Timed: the request applied (`ReplicaManager.stop_replicas`:
the partitions leave the replica manager (no fetcher runs here), each log's handlers closed,
its directory renamed to ``<topic>-<partition>.<id>-delete``, the log directory synced and
its checkpoints written once). Timed apart, before it: what the deletion's UpdateMetadata
requests (the controller sends them first, in chunks of at most 10,000 partitions, whole
topics) make the broker do with its logs: `ReplicaManager.delete_orphaned_logs` of each
chunk's topics, which looks for logs of them no partition holds (none here) and lets the
log directories forget ids of topics they no longer hold.

Floor, in the same run and the same file system: renaming as many directories of the same
names, one ``os.rename`` each, then one fsync of their parent: the system calls a broker
cannot skip. Medians of --rounds rounds (each on logs made anew by a LeaderAndIsr), in
seconds. With --cleaned, every log has an entry in its directory's cleaner checkpoint
(as every log of a compacted topic cleaned once has), which the deletion takes out
before the renames.

    .venv/bin/python benchmarks/bench_broker_delete.py [--partitions N] [--rounds R] [--cleaned]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker_apply import BROKER, LAIR_VERSION, leader_and_isr, timed, topics

from broker.config import BrokerConfig
from broker.replica_manager import ReplicaManager
from broker.state_change_log import StateChangeLog
from controller.request_batch import MAX_PARTITIONS_PER_REQUEST
from storage.checkpoints import fsync_dir
from storage.cleaner import LogCleaner
from storage.log_manager import LogManager
from wire.codec import get_codec

DELETE_EPOCH = -2  # EpochDuringDelete


def stop_replica(layout: list[tuple[str, Any, int]], controller_epoch: int) -> dict[str, Any]:
    return {
        "controller_id": 3,
        "controller_epoch": controller_epoch,
        "broker_epoch": -1,
        "topic_states": [
            {
                "topic_name": name,
                "partition_states": [
                    {"partition_index": p, "leader_epoch": DELETE_EPOCH, "delete_partition": True}
                    for p in range(count)
                ],
            }
            for name, _topic_id, count in layout
        ],
    }


def floor_renames(root: str, layout: list[tuple[str, Any, int]]) -> float:
    """Seconds to rename as many directories, named as the broker's, then sync their parent."""
    names = [f"{name}-{p}" for name, _topic_id, count in layout for p in range(count)]
    for n in names:
        os.mkdir(os.path.join(root, n))
    tail = ".0123456789abcdef0123456789abcdef-delete"
    start = time.perf_counter()
    for n in names:
        source = os.path.join(root, n)
        os.rename(source, source + tail)
    fsync_dir(Path(root))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cleaned", action="store_true", help="every log in the checkpoint")
    args = parser.parse_args()
    if args.partitions < 1 or args.rounds < 1:
        parser.error("--partitions and --rounds must be at least 1")

    layout = topics(args.partitions)
    lair_codec = get_codec("LeaderAndIsrRequest", LAIR_VERSION)
    rounds = []
    for r in range(args.rounds):
        with (
            tempfile.TemporaryDirectory(prefix="bench-broker-delete-") as tmp,
            tempfile.TemporaryDirectory(prefix="bench-broker-delete-floor-") as floor_tmp,
        ):
            config = BrokerConfig.from_properties(
                {"zookeeper.connect": "unused:2181", "broker.id": str(BROKER), "log.dirs": tmp}
            )
            logs = LogManager([tmp], config)
            replicas = ReplicaManager(
                BROKER, cast(Any, None), StateChangeLog(tmp, BROKER), logs=logs
            )
            try:
                made = replicas.become_leader_or_follower(
                    lair_codec.decode(lair_codec.encode(leader_and_isr(layout, 0)))
                )
                if any(e["error_code"] for t in made["topics"] for e in t["partition_errors"]):
                    raise SystemExit("the LeaderAndIsr making the logs was refused")
                if len(logs.all_logs()) != args.partitions:
                    raise SystemExit(f"{len(logs.all_logs())} logs made, not {args.partitions}")
                if args.cleaned:
                    with logs.cleaner._lock:
                        entries = logs.cleaner._entries_locked(tmp)
                        entries.update({(tp.topic, tp.partition): 0 for tp in logs.all_logs()})
                        LogCleaner._write_locked(tmp, entries)
                chunks: list[list[str]] = [[]]
                in_chunk = 0
                for name, _topic_id, count in layout:
                    if in_chunk and in_chunk + count > MAX_PARTITIONS_PER_REQUEST:
                        chunks.append([])
                        in_chunk = 0
                    chunks[-1].append(name)
                    in_chunk += count
                orphans_s, found = timed(list, map(replicas.delete_orphaned_logs, chunks))
                if any(found) or len(logs.all_logs()) != args.partitions:
                    raise SystemExit(f"round {r}: logs held by partitions deleted as orphans")
                delete_s, answer = timed(replicas.stop_replicas, stop_replica(layout, 5))
                failed = sum(1 for e in answer["partition_errors"] if e["error_code"])
                if answer["error_code"] or failed:
                    raise SystemExit(f"round {r}: {failed} partitions not deleted")
                if logs.all_logs():
                    raise SystemExit(f"round {r}: {len(logs.all_logs())} logs left")
            finally:
                replicas.close()
                logs.close()
            rounds.append(
                {
                    "delete_s": round(delete_s, 4),
                    "orphan_checks_s": round(orphans_s, 4),
                    "update_metadata_chunks": len(chunks),
                    "floor_renames_s": round(floor_renames(floor_tmp, layout), 4),
                }
            )

    delete = statistics.median_high(r["delete_s"] for r in rounds)
    floor = statistics.median_high(r["floor_renames_s"] for r in rounds)
    report = {
        "benchmark": "broker_delete",
        "what": "a StopReplica (delete=true) of every partition applied; floor: os.rename of as"
        " many directories, then one fsync",
        "partitions": args.partitions,
        "cleaned": args.cleaned,
        "delete_s": delete,
        "delete_us_per_partition": round(delete / args.partitions * 1e6, 1),
        "floor_renames_s": floor,
        "delete_vs_floor": round(delete / floor, 2),
        "orphan_checks_s": statistics.median_high(r["orphan_checks_s"] for r in rounds),
        "rounds": rounds,
        "python": platform.python_version(),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
