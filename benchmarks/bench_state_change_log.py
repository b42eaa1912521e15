"""State-change log lines: what a broker loss or a controlled shutdown writes.

The controller logs one partition_state line per partition state it writes, on its event
thread, and every broker one leader_and_isr line per partition state it applies, before
it answers the LeaderAndIsr: a broker leading 10,000 partitions lost is 10,000s of lines.
Figures: writing N rows of each kind through StateChangeLog (to memory, so the disk does
not count). Floor, in the same run: the plain way, json.dumps of each merged record with
compact separators, joined. Times are the best of --repeat runs, in milliseconds.

    .venv/bin/python benchmarks/bench_state_change_log.py [--rows 20000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.state_change_log import SCHEMA_VERSION, StateChangeLog
from controller.state_machines import partition_state_row
from zkdata.znodes import LeaderAndIsr, TopicPartition


def best_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return round(min(times) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    tps = [TopicPartition(f"topic-{i // 1000:04d}", i % 1000) for i in range(args.rows)]
    states = [
        partition_state_row(tp, LeaderAndIsr(1, 5, (1, 2), 7), "controlled_shutdown", (3, 1, 2))
        for tp in tps
    ]
    applied: list[dict[str, Any]] = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "leader": 1,
            "leader_epoch": 5,
            "isr": [1, 2],
            "replicas": [3, 1, 2],
            "controller_id": 1,
            "controller_epoch": 3,
            "result": "applied",
            "error": None,
        }
        for tp in tps
    ]
    log = StateChangeLog(None, 1)

    def to_memory(write: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            log._file = io.StringIO()  # what the file would be written
            write()

        return run

    def plain(event: str, rows: list[dict[str, Any]], **tail: Any) -> str:
        head = {"ts": time.time_ns() // 1_000_000, "v": SCHEMA_VERSION, "broker": 1}
        return "".join(
            json.dumps({**head, "event": event, **row, **tail}, separators=(",", ":")) + "\n"
            for row in rows
        )

    result = {
        "benchmark": "state_change_log",
        "rows": args.rows,
        "partition_state_ms": best_ms(
            to_memory(lambda: log.partition_states(3, states)), args.repeat
        ),
        "partition_state_json_dumps_ms": best_ms(
            lambda: plain("partition_state", states, controller_epoch=3), args.repeat
        ),
        "leader_and_isr_ms": best_ms(to_memory(lambda: log.leader_and_isr(applied)), args.repeat),
        "leader_and_isr_json_dumps_ms": best_ms(
            lambda: plain("leader_and_isr", applied), args.repeat
        ),
    }
    print(json.dumps(result, indent=1), flush=True)


if __name__ == "__main__":
    main()
