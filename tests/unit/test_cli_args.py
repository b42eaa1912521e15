"""zkctl's argument handling and the pure validation behind every command (no ZooKeeper)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import random
import sys
import threading
import time
import types
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat

from admin import elect, metadata, reassign, topics
from admin.errors import (
    AdminError,
    InvalidArgumentError,
    ReplicaAssignmentError,
    TopicExistsError,
)
from cluster import local
from cluster import zookeeper as zkp
from controller.assignment import BrokerMetadata, RackAwareMode, assign_new_partitions
from tests.unit.fake_zk import FakeZk
from zkctl import admin_commands, cli, topic_commands
from zkdata import paths
from zkdata.znodes import (
    LeaderAndIsr,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_topic_config,
    encode_reassignment,
    encode_topic,
)

GENERATE = ("reassign", "--generate", "--topics-to-move-json-file")
BOOTSTRAP_VERIFY = [
    "reassign",
    "--verify",
    "--bootstrap-server",
    "h:1",
    *("--topic", "t", "--partition", "0", "--replicas", "1"),
]

HUGE = "1" * 5000  # more digits than Python's int() takes (4,300)

# Nothing listens here: a command that got as far as connecting would fail with exit 1.
UNREACHABLE = "127.0.0.1:1"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own errors
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(lines) == 1, stderr
    return lines[0]


# --- argparse-level errors: exit 2, usage, one error line ------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "required: COMMAND"),
        (["nonsense"], "invalid choice: 'nonsense'"),
        (["topic"], "required: ACTION"),
        (["topic", "create", "--partitions", "1"], "required: --topic"),
        (["topic", "create", "--topic", "t", "--partitions", "x"], "invalid int value: 'x'"),
        # Kafka's tools read an Integer option with Integer.valueOf (joptsimple), untrimmed:
        # no spaces, no '_', no digit beyond the BMP, none past a Java int.
        (["topic", "create", "--topic", "t", "--partitions", " 5"], "invalid int value: ' 5'"),
        (["topic", "create", "--topic", "t", "--partitions", "1_0"], "invalid int value: '1_0'"),
        (
            ["topic", "create", "--topic", "t", "--replication-factor", "\U0001d7d1"],
            "invalid int value: '\U0001d7d1'",
        ),
        (
            ["topic", "add-partitions", "--topic", "t", "--partitions", "2147483648"],
            "invalid int value: '2147483648'",
        ),
        (["reassign", "--topic", "t", "--partition", "1 "], "'1 ' is not an integer"),
        (["reassign", "--topic", "t", "--partition", "1_0"], "'1_0' is not an integer"),
        (["broker", "stop", "--id", "\U0001d7d1"], "'\U0001d7d1' is not an integer"),
        (["topic", "add-partitions", "--topic", "t"], "required: --partitions"),
        (["topic", "delete"], "required: --topic"),
        (["reassign", "--execute", "--verify"], "not allowed with argument"),
        (["reassign", "--topic", "t", "--partition", "-1"], "-1 is negative"),
        (
            ["reassign", "--topic", "t", "--partition", "2147483648"],
            "2147483648 is more than 2147483647",
        ),
        (
            ["elect-leaders", "--preferred", "--topic", "t", "--partition", "2147483648"],
            "2147483648 is more than 2147483647",
        ),
        (["elect-leaders", "--all-topic-partitions"], "required: --preferred"),
        (["broker", "stop"], "required: --id"),
        (["broker", "explode", "--id", "1"], "invalid choice: 'explode'"),
        # A negative id is no broker's: a usage error, not "no broker -1 in the cluster"
        # with the exit code of a failed operation.
        (["broker", "kill", "--id", "-1"], "-1 is negative"),
        (["broker", "stop", "--id", "2147483648"], "2147483648 is more than 2147483647"),
        (["up", "--brokers", "0"], "must be at least 1"),
        (["up", "--session-timeout-ms", "soon"], "'soon' is not an integer"),
        (["--zk-timeout", "0", "controller"], "is not positive"),
        # Infinite: later converted to int milliseconds, an OverflowError (internal error).
        (["--zk-timeout", "inf", "controller"], "inf is not a finite number"),
        (["topic", "list", "--zk-timeout", "1e309"], "1e309 is not a finite number"),
        (["groups", "--list", "--timeout", "inf"], "inf is not a finite number"),
        (["down", "--timeout", "inf"], "inf is not a finite number"),
        # Finite but past what a socket or a wait takes: an OverflowError (internal error).
        (
            ["groups", "--list", "--bootstrap-server", "h:1", "--timeout", "1e12"],
            "1e12 seconds is more than 1000000 (about 11 days)",
        ),
        (["--zk-timeout", "1e300", "controller"], "1e300 seconds is more than 1000000"),
        # The resolver is never asked about "a..b" (an empty label): kazoo's thread printed
        # a UnicodeError traceback and the command waited out its timeout.
        (
            ["--zookeeper", "127.0.0.1:2181,a..b:2181/c", "controller"],
            "invalid ZooKeeper connect string '127.0.0.1:2181,a..b:2181/c': 'a..b' is not a host",
        ),
        # kazoo reads port 0 as none given: the command went to a ZooKeeper on 2181.
        (
            ["--zookeeper", "127.0.0.1:0/c", "topic", "list"],
            "invalid ZooKeeper connect string '127.0.0.1:0/c': '127.0.0.1:0': port 0 is no port",
        ),
        (["watch", "--duration", "1e12"], "1e12 seconds is more than 1000000"),
        (["status", "--bogus"], "unrecognized arguments: --bogus"),
        (["demo", "--faults", "kill,boom"], "unknown fault 'boom': choose from kill, stop"),
        (["demo", "--brokers", "1"], "must be at least 2: a failover needs another broker"),
    ],
)
def test_bad_arguments_exit_2_with_one_clear_error_line(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.startswith("usage: zkctl")
    assert expected in error_line(err)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            [
                "topic",
                "create",
                "--topic",
                "bad name",
                "--partitions",
                "1",
                "--replication-factor",
                "1",
            ],
            "illegal characters ' '",
        ),
        (["topic", "create", "--topic", "t"], "missing --partitions and --replication-factor"),
        (
            ["topic", "create", "--topic", "t", "--partitions", "0", "--replication-factor", "1"],
            "--partitions must be at least 1, not 0",
        ),
        (
            [
                "topic",
                "create",
                "--topic",
                "t",
                "--partitions",
                "2147483647",
                "--replication-factor",
                "1",
            ],
            "a topic has at most 100000 partitions, not 2147483647",
        ),
        (
            ["topic", "add-partitions", "--topic", "t", "--partitions", "100001"],
            "a topic has at most 100000 partitions, not 100001",
        ),
        (
            ["topic", "create", "--topic", "t", "--partitions", "1", "--replication-factor", "0"],
            "--replication-factor must be at least 1",
        ),
        (
            ["topic", "create", "--topic", "t", "--replica-assignment", "1:2", "--partitions", "1"],
            "cannot be used with --partitions",
        ),
        (
            ["topic", "create", "--topic", "t", "--replica-assignment", "1:2,3"],
            "partition 1 has replication factor 1 but partition 0 has 2",
        ),
        (
            ["topic", "create", "--topic", "t", "--replica-assignment", "1:1"],
            "duplicate broker(s) 1",
        ),
        (
            [
                "topic",
                "create",
                "--topic",
                "t",
                "--partitions",
                "1",
                "--replication-factor",
                "1",
                "--config",
                "retention.ms=soon",
                "--config",
                "no.such.key=1",
            ],
            "unknown topic config key 'no.such.key'",
        ),
        (
            [
                "topic",
                "create",
                "--topic",
                "t",
                "--partitions",
                "1",
                "--replication-factor",
                "1",
                "--config",
                "novalue",
            ],
            "is not of the form key=value",
        ),
        (["topic", "alter-config", "--topic", "t"], "nothing to change"),
        (
            [
                "topic",
                "alter-config",
                "--topic",
                "t",
                "--add-config",
                "retention.ms=1",
                "--delete-config",
                "retention.ms",
            ],
            "given to both",
        ),
        (["topic", "add-partitions", "--topic", "t", "--partitions", "0"], "at least 1"),
        # Kafka 2.8's checkArgs: a partition below or at min.insync.replicas needs the
        # brokers' default of it, which its --zookeeper mode does not have (listed none, or
        # those without a leader, before); and the report flags go one at a time.
        (
            ["topic", "describe", "--under-min-isr-partitions"],
            "--under-min-isr-partitions needs the brokers' configuration",
        ),
        (
            ["topic", "describe", "--at-min-isr-partitions", "--topic", "t"],
            "--at-min-isr-partitions needs the brokers' configuration",
        ),
        (
            ["topic", "describe", "--under-replicated-partitions", "--topics-with-overrides"],
            "not allowed with argument --under-replicated-partitions",
        ),
        (
            ["topic", "describe", "--unavailable-partitions", "--under-replicated-partitions"],
            "not allowed with argument --unavailable-partitions",
        ),
        (
            ["topic", "describe", "--topics-with-overrides", "--at-min-isr-partitions"],
            "not allowed with argument --topics-with-overrides",
        ),
        (["reassign"], "give --reassignment-json-file FILE, or --topic, --partition and"),
        (["reassign", "--topic", "t", "--partition", "0"], "missing --replicas"),
        (
            ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1,1"],
            "lists broker(s) 1 more than once",
        ),
        (
            ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1,x"],
            "'x' is not a broker id",
        ),
        (
            ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1,2147483648"],
            "2147483648 is not a broker id (at most 2147483647)",
        ),
        # '²' passes str.isdigit(), and int() refuses it: ASCII digits only.
        (
            ["reassign", "--topic", "t", "--partition", "0", "--replicas", "1,\u00b2"],
            "'\u00b2' is not a broker id",
        ),
        # More than 4,300 digits: Python's int() refuses them with a plain ValueError, an
        # internal error (exit 1); and ids are Java ints from 0, as --replicas has them.
        (
            ["topic", "create", "--topic", "t", "--replica-assignment", f"{HUGE}:1"],
            "is not a broker id",
        ),
        (
            ["topic", "create", "--topic", "t", "--replica-assignment", "1:-1"],
            "'-1' is not a broker id",
        ),
        (
            ["topic", "create", "--topic", "t", "--replica-assignment", "1:2147483648"],
            "'2147483648' is not a broker id",
        ),
        (
            [
                "topic",
                "add-partitions",
                "--topic",
                "t",
                "--partitions",
                "2",
                "--replica-assignment",
                HUGE,
            ],
            "is not a broker id",
        ),
        (
            ["reassign", "--topic", "t", "--partition", "0", "--replicas", HUGE],
            "is not a broker id (at most 2147483647)",
        ),
        (
            ["reassign", "--verify", "--topic", "t", "--partition", "0", "--replicas", f"1,{HUGE}"],
            "is not a broker id (at most 2147483647)",
        ),
        (["reassign", "--list", "--bootstrap-server", f"h:{HUGE}"], "is not host:port"),
        (["groups", "--list", "--bootstrap-server", f"h:{HUGE}"], "is not host:port"),
        (["reassign", "--list", "--bootstrap-server", "h:\u00b2"], "'h:\u00b2' is not host:port"),
        (["groups", "--list", "--bootstrap-server", "h:\u00b2"], "'h:\u00b2' is not host:port"),
        # socket's IDNA encoding refuses these hosts (UnicodeError: an internal error).
        (["reassign", "--list", "--bootstrap-server", "a..b:9092"], "'a..b' is not a host name"),
        (["groups", "--list", "--bootstrap-server", "a..b:9092"], "'a..b' is not a host name"),
        (
            [
                "groups",
                "--describe",
                "--group",
                "g",
                "--bootstrap-server",
                "h:1," + "a" * 64 + ":1",
            ],
            "is not a host name (label",
        ),
        (
            ["reassign", "--reassignment-json-file", "/nonexistent/r.json"],
            "cannot read reassignment file /nonexistent/r.json",
        ),
        (["reassign", "--list"], "--list needs --bootstrap-server"),
        (["reassign", "--cancel", "--topic", "t"], "--cancel needs --bootstrap-server"),
        (["reassign", "--additional"], "--additional needs --bootstrap-server"),
        # Kafka 2.8's permittedArgs: --additional only with --execute, and --list takes
        # no targets ("Option ... can't be used with action ..."); accepted and ignored before.
        (
            [*BOOTSTRAP_VERIFY, "--additional"],
            "--additional goes with --execute, not --verify",
        ),
        (
            ["reassign", "--verify", "--additional", "--topic", "t"],
            "--additional goes with --execute, not --verify",
        ),
        (
            ["reassign", "--list", "--additional", "--bootstrap-server", "h:1"],
            "--additional goes with --execute, not --list",
        ),
        (
            ["reassign", "--cancel", "--additional", "--bootstrap-server", "h:1", "--topic", "t"],
            "--additional goes with --execute, not --cancel",
        ),
        (
            ["reassign", "--list", "--bootstrap-server", "h:1", "--reassignment-json-file", "f"],
            "--list takes no partitions; not --reassignment-json-file",
        ),
        (
            ["reassign", "--list", "--bootstrap-server", "h:1", "--topic", "t", "--partition", "0"],
            "--list takes no partitions; not --topic, --partition",
        ),
        (["reassign", "--list", "--bootstrap-server", "h"], "'h' is not host:port"),
        (["reassign", "--list", "--bootstrap-server", "h:1,h:0"], "'h:0' is not host:port"),
        (
            ["reassign", "--bootstrap-server", "h:1", "--topic", "t", "--partition", "0"],
            "missing --replicas",
        ),
        (["reassign", "--generate"], "--generate needs --topics-to-move-json-file FILE and"),
        (["reassign", "--broker-list", "1"], "--broker-list go(es) with --generate"),
        (
            [*GENERATE, "f", "--broker-list", "1", "--topic", "t"],
            "--generate takes whole topics; not --topic",
        ),
        (
            [*GENERATE, "/nonexistent/t.json", "--broker-list", "1"],
            "cannot read topics file /nonexistent/t.json",
        ),
        (["elect-leaders", "--preferred"], "give exactly one of --all-topic-partitions"),
        (
            ["elect-leaders", "--preferred", "--all-topic-partitions", "--topic", "t"],
            "give exactly one of",
        ),
        (
            ["elect-leaders", "--preferred", "--all-topic-partitions", "--partition", "1"],
            "--partition needs --topic",
        ),
    ],
)
def test_invalid_requests_exit_2_before_touching_zookeeper(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The connect string points nowhere: reaching it would be exit 1, not 2.
    code, out, err = run(["--zookeeper", UNREACHABLE, *argv], capsys)
    assert code == 2, err
    assert out == ""
    assert expected in error_line(err)
    assert "Traceback" not in err


@pytest.mark.parametrize("action", [["--execute", "--additional"], ["--verify"], ["--cancel"]])
def test_ids_beyond_a_java_int_are_refused_before_asking_the_brokers(
    action: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --bootstrap-server such an id reached the wire's encoder (EncodeError: an
    internal error); it is refused with the file's other problems, nothing sent."""
    f = tmp_path / "r.json"
    f.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2**40]}]}
        )
    )
    argv = ["reassign", "--bootstrap-server", UNREACHABLE, "--reassignment-json-file", str(f)]
    code, out, err = run([*argv, *action], capsys)
    assert code == 2, err
    assert out == ""
    assert "must be a non-empty list of broker ids (0 to 2147483647)" in error_line(err)


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["reassign", "--reassignment-json-file", "{f}"], "reassignment file"),
        (["reassign", "--verify", "--reassignment-json-file", "{f}"], "reassignment file"),
        (["elect-leaders", "--preferred", "--path-to-json-file", "{f}"], "election file"),
        ([*GENERATE, "{f}", "--broker-list", "1"], "topics file"),
    ],
)
def test_a_file_not_utf8_is_named_in_a_usage_error(
    argv: list[str], what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It raised UnicodeDecodeError, reported as an internal error."""
    f = tmp_path / "latin1.json"
    f.write_bytes('{"version":1,"partitions":[{"topic":"caf\xe9"}]}'.encode("latin-1"))
    code, out, err = run(
        ["--zookeeper", UNREACHABLE, *(a.replace("{f}", str(f)) for a in argv)], capsys
    )
    assert code == 2, err
    assert out == ""
    assert f"cannot read {what} {f}: not UTF-8 text (byte 0xe9 at offset 40)" in error_line(err)


def test_up_rejects_overrides_of_per_broker_keys_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["up", "--dir", str(tmp_path / "c"), "--override", "broker.id=7"], capsys)
    assert code == 2
    assert "--override cannot set broker.id" in error_line(err)
    code, _, err = run(
        ["up", "--dir", str(tmp_path / "c"), "--override", "num.partitions=many"], capsys
    )
    assert code == 2
    assert "invalid value 'many' for config key 'num.partitions'" in error_line(err)
    assert not (tmp_path / "c" / "cluster.json").exists()


def test_up_refuses_a_directory_with_a_comma(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """log.dirs is a comma-separated list: each broker got two log directories, the first
    outside the cluster's directory, where zkctl status and zkctl controller never look."""
    # Were it not refused, no ZooKeeper is started for it.
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    monkeypatch.setenv("ZKCTL_ZK_DISABLE", "docker,home,debian")
    code, out, err = run(["up", "--dir", str(tmp_path / "a,b"), "--brokers", "1"], capsys)
    assert code == 2, err
    assert out == ""
    assert "the cluster's directory cannot contain a comma" in error_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("connect", "problem"),
    [
        (":2181", "bad hostname"),
        ("127.0.0.1:abc", "Port could not be cast to integer value as 'abc'"),
        ("a..b:2181", "'a..b' is not a host name (label empty or too long)"),
        ("127.0.0.1:1/a/../b", "chroot '/a/../b': relative paths not allowed"),
        ("127.0.0.1:0", "'127.0.0.1:0': port 0 is no port to connect to"),
    ],
)
@pytest.mark.parametrize("given", ["--zookeeper", "ZKCTL_ZOOKEEPER"])
@pytest.mark.parametrize("command", [["up", "--brokers", "1"], ["demo"]])
def test_up_refuses_a_malformed_connect_string_as_a_usage_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    connect: str,
    problem: str,
    given: str,
    command: list[str],
) -> None:
    """As every other command: exit 2 naming what is wrong, nothing started. It failed
    with exit 1, "cannot create the chroot ... (ValueError: bad hostname); is it running?"
    (the demo: "cannot use ZooKeeper at ..."), after up had cleared and written the
    cluster's directory, or waited out a whole connection timeout (a..b) for "Connection
    time-out". Refused before any connection to ZooKeeper is tried (that waited)."""
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    monkeypatch.setattr(KazooClient, "start_async", lambda *a: pytest.fail("connected"))
    argv = [*command, "--dir", str(tmp_path / "c")]
    if given == "--zookeeper":
        argv += ["--zookeeper", connect]
    else:
        monkeypatch.setenv("ZKCTL_ZOOKEEPER", connect)
    code, out, err = run(argv, capsys)
    assert code == 2, err
    assert out == ""
    assert error_line(err).endswith(f"invalid ZooKeeper connect string {connect!r}: {problem}")
    assert "Traceback" not in err
    assert not (tmp_path / "c").exists()


