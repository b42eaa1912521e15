"""``zkctl watch``: a live view of a cluster, driven by ZooKeeper watches."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

from zkctl.common import non_negative_int, out, progress, seconds

if TYPE_CHECKING:
    from zkctl.common import Subparsers

DEFAULT_PER_PARTITION_WATCHES = 1000


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    watch = subparsers.add_parser(
        "watch",
        parents=[common],
        help="a live view of the cluster: controller, brokers, partitions, and what just happened",
        description=(
            "Show the cluster live, driven by ZooKeeper watches: the controller and its epoch"
            " (with the earlier epochs), every broker with its address, broker epoch and"
            " liveness, every partition's leader, leader epoch, replicas and ISR (offline and"
            " under-replicated ones marked; with more partitions than rows, counts and the"
            " problem partitions only), and a timeline of what just happened. While a"
            " failover is under way, a running clock says how long the cluster has been"
            " without a controller or a partition without a leader. On a terminal it is a"
            " full-screen view (q quits); otherwise (or on a terminal curses cannot drive: TERM"
            " unset or unknown), or with --plain, it prints the timeline as plain lines. It"
            " survives losing its own ZooKeeper connection: it says so and recovers."
        ),
        epilog=(
            "The cluster is found through --zookeeper, $ZKCTL_ZOOKEEPER, or the local"
            " cluster's <dir>/cluster.json (zkctl up)."
        ),
    )
    watch.add_argument(
        "--plain",
        action="store_true",
        help="print the timeline as plain lines (the default when stdout is not a terminal)",
    )
    watch.add_argument(
        "--duration",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="stop after this long (default: until Ctrl-C, or q in the full-screen view)",
    )
    watch.add_argument(
        "--per-partition-watches",
        type=non_negative_int,
        default=DEFAULT_PER_PARTITION_WATCHES,
        metavar="N",
        help=(
            "watch every partition state znode when there are at most N partitions"
            f" (default {DEFAULT_PER_PARTITION_WATCHES}); above that, re-read them all in"
            " batches when a cluster-level watch or one of a few canary partitions fires"
        ),
    )
    watch.set_defaults(handler=run, parser=watch)


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) end the command like Ctrl-C, so that
    everything is cleaned up and the terminal is restored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP set `stop`, for the plain timeline: an exception raised
    wherever the main thread happens to be could cut a line in half between its text and
    its newline, or drop the rest of a batch of events already taken from the queue. A
    second signal interrupts, in case stopping hangs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt(signal.Signals(signum).name)
        stop.set()

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, handler) for sig in sigs}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run(args: argparse.Namespace) -> int:
    from watch import render_curses, render_plain
    from watch.session import Watcher
    from zkctl.common import resolve_connect, zk_session

    connect = resolve_connect(args)
    args.zookeeper = connect
    plain = bool(args.plain) or not sys.stdout.isatty()
    stop = threading.Event()
    signals = stop_on_signals(stop) if plain else interrupt_on_signals()
    progress(f"connecting to ZooKeeper at {connect} ...")
    with signals, zk_session(args) as zk:
        watcher = Watcher(zk, title=connect, per_partition_watches=args.per_partition_watches)
        watcher.start()
        try:
            if plain:
                progress("watching; Ctrl-C stops")
                render_plain.run(
                    watcher, out, stop=stop, duration_s=args.duration, stdout=sys.stdout
                )
            else:
                render_curses.run_or_plain(
                    watcher,
                    out,
                    fell_back=lambda e: progress(
                        f"the full-screen view failed ({e}); plain lines instead, Ctrl-C stops"
                    ),
                    stop=stop,
                    duration_s=args.duration,
                    plain_signals=lambda: stop_on_signals(stop),
                )
        except KeyboardInterrupt:
            pass  # Ctrl-C in the full-screen view, or a second signal: it ends the view
        finally:
            watcher.stop()
    return 0
