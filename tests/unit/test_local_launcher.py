"""cluster/local.py without processes: what up, down, broker and status do with the state
they find in cluster.json (no ZooKeeper or broker is started here)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import local, processes
from cluster import zookeeper as zkp
from tests.unit.test_cli_args import run
from zkctl import common


def local_zookeeper(directory: Path, pid: int | None) -> dict[str, Any]:
    """A local ZooKeeper handle as up records it, its server pid ``pid``."""
    server_dir = directory / "zookeeper" / "server-1"
    return {
        "kind": "local",
        "connect_string": "127.0.0.1:1",
        "base_dir": str(directory / "zookeeper"),
        "detached": True,
        "owns_dir": False,
        "servers": [
            {
                "myid": 1,
                "pid": pid,
                "client_port": 1,
                "quorum_port": None,
                "election_port": None,
                "server_dir": str(server_dir),
                "data_dir": str(server_dir / "data"),
                "log_file": str(server_dir / "zookeeper.log"),
                "argv": ["java", zkp.MAIN_CLASS, str(server_dir / "zoo.cfg")],
                "detached": True,
            }
        ],
    }


def make_cluster(directory: Path, state: str = "running") -> local.LocalCluster:
    """A two-broker cluster in ``directory`` with its data there; no process runs it."""
    cluster = local.LocalCluster(
        dir=directory,
        connect_string="127.0.0.1:1",
        zookeeper=local_zookeeper(directory, None),
        brokers=[
            local.BrokerProcess(
                i, "127.0.0.1", 9000 + i, directory / f"broker-{i}", pid=None, started_at=1
            )
            for i in (1, 2)
        ],
        state=state,
    )
    for b in cluster.brokers:
        (b.data_dir / "demo-0").mkdir(parents=True)
        b.properties.write_text("broker.id=1\n")
    (directory / "zookeeper" / "server-1" / "data").mkdir(parents=True)
    local.save(cluster)
    return cluster


# --- a cluster directory moved or copied --------------------------------------------------


@pytest.mark.parametrize("how", ["moved", "copied"])
@pytest.mark.parametrize(
    "argv",
    [
        ["down"],
        ["status"],
        ["broker", "stop", "--id", "1"],
        ["broker", "kill", "--id", "1"],
        ["broker", "start", "--id", "1"],
    ],
)
def test_a_moved_or_copied_cluster_dir_does_not_act_on_the_old_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: str,
    argv: list[str],
) -> None:
    """cluster.json names its directory and every path under it absolutely: in a moved or
    copied directory it describes the cluster of the old one. down wrote the old
    directory's cluster.json (recreating it after a move) and would stop that cluster's
    processes; broker start would start the old directory's broker. Each refuses now,
    one line saying where the cluster is, and touches neither directory."""
    old, new = tmp_path / "c2" / ".zkctl", tmp_path / "c3" / ".zkctl"
    make_cluster(old)
    if how == "moved":
        shutil.move(old.parent, new.parent)
    else:
        shutil.copytree(old, new)
    # (The lock file, empty, is the one thing a command may leave.)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.setattr(local, "_launch", lambda *a: pytest.fail(f"launched {a}"))

    code, out, err = run([*argv, "--dir", str(new)], capsys)

    assert code == 1, (out, err)
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"zkctl: error: {new / 'cluster.json'} was written for the cluster in")
    assert f"run the command in {old}" in err
    assert "moved or copied" in err
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before


def test_up_in_a_moved_stopped_cluster_dir_starts_from_fresh_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`mv c2 c3; cd c3; zkctl up` reused the moved ZooKeeper data and broker logs (the
    topics and controller epoch of before): the data to remove was looked for under c2."""
    old, new = tmp_path / "c2" / ".zkctl", tmp_path / "c3" / ".zkctl"
    make_cluster(old, state="stopped")
    shutil.move(old.parent, new.parent)
    seen: dict[str, Any] = {}

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        seen["base_dir"] = kwargs["base_dir"]
        seen["left"] = sorted(str(p.relative_to(new)) for p in new.iterdir())
        raise zkp.ZooKeeperError("stop here")

    monkeypatch.setattr(zkp, "provision", provision)
    with pytest.raises(local.LocalClusterError, match="stop here"):
        local.up(new, 2)
    assert seen["base_dir"] == new / "zookeeper"
    assert seen["left"] == [".lock", "cluster.json"]
    assert not old.parent.exists()