def test_up_on_an_unreachable_zookeeper_gives_up_within_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--timeout bounds the whole up, the chroot's creation in a ZooKeeper of one's own
    too: that waited 10 s whatever the timeout. The chroot's creation is given at most
    what is left of the 2 s."""
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    bounds: list[float] = []
    real_chroot_connect_string = zkp.chroot_connect_string

    def chroot_connect_string(connect: str, name: str, *, timeout: float) -> str:
        bounds.append(timeout)
        return real_chroot_connect_string(connect, name, timeout=timeout)

    monkeypatch.setattr(zkp, "chroot_connect_string", chroot_connect_string)
    argv = ["up", "--dir", str(tmp_path / "c"), "--brokers", "1", "--zookeeper", UNREACHABLE]
    code, out, err = run([*argv, "--timeout", "2"], capsys)
    assert code == 1, err
    assert len(bounds) == 1
    assert bounds[0] <= 2.0, bounds
    assert out == ""
    assert error_line(err).startswith("zkctl: error: cannot create the chroot /zkctl-")
    assert f"in ZooKeeper {UNREACHABLE} (KazooTimeoutError" in error_line(err)
    assert "Traceback" not in err


def test_no_zookeeper_anywhere_names_the_three_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["topic", "list"], capsys)
    assert code == 2
    line = error_line(err)
    assert "--zookeeper" in line
    assert "ZKCTL_ZOOKEEPER" in line
    assert "zkctl up" in line
    assert ".zkctl/cluster.json" in line


def test_a_stopped_local_cluster_is_an_operational_error_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After `zkctl down` cluster.json is there, its state "stopped": no argument is wrong,
    so it is exit 1 and one line (not the usage) saying the cluster is stopped, rather
    than pointing at `zkctl up` for writing a file that already exists."""
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    local.save(sample_cluster(tmp_path, state="stopped"))
    for argv in (["topic", "list"], ["controller"], ["watch", "--plain"]):
        code, out, err = run([*argv, "--dir", str(tmp_path)], capsys)
        assert code == 1, (argv, err)
        assert out == ""
        assert "usage:" not in err
        assert err.count("\n") == 1, err
        line = error_line(err)
        assert line.startswith("zkctl: error: ")
        assert f"the local cluster in {tmp_path} is stopped" in line
        assert f"zkctl up --dir {tmp_path}" in line
        assert "--zookeeper" in line
        assert "it writes" not in line


