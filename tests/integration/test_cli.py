"""zkctl end to end against a real ZooKeeper: the admin commands, connect-string resolution,
exit codes, pid checks, and the local-cluster launcher (with a stand-in broker that keeps
the real broker's contract: `python -m broker <properties>`, registers /brokers/ids/<id>,
writes broker-status.json to its first log dir, exits 0 on SIGTERM)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import broker as real_broker
from cluster import local
from cluster import zookeeper as zkp
from cluster.netsplit import ZooKeeperLink
from zkctl import cli
from zkdata import paths, znodes
from zkdata.client import ZkClient
from zkdata.znodes import LeaderAndIsr

pytestmark = pytest.mark.integration


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    """A client whose session holds three broker registrations for the test."""
    client = ZkClient(zk_connect, session_timeout_ms=10_000)
    client.start()
    client.ensure_paths(paths.PERSISTENT_PATHS)
    for i in (1, 2, 3):
        reg = znodes.BrokerRegistration(i, (znodes.EndPoint("PLAINTEXT", "127.0.0.1", 9090 + i),))
        client.create(paths.broker(i), znodes.encode_broker(reg), ephemeral=True)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)


def no_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert "Connection dropped" not in err  # kazoo's logging stays quiet


# --- admin commands -------------------------------------------------------------------------


def test_topic_commands_text_and_json(
    zk: ZkClient, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zookeeper", zk_connect]
    code, out, err = run(
        [*z, "topic", "create", "--topic", "orders", "--replica-assignment", "1:2,2:3",
         "--config", "retention.ms=1000"],
        capsys,
    )  # fmt: skip
    assert (code, out) == (0, "Created topic orders.\n"), err
    zk.create(
        paths.partition_state("orders", 0),
        znodes.encode_partition_state(LeaderAndIsr(1, 3, (1,)), 1),
        make_parents=True,
    )

    code, out, _ = run([*z, "topic", "list", "--json"], capsys)
    assert json.loads(out) == {"topics": [{"name": "orders", "marked_for_deletion": False}]}

    code, out, _ = run([*z, "topic", "describe", "--topic", "orders"], capsys)
    lines = out.splitlines()
    assert lines[0].startswith("Topic: orders\tTopicId: ")
    assert lines[0].endswith("PartitionCount: 2\tReplicationFactor: 2\tConfigs: retention.ms=1000")
    # Kafka 2.8's TopicCommand line, field for field (no leader epoch: --json has it).
    assert lines[1] == "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1"
    assert "Leader: none" in lines[2]

    # Kafka's other report flags, in its --zookeeper mode: the topics with configs of
    # their own (headers alone); below or at min.insync.replicas refused, the brokers'
    # default of it unknown.
    code, out, _ = run([*z, "topic", "describe", "--topics-with-overrides"], capsys)
    assert (code, len(out.splitlines())) == (0, 1)
    assert out.startswith("Topic: orders\tTopicId: ")
    for flag in ("--under-min-isr-partitions", "--at-min-isr-partitions"):
        code, out, err = run([*z, "topic", "describe", flag], capsys)
        assert (code, out) == (2, "")
        assert "needs the brokers' configuration" in err
    # Kafka filters --topic by --exclude-internal before checking it exists.
    code, out, err = run(
        [*z, "topic", "describe", "--exclude-internal", "--topic", "__consumer_offsets"], capsys
    )
    assert (code, out) == (1, "")
    assert "do not exist as expected" in err

    code, out, _ = run([*z, "topic", "describe", "--under-replicated-partitions", "--json"], capsys)
    doc = json.loads(out)
    assert [p["partition"] for p in doc["topics"][0]["partitions"]] == [0, 1]
    assert doc["topics"][0]["partitions"][0]["leader_epoch"] == 3
    assert doc["live_brokers"] == [1, 2, 3]

    code, out, _ = run([*z, "topic", "describe", "--unavailable-partitions"], capsys)
    assert out.count("\n") == 1  # no topic header, only partition 1 (no leader)
    assert "Partition: 1" in out

    code, out, err = run(
        [*z, "topic", "add-partitions", "--topic", "orders", "--partitions", "3"], capsys
    )
    assert code == 0
    assert "Adding partitions succeeded!" in out
    assert "ordering of the messages will be affected" in err

    code, out, _ = run(
        [*z, "topic", "alter-config", "--topic", "orders", "--add-config", "segment.ms=9000",
         "--delete-config", "retention.ms"],
        capsys,
    )  # fmt: skip
    assert code == 0
    assert "Overrides now: segment.ms=9000" in out

    code, out, _ = run([*z, "topic", "delete", "--topic", "orders"], capsys)
    assert (code, out.splitlines()[0]) == (0, "Topic orders is marked for deletion.")
    code, out, _ = run([*z, "topic", "list"], capsys)
    assert out == "orders - marked for deletion\n"


def test_reassign_elect_and_controller_commands(
    zk: ZkClient, zk_connect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zookeeper", zk_connect]
    run([*z, "topic", "create", "--topic", "t", "--replica-assignment", "1:2,2:3"], capsys)
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    code, out, _ = run([*z, "reassign", "--reassignment-json-file", str(plan), "--execute"], capsys)
    assert code == 0
    assert (
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]}]}' in out
    )
    assert out.rstrip().endswith("Successfully started partition reassignment for t-0")

    code, _, err = run(
        [*z, "reassign", "--topic", "t", "--partition", "1", "--replicas", "1,3"], capsys
    )
    assert code == 1
    assert err.startswith("zkctl: error: a reassignment is in progress")
    no_traceback(err)

    code, out, _ = run([*z, "reassign", "--reassignment-json-file", str(plan), "--verify"], capsys)
    assert "Reassignment of partition t-0 is still in progress." in out
    code, out, _ = run(
        [*z, "reassign", "--reassignment-json-file", str(plan), "--verify", "--json"], capsys
    )
    assert json.loads(out)["partitions"][0]["status"] == "in_progress"

    code, out, _ = run([*z, "elect-leaders", "--preferred", "--topic", "t"], capsys)
    assert code == 0
    assert "Successfully started preferred replica election for partitions t-0,t-1" in out
    code, _, err = run([*z, "elect-leaders", "--preferred", "--all-topic-partitions"], capsys)
    assert code == 1
    assert "already in progress" in err

    zk.create(paths.CONTROLLER, znodes.encode_controller(2), ephemeral=True)
    zk.create(paths.CONTROLLER_EPOCH, znodes.encode_controller_epoch(5))
    code, out, _ = run([*z, "controller"], capsys)
    assert "Controller: broker 2 (PLAINTEXT://127.0.0.1:9092)" in out
    assert "Controller epoch: 5 (zkVersion 0)" in out
    code, out, _ = run([*z, "controller", "--json"], capsys)
    doc = json.loads(out)
    assert (doc["controller_id"], doc["epoch"], doc["status_file"]) == (2, 5, None)


def test_operational_errors_exit_1_with_one_message(
    zk: ZkClient, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zookeeper", zk_connect]
    run(
        [*z, "topic", "create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"],
        capsys,
    )
    for argv, message in [
        (["topic", "create", "--topic", "t", "--partitions", "1", "--replication-factor", "1"],
         "zkctl: error: topic 't' already exists"),
        (["topic", "create", "--topic", "u", "--partitions", "1", "--replication-factor", "9"],
         "zkctl: error: Replication factor: 9 larger than available brokers: 3."),
        (["topic", "describe", "--topic", "nope"], "zkctl: error: topic(s) 'nope' do not exist"),
        (["topic", "delete", "--topic", "nope"], "zkctl: error: topic 'nope' does not exist"),
        (["topic", "add-partitions", "--topic", "t", "--partitions", "1"],
         "zkctl: error: the number of partitions of a topic can only be increased"),
        (["reassign", "--topic", "t", "--partition", "0", "--replicas", "8"],
         "zkctl: error: cannot reassign: broker(s) 8 are not registered"),
    ]:  # fmt: skip
        code, out, err = run([*z, *argv], capsys)
        assert code == 1, argv
        assert out == ""
        assert err.startswith(message), err
        assert len(err.strip().splitlines()) == 1
        no_traceback(err)


def test_malformed_znodes_are_named_and_the_command_goes_on(
    zk: ZkClient, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    z = ["--zookeeper", zk_connect]
    run([*z, "topic", "create", "--topic", "t", "--replica-assignment", "1,2"], capsys)
    zk.create(paths.partition_state("t", 1), b"\xff\xfe", make_parents=True)
    zk.create(paths.topic("broken"), b"null")
    code, out, err = run([*z, "topic", "describe"], capsys)
    assert code == 0
    assert f"zkctl: warning: malformed data in znode {paths.partition_state('t', 1)}" in err
    assert f"zkctl: warning: malformed data in znode {paths.topic('broken')}" in err
    assert "Partition: 0" in out
    assert "(malformed state znode: not JSON" in out
    code, out, err = run([*z, "topic", "describe", "--json"], capsys)
    problems = {p["path"] for p in json.loads(out)["problems"]}
    assert problems == {paths.partition_state("t", 1), paths.topic("broken")}


# --- where the connect string comes from ---------------------------------------------------


def test_connect_string_from_env_then_cluster_file(
    zk: ZkClient,
    zk_connect: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run(["--zookeeper", zk_connect, "topic", "create", "--topic", "t", "--partitions", "1",
         "--replication-factor", "1"], capsys)  # fmt: skip
    monkeypatch.setenv("ZKCTL_ZOOKEEPER", zk_connect)
    assert run(["--dir", str(tmp_path), "topic", "list"], capsys)[1] == "t\n"

    monkeypatch.delenv("ZKCTL_ZOOKEEPER")
    # The handle ExternalZooKeeper.to_dict writes (load() refuses one lacking its fields).
    handle = {"kind": "external", "connect_string": zk_connect}
    cluster = local.LocalCluster(
        dir=tmp_path, connect_string=zk_connect, zookeeper=handle, brokers=[]
    )
    cluster.state = "running"
    local.save(cluster)
    assert run(["topic", "list", "--dir", str(tmp_path)], capsys)[1] == "t\n"
    monkeypatch.chdir(tmp_path.parent)
    assert run(["--dir", tmp_path.name, "topic", "list"], capsys)[1] == "t\n"

    # The env var wins, with a note that the local cluster is elsewhere.
    monkeypatch.setenv("ZKCTL_ZOOKEEPER", f"{zk_connect}/other")
    code, _, err = run(["--dir", str(tmp_path), "topic", "list"], capsys)
    assert "zkctl: warning: using ZKCTL_ZOOKEEPER=" in err
    assert f"uses {zk_connect}" in err
    monkeypatch.delenv("ZKCTL_ZOOKEEPER")

    cluster.state = "stopped"
    local.save(cluster)
    code, _, err = run(["--dir", str(tmp_path), "topic", "list"], capsys)
    assert code == 1
    assert err.startswith(f"zkctl: error: the local cluster in {tmp_path} is stopped")


def test_unreachable_zookeeper_and_missing_chroot(
    zookeeper: zkp.ZooKeeper, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(
        ["--zookeeper", "127.0.0.1:1", "--zk-timeout", "0.5", "topic", "list"], capsys
    )
    assert code == 1
    assert err.startswith("zkctl: error: cannot connect to ZooKeeper at 127.0.0.1:1 within 0.5 s")
    no_traceback(err)
    missing = f"{zookeeper.connect_string}/no-such-chroot-{os.getpid()}"
    code, _, err = run(["--zookeeper", missing, "controller"], capsys)
    assert code == 1
    assert "the chroot /no-such-chroot" in err
    assert "does not exist" in err


def test_console_script_prints_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zkctl", "--zookeeper", "127.0.0.1:1", "--zk-timeout", "0.5",
         "topic", "list"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("zkctl: error: cannot connect to ZooKeeper")


# --- pid checks: only our broker processes are ever signalled -------------------------------


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; killed by pid at the end, whatever happened."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(10)


def fake_cluster(directory: Path, pid: int) -> local.LocalCluster:
    cluster = local.LocalCluster(
        dir=directory,
        connect_string="127.0.0.1:1",
        zookeeper={"kind": "external", "connect_string": "127.0.0.1:1"},
        brokers=[local.BrokerProcess(1, "127.0.0.1", 1, directory / "broker-1", pid=pid)],
        state="running",
    )
    local.save(cluster)
    return cluster


def test_a_reused_pid_is_never_signalled(
    tmp_path: Path,
    processes: list[subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    processes.append(sleeper)
    fake_cluster(tmp_path, sleeper.pid)
    d = ["--dir", str(tmp_path), "--zk-timeout", "0.5"]
    assert run([*d, "broker", "kill", "--id", "1"], capsys)[1] == "Broker 1 was not running.\n"
    assert run([*d, "broker", "stop", "--id", "1"], capsys)[1] == "Broker 1 was not running.\n"
    code, _, err = run([*d, "broker", "pause", "--id", "1"], capsys)
    assert code == 1
    assert "broker 1 is not running" in err
    code, out, _ = run([*d, "status", "--json"], capsys)
    assert json.loads(out)["brokers"][0]["process"] == "dead"
    code, out, _ = run([*d, "down", "--timeout", "1"], capsys)
    assert code == 0
    assert "broker 1: not running" in out
    assert sleeper.poll() is None
    assert _alive(sleeper.pid)


def test_a_broker_command_line_is_recognised_and_signalled(
    tmp_path: Path,
    processes: list[subprocess.Popen[bytes]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    props = tmp_path / "broker-1" / "server.properties"
    # A harmless process whose command line has `-m broker <properties>`, as a broker's does.
    lookalike = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m", "broker", str(props)]
    )
    processes.append(lookalike)
    time.sleep(0.2)
    assert local.is_broker_process(lookalike.pid, props)
    assert not local.is_broker_process(lookalike.pid, tmp_path / "other.properties")
    fake_cluster(tmp_path, lookalike.pid)
    d = ["--dir", str(tmp_path), "--zk-timeout", "0.5"]
    assert run([*d, "broker", "pause", "--id", "1"], capsys)[0] == 0
    time.sleep(0.2)
    assert json.loads(run([*d, "status", "--json"], capsys)[1])["brokers"][0]["process"] == "paused"
    assert run([*d, "broker", "resume", "--id", "1"], capsys)[0] == 0
    time.sleep(0.2)
    assert json.loads(run([*d, "status", "--json"], capsys)[1])["brokers"][0]["process"] == "alive"
    assert run([*d, "broker", "kill", "--id", "1"], capsys)[1] == "Broker 1 killed.\n"
    assert lookalike.wait(10) == -signal.SIGKILL


# --- the launcher, with a stand-in broker -------------------------------------------------

STAND_IN_MAIN = '''
"""Stand-in broker: the real broker's process contract, nothing more."""
import json, signal, socket, sys, time
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from broker.config import parse_properties
from zkdata import paths, znodes