@pytest.mark.parametrize("still_recorded", [True, False])
def test_up_in_a_copy_of_a_running_cluster_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, still_recorded: bool
) -> None:
    """The cluster recorded still runs. A copy (its own directory still records it, so
    `zkctl down` there stops it): up starts a new cluster here, from fresh data, leaving
    that one alone. Moved (nothing records it any more): up refuses, rather than delete
    the data under the running brokers and lose track of their processes."""
    old, new = tmp_path / "c4" / ".zkctl", tmp_path / "c6" / ".zkctl"
    make_cluster(old)
    shutil.copytree(old, new)
    if not still_recorded:
        (old / "cluster.json").unlink()
    monkeypatch.setattr(
        local,
        "_live_processes",
        lambda c: ["broker 1 (pid 4242)"] if c.dir == old else [],
    )
    stopped: list[Any] = []
    monkeypatch.setattr(local, "stop_brokers", lambda *a, **k: stopped.append(a))
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: stopped.append(a))

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        raise zkp.ZooKeeperError("stop here")

    monkeypatch.setattr(zkp, "provision", provision)
    if still_recorded:
        with pytest.raises(local.LocalClusterError, match="stop here"):
            local.up(new, 2)
        assert sorted(p.name for p in new.iterdir()) == [".lock", "cluster.json"]
    else:
        with pytest.raises(local.LocalClusterError) as raised:
            local.up(new, 2)
        message = str(raised.value)
        assert f"was written for the cluster in {old}" in message
        assert "broker 1 (pid 4242)" in message
        assert "zkctl down" in message
        assert (new / "broker-1" / "data" / "demo-0").is_dir()
    assert stopped == []
    assert (old / "broker-1" / "data" / "demo-0").is_dir()
    assert (old / "zookeeper" / "server-1" / "data").is_dir()


# --- broker start when ZooKeeper is gone ----------------------------------------------------


def test_broker_start_refuses_when_the_clusters_local_zookeeper_is_not_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a reboot cluster.json still says running but its ZooKeeper's pid is gone:
    broker start started the broker, which could never register, then waited 36 s and
    ended with a bare KazooTimeoutError. It refuses now at once, saying what to do: before
    it launches the broker or tries to reach ZooKeeper (which waits)."""
    directory = tmp_path / ".zkctl"
    make_cluster(directory)
    monkeypatch.setattr(local, "_launch", lambda *a: pytest.fail(f"launched {a}"))
    monkeypatch.setattr(local, "_try_zk_view", lambda *a: pytest.fail(f"read ZooKeeper {a}"))
    monkeypatch.setattr(local, "_zk_client", lambda *a, **k: pytest.fail(f"connected {a}"))
    code, out, err = run(["broker", "start", "--id", "2", "--dir", str(directory)], capsys)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1, err
    assert err.startswith("zkctl: error: the cluster's ZooKeeper at 127.0.0.1:1 is not running")
    assert f"`zkctl down --dir {directory}`" in err
    assert f"`zkctl up --dir {directory}`" in err


@pytest.mark.parametrize(
    "argv", [["broker", "start", "--id", "1"], ["broker", "stop", "--id", "1"], ["status"]]
)
def test_advice_to_start_a_cluster_names_its_dir(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """A command with --dir on a stopped cluster, or on a directory with none, says
    `zkctl up --dir DIR`, as the admin commands do (zkctl/common.py): a bare `zkctl up`
    would start the cluster in .zkctl instead. Without --dir it stays `zkctl up`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(local, "_launch", lambda *a: pytest.fail(f"launched {a}"))
    stopped = tmp_path / "c2"
    make_cluster(stopped, state="stopped")
    none = tmp_path / "none"
    none.mkdir()
    for directory, words in [(stopped, "is stopped"), (none, "no cluster in")]:
        if argv == ["status"] and directory == stopped:
            continue  # status shows a stopped cluster
        code, out, err = run([*argv, "--dir", str(directory)], capsys)
        assert (code, out) == (1, ""), err
        assert words in err
        assert f"`zkctl up --dir {directory}`" in err, err
    code, out, err = run(argv, capsys)  # the default dir, tmp_path/.zkctl: none there
    assert (code, out) == (1, ""), err
    assert "`zkctl up`" in err, err


