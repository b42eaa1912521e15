"""`zkctl report` on the logs of a real cluster in which the test SIGKILLed the controller
twice and another broker twice, recording when it did what and when it saw the cluster
recover; the report must find exactly those four incidents, with times inside what the test
saw. (Brokers and test share one clock, so the bounds are tight.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline import testing
from tests.integration.conftest import ClusterFactory
from tests.integration.harness import Cluster, wait_for

pytestmark = pytest.mark.integration

ASSIGNMENT = {p: tuple((1, 2, 3)[(p + i) % 3] for i in range(3)) for p in range(6)}
ROOT = Path(__file__).resolve().parents[2]
# A line is written just after the action it records, and a status file just after what it
# shows; the test reads them a moment later. This covers the order of the two.
SLACK_MS = 250


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    with testing.shared_session() as session:
        yield session


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Fault:
    kind: str  # controller or broker
    broker: int
    led: set[int]  # partitions it led when killed
    killed_ms: int  # just before the SIGKILL
    controller_ms: int | None = None  # when the test saw the new controller active
    new_controller: tuple[int, int] | None = None
    led_ms: int = 0  # a status file computed by then shows every partition led
    restarted_ms: int = 0
    back_ms: int = 0  # when the test saw it registered again


def _wait_all_led(c: Cluster, dead: int, since_ms: int) -> int:
    """When the live brokers' own status files (written each second, after `since_ms`)
    showed every partition led: the new leaders had taken over by that time."""

    def check() -> int | None:
        statuses = [c[b].status() for b in c.brokers if b != dead]
        if any(s is None or s["updated_at"] * 1000 < since_ms for s in statuses):
            return None
        if sum(int(s["leaders"]) for s in statuses if s) != len(ASSIGNMENT):
            return None
        return max(int(s["updated_at"] * 1000) for s in statuses if s)

    return wait_for(check, 60, "every partition led by a live broker")


def _fault(c: Cluster, kind: str, controller_id: int) -> Fault:
    c.wait_partitions(
        "t", lambda s: all(len(st.isr) == 3 for st in s.values()), "every ISR complete"
    )
    states = c.partition_states("t")
    if kind == "controller":
        victim = controller_id
    else:  # the other broker leading the most partitions
        others = [b for b in c.brokers if b != controller_id]
        victim = max(others, key=lambda b: (sum(s.leader == b for s in states.values()), b))
    led = {p for p, s in states.items() if s.leader == victim}
    f = Fault(kind, victim, led, now_ms())
    c[victim].kill()
    if kind == "controller":
        f.new_controller = c.wait_controller(not_id=victim, timeout=c.session_timeout_s + 30)
        f.controller_ms = now_ms()
    c.wait_partitions(
        "t",
        lambda s: all(st.leader not in (victim, -1) for st in s.values()),
        "leaders moved off the dead broker",
    )
    f.led_ms = _wait_all_led(c, victim, now_ms())
    f.restarted_ms = now_ms()
    c[victim].start()  # it comes back, so the next kill finds three brokers
    c.wait_registered([victim])
    f.back_ms = now_ms()
    return f


@pytest.mark.slow
def test_report_on_a_cluster_after_killing_the_controller_and_a_broker_twice(
    cluster_factory: ClusterFactory, tmp_path: Path, spark: Any
) -> None:
    # No auto rebalance: each new controller's first check (5 s after its failover, as
    # Kafka's) would move leaderships back to the restarted broker while the next kill
    # reads who leads what, and the report's incidents count only what the kills did.
    c = cluster_factory(auto_leader_rebalance_enable="false")
    controller_id, first_epoch = c.wait_controller()
    c.create_topic("t", ASSIGNMENT)
    c.wait_topic_online("t")
    faults: list[Fault] = []
    for kind in ("controller", "broker", "controller", "broker"):
        f = _fault(c, kind, controller_id)
        faults.append(f)
        if f.new_controller is not None:
            controller_id = f.new_controller[0]
    c.close()
    assert all(f.led for f in faults), "each victim led partitions when it was killed"

    out = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "zkctl", "report", "--logs", str(c.root), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "loss -> new controller" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    cluster = summary["clusters"][c.root.name]
    assert summary["lines"]["ok"] > 0
    assert sum(v for k, v in summary["lines"].items() if k not in ("ok", "blank")) == 0
    ctl = cluster["controller"]
    assert ctl["tenures"] == 3
    assert ctl["epochs"] == [first_epoch, first_epoch + 2]
    assert ctl["end_reasons"] == {"lost": 2, "open": 1}
    assert ctl["no_controller_ms"]["count"] == 2

    incidents = sorted(
        (r.asDict() for r in spark.read.parquet(str(out / "incidents")).collect()),
        key=lambda r: r["lost_ts"],
    )
    # Exactly the four kills, in order, and nothing else.
    assert [(i["kind"], i["broker"]) for i in incidents] == [(f.kind, f.broker) for f in faults]
    session_ms = c.session_timeout_s * 1000
    for inc, f in zip(incidents, faults, strict=True):
        assert inc["cause"] == ("lost" if f.kind == "controller" else "deregistered"), inc
        # Lost when the cluster noticed: after the kill, within a session timeout (plus
        # ZooKeeper's expiry tick on a busy machine), and before the test saw it handled.
        assert f.killed_ms <= inc["lost_ts"] <= f.killed_ms + session_ms + 5000, (inc, f)
        if f.kind == "controller":
            assert f.new_controller is not None
            assert f.controller_ms is not None
            assert (inc["new_controller"], inc["new_epoch"]) == f.new_controller
            assert inc["lost_ts"] <= inc["new_controller_ts"] <= f.controller_ms, (inc, f)
            assert inc["time_to_controller_ms"] == inc["new_controller_ts"] - inc["lost_ts"]
            assert inc["time_to_controller_ms"] <= f.controller_ms - f.killed_ms
            assert (
                inc["new_controller_ts"] <= inc["failover_done_ts"] <= f.controller_ms + (SLACK_MS)
            )
        else:
            assert inc["new_controller"] is None
            assert inc["time_to_controller_ms"] is None
        # Every partition the victim led lost its leader, and got one back before a status
        # file showed them all led.
        assert inc["affected_partitions"] == len(f.led), (inc, f)
        assert not inc["unrecovered"]
        assert inc["lost_ts"] <= inc["all_leaders_ts"] <= f.led_ms + SLACK_MS, (inc, f)
        assert inc["time_to_leaders_ms"] == inc["all_leaders_ts"] - inc["lost_ts"]
        assert inc["time_to_leaders_ms"] <= f.led_ms - f.killed_ms + SLACK_MS
        assert f.restarted_ms <= inc["back_ts"] <= f.back_ms + SLACK_MS, (inc, f)

    windows = [
        r.asDict()
        for r in spark.read.parquet(str(out / "partition_windows")).collect()
        if r["kind"] == "unavailable"
    ]
    assert Counter(w["incident_id"] for w in windows) == {
        i["incident_id"]: len(f.led) for i, f in zip(incidents, faults, strict=True)
    }
    page = (out / "report.html").read_text()
    lat = summary["failover_latency_ms"]
    assert lat["to_new_controller"]["count"] == 2
    assert lat["to_all_leaders"]["count"] == 4
    assert lat["to_all_leaders"]["max"] == max(i["time_to_leaders_ms"] for i in incidents)
    assert f"{lat['to_new_controller']['p50']:,.0f} ms" in page
