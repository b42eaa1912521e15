"""`zkctl up` / `broker ...` / `down` with real brokers: the local cluster a user runs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from cluster import processes
from cluster.local import is_broker_process
from cluster.zookeeper import LocalServer
from tests.integration.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def zkctl_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ZKCTL_ZOOKEEPER", None)  # `up` provisions its own, as on a fresh machine
    return env


def zkctl(tmp_path: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zkctl", "--dir", str(tmp_path / "c"), *args],
        cwd=tmp_path,
        env=zkctl_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def controller(tmp_path: Path) -> dict[str, Any]:
    return dict(json.loads(ok(zkctl(tmp_path, "controller", "--json"))))


def test_up_kill_pause_stop_start_down(tmp_path: Path) -> None:
    cluster_file = tmp_path / "c" / "cluster.json"
    try:
        # Inside the try: an `up` that times out is killed, leaving what it started for `down`.
        ok(
            zkctl(
                tmp_path,
                "up",
                "--brokers",
                "3",
                "--override",
                "controlled.shutdown.retry.backoff.ms=200",
            )
        )
        state = json.loads(cluster_file.read_text())
        pids = {b["id"]: b["pid"] for b in state["brokers"]}
        assert sorted(pids) == [1, 2, 3]
        first = controller(tmp_path)
        assert first["controller_id"] in pids
        # Its status file, asked for right after the election, shows it controller.
        status_file = first["status_file"]
        assert status_file["written_before_election"] is False
        assert status_file["content"]["controller"]["active"] is True
        assert status_file["content"]["controller"]["controller_epoch"] == first["epoch"]

        ok(
            zkctl(
                tmp_path,
                "topic",
                "create",
                "--topic",
                "t",
                "--partitions",
                "6",
                "--replication-factor",
                "3",
            )
        )
        described = json.loads(ok(zkctl(tmp_path, "topic", "describe", "--topic", "t", "--json")))
        assert len(described["topics"][0]["partitions"]) == 6

        # SIGKILL the controller: another takes over with the next epoch. Between the old
        # /controller's expiry and the new election there is no controller (null).
        ok(zkctl(tmp_path, "broker", "kill", "--id", str(first["controller_id"])))
        survivors = set(pids) - {first["controller_id"]}
        second = cast(
            dict[str, Any],
            wait_for(
                lambda: (c := controller(tmp_path))["controller_id"] in survivors and c,
                60,
                "a new controller",
            ),
        )
        assert second["epoch"] == first["epoch"] + 1
        # Without --json, what the new controller's status file says, read for a person.
        text = ok(zkctl(tmp_path, "controller"))
        assert f"Acting as controller in epoch {second['epoch']}: 6 partitions" in text, text
        assert "Last failover at " in text, text
        ok(zkctl(tmp_path, "broker", "start", "--id", str(first["controller_id"])))

        # SIGSTOP a broker: `status` says paused; SIGCONT brings it back.
        other = next(b for b in pids if b != second["controller_id"])
        ok(zkctl(tmp_path, "broker", "pause", "--id", str(other)))
        status = json.loads(ok(zkctl(tmp_path, "status", "--json")))
        assert any(b["id"] == other and b["process"] == "paused" for b in status["brokers"]), status
        ok(zkctl(tmp_path, "broker", "resume", "--id", str(other)))

        # A controlled shutdown moves the broker's leaderships away before it exits.
        ok(zkctl(tmp_path, "broker", "stop", "--id", str(other)))
        described = json.loads(ok(zkctl(tmp_path, "topic", "describe", "--topic", "t", "--json")))
        assert all(p["leader"] != other for p in described["topics"][0]["partitions"])
        ok(zkctl(tmp_path, "broker", "start", "--id", str(other)))
    finally:
        down = zkctl(tmp_path, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    state = json.loads(cluster_file.read_text())
    assert state["state"] == "stopped"
    every_pid = [b["pid"] for b in state["brokers"] if b["pid"]] + list(pids.values())
    assert not [p for p in every_pid if processes.is_alive(p)]
    zk_pids = [s["pid"] for s in state["zookeeper"].get("servers", [])]
    assert not [p for p in zk_pids if p and processes.is_alive(p)]


def test_a_one_broker_cluster_serves_consumer_groups(tmp_path: Path) -> None:
    """`zkctl up --brokers 1`: __consumer_offsets is made with one replica (as Kafka's
    quickstart config), so a subscribing consumer joins, consumes and commits."""
    from confluent_kafka import Consumer, Producer

    try:
        up = ("up", "--brokers", "1", "--override", "group.initial.rebalance.delay.ms=0")
        ok(zkctl(tmp_path, *up))
        state = json.loads((tmp_path / "c" / "cluster.json").read_text())
        assert state["overrides"]["offsets.topic.replication.factor"] == "1"
        create = ("topic", "create", "--topic", "q", "--partitions", "2")
        ok(zkctl(tmp_path, *create, "--replication-factor", "1"))
        servers = f"127.0.0.1:{state['brokers'][0]['port']}"
        producer = Producer({"bootstrap.servers": servers, "acks": "all"})
        for i in range(10):
            producer.produce("q", b"m-%d" % i)
        assert producer.flush(60) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": "solo",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe(["q"])
            seen: list[bytes] = []

            def consumed() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen.append(cast(bytes, msg.value()))
                return len(seen) == 10

            wait_for(consumed, 120, "ten messages through the group")
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        described = ok(
            zkctl(
                tmp_path, "groups", "--bootstrap-server", servers, "--describe", "--group", "solo"
            )
        )
        assert "solo" in described
    finally:
        down = zkctl(tmp_path, "down")
    ok(down)


def running_in(directory: Path) -> list[int]:
    """Pids of the processes whose command line names ``directory`` (a cluster's): to
    assert that nothing is left, never to pick what to kill."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            argv = processes.cmdline(int(entry.name)) or []
            if any(str(directory) in arg for arg in argv) and processes.is_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def kill_recorded(cluster_file: Path) -> None:
    """SIGKILL what cluster.json records as this cluster's and is still running: each broker
    and ZooKeeper server by its recorded pid, only once its command line proves it ours
    (``python -m broker`` with its properties file; java QuorumPeerMain with its zoo.cfg),
    as zkctl checks a pid before it signals one. Never a process found by name."""
    if not cluster_file.exists():
        return
    state = json.loads(cluster_file.read_text())
    ours = [
        b["pid"]
        for b in state["brokers"]
        if b["pid"] and is_broker_process(b["pid"], b["properties"])
    ]
    for data in (state["zookeeper"] or {}).get("servers", []):
        server = LocalServer.from_dict(data)
        if server.pid and server._owns(server.pid):
            ours.append(server.pid)
    for pid in ours:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_an_up_killed_while_it_starts_leaves_what_down_stops(tmp_path: Path) -> None:
    """A test's `up` that times out is SIGKILLed (subprocess.run), and what it started runs on
    in sessions of its own. It is in cluster.json from the moment its ZooKeeper runs, before
    the wait for it, so the `down` in the test's finally (or a user's) stops all of it."""
    cluster_file = tmp_path / "c" / "cluster.json"

    def recorded() -> bool:
        return cluster_file.exists() and bool(json.loads(cluster_file.read_text())["zookeeper"])

    up = subprocess.Popen(
        [sys.executable, "-m", "zkctl", "--dir", str(tmp_path / "c"), "up", "--brokers", "1"],
        cwd=tmp_path,
        env=zkctl_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        try:
            wait_for(recorded, 60, "the ZooKeeper in cluster.json")
        finally:
            up.kill()
            up.wait(10)
        down = zkctl(tmp_path, "down")
        assert down.returncode == 0, down.stdout + down.stderr
        state = json.loads(cluster_file.read_text())
        pids = [s["pid"] for s in state["zookeeper"].get("servers", [])]
        pids += [b["pid"] for b in state["brokers"] if b["pid"]]
        assert not [p for p in pids if p and processes.is_alive(p)]
        assert running_in(tmp_path / "c") == []
    finally:
        kill_recorded(cluster_file)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_an_up_terminated_while_it_starts_stops_what_it_started(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGTERM (`timeout`, a CI job cancelled) or SIGHUP (its terminal closed) once the
    brokers run: up stops them and its ZooKeeper, as after a Ctrl-C, and says so; they
    were left running before, cluster.json saying "starting".

    The signal must land inside up's start-up, which lasts about a second after the
    brokers' pids are recorded. A test process stalled that long on a loaded machine
    would signal an up that had already finished (Popen.send_signal then sends
    nothing): that attempt is stopped and the scenario started again, not judged."""
    for attempt in range(3):
        root = tmp_path / f"attempt-{attempt}"
        root.mkdir()
        if _terminate_up_while_it_starts(root, sig):
            return
    pytest.fail("up finished its start-up before the signal in each of 3 attempts")


def _terminate_up_while_it_starts(root: Path, sig: signal.Signals) -> bool:
    """One attempt: False when up had finished starting before the signal was sent."""
    cluster_file = root / "c" / "cluster.json"

    def brokers_recorded() -> bool:
        return cluster_file.exists() and any(
            b["pid"] for b in json.loads(cluster_file.read_text())["brokers"]
        )

    # Under nohup (a background run of the suite) SIGHUP is ignored, and up keeps it so,
    # as it should. A handler here (reset to the default across exec) gives the child the
    # default a terminal's process has.
    before = signal.signal(sig, lambda signum, frame: None)
    try:
        up = subprocess.Popen(
            [sys.executable, "-m", "zkctl", "--dir", str(root / "c"), "up", "--brokers", "2"],
            cwd=root,
            env=zkctl_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(sig, before)
    try:
        try:
            wait_for(brokers_recorded, 60, "the brokers in cluster.json")
            finished_first = up.poll() is not None
            if not finished_first:
                up.send_signal(sig)
            _, err = up.communicate(timeout=60)
        finally:
            if up.poll() is None:
                up.kill()
            up.wait(10)
        if finished_first:
            assert up.returncode == 0, err  # a start-up that failed is no stall
            ok(zkctl(root, "down", "--timeout", "15"))
            return False
        assert up.returncode == 128 + sig, err
        assert "stopping what was started" in err
        assert err.splitlines()[-1] == f"zkctl: stopped by {sig.name}"
        assert json.loads(cluster_file.read_text())["state"] == "stopped"
        assert running_in(root / "c") == []
        return True
    finally:
        kill_recorded(cluster_file)


def test_down_with_a_paused_controller_stops_every_broker_cleanly(tmp_path: Path) -> None:
    """`down` stops the controller last; a paused one was continued only at its turn, so
    every other broker's controlled shutdown asked a frozen controller, waited out
    controller.socket.timeout.ms (30 s) and was SIGKILLed at `down`'s timeout. Paused
    brokers are now continued first."""
    try:
        ok(zkctl(tmp_path, "up", "--brokers", "2"))
        paused = controller(tmp_path)["controller_id"]
        ok(zkctl(tmp_path, "broker", "pause", "--id", str(paused)))
        text = ok(zkctl(tmp_path, "down", "--timeout", "15"))
        assert "killed" not in text, text
        assert "broker 1: stopped" in text, text
        assert "broker 2: stopped" in text, text
    finally:
        zkctl(tmp_path, "down", "--timeout", "5")
        kill_recorded(tmp_path / "c" / "cluster.json")
    assert running_in(tmp_path / "c") == []


def test_down_stops_the_last_broker_after_one_controlled_shutdown_attempt(
    tmp_path: Path,
) -> None:
    """The controller goes last, when no other live broker is left to take its
    leaderships: one attempt, not Kafka's three, 5 s apart (controlled.shutdown.max.retries,
    controlled.shutdown.retry.backoff.ms), which could move nothing."""
    try:
        ok(zkctl(tmp_path, "up", "--brokers", "2"))
        last = controller(tmp_path)["controller_id"]
        ok(
            zkctl(
                tmp_path,
                "topic",
                "create",
                "--topic",
                "t",
                "--partitions",
                "4",
                "--replication-factor",
                "2",
            )
        )
        text = ok(zkctl(tmp_path, "down"))
        assert "killed" not in text, text
    finally:
        zkctl(tmp_path, "down", "--timeout", "5")
        kill_recorded(tmp_path / "c" / "cluster.json")
    assert running_in(tmp_path / "c") == []
    attempts: dict[int, list[int | None]] = {}
    for broker_id in (1, 2):
        log = tmp_path / "c" / f"broker-{broker_id}" / "data" / "state-change.log"
        records = [json.loads(line) for line in log.read_text().splitlines()]
        attempts[broker_id] = [
            r["remaining"] for r in records if r.get("event") == "controlled_shutdown"
        ]
    first = 3 - last
    assert attempts[first] == [0]  # its leaderships moved to the controller
    [remaining] = attempts[last]  # the only attempt
    assert remaining is not None
    assert remaining > 0
