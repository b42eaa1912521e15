"""cluster/local.py at its edges: signal handlers held and put back, the cleanup of a
failed up, brokers slow to go after SIGTERM or SIGKILL, and cluster.json files that
cannot be read. No ZooKeeper or broker runs: processes are a fake table, time a fake
clock where a wait would be long."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cluster import local, processes
from cluster import zookeeper as zkp
from tests.unit.test_local_cluster_processes import FakeProcesses, install_fake
from tests.unit.test_local_launcher import make_cluster

# --- signal handlers ------------------------------------------------------------------------


def _ignore(signum: int, frame: object) -> None:
    pass


def test_the_first_signal_held_is_the_one_raised_after_the_block() -> None:
    """SIGTERM then SIGHUP while a broker's pid is being recorded: once recorded, the
    first (SIGTERM) goes to the handler of before, as Terminated("SIGTERM")."""
    terminate = dict.fromkeys((signal.SIGTERM, signal.SIGHUP), local._raise_terminated)
    inside: list[object] = []

    def hold_two() -> None:
        with local._signals_held():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGHUP)
            time.sleep(0)  # both handled (held) here, inside the block
            inside.append(signal.getsignal(signal.SIGTERM))

    with local._signal_handlers(terminate), pytest.raises(local.Terminated) as raised:
        hold_two()
    assert inside != [local._raise_terminated]
    assert raised.value.signum == signal.SIGTERM
    assert str(raised.value) == "SIGTERM"


def test_handlers_are_put_back_when_the_block_raises() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    inside: list[object] = []

    def fail() -> None:
        with local._signal_handlers({signal.SIGUSR1: _ignore}):
            inside.append(signal.getsignal(signal.SIGUSR1))
            raise RuntimeError("the block failed")

    with pytest.raises(RuntimeError):
        fail()
    assert inside == [_ignore]
    assert signal.getsignal(signal.SIGUSR1) is before


def test_an_ignored_signal_stays_ignored() -> None:
    """SIGHUP ignored (zkctl up under nohup): up's handler must not make a hang-up end it."""
    before = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        with local._signal_handlers({signal.SIGUSR1: local._raise_terminated}):
            inside = signal.getsignal(signal.SIGUSR1)
        after = signal.getsignal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, before)
    assert (inside, after) == (signal.SIG_IGN, signal.SIG_IGN)


def test_outside_the_main_thread_no_handler_is_set_and_the_block_runs() -> None:
    """signal.signal raises ValueError outside the main thread: the block runs unchanged."""
    before = signal.getsignal(signal.SIGUSR1)
    seen: list[object] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with local._signal_handlers({signal.SIGUSR1: _ignore}):
                seen.append(signal.getsignal(signal.SIGUSR1))
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert (errors, seen) == ([], [before])
    assert signal.getsignal(signal.SIGUSR1) is before


def test_a_handler_not_set_from_python_is_put_back_as_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """signal.signal returns None for a handler set outside Python, which cannot be set
    again: SIG_DFL is, not SIG_IGN (that would leave the signal ignored for good)."""
    real = signal.signal
    calls: list[tuple[int, Any]] = []

    def set_handler(sig: int, handler: Any) -> Any:
        calls.append((sig, handler))
        old = real(sig, handler)
        return None if len(calls) == 1 else old

    before = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(signal, "signal", set_handler)
    try:
        with local._signal_handlers({signal.SIGUSR1: _ignore}):
            pass
        after = signal.getsignal(signal.SIGUSR1)
    finally:
        real(signal.SIGUSR1, before)
    assert calls == [(signal.SIGUSR1, _ignore), (signal.SIGUSR1, signal.SIG_DFL)]
    assert after is signal.SIG_DFL


# --- the cleanup of a failed up ---------------------------------------------------------------


def _fail_after_launch(monkeypatch: pytest.MonkeyPatch, launch: Any) -> None:
    """up runs with an external ZooKeeper, brokers launched by ``launch``, and fails in
    its wait for the cluster (unless ``launch`` raises first)."""

    def provision(connect: str | None, **kwargs: Any) -> zkp.ZooKeeper:
        running = zkp.ExternalZooKeeper("127.0.0.1:1")
        kwargs["on_start"](running)
        return running

    def not_ready(*_a: Any, **_k: Any) -> local.ZkView:
        raise local.LocalClusterError("the cluster was not ready")

    monkeypatch.setattr(zkp, "provision", provision)
    monkeypatch.setattr(zkp, "chroot_connect_string", lambda c, name, **_: f"{c}/{name}")
    monkeypatch.setattr(local, "_launch", launch)
    monkeypatch.setattr(local, "_wait_cluster_ready", not_ready)