props = parse_properties(Path(sys.argv[1]).read_text())
if props.get("broker.rack") == "crash":
    print("boom: the stand-in was told to crash", flush=True)
    sys.exit(3)
broker_id = int(props["broker.id"])
host, port = props["listeners"].split("//", 1)[1].rsplit(":", 1)
server = socket.socket()
server.bind((host, int(port)))
server.listen()
zk = KazooClient(props["zookeeper.connect"],
                 timeout=int(props["zookeeper.session.timeout.ms"]) / 1000)
zk.start()
for path in paths.PERSISTENT_PATHS:
    zk.ensure_path(path)
registration = znodes.encode_broker(znodes.BrokerRegistration(
    broker_id, (znodes.EndPoint("PLAINTEXT", host, int(port)),)))
deadline = time.monotonic() + 30
while True:  # a killed predecessor's registration lingers until its session expires
    try:
        zk.create(paths.broker(broker_id), registration, ephemeral=True)
        break
    except NodeExistsError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
status = Path(props["log.dirs"].split(",")[0]) / "broker-status.json"
status.parent.mkdir(parents=True, exist_ok=True)
while not stopping:
    if zk.exists(paths.CONTROLLER) is None:
        try:
            zk.create(paths.CONTROLLER, znodes.encode_controller(broker_id), ephemeral=True)
            got = zk.exists(paths.CONTROLLER_EPOCH)
            epoch = 1 if got is None else int(zk.get(paths.CONTROLLER_EPOCH)[0]) + 1
            if got is None:
                zk.create(paths.CONTROLLER_EPOCH, b"1")
            else:
                zk.set(paths.CONTROLLER_EPOCH, str(epoch).encode())
        except NodeExistsError:
            pass
    status.write_text(json.dumps({"broker_id": broker_id, "state": "running"}))
    time.sleep(0.1)
