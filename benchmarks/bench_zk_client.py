"""kazoo's connection thread: pipelined small requests with each handler's wait.

Every ZooKeeper request the project sends goes through kazoo's one connection thread,
which waits on its socket before sending each request and before each read of an answer.
This measures N pipelined creates, reads and deletes of small znodes (each its own
request, as the controller's per-topic deletes and a broker's registration reads are)
through a KazooClient with the project's handler (zkdata.poll_handler.PollingHandler,
one poll a wait) and, as the baseline in the same run, kazoo's own threading handler (a
new epoll selector a wait). Rounds alternate between the two; the median of each is
reported, in seconds, with each handler's operations a second.

    .venv/bin/python benchmarks/bench_zk_client.py [--requests 30000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, chroot, emit, zookeeper
from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler

from zkdata.poll_handler import PollingHandler

PAYLOAD = b"v" * 100
HANDLERS = {"poll": PollingHandler, "kazoo_selector": SequentialThreadingHandler}


def one_round(connect: str, handler: Any, n: int, tag: str) -> dict[str, float]:
    zk = KazooClient(hosts=connect, handler=handler)
    zk.start(timeout=30)
    try:
        zk.ensure_path("/z")
        names = [f"/z/{tag}-{i}" for i in range(n)]
        out = {}
        for op, call in (
            ("create", lambda p: zk.create_async(p, PAYLOAD)),
            ("get", zk.get_async),
            ("delete", zk.delete_async),
        ):
            started = time.perf_counter()
            for result in [call(p) for p in names]:
                result.get(timeout=120)
            out[op] = time.perf_counter() - started
        return out
    finally:
        zk.stop()
        zk.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=at_least(100), default=30_000)
    parser.add_argument("--rounds", type=at_least(1), default=3)
    args = parser.parse_args()
    times: dict[str, dict[str, list[float]]] = {h: {} for h in HANDLERS}
    with zookeeper() as base:
        connect = chroot(base, "zk-client")
        setup = KazooClient(hosts=base)
        setup.start(timeout=30)
        setup.ensure_path(connect[len(base) :])
        setup.stop()
        setup.close()
        for r in range(args.rounds):
            for name, handler in HANDLERS.items():
                for op, s in one_round(connect, handler(), args.requests, f"{name}{r}").items():
                    times[name].setdefault(op, []).append(s)
    results: dict[str, Any] = {}
    for name, ops in times.items():
        results[name] = {f"{op}_s": round(statistics.median(ts), 3) for op, ts in ops.items()} | {
            f"{op}_per_s": round(args.requests / statistics.median(ts)) for op, ts in ops.items()
        }
    emit(
        {
            "benchmark": "zk_client",
            "what": (
                "N pipelined creates, gets and deletes of 100-byte znodes through kazoo, "
                "median of the rounds; poll: the project's handler; kazoo_selector: kazoo's "
                "threading handler (baseline)"
            ),
            "requests": args.requests,
            "rounds": args.rounds,
            "results": results,
            "poll_vs_kazoo_selector": {
                op: round(
                    statistics.median(times["kazoo_selector"][op])
                    / statistics.median(times["poll"][op]),
                    2,
                )
                for op in times["poll"]
            },
        }
    )


if __name__ == "__main__":
    main()