def test_the_cleanup_ignores_every_signal_and_finds_the_pid_already_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while broker 1 is launched: its pid is in cluster.json before anything is
    stopped (a kill -9 during the cleanup leaves it to `zkctl down`); the cleanup is not
    cut short by SIGINT, SIGTERM or SIGHUP; it records the cluster stopped, and when."""
    directory = tmp_path / ".zkctl"
    during_stop: list[tuple[list[Any], list[Any]]] = []

    def launch(broker: local.BrokerProcess, python: str) -> int:
        signal.raise_signal(signal.SIGTERM)
        time.sleep(0)
        broker.pid = 4_000_000 + broker.id
        return 0

    def stop_brokers(brokers: list[local.BrokerProcess], *_a: Any, **_k: Any) -> dict[int, str]:
        on_disk = json.loads((directory / "cluster.json").read_text())
        handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
        during_stop.append(([b["pid"] for b in on_disk["brokers"]], handlers))
        return {}

    _fail_after_launch(monkeypatch, launch)
    monkeypatch.setattr(local, "stop_brokers", stop_brokers)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    before = signal.signal(signal.SIGTERM, _ignore)
    try:
        started = local.now_ms()
        with pytest.raises(local.Terminated):
            local.up(directory, 2)
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert during_stop == [([4_000_001, None], [signal.SIG_IGN] * 3)]
    assert after is _ignore
    recorded = json.loads((directory / "cluster.json").read_text())
    assert recorded["state"] == "stopped"
    assert recorded["stopped_at"] >= started


@pytest.mark.parametrize("failing", ["stop_brokers", "_teardown"])
def test_a_failing_step_of_the_cleanup_does_not_skip_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """A broker that survives SIGKILL, a ZooKeeper that cannot be stopped: the rest of the
    cleanup still runs, and up fails with its own error, not the cleanup's."""
    directory = tmp_path / ".zkctl"
    done: list[str] = []

    def launch(broker: local.BrokerProcess, python: str) -> int:
        broker.pid = 4_000_000 + broker.id
        return 0

    def step(name: str) -> Any:
        def run(*_a: Any, **_k: Any) -> Any:
            done.append(name)
            if name == failing:
                raise local.LocalClusterError(f"{name} failed")
            return {} if name == "stop_brokers" else []

        return run

    _fail_after_launch(monkeypatch, launch)
    monkeypatch.setattr(local, "stop_brokers", step("stop_brokers"))
    monkeypatch.setattr(local, "_teardown", step("_teardown"))
    with pytest.raises(local.LocalClusterError, match=r"^the cluster was not ready$"):
        local.up(directory, 1)
    assert done == ["stop_brokers", "_teardown"]
    assert json.loads((directory / "cluster.json").read_text())["state"] == "stopped"


# --- brokers slow to go -----------------------------------------------------------------------


@dataclass
class SlowProcesses(FakeProcesses):
    """As FakeProcesses, but a process signalled may take a few looks at its state to go:
    ``term_polls`` after SIGTERM, ``kill_polls`` after SIGKILL (None: it never goes, as
    a process in uninterruptible sleep)."""

    term_polls: dict[int, int] = field(default_factory=dict)
    kill_polls: dict[int, int | None] = field(default_factory=dict)
    dying: dict[int, int] = field(default_factory=dict)

    def kill(self, pid: int, sig: int) -> None:
        slow: dict[int, int | None] = {}
        if sig == signal.SIGTERM:
            slow = dict(self.term_polls)
        elif sig == signal.SIGKILL:
            slow = self.kill_polls
        if pid in self.table and pid in slow:
            self.signals.append((pid, signal.Signals(sig)))
            polls = slow[pid]
            if polls is not None:
                self.dying[pid] = polls
            return
        super().kill(pid, sig)

    def state(self, pid: int) -> str | None:
        if pid in self.dying:
            self.dying[pid] -= 1
            if self.dying[pid] <= 0:
                del self.dying[pid]
                del self.table[pid]
        return super().state(pid)