@pytest.mark.timeout(60)
def test_waiting_for_a_registration_sees_the_broker_exit_while_zookeeper_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait connected to ZooKeeper first, for up to 30 s, before looking at the broker:
    a broker that had exited (unable to reach ZooKeeper itself) was not noticed, and the
    wait ended in the connection's time-out. Now its exit ends the wait, with its output;
    and when the broker still runs, the time-out names the connect string."""
    directory = tmp_path / ".zkctl"
    cluster = make_cluster(directory)
    cluster.connect_string = f"127.0.0.1:{local.free_ports(1)[0]}"  # nothing listens there
    broker = cluster.brokers[1]
    broker.out_file.write_text("connecting to ZooKeeper\nKazooTimeoutError: gave up\n")
    # A 600 s wait: one that does not see the exit fails as a hang (pytest timeout 60 s).
    with pytest.raises(local.LocalClusterError) as raised:
        local._wait_registered(cluster, broker, 0, None, 600.0, None)
    assert "broker 2" in str(raised.value)
    assert "during start-up" in str(raised.value)
    assert "KazooTimeoutError: gave up" in str(raised.value)

    monkeypatch.setattr(local, "_gone", lambda b: False)
    # Each connection attempt is bounded by the wait's 2 s (no 30 s attempt first).
    attempts: list[float] = []
    real_zk_client = local._zk_client

    def zk_client(connect: str, timeout: float, **kwargs: Any) -> Any:
        attempts.append(timeout)
        return real_zk_client(connect, timeout, **kwargs)

    monkeypatch.setattr(local, "_zk_client", zk_client)
    with pytest.raises(local.LocalClusterError) as raised:
        local._wait_registered(cluster, broker, 0, None, 2.0, None)
    assert attempts
    assert max(attempts) <= 2.0, attempts
    message = str(raised.value)
    assert "broker 2 did not register within 2 s" in message
    assert f"ZooKeeper at {cluster.connect_string}" in message


# --- up stopped by a signal -----------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_up_stopped_by_sigterm_or_sighup_stops_what_it_started(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    sig: signal.Signals,
) -> None:
    """`timeout 4 zkctl up`, a CI job cancelled, a terminal closed: SIGTERM or SIGHUP ended
    up at once, its ZooKeeper and brokers left running in cluster.json's state "starting",
    nothing said. They unwind up as a Ctrl-C does now, so it stops what it started; and a
    Ctrl-C during that cleanup no longer cuts it short."""
    directory = tmp_path / ".zkctl"
    received: list[int] = []
    cleanup_sigint: list[Any] = []

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        kwargs["on_start"](zkp.ExternalZooKeeper("127.0.0.1:1"))  # a ZooKeeper that runs
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the signal lands here
        raise AssertionError(f"{sig.name} did not interrupt up")

    def teardown(cluster: local.LocalCluster, progress: Any) -> list[str]:
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C, impatient
        time.sleep(0.2)
        cleanup_sigint.append(signal.getsignal(signal.SIGINT))
        return []

    monkeypatch.setattr(zkp, "provision", provision)
    monkeypatch.setattr(local, "_teardown", teardown)
    # Before the fix the signal would end pytest itself: this handler keeps it alive.
    before = signal.signal(sig, lambda signum, frame: received.append(signum))
    # Whatever this process had (an earlier test's SparkContext sets its own).
    sigint_before = signal.getsignal(signal.SIGINT)
    try:
        code, _, err = run(["up", "--brokers", "1", "--dir", str(directory)], capsys)
        handler_after = signal.getsignal(sig)
        sigint_after = signal.getsignal(signal.SIGINT)
    finally:
        restored = signal.signal(sig, before)
    assert received == []
    assert (code, err.splitlines()[-1]) == (128 + sig, f"zkctl: stopped by {sig.name}")
    assert "stopping what was started" in err
    assert cleanup_sigint == [signal.SIG_IGN]
    assert json.loads((directory / "cluster.json").read_text())["state"] == "stopped"
    assert handler_after is restored  # the handler of before, put back
    assert sigint_after is sigint_before


def test_up_in_a_terminal_that_hung_up_still_stops_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A terminal closed sends SIGHUP, and every write to it fails after (EIO): the
    cleanup's first progress line raised out of it before anything was stopped, the
    state left "starting" and zkctl ending in a traceback. Progress lines that cannot be
    written are dropped; the cleanup runs to its end and zkctl exits 129."""
    directory = tmp_path / ".zkctl"
    hung_up: list[bool] = []
    torn_down: list[str] = []
    real_print = common._print

    def print_line(text: str, stream: Any) -> None:
        if hung_up and stream is sys.stderr:
            raise OSError(errno.EIO, "Input/output error")
        real_print(text, stream)

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        kwargs["on_start"](zkp.ExternalZooKeeper("127.0.0.1:1"))
        hung_up.append(True)
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(5)
        raise AssertionError("SIGHUP did not interrupt up")

    def teardown(cluster: local.LocalCluster, progress: Any) -> list[str]:
        local._say(progress, "stopping ZooKeeper")  # as the real one says first
        torn_down.append(cluster.connect_string)
        return []

    monkeypatch.setattr(common, "_print", print_line)
    monkeypatch.setattr(zkp, "provision", provision)
    monkeypatch.setattr(local, "_teardown", teardown)
    before = signal.signal(signal.SIGHUP, lambda signum, frame: None)
    try:
        code, _, _ = run(["up", "--brokers", "1", "--dir", str(directory)], capsys)
    finally:
        signal.signal(signal.SIGHUP, before)
    assert code == 128 + signal.SIGHUP
    assert torn_down == ["127.0.0.1:1"]
    assert json.loads((directory / "cluster.json").read_text())["state"] == "stopped"


