"""Processes this project starts (ZooKeeper servers, brokers): spawning, tracking, /proc.

Every process is started through `spawn`: either as a child that dies with us (tests,
benchmarks, `zkctl demo`) or detached so it outlives the CLI (`zkctl up`). Each one is
recorded with a marker that must appear in its command line, so a reused pid is never
mistaken for ours; processes are only ever signalled by pid, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

# Run the real program through this shim when it must die with us: the shim sets
# PR_SET_PDEATHSIG (kept across exec) and execs the program, so the recorded pid is the
# program's. A shim rather than Popen(preexec_fn=...): preexec_fn is unsafe once threads
# run (kazoo starts threads). Linux delivers the signal when the *thread* that started the
# child exits, so start children from a long-lived thread.
DEATHSIG_SHIM = (
    "import ctypes, os, sys\n"
    "if ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0) != 0:\n"  # PR_SET_PDEATHSIG, SIGKILL
    "    sys.exit('prctl(PR_SET_PDEATHSIG) failed')\n"
    "if os.getppid() != int(sys.argv[1]):\n"  # the starter died before prctl took effect
    "    sys.exit('parent already exited')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)

_TRACKED: list[tuple[int, str]] = []
_TRACKED_LOCK = threading.Lock()


def spawn(
    argv: Sequence[str],
    *,
    out: IO[bytes],
    cwd: Path | str,
    marker: str,
    detached: bool,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr to `out`, and track it under `marker`.

    Detached: a new session (no terminal, no Ctrl-C or SIGHUP from ours), outliving us.
    Otherwise: its own process group (a terminal's Ctrl-C reaches only us, and we stop it
    in order) and the death signal if we die first.
    """
    child_env = None if env is None else dict(env)
    if detached:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=child_env,
            start_new_session=True,
        )
    else:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", DEATHSIG_SHIM, str(os.getpid()), *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=child_env,
            process_group=0,
        )
    track_process(proc.pid, marker)
    return proc


def track_process(pid: int, marker: str) -> None:
    """Record a process this Python process started; `marker` must be in its command line."""
    with _TRACKED_LOCK:
        _TRACKED.append((pid, marker))


def started_pids() -> list[int]:
    """Pids of every process recorded by `track_process`, running or not."""
    with _TRACKED_LOCK:
        return [pid for pid, _ in _TRACKED]


def leftover_processes() -> list[int]:
    """Tracked pids that are still running (and still are the process we started)."""
    with _TRACKED_LOCK:
        tracked = list(_TRACKED)
    return [
        pid
        for pid, marker in tracked
        if is_alive(pid) and (argv := cmdline(pid)) and any(marker in arg for arg in argv)
    ]


def kill_leftover_processes() -> list[int]:
    """SIGKILL every leftover tracked process; return their pids (empty when all is clean)."""
    leftovers = leftover_processes()
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # a stopped process must run to die
            os.kill(pid, signal.SIGKILL)
        wait_gone(pid, None, 10.0)
    return leftovers


def cmdline(pid: int) -> list[str] | None:
    """argv of `pid`; None when there is no such process, [] for a zombie."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def state(pid: int) -> str | None:
    """The state letter in /proc/<pid>/stat (R, S, T = stopped, Z, ...); None if absent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name in parentheses may contain spaces; the state follows the last ')'.
    return stat.rsplit(")", 1)[1].split()[0]


def descendants(root: int) -> list[int]:
    """The pids of `root`'s children, their children and so on (from /proc; a process that
    ends meanwhile is left out, one that starts meanwhile may be)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name in parentheses may contain spaces; ppid is the second field after.
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return sorted(found)


def is_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    return state(pid) not in (None, "Z", "X")


def wait_gone(pid: int, proc: subprocess.Popen[bytes] | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None:
            if proc.poll() is not None:
                return True
        # Without a Popen we never waitpid(): the pid may by now be another child's, whose
        # exit status is not ours to take. A zombie already counts as gone.
        elif not is_alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def wait_stopped(pid: int, timeout: float = 10.0) -> bool:
    """After SIGSTOP: wait until the kernel shows `pid` stopped (signals are asynchronous,
    so without this a "paused" process may still answer for a moment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state(pid) in ("T", "t", None, "Z", "X"):
            return True
        time.sleep(0.005)
    return False
