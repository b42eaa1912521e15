"""A broker's periodic check of its offset checkpoints while nothing changed.

A broker checks its high watermark checkpoint every 5 s (Kafka's
replica.high.watermark.checkpoint.interval.ms), and the recovery point and log start
checkpoints every minute; with 100,000 idle logs nothing is written. The figure: that
check as the log manager makes it now (while no log came or went, each log's offset is
compared in place with the last write's), its time and the memory it takes while it runs.
The baseline, measured in the same run: the same check as it was made before (a copy of
the logs' table, the logs and their offsets listed, then compared), which is what every
check still does after a log came or went.

    .venv/bin/python benchmarks/bench_idle_checkpoint.py [--partitions 100000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from common import at_least, emit

from broker.config import BrokerConfig
from storage.log_manager import LogManager
from zkdata.znodes import TopicPartition


def timed(check: Callable[[], None], repeat: int) -> tuple[float, float]:
    """(median seconds, peak MiB traced during one check)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        check()
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    try:
        check()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return statistics.median_high(times), peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--repeat", type=at_least(1), default=9)
    parser.add_argument("--dir", type=Path, help="where the logs go (default: a temp dir)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-idle-checkpoint-", dir=args.dir))
    config = BrokerConfig.from_properties(
        {"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1", "log.dirs": str(base)}
    )
    manager = LogManager([base], config)
    try:
        per_topic = 1000
        for n in range(args.partitions):
            manager.get_or_create(
                TopicPartition(f"topic-{n // per_topic:05d}", n % per_topic), sync_dir=False
            )
        manager.sync_new_dirs()
        manager.checkpoint_high_watermarks()  # the first write

        def before() -> None:
            manager._generation += 1  # as if a log came or went: the copying check
            manager.checkpoint_high_watermarks()

        now_s, now_peak = timed(manager.checkpoint_high_watermarks, args.repeat)
        before_s, before_peak = timed(before, args.repeat)
    finally:
        manager.close()
        shutil.rmtree(base, ignore_errors=True)
    emit(
        {
            "benchmark": "idle_checkpoint",
            "partitions": args.partitions,
            "repeat": args.repeat,
            "check_ms_median": round(now_s * 1e3, 1),
            "check_peak_mib": round(now_peak, 2),
            "baseline_copying_check_ms_median": round(before_s * 1e3, 1),
            "baseline_copying_check_peak_mib": round(before_peak, 2),
            "python": sys.version.split()[0],
        }
    )


if __name__ == "__main__":
    main()