def test_a_command_in_a_moved_cluster_dir_is_an_error_not_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`zkctl topic list --dir <moved>` printed the usage and exited 2 (bad arguments),
    the reason tucked into "no ZooKeeper to talk to"; it is the command's error, exit 1,
    one line, as `zkctl status` there."""
    original = tmp_path / "a" / ".zkctl"
    local.save(make_cluster(original))
    moved = tmp_path / "b" / ".zkctl"
    moved.parent.mkdir()
    shutil.copytree(original, moved)
    code, out, err = run(["topic", "list", "--dir", str(moved)], capsys)
    assert (code, out) == (1, "")
    assert "usage:" not in err
    assert err.startswith("zkctl: error: ")
    assert len(err.splitlines()) == 1
    assert f"written for the cluster in {original}" in err


def test_a_termination_while_a_broker_is_launched_waits_for_its_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM landing between a broker's spawn and the record of its pid left that broker
    unknown to the cleanup, running (seen as a flaky test_local_cluster run). It is held
    until the pid is recorded, then raised: the cleanup stops that broker."""
    directory = tmp_path / ".zkctl"
    stopped: list[list[int | None]] = []

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        running = zkp.ExternalZooKeeper("127.0.0.1:1")
        kwargs["on_start"](running)
        return running

    def launch(broker: local.BrokerProcess, python: str) -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # lands while the broker is being spawned
        time.sleep(0.2)
        broker.pid = 4_000_000 + broker.id
        return 0

    def stop_brokers(brokers: list[local.BrokerProcess], *_a: Any, **_k: Any) -> dict[int, str]:
        stopped.append([b.pid for b in brokers])
        return {}

    monkeypatch.setattr(zkp, "provision", provision)
    monkeypatch.setattr(zkp, "chroot_connect_string", lambda c, name, **_: f"{c}/{name}")
    monkeypatch.setattr(local, "_launch", launch)
    monkeypatch.setattr(local, "stop_brokers", stop_brokers)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    before = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        with pytest.raises(local.Terminated):
            local.up(directory, 2)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert stopped == [[4_000_001, None]]  # the first launched and recorded; not the second
    assert json.loads((directory / "cluster.json").read_text())["brokers"][0]["pid"] == 4_000_001


