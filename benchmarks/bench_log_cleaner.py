"""The log cleaner compacting a __consumer_offsets partition, and a new coordinator's load
of it before and after, in one process.

A partition of N offset commits (each of P partitions of one of G groups, one batch each,
so G * P keys), written through a real replica manager's leader appends into segments of
``--segment-mb``; then:

- the load before: the partition moved away and led here again, timed until the coordinator
  has loaded it (as bench_group_load);
- the cleaning: one cleaning of the whole log (every closed segment), by the broker's
  log cleaner. Two floors, in the same run: copying the same segment files (reading
  them in 1 MiB chunks, writing one file, fsync), which any rewrite of them costs; and
  decoding every record of them once with the project's record decoder (``iter_records``),
  which any compaction by key costs at least (the cleaner reads the dirty part twice, to
  map its keys, then to filter);
- the load after: the same timing on the compacted partition, with the offsets it
  loaded checked against the last commit of every group.

    .venv/bin/python benchmarks/bench_log_cleaner.py [--commits 100000] [--partitions 10]
        [--groups 100] [--segment-mb 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_group_load import CONFIG, OFFSETS_TP, led_again, offsets_leader, write_commits
from common import at_least, emit

from broker.config import effective_topic_config
from broker.group_apis import offsets_topic_configs
from broker.replica_manager import ReplicaManager
from groups.coordinator import GroupCoordinator
from storage.cleaner import clean_log
from storage.log import PartitionLog
from storage.records import iter_batches, iter_records
from wire.errors import ErrorCode


def copy_segments(log: PartitionLog, target: Path) -> float:
    """The floor: the closed segments' bytes read and written once, fsynced."""
    started = time.perf_counter()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for segment in log.segments_snapshot()[:-1]:
            position = 0
            while position < segment.size:
                chunk = segment.log.pread(min(1 << 20, segment.size - position), position)
                os.write(fd, chunk)
                position += len(chunk)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - started


def decode_segments(log: PartitionLog) -> float:
    """The other floor: every record of the closed segments decoded once."""
    started = time.perf_counter()
    records = 0
    for segment in log.segments_snapshot()[:-1]:
        data = segment.log.pread(segment.size, 0)
        for header in iter_batches(data):
            records += sum(
                1 for _ in iter_records(data[header.position : header.position + header.size])
            )
    if not records:
        raise RuntimeError("no record decoded")
    return time.perf_counter() - started


def load_time(
    replicas: ReplicaManager, coordinator: GroupCoordinator, epoch: int, expected: dict[str, int]
) -> float:
    started = time.perf_counter()
    led_again(replicas, epoch)
    while coordinator.coordinates("group-0") != ErrorCode.NONE:
        time.sleep(0.001)
    took = time.perf_counter() - started
    for group, last in expected.items():
        error, found = coordinator.fetch_offsets(group, None)
        if error != ErrorCode.NONE or {v.offset for v in found.values() if v} != {last}:
            raise RuntimeError(f"{group}: loaded wrong offsets: {error}, {found}")
    return took


def run(commits: int, partitions: int, groups: int, segment_mb: int, rounds: int) -> dict[str, Any]:
    topic_config = effective_topic_config(CONFIG, offsets_topic_configs(segment_mb << 20))
    results: dict[str, list[float]] = {
        "before": [],
        "clean": [],
        "copy": [],
        "decode": [],
        "after": [],
    }
    sizes: dict[str, float] = {}
    for _ in range(rounds):
        with (
            tempfile.TemporaryDirectory() as tmp,
            offsets_leader(Path(tmp), topic_config) as (
                replicas,
                coordinator,
            ),
        ):
            write_commits(replicas, commits, partitions, groups)
            p = replicas.partitions[OFFSETS_TP]
            assert p.log is not None
            expected = {
                f"group-{g}": max(i for i in range(commits) if i % groups == g)
                for g in range(groups)
            }
            sizes["log_mb"] = p.log.size_in_bytes / 1e6
            sizes["segments_before"] = len(p.log.segments_snapshot())
            results["before"].append(load_time(replicas, coordinator, 1, expected))
            results["copy"].append(copy_segments(p.log, Path(tmp) / "copy"))
            results["decode"].append(decode_segments(p.log))
            started = time.perf_counter()
            result = clean_log(p.log, checkpoint=None, map_bytes=128 << 20, force=True)
            results["clean"].append(time.perf_counter() - started)
            if result is None or not result.complete:
                raise RuntimeError(f"the cleaning did not complete: {result}")
            sizes["cleaned_mb_read"] = result.bytes_read / 1e6
            sizes["cleaned_mb_written"] = result.bytes_written / 1e6
            sizes["log_mb_after"] = p.log.size_in_bytes / 1e6
            sizes["segments_after"] = len(p.log.segments_snapshot())
            results["after"].append(load_time(replicas, coordinator, 3, expected))
    clean = statistics.median_high(results["clean"])
    copy = statistics.median_high(results["copy"])
    decode = statistics.median_high(results["decode"])
    return {
        "benchmark": "log_cleaner",
        "commits": commits,
        "partitions_per_commit": partitions,
        "groups": groups,
        "segment_mb": segment_mb,
        **{k: round(v, 1) for k, v in sizes.items()},
        "clean_s": [round(s, 3) for s in results["clean"]],
        "floor_copy_s": [round(s, 3) for s in results["copy"]],
        "floor_decode_s": [round(s, 3) for s in results["decode"]],
        "clean_vs_copy": round(clean / copy, 1),
        "clean_vs_decode": round(clean / decode, 2),
        "cleaned_mb_per_s": round(sizes["cleaned_mb_read"] / clean, 1),
        "load_before_s": [round(s, 3) for s in results["before"]],
        "load_after_s": [round(s, 3) for s in results["after"]],
        "load_after_vs_before": round(
            statistics.median_high(results["after"]) / statistics.median_high(results["before"]), 3
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--segment-mb", type=int, default=8)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    args = parser.parse_args()
    emit(run(args.commits, args.partitions, args.groups, args.segment_mb, args.rounds))


if __name__ == "__main__":
    main()
