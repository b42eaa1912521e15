"""The backstop behind pytest-timeout (tests/backstop.py), on runs of pytest of their own:
a test that outlives its timeout by the grace ends the run, with its stack shown and the
processes it started killed; a run whose timeouts work is left alone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cluster import processes

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import time
from tests.backstop import pytest_configure, pytest_runtest_protocol

def pytest_unconfigure(config):
    time.sleep(3)  # between tests and after the last, the backstop is disarmed
"""

# The first test's timeout fires and is swallowed, as a cleanup that blocks again would
# leave it; the child it started must not outlive the run.
SWALLOWED = """
import subprocess, sys, time
from pathlib import Path
import pytest

@pytest.mark.timeout(1)
def test_swallows_its_timeout():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path("child.pid").write_text(str(child.pid))
    while True:
        try:
            time.sleep(60)
        except BaseException:
            pass

def test_never_reached():
    pass
"""

# A C loop that holds the GIL: neither pytest-timeout's handler nor the watchdog thread
# runs; faulthandler's C thread ends it.
GIL_HELD = """
import itertools
import pytest

@pytest.mark.timeout(1)
def test_holds_the_gil():
    sum(itertools.repeat(1, 10**15))
"""

# Timeouts that work: the run goes on and ends as a run of tests does.
WORKING = """
import time
import pytest

@pytest.mark.timeout(1)
def test_times_out():
    time.sleep(30)

@pytest.mark.timeout(10)
def test_slower_than_the_first_ones_backstop():
    time.sleep(2.5)

@pytest.mark.timeout(1)
def test_quick():  # the conftest's 3 s after it are past its backstop's deadline
    pass
"""


# A run cut off (CI's limit): SIGTERM while a test runs. The test before it does what
# tests of signal handling do: a handler of its own, then back what `signal` says was there.
TERMINATED = """
import signal, time
from pathlib import Path

def test_puts_back_what_signal_says_was_there():
    before = signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGTERM, before)

def test_cut_off():
    Path("started").write_text("")
    time.sleep(60)
"""


def start(tmp_path: Path, tests: str, grace: str = "1") -> subprocess.Popen[str]:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(tests))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ZKCTL_TEST_GRACE_S": grace}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-q", "test_inner.py"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def finish(inner: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = inner.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        inner.kill()
        out, err = inner.communicate()
    return subprocess.CompletedProcess(inner.args, inner.returncode, out, err)


def run(tmp_path: Path, tests: str, grace: str = "1") -> subprocess.CompletedProcess[str]:
    return finish(start(tmp_path, tests, grace))


def test_a_swallowed_timeout_ends_the_run_with_the_stack_and_its_processes_killed(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, SWALLOWED)
    child = int((tmp_path / "child.pid").read_text())
    assert done.returncode == 3, done.stdout + done.stderr
    assert "backstop: test_inner.py::test_swallows_its_timeout is still running 1 s" in (
        done.stderr
    )
    assert re.search(r'test_inner.py", line \d+ in test_swallows_its_timeout', done.stderr)
    assert f"backstop: killed [{child}]" in done.stderr
    assert processes.wait_gone(child, None, 10), processes.state(child)
    assert "test_never_reached" not in done.stdout


def test_a_test_that_holds_the_gil_is_ended_by_faulthandler(tmp_path: Path) -> None:
    done = run(tmp_path, GIL_HELD)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Timeout (0:00:03)!" in done.stderr
    assert re.search(r'test_inner.py", line \d+ in test_holds_the_gil', done.stderr)


def test_timeouts_that_work_are_left_alone(tmp_path: Path) -> None:
    done = run(tmp_path, WORKING)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 2 passed" in done.stdout
    assert "Timeout" in done.stdout
    assert "backstop:" not in done.stdout + done.stderr


@pytest.mark.parametrize("grace", ["soon", "0", "-5", "nan", "inf"])
def test_a_bad_grace_stops_the_run_at_its_start(tmp_path: Path, grace: str) -> None:
    done = run(tmp_path, WORKING, grace=grace)
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"ZKCTL_TEST_GRACE_S={grace!r}" in done.stderr
    assert "test_times_out" not in done.stdout


def test_a_run_cut_off_by_sigterm_shows_where_it_was(tmp_path: Path) -> None:
    inner = start(tmp_path, TERMINATED)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and inner.poll() is None:
        assert time.monotonic() < deadline, "the inner run never reached test_cut_off"
        time.sleep(0.05)
    inner.send_signal(signal.SIGTERM)
    done = finish(inner)
    assert done.returncode == -signal.SIGTERM, done.stdout + done.stderr
    assert re.search(r'test_inner.py", line \d+ in test_cut_off', done.stderr), done.stderr
