"""cluster/local.py's dealings with broker processes, on a fake process table (no process
is started or signalled): a pid is the broker's only while it runs `-m broker` with that
broker's properties file; paused brokers; the order and signals of a stop."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cluster import local, processes
from cluster import zookeeper as zkp
from tests.unit.test_local_launcher import make_cluster


@dataclass
class FakeProcesses:
    """pid -> (state letter, argv); os.kill acts on it as the kernel would, roughly:
    SIGTERM ends a running process (a stopped one only once continued), SIGKILL any."""

    table: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    signals: list[tuple[int, signal.Signals]] = field(default_factory=list)
    pending_term: set[int] = field(default_factory=set)
    ignores_term: set[int] = field(default_factory=set)

    def add(self, pid: int, properties: Path, state: str = "S") -> None:
        self.table[pid] = (state, ["/usr/bin/python3", "-m", "broker", str(properties)])

    def state(self, pid: int) -> str | None:
        got = self.table.get(pid)
        return None if got is None else got[0]

    def cmdline(self, pid: int) -> list[str] | None:
        got = self.table.get(pid)
        return None if got is None else got[1]

    def kill(self, pid: int, sig: int) -> None:
        if pid not in self.table:
            raise ProcessLookupError(pid)
        self.signals.append((pid, signal.Signals(sig)))
        state, argv = self.table[pid]
        if sig == signal.SIGKILL:
            del self.table[pid]
        elif sig == signal.SIGTERM:
            if pid in self.ignores_term:
                pass
            elif state in ("T", "t"):
                self.pending_term.add(pid)
            else:
                del self.table[pid]
        elif sig == signal.SIGSTOP:
            self.table[pid] = ("T", argv)
        elif sig == signal.SIGCONT:
            if pid in self.pending_term:
                del self.table[pid]
            else:
                self.table[pid] = ("S", argv)


def install_fake(
    monkeypatch: pytest.MonkeyPatch, fake: FakeProcesses | None = None
) -> FakeProcesses:
    """cluster/local.py sees and signals the processes of ``fake`` (a new FakeProcesses
    when none) from now on."""
    fake = FakeProcesses() if fake is None else fake
    monkeypatch.setattr(local, "proc_state", fake.state)
    monkeypatch.setattr(local, "proc_cmdline", fake.cmdline)
    monkeypatch.setattr(os, "kill", fake.kill)
    monkeypatch.setattr(processes, "wait_stopped", lambda pid, timeout=10.0: True)
    return fake


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeProcesses:
    return install_fake(monkeypatch)


def test_a_pid_is_the_brokers_only_with_its_own_properties_file(
    tmp_path: Path, fake: FakeProcesses
) -> None:
    """Two clusters' brokers 1 both run `-m broker`; a pid reused by the other cluster's
    broker is not this one's (it would be stopped, killed or paused instead)."""
    mine = tmp_path / "c1" / "broker-1" / "server.properties"
    fake.add(10, mine)
    fake.add(11, tmp_path / "c2" / "broker-1" / "server.properties")
    fake.table[12] = ("S", ["/usr/bin/python3", "-m", "zkctl", str(mine)])
    fake.table[13] = ("S", [])
    assert local.is_broker_process(10, mine)
    assert not local.is_broker_process(11, mine)
    assert not local.is_broker_process(12, mine)
    assert not local.is_broker_process(13, mine)
    assert not local.is_broker_process(14, mine)
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, mine.parent, pid=11)
    assert local.process_status(broker) == "dead"
    assert not local.signal_broker(broker, signal.SIGKILL)
    assert fake.signals == []
    assert 11 in fake.table


@pytest.mark.parametrize("state", ["Z", "X"])
def test_a_zombie_or_dead_pid_is_no_broker(tmp_path: Path, fake: FakeProcesses, state: str) -> None:
    """An exited broker not yet reaped (Z) still shows its command line until reaped."""
    properties = tmp_path / "broker-1" / "server.properties"
    fake.add(10, properties, state)
    assert not local.is_broker_process(10, properties)
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, properties.parent, pid=10)
    assert local.process_status(broker) == "dead"


@pytest.mark.parametrize(
    ("state", "status"), [("S", "alive"), ("R", "alive"), ("T", "paused"), ("t", "paused")]
)
def test_process_status_of_a_running_broker(
    tmp_path: Path, fake: FakeProcesses, state: str, status: str
) -> None:
    """T: stopped by SIGSTOP; t: stopped by a tracer (a debugger): paused as well."""
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, tmp_path / "broker-1", pid=10)
    fake.add(10, broker.properties, state)
    assert local.process_status(broker) == status


def test_stopping_a_paused_broker_continues_it_after_the_sigterm(
    tmp_path: Path, fake: FakeProcesses
) -> None:
    """A SIGSTOPped process acts on SIGTERM only once continued: without the SIGCONT it
    waited out the timeout and was SIGKILLed, no controlled shutdown."""
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, tmp_path / "broker-1", pid=10)
    fake.add(10, broker.properties, "T")
    assert local.stop_brokers([broker], timeout=5.0) == {1: "stopped"}
    assert fake.signals == [(10, signal.SIGTERM), (10, signal.SIGCONT)]


