"""Edges of `zkctl demo` held with fakes, no cluster: one failover step for each fault
(what is done to the controller, what is waited for, what is said), the cycle of faults and
how the demo ends, the clients' counters and their final verdict, and the demo's flags."""

from __future__ import annotations

import argparse
import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from admin import topics as admin_topics
from cluster import demo, netsplit, supervised
from cluster.demo import DemoOptions
from cluster.demo_workload import ClientWorkload, Tally
from tests.unit.test_demo_pieces import Msg
from zkctl import demo_command

# --- one failover, with a fake cluster -------------------------------------------------------

OLD, NEW = 1, 2
EPOCH = 5
NOW = 1_000.0  # time.time() during the failover: the state-change logs' clock


@dataclass
class FakeBroker:
    id: int
    done: list[str]
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    running: bool = True
    # Records that appear once the broker is resumed or its link healed.
    on_resume: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def _do(self, what: str) -> None:
        self.done.append(f"{what} {self.id}")

    def kill(self) -> None:
        self._do("kill")

    def terminate(self) -> None:
        self._do("terminate")

    def pause(self) -> None:
        self._do("pause")

    def resume(self) -> None:
        self._do("resume")
        for kind, rows in self.on_resume.items():
            self.records.setdefault(kind, []).extend(rows)

    def alive(self) -> bool:
        return self.running

    def wait_exit(self, timeout: float) -> None:
        self._do("wait_exit")
        self.running = False

    def start(self) -> None:
        self._do("start")

    def state_changes(self, event: str | None = None) -> list[dict[str, Any]]:
        assert event is not None
        return list(self.records.get(event, []))


@dataclass
class FakeLink:
    broker: FakeBroker

    def cut(self) -> None:
        self.broker._do("cut")
        # Cut off, it resigns on its own (of the epoch it held).
        for kind, rows in self.broker.on_resume.items():
            self.broker.records.setdefault(kind, []).extend(rows)

    def heal(self) -> None:
        self.broker._do("heal")


class FakeCluster:
    session_timeout_s = 4.0

    def __init__(self, failover_ts: float | None = NOW + 2.5) -> None:
        self.done: list[str] = []
        self.brokers = {i: FakeBroker(i, self.done) for i in (1, 2, 3)}
        resigned = [{"controller_epoch": EPOCH, "reason": "session expired"}]
        # An older term's resignation is on file before this failover: not this one's.
        self.brokers[OLD].records["controller_resigned"] = [{"controller_epoch": EPOCH - 1}]
        self.brokers[OLD].on_resume["controller_resigned"] = resigned
        failovers: list[dict[str, Any]] = [
            {"controller_epoch": EPOCH, "ts": (NOW - 50) * 1000}  # its previous term
        ]
        if failover_ts is not None:
            failovers.append({"controller_epoch": EPOCH + 1, "ts": failover_ts * 1000})
        self.brokers[NEW].records["controller_failover"] = failovers
        self.controller_waits: list[dict[str, Any]] = []
        self.registered: list[list[int]] = []
        self.isr: tuple[int, ...] = (1, 2, 3)
        self.isr_of: dict[int, tuple[int, ...]] = {}

    def __getitem__(self, broker_id: int) -> FakeBroker:
        return self.brokers[broker_id]

    def wait_controller(
        self, not_id: int | None = None, min_epoch: int = 0, timeout: float = 60
    ) -> tuple[int, int]:
        self.controller_waits.append({"not_id": not_id, "min_epoch": min_epoch})
        if not_id is None:
            return OLD, EPOCH
        assert not_id == OLD, not_id
        assert min_epoch == EPOCH + 1, min_epoch
        return NEW, EPOCH + 1

    def wait_registered(self, ids: list[int], timeout: float = 60) -> None:
        self.registered.append(list(ids))

    def assignment(self, topic: str) -> Any:
        assert topic == demo.DEMO_TOPIC
        return SimpleNamespace(partitions={0: (1, 2, 3), 1: (2, 3, 1)})

    def partition_states(self, topic: str) -> dict[int, Any]:
        return {p: SimpleNamespace(isr=self.isr_of.get(p, self.isr)) for p in (0, 1)}


class FakeWatcher:
    def __init__(self) -> None:
        self.banners: list[tuple[str, float | None]] = []

    def set_banner(self, text: str, *, since: float | None = None) -> None:
        self.banners.append((text, since))


Waited = list[tuple[str, float]]


@pytest.fixture
def waited(monkeypatch: pytest.MonkeyPatch) -> Waited:
    """demo.wait_for, recorded, and failing in a second rather than after minutes."""
    real = supervised.wait_for
    seen: Waited = []

    def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
        seen.append((what, timeout))
        return real(check, 1.0, what)

    monkeypatch.setattr(demo, "wait_for", wait_for)
    monkeypatch.setattr(time, "time", lambda: NOW)
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    monkeypatch.setattr(
        demo,
        "_failover_record",
        functools.partial(quick_record, demo._failover_record),
    )
    return seen


def quick_record(
    real: Callable[..., dict[str, Any] | None],
    cluster: Any,
    broker_id: int,
    epoch: int,
    timeout_s: float,
) -> dict[str, Any] | None:
    assert timeout_s == 10.0
    return real(cluster, broker_id, epoch, 0.0)


