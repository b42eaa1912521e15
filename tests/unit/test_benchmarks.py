"""The benchmarks' own logic, without a cluster: processes cleaned up when a set-up fails,
and a figure refused when the run it comes from went wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

# benchmarks/ is not a package mypy is given: its modules are found on sys.path at run time.
import bench_client_failover  # type: ignore[import-not-found]  # noqa: E402
import bench_cluster_down  # type: ignore[import-not-found]  # noqa: E402
import bench_controller_crash  # type: ignore[import-not-found]  # noqa: E402
import bench_controller_decisions  # type: ignore[import-not-found]  # noqa: E402
import bench_controller_failover  # type: ignore[import-not-found]  # noqa: E402
import bench_idle_replication  # type: ignore[import-not-found]  # noqa: E402
import bench_leader_moves  # type: ignore[import-not-found]  # noqa: E402
import bench_produce  # type: ignore[import-not-found]  # noqa: E402
import bench_reassignment  # type: ignore[import-not-found]  # noqa: E402
import bench_state_change_log  # type: ignore[import-not-found]  # noqa: E402
import bench_wire  # type: ignore[import-not-found]  # noqa: E402
import common  # type: ignore[import-not-found]  # noqa: E402
import report  # type: ignore[import-not-found]  # noqa: E402


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


def loss_ack(**changes: Any) -> dict[str, Any]:
    ack: dict[str, Any] = {
        "after_event": "BrokerChange",
        "learned_at_ms": 1000.0,
        "requests": {"LEADER_AND_ISR": 2, "UPDATE_METADATA": 2},
        "acked_ms": 40.0,
        "acked_ms_by_api": {"LEADER_AND_ISR": 30.0, "UPDATE_METADATA": 40.0},
        "acked_ms_by_broker": {"1": 35.0, "2": 40.0},
        "abandoned": 0,
    }
    ack.update(changes)
    return ack


def moved(partitions: range, leader: int = 1) -> list[dict[str, Any]]:
    return [
        {"ts": 1010, "topic": "t", "partition": p, "reason": "offline", "leader": leader}
        for p in partitions
    ]


def test_a_loss_figure_comes_only_from_a_round_where_every_partition_moved() -> None:
    figures = bench_leader_moves.loss_figures(loss_ack(), moved(range(4)), 4)
    assert figures["leaders_moved"] == 4
    assert figures["leader_and_isr_acked_s"] == 0.03
    # Three of four moved (the fourth left without a leader): no figure.
    with pytest.raises(RuntimeError, match="3 of 4 partitions"):
        bench_leader_moves.loss_figures(loss_ack(), moved(range(3)), 4)
    # A partition elected twice is one partition, not a fourth.
    with pytest.raises(RuntimeError, match="3 of 4 partitions"):
        bench_leader_moves.loss_figures(loss_ack(), moved(range(3)) + moved(range(1)), 4)


def test_a_loss_figure_needs_every_survivors_answer_and_a_leader_and_isr() -> None:
    with pytest.raises(RuntimeError, match=r"no answer from brokers \[2\]"):
        bench_leader_moves.loss_figures(
            loss_ack(acked_ms_by_broker={"1": 35.0}), moved(range(4)), 4
        )
    with pytest.raises(RuntimeError, match="1 requests abandoned"):
        bench_leader_moves.loss_figures(loss_ack(abandoned=1), moved(range(4)), 4)
    with pytest.raises(RuntimeError, match="no LeaderAndIsr"):
        bench_leader_moves.loss_figures(
            loss_ack(acked_ms_by_api={"UPDATE_METADATA": 40.0}), moved(range(4)), 4
        )


def test_a_broker_return_figure_needs_the_returning_brokers_answer() -> None:
    """Broker 3's own acknowledgement is the return's floor: 0 s when it never answered."""
    with pytest.raises(RuntimeError, match=r"no answer from brokers \[3\]"):
        bench_leader_moves.broker_return(loss_ack(after_event="BrokerChange"))
    row = loss_ack(acked_ms_by_broker={"1": 35.0, "2": 40.0, "3": 900.0})
    assert bench_leader_moves.broker_return(row)["floor_returning_broker_acked_s"] == 0.9


def failover_ack(**changes: Any) -> dict[str, Any]:
    ack: dict[str, Any] = {
        "after_event": "ControllerChange",
        "learned_at_ms": 10_000.0,
        "requests": {"UPDATE_METADATA": 3, "LEADER_AND_ISR": 3},
        "sent_ms_by_api": {"UPDATE_METADATA": 300.0, "LEADER_AND_ISR": 400.0},
        "acked_ms": 600.0,
        "acked_ms_by_api": {"UPDATE_METADATA": 500.0, "LEADER_AND_ISR": 600.0},
        "acked_ms_by_broker": {"1": 450.0, "2": 500.0, "3": 600.0},
        "abandoned": 0,
    }
    ack.update(changes)
    return ack


LOADED = {"ts": 10_250.0, "total_ms": 240.0, "update_metadata_queued_ms": 200.0}


def test_a_failover_figure_is_until_every_broker_acknowledged_update_metadata() -> None:
    figures = bench_controller_failover.update_metadata_figures(failover_ack(), LOADED, 9_900.0)
    assert figures == {
        "resigned_to_update_metadata_queued_s": 0.31,
        "resigned_to_update_metadata_sent_s": 0.4,
        "resigned_to_update_metadata_acked_s": 0.6,
    }


def test_a_failover_a_broker_never_answered_gives_no_figure() -> None:
    """Broker 3's requests abandoned (it went during the failover): the last UpdateMetadata
    acknowledged is broker 2's, not every broker's."""
    ack = failover_ack(acked_ms_by_broker={"1": 450.0, "2": 500.0}, abandoned=2)
    with pytest.raises(RuntimeError, match=r"2 requests abandoned, no answer from brokers \[3\]"):
        bench_controller_failover.update_metadata_figures(ack, LOADED, 9_900.0)


def test_an_idle_cpu_figure_needs_every_isr_full_after_its_measurement() -> None:
    """A follower that stopped fetching during the measurement (its ISRs shrunk) spent
    less CPU than one keeping up: before, the figure came with isr_full_after false."""
    bench_idle_replication.require_full_isrs((10_000, 10_000), "the idle measurement")
    with pytest.raises(RuntimeError, match="3 of 10000 partitions without a full ISR"):
        bench_idle_replication.require_full_isrs((9_997, 10_000), "the idle measurement")


def crash_rows(partitions: range, leader: int, **changes: Any) -> list[dict[str, Any]]:
    """leader_and_isr lines of `leader`: partitions broker 3 (crashed) was preferred for."""
    row = {"controller_epoch": 5, "result": "applied", "leader": leader, "replicas": [3, 1, 2]}
    return [{"ts": 2_000 + p, "topic": "t", "partition": p, **row, **changes} for p in partitions]


def test_a_crash_figure_counts_distinct_partitions_given_a_new_leader() -> None:
    rows = {1: crash_rows(range(0, 4, 2), 1), 2: crash_rows(range(1, 4, 2), 2)}
    applied = bench_controller_crash.applied_new_leaders(rows, crashed=3, epoch=5)
    figures = bench_controller_crash.new_leader_figures(loss_ack(), applied, 4, (1, 2), 1_500.0)
    assert figures == {"new_leaders_applied": 4, "new_leaders_applied_ms": 503}
    # Partition 0 applied twice, partition 3 never: 4 lines for 3 of 4 partitions (before,
    # a figure); a line of another epoch, or of a follower, moves nothing.
    rows = {
        1: crash_rows(range(0, 3), 1)
        + crash_rows(range(1), 1)
        + crash_rows(range(3, 4), 1, controller_epoch=4),
        2: crash_rows(range(3, 4), 1),
    }
    applied = bench_controller_crash.applied_new_leaders(rows, crashed=3, epoch=5)
    with pytest.raises(RuntimeError, match="3 of the 4 partitions"):
        bench_controller_crash.new_leader_figures(loss_ack(), applied, 4, (1, 2), 1_500.0)


def test_a_crash_figure_needs_every_survivors_answer() -> None:
    applied = bench_controller_crash.applied_new_leaders({1: crash_rows(range(4), 1)}, 3, 5)
    with pytest.raises(RuntimeError, match=r"no answer from brokers \[2\]"):
        bench_controller_crash.new_leader_figures(
            loss_ack(acked_ms_by_broker={"1": 35.0}), applied, 4, (1, 2), 1_500.0
        )
    with pytest.raises(RuntimeError, match="1 requests abandoned"):
        bench_controller_crash.new_leader_figures(
            loss_ack(abandoned=1), applied, 4, (1, 2), 1_500.0
        )


@pytest.mark.parametrize(
    ("module", "argv", "error"),
    [
        (bench_controller_failover, ["--sizes", "-5"], "argument --sizes: -5 is less than 1"),
        (bench_controller_failover, ["--sizes", "10k"], "'10k' is not a whole number"),
        (bench_controller_failover, ["--rounds", "-1"], "argument --rounds: -1 is less than 0"),
        (bench_controller_crash, ["--rounds", "0"], "argument --rounds: 0 is less than 1"),
        (bench_controller_crash, ["--partitions", "0"], "--partitions: 0 is less than 1"),
        (bench_reassignment, ["--rounds", "0"], "argument --rounds: 0 is less than 1"),
        (report, ["--events", "1e6"], "argument --events: '1e6' is not a whole number"),
        (bench_state_change_log, ["--repeat", "0"], "argument --repeat: 0 is less than 1"),
        (bench_wire, ["--repeat", "0"], "argument --repeat: 0 is less than 1"),
        (bench_controller_decisions, ["--rounds", "0"], "argument --rounds: 0 is less than 1"),
        (bench_cluster_down, ["--rounds", "0"], "argument --rounds"),
        (bench_cluster_down, ["--partitions", "x"], "'x' is not a whole number"),
        (
            bench_controller_decisions,
            ["--partitions", "1500"],
            "--partitions must be a positive multiple of 1000, not 1500",
        ),
        (
            bench_controller_decisions,
            ["--parts", "loss,delete"],
            "--parts must name some of loss, shutdown, crash, deletion, two_lost,"
            " not 'loss,delete'",
        ),
    ],
)
def test_bad_arguments_are_a_usage_error_before_anything_starts(
    module: Any,
    argv: list[str],
    error: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--sizes -5 was run as a cluster of -5 partitions and reported; --rounds 0 ran the
    whole set-up and then failed on a median of nothing; --events 1e6 a traceback."""

    def no_zookeeper() -> Any:
        raise AssertionError("ZooKeeper provisioned for bad arguments")

    if hasattr(module, "zookeeper"):
        monkeypatch.setattr(module, "zookeeper", no_zookeeper)
    monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 2
    assert error in capsys.readouterr().err


