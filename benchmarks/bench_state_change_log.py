"""State-change log lines: what a broker loss or a controlled shutdown writes.

The controller logs one partition_state line per partition state it writes, on its event
thread, and every broker one leader_and_isr line per partition state it applies, before
it answers the LeaderAndIsr: a broker leading 10,000 partitions lost is 10,000s of lines.
Figures: writing N rows of each kind through StateChangeLog to a new file in a temporary
directory (written and flushed, as a broker does; not synced). Floor, in the same run: the
plain way, json.dumps of each merged record with compact separators, joined and written
the same way. Times are the best of --repeat runs, in milliseconds.

    .venv/bin/python benchmarks/bench_state_change_log.py [--rows 20000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, best_of

from broker.state_change_log import SCHEMA_VERSION, LeaderAndIsrRow, StateChangeLog
from controller.state_machines import partition_state_row
from zkdata.znodes import LeaderAndIsr, TopicPartition


def best_ms(run: Callable[[], object], repeat: int) -> float:
    return round(best_of(repeat, run)[0] * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=at_least(1), default=7)
    args = parser.parse_args()
    tps = [TopicPartition(f"topic-{i // 1000:04d}", i % 1000) for i in range(args.rows)]
    states = [
        partition_state_row(tp, LeaderAndIsr(1, 5, (1, 2), 7), "controlled_shutdown", (3, 1, 2))
        for tp in tps
    ]
    applied = [
        LeaderAndIsrRow(tp.topic, tp.partition, 1, 5, (1, 2), (3, 1, 2), 1, 3, "applied", None)
        for tp in tps
    ]

    def to_file(write: Callable[[StateChangeLog], None]) -> Callable[[], None]:
        def run() -> None:
            with tempfile.TemporaryDirectory(prefix="bench-state-change-") as d:
                log = StateChangeLog(d, 1)
                write(log)
                log.close()

        return run

    def plain(event: str, rows: Sequence[NamedTuple], **tail: Any) -> None:
        head = {"ts": time.time_ns() // 1_000_000, "v": SCHEMA_VERSION, "broker": 1}
        text = "".join(
            json.dumps({**head, "event": event, **row._asdict(), **tail}, separators=(",", ":"))
            + "\n"
            for row in rows
        )
        with (
            tempfile.TemporaryDirectory(prefix="bench-state-change-") as d,
            open(Path(d) / "state-change.log", "a", encoding="utf-8") as f,
        ):
            f.write(text)
            f.flush()

    result = {
        "benchmark": "state_change_log",
        "rows": args.rows,
        "partition_state_ms": best_ms(
            to_file(lambda log: log.partition_states(3, states)), args.repeat
        ),
        "partition_state_json_dumps_ms": best_ms(
            lambda: plain("partition_state", states, controller_epoch=3), args.repeat
        ),
        "leader_and_isr_ms": best_ms(to_file(lambda log: log.leader_and_isr(applied)), args.repeat),
        "leader_and_isr_json_dumps_ms": best_ms(
            lambda: plain("leader_and_isr", applied), args.repeat
        ),
    }
    print(json.dumps(result, indent=1), flush=True)


if __name__ == "__main__":
    main()