def fail_over(cluster: FakeCluster, fault: str, cycle: int = 3) -> tuple[list[str], FakeWatcher]:
    said: list[str] = []
    watcher = FakeWatcher()
    links = {i: FakeLink(b) for i, b in cluster.brokers.items()}
    demo._failover(cluster, links, fault, cycle, said.append, watcher)  # type: ignore[arg-type]
    return said, watcher


def test_a_sigkilled_controller_is_restarted_once_another_took_over(waited: Waited) -> None:
    cluster = FakeCluster()
    cluster.brokers[OLD].running = False  # SIGKILL: gone at once
    said, watcher = fail_over(cluster, "kill")
    assert cluster.done == ["kill 1", "start 1"]
    assert said == [
        f"--- failover 3: SIGKILL the controller: broker {OLD}, epoch {EPOCH} ---",
        f"broker {NEW} took over as controller, epoch {EPOCH + 1}, 2.5 s after the SIGKILL",
        f"restarting broker {OLD}",
    ]
    assert cluster.controller_waits == [
        {"not_id": None, "min_epoch": 0},
        {"not_id": OLD, "min_epoch": EPOCH + 1},
    ]
    assert cluster.registered == [[OLD]]
    assert [what for what, _ in waited] == ["the ISRs to fill up again"]
    text, since = watcher.banners[0]
    assert since == NOW
    assert text == (
        f"zkctl demo: failover 3: the controller, broker {OLD} (epoch {EPOCH}), was SIGKILLed"
        " {elapsed} ago; ZooKeeper sees it alive until its 4 s session ends"
    )
    assert watcher.banners[1] == (
        f"zkctl demo: failover 3: broker {NEW} took over (epoch {EPOCH + 1}) 2.5 s after the"
        f" SIGKILL; bringing broker {OLD} back",
        None,
    )


def test_a_gracefully_stopped_controller_is_waited_for_then_restarted(waited: Waited) -> None:
    cluster = FakeCluster()
    said, watcher = fail_over(cluster, "stop")
    # Still exiting after the takeover: it is waited for before it starts again.
    assert cluster.done == ["terminate 1", "wait_exit 1", "start 1"]
    assert said[0] == (
        f"--- failover 3: stop the controller gracefully (controlled shutdown): broker {OLD},"
        f" epoch {EPOCH} ---"
    )
    assert said[1].endswith("2.5 s after the graceful stop")
    # Its session closes at once: no session to wait out.
    assert watcher.banners[0][0].endswith("was told to stop (SIGTERM) {elapsed} ago")


def test_a_zombie_is_resumed_and_waited_for_until_it_resigns_its_epoch(waited: Waited) -> None:
    cluster = FakeCluster()
    said, _ = fail_over(cluster, "pause")
    # Never restarted: resumed, it resigns and registers again.
    assert cluster.done == ["pause 1", "resume 1"]
    assert said[1].endswith("2.5 s after the SIGSTOP")
    assert said[2] == (f"resuming the zombie, broker {OLD}: it still believes it is controller")
    assert waited == [("the zombie to resign", 60), ("the ISRs to fill up again", 60)]
    assert cluster.registered == [[OLD]]


def test_a_zombie_that_never_resigns_its_epoch_ends_the_demo(waited: Waited) -> None:
    cluster = FakeCluster()
    cluster.brokers[OLD].on_resume.clear()  # only the older term's resignation on file
    with pytest.raises(AssertionError, match="the zombie to resign"):
        fail_over(cluster, "pause")


def test_a_cut_off_controller_resigns_on_its_own_then_its_link_heals(waited: Waited) -> None:
    cluster = FakeCluster()
    said, watcher = fail_over(cluster, "cut")
    assert cluster.done == ["cut 1", "heal 1"]
    assert said[1:] == [
        f"broker {NEW} took over as controller, epoch {EPOCH + 1}, 2.5 s after the cut from"
        " ZooKeeper",
        f"broker {OLD} still runs, cut off: it resigns once ZooKeeper has been out of reach"
        " for a session",
        f"healing broker {OLD}'s link: it finds its session gone and registers again",
    ]
    # Given a session and a minute more.
    assert waited[0] == ("the cut-off controller to resign", 64.0)
    assert watcher.banners[0][0].endswith(
        "was cut off from ZooKeeper (it still runs) {elapsed} ago;"
        " ZooKeeper sees it alive until its 4 s session ends"
    )


def test_a_cut_off_controller_that_never_resigns_ends_the_demo(waited: Waited) -> None:
    cluster = FakeCluster()
    cluster.brokers[OLD].on_resume.clear()
    with pytest.raises(AssertionError, match="the cut-off controller to resign"):
        fail_over(cluster, "cut")
    assert "heal 1" not in cluster.done


def test_without_a_failover_record_the_takeover_is_timed_by_the_status_file(
    waited: Waited,
) -> None:
    """A term that ended before its failover did has no controller_failover record: the
    moment wait_controller saw it stands (here no time at all)."""
    cluster = FakeCluster(failover_ts=None)
    said, _ = fail_over(cluster, "kill")
    assert said[1] == (
        f"broker {NEW} took over as controller, epoch {EPOCH + 1}, 0.0 s after the SIGKILL"
    )


def test_the_failover_waits_for_every_replica_back_in_the_isr(waited: Waited) -> None:
    cluster = FakeCluster()
    cluster.isr = (2, 3)  # broker 1 has not caught up
    with pytest.raises(AssertionError, match="the ISRs to fill up again"):
        fail_over(cluster, "kill")


