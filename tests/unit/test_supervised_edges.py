"""cluster.supervised without a broker: a supervised broker's properties, start, signals,
status file and disks (its process a Python child that sleeps, stopped after each test),
and the cluster's views of ZooKeeper and its waits, over the in-memory ZooKeeper."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.config import parse_properties
from broker.state_change_log import StateChangeLog
from cluster import processes, supervised
from cluster.supervised import BrokerExited, SupervisedBroker, SupervisedCluster, wait_for
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import (
    LeaderAndIsr,
    TopicAssignment,
    decode_topic,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
)

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]

# --- wait_for ------------------------------------------------------------------------------


def test_wait_for_returns_the_first_truthy_answer() -> None:
    answers: Iterator[object] = iter([None, 0, [], "", {"port": 1}])
    assert wait_for(lambda: next(answers), 30, "an answer", interval=0) == {"port": 1}


def test_wait_for_looks_once_before_giving_up_and_names_what_it_waited_for() -> None:
    looks: list[int] = []

    def check() -> list[int]:
        looks.append(1)
        return []

    with pytest.raises(AssertionError, match=r"waiting for the thing \(last: \[\]\)"):
        wait_for(check, 0, "the thing")
    assert looks == [1]
    assert wait_for(lambda: "now", 0, "it") == "now"


# --- a broker's properties and process -----------------------------------------------------


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """What SupervisedBroker.start spawned: its arguments; the process sleeps instead."""
    seen: list[dict[str, Any]] = []
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        seen.append({"argv": argv, **kwargs})
        procs.append(subprocess.Popen(SLEEP, stdout=kwargs["out"]))
        return procs[-1]

    monkeypatch.setattr(processes, "spawn", spawn)
    yield seen
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(10)


def test_properties_are_the_defaults_and_the_overrides_win(tmp_path: Path) -> None:
    broker = SupervisedBroker(
        3, tmp_path / "broker-3", "h:1/c", {"log.dirs": f" {tmp_path}/a , {tmp_path}/b"}
    )
    broker.write_properties()
    props = parse_properties(broker.props.read_text())
    assert props["broker.id"] == "3"
    assert props["zookeeper.connect"] == "h:1/c"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:0"
    assert props["log.dirs"].strip() == f"{tmp_path}/a , {tmp_path}/b"
    assert broker.log_dirs == [tmp_path / "a", tmp_path / "b"]
    assert broker.first_log_dir == tmp_path / "a"
    plain = SupervisedBroker(1, tmp_path / "broker-1", "h:1", {"broker.id": "9"})
    plain.write_properties()
    assert parse_properties(plain.props.read_text())["broker.id"] == "9"
    assert plain.log_dirs == [plain.data_dir]


def test_a_broker_keeping_its_port_writes_the_same_one_every_time(tmp_path: Path) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1", keep_port=True)
    broker.write_properties()
    port = broker.fixed_port
    assert port
    broker.write_properties()
    assert broker.fixed_port == port
    listeners = parse_properties(broker.props.read_text())["listeners"]
    assert listeners == f"PLAINTEXT://127.0.0.1:{port}"


def test_start_runs_the_broker_once_with_the_project_on_its_path(
    tmp_path: Path, spawned: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    broker.data_dir.mkdir(parents=True)
    (broker.data_dir / "broker-status.json").write_text('{"port": 1}')
    broker.start()
    assert broker.status() is None  # the last run's status file is gone
    [seen] = spawned
    assert seen["argv"] == [sys.executable, "-m", "broker", str(broker.props)]
    assert seen["env"]["PYTHONPATH"] == f"{supervised.PROJECT_ROOT}:/elsewhere"
    assert seen["marker"] == str(broker.props)
    assert seen["detached"] is False
    assert broker.alive()
    with pytest.raises(RuntimeError, match="already running"):
        broker.start()
    assert len(spawned) == 1
    assert broker.stop(30) == -signal.SIGTERM
    (broker.root / "broker-0.out").write_text("first run\n")
    broker.start()
    assert broker.starts == 2
    (broker.root / "broker-1.out").write_text("second run\n")
    assert broker.output() == "first run\n\nsecond run\n"


def test_signalling_a_broker_that_exited_says_how_and_where_its_output_is(
    tmp_path: Path, spawned: list[dict[str, Any]]
) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    with pytest.raises(RuntimeError, match="never started"):
        broker.terminate()
    broker.start()
    broker.kill()
    assert broker.proc is not None
    assert broker.proc.returncode == -signal.SIGKILL  # reaped
    with pytest.raises(RuntimeError) as error:
        broker.resume()
    assert "killed by SIGKILL" in str(error.value)
    assert str(broker.root / "broker-0.out") in str(error.value)
    broker.proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    broker.proc.wait(30)
    with pytest.raises(RuntimeError, match="exit code 3"):
        broker.terminate()


def test_pause_returns_once_the_broker_is_stopped(
    tmp_path: Path, spawned: list[dict[str, Any]]
) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    broker.start()
    broker.pause()
    assert processes.state(broker.pid) == "T"
    broker.resume()
    broker.kill()


def test_replaced_disks_keep_only_the_state_change_logs(
    tmp_path: Path, spawned: list[dict[str, Any]]
) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    broker = SupervisedBroker(
        1, tmp_path / "broker-1", "h:1", {"log.dirs": ",".join(map(str, dirs))}
    )
    for d in dirs:
        (d / "t-0").mkdir(parents=True)
        (d / "t-0" / "00000000000000000000.log").write_text("x")
        (d / "meta.properties").write_text("broker.id=1\n")
    (dirs[0] / "state-change.log").write_text("{}\n")
    (dirs[0] / "state-change.log.1").write_text("{}\n")
    broker.start()
    with pytest.raises(RuntimeError, match="is running"):
        broker.replace_disks()
    assert (dirs[0] / "meta.properties").exists()
    broker.kill()
    broker.replace_disks()
    assert sorted(p.name for p in dirs[0].iterdir()) == ["state-change.log", "state-change.log.1"]
    assert list(dirs[1].iterdir()) == []


def test_a_status_file_being_written_is_no_status(tmp_path: Path) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    assert broker.status() is None
    broker.data_dir.mkdir(parents=True)
    (broker.data_dir / "broker-status.json").write_text('{"port": 90')
    assert broker.status() is None
    (broker.data_dir / "broker-status.json").write_text('{"port": 9092}')
    assert broker.status() == {"port": 9092}


def test_the_port_of_a_broker_that_exited_after_writing_it_is_read(
    tmp_path: Path, spawned: list[dict[str, Any]]
) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    broker.start()
    broker.kill()
    with pytest.raises(BrokerExited, match="exited before writing its status file"):
        broker.port()
    broker.data_dir.mkdir(parents=True)
    (broker.data_dir / "broker-status.json").write_text(json.dumps({"port": 9093}))
    assert broker.port() == 9093


def test_state_changes_follow_the_first_log_dir(tmp_path: Path) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    log = StateChangeLog(broker.data_dir, 1)
    log.write("controller_elected", controller_epoch=1)
    log.write("controller_resigned", controller_epoch=1)
    log.close()
    assert [r["event"] for r in broker.state_changes("controller_elected")] == [
        "controller_elected"
    ]
    other = tmp_path / "other"
    log = StateChangeLog(other, 1)
    log.write("controller_elected", controller_epoch=7)
    log.close()
    broker.overrides["log.dirs"] = str(other)
    assert [r["controller_epoch"] for r in broker.state_changes("controller_elected")] == [7]


# --- the cluster's views and waits --------------------------------------------------------


class _Broker:
    """Stands in for a SupervisedBroker: alive or not, with a status and state changes."""

    def __init__(self, alive: bool = True, status: dict[str, Any] | None = None) -> None:
        self.is_alive = alive
        self.status_value = status
        self.rows: list[dict[str, Any]] = []
        self.proc: object = object()
        self.pid = -1
        self.killed = False

    def alive(self) -> bool:
        return self.is_alive

    def status(self) -> dict[str, Any] | None:
        return self.status_value

    def state_changes(self, event: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.rows if event is None or r["event"] == event]

    def output(self) -> str:
        return "".join(f"line {i}\n" for i in range(20))

    def kill(self) -> None:
        self.killed = True


def _cluster(brokers: dict[int, Any]) -> Any:
    cluster: Any = SupervisedCluster.__new__(SupervisedCluster)
    cluster.brokers = brokers
    cluster.zk = FakeZk()
    return cluster


def _put_state(zk: FakeZk, topic: str, partition: int, leader: int, epoch: int = 0) -> None:
    isr = (leader,) if leader >= 0 else ()
    zk.put(
        paths.partition_state(topic, partition),
        encode_partition_state(LeaderAndIsr(leader, epoch, isr), 1),
    )


def _put_topic(zk: FakeZk, topic: str, partitions: dict[int, tuple[int, ...]]) -> None:
    zk.put(paths.topic(topic), encode_topic(TopicAssignment(topic, partitions)))


def test_the_cluster_is_built_with_a_client_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[str, int]] = []

    class Client(FakeZk):
        def __init__(self, connect: str, session_timeout_ms: int) -> None:
            super().__init__()
            self.connect = connect
            self.timeout = session_timeout_ms

        def start(self) -> None:
            started.append((self.connect, self.timeout))

    monkeypatch.setattr(supervised, "ZkClient", Client)
    monkeypatch.chdir(tmp_path)
    cluster = SupervisedCluster("h:1/c", Path("rel"), [1, 2], {"a": "b"}, keep_ports=True)
    assert started == [("h:1/c", 10_000)]
    assert cluster.root == tmp_path / "rel"
    assert cluster[2].root == tmp_path / "rel" / "broker-2"
    assert cluster[2].keep_port
    assert cluster[1].overrides == {"a": "b"}
    assert cluster[1].overrides is not cluster[2].overrides
    assert cluster.session_timeout_s == 18.0
    timeout = {"zookeeper.session.timeout.ms": "6000"}
    assert SupervisedCluster("h:1", tmp_path, [1], timeout).session_timeout_s == 6.0


def test_registered_brokers_and_their_epochs() -> None:
    cluster = _cluster({})
    assert cluster.registered() == set()
    cluster.zk.put(paths.BROKER_IDS, b"")
    cluster.zk.put(paths.broker(2), b"{}")
    cluster.zk.put(paths.broker(1), b"{}")
    cluster.zk.set_data(paths.broker(2), b"{}")
    assert cluster.registered() == {1, 2}
    assert cluster.broker_epoch(2) == cluster.zk.nodes[paths.broker(2)][1].czxid
    assert cluster.broker_epoch(2) != cluster.zk.nodes[paths.broker(2)][1].mzxid
    assert cluster.broker_epoch(3) is None


def test_the_controller_is_its_id_and_epoch_or_none() -> None:
    cluster = _cluster({})
    assert cluster.controller() is None
    cluster.zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(4))
    assert cluster.controller() is None
    cluster.zk.put(paths.CONTROLLER, encode_controller(2))
    assert cluster.controller() == (2, 4)
    del cluster.zk.nodes[paths.CONTROLLER_EPOCH]
    assert cluster.controller() is None


def test_wait_controller_waits_for_the_active_controller_it_asked_for() -> None:
    controller = {"active": True, "controller_epoch": 4}
    cluster = _cluster({1: _Broker(status={"controller": controller}), 2: _Broker()})
    cluster.zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(4))
    cluster.zk.put(paths.CONTROLLER, encode_controller(1))
    assert cluster.wait_controller(timeout=0) == (1, 4)
    assert cluster.wait_controller(min_epoch=4, timeout=0) == (1, 4)
    for kwargs in [{"not_id": 1}, {"min_epoch": 5}]:
        with pytest.raises(AssertionError, match="an active controller"):
            cluster.wait_controller(timeout=0, **kwargs)
    for status in [
        {"controller": {"active": False, "controller_epoch": 4}},
        {"controller": {"active": True, "controller_epoch": 3}},
        None,
    ]:
        cluster.brokers[1].status_value = status
        with pytest.raises(AssertionError, match="an active controller"):
            cluster.wait_controller(timeout=0)
    cluster.zk.set_data(paths.CONTROLLER, encode_controller(7))  # not one of ours
    with pytest.raises(AssertionError, match="an active controller"):
        cluster.wait_controller(timeout=0)


def test_wait_registered_fails_at_once_when_a_broker_exits() -> None:
    cluster = _cluster({1: _Broker(), 2: _Broker(alive=False)})
    cluster.zk.put(paths.BROKER_IDS, b"")
    cluster.zk.put(paths.broker(1), b"{}")
    cluster.wait_registered([1], timeout=0)
    with pytest.raises(RuntimeError, match="broker 2 exited during start-up") as error:
        cluster.wait_registered([1, 2], timeout=30)
    assert "line 11" not in str(error.value)
    assert str(error.value).endswith("line 19")
    cluster.brokers[2].is_alive = True
    with pytest.raises(AssertionError, match=r"brokers \[1, 2\] registered"):
        cluster.wait_registered([1, 2], timeout=0)


def test_partition_states_and_a_topic_not_there() -> None:
    cluster = _cluster({})
    with pytest.raises(LookupError, match="does not exist"):
        cluster.partition_states("t")
    assert cluster.assignment("t") is None
    _put_topic(cluster.zk, "t", {0: (1, 2), 1: (2, 1)})
    _put_state(cluster.zk, "t", 0, 1)
    with pytest.raises(LookupError, match="/brokers/topics/t/partitions/1/state is missing"):
        cluster.partition_states("t")
    with pytest.raises(AssertionError, match="leaders"):
        cluster.wait_partitions("t", lambda s: True, "leaders", timeout=0)
    _put_state(cluster.zk, "t", 1, 2, epoch=3)
    states = cluster.wait_partitions("t", lambda s: s[1].leader == 2, "leaders", timeout=0)
    assert {p: (s.leader, s.leader_epoch) for p, s in states.items()} == {0: (1, 0), 1: (2, 3)}
    assert cluster.partition_state("t", 1)[1] == 1


def test_a_created_topic_has_its_config_and_assignment() -> None:
    cluster = _cluster({})
    cluster.zk.ensure_paths(["/config/topics", "/brokers/topics"])
    cluster.create_topic("t", {0: (1, 2)}, {"cleanup.policy": "compact"})
    config = json.loads(cluster.zk.nodes[paths.topic_config("t")][0])
    assert config["config"] == {"cleanup.policy": "compact"}
    assert decode_topic("t", cluster.zk.nodes[paths.topic("t")][0]).partitions == {0: (1, 2)}


def test_a_topic_is_online_once_every_partition_has_a_leader() -> None:
    cluster = _cluster({})
    with pytest.raises(AssertionError, match="topic t online"):
        cluster.wait_topic_online("t", timeout=0)
    _put_topic(cluster.zk, "t", {0: (0, 1), 1: (1, 0)})
    _put_state(cluster.zk, "t", 0, 0)
    with pytest.raises(AssertionError, match="topic t online"):
        cluster.wait_topic_online("t", timeout=0)
    _put_state(cluster.zk, "t", 1, -1)
    with pytest.raises(AssertionError, match="topic t online"):
        cluster.wait_topic_online("t", timeout=0)
    _put_state(cluster.zk, "t", 1, 1, epoch=2)
    states = cluster.wait_topic_online("t", timeout=0)
    assert {p: s.leader for p, s in states.items()} == {0: 0, 1: 1}


def test_a_topic_is_applied_once_every_running_replica_logged_its_epoch() -> None:
    brokers = {1: _Broker(), 2: _Broker(), 3: _Broker(alive=False)}
    cluster = _cluster(brokers)
    _put_topic(cluster.zk, "t", {0: (1, 2, 3)})
    _put_state(cluster.zk, "t", 0, 1, epoch=5)

    def row(partition: int, epoch: int, result: str = "applied", topic: str = "t") -> Any:
        return {
            "event": "leader_and_isr",
            "topic": topic,
            "partition": partition,
            "leader_epoch": epoch,
            "result": result,
        }

    brokers[1].rows = [row(0, 5)]
    brokers[2].rows = [row(0, 4), row(0, 5, "refused"), row(0, 5, topic="u")]
    with pytest.raises(AssertionError, match="applied by its replicas"):
        cluster.wait_topic_applied("t", timeout=0)
    brokers[2].rows.append(row(0, 5))
    states = cluster.wait_topic_applied("t", timeout=0)
    assert states[0].leader_epoch == 5
    # A broker that is no replica need not have logged anything.
    brokers[4] = _Broker()
    assert cluster.wait_topic_applied("t", timeout=0)[0].leader == 1


def test_a_line_holding_another_kinds_marker_in_a_nested_field_is_not_of_that_kind(
    tmp_path: Path,
) -> None:
    """The marker ``"event":"<kind>"`` only picks the lines worth parsing: a nested object
    of another kind's line can hold it unescaped."""
    broker = SupervisedBroker(1, tmp_path / "broker-1", "h:1")
    log = StateChangeLog(broker.data_dir, 1)
    log.write("controller_resigned", cause={"event": "controller_elected"})
    log.write("controller_elected", controller_epoch=2)
    log.close()
    assert [r["controller_epoch"] for r in broker.state_changes("controller_elected")] == [2]
