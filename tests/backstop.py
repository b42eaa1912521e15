"""A backstop behind pytest-timeout: a test still running `GRACE_S` seconds after its own
timeout ends the whole run, with every thread's stack on stderr and this run's processes
killed, instead of hanging until CI's limit.

pytest-timeout's timer (SIGALRM) fires once and raises in the main thread. That ends a
hung test only if nothing swallows the exception and no cleanup on its way out blocks
again: PySpark's SparkContext, for one, calls into its JVM from `except BaseException`
when its start is interrupted, and a JVM that hung starting answers that call never.
A CI run went silent at the first Spark test until CI's limit (2026-12-07), with no
stack to say why.

The watchdog is a thread of its own: it needs the GIL, which a main thread blocked in a
socket, a lock or a child's exit has released. For a main thread that holds the GIL
(a C loop that never releases it), faulthandler's C watchdog follows, after the grace
again (at most `LAST_RESORT_S`); it can only dump the stacks and exit (code 1), and
leaves the processes behind.

A run that CI ends at its limit gets SIGTERM: every thread's stack is written then too
(faulthandler, registered again at each test's start, since tests that set a SIGTERM
handler of their own and put back what `signal` thought was there leave SIG_DFL), so
a run cut off shows where it was.

The conftest passes the hooks on (`from tests.backstop import ...`). ZKCTL_TEST_GRACE_S
sets the grace (its own tests make it short).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import signal
import threading
import time
from collections.abc import Generator

import pytest

from cluster import processes
from zkctl.common import positive_float

GRACE_S = 120.0
LAST_RESORT_S = 30.0
EXIT_CODE = 3  # pytest's "internal error": the run did not end as a run of tests ends


def grace_s() -> float:
    """The grace after a test's timeout: ZKCTL_TEST_GRACE_S, else `GRACE_S`."""
    raw = os.environ.get("ZKCTL_TEST_GRACE_S")
    if raw is None:
        return GRACE_S
    try:
        return positive_float(raw)
    except argparse.ArgumentTypeError as e:
        raise pytest.UsageError(f"ZKCTL_TEST_GRACE_S={raw!r}: {e}") from None


def timeout_of(item: pytest.Item) -> float:
    """The test's pytest-timeout: its `timeout` mark, else --timeout or the ini's; 0: none."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        if value is not None:
            return float(value)
    option = item.config.getoption("timeout", None)
    if option is not None:
        return float(option)
    try:
        return float(item.config.getini("timeout") or 0)
    except ValueError:  # pytest-timeout is not loaded (-p no:timeout): no timeout
        return 0.0


class Watchdog:
    """One thread for the run: armed with a deadline at each test's start, disarmed at
    its end; a deadline passed ends the process (see the module's docstring)."""

    def __init__(self, stderr_fd: int) -> None:
        self._fd = stderr_fd
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._test = ""
        self._thread = threading.Thread(target=self._run, name="test-backstop", daemon=True)
        self._thread.start()

    def arm(self, test: str, seconds: float | None) -> None:
        faulthandler.unregister(signal.SIGTERM)
        faulthandler.register(signal.SIGTERM, file=self._fd, all_threads=True, chain=True)
        if seconds is None:
            return
        with self._cond:
            self._deadline = time.monotonic() + seconds
            self._test = test
            self._cond.notify()
        last_resort = seconds + min(grace_s(), LAST_RESORT_S)
        faulthandler.dump_traceback_later(last_resort, exit=True, file=self._fd)

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        with self._cond:
            self._deadline = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._fire(self._test)

    def _fire(self, test: str) -> None:
        self._say(
            f"\n\nbackstop: {test} is still running {grace_s():g} s after its timeout;"
            " every thread's stack follows, then the run's processes are killed and it"
            " ends (exit code 3)\n"
        )
        faulthandler.dump_traceback(file=self._fd, all_threads=True)
        killed = []
        with contextlib.suppress(Exception):
            killed += processes.kill_leftover_processes()
        for pid in processes.descendants(os.getpid()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)  # a stopped process must run to die
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        self._say(f"backstop: killed {sorted(set(killed))}\n")
        os._exit(EXIT_CODE)

    def _say(self, text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(self._fd, text.encode())


_watchdog: list[Watchdog] = []


def pytest_configure(config: pytest.Config) -> None:
    # fd 2 here is still the terminal's (capturing replaces it per test); keep a copy.
    grace_s()  # a bad ZKCTL_TEST_GRACE_S stops the run here, not at the first test
    _watchdog.append(Watchdog(os.dup(2)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    timeout = timeout_of(item)
    if not _watchdog:
        yield
        return
    # No timeout (a debugging session): no deadline, only the stacks on SIGTERM.
    _watchdog[0].arm(item.nodeid, timeout + grace_s() if timeout > 0 else None)
    try:
        yield
    finally:
        _watchdog[0].disarm()