def test_isr_complete_needs_every_replica_of_every_partition() -> None:
    cluster = FakeCluster()
    assert demo.isr_complete(cluster)  # type: ignore[arg-type]
    cluster.isr = (1, 2)
    assert not demo.isr_complete(cluster)  # type: ignore[arg-type]
    cluster.isr = (1, 2, 3, 4)
    assert demo.isr_complete(cluster)  # type: ignore[arg-type]
    cluster.isr_of = {1: (2, 3)}  # one partition short of broker 1
    assert not demo.isr_complete(cluster)  # type: ignore[arg-type]


def test_a_failover_record_of_another_epoch_is_not_this_failovers() -> None:
    cluster = FakeCluster()
    record = demo._failover_record(cluster, NEW, EPOCH + 1, 0.0)  # type: ignore[arg-type]
    assert record is not None
    assert record["ts"] == (NOW + 2.5) * 1000
    assert demo._failover_record(cluster, NEW, EPOCH + 2, 0.0) is None  # type: ignore[arg-type]


# --- the cycle and the end of the demo ---------------------------------------------------------


class Stop(Exception):
    pass


@dataclass
class Fakes:
    faults: list[tuple[str, int]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    stopped: list[bool] = field(default_factory=list)
    interrupt_after: int | None = None
    view_quits: bool = True  # the interruption came from q
    view_failure: BaseException | None = None
    settings: list[dict[str, str]] = field(default_factory=list)
    topics: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    banners: list[str] = field(default_factory=list)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Fakes:
    """run_demo with nothing real: ZooKeeper, the brokers, the view and the failovers."""
    f = Fakes()

    @contextlib.contextmanager
    def zookeeper(*_a: Any) -> Iterator[str]:
        yield "127.0.0.1:2181/demo"

    class Anything:
        def __init__(self, *_a: Any, **_k: Any) -> None:
            self.brokers: dict[int, Any] = {}
            self.quit_requested = f.view_quits
            self.failure = f.view_failure
            self.zk = None

        def __getattr__(self, name: str) -> Any:
            return lambda *_a, **_k: (1, 1)

    @contextlib.contextmanager
    def linked(_cluster: Any) -> Iterator[dict[int, Any]]:
        yield {}

    def failover(_c: Any, _l: Any, fault: str, cycle: int, *_a: Any) -> None:
        f.faults.append((fault, cycle))
        if f.interrupt_after is not None and len(f.faults) >= f.interrupt_after:
            raise KeyboardInterrupt

    import zkdata.client

    monkeypatch.setattr(demo, "_zookeeper", zookeeper)
    monkeypatch.setattr(zkdata.client, "ZkClient", Anything)

    class Watcher(Anything):
        def set_banner(self, text: str, *, since: float | None = None) -> None:
            f.banners.append(text)

        def request_summary(self) -> None:
            f.banners.append("(summary)")

    monkeypatch.setattr(demo, "Watcher", Watcher)

    def cluster(_connect: str, _root: Path, ids: Any, settings: dict[str, str]) -> Anything:
        f.settings.append(settings)
        return Anything()

    class View(Anything):
        def note(self, text: str, severity: str = "info") -> None:
            f.notes.append(text)

    monkeypatch.setattr(demo, "SupervisedCluster", cluster)
    monkeypatch.setattr(netsplit, "linked", linked)
    monkeypatch.setattr(demo, "DemoView", View)
    monkeypatch.setattr(demo, "LogFollower", Anything)
    monkeypatch.setattr(admin_topics, "create_topic", lambda _zk, req: f.topics.append(req))
    monkeypatch.setattr(demo, "_failover", failover)
    return f


class RecordingWorkload:
    def __init__(self, fakes: Fakes) -> None:
        self.fakes = fakes

    def start(self, cluster: Any, topic: str, note: Callable[[str], None]) -> None:
        assert topic == demo.DEMO_TOPIC

    def stop(self, interrupted: bool = False) -> None:
        self.fakes.stopped.append(interrupted)


def run(fakes: Fakes, tmp_path: Path, **options: Any) -> int:
    opts = DemoOptions(
        directory=tmp_path,
        interval_s=0.0,
        workload=lambda: RecordingWorkload(fakes),
        **options,
    )
    return demo.run_demo(opts, fakes.said.append)


def test_the_faults_are_taken_in_turn_and_the_cycle_starts_again(
    fakes: Fakes, tmp_path: Path
) -> None:
    fakes.interrupt_after = 6
    assert run(fakes, tmp_path, faults=("kill", "pause", "cut")) == 0
    assert fakes.faults == [
        ("kill", 1),
        ("pause", 2),
        ("cut", 3),
        ("kill", 4),
        ("pause", 5),
        ("cut", 6),
    ]
    assert fakes.said[-1] == "demo over after 6 failovers; nothing it started is running"
    # Stopped by q: the workload is stopped as interrupted (a few seconds at most).
    assert fakes.stopped == [True]


def test_after_each_failover_a_summary_and_the_count_in_the_banner(
    fakes: Fakes, tmp_path: Path
) -> None:
    fakes.interrupt_after = 3
    run(fakes, tmp_path)
    after = [b for b in fakes.banners if "done" in b or b == "(summary)"]
    assert after == [
        "(summary)",
        "zkctl demo: 1 failover done; the next in 0 s; Ctrl-C stops it and cleans up",
        "(summary)",
        "zkctl demo: 2 failovers done; the next in 0 s; Ctrl-C stops it and cleans up",
    ]


def test_the_default_cycle_is_kill_stop_pause_cut() -> None:
    assert DemoOptions().faults == ("kill", "stop", "pause", "cut")


def test_a_duration_already_over_still_shows_one_failover(fakes: Fakes, tmp_path: Path) -> None:
    assert run(fakes, tmp_path, duration_s=0.0) == 0
    assert fakes.faults == [("kill", 1)]
    assert fakes.said[-1] == "demo over after 1 failover; nothing it started is running"
    # Ended by itself: the workload has its full time to check every message.
    assert fakes.stopped == [False]


def test_ctrl_c_is_raised_again_when_the_view_did_not_ask_for_it(
    fakes: Fakes, tmp_path: Path
) -> None:
    fakes.interrupt_after = 1
    fakes.view_quits = False
    with pytest.raises(KeyboardInterrupt):
        run(fakes, tmp_path)
    assert fakes.stopped == [True]
    assert not any(s.startswith("demo over") for s in fakes.said)


def test_a_view_that_failed_has_its_failure_raised(fakes: Fakes, tmp_path: Path) -> None:
    """`zkctl demo | head`: the view's BrokenPipeError, once everything is stopped."""
    fakes.interrupt_after = 2
    fakes.view_quits = False
    fakes.view_failure = BrokenPipeError(32, "Broken pipe")
    with pytest.raises(BrokenPipeError):
        run(fakes, tmp_path)
    assert fakes.stopped == [True]


def test_the_brokers_get_the_session_timeout_and_the_users_settings_over_the_defaults(
    fakes: Fakes, tmp_path: Path
) -> None:
    settings = {"zookeeper.session.timeout.ms": "9000", "num.io.threads": "2"}
    run(fakes, tmp_path, duration_s=0.0, session_timeout_ms=6000, settings=settings)
    [given] = fakes.settings
    assert given == {
        **demo.DEFAULT_SETTINGS,
        "zookeeper.session.timeout.ms": "9000",
        "num.io.threads": "2",
    }
    fakes.settings.clear()
    run(fakes, tmp_path, duration_s=0.0, session_timeout_ms=6000)
    assert fakes.settings[0]["zookeeper.session.timeout.ms"] == "6000"
    assert fakes.settings[0]["replica.fetch.wait.max.ms"] == "200"


@pytest.mark.parametrize(("brokers", "rf"), [(2, 2), (3, 3), (5, 3)])
def test_the_demo_topic_is_replicated_on_up_to_three_brokers(
    fakes: Fakes, tmp_path: Path, brokers: int, rf: int
) -> None:
    run(fakes, tmp_path, duration_s=0.0, brokers=brokers, partitions=4)
    [request] = fakes.topics
    assert (request.name, request.partitions, request.replication_factor) == ("demo", 4, rf)
    assert f"created topic 'demo': 4 partitions, replication factor {rf}" in fakes.notes


class FakeClock:
    """The demo's time module: a monotonic clock that only sleeping moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.strftime = time.strftime
        self.localtime = time.localtime

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_700_000_000.0 + self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_pause_between_failovers_ends_at_the_duration(
    fakes: Fakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    monkeypatch.setattr("cluster.demo.time", clock)
    opts = DemoOptions(directory=tmp_path, interval_s=600.0, duration_s=15.0)
    assert demo.run_demo(opts, fakes.said.append) == 0
    assert fakes.faults == [("kill", 1)]
    # Over at the duration (give or take a poll), not after the whole pause.
    assert clock.now < 16.0
    assert "time is up; stopping everything" in fakes.notes


def test_pauses_between_failovers_last_the_interval(
    fakes: Fakes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    monkeypatch.setattr("cluster.demo.time", clock)
    opts = DemoOptions(directory=tmp_path, interval_s=6.0, duration_s=20.0)
    demo.run_demo(opts, fakes.said.append)
    # Failovers at 0, 6, 12 and 18 s (they take no time here); the demo ends at 20 s.
    assert [cycle for _, cycle in fakes.faults] == [1, 2, 3, 4]


def test_a_step_that_fails_ends_the_demo_saying_where_the_logs_are(tmp_path: Path) -> None:
    def timed_out() -> None:
        raise AssertionError("timed out after 60 s waiting for the ISRs to fill up again")

    with pytest.raises(demo.DemoError) as e:
        demo._checked(tmp_path, timed_out)
    assert str(e.value) == (
        "timed out after 60 s waiting for the ISRs to fill up again\n"
        f"the brokers' output and logs are in {tmp_path}"
    )

    def died() -> None:
        raise RuntimeError("broker 2 exited with code 1")

    with pytest.raises(demo.DemoError, match="broker 2 exited"):
        demo._checked(tmp_path, died)
    assert demo._checked(tmp_path, lambda: 7) == 7


def test_a_zookeeper_failure_is_not_blamed_on_the_brokers(tmp_path: Path) -> None:
    from cluster import zookeeper as zkp

    def zk_gone() -> None:
        raise zkp.ZooKeeperError("ZooKeeper exited")

    with pytest.raises(zkp.ZooKeeperError):
        demo._checked(tmp_path, zk_gone)


# --- what the state-change logs add --------------------------------------------------------------


def test_the_records_worth_a_line() -> None:
    assert demo.describe_event(
        {"event": "controller_resigned", "broker": 1, "controller_epoch": 4, "reason": "r"}
    ) == ("broker 1 resigned as controller of epoch 4 (r)")
    assert demo.describe_event(
        {
            "event": "request_rejected",
            "broker": 2,
            "api": "LeaderAndIsr",
            "controller_id": 1,
            "controller_epoch": 4,
            "error": "STALE_CONTROLLER_EPOCH",
        }
    ) == ("broker 2 refused LeaderAndIsr from controller 1 (epoch 4): STALE_CONTROLLER_EPOCH")
    rejected = {
        "event": "leader_and_isr",
        "broker": 3,
        "topic": "demo",
        "partition": 2,
        "controller_id": 1,
        "controller_epoch": 4,
        "error": "STALE_CONTROLLER_EPOCH",
    }
    assert demo.describe_event({**rejected, "result": "rejected"}) == (
        "broker 3 refused the state of demo-2 from controller 1 epoch 4: STALE_CONTROLLER_EPOCH"
    )
    assert demo.describe_event({**rejected, "result": "applied"}) is None
    assert demo.describe_event({"event": "zookeeper_session", "broker": 1, "state": "LOST"}) == (
        "broker 1 learns that its ZooKeeper session expired"
    )
    assert demo.describe_event({"event": "zookeeper_session", "broker": 1, "state": "NEW"}) is None
    assert demo.describe_event({"event": "leader_election", "broker": 1}) is None


def test_a_controlled_shutdown_attempt_says_how_it_went() -> None:
    attempt = {"event": "controlled_shutdown", "broker": 2, "attempt": 1, "ms": 12.4}
    assert demo.describe_event({**attempt, "remaining": 0}) == (
        "broker 2 asked the controller to move its leaderships away"
        " (attempt 1: 0 partitions still led, 12 ms)"
    )
    assert demo.describe_event({**attempt, "remaining": None}) == (
        "broker 2 asked the controller to move its leaderships away (attempt 1: failed, 12 ms)"
    )


class Lines:
    def __init__(self, *lines: str) -> None:
        self.lines = [line.encode() for line in lines]

    def read_new(self) -> list[bytes]:
        got, self.lines = self.lines, []
        return got


def test_the_log_lines_are_noted_in_time_order_across_brokers_at_their_own_time(
    tmp_path: Path,
) -> None:
    noted: list[tuple[str, float]] = []
    follower = demo.LogFollower([], lambda text, ts: noted.append((text, ts)))
    resigned = '{"event": "controller_resigned", "broker": %d, "controller_epoch": 1, '
    readers: list[Any] = [
        Lines(resigned % 1 + '"reason": "late", "ts": 3000}', "not json"),
        Lines(
            resigned % 2 + '"reason": "early", "ts": 1500}',
            '{"event": "controller_resigned", "broker": 2, "ts": 2000}',  # another schema
            '{"event": "leader_election", "broker": 2, "ts": 2500}',
        ),
    ]
    follower.readers = readers
    follower.flush()
    assert noted == [
        ("broker 2 resigned as controller of epoch 1 (early)", 1.5),
        ("broker 1 resigned as controller of epoch 1 (late)", 3.0),
    ]
    follower.flush()  # nothing new
    assert len(noted) == 2


# --- the clients' counters and verdict -------------------------------------------------------


class Err:
    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


def test_a_failed_delivery_is_counted_by_its_error_and_acknowledges_nothing() -> None:
    t = Tally()
    t.started([0], now=0.0)
    t.on_delivery(Err("_MSG_TIMED_OUT"), Msg(0, 3, b"demo-000000003"))
    t.on_delivery(Err("_MSG_TIMED_OUT"), Msg(0, 4, b"demo-000000004"))
    t.on_delivery(Err("NOT_ENOUGH_REPLICAS"), Msg(0, 5, b"demo-000000005"))
    assert t.errors == {"_MSG_TIMED_OUT": 2, "NOT_ENOUGH_REPLICAS": 1}
    assert t.acked == {}
    assert t.acknowledged() == 0
    assert t.lost() == []
    assert t.last_ack == {0: 0.0}  # a failure is no acknowledgement: the wait goes on


def test_the_longest_wait_is_between_two_acknowledgements_of_one_partition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([10.0, 11.0, 14.0, 14.5])
    monkeypatch.setattr(
        "cluster.demo_workload.time", SimpleNamespace(monotonic=lambda: next(clock))
    )
    t = Tally()
    t.started([0, 1], now=9.5)
    t.on_delivery(None, Msg(0, 0, b"a"))  # 0.5 s after the start
    t.on_delivery(None, Msg(1, 0, b"b"))  # 1.5 s after the start
    t.on_delivery(None, Msg(0, 1, b"c"))  # 4 s after partition 0's last
    assert t.longest_stall_s == 4.0
    t.on_delivery(None, Msg(1, 1, b"d"))  # 3.5 s after partition 1's last: not longer
    assert t.longest_stall_s == 4.0
    assert t.last_ack == {0: 14.0, 1: 14.5}


def test_started_keeps_a_partitions_earlier_start() -> None:
    t = Tally()
    t.started([0], now=1.0)
    t.started([0, 1], now=5.0)
    assert t.last_ack == {0: 1.0, 1: 5.0}


def test_a_message_read_back_at_another_offset_is_lost() -> None:
    t = Tally()
    t.on_delivery(None, Msg(0, 0, b"demo-000000001"))
    t.on_delivery(None, Msg(0, 1, b"demo-000000002"))
    t.on_delivery(None, Msg(2, 0, b"demo-000000003"))
    t.read[(0, 0)] = b"demo-000000001"
    t.read[(0, 2)] = b"demo-000000002"  # not where it was acknowledged
    assert t.lost() == [(0, 1), (2, 0)]


def test_every_message_acknowledged_at_one_offset_but_the_one_read_is_lost() -> None:
    t = Tally()
    for value in (b"m1", b"m2", b"m3", b"m2"):  # m2's answer came twice
        t.on_delivery(None, Msg(0, 7, value))
    assert t.reacked == {(0, 7): [b"m2", b"m3"]}
    assert t.acknowledged() == 3
    t.read[(0, 7)] = b"m3"
    assert t.lost() == [(0, 7), (0, 7)]
    t.read[(0, 7)] = b"m1"
    assert t.lost() == [(0, 7), (0, 7)]


def test_duplicates_are_messages_read_at_more_than_one_offset() -> None:
    t = Tally()
    t.read.update({(0, 0): b"a", (0, 1): b"a", (0, 2): b"b", (1, 0): b"b", (1, 1): b"c"})
    assert t.duplicates() == 2


def workload_with(tally: Tally) -> tuple[ClientWorkload, list[str]]:
    noted: list[str] = []
    w = ClientWorkload(rate=50)
    w.tally = tally
    w._note = noted.append
    return w, noted


def test_the_summary_counts_and_names_the_errors_in_order() -> None:
    t = Tally()
    t.sent = 12_345
    for offset, value in enumerate([b"a", b"b", b"c"]):
        t.on_delivery(None, Msg(0, offset, value))
    t.read.update({(0, 0): b"a", (0, 1): b"b", (0, 2): b"c", (0, 3): b"a", (0, 4): b"b"})
    t.errors = {"b_error": 1, "a_error": 2_000}
    t.longest_stall_s = 6.25
    w, _ = workload_with(t)
    assert w.summary() == (
        "clients: 12,345 sent, 3 acknowledged, 5 read back (2 retried duplicates);"
        " a_error x2000, b_error x1; longest a partition waited for an acknowledgement 6.2 s"
    )
    t.errors.clear()
    t.read = {(0, 0): b"a"}
    assert w.summary() == (
        "clients: 12,345 sent, 3 acknowledged, 1 read back; no errors;"
        " longest a partition waited for an acknowledgement 6.2 s"
    )


def test_the_verdict_when_every_message_was_read_back() -> None:
    t = Tally()
    for offset in range(1_200):
        t.on_delivery(None, Msg(offset % 2, offset, b"%d" % offset))
        t.read[(offset % 2, offset)] = b"%d" % offset
    w, noted = workload_with(t)
    w.stop()
    assert noted[0].startswith("clients: 0 sent, 1,200 acknowledged, 1,200 read back;")
    assert noted[1:] == [
        "every one of the 1,200 acknowledged messages was read back at the offset it was"
        " acknowledged with"
    ]


def lossy() -> Tally:
    t = Tally()
    for offset in range(8):
        t.on_delivery(None, Msg(0, offset, b"%d" % offset))
    t.read[(0, 0)] = b"0"
    return t


def test_the_verdict_names_the_first_lost_messages() -> None:
    w, noted = workload_with(lossy())
    w.stop()
    assert noted[1:] == [
        "LOST: 7 acknowledged messages were not read back at their offsets,"
        " first [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5)]"
    ]


def test_an_interrupted_demo_concludes_nothing_about_what_was_not_read() -> None:
    w, noted = workload_with(lossy())
    w.stop(interrupted=True)
    assert noted[1:] == [
        "interrupted: 7 acknowledged messages were not read back yet; nothing is concluded"
        " about them"
    ]
    # A few seconds for the answers and the reading, not minutes.
    assert w._flush_s == 5.0


def test_an_interrupted_demo_with_nothing_missing_says_so() -> None:
    t = Tally()
    t.on_delivery(None, Msg(0, 0, b"x"))
    t.read[(0, 0)] = b"x"
    w, noted = workload_with(t)
    w.stop(interrupted=True)
    assert noted[-1].startswith("every one of the 1 acknowledged messages")


def test_the_consumer_is_caught_up_when_every_acknowledged_offset_was_read() -> None:
    t = Tally()
    t.on_delivery(None, Msg(0, 0, b"x"))
    t.on_delivery(None, Msg(1, 0, b"y"))
    w, _ = workload_with(t)
    t.read[(0, 0)] = b"x"
    assert not w._caught_up()
    t.read[(1, 0)] = b"y"
    assert w._caught_up()
    assert not w._producing()  # no threads started


# --- the flags ---------------------------------------------------------------------------------


def test_a_fault_list_is_taken_in_its_order_with_spaces_ignored() -> None:
    assert demo_command.fault_cycle("cut, kill ,pause") == ("cut", "kill", "pause")
    assert demo_command.fault_cycle("stop") == ("stop",)


def test_every_unknown_fault_is_named() -> None:
    with pytest.raises(argparse.ArgumentTypeError) as e:
        demo_command.fault_cycle("kill,boom,,zap")
    assert str(e.value) == "unknown fault 'boom', '', 'zap': choose from kill, stop, pause, cut"


def test_two_brokers_are_enough_for_a_failover() -> None:
    assert demo_command.failover_brokers("2") == 2
    with pytest.raises(argparse.ArgumentTypeError, match="at least 2"):
        demo_command.failover_brokers("1")


def demo_options(monkeypatch: pytest.MonkeyPatch, *argv: str) -> DemoOptions:
    """The options `zkctl demo ARGV` runs the demo with (run_demo replaced)."""
    from zkctl import cli

    ran: list[DemoOptions] = []

    def run_demo(options: DemoOptions, say: Callable[[str], None]) -> int:
        ran.append(options)
        return 0

    monkeypatch.setattr(demo, "run_demo", run_demo)
    args = cli.build_parser().parse_args(["demo", *argv])
    assert args.handler(args) == 0
    [options] = ran
    return options


def test_the_demos_flags_reach_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    options = demo_options(
        monkeypatch,
        "--brokers=4",
        "--duration=90",
        "--interval=2.5",
        "--session-timeout-ms=7000",
        "--partitions=9",
        "--faults=cut,kill",
        "--rate=50",
        "--dir=/tmp/somewhere",
    )
    assert options.brokers == 4
    assert options.duration_s == 90.0
    assert options.interval_s == 2.5
    assert options.session_timeout_ms == 7000
    assert options.partitions == 9
    assert options.faults == ("cut", "kill")
    assert options.directory == Path("/tmp/somewhere/demo")
    assert options.zookeeper is None
    assert options.workload is not None
    workload = options.workload()
    assert isinstance(workload, ClientWorkload)
    assert workload.rate == 50.0


def test_the_demos_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    options = demo_options(monkeypatch)
    assert (options.brokers, options.duration_s, options.interval_s) == (3, None, 6.0)
    assert options.faults == demo.FAULTS
    assert options.view == "plain"  # not a terminal
    assert options.workload is not None
    workload = options.workload()
    assert isinstance(workload, ClientWorkload)
    assert workload.rate == 200.0


def test_no_clients_and_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    class Terminal:
        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stdout", Terminal())
    assert demo_options(monkeypatch).view == "curses"
    options = demo_options(monkeypatch, "--plain", "--no-clients")
    assert options.view == "plain"
    assert options.workload is None


@pytest.mark.parametrize(
    "argv",
    [
        ["--duration=0"],
        ["--duration=-5"],
        ["--duration=soon"],
        ["--interval=-1"],
        ["--partitions=0"],
        ["--session-timeout-ms=0"],
        ["--rate=0"],
        ["--brokers=1"],
        ["--faults=kill,"],
    ],
)
def test_bad_flag_values_are_usage_errors(argv: list[str]) -> None:
    from zkctl import cli

    with pytest.raises(SystemExit) as e:
        cli.build_parser().parse_args(["demo", *argv])
    assert e.value.code == 2


# --- the clients' threads, with fakes ----------------------------------------------------------


def test_the_order_of_lost_positions_is_by_partition_and_offset() -> None:
    t = Tally()
    t.on_delivery(None, Msg(1, 0, b"a"))
    t.on_delivery(None, Msg(0, 3, b"b"))
    t.on_delivery(None, Msg(1, 0, b"c"))
    t.on_delivery(None, Msg(0, 1, b"d"))
    assert t.lost() == [(0, 1), (0, 3), (1, 0), (1, 0)]


def test_an_interrupted_stop_drains_for_seconds_not_minutes() -> None:
    w, _ = workload_with(Tally())
    w.stop(interrupted=True)
    assert w._drain_deadline - time.monotonic() <= 8
    w, _ = workload_with(Tally())
    w.stop()
    assert w._drain_deadline - time.monotonic() > 60


def test_a_finished_producer_is_not_producing() -> None:
    import threading

    w, _ = workload_with(Tally())
    done = threading.Thread(target=lambda: None)
    done.start()
    done.join()
    w._threads = [done]
    assert not w._producing()


def test_the_clients_bootstrap_from_the_brokers_that_run() -> None:
    from cluster.demo_workload import bootstrap

    brokers = {
        i: SimpleNamespace(alive=lambda i=i: i != 2, port=lambda i=i: 9090 + i) for i in (1, 2, 3)
    }
    assert bootstrap(SimpleNamespace(brokers=brokers)) == "127.0.0.1:9091,127.0.0.1:9093"  # type: ignore[arg-type]


class FakeConsumer:
    def __init__(self, *batches: list[Any]) -> None:
        self.batches = list(batches)
        self.closed = False

    def consume(self, n: int, timeout: float) -> list[Any]:
        return self.batches.pop(0) if self.batches else []

    def close(self) -> None:
        self.closed = True


class Read(Msg):
    def __init__(self, partition: int, offset: int, value: bytes, err: Any = None) -> None:
        super().__init__(partition, offset, value)
        self._err = err

    def error(self) -> Any:
        return self._err


def test_the_consumer_reads_on_after_stop_until_every_acknowledged_message_is_read() -> None:
    from confluent_kafka import KafkaError

    t = Tally()
    t.on_delivery(None, Msg(0, 0, b"a"))
    t.on_delivery(None, Msg(0, 1, b"b"))
    w, _ = workload_with(t)
    w._stop.set()  # stopped; the producer has its answers
    eof = SimpleNamespace(code=lambda: KafkaError._PARTITION_EOF, name=lambda: "_PARTITION_EOF")
    bad = SimpleNamespace(code=lambda: KafkaError.UNKNOWN, name=lambda: "UNKNOWN")
    consumer = FakeConsumer(
        [], [Read(0, 0, b"a")], [Read(0, 0, b"", eof), Read(0, 0, b"", bad)], [Read(0, 1, b"b")]
    )
    w._consume(consumer)
    assert t.read == {(0, 0): b"a", (0, 1): b"b"}
    assert t.errors == {"consumer UNKNOWN": 1}  # the end of a partition is no error
    assert consumer.closed


def test_the_consumer_gives_up_at_the_drain_deadline() -> None:
    t = Tally()
    t.on_delivery(None, Msg(0, 0, b"never read"))
    w, _ = workload_with(t)
    w._stop.set()
    w._drain_deadline = time.monotonic() - 1

    class Endless(FakeConsumer):
        calls = 0

        def consume(self, n: int, timeout: float) -> list[Any]:
            self.calls += 1
            assert self.calls < 100, "read on past the drain deadline"
            return []

    consumer = Endless()
    w._consume(consumer)
    assert consumer.closed
    assert t.read == {}


def test_a_failover_record_written_after_the_takeover_was_seen_is_waited_for() -> None:
    """The status file can show the new controller before its failover is done."""
    cluster = FakeCluster()
    record = {"controller_epoch": EPOCH + 1, "ts": 1.0}
    calls: list[int] = []

    def state_changes(event: str | None = None) -> list[dict[str, Any]]:
        calls.append(1)
        return [record] if len(calls) >= 3 else []

    cluster.brokers[NEW].state_changes = state_changes  # type: ignore[method-assign]
    assert demo._failover_record(cluster, NEW, EPOCH + 1, 30.0) == record  # type: ignore[arg-type]


# --- the chroot ------------------------------------------------------------------------------


def test_an_external_zookeeper_is_left_without_the_demos_chroot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cluster import zookeeper as zkp

    deleted: list[str] = []
    monkeypatch.setattr(zkp, "chroot_connect_string", lambda base, chroot, **_: base + chroot)
    monkeypatch.setattr(zkp, "delete_chroot", deleted.append)
    with demo._zookeeper(DemoOptions(zookeeper="zk:2181"), tmp_path, lambda _t: None) as c:
        assert c.startswith("zk:2181/zkctl-demo-")
        assert deleted == []
    assert deleted == [c]


def test_only_an_external_zookeeper_gets_the_is_it_running_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cluster import zookeeper as zkp

    def refused(base: str, chroot: str, **_: Any) -> str:
        raise ConnectionRefusedError("refused")

    closed: list[bool] = []
    monkeypatch.setattr(zkp, "chroot_connect_string", refused)
    monkeypatch.setattr(
        zkp,
        "provision",
        lambda **_: SimpleNamespace(connect_string="own:2181", close=lambda: closed.append(True)),
    )
    with (
        pytest.raises(demo.DemoError, match="is it running") as e,
        demo._zookeeper(DemoOptions(zookeeper="zk:2181"), tmp_path, lambda _t: None),
    ):
        pass
    assert str(e.value).startswith("cannot use ZooKeeper at zk:2181 (ConnectionRefusedError")
    with (
        pytest.raises(demo.DemoError) as e,
        demo._zookeeper(DemoOptions(), tmp_path, lambda _t: None),
    ):
        pass
    assert str(e.value) == "cannot use ZooKeeper at own:2181 (ConnectionRefusedError: refused)"
    assert closed == [True]  # the ZooKeeper it started is stopped


# --- the story left on the terminal ----------------------------------------------------------


class NoZk:
    """The source is never started: the view's queue and model are what matter."""

    connected = True


def test_the_full_screen_view_leaves_the_last_60_lines_of_the_story(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from watch import render_curses
    from watch.session import Watcher

    def drew(
        watcher: Watcher, stop: threading.Event | None = None, duration_s: float | None = None
    ) -> str:
        return "done"

    monkeypatch.setattr(render_curses, "run", drew)
    watcher = Watcher(NoZk())  # type: ignore[arg-type]
    said: list[str] = []
    view = demo.DemoView(watcher, "curses", said.append)
    view.start()
    for n in range(70):
        view.note(f"demo line {n}")
    watcher.note("broker 1 resigned as controller of epoch 3 (r)", ts=time.time(), source="log")
    view.close()
    assert not view.quit_requested
    assert len(said) == 60, said
    assert "demo line 10" not in " ".join(said)
    assert "demo line 11" in said[0]
    assert "broker 1 resigned as controller of epoch 3" in said[-1]


def test_a_view_failing_as_it_is_closed_does_not_interrupt_the_cleanup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reader gone while the demo is already stopping: the failure is kept, and the
    main thread, closing everything, is not interrupted again."""
    import signal
    import threading

    from watch import render_plain
    from watch.session import Watcher

    def last_lines_fail(
        watcher: Watcher, say: Callable[[str], None], stop: threading.Event, **_: Any
    ) -> None:
        stop.wait()
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(render_plain, "run", last_lines_fail)
    view = demo.DemoView(Watcher(NoZk()), "plain", lambda _t: None)  # type: ignore[arg-type]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        view.start()
        view.close()  # joins the view's thread: any interruption is raised by now
        time.sleep(0.1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(view.failure, BrokenPipeError)
