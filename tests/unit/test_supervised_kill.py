"""SupervisedBroker.kill when the process dies on its own between a look and the signal.

At the end of an overlapping fault schedule the workers' threads exit, and the brokers they
restarted get the death signal (it follows the starting thread); the schedule's clean-up
then kills every broker. A broker dying between kill's look and its signal failed a CI run
("broker 2 is not running ... killed by SIGKILL") after every check had passed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cluster.supervised import SupervisedBroker


def zombie(pid: int) -> bool:
    """Dead, not yet reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


class DiesAtFirstLook(subprocess.Popen[bytes]):
    """A process that is running at the first poll and dead (not reaped) right after it."""

    looked = False

    def poll(self) -> int | None:
        if not self.looked:
            self.looked = True
            self.send_signal(signal.SIGKILL)
            deadline = time.monotonic() + 10
            while not zombie(self.pid):
                assert time.monotonic() < deadline, "the process did not die"
                time.sleep(0.01)
            return None  # it was running when looked at
        return super().poll()


def test_kill_reaps_a_broker_that_died_since_it_was_looked_at(tmp_path: Path) -> None:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "127.0.0.1:2181")
    proc: Any = DiesAtFirstLook([sys.executable, "-c", "import time; time.sleep(60)"])
    broker.proc = proc
    try:
        broker.kill()
        assert proc.returncode == -signal.SIGKILL
        assert not broker.alive()
        broker.kill()  # again: nothing to do
    finally:
        proc.kill()
        proc.wait(10)


def test_kill_ends_a_running_broker_and_a_never_started_one_is_left_alone(
    tmp_path: Path,
) -> None:
    SupervisedBroker(2, tmp_path / "broker-2", "127.0.0.1:2181").kill()
    broker = SupervisedBroker(1, tmp_path / "broker-1", "127.0.0.1:2181")
    broker.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        broker.kill()
        assert broker.proc.returncode == -signal.SIGKILL
    finally:
        broker.proc.kill()
        broker.proc.wait(10)