def test_global_options_work_before_and_after_the_command() -> None:
    parser = cli.build_parser()
    before = parser.parse_args(["--zookeeper", "a:1", "--dir", "d", "topic", "list"])
    after = parser.parse_args(["topic", "list", "--zookeeper", "a:1", "--dir", "d"])
    neither = parser.parse_args(["topic", "list"])
    assert (before.zookeeper, before.dir) == ("a:1", "d")
    assert (after.zookeeper, after.dir) == ("a:1", "d")
    assert (neither.zookeeper, neither.dir, neither.zk_timeout) == (None, ".zkctl", 10.0)


def test_every_read_command_has_json() -> None:
    parser = cli.build_parser()
    for argv in (
        ["topic", "list"],
        ["topic", "describe"],
        ["controller"],
        ["status"],
        ["reassign", "--verify"],
    ):
        assert parser.parse_args([*argv, "--json"]).json is True


def test_more_commands_plug_in_through_command_modules(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["extra"], capsys)
    assert code == 2
    assert "invalid choice: 'extra'" in err

    module = types.ModuleType("zkctl_test_extra")

    def register(subparsers: object, common: object) -> None:
        p = subparsers.add_parser("extra", parents=[common])  # type: ignore[attr-defined]
        p.set_defaults(handler=lambda args: print(f"extra in {args.dir}") or 0, parser=p)

    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "zkctl_test_extra", module)
    monkeypatch.setattr(cli, "COMMAND_MODULES", [*cli.COMMAND_MODULES, "zkctl_test_extra"])
    code, out, _ = run(["extra", "--dir", "x"], capsys)
    assert (code, out) == (0, "extra in x\n")


# --- topic create: the pure plan ---------------------------------------------------------------


def brokers(*ids: int, racks: dict[int, str] | None = None) -> list[BrokerMetadata]:
    return [BrokerMetadata(i, (racks or {}).get(i)) for i in ids]


def test_plan_assigns_with_kafkas_algorithm_and_configs() -> None:
    request = topics.parse_create_request(
        "orders", partitions=6, replication_factor=3, config=["min.insync.replicas=2"]
    )
    plan = topics.plan_topic_creation(request, brokers(1, 2, 3, 4), [], [], rng=random.Random(7))
    assert plan is not None
    assert sorted(plan.assignment) == list(range(6))
    assert all(len(set(r)) == 3 and set(r) <= {1, 2, 3, 4} for r in plan.assignment.values())
    assert plan.config == {"min.insync.replicas": "2"}
    assert plan.warnings == ()


def test_plan_is_rack_aware_when_every_broker_has_a_rack() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    request = topics.parse_create_request("t", partitions=12, replication_factor=3)
    plan = topics.plan_topic_creation(request, brokers(*racks, racks=racks), [], [])
    assert plan is not None
    for replicas in plan.assignment.values():
        assert {racks[b] for b in replicas} == {"a", "b", "c"}


def test_plan_with_partial_racks_points_at_disable_rack_aware() -> None:
    request = topics.parse_create_request("t", partitions=3, replication_factor=2)
    with pytest.raises(AdminError, match="--disable-rack-aware"):
        topics.plan_topic_creation(request, brokers(1, 2, 3, racks={1: "a"}), [], [])
    relaxed = topics.parse_create_request(
        "t", partitions=3, replication_factor=2, disable_rack_aware=True
    )
    assert relaxed.rack_aware_mode is RackAwareMode.DISABLED
    assert topics.plan_topic_creation(relaxed, brokers(1, 2, 3, racks={1: "a"}), [], [])


def test_plan_refuses_what_the_cluster_cannot_take() -> None:
    req = topics.parse_create_request("t", partitions=1, replication_factor=4)
    with pytest.raises(AdminError, match="larger than available brokers: 3"):
        topics.plan_topic_creation(req, brokers(1, 2, 3), [], [])
    with pytest.raises(AdminError, match="no brokers are registered"):
        topics.plan_topic_creation(req, [], [], [])
    explicit = topics.parse_create_request("t", replica_assignment="1:2,2:7")
    with pytest.raises(AdminError, match=r"broker\(s\) 7 not available"):
        topics.plan_topic_creation(explicit, brokers(1, 2, 3), [], [])


def test_plan_existing_deleted_and_colliding_topics() -> None:
    req = topics.parse_create_request("a.b", partitions=1, replication_factor=1)
    with pytest.raises(TopicExistsError, match="already exists"):
        topics.plan_topic_creation(req, brokers(1), ["a.b"], [])
    quiet = topics.parse_create_request(
        "a.b", partitions=1, replication_factor=1, if_not_exists=True
    )
    assert topics.plan_topic_creation(quiet, brokers(1), ["a.b"], []) is None
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        topics.plan_topic_creation(quiet, brokers(1), ["a.b"], ["a.b"])
    with pytest.raises(AdminError, match="collides with existing topics: a_b"):
        topics.plan_topic_creation(req, brokers(1), ["a_b", "other"], [])
    plan = topics.plan_topic_creation(req, brokers(1), ["other"], [])
    assert plan is not None
    assert plan.warnings == (topics.COLLISION_WARNING,)


def test_colliding_topics() -> None:
    assert topics.colliding_topics("a.b_c", ["a_b.c", "a.b_c", "abc", "a_b_c"]) == [
        "a_b.c",
        "a_b_c",
    ]


# --- add partitions ---------------------------------------------------------------------------


def assignment(parts: dict[int, list[int]], **kw: dict[int, tuple[int, ...]]) -> TopicAssignment:
    return TopicAssignment("t", {p: tuple(r) for p, r in parts.items()}, **kw)  # type: ignore[arg-type]


