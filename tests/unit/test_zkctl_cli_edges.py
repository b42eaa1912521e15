"""How zkctl's main() ends a command that raised: the exit code (0 done, 1 an operational
error or a bug, 2 bad arguments, 130 or 128 + the signal when interrupted) and the one line
it prints for each, without a traceback unless --debug asks for it."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

import pytest
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError

from admin.errors import InvalidArgumentError
from cluster.local import ClusterArgumentError, Terminated
from cluster.zookeeper import ZooKeeperError
from tests.unit.test_cli_args import run
from zkctl import cli, topic_commands
from zkctl.common import UsageError

LIST = ["--zookeeper", "127.0.0.1:2181", "topic", "list"]


def raising(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """`zkctl topic list` raises ``exc`` (its handler is bound when main builds the parser)."""

    def handler(args: argparse.Namespace) -> int:
        args.connect_string = "127.0.0.1:2181"  # as zk_session records it
        raise exc

    monkeypatch.setattr(topic_commands, "_list", handler)


@pytest.mark.parametrize(
    "exc",
    [
        UsageError("no such\n   thing"),
        InvalidArgumentError("no such\n   thing"),
        ClusterArgumentError("no such\n   thing"),
    ],
)
def test_a_bad_argument_found_by_the_command_is_a_usage_error_of_its_own_parser(
    exc: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's way: the command's own usage line, then the error on one line, exit 2."""
    raising(monkeypatch, exc)
    code, out, err = run(LIST, capsys)
    assert (code, out) == (2, "")
    assert err.startswith("usage: zkctl topic list ")
    assert err.endswith("\nzkctl topic list: error: no such thing\n")


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (ZooKeeperError("ZooKeeper 3.4 is too old"), "zkctl: error: ZooKeeper 3.4 is too old"),
        (
            FileNotFoundError(2, "No such file or directory", "plan.json"),
            "zkctl: error: [Errno 2] No such file or directory: 'plan.json'",
        ),
        (
            KazooTimeoutError("Connection time-out"),
            "zkctl: error: ZooKeeper request failed (127.0.0.1:2181): KazooTimeoutError"
            " Connection time-out",
        ),
    ],
)
def test_an_operational_error_is_one_line_and_exit_1(
    exc: Exception, line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raising(monkeypatch, exc)
    assert run(LIST, capsys) == (1, "", f"{line}\n")


def test_a_lost_connection_without_a_message_names_its_kind_alone() -> None:
    args = argparse.Namespace(connect_string="127.0.0.1:2181/c", zk_writes_sent=0)
    assert cli._operational_message(ConnectionLoss(), args) == (
        "ZooKeeper stopped answering (127.0.0.1:2181/c, ConnectionLoss); nothing was changed"
    )
    assert cli._operational_message(ConnectionLoss("gone"), args) == (
        "ZooKeeper stopped answering (127.0.0.1:2181/c, ConnectionLoss: gone); nothing was changed"
    )


def test_a_bug_is_an_internal_error_with_the_traceback_only_under_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raising(monkeypatch, RuntimeError("boom"))
    code, out, err = run(LIST, capsys)
    assert (code, out) == (1, "")
    assert err == (
        "zkctl: internal error: RuntimeError: boom (run with --debug for the traceback)\n"
    )
    code, out, err = run([*LIST, "--debug"], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("RuntimeError: boom\nzkctl: internal error: RuntimeError: boom\n")


def test_an_expected_error_has_its_traceback_under_debug_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raising(monkeypatch, ZooKeeperError("down"))
    code, _, err = run(LIST, capsys)
    assert (code, err) == (1, "zkctl: error: down\n")
    code, _, err = run([*LIST, "--debug"], capsys)
    assert code == 1
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith("zkctl: error: down\n")


def test_an_interrupted_command_exits_130_or_128_and_the_signal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    raising(monkeypatch, KeyboardInterrupt())
    assert run(LIST, capsys) == (130, "", "zkctl: interrupted\n")
    raising(monkeypatch, Terminated(signal.SIGTERM))
    assert run(LIST, capsys) == (128 + signal.SIGTERM, "", "zkctl: stopped by SIGTERM\n")
    raising(monkeypatch, Terminated(signal.SIGHUP))
    assert run(LIST, capsys) == (128 + signal.SIGHUP, "", "zkctl: stopped by SIGHUP\n")


def test_a_reader_gone_away_ends_the_command_quietly_with_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`zkctl topic list | head`: stdout is pointed at /dev/null, no message."""
    pointed: list[int] = []
    monkeypatch.setattr(os, "dup2", lambda fd, fd2: pointed.append(fd2))
    monkeypatch.setattr(sys.stdout, "fileno", lambda: 1, raising=False)
    raising(monkeypatch, BrokenPipeError())
    assert run(LIST, capsys) == (1, "", "")
    assert pointed == [1]


def test_kazoos_logging_is_kept_from_the_user_unless_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kazoo_log = logging.getLogger("kazoo")
    monkeypatch.setattr(kazoo_log, "propagate", True)
    monkeypatch.setattr(kazoo_log, "handlers", [])
    raising(monkeypatch, ZooKeeperError("down"))
    run(LIST, capsys)
    assert kazoo_log.propagate is False
