"""The benchmarks' own logic, without a cluster: processes cleaned up when a set-up fails,
and a figure refused when the run it comes from went wrong."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import bench_leader_moves  # noqa: E402


class FakeBroker:
    def __init__(self) -> None:
        self.started = False

    def start(self) -> None:
        self.started = True


class FakeCluster:
    made: list[FakeCluster] = []

    def __init__(self, connect: str, root: Path, brokers: Any, settings: Any) -> None:
        self.brokers = {b: FakeBroker() for b in brokers}
        self.closed = False
        self.zk = None
        FakeCluster.made.append(self)

    def __getitem__(self, b: int) -> FakeBroker:
        return self.brokers[b]

    def wait_registered(self, brokers: Any, timeout: float = 0) -> None:
        pass

    def wait_controller(self, timeout: float = 0) -> tuple[int, int]:
        return 1, 1

    def close(self) -> None:
        self.closed = True


def test_a_set_up_interrupted_stops_the_brokers_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C (or a timeout) while the cluster settles, after its brokers started: the
    benchmark's caller never gets the cluster to close, so the set-up closes it."""
    FakeCluster.made.clear()
    monkeypatch.setattr(bench_leader_moves, "SupervisedCluster", FakeCluster)
    monkeypatch.setattr(bench_leader_moves, "write_cluster_state", lambda *a, **k: 0.0)

    def interrupted(connect: str) -> float:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench_leader_moves, "wait_quiet", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bench_leader_moves.cluster_led_by_broker_3("zk:2181/x", 1000, tmp_path)
    (c,) = FakeCluster.made
    assert all(b.started for b in c.brokers.values())
    assert c.closed
