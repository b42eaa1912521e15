"""What every zkctl command module shares: errors, options, the ZooKeeper session, output.

A command module exposes ``register(subparsers, common)``; it adds its parsers with
``parents=[common]`` (so --zookeeper, --dir, --zk-timeout and --debug work after the
command as well as before it) and sets ``handler`` to a function taking the parsed
arguments and returning the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from watch.text import CONTROL, printable
from zkdata.int_text import INT32_MAX, INT32_MIN, java_int_in_range

if TYPE_CHECKING:
    from admin.errors import Problems
    from zkdata.client import ZkClient

    # What add_subparsers returns (private in typeshed, but the documented way to add more).
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

ENV_CONNECT = "ZKCTL_ZOOKEEPER"
DEFAULT_DIR = ".zkctl"
DEFAULT_ZK_TIMEOUT_S = 10.0
MAX_ID = 2**31 - 1  # admin.topics.MAX_ID, without importing it at startup

Handler = Callable[[argparse.Namespace], int]


class CommandError(Exception):
    """An operational failure: printed as ``zkctl: error: ...``, exit code 1."""


class UsageError(Exception):
    """Bad or missing arguments: printed argparse-style with the usage, exit code 2."""


def common_options() -> argparse.ArgumentParser:
    """Options every command takes, after the command too. SUPPRESS keeps a value given
    before the command from being reset to the default by the subcommand's parser."""
    common = argparse.ArgumentParser(add_help=False)
    add_global_options(common, suppress=True)
    return common


def add_global_options(parser: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    def shown(text: str) -> str:
        # Listed once, by `zkctl --help`; repeating them in every usage line buries the rest.
        return argparse.SUPPRESS if suppress else text

    group = parser.add_argument_group(
        "global options",
        "--zookeeper, --dir, --zk-timeout and --debug are accepted here too (see zkctl --help)"
        if suppress
        else "may also be given after the command, e.g. zkctl topic list --dir d",
    )
    group.add_argument(
        "--zookeeper",
        metavar="CONNECT",
        default=default(None),
        help=shown(
            "ZooKeeper connect string host:port[,host:port...][/chroot]; default: $"
            f"{ENV_CONNECT}, else the local cluster's (<dir>/cluster.json, from zkctl up)"
        ),
    )
    group.add_argument(
        "--dir",
        metavar="DIR",
        default=default(DEFAULT_DIR),
        help=shown(f"the local cluster's directory (default: {DEFAULT_DIR})"),
    )
    group.add_argument(
        "--zk-timeout",
        metavar="SECONDS",
        type=seconds,
        default=default(DEFAULT_ZK_TIMEOUT_S),
        help=shown(
            "how long to wait for ZooKeeper: to connect, and for each answer (default:"
            f" {DEFAULT_ZK_TIMEOUT_S:g})"
        ),
    )
    group.add_argument(
        "--debug",
        action="store_true",
        default=default(False),
        help=shown("show tracebacks and ZooKeeper client logs"),
    )


# --- argument types ---------------------------------------------------------------------------


def java_int(text: str) -> int:
    """An Integer option as Kafka's tools read one (joptsimple's Integer.valueOf: a sign,
    BMP decimal digits, untrimmed, within a Java int); int() also takes " 5" and "1_0"."""
    value = java_int_in_range(text, INT32_MIN, INT32_MAX)
    if value is None:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}")
    return value


def non_negative_int(text: str) -> int:
    # Read as Java's parseLong reads it, as Kafka's tools read their numbers (java_int).
    value = java_int_in_range(text, -(2**63), 2**63 - 1)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def partition_id(text: str) -> int:
    """A partition (or broker) id: from 0 to a Java int's maximum, as Kafka's tools
    parse it; a bigger one could not be sent over the wire."""
    value = non_negative_int(text)
    if value > MAX_ID:
        raise argparse.ArgumentTypeError(f"{value} is more than {MAX_ID}")
    return value


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not positive")
    if not math.isfinite(value):  # 'inf', or '1e309' read as inf: no such number of seconds
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return value


MAX_SECONDS = 1_000_000  # about 11 days: well within what sockets and waits take


def seconds(text: str) -> float:
    """A timeout or duration: ``positive_float``, at most MAX_SECONDS (a socket's or a
    wait's timeout past about 2**33 s is an OverflowError; in milliseconds, ZooKeeper's
    int32 session timeout ends at about 24 days)."""
    value = positive_float(text)
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{text} seconds is more than {MAX_SECONDS} (about 11 days)"
        )
    return value


# --- output -----------------------------------------------------------------------------------


def _print(text: str, stream: TextIO) -> None:
    """A line on `stream`; what its encoding cannot hold (a znode's text under a latin-1
    locale, say) is written as backslash escapes rather than ending the command."""
    try:
        print(text, file=stream, flush=True)
    except UnicodeEncodeError:
        encoding = stream.encoding or "utf-8"
        print(text.encode(encoding, "backslashreplace").decode(encoding), file=stream, flush=True)


def _printable_lines(text: str) -> str:
    """`text` with its control characters written as \\xNN escapes, as zkctl watch shows
    them: a registration's host, a group id or a config value is any text, and an ESC in
    it would clear the screen or retitle the window. The newlines between its lines stay."""
    if "\n" not in text:
        return printable(text)
    return "\n".join(map(printable, text.split("\n")))


def out(text: str = "") -> None:
    _print(_printable_lines(text), sys.stdout)


def out_fields(fields: Sequence[str]) -> None:
    """A line of tab-separated fields (Kafka's topic describe: scripts split it on tabs),
    each made printable as out's text, a tab in it too."""
    if CONTROL.search("".join(fields)):  # one look for the whole line: most have none
        fields = list(map(printable, fields))
    _print("\t".join(fields), sys.stdout)