def fake_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, lines_ok: int, incidents_found: int
) -> None:
    """report.one_size over a log of 3 lines and 2 incidents, the Spark job answering as
    told."""
    log = tmp_path / "state-change.log"
    log.write_text("{}\n{}\n{}\n")
    monkeypatch.setattr(
        report.generate, "generate", lambda options: {"total_lines": 3, "incidents": [1, 2]}
    )
    monkeypatch.setattr(
        report.inputs, "resolve", lambda source: SimpleNamespace(files=[str(log)], bytes=9)
    )
    summary = {
        "lines": {"ok": lines_ok},
        "clusters": {"c": {"incidents": {"total": incidents_found}}},
    }

    def run(options: Any, progress: Any) -> Any:
        progress("reading the logs (3 lines)")
        return SimpleNamespace(summary=summary)

    monkeypatch.setattr(report.job, "run", run)


def report_args() -> Any:
    return SimpleNamespace(keep=None, brokers=3, partitions=10, master="local[1]", conf=[])


def test_a_report_that_read_every_line_and_found_every_incident_gives_its_figure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_report(monkeypatch, tmp_path, lines_ok=3, incidents_found=2)
    result = report.one_size(3, report_args(), tmp_path)
    assert result["events"] == 3
    assert result["check"] == {"every_line_ok": True, "incidents_found": 2, "incidents_match": True}