def _broker_processes(directory: Path) -> list[int]:
    """Pids of the running brokers whose properties file is under ``directory``."""
    return [
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit()
        and (argv := processes.cmdline(int(pid)))
        and any(str(directory) in arg for arg in argv)
        and processes.is_alive(int(pid))
    ]


def signal_after_spawn(monkeypatch: pytest.MonkeyPatch, sig: signal.Signals) -> list[int]:
    """Every broker process spawned from now on is real, and ``sig`` is sent to this
    process as soon as it is, landing before the spawn returns. The pids, for cleanup."""
    spawned: list[int] = []
    real_spawn = processes.spawn

    def spawn(*args: Any, **kwargs: Any) -> Any:
        proc = real_spawn(*args, **kwargs)
        spawned.append(proc.pid)
        os.kill(os.getpid(), sig)
        time.sleep(0.05)  # the signal lands here
        return proc

    monkeypatch.setattr(processes, "spawn", spawn)
    return spawned


@pytest.fixture
def interrupts() -> Iterator[None]:
    """A Ctrl-C raises KeyboardInterrupt (whatever an earlier test set), SIGTERM and SIGHUP
    do not end pytest; each handler of before is put back after."""
    before = {
        sig: signal.signal(sig, handler)
        for sig, handler in [
            (signal.SIGINT, signal.default_int_handler),
            (signal.SIGTERM, lambda signum, frame: None),
            (signal.SIGHUP, lambda signum, frame: None),
        ]
    }
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.usefixtures("interrupts")
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name
)
def test_a_signal_right_after_a_brokers_spawn_stops_that_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """A Ctrl-C landing between a broker's spawn and the record of its pid left that broker
    running after up said it had stopped what it started, the cluster marked stopped:
    SIGTERM and SIGHUP were held in that window, SIGINT was not. A real broker process,
    the signal sent to this process as soon as it is spawned."""
    directory = tmp_path / ".zkctl"

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        running = zkp.ExternalZooKeeper("127.0.0.1:1")
        kwargs["on_start"](running)
        return running

    monkeypatch.setattr(zkp, "provision", provision)
    monkeypatch.setattr(zkp, "chroot_connect_string", lambda c, name, **_: f"{c}/{name}")
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    spawned = signal_after_spawn(monkeypatch, sig)
    try:
        with pytest.raises(KeyboardInterrupt):
            local.up(directory, 2, timeout=30)
        left = local.wait_gone(
            [local.BrokerProcess(1, "127.0.0.1", 1, directory / "broker-1", pid=spawned[0])], 5.0
        )
        assert left == [], f"broker 1 (pid {spawned[0]}) still runs"
        assert _broker_processes(directory) == []
    finally:
        for pid in spawned:  # whatever still runs, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert len(spawned) == 1  # the second broker was not started
    recorded = json.loads((directory / "cluster.json").read_text())
    assert recorded["state"] == "stopped"
    assert recorded["brokers"][0]["pid"] == spawned[0]