def err(text: str) -> None:
    _print(_printable_lines(text), sys.stderr)


def warn(text: str) -> None:
    err(f"zkctl: warning: {text}")


def progress(text: str) -> None:
    err(f"zkctl: {text}")


def print_json(obj: object) -> None:
    # As it is: JSON writes control characters as its own escapes (json.loads gives them back).
    _print(json.dumps(obj, indent=2, sort_keys=False), sys.stdout)


def report_problems(problems: Problems) -> None:
    """Malformed znodes met on the way: named by path on stderr; the command went on."""
    for e in problems:
        warn(f"malformed data in znode {e.path}: {e.reason} (skipped)")


def read_text_file(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise UsageError(
            f"cannot read {what} {path}: not UTF-8 text (byte {e.object[e.start]:#04x} at"
            f" offset {e.start})"
        ) from None


def ids(values: Iterable[int]) -> str:
    return ",".join(map(str, values))


# --- ZooKeeper --------------------------------------------------------------------------------


def check_connect_string(connect: str) -> None:
    """A UsageError for a connect string kazoo cannot use, e.g. a host the resolver cannot
    be asked about ("a..b"): kazoo's connection thread would print its UnicodeError's
    traceback and retry until the timeout."""
    from zkdata.connect_string import connect_string_problem

    problem = connect_string_problem(connect)
    if problem is not None:
        raise UsageError(f"invalid ZooKeeper connect string {connect!r}: {problem}")


def resolve_connect(args: argparse.Namespace) -> str:
    """--zookeeper, else $ZKCTL_ZOOKEEPER, else <dir>/cluster.json; else a UsageError, or a
    CommandError when that cluster is stopped."""
    from cluster import local

    given = (getattr(args, "zookeeper", None) or "").strip()
    if given:
        return given
    directory = Path(getattr(args, "dir", DEFAULT_DIR))
    try:
        cluster = local.load(directory)
    except local.MovedClusterError as e:
        # No argument is wrong: the directory holds another directory's cluster.json.
        raise CommandError(str(e)) from None
    except local.LocalClusterError as e:
        cluster = None
        local_problem: str | None = str(e)
    else:
        local_problem = None
    stopped = cluster is not None and cluster.state == "stopped"
    local_connect = None if cluster is None or stopped else cluster.connect_string
    env = os.environ.get(ENV_CONNECT, "").strip()
    if env:
        if local_connect is not None and local_connect != env:
            warn(
                f"using {ENV_CONNECT}={env}; the local cluster in {directory} uses"
                f" {local_connect} (pass --zookeeper to choose)"
            )
        return env
    if local_connect is not None:
        return local_connect
    if stopped:
        # No argument is wrong: the cluster is there but was stopped (zkctl down).
        again = "zkctl up" if str(directory) == DEFAULT_DIR else f"zkctl up --dir {directory}"
        raise CommandError(
            f"the local cluster in {directory} is stopped: start a new one with `{again}`"
            " (it replaces the stopped one's data), or pass --zookeeper host:port[/chroot]"
            f" (or set {ENV_CONNECT}) for another ZooKeeper"
        )
    hint = f" ({local_problem})" if local_problem else ""
    raise UsageError(
        "no ZooKeeper to talk to: pass --zookeeper host:port[/chroot], set"
        f" {ENV_CONNECT}=host:port[/chroot], or start a local cluster with `zkctl up`"
        f" (it writes {directory / 'cluster.json'}){hint}"
    )


@contextlib.contextmanager
def zk_session(args: argparse.Namespace) -> Iterator[ZkClient]:
    """A connected ZkClient for the command; a clear CommandError when it cannot connect.

    --zk-timeout bounds each wait for ZooKeeper: the connection, each request's answer and
    the close. The session timeout stays at 10 s at least: a slow but live ZooKeeper must
    not expire the session mid-command, and kazoo derives its handshake and read timeouts
    from it, which ZkClient's start and bounded close do not wait out."""
    from cluster.zookeeper import split_chroot
    from zkdata.client import ZOOKEEPER_UNAVAILABLE, ZkClient

    connect = resolve_connect(args)
    args.connect_string = connect  # for error messages of main()
    timeout = float(getattr(args, "zk_timeout", DEFAULT_ZK_TIMEOUT_S))
    timeout_ms = max(int(timeout * 1000), 1)
    check_connect_string(connect)
    try:
        client = ZkClient(
            connect,
            session_timeout_ms=max(timeout_ms, 10_000),
            connection_timeout_ms=timeout_ms,
            request_timeout_ms=timeout_ms,
        )
    except ValueError as e:
        raise UsageError(f"invalid ZooKeeper connect string {connect!r}: {e}") from None
    try:
        client.start()
    except Exception as e:
        raise CommandError(
            f"cannot connect to ZooKeeper at {connect} within {timeout:g} s"
            f" ({type(e).__name__}: {e}); is it running?"
        ) from None
    unanswered = False
    try:
        hosts, chroot = split_chroot(connect)
        if chroot and client.exists("/") is None:
            raise CommandError(
                f"the chroot {chroot} does not exist in ZooKeeper {hosts}; check the connect"
                " string (is the cluster up?)"
            )
        yield client
    except ZOOKEEPER_UNAVAILABLE:
        unanswered = True
        args.zk_writes_sent = client.writes_sent  # for main(): was a change asked for?
        raise
    finally:
        # A ZooKeeper that left a request unanswered would leave the close so too.
        client.close(timeout_s=0 if unanswered else timeout)