def test_new_partitions_follow_kafkas_add_partitions() -> None:
    a = assignment({0: [2, 3], 1: [3, 1]})
    got = topics.plan_new_partitions(a, 5, brokers(1, 2, 3))
    assert got == assign_new_partitions(brokers(1, 2, 3), {0: [2, 3], 1: [3, 1]}, 5)
    assert sorted(got) == [2, 3, 4]


def test_explicit_new_partitions_may_list_new_or_all() -> None:
    a = assignment({0: [1, 2]})
    only_new = topics.plan_new_partitions(
        a, 3, brokers(1, 2, 3), replica_assignment={0: [2, 3], 1: [3, 1]}
    )
    assert only_new == {1: [2, 3], 2: [3, 1]}
    every = topics.plan_new_partitions(
        a, 3, brokers(1, 2, 3), replica_assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]}
    )
    assert every == only_new
    with pytest.raises(AdminError, match="give either the 2 new ones or all 3"):
        topics.plan_new_partitions(a, 3, brokers(1, 2, 3), replica_assignment={0: [2, 3]})
    with pytest.raises(AdminError, match="replication factor 1, expected 2"):
        topics.plan_new_partitions(a, 2, brokers(1, 2, 3), replica_assignment={0: [3]})


def test_a_create_partitions_request_lists_the_new_partitions_only() -> None:
    """Kafka 2.8's ZkAdminManager.createPartitions: a request's assignments are the new
    partitions', any other count INVALID_REPLICA_ASSIGNMENT (the tool's shortcut of
    listing every partition is not the wire's)."""
    a = assignment({0: [1, 2]})
    every = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    with pytest.raises(
        ReplicaAssignmentError,
        match=r"^Increasing the number of partitions by 2 but 3 assignments provided\.$",
    ):
        topics.plan_new_partitions(
            a, 3, brokers(1, 2, 3), replica_assignment=every, new_partitions_only=True
        )
    with pytest.raises(ReplicaAssignmentError, match="by 2 but 0 assignments"):
        topics.plan_new_partitions(
            a, 3, brokers(1, 2, 3), replica_assignment={}, new_partitions_only=True
        )
    only_new = topics.plan_new_partitions(
        a, 3, brokers(1, 2, 3), replica_assignment={0: [2, 3], 1: [3, 1]}, new_partitions_only=True
    )
    assert only_new == {1: [2, 3], 2: [3, 1]}


def test_new_partitions_refusals() -> None:
    a = assignment({0: [1], 1: [2]})
    with pytest.raises(AdminError, match="can only be increased"):
        topics.plan_new_partitions(a, 2, brokers(1, 2))
    with pytest.raises(AdminError, match="marked for deletion"):
        topics.plan_new_partitions(a, 3, brokers(1, 2), marked_for_deletion=True)
    with pytest.raises(AdminError, match="reassignment of topic 't' is in progress"):
        topics.plan_new_partitions(a, 3, brokers(1, 2), reassigning=True)