zk.stop()
zk.close()
print("controlled shutdown complete", flush=True)
'''


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_env: None) -> Path:
    """A `broker` package whose __main__ is the stand-in; broker.config still resolves to the
    real module, which the stand-in and the launcher's validation share."""
    root = tmp_path / "stand-in"
    package = root / "broker"
    package.mkdir(parents=True)
    real_dir = Path(real_broker.__file__).parent
    (package / "__init__.py").write_text(f"__path__.append({str(real_dir)!r})\n")
    (package / "__main__.py").write_text(STAND_IN_MAIN)
    monkeypatch.setattr(local, "_project_root", lambda: root)
    return tmp_path / "cluster"


@pytest.fixture
def cluster_dir(stand_in: Path) -> Iterator[Path]:
    yield stand_in
    local.down(stand_in, timeout=5)  # whatever the test left running


def test_up_status_broker_actions_and_down(
    cluster_dir: Path, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    started = local.up(cluster_dir, 3, zookeeper=zk_connect, overrides=["num.partitions=2"])
    cluster = started.cluster
    assert started.controller_id in (1, 2, 3)
    assert started.controller_epoch == 1
    assert cluster.chroot is not None
    assert cluster.chroot.startswith(zkp.split_chroot(zk_connect)[1] + "/zkctl-")
    assert cluster.connect_string == zkp.split_chroot(zk_connect)[0] + cluster.chroot

    saved = json.loads((cluster_dir / "cluster.json").read_text())
    assert saved["state"] == "running"
    assert saved["session_timeout_ms"] == 6000
    assert saved["zookeeper"] == {"kind": "external", "connect_string": zk_connect}
    assert [b["id"] for b in saved["brokers"]] == [1, 2, 3]
    assert len({b["port"] for b in saved["brokers"]}) == 3
    props = (cluster_dir / "broker-2" / "server.properties").read_text()
    for line in (
        "broker.id=2",
        f"listeners=PLAINTEXT://127.0.0.1:{saved['brokers'][1]['port']}",
        f"zookeeper.connect={cluster.connect_string}",
        "zookeeper.session.timeout.ms=6000",
        f"log.dirs={cluster_dir / 'broker-2' / 'data'}",
        "num.partitions=2",
    ):
        assert line in props.splitlines()

    d = ["--dir", str(cluster_dir)]
    code, out, _ = run([*d, "status", "--json"], capsys)
    doc = json.loads(out)
    assert [(b["process"], b["registered"]) for b in doc["brokers"]] == [("alive", True)] * 3
    assert doc["controller_id"] == started.controller_id

    # Admin commands find the cluster through <dir>/cluster.json.
    code, out, _ = run(
        [*d, "topic", "create", "--topic", "t", "--partitions", "2", "--replication-factor", "3"],
        capsys,
    )
    assert (code, out) == (0, "Created topic t.\n")
    code, out, _ = run([*d, "controller", "--json"], capsys)
    status_file = json.loads(out)["status_file"]
    assert status_file["content"]["broker_id"] == started.controller_id

    code, _, err = run([*d, "up", "--zookeeper", zk_connect], capsys)
    assert code == 1
    assert "already running" in err
    assert f"run `zkctl down --dir {cluster_dir}` first" in err

    victim = next(i for i in (1, 2, 3) if i != started.controller_id)
    code, out, _ = run([*d, "broker", "stop", "--id", str(victim)], capsys)
    assert out == f"Broker {victim} stopped (controlled shutdown).\n"
    assert (
        "controlled shutdown complete"
        in (cluster_dir / f"broker-{victim}" / "broker.out").read_text()
    )
    doc = json.loads(run([*d, "status", "--json"], capsys)[1])
    assert doc["brokers"][victim - 1]["process"] == "dead"
    assert doc["brokers"][victim - 1]["registered"] is False

    code, out, _ = run([*d, "broker", "start", "--id", str(victim)], capsys)
    assert code == 0
    assert f"Broker {victim} started and registered" in out
    new_pid = json.loads((cluster_dir / "cluster.json").read_text())["brokers"][victim - 1]["pid"]
    assert new_pid != saved["brokers"][victim - 1]["pid"]

    code, out, _ = run([*d, "broker", "kill", "--id", str(victim)], capsys)
    assert out == f"Broker {victim} killed.\n"

    code, out, _ = run([*d, "down"], capsys)
    assert code == 0
    assert "stopped" in out
    assert json.loads((cluster_dir / "cluster.json").read_text())["state"] == "stopped"
    assert not _exists_at_root(zk_connect, cluster.chroot)
    assert all(not local.is_broker_process(b.pid or 0, b.properties) for b in cluster.brokers)
    code, out, _ = run([*d, "down"], capsys)
    assert (code, out) == (0, f"The cluster in {cluster_dir} is already stopped.\n")


def _exists_at_root(connect: str, path: str) -> bool:
    client = ZkClient(zkp.split_chroot(connect)[0], session_timeout_ms=10_000)
    client.start()
    try:
        return client.exists(path) is not None
    finally:
        client.close()


def test_a_broker_dying_during_start_up_is_shown_and_everything_stopped(
    cluster_dir: Path, zk_connect: str
) -> None:
    with pytest.raises(local.LocalClusterError) as info:
        local.up(cluster_dir, 2, zookeeper=zk_connect, overrides=["broker.rack=crash"])
    message = str(info.value)
    assert "exit code 3 during start-up" in message
    assert "boom: the stand-in was told to crash" in message
    # Both brokers are told to crash; the error names whichever was seen dead first, with
    # the path of that broker's own output.
    dead = re.match(r"broker (\d+) \(pid \d+\)", message)
    assert dead is not None, message
    assert str(cluster_dir / f"broker-{dead.group(1)}" / "broker.out") in message
    cluster = local.load(cluster_dir)
    assert cluster is not None
    assert cluster.state == "stopped"
    assert cluster.chroot is not None
    assert not _exists_at_root(zk_connect, cluster.chroot)
    assert all(local.process_status(b) == "dead" for b in cluster.brokers)
    # The next up starts afresh in the same directory.
    started = local.up(cluster_dir, 1, zookeeper=zk_connect)
    assert started.controller_id == 1


def test_up_refuses_a_directory_with_leftovers_but_no_cluster_file(
    cluster_dir: Path, zk_connect: str
) -> None:
    (cluster_dir / "broker-1").mkdir(parents=True)
    with pytest.raises(local.LocalClusterError, match="remove them"):
        local.up(cluster_dir, 1, zookeeper=zk_connect)


def test_up_interrupted_while_its_zookeeper_starts_leaves_nothing_running(
    cluster_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C while `zkctl up` waits for the ZooKeeper it started: the ZooKeeper (detached,
    so nothing else would ever stop it) is stopped, the attempt is left as a stopped cluster,
    and the next `zkctl up` in the directory starts afresh."""
    monkeypatch.setenv(zkp.ENV_DISABLE, "docker")
    if zkp.find_local_install() is None:
        pytest.fail("a local ZooKeeper install is needed (scripts/setup.sh installs one)")
    recorded: list[local.LocalCluster | None] = []

    def interrupt(message: str) -> None:
        if message.startswith("waiting for ZooKeeper server"):
            recorded.append(local.load(cluster_dir))
            raise KeyboardInterrupt  # the user's Ctrl-C

    # The entries recorded since, not the pids absent before: pids are reused once they wrap.
    before = len(zkp.started_pids())
    try:
        with pytest.raises(KeyboardInterrupt):
            local.up(cluster_dir, 1, progress=interrupt)
        launched = zkp.started_pids()[before:]
        assert launched, "a ZooKeeper was launched"
        assert [pid for pid in launched if _alive(pid)] == []
        # It was in cluster.json while it started: `zkctl down` finds one whose `up` was killed.
        assert len(recorded) == 1
        assert recorded[0] is not None
        assert [s["pid"] for s in recorded[0].zookeeper["servers"]] == launched
        after = local.load(cluster_dir)
        assert after is not None
        assert after.state == "stopped"
    finally:
        for pid in zkp.started_pids()[before:]:
            if _alive(pid) and str(cluster_dir) in _cmdline(pid):
                os.kill(pid, signal.SIGKILL)
    started = local.up(cluster_dir, 1)
    assert started.controller_id == 1


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""


@pytest.mark.slow
def test_up_starts_and_down_stops_its_own_zookeeper(cluster_dir: Path) -> None:
    started = local.up(cluster_dir, 1)
    cluster = started.cluster
    assert cluster.chroot is None
    handle = zkp.ZooKeeper.from_dict(cluster.zookeeper)
    assert handle.connect_string == cluster.connect_string
    if isinstance(handle, zkp.LocalZooKeeper):
        assert all(s.server_dir.is_relative_to(cluster_dir) for s in handle.servers)
        pids = [s.pid for s in handle.servers]
    else:
        pids = []
    result = local.down(cluster_dir)
    assert result.brokers == {1: "stopped"}
    for pid in pids:
        assert pid is not None
        assert not _alive(pid)


def test_a_taken_port_is_retried_at_up_and_named_at_broker_start(
    cluster_dir: Path, zk_connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        real = local.free_ports
        calls: list[int] = []

        def first_one_taken(count: int, host: str = local.BROKER_HOST) -> list[int]:
            calls.append(count)
            return [port] if len(calls) == 1 else real(count, host)

        monkeypatch.setattr(local, "free_ports", first_one_taken)
        started = local.up(cluster_dir, 1, zookeeper=zk_connect)
        assert started.cluster.brokers[0].port != port
        assert "Address already in use" in started.cluster.brokers[0].out_file.read_text()

        # broker start keeps its port: if someone took it, the error says so.
        local.broker_stop(cluster_dir, 1)
        cluster = local.load(cluster_dir)
        assert cluster is not None
        b = cluster.brokers[0]
        b.port = port
        local.write_properties(b, cluster.connect_string, cluster.session_timeout_ms, {})
        local.save(cluster)
        with pytest.raises(local.LocalClusterError, match=f"port {port} is in use"):
            local.broker_start(cluster_dir, 1, timeout=20)


def test_a_create_whose_answer_is_lost_says_it_may_have_been_made(
    zk: ZkClient,
    zk_connect: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ZooKeeper carries out the topic's create and its answer is lost (only ZooKeeper's
    side of the link is cut): the command cannot know whether the topic exists, and says
    so, rather than a bare error that invites a retry ending in 'already exists'."""
    from admin import topics

    link = ZooKeeperLink(zk_connect)
    create_topic = topics.create_topic

    def answers_cut_first(
        client: ZkClient, request: topics.CreateTopicRequest
    ) -> topics.CreateTopicResult:
        multi = client.multi

        def cut_then_multi(ops: list[Any]) -> list[Any]:
            link.cut_answers()  # the topic's create goes out into the cut
            return multi(ops)

        monkeypatch.setattr(client, "multi", cut_then_multi)
        return create_topic(client, request)

    monkeypatch.setattr(topics, "create_topic", answers_cut_first)
    try:
        code, out, err = run(
            ["--zookeeper", link.connect_string, "--zk-timeout", "4", "topic", "create",
             "--topic", "lost", "--replica-assignment", "1:2"],
            capsys,
        )  # fmt: skip
    finally:
        link.close()
    assert code == 1, (out, err)
    assert "may or may not have been made" in err, err
    no_traceback(err)
    assert zk.exists(paths.topic("lost")) is not None  # it was made
