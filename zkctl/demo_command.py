"""``zkctl demo``: start a local cluster and watch its controller fail over, again and again."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from zkctl.common import out, positive_float, positive_int

if TYPE_CHECKING:
    from zkctl.common import Subparsers


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    demo = subparsers.add_parser(
        "demo",
        parents=[common],
        help="start a local cluster and show controller failovers (SIGKILL, stop, SIGSTOP)",
        description=(
            "Provision ZooKeeper (or use --zookeeper / $ZKCTL_ZOOKEEPER, in a chroot of its"
            " own), start brokers as child processes, create a topic, and every few seconds"
            " take the controller down, cycling through SIGKILL, a graceful stop, and SIGSTOP"
            " (a zombie that is resumed and fenced). Prints what happens, from the brokers'"
            " state-change logs. Ctrl-C or --duration ends it; nothing it started keeps"
            " running."
        ),
    )
    demo.add_argument(
        "--brokers", type=positive_int, default=3, metavar="N", help="brokers (default 3)"
    )
    demo.add_argument(
        "--duration",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="stop after this long (default: run until Ctrl-C)",
    )
    demo.add_argument(
        "--interval",
        type=positive_float,
        default=6.0,
        metavar="SECONDS",
        help="pause between failovers (default 6)",
    )
    demo.add_argument(
        "--session-timeout-ms",
        type=positive_int,
        default=4000,
        metavar="MS",
        help="the brokers' zookeeper.session.timeout.ms (default 4000: quick failovers)",
    )
    demo.add_argument(
        "--partitions", type=positive_int, default=6, help="partitions of the demo topic"
    )
    demo.set_defaults(handler=run, parser=demo)


def run(args: argparse.Namespace) -> int:
    from cluster.demo import DemoOptions, run_demo

    options = DemoOptions(
        brokers=args.brokers,
        duration_s=args.duration,
        interval_s=args.interval,
        directory=Path(args.dir) / "demo",
        zookeeper=args.zookeeper or os.environ.get("ZKCTL_ZOOKEEPER") or None,
        session_timeout_ms=args.session_timeout_ms,
        partitions=args.partitions,
    )
    return run_demo(options, out)