class TreeZk(FakeZk):
    """FakeZk with the reads and the conditional write the topic operations use."""

    def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
        prefix = path.rstrip("/") + "/"
        if path not in self.nodes and not any(p.startswith(prefix) for p in self.nodes):
            return None
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix)})

    def get_many(
        self, path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        return [self.nodes.get(p) for p in path_list]

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        stat = self._existing(path, version)[1]
        stat = stat._replace(version=stat.version + 1)
        self.nodes[path] = (data, stat)
        return stat


def tree_with_topic(name: str, parts: dict[int, list[int]], broker_ids: tuple[int, ...]) -> TreeZk:
    zk = TreeZk()
    for b in broker_ids:
        registration = {
            "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
            "endpoints": [f"PLAINTEXT://127.0.0.1:{9000 + b}"],
            "jmx_port": -1,
            "host": "127.0.0.1",
            "timestamp": "1",
            "port": 9000 + b,
            "version": 5,
        }
        zk.put(paths.broker(b), json.dumps(registration).encode())
    zk.put(
        paths.topic(name),
        encode_topic(TopicAssignment(name, {p: tuple(r) for p, r in parts.items()})),
    )
    return zk


def test_the_partitions_of_an_internal_topic_cannot_be_changed() -> None:
    """Kafka's TopicCommand: "The number of partitions for the internal topic
    __consumer_offsets cannot be changed." Its CreatePartitions request (the broker's
    admin APIs) grows one all the same."""
    offsets = TopicAssignment("__consumer_offsets", {p: (1 + p % 3,) for p in range(50)})
    with pytest.raises(AdminError, match="internal topic '__consumer_offsets' cannot be changed"):
        topics.plan_new_partitions(offsets, 60, brokers(1, 2, 3))
    added = topics.plan_new_partitions(offsets, 51, brokers(1, 2, 3), internal_allowed=True)
    assert sorted(added) == [50]

    zk = tree_with_topic("__consumer_offsets", {p: [1 + p % 3] for p in range(50)}, (1, 2, 3))
    before = zk.nodes[paths.topic("__consumer_offsets")]
    with pytest.raises(AdminError, match="cannot be changed"):
        topics.add_partitions(zk, "__consumer_offsets", 60)  # type: ignore[arg-type]
    assert zk.nodes[paths.topic("__consumer_offsets")] == before
    result = topics.add_partitions(
        zk,  # type: ignore[arg-type]
        "__consumer_offsets",
        51,
        internal_allowed=True,
    )
    assert sorted(result.added) == [50]


@pytest.mark.parametrize("if_not_exists", [True, False])
def test_the_loser_of_two_racing_creates_is_told_the_topic_exists(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], if_not_exists: bool
) -> None:
    """Another `topic create` wrote the whole topic between this one's reads and its multi:
    Kafka 2.8's TopicCommand answers TopicExistsException, which --if-not-exists swallows
    (exit 0). Both used to exit 1 with "the config znode changed ... run the command
    again"."""

    class RacingZk(TreeZk):
        winner: Any = None

        def multi(self, ops: Any, *, session: int | None = None) -> list[Any]:
            winner, self.winner = self.winner, None
            if winner is not None:
                winner()
            return super().multi(ops, session=session)

    zk = RacingZk()
    zk.nodes.update(tree_with_topic("t", {0: [1, 2]}, (1, 2, 3)).nodes)
    on_tree(monkeypatch, zk)
    monkeypatch.setattr(topic_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    theirs = topics.parse_create_request("new", partitions=1, replication_factor=1)
    zk.winner = lambda: topics.create_topic(zk, theirs)  # type: ignore[arg-type]
    flag = ["--if-not-exists"] if if_not_exists else []
    argv = ["topic", "create", "--topic", "new", "--partitions", "1", "--replication-factor", "1"]
    code, out, err = run(["--zookeeper", UNREACHABLE, *argv, *flag], capsys)
    assert paths.topic("new") in zk.nodes  # the winner's
    if if_not_exists:
        assert (code, err) == (0, "")
        assert "already exists" in out
    else:
        assert code == 1
        assert "already exists" in err
        assert "run the command again" not in err


def test_deleting_an_internal_topic_checks_it_exists_first(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's ZookeeperTopicService.deleteTopic runs ensureTopicExists before it
    refuses an internal topic: an absent one is nothing to do with --if-exists (exit 0)
    and "does not exist" without; one that exists is refused (its DeleteTopics request
    is not)."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    monkeypatch.setattr(topic_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    delete = ["--zookeeper", UNREACHABLE, "topic", "delete", "--topic", "__consumer_offsets"]
    code, out, err = run([*delete, "--if-exists"], capsys)
    assert (code, err) == (0, "")
    assert "does not exist; nothing done" in out
    code, _, err = run(delete, capsys)
    assert code == 1
    assert "'__consumer_offsets' does not exist" in err

    zk.nodes.update(tree_with_topic("__consumer_offsets", {0: [1]}, ()).nodes)
    for argv in (delete, [*delete, "--if-exists"]):
        code, _, err = run(argv, capsys)
        assert code == 1
        assert "internal topic and is not allowed to be marked for deletion" in err
    assert paths.delete_topic("__consumer_offsets") not in zk.nodes
    zk.put(paths.DELETE_TOPICS, b"")  # the fake's create does not make parents
    result = topics.delete_topic(zk, "__consumer_offsets", internal_allowed=True)  # type: ignore[arg-type]
    assert result.outcome == "marked"


def test_add_partitions_if_exists_does_nothing_for_a_missing_topic(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's ZookeeperTopicService.alterTopic runs ensureTopicExists(..., !ifExists):
    `--alter --if-exists` on a missing topic does nothing, exit 0 (zkctl had no
    --if-exists). A topic that exists grows all the same; a bad argument is still one."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    monkeypatch.setattr(topic_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    grow = ["--zookeeper", UNREACHABLE, "topic", "add-partitions", "--partitions", "2"]
    code, out, err = run([*grow, "--topic", "nope", "--if-exists"], capsys)
    assert (code, err) == (0, "")
    assert out == "Topic nope does not exist; nothing done (--if-exists).\n"
    assert paths.topic("nope") not in zk.nodes
    code, _, err = run([*grow, "--topic", "nope"], capsys)
    assert code == 1
    assert "'nope' does not exist" in err
    code, out, _ = run([*grow, "--topic", "t", "--if-exists"], capsys)
    assert code == 0
    assert "Adding partitions succeeded!" in out
    code, _, err = run([*grow, "--topic", "nope", "--if-exists", "--partitions", "0"], capsys)
    assert code == 2
    assert "at least 1" in error_line(err)


# --- configs ----------------------------------------------------------------------------------


def test_config_alteration_merges_and_validates_the_result() -> None:
    current = {"retention.ms": "1000", "max.compaction.lag.ms": "100"}
    assert topics.plan_config_alteration(current, {"segment.ms": "60000"}, ["retention.ms"]) == {
        "max.compaction.lag.ms": "100",
        "segment.ms": "60000",
    }
    with pytest.raises(AdminError, match="not set on this topic"):
        topics.plan_config_alteration(current, {}, ["cleanup.policy"])
    # Each value is fine alone; together they conflict.
    with pytest.raises(AdminError, match=r"min\.compaction\.lag\.ms"):
        topics.plan_config_alteration(current, {"min.compaction.lag.ms": "500"}, [])


@pytest.mark.parametrize(
    "argv",
    [
        ["alter-config", "--topic", "t", "--add-config", "unclean.leader.election.enable = true"],
        [
            "create", "--topic", "u", "--partitions", "1", "--replication-factor", "1",
            "--config", "unclean.leader.election.enable = true",
        ],
    ],
)  # fmt: skip
def test_a_config_value_is_stored_trimmed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Kafka 2.8's TopicCommand splits at \\s*=\\s* and trims: "true" is stored, which the
    controller reads as the broker does (" true" was stored as typed)."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    monkeypatch.setattr(topic_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    code, _, err = run(["--zookeeper", UNREACHABLE, "topic", *argv], capsys)
    assert code == 0, err
    name = argv[argv.index("--topic") + 1]
    stored = decode_topic_config(name, zk.nodes[paths.topic_config(name)][0])
    assert stored == {"unclean.leader.election.enable": "true"}


def test_add_config_takes_kafka_configs_lists(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """kafka-configs.sh --alter --add-config 'k1=v1,k2=[v1,v2]' (ConfigCommand's
    parseConfigsToBeAdded): both were refused as "not of the form key=value" (exit 2)."""
    zk = tree_with_topic("t", {0: [1, 2]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    monkeypatch.setattr(topic_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    alter = ["--zookeeper", UNREACHABLE, "topic", "alter-config", "--topic", "t"]
    add = ("--add-config", "retention.ms=1000,segment.ms=9000")
    code, _, err = run([*alter, *add, "--add-config", "cleanup.policy=[compact,delete]"], capsys)
    assert code == 0, err
    stored = decode_topic_config("t", zk.nodes[paths.topic_config("t")][0])
    assert stored == {
        "retention.ms": "1000",
        "segment.ms": "9000",
        "cleanup.policy": "compact,delete",
    }
    code, out, err = run([*alter, "--add-config", "cleanup.policy=compact,delete"], capsys)
    assert (code, out) == (2, "")
    assert "'delete' is not of the form key=value" in error_line(err)
    assert "square brackets" in error_line(err)


# --- reassignment ------------------------------------------------------------------------------


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def test_reassignment_json_is_kafkas_format() -> None:
    text = json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
                {"topic": "u", "partition": 3, "replicas": [3]},
            ],
        }
    )
    assert reassign.parse_reassignment_json(text) == {tp("t", 0): (1, 2), tp("u", 3): (3,)}
    round_trip = reassign.format_reassignment_json({tp("t", 0): (1, 2)})
    assert reassign.parse_reassignment_json(round_trip) == {tp("t", 0): (1, 2)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a JSON object"),
        ('{"version":2,"partitions":[]}', "unsupported version 2"),
        ('{"partitions":[]}', "list is empty"),
        ('{"partitions":[{"topic":"t","partition":0}]}', "'replicas' must be a non-empty list"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "non-empty list"),
        ('{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', "'partition' must be"),
        # Ids are Java ints: beyond, the request could not be sent to a broker.
        (
            '{"partitions":[{"topic":"t","partition":2147483648,"replicas":[1]}]}',
            "'partition' must be an integer from 0 to 2147483647",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2147483648]}]}',
            "'replicas' must be a non-empty list of broker ids (0 to 2147483647)",
        ),
        ('{"partitions":[{"topic":"t t","partition":0,"replicas":[1]}]}', "illegal characters"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}', "contains duplicates"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
            'only "any"',
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
            '{"topic":"t","partition":0,"replicas":[2]}]}',
            "duplicate partitions: t-0",
        ),
    ],
)
def test_reassignment_json_errors(text: str, expected: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^f\.json: ") as info:
        reassign.parse_reassignment_json(text, "f.json")
    assert expected in str(info.value)


@pytest.mark.parametrize(
    "argv",
    [
        ["reassign", "--reassignment-json-file"],
        ["elect-leaders", "--preferred", "--path-to-json-file"],
        ["reassign", "--generate", "--broker-list", "1,2", "--topics-to-move-json-file"],
    ],
)
def test_a_deeply_nested_json_file_is_a_usage_error_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """json.loads raises RecursionError, not ValueError, for JSON nested too deeply: it was
    "internal error: RecursionError" (exit 1), not the usage error any bad JSON is."""
    on_tree(monkeypatch, tree_with_topic("t", {0: [1, 2]}, (1, 2, 3)))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    code, _, err = run(["--zookeeper", UNREACHABLE, *argv, str(deep)], capsys)
    assert code == 2, err
    assert "internal error" not in err
    assert f"{deep}: JSON nested too deeply" in err


def test_reassignment_targets_are_checked_against_the_cluster() -> None:
    topics_now = {"t": assignment({0: [1, 2], 1: [2, 3]})}
    reassign.check_targets({tp("t", 0): (3, 2)}, topics_now, {1, 2, 3}, [])
    with pytest.raises(AdminError) as info:
        reassign.check_targets(
            {tp("t", 5): (1,), tp("gone", 0): (1,), tp("t", 0): (4, 9)},
            topics_now,
            {1, 2, 3},
            [],
        )
    message = str(info.value)
    assert "topic 'gone' does not exist" in message
    assert "non-existent partitions: t-5" in message
    assert "broker(s) 4, 9 are not registered (registered: 1, 2, 3)" in message
    with pytest.raises(AdminError, match="marked for deletion"):
        reassign.check_targets({tp("t", 0): (1,)}, topics_now, {1}, ["t"])


def test_topics_to_move_json_is_kafkas_format() -> None:
    text = '{"topics":[{"topic":"t"},{"topic":"u"}],"version":1}'
    assert reassign.parse_topics_to_move_json(text) == ["t", "u"]
    for bad, expected in [
        ("{", "not valid JSON"),
        ('{"topics":{}}', "expected a JSON object with a 'topics' list"),
        ('{"topics":[],"version":1}', "the topic list is empty"),
        ('{"topics":[{"topic":"t"}],"version":2}', "unsupported version 2"),
        ('{"topics":[{"name":"t"}]}', "each entry needs a 'topic' name"),
        ('{"topics":[{"topic":"t t"}]}', "illegal characters"),
        (
            '{"topics":[{"topic":"t"},{"topic":"u"},{"topic":"t"}]}',
            "List of topics to reassign contains duplicate entries: t",
        ),
    ]:
        with pytest.raises(InvalidArgumentError) as info:
            reassign.parse_topics_to_move_json(bad, "f.json")
        assert expected in str(info.value), bad


@pytest.mark.parametrize(
    ("broker_list", "expected"),
    [
        ("1,\u00b2", "--broker-list '1,\u00b2': '\u00b2' is not a broker id"),
        (f"1,{HUGE}", "is not a broker id (at most 2147483647)"),  # int() refuses it
    ],
    ids=["superscript-two", "huge"],
)
def test_a_broker_list_of_other_digits_is_a_usage_error(
    broker_list: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "topics.json"
    f.write_text('{"topics":[{"topic":"t"}],"version":1}')
    code, _, err = run(
        ["--zookeeper", UNREACHABLE, *GENERATE, str(f), "--broker-list", broker_list], capsys
    )
    assert code == 2, err
    assert expected in error_line(err)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 12), st.integers(1, 3)), min_size=1, max_size=3),
    brokers=st.sets(st.integers(0, 9), min_size=3, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_generated_proposal_moves_whole_topics_onto_the_listed_brokers(
    sizes: list[tuple[int, int]], brokers: set[int], seed: int
) -> None:
    """--generate (Kafka's calculateAssignment): each topic's partitions, and only those,
    on distinct listed brokers, its replication factor kept, its leaders spread evenly."""
    current = {
        tp(f"t{i}", p): tuple(range(100, 100 + factor))
        for i, (partitions, factor) in enumerate(sizes)
        for p in range(partitions)
    }
    listed = [BrokerMetadata(b) for b in sorted(brokers)]
    proposed = reassign.proposed_assignment(current, listed, rng=random.Random(seed))
    assert set(proposed) == set(current)
    for part, replicas in proposed.items():
        assert len(replicas) == len(current[part])
        assert len(set(replicas)) == len(replicas)
        assert set(replicas) <= brokers
    for i in range(len(sizes)):
        leaders = [r[0] for part, r in proposed.items() if part.topic == f"t{i}"]
        counts = [leaders.count(b) for b in brokers]
        assert max(counts) - min(counts) <= 1


def test_a_generated_proposal_respects_racks_or_refuses_half_of_them() -> None:
    current = {tp("t", p): (1, 2) for p in range(6)}
    racked = [BrokerMetadata(b, rack) for b, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b"))]
    proposed = reassign.proposed_assignment(current, racked, rng=random.Random(7))
    rack = {m.id: m.rack for m in racked}
    assert all(rack[r[0]] != rack[r[1]] for r in proposed.values())  # one replica per rack
    half = [*racked[:3], BrokerMetadata(5)]
    with pytest.raises(AdminError, match="Not all brokers have rack information"):
        reassign.proposed_assignment(current, half)
    assert set(reassign.proposed_assignment(current, half, rack_aware=False)) == set(current)
    with pytest.raises(AdminError, match="Replication factor: 2 larger than available brokers: 1"):
        reassign.proposed_assignment(current, [BrokerMetadata(1)])


def test_reassignment_status() -> None:
    target = (3, 2)
    done = assignment({0: [3, 2]})
    status = reassign.reassignment_status
    assert status(tp("t", 0), target, done, None).status == "complete"
    pending = metadata.PendingReassignment({tp("t", 0): target})
    assert status(tp("t", 0), target, done, pending).status == "in_progress"
    assert status(tp("t", 1), target, assignment({1: [3, 2]}), pending).status == "complete"
    moving = assignment({0: [3, 2, 1]}, removing_replicas={0: (1,)})
    assert status(tp("t", 0), target, moving, None).status == "in_progress"
    assert status(tp("t", 0), target, assignment({0: [1, 2]}), None).status == "failed"
    assert status(tp("t", 0), target, None, None).status == "unknown"
    # A malformed /admin/reassign_partitions may hold any partition: still pending.
    unreadable = metadata.PendingReassignment({}, readable=False)
    assert status(tp("t", 0), target, done, unreadable).status == "in_progress"
    # One whose entries were all unreadable holds none (the controller skips them).
    assert status(tp("t", 0), target, done, metadata.PendingReassignment({})).status == ("complete")


def on_tree(monkeypatch: pytest.MonkeyPatch, zk: TreeZk) -> None:
    """zkctl's commands talk to ``zk`` instead of connecting to ZooKeeper."""
    zk.put("/admin", b"")  # the fake's create does not make parents

    @contextlib.contextmanager
    def session(args: argparse.Namespace) -> Iterator[TreeZk]:
        yield zk

    monkeypatch.setattr(admin_commands, "zk_session", session)


def test_a_printed_reassignment_json_is_kafkas_with_log_dirs() -> None:
    """Kafka 2.8's formatAsReassignmentJson (the JSON --generate and --execute print):
    version, then the partitions in topic-partition order, each with topic, partition,
    replicas and "log_dirs" ("any" per replica). The znode keeps its own encoding."""
    targets = {tp("u", 0): (3,), tp("t", 1): (2, 3, 1), tp("t", 0): (1, 2)}
    assert reassign.format_reassignment_json(targets) == (
        '{"version":1,"partitions":['
        '{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"t","partition":1,"replicas":[2,3,1],"log_dirs":["any","any","any"]},'
        '{"topic":"u","partition":0,"replicas":[3],"log_dirs":["any"]}]}'
    )
    assert encode_reassignment(targets) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]},'
        b'{"topic":"t","partition":1,"replicas":[2,3,1]},'
        b'{"topic":"u","partition":0,"replicas":[3]}]}'
    )


