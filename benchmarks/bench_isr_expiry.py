"""A leader's ISR expiry scan among many idle partitions.

Every 15 s (replica.lag.time.max.ms / 2) a leader asks which followers in its partitions'
ISRs fell out of sync (Kafka's maybeShrinkIsr). A broker of a 100,000-partition cluster
(RF 3, three brokers) hosts every partition and leads a third. With every follower at
the log end and fetching in its session:

- idle: the scan as the replica manager makes it now (only partitions watched since the
  last are read, unless a session clock is too old), its median time, the memory it
  keeps between scans, and the longest a thread sleeping 0.2 ms at a time waited past
  its sleep during the scans (a produce waits like it for the GIL);
- every partition to read: the same scan when every partition had an append since the
  last (each one watched), and just after a follower's new session fetched every
  partition;
- baseline, measured in the same run: a read of every partition led, follower by
  follower, as the scan made it before (the same check), with the same figures.

    .venv/bin/python benchmarks/bench_isr_expiry.py [--partitions 100000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from common import Sleeper, at_least, emit

from broker.fetch_session import FetchClock
from broker.replica_manager import Partition, ReplicaManager, _now_ms
from broker.server import set_switch_interval
from broker.state_change_log import StateChangeLog

LEADER = 1
FOLLOWERS = (2, 3)
PER_TOPIC = 1000


def leader_of(n: int) -> int:
    """This broker leads a third of the partitions and follows the rest."""
    return (LEADER, *FOLLOWERS)[n % 3]


def leader_and_isr(partitions: int) -> dict[str, Any]:
    """Every partition on this broker; ISR and replicas 1, 2, 3."""
    topics = (partitions + PER_TOPIC - 1) // PER_TOPIC
    return {
        "controller_id": 2,
        "controller_epoch": 1,
        "broker_epoch": 100,
        "topic_states": [
            {
                "topic_name": f"topic-{t:04d}",
                "topic_id": uuid.UUID(int=t + 1),
                "partition_states": [
                    {
                        "partition_index": p,
                        "controller_epoch": 1,
                        "leader": leader_of(t * PER_TOPIC + p),
                        "leader_epoch": 1,
                        "isr": [LEADER, *FOLLOWERS],
                        "partition_epoch": 1,
                        "replicas": [LEADER, *FOLLOWERS],
                        "adding_replicas": [],
                        "removing_replicas": [],
                        "is_new": True,
                    }
                    for p in range(min(PER_TOPIC, partitions - t * PER_TOPIC))
                ],
            }
            for t in range(topics)
        ],
    }


def read_every_partition(rm: ReplicaManager) -> dict[int, list[Partition]]:
    """The scan before: every partition led, every ISR follower's caught-up time."""
    now = _now_ms()
    partitions = list(rm.partitions.values())
    lagging_in: dict[int, list[Partition]] = {}
    me, max_lag = rm.broker_id, rm.replica_lag_time_max_ms
    for p in partitions:
        if p.leader != me or p.stale:
            continue
        leo = p.log_end_offset
        isr = p.isr
        for r, state in p.followers.pairs():
            if r in isr and now - state.caught_up_ms(leo) > max_lag:
                lagging_in.setdefault(r, []).append(p)
    return lagging_in


def timed(
    scan: Callable[[], dict[int, list[Partition]]], before: Callable[[], None], repeat: int
) -> tuple[float, float]:
    """(median seconds of ``scan``, each after ``before``; the longest a sleeping thread
    beside the scans waited past its sleep)."""
    times = []
    longest_late_s = 0.0
    with Sleeper() as beside:
        for _ in range(repeat):
            before()
            time.sleep(0.02)  # what ``before`` kept the sleeper waiting for is not counted
            beside.longest_late_s = 0.0
            started = time.perf_counter()
            lagging = scan()
            times.append(time.perf_counter() - started)
            time.sleep(0.002)  # the sleep under way during the scan ends
            longest_late_s = max(longest_late_s, beside.longest_late_s)
            assert not lagging, "a follower was named out of sync"
    return statistics.median_high(times), longest_late_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=at_least(1), default=100_000)
    parser.add_argument("--repeat", type=at_least(1), default=9)
    args = parser.parse_args()
    set_switch_interval()  # a thread waits for the GIL as long as in a broker
    with tempfile.TemporaryDirectory(prefix="bench-isr-expiry-") as tmp:
        rm = ReplicaManager(LEADER, cast(Any, None), StateChangeLog(Path(tmp), LEADER))
        try:
            rm.become_leader_or_follower(leader_and_isr(args.partitions))
            assert len(rm.partitions) == args.partitions
            led = [p for p in rm.partitions.values() if p.leader == LEADER]
            clocks = {r: FetchClock() for r in FOLLOWERS}

            def sessions_fetch() -> None:
                """A round of each follower's session that lists nothing (none moved)."""
                for r, clock in clocks.items():
                    rm.record_follower_fetches(r, [], clock)

            def appended() -> None:
                """Every partition had an append its followers fetched (a load on all)."""
                for p in led:
                    rm._isr_expiry.watch(p)
                sessions_fetch()

            def new_session() -> None:
                """Follower 2's session is replaced: its first fetch lists everything."""
                clocks[2] = FetchClock()
                rm.record_follower_fetches(2, [(p, 0) for p in led], clocks[2])
                sessions_fetch()

            for r, clock in clocks.items():
                rm.record_follower_fetches(r, [(p, 0) for p in led], clock)
            tracemalloc.start()
            try:
                before_bytes = tracemalloc.get_traced_memory()[0]
                assert not rm.followers_out_of_sync()  # the first reads all
                kept_bytes = tracemalloc.get_traced_memory()[0] - before_bytes
            finally:
                tracemalloc.stop()
            idle_s, idle_wait_s = timed(rm.followers_out_of_sync, sessions_fetch, args.repeat)
            appended_s, appended_wait_s = timed(rm.followers_out_of_sync, appended, args.repeat)
            all_s, all_wait_s = timed(rm.followers_out_of_sync, new_session, args.repeat)
            base_s, base_wait_s = timed(
                lambda: read_every_partition(rm), sessions_fetch, args.repeat
            )
        finally:
            rm.close()
    emit(
        {
            "benchmark": "isr_expiry",
            "partitions": args.partitions,
            "partitions_led": len(led),
            "repeat": args.repeat,
            "idle_scan_ms_median": round(idle_s * 1e3, 3),
            "idle_longest_wait_beside_ms": round(idle_wait_s * 1e3, 2),
            "kept_between_scans_mib": round(kept_bytes / 2**20, 3),
            "all_appended_scan_ms_median": round(appended_s * 1e3, 1),
            "all_appended_longest_wait_beside_ms": round(appended_wait_s * 1e3, 2),
            "new_session_scan_ms_median": round(all_s * 1e3, 1),
            "new_session_longest_wait_beside_ms": round(all_wait_s * 1e3, 2),
            "baseline_read_every_partition_ms_median": round(base_s * 1e3, 1),
            "baseline_longest_wait_beside_ms": round(base_wait_s * 1e3, 2),
            "python": sys.version.split()[0],
        }
    )


if __name__ == "__main__":
    main()
