"""The ``zkctl`` command line: argument parsing, dispatch, and error reporting.

Exit codes: 0 success; 1 an operational error (printed as ``zkctl: error: ...``, no
traceback unless --debug); 2 bad arguments (argparse style: usage plus a one-line error);
130 interrupted.

More commands plug in by adding a module to COMMAND_MODULES: it must define
``register(subparsers, common)`` (see zkctl.common).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import importlib
import logging
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence

from zkctl.common import CommandError, UsageError, add_global_options, common_options, err

# Each module adds its subcommands; the lead's demo and watch commands are added here too.
COMMAND_MODULES: list[str] = [
    "zkctl.topic_commands",
    "zkctl.admin_commands",
    "zkctl.group_commands",
    "zkctl.cluster_commands",
    "zkctl.identity_commands",  # adds `broker identities`: after cluster_commands' `broker`
    "zkctl.demo_command",
    "zkctl.report_command",
    "zkctl.watch_command",
]


class _Parser(argparse.ArgumentParser):
    """argparse with error messages squeezed onto one line."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="zkctl",
        description=(
            "Kafka's ZooKeeper-mode controller and brokers, re-created in Python: run a local"
            " cluster and administer it through ZooKeeper, as Kafka's ZooKeeper-based tools do."
        ),
    )
    add_global_options(parser)
    common = common_options()
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers, common)
    return parser


def _quiet_libraries(debug: bool) -> None:
    """kazoo logs every reconnection attempt; the user sees our one-line errors instead."""
    if debug:
        logging.basicConfig(
            level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return
    kazoo_log = logging.getLogger("kazoo")
    kazoo_log.addHandler(logging.NullHandler())
    kazoo_log.propagate = False
    # We check the chroot ourselves and say so more plainly.
    warnings.filterwarnings("ignore", message="No chroot path exists", category=UserWarning)


def _usage_error(args: argparse.Namespace, parser: argparse.ArgumentParser, message: str) -> int:
    leaf = getattr(args, "parser", None)
    target = leaf if isinstance(leaf, argparse.ArgumentParser) else parser
    try:
        target.error(message)
    except SystemExit as e:
        return int(e.code or 2)


def _operational_message(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The message for an expected failure, or None for a bug."""
    from kazoo.exceptions import (
        ConnectionLoss,
        KazooException,
        OperationTimeoutError,
        SessionExpiredError,
    )
    from kazoo.handlers.threading import KazooTimeoutError

    from admin.errors import AdminError
    from cluster.local import LocalClusterError
    from cluster.zookeeper import ZooKeeperError

    if isinstance(exc, (CommandError, AdminError, LocalClusterError, ZooKeeperError)):
        return str(exc)
    if isinstance(exc, (ConnectionLoss, OperationTimeoutError, SessionExpiredError)):
        where = getattr(args, "connect_string", None) or "ZooKeeper"
        # An expired session fails the requests in flight, whose writes may have been
        # carried out before it ended: the same doubt as a lost connection.
        lost = "session expired" if isinstance(exc, SessionExpiredError) else "connection lost"
        if getattr(args, "zk_writes_sent", None) == 0:
            # Only reads were sent (zk_session counts the writes): it can be run again.
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return f"ZooKeeper stopped answering ({where}, {detail}); nothing was changed"
        # The request may have been carried out with its answer lost: a blind retry of a
        # create would then report that the topic (or reassignment) already exists.
        return (
            f"ZooKeeper {lost} during a request ({where}): a change asked for"
            " may or may not have been made; look (describe, list) before trying again"
        )
    if isinstance(exc, (KazooException, KazooTimeoutError)):
        where = getattr(args, "connect_string", None) or "ZooKeeper"
        return f"ZooKeeper request failed ({where}): {type(exc).__name__} {exc}".rstrip()
    if isinstance(exc, OSError):
        return f"{exc}"
    return None


def _interrupted(e: KeyboardInterrupt | None) -> int:
    """Ctrl-C (or, in `zkctl up`, SIGTERM and SIGHUP: cluster.local.Terminated): one line
    and 130, or 128 + the signal."""
    signum = getattr(e, "signum", None)
    with contextlib.suppress(OSError):  # a terminal that hung up takes no line
        err(
            "zkctl: interrupted"
            if signum is None
            else f"zkctl: stopped by {signal.Signals(signum).name}"
        )
    return 130 if signum is None else 128 + int(signum)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        # Building the parser imports every command's module: a Ctrl-C there ends as
        # one later does, not in a traceback.
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt as e:
        return _interrupted(e)
    debug = bool(getattr(args, "debug", False))
    _quiet_libraries(debug)
    # `kill -USR1 <pid>` prints every thread's stack: to see where a command hangs. Not
    # where stderr is no file (a test capturing it) or there is no SIGUSR1.
    with contextlib.suppress(AttributeError, ValueError, OSError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt as e:
        # `zkctl up` turns SIGTERM and SIGHUP into one (cluster.local.Terminated), to clean up.
        return _interrupted(e)
    except BrokenPipeError:
        # The reader went away (zkctl ... | head): not an error worth a message. Point
        # stdout at /dev/null so the interpreter's final flush does not complain again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except UsageError as e:
        return _usage_error(args, parser, str(e))
    except Exception as e:
        from admin.errors import InvalidArgumentError
        from cluster.local import ClusterArgumentError

        if isinstance(e, (InvalidArgumentError, ClusterArgumentError)):
            return _usage_error(args, parser, str(e))
        message = _operational_message(e, args)
        if debug:
            traceback.print_exc()
        if message is None:
            err(
                f"zkctl: internal error: {type(e).__name__}: {e}"
                + ("" if debug else " (run with --debug for the traceback)")
            )
        else:
            err(f"zkctl: error: {message}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
