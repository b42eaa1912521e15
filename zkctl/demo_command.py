"""``zkctl demo``: start a local cluster and watch its controller fail over, again and again."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from zkctl.common import check_connect_string, out, positive_float, positive_int, seconds

if TYPE_CHECKING:
    from zkctl.common import Subparsers


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    demo = subparsers.add_parser(
        "demo",
        parents=[common],
        help=(
            "start a local cluster and show controller failovers (SIGKILL, stop, SIGSTOP,"
            " cut from ZooKeeper)"
        ),
        description=(
            "Provision ZooKeeper (or use --zookeeper / $ZKCTL_ZOOKEEPER, in a chroot of its"
            " own), start brokers as child processes, create a topic, and every few seconds"
            " take the controller down, cycling through SIGKILL, a graceful stop, SIGSTOP"
            " (a zombie that is resumed and fenced), and a network partition from ZooKeeper"
            " (the controller keeps running; it resigns on its own, and registers again when"
            " the link heals), restarting what it stopped. The watch view"
            " (zkctl watch) shows it live: full-screen on a terminal, timestamped lines"
            " otherwise (or with --plain), with the demo's own actions and what the brokers'"
            " state-change logs add. Ctrl-C (or q), or --duration, ends it; nothing it started"
            " keeps running."
        ),
    )
    demo.add_argument(
        "--brokers",
        type=failover_brokers,
        default=3,
        metavar="N",
        help="brokers, at least 2 (default 3)",
    )
    demo.add_argument(
        "--duration",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="stop after this long, once at least one failover was shown (default: run"
        " until Ctrl-C)",
    )
    demo.add_argument(
        "--interval",
        type=seconds,
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
    demo.add_argument(
        "--plain",
        action="store_true",
        help="print timestamped lines instead of the full-screen view (the default off a terminal)",
    )
    demo.add_argument(
        "--rate",
        type=positive_float,
        default=200.0,
        metavar="MSGS",
        help="messages per second the demo's producer sends (default 200)",
    )
    demo.add_argument(
        "--faults",
        type=fault_cycle,
        default=None,
        metavar="LIST",
        help=(
            "the faults to cycle through, comma-separated: kill, stop, pause (SIGSTOP), cut"
            " (from ZooKeeper) (default: all four, in that order)"
        ),
    )
    demo.add_argument(
        "--no-clients",
        action="store_true",
        help="run no producer and consumer (only the control plane fails over)",
    )
    demo.set_defaults(handler=run, parser=demo)


def failover_brokers(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("must be at least 2: a failover needs another broker")
    return value


def fault_cycle(text: str) -> tuple[str, ...]:
    from cluster.demo import FAULTS

    faults = tuple(f.strip() for f in text.split(","))
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault {', '.join(map(repr, unknown))}: choose from {', '.join(FAULTS)}"
        )
    return faults


def run(args: argparse.Namespace) -> int:
    from cluster.demo import DemoOptions, run_demo
    from zkctl.watch_command import interrupt_on_signals

    workload = None
    if not args.no_clients:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            out(
                "(confluent-kafka is not installed: no producer and consumer will run;"
                " `make demo` installs it)"
            )
        else:
            from cluster.demo_workload import ClientWorkload

            rate = args.rate
            workload = functools.partial(ClientWorkload, rate=rate)
    zookeeper = (args.zookeeper or os.environ.get("ZKCTL_ZOOKEEPER") or "").strip() or None
    if zookeeper is not None:
        # A usage error before anything starts, as for every other command (the chroot's
        # creation failed on it later: exit 1, "is it running?").
        check_connect_string(zookeeper)
    options = DemoOptions(
        brokers=args.brokers,
        duration_s=args.duration,
        interval_s=args.interval,
        directory=Path(args.dir) / "demo",
        zookeeper=zookeeper,
        session_timeout_ms=args.session_timeout_ms,
        partitions=args.partitions,
        view="plain" if args.plain or not sys.stdout.isatty() else "curses",
        workload=workload,
        stdout=sys.stdout,
    )
    if args.faults is not None:
        options.faults = args.faults
    with interrupt_on_signals():
        return run_demo(options, out)