class FakeClock:
    """time for cluster/local.py: sleeping only moves monotonic() on."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> SlowProcesses:
    fake = SlowProcesses()
    install_fake(monkeypatch, fake)
    monkeypatch.setattr(local, "time", FakeClock())
    return fake


def _broker(tmp_path: Path, fake: FakeProcesses, pid: int = 10) -> local.BrokerProcess:
    broker = local.BrokerProcess(1, "127.0.0.1", 9092, tmp_path / "broker-1", pid=pid)
    fake.add(pid, broker.properties)
    return broker


def test_a_broker_that_takes_a_while_after_its_sigterm_is_stopped_not_killed(
    tmp_path: Path, slow: SlowProcesses
) -> None:
    broker = _broker(tmp_path, slow)
    slow.term_polls[10] = 5
    assert local.stop_brokers([broker], timeout=30) == {1: "stopped"}
    assert [sig for _pid, sig in slow.signals] == [signal.SIGTERM, signal.SIGCONT]


def test_a_killed_broker_is_waited_for_until_gone(tmp_path: Path, slow: SlowProcesses) -> None:
    """Its SIGTERM ignored, SIGKILLed: it takes a moment to go, which is no failure."""
    broker = _broker(tmp_path, slow)
    slow.ignores_term.add(10)
    slow.kill_polls[10] = 5
    assert local.stop_brokers([broker], timeout=30) == {1: "killed"}
    assert 10 not in slow.table


def test_a_broker_that_survives_sigkill_is_an_error(tmp_path: Path, slow: SlowProcesses) -> None:
    broker = _broker(tmp_path, slow)
    slow.ignores_term.add(10)
    slow.kill_polls[10] = None
    with pytest.raises(local.LocalClusterError, match=r"^could not stop broker\(s\) 1 \(pid 10\)"):
        local.stop_brokers([broker], timeout=30)
    assert [sig for _pid, sig in slow.signals] == [signal.SIGTERM, signal.SIGCONT, signal.SIGKILL]


@pytest.mark.parametrize("polls", [5, None])
def test_broker_kill_waits_for_the_broker_to_go(
    tmp_path: Path, slow: SlowProcesses, polls: int | None
) -> None:
    directory = tmp_path / "c"
    cluster = make_cluster(directory)
    cluster.brokers[0].pid = 11
    slow.add(11, cluster.brokers[0].properties)
    slow.kill_polls[11] = polls
    local.save(cluster)
    if polls is None:
        with pytest.raises(local.LocalClusterError, match="survived SIGKILL"):
            local.broker_kill(directory, 1)
    else:
        assert local.broker_kill(directory, 1) is True
        assert 11 not in slow.table


def test_only_a_sigstop_waits_for_the_broker_to_be_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`zkctl broker pause` returns once the broker is paused (state T), not before."""
    fake = install_fake(monkeypatch)
    waited: list[int] = []
    monkeypatch.setattr(processes, "wait_stopped", lambda pid, timeout=10.0: waited.append(pid))
    broker = _broker(tmp_path, fake)
    assert local.signal_broker(broker, signal.SIGSTOP)
    assert waited == [10]
    assert local.signal_broker(broker, signal.SIGCONT)
    assert local.signal_broker(broker, signal.SIGTERM)
    assert waited == [10]


def test_the_cleanup_of_a_failed_up_gives_its_brokers_a_controlled_shutdown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow: SlowProcesses
) -> None:
    """A broker takes a moment to shut down after its SIGTERM: it is waited for, not
    SIGKILLed at once."""

    def launch(broker: local.BrokerProcess, python: str) -> int:
        broker.pid = 4_000_000 + broker.id
        slow.add(broker.pid, broker.properties)
        slow.term_polls[broker.pid] = 5
        return 0

    _fail_after_launch(monkeypatch, launch)
    monkeypatch.setattr(local, "_teardown", lambda *a, **k: [])
    with pytest.raises(local.LocalClusterError, match="not ready"):
        local.up(tmp_path / ".zkctl", 1)
    assert slow.signals == [(4_000_001, signal.SIGTERM), (4_000_001, signal.SIGCONT)]
    assert slow.table == {}


# --- cluster.json that cannot be read -------------------------------------------------------


def _valid(directory: Path) -> dict[str, Any]:
    return make_cluster(directory).to_dict()


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(lambda d: b"[]", id="not-an-object"),
        pytest.param(lambda d: json.dumps({**d, "brokers": [1]}).encode(), id="broker-no-object"),
        pytest.param(
            lambda d: json.dumps({k: v for k, v in d.items() if k != "connect_string"}).encode(),
            id="key-missing",
        ),
        pytest.param(
            lambda d: json.dumps(d).replace('"created_at": 1', '"created_at": 1e400', 1).encode(),
            id="infinite-int",
        ),
        pytest.param(lambda d: b"[" * 100_000, id="nested-too-deep"),
        pytest.param(
            lambda d: json.dumps({**d, "python": "py"}).encode().replace(b'"py"', b'"p\xffy"'),
            id="not-utf-8",
        ),
    ],
)
def test_a_cluster_file_that_is_no_cluster_is_an_error_that_says_so(
    tmp_path: Path, content: Any
) -> None:
    directory = tmp_path / "c"
    data = _valid(directory)
    (directory / "cluster.json").write_bytes(content(data))
    with pytest.raises(local.LocalClusterError, match="is not a valid cluster file"):
        local.load(directory)


def test_an_unreadable_cluster_file_is_an_error_that_says_so(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    (directory / "cluster.json").mkdir(parents=True)
    with pytest.raises(local.LocalClusterError, match=r"^cannot read .*cluster\.json: "):
        local.load(directory)


@pytest.mark.parametrize("original_left", [True, False])
def test_a_moved_cluster_file_says_to_move_the_directory_back_only_when_gone(
    tmp_path: Path, original_left: bool
) -> None:
    original = tmp_path / "a"
    _valid(original)
    copy = tmp_path / "b"
    copy.mkdir()
    (copy / "cluster.json").write_bytes((original / "cluster.json").read_bytes())
    if not original_left:
        shutil.rmtree(original)
    with pytest.raises(local.MovedClusterError) as raised:
        local.load(copy)
    assert ("move the directory back first" in str(raised.value)) is not original_left
