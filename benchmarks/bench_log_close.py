"""A broker's logs closed at a clean shutdown.

After a controlled shutdown a broker closes its logs: each one flushed (its data, its new
files, the leader epoch entries a LeaderAndIsr assigned), then the offset checkpoints and
the clean-shutdown marker. Until that is done its registration stays in ZooKeeper (the
session is closed last), and `zkctl down` kills a broker that takes longer than 30 s,
after which the next start recovers every log.

The figures: `LogManager.close()` of `--partitions` logs, each with a leader epoch entry
not yet written (as after a LeaderAndIsr), every log directory new, `--written` of them
holding a batch (a written segment keeps three files open: a broker's descriptor limit
bounds how many), with the file systems synced (syncfs) around the renames of the epoch
checkpoints, and the epoch entries no batch carries left out (the load drops them); then
the next start's load of the same logs. The baseline, measured in the same run on a
fresh set of the same logs: the same close flushing log by log (fsyncs of each segment,
epoch checkpoint and directory, every entry written), as it did before and still does
where syncfs(2) is missing, and the load after it (which drops the idle logs' entries
again, rewriting their files). Rounds alternate the two.

    .venv/bin/python benchmarks/bench_log_close.py [--partitions 30000] [--written 1000]
        [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from common import at_least, emit

import storage.log_manager as log_manager_module
from broker.config import BrokerConfig
from storage.checkpoints import can_sync_filesystems
from storage.log_manager import LogManager
from storage.testing import build_batch
from zkdata.znodes import TopicPartition

NOW = 1_700_000_000_000


CONFIG = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": "1"})


def logs_as_after_leader_and_isr(directory: Path, partitions: int, written: int) -> LogManager:
    manager = LogManager([directory], CONFIG)
    batch = build_batch([b"x" * 100] * 3, base_timestamp=NOW)
    for p in range(partitions):
        log = manager.get_or_create(
            TopicPartition(f"topic-{p // 1000:04d}", p % 1000), sync_dir=False
        )
        log.assign_epoch_start_offset(1, 0)
        if p < written:
            log.append_as_leader(bytearray(batch), 1)
    manager.sync_new_dirs()
    return manager


def close_then_load(
    root: Path, partitions: int, written: int, *, syncfs: bool
) -> tuple[float, float]:
    """Seconds to close the logs, then to load them again (the next start)."""
    directory = Path(tempfile.mkdtemp(prefix="logs-", dir=root))
    manager = logs_as_after_leader_and_isr(directory, partitions, written)
    real = log_manager_module.can_sync_filesystems
    if not syncfs:
        log_manager_module.can_sync_filesystems = lambda: False  # type: ignore[assignment]
    try:
        os.sync()  # the set-up's (and the last round's) writes are not this close's work
        started = time.perf_counter()
        manager.close()
        closed = time.perf_counter() - started
        log_manager_module.can_sync_filesystems = real  # type: ignore[assignment]
        os.sync()
        started = time.perf_counter()
        again = LogManager([directory], CONFIG)
        loaded = time.perf_counter() - started
        again.close()
        return closed, loaded
    finally:
        log_manager_module.can_sync_filesystems = real  # type: ignore[assignment]
        shutil.rmtree(directory)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=30_000)
    parser.add_argument("--written", type=int, default=1000, help="logs holding a batch")
    parser.add_argument("--rounds", type=at_least(1), default=1)
    parser.add_argument("--dir", type=Path, default=None, help="where the logs go (a disk)")
    args = parser.parse_args()
    if not can_sync_filesystems():
        raise SystemExit("syncfs(2) is not available here: nothing to compare")
    figures: dict[bool, dict[str, list[float]]] = {
        True: {"close_s": [], "then_load_s": []},
        False: {"close_s": [], "then_load_s": []},
    }
    with tempfile.TemporaryDirectory(prefix="bench-close-", dir=args.dir) as tmp:
        for r in range(args.rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for syncfs in order:
                closed, loaded = close_then_load(
                    Path(tmp), args.partitions, args.written, syncfs=syncfs
                )
                figures[syncfs]["close_s"].append(round(closed, 3))
                figures[syncfs]["then_load_s"].append(round(loaded, 3))
    emit(
        {
            "benchmark": "log_close",
            "partitions": args.partitions,
            "written": args.written,
            "syncing_the_file_system": figures[True],
            "baseline_log_by_log": figures[False],
        }
    )


if __name__ == "__main__":
    main()
