"""`zkctl demo`: a scripted run names every controller change, the full-screen view shows the
failovers, and nothing the demo started keeps running after it ends or is interrupted."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

from admin import topics as admin_topics
from cluster import demo, processes
from cluster.supervised import SupervisedBroker, SupervisedCluster
from tests.integration.harness import wait_for
from tests.integration.test_watch import Tmux

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            argv = processes.cmdline(int(entry.name)) or []
            if any(text in a for a in argv) and processes.is_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


# `python -m zkctl` with Ctrl-C's default handling. Tests run from a background job (say
# `make test &` in a script) inherit SIGINT ignored, as POSIX has it, and Python keeps an
# ignored SIGINT ignored: the demo would never hear the tests' Ctrl-C.
_ZKCTL_WITH_CTRL_C = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('zkctl', run_name='__main__')"
)


@contextlib.contextmanager
def running_demo(tmp_path: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """The demo, killed (by its pid) if still running when the test ends, failed or not."""
    proc = start_demo(tmp_path, *args)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def lines_until(
    proc: subprocess.Popen[Any], enough: Callable[[list[str]], bool], timeout_s: float
) -> list[str]:
    """The whole lines ``proc`` writes until ``enough`` of them, its end or ``timeout_s``:
    each read waits only as long as is left, so a silent demo cannot hang the test."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    data = b""
    lines: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not enough(lines) and (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
            lines = data.decode(errors="replace").split("\n")[:-1]
    return lines


def start_demo(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKCTL_ZOOKEEPER", None)  # the demo provisions its own, as on a fresh machine
    zkctl = [sys.executable, "-c", _ZKCTL_WITH_CTRL_C, "--dir", str(tmp_path)]
    proc = subprocess.Popen(
        [*zkctl, "demo", "--interval", "1", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    processes.track_process(proc.pid, "zkctl")
    return proc


def logged_elections(tmp_path: Path) -> list[tuple[int, int]]:
    """(broker, epoch) of every election the demo's brokers logged, in epoch order."""
    elections = set()
    for log in (tmp_path / "demo").glob("run-*/broker-*/data/state-change.log*"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record["event"] == "controller_elected":
                elections.add((int(record["broker"]), int(record["controller_epoch"])))
    return sorted(elections, key=lambda be: be[1])


@pytest.mark.timeout(420)  # the demo's own bound, 300 s, then its cleanup
def test_scripted_demo_names_every_controller_change_and_leaves_nothing(tmp_path: Path) -> None:
    with running_demo(tmp_path, "--duration", "25") as proc:
        output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    lines = output.splitlines()
    # Provisioning progress, then the timeline as plain lines, then the last word.
    timeline = [line for line in lines if not line.startswith("[zookeeper]")]
    assert timeline[-1].startswith("demo over after "), output
    for line in timeline[:-1]:
        assert re.match(r"\d\d:\d\d:\d\d\.\d{3}  (zk  |demo|log )  \S", line), line

    # Every election the brokers made is named by the watch, once, in order; and every
    # controller but the last is seen resigning.
    elected = [
        (int(b), int(e))
        for b, e in re.findall(r"  zk    broker (\d+) elected controller, epoch (\d+)", output)
    ]
    assert elected == logged_elections(tmp_path), output
    resigned = [
        (int(b), int(e))
        for b, e in re.findall(r"  zk    controller resigned: broker (\d+) \(epoch (\d+)\)", output)
    ]
    assert resigned == elected[:-1], output
    # The demo's own account agrees with it.
    took_over = [
        (int(b), int(e))
        for b, e in re.findall(r"  demo  broker (\d+) took over as controller, epoch (\d+)", output)
    ]
    assert len(took_over) >= 2, output
    assert set(took_over) <= set(elected)
    assert "SIGKILL the controller" in output
    assert "controlled shutdown" in output
    if len(took_over) >= 3:
        assert "SIGSTOP the controller" in output
        assert "resuming the zombie" in output
        assert re.search(r"  log   broker \d+ resigned as controller of epoch \d+", output)
    # The producer and consumer rode through the failovers, and nothing acknowledged was lost.
    assert "a producer (acks=all" in output
    assert "LOST" not in output, output
    checked = re.search(r"every one of the ([\d,]+) acknowledged messages was read back", output)
    assert checked is not None, output
    assert int(checked.group(1).replace(",", "")) > 0
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.timeout(420)  # the demo's own bound, 300 s, then its cleanup
def test_a_controller_cut_off_from_zookeeper_in_the_demo(tmp_path: Path) -> None:
    # A --duration shorter than any start-up: the demo still shows one failover (with 5 s
    # a loaded machine's start-up ran out the time before the first one).
    with running_demo(tmp_path, "--faults", "cut", "--duration", "1") as proc:
        output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    # Cut off, the controller goes on running; another takes over, it resigns on its own
    # (never told its session expired) and registers again once the link heals.
    assert "cut the controller off from ZooKeeper" in output, output
    old = re.search(r"--- failover 1: .*: broker (\d+), epoch (\d+) ---", output)
    assert old is not None, output
    old_id, old_epoch = old.groups()
    assert re.search(r"  demo  broker \d+ took over as controller, epoch \d+", output), output
    assert f"broker {old_id} still runs, cut off" in output, output
    assert re.search(
        rf"  log   broker {old_id} resigned as controller of epoch {old_epoch} \(ZooKeeper"
        " unreachable",
        output,
    ), output
    assert f"healing broker {old_id}'s link" in output, output
    assert "LOST" not in output, output
    assert re.search(r"every one of the [\d,]+ acknowledged messages was read back", output)
    assert processes_mentioning(str(tmp_path)) == []


def test_interrupted_demo_leaves_nothing_running(tmp_path: Path) -> None:
    with running_demo(tmp_path) as proc:
        # Wait until it is in the middle of things: brokers up and a failover under way.
        lines_until(proc, lambda lines: any("--- failover 1" in line for line in lines), 120)
        assert processes_mentioning(str(tmp_path)), "the demo should be running brokers by now"
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            # Whether SIGINT reached it: blocked, ignored or caught (masks in hex).
            status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            signals = [line for line in status if line.startswith("Sig")]
            proc.send_signal(signal.SIGUSR1)  # zkctl prints every thread's stack
            time.sleep(2)
            proc.kill()
            out, _ = proc.communicate(timeout=30)
            pytest.fail(
                f"the demo was still running 120 s after SIGINT ({signals}); its output ends:\n"
                f"{out[-12000:]}"
            )
        wait_for(
            lambda: processes_mentioning(str(tmp_path)) == [],
            30,
            "every process the demo started to exit",
        )


def test_demo_ends_and_cleans_up_when_its_reader_goes_away(tmp_path: Path) -> None:
    """`zkctl demo | head`: once the pipe closes, the demo stops everything and ends."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKCTL_ZOOKEEPER", None)
    argv = [sys.executable, "-m", "zkctl", "--dir", str(tmp_path), "demo", "--plain"]
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        proc = subprocess.Popen(
            [*argv, "--no-clients", "--interval", "1"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    processes.track_process(proc.pid, "zkctl")
    assert proc.stdout is not None
    try:

        def timeline(lines: list[str]) -> int:  # it has begun (the view's thread writes it)
            return sum("  demo  " in line for line in lines)

        seen = timeline(lines_until(proc, lambda lines: timeline(lines) >= 2, 120))
        assert seen >= 2, (tmp_path / "stderr.txt").read_text()[-2000:]
        proc.stdout.close()  # as `head` exits
        expect_the_demo_and_its_processes_gone(proc, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def expect_the_demo_and_its_processes_gone(proc: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """Once its reader went away: the demo ends, and every process it started with it."""
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        err = (tmp_path / "stderr.txt").read_text()[-2000:]
        pytest.fail(f"the demo still ran 60 s after its reader went away; stderr: {err}")
    wait_for(
        lambda: processes_mentioning(str(tmp_path)) == [],
        30,
        "every process the demo started to exit",
    )


def test_demo_ends_when_its_reader_goes_away_between_failovers(tmp_path: Path) -> None:
    """`zkctl demo --plain --interval 600 | head`, the reader gone once the first failover
    is over: nothing is written for ten minutes, yet the demo stops everything and ends."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKCTL_ZOOKEEPER", None)
    argv = [sys.executable, "-m", "zkctl", "--dir", str(tmp_path), "demo", "--plain"]
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        proc = subprocess.Popen(
            [*argv, "--no-clients", "--interval", "600", "--faults", "stop"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    processes.track_process(proc.pid, "zkctl")
    assert proc.stdout is not None
    try:
        seen = lines_until(proc, lambda lines: any("took over" in x for x in lines), 180)
        assert any("took over" in x for x in seen), (tmp_path / "stderr.txt").read_text()[-2000:]
        # The restarted broker back, the ISRs full, its leaderships given back (the
        # preferred leader election, every leader.imbalance.check.interval.seconds=10):
        # then nothing to write until the next failover. Quiet for 12 s: it has begun.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and lines_until(proc, bool, 12):
            pass
        proc.stdout.close()  # as `head` exits, with nothing more to write for minutes
        expect_the_demo_and_its_processes_gone(proc, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def test_the_takeover_time_is_until_the_new_controller_finished_its_failover(
    zk_connect: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`broker N took over as controller, epoch E, X s after the graceful stop`: X is
    from the stop to the new controller's `controller_failover` record, not to when the
    demo happened to see it (broker-status.json, rewritten once a second)."""
    cluster = SupervisedCluster(zk_connect, tmp_path / "c", [1, 2], dict(demo.DEFAULT_SETTINGS))
    stopped_at: dict[str, float] = {}
    terminate = SupervisedBroker.terminate

    def timed_terminate(self: SupervisedBroker) -> None:
        stopped_at["t"] = time.time()
        terminate(self)

    monkeypatch.setattr(SupervisedBroker, "terminate", timed_terminate)
    watcher = MagicMock()
    rows = []
    try:
        cluster.start()
        admin_topics.create_topic(
            cluster.zk,
            admin_topics.CreateTopicRequest(demo.DEMO_TOPIC, partitions=2, replication_factor=2),
        )
        cluster.wait_topic_online(demo.DEMO_TOPIC)
        for cycle in (1, 2, 3):
            said: list[str] = []
            demo._failover(cluster, {}, "stop", cycle, said.append, watcher)
            line = next(s for s in said if "took over as controller" in s)
            found = re.search(
                r"broker (\d+) took over as controller, epoch (\d+), ([\d.]+) s", line
            )
            assert found is not None, line
            new_id, epoch, claimed = int(found[1]), int(found[2]), float(found[3])
            done = [
                r
                for r in cluster[new_id].state_changes("controller_failover")
                if r["controller_epoch"] == epoch
            ]
            rows.append((cycle, claimed, round(done[0]["ts"] / 1000 - stopped_at["t"], 3)))
        # The claim is rounded to 0.1 s; the stop is timed a moment before its signal.
        assert all(abs(claimed - actual) <= 0.1 for _, claimed, actual in rows), rows
    finally:
        cluster.close()


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    try:
        yield t
    finally:
        t.close()


def test_demo_in_a_terminal_shows_the_view_and_ctrl_c_leaves_nothing(
    tmp_path: Path, tmux: Tmux
) -> None:
    tmux.start(
        [sys.executable, "-m", "zkctl", "--dir", str(tmp_path), "demo", "--interval", "1"],
        {"PYTHONPATH": str(ROOT)},
    )
    screen = tmux.wait_screen(
        lambda s: (
            "zkctl demo: failover 1" in s
            and re.search(r"CONTROLLER  broker \d+   epoch \d+", s) is not None
            and "demo-5" in s
        ),
        "the watch view with the first failover under way",
        timeout=120,
    )
    assert "BROKERS  " in screen
    assert "TIMELINE" in screen
    screen = tmux.wait_screen(
        lambda s: re.search(r"demo  broker \d+ took over as controller, epoch 2", s) is not None,
        "the first takeover in the view's timeline",
        timeout=120,
    )
    assert re.search(r"zk    broker \d+ elected controller, epoch 2", screen), screen
    tmux("send-keys", "-t", tmux.session, "C-c")
    screen = tmux.wait_screen(lambda s: "EXIT=" in s, "the demo to end", timeout=120)
    assert "EXIT=130" in screen  # interrupted
    # The view is gone; the story of the controller is left on the terminal.
    assert re.search(r"zk    broker \d+ elected controller, epoch 2", screen), screen
    tmux.close()  # its server's command line names tmp_path too
    wait_for(
        lambda: processes_mentioning(str(tmp_path)) == [],
        30,
        "every process the demo started to exit",
    )
