"""The failover after the controller crashed, end to end: how long its partitions have no
leader.

The common failover: the controlling broker dies, and with it the leader of its share of
the partitions. A balanced cluster of N partitions (RF 3, 3 brokers, each the preferred
leader of N/3) has its controller SIGKILLed; once ZooKeeper expires its session, another
broker is elected and runs the failover. Figures, in ms from the failover's start (the new
controller's `controller_failover` line):

* `new_leaders_applied_ms`: the last partition the crashed controller led applied by its
  new leader (`leader_and_isr` lines of the surviving brokers): until then that partition
  cannot be written to. No figure unless every one of them got its new leader and every
  surviving broker acknowledged the failover's requests;
* `all_acknowledged_ms`: every request of the failover acknowledged;
* the failover's phases (`controller_failover`), and what it wrote: partition state lines
  of the new controller's epoch, and how many of them left a partition without a leader.

Each round restarts the killed broker, waits for every ISR to be whole again, moves the
leaderships back to the preferred replicas, and kills the controller again. Floor, in the
same run: as many epoch-checked conditional writes of partition state znodes as the
crashed controller led partitions, packed and pipelined (bench_leader_moves.py's).

    .venv/bin/python benchmarks/bench_controller_crash.py [--partitions 30000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench_leader_moves import floor_writes
from common import (
    ROOT,
    at_least,
    chroot,
    elect_preferred_leaders,
    emit,
    require_acknowledged,
    round_robin,
    wait_quiet,
    write_cluster_state,
    zookeeper,
)

from tests.integration.harness import Cluster, wait_for

BROKERS = (1, 2, 3)
SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
    "replica.fetch.wait.max.ms": "500",
}


def first_row(c: Cluster, broker_id: int, event: str, epoch: int) -> dict[str, Any] | None:
    return next(
        (r for r in c[broker_id].state_changes(event) if r["controller_epoch"] == epoch), None
    )


def applied_new_leaders(
    rows_by_broker: dict[int, list[dict[str, Any]]], crashed: int, epoch: int
) -> dict[tuple[str, int], float]:
    """Each partition the crashed broker led with when its new leader first applied it
    (the ``leader_and_isr`` lines of each surviving broker, in the new controller's
    ``epoch``). The partitions it led are those it is the preferred leader of (the
    leaderships were balanced before the kill). A partition applied twice is one."""
    applied: dict[tuple[str, int], float] = {}
    for b, rows in rows_by_broker.items():
        for r in rows:
            if (
                r["controller_epoch"] == epoch
                and r["result"] == "applied"
                and r["leader"] == b
                and r["replicas"][0] == crashed
            ):
                key = (r["topic"], r["partition"])
                applied[key] = min(applied.get(key, r["ts"]), r["ts"])
    return applied


def new_leader_figures(
    acked: dict[str, Any],
    applied: dict[tuple[str, int], float],
    led: int,
    survivors: Iterable[int],
    started_ms: float,
) -> dict[str, int]:
    """Until the last of the `led` partitions was applied by its new leader, from the
    failover's start; RuntimeError unless every one of them was and every surviving
    broker answered the failover's requests (a figure of part of the work is no figure)."""
    if len(applied) != led:
        raise RuntimeError(
            f"{len(applied)} of the {led} partitions the crashed controller led applied"
            " a new leader"
        )
    require_acknowledged(acked, survivors, "the failover's requests")
    return {
        "new_leaders_applied": len(applied),
        "new_leaders_applied_ms": round(max(applied.values()) - started_ms),
    }


def one_crash(c: Cluster, led: int) -> dict[str, Any]:
    """Kill the controller, which leads `led` partitions; measure the failover of the
    broker elected next."""
    crashed, _epoch = c.wait_controller(timeout=60)
    c[crashed].kill()
    new_id, new_epoch = c.wait_controller(not_id=crashed, timeout=120)
    failover = wait_for(
        lambda: first_row(c, new_id, "controller_failover", new_epoch), 120, "the failover"
    )
    acked = wait_for(
        lambda: first_row(c, new_id, "requests_acknowledged", new_epoch),
        120,
        "the failover's requests acknowledged",
    )
    started_ms = failover["ts"] - failover["total_ms"]
    survivors = [b for b in BROKERS if b != crashed]

    def all_applied() -> dict[tuple[str, int], float] | None:
        got = applied_new_leaders(
            {b: c[b].state_changes("leader_and_isr") for b in survivors}, crashed, new_epoch
        )
        return got if len(got) >= led else None

    applied = wait_for(all_applied, 120, "its partitions' new leaders applied")
    written = [
        r for r in c[new_id].state_changes("partition_state") if r["controller_epoch"] == new_epoch
    ]
    return {
        "crashed": crashed,
        "new_controller": new_id,
        **new_leader_figures(acked, applied, led, survivors, started_ms),
        "all_acknowledged_ms": round(acked["learned_at_ms"] + acked["acked_ms"] - started_ms),
        "phases_ms": {k: round(v) for k, v in failover.items() if k.endswith("_ms")},
        "partition_states_written": len(written),
        "written_without_a_leader": sum(1 for r in written if r["leader"] == -1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=at_least(1), default=30_000)
    parser.add_argument("--rounds", type=at_least(1), default=2)
    args = parser.parse_args()
    if args.partitions % (1000 * len(BROKERS)):
        parser.error(f"--partitions must be a multiple of {1000 * len(BROKERS)}")
    rounds: list[dict[str, Any]] = []
    with (
        zookeeper() as server,
        tempfile.TemporaryDirectory(
            prefix="bench-crash-", dir=ROOT / ".zkctl" if (ROOT / ".zkctl").exists() else None
        ) as tmp,
    ):
        floor_s = floor_writes(chroot(server, "crash-floor"), args.partitions // len(BROKERS))[
            "packed_multis_s"
        ]
        connect = chroot(server, "crash")
        assignments = round_robin(args.partitions, 1000)
        write_cluster_state(connect, assignments)
        c = Cluster(connect, Path(tmp) / "cluster", BROKERS, SETTINGS)
        try:
            c.start()
            cid, epoch = c.wait_controller(timeout=600)
            wait_for(lambda: first_row(c, cid, "requests_acknowledged", epoch), 600, "start-up")
            for _ in range(args.rounds):
                wait_quiet(connect)
                elect_preferred_leaders(c.zk, assignments)
                wait_quiet(connect)
                time.sleep(2)
                r = one_crash(c, args.partitions // len(BROKERS))
                rounds.append(r)
                c[r["crashed"]].start()
        finally:
            c.close()
    emit(
        {
            "benchmark": "controller_crash",
            "partitions": args.partitions,
            "led_by_the_crashed_controller": args.partitions // len(BROKERS),
            "new_leaders_applied_ms": statistics.median_high(
                r["new_leaders_applied_ms"] for r in rounds
            ),
            "all_acknowledged_ms": statistics.median_high(r["all_acknowledged_ms"] for r in rounds),
            "floor_packed_writes_ms": round(floor_s * 1000),
            "rounds": rounds,
        }
    )


if __name__ == "__main__":
    main()
