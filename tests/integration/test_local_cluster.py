"""`zkctl up` / `broker ...` / `down` with real brokers: the local cluster a user runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster import processes
from tests.integration.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def zkctl(tmp_path: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ZKCTL_ZOOKEEPER", None)  # `up` provisions its own, as on a fresh machine
    return subprocess.run(
        [sys.executable, "-m", "zkctl", "--dir", str(tmp_path / "c"), *args],
        cwd=tmp_path,
        env=env,
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
    try:
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
        second = wait_for(
            lambda: (c := controller(tmp_path))["controller_id"] in survivors and c,
            60,
            "a new controller",
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

    ok(zkctl(tmp_path, "up", "--brokers", "1", "--override", "group.initial.rebalance.delay.ms=0"))
    try:
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
                    seen.append(msg.value())
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
        ok(zkctl(tmp_path, "down"))
