"""The longest idle round of a follower's fetch session on a leader of many partitions.

A leader reads a follower's incremental fetch holding the lock with which appends wake
the fetches (broker/apis.py), so a long read delays every acks=all produce behind it.
An idle round reads nothing, but every partition of a session must still be looked at
now and then (changes nobody notifies; the follower's positions recorded for the ISR).
In one process, no sockets: a leader of --partitions partitions (RF 2, no logs) and one
follower session of all of them, then idle incremental rounds every 10 ms for --seconds,
each timed through the fetch handler. The figure: the longest round, and the 99th
percentile. The baseline, in the same run: a round that must look at every partition (an
unknown change, `wake_fetches(True, None)`), what a session did every 5 s before its look
was spread over the rounds. Times in milliseconds.

    .venv/bin/python benchmarks/bench_fetch_session.py [--partitions 100000] [--seconds 12]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import emit

from broker.server import set_gc_thresholds
from tests.unit.test_fetch_session import Loopback, fetch_body, make_leader
from wire.api import ApiKey
from zkdata.znodes import TopicPartition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=12.0)
    args = parser.parse_args()
    set_gc_thresholds()  # as a broker runs
    per_topic = 1000
    partitions = [
        TopicPartition(f"topic-{t:05d}", p)
        for t in range(max(1, args.partitions // per_topic))
        for p in range(min(per_topic, args.partitions))
    ]
    apis, replicas, _zk = make_leader(partitions)
    conn = Loopback(apis)
    try:
        session_id = conn.request(ApiKey.FETCH, 12, fetch_body(dict.fromkeys(partitions, 0)))[
            "session_id"
        ]
        epoch = 1

        def idle_round() -> float:
            nonlocal epoch
            body = fetch_body({}, session_id=session_id, epoch=epoch)
            epoch += 1
            started = time.perf_counter()
            got = conn.request(ApiKey.FETCH, 12, body)
            took = time.perf_counter() - started
            if got["error_code"] or got["responses"]:
                raise RuntimeError(f"an idle round answered {got['error_code']}")
            return took * 1000

        idle_round()  # the session's first look at everything
        full_looks = []
        for _ in range(3):
            apis.wake_fetches(True, None)  # unknown partitions changed: a look at all
            full_looks.append(idle_round())
            time.sleep(0.01)
        rounds = []
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            rounds.append(idle_round())
            time.sleep(0.01)
    finally:
        replicas.close()
    rounds.sort()
    emit(
        {
            "benchmark": "fetch_session_idle_rounds",
            "partitions": len(partitions),
            "rounds": len(rounds),
            "seconds": args.seconds,
            "longest_round_ms": round(rounds[-1], 2),
            "p99_round_ms": round(rounds[min(len(rounds) - 1, int(0.99 * len(rounds)))], 2),
            "median_round_ms": round(statistics.median_high(rounds), 3),
            "total_ms": round(sum(rounds), 1),
            "baseline_full_look_round_ms": round(statistics.median_high(full_looks), 2),
        }
    )


if __name__ == "__main__":
    main()
