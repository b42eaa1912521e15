"""`zkctl demo`: a scripted run names every controller change and leaves nothing running."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster import processes
from tests.integration.harness import wait_for

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


def start_demo(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKCTL_ZOOKEEPER", None)  # the demo provisions its own, as on a fresh machine
    proc = subprocess.Popen(
        [sys.executable, "-m", "zkctl", "--dir", str(tmp_path), "demo", "--interval", "1", *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    processes.track_process(proc.pid, "zkctl")
    return proc


def test_scripted_demo_names_every_controller_change_and_leaves_nothing(tmp_path: Path) -> None:
    proc = start_demo(tmp_path, "--duration", "25")
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    elected = [int(e) for e in re.findall(r"won the election: controller epoch (\d+)", output)]
    took_over = re.findall(r"broker (\d+) took over as controller, epoch (\d+)", output)
    assert len(took_over) >= 2, output
    # Every takeover the demo reports is an election the brokers logged, epochs in order.
    assert elected == sorted(elected)
    for _, epoch in took_over:
        assert int(epoch) in elected
    for fault in ("SIGKILL", "controlled shutdown"):
        assert fault in output
    assert processes_mentioning(str(tmp_path)) == []


def test_interrupted_demo_leaves_nothing_running(tmp_path: Path) -> None:
    proc = start_demo(tmp_path)
    assert proc.stdout is not None
    # Wait until it is in the middle of things: brokers up and a failover under way.
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        if "--- failover 1" in line or time.monotonic() > deadline:
            break
    assert processes_mentioning(str(tmp_path)), "the demo should be running brokers by now"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    wait_for(
        lambda: processes_mentioning(str(tmp_path)) == [],
        30,
        "every process the demo started to exit",
    )
