"""``zkctl up``, ``zkctl down``, ``zkctl broker ...`` and ``zkctl status``: the local cluster."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from watch.text import printable
from zkctl.common import (
    out,
    partition_id,
    positive_int,
    print_json,
    progress,
    seconds,
    warn,
)
from zkctl.controller_status import failed_log_dirs

if TYPE_CHECKING:
    from zkctl.common import Subparsers


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    from cluster import local

    up = subparsers.add_parser(
        "up",
        parents=[common],
        help="start a local cluster: ZooKeeper and N brokers in the background",
        description=(
            "Start ZooKeeper (unless --zookeeper or $ZKCTL_ZOOKEEPER names one; then a chroot"
            " /zkctl-<random> of its own is used) and N brokers, each `python -m broker"
            " <dir>/broker-<id>/server.properties` with its output in"
            " <dir>/broker-<id>/broker.out. Waits until every broker is registered and a"
            " controller is elected. The state goes to <dir>/cluster.json; `zkctl down` stops"
            " it all."
        ),
        epilog=(
            "--dir DIR (default .zkctl) chooses the cluster's directory; --zookeeper CONNECT"
            " uses that ZooKeeper, with a chroot of the cluster's own, instead of starting one."
        ),
    )
    up.add_argument(
        "--brokers",
        type=positive_int,
        default=3,
        metavar="N",
        help="number of brokers, ids 1..N (default: 3)",
    )
    up.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker's server.properties (repeatable)",
    )
    up.add_argument(
        "--session-timeout-ms",
        type=positive_int,
        default=local.DEFAULT_SESSION_TIMEOUT_MS,
        metavar="MS",
        help=(
            "zookeeper.session.timeout.ms of the brokers (default:"
            f" {local.DEFAULT_SESSION_TIMEOUT_MS}, Kafka's value before 2.5, rather than"
            " today's 18000, so that a killed or paused broker's session expires, and its"
            " failover shows, within seconds)"
        ),
    )
    up.add_argument(
        "--timeout",
        type=seconds,
        default=local.DEFAULT_START_TIMEOUT_S,
        metavar="SECONDS",
        help=(
            "how long to wait for the cluster: its ZooKeeper's start and the brokers'; a"
            " ZooKeeper container's start is waited for on its own, 120 s at least"
            f" (default: {local.DEFAULT_START_TIMEOUT_S:g})"
        ),
    )
    up.set_defaults(handler=_up, parser=up)

    down = subparsers.add_parser(
        "down",
        parents=[common],
        help="stop the local cluster (controlled shutdown, then SIGKILL after --timeout)",
        description=(
            "Stop the local cluster of zkctl up: SIGTERM to every broker, which makes each"
            " do a controlled shutdown (its leaderships move away before it exits); a"
            " broker still running after --timeout gets SIGKILL. The controller's broker"
            " goes last, to spare the others a failover. Then the ZooKeeper it started,"
            " or, on a ZooKeeper of yours, the cluster's chroot is deleted. Logs and data"
            " stay until the next zkctl up."
        ),
    )
    down.add_argument(
        "--timeout",
        type=seconds,
        default=local.DEFAULT_STOP_TIMEOUT_S,
        metavar="SECONDS",
        help=(
            "how long each broker gets for its controlled shutdown before SIGKILL"
            f" (default: {local.DEFAULT_STOP_TIMEOUT_S:g})"
        ),
    )
    down.set_defaults(handler=_down, parser=down)

    broker = subparsers.add_parser("broker", help="stop, kill, pause, resume or start one broker")
    actions = broker.add_subparsers(dest="broker_command", metavar="ACTION", required=True)
    helps = {
        "stop": "SIGTERM: controlled shutdown; wait for the exit (SIGKILL after --timeout)",
        "kill": "SIGKILL: an uncontrolled failure",
        "pause": "SIGSTOP: a hung broker (its ZooKeeper session expires after the timeout)",
        "resume": "SIGCONT after pause",
        "start": "start a stopped broker again with the same server.properties",
    }
    for action, text in helps.items():
        p = actions.add_parser(action, parents=[common], help=text, description=text)
        p.add_argument("--id", type=partition_id, required=True, metavar="N", help="the broker id")
        if action in ("stop", "start"):
            default = local.DEFAULT_STOP_TIMEOUT_S if action == "stop" else 60.0
            p.add_argument(
                "--timeout",
                type=seconds,
                default=default,
                metavar="SECONDS",
                help=f"how long to wait (default: {default:g})",
            )
        if action == "start":
            p.add_argument(
                "--no-wait", action="store_true", help="do not wait for the registration"
            )
        p.set_defaults(handler=_broker, parser=p)

    status = subparsers.add_parser(
        "status",
        parents=[common],
        help="each broker's process and registration, and the controller",
        description=(
            "The local cluster of zkctl up: its ZooKeeper, the controller (from"
            " /controller and /controller_epoch), and for each broker its process (alive,"
            " paused by SIGSTOP, or dead, by its pid), whether it is registered in"
            " /brokers/ids, and its listener."
        ),
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=_status, parser=status)


def _up(args: argparse.Namespace) -> int:
    from cluster import local

    started = local.up(
        args.dir,
        args.brokers,
        zookeeper=args.zookeeper,
        overrides=args.override,
        session_timeout_ms=args.session_timeout_ms,
        timeout=args.timeout,
        progress=progress,
    )
    cluster = started.cluster
    out(f"Cluster up in {cluster.dir} (state in {cluster.file})")
    out(f"ZooKeeper: {cluster.connect_string}")
    out(f"Controller: broker {started.controller_id} (epoch {started.controller_epoch})")
    for b in cluster.brokers:
        mark = "  (controller)" if b.id == started.controller_id else ""
        out(f"  broker {b.id}  pid {b.pid}  PLAINTEXT://{b.address}  log {b.out_file}{mark}")
    # Runs as printed: the cluster's --dir, no more replicas than it has brokers.
    rf = min(3, len(cluster.brokers))
    create = f"topic create --topic demo --partitions 3 --replication-factor {rf}"
    out(f"Next: {local.zkctl_command(create, cluster.dir)}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from cluster import local

    result = local.down(args.dir, timeout=args.timeout, progress=progress)
    if not result.found:
        out(f"No cluster in {args.dir}; nothing to stop.")
        return 0
    if result.already_stopped:
        out(f"The cluster in {args.dir} is already stopped.")
        return 0
    for w in result.warnings:
        warn(w)
    for broker_id, outcome in sorted(result.brokers.items()):
        out(f"  broker {broker_id}: {outcome}")
    out(f"Cluster in {args.dir} stopped (logs and data are kept until the next zkctl up).")
    return 0


def _broker(args: argparse.Namespace) -> int:
    from cluster import local

    action, broker_id = args.broker_command, args.id
    if action == "stop":
        outcome = local.broker_stop(args.dir, broker_id, timeout=args.timeout, progress=progress)
        messages = {
            "stopped": f"Broker {broker_id} stopped (controlled shutdown).",
            "killed": f"Broker {broker_id} did not exit in time and was killed (SIGKILL).",
            "not running": f"Broker {broker_id} was not running.",
        }
        out(messages[outcome])
    elif action == "kill":
        killed = local.broker_kill(args.dir, broker_id)
        out(f"Broker {broker_id} killed." if killed else f"Broker {broker_id} was not running.")
    elif action == "pause":
        before = local.broker_pause(args.dir, broker_id)
        note = " (it already was)" if before == "paused" else ""
        out(f"Broker {broker_id} paused (SIGSTOP){note}.")
    elif action == "resume":
        before = local.broker_resume(args.dir, broker_id)
        note = " (it was not paused)" if before != "paused" else ""
        out(f"Broker {broker_id} resumed (SIGCONT){note}.")
    else:
        b = local.broker_start(
            args.dir, broker_id, wait=not args.no_wait, timeout=args.timeout, progress=progress
        )
        registered = "" if args.no_wait else " and registered"
        out(f"Broker {broker_id} started{registered} (pid {b.pid}, PLAINTEXT://{b.address}).")
    return 0


def _status(args: argparse.Namespace) -> int:
    from cluster import local

    st = local.status(args.dir, zk_timeout=args.zk_timeout)
    if st.zk_error:
        warn(st.zk_error)
    if st.view is not None:
        for problem in st.view.problems:
            warn(problem)
    if args.json:
        print_json(st.to_json())
        return 0
    c = st.cluster
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.created_at / 1000))
    brokers = "1 broker" if len(c.brokers) == 1 else f"{len(c.brokers)} brokers"
    out(f"Cluster in {c.dir}: {c.state} (created {since}, {brokers})")
    out(f"ZooKeeper: {st.zookeeper}")
    if st.view is not None:
        if st.controller_id is None:
            out("Controller: none")
        else:
            out(f"Controller: broker {st.controller_id} (epoch {st.controller_epoch})")
    rows = [("BROKER", "PID", "PROCESS", "REGISTERED", "LISTENER", "")]
    for b in st.brokers:
        registered = {True: "yes", False: "no", None: "?"}[b.registered]
        role = "controller" if b.broker.id == st.controller_id else ""
        rows.append(
            (str(b.broker.id), str(b.broker.pid), b.process, registered, b.broker.address, role)
        )
    cells = [[printable(c) for c in r] for r in rows]  # escapes counted in the widths
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for r in cells:
        out("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    for b in st.brokers:
        failed = failed_log_dirs(
            {"offline_log_dirs": b.offline_log_dirs, "offline_partitions": b.offline_partitions}
        )
        if failed is not None:
            warn(f"broker {b.broker.id}: {failed}")
    return 0
