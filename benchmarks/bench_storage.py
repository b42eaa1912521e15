"""The storage layer on its own: append and read throughput, RSS as a log grows, fsync cost.

    .venv/bin/python benchmarks/bench_storage.py [--dir /path] [--grow-mb 2000]

Prints one JSON object:

* ``append``: the leader's path (validate + assign offsets and epoch in place + write)
  for batches of 1 KiB records (16 KiB and 64 KiB batches), in MB/s, beside the floor
  measured in the same run: a plain ``os.write`` of the same bytes to a file.
* ``read``: sequential 1 MiB reads materialised as bytes, beside ``os.pread`` of the
  same file in 1 MiB chunks; the latency of a read at a random offset and at the log
  end (a follower or consumer that is caught up); and the speed of recovery after an
  unclean shutdown (every batch's CRC checked, indexes rebuilt; page cache warm).
* ``rss``: the process's resident memory as one log grows from 100 MB to 2 GB, with
  random reads at every step (nothing held in memory may grow with the log).
* ``fsync``: what a flush costs here (after 16 KiB and 1 MiB writes), and the append
  throughput with ``flush.messages=1`` (an fsync per batch).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import at_least, rss_mb  # noqa: E402

from storage.log import LogConfig, PartitionLog  # noqa: E402
from storage.testing import build_batch  # noqa: E402

RECORD = 1024
MB = 1_000_000


def templates(records_per_batch: int, count: int = 16) -> list[bytearray]:
    """Distinct producer batches of 1 KiB records (random bytes: nothing compresses)."""
    rng = random.Random(records_per_batch)
    return [
        build_batch([rng.randbytes(RECORD) for _ in range(records_per_batch)]) for _ in range(count)
    ]


def bench_append(directory: Path, records_per_batch: int, total_mb: int) -> dict[str, float]:
    """Leader appends vs os.write of the same bytes. Each append gets a fresh copy of a
    producer batch (as a request buffer would be), made outside the timed part."""
    batches = templates(records_per_batch)
    batch_size = len(batches[0])
    os.sync()  # start without the previous run's dirty pages being written back
    rounds = max(1, total_mb * MB // (batch_size * 64))
    log = PartitionLog(directory / f"append{records_per_batch}-0", LogConfig())
    floor_fd = os.open(
        directory / f"floor{records_per_batch}", os.O_WRONLY | os.O_CREAT | os.O_APPEND
    )
    log_seconds = floor_seconds = 0.0
    written = 0
    for r in range(rounds):
        copies = [bytearray(batches[(r + i) % len(batches)]) for i in range(64)]
        started = time.perf_counter()
        for copy in copies:
            log.append_as_leader(copy, 1)
        log_seconds += time.perf_counter() - started
        started = time.perf_counter()
        for copy in copies:
            os.write(floor_fd, copy)
        floor_seconds += time.perf_counter() - started
        written += batch_size * 64
    os.close(floor_fd)
    log.close()
    return {
        "batch_bytes": batch_size,
        "mb": round(written / MB),
        "append_mb_s": round(written / MB / log_seconds),
        "floor_os_write_mb_s": round(written / MB / floor_seconds),
        "ratio_to_floor": round(log_seconds / floor_seconds, 2),
        "us_per_batch": round(log_seconds / (rounds * 64) * 1e6, 1),
        "floor_us_per_batch": round(floor_seconds / (rounds * 64) * 1e6, 1),
    }


def bench_read(directory: Path) -> dict[str, float]:
    log = PartitionLog(directory / "append16-0", LogConfig(), clean_shutdown=True)
    size = log.size_in_bytes
    offset, got = 0, 0
    started = time.perf_counter()
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 20)
        got += len(read.to_bytes())
        offset = read.next_offset
    read_seconds = time.perf_counter() - started
    fd = os.open(directory / "append16-0" / "00000000000000000000.log", os.O_RDONLY)
    position = 0
    started = time.perf_counter()
    while position < size:
        position += len(os.pread(fd, 1 << 20, position))
    floor_seconds = time.perf_counter() - started
    os.close(fd)
    rng = random.Random(7)
    leo = log.log_end_offset
    samples = [rng.randrange(leo) for _ in range(2000)]
    started = time.perf_counter()
    for target in samples:
        log.read(target, 16 * 1024)
    random_us = (time.perf_counter() - started) / len(samples) * 1e6
    started = time.perf_counter()
    for _ in range(2000):
        log.read(leo - 1, 1 << 20)
    tail_us = (time.perf_counter() - started) / 2000 * 1e6
    log.close()
    assert got == size, (got, size)
    started = time.perf_counter()
    recovered = PartitionLog(directory / "append16-0", LogConfig(), clean_shutdown=False)
    recovery_seconds = time.perf_counter() - started
    assert recovered.recovery_report.bytes_recovered == size
    recovered.close()
    return {
        "mb": round(size / MB),
        "read_mb_s": round(size / MB / read_seconds),
        "floor_pread_mb_s": round(size / MB / floor_seconds),
        "ratio_to_floor": round(read_seconds / floor_seconds, 2),
        "random_offset_read_us": round(random_us, 1),
        "log_end_read_us": round(tail_us, 1),
        "unclean_recovery_mb_s": round(size / MB / recovery_seconds),
    }


def bench_rss(directory: Path, grow_mb: int) -> dict[str, object]:
    """Grow one log to ``grow_mb`` (default segment size 1 GiB, and also many segments
    since it rolls at 256 MiB here) with random reads at each step."""
    batches = templates(16)
    os.sync()
    log = PartitionLog(directory / "grow-0", LogConfig(segment_bytes=256 << 20))
    steps = [s for s in (100, 250, 500, 1000, 1500, 2000, 3000, 4000) if s < grow_mb]
    steps.append(grow_mb)  # the last step is the size asked for, whatever it is
    rng = random.Random(1)
    samples: list[dict[str, float]] = []
    size = 0
    i = 0
    for step in steps:
        while size < step * MB:
            info = log.append_as_leader(bytearray(batches[i % len(batches)]), 1)
            size += info.size
            i += 1
        for _ in range(500):
            log.read(rng.randrange(log.log_end_offset), 1 << 20).to_bytes()
        log.offset_for_timestamp(0)
        samples.append(
            {
                "log_mb": round(size / MB),
                "segments": len(log.segment_base_offsets()),
                "rss_mb": round(rss_mb(os.getpid()), 1),
            }
        )
        print(json.dumps({"rss_step": samples[-1]}), file=sys.stderr, flush=True)
    log.close()
    values = [s["rss_mb"] for s in samples]
    return {
        "steps": samples,
        "rss_growth_mb": round(values[-1] - values[0], 1),
    }


def bench_fsync(directory: Path) -> dict[str, float]:
    os.sync()  # measure fsync itself, not the write-back of the runs before
    fd = os.open(directory / "fsync-probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    result: dict[str, float] = {}
    for label, size in (("16KiB", 16 * 1024), ("1MiB", 1 << 20)):
        payload = os.urandom(size)
        times = []
        for _ in range(50):
            os.write(fd, payload)
            started = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - started)
        result[f"fsync_after_{label}_write_ms_median"] = round(
            statistics.median_high(times) * 1e3, 3
        )
        result[f"fsync_after_{label}_write_ms_p99"] = round(
            sorted(times)[int(len(times) * 0.99) - 1] * 1e3, 3
        )
    started = time.perf_counter()
    for _ in range(50):
        os.fsync(fd)
    result["fsync_nothing_new_ms"] = round((time.perf_counter() - started) / 50 * 1e3, 3)
    os.close(fd)
    batches = templates(16, 4)
    log = PartitionLog(directory / "flushy-0", LogConfig(flush_messages=1))
    count = 200
    copies = [bytearray(batches[i % 4]) for i in range(count)]
    started = time.perf_counter()
    for copy in copies:
        log.append_as_leader(copy, 1)
    seconds = time.perf_counter() - started
    log.close()
    result["append_mb_s_with_flush_messages_1"] = round(len(copies[0]) * count / MB / seconds, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--append-mb", type=at_least(1), default=512, help="MB per append run")
    parser.add_argument(
        "--grow-mb", type=at_least(1), default=2000, help="how far the RSS run grows a log"
    )
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=args.dir))
    try:
        result: dict[str, object] = {"rss_at_start_mb": round(rss_mb(os.getpid()), 1)}
        result["append_16KiB_batches"] = bench_append(base, 16, args.append_mb)
        result["append_64KiB_batches"] = bench_append(base, 64, args.append_mb)
        result["read"] = bench_read(base)
        for child in base.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        result["rss"] = bench_rss(base, args.grow_mb)
        shutil.rmtree(base / "grow-0")
        result["fsync"] = bench_fsync(base)
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