def test_generate_and_execute_print_kafkas_json_and_started_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--generate's two JSONs and --execute's rollback JSON carry log_dirs; "Successfully
    started partition reassignment%s for %s", the "s" only for more than one (Kafka 2.8's
    executeAssignment)."""
    zk = tree_with_topic("t", {0: [1, 2], 1: [2, 3]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    topics_file = tmp_path / "topics.json"
    topics_file.write_text('{"topics":[{"topic":"t"}],"version":1}')
    code, out, err = run(
        ["--zookeeper", UNREACHABLE, *GENERATE, str(topics_file), "--broker-list", "1,2,3"], capsys
    )
    assert code == 0, err
    current, proposed = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    assert current["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "replicas": [1, 2],
        "log_dirs": ["any", "any"],
    }
    assert all(p["log_dirs"] == ["any"] * len(p["replicas"]) for p in proposed["partitions"])

    one = tmp_path / "one.json"
    one.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}')
    code, out, err = run(
        ["--zookeeper", UNREACHABLE, "reassign", "--reassignment-json-file", str(one)], capsys
    )
    assert code == 0, err
    assert out.splitlines() == [
        "Current partition replica assignment",
        "",
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}',
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignment for t-0",
    ]
    assert zk.nodes[paths.REASSIGN_PARTITIONS][0] == encode_reassignment({tp("t", 0): (2, 3)})

    del zk.nodes[paths.REASSIGN_PARTITIONS]
    code, out, err = run(
        [
            "--zookeeper",
            UNREACHABLE,
            "reassign",
            "--topic",
            "t",
            "--partition",
            "1",
            "--replicas",
            "3,1",
        ],
        capsys,
    )
    assert code == 0, err
    assert out.splitlines()[-1] == "Successfully started partition reassignment for t-1"
    assert admin_commands.started_line([tp("t", 0), tp("t", 1)]) == (
        "Successfully started partition reassignments for t-0,t-1"
    )


def test_verify_prints_kafkas_lines_for_each_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's partitionReassignmentStatesToString: complete; still in progress; and,
    for one neither moving nor at its target, "There is no active reassignment of partition
    t-0, but replica set is 1,2 rather than 2,3." """
    zk = tree_with_topic("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]}, (1, 2, 3))
    on_tree(monkeypatch, zk)
    zk.put(paths.REASSIGN_PARTITIONS, encode_reassignment({tp("t", 2): (1, 2)}))
    f = tmp_path / "r.json"
    f.write_text(
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]},'
        '{"topic":"t","partition":1,"replicas":[2,3]},'
        '{"topic":"t","partition":2,"replicas":[1,2]}]}'
    )
    code, out, err = run(
        ["--zookeeper", UNREACHABLE, "reassign", "--verify", "--reassignment-json-file", str(f)],
        capsys,
    )
    assert code == 0, err
    assert out.splitlines() == [
        "Status of partition reassignment:",
        "There is no active reassignment of partition t-0, but replica set is 1,2 rather than 2,3.",
        "Reassignment of partition t-1 is complete.",
        "Reassignment of partition t-2 is still in progress.",
    ]