@pytest.mark.parametrize(("lines_ok", "incidents_found"), [(2, 2), (3, 1)])
def test_a_report_that_missed_lines_or_incidents_gives_no_figure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lines_ok: int, incidents_found: int
) -> None:
    """Before, its events/s (3 events over the time of a report of fewer) was printed,
    the failed check beside it."""
    fake_report(monkeypatch, tmp_path, lines_ok=lines_ok, incidents_found=incidents_found)
    with pytest.raises(RuntimeError, match="the report of 3 events failed its check"):
        report.one_size(3, report_args(), tmp_path)


def test_the_traffic_latencies_are_those_of_messages_produced_in_the_measured_window() -> None:
    """The producer's first messages wait for its connections and metadata (0.5 s in a
    run of 2026-12-07, the baseline's p99 351.5 ms): only messages produced once the
    measured window began count, even those delivered in it."""
    window = bench_idle_replication.WindowLatencies()
    window.add(0.5585, now=100.0)  # the warm-up's: produced and delivered before it
    window.start()
    since = window.since
    window.add(0.300, now=since + 0.1)  # produced 0.2 s before the window, delivered in it
    assert window.values == []
    assert window.left_out == 2
    assert window.percentile_ms(0.99) is None
    for i in range(100):
        window.add(0.002 + i * 0.0001, now=since + 1 + i)
    window.add(0.0912, now=since + 200)
    assert len(window.values) == 101
    assert window.left_out == 2
    assert window.percentile_ms(0.5) == 7.0
    assert window.percentile_ms(0.99) == 11.9
    assert window.percentile_ms(1.0) == 91.2


