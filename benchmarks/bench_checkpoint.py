"""An offset checkpoint of many partitions rewritten after one offset moved.

A broker writes its high watermark checkpoint every 5 s (Kafka's
replica.high.watermark.checkpoint.interval.ms) whenever a high watermark moved: with
traffic to one partition of 100,000, that is every 5 s. The figure: the rewrite when one
offset moved (the rows' order kept from the last write, unchanged pieces copied from the
file it replaces). The baseline, measured in the same run: the same checkpoint written
in full as every write was before, the partitions sorted and every row formatted. Both
include the write, fsync and rename.

    .venv/bin/python benchmarks/bench_checkpoint.py [--partitions 100000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import at_least, emit

from storage.checkpoints import write_offset_rows
from zkdata.znodes import TopicPartition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--repeat", type=at_least(1), default=7)
    parser.add_argument("--dir", type=Path, help="where to write (default: a temp dir)")
    args = parser.parse_args()
    per_topic = 1000
    partitions = [
        TopicPartition(f"topic-{t:05d}", p)
        for t in range(max(1, args.partitions // per_topic))
        for p in range(min(per_topic, args.partitions))
    ]
    rng = random.Random(1)
    rng.shuffle(partitions)  # the order logs were made in need not be the rows' order
    offsets = [rng.randrange(10**9) for _ in partitions]
    base = Path(tempfile.mkdtemp(prefix="bench-checkpoint-", dir=args.dir))
    try:
        full: list[float] = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            order = sorted(range(len(partitions)), key=partitions.__getitem__)
            write_offset_rows(base / "full", partitions, order, [offsets[i] for i in order])
            full.append(time.perf_counter() - started)
        order = sorted(range(len(partitions)), key=partitions.__getitem__)
        in_order = [offsets[i] for i in order]
        rows = write_offset_rows(base / "kept", partitions, order, in_order)
        moved: list[float] = []
        for _ in range(args.repeat):
            in_order = list(in_order)
            in_order[rng.randrange(len(in_order))] += 1
            started = time.perf_counter()
            rows = write_offset_rows(base / "kept", partitions, order, in_order, rows)
            moved.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    emit(
        {
            "benchmark": "offset_checkpoint",
            "partitions": len(partitions),
            "repeat": args.repeat,
            "one_offset_moved_ms_median": round(statistics.median_high(moved) * 1e3, 2),
            "baseline_full_write_ms_median": round(statistics.median_high(full) * 1e3, 2),
            "python": sys.version.split()[0],
        }
    )


if __name__ == "__main__":
    main()