@pytest.mark.usefixtures("interrupts")
def test_a_ctrl_c_right_after_a_relaunch_on_a_new_port_records_its_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker relaunched on a new port (its port was taken) is the cleanup's to stop too:
    a Ctrl-C right after the spawn waits until its pid is recorded."""
    directory = tmp_path / ".zkctl"
    cluster = make_cluster(directory)
    cluster.brokers = cluster.brokers[:1]
    broker = cluster.brokers[0]
    broker.out_file.write_text("OSError: [Errno 98] Address already in use\n")
    spawned = signal_after_spawn(monkeypatch, signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt):
            local._exited_during_startup(cluster, broker, 0, {})
        assert spawned == [broker.pid]
        assert json.loads(cluster.file.read_text())["brokers"][0]["pid"] == broker.pid
    finally:
        for pid in spawned:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        local.wait_gone(cluster.brokers, 5.0)


@pytest.mark.usefixtures("interrupts")
def test_a_ctrl_c_right_after_broker_start_spawns_records_its_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`zkctl broker start` stopped by a Ctrl-C right after the spawn left the new broker
    running with cluster.json naming the old pid, out of `zkctl down`'s reach."""
    directory = tmp_path / ".zkctl"
    cluster = make_cluster(directory)
    cluster.zookeeper = {"kind": "external", "connect_string": "127.0.0.1:1"}
    local.save(cluster)
    monkeypatch.setattr(local, "_try_zk_view", lambda *a: (None, "no ZooKeeper"))
    spawned = signal_after_spawn(monkeypatch, signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt):
            local.broker_start(directory, 2, wait=False)
        assert len(spawned) == 1
        assert json.loads(cluster.file.read_text())["brokers"][1]["pid"] == spawned[0]
    finally:
        for pid in spawned:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        local.wait_gone(
            [local.BrokerProcess(2, "127.0.0.1", 1, directory / "broker-2", pid=spawned[0])], 5.0
        )


# --- the first up of a directory, before its cluster.json ---------------------------------


