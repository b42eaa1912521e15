"""A broker's restart, holding the logs of many topics: the time from its start to its
registration in ZooKeeper.

A lone broker (RF 1) leads one partition of each of N topics (1,000 by default), each
with its log on disk, and is stopped and started again, ``--rounds`` times. Before it
registers, it loads its logs, and each needs its topic's config from /config/topics/<t>
(what retention, compaction and compression the log follows). The floor, in the same run:
the same broker restarted with its logs moved out of its log directory, so that its
start does all the rest (the interpreter, the configuration, the ZooKeeper session, the
registration) and loads nothing.

    .venv/bin/python benchmarks/bench_broker_restart.py [--topics 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import chroot, emit, round_robin, wait_quiet, write_cluster_state, zookeeper

from cluster.supervised import SupervisedCluster, wait_for

SETTINGS = {"zookeeper.session.timeout.ms": "6000"}


def restarts(
    c: SupervisedCluster, rounds: int, while_stopped: Callable[[int], None] | None = None
) -> list[float]:
    """Seconds from each start of broker 1, stopped, to its registration."""
    out = []
    for n in range(rounds):
        c[1].stop()
        if while_stopped is not None:
            while_stopped(n)
        started = time.monotonic()
        c[1].start()
        c.wait_registered([1], timeout=300)
        out.append(round(time.monotonic() - started, 3))
        c.wait_controller(timeout=300)
        time.sleep(1)
    return out


def run(connect: str, topics: int, rounds: int, root: Path) -> dict[str, object]:
    write_cluster_state(connect, round_robin(topics, 1, (1,)))
    c = SupervisedCluster(connect, root / "cluster", (1,), SETTINGS)
    try:
        c[1].start()
        c.wait_registered([1], timeout=300)
        c.wait_controller(timeout=300)
        wait_quiet(connect)
        log_dir = c[1].first_log_dir

        def held() -> list[str]:
            return [d for d in os.listdir(log_dir) if d.startswith("topic-")]

        wait_for(lambda: len(held()) >= topics, 600, "a log of every topic on disk")
        figures = restarts(c, rounds)

        def move_logs_aside(n: int) -> None:
            # Each round: the controller has made the logs again since (it leads them).
            aside = root / f"aside-{n}"
            aside.mkdir()
            for d in held():
                shutil.move(log_dir / d, aside / d)

        floors = restarts(c, rounds, move_logs_aside)
    finally:
        c.close()
    figure = statistics.median(figures)
    floor = statistics.median(floors)
    return {
        "topics": topics,
        "restart_to_registered_s": figure,
        "rounds": figures,
        "floor_restart_without_logs_s": floor,
        "floor_rounds": floors,
        "logs_cost_s": round(figure - floor, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.topics <= 0 or args.rounds <= 0:
        parser.error("--topics and --rounds must be positive")
    with zookeeper() as connect, tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        result = run(chroot(connect, "restart"), args.topics, args.rounds, Path(tmp))
    emit({"benchmark": "broker_restart", **result})


if __name__ == "__main__":
    main()