def test_down_stops_the_controller_last(
    tmp_path: Path, fake: FakeProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The controller last spares the other brokers a controller failover while they
    shut down (each one's controlled shutdown goes through the controller)."""
    directory = tmp_path / "c"
    cluster = make_cluster(directory)
    for pid, b in zip((11, 12), cluster.brokers, strict=True):
        b.pid = pid
        fake.add(pid, b.properties)
    local.save(cluster)
    monkeypatch.setattr(local, "_controller_id", lambda c: 1)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    result = local.down(directory, timeout=5.0)
    assert result.brokers == {1: "stopped", 2: "stopped"}
    assert fake.signals == [(12, signal.SIGTERM), (11, signal.SIGTERM)]
    loaded = local.load(directory)
    assert loaded is not None
    assert loaded.state == "stopped"


def test_down_of_a_cluster_marked_stopped_still_stops_its_live_brokers(
    tmp_path: Path, fake: FakeProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cluster.json says stopped (an up cut short between its writes) but a broker of it
    runs: down is what stops it, not "already stopped"."""
    directory = tmp_path / "c"
    cluster = make_cluster(directory, state="stopped")
    cluster.brokers[1].pid = 12
    fake.add(12, cluster.brokers[1].properties)
    local.save(cluster)
    monkeypatch.setattr(local, "_controller_id", lambda c: pytest.fail("asked for a controller"))
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    result = local.down(directory, timeout=5.0)
    assert not result.already_stopped
    assert result.brokers == {1: "not running", 2: "stopped"}
    assert fake.signals == [(12, signal.SIGTERM)]
    again = local.down(directory, timeout=5.0)
    assert again.already_stopped


def test_broker_start_refuses_a_broker_that_runs(
    tmp_path: Path, fake: FakeProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "c"
    cluster = make_cluster(directory)
    cluster.brokers[0].pid = 11
    fake.add(11, cluster.brokers[0].properties, "T")
    local.save(cluster)
    monkeypatch.setattr(local, "_launch", lambda *a: pytest.fail(f"launched {a}"))
    with pytest.raises(local.LocalClusterError, match=r"broker 1 is already running \(pid 11\)"):
        local.broker_start(directory, 1, wait=False)


def test_down_continues_paused_brokers_before_stopping_any(
    tmp_path: Path, fake: FakeProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paused controller kept to the last would hold each other broker's controlled
    shutdown (its ControlledShutdown request waiting controller.socket.timeout.ms)."""
    directory = tmp_path / "c"
    cluster = make_cluster(directory)
    for pid, b in zip((11, 12), cluster.brokers, strict=True):
        b.pid = pid
        fake.add(pid, b.properties, "T" if pid == 11 else "S")
    local.save(cluster)
    monkeypatch.setattr(local, "_controller_id", lambda c: 1)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    result = local.down(directory, timeout=5.0)
    assert result.brokers == {1: "stopped", 2: "stopped"}
    assert fake.signals[0] == (11, signal.SIGCONT)
    assert fake.signals[1:] == [(12, signal.SIGTERM), (11, signal.SIGTERM)]


@pytest.mark.parametrize(("state", "process_state"), [("running", "T"), ("stopped", "S")])
def test_up_refuses_while_a_paused_broker_of_the_cluster_runs(
    tmp_path: Path,
    fake: FakeProcesses,
    monkeypatch: pytest.MonkeyPatch,
    state: str,
    process_state: str,
) -> None:
    """A paused broker is a running one: up does not take its cluster for dead (tearing
    down its ZooKeeper and deleting its data under it). Nor does it when the cluster is
    recorded stopped: a failed up whose cleanup could not stop a broker (it survived
    SIGKILL) records it so all the same, and up deleted the broker's data under it and
    started a new cluster, the old broker left running and recorded nowhere; `zkctl down`
    stops such a broker."""
    directory = tmp_path / "c"
    cluster = make_cluster(directory, state=state)
    cluster.brokers[0].pid = 11
    fake.add(11, cluster.brokers[0].properties, process_state)
    local.save(cluster)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: pytest.fail("torn down"))

    def provision(connect: str | None, **kwargs: object) -> zkp.ZooKeeper:
        raise zkp.ZooKeeperError("a ZooKeeper was started")

    monkeypatch.setattr(zkp, "provision", provision)
    with pytest.raises(local.LocalClusterError, match=r"already running .*broker 1 \(pid 11\)"):
        local.up(directory, 2)
    assert (cluster.brokers[0].data_dir / "demo-0").is_dir()
    assert fake.signals == []


def test_broker_must_follow_dash_m(tmp_path: Path, fake: FakeProcesses) -> None:
    """`python script.py broker <properties>` is not `python -m broker <properties>`."""
    properties = tmp_path / "broker-1" / "server.properties"
    fake.table[10] = ("S", ["/usr/bin/python3", "tool.py", "broker", str(properties)])
    fake.table[11] = ("S", ["/usr/bin/python3", "-m", str(properties)])
    assert not local.is_broker_process(10, properties)
    assert not local.is_broker_process(11, properties)


def test_a_broker_gone_between_the_check_and_the_signal_is_not_running(
    tmp_path: Path, fake: FakeProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, tmp_path / "broker-1", pid=10)
    fake.add(10, broker.properties)

    def gone(pid: int, sig: int) -> None:
        raise ProcessLookupError(pid)

    monkeypatch.setattr(os, "kill", gone)
    assert not local.signal_broker(broker, signal.SIGTERM)


def test_tail_gives_the_last_lines_written_after_the_offset(tmp_path: Path) -> None:
    out = tmp_path / "broker.out"
    out.write_text("old 1\nold 2\n")
    offset = out.stat().st_size
    with out.open("a") as f:
        f.write("".join(f"line {i}\n" for i in range(1, 6)))
    assert local.tail(out, offset, lines=2) == "line 4\nline 5"
    assert local.tail(out, offset) == "\n".join(f"line {i}" for i in range(1, 6))
    assert local.tail(tmp_path / "missing") == ""


def test_up_refuses_while_a_broker_of_a_cluster_still_starting_runs(
    tmp_path: Path, fake: FakeProcesses, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "starting": an up killed (SIGKILL) before its cleanup; what it started may run."""
    directory = tmp_path / "c"
    cluster = make_cluster(directory, state="starting")
    cluster.brokers[1].pid = 12
    fake.add(12, cluster.brokers[1].properties)
    local.save(cluster)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: pytest.fail("torn down"))

    def provision(connect: str | None, **kwargs: object) -> zkp.ZooKeeper:
        raise zkp.ZooKeeperError("a ZooKeeper was started")

    monkeypatch.setattr(zkp, "provision", provision)
    with pytest.raises(local.LocalClusterError, match=r"already running .*broker 2 \(pid 12\)"):
        local.up(directory, 2)
    assert (cluster.brokers[1].data_dir / "demo-0").is_dir()


@pytest.mark.parametrize(
    ("state", "torn_down"), [("running", True), ("starting", True), ("stopped", False)]
)
def test_up_after_a_cluster_that_died_tears_it_down_first(
    tmp_path: Path,
    fake: FakeProcesses,
    monkeypatch: pytest.MonkeyPatch,
    state: str,
    torn_down: bool,
) -> None:
    """Its brokers all gone (a reboot, a kill), its ZooKeeper or chroot may remain: up
    stops and deletes them before starting anew, as down would have; a stopped one was."""
    directory = tmp_path / "c"
    make_cluster(directory, state=state)
    teardowns: list[local.LocalCluster] = []

    def teardown(cluster: local.LocalCluster, _progress: object) -> list[str]:
        teardowns.append(cluster)
        return []

    monkeypatch.setattr(local, "_teardown", teardown)

    def provision(connect: str | None, **kwargs: object) -> zkp.ZooKeeper:
        raise zkp.ZooKeeperError("stop here")

    monkeypatch.setattr(zkp, "provision", provision)
    with pytest.raises(local.LocalClusterError, match="stop here"):
        local.up(directory, 2)
    assert len(teardowns) == (1 if torn_down else 0)
    assert not (directory / "broker-1").exists()


def test_a_broker_that_outlives_its_sigterm_is_killed(tmp_path: Path, fake: FakeProcesses) -> None:
    """A controlled shutdown that does not end (no controller answering) ends with
    SIGKILL after the timeout, reported as killed, not stopped."""
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, tmp_path / "broker-1", pid=10)
    fake.add(10, broker.properties)
    fake.ignores_term.add(10)
    assert local.stop_brokers([broker], timeout=0.2) == {1: "killed"}
    assert fake.signals == [(10, signal.SIGTERM), (10, signal.SIGCONT), (10, signal.SIGKILL)]
    assert 10 not in fake.table


def test_broker_kill_pause_and_resume_say_what_was_before(
    tmp_path: Path, fake: FakeProcesses
) -> None:
    directory = tmp_path / "c"
    cluster = make_cluster(directory)
    cluster.brokers[0].pid = 11
    fake.add(11, cluster.brokers[0].properties)
    local.save(cluster)
    assert local.broker_pause(directory, 1) == "alive"
    assert fake.state(11) == "T"
    assert local.broker_resume(directory, 1) == "paused"
    assert fake.state(11) == "S"
    assert local.broker_kill(directory, 1) is True
    assert local.broker_kill(directory, 1) is False
    assert local.broker_kill(directory, 2) is False
    assert [sig for _pid, sig in fake.signals] == [signal.SIGSTOP, signal.SIGCONT, signal.SIGKILL]