@pytest.mark.parametrize("argv", [["down"], ["broker", "stop", "--id", "1"]])
def test_a_command_during_the_first_up_of_a_directory_waits_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """up holds .lock from its start but writes cluster.json only once its ZooKeeper runs:
    `zkctl down` meanwhile said "No cluster in ...; nothing to stop." (exit 0) and up went
    on to leave a cluster running. The lock is tried first now: another command is at
    work there. Once up is done (the lock free) and no cluster.json was written, there is
    nothing to stop, as before."""
    directory = tmp_path / "c8"
    directory.mkdir()
    with (directory / ".lock").open("a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # as up holds it
        code, out, err = run([*argv, "--dir", str(directory)], capsys)
    assert (code, out) == (1, ""), err
    assert err == (
        f"zkctl: error: another zkctl command (up, down or broker) is working on {directory};"
        " try again when it has finished\n"
    )
    assert sorted(p.name for p in directory.iterdir()) == [".lock"]

    code, out, err = run([*argv, "--dir", str(directory)], capsys)  # up failed, nothing left
    if argv == ["down"]:
        assert (code, out, err) == (0, f"No cluster in {directory}; nothing to stop.\n", "")
    else:
        assert (code, out) == (1, ""), err
        assert f"no cluster in {directory}" in err


# --- up --timeout ---------------------------------------------------------------------------


def test_up_timeout_bounds_the_wait_for_a_local_zookeeper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up --timeout 5` with a ZooKeeper that never serves gave up after 60 s: provision
    was called without a timeout (its default, 60 s). A fake java that never serves: up
    gives up within its --timeout, having stopped it."""
    java = tmp_path / "java"
    java.write_text("#!/bin/sh\nexec sleep 1000\n")
    java.chmod(0o755)
    install = zkp.LocalInstall(java=str(java), classpath=(), description="a java that hangs")
    monkeypatch.setattr(zkp, "docker_available", lambda *a: False)
    monkeypatch.setattr(zkp, "_probe_local", lambda *a: (install, []))
    monkeypatch.delenv(zkp.ENV_CONNECT, raising=False)
    directory = tmp_path / ".zkctl"
    # ZooKeeper's wait given no timeout (60 s) would say "after 60 s".
    with pytest.raises(local.LocalClusterError, match=r"was not ready after 2 s"):
        local.up(directory, 1, timeout=2.0)
    recorded = local.load(directory)
    assert recorded is not None
    assert recorded.state == "stopped"
    assert local._live_processes(recorded) == []


@pytest.mark.parametrize("container", [False, True])
def test_up_timeout_is_one_deadline_for_zookeeper_and_the_brokers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, container: bool
) -> None:
    """The brokers get what the ZooKeeper's start left of --timeout; they got all of it
    again. A container's start is not counted (provision keeps its own 120 s floor for
    it): the brokers get the whole --timeout after it, as before."""
    directory = tmp_path / ".zkctl"
    asked: dict[str, float] = {}

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        asked["zookeeper"] = kwargs["timeout"]
        time.sleep(1.0)  # ZooKeeper takes a second to start
        running: zkp.ZooKeeper = (
            zkp.ContainerZooKeeper("127.0.0.1:1", "c0ffee")
            if container
            else zkp.ExternalZooKeeper("127.0.0.1:1")
        )
        kwargs["on_start"](running)
        return running

    def launch(broker: local.BrokerProcess, python: str) -> int:
        broker.pid = 4_000_000 + broker.id
        return 0

    def wait_cluster_ready(cluster: Any, offsets: Any, deadline: float, *a: Any) -> Any:
        asked["brokers"] = deadline - time.monotonic()
        raise local.LocalClusterError("stop here")

    monkeypatch.setattr(zkp, "provision", provision)
    monkeypatch.setattr(zkp, "chroot_connect_string", lambda c, name, **_: f"{c}/{name}")
    monkeypatch.setattr(local, "_launch", launch)
    monkeypatch.setattr(local, "_wait_cluster_ready", wait_cluster_ready)
    monkeypatch.setattr(local, "stop_brokers", lambda *a, **k: {})
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    with pytest.raises(local.LocalClusterError, match="stop here"):
        local.up(directory, 1, timeout=10.0)
    assert 9.0 < asked["zookeeper"] <= 10.0
    if container:
        assert 9.0 < asked["brokers"] <= 10.0
    else:
        assert 7.0 < asked["brokers"] <= 9.0


# --- advice that runs as printed --------------------------------------------------------------


@pytest.mark.parametrize(("brokers", "rf"), [(1, 1), (2, 2), (3, 3), (5, 3)])
def test_ups_next_command_runs_as_printed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    brokers: int,
    rf: int,
) -> None:
    """`zkctl up --brokers 2 --dir c1` said `Next: zkctl topic create --topic demo
    --partitions 3 --replication-factor 3`: run as printed it found no ZooKeeper (no
    --dir), and with --dir a replication factor larger than the brokers."""
    monkeypatch.chdir(tmp_path)
    for directory, words in [(tmp_path / "c1", " --dir "), (tmp_path / ".zkctl", "")]:
        cluster = make_cluster(directory)
        cluster.brokers = [
            local.BrokerProcess(i, "127.0.0.1", 9000 + i, directory / f"broker-{i}", pid=1)
            for i in range(1, brokers + 1)
        ]
        monkeypatch.setattr(local, "up", lambda *a, c=cluster, **k: local.Started(c, 1, 1))
        argv = ["up", "--brokers", str(brokers)]
        code, out, err = run([*argv, "--dir", str(directory)] if words else argv, capsys)
        assert code == 0, err
        expected = local.zkctl_command(
            f"topic create --topic demo --partitions 3 --replication-factor {rf}", directory
        )
        assert out.splitlines()[-1] == f"Next: {expected}"
        assert (f" --dir {directory}" in expected) == bool(words)


@pytest.mark.parametrize("action", ["pause", "resume"])
def test_pausing_a_stopped_broker_names_the_clusters_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    """broker pause and resume of a broker not running advised `zkctl broker start --id 1`,
    which would act on .zkctl, not on the cluster of --dir."""
    directory = tmp_path / "c2"
    make_cluster(directory)
    code, out, err = run(["broker", action, "--id", "1", "--dir", str(directory)], capsys)
    assert (code, out) == (1, "")
    assert err == (
        f"zkctl: error: broker 1 is not running; `zkctl broker start --id 1 --dir {directory}`"
        " starts it\n"
    )