def test_the_best_of_no_run_is_an_error_not_an_infinite_time() -> None:
    """bench_state_change_log --repeat 0 printed Infinity for every figure."""
    with pytest.raises(ValueError, match="best of 0 runs"):
        common.best_of(0, lambda: None)
    seconds, result = common.best_of(2, lambda: 7)
    assert result == 7
    assert 0 <= seconds < 1


def shutdown_line(ts: float, attempt: int, remaining: int | None) -> dict[str, Any]:
    return {"ts": ts, "attempt": attempt, "remaining": remaining, "ms": 120.0}


def test_the_client_failover_figure_of_a_controlled_shutdown_needs_one_that_succeeded() -> None:
    """A leader whose controlled shutdown gave up (or last ran in an earlier phase) exits 0
    all the same: its clients' stall is then an unclean shutdown's."""
    done = bench_client_failover.controlled_shutdown_done
    earlier = shutdown_line(500_000.0, 1, 0)  # a shutdown before this phase's
    ok = [earlier, shutdown_line(1_000_100.0, 1, 3), shutdown_line(1_000_400.0, 2, 0)]
    assert done(ok, 1_000.0, 0)["attempt"] == 2
    gave_up = [earlier, shutdown_line(1_000_100.0, 1, 3), shutdown_line(1_000_400.0, 2, 1)]
    with pytest.raises(RuntimeError, match=r"attempts \[\(1, 3\), \(2, 1\)\]"):
        done(gave_up, 1_000.0, 0)
    with pytest.raises(RuntimeError, match="did not succeed"):
        done([earlier], 1_000.0, 0)
    with pytest.raises(RuntimeError, match="exit status 1"):
        done(ok, 1_000.0, 1)


def test_the_produce_floor_is_a_figure_only_when_every_chunk_came_back_acknowledged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client's acknowledgement stream ending after 2 of 8 chunks (a relay process
    gone): before, the floor's MB/s was 8 chunks over the time of 2."""
    assert bench_produce.floor_relay(8 * 4096, 4096)["mb"] == 0.0  # 32 KB: 0.0 MB, done
    real = bench_produce._recv_exactly
    calls = [0]

    def ends_after_two(sock: Any, view: memoryview) -> bool:
        calls[0] += 1
        return calls[0] <= 2 and real(sock, view)

    # Only this process's reader of the client's acknowledgements (the relays are spawned).
    monkeypatch.setattr(bench_produce, "_recv_exactly", ends_after_two)
    with pytest.raises(RuntimeError, match=r"acknowledged \d of 8 chunks"):
        bench_produce.floor_relay(8 * 4096, 4096)


def test_the_memory_sampler_sees_a_transient_peak_a_later_sample_misses() -> None:
    """A child touches 64 MB for half a second, frees it and exits: the samples taken
    meanwhile hold that peak, the last ones do not, and the child's exit ends nothing."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(0.3); held = b'x' * (64 << 20); time.sleep(0.5);"
            " del held; time.sleep(0.5)",
        ]
    )
    try:
        with common.RssSampler([child.pid], interval_s=0.02) as sampler:
            child.wait(timeout=30)
            samples = list(sampler.samples[child.pid])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    spread = sampler.spread_mb(child.pid)
    assert sampler.peak_mb(child.pid) == spread["max"]
    assert spread["max"] - spread["min"] >= 60
    assert samples[-1] <= spread["max"] - 60  # freed before the end: a late sample misses it
    assert spread["min"] <= spread["median"] <= spread["max"]


def test_the_cpu_sampler_tells_a_busy_window_from_an_idle_one() -> None:
    """A child sleeps 0.5 s, then spins until it used 0.5 s of CPU, then sleeps again,
    printing the wall clock at each step: the CPU read over its spin is the spin's, over
    its first sleep next to nothing, and a window the samples do not reach is refused
    rather than guessed."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\n"
            "print(time.time() * 1000, flush=True); time.sleep(0.5)\n"
            "print(time.time() * 1000, flush=True); t = time.process_time()\n"
            "while time.process_time() - t < 0.5: pass\n"
            "print(time.time() * 1000, flush=True); time.sleep(0.5)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with common.CpuSampler([child.pid], interval_s=0.02) as sampler:
            out, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    slept, spun, done = (float(line) for line in out.split())
    idle = sampler.used(child.pid, slept + 50, spun - 50)
    busy = sampler.used(child.pid, spun, done)
    assert idle["cpu_s"] <= 0.03  # a tick or two at the most
    assert 0.45 <= busy["cpu_s"] <= busy["window_s"] + 0.05
    assert busy["cores"] > 0
    with pytest.raises(ValueError, match="no CPU samples"):
        sampler.used(child.pid, slept - 60_000, spun)
