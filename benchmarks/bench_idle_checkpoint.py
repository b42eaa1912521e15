"""A broker's periodic high watermark checkpoint among many idle logs.

A broker checks its high watermark checkpoint every 5 s (Kafka's
replica.high.watermark.checkpoint.interval.ms), and the recovery point and log start
checkpoints every minute. With 100,000 logs of which none or one moved, two figures:

- nothing moved: the check as the log manager makes it now (while no log came or went
  and no offset moved, nothing is read), its time and the memory it takes while it runs;
- one high watermark moved: the write as it is made now (only the moved log is read and
  its piece of rows formatted), its time, and the longest a thread sleeping 0.2 ms at a
  time waited past its sleep during the writes (a produce waits like it for the GIL).

The baseline of each, measured in the same run: the same checkpoint after a log came or
went (the manager's generation bumped first), which copies the logs' table, reads every
log's offset and compares them: what every check and write did before.

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

from common import Sleeper, at_least, emit

from broker.config import BrokerConfig
from broker.server import set_switch_interval
from storage.log_manager import LogManager
from storage.testing import build_batch
from zkdata.znodes import TopicPartition


def median_time(check: Callable[[], None], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        check()
        times.append(time.perf_counter() - started)
    return statistics.median_high(times)


def timed(check: Callable[[], None], repeat: int) -> tuple[float, float]:
    """(median seconds, peak MiB traced during one more check)."""
    median = median_time(check, repeat)
    tracemalloc.start()
    try:
        check()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return median, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--repeat", type=at_least(1), default=9)
    parser.add_argument("--dir", type=Path, help="where the logs go (default: a temp dir)")
    args = parser.parse_args()
    set_switch_interval()  # a thread waits for the GIL as long as in a broker
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

        moving = manager.get_log(TopicPartition("topic-00000", 0))
        assert moving is not None
        moving.append_as_leader(build_batch([b"x"] * 10_000, base_timestamp=0), 1)
        high_watermark = iter(range(1, 10_000))

        def moved_now() -> None:
            moving.update_high_watermark(next(high_watermark))
            manager.checkpoint_high_watermarks()

        def moved_before() -> None:
            moving.update_high_watermark(next(high_watermark))
            before()

        with Sleeper() as beside_now:  # not beside tracemalloc, which slows what it traces
            moved_now_s = median_time(moved_now, args.repeat)
        with Sleeper() as beside_before:
            moved_before_s = median_time(moved_before, args.repeat)
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
            "one_moved_write_ms_median": round(moved_now_s * 1e3, 1),
            "one_moved_longest_wait_beside_ms": round(beside_now.longest_late_s * 1e3, 2),
            "baseline_one_moved_write_ms_median": round(moved_before_s * 1e3, 1),
            "baseline_one_moved_longest_wait_beside_ms": round(
                beside_before.longest_late_s * 1e3, 2
            ),
            "python": sys.version.split()[0],
        }
    )


if __name__ == "__main__":
    main()