def test_a_reassignment_bigger_than_a_znode_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Legal but more than ZooKeeper's jute.maxbuffer holds: refused with its size (exit 1),
    rather than sent and lost with the connection ZooKeeper drops."""
    n = 30_000
    targets = {tp("t", p): (2,) for p in range(n)}
    with pytest.raises(AdminError, match=r"bytes, more than a znode holds .*split"):
        reassign.reassignment_znode_data(targets)
    assert len(reassign.reassignment_znode_data({tp("t", 0): (2,)})) < 100
    zk = tree_with_topic("t", {p: [1] for p in range(n)}, (1, 2))
    on_tree(monkeypatch, zk)
    with pytest.raises(AdminError, match=r"[0-9,]+ bytes"):
        reassign.start_reassignment(zk, targets)  # type: ignore[arg-type]
    monkeypatch.setattr(admin_commands, "_targets", lambda args: targets)
    code, _, err = run(["--zookeeper", UNREACHABLE, "reassign", "--topic", "t"], capsys)
    assert code == 1
    assert "more than a znode holds" in err
    assert "Traceback" not in err
    assert paths.REASSIGN_PARTITIONS not in zk.nodes


# --- preferred election ---------------------------------------------------------------------


def test_election_json_and_scope() -> None:
    text = '{"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":2}]}'
    assert elect.parse_election_json(text) == [tp("t", 0), tp("u", 2)]
    with pytest.raises(InvalidArgumentError, match="duplicate partitions: t-0"):
        elect.parse_election_json(
            '{"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}'
        )
    with pytest.raises(InvalidArgumentError, match="non-empty 'partitions' list"):
        elect.parse_election_json('{"partitions":[]}')
    # Kafka reads the partition as a Java int.
    with pytest.raises(InvalidArgumentError, match="'partition' from 0 to 2147483647"):
        elect.parse_election_json('{"partitions":[{"topic":"t","partition":2147483648}]}')
    topics_now = {"t": assignment({0: [1], 1: [2]}), "d": assignment({0: [1]})}
    everything = elect.resolve_scope(elect.parse_scope(all_partitions=True), topics_now, ["d"])
    assert everything == [tp("t", 0), tp("t", 1)]
    one = elect.resolve_scope(elect.parse_scope(topic="t", partition=1), topics_now, [])
    assert one == [tp("t", 1)]
    with pytest.raises(AdminError, match="non-existent partitions: t-7"):
        elect.resolve_scope(elect.parse_scope(topic="t", partition=7), topics_now, [])
    with pytest.raises(AdminError, match="topic 'x' does not exist"):
        elect.resolve_scope(elect.parse_scope(topic="x"), topics_now, [])


def test_election_predicts_which_partitions_stay() -> None:
    topics_now = {"t": assignment({0: [1, 2], 1: [1, 2], 2: [3, 2], 3: [1, 2], 4: [2, 1]})}

    def state(leader: int, isr: tuple[int, ...]) -> PartitionState:
        return PartitionState(LeaderAndIsr(leader, 1, isr), 1)

    states = {
        tp("t", 0): state(2, (1, 2)),  # moves to 1
        tp("t", 1): state(1, (1, 2)),  # already preferred
        tp("t", 2): state(2, (2,)),  # 3 is not live
        tp("t", 3): state(2, (2,)),  # 1 not in the ISR
    }
    notes = elect.predict_unchanged(
        [tp("t", p) for p in range(5)], topics_now, states, live_brokers={1, 2}
    )
    reasons = {n.partition.partition: n.reason for n in notes}
    assert reasons == {
        1: "already led by its preferred replica",
        2: "preferred replica 3 is not live",
        3: "preferred replica 1 is not in the ISR",
        4: "no leadership yet (no state znode)",
    }


def test_electing_every_partition_of_a_cluster_without_any_is_nothing_to_do(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka 2.8's kafka-leader-election.sh and kafka-preferred-replica-election.sh both
    exit 0 for --all-topic-partitions of a cluster with no partitions; no znode is written."""
    zk = TreeZk()
    zk.put(paths.broker(1), b"{}")
    on_tree(monkeypatch, zk)
    result = elect.start_preferred_election(zk, elect.parse_scope(all_partitions=True))  # type: ignore[arg-type]
    assert result.partitions == []
    code, out, err = run(
        ["--zookeeper", UNREACHABLE, "elect-leaders", "--preferred", "--all-topic-partitions"],
        capsys,
    )
    assert code == 0, err
    assert out.splitlines() == ["There are no partitions to elect leaders for."]
    code, out, err = run(
        [
            "--zookeeper",
            UNREACHABLE,
            "elect-leaders",
            "--preferred",
            "--all-topic-partitions",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["partitions"] == []
    assert paths.PREFERRED_REPLICA_ELECTION not in zk.nodes


# --- the local cluster's state file and properties --------------------------------------------


def sample_cluster(tmp_path: Path, state: str = "running") -> local.LocalCluster:
    return local.LocalCluster(
        dir=tmp_path,
        connect_string="127.0.0.1:2181/zkctl-abc",
        zookeeper={"kind": "external", "connect_string": "127.0.0.1:2181"},
        brokers=[
            local.BrokerProcess(
                i, "127.0.0.1", 9000 + i, tmp_path / f"broker-{i}", pid=100 + i, started_at=1
            )
            for i in (1, 2)
        ],
        state=state,
        chroot="/zkctl-abc",
        overrides={"num.partitions": "3"},
    )


def test_cluster_file_round_trips_atomically(tmp_path: Path) -> None:
    cluster = sample_cluster(tmp_path)
    local.save(cluster)
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]  # no temp file left
    data = json.loads((tmp_path / "cluster.json").read_text())
    assert data["version"] == 1
    assert data["brokers"][0] == {
        "id": 1,
        "pid": 101,
        "host": "127.0.0.1",
        "port": 9001,
        "dir": str(tmp_path / "broker-1"),
        "data_dir": str(tmp_path / "broker-1" / "data"),
        "log_dir": str(tmp_path / "broker-1" / "data"),
        "properties": str(tmp_path / "broker-1" / "server.properties"),
        "out_file": str(tmp_path / "broker-1" / "broker.out"),
        "status_file": str(tmp_path / "broker-1" / "data" / "broker-status.json"),
        "state_change_log": str(tmp_path / "broker-1" / "data" / "state-change.log"),
        "started_at": 1,
    }
    loaded = local.load(tmp_path)
    assert loaded is not None
    assert loaded.to_dict() == cluster.to_dict()
    assert local.running_connect_string(tmp_path) == "127.0.0.1:2181/zkctl-abc"
    local.save(sample_cluster(tmp_path, state="stopped"))
    assert local.running_connect_string(tmp_path) is None
    assert local.load(tmp_path / "elsewhere") is None


def test_status_of_a_one_broker_cluster_says_1_broker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = sample_cluster(tmp_path, state="stopped")
    local.save(cluster)
    code, out, _ = run(["status", "--dir", str(tmp_path)], capsys)
    assert (code, out.splitlines()[0].endswith(", 2 brokers)")) == (0, True), out
    cluster.brokers = cluster.brokers[:1]
    local.save(cluster)
    code, out, _ = run(["status", "--dir", str(tmp_path)], capsys)
    assert (code, out.splitlines()[0].endswith(", 1 broker)")) == (0, True), out


def test_status_json_says_when_the_cluster_was_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The text says "(created 2026-... , 2 brokers)": --json carries the same fact, in
    epoch milliseconds as cluster.json and controller --json's "elected_at_ms" (it was
    missing)."""
    cluster = sample_cluster(tmp_path, state="stopped")
    cluster.created_at = 1_700_000_000_123
    local.save(cluster)
    code, out, err = run(["status", "--dir", str(tmp_path), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["created_at_ms"] == 1_700_000_000_123


def test_zkctl_controller_waits_for_a_status_file_written_since_the_election(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after an election the controller's status file may still be the one written
    before it (the broker rewrites it every second), showing a broker not yet controller:
    it is read again until a newer one is there; if none comes, that is said."""
    cluster = sample_cluster(tmp_path)
    local.save(cluster)
    status_file = cluster.brokers[0].status_file
    status_file.parent.mkdir(parents=True)
    elected_at_ms = 1_000_000_000_000
    status_file.write_text(json.dumps({"updated_at": elected_at_ms / 1000 - 0.5, "active": False}))
    args = argparse.Namespace(dir=str(tmp_path), connect_string=cluster.connect_string)

    def read_while_rewritten(later: dict[str, Any]) -> dict[str, Any] | None:
        """_status_file's answer while the broker writes ``later`` 0.3 s into it."""

        def rewrite() -> None:
            time.sleep(0.3)
            # Replaced whole, as the broker writes it (a reader never sees it half-written).
            fresh = status_file.with_suffix(".tmp")
            fresh.write_text(json.dumps(later))
            fresh.replace(status_file)

        rewriter = threading.Thread(target=rewrite)
        rewriter.start()
        try:
            return admin_commands._status_file(args, 1, elected_at_ms)
        finally:
            rewriter.join(60)  # a bound that only catches a hang
            assert not rewriter.is_alive(), "rewriter still running after 60 s"

    got = read_while_rewritten({"updated_at": elected_at_ms / 1000 + 1, "active": True})
    assert got is not None
    assert (got["content"]["active"], got["written_before_election"]) == (True, False)

    # Not rewritten (a paused broker): shown as it is, and said to predate the election.
    monkeypatch.setattr(admin_commands, "_STATUS_FRESH_WAIT_S", 0.3)
    status_file.write_text(json.dumps({"updated_at": elected_at_ms / 1000 - 0.5, "active": False}))
    got = admin_commands._status_file(args, 1, elected_at_ms)
    assert got is not None
    assert (got["content"]["active"], got["written_before_election"]) == (False, True)
    # Written after the election but during the failover (not yet active): read again.
    monkeypatch.setattr(admin_commands, "_STATUS_FRESH_WAIT_S", 2.5)
    during = {"updated_at": elected_at_ms / 1000 + 0.1, "controller": {"active": False}}
    status_file.write_text(json.dumps(during))

    after = {"updated_at": elected_at_ms / 1000 + 1, "controller": {"active": True}}
    got = read_while_rewritten(after)
    assert got is not None
    assert got["content"]["controller"]["active"] is True
    # Another broker of the cluster, or no election time known: read as it is, at once.
    assert admin_commands._status_file(args, 3, elected_at_ms) is None
    got = admin_commands._status_file(args, 1, None)
    assert got is not None
    assert got["written_before_election"] is False


def test_text_output_escapes_control_characters_from_znodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broker's host (any text in its registration) and a topic's config value reach
    the terminal as \\xNN escapes, as zkctl watch shows them: they printed raw, and an ESC
    sequence cleared the screen. --json keeps them, in JSON's own escapes; topic
    describe's fields stay separated by tabs."""
    from zkctl import identity_commands
    from zkdata.znodes import encode_controller, encode_controller_epoch, encode_topic_config

    host = "h\x1b[2J\t\x9b"
    shown = "h\\x1b[2J\\x09\\x9b"
    zk = tree_with_topic("t", {0: [1]}, (1,))
    registration = json.loads(zk.nodes[paths.broker(1)][0])
    registration["endpoints"] = [f"PLAINTEXT://{host}:9092"]
    zk.put(paths.broker(1), json.dumps(registration).encode())
    zk.put(paths.CONTROLLER, encode_controller(1))
    zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(5))
    zk.put(paths.topic_config("t"), encode_topic_config({"x": f"v{host}"}))
    on_tree(monkeypatch, zk)
    monkeypatch.setattr(identity_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    monkeypatch.setattr(topic_commands, "zk_session", admin_commands.zk_session)  # type: ignore[attr-defined]  # on_tree's stand-in
    z = ["--zookeeper", UNREACHABLE, "--dir", str(tmp_path)]
    for argv in (["controller"], ["broker", "identities"], ["topic", "describe"]):
        code, out, err = run([*z, *argv], capsys)
        assert code == 0, err
        assert shown in out, (argv, out)
        assert not any((ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0 for c in out)
    assert out.splitlines()[0].split("\t")[-1] == f"Configs: x=v{shown}"
    # broker identities' table: the escapes are counted in the ADDRESS column's width
    code, out, _ = run([*z, "broker", "identities"], capsys)
    header, row = (line for line in out.splitlines() if "ADDRESS" in line or shown in line)
    assert row.index("alive") == header.index("STATE")
    code, out, _ = run([*z, "controller", "--json"], capsys)
    assert json.loads(out)["endpoint"] == f"PLAINTEXT://{host}:9092"


def test_zkctl_controller_says_how_far_to_trust_the_status_file() -> None:
    def heading(age_s: float, before_election: bool) -> str:
        status = {"path": "/s.json", "age_s": age_s, "written_before_election": before_election}
        return admin_commands._status_heading(status)

    assert (
        heading(0.4, False) == "Its status file (/s.json, updated 0.4 s ago; --json for all of it):"
    )
    assert "so the broker is paused or stuck" in heading(admin_commands._STATUS_STALE_S + 1, False)
    assert "before this election" in heading(0.9, True)


def test_a_corrupt_cluster_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text('{"version": 1, "state": ')
    with pytest.raises(local.LocalClusterError, match=r"cluster.json is not a valid cluster file"):
        local.load(tmp_path)
    (tmp_path / "cluster.json").write_text('{"version": 99}')
    with pytest.raises(local.LocalClusterError, match="unsupported version 99"):
        local.load(tmp_path)
    # Nested too deeply for json.loads (RecursionError): named too, not an internal error.
    (tmp_path / "cluster.json").write_text("[" * 100_000)
    with pytest.raises(local.LocalClusterError, match=r"cluster.json is not a valid cluster file"):
        local.load(tmp_path)


def _cluster_json(tmp_path: Path, **changed: Any) -> bytes:
    data = sample_cluster(tmp_path).to_dict()
    data.update(changed)
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "content",
    [
        b"null",
        b"[]",
        b'"x"',
        b'{"version": 1, "brokers": 7}',
        b"caf\xe9",  # not UTF-8
        pytest.param(lambda d: _cluster_json(d, brokers=[1]), id="broker-not-an-object"),
        pytest.param(lambda d: _cluster_json(d, zookeeper={}), id="zookeeper-without-kind"),
        pytest.param(lambda d: _cluster_json(d, zookeeper=[]), id="zookeeper-not-an-object"),
        pytest.param(
            lambda d: _cluster_json(d, zookeeper={"kind": "local", "base_dir": str(d)}),
            id="local-zookeeper-without-servers",
        ),
        pytest.param(
            lambda d: _cluster_json(
                d,
                zookeeper={
                    "kind": "local",
                    "base_dir": str(d),
                    "detached": True,
                    "owns_dir": False,
                    "servers": [{"myid": 1}],
                },
            ),
            id="local-zookeeper-server-without-port",
        ),
        # Numbers past a float's range (1e400 reads as infinity) or not numbers (NaN)
        # where an int is read: int() raised OverflowError, an internal error.
        pytest.param(
            lambda d: _cluster_json(d, created_at=0).replace(
                b'"created_at": 0', b'"created_at": 1e400'
            ),
            id="created_at-1e400",
        ),
        pytest.param(lambda d: _cluster_json(d, created_at=math.inf), id="created_at-Infinity"),
        pytest.param(lambda d: _cluster_json(d, stopped_at=-math.inf), id="stopped_at--Infinity"),
        pytest.param(lambda d: _cluster_json(d, created_at=math.nan), id="created_at-NaN"),
        pytest.param(
            lambda d: _cluster_json(
                d, brokers=[{**sample_cluster(d).brokers[0].to_dict(), "port": math.inf}]
            ),
            id="broker-port-Infinity",
        ),
    ],
)
def test_a_cluster_file_of_another_shape_is_not_a_valid_cluster_file(
    tmp_path: Path,
    content: bytes | Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Valid JSON but not a cluster (top level not an object, a broker entry not an
    object, a ZooKeeper handle lacking its fields) raised AttributeError, or failed
    later, out of load(): every command looking at the directory was an internal error."""
    (tmp_path / "cluster.json").write_bytes(
        content if isinstance(content, bytes) else content(tmp_path)
    )
    with pytest.raises(local.LocalClusterError, match=r"cluster.json is not a valid cluster file"):
        local.load(tmp_path)
    monkeypatch.setenv("ZKCTL_ZOOKEEPER", UNREACHABLE)
    for argv in (["status"], ["down"], ["topic", "list"]):
        code, _, err = run([*argv, "--dir", str(tmp_path), "--zk-timeout", "0.2"], capsys)
        assert code in (1, 2), err
        assert "internal error" not in err
        assert "Traceback" not in err


def test_a_cluster_file_with_a_local_zookeeper_loads(tmp_path: Path) -> None:
    from cluster.zookeeper import LocalServer, LocalZooKeeper

    server = LocalServer(
        myid=1, client_port=2181, server_dir=tmp_path / "zk", argv=["java"], detached=True
    )
    handle = LocalZooKeeper([server], tmp_path / "zk", detached=True, owns_dir=False)
    (tmp_path / "cluster.json").write_bytes(_cluster_json(tmp_path, zookeeper=handle.to_dict()))
    loaded = local.load(tmp_path)
    assert loaded is not None
    assert loaded.zookeeper == handle.to_dict()


def test_broker_properties_use_kafka_keys(tmp_path: Path) -> None:
    b = local.BrokerProcess(2, "127.0.0.1", 9093, tmp_path / "broker-2")
    props = local.broker_properties(b, "h:1/zkctl-x", 6000, {"num.partitions": "3"})
    assert props == {
        "broker.id": "2",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "zookeeper.connect": "h:1/zkctl-x",
        "zookeeper.session.timeout.ms": "6000",
        "log.dirs": str(tmp_path / "broker-2" / "data"),
        "num.partitions": "3",
    }
    local.validate_properties(props)
    local.write_properties(b, "h:1/zkctl-x", 6000, {})
    assert "broker.id=2\n" in b.properties.read_text()


def test_overrides_of_managed_keys_are_refused() -> None:
    assert local.check_overrides(["num.partitions=3"]) == {"num.partitions": "3"}
    for key in local.MANAGED_KEYS:
        with pytest.raises(local.ClusterArgumentError, match=f"cannot set {key}"):
            local.check_overrides([f"{key}=x"])
    with pytest.raises(local.ClusterArgumentError, match="not of the form key=value"):
        local.check_overrides(["oops"])


def test_up_without_any_zookeeper_passes_provisionings_message_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    monkeypatch.setenv("ZKCTL_ZK_DISABLE", "docker,home,debian")
    code, out, err = run(["up", "--dir", str(tmp_path / "c"), "--brokers", "1"], capsys)
    assert code == 1
    assert out == ""
    assert err.startswith("zkctl: error: No ZooKeeper available. Any one of these works:")
    assert "--zookeeper host:port" in err
    assert "Traceback" not in err
    assert not (tmp_path / "c" / "cluster.json").exists()


def test_a_ctrl_c_while_the_command_line_loads_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console script imported zkctl.cli, and main() built its parser (every command's
    module imported), before main's handlers were in place: a Ctrl-C in that half second
    of `zkctl up` printed a KeyboardInterrupt traceback. Now both end as a later one does."""
    from zkctl import entry

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["controller"]) == 130
    assert capsys.readouterr() == ("", "zkctl: interrupted\n")

    monkeypatch.setattr(importlib, "import_module", interrupted)
    assert entry.run() == 130
    assert capsys.readouterr() == ("", "zkctl: interrupted\n")


def test_the_console_script_runs_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from zkctl import entry

    monkeypatch.setattr(sys, "argv", ["zkctl", "--help"])
    with pytest.raises(SystemExit) as e:
        entry.run()
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("usage: zkctl ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ReassignPartitionsCommand's --broker-list: brokerList.split(',').map(_.toInt),
        # Java's split dropping trailing empty strings, Integer.parseInt untrimmed.
        ("1,2", [1, 2]),
        ("+1,2", [1, 2]),
        ("\u0661,\uff12", [1, 2]),  # ARABIC-INDIC ONE, FULLWIDTH TWO
        ("1,2,", [1, 2]),
        ("1,2,,", [1, 2]),
        ("1, 2", None),
        (" 1,2", None),
        ("1,2 ", None),
        ("1,,2", None),
        (",1", None),
        ("+-1", None),
        ("\U0001d7cf", None),  # a digit beyond the BMP
        ("1,1", None),
    ],
    ids=repr,
)
def test_a_broker_list_is_read_as_kafkas_reassign_command_reads_it(
    text: str, expected: list[int] | None
) -> None:
    if expected is None:
        with pytest.raises(InvalidArgumentError):
            topics.parse_replicas(text, "--broker-list")
    else:
        assert topics.parse_replicas(text, "--broker-list") == expected
